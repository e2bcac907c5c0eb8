"""Decode calls for Nsight Compute: flash_attn_with_kvcache on an f16 cache
and on an e4m3 cache of the same shape (B 1, 32/8 heads, D 128 by default),
each a few times, so that ncu can profile the attention kernels of both
(issue 45's FP8 KV target: where the e4m3 kernel's time goes):

    ncu --clock-control none -k regex:fa3 --launch-skip 4 --launch-count 2 \\
        --section SpeedOfLight --section WarpStateStats \\
        python3 bench/profile_decode.py --nk 32768
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "python"))
import flashmlir  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--b", type=int, default=1)
    p.add_argument("--hq", type=int, default=32)
    p.add_argument("--hkv", type=int, default=8)
    p.add_argument("--nk", type=int, default=32768)
    p.add_argument("--calls", type=int, default=5)
    args = p.parse_args()
    d = 128
    torch.manual_seed(0)
    q = torch.randn(args.b, 1, args.hq, d, device="cuda", dtype=torch.float16)
    k = torch.randn(args.b, args.nk, args.hkv, d, device="cuda",
                    dtype=torch.float16)
    v = torch.randn_like(k)
    k8, v8 = k.to(torch.float8_e4m3fn), v.to(torch.float8_e4m3fn)
    lens = torch.full((args.b,), args.nk, device="cuda", dtype=torch.int32)
    descale = torch.ones(1, device="cuda")
    for name, call in (
            ("f16", lambda: flashmlir.flash_attn_with_kvcache(
                q, k, v, cache_seqlens=lens, causal=True)),
            ("e4m3", lambda: flashmlir.flash_attn_with_kvcache(
                q, k8, v8, cache_seqlens=lens, causal=True,
                k_descale=descale, v_descale=descale))):
        for _ in range(args.calls):
            call()
        torch.cuda.synchronize()
        print(f"profile_decode: {name} B={args.b} {args.hq}/{args.hkv} "
              f"Nk={args.nk} x{args.calls}")


if __name__ == "__main__":
    main()
