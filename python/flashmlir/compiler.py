"""Compile attention kernels from Python.

    import flashmlir
    k = flashmlir.compile(head_dim=128, causal=True, dtype="f16", arch="sm_90a")
    k.ptx, k.cubin, k.metadata          # PTX text, cubin bytes, launch dict
    print(k.mlir("kernel"))             # the gpu.module in NVVM

Needs the compiled extension (built with flash-mlir); the runtime
(flashmlir.runtime) does not.
"""
import functools
import json

from .errors import CompileError

__all__ = ["CompiledKernel", "compile", "CompileError", "run_cpu"]

_STAGES = ("attention", "host", "kernel", "ptx")


def _extension():
    try:
        from . import _compiler
    except ImportError as e:
        raise ImportError(
            "flashmlir._compiler is not built: build flash-mlir "
            "(bash scripts/bootstrap.sh) and use build/python, or install "
            "it with cmake --install") from e
    return _compiler


class CompiledKernel:
    """One compiled kernel: PTX, cubin, launch metadata and its IR stages."""

    def __init__(self, raw, options):
        self._raw = raw
        self.options = dict(options)
        self.name = raw["name"]
        self.ptx = raw["ptx"]
        self.cubin = raw["cubin"]
        self.metadata = json.loads(raw["metadata"])
        self.ptxas_log = raw["ptxas_log"]

    def mlir(self, stage="kernel"):
        """IR of a stage: 'attention' (the input fa.attention), 'host'
        (its gpu.launch_func), 'kernel' (the gpu.module in NVVM) or 'ptx'."""
        if stage not in _STAGES:
            raise ValueError(f"unknown stage {stage!r}; stages: {_STAGES}")
        if stage == "ptx":
            return self.ptx
        if stage == "host":
            return self._raw["host_ir"]
        if stage == "kernel":
            return self._raw["kernel_ir"]
        o = self.options
        t = f"memref<?x?x?x{o['head_dim']}x{o['dtype']}>"
        return (f"fa.attention %q, %k, %v outs(%o, %lse : {t}, "
                f"memref<?x?x?xf32>){' {causal}' if o['causal'] else ''} : "
                f"{t}, {t}, {t}")

    def runtime_kernel(self):
        """A flashmlir.runtime.Kernel to launch on torch tensors."""
        from .runtime import Kernel
        return Kernel(self.cubin, self.metadata)

    def __repr__(self):
        return f"CompiledKernel({self.name}, {self.options})"


@functools.lru_cache(maxsize=64)
def _compile_cached(arch, head_dim, dtype, causal, block_r, block_c,
                    rescale_threshold, poly_exp2_degree, poly_exp2_period):
    raw = _extension().compile(
        arch=arch, head_dim=head_dim, dtype=dtype, causal=causal,
        block_r=block_r, block_c=block_c,
        rescale_threshold=rescale_threshold,
        poly_exp2_degree=poly_exp2_degree, poly_exp2_period=poly_exp2_period)
    return raw


def compile(head_dim, causal=False, dtype="f16", arch="sm_90a", block_r=0,
            block_c=0, rescale_threshold=None, poly_exp2_degree=0,
            poly_exp2_period=8):
    """Compiles an attention kernel; cached on the options."""
    options = dict(arch=arch, head_dim=int(head_dim), dtype=dtype,
                   causal=bool(causal), block_r=int(block_r),
                   block_c=int(block_c),
                   rescale_threshold=(None if rescale_threshold is None
                                      else float(rescale_threshold)),
                   poly_exp2_degree=int(poly_exp2_degree),
                   poly_exp2_period=int(poly_exp2_period))
    raw = _compile_cached(**options)
    return CompiledKernel(raw, options)


def cache_info():
    return _compile_cached.cache_info()


def run_cpu(q, k, v, causal=False, scale=None, loop_order="fa2", block_r=0,
            block_c=0):
    """Runs attention on the host: fa.attention on numpy float32 arrays
    [B, H, N, D] lowered by fa-cpu-pipeline and JIT-compiled; returns
    (O, LSE). For checking and for machines without a GPU."""
    return _extension().run_cpu(q, k, v, causal=causal, scale=scale,
                                loop_order=loop_order, block_r=block_r,
                                block_c=block_c)
