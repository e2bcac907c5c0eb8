"""Strided tensors (issue 17): the sm_90a kernels read q, k, v and write O
as strided [B, H, N, D] views through rank-4 tensor maps, so flash-attention's
[B, N, H, D] tensors run without a copy. CPU: the metadata and the stride
rule (the same in Python and in the C runtime). GPU (marked): numerics on
views of other layouts, flash_attn_func without copies, the C runtime's
faKernelLaunchStrided, and refusals."""
import ctypes
import math
import sys

import pytest

from conftest import ELF_HEADER, ROOT
from test_gpu import TOL, reference  # the fp32 softmax(QK^T)V reference


class FakeTensor:
    """Just enough of a tensor for the stride rule."""

    def __init__(self, shape, stride):
        self.shape = shape
        self._stride = stride

    def stride(self):
        return self._stride


def test_sm90_metadata_is_strided(flashmlir):
    # D = 64 stores O from registers: o's strides are parameters.
    k = flashmlir.compile(arch="sm_90a", head_dim=64)
    params = {p["name"]: p for p in k.metadata["params"]}
    assert [params[n]["rank"] for n in "qkv"] == [4, 4, 4]
    assert params["o"]["kind"] == "pointer"
    assert [p["name"] for p in k.metadata["params"]][10:14] == [
        "B", "o_stride_b", "o_stride_h", "o_stride_n"]
    assert params["o_stride_n"]["kind"] == "i64"
    assert k.metadata["layout"].startswith("strided [B, H, N, D]")
    from flashmlir import runtime
    assert runtime.Kernel(ELF_HEADER, k.metadata).strided
    # D = 128 stores O by TMA: o is a rank-4 map too, no stride parameters.
    k = flashmlir.compile(arch="sm_90a", head_dim=128)
    params = {p["name"]: p for p in k.metadata["params"]}
    assert params["o"]["kind"] == "tensormap" and params["o"]["rank"] == 4
    assert not any(n.startswith("o_stride") for n in params)


def test_sm80_metadata_is_contiguous(flashmlir):
    k = flashmlir.compile(arch="sm_80", head_dim=64)
    names = [p["name"] for p in k.metadata["params"]]
    assert not any(n.startswith("o_stride") for n in names)
    assert k.metadata["layout"].startswith("contiguous")
    from flashmlir import runtime
    assert not runtime.Kernel(ELF_HEADER, k.metadata).strided


def test_metadata_rank_checks(flashmlir):
    from flashmlir import runtime
    meta = flashmlir.compile(arch="sm_90a", head_dim=64).metadata
    bad = dict(meta, params=[dict(p) for p in meta["params"]])
    bad["params"][1]["rank"] = 3
    with pytest.raises(runtime.MetadataError, match="ranks"):
        runtime.validate_metadata(bad)
    # A strided kernel's metadata without o's strides.
    short = dict(meta, params=[p for p in meta["params"]
                               if not p["name"].startswith("o_stride")])
    with pytest.raises(runtime.MetadataError, match="parameter list"):
        runtime.validate_metadata(short)


def test_stride_rule():
    sys.path.insert(0, str(ROOT / "python"))
    from flashmlir.runtime import KernelArgumentError, tensor_strides
    # [B, N, H, D] = (2, 100, 8, 64) viewed as [B, H, N, D].
    bnhd = FakeTensor((2, 8, 100, 64), (100 * 8 * 64, 64, 8 * 64, 1))
    assert tensor_strides("q", bnhd) == (51200, 64, 512)
    # Length-1 dimensions take any stride (decode's Nq = 1, B = 1).
    decode = FakeTensor((1, 8, 1, 64), (0, 64, 3, 1))
    assert tensor_strides("q", decode) == (512, 64, 64)
    for stride, what in (((6800, 6800, 68, 1), "row stride"),
                         ((0, 6400, 64, 1), "batch stride"),
                         ((25600, -6400, 64, 1), "head stride"),
                         ((2**39, 6400, 64, 1), "batch stride")):
        with pytest.raises(KernelArgumentError, match=what):
            tensor_strides("k", FakeTensor((2, 4, 100, 64), stride))
    with pytest.raises(KernelArgumentError, match="unit stride on D"):
        tensor_strides("v", FakeTensor((2, 4, 100, 64), (25600, 6400, 1, 100)))


# -- GPU ----------------------------------------------------------------------

def strided_view(torch, layout, b, h, n, d, dtype):
    """A [B, H, N, D] view of another layout."""
    if layout == "bnhd":
        return torch.randn(b, n, h, d, device="cuda",
                           dtype=dtype).transpose(1, 2)
    if layout == "padded_d":
        return torch.randn(b, n, h, d + 64, device="cuda",
                           dtype=dtype)[..., :d].transpose(1, 2)
    if layout == "sequence_slice":
        return torch.randn(b, h, n + 24, d, device="cuda",
                           dtype=dtype)[:, :, 8:8 + n]
    assert layout == "every_second_batch"
    return torch.randn(2 * b, h, n, d, device="cuda", dtype=dtype)[::2]


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["bnhd", "padded_d", "sequence_slice",
                                    "every_second_batch"])
@pytest.mark.parametrize("d,causal", [(64, False), (128, True), (256, False)])
def test_strided_views(cuda_flashmlir, layout, d, causal):
    """flashmlir.attention on views of other layouts, O into a view too:
    no copy, the reference's answer."""
    torch, flashmlir = cuda_flashmlir
    torch.manual_seed(d + causal)
    b, hq, hkv, nq, nk = 2, 8, 2, 333, 517
    if causal:
        nk = nq  # top-left causal: equal lengths
    q = strided_view(torch, layout, b, hq, nq, d, torch.float16)
    k = strided_view(torch, layout, b, hkv, nk, d, torch.float16)
    v = strided_view(torch, layout, b, hkv, nk, d, torch.float16)
    assert not q.is_contiguous()
    kernel, _ = flashmlir._launcher(q, k, causal, None)
    assert kernel.strided
    out = strided_view(torch, layout, b, hq, nq, d, torch.float16)
    out.fill_(float("nan"))
    o, _ = kernel(q, k, v, out=out)
    assert o.data_ptr() == out.data_ptr()
    ref = reference(torch, q, k, v, causal, 1 / math.sqrt(d))
    err = ((out.float() - ref).norm() / ref.norm()).item()
    assert err <= TOL["f16"], err


@pytest.mark.gpu
@pytest.mark.parametrize("nq,nk", [(1000, 1000), (1, 4096)])
def test_flash_attn_func_makes_no_copies(cuda_flashmlir, nq, nk):
    """[B, N, H, D] in, [B, N, H, D] out, and nothing copied: the only
    allocations of a call are O's (and, for decode's split-KV launch, its
    partials' workspace)."""
    torch, flashmlir = cuda_flashmlir
    torch.manual_seed(nq)
    b, hq, hkv, d = 2, 16, 4, 128
    q = torch.randn(b, nq, hq, d, device="cuda", dtype=torch.float16)
    k = torch.randn(b, nk, hkv, d, device="cuda", dtype=torch.float16)
    v = torch.randn(b, nk, hkv, d, device="cuda", dtype=torch.float16)
    flashmlir.flash_attn_func(q, k, v, causal=True)  # warm: kernel, scratch
    torch.cuda.synchronize()

    def allocations():
        return torch.cuda.memory_stats()["allocation.all.allocated"]

    before = allocations()
    out = flashmlir.flash_attn_func(q, k, v, causal=True)
    torch.cuda.synchronize()
    # O, and for a split-KV launch its f32 partials (a workspace per call);
    # copies of q, k, v into [B, H, N, D] and of O back would be four more.
    # (Allocation counts, not bytes: the caching allocator may hand out a
    # cached block larger than asked for.)
    assert allocations() - before == (2 if nq == 1 else 1)
    assert out.shape == q.shape and out.is_contiguous()
    # Equal lengths: bottom-right causal is top-left; decode's one query
    # sees every key.
    ref = reference(torch, q.transpose(1, 2), k.transpose(1, 2),
                    v.transpose(1, 2), nq == nk, 1 / math.sqrt(d))
    err = ((out.transpose(1, 2).float() - ref).norm() / ref.norm()).item()
    assert err <= TOL["f16"], err


@pytest.mark.gpu
def test_c_runtime_strided_launch(cuda_flashmlir):
    """faKernelLaunchStrided on [B, N, H, D] tensors, O written in place.
    The runtime library has no MLIR inside: the H200 run carries
    build/lib/libFARuntime.so."""
    torch, flashmlir = cuda_flashmlir
    import os
    from conftest import load_c_runtime
    lib, Strides, strides = load_c_runtime()
    kdir = os.environ.get("FLASHMLIR_KERNEL_DIR")
    assert kdir, "set FLASHMLIR_KERNEL_DIR (bench/build_kernels.sh output)"

    kernel = ctypes.c_void_p()
    assert lib.faKernelLoadFiles(
        f"{kdir}/sm_90a_d128_f16".encode(), 0, ctypes.byref(kernel)) == 0, \
        lib.faRuntimeLastError()
    b, hq, hkv, nq, nk, d = 2, 8, 2, 300, 700, 128
    torch.manual_seed(3)
    q = torch.randn(b, nq, hq, d, device="cuda", dtype=torch.float16)
    k = torch.randn(b, nk, hkv, d, device="cuda", dtype=torch.float16)
    v = torch.randn(b, nk, hkv, d, device="cuda", dtype=torch.float16)
    out = torch.full_like(q, float("nan"))
    lse = torch.empty(b, hq, nq, device="cuda")

    lib.faKernelLaunchStrided.restype = ctypes.c_int
    args = []
    for t in (q, k, v, out):
        args += [ctypes.c_void_p(t.data_ptr()), ctypes.byref(strides(t))]
    rc = lib.faKernelLaunchStrided(
        kernel, *args, ctypes.c_void_p(lse.data_ptr()), b, hq, hkv, nq, nk,
        ctypes.c_float(1 / math.sqrt(d)), -1,
        ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
    assert rc == 0, lib.faRuntimeLastError()
    torch.cuda.synchronize()
    ref = reference(torch, *(t.transpose(1, 2) for t in (q, k, v)), False,
                    1 / math.sqrt(d))
    err = ((out.transpose(1, 2).float() - ref).norm() / ref.norm()).item()
    assert err <= TOL["f16"], err
    # A row stride that is not a multiple of 8 elements is refused.
    bad = Strides(nq * hq * d, d, hq * d + 4)
    rc = lib.faKernelLaunchStrided(
        kernel, ctypes.c_void_p(q.data_ptr()), ctypes.byref(bad),
        *args[2:], ctypes.c_void_p(lse.data_ptr()), b, hq, hkv, nq, nk,
        ctypes.c_float(1.0), -1, None)
    assert rc == 1
    assert b"row stride must be a positive multiple of 8" in \
        lib.faRuntimeLastError()
    lib.faKernelDestroy(kernel)


@pytest.mark.gpu
def test_bad_strides_refused(cuda_flashmlir):
    torch, flashmlir = cuda_flashmlir
    from flashmlir.runtime import KernelArgumentError
    good = torch.randn(1, 4, 64, 64, device="cuda", dtype=torch.float16)
    kernel, _ = flashmlir._launcher(good, good, False, None)
    # Row stride 68 elements (136 bytes): not a 16-byte multiple.
    odd = torch.randn(1, 4, 64, 68, device="cuda",
                      dtype=torch.float16)[..., :64]
    with pytest.raises(KernelArgumentError, match="row stride"):
        kernel(odd, good, good)
    # D not innermost.
    t = torch.randn(1, 4, 64, 64, device="cuda",
                    dtype=torch.float16).transpose(2, 3)
    with pytest.raises(KernelArgumentError, match="unit stride on D"):
        kernel(t, good, good)
