"""The sm_90a FP8 (e4m3) kernel through the Python runtime: numerics on
the H200 against an independent torch emulation of FP8 attention
(flash-attention's 2x rule, adapted: the emulation's error is what FP8
costs) and argument checks; the C launcher (faKernelLaunchE4M3) against
the Python runtime. (The C reader's refusals of bad e4m3 metadata are
test/Target/fa-compile-e4m3.test's.)

GPU tests read the kernels of bench/build_fp8_kernels.sh from
FLASHMLIR_FP8_KERNEL_DIR (default .fp8)."""
import math
import os

import pytest


def _kernel_dir():
    return os.environ.get("FLASHMLIR_FP8_KERNEL_DIR", ".fp8")


def _quantize(torch, x):
    scale = 448.0 / x.abs().max().clamp(min=1e-12)
    return (x * scale).to(torch.float8_e4m3fn), (1.0 / scale).reshape(1)


def _mask(torch, nq, nk, causal, window=0, shift=0):
    """Masked (True) positions: query i at key position i + shift
    (bottom-right: shift = Nk - Nq) sees key j if j <= i + shift (causal)
    and |i + shift - j| < window."""
    i = torch.arange(nq, device="cuda")[:, None] + shift
    j = torch.arange(nk, device="cuda")[None, :]
    masked = torch.zeros(nq, nk, dtype=torch.bool, device="cuda")
    if causal:
        masked |= j > i
    if window:
        masked |= (i - j).abs() >= window
    return masked


def _exact(torch, q, k, v, scale, causal, mask=None):
    g = q.shape[1] // k.shape[1]
    k = k.double().repeat_interleave(g, 1)
    v = v.double().repeat_interleave(g, 1)
    s = q.double() @ k.transpose(-1, -2) * scale
    if mask is None and causal:
        mask = _mask(torch, s.shape[-2], s.shape[-1], True)
    if mask is not None:
        s = s.masked_fill(mask, float("-inf"))
    return torch.softmax(s, -1) @ v, torch.logsumexp(s, -1)


def _emulate(torch, q, k, v, scale, causal, block=128, mask=None):
    """FP8 attention as the kernel computes it: online softmax over blocks
    of 128 keys against the running max, P cast to e4m3 as 2^8 P, P V and
    l in float32."""
    g = q.shape[1] // k.shape[1]
    k = k.float().repeat_interleave(g, 1)
    v = v.float().repeat_interleave(g, 1)
    nq, nk = q.shape[2], k.shape[2]
    m = torch.full(q.shape[:3], float("-inf"), device=q.device)
    l = torch.zeros(q.shape[:3], device=q.device)
    o = torch.zeros(*q.shape[:3], v.shape[-1], device=q.device)
    if mask is None and causal:
        mask = _mask(torch, nq, nk, True)
    for j in range(0, nk, block):
        s = q.float() @ k[:, :, j:j + block].transpose(-1, -2) * scale
        if mask is not None:
            s = s.masked_fill(mask[:, j:j + block], float("-inf"))
        m_new = torch.maximum(m, s.amax(-1))
        base = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        alpha = torch.exp(m - base)
        p = torch.exp(s - base[..., None]) * 256
        o = o * alpha[..., None] + p.to(torch.float8_e4m3fn).float() @ \
            v[:, :, j:j + block]
        l = l * alpha + p.sum(-1)
        m = m_new
    return o / l[..., None]


@pytest.mark.gpu
@pytest.mark.parametrize("name,causal", [
    ("sm_90a_d128_e4m3_bf16", False), ("sm_90a_d128_e4m3_bf16_causal", True),
    ("sm_90a_d128_e4m3_f16", False), ("sm_90a_d128_e4m3_f16_causal", True),
    ("sm_90a_d256_e4m3_bf16", False), ("sm_90a_d256_e4m3_f16_causal", True)])
@pytest.mark.parametrize("shape", [(2, 8, 2, 333, 333), (3, 6, 3, 77, 77),
                                   (1, 4, 4, 1000, 1000), (2, 4, 1, 129, 129)])
def test_e4m3_kernel_matches_emulation(cuda_flashmlir, name, causal, shape):
    torch, _ = cuda_flashmlir
    from flashmlir.runtime import Kernel
    kernel = Kernel.load(os.path.join(_kernel_dir(), name))
    b, hq, hkv, nq, nk = shape
    d = kernel.meta["head_dim"]
    g = torch.Generator(device="cuda").manual_seed(nq + hq)
    q = torch.randn(b, hq, nq, d, device="cuda", generator=g)
    k = torch.randn(b, hkv, nk, d, device="cuda", generator=g)
    v = torch.randn(b, hkv, nk, d, device="cuda", generator=g)
    (q8, qd), (k8, kd), (v8, vd) = (_quantize(torch, t) for t in (q, k, v))
    # uint8 codes are accepted as well as float8_e4m3fn.
    out, lse = kernel(q8, k8.view(torch.uint8), v8, q_descale=qd,
                      k_descale=kd, v_descale=float(vd))
    torch.cuda.synchronize()
    assert out.dtype == (torch.bfloat16 if "bf16" in name else torch.float16)
    qf, kf, vf = q8.float() * qd, k8.float() * kd, v8.float() * vd
    scale = 1 / math.sqrt(d)
    ref, ref_lse = _exact(torch, qf, kf, vf, scale, causal)
    emu = _emulate(torch, qf, kf, vf, scale, causal,
                   block=kernel.meta["block_c"])
    err = (out.double() - ref).abs().max().item()
    base = (emu.double() - ref).abs().max().item()
    assert torch.isfinite(out).all()
    assert err <= 2 * base + 1e-3, (err, base)
    assert (lse.double() - ref_lse).abs().max().item() < 1e-2


@pytest.mark.gpu
def test_e4m3_strided_inputs(cuda_flashmlir):
    """[B, N, H, D] views (flash-attn's layout) run without a copy: the
    tensor maps take q's and k's strides, the layout kernel V's."""
    torch, _ = cuda_flashmlir
    from flashmlir.runtime import Kernel
    kernel = Kernel.load(os.path.join(_kernel_dir(), "sm_90a_d128_e4m3_bf16"))
    g = torch.Generator(device="cuda").manual_seed(4)
    x = [torch.randn(2, 300, 4, 128, device="cuda", generator=g)
         for _ in range(3)]
    (q8, qd), (k8, kd), (v8, vd) = (_quantize(torch, t) for t in x)
    view = [t.transpose(1, 2) for t in (q8, k8, v8)]
    out, _ = kernel(*view, q_descale=qd, k_descale=kd, v_descale=vd)
    contiguous, _ = kernel(*[t.contiguous() for t in view], q_descale=qd,
                           k_descale=kd, v_descale=vd)
    torch.cuda.synchronize()
    assert torch.equal(out, contiguous)


@pytest.mark.gpu
@pytest.mark.parametrize("change,message", [
    (dict(q_descale=None), "needs q_descale"),
    (dict(v_descale=0.0), "v_descale must be in [2^-126, 2^127]"),
    (dict(k_descale="half"), "k_descale must be a float32 tensor of one"),
    (dict(q="f16"), "q must be float8_e4m3fn or uint8"),
    (dict(num_splits=2), "e4m3 kernels take no num_splits"),
])
def test_e4m3_kernel_refuses(cuda_flashmlir, change, message):
    torch, _ = cuda_flashmlir
    from flashmlir.runtime import Kernel, KernelArgumentError
    kernel = Kernel.load(os.path.join(_kernel_dir(), "sm_90a_d128_e4m3_bf16"))
    x = torch.randn(1, 2, 64, 128, device="cuda")
    codes, descale = _quantize(torch, x)
    args = dict(q=codes, k=codes, v=codes, q_descale=descale,
                k_descale=descale, v_descale=descale)
    for key, value in change.items():
        if value == "half":
            value = descale.half()
        elif value == "f16":
            value = x.half()
        args[key] = value
    with pytest.raises(KernelArgumentError, match=__import__("re").escape(
            message)):
        kernel(**args)


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attn_func_e4m3(cuda_flashmlir, causal):
    """flash_attn_func / attention on float8_e4m3fn tensors (FA3's FP8
    call: [B, N, H, D], per-tensor descales) run the e4m3 kernel in place:
    the same O as the kernel called on [B, H, N, D] views; O is bf16."""
    torch, flashmlir = cuda_flashmlir
    from flashmlir.runtime import Kernel, KernelArgumentError
    g = torch.Generator(device="cuda").manual_seed(21)
    x = [torch.randn(2, 300, h, 128, device="cuda", generator=g)
         for h in (8, 2, 2)]
    (q8, qd), (k8, kd), (v8, vd) = (_quantize(torch, t) for t in x)
    out = flashmlir.flash_attn_func(q8, k8, v8, causal=causal,
                                    kernel_dir=_kernel_dir(), q_descale=qd,
                                    k_descale=kd, v_descale=vd)
    assert out.dtype == torch.bfloat16 and out.shape == q8.shape
    name = "sm_90a_d128_e4m3_bf16" + ("_causal" if causal else "")
    kernel = Kernel.load(os.path.join(_kernel_dir(), name))
    direct, _ = kernel(*[t.transpose(1, 2) for t in (q8, k8, v8)],
                       q_descale=qd, k_descale=kd, v_descale=vd)
    via = flashmlir.attention(*[t.transpose(1, 2) for t in (q8, k8, v8)],
                              causal=causal, kernel_dir=_kernel_dir(),
                              q_descale=qd, k_descale=kd, v_descale=vd)
    torch.cuda.synchronize()
    assert torch.equal(out.transpose(1, 2), direct)
    assert torch.equal(via, direct)
    with pytest.raises(KernelArgumentError, match="no split-KV"):
        flashmlir.flash_attn_func(q8, k8, v8, kernel_dir=_kernel_dir(),
                                  num_splits=2)


@pytest.mark.gpu
@pytest.mark.parametrize("causal,window_size,nq,nk", [
    (True, (-1, -1), 100, 700), (True, (-1, -1), 333, 333),
    (False, (16, 16), 200, 500)])
def test_flash_attn_func_e4m3_bottom_right(cuda_flashmlir, causal,
                                           window_size, nq, nk):
    """flash-attention's masks on FP8 inputs: causal and windows aligned to
    the bottom-right corner when Nq != Nk (chunked prefill against a
    cache), through flash_attn_func; the 2x rule against the emulation."""
    torch, flashmlir = cuda_flashmlir
    g = torch.Generator(device="cuda").manual_seed(nq + nk)
    x = [torch.randn(2, n, h, 128, device="cuda", generator=g)
         for n, h in ((nq, 4), (nk, 2), (nk, 2))]
    (q8, qd), (k8, kd), (v8, vd) = (_quantize(torch, t) for t in x)
    out = flashmlir.flash_attn_func(q8, k8, v8, causal=causal,
                                    window_size=window_size,
                                    kernel_dir=_kernel_dir(), q_descale=qd,
                                    k_descale=kd, v_descale=vd)
    torch.cuda.synchronize()
    window = window_size[0] + 1 if window_size != (-1, -1) else 0
    mask = _mask(torch, nq, nk, causal, window, shift=nk - nq)
    qf, kf, vf = [(t.float() * s).transpose(1, 2)
                  for t, s in ((q8, qd), (k8, kd), (v8, vd))]
    scale = 1 / math.sqrt(128)
    ref, _ = _exact(torch, qf, kf, vf, scale, causal, mask)
    emu = _emulate(torch, qf, kf, vf, scale, causal, mask=mask)
    got = out.transpose(1, 2).double()
    err = (got - ref).abs().max().item()
    base = (emu.double() - ref).abs().max().item()
    assert torch.isfinite(out).all()
    assert err <= 2 * base + 1e-3, (err, base)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["sm_90a_d128_e4m3_bf16_causal",
                                  "sm_90a_d256_e4m3_f16",
                                  "sm_90a_d128_e4m3_bf16_bc192"])
def test_c_runtime_e4m3_launch(cuda_flashmlir, name):
    """faKernelLaunchE4M3 on flash-attn's [B, N, H, D] views: the V layout
    kernel into the runtime's workspace, then the attention; O and LSE equal
    the Python runtime's launch of the same kernel bit for bit, twice (the
    workspace reused). And the launchers' refusals."""
    import ctypes
    from conftest import load_c_runtime
    torch, _ = cuda_flashmlir
    from flashmlir.runtime import Kernel
    lib, Strides, bnhd = load_c_runtime()
    prefix = os.path.join(_kernel_dir(), name)
    kernel = ctypes.c_void_p()
    assert lib.faKernelLoadFiles(prefix.encode(), 0,
                                 ctypes.byref(kernel)) == 0, \
        lib.faRuntimeLastError()
    lib.faKernelOutDType.restype = ctypes.c_char_p
    out_dtype = lib.faKernelOutDType(kernel).decode()
    b, hq, hkv, nq, nk = 2, 6, 2, 333, 1000
    d = int(name.split("_d")[1].split("_")[0])
    g = torch.Generator(device="cuda").manual_seed(11)
    x = [torch.randn(b, n, h, d, device="cuda", generator=g)
         for n, h in ((nq, hq), (nk, hkv), (nk, hkv))]
    (q8, qd), (k8, kd), (v8, vd) = (_quantize(torch, t) for t in x)
    dt = {"bf16": torch.bfloat16, "f16": torch.float16}[out_dtype]
    out = torch.full((b, nq, hq, d), float("nan"), device="cuda", dtype=dt)
    lse = torch.empty(b, hq, nq, device="cuda")
    scale = 1 / math.sqrt(d)
    c = ctypes.c_void_p

    def launch(launcher, descales):
        args = []
        for t in (q8, k8, v8, out):
            args += [c(t.data_ptr()), ctypes.byref(bnhd(t))]
        return launcher(kernel, *args, c(lse.data_ptr()), b, hq, hkv, nq, nk,
                        ctypes.c_float(scale), *descales,
                        c(torch.cuda.current_stream().cuda_stream))

    # One descale per tensor (descalesPerHead 0).
    descales = [c(t.data_ptr()) for t in (qd, kd, vd)] + [0]
    for _ in range(2):
        out.fill_(float("nan"))
        assert launch(lib.faKernelLaunchE4M3, descales) == 0, \
            lib.faRuntimeLastError()
    torch.cuda.synchronize()
    ref, ref_lse = Kernel.load(prefix)(
        *(t.transpose(1, 2) for t in (q8, k8, v8)), scale=scale,
        q_descale=qd, k_descale=kd, v_descale=vd)
    torch.cuda.synchronize()
    assert torch.equal(out.transpose(1, 2), ref)
    assert torch.equal(lse, ref_lse)
    # A missing descale, and the 16-bit launcher, are refused.
    assert launch(lib.faKernelLaunchE4M3, [descales[0], None,
                                            descales[2], 0]) == 1
    assert b"must be 4-byte aligned f32 scalars" in lib.faRuntimeLastError()
    assert launch(lib.faKernelLaunchStrided, [ctypes.c_int(1)]) == 1
    assert b"is an e4m3 kernel: launch it with faKernelLaunchE4M3" in \
        lib.faRuntimeLastError()
    lib.faKernelDestroy(kernel)


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
def test_e4m3_per_head_descales(cuda_flashmlir, causal):
    """FA3's descales of shape [B, Hkv]: each (batch, K/V head) quantised on
    its own (a head of 8x the others' range among them), a query head taking
    its K/V head's q_descale; against the emulation of the same codes and
    descales by the 2x rule."""
    torch, flashmlir = cuda_flashmlir
    from flashmlir.runtime import Kernel
    name = "sm_90a_d128_e4m3_bf16" + ("_causal" if causal else "")
    kernel = Kernel.load(os.path.join(_kernel_dir(), name))
    b, hq, hkv, n, d = 2, 8, 2, 333, 128
    g = torch.Generator(device="cuda").manual_seed(21)
    x = [torch.randn(b, h, n, d, device="cuda", generator=g)
         for h in (hq, hkv, hkv)]
    for t in x:
        t[:, -1] *= 8  # the last head's range: 8x
    group = hq // hkv

    def per_head(t):
        heads = t.shape[1]
        amax = t.abs().amax(dim=(2, 3)).clamp(min=1e-12)  # [B, H]
        if heads == hq:  # Q: one descale per (batch, K/V head)
            amax = amax.view(b, hkv, group).amax(-1)
        scale = 448.0 / amax
        expanded = scale.repeat_interleave(heads // hkv, 1)[..., None, None]
        return (t * expanded).to(torch.float8_e4m3fn), 1.0 / scale
    (q8, qd), (k8, kd), (v8, vd) = (per_head(t) for t in x)
    out, _ = kernel(q8, k8, v8, q_descale=qd, k_descale=kd, v_descale=vd)
    torch.cuda.synchronize()

    def decode(t8, descale):
        return t8.float() * descale.repeat_interleave(
            t8.shape[1] // hkv, 1)[..., None, None]
    qf, kf, vf = decode(q8, qd), decode(k8, kd), decode(v8, vd)
    scale = 1 / math.sqrt(d)
    ref, _ = _exact(torch, qf, kf, vf, scale, causal)
    emu = _emulate(torch, qf, kf, vf, scale, causal,
                   block=kernel.meta["block_c"])
    err = (out.double() - ref).abs().max().item()
    base = (emu.double() - ref).abs().max().item()
    assert err <= 2 * base + 1e-3, (err, base)
    # Teeth: the first (batch, K/V head)'s descales for every head (a
    # kernel ignoring the layout) would be far off: the last head's range
    # is 8x the others'.
    first = [t[:, :1].expand(b, hkv) for t in (qd, kd, vd)]
    wrong, _ = _exact(torch, decode(q8, first[0]), decode(k8, first[1]),
                      decode(v8, first[2]), scale, causal)
    assert (wrong - ref).abs().max().item() > 20 * (base + 1e-3)
    # [B, Hkv] of another shape is refused.
    from flashmlir.runtime import KernelArgumentError
    with pytest.raises(KernelArgumentError, match="\\[B, Hkv\\]"):
        kernel(q8, k8, v8, q_descale=qd[:1], k_descale=kd, v_descale=vd)


def _per_block(torch, t, rows, heads_of_descale=None):
    """Block quantisation of t [B, H, N, D]: one descale per `rows` rows of
    each (batch, head), [B, H, ceil(N / rows)]; codes = e4m3(t / descale)."""
    b, h, n, d = t.shape
    blocks = -(-n // rows)
    padded = torch.nn.functional.pad(t, (0, 0, 0, blocks * rows - n))
    amax = padded.view(b, h, blocks, rows, d).abs().amax(dim=(3, 4))
    descale = amax.clamp(min=1e-12) / 448.0
    expanded = descale.repeat_interleave(rows, 2)[:, :, :n, None]
    return (t / expanded).to(torch.float8_e4m3fn), descale


@pytest.mark.gpu
@pytest.mark.parametrize("name,causal", [("sm_90a_d128_e4m3_bf16", False),
                                         ("sm_90a_d128_e4m3_bf16_causal",
                                          True),
                                         ("sm_90a_d256_e4m3_bf16", False)])
def test_e4m3_per_block_descales(cuda_flashmlir, name, causal):
    """FlashAttention-3's block quantisation on the kernel: Q's descales per
    (batch, head, B_r-row block), K's per (batch, K/V head, B_c-key block;
    B_c 224 or 128), V's one; a Q block and a K block of 4x the others'
    range (in different batches: where both meet, scores 16x the usual
    magnify the fp8 MMA's accumulation error past what the emulation
    models, per tensor as much), ragged N (a last block of 77 queries, 52
    or 116 keys). Against the emulation
    of the same codes and descales by the 2x rule; the C launcher
    (FA_DESCALE_PER_BLOCK) gives the Python runtime's O."""
    torch, flashmlir = cuda_flashmlir
    from flashmlir.runtime import Kernel, KernelArgumentError
    kernel = Kernel.load(os.path.join(_kernel_dir(), name))
    b, hq, hkv, nq, nk = 2, 4, 2, 333, 500
    d = kernel.meta["head_dim"]
    br, bc = kernel.meta["block_r"], kernel.meta["block_c"]
    assert kernel.descale_blocks(nq, nk) == (-(-nq // br), -(-nk // bc))
    g = torch.Generator(device="cuda").manual_seed(23)
    q = torch.randn(b, hq, nq, d, device="cuda", generator=g)
    k = torch.randn(b, hkv, nk, d, device="cuda", generator=g)
    v = torch.randn(b, hkv, nk, d, device="cuda", generator=g)
    q[0, 1, br:2 * br] *= 4  # a query block of 4x the range
    k[1, 0, bc:2 * bc] *= 4  # a key block of 4x the range
    q8, qd = _per_block(torch, q, br)
    k8, kd = _per_block(torch, k, bc)
    v8, vd = _quantize(torch, v)
    out, _ = kernel(q8, k8, v8, q_descale=qd, k_descale=kd, v_descale=vd)
    torch.cuda.synchronize()

    def decode(t8, descale, rows):
        return t8.float() * descale.repeat_interleave(rows, 2)[
            :, :, :t8.shape[2], None]
    qf, kf, vf = decode(q8, qd, br), decode(k8, kd, bc), v8.float() * vd
    scale = 1 / math.sqrt(d)
    shift = nk - nq if kernel.meta["bottom_right"] else 0
    mask = _mask(torch, nq, nk, True, shift=shift) if causal else None
    ref, _ = _exact(torch, qf, kf, vf, scale, causal, mask)
    emu = _emulate(torch, qf, kf, vf, scale, causal,
                   block=kernel.meta["block_c"], mask=mask)
    err = (out.double() - ref).abs().max().item()
    base = (emu.double() - ref).abs().max().item()
    assert err <= 2 * base + 1e-3, (err, base)
    # Teeth: block 0's descales for every block (a kernel reading one per
    # head) would be far off: two blocks have 4x the range.
    wrong, _ = _exact(torch, decode(q8, qd[:, :, :1].expand_as(qd), br),
                      decode(k8, kd[:, :, :1].expand_as(kd), bc), vf, scale,
                      causal, mask)
    assert (wrong - ref).abs().max().item() > 10 * (base + 1e-3)
    # Block counts other than the kernel's tiles, and a V descale per
    # block, are refused.
    with pytest.raises(KernelArgumentError, match="q_descale must be a "
                       "float32 tensor of shape \\(2, 4, 3\\)"):
        kernel(q8, k8, v8, q_descale=qd[:, :, :2], k_descale=kd,
               v_descale=vd)
    with pytest.raises(KernelArgumentError, match="v_descale must be one"):
        kernel(q8, k8, v8, q_descale=qd, k_descale=kd,
               v_descale=torch.ones(b, hkv, kd.shape[2], device="cuda"))

    # The C launcher, descale layout FA_DESCALE_PER_BLOCK (2): the same O.
    import ctypes
    from conftest import load_c_runtime
    lib, _, _ = load_c_runtime()
    handle = ctypes.c_void_p()
    prefix = os.path.join(_kernel_dir(), name)
    assert lib.faKernelLoadFiles(prefix.encode(), 0,
                                 ctypes.byref(handle)) == 0, \
        lib.faRuntimeLastError()
    block_r, block_c = ctypes.c_int(), ctypes.c_int()
    assert lib.faKernelTiles(handle, ctypes.byref(block_r),
                             ctypes.byref(block_c)) == 0
    assert (block_r.value, block_c.value) == (br, bc)
    c_out = torch.full_like(out, float("nan"))
    lse = torch.empty(b, hq, nq, device="cuda")
    c = ctypes.c_void_p
    vd1 = vd.reshape(1).contiguous()
    rc = lib.faKernelLaunchE4M3(
        handle, c(q8.data_ptr()), None, c(k8.data_ptr()), None,
        c(v8.data_ptr()), None, c(c_out.data_ptr()), None,
        c(lse.data_ptr()), b, hq, hkv, nq, nk, ctypes.c_float(scale),
        c(qd.data_ptr()), c(kd.data_ptr()), c(vd1.data_ptr()), 2,
        c(torch.cuda.current_stream().cuda_stream))
    assert rc == 0, lib.faRuntimeLastError()
    torch.cuda.synchronize()
    assert torch.equal(c_out, out)
    lib.faKernelDestroy(handle)

