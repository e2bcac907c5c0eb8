"""What a serving engine sees (issue 45): decode steps of a Llama-style
layer stack through the public calls, eager and replayed from a CUDA graph,
beside torch SDPA's cuDNN and FA2 backends in the same run on the same
card; the decode-attention table of GB/s over the unique K + V bytes; the
per-call host cost of a tiny causal call and of a decode step.

* `steps`: for each (Hq/Hkv, B, Nk, page size), `layers` attentions a step
  (each layer its own paged cache, lengths growing by one a step in place:
  flash-mlir appends the new k, v itself; the SDPA peers attend a
  contiguous cache's first Nk + s keys, written by index_copy_), timed over
  `steps` steps; tokens/s = B / step time. Graphs: one captured step
  replayed (flash-mlir's lengths advance in place between replays; the
  peers' shapes are fixed at capture, so their graph replays attend Nk
  keys).
* `table`: one attention, Nq = 1, the issue's grid (32/32, 32/8, 64/8 x
  B 1/8/64 x Nk 2k..128k where memory allows, contiguous and pages of 16
  and 64), GB/s of K + V read once.
* `host`: 2,000 back-to-back calls, one sync: the host's time per call.

    FLASHMLIR_KERNEL_DIR=.cubins python3 bench/serving.py all --out r.json

Kernels come from FLASHMLIR_KERNEL_DIR (and FLASHMLIR_PAGED_KERNEL_DIR for
paged ones) or are compiled on first use where the extension is built.
"""
import argparse
import contextlib
import json
import math
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "python"))
import flashmlir  # noqa: E402

PEERS = {"cudnn": SDPBackend.CUDNN_ATTENTION,
         "fa2": SDPBackend.FLASH_ATTENTION}


def cuda_ms(fn, reps=50):
    """Median of `reps` timed calls (CUDA events), after a warm-up."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def graphed(fn):
    """fn captured once (warmed up on a side stream, as torch asks); the
    returned callable replays it."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def sdpa(q, k, v):
    """torch SDPA on [B, H, N, D] views with grouped K/V heads, on the
    backend the caller's `backend(name)` context selected."""
    return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)


def backend(name):
    """The SDPA backend `name` selected for everything timed inside (a
    serving engine selects it once, not per call: the context manager's own
    host time stays out of the peers' numbers); a no-op for flash-mlir."""
    return sdpa_kernel([PEERS[name]]) if name in PEERS else \
        contextlib.nullcontext()


class Layer:
    """One attention layer's caches: a paged one for flash-mlir (pages of
    `page`, or contiguous with page 0) and a contiguous [B, Hkv, cap, D] one
    for the SDPA peers."""

    def __init__(self, b, hkv, d, capacity, page, dtype):
        self.page = page
        if page:
            per_seq = math.ceil(capacity / page)
            self.k = torch.randn(b * per_seq, page, hkv, d, device="cuda",
                                 dtype=dtype)
            # Pages dealt at random, as an allocator would.
            self.table = torch.randperm(b * per_seq, device="cuda").view(
                b, per_seq).to(torch.int32)
        else:
            self.k = torch.randn(b, capacity, hkv, d, device="cuda",
                                 dtype=dtype)
            self.table = None
        self.v = torch.randn_like(self.k)
        self.kc = torch.randn(b, hkv, capacity, d, device="cuda", dtype=dtype)
        self.vc = torch.randn_like(self.kc)


def decode_steps(args, hq, hkv, b, nk, page, graphs):
    d, dtype, layers = 128, torch.float16, args.layers
    capacity = nk + args.steps + 8
    stack = [Layer(b, hkv, d, capacity, page, dtype) for _ in range(layers)]
    q = torch.randn(b, 1, hq, d, device="cuda", dtype=dtype)
    k_new = torch.randn(b, 1, hkv, d, device="cuda", dtype=dtype)
    v_new = torch.randn_like(k_new)
    lens = torch.full((b,), nk, device="cuda", dtype=torch.int32)
    pos = torch.tensor([nk], device="cuda")

    def ours():
        for layer in stack:
            flashmlir.flash_attn_with_kvcache(
                q, layer.k, layer.v, k=k_new, v=v_new, cache_seqlens=lens,
                block_table=layer.table, causal=True)
        lens.add_(1)

    def peer(keys):
        qh = q.transpose(1, 2)

        def step():
            for layer in stack:
                layer.kc.index_copy_(2, pos, k_new.transpose(1, 2))
                layer.vc.index_copy_(2, pos, v_new.transpose(1, 2))
                sdpa(qh, layer.kc[:, :, :keys], layer.vc[:, :, :keys])
        return step

    out = {}
    for name, fn in [("flash-mlir", ours)] + [
            (p, peer(nk)) for p in PEERS]:
        lens.fill_(nk)
        try:
            with backend(name):
                run = graphed(fn) if graphs else fn
                ms = cuda_ms(run, reps=args.steps)
            out[name] = {"step_ms": ms, "tokens_per_s": b / ms * 1e3}
        except Exception as e:  # a peer without a kernel for the shape
            out[name] = {"error": f"{type(e).__name__}: {e}"[:300]}
    ours_tps = out["flash-mlir"].get("tokens_per_s")
    for p in PEERS:
        if ours_tps and out[p].get("tokens_per_s"):
            out[f"vs_{p}"] = ours_tps / out[p]["tokens_per_s"]
    return out


def gb_per_s(name, fn, kv_bytes, graphs):
    """GB/s of `kv_bytes` for `fn` on backend `name` (its median time,
    eager or replayed from a CUDA graph), or the error of a peer without a
    kernel for the shape, as text."""
    try:
        with backend(name):
            ms = cuda_ms(graphed(fn) if graphs else fn)
        return kv_bytes / ms / 1e6
    except Exception as e:
        return f"{type(e).__name__}: {e}"[:200]


def table_row(hq, hkv, b, nk, page, graphs):
    d, dtype = 128, torch.float16
    layer = Layer(b, hkv, d, nk, page, dtype)
    q = torch.randn(b, 1, hq, d, device="cuda", dtype=dtype)
    lens = torch.full((b,), nk, device="cuda", dtype=torch.int32)
    qh = q.transpose(1, 2)
    fns = {"flash-mlir": lambda: flashmlir.flash_attn_with_kvcache(
        q, layer.k, layer.v, cache_seqlens=lens, block_table=layer.table,
        causal=True)}
    for p in PEERS:
        fns[p] = (lambda: sdpa(qh, layer.kc, layer.vc))
    kv_bytes = 2 * b * hkv * nk * d * 2
    row = {"kv_mb": kv_bytes / 1e6}
    for name, fn in fns.items():
        row[name] = gb_per_s(name, fn, kv_bytes, graphs)
    for p in PEERS:
        if isinstance(row.get(p), float):
            row[f"vs_{p}"] = row["flash-mlir"] / row[p] \
                if isinstance(row["flash-mlir"], float) else None
    return row


def fp8_row(hq, hkv, b, nk, page, graphs, nq=1):
    """Decode tokens/s of one layer through flash_attn_with_kvcache with an
    f16 cache and with an e4m3 one (per-tensor descales) of the same
    shape, and cuDNN's on the f16 cache, in one run: the e4m3 cache's
    speedup is the ratio of its tokens/s to the f16 cache's. nq > 1:
    speculative decoding's queries (causal, bottom-right: the query-group
    kernels where the cache is large), tokens counted per sequence."""
    d = 128
    layer = Layer(b, hkv, d, nk, page, torch.float16)
    k8, v8 = (x.to(torch.float8_e4m3fn) for x in (layer.k, layer.v))
    descale = torch.ones(1, device="cuda")
    q = torch.randn(b, nq, hq, d, device="cuda", dtype=torch.float16)
    lens = torch.full((b,), nk, device="cuda", dtype=torch.int32)
    qh = q.transpose(1, 2)
    fns = {"f16": lambda: flashmlir.flash_attn_with_kvcache(
               q, layer.k, layer.v, cache_seqlens=lens,
               block_table=layer.table, causal=True),
           "e4m3": lambda: flashmlir.flash_attn_with_kvcache(
               q, k8, v8, cache_seqlens=lens, block_table=layer.table,
               causal=True, k_descale=descale, v_descale=descale),
           "cudnn": lambda: sdpa(qh, layer.kc, layer.vc)}
    if nq > 1:
        del fns["cudnn"]  # its causal mask is top-left: not the same call
    row = {"kv_mb_f16": 2 * b * hkv * nk * d * 2 / 1e6}
    for name, fn in fns.items():
        try:
            with backend(name):
                ms = cuda_ms(graphed(fn) if graphs else fn)
            row[f"{name}_tokens_per_s"] = b / ms * 1e3
            # GB/s of the bytes the call's cache holds.
            row[f"{name}_gb_per_s"] = 2 * b * hkv * nk * d * (
                1 if name == "e4m3" else 2) / ms / 1e6
        except Exception as e:
            row[name] = f"{type(e).__name__}: {e}"[:200]
    if isinstance(row.get("e4m3_tokens_per_s"), float) and \
            isinstance(row.get("f16_tokens_per_s"), float):
        row["e4m3_vs_f16"] = row["e4m3_tokens_per_s"] / row["f16_tokens_per_s"]
    return row


def spec_row(hq, hkv, b, nq, nk, page, graphs):
    """Speculative decoding (or a window at decode): Nq queries a sequence
    over a KV cache, causal (bottom-right). flash-mlir packed (a
    query-group kernel: each K/V block read once per K/V head), the same
    call with the packing rule switched off (each query head reads every
    block), and the SDPA peers with torch's bottom-right causal bias.
    GB/s of the unique K + V bytes."""
    from torch.nn.attention.bias import causal_lower_right
    d, dtype = 128, torch.float16
    layer = Layer(b, hkv, d, nk, page, dtype)
    q = torch.randn(b, nq, hq, d, device="cuda", dtype=dtype)
    lens = torch.full((b,), nk, device="cuda", dtype=torch.int32)
    qh = q.transpose(1, 2)
    bias = causal_lower_right(nq, nk)

    def ours():
        return flashmlir.flash_attn_with_kvcache(
            q, layer.k, layer.v, cache_seqlens=lens, block_table=layer.table,
            causal=True)

    def peer():
        return F.scaled_dot_product_attention(qh, layer.kc, layer.vc,
                                              attn_mask=bias, enable_gqa=True)

    kv_bytes = 2 * b * hkv * nk * d * 2
    row = {"kv_mb": kv_bytes / 1e6}
    rule = flashmlir.query_group_for
    for name, fn in [("flash-mlir", ours), ("unpacked", ours)] + \
            [(p, peer) for p in PEERS]:
        flashmlir.query_group_for = (lambda *a, **kw: 0) \
            if name == "unpacked" else rule
        flashmlir._calls.clear()
        try:
            row[name] = gb_per_s(name, fn, kv_bytes, graphs)
        finally:
            flashmlir.query_group_for = rule
            flashmlir._calls.clear()
    for p in list(PEERS) + ["unpacked"]:
        if isinstance(row.get(p), float) and \
                isinstance(row["flash-mlir"], float):
            row[f"vs_{p}"] = row["flash-mlir"] / row[p]
    return row


def per_call_us(fn, calls=2000, profile=None):
    """The host's time per call of `fn`: `calls` back-to-back calls, one
    sync. `profile`: a path; the calls' cProfile (top functions by own time)
    is written there too, in a second, separately timed pass."""
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    host = (time.perf_counter() - t) / calls * 1e6
    torch.cuda.synchronize()
    if profile:
        import cProfile
        import io
        import pstats
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(calls):
            fn()
        prof.disable()
        torch.cuda.synchronize()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(30)
        with open(profile, "w") as f:
            f.write(text.getvalue())
    return host


def host_costs(profile_dir=None):
    """Host time per call of the tiny causal call and of a decode step,
    flash-mlir's entry points beside SDPA's backends (each selected once,
    outside the timed calls)."""
    torch.manual_seed(0)
    out = {}

    def prof(name):
        return os.path.join(profile_dir, name) if profile_dir else None

    q = torch.randn(1, 128, 8, 64, device="cuda", dtype=torch.float16)
    k, v = torch.randn_like(q), torch.randn_like(q)
    bhnd = [x.transpose(1, 2) for x in (q, k, v)]
    row = {"flash_attn_func": per_call_us(
        lambda: flashmlir.flash_attn_func(q, k, v, causal=True),
        profile=prof("profile-flash_attn_func.txt")),
        "attention": per_call_us(
            lambda: flashmlir.attention(*bhnd, causal=True),
            profile=prof("profile-attention.txt"))}
    for p in PEERS:
        with backend(p):
            row[p] = per_call_us(lambda: F.scaled_dot_product_attention(
                *bhnd, is_causal=True))
    out["tiny causal (B1 H8 N128 D64)"] = row
    b, hq, hkv, d, nk = 1, 32, 8, 128, 4096
    qd = torch.randn(b, 1, hq, d, device="cuda", dtype=torch.float16)
    kc = torch.randn(b, nk, hkv, d, device="cuda", dtype=torch.float16)
    vc = torch.randn_like(kc)
    lens = torch.full((b,), nk, device="cuda", dtype=torch.int32)
    kh, vh = kc.transpose(1, 2), vc.transpose(1, 2)
    row = {"flash_attn_with_kvcache": per_call_us(
        lambda: flashmlir.flash_attn_with_kvcache(
            qd, kc, vc, cache_seqlens=lens, causal=True),
        profile=prof("profile-flash_attn_with_kvcache.txt"))}
    for p in PEERS:
        with backend(p):
            row[p] = per_call_us(lambda: sdpa(qd.transpose(1, 2), kh, vh))
    out["decode step (B1 32/8 Nk 4k)"] = row
    return out


def git_commit():
    """The checkout's commit, or "" where git or .git is missing (the GPU
    machine's copy of the tree)."""
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""


def fits(b, hkv, nk, page):
    """K + V of one layer for ours and the peers (about 4x the cache)."""
    return 4 * 2 * b * hkv * nk * 128 * 2 < 0.6 * \
        torch.cuda.get_device_properties(0).total_memory


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["steps", "table", "host", "spec",
                                         "fp8", "all"])
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--quick", action="store_true",
                        help="a few rows of each, for a first look")
    parser.add_argument("--issue-rows", action="store_true",
                        help="table: issue 45's rows (and pages of 16)")
    parser.add_argument("--fp8-queries", type=int, default=1,
                        help="fp8: queries a sequence (> 1: speculative "
                             "decoding's, on its own grid)")
    parser.add_argument("--out")
    parser.add_argument("--profile-dir",
                        help="host: write each flash-mlir call's cProfile "
                        "there")
    args = parser.parse_args()
    props = torch.cuda.get_device_properties(0)
    result = {"gpu": props.name, "torch": torch.__version__,
              "cudnn": torch.backends.cudnn.version(),
              "date": time.strftime("%Y-%m-%d"),
              "commit": git_commit()}
    heads = [(32, 32), (32, 8), (64, 8)]
    if args.what in ("host", "all"):
        result["host_us"] = host_costs(args.profile_dir)
        print(json.dumps(result["host_us"], indent=1), flush=True)
    if args.what in ("steps", "all"):
        rows = []
        grid = [(hq, hkv, b, nk, page) for hq, hkv in heads
                for b in (1, 8, 64) for nk in (2048, 8192, 32768)
                for page in (0, 64)]
        if args.quick:
            # Llama-3 8B and 70B shapes: a paged batch, batch 1 with a long
            # and a short cache (where the per-layer append is the largest
            # share of a step), and a large paged batch of short caches.
            grid = [(32, 8, 8, 8192, 64), (64, 8, 1, 32768, 0),
                    (32, 8, 1, 8192, 0), (32, 8, 64, 2048, 64)]
        for hq, hkv, b, nk, page in grid:
            if not fits(b * args.layers, hkv, nk, page):
                continue
            for graphs in (False, True):
                r = decode_steps(args, hq, hkv, b, nk, page, graphs)
                r.update(heads=f"{hq}/{hkv}", b=b, nk=nk, page=page,
                         mode="graph" if graphs else "eager")
                print(json.dumps(r), flush=True)
                rows.append(r)
        result["steps"] = rows
    if args.what in ("table", "all"):
        rows = []
        grid = [(hq, hkv, b, nk, page) for hq, hkv in heads
                for b in (1, 8, 64) for nk in (2048, 8192, 32768, 131072)
                for page in (0, 16, 64)]
        if args.quick:
            grid = [(32, 8, 8, 4096, 0), (64, 8, 1, 65536, 0),
                    (32, 8, 32, 8192, 64)]
        if args.issue_rows:
            # Issue 45's table (its measurements before pack-GQA and the
            # device-side checks), and the same shapes on pages of 16.
            grid = [(32, 32, 1, 32768, 0), (8, 8, 1, 131072, 0),
                    (32, 32, 1, 4096, 0), (32, 8, 8, 4096, 0),
                    (32, 8, 64, 2048, 0), (64, 8, 1, 65536, 0),
                    (32, 8, 32, 8192, 64), (32, 8, 32, 8192, 16),
                    (64, 8, 8, 32768, 64), (32, 8, 1, 8192, 0)]
        for hq, hkv, b, nk, page in grid:
            if not fits(b, hkv, nk, page):
                continue
            for graphs in (False, True):
                r = table_row(hq, hkv, b, nk, page, graphs)
                r.update(heads=f"{hq}/{hkv}", b=b, nk=nk, page=page,
                         mode="graph" if graphs else "eager")
                print(json.dumps(r), flush=True)
                rows.append(r)
        result["table"] = rows
    if args.what in ("fp8", "all"):
        # Issue 45's FP8 target: an e4m3 cache's tokens/s against the f16
        # cache's at Nk >= 32k (and below, for the picture).
        rows = []
        grid = [(32, 8, b, nk, page) for b in (1, 8, 64)
                for nk in (8192, 32768, 131072) for page in (0, 64)] + \
            [(64, 8, 1, 131072, 0), (64, 8, 8, 32768, 64)]
        if args.quick:
            grid = [(32, 8, 8, 32768, 64), (64, 8, 1, 131072, 0)]
        if args.fp8_queries > 1:
            # Speculative decoding on e4m3 caches (the query-group kernels).
            grid = [(32, 8, b, nk, page) for b in (1, 8)
                    for nk in (8192, 32768) for page in (0, 64)] + \
                [(64, 8, 1, 32768, 0)]
        for hq, hkv, b, nk, page in grid:
            if not fits(b, hkv, nk, page):
                continue
            for graphs in (False, True):
                r = fp8_row(hq, hkv, b, nk, page, graphs,
                            nq=args.fp8_queries)
                r.update(heads=f"{hq}/{hkv}", b=b, nk=nk, page=page,
                         nq=args.fp8_queries,
                         mode="graph" if graphs else "eager")
                print(json.dumps(r), flush=True)
                rows.append(r)
        result["fp8"] = rows
    if args.what in ("spec", "all"):
        rows = []
        grid = [(32, 8, b, nq, nk, page) for b in (1, 8, 32)
                for nq in (4, 8) for nk in (4096, 32768) for page in (0, 64)]
        grid += [(64, 8, b, nq, 32768, 0) for b in (1, 8) for nq in (4, 16)]
        if args.quick:
            grid = [(32, 8, 8, 4, 8192, 64), (64, 8, 1, 8, 32768, 0)]
        for hq, hkv, b, nq, nk, page in grid:
            if not fits(b, hkv, nk, page):
                continue
            for graphs in (False, True):
                r = spec_row(hq, hkv, b, nq, nk, page, graphs)
                r.update(heads=f"{hq}/{hkv}", b=b, nq=nq, nk=nk, page=page,
                         mode="graph" if graphs else "eager")
                print(json.dumps(r), flush=True)
                rows.append(r)
        result["spec"] = rows
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
