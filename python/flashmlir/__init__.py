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
from .compiler import (CompiledKernel, CompiledModule, compile,  # noqa: E402
                       compile_module, run_cpu)

__all__ = ["compile", "compile_module", "CompiledModule", "CompiledKernel",
           "CompileError", "attention", "run_cpu", "runtime"]

_launchers = {}


def _kernel_for(arch, head_dim, dtype, causal, kernel_dir):
    """The launcher of one kernel: from `kernel_dir` (fa-compile output
    named like bench/build_kernels.sh writes it, e.g. sm_90a_d128_f16_causal
    .{cubin,json}) when it is there, else compiled in-process (and saved to
    `kernel_dir` if one is given)."""
    from . import runtime

    name = f"{arch}_d{head_dim}_{dtype}{'_causal' if causal else ''}"
    want = {"arch": arch, "head_dim": head_dim, "dtype": dtype,
            "causal": causal, "window": 0, "softcap": 0.0}
    if kernel_dir:
        path = _os.path.join(kernel_dir, name)
        if _os.path.exists(path + ".cubin"):
            kernel = runtime.Kernel.load(path)
            # The file name is a promise the metadata must keep.
            got = {k: kernel.meta.get(k) for k in want}
            if got != want:
                raise runtime.MetadataError(
                    f"{path}.json describes {got}, not the requested {want}")
            return kernel
    compiled = compile(head_dim=head_dim, causal=causal, dtype=dtype,
                       arch=arch)
    if kernel_dir:
        import json
        import tempfile
        _os.makedirs(kernel_dir, exist_ok=True)
        # Metadata first, each file written aside and renamed into place, so
        # a concurrent reader never sees a cubin without its JSON or half a
        # file.
        for suffix, data in ((".json", json.dumps(compiled.metadata,
                                                  indent=2).encode()),
                             (".cubin", compiled.cubin)):
            fd, tmp = tempfile.mkstemp(dir=kernel_dir, suffix=".tmp")
            with _os.fdopen(fd, "wb") as fh:
                fh.write(data)
            _os.replace(tmp, _os.path.join(kernel_dir, name + suffix))
    return compiled.runtime_kernel()


def attention(q, k, v, causal=False, scale=None, kernel_dir=None):
    """softmax(scale * q k^T) v on CUDA tensors [B, H, N, D] (f16/bf16, D in
    {64, 128, 256}; k and v may have fewer heads than q: grouped-query
    attention), with torch SDPA's calling convention; causal is top-left
    aligned. The kernel for the tensors' GPU (sm_90a FlashAttention-3 on
    Hopper, the sm_80 kernel on Ampere) is looked up in `kernel_dir`
    (default: $FLASHMLIR_KERNEL_DIR), else compiled in-process on first use;
    either way it is cached for the process."""
    import torch
    from . import runtime

    if not isinstance(q, torch.Tensor) or not q.is_cuda:
        raise runtime.KernelArgumentError("q must be a CUDA tensor")
    major, minor = torch.cuda.get_device_capability(q.device)
    if (major, minor) == (9, 0):
        arch = "sm_90a"
    elif major == 8:
        arch = "sm_80"
    else:
        # The sm_100a kernel is compile-verified only: never run it silently.
        raise runtime.KernelArgumentError(
            f"no verified flash-mlir kernel for compute capability "
            f"{major}.{minor} (sm_80 and sm_90a are; sm_100a is compile-only)")
    dtype = {torch.float16: "f16", torch.bfloat16: "bf16"}.get(q.dtype)
    if dtype is None:
        raise runtime.KernelArgumentError(
            f"q must be float16 or bfloat16, got {q.dtype}")
    kernel_dir = kernel_dir or _os.environ.get("FLASHMLIR_KERNEL_DIR")
    key = (arch, int(q.shape[-1]), dtype, bool(causal))
    if key not in _launchers:
        _launchers[key] = _kernel_for(*key, kernel_dir)
    out, _ = _launchers[key](q, k, v, scale=scale)
    return out
