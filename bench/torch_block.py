"""Issue 15's end to end: the torch-mlir-shaped two-layer block
(test/Inputs/torch_two_layer.mlir), raised and compiled for sm_90a through
the C API here,

    build/bin/fa-compile-module --raise --arch sm_90a -o .blk \\
        test/Inputs/torch_two_layer.mlir

then launched on the H200 from those artefacts alone (the cubin and each
launch's metadata: kernel, scale, masks, dtype; no scale passed by hand),
each attention against torch's math attention of what the front end
computed, by flash-attention's 2x rule against torch's own SDPA in the
input precision:

    python3 bench/torch_block.py .blk

Layer 1: causal grouped-query attention, f16, Q [B, 8, N, 128], K/V
[B, 2, N, 128], scale 1/sqrt(128). Layer 2: bf16, [B, 4, N, 64], scale 0.5
(folded into Q and K as sqrt(0.5) each by the front end). The module's own
shapes (B = 2, N = 128 and 96), then longer sequences on the same kernels
(their shapes are dynamic).
"""
import json
import math
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "python"))
from flashmlir.runtime import Kernel  # noqa: E402
from common import two_x_l2  # noqa: E402

# What the front end computed, per launch (program order).
LAYERS = [
    {"name": "layer 1 (causal GQA, f16, D 128)", "dtype": torch.float16,
     "hq": 8, "hkv": 2, "d": 128, "causal": True, "scale": 1 / math.sqrt(128),
     "shapes": [(2, 128), (2, 1000), (1, 4096)]},
    {"name": "layer 2 (bf16, D 64, scale 0.5)", "dtype": torch.bfloat16,
     "hq": 4, "hkv": 4, "d": 64, "causal": False, "scale": 0.5,
     "shapes": [(2, 96), (2, 1000), (1, 4096)]},
]


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else ".blk"
    with open(os.path.join(folder, "module.cubin"), "rb") as f:
        cubin = f.read()
    failures = 0
    for i, layer in enumerate(LAYERS):
        with open(os.path.join(folder, f"launch{i}.json")) as f:
            meta = json.load(f)
        kernel = Kernel(cubin, meta)
        for b, n in layer["shapes"]:
            torch.manual_seed(n + i)
            dt, hq, hkv, d = layer["dtype"], layer["hq"], layer["hkv"], \
                layer["d"]
            q = torch.randn(b, hq, n, d, device="cuda", dtype=dt)
            k = torch.randn(b, hkv, n, d, device="cuda", dtype=dt)
            v = torch.randn(b, hkv, n, d, device="cuda", dtype=dt)
            out, lse = kernel(q, k, v)  # the metadata's scale
            torch.cuda.synchronize()
            kr = k.repeat_interleave(hq // hkv, 1)
            vr = v.repeat_interleave(hq // hkv, 1)
            with sdpa_kernel([SDPBackend.MATH]):
                ref = F.scaled_dot_product_attention(
                    q.double(), kr.double(), vr.double(),
                    is_causal=layer["causal"], scale=layer["scale"])
                low = F.scaled_dot_product_attention(
                    q, kr, vr, is_causal=layer["causal"],
                    scale=layer["scale"])
            err, base, ok = two_x_l2(out, ref, low)
            ok = ok and lse is None and not meta.get("writes_lse", True)
            failures += not ok
            print(f"{layer['name']}: kernel {meta['kernel']}, metadata scale "
                  f"{meta['scale']:.6g}, B={b} N={n}: rel err {err:.2e} "
                  f"(torch {dt} SDPA {base:.2e}) {'PASS' if ok else 'FAIL'}")
    print(f"torch_block: {len(LAYERS)} launches, "
          f"{'all passed' if not failures else f'{failures} failed'}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
