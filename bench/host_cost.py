"""Per-call host cost at a tiny shape (issue 17: B 1, H 8, N 128, D 64,
causal), where the kernel takes a few microseconds and the launch path
decides: 2,000 back-to-back calls timed on the host, then one sync, so the
figure is the host's time per call (the GPU keeps up). flash-mlir through
flashmlir.attention, through the runtime's Kernel with preallocated O and
LSE, and torch SDPA's cuDNN and FA2 backends.

    FLASHMLIR_KERNEL_DIR=.cubins python3 bench/host_cost.py
"""
import json
import os
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "python"))
import flashmlir  # noqa: E402


def per_call_us(fn, calls=2000):
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    host = (time.perf_counter() - t) / calls * 1e6
    torch.cuda.synchronize()
    total = (time.perf_counter() - t) / calls * 1e6
    return host, total


def main():
    torch.manual_seed(0)
    q = torch.randn(1, 8, 128, 64, device="cuda", dtype=torch.float16)
    k, v = torch.randn_like(q), torch.randn_like(q)
    kernel = flashmlir._kernel_for("sm_90a", 64, "f16", True,
                                   os.environ.get("FLASHMLIR_KERNEL_DIR"))
    out = torch.empty_like(q)
    lse = torch.empty(1, 8, 128, device="cuda")
    rows = {}
    rows["flashmlir.attention"] = per_call_us(
        lambda: flashmlir.attention(q, k, v, causal=True))
    rows["runtime Kernel, preallocated"] = per_call_us(
        lambda: kernel(q, k, v, out=out, lse=lse))
    for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION),
                          ("fa2", SDPBackend.FLASH_ATTENTION)):
        def sdpa(backend=backend):
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        rows[f"torch sdpa {name}"] = per_call_us(sdpa)
    for name, (host, total) in rows.items():
        print(f"{name}: {host:.1f} us host per call, {total:.1f} us per call "
              f"with the GPU")
    json.dump({k: {"host_us": h, "total_us": t} for k, (h, t) in rows.items()},
              open(os.path.join(os.environ.get("OUT", "/tmp"),
                                "host-cost.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
