"""Decode (split-KV, f16, D 128, Nq 1) with the tensor maps' L2 promotion
varied (the bytes L2 fetches when a box misses: 256, 128, 64, 0), against
cuDNN, in kernel time from a profiler trace of L2-flushed calls
(decode_gpu_time.trace). Each setting is the same cubin with its
metadata's "l2_promotion" of every tensor map set to it.

    python3 bench/probes/decode_l2_promotion.py KERNEL [--rounds N]
    python3 bench/probes/decode_l2_promotion.py --prefill DIR [--rounds N]

KERNEL: the split-KV kernel's prefix (e.g. .cubins/sm_90a_d128_f16_splitkv).
--prefill: the same settings on the prefill kernels of DIR (bench/
build_kernels.sh's sm_90a_d{64,128,256}_f16[_causal]), B 2 H 32 N 8k and
16k, triton's do_bench median in TFLOP/s.
"""
import json
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
from common import Kernel  # noqa: E402
from decode_gpu_time import trace  # noqa: E402

PROMOTIONS = (256, 128, 64, 0)


def with_promotion(kernel, promotion):
    """The same cubin with every tensor map's L2 promotion set."""
    meta = json.loads(json.dumps(kernel.meta))
    for p in meta["params"]:
        if p.get("kind") == "tensormap":
            p["l2_promotion"] = promotion
    return Kernel(kernel.cubin, meta)


def prefill(folder, rounds):
    from common import median_ms
    for name in ("sm_90a_d64_f16", "sm_90a_d64_f16_causal", "sm_90a_d128_f16",
                 "sm_90a_d128_f16_causal", "sm_90a_d256_f16",
                 "sm_90a_d256_f16_causal"):
        base = Kernel.load(os.path.join(folder, name))
        d, causal = base.meta["head_dim"], base.meta["causal"]
        kernels = {p: with_promotion(base, p) for p in PROMOTIONS}
        for n in (8192, 16384):
            b, h = 2, 32
            q = torch.randn(b, h, n, d, device="cuda", dtype=torch.float16)
            k, v, o = (torch.randn_like(q) for _ in range(3))
            flops = 4 * b * h * n * n * d / (2 if causal else 1)
            for r in range(rounds):
                row = {"kernel": name, "N": n, "round": r}
                for promo, kernel in kernels.items():
                    ms = median_ms(lambda: kernel(q, k, v, out=o,
                                                  discard_lse=True))
                    row[f"promo{promo}_TFLOPs"] = round(flops / ms / 1e9, 1)
                print(json.dumps(row), flush=True)


def main():
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) \
        if "--rounds" in sys.argv else 2
    if sys.argv[1] == "--prefill":
        return prefill(sys.argv[2], rounds)
    base = Kernel.load(sys.argv[1])
    kernels = {p: with_promotion(base, p) for p in PROMOTIONS}
    d = 128
    for b, h, nk in ((1, 32, 32768), (1, 8, 131072), (4, 32, 8192)):
        q = torch.randn(b, h, 1, d, device="cuda", dtype=torch.float16)
        k = torch.randn(b, h, nk, d, device="cuda", dtype=torch.float16)
        v = torch.randn_like(k)
        o = torch.empty_like(q)
        lse = torch.empty(b, h, 1, device="cuda")
        gb = 2 * b * h * nk * d * 2 / 1e9
        for r in range(rounds):
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                cudnn_us = trace(lambda: F.scaled_dot_product_attention(
                    q, k, v))[0]
            row = {"B": b, "H": h, "Nk": nk, "round": r,
                   "cudnn_us": round(cudnn_us, 2)}
            for promo, kernel in kernels.items():
                us = trace(lambda: kernel(q, k, v, out=o, lse=lse))[0]
                row[f"promo{promo}_us"] = round(us, 2)
                row[f"promo{promo}_vs_cudnn"] = round(cudnn_us / us, 3)
                row[f"promo{promo}_GBps"] = round(gb / (us / 1e6))
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
