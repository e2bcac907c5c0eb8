"""GPU check of the backward kernel (issue 48): numerics by flash-attn's 2x
rule and speed beside torch SDPA's backward (cuDNN, FA2) in one run.

The kernels come from bench/build_backward_kernels.sh (fa-compile
--backward, a folder of <name>.cubin/.json named by flashmlir's
kernel_file_name(..., backward=True)); they run through
flashmlir.backward.BackwardKernel, the launcher a user calls.

  python3 bench/backward_check.py check [--kernels .bwd]
  python3 bench/backward_check.py speed [--kernels .bwd]
  python3 bench/backward_check.py step [--dtype bf16]

check: random inputs, ragged and grouped-query shapes, f16 and bf16, D 64
and 128, no mask, causal in both alignments and sliding windows (MASKS). The kernel's O and LSE
inputs are the forward's in f32 (O rounded to the dtype); each gradient's
largest error against the float64 autograd reference must be at most twice
that of torch's own math attention in the dtype (plus 1e-4), the rule of
flash-attn's tests.

speed: B 1, H 16, N 1k / 4k / 16k, D 64 / 128, causal or not; backward
TFLOP/s counted as 2.5x the forward's FLOPs (flash-attn's convention), ours
including the torch preprocess (rowsum(dO o O), the zeroed dQ accumulator,
its conversion), torch's through autograd.grad of an SDPA output.

step: a training step's attention on grouped-query shapes through
flash_attn_func (forward with LSE, then autograd's backward) against SDPA
with enable_gqa, eager and under CUDA graphs (FLASHMLIR_KERNEL_DIR and
FLASHMLIR_BACKWARD_KERNEL_DIR name the kernel folder).
"""

import argparse
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
from flashmlir import kernel_file_name  # noqa: E402
from flashmlir.backward import BackwardKernel  # noqa: E402

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}


def kernel(folder, d, dtype, causal, bottom_right, deterministic=False,
           window=0, offset=0):
    name = kernel_file_name("sm_90a", d, dtype, causal, window=window,
                            bottom_right=bottom_right, diagonal_offset=offset,
                            backward=True, deterministic=deterministic)
    return BackwardKernel.load(os.path.join(folder, name))


def visible(nq, nk, causal, bottom_right, device, window=0, offset=0):
    """[Nq, Nk] booleans: key j visible from query i, which sits at key
    position i' = i (+ Nk - Nq bottom-right aligned) + offset: j <= i'
    (causal), |i' - j| < window."""
    shift = (nk - nq if bottom_right else 0) + offset
    i = torch.arange(nq, device=device)[:, None] + shift
    j = torch.arange(nk, device=device)[None, :]
    seen = torch.ones(nq, nk, dtype=torch.bool, device=device)
    if causal:
        seen &= j <= i
    if window:
        seen &= (i - j < window) & (j - i < window)
    return seen


# The masks of the check: (name, causal, bottom-right, window, diagonal
# offset), as bench/build_backward_kernels.sh builds them; the windows are
# flash-attn's window_size = (96, 0) and (100, 37), and a symmetric one.
MASKS = [
    ("none", False, False, 0, 0),
    ("causal", True, False, 0, 0),
    ("causal-br", True, True, 0, 0),
    ("win(96,0)tl", True, False, 97, 0),
    ("win(96,0)", True, True, 97, 0),
    ("win(100,37)", True, True, 138, 37),
    ("win|80|", False, False, 80, 0),
]


def attention(q, k, v, scale, mask):
    """Math attention in q's dtype (grouped-query K/V repeated); rows with
    no visible key give 0."""
    g = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(g, 1)
    v = v.repeat_interleave(g, 1)
    s = (q @ k.transpose(-1, -2)) * scale
    s = s.masked_fill(~mask, float("-inf"))
    p = torch.softmax(s, -1)
    p = torch.where(mask.any(-1, keepdim=True), p, torch.zeros_like(p))
    return p @ v


def forward_state(q, k, v, scale, mask):
    """O (in q's dtype) and LSE (f32, -inf for rows with no key) from f32."""
    g = q.shape[1] // k.shape[1]
    kf = k.float().repeat_interleave(g, 1)
    vf = v.float().repeat_interleave(g, 1)
    s = (q.float() @ kf.transpose(-1, -2)) * scale
    s = s.masked_fill(~mask, float("-inf"))
    lse = torch.logsumexp(s, -1)
    p = torch.exp(s - lse[..., None])
    p = torch.where(mask.any(-1, keepdim=True), p, torch.zeros_like(p))
    return (p @ vf).to(q.dtype).contiguous(), lse.contiguous()


def grads(q, k, v, do, scale, mask, dtype):
    qq, kk, vv = (t.detach().to(dtype).requires_grad_() for t in (q, k, v))
    out = attention(qq, kk, vv, scale, mask)
    return torch.autograd.grad(out, (qq, kk, vv), do.to(dtype))


SHAPES = [  # B, Hq, Hkv, Nq, Nk
    (2, 4, 4, 128, 128),
    (2, 4, 2, 77, 131),
    (1, 8, 2, 131, 77),
    (1, 2, 1, 512, 512),
    (3, 6, 3, 200, 1000),
    (1, 4, 2, 333, 2048),
    (1, 2, 2, 2048, 700),
    (1, 4, 4, 1, 64),
    (1, 4, 1, 64, 1),
]


def check(args):
    torch.manual_seed(0)
    dev = "cuda"
    failures = total = 0
    for dtype_name in ("f16", "bf16"):
        dtype = DTYPES[dtype_name]
        for d in (64, 128):
            for mask_name, causal, br, window, offset in MASKS:
                kern = kernel(args.kernels, d, dtype_name, causal, br,
                              args.deterministic, window, offset)
                for (b, hq, hkv, nq, nk) in SHAPES[:args.shapes]:
                    q = torch.randn(b, hq, nq, d, device=dev, dtype=dtype)
                    k = torch.randn(b, hkv, nk, d, device=dev, dtype=dtype)
                    v = torch.randn(b, hkv, nk, d, device=dev, dtype=dtype)
                    do = torch.randn(b, hq, nq, d, device=dev, dtype=dtype)
                    scale = 1 / math.sqrt(d)
                    mask = visible(nq, nk, causal, br, dev, window, offset)
                    o, lse = forward_state(q, k, v, scale, mask)
                    ours = kern(q, k, v, o, lse, do, scale=scale)
                    # A deterministic kernel gives the same bits again.
                    same = (not args.deterministic or all(
                        torch.equal(x, y) for x, y in zip(
                            ours, kern(q, k, v, o, lse, do, scale=scale))))
                    ref = grads(q, k, v, do, scale, mask, torch.float64)
                    pt = grads(q, k, v, do, scale, mask, dtype)
                    row = [] if same else ["not bit-identical: FAIL"]
                    ok = same
                    for name, x, r, p in zip(("dq", "dk", "dv"), ours, ref,
                                             pt):
                        err = (x.double() - r).abs().max().item()
                        bound = 2 * (p.double() - r).abs().max().item() + 1e-4
                        good = math.isfinite(err) and err <= bound
                        ok &= good
                        row.append(f"{name} {err:.2e}/{bound:.2e}"
                                   f"{'' if good else ' FAIL'}")
                    total += 1
                    failures += not ok
                    print(f"{'ok  ' if ok else 'FAIL'} {dtype_name} D{d} "
                          f"{mask_name:11s} B{b} H{hq}/{hkv} Nq{nq} Nk{nk}: "
                          + ", ".join(row), flush=True)
    print(f"{total - failures}/{total} passed")
    return 1 if failures else 0


def timed(fn, reps=10):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    times.sort()
    return times[len(times) // 2]


def speed(args):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F
    torch.manual_seed(0)
    dev = "cuda"
    dtype_name = args.dtype
    dtype = DTYPES[dtype_name]
    print(f"{torch.cuda.get_device_name()}, {dtype_name}, B 1, H 16; "
          "backward TFLOP/s (2.5x the forward's FLOPs)")
    print("| N | D | causal | flash-mlir | cuDNN | FA2 | /cuDNN | /FA2 | "
          "deterministic | det / default |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for d in (64, 128):
        for n in (1024, 4096, 16384):
            for causal in (False, True):
                b, h = 1, 16
                q, k, v, do = (torch.randn(b, h, n, d, device=dev,
                                           dtype=dtype) for _ in range(4))
                scale = 1 / math.sqrt(d)
                kern = kernel(args.kernels, d, dtype_name, causal, False)
                # The forward's O and LSE (natural log) from torch's FA2.
                fwd = torch.ops.aten._scaled_dot_product_flash_attention(
                    q, k, v, 0.0, causal, False, scale=scale)
                o, lse = fwd[0].contiguous(), fwd[1].float().contiguous()
                flops = 4 * b * h * n * n * d * (0.5 if causal else 1) * 2.5
                ours = timed(lambda: kern(q, k, v, o, lse, do, scale=scale))
                det = kernel(args.kernels, d, dtype_name, causal, False, True)
                ours_det = timed(lambda: det(q, k, v, o, lse, do,
                                             scale=scale))
                row = [flops / ours / 1e12]
                for backend in (SDPBackend.CUDNN_ATTENTION,
                                SDPBackend.FLASH_ATTENTION):
                    qq, kk, vv = (t.clone().requires_grad_()
                                  for t in (q, k, v))
                    with sdpa_kernel([backend]):
                        out = F.scaled_dot_product_attention(
                            qq, kk, vv, is_causal=causal)
                    t = timed(lambda: torch.autograd.grad(
                        out, (qq, kk, vv), do, retain_graph=True))
                    row.append(flops / t / 1e12)
                print(f"| {n} | {d} | {causal} | {row[0]:.0f} | {row[1]:.0f} "
                      f"| {row[2]:.0f} | {row[0] / row[1]:.2f} | "
                      f"{row[0] / row[2]:.2f} | "
                      f"{flops / ours_det / 1e12:.0f} | "
                      f"{ours_det / ours:.2f} |", flush=True)
    return 0


STEP_SHAPES = [  # B, Hq, Hkv, N, D: Llama-3 8B / 70B style grouped heads
    (1, 32, 8, 4096, 128),
    (4, 32, 8, 2048, 128),
    (1, 64, 8, 8192, 128),
    (8, 32, 8, 1024, 64),
]


def graphed(fn):
    """fn captured in a CUDA graph (after warm-up on a side stream), or
    the reason it could not be captured."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            fn()
    except Exception as e:  # noqa: BLE001 -- reported in the table
        return None, f"{type(e).__name__}: {str(e).splitlines()[0][:60]}"
    return graph.replay, None


def step(args):
    """A training step's attention through what users call: forward and
    backward of flash_attn_func ([B, N, H, D], causal, grouped heads)
    against F.scaled_dot_product_attention(enable_gqa=True) forward and
    backward on the cuDNN and FA2 backends, eager and under CUDA graphs;
    TFLOP/s counted as 3.5x the forward's FLOPs (forward + 2.5x)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..",
                                    "python"))
    import flashmlir
    torch.manual_seed(0)
    dtype = DTYPES[args.dtype]
    print(f"{torch.cuda.get_device_name()}, {args.dtype}, causal; forward + "
          "backward TFLOP/s (3.5x the forward's FLOPs), eager / CUDA graph")
    print("| B | Hq/Hkv | N | D | flash-mlir | cuDNN | FA2 | /cuDNN | /FA2 |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (b, hq, hkv, n, d) in STEP_SHAPES:
        q = torch.randn(b, n, hq, d, device="cuda", dtype=dtype,
                        requires_grad=True)
        k, v = (torch.randn(b, n, hkv, d, device="cuda", dtype=dtype,
                            requires_grad=True) for _ in range(2))
        do = torch.randn(b, n, hq, d, device="cuda", dtype=dtype)
        flops = 4 * b * hq * n * n * d * 0.5 * 3.5

        def ours():
            out = flashmlir.flash_attn_func(q, k, v, causal=True)
            return torch.autograd.grad(out, (q, k, v), do)

        def sdpa(backend):
            qt, kt, vt = (t.detach().transpose(1, 2).requires_grad_()
                          for t in (q, k, v))
            dot = do.transpose(1, 2)

            def run():
                with sdpa_kernel([backend]):
                    out = F.scaled_dot_product_attention(
                        qt, kt, vt, is_causal=True, enable_gqa=True)
                return torch.autograd.grad(out, (qt, kt, vt), dot)
            return run
        cells = []
        for fn in (ours, sdpa(SDPBackend.CUDNN_ATTENTION),
                   sdpa(SDPBackend.FLASH_ATTENTION)):
            try:
                eager = flops / timed(fn) / 1e12
            except Exception as e:  # noqa: BLE001 -- reported
                cells.append((None, None,
                              f"{type(e).__name__}: "
                              f"{str(e).splitlines()[0][:60]}"))
                continue
            replay, why = graphed(fn)
            graph = flops / timed(replay) / 1e12 if replay else None
            cells.append((eager, graph, why))

        def text(c):
            if c[0] is None:
                return f"n/a ({c[2]})"
            return f"{c[0]:.0f} / " + (f"{c[1]:.0f}" if c[1] is not None
                                       else f"no graph ({c[2]})")

        def ratio(a, b_):
            if a[0] is None or b_[0] is None:
                return "n/a"
            r = f"{a[0] / b_[0]:.2f}"
            if a[1] is not None and b_[1] is not None:
                r += f" / {a[1] / b_[1]:.2f}"
            return r
        print(f"| {b} | {hq}/{hkv} | {n} | {d} | " +
              " | ".join(text(c) for c in cells) +
              f" | {ratio(cells[0], cells[1])} | "
              f"{ratio(cells[0], cells[2])} |", flush=True)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("check", "speed", "step"))
    ap.add_argument("--kernels", default=".bwd")
    ap.add_argument("--dtype", default="bf16", choices=tuple(DTYPES))
    ap.add_argument("--shapes", type=int, default=len(SHAPES),
                    help="check: the first this many shapes (fewer under "
                         "compute-sanitizer)")
    ap.add_argument("--deterministic", action="store_true",
                    help="check: the --deterministic kernels, each run "
                         "twice for the same bits")
    args = ap.parse_args()
    return {"check": check, "speed": speed, "step": step}[args.mode](args)


if __name__ == "__main__":
    sys.exit(main())
