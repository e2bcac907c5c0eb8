"""KV caches on the H200 (issue 17): per-sequence key lengths and paged K/V.

    bash bench/build_paged_kernels.sh .paged           # on the build machine
    python3 bench/paged.py .paged                      # check + bench
    python3 bench/paged.py .paged --check              # numerics only

Numerics: every kernel of the folder that takes a KV cache, on ragged
lengths (an empty sequence, a full one, ragged tails inside a page),
decode and chunked prefill, GQA, pages scattered over a cache larger than
the sequences need (shuffled block table, some pages shared), the cache in
flash-attn's [pages, page_size, Hkv, D] layout read as a strided view. The
reference gathers each sequence's keys from its pages and runs the explicit
masked attention in fp32 (masks.reference) on that sequence alone, so the
lengths, the page mapping and the bottom-right alignment are checked
independently of the kernel. Then flashmlir.flash_attn_with_kvcache with
new K/V appended into the cache. The 2x rule: the kernel's error against
the fp32 reference at most twice torch's f16/bf16 math error plus 1e-5.

Speed: decode (one query per sequence) in GB/s of the K + V a sequence
holds, the contiguous split-KV kernel against the same kernel reading a
paged cache (pages of 16 to 256 rows, every sequence full, shuffled pages)
and cuDNN on the contiguous tensors; chunked prefill (bottom-right causal)
in TFLOP/s, contiguous against paged. triton's do_bench median; ptxas
registers and spills are in the folder's ptxas.txt.
"""
import json
import math
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Kernel, dtypes, kernel_names  # noqa: E402
from common import median_ms as bench  # noqa: E402
from masks import reference  # noqa: E402
import flashmlir  # noqa: E402

DT = dtypes()
SPARE_PAGES = 5


def make_cache(b, hkv, d, lengths, page_size, dtype, capacity=None):
    """A paged cache [pages, page_size, Hkv, D] holding `lengths` keys per
    sequence (random values everywhere, also past the lengths), a shuffled
    block table [B, max_pages], and the keys of each sequence gathered
    contiguously ([Hkv, L, D]) for the reference."""
    capacity = capacity or max(max(lengths), 1)
    max_pages = math.ceil(capacity / page_size)
    pages = b * max_pages + SPARE_PAGES
    k_cache = torch.randn(pages, page_size, hkv, d, device="cuda", dtype=dtype)
    v_cache = torch.randn_like(k_cache)
    perm = torch.randperm(pages, device="cuda")
    table = perm[: b * max_pages].view(b, max_pages).to(torch.int32)
    # The last sequence shares its first page with the first one (prefix
    # sharing): the table may map two sequences to one page.
    if b > 1:
        table[-1, 0] = table[0, 0]
    return k_cache, v_cache, table.contiguous(), capacity


def gather(cache, table, b, length, page_size):
    """Sequence b's first `length` keys, [Hkv, L, D]."""
    j = torch.arange(length, device="cuda")
    rows = cache[table[b].long()[j // page_size], j % page_size]
    return rows.transpose(0, 1)


def per_sequence_reference(q, k_cache, v_cache, table, lengths, page_size,
                           causal, scale, bottom_right, upcast, window=0,
                           softcap=0.0, diagonal_offset=0):
    """O, LSE in fp32 (upcast) or in q's dtype (torch's low-precision math,
    the 2x rule's yardstick), sequence by sequence, with the kernel's
    masks."""
    outs, lses = [], []
    for b, length in enumerate(lengths):
        qb = q[b:b + 1]
        if length == 0:
            outs.append(torch.zeros_like(qb, dtype=torch.float32))
            lses.append(torch.full(qb.shape[:3], float("-inf"),
                                   device="cuda"))
            continue
        kb = gather(k_cache, table, b, length, page_size)[None]
        vb = gather(v_cache, table, b, length, page_size)[None]
        o, lse, _ = reference(qb, kb, vb, scale, causal, window, softcap,
                              bottom_right, upcast, diagonal_offset)
        outs.append(o.float())
        lses.append(lse.float())
    return torch.cat(outs), torch.cat(lses)


def two_x(out, ref, low):
    """flash-attention's rule: max error at most 2x torch's low-precision
    math error (+1e-5)."""
    err = (out.float() - ref).abs().max().item()
    base = (low.float() - ref).abs().max().item()
    return err, base, err <= 2 * base + 1e-5


def check(folder):
    failures = checks = 0
    for name in kernel_names(folder):
        kernel = Kernel.load(os.path.join(folder, name))
        m = kernel.meta
        if not (m.get("kv_lengths") or m.get("page_size")):
            continue
        d, dt = m["head_dim"], DT[m["dtype"]]
        page = m.get("page_size") or 0
        causal, bottom_right = m["causal"], m.get("bottom_right", False)
        # (B, Hq, Hkv, Nq, lengths): decode with an empty and a full
        # sequence, GQA decode, a few queries, chunked prefill with more
        # queries than some sequences have keys.
        cases = [(3, 8, 8, 1, [700, 0, 1]), (2, 32, 8, 1, [4097, 2500]),
                 (4, 4, 2, 5, [333, 64, 129, 1000]),
                 (2, 16, 4, 200, [1031, 150])]
        for (b, hq, hkv, nq, lengths) in cases:
            torch.manual_seed(b * 1000 + nq)
            q = torch.randn(b, hq, nq, d, device="cuda", dtype=dt)
            scale = 1 / math.sqrt(d)
            k_cache, v_cache, table, capacity = make_cache(
                b, hkv, d, lengths, page or 16, dt)
            lens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
            if page:
                k, v, tab, ps = (k_cache.transpose(1, 2),
                                 v_cache.transpose(1, 2), table, page)
            else:
                # Contiguous per-sequence K/V [B, Hkv, capacity, D] holding
                # the same keys (random past the lengths).
                ps = page or 16
                k = torch.randn(b, hkv, capacity, d, device="cuda", dtype=dt)
                v = torch.randn_like(k)
                for i, n in enumerate(lengths):
                    k[i, :, :n] = gather(k_cache, table, i, n, ps)
                    v[i, :, :n] = gather(v_cache, table, i, n, ps)
                tab = None
            masks = dict(window=m.get("window", 0),
                         softcap=m.get("softcap", 0.0),
                         diagonal_offset=m.get("diagonal_offset", 0))
            ref, ref_lse = per_sequence_reference(
                q, k_cache, v_cache, table, lengths, ps, causal, scale,
                bottom_right, upcast=True, **masks)
            low, _ = per_sequence_reference(
                q, k_cache, v_cache, table, lengths, ps, causal, scale,
                bottom_right, upcast=False, **masks)
            for splits in ([1, 3, 0] if m.get("split_kv") else [None]):
                checks += 1
                out = torch.full_like(q, float("nan"))
                lse = torch.full((b, hq, nq), float("nan"), device="cuda")
                kernel(q, k, v, out=out, lse=lse, scale=scale,
                       num_splits=splits, cache_seqlens=lens,
                       block_table=tab)
                torch.cuda.synchronize()
                err, base, ok = two_x(out, ref, low)
                ok &= bool(torch.isfinite(out).all())
                finite = torch.isfinite(ref_lse)
                lse_err = ((lse[finite] - ref_lse[finite]).abs().max().item()
                           if finite.any() else 0.0)
                ok &= lse_err <= 1e-2 and bool(
                    torch.isneginf(lse[~finite]).all())
                failures += not ok
                print(f"{name} B={b} Hq={hq} Hkv={hkv} Nq={nq} "
                      f"lens={lengths} splits={splits}: max_err={err:.2e} "
                      f"torch_low={base:.2e} lse_max_abs={lse_err:.1e} "
                      f"{'PASS' if ok else 'FAIL'}", flush=True)
    failures_api, checks_api = check_api(folder)
    failures += failures_api
    checks += checks_api
    print(f"kv-cache check: {checks - failures} passed, {failures} failed")
    return failures


def check_api(folder):
    """flashmlir.flash_attn_with_kvcache with flash-attn's layouts: decode
    and a chunk of queries, appending new K/V into a paged cache first."""
    failures = checks = 0
    d, dt, page = 128, torch.float16, 64
    for (b, hq, hkv, n_new, lengths) in [(3, 8, 2, 1, [700, 0, 63]),
                                         (2, 8, 8, 7, [100, 1500])]:
        checks += 1
        torch.manual_seed(7 + n_new)
        cap = max(lengths) + n_new
        k_cache, v_cache, table, _ = make_cache(b, hkv, d, lengths, page, dt,
                                                capacity=cap)
        q = torch.randn(b, n_new, hq, d, device="cuda", dtype=dt)
        k_new = torch.randn(b, n_new, hkv, d, device="cuda", dtype=dt)
        v_new = torch.randn_like(k_new)
        lens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
        out = flashmlir.flash_attn_with_kvcache(
            q, k_cache, v_cache, k=k_new, v=v_new, cache_seqlens=lens,
            block_table=table, causal=True, kernel_dir=folder)
        torch.cuda.synchronize()
        total = [n + n_new for n in lengths]
        # The appended keys are in the cache now: the reference reads them
        # from there, and checks they are the new ones.
        appended = all(
            torch.equal(gather(k_cache, table, i, total[i], page)[:, -n_new:],
                        k_new[i].transpose(0, 1))
            for i in range(b))
        qh = q.transpose(1, 2)
        ref, _ = per_sequence_reference(qh, k_cache, v_cache, table, total,
                                        page, True, 1 / math.sqrt(d), True,
                                        upcast=True)
        low, _ = per_sequence_reference(qh, k_cache, v_cache, table, total,
                                        page, True, 1 / math.sqrt(d), True,
                                        upcast=False)
        err, base, ok = two_x(out.transpose(1, 2), ref, low)
        ok &= appended
        failures += not ok
        print(f"flash_attn_with_kvcache B={b} Hq={hq} Hkv={hkv} "
              f"Nnew={n_new} lens={lengths}: appended={appended} "
              f"max_err={err:.2e} torch_low={base:.2e} "
              f"{'PASS' if ok else 'FAIL'}", flush=True)
    return failures, checks


def speed(folder):
    d, dt = 128, torch.float16
    _, sms, dram_gbps = flashmlir.runtime.device_facts(0)
    kernels = {n: Kernel.load(os.path.join(folder, n))
               for n in kernel_names(folder)}
    decode = {n: k for n, k in kernels.items()
              if k.meta.get("split_kv") and k.meta["head_dim"] == d and
              k.meta["dtype"] == "f16" and not k.meta["causal"]}
    rows = []
    for (b, h, nk) in [(1, 32, 32768), (1, 8, 131072), (4, 32, 8192),
                       (8, 32, 8192)]:
        torch.manual_seed(0)
        q = torch.randn(b, h, 1, d, device="cuda", dtype=dt)
        k = torch.randn(b, h, nk, d, device="cuda", dtype=dt)
        v = torch.randn_like(k)
        out = torch.empty_like(q)
        lse = torch.empty(b, h, 1, device="cuda")
        gb = 2 * k.numel() * k.element_size() / 1e9
        row = {"B": b, "H": h, "Nk": nk, "D": d, "kv_GB": gb}
        lens = torch.full((b,), nk, dtype=torch.int32, device="cuda")
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            row["cudnn_GBps"] = gb / (bench(
                lambda: F.scaled_dot_product_attention(q, k, v)) / 1e3)
        for name, kern in decode.items():
            page = kern.meta.get("page_size") or 0
            args = {}
            if kern.meta.get("kv_lengths"):
                args["cache_seqlens"] = lens
            kk, vv = k, v
            if page:
                # Every sequence full, its pages scattered over the cache.
                k_cache, v_cache, table, _ = make_cache(b, h, d, [nk] * b,
                                                        page, dt)
                kk, vv = k_cache.transpose(1, 2), v_cache.transpose(1, 2)
                args["block_table"] = table
            auto = kern.kv_splits_for(b, h, 1, nk, sms, dram_gbps, 0)
            row[f"{name}_auto_splits"] = auto
            row[f"{name}_GBps"] = gb / (bench(
                lambda: kern(q, kk, vv, out=out, lse=lse, num_splits=auto,
                             **args)) / 1e3)
            if page:
                del k_cache, v_cache
        base = row.get("sm_90a_d128_f16_splitkv_GBps")
        for name in decode:
            row[f"{name}_vs_cudnn"] = row[f"{name}_GBps"] / row["cudnn_GBps"]
            if base:
                row[f"{name}_vs_contiguous"] = row[f"{name}_GBps"] / base
        rows.append(row)
        print(json.dumps(row), flush=True)
    # Chunked prefill: 2048 or 4096 new queries after a cache, bottom-right
    # causal: every unsplit causal D 128 f16 kernel of the folder, paged
    # ones on a cache of their page size, against the contiguous kernel.
    prefill = {n: k for n, k in kernels.items()
               if k.meta["causal"] and not k.meta.get("split_kv") and
               (k.meta["head_dim"], k.meta["dtype"]) == (d, "f16")}
    base_name = "sm_90a_d128_f16_causal_bralign"
    for (b, hq, hkv, nq, nk) in ([(4, 32, 8, 2048, 8192),
                                  (1, 32, 8, 4096, 16384)]
                                 if base_name in prefill else []):
        torch.manual_seed(1)
        q = torch.randn(b, hq, nq, d, device="cuda", dtype=dt)
        k = torch.randn(b, hkv, nk, d, device="cuda", dtype=dt)
        v = torch.randn_like(k)
        out = torch.empty_like(q)
        lse = torch.empty(b, hq, nq, device="cuda")
        lens = torch.full((b,), nk, dtype=torch.int32, device="cuda")
        # Causal bottom-right: each query row sees nk - nq + i + 1 keys.
        flops = 4 * b * hq * d * sum(nk - nq + i + 1 for i in range(nq))
        row = {"prefill": True, "B": b, "Hq": hq, "Hkv": hkv, "Nq": nq,
               "Nk": nk, "D": d}
        for name, kern in prefill.items():
            page = kern.meta.get("page_size") or 0
            args = {}
            kk, vv = k, v
            if kern.meta.get("kv_lengths"):
                args["cache_seqlens"] = lens
            if page:
                k_cache, v_cache, table, _ = make_cache(b, hkv, d, [nk] * b,
                                                        page, dt)
                kk, vv = k_cache.transpose(1, 2), v_cache.transpose(1, 2)
                args["block_table"] = table
            row[f"{name}_TFLOPs"] = flops / (bench(
                lambda: kern(q, kk, vv, out=out, lse=lse, **args)) / 1e3) / 1e12
            if page:
                del k_cache, v_cache
        for name in prefill:
            row[f"{name}_vs_contiguous"] = (row[f"{name}_TFLOPs"] /
                                            row[f"{base_name}_TFLOPs"])
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else ".paged"
    failures = check(folder)
    if "--check" in sys.argv:
        return 1 if failures else 0
    rows = speed(folder)
    with open(os.environ.get("OUT", "/tmp") + "/paged.json", "w") as f:
        json.dump(rows, f, indent=1)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
