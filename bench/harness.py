"""H200 harness: correctness, then timing against torch SDPA backends.

Runs where torch and a GPU are; needs only the cubins + JSON written by
bench/build_kernels.sh and python/flashmlir/runtime.py.

    python3 bench/harness.py --kernels .cubins --out results/

Correctness (flash-attention's rule): for each config, fresh N(0,1) inputs,
outputs poisoned with NaN, reference in fp32; the kernel's relative L2 error
must be at most 2x that of torch's own SDPA at the same dtype (plus 1e-6);
LSE within 1e-3 relative L2 of the fp32 log-sum-exp; every output written.

Timing: median of CUDA-event timings (triton.testing.do_bench) after
warm-up; TFLOP/s = 4 B H Nq Nk D (x0.5 causal). torch SDPA with the flash,
cuDNN and memory-efficient backends is timed on the same tensors.
"""
import argparse
import datetime
import json
import math
import os
import pathlib
import platform
import subprocess
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
from flashmlir.runtime import Kernel  # noqa: E402

DT = {"f16": torch.float16, "bf16": torch.bfloat16}
BACKENDS = {"fa2": SDPBackend.FLASH_ATTENTION,
            "cudnn": SDPBackend.CUDNN_ATTENTION,
            "mem_eff": SDPBackend.EFFICIENT_ATTENTION}


def reference(q, k, v, causal, scale):
    """fp32 attention and LSE, a few heads at a time to bound memory."""
    b, hq, nq, d = q.shape
    hkv, nk = k.shape[1], k.shape[2]
    group = hq // hkv
    out = torch.empty(q.shape, dtype=torch.float32, device=q.device)
    lse = torch.empty((b, hq, nq), dtype=torch.float32, device=q.device)
    mask = None
    if causal:
        mask = torch.ones(nq, nk, dtype=torch.bool, device=q.device).tril()
    step = max(1, (1 << 30) // (nq * nk * 4))
    for bi in range(b):
        for h0 in range(0, hq, step):
            h1 = min(hq, h0 + step)
            qs = q[bi, h0:h1].float()
            ks = k[bi, [h // group for h in range(h0, h1)]].float()
            vs = v[bi, [h // group for h in range(h0, h1)]].float()
            s = torch.matmul(qs, ks.transpose(-1, -2)) * scale
            if mask is not None:
                s = s.masked_fill(~mask, float("-inf"))
            lse[bi, h0:h1] = torch.logsumexp(s, dim=-1)
            out[bi, h0:h1] = torch.matmul(torch.softmax(s, dim=-1), vs)
            del s
    return out, lse


def rel_l2(x, ref):
    return ((x.float() - ref).norm() / ref.norm()).item()


def sdpa(q, k, v, causal, backend):
    hq, hkv = q.shape[1], k.shape[1]
    if hq != hkv:
        k = k.repeat_interleave(hq // hkv, dim=1)
        v = v.repeat_interleave(hq // hkv, dim=1)
    with sdpa_kernel([backend]):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def check(kernel, b, hq, hkv, nq, nk, d, dtype, causal, seed):
    torch.manual_seed(seed)
    dev = "cuda"
    q = torch.randn(b, hq, nq, d, device=dev, dtype=dtype)
    k = torch.randn(b, hkv, nk, d, device=dev, dtype=dtype)
    v = torch.randn(b, hkv, nk, d, device=dev, dtype=dtype)
    scale = 1.0 / math.sqrt(d)
    out = torch.full_like(q, float("nan"))
    lse = torch.full((b, hq, nq), float("nan"), device=dev)
    kernel(q, k, v, out=out, lse=lse, scale=scale)
    torch.cuda.synchronize()
    ref, ref_lse = reference(q, k, v, causal, scale)
    unwritten = int((~torch.isfinite(out)).sum().item())
    err = rel_l2(out, ref)
    base = None
    for name in ("fa2", "mem_eff"):
        try:
            base = rel_l2(sdpa(q, k, v, causal, BACKENDS[name]), ref)
            break
        except RuntimeError:
            continue
    finite = torch.isfinite(ref_lse)
    lse_err = ((lse[finite] - ref_lse[finite]).norm()
               / ref_lse[finite].norm()).item()
    lse_bad = int((~torch.isfinite(lse[finite])).sum().item())
    ok = (unwritten == 0 and lse_bad == 0 and base is not None
          and err <= 2 * base + 1e-6 and lse_err <= 1e-3)
    return {"B": b, "Hq": hq, "Hkv": hkv, "Nq": nq, "Nk": nk, "D": d,
            "causal": causal, "rel_l2": err, "sdpa_rel_l2": base,
            "lse_rel_l2": lse_err, "unwritten": unwritten, "ok": ok}


def bench(fn):
    import triton.testing
    return triton.testing.do_bench(fn, warmup=25, rep=100,
                                   return_mode="median")


def time_config(kernel, n, d, dtype, causal):
    b, h = 16384 // n, 2048 // d
    torch.manual_seed(0)
    q = torch.randn(b, h, n, d, device="cuda", dtype=dtype)
    k = torch.randn_like(q)
    v = torch.randn_like(q)
    out = torch.empty_like(q)
    lse = torch.empty((b, h, n), device="cuda", dtype=torch.float32)
    flops = 4.0 * b * h * n * n * d * (0.5 if causal else 1.0)
    row = {"B": b, "H": h, "N": n, "D": d, "causal": causal}
    ms = bench(lambda: kernel(q, k, v, out=out, lse=lse))
    row["flash_mlir_ms"] = ms
    row["flash_mlir_tflops"] = flops / ms / 1e9
    for name, backend in BACKENDS.items():
        try:
            ms = bench(lambda: sdpa(q, k, v, causal, backend))
            row[f"{name}_ms"] = ms
            row[f"{name}_tflops"] = flops / ms / 1e9
        except RuntimeError as e:
            row[f"{name}_error"] = str(e).splitlines()[0]
    for name in ("fa2", "cudnn"):
        if f"{name}_ms" in row:
            row[f"ratio_vs_{name}"] = row[f"{name}_ms"] / row["flash_mlir_ms"]
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernels", default=".cubins")
    ap.add_argument("--out", default=os.environ.get("OUT", "bench-out"))
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--quick", action="store_true",
                    help="correctness only, no timing")
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    kernels = {}
    for dtype in DT:
        for d in (64, 128, 256):
            for causal in (False, True):
                name = f"{args.arch}_d{d}_{dtype}{'_causal' if causal else ''}"
                path = os.path.join(args.kernels, name)
                if os.path.exists(path + ".cubin"):
                    kernels[(dtype, d, causal)] = Kernel.load(path)

    results = {"label": args.label, "date": datetime.datetime.now(
        datetime.timezone.utc).isoformat(), "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cudnn": torch.backends.cudnn.version(), "driver": None,
        "python": platform.python_version(), "correctness": [], "timing": []}
    try:
        results["driver"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    try:
        results["commit"] = open(os.path.join(args.kernels, "COMMIT")).read().strip()
    except OSError:
        results["commit"] = None

    # Correctness: grid shapes (smaller batch) plus ragged, GQA, Nq != Nk;
    # (4, 32, 8, 1000, 1100) has 768-1024 tiles, several per CTA of a
    # persistent kernel.
    failures = 0
    seed = 1
    for (dtype, d, causal), kernel in sorted(kernels.items()):
        cases = [(1, 2, 2, 1024, 1024), (1, 2, 2, 4096, 4096),
                 (2, 8, 2, 1000, 1000), (1, 4, 1, 77, 300),
                 (1, 2, 2, 300, 77), (3, 2, 2, 1, 257),
                 (4, 32, 8, 1000, 1100)]
        for (b, hq, hkv, nq, nk) in cases:
            r = check(kernel, b, hq, hkv, nq, nk, d, DT[dtype], causal, seed)
            seed += 1
            r["dtype"] = dtype
            results["correctness"].append(r)
            if not r["ok"]:
                failures += 1
                print("FAIL", r, flush=True)
    print(f"correctness: {len(results['correctness']) - failures} passed, "
          f"{failures} failed", flush=True)

    if not args.quick:
        grid = [("f16", d, n, c) for d in (64, 128, 256)
                for n in (1024, 4096, 16384) for c in (False, True)]
        grid += [("bf16", 128, n, c) for n in (1024, 4096, 16384)
                 for c in (False, True)]
        for dtype, d, n, causal in grid:
            kernel = kernels.get((dtype, d, causal))
            if kernel is None:
                continue
            row = time_config(kernel, n, d, DT[dtype], causal)
            row["dtype"] = dtype
            results["timing"].append(row)
            print(json.dumps(row), flush=True)

    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    lines = ["| dtype | D | N | causal | flash-mlir TFLOP/s | FA2 | cuDNN | "
             "vs FA2 | vs cuDNN |", "|---|---|---|---|---|---|---|---|---|"]
    for r in results["timing"]:
        lines.append("| {} | {} | {} | {} | {:.0f} | {:.0f} | {:.0f} | {:.2f} | "
                     "{:.2f} |".format(
                         r["dtype"], r["D"], r["N"], "yes" if r["causal"] else
                         "no", r["flash_mlir_tflops"], r.get("fa2_tflops", 0),
                         r.get("cudnn_tflops", 0), r.get("ratio_vs_fa2", 0),
                         r.get("ratio_vs_cudnn", 0)))
    f16 = [r for r in results["timing"] if r["dtype"] == "f16"]
    for name in ("fa2", "cudnn"):
        ratios = [r[f"ratio_vs_{name}"] for r in f16 if f"ratio_vs_{name}" in r]
        if ratios:
            g = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
            results[f"geomean_f16_vs_{name}"] = g
            lines.append(f"\ngeomean over the f16 grid vs {name}: {g:.3f}")
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
