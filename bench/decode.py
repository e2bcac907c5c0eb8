"""Split-KV (flash-decoding) on the H200: numerics of the split kernels, then
decode speed against torch's SDPA backends (FA2, cuDNN) and the unsplit
kernels, in GB/s of K + V read.

    bash bench/build_split_kernels.sh .split          # on the build machine
    python3 bench/decode.py .split                    # check + bench
    python3 bench/decode.py .split --check            # numerics only

Numerics: O and LSE against an fp32 reference with the explicit mask
(masks.reference), on ragged shapes, decode and prefill, for chunk counts
from 1 to more chunks than K/V blocks (empty chunks), and the auto rule;
the runtime's arrival counters must be left zero. Speed: triton's do_bench
median; ptxas registers and spills are in the folder's ptxas.txt.
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
import flashmlir.runtime as rt  # noqa: E402

DT = dtypes()
TOL = {"f16": 2e-3, "bf16": 1.6e-2}
# (B, Hq, Hkv, Nq, Nk): decode with a long and a ragged cache, GQA, a few
# queries (speculative decoding), prefill with more rows than keys, and a
# shape with more tiles than SMs.
SHAPES = [(1, 32, 32, 1, 32768), (2, 8, 2, 1, 1531), (3, 4, 4, 5, 777),
          (1, 2, 1, 200, 517), (2, 4, 2, 333, 100), (4, 32, 8, 1000, 1100)]
SPLITS = [1, 3, 7, 0, 64]  # 0: auto


def check(folder):
    failures = checks = 0
    shapes, splits_list = SHAPES, SPLITS
    if os.environ.get("FLASHMLIR_DECODE_SMALL"):  # under compute-sanitizer
        shapes, splits_list = SHAPES[1:4], [1, 3, 64]
    for name in kernel_names(folder):
        kernel = Kernel.load(os.path.join(folder, name))
        m = kernel.meta
        if not m.get("split_kv"):
            continue
        d, dt = m["head_dim"], m["dtype"]
        for (b, hq, hkv, nq, nk) in shapes:
            torch.manual_seed(nq * 7 + nk)
            q = torch.randn(b, hq, nq, d, device="cuda", dtype=DT[dt])
            k = torch.randn(b, hkv, nk, d, device="cuda", dtype=DT[dt])
            v = torch.randn(b, hkv, nk, d, device="cuda", dtype=DT[dt])
            scale = 1 / math.sqrt(d)
            ref, ref_lse, empty = reference(q, k, v, scale, m["causal"],
                                            m.get("window", 0),
                                            m.get("softcap", 0.0),
                                            m.get("bottom_right", False),
                                            diagonal_offset=m.get("diagonal_offset", 0))
            for splits in splits_list:
                checks += 1
                out = torch.full_like(q, float("nan"))
                lse = torch.full((b, hq, nq), float("nan"), device="cuda")
                _, got_lse = kernel(q, k, v, out=out, lse=lse, scale=scale,
                                    num_splits=splits)
                torch.cuda.synchronize()
                err = ((out.float() - ref).norm() / ref.norm()).item()
                ok = err <= TOL[dt] and bool(torch.isfinite(out).all())
                lse_err = 0.0
                if m.get("writes_lse", True):
                    finite = torch.isfinite(ref_lse)
                    lse_err = ((lse[finite] - ref_lse[finite]).abs().max()
                               .item() if finite.any() else 0.0)
                    ok &= lse_err <= 1e-2 and bool(
                        torch.isneginf(lse[..., empty]).all())
                else:
                    ok &= got_lse is None
                ok &= bool((out[..., empty, :] == 0).all())
                arrivals = rt._SPLIT_ARRIVALS.get(
                    (torch.cuda.current_device(),
                     torch.cuda.current_stream().cuda_stream))
                left = int(arrivals.count_nonzero()) if arrivals is not None \
                    else -1
                ok &= left == 0
                _, sms, dram_gbps = flashmlir.runtime.device_facts(0)
                chosen = kernel.kv_splits_for(b, hq, nq, nk, sms, dram_gbps,
                                              splits)
                failures += not ok
                print(f"{name} B={b} Hq={hq} Hkv={hkv} Nq={nq} Nk={nk} "
                      f"splits={splits or 'auto'}->{chosen}: rel_l2={err:.2e} "
                      f"lse_max_abs={lse_err:.1e} arrivals_left={left} "
                      f"{'PASS' if ok else 'FAIL'}", flush=True)
    print(f"split-kv check: {checks - failures} passed, {failures} failed")
    return failures


def bench(fn):
    import triton.testing
    return triton.testing.do_bench(fn, warmup=25, rep=200,
                                   return_mode="median")


def sdpa(q, k, v, backend):
    with sdpa_kernel([backend]):
        return F.scaled_dot_product_attention(q, k, v)


def speed(folder):
    d, dt = 128, torch.float16
    _, sms, dram_gbps = flashmlir.runtime.device_facts(0)
    # Every unmasked D 128 f16 kernel of the folder: split ones swept over
    # the chunk count, the others timed as they are.
    kernels = {}
    for n in kernel_names(folder):
        kern = Kernel.load(os.path.join(folder, n))
        m = kern.meta
        if (m["head_dim"], m["dtype"], m["causal"], m.get("window", 0)) == \
                (d, "f16", False, 0) and m.get("writes_lse", True):
            kernels[n] = kern
    rows = []
    for (b, h, nk) in [(1, 32, 32768), (1, 8, 131072), (4, 32, 8192),
                       (8, 32, 8192), (1, 32, 4096)]:
        torch.manual_seed(0)
        q = torch.randn(b, h, 1, d, device="cuda", dtype=dt)
        k = torch.randn(b, h, nk, d, device="cuda", dtype=dt)
        v = torch.randn_like(k)
        out = torch.empty_like(q)
        lse = torch.empty(b, h, 1, device="cuda")
        gb = 2 * k.numel() * k.element_size() / 1e9
        row = {"B": b, "H": h, "Nk": nk, "D": d, "kv_GB": gb}
        copy_dst = torch.empty_like(k)
        # A device copy reads and writes: its read rate is the ceiling.
        row["copy_read_GBps"] = k.numel() * k.element_size() / 1e9 / (
            bench(lambda: copy_dst.copy_(k)) / 1e3)
        for name, backend in (("fa2", SDPBackend.FLASH_ATTENTION),
                              ("cudnn", SDPBackend.CUDNN_ATTENTION)):
            try:
                row[f"{name}_GBps"] = gb / (bench(
                    lambda: sdpa(q, k, v, backend)) / 1e3)
            except RuntimeError as e:
                row[f"{name}_error"] = str(e).splitlines()[0]
        for name, kern in kernels.items():
            if not kern.meta.get("split_kv"):
                row[f"{name}_GBps"] = gb / (bench(
                    lambda: kern(q, k, v, out=out, lse=lse)) / 1e3)
                continue
            auto = kern.kv_splits_for(b, h, 1, nk, sms, dram_gbps, 0)
            row[f"{name}_auto_splits"] = auto
            for s in sorted({1, 2, 4, 8, 16, 32, 64, auto}):
                row[f"{name}_s{s}_GBps"] = gb / (bench(
                    lambda: kern(q, k, v, out=out, lse=lse,
                                 num_splits=s)) / 1e3)
            row[f"{name}_auto_GBps"] = row[f"{name}_s{auto}_GBps"]
        if "cudnn_GBps" in row:
            for name in kernels:
                key = (f"{name}_auto_GBps" if f"{name}_auto_GBps" in row
                       else f"{name}_GBps")
                row[f"{name}_vs_cudnn"] = row[key] / row["cudnn_GBps"]
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else ".split"
    failures = check(folder)
    if "--check" in sys.argv:
        return 1 if failures else 0
    rows = speed(folder)
    with open(os.environ.get("OUT", "/tmp") + "/decode.json", "w") as f:
        json.dump(rows, f, indent=1)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
