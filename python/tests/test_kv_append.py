"""flash_attn_with_kvcache's new keys and values written by the KV-cache
kernel's append kernel ("kv_append" in its metadata: one launch in place of
about ten torch ops a call). CPU: the metadata fa-compile writes, both
readers' checks of it (the C runtime's and Python's, the same rules), and
the launch plan's parameters, bound by name. GPU (marked gpu):
the rows land where the lengths and the block table say, bit for bit (an
e4m3 cache: torch's quantisation of the rows), the rest of the cache is
untouched, the attention sees them, and rows the kernel cannot move (row
strides or starts off 16 bytes) still append, through torch ops."""
import json
import subprocess

import pytest

from conftest import ELF_HEADER
from test_pack_gqa import _cache, _check_decode, _dense


def _compile(build_dir, tmp_path, *flags):
    out = tmp_path / "k"
    result = subprocess.run(
        [str(build_dir / "bin" / "fa-compile"), "--arch", "sm_90a",
         "--head-dim", "128", "--kv-lengths", "--no-cubin", *flags, "-o",
         str(out)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return json.loads((tmp_path / "k.json").read_text())


@pytest.mark.parametrize("flags,e4m3", [
    ((), False), (("--page-size", "64"), False),
    (("--dtype", "bf16", "--kv-dtype", "e4m3", "--page-size", "16"), True)])
def test_metadata_describes_the_append_kernel(build_dir, tmp_path, flashmlir,
                                              metadata_check, flags, e4m3):
    """The kernel, block, columns a thread and the parameters the Python
    launchers bind by name (the descales only for an e4m3 cache); both
    readers take it."""
    runtime = flashmlir.runtime
    meta = _compile(build_dir, tmp_path, *flags)
    append = meta["kv_append"]
    dtype = "bf16" if "bf16" in flags else "f16"
    assert append["kernel"] == "fa_kv_append_d128_" + dtype + \
        ("_to_e4m3" if e4m3 else "")
    assert append["block"] == [256, 1, 1]
    assert append["columns_per_thread"] == 8
    names = [p["name"] for p in append["params"]]
    assert names == runtime._kv_append_params(e4m3)
    assert ("k_descale" in names) == e4m3
    kinds = {p["name"]: p["kind"] for p in append["params"]}
    assert kinds["k_new"] == "pointer" and kinds["Nnew"] == "i32"
    assert kinds["v_cache_stride_h"] == "i64"
    runtime.validate_metadata(meta)
    runtime.Kernel(ELF_HEADER, meta)


def test_metadata_without_lengths_has_no_append_kernel(build_dir, tmp_path):
    result = subprocess.run(
        [str(build_dir / "bin" / "fa-compile"), "--arch", "sm_90a",
         "--head-dim", "128", "--no-cubin", "-o", str(tmp_path / "k")],
        capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "kv_append" not in json.loads((tmp_path / "k.json").read_text())


@pytest.mark.parametrize("change,match", [
    (lambda a: a.update(kernel=""), "kv_append'?'s kernel"),
    (lambda a: a.update(kernel=3), "kv_append'?'s kernel"),
    (lambda a: a.update(block=[256, 2, 1]), "kv_append'?'s block"),
    (lambda a: a.update(block=[2048, 1, 1]), "block"),
    (lambda a: a.update(columns_per_thread=16), "columns_per_thread"),
    (lambda a: a.update(columns_per_thread=True), "columns_per_thread"),
    (lambda a: a.pop("columns_per_thread"), "columns_per_thread"),
    (lambda a: a["params"].pop(0), "parameters"),
    (lambda a: a["params"].append(dict(a["params"][3])), "parameters"),
    (lambda a: a.update(params=None), "params"),
])
def test_readers_refuse_a_bad_append_entry(build_dir, tmp_path, flashmlir,
                                           metadata_check, change, match):
    """Each field a launcher relies on (both readers, the same rules): a
    grid counted from a wrong block or column count, or a parameter missing
    or twice, would write the wrong rows."""
    runtime = flashmlir.runtime
    meta = _compile(build_dir, tmp_path, "--page-size", "64")
    change(meta["kv_append"])
    with pytest.raises(runtime.MetadataError, match=match):
        runtime.validate_metadata(meta)


def test_append_parameters_bind_by_name(build_dir, tmp_path, flashmlir,
                                        metadata_check):
    """The parameters in another order are the same kernel's: both readers
    take them, and the plan binds each value by its name."""
    runtime = flashmlir.runtime
    meta = _compile(build_dir, tmp_path)
    meta["kv_append"]["params"].reverse()
    runtime.validate_metadata(meta)
    kernel = runtime.Kernel(ELF_HEADER, meta)
    k = _Rows((2, 1, 8, 128), (8 * 128, 8 * 128, 128, 1))
    cache = _Rows((2, 64, 8, 128), (64 * 8 * 128, 8 * 128, 128, 1))
    plan = kernel.kv_append_plan(k, k, cache, cache, 0, 0, 64)
    slots = [p["name"] for p in meta["kv_append"]["params"]]
    fixed = {name: plan._params[slots.index(name)] for name in plan.scalars}
    import ctypes
    assert ctypes.c_int32.from_address(fixed["capacity"]).value == 64
    assert ctypes.c_int64.from_address(fixed["k_cache_stride_b"]).value == \
        64 * 8 * 128


def test_readers_refuse_an_append_kernel_without_lengths(
        build_dir, tmp_path, flashmlir, metadata_check):
    """An append entry on a kernel without per-sequence lengths (which no
    call appends to) is refused, not ignored."""
    runtime = flashmlir.runtime
    append = _compile(build_dir, tmp_path)["kv_append"]
    subprocess.run(
        [str(build_dir / "bin" / "fa-compile"), "--arch", "sm_90a",
         "--head-dim", "128", "--no-cubin", "-o", str(tmp_path / "plain")],
        check=True, capture_output=True)
    meta = json.loads((tmp_path / "plain.json").read_text())
    meta["kv_append"] = append
    with pytest.raises(runtime.MetadataError, match="KV-cache kernels"):
        runtime.validate_metadata(meta)


class _Rows:
    """A stand-in for a tensor: shape, strides and element size (the plan
    reads nothing else when it is made)."""

    def __init__(self, shape, strides, element_size=2):
        self.shape, self._strides = shape, strides
        self._element_size = element_size

    def stride(self, dim=None):
        return self._strides if dim is None else self._strides[dim]

    def element_size(self):
        return self._element_size


def _plan_inputs(flashmlir, build_dir, tmp_path, page):
    runtime = flashmlir.runtime
    flags = ("--page-size", str(page)) if page else ()
    meta = _compile(build_dir, tmp_path, *flags)
    kernel = runtime.Kernel(ELF_HEADER, meta)
    b, n_new, hkv, d = 3, 2, 8, 128
    k = _Rows((b, n_new, hkv, d), (n_new * hkv * d, hkv * d, d, 1))
    if page:
        cache = _Rows((40, page, hkv, d), (page * hkv * d, hkv * d, d, 1))
    else:
        cache = _Rows((b, 512, hkv, d), (512 * hkv * d, hkv * d, d, 1))
    return kernel, k, cache


@pytest.mark.parametrize("page", [0, 64])
def test_append_plan_binds_shapes_and_strides(build_dir, tmp_path, flashmlir,
                                              page):
    """The plan's scalar parameters are the call's: batch, rows, heads, the
    paging (pages of the cache, table columns, capacity) and each tensor's
    batch (page), row and head strides; the grid covers every 8 columns of
    every new row once."""
    kernel, k, cache = _plan_inputs(flashmlir, build_dir, tmp_path, page)
    max_pages = 8 if page else 0
    capacity = max_pages * page if page else 512
    plan = kernel.kv_append_plan(k, k, cache, cache, page, max_pages,
                                 capacity)
    assert plan is not None
    assert plan.scalars["B"] == 3 and plan.scalars["Nnew"] == 2
    assert plan.scalars["Hkv"] == 8 and plan.scalars["page_size"] == page
    assert plan.scalars["num_pages"] == (40 if page else 0)
    assert plan.scalars["max_pages"] == max_pages
    assert plan.scalars["capacity"] == capacity
    assert plan.scalars["k_new_stride_n"] == 8 * 128
    assert plan.scalars["v_cache_stride_b"] == cache.stride(0)
    assert plan.scalars["v_cache_stride_h"] == 128
    assert plan.grid == (-(-(3 * 2 * 8 * 16) // 256), 1, 1) and plan.block == 256
    assert plan.cache_alignment == 16


@pytest.mark.parametrize("what", ["row stride", "head stride", "unit stride",
                                  "head dim", "no rows"])
def test_append_plan_declines_rows_it_cannot_move(build_dir, tmp_path,
                                                  flashmlir, what):
    """Strides that are not whole 16-byte pieces, a D without unit stride, a
    head dim not the kernel's, or nothing to write: no plan (the call then
    appends with torch ops)."""
    kernel, k, cache = _plan_inputs(flashmlir, build_dir, tmp_path, 0)
    shape, strides = list(k.shape), list(k.stride())
    if what == "row stride":
        strides[1] += 4
    elif what == "head stride":
        strides[2] = 132
    elif what == "unit stride":
        strides[3] = 2
    elif what == "head dim":
        shape[3] = 64
    else:
        shape[1] = 0
    odd = _Rows(tuple(shape), tuple(strides))
    assert kernel.kv_append_plan(odd, k, cache, cache, 0, 0, 512) is None


# -- GPU --


def _kernel_dir(page):
    import os
    return os.environ.get("FLASHMLIR_PAGED_KERNEL_DIR") if page else \
        os.environ.get("FLASHMLIR_KERNEL_DIR")


def _no_torch_append(monkeypatch, flashmlir):
    """Makes the torch-op append fail the test: the call must append
    through the kernel."""
    def refuse(*args, **kwargs):
        raise AssertionError("appended with torch ops, not the kernel")
    monkeypatch.setattr(flashmlir, "_append_to_cache", refuse)


@pytest.mark.gpu
@pytest.mark.parametrize("page", [0, 16, 64])
@pytest.mark.parametrize("n_new,lengths", [(1, [0, 77, 300]), (5, [3, 250])])
def test_append_kernel_writes_the_new_rows(cuda_flashmlir, monkeypatch, page,
                                           n_new, lengths):
    """The new rows land at positions lengths[b] .. + Nnew - 1 of each
    sequence (through the block table when paged), bit for bit; every other
    row of the cache is as it was; the attention attends them (O and the
    LSE against fp32 on the updated cache)."""
    torch, flashmlir = cuda_flashmlir
    _no_torch_append(monkeypatch, flashmlir)
    torch.manual_seed(11 + page + n_new)
    dt = torch.float16
    b, hkv, hq, capacity, d = len(lengths), 8, 32, 512, 128
    k_cache, v_cache, table = _cache(torch, b, capacity, hkv, d, page, dt)
    k_before, v_before = k_cache.clone(), v_cache.clone()
    lens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
    k = torch.randn(b, n_new, hkv, d, device="cuda", dtype=dt)
    v = torch.randn_like(k)
    q = torch.randn(b, 1, hq, d, device="cuda", dtype=dt)
    for call in range(2):  # checked in full, then through the kept call
        if call:
            k_cache.copy_(k_before)
            v_cache.copy_(v_before)
        out, lse = flashmlir.flash_attn_with_kvcache(
            q, k_cache, v_cache, k=k, v=v, cache_seqlens=lens,
            block_table=table, kernel_dir=_kernel_dir(page),
            return_softmax_lse=True)
        assert torch.equal(lens, torch.tensor(lengths, dtype=torch.int32,
                                              device="cuda"))
        for cache, before, new in ((k_cache, k_before, k),
                                   (v_cache, v_before, v)):
            got = _dense(torch, cache, table, b, capacity)
            want = _dense(torch, before, table, b, capacity)
            for i, n in enumerate(lengths):
                want[i, :, n:n + n_new] = new[i].transpose(0, 1).float()
            assert torch.equal(got, want), call
            # Rows no sequence owns (a paged cache's spare page) untouched.
            if table is not None:
                spare = sorted(set(range(cache.shape[0])) -
                               set(table.flatten().tolist()))
                assert torch.equal(cache[spare], before[spare])
        seen = [n + n_new for n in lengths]
        _check_decode(torch, q, k_cache, v_cache, table, seen, out, lse,
                      causal=False, window=(-1, -1))


@pytest.mark.gpu
@pytest.mark.parametrize("page,dtype", [(0, "float16"), (64, "float16"),
                                        (0, "bfloat16")])
@pytest.mark.parametrize("per_head", [False, True])
def test_append_kernel_quantises_like_torch(cuda_flashmlir, monkeypatch,
                                            page, dtype, per_head):
    """An e4m3 cache: the codes are torch's (x / descale, saturated at
    +-448, rounded to nearest even), per tensor and per (batch, K/V head)
    descale, values past the range included; f16 and bf16 rows."""
    torch, flashmlir = cuda_flashmlir
    _no_torch_append(monkeypatch, flashmlir)
    torch.manual_seed(5 + page)
    dt = getattr(torch, dtype)
    b, hkv, hq, capacity, n_new, d = 2, 8, 32, 512, 3, 128
    k16, v16, table = _cache(torch, b, capacity, hkv, d, page, torch.float16)
    k8 = (k16 / 0.02).to(torch.float8_e4m3fn)
    v8 = (v16 / 0.02).to(torch.float8_e4m3fn)
    shape = (b, hkv) if per_head else (1,)
    k_descale = torch.rand(shape, device="cuda") * 0.02 + 0.01
    v_descale = torch.rand(shape, device="cuda") * 0.02 + 0.01
    lengths = [60, 301]
    lens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
    k = torch.randn(b, n_new, hkv, d, device="cuda", dtype=dt) * 3
    v = torch.randn_like(k) * 3
    k[0, 0, 0, :4] = torch.tensor([1000.0, -1000.0, 1e-6, 0.0])
    q = torch.randn(b, 1, hq, d, device="cuda", dtype=dt)
    flashmlir.flash_attn_with_kvcache(
        q, k8, v8, k=k, v=v, cache_seqlens=lens, block_table=table,
        kernel_dir=_kernel_dir(page), k_descale=k_descale,
        v_descale=v_descale)
    for cache, new, descale in ((k8, k, k_descale), (v8, v, v_descale)):
        want = flashmlir._quantize_e4m3(new, descale)
        got = _dense(torch, cache.view(torch.uint8), table, b, capacity)
        for i, n in enumerate(lengths):
            assert torch.equal(
                got[i, :, n:n + n_new],
                want[i].view(torch.uint8).transpose(0, 1).float()), i


@pytest.mark.gpu
@pytest.mark.parametrize("how", ["row stride", "start"])
def test_rows_off_the_kernels_pieces_append_through_torch(cuda_flashmlir,
                                                         how):
    """k and v views whose head stride is not a multiple of 8 elements, or
    that start 8 bytes past a 16-byte boundary: the kernel's plan declines
    them and torch ops append; the rows still land."""
    torch, flashmlir = cuda_flashmlir
    torch.manual_seed(3)
    b, hkv, hq, capacity, d = 2, 8, 16, 256, 128
    k_cache, v_cache, table = _cache(torch, b, capacity, hkv, d, 0,
                                     torch.float16)
    before = k_cache.clone()
    if how == "row stride":  # heads 140 elements apart
        k = torch.randn(b, 1, hkv, d + 12, device="cuda",
                        dtype=torch.float16)[..., :d]
    else:  # heads 136 elements apart, the first 8 bytes in
        k = torch.randn(b, 1, hkv, d + 8, device="cuda",
                        dtype=torch.float16)[..., 4:4 + d]
    v = k * 2
    lens = torch.tensor([10, 200], dtype=torch.int32, device="cuda")
    q = torch.randn(b, 1, hq, d, device="cuda", dtype=torch.float16)
    flashmlir.flash_attn_with_kvcache(q, k_cache, v_cache, k=k, v=v,
                                      cache_seqlens=lens,
                                      kernel_dir=_kernel_dir(0))
    want = before.clone()
    for i, n in enumerate([10, 200]):
        want[i, n] = k[i, 0]
    assert torch.equal(k_cache, want)


@pytest.mark.gpu
@pytest.mark.parametrize("e4m3", [False, True])
def test_c_runtime_appends(cuda_flashmlir, e4m3):
    """faKernelAppendKV: the rows of a paged cache in flash-attn's layout
    land where the lengths and the table say (an e4m3 cache: torch's codes),
    `seen` gets lengths + Nnew, and the attention launched on those lengths
    (faKernelLaunchKVCache[E4M3]) matches fp32 on the (dequantised) cache;
    its refusals name the argument."""
    import ctypes
    import math
    from conftest import load_c_runtime, masked_reference
    torch, flashmlir = cuda_flashmlir
    lib, _, strides = load_c_runtime()
    kernel = ctypes.c_void_p()
    prefix = f"{_kernel_dir(64)}/sm_90a_d128_f16_splitkv_kvlens_paged64" + \
        ("_kve4m3" if e4m3 else "")
    assert lib.faKernelLoadFiles(prefix.encode(), 0,
                                 ctypes.byref(kernel)) == 0, \
        lib.faRuntimeLastError()
    torch.manual_seed(9)
    b, hq, hkv, d, page, max_pages, n_new = 3, 16, 8, 128, 64, 6, 2
    pages = b * max_pages + 1
    kc = torch.randn(pages, page, hkv, d, device="cuda", dtype=torch.float16)
    vc = torch.randn_like(kc)
    descale = torch.full((1,), 0.02, device="cuda")
    if e4m3:
        kc, vc = (flashmlir._quantize_e4m3(x, descale) for x in (kc, vc))
    raw = (lambda t: t.view(torch.uint8)) if e4m3 else (lambda t: t)
    before = raw(kc).clone()
    table = torch.randperm(pages, device="cuda")[:b * max_pages].view(
        b, max_pages).to(torch.int32).contiguous()
    lengths = [0, 130, 300]
    lens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
    seen = torch.full((b,), -7, dtype=torch.int32, device="cuda")
    k = torch.randn(b, n_new, hkv, d, device="cuda", dtype=torch.float16)
    v = torch.randn_like(k)
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    tensors = []
    for t in (k, v, kc, vc):
        tensors += [ctypes.c_void_p(t.data_ptr()), ctypes.byref(strides(t))]
    descales = (ctypes.c_void_p(descale.data_ptr()),
                ctypes.c_void_p(descale.data_ptr())) if e4m3 else (None, None)

    def append(table_ptr=ctypes.c_void_p(table.data_ptr()), rows=n_new,
               scales=descales):
        return lib.faKernelAppendKV(
            kernel, *tensors, b, rows, hkv, ctypes.c_longlong(pages), page,
            ctypes.c_void_p(lens.data_ptr()), ctypes.c_void_p(seen.data_ptr()),
            table_ptr, max_pages, *scales, 0, stream)

    assert append() == 0, lib.faRuntimeLastError()
    torch.cuda.synchronize()
    assert seen.tolist() == [n + n_new for n in lengths]
    want = before.clone()
    codes = raw(flashmlir._quantize_e4m3(k, descale)) if e4m3 else k
    for i, n in enumerate(lengths):
        for r in range(n_new):
            p = table[i, (n + r) // page].item()
            want[p, (n + r) % page] = codes[i, r]
    assert torch.equal(raw(kc), want)
    # The attention on the lengths the append wrote.
    q = torch.randn(b, 1, hq, d, device="cuda", dtype=torch.float16)
    out = torch.empty_like(q)
    lse = torch.empty(b, hq, 1, device="cuda")
    launch = lib.faKernelLaunchKVCacheE4M3 if e4m3 else \
        lib.faKernelLaunchKVCache
    args = []
    for t in (q, kc, vc, out):
        args += [ctypes.c_void_p(t.data_ptr()), ctypes.byref(strides(t))]
    assert launch(kernel, *args, ctypes.c_void_p(lse.data_ptr()), b, hq, hkv,
                  1, ctypes.c_longlong(pages), page,
                  ctypes.c_void_p(seen.data_ptr()),
                  ctypes.c_void_p(table.data_ptr()), max_pages,
                  ctypes.c_float(1 / math.sqrt(d)), 0,
                  *(descales + (0,) if e4m3 else ()), stream) == 0, \
        lib.faRuntimeLastError()
    torch.cuda.synchronize()
    factor = 0.02 if e4m3 else 1.0
    for i, n in enumerate(lengths):
        rows = n + n_new
        held = table[i, :-(-rows // page)].long()
        keys = kc[held].flatten(0, 1)[:rows].float() * factor
        vals = vc[held].flatten(0, 1)[:rows].float() * factor
        ref = masked_reference(torch, q[i:i + 1].transpose(1, 2).float(),
                               keys.transpose(0, 1)[None],
                               vals.transpose(0, 1)[None], 1 / math.sqrt(d))
        err = (out[i:i + 1].transpose(1, 2).float() - ref).abs().max()
        assert err.item() < (2e-2 if e4m3 else 2e-3), (i, err.item())
    # Refusals, before anything is launched.
    assert append(table_ptr=None) == 1
    assert b"give its block table" in lib.faRuntimeLastError()
    assert append(rows=0) == 1
    assert b"must be positive" in lib.faRuntimeLastError()
    wrong = (None, None) if e4m3 else (ctypes.c_void_p(descale.data_ptr()),
                                       None)
    assert append(scales=wrong) == 1
    assert (b"e4m3 cache" if e4m3 else b"16-bit cache") in \
        lib.faRuntimeLastError()
    lib.faKernelDestroy(kernel)

