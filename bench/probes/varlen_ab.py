"""A/B of the persistent varlen kernels of two folders (e.g. before and
after a change), interleaved, on bench/varlen.py's batches: uniform (8 x
2048) and ragged (12 lengths in [256, 4096)), D 128 f16, Hq 32 Hkv 8.

    python3 bench/probes/varlen_ab.py OLD_DIR NEW_DIR [rounds] [batches]

`batches` (comma-separated, default uniform,ragged) may also name many128
(128 sequences of 64 to 511 rows) and many256 (256 of 16 to 255): serving
batches of many short sequences, where finding a tile's sequence costs most.
"""
import os
import random
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
from common import Kernel, median_ms  # noqa: E402
from varlen import flops, packed  # noqa: E402

old_dir, new_dir = sys.argv[1], sys.argv[2]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
rng = random.Random(7)
ragged = [rng.randrange(256, 4096) for _ in range(12)]
batches = {"uniform": [2048] * 8, "ragged": ragged,
           "many128": [rng.randrange(64, 512) for _ in range(128)],
           "many256": [rng.randrange(16, 256) for _ in range(256)]}
chosen = (sys.argv[4] if len(sys.argv) > 4 else "uniform,ragged").split(",")
for causal in (False, True):
    name = f"sm_90a_d128_f16{'_causal_bralign' if causal else ''}_varlen"
    kernels = {"old": Kernel.load(os.path.join(old_dir, name)),
               "new": Kernel.load(os.path.join(new_dir, name))}
    for label in chosen:
        lengths = batches[label]
        q, cuq = packed(lengths, 32, 128, torch.float16)
        k, cuk = packed(lengths, 8, 128, torch.float16)
        v = torch.randn_like(k)
        out = torch.empty_like(q)
        lse = torch.empty(q.shape[:3], device="cuda")
        outs = {}
        times = {key: [] for key in kernels}
        for _ in range(rounds):
            for key, kern in kernels.items():
                call = (lambda kern=kern: kern(
                    q, k, v, out=out, lse=lse, cu_seqlens_q=cuq,
                    cu_seqlens_k=cuk, max_seqlen_q=max(lengths)))
                times[key].append(median_ms(call))
                call()
                torch.cuda.synchronize()
                outs[key] = out.clone()
        work = flops(lengths, lengths, 128, 32, causal)
        rate = {key: work / (sorted(t)[len(t) // 2] / 1e3) / 1e12
                for key, t in times.items()}
        same = torch.equal(outs["old"], outs["new"])
        print(f"{name} {label}: old {rate['old']:.0f} new {rate['new']:.0f} "
              f"TFLOP/s, new/old {rate['new'] / rate['old']:.3f}, "
              f"O identical: {same}")
