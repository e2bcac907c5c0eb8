"""flashmlir.attention on a GPU (the H200): numerics against an fp32
softmax(QK^T)V reference on random inputs, ragged lengths, GQA, causal;
the launcher cache; errors. Marked `gpu`: scripts/test.sh deselects them
(the build machine has no GPU), the H200 run selects them:

    FLASHMLIR_KERNEL_DIR=.cubins python3 -m pytest -m gpu python/tests
"""
import math
import os

import pytest

from conftest import masked_reference


pytestmark = pytest.mark.gpu

TOL = {"f16": 2e-3, "bf16": 1e-2}  # relative L2, as bench/harness.py


def reference(torch, q, k, v, causal, scale):
    group = q.shape[1] // k.shape[1]
    kf = k.float().repeat_interleave(group, 1)
    vf = v.float().repeat_interleave(group, 1)
    s = (q.float() @ kf.transpose(-1, -2)) * scale
    if causal:
        nq, nk = q.shape[2], k.shape[2]
        s = s.masked_fill(torch.ones(nq, nk, dtype=torch.bool,
                                     device=q.device).triu(1), float("-inf"))
    return torch.softmax(s, -1).nan_to_num(0.0) @ vf


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
# 32, 96 and 160 run on the tiles of the next multiple of 64, zero-filled.
@pytest.mark.parametrize("d", [32, 64, 96, 128, 160, 192, 256])
@pytest.mark.parametrize("causal", [False, True])
# (4, 32, 8, 1000, 1100) has more tiles (768 to 1024) than the H200 has
# SMs: a persistent kernel's CTAs run several tiles each.
@pytest.mark.parametrize("b,hq,hkv,nq,nk", [(2, 8, 2, 1000, 1000),
                                            (1, 4, 1, 77, 300),
                                            (1, 2, 2, 300, 77),
                                            (4, 32, 8, 1000, 1100)])
def test_attention_matches_reference(cuda_flashmlir, dtype, d, causal, b, hq, hkv, nq,
                                     nk):
    torch, flashmlir = cuda_flashmlir
    dt = {"f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    torch.manual_seed(d + nq + causal)
    q = torch.randn(b, hq, nq, d, device="cuda", dtype=dt)
    k = torch.randn(b, hkv, nk, d, device="cuda", dtype=dt)
    v = torch.randn(b, hkv, nk, d, device="cuda", dtype=dt)
    out = flashmlir.attention(q, k, v, causal=causal)
    assert out.shape == q.shape and out.dtype == dt
    ref = reference(torch, q, k, v, causal, 1 / math.sqrt(d))
    err = ((out.float() - ref).norm() / ref.norm()).item()
    assert err < TOL[dtype], err
    assert torch.isfinite(out).all()


def test_scale_is_honoured(cuda_flashmlir):
    torch, flashmlir = cuda_flashmlir
    q = torch.randn(1, 2, 128, 64, device="cuda", dtype=torch.float16)
    out = flashmlir.attention(q, q, q, scale=0.05)
    ref = reference(torch, q, q, q, False, 0.05)
    assert ((out.float() - ref).norm() / ref.norm()).item() < 2e-3


def test_launchers_are_cached(cuda_flashmlir):
    torch, flashmlir = cuda_flashmlir
    q = torch.randn(1, 2, 64, 128, device="cuda", dtype=torch.float16)
    flashmlir.attention(q, q, q)
    n = len(flashmlir._launchers)
    flashmlir.attention(q, q, q)
    assert len(flashmlir._launchers) == n


def test_bad_inputs(cuda_flashmlir):
    torch, flashmlir = cuda_flashmlir
    from flashmlir.runtime import KernelArgumentError
    cpu = torch.randn(1, 1, 16, 64, dtype=torch.float16)
    with pytest.raises(KernelArgumentError, match="CUDA tensor"):
        flashmlir.attention(cpu, cpu, cpu)
    f32 = torch.randn(1, 1, 16, 64, device="cuda")
    with pytest.raises(KernelArgumentError,
                       match="float16, bfloat16 or \\(sm_90a\\) float8_e4m3fn"):
        flashmlir.attention(f32, f32, f32)


def test_repeated_calls_are_still_checked(cuda_flashmlir):
    """A call like the last one that passed reuses its checks
    (Kernel._check's signature), but not its data pointers' alignment, and
    any change of shape, stride or dtype is checked in full."""
    torch, flashmlir = cuda_flashmlir
    from flashmlir.runtime import KernelArgumentError
    kernel = flashmlir._kernel_for("sm_90a", 64, "f16", False,
                                   os.environ.get("FLASHMLIR_KERNEL_DIR"))
    q = torch.randn(1, 2, 64, 64, device="cuda", dtype=torch.float16)
    out = torch.empty_like(q)
    ref = reference(torch, q, q, q, False, 1 / math.sqrt(64))
    for _ in range(3):
        kernel(q, q, q, out=out)
        assert (out.float() - ref).norm() / ref.norm() < TOL["f16"]
    # The same shape and strides at an address 2 bytes off 16.
    flat = torch.empty(q.numel() + 8, device="cuda", dtype=torch.float16)
    shifted = flat[1:1 + q.numel()].view_as(q)
    assert shifted.shape == q.shape and shifted.stride() == q.stride()
    with pytest.raises(KernelArgumentError, match="16-byte aligned"):
        kernel(shifted, q, q, out=out)
    # Another dtype, then another head dim, after a passing call each.
    kernel(q, q, q, out=out)
    with pytest.raises(KernelArgumentError, match="float16"):
        kernel(q.bfloat16(), q.bfloat16(), q.bfloat16(), out=out)
    kernel(q, q, q, out=out)
    wide = torch.randn(1, 2, 64, 128, device="cuda", dtype=torch.float16)
    with pytest.raises(KernelArgumentError, match="head dim must be 64"):
        kernel(wide, wide, wide)


def test_dynamic_scheduler_on_two_streams(cuda_flashmlir):
    # Causal D = 128 is persistent with the dynamic tile scheduler: each
    # stream gets its own counter, so launches on two streams may overlap,
    # and every launch leaves its counter zero for the next on the stream.
    torch, flashmlir = cuda_flashmlir
    torch.manual_seed(5)
    shape = (4, 32, 1000, 128)
    q, k, v = (torch.randn(*shape, device="cuda", dtype=torch.float16)
               for _ in range(3))
    ref = reference(torch, q, k, v, True, 1 / math.sqrt(128))
    flashmlir.attention(q, k, v, causal=True)
    launch = flashmlir._launchers[("sm_90a", 128, "f16", True)]
    assert launch.meta["tile_scheduler"] == "dynamic"
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    outs = [[torch.full_like(q, float("nan")) for _ in range(4)]
            for _ in streams]
    torch.cuda.synchronize()
    for i in range(4):
        for s, o in zip(streams, outs):
            with torch.cuda.stream(s):
                launch(q, k, v, out=o[i])
    torch.cuda.synchronize()
    from flashmlir.runtime import _TILE_COUNTERS
    assert len([key for key in _TILE_COUNTERS
                if key[1] in (s.cuda_stream for s in streams)]) == 2
    for o in outs:
        for x in o:
            err = ((x.float() - ref).norm() / ref.norm()).item()
            assert err < TOL["f16"], err


# (causal, window_size, Nq, Nk): a chunk of queries after a KV cache, decode,
# equal lengths (the top-left kernel serves), a symmetric and a causal window,
# and separate left and right reaches (a diagonal offset: bottom-right, and
# top-left where the lengths are equal).
@pytest.mark.parametrize("causal,window_size,nq,nk", [
    (True, (-1, -1), 77, 300), (True, (-1, -1), 1, 1531),
    (True, (-1, -1), 256, 256), (False, (16, 16), 77, 300),
    (True, (16, 0), 77, 300), (False, (16, 5), 77, 300),
    (False, (-1, 7), 256, 256), (False, (9, 3), 333, 333)])
def test_flash_attn_func(cuda_flashmlir, causal, window_size, nq, nk):
    """flashmlir.flash_attn_func on flash-attention's [B, N, H, D] tensors
    and bottom-right masks, against an explicit-mask reference."""
    torch, flashmlir = cuda_flashmlir
    torch.manual_seed(nq + nk)
    b, hq, hkv, d = 2, 8, 2, 128
    q = torch.randn(b, nq, hq, d, device="cuda", dtype=torch.float16)
    k = torch.randn(b, nk, hkv, d, device="cuda", dtype=torch.float16)
    v = torch.randn(b, nk, hkv, d, device="cuda", dtype=torch.float16)
    out = flashmlir.flash_attn_func(q, k, v, causal=causal,
                                    window_size=window_size)
    assert out.shape == q.shape
    ref = masked_reference(torch, *(t.transpose(1, 2) for t in (q, k, v)),
                           1 / math.sqrt(d), causal,
                           window_size=window_size).transpose(1, 2)
    err = ((out.float() - ref).norm() / ref.norm()).item()
    assert err <= TOL["f16"], err


# Kernels of bench/build_kernels.sh with a diagonal offset on each schedule:
# (file, flash-attention's window_size, head dim, shapes (Nq, Nk)). Top-left
# kernels run on equal lengths (where flash-attention's bottom-right
# convention, the reference's, is theirs).
@pytest.mark.parametrize("name,window_size,d,shapes", [
    ("sm_90a_d128_f16_causal_w13_do3", (9, 3), 128, [(333, 333), (1000, 1000)]),
    ("offset_w13_do3_single", (9, 3), 128, [(333, 333)]),
    ("offset_w13_do3_mmasync", (9, 3), 128, [(333, 333)]),
    ("sm_90a_d128_f16_causal_w22_bralign_do5", (16, 5), 128,
     [(77, 300), (300, 77), (1, 1531)]),
    ("offset_w22_do5_bralign_mmasync", (16, 5), 128, [(77, 300), (300, 77)]),
    ("offset_w22_do5_bralign_splitkv", (16, 5), 128, [(1, 1531), (3, 4099)]),
    ("offset_do7_bralign_d64", (-1, 7), 64, [(77, 300), (300, 77)])])
def test_diagonal_offset_schedules(cuda_flashmlir, name, window_size, d,
                                   shapes):
    """Separate left and right window reaches (causal, a window and a
    diagonal offset) on the persistent, one-tile, mma.sync and split-KV
    kernels, against the reference's flash-attention masks; the LSE too."""
    torch, _ = cuda_flashmlir
    from flashmlir import runtime
    kernel = runtime.Kernel.load(
        os.path.join(os.environ.get("FLASHMLIR_KERNEL_DIR", ".cubins"), name))
    assert kernel.meta["diagonal_offset"] == window_size[1]
    for nq, nk in shapes:
        torch.manual_seed(nq + nk)
        b, hq, hkv = 2, 8, 2
        q = torch.randn(b, hq, nq, d, device="cuda", dtype=torch.float16)
        k = torch.randn(b, hkv, nk, d, device="cuda", dtype=torch.float16)
        v = torch.randn(b, hkv, nk, d, device="cuda", dtype=torch.float16)
        out, lse = kernel(q, k, v)
        ref = masked_reference(torch, q, k, v, 1 / math.sqrt(d),
                               window_size=window_size)
        err = ((out.float() - ref).norm() / ref.norm()).item()
        assert err <= TOL["f16"], (nq, nk, err)
        # Rows that see no key (Nq > Nk, before the band) give O = 0 and
        # LSE = -inf, as flash-attention's.
        seen = ref.abs().sum(-1) > 0
        assert torch.isneginf(lse[~seen]).all()
        s = (q.float() @ k.float().repeat_interleave(hq // hkv, 1)
             .transpose(-1, -2)) / math.sqrt(d)
        i = torch.arange(nq, device="cuda")[:, None] + (nk - nq)
        j = torch.arange(nk, device="cuda")[None, :]
        left, right = window_size
        keep = (j <= i + right) & ((j >= i - left) if left >= 0 else True)
        want = s.masked_fill(~keep, float("-inf")).logsumexp(-1)
        assert (lse[seen] - want[seen]).abs().max().item() < 1e-2


def test_flash_attn_func_refuses(cuda_flashmlir):
    torch, flashmlir = cuda_flashmlir
    q = torch.randn(1, 8, 2, 64, device="cuda", dtype=torch.float16)
    from flashmlir.runtime import KernelArgumentError
    with pytest.raises(KernelArgumentError, match="dropout"):
        flashmlir.flash_attn_func(q, q, q, dropout_p=0.1)
    with pytest.raises(KernelArgumentError, match="left only"):
        flashmlir.flash_attn_func(q, q, q, window_size=(4, -1))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("b,hq,hkv,nq,nk", [(2, 8, 2, 333, 333),
                                            (1, 4, 4, 77, 77)])
def test_narrow_values(cuda_flashmlir, causal, b, hq, hkv, nq, nk):
    """V and O of 128 columns against Q and K of 192 (DeepSeek's): the
    kernel of bench/build_kernels.sh (sm_90a_d192_dv128_f16*), by
    flash-attention's 2x rule against fp32, measured with torch's f16
    math; O has V's head dim."""
    torch, flashmlir = cuda_flashmlir
    torch.manual_seed(nq + causal)
    q = torch.randn(b, hq, nq, 192, device="cuda", dtype=torch.float16)
    k = torch.randn(b, hkv, nk, 192, device="cuda", dtype=torch.float16)
    v = torch.randn(b, hkv, nk, 128, device="cuda", dtype=torch.float16)
    out = flashmlir.attention(q, k, v, causal=causal, num_splits=1)
    assert out.shape == (b, hq, nq, 128)
    scale = 1 / math.sqrt(192)
    exact = reference(torch, q, k, v, causal, scale)
    group = hq // hkv
    s = (q @ k.repeat_interleave(group, 1).transpose(-1, -2)) * scale
    if causal:
        s = s.masked_fill(torch.ones(nq, nk, dtype=torch.bool,
                                     device="cuda").triu(1), float("-inf"))
    f16 = (torch.softmax(s, -1) @ v.repeat_interleave(group, 1)).float()
    ours = (out.float() - exact).abs().max().item()
    assert ours <= 2 * (f16 - exact).abs().max().item() + 1e-4, ours


def test_narrow_values_flash_attn_func(cuda_flashmlir):
    """flash_attn_func with [B, N, H, D] views and V of 128 columns,
    bottom-right causal (Nq < Nk)."""
    torch, flashmlir = cuda_flashmlir
    torch.manual_seed(5)
    b, hq, hkv, nq, nk = 2, 8, 2, 77, 300
    q = torch.randn(b, nq, hq, 192, device="cuda", dtype=torch.float16)
    k = torch.randn(b, nk, hkv, 192, device="cuda", dtype=torch.float16)
    v = torch.randn(b, nk, hkv, 128, device="cuda", dtype=torch.float16)
    out = flashmlir.flash_attn_func(q, k, v, causal=True, num_splits=1)
    assert out.shape == (b, nq, hq, 128)
    ref = masked_reference(torch, *(t.transpose(1, 2) for t in (q, k, v)),
                           1 / math.sqrt(192), True, 0).transpose(1, 2)
    err = ((out.float() - ref).norm() / ref.norm()).item()
    assert err <= TOL["f16"], err
