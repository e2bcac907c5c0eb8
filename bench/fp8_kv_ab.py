"""A/B of e4m3-cache decode kernel variants through flash_attn_with_kvcache
(issue 45's FP8 KV target): each folder of fa-compile --kv-dtype e4m3
kernels (named as flashmlir._kernel_for looks them up) against the f16
cache's kernels of FLASHMLIR_KERNEL_DIR, interleaved row by row in one
process, eager and under CUDA graphs; tokens/s and the ratio to the f16
cache's.

Usage: python3 bench/fp8_kv_ab.py OUT.json NAME=FOLDER [NAME=FOLDER ...]
"""
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import flashmlir  # noqa: E402
from bench.serving import cuda_ms, graphed  # noqa: E402


def fresh():
    """Forget the launchers and checked calls (they are kept per process
    by shape, not by kernel folder)."""
    flashmlir._launchers.clear()
    flashmlir._calls.clear()


def main():
    out, variants = sys.argv[1], dict(a.split("=", 1) for a in sys.argv[2:])
    f16_dir = os.environ.get("FLASHMLIR_KERNEL_DIR", ".serving")
    rows = []
    for hq, hkv, b, nk in ((32, 8, 1, 131072), (32, 8, 8, 32768),
                           (64, 8, 1, 131072), (32, 8, 64, 8192),
                           (32, 8, 1, 32768), (32, 8, 16, 32768)):
        d = 128
        k = torch.randn(b, nk, hkv, d, device="cuda", dtype=torch.float16)
        v = torch.randn_like(k)
        k8, v8 = k.to(torch.float8_e4m3fn), v.to(torch.float8_e4m3fn)
        one = torch.ones(1, device="cuda")
        q = torch.randn(b, 1, hq, d, device="cuda", dtype=torch.float16)
        lens = torch.full((b,), nk, device="cuda", dtype=torch.int32)
        for graphs in (False, True):
            row = {"heads": f"{hq}/{hkv}", "b": b, "nk": nk,
                   "mode": "graph" if graphs else "eager"}
            calls = {"f16": (f16_dir, lambda kd: flashmlir.flash_attn_with_kvcache(
                q, k, v, cache_seqlens=lens, causal=True, kernel_dir=kd))}
            for name, folder in variants.items():
                calls[name] = (folder, lambda kd: flashmlir.flash_attn_with_kvcache(
                    q, k8, v8, cache_seqlens=lens, causal=True,
                    kernel_dir=kd, k_descale=one, v_descale=one))
            for name, (folder, call) in calls.items():
                fresh()
                fn = (lambda c=call, f=folder: c(f))
                try:
                    ms = cuda_ms(graphed(fn) if graphs else fn)
                    row[name] = b / ms * 1e3  # tokens/s
                except Exception as e:  # a variant without a kernel
                    row[name] = f"{type(e).__name__}: {e}"[:160]
            for name in variants:
                if isinstance(row.get(name), float):
                    row[f"{name}_vs_f16"] = row[name] / row["f16"]
            print(json.dumps({k2: (round(x, 3) if isinstance(x, float) else x)
                              for k2, x in row.items()}), flush=True)
            rows.append(row)
        del k, v, k8, v8
        torch.cuda.empty_cache()
    with open(out, "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(0), "rows": rows}, f,
                  indent=1)


if __name__ == "__main__":
    main()
