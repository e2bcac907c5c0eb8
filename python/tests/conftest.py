import os
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def build_dir():
    path = pathlib.Path(os.environ.get("FA_BUILD_DIR", ROOT / "build"))
    if not (path / "bin" / "fa-run").exists():
        pytest.fail(f"no fa-run in {path}/bin: build flash-mlir first "
                    "(bash scripts/bootstrap.sh)")
    return path


@pytest.fixture(scope="session")
def flashmlir(build_dir):
    """The flashmlir package with the build tree's compiled extension."""
    if not (build_dir / "python" / "flashmlir").is_dir():
        pytest.fail(f"no Python extension in {build_dir}/python/flashmlir")
    os.environ["FLASHMLIR_BUILD_DIR"] = str(build_dir)
    sys.path.insert(0, str(ROOT / "python"))
    import flashmlir as module
    ext = str(build_dir / "python" / "flashmlir")
    if ext not in module.__path__:
        module.__path__.append(ext)
    return module


@pytest.fixture(scope="session")
def cuda_flashmlir():
    """(torch, flashmlir) for gpu-marked tests: they need torch and a CUDA
    device, and fail (not skip) without them."""
    import torch
    assert torch.cuda.is_available(), "gpu tests need a CUDA device"
    sys.path.insert(0, str(ROOT / "python"))
    import flashmlir
    return torch, flashmlir


def masked_reference(torch, q, k, v, scale, causal=False, window=0,
                     softcap=0.0, dtype=None, window_size=(-1, -1),
                     with_lse=False):
    """Attention on [..., H, N, D] tensors (K/V heads dividing Q's: GQA), in
    flash-attention's convention: query i at key position i' = i + Nk - Nq
    (the bottom-right diagonal), causal keeps keys j <= i', a window w keys
    with |j - i'| < w, window_size (left, right) keys with i' - left <= j
    <= i' + right (-1: unbounded), softcap c scores c tanh(s / c); in
    `dtype` throughout (default float32), a query that sees no key giving
    O = 0. with_lse: (O, LSE [..., H, N]) (-inf for such a query)."""
    dtype = dtype or torch.float32
    group = q.shape[-3] // k.shape[-3]
    q, k, v = (t.to(dtype) for t in (q, k, v))
    k = k.repeat_interleave(group, -3)
    v = v.repeat_interleave(group, -3)
    s = (q @ k.transpose(-1, -2)) * scale
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    nq, nk = q.shape[-2], k.shape[-2]
    i = torch.arange(nq, device=q.device)[:, None] + (nk - nq)
    j = torch.arange(nk, device=q.device)[None, :]
    visible = torch.ones(nq, nk, dtype=torch.bool, device=q.device)
    if causal:
        visible &= j <= i
    if window:
        visible &= (i - j).abs() < window
    left, right = window_size
    if left >= 0:
        visible &= j >= i - left
    if right >= 0:
        visible &= j <= i + right
    s = s.masked_fill(~visible, float("-inf"))
    out = torch.softmax(s, -1).nan_to_num(0.0) @ v
    return (out, torch.logsumexp(s, -1)) if with_lse else out


def compile_metadata(build_dir, out, kernels):
    """fa-compile --no-cubin of each `kernels` entry (name: flags, head dim
    128) into folder `out`: {name: its launch metadata}."""
    import json
    import subprocess
    metas = {}
    for name, flags in kernels.items():
        subprocess.run([str(build_dir / "bin" / "fa-compile"), "--head-dim",
                        "128", *flags, "--no-cubin", "-o", str(out / name)],
                       check=True, capture_output=True)
        metas[name] = json.loads((out / f"{name}.json").read_text())
    return metas


def load_c_runtime():
    """The build's libFARuntime.so (no MLIR inside: the H200 runs carry
    build/lib/libFARuntime.so) with faRuntimeLastError typed, and a
    function giving a [B, N, H, D] tensor's FaStrides (as [B, H, N, D])."""
    import ctypes
    shared = pathlib.Path(os.environ.get("FA_BUILD_DIR", ROOT / "build")) / \
        "lib" / "libFARuntime.so"
    assert shared.exists(), f"no {shared}: carry the build's runtime library"
    lib = ctypes.CDLL(str(shared))
    lib.faRuntimeLastError.restype = ctypes.c_char_p

    class Strides(ctypes.Structure):
        _fields_ = [("batch", ctypes.c_longlong), ("head", ctypes.c_longlong),
                    ("row", ctypes.c_longlong)]

    def bnhd_strides(t):
        sb, sn, sh, _ = t.stride()
        return Strides(sb, sh, sn)

    return lib, Strides, bnhd_strides


# The smallest image the runtime takes for a cubin (runtime.check_image, as
# the C runtime's checkImage): a 64-bit little-endian ELF header without
# program or section headers. A stand-in for tests that never launch.
ELF_HEADER = b"\x7fELF" + bytes([2, 1, 1]) + bytes(57)


@pytest.fixture(params=["c", "python"])
def metadata_check(request, monkeypatch, build_dir):
    """Which check flashmlir.runtime.validate_metadata runs: "c": the C
    runtime's faKernelMetadataCheck (the build's libFARuntime.so, named by
    FLASHMLIR_RUNTIME_LIB), then the pure-Python checks; "python": the
    pure-Python checks alone (FLASHMLIR_RUNTIME_LIB set but empty), as
    where the library is absent."""
    if request.param == "c":
        shared = build_dir / "lib" / "libFARuntime.so"
        if not shared.exists():
            pytest.skip("no shared libFARuntime in this (sanitizer) build")
        monkeypatch.setenv("FLASHMLIR_RUNTIME_LIB", str(shared))
    else:
        monkeypatch.setenv("FLASHMLIR_RUNTIME_LIB", "")
    return request.param


@pytest.fixture(scope="session")
def fa_run(build_dir):
    return str(build_dir / "bin" / "fa-run")


@pytest.fixture(scope="session")
def fa_opt(build_dir):
    return str(build_dir / "bin" / "fa-opt")


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "gpu: needs torch and an NVIDIA GPU with compiled kernels; deselected "
        "by scripts/test.sh (-m 'not gpu'), run on the H200 with "
        "FLASHMLIR_KERNEL_DIR=.cubins python3 -m pytest -m gpu python/tests")


def pytest_collection_modifyitems(config, items):
    """Without an explicit -m, the gpu tests are deselected (and reported
    as such): they need torch and a GPU, which the build machine lacks."""
    if config.getoption("markexpr"):
        return
    selected = [i for i in items if "gpu" not in i.keywords]
    deselected = [i for i in items if "gpu" in i.keywords]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = selected
