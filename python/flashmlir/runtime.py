"""Launch flash-mlir kernels on torch tensors with nothing but a driver.

This module needs no MLIR and no build of flash-mlir: it reads the cubin and
the JSON launch metadata that ``fa-compile`` wrote, loads the cubin with the
CUDA driver API (``cuModuleLoadData``) through ctypes, and launches it on the
current torch stream. Every argument is checked before the launch, and every
driver call's status is turned into an error that names the call.

    from flashmlir.runtime import Kernel
    attn = Kernel.load("kernels/d128_f16")        # d128_f16.{json,cubin}
    out, lse = attn(q, k, v)                      # [B, H, N, D] like SDPA
"""

import collections
import contextlib
import ctypes
import ctypes.util
import json
import math
import numbers
import os
import threading

from . import grid_formula

__all__ = ["CudaError", "KernelArgumentError", "MetadataError", "Kernel"]

METADATA_FORMAT = "flash-mlir-kernel-1"
_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
# cuTensorMapEncodeTiled enums (cuda.h).
# e4m3 is encoded as bytes (UINT8): the TMA only moves it.
_CU_TENSOR_MAP_DATA_TYPE = {"f16": 6, "bf16": 9, "e4m3": 0}
# CU_TENSOR_MAP_SWIZZLE_{32B, 64B, 128B} by the bytes of a box row (the
# swizzle span).
_CU_TENSOR_MAP_SWIZZLE = {32: 1, 64: 2, 128: 3}
# CU_TENSOR_MAP_L2_PROMOTION_* by the bytes L2 fetches on a box's miss (a
# parameter's metadata "l2_promotion"; 256 where absent).
_CU_TENSOR_MAP_L2_PROMOTION = {0: 0, 64: 1, 128: 2, 256: 3}
_DTYPE_NAMES = {"f16": "float16", "bf16": "bfloat16"}
# e4m3 tensors: torch's float8_e4m3fn, or their codes as uint8.
_E4M3_DTYPE_NAMES = ("float8_e4m3fn", "uint8")


class CudaError(RuntimeError):
    """A CUDA driver call failed; the message names the call."""


class KernelArgumentError(ValueError):
    """Tensors that do not fit the kernel (shape, dtype, device, layout)."""


class MetadataError(ValueError):
    """Launch metadata that is malformed or does not match the cubin."""


class _Driver:
    """The few CUDA driver entry points the runtime uses."""

    def __init__(self, path=None):
        names = [path] if path else ["libcuda.so.1", "libcuda.so",
                                     ctypes.util.find_library("cuda")]
        self.lib = None
        errors = []
        for name in names:
            if not name:
                continue
            try:
                self.lib = ctypes.CDLL(name)
                break
            except OSError as e:
                errors.append(f"{name}: {e}")
        if self.lib is None:
            raise CudaError("cannot load the CUDA driver library (libcuda.so.1);"
                            " the runtime needs an NVIDIA driver: "
                            + "; ".join(errors))
        self.check(self.lib.cuInit(0), "cuInit")

    def error_text(self, status):
        name, desc = ctypes.c_char_p(), ctypes.c_char_p()
        self.lib.cuGetErrorName(status, ctypes.byref(name))
        self.lib.cuGetErrorString(status, ctypes.byref(desc))
        n = name.value.decode() if name.value else f"CUDA error {status}"
        d = desc.value.decode() if desc.value else ""
        return f"{n}: {d}" if d else n

    def check(self, status, call):
        if status != 0:
            raise CudaError(f"{call} failed: {self.error_text(status)}")

    def ensure_context(self, device_index):
        ctx = ctypes.c_void_p()
        self.check(self.lib.cuCtxGetCurrent(ctypes.byref(ctx)),
                   "cuCtxGetCurrent")
        if ctx.value:
            return
        dev = ctypes.c_int()
        self.check(self.lib.cuDeviceGet(ctypes.byref(dev), device_index),
                   "cuDeviceGet")
        self.check(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev),
                   "cuDevicePrimaryCtxRetain")
        self.check(self.lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")


_driver = None


def _get_driver():
    global _driver
    if _driver is None:
        _driver = _Driver(os.environ.get("FLASHMLIR_LIBCUDA"))
    return _driver


# -- launch metadata: the C runtime's check, and the same rules in Python ----
#
# One validation: where the C runtime (libFARuntime.so) can be found,
# validate_metadata runs its faKernelMetadataCheck first, so the Python
# launcher accepts no metadata the C launcher would refuse, with the C
# message. The pure-Python checks below run after it (and alone where the
# library is absent, e.g. a pip install without it): they refuse everything
# the C check refuses (python/tests/test_metadata_agreement.py checks that on
# a corpus of mutations), plus what the Python launcher needs beyond it.

_RUNTIME_LIBRARY = "libFARuntime.so"
_RUNTIME_LIBRARY_ENV = "FLASHMLIR_RUNTIME_LIB"
_runtime_libraries = {}
_runtime_library_lock = threading.Lock()


def _runtime_library_candidates():
    """Where libFARuntime.so is looked for, in order: the build trees of
    $FA_BUILD_DIR and $FLASHMLIR_BUILD_DIR (lib/), a source checkout's
    build/ next to python/ (where __init__ finds the extension), next to
    this package, then the dynamic loader's path."""
    for var in ("FA_BUILD_DIR", "FLASHMLIR_BUILD_DIR"):
        root = os.environ.get(var)
        if root:
            yield os.path.join(root, "lib", _RUNTIME_LIBRARY)
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, "..", "..", "build", "lib", _RUNTIME_LIBRARY)
    yield os.path.join(here, _RUNTIME_LIBRARY)
    yield _RUNTIME_LIBRARY
    found = ctypes.util.find_library("FARuntime")
    if found:
        yield found


def _open_runtime_library(path):
    """The library at `path` with its metadata check typed; raises OSError or
    AttributeError (no faKernelMetadataCheck in it)."""
    lib = ctypes.CDLL(path)
    lib.faKernelMetadataCheck.argtypes = [ctypes.c_char_p]
    lib.faKernelMetadataCheck.restype = ctypes.c_int
    lib.faRuntimeLastError.argtypes = []
    lib.faRuntimeLastError.restype = ctypes.c_char_p
    return lib


def runtime_library():
    """The C runtime (libFARuntime.so, a ctypes.CDLL) whose
    faKernelMetadataCheck validate_metadata runs, or None where there is
    none. $FLASHMLIR_RUNTIME_LIB names it explicitly (a path that cannot be
    loaded is an error; set but empty: do not use one, the pure-Python checks
    alone); otherwise the first of _runtime_library_candidates() that loads.
    Found once per setting of the variables it reads."""
    explicit = os.environ.get(_RUNTIME_LIBRARY_ENV)
    key = (explicit, os.environ.get("FA_BUILD_DIR"),
           os.environ.get("FLASHMLIR_BUILD_DIR"))
    with _runtime_library_lock:
        if key in _runtime_libraries:
            return _runtime_libraries[key]
        lib = None
        if explicit:
            try:
                lib = _open_runtime_library(explicit)
            except (OSError, AttributeError) as e:
                raise MetadataError(
                    f"${_RUNTIME_LIBRARY_ENV}={explicit!r}: cannot load the C "
                    f"runtime's metadata check from it: {e}") from None
        elif explicit is None:
            for path in _runtime_library_candidates():
                if os.path.sep in path and not os.path.isfile(path):
                    continue
                try:
                    lib = _open_runtime_library(path)
                    break
                except (OSError, AttributeError):
                    continue
        _runtime_libraries[key] = lib
        return lib


def _metadata_text(meta, allow_nan=True):
    """The JSON text of `meta`. NaN and infinities are not JSON: written as
    JavaScript's words (allow_nan), the C reader names the field holding
    one; refused here otherwise."""
    try:
        return json.dumps(meta, allow_nan=allow_nan)
    except (TypeError, ValueError, RecursionError) as e:
        raise MetadataError(f"metadata is not JSON data: {e}") from None


def c_check_metadata(meta):
    """Runs the C runtime's faKernelMetadataCheck on `meta` (a dict, or its
    JSON text); raises MetadataError with the C message where it refuses.
    Returns False where there is no C runtime (runtime_library()), True
    where it ran and passed."""
    lib = runtime_library()
    if lib is None:
        return False
    text = meta if isinstance(meta, str) else _metadata_text(meta)
    if "\0" in text:
        raise MetadataError("metadata holds a NUL character")
    if lib.faKernelMetadataCheck(text.encode()) != 0:
        message = lib.faRuntimeLastError() or b"refused"
        raise MetadataError(message.decode(errors="replace"))
    return True


def validate_metadata(meta):
    """Checks launch metadata (a dict, as fa-compile's JSON loads): the C
    runtime's faKernelMetadataCheck where it is found (runtime_library()),
    then the pure-Python checks of what the launcher relies on. Raises
    MetadataError, nothing else; returns the metadata."""
    if not isinstance(meta, dict):
        raise MetadataError("metadata must be a JSON object")
    if not c_check_metadata(meta):
        # No C runtime: its JSON rules here (NaN and infinities refused,
        # nesting bounded).
        _metadata_text(meta, allow_nan=False)
        _check_depth(meta)
    _check_metadata(meta)
    return meta


# Objects and arrays nest at most this deep in metadata, as the C reader's
# kMaxDepth (lib/Runtime/Metadata.cpp) bounds its recursion.
_MAX_METADATA_DEPTH = 32


def _check_depth(meta):
    level = [meta]
    for depth in range(_MAX_METADATA_DEPTH + 1):
        level = [x for v in level
                 for x in (v.values() if isinstance(v, dict) else v)
                 if isinstance(x, (dict, list))]
        if not level:
            return
    raise MetadataError(f"metadata nests objects and arrays more than "
                        f"{_MAX_METADATA_DEPTH} deep")


# The kernels' input types (e4m3: FP8 codes; O then in out_dtype).
_KERNEL_DTYPES = ("f16", "bf16", "e4m3")
# Fields faKernelMetadataCheck reads as strings and booleans.
_STRING_FIELDS = ("format", "kernel", "dtype", "tile_scheduler", "arch",
                  "out_dtype")
_BOOL_FIELDS = ("causal", "tile_grid", "persistent", "bottom_right",
                "writes_lse", "split_kv", "kv_lengths", "varlen",
                "deterministic")
# The fields the Python launcher needs (the C one defaults some of them).
_REQUIRED_FIELDS = ("format", "kernel", "arch", "head_dim", "dtype", "causal",
                    "block", "grid", "block_r", "shared_memory_bytes",
                    "params")
_SWIZZLE_SPANS = {"128B": 128, "64B": 64, "32B": 32}


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _check_block(what, block):
    """A launch block: three integers in [1, 1024], at most 1024 threads."""
    if not isinstance(block, list) or len(block) != 3 or \
            not all(_is_int(x) and 1 <= x <= 1024 for x in block) or \
            block[0] * block[1] * block[2] > 1024:
        raise MetadataError(f"bad {what} {block!r}: three integers in "
                            f"[1, 1024], at most 1024 threads in all")


def _check_param(p):
    """One entry of a 'params' list (faKernelMetadataCheck's readParams): a
    named object whose tensor-map keys, where given, are valid."""
    if not isinstance(p, dict):
        raise MetadataError(f"metadata 'params' must hold objects, got {p!r}")
    name = p.get("name")
    if not isinstance(name, str):
        raise MetadataError(f"a parameter's 'name' must be a string, got "
                            f"{name!r}" if "name" in p else
                            f"a parameter has no 'name': {p!r}")
    for key in ("dtype", "kind"):
        if key in p and not isinstance(p[key], str):
            raise MetadataError(f"parameter {name!r}: {key!r} must be a "
                                f"string, got {p[key]!r}")
    swizzle = p.get("swizzle", "128B")
    span = _SWIZZLE_SPANS.get(swizzle) if isinstance(swizzle, str) else None
    if span is None:
        raise MetadataError(f"parameter {name!r}: 'swizzle' must be '128B', "
                            f"'64B' or '32B', got {swizzle!r}")
    box = p.get("box")
    if "box" in p:
        if not isinstance(box, list) or len(box) != 2 or \
                not all(_is_int(x) and 1 <= x <= 256 for x in box):
            raise MetadataError(f"parameter {name!r}: 'box' must be two "
                                f"integers in [1, 256], got {box!r}")
        # A box row is the swizzle span: the kernel's shared-memory layout
        # is the one the TMA writes.
        element = 1 if p.get("dtype") == "e4m3" else 2
        if box[0] * element != span:
            raise MetadataError(f"parameter {name!r}: box rows of {box[0]} "
                                f"columns are not its {span}-byte swizzle")
    elif p.get("kind") == "tensormap":
        # The C runtime reads a missing box as 0 rows; the Python launcher
        # encodes the map from it.
        raise MetadataError(f"parameter {name!r}: 'box' must be two integers "
                            f"in [1, 256], got None")
    promotion = p.get("l2_promotion", 256)
    if not _is_int(promotion) or promotion not in _CU_TENSOR_MAP_L2_PROMOTION:
        raise MetadataError(f"parameter {name!r}: 'l2_promotion' must be 0, "
                            f"64, 128 or 256 (bytes), got {promotion!r}")
    if "rank" in p and (not _is_int(p["rank"]) or p["rank"] not in (3, 4)):
        raise MetadataError(f"parameter {name!r}: 'rank' must be 3 or 4, got "
                            f"{p['rank']!r}")


# The names a grid formula may use: the launch's sizes, then the kernel's
# fields (the C runtime's kGridNames).
_GRID_NAMES = ("B", "Hq", "Hkv", "Nq", "Nk", "D", "SMs", "kv_splits", "Nnew",
               "Nk_128", "block_r", "block_c", "ctas_per_sm")
# CUDA's grid: x up to 2^31 - 1, y and z up to 65535.
_GRID_LIMITS = (2**31 - 1, 65535, 65535)


def _check_grid(what, grid, names=None):
    """A launch grid of the metadata ({"x", "y", "z"}: integers in [1,
    2^31 - 1] or formulas over `names`, _GRID_NAMES by default), as the C
    reader checks it."""
    if not isinstance(grid, dict):
        raise MetadataError(f"metadata {what} must be an object, got "
                            f"{grid!r}")
    for key in grid:
        if key not in ("x", "y", "z"):
            raise MetadataError(f"metadata {what} has 'x', 'y' and 'z', not "
                                f"{key!r}")
    for key in ("x", "y", "z"):
        if key not in grid:
            raise MetadataError(f"metadata {what} has no {key!r}")
        dim = grid[key]
        if _is_int(dim):
            if not 1 <= dim <= 2**31 - 1:
                raise MetadataError(f"metadata {what}'s {key!r} must be in "
                                    f"[1, 2147483647], got {dim}")
            continue
        if not isinstance(dim, str) or not dim:
            raise MetadataError(f"metadata {what}'s {key!r} must be an "
                                f"integer or a formula, got {dim!r}")
        try:
            grid_formula.check(dim, _GRID_NAMES if names is None else names)
        except grid_formula.GridFormulaError as e:
            raise MetadataError(f"metadata {what}: {e}") from None


def _evaluate_grid(meta, grid, sizes, where):
    """A launch's grid: `grid`'s formulas evaluated with the launch's
    `sizes` (a dict by name) and the kernel's fields, each dimension in
    CUDA's range (the C launchers' evaluateGrid)."""
    names = dict(sizes)
    names.update(block_r=meta.get("block_r"), block_c=meta.get("block_c"),
                 ctas_per_sm=meta.get("ctas_per_sm", 1))
    names = {k: v for k, v in names.items() if v is not None}
    out = []
    for key, limit in zip(("x", "y", "z"), _GRID_LIMITS):
        try:
            value = grid_formula.evaluate(grid[key], names)
        except grid_formula.GridFormulaError as e:
            raise KernelArgumentError(f"{where}{e}") from None
        if not 1 <= value <= limit:
            raise KernelArgumentError(
                f"{where}grid {key} = {grid[key]} is {value} for these sizes,"
                f" outside CUDA's [1, {limit}]")
        out.append(value)
    return tuple(out)


def _check_params(what, params):
    """A 'params' list: returns its names and the tensor maps' rank (0:
    none given). "rank" on any parameter counts, one for all, as in the C
    reader."""
    if not isinstance(params, list):
        raise MetadataError(f"{what} must be a list, got {params!r}")
    for p in params:
        _check_param(p)
    ranks = {p["rank"] for p in params if "rank" in p}
    if len(ranks) > 1:
        raise MetadataError(f"the tensor maps' ranks differ: "
                            f"{sorted(ranks)}")
    return [p["name"] for p in params], (ranks.pop() if ranks else 0)


def _check_value_layout(layout):
    """An e4m3 kernel's "value_layout" (its V layout kernel); None where
    absent. Returns its kernel name ('' where it names none)."""
    if not isinstance(layout, dict):
        raise MetadataError(f"metadata 'value_layout' must be an object, got "
                            f"{layout!r}")
    kernel = layout.get("kernel", "")
    if not isinstance(kernel, str):
        raise MetadataError(f"value_layout's kernel must be a string, got "
                            f"{kernel!r}")
    if "block" in layout:
        block = layout["block"]
        if not isinstance(block, list) or len(block) > 3 or \
                not all(_is_int(x) and 1 <= x <= 1024 for x in block):
            raise MetadataError(f"value_layout's block must be at most three "
                                f"integers in [1, 1024], got {block!r}")
    if "params" in layout:
        _check_params("value_layout's 'params'", layout["params"])
    align = layout.get("key_alignment", 16)
    if not _is_int(align) or align not in (16, 128):
        raise MetadataError(f"value_layout's key_alignment must be 16 or 128, "
                            f"got {align!r}")
    columns = layout.get("columns_per_thread", 1)
    if not _is_int(columns) or columns not in (1, 16):
        raise MetadataError(f"value_layout's columns_per_thread must be 1 or "
                            f"16, got {columns!r}")
    if kernel or "grid" in layout:
        _check_grid("'value_layout''s grid", layout.get("grid"))
    return kernel


def _check_kv_append(append, meta):
    """A KV-cache kernel's "kv_append" (its append kernel,
    fagpu::kvAppendParams): a kernel name, a block [threads, 1, 1], 8
    columns a thread and the parameters the launcher binds by name."""
    if not meta.get("kv_lengths"):
        raise MetadataError("metadata 'kv_append' is for KV-cache kernels "
                            "(kv_lengths)")
    if not isinstance(append, dict):
        raise MetadataError(f"metadata 'kv_append' must be an object, got "
                            f"{append!r}")
    kernel = append.get("kernel")
    if not isinstance(kernel, str) or not kernel:
        raise MetadataError(f"kv_append's kernel must name a kernel, got "
                            f"{kernel!r}")
    block = append.get("block")
    if not isinstance(block, list) or len(block) != 3 or \
            not all(_is_int(x) for x in block) or \
            not 1 <= block[0] <= 1024 or block[1:] != [1, 1]:
        raise MetadataError(f"kv_append's block must be [threads in [1, "
                            f"1024], 1, 1], got {block!r}")
    columns = append.get("columns_per_thread")
    if not _is_int(columns) or columns != _KV_APPEND_COLUMNS:
        raise MetadataError(f"kv_append's columns_per_thread must be "
                            f"{_KV_APPEND_COLUMNS}, got {columns!r}")
    _check_grid("'kv_append''s grid", append.get("grid"))
    names, _ = _check_params("kv_append's 'params'", append.get("params"))
    e4m3_cache = meta.get("kv_dtype") == "e4m3" and meta["dtype"] != "e4m3"
    want = _kv_append_params(e4m3_cache)
    # Bound by name: any order, each once.
    if sorted(names) != sorted(want):
        raise MetadataError(f"kv_append's parameters must be the append "
                            f"kernel's, each once: {want}, got {names}")
    return kernel


def _check_reader_fields(meta):
    """The C reader's types and ranges of the fields every metadata format
    shares (its JSON scanner reads them before any validation): strings,
    booleans, the integer fields' ranges, the scale and the softcap."""
    # The JSON reader's types and ranges.
    for key in _STRING_FIELDS:
        if key in meta and not isinstance(meta[key], str):
            raise MetadataError(f"metadata {key!r} must be a string, got "
                                f"{meta[key]!r}")
    for key in _BOOL_FIELDS:
        if key in meta and not isinstance(meta[key], bool):
            raise MetadataError(f"metadata {key!r} must be true or false, got "
                                f"{meta[key]!r}")
    # The C runtime's ranges (kIntFields): nothing may narrow when it
    # becomes a ctypes int or a launch dimension. JSON booleans are ints to
    # Python: refused as numbers.
    for key, (low, high) in _INT_RANGES.items():
        if key in meta and (not _is_int(meta[key]) or
                            not low <= meta[key] <= high):
            raise MetadataError(f"metadata {key!r} must be an integer in "
                                f"[{low}, {high}], got {meta[key]!r}")
    # The scale the kernel was compiled for: the launch default.
    scale = meta.get("scale", 1.0)
    if not _is_number(scale) or not _MIN_SCALE <= scale <= _MAX_SCALE:
        raise MetadataError(f"metadata 'scale' must be a number in "
                            f"[2^-64, 2^64], got {scale!r}")
    softcap = meta.get("softcap", 0)
    if not _is_number(softcap) or \
            not (softcap == 0 or 2.0 ** -64 <= softcap <= 2.0 ** 24):
        raise MetadataError(f"metadata 'softcap' must be 0 or a number in "
                            f"[2^-64, 2^24], got {softcap!r}")


def _check_metadata(meta):
    """The pure-Python checks: every rule of faKernelMetadataCheck
    (lib/Runtime/Metadata.cpp: its JSON reader's types and ranges, then
    validate()), in the same order where it matters, and the fields the
    Python launcher needs besides (arch, grid, causal, a tensor map's box,
    the parameters' kinds)."""
    if not all(isinstance(key, str) for key in meta):
        raise MetadataError("metadata keys must be strings")
    if meta.get("format") != METADATA_FORMAT:
        raise MetadataError(f"unknown metadata format {meta.get('format')!r},"
                            f" expected {METADATA_FORMAT!r}")
    for key in _REQUIRED_FIELDS:
        if key not in meta:
            raise MetadataError(f"metadata lacks {key!r}")
    _check_reader_fields(meta)
    if "preprocess" in meta or "convert" in meta:
        raise MetadataError("metadata 'preprocess' and 'convert' belong to a "
                            "backward kernel's metadata")
    _check_grid("'grid'", meta["grid"])
    names, rank = _check_params("metadata 'params'", meta["params"])
    params = meta["params"]
    layout_kernel = _check_value_layout(meta["value_layout"]) \
        if "value_layout" in meta else ""
    # validate(): what the fields say together.
    if not meta["kernel"]:
        raise MetadataError("metadata 'kernel' must name the kernel")
    dtype = meta["dtype"]
    if dtype not in _KERNEL_DTYPES:
        raise MetadataError(f"unsupported dtype {dtype!r}: f16, bf16 or "
                            f"e4m3")
    fp8 = dtype == "e4m3"
    out_dtype = meta.get("out_dtype")
    if fp8 and out_dtype not in ("f16", "bf16"):
        raise MetadataError("an e4m3 kernel's out_dtype must be f16 or bf16, "
                            f"got {out_dtype!r}")
    if not fp8 and out_dtype not in (None, "", dtype):
        raise MetadataError(f"metadata 'out_dtype' must be the inputs' dtype "
                            f"({dtype}), got {out_dtype!r}")
    if fp8 and (meta.get("split_kv") or meta.get("varlen") or
                meta.get("kv_lengths") or meta.get("page_size")):
        raise MetadataError("e4m3 kernels take contiguous-batch attention "
                            "only (no split-KV, KV cache or varlen)")
    # fagpu's query_group rule (the C runtime's): 0, or a power of two from
    # 2 dividing block_r, on a 16-bit kernel without varlen batches.
    group = meta.get("query_group", 0)
    if group and (group < 2 or group & (group - 1) or
                  meta["block_r"] % group or fp8 or meta.get("varlen")):
        raise MetadataError(f"metadata 'query_group' must be 0 or a power of "
                            f"two from 2 dividing 'block_r', on a 16-bit "
                            f"kernel without varlen batches, got {group!r}")
    # fagpu's max_rows rule (the C runtime's): 0, or 8 on a 16-bit kernel
    # without varlen batches.
    max_rows = meta.get("max_rows", 0)
    if max_rows not in (0, 8) or (max_rows and (fp8 or meta.get("varlen"))):
        raise MetadataError(f"metadata 'max_rows' must be 0, or 8 on a 16-bit "
                            f"kernel without varlen batches, got {max_rows!r}")
    # V's and O's head dim: the head dim's, or (sm_90a) fewer columns.
    if meta.get("value_head_dim", meta["head_dim"]) > meta["head_dim"]:
        raise MetadataError(f"value_head_dim ({meta['value_head_dim']}) must "
                            f"be at most head_dim ({meta['head_dim']})")
    _check_block("block", meta["block"])
    # Rank-4 tensor maps read strided tensors.
    strided = rank == 4
    expected = ["q", "k", "v_t" if fp8 else "v", "o", "lse", "Nq", "Nk",
                "Hq", "Hkv", "scale_log2"]
    if meta.get("tile_grid"):
        expected.append("B")
    # A varlen kernel's O map stores whole blocks; its threads copy a
    # sequence's last, partial block to o_rows.
    box_rows_o = meta.get("tma_box_rows_o", 0)
    copies = strided and bool(box_rows_o) and meta.get("varlen") is True
    if copies:
        expected.append("o_rows")
    if strided and (not box_rows_o or copies):
        expected += ["o_stride_b", "o_stride_h", "o_stride_n"]
    if fp8:
        expected += ["q_descale", "k_descale", "v_descale", "descale_layout"]
    # A varlen batch; a KV cache: per-sequence key lengths, a paged cache's
    # block table.
    if meta.get("varlen"):
        expected += ["cu_seqlens_q", "cu_seqlens_k", "total_q", "total_k"]
    if meta.get("kv_lengths"):
        expected.append("kv_lengths")
    if meta.get("page_size"):
        if not strided:
            raise MetadataError("a paged kernel reads K/V through rank-4 "
                                "tensor maps over the pages")
        expected += ["block_table", "max_pages", "num_pages"]
    # An e4m3 KV cache beside a 16-bit Q: K's and V's descales.
    kv_dtype = meta.get("kv_dtype", meta["dtype"])
    if kv_dtype != meta["dtype"]:
        if kv_dtype != "e4m3" or fp8 or meta.get("varlen"):
            raise MetadataError(
                f"metadata 'kv_dtype' must be the dtype's, or e4m3 beside a "
                f"16-bit dtype without varlen batches, got "
                f"{kv_dtype!r} (dtype {meta['dtype']!r})")
        expected += ["k_descale", "v_descale", "descale_layout"]
    if meta.get("split_kv"):
        if not meta.get("tile_grid"):
            raise MetadataError("split-KV needs a tile-grid (wgmma) kernel")
        expected += ["kv_splits", "o_partial", "lse_partial",
                     "split_arrivals"]
    scheduler = meta.get("tile_scheduler")
    if scheduler not in (None, "", "grid", "one tile per CTA", "static",
                         "dynamic"):
        raise MetadataError(f"unknown tile_scheduler {scheduler!r}")
    if scheduler == "dynamic":
        if meta.get("split_kv"):
            raise MetadataError("a split-KV kernel runs one tile per CTA")
        if not meta.get("persistent"):
            raise MetadataError("a dynamic tile scheduler needs a persistent "
                                "kernel")
        expected.append("tile_counter")
    # Attention sinks ([Hq] f32) and score_mod / mask_mod captures:
    # pointers to contiguous arrays.
    if "sinks" in names:
        expected.append("sinks")
    # A mask_mod's key ranges per query tile ([B, Hq, tiles, 4] int32; a
    # launch may pass none).
    if "key_ranges" in names:
        expected.append("key_ranges")
    for i, p in enumerate(_capture_params(params)):
        expected.append(f"capture{i}")
    # The kernel's own order is the one a launch binds in (by name): which
    # parameters there are is checked, not where.
    if sorted(names) != sorted(expected):
        raise MetadataError(f"parameter list {names} does not match the "
                            f"launcher's {expected} (in any order)")
    # Tensor-map boxes: a box row is 128 bytes (64 16-bit or 128 e4m3
    # columns), on a tile grid.
    box_cols = meta.get("tma_box_cols", 0)
    box_rows_kv = meta.get("tma_box_rows_kv", 0)
    if box_cols and (box_cols != (128 if fp8 else 64) or
                     not 1 <= box_rows_kv <= 256 or
                     not meta.get("tile_grid")):
        raise MetadataError(f"tensor-map boxes must be {128 if fp8 else 64} "
                            f"columns by 1 to 256 rows, on a tile grid: got "
                            f"tma_box_cols {box_cols}, tma_box_rows_kv "
                            f"{box_rows_kv}")
    if rank and not box_cols:
        raise MetadataError("a parameter's 'rank' is given, but the kernel "
                            "takes no tensor maps (tma_box_cols 0)")
    if box_rows_o and not box_cols:
        raise MetadataError("'tma_box_rows_o' needs the tensor maps of q, k "
                            "and v (tma_box_cols)")
    # The parameters the launcher encodes as tensor maps: q, k and v (v_t),
    # and o where it is stored by TMA -- the ones the boxes describe.
    if "tma_box_cols" in meta:
        maps = [p["name"] for p in params if p.get("kind") == "tensormap"]
        want = (expected[:3] + (["o"] if box_rows_o else [])) \
            if box_cols else []
        if sorted(maps) != sorted(want):
            raise MetadataError(f"the parameters of kind 'tensormap' are "
                                f"{maps}; tma_box_cols {box_cols} and "
                                f"tma_box_rows_o {box_rows_o} give {want}")
    # e4m3: the V layout kernel writes the attention's v_t.
    if fp8 != bool(layout_kernel):
        raise MetadataError(
            "an e4m3 kernel needs its value_layout kernel (name and "
            f"parameters {_VALUE_LAYOUT_PARAMS})" if fp8 else
            "metadata 'value_layout' is for e4m3 kernels")
    if fp8:
        layout = meta["value_layout"]
        block = layout.get("block", [])
        layout_names = [p["name"] for p in layout.get("params", [])]
        if len(block) != 3 or block[1:] != [1, 1] or \
                layout_names != _VALUE_LAYOUT_PARAMS or not box_cols or \
                not strided or "box" not in params[2]:
            raise MetadataError(
                f"the e4m3 value_layout must have a block [threads, 1, 1] and "
                f"the parameters {_VALUE_LAYOUT_PARAMS}, and the attention "
                f"must read rank-4 tensor maps (v_t's with a box); got block "
                f"{block}, parameters {layout_names}")
    # faEncodeTensorMap (rank 3) encodes the 256-byte promotion only.
    if not strided:
        for p in params:
            if p.get("l2_promotion", 256) != 256:
                raise MetadataError(
                    f"parameter {p['name']!r}: rank-3 tensor maps take an "
                    f"'l2_promotion' of 256 only, got {p['l2_promotion']}")
    # A KV cache's append kernel, last, as the C reader checks it.
    if "kv_append" in meta:
        _check_kv_append(meta["kv_append"], meta)


# The e4m3 kernels' V layout kernel (fagpu::valueLayoutParams).
_VALUE_LAYOUT_PARAMS = ["v", "v_t", "B", "Hkv", "Nk", "v_stride_b",
                        "v_stride_h", "v_stride_n"]

# The KV-cache kernels' append kernel (fagpu::kvAppendParams): 16 bytes of a
# new row a thread.
_KV_APPEND_COLUMNS = 8


def _kv_append_params(e4m3_cache):
    """The append kernel's parameters in launch order."""
    names = ["k_new", "v_new", "k_cache", "v_cache", "cache_seqlens", "seen",
             "block_table"]
    if e4m3_cache:
        names += ["k_descale", "v_descale", "descale_layout"]
    names += ["B", "Nnew", "Hkv", "page_size", "max_pages", "num_pages",
              "capacity"]
    return names + [f"{t}_stride_{d}" for t in ("k_new", "v_new", "k_cache",
                                                 "v_cache")
                    for d in "bnh"]


# Split-KV chunk counts: fa::checkKVSplits (fa/Dialect/FA/IR/Validation.h).
_MAX_KV_SPLITS = 1024

# The largest sequence position the kernels take (fa/Model/Positions.h:
# maxPosition(32) = 2^30, so that i + window and the diagonal offsets stay
# within 32 bits).
_MAX_POSITION = 1 << 30

_INT_RANGES = {"head_dim": (1, 1 << 16), "value_head_dim": (1, 1 << 16),
               "block_r": (1, 1 << 20),
               "shared_memory_bytes": (0, 2**31 - 1), "ctas_per_sm": (1, 32),
               "tma_box_cols": (0, 256), "tma_box_rows_kv": (0, 256),
               "tma_box_rows_o": (0, 256), "kv_splits": (0, _MAX_KV_SPLITS),
               "block_c": (1, 1 << 20), "page_size": (0, 1 << 20),
               # Pack-GQA beyond one query: 0 or the query heads packed a
               # K/V head (fagpu's query_group; its rule below).
               "query_group": (0, 64),
               # Tiles of at most 8 real rows (fagpu's max_rows; its rule
               # below).
               "max_rows": (0, 8),
               # The kernels' positions (fa/Model/Positions.h): 2^30 at
               # most.
               "window": (0, _MAX_POSITION),
               "diagonal_offset": (0, _MAX_POSITION)}

def auto_kv_splits(tiles, query_blocks, kv_blocks, sms, dram_gbps):
    """The split-KV chunk count a launch picks when the caller leaves it to
    the kernel: mlir::fa::model::autoKVSplits (fa/Model/KVChunk.h), the rule the
    C runtime and fa-split-kv use; tests check they agree. `tiles`: (query
    block, head) tiles of the launch, `query_blocks`: those of one
    (sequence, head) (1: decode), `kv_blocks`: K/V blocks of a tile, `sms`:
    the GPU's SMs (waves of one CTA per SM), `dram_gbps`: its DRAM bandwidth
    in GB/s (0: unknown), which decides whether filled decode tiles take a
    second CTA per SM."""
    slots = sms
    if tiles <= 0 or query_blocks <= 0 or kv_blocks <= 0 or slots <= 0:
        return 1
    if tiles * _AUTO_SPLIT_FILLED_DEN >= slots * _AUTO_SPLIT_FILLED_NUM:
        decode = query_blocks == 1
        wants_second_cta = dram_gbps >= _AUTO_SPLIT_DECODE_GBPS_PER_SM * sms
        return 2 if decode and wants_second_cta \
            and tiles < _AUTO_SPLIT_DECODE_WAVES * slots \
            and kv_blocks >= 2 * _AUTO_SPLIT_MIN_BLOCKS else 1
    most = min(kv_blocks // _AUTO_SPLIT_MIN_BLOCKS, _MAX_KV_SPLITS)
    if most < 2:
        return 1
    efficiency = []
    for s in range(1, most + 1):
        items = tiles * s
        waves = -(-items // slots)
        efficiency.append(items / (waves * slots))
    best = max(efficiency)
    for s, e in enumerate(efficiency, start=1):
        if e * 100 >= best * _AUTO_SPLIT_WITHIN_PERCENT:
            return s
    return 1


# mlir::fa::model::autoKVSplits's constants (KVChunk.h).
_AUTO_SPLIT_FILLED_NUM, _AUTO_SPLIT_FILLED_DEN = 4, 5
_AUTO_SPLIT_MIN_BLOCKS = 2
_AUTO_SPLIT_WITHIN_PERCENT = 95
_AUTO_SPLIT_DECODE_WAVES = 4
_AUTO_SPLIT_DECODE_GBPS_PER_SM = 30


# The dialect's scale range (fa/Dialect/FA/IR/Validation.h): log2(e) * scale
# is a normal f32 and the scores stay finite.
_MIN_SCALE, _MAX_SCALE = 2.0 ** -64, 2.0 ** 64


# The dynamic tile scheduler's counters, one zeroed u32 per (device,
# stream): each launch finds its counter zero and leaves it zero, so launches
# on one stream (ordered) share it; launches on two streams, which may run
# at the same time, must not.
_TILE_COUNTERS = {}
_TILE_COUNTER_LOCK = threading.Lock()


def capturing():
    """Whether the current CUDA stream is being captured into a CUDA graph.
    The launch path then neither synchronizes nor reads device values on
    the host (both are errors during a capture): a buffer made during the
    capture is zeroed by the graph itself, before its kernels, at every
    replay."""
    import torch
    # A build without CUDA (or no GPU) has no stream to capture.
    return torch.cuda.is_available() and \
        torch.cuda.is_current_stream_capturing()


def _stream_buffer(cache, device_index, stream, count, dtype, zeroed):
    """A device buffer of at least `count` elements kept per (device,
    stream), grown on demand: launches on one stream are ordered, so they
    may share it; two streams' launches may overlap, so they may not. A
    zeroed buffer is zero before the stream's next launch."""
    import torch
    key = (device_index, stream)
    with _TILE_COUNTER_LOCK:
        buffer = cache.get(key)
        if buffer is None or buffer.numel() < count:
            make = torch.zeros if zeroed else torch.empty
            buffer = make(max(count, 4096), dtype=dtype,
                          device=f"cuda:{device_index}")
            if zeroed and not capturing():
                torch.cuda.current_stream(device_index).synchronize()
            cache[key] = buffer
        return buffer


# Where the LSE goes when the caller discards it (flashmlir.attention):
# nobody reads it.
_LSE_SCRATCH = {}


def lse_scratch(device_index, stream, count):
    import torch
    return _stream_buffer(_LSE_SCRATCH, device_index, stream, count,
                          torch.float32, zeroed=False)


# Split-KV's partial O and LSE (f32), written and read by one launch: kept
# per (device, stream) like the LSE scratch, not allocated per call.
_SPLIT_WORKSPACES = {}


def split_workspace(device_index, stream, count):
    import torch
    return _stream_buffer(_SPLIT_WORKSPACES, device_index, stream, count,
                          torch.float32, zeroed=False)


# Split-KV's arrival counters: zero before a launch, left zero by it, like
# the tile counters.
_SPLIT_ARRIVALS = {}


def split_arrivals(device_index, stream, count):
    import torch
    return _stream_buffer(_SPLIT_ARRIVALS, device_index, stream, count,
                          torch.int32, zeroed=True)


# Per-device facts the launch path asks for on every call, read once.
_DEVICE_FACTS = {}


def device_facts(device_index):
    """(compute capability, SM count, DRAM GB/s) of a CUDA device, cached:
    torch's and the driver's queries cost microseconds, a launch at a tiny
    shape only a few tens."""
    facts = _DEVICE_FACTS.get(device_index)
    if facts is None:
        import torch
        props = torch.cuda.get_device_properties(device_index)
        facts = ((props.major, props.minor), props.multi_processor_count,
                 _dram_gbps(device_index))
        _DEVICE_FACTS[device_index] = facts
    return facts


def _dram_gbps(device_index):
    """The device's peak DRAM bandwidth in GB/s: memory clock (kHz) x bus
    width x two transfers a clock, as the C runtime's
    currentDeviceDramGBps computes it."""
    drv = _get_driver()
    dev, clock_khz, bus_bits = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    drv.check(drv.lib.cuDeviceGet(ctypes.byref(dev), device_index),
              "cuDeviceGet")
    drv.check(drv.lib.cuDeviceGetAttribute(ctypes.byref(clock_khz), 36, dev),
              "cuDeviceGetAttribute(memory clock rate)")
    drv.check(drv.lib.cuDeviceGetAttribute(ctypes.byref(bus_bits), 37, dev),
              "cuDeviceGetAttribute(memory bus width)")
    return clock_khz.value * 2 * (bus_bits.value // 8) // 1000000


def tile_counter(device_index, stream):
    import torch
    key = (device_index, stream)
    with _TILE_COUNTER_LOCK:
        counter = _TILE_COUNTERS.get(key)
        if counter is None:
            counter = torch.zeros(1, dtype=torch.int32,
                                  device=f"cuda:{device_index}")
            # zeros() runs on the current stream: the counter is zero
            # before any launch on `stream` that follows.
            if not capturing():
                torch.cuda.current_stream(device_index).synchronize()
            _TILE_COUNTERS[key] = counter
        return counter


# Encoded tensor maps by everything they encode (address, shape, element
# size, dtype, box): a map depends on nothing else, so a hit is exact. Saves
# the driver call on repeated launches over the same buffers.
_TENSOR_MAPS = collections.OrderedDict()
_TENSOR_MAP_CACHE_SIZE = 256
_TENSOR_MAP_LOCK = threading.Lock()


def encode_tensor_map(tensor, box_rows, dtype, box_cols=64, rank=3,
                      strides=None, l2_promotion=256):
    """A CUtensorMap (128 bytes, 64-byte aligned) over [B, H, N, D]
    `tensor`: boxes of `box_cols` columns x `box_rows` rows of one (batch,
    head), swizzled by the box row's bytes (128, 64 or 32: the swizzle
    span), zeros past N, L2 fetching `l2_promotion` bytes
    (0, 64, 128, 256) on a box's miss. Rank 3: the contiguous tensor as
    B * H matrices of N x D; rank 4: a strided one, `strides` its (batch,
    head, row) element strides (tensor_strides). Returns (buffer, address);
    the buffer stays valid while cached, and the launch copies the parameter
    anyway."""
    return _MapSpec(tuple(tensor.shape), tensor.element_size(), dtype,
                    box_rows, box_cols, rank, strides,
                    l2_promotion).encoded(tensor.data_ptr())


def aligned16(*tensors):
    """Whether every tensor given (None skipped) starts on 16 bytes: what a
    launch plan checks again per call, since it changes with every
    allocation."""
    bits = 0
    for t in tensors:
        if t is not None:
            bits |= t.data_ptr()
    return bits % 16 == 0


def _signature(tensors):
    """What the argument checks of a launch depend on, for torch tensors
    (None entries kept as None): shape, strides, dtype, device; None when
    one is not a torch tensor (checked in full every time)."""
    import torch
    sig = []
    for t in tensors:
        if t is None:
            sig.append(None)
        elif type(t) is torch.Tensor:
            sig.append((t.shape, t.stride(), t.dtype, t.device))
        else:
            return None
    return tuple(sig)


def tensor_strides(name, t, element_bytes=2):
    """The (batch, head, row) element strides of [B, H, N, D] tensor `t` as
    a strided kernel reads it, by the C runtime's rule (checkStrides in
    lib/Runtime/TensorMap.cpp): unit stride on D; a dimension longer than 1
    needs a positive multiple of 16 bytes (8 16-bit or 16 e4m3 elements)
    below 2^40 bytes; a dimension of length 1 is never stepped and gets its
    contiguous stride. `element_bytes`: 2, or 1 for e4m3 tensors."""
    unit = 16 // element_bytes
    b, h, n, d = t.shape
    stride = t.stride()
    if d > 1 and stride[3] != 1:
        raise KernelArgumentError(
            f"{name} must have unit stride on D, got strides {tuple(stride)}")
    contiguous = (h * n * d, n * d, d)
    out = []
    for size, given, packed, dim in zip((b, h, n), stride[:3], contiguous,
                                        ("batch", "head", "row")):
        if size == 1:
            out.append(packed)
            continue
        if given <= 0 or given % unit or given * element_bytes >= 2**40:
            raise KernelArgumentError(
                f"{name}'s {dim} stride must be a positive multiple of "
                f"{unit} elements (16 bytes) below 2^40 bytes, got {given} "
                f"(strides {tuple(stride)})")
        out.append(given)
    return tuple(out)


_DTYPE_NAME_CACHE = {}


def _dtype_name(t):
    dtype = getattr(t, "dtype", "?")
    name = _DTYPE_NAME_CACHE.get(dtype)
    if name is None:
        name = _DTYPE_NAME_CACHE[dtype] = str(dtype).replace("torch.", "")
    return name


def check_scale(scale, what="scale"):
    """A launch's softmax scale: None (the kernel's default) or a real
    number in [2^-64, 2^64] (not a bool, a string or a tensor); returns it
    as a float (or None), else raises KernelArgumentError."""
    if scale is None:
        return None
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real) or \
            not _MIN_SCALE <= scale <= _MAX_SCALE:
        raise KernelArgumentError(
            f"{what} must be None or a number in [2^-64, 2^64], got "
            f"{scale!r}")
    return float(scale)


def _refuse_duplicates(pairs):
    meta = {}
    for key, value in pairs:
        if key in meta:
            raise MetadataError(f"duplicate key {key!r}")
        meta[key] = value
    return meta


def _refuse_constant(name):
    raise MetadataError(f"{name} is not a JSON number")


def load_metadata(text, what="the metadata"):
    """Launch metadata from JSON text (str or bytes): strict JSON, as the C
    runtime reads it -- a duplicate key (json's default keeps the last one)
    and NaN or Infinity (not JSON) are refused, as MetadataError."""
    try:
        if isinstance(text, (bytes, bytearray)):
            text = bytes(text).decode("utf-8")
        return json.loads(text, object_pairs_hook=_refuse_duplicates,
                          parse_constant=_refuse_constant)
    except MetadataError as e:
        raise MetadataError(f"{what} is not valid JSON: {e}") from None
    except (ValueError, RecursionError) as e:
        # json.JSONDecodeError and UnicodeDecodeError are ValueErrors.
        raise MetadataError(f"{what} is not valid JSON: {e}") from None


def check_image(image):
    """A kernel image as cuModuleLoadData takes it (it reads the image
    without a size), by the C runtime's rule (checkImage in
    lib/Runtime/Metadata.cpp): a 64-bit little-endian ELF cubin whose header
    tables lie inside the bytes, or PTX text with a NUL byte within them.
    Returns the image as bytes; raises MetadataError."""
    if not isinstance(image, (bytes, bytearray, memoryview)):
        raise MetadataError(f"the cubin must be bytes, got "
                            f"{type(image).__name__}")
    image = bytes(image)
    size = len(image)
    if size == 0:
        raise MetadataError("the cubin is empty")
    if image[:4] == b"\x7fELF":
        if size < 64 or image[4] != 2 or image[5] != 1:
            raise MetadataError(
                f"the cubin is truncated or not a 64-bit little-endian ELF "
                f"image ({size} bytes)")
        phoff, shoff = (int.from_bytes(image[at:at + 8], "little")
                        for at in (32, 40))
        phentsize, phnum, shentsize, shnum = (
            int.from_bytes(image[at:at + 2], "little")
            for at in (54, 56, 58, 60))
        for offset, entry, count in ((phoff, phentsize, phnum),
                                     (shoff, shentsize, shnum)):
            if offset > size or count > (size - offset) // (entry or 1):
                raise MetadataError(
                    f"the cubin's header tables lie past its {size} bytes: "
                    f"truncated image")
        return image
    if b"\0" not in image:
        raise MetadataError("the cubin is neither an ELF image (it does not "
                            "start with \\x7fELF) nor PTX text ending in a NUL "
                            "byte")
    return image


def load_function(cubin, name, shared_bytes, device_index):
    """(module, function) of kernel `name` of `cubin` loaded on
    `device_index`, allowed `shared_bytes` of dynamic shared memory."""
    drv = _get_driver()
    drv.ensure_context(device_index)
    module = ctypes.c_void_p()
    drv.check(drv.lib.cuModuleLoadData(ctypes.byref(module), cubin),
              "cuModuleLoadData")
    return module, module_function(module, name, shared_bytes)


def module_function(module, name, shared_bytes, source="from the metadata"):
    """Kernel `name` of a loaded `module` (load_function's), allowed
    `shared_bytes` of dynamic shared memory; a failure names where the
    name came from (`source`)."""
    drv = _get_driver()
    fn = ctypes.c_void_p()
    status = drv.lib.cuModuleGetFunction(ctypes.byref(fn), module,
                                         name.encode())
    if status != 0:
        raise MetadataError(
            f"the cubin has no kernel named {name!r} ({source}): "
            f"cuModuleGetFunction failed: {drv.error_text(status)}")
    if shared_bytes > 48 * 1024:
        drv.check(drv.lib.cuFuncSetAttribute(
            fn, _CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            ctypes.c_int(shared_bytes)),
            "cuFuncSetAttribute(max dynamic smem)")
    return fn


class Kernel:
    """A compiled attention kernel: cubin bytes plus launch metadata."""

    def __init__(self, cubin, metadata):
        self.meta = validate_metadata(metadata)
        self.cubin = check_image(cubin)
        self._functions = {}  # device index -> (module, function)
        # (device index, metadata entry) -> the V layout or append kernel
        self._auxiliary_functions = {}
        self._param_names = frozenset(p["name"] for p in self.meta["params"])
        # score_mod / mask_mod captures, in order (read once: a launch only
        # checks its tensors against them).
        self._capture_params = _capture_params(self.meta["params"])
        # The signature of the last arguments that passed _check, and its
        # result.
        self._checked = (None, None)
        # Launch plans (_LaunchPlan) by the arguments' signature: the
        # checked shapes, the grid and the parameters but the pointers.
        self._plans = {}
        self._strided = any(p.get("kind") == "tensormap" and
                            p.get("rank") == 4 for p in self.meta["params"])
        # V's and O's columns (Dv), the head dim's where they are not fewer.
        self.value_head_dim = self.meta.get("value_head_dim",
                                            self.meta["head_dim"])
        # An e4m3 KV cache beside a 16-bit Q: k and v are e4m3 codes, with
        # K's and V's descales.
        self.e4m3_cache = (self.meta.get("kv_dtype") == "e4m3" and
                           self.meta["dtype"] != "e4m3")

    @classmethod
    def load(cls, prefix):
        """Loads ``prefix.json`` and ``prefix.cubin``."""
        with open(prefix + ".json", "rb") as f:
            meta = load_metadata(f.read(), prefix + ".json")
        with open(prefix + ".cubin", "rb") as f:
            cubin = f.read()
        return cls(cubin, meta)

    @property
    def name(self):
        return self.meta["kernel"]

    @property
    def strided(self):
        """Whether the kernel reads and writes strided [B, H, N, D] tensors
        (rank-4 tensor maps: sm_90a) rather than contiguous ones only."""
        return self._strided

    # -- argument checking (pure Python: works on anything tensor-like) --

    def check_arguments(self, q, k, v, out=None, lse=None,
                        cache_seqlens=None, block_table=None):
        """Validates the tensors; returns (B, Hq, Hkv, Nq, Nk, D)."""
        return self._check(q, k, v, out, lse, cache_seqlens, block_table)[0]

    @property
    def varlen(self):
        """Whether the kernel runs a varlen batch: the sequences packed
        along N (batch 1), described by cu_seqlens_q / cu_seqlens_k."""
        return bool(self.meta.get("varlen"))

    def _check_varlen(self, q, k, cu_seqlens_q, cu_seqlens_k, max_seqlen_q):
        """A varlen batch's prefix sums ([B + 1] int32 on q's device) and
        its longest sequence's queries; refused for other kernels. Returns
        (sequences, max_seqlen_q)."""
        given = [t is not None for t in (cu_seqlens_q, cu_seqlens_k,
                                         max_seqlen_q)]
        if not self.varlen:
            if any(given):
                raise KernelArgumentError(
                    f"cu_seqlens_q/cu_seqlens_k/max_seqlen_q: kernel "
                    f"{self.meta['kernel']} takes no varlen batch (compile "
                    f"one with varlen=True)")
            return None
        if not all(given):
            raise KernelArgumentError(
                f"kernel {self.meta['kernel']} runs a varlen batch: give "
                f"cu_seqlens_q, cu_seqlens_k ([B + 1] int32) and max_seqlen_q")
        for name, t in (("cu_seqlens_q", cu_seqlens_q),
                        ("cu_seqlens_k", cu_seqlens_k)):
            if not hasattr(t, "data_ptr") or len(t.shape) != 1 or \
                    t.shape[0] < 2 or _dtype_name(t) != "int32" or \
                    not t.is_contiguous() or str(t.device) != str(q.device):
                raise KernelArgumentError(
                    f"{name} must be a contiguous int32 tensor [B + 1] (B >= "
                    f"1) on {q.device}")
        if cu_seqlens_k.shape[0] != cu_seqlens_q.shape[0]:
            raise KernelArgumentError(
                f"cu_seqlens_q and cu_seqlens_k must have one entry per "
                f"sequence + 1, got {cu_seqlens_q.shape[0]} and "
                f"{cu_seqlens_k.shape[0]}")
        if q.shape[0] != 1 or k.shape[0] != 1:
            raise KernelArgumentError(
                "a varlen batch packs the sequences along N: q, k, v and out "
                "have batch 1 ([1, H, total, D])")
        if isinstance(max_seqlen_q, bool) or not isinstance(max_seqlen_q, int) \
                or not 1 <= max_seqlen_q <= q.shape[2]:
            raise KernelArgumentError(
                f"max_seqlen_q must be an integer in [1, {q.shape[2]}], got "
                f"{max_seqlen_q!r}")
        return cu_seqlens_q.shape[0] - 1, max_seqlen_q

    @property
    def page_size(self):
        """Rows per page of the paged KV cache the kernel reads (0: K and V
        are contiguous per sequence)."""
        return self.meta.get("page_size", 0)

    def _check_cache(self, q, k, cache_seqlens, block_table):
        """The KV cache's operands: cache_seqlens [B] (int32) where the
        kernel takes per-sequence key lengths, block_table [B, max_pages]
        (int32) where it reads a paged cache [pages, Hkv, page_size, D];
        refused where it does not. Returns Nk: the keys of a sequence
        without lengths (the cache's capacity)."""
        meta = self.meta
        b = q.shape[0]
        for name, t, wanted, shape in (
                ("cache_seqlens", cache_seqlens, meta.get("kv_lengths"),
                 "[B]"),
                ("block_table", block_table, bool(self.page_size),
                 "[B, max_pages]")):
            if t is None:
                if wanted:
                    raise KernelArgumentError(
                        f"kernel {meta['kernel']} takes {name} {shape} "
                        f"(int32): give it")
                continue
            if not wanted:
                raise KernelArgumentError(
                    f"{name}: kernel {meta['kernel']} takes none (compile "
                    f"one with {'kv_lengths' if name == 'cache_seqlens' else 'page_size'})")
            rank = 1 if name == "cache_seqlens" else 2
            if not hasattr(t, "data_ptr") or len(t.shape) != rank or \
                    t.shape[0] != b:
                raise KernelArgumentError(
                    f"{name} must be a tensor {shape} with B = {b}, got "
                    f"{tuple(getattr(t, 'shape', ()))}")
            if _dtype_name(t) != "int32" or not t.is_contiguous() or \
                    str(t.device) != str(q.device):
                raise KernelArgumentError(
                    f"{name} must be a contiguous int32 tensor on "
                    f"{q.device}, got {_dtype_name(t)} on {t.device}")
        if not self.page_size:
            return k.shape[2]
        if k.shape[2] != self.page_size:
            raise KernelArgumentError(
                f"k must be a paged cache [pages, Hkv, {self.page_size}, D] "
                f"for kernel {meta['kernel']}, got {tuple(k.shape)}")
        max_pages = block_table.shape[1]
        if max_pages == 0 or max_pages * self.page_size >= 2**31:
            raise KernelArgumentError(
                f"block_table must have 1 to {(2**31 - 1) // self.page_size}"
                f" pages per sequence, got {max_pages}")
        return max_pages * self.page_size

    def _check(self, q, k, v, out, lse, cache_seqlens=None,
               block_table=None):
        """check_arguments, plus the (batch, head, row) element strides of
        q, k, v and out a strided kernel reads them with (tensor_strides;
        None for contiguous-only kernels and an absent out).

        A call whose tensors (a KV cache's lengths and block table
        included: only their shapes, dtypes and devices are checked here,
        their values by the kernel) have the shapes, strides, dtypes and
        device of the last call that passed reuses its result: only the data
        pointers' 16-byte alignment, which changes with every allocation,
        is checked again. At tiny shapes the full check was about half of a
        call's host time (bench/results/2026-12-02-host-cost.md)."""
        signature = _signature((q, k, v, out, lse, cache_seqlens,
                                block_table))
        if signature is not None and signature == self._checked[0]:
            if (q.data_ptr() | k.data_ptr() | v.data_ptr() |
                    (out.data_ptr() if out is not None else 0)) % 16 == 0:
                dims, strides = self._checked[1]
                return dims, list(strides)
        dims, strides = self._check_all(q, k, v, out, lse, cache_seqlens,
                                        block_table)
        if signature is not None:
            self._checked = (signature, (dims, tuple(strides)))
        return dims, strides

    def _check_all(self, q, k, v, out, lse, cache_seqlens, block_table):
        meta = self.meta
        # e4m3 kernels: q, k, v as float8_e4m3fn or its uint8 codes, O in
        # the kernel's out_dtype.
        fp8 = meta["dtype"] == "e4m3"
        inputs = _E4M3_DTYPE_NAMES if fp8 else (_DTYPE_NAMES[meta["dtype"]],)
        want = _DTYPE_NAMES[meta["out_dtype"] if fp8 else meta["dtype"]]
        d, dv = meta["head_dim"], self.value_head_dim
        for name, t in (("q", q), ("k", k), ("v", v)):
            allowed = (_E4M3_DTYPE_NAMES
                       if self.e4m3_cache and name != "q" else inputs)
            if not hasattr(t, "shape") or not hasattr(t, "data_ptr"):
                raise KernelArgumentError(f"{name} must be a tensor, got "
                                          f"{type(t).__name__}")
            if len(t.shape) != 4:
                raise KernelArgumentError(
                    f"{name} must have rank 4 [B, H, N, D], got shape "
                    f"{tuple(t.shape)}")
            if _dtype_name(t) not in allowed:
                raise KernelArgumentError(
                    f"{name} must be {' or '.join(allowed)} for kernel "
                    f"{meta['kernel']}, got {_dtype_name(t)}")
            if str(getattr(t.device, "type", t.device)) != "cuda":
                raise KernelArgumentError(
                    f"{name} must be on a CUDA device, got {t.device}")
            if not self.strided and not t.is_contiguous():
                raise KernelArgumentError(
                    f"{name} must be contiguous in [B, H, N, D] layout (got "
                    f"strides {tuple(t.stride())}) for kernel "
                    f"{meta['kernel']}: strided tensors need an sm_90a "
                    f"kernel; call .contiguous()")
            if t.shape[3] != (dv if name == "v" else d):
                raise KernelArgumentError(
                    f"{name} head dim must be {dv if name == 'v' else d} for "
                    f"kernel {meta['kernel']}, got {t.shape[3]}")
            if t.data_ptr() % 16 != 0:
                raise KernelArgumentError(
                    f"{name} must be 16-byte aligned (cp.async), got address "
                    f"{t.data_ptr():#x}")
        devices = {str(t.device) for t in (q, k, v)}
        if len(devices) != 1:
            raise KernelArgumentError(f"q, k, v must be on one device, got "
                                      f"{sorted(devices)}")
        b, hq, nq, _ = q.shape
        bk, hkv, nk, _ = k.shape
        # A paged cache's dim 0 counts pages, not sequences.
        if (not self.page_size and bk != b) or v.shape[0] != bk:
            raise KernelArgumentError(f"batch sizes differ: q {b}, k {bk}, "
                                      f"v {v.shape[0]}")
        if tuple(v.shape[1:3]) != (hkv, nk):
            raise KernelArgumentError(
                f"v must have the key's heads and length {(hkv, nk)}, got "
                f"{tuple(v.shape[1:3])}")
        nk = self._check_cache(q, k, cache_seqlens, block_table)
        group = int(self.meta.get("query_group", 0))
        if group and (hq != hkv or nq % group):
            # The caller packs (flash_attn_with_kvcache does): the kernel
            # sees Hkv matrices of Nq G rows (faKernelLaunch's rule).
            raise KernelArgumentError(
                f"{self.name} takes q, out and the LSE packed [B, Hkv, Nq G, "
                f"D] (G = {group} query heads a K/V head, row r query r / "
                f"G): launch it with Hq = Hkv and Nq G rows, got Hq {hq}, "
                f"Hkv {hkv}, {nq} rows")
        max_rows = int(self.meta.get("max_rows", 0))
        if max_rows and nq > max_rows:
            # Each consumer thread steps only its first row: a tile of
            # more rows would leave rows g + 8 unnormalised.
            raise KernelArgumentError(
                f"{self.name} steps at most {max_rows} rows a tile (built "
                f"with max_rows = {max_rows}): a launch of {nq} query rows "
                f"needs a kernel without max_rows")
        if hkv == 0 or hq % hkv != 0:
            raise KernelArgumentError(f"query heads ({hq}) must be a multiple"
                                      f" of key/value heads ({hkv})")
        if nq == 0 or nk == 0:
            raise KernelArgumentError("sequence lengths must be positive")
        # The kernels add positions in 32 bits (fa/Model/Positions.h, as
        # faKernelLaunch checks).
        if max(nq, nk) > _MAX_POSITION:
            raise KernelArgumentError(
                f"sequence lengths must be at most 2^30 (the kernels' 32-bit "
                f"positions), got Nq {nq}, Nk {nk}")
        if b >= 2**16 or hq >= 2**16:
            raise KernelArgumentError("batch and heads must be at most 65535"
                                      " (the kernel's grid)")
        for name, t, shape, dt in (("out", out, (b, hq, nq, dv), want),
                                   ("lse", lse, (b, hq, nq), "float32")):
            if t is None:
                continue
            if tuple(t.shape) != shape:
                raise KernelArgumentError(f"{name} must have shape {shape}, "
                                          f"got {tuple(t.shape)}")
            if _dtype_name(t) != dt:
                raise KernelArgumentError(f"{name} must be {dt}, got "
                                          f"{_dtype_name(t)}")
            if str(t.device) != str(q.device):
                raise KernelArgumentError(f"{name} must be on {q.device}, got"
                                          f" {t.device}")
            if (not self.strided or name == "lse") and not t.is_contiguous():
                raise KernelArgumentError(f"{name} must be contiguous")
            # O leaves by TMA or in 16-byte pieces (a varlen kernel's copied
            # rows).
            if name == "out" and t.data_ptr() % 16 != 0:
                raise KernelArgumentError(
                    f"out must be 16-byte aligned, got address "
                    f"{t.data_ptr():#x}")
        strides = [None] * 4
        if self.strided:
            strides = [tensor_strides(
                n, t, 1 if (fp8 and n != "o") or
                (self.e4m3_cache and n in ("k", "v")) else 2)
                       if t is not None else None
                       for n, t in zip("qkvo", (q, k, v, out))]
        return (b, hq, hkv, nq, nk, d), strides

    def plan(self, q, k, v, out=None, lse=None, scale=None,
             num_splits=None, discard_lse=False, cache_seqlens=None,
             block_table=None, cu_seqlens_q=None, cu_seqlens_k=None,
             max_seqlen_q=None, kv_descales=None):
        """The checked launch of these arguments (as __call__ takes them;
        16-bit kernels; kv_descales: an e4m3 cache's (k_descale,
        v_descale)): a plan whose launch(q, k, v, out, lse,
        cache_seqlens, block_table, cu_seqlens_q, cu_seqlens_k,
        kv_descales) runs the
        kernel on tensors of the same signature. Raises
        KernelArgumentError where the launch would. Plans are kept by the
        arguments' signature (shapes, strides, dtypes, devices and the
        scalar options): a signature seen before checks only the data
        pointers' alignment, which changes with every allocation."""
        if self.meta["dtype"] == "e4m3":
            raise KernelArgumentError(
                f"{self.name} is an e4m3 kernel: launch it with its descales "
                f"(Kernel.__call__)")
        if (kv_descales is not None) != self.e4m3_cache:
            raise KernelArgumentError(
                f"{self.name}: k_descale and v_descale are for a kernel that "
                f"reads an e4m3 KV cache, and such a kernel needs them")
        tensors = (q, k, v, out, lse, cache_seqlens, block_table,
                   cu_seqlens_q, cu_seqlens_k) + tuple(kv_descales or ())
        signature = _signature(tensors)
        plan = None
        if signature is not None:
            # Scalars by type and value: 5.0 is not 5 (refused as a
            # max_seqlen_q), True is not 1.
            key = (signature, type(scale), scale, type(num_splits),
                   num_splits, bool(discard_lse), type(max_seqlen_q),
                   max_seqlen_q)
            plan = self._plans.get(key)
        if plan is None or not aligned16(q, k, v, out):
            plan = _LaunchPlan(self, q, k, v, out, lse, scale, num_splits,
                               discard_lse, cache_seqlens, block_table,
                               cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                               kv_descales)
            if signature is not None:
                if len(self._plans) >= _PLANS_PER_KERNEL:
                    self._plans.pop(next(iter(self._plans)))
                self._plans[key] = plan
        return plan

    def grid(self, b, hq, nq, sm_count=None, kv_splits=1, **sizes):
        """The launch grid the lowering wrote (the metadata's "grid",
        fagpu::launchGrid) for B `b`, Hq `hq` and Nq `nq` rows, on
        `sm_count` SMs (needed where the grid reads SMs: a persistent
        kernel's), with `kv_splits` chunks and any other sizes by name
        (Hkv=, Nk=, D=)."""
        names = dict(B=b, Hq=hq, Nq=nq, kv_splits=kv_splits, **sizes)
        if sm_count:
            names["SMs"] = sm_count
        return _evaluate_grid(self.meta, self.meta["grid"], names,
                              f"{self.name}: ")

    def kv_splits_for(self, b, hq, nq, nk, sm_count, dram_gbps,
                      num_splits=None):
        """The chunk count of a split-KV launch: `num_splits` if given (1 to
        1024), else the metadata's default, else (0)
        mlir::fa::model::autoKVSplits on a GPU of `sm_count` SMs and
        `dram_gbps` GB/s (device_facts)."""
        if num_splits is None or num_splits == 0:
            num_splits = self.meta.get("kv_splits", 0)
        if isinstance(num_splits, bool) or not isinstance(num_splits, int) \
                or not 0 <= num_splits <= _MAX_KV_SPLITS:
            raise KernelArgumentError(
                f"num_splits must be an integer in [0, {_MAX_KV_SPLITS}] "
                f"(0: auto), got {num_splits!r}")
        if num_splits:
            return num_splits
        query_blocks = math.ceil(nq / self.meta["block_r"])
        kv_blocks = math.ceil(nk / self.meta.get("block_c", 128))
        return auto_kv_splits(query_blocks * hq * b, query_blocks, kv_blocks,
                              sm_count, dram_gbps)

    # -- launching (needs torch and a driver) --

    def _scale(self, scale, d):
        """The launch's softmax scale: `scale`, or the one the kernel was
        compiled for (the attention's own), in [2^-64, 2^64]."""
        if scale is None:
            return self.meta.get("scale", 1.0 / math.sqrt(d))
        return check_scale(scale)

    # The kernels' descale_layout argument (fagpu::DescaleLayout, the C
    # API's FA_DESCALE_*).
    DESCALE_PER_TENSOR, DESCALE_PER_HEAD, DESCALE_PER_BLOCK = 0, 1, 2

    def descale_blocks(self, nq, nk):
        """The per-block descales' tiles for Nq queries and Nk keys:
        (ceil(Nq / block_r), ceil(Nk / block_c)), the last dims of q's
        [B, Hq, .] and k's [B, Hkv, .] descales (block quantisation)."""
        br, bc = self.meta["block_r"], self.meta.get("block_c", 0)
        if bc <= 0:
            raise MetadataError("per-block descales need the kernel's "
                                "block_c (metadata that predates it)")
        return -(-nq // br), -(-nk // bc)

    def _check_e4m3(self, q, k, v, descales, out, lse):
        """The e4m3 kernel's argument checks: _check's, then the descales:
        each a number or a float32 tensor of one element (per tensor);
        FA3's [B, Hkv] (per batch and K/V head; the others are then
        broadcast to it); or per block: q's [B, Hq, ceil(Nq / block_r)] and
        k's [B, Hkv, ceil(Nk / block_c)] (descale_blocks), v's one for the
        tensor. Returns ((B, Hq, Hkv, Nq, Nk, D), the strides of q, k, v,
        out, the three descale tensors, their DESCALE_* layout)."""
        import torch
        dims, strides = self._check(q, k, v, out, lse)
        b, _, hkv, _, _, _ = dims
        for name, x in zip(("q_descale", "k_descale", "v_descale"), descales):
            if x is None:
                raise KernelArgumentError(
                    f"an e4m3 kernel needs {name} (the factor its codes are "
                    f"multiplied by: amax / 448 of a per-tensor quantisation;"
                    f" 1.0 for unscaled codes)")
        tensors = [isinstance(x, torch.Tensor) for x in descales]
        if any(t and x.dim() == 3 for t, x in zip(tensors, descales)):
            return dims, strides, self._block_descales(
                q, dims, descales), self.DESCALE_PER_BLOCK
        scalars = []
        per_head = any(t and x.numel() != 1
                       for t, x in zip(tensors, descales))
        for name, x in zip(("q_descale", "k_descale", "v_descale"), descales):
            if isinstance(x, torch.Tensor):
                if x.dtype != torch.float32 or x.device != q.device or \
                        (x.numel() != 1 and tuple(x.shape) != (b, hkv)):
                    raise KernelArgumentError(
                        f"{name} must be a float32 tensor of one element or "
                        f"of shape [B, Hkv] = {(b, hkv)} (FA3's) on "
                        f"{q.device}, got {x.dtype} of shape "
                        f"{tuple(x.shape)} on {x.device}")
                if per_head:
                    # [B, Hkv], a single descale broadcast to it.
                    x = x.reshape(()).expand(b, hkv) if x.numel() == 1 \
                        else x
                    scalars.append(x.contiguous())
                else:
                    # One element of any rank: the kernel reads its first.
                    scalars.append(x if x.is_contiguous() else x.contiguous())
                continue
            scalars.append(torch.full((b, hkv) if per_head else (1,),
                                      self._descale_number(name, x),
                                      dtype=torch.float32, device=q.device))
        return dims, strides, scalars, \
            self.DESCALE_PER_HEAD if per_head else self.DESCALE_PER_TENSOR

    @staticmethod
    def _descale_number(name, x):
        """A descale given as a number: a normal, positive f32."""
        if isinstance(x, bool) or not isinstance(x, (int, float)) or \
                not 2.0 ** -126 <= float(x) <= 2.0 ** 127:
            raise KernelArgumentError(
                f"{name} must be in [2^-126, 2^127] (a descale factor "
                f"must be finite, positive and a normal f32), got {x!r}")
        return float(x)

    def _block_descales(self, q, dims, descales):
        """Per-block descales (block quantisation): q's and k's float32
        tensors of the kernel's tiles (descale_blocks), v's one for the
        tensor (a number or one element); returns the three, contiguous."""
        import torch
        b, hq, hkv, nq, nk, _ = dims
        q_blocks, k_blocks = self.descale_blocks(nq, nk)
        out = []
        for name, x, shape in (("q_descale", descales[0], (b, hq, q_blocks)),
                               ("k_descale", descales[1], (b, hkv, k_blocks))):
            if not isinstance(x, torch.Tensor) or \
                    x.dtype != torch.float32 or x.device != q.device or \
                    tuple(x.shape) != shape:
                got = (f"{x.dtype} of shape {tuple(x.shape)} on {x.device}"
                       if isinstance(x, torch.Tensor) else repr(x))
                raise KernelArgumentError(
                    f"per-block descales: {name} must be a float32 tensor of "
                    f"shape {shape} ([B, H, ceil(N / tile)], the kernel's "
                    f"{self.meta['block_r']} x {self.meta['block_c']} tiles)"
                    f" on {q.device}, got {got}")
            out.append(x.contiguous())
        v = descales[2]
        if isinstance(v, torch.Tensor):
            if v.dtype != torch.float32 or v.device != q.device or \
                    v.numel() != 1:
                raise KernelArgumentError(
                    f"per-block descales: v_descale must be one float32 "
                    f"value on {q.device} (V is quantised per tensor), got "
                    f"{v.dtype} of shape {tuple(v.shape)} on {v.device}")
            out.append(v.reshape(1).contiguous())
        else:
            out.append(torch.full((1,), self._descale_number("v_descale", v),
                                  dtype=torch.float32, device=q.device))
        return out

    def _call_e4m3(self, q, k, v, descales, out, lse, scale, discard_lse):
        """An e4m3 launch: the V layout kernel writes V^T [B, Hkv, D,
        _value_keys(Nk)] (keys permuted in 16s for P's register layout) to a
        workspace, then the attention reads q, k and it by TMA, scales the
        scores by q_descale * k_descale and O by v_descale."""
        import torch
        (b, hq, hkv, nq, nk, d), strides, scalars, layout = self._check_e4m3(
            q, k, v, descales, out, lse)
        device_index = q.device.index if q.device.index is not None else \
            torch.cuda.current_device()
        stream = _current_stream(device_index)
        if out is None:
            out = torch.empty((b, hq, nq, d),
                              dtype=getattr(torch, _DTYPE_NAMES[
                                  self.meta["out_dtype"]]),
                              device=q.device)
            strides[3] = (hq * nq * d, nq * d, d)
        lse_ptr = None
        if lse is None and discard_lse:
            lse_ptr = lse_scratch(device_index, stream, b * hq * nq)
        elif lse is None:
            lse = torch.empty((b, hq, nq), dtype=torch.float32,
                              device=q.device)
        scale = self._scale(scale, d)
        guard = _device_guard(device_index)
        drv = _get_driver()
        with guard:
            fn = self._function(device_index)
            v_t = self._value_layout(v, strides[2], device_index, stream)
            params = {p["name"]: p for p in self.meta["params"]}
            maps = {name: encode_tensor_map(
                        t, int(params[name]["box"][1]), "e4m3",
                        int(params[name]["box"][0]), 4, st,
                        params[name].get("l2_promotion", 256))
                    for name, t, st in (("q", q, strides[0]),
                                        ("k", k, strides[1]),
                                        ("v_t", v_t, v_t.stride()[:3]))}
            values = {"o": ctypes.c_void_p(out.data_ptr()),
                      "lse": ctypes.c_void_p(lse_ptr.data_ptr() if lse is None
                                             else lse.data_ptr()),
                      "Nq": ctypes.c_int32(nq), "Nk": ctypes.c_int32(nk),
                      "Hq": ctypes.c_int32(hq), "Hkv": ctypes.c_int32(hkv),
                      "scale_log2": ctypes.c_float(
                          scale * 1.4426950408889634),
                      "B": ctypes.c_int32(b),
                      "descale_layout": ctypes.c_int32(layout)}
            values.update(zip(("o_stride_b", "o_stride_h", "o_stride_n"),
                              map(ctypes.c_int64, strides[3])))
            values.update(zip(("q_descale", "k_descale", "v_descale"),
                              (ctypes.c_void_p(x.data_ptr())
                               for x in scalars)))
            if self.meta.get("tile_scheduler") == "dynamic":
                values["tile_counter"] = ctypes.c_void_p(
                    tile_counter(device_index, stream).data_ptr())
            launch_params = _bind_by_name(self.name, self.meta["params"],
                                          values, maps)
            sms = (device_facts(device_index)[1]
                   if self.meta.get("persistent") else None)
            gx, gy, gz = self.grid(b, hq, nq, sms)
            bx, by, bz = self.meta["block"]
            drv.check(drv.lib.cuLaunchKernel(
                fn, gx, gy, gz, bx, by, bz, self.meta["shared_memory_bytes"],
                ctypes.c_void_p(stream), launch_params, None), "cuLaunchKernel")
        # v_t and the descale scalars are freed on return: torch's caching
        # allocator hands their memory out again only to work ordered after
        # these kernels on this stream.
        return out, (lse if self.meta.get("writes_lse", True) else None)

    def _value_keys(self, nk):
        """The keys of a V^T row: Nk rounded up to the metadata's
        key_alignment (16 for kernels built before the key existed)."""
        align = self.meta["value_layout"].get("key_alignment", 16)
        return (nk + align - 1) // align * align

    def _value_layout(self, v, v_strides, device_index, stream):
        """Launches the V layout kernel on `stream`: returns V^T [B, Hkv,
        D, _value_keys(Nk)] (uint8 codes), keys permuted in 16s."""
        import torch
        b, hkv, nk, d = v.shape
        keys = self._value_keys(nk)
        v_t = torch.empty((b, hkv, d, keys), dtype=torch.uint8,
                          device=v.device)
        sb, sh, sn = v_strides
        values = {"v": ctypes.c_void_p(v.data_ptr()),
                  "v_t": ctypes.c_void_p(v_t.data_ptr()),
                  "B": ctypes.c_int32(b), "Hkv": ctypes.c_int32(hkv),
                  "Nk": ctypes.c_int32(nk), "v_stride_b": ctypes.c_int64(sb),
                  "v_stride_h": ctypes.c_int64(sh),
                  "v_stride_n": ctypes.c_int64(sn)}
        params = _bind_by_name(
            self.meta["value_layout"]["kernel"],
            self.meta["value_layout"].get(
                "params", [{"name": n} for n in _VALUE_LAYOUT_PARAMS]),
            values)
        threads = self.meta["value_layout"]["block"][0]
        # The grid the lowering wrote (fagpu::valueLayoutGrid); Nk_128:
        # V^T's keys, Nk rounded up to the key alignment.
        gx, gy, gz = _evaluate_grid(
            self.meta, self.meta["value_layout"]["grid"],
            {"B": b, "Hkv": hkv, "D": d, "Nk_128": keys},
            f"{self.name}: the V layout kernel's ")
        drv = _get_driver()
        drv.check(drv.lib.cuLaunchKernel(
            self._layout_function(device_index), gx, gy, gz, threads, 1, 1,
            0, ctypes.c_void_p(stream), params, None),
            "cuLaunchKernel(V layout)")
        return v_t

    def _layout_function(self, device_index):
        """The e4m3 kernel's V layout kernel, from the same cubin."""
        return self._auxiliary_function(device_index, "value_layout")

    def kv_append_plan(self, k, v, k_cache, v_cache, page_size, max_pages,
                       capacity, descale_layout=0):
        """The launch plan of this KV-cache kernel's append kernel
        ("kv_append") for new rows k, v [B, Nnew, Hkv, D] and caches in
        flash-attn's layouts ([B, capacity, Hkv, D], or with page_size
        [num_pages, page_size, Hkv, D] read through a block table of
        max_pages columns); None where the kernel has no append kernel
        (built before it) or the rows are not whole 16-byte pieces (8 for
        an e4m3 cache) the kernel moves: the caller then appends with torch
        ops. The caller has checked the shapes and dtypes; an e4m3 cache's
        descale_layout is its attention plan's."""
        append = self.meta.get("kv_append")
        if append is None:
            return None
        return _AppendPlan.make(self, append, k, v, k_cache, v_cache,
                                page_size, max_pages, capacity,
                                descale_layout)

    def _append_function(self, device_index):
        """The KV-cache kernel's append kernel, from the same cubin."""
        return self._auxiliary_function(device_index, "kv_append")

    def _auxiliary_function(self, device_index, entry):
        """The kernel the metadata's `entry` ("value_layout", "kv_append")
        names, from the cubin's module on `device_index`, looked up once."""
        fn = self._auxiliary_functions.get((device_index, entry))
        if fn is None:
            fn = module_function(self._module(device_index),
                                 self.meta[entry]["kernel"], 0,
                                 f"the metadata's {entry}")
            self._auxiliary_functions[(device_index, entry)] = fn
        return fn

    def _module(self, device_index):
        """The cubin's module on `device_index`, loaded with the attention
        kernel."""
        self._function(device_index)
        return self._functions[device_index][0]

    def _function(self, device_index):
        if device_index in self._functions:
            return self._functions[device_index][1]
        self._functions[device_index] = load_function(
            self.cubin, self.name, self.meta["shared_memory_bytes"],
            device_index)
        return self._functions[device_index][1]

    def __call__(self, q, k, v, out=None, lse=None, scale=None,
                 num_splits=None, discard_lse=False, cache_seqlens=None,
                 block_table=None, cu_seqlens_q=None, cu_seqlens_k=None,
                 max_seqlen_q=None, q_descale=None, k_descale=None,
                 v_descale=None, captures=None, sinks=None,
                 key_ranges=None):
        """Runs the kernel; returns (out, lse or None). num_splits: the
        K/V chunk count of a split-KV kernel (None or 0: the metadata's
        default, or the auto rule); refused for other kernels. discard_lse:
        the caller does not want the LSE (returned as None; a kernel that
        writes one writes it to a per-stream scratch). cache_seqlens [B]
        and block_table [B, max_pages] (int32): a KV cache's per-sequence
        key counts and pages, for kernels compiled to take them (k and v
        are then the paged cache [pages, Hkv, page_size, D]).
        cu_seqlens_q, cu_seqlens_k ([B + 1] int32) and max_seqlen_q: a
        varlen batch, for kernels compiled for one (q, k, v, out [1, H,
        total, D] with the sequences packed along N; the prefix sums must
        start at 0, not decrease and end within the tensors' N).
        q_descale, k_descale, v_descale: an e4m3 kernel's descales, the
        factors its e4m3 codes are multiplied by (_call_e4m3): per tensor
        (float32 device tensors of one element, or numbers), FA3's [B, Hkv],
        or per block (block quantisation): q's [B, Hq, ceil(Nq / block_r)],
        k's [B, Hkv, ceil(Nk / block_c)] (descale_blocks), v's one.
        captures: the tensors a kernel's score_mod / mask_mod read (its
        metadata's capture0, ... parameters), in order, each of the
        parameter's shape and dtype on q's device (made contiguous).
        sinks: a kernel built with attention sinks takes their logits, a
        float32 tensor [Hq] on q's device (natural log; -inf: none).
        key_ranges: a mask_mod kernel's block sparsity, an int32 tensor
        [B, Hq, ceil(Nq / block_r), 4] on q's device: per query tile of
        block_r rows, [first key, end key) holding every key its mask lets
        through, and [full first, full end) of keys it lets through to
        every row (flashmlir.create_block_mask makes them); the kernel
        reads only the K/V blocks that meet the first range and skips the
        mask_mod on the whole blocks inside the second. None: every block,
        each under the mask."""
        captures = self._check_captures(captures, q)
        sinks = self._check_sinks(sinks, q)
        key_ranges = self._check_key_ranges(key_ranges, q)
        descales = (q_descale, k_descale, v_descale)
        if self.meta["dtype"] == "e4m3":
            extras = {"num_splits": num_splits, "cache_seqlens": cache_seqlens,
                      "block_table": block_table,
                      "cu_seqlens_q": cu_seqlens_q,
                      "cu_seqlens_k": cu_seqlens_k,
                      "max_seqlen_q": max_seqlen_q}
            given = [name for name, x in extras.items() if x is not None]
            if given:
                raise KernelArgumentError(
                    f"e4m3 kernels take no {', '.join(given)} (no split-KV, "
                    f"KV cache or varlen form yet)")
            return self._call_e4m3(q, k, v, descales, out, lse, scale,
                                   discard_lse)
        kv_descales = None
        if self.e4m3_cache:
            if q_descale is not None or k_descale is None or \
                    v_descale is None:
                raise KernelArgumentError(
                    f"{self.name} reads an e4m3 KV cache: give k_descale and "
                    f"v_descale (float32 device tensors of one element or "
                    f"[B, Hkv]) and no q_descale (q is {self.meta['dtype']})")
            kv_descales = (k_descale, v_descale)
        elif any(x is not None for x in descales):
            raise KernelArgumentError(
                f"descales are for e4m3 kernels; {self.name} takes "
                f"{self.meta['dtype']} inputs")

        plan = self.plan(q, k, v, out, lse, scale, num_splits, discard_lse,
                         cache_seqlens, block_table, cu_seqlens_q,
                         cu_seqlens_k, max_seqlen_q, kv_descales)
        out, lse = plan.launch(q, k, v, out, lse, cache_seqlens, block_table,
                               cu_seqlens_q, cu_seqlens_k, kv_descales,
                               captures, sinks, key_ranges)
        # A kernel built without an LSE destination leaves lse unwritten.
        return out, (lse if self.meta.get("writes_lse", True) else None)

    def _check_sinks(self, sinks, q):
        """A launch's sink logits: float32 [Hq] on q's device where the
        kernel takes them (its metadata's sinks parameter), else none."""
        import torch
        if "sinks" not in self._param_names:
            if sinks is not None:
                raise KernelArgumentError(
                    f"{self.name} was built without attention sinks; "
                    f"compile an fa.attention with sinks(...) for them")
            return None
        hq = q.shape[1] if q.dim() == 4 else None
        if not isinstance(sinks, torch.Tensor) or \
                sinks.dtype != torch.float32 or sinks.device != q.device or \
                tuple(sinks.shape) != (hq,):
            got = (f"{sinks.dtype} of shape {tuple(sinks.shape)} on "
                   f"{sinks.device}" if isinstance(sinks, torch.Tensor)
                   else type(sinks).__name__)
            raise KernelArgumentError(
                f"{self.name} takes attention sinks: sinks must be a float32 "
                f"tensor of shape ({hq},) on {q.device}, got {got}")
        return sinks.contiguous()

    def _check_key_ranges(self, key_ranges, q):
        """A launch's key ranges: None, or int32 [B, Hq, ceil(Nq /
        block_r), 4] on q's device for a kernel that takes them (a
        mask_mod's); returned contiguous."""
        import torch
        if key_ranges is None:
            return None
        if "key_ranges" not in self._param_names:
            raise KernelArgumentError(
                f"{self.name} has no mask_mod: key_ranges (block sparsity "
                f"from a mask) are for kernels compiled with one")
        if q.dim() != 4 or self.meta.get("varlen"):
            raise KernelArgumentError(
                f"{self.name}: key_ranges need q as [B, Hq, Nq, D] (no "
                f"varlen batch)")
        block_r = int(self.meta["block_r"])
        shape = (q.shape[0], q.shape[1], -(-q.shape[2] // block_r), 4)
        if not isinstance(key_ranges, torch.Tensor) or \
                key_ranges.dtype != torch.int32 or \
                key_ranges.device != q.device or \
                tuple(key_ranges.shape) != shape:
            got = (f"{key_ranges.dtype} of shape {tuple(key_ranges.shape)} "
                   f"on {key_ranges.device}"
                   if isinstance(key_ranges, torch.Tensor)
                   else type(key_ranges).__name__)
            raise KernelArgumentError(
                f"{self.name}: key_ranges must be an int32 tensor of shape "
                f"{shape} (B, Hq, query tiles of {block_r} rows, [first, "
                f"end) and [full first, full end)) on {q.device}, got {got}")
        return key_ranges.contiguous()

    def _check_captures(self, captures, q):
        """The captures a launch passes, checked against the metadata's
        capture parameters: one torch tensor each, of its shape and dtype,
        on q's device; returned contiguous."""
        import torch
        params = self._capture_params
        if not params and captures is None:
            return []
        given = [] if captures is None else list(captures)
        if len(given) != len(params):
            raise KernelArgumentError(
                f"{self.name} reads {len(params)} captured tensor(s) "
                f"(score_mod / mask_mod), got {len(given)}: pass captures=")
        out = []
        for p, t in zip(params, given):
            shape = tuple(int(d) for d in p["shape"])
            if not isinstance(t, torch.Tensor) or \
                    tuple(t.shape) != shape or t.device != q.device or \
                    str(t.dtype).replace("torch.", "") not in \
                    _CAPTURE_DTYPES[p["dtype"]]:
                got = (f"{t.dtype} of shape {tuple(t.shape)} on {t.device}"
                       if isinstance(t, torch.Tensor) else type(t).__name__)
                raise KernelArgumentError(
                    f"{self.name}: {p['name']} must be a "
                    f"{' or '.join(_CAPTURE_DTYPES[p['dtype']])} tensor of "
                    f"shape {shape} on {q.device}, got {got}")
            out.append(t.contiguous())
        return out


def _bind_by_name(kernel, params, values, maps=None):
    """A kernel's parameter buffer: for each of the metadata's `params` in
    order, the address of its value in `values` (ctypes objects, which the
    caller keeps alive until the launch) or, for a tensor map, of its
    encoded map in `maps` ((buffer, address) pairs). The metadata's names
    are the one description of the order (fagpu::kernelParams)."""
    maps = maps or {}
    addresses = []
    for p in params:
        name = p["name"]
        if name in maps:
            addresses.append(maps[name][1])
        elif name in values:
            addresses.append(ctypes.addressof(values[name]))
        else:
            raise MetadataError(
                f"{kernel}: no launch value for the parameter {name!r}")
    return (ctypes.c_void_p * len(addresses))(*addresses)


# Launch plans a kernel keeps (a serving loop launches a few shapes, a bench
# sweep more); the oldest goes first.
_PLANS_PER_KERNEL = 64


def _device_guard(device_index):
    """A context that makes `device_index` torch's current CUDA device for a
    launch: nothing where it already is (entering a device guard costs
    microseconds). The launches' tensors are on the device, so CUDA is
    initialised: torch's raw query, where it has one, skips
    torch.cuda.current_device's initialisation check."""
    import torch
    current = getattr(torch._C, "_cuda_getDevice", None)
    current = current() if current is not None else torch.cuda.current_device()
    if current == device_index:
        return contextlib.nullcontext()
    return torch.cuda.device(device_index)


def _current_stream(device_index):
    """torch's current CUDA stream on `device_index` as a CUstream integer:
    torch's raw query where it has one (a torch.cuda.Stream object costs a
    few microseconds a launch)."""
    import torch
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw(device_index)
    return torch.cuda.current_stream(device_index).cuda_stream


class _MapSpec:
    """A tensor-map parameter of a launch plan: everything
    cuTensorMapEncodeTiled encodes (encode_tensor_map's layout) but the
    tensor's address, built once; `encoded(address)` gives the map, from
    the same cache as encode_tensor_map."""

    def __init__(self, shape, elem, dtype, box_rows, box_cols, rank, strides,
                 l2_promotion):
        b, h, n, d = shape
        if rank == 4:
            sb, sh, sn = strides
            self.dims = (ctypes.c_uint64 * 4)(d, n, h, b)
            self.byte_strides = (ctypes.c_uint64 * 3)(sn * elem, sh * elem,
                                                      sb * elem)
        else:
            self.dims = (ctypes.c_uint64 * 3)(d, n, b * h)
            self.byte_strides = (ctypes.c_uint64 * 2)(d * elem, n * d * elem)
        self.box = (ctypes.c_uint32 * rank)(box_cols, box_rows,
                                            *([1] * (rank - 2)))
        self.unit = (ctypes.c_uint32 * rank)(*([1] * rank))
        self.rank = rank
        self.dtype_code = _CU_TENSOR_MAP_DATA_TYPE[dtype]
        self.swizzle = _CU_TENSOR_MAP_SWIZZLE[box_cols * elem]
        self.l2 = _CU_TENSOR_MAP_L2_PROMOTION[l2_promotion]
        # encode_tensor_map's key without the address.
        self.key = (tuple(shape), elem, dtype, box_rows, box_cols, rank,
                    strides, l2_promotion)
        # (address, encoding) of the last call: a decode loop's caches sit
        # at one address, so most calls take it without the shared cache's
        # lock (one tuple, read and replaced whole).
        self._last = (None, None)

    def encoded(self, address):
        """(buffer, address of the 64-byte aligned CUtensorMap in it) over
        the tensor at `address`."""
        last_address, last = self._last
        if address == last_address:
            return last
        key = (address,) + self.key
        with _TENSOR_MAP_LOCK:
            hit = _TENSOR_MAPS.get(key)
            if hit is not None:
                _TENSOR_MAPS.move_to_end(key)
        if hit is not None:
            self._last = (address, hit)
            return hit
        encoded = self._encode(address)
        with _TENSOR_MAP_LOCK:
            _TENSOR_MAPS[key] = encoded
            if len(_TENSOR_MAPS) > _TENSOR_MAP_CACHE_SIZE:
                _TENSOR_MAPS.popitem(last=False)
        self._last = (address, encoded)
        return encoded

    def _encode(self, address):
        """cuTensorMapEncodeTiled into a fresh 64-byte aligned buffer."""
        buf = ctypes.create_string_buffer(128 + 64)
        addr = (ctypes.addressof(buf) + 63) & ~63
        drv = _get_driver()
        drv.check(drv.lib.cuTensorMapEncodeTiled(
            ctypes.c_void_p(addr), ctypes.c_int(self.dtype_code),
            ctypes.c_uint32(self.rank), ctypes.c_void_p(address), self.dims,
            self.byte_strides, self.box, self.unit, ctypes.c_int(0),
            ctypes.c_int(self.swizzle), ctypes.c_int(self.l2),
            ctypes.c_int(0)), "cuTensorMapEncodeTiled")
        return buf, addr


# The launch-time values of a plan's parameters, by the metadata's names
# (fagpu::kernelParams is their one description; lib/Runtime/Launch.cpp
# binds the same names): the tensors' indices in _LaunchPlan.launch's
# `tensors`.
_TENSOR_PARAMS = {"q": 0, "k": 1, "v": 2, "o": 3, "o_rows": 3,
                  "kv_lengths": 5, "block_table": 6, "cu_seqlens_q": 7,
                  "cu_seqlens_k": 8, "k_descale": 9, "v_descale": 10,
                  "sinks": 11, "key_ranges": 12}
# Capture i of a launch's tensors (_LaunchPlan.launch) is at this plus i.
_FIRST_CAPTURE = 13
# A capture parameter's dtype (fa-compile's names) and the torch dtypes a
# caller may pass for it.
_CAPTURE_DTYPES = {"f32": ("float32",), "f16": ("float16",),
                   "bf16": ("bfloat16",), "i8": ("int8", "uint8", "bool"),
                   "i32": ("int32",), "i64": ("int64",)}


def _capture_params(params):
    """The trailing capture{i} parameters of a params list (score_mod /
    mask_mod captures), checked: pointers, in order, of a known dtype and a
    static shape of positive sizes."""
    captures = sorted((p for p in params
                       if str(p.get("name", "")).startswith("capture")),
                      key=lambda p: (len(p["name"]), p["name"]))
    for i, p in enumerate(captures):
        if p["name"] != f"capture{i}" or p.get("kind") != "pointer" or \
                p.get("dtype") not in _CAPTURE_DTYPES or \
                not isinstance(p.get("shape"), list) or \
                not all(isinstance(d, str) and d.isdigit() and int(d) > 0
                        for d in p["shape"]):
            raise MetadataError(
                f"metadata capture parameter {p!r}: expected capture{i}, a "
                f"pointer of dtype {'/'.join(_CAPTURE_DTYPES)} with a static "
                f"shape")
    return captures


def _cache_descale_layout(name, kv_descales, q, b, hkv):
    """The descale_layout of an e4m3 cache's (k_descale, v_descale): 0 for
    float32 device tensors of one element each, 1 for [B, Hkv] each
    (contiguous); anything else is refused."""
    layouts = set()
    for what, t in zip(("k_descale", "v_descale"), kv_descales):
        if not hasattr(t, "data_ptr") or _dtype_name(t) != "float32" or \
                str(t.device) != str(q.device) or not t.is_contiguous():
            raise KernelArgumentError(
                f"{name}: {what} must be a contiguous float32 tensor on "
                f"{q.device}, got {type(t).__name__} "
                f"{_dtype_name(t) if hasattr(t, 'dtype') else ''}")
        if t.numel() == 1:
            layouts.add(0)
        elif tuple(t.shape) == (b, hkv):
            layouts.add(1)
        else:
            raise KernelArgumentError(
                f"{name}: {what} must have one element (per tensor) or shape "
                f"[B, Hkv] = {[b, hkv]}, got {list(t.shape)}")
    if len(layouts) != 1:
        raise KernelArgumentError(
            f"{name}: k_descale and v_descale must be laid out alike (one "
            f"element each, or [B, Hkv] each)")
    return layouts.pop()


class _AppendPlan:
    """One launch of a KV-cache kernel's append kernel for new rows and
    caches of one signature (fagpu::kvAppendParams): the grid and every
    parameter but the pointers, which `launch` binds. The lengths and the
    block table stay on the device: the kernel traps on a position past the
    capacity or a page outside the cache."""

    @classmethod
    def make(cls, kernel, append, k, v, k_cache, v_cache, page_size,
             max_pages, capacity, descale_layout):
        """The plan, or None where the kernel cannot move these rows: a
        head dim not of the kernel or not whole pieces, strides not whole
        pieces, no unit stride on D, no rows at all, or numbers past its
        32-bit parameters."""
        b, n_new, hkv, d = k.shape
        columns = append["columns_per_thread"]
        tensors = (k, v, k_cache, v_cache)
        if d != kernel.meta["head_dim"] or d % columns or \
                b * n_new * hkv == 0 or capacity > _I32_MAX or \
                k_cache.shape[0] > _I32_MAX or max_pages > _I32_MAX:
            return None
        for t in tensors:
            if t.stride(3) != 1 or any(x % columns for x in t.stride()[:3]):
                return None
        return cls(kernel, append, tensors, page_size, max_pages, capacity,
                   descale_layout)

    def __init__(self, kernel, append, tensors, page_size, max_pages,
                 capacity, descale_layout):
        k, _, k_cache, _ = tensors
        b, n_new, hkv, d = k.shape
        # The scalar parameters by name (the tests read them).
        self.scalars = {}
        self.kernel = kernel
        self.batch = b
        threads = append["block"][0]
        self.block = threads
        # The grid the lowering wrote (fagpu::kvAppendGrid).
        self.grid = _evaluate_grid(kernel.meta, append["grid"],
                                   {"B": b, "Nnew": n_new, "Hkv": hkv, "D": d},
                                   f"{kernel.name}: the append kernel's ")
        # 16-bit caches take 16-byte stores, e4m3 ones 8-byte stores.
        self.cache_alignment = k_cache.element_size() * \
            append["columns_per_thread"]
        scalars = {"B": b, "Nnew": n_new, "Hkv": hkv, "page_size": page_size,
                   "max_pages": max_pages,
                   "num_pages": k_cache.shape[0] if page_size else 0,
                   "capacity": capacity,
                   "descale_layout": descale_layout}
        for name, t in zip(("k_new", "v_new", "k_cache", "v_cache"),
                           tensors):
            scalars.update({f"{name}_stride_{dim}": stride for dim, stride
                            in zip("bnh", t.stride()[:3])})
        ctype = {"i32": ctypes.c_int32, "i64": ctypes.c_int64}
        self._fixed, addresses, self._cells = [], [], []
        for p in append["params"]:
            name, kind = p["name"], p.get("kind")
            if kind in ctype:
                value = ctype[kind](scalars[name])
                self._fixed.append(value)
                self.scalars[name] = value.value
                addresses.append(ctypes.addressof(value))
            else:
                cell = ctypes.c_void_p(0)
                self._cells.append((_APPEND_POINTERS[name], cell))
                addresses.append(ctypes.addressof(cell))
        self._params = (ctypes.c_void_p * len(addresses))(*addresses)
        self._launch_lock = threading.Lock()

    def launch(self, k, v, k_cache, v_cache, lengths, block_table,
               kv_descales=None):
        """Appends k and v on torch's current stream; returns the lengths
        the attention then reads (lengths + Nnew, written by the kernel), or
        None where a tensor does not start on a whole piece (the caller then
        appends with torch ops)."""
        import torch

        if k.data_ptr() % 16 or v.data_ptr() % 16 or \
                k_cache.data_ptr() % self.cache_alignment or \
                v_cache.data_ptr() % self.cache_alignment:
            return None
        seen = torch.empty(self.batch, dtype=torch.int32, device=k.device)
        tensors = (k, v, k_cache, v_cache, lengths, seen, block_table) + \
            tuple(kv_descales or (None, None))
        device_index = k.device.index
        stream = _current_stream(device_index)
        drv = _get_driver()
        guard = _device_guard(device_index)
        with guard, self._launch_lock:
            for i, cell in self._cells:
                t = tensors[i]
                cell.value = 0 if t is None else t.data_ptr()
            drv.check(drv.lib.cuLaunchKernel(
                self.kernel._append_function(device_index), *self.grid,
                self.block, 1, 1, 0, ctypes.c_void_p(stream), self._params,
                None), "cuLaunchKernel(KV append)")
        return seen


# The append kernel's pointer parameters: their places in the tuple
# _AppendPlan.launch binds.
_APPEND_POINTERS = {"k_new": 0, "v_new": 1, "k_cache": 2, "v_cache": 3,
                    "cache_seqlens": 4, "seen": 5, "block_table": 6,
                    "k_descale": 7, "v_descale": 8}
_I32_MAX = 2 ** 31 - 1


class _LaunchPlan:
    """One checked launch of a Kernel for arguments of one signature
    (shapes, strides, dtypes, devices and the scalar options): the grid,
    the split count, the scratch sizes and every parameter but the
    pointers, which `launch` binds. Building one runs every argument check;
    a launch through one checks nothing more (the Kernel keys plans by the
    signature and checks the pointers' alignment itself)."""

    def __init__(self, kernel, q, k, v, out, lse, scale, num_splits,
                 discard_lse, cache_seqlens, block_table, cu_seqlens_q,
                 cu_seqlens_k, max_seqlen_q, kv_descales=None):
        import torch

        meta = kernel.meta
        (b, hq, hkv, nq, nk, d), strides = kernel._check(
            q, k, v, out, lse, cache_seqlens, block_table)
        packed = kernel._check_varlen(q, k, cu_seqlens_q, cu_seqlens_k,
                                      max_seqlen_q)
        total_q = nq
        if packed:
            # The grid: B sequences of the longest one's query blocks.
            b, nq = packed
        self.device_index = q.device.index if q.device.index is not None \
            else torch.cuda.current_device()
        dv = kernel.value_head_dim
        self.out_shape = None
        if out is None:
            self.out_shape = tuple(q.shape[:3]) + (dv,)
            if kernel.strided:
                strides[3] = (hq * q.shape[2] * dv, q.shape[2] * dv, dv)
        self.lse_shape = (q.shape[0], hq, total_q)
        self.lse_count = hq * q.shape[0] * total_q
        self.discard_lse = bool(discard_lse)
        scale = kernel._scale(scale, d)
        splits = 1
        self.workspace_count = 0
        if meta.get("split_kv"):
            _, sms, dram_gbps = device_facts(self.device_index)
            splits = kernel.kv_splits_for(b, hq, nq, nk, sms, dram_gbps,
                                          num_splits)
            # Partial O [S, B, Hq, Nq, D] and LSE [S, B, Hq, Nq] in f32, and
            # one arrival counter per query row.
            self.workspace_count = splits * b * hq * nq * (dv + 1)
            self.partial_lse_offset = 4 * splits * b * hq * nq * dv
            self.arrivals_count = b * hq * nq
        elif num_splits not in (None, 0, 1):
            raise KernelArgumentError(
                f"num_splits={num_splits} needs a split-KV kernel "
                f"(fa-compile --split-kv); {kernel.name} is not one")
        self.splits = splits
        # Only a persistent kernel's grid depends on the SM count.
        sms = (device_facts(self.device_index)[1]
               if meta.get("persistent") else None)
        self.grid = kernel.grid(b, hq, nq, sms, splits)
        self.block = tuple(meta["block"])
        self.shared_bytes = meta["shared_memory_bytes"]
        self.kernel = kernel

        scalars = {"Nq": nq, "Nk": nk, "Hq": hq, "Hkv": hkv, "B": b,
                   "kv_splits": splits, "total_q": total_q, "total_k": nk,
                   "scale_log2": scale * 1.4426950408889634}
        if block_table is not None:
            scalars.update(max_pages=block_table.shape[1],
                           num_pages=k.shape[0])
        # An e4m3 cache's descales (the append kernel takes the same).
        self.descale_layout = 0
        if kv_descales is not None:
            self.descale_layout = scalars["descale_layout"] = \
                _cache_descale_layout(kernel.name, kv_descales, q, b, hkv)
        if strides[3] is not None:
            scalars.update(zip(("o_stride_b", "o_stride_h", "o_stride_n"),
                               strides[3]))
        ctype = {"i32": ctypes.c_int32, "i64": ctypes.c_int64,
                 "f32": ctypes.c_float}
        shapes = (q.shape, k.shape, v.shape, self.out_shape or out.shape)
        # Fixed parameters are bound once (their ctypes values live with the
        # plan); the others are (slot, kind, what) for launch.
        self._fixed = []
        self._addresses = []
        self._bound = []
        self.captures = 0  # score_mod / mask_mod captures launch binds
        self.sinks = False  # whether launch binds sink logits
        for slot, p in enumerate(meta["params"]):
            name, kind = p["name"], p.get("kind")
            self._addresses.append(None)
            if kind in ctype:
                if name not in scalars:
                    raise MetadataError(
                        f"{kernel.name}: no launch value for the {kind} "
                        f"parameter {name!r}")
                value = ctype[kind](scalars[name])
                self._fixed.append(value)
                self._addresses[slot] = ctypes.addressof(value)
            elif kind == "tensormap":
                i = _TENSOR_PARAMS[name]
                codes = (meta["dtype"] == "e4m3" and i < 3) or \
                    (kernel.e4m3_cache and i in (1, 2))
                spec = _MapSpec(
                    shapes[i], 1 if codes else 2,
                    "e4m3" if codes else meta["dtype"], int(p["box"][1]),
                    int(p["box"][0]),
                    int(p.get("rank", 3)), strides[i],
                    p.get("l2_promotion", 256))
                self._bound.append((slot, "map", (i, spec)))
            elif name == "lse":
                self._bound.append((slot, "lse", None))
            elif name == "key_ranges":
                # Optional at launch: a null pointer reads every block.
                self._bound.append((slot, "optional", _TENSOR_PARAMS[name]))
            elif name in _TENSOR_PARAMS:
                self._bound.append((slot, "pointer", _TENSOR_PARAMS[name]))
                self.sinks = self.sinks or name == "sinks"
            elif name.startswith("capture"):
                self._bound.append((slot, "pointer",
                                    _FIRST_CAPTURE + int(name[7:])))
                self.captures += 1
            elif name in ("o_partial", "lse_partial"):
                self._bound.append((slot, "workspace",
                                    0 if name == "o_partial"
                                    else self.partial_lse_offset))
            elif name in ("split_arrivals", "tile_counter"):
                self._bound.append((slot, name, None))
            else:
                raise MetadataError(
                    f"{kernel.name}: no launch value for the parameter "
                    f"{name!r}")
        # The parameter array cuLaunchKernel reads, made once: the fixed
        # values' addresses, and for each pointer a cell of its own whose
        # value a launch sets (a tensor map's slot takes the address of its
        # cached encoding instead). cuLaunchKernel copies the values before
        # it returns, so one launch at a time (the lock) may reuse them.
        self._params = (ctypes.c_void_p * len(self._addresses))(
            *[a or 0 for a in self._addresses])
        self._cells = []
        for slot, kind, what in self._bound:
            cell = None
            if kind != "map":
                cell = ctypes.c_void_p(0)
                self._params[slot] = ctypes.addressof(cell)
            self._cells.append((slot, kind, what, cell))
        self._launch_lock = threading.Lock()
        self._last_scratch = (None, None)

    def _scratch(self, device_index, stream):
        """The addresses of the per-stream buffers this plan's launches
        use: the discarded LSE, split-KV's partial O and LSE ("workspace")
        and arrival counters, the dynamic scheduler's tile counter. Kept
        for the plan's last stream (the buffers only grow, and one a plan
        took stays alive with it); during a CUDA-graph capture made afresh,
        the workspace from the graph's pool."""
        import torch

        last_stream, last = self._last_scratch
        if last_stream == stream:
            return last
        capture = capturing()
        keep, scratch = [], {}
        if self.discard_lse:
            keep.append(lse_scratch(device_index, stream, self.lse_count))
            scratch["lse"] = keep[-1].data_ptr()
        if self.workspace_count:
            keep.append(torch.empty(self.workspace_count, dtype=torch.float32,
                                    device=f"cuda:{device_index}")
                        if capture else
                        split_workspace(device_index, stream,
                                        self.workspace_count))
            scratch["workspace"] = keep[-1].data_ptr()
        kinds = {kind for _, kind, _ in self._bound}
        if "split_arrivals" in kinds:
            keep.append(split_arrivals(device_index, stream,
                                       self.arrivals_count))
            scratch["split_arrivals"] = keep[-1].data_ptr()
        if "tile_counter" in kinds:
            keep.append(tile_counter(device_index, stream))
            scratch["tile_counter"] = keep[-1].data_ptr()
        scratch["keep"] = keep
        if not capture:
            self._last_scratch = (stream, scratch)
        return scratch

    def launch(self, q, k, v, out, lse, cache_seqlens, block_table,
               cu_seqlens_q, cu_seqlens_k, kv_descales=None, captures=(),
               sinks=None, key_ranges=None):
        """Binds the tensors' pointers and launches on torch's current
        stream; returns (out, lse) (lse None where discarded)."""
        import torch

        if (sinks is not None) != self.sinks:
            raise KernelArgumentError(
                f"{self.kernel.name}: sinks are for a kernel built with them, "
                f"and such a kernel needs them (Kernel.__call__(..., sinks=))")
        if len(captures) != self.captures:
            raise KernelArgumentError(
                f"{self.kernel.name} reads {self.captures} captured "
                f"tensor(s), got {len(captures)}: launch it through "
                f"Kernel.__call__(..., captures=)")
        device_index = self.device_index
        stream = _current_stream(device_index)
        if out is None:
            out = torch.empty(self.out_shape, dtype=q.dtype, device=q.device)
        scratch = self._scratch(device_index, stream)
        if lse is not None:
            lse_ptr = lse.data_ptr()
        elif self.discard_lse:
            lse_ptr = scratch["lse"]
        else:
            lse = torch.empty(self.lse_shape, dtype=torch.float32,
                              device=q.device)
            lse_ptr = lse.data_ptr()
        tensors = (q, k, v, out, None, cache_seqlens, block_table,
                   cu_seqlens_q, cu_seqlens_k) + \
            tuple(kv_descales or (None, None)) + (sinks, key_ranges) + \
            tuple(captures)
        gx, gy, gz = self.grid
        bx, by, bz = self.block
        drv = _get_driver()
        # The tensors' device made current for the launch.
        guard = _device_guard(device_index)
        params = self._params
        keep = []  # the tensor maps' encodings, alive until the launch
        with guard, self._launch_lock:
            for slot, kind, what, cell in self._cells:
                if kind == "map":
                    i, spec = what
                    buf, params[slot] = spec.encoded(tensors[i].data_ptr())
                    keep.append(buf)
                elif kind == "pointer":
                    cell.value = tensors[what].data_ptr()
                elif kind == "optional":
                    t = tensors[what]
                    cell.value = 0 if t is None else t.data_ptr()
                elif kind == "lse":
                    cell.value = lse_ptr
                elif kind == "workspace":
                    cell.value = scratch["workspace"] + what
                else:
                    cell.value = scratch[kind]
            fn = self.kernel._function(device_index)
            drv.check(drv.lib.cuLaunchKernel(
                fn, gx, gy, gz, bx, by, bz, self.shared_bytes,
                ctypes.c_void_p(stream), params, None), "cuLaunchKernel")
        return out, lse
