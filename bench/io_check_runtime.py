"""The runtime's traffic prediction (flashmlir.predicted_bytes, the C
runtime's faMetadataPredictedBytes / faMetadataPredictedSequenceBytes) for
what bench/io_predict.py's static modules cannot spell: sequences of their
own lengths (KV caches, varlen batches) and V narrower than K, against
Nsight Compute's L2 -> SM reads and SM -> L2 writes on the H200
(bench/io_check.py's metrics).

    python3 bench/io_check_runtime.py predict .varlen .paged .cubins > expected.json
    python3 bench/io_check_runtime.py check expected.json     # on the H200
"""
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from io_check import METRICS, profile  # noqa: E402

# (kernel, Hq, Hkv, Nq or None for varlen, lengths, kv_splits): ragged
# varlen batches (an empty sequence, a one-query one), decode over paged and
# contiguous caches with ragged lengths (one of 1 key), a chunk of queries
# after a cache, pages shorter than a block; then plain batches (lengths
# (B, Nk)) of a padded head dim and of V narrower than K.
LENGTHS_Q = [200, 1, 0, 513, 1000]
LENGTHS_K = [200, 77, 3, 600, 1000]
OTHER_Q = [37, 300, 129, 1, 555, 64]
OTHER_K = [37, 1000, 129, 5, 555, 64]
CASES = [
    ("sm_90a_d128_f16_varlen", 8, 2, None, None, 0),
    ("sm_90a_d128_f16_causal_bralign_varlen", 8, 2, None, None, 0),
    ("sm_90a_d96_f16_causal_bralign_varlen", 8, 2, None, None, 0),
    ("sm_90a_d128_f16_splitkv_kvlens", 32, 8, 1, [700, 1, 64, 3000], 4),
    ("sm_90a_d128_f16_splitkv_kvlens_paged64", 32, 8, 1, [700, 1, 64, 3000],
     4),
    ("sm_90a_d128_f16_splitkv_kvlens_paged16", 32, 8, 1, [700, 1, 64, 3000],
     4),
    ("sm_90a_d128_f16_causal_bralign_kvlens_paged128", 8, 2, 300,
     [300, 1000, 2000], 0),
    ("sm_90a_d96_f16_causal", 16, 4, 2048, (2, 2048), 0),
    ("sm_90a_d192_dv128_f16", 16, 4, 2048, (2, 2048), 0),
    ("sm_90a_d192_f16", 16, 4, 2048, (2, 2048), 0),
    # Added after the LSE sector rule (lseStoreBytes) was set from the
    # rows above: other sequence starts, a split merge of 5 rows a
    # sequence, heads of 333 rows.
    ("sm_90a_d128_f16_varlen", 8, 2, None, (OTHER_Q, OTHER_K), 0),
    ("sm_90a_d128_f16_causal_bralign_varlen", 8, 2, None, (OTHER_Q, OTHER_K),
     0),
    ("sm_90a_d96_f16_causal_bralign_varlen", 8, 2, None, (OTHER_Q, OTHER_K),
     0),
    ("sm_90a_d128_f16_splitkv_kvlens", 32, 8, 5, [700, 1, 64, 3000], 4),
    ("sm_90a_d128_f16_splitkv_kvlens", 32, 8, 1, [4096, 4096], 8),
    ("sm_90a_d128_f16", 8, 8, 333, (3, 333), 0),
    ("sm_90a_d128_f16_causal", 12, 4, 333, (2, 1000), 0),
    # The register epilogue (O transposed within the quad, 16 B a lane):
    # D 64 and 32, and the e4m3 kernels (1-byte Q/K/V, V^T from the layout
    # kernel, O bf16/f16), heads of ragged lengths.
    ("sm_90a_d64_f16", 16, 4, 1000, (2, 1000), 0),
    ("sm_90a_d64_f16_causal", 16, 16, 333, (3, 700), 0),
    ("sm_90a_d32_f16", 8, 8, 4096, (1, 4096), 0),
    ("sm_90a_d128_e4m3_bf16", 16, 4, 1000, (2, 1000), 0),
    ("sm_90a_d128_e4m3_f16_causal", 8, 8, 333, (3, 700), 0),
    ("sm_90a_d256_e4m3_bf16", 8, 2, 2048, (1, 2048), 0),
    # e4m3 reads around the first run's +6.6% (D 128, GQA 4:1, Nk 1000):
    # no ragged tail, no GQA, causal, D 256, and f16 at the same shape.
    ("sm_90a_d128_e4m3_bf16", 16, 4, 1024, (2, 1024), 0),
    ("sm_90a_d128_e4m3_bf16", 16, 16, 1000, (2, 1000), 0),
    ("sm_90a_d128_e4m3_bf16_causal", 16, 4, 1000, (2, 1000), 0),
    ("sm_90a_d256_e4m3_bf16", 16, 4, 1000, (2, 1000), 0),
    ("sm_90a_d128_f16", 16, 4, 1000, (2, 1000), 0),
    # B_c 224 (the D 128 e4m3 default since 550abd0) and 192: V^T in 32-
    # and 64-byte swizzled boxes, the last block past Nk_128.
    ("sm_90a_d128_e4m3_bf16_bc192", 16, 4, 1000, (2, 1000), 0),
    ("sm_90a_d128_e4m3_bf16", 8, 8, 3000, (1, 3000), 0),
]
CAPACITY = 4096  # keys a sequence's cache holds


def predict(folders):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(
        __file__)), "..", "python"))
    import flashmlir
    rows = []
    for name, hq, hkv, nq, lengths, splits in CASES:
        folder = next(f for f in folders
                      if os.path.exists(os.path.join(f, name + ".json")))
        meta = json.load(open(os.path.join(folder, name + ".json")))
        row = dict(kernel=os.path.join(folder, name), Hq=hq, Hkv=hkv,
                   D=meta["head_dim"],
                   Dv=meta.get("value_head_dim", meta["head_dim"]),
                   kv_splits=splits)
        if isinstance(lengths, tuple) and isinstance(lengths[0], int):
            b, nk = lengths
            row.update(B=b, Nq=nq, Nk=nk)
            reads, writes = flashmlir.predicted_bytes(meta, b, hq, hkv, nq,
                                                      nk)
        elif meta.get("varlen"):
            cq = [0]
            ck = [0]
            for a, b in zip(*(lengths or (LENGTHS_Q, LENGTHS_K))):
                cq.append(cq[-1] + a)
                ck.append(ck[-1] + b)
            row.update(cu_seqlens_q=cq, cu_seqlens_k=ck)
            reads, writes = flashmlir.predicted_bytes(
                meta, 1, hq, hkv, 1, 1, cu_seqlens_q=cq, cu_seqlens_k=ck)
        else:
            row.update(B=len(lengths), Nq=nq, kv_lengths=lengths,
                       page_size=meta.get("page_size", 0))
            reads, writes = flashmlir.predicted_bytes(
                meta, len(lengths), hq, hkv, nq, CAPACITY,
                kv_splits=splits or None, kv_lengths=lengths)
        row.update(predicted_read=reads, predicted_write=writes)
        rows.append(row)
    json.dump(rows, sys.stdout, indent=1)


def launch(rows):
    import torch
    from common import Kernel
    for r in rows:
        kernel = Kernel.load(r["kernel"])
        torch.manual_seed(0)
        d, dv, hq, hkv = r["D"], r["Dv"], r["Hq"], r["Hkv"]
        f16 = dict(device="cuda", dtype=torch.float16)
        if "Nk" in r:
            q = torch.randn(r["B"], hq, r["Nq"], d, **f16)
            k = torch.randn(r["B"], hkv, r["Nk"], d, **f16)
            v = torch.randn(r["B"], hkv, r["Nk"], dv, **f16)
            if kernel.meta["dtype"] == "e4m3":
                # Codes of N(0, 1) / 4, descale 1/4 (what is counted is
                # bytes, not values).
                fp8 = torch.float8_e4m3fn
                kernel((q * 4).to(fp8), (k * 4).to(fp8), (v * 4).to(fp8),
                       q_descale=0.25, k_descale=0.25, v_descale=0.25)
            else:
                kernel(q, k, v)
        elif "cu_seqlens_q" in r:
            cq, ck = r["cu_seqlens_q"], r["cu_seqlens_k"]
            # flash-attn's packed [total, H, D], as [1, H, total, D] views.
            q = torch.randn(cq[-1], hq, d, **f16).unsqueeze(0).transpose(1, 2)
            k, v = (torch.randn(ck[-1], hkv, d, **f16).unsqueeze(0)
                    .transpose(1, 2) for _ in range(2))
            sums = [torch.tensor(x, dtype=torch.int32, device="cuda")
                    for x in (cq, ck)]
            kernel(q, k, v, cu_seqlens_q=sums[0], cu_seqlens_k=sums[1],
                   max_seqlen_q=max(b - a for a, b in zip(cq, cq[1:])))
        else:
            b, lengths, page = r["B"], r["kv_lengths"], r["page_size"]
            q = torch.randn(b, hq, r["Nq"], d, **f16)
            lens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
            args = dict(cache_seqlens=lens)
            if page:
                pages_per = math.ceil(CAPACITY / page)
                # flash-attn's [pages, page_size, Hkv, D], pages shuffled.
                k, v = (torch.randn(b * pages_per, page, hkv, d, **f16)
                        .transpose(1, 2) for _ in range(2))
                args["block_table"] = torch.randperm(
                    b * pages_per, device="cuda").view(b, pages_per).to(
                        torch.int32)
            else:
                k, v = (torch.randn(b, hkv, CAPACITY, d, **f16)
                        for _ in range(2))
            if r["kv_splits"]:
                args["num_splits"] = r["kv_splits"]
            kernel(q, k, v, **args)
        torch.cuda.synchronize()


def check(expected):
    rows = json.load(open(expected))
    table = profile([os.path.abspath(__file__), "launch", expected],
                    len(rows), "io_check_runtime")
    if table is None:
        return 1
    print("| kernel | lengths | predicted L2->SM | measured | diff | "
          "predicted writes | measured | diff |")
    print("|---|---|---|---|---|---|---|---|")
    worst = worst_write = 0.0
    results = []
    for r, t in zip(rows, table):
        read = float(t[METRICS[0]].replace(",", ""))
        write = float(t[METRICS[2]].replace(",", ""))
        diff = read / r["predicted_read"] - 1
        diff_write = write / r["predicted_write"] - 1
        worst, worst_write = max(worst, abs(diff)), max(worst_write,
                                                        abs(diff_write))
        lengths = (f"B {r['B']} Hq {r['Hq']} Hkv {r['Hkv']} N {r['Nk']}"
                   if "Nk" in r else
                   f"q {LENGTHS_Q} k {LENGTHS_K}" if "cu_seqlens_q" in r
                   else f"Nq {r['Nq']} k {r['kv_lengths']}"
                   f"{' S=' + str(r['kv_splits']) if r['kv_splits'] else ''}")
        print(f"| {os.path.basename(r['kernel'])} | {lengths} | "
              f"{r['predicted_read']} | {read:.0f} | {diff * 100:+.3f}% | "
              f"{r['predicted_write']} | {write:.0f} | "
              f"{diff_write * 100:+.2f}% |")
        results.append(dict(r, measured_read=read, measured_write=write))
    json.dump(results, open(os.path.join(os.environ.get("OUT", "."),
                                         "io-check-runtime.json"), "w"),
              indent=1)
    print(f"io_check_runtime: {len(rows)} launches, largest L2->SM "
          f"difference {worst * 100:.3f}%, largest write difference "
          f"{worst_write * 100:.2f}%")
    return 0


def main():
    mode = sys.argv[1]
    if mode == "predict":
        return predict(sys.argv[2:])
    if mode == "launch":
        return launch(json.load(open(sys.argv[2])))
    return check(sys.argv[2])


if __name__ == "__main__":
    sys.exit(main())
