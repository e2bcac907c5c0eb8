"""The backward kernel's launcher (flashmlir.backward.BackwardKernel) on
the artefacts of fa-compile --backward: its metadata checks on the host, and
(gpu) its gradients against torch's float64 autograd by flash-attn's 2x
rule."""

import json
import math
import os
import subprocess

import pytest


@pytest.fixture(scope="module")
def artefact(build_dir, tmp_path_factory):
    """A backward kernel compiled for sm_90a (D 64, f16, causal)."""
    out = tmp_path_factory.mktemp("bwd") / "k"
    subprocess.run([str(build_dir / "bin" / "fa-compile"), "--backward",
                    "--arch", "sm_90a", "--head-dim", "64", "--causal",
                    "-o", str(out)], check=True, capture_output=True)
    return (out.with_suffix(".cubin").read_bytes(),
            json.loads(out.with_suffix(".json").read_text()))


def test_loads_its_metadata(flashmlir, artefact):
    from flashmlir.backward import BackwardKernel
    cubin, meta = artefact
    kernel = BackwardKernel(cubin, meta)
    assert kernel.name == "fa2_bwd_sm80_d64_br64_bc64_f16_causal"
    assert kernel.meta["grid"] == {"x": "ceil(Nk / block_c)", "y": "Hkv",
                                   "z": "B"}
    assert [p["name"] for p in meta["params"]] == [
        "q", "k", "v", "lse", "do", "row_dots", "dq_accum", "dk", "dv",
        "Hq", "Hkv", "Nq", "Nk", "scale"]


@pytest.mark.parametrize("field, value, message", [
    ("format", "flash-mlir-kernel-1", "expected 'flash-mlir-backward-2'"),
    ("format", "flash-mlir-backward-1", "expected 'flash-mlir-backward-2'"),
    ("preprocess", "row_dots = rowsum(do * o)", "'preprocess' must be an object"),
    ("convert", None, "'convert' must be an object"),
    ("dtype", "e4m3", "dtype must be f16 or bf16"),
    ("head_dim", 96, "head_dim must be 64 or 128"),
    ("causal", 1, "'causal' must be true or false"),
    ("block", [128, 1], r"bad block \[128, 1\]: three integers"),
    ("shared_memory_bytes", -1, "'shared_memory_bytes' must be an integer in"),
    ("shared_memory_bytes", 300000,
     "shared_memory_bytes must be a positive int of at most 232448"),
    ("arch", None, "'arch' must be a string"),
    ("scale", float("nan"), "not JSON data"),
    ("scale", -1.0, "'scale' must be a number in"),
    ("grid", {"x": "ceil(Nk / block_w)", "y": "Hkv", "z": "B"},
     "unknown name 'block_w'"),
    ("grid", {"x": 1, "y": 1}, "grid has no 'z'"),
])
def test_refuses_bad_metadata(flashmlir, artefact, field, value, message):
    from flashmlir.backward import BackwardKernel
    from flashmlir.runtime import MetadataError
    cubin, meta = artefact
    bad = dict(meta, **{field: value})
    with pytest.raises(MetadataError, match=message.replace("(", r"\(")):
        BackwardKernel(cubin, bad)


def test_lists_its_row_kernels(flashmlir, artefact):
    """The preprocess and dQ's conversion are kernels of the same cubin, a
    CTA per 64 query rows, their parameters by name."""
    _, meta = artefact
    for what, names in (("preprocess", ["o", "do", "row_dots", "dq_accum",
                                        "Hq", "Nq"]),
                        ("convert", ["dq_accum", "dq", "Hq", "Nq"])):
        rows = meta[what]
        assert rows["kernel"] == f"fa2_bwd_sm80_d64_br64_bc64_f16_causal_{what}"
        assert rows["grid"] == {"x": "ceil(Nq / 64)", "y": "Hq", "z": "B"}
        assert rows["block"] == [128, 1, 1]
        assert [p["name"] for p in rows["params"]] == names


@pytest.mark.parametrize("what, field, value, message", [
    ("preprocess", "kernel", "fa2_bwd_sm80_d64_br64_bc64_f16_causal",
     "preprocess: 'kernel' must name another kernel of the cubin"),
    ("convert", "kernel", "", "convert: 'kernel' must name another kernel"),
    ("convert", "block", [2048, 1, 1],
     "bad convert: block"),
    ("preprocess", "grid", {"x": "ceil(Nq / rows)", "y": "Hq", "z": "B"},
     "preprocess: grid: .*unknown name 'rows'"),
    ("convert", "params", [{"name": "dq", "kind": "pointer"}],
     "convert: params must be each of"),
    ("preprocess", "params", [{"name": "dq_semaphores", "kind": "pointer"}],
     "preprocess: unknown parameter"),
])
def test_refuses_bad_row_kernels(flashmlir, artefact, what, field, value,
                                 message):
    from flashmlir.backward import BackwardKernel
    from flashmlir.runtime import MetadataError
    cubin, meta = artefact
    bad = dict(meta, **{what: dict(meta[what], **{field: value})})
    with pytest.raises(MetadataError, match=message):
        BackwardKernel(cubin, bad)


def test_refuses_unknown_or_missing_params(flashmlir, artefact):
    from flashmlir.backward import BackwardKernel
    from flashmlir.runtime import MetadataError
    cubin, meta = artefact
    extra = dict(meta, params=meta["params"] + [
        {"name": "dsinks", "kind": "pointer"}])
    with pytest.raises(MetadataError, match="unknown parameter"):
        BackwardKernel(cubin, extra)
    missing = dict(meta, params=meta["params"][:-1])
    with pytest.raises(MetadataError, match="params must be each of"):
        BackwardKernel(cubin, missing)
    wrong = dict(meta, params=[dict(p, kind="i32") if p["name"] == "scale"
                               else p for p in meta["params"]])
    with pytest.raises(MetadataError, match="'scale' must be a f32"):
        BackwardKernel(cubin, wrong)


def test_forward_launcher_refuses_it(flashmlir, artefact):
    """A backward kernel's metadata is not a forward kernel's: the forward
    launcher says so by the format, before anything launches."""
    from flashmlir.runtime import Kernel, MetadataError
    cubin, meta = artefact
    with pytest.raises(MetadataError, match="flash-mlir-backward-2"):
        Kernel(cubin, meta)


def test_refuses_bad_tensors_before_launching(flashmlir, artefact):
    """Argument checks run before any driver call (CPU tensors here)."""
    import torch
    from flashmlir.backward import BackwardKernel
    from flashmlir.runtime import KernelArgumentError
    cubin, meta = artefact
    kernel = BackwardKernel(cubin, meta)
    q = torch.zeros(1, 2, 8, 64, dtype=torch.float16)
    lse = torch.zeros(1, 2, 8)
    with pytest.raises(KernelArgumentError, match="must be a CUDA tensor"):
        kernel(q, q, q, q, lse, q)
    with pytest.raises(KernelArgumentError, match="must be a torch.Tensor"):
        kernel(q, q, q, q, lse, "dO")


def _assert_two_x_rule(torch, ours, attention, inputs, do, dtype):
    """flash-attn's rule: each of `ours` (dq, dk, dv) within twice the error
    of torch's own `attention` in `dtype` (plus 1e-4), both against float64
    autograd of it, on `inputs` (q, k, v) and the loss gradient `do`."""
    def grads(dt):
        x = [t.detach().to(dt).requires_grad_() for t in inputs]
        return torch.autograd.grad(attention(*x), x, do.to(dt))

    ref, pt = grads(torch.float64), grads(dtype)
    for name, a, r, p in zip(("dq", "dk", "dv"), ours, ref, pt):
        assert a.shape == r.shape, f"{name}: {a.shape} != {r.shape}"
        err = (a.double() - r).abs().max().item()
        bound = 2 * (p.double() - r).abs().max().item() + 1e-4
        assert err <= bound, f"{name}: {err} > {bound}"


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal, bottom_right",
                         [(False, False), (True, False), (True, True)])
@pytest.mark.parametrize("shape", [(2, 4, 2, 77, 131), (1, 4, 1, 131, 64),
                                   (2, 2, 2, 256, 256)])
def test_gradients_two_x_rule(cuda_flashmlir, dtype, d, causal, bottom_right,
                              shape):
    """dQ, dK, dV within twice torch's own error in the dtype (against
    float64 autograd), ragged and grouped-query shapes: the kernels of
    bench/build_backward_kernels.sh in $FLASHMLIR_BACKWARD_KERNEL_DIR."""
    torch, flashmlir = cuda_flashmlir
    from flashmlir.backward import BackwardKernel
    folder = os.environ.get("FLASHMLIR_BACKWARD_KERNEL_DIR", ".bwd")
    name = flashmlir.kernel_file_name("sm_90a", d, dtype, causal,
                                      bottom_right=bottom_right,
                                      backward=True)
    kernel = BackwardKernel.load(os.path.join(folder, name))
    torch.manual_seed(0)
    tdt = {"f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    b, hq, hkv, nq, nk = shape
    q = torch.randn(b, hq, nq, d, device="cuda", dtype=tdt)
    k = torch.randn(b, hkv, nk, d, device="cuda", dtype=tdt)
    v = torch.randn(b, hkv, nk, d, device="cuda", dtype=tdt)
    do = torch.randn(b, hq, nq, d, device="cuda", dtype=tdt)
    scale = 1 / math.sqrt(d)
    shift = nk - nq if bottom_right else 0
    i = torch.arange(nq, device="cuda")[:, None]
    j = torch.arange(nk, device="cuda")[None, :]
    mask = (j <= i + shift) if causal else torch.ones_like(i + j,
                                                          dtype=torch.bool)

    def attention(q, k, v):
        g = q.shape[1] // k.shape[1]
        s = (q @ k.repeat_interleave(g, 1).transpose(-1, -2)) * scale
        s = s.masked_fill(~mask, float("-inf"))
        p = torch.softmax(s, -1)
        p = torch.where(mask.any(-1, keepdim=True), p, torch.zeros_like(p))
        return p @ v.repeat_interleave(g, 1), torch.logsumexp(s, -1)

    o, lse = attention(q.float(), k.float(), v.float())
    ours = kernel(q, k, v, o.to(tdt).contiguous(), lse.contiguous(), do,
                  scale=scale)

    _assert_two_x_rule(torch, ours, lambda *x: attention(*x)[0], (q, k, v),
                       do, tdt)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", [(2, 96, 160, 8, 2), (1, 128, 128, 4, 4)])
def test_flash_attn_func_is_differentiable(cuda_flashmlir, dtype, d, causal,
                                           shape):
    """flash_attn_func on inputs that require grad: the forward kernel
    saves its LSE, the backward kernel gives dq, dk, dv ([B, N, H, D], the
    inputs' layout) within the 2x rule of torch's math attention (causal
    bottom-right aligned where Nq != Nk, as flash-attn's)."""
    torch, flashmlir = cuda_flashmlir
    torch.manual_seed(1)
    tdt = {"f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    b, nq, nk, hq, hkv = shape
    q = torch.randn(b, nq, hq, d, device="cuda", dtype=tdt)
    k = torch.randn(b, nk, hkv, d, device="cuda", dtype=tdt)
    v = torch.randn(b, nk, hkv, d, device="cuda", dtype=tdt)
    do = torch.randn(b, nq, hq, d, device="cuda", dtype=tdt)
    scale = 1 / math.sqrt(d)

    def reference(q, k, v):
        g = q.shape[2] // k.shape[2]
        qh, kh, vh = (t.transpose(1, 2) for t in (q, k, v))
        s = (qh @ kh.repeat_interleave(g, 1).transpose(-1, -2)) * scale
        if causal:
            i = torch.arange(nq, device="cuda")[:, None] + nk - nq
            j = torch.arange(nk, device="cuda")[None, :]
            s = s.masked_fill(j > i, float("-inf"))
        p = torch.softmax(s, -1).nan_to_num(0.0)
        return (p @ vh.repeat_interleave(g, 1)).transpose(1, 2)

    x = [t.clone().requires_grad_() for t in (q, k, v)]
    out = flashmlir.flash_attn_func(*x, causal=causal)
    assert out.requires_grad
    ours = torch.autograd.grad(out, x, do)

    _assert_two_x_rule(torch, ours, reference, (q, k, v), do, tdt)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("window_size, nq", [((96, 0), 300), ((100, 37), 300),
                                             ((96, 0), 700)])
@pytest.mark.parametrize("deterministic", [False, True])
def test_flash_attn_func_window_gradients(cuda_flashmlir, dtype, d,
                                          window_size, nq, deterministic):
    """A sliding window's gradients (flash-attn's window_size = (left,
    right): query i at key position i' = i + Nk - Nq sees keys
    i' - left .. i' + right): within the 2x rule of torch's math attention
    with the same mask, grouped-query heads, query blocks that see no key
    and key blocks no query sees; Nq == Nk takes the top-left kernels (the
    kernels of bench/build_backward_kernels.sh)."""
    torch, flashmlir = cuda_flashmlir
    torch.manual_seed(3)
    tdt = {"f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    b, nk, hq, hkv = 2, 700, 4, 2
    left, right = window_size
    q, do = (torch.randn(b, nq, hq, d, device="cuda", dtype=tdt)
             for _ in range(2))
    k, v = (torch.randn(b, nk, hkv, d, device="cuda", dtype=tdt)
            for _ in range(2))
    scale = 1 / math.sqrt(d)
    i = torch.arange(nq, device="cuda")[:, None] + nk - nq
    j = torch.arange(nk, device="cuda")[None, :]
    hidden = (j < i - left) | (j > i + right)

    def reference(q, k, v):
        g = q.shape[2] // k.shape[2]
        qh, kh, vh = (t.transpose(1, 2) for t in (q, k, v))
        s = (qh @ kh.repeat_interleave(g, 1).transpose(-1, -2)) * scale
        p = torch.softmax(s.masked_fill(hidden, float("-inf")), -1)
        return (p.nan_to_num(0.0) @ vh.repeat_interleave(g, 1)).transpose(
            1, 2)

    x = [t.clone().requires_grad_() for t in (q, k, v)]
    out = flashmlir.flash_attn_func(*x, window_size=window_size,
                                    deterministic=deterministic)
    ours = torch.autograd.grad(out, x, do)

    _assert_two_x_rule(torch, ours, reference, (q, k, v), do, tdt)
    if deterministic:
        again = torch.autograd.grad(
            flashmlir.flash_attn_func(*x, window_size=window_size,
                                      deterministic=True), x, do)
        assert all(torch.equal(a, c) for a, c in zip(ours, again))


@pytest.mark.gpu
def test_flash_attn_func_refuses_what_has_no_backward(cuda_flashmlir):
    """Gradients the backward kernel cannot give are refused before the
    forward runs, with the way out; the same call without grad runs."""
    torch, flashmlir = cuda_flashmlir
    from flashmlir.runtime import KernelArgumentError
    q = torch.randn(1, 64, 4, 64, device="cuda", dtype=torch.float16,
                    requires_grad=True)
    with pytest.raises(KernelArgumentError,
                       match="a softcap has no backward"):
        flashmlir.flash_attn_func(q, q, q, causal=True, softcap=30.0)
    with torch.no_grad():
        assert flashmlir.flash_attn_func(q, q, q).shape == q.shape


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
def test_deterministic_gradients(cuda_flashmlir, causal):
    """deterministic=True: dQ's adds in the order of the key blocks, so two
    backward passes give the same bits (grouped-query heads, a ragged
    length, many key blocks a query block); still within the 2x rule's
    tolerance of the default kernel's."""
    torch, flashmlir = cuda_flashmlir
    torch.manual_seed(2)
    q = torch.randn(2, 700, 8, 64, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(2, 1100, 2, 64, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(2, 1100, 2, 64, device="cuda", dtype=torch.bfloat16)
    do = torch.randn(2, 700, 8, 64, device="cuda", dtype=torch.bfloat16)

    def grads(deterministic):
        x = [t.clone().requires_grad_() for t in (q, k, v)]
        out = flashmlir.flash_attn_func(*x, causal=causal,
                                        deterministic=deterministic)
        return torch.autograd.grad(out, x, do)

    first, second = grads(True), grads(True)
    for a, b in zip(first, second):
        assert torch.equal(a, b)
    for a, b in zip(first, grads(False)):
        assert (a.float() - b.float()).abs().max().item() < 2e-2


def _c_backward_runtime(build_dir=None):
    """The build's shared libFARuntime.so. The sanitizer build (`build_dir`
    given) links the runtime statically into its tools and has none: CI's
    plain build runs these tests. A GPU run carries the library alone."""
    import ctypes
    from conftest import load_c_runtime
    if build_dir and not (build_dir / "lib" / "libFARuntime.so").exists():
        pytest.skip("no shared libFARuntime in this (sanitizer) build")
    lib, _, _ = load_c_runtime()
    lib.faBackwardKernelName.restype = ctypes.c_char_p
    return lib


def test_c_runtime_checks_the_same_metadata(flashmlir, artefact, build_dir):
    """faBackwardMetadataCheck takes fa-compile's backward metadata and
    refuses the mutations the Python launcher refuses, each by name; the
    forward loader refuses a backward kernel's metadata and vice versa."""
    lib = _c_backward_runtime(build_dir)
    cubin, meta = artefact

    def check(m):
        rc = lib.faBackwardMetadataCheck(json.dumps(m).encode())
        return rc, lib.faRuntimeLastError().decode()

    assert check(meta) == (0, check(meta)[1])
    for field, value, message in [
            ("format", "flash-mlir-kernel-1", "is not a backward kernel's"),
            ("dtype", "e4m3", "dtype must be f16 or bf16"),
            ("head_dim", 96, "head_dim must be 64 or 128"),
            ("block", [1024, 2, 1], "'block' must have at most 1024 threads"),
            ("grid", {"x": "ceil(Nk / block_w)", "y": "Hkv", "z": "B"},
             "block_w"),
            ("preprocess", None, "'preprocess' must be an object"),
            ("deterministic", True, "dq_semaphores")]:
        rc, text = check(dict(meta, **{field: value}))
        assert rc == 1 and message in text, (field, text)
    for what, field, value, message in [
            ("convert", "kernel", meta["kernel"],
             "'convert' must name another kernel"),
            ("preprocess", "params", meta["preprocess"]["params"][:-1],
             "'preprocess''s parameters"),
            ("convert", "grid", {"x": "ceil(Nq / rows)", "y": "Hq",
                                 "z": "B"}, "rows")]:
        rc, text = check(dict(meta, **{what: dict(meta[what],
                                                  **{field: value})}))
        assert rc == 1 and message in text, (what, field, text)
    missing = {k: v for k, v in meta.items() if k != "convert"}
    rc, text = check(missing)
    assert rc == 1 and "no 'convert'" in text
    # Each loader refuses the other's metadata by its format.
    assert lib.faKernelMetadataCheck(json.dumps(meta).encode()) == 1
    assert b"faBackwardKernelLoad loads it" in lib.faRuntimeLastError()


def test_c_runtime_refuses_bad_launches_without_a_driver(flashmlir,
                                                         build_dir):
    """The C launcher's argument checks come before the driver: null
    handles and workspace sizes, by name."""
    import ctypes
    lib = _c_backward_runtime(build_dir)
    size = ctypes.c_size_t()
    assert lib.faBackwardWorkspaceBytes(None, 1, 1, 1,
                                        ctypes.byref(size)) == 1
    assert b"must not be null" in lib.faRuntimeLastError()
    null = ctypes.c_void_p()
    assert lib.faBackwardKernelLaunch(
        null, *([null] * 11), ctypes.c_size_t(0), 1, 1, 1, 1, 1,
        ctypes.c_float(1.0), null) == 1
    assert b"kernel must not be null" in lib.faRuntimeLastError()
    assert lib.faBackwardKernelLoadFiles(b"/nonexistent/k", 0,
                                         ctypes.byref(null)) == 1
    assert b"cannot read /nonexistent/k.json" in lib.faRuntimeLastError()


@pytest.mark.gpu
@pytest.mark.parametrize("deterministic", [False, True])
def test_c_runtime_launch(cuda_flashmlir, deterministic):
    """faBackwardKernelLaunch: the three launches from the C runtime give
    the Python launcher's gradients (the deterministic kernel bit for bit,
    the default one within the atomics' reordering); its refusals of a
    short workspace, unaligned tensors and a head count K/V heads do not
    divide."""
    import ctypes
    torch, flashmlir = cuda_flashmlir
    from flashmlir.backward import BackwardKernel
    lib = _c_backward_runtime()
    folder = os.environ.get("FLASHMLIR_BACKWARD_KERNEL_DIR", ".bwd")
    name = flashmlir.kernel_file_name("sm_90a", 128, "bf16", True,
                                      bottom_right=True, backward=True,
                                      deterministic=deterministic)
    prefix = os.path.join(folder, name)
    kernel = ctypes.c_void_p()
    assert lib.faBackwardKernelLoadFiles(prefix.encode(), 0,
                                         ctypes.byref(kernel)) == 0, \
        lib.faRuntimeLastError()
    torch.manual_seed(5)
    b, hq, hkv, nq, nk, d = 2, 8, 2, 200, 333, 128
    dt = torch.bfloat16
    q = torch.randn(b, hq, nq, d, device="cuda", dtype=dt)
    k = torch.randn(b, hkv, nk, d, device="cuda", dtype=dt)
    v = torch.randn(b, hkv, nk, d, device="cuda", dtype=dt)
    do = torch.randn(b, hq, nq, d, device="cuda", dtype=dt)
    o = torch.randn(b, hq, nq, d, device="cuda", dtype=dt)
    lse = torch.randn(b, hq, nq, device="cuda") + 5
    scale = 1 / math.sqrt(d)
    want = BackwardKernel.load(prefix)(q, k, v, o, lse, do, scale=scale)
    size = ctypes.c_size_t()
    assert lib.faBackwardWorkspaceBytes(kernel, b, hq, nq,
                                        ctypes.byref(size)) == 0
    workspace = torch.empty(size.value, dtype=torch.uint8, device="cuda")
    grads = [torch.full_like(t, float("nan")) for t in (q, k, v)]
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)

    def launch(ws_bytes, heads=hq, first=q):
        ptr = lambda t: ctypes.c_void_p(t.data_ptr())  # noqa: E731
        return lib.faBackwardKernelLaunch(
            kernel, ptr(first), ptr(k), ptr(v), ptr(o), ptr(lse), ptr(do),
            *map(ptr, grads), ptr(workspace), ctypes.c_size_t(ws_bytes), b,
            heads, hkv, nq, nk, ctypes.c_float(scale), stream)

    assert launch(size.value) == 0, lib.faRuntimeLastError()
    torch.cuda.synchronize()
    for got, ref in zip(grads, want):
        if deterministic:
            assert torch.equal(got, ref)
        else:
            err = (got.float() - ref.float()).abs().max().item()
            assert err < 2e-2, err
    assert launch(size.value - 1) == 1
    assert b"(faBackwardWorkspaceBytes)" in lib.faRuntimeLastError()
    assert launch(size.value, heads=7) == 1
    assert b"must be a multiple of K/V heads" in lib.faRuntimeLastError()
    assert launch(size.value, first=q.view(-1)[1:]) == 1
    assert b"16-byte aligned" in lib.faRuntimeLastError()
    lib.faBackwardKernelDestroy(kernel)
