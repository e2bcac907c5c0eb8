"""FP8 (e4m3) attention on the sm_90a kernel (issue 18): numerics and speed.

    bash bench/build_fp8_kernels.sh .fp8               # on the build machine
    python3 bench/fp8.py check .fp8                    # numerics
    python3 bench/fp8.py bench .fp8 .cubins            # speed
    python3 bench/fp8.py rmse .fp8                     # FA3-style RMSE table
                                                       # (per tensor, per block,
                                                       # incoherent processing)
    python3 bench/fp8.py variants FOLDER [F16_FOLDER] [B,H,N]  # an A/B

Inputs are float32 N(0, 1) (or with outliers), quantised per tensor as
FlashAttention-3's baseline does: scale = 448 / amax, x8 = e4m3(x * scale),
descale = 1 / scale; and (check, rmse) with FA3's block quantisation: Q and
K per tile of the kernel (one descale per 128 rows of each (batch, head)),
V per tensor.

Numerics (flash-attention's 2x rule, adapted to FP8): the reference is the
exact attention of the dequantised inputs (float64); the baseline is an
independent torch emulation of the kernel's arithmetic -- the online
softmax over blocks of 128 keys with its running max, P cast to e4m3 as
2^8 P, P V in float32, l from the unrounded P -- whose error is what FP8
costs. The kernel passes when its max error is at most twice the
emulation's (+ 1e-3), and its LSE is within 1e-2 of the reference. A wrong
register layout (P's keys against the wrong V rows) gives errors of the
size of O itself.

Speed: TFLOP/s at 16k tokens (B 1 x 16384 and B 4 x 4096, H 16, D 128 and
256),
causal or not: the e4m3 call (V layout + attention), the layout alone, our
f16 kernel (from the harness folder) and torch SDPA's cuDNN backend in f16,
same run; triton's do_bench median.
"""
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Kernel, kernel_names  # noqa: E402
from common import median_ms  # noqa: E402

E4M3 = torch.float8_e4m3fn


def quantize(x):
    """Per-tensor e4m3 quantisation: (codes, descale)."""
    amax = x.abs().max().clamp(min=1e-12)
    scale = 448.0 / amax
    codes = (x * scale).clamp(-448, 448).to(E4M3)
    return codes, (1.0 / scale).float().reshape(1)


def quantize_blocks(x, rows):
    """Block quantisation (FA3's, fa-block-quantize's): one descale per
    `rows` rows of each (batch, head) of x [B, H, N, D]; (codes, descale
    [B, H, ceil(N / rows)])."""
    b, h, n, d = x.shape
    blocks = -(-n // rows)
    padded = F.pad(x, (0, 0, 0, blocks * rows - n))
    amax = padded.view(b, h, blocks, rows, d).abs().amax(dim=(3, 4))
    descale = amax.clamp(min=1e-12) / 448.0
    per_row = descale.repeat_interleave(rows, 2)[:, :, :n, None]
    return (x / per_row).clamp(-448, 448).to(E4M3), descale


def dequantize_blocks(codes, descale, rows):
    return codes.float() * descale.repeat_interleave(rows, 2)[
        :, :, :codes.shape[2], None]


def hadamard(d, seed, device):
    """FA3's incoherent processing: M = diag(s) H_D / sqrt(D), M M^T = I."""
    h = torch.ones(1, 1, dtype=torch.float64)
    while h.shape[0] < d:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    g = torch.Generator().manual_seed(seed)
    signs = torch.randint(0, 2, (d,), generator=g).double() * 2 - 1
    return (signs[:, None] * h / math.sqrt(d)).float().to(device)


def mask_of(nq, nk, causal, device, window=0, shift=0):
    """Masked (True) positions, or None: query i at key position i + shift
    (bottom-right: shift = Nk - Nq) sees key j if j <= i + shift (causal)
    and |i + shift - j| < window (a window)."""
    if not causal and not window:
        return None
    i = torch.arange(nq, device=device)[:, None] + shift
    j = torch.arange(nk, device=device)[None, :]
    masked = torch.zeros(nq, nk, dtype=torch.bool, device=device)
    if causal:
        masked |= j > i
    if window:
        masked |= (i - j).abs() >= window
    return masked


def masks(meta, nq, nk):
    """The mask arguments of exact and emulate for a kernel's metadata."""
    shift = meta.get("diagonal_offset", 0)
    if meta.get("bottom_right"):
        shift += nk - nq
    return dict(window=meta.get("window", 0), shift=shift)


def exact(q, k, v, scale, causal, window=0, shift=0):
    """float64 attention of [B, H, N, D] inputs (GQA by repetition): O, LSE."""
    g = q.shape[1] // k.shape[1]
    k = k.double().repeat_interleave(g, 1)
    v = v.double().repeat_interleave(g, 1)
    s = torch.matmul(q.double(), k.transpose(-1, -2)) * scale
    m = mask_of(q.shape[2], k.shape[2], causal, q.device, window, shift)
    if m is not None:
        s = s.masked_fill(m, float("-inf"))
    return torch.matmul(torch.softmax(s, -1), v), torch.logsumexp(s, -1)


def emulate(q, k, v, scale, causal, block=128, probs_scale=256.0, window=0,
            shift=0):
    """The kernel's FP8 arithmetic in torch: online softmax over `block`-key
    blocks (base = running max: threshold 0), P cast to e4m3 as
    probs_scale * P, P V and l in float32. Inputs dequantised float32."""
    g = q.shape[1] // k.shape[1]
    k = k.float().repeat_interleave(g, 1)
    v = v.float().repeat_interleave(g, 1)
    nq, nk = q.shape[2], k.shape[2]
    m = torch.full(q.shape[:3], float("-inf"), device=q.device)
    l = torch.zeros(q.shape[:3], device=q.device)
    o = torch.zeros(*q.shape[:3], v.shape[3], device=q.device)
    full = mask_of(nq, nk, causal, q.device, window, shift)
    for j in range(0, nk, block):
        s = torch.matmul(q.float(), k[:, :, j:j + block].transpose(-1, -2)) \
            * scale
        if full is not None:
            s = s.masked_fill(full[:, j:j + block], float("-inf"))
        m_new = torch.maximum(m, s.amax(-1))
        base = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        alpha = torch.exp(m - base)
        p = torch.exp(s - base[..., None]) * probs_scale
        p8 = p.to(E4M3).float()
        o = o * alpha[..., None] + torch.matmul(p8, v[:, :, j:j + block])
        l = l * alpha + p.sum(-1)
        m = m_new
    return o / l[..., None]


def inputs(b, hq, hkv, nq, nk, d, seed, outliers=False):
    g = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(b, hq, nq, d, device="cuda", generator=g)
    k = torch.randn(b, hkv, nk, d, device="cuda", generator=g)
    v = torch.randn(b, hkv, nk, d, device="cuda", generator=g)
    if outliers:
        # FA3's test: N(0, 1) + N(0, 100) on 0.1% of the entries.
        for t in (q, k, v):
            pick = torch.rand(t.shape, device="cuda", generator=g) < 1e-3
            t += pick * torch.randn(t.shape, device="cuda", generator=g) * 10
    return q, k, v


def run(kernel, q, k, v, scale, incoherent=False, blocks=False):
    """Quantises (optionally after FA3's Hadamard on Q and K; per tensor, or
    with `blocks` Q and K per tile of the kernel and V per tensor), runs the
    kernel; returns (O, LSE, dequantised q, k, v)."""
    if incoherent:
        mat = hadamard(q.shape[-1], 7, q.device)
        q, k = q @ mat, k @ mat
    (v8, vd) = quantize(v)
    if blocks:
        br, bc = kernel.meta["block_r"], kernel.meta["block_c"]
        (q8, qd), (k8, kd) = quantize_blocks(q, br), quantize_blocks(k, bc)
        qf, kf = dequantize_blocks(q8, qd, br), dequantize_blocks(k8, kd, bc)
    else:
        (q8, qd), (k8, kd) = quantize(q), quantize(k)
        qf, kf = q8.float() * qd, k8.float() * kd
    out, lse = kernel(q8, k8, v8, scale=scale, q_descale=qd, k_descale=kd,
                      v_descale=vd)
    torch.cuda.synchronize()
    return out, lse, (qf, kf, v8.float() * vd)


def check(folder):
    failures = checks = 0
    for name in kernel_names(folder):
        kernel = Kernel.load(os.path.join(folder, name))
        causal = kernel.meta["causal"]
        d = kernel.meta["head_dim"]
        shapes = [(2, 8, 2, 333, 333), (1, 4, 4, 1000, 1000),
                  (3, 6, 3, 77, 77), (1, 16, 16, 2048, 2048),
                  (2, 4, 1, 129, 129)]
        if not causal:
            shapes += [(2, 4, 4, 200, 700), (1, 2, 2, 1, 4099)]
        for (b, hq, hkv, nq, nk), blocks in [
                (shape, blocks) for shape in shapes
                for blocks in (False, True)]:
            checks += 1
            q, k, v = inputs(b, hq, hkv, nq, nk, d, seed=nq + nk + hq)
            scale = 1 / math.sqrt(d)
            out, lse, (qf, kf, vf) = run(kernel, q, k, v, scale,
                                         blocks=blocks)
            mask = masks(kernel.meta, nq, nk)
            ref, ref_lse = exact(qf, kf, vf, scale, causal, **mask)
            emu = emulate(qf, kf, vf, scale, causal,
                          block=kernel.meta.get("block_c", 128), **mask)
            err = (out.double() - ref).abs().max().item()
            base = (emu.double() - ref).abs().max().item()
            seen = torch.isfinite(ref_lse)  # rows a window leaves no key
            lse_err = (lse.double() - ref_lse)[seen].abs().max().item()
            finite = bool(torch.isfinite(out).all())
            ok = finite and err <= 2 * base + 1e-3 and lse_err <= 1e-2
            failures += not ok
            print(f"{name} B={b} Hq={hq} Hkv={hkv} Nq={nq} Nk={nk}"
                  f"{' per-block' if blocks else ''}: "
                  f"max_err={err:.2e} emulation={base:.2e} "
                  f"lse_err={lse_err:.2e} {'ok' if ok else 'FAIL'}")
    print(f"fp8 check: {checks - failures}/{checks} passed")
    return failures


def rmse(folder):
    """RMSE of O against float64 attention of the unquantised inputs."""
    kernel = Kernel.load(os.path.join(folder, "sm_90a_d128_e4m3_bf16"))
    scale = 1 / math.sqrt(128)
    print("| inputs | per tensor | + incoherent processing | per block "
          "(Q, K) | per block + incoherent |")
    print("|---|---|---|---|---|")
    for label, kw in (("N(0,1)", {}), ("outliers", {"outliers": True})):
        q, k, v = inputs(1, 16, 16, 4096, 4096, 128, seed=11, **kw)
        ref, _ = exact(q, k, v, scale, False)
        row = []
        for blocks in (False, True):
            for incoherent in (False, True):
                out, _, _ = run(kernel, q, k, v, scale, incoherent, blocks)
                row.append(((out.double() - ref) ** 2).mean().sqrt().item())
        print(f"| {label} B 1 H 16 N 4096 | " +
              " | ".join(f"{x:.2e}" for x in row) + " |")
    # Attention sink: query dim 0 set to 1, the first 4 keys' dim 0 to
    # 8 / scale, so their scores are 8 (natural log units) above the rest
    # for every query, their values 0. Every other key's P relative to the
    # sinks' max is ~e^-8 < 2^-10, which e4m3 flushes to zero without the
    # 2^8 probs scale: O would lose most of itself.
    q, k, v = inputs(1, 16, 16, 4096, 4096, 128, seed=12)
    q[..., 0] = 1.0
    k[..., 0] = 0.0
    k[:, :, :4, 0] = 8.0 / scale
    v[:, :, :4] = 0
    ref, _ = exact(q, k, v, scale, False)
    out, _, _ = run(kernel, q, k, v, scale)
    rel = ((out.double() - ref).norm() / ref.norm()).item()
    q, k, v = inputs(1, 16, 16, 4096, 4096, 128, seed=12)
    ref0, _ = exact(q, k, v, scale, False)
    out0, _, _ = run(kernel, q, k, v, scale)
    rel0 = ((out0.double() - ref0).norm() / ref0.norm()).item()
    print(f"attention sink (4 keys +8 in log units, V 0): relative error of "
          f"O {rel:.2e} (same inputs without the sink: {rel0:.2e})")


def tflops(b, h, n, d, causal, ms):
    flops = 4 * b * h * n * n * d / (2 if causal else 1)
    return flops / ms / 1e9


def bench(folder, f16_folder):
    print("| shape | causal | e4m3 call | V layout | e4m3 attention | f16 ours "
          "| cuDNN f16 | e4m3/f16 (attention) |")
    print("|---|---|---|---|---|---|---|---|")
    for (d, b, n) in ((128, 1, 16384), (128, 4, 4096), (256, 1, 16384),
                      (256, 4, 4096)):
        for causal in (False, True):
            h = 16
            suffix = "_causal" if causal else ""
            k8 = Kernel.load(os.path.join(
                folder, f"sm_90a_d{d}_e4m3_bf16{suffix}"))
            k16 = Kernel.load(os.path.join(f16_folder,
                                           f"sm_90a_d{d}_f16{suffix}"))
            q, k, v = inputs(b, h, h, n, n, d, seed=3)
            (q8, qd), (kk8, kd), (v8, vd) = quantize(q), quantize(k), \
                quantize(v)
            qh, kh, vh = q.half(), k.half(), v.half()
            out8 = torch.empty(b, h, n, d, dtype=torch.bfloat16,
                               device="cuda")
            lse = torch.empty(b, h, n, device="cuda")
            call = median_ms(lambda: k8(q8, kk8, v8, out=out8, lse=lse,
                                        q_descale=qd, k_descale=kd,
                                        v_descale=vd))
            stream = torch.cuda.current_stream().cuda_stream
            strides = (h * n * d, n * d, d)
            layout = median_ms(lambda: k8._value_layout(v8, strides, 0,
                                                        stream))
            out16 = torch.empty_like(qh)
            lse16 = torch.empty(b, h, n, device="cuda")
            f16 = median_ms(lambda: k16(qh, kh, vh, out=out16, lse=lse16))
            from torch.nn.attention import SDPBackend, sdpa_kernel
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                cudnn = median_ms(lambda: F.scaled_dot_product_attention(
                    qh, kh, vh, is_causal=causal))
            attention = call - layout
            print(f"| B {b} H {h} N {n} D {d} | {causal} "
                  f"| {tflops(b, h, n, d, causal, call):.0f} "
                  f"| {layout * 1e3:.0f} us "
                  f"| {tflops(b, h, n, d, causal, attention):.0f} "
                  f"| {tflops(b, h, n, d, causal, f16):.0f} "
                  f"| {tflops(b, h, n, d, causal, cudnn):.0f} "
                  f"| {f16 / attention:.2f}x |")
    # Does torch expose an FP8 SDPA? (cuDNN has one; torch may not.)
    try:
        q8 = torch.randn(1, 2, 256, 128, device="cuda").to(E4M3)
        F.scaled_dot_product_attention(q8, q8, q8)
        print("torch SDPA accepted float8_e4m3fn inputs")
    except Exception as e:  # noqa: BLE001
        print(f"torch SDPA refuses float8_e4m3fn inputs: "
              f"{type(e).__name__}: {str(e).splitlines()[0][:120]}")
    print(f"torch {torch.__version__}")


def variants(folder, f16_folder=None, shape=(1, 16, 16384), rounds=3):
    """Each e4m3 kernel of `folder` (schedule and FA4 variants, any head
    dim): one numerics check, then TFLOP/s of the whole call at `shape`
    (B, H, N; B 1 H 16 N 16k by default), `rounds` interleaved rounds, the
    median; beside our f16 kernel of the same head dim and mask from
    `f16_folder` (the harness's)."""
    kernels = {n: Kernel.load(os.path.join(folder, n))
               for n in kernel_names(folder)}
    if f16_folder:
        for d in sorted({k.meta["head_dim"] for k in kernels.values()}):
            for causal in sorted({k.meta["causal"]
                                  for k in kernels.values()}):
                name = f"sm_90a_d{d}_f16{'_causal' if causal else ''}"
                kernels["f16 " + name] = Kernel.load(
                    os.path.join(f16_folder, name))
    for name, kernel in kernels.items():
        if kernel.meta["dtype"] != "e4m3":
            continue
        d = kernel.meta["head_dim"]
        scale = 1 / math.sqrt(d)
        causal = kernel.meta["causal"]
        q, k, v = inputs(2, 8, 2, 333, 333, d, seed=5)
        out, lse, (qf, kf, vf) = run(kernel, q, k, v, scale)
        mask = masks(kernel.meta, 333, 333)
        ref, ref_lse = exact(qf, kf, vf, scale, causal, **mask)
        emu = emulate(qf, kf, vf, scale, causal,
                          block=kernel.meta.get("block_c", 128), **mask)
        err = (out.double() - ref).abs().max().item()
        base = (emu.double() - ref).abs().max().item()
        # The LSE too, as check() judges it: an A/B that changes l (row
        # sums on the tensor cores, 2026-12-04) can keep O and lose the LSE.
        seen = torch.isfinite(ref_lse)
        lse_err = ((lse.double() - ref_lse)[seen].abs().max().item()
                   if lse is not None else 0.0)
        ok = err <= 2 * base + 1e-3 and lse_err <= 1e-2
        print(f"{name}: max_err={err:.2e} emulation={base:.2e} "
              f"lse_err={lse_err:.2e} {'ok' if ok else 'FAIL'}"
              f"{'' if lse is not None else ' (no LSE)'}")
    b, h, n = shape
    data = {}
    for d in sorted({k.meta["head_dim"] for k in kernels.values()}):
        q, k, v = inputs(b, h, h, n, n, d, seed=3)
        (q8, qd), (k8, kd), (v8, vd) = quantize(q), quantize(k), quantize(v)
        data[d] = (q8, k8, v8, qd, kd, vd, q.half(), k.half(), v.half(),
                   torch.empty(b, h, n, d, dtype=torch.bfloat16,
                               device="cuda"),
                   torch.empty(b, h, n, d, dtype=torch.float16,
                               device="cuda"),
                   torch.empty(b, h, n, device="cuda"))

    def call(kernel):
        q8, k8, v8, qd, kd, vd, qh, kh, vh, o8, o16, lse = \
            data[kernel.meta["head_dim"]]
        if kernel.meta["dtype"] == "e4m3":
            out = o16 if kernel.meta.get("out_dtype") == "f16" else o8
            return lambda: kernel(q8, k8, v8, out=out, lse=lse, q_descale=qd,
                                  k_descale=kd, v_descale=vd)
        return lambda: kernel(qh, kh, vh, out=o16, lse=lse)

    times = {name: [] for name in kernels}
    for _ in range(rounds):
        for name, kernel in kernels.items():
            times[name].append(median_ms(call(kernel)))
    for name, kernel in kernels.items():
        ms = sorted(times[name])[len(times[name]) // 2]
        d = kernel.meta["head_dim"]
        rate = tflops(b, h, n, d, kernel.meta["causal"], ms)
        print(f"{name}: D {d} B {b} H {h} N {n} {rate:.0f} TFLOP/s "
              f"({kernel.name})")


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "check":
        sys.exit(1 if check(sys.argv[2]) else 0)
    if mode == "rmse":
        rmse(sys.argv[2])
    elif mode == "bench":
        bench(sys.argv[2], sys.argv[3])
    elif mode == "variants":
        variants(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 and
                 sys.argv[3] != "-" else None,
                 tuple(int(x) for x in sys.argv[4].split(","))
                 if len(sys.argv) > 4 else (1, 16, 16384))
