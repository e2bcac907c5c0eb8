"""Where a ragged varlen batch loses against the uniform batch of the same
work (issue 17): the order of its sequences (the persistent kernels deal
tiles in sequence order) and its ragged tails (a sequence's last query
block and last key block are partly empty).

    python3 bench/probes/varlen_order.py DIR [seeds] [rounds]

DIR holds bench/build_varlen_kernels.sh's D 128 kernels (the varlen ones,
persistent and `_single`, and the contiguous ones). Each ragged batch (12
lengths in [256, 4096), one per seed) runs as given, sorted longest first,
sorted shortest first, with every length rounded up to a multiple of 128
(no ragged tails; its own work), and with only the query lengths or only
the key lengths rounded up (`q_aligned`, `k_aligned`: which tail costs). TFLOP/s of the useful work, median of
`rounds` interleaved do_bench medians, against the contiguous kernel on the
uniform batch of the same work (bench/varlen.py's reference point). The
tile efficiency is the useful work over the work of whole 128 x 128 blocks.
"""
import math
import os
import random
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
from common import Kernel, median_ms  # noqa: E402
from varlen import flops, packed  # noqa: E402

folder = sys.argv[1]
seeds = [int(s) for s in (sys.argv[2] if len(sys.argv) > 2
                          else "7,11,13").split(",")]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
D, HQ, HKV, DT = 128, 32, 8, torch.float16


def tile_efficiency(lq, lk, causal):
    useful = flops(lq, lk, D, HQ, causal)
    blocks = 0
    for nq, nk in zip(lq, lk):
        mq, mk = math.ceil(nq / 128), math.ceil(nk / 128)
        # Causal bottom-right with Nq = Nk: query block i sees blocks 0..i.
        blocks += mq * (mq + 1) // 2 if causal and nq == nk else mq * mk
    return useful / (blocks * 4 * HQ * D * 128 * 128)


def rate(call, work):
    return work / (median_ms(call) / 1e3) / 1e12


for causal in (False, True):
    tag = "_causal_bralign" if causal else ""
    kernels = {k: Kernel.load(os.path.join(folder, f"sm_90a_d128_f16{tag}{s}"))
               for k, s in (("persistent", "_varlen"),
                            ("single", "_varlen_single"))}
    contiguous = Kernel.load(os.path.join(
        folder, f"sm_90a_d128_f16{'_causal' if causal else ''}"))
    for seed in seeds:
        rng = random.Random(seed)
        given = [rng.randrange(256, 4096) for _ in range(12)]
        up = [math.ceil(n / 128) * 128 for n in given]
        batches = {"given": (given, given),
                   "longest_first": (sorted(given, reverse=True),) * 2,
                   "shortest_first": (sorted(given),) * 2,
                   "aligned": (up, up)}
        if not causal:
            batches["q_aligned"] = (up, given)
            batches["k_aligned"] = (given, up)
        for label, (lengths, keys) in batches.items():
            q, cuq = packed(lengths, HQ, D, DT)
            k, cuk = packed(keys, HKV, D, DT)
            v = torch.randn_like(k)
            out = torch.empty_like(q)
            lse = torch.empty(q.shape[:3], device="cuda")
            work = flops(lengths, keys, D, HQ, causal)
            n = len(lengths)
            same = int(round(math.sqrt(sum(x * y for x, y in zip(lengths, keys))
                                       / n) / 64) * 64)
            qb = torch.randn(n, HQ, same, D, device="cuda", dtype=DT)
            kb = torch.randn(n, HKV, same, D, device="cuda", dtype=DT)
            vb = torch.randn_like(kb)
            ob = torch.empty_like(qb)
            lb = torch.empty(qb.shape[:3], device="cuda")
            uniform = flops([same] * n, [same] * n, D, HQ, causal)
            calls = {key: (lambda kern=kern: kern(
                q, k, v, out=out, lse=lse, cu_seqlens_q=cuq, cu_seqlens_k=cuk,
                max_seqlen_q=max(lengths))) for key, kern in kernels.items()}
            calls["contiguous"] = lambda: contiguous(qb, kb, vb, out=ob, lse=lb)
            works = {key: work for key in kernels}
            works["contiguous"] = uniform
            rates = {key: [] for key in calls}
            for _ in range(rounds):
                for key, call in calls.items():
                    rates[key].append(rate(call, works[key]))
            med = {key: sorted(r)[len(r) // 2] for key, r in rates.items()}
            print(f"causal={int(causal)} seed={seed} {label:14s} "
                  f"tile_eff {tile_efficiency(lengths, keys, causal):.3f}  "
                  f"persistent {med['persistent']:.0f} single "
                  f"{med['single']:.0f} contiguous(L={same}) "
                  f"{med['contiguous']:.0f} TFLOP/s  ratio persistent "
                  f"{med['persistent'] / med['contiguous']:.3f} single "
                  f"{med['single'] / med['contiguous']:.3f}", flush=True)
