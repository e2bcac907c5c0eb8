"""What a TMA store of O would be worth to a varlen kernel's full tiles
(issue 17): the contiguous D 128 kernels as shipped (stmatrix + TMA store)
against the same kernels built with the varlen kernels' epilogue (stmatrix
+ the warpgroup's copy of whole rows, a throw-away build: `_copy`), and the
varlen kernel on the same uniform batch packed. Interleaved rounds,
TFLOP/s.

    python3 bench/probes/varlen_epilogue_ab.py DIR [rounds] [BxN,...]
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
from common import Kernel, median_ms  # noqa: E402
from varlen import flops, packed  # noqa: E402

folder = sys.argv[1]
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
shapes = [tuple(int(x) for x in s.split("x")) for s in (
    sys.argv[3] if len(sys.argv) > 3 else "12x1920,4x4096,1x16384").split(",")]
D, HQ, HKV, DT = 128, 32, 8, torch.float16
for causal in (False, True):
    tag = "_causal" if causal else ""
    tma = Kernel.load(os.path.join(folder, f"sm_90a_d128_f16{tag}"))
    copy = Kernel.load(os.path.join(folder, f"sm_90a_d128_f16{tag}_copy"))
    varlen = Kernel.load(os.path.join(
        folder, f"sm_90a_d128_f16{'_causal_bralign' if causal else ''}_varlen"))
    for b, n in shapes:
        q = torch.randn(b, HQ, n, D, device="cuda", dtype=DT)
        k = torch.randn(b, HKV, n, D, device="cuda", dtype=DT)
        v = torch.randn_like(k)
        o = torch.empty_like(q)
        lse = torch.empty(q.shape[:3], device="cuda")
        lengths = [n] * b
        qp, cuq = packed(lengths, HQ, D, DT)
        kp, cuk = packed(lengths, HKV, D, DT)
        vp = torch.randn_like(kp)
        op = torch.empty_like(qp)
        lp = torch.empty(qp.shape[:3], device="cuda")
        calls = {"tma": lambda: tma(q, k, v, out=o, lse=lse),
                 "copy": lambda: copy(q, k, v, out=o, lse=lse),
                 "varlen": lambda: varlen(qp, kp, vp, out=op, lse=lp,
                                          cu_seqlens_q=cuq, cu_seqlens_k=cuk,
                                          max_seqlen_q=n)}
        outs = {}
        for key in ("tma", "copy"):
            calls[key]()
            torch.cuda.synchronize()
            outs[key] = o.clone()
        work = flops(lengths, lengths, D, HQ, causal)
        times = {key: [] for key in calls}
        for _ in range(rounds):
            for key, call in calls.items():
                times[key].append(median_ms(call))
        r = {key: work / (sorted(t)[len(t) // 2] / 1e3) / 1e12
             for key, t in times.items()}
        print(f"causal={int(causal)} B {b} N {n}: tma {r['tma']:.0f} copy "
              f"{r['copy']:.0f} varlen {r['varlen']:.0f} TFLOP/s; tma/copy "
              f"{r['tma'] / r['copy']:.3f}, varlen/tma "
              f"{r['varlen'] / r['tma']:.3f}, varlen/copy "
              f"{r['varlen'] / r['copy']:.3f}; O identical "
              f"{torch.equal(outs['tma'], outs['copy'])}", flush=True)
