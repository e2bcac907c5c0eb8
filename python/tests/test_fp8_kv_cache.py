"""An e4m3 (FP8) KV cache: the IR and the CPU path take it (fa.attention
with K's and V's descales beside a 16-bit Q; test/Integration/CPU/
fp8-kv-cache.test runs it against the naive reference), the sm_90a kernel
that converts the cache's tiles on chip is not built yet. Until it is,
flash_attn_with_kvcache refuses an e4m3 cache before it writes anything,
naming what runs it, instead of a dtype mismatch or a wrong answer.
torch's float8_e4m3fn needs torch >= 2.1 (the GPU machine's)."""
import pytest


@pytest.mark.gpu
@pytest.mark.parametrize("paged", [False, True])
def test_e4m3_cache_is_refused_before_the_append(cuda_flashmlir, paged):
    torch, flashmlir = cuda_flashmlir
    from flashmlir import runtime
    b, nk, hq, hkv, d = 2, 256, 8, 2, 128
    q = torch.randn(b, 1, hq, d, device="cuda", dtype=torch.float16)
    shape = (b * nk // 64, 64, hkv, d) if paged else (b, nk, hkv, d)
    caches = [torch.randn(shape, device="cuda").to(torch.float8_e4m3fn)
              for _ in range(2)]
    table = torch.arange(b * nk // 64, device="cuda", dtype=torch.int32) \
        .view(b, -1) if paged else None
    new = torch.randn(b, 1, hkv, d, device="cuda", dtype=torch.float16)
    lens = torch.full((b,), 100, device="cuda", dtype=torch.int32)
    before = [c.view(torch.uint8).clone() for c in caches]
    with pytest.raises(runtime.KernelArgumentError,
                       match="e4m3 \\(float8_e4m3fn\\) KV cache has no GPU "
                             "kernel yet; the CPU path runs it"):
        flashmlir.flash_attn_with_kvcache(q, *caches, k=new, v=new,
                                          cache_seqlens=lens,
                                          block_table=table, causal=True)
    for was, cache in zip(before, caches):
        assert torch.equal(was, cache.view(torch.uint8))
