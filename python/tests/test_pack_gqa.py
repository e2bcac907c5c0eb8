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


def test_query_group_rule_is_the_c_runtimes(c_runtime):
    """flashmlir.query_group_for and faQueryGroupFor (fa::model::
    queryGroupFor) agree: queries 0 to 17 around the 16 limit, grouped or
    not, groups that are powers of two or not, masked or not, K/V bytes
    around the 64 MiB floor."""
    sys.path.insert(0, str(ROOT / "python"))
    from flashmlir import query_group_for
    c_runtime.faQueryGroupFor.argtypes = [ctypes.c_longlong] * 3 + \
        [ctypes.c_int, ctypes.c_longlong]
    checked = packed = 0
    for queries in (0, 1, 2, 7, 16, 17):
        for hq in (1, 4, 8, 12, 24, 32, 64, 128, 256):
            for hkv in (0, 1, 2, 3, 8, 32):
                for masked in (False, True):
                    for kv_bytes in (0, (64 << 20) - 1, 64 << 20, 1 << 40):
                        want = c_runtime.faQueryGroupFor(
                            queries, hq, hkv, int(masked), kv_bytes)
                        assert query_group_for(queries, hq, hkv, masked,
                                               kv_bytes) == want, \
                            (queries, hq, hkv, masked, kv_bytes)
                        checked += 1
                        packed += want > 0
    assert checked == 2592 and packed > 40


@pytest.mark.parametrize("queries,hq,hkv,masked,mib,want", [
    (4, 32, 8, True, 128, 4), (16, 64, 8, True, 128, 8),
    (2, 32, 8, False, 64, 4), (1, 32, 8, True, 128, 4),
    (1, 32, 8, False, 128, 0), (17, 32, 8, True, 128, 0),
    (4, 24, 8, True, 128, 0), (4, 8, 8, True, 128, 0),
    (4, 256, 2, True, 128, 0), (4, 32, 8, True, 16, 0)])
def test_query_group_rule_cases(queries, hq, hkv, masked, mib, want):
    sys.path.insert(0, str(ROOT / "python"))
    from flashmlir import query_group_for
    assert query_group_for(queries, hq, hkv, masked, mib << 20) == want


@pytest.mark.parametrize("b,hq,hkv,nq,nk,window", [
    (2, 32, 8, 4, 77, 0), (1, 64, 8, 7, 130, 0), (3, 16, 8, 16, 40, 0),
    (2, 32, 8, 1, 90, 20), (1, 32, 8, 5, 200, 33)])
def test_query_group_packing_computes_grouped_attention(b, hq, hkv, nq, nk,
                                                        window):
    """What a query-group launch computes, on the CPU: Q packed [B, Hkv,
    Nq G, D] (flashmlir's copy), each matrix attended as one head with row
    r's mask that of query r / G (bottom-right causal, a window), O and the
    LSE unpacked, is grouped-query attention of q [B, Nq, Hq, D]."""
    import torch
    sys.path.insert(0, str(ROOT / "python"))
    from flashmlir import _pack_query_heads, _unpack_query_heads
    torch.manual_seed(b * hq + nq + nk)
    d, group = 32, hq // hkv
    q = torch.randn(b, nq, hq, d, dtype=torch.float64)
    k = torch.randn(b, nk, hkv, d, dtype=torch.float64)
    v = torch.randn(b, nk, hkv, d, dtype=torch.float64)
    kh, vh = k.transpose(1, 2), v.transpose(1, 2)
    scale = 1 / math.sqrt(d)
    packed = _pack_query_heads(q, hkv, group)
    assert packed.shape == (b, hkv, nq * group, d)
    # The kernel's masks: row r is query r // G at key position
    # r // G + nk - nq.
    s = (packed @ kh.transpose(-1, -2)) * scale
    position = torch.arange(nq * group)[:, None] // group + (nk - nq)
    j = torch.arange(nk)[None, :]
    visible = j <= position
    if window:
        visible &= (position - j).abs() < window
    s = s.masked_fill(~visible, float("-inf"))
    packed_out = torch.softmax(s, -1) @ vh
    packed_lse = torch.logsumexp(s, -1)  # [B, Hkv, Nq G]
    out = torch.full_like(q, float("nan"))
    _unpack_query_heads(packed_out, out, group)
    lse = packed_lse.view(b, hkv, nq, group).permute(0, 1, 3, 2).reshape(
        b, hq, nq)
    want, want_lse = masked_reference(
        torch, q.transpose(1, 2), kh, vh, scale, causal=True, window=window,
        dtype=torch.float64, with_lse=True)
    assert torch.allclose(out, want.transpose(1, 2), rtol=0, atol=1e-12)
    assert torch.allclose(lse, want_lse, rtol=0, atol=1e-12)


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


# On the H200 (gpu): the public decode calls, packed as views (Nq = 1,
# grouped, causal or not), packed by a query-group kernel (Nq 2-16, or a
# window), and not packed (multi-head), against fp32.

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


def _decode_inputs(torch, nq, hq, hkv, capacity, lengths, page, d=128):
    """A decode call's f16 inputs: q [B, Nq, Hq, D], caches of `capacity`
    keys (pages of `page`, 0: contiguous) and their table, the sequences'
    `lengths` (B of them) on the device, and the kernel folder of that
    cache kind."""
    b = len(lengths)
    k_cache, v_cache, table = _cache(torch, b, capacity, hkv, d, page,
                                     torch.float16)
    q = torch.randn(b, nq, hq, d, device="cuda", dtype=torch.float16)
    lens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
    kernel_dir = os.environ.get("FLASHMLIR_PAGED_KERNEL_DIR") if page else \
        None
    return q, k_cache, v_cache, table, lens, kernel_dir


def _check_decode(torch, q, k_cache, v_cache, table, lengths, out, lse,
                  causal, window):
    """O [B, Nq, Hq, D] and the LSE [B, Hq, Nq] of a decode call against
    fp32, sequence by sequence: O within flash-attention's 2x rule (twice
    torch's f16 error), the LSE (unpacked where a kernel packed the heads)
    within 2e-3; an empty sequence's O zero and its LSE -inf."""
    scale = 1 / math.sqrt(q.shape[3])
    b = q.shape[0]
    for i, n in enumerate(lengths):
        if n == 0:
            assert (out[i] == 0).all() and torch.isneginf(lse[i]).all(), i
            continue
        kb = _dense(torch, k_cache, table, b, n)[i:i + 1]
        vb = _dense(torch, v_cache, table, b, n)[i:i + 1]
        qb = q[i:i + 1].transpose(1, 2).float()
        ref, lse_ref = masked_reference(torch, qb, kb, vb, scale,
                                        causal=causal, window_size=window,
                                        with_lse=True)
        half = masked_reference(torch, qb.half(), kb.half(), vb.half(), scale,
                                causal=causal, window_size=window,
                                dtype=torch.float16).float()
        err = (out[i:i + 1].transpose(1, 2).float() - ref).norm() / \
            ref.norm()
        torch_err = (half - ref).norm() / ref.norm()
        assert err <= 2 * torch_err + 1e-4, (i, err.item(), torch_err.item())
        lse_err = (lse[i] - lse_ref[0]).abs().max().item()
        assert lse_err <= 2e-3, (i, lse_err)


@pytest.mark.gpu
@pytest.mark.parametrize("page", [0, 16, 64])
@pytest.mark.parametrize("b,hq,hkv,nq,window", [
    (2, 32, 8, 1, (-1, -1)), (3, 64, 8, 1, (-1, -1)), (1, 32, 8, 1, (63, 0)),
    (2, 32, 8, 4, (-1, -1)), (2, 8, 8, 1, (-1, -1)), (3, 32, 8, 2, (-1, -1)),
    (2, 64, 8, 7, (-1, -1)), (1, 32, 8, 16, (-1, -1)),
    (2, 32, 8, 4, (63, 0))])
@pytest.mark.parametrize("causal", [False, True])
def test_kvcache_decode_matches_reference(cuda_flashmlir, page, b, hq, hkv,
                                          nq, window, causal):
    torch, flashmlir = cuda_flashmlir
    torch.manual_seed(hq + nq + page)
    capacity = 1000
    lengths = [capacity - 3 * i for i in range(b)]
    q, k_cache, v_cache, table, lens, kernel_dir = _decode_inputs(
        torch, nq, hq, hkv, capacity, lengths, page)
    out, lse = flashmlir.flash_attn_with_kvcache(
        q, k_cache, v_cache, cache_seqlens=lens, block_table=table,
        causal=causal, window_size=window, return_softmax_lse=True,
        kernel_dir=kernel_dir)
    assert lse.shape == (b, hq, nq)
    _check_decode(torch, q, k_cache, v_cache, table, lengths, out, lse,
                  causal, window)


@pytest.mark.gpu
@pytest.mark.parametrize("page", [0, 16, 64])
@pytest.mark.parametrize("hq,nq,window", [
    (32, 2, (-1, -1)), (32, 4, (-1, -1)), (64, 7, (-1, -1)),
    (32, 16, (-1, -1)), (64, 1, (63, 0)), (32, 4, (63, 0))])
def test_query_group_decode_matches_reference(cuda_flashmlir, page, hq, nq,
                                              window):
    """flash_attn_with_kvcache through a query-group kernel (caches of 64
    MiB and more: query_group_for packs): the G query heads of a K/V head
    packed query by query, causal (bottom-right) and windows, ragged
    lengths, contiguous and paged; O and the LSE against fp32, and the call
    did pack."""
    torch, flashmlir = cuda_flashmlir
    torch.manual_seed(hq + nq + page)
    hkv, capacity = 8, 8192
    lengths = [capacity - 37 * i for i in range(2)]
    q, k_cache, v_cache, table, lens, kernel_dir = _decode_inputs(
        torch, nq, hq, hkv, capacity, lengths, page)
    flashmlir._calls.clear()
    out, lse = flashmlir.flash_attn_with_kvcache(
        q, k_cache, v_cache, cache_seqlens=lens, block_table=table,
        causal=True, window_size=window, return_softmax_lse=True,
        kernel_dir=kernel_dir)
    (call,) = flashmlir._calls.values()
    assert call.query_group == hq // hkv
    _check_decode(torch, q, k_cache, v_cache, table, lengths, out, lse,
                  True, window)


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
