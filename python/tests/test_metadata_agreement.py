"""One metadata validation: the pure-Python checks of flashmlir.runtime (what
validate_metadata runs where libFARuntime.so is absent) refuse every
mutation of real fa-compile metadata that the C runtime's
faKernelMetadataCheck refuses, always as MetadataError; where the library
is found, validate_metadata runs the C check first and raises its message.

The corpus: a few hundred mutations (types, ranges, missing and extra
fields, parameter lists, tensor-map keys, the e4m3 value layout, and JSON
text the two readers parse differently) of seven kernels' metadata,
compiled here by fa-compile --no-cubin. The cases where the C check accepts
what Python refuses are listed in PYTHON_STRICTER (for the C side to
tighten); when the C check starts refusing one, the test says so."""
import copy
import ctypes
import json
import sys

import pytest

from conftest import ELF_HEADER, ROOT, compile_metadata

sys.path.insert(0, str(ROOT / "python"))
from flashmlir import runtime  # noqa: E402
from flashmlir.runtime import MetadataError  # noqa: E402

# fa-compile flags of each base kernel (all D = 128).
BASES = {
    "base": ["--arch", "sm_90a"],                          # persistent, static
    "dynamic": ["--arch", "sm_90a", "--causal"],           # dynamic scheduler
    "paged": ["--arch", "sm_90a", "--kv-lengths", "--page-size", "64"],
    "varlen": ["--arch", "sm_90a", "--varlen"],
    "split": ["--arch", "sm_90a", "--split-kv", "auto"],
    "e4m3": ["--arch", "sm_90a", "--dtype", "e4m3"],
    "sm80": ["--arch", "sm_80"],
}


def _shared_runtime(build_dir):
    """The build's libFARuntime.so; the test is skipped where the build has
    none (the sanitizer build links FARuntime statically: these tests run in
    scripts/test.sh's build)."""
    shared = build_dir / "lib" / "libFARuntime.so"
    if not shared.exists():
        pytest.skip("no shared libFARuntime in this (sanitizer) build")
    return str(shared)


@pytest.fixture(scope="module")
def c_check(build_dir):
    """faKernelMetadataCheck of the build's libFARuntime.so: JSON text ->
    None (accepted) or its message."""
    shared = _shared_runtime(build_dir)
    lib = ctypes.CDLL(str(shared))
    lib.faKernelMetadataCheck.argtypes = [ctypes.c_char_p]
    lib.faKernelMetadataCheck.restype = ctypes.c_int
    lib.faRuntimeLastError.restype = ctypes.c_char_p

    def check(text):
        if lib.faKernelMetadataCheck(text.encode()) == 0:
            return None
        return lib.faRuntimeLastError().decode()
    return check


@pytest.fixture(scope="module")
def bases(tmp_path_factory, build_dir):
    return compile_metadata(build_dir, tmp_path_factory.mktemp("bases"),
                            BASES)


# -- the corpus --------------------------------------------------------------


def _index(m, name):
    return [p["name"] for p in m["params"]].index(name)


def setk(key, value):
    return lambda m: m.__setitem__(key, value)


def delk(key):
    return lambda m: m.pop(key)


def setp(name, key, value):
    return lambda m: m["params"][_index(m, name)].__setitem__(key, value)


def delp(name, key):
    return lambda m: m["params"][_index(m, name)].pop(key)


def setg(key, value):
    return lambda m: m["grid"].__setitem__(key, value)


def setl(key, value):
    return lambda m: m["value_layout"].__setitem__(key, value)


def _all_maps(**fields):
    def edit(m):
        for p in m["params"]:
            if p.get("kind") == "tensormap":
                p.update(fields)
    return edit


# Mutations of any kernel's metadata.
COMMON = [
    ('dtype "f32"', setk("dtype", "f32")),
    ('dtype "f64"', setk("dtype", "f64")),
    ("dtype 16", setk("dtype", 16)),
    ('kernel ""', setk("kernel", "")),
    ("kernel 5", setk("kernel", 5)),
    ('out_dtype "bf16" on f16', setk("out_dtype", "bf16")),
    ("out_dtype 5", setk("out_dtype", 5)),
    ("softcap -1", setk("softcap", -1.0)),
    ('softcap "30"', setk("softcap", "30")),
    ("softcap 1e30", setk("softcap", 1e30)),
    ("softcap NaN", setk("softcap", float("nan"))),
    ("softcap true", setk("softcap", True)),
    ('causal "false"', setk("causal", "false")),
    ("causal 1", setk("causal", 1)),
    ('persistent "false"', setk("persistent", "false")),
    ('tile_grid "true"', setk("tile_grid", "true")),
    ('writes_lse "false"', setk("writes_lse", "false")),
    ('bottom_right "yes"', setk("bottom_right", "yes")),
    ("split_kv 0", setk("split_kv", 0)),
    ('varlen "false"', setk("varlen", "false")),
    ("kv_lengths 0", setk("kv_lengths", 0)),
    ("kv_lengths null", setk("kv_lengths", None)),
    ("missing arch", delk("arch")),
    ("arch 90", setk("arch", 90)),
    ("missing grid", delk("grid")),
    ('grid "x"', setk("grid", "x")),
    # The grid's formulas, which both launchers evaluate.
    ("grid x unbalanced", setg("x", "ceil(Nq / block_r")),
    ("grid x an unknown name", setg("x", "ceil(Nq / block_r) * heads")),
    ("grid x a Python operator", setg("x", "2 ** 3")),
    ("grid x nested 40 deep", setg("x", "(" * 40 + "1" + ")" * 40)),
    ("grid x 2^70", setg("x", str(2**70))),
    ('grid x ""', setg("x", "")),
    ("grid x 0", setg("x", 0)),
    ("grid x -1", setg("x", -1)),
    ("grid y 2^31", setg("y", 2**31)),
    ("grid z 1.5", setg("z", 1.5)),
    ("grid z true", setg("z", True)),
    ("grid z null", setg("z", None)),
    ("grid z missing", lambda m: m["grid"].pop("z")),
    ("grid w 1", setg("w", 1)),
    ("missing causal", delk("causal")),
    ("missing kernel", delk("kernel")),
    ("missing dtype", delk("dtype")),
    ("missing format", delk("format")),
    ('format "flash-mlir-kernel-2"', setk("format", "flash-mlir-kernel-2")),
    ("missing head_dim", delk("head_dim")),
    ("missing block_r", delk("block_r")),
    ("missing shared_memory_bytes", delk("shared_memory_bytes")),
    ("missing block", delk("block")),
    ("missing params", delk("params")),
    ("block_c 0", setk("block_c", 0)),
    ("head_dim 128.0", setk("head_dim", 128.0)),
    ('head_dim "128"', setk("head_dim", "128")),
    ("head_dim true", setk("head_dim", True)),
    ("head_dim 0", setk("head_dim", 0)),
    ("head_dim 2^32 + 128", setk("head_dim", 2**32 + 128)),
    ("head_dim -128", setk("head_dim", -128)),
    ("shared_memory_bytes -1", setk("shared_memory_bytes", -1)),
    ("shared_memory_bytes 1.5", setk("shared_memory_bytes", 1.5)),
    ("shared_memory_bytes 2^31", setk("shared_memory_bytes", 2**31)),
    ("block [null, 1, 1]", setk("block", [None, 1, 1])),
    ('block ["a", 1, 1]', setk("block", ["a", 1, 1])),
    ("block [384.0, 1, 1]", setk("block", [384.0, 1, 1])),
    ("block [384, 1]", setk("block", [384, 1])),
    ("block [384, 1, 1, 1]", setk("block", [384, 1, 1, 1])),
    ("block [[384], 1, 1]", setk("block", [[384], 1, 1])),
    ("block [0, 1, 1]", setk("block", [0, 1, 1])),
    ("block [1024, 2, 1]", setk("block", [1024, 2, 1])),
    ('block "384"', setk("block", "384")),
    ("block_r 0", setk("block_r", 0)),
    ("scale 0", setk("scale", 0)),
    ("scale -0.125", setk("scale", -0.125)),
    ('scale "0.125"', setk("scale", "0.125")),
    ("scale true", setk("scale", True)),
    ("scale inf", setk("scale", float("inf"))),
    ("missing scale", delk("scale")),
    ("window -1", setk("window", -1)),
    ("window 2.5", setk("window", 2.5)),
    ('window "8"', setk("window", "8")),
    ("window 2^32", setk("window", 2**32)),
    ("window 2^30 + 1", setk("window", 2**30 + 1)),
    ("diagonal_offset -1", setk("diagonal_offset", -1)),
    ("diagonal_offset 2^30 + 1", setk("diagonal_offset", 2**30 + 1)),
    ('rescale_threshold "x"', setk("rescale_threshold", "x")),
    ("exp2_poly_period -5", setk("exp2_poly_period", -5)),
    ("ctas_per_sm 0", setk("ctas_per_sm", 0)),
    ("ctas_per_sm 33", setk("ctas_per_sm", 33)),
    ("ctas_per_sm 2.0", setk("ctas_per_sm", 2.0)),
    ("value_head_dim 256 (> head_dim)", setk("value_head_dim", 256)),
    ('value_head_dim "64"', setk("value_head_dim", "64")),
    ("value_head_dim 0", setk("value_head_dim", 0)),
    ("value_layout on an f16 kernel", setk("value_layout", {"kernel": "x"})),
    ('value_layout "x"', setk("value_layout", "x")),
    ("tile_scheduler 7", setk("tile_scheduler", 7)),
    ('tile_scheduler "round robin"', setk("tile_scheduler", "round robin")),
    ("missing tile_scheduler", delk("tile_scheduler")),
    ("tma_box_rows_o 300", setk("tma_box_rows_o", 300)),
    ("tma_box_rows_kv -1", setk("tma_box_rows_kv", -1)),
    ("kv_splits -1", setk("kv_splits", -1)),
    ("kv_splits 2000", setk("kv_splits", 2000)),
    ("kv_splits 4 with split_kv false", setk("kv_splits", 4)),
    ("page_size 2^21", setk("page_size", 2**21)),
    ("page_size 64 (no parameters)", setk("page_size", 64)),
    ('params "x"', setk("params", "x")),
    ('params: extra {"name": "extra"}',
     lambda m: m["params"].append({"name": "extra"})),
    ("params: last dropped", lambda m: m["params"].pop()),
    ('params: a string entry', lambda m: m["params"].append("x")),
    ("params: first two swapped",
     lambda m: m["params"].insert(0, m["params"].pop(1))),
    ('param Nq swizzle "16B"', setp("Nq", "swizzle", "16B")),
    ("param Nq swizzle 128", setp("Nq", "swizzle", 128)),
    ("param Nq box [1, 1]", setp("Nq", "box", [1, 1])),
    ("param Nq l2_promotion 256.0", setp("Nq", "l2_promotion", 256.0)),
    ("param Nq l2_promotion 32", setp("Nq", "l2_promotion", 32)),
    ("param Nq rank 3", setp("Nq", "rank", 3)),
    ("param Nq dtype 2", setp("Nq", "dtype", 2)),
    ("param q name 5", setp("q", "name", 5)),
    ("param q without a name", delp("q", "name")),
    ("param q l2_promotion true", setp("q", "l2_promotion", True)),
    ("param q l2_promotion 64", setp("q", "l2_promotion", 64)),
    ("param q rank 4", setp("q", "rank", 4)),
    ("param q rank 5", setp("q", "rank", 5)),
]

# Mutations of kernels that read tensor maps (sm_90a).
MAPS = [
    ("tma_box_cols 32", setk("tma_box_cols", 32)),
    ("tma_box_cols 0", setk("tma_box_cols", 0)),
    ("tma_box_rows_kv 0", setk("tma_box_rows_kv", 0)),
    ("param q box [64, 0]", setp("q", "box", [64, 0])),
    ("param q box [64]", setp("q", "box", [64])),
    ('param q box "64x128"', setp("q", "box", "64x128")),
    ("param q box missing", delp("q", "box")),
    ("param q box [32, 128] (not the swizzle)", setp("q", "box", [32, 128])),
    ('param q swizzle "64B"', setp("q", "swizzle", "64B")),
    ("param q rank 4.0", setp("q", "rank", 4.0)),
    ("param q rank 3 (others 4)", setp("q", "rank", 3)),
    ('param q kind "pointer"', setp("q", "kind", "pointer")),
    ('param q dtype "e4m3"', setp("q", "dtype", "e4m3")),
    ("all ranks 3, l2_promotion 128", _all_maps(rank=3, l2_promotion=128)),
    ("all ranks removed", lambda m: [p.pop("rank", None)
                                     for p in m["params"]]),
    ("tile_grid false", setk("tile_grid", False)),
    ("tma_box_rows_o 0 (o still a map)", setk("tma_box_rows_o", 0)),
]

PER_BASE = {
    "dynamic": [
        ("persistent false", setk("persistent", False)),
        ("split_kv true", setk("split_kv", True)),
        ('tile_scheduler "static" (counter kept)',
         setk("tile_scheduler", "static")),
    ],
    "sm80": [
        ("rank 4 on pointer param q", setp("q", "rank", 4)),
        ("param q l2_promotion 64 (no maps)", setp("q", "l2_promotion", 64)),
        ("tma_box_rows_o 64 (no maps)", setk("tma_box_rows_o", 64)),
        ("tma_box_cols 64 (no maps)", setk("tma_box_cols", 64)),
        ("split_kv true", setk("split_kv", True)),
        ("page_size 64 (rank-3)", setk("page_size", 64)),
    ],
    "e4m3": [
        ("value_layout block missing", lambda m: m["value_layout"].pop("block")),
        ("value_layout block [128, 2, 1]", setl("block", [128, 2, 1])),
        ("value_layout block [0, 1, 1]", setl("block", [0, 1, 1])),
        ("value_layout params as strings",
         setl("params", ["v", "v_t", "B", "Hkv", "Nk", "v_stride_b",
                         "v_stride_h", "v_stride_n"])),
        ("value_layout params: last dropped",
         lambda m: m["value_layout"]["params"].pop()),
        ("value_layout key_alignment 128.0", setl("key_alignment", 128.0)),
        ("value_layout key_alignment true", setl("key_alignment", True)),
        ("value_layout key_alignment 32", setl("key_alignment", 32)),
        ("value_layout columns_per_thread 8", setl("columns_per_thread", 8)),
        ('value_layout kernel ""', setl("kernel", "")),
        ("value_layout kernel 5", setl("kernel", 5)),
        ("value_layout missing", delk("value_layout")),
        ("value_layout grid missing", lambda m: m["value_layout"].pop("grid")),
        ("value_layout grid x unknown name",
         lambda m: m["value_layout"]["grid"].__setitem__("x", "Nk_16 * B")),
        ('value_layout grid "x"', setl("grid", "x")),
        ("v_t box missing", delp("v_t", "box")),
        ('out_dtype "f32"', setk("out_dtype", "f32")),
        ('out_dtype "e4m3"', setk("out_dtype", "e4m3")),
        ("missing out_dtype", delk("out_dtype")),
        ("split_kv true", setk("split_kv", True)),
        ("kv_lengths true", setk("kv_lengths", True)),
        ("page_size 64", setk("page_size", 64)),
        ("varlen true", setk("varlen", True)),
        ('dtype "f16" (the e4m3 parameters kept)', setk("dtype", "f16")),
    ],
    "paged": [
        ("page_size 64.0", setk("page_size", 64.0)),
        ('page_size "64"', setk("page_size", "64")),
        ("page_size 48", setk("page_size", 48)),
        ("page_size 0 (parameters kept)", setk("page_size", 0)),
        ('kv_lengths "true"', setk("kv_lengths", "true")),
        ("kv_lengths false (parameter kept)", setk("kv_lengths", False)),
        ("ranks 3", _all_maps(rank=3)),
        ("kv_append grid missing", lambda m: m["kv_append"].pop("grid")),
        ("kv_append grid x unknown name",
         lambda m: m["kv_append"]["grid"].__setitem__("x", "Nnew * rows")),
        ("kv_append grid y 0",
         lambda m: m["kv_append"]["grid"].__setitem__("y", 0)),
    ],
    "split": [
        ('split_kv "true"', setk("split_kv", "true")),
        ("split_kv 1", setk("split_kv", 1)),
        ("split_kv false (parameters kept)", setk("split_kv", False)),
        ("kv_splits 1", setk("kv_splits", 1)),
        ("kv_splits 2000", setk("kv_splits", 2000)),
        ("tile_grid false", setk("tile_grid", False)),
    ],
    "varlen": [
        ("varlen 1", setk("varlen", 1)),
        ('varlen "true"', setk("varlen", "true")),
        ("varlen false (parameters kept)", setk("varlen", False)),
        ("o_rows dropped", lambda m: m["params"].pop(_index(m, "o_rows"))),
        ("tma_box_rows_o 0", setk("tma_box_rows_o", 0)),
    ],
}

# JSON text edits (applied to json.dumps of the base): what the two readers
# parse differently. (old, new) replaces the first `old`.
TEXT = [
    ("duplicate causal", ('"causal": false', '"causal": false, "causal": true')),
    ("duplicate box in a parameter",
     ('"box": [64, 128]', '"box": [64, 128], "box": [64, 64]')),
    ("rescale_threshold -inf (what compile(rescale_threshold=-inf) wrote)",
     ('"rescale_threshold": 8', '"rescale_threshold": -inf')),
    ("rescale_threshold NaN", ('"rescale_threshold": 8',
                               '"rescale_threshold": NaN')),
    ("rescale_threshold -Infinity", ('"rescale_threshold": 8',
                                     '"rescale_threshold": -Infinity')),
    ("softcap NaN", ('"softcap": 0', '"softcap": NaN')),
    ("scale Infinity", ('"scale": 0.', '"scale": Infinity, "x": 0.')),
    ("head_dim 0128", ('"head_dim": 128', '"head_dim": 0128')),
    ("an unknown key with a bare word", ('"causal"', '"note": word, "causal"')),
    ("text after the object", ("}", "} x", -1)),
    ("a truncated object", ("}", "", -1)),
]


def _mutations():
    for base in BASES:
        edits = COMMON + (MAPS if base not in ("sm80",) else []) + \
            PER_BASE.get(base, [])
        for desc, edit in edits:
            yield base, desc, edit


# Cases the C check accepts and Python refuses: none since the C reader
# reads strict JSON (duplicate keys in every object, no NaN, leading zeros
# or bare words) and requires what the Python launcher needs (arch, causal,
# grid, a tensor map's box, the tensor maps' kinds). A new one goes here
# with its reason until the C side refuses it too.
PYTHON_STRICTER = {}


def _python_verdict(load):
    """None (accepted) or the message of the pure-Python checks' refusal;
    anything but MetadataError is a failure of the test."""
    try:
        runtime.validate_metadata(load())
    except MetadataError as e:
        return str(e)
    return None


def _verdicts(bases, c_check, monkeypatch):
    """(base, mutation, C verdict, Python verdict) over the corpus, the
    Python checks alone (FLASHMLIR_RUNTIME_LIB set but empty)."""
    monkeypatch.setenv("FLASHMLIR_RUNTIME_LIB", "")
    assert runtime.runtime_library() is None
    rows = []
    for base, desc, edit in _mutations():
        meta = copy.deepcopy(bases[base])
        edit(meta)
        rows.append((base, desc, c_check(json.dumps(meta)),
                     _python_verdict(lambda: meta)))
    text = json.dumps(bases["base"])
    for desc, (old, new, *count) in TEXT:
        if count:
            at = text.rindex(old)
            edited = text[:at] + new + text[at + len(old):]
        else:
            assert old in text, old
            edited = text.replace(old, new, 1)
        rows.append(("base", desc, c_check(edited), _python_verdict(
            lambda: runtime.load_metadata(edited))))
    return rows


def test_the_bases_pass_both(bases, c_check, monkeypatch):
    monkeypatch.setenv("FLASHMLIR_RUNTIME_LIB", "")
    for name, meta in bases.items():
        assert c_check(json.dumps(meta)) is None, name
        runtime.validate_metadata(copy.deepcopy(meta))
        runtime.Kernel(ELF_HEADER, copy.deepcopy(meta))


def test_python_refuses_what_c_refuses(bases, c_check, monkeypatch):
    rows = _verdicts(bases, c_check, monkeypatch)
    refused_by_c = [r for r in rows if r[2] is not None]
    # The corpus exercises the C check broadly (each of its rules).
    assert len(rows) > 300 and len(refused_by_c) > 250
    missed = [(b, d, c) for b, d, c, p in rows if c is not None and p is None]
    assert not missed, "\n".join(f"{b}: {d}: C refuses ({c}), Python "
                                 f"accepts" for b, d, c in missed)


def test_c_accepts_only_the_listed_python_refusals(bases, c_check,
                                                   monkeypatch):
    rows = _verdicts(bases, c_check, monkeypatch)
    stricter = {(b, d) for b, d, c, p in rows if c is None and p is not None}
    unlisted = stricter - set(PYTHON_STRICTER)
    assert not unlisted, f"Python refuses, C accepts, not listed: {unlisted}"
    # A listed case the C check now refuses: take it off the list.
    fixed = set(PYTHON_STRICTER) - stricter
    assert not fixed, f"now refused by the C check too (or not in the " \
                      f"corpus): {fixed}"


def test_validate_metadata_raises_the_c_message(bases, c_check, build_dir,
                                               monkeypatch):
    """With the library found, the C check runs first: every mutation it
    refuses is refused with its message."""
    monkeypatch.setenv("FLASHMLIR_RUNTIME_LIB",
                       str(build_dir / "lib" / "libFARuntime.so"))
    checked = 0
    for base, desc, edit in _mutations():
        meta = copy.deepcopy(bases[base])
        edit(meta)
        want = c_check(json.dumps(meta))
        if want is None:
            continue
        with pytest.raises(MetadataError) as e:
            runtime.validate_metadata(meta)
        assert str(e.value) == want, (base, desc)
        checked += 1
    assert checked > 250


# Random mutations (seeded): values of the fields' kinds put anywhere in the
# metadata, entries removed and keys added, up to three at a time.
_VALUES = [None, True, False, 0, 1, -1, 2, 3, 4, 16, 32, 64, 128, 256, 1024,
           2**31, 2**40, 0.5, 1.0, 128.0, float("nan"), float("inf"), "",
           "x", "f16", "bf16", "e4m3", "f32", "128B", "64B", "32B", "16B",
           "tensormap", "pointer", "static", "dynamic", "grid", [], [1],
           [64, 128], [128, 128], [32, 128], [384, 1, 1], [0, 1, 1], {},
           {"name": "x"}]
_KEYS = ["rank", "box", "swizzle", "l2_promotion", "kind", "dtype", "name",
         "tma_box_rows_o", "value_layout", "page_size", "kv_splits",
         "softcap", "scale", "varlen", "split_kv"]
# What the Python checks refuse beyond the C check (PYTHON_STRICTER's
# kinds).
_STRICTER = (r"metadata lacks '(arch|grid|causal)'|metadata 'grid' must be "
             r"an object|'box' must be two integers in \[1, 256\], got None|"
             r"'kind' must be a string|the parameters of kind 'tensormap' "
             r"are")


def _paths(o, prefix=()):
    yield prefix
    items = o.items() if isinstance(o, dict) else \
        enumerate(o) if isinstance(o, list) else ()
    for key, value in items:
        yield from _paths(value, prefix + (key,))


def _mutate(rng, meta):
    for _ in range(rng.choice([1, 1, 2, 3])):
        path = rng.choice([p for p in _paths(meta) if p])
        parent = meta
        for key in path[:-1]:
            parent = parent[key]
        value = copy.deepcopy(rng.choice(_VALUES))
        op = rng.random()
        if op < 0.6:
            parent[path[-1]] = value
        elif op < 0.8:
            parent.pop(path[-1])
        elif isinstance(parent, dict):
            parent[rng.choice(_KEYS)] = value
        else:
            parent.insert(rng.randrange(len(parent) + 1), value)


def test_random_mutations_agree(bases, c_check, monkeypatch):
    import random
    import re
    monkeypatch.setenv("FLASHMLIR_RUNTIME_LIB", "")
    rng = random.Random(20261205)
    refused = 0
    for _ in range(3000):
        meta = copy.deepcopy(bases[rng.choice(sorted(bases))])
        _mutate(rng, meta)
        text = json.dumps(meta)
        c = c_check(text)
        python = _python_verdict(lambda: meta)
        if c is not None:
            refused += 1
            assert python is not None, f"C refuses ({c}), Python accepts " \
                                       f"{text}"
        elif python is not None:
            assert re.search(_STRICTER, python), (python, text)
    assert refused > 1500


# -- finding the library -----------------------------------------------------


def test_runtime_library_lookup(build_dir, monkeypatch, tmp_path):
    shared = build_dir / "lib" / "libFARuntime.so"
    if not shared.exists():
        pytest.skip("no shared libFARuntime in this (sanitizer) build")
    monkeypatch.delenv("FLASHMLIR_RUNTIME_LIB", raising=False)
    monkeypatch.delenv("FLASHMLIR_BUILD_DIR", raising=False)
    monkeypatch.setenv("FA_BUILD_DIR", str(build_dir))
    lib = runtime.runtime_library()
    assert lib is not None and lib._name == str(shared)
    # FLASHMLIR_BUILD_DIR as well (a build tree without the library is
    # passed over).
    monkeypatch.setenv("FA_BUILD_DIR", str(tmp_path))
    monkeypatch.setenv("FLASHMLIR_BUILD_DIR", str(build_dir))
    assert runtime.runtime_library()._name == str(shared)
    # Explicitly: the named library, or an error naming the variable.
    monkeypatch.setenv("FLASHMLIR_RUNTIME_LIB", str(shared))
    assert runtime.runtime_library()._name == str(shared)
    monkeypatch.setenv("FLASHMLIR_RUNTIME_LIB", str(tmp_path / "none.so"))
    with pytest.raises(MetadataError, match="FLASHMLIR_RUNTIME_LIB"):
        runtime.runtime_library()
    # Set but empty: the pure-Python checks alone.
    monkeypatch.setenv("FLASHMLIR_RUNTIME_LIB", "")
    assert runtime.runtime_library() is None
    assert runtime.c_check_metadata({"format": "x"}) is False


def test_c_check_refuses_what_is_not_json(build_dir, monkeypatch):
    monkeypatch.setenv("FLASHMLIR_RUNTIME_LIB", _shared_runtime(build_dir))
    for meta in ({"format": b"bytes"}, {"format": {1, 2}}):
        with pytest.raises(MetadataError, match="not JSON data"):
            runtime.validate_metadata(meta)
    with pytest.raises(MetadataError, match="JSON object"):
        runtime.validate_metadata(["not", "a", "dict"])


# -- Kernel.load and the cubin -------------------------------------------------


def _write(tmp_path, text, cubin=ELF_HEADER):
    (tmp_path / "k.json").write_text(text)
    (tmp_path / "k.cubin").write_bytes(cubin)
    return str(tmp_path / "k")


@pytest.mark.parametrize("check", ["c", "python"])
def test_load_refuses_duplicate_keys(bases, tmp_path, monkeypatch, build_dir,
                                     check):
    """json's default keeps the last of two equal keys: a file saying
    causal false and then true would load a causal kernel."""
    monkeypatch.setenv("FLASHMLIR_RUNTIME_LIB", "" if check == "python" else
                       _shared_runtime(build_dir))
    text = json.dumps(bases["base"])
    assert runtime.Kernel.load(_write(tmp_path, text)).meta["causal"] is False
    twice = text.replace('"causal": false', '"causal": false, "causal": true')
    with pytest.raises(MetadataError, match="duplicate key 'causal'"):
        runtime.Kernel.load(_write(tmp_path, twice))
    for constant in ("NaN", "-Infinity"):
        bad = text.replace('"rescale_threshold": 8',
                           f'"rescale_threshold": {constant}')
        with pytest.raises(MetadataError, match="not valid JSON"):
            runtime.Kernel.load(_write(tmp_path, bad))
    (tmp_path / "k.json").write_bytes(b"\xff\xfe{")
    with pytest.raises(MetadataError, match="not valid JSON"):
        runtime.Kernel.load(str(tmp_path / "k"))


def test_cubin_images(bases):
    meta = bases["base"]
    for image, message in [
            (b"", "the cubin is empty"),
            ("abc", "the cubin must be bytes, got str"),
            (None, "the cubin must be bytes, got NoneType"),
            (b"x", "neither an ELF image"),
            (b"\x7fELF", "truncated or not a 64-bit little-endian ELF"),
            (b"\x7fELF" + bytes([1, 1]) + bytes(58),
             "truncated or not a 64-bit little-endian ELF"),
            # Section headers at byte 64, 3 of 64 bytes: past the image.
            (ELF_HEADER[:40] + (64).to_bytes(8, "little") + ELF_HEADER[48:58]
             + (64).to_bytes(2, "little") + (3).to_bytes(2, "little")
             + ELF_HEADER[62:], "header tables lie past its 64 bytes")]:
        with pytest.raises(MetadataError, match=message):
            runtime.Kernel(image, copy.deepcopy(meta))
    # A whole ELF header, as bytes, bytearray or memoryview; PTX text that
    # ends in a NUL within the image.
    for image in (ELF_HEADER, bytearray(ELF_HEADER), memoryview(ELF_HEADER),
                  b".version 8.0\n.target sm_90a\n\0"):
        assert runtime.Kernel(image, copy.deepcopy(meta)).cubin == \
            bytes(image)


def test_json_limits_agree(bases, c_check, build_dir, monkeypatch):
    """Found by tools/fa-fuzz/fuzz_surfaces.py (metadata): 1e999 (JSON's
    grammar, no double: Python read an infinity) and 40 nested arrays were
    refused by one reader and taken by the other. Both refuse both now,
    with and without the C library."""
    base = json.dumps(bases["base"])
    for extra in ("1e999", "[" * 40 + "]" * 40):
        text = base[:-1] + f', "extra": {extra}}}'
        assert c_check(text) is not None, extra
        for lib in ("", str(build_dir / "lib" / "libFARuntime.so")):
            monkeypatch.setenv("FLASHMLIR_RUNTIME_LIB", lib)
            with pytest.raises(MetadataError):
                runtime.validate_metadata(runtime.load_metadata(text))
    # 32 levels inside a field are within both readers' bound.
    text = base[:-1] + ', "extra": ' + "[" * 32 + "]" * 32 + "}"
    assert c_check(text) is None
    monkeypatch.setenv("FLASHMLIR_RUNTIME_LIB", "")
    runtime.validate_metadata(runtime.load_metadata(text))


@pytest.mark.parametrize("group", [3, 256, -1, True])
def test_bad_query_group_is_refused_by_both_readers(bases, c_check, group):
    """The metadata's query_group (pack-GQA beyond one query): 0 or a power
    of two from 2 dividing block_r. The C reader and Python's refuse
    anything else, each with a message naming the field."""
    meta = copy.deepcopy(next(iter(bases.values())))
    meta["query_group"] = group
    c = c_check(json.dumps(meta))
    assert c is not None and "query_group" in c, c
    with pytest.raises(runtime.MetadataError, match="query_group"):
        runtime.validate_metadata(meta)


def test_bad_query_group_is_refused_by_compile(build_dir):
    """compile(query_group=) takes 0 or a power of two in [2, 64], before
    the compiler sees it."""
    sys.path.insert(0, str(ROOT / "python"))
    import flashmlir
    for bad in (3, 128, -2, "4", 4.0):
        with pytest.raises(flashmlir.CompileError, match="query_group"):
            flashmlir.compile(head_dim=128, causal=True, kv_lengths=True,
                              query_group=bad)
