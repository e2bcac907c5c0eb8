"""FP8 (e4m3) on the CPU path: the host codec, the compiled casts (every
code widened, rounding boundaries), e4m3 attentions against a naive
reference on the same quantised inputs (random shapes, ragged, causal,
GQA), the accuracy passes on outlier inputs, the attention-sink P cast, and
every refusal."""
import random
import re
import subprocess

import numpy as np
import pytest

# e4m3 reference values: code -> value.
KNOWN = {0x00: 0.0, 0x01: 2.0 ** -9, 0x07: 7 * 2.0 ** -9, 0x08: 2.0 ** -6,
         0x38: 1.0, 0x39: 1.125, 0x7e: 448.0, 0x80: -0.0, 0xfe: -448.0}


def naive(q, k, v, causal=False, scale=None):
    """softmax(scale Q K^T [causal, top-left]) V in float64, GQA by
    repetition."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    g = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, g, 1), np.repeat(v, g, 1)
    s = np.einsum("bhnd,bhmd->bhnm", q, k)
    s *= scale if scale is not None else 1 / np.sqrt(q.shape[-1])
    if causal:
        nq, nk = s.shape[-2:]
        s = np.where(np.arange(nk)[None] <= np.arange(nq)[:, None], s, -np.inf)
    m = s.max(-1, keepdims=True)
    p = np.where(np.isfinite(m), np.exp(s - np.where(np.isfinite(m), m, 0)), 0)
    l = p.sum(-1, keepdims=True)
    return (p @ v) / np.where(l > 0, l, 1)


def test_host_codec(flashmlir):
    codes = np.array(list(KNOWN), dtype=np.uint8)
    values = flashmlir.from_e4m3(codes)
    assert values.tolist() == list(KNOWN.values())
    assert np.signbit(values[codes.tolist().index(0x80)])
    nan = flashmlir.from_e4m3(np.array([0x7f, 0xff], dtype=np.uint8))
    assert np.isnan(nan).all()
    # Every finite code round-trips.
    finite = np.array([c for c in range(256) if c & 0x7f != 0x7f], np.uint8)
    back = flashmlir.to_e4m3(flashmlir.from_e4m3(finite))
    assert (back == finite).all()
    # Nearest even at the ties; saturation past 448; subnormal ties.
    x = np.array([1.0625, 1.1875, 3 * 2.0 ** -10, 2.0 ** -11, 464.0, 1e6,
                  -1e6, 2.0 ** -10 * 1.0001], dtype=np.float32)
    want = [1.0, 1.25, 2 * 2.0 ** -9, 0.0, 448.0, 448.0, -448.0, 2.0 ** -9]
    assert flashmlir.from_e4m3(flashmlir.to_e4m3(x)).tolist() == want


def test_compiled_widening_matches_every_code(flashmlir):
    """One key, P = 1 (times 2^8 and back, exact), v_descale 1: O is the
    compiled widening of each of the 254 finite codes of V."""
    codes = np.array([c if c & 0x7f != 0x7f else 0 for c in range(256)],
                     dtype=np.uint8)
    one = np.full((1, 1, 1, 1), 0x38, np.uint8)  # 1.0
    v = codes.reshape(1, 1, 1, 256)
    o, lse = flashmlir.run_cpu(one, one, v, dtype="e4m3", q_descale=1.0,
                               k_descale=1.0, v_descale=1.0)
    assert (o.reshape(-1) == flashmlir.from_e4m3(codes)).all()
    assert lse.reshape(-1)[0] == 1.0  # log(exp(1 * 1 * 1))


def test_compiled_rounding_matches_host(flashmlir):
    """fa.quantize's e4m3 rounding compiled (fa-expand-fp8-casts) against
    the host codec: amax 448 makes the quantisation scale exactly 1, one key
    makes O = e4m3(v) * 1."""
    rng = np.random.default_rng(5)
    ties = [1.0625, 1.1875, 3 * 2.0 ** -10, 5 * 2.0 ** -10, 2.0 ** -11,
            2.0 ** -6 * 1.0625, 2.0 ** -6 - 2.0 ** -12, 240.0 + 8, 448.0]
    v = np.concatenate([ties, -np.array(ties),
                        rng.standard_normal(256 - 2 * len(ties)) * 30,
                        ]).astype(np.float32)
    v[-1] = 448.0
    one = np.ones((1, 1, 1, 1), np.float32)
    o, _ = flashmlir.run_cpu(one, one, v.reshape(1, 1, 1, -1), fp8="tensor")
    host = flashmlir.from_e4m3(flashmlir.to_e4m3(v))
    assert (o.reshape(-1) == host).all()


def _random_case(rng):
    d = rng.choice([16, 32, 64, 128])
    hkv = rng.choice([1, 2])
    return dict(b=rng.choice([1, 2]), hkv=hkv, hq=hkv * rng.choice([1, 3]),
                nq=rng.choice([1, 17, 64, 77, 130]),
                nk=rng.choice([1, 31, 64, 131]), d=d, causal=rng.random() < .5,
                loop=rng.choice(["fa1", "fa2"]),
                tiles=rng.choice([(0, 0), (16, 32), (8, 48)]))


CASES = [_random_case(random.Random(100 + i)) for i in range(10)]


@pytest.mark.parametrize("case", CASES, ids=[str(c) for c in CASES])
def test_e4m3_matches_reference_on_quantised_inputs(flashmlir, case):
    rng = np.random.default_rng(7)
    c = case
    shapes = [(c["b"], c["hq"], c["nq"], c["d"]),
              (c["b"], c["hkv"], c["nk"], c["d"]),
              (c["b"], c["hkv"], c["nk"], c["d"])]
    quantised = [flashmlir.quantize_e4m3(rng.standard_normal(s) * 3)
                 for s in shapes]
    (q8, qd), (k8, kd), (v8, vd) = quantised
    ref = naive(*(flashmlir.from_e4m3(x) * d for x, d in quantised),
                causal=c["causal"])
    common = dict(causal=c["causal"], dtype="e4m3", q_descale=qd,
                  k_descale=kd, v_descale=vd, loop_order=c["loop"],
                  block_r=c["tiles"][0], block_c=c["tiles"][1])
    # P kept in f32: the widening is exact, so f32 rounding only.
    o, _ = flashmlir.run_cpu(q8, k8, v8, probs_scale=0, **common)
    err = np.linalg.norm(o - ref) / max(np.linalg.norm(ref), 1e-30)
    assert err < 1e-5, err
    # P rounded to e4m3 as the kernel does: within e4m3's 2^-4.
    o, _ = flashmlir.run_cpu(q8, k8, v8, **common)
    err = np.linalg.norm(o - ref) / max(np.linalg.norm(ref), 1e-30)
    assert err < 2.0 ** -4, err


def test_descales_scale_scores_and_output(flashmlir):
    """Doubling k_descale doubles the scores; doubling v_descale doubles O:
    the descales reach both products."""
    rng = np.random.default_rng(3)
    (q8, qd), (k8, kd), (v8, vd) = (flashmlir.quantize_e4m3(
        rng.standard_normal((1, 2, 33, 32))) for _ in range(3))
    run = lambda **d: flashmlir.run_cpu(q8, k8, v8, dtype="e4m3",
                                        probs_scale=0, **d)[0]
    base = run(q_descale=qd, k_descale=kd, v_descale=vd)
    assert np.allclose(run(q_descale=qd, k_descale=kd, v_descale=2 * vd),
                       2 * base, rtol=1e-6)
    ref = naive(flashmlir.from_e4m3(q8) * qd, flashmlir.from_e4m3(k8) * kd * 2,
                flashmlir.from_e4m3(v8) * vd)
    o = run(q_descale=qd, k_descale=2 * kd, v_descale=vd)
    assert np.abs(o - ref).max() < 1e-5


def _outliers(rng, shape):
    x = rng.standard_normal(shape)
    x += rng.standard_normal(shape) * 10 * (rng.random(shape) < 1e-3)
    return x.astype(np.float32)


def test_incoherent_processing_reduces_outlier_error(flashmlir):
    """FA3's outlier inputs: the Hadamard transform of Q and K spreads the
    outliers before quantisation, so O's error against the exact attention
    drops (measured 2.0e-2 -> 1.5e-2 at D = 64, N = 512); and it leaves the
    attention itself unchanged (P in f32 and no quantisation would be
    exact: the error without outliers does not grow)."""
    rng = np.random.default_rng(11)
    q, k, v = (_outliers(rng, (1, 1, 512, 64)) for _ in range(3))
    ref = naive(q, k, v)
    err = {}
    for name, opts in [("tensor", {}), ("incoherent", {"incoherent": True})]:
        o, _ = flashmlir.run_cpu(q, k, v, fp8="tensor", **opts)
        err[name] = np.sqrt(np.mean((o - ref) ** 2))
    assert err["incoherent"] < 0.85 * err["tensor"], err


def test_block_quantisation_keeps_quiet_blocks_fine(flashmlir):
    """e4m3 is floating point: a per-tensor scale costs precision only where
    it pushes values below 2^-6 (subnormals, a fixed step of 2^-9). One Q
    tile 10^5 times larger than the others does that to every other tile
    per tensor (448 / 4e5 * |q| ~ 1e-3: measured O error 4.1e-2 on the
    other rows, and 6.1e-3 at 10^4, 5.4e-3 at 10^2); per block, each tile
    has its own scale (5.1e-3 whatever the factor)."""
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((1, 1, 256, 32)).astype(np.float32)
               for _ in range(3))
    q[..., :64, :] *= 1e5
    ref = naive(q, k, v)
    tiles = dict(block_r=64, block_c=64)
    errs = {}
    for mode in ["tensor", "block"]:
        o, _ = flashmlir.run_cpu(q, k, v, fp8=mode, **tiles)
        errs[mode] = np.sqrt(np.mean((o[..., 64:, :] - ref[..., 64:, :]) ** 2))
    assert errs["block"] < 0.25 * errs["tensor"], errs


def test_attention_sink_p_does_not_collapse(flashmlir):
    """Four sink keys ~8 (ln) above the rest, with zero values: the other
    keys' P relative to the sinks' max is ~exp(-8) < 2^-10, which an
    unscaled e4m3 cast flushes to 0 (O collapses); scaled by 2^8 it stays
    within a few times the f32 floor."""
    rng = np.random.default_rng(0)
    d, n = 64, 1024
    q, k, v = (rng.standard_normal((1, 1, n, d)).astype(np.float32)
               for _ in range(3))
    a = np.sqrt(8 * np.sqrt(d))
    q[..., 0] = a
    k[..., :4, 0] = a
    k[..., 4:, 0] = 0
    v[..., :4, :] = 0
    ref = naive(q, k, v)
    rel = {}
    for s in [0, 1, 256]:
        o, _ = flashmlir.run_cpu(q, k, v, fp8="tensor", probs_scale=s)
        rel[s] = np.linalg.norm(o - ref) / np.linalg.norm(ref)
    assert rel[1] > 0.3, rel          # collapsed (measured 0.65)
    assert rel[256] < 1.5 * rel[0], rel  # the f32-P floor (0.060 vs 0.054)


@pytest.mark.parametrize("kwargs,message", [
    (dict(dtype="e4m3", q_descale=1.0, k_descale=1.0),
     "dtype='e4m3' needs v_descale"),
    (dict(dtype="e4m3", q_descale=0.0, k_descale=1.0, v_descale=1.0),
     "expected q_descale in [2^-126, 2^127], got 0"),
    (dict(dtype="e4m3", q_descale=1.0, k_descale=float("nan"),
          v_descale=1.0), "expected k_descale in [2^-126, 2^127], got nan"),
    (dict(dtype="e4m3", q_descale=1.0, k_descale=1.0, v_descale=-2.0),
     "expected v_descale in [2^-126, 2^127], got -2"),
    (dict(q_descale=1.0), "q_descale is for dtype='e4m3' inputs"),
    (dict(incoherent=True), "incoherent transforms Q and K before"),
    (dict(fp8="tensor", probs_scale=3),
     "expected probs scale to be a power of two in [1, 256], got 3"),
    (dict(fp8="tensor", incoherent=True, head_dim=48),
     "expected the head dim D to be a power of two"),
    (dict(dtype="e4m3", fp8="tensor", q_descale=1.0, k_descale=1.0,
          v_descale=1.0), "fp8 quantises f32 inputs"),
])
def test_run_cpu_refuses(flashmlir, kwargs, message):
    d = kwargs.pop("head_dim", 16)
    dtype = np.uint8 if kwargs.get("dtype") == "e4m3" else np.float32
    x = np.zeros((1, 1, 4, d), dtype)
    with pytest.raises(flashmlir.CompileError, match=re.escape(message)):
        flashmlir.run_cpu(x, x, x, **kwargs)


def test_run_cpu_rejects_unknown_modes(flashmlir):
    x = np.zeros((1, 1, 4, 16), np.float32)
    with pytest.raises(ValueError, match="fp8 must be None, 'tensor' or"):
        flashmlir.run_cpu(x, x, x, fp8="blocks")
    with pytest.raises(ValueError, match="dtype must be 'f32' or 'e4m3'"):
        flashmlir.run_cpu(x, x, x, dtype="e5m2")


@pytest.mark.parametrize("arch,message", [
    ("sm_100a", "FP8 (e4m3) kernels are built for sm_90a only, not sm_100a"),
    ("sm_80", "which sm_80 does not have"),
])
def test_compile_refuses_e4m3_off_sm90a(flashmlir, arch, message):
    """e4m3 has a kernel on sm_90a only: refused elsewhere with the reason,
    never compiled as an f16 kernel."""
    with pytest.raises(flashmlir.CompileError, match=re.escape(message)):
        flashmlir.compile(head_dim=128, dtype="e4m3", arch=arch,
                          cache_dir="")


@pytest.mark.parametrize("out_dtype", [None, "f16"])
def test_compile_e4m3_kernel(flashmlir, metadata_check, out_dtype):
    """The sm_90a FP8 kernel: e4m3 wgmma, its V layout kernel in the same
    cubin, O in bf16 (FA3's default) or f16, tau = 0 for the 2^8 P cast."""
    kernel = flashmlir.compile(head_dim=128, dtype="e4m3", arch="sm_90a",
                               out_dtype=out_dtype, cache_dir="")
    meta = kernel.metadata
    assert meta["dtype"] == "e4m3"
    assert meta["out_dtype"] == (out_dtype or "bf16")
    assert meta["rescale_threshold"] == 0
    assert "e4m3" in kernel.name
    assert meta["value_layout"]["kernel"] in kernel.ptx
    assert "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3" in \
        kernel.ptx
    names = [p["name"] for p in meta["params"]]
    assert names[:5] == ["q", "k", "v_t", "o", "lse"]
    # The descales after the scalars; the dynamic scheduler's counter, if
    # any, last.
    descales = names.index("q_descale")
    assert names[descales:descales + 4] == ["q_descale", "k_descale",
                                            "v_descale", "descale_layout"]
    # Per-block descales are the kernel's tiles: ceil(Nq / 128) and
    # ceil(Nk / 224) (B_c = 224 at D = 128).
    from conftest import ELF_HEADER
    from flashmlir.runtime import Kernel
    assert meta["block_c"] == 224
    assert Kernel(ELF_HEADER, meta).descale_blocks(333, 500) == (3, 3)
    # V^T's boxes are 32 keys by D rows, the 32-byte swizzle of its
    # 224-byte rows; a box row that is not the swizzle span is refused.
    v_t = next(p for p in meta["params"] if p["name"] == "v_t")
    assert v_t["box"] == [32, 128] and v_t["swizzle"] == "32B"
    # V^T's rows padded to whole 128-byte lines (the runtime allocates and
    # maps them so).
    assert meta["value_layout"]["key_alignment"] == 128
    # The runtime accepts the metadata it will launch from, and refuses a
    # key alignment no layout kernel writes.
    from flashmlir.runtime import MetadataError, validate_metadata
    validate_metadata(meta)
    # (metadata_check: "c" gives faKernelMetadataCheck's messages, which name
    # the field but not always the parameter.)
    c = metadata_check == "c"
    for bad, message in (
            (dict(v_t, swizzle="64B"), "'v_t'"),
            (dict(v_t, swizzle="16B"),
             "a parameter's 'swizzle' must be" if c else "'v_t'"),
            (dict(v_t, box=[32]),
             "a parameter's 'box' must be two integers" if c else "'v_t'")):
        with pytest.raises(MetadataError, match=message):
            validate_metadata(dict(meta, params=[
                bad if p["name"] == "v_t" else p for p in meta["params"]]))
    # An e4m3 kernel built before the descale layouts names its last
    # descale parameter descale_stride: refused, not launched with a layout.
    stale = dict(meta, params=[dict(p, name="descale_stride")
                               if p["name"] == "descale_layout" else p
                               for p in meta["params"]])
    # (faKernelMetadataCheck's message lists both lists, the e4m3 ones
    # with their descale_layout.)
    with pytest.raises(MetadataError, match="descale_layout"):
        validate_metadata(stale)
    for bad in (32, 0, True, "128", 128.0):
        edited = dict(meta, value_layout=dict(meta["value_layout"],
                                              key_alignment=bad))
        with pytest.raises(MetadataError,
                           match="'key_alignment' must be (16 or 128|(an "
                                 "integer )?in \\[16, 128\\])" if c else
                           "key_alignment must be 16 or 128"):
            validate_metadata(edited)
    # The layout kernel's grid counts columns_per_thread columns a thread.
    assert meta["value_layout"]["columns_per_thread"] == 16
    for bad in (8, 0, True, "16"):
        edited = dict(meta, value_layout=dict(meta["value_layout"],
                                              columns_per_thread=bad))
        with pytest.raises(MetadataError,
                           match="'columns_per_thread' must be (1 or 16|(an "
                                 "integer )?in \\[1, 16\\])" if c else
                           "columns_per_thread must be 1 or 16"):
            validate_metadata(edited)


def test_e4m3_predicted_bytes(flashmlir):
    """The traffic prediction of an e4m3 kernel: Q, K, V of one byte (half
    the f16 kernel's reads for the same tiles, but for the tile counter's
    atomics), O of two (the same writes)."""
    e4m3 = flashmlir.compile(head_dim=128, dtype="e4m3", causal=True,
                             block_c=128, arch="sm_90a",
                             cache_dir="").metadata
    f16 = flashmlir.compile(head_dim=128, dtype="f16", causal=True,
                            arch="sm_90a", cache_dir="").metadata
    assert (e4m3["block_r"], e4m3["block_c"], e4m3["tile_scheduler"]) == \
        (f16["block_r"], f16["block_c"], f16["tile_scheduler"])
    shape = (2, 8, 2, 1000, 1000)
    read8, write8 = flashmlir.predicted_bytes(e4m3, *shape)
    read16, write16 = flashmlir.predicted_bytes(f16, *shape)
    counter = (8 * 2 * 8 + 1) * 32  # one 32-byte atomic per tile, one reset
    assert read8 - counter == (read16 - counter) // 2
    assert write8 == write16


@pytest.mark.parametrize("kwargs,message", [
    (dict(head_dim=128, block_c=80),
     "block_c a multiple of 32 from 64 to 256 (P's k-steps of 32 keys), "
     "got D = 128, block_c = 80"),
    (dict(head_dim=64), "e4m3 kernels take D of 128 or 256"),
    (dict(head_dim=128, rescale_threshold=8.0),
     "expected probs scale * 2^threshold to be at most 448"),
    (dict(head_dim=128, out_dtype="f32"),
     "out_dtype must be one of the strings f16, bf16 or e4m3, or None"),
    (dict(head_dim=128, out_dtype="e4m3"),
     "an e4m3 kernel writes O in f16 or bf16, got 'e4m3'"),
])
def test_compile_e4m3_refusals(flashmlir, kwargs, message):
    with pytest.raises(flashmlir.CompileError, match=re.escape(message)):
        flashmlir.compile(dtype="e4m3", arch="sm_90a", cache_dir="",
                          **kwargs)


def test_compile_module_e4m3(flashmlir):
    """An e4m3 fa.attention in a caller's module: one launch of the e4m3
    kernel (its V layout kernel in the same cubin, not a launch of its
    own)."""
    t = "memref<?x?x?x128xf8E4M3FN>"
    text = (f"func.func @f(%q: {t}, %k: {t}, %v: {t}, "
            "%o: memref<?x?x?x128xbf16>, %d: memref<f32>) {\n"
            "  fa.attention %q, %k, %v descale(%d, %d, %d : memref<f32>, "
            "memref<f32>, memref<f32>) outs(%o : memref<?x?x?x128xbf16>) : "
            f"{t}, {t}, {t}\n  return\n}}\n")
    module = flashmlir.compile_module(text, arch="sm_90a", cache_dir="")
    assert len(module.launches) == 1
    name, meta = module.launches[0]
    assert meta["dtype"] == "e4m3" and meta["out_dtype"] == "bf16"
    assert meta["value_layout"]["kernel"] in module.ptx


def test_fa_run_e4m3_random(fa_run):
    """fa-run --dtype e4m3 on random ragged causal GQA shapes, exact with P
    in f32."""
    rng = random.Random(18)
    for seed in range(4):
        flags = [f"--q-len={rng.choice([1, 37, 100])}",
                 f"--kv-len={rng.choice([5, 64, 131])}",
                 f"--head-dim={rng.choice([32, 64])}", "--q-heads=4",
                 f"--kv-heads={rng.choice([1, 2, 4])}", f"--seed={seed + 1}",
                 "--probs-scale=0", "--dtype=e4m3"]
        if rng.random() < 0.5:
            flags.append("--causal")
        proc = subprocess.run([fa_run, *flags], capture_output=True,
                              text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        err = float(re.search(r"O rel_l2_error=(\S+)", proc.stdout).group(1))
        assert err < 1e-5, proc.stdout
