"""flash-mlir from Python.

* ``flashmlir.compile(head_dim=..., causal=..., dtype=..., arch=...)``
  compiles a kernel in-process (needs the built extension).
* ``flashmlir.runtime`` launches compiled kernels on torch tensors and
  needs only torch and an NVIDIA driver.
* ``flashmlir.attention(q, k, v, causal=..., scale=...)`` compiles on first
  use (cached) and launches, with torch SDPA's [B, H, N, D] convention.
* ``flashmlir.flex_attention(q, k, v, score_mod=fn, mask_mod=fn)`` traces
  FlexAttention's functions into fa.attention's regions and runs them on
  the host (``flashmlir.flex``).
"""
import os as _os

# The compiled extension lives in the build tree (build/python/flashmlir)
# until installed next to these files.
for _candidate in (_os.environ.get("FLASHMLIR_BUILD_DIR"),
                   _os.path.join(_os.path.dirname(__file__), "..", "..",
                                 "build")):
    if _candidate:
        _ext = _os.path.join(_candidate, "python", "flashmlir")
        if _os.path.isdir(_ext) and _ext not in __path__:
            __path__.append(_ext)

from ._version import __version__  # noqa: E402
from .errors import CompileError  # noqa: E402
from .compiler import (CompiledKernel, CompiledModule, cache_info,  # noqa: E402
                       clear_cache, compile, compile_module, from_e4m3,
                       kernel_options, predicted_bytes, quantize_e4m3,
                       run_cpu, to_e4m3)
from .flex import BlockMask, create_block_mask, flex_attention  # noqa: E402

__all__ = ["__version__", "compile", "compile_module", "CompiledModule", "CompiledKernel",
           "CompileError", "attention", "cache_info", "clear_cache",
           "kernel_options", "kernel_file_name",
           "flash_attn_func", "flash_attn_varlen_func",
           "flash_attn_with_kvcache", "flex_attention", "create_block_mask",
           "BlockMask", "from_e4m3", "predicted_bytes", "quantize_e4m3",
           "run_cpu", "runtime", "to_e4m3", "decode_heads_per_tile",
           "query_group_for"]

# torch.ops.flashmlir.* exist as soon as flashmlir is imported (where torch
# is installed), so a torch.compile'd model finds them without a second
# import.
# A torch without torch.library (or none) leaves them out; importing
# flashmlir.torch_ops then says why.
try:
    from . import torch_ops  # noqa: E402,F401
except ImportError:
    pass

_launchers = {}

# FLASHMLIR_CHECK_INPUTS=1: the entry points also check the values that live
# on the device (KV lengths, block-table entries, varlen prefix sums) on the
# host, with messages -- reading them back, a synchronisation per call, for
# debugging. Without it the sm_90a kernel checks them itself and stops with
# a trap ("unspecified launch failure"), without the message (its
# __assertfail call made ptxas serialise the wgmmas: docs/serving.md).
# Unset, "" or "0": off; "1": on; any other value is refused at import
# rather than read as either.
_CHECK_INPUTS_VALUE = _os.environ.get("FLASHMLIR_CHECK_INPUTS", "")
if _CHECK_INPUTS_VALUE not in ("", "0", "1"):
    raise ImportError(
        f"flashmlir: FLASHMLIR_CHECK_INPUTS must be 0 or 1 (or unset), got "
        f"{_CHECK_INPUTS_VALUE!r}")
_CHECK_INPUTS = _CHECK_INPUTS_VALUE == "1"

_runtime_module = None


def _runtime():
    """flashmlir.runtime, imported on first use (it needs torch); then a
    global read, which the entry points' per-call path pays instead of an
    import statement (about a microsecond each through importlib)."""
    global _runtime_module
    if _runtime_module is None:
        from . import runtime
        _runtime_module = runtime
    return _runtime_module


def _f32(x):
    """x rounded to the f32 the metadata holds (the compiler's scale and
    softcap are f32s)."""
    import struct
    return struct.unpack("f", struct.pack("f", float(x)))[0]


def _flag(api, name, value):
    """A boolean argument: True or False (or a numpy bool), never a value
    read by its truth ('False' is a non-empty string)."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return bool(value)
    from . import runtime
    raise runtime.KernelArgumentError(
        f"{api}: {name} must be True or False, got {value!r}")


def _integer(api, name, value, low, high=None):
    """An integer argument in [low, high] (an int or numpy integer, not a
    bool, a float -- refused, not truncated -- or a tensor, whose value
    would be a host read)."""
    import numbers
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) \
            or value < low or (high is not None and value > high):
        from . import runtime
        bound = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise runtime.KernelArgumentError(
            f"{api}: {name} must be an integer {bound}, got {value!r}")
    return int(value)


def _tensors(api, layout, **tensors):
    """Each of `tensors` a torch.Tensor of len(layout) dims (layout names
    them, e.g. "[B, H, N, D]") with a head dim (the last) of at least 1:
    what the entry points index before any other check."""
    import torch
    from . import runtime
    rank = len(layout.strip("[]").split(","))
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor) or t.dim() != rank:
            got = (f"a {t.dim()}-D tensor" if isinstance(t, torch.Tensor)
                   else type(t).__name__)
            raise runtime.KernelArgumentError(
                f"{api}: {name} must be a {rank}-D tensor {layout}, got "
                f"{got}")
        if t.shape[-1] < 1:
            raise runtime.KernelArgumentError(
                f"{api}: {name}'s head dim (its last) must be at least 1, "
                f"got {tuple(t.shape)}")


def _kernel_dir(kernel_dir):
    if kernel_dir is not None and \
            not isinstance(kernel_dir, (str, _os.PathLike)):
        from . import runtime
        raise runtime.KernelArgumentError(
            f"kernel_dir must be None or a path, got {kernel_dir!r}")
    return kernel_dir


def kernel_file_name(arch, head_dim, dtype, causal, window=0,
                     bottom_right=False, split_kv=False, kv_lengths=False,
                     page_size=0, varlen=False, softcap=0.0,
                     value_head_dim=None, diagonal_offset=0, query_group=0,
                     kv_dtype=None, out_dtype="bf16", max_rows=0,
                     backward=False, deterministic=False):
    """The file name (without .cubin/.json) a kernel of these options has in
    a kernel folder, e.g. sm_90a_d128_f16_causal_bralign_splitkv_kvlens:
    the rule fa-compile --out-dir names its files by (fa::kernelFileName,
    fa/Target/KernelOptions.h; python/tests/test_kernel_options.py checks
    the two agree), here without the compiler so that a machine with only
    a driver finds the kernels. e4m3 kernels are named by their O too."""
    dv = head_dim if value_head_dim is None else value_head_dim
    return (f"{arch}_d{head_dim}{f'_dv{dv}' if dv != head_dim else ''}"
            f"_{dtype}{f'_{out_dtype}' if dtype == 'e4m3' else ''}"
            f"{'_causal' if causal else ''}"
            f"{f'_w{window}' if window else ''}"
            f"{f'_sc{softcap:g}' if softcap else ''}"
            f"{'_bralign' if bottom_right else ''}"
            f"{f'_do{diagonal_offset}' if diagonal_offset else ''}"
            f"{'_splitkv' if split_kv else ''}"
            f"{'_kvlens' if kv_lengths else ''}"
            f"{f'_paged{page_size}' if page_size else ''}"
            f"{'_varlen' if varlen else ''}"
            f"{f'_qg{query_group}' if query_group else ''}"
            f"{f'_mr{max_rows}' if max_rows else ''}"
            f"{'_kve4m3' if kv_dtype == 'e4m3' and dtype != 'e4m3' else ''}"
            f"{'_bwd' if backward else ''}"
            f"{'_det' if deterministic else ''}")


def _kernel_for(arch, head_dim, dtype, causal, kernel_dir, window=0,
                bottom_right=False, split_kv=False, kv_lengths=False,
                page_size=0, varlen=False, softcap=0.0, value_head_dim=None,
                diagonal_offset=0, query_group=0, kv_dtype=None, max_rows=0):
    """The launcher of one kernel: from `kernel_dir` (fa-compile output
    named like bench/build_kernels.sh writes it, e.g. sm_90a_d128_f16_causal
    .{cubin,json}, with _w<window>, _sc<softcap>, _bralign, _do<offset> and
    _splitkv suffixes for those masks and split-KV, _kvlens and _paged<P>
    for a KV cache's lengths and pages) when it is there, else compiled
    in-process (and saved to `kernel_dir` if one is given)."""
    from . import runtime

    dv = head_dim if value_head_dim is None else value_head_dim
    name = kernel_file_name(
        arch, head_dim, dtype, causal, window=window,
        bottom_right=bottom_right, split_kv=split_kv, kv_lengths=kv_lengths,
        page_size=page_size, varlen=varlen, softcap=softcap,
        value_head_dim=dv, diagonal_offset=diagonal_offset,
        query_group=query_group, kv_dtype=kv_dtype, max_rows=max_rows)
    # Every field of the metadata that changes what the kernel computes,
    # with its default where the call leaves it (a field that predates the
    # metadata reads as its default): a file named like the request but
    # compiled with other options (a scale, a mask alignment, varlen, a KV
    # cache, ...) is refused, not launched.
    out_dtype = "bf16" if dtype == "e4m3" else dtype
    want = {"arch": arch, "head_dim": head_dim, "dtype": dtype,
            "out_dtype": out_dtype, "value_head_dim": dv, "causal": causal,
            "window": window, "softcap": _f32(softcap),
            "bottom_right": bottom_right, "diagonal_offset": diagonal_offset,
            "split_kv": split_kv, "kv_splits": 0, "kv_lengths": kv_lengths,
            "page_size": page_size, "varlen": varlen,
            "query_group": query_group, "kv_dtype": kv_dtype or dtype,
            "max_rows": max_rows,
            # None: the launch's default scale, 1/sqrt(D) as compiled.
            "scale": _f32(1.0 / head_dim ** 0.5), "writes_lse": True}
    defaults = dict(want, out_dtype=dtype, value_head_dim=head_dim,
                    window=0, softcap=0.0, bottom_right=False,
                    diagonal_offset=0, split_kv=False, kv_lengths=False,
                    page_size=0, varlen=False, query_group=0,
                    kv_dtype=dtype, max_rows=0)
    if kernel_dir:
        path = _os.path.join(kernel_dir, name)
        if _os.path.exists(path + ".cubin"):
            kernel = runtime.Kernel.load(path)
            # The file name is a promise the metadata must keep.
            got = {k: kernel.meta.get(k, defaults[k]) for k in want}
            got["softcap"] = _f32(got["softcap"])
            # The compiler rounds 1/sqrt(D) in f32 steps (a unit in the
            # last place from the correctly rounded f32 at some D): the
            # default scale within a few.
            if abs(got["scale"] - want["scale"]) <= want["scale"] * 2**-20:
                got["scale"] = want["scale"]
            differ = sorted(k for k in want if got[k] != want[k])
            if differ:
                raise runtime.MetadataError(
                    f"{path}.json describes "
                    f"{ {k: got[k] for k in differ} }, not the requested "
                    f"{ {k: want[k] for k in differ} }")
            return kernel
    compiled = compile(head_dim=head_dim, causal=causal, dtype=dtype,
                       arch=arch, window=window, softcap=softcap,
                       bottom_right=bottom_right,
                       kv_splits="auto" if split_kv else None,
                       kv_lengths=kv_lengths, page_size=page_size,
                       varlen=varlen,
                       out_dtype="bf16" if dtype == "e4m3" else None,
                       value_head_dim=dv, diagonal_offset=diagonal_offset,
                       query_group=query_group, kv_dtype=kv_dtype,
                       max_rows=max_rows)
    if kernel_dir:
        _save_kernel(kernel_dir, name, compiled)
    return compiled.runtime_kernel()


def _save_kernel(kernel_dir, name, compiled):
    """Writes a compiled kernel's JSON and cubin as kernel_dir/name.*:
    metadata first, each file written aside and renamed into place, so a
    concurrent reader never sees a cubin without its JSON or half a file."""
    import json
    import tempfile
    _os.makedirs(kernel_dir, exist_ok=True)
    for suffix, data in ((".json", json.dumps(compiled.metadata,
                                              indent=2).encode()),
                         (".cubin", compiled.cubin)):
        fd, tmp = tempfile.mkstemp(dir=kernel_dir, suffix=".tmp")
        with _os.fdopen(fd, "wb") as fh:
            fh.write(data)
        _os.replace(tmp, _os.path.join(kernel_dir, name + suffix))


def attention(q, k, v, causal=False, scale=None, kernel_dir=None,
              num_splits=0, q_descale=None, k_descale=None, v_descale=None):
    """softmax(scale * q k^T) v on CUDA tensors [B, H, N, D] (f16/bf16, D in
    {64, 128, 256}, and any multiple of 32 up to 256 on sm_90a; k and v may
    have fewer heads than q: grouped-query attention), with torch SDPA's
    calling convention; causal is top-left
    aligned. Views are read in place by the sm_90a kernels (unit stride on
    D, other strides in multiples of 8 elements) and copied for sm_80; O is
    contiguous. The kernel for the tensors' GPU (sm_90a FlashAttention-3 on
    Hopper, the sm_80 kernel on Ampere) is looked up in `kernel_dir`
    (default: $FLASHMLIR_KERNEL_DIR), else compiled in-process on first use;
    either way it is cached for the process.

    num_splits (flash-attention's name): split-KV chunks on sm_90a. 0
    (default): split where the query blocks leave SMs idle (decode; the
    auto rule, runtime.auto_kv_splits, picks the count), 1: never, N: N.

    float8_e4m3fn q, k, v (sm_90a, D 128 or 256): FlashAttention-3's FP8
    kernel with its descales: float32 tensors of one element or numbers
    (per tensor), FA3's [B, Hkv] (per batch and K/V head; a query head
    takes its K/V head's q_descale), or per block (block quantisation: q's
    [B, Hq, ceil(Nq / 128)] and k's [B, Hkv, ceil(Nk / 128)], one per
    tile of the kernel, runtime.Kernel.descale_blocks; v's one); None: 1.0,
    as in FA3. O in bfloat16; no split-KV."""
    import torch
    runtime = _runtime()

    key = _call_key("attention", (q, k, v),
                    (causal, scale, kernel_dir, num_splits),
                    (q_descale, k_descale, v_descale))
    call = _calls.get(key) if key is not None else None
    if call is not None and runtime.aligned16(q, k, v):
        return call.run(q, k, v)
    causal = _flag("attention", "causal", causal)
    scale = runtime.check_scale(scale)
    num_splits = _integer("attention", "num_splits", num_splits, 0, 1024)
    _tensors("attention", "[B, H, N, D]", q=q, k=k, v=v)
    if not causal and isinstance(q, torch.Tensor) and \
            isinstance(k, torch.Tensor) and q.dim() == 4 and k.dim() == 4 \
            and q.dtype in (torch.float16, torch.bfloat16) and \
            all(x is None for x in (q_descale, k_descale, v_descale)):
        # Pack-GQA at decode: [B, Hq, 1, D] as [B, Hkv, G, D], so each K/V
        # block is read once per K/V head (fa::model::decodeHeadsPerTile).
        group = decode_heads_per_tile(q.shape[2], q.shape[1], k.shape[1])
        if group > 1 and _arch_and_dtype(q)[0] == "sm_90a":
            packed = q[:, :, 0].unflatten(1, (k.shape[1], group))
            out, plan = _launch(packed, k, v, False, scale, kernel_dir,
                                num_splits=num_splits)
            shape = (q.shape[0], q.shape[1], 1, out.shape[-1])
            _remember(key, _PlannedCall(plan, result_shape=shape))
            return out.view(shape)
    out, plan = _launch(q, k, v, causal, scale, kernel_dir,
                        num_splits=num_splits,
                        descales=(q_descale, k_descale, v_descale))
    if plan is not None:
        _remember(key, _PlannedCall(plan))
    return out


def _arch_and_dtype(q):
    """The verified kernel target of q's GPU and q's element type name."""
    import torch
    from . import runtime

    if not isinstance(q, torch.Tensor) or not q.is_cuda:
        raise runtime.KernelArgumentError("q must be a CUDA tensor")
    index = q.device.index if q.device.index is not None else \
        torch.cuda.current_device()
    major, minor = runtime.device_facts(index)[0]
    if (major, minor) == (9, 0):
        arch = "sm_90a"
    elif major == 8:
        arch = "sm_80"
    else:
        # The sm_100a kernel is compile-verified only: never run it silently.
        raise runtime.KernelArgumentError(
            f"no verified flash-mlir kernel for compute capability "
            f"{major}.{minor} (sm_80 and sm_90a are; sm_100a is compile-only)")
    dtype = {torch.float16: "f16", torch.bfloat16: "bf16"}.get(q.dtype)
    if q.dtype == getattr(torch, "float8_e4m3fn", None):
        # FP8: FlashAttention-3's e4m3 kernel, O in bf16 as FA3 writes it.
        if arch != "sm_90a":
            raise runtime.KernelArgumentError(
                f"float8_e4m3fn inputs have a kernel on sm_90a only, not "
                f"{arch}")
        dtype = "e4m3"
    if dtype is None:
        raise runtime.KernelArgumentError(
            f"q must be float16, bfloat16 or (sm_90a) float8_e4m3fn, got "
            f"{q.dtype}")
    return arch, dtype


_auto_split_memo = {}


def _split_kv(arch, q, k, num_splits, keys=None):
    """Whether the launch takes a split-KV kernel: asked for (num_splits >
    1), or, with num_splits 0, where the auto rule splits -- on the split
    kernels' tiles (B_r 64 at D <= 128, else 128; B_c 128 assumed)."""
    import math

    import torch
    from . import runtime

    if isinstance(num_splits, bool) or not isinstance(num_splits, int) or \
            not 0 <= num_splits <= 1024:
        raise runtime.KernelArgumentError(
            f"num_splits must be an integer in [0, 1024] (0: auto), got "
            f"{num_splits!r}")
    if num_splits == 1:
        return False
    if arch != "sm_90a":
        if num_splits > 1:
            raise runtime.KernelArgumentError(
                f"num_splits={num_splits}: split-KV kernels exist for sm_90a "
                f"only, not {arch}")
        return False
    if num_splits > 1:
        return True
    index = q.device.index if q.device.index is not None else \
        torch.cuda.current_device()
    keys = k.shape[2] if keys is None else keys
    # The auto rule's answer for these sizes on this device, remembered: a
    # serving loop asks it for the same shapes every call.
    memo = (tuple(q.shape), keys, index)
    split = _auto_split_memo.get(memo)
    if split is None:
        b, hq, nq, d = q.shape
        query_blocks = math.ceil(nq / (64 if d <= 128 else 128))
        _, sms, dram_gbps = runtime.device_facts(index)
        split = runtime.auto_kv_splits(b * hq * query_blocks, query_blocks,
                                       math.ceil(keys / 128), sms,
                                       dram_gbps) > 1
        if len(_auto_split_memo) > 4096:
            _auto_split_memo.clear()
        _auto_split_memo[memo] = split
    return split


def _launcher(q, k, causal, kernel_dir, window=0, bottom_right=False,
              num_splits=0, kv_lengths=False, page_size=0, keys=None,
              varlen=False, softcap=0.0, v=None, diagonal_offset=0,
              query_group=0, kv_dtype=None, max_rows=0):
    """The cached runtime.Kernel for these tensors and options, and whether
    it splits K/V. `keys`: the keys of a sequence (default k's rows; a
    paged cache's capacity); `v` (default: of k's head dim) decides the
    value head dim; `query_group`: a kernel that reads the query heads
    packed (q is then the packed [B, Hkv, Nq G, D])."""
    arch, dtype = _arch_and_dtype(q)
    kernel_dir = _kernel_dir(kernel_dir) or \
        _os.environ.get("FLASHMLIR_KERNEL_DIR")
    key = (arch, int(q.shape[-1]), dtype, bool(causal))
    # V narrower than Q and K (sm_90a): a kernel of its own.
    dv = key[1] if v is None else int(v.shape[-1])
    if dtype == "e4m3":
        # The e4m3 kernel has no split-KV, KV-cache or varlen form.
        if num_splits not in (0, 1) or kv_lengths or page_size or varlen:
            from . import runtime
            raise runtime.KernelArgumentError(
                "float8_e4m3fn inputs: the e4m3 kernel has no split-KV, "
                "KV-cache or varlen form")
        num_splits = 1
    split = _split_kv(arch, q, k, num_splits, keys)
    extra = (int(window), bool(bottom_right), split)
    if kv_lengths or page_size or varlen or softcap or dv != key[1] or \
            diagonal_offset or query_group or kv_dtype or max_rows:
        extra += (bool(kv_lengths), int(page_size), bool(varlen),
                  float(softcap), dv, int(diagonal_offset), int(query_group),
                  kv_dtype)
        if max_rows:
            extra += (int(max_rows),)
    # Plain kernels keep the short key (arch, D, dtype, causal).
    full = key if extra == (0, False, False) else key + extra
    if full not in _launchers:
        _launchers[full] = _kernel_for(*key, kernel_dir, *extra)
    return _launchers[full], split


def _launch(q, k, v, causal, scale, kernel_dir, window=0,
            bottom_right=False, num_splits=0, out=None, descales=None,
            softcap=0.0, diagonal_offset=0):
    """(O, plan) of [B, H, N, D] tensors through the cached launcher: the
    launch's plan (runtime.Kernel.plan) where the kernel reads the views in
    place (sm_90a, 16-bit), else None. `descales`: (q, k, v) descales of
    float8_e4m3fn inputs."""
    kernel, split = _launcher(q, k, causal, kernel_dir, window, bottom_right,
                              num_splits, softcap=softcap, v=v,
                              diagonal_offset=diagonal_offset)
    if kernel.meta["dtype"] == "e4m3":
        qd, kd, vd = descales or (None, None, None)
        out, _ = kernel(q, k, v, out=out, scale=scale, discard_lse=True,
                        q_descale=1.0 if qd is None else qd,
                        k_descale=1.0 if kd is None else kd,
                        v_descale=1.0 if vd is None else vd)
        return out, None
    if descales is not None and any(x is not None for x in descales):
        from . import runtime
        raise runtime.KernelArgumentError(
            "q_descale, k_descale, v_descale are for float8_e4m3fn inputs")
    if not kernel.strided:
        # The sm_80 kernel reads contiguous tensors only (no-ops when they
        # are); the sm_90a kernels take any view.
        out, _ = kernel(q.contiguous(), k.contiguous(), v.contiguous(),
                        out=out, scale=scale, discard_lse=True)
        return out, None
    # Callers here return O only: the LSE goes to the runtime's scratch.
    plan = kernel.plan(q, k, v, out=out, scale=scale,
                       num_splits=num_splits if split else None,
                       discard_lse=True)
    out, _ = plan.launch(q, k, v, out, None, None, None, None, None)
    return out, plan


def decode_heads_per_tile(queries, q_heads, kv_heads, masked=False):
    """Pack-GQA at decode: the query heads one tile's rows take, G = Hq /
    Hkv where one query a sequence, grouped heads and a kernel without
    masks (`masked`: causal or a window, which would tell the rows apart);
    else 1. fa::model::decodeHeadsPerTile (include/fa/Model/PackGQA.h) is
    the rule and the reason; a test checks that they agree."""
    if queries != 1 or masked or kv_heads <= 0 or q_heads <= kv_heads or \
            q_heads % kv_heads:
        return 1
    return q_heads // kv_heads


def query_group_for(queries, q_heads, kv_heads, masked, kv_bytes):
    """Pack-GQA beyond one query: the query heads of a K/V head packed
    query by query into one tile's rows (a kernel compiled with
    query_group = G, which reads Q, O and the LSE packed; Q is copied in
    and O out). G = Hq / Hkv for grouped heads (a power of two up to 64) at
    2 to 16 queries a sequence, or at one query with a mask (a window:
    decode_heads_per_tile's views cannot pack it), where the K and V the
    launch reads (`kv_bytes`) are at least 64 MiB (below an L2's worth the
    heads' repeated reads hit the L2 and the copies cost more); else 0.
    fa::model::queryGroupFor (include/fa/Model/PackGQA.h) is the rule; a
    test checks that they agree."""
    if kv_heads <= 0 or q_heads <= kv_heads or q_heads % kv_heads or \
            kv_bytes < _MIN_PACKED_KV_BYTES:
        return 0
    group = q_heads // kv_heads
    if group > 64 or group & (group - 1):
        return 0
    if not 1 <= queries <= _MAX_PACKED_QUERIES or (queries == 1 and
                                                     not masked):
        return 0
    return group


# fa::model::kMaxPackedQueries and kMinPackedKVBytes.
_MAX_PACKED_QUERIES = 16
_MIN_PACKED_KV_BYTES = 64 << 20


def _pack_query_heads(q, kv_heads, group):
    """q [B, Nq, Hq, D] packed as the query-group kernels read it:
    [B, Hkv, Nq G, D] (contiguous), row i G + g of matrix h query i of head
    h G + g -- a copy (the rows of one matrix are not evenly strided in
    q)."""
    b, nq, _, d = q.shape
    return q.view(b, nq, kv_heads, group, d).permute(0, 2, 1, 3, 4) \
        .reshape(b, kv_heads, nq * group, d)


def _unpack_query_heads(packed, out, group):
    """Writes a query-group kernel's O [B, Hkv, Nq G, D] into out
    [B, Nq, Hq, D]."""
    b, nq, hq, d = out.shape
    out.view(b, nq, hq // group, group, d).copy_(
        packed.view(b, hq // group, nq, group, d).permute(0, 2, 1, 3, 4))


def _pack_decode_heads(q, out, kv_heads, group):
    """q and out [B, 1, Hq, D] (flash-attention's layout) as the
    [B, Hkv, G, D] views a packed decode launch reads and writes: query
    head h * G + g of K/V head h is row g of matrix h."""
    return tuple(t[:, 0].unflatten(1, (kv_heads, group)) for t in (q, out))


def _flash_window(api, causal, window_size, softcap):
    """flash-attention's (causal, window_size, softcap) as the kernels'
    (causal, window, diagonal_offset, softcap). Query i' (its bottom-right
    position) keeps keys i' - left <= j <= i' + right. The kernels keep
    j <= p (causal) and |p - j| < w (window) around p = i' + offset, so
    (left, right) is causal, w = left + right + 1, offset = right: (w - 1,
    w - 1) is the symmetric window w alone, (w - 1, 0) causal with window
    w, (-1, r) causal with offset r. causal makes right 0, as in
    flash-attention. A left bound with right unbounded is refused."""
    import numbers

    from . import runtime

    causal = _flag(api, "causal", causal)
    try:
        left, right = window_size
    except (TypeError, ValueError):
        left = right = None
    if not all(isinstance(w, numbers.Integral) and not isinstance(w, bool)
               for w in (left, right)):
        raise runtime.KernelArgumentError(
            f"{api}: window_size must be a pair (left, right) of integers, "
            f"got {window_size!r}") from None
    left, right = int(left), int(right)
    if left < -1 or right < -1:
        raise runtime.KernelArgumentError(
            f"{api}: window_size {window_size!r}: each side is -1 "
            f"(unbounded) or a key count >= 0")
    if causal:
        right = 0
    causal = right == 0
    window, offset = 0, 0
    if left >= 0 and right in (left, 0):
        # The symmetric window, or causal with a window: no offset.
        window = left + 1
    elif left >= 0 and right == -1:
        raise runtime.KernelArgumentError(
            f"{api}: window_size {window_size!r}: a window bounded on the "
            f"left only is not supported; give right >= 0 (a right reach "
            f"of Nk - 1 sees every later key)")
    elif right > 0:
        causal, offset = True, right
        window = left + right + 1 if left >= 0 else 0
    # fa::checkSoftcap's range, checked here too so that a bad value is the
    # caller's error (KernelArgumentError) before anything runs or is
    # written, not the compiler's.
    if isinstance(softcap, bool) or not isinstance(softcap, numbers.Real) \
            or not (softcap == 0 or 2.0 ** -64 <= softcap <= 2.0 ** 24):
        raise runtime.KernelArgumentError(
            f"{api}: softcap must be a number, 0 (none) or in [2^-64, 2^24], "
            f"got {softcap!r}")
    return causal, window, offset, float(softcap)


def _backward_kernel_for(arch, head_dim, dtype, causal, bottom_right,
                         kernel_dir, deterministic=False, window=0,
                         diagonal_offset=0):
    """The backward kernel (flashmlir.backward.BackwardKernel) of these
    options: from `kernel_dir` (fa-compile --backward --out-dir, named
    kernel_file_name(..., backward=True)) when it is there, else compiled
    in-process (and saved to `kernel_dir` if one is given)."""
    from . import runtime
    from .backward import BackwardKernel

    key = ("backward", arch, head_dim, dtype, causal, bottom_right,
           deterministic, window, diagonal_offset)
    if key in _launchers:
        return _launchers[key]
    name = kernel_file_name(arch, head_dim, dtype, causal, window=window,
                            bottom_right=bottom_right,
                            diagonal_offset=diagonal_offset, backward=True,
                            deterministic=deterministic)
    want = {"arch": arch, "head_dim": head_dim, "dtype": dtype,
            "causal": causal, "window": window,
            "bottom_right": bottom_right, "diagonal_offset": diagonal_offset,
            "deterministic": deterministic}
    kernel = None
    if kernel_dir and _os.path.exists(_os.path.join(kernel_dir,
                                                    name + ".cubin")):
        path = _os.path.join(kernel_dir, name)
        kernel = BackwardKernel.load(path)
        # A kernel without a window or offset may leave them out.
        got = {k: kernel.meta.get(
            k, 0 if k in ("window", "diagonal_offset") else None)
            for k in want}
        if got != want:
            raise runtime.MetadataError(
                f"{path}.json describes {got}, not the requested {want}")
    else:
        compiled = compile(head_dim=head_dim, causal=causal, dtype=dtype,
                           arch=arch, window=window,
                           bottom_right=bottom_right,
                           diagonal_offset=diagonal_offset, backward=True,
                           deterministic=deterministic)
        kernel = BackwardKernel(compiled.cubin, compiled.metadata)
        if kernel_dir:
            _save_kernel(kernel_dir, name, compiled)
    _launchers[key] = kernel
    return kernel


def _differentiable_attention(q, k, v, scale, causal, window, offset,
                              softcap, deterministic, kernel_dir, descaled):
    """flash_attn_func where q, k or v requires grad: the forward kernel
    with its LSE, saved for the backward kernel (fa-compile --backward),
    through torch.autograd. The masks and options the backward kernel has
    no form for are refused here, before the forward runs."""
    import torch
    from . import runtime

    def refuse(why):
        raise runtime.KernelArgumentError(
            f"flash_attn_func: {why} has no backward kernel yet; for "
            f"inference call it under torch.no_grad() (or on detached "
            f"tensors)")
    if softcap:
        refuse("a softcap")
    if descaled or q.dtype not in (torch.float16, torch.bfloat16):
        refuse(f"{q.dtype} inputs")
    if q.shape[-1] not in (64, 128) or v.shape[-1] != q.shape[-1]:
        refuse(f"head dim {q.shape[-1]} (V {v.shape[-1]}; the backward "
               f"takes 64 or 128 for both)")
    return _FlashAttnFunction.get().apply(
        q, k, v, scale, causal, window, offset,
        _kernel_dir(kernel_dir) or _os.environ.get("FLASHMLIR_KERNEL_DIR"),
        bool(deterministic))


def _mask_alignment(nq, nk, causal, window=0, offset=0):
    """flash-attn's masks (bottom-right aligned) as the kernels take them:
    (causal, bottom_right, offset). One query at the last key position
    sees every key without a window (fa::model::causalMaskIsVacuous); where
    Nq == Nk the bottom-right diagonal is the top-left one, and the
    top-left kernels (the ones bench/build_kernels.sh precompiles) serve."""
    causal = bool(causal)
    if nq == 1 and causal and window == 0:
        causal, offset = False, 0
    return causal, (causal or window > 0) and nq != nk, offset


def _forward_with_lse(q, k, v, scale, causal, kernel_dir, window=0,
                      offset=0):
    """The forward of a differentiable flash_attn_func on [B, N, H, D]
    tensors: (O [B, Hq, Nq, D], LSE [B, Hq, Nq] f32, the kernel's arch)."""
    causal, bottom_right, offset = _mask_alignment(
        q.shape[1], k.shape[1], causal, window, offset)
    bhnd = [t.transpose(1, 2) for t in (q, k, v)]
    kernel, _ = _launcher(bhnd[0], bhnd[1], causal, kernel_dir, window,
                          bottom_right, 1, v=bhnd[2], diagonal_offset=offset)
    if not kernel.strided:
        bhnd = [t.contiguous() for t in bhnd]
    out, lse = kernel(*bhnd, scale=scale)
    return out, lse, kernel.meta["arch"]


def _backward_from_lse(grad_out, q, k, v, out, lse, scale, causal, arch,
                       kernel_dir, deterministic, window=0, offset=0):
    """dq, dk, dv ([B, N, H, D], q's, k's, v's layout) of flash_attn_func
    from its [B, N, H, D] inputs, its O [B, Hq, Nq, D] and LSE, and the
    loss gradient grad_out [B, Nq, Hq, D], by the backward kernel."""
    import torch
    causal, bottom_right, offset = _mask_alignment(
        q.shape[1], k.shape[1], causal, window, offset)
    d = q.shape[-1]
    dtype = "bf16" if q.dtype == torch.bfloat16 else "f16"
    kernel = _backward_kernel_for(arch, d, dtype, causal, bottom_right,
                                  kernel_dir, deterministic, window, offset)
    # The backward kernel reads packed [B, H, N, D] rows.
    q, k, v, grad_out = (t.transpose(1, 2).contiguous()
                         for t in (q, k, v, grad_out))
    dq, dk, dv = kernel(q, k, v, out.contiguous(), lse.contiguous(),
                        grad_out, scale=scale or 1 / d ** 0.5)
    return dq.transpose(1, 2), dk.transpose(1, 2), dv.transpose(1, 2)


class _FlashAttnFunction:
    """The torch.autograd.Function of a differentiable flash_attn_func,
    made on first use (torch is imported lazily)."""
    _function = None

    @classmethod
    def get(cls):
        if cls._function is None:
            import torch

            class FlashAttn(torch.autograd.Function):
                @staticmethod
                def forward(ctx, q, k, v, scale, causal, window, offset,
                            kernel_dir, deterministic):
                    out, lse, arch = _forward_with_lse(
                        q, k, v, scale, causal, kernel_dir, window, offset)
                    ctx.save_for_backward(q, k, v, out, lse)
                    ctx.options = (scale, causal, arch, kernel_dir,
                                   deterministic, window, offset)
                    return out.transpose(1, 2)

                @staticmethod
                def backward(ctx, grad_out):
                    q, k, v, out, lse = ctx.saved_tensors
                    (scale, causal, arch, kernel_dir, deterministic, window,
                     offset) = ctx.options
                    return _backward_from_lse(
                        grad_out, q, k, v, out, lse, scale, causal, arch,
                        kernel_dir, deterministic, window,
                        offset) + (None,) * 6

            cls._function = FlashAttn
        return cls._function


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False,
                    window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                    deterministic=False, return_attn_probs=False,
                    kernel_dir=None, num_splits=0, q_descale=None,
                    k_descale=None, v_descale=None):
    """flash-attention's `flash_attn_func` on flash-mlir's kernels:
    q [B, Nq, Hq, D], k and v [B, Nk, Hkv, D] (Hkv dividing Hq), f16/bf16
    CUDA tensors; returns O [B, Nq, Hq, D].

    Differentiable where q, k or v requires grad (and grad mode is on): the
    forward kernel keeps its LSE and the backward kernel (fa-compile
    --backward, mma.sync) gives dq, dk, dv; D 64 or 128, no mask, causal
    or a window_size. deterministic=True takes the backward kernel that
    adds into dQ in a fixed order of its key blocks (the same gradients
    every run). Softcaps and e4m3 inputs have no backward kernel yet and
    are refused there (inference under torch.no_grad() takes them all).

    As in flash-attention, `causal` is aligned to the bottom-right corner
    (query i sees keys j <= i + Nk - Nq: a KV cache, chunked prefill), and
    `window_size = (left, right)` keeps keys with -left <= j - (i + Nk - Nq)
    <= right (-1: unbounded; a left bound with right unbounded is refused);
    softcap c gives scores c * tanh(s / c) (0: none). Dropout, ALiBi and
    returning the probabilities are refused.

    The sm_90a kernels read q, k, v and write O in place through strided
    tensor maps (no copy: [B, N, H, D] is a strided [B, H, N, D] view); the
    sm_80 kernel takes contiguous [B, H, N, D] tensors, so there q, k and v
    are copied into that layout and O back. num_splits: as in
    flashmlir.attention (split-KV decode). float8_e4m3fn inputs with
    q_descale, k_descale, v_descale (FA3's arguments: one element each or
    [B, Hkv], None meaning 1.0) run the FP8 kernel; O is bfloat16."""
    import torch
    runtime = _runtime()

    if dropout_p:
        raise runtime.KernelArgumentError(
            "flash_attn_func: dropout is not supported (inference only)")
    if alibi_slopes is not None or return_attn_probs:
        raise runtime.KernelArgumentError(
            "flash_attn_func: alibi_slopes and return_attn_probs are not "
            "supported")
    key = _call_key("flash_attn_func", (q, k, v),
                    (dropout_p, softmax_scale, causal, window_size, softcap,
                     deterministic, return_attn_probs, num_splits,
                     kernel_dir),
                    (alibi_slopes, q_descale, k_descale, v_descale))
    call = _calls.get(key) if key is not None else None
    # A remembered call is the inference path: a call that needs gradients
    # goes through autograd below.
    if call is not None and runtime.aligned16(q, k, v) and not (
            q.requires_grad or k.requires_grad or v.requires_grad):
        return call.run(q, k, v)
    causal, window, offset, softcap = _flash_window(
        "flash_attn_func", causal, window_size, softcap)
    softmax_scale = runtime.check_scale(softmax_scale,
                                        "flash_attn_func: softmax_scale")
    num_splits = _integer("flash_attn_func", "num_splits", num_splits, 0,
                          1024)
    _tensors("flash_attn_func", "[B, N, H, D]", q=q, k=k, v=v)
    if torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)):
        return _differentiable_attention(
            q, k, v, softmax_scale, causal, window, offset, softcap,
            deterministic, kernel_dir,
            any(x is not None for x in (q_descale, k_descale, v_descale)))
    nq = q.shape[1]
    causal, bottom_right, offset = _mask_alignment(nq, k.shape[1], causal,
                                                   window, offset)
    bhnd = [t.transpose(1, 2) for t in (q, k, v)]
    descales = (q_descale, k_descale, v_descale)
    # Pack-GQA at decode, on the sm_90a kernels (strided views) with 16-bit
    # inputs (an e4m3 kernel's descales may be per query block).
    hq, hkv = q.shape[2], k.shape[2]
    group = decode_heads_per_tile(nq, hq, hkv, causal or window > 0) \
        if q.dtype in (torch.float16, torch.bfloat16) else 1
    if group > 1 and _arch_and_dtype(q)[0] == "sm_90a":
        if any(x is not None for x in descales):
            raise runtime.KernelArgumentError(
                "q_descale, k_descale, v_descale are for float8_e4m3fn "
                "inputs")
        out = torch.empty(q.shape[:3] + v.shape[3:], device=q.device,
                          dtype=q.dtype)
        qp, op = _pack_decode_heads(q, out, hkv, group)
        _, plan = _launch(qp, bhnd[1], bhnd[2], causal, softmax_scale,
                          kernel_dir, window, bottom_right, num_splits,
                          out=op, softcap=softcap, diagonal_offset=offset)
        _remember(key, _PlannedCall(plan, out.shape, out.dtype))
        return out
    kernel, _ = _launcher(bhnd[0], bhnd[1], causal, kernel_dir, window,
                          bottom_right, num_splits, softcap=softcap,
                          v=bhnd[2], diagonal_offset=offset)
    if not kernel.strided:
        out, _ = _launch(*bhnd, causal, softmax_scale, kernel_dir, window,
                         bottom_right, num_splits, descales=descales,
                         softcap=softcap, diagonal_offset=offset)
        return out.transpose(1, 2).contiguous()
    # O in the inputs' type, or bf16 for e4m3 inputs (FA3's FP8 output),
    # of V's head dim.
    out = torch.empty(q.shape[:3] + v.shape[3:], device=q.device,
                      dtype=torch.bfloat16 if kernel.meta["dtype"] == "e4m3"
                      else q.dtype)
    _, plan = _launch(*bhnd, causal, softmax_scale, kernel_dir, window,
                      bottom_right, num_splits, out=out.transpose(1, 2),
                      descales=descales, softcap=softcap,
                      diagonal_offset=offset)
    if plan is not None:
        _remember(key, _PlannedCall(plan, out.shape, out.dtype))
    return out


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None,
                            rotary_cos=None, rotary_sin=None,
                            cache_seqlens=None, cache_batch_idx=None,
                            cache_leftpad=None, block_table=None,
                            softmax_scale=None, causal=False,
                            window_size=(-1, -1), softcap=0.0,
                            rotary_interleaved=True, alibi_slopes=None,
                            num_splits=0, return_softmax_lse=False,
                            kernel_dir=None, k_descale=None, v_descale=None):
    """flash-attention's `flash_attn_with_kvcache` on the sm_90a kernels,
    with its argument names and layouts: q [B, Nq, Hq, D]; k_cache and
    v_cache [B, Nk, Hkv, D], or with block_table [B, max_pages] (int32) a
    paged cache [pages, page_size, Hkv, D] (page_size a multiple of 16);
    cache_seqlens (int or int32 [B]): the keys each sequence has. k and v
    [B, Nnew, Hkv, D], when given, are first written into the cache at
    positions cache_seqlens .. cache_seqlens + Nnew - 1 of each sequence
    (in place, as flash-attention does), and the attention then sees
    cache_seqlens + Nnew keys. causal is bottom-right aligned: query i of a
    sequence of L keys sees keys j <= i + L - Nq. Returns O [B, Nq, Hq, D]
    (and the LSE [B, Hq, Nq] with return_softmax_lse).

    The kernels read the cache in place through strided tensor maps (the
    pages' rows, heads and page strides); cache_seqlens and block_table
    are read by the kernel on the GPU. window_size and softcap as in
    flash_attn_func (the window is bottom-right aligned with each
    sequence's length). Refused (as not supported): rotary embeddings,
    cache_batch_idx, cache_leftpad and ALiBi.

    An e4m3 cache (k_cache and v_cache in torch.float8_e4m3fn, as vLLM and
    SGLang keep them) beside an f16/bf16 q takes k_descale and v_descale
    (FlashAttention-3's names; vLLM's k_scale / v_scale): float32 device
    tensors of one element or [B, Hkv], the cache's values being its codes
    times them. The kernel widens each K/V block to q's type on chip, so
    the products run at q's precision and only the cache's bytes halve.
    Appended k and v (in q's dtype) are quantised on the way in:
    k / k_descale rounded to e4m3, saturated at +-448."""
    import numbers

    import torch
    runtime = _runtime()

    # A call whose arguments have the signature of one that passed every
    # check below (tensors' shapes, strides, dtypes, devices; the options
    # by type and value) repeats its launch without them: a serving loop's
    # per-token host time.
    lengths_tensor = isinstance(cache_seqlens, torch.Tensor)
    key = _call_key(
        "flash_attn_with_kvcache",
        (q, k_cache, v_cache, k, v, block_table,
         cache_seqlens if lengths_tensor else None, k_descale, v_descale),
        (None if lengths_tensor else cache_seqlens, softmax_scale, causal,
         window_size, softcap, num_splits, return_softmax_lse, kernel_dir),
        (rotary_cos, rotary_sin, cache_batch_idx, cache_leftpad,
         alibi_slopes))
    call = _calls.get(key) if key is not None else None
    if call is not None and runtime.aligned16(q, k_cache, v_cache):
        return call.run(q, k_cache, v_cache, k, v, cache_seqlens,
                        block_table, kv_descales=_descales_of(
                            k_descale, v_descale))

    if rotary_cos is not None or rotary_sin is not None:
        raise runtime.KernelArgumentError(
            "flash_attn_with_kvcache: rotary embeddings are not supported; "
            "apply them to q and k before the call")
    if cache_batch_idx is not None or cache_leftpad is not None:
        raise runtime.KernelArgumentError(
            "flash_attn_with_kvcache: cache_batch_idx and cache_leftpad are "
            "not supported")
    if alibi_slopes is not None:
        raise runtime.KernelArgumentError(
            "flash_attn_with_kvcache: alibi_slopes are not supported")
    # Every check comes before the first write into the caller's cache: a
    # refused call leaves k_cache and v_cache as they were. The options
    # first, then the tensors (types, devices, dtypes, shapes), then the
    # kernel (looked up or compiled, which may refuse) and its own argument
    # checks; only then are k and v appended.
    api = "flash_attn_with_kvcache"
    causal, window, offset, softcap = _flash_window(
        api, causal, window_size, softcap)
    softmax_scale = runtime.check_scale(softmax_scale,
                                        f"{api}: softmax_scale")
    num_splits = _integer(api, "num_splits", num_splits, 0, 1024)
    return_softmax_lse = _flag(api, "return_softmax_lse", return_softmax_lse)
    _tensors(api, "[B, N, H, D]", q=q, k_cache=k_cache, v_cache=v_cache)
    if (k is None) != (v is None):
        raise runtime.KernelArgumentError(
            f"{api}: give both k and v, or neither")
    appended = () if k is None else (("k", k), ("v", v))
    if appended:
        _tensors(api, "[B, Nnew, Hkv, D]", k=k, v=v)
    b = q.shape[0]
    paged = block_table is not None
    if paged:
        if not isinstance(block_table, torch.Tensor) or \
                block_table.dim() != 2 or block_table.shape[0] != b or \
                block_table.dtype != torch.int32:
            raise runtime.KernelArgumentError(
                f"{api}: block_table must be an int32 tensor [B = {b}, "
                f"max_pages]")
        page_size = int(k_cache.shape[1])
        capacity = block_table.shape[1] * page_size
    else:
        page_size = 0
        capacity = int(k_cache.shape[1])
        if k_cache.shape[0] != b:
            raise runtime.KernelArgumentError(
                f"{api}: k_cache must have q's batch ({b}) without a "
                f"block_table, got {k_cache.shape[0]}")
    n_new = 0 if k is None else k.shape[1]
    if n_new > capacity:
        raise runtime.KernelArgumentError(
            f"{api}: {n_new} new keys do not fit a cache of {capacity}")
    if isinstance(cache_seqlens, numbers.Integral) and \
            not isinstance(cache_seqlens, bool):
        # A host number: checked here (a tensor's values stay on the
        # device, asserted by the kernel and by torch's indexing).
        cache_seqlens = _integer(api, "cache_seqlens", cache_seqlens, 0,
                                 capacity - n_new)
    elif cache_seqlens is not None and (
            not isinstance(cache_seqlens, torch.Tensor) or
            cache_seqlens.dtype != torch.int32 or
            tuple(cache_seqlens.shape) != (b,)):
        raise runtime.KernelArgumentError(
            f"{api}: cache_seqlens must be an int or an int32 tensor "
            f"[B = {b}]")
    if k is not None and cache_seqlens is None:
        raise runtime.KernelArgumentError(
            f"{api}: appending k and v needs cache_seqlens (where each "
            f"sequence's new keys go)")
    # q on a GPU with a KV-cache kernel (sm_90a), in f16 or bf16.
    arch, dtype = _arch_and_dtype(q)
    if arch != "sm_90a":
        raise runtime.KernelArgumentError(
            f"{api}: KV caches need an sm_90a kernel, not {arch}")
    others = (("k_cache", k_cache), ("v_cache", v_cache)) + appended
    fp8 = getattr(torch, "float8_e4m3fn", None)
    e4m3_cache = fp8 is not None and fp8 in (k_cache.dtype, v_cache.dtype)
    if e4m3_cache:
        # An e4m3 cache beside a 16-bit q: both caches e4m3, the appended
        # k and v in q's dtype (quantised on the way in), and the descales.
        if k_cache.dtype != fp8 or v_cache.dtype != fp8 or \
                q.dtype not in (torch.float16, torch.bfloat16):
            raise runtime.KernelArgumentError(
                f"{api}: an e4m3 cache needs k_cache and v_cache both "
                f"float8_e4m3fn beside an f16 or bf16 q, got {k_cache.dtype}, "
                f"{v_cache.dtype} and q {q.dtype}")
        if k_descale is None or v_descale is None:
            raise runtime.KernelArgumentError(
                f"{api}: an e4m3 cache needs k_descale and v_descale "
                f"(float32 device tensors of one element or [B, Hkv])")
        others = appended
    elif k_descale is not None or v_descale is not None:
        raise runtime.KernelArgumentError(
            f"{api}: k_descale and v_descale are for an e4m3 "
            f"(float8_e4m3fn) cache; this one is {k_cache.dtype}")
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        if t.device != q.device:
            raise runtime.KernelArgumentError(
                f"{api}: {name} must be on {q.device} (q's), got {t.device}")
    for name, t in others:
        if t.dtype != q.dtype or t.device != q.device:
            raise runtime.KernelArgumentError(
                f"{api}: {name} must be {q.dtype} on {q.device} (q's), got "
                f"{t.dtype} on {t.device}")
    for name, t in (("cache_seqlens", cache_seqlens),
                    ("block_table", block_table)):
        if isinstance(t, torch.Tensor) and t.device != q.device:
            raise runtime.KernelArgumentError(
                f"{api}: {name} must be on {q.device} (q's), got {t.device}")
    if v_cache.shape != k_cache.shape or q.shape[3] != k_cache.shape[3]:
        raise runtime.KernelArgumentError(
            f"{api}: k_cache {tuple(k_cache.shape)} and v_cache "
            f"{tuple(v_cache.shape)} must have one shape, with q's head dim "
            f"({q.shape[3]})")
    if k is not None and (k.shape != v.shape or k.shape[0] != b or
                          k.shape[2:] != k_cache.shape[2:]):
        raise runtime.KernelArgumentError(
            f"{api}: k and v must be [B, Nnew, Hkv, D] with q's batch and "
            f"the cache's heads and head dim, got {tuple(k.shape)} and "
            f"{tuple(v.shape)}")
    # The lengths and the block table stay on the device: the kernel checks
    # that each length is within the capacity and each page it reads is a
    # page of the cache (it traps otherwise, stopping as torch's device-side
    # asserts do), so the call never waits for the GPU.
    nq, hq, hkv = q.shape[1], q.shape[2], k_cache.shape[2]
    if nq == 1 and causal and window == 0:
        # One query a sequence, at its last key: the bottom-right causal
        # mask (and a right reach) hides no key from it, and the unmasked
        # kernel serves (fa::model::causalMaskIsVacuous).
        causal, offset = False, 0
    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    kh, vh = k_cache.transpose(1, 2), v_cache.transpose(1, 2)
    # Pack-GQA: the query heads of a K/V head as one tile's rows, so each
    # K/V block is read once per K/V head, not once per query head.
    sixteen_bit = q.dtype in (torch.float16, torch.bfloat16)
    group = decode_heads_per_tile(nq, hq, hkv, causal or window > 0) \
        if sixteen_bit else 1
    # Beyond the views' reach (a few queries, or a window): a kernel that
    # reads the query heads packed, Q copied in and O out.
    kv_bytes = 2 * b * hkv * capacity * q.shape[3] * k_cache.element_size()
    query_group = query_group_for(nq, hq, hkv, causal or window > 0,
                                  kv_bytes) \
        if sixteen_bit and group == 1 else 0
    if group > 1:
        qh, oh = _pack_decode_heads(q, out, hkv, group)
    elif query_group:
        qh = _pack_query_heads(q, hkv, query_group)
        oh = torch.empty_like(qh)
    else:
        qh, oh = q.transpose(1, 2), out.transpose(1, 2)
    # Without a mask no row's query matters: the plain kernel attends the
    # packed rows; a mask needs the kernel that sees row r as query r / G.
    launch = dict(kv_lengths=cache_seqlens is not None, page_size=page_size,
                  keys=capacity, softcap=softcap, diagonal_offset=offset,
                  query_group=query_group if causal or window > 0 else 0,
                  kv_dtype="e4m3" if e4m3_cache else None)
    kernel = None
    if e4m3_cache and qh.shape[2] <= 8:
        # Decode on an e4m3 cache: at most 8 real rows a tile, so the
        # kernel that steps each thread's first row only (max_rows = 8;
        # its consumer's per-key work bounds this kernel,
        # bench/results/2026-12-07-fp8-decode-profile-h100.md). Where it
        # is neither in the kernel folder nor compilable here, the kernel
        # of any rows serves.
        try:
            kernel, split = _launcher(qh, kh, causal, kernel_dir, window,
                                      causal or window > 0, num_splits,
                                      max_rows=8, **launch)
        except (CompileError, ImportError, OSError):
            kernel = None
    if kernel is None:
        kernel, split = _launcher(qh, kh, causal, kernel_dir, window,
                                  causal or window > 0, num_splits, **launch)
    if not kernel.strided:
        raise runtime.KernelArgumentError(
            f"{api}: KV caches need an sm_90a kernel")
    table = block_table.contiguous() if paged else None
    lengths = _kvcache_lengths(cache_seqlens, b, q.device)
    # The lengths the kernel will see (a device op, nothing written to the
    # cache), and the kernel's own checks of every tensor it will read: the
    # launch's plan, checked before the append.
    seen = lengths if k is None else (lengths + n_new).contiguous()
    kv_descales = _descales_of(k_descale, v_descale)
    plan = kernel.plan(qh, kh, vh, out=oh, scale=softmax_scale,
                       num_splits=num_splits if split else None,
                       discard_lse=not return_softmax_lse,
                       cache_seqlens=seen, block_table=table,
                       kv_descales=kv_descales)
    # The new keys and values written by the kernel's append kernel (one
    # launch) where it has one for these tensors; else by torch ops.
    appender = None if k is None else kernel.kv_append_plan(
        k, v, k_cache, v_cache, page_size,
        block_table.shape[1] if paged else 0, capacity,
        descale_layout=plan.descale_layout)
    call = _KVCacheCall(plan, page_size, return_softmax_lse, (b, hq, nq),
                        capacity, query_group, appender)
    result = call.run(q, k_cache, v_cache, k, v, cache_seqlens, block_table,
                      out, kv_descales)
    _remember(key, call)
    return result


# Checked entry-point calls by their arguments' signature (_call_key):
# _KVCacheCall and _PlannedCall.
_calls = {}


def _call_key(api, tensors, options, unsupported=()):
    """What the checks of entry point `api` depend on: the tensors'
    signatures (shapes, strides, dtypes, devices) and the options by type
    and value; None where a call must be checked in full (a tensor that is
    not a torch.Tensor, an unsupported argument given, an option that does
    not hash)."""
    for x in unsupported:
        if x is not None:
            return None
    signature = _runtime()._signature(tensors)
    if signature is None:
        return None
    # The options by type and value (True is not 1, 1.0 not 1).
    key = (api, signature, tuple(map(type, options)), tuple(options))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _remember(key, call):
    """Keeps `call` for key (unless None), the oldest dropped past 256."""
    if key is not None:
        if len(_calls) >= 256:
            _calls.pop(next(iter(_calls)))
        _calls[key] = call


class _PlannedCall:
    """A checked attention or flash_attn_func call: the kernel's launch plan
    over the [B, H, N, D] views its checks saw, each starting where its
    tensor does, and the O it returns (`out_shape`/`out_dtype`: allocated
    here and written through the plan's view of it; else the plan's own O,
    seen as `result_shape`)."""

    def __init__(self, plan, out_shape=None, out_dtype=None,
                 result_shape=None):
        self.plan, self.out_shape, self.out_dtype = plan, out_shape, out_dtype
        self.result_shape = result_shape

    def run(self, q, k, v):
        import torch

        out = None
        if self.out_shape is not None:
            out = torch.empty(self.out_shape, dtype=self.out_dtype,
                              device=q.device)
        o, _ = self.plan.launch(q, k, v, out, None, None, None, None, None)
        if out is None:
            out = o if self.result_shape is None else o.view(
                self.result_shape)
        return out


def _check_cache_on_host(lengths, n_new, capacity, table, page_size,
                         num_pages):
    """FLASHMLIR_CHECK_INPUTS: what the kernel checks on the device, here
    with a message (a read of the lengths and the table: it synchronises).
    Each sequence's keys after the append, lengths + n_new, lie in [0,
    capacity] (before anything is written), and the block-table entries of
    its pages are pages of the cache."""
    from . import runtime

    api = "flash_attn_with_kvcache"
    for i, n in enumerate(lengths.tolist()):
        if not 0 <= n <= capacity - n_new:
            raise runtime.KernelArgumentError(
                f"{api}: cache_seqlens[{i}] = {n} with {n_new} new keys is "
                f"outside [0, capacity = {capacity}] (FLASHMLIR_CHECK_INPUTS)")
        if table is None:
            continue
        pages = table[i, :-(-(n + n_new) // page_size)].tolist()
        bad = [p for p in pages if not 0 <= p < num_pages]
        if bad:
            raise runtime.KernelArgumentError(
                f"{api}: block_table[{i}] holds {bad[0]}, not a page of the "
                f"cache's {num_pages} (FLASHMLIR_CHECK_INPUTS)")


def _check_sums_on_host(cu_seqlens_q, cu_seqlens_k, total_q, total_k,
                        max_seqlen_q):
    """FLASHMLIR_CHECK_INPUTS: the varlen prefix sums as the kernel checks
    them, here with a message (a read of the sums: it synchronises)."""
    from . import runtime

    for name, sums, total in (("cu_seqlens_q", cu_seqlens_q, total_q),
                              ("cu_seqlens_k", cu_seqlens_k, total_k)):
        values = sums.tolist()
        if values[0] != 0 or any(b < a for a, b in zip(values, values[1:])) \
                or values[-1] > total:
            raise runtime.KernelArgumentError(
                f"flash_attn_varlen_func: {name} {values} must start at 0, "
                f"not decrease and end within the {total} packed rows "
                f"(FLASHMLIR_CHECK_INPUTS)")
    values = cu_seqlens_q.tolist()
    longest = max(b - a for a, b in zip(values, values[1:]))
    if longest > max_seqlen_q:
        raise runtime.KernelArgumentError(
            f"flash_attn_varlen_func: a sequence has {longest} queries, more "
            f"than max_seqlen_q = {max_seqlen_q} (FLASHMLIR_CHECK_INPUTS)")


def _kvcache_lengths(cache_seqlens, b, device):
    """cache_seqlens (checked) as the int32 [B] device tensor the kernel
    reads: an integer made one, a tensor as it is, None (no lengths) kept."""
    import torch

    if cache_seqlens is None or isinstance(cache_seqlens, torch.Tensor):
        return cache_seqlens if cache_seqlens is None \
            else cache_seqlens.contiguous()
    return torch.full((b,), int(cache_seqlens), dtype=torch.int32,
                      device=device)


class _KVCacheCall:
    """A checked flash_attn_with_kvcache call: the kernel's launch plan
    (over the [B, H, N, D] views the checks saw: the transposed caches, Q
    and O packed or transposed) and what the launch adds. `run` appends
    and launches for tensors of the same signature, through their own
    storage: each view starts where its tensor does, and the plan holds
    the views' shapes and strides."""

    def __init__(self, plan, page_size, return_lse, lse_shape, capacity,
                 query_group=0, appender=None):
        self.plan, self.page_size = plan, page_size
        # The kernel's append plan (runtime._AppendPlan), or None: torch ops
        # append.
        self.appender = appender
        self.return_lse, self.lse_shape = return_lse, lse_shape
        self.capacity = capacity
        # A kernel that reads the query heads packed: Q packed in, O (and
        # the LSE) unpacked after the launch.
        self.query_group = query_group

    def run(self, q, k_cache, v_cache, k, v, cache_seqlens, block_table,
            out=None, kv_descales=None):
        import torch

        if out is None:
            out = torch.empty_like(q, memory_format=torch.contiguous_format)
        table = block_table.contiguous() if block_table is not None \
            else None
        lengths = _kvcache_lengths(cache_seqlens, q.shape[0], q.device)
        if _CHECK_INPUTS and lengths is not None:
            _check_cache_on_host(lengths, 0 if k is None else k.shape[1],
                                 self.capacity, table, self.page_size,
                                 k_cache.shape[0])
        # The lengths the attention reads: the cache's, or with new rows
        # theirs plus Nnew, written by the append kernel in the same launch
        # as the rows (quantised for an e4m3 cache) where it takes these
        # tensors (None where a tensor does not start on a whole piece).
        seen = lengths
        if k is not None:
            seen = None if self.appender is None else self.appender.launch(
                k, v, k_cache, v_cache, lengths, table, kv_descales)
        if k is not None and seen is None:
            seen = (lengths + k.shape[1]).contiguous()
            if kv_descales is not None:
                # An e4m3 cache: the new keys and values quantised, written
                # as their codes.
                k, v = (_quantize_e4m3(x, d).view(torch.uint8)
                        for x, d in zip((k, v), kv_descales))
                k_cache, v_cache = (c.view(torch.uint8)
                                    for c in (k_cache, v_cache))
            _append_to_cache(k_cache, v_cache, k, v, lengths, table,
                             self.page_size)
        group = self.query_group
        if group:
            kv_heads = k_cache.shape[2]
            packed = _pack_query_heads(q, kv_heads, group)
            packed_out, lse = self.plan.launch(
                packed, k_cache, v_cache, torch.empty_like(packed), None,
                seen, table, None, None, kv_descales)
            _unpack_query_heads(packed_out, out, group)
            if not self.return_lse:
                return out
            # [B, Hkv, Nq G] (row i G + g) as [B, Hq, Nq].
            b, hq, nq = self.lse_shape
            return out, lse.view(b, kv_heads, nq, group).permute(
                0, 1, 3, 2).reshape(b, hq, nq)
        _, lse = self.plan.launch(q, k_cache, v_cache, out, None, seen, table,
                                  None, None, kv_descales)
        if not self.return_lse:
            return out
        # A packed launch's LSE [B, Hkv, G] is [B, Hq, 1] in the same
        # memory.
        return out, lse.view(self.lse_shape)


def _descales_of(k_descale, v_descale):
    """(k_descale, v_descale) of an e4m3 cache, or None for a 16-bit one."""
    if k_descale is None and v_descale is None:
        return None
    return (k_descale, v_descale)


def _quantize_e4m3(x, descale):
    """x [B, N, Hkv, D] as e4m3 codes of x / descale (one descale, or one
    per (batch, K/V head) [B, Hkv]), saturated at the format's +-448 (a
    cast alone turns what lies beyond into NaN)."""
    import torch

    d = descale.float()
    if d.numel() != 1:
        d = d[:, None, :, None]
    return (x.float() / d).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)


def _append_to_cache(k_cache, v_cache, k, v, lengths, block_table,
                     page_size):
    """Writes k and v [B, Nnew, Hkv, D] into the cache after each sequence's
    `lengths` keys (through the block table when paged). The caller has
    checked every argument: this writes."""
    import torch

    b, n_new = k.shape[0], k.shape[1]
    # No host read of the lengths or the table: every index is read as an
    # unsigned 32-bit number, so that a negative length or page is past
    # any cache (2^32 - |x|) rather than an index torch wraps around from
    # the end, and torch's device-side bounds assert stops the write, as it
    # stops a position past the capacity (a block-table column past
    # max_pages, a page past the cache). The kernel then asserts the new
    # lengths against the capacity.
    positions = (lengths.long() & 0xFFFFFFFF)[:, None]
    if n_new > 1:
        positions = positions + torch.arange(n_new, device=k.device)[None, :]
    if block_table is None:
        rows = _sequence_rows(b, k.device)[:, None].expand(b, n_new)
        k_cache[rows, positions] = k
        v_cache[rows, positions] = v
    else:
        # Each index computed once for both caches (every op here is a
        # kernel launch: the host time of a decode step's append).
        pages = block_table.gather(1, positions // page_size).long() & \
            0xFFFFFFFF
        rows = positions % page_size
        k_cache[pages, rows] = k
        v_cache[pages, rows] = v


# arange(B) on a device, by (B, device): the append's batch index, made
# once (every op is a launch of a decode step's host time).
_SEQUENCE_ROWS = {}


def _sequence_rows(b, device):
    """torch.arange(b) on `device` (int64), kept for the next call; one made
    while a CUDA graph is being captured is the graph's and is not kept."""
    import torch
    from . import runtime

    key = (b, device)
    rows = _SEQUENCE_ROWS.get(key)
    if rows is None:
        rows = torch.arange(b, device=device)
        # Never evicted: a captured graph may read a kept one at every
        # replay (past 256 batch sizes, the others are made per call).
        if len(_SEQUENCE_ROWS) < 256 and not (
                device.type == "cuda" and runtime.capturing()):
            _SEQUENCE_ROWS[key] = rows
    return rows


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                           max_seqlen_k, dropout_p=0.0, softmax_scale=None,
                           causal=False, window_size=(-1, -1), softcap=0.0,
                           alibi_slopes=None, deterministic=False,
                           return_attn_probs=False, kernel_dir=None):
    """flash-attention's `flash_attn_varlen_func` on the sm_90a kernels:
    q [total_q, Hq, D], k and v [total_k, Hkv, D] (f16/bf16 CUDA tensors)
    holding B sequences packed one after the other; cu_seqlens_q and
    cu_seqlens_k [B + 1] (int32) their prefix sums, max_seqlen_q the
    longest sequence's queries. Returns O [total_q, Hq, D]. Masks are per
    sequence; causal is bottom-right aligned with each sequence's lengths
    (flash-attention's convention). The kernel reads the packed tensors in
    place (a [1, H, total, D] strided view) and takes the prefix sums on
    the GPU. window_size and softcap as in flash_attn_func (windows
    bottom-right aligned per sequence). Refused (as not supported):
    dropout, ALiBi, returning the probabilities."""
    import torch
    from . import runtime

    if dropout_p or alibi_slopes is not None or return_attn_probs:
        raise runtime.KernelArgumentError(
            "flash_attn_varlen_func: dropout, alibi_slopes and "
            "return_attn_probs are not supported")
    api = "flash_attn_varlen_func"
    causal, window, offset, softcap = _flash_window(
        api, causal, window_size, softcap)
    softmax_scale = runtime.check_scale(softmax_scale,
                                        f"{api}: softmax_scale")
    _tensors(api, "[total, H, D]", q=q, k=k, v=v)
    for name, t in (("cu_seqlens_q", cu_seqlens_q),
                    ("cu_seqlens_k", cu_seqlens_k)):
        if not isinstance(t, torch.Tensor) or t.dtype != torch.int32 or \
                t.dim() != 1:
            raise runtime.KernelArgumentError(
                f"{api}: {name} must be an int32 tensor [B + 1]")
    # The sums stay on the device: the kernel checks that they start at 0,
    # do not decrease, end within the packed rows and give no sequence more
    # queries than max_seqlen_q (it traps otherwise), so the call never
    # waits for the GPU. The longest sequences are the caller's
    # numbers: integers (a fraction would give the grid too few blocks),
    # within the packed rows.
    max_seqlen_q = _integer(api, "max_seqlen_q", max_seqlen_q, 1, q.shape[0])
    _integer(api, "max_seqlen_k", max_seqlen_k, 0, k.shape[0])
    if _arch_and_dtype(q)[0] != "sm_90a":
        raise runtime.KernelArgumentError(
            f"{api}: varlen batches need an sm_90a kernel")
    qh, kh, vh = (t.unsqueeze(0).transpose(1, 2) for t in (q, k, v))
    kernel, _ = _launcher(qh, kh, causal, kernel_dir, window,
                          causal or window > 0, 1, varlen=True,
                          softcap=softcap, diagonal_offset=offset)
    if not kernel.strided:
        raise runtime.KernelArgumentError(
            "flash_attn_varlen_func: varlen batches need an sm_90a kernel")
    if _CHECK_INPUTS:
        _check_sums_on_host(cu_seqlens_q, cu_seqlens_k, q.shape[0],
                            k.shape[0], max_seqlen_q)
    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    kernel(qh, kh, vh, out=out.unsqueeze(0).transpose(1, 2),
           scale=softmax_scale, discard_lse=True,
           cu_seqlens_q=cu_seqlens_q.contiguous(),
           cu_seqlens_k=cu_seqlens_k.contiguous(),
           max_seqlen_q=max_seqlen_q)
    return out
