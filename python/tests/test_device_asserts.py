"""Bad device-side inputs stop the kernel (marked gpu, on the H200): a KV
cache length past the capacity or negative, an append past the end or
through a block-table entry past the cache's pages (the append kernel's
checks), a block-table entry past the cache's pages, varlen prefix sums that decrease or end past the packed
rows. The public calls read none of these values on the host, so the sm_90a
kernel checks them itself (test/Pipelines/device-asserts-gpu.mlir) and
traps: the launch fails ("unspecified launch failure") and the CUDA context
with it, so each case runs in a process of its own, which must fail and
never print a result. With FLASHMLIR_CHECK_INPUTS=1 the calls check the
same values on the host first and raise KernelArgumentError naming the
rule, before anything is written or launched."""
import os
import subprocess
import sys

import pytest

from conftest import ROOT

PRELUDE = f"""
import sys, torch
sys.path.insert(0, {str(ROOT / 'python')!r})
import flashmlir
torch.manual_seed(0)
b, hq, hkv, d = 2, 8, 2, 128
q = torch.randn(b, 1, hq, d, device="cuda", dtype=torch.float16)
"""

# What torch reports after the kernel's trap.
TRAP = "unspecified launch failure"

CASES = {
    "length past the capacity": ("""
k = torch.randn(b, 256, hkv, d, device="cuda", dtype=torch.float16)
lens = torch.tensor([100, 257], device="cuda", dtype=torch.int32)
out = flashmlir.flash_attn_with_kvcache(q, k, k, cache_seqlens=lens)
""", TRAP, "cache_seqlens[1] = 257"),
    "negative length": ("""
k = torch.randn(b, 256, hkv, d, device="cuda", dtype=torch.float16)
lens = torch.tensor([-1, 10], device="cuda", dtype=torch.int32)
out = flashmlir.flash_attn_with_kvcache(q, k, k, cache_seqlens=lens,
                                        causal=True)
""", TRAP, "cache_seqlens[0] = -1"),
    "append past the capacity": ("""
k = torch.randn(b, 256, hkv, d, device="cuda", dtype=torch.float16)
new = torch.randn(b, 1, hkv, d, device="cuda", dtype=torch.float16)
lens = torch.tensor([10, 256], device="cuda", dtype=torch.int32)
out = flashmlir.flash_attn_with_kvcache(q, k, k, k=new, v=new,
                                        cache_seqlens=lens)
""", TRAP, "cache_seqlens[1] = 256 with 1 new keys"),
    "append through a page past the cache": ("""
k = torch.randn(8, 64, hkv, d, device="cuda", dtype=torch.float16)
new = torch.randn(b, 1, hkv, d, device="cuda", dtype=torch.float16)
table = torch.tensor([[0, 1, 2, 3], [4, 5, 99, 7]], device="cuda",
                     dtype=torch.int32)
lens = torch.tensor([10, 150], device="cuda", dtype=torch.int32)
out = flashmlir.flash_attn_with_kvcache(q, k, k, k=new, v=new,
                                        cache_seqlens=lens, block_table=table)
""", TRAP, "block_table[1] holds 99"),
    "page past the cache": ("""
k = torch.randn(8, 64, hkv, d, device="cuda", dtype=torch.float16)
table = torch.tensor([[0, 1, 2, 3], [4, 5, 99, 7]], device="cuda",
                     dtype=torch.int32)
lens = torch.tensor([256, 200], device="cuda", dtype=torch.int32)
out = flashmlir.flash_attn_with_kvcache(q, k, k, cache_seqlens=lens,
                                        block_table=table)
""", TRAP, "block_table[1] holds 99"),
    "decreasing prefix sums": ("""
t = torch.randn(40, hq, d, device="cuda", dtype=torch.float16)
good = torch.tensor([0, 20, 40], device="cuda", dtype=torch.int32)
bad = torch.tensor([0, 30, 20], device="cuda", dtype=torch.int32)
out = flashmlir.flash_attn_varlen_func(t, t, t, bad, good, 30, 30)
""", TRAP, "cu_seqlens_q [0, 30, 20] must start at 0"),
    "sums past the packed rows": ("""
t = torch.randn(40, hq, d, device="cuda", dtype=torch.float16)
good = torch.tensor([0, 20, 40], device="cuda", dtype=torch.int32)
bad = torch.tensor([0, 20, 41], device="cuda", dtype=torch.int32)
out = flashmlir.flash_attn_varlen_func(t, t, t, good, bad, 20, 20)
""", TRAP, "cu_seqlens_k [0, 20, 41] must start at 0"),
    "max_seqlen_q below the longest": ("""
t = torch.randn(40, hq, d, device="cuda", dtype=torch.float16)
good = torch.tensor([0, 10, 40], device="cuda", dtype=torch.int32)
out = flashmlir.flash_attn_varlen_func(t, t, t, good, good, 10, 30)
""", TRAP, "more than max_seqlen_q = 10"),
}


def _run(case, check_inputs):
    body = CASES[case][0]
    code = PRELUDE + body + "torch.cuda.synchronize()\nprint('RESULT')\n"
    env = dict(os.environ, FLASHMLIR_CHECK_INPUTS="1" if check_inputs
               else "0")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, timeout=300, env=env)
    text = run.stdout + run.stderr
    assert run.returncode != 0 and "RESULT" not in run.stdout, text
    return text


@pytest.mark.gpu
@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_device_inputs_stop_the_kernel(case):
    text = _run(case, check_inputs=False)
    assert CASES[case][1] in text, text


@pytest.mark.gpu
@pytest.mark.parametrize("case", sorted(CASES))
def test_checked_inputs_name_the_rule(case):
    """FLASHMLIR_CHECK_INPUTS=1: refused on the host with the rule, no
    launch (no CUDA error at all)."""
    text = _run(case, check_inputs=True)
    assert "KernelArgumentError" in text and CASES[case][2] in text, text
    assert "CUDA error" not in text, text
