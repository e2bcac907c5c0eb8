"""Head dims other than 64/128/256 on the sm_90a kernel (issue 17): D = 96
(on D = 128's tiles) and 192 (three 64-column blocks); numerics and speed.

    bash bench/build_head_dim_kernels.sh .headdims     # on the build machine
    python3 bench/head_dims.py .headdims               # check + bench

Numerics: every kernel of the folder (its metadata's head dim) on ragged
shapes (GQA, Nq != Nk), O by flash-attention's 2x rule against an fp32
reference (masks.reference) measured with torch's f16 math, LSE within
1e-2. Speed: TFLOP/s at 16k tokens (B 4 x 4096 and B 1 x 16384, H 16),
causal or not, for each head dim but 128, beside torch SDPA's cuDNN and FA2
backends at that head dim and our D = 128 kernel on the same tokens (the
speed class: its time, and TFLOP/s counted at its own D), in the same run.
triton's do_bench median; ptxas registers and spills in ptxas.txt.
"""
import json
import math
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Kernel, kernel_names  # noqa: E402
from common import median_ms as bench  # noqa: E402
from masks import reference  # noqa: E402


def check(folder):
    failures = checks = 0
    for name in kernel_names(folder):
        kernel = Kernel.load(os.path.join(folder, name))
        causal = kernel.meta["causal"]
        d, dv = kernel.meta["head_dim"], kernel.value_head_dim
        for (b, hq, hkv, nq, nk) in [(2, 8, 2, 333, 333), (1, 4, 4, 1000, 1000),
                                     (3, 6, 3, 77, 77), (1, 16, 16, 2048,
                                                         2048)]:
            checks += 1
            torch.manual_seed(nq + hq)
            q = torch.randn(b, hq, nq, d, device="cuda", dtype=torch.float16)
            k = torch.randn(b, hkv, nk, d, device="cuda", dtype=torch.float16)
            v = torch.randn(b, hkv, nk, dv, device="cuda",
                            dtype=torch.float16)
            scale = 1 / math.sqrt(d)
            out, lse = kernel(q, k, v, scale=scale)
            torch.cuda.synchronize()
            ref, ref_lse, _ = reference(q, k, v, scale, causal, 0, 0.0)
            g = hq // hkv
            s = torch.matmul(q, k.repeat_interleave(g, 1).transpose(-1, -2)
                             ) * scale
            if causal:
                s = s.masked_fill(torch.ones(nq, nk, dtype=torch.bool,
                                             device="cuda").triu(1),
                                  float("-inf"))
            low = torch.matmul(torch.softmax(s, -1),
                               v.repeat_interleave(g, 1)).float()
            err = (out.float() - ref).abs().max().item()
            base = (low - ref).abs().max().item()
            lse_err = (lse - ref_lse).abs().max().item()
            ok = err <= 2 * base + 1e-5 and lse_err <= 1e-2
            failures += not ok
            print(f"{name} B={b} Hq={hq} Hkv={hkv} N={nq}: max_err={err:.2e} "
                  f"torch_f16={base:.2e} lse_max_abs={lse_err:.1e} "
                  f"{'PASS' if ok else 'FAIL'}", flush=True)
    print(f"head dims check: {checks - failures} passed, {failures} failed")
    return failures


def speed(folder):
    kernels = {n: Kernel.load(os.path.join(folder, n))
               for n in kernel_names(folder)}
    dims = sorted({(k.meta["head_dim"], k.value_head_dim)
                   for k in kernels.values()} - {(128, 128)})
    rows = []
    for d, dv in dims:
        for causal in (False, True):
            for (b, n) in [(4, 4096), (1, 16384)]:
                rows.append(speed_row(kernels, d, dv, causal, b, n))
    return rows


def speed_row(kernels, d, dv, causal, b, n, h=16):
    torch.manual_seed(0)
    row = {"causal": causal, "B": b, "N": n, "H": h, "D": d, "Dv": dv}

    def tensors(dim, value_dim):
        q = torch.randn(b, h, n, dim, device="cuda", dtype=torch.float16)
        v = torch.randn(b, h, n, value_dim, device="cuda",
                        dtype=torch.float16)
        return (q, torch.randn_like(q), v, torch.empty_like(v),
                torch.empty(b, h, n, device="cuda"))

    def tflops(dim, value_dim, ms):
        # Q K^T and P V: 2 N^2 (D + Dv) per (batch, head).
        return (2 * b * h * (dim + value_dim) * n * n / (2 if causal else 1)
                / (ms / 1e3) / 1e12)

    q, k, v, out, lse = tensors(d, dv)
    for label, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION),
                           ("fa2", SDPBackend.FLASH_ATTENTION)):
        try:
            with sdpa_kernel([backend]):
                row[f"{label}_TFLOPs"] = tflops(d, dv, bench(
                    lambda: F.scaled_dot_product_attention(
                        q, k, v, is_causal=causal)))
        except RuntimeError as e:
            row[f"{label}_error"] = str(e).splitlines()[0]
    for name, kern in kernels.items():
        if kern.meta["causal"] != causal or kern.meta["head_dim"] != d or \
                kern.value_head_dim != dv:
            continue
        ms = bench(lambda: kern(q, k, v, out=out, lse=lse))
        row[f"{name}_ms"] = ms
        row[f"{name}_TFLOPs"] = tflops(d, dv, ms)
        if "cudnn_TFLOPs" in row:
            row[f"{name}_vs_cudnn"] = row[f"{name}_TFLOPs"] / row["cudnn_TFLOPs"]
    # The speed class: our D = 128 kernel on the same tokens.
    q, k, v, out, lse = tensors(128, 128)
    for name, kern in kernels.items():
        if kern.meta["causal"] == causal and kern.meta["head_dim"] == 128:
            ms = bench(lambda: kern(q, k, v, out=out, lse=lse))
            row[f"d128:{name}_ms"] = ms
            row[f"d128:{name}_TFLOPs"] = tflops(128, 128, ms)
    print(json.dumps(row), flush=True)
    return row


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else ".headdims"
    failures = check(folder)
    rows = speed(folder)
    with open(os.environ.get("OUT", "/tmp") + "/head_dims.json", "w") as f:
        json.dump(rows, f, indent=1)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
