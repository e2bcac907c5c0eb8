"""Runs every kernel in a folder once on ragged shapes (N not a multiple of
any tile, GQA, causal and not) and checks that every output element was
written. Meant to run under compute-sanitizer:

    for t in memcheck racecheck synccheck; do
      compute-sanitizer --tool $t --error-exitcode 1 python3 bench/sanitize.py
    done
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Kernel, dtypes, kernel_names  # noqa: E402

DT = dtypes()


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else ".cubins"
    bad = 0
    names = kernel_names(folder)
    for name in names:
        k = Kernel.load(os.path.join(folder, name))
        d, dtype = k.meta["head_dim"], DT[k.meta["dtype"]]
        # (2, 24, 4, 700, 650): 192-352 tiles, more than the SMs, so the
        # CTAs of a persistent kernel run several tiles each.
        for (b, hq, hkv, nq, nk) in [(1, 4, 2, 131, 77), (2, 2, 1, 77, 333),
                                     (2, 24, 4, 700, 650)]:
            q = torch.randn(b, hq, nq, d, device="cuda", dtype=dtype)
            kk = torch.randn(b, hkv, nk, d, device="cuda", dtype=dtype)
            v = torch.randn(b, hkv, nk, d, device="cuda", dtype=dtype)
            out = torch.full_like(q, float("nan"))
            lse = torch.full((b, hq, nq), float("nan"), device="cuda")
            k(q, kk, v, out=out, lse=lse, scale=1 / math.sqrt(d))
            torch.cuda.synchronize()
            unwritten = int((~torch.isfinite(out)).sum()) + int(
                torch.isnan(lse).sum())
            bad += unwritten != 0
            print(f"{name} B={b} Hq={hq} Hkv={hkv} Nq={nq} Nk={nk}: "
                  f"unwritten={unwritten}", flush=True)
    print(f"sanitize: {len(names) * 2 - bad} passed, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
