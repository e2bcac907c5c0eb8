"""Varlen batches on the H200 (issue 17): sequences packed along N.

    bash bench/build_varlen_kernels.sh .varlen         # on the build machine
    python3 bench/varlen.py .varlen                    # check + bench
    python3 bench/varlen.py .varlen --check            # numerics only

Numerics: every varlen kernel of the folder on ragged lengths (a sequence of
one query, one with no queries, more queries than keys, tails inside a
block), GQA, against an fp32 reference that attends each sequence alone
(masks.reference, bottom-right aligned with its own lengths); O by
flash-attention's 2x rule (at most twice torch's low-precision math error
plus 1e-5), LSE within 1e-2; rows outside every sequence stay untouched.
Then flashmlir.flash_attn_varlen_func with flash-attn's [total, H, D].

Speed (D 128, f16, Hq 32, Hkv 8, TFLOP/s of the useful work): (1) uniform
lengths packed as a varlen batch against the same batch as [B, H, N, D]
(the varlen machinery's own cost); (2) ragged lengths against a uniform
batch of the same total work. The varlen kernels run as shipped (persistent
at D 128, dealing the sequences' real tiles) and, where the folder has them
(`_single`), with one tile per CTA; the contiguous kernels as shipped and
with one tile per CTA and O from registers.
triton's do_bench median; ptxas registers and spills in ptxas.txt.
"""
import json
import math
import os
import random
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Kernel, dtypes, kernel_names  # noqa: E402
from common import median_ms as bench  # noqa: E402
from masks import reference  # noqa: E402
import flashmlir  # noqa: E402

DT = dtypes()


def packed(b_lengths, h, d, dtype):
    total = sum(b_lengths)
    t = torch.randn(1, h, total, d, device="cuda", dtype=dtype)
    sums = [0]
    for n in b_lengths:
        sums.append(sums[-1] + n)
    return t, torch.tensor(sums, dtype=torch.int32, device="cuda")


def per_sequence(q, k, v, cuq, cuk, scale, causal, upcast, window=0,
                 softcap=0.0, diagonal_offset=0):
    """O [1, Hq, total_q, D] (fp32) and LSE, each sequence alone, with the
    kernel's causal, window and softcap masks bottom-right aligned with its
    own lengths; rows of an empty sequence do not exist."""
    cq, ck = cuq.tolist(), cuk.tolist()
    o = torch.zeros(q.shape[:3] + (v.shape[3],), device="cuda")
    lse = torch.full(q.shape[:3], float("-inf"), device="cuda")
    for i in range(len(cq) - 1):
        qs, ks = slice(cq[i], cq[i + 1]), slice(ck[i], ck[i + 1])
        if cq[i + 1] == cq[i]:
            continue
        if ck[i + 1] == ck[i]:
            continue  # no key: O = 0, LSE = -inf
        qi, ki, vi = q[:, :, qs], k[:, :, ks], v[:, :, ks]
        oi, li, _ = reference(qi, ki, vi, scale, causal, window, softcap,
                              True, upcast, diagonal_offset)
        o[:, :, qs] = oi.float()
        lse[:, :, qs] = li.float()
    return o, lse


def check(folder):
    failures = checks = 0
    cases = [(8, 2, [100, 1, 0, 257, 64], [100, 300, 5, 257, 64]),
             (4, 4, [1000, 130], [1000, 77]),
             (16, 4, [513] * 3, [700, 513, 2000])]
    for name in kernel_names(folder):
        kernel = Kernel.load(os.path.join(folder, name))
        m = kernel.meta
        if not m.get("varlen"):
            continue
        d, dt = m["head_dim"], DT[m["dtype"]]
        for (hq, hkv, lq, lk) in cases:
            checks += 1
            torch.manual_seed(sum(lq) + hq)
            q, cuq = packed(lq, hq, d, dt)
            k, cuk = packed(lk, hkv, d, dt)
            v = torch.randn_like(k)
            scale = 1 / math.sqrt(d)
            # Spare rows after the last sequence must stay untouched.
            out = torch.full((1, hq, q.shape[2] + 7, d), float("nan"),
                             device="cuda", dtype=dt)[:, :, :q.shape[2]]
            lse = torch.full(q.shape[:3], float("nan"), device="cuda")
            kernel(q, k, v, out=out, lse=lse, scale=scale, cu_seqlens_q=cuq,
                   cu_seqlens_k=cuk, max_seqlen_q=max(lq))
            torch.cuda.synchronize()
            masks = dict(window=m.get("window", 0),
                         softcap=m.get("softcap", 0.0),
                         diagonal_offset=m.get("diagonal_offset", 0))
            ref, ref_lse = per_sequence(q, k, v, cuq, cuk, scale,
                                        m["causal"], True, **masks)
            low, _ = per_sequence(q, k, v, cuq, cuk, scale, m["causal"],
                                  False, **masks)
            err = (out.float() - ref).abs().max().item()
            base = (low - ref).abs().max().item()
            ok = err <= 2 * base + 1e-5 and bool(torch.isfinite(out).all())
            finite = torch.isfinite(ref_lse)
            lse_err = ((lse[finite] - ref_lse[finite]).abs().max().item()
                       if finite.any() else 0.0)
            ok &= lse_err <= 1e-2 and bool(torch.isneginf(lse[~finite]).all())
            failures += not ok
            print(f"{name} Hq={hq} Hkv={hkv} lens_q={lq} lens_k={lk}: "
                  f"max_err={err:.2e} torch_low={base:.2e} "
                  f"lse_max_abs={lse_err:.1e} {'PASS' if ok else 'FAIL'}",
                  flush=True)
    # flash_attn_varlen_func: [total, H, D], causal bottom-right.
    checks += 1
    lq, lk = [300, 1, 1024], [300, 40, 2000]
    torch.manual_seed(5)
    q, cuq = packed(lq, 8, 128, torch.float16)
    k, cuk = packed(lk, 2, 128, torch.float16)
    v = torch.randn_like(k)
    out = flashmlir.flash_attn_varlen_func(
        q[0].transpose(0, 1), k[0].transpose(0, 1), v[0].transpose(0, 1),
        cuq, cuk, max(lq), max(lk), causal=True, kernel_dir=folder)
    torch.cuda.synchronize()
    ref, _ = per_sequence(q, k, v, cuq, cuk, 1 / math.sqrt(128), True, True)
    low, _ = per_sequence(q, k, v, cuq, cuk, 1 / math.sqrt(128), True, False)
    got = out.transpose(0, 1)[None].float()
    err, base = (got - ref).abs().max().item(), (low - ref).abs().max().item()
    ok = err <= 2 * base + 1e-5
    failures += not ok
    print(f"flash_attn_varlen_func lens_q={lq} lens_k={lk}: max_err={err:.2e}"
          f" torch_low={base:.2e} {'PASS' if ok else 'FAIL'}", flush=True)
    print(f"varlen check: {checks - failures} passed, {failures} failed")
    return failures


def flops(lq, lk, d, hq, causal):
    total = 0
    for nq, nk in zip(lq, lk):
        seen = (sum(min(nk, nk - nq + i + 1) for i in range(nq)) if causal
                else nq * nk)
        total += 4 * hq * d * seen
    return total


def speed(folder):
    d, dt, hq, hkv = 128, torch.float16, 32, 8
    k_ = {n: Kernel.load(os.path.join(folder, n)) for n in kernel_names(folder)}
    rows = []
    rng = random.Random(7)
    ragged = [rng.randrange(256, 4096) for _ in range(12)]
    for causal in (False, True):
        tag = "_causal" if causal else ""
        vname = f"sm_90a_d128_f16{'_causal_bralign' if causal else ''}_varlen"
        varlen = k_[vname]
        single = k_.get(vname + "_single")
        contiguous = {n: k_[n] for n in (f"sm_90a_d128_f16{tag}",
                                         f"sm_90a_d128_f16{tag}_single_direct")}
        for label, lengths in (("uniform", [2048] * 8), ("ragged", ragged)):
            q, cuq = packed(lengths, hq, d, dt)
            k, cuk = packed(lengths, hkv, d, dt)
            v = torch.randn_like(k)
            out = torch.empty_like(q)
            lse = torch.empty(q.shape[:3], device="cuda")
            work = flops(lengths, lengths, d, hq, causal)
            row = {"causal": causal, "lengths": label, "B": len(lengths),
                   "total_tokens": sum(lengths), "varlen_TFLOPs": work / (
                       bench(lambda: varlen(q, k, v, out=out, lse=lse,
                                            cu_seqlens_q=cuq, cu_seqlens_k=cuk,
                                            max_seqlen_q=max(lengths))) /
                       1e3) / 1e12}
            if single:
                row["varlen_single_TFLOPs"] = work / (bench(
                    lambda: single(q, k, v, out=out, lse=lse, cu_seqlens_q=cuq,
                                   cu_seqlens_k=cuk,
                                   max_seqlen_q=max(lengths))) / 1e3) / 1e12
            # The uniform batch of the same work: B sequences of the length
            # whose work matches (L^2 B = sum L_i^2, rounded to 64).
            n = len(lengths)
            same = int(round(math.sqrt(sum(x * x for x in lengths) / n) / 64)
                       * 64)
            qb = torch.randn(n, hq, same, d, device="cuda", dtype=dt)
            kb = torch.randn(n, hkv, same, d, device="cuda", dtype=dt)
            vb = torch.randn_like(kb)
            ob = torch.empty_like(qb)
            lb = torch.empty(qb.shape[:3], device="cuda")
            uniform = flops([same] * n, [same] * n, d, hq, causal)
            row["uniform_L"] = same
            for name, kern in contiguous.items():
                row[f"{name}_TFLOPs"] = uniform / (bench(
                    lambda: kern(qb, kb, vb, out=ob, lse=lb)) / 1e3) / 1e12
                row[f"varlen_vs_{name}"] = (row["varlen_TFLOPs"] /
                                            row[f"{name}_TFLOPs"])
                if single:
                    row[f"varlen_single_vs_{name}"] = (
                        row["varlen_single_TFLOPs"] / row[f"{name}_TFLOPs"])
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else ".varlen"
    failures = check(folder)
    if "--check" in sys.argv:
        return 1 if failures else 0
    rows = speed(folder)
    with open(os.environ.get("OUT", "/tmp") + "/varlen.json", "w") as f:
        json.dump(rows, f, indent=1)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
