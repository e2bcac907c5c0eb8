"""The backward kernel's launcher: the artefacts of `fa-compile --backward`
(a cubin and its "flash-mlir-backward-2" metadata) on torch tensors.

The backward is three kernels of the cubin, launched on the current
stream in this order, each as the metadata lists it (name, block, grid,
parameters):

    preprocess   row_dots = rowsum(dO * O) (f32), dq_accum = 0
                 (and the deterministic kernel's turn counters = 0)
    kernel       the main loop of FlashAttention-2's backward: one CTA per
                 block of 64 keys of a (batch, K/V head), dK and dV written
                 once, dQ added into the f32 dq_accum
    convert      dQ = dq_accum in Q's dtype

Parameters are bound by the metadata's names, as the forward launchers do;
the grids are the metadata's formulas (flashmlir.grid_formula).
"""

import ctypes
import json
import math

from . import grid_formula
from . import runtime

BACKWARD_FORMAT = "flash-mlir-backward-2"

# The backward kernel's parameters (fagpu::backwardParams): every name the
# launcher can bind, and the kinds they must have.
_PARAM_KINDS = {
    "q": "pointer", "k": "pointer", "v": "pointer", "lse": "pointer",
    "do": "pointer", "row_dots": "pointer", "dq_accum": "pointer",
    "dk": "pointer", "dv": "pointer", "Hq": "i32", "Hkv": "i32", "Nq": "i32",
    "Nk": "i32", "scale": "f32",
}
# A deterministic kernel's (metadata "deterministic": true) turn counters.
_DETERMINISTIC_PARAM = "dq_semaphores"
# The kernels around the main one (fagpu::backwardPreprocessParams,
# backwardConvertParams): their metadata objects and parameters.
_ROWS_KERNELS = {
    "preprocess": {"o": "pointer", "do": "pointer", "row_dots": "pointer",
                   "dq_accum": "pointer", "Hq": "i32", "Nq": "i32"},
    "convert": {"dq_accum": "pointer", "dq": "pointer", "Hq": "i32",
                "Nq": "i32"},
}
# The names a backward grid may use: the launch's sizes and the kernel's
# tiles (the C runtime's kBackwardGridNames).
_GRID_NAMES = {"B", "Hq", "Hkv", "Nq", "Nk", "D", "block_c", "block_r"}


def _check_block(fail, where, block):
    try:
        runtime._check_block(f"{where}block", block)
    except runtime.MetadataError as e:
        fail(str(e))


def _check_grid(fail, where, grid):
    try:
        runtime._check_grid(f"{where}grid", grid, _GRID_NAMES)
    except runtime.MetadataError as e:
        fail(str(e))


def _check_param_kinds(fail, where, params, kinds):
    """`params` must be each of `kinds` (name: kind) once."""
    if not isinstance(params, list):
        fail(f"{where}params must be a list")
    runtime._check_params(f"{where}params", params)
    names = []
    for p in params:
        if not isinstance(p, dict) or p.get("name") not in kinds:
            fail(f"{where}unknown parameter {p!r}: this launcher binds "
                 f"{sorted(kinds)}")
        if p.get("kind") != kinds[p["name"]]:
            fail(f"{where}parameter {p['name']!r} must be a "
                 f"{kinds[p['name']]}, got {p.get('kind')!r}")
        names.append(p["name"])
    if sorted(names) != sorted(kinds):
        fail(f"{where}params must be each of {sorted(kinds)} once, got "
             f"{names}")


def _check_metadata(meta):
    """Refuses metadata this launcher cannot run, naming the field."""
    def fail(why):
        raise runtime.MetadataError(f"backward kernel metadata: {why}")

    if not isinstance(meta, dict):
        fail("expected a JSON object")
    # What the C reader checks of every metadata before validating it (the
    # JSON rules, the shared fields' types and ranges, each parameter's
    # entry), as faBackwardMetadataCheck does.
    runtime._metadata_text(meta, allow_nan=False)
    runtime._check_depth(meta)
    if not all(isinstance(key, str) for key in meta):
        fail("keys must be strings")
    runtime._check_reader_fields(meta)
    if "value_layout" in meta or "kv_append" in meta:
        fail("a backward kernel has no 'value_layout' or 'kv_append'")
    if meta.get("format") != BACKWARD_FORMAT:
        fail(f"format is {meta.get('format')!r}, expected "
             f"{BACKWARD_FORMAT!r} (a forward kernel's metadata goes to "
             f"flashmlir.runtime.Kernel)")
    if not isinstance(meta.get("kernel"), str) or not meta["kernel"]:
        fail("'kernel' must name the cubin's kernel")
    if meta.get("dtype") not in ("f16", "bf16"):
        fail(f"dtype must be f16 or bf16, got {meta.get('dtype')!r}")
    if meta.get("head_dim") not in (64, 128):
        fail(f"head_dim must be 64 or 128, got {meta.get('head_dim')!r}")
    for flag in ("causal", "bottom_right", "deterministic"):
        if not isinstance(meta.get(flag), bool):
            fail(f"{flag!r} must be a boolean")
    _check_block(fail, "", meta.get("block"))
    if not isinstance(meta.get("arch"), str):
        fail(f"'arch' must name the kernel's target, got "
             f"{meta.get('arch')!r}")
    if "block_c" not in meta:
        fail("block_c must be a positive int, got None")
    # At most the 227 KiB of shared memory a Hopper CTA may use.
    value = meta.get("shared_memory_bytes")
    if not runtime._is_int(value) or not 0 < value <= 232448:
        fail(f"shared_memory_bytes must be a positive int of at most 232448, "
             f"got {value!r}")
    scale = meta.get("scale")
    if (not runtime._is_number(scale) or not math.isfinite(scale)
            or scale <= 0):
        fail(f"scale must be positive and finite, got {scale!r}")
    _check_grid(fail, "", meta.get("grid"))
    kinds = dict(_PARAM_KINDS)
    if meta["deterministic"]:
        kinds[_DETERMINISTIC_PARAM] = "pointer"
    _check_param_kinds(fail, "", meta.get("params"), kinds)
    for what, kinds in _ROWS_KERNELS.items():
        where = f"{what}: "
        rows = meta.get(what)
        if not isinstance(rows, dict):
            fail(f"{what!r} must be an object (the kernel, its block, grid "
                 f"and params)")
        if (not isinstance(rows.get("kernel"), str) or not rows["kernel"]
                or rows["kernel"] == meta["kernel"]):
            fail(f"{where}'kernel' must name another kernel of the cubin")
        _check_block(fail, where, rows.get("block"))
        _check_grid(fail, where, rows.get("grid"))
        kinds = dict(kinds)
        if what == "preprocess" and meta["deterministic"]:
            kinds[_DETERMINISTIC_PARAM] = "pointer"
        _check_param_kinds(fail, where, rows.get("params"), kinds)


class BackwardKernel:
    """A compiled backward kernel (`fa-compile --backward`): call it with
    the forward's inputs, O, its LSE and dO to get dQ, dK, dV. A kernel
    compiled with --deterministic adds into dQ in a fixed order: the same
    gradients every run."""

    def __init__(self, cubin, metadata):
        meta = (runtime.load_metadata(metadata, "the backward metadata")
                if isinstance(metadata, (str, bytes)) else dict(metadata))
        _check_metadata(meta)
        self.cubin = bytes(cubin)
        runtime.check_image(self.cubin)
        self.meta = meta
        self._functions = {}

    @classmethod
    def load(cls, prefix):
        with open(f"{prefix}.cubin", "rb") as f:
            cubin = f.read()
        with open(f"{prefix}.json") as f:
            metadata = f.read()
        return cls(cubin, metadata)

    @property
    def name(self):
        return self.meta["kernel"]

    def _kernels(self, device_index):
        """The (preprocess, main, convert) functions, loaded once per
        device from one module."""
        fns = self._functions.get(device_index)
        if fns is None:
            module, main = runtime.load_function(
                self.cubin, self.name, self.meta["shared_memory_bytes"],
                device_index)
            fns = (runtime.module_function(
                       module, self.meta["preprocess"]["kernel"], 0),
                   main,
                   runtime.module_function(
                       module, self.meta["convert"]["kernel"], 0))
            self._functions[device_index] = fns
        return fns

    def _check(self, q, k, v, out, lse, grad_out):
        import torch
        dtype = {"f16": torch.float16, "bf16": torch.bfloat16}[
            self.meta["dtype"]]
        d = self.meta["head_dim"]
        named = {"q": q, "k": k, "v": v, "out": out, "lse": lse,
                 "grad_out": grad_out}
        for name, t in named.items():
            if not isinstance(t, torch.Tensor):
                raise runtime.KernelArgumentError(
                    f"{name} must be a torch.Tensor, got {type(t).__name__}")
        for name, t in named.items():
            if not t.is_cuda or t.device != q.device:
                raise runtime.KernelArgumentError(
                    f"{name} must be a CUDA tensor on {q.device}, got "
                    f"{t.device}")
            if not t.is_contiguous():
                raise runtime.KernelArgumentError(
                    f"{name} must be contiguous (the backward kernel reads "
                    f"packed [B, H, N, D] rows)")
            want = torch.float32 if name == "lse" else dtype
            if t.dtype != want:
                raise runtime.KernelArgumentError(
                    f"{name} must be {want}, got {t.dtype} (kernel "
                    f"{self.name})")
        if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
            raise runtime.KernelArgumentError(
                "q, k, v must be [B, H, N, D]")
        b, hq, nq, dq = q.shape
        if dq != d or k.shape[3] != d or v.shape[3] != d:
            raise runtime.KernelArgumentError(
                f"head dims must be {d} (kernel {self.name}), got q "
                f"{dq}, k {k.shape[3]}, v {v.shape[3]}")
        if k.shape != v.shape or k.shape[0] != b:
            raise runtime.KernelArgumentError(
                f"k and v must be [B, Hkv, Nk, D] of one shape with q's "
                f"batch {b}, got {tuple(k.shape)} and {tuple(v.shape)}")
        hkv = k.shape[1]
        if hkv < 1 or hq % hkv:
            raise runtime.KernelArgumentError(
                f"q's heads ({hq}) must be a multiple of k's ({hkv})")
        for name in ("out", "grad_out"):
            if named[name].shape != q.shape:
                raise runtime.KernelArgumentError(
                    f"{name} must have q's shape {tuple(q.shape)}, got "
                    f"{tuple(named[name].shape)}")
        if lse.shape != (b, hq, nq):
            raise runtime.KernelArgumentError(
                f"lse must be [B, Hq, Nq] = {(b, hq, nq)}, got "
                f"{tuple(lse.shape)}")
        for n, what in ((nq, "Nq"), (k.shape[2], "Nk")):
            if n >= 2 ** 30:
                raise runtime.KernelArgumentError(
                    f"{what} = {n}: the kernel's positions are 32-bit and "
                    f"kept below 2^30")
        return b, hq, nq, hkv, k.shape[2]

    def __call__(self, q, k, v, out, lse, grad_out, scale=None):
        """dQ, dK, dV of the attention softmax(scale Q K^T [masked]) V whose
        output `out` and log-sum-exp `lse` (natural log, f32 [B, Hq, Nq],
        the forward's) are given, for the loss gradient `grad_out`. Shapes
        [B, H, N, D], contiguous; grouped-query K/V heads get the sum over
        their query heads."""
        import torch
        b, hq, nq, hkv, nk = self._check(q, k, v, out, lse, grad_out)
        scale = self.meta["scale"] if scale is None else runtime.check_scale(
            scale)
        dk = torch.empty_like(k)
        dv = torch.empty_like(v)
        if b == 0 or hq == 0 or nq == 0 or nk == 0:
            return torch.zeros_like(q), dk.zero_(), dv.zero_()
        row_dots = torch.empty((b, hq, nq), dtype=torch.float32,
                               device=q.device)
        dq_accum = torch.empty(q.shape, dtype=torch.float32, device=q.device)
        dq = torch.empty_like(q)
        sizes = {"B": b, "Hq": hq, "Nq": nq, "Hkv": hkv, "Nk": nk,
                 "D": self.meta["head_dim"]}
        values = {
            "q": ctypes.c_void_p(q.data_ptr()),
            "k": ctypes.c_void_p(k.data_ptr()),
            "v": ctypes.c_void_p(v.data_ptr()),
            "o": ctypes.c_void_p(out.data_ptr()),
            "lse": ctypes.c_void_p(lse.data_ptr()),
            "do": ctypes.c_void_p(grad_out.data_ptr()),
            "row_dots": ctypes.c_void_p(row_dots.data_ptr()),
            "dq_accum": ctypes.c_void_p(dq_accum.data_ptr()),
            "dq": ctypes.c_void_p(dq.data_ptr()),
            "dk": ctypes.c_void_p(dk.data_ptr()),
            "dv": ctypes.c_void_p(dv.data_ptr()),
            "Hq": ctypes.c_int32(hq), "Hkv": ctypes.c_int32(hkv),
            "Nq": ctypes.c_int32(nq), "Nk": ctypes.c_int32(nk),
            "scale": ctypes.c_float(scale),
        }
        if self.meta["deterministic"]:
            # One turn counter a (batch, query head, query block), zeroed
            # by the preprocess.
            semaphores = torch.empty(b * hq * ((nq + 63) // 64),
                                     dtype=torch.int32, device=q.device)
            values[_DETERMINISTIC_PARAM] = ctypes.c_void_p(
                semaphores.data_ptr())
        launches = [(self.meta["preprocess"], 0), (self.meta, None),
                    (self.meta["convert"], 0)]
        device_index = q.device.index
        with runtime._device_guard(device_index):
            fns = self._kernels(device_index)
            stream = ctypes.c_void_p(runtime._current_stream(device_index))
            drv = runtime._get_driver()
            for fn, (meta, shared) in zip(fns, launches):
                name = meta["kernel"]
                grid = runtime._evaluate_grid(self.meta, meta["grid"], sizes,
                                              f"{name}: ")
                params = runtime._bind_by_name(name, meta["params"], values)
                shared = (self.meta["shared_memory_bytes"] if shared is None
                          else shared)
                drv.check(drv.lib.cuLaunchKernel(
                    fn, *grid, *meta["block"], shared, stream, params, None),
                    f"cuLaunchKernel({name})")
        return dq, dk, dv
