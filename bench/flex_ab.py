"""An interleaved A/B of two builds of the same fa-compile-module artefacts
(issue 49's variants): `python3 bench/flex_ab.py OLD NEW [rounds]` times
each launch of both folders at B 1, H 16, N 16k, D 128 (f16), old and new
alternately for `rounds` rounds (median of 10 calls each), and prints each
launch's new/old time ratio (median over rounds), their geomean and the
lowest. Both folders must hold the same launches (flex_module's
flex_regions_inlined_f16.mlir, or sinks_f16.mlir)."""
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from flex_module import Kernel, captures_for, inlined_captures, sink_logits  # noqa: E402


def load(folder):
    with open(os.path.join(folder, "module.cubin"), "rb") as f:
        cubin = f.read()
    launches = []
    i = 0
    while os.path.exists(os.path.join(folder, f"launch{i}.json")):
        with open(os.path.join(folder, f"launch{i}.json")) as f:
            meta = json.load(f)
        launches.append((meta, Kernel(cubin, meta)))
        i += 1
    return launches


def time_call(kernel, args, kwargs, calls=10):
    times = []
    for _ in range(calls + 2):
        start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
        start.record()
        kernel(*args, **kwargs)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times[2:])[calls // 2]


def main():
    old, new = load(sys.argv[1]), load(sys.argv[2])
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    assert len(old) == len(new), "the folders hold different launches"
    caps = inlined_captures("cuda")
    q, k, v = (torch.randn(1, 16, 16384, 128, device="cuda",
                           dtype=torch.float16) for _ in range(3))
    ratios = []
    for (meta_o, kern_o), (meta_n, kern_n) in zip(old, new):
        names = {p["name"] for p in meta_n["params"]}
        kwargs = {"captures": captures_for(meta_n, caps),
                  "sinks": sink_logits(16, "cuda") if "sinks" in names
                  else None}
        per_round = []
        for _ in range(rounds):
            t_old = time_call(kern_o, (q, k, v), kwargs)
            t_new = time_call(kern_n, (q, k, v), kwargs)
            per_round.append(t_new / t_old)
        r = sorted(per_round)[rounds // 2]
        ratios.append(r)
        print(f"{meta_n['kernel']}: new/old time {r:.3f} "
              f"(rounds {', '.join(f'{x:.3f}' for x in per_round)})")
    geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    print(f"flex_ab: {len(ratios)} launches, new/old time geomean {geo:.3f}, "
          f"highest {max(ratios):.3f}, lowest {min(ratios):.3f} "
          f"(below 1: new faster)")


if __name__ == "__main__":
    main()
