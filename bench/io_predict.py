"""Predicted L2 -> SM, SM -> L2 and DRAM bytes of the kernels in a folder
for a grid of shapes, from fagpu-io-report (run here, where fa-opt is): one
static module per (kernel, shape), the same tiles as the kernel's metadata.
Writes the list bench/io_check.py compares with ncu on the H200.

    python3 bench/io_predict.py .cubins > .io/expected.json
    python3 bench/io_predict.py .cubins --only KERNEL:B,Hq,Hkv,Nq,Nk[,S];...
"""
import json
import os
import re
import subprocess
import sys

SHAPES = [(1, 16, 16, 4096, 4096), (1, 16, 16, 1024, 1024),
          (1, 16, 16, 1000, 1000), (1, 16, 4, 2048, 2048),
          (1, 16, 16, 16384, 16384), (8, 32, 8, 1, 8192)]
# Split-KV kernels: (B, Hq, Hkv, Nq, Nk, chunks): decode, a few queries of
# a GQA cache, more chunks than blocks (empty chunks), prefill.
# The DRAM model's grid (D = 128 kernels): K/V heads that fit L2 across
# waves, GQA with a large group (one K/V head read by 8 query heads), and
# working sets past L2 (a head's K/V is 32 MiB at 64k keys, 64 MiB at 128k).
DRAM_SHAPES = [(1, 2, 2, 65536, 65536), (1, 8, 1, 65536, 65536),
               (1, 2, 2, 131072, 131072), (1, 16, 16, 32768, 32768)]
SPLIT_SHAPES = [(1, 32, 32, 1, 32768, 4), (1, 8, 8, 1, 131072, 16),
                (2, 8, 2, 5, 1531, 3), (1, 4, 1, 70, 300, 8),
                (2, 4, 4, 1000, 1100, 2)]


# The DRAM model's L2 (0: the target's; FA_IO_L2_BYTES to try others). The
# kernel's code is the metadata's code_bytes (fa-compile reads it from the
# cubin; absent from metadata older than that: not counted).
L2_BYTES = int(os.environ.get("FA_IO_L2_BYTES", "0"))


def main():
    folder = sys.argv[1]
    # --only: a list of (kernel, shape) points instead of the grids.
    only = {}
    if "--only" in sys.argv:
        for point in sys.argv[sys.argv.index("--only") + 1].split(";"):
            name, shape = point.split(":")
            values = [int(x) for x in shape.split(",")]
            only.setdefault(name, []).append(tuple(values + [0] * (6 - len(
                values))))
    rows = []
    for f in sorted(os.listdir(folder)):
        if not f.endswith(".json") or (only and f[:-5] not in only):
            continue
        meta = json.load(open(os.path.join(folder, f)))
        if meta.get("arch") != "sm_90a" or meta["dtype"] != "f16" or \
                meta.get("window", 0):
            continue
        d, causal = meta["head_dim"], meta["causal"]
        split = meta.get("split_kv", False)
        shapes = SPLIT_SHAPES if split else [s + (0,) for s in SHAPES]
        if d == 128 and not split and not meta.get("bottom_right"):
            shapes += [s + (0,) for s in DRAM_SHAPES]
        if only:
            shapes = only[f[:-5]]
        for b, hq, hkv, nq, nk, splits in shapes:
            extra = (", bottom_right" if meta.get("bottom_right") else "") + \
                (f", kv_splits = {splits} : i64" if splits else "")
            t = lambda h, n, dd: f"memref<{b}x{h}x{n}x{dd}xf16>"  # noqa
            text = (f"func.func @f(%q: {t(hq, nq, d)}, %k: {t(hkv, nk, d)}, "
                    f"%o: {t(hq, nq, d)}, %l: memref<{b}x{hq}x{nq}xf32>) {{\n"
                    f"  fa.attention %q, %k, %k outs(%o, %l : {t(hq, nq, d)}, "
                    f"memref<{b}x{hq}x{nq}xf32>) "
                    f"{{block_r = {meta['block_r']} : i64, block_c = "
                    f"{meta['block_c']} : i64{', causal' if causal else ''}"
                    f"{extra}}}"
                    f" : {t(hq, nq, d)}, {t(hkv, nk, d)}, {t(hkv, nk, d)}\n"
                    f"  return\n}}\n")
            # The mma.sync kernel (no TMA boxes: cp.async moves the rows in
            # bounds only) is sm_80's pipeline, whichever arch it runs on.
            tile_target = "sm_90a" if meta.get("tma_box_cols") else "sm_80"
            schedule = ("fagpu-warp-specialize,fagpu-persistent,"
                        "fagpu-pipeline-kv,fagpu-ping-pong,"
                        "fagpu-overlap-softmax,fagpu-tma-store-epilogue,"
                        if tile_target == "sm_90a" else "")
            out = subprocess.run(
                ["build/bin/fa-opt", "-", "-o", "/dev/null", "--pass-pipeline="
                 "builtin.module(func.func(fa-attention-to-buffers,"
                 f"fagpu-tile{{target={tile_target}}},fa-lower-fa2,"
                 f"fa-map-to-gpu{{target={tile_target}}},{schedule}"
                 f"fagpu-io-report{{l2-bytes={L2_BYTES} "
                 f"code-bytes={meta.get('code_bytes', 0)}}}))"],
                input=text, capture_output=True, text=True, check=True).stdout
            reads = int(re.search(r"l2_to_sm_read_bytes: (\d+)", out)[1])
            writes = int(re.search(r"sm_to_l2_write_bytes: (\d+)", out)[1])
            model = int(re.search(r"fa2_model_read_bytes: (\d+)", out)[1])
            dram_read = int(re.search(r"dram_read_bytes: (\d+)", out)[1])
            dram_write = int(re.search(r"dram_write_bytes: (\d+)", out)[1])
            spills = "spills L2" in out
            rows.append(dict(kernel=f[:-5], B=b, Hq=hq, Hkv=hkv, Nq=nq,
                             Nk=nk, D=d, causal=causal, kv_splits=splits,
                             predicted_read=reads,
                             predicted_write=writes, fa2_model_read=model,
                             predicted_dram_read=dram_read,
                             predicted_dram_write=dram_write,
                             dram_spills_l2=spills))
    json.dump(rows, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
