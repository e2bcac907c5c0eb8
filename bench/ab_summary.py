"""Pairs the kernels of an A/B sweep (bench/sweep.py over a folder holding
<name>__old and <name>__new of each kernel) and prints new / old per
config, the geomean per family and the lowest ratio, next to cuDNN.

    python3 bench/ab_summary.py $OUT/sweep.json
"""
import json
import math
import sys
from collections import defaultdict


def main():
    rows = json.load(open(sys.argv[1]))
    by = defaultdict(dict)
    for r in rows:
        name, tag = r["variant"].rsplit("__", 1)
        by[(name, r["N"])][tag] = r
    fams = defaultdict(list)
    print("| kernel | N | old TFLOP/s | new TFLOP/s | new/old | new/cuDNN | correct |")
    print("|---|---|---|---|---|---|---|")
    for (name, n), pair in sorted(by.items()):
        if "old" not in pair or "new" not in pair:
            continue
        old, new = pair["old"], pair["new"]
        ratio = new["flash_mlir_tflops"] / old["flash_mlir_tflops"]
        cudnn = new.get("cudnn_tflops")
        family = name.split("_")[0]
        fams[family].append((ratio, name, n))
        print(f"| {name} | {n} | {old['flash_mlir_tflops']:.0f} | "
              f"{new['flash_mlir_tflops']:.0f} | {ratio:.3f} | "
              f"{new['flash_mlir_tflops'] / cudnn if cudnn else float('nan'):.3f} | "
              f"{old['correct'] and new['correct']} |")
    for family, ratios in sorted(fams.items()):
        geo = math.exp(sum(math.log(r) for r, _, _ in ratios) / len(ratios))
        low = min(ratios)
        print(f"ab {family}: {len(ratios)} configs, geomean new/old "
              f"{geo:.3f}, lowest {low[0]:.3f} ({low[1]} N={low[2]})")


if __name__ == "__main__":
    main()
