"""Kernels driven by their compiled artefacts alone (issue 15): each kernel
in the folder is launched through flashmlir.runtime without a scale, so the
runtime takes the one in its metadata, and its O is compared with torch's
math attention at the scale the test expects (named in the file name,
`..._scale<value>`), by flash-attention's 2x rule against torch's own
fp16/bf16 SDPA; a kernel built without LSE must return None for it.

    python3 bench/artefacts.py .art
"""
import os
import re
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Kernel, dtypes, kernel_names, two_x_l2  # noqa: E402

DT = dtypes()


def main():
    folder = sys.argv[1]
    passed = failed = 0
    for name in kernel_names(folder):
        k = Kernel.load(os.path.join(folder, name))
        m = re.search(r"_scale([0-9.]+)", name)
        expected_scale = float(m.group(1))
        d, dtype, causal = k.meta["head_dim"], DT[k.meta["dtype"]], \
            k.meta["causal"]
        ok = True
        for seed, (b, hq, hkv, nq, nk) in enumerate(
                [(2, 8, 2, 1000, 1000), (1, 4, 1, 77, 300),
                 (4, 32, 8, 1000, 1100)]):
            torch.manual_seed(seed)
            q = torch.randn(b, hq, nq, d, device="cuda", dtype=dtype)
            kk = torch.randn(b, hkv, nk, d, device="cuda", dtype=dtype)
            v = torch.randn_like(kk)
            out, lse = k(q, kk, v)  # no scale: the metadata's
            torch.cuda.synchronize()
            kr = kk.repeat_interleave(hq // hkv, 1)
            vr = v.repeat_interleave(hq // hkv, 1)
            with sdpa_kernel([SDPBackend.MATH]):
                ref = F.scaled_dot_product_attention(
                    q.double(), kr.double(), vr.double(), is_causal=causal,
                    scale=expected_scale)
                low = F.scaled_dot_product_attention(
                    q, kr, vr, is_causal=causal, scale=expected_scale)
            err, base, good = two_x_l2(out, ref, low)
            if not k.meta.get("writes_lse", True):
                good = good and lse is None
            ok = ok and good
            print(f"{name} {(b, hq, hkv, nq, nk)}: scale from metadata "
                  f"{k.meta['scale']}, rel err {err:.2e} (torch {base:.2e}),"
                  f" lse {'None' if lse is None else 'tensor'}: "
                  f"{'ok' if good else 'FAIL'}", flush=True)
        passed += ok
        failed += not ok
    print(f"artefacts: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
