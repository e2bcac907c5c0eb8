"""Decode as a server runs it: one decode call captured in a CUDA graph and
replayed, ours (the split-KV kernel at the auto chunk count) against
cuDNN's (torch SDPA, captured the same way), so that neither pays its
launch path's host time per call. Short caches at B 1, where the eager
calls' host time exceeds the kernels' (decode_gpu_time.py), and the three
rows of issue 17.

    here:  fa-compile --head-dim 128 --split-kv auto -o DIR/default
    there: python3 bench/probes/decode_graphs.py DIR [--out FILE.json]

Per row: GB/s of K + V read, triton's do_bench median of graph.replay()
(L2 flushed before each replay); the ratio ours / cuDNN.
"""
import json
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
import flashmlir.runtime  # noqa: E402
from common import Kernel, median_ms  # noqa: E402


def captured(step):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    return graph


def main():
    folder = sys.argv[1]
    out_file = sys.argv[sys.argv.index("--out") + 1] \
        if "--out" in sys.argv else None
    kern = Kernel.load(os.path.join(folder, "default"))
    _, sms, dram_gbps = flashmlir.runtime.device_facts(0)
    rows = []
    for b, h, nk in [(1, 32, 1024), (1, 32, 2048), (1, 32, 4096),
                     (1, 32, 8192), (1, 32, 32768), (1, 8, 131072),
                     (4, 32, 8192)]:
        torch.manual_seed(0)
        q = torch.randn(b, h, 1, 128, device="cuda", dtype=torch.float16)
        k = torch.randn(b, h, nk, 128, device="cuda", dtype=torch.float16)
        v = torch.randn_like(k)
        o = torch.empty_like(q)
        lse = torch.empty(b, h, 1, device="cuda")
        # SDPA's output, allocated inside its graph (no copy kernel added).
        theirs = {}
        gb = 2 * k.numel() * 2 / 1e9
        splits = kern.kv_splits_for(b, h, 1, nk, sms, dram_gbps, 0)

        def ours():
            kern(q, k, v, out=o, lse=lse, num_splits=splits)

        def cudnn():
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                theirs["o"] = F.scaled_dot_product_attention(q, k, v)

        graphs = {"ours": captured(ours), "cudnn": captured(cudnn)}
        for g in graphs.values():
            g.replay()
        torch.cuda.synchronize()
        err = (o.float() - theirs["o"].float()).abs().max().item()
        row = {"B": b, "H": h, "Nk": nk, "splits": splits,
               "max_abs_diff_vs_cudnn": err}
        for name, g in graphs.items():
            row[f"{name}_us"] = round(median_ms(g.replay) * 1e3, 2)
            row[f"{name}_GBps"] = round(gb / (row[f"{name}_us"] / 1e6))
        row["ours_vs_cudnn"] = round(row["cudnn_us"] / row["ours_us"], 3)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if out_file:
        with open(out_file, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
