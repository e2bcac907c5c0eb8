"""flash-mlir from Python.

* ``flashmlir.compile(head_dim=..., causal=..., dtype=..., arch=...)``
  compiles a kernel in-process (needs the built extension).
* ``flashmlir.runtime`` launches compiled kernels on torch tensors and
  needs only torch and an NVIDIA driver.
* ``flashmlir.attention(q, k, v, causal=..., scale=...)`` compiles on first
  use (cached) and launches, with torch SDPA's [B, H, N, D] convention.
"""
import os as _os

# The compiled extension lives in the build tree (build/python/flashmlir)
# until installed next to these files.
for _candidate in (_os.environ.get("FLASHMLIR_BUILD_DIR"),
                   _os.path.join(_os.path.dirname(__file__), "..", "..",
                                 "build")):
    if _candidate:
        _ext = _os.path.join(_candidate, "python", "flashmlir")
        if _os.path.isdir(_ext) and _ext not in __path__:
            __path__.append(_ext)

from .errors import CompileError  # noqa: E402
from .compiler import CompiledKernel, compile, run_cpu  # noqa: E402

__all__ = ["compile", "CompiledKernel", "CompileError", "attention",
           "run_cpu", "runtime"]

_launchers = {}


def attention(q, k, v, causal=False, scale=None):
    """softmax(scale * q k^T) v on CUDA tensors [B, H, N, D] (f16/bf16),
    compiled for the tensors' GPU on first use and cached."""
    import torch
    from . import runtime

    major, minor = torch.cuda.get_device_capability(q.device)
    arch = "sm_90a" if (major, minor) == (9, 0) else "sm_80"
    dtype = {torch.float16: "f16", torch.bfloat16: "bf16"}.get(q.dtype)
    if dtype is None:
        raise runtime.KernelArgumentError(
            f"q must be float16 or bfloat16, got {q.dtype}")
    key = (arch, int(q.shape[-1]), dtype, bool(causal))
    if key not in _launchers:
        _launchers[key] = compile(head_dim=key[1], causal=key[3],
                                  dtype=dtype, arch=arch).runtime_kernel()
    out, _ = _launchers[key](q, k, v, scale=scale)
    return out
