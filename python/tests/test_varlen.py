"""Varlen batches from Python (issue 17): the kernel's metadata and launch
parameters, the argument checks of the runtime and of
flash_attn_varlen_func, and (marked gpu) numerics against a per-sequence
fp32 reference."""
import math

import pytest


def test_varlen_kernel_metadata(flashmlir):
    from flashmlir import runtime
    k = flashmlir.compile(head_dim=128, causal=True, bottom_right=True,
                          varlen=True)
    m = k.metadata
    assert m["varlen"] is True and "_varlen" in m["kernel"]
    # The table's choice for causal D = 128: persistent CTAs (dealing the
    # sequences' real tiles) with the dynamic scheduler.
    assert m["tile_scheduler"] == "dynamic"
    assert "_persistent" in m["kernel"]
    # O staged in shared memory: whole 64-row blocks leave by TMA stores
    # (o is a tensor map), a sequence's last, partial block is copied by
    # the threads to o_rows (its data) with o's strides.
    assert m["tma_box_rows_o"] == 64
    names = [p["name"] for p in m["params"]]
    params = {p["name"]: p for p in m["params"]}
    assert params["o"]["kind"] == "tensormap"
    assert params["o"]["shape"] == ["1", "Hq", "total_q", "D"]
    assert params["o_rows"]["kind"] == "pointer"
    i = names.index("cu_seqlens_q")
    assert names[i - 4:i] == ["o_rows", "o_stride_b", "o_stride_h",
                              "o_stride_n"]
    assert names[i:i + 3] == ["cu_seqlens_q", "cu_seqlens_k", "total_q"]
    assert params["q"]["shape"] == ["1", "Hq", "total_q", "D"]
    kernel = runtime.Kernel(k.cubin, m)
    assert kernel.varlen
    bad = dict(m)
    bad["varlen"] = False
    with pytest.raises(runtime.MetadataError, match="does not match"):
        runtime.validate_metadata(bad)
    # Without o_rows the copy of a partial block would have no destination.
    bad = dict(m, params=[p for p in m["params"] if p["name"] != "o_rows"])
    with pytest.raises(runtime.MetadataError, match="does not match"):
        runtime.validate_metadata(bad)


@pytest.mark.parametrize("kwargs,message", [
    (dict(varlen=True, arch="sm_80"), "sm_90a \\(wgmma\\) only"),
    (dict(varlen=True, kv_lengths=True), "not supported together")])
def test_bad_varlen_options(flashmlir, kwargs, message):
    with pytest.raises(flashmlir.CompileError, match=message):
        flashmlir.compile(head_dim=128, **kwargs)


def test_varlen_func_refuses_bad_sums(flashmlir):
    """What the host can see of the sums (their dtype, rank) is refused
    before anything runs; their values stay on the device, where the
    kernel asserts them (test_device_asserts.py, on the GPU)."""
    from flashmlir import runtime
    torch = pytest.importorskip("torch")
    q = torch.zeros(10, 2, 128, dtype=torch.float16)
    good = torch.tensor([0, 4, 10], dtype=torch.int32)
    for sums, message in [(good.long(), "int32 tensor"),
                          (good.view(1, 3), "int32 tensor")]:
        with pytest.raises(runtime.KernelArgumentError, match=message):
            flashmlir.flash_attn_varlen_func(q, q, q, sums, good, 6, 6)
    with pytest.raises(runtime.KernelArgumentError, match="left only"):
        flashmlir.flash_attn_varlen_func(q, q, q, good, good, 6, 6,
                                         window_size=(2, -1))


def _check_per_sequence(torch, q, k, v, out, cq, ck, causal):
    """O of a packed [total, H, D] batch (prefix sums cq, ck) against each
    sequence's attention in f32 (bottom-right causal); an empty sequence
    has no rows to check."""
    hq, hkv, d = q.shape[1], k.shape[1], q.shape[2]
    for i in range(len(cq) - 1):
        nq, nk = cq[i + 1] - cq[i], ck[i + 1] - ck[i]
        if nq == 0:
            continue
        qi = q[cq[i]:cq[i + 1]].transpose(0, 1).float()
        ki = k[ck[i]:ck[i + 1]].transpose(0, 1).float().repeat_interleave(
            hq // hkv, 0)
        vi = v[ck[i]:ck[i + 1]].transpose(0, 1).float().repeat_interleave(
            hq // hkv, 0)
        s = qi @ ki.transpose(-1, -2) / math.sqrt(d)
        if causal:
            r = torch.arange(nq, device="cuda")[:, None] + nk - nq
            c = torch.arange(nk, device="cuda")[None, :]
            s = s.masked_fill(c > r, float("-inf"))
        ref = torch.softmax(s, -1).nan_to_num(0.0) @ vi
        got = out[cq[i]:cq[i + 1]].transpose(0, 1).float()
        assert (got - ref).abs().max().item() < 2e-3, i


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [96, 128])
def test_varlen_matches_reference(cuda_flashmlir, causal, d):
    import os
    torch, flashmlir = cuda_flashmlir
    torch.manual_seed(3)
    lq, lk = [200, 1, 0, 513], [200, 77, 3, 600]
    hq, hkv = 8, 2
    cuq = torch.tensor([0, 200, 201, 201, 714], dtype=torch.int32,
                       device="cuda")
    cuk = torch.tensor([0, 200, 277, 280, 880], dtype=torch.int32,
                       device="cuda")
    q = torch.randn(sum(lq), hq, d, device="cuda", dtype=torch.float16)
    k = torch.randn(sum(lk), hkv, d, device="cuda", dtype=torch.float16)
    v = torch.randn_like(k)
    out = flashmlir.flash_attn_varlen_func(
        q, k, v, cuq, cuk, max(lq), max(lk), causal=causal,
        kernel_dir=os.environ.get("FLASHMLIR_VARLEN_KERNEL_DIR", ".varlen"))
    _check_per_sequence(torch, q, k, v, out, cuq.tolist(), cuk.tolist(),
                        causal)


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
def test_varlen_many_sequences(cuda_flashmlir, causal):
    """70 sequences, some empty: a persistent kernel deals the real tiles
    of the whole batch from one counter, so each tile must find its own
    sequence among many (and an empty one owns no tile)."""
    import os
    import random
    torch, flashmlir = cuda_flashmlir
    rng = random.Random(5)
    lq = [0 if i % 9 == 4 else rng.randrange(1, 300) for i in range(70)]
    lk = [n + rng.randrange(0, 60) for n in lq]
    hq, hkv, d = 4, 2, 128
    cq, ck = [0], [0]
    for a, c in zip(lq, lk):
        cq.append(cq[-1] + a)
        ck.append(ck[-1] + c)
    cuq = torch.tensor(cq, dtype=torch.int32, device="cuda")
    cuk = torch.tensor(ck, dtype=torch.int32, device="cuda")
    torch.manual_seed(4)
    q = torch.randn(cq[-1], hq, d, device="cuda", dtype=torch.float16)
    k = torch.randn(ck[-1], hkv, d, device="cuda", dtype=torch.float16)
    v = torch.randn_like(k)
    out = flashmlir.flash_attn_varlen_func(
        q, k, v, cuq, cuk, max(lq), max(lk), causal=causal,
        kernel_dir=os.environ.get("FLASHMLIR_VARLEN_KERNEL_DIR", ".varlen"))
    _check_per_sequence(torch, q, k, v, out, cq, ck, causal)


@pytest.mark.gpu
def test_c_runtime_varlen_launch(cuda_flashmlir):
    """faKernelLaunchVarlen on flash-attn's [total, H, D] tensors against the
    Python runtime's launch of the same kernel, and its refusals."""
    import ctypes
    import os
    from conftest import load_c_runtime
    torch, flashmlir = cuda_flashmlir
    from flashmlir.runtime import Kernel
    lib, Strides, _ = load_c_runtime()
    kdir = os.environ.get("FLASHMLIR_VARLEN_KERNEL_DIR", ".varlen")
    prefix = f"{kdir}/sm_90a_d128_f16_causal_bralign_varlen"
    kernel = ctypes.c_void_p()
    assert lib.faKernelLoadFiles(prefix.encode(), 0,
                                 ctypes.byref(kernel)) == 0, \
        lib.faRuntimeLastError()
    lq, lk, hq, hkv, d = [300, 1, 0, 129], [300, 50, 7, 400], 8, 2, 128
    cuq = torch.tensor([0, 300, 301, 301, 430], dtype=torch.int32,
                       device="cuda")
    cuk = torch.tensor([0, 300, 350, 357, 757], dtype=torch.int32,
                       device="cuda")
    torch.manual_seed(9)
    q = torch.randn(sum(lq), hq, d, device="cuda", dtype=torch.float16)
    k = torch.randn(sum(lk), hkv, d, device="cuda", dtype=torch.float16)
    v = torch.randn_like(k)
    out = torch.full_like(q, float("nan"))
    lse = torch.empty(1, hq, sum(lq), device="cuda")

    def strides(t):  # [total, H, D] as [1, H, total, D]
        sn, sh, _ = t.stride()
        return Strides(0, sh, sn)

    args = []
    for t in (q, k, v, out):
        args += [ctypes.c_void_p(t.data_ptr()), ctypes.byref(strides(t))]
    lib.faKernelLaunchVarlen.restype = ctypes.c_int

    def launch(cu_q, max_q):
        return lib.faKernelLaunchVarlen(
            kernel, *args, ctypes.c_void_p(lse.data_ptr()), len(lq), hq, hkv,
            sum(lq), sum(lk), max_q, cu_q, ctypes.c_void_p(cuk.data_ptr()),
            ctypes.c_float(1 / math.sqrt(d)),
            ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))

    assert launch(ctypes.c_void_p(cuq.data_ptr()), max(lq)) == 0, \
        lib.faRuntimeLastError()
    torch.cuda.synchronize()
    ref = torch.empty_like(q)
    Kernel.load(prefix)(*(t.unsqueeze(0).transpose(1, 2) for t in (q, k, v)),
                        out=ref.unsqueeze(0).transpose(1, 2),
                        scale=1 / math.sqrt(d), discard_lse=True,
                        cu_seqlens_q=cuq, cu_seqlens_k=cuk,
                        max_seqlen_q=max(lq))
    torch.cuda.synchronize()
    assert torch.equal(out, ref)
    assert launch(None, max(lq)) == 1
    assert b"must be 4-byte aligned int32 arrays" in lib.faRuntimeLastError()
    assert launch(ctypes.c_void_p(cuq.data_ptr()), sum(lq) + 1) == 1
    assert b"at most the total" in lib.faRuntimeLastError()
    lib.faKernelDestroy(kernel)
