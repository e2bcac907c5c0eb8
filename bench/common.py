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
