"""Bad device-side inputs stop the kernel (marked gpu, on the H200): a KV
cache length past the capacity or negative (torch's own indexing assert
stops an append past the end), a block-table entry past the
cache's pages, varlen prefix sums that decrease or end past the packed
rows. The public calls read none of these values on the host, so the sm_90a
kernel asserts them itself (test/Pipelines/device-asserts-gpu.mlir); a
failed device-side assert ends the CUDA context, so each case runs in a
process of its own, which must fail with the kernel's message and never
print a result."""
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

CASES = {
    "length past the capacity": ("""
k = torch.randn(b, 256, hkv, d, device="cuda", dtype=torch.float16)
lens = torch.tensor([100, 257], device="cuda", dtype=torch.int32)
out = flashmlir.flash_attn_with_kvcache(q, k, k, cache_seqlens=lens)
""", "kv_lengths (cache_seqlens) must be in [0, capacity]"),
    "negative length": ("""
k = torch.randn(b, 256, hkv, d, device="cuda", dtype=torch.float16)
lens = torch.tensor([-1, 10], device="cuda", dtype=torch.int32)
out = flashmlir.flash_attn_with_kvcache(q, k, k, cache_seqlens=lens,
                                        causal=True)
""", "kv_lengths (cache_seqlens) must be in [0, capacity]"),
    "append past the capacity": ("""
k = torch.randn(b, 256, hkv, d, device="cuda", dtype=torch.float16)
new = torch.randn(b, 1, hkv, d, device="cuda", dtype=torch.float16)
lens = torch.tensor([10, 256], device="cuda", dtype=torch.int32)
out = flashmlir.flash_attn_with_kvcache(q, k, k, k=new, v=new,
                                        cache_seqlens=lens)
""", "index out of bounds"),
    "page past the cache": ("""
k = torch.randn(8, 64, hkv, d, device="cuda", dtype=torch.float16)
table = torch.tensor([[0, 1, 2, 3], [4, 5, 99, 7]], device="cuda",
                     dtype=torch.int32)
lens = torch.tensor([256, 200], device="cuda", dtype=torch.int32)
out = flashmlir.flash_attn_with_kvcache(q, k, k, cache_seqlens=lens,
                                        block_table=table)
""", "block_table entries a sequence reads must be pages of the cache"),
    "decreasing prefix sums": ("""
t = torch.randn(40, hq, d, device="cuda", dtype=torch.float16)
good = torch.tensor([0, 20, 40], device="cuda", dtype=torch.int32)
bad = torch.tensor([0, 30, 20], device="cuda", dtype=torch.int32)
out = flashmlir.flash_attn_varlen_func(t, t, t, bad, good, 30, 30)
""", "cu_seqlens_q and cu_seqlens_k must start at 0"),
    "sums past the packed rows": ("""
t = torch.randn(40, hq, d, device="cuda", dtype=torch.float16)
good = torch.tensor([0, 20, 40], device="cuda", dtype=torch.int32)
bad = torch.tensor([0, 20, 41], device="cuda", dtype=torch.int32)
out = flashmlir.flash_attn_varlen_func(t, t, t, good, bad, 20, 20)
""", "cu_seqlens_q and cu_seqlens_k must start at 0"),
    "max_seqlen_q below the longest": ("""
t = torch.randn(40, hq, d, device="cuda", dtype=torch.float16)
good = torch.tensor([0, 10, 40], device="cuda", dtype=torch.int32)
out = flashmlir.flash_attn_varlen_func(t, t, t, good, good, 10, 30)
""", "no sequence may have more queries than max_seqlen_q"),
}


@pytest.mark.gpu
@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_device_inputs_stop_the_kernel(case):
    body, message = CASES[case]
    code = PRELUDE + body + "torch.cuda.synchronize()\nprint('RESULT')\n"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, timeout=300)
    text = run.stdout + run.stderr
    assert run.returncode != 0 and "RESULT" not in run.stdout, text
    assert message in text, text
