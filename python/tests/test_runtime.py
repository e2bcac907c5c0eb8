"""The pure-Python runtime's checks, without a GPU: metadata validation,
argument checking on tensor-like objects, driver and cubin errors. The same
runtime launches kernels on the H200 (bench/harness.py)."""
import copy
import json
import subprocess
import sys

import pytest

from conftest import ELF_HEADER, ROOT

sys.path.insert(0, str(ROOT / "python"))
from flashmlir import runtime  # noqa: E402
from flashmlir.runtime import (Kernel, KernelArgumentError,  # noqa: E402
                               MetadataError)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory, build_dir):
    """A real kernel from fa-compile (PTX + cubin + JSON)."""
    out = tmp_path_factory.mktemp("k") / "d64"
    subprocess.run([str(build_dir / "bin" / "fa-compile"), "--arch", "sm_90a",
                    "--head-dim", "64", "-o", str(out)], check=True,
                   capture_output=True)
    return str(out)


class FakeTensor:
    """Just enough of torch.Tensor for the argument checks."""

    def __init__(self, shape, dtype="torch.float16", device="cuda:0",
                 strides=None, ptr=4096):
        self.shape = tuple(shape)
        self.dtype = dtype
        self.device = FakeDevice(device)
        packed, n = [], 1
        for size in reversed(self.shape):
            packed.insert(0, n)
            n *= size
        self._packed = tuple(packed)
        self._strides = tuple(strides) if strides else self._packed
        self._ptr = ptr

    def is_contiguous(self):
        return self._strides == self._packed

    def stride(self):
        return self._strides

    def data_ptr(self):
        return self._ptr

    def element_size(self):
        for size, names in ((1, ("float8", "uint8", "int8")),
                            (4, ("float32", "int32"))):
            if any(n in self.dtype for n in names):
                return size
        return 2


class FakeDevice:
    def __init__(self, text):
        self.text = text
        self.type, _, index = text.partition(":")
        self.index = int(index) if index else None

    def __str__(self):
        return self.text


def qkv(b=2, hq=8, hkv=2, nq=100, nk=300, d=64, **kw):
    return (FakeTensor((b, hq, nq, d), **kw), FakeTensor((b, hkv, nk, d), **kw),
            FakeTensor((b, hkv, nk, d), **kw))


def test_loads_fa_compile_output(compiled):
    # The sm_90a FlashAttention-3 kernel at D = 64: CTAs of 512 threads
    # (producer + three consumer warpgroups, B_r = 192) striding over the
    # (query block, head) tiles, q/k/v as tensor maps, B as the last
    # parameter.
    k = Kernel.load(compiled)
    assert k.name == "fa3_sm90_d64_br192_bc128_s3_f16_persistent_q2_cr8"
    assert k.meta["block"] == [512, 1, 1]
    assert k.meta["tile_grid"] is True and k.meta["persistent"] is True
    assert [p["kind"] for p in k.meta["params"][:3]] == ["tensormap"] * 3
    assert k.meta["params"][0]["box"] == [64, 192]
    assert [p["name"] for p in k.meta["params"][-4:]] == [
        "B", "o_stride_b", "o_stride_h", "o_stride_n"]
    assert k.strided and k.meta["params"][0]["rank"] == 4
    # The grid the lowering wrote, evaluated: a persistent grid reads the
    # SM count, which a launch must give.
    assert k.grid(2, 8, 1000, sm_count=132) == (96, 1, 1)
    assert k.grid(4, 8, 1000, sm_count=132) == (132, 1, 1)
    with pytest.raises(KernelArgumentError, match="no value for 'SMs'"):
        k.grid(2, 8, 1000)
    assert k.check_arguments(*qkv()) == (2, 8, 2, 100, 300, 64)


def test_persistent_grid_is_capped(compiled):
    import json
    meta = json.load(open(compiled + ".json"))
    meta["persistent"] = True
    meta["grid"]["x"] = "min(ceil(Nq / block_r) * Hq * B, SMs * ctas_per_sm)"
    k = Kernel(ELF_HEADER, meta)
    assert k.grid(2, 8, 1000, sm_count=132) == (96, 1, 1)
    assert k.grid(4, 8, 1000, sm_count=132) == (132, 1, 1)
    # A kernel built for two resident CTAs per SM launches twice as many.
    meta["ctas_per_sm"] = 2
    k = Kernel(ELF_HEADER, meta)
    assert k.grid(4, 8, 1000, sm_count=132) == (192, 1, 1)
    assert k.grid(8, 8, 1000, sm_count=132) == (264, 1, 1)


def test_one_consumer_kernel_metadata(tmp_path, build_dir):
    # Causal D = 64 on sm_90a with B_r = 64: 256 threads, two CTAs per SM.
    out = tmp_path / "d64c"
    subprocess.run([str(build_dir / "bin" / "fa-compile"), "--arch", "sm_90a",
                    "--head-dim", "64", "--causal", "--persistent",
                    "--block-r", "64", "--no-cubin", "-o", str(out)],
                   check=True,
                   capture_output=True)
    meta = json.load(open(str(out) + ".json"))
    assert meta["kernel"] == "fa3_sm90_d64_br64_bc128_s2_f16_causal_persistent_q2_cr8"
    assert meta["block"] == [256, 1, 1] and meta["block_r"] == 64
    assert meta["ctas_per_sm"] == 2
    assert meta["grid"]["x"] == "min(ceil(Nq / block_r) * Hq * B, SMs * ctas_per_sm)"


@pytest.fixture(scope="module")
def dynamic_meta(tmp_path_factory, build_dir):
    # Causal D = 128 on sm_90a: persistent CTAs fed by the dynamic tile
    # scheduler, whose counter is the last parameter.
    out = tmp_path_factory.mktemp("dyn") / "d128c"
    subprocess.run([str(build_dir / "bin" / "fa-compile"), "--arch", "sm_90a",
                    "--head-dim", "128", "--causal", "--no-cubin", "-o",
                    str(out)], check=True, capture_output=True)
    return json.load(open(str(out) + ".json"))


def test_dynamic_scheduler_metadata(dynamic_meta):
    meta = dynamic_meta
    # D = 128 stores O by TMA: o is a tensor map of 64-row boxes.
    assert meta["params"][3]["kind"] == "tensormap"
    assert meta["params"][3]["box"] == [64, 64]
    assert meta["tma_box_rows_o"] == 64
    assert meta["persistent"] is True
    assert meta["tile_scheduler"] == "dynamic"
    assert meta["params"][-1]["name"] == "tile_counter"
    assert meta["params"][-1]["kind"] == "counter"
    k = Kernel(ELF_HEADER, meta)
    assert k.grid(16, 16, 1024, sm_count=132) == (132, 1, 1)
    assert k.grid(1, 2, 300, sm_count=132) == (6, 1, 1)


@pytest.mark.parametrize("edit, message", [
    (lambda m: m.__setitem__("persistent", False),
     "a dynamic tile scheduler needs a persistent kernel"),
    (lambda m: m["params"].pop(), "parameter list"),
    (lambda m: m.__setitem__("tile_scheduler", "round robin"),
     "unknown '?tile_scheduler'? 'round robin'"),
])
def test_bad_dynamic_scheduler_metadata(dynamic_meta, metadata_check, edit,
                                        message):
    meta = copy.deepcopy(dynamic_meta)
    edit(meta)
    with pytest.raises(MetadataError, match=message):
        Kernel(ELF_HEADER, meta)


def test_static_kernels_take_no_counter(dynamic_meta):
    # A counter parameter on a kernel without the dynamic scheduler is a
    # mismatch, not something to pass silently.
    meta = copy.deepcopy(dynamic_meta)
    meta["tile_scheduler"] = "static"
    with pytest.raises(MetadataError, match="parameter list"):
        Kernel(ELF_HEADER, meta)


def test_sm80_kernel_grid(tmp_path, build_dir):
    out = tmp_path / "d64"
    subprocess.run([str(build_dir / "bin" / "fa-compile"), "--arch", "sm_80",
                    "--head-dim", "64", "-o", str(out)], check=True,
                   capture_output=True)
    k = Kernel.load(str(out))
    assert k.name == "fa2_sm80_d64_br128_bc64_f16"
    assert k.meta["block"] == [128, 1, 1]
    assert k.grid(2, 8, 1000) == (8, 8, 2)
    # The mma.sync kernel reads contiguous tensors only.
    assert not k.strided
    q, kk, v = qkv()
    view = FakeTensor((2, 8, 100, 64), strides=(51200, 64, 512, 1))
    with pytest.raises(KernelArgumentError, match="q must be contiguous"):
        k.check_arguments(view, kk, v)


@pytest.mark.parametrize("mutate, message", [
    (lambda a: a.__setitem__(0, FakeTensor((8, 100, 64))),
     "q must have rank 4"),
    (lambda a: a.__setitem__(1, FakeTensor((2, 2, 300, 64), dtype="torch.bfloat16")),
     "k must be float16"),
    (lambda a: a.__setitem__(2, FakeTensor((2, 2, 300, 64), device="cpu")),
     "v must be on a CUDA device, got cpu"),
    # The sm_90a kernel reads strided views; a row of 68 elements (136
    # bytes) is not a 16-byte multiple.
    (lambda a: a.__setitem__(0, FakeTensor((2, 8, 100, 64),
                                           strides=(54400, 6800, 68, 1))),
     "q's row stride must be a positive multiple of 8"),
    (lambda a: a.__setitem__(1, FakeTensor((2, 2, 300, 64),
                                           strides=(38400, 1, 128, 2))),
     "k must have unit stride on D"),
    (lambda a: a.__setitem__(0, FakeTensor((2, 8, 100, 128))),
     "q head dim must be 64"),
    (lambda a: a.__setitem__(0, FakeTensor((2, 8, 100, 64), ptr=4098)),
     "16-byte aligned"),
    (lambda a: a.__setitem__(0, FakeTensor((2, 6, 100, 64))) or
     a.__setitem__(1, FakeTensor((2, 4, 300, 64))) or
     a.__setitem__(2, FakeTensor((2, 4, 300, 64))),
     r"query heads \(6\) must be a multiple of key/value heads \(4\)"),
    (lambda a: a.__setitem__(1, FakeTensor((3, 2, 300, 64))),
     "batch sizes differ"),
    (lambda a: a.__setitem__(2, FakeTensor((2, 2, 299, 64))),
     "v must have the key's heads and length"),
    (lambda a: a.__setitem__(1, FakeTensor((2, 2, 300, 64), device="cuda:1")) or
     a.__setitem__(2, FakeTensor((2, 2, 300, 64), device="cuda:1")),
     "one device"),
    (lambda a: a.__setitem__(0, "not a tensor"), "q must be a tensor"),
    # The kernels' positions are 2^30 at most (fa/Model/Positions.h), as
    # faKernelLaunch says; before, Python let 2^31 - 1 keys through.
    (lambda a: a.__setitem__(1, FakeTensor((2, 2, 2**30 + 1, 64),
                                           strides=(0, 0, 64, 1))) or
     a.__setitem__(2, FakeTensor((2, 2, 2**30 + 1, 64),
                                 strides=(0, 0, 64, 1))),
     r"sequence lengths must be at most 2\^30 \(the kernels' 32-bit "
     r"positions\), got Nq 100, Nk 1073741825"),
])
def test_bad_arguments_are_named(compiled, mutate, message):
    k = Kernel.load(compiled)
    args = list(qkv())
    mutate(args)
    with pytest.raises(KernelArgumentError, match=message):
        k.check_arguments(*args)


def test_bad_outputs_are_named(compiled):
    k = Kernel.load(compiled)
    q, kk, v = qkv()
    with pytest.raises(KernelArgumentError, match=r"out must have shape \(2, 8, 100, 64\)"):
        k.check_arguments(q, kk, v, out=FakeTensor((2, 8, 100, 32)))
    with pytest.raises(KernelArgumentError, match="lse must be float32"):
        k.check_arguments(q, kk, v, lse=FakeTensor((2, 8, 100)))
    # O leaves by TMA or 16-byte copies: a misaligned O is refused, also on
    # a repeated call whose shapes passed before.
    k.check_arguments(q, kk, v, out=FakeTensor((2, 8, 100, 64)))
    with pytest.raises(KernelArgumentError, match="out must be 16-byte aligned"):
        k.check_arguments(q, kk, v, out=FakeTensor((2, 8, 100, 64), ptr=4104))


# Each refusal's message: one for both checks, or {"c": faKernelMetadataCheck's
# (validate_metadata runs it first where libFARuntime.so is found),
# "python": the pure-Python checks' (where it is not)}.
@pytest.mark.parametrize("edit, message", [
    (lambda m: m.pop("kernel"),
     {"c": "no 'kernel' name", "python": "metadata lacks 'kernel'"}),
    (lambda m: m.__setitem__("format", "other"),
     {"c": "unknown format 'other'", "python": "unknown metadata format"}),
    (lambda m: m.__setitem__("block_r", "128"),
     r"'block_r' must be an integer in \[1, 1048576\]"),
    (lambda m: m["params"].pop(), "parameter list"),
    (lambda m: m.__setitem__("dtype", "f64"), "unsupported dtype"),
    (lambda m: m.__setitem__("block", [0, 1, 1]),
     {"c": r"'block' must be in \[1, 1024\], got 0", "python": "bad block"}),
    (lambda m: m.__setitem__("ctas_per_sm", 0),
     r"'ctas_per_sm' must be (an integer )?in \[1, 32\], got 0"),
    # Issue 16: values that would narrow in ctypes or a launch dimension.
    (lambda m: m.__setitem__("head_dim", 2**32 + 64),
     r"'head_dim' must be (an integer )?in \[1, 65536\], got 4294967360"),
    (lambda m: m.__setitem__("shared_memory_bytes", 2**31),
     r"'shared_memory_bytes' must be (an integer )?in \[0, 2147483647\], "
     r"got 2147483648"),
    (lambda m: m.__setitem__("block_r", True), "'block_r' must be an integer"),
    (lambda m: m.__setitem__("block", [1024, 2, 1]),
     {"c": r"at most 1024 threads \(CUDA's limit per block\), got 2048",
      "python": "at most 1024 threads in all"}),
    # Issue 15: the compiled scale is the launch default; it must be usable.
    (lambda m: m.__setitem__("scale", -0.5),
     r"'scale' must be a number in \[2\^-64, 2\^64\], got '?-0.5"),
    (lambda m: m.__setitem__("scale", "0.5"), "'scale' must be a number"),
    (lambda m: m.__setitem__("diagonal_offset", -1),
     r"'diagonal_offset' must be (an integer )?in \[0, 1073741824\], got -1"),
    # A tensor map's L2 promotion: one of cuTensorMapEncodeTiled's.
    (lambda m: m["params"][1].__setitem__("l2_promotion", 32),
     {"c": r"a parameter's 'l2_promotion' must be 0, 64, 128 or 256 "
           r"\(bytes\), got 32",
      "python": r"parameter 'k': 'l2_promotion' must be 0, 64, 128 or 256 "
                r"\(bytes\), got 32"}),
    (lambda m: m["params"][1].__setitem__("l2_promotion", True),
     {"c": r"'l2_promotion' must be an integer in \[0, 256\]",
      "python": "'l2_promotion' must be 0, 64, 128 or 256"}),
])
def test_bad_metadata_is_refused(compiled, metadata_check, edit, message):
    meta = json.load(open(compiled + ".json"))
    meta = copy.deepcopy(meta)
    edit(meta)
    if isinstance(message, dict):
        message = message[metadata_check]
    with pytest.raises(MetadataError, match=message):
        Kernel(open(compiled + ".cubin", "rb").read(), meta)


def test_parameters_bind_by_name_in_any_order(compiled, metadata_check):
    """The metadata's parameter order is the kernel's own (the lowering's);
    both runtimes check which parameters there are, not where, and bind
    each by name: a reversed list is accepted, a repeated or a missing one
    is not."""
    meta = json.load(open(compiled + ".json"))
    cubin = open(compiled + ".cubin", "rb").read()
    reordered = copy.deepcopy(meta)
    reordered["params"].reverse()
    kernel = Kernel(cubin, reordered)
    assert [p["name"] for p in kernel.meta["params"]] == \
        [p["name"] for p in reversed(meta["params"])]
    repeated = copy.deepcopy(meta)
    repeated["params"][-1] = copy.deepcopy(repeated["params"][5])
    with pytest.raises(MetadataError, match="parameter list"):
        Kernel(cubin, repeated)


@pytest.mark.parametrize("param, message", [
    ({"name": "capture0", "kind": "pointer", "dtype": "f64", "shape": ["4"]},
     "metadata capture parameter"),
    ({"name": "capture0", "kind": "pointer", "dtype": "f32", "shape": ["N"]},
     "metadata capture parameter"),
    ({"name": "capture1", "kind": "pointer", "dtype": "f32", "shape": ["4"]},
     "capture"),
    ({"name": "capture0", "kind": "i32", "dtype": "f32", "shape": ["4"]},
     "capture"),
])
def test_bad_capture_parameters_are_refused(compiled, metadata_check, param,
                                            message):
    """A score_mod / mask_mod capture parameter is a pointer of a known dtype
    and a static shape, numbered from 0: anything else is refused when the
    metadata is read, not at a launch."""
    meta = copy.deepcopy(json.load(open(compiled + ".json")))
    meta["params"].append(param)
    with pytest.raises(MetadataError, match=message):
        Kernel(open(compiled + ".cubin", "rb").read(), meta)


def test_empty_cubin_and_bad_json(compiled, tmp_path):
    meta = json.load(open(compiled + ".json"))
    with pytest.raises(MetadataError, match="the cubin is empty"):
        Kernel(b"", meta)
    (tmp_path / "x.json").write_text("{not json")
    (tmp_path / "x.cubin").write_bytes(b"\x7fELF")
    with pytest.raises(MetadataError, match="not valid JSON"):
        Kernel.load(str(tmp_path / "x"))


def test_missing_driver_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(runtime, "_driver", None)
    monkeypatch.setenv("FLASHMLIR_LIBCUDA", "/nonexistent/libcuda.so.1")
    with pytest.raises(runtime.CudaError, match="cannot load the CUDA driver"):
        runtime._get_driver()


def test_tensor_maps_are_cached_on_what_they_encode(monkeypatch):
    """A tensor map depends only on the address, shape, element size, dtype
    and box: the same ones reuse the encoding, any difference re-encodes."""
    calls = []

    def fake_encode(spec, address):
        calls.append((address, spec.box[1]))
        return (object(), len(calls))

    monkeypatch.setattr(runtime._MapSpec, "_encode", fake_encode)
    monkeypatch.setattr(runtime, "_TENSOR_MAPS", type(runtime._TENSOR_MAPS)())
    t = FakeTensor((1, 2, 64, 64))
    t.element_size = lambda: 2
    first = runtime.encode_tensor_map(t, 128, "f16")
    assert runtime.encode_tensor_map(t, 128, "f16") is first
    assert len(calls) == 1
    runtime.encode_tensor_map(t, 192, "f16")          # another box
    moved = FakeTensor((1, 2, 64, 64), ptr=8192)      # another buffer
    moved.element_size = lambda: 2
    runtime.encode_tensor_map(moved, 128, "f16")
    assert len(calls) == 3
    # Rank 4: the strides are part of what a map encodes.
    runtime.encode_tensor_map(t, 128, "f16", rank=4, strides=(8192, 64, 128))
    assert runtime.encode_tensor_map(
        t, 128, "f16", rank=4, strides=(8192, 64, 128)) is not None
    runtime.encode_tensor_map(t, 128, "f16", rank=4, strides=(8192, 4096, 64))
    assert len(calls) == 5
    # So is the L2 promotion (a split-KV kernel's K and V take 64 bytes).
    runtime.encode_tensor_map(t, 128, "f16", l2_promotion=64)
    assert len(calls) == 6


def test_compiled_scale_is_in_the_metadata(compiled):
    # fa-compile's module has no scale attribute: 1/sqrt(D), as an exact f32.
    import numpy as np
    meta = json.load(open(compiled + ".json"))
    d = meta["head_dim"]
    assert meta["scale"] == float(np.float32(1.0 / np.sqrt(d)))
    assert meta["writes_lse"] is True


@pytest.fixture(scope="module")
def max_rows_kernel(tmp_path_factory, build_dir):
    """A decode kernel built with --max-rows 8 (each consumer thread steps
    only its first row's softmax): f16 Q over a 16-bit K/V here."""
    out = tmp_path_factory.mktemp("mr") / "mr8"
    subprocess.run([str(build_dir / "bin" / "fa-compile"), "--arch", "sm_90a",
                    "--head-dim", "64", "--max-rows", "8", "-o", str(out)],
                   check=True, capture_output=True)
    return str(out)


def test_max_rows_metadata(max_rows_kernel, metadata_check):
    """max_rows is the metadata's (8 for an --max-rows 8 build, absent
    otherwise); a launch of more rows a tile is refused by name, one of at
    most 8 passes the check; both metadata checks refuse any value but 0 or
    8."""
    meta = json.load(open(max_rows_kernel + ".json"))
    assert meta["max_rows"] == 8 and "_mr8_" in meta["kernel"], meta
    cubin = open(max_rows_kernel + ".cubin", "rb").read()
    k = Kernel(cubin, meta)
    q8 = FakeTensor((2, 8, 8, 64))
    k.check_arguments(q8, FakeTensor((2, 8, 100, 64)),
                      FakeTensor((2, 8, 100, 64)))
    q9 = FakeTensor((2, 8, 9, 64))
    with pytest.raises(KernelArgumentError,
                       match=r"steps at most 8 rows a tile .* a launch of 9 "
                             r"query rows needs a kernel without max_rows"):
        k.check_arguments(q9, FakeTensor((2, 8, 100, 64)),
                          FakeTensor((2, 8, 100, 64)))
    for bad, message in ((4, r"'max_rows' must be (an integer in \[0, 8\], "
                             r"got 4|0, or 8)"),
                         (9, r"'max_rows' must be"),
                         (True, r"'max_rows' must be")):
        edited = dict(meta, max_rows=bad)
        with pytest.raises(MetadataError, match=message):
            Kernel(cubin, edited)
