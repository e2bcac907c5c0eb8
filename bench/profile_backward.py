"""Launches one backward kernel (fa-compile --backward) a few times on
B 1, H 16, N, D of the kernel, for Nsight Compute to profile:

    ncu --clock-control none -k regex:fa2_bwd --launch-skip 2 \\
        --launch-count 1 --section SpeedOfLight --section WarpStateStats \\
        python3 bench/profile_backward.py .bwd/sm_90a_d128_bf16_bwd 8192
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "python"))
from flashmlir.backward import BackwardKernel  # noqa: E402


def main():
    path, n = sys.argv[1], int(sys.argv[2])
    kernel = BackwardKernel.load(path)
    d = kernel.meta["head_dim"]
    dtype = torch.float16 if kernel.meta["dtype"] == "f16" else torch.bfloat16
    torch.manual_seed(0)
    q, k, v, do = (torch.randn(1, 16, n, d, device="cuda", dtype=dtype)
                   for _ in range(4))
    fwd = torch.ops.aten._scaled_dot_product_flash_attention(
        q, k, v, 0.0, kernel.meta["causal"], False, scale=1 / math.sqrt(d))
    o, lse = fwd[0].contiguous(), fwd[1].float().contiguous()
    for _ in range(4):
        kernel(q, k, v, o, lse, do)
    torch.cuda.synchronize()
    print(f"profile: {kernel.name} B=1 H=16 N={n} D={d}")


if __name__ == "__main__":
    main()
