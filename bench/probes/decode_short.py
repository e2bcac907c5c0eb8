"""Decode over short and long caches: the default split-KV kernel (B_r 64,
two CTAs per SM, two stages of B_c 64) against the same kernel built for one
CTA per SM with a deeper ring, and cuDNN, in one run. Issue 17's decode v7
run found the deeper ring 1.5x faster on a 4k-key cache and 4% slower on
32k-128k caches; this sweep looks for where the two cross.

    here:  fa-compile --head-dim 128 --split-kv auto -o DIR/default
           fa-compile --head-dim 128 --split-kv auto --ctas-per-sm 1 -o DIR/1cta
    there: python3 bench/probes/decode_short.py DIR

GB/s of K + V read, at the auto chunk count and at the best of 1-64.
"""
import json
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
import flashmlir.runtime  # noqa: E402
from common import Kernel, median_ms  # noqa: E402

folder = sys.argv[1]
kernels = {n: Kernel.load(os.path.join(folder, n)) for n in ("default", "1cta")}
_, sms, dram_gbps = flashmlir.runtime.device_facts(0)
d = 128
for b, h, nk in [(1, 32, 1024), (1, 32, 2048), (1, 32, 4096), (1, 32, 8192),
                 (1, 32, 16384), (4, 32, 1024), (4, 32, 2048), (4, 32, 4096),
                 (1, 8, 8192), (1, 8, 32768)]:
    torch.manual_seed(0)
    q = torch.randn(b, h, 1, d, device="cuda", dtype=torch.float16)
    k = torch.randn(b, h, nk, d, device="cuda", dtype=torch.float16)
    v = torch.randn_like(k)
    out = torch.empty_like(q)
    lse = torch.empty(b, h, 1, device="cuda")
    gb = 2 * k.numel() * 2 / 1e9
    row = {"B": b, "H": h, "Nk": nk}
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        row["cudnn"] = gb / (median_ms(
            lambda: F.scaled_dot_product_attention(q, k, v)) / 1e3)
    for name, kern in kernels.items():
        auto = kern.kv_splits_for(b, h, 1, nk, sms, dram_gbps, 0)
        rates = {}
        for s in sorted({1, 2, 4, 8, 16, 32, 64, auto}):
            rates[s] = gb / (median_ms(lambda: kern(
                q, k, v, out=out, lse=lse, num_splits=s)) / 1e3)
        best = max(rates, key=rates.get)
        row[name] = {"auto": auto, "auto_GBps": round(rates[auto]),
                     "best": best, "best_GBps": round(rates[best])}
    print(json.dumps(row), flush=True)
