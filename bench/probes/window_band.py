"""Windows with separate left and right reaches (a diagonal offset) against
the symmetric and causal windows of the same band width, on the sm_90a
kernels: TFLOP/s of useful work (4 B H D per visible (query, key) pair).

    here:  bash bench/probes/window_band.sh DIR
    there: python3 bench/probes/window_band.py DIR [--out FILE.json]

Each row: a band of `width` keys per query (flash-attention's window_size
(left, right), left + right + 1 = width) as the kernel that serves it:
symmetric (w, w) -> window w + 1; causal (w, 0) -> causal, window w + 1;
(left, right) -> causal, window left + right + 1, diagonal_offset right.
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
from common import Kernel, median_ms  # noqa: E402

# (kernel file, window_size)
BANDS = [("sym_256", (256, 256)), ("causal_512", (512, 0)),
         ("asym_384_128", (384, 128)), ("asym_128_384", (128, 384)),
         ("sym_1024", (1024, 1024)), ("causal_2048", (2048, 0)),
         ("asym_1536_512", (1536, 512))]


def visible_pairs(nq, nk, left, right):
    i = torch.arange(nq, dtype=torch.int64) + (nk - nq)
    lo = (i - left).clamp(min=0)
    hi = (i + right).clamp(max=nk - 1)
    return int((hi - lo + 1).clamp(min=0).sum())


def main():
    folder = sys.argv[1]
    out = sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv \
        else None
    b, h, d = 2, 32, 128
    rows = []
    for n in (8192, 32768):
        q = torch.randn(b, h, n, d, device="cuda", dtype=torch.float16)
        k = torch.randn_like(q)
        v = torch.randn_like(q)
        o = torch.empty_like(q)
        for name, (left, right) in BANDS:
            kernel = Kernel.load(os.path.join(folder, name))
            ms = median_ms(lambda: kernel(q, k, v, out=o, discard_lse=True))
            flops = 4 * b * h * d * visible_pairs(n, n, left, right)
            rows.append(dict(n=n, kernel=name, window_size=[left, right],
                             ms=ms, tflops=flops / ms / 1e9))
            print(f"N {n:6d} {name:15s} ({left:5d}, {right:5d}) "
                  f"{ms:8.3f} ms {flops / ms / 1e9:7.1f} TFLOP/s", flush=True)
    if out:
        with open(out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
