"""Split-KV (flash-decoding) from Python: the kernel's metadata and launch
geometry, the auto rule (the same in Python and in the C runtime), option
errors, and (marked gpu) numerics on the H200 against an fp32 reference."""
import ctypes
import math
import sys

import pytest

from conftest import ROOT


@pytest.fixture(scope="module")
def c_runtime(build_dir):
    shared = build_dir / "lib" / "libFARuntime.so"
    if not shared.exists() and (build_dir / "lib" / "libFARuntime.a").exists():
        # The sanitizer build links the runtime statically
        # (lib/Runtime/CMakeLists.txt); the uninstrumented run checks it.
        pytest.skip("libFARuntime is a static library in this (sanitizer) "
                    "build: no shared object to load")
    lib = ctypes.CDLL(str(shared))
    lib.faAutoKVSplits.argtypes = [ctypes.c_longlong, ctypes.c_longlong,
                                   ctypes.c_longlong, ctypes.c_int,
                                   ctypes.c_int]
    lib.faAutoKVSplits.restype = ctypes.c_int
    return lib


def test_auto_rule_is_the_c_runtimes(c_runtime):
    """runtime.auto_kv_splits and faAutoKVSplits (fa::autoKVSplits) agree
    on every shape of a grid that crosses each of the rule's branches."""
    sys.path.insert(0, str(ROOT / "python"))
    from flashmlir.runtime import auto_kv_splits
    checked = 0
    tile_counts = list(range(1, 40)) + [64, 100, 105, 106, 131, 132, 500,
                                        527, 528, 1055, 1056]
    # DRAM GB/s: unknown, the H100's 3,352 (25 per SM), 30 per SM exactly
    # (on 132 SMs), the H200's 4,800.
    for sms in (1, 78, 108, 132, 264):
        for dram in (0, 3352, 3960, 4800):
            for tiles in tile_counts:
                for query_blocks in (1, 2, 16):
                    for blocks in (1, 2, 3, 4, 7, 64, 256, 1024, 5000):
                        want = c_runtime.faAutoKVSplits(tiles, query_blocks,
                                                        blocks, sms, dram)
                        assert auto_kv_splits(tiles, query_blocks, blocks,
                                              sms, dram) == want, \
                            (tiles, query_blocks, blocks, sms, dram)
                        checked += 1
    assert checked == 5 * 4 * 50 * 3 * 9
    # The decode rows of issue 17 on the H200 (132 SMs): B 1 H 32 at B_r 64
    # (32 tiles, 4 chunks), B 1 H 8 (16 chunks), B 4 H 32 (128 decode
    # tiles: a wave, two chunks); prefill tiles of a wave: no split.
    assert [auto_kv_splits(32, 1, 256, 132, 4800),
            auto_kv_splits(8, 1, 1024, 132, 4800),
            auto_kv_splits(128, 1, 64, 132, 4800),
            auto_kv_splits(128, 2, 64, 132, 4800)] == [4, 16, 2, 1]


def test_auto_rule_decode_branch():
    """Once the tiles fill 80% of a wave: two chunks for decode tiles (one
    query block a sequence and head) under four waves of at least four K/V
    blocks on a GPU of at least 30 GB/s of DRAM bandwidth per SM; no split
    for prefill tiles, four waves of decode tiles, chunks of fewer than two
    blocks, or a GPU of less bandwidth per SM (or unknown)."""
    sys.path.insert(0, str(ROOT / "python"))
    from flashmlir.runtime import auto_kv_splits
    h200, h100 = 4800, 3352
    # 32/8 heads packed (8 tiles a sequence), 16 to 64 sequences, 8k keys
    # at B_c 64: on the H200 two chunks beat one by 2-10%, on the H100 one
    # beats two by 0-6% (docs/serving.md).
    for b in (16, 32, 64):
        assert auto_kv_splits(8 * b, 1, 128, 132, h200) == 2
        assert auto_kv_splits(8 * b, 1, 128, 132, h100) == 1
        assert auto_kv_splits(8 * b, 1, 128, 132, 0) == 1
    # The threshold: 30 GB/s per SM, 3,960 on 132 SMs.
    assert auto_kv_splits(256, 1, 128, 132, 3960) == 2
    assert auto_kv_splits(256, 1, 128, 132, 3959) == 1
    # 106 tiles is 80% of 132 (the first count that fills), 527 the last
    # under four waves.
    assert auto_kv_splits(106, 1, 128, 132, h200) == 2
    assert auto_kv_splits(527, 1, 128, 132, h200) == 2
    assert auto_kv_splits(528, 1, 128, 132, h200) == 1
    # Three blocks a tile: chunks of fewer than two blocks -- no split.
    assert auto_kv_splits(200, 1, 3, 132, h200) == 1
    assert auto_kv_splits(200, 1, 4, 132, h200) == 2
    # Prefill (B 1, H 32, N 1k: 16 query blocks a head) stays unsplit.
    assert auto_kv_splits(512, 16, 8, 132, h200) == 1
    # Below 80% of a wave the wave rule applies to both, on either GPU.
    for dram in (h200, h100, 0):
        assert auto_kv_splits(32, 1, 256, 132, dram) == \
            auto_kv_splits(32, 4, 256, 132, dram) == 4


def test_split_kernel_metadata(flashmlir):
    from flashmlir import runtime
    k = flashmlir.compile(head_dim=128, kv_splits=4)
    m = k.metadata
    assert m["split_kv"] is True and m["kv_splits"] == 4
    # Decode's B_r: one consumer warpgroup at D <= 128.
    assert m["block_r"] == 64
    assert m["tile_scheduler"] == "one tile per CTA"
    assert [p["name"] for p in m["params"]][-8:] == [
        "B", "o_stride_b", "o_stride_h", "o_stride_n", "kv_splits",
        "o_partial", "lse_partial", "split_arrivals"]
    kinds = {p["name"]: p["kind"] for p in m["params"]}
    assert kinds["o_partial"] == "workspace" and \
        kinds["split_arrivals"] == "counter"
    kernel = runtime.Kernel(k.cubin, m)
    assert kernel.grid(1, 32, 1, None, 4) == (32, 4, 1)
    assert kernel.grid(2, 8, 100, None, 3) == (2 * 8 * 2, 3, 1)
    # None or 0: the metadata's default; N: N.
    assert kernel.kv_splits_for(1, 32, 1, 32768, 132, 4800) == 4
    assert kernel.kv_splits_for(1, 32, 1, 32768, 132, 4800, 7) == 7
    for bad in (-1, 1025, 2.0, True):
        with pytest.raises(runtime.KernelArgumentError, match="num_splits"):
            kernel.kv_splits_for(1, 32, 1, 32768, 132, 4800, bad)
    assert "kv_splits = 4 : i64" in k.mlir("attention")


def test_auto_split_kernel(flashmlir):
    from flashmlir import runtime
    k = flashmlir.compile(head_dim=256, kv_splits="auto")
    m = k.metadata
    assert m["split_kv"] is True and m["kv_splits"] == 0
    assert m["block_r"] == 128  # D 256 keeps the table's B_r
    kernel = runtime.Kernel(k.cubin, m)
    # 0: the auto rule on this launch's tiles and B_c (64 at D 256).
    tiles, blocks = 8, math.ceil(131072 / m["block_c"])
    assert kernel.kv_splits_for(1, 8, 1, 131072, 132, 4800) == \
        runtime.auto_kv_splits(tiles, 1, blocks, 132, 4800) > 1
    assert kernel.kv_splits_for(4, 32, 1000, 1000, 132, 4800) == 1
    # One query block a head at 128 tiles (a wave): the decode branch on
    # the H200's bandwidth, not on the H100's.
    assert kernel.kv_splits_for(4, 32, 1, 8192, 132, 4800) == 2
    assert kernel.kv_splits_for(4, 32, 1, 8192, 132, 3352) == 1


@pytest.mark.parametrize("bad,why", [
    (1, "kv_splits = 1 is no split"),
    (2000, "expected kv_splits in \\[1, 1024\\], got 2000"),
    ("some", "kv_splits must be None, 'auto' or a chunk count"),
    (True, "kv_splits must be None, 'auto' or a chunk count")])
def test_kv_splits_errors(flashmlir, bad, why):
    with pytest.raises(flashmlir.CompileError, match=why):
        flashmlir.compile(head_dim=128, kv_splits=bad)


def test_split_kv_needs_sm90(flashmlir):
    with pytest.raises(flashmlir.CompileError,
                       match="split-KV has a GPU kernel on sm_90a only"):
        flashmlir.compile(head_dim=64, arch="sm_80", kv_splits=4)


def test_metadata_checks(flashmlir):
    from flashmlir import runtime
    m = dict(flashmlir.compile(head_dim=128, kv_splits=4).metadata)
    m["params"] = m["params"][:-4]
    with pytest.raises(runtime.MetadataError, match="does not match"):
        runtime.validate_metadata(m)
    m = dict(flashmlir.compile(head_dim=128, kv_splits=4).metadata)
    m["kv_splits"] = 1025
    with pytest.raises(runtime.MetadataError, match="kv_splits"):
        runtime.validate_metadata(m)


# -- on the GPU ------------------------------------------------------------


def _reference(torch, q, k, v, scale, causal):
    group = q.shape[1] // k.shape[1]
    kf = k.float().repeat_interleave(group, 1)
    vf = v.float().repeat_interleave(group, 1)
    s = (q.float() @ kf.transpose(-1, -2)) * scale
    if causal:  # bottom-right: query i at key position i + Nk - Nq
        nq, nk = q.shape[2], k.shape[2]
        i = torch.arange(nq, device=q.device)[:, None] + nk - nq
        j = torch.arange(nk, device=q.device)[None, :]
        s = s.masked_fill(j > i, float("-inf"))
    return torch.softmax(s, -1) @ vf


@pytest.mark.gpu
@pytest.mark.parametrize("num_splits", [0, 3, 64])
@pytest.mark.parametrize("b,hq,hkv,nq,nk", [(1, 32, 32, 1, 32768),
                                            (2, 8, 2, 1, 1531),
                                            (3, 4, 4, 5, 777)])
# D = 96: partial O rows of 96 columns, three per lane in the merge.
@pytest.mark.parametrize("d", [96, 128])
def test_decode_matches_reference(cuda_flashmlir, num_splits, b, hq, hkv, nq,
                                  nk, d):
    """flashmlir.attention through the split-KV kernel (the auto rule picks
    it for these shapes, or num_splits forces it), against fp32."""
    torch, flashmlir = cuda_flashmlir
    torch.manual_seed(nk)
    q = torch.randn(b, hq, nq, d, device="cuda", dtype=torch.float16)
    k = torch.randn(b, hkv, nk, d, device="cuda", dtype=torch.float16)
    v = torch.randn(b, hkv, nk, d, device="cuda", dtype=torch.float16)
    out = flashmlir.attention(q, k, v, num_splits=num_splits)
    ref = _reference(torch, q, k, v, 1 / math.sqrt(d), False)
    err = ((out.float() - ref).norm() / ref.norm()).item()
    assert err <= 2e-3, err


@pytest.mark.gpu
def test_device_dram_bandwidth(cuda_flashmlir):
    """device_facts reads the DRAM bandwidth the auto rule's decode branch
    asks for (memory clock x bus width x 2) in GB/s: a data-centre GPU's
    is between 1 and 20 TB/s (the H100 SXM's 3,352, the H200's 4,800); a
    unit slip (kHz for MHz, bits for bytes) leaves that range."""
    torch, flashmlir = cuda_flashmlir
    from flashmlir import runtime
    runtime._DEVICE_FACTS.clear()
    _, sms, dram_gbps = runtime.device_facts(torch.cuda.current_device())
    assert 1000 <= dram_gbps <= 20000, dram_gbps
    # The decode branch follows it: 2 chunks for a wave of decode tiles at
    # 30 GB/s per SM or more, 1 below.
    want = 2 if dram_gbps >= 30 * sms else 1
    assert runtime.auto_kv_splits(sms, 1, 128, sms, dram_gbps) == want


@pytest.mark.gpu
def test_decode_with_kv_cache_mask(cuda_flashmlir):
    """flash_attn_func's bottom-right causal decode over a cache, split."""
    torch, flashmlir = cuda_flashmlir
    torch.manual_seed(3)
    b, hq, hkv, nq, nk, d = 2, 16, 4, 3, 20000, 128
    q = torch.randn(b, nq, hq, d, device="cuda", dtype=torch.float16)
    k = torch.randn(b, nk, hkv, d, device="cuda", dtype=torch.float16)
    v = torch.randn(b, nk, hkv, d, device="cuda", dtype=torch.float16)
    out = flashmlir.flash_attn_func(q, k, v, causal=True, num_splits=5)
    ref = _reference(torch, *(t.transpose(1, 2) for t in (q, k, v)),
                     1 / math.sqrt(d), True).transpose(1, 2)
    err = ((out.float() - ref).norm() / ref.norm()).item()
    assert err <= 2e-3, err


@pytest.mark.gpu
def test_num_splits_refused_on_unsplit_kernels(cuda_flashmlir):
    torch, flashmlir = cuda_flashmlir
    from flashmlir import runtime
    q = torch.randn(1, 2, 64, 128, device="cuda", dtype=torch.float16)
    with pytest.raises(runtime.KernelArgumentError, match="num_splits"):
        flashmlir.attention(q, q, q, num_splits=-2)


def test_predicted_bytes(flashmlir, c_runtime):
    """The traffic rule for split kernels through Python and the C runtime:
    the fagpu-io-report figures of test/Transforms/FAGPU/io-report.mlir
    (B 1, Hq 8, one query, 4096 keys, 4 chunks), checked with ncu on the
    H200 (bench/results/2026-12-01-io-check-splitkv.md)."""
    import json
    m = flashmlir.compile(head_dim=128, kv_splits=4).metadata
    assert flashmlir.predicted_bytes(m, 1, 8, 8, 1, 4096) == (17321216, 20992)
    reads, writes = ctypes.c_ulonglong(), ctypes.c_ulonglong()
    c_runtime.faMetadataPredictedBytes.argtypes = [
        ctypes.c_char_p] + [ctypes.c_long] * 5 + [
        ctypes.POINTER(ctypes.c_ulonglong)] * 2
    assert c_runtime.faMetadataPredictedBytes(
        json.dumps(m).encode(), 1, 8, 8, 1, 4096, ctypes.byref(reads),
        ctypes.byref(writes)) == 0
    assert (reads.value, writes.value) == (17321216, 20992)
    auto = flashmlir.compile(head_dim=128, kv_splits="auto").metadata
    with pytest.raises(ValueError, match="give kv_splits"):
        flashmlir.predicted_bytes(auto, 1, 8, 8, 1, 4096)
    assert flashmlir.predicted_bytes(auto, 1, 8, 8, 1, 4096, kv_splits=4) \
        == (17321216, 20992)
    assert c_runtime.faMetadataPredictedBytes(
        json.dumps(auto).encode(), 1, 8, 8, 1, 4096, ctypes.byref(reads),
        ctypes.byref(writes)) == 1
    plain = flashmlir.compile(head_dim=128).metadata
    with pytest.raises(ValueError, match="does not split"):
        flashmlir.predicted_bytes(plain, 1, 8, 8, 1, 4096, kv_splits=4)
