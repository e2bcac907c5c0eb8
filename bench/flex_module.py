"""Issue 49's FlexAttention-style module on the GPU: the attentions of
test/Inputs/flex_regions_f16.mlir spell the causal mask, a softcap of 30 and
a sliding window of 64 keys as score_mod / mask_mod regions; compileModule
folds them into the built-in kernels (fa-fold-modifications), here

    build/bin/fa-compile-module --arch sm_90a -o .flex \\
        test/Inputs/flex_regions_f16.mlir

and this script launches those artefacts alone (the cubin and each launch's
metadata) and checks each launch against the regions' own arithmetic,
written out here in torch (not the metadata's reading of it): in float64,
and in f16 for flash-attention's 2x rule,

    python3 bench/flex_module.py .flex
"""
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "python"))
from flashmlir.runtime import Kernel  # noqa: E402

SCALE = 0.088388346


def softcap_causal(s, i, j):
    """score_mod 30 tanh(s / 30), mask_mod i >= j."""
    return (30 * torch.tanh(s / 30)).masked_fill(~(i >= j), -math.inf)


def sliding_window(s, i, j):
    """mask_mod i >= j and i - j <= 63."""
    return s.masked_fill(~((i >= j) & (i - j <= 63)), -math.inf)


LAUNCHES = [("causal + softcap 30 (regions)", softcap_causal),
            ("sliding window 64 (regions)", sliding_window)]


def attention(q, k, v, modify):
    n, m = q.shape[-2], k.shape[-2]
    i = torch.arange(n, device=q.device)[:, None]
    j = torch.arange(m, device=q.device)[None, :]
    s = modify((q @ k.transpose(-1, -2)) * SCALE, i, j)
    return torch.softmax(s, dim=-1) @ v


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else ".flex"
    with open(os.path.join(folder, "module.cubin"), "rb") as f:
        cubin = f.read()
    failures = 0
    for index, (name, modify) in enumerate(LAUNCHES):
        with open(os.path.join(folder, f"launch{index}.json")) as f:
            meta = json.load(f)
        kernel = Kernel(cubin, meta)
        # The module's shape, then longer sequences on the same kernel.
        for b, h, n in [(1, 4, 256), (2, 4, 1000), (1, 8, 4096)]:
            torch.manual_seed(n + index)
            q, k, v = (torch.randn(b, h, n, 128, device="cuda",
                                   dtype=torch.float16) for _ in range(3))
            out, _ = kernel(q, k, v)
            torch.cuda.synchronize()
            ref = attention(q.double(), k.double(), v.double(), modify)
            low = attention(q, k, v, modify)
            err = ((out.double() - ref).norm() / ref.norm()).item()
            base = ((low.double() - ref).norm() / ref.norm()).item()
            ok = math.isfinite(err) and err <= 2 * base + 1e-6
            failures += not ok
            print(f"{name}: kernel {meta['kernel']}, B={b} H={h} N={n}: rel "
                  f"err {err:.2e} (torch f16 {base:.2e}) "
                  f"{'PASS' if ok else 'FAIL'}")
    print(f"flex_module: {len(LAUNCHES)} launches, "
          f"{'all passed' if not failures else f'{failures} failed'}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
