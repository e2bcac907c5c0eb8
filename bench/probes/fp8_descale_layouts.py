"""A/B of the e4m3 kernels before and after a change, and the cost of each
descale layout on the new ones (issue 18): per tensor, FA3's [B, Hkv], and
per block (Q and K per 128-row tile, V per tensor), interleaved rounds.

    python3 bench/probes/fp8_descale_layouts.py OLD_DIR NEW_DIR [rounds] [B,H,N]

OLD_DIR's kernels run per tensor only. Prints TFLOP/s (median of the
rounds' do_bench medians) of the whole e4m3 call (V layout + attention)
and each over the old kernel per tensor.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
from common import Kernel, median_ms  # noqa: E402
from fp8 import inputs, quantize, quantize_blocks, tflops  # noqa: E402

old_dir, new_dir = sys.argv[1], sys.argv[2]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
b, h, n = (tuple(int(x) for x in sys.argv[4].split(","))
           if len(sys.argv) > 4 else (1, 16, 16384))
for name in ("sm_90a_d128_e4m3_bf16", "sm_90a_d128_e4m3_bf16_causal",
             "sm_90a_d256_e4m3_bf16"):
    old = Kernel.load(os.path.join(old_dir, name))
    new = Kernel.load(os.path.join(new_dir, name))
    d, causal = new.meta["head_dim"], new.meta["causal"]
    q, k, v = inputs(b, h, h, n, n, d, seed=3)
    (q8, qd), (k8, kd), (v8, vd) = quantize(q), quantize(k), quantize(v)
    _, qb = quantize_blocks(q, new.meta["block_r"])
    _, kb = quantize_blocks(k, new.meta["block_c"])
    qh, kh, vh = (x.expand(b, h).contiguous() for x in (qd, kd, vd))
    out = torch.empty(b, h, n, d, dtype=torch.bfloat16, device="cuda")
    lse = torch.empty(b, h, n, device="cuda")
    calls = {
        "old per tensor": (old, (qd, kd, vd)),
        "new per tensor": (new, (qd, kd, vd)),
        "new [B, Hkv]": (new, (qh, kh, vh)),
        "new per block": (new, (qb, kb, vd)),
    }
    times = {key: [] for key in calls}
    for _ in range(rounds):
        for key, (kernel, (a, c, e)) in calls.items():
            times[key].append(median_ms(
                lambda kernel=kernel, a=a, c=c, e=e: kernel(
                    q8, k8, v8, out=out, lse=lse, q_descale=a, k_descale=c,
                    v_descale=e)))
    rate = {key: tflops(b, h, n, d, causal, sorted(t)[len(t) // 2])
            for key, t in times.items()}
    base = rate["old per tensor"]
    print(f"{name} B {b} H {h} N {n}: " + ", ".join(
        f"{key} {r:.0f} ({r / base:.3f})" for key, r in rate.items()),
        flush=True)
