"""Compile attention kernels from Python.

    import flashmlir
    k = flashmlir.compile(head_dim=128, causal=True, dtype="f16", arch="sm_90a")
    k.ptx, k.cubin, k.metadata          # PTX text, cubin bytes, launch dict
    print(k.mlir("kernel"))             # the gpu.module in NVVM

Needs the compiled extension (built with flash-mlir); the runtime
(flashmlir.runtime) does not.

Compiling takes about a second, so compile() and compile_module() keep
their results in the process and on disk (see cache_dir(): one file per
kernel, keyed by every option and the compiler's identity), and a new
process loads a kernel compiled before instead of compiling it again.
"""
import collections
import functools
import hashlib
import json
import os
import struct
import tempfile
import threading
import warnings
import zlib

from .errors import CompileError

__all__ = ["CacheInfo", "CompiledKernel", "CompiledModule", "compile",
           "compile_module", "CompileError", "cache_dir", "cache_info",
           "clear_cache", "compiler_id", "run_cpu", "to_e4m3", "from_e4m3",
           "quantize_e4m3"]

_STAGES = ("attention", "host", "kernel", "ptx")


def _extension():
    try:
        from . import _compiler
    except ImportError as e:
        raise ImportError(
            "flashmlir._compiler is not built: build flash-mlir "
            "(bash scripts/bootstrap.sh) and use build/python, or install "
            "it with cmake --install") from e
    return _compiler


def _f32_text(value):
    """`value` as the f32 attribute it becomes, in text that parses back to
    that f32 exactly (repr of the f32's double value; ':e' kept 7 digits)."""
    return repr(struct.unpack("f", struct.pack("f", value))[0])


class CompiledKernel:
    """One compiled kernel: PTX, cubin, launch metadata and its IR stages."""

    def __init__(self, raw, options):
        self._raw = raw
        self.options = dict(options)
        self.name = raw["name"]
        self.ptx = raw["ptx"]
        self.cubin = raw["cubin"]
        self.metadata = json.loads(raw["metadata"])
        self.ptxas_log = raw["ptxas_log"]

    def mlir(self, stage="kernel"):
        """IR of a stage: 'attention' (the input fa.attention), 'host'
        (its gpu.launch_func), 'kernel' (the gpu.module in NVVM) or 'ptx'."""
        if stage not in _STAGES:
            raise ValueError(f"unknown stage {stage!r}; stages: {_STAGES}")
        if stage == "ptx":
            return self.ptx
        if stage == "host":
            return self._raw["host_ir"]
        if stage == "kernel":
            return self._raw["kernel_ir"]
        o = self.options
        t = f"memref<?x?x?x{o['head_dim']}x{o['dtype']}>"
        attrs = (["causal"] if o["causal"] else []) + \
            ([f"window = {o['window']} : i64"] if o["window"] else []) + \
            (["bottom_right"] if o["bottom_right"] else []) + \
            ([f"diagonal_offset = {o['diagonal_offset']} : i64"]
             if o.get("diagonal_offset") else []) + \
            ([f"softcap = {_f32_text(o['softcap'])} : f32"]
             if o["softcap"] else []) + \
            ([f"kv_splits = {2 if o['kv_splits'] < 0 else o['kv_splits']}"
              " : i64"] if o.get("kv_splits") else [])
        attr = f" {{{', '.join(attrs)}}}" if attrs else ""
        return (f"fa.attention %q, %k, %v outs(%o, %lse : {t}, "
                f"memref<?x?x?xf32>){attr} : {t}, {t}, {t}")

    def runtime_kernel(self):
        """A flashmlir.runtime.Kernel to launch on torch tensors."""
        from .runtime import Kernel
        return Kernel(self.cubin, self.metadata)

    def __repr__(self):
        return f"CompiledKernel({self.name}, {self.options})"


# The disk cache. An entry is one file, <key>.fmc:
#   _MAGIC, an 8-byte big-endian header length, the header (JSON: format,
#   kind, key, the fields' names, types and lengths, the payload's length
#   and sha256), the payload (the fields, concatenated, zlib level 1: the
#   kernel IR is ~2 MB of text and compresses ten times in ~15 ms).
# The key is the sha256 of the kind, the options (and a module's text) and
# compiler_id(). The header repeats the key and the payload's hash, so a
# truncated, corrupt or misplaced file is detected, removed and compiled
# again, never returned. Files are written aside and renamed into place
# (os.replace), so concurrent processes see a whole entry or none.
_FORMAT = 1
_MAGIC = b"flashmlir-compile-cache\n"
_SUFFIX = ".fmc"
_MEMORY_ENTRIES = 64
_FIELDS = {"kernel": ("name", "ptx", "cubin", "metadata", "kernel_ir",
                      "host_ir", "ptxas_log"),
           "module": ("ptx", "cubin", "kernel_ir", "host_ir", "ptxas_log",
                      "launches")}

CacheInfo = collections.namedtuple(
    "CacheInfo", "hits misses maxsize currsize disk_hits disk_writes "
    "disk_rejected compiles directory")
CacheInfo.__doc__ = """The caches of compile() and compile_module() in this
process: hits / misses / maxsize / currsize of the in-process cache (as
functools.lru_cache reports them); disk_hits: misses loaded from the disk
cache; disk_writes: entries written; disk_rejected: entries found corrupt,
truncated or for another key, removed and compiled again; compiles: misses
that ran the compiler; directory: the disk cache's (None: off)."""

_lock = threading.Lock()
_memory = collections.OrderedDict()
_stats = collections.Counter()
_warned_dirs = set()


def cache_dir():
    """The disk cache's directory: $FLASHMLIR_CACHE_DIR when set (empty: no
    disk cache, None is returned), else $XDG_CACHE_HOME/flashmlir, else
    ~/.cache/flashmlir. Read on every compile, so setting the variable in a
    running process takes effect at once."""
    env = os.environ.get("FLASHMLIR_CACHE_DIR")
    if env is not None:
        return os.path.abspath(os.path.expanduser(env)) if env else None
    base = os.environ.get("XDG_CACHE_HOME", "")
    # The XDG spec: a relative path in the variable is to be ignored.
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "flashmlir")


def _file_identity(path):
    st = os.stat(path)
    return f"{os.path.realpath(path)} {st.st_size} {st.st_mtime_ns}"


@functools.lru_cache(maxsize=None)
def _extension_identity():
    """The loaded extension's content hash and the MLIR/LLVM shared
    libraries it runs on (path, size, mtime): what the kernels depend on in
    this process, fixed once the extension is loaded."""
    ext = _extension()
    h = hashlib.sha256()
    with open(ext.__file__, "rb") as f:
        h.update(f.read())
    parts = [f"extension sha256 {h.hexdigest()}"]
    # Debian links libMLIR.so / libLLVM.so dynamically: an LLVM update
    # changes the code generator without touching the extension.
    libs = set()
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split(None, 5)[-1].strip()
                name = os.path.basename(path)
                if name.startswith(("libMLIR", "libLLVM")) and ".so" in name:
                    libs.add(path)
    except OSError:
        pass
    for lib in sorted(libs):
        try:
            parts.append("library " + _file_identity(lib))
        except OSError:
            parts.append("library " + lib)
    return "\n".join(parts)


def _ptxas_identity():
    """The ptxas the extension runs for cubins, found as
    lib/Target/Compile.cpp's findPtxas finds it ($CUDA_HOME/bin, then
    /usr/local/cuda/bin, then PATH), by path, size and mtime."""
    candidates = []
    if os.environ.get("CUDA_HOME"):
        candidates.append(os.path.join(os.environ["CUDA_HOME"], "bin",
                                       "ptxas"))
    candidates.append("/usr/local/cuda/bin/ptxas")
    candidates += [os.path.join(d, "ptxas") for d in
                   os.environ.get("PATH", "").split(os.pathsep) if d]
    for c in candidates:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            try:
                return "ptxas " + _file_identity(c)
            except OSError:
                continue
    return "ptxas none"


def compiler_id():
    """A hex digest that changes when the compiler changes: the extension's
    contents, the MLIR/LLVM libraries it has loaded, the ptxas it runs, and
    the cache's format. Part of every disk cache key."""
    text = f"format {_FORMAT}\n{_extension_identity()}\n{_ptxas_identity()}"
    return hashlib.sha256(text.encode()).hexdigest()


def _cache_key(kind, options):
    text = json.dumps({"kind": kind, "options": options,
                       "compiler": compiler_id()}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _encode(kind, key, raw):
    fields, chunks = [], []
    for name in _FIELDS[kind]:
        value = raw[name]
        if isinstance(value, bytes):
            kind_of, data = "bytes", value
        elif isinstance(value, str):
            kind_of, data = "str", value.encode()
        else:
            kind_of, data = "json", json.dumps(value).encode()
        fields.append([name, kind_of, len(data)])
        chunks.append(data)
    payload = zlib.compress(b"".join(chunks), 1)
    header = json.dumps({"format": _FORMAT, "kind": kind, "key": key,
                         "fields": fields, "payload_bytes": len(payload),
                         "payload_sha256": hashlib.sha256(payload)
                         .hexdigest()}).encode()
    return _MAGIC + struct.pack(">Q", len(header)) + header + payload


def _decode(kind, key, data):
    """The raw result in `data`; ValueError when it is not a whole entry of
    this key."""
    start = len(_MAGIC) + 8
    if len(data) < start or not data.startswith(_MAGIC):
        raise ValueError("not a flashmlir cache entry")
    (size,) = struct.unpack(">Q", data[len(_MAGIC):start])
    header = json.loads(data[start:start + size])
    payload = data[start + size:]
    if (not isinstance(header, dict) or header.get("format") != _FORMAT
            or header.get("kind") != kind or header.get("key") != key):
        raise ValueError("an entry of another format, kind or key")
    if (header.get("payload_bytes") != len(payload)
            or header.get("payload_sha256")
            != hashlib.sha256(payload).hexdigest()):
        raise ValueError("a truncated or corrupt payload")
    blob = zlib.decompress(payload)
    fields = header["fields"]
    if ([f[0] for f in fields] != list(_FIELDS[kind])
            or not all(type(f[2]) is int and f[2] >= 0 for f in fields)
            or sum(f[2] for f in fields) != len(blob)):
        raise ValueError("the fields do not match the payload")
    raw, at = {}, 0
    for name, kind_of, length in fields:
        chunk = blob[at:at + length]
        at += length
        if kind_of == "bytes":
            raw[name] = chunk
        elif kind_of == "str":
            raw[name] = chunk.decode()
        elif kind_of == "json":
            raw[name] = json.loads(chunk)
        else:
            raise ValueError(f"unknown field type {kind_of!r}")
    return raw


def _remove(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def _disk_load(directory, kind, key):
    path = os.path.join(directory, key + _SUFFIX)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None  # absent or unreadable: a miss
    try:
        return _decode(kind, key, data)
    except (ValueError, KeyError, TypeError, IndexError, struct.error,
            zlib.error, RecursionError):
        # json.JSONDecodeError and UnicodeDecodeError are ValueErrors.
        with _lock:
            _stats["disk_rejected"] += 1
        _remove(path)
        return None


def _disk_store(directory, kind, key, raw):
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=key + _SUFFIX + ".",
                                   suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(_encode(kind, key, raw))
            os.replace(tmp, os.path.join(directory, key + _SUFFIX))
        except BaseException:
            _remove(tmp)
            raise
    except OSError as e:
        # A read-only or full disk costs the next process a compile, not
        # this one its kernel.
        if directory not in _warned_dirs:
            _warned_dirs.add(directory)
            warnings.warn(f"flashmlir: cannot write the compile cache in "
                          f"{directory} ({e}); set FLASHMLIR_CACHE_DIR='' to "
                          f"turn it off", RuntimeWarning, stacklevel=4)
        return
    with _lock:
        _stats["disk_writes"] += 1


def _cached(kind, options, build, directory):
    """The raw result for `options`: from this process's cache, else the
    disk cache in `directory` (None: none), else `build()`."""
    memo = (kind, json.dumps(options, sort_keys=True))
    with _lock:
        if memo in _memory:
            _memory.move_to_end(memo)
            _stats["hits"] += 1
            return _memory[memo]
        _stats["misses"] += 1
    raw = None
    if directory:
        key = _cache_key(kind, options)
        raw = _disk_load(directory, kind, key)
        if raw is not None:
            with _lock:
                _stats["disk_hits"] += 1
    if raw is None:
        raw = build()
        with _lock:
            _stats["compiles"] += 1
        if directory:
            _disk_store(directory, kind, key, raw)
    with _lock:
        _memory[memo] = raw
        while len(_memory) > _MEMORY_ENTRIES:
            _memory.popitem(last=False)
    return raw


def _directory(argument):
    if argument is None:
        return cache_dir()
    if not isinstance(argument, (str, os.PathLike)):
        raise CompileError(f"cache_dir must be None, '' or a directory, got "
                           f"{argument!r}")
    return os.path.abspath(os.path.expanduser(argument)) if argument \
        else None


def cache_info():
    """The caches' counters in this process (a CacheInfo)."""
    with _lock:
        return CacheInfo(hits=_stats["hits"], misses=_stats["misses"],
                         maxsize=_MEMORY_ENTRIES, currsize=len(_memory),
                         disk_hits=_stats["disk_hits"],
                         disk_writes=_stats["disk_writes"],
                         disk_rejected=_stats["disk_rejected"],
                         compiles=_stats["compiles"], directory=cache_dir())


def clear_cache(memory=True, disk=True, directory=None):
    """Empties this process's cache and the disk cache (`directory`, default
    cache_dir()): every entry of any compiler version, and temporary files
    a killed writer left. Other files in the directory are kept. Returns the
    number of files removed."""
    if memory:
        with _lock:
            _memory.clear()
    directory = _directory(directory) if disk else None
    removed = 0
    if directory and os.path.isdir(directory):
        for name in os.listdir(directory):
            if name.endswith(_SUFFIX) or (_SUFFIX + "." in name
                                          and name.endswith(".tmp")):
                try:
                    os.unlink(os.path.join(directory, name))
                    removed += 1
                except FileNotFoundError:
                    pass
    return removed


# run_cpu's and compile_module's own keywords that are not tensors (compile()'s
# are the compiler's option table, checked there): their types, checked
# strictly at one place (_checked_options) before anything is cached or
# compiled, so that no value is read by its truth ('False' is a non-empty
# string), truncated (128.9) or parsed ('128'). Ranges are the compiler's.
_BOOL = "True or False"
_INT = "an integer"
_NUMBER = "a number"
_STR = "a string"


def _is_bool(x):
    return isinstance(x, bool) or type(x).__name__ == "bool_"


def _is_int(x):
    import numbers
    return isinstance(x, numbers.Integral) and not _is_bool(x)


def _is_number(x):
    import numbers
    return isinstance(x, numbers.Real) and not _is_bool(x)


_KINDS = {_BOOL: (_is_bool, bool), _INT: (_is_int, int),
          _NUMBER: (_is_number, float), _STR: (lambda x: isinstance(x, str),
                                               str)}


# name: (kind, None allowed).
_OPTIONS = {
    "causal": (_BOOL, False),
    "incoherent": (_BOOL, False),
    "raise_attention": (_BOOL, False),
    "dtype": (_STR, False),
    "loop_order": (_STR, False),
    "fp8": (_STR, True),
    "block_r": (_INT, False),
    "block_c": (_INT, False),
    "sram_budget": (_INT, False),
    "hadamard_seed": (_INT, False),
    "scale": (_NUMBER, True),
    "probs_scale": (_NUMBER, False),
}


def _checked_options(**given):
    """`given` keywords, each of its _OPTIONS type (a numpy scalar taken as
    the Python one), or CompileError naming the keyword."""
    out = {}
    for name, value in given.items():
        kind, nullable = _OPTIONS[name]
        if value is None and nullable:
            out[name] = None
            continue
        accepts, convert = _KINDS[kind]
        if not accepts(value):
            raise CompileError(f"{name} must be {kind}"
                               f"{' or None' if nullable else ''}, got "
                               f"{value!r}")
        out[name] = convert(value)
    return out


def kernel_options():
    """The kernel options compile() takes, from the compiler's table
    (fa/Target/KernelOptions.def): {keyword: (kind, form, default)}, kind
    'bool', 'int', 'real' or 'text'; form 'plain' (the value as it is),
    'none_is_default' (None: the default), 'chunk_count' (None, 'auto' or N),
    'none_or_bool' (None: the back end's choice) or 'choice' (one of a
    typed choice's names: row_sum_mma on/off/auto, epilogue
    tma/direct/auto); default as the compiler holds it (a choice by its
    name)."""
    return {keyword: (kind, form, default) for keyword, _, kind, form,
            default in _option_rows()}


def kernel_option_flags():
    """fa-compile's flag of each compile() keyword: {keyword: flag}."""
    return {keyword: flag for keyword, flag, *_ in _option_rows()}


_OPTION_ROWS = None


def _option_rows():
    """The extension's option table, read once (it cannot change in a
    process): (keyword, flag, kind, form, default) rows."""
    global _OPTION_ROWS
    if _OPTION_ROWS is None:
        _OPTION_ROWS = tuple(_extension().kernel_options())
    return _OPTION_ROWS


def _keyword_value(kind, form, value):
    """A keyword's value as a cache key holds it: Python's own scalar for a
    numpy one; a chunk count's None and 'auto' as 0 and -1 (the compiler's
    field)."""
    if form == "chunk_count":
        return 0 if value is None else -1 if value == "auto" else int(value)
    if value is None:
        return None
    if form == "none_or_bool":
        return bool(value)
    return {"bool": bool, "int": int, "real": float, "text": str}[kind](value)


def compile(head_dim, *, cache_dir=None, **options):
    """Compiles an attention kernel; cached on the options, in the process
    and on disk (cache_dir: None for the default, see cache_dir(); "" for
    no disk cache; else a directory).

    arch: "sm_80", "sm_90a" (FlashAttention-3: TMA, wgmma, warp roles) or
    "sm_100a" (Blackwell tcgen05 kernel: compile-verified only, no GPU of
    that kind has run it). window / softcap: sliding-window mask |i - j| <
    window and scores c * tanh(s / c). bottom_right: those masks aligned to
    the last key (query i at key position i + Nk - Nq, as with a KV cache
    or flash-attention's causal=True when Nq != Nk). diagonal_offset: those
    masks' diagonal moved that many keys right (flash-attention's
    window_size = (left, right) is causal, window = left + right + 1,
    diagonal_offset = right). block_r / block_c: tile overrides
    (0: the back end's measured default). rescale_threshold (None: measured
    default, < 0 off) and poly_exp2_degree / poly_exp2_period (None: the
    target's default) are FlashAttention-4's tricks. stages, ping_pong,
    intra_overlap, persistent: the sm_90a/sm_100a schedule knobs
    (persistent=None: the back end's measured choice);
    sm90_kernel="mma-sync" builds the sm_80 kernel for sm_90a.
    kv_splits: a split-KV (flash-decoding) kernel on sm_90a, for decode:
    each CTA attends its query block to one chunk of the keys and the last
    chunk merges; None: no split; "auto": the launch picks the chunk count
    (runtime.auto_kv_splits); N >= 2: the launch default.
    kv_lengths / page_size: a KV cache on sm_90a (flash-attn's
    flash_attn_with_kvcache): the kernel takes per-sequence key counts
    cache_seqlens [B] (int32), and with page_size (a multiple of 16) reads
    K and V from a paged cache [pages, Hkv, page_size, D] through a block
    table [B, max_pages] (int32). varlen: a varlen batch on sm_90a
    (flash-attn's flash_attn_varlen_func): the sequences packed along N,
    described by cu_seqlens_q and cu_seqlens_k [B + 1] (int32).
    dtype="e4m3" (sm_90a, head_dim 128): FlashAttention-3's FP8 kernel;
    its launch takes e4m3 q, k, v (torch.float8_e4m3fn or uint8 codes) and
    their per-tensor descales, and writes O in out_dtype ("bf16" by
    default, or "f16"). value_head_dim (None: head_dim): V's and O's head
    dim; on sm_90a also a multiple of 32 below head_dim (Q/K 192 with V
    128, DeepSeek's). query_group = G (sm_90a wgmma; a power of two
    dividing the tile's rows): pack-GQA beyond one query -- the kernel
    takes Q, O and the LSE packed [B, Hkv, Nq G, D], row r query r / G of
    query head h G + r mod G (flashmlir.flash_attn_with_kvcache packs).
    kv_dtype="e4m3" (sm_90a wgmma, beside an f16/bf16 dtype): an e4m3 KV
    cache, widened on chip; the launch takes K's and V's descales
    (flashmlir.flash_attn_with_kvcache's k_descale / v_descale).

    The keywords are the kernel options of fa/Target/KernelOptions.def
    (kernel_options() lists them with their defaults), the same table
    fa-compile's flags come from; the others there: scale (None: 1/sqrt(D)),
    lse (False: O only), ctas_per_sm, q_in_registers, row_sum_mma,
    epilogue and ptxas, as fa-compile's --help describes them. Each is taken
    at its type: a bool is True or False (not 'False', which is truthy), an
    integer is not a float (128.9) or a string ('128'); an unknown keyword
    or anything else is a CompileError naming the keyword.
    """
    options["head_dim"] = head_dim
    extension = _extension()
    # The compiler checks every keyword (unknown, its type, its range) before
    # anything is keyed or cached.
    extension.check_options(options)
    table = kernel_options()
    # Every option in the key and in CompiledKernel.options, given or not.
    key = {}
    for keyword, (kind, form, default) in table.items():
        if keyword in options:
            key[keyword] = _keyword_value(kind, form, options[keyword])
        elif form in ("plain", "choice"):
            key[keyword] = default
        else:
            key[keyword] = _keyword_value(kind, form, None)
    raw = _cached("kernel", key,
                  lambda: extension.compile(key),
                  _directory(cache_dir))
    return CompiledKernel(raw, key)


class CompiledModule:
    """A caller's module compiled for a GPU: one binary (PTX, cubin) and one
    launch per fa.attention, in program order, each with its kernel's name
    and launch metadata (its own scale, mask, head dim, LSE)."""

    def __init__(self, raw):
        self.ptx = raw["ptx"]
        self.cubin = raw["cubin"]
        self.kernel_ir = raw["kernel_ir"]
        self.host_ir = raw["host_ir"]
        self.ptxas_log = raw["ptxas_log"]
        self.launches = [(e["name"], json.loads(e["metadata"]))
                         for e in raw["launches"]]

    def kernel(self, index=0):
        """The runtime Kernel of launch `index` (needs torch and a GPU)."""
        from .runtime import Kernel
        return Kernel(self.cubin, self.launches[index][1])


def compile_module(text, arch="sm_90a", rescale_threshold=None,
                   poly_exp2_degree=None, poly_exp2_period=8,
                   cache_dir=None, raise_attention=False):
    """Compiles a user's MLIR module (fa.attention ops in func.funcs) for
    `arch`; every attention becomes a launch. With raise_attention, the
    attention a front end spelled in linalg is raised first
    (fa-raise-attention, as fa-compile-module --raise: torch-mlir's and
    others' forms; a candidate it cannot raise is a CompileError naming the
    first check that failed). Diagnostics are raised as CompileError.
    Cached as compile() is, keyed on the module's text (byte for byte) and
    the options."""
    if not isinstance(text, str):
        raise CompileError(f"the module must be MLIR text (a str), got "
                           f"{type(text).__name__}")
    o = _checked_options(raise_attention=raise_attention)
    given = dict(arch=arch, rescale_threshold=rescale_threshold,
                 poly_exp2_degree=poly_exp2_degree,
                 poly_exp2_period=poly_exp2_period)
    extension = _extension()
    extension.check_options(given)
    table = kernel_options()
    module_options = {k: _keyword_value(*table[k][:2], v)
                      for k, v in given.items()}
    options = dict(module_options, text=text,
                   raise_attention=o["raise_attention"])
    raw = _cached("module", options,
                  lambda: extension.compile_module(
                      text, module_options,
                      raise_attention=o["raise_attention"]),
                  _directory(cache_dir))
    return CompiledModule(raw)


def run_cpu(q, k, v, causal=False, scale=None, loop_order="fa2", block_r=0,
            block_c=0, dtype="f32", q_descale=None, k_descale=None,
            v_descale=None, fp8=None, incoherent=False, hadamard_seed=0,
            probs_scale=256.0, sram_budget=0, sinks=None):
    """Runs attention on the host: fa.attention on [B, H, N, D] arrays
    lowered by fa-cpu-pipeline and JIT-compiled; returns (O, LSE) as float32
    arrays. For checking and for machines without a GPU.

    dtype="f32": q, k, v are float32 (converted if not).
    dtype="e4m3": q, k, v hold e4m3 codes (uint8, or any 1-byte dtype such
    as ml_dtypes.float8_e4m3fn, read as its bits; see to_e4m3 and
    quantize_e4m3) and q_descale, k_descale, v_descale (floats, finite and
    positive) are their per-tensor descale factors:
    S = scale * q_descale * k_descale * Q K^T, O = v_descale * softmax(S) V.
    fp8="tensor" | "block" (float32 inputs): run the attention in e4m3, its
    inputs quantised by the compiler (fa-quantize-fp8, and per tile with
    "block": fa-block-quantize); incoherent=True adds
    fa-incoherent-processing (a random Hadamard transform of Q and K, seed
    hadamard_seed). probs_scale: for e4m3 attentions, P is multiplied by
    this power of two and rounded to e4m3 for P V as an fp8 kernel does
    (fa-quantize-probs); 0 keeps P in f32. sram_budget: fa-tile's on-chip
    budget in bytes (0: the default, 160 KiB), which bounds block_r and
    block_c. sinks: attention sinks (gpt-oss), one float32 logit per query
    head, each finite or -inf (none): head h's logit joins every row's
    softmax denominator, LSE = log(exp(s_h) + sum_j exp(S_ij))."""
    import numpy as np
    o = _checked_options(causal=causal, scale=scale, loop_order=loop_order,
                         block_r=block_r, block_c=block_c, dtype=dtype,
                         fp8=fp8, incoherent=incoherent,
                         hadamard_seed=hadamard_seed, probs_scale=probs_scale,
                         sram_budget=sram_budget)
    if o["dtype"] == "e4m3":
        q, k, v = (np.ascontiguousarray(x).view(np.uint8)
                   if np.asarray(x).dtype.itemsize == 1 else x
                   for x in (q, k, v))
    return _extension().run_cpu(
        q, k, v, q_descale=q_descale, k_descale=k_descale,
        v_descale=v_descale, sinks=sinks, **o)


def to_e4m3(x):
    """The e4m3 codes (uint8) of x, rounded to nearest even, saturating at
    +-448: the codec the compiled CPU code uses."""
    return _extension().to_e4m3(x)


def from_e4m3(codes):
    """The float32 values of e4m3 codes (exact)."""
    return _extension().from_e4m3(codes)


def quantize_e4m3(x):
    """Per-tensor quantisation as fa.quantize does it: (codes, descale) with
    descale = amax / 448 (1 for an all-zero x) and codes = e4m3(x / descale),
    so from_e4m3(codes) * descale approximates x."""
    codes, descale = _extension().quantize_e4m3(x)
    return codes, descale


def predicted_bytes(metadata, batch, query_heads, kv_heads, query_len,
                    key_len, kv_splits=None, kv_lengths=None,
                    cu_seqlens_q=None, cu_seqlens_k=None):
    """(L2 -> SM read bytes, SM -> L2 write bytes) that the kernel of
    `metadata` (a CompiledKernel's .metadata or a fa-compile .json, loaded)
    moves for this shape: the counting rule of fagpu-io-report and of the C
    runtime's faMetadataPredictedBytes, checked against ncu on the H200.
    kv_splits: a split-KV kernel's chunk count for the launch (None: the
    metadata's default, which "auto" kernels lack).

    Kernels whose sequences have lengths of their own count each sequence
    on its own (faMetadataPredictedSequenceBytes): a KV cache's kernel with
    kv_lengths (B ints; a paged kernel without them: key_len, the
    capacity, each), a varlen kernel with cu_seqlens_q and cu_seqlens_k
    (B + 1 prefix sums each; batch, query_len and key_len are then
    ignored)."""
    from .runtime import MetadataError, validate_metadata
    m = metadata
    try:
        # The one metadata rule (the C runtime's check where it is found):
        # every field read below is there and of its type and range.
        validate_metadata(m)
    except MetadataError as e:
        raise ValueError(f"predicted_bytes: {e}") from None
    if "block_c" not in m or "arch" not in m:
        raise ValueError("predicted_bytes: the metadata has no 'block_c' or "
                         "'arch' (compiled before the prediction existed)")
    splits = 0
    if m.get("split_kv"):
        splits = m.get("kv_splits", 0) if kv_splits is None else kv_splits
        if not splits:
            raise ValueError("predicted_bytes: a split-KV kernel whose chunk "
                             "count is chosen per launch: give kv_splits")
    elif kv_splits not in (None, 0):
        raise ValueError("predicted_bytes: kv_splits for a kernel that does "
                         "not split")
    sequences = []
    if m.get("varlen"):
        if cu_seqlens_q is None or cu_seqlens_k is None:
            raise ValueError("predicted_bytes: a varlen kernel's traffic "
                             "needs cu_seqlens_q and cu_seqlens_k")
        cq, ck = [int(x) for x in cu_seqlens_q], [int(x) for x in cu_seqlens_k]
        if len(cq) != len(ck) or len(cq) < 2:
            raise ValueError("predicted_bytes: cu_seqlens_q and cu_seqlens_k "
                             "must be B + 1 prefix sums each")
        sequences = [(cq[i + 1] - cq[i], ck[i + 1] - ck[i])
                     for i in range(len(cq) - 1)]
        # The uniform shape is unused: any valid one.
        batch, query_len, key_len = 1, 1, 1
    elif m.get("kv_lengths") or m.get("page_size"):
        if kv_lengths is None and m.get("kv_lengths"):
            raise ValueError("predicted_bytes: a KV-cache kernel with "
                             "kv_lengths needs them (B ints)")
        lengths = [key_len] * batch if kv_lengths is None else \
            [int(x) for x in kv_lengths]
        if len(lengths) != batch:
            raise ValueError(f"predicted_bytes: kv_lengths must have B = "
                             f"{batch} entries, got {len(lengths)}")
        sequences = [(query_len, n) for n in lengths]
    elif kv_lengths is not None or cu_seqlens_q is not None or \
            cu_seqlens_k is not None:
        raise ValueError("predicted_bytes: kv_lengths and cu_seqlens are for "
                         "KV-cache and varlen kernels")
    return tuple(_extension().predicted_bytes(
        # Q/K/V bytes: 1 for e4m3 (O is 16-bit either way).
        m["block_r"], m["block_c"], m["head_dim"],
        1 if m.get("dtype") == "e4m3" else 2, bool(m["causal"]),
        bool(m.get("bottom_right", False)), int(m.get("window", 0)),
        int(m.get("diagonal_offset", 0)),
        int(m.get("tma_box_cols", 0)) > 0,
        m.get("tile_scheduler") == "dynamic", bool(m.get("writes_lse", True)),
        batch, query_heads, kv_heads, query_len, key_len, splits,
        m.get("value_head_dim", m["head_dim"]), sequences,
        bool(m.get("varlen")), int(m.get("query_group", 0))))
