"""KV caches from Python (issue 17): kernels taking per-sequence key
lengths and a paged cache, their metadata and launch parameters, the
argument checks of the runtime and of flash_attn_with_kvcache, and (marked
gpu) numerics against an fp32 reference that gathers each sequence's keys
from its pages."""
import math

import pytest


def _names(meta):
    return [p["name"] for p in meta["params"]]


def test_paged_kernel_metadata(flashmlir):
    from flashmlir import runtime
    k = flashmlir.compile(head_dim=128, kv_splits="auto", kv_lengths=True,
                          page_size=64, causal=True, bottom_right=True)
    m = k.metadata
    assert m["kv_lengths"] is True and m["page_size"] == 64
    assert "_kvlens_paged64" in m["kernel"]
    names = _names(m)
    # The cache's parameters after B and o's strides, before split-KV's.
    i = names.index("kv_lengths")
    assert names[i - 1] == "o_stride_n"
    assert names[i:i + 5] == ["kv_lengths", "block_table", "max_pages",
                              "num_pages", "kv_splits"]
    params = {p["name"]: p for p in m["params"]}
    assert params["k"]["shape"] == ["pages", "Hkv", "page_size", "D"]
    assert params["k"]["rank"] == 4 and params["k"]["box"][1] <= 64
    assert params["block_table"]["kind"] == "pointer"
    assert params["block_table"]["dtype"] == "i32"
    kernel = runtime.Kernel(k.cubin, m)
    assert kernel.page_size == 64
    # The kernel reads the page through the table before its TMA loads.
    assert "_paged64" in k.name
    ptx = k.ptx
    assert "cp.async.bulk.tensor.4d" in ptx


def test_lengths_only_kernel(flashmlir):
    k = flashmlir.compile(head_dim=64, kv_lengths=True, causal=True,
                          bottom_right=True)
    m = k.metadata
    assert m["kv_lengths"] is True and m["page_size"] == 0
    assert "kv_lengths" in _names(m) and "block_table" not in _names(m)
    params = {p["name"]: p for p in m["params"]}
    assert params["k"]["shape"] == ["B", "Hkv", "Nk", "D"]


def test_metadata_param_lists_are_checked(flashmlir):
    from flashmlir import runtime
    m = dict(flashmlir.compile(head_dim=128, kv_lengths=True,
                               page_size=128).metadata)
    runtime.validate_metadata(m)
    bad = dict(m)
    bad["page_size"] = 0  # the params still name a block table
    with pytest.raises(runtime.MetadataError, match="does not match"):
        runtime.validate_metadata(bad)
    bad = dict(m)
    bad["kv_lengths"] = "yes"
    with pytest.raises(runtime.MetadataError, match="kv_lengths"):
        runtime.validate_metadata(bad)
    bad = dict(m)
    bad["page_size"] = -1
    with pytest.raises(runtime.MetadataError, match="page_size"):
        runtime.validate_metadata(bad)


@pytest.mark.parametrize("kwargs,message", [
    (dict(page_size=-4), "expected a page of 1 to 2\\^20 rows, got -4"),
    (dict(page_size=24), "the page size must be a multiple of 16"),
    (dict(page_size=64, block_c=48),
     "block_c=48 and the page size 64 do not divide one another"),
    (dict(page_size=64, arch="sm_80"), "sm_90a \\(wgmma\\) only"),
    (dict(kv_lengths=True, arch="sm_100a"), "sm_90a \\(wgmma\\) only"),
    (dict(page_size=True), "page_size must be an integer")])
def test_bad_cache_options(flashmlir, kwargs, message):
    with pytest.raises(flashmlir.CompileError, match=message):
        flashmlir.compile(head_dim=128, **kwargs)


def test_blocks_span_short_pages(flashmlir):
    # Pages shorter than the table's B_c: the block spans whole pages, one
    # TMA box (of the page's rows) each; a page of 48 rows and B_c = 64
    # divide neither way: B_c becomes 48.
    m = flashmlir.compile(head_dim=128, kv_lengths=True, page_size=16,
                          kv_splits="auto").metadata
    assert m["block_c"] == 64 and m["tma_box_rows_kv"] == 16
    params = {p["name"]: p for p in m["params"]}
    assert params["k"]["box"] == [64, 16] and params["v"]["box"] == [64, 16]
    m = flashmlir.compile(head_dim=128, kv_lengths=True, page_size=48,
                          kv_splits="auto").metadata
    assert m["block_c"] == 48 and m["tma_box_rows_kv"] == 48


def test_with_kvcache_refuses_what_it_does_not_do(flashmlir):
    from flashmlir import runtime
    torch = pytest.importorskip("torch")
    q = torch.zeros(1, 1, 8, 128, dtype=torch.float16)
    cache = torch.zeros(1, 64, 8, 128, dtype=torch.float16)
    for kwargs, message in [
            (dict(rotary_cos=q), "rotary"),
            (dict(cache_batch_idx=q), "cache_batch_idx"),
            (dict(window_size=(4, -1)), "left only"),
            (dict(k=q), "both k and v"),
            (dict(block_table=torch.zeros(1, 2, dtype=torch.int64)),
             "block_table must be an int32 tensor")]:
        with pytest.raises(runtime.KernelArgumentError, match=message):
            flashmlir.flash_attn_with_kvcache(q, cache, cache, **kwargs)


# -- on the GPU ------------------------------------------------------------


def _reference(torch, q, k_cache, v_cache, table, lengths, page, causal):
    """fp32 attention of each sequence to the keys it gathers from its
    pages (bottom-right causal), [B, Hq, Nq, D]."""
    outs = []
    for b, n in enumerate(lengths):
        j = torch.arange(n, device=q.device)
        kb = k_cache[table[b].long()[j // page], j % page].transpose(0, 1)
        vb = v_cache[table[b].long()[j // page], j % page].transpose(0, 1)
        group = q.shape[1] // kb.shape[0]
        kb = kb.float().repeat_interleave(group, 0)
        vb = vb.float().repeat_interleave(group, 0)
        s = (q[b].float() @ kb.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        if causal:
            nq = q.shape[2]
            i = torch.arange(nq, device=q.device)[:, None] + n - nq
            s = s.masked_fill(j[None, :] > i, float("-inf"))
        outs.append(torch.softmax(s, -1).nan_to_num(0.0) @ vb)
    return torch.stack(outs)


@pytest.mark.gpu
@pytest.mark.parametrize("page,d", [(16, 128), (64, 128), (64, 96)])
@pytest.mark.parametrize("b,hq,hkv,nq,lengths", [
    (3, 8, 2, 1, [700, 1, 64]), (2, 4, 4, 9, [300, 1000])])
def test_paged_decode_matches_reference(cuda_flashmlir, page, d, b, hq, hkv,
                                        nq, lengths):
    torch, flashmlir = cuda_flashmlir
    torch.manual_seed(page + nq)
    max_pages = math.ceil(max(lengths) / page)
    pages = b * max_pages + 3
    k_cache = torch.randn(pages, page, hkv, d, device="cuda",
                          dtype=torch.float16)
    v_cache = torch.randn_like(k_cache)
    table = torch.randperm(pages, device="cuda")[:b * max_pages].view(
        b, max_pages).to(torch.int32)
    q = torch.randn(b, nq, hq, d, device="cuda", dtype=torch.float16)
    lens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
    # The kernels of bench/build_paged_kernels.sh (FLASHMLIR_PAGED_KERNEL_DIR,
    # default .paged), else compiled in-process.
    import os
    kernel_dir = os.environ.get("FLASHMLIR_PAGED_KERNEL_DIR", ".paged")
    out = flashmlir.flash_attn_with_kvcache(
        q, k_cache, v_cache, cache_seqlens=lens, block_table=table,
        causal=True, kernel_dir=kernel_dir)
    ref = _reference(torch, q.transpose(1, 2), k_cache, v_cache, table,
                     lengths, page, True)
    err = (out.transpose(1, 2).float() - ref).abs().max().item()
    assert err < 2e-3, err


@pytest.mark.gpu
def test_c_runtime_kv_cache_launch(cuda_flashmlir):
    """faKernelLaunchKVCache: a paged cache in flash-attn's layout, split-KV
    decode with ragged lengths (one empty), against the fp32 reference; and
    its refusals (no table for a paged kernel, the wrong page size)."""
    import ctypes
    import os
    from conftest import load_c_runtime
    torch, flashmlir = cuda_flashmlir
    lib, _, strides = load_c_runtime()
    kdir = os.environ.get("FLASHMLIR_PAGED_KERNEL_DIR", ".paged")
    kernel = ctypes.c_void_p()
    prefix = f"{kdir}/sm_90a_d128_f16_causal_bralign_splitkv_kvlens_paged16"
    assert lib.faKernelLoadFiles(prefix.encode(), 0,
                                 ctypes.byref(kernel)) == 0, \
        lib.faRuntimeLastError()
    b, hq, hkv, d, page = 3, 8, 2, 128, 16
    lengths = [300, 0, 17]
    max_pages = 19
    pages = b * max_pages + 2
    torch.manual_seed(11)
    k_cache = torch.randn(pages, page, hkv, d, device="cuda",
                          dtype=torch.float16)
    v_cache = torch.randn_like(k_cache)
    table = torch.randperm(pages, device="cuda")[:b * max_pages].view(
        b, max_pages).to(torch.int32).contiguous()
    lens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
    q = torch.randn(b, 1, hq, d, device="cuda", dtype=torch.float16)
    out = torch.full_like(q, float("nan"))
    lse = torch.empty(b, hq, 1, device="cuda")

    lib.faKernelLaunchKVCache.restype = ctypes.c_int
    tensors = []
    for t in (q, k_cache, v_cache, out):
        tensors += [ctypes.c_void_p(t.data_ptr()), ctypes.byref(strides(t))]
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)

    def launch(table_ptr, rows):
        return lib.faKernelLaunchKVCache(
            kernel, *tensors, ctypes.c_void_p(lse.data_ptr()), b, hq, hkv, 1,
            ctypes.c_longlong(pages), rows, ctypes.c_void_p(lens.data_ptr()),
            table_ptr, max_pages, ctypes.c_float(1 / math.sqrt(d)), 0, stream)

    assert launch(ctypes.c_void_p(table.data_ptr()), page) == 0, \
        lib.faRuntimeLastError()
    torch.cuda.synchronize()
    ref = _reference(torch, q.transpose(1, 2), k_cache, v_cache, table,
                     lengths, page, True)
    err = (out.transpose(1, 2).float() - ref).abs().max().item()
    assert err < 2e-3, err
    assert torch.isneginf(lse[1]).all()
    assert launch(None, page) == 1
    assert b"give its block table" in lib.faRuntimeLastError()
    assert launch(ctypes.c_void_p(table.data_ptr()), 32) == 1
    assert b"reads pages of 16 rows" in lib.faRuntimeLastError()
    lib.faKernelDestroy(kernel)
