"""flashmlir.compile: the pybind11 bindings over the C++ compiler (CPU only:
compile, inspect stages, cache, errors)."""
import os
import sys

import pytest

from conftest import ROOT


@pytest.fixture(scope="module")
def flashmlir(build_dir):
    if not (build_dir / "python" / "flashmlir").is_dir():
        pytest.fail(f"no Python extension in {build_dir}/python/flashmlir")
    os.environ["FLASHMLIR_BUILD_DIR"] = str(build_dir)
    sys.path.insert(0, str(ROOT / "python"))
    import flashmlir as module
    ext = str(build_dir / "python" / "flashmlir")
    if ext not in module.__path__:
        module.__path__.append(ext)
    return module


@pytest.mark.parametrize("head_dim,dtype,causal,arch", [
    (64, "f16", False, "sm_90a"), (128, "bf16", True, "sm_80"),
    (256, "f16", True, "sm_90a")])
def test_compile_and_inspect(flashmlir, head_dim, dtype, causal, arch):
    k = flashmlir.compile(head_dim=head_dim, causal=causal, dtype=dtype,
                          arch=arch)
    assert k.metadata["head_dim"] == head_dim
    assert k.metadata["dtype"] == dtype
    assert k.metadata["causal"] is causal
    assert k.metadata["kernel"] == k.name
    assert k.cubin[:4] == b"\x7fELF"
    assert f".target {arch}" in k.ptx
    assert "mma.sync.aligned.m16n8k16" in k.mlir("ptx")
    kernel_ir = k.mlir("kernel")
    assert "nvvm.mma.sync" in kernel_ir and "nvvm.ldmatrix" in kernel_ir
    assert "gpu.launch_func" in k.mlir("host")
    assert "fa.attention" in k.mlir("attention")
    with pytest.raises(ValueError, match="unknown stage"):
        k.mlir("llvm")


def test_compile_is_cached(flashmlir):
    before = flashmlir.compiler.cache_info().hits
    a = flashmlir.compile(head_dim=64, causal=True)
    b = flashmlir.compile(head_dim=64, causal=True)
    assert flashmlir.compiler.cache_info().hits >= before + 1
    assert a.cubin == b.cubin


def test_fa4_options_reach_the_kernel(flashmlir):
    k = flashmlir.compile(head_dim=128, rescale_threshold=-1,
                          poly_exp2_degree=3, poly_exp2_period=4)
    assert k.name.endswith("_px3p4")
    assert k.metadata["exp2_poly_degree"] == 3
    assert "math.floor" in k.mlir("kernel")
    assert flashmlir.compile(head_dim=128).name.endswith("_cr8")


@pytest.mark.parametrize("kwargs,message", [
    (dict(head_dim=96), "head dim must be 64, 128 or 256 on sm_90a, got 96"),
    (dict(head_dim=64, dtype="f32"), "dtype must be f16 or bf16"),
    (dict(head_dim=64, arch="sm_100a"), "sm_100a .* has no backend yet"),
    (dict(head_dim=64, block_r=32), "block_r must be 64 or 128, got 32"),
])
def test_bad_requests_raise_compile_error(flashmlir, kwargs, message):
    with pytest.raises(flashmlir.CompileError, match=message):
        flashmlir.compile(**kwargs)
