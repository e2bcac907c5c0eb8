"""flashmlir.torch_ops: the attention as torch operators (issue 15).

On the host (any torch from Debian's 1.13 on): the registration, the
schemas, the fake (meta) implementation's shapes and errors, the real
implementation reaching the launcher, and a clear ImportError where torch
or its torch.library API is missing. Marked `gpu` (the H200, recent torch):
torch.compile(fullgraph=True) of models calling the operators, checked to
hold the operator in one graph and to match torch's math SDPA by
flash-attention's 2x rule; torch.library.opcheck where torch has it:

    FLASHMLIR_KERNEL_DIR=.cubins python3 -m pytest -m gpu \\
        python/tests/test_torch_ops.py
"""
import math
import subprocess
import sys

import pytest

from conftest import ROOT


@pytest.fixture(scope="module")
def ops():
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(ROOT / "python"))
    import flashmlir.torch_ops as module
    return torch, module


def _meta(torch, shape, dtype="float16", device="meta"):
    return torch.empty(shape, dtype=getattr(torch, dtype), device=device)


def test_registration(ops):
    torch, t = ops
    modern = hasattr(torch.library, "custom_op") and \
        hasattr(torch.library, "register_fake")
    assert t.REGISTRATION == ("custom_op" if modern else "library")
    assert str(torch.ops.flashmlir.attention.default._schema) == (
        "flashmlir::attention(Tensor q, Tensor k, Tensor v, "
        "bool causal=False, float? scale=None) -> Tensor")
    assert str(torch.ops.flashmlir.flash_attn.default._schema) == (
        "flashmlir::flash_attn(Tensor q, Tensor k, Tensor v, float? "
        "softmax_scale=None, bool causal=False, int window_left=-1, "
        "int window_right=-1) -> Tensor")

    assert str(torch.ops.flashmlir.flash_attn_with_kvcache.default._schema) \
        == ("flashmlir::flash_attn_with_kvcache(Tensor q, Tensor(a!) "
            "k_cache, Tensor(b!) v_cache, Tensor? k=None, Tensor? v=None, "
            "Tensor? cache_seqlens=None, Tensor? block_table=None, float? "
            "softmax_scale=None, bool causal=False, int window_left=-1, "
            "int window_right=-1, float softcap=0., int num_splits=0) -> "
            "Tensor")


def test_import_flashmlir_registers_the_ops():
    """`import flashmlir` alone makes torch.ops.flashmlir.* available (a
    fresh interpreter, no import of flashmlir.torch_ops)."""
    pytest.importorskip("torch")
    code = ("import flashmlir, torch; "
            "print(sorted(n for n in ('attention', 'flash_attn', "
            "'flash_attn_with_kvcache') "
            "if hasattr(torch.ops.flashmlir, n)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, cwd=str(ROOT / "python"), check=True)
    assert out.stdout.strip() == \
        "['attention', 'flash_attn', 'flash_attn_with_kvcache']"


@pytest.mark.parametrize("paged", [False, True])
def test_kvcache_fake_shapes(ops, paged):
    """The KV-cache operator's fake: O has q's shape; the cache shapes are
    checked (k_cache and v_cache alike, q's head dim, heads dividing)."""
    torch, t = ops
    q = _meta(torch, (4, 1, 32, 128))                 # [B, Nq, Hq, D]
    cache = _meta(torch, (40, 64, 8, 128) if paged else (4, 512, 8, 128))
    lens = _meta(torch, (4,), "int32")
    table = _meta(torch, (4, 10), "int32") if paged else None
    with torch.inference_mode():
        out = t.flash_attn_with_kvcache(q, cache, cache, cache_seqlens=lens,
                                        block_table=table, causal=True)
        assert (out.shape, out.dtype, out.device.type) == \
            (q.shape, q.dtype, "meta")
        with pytest.raises(Exception, match="multiple of key/value heads"):
            t.flash_attn_with_kvcache(_meta(torch, (4, 1, 12, 128)), cache,
                                      cache, cache_seqlens=lens)
        with pytest.raises(Exception, match="must have one shape"):
            t.flash_attn_with_kvcache(q, cache, _meta(torch, (4, 512, 8, 64)),
                                      cache_seqlens=lens)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_fake_shapes(ops, dtype):
    torch, t = ops
    q = _meta(torch, (2, 8, 100, 128), dtype)     # [B, Hq, Nq, D]
    kv = _meta(torch, (2, 2, 77, 128), dtype)     # [B, Hkv, Nk, D]
    # In inference mode (outside it: test_strict_options.py).
    with torch.inference_mode():
        out = torch.ops.flashmlir.attention(q, kv, kv, True, None)
        assert (out.shape, out.dtype, out.device.type) == \
            (q.shape, q.dtype, "meta")
        assert out.is_contiguous()
        # flash-attention's layout, from non-contiguous views.
        qt, kt = q.transpose(1, 2), kv.transpose(1, 2)
        out = t.flash_attn(qt, kt, kt, causal=True, window_size=(16, 0))
        assert out.shape == (2, 100, 8, 128) and out.is_contiguous()
        assert t.attention(q, kv, kv, scale=0.5).shape == q.shape


def test_training_pair_fake_shapes(ops):
    """flash_attn_forward gives O (flash-attention's layout) and the LSE
    [B, Hq, Nq] in f32; flash_attn_backward gives q's, k's and v's shapes."""
    torch, t = ops
    assert str(torch.ops.flashmlir.flash_attn_forward.default._schema) == (
        "flashmlir::flash_attn_forward(Tensor q, Tensor k, Tensor v, float? "
        "softmax_scale=None, bool causal=False, int window_left=-1, "
        "int window_right=-1) -> (Tensor, Tensor)")
    assert str(torch.ops.flashmlir.flash_attn_backward.default._schema) == (
        "flashmlir::flash_attn_backward(Tensor grad_out, Tensor q, Tensor k, "
        "Tensor v, Tensor out, Tensor lse, float? softmax_scale=None, "
        "bool causal=False, bool deterministic=False, int window_left=-1, "
        "int window_right=-1) -> (Tensor, Tensor, Tensor)")
    q = _meta(torch, (2, 100, 8, 64), "bfloat16")     # [B, Nq, Hq, D]
    kv = _meta(torch, (2, 77, 2, 64), "bfloat16")     # [B, Nk, Hkv, D]
    with torch.inference_mode():
        out, lse = t.flash_attn_forward(q, kv, kv, causal=True)
        assert out.shape == q.shape and out.dtype == q.dtype
        assert lse.shape == (2, 8, 100) and lse.dtype == torch.float32
        dq, dk, dv = t.flash_attn_backward(q, q, kv, kv, out, lse,
                                           causal=True)
        assert (dq.shape, dk.shape, dv.shape) == (q.shape, kv.shape,
                                                   kv.shape)
        with pytest.raises(Exception, match="multiple of key/value heads"):
            t.flash_attn_forward(q, _meta(torch, (2, 77, 3, 64), "bfloat16"),
                                 _meta(torch, (2, 77, 3, 64), "bfloat16"))
        # A sliding window: the same shapes; one bounded on the left only
        # is refused at trace time, as flash_attn_func refuses it.
        out, lse = t.flash_attn_forward(q, kv, kv, window_size=(32, 0))
        assert out.shape == q.shape and lse.shape == (2, 8, 100)
        dq, _, _ = t.flash_attn_backward(q, q, kv, kv, out, lse,
                                         window_size=(32, 0))
        assert dq.shape == q.shape
        with pytest.raises(Exception, match="bounded on the left only"):
            t.flash_attn_forward(q, kv, kv, window_size=(32, -1))


def test_fake_tensor_mode(ops):
    torch, t = ops
    from torch._subclasses import FakeTensorMode
    with FakeTensorMode():
        q = torch.empty(1, 300, 4, 64, dtype=torch.bfloat16)
        kv = torch.empty(1, 200, 1, 64, dtype=torch.bfloat16)
        out = torch.ops.flashmlir.flash_attn(q, kv, kv, None, True, -1, -1)
        assert type(out).__name__ == "FakeTensor"
        assert out.shape == q.shape and out.dtype == torch.bfloat16


@pytest.mark.parametrize("q,k,v,message", [
    ((2, 8, 10, 64), (2, 3, 10, 64), None, r"query heads \(8\) must be a "
     r"multiple of key/value heads \(3\)"),
    ((2, 8, 10), (2, 8, 10, 64), None, "q must have rank 4"),
    ((2, 8, 10, 64), (2, 8, 10, 64), (2, 8, 11, 64),
     "k and v must have one shape"),
    ((2, 8, 10, 64), (1, 8, 10, 64), None, "differ in batch or head dim"),
    ((2, 8, 10, 64), (2, 8, 10, 128), None, "differ in batch or head dim"),
])
def test_fake_rejects_bad_shapes(ops, q, k, v, message):
    torch, t = ops
    from flashmlir.runtime import KernelArgumentError
    q, k = _meta(torch, q), _meta(torch, k)
    v = k if v is None else _meta(torch, v)
    with torch.inference_mode(), \
            pytest.raises(KernelArgumentError, match=message):
        torch.ops.flashmlir.attention(q, k, v, False, None)


def test_fake_rejects_bad_dtypes(ops):
    torch, t = ops
    from flashmlir.runtime import KernelArgumentError
    q = _meta(torch, (1, 2, 8, 64))
    with torch.inference_mode():
        with pytest.raises(KernelArgumentError, match="all be float16 or all"):
            t.attention(q, _meta(torch, (1, 2, 8, 64), "bfloat16"), q)
        f32 = _meta(torch, (1, 2, 8, 64), "float32")
        with pytest.raises(KernelArgumentError, match="all be float16 or all"):
            t.attention(f32, f32, f32)


def test_the_real_implementation_is_the_launcher(ops):
    torch, t = ops
    from flashmlir.runtime import KernelArgumentError
    q = torch.zeros(1, 2, 8, 64, dtype=torch.float16)
    with pytest.raises(KernelArgumentError, match="must be a CUDA tensor"):
        torch.ops.flashmlir.attention(q, q, q, False, None)
    with pytest.raises(KernelArgumentError, match="must be a CUDA tensor"):
        t.flash_attn(q, q, q)


_STUB = """
import sys, types
{setup}
sys.path.insert(0, {python!r})
try:
    import flashmlir.torch_ops
except ImportError as e:
    print("ImportError:", e)
"""


@pytest.mark.parametrize("setup,message", [
    ("sys.modules['torch'] = None", "flashmlir.torch_ops needs torch"),
    ("torch = types.ModuleType('torch'); torch.__version__ = '0.4.1'; "
     "torch.library = types.ModuleType('torch.library'); "
     "sys.modules['torch'] = torch",
     "torch 0.4.1 has neither torch.library.custom_op nor "
     "torch.library.Library"),
])
def test_without_torch_or_its_api(setup, message):
    out = subprocess.run(
        [sys.executable, "-c",
         _STUB.format(setup=setup, python=str(ROOT / "python"))],
        capture_output=True, text=True, check=True)
    assert message in out.stdout, out.stdout + out.stderr


# --- On the GPU -------------------------------------------------------------

@pytest.fixture(scope="module")
def gpu():
    import torch  # a gpu-marked run needs torch: a missing one fails
    assert torch.cuda.is_available(), "gpu tests need a CUDA device"
    if not hasattr(torch, "compile"):
        pytest.fail(f"torch {torch.__version__} has no torch.compile")
    sys.path.insert(0, str(ROOT / "python"))
    import flashmlir.torch_ops as module
    return torch, module


def _math_sdpa(torch, q, k, v, mask, scale):
    """torch's math SDPA on [B, H, N, D] (K/V heads repeated for GQA)."""
    import torch.nn.functional as F
    group = q.shape[1] // k.shape[1]
    k, v = (x.repeat_interleave(group, 1) for x in (k, v))
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        context = sdpa_kernel([SDPBackend.MATH])
    except ImportError:
        context = torch.backends.cuda.sdp_kernel(
            enable_flash=False, enable_math=True, enable_mem_efficient=False)
    with context:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                              scale=scale)


def _two_x_rule(torch, out, q, k, v, mask, scale):
    """flash-attention's rule: the error against a float64 reference at most
    twice that of torch's math SDPA in the input precision."""
    ref = _math_sdpa(torch, q.double(), k.double(), v.double(), mask, scale)
    low = _math_sdpa(torch, q, k, v, mask, scale)
    err = ((out.double() - ref).norm() / ref.norm()).item()
    base = ((low.double() - ref).norm() / ref.norm()).item()
    assert math.isfinite(err) and err <= 2 * base + 1e-6, (err, base)


def _causal_mask(torch, nq, nk, bottom_right):
    """True where query i sees key j (top-left: j <= i; bottom-right:
    j <= i + nk - nq)."""
    i = torch.arange(nq, device="cuda")[:, None]
    j = torch.arange(nk, device="cuda")[None, :]
    return j <= i + (nk - nq if bottom_right else 0)


def _compiled(torch, model, backend):
    """torch.compile(model, fullgraph=True) (a graph break raises) with a
    backend that records the graphs it is given before `backend` runs
    them."""
    graphs = []

    def record(gm, example_inputs):
        graphs.append(gm)
        if backend == "eager":
            return gm.forward
        from torch._dynamo.backends.registry import lookup_backend
        return lookup_backend(backend)(gm, example_inputs)

    torch._dynamo.reset()
    return torch.compile(model, backend=record, fullgraph=True), graphs


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_compiled_attention_model(gpu, backend, dtype):
    """A model in torch's [B, N, H, D] -> [B, H, N, D] idiom (views that are
    not contiguous), the operator between projections, two sequence lengths
    (the second traced with dynamic shapes)."""
    torch, t = gpu
    dt = getattr(torch, dtype)
    hq, hkv, d = 8, 2, 128

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q = torch.nn.Linear(hq * d, hq * d, bias=False)
            self.kv = torch.nn.Linear(hq * d, 2 * hkv * d, bias=False)

        def heads(self, x):
            b, n, _ = x.shape
            q = self.q(x).view(b, n, hq, d).transpose(1, 2)
            k, v = self.kv(x).view(b, n, 2, hkv, d).unbind(2)
            return q, k.transpose(1, 2), v.transpose(1, 2)

        def forward(self, x):
            q, k, v = self.heads(x)
            o = torch.ops.flashmlir.attention(q, k, v, True, None)
            # The heads too: the reference is computed on the very q, k, v
            # the compiled graph made.
            return o.transpose(1, 2).flatten(2) * 2.0, q, k, v

    torch.manual_seed(0)
    model = Block().to("cuda", dt).eval()
    compiled, graphs = _compiled(torch, model, backend)
    with torch.no_grad():
        for n in (256, 300):
            x = torch.randn(2, n, hq * d, device="cuda", dtype=dt)
            out, q, k, v = compiled(x)
            assert out.shape == (2, n, hq * d) and out.dtype == dt
            o = (out / 2.0).unflatten(2, (hq, d)).transpose(1, 2)
            _two_x_rule(torch, o, q, k, v, _causal_mask(torch, n, n, False),
                        1 / math.sqrt(d))
    assert graphs, "the backend saw no graph"
    for gm in graphs:
        assert "flashmlir.attention" in str(gm.graph), gm.graph


@pytest.mark.gpu
@pytest.mark.parametrize("nq,nk", [(300, 300), (200, 300)])
def test_compiled_flash_attn(gpu, nq, nk):
    """flash-attention's layout and its bottom-right causal (a KV cache when
    Nq < Nk), compiled by inductor in one graph."""
    torch, t = gpu
    torch.manual_seed(nq + nk)
    b, hq, hkv, d = 2, 8, 2, 128
    q = torch.randn(b, nq, hq, d, device="cuda", dtype=torch.float16)
    k = torch.randn(b, nk, hkv, d, device="cuda", dtype=torch.float16)
    v = torch.randn(b, nk, hkv, d, device="cuda", dtype=torch.float16)

    def f(q, k, v):
        return torch.ops.flashmlir.flash_attn(q * 1.0, k, v, None, True, -1,
                                              -1) + 0.0

    compiled, graphs = _compiled(torch, f, "inductor")
    out = compiled(q, k, v)
    assert out.shape == q.shape
    assert len(graphs) == 1 and "flashmlir.flash_attn" in str(graphs[0].graph)
    bhnd = [x.transpose(1, 2) for x in (q, k, v)]
    _two_x_rule(torch, out.transpose(1, 2), *bhnd,
                _causal_mask(torch, nq, nk, True), 1 / math.sqrt(d))


@pytest.mark.gpu
def test_opcheck(gpu):
    """torch.library.opcheck: schema, fake implementation (against the real
    one's outputs), and tracing through AOTAutograd."""
    torch, t = gpu
    if not hasattr(torch.library, "opcheck"):
        pytest.skip(f"torch {torch.__version__} has no torch.library.opcheck")
    q = torch.randn(1, 4, 128, 64, device="cuda", dtype=torch.float16)
    kv = torch.randn(1, 2, 128, 64, device="cuda", dtype=torch.float16)
    torch.library.opcheck(torch.ops.flashmlir.attention.default,
                          (q, kv, kv, True, 0.1))
    torch.library.opcheck(torch.ops.flashmlir.flash_attn.default,
                          (q.transpose(1, 2), kv.transpose(1, 2),
                           kv.transpose(1, 2), None, False, -1, -1))


@pytest.mark.gpu
def test_training_pair_autograd_and_opcheck(gpu):
    """torch >= 2.4: flash_attn_forward's autograd formula is the backward
    kernel (gradients within the 2x rule of torch's math attention), and
    opcheck passes on both ops (schema, fakes, autograd registration,
    AOTAutograd)."""
    torch, t = gpu
    if t.REGISTRATION != "custom_op":
        pytest.skip(f"torch {torch.__version__}: no register_autograd")
    torch.manual_seed(3)
    q = torch.randn(2, 96, 8, 64, device="cuda", dtype=torch.float16)
    kv = torch.randn(2, 160, 2, 64, device="cuda", dtype=torch.float16)
    do = torch.randn_like(q)
    x = [q.clone().requires_grad_(), kv.clone().requires_grad_(),
         kv.clone().requires_grad_()]
    out = t.flash_attn(*x, causal=True)
    grads = torch.autograd.grad(out, x, do)

    def reference(q, k, v, dtype):
        q, k, v = (y.detach().to(dtype).requires_grad_() for y in (q, k, v))
        qh, kh, vh = (y.transpose(1, 2) for y in (q, k, v))
        kh, vh = kh.repeat_interleave(4, 1), vh.repeat_interleave(4, 1)
        s = (qh @ kh.transpose(-1, -2)) / 8.0
        i = torch.arange(96, device="cuda")[:, None] + 160 - 96
        j = torch.arange(160, device="cuda")[None, :]
        s = s.masked_fill(j > i, float("-inf"))
        o = (torch.softmax(s, -1) @ vh).transpose(1, 2)
        return torch.autograd.grad(o, (q, k, v), do.to(dtype))

    ref = reference(q, kv, kv, torch.float64)
    pt = reference(q, kv, kv, torch.float16)
    for a, r, p in zip(grads, ref, pt):
        err = (a.double() - r).abs().max().item()
        assert err <= 2 * (p.double() - r).abs().max().item() + 1e-4
    if hasattr(torch.library, "opcheck"):
        torch.library.opcheck(torch.ops.flashmlir.flash_attn_forward.default,
                              (x[0], x[1], x[2], None, True))
        o, lse = t.flash_attn_forward(q, kv, kv, causal=True)
        torch.library.opcheck(torch.ops.flashmlir.flash_attn_backward.default,
                              (do, q, kv, kv, o, lse, None, True, False))
        # A sliding window (flash-attn's window_size = (48, 0)) through
        # both ops and the autograd formula.
        torch.library.opcheck(torch.ops.flashmlir.flash_attn_forward.default,
                              (x[0], x[1], x[2], None, True, 48, 0))


@pytest.mark.gpu
def test_compiled_decode_step(gpu):
    """A decode step (append the new k, v to a paged cache, attend) compiled
    with fullgraph=True: one graph holding the KV-cache operator, the cache
    written in place, O within flash-attention's 2x rule of the math
    reference over the grown cache."""
    torch, t = gpu
    torch.manual_seed(5)
    b, hq, hkv, d, page, pages = 2, 32, 8, 128, 64, 16
    k_cache = torch.randn(pages * b, page, hkv, d, device="cuda",
                          dtype=torch.float16)
    v_cache = torch.randn_like(k_cache)
    table = torch.arange(pages * b, device="cuda", dtype=torch.int32).view(
        b, pages)
    lens = torch.tensor([300, 517], device="cuda", dtype=torch.int32)
    q = torch.randn(b, 1, hq, d, device="cuda", dtype=torch.float16)
    k_new = torch.randn(b, 1, hkv, d, device="cuda", dtype=torch.float16)
    v_new = torch.randn_like(k_new)

    def step(q, k_new, v_new, lens):
        return torch.ops.flashmlir.flash_attn_with_kvcache(
            q * 1.0, k_cache, v_cache, k_new, v_new, lens, table, None, True,
            -1, -1, 0.0, 0)

    compiled, graphs = _compiled(torch, step, "inductor")
    out = compiled(q, k_new, v_new, lens)
    assert len(graphs) == 1 and \
        "flashmlir.flash_attn_with_kvcache" in str(graphs[0].graph)
    rows = k_cache[table.long()].flatten(1, 2)
    vrows = v_cache[table.long()].flatten(1, 2)
    for i, n in enumerate((lens + 1).tolist()):
        assert torch.equal(rows[i, n - 1], k_new[i, 0])
        kb = rows[i:i + 1, :n].transpose(1, 2)
        vb = vrows[i:i + 1, :n].transpose(1, 2)
        _two_x_rule(torch, out[i:i + 1].transpose(1, 2),
                    q[i:i + 1].transpose(1, 2), kb, vb, None,
                    1 / math.sqrt(d))
