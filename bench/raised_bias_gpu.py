"""The raised additive biases of test/Inputs/attention_bias.mlir in f16 on
the GPU (issue 49's raising: bias tensors become captured score_mods): the
module with its f32 types made f16, raised and compiled for sm_90a,

    sed 's/f32/f16/g' test/Inputs/attention_bias.mlir > /tmp/ab16.mlir
    build/bin/fa-compile-module --arch sm_90a --raise -o .raised /tmp/ab16.mlir

then each launch run from the artefacts with its captured bias and checked
against the unraised arithmetic in torch (float64; the 2x rule against
torch f16): softmax(q k^T s + bias) v with a full [B, H, Nq, Nk] bias, and
softmax((q k^T + pad) s) v with a padding row [B, 1, 1, Nk].

    python3 bench/raised_bias_gpu.py .raised
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "python"))
from flashmlir.runtime import Kernel  # noqa: E402
from common import two_x_l2  # noqa: E402

SCALE = 0.1767578125  # 0.176776695 as f16


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else ".raised"
    with open(os.path.join(folder, "module.cubin"), "rb") as f:
        cubin = f.read()
    torch.manual_seed(49)
    q = torch.randn(2, 3, 40, 32, device="cuda", dtype=torch.float16)
    k, v = (torch.randn(2, 3, 56, 32, device="cuda", dtype=torch.float16)
            for _ in range(2))
    bias = torch.randn(2, 3, 40, 56, device="cuda", dtype=torch.float16)
    pad = torch.zeros(2, 1, 1, 56, device="cuda", dtype=torch.float16)
    pad[1, ..., 40:] = -1e4  # the second sequence's last 16 keys padded
    cases = [("bias after the scale", bias,
              lambda s, b: s * SCALE + b),
             ("padding row before the scale", pad,
              lambda s, b: (s + b) * SCALE)]
    failures = 0
    for index, (name, capture, scores) in enumerate(cases):
        with open(os.path.join(folder, f"launch{index}.json")) as f:
            meta = json.load(f)
        out, _ = Kernel(cubin, meta)(q, k, v, captures=[capture])
        torch.cuda.synchronize()

        def attention(dtype):
            s = scores(q.to(dtype) @ k.to(dtype).transpose(-1, -2),
                       capture.to(dtype))
            return torch.softmax(s, dim=-1) @ v.to(dtype)
        ref, low = attention(torch.float64), attention(torch.float16)
        err, base, ok = two_x_l2(out, ref, low)
        failures += not ok
        print(f"{name}: kernel {meta['kernel']}: rel err {err:.2e} (torch f16 "
              f"{base:.2e}) {'PASS' if ok else 'FAIL'}")
    print(f"raised_bias_gpu: {len(cases)} launches, "
          f"{'all passed' if not failures else f'{failures} failed'}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
