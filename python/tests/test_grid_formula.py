"""The launch grid the lowering writes (fagpu::launchGrid, valueLayoutGrid,
kvAppendGrid: the metadata's "grid" formulas) is what both launchers
launch: flashmlir.grid_formula (Python) and mlir::fa::model::GridFormula
(C, through faMetadataLaunchGrid) evaluate it alike on real fa-compile
metadata over random sizes, and both refuse the same malformed formulas.
The formulas' values are checked against the grid each kernel's builder
assumes, written out here (one CTA per query block, head and batch; a
persistent grid at most SMs * ctas_per_sm of them; split-KV's chunks on y;
the auxiliary kernels' one thread per group of columns)."""
import ctypes
import json
import random
import sys

import pytest

from conftest import ELF_HEADER, ROOT, compile_metadata

sys.path.insert(0, str(ROOT / "python"))
from flashmlir import grid_formula  # noqa: E402
from flashmlir.grid_formula import GridFormulaError  # noqa: E402
from flashmlir.runtime import (Kernel, KernelArgumentError,  # noqa: E402
                               MetadataError, validate_metadata)

KERNELS = {
    "sm80": ["--arch", "sm_80"],
    "persistent": ["--arch", "sm_90a"],
    "causal": ["--arch", "sm_90a", "--causal"],
    "split": ["--arch", "sm_90a", "--split-kv", "auto"],
    "paged": ["--arch", "sm_90a", "--kv-lengths", "--page-size", "64"],
    "e4m3": ["--arch", "sm_90a", "--dtype", "e4m3"],
    "sm100": ["--arch", "sm_100a"],
}


@pytest.fixture(scope="module")
def metas(tmp_path_factory, build_dir):
    return compile_metadata(build_dir, tmp_path_factory.mktemp("grids"),
                            KERNELS)


@pytest.fixture(scope="module")
def c_grid(build_dir):
    """faMetadataLaunchGrid of the build's libFARuntime.so: (metadata,
    which, sizes) -> the grid tuple or the C message."""
    shared = build_dir / "lib" / "libFARuntime.so"
    if not shared.exists():
        pytest.skip("no shared libFARuntime in this (sanitizer) build")
    lib = ctypes.CDLL(str(shared))
    lib.faMetadataLaunchGrid.argtypes = [
        ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p),
        ctypes.POINTER(ctypes.c_longlong), ctypes.c_int,
        ctypes.POINTER(ctypes.c_uint)]
    lib.faMetadataLaunchGrid.restype = ctypes.c_int
    lib.faRuntimeLastError.restype = ctypes.c_char_p

    def grid(meta, which, sizes):
        names = (ctypes.c_char_p * len(sizes))(*[k.encode() for k in sizes])
        values = (ctypes.c_longlong * len(sizes))(*sizes.values())
        out = (ctypes.c_uint * 3)()
        if lib.faMetadataLaunchGrid(json.dumps(meta).encode(), which, names,
                                    values, len(sizes), out):
            return lib.faRuntimeLastError().decode()
        return tuple(out)
    return grid


def ceil_div(a, b):
    return -(-a // b)


def expected_grid(meta, s):
    """The grid the builders assume, by the kernel's kind."""
    tiles = ceil_div(s["Nq"], meta["block_r"])
    if not meta["tile_grid"]:
        return (tiles, s["Hq"], s["B"])
    tiles *= s["Hq"] * s["B"]
    if meta["persistent"]:
        tiles = min(tiles, s["SMs"] * meta["ctas_per_sm"])
    return (tiles, s["kv_splits"] if meta["split_kv"] else 1, 1)


def python_grid(meta, grid, sizes):
    try:
        return tuple(grid_formula.evaluate(grid[k], sizes) if isinstance(
            grid[k], str) else grid[k] for k in ("x", "y", "z"))
    except GridFormulaError as e:
        return str(e)


def test_grids_agree_with_each_other_and_the_builders(metas, c_grid):
    rng = random.Random(47)
    checked = 0
    for name, meta in metas.items():
        for _ in range(200):
            sizes = {"B": rng.randint(1, 64), "Hq": rng.choice([1, 8, 32, 64]),
                     "Nq": rng.randint(1, 70000), "SMs": rng.choice([78, 132]),
                     "kv_splits": rng.randint(1, 64)}
            sizes["Hkv"] = sizes["Hq"] // rng.choice([1, sizes["Hq"]])
            sizes["Nk"] = rng.randint(1, 1 << 20)
            sizes["D"] = meta["head_dim"]
            names = dict(sizes, block_r=meta["block_r"],
                         block_c=meta.get("block_c"),
                         ctas_per_sm=meta["ctas_per_sm"])
            want = expected_grid(meta, sizes)
            assert python_grid(meta, meta["grid"], names) == want, name
            assert c_grid(meta, 0, sizes) == want, name
            kernel = Kernel(ELF_HEADER, meta)
            assert kernel.grid(sizes["B"], sizes["Hq"], sizes["Nq"],
                               sizes["SMs"], sizes["kv_splits"]) == want
            checked += 1
            if "value_layout" in meta:
                keys = ceil_div(sizes["Nk"], 128) * 128
                aux = {"B": sizes["B"], "Hkv": sizes["Hkv"], "D": sizes["D"],
                       "Nk_128": keys}
                want = (ceil_div(sizes["B"] * sizes["Hkv"] * keys // 16 *
                                 (sizes["D"] // 16), 256), 1, 1)
                assert python_grid(meta, meta["value_layout"]["grid"],
                                   aux) == want
                assert c_grid(meta, 1, aux) == want
            if "kv_append" in meta:
                aux = {"B": sizes["B"], "Nnew": rng.randint(1, 16),
                       "Hkv": sizes["Hkv"], "D": sizes["D"]}
                want = (ceil_div(aux["B"] * aux["Nnew"] * aux["Hkv"] *
                                 (aux["D"] // 8), 256), 1, 1)
                assert python_grid(meta, meta["kv_append"]["grid"],
                                   aux) == want
                assert c_grid(meta, 2, aux) == want
    assert checked == 200 * len(KERNELS)


def test_launch_sizes_past_the_grid_are_refused(metas, c_grid):
    # The mma.sync kernel's grid puts the heads on y: at most 65535.
    meta = metas["sm80"]
    big = {"B": 1, "Hq": 70000, "Nq": 128, "SMs": 132, "kv_splits": 1}
    message = c_grid(meta, 0, big)
    assert isinstance(message, str) and "outside CUDA's" in message, message
    kernel = Kernel(ELF_HEADER, meta)
    with pytest.raises(KernelArgumentError, match="outside CUDA's"):
        kernel.grid(1, 70000, 128, 132)
    # A size the formula reads but the launch does not give.
    assert "no value for 'Nq'" in c_grid(meta, 0, {"B": 1, "Hq": 1})
    with pytest.raises(KernelArgumentError, match="no value for 'SMs'"):
        Kernel(ELF_HEADER, metas["persistent"]).grid(1, 8, 128)
    # Which grid: a kernel without the auxiliary kernel, an unknown one.
    assert "has no V layout kernel" in c_grid(meta, 1, {"B": 1})
    assert "which must be" in c_grid(meta, 7, {"B": 1})


@pytest.mark.parametrize("text,value", [
    ("7", 7),
    ("ceil(1000 / 128) * 8 * 2", 128),
    ("min(ceil(1000 / 128) * 8 * 4, 132 * 1)", 132),
    ("max(3, 2 * 2)", 4),
    ("ceil(7 / 2) - 1", 3),
    ("ceil(0 - 7 / 2)", -3),
    ("(2 + 3) * 4 / 10", 2),
    ("ceil(  5/2 )", 3),
])
def test_python_values(text, value):
    assert grid_formula.evaluate(text, {}) == value


@pytest.mark.parametrize("text,why", [
    ("7 / 2", "not a whole number"),
    ("1 / 0", "division by zero"),
    ("ceil(", "missing at the end"),
    ("min(1)", "',' expected"),
    ("2 ** 3", "unexpected '\\*'|missing"),
    ("Nq", "no value for 'Nq'"),
    ("(" * 40 + "1" + ")" * 40, "nested deeper than 32"),
    ("99999999999999999999", "passes 2\\^62"),
    ("4611686018427387904 * 2", "passes 2\\^62"),
    ("1 2", "unexpected '2'"),
    ("é", "unexpected"),
])
def test_python_refusals(text, why):
    with pytest.raises(GridFormulaError, match=why):
        grid_formula.evaluate(text, {})


def test_check_names_and_placeholders():
    # The readers' check: grammar and names, whatever the values.
    grid_formula.check("ceil(Nq / block_r) * Hq * B", {"Nq", "block_r", "Hq",
                                                       "B"})
    grid_formula.check("Nq / (B - 1)", {"Nq", "B"})  # zero only at B = 1
    grid_formula.check(5, set())
    with pytest.raises(GridFormulaError, match="unknown name 'heads'"):
        grid_formula.check("heads * 2", {"Nq"})
    with pytest.raises(GridFormulaError, match="integer or a formula"):
        grid_formula.check(1.5, set())


def test_metadata_with_a_bad_grid_is_refused(metas, monkeypatch):
    monkeypatch.setenv("FLASHMLIR_RUNTIME_LIB", "")
    meta = json.loads(json.dumps(metas["persistent"]))
    meta["grid"]["x"] = "ceil(Nq / block_r) * heads"
    with pytest.raises(MetadataError, match="unknown name 'heads'"):
        validate_metadata(meta)
