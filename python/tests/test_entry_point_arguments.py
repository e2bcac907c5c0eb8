"""The flash-attention entry points check every argument before they act:
flash_attn_with_kvcache refuses a call before it writes k and v into the
caller's cache (a refused call leaves both caches as they were), and bad
Python values are KernelArgumentError (never a bare IndexError,
TypeError, AttributeError or RuntimeError, a string boolean read as
True, or a float truncated). On the CPU: refusals that need a GPU are
reached by standing in for one (the target query, the device facts) or for
the kernel lookup."""
import os
import pathlib

import pytest

B, N, H, D = 2, 16, 2, 64


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


@pytest.fixture
def runtime(flashmlir):
    from flashmlir import runtime
    return runtime


def _caches(torch, n=N, h=H, d=D, dtype=None, batch=B):
    dtype = dtype or torch.float16
    return (torch.zeros(batch, n, h, d, dtype=dtype),
            torch.zeros(batch, n, h, d, dtype=dtype))


def _call_leaves_caches(flashmlir, torch, error, match, q, caches, **kwargs):
    """Runs flash_attn_with_kvcache(q, *caches, **kwargs), which must raise
    `error` matching `match` and leave both caches untouched."""
    before = [c.clone() for c in caches]
    with pytest.raises(error, match=match) as e:
        flashmlir.flash_attn_with_kvcache(q, *caches, **kwargs)
    assert type(e.value) is error
    for was, now in zip(before, caches):
        assert torch.equal(was, now), "the refused call wrote the cache"


def _new(torch, n=1, h=H, d=D, dtype=None):
    dtype = dtype or torch.float16
    return torch.ones(B, n, h, d, dtype=dtype), \
        torch.full((B, n, h, d), 2.0, dtype=dtype)


# -- on the CPU as it is ------------------------------------------------------


def test_cpu_tensors_are_refused_before_the_append(flashmlir, torch, runtime):
    """Before, the append ran first: "q must be a CUDA tensor" with both
    caches written."""
    q = torch.randn(B, 1, H, D).half()
    k, v = _new(torch)
    _call_leaves_caches(flashmlir, torch, runtime.KernelArgumentError,
                        "q must be a CUDA tensor", q, _caches(torch), k=k,
                        v=v, cache_seqlens=3)
    # Paged.
    table = torch.tensor([[0, 1], [2, 3]], dtype=torch.int32)
    caches = _caches(torch, n=16, batch=4)
    _call_leaves_caches(flashmlir, torch, runtime.KernelArgumentError,
                        "q must be a CUDA tensor", q, caches, k=k, v=v,
                        cache_seqlens=3, block_table=table)


@pytest.mark.parametrize("kwargs,message", [
    (dict(k=[1], v=[1]), "k must be a 4-D tensor"),
    (dict(k="k", v="v"), "k must be a 4-D tensor"),
    (dict(cache_seqlens=N), r"cache_seqlens must be an integer \[0, 15\], "
     r"got 16"),
    (dict(cache_seqlens=-1), r"cache_seqlens must be an integer \[0, 15\]"),
    (dict(cache_seqlens=3.0), "cache_seqlens must be an int or an int32"),
    (dict(cache_seqlens=None), "appending k and v needs cache_seqlens"),
    (dict(num_splits="x"), "num_splits must be an integer"),
    (dict(num_splits=5000), "num_splits must be an integer"),
    (dict(num_splits=2.0), "num_splits must be an integer"),
    (dict(causal="False"), "causal must be True or False, got 'False'"),
    (dict(causal=None), "causal must be True or False"),
    (dict(softcap=-1.0), r"softcap must be a number, 0 \(none\) or in"),
    (dict(softcap=float("nan")), "softcap must be a number"),
    (dict(softcap="30"), "softcap must be a number"),
    (dict(softcap=True), "softcap must be a number"),
    (dict(window_size=(1.7, 0)), "window_size must be a pair"),
    (dict(window_size=("3", "3")), "window_size must be a pair"),
    (dict(softmax_scale="0.5"), "softmax_scale must be None or a number"),
    (dict(softmax_scale=-1.0), "softmax_scale must be None or a number"),
    (dict(return_softmax_lse="yes"), "return_softmax_lse must be True or"),
    (dict(block_table=[[0, 1]]), "block_table must be an int32 tensor"),
])
def test_bad_values_are_refused_before_the_append(flashmlir, torch, runtime,
                                                  kwargs, message):
    q = torch.randn(B, 1, H, D).half()
    k, v = _new(torch)
    kwargs = dict(dict(k=k, v=v, cache_seqlens=3), **kwargs)
    _call_leaves_caches(flashmlir, torch, runtime.KernelArgumentError,
                        message, q, _caches(torch), **kwargs)


@pytest.mark.parametrize("call,message", [
    (lambda f, q, *_: f.flash_attn_func(q, q, q, causal="False"),
     "flash_attn_func: causal must be True or False"),
    (lambda f, q, *_: f.flash_attn_func(q, q, q, num_splits=2.5),
     "flash_attn_func: num_splits must be an integer"),
    (lambda f, q, *_: f.flash_attn_func(q, q, q, softmax_scale="x"),
     "flash_attn_func: softmax_scale must be None or a number"),
    (lambda f, q, *_: f.flash_attn_func(q, q, q, window_size=(2.5, 0)),
     "flash_attn_func: window_size must be a pair"),
    (lambda f, q, *_: f.flash_attn_func(q, [1], q),
     "flash_attn_func: k must be"),
    (lambda f, q, *_: f.attention(q, q, q, causal="False"),
     "attention: causal must be True or False"),
    (lambda f, q, *_: f.attention(q, q, q, scale="0.5"),
     "scale must be None or a number"),
    (lambda f, q, *_: f.attention(q, q, q, num_splits=1.5),
     "attention: num_splits must be an integer"),
    (lambda f, _, p, s: f.flash_attn_varlen_func(p, p, p, s, s, None, 7),
     r"max_seqlen_q must be an integer \[1, 10\], got None"),
    # 6.9 was truncated to 6 (the longest sequence holds 7 queries: the
    # grid would have too few blocks).
    (lambda f, _, p, s: f.flash_attn_varlen_func(p, p, p, s, s, 6.9, 7),
     "max_seqlen_q must be an integer"),
    (lambda f, _, p, s: f.flash_attn_varlen_func(p, p, p, s, s, "7", 7),
     "max_seqlen_q must be an integer"),
    (lambda f, _, p, s: f.flash_attn_varlen_func(p, p, p, s, s, True, 7),
     "max_seqlen_q must be an integer"),
    (lambda f, _, p, s: f.flash_attn_varlen_func(p, p, p, s, s, 11, 7),
     r"max_seqlen_q must be an integer \[1, 10\]"),
    (lambda f, _, p, s: f.flash_attn_varlen_func(p, p, p, s, s, 7,
                                                 "garbage"),
     "max_seqlen_k must be an integer"),
    (lambda f, _, p, s: f.flash_attn_varlen_func(p, p, p, s, s, 7, 7,
                                                 causal="False"),
     "flash_attn_varlen_func: causal must be True or False"),
    # Found by tools/fa-fuzz/fuzz_surfaces.py (python-args): before, an
    # AttributeError ('int' object has no attribute 'shape'), a ValueError
    # (too many values to unpack) and a ZeroDivisionError (1 / sqrt(0) for
    # the default scale) escaped.
    (lambda f, q, *_: f.attention(q, q, 3),
     r"attention: v must be a 4-D tensor \[B, H, N, D\], got int"),
    (lambda f, q, *_: f.attention(q.unsqueeze(-1), q, q),
     r"attention: q must be a 4-D tensor \[B, H, N, D\], got a 5-D"),
    (lambda f, q, *_: f.attention(q[..., :0], q[..., :0], q[..., :0]),
     r"attention: q's head dim \(its last\) must be at least 1"),
    (lambda f, q, *_: f.flash_attn_func(q[..., :0], q[..., :0], q[..., :0]),
     r"flash_attn_func: q's head dim \(its last\) must be at least 1"),
    (lambda f, q, *_: f.flash_attn_with_kvcache(q[..., :0], q[..., :0],
                                                q[..., :0]),
     r"flash_attn_with_kvcache: q's head dim \(its last\) must be"),
    (lambda f, _, p, s: f.flash_attn_varlen_func(p[0], p, p, s, s, 7, 7),
     r"flash_attn_varlen_func: q must be a 3-D tensor \[total, H, D\]"),
])
def test_bad_values_are_argument_errors(flashmlir, torch, runtime, call,
                                        message):
    q = torch.zeros(2, 8, 4, 64, dtype=torch.float16)
    packed = torch.zeros(10, 2, 64, dtype=torch.float16)
    sums = torch.tensor([0, 3, 10], dtype=torch.int32)
    with pytest.raises(runtime.KernelArgumentError, match=message) as e:
        call(flashmlir, q, packed, sums)
    assert type(e.value) is runtime.KernelArgumentError


# -- a GPU stood in for -------------------------------------------------------


@pytest.fixture
def sm90(flashmlir, torch, runtime, monkeypatch):
    """CPU tensors taken for an sm_90a GPU's (H100, 132 SMs) up to the
    kernel: the target query, the device facts and the current device. The
    kernel's own checks then refuse the CPU tensors, so what a test sees
    refused before them was refused before the append."""
    def target(q):
        if not isinstance(q, torch.Tensor):
            raise runtime.KernelArgumentError("q must be a CUDA tensor")
        dtype = {torch.float16: "f16", torch.bfloat16: "bf16"}.get(q.dtype)
        if dtype is None:
            raise runtime.KernelArgumentError(
                f"q must be float16, bfloat16 or (sm_90a) float8_e4m3fn, got "
                f"{q.dtype}")
        return target.arch, dtype
    target.arch = "sm_90a"
    monkeypatch.setattr(flashmlir, "_arch_and_dtype", target)
    monkeypatch.setattr(runtime, "device_facts", lambda i: ((9, 0), 132, 4800))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(flashmlir, "_launchers", {})
    # Checked calls are repeated without their checks: each test's own.
    monkeypatch.setattr(flashmlir, "_calls", {})
    return target


@pytest.mark.parametrize("edit,message", [
    # (q, k_cache, v_cache, k, v) -> the same with one bad; before, each was
    # refused (or failed) after k, or k and v, were written.
    (lambda q, kc, vc, k, v: (q, kc, vc, k, v.float()),
     "v must be torch.float16"),
    (lambda q, kc, vc, k, v: (q.bfloat16(), kc, vc, k.bfloat16(),
                              v.bfloat16()),
     "k_cache must be torch.bfloat16"),
    (lambda q, kc, vc, k, v: (q, kc, vc[..., :32], k, v),
     "must have one shape"),
    (lambda q, kc, vc, k, v: (q, kc, vc[:, :8], k, v), "must have one shape"),
    (lambda q, kc, vc, k, v: (q.new_zeros(B, 1, H, 128), kc, vc, k, v),
     "with q's head dim"),
    (lambda q, kc, vc, k, v: (q, kc, vc, k[..., :1, :], v[..., :1, :]),
     "k and v must be"),
    (lambda q, kc, vc, k, v: (q, kc, vc, k, v[:, :, :, :32]),
     "k and v must be"),
    (lambda q, kc, vc, k, v: (q, kc, vc, k.new_ones(B, N + 1, H, D),
                              v.new_ones(B, N + 1, H, D)),
     "do not fit a cache of 16"),
])
def test_tensor_mismatches_are_refused_before_the_append(
        flashmlir, torch, runtime, sm90, edit, message):
    q = torch.randn(B, 1, H, D).half()
    k, v = _new(torch)
    kc, vc = _caches(torch)
    q, kc2, vc2, k, v = edit(q, kc, vc, k, v)
    _call_leaves_caches(flashmlir, torch, runtime.KernelArgumentError,
                        message, q, (kc2, vc2), k=k, v=v,
                        cache_seqlens=0 if k.shape[1] > N else 3)
    assert not kc.any() and not vc.any()


def test_sm80_is_refused_before_the_append(flashmlir, torch, runtime, sm90):
    """Before: the compiler's CompileError ("varlen batches have a GPU
    kernel on sm_90a (wgmma) only") after both caches were written; the
    entry points' own refusal was dead code."""
    sm90.arch = "sm_80"
    q = torch.randn(B, 1, H, D).half()
    k, v = _new(torch)
    _call_leaves_caches(flashmlir, torch, runtime.KernelArgumentError,
                        "KV caches need an sm_90a kernel, not sm_80", q,
                        _caches(torch), k=k, v=v, cache_seqlens=3)
    packed = torch.zeros(10, 2, 64, dtype=torch.float16)
    sums = torch.tensor([0, 3, 10], dtype=torch.int32)
    with pytest.raises(runtime.KernelArgumentError,
                       match="varlen batches need an sm_90a kernel"):
        flashmlir.flash_attn_varlen_func(packed, packed, packed, sums, sums,
                                         7, 7)


def test_compile_refusals_come_before_the_append(flashmlir, torch, runtime,
                                                 sm90):
    """The kernel is looked up (compiled) before the append: a request no
    kernel serves leaves the caches as they were. Before, head dim 48 and
    pages of 8 rows were CompileErrors after both caches were written."""
    q = torch.randn(B, 1, H, 48).half()
    k, v = _new(torch, d=48)
    _call_leaves_caches(flashmlir, torch, flashmlir.CompileError,
                        "head dim must be", q, _caches(torch, d=48), k=k, v=v,
                        cache_seqlens=3, kernel_dir="")
    q = torch.randn(B, 1, H, D).half()
    k, v = _new(torch)
    table = torch.tensor([[0, 1], [2, 3]], dtype=torch.int32)
    _call_leaves_caches(flashmlir, torch, flashmlir.CompileError,
                        "page size must be a multiple of 16", q,
                        _caches(torch, n=8, batch=4), k=k, v=v,
                        cache_seqlens=3, block_table=table, kernel_dir="")


class _Kernel:
    """A stand-in for the runtime.Kernel a launch finds: its plan (the
    argument check) refuses or passes; a launch is recorded with the
    cache_seqlens it was given."""
    strided = True
    descale_layout = 0  # the plan's (this stand-in is its own plan)

    def __init__(self, refuse=None):
        self.refuse, self.checked, self.launched = refuse, [], []

    def plan(self, *args, **kwargs):
        self.checked.append(kwargs)
        if self.refuse:
            from flashmlir.runtime import KernelArgumentError
            raise KernelArgumentError(self.refuse)
        return self

    def kv_append_plan(self, *args, **kwargs):
        """No append kernel (one built before it): torch ops append, on the
        CPU here (test_kv_append.py covers the kernel's append)."""
        return None

    def launch(self, q, k, v, out, lse, cache_seqlens, block_table, *varlen):
        self.launched.append({"cache_seqlens": cache_seqlens,
                              "block_table": block_table})
        return out, None


def test_the_kernels_checks_come_before_the_append(flashmlir, torch, runtime,
                                                   sm90, monkeypatch):
    """The runtime kernel's argument checks (heads, strides, alignment,
    devices) run before the append: a refusal leaves the caches."""
    kernel = _Kernel(refuse="query heads (3) must be a multiple of key/value"
                            " heads (2)")
    monkeypatch.setattr(flashmlir, "_launcher",
                        lambda *a, **kw: (kernel, False))
    q = torch.randn(B, 1, 3, D).half()
    k, v = _new(torch)
    _call_leaves_caches(flashmlir, torch, runtime.KernelArgumentError,
                        r"query heads \(3\)", q, _caches(torch), k=k, v=v,
                        cache_seqlens=3)
    assert kernel.checked and not kernel.launched


def test_an_accepted_call_appends_then_launches(flashmlir, torch, runtime,
                                                sm90, monkeypatch):
    """The append itself (contiguous and paged caches): k and v land after
    each sequence's keys, and the launch sees the new lengths."""
    kernel = _Kernel()
    monkeypatch.setattr(flashmlir, "_launcher",
                        lambda *a, **kw: (kernel, False))
    q = torch.randn(B, 1, H, D).half()
    k, v = _new(torch, n=2)
    kc, vc = _caches(torch)
    lens = torch.tensor([3, 7], dtype=torch.int32)
    flashmlir.flash_attn_with_kvcache(q, kc, vc, k=k, v=v, cache_seqlens=lens)
    assert kernel.launched[0]["cache_seqlens"].tolist() == [5, 9]
    assert lens.tolist() == [3, 7]
    for b, start in enumerate((3, 7)):
        assert torch.equal(kc[b, start:start + 2], k[b])
        assert torch.equal(vc[b, start:start + 2], v[b])
    assert int((kc != 0).sum()) == k.numel()
    # Paged: pages of 16 rows, sequence 1's keys 15 and 16 span its pages
    # 0 and 1 (cache pages 2 and 0).
    kernel.launched.clear()
    kc, vc = _caches(torch, n=16, batch=4)
    table = torch.tensor([[3, 1], [2, 0]], dtype=torch.int32)
    flashmlir.flash_attn_with_kvcache(q, kc, vc, k=k, v=v, cache_seqlens=
                                      torch.tensor([0, 15], dtype=torch.int32),
                                      block_table=table)
    assert kernel.launched[0]["cache_seqlens"].tolist() == [2, 17]
    assert torch.equal(kc[3, 0:2], k[0]) and torch.equal(vc[3, 0:2], v[0])
    assert torch.equal(kc[2, 15], k[1, 0]) and torch.equal(kc[0, 0], k[1, 1])
    assert torch.equal(vc[2, 15], v[1, 0]) and torch.equal(vc[0, 0], v[1, 1])


def test_a_checked_call_is_repeated_without_its_checks(
        flashmlir, torch, runtime, sm90, monkeypatch):
    """A call whose arguments have the signature of one that passed is
    repeated from its plan: no check, but its own append and launch (the
    lengths it was given); another option, shape or a refused call is
    checked in full."""
    kernel = _Kernel()
    lookups = []

    def launcher(*args, **kwargs):
        lookups.append(kwargs)
        return kernel, False
    monkeypatch.setattr(flashmlir, "_launcher", launcher)
    q = torch.randn(B, 1, H, D).half()
    k, v = _new(torch)
    kc, vc = _caches(torch)
    for start in (3, 4):
        lens = torch.tensor([start, start + 5], dtype=torch.int32)
        flashmlir.flash_attn_with_kvcache(q, kc, vc, k=k, v=v,
                                          cache_seqlens=lens)
        assert kernel.launched[-1]["cache_seqlens"].tolist() == [
            start + 1, start + 6]
        for b in range(B):
            assert torch.equal(kc[b, lens[b]], k[b, 0])
    assert len(lookups) == 1 and len(kernel.checked) == 1
    assert len(kernel.launched) == 2
    # Another option (num_splits) or shape (Nnew 2): checked.
    lens = torch.tensor([0, 0], dtype=torch.int32)
    flashmlir.flash_attn_with_kvcache(q, kc, vc, k=k, v=v,
                                      cache_seqlens=lens, num_splits=2)
    k2, v2 = _new(torch, n=2)
    flashmlir.flash_attn_with_kvcache(q, kc, vc, k=k2, v=v2,
                                      cache_seqlens=lens)
    assert len(kernel.checked) == 3
    # A refused call is not remembered: refused again.
    kernel.refuse = "refused here"
    for _ in range(2):
        with pytest.raises(runtime.KernelArgumentError, match="refused"):
            flashmlir.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=3,
                                              num_splits=3)
    assert len(kernel.checked) == 5
    # A float where an integer goes is not the integer's call.
    with pytest.raises(runtime.KernelArgumentError, match="num_splits"):
        flashmlir.flash_attn_with_kvcache(q, kc, vc, k=k, v=v,
                                          cache_seqlens=lens, num_splits=0.0)


def test_checked_inputs_are_refused_on_the_host(flashmlir, torch, runtime,
                                                sm90, monkeypatch):
    """FLASHMLIR_CHECK_INPUTS: the device-side values the kernel checks
    (and stops on with a trap) are checked on the host first, with the
    rule, before the append: lengths after the append within the capacity,
    the pages a sequence reads within the cache; a repeated call (from its
    plan) is checked too. The varlen sums likewise."""
    monkeypatch.setattr(flashmlir, "_CHECK_INPUTS", True)
    kernel = _Kernel()
    monkeypatch.setattr(flashmlir, "_launcher",
                        lambda *a, **kw: (kernel, False))
    q = torch.randn(B, 1, H, D).half()
    k, v = _new(torch)
    for lens, match in (([3, N], "cache_seqlens\\[1\\] = 16 with 1 new"),
                        ([-2, 0], "cache_seqlens\\[0\\] = -2")):
        _call_leaves_caches(flashmlir, torch, runtime.KernelArgumentError,
                            match, q, _caches(torch), k=k, v=v,
                            cache_seqlens=torch.tensor(lens,
                                                       dtype=torch.int32))
    good = torch.tensor([3, 7], dtype=torch.int32)
    flashmlir.flash_attn_with_kvcache(q, *_caches(torch), k=k, v=v,
                                      cache_seqlens=good)
    checked = len(kernel.checked)
    _call_leaves_caches(flashmlir, torch, runtime.KernelArgumentError,
                        "cache_seqlens\\[1\\] = 16", q, _caches(torch), k=k,
                        v=v, cache_seqlens=torch.tensor([3, 16],
                                                        dtype=torch.int32))
    assert len(kernel.checked) == checked  # repeated from its plan
    # Paged (4 pages of 16): sequence 1 reads pages 2 and 9.
    table = torch.tensor([[0, 1], [2, 9]], dtype=torch.int32)
    _call_leaves_caches(flashmlir, torch, runtime.KernelArgumentError,
                        "block_table\\[1\\] holds 9", q,
                        _caches(torch, n=16, batch=4), k=k, v=v,
                        cache_seqlens=torch.tensor([3, 17],
                                                   dtype=torch.int32),
                        block_table=table)
    sums = torch.tensor([0, 5, 3], dtype=torch.int32)
    with pytest.raises(runtime.KernelArgumentError, match="must start at 0"):
        flashmlir._check_sums_on_host(sums, sums, 8, 8, 5)
    sums = torch.tensor([0, 2, 8], dtype=torch.int32)
    with pytest.raises(runtime.KernelArgumentError,
                       match="6 queries, more than max_seqlen_q = 5"):
        flashmlir._check_sums_on_host(sums, sums, 8, 8, 5)
    flashmlir._check_sums_on_host(sums, sums, 8, 8, 6)


@pytest.mark.parametrize("value, on", [("", False), ("0", False),
                                       ("1", True), ("yes", None),
                                       ("2", None), (" 1", None)])
def test_check_inputs_setting_is_read_strictly(build_dir, value, on):
    """FLASHMLIR_CHECK_INPUTS is 0 or 1 (or unset): any other value is
    refused at import with the variable named, never read as on or off."""
    import subprocess
    import sys
    root = pathlib.Path(__file__).resolve().parents[2]
    env = dict(os.environ, FLASHMLIR_CHECK_INPUTS=value,
               FLASHMLIR_BUILD_DIR=str(build_dir),
               PYTHONPATH=str(root / "python"))
    run = subprocess.run(
        [sys.executable, "-c",
         "import flashmlir; print(flashmlir._CHECK_INPUTS)"],
        env=env, capture_output=True, text=True, timeout=120)
    if on is None:
        assert run.returncode != 0
        assert "FLASHMLIR_CHECK_INPUTS must be 0 or 1" in run.stderr
        assert repr(value) in run.stderr
    else:
        assert run.returncode == 0, run.stderr
        assert run.stdout.strip() == str(on)
