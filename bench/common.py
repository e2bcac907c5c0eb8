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


def median_ms(fn):
    """triton's do_bench median of `fn` in milliseconds (25 warm-up, 200 ms
    of repetitions), as the H200 scripts time everything."""
    import triton.testing
    return triton.testing.do_bench(fn, warmup=25, rep=200,
                                   return_mode="median")
