"""Tile-size sweep on the H200: every kernel variant in a folder is checked
(ragged, GQA, causal shapes) and timed on the N = 4096 and 16384 configs of
the grid, side by side with torch's FA2 and cuDNN backends.

Variants are named  <arch>_d<D>_<dtype>[_causal]__br<B_r>_bc<B_c>  (as
bench/build_variants.sh writes them).

    python3 bench/sweep.py --kernels .variants --out $OUT
"""
import argparse
import json
import os
import re
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from flashmlir.runtime import Kernel  # noqa: E402

# <anything>__<variant tag>; shapes and flags come from the JSON metadata.
NAME = re.compile(r".+__(?P<tag>[\w.-]+)$")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernels", default=".variants")
    ap.add_argument("--out", default=os.environ.get("OUT", "sweep-out"))
    ap.add_argument("--sizes", default="4096,16384")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",") if x]  # "": checks only
    rows, failures = [], 0
    for f in sorted(os.listdir(args.kernels)):
        m = NAME.match(f[:-len(".json")]) if f.endswith(".json") else None
        if not m:
            continue
        kernel = Kernel.load(os.path.join(args.kernels, f[:-5]))
        d, causal = kernel.meta["head_dim"], kernel.meta["causal"]
        dtype = harness.DT[kernel.meta["dtype"]]
        ok = True
        for i, (b, hq, hkv, nq, nk) in enumerate(
                [(2, 8, 2, 1000, 1000), (1, 4, 1, 77, 300), (1, 2, 2, 300, 77),
                 (4, 32, 8, 1000, 1100)]):  # the last: several tiles per
                                            # persistent CTA
            r = harness.check(kernel, b, hq, hkv, nq, nk, d, dtype, causal, i)
            ok = ok and r["ok"]
            if not r["ok"]:
                print("FAIL", f, r, flush=True)
        failures += not ok
        print(f"check {f[:-5]}: {'ok' if ok else 'FAIL'}", flush=True)
        for n in sizes:
            row = harness.time_config(kernel, n, d, dtype, causal)
            row.update(variant=f[:-5], tag=m["tag"],
                       br=kernel.meta["block_r"], bc=kernel.meta["block_c"],
                       dtype=kernel.meta["dtype"], correct=ok,
                       kernel=kernel.name)
            rows.append(row)
            print(json.dumps({k: row[k] for k in (
                "variant", "N", "flash_mlir_tflops", "fa2_tflops",
                "cudnn_tflops", "correct")}), flush=True)
        if sizes:
            # Again after hundreds of timed launches: a kernel with state
            # across launches (the dynamic scheduler's counter) must still
            # be right.
            r = harness.check(kernel, 4, 32, 8, 1000, 1100, d, dtype, causal,
                              7)
            if not r["ok"]:
                print("FAIL after timing", f, r, flush=True)
                failures += 1
            print(f"check after timing {f[:-5]}: "
                  f"{'ok' if r['ok'] else 'FAIL'}", flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "sweep.json"), "w") as fh:
        json.dump(rows, fh, indent=1)
    print("| variant | N | TFLOP/s | FA2 | cuDNN | vs FA2 | correct |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['variant']} | {r['N']} | {r['flash_mlir_tflops']:.0f} | "
              f"{r.get('fa2_tflops', 0):.0f} | {r.get('cudnn_tflops', 0):.0f} |"
              f" {r.get('ratio_vs_fa2', 0):.2f} | {r['correct']} |")
    print(f"sweep: {len(rows)} timings, {failures} variants failed checks")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
