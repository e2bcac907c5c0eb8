"""Shared by the H200 scripts: the runtime import, dtypes, kernel folders."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "python"))
from flashmlir.runtime import Kernel  # noqa: E402,F401


def dtypes():
    import torch
    return {"f16": torch.float16, "bf16": torch.bfloat16}


def kernel_names(folder):
    """The kernels (prefix of .json + .cubin) in a folder, sorted."""
    return sorted(f[:-5] for f in os.listdir(folder) if f.endswith(".json"))


def two_x_l2(out, ref, low):
    """flash-attention's 2x rule on relative L2 errors: (err, base, ok),
    err the kernel's output `out` against the float64 reference `ref`,
    base the low-precision torch result `low`'s, ok when err is finite and
    at most 2 base + 1e-6."""
    import math
    err = ((out.double() - ref).norm() / ref.norm()).item()
    base = ((low.double() - ref).norm() / ref.norm()).item()
    return err, base, math.isfinite(err) and err <= 2 * base + 1e-6


def median_ms(fn):
    """triton's do_bench median of `fn` in milliseconds (25 warm-up, 200 ms
    of repetitions), as the H200 scripts time everything."""
    import triton.testing
    return triton.testing.do_bench(fn, warmup=25, rep=200,
                                   return_mode="median")
