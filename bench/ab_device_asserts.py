"""A/B: the KV-cache and varlen kernels with their device-side asserts
(__assertfail calls, which make ptxas serialize the wgmmas: C7510) and
without, on prefill-sized shapes where the tensor cores bound the time.
Kernels from two folders compiled alike but for the asserts.

    python3 bench/ab_device_asserts.py .ab/with .ab/without
"""
import json
import sys

import torch

sys.path.insert(0, "python")
sys.path.insert(0, "bench")
from flashmlir import runtime  # noqa: E402
from serving import cuda_ms  # noqa: E402


def cases(d=128):
    f16 = dict(device="cuda", dtype=torch.float16)
    torch.manual_seed(0)
    seqs, n, h = 4, 4096, 16
    total = seqs * n
    q = torch.randn(1, h, total, d, **f16)
    k, v = torch.randn_like(q), torch.randn_like(q)
    cu = torch.arange(0, total + 1, n, device="cuda", dtype=torch.int32)
    varlen = dict(cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=n)
    flops = 4 * seqs * h * n * n * d
    yield "sm_90a_d128_f16_varlen", (q, k, v), varlen, flops
    yield "sm_90a_d128_f16_causal_varlen", (q, k, v), varlen, flops / 2
    # Chunked prefill on a paged cache: 1024 new queries on 8k keys.
    b, hq, hkv, nq, nk, page = 4, 32, 8, 1024, 8192, 64
    pages = b * nk // page
    kc = torch.randn(pages, hkv, page, d, **f16)
    vc = torch.randn_like(kc)
    table = torch.arange(pages, device="cuda", dtype=torch.int32).view(b, -1)
    lens = torch.full((b,), nk, device="cuda", dtype=torch.int32)
    qc = torch.randn(b, hq, nq, d, **f16)
    flops = 4 * b * hq * nq * nk * d
    yield ("sm_90a_d128_f16_causal_bralign_kvlens_paged64", (qc, kc, vc),
           dict(cache_seqlens=lens, block_table=table), flops)
    kcc = torch.randn(b, hkv, nk, d, **f16)
    vcc = torch.randn_like(kcc)
    yield ("sm_90a_d128_f16_causal_bralign_kvlens", (qc, kcc, vcc),
           dict(cache_seqlens=lens), flops)
    # Decode, packed (64/8 at B 1: [1, 8, 8, D] on 64k keys), split 16;
    # "tflops" of this row are K + V bytes / 1e12 per second (TB/s).
    nk = 65536
    kd = torch.randn(1, 8, nk, d, **f16)
    vd = torch.randn_like(kd)
    qd = torch.randn(1, 8, 8, d, **f16)
    lens = torch.full((1,), nk, device="cuda", dtype=torch.int32)
    yield ("sm_90a_d128_f16_splitkv_kvlens", (qd, kd, vd),
           dict(cache_seqlens=lens, num_splits=16), 2 * kd.numel() * 2)


def main():
    with_dir, without_dir = sys.argv[1], sys.argv[2]
    rows = []
    for name, (q, k, v), extra, flops in cases():
        row = {"kernel": name}
        for tag, folder in (("with", with_dir), ("without", without_dir)):
            kernel = runtime.Kernel.load(f"{folder}/{name}")
            out = torch.empty(q.shape, dtype=q.dtype, device="cuda")
            ms = cuda_ms(lambda: kernel(q, k, v, out=out, discard_lse=True,
                                        **extra), reps=30)
            row[tag] = {"ms": ms, "tflops": flops / ms / 1e9}
        row["with_over_without"] = row["with"]["ms"] / row["without"]["ms"]
        print(json.dumps(row), flush=True)
        rows.append(row)
    json.dump(rows, open(sys.argv[3] if len(sys.argv) > 3 else
                         "/dev/null", "w"), indent=1)


if __name__ == "__main__":
    main()
