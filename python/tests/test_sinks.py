"""Attention sinks on the CPU path (flashmlir.run_cpu(sinks=...)): each query
head's logit joins every row's softmax denominator as a key with a zero value
row (gpt-oss). Checked against numpy in float64 that appends the sink as one
more score column and drops it from P V."""
import numpy as np
import pytest


def naive(q, k, v, sinks, causal):
    """O and LSE of softmax([scale Q K^T, s_h]) with the sink column's value
    row zero; grouped-query heads share K/V head h // (Hq // Hkv)."""
    group = q.shape[1] // k.shape[1]
    k = np.repeat(k.astype(np.float64), group, axis=1)
    v = np.repeat(v.astype(np.float64), group, axis=1)
    s = np.einsum("bhnd,bhmd->bhnm", q.astype(np.float64), k)
    s /= np.sqrt(q.shape[-1])
    if causal:
        nq, nk = s.shape[-2:]
        s[..., np.arange(nk)[None, :] > np.arange(nq)[:, None]] = -np.inf
    column = np.broadcast_to(
        sinks.astype(np.float64)[None, :, None, None], s.shape[:-1] + (1,))
    s = np.concatenate([s, column], axis=-1)
    top = s.max(axis=-1, keepdims=True)
    top = np.where(np.isinf(top), 0.0, top)
    p = np.exp(s - top)
    total = p.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(total > 0, (p[..., :-1] / total) @ v, 0.0)
        lse = (top + np.log(total))[..., 0]
    return out, lse


@pytest.mark.parametrize("shape", [(2, 4, 2, 37, 53, 32), (1, 3, 3, 1, 130, 64),
                                   (1, 2, 1, 65, 20, 16)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("order", ["fa1", "fa2"])
def test_sinks_match_numpy(flashmlir, shape, causal, order):
    b, hq, hkv, nq, nk, d = shape
    rng = np.random.default_rng(sum(shape) + causal)
    q = rng.standard_normal((b, hq, nq, d), dtype=np.float32)
    k = rng.standard_normal((b, hkv, nk, d), dtype=np.float32)
    v = rng.standard_normal((b, hkv, nk, d), dtype=np.float32)
    # Head 0 without a sink; the others about as heavy as the keys
    # together, one far heavier (the softmax then mostly goes to it).
    sinks = (np.log(nk) + rng.standard_normal(hq)).astype(np.float32)
    sinks[0] = -np.inf
    if hq > 2:
        sinks[-1] = 40.0
    out, lse = flashmlir.run_cpu(q, k, v, causal=causal, loop_order=order,
                                 block_r=16, block_c=32, sinks=sinks)
    want_out, want_lse = naive(q, k, v, sinks, causal)
    np.testing.assert_allclose(out, want_out, rtol=1e-4, atol=2e-5)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-5, atol=1e-5)
    # The sinks changed the answer: without them it is another one.
    plain, _ = flashmlir.run_cpu(q, k, v, causal=causal, loop_order=order)
    assert np.abs(plain - out).max() > 1e-2


def test_dominant_sink(flashmlir):
    # A sink far above every score takes the whole softmax: O -> 0 and
    # LSE -> s, with no overflow on the way (m starts at log2(e) s).
    rng = np.random.default_rng(7)
    q = rng.standard_normal((1, 1, 8, 16), dtype=np.float32)
    k = rng.standard_normal((1, 1, 8, 16), dtype=np.float32)
    out, lse = flashmlir.run_cpu(q, k, k, sinks=np.array([80.0], np.float32))
    assert np.abs(out).max() < 1e-20
    np.testing.assert_allclose(lse, 80.0, rtol=1e-6)


@pytest.mark.parametrize("sinks,match", [
    (np.array([0.0, np.nan], np.float32), "sink logit 1 to be a finite f32"),
    (np.array([np.inf, 0.0], np.float32), "sink logit 0 to be a finite f32"),
    (np.zeros(3, np.float32), "one logit per query head"),
    (np.zeros((2, 1), np.float32), "one logit per query head")])
def test_bad_sinks_are_refused(flashmlir, sinks, match):
    q = np.zeros((1, 2, 4, 16), np.float32)
    with pytest.raises((ValueError, flashmlir.CompileError), match=match):
        flashmlir.run_cpu(q, q, q, sinks=sinks)


_GPU_SINKS = """
func.func @decode(%q: tensor<1x8x128x128xf16>, %k: tensor<1x8x128x128xf16>,
                  %s: tensor<8xf32>) -> tensor<1x8x128x128xf16> {
  %o = fa.attention %q, %k, %k sinks(%s : tensor<8xf32>) {causal}
      : tensor<1x8x128x128xf16>, tensor<1x8x128x128xf16>, tensor<1x8x128x128xf16>
      -> tensor<1x8x128x128xf16>
  return %o : tensor<1x8x128x128xf16>
}
"""


def test_gpu_compile_takes_sinks_on_sm90_only(flashmlir):
    # The embedding entry (compile_module, the C API's path) compiles an
    # attention with sinks for sm_90a to a kernel that takes them (its
    # `sinks` parameter), and refuses it by name on sm_80 instead of
    # compiling it without them.
    (name, meta), = flashmlir.compile_module(_GPU_SINKS,
                                             arch="sm_90a").launches
    assert "_sinks" in name, name
    assert [p for p in meta["params"] if p["name"] == "sinks"] == [
        {"dtype": "f32", "kind": "pointer", "name": "sinks", "shape": ["Hq"]}]
    with pytest.raises(flashmlir.CompileError,
                       match="attention sinks have a GPU kernel on sm_90a"):
        flashmlir.compile_module(_GPU_SINKS, arch="sm_80")
