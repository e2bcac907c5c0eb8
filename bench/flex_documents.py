"""Issue 49's document-mask target: a FlexAttention-style document mask
(ids captured, causal inside each document) against the varlen kernel
doing the same work (the documents as a varlen batch, causal), in one
process on one GPU. The document mask is flex_module's "packed documents
from captured ids" launch of test/Inputs/flex_regions_inlined_f16.mlir,
timed without key ranges, with the hull alone, and with the hull and the
full blocks (flashmlir.create_block_mask); the varlen kernel is

    build/bin/fa-compile --arch sm_90a --head-dim 128 --causal \\
        --causal-align bottom-right --varlen --out-dir .varlen

    python3 bench/flex_documents.py .flex-inlined .varlen

B 1, H 16, N 16k, D 128, f16; the documents are flex_module's (64 of 1 to
1,500 positions and a tail); median of 20 calls each."""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from flex_module import (Kernel, MASKS, captures_for,  # noqa: E402
                         inlined_captures, key_ranges_for)

NAME = "packed documents from captured ids, causal"


def median_ms(fn, calls=20):
    for _ in range(3):
        fn()
    times = []
    for _ in range(calls):
        start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def main():
    flex_dir, varlen_dir = sys.argv[1], sys.argv[2]
    with open(os.path.join(flex_dir, "module.cubin"), "rb") as f:
        cubin = f.read()
    meta = None
    i = 0
    while os.path.exists(os.path.join(flex_dir, f"launch{i}.json")):
        with open(os.path.join(flex_dir, f"launch{i}.json")) as f:
            m = json.load(f)
        if i == 6:  # flex_module.MODULES[1]'s packed documents launch
            meta = m
        i += 1
    flex = Kernel(cubin, meta)
    caps = inlined_captures("cuda")
    captures = captures_for(meta, caps)
    b, h, n, d = 1, 16, 16384, 128
    torch.manual_seed(0)
    q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.float16)
               for _ in range(3))
    ranges, sparsity, full = key_ranges_for(NAME, meta, caps, b, h, n)
    hull = ranges.clone()
    hull[..., 2:] = 0
    row = {"kernel": meta["kernel"], "sparsity": sparsity, "full": full}
    for label, r in (("flex_no_ranges_ms", None), ("flex_hull_ms", hull),
                     ("flex_hull_full_ms", ranges)):
        row[label] = median_ms(lambda: flex(q, k, v, captures=captures,
                                            key_ranges=r))
    # The same documents as a varlen batch: each id's run of positions.
    ids = caps[1].cpu()
    lengths = torch.unique_consecutive(ids, return_counts=True)[1].tolist()
    sums = [0]
    for x in lengths:
        sums.append(sums[-1] + x)
    cu = torch.tensor(sums, dtype=torch.int32, device="cuda")
    varlen = Kernel.load(os.path.join(varlen_dir,
                                      "sm_90a_d128_f16_causal_bralign_varlen"))
    out = torch.empty_like(q)
    lse = torch.empty(q.shape[:3], device="cuda")
    row["documents"] = len(lengths)
    row["varlen_ms"] = median_ms(lambda: varlen(
        q, k, v, out=out, lse=lse, cu_seqlens_q=cu, cu_seqlens_k=cu,
        max_seqlen_q=max(lengths)))
    # The same numbers both ways (the 2x rule is flex_module's; here the
    # two kernels must agree with each other).
    o_flex, _ = flex(q, k, v, captures=captures, key_ranges=ranges)
    torch.cuda.synchronize()
    row["max_abs_diff_vs_varlen"] = float((o_flex.float() - out.float()).abs()
                                          .max())
    row["flex_vs_varlen_time"] = row["flex_hull_full_ms"] / row["varlen_ms"]
    print(json.dumps(row))


if __name__ == "__main__":
    main()
