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
import struct

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


def _f32_text(value):
    """`value` as the f32 attribute it becomes, in text that parses back to
    that f32 exactly (repr of the f32's double value; ':e' kept 7 digits)."""
    return repr(struct.unpack("f", struct.pack("f", value))[0])


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
        attrs = (["causal"] if o["causal"] else []) + \
            ([f"window = {o['window']} : i64"] if o["window"] else []) + \
            ([f"softcap = {_f32_text(o['softcap'])} : f32"]
             if o["softcap"] else [])
        attr = f" {{{', '.join(attrs)}}}" if attrs else ""
        return (f"fa.attention %q, %k, %v outs(%o, %lse : {t}, "
                f"memref<?x?x?xf32>){attr} : {t}, {t}, {t}")

    def runtime_kernel(self):
        """A flashmlir.runtime.Kernel to launch on torch tensors."""
        from .runtime import Kernel
        return Kernel(self.cubin, self.metadata)

    def __repr__(self):
        return f"CompiledKernel({self.name}, {self.options})"


@functools.lru_cache(maxsize=64)
def _compile_cached(**options):
    return _extension().compile(**options)


def compile(head_dim, causal=False, dtype="f16", arch="sm_90a", window=0,
            softcap=0.0, bottom_right=False, block_r=0, block_c=0, rescale_threshold=None,
            poly_exp2_degree=None, poly_exp2_period=8, stages=0,
            ping_pong=True, intra_overlap=True, persistent=None,
            sm90_kernel="wgmma"):
    """Compiles an attention kernel; cached on the options.

    arch: "sm_80", "sm_90a" (FlashAttention-3: TMA, wgmma, warp roles) or
    "sm_100a" (Blackwell tcgen05 kernel: compile-verified only, no GPU of
    that kind has run it). window / softcap: sliding-window mask |i - j| <
    window and scores c * tanh(s / c). bottom_right: those masks aligned to
    the last key (query i at key position i + Nk - Nq, as with a KV cache
    or flash-attention's causal=True when Nq != Nk). block_r / block_c: tile overrides
    (0: the back end's measured default). rescale_threshold (None: measured
    default, < 0 off) and poly_exp2_degree / poly_exp2_period (None: the
    target's default) are FlashAttention-4's tricks. stages, ping_pong,
    intra_overlap, persistent: the sm_90a/sm_100a schedule knobs
    (persistent=None: the back end's measured choice);
    sm90_kernel="mma-sync" builds the sm_80 kernel for sm_90a.
    """
    options = dict(arch=arch, head_dim=int(head_dim), dtype=dtype,
                   causal=bool(causal), window=int(window),
                   bottom_right=bool(bottom_right),
                   softcap=float(softcap), block_r=int(block_r),
                   block_c=int(block_c),
                   rescale_threshold=(None if rescale_threshold is None
                                      else float(rescale_threshold)),
                   poly_exp2_degree=(-1 if poly_exp2_degree is None
                                     else int(poly_exp2_degree)),
                   poly_exp2_period=int(poly_exp2_period),
                   stages=int(stages), ping_pong=bool(ping_pong),
                   intra_overlap=bool(intra_overlap),
                   persistent=(-1 if persistent is None
                               else int(bool(persistent))),
                   sm90_kernel=sm90_kernel)
    raw = _compile_cached(**options)
    return CompiledKernel(raw, options)


class CompiledModule:
    """A caller's module compiled for a GPU: one binary (PTX, cubin) and one
    launch per fa.attention, in program order, each with its kernel's name
    and launch metadata (its own scale, mask, head dim, LSE)."""

    def __init__(self, raw):
        self.ptx = raw["ptx"]
        self.cubin = raw["cubin"]
        self.kernel_ir = raw["kernel_ir"]
        self.host_ir = raw["host_ir"]
        self.ptxas_log = raw["ptxas_log"]
        self.launches = [(e["name"], json.loads(e["metadata"]))
                         for e in raw["launches"]]

    def kernel(self, index=0):
        """The runtime Kernel of launch `index` (needs torch and a GPU)."""
        from .runtime import Kernel
        return Kernel(self.cubin, self.launches[index][1])


def compile_module(text, arch="sm_90a", rescale_threshold=None,
                   poly_exp2_degree=None, poly_exp2_period=8):
    """Compiles a user's MLIR module (fa.attention ops in func.funcs, e.g.
    after fa-raise-attention) for `arch`; every attention becomes a launch.
    Diagnostics are raised as CompileError."""
    raw = _extension().compile_module(
        text=str(text), arch=arch,
        rescale_threshold=(None if rescale_threshold is None
                           else float(rescale_threshold)),
        poly_exp2_degree=(-1 if poly_exp2_degree is None
                          else int(poly_exp2_degree)),
        poly_exp2_period=int(poly_exp2_period))
    return CompiledModule(raw)


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


def predicted_bytes(metadata, batch, query_heads, kv_heads, query_len,
                    key_len):
    """(L2 -> SM read bytes, SM -> L2 write bytes) that the kernel of
    `metadata` (a CompiledKernel's .metadata or a fa-compile .json, loaded)
    moves for this shape: the counting rule of fagpu-io-report and of the C
    runtime's faMetadataPredictedBytes, checked against ncu on the H200."""
    m = metadata
    if "block_c" not in m or "arch" not in m:
        raise ValueError("predicted_bytes: the metadata has no 'block_c' or "
                         "'arch' (compiled before the prediction existed)")
    return tuple(_extension().predicted_bytes(
        m["block_r"], m["block_c"], m["head_dim"], 2, bool(m["causal"]),
        bool(m.get("bottom_right", False)), int(m.get("window", 0)),
        int(m.get("tma_box_cols", 0)) > 0,
        m.get("tile_scheduler") == "dynamic", bool(m.get("writes_lse", True)),
        batch, query_heads, kv_heads, query_len, key_len))
