"""An e4m3 KV cache beside a 16-bit Q through flash_attn_with_kvcache
(fa-compile --kv-dtype e4m3: the producer warpgroup widens the cache's
tiles on chip). CPU: the metadata fa-compile writes for such a kernel and
the Python runtime's checks of it. GPU (marked gpu): O and the LSE against
an fp32 reference on the dequantised cache, contiguous and paged, per-tensor
and per-(batch, K/V head) descales, split-KV, grouped heads, the quantising
append, and the refusals of bad descales."""
import json
import math
import os
import subprocess

import pytest

from conftest import masked_reference
from test_pack_gqa import _cache, _check_decode, _dense


def _compile(build_dir, tmp_path, *flags):
    out = tmp_path / "k"
    result = subprocess.run(
        [str(build_dir / "bin" / "fa-compile"), "--arch", "sm_90a",
         "--head-dim", "128", "--kv-lengths", "--kv-dtype", "e4m3",
         *flags, "-o", str(out)],
        capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return json.loads((tmp_path / "k.json").read_text())


def test_metadata_names_the_cache_and_its_descales(build_dir, tmp_path,
                                                   flashmlir, metadata_check):
    """The kernel's k and v maps read e4m3 codes (boxes of 128 one-byte
    columns), its parameters end in k_descale, v_descale, descale_layout,
    and both metadata readers (the C runtime's and Python's) take it;
    kv_dtype says e4m3."""
    runtime = flashmlir.runtime
    meta = _compile(build_dir, tmp_path, "--page-size", "64")
    assert meta["dtype"] == "f16" and meta["kv_dtype"] == "e4m3"
    params = {p["name"]: p for p in meta["params"]}
    assert params["q"]["dtype"] == "f16" and params["q"]["box"][0] == 64
    for name in ("k", "v"):
        assert params[name]["dtype"] == "e4m3"
        assert params[name]["box"] == [128, 64]
    names = [p["name"] for p in meta["params"]]
    assert names[-3:] == ["k_descale", "v_descale", "descale_layout"]
    assert "q_descale" not in names
    runtime.validate_metadata(meta)


def test_metadata_reader_refuses_a_bad_kv_dtype(build_dir, tmp_path,
                                                flashmlir, metadata_check):
    """Both readers refuse a kv_dtype other than the dtype's or e4m3, and a
    kernel whose descales no kv_dtype explains."""
    runtime = flashmlir.runtime
    meta = _compile(build_dir, tmp_path)
    for bad in ("e5m2", "bf16"):
        with pytest.raises(runtime.MetadataError, match="kv_dtype"):
            runtime.validate_metadata(dict(meta, kv_dtype=bad))
    # Without kv_dtype the descales are parameters no launcher expects.
    plain = dict(meta)
    del plain["kv_dtype"]
    with pytest.raises(runtime.MetadataError, match="parameter list"):
        runtime.validate_metadata(plain)


def _quantised(torch, cache, descale):
    """cache [.., Hkv, D] as e4m3 codes of cache / descale (descale one
    number or [B, Hkv] with B = 1 here), and the dequantised values."""
    d = descale if descale.numel() == 1 else descale[0][:, None]
    codes = (cache.float() / d).clamp(-448, 448).to(torch.float8_e4m3fn)
    return codes, codes.float() * d


def _quantised_cache(torch, k, v, table, k_descale, v_descale):
    """The e4m3 codes of caches k and v (contiguous [B, N, Hkv, D] or paged
    through `table`) and their dequantised values in f32, sequence by
    sequence where the descales are per (batch, K/V head): a paged cache's
    pages belong to one sequence each through the table."""
    k8 = torch.empty_like(k, dtype=torch.float8_e4m3fn)
    v8 = torch.empty_like(k8)
    kd, vd = k.float(), v.float()
    b = table.shape[0] if table is not None else k.shape[0]
    for i in range(b):
        rows = (table[i].long() if table is not None else
                torch.tensor([i], device="cuda"))
        for codes, deq, src, ds in ((k8, kd, k, k_descale),
                                    (v8, vd, v, v_descale)):
            d = ds if ds.numel() == 1 else ds[i:i + 1]
            c, x = _quantised(torch, src[rows], d)
            codes[rows], deq[rows] = c, x
    return k8, v8, kd, vd


def _random_e4m3_cache(torch, b, capacity, hkv, page, per_head, dtype):
    """A random cache (D 128, `dtype` before quantising; paged through a
    table when `page`) quantised to e4m3 with random descales in [0.01,
    0.02], one per tensor or [B, Hkv]: (k codes, v codes, k dequantised, v
    dequantised, table, k_descale, v_descale)."""
    k, v, table = _cache(torch, b, capacity, hkv, 128, page, dtype)
    shape = (b, hkv) if per_head else (1,)
    k_descale = 0.01 + 0.01 * torch.rand(shape, device="cuda")
    v_descale = 0.01 + 0.01 * torch.rand(shape, device="cuda")
    k8, v8, kd, vd = _quantised_cache(torch, k, v, table, k_descale,
                                      v_descale)
    return k8, v8, kd, vd, table, k_descale, v_descale


def _kernel_dir(page):
    return os.environ.get("FLASHMLIR_PAGED_KERNEL_DIR") if page else \
        os.environ.get("FLASHMLIR_KERNEL_DIR")


@pytest.mark.gpu
@pytest.mark.parametrize("page", [0, 16, 64])
@pytest.mark.parametrize("b,hq,hkv,nq,causal,per_head,splits", [
    (2, 32, 8, 1, False, False, 0), (3, 64, 8, 1, False, True, 0),
    (2, 8, 8, 1, False, False, 3), (2, 32, 8, 4, True, False, 0),
    (1, 32, 8, 3, True, True, 2)])
def test_e4m3_cache_matches_reference(cuda_flashmlir, page, b, hq, hkv, nq,
                                      causal, per_head, splits):
    """O and the LSE of an e4m3 cache against fp32 on its dequantised
    values: O within flash-attention's 2x rule (twice torch's f16 error on
    the same dequantised cache), the LSE within 2e-3."""
    torch, flashmlir = cuda_flashmlir
    torch.manual_seed(hq + nq + page + splits)
    capacity = 1000
    lengths = [capacity - 5 * i for i in range(b)]
    k16, v16, table = _cache(torch, b, capacity, hkv, 128, page,
                             torch.float16)
    # Caches scaled away from 1 so that the descales matter.
    k16, v16 = 3 * k16, 0.5 * v16
    if per_head:
        k_descale = (0.01 + 0.02 * torch.rand(b, hkv, device="cuda"))
        v_descale = (0.002 + 0.004 * torch.rand(b, hkv, device="cuda"))
    else:
        k_descale = torch.tensor([0.02], device="cuda")
        v_descale = torch.tensor([0.004], device="cuda")
    k8, v8, kd, vd = _quantised_cache(torch, k16, v16, table, k_descale,
                                      v_descale)
    q = torch.randn(b, nq, hq, 128, device="cuda", dtype=torch.float16)
    lens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
    out, lse = flashmlir.flash_attn_with_kvcache(
        q, k8, v8, cache_seqlens=lens, block_table=table, causal=causal,
        num_splits=splits, return_softmax_lse=True,
        kernel_dir=_kernel_dir(page), k_descale=k_descale,
        v_descale=v_descale)
    assert out.dtype == torch.float16 and lse.shape == (b, hq, nq)
    # Against fp32 on the dequantised cache: pack-GQA's decode check.
    _check_decode(torch, q, kd, vd, table, lengths, out, lse, causal,
                  (-1, -1))


@pytest.mark.gpu
@pytest.mark.parametrize("hq,nq,mr8", [(32, 1, True), (64, 1, True),
                                       (8, 8, True), (8, 9, False)])
def test_decode_takes_the_one_row_kernel(cuda_flashmlir, hq, nq, mr8):
    """Decode on an e4m3 cache launches the kernel built with max_rows = 8
    (each consumer thread steps only its real row) where a tile's packed
    rows fit, and the kernel of any rows where they do not (8 heads of 9
    queries: 9 rows); both against fp32 on the dequantised cache."""
    torch, flashmlir = cuda_flashmlir
    folder = os.environ.get("FLASHMLIR_KERNEL_DIR")
    one_row = flashmlir.kernel_file_name(
        "sm_90a", 128, "f16", False, kv_lengths=True, kv_dtype="e4m3",
        max_rows=8)
    if not folder or not os.path.exists(os.path.join(folder,
                                                     one_row + ".cubin")):
        pytest.skip(f"no {one_row} kernel in FLASHMLIR_KERNEL_DIR (bash "
                    f"bench/build_serving_kernels.sh builds it)")
    torch.manual_seed(hq + nq)
    b, hkv, capacity = 2, 8, 700
    lengths = [capacity, capacity - 37]
    k16, v16, table = _cache(torch, b, capacity, hkv, 128, 0, torch.float16)
    k_descale = torch.tensor([0.02], device="cuda")
    v_descale = torch.tensor([0.004], device="cuda")
    k8, v8, kd, vd = _quantised_cache(torch, 3 * k16, 0.5 * v16, table,
                                      k_descale, v_descale)
    q = torch.randn(b, nq, hq, 128, device="cuda", dtype=torch.float16)
    lens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
    flashmlir._launchers.clear()
    flashmlir._calls.clear()
    out, lse = flashmlir.flash_attn_with_kvcache(
        q, k8, v8, cache_seqlens=lens, num_splits=1,
        return_softmax_lse=True, kernel_dir=folder, k_descale=k_descale,
        v_descale=v_descale)
    launched = [k.meta for k in flashmlir._launchers.values()]
    assert launched and all(m.get("max_rows", 0) == (8 if mr8 else 0)
                            for m in launched), \
        [m["kernel"] for m in launched]
    _check_decode(torch, q, kd, vd, table, lengths, out, lse, False,
                  (-1, -1))


@pytest.mark.gpu
@pytest.mark.parametrize("page", [0, 64])
@pytest.mark.parametrize("hq,nq,window", [
    (32, 4, (-1, -1)), (64, 7, (-1, -1)), (64, 1, (63, 0)), (32, 4, (63, 0))])
def test_e4m3_cache_with_few_queries(cuda_flashmlir, page, hq, nq, window):
    """Speculative decoding's few queries, and windows, on an e4m3 cache of
    64 MiB (K + V codes): the call takes the query-group kernel, as a
    16-bit cache would, and its O and LSE match fp32 on the dequantised
    cache."""
    torch, flashmlir = cuda_flashmlir
    torch.manual_seed(3 + hq + nq + page)
    b, hkv, capacity = 2, 8, 16384
    lengths = [capacity, capacity - 41]
    k16, v16, table = _cache(torch, b, capacity, hkv, 128, page,
                             torch.float16)
    k_descale = torch.tensor([0.01], device="cuda")
    v_descale = torch.tensor([0.01], device="cuda")
    k8, v8, kd, vd = _quantised_cache(torch, k16, v16, table, k_descale,
                                      v_descale)
    q = torch.randn(b, nq, hq, 128, device="cuda", dtype=torch.float16)
    lens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
    flashmlir._calls.clear()
    out, lse = flashmlir.flash_attn_with_kvcache(
        q, k8, v8, cache_seqlens=lens, block_table=table, causal=True,
        window_size=window, return_softmax_lse=True,
        kernel_dir=_kernel_dir(page), k_descale=k_descale,
        v_descale=v_descale)
    (call,) = flashmlir._calls.values()
    assert call.query_group == hq // hkv
    # Against fp32 on the dequantised cache: pack-GQA's decode check.
    _check_decode(torch, q, kd, vd, table, lengths, out, lse, True, window)


@pytest.mark.gpu
@pytest.mark.parametrize("page", [0, 64])
@pytest.mark.parametrize("splits,per_head", [(0, False), (3, True)])
def test_e4m3_cache_beside_bf16_queries(cuda_flashmlir, page, splits,
                                        per_head):
    """A bf16 q: the widened tiles are bf16 (through f32, exactly); O in bf16
    within the 2x rule of torch's bf16 error against fp32 on the
    dequantised cache."""
    torch, flashmlir = cuda_flashmlir
    torch.manual_seed(11 + page + splits)
    b, hq, hkv, capacity = 2, 32, 8, 700
    lengths = [capacity, capacity - 9]
    k8, v8, kd, vd, table, k_descale, v_descale = _random_e4m3_cache(
        torch, b, capacity, hkv, page, per_head, torch.float32)
    q = torch.randn(b, 1, hq, 128, device="cuda", dtype=torch.bfloat16)
    lens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
    out = flashmlir.flash_attn_with_kvcache(
        q, k8, v8, cache_seqlens=lens, block_table=table, num_splits=splits,
        kernel_dir=_kernel_dir(page), k_descale=k_descale,
        v_descale=v_descale)
    assert out.dtype == torch.bfloat16
    scale = 1 / math.sqrt(128)
    for i, n in enumerate(lengths):
        kb = _dense(torch, kd, table, b, n)[i:i + 1]
        vb = _dense(torch, vd, table, b, n)[i:i + 1]
        qb = q[i:i + 1].transpose(1, 2).float()
        ref = masked_reference(torch, qb, kb, vb, scale)
        low = masked_reference(torch, qb.bfloat16(), kb.bfloat16(),
                               vb.bfloat16(), scale,
                               dtype=torch.bfloat16).float()
        err = (out[i:i + 1].transpose(1, 2).float() - ref).norm() / \
            ref.norm()
        torch_err = (low - ref).norm() / ref.norm()
        assert err <= 2 * torch_err + 1e-4, (i, err.item(), torch_err.item())


@pytest.mark.gpu
@pytest.mark.parametrize("page", [0, 64])
def test_e4m3_append_quantises_the_new_keys(cuda_flashmlir, page):
    """k and v given in f16 are written into the e4m3 cache as their
    quantised codes (saturated, not NaN, past 448 descales) and attended."""
    torch, flashmlir = cuda_flashmlir
    torch.manual_seed(7 + page)
    b, hkv, hq, capacity, n_new = 2, 8, 32, 512, 3
    k16, v16, table = _cache(torch, b, capacity, hkv, 128, page,
                             torch.float16)
    k8 = (k16 / 0.02).to(torch.float8_e4m3fn)
    v8 = (v16 / 0.02).to(torch.float8_e4m3fn)
    descale = torch.tensor([0.02], device="cuda")
    lengths = [100, 301]
    lens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
    k = torch.randn(b, n_new, hkv, 128, device="cuda", dtype=torch.float16)
    v = torch.randn_like(k)
    k[0, 0, 0, 0] = 1000.0  # past 448 * 0.02: saturates
    q = torch.randn(b, 1, hq, 128, device="cuda", dtype=torch.float16)
    out = flashmlir.flash_attn_with_kvcache(
        q, k8, v8, k=k, v=v, cache_seqlens=lens, block_table=table,
        kernel_dir=_kernel_dir(page), k_descale=descale, v_descale=descale)
    for i, n in enumerate(lengths):
        got = _dense(torch, k8.float(), table, b, n + n_new)[i, :, n:]
        want = (k[i].float() / 0.02).clamp(-448, 448).to(
            torch.float8_e4m3fn).float().transpose(0, 1)
        assert torch.equal(got, want), i
    assert _dense(torch, k8.float(), table, b, 101)[0, 0, 100, 0] == 448.0
    kd = _dense(torch, k8.float() * 0.02, table, b, lengths[1] + n_new)
    vd = _dense(torch, v8.float() * 0.02, table, b, lengths[1] + n_new)
    for i, n in enumerate(lengths):
        ref = masked_reference(torch, q[i:i + 1].transpose(1, 2).float(),
                               kd[i:i + 1, :, :n + n_new],
                               vd[i:i + 1, :, :n + n_new], 1 / math.sqrt(128))
        err = (out[i:i + 1].transpose(1, 2).float() - ref).abs().max()
        assert err.item() < 2e-2, (i, err.item())


@pytest.mark.gpu
def test_e4m3_cache_refuses_bad_descales(cuda_flashmlir):
    """Missing descales, descales of the wrong shape, dtype or device, and
    descales beside a 16-bit cache: clear errors, the cache untouched."""
    torch, flashmlir = cuda_flashmlir
    runtime = flashmlir.runtime
    k8 = torch.randn(2, 256, 8, 128, device="cuda").to(torch.float8_e4m3fn)
    v8 = k8.clone()
    q = torch.randn(2, 1, 32, 128, device="cuda", dtype=torch.float16)
    lens = torch.tensor([100, 200], dtype=torch.int32, device="cuda")
    one = torch.tensor([0.5], device="cuda")
    kdir = os.environ.get("FLASHMLIR_KERNEL_DIR")
    call = lambda **kw: flashmlir.flash_attn_with_kvcache(  # noqa: E731
        q, k8, v8, cache_seqlens=lens, kernel_dir=kdir, **kw)
    with pytest.raises(runtime.KernelArgumentError, match="k_descale"):
        call()
    for bad in (torch.ones(3, 8, device="cuda"),
                torch.ones(1, device="cuda", dtype=torch.float16),
                torch.ones(1)):
        with pytest.raises(runtime.KernelArgumentError, match="k_descale"):
            call(k_descale=bad, v_descale=one)
    with pytest.raises(runtime.KernelArgumentError, match="laid out alike"):
        call(k_descale=torch.ones(2, 8, device="cuda"), v_descale=one)
    k16 = torch.randn(2, 256, 8, 128, device="cuda", dtype=torch.float16)
    with pytest.raises(runtime.KernelArgumentError, match="e4m3"):
        flashmlir.flash_attn_with_kvcache(
            q, k16, k16.clone(), cache_seqlens=lens, k_descale=one,
            v_descale=one, kernel_dir=kdir)


def test_compile_builds_an_e4m3_cache_kernel(flashmlir):
    """flashmlir.compile(kv_dtype="e4m3") builds the kernel fa-compile
    --kv-dtype e4m3 builds (what flash_attn_with_kvcache compiles where no
    kernel folder holds it)."""
    kernel = flashmlir.compile(head_dim=128, kv_lengths=True, page_size=64,
                               kv_splits="auto", kv_dtype="e4m3",
                               cache_dir="")
    meta = kernel.metadata
    assert meta["kv_dtype"] == "e4m3" and meta["dtype"] == "f16"
    assert meta["kernel"].endswith("_kve4m3_cr8")
    assert [p["name"] for p in meta["params"]][-7:-4] == [
        "k_descale", "v_descale", "descale_layout"]
    flashmlir.runtime.validate_metadata(meta)


@pytest.mark.parametrize("options,match", [
    (dict(kv_dtype="e5m2"),
     "kv_dtype must be one of the strings f16, bf16 or e4m3, or None"),
    (dict(kv_dtype="f16", dtype="bf16"), "--kv-dtype must be e4m3"),
    (dict(kv_dtype="e4m3", arch="sm_80"), "sm_90a wgmma only"),
    (dict(kv_dtype="e4m3", varlen=True), "takes no varlen batch"),
    (dict(kv_dtype=8), "kv_dtype")])
def test_compile_refuses_bad_kv_dtype(flashmlir, options, match):
    with pytest.raises(flashmlir.CompileError, match=match):
        flashmlir.compile(head_dim=128, kv_lengths=True, cache_dir="",
                          **options)


@pytest.mark.gpu
@pytest.mark.parametrize("page,per_head,splits", [(64, True, 0),
                                                  (0, False, 3)])
def test_c_runtime_e4m3_cache_launch(cuda_flashmlir, page, per_head, splits):
    """faKernelLaunchKVCacheE4M3 (the C runtime): an e4m3 cache in
    flash-attn's [pages, page_size, Hkv, D] layout (or contiguous), ragged
    lengths (one empty), grouped heads at decode (the runtime's pack-GQA
    views), per-tensor or [B, Hkv] descales; O and the LSE against fp32 on
    the dequantised cache. And the refusals: the 16-bit launcher refuses
    the kernel, this launcher a 16-bit one, a bad layout."""
    import ctypes
    from conftest import load_c_runtime
    torch, flashmlir = cuda_flashmlir
    lib, _, strides = load_c_runtime()
    lib.faKernelLaunchKVCacheE4M3.restype = ctypes.c_int
    kdir = _kernel_dir(page)
    tag = f"_paged{page}" if page else ""
    kernel, plain = ctypes.c_void_p(), ctypes.c_void_p()
    for handle, name in ((kernel, f"_kvlens{tag}_kve4m3"),
                         (plain, f"_kvlens{tag}")):
        prefix = f"{kdir}/sm_90a_d128_f16_splitkv{name}"
        assert lib.faKernelLoadFiles(prefix.encode(), 0,
                                     ctypes.byref(handle)) == 0, \
            lib.faRuntimeLastError()
    torch.manual_seed(5 + page)
    b, hq, hkv, capacity = 3, 32, 8, 700
    lengths = [capacity, 0, 333]
    k8, v8, kd, vd, table, k_descale, v_descale = _random_e4m3_cache(
        torch, b, capacity, hkv, page, per_head, torch.float16)
    q = torch.randn(b, 1, hq, 128, device="cuda", dtype=torch.float16)
    out = torch.full_like(q, float("nan"))
    lse = torch.full((b, hq, 1), float("nan"), device="cuda")
    lens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    entries = k8.shape[0]
    rows = page if page else capacity
    max_pages = table.shape[1] if page else 0
    tensors = []
    for t in (q, k8, v8, out):
        tensors += [ctypes.c_void_p(t.data_ptr()), ctypes.byref(strides(t))]

    def launch(handle, layout=1 if per_head else 0, entry=None):
        entry = entry or lib.faKernelLaunchKVCacheE4M3
        tail = [ctypes.c_void_p(k_descale.data_ptr()),
                ctypes.c_void_p(v_descale.data_ptr()), layout] \
            if entry is lib.faKernelLaunchKVCacheE4M3 else []
        return entry(
            handle, *tensors, ctypes.c_void_p(lse.data_ptr()), b, hq, hkv, 1,
            ctypes.c_longlong(entries), rows,
            ctypes.c_void_p(lens.data_ptr()),
            ctypes.c_void_p(table.data_ptr()) if page else None, max_pages,
            ctypes.c_float(1 / math.sqrt(128)), splits, *tail, stream)

    assert launch(kernel) == 0, lib.faRuntimeLastError()
    torch.cuda.synchronize()
    # Against fp32 on the dequantised cache (the empty sequence: O zero, the
    # LSE -inf).
    _check_decode(torch, q, kd, vd, table, lengths, out, lse, False,
                  (-1, -1))
    # The wrong launcher each way, and a per-block layout.
    assert launch(kernel, entry=lib.faKernelLaunchKVCache) == 1
    assert b"faKernelLaunchKVCacheE4M3" in lib.faRuntimeLastError()
    assert launch(plain) == 1
    assert b"is for kernels that read an e4m3 KV cache" in \
        lib.faRuntimeLastError()
    assert launch(kernel, layout=2) == 1
    assert b"descaleLayout must be" in lib.faRuntimeLastError()
    lib.faKernelDestroy(kernel)
    lib.faKernelDestroy(plain)
