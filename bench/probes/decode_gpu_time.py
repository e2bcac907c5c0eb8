"""Where a short decode call's time goes: the kernels' own GPU time (from a
torch.profiler trace) against triton's do_bench median (what bench/decode.py
and decode_short.py report), for the split-KV kernel at each chunk count and
for cuDNN, with L2 flushed before every call as do_bench does.

    here:  fa-compile --head-dim 128 --split-kv auto -o DIR/default
    there: python3 bench/probes/decode_gpu_time.py DIR [--out FILE.json]
           [--shapes B,H,Nk;...] [--splits 1,2,4] [--kernels default,...]

Per row: GB/s of K + V read by do_bench and by kernel time (the sum of the
call's kernels, median over the iterations), and the median gap between
the flush kernel's end and the call's first kernel (host time the flush did
not hide shows up there and in do_bench, not in the kernel time), and the
host time of a call (enqueue only, median of batches of 20).
"""
import json
import os
import statistics
import sys
import tempfile

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
import flashmlir.runtime  # noqa: E402
from common import Kernel, median_ms  # noqa: E402

ITERATIONS = 40
FLUSH = torch.empty(int(256e6 // 4), dtype=torch.int, device="cuda")


def trace(fn):
    """Per iteration: (kernel microseconds, gap after the flush)."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(ITERATIONS):
            FLUSH.zero_()
            fn()
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        events = json.load(open(f.name))["traceEvents"]
    kernels = sorted((e for e in events if e.get("cat") == "kernel"),
                     key=lambda e: e["ts"])
    # Split the stream at the flush kernels (the fill of FLUSH).
    calls, current, flush_end = [], None, None
    for e in kernels:
        if "fill" in e["name"].lower() or "zero" in e["name"].lower():
            if current:
                calls.append(current)
            current = {"us": 0.0, "gap": None}
            flush_end = e["ts"] + e["dur"]
            continue
        if current is None:
            continue
        if current["gap"] is None:
            current["gap"] = e["ts"] - flush_end
        current["us"] += e["dur"]
    if current:
        calls.append(current)
    calls = [c for c in calls if c["gap"] is not None]
    return (statistics.median(c["us"] for c in calls),
            statistics.median(c["gap"] for c in calls), len(calls))


def host_us(fn, calls=200):
    """Median host time of a call (enqueue only), over batches of 20."""
    import time
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(calls // 20):
        start = time.perf_counter()
        for _ in range(20):
            fn()
        times.append((time.perf_counter() - start) / 20 * 1e6)
        torch.cuda.synchronize()
    return statistics.median(times)


def main():
    folder = sys.argv[1]
    def option(name, default):
        return sys.argv[sys.argv.index(name) + 1] if name in sys.argv \
            else default
    out = option("--out", None)
    shapes = [tuple(int(x) for x in s.split(",")) for s in option(
        "--shapes", "1,32,1024;1,32,2048;1,32,4096;1,32,8192;1,32,32768;"
        "1,8,131072;4,32,8192").split(";")]
    splits = [int(x) for x in option("--splits", "1,2,4,8,16,32").split(",")]
    kernels = {n: Kernel.load(os.path.join(folder, n))
               for n in option("--kernels", "default").split(",")}
    _, sms, dram_gbps = flashmlir.runtime.device_facts(0)
    d = 128
    rows = []
    for b, h, nk in shapes:
        torch.manual_seed(0)
        q = torch.randn(b, h, 1, d, device="cuda", dtype=torch.float16)
        k = torch.randn(b, h, nk, d, device="cuda", dtype=torch.float16)
        v = torch.randn_like(k)
        o = torch.empty_like(q)
        lse = torch.empty(b, h, 1, device="cuda")
        gb = 2 * k.numel() * 2 / 1e9
        calls = {}
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            calls["cudnn"] = lambda: F.scaled_dot_product_attention(q, k, v)
            calls["cudnn"]()
        autos = {}
        for kname, kern in kernels.items():
            autos[kname] = kern.kv_splits_for(b, h, 1, nk, sms, dram_gbps, 0)
            for s in sorted(set(splits) | {autos[kname]}):
                name = s if len(kernels) == 1 else f"{kname}/{s}"
                calls[name] = (lambda s=s, kern=kern: kern(
                    q, k, v, out=o, lse=lse, num_splits=s))
        for name, fn in calls.items():
            if name == "cudnn":
                with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                    bench_ms = median_ms(fn)
                    us, gap, n = trace(fn)
                    host = host_us(fn)
            else:
                bench_ms = median_ms(fn)
                us, gap, n = trace(fn)
                host = host_us(fn)
            kname, _, split = str(name).rpartition("/")
            auto = name != "cudnn" and \
                int(split) == autos[kname or next(iter(kernels))]
            row = {"B": b, "H": h, "Nk": nk, "call": name, "auto": auto,
                   "do_bench_us": round(bench_ms * 1e3, 2),
                   "kernel_us": round(us, 2), "gap_us": round(gap, 2),
                   "host_us": round(host, 2),
                   "do_bench_GBps": round(gb / (bench_ms / 1e3)),
                   "kernel_GBps": round(gb / (us / 1e6)), "calls": n}
            rows.append(row)
            print(json.dumps(row), flush=True)
    if out:
        with open(out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
