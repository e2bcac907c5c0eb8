"""The backward kernel's launcher: the artefacts of `fa-compile --backward`
(a cubin and its "flash-mlir-backward-1" metadata) on torch tensors.

The kernel is the main loop of FlashAttention-2's backward (one CTA per
block of 64 keys of a (batch, K/V head): dK and dV written once, dQ added
into an f32 accumulator). Its metadata names the two steps around it that
the caller runs on the same stream, here in torch:

    row_dots = rowsum(dO * O)         (f32, before)
    dq_accum = 0                      (f32, before)
    dQ       = dq_accum in Q's dtype  (after)

Parameters are bound by the metadata's names, as the forward launchers do;
the grid is the metadata's formula (flashmlir.grid_formula).
"""

import ctypes
import json
import math

from . import grid_formula
from . import runtime

BACKWARD_FORMAT = "flash-mlir-backward-1"

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


def _check_metadata(meta):
    """Refuses metadata this launcher cannot run, naming the field."""
    def fail(why):
        raise runtime.MetadataError(f"backward kernel metadata: {why}")

    if not isinstance(meta, dict):
        fail("expected a JSON object")
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
    block = meta.get("block")
    if (not isinstance(block, list) or len(block) != 3
            or not all(runtime._is_int(b) and b >= 1 for b in block)
            or block[0] * block[1] * block[2] > 1024):
        fail(f"block must be three positive ints of at most 1024 threads, "
             f"got {block!r}")
    for field in ("block_c", "shared_memory_bytes"):
        value = meta.get(field)
        if not runtime._is_int(value) or not 0 < value <= 232448:
            fail(f"{field} must be a positive int, got {value!r}")
    scale = meta.get("scale")
    if (not runtime._is_number(scale) or not math.isfinite(scale)
            or scale <= 0):
        fail(f"scale must be positive and finite, got {scale!r}")
    grid = meta.get("grid")
    if not isinstance(grid, dict) or set(grid) != {"x", "y", "z"}:
        fail("grid must give x, y and z")
    known = {"B", "Hq", "Hkv", "Nq", "Nk", "block_c", "block_r"}
    for key in ("x", "y", "z"):
        try:
            grid_formula.check(grid[key], known)
        except grid_formula.GridFormulaError as e:
            fail(f"grid {key}: {e}")
    params = meta.get("params")
    if not isinstance(params, list):
        fail("params must be a list")
    kinds = dict(_PARAM_KINDS)
    if meta["deterministic"]:
        kinds[_DETERMINISTIC_PARAM] = "pointer"
    names = []
    for p in params:
        if not isinstance(p, dict) or p.get("name") not in kinds:
            fail(f"unknown parameter {p!r}: this launcher binds "
                 f"{sorted(kinds)}")
        if p.get("kind") != kinds[p["name"]]:
            fail(f"parameter {p['name']!r} must be a {kinds[p['name']]}"
                 f", got {p.get('kind')!r}")
        names.append(p["name"])
    if sorted(names) != sorted(kinds):
        fail(f"params must be each of {sorted(kinds)} once, got {names}")


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

    def _function(self, device_index):
        fn = self._functions.get(device_index)
        if fn is None:
            _, fn = runtime.load_function(
                self.cubin, self.name, self.meta["shared_memory_bytes"],
                device_index)
            self._functions[device_index] = fn
        return fn

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
        # The metadata's preprocess: D = rowsum(dO o O) and a zeroed f32 dQ.
        row_dots = (grad_out.float() * out.float()).sum(-1)
        dq_accum = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
        sizes = {"B": b, "Hq": hq, "Nq": nq, "Hkv": hkv, "Nk": nk}
        grid = runtime._evaluate_grid(self.meta, self.meta["grid"], sizes,
                                      f"{self.name}: ")
        values = {
            "q": ctypes.c_void_p(q.data_ptr()),
            "k": ctypes.c_void_p(k.data_ptr()),
            "v": ctypes.c_void_p(v.data_ptr()),
            "lse": ctypes.c_void_p(lse.data_ptr()),
            "do": ctypes.c_void_p(grad_out.data_ptr()),
            "row_dots": ctypes.c_void_p(row_dots.data_ptr()),
            "dq_accum": ctypes.c_void_p(dq_accum.data_ptr()),
            "dk": ctypes.c_void_p(dk.data_ptr()),
            "dv": ctypes.c_void_p(dv.data_ptr()),
            "Hq": ctypes.c_int32(hq), "Hkv": ctypes.c_int32(hkv),
            "Nq": ctypes.c_int32(nq), "Nk": ctypes.c_int32(nk),
            "scale": ctypes.c_float(scale),
        }
        if self.meta["deterministic"]:
            # One turn counter a (batch, query head, query block), zero.
            semaphores = torch.zeros(b * hq * ((nq + 63) // 64),
                                     dtype=torch.int32, device=q.device)
            values[_DETERMINISTIC_PARAM] = ctypes.c_void_p(
                semaphores.data_ptr())
        params = runtime._bind_by_name(self.name, self.meta["params"], values)
        device_index = q.device.index
        with runtime._device_guard(device_index):
            fn = self._function(device_index)
            stream = runtime._current_stream(device_index)
            drv = runtime._get_driver()
            bx, by, bz = self.meta["block"]
            drv.check(drv.lib.cuLaunchKernel(
                fn, *grid, bx, by, bz, self.meta["shared_memory_bytes"],
                ctypes.c_void_p(stream), params, None), "cuLaunchKernel")
        # The metadata's postprocess: dQ in Q's dtype.
        return dq_accum.to(q.dtype), dk, dv
