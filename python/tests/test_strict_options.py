"""Options are taken at their type, never coerced: flashmlir.compile,
compile_module and run_cpu refuse a string boolean ('False' is truthy), a
float for an integer (128.9 is not truncated to 128), a string for a number,
and -inf as a rescale threshold (it wrote metadata that is not JSON), with
a CompileError naming the keyword, before anything is compiled. And the
torch operators work on meta tensors outside inference_mode (torch 1.13's
torch.library path), refusing inputs that require grad."""
import pytest

TEXT = """
func.func @attn(%q: memref<1x2x64x64xf16>, %o: memref<1x2x64x64xf16>) {
  fa.attention %q, %q, %q outs(%o : memref<1x2x64x64xf16>)
      : memref<1x2x64x64xf16>, memref<1x2x64x64xf16>, memref<1x2x64x64xf16>
  return
}
"""


@pytest.mark.parametrize("kwargs,message", [
    # Read by their truth before: 'False' built a causal kernel, 'no' a
    # varlen one.
    (dict(causal="False"), "causal must be True or False, got 'False'"),
    (dict(causal=1), "causal must be True or False, got 1"),
    (dict(kv_lengths="False"), "kv_lengths must be True or False"),
    (dict(varlen="no"), "varlen must be True or False"),
    (dict(persistent="False"), "persistent must be True or False or None"),
    (dict(bottom_right="False", causal=True),
     "bottom_right must be True or False"),
    (dict(ping_pong="no"), "ping_pong must be True or False"),
    (dict(intra_overlap=0), "intra_overlap must be True or False"),
    # Truncated or parsed before.
    (dict(head_dim=128.9), "head_dim must be an integer, got 128.9"),
    (dict(head_dim="128"), "head_dim must be an integer, got '128'"),
    (dict(head_dim=True), "head_dim must be an integer, got True"),
    (dict(window=64.5), "window must be an integer"),
    (dict(window="64"), "window must be an integer"),
    (dict(stages=2.7), "stages must be an integer"),
    (dict(poly_exp2_degree=3.9), "poly_exp2_degree must be an integer"),
    (dict(block_r=64.0), "block_r must be an integer"),
    (dict(page_size=64.0, kv_lengths=True), "page_size must be an integer"),
    (dict(value_head_dim=128.0), "value_head_dim must be an integer"),
    (dict(diagonal_offset=2.0, causal=True),
     "diagonal_offset must be an integer"),
    (dict(kv_splits=2.0), "kv_splits must be None, 'auto' or a chunk count"),
    (dict(softcap="30"), "softcap must be a number, got '30'"),
    (dict(softcap=True), "softcap must be a number, got True"),
    (dict(rescale_threshold="8"), "rescale_threshold must be a number"),
    (dict(rescale_threshold=True), "rescale_threshold must be a number"),
    (dict(arch=b"sm_90a"),
     "arch must be one of the strings sm_80, sm_90a or sm_100a, got b'sm_90a'"),
    (dict(dtype=16), "dtype must be one of the strings f16, bf16 or e4m3"),
    (dict(out_dtype=5, dtype="e4m3"),
     "out_dtype must be one of the strings f16, bf16 or e4m3, or None"),
    (dict(sm90_kernel=None),
     "sm90_kernel must be one of the strings wgmma or mma-sync, got None"),
    # -inf reached the metadata as "rescale_threshold": -inf (not JSON: a
    # JSONDecodeError).
    (dict(rescale_threshold=float("-inf")),
     "expected a finite rescale_threshold"),
    # Written into the metadata whatever the degree.
    (dict(poly_exp2_degree=0, poly_exp2_period=0),
     r"expected exp2_poly_period in \[1, 1048576\], got 0"),
    (dict(poly_exp2_period=-5),
     r"expected exp2_poly_period in \[1, 1048576\], got -5"),
])
def test_compile_refuses_coercions(flashmlir, kwargs, message):
    kwargs.setdefault("head_dim", 64)
    before = flashmlir.cache_info()
    with pytest.raises(flashmlir.CompileError, match=message):
        flashmlir.compile(**kwargs, cache_dir="")
    after = flashmlir.cache_info()
    # Refused before the caches and the compiler.
    assert (after.misses, after.compiles) == (before.misses, before.compiles)


def test_cache_dir_is_a_path(flashmlir, tmp_path):
    # 0 meant no disk cache (read by its truth).
    for bad in (0, False, b"dir"):
        with pytest.raises(flashmlir.CompileError,
                           match="cache_dir must be None, '' or a directory"):
            flashmlir.compile(head_dim=64, cache_dir=bad)
    # A path object is a directory (options no other test compiles, so
    # the entry is not in this process's cache already).
    flashmlir.compile(head_dim=32, window=29, cache_dir=tmp_path)
    assert list(tmp_path.glob("*.fmc"))


def test_numpy_scalars_are_their_python_values(flashmlir):
    """A numpy integer or bool is the number it holds (the options are
    normalised: the caches' keys are JSON)."""
    np = pytest.importorskip("numpy")
    a = flashmlir.compile(head_dim=np.int64(64), causal=np.bool_(True),
                          window=np.int32(16), softcap=np.float32(5.0),
                          cache_dir="")
    b = flashmlir.compile(head_dim=64, causal=True, window=16, softcap=5.0,
                          cache_dir="")
    assert a.options == b.options and a.name == b.name
    assert type(a.options["head_dim"]) is int
    assert a.metadata["causal"] is True and a.metadata["window"] == 16


@pytest.mark.parametrize("kwargs,message", [
    (dict(poly_exp2_period=True), "poly_exp2_period must be an integer"),
    (dict(poly_exp2_degree="3"), "poly_exp2_degree must be an integer"),
    (dict(rescale_threshold=float("-inf")),
     "expected a finite rescale_threshold"),
    (dict(rescale_threshold="8"), "rescale_threshold must be a number"),
    (dict(arch=b"sm_90a"), "arch must be one of the strings"),
])
def test_compile_module_refuses_coercions(flashmlir, kwargs, message):
    with pytest.raises(flashmlir.CompileError, match=message):
        flashmlir.compile_module(TEXT, cache_dir="", **kwargs)


def test_compile_module_text_must_be_text(flashmlir):
    with pytest.raises(flashmlir.CompileError, match="MLIR text"):
        flashmlir.compile_module(TEXT.encode(), cache_dir="")


@pytest.mark.parametrize("kwargs,message", [
    # A bare RuntimeError ("Unable to cast Python instance") before; True
    # ran with scale 1.
    (dict(scale="0.5"), "scale must be a number or None, got '0.5'"),
    (dict(scale=True), "scale must be a number or None, got True"),
    (dict(causal="False"), "causal must be True or False"),
    (dict(block_r=64.5), "block_r must be an integer"),
    (dict(incoherent="yes", fp8="tensor"), "incoherent must be True or False"),
    (dict(probs_scale="16"), "probs_scale must be a number"),
])
def test_run_cpu_refuses_coercions(flashmlir, kwargs, message):
    np = pytest.importorskip("numpy")
    x = np.zeros((1, 1, 4, 16), np.float32)
    with pytest.raises(flashmlir.CompileError, match=message):
        flashmlir.run_cpu(x, x, x, **kwargs)


# -- torch operators on meta tensors ------------------------------------------


@pytest.fixture(scope="module")
def ops(flashmlir):
    torch = pytest.importorskip("torch")
    import flashmlir.torch_ops as module
    return torch, module


def _meta(torch, *shape, dtype="float16", **kw):
    return torch.empty(shape, dtype=getattr(torch, dtype), device="meta",
                       **kw)


def test_ops_on_meta_tensors_outside_inference_mode(ops):
    """Before, on torch 1.13: "Could not run 'flashmlir::flash_attn' with
    arguments from the 'AutogradMeta' backend" unless inside
    torch.inference_mode()."""
    torch, t = ops
    assert not torch.is_inference_mode_enabled()
    q = _meta(torch, 2, 128, 4, 64)
    out = torch.ops.flashmlir.flash_attn(q, q, q)
    assert (out.shape, out.dtype, out.device.type) == (q.shape, q.dtype,
                                                       "meta")
    out = t.flash_attn(q, q, q, causal=True, window_size=(16, 0))
    assert out.shape == q.shape
    bhnd = q.transpose(1, 2)
    assert torch.ops.flashmlir.attention(bhnd, bhnd, bhnd, True, 0.5).shape \
        == bhnd.shape
    cache = _meta(torch, 2, 512, 4, 64)
    lens = _meta(torch, 2, dtype="int32")
    out = t.flash_attn_with_kvcache(q[:, :1], cache, cache,
                                    cache_seqlens=lens, causal=True)
    assert out.shape == (2, 1, 4, 64)
    with torch.no_grad():
        assert torch.ops.flashmlir.flash_attn(q, q, q).shape == q.shape
    # The fake's checks still run.
    with pytest.raises(Exception, match="k and v must have one shape"):
        torch.ops.flashmlir.flash_attn(q, q, _meta(torch, 2, 128, 4, 32))


def test_ops_refuse_inputs_that_require_grad(ops):
    """The operators have no autograd formula. On the torch.library path
    a call whose inputs require grad (grad mode on) is refused with a
    clear message rather than returning an output cut off from the graph;
    torch.no_grad() runs it."""
    torch, t = ops
    if t.REGISTRATION != "library":
        pytest.skip("custom_op registration: torch handles autograd")
    from flashmlir.runtime import KernelArgumentError
    q = _meta(torch, 2, 128, 4, 64, requires_grad=True)
    with pytest.raises(KernelArgumentError, match="inference only"):
        torch.ops.flashmlir.flash_attn(q, q, q)
    with torch.no_grad():
        assert torch.ops.flashmlir.flash_attn(q, q, q).shape == q.shape


def test_cpu_tensors_still_reach_the_launcher(ops):
    torch, t = ops
    from flashmlir.runtime import KernelArgumentError
    q = torch.zeros(2, 8, 4, 64, dtype=torch.float16)
    with pytest.raises(KernelArgumentError, match="q must be a CUDA tensor"):
        torch.ops.flashmlir.flash_attn(q, q, q)


@pytest.mark.parametrize("kwargs,message", [
    (dict(window_size=(1.5, 0)), "window_size must be an integer"),
    (dict(window_size=(4,)), "window_size must be a pair"),
    (dict(num_splits=2.0), "num_splits must be an integer"),
    (dict(softcap="30"), "softcap must be a number"),
])
def test_op_wrappers_do_not_truncate(ops, kwargs, message):
    torch, t = ops
    from flashmlir.runtime import KernelArgumentError
    q = _meta(torch, 2, 1, 4, 64)
    cache = _meta(torch, 2, 512, 4, 64)
    with pytest.raises(KernelArgumentError, match=message):
        t.flash_attn_with_kvcache(q, cache, cache, **kwargs)
