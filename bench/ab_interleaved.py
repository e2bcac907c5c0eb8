"""A/B of two builds of the same kernels with the order effects taken out:
for every <name>__old / <name>__new pair in a folder and every N, the two
are timed alternately for several rounds on the same tensors (ABAB...,
each a do_bench median), and the median of the per-round ratios new/old
is reported, with cuDNN timed once beside them. Correctness is checked
first on ragged GQA shapes (bench/harness.check).

    python3 bench/ab_interleaved.py --kernels .ab --rounds 5 --out $OUT
"""
import argparse
import json
import math
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from flashmlir.runtime import Kernel  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernels", default=".ab")
    ap.add_argument("--out", default=os.environ.get("OUT", "ab-out"))
    ap.add_argument("--sizes", default="1024,4096,16384")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    names = sorted(f[:-len("__old.json")] for f in os.listdir(args.kernels)
                   if f.endswith("__old.json"))
    rows, failures = [], 0
    for name in names:
        pair = {tag: Kernel.load(os.path.join(args.kernels, f"{name}__{tag}"))
                for tag in ("old", "new")}
        meta = pair["new"].meta
        d, causal = meta["head_dim"], meta["causal"]
        dtype = harness.DT[meta["dtype"]]
        for tag, kernel in pair.items():
            for i, shape in enumerate([(2, 8, 2, 1000, 1000),
                                       (1, 4, 1, 77, 300),
                                       (4, 32, 8, 1000, 1100)]):
                r = harness.check(kernel, *shape, d, dtype, causal, i)
                if not r["ok"]:
                    failures += 1
                    print("FAIL", name, tag, r, flush=True)
        for n in [int(x) for x in args.sizes.split(",")]:
            b, h = 16384 // n, 2048 // d
            torch.manual_seed(0)
            q = torch.randn(b, h, n, d, device="cuda", dtype=dtype)
            k, v = torch.randn_like(q), torch.randn_like(q)
            out = torch.empty_like(q)
            lse = torch.empty((b, h, n), device="cuda", dtype=torch.float32)
            flops = 4.0 * b * h * n * n * d * (0.5 if causal else 1.0)
            ms = {"old": [], "new": []}
            for r in range(args.rounds):
                # Alternate which goes first, so neither always runs warm.
                order = ("old", "new") if r % 2 == 0 else ("new", "old")
                for tag in order:
                    kern = pair[tag]
                    ms[tag].append(harness.bench(
                        lambda: kern(q, k, v, out=out, lse=lse)))
            ratios = [o / nw for o, nw in zip(ms["old"], ms["new"])]
            cudnn = harness.bench(lambda: harness.sdpa(
                q, k, v, causal, harness.BACKENDS["cudnn"]))
            row = dict(kernel=name, N=n, D=d, causal=causal,
                       dtype=meta["dtype"],
                       old_tflops=flops / statistics.median(ms["old"]) / 1e9,
                       new_tflops=flops / statistics.median(ms["new"]) / 1e9,
                       ratio=statistics.median(ratios),
                       ratio_min=min(ratios), ratio_max=max(ratios),
                       cudnn_tflops=flops / cudnn / 1e9)
            rows.append(row)
            print(json.dumps(row), flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "ab-interleaved.json"), "w") as fh:
        json.dump(rows, fh, indent=1)
    print("| kernel | N | old | new | new/old (median of rounds) | "
          "min-max | new/cuDNN |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['kernel']} | {r['N']} | {r['old_tflops']:.0f} | "
              f"{r['new_tflops']:.0f} | {r['ratio']:.3f} | "
              f"{r['ratio_min']:.3f}-{r['ratio_max']:.3f} | "
              f"{r['new_tflops'] / r['cudnn_tflops']:.3f} |")
    fams = {}
    for r in rows:
        fams.setdefault(r["kernel"].split("_")[0], []).append(r)
    for fam, rs in sorted(fams.items()):
        geo = math.exp(sum(math.log(r["ratio"]) for r in rs) / len(rs))
        low = min(rs, key=lambda r: r["ratio"])
        print(f"ab {fam}: {len(rs)} configs, geomean new/old {geo:.3f}, "
              f"lowest {low['ratio']:.3f} ({low['kernel']} N={low['N']})")
    print(f"ab: {failures} failed checks")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
