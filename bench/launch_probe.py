"""Launch-path and scheduling probe (issue 4): is the short-sequence gap
in the kernel or around it?

  * host cost of one flash-mlir launch (Python runtime: tensor-map
    encoding + cuLaunchKernel) vs. torch's cuDNN SDPA call;
  * kernel time with triton's do_bench (events around each call, as the
    harness) vs. do_bench_cudagraph (launch overhead removed), for both;
  * the persistent kernel launched with min(tiles, SMs) CTAs and with one
    CTA per tile (same code, no striding), against the non-persistent one.

    python3 bench/launch_probe.py .cubins .variants90
"""
import json
import os
import sys
import time

import torch
import triton.testing

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from flashmlir.runtime import Kernel  # noqa: E402


def inputs(n, d):
    b, h = 16384 // n, 2048 // d
    torch.manual_seed(0)
    q = torch.randn(b, h, n, d, device="cuda", dtype=torch.float16)
    return q, torch.randn_like(q), torch.randn_like(q), b, h


def host_us(fn, reps=200):
    fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    host = (time.perf_counter() - t) / reps * 1e6
    torch.cuda.synchronize()
    return host


def main():
    cubins = sys.argv[1]
    variants = sys.argv[2] if len(sys.argv) > 2 else None
    rows = []
    for d, n in ((64, 1024), (128, 1024), (128, 16384)):
        q, k, v, b, h = inputs(n, d)
        out = torch.empty_like(q)
        lse = torch.empty((b, h, n), device="cuda", dtype=torch.float32)
        flops = 4.0 * b * h * n * n * d
        ours = Kernel.load(os.path.join(cubins, f"sm_90a_d{d}_f16"))
        fns = {"flash_mlir": lambda: ours(q, k, v, out=out, lse=lse),
               "cudnn": lambda: harness.sdpa(q, k, v, False,
                                             harness.BACKENDS["cudnn"])}
        for name, fn in fns.items():
            row = {"D": d, "N": n, "what": name, "host_us": host_us(fn)}
            ms = triton.testing.do_bench(fn, warmup=25, rep=100,
                                         return_mode="median")
            row["do_bench_tflops"] = flops / ms / 1e9
            ms = triton.testing.do_bench_cudagraph(fn, rep=100,
                                                   return_mode="median")
            row["cudagraph_tflops"] = flops / ms / 1e9
            rows.append(row)
            print(json.dumps(row), flush=True)
        if d == 128 and variants:
            pers = Kernel.load(os.path.join(variants,
                                            "sm90_d128_f16__br128_persistent"))
            for label, persistent in (("persistent_sm_grid", True),
                                      ("persistent_code_tile_grid", False)):
                pers.meta["persistent"] = persistent
                fn = lambda: pers(q, k, v, out=out, lse=lse)  # noqa: E731
                ms = triton.testing.do_bench_cudagraph(fn, rep=100,
                                                       return_mode="median")
                row = {"D": d, "N": n, "what": label,
                       "cudagraph_tflops": flops / ms / 1e9}
                rows.append(row)
                print(json.dumps(row), flush=True)
    with open(os.path.join(os.environ.get("OUT", "."), "launch_probe.json"),
              "w") as fh:
        json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
