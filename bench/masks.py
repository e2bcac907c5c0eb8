"""Windowed, softcapped and bottom-right aligned kernels on the GPU: O and
LSE against an fp32 reference with the explicit mask, including rows whose keys are all masked
(they must give O = 0 and LSE = -inf), on ragged shapes; compute-sanitizer
friendly (small).

    python3 bench/masks.py .masks
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Kernel, dtypes, kernel_names  # noqa: E402

DT = dtypes()
TOL = {"f16": 2e-3, "bf16": 1.6e-2}


def reference(q, k, v, scale, causal, window, softcap, bottom_right=False,
              upcast=True, diagonal_offset=0):
    """O, LSE and the rows that see no key, of attention with the masks, in
    fp32 or (upcast=False) in q's dtype: torch's low-precision math, the
    2x rule's yardstick. diagonal_offset d: query i at key position i + d
    (plus Nk - Nq when bottom-right)."""
    b, hq, nq, d = q.shape
    hkv, nk = k.shape[1], k.shape[2]
    cast = (lambda t: t.float()) if upcast else (lambda t: t)
    kk = cast(k).repeat_interleave(hq // hkv, 1)
    vv = cast(v).repeat_interleave(hq // hkv, 1)
    s = torch.matmul(cast(q), kk.transpose(-1, -2)) * scale
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    # Bottom-right alignment: query i at key position i + Nk - Nq.
    i = torch.arange(nq, device=q.device)[:, None] + (
        nk - nq if bottom_right else 0) + diagonal_offset
    j = torch.arange(nk, device=q.device)[None, :]
    visible = torch.ones(nq, nk, dtype=torch.bool, device=q.device)
    if causal:
        visible &= j <= i
    if window:
        visible &= (i - j).abs() < window
    s = s.masked_fill(~visible, float("-inf"))
    lse = torch.logsumexp(s.float(), -1)
    p = torch.softmax(s, -1).nan_to_num(0.0)
    return torch.matmul(p, vv), lse, ~visible.any(-1)


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else ".masks"
    failures = checks = 0
    names = kernel_names(folder)
    for name in names:
        k = Kernel.load(os.path.join(folder, name))
        m = k.meta
        d, dt = m["head_dim"], m["dtype"]
        # The last shape has more tiles than SMs: persistent CTAs (static
        # or dynamically scheduled) run several each. Set FLASHMLIR_MASKS_SMALL
        # for the small shapes only (under compute-sanitizer).
        # Nq > Nk (bottom-right: rows before every key), Nq < Nk (a chunk
        # of queries after a KV cache), decode (Nq = 1).
        shapes = [(2, 4, 2, 333, 100), (1, 2, 1, 200, 517),
                  (3, 8, 2, 1, 1531)]
        if not os.environ.get("FLASHMLIR_MASKS_SMALL"):
            shapes.append((4, 32, 8, 1000, 1100))
        for (b, hq, hkv, nq, nk) in shapes:
            checks += 1
            torch.manual_seed(nq + nk)
            q = torch.randn(b, hq, nq, d, device="cuda", dtype=DT[dt])
            kk = torch.randn(b, hkv, nk, d, device="cuda", dtype=DT[dt])
            v = torch.randn(b, hkv, nk, d, device="cuda", dtype=DT[dt])
            out = torch.full_like(q, float("nan"))
            lse = torch.full((b, hq, nq), float("nan"), device="cuda")
            scale = 1 / math.sqrt(d)
            k(q, kk, v, out=out, lse=lse, scale=scale)
            torch.cuda.synchronize()
            ref, ref_lse, empty = reference(q, kk, v, scale, m["causal"],
                                            m.get("window", 0),
                                            m.get("softcap", 0.0),
                                            m.get("bottom_right", False),
                                            diagonal_offset=m.get("diagonal_offset", 0))
            err = ((out.float() - ref).norm() / ref.norm()).item()
            finite = torch.isfinite(ref_lse)
            lse_err = ((lse[finite] - ref_lse[finite]).abs().max().item()
                       if finite.any() else 0.0)
            empty_rows = int(empty.sum().item())
            zeros_ok = bool((out[..., empty, :] == 0).all().item())
            neginf_ok = bool(torch.isneginf(lse[..., empty]).all().item())
            ok = (err <= TOL[dt] and lse_err <= 1e-2 and zeros_ok and neginf_ok
                  and bool(torch.isfinite(out).all().item()))
            failures += not ok
            print(f"{name} B={b} Hq={hq} Hkv={hkv} Nq={nq} Nk={nk}: "
                  f"rel_l2={err:.2e} (tol {TOL[dt]:.0e}) lse_max_abs={lse_err:.1e} "
                  f"fully_masked_rows={empty_rows} zero={zeros_ok} "
                  f"lse_-inf={neginf_ok} {'PASS' if ok else 'FAIL'}", flush=True)
    print(f"masks: {checks - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
