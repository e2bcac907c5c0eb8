"""One FP8 attention call (B 1, H 16, N 8192, D 128) for ncu: the V layout
kernel, then the attention kernel named on the command line's folder.

    ncu -k regex:fa3_sm90 -c 1 --metrics ... python3 bench/probes/fp8_once.py .fp8 sm_90a_d128_e4m3_bf16
    compute-sanitizer --tool memcheck python3 bench/probes/fp8_once.py .fp8 NAME 333

An optional third argument is N (ragged sizes for the sanitizer).
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
from common import Kernel  # noqa: E402

folder, name = sys.argv[1], sys.argv[2]
kernel = Kernel.load(os.path.join(folder, name))
n = int(sys.argv[3]) if len(sys.argv) > 3 else 8192
b, h, d = 1, 16, kernel.meta["head_dim"]
x = torch.randn(3, b, h, n, d, device="cuda")
codes = (x * 448 / x.abs().max()).to(torch.float8_e4m3fn)
one = torch.ones(1, device="cuda")
if kernel.meta["dtype"] == "e4m3":
    out, _ = kernel(codes[0], codes[1], codes[2], q_descale=one,
                    k_descale=one, v_descale=one)
else:
    q, k, v = x.half()
    out, _ = kernel(q, k, v)
torch.cuda.synchronize()
print(name, out.float().abs().mean().item())
