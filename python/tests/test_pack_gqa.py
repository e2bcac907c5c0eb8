"""Pack-GQA at decode (include/fa/Model/PackGQA.h): the rule (the same in
Python and in the C runtime), the views a packed launch reads and writes
(checked on the CPU against the grouped-query reference), and (marked gpu)
the public decode calls against an fp32 reference, with and without a
pack, and their freedom from host synchronisation."""
import ctypes
import math
import os
import sys

import pytest

from conftest import ROOT, masked_reference


@pytest.fixture(scope="module")
def c_runtime(build_dir):
    shared = build_dir / "lib" / "libFARuntime.so"
    if not shared.exists() and (build_dir / "lib" / "libFARuntime.a").exists():
        pytest.skip("libFARuntime is a static library in this (sanitizer) "
                    "build: no shared object to load")
    lib = ctypes.CDLL(str(shared))
    lib.faDecodeHeadsPerTile.argtypes = [ctypes.c_longlong, ctypes.c_longlong,
                                         ctypes.c_longlong, ctypes.c_int]
    lib.faDecodeHeadsPerTile.restype = ctypes.c_int
    return lib


def _python_rule():
    sys.path.insert(0, str(ROOT / "python"))
    from flashmlir import decode_heads_per_tile
    return decode_heads_per_tile


def test_rule_is_the_c_runtimes(c_runtime):
    """flashmlir.decode_heads_per_tile and faDecodeHeadsPerTile
    (fa::model::decodeHeadsPerTile) agree across each branch of the rule:
    one query or several, grouped or not, masked or not, heads that do not
    divide."""
    rule = _python_rule()
    checked = packed = 0
    for queries in (0, 1, 2, 16):
        for hq in (1, 4, 8, 12, 32, 64, 128):
            for hkv in (0, 1, 2, 3, 8, 32, 64):
                for masked in (False, True):
                    want = c_runtime.faDecodeHeadsPerTile(queries, hq, hkv,
                                                          int(masked))
                    assert rule(queries, hq, hkv, masked) == want, \
                        (queries, hq, hkv, masked)
                    checked += 1
                    packed += want > 1
    assert checked == 392 and packed > 10


@pytest.mark.parametrize("queries,hq,hkv,masked,want", [
    (1, 32, 8, False, 4), (1, 64, 8, False, 8), (1, 8, 8, False, 1),
    (1, 32, 8, True, 1), (2, 32, 8, False, 1), (1, 12, 8, False, 1),
    (1, 128, 1, False, 128)])
def test_rule_cases(queries, hq, hkv, masked, want):
    assert _python_rule()(queries, hq, hkv, masked) == want


@pytest.mark.parametrize("b,hq,hkv,nk", [(2, 32, 8, 77), (3, 64, 8, 130),
                                          (1, 6, 2, 1)])
def test_packed_views_compute_grouped_decode(b, hq, hkv, nk):
    """What a packed launch computes, on the CPU: multi-head attention of
    the [B, Hkv, G, D] view of q over K/V [B, Hkv, Nk, D], unmasked, written
    through the same view of O, is grouped-query decode of q
    [B, 1, Hq, D] (causal, bottom-right: the mask the public calls drop);
    and the packed LSE [B, Hkv, G] read as [B, Hq, 1] is its LSE."""
    import torch
    sys.path.insert(0, str(ROOT / "python"))
    from flashmlir import _pack_decode_heads
    torch.manual_seed(b * hq + nk)
    d = 64
    group = hq // hkv
    q = torch.randn(b, 1, hq, d, dtype=torch.float64)
    k = torch.randn(b, nk, hkv, d, dtype=torch.float64)
    v = torch.randn(b, nk, hkv, d, dtype=torch.float64)
    out = torch.full_like(q, float("nan"))
    qp, op = _pack_decode_heads(q, out, hkv, group)
    assert qp.shape == (b, hkv, group, d) and op.shape == qp.shape
    assert qp.data_ptr() == q.data_ptr() and op.data_ptr() == out.data_ptr()
    # The kernel's view: multi-head (Hq' = Hkv), G queries, no mask.
    kh, vh = k.transpose(1, 2), v.transpose(1, 2)
    scale = 1 / math.sqrt(d)
    op.copy_(masked_reference(torch, qp, kh, vh, scale, dtype=torch.float64))
    s = (qp @ kh.transpose(-1, -2)) * scale
    lse_packed = torch.logsumexp(s, -1)  # [B, Hkv, G]
    want = masked_reference(torch, q.transpose(1, 2), kh, vh, scale,
                            causal=True, dtype=torch.float64).transpose(1, 2)
    assert torch.allclose(out, want, rtol=0, atol=1e-12)
    s_ref = (q.transpose(1, 2) @ kh.repeat_interleave(group, 1).transpose(
        -1, -2)) * scale
    assert torch.allclose(lse_packed.view(b, hq, 1),
                          torch.logsumexp(s_ref, -1), rtol=0, atol=1e-12)


# On the H200 (gpu): the public decode calls, packed (Nq = 1, grouped,
# causal or not) and not packed (a window, Nq > 1), against fp32.

def _cache(torch, b, nk, hkv, d, page, dtype):
    if not page:
        k = torch.randn(b, nk, hkv, d, device="cuda", dtype=dtype)
        return k, torch.randn_like(k), None
    max_pages = math.ceil(nk / page)
    pages = b * max_pages + 1
    k = torch.randn(pages, page, hkv, d, device="cuda", dtype=dtype)
    table = torch.randperm(pages, device="cuda")[:b * max_pages].view(
        b, max_pages).to(torch.int32)
    return k, torch.randn_like(k), table


def _dense(torch, cache, table, b, nk):
    """[B, Hkv, nk, D] from a contiguous or paged cache."""
    if table is None:
        return cache[:, :nk].transpose(1, 2).float()
    rows = cache[table.long()].flatten(1, 2)  # [B, pages * page, Hkv, D]
    return rows[:, :nk].transpose(1, 2).float()


@pytest.mark.gpu
@pytest.mark.parametrize("page", [0, 16, 64])
@pytest.mark.parametrize("b,hq,hkv,nq,window", [
    (2, 32, 8, 1, (-1, -1)), (3, 64, 8, 1, (-1, -1)), (1, 32, 8, 1, (63, 0)),
    (2, 32, 8, 4, (-1, -1)), (2, 8, 8, 1, (-1, -1))])
@pytest.mark.parametrize("causal", [False, True])
def test_kvcache_decode_matches_reference(cuda_flashmlir, page, b, hq, hkv,
                                          nq, window, causal):
    torch, flashmlir = cuda_flashmlir
    torch.manual_seed(hq + nq + page)
    d, capacity = 128, 1000
    lengths = [capacity - 3 * i for i in range(b)]
    k_cache, v_cache, table = _cache(torch, b, capacity, hkv, d, page,
                                     torch.float16)
    q = torch.randn(b, nq, hq, d, device="cuda", dtype=torch.float16)
    lens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
    kernel_dir = os.environ.get("FLASHMLIR_PAGED_KERNEL_DIR") if page else \
        None
    out, lse = flashmlir.flash_attn_with_kvcache(
        q, k_cache, v_cache, cache_seqlens=lens, block_table=table,
        causal=causal, window_size=window, return_softmax_lse=True,
        kernel_dir=kernel_dir)
    assert lse.shape == (b, hq, nq)
    scale = 1 / math.sqrt(d)
    for i, n in enumerate(lengths):
        kb = _dense(torch, k_cache, table, b, n)[i:i + 1]
        vb = _dense(torch, v_cache, table, b, n)[i:i + 1]
        qb = q[i:i + 1].transpose(1, 2).float()
        ref = masked_reference(torch, qb, kb, vb, scale, causal=causal,
                               window_size=window)
        half = masked_reference(torch, qb.half(), kb.half(), vb.half(), scale,
                                causal=causal, window_size=window,
                                dtype=torch.float16).float()
        err = (out[i:i + 1].transpose(1, 2).float() - ref).norm() / \
            ref.norm()
        torch_err = (half - ref).norm() / ref.norm()
        assert err <= 2 * torch_err + 1e-4, (i, err.item(), torch_err.item())


@pytest.mark.gpu
@pytest.mark.parametrize("hq,hkv", [(32, 8), (64, 8)])
def test_decode_calls_never_synchronize(cuda_flashmlir, hq, hkv):
    """No call of the decode path reads device memory back to the host:
    torch's sync debug mode raises on any synchronising copy."""
    torch, flashmlir = cuda_flashmlir
    b, nk, d = 4, 4096, 128
    k_cache = torch.randn(b, nk, hkv, d, device="cuda", dtype=torch.float16)
    v_cache = torch.randn_like(k_cache)
    q = torch.randn(b, 1, hq, d, device="cuda", dtype=torch.float16)
    k_new = torch.randn(b, 1, hkv, d, device="cuda", dtype=torch.float16)
    lens = torch.full((b,), 1000, dtype=torch.int32, device="cuda")
    # Warm-up: the kernels load (their first launch may allocate).
    flashmlir.flash_attn_with_kvcache(q, k_cache, v_cache, k=k_new,
                                      v=k_new, cache_seqlens=lens,
                                      causal=True)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(3):
            flashmlir.flash_attn_with_kvcache(q, k_cache, v_cache, k=k_new,
                                              v=k_new, cache_seqlens=lens,
                                              causal=True)
            flashmlir.flash_attn_func(q, k_cache, v_cache, causal=True)
            lens.add_(1)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
