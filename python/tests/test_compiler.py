"""flashmlir.compile: the pybind11 bindings over the C++ compiler (CPU only:
compile, inspect stages, cache, errors)."""
import os
import subprocess

import pytest

from conftest import ROOT


@pytest.mark.parametrize("head_dim,dtype,causal,arch", [
    (64, "f16", False, "sm_90a"), (128, "bf16", True, "sm_80"),
    (256, "f16", True, "sm_90a")])
def test_compile_and_inspect(flashmlir, head_dim, dtype, causal, arch):
    k = flashmlir.compile(head_dim=head_dim, causal=causal, dtype=dtype,
                          arch=arch)
    assert k.metadata["head_dim"] == head_dim
    assert k.metadata["dtype"] == dtype
    assert k.metadata["causal"] is causal
    assert k.metadata["kernel"] == k.name
    assert k.cubin[:4] == b"\x7fELF"
    assert f".target {arch}" in k.ptx
    kernel_ir = k.mlir("kernel")
    if arch == "sm_80":
        assert "mma.sync.aligned.m16n8k16" in k.mlir("ptx")
        assert "nvvm.mma.sync" in kernel_ir and "nvvm.ldmatrix" in kernel_ir
    else:
        # FlashAttention-3 on sm_90a: TMA loads and wgmma.
        assert "wgmma.mma_async.sync.aligned.m64n" in k.mlir("ptx")
        assert "cp.async.bulk.tensor.4d" in k.mlir("ptx")  # rank-4 maps
        assert "nvvm.wgmma.mma_async" in kernel_ir
        assert "nvvm.setmaxregister" in kernel_ir
    assert "gpu.launch_func" in k.mlir("host")
    assert "fa.attention" in k.mlir("attention")
    with pytest.raises(ValueError, match="unknown stage"):
        k.mlir("llvm")


def test_compile_is_cached(flashmlir):
    before = flashmlir.compiler.cache_info().hits
    a = flashmlir.compile(head_dim=64, causal=True)
    b = flashmlir.compile(head_dim=64, causal=True)
    assert flashmlir.compiler.cache_info().hits >= before + 1
    assert a.cubin == b.cubin


def test_fa4_options_reach_the_kernel(flashmlir):
    k = flashmlir.compile(head_dim=128, rescale_threshold=-1,
                          poly_exp2_degree=3, poly_exp2_period=4)
    assert k.name.endswith("_px3p4")
    assert k.metadata["exp2_poly_degree"] == 3
    # The software exp2, its floor on the FMA pipe (no FRND/F2I).
    assert "llvm.nvvm.add.rm.f" in k.mlir("kernel")
    assert flashmlir.compile(head_dim=128).name.endswith("_cr8")


@pytest.mark.parametrize("kwargs,message", [
    (dict(head_dim=80), "head dim must be a multiple of 32 up to 256 on sm_90a \\(wgmma\\), got 80"),
    (dict(head_dim=64, dtype="f32"),
     "dtype must be one of the strings f16, bf16 or e4m3"),
    (dict(head_dim=64, arch="sm_75"),
     "arch must be one of the strings sm_80, sm_90a or sm_100a"),
    (dict(head_dim=64, block_r=32, arch="sm_80"),
     "block_r must be 64 or 128, got 32"),
    (dict(head_dim=64, block_r=32), "block_r must be 64, 128 or 192 .*, got 32"),
    (dict(head_dim=64, stages=7), "stages must be 2, 3 or 4, got 7"),
    (dict(head_dim=64, arch="sm_100a", block_c=256),
     "need 576 tensor-memory columns, more than the SM.s 512"),
    (dict(head_dim=64, sm90_kernel="tcgen05"),
     "sm90_kernel must be one of the strings wgmma or mma-sync"),
])
def test_bad_requests_raise_compile_error(flashmlir, kwargs, message):
    with pytest.raises(flashmlir.CompileError, match=message):
        flashmlir.compile(**kwargs)


def _naive(q, k, v, causal, scale):
    import numpy as np
    b, hq, nq, d = q.shape
    group = hq // k.shape[1]
    kk = np.repeat(k.astype(np.float64), group, axis=1)
    vv = np.repeat(v.astype(np.float64), group, axis=1)
    s = np.einsum("bhid,bhjd->bhij", q.astype(np.float64), kk) * scale
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - m)
    return (np.einsum("bhij,bhjd->bhid", p / p.sum(-1, keepdims=True), vv),
            (m[..., 0] + np.log(p.sum(-1))))


@pytest.mark.parametrize("shape,causal,order", [
    ((1, 2, 2, 77, 131, 64), True, "fa2"),
    ((2, 8, 2, 33, 45, 16), False, "fa1"),
    ((1, 1, 1, 1, 257, 32), False, "fa2")])
def test_run_cpu_matches_numpy(flashmlir, shape, causal, order):
    """CPU execution from Python: random inputs, naive numpy reference."""
    import numpy as np
    b, hq, hkv, nq, nk, d = shape
    rng = np.random.default_rng(sum(shape))
    q = rng.standard_normal((b, hq, nq, d), dtype=np.float32)
    k = rng.standard_normal((b, hkv, nk, d), dtype=np.float32)
    v = rng.standard_normal((b, hkv, nk, d), dtype=np.float32)
    out, lse = flashmlir.run_cpu(q, k, v, causal=causal, loop_order=order,
                                 block_r=16, block_c=32)
    ref, ref_lse = _naive(q, k, v, causal, 1 / np.sqrt(d))
    assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < 1e-5
    assert np.max(np.abs(lse - ref_lse)) < 1e-4


def test_run_cpu_reports_bad_shapes(flashmlir):
    import numpy as np
    q = np.zeros((1, 6, 8, 16), np.float32) + 1
    k = np.ones((1, 4, 8, 16), np.float32)
    with pytest.raises(flashmlir.CompileError,
                       match=r"query heads \(6\) to be a multiple"):
        flashmlir.run_cpu(q, k, k)


def test_sm90_schedule_options_reach_the_kernel(flashmlir):
    k = flashmlir.compile(head_dim=128, stages=2, ping_pong=False,
                          intra_overlap=False, persistent=True)
    assert k.name == "fa3_sm90_d128_br128_bc128_s2_f16_nopp_noovl_persistent_q2_cr8"
    assert k.metadata["persistent"] is True and k.metadata["kv_stages"] == 2
    assert "nvvm.barrier.arrive" not in k.mlir("kernel")  # no ping-pong
    mma = flashmlir.compile(head_dim=64, sm90_kernel="mma-sync")
    assert mma.name.startswith("fa2_sm80_") and "wgmma" not in mma.ptx


def test_window_and_softcap_reach_the_kernel(flashmlir):
    k = flashmlir.compile(head_dim=64, causal=True, window=100, softcap=30)
    assert k.name.endswith("_w100_sc30")
    assert k.metadata["window"] == 100 and k.metadata["softcap"] == 30
    assert "tanh.approx.f32" in k.ptx
    assert "window = 100 : i64" in k.mlir("attention")


def test_bottom_right_reaches_every_target(flashmlir):
    """Bottom-right masks (a KV cache): in the kernel name, the metadata
    and the attention the kernel was built from; alone it is refused."""
    for arch in ("sm_90a", "sm_80", "sm_100a"):
        k = flashmlir.compile(head_dim=128, causal=True, bottom_right=True,
                              arch=arch)
        assert k.name.endswith("_bralign"), k.name
        assert k.metadata["bottom_right"] is True
        top_left = flashmlir.compile(head_dim=128, causal=True, arch=arch)
        assert top_left.metadata["bottom_right"] is False
        assert k.ptx != top_left.ptx
    with pytest.raises(flashmlir.CompileError, match="bottom_right aligns"):
        flashmlir.compile(head_dim=64, bottom_right=True)


def test_diagonal_offset_reaches_every_target(flashmlir):
    """A diagonal offset (windows with separate left and right reaches): in
    the kernel name, the metadata and the attention; bad values and an
    offset with no mask to move are refused."""
    for arch in ("sm_90a", "sm_80", "sm_100a"):
        k = flashmlir.compile(head_dim=64, causal=True, window=13,
                              diagonal_offset=3, arch=arch)
        assert k.name.endswith("_w13_do3"), k.name
        assert k.metadata["diagonal_offset"] == 3
        assert "diagonal_offset = 3 : i64" in k.mlir("attention")
        plain = flashmlir.compile(head_dim=64, causal=True, window=13,
                                  arch=arch)
        assert plain.metadata["diagonal_offset"] == 0
        assert k.ptx != plain.ptx
    for offset, message in [
            (-1, r"expected diagonal_offset in \[0, 1073741824\] \(2\^30\), "
                 r"got -1"),
            (2**31, r"expected diagonal_offset in \[0, 1073741824\]"),
            (1.5, "diagonal_offset must be an integer"),
            (True, "diagonal_offset must be an integer")]:
        with pytest.raises(flashmlir.CompileError, match=message):
            flashmlir.compile(head_dim=64, causal=True,
                              diagonal_offset=offset)
    with pytest.raises(flashmlir.CompileError,
                       match="diagonal_offset moves the causal or window"):
        flashmlir.compile(head_dim=64, diagonal_offset=2)


def test_sm100a_is_compile_only_but_real(flashmlir):
    """The Blackwell kernel: ptxas-assembled tcgen05 code with FA4's
    defaults (conditional rescaling, partial software exp2)."""
    k = flashmlir.compile(head_dim=128, causal=True, arch="sm_100a")
    assert k.name == "fa4_sm100_d128_br128_bc128_s3_f16_causal_cr8_px3p8"
    assert k.cubin[:4] == b"\x7fELF"
    assert ".target sm_100a" in k.ptx
    for inst in ("tcgen05.alloc", "tcgen05.mma.cta_group::1.kind::f16",
                 "tcgen05.ld.sync.aligned.32x32b", "tcgen05.commit",
                 "cp.async.bulk.tensor.3d"):
        assert inst in k.ptx, inst
    assert k.metadata["arch"] == "sm_100a"
    assert k.metadata["block"] == [192, 1, 1]
    assert k.metadata["params"][0]["kind"] == "tensormap"
    plain = flashmlir.compile(head_dim=64, arch="sm_100a",
                              rescale_threshold=-1, poly_exp2_degree=0)
    assert plain.name == "fa4_sm100_d64_br128_bc128_s3_f16"


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("order", ["fa1", "fa2"])
def test_run_cpu_non_finite_inputs(flashmlir, causal, order):
    """NaN / +inf / -inf in Q, K, V reach exactly the outputs they reach in
    softmax(QK^T)V with masked keys excluded (the semantics of every
    flash-mlir lowering; the GPU kernels are checked the same way by
    bench/reliability.py on the H200): a +inf in a key a row cannot see
    does not reach that row."""
    import numpy as np
    rng = np.random.default_rng(3)
    b, hq, hkv, nq, nk, d = 2, 4, 2, 33, 45, 16
    q = rng.standard_normal((b, hq, nq, d)).astype(np.float32)
    k = rng.standard_normal((b, hkv, nk, d)).astype(np.float32)
    v = rng.standard_normal((b, hkv, nk, d)).astype(np.float32)
    q[0, 0, 5, 3] = np.nan
    k[0, 0, 7, 1] = np.inf
    v[1, 1, 9, 2] = -np.inf
    out, _ = flashmlir.run_cpu(q, k, v, causal=causal, loop_order=order,
                               block_r=8, block_c=16)
    with np.errstate(invalid="ignore", over="ignore"):
        ref, _ = _naive(q, k, v, causal, 1 / np.sqrt(d))
    assert np.array_equal(np.isnan(out), np.isnan(ref))
    assert np.array_equal(np.isinf(out), np.isinf(ref))
    finite = np.isfinite(ref)
    assert np.abs(out[finite] - ref[finite]).max() < 1e-4
    # Causal: rows 0..6 of head 0 (batch 0) cannot see key 7 and stay
    # finite (but row 5, whose query holds the NaN); without the mask the
    # +inf key poisons every row of both query heads that read kv head 0.
    hidden_rows_finite = np.isfinite(out[0, 0, [0, 1, 2, 3, 4, 6]]).all()
    assert hidden_rows_finite == causal
    assert np.isnan(out[0, 0, 5]).all()


def test_kernel_dir_is_filled_and_checked(flashmlir, tmp_path):
    """flashmlir.attention's kernel lookup: a missing kernel is compiled and
    saved under the bench/build_kernels.sh name; a saved kernel whose
    metadata does not match its name is refused, not launched."""
    import json
    from flashmlir import runtime
    k = flashmlir._kernel_for("sm_90a", 64, "f16", True, str(tmp_path))
    assert k.meta["causal"] is True
    saved = tmp_path / "sm_90a_d64_f16_causal"
    assert saved.with_suffix(".cubin").read_bytes()[:4] == b"\x7fELF"
    again = flashmlir._kernel_for("sm_90a", 64, "f16", True, str(tmp_path))
    assert again.name == k.name
    assert not list(tmp_path.glob("*.tmp"))
    # A non-causal kernel saved under the causal name.
    meta = json.loads(saved.with_suffix(".json").read_text())
    meta["causal"] = False
    saved.with_suffix(".json").write_text(json.dumps(meta))
    with pytest.raises(runtime.MetadataError, match="not the requested"):
        flashmlir._kernel_for("sm_90a", 64, "f16", True, str(tmp_path))


_TWO_LAYERS = """
func.func @layers(%q: memref<2x8x300x128xbf16>, %k: memref<2x2x300x128xbf16>,
                  %o: memref<2x8x300x128xbf16>, %l: memref<2x8x300xf32>,
                  %q2: memref<1x4x100x64xf16>, %o2: memref<1x4x100x64xf16>) {
  fa.attention %q, %k, %k outs(%o, %l : memref<2x8x300x128xbf16>, memref<2x8x300xf32>) {causal}
      : memref<2x8x300x128xbf16>, memref<2x2x300x128xbf16>, memref<2x2x300x128xbf16>
  fa.attention %q2, %q2, %q2 outs(%o2 : memref<1x4x100x64xf16>) {scale = 0.5 : f32}
      : memref<1x4x100x64xf16>, memref<1x4x100x64xf16>, memref<1x4x100x64xf16>
  return
}
"""


def test_compile_module_two_layers(flashmlir):
    # Issue 15: a user's module, every attention a launch with its own
    # metadata, all kernels in one binary.
    m = flashmlir.compile_module(_TWO_LAYERS, arch="sm_90a")
    names = [name for name, _ in m.launches]
    assert names == [
        "fa3_sm90_d128_br128_bc128_s2_bf16_causal_persistent_q2_cr8",
        "fa3_sm90_d64_br192_bc128_s3_f16_persistent_q2_cr8_nolse"]
    first, second = (meta for _, meta in m.launches)
    assert first["causal"] and first["writes_lse"] and first["dtype"] == "bf16"
    assert second["scale"] == 0.5 and not second["writes_lse"]
    for name in names:
        assert f".entry {name}(" in m.ptx
    assert len(m.cubin) > 0 and "gpu.launch_func" in m.host_ir


def test_compile_module_torch_two_layer(flashmlir, fa_opt):
    # Issue 15: the torch-mlir-shaped two-layer block (the H200 end-to-end
    # run loads the same file), raised by fa-raise-attention with no remark,
    # then compiled as one module.
    text = (ROOT / "test" / "Inputs" / "torch_two_layer.mlir").read_text()
    raised = subprocess.run([fa_opt, "--fa-raise-attention"], input=text,
                            capture_output=True, text=True, check=True)
    assert raised.stderr == ""
    assert raised.stdout.count("fa.attention") == 2
    m = flashmlir.compile_module(raised.stdout, arch="sm_90a")
    (_, first), (_, second) = m.launches
    assert first["causal"] and first["dtype"] == "f16"
    assert first["head_dim"] == 128 and not first["writes_lse"]
    assert first["scale"] == pytest.approx(1 / 128 ** 0.5, rel=1e-7)
    assert not second["causal"] and second["dtype"] == "bf16"
    assert second["head_dim"] == 64 and not second["writes_lse"]
    assert second["scale"] == 0.5


def test_compile_module_reports_diagnostics(flashmlir):
    with pytest.raises(flashmlir.CompileError,
                       match="flashmlir.compile_module:1:13: expected non-function type"):
        flashmlir.compile_module("func.func @f(")
    with pytest.raises(flashmlir.CompileError, match="no fa.attention"):
        flashmlir.compile_module("func.func @f() { return }")


def test_predicted_bytes_is_the_runtime_s_and_the_report_s(flashmlir, tmp_path):
    """flashmlir.predicted_bytes applies the one traffic rule: the C
    runtime's faMetadataPredictedBytes on the same metadata gives the same
    bytes, and FlashAttention-2's model holds for full tiles."""
    import json
    import subprocess
    from conftest import ROOT
    k = flashmlir.compile(head_dim=128, causal=True, arch="sm_90a")
    shape = (2, 8, 2, 1000, 1000)
    reads, writes = flashmlir.predicted_bytes(k.metadata, *shape)
    path = tmp_path / "k.json"
    path.write_text(json.dumps(k.metadata))
    build = os.environ.get("FA_BUILD_DIR", str(ROOT / "build"))
    out = subprocess.run([os.path.join(build, "bin", "predicted-bytes"),
                          str(path)] + [str(v) for v in shape],
                         capture_output=True, text=True, check=True).stdout
    assert f"runtime read_bytes: {reads}\n" in out
    assert f"runtime write_bytes: {writes}\n" in out
    # Without a mask, full tiles: Q + (K + V) * T_r for each of B * Hq heads
    # (D = 128, N = 4096, 16 heads: the 1,090,519,040 bytes ncu measured).
    plain = flashmlir.compile(head_dim=128, arch="sm_90a")
    r, _ = flashmlir.predicted_bytes(plain.metadata, 1, 16, 16, 4096, 4096)
    assert r == 1090519040
    with pytest.raises(ValueError, match="multiple of the K/V heads"):
        flashmlir.predicted_bytes(k.metadata, 2, 8, 3, 1000, 1000)


def test_value_head_dim(flashmlir):
    """V and O narrower than Q and K (sm_90a): both head dims in the
    metadata, "Dv" in v's and o's shapes, the runtime's checks, the C and
    Python readers' range, and the other targets' refusal."""
    from flashmlir import runtime
    k = flashmlir.compile(head_dim=192, value_head_dim=128, causal=True)
    m = k.metadata
    assert (m["head_dim"], m["value_head_dim"]) == (192, 128)
    assert "_d192_dv128_" in m["kernel"]
    shapes = {p["name"]: p.get("shape") for p in m["params"]}
    assert shapes["v"][-1] == "Dv" and shapes["o"][-1] == "Dv"
    assert shapes["q"][-1] == shapes["k"][-1] == "D"
    assert runtime.Kernel(k.cubin, m).value_head_dim == 128
    with pytest.raises(runtime.MetadataError, match="at most '?head_dim"):
        runtime.validate_metadata(dict(m, value_head_dim=256))
    with pytest.raises(flashmlir.CompileError,
                       match="value head dim must equal the head dim "
                             "\\(128\\) on sm_80"):
        flashmlir.compile(head_dim=128, value_head_dim=64, arch="sm_80")
    plain = flashmlir.compile(head_dim=192, causal=True).metadata
    assert plain["value_head_dim"] == 192 and "_dv" not in plain["kernel"]


def test_predicted_bytes_per_sequence(flashmlir):
    """Sequences of their own lengths count one by one (the rule of
    faMetadataPredictedSequenceBytes; test/Runtime/predicted-bytes.test has
    the hand count of the same case): a varlen batch from its prefix sums,
    a KV cache from its lengths, and the arguments each needs."""
    m = flashmlir.compile(head_dim=128, varlen=True).metadata
    got = flashmlir.predicted_bytes(m, 1, 2, 1, 0, 0,
                                    cu_seqlens_q=[0, 200, 201, 201],
                                    cu_seqlens_k=[0, 300, 377, 382])
    assert got == (1114112, 104992)
    with pytest.raises(ValueError, match="needs cu_seqlens_q"):
        flashmlir.predicted_bytes(m, 1, 2, 1, 200, 300)
    kv = flashmlir.compile(head_dim=128, causal=True, bottom_right=True,
                           kv_splits=4, kv_lengths=True, page_size=64).metadata
    split = flashmlir.compile(head_dim=128, causal=True, bottom_right=True,
                              kv_splits=4).metadata
    # Equal lengths: the contiguous kernel's batch; one shorter sequence
    # moves less.
    same = flashmlir.predicted_bytes(kv, 3, 8, 2, 1, 1024,
                                     kv_lengths=[700, 700, 700])
    assert same == flashmlir.predicted_bytes(split, 3, 8, 2, 1, 700)
    shorter = flashmlir.predicted_bytes(kv, 3, 8, 2, 1, 1024,
                                        kv_lengths=[700, 64, 700])
    assert shorter[0] < same[0]
    with pytest.raises(ValueError, match="needs them"):
        flashmlir.predicted_bytes(kv, 3, 8, 2, 1, 1024)
    with pytest.raises(ValueError, match="for KV-cache and varlen kernels"):
        flashmlir.predicted_bytes(split, 3, 8, 2, 1, 700, kv_lengths=[1] * 3)


def test_compile_module_raises_torch_mlir_output(flashmlir):
    """compile_module(raise_attention=True) raises the attention of
    torch-mlir's SDPA decomposition as emitted (alpha multiplies, a scale
    from scalar arithmetic) and compiles it; without raising, the module
    holds no fa.attention, which it says."""
    from conftest import ROOT
    text = (ROOT / "test" / "Inputs" / "torch_mlir_sdpa_f16.mlir").read_text()
    with pytest.raises(flashmlir.CompileError,
                       match="the module holds no fa.attention"):
        flashmlir.compile_module(text, cache_dir="")
    module = flashmlir.compile_module(text, raise_attention=True,
                                      cache_dir="")
    assert len(module.launches) == 1
    name, meta = module.launches[0]
    # The raised attention's scale: 1/sqrt(32), from the scalar arithmetic.
    assert meta["head_dim"] == 32 and not meta["causal"]
    assert abs(meta["scale"] - 32 ** -0.5) < 1e-6, meta["scale"]
    with pytest.raises(flashmlir.CompileError, match="raise_attention"):
        flashmlir.compile_module(text, raise_attention="yes", cache_dir="")


def test_predicted_bytes_validates_the_metadata(flashmlir):
    """predicted_bytes reads metadata through the one metadata rule (issue
    46, C8): a missing field or one of the wrong type is a ValueError that
    names it, not a bare KeyError (head_dim, causal, block_r were)."""
    kernel = flashmlir.compile(head_dim=64, arch="sm_80", cache_dir="")
    meta = kernel.metadata
    assert flashmlir.predicted_bytes(meta, 1, 1, 1, 128, 128)[0] > 0
    for key, message in (("head_dim", "'head_dim'"), ("causal", "'causal'"),
                         ("block_r", "'block_r'")):
        broken = {k: v for k, v in meta.items() if k != key}
        with pytest.raises(ValueError, match=message) as e:
            flashmlir.predicted_bytes(broken, 1, 1, 1, 128, 128)
        assert type(e.value) is ValueError
    with pytest.raises(ValueError, match="'window' must be"):
        flashmlir.predicted_bytes(dict(meta, window=2**63 - 1), 1, 1, 1, 128,
                                  128)
