"""Strided layouts on the H200 (issue 17): the sm_90a kernels on
[B, N, H, D] tensors (flash-attention's layout, read as strided [B, H, N, D]
views through rank-4 tensor maps, no copy) against the same kernels on
contiguous [B, H, N, D]; the previous kernels (rank-3 maps, contiguous only)
as the A/B baseline; cuDNN on both layouts, in one run.

    bash bench/build_kernels.sh .cubins                       # new compiler
    bash bench/build_kernels.sh .base <old fa-compile>        # baseline
    python3 bench/strided.py .cubins .base                    # on the H200

Numerics first (every kernel of the folder on BNHD views, sliced views and
strided outputs, against an fp32 reference), then TFLOP/s (forward, causal
counted as half). Prints one JSON object per shape; writes
$OUT/strided.json. ptxas registers and spills: each folder's ptxas.txt.
"""
import json
import math
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Kernel, dtypes, kernel_names  # noqa: E402
from masks import reference  # noqa: E402

DT = dtypes()
TOL = {"f16": 2e-3, "bf16": 1.6e-2}


def bench(fn):
    import triton
    return triton.testing.do_bench(fn, warmup=25, rep=200,
                                   return_mode="median")


def rel_l2(x, ref):
    return ((x.float() - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def views(b, hq, hkv, nq, nk, d, dt):
    """(q, k, v, out) as [B, H, N, D] views of other layouts: [B, N, H, D]
    tensors; a head-dim-padded buffer (row and head strides past D); a
    sequence slice of a longer buffer; every second batch of a larger one."""
    def bnhd(n, h):
        return torch.randn(b, n, h, d, device="cuda", dtype=dt).transpose(1, 2)

    def padded(n, h):
        return torch.randn(b, n, h, d + 64, device="cuda",
                           dtype=dt)[..., :d].transpose(1, 2)

    def sliced(n, h):
        return torch.randn(b, h, n + 24, d, device="cuda",
                           dtype=dt)[:, :, 8:8 + n]

    def every_second(n, h):
        return torch.randn(2 * b, h, n, d, device="cuda", dtype=dt)[::2]

    for make in (bnhd, padded, sliced, every_second):
        q, k, v = make(nq, hq), make(nk, hkv), make(nk, hkv)
        out = make(nq, hq)
        yield make.__name__, q, k, v, out


def check(folder):
    failures = checks = 0
    for name in kernel_names(folder):
        kern = Kernel.load(os.path.join(folder, name))
        m = kern.meta
        if not kern.strided:
            continue
        dt = DT[m["dtype"]]
        d = m["head_dim"]
        for (b, hq, hkv, nq, nk) in [(2, 8, 2, 333, 517), (1, 4, 4, 1, 1531),
                                     (3, 4, 1, 200, 200)]:
            torch.manual_seed(nq + nk + d)
            for layout, q, k, v, out in views(b, hq, hkv, nq, nk, d, dt):
                scale = 1 / math.sqrt(d)
                ref, ref_lse, _ = reference(
                    q, k, v, scale, m["causal"], m.get("window", 0),
                    m.get("softcap", 0.0), m.get("bottom_right", False),
                    diagonal_offset=m.get("diagonal_offset", 0))
                out.fill_(float("nan"))
                o, lse = kern(q, k, v, out=out, scale=scale)
                assert o.data_ptr() == out.data_ptr()
                err = rel_l2(o, ref)
                finite = torch.isfinite(ref_lse)
                lse_err = ((lse[finite] - ref_lse[finite]).abs().max().item()
                           if lse is not None and finite.any() else 0.0)
                checks += 1
                if not err <= TOL[m["dtype"]] or not lse_err <= 1e-2:
                    failures += 1
                    print(f"FAIL {name} {layout} {(b, hq, hkv, nq, nk)}: "
                          f"rel L2 {err:.2e}", flush=True)
    print(f"strided numerics: {checks - failures}/{checks} passed",
          flush=True)
    return failures


def flops(b, h, n, d, causal):
    return 4 * b * h * n * n * d / (2 if causal else 1)


def speed(new_folder, old_folder):
    rows = []
    for (b, h, n, d, causal) in [(4, 16, 4096, 64, False),
                                 (4, 16, 4096, 128, False),
                                 (4, 16, 4096, 128, True),
                                 (2, 16, 16384, 128, False),
                                 (2, 16, 16384, 128, True),
                                 (4, 16, 4096, 256, False),
                                 (2, 16, 8192, 256, True)]:
        dt = torch.float16
        name = f"sm_90a_d{d}_f16{'_causal' if causal else ''}"
        new = Kernel.load(os.path.join(new_folder, name))
        old = Kernel.load(os.path.join(old_folder, name))
        torch.manual_seed(0)
        bnhd = [torch.randn(b, n, h, d, device="cuda", dtype=dt)
                for _ in range(4)]
        q, k, v, out = (t.transpose(1, 2) for t in bnhd)  # strided views
        qc, kc, vc, oc = (t.contiguous() for t in (q, k, v, out))
        lse = torch.empty(b, h, n, device="cuda")
        tf = flops(b, h, n, d, causal) / 1e12
        row = {"B": b, "H": h, "N": n, "D": d, "causal": causal}
        timed = {
            "new_bhnd": lambda: new(qc, kc, vc, out=oc, lse=lse),
            "new_bnhd": lambda: new(q, k, v, out=out, lse=lse),
            "old_bhnd": lambda: old(qc, kc, vc, out=oc, lse=lse),
            # What the old flash_attn_func did for [B, N, H, D] inputs.
            "old_bnhd_with_copies": lambda: (
                old(*(t.contiguous() for t in (q, k, v)), out=oc, lse=lse),
                out.copy_(oc)),
        }
        for key in ("new_bhnd", "new_bnhd", "old_bhnd",
                    "old_bnhd_with_copies", "new_bhnd", "new_bnhd",
                    "old_bhnd"):
            # Interleaved twice: the later run of each counts.
            row[f"{key}_TFLOPs"] = tf / (bench(timed[key]) / 1e3)
        for layout, args in (("bhnd", (qc, kc, vc)), ("bnhd", (q, k, v))):
            try:
                with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                    row[f"cudnn_{layout}_TFLOPs"] = tf / (bench(
                        lambda: F.scaled_dot_product_attention(
                            *args, is_causal=causal)) / 1e3)
            except RuntimeError as e:
                row[f"cudnn_{layout}_error"] = str(e).splitlines()[0]
        row["bnhd_vs_bhnd"] = row["new_bnhd_TFLOPs"] / row["new_bhnd_TFLOPs"]
        row["new_vs_old"] = row["new_bhnd_TFLOPs"] / row["old_bhnd_TFLOPs"]
        if "cudnn_bnhd_TFLOPs" in row:
            row["bnhd_vs_cudnn_bnhd"] = (row["new_bnhd_TFLOPs"] /
                                         row["cudnn_bnhd_TFLOPs"])
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def main():
    new_folder = sys.argv[1] if len(sys.argv) > 1 else ".cubins"
    old_folder = sys.argv[2] if len(sys.argv) > 2 else ".base"
    failures = check(new_folder)
    if "--check" in sys.argv:
        return 1 if failures else 0
    rows = speed(new_folder, old_folder)
    with open(os.environ.get("OUT", "/tmp") + "/strided.json", "w") as f:
        json.dump(rows, f, indent=1)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
