"""Launches one compiled kernel on a grid config a few times, for Nsight
Compute to profile (the kernel launches after the first two are warm):

    ncu --clock-control none --launch-skip 2 --launch-count 1 \\
        --section SpeedOfLight --section WarpStateStats \\
        python3 bench/profile_kernel.py .cubins/sm_90a_d64_f16 1024

The config is the harness grid's: B = 16384 / N, H = 2048 / D.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "python"))
from flashmlir.runtime import Kernel  # noqa: E402


def main():
    path, n = sys.argv[1], int(sys.argv[2])
    kernel = Kernel.load(path)
    d = kernel.meta["head_dim"]
    dtype = torch.float16 if kernel.meta["dtype"] == "f16" else torch.bfloat16
    b, h = 16384 // n, 2048 // d
    torch.manual_seed(0)
    q = torch.randn(b, h, n, d, device="cuda", dtype=dtype)
    k, v = torch.randn_like(q), torch.randn_like(q)
    out = torch.empty_like(q)
    lse = torch.empty((b, h, n), device="cuda", dtype=torch.float32)
    for _ in range(4):
        kernel(q, k, v, out=out, lse=lse)
    torch.cuda.synchronize()
    print(f"profile: {kernel.name} B={b} H={h} N={n} D={d}")


if __name__ == "__main__":
    main()
