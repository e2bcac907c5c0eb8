"""Where causal varlen loses to the contiguous causal kernel on the same work
(issue 17): a uniform batch (8 x 2048, Hq 32, Hkv 8, D 128, f16) run packed
by the varlen kernels and as [B, H, N, D] by the contiguous ones, so any
difference is the varlen machinery's, not the work's.

    python3 bench/probes/varlen_causal_gap.py time DIR...   # TFLOP/s, interleaved
    python3 bench/probes/varlen_causal_gap.py once DIR/NAME # 3 launches (ncu)

`time` runs every causal D 128 kernel of the folders without a window or
softcap, 5 interleaved rounds, the median; a varlen kernel (metadata
`varlen`) gets the packed batch.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
from common import Kernel, kernel_names, median_ms  # noqa: E402
from varlen import flops, packed  # noqa: E402

B, N, HQ, HKV, D = 8, 2048, 32, 8, 128


def inputs(kernel):
    """The launch of `kernel` on the batch, as a callable."""
    if kernel.meta.get("varlen"):
        q, cuq = packed([N] * B, HQ, D, torch.float16)
        k, cuk = packed([N] * B, HKV, D, torch.float16)
        v = torch.randn_like(k)
        out, lse = torch.empty_like(q), torch.empty(q.shape[:3], device="cuda")
        return lambda: kernel(q, k, v, out=out, lse=lse, cu_seqlens_q=cuq,
                              cu_seqlens_k=cuk, max_seqlen_q=N)
    q = torch.randn(B, HQ, N, D, device="cuda", dtype=torch.float16)
    k = torch.randn(B, HKV, N, D, device="cuda", dtype=torch.float16)
    v = torch.randn_like(k)
    out, lse = torch.empty_like(q), torch.empty(B, HQ, N, device="cuda")
    return lambda: kernel(q, k, v, out=out, lse=lse)


def main():
    mode = sys.argv[1]
    if mode == "once":
        call = inputs(Kernel.load(sys.argv[2]))
        for _ in range(3):
            call()
        torch.cuda.synchronize()
        return
    calls = {}
    for folder in sys.argv[2:]:
        for name in kernel_names(folder):
            kernel = Kernel.load(os.path.join(folder, name))
            meta = kernel.meta
            if meta.get("causal") and not meta.get("window") and \
                    not meta.get("softcap") and meta["head_dim"] == D:
                calls[f"{folder}/{name}"] = inputs(kernel)
    times = {name: [] for name in calls}
    for _ in range(5):
        for name, call in calls.items():
            times[name].append(median_ms(call))
    work = flops([N] * B, [N] * B, D, HQ, True)
    for name, t in times.items():
        ms = sorted(t)[len(t) // 2]
        print(f"{name}: {work / (ms / 1e3) / 1e12:.0f} TFLOP/s "
              f"({min(t):.3f}-{max(t):.3f} ms)")


if __name__ == "__main__":
    main()
