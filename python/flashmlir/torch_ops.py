"""flash-mlir's attention as torch operators, so that a torch.compile'd
model calls it without a graph break:

    import flashmlir.torch_ops      # registers torch.ops.flashmlir.*
    out = torch.ops.flashmlir.attention(q, k, v, causal=True)
    compiled = torch.compile(model, fullgraph=True)

* ``flashmlir::attention(Tensor q, Tensor k, Tensor v, bool causal=False,
  float? scale=None) -> Tensor``: torch SDPA's layout, q [B, Hq, Nq, D], k
  and v [B, Hkv, Nk, D]; O [B, Hq, Nq, D]; causal top-left aligned, as
  flashmlir.attention (and F.scaled_dot_product_attention's is_causal).
* ``flashmlir::flash_attn(Tensor q, Tensor k, Tensor v, float?
  softmax_scale=None, bool causal=False, int window_left=-1, int
  window_right=-1) -> Tensor``: flash-attention's layout, q [B, Nq, Hq, D],
  k and v [B, Nk, Hkv, D]; O [B, Nq, Hq, D]; causal and the window
  bottom-right aligned, as flashmlir.flash_attn_func.

* ``flashmlir::flash_attn_forward(Tensor q, Tensor k, Tensor v, float?
  softmax_scale=None, bool causal=False) -> (Tensor, Tensor)`` and
  ``flashmlir::flash_attn_backward(Tensor grad_out, Tensor q, Tensor k,
  Tensor v, Tensor out, Tensor lse, float? softmax_scale=None, bool
  causal=False, bool deterministic=False) -> (Tensor, Tensor, Tensor)``:
  training's pair in flash-attention's layout, O and its LSE [B, Hq, Nq]
  (f32), and dq, dk, dv from them by the backward kernel (fa-compile
  --backward: D 64 or 128, no mask or causal). On torch >= 2.4 the pair is
  flash_attn_forward's autograd formula (register_autograd), and
  flashmlir.torch_ops.flash_attn calls flash_attn_forward where its inputs
  require grad.

attention, flash_attn and flash_attn_with_kvcache are functional (they
allocate O, contiguous; the KV-cache call writes the cache in place) and
inference only (no autograd formula: a backward through them fails). The
real implementation is flashmlir.attention / flashmlir.flash_attn_func on
CUDA tensors (f16/bf16, D in {64, 128, 256}; views are read in place on
sm_90a, copied for sm_80); the fake (meta) implementation checks the shapes and gives O's
shape, dtype and device, which is all torch.compile needs to trace through.

On torch >= 2.4 they are torch.library.custom_op's with register_fake; on
older torch (back to Debian's 1.13) a torch.library.Library with CPU, CUDA
and Meta kernels, and an Autograd one that dispatches below autograd (and
refuses inputs that require grad): eager calls and meta/fake tensors work
there, in and outside inference_mode, and torch.compile (torch >= 2.0)
traces the Meta kernel. REGISTRATION says
which was used.
"""
import contextlib
import numbers
from typing import Optional

try:
    import torch
except ImportError as e:
    raise ImportError("flashmlir.torch_ops needs torch (the operators are "
                      "torch.library registrations)") from e

from . import runtime as _runtime

_API = getattr(torch, "library", None)
if hasattr(_API, "custom_op") and hasattr(_API, "register_fake"):
    REGISTRATION = "custom_op"
elif hasattr(_API, "Library"):
    REGISTRATION = "library"
else:
    raise ImportError(
        f"flashmlir.torch_ops: torch {torch.__version__} has neither "
        f"torch.library.custom_op nor torch.library.Library; the operators "
        f"need torch >= 1.13 (torch.compile needs >= 2.0)")

__all__ = ["REGISTRATION", "attention", "flash_attn",
           "flash_attn_forward", "flash_attn_backward",
           "flash_attn_with_kvcache"]

_NAMESPACE = "flashmlir"
# Given to both APIs, so the schemas are the same (custom_op would infer
# SymInt for the window's ints).
_SCHEMAS = {
    "attention": "(Tensor q, Tensor k, Tensor v, bool causal=False, "
                 "float? scale=None) -> Tensor",
    "flash_attn": "(Tensor q, Tensor k, Tensor v, float? softmax_scale=None, "
                  "bool causal=False, int window_left=-1, "
                  "int window_right=-1) -> Tensor",
    # flash_attn's forward and backward for training: O and the LSE, and
    # the gradients from them (torch >= 2.4 registers the pair as
    # flash_attn_forward's autograd formula).
    "flash_attn_forward": "(Tensor q, Tensor k, Tensor v, "
                          "float? softmax_scale=None, bool causal=False, "
                          "int window_left=-1, int window_right=-1) -> "
                          "(Tensor, Tensor)",
    "flash_attn_backward": "(Tensor grad_out, Tensor q, Tensor k, Tensor v, "
                           "Tensor out, Tensor lse, float? softmax_scale=None,"
                           " bool causal=False, bool deterministic=False, "
                           "int window_left=-1, int window_right=-1) -> "
                           "(Tensor, Tensor, Tensor)",
    # The cache is written in place where k and v are appended.
    "flash_attn_with_kvcache":
        "(Tensor q, Tensor(a!) k_cache, Tensor(b!) v_cache, Tensor? k=None, "
        "Tensor? v=None, Tensor? cache_seqlens=None, "
        "Tensor? block_table=None, float? softmax_scale=None, "
        "bool causal=False, int window_left=-1, int window_right=-1, "
        "float softcap=0.0, int num_splits=0) -> Tensor",
}
# The arguments each operator writes in place (custom_op's mutates_args).
_MUTATES = {"flash_attn_with_kvcache": ("k_cache", "v_cache")}


def _check(op, q, k, v, head_axis):
    """The shape rules both kernels and their launchers enforce, raised at
    trace time (a fake tensor has shapes but no data)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 4:
            raise _runtime.KernelArgumentError(
                f"flashmlir::{op}: {name} must have rank 4, got shape "
                f"{tuple(t.shape)}")
        if t.dtype not in (torch.float16, torch.bfloat16) or \
                t.dtype != q.dtype:
            raise _runtime.KernelArgumentError(
                f"flashmlir::{op}: q, k and v must all be float16 or all "
                f"bfloat16, got {q.dtype}, {k.dtype}, {v.dtype}")
        if t.device != q.device:
            raise _runtime.KernelArgumentError(
                f"flashmlir::{op}: q, k and v must be on one device, got "
                f"{q.device}, {k.device}, {v.device}")
    if k.shape != v.shape:
        raise _runtime.KernelArgumentError(
            f"flashmlir::{op}: k and v must have one shape, got "
            f"{tuple(k.shape)} and {tuple(v.shape)}")
    if q.shape[0] != k.shape[0] or q.shape[3] != k.shape[3]:
        raise _runtime.KernelArgumentError(
            f"flashmlir::{op}: q {tuple(q.shape)} and k {tuple(k.shape)} "
            f"differ in batch or head dim")
    if k.shape[head_axis] == 0 or q.shape[head_axis] % k.shape[head_axis]:
        raise _runtime.KernelArgumentError(
            f"flashmlir::{op}: query heads ({q.shape[head_axis]}) must be a "
            f"multiple of key/value heads ({k.shape[head_axis]})")


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
               causal: bool = False,
               scale: Optional[float] = None) -> torch.Tensor:
    import flashmlir
    # Views go through as they are: the sm_90a kernels read them in place,
    # flashmlir.attention copies them for the sm_80 kernel.
    return flashmlir.attention(q, k, v, causal=causal, scale=scale)


def _attention_fake(q, k, v, causal=False, scale=None):
    _check("attention", q, k, v, head_axis=1)
    return q.new_empty(q.shape)


def _flash_attn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                softmax_scale: Optional[float] = None, causal: bool = False,
                window_left: int = -1,
                window_right: int = -1) -> torch.Tensor:
    import flashmlir
    return flashmlir.flash_attn_func(
        q, k, v, softmax_scale=softmax_scale, causal=causal,
        window_size=(window_left, window_right))


def _flash_attn_fake(q, k, v, softmax_scale=None, causal=False,
                     window_left=-1, window_right=-1):
    _check("flash_attn", q, k, v, head_axis=2)
    return q.new_empty(q.shape)


def _mask(op, causal, window_left, window_right):
    """flash-attn's (causal, window_size) as the kernels take them:
    (causal, window, diagonal offset), refused as flash_attn_func refuses
    them (a window bounded on the left only, a negative reach)."""
    import flashmlir
    causal, window, offset, _ = flashmlir._flash_window(
        f"flashmlir::{op}", causal, (window_left, window_right), 0.0)
    return causal, window, offset


def _flash_attn_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                        softmax_scale: Optional[float] = None,
                        causal: bool = False, window_left: int = -1,
                        window_right: int = -1):
    import os
    import flashmlir
    _check("flash_attn_forward", q, k, v, head_axis=2)
    causal, window, offset = _mask("flash_attn_forward", causal, window_left,
                                   window_right)
    out, lse, _ = flashmlir._forward_with_lse(
        q, k, v, softmax_scale, causal,
        os.environ.get("FLASHMLIR_KERNEL_DIR"), window, offset)
    return out.transpose(1, 2).contiguous(), lse.contiguous()


def _flash_attn_forward_fake(q, k, v, softmax_scale=None, causal=False,
                             window_left=-1, window_right=-1):
    _check("flash_attn_forward", q, k, v, head_axis=2)
    _mask("flash_attn_forward", causal, window_left, window_right)
    b, nq, hq, _ = q.shape
    return (q.new_empty(q.shape[:3] + v.shape[3:]),
            q.new_empty((b, hq, nq), dtype=torch.float32))


def _flash_attn_backward(grad_out: torch.Tensor, q: torch.Tensor,
                         k: torch.Tensor, v: torch.Tensor,
                         out: torch.Tensor, lse: torch.Tensor,
                         softmax_scale: Optional[float] = None,
                         causal: bool = False, deterministic: bool = False,
                         window_left: int = -1, window_right: int = -1):
    import os
    import flashmlir
    _check("flash_attn_backward", q, k, v, head_axis=2)
    causal, window, offset = _mask("flash_attn_backward", causal, window_left,
                                   window_right)
    arch, _ = flashmlir._arch_and_dtype(q)
    grads = flashmlir._backward_from_lse(
        grad_out, q, k, v, out.transpose(1, 2), lse, softmax_scale, causal,
        arch, os.environ.get("FLASHMLIR_KERNEL_DIR"), deterministic, window,
        offset)
    return tuple(g.contiguous() for g in grads)


def _flash_attn_backward_fake(grad_out, q, k, v, out, lse, softmax_scale=None,
                              causal=False, deterministic=False,
                              window_left=-1, window_right=-1):
    _check("flash_attn_backward", q, k, v, head_axis=2)
    _mask("flash_attn_backward", causal, window_left, window_right)
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _flash_attn_with_kvcache(q: torch.Tensor, k_cache: torch.Tensor,
                             v_cache: torch.Tensor,
                             k: Optional[torch.Tensor] = None,
                             v: Optional[torch.Tensor] = None,
                             cache_seqlens: Optional[torch.Tensor] = None,
                             block_table: Optional[torch.Tensor] = None,
                             softmax_scale: Optional[float] = None,
                             causal: bool = False, window_left: int = -1,
                             window_right: int = -1, softcap: float = 0.0,
                             num_splits: int = 0) -> torch.Tensor:
    import flashmlir
    return flashmlir.flash_attn_with_kvcache(
        q, k_cache, v_cache, k=k, v=v, cache_seqlens=cache_seqlens,
        block_table=block_table, softmax_scale=softmax_scale, causal=causal,
        window_size=(window_left, window_right), softcap=softcap,
        num_splits=num_splits)


def _flash_attn_with_kvcache_fake(q, k_cache, v_cache, k=None, v=None,
                                  cache_seqlens=None, block_table=None,
                                  softmax_scale=None, causal=False,
                                  window_left=-1, window_right=-1,
                                  softcap=0.0, num_splits=0):
    op = "flash_attn_with_kvcache"
    for name, t in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)):
        if t.dim() != 4:
            raise _runtime.KernelArgumentError(
                f"flashmlir::{op}: {name} must have rank 4, got shape "
                f"{tuple(t.shape)}")
    if k_cache.shape != v_cache.shape or q.shape[3] != k_cache.shape[3]:
        raise _runtime.KernelArgumentError(
            f"flashmlir::{op}: k_cache {tuple(k_cache.shape)} and v_cache "
            f"{tuple(v_cache.shape)} must have one shape, with q's head dim "
            f"({q.shape[3]})")
    if q.shape[2] % k_cache.shape[2]:
        raise _runtime.KernelArgumentError(
            f"flashmlir::{op}: query heads ({q.shape[2]}) must be a "
            f"multiple of key/value heads ({k_cache.shape[2]})")
    return torch.empty(q.shape, dtype=q.dtype, device=q.device)


_IMPLS = {"attention": (_attention, _attention_fake),
          "flash_attn": (_flash_attn, _flash_attn_fake),
          "flash_attn_forward": (_flash_attn_forward,
                                 _flash_attn_forward_fake),
          "flash_attn_backward": (_flash_attn_backward,
                                  _flash_attn_backward_fake),
          "flash_attn_with_kvcache": (_flash_attn_with_kvcache,
                                      _flash_attn_with_kvcache_fake)}


def _register_custom_op():
    ops = {}
    for name, (impl, fake) in _IMPLS.items():
        op = torch.library.custom_op(f"{_NAMESPACE}::{name}",
                                     mutates_args=_MUTATES.get(name, ()),
                                     schema=_SCHEMAS[name])(impl)
        op.register_fake(fake)
        ops[name] = op
    ops["flash_attn_forward"].register_autograd(
        _forward_backward, setup_context=_forward_setup)
    return ops


def _forward_setup(ctx, inputs, output):
    """flash_attn_forward's autograd: what its backward reads (the LSE is
    an output for the backward, not a differentiable one)."""
    q, k, v, softmax_scale, causal, window_left, window_right = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse)
    ctx.softmax_scale, ctx.causal = softmax_scale, causal
    ctx.window = (window_left, window_right)
    if hasattr(ctx, "mark_non_differentiable"):
        ctx.mark_non_differentiable(lse)


def _forward_backward(ctx, grad_out, grad_lse):
    q, k, v, out, lse = ctx.saved_tensors
    dq, dk, dv = torch.ops.flashmlir.flash_attn_backward(
        grad_out.contiguous(), q, k, v, out, lse, ctx.softmax_scale,
        ctx.causal, False, *ctx.window)
    return dq, dk, dv, None, None, None, None


@contextlib.contextmanager
def _below_autograd():
    """Dispatch below the autograd keys for the calls inside (torch's
    AutoDispatchBelowAutograd guard: a context manager on newer torch, an
    object whose lifetime is the guard on 1.13)."""
    guard = torch._C._AutoDispatchBelowAutograd()
    if hasattr(guard, "__enter__"):
        with guard:
            yield
    else:
        try:
            yield
        finally:
            del guard


def _autograd_kernel(name):
    """The operator's kernel for the Autograd keys (torch.library.Library
    registration): the operators have no autograd formula, so a call with
    inputs that require grad is refused with a clear message; any other
    call (meta tensors outside inference_mode included, which the
    dispatcher otherwise refuses for want of an AutogradMeta kernel) is
    redispatched below autograd, to the CPU, CUDA or Meta kernel."""
    def kernel(*args, **kwargs):
        if torch.is_grad_enabled() and any(
                isinstance(a, torch.Tensor) and a.requires_grad
                for a in (*args, *kwargs.values())):
            raise _runtime.KernelArgumentError(
                f"flashmlir::{name} is inference only (no autograd formula):"
                f" call it under torch.no_grad() or torch.inference_mode(), "
                f"or on tensors that do not require grad")
        with _below_autograd():
            return getattr(torch.ops.flashmlir, name)(*args, **kwargs)
    return kernel


def _register_library():
    # Kept alive for the process: the registrations go with the object.
    global _LIBRARY
    _LIBRARY = torch.library.Library(_NAMESPACE, "DEF")
    for name, (impl, fake) in _IMPLS.items():
        _LIBRARY.define(name + _SCHEMAS[name])
        # CPU too, so a CPU tensor reaches the launcher's own message ("q
        # must be a CUDA tensor") instead of the dispatcher's.
        for key in ("CPU", "CUDA"):
            _LIBRARY.impl(name, impl, key)
        _LIBRARY.impl(name, fake, "Meta")
        # The Autograd alias key (AutogradCPU, AutogradCUDA, AutogradMeta,
        # ...): without it a meta tensor outside inference_mode fails in the
        # dispatcher ("Could not run ... with arguments from the
        # 'AutogradMeta' backend").
        _LIBRARY.impl(name, _autograd_kernel(name), "Autograd")
    return {}


_LIBRARY = None
_OPS = (_register_custom_op() if REGISTRATION == "custom_op"
        else _register_library())


def attention(q, k, v, causal=False, scale=None):
    """torch.ops.flashmlir.attention: [B, H, N, D] tensors, top-left
    causal, as flashmlir.attention."""
    return torch.ops.flashmlir.attention(q, k, v, causal, scale)


def flash_attn(q, k, v, softmax_scale=None, causal=False,
               window_size=(-1, -1)):
    """torch.ops.flashmlir.flash_attn: [B, N, H, D] tensors, bottom-right
    causal and window, as flashmlir.flash_attn_func. Where q, k or v
    requires grad (torch >= 2.4): torch.ops.flashmlir.flash_attn_forward,
    whose autograd formula is the backward kernel."""
    left, right = _window("flash_attn", window_size)
    if REGISTRATION == "custom_op" and torch.is_grad_enabled() and any(
            isinstance(t, torch.Tensor) and t.requires_grad
            for t in (q, k, v)):
        return torch.ops.flashmlir.flash_attn_forward(
            q, k, v, softmax_scale, causal, left, right)[0]
    return torch.ops.flashmlir.flash_attn(q, k, v, softmax_scale, causal,
                                          left, right)


def flash_attn_forward(q, k, v, softmax_scale=None, causal=False,
                       window_size=(-1, -1)):
    """torch.ops.flashmlir.flash_attn_forward: (O, LSE) of [B, N, H, D]
    tensors, causal and window_size as flashmlir.flash_attn_func;
    differentiable in q, k, v on torch >= 2.4."""
    left, right = _window("flash_attn_forward", window_size)
    return torch.ops.flashmlir.flash_attn_forward(q, k, v, softmax_scale,
                                                  causal, left, right)


def flash_attn_backward(grad_out, q, k, v, out, lse, softmax_scale=None,
                        causal=False, deterministic=False,
                        window_size=(-1, -1)):
    """torch.ops.flashmlir.flash_attn_backward: (dq, dk, dv) from
    flash_attn_forward's O and LSE (the same causal and window_size)."""
    left, right = _window("flash_attn_backward", window_size)
    return torch.ops.flashmlir.flash_attn_backward(
        grad_out, q, k, v, out, lse, softmax_scale, causal, deterministic,
        left, right)


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None,
                            cache_seqlens=None, block_table=None,
                            softmax_scale=None, causal=False,
                            window_size=(-1, -1), softcap=0.0, num_splits=0):
    """torch.ops.flashmlir.flash_attn_with_kvcache: flash-attention's KV-cache
    call as flashmlir.flash_attn_with_kvcache (k and v, when given, written
    into the cache in place), cache_seqlens an int32 tensor [B] (an int is
    made one on q's device)."""
    op = "flash_attn_with_kvcache"
    if isinstance(cache_seqlens, numbers.Integral) and \
            not isinstance(cache_seqlens, bool):
        cache_seqlens = torch.full((q.shape[0],), int(cache_seqlens),
                                   dtype=torch.int32, device=q.device)
    left, right = _window(op, window_size)
    if isinstance(softcap, bool) or not isinstance(softcap, numbers.Real):
        raise _runtime.KernelArgumentError(
            f"flashmlir::{op}: softcap must be a number, got {softcap!r}")
    return torch.ops.flashmlir.flash_attn_with_kvcache(
        q, k_cache, v_cache, k, v, cache_seqlens, block_table, softmax_scale,
        causal, left, right, float(softcap),
        _integer(op, "num_splits", num_splits))


def _integer(op, name, value):
    """An int argument of an operator: an integer, never a truncated float
    or a bool."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise _runtime.KernelArgumentError(
            f"flashmlir::{op}: {name} must be an integer, got {value!r}")
    return int(value)


def _window(op, window_size):
    try:
        left, right = window_size
    except (TypeError, ValueError):
        raise _runtime.KernelArgumentError(
            f"flashmlir::{op}: window_size must be a pair (left, right) of "
            f"integers, got {window_size!r}") from None
    return (_integer(op, "window_size", left),
            _integer(op, "window_size", right))
