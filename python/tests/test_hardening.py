"""Issue 16 (hardening): flashmlir.compile / run_cpu refuse out-of-range
options with the dialect's diagnostics (fa/Dialect/FA/IR/Validation.h),
floats reach the IR exactly, and concurrent failing compiles each raise
their own diagnostic."""
from concurrent.futures import ThreadPoolExecutor

import pytest

from test_compiler import _naive
from test_kv_append import _compile


@pytest.mark.parametrize("kwargs,message", [
    # Before: accepted; the kernel compared 32-bit positions, so window
    # 2^32 + 1 gave the PTX of window 1 while the metadata said 2^32 + 1.
    (dict(head_dim=64, window=2**32 + 1),
     r"expected window to be at most 1073741824 \(2\^30\), got 4294967297 "
     r"\(positions, lengths and offsets are 32-bit integers kept below "
     r"2\^30"),
    (dict(head_dim=64, window=-5), "expected window to be at least 1, got -5"),
    # Before: NaN and negative caps meant "off" without a word; 1e30 reached
    # the kernel name as an overflowed integer and LLVM aborted the process.
    (dict(head_dim=64, softcap=float("nan")),
     r"expected softcap in \[2\^-64, 2\^24\], got nan"),
    (dict(head_dim=64, softcap=-2.0), r"expected softcap in \[2\^-64, 2\^24\], got -2"),
    (dict(head_dim=64, softcap=1e30),
     r"expected softcap in \[2\^-64, 2\^24\], got 1e\+30"),
    # A cap below 2^-64 leaves every score 0 and made the backward's slope
    # overflow (NaN gradients): refused too.
    (dict(head_dim=64, softcap=1e-45),
     r"expected softcap in \[2\^-64, 2\^24\], got 1e-45"),
    (dict(head_dim=64, rescale_threshold=float("inf")),
     r"expected rescale_threshold in \[0, 64\], got inf"),
    (dict(head_dim=64, rescale_threshold=float("nan")),
     "pass None for the default"),
    (dict(head_dim=64, rescale_threshold=200),
     r"expected rescale_threshold in \[0, 64\], got 200"),
    (dict(head_dim=0), r"expected head_dim in \[1, 65536\], got 0"),
    (dict(head_dim=64, block_r=2**21),
     r"expected block_r in \[1, 1048576\], got 2097152"),
    (dict(head_dim=64, poly_exp2_degree=7),
     r"expected exp2_poly_degree in \[2, 5\], got 7"),
    (dict(head_dim=64, poly_exp2_degree=3, poly_exp2_period=0),
     r"expected exp2_poly_period in \[1, 1048576\], got 0"),
])
def test_out_of_range_options_are_refused(flashmlir, kwargs, message):
    with pytest.raises(flashmlir.CompileError, match=message):
        flashmlir.compile(**kwargs)


@pytest.mark.parametrize("scale,message", [
    (float("nan"), r"expected scale in \[2\^-64, 2\^64\], got nan"),
    (-1.0, r"expected scale in \[2\^-64, 2\^64\], got -1"),
    # Before: NaN outputs (log2(e) * scale * q.k overflowed to inf).
    (3e38, r"expected scale in \[2\^-64, 2\^64\], got 3e\+38"),
])
def test_run_cpu_refuses_bad_scales(flashmlir, scale, message):
    import numpy as np
    q = np.ones((1, 1, 4, 16), np.float32)
    with pytest.raises(flashmlir.CompileError, match=message):
        flashmlir.run_cpu(q, q, q, scale=scale)


def test_run_cpu_zero_head_dim_is_refused(flashmlir):
    """Before: the verifier accepted D = 0 and fa-tile divided by 4 D
    (SIGFPE, the interpreter died)."""
    import numpy as np
    q = np.ones((1, 1, 4, 0), np.float32)
    with pytest.raises(flashmlir.CompileError,
                       match=r"expected head dim in \[1, 65536\], got 0"):
        flashmlir.run_cpu(q, q, q)


def test_run_cpu_scale_reaches_the_ir_exactly(flashmlir):
    """A scale crosses into the IR as text: std::to_string wrote 1.4e-6 as
    0.000001 (a 29% error). Scores here are O(1) with that scale, so the
    output tells the two apart."""
    import numpy as np
    rng = np.random.default_rng(16)
    q = (rng.standard_normal((1, 2, 8, 16)) * 1000).astype(np.float32)
    k = (rng.standard_normal((1, 2, 24, 16)) * 1000).astype(np.float32)
    v = rng.standard_normal((1, 2, 24, 16)).astype(np.float32)
    scale = 1.4e-6
    out, _ = flashmlir.run_cpu(q, k, v, scale=scale)
    exact, _ = _naive(q, k, v, False, float(np.float32(scale)))
    rounded, _ = _naive(q, k, v, False, 1e-6)
    err = np.linalg.norm(out - exact) / np.linalg.norm(exact)
    assert err < 1e-5
    assert np.linalg.norm(rounded - exact) / np.linalg.norm(exact) > 100 * err


def _message(flashmlir, kwargs):
    try:
        flashmlir.compile(**kwargs)
    except flashmlir.CompileError as e:
        return str(e)
    return None


def test_concurrent_failing_compiles_keep_their_diagnostics(flashmlir):
    """flashmlir.compile releases the GIL. With one context and a
    diagnostic handler per call, a failing call's diagnostic could land in
    another call's handler: a CompileError with no text or with another
    request's (20% of 1500 calls before the fix). Each concurrent failure
    must carry exactly the text it has when run alone."""
    requests = [dict(head_dim=d, arch=arch)
                for d in (8, 16, 24, 40, 48, 72, 80, 112, 136, 176, 200, 288)
                for arch in ("sm_80", "sm_90a")]
    # A failure from deeper in the pipeline (the tiles overflow shared or
    # tensor memory), so that calls fail at different times.
    requests.append(dict(head_dim=128, arch="sm_100a", block_c=256))
    alone = [_message(flashmlir, r) for r in requests]
    assert all(alone), "every request must fail with a diagnostic"
    assert len(set(alone)) == len(alone)
    calls = list(range(1500))
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(
            lambda i: _message(flashmlir, requests[i % len(requests)]), calls))
    wrong = [(requests[i % len(requests)], got[i]) for i in calls
             if got[i] != alone[i % len(requests)]]
    assert not wrong, f"{len(wrong)} of {len(calls)} wrong, e.g. {wrong[0]}"


def test_attention_stage_spells_softcap_exactly(flashmlir):
    """CompiledKernel.mlir('attention') used '{:e}' (7 digits): softcap
    30.000001 became 3.000000e+01, another op than the one compiled."""
    import struct
    from flashmlir.compiler import _f32_text
    for value in (30.000001, 1.4e-6, 16777216.0, 0.1):
        f32 = struct.unpack("f", struct.pack("f", value))[0]
        assert struct.unpack("f", struct.pack("f", float(_f32_text(value))))[0] == f32
    assert _f32_text(30.000001) != "30.0"


@pytest.mark.parametrize("softcap", [1e-30, -1.0, 2.0 ** 25])
def test_readers_refuse_a_softcap_out_of_range(build_dir, tmp_path, flashmlir,
                                               metadata_check, softcap):
    """Both metadata readers hold a kernel's softcap to fa::checkSoftcap's
    [2^-64, 2^24] (0: none), as the compilers do: a cap below 2^-64 left
    every score 0 and the backward's slope overflowing."""
    runtime = flashmlir.runtime
    meta = _compile(build_dir, tmp_path)
    runtime.validate_metadata(dict(meta, softcap=2.0 ** -64))
    with pytest.raises(runtime.MetadataError, match="softcap"):
        runtime.validate_metadata(dict(meta, softcap=softcap))
