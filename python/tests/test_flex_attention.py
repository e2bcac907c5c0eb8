"""flashmlir.flex_attention on the host: FlexAttention's score_mod and
mask_mod traced into fa.attention's regions, lowered by fa-cpu-pipeline and
run by the JIT, against an independent float64 reference that applies the
same Python functions to broadcast index tensors (as FlexAttention's own
reference does), over random inputs and ragged sizes."""
import math

import re

import pytest

torch = pytest.importorskip("torch")


def reference(q, k, v, score_mod=None, mask_mod=None, scale=None):
    """O and LSE in float64; a row the mask hides entirely: O = 0, LSE =
    -inf."""
    q, k, v = q.double(), k.double(), v.double()
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    b = torch.arange(q.shape[0])[:, None, None, None]
    h = torch.arange(q.shape[1])[None, :, None, None]
    qi = torch.arange(q.shape[2])[None, None, :, None]
    ki = torch.arange(k.shape[2])[None, None, None, :]
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = scale * q @ k.transpose(-1, -2)
    if score_mod is not None:
        s = score_mod(s, b, h, qi, ki).double()
    if mask_mod is not None:
        keep = mask_mod(b, h, qi, ki).expand(s.shape)
        s = s.masked_fill(~keep, -math.inf)
    lse = torch.logsumexp(s, -1)
    p = torch.exp(s - lse[..., None]).nan_to_num(0.0)
    return p @ v, lse


def check(flashmlir, q, k, v, score_mod=None, mask_mod=None, scale=None,
          tol=2e-5):
    out, lse = flashmlir.flex_attention(q, k, v, score_mod=score_mod,
                                        mask_mod=mask_mod, scale=scale,
                                        enable_gqa=True, return_lse=True)
    want, want_lse = reference(q, k, v, score_mod, mask_mod, scale)
    err = (out.double() - want).norm() / want.norm().clamp_min(1e-30)
    assert err <= tol, f"O rel err {err:.2e}"
    finite = torch.isfinite(want_lse)
    assert torch.equal(torch.isfinite(lse.double()), finite)
    # f32's LSE: 1e-4 absolute near 0, relative for large ones.
    diff = (lse.double()[finite] - want_lse[finite]).abs()
    assert (diff <= 1e-4 * want_lse[finite].abs().clamp_min(1.0)).all()


def inputs(b, hq, hkv, n, m, d, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(b, hq, n, d, generator=g),
            torch.randn(b, hkv, m, d, generator=g),
            torch.randn(b, hkv, m, d, generator=g))


def test_alibi_causal_gqa(flashmlir):
    q, k, v = inputs(2, 4, 2, 37, 53, 32, 1)
    slopes = torch.tensor([2.0 ** -(i + 1) for i in range(4)])

    def alibi(score, b, h, q_idx, kv_idx):
        return score + slopes[h] * (kv_idx - q_idx)

    def causal(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx

    check(flashmlir, q, k, v, alibi, causal)


def test_relative_bias_and_documents(flashmlir):
    q, k, v = inputs(2, 2, 2, 40, 40, 16, 2)
    bias = torch.randn(2, 40, 40)
    docs = torch.tensor([[0] * 13 + [1] * 20 + [2] * 7,
                         [0] * 30 + [1] * 10], dtype=torch.int32)

    def relative(score, b, h, q_idx, kv_idx):
        return score + bias[h, q_idx, kv_idx]

    def document(b, h, q_idx, kv_idx):
        return (docs[b, q_idx] == docs[b, kv_idx]) & (q_idx >= kv_idx)

    check(flashmlir, q, k, v, relative, document)


def test_softcap_and_sliding_window_fold_or_run(flashmlir):
    # Spelt as FlexAttention's examples write them: tanh softcap and a
    # sliding window (fa-fold-modifications turns both into built-ins).
    q, k, v = inputs(1, 2, 2, 70, 70, 64, 3)

    def softcap(score, b, h, q_idx, kv_idx):
        return 20 * torch.tanh(score / 20)

    def window(b, h, q_idx, kv_idx):
        return (q_idx >= kv_idx) & (q_idx - kv_idx <= 15)

    check(flashmlir, q, k, v, softcap, window, scale=0.9)


def test_prefix_lm_block_diagonal_and_clamp(flashmlir):
    q, k, v = inputs(1, 3, 1, 33, 65, 16, 4)

    def prefix_lm(b, h, q_idx, kv_idx):
        return (kv_idx < 8) | (kv_idx <= q_idx + 32)

    def temperature(score, b, h, q_idx, kv_idx):
        return torch.clamp(score * (0.5 + h * 0.25), -3.0, 3.0)

    check(flashmlir, q, k, v, temperature, prefix_lm)
    # The prefix's length from a tensor indexed by a constant: a 0-d
    # capture, read whole (and no block skipping: it is data).
    length = torch.tensor([8, 40])

    def prefix_from_data(b, h, q_idx, kv_idx):
        return (kv_idx < length[0]) | (kv_idx <= q_idx + 32)

    check(flashmlir, q, k, v, temperature, prefix_from_data)
    blocks = torch.arange(65) // 16

    def block_diagonal(b, h, q_idx, kv_idx):
        return q_idx // 16 == kv_idx // 16

    def where_bias(score, b, h, q_idx, kv_idx):
        return torch.where(blocks[kv_idx] % 2 == 0, score - 1.5, score)

    check(flashmlir, q, k, v, where_bias, block_diagonal)


def test_rows_hidden_entirely(flashmlir):
    q, k, v = inputs(1, 1, 1, 8, 8, 16, 5)

    def nothing_before_4(b, h, q_idx, kv_idx):
        return (q_idx >= 4) & (kv_idx <= q_idx)

    out = flashmlir.flex_attention(q, k, v, mask_mod=nothing_before_4)
    assert torch.equal(out[0, 0, :4], torch.zeros(4, 16))
    check(flashmlir, q, k, v, mask_mod=nothing_before_4)


def test_traced_text(flashmlir):
    slopes = torch.ones(8)
    text, captures = flashmlir.flex.trace_regions(
        lambda s, b, h, q, kv: s + slopes[h] * (kv - q),
        lambda b, h, q, kv: q >= kv)
    assert "tensor.extract %cap0[%h] : tensor<8xf32>" in text
    assert "arith.cmpi sge, %q_idx, %kv_idx : index" in text
    assert captures == [slopes] or captures[0] is slopes


@pytest.mark.parametrize("fn, message", [
    (lambda s, b, h, q, kv: s if q > kv else -s, "Python control flow"),
    (lambda s, b, h, q, kv: torch.erfinv(s), "torch.erfinv is not traced"),
    (lambda s, b, h, q, kv: s + [1.0, 2.0][h], "used as a Python integer"),
    (lambda s, b, h, q, kv: s + torch.ones(3, 3)[q], "indexed with 1 indices"),
])
def test_untraceable_score_mod_is_named(flashmlir, fn, message):
    q, k, v = inputs(1, 1, 1, 4, 4, 16, 6)
    with pytest.raises(flashmlir.CompileError, match=message):
        flashmlir.flex_attention(q, k, v, score_mod=fn)


def test_bad_calls(flashmlir):
    q, k, v = inputs(1, 4, 2, 4, 4, 16, 7)
    with pytest.raises(flashmlir.CompileError, match="need enable_gqa=True"):
        flashmlir.flex_attention(q, k, v)
    with pytest.raises(flashmlir.CompileError, match="mask_mod returns a boolean"):
        flashmlir.flex_attention(q, k, v, enable_gqa=True,
                                 mask_mod=lambda b, h, qi, ki: qi - ki)
    with pytest.raises(flashmlir.CompileError, match="score_mod must be callable"):
        flashmlir.flex_attention(q, k, v, enable_gqa=True, score_mod=3)
    with pytest.raises(flashmlir.CompileError, match="must be 4-D"):
        flashmlir.flex_attention(q[0], k, v, enable_gqa=True)


def test_gpu_module_folds_to_builtin_kernels(flashmlir):
    """The module flex_attention compiles for CUDA tensors: FlexAttention's
    causal mask and tanh softcap fold into the built-in kernel (metadata:
    causal, softcap 20); ALiBi from the head index and a prefix-LM mask fold
    into nothing and compile to a kernel that evaluates them (named by their
    hash); ALiBi reading captured slopes takes them as its last parameter,
    and a launch without them, or with the wrong shape or dtype, is refused
    by name before anything runs."""
    def softcap(score, b, h, q_idx, kv_idx):
        return 20 * torch.tanh(score / 20)

    def causal(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx

    regions, captures = flashmlir.flex.trace_regions(softcap, causal)
    text = flashmlir.flex.flex_module_text(regions, captures, 64, 64, "bf16",
                                           scale=0.125, return_lse=True)
    module = flashmlir.compile_module(text, arch="sm_90a")
    (name, meta), = module.launches
    assert "_causal_" in name and name.endswith("_sc20"), name
    assert meta["causal"] and meta["softcap"] == 20 and meta["writes_lse"]
    assert abs(meta["scale"] - 0.125) < 1e-9
    regions, captures = flashmlir.flex.trace_regions(
        lambda s, b, h, q, kv: s + torch.exp2(-(h + 1.0)) * (kv - q),
        lambda b, h, q, kv: (q >= kv) | (kv < 64))
    text = flashmlir.flex.flex_module_text(regions, captures, 64, 64, "f16")
    (name, meta), = flashmlir.compile_module(text, arch="sm_90a").launches
    assert re.search("_mod[0-9a-f]{16}_", name), name
    assert not meta["causal"] and not meta["softcap"], meta
    slopes = torch.ones(4)
    regions, captures = flashmlir.flex.trace_regions(
        lambda s, b, h, q, kv: s + slopes[h] * (kv - q), causal)
    text = flashmlir.flex.flex_module_text(regions, captures, 64, 64, "f16")
    module = flashmlir.compile_module(text, arch="sm_90a")
    (name, meta), = module.launches
    assert meta["causal"] and "_mod" in name, name
    assert meta["params"][-1] == {"dtype": "f32", "kind": "pointer",
                                  "name": "capture0", "shape": ["4"]}
    kernel = module.kernel(0)
    q = torch.zeros(1, 4, 64, 64, dtype=torch.float16)
    with pytest.raises(flashmlir.runtime.KernelArgumentError,
                       match="reads 1 captured tensor"):
        kernel(q, q, q)
    with pytest.raises(flashmlir.runtime.KernelArgumentError,
                       match=r"capture0 must be a float32 tensor of shape "
                             r"\(4,\)"):
        kernel(q, q, q, captures=[torch.ones(8)])
    with pytest.raises(flashmlir.runtime.KernelArgumentError,
                       match="capture0 must be a float32"):
        kernel(q, q, q, captures=[torch.ones(4, dtype=torch.int32)])



def test_captured_reads_are_bounded(flashmlir):
    """Every read of a captured tensor is checked in range for the call's
    shapes before anything runs (never a read out of bounds): the index
    ranges follow the arguments' (b < B, h < Hq, q_idx < Nq, kv_idx < Nk)
    through the arithmetic, and a captured integer's range is its values'.
    In range: a relative bias indexed by q - kv + Nk - 1, a table indexed by
    document ids, a remainder."""
    q, k, v = inputs(1, 4, 4, 20, 30, 16, 8)
    rel = torch.randn(20 + 30 - 1)

    def relative(score, b, h, q_idx, kv_idx):
        return score + rel[q_idx - kv_idx + 29]

    docs = torch.tensor([i // 7 for i in range(30)])
    per_doc = torch.randn(5)

    def by_document(score, b, h, q_idx, kv_idx):
        return score + per_doc[docs[kv_idx]] + rel[(q_idx * 3) % 7]

    check(flashmlir, q, k, v, relative)
    check(flashmlir, q, k, v, by_document)
    slopes = torch.ones(2)  # 4 heads
    with pytest.raises(flashmlir.CompileError,
                       match=r"shape \[2\] takes values in \[0, 3\]"):
        flashmlir.flex_attention(
            q, k, v, score_mod=lambda s, b, h, qi, ki: s + slopes[h])
    with pytest.raises(flashmlir.CompileError, match=r"\[-29, 19\]"):
        flashmlir.flex_attention(
            q, k, v, score_mod=lambda s, b, h, qi, ki: s + rel[qi - ki])
    short = torch.randn(4)  # document ids go up to 4
    with pytest.raises(flashmlir.CompileError, match=r"takes values in \[0, 4\]"):
        flashmlir.flex_attention(
            q, k, v, score_mod=lambda s, b, h, qi, ki: s + short[docs[ki]])


def test_flags_are_booleans(flashmlir):
    q, k, v = inputs(1, 2, 2, 4, 4, 16, 9)
    for name in ("enable_gqa", "return_lse"):
        with pytest.raises(flashmlir.runtime.KernelArgumentError,
                           match=f"{name} must be True or False"):
            flashmlir.flex_attention(q, k, v, **{name: "yes"})


def test_repeated_calls_reuse_the_compiled_function(flashmlir):
    """A repeated call (same regions, shapes and options) runs the function
    compiled by the first (run_cpu's cache by module text): much faster,
    and the same result; new captured values are read, not compiled in."""
    import time
    q, k, v = inputs(1, 2, 2, 64, 64, 32, 10)
    bias = torch.randn(2)

    def per_head(score, b, h, q_idx, kv_idx):
        return score + bias[h]

    start = time.perf_counter()
    first = flashmlir.flex_attention(q, k, v, score_mod=per_head)
    compiled = time.perf_counter() - start
    start = time.perf_counter()
    again = flashmlir.flex_attention(q, k, v, score_mod=per_head)
    cached = time.perf_counter() - start
    assert torch.equal(first, again)
    assert cached < compiled / 3, (compiled, cached)
    bias.add_(1.0)  # per-head shifts cancel in the softmax...
    check(flashmlir, q, k, v, per_head)
    bias[0] = 50.0  # ...and a captured value is read at run time
    check(flashmlir, q, k, v, lambda s, b, h, qi, ki: s + bias[h] * ki)


def check_gradients(flashmlir, q, k, v, score_mod=None, mask_mod=None,
                    scale=None, tol=1e-4):
    """dQ, dK, dV of flex_attention (its backward on the host: the score_mod
    differentiated from its IR) against torch's autograd through the
    float64 reference, for a random dO."""
    g = torch.Generator().manual_seed(99)
    dout = torch.randn(q.shape[:-1] + (v.shape[-1],), generator=g)
    leaves = [x.clone().requires_grad_(True) for x in (q, k, v)]
    out = flashmlir.flex_attention(*leaves, score_mod=score_mod,
                                   mask_mod=mask_mod, scale=scale,
                                   enable_gqa=True)
    out.backward(dout)
    wants = [x.double().clone().requires_grad_(True) for x in (q, k, v)]
    want, _ = reference(*wants, score_mod, mask_mod, scale)
    want.backward(dout.double())
    for name, got, w in zip("QKV", leaves, wants):
        err = (got.grad.double() - w.grad).norm() / w.grad.norm()
        assert err <= tol, f"d{name} rel err {err:.2e}"


def test_gradients_through_score_and_mask_mods(flashmlir):
    """The backward of traced regions: ALiBi (fma), a captured relative bias
    with documents, a clamped per-head temperature (maximumf, minimumf,
    mulf), a select, and a tanh softcap written as a region (folded into
    the built-in softcap); GQA and a row hidden entirely."""
    q, k, v = inputs(2, 4, 2, 37, 53, 32, 21)
    slopes = torch.tensor([2.0 ** -(i + 1) for i in range(4)])
    check_gradients(flashmlir, q, k, v,
                    lambda s, b, h, qi, ki: s + slopes[h] * (ki - qi),
                    lambda b, h, qi, ki: qi >= ki)
    bias = torch.randn(4, 37, 53)
    docs = torch.tensor([i // 20 for i in range(53)])
    check_gradients(flashmlir, q, k, v,
                    lambda s, b, h, qi, ki: s + bias[h, qi, ki],
                    lambda b, h, qi, ki: docs[qi] == docs[ki])
    check_gradients(flashmlir, q, k, v,
                    lambda s, b, h, qi, ki: torch.clamp(
                        s * (0.5 + h * 0.5), -1.5, 1.5))
    check_gradients(flashmlir, q, k, v,
                    lambda s, b, h, qi, ki: torch.where(ki % 2 == 0, s * 2.0,
                                                        s - 1.0),
                    lambda b, h, qi, ki: (qi >= 8) & (ki <= qi + 16),
                    scale=0.3)
    check_gradients(flashmlir, q, k, v,
                    lambda s, b, h, qi, ki: 5 * torch.tanh(s / 5))


def test_gradients_of_a_score_mod_without_a_derivative_rule(flashmlir):
    """The forward runs; asking for its gradient names the op (the
    verifier of the backward)."""
    q, k, v = inputs(1, 1, 1, 8, 8, 16, 22)
    # The forward: erf through libm (the host pipeline's convert-math-to-libm).
    check(flashmlir, q, k, v, lambda s, b, h, qi, ki: torch.erf(s))
    leaves = [x.clone().requires_grad_(True) for x in (q, k, v)]
    out = flashmlir.flex_attention(*leaves,
                                   score_mod=lambda s, b, h, qi, ki:
                                   torch.erf(s))
    with pytest.raises(flashmlir.CompileError,
                       match="'math.erf' op in score_mod has no derivative "
                             "rule"):
        out.sum().backward()


def test_interpreter_exits_cleanly_after_flex_attention(flashmlir):
    """The compiled functions run_cpu keeps are never destroyed at exit
    (destroying their engines after LLVM's statics crashed the interpreter
    once the script had finished)."""
    import subprocess
    import sys
    code = ("import torch, flashmlir; q = torch.randn(1, 2, 8, 16); "
            "print(flashmlir.flex_attention(q, q, q, mask_mod=lambda b, h, "
            "i, j: i >= j).shape)")
    # The child loads the extension this process loaded (under the
    # sanitizer run, the uninstrumented build's: test_cache.py's child).
    import os
    import pathlib
    loaded = pathlib.Path(flashmlir.compiler._extension().__file__)
    env = dict(os.environ, FLASHMLIR_BUILD_DIR=str(loaded.parents[2]),
               PYTHONPATH=str(pathlib.Path(flashmlir.__file__).parents[1]))
    proc = subprocess.run([sys.executable, "-c", code], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "torch.Size([1, 2, 8, 16])" in proc.stdout


def test_gpu_module_with_sinks(flashmlir):
    """An fa.attention with sinks compiles for sm_90a to a kernel that takes
    the [Hq] logits as its `sinks` parameter; a launch without them, or with
    the wrong shape or dtype, is refused by name before anything runs, and a
    kernel without sinks refuses them."""
    text = ("func.func @f(%q: tensor<1x4x64x64xf16>, %s: tensor<4xf32>) -> "
            "tensor<1x4x64x64xf16> {\n"
            "  %o = fa.attention %q, %q, %q sinks(%s : tensor<4xf32>) "
            "{causal} : tensor<1x4x64x64xf16>, tensor<1x4x64x64xf16>, "
            "tensor<1x4x64x64xf16> -> tensor<1x4x64x64xf16>\n"
            "  return %o : tensor<1x4x64x64xf16>\n}\n")
    module = flashmlir.compile_module(text, arch="sm_90a")
    (name, meta), = module.launches
    assert "_sinks" in name and meta["causal"], name
    assert meta["params"][-1] == {"dtype": "f32", "kind": "pointer",
                                  "name": "sinks", "shape": ["Hq"]}
    kernel = module.kernel(0)
    q = torch.zeros(1, 4, 64, 64, dtype=torch.float16)
    error = flashmlir.runtime.KernelArgumentError
    with pytest.raises(error, match=r"sinks must be a float32 tensor of "
                                    r"shape \(4,\)"):
        kernel(q, q, q)
    with pytest.raises(error, match="sinks must be a float32"):
        kernel(q, q, q, sinks=torch.zeros(8))
    with pytest.raises(error, match="sinks must be a float32"):
        kernel(q, q, q, sinks=torch.zeros(4, dtype=torch.float16))
    plain = flashmlir.compile_module(text.replace(
        " sinks(%s : tensor<4xf32>)", ""), arch="sm_90a").kernel(0)
    with pytest.raises(error, match="built without attention sinks"):
        plain(q, q, q, sinks=torch.zeros(4))
