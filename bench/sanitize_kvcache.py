"""Runs flash_attn_with_kvcache once on each KV-cache form the serving
kernels serve -- f16 and e4m3 caches, contiguous and paged (16, 64),
split-KV forced and not, ragged lengths, one query (pack-GQA's views) and a
few (the query-group kernels, caches of 64 MiB) -- and checks that every
element of O and the LSE was written (finite). Meant to run under
compute-sanitizer, so that an out-of-bounds read of the cache, the block
table or the descales, or a shared-memory race in the widening pipeline,
is reported:

    for t in memcheck racecheck synccheck; do
      FLASHMLIR_KERNEL_DIR=.serving FLASHMLIR_PAGED_KERNEL_DIR=.serving \\
        compute-sanitizer --tool $t --error-exitcode 1 \\
        python3 bench/sanitize_kvcache.py [--small]
    done
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "python"))
import flashmlir  # noqa: E402


def cache(b, capacity, hkv, page, dtype):
    """K and V caches of `capacity` keys a sequence, contiguous or paged
    (the pages of each sequence scattered by a permutation), and the block
    table (None when contiguous)."""
    if not page:
        shape = (b, capacity, hkv, 128)
        return (torch.randn(shape, device="cuda").to(dtype),
                torch.randn(shape, device="cuda").to(dtype), None)
    per_seq = -(-capacity // page)
    shape = (b * per_seq, page, hkv, 128)
    table = torch.randperm(b * per_seq, device="cuda", dtype=torch.int32)
    return (torch.randn(shape, device="cuda").to(dtype),
            torch.randn(shape, device="cuda").to(dtype),
            table.view(b, per_seq))


def main():
    fp8 = torch.float8_e4m3fn
    cases = []  # (kv dtype, page, b, hq, hkv, nq, capacity, splits, window)
    for kv in (torch.float16, fp8):
        for page in (0, 16, 64):
            cases += [(kv, page, 3, 32, 8, 1, 333, 0, (-1, -1)),
                      (kv, page, 2, 64, 8, 1, 700, 3, (-1, -1)),
                      (kv, page, 2, 32, 8, 3, 333, 0, (-1, -1)),
                      # 64 MiB of K + V codes (more for f16): query groups.
                      (kv, page, 2, 32, 8, 4, 16384, 0, (-1, -1)),
                      (kv, page, 1, 64, 8, 1, 32768, 0, (63, 0))]
    if "--small" in sys.argv[1:]:
        # racecheck's cost grows with the shared-memory accesses: the
        # ragged small caches only.
        cases = [c for c in cases if c[6] < 1000]
    bad = 0
    for kv, page, b, hq, hkv, nq, capacity, splits, window in cases:
        torch.manual_seed(capacity + page + nq)
        k_cache, v_cache, table = cache(b, capacity, hkv, page, kv)
        # Ragged: each sequence a different length, none a multiple of a
        # block.
        lens = torch.tensor([capacity - 13 * i for i in range(b)],
                            device="cuda", dtype=torch.int32)
        q = torch.randn(b, nq, hq, 128, device="cuda", dtype=torch.float16)
        descales = {}
        if kv == fp8:
            # Per tensor, or per (sequence, K/V head) on pages of 64.
            shape = (b, hkv) if page == 64 else (1,)
            descales = {"k_descale": 0.5 + torch.rand(shape, device="cuda"),
                        "v_descale": 0.5 + torch.rand(shape, device="cuda")}
        flashmlir._calls.clear()
        out, lse = flashmlir.flash_attn_with_kvcache(
            q, k_cache, v_cache, cache_seqlens=lens, block_table=table,
            causal=nq > 1 or window != (-1, -1), window_size=window,
            num_splits=splits, return_softmax_lse=True, **descales)
        torch.cuda.synchronize()
        (call,) = flashmlir._calls.values()
        unwritten = int((~torch.isfinite(out)).sum()) + int(
            (~torch.isfinite(lse)).sum())
        bad += unwritten != 0
        print(f"{str(kv).split('.')[-1]} page={page} B={b} Hq={hq} "
              f"Hkv={hkv} Nq={nq} cap={capacity} splits={splits} "
              f"window={window} query_group={call.query_group}: "
              f"unwritten={unwritten}", flush=True)
    print(f"sanitize_kvcache: {len(cases) - bad} passed, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
