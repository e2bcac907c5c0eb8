"""Ring (context-parallel) attention on several GPUs, issue 19's target:
2 GPUs, causal, N = 128k-256k, D = 128, >= 1.8x the single-GPU kernel's
throughput at the same total length, with the per-step overlap reported.

The GPU machine has no MLIR, so the kernels are compiled beforehand where
flash-mlir is built and loaded from --kernels (flashmlir.runtime.Kernel):

    # all of them (both dtypes, D = 64/128/256, causal and not):
    bash bench/build_kernels.sh .cubins
    # or just the two a causal D = 128 f16 ring needs (the diagonal block is
    # causal, the others full):
    build/bin/fa-compile --arch sm_90a --head-dim 128 --dtype f16 \\
        -o .cubins/sm_90a_d128_f16
    build/bin/fa-compile --arch sm_90a --head-dim 128 --dtype f16 --causal \\
        -o .cubins/sm_90a_d128_f16_causal

Then, on the 2-GPU machine:

    torchrun --nproc_per_node=2 bench/ring_attention.py --kernels .cubins \\
        --seq-len 131072 --d 128 --causal --layout zigzag [--out ring.json]
    # one GPU: the full-length kernel and each rank's ring steps run one
    # after another (no communication), i.e. the compute-bound prediction
    python3 bench/ring_attention.py --single --world 2 --kernels .cubins \\
        --n 131072 --d 128 --causal --layout zigzag

(--n is --seq-len; torchrun's own parser reads a bare --n after the script
as an abbreviation of its --nnodes/--nproc_per_node and stops, so under
torchrun write --seq-len, or put `--` before the script.)

First the numerics on --check-n (default 8192): the ring's output, gathered,
against torch's fp32 math attention of the whole sequence must be within
flash-attention's 2x rule (at most twice the error of torch's math
attention computed in the inputs' precision) and within twice the single-GPU
kernel's own error, LSE within 1e-3 relative L2; a failure stops the run
before any timing. Then the timing: medians of CUDA-event times over
--iters runs after --warmup; TFLOP/s = 4 B H N^2 D (x 0.5 causal) over the
slowest rank's time; per step each rank's compute (attention + merge) and
communication (the K/V exchange on its stream) times, the step's span, the
exposed communication (span - compute) and the hidden share (1 - exposed /
communication). The ring runs once per --sm-margins value (SMs a persistent
kernel leaves to NCCL's kernels; 0: the plain kernel).
"""
import argparse
import datetime
import json
import math
import os
import statistics
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "python"))
import flashmlir.distributed as fd  # noqa: E402

DT = {"f16": torch.float16, "bf16": torch.bfloat16}


def log(*args):
    if not dist.is_initialized() or dist.get_rank() == 0:
        print(*args, flush=True)


def flops(b, h, n, d, causal):
    return 4.0 * b * h * n * n * d * (0.5 if causal else 1.0)


def median_ms(fn, iters, warmup, barrier=False):
    """Median CUDA-event time of fn() in ms (each run synchronised)."""
    times = []
    for i in range(warmup + iters):
        if barrier:
            dist.barrier()
        torch.cuda.synchronize()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        if i >= warmup:
            times.append(start.elapsed_time(end))
    return statistics.median(times)


def rel_l2(x, ref):
    return ((x.double() - ref.double()).norm() / ref.double().norm()).item()


def qkv(args, n, generator, device):
    dt = DT[args.dtype]
    shape_q = (args.batch, args.heads, n, args.d)
    shape_kv = (args.batch, args.kv_heads, n, args.d)
    return (torch.randn(shape_q, device=device, dtype=dt, generator=generator),
            torch.randn(shape_kv, device=device, dtype=dt,
                        generator=generator),
            torch.randn(shape_kv, device=device, dtype=dt,
                        generator=generator))


def lowp_math(q, k, v, causal, scale):
    """torch's math attention in the inputs' precision (flash-attention's
    baseline): scores in the dtype, softmax in fp32, cast back, times V."""
    g = q.shape[1] // k.shape[1]
    s = (q @ k.repeat_interleave(g, 1).transpose(-1, -2)) * scale
    if causal:
        n, m = q.shape[2], k.shape[2]
        s = s.masked_fill(torch.ones(n, m, dtype=torch.bool,
                                     device=q.device).triu(1), float("-inf"))
    return torch.softmax(s.float(), -1).to(q.dtype) @ \
        v.repeat_interleave(g, 1)


def judge(o, lse, q, k, v, args, single):
    """The numerics rule on the full sequence (o, lse: the ring's)."""
    scale = 1.0 / math.sqrt(args.d)
    o1, _ = single(q, k, v, args.causal, scale)
    ref, ref_lse = fd.torch_attention(q, k, v, args.causal, scale)
    low = lowp_math(q, k, v, args.causal, scale)
    row = {"N": q.shape[2], "ring_err": rel_l2(o, ref),
           "single_err": rel_l2(o1, ref), "math_lowp_err": rel_l2(low, ref),
           "ring_vs_single": rel_l2(o, o1),
           "lse_err": ((lse - ref_lse).norm() / ref_lse.norm()).item(),
           "finite": bool(torch.isfinite(o).all().item())}
    row["ok"] = (row["finite"]
                 and row["ring_err"] <= 2 * row["math_lowp_err"] + 1e-6
                 and row["ring_err"] <= 2 * row["single_err"] + 1e-6
                 and row["lse_err"] <= 1e-3)
    return row


def compute_only_ms(q, k, v, rank, world, args, step_fn):
    """One rank's ring steps without communication: its local K/V stands
    in for each visiting block (same shapes, same pieces)."""
    scale = 1.0 / math.sqrt(args.d)
    plan = fd.ring_plan(rank, world, args.causal, args.layout)

    def run():
        acc = fd._Accumulator(q, rank, world, args.causal, args.layout,
                              scale, step_fn)
        for step in plan:
            if step["pieces"]:
                acc.attend(step["src"], k, v)
        return acc.result()

    return median_ms(run, args.iters, args.warmup)


def step_table(per_rank):
    """Per-step rows with exposed communication and hidden share."""
    rows = []
    for rank, steps in enumerate(per_rank):
        for s in steps:
            exposed = max(0.0, s["step_ms"] - s["compute_ms"])
            hidden = (1.0 - exposed / s["comm_ms"]) if s["comm_ms"] > 0.01 \
                and (s["send"] or s["recv"]) else None
            rows.append(dict(s, rank=rank, exposed_comm_ms=exposed,
                             hidden=hidden))
    return rows


def print_steps(rows):
    log(f"  {'rank':>4} {'step':>4} {'src':>3} {'send':>4} {'recv':>4} "
        f"{'compute':>9} {'comm':>8} {'span':>9} {'exposed':>8} hidden")
    for r in rows:
        hidden = "-" if r["hidden"] is None else f"{100 * r['hidden']:.0f}%"
        log(f"  {r['rank']:>4} {r['step']:>4} {r['src']:>3} "
            f"{'y' if r['send'] else '-':>4} {'y' if r['recv'] else '-':>4} "
            f"{r['compute_ms']:>9.3f} {r['comm_ms']:>8.3f} "
            f"{r['step_ms']:>9.3f} {r['exposed_comm_ms']:>8.3f} {hidden}")


def environment(args):
    env = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
           "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
           "args": vars(args)}
    try:
        env["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
    except Exception:
        env["nccl"] = None
    try:
        with open(os.path.join(args.kernels, "COMMIT")) as f:
            env["kernels_commit"] = f.read().strip()
    except OSError:
        env["kernels_commit"] = None
    return env


def check_kernels(args, arch):
    """Loads the kernels the ring needs; a missing one stops here with the
    fa-compile command."""
    kernels = fd.KernelAttention(args.kernels, arch)
    for causal in ([False, True] if args.causal else [False]):
        kernels.kernel(arch, args.d, args.dtype, causal)
    return kernels


def distributed_main(args):
    dist.init_process_group("nccl", timeout=datetime.timedelta(minutes=10))
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    device = torch.device("cuda", local)
    arch = fd._gpu_arch(device)
    single = check_kernels(args, arch)
    result = {"mode": "ring", "world": world, "env": environment(args)}
    log(f"ring attention: world {world}, {result['env']['gpu']}, arch {arch},"
        f" B={args.batch} Hq={args.heads} Hkv={args.kv_heads} N={args.n} "
        f"D={args.d} {args.dtype} causal={args.causal} "
        f"layout={args.layout}")
    for n in (args.check_n, args.n):
        fd._check_divisible(n, 2 * world if args.layout == "zigzag"
                            else world, "--n/--check-n")

    # 1. numerics on the smaller size: every rank builds the same full
    #    sequence, runs its shard, the gathered result is judged on rank 0.
    gen = torch.Generator(device=device).manual_seed(1234)
    q, k, v = qkv(args, args.check_n, gen, device)
    shards = [fd.shard_sequence(x, rank, world, 2, args.layout)
              for x in (q, k, v)]
    o, lse = fd.ring_attention(*shards, causal=args.causal,
                               layout=args.layout, backend="kernel",
                               kernel_dir=args.kernels, arch=arch)
    o = fd.gather_sequence(o, 2, args.layout)
    lse = fd.gather_sequence(lse, 2, args.layout)
    ok = torch.ones(1, device=device)
    if rank == 0:
        check = judge(o, lse, q, k, v, args, single)
        result["check"] = check
        log("numerics:", json.dumps(check))
        ok.fill_(1.0 if check["ok"] else 0.0)
    dist.broadcast(ok, 0)
    del q, k, v, shards, o, lse
    torch.cuda.empty_cache()
    if ok.item() != 1.0:
        log("numerics FAILED: no timing")
        dist.destroy_process_group()
        return 1

    # 2. the ring at full size, each rank its own random shards.
    n_local = args.n // world
    gen = torch.Generator(device=device).manual_seed(100 + rank)
    q, k, v = qkv(args, n_local, gen, device)
    total_flops = flops(args.batch, args.heads, args.n, args.d, args.causal)
    result["runs"] = []
    for margin in args.sm_margins:
        def ring():
            return fd.ring_attention(q, k, v, causal=args.causal,
                                     layout=args.layout, backend="kernel",
                                     kernel_dir=args.kernels, arch=arch,
                                     sm_margin=margin, check=False)
        ms = median_ms(ring, args.iters, args.warmup, barrier=True)
        slowest = torch.tensor([ms], device=device)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        stats = []
        fd.ring_attention(q, k, v, causal=args.causal, layout=args.layout,
                          backend="kernel", kernel_dir=args.kernels,
                          arch=arch, sm_margin=margin, check=False,
                          stats=stats)
        step_fn = fd.KernelAttention(args.kernels, arch, margin)
        alone = compute_only_ms(q, k, v, rank, world, args, step_fn)
        # the exchange alone: one step's K/V block to the next rank
        kv = torch.stack((k, v))
        buf = torch.empty_like(kv)

        def exchange():
            ops = [dist.P2POp(dist.isend, kv, (rank + 1) % world),
                   dist.P2POp(dist.irecv, buf, (rank - 1) % world)]
            for r in dist.batch_isend_irecv(ops):
                r.wait()
        comm_ms = (median_ms(exchange, args.iters, args.warmup, barrier=True)
                   if world > 1 else 0.0)
        kv = buf = None  # free the blocks
        gathered = [None] * world
        dist.all_gather_object(gathered, {"steps": stats, "ring_ms": ms,
                                          "compute_only_ms": alone,
                                          "exchange_ms": comm_ms})
        run = {"sm_margin": margin, "ring_ms": slowest.item(),
               "tflops": total_flops / slowest.item() / 1e9,
               "per_rank": [{k_: g[k_] for k_ in ("ring_ms", "compute_only_ms",
                                                  "exchange_ms")}
                            for g in gathered],
               "steps": step_table([g["steps"] for g in gathered])}
        block = 2 * k.numel() * k.element_size()
        slowest_exchange = max(g["exchange_ms"] for g in gathered)
        run["exchange_GBps"] = (block / (slowest_exchange * 1e6)
                                if slowest_exchange else None)
        result["runs"].append(run)
        log(f"sm_margin {margin}: ring {run['ring_ms']:.3f} ms "
            f"({run['tflops']:.1f} TFLOP/s); per rank ring / compute only / "
            f"one exchange ms: " + ", ".join(
                f"{p['ring_ms']:.2f}/{p['compute_only_ms']:.2f}/"
                f"{p['exchange_ms']:.2f}" for p in run["per_rank"])
            + f"; exchange {run['exchange_GBps'] or 0:.0f} GB/s "
            f"({block / 1e6:.0f} MB)")
        print_steps(run["steps"])
    del q, k, v
    torch.cuda.empty_cache()

    # 3. the single-GPU kernel on the whole sequence, on rank 0.
    dist.barrier()
    if rank == 0:
        gen = torch.Generator(device=device).manual_seed(7)
        q, k, v = qkv(args, args.n, gen, device)
        scale = 1.0 / math.sqrt(args.d)
        out = torch.empty_like(q)
        lse = torch.empty(q.shape[:3], device=device, dtype=torch.float32)
        ms = median_ms(lambda: single(q, k, v, args.causal, scale, out=out,
                                      lse=lse), args.iters, args.warmup)
        result["single"] = {"ms": ms, "tflops": total_flops / ms / 1e9}
        q = k = v = out = lse = None
    dist.barrier()
    if rank == 0:
        s = result["single"]
        log(f"single GPU, N={args.n}: {s['ms']:.3f} ms "
            f"({s['tflops']:.1f} TFLOP/s)")
        for run in result["runs"]:
            run["speedup"] = s["ms"] / run["ring_ms"]
            ideal = s["ms"] / max(p["compute_only_ms"]
                                  for p in run["per_rank"])
            run["speedup_compute_only"] = ideal
            log(f"sm_margin {run['sm_margin']}: {world} GPUs / 1 GPU = "
                f"{run['speedup']:.3f}x (target >= 1.8x; without "
                f"communication {ideal:.3f}x)")
        if args.out:
            with open(args.out, "w") as f:
                json.dump(result, f, indent=1)
            log(f"wrote {args.out}")
    dist.destroy_process_group()
    return 0


def single_main(args):
    """One GPU: the full kernel, and every simulated rank's steps in turn."""
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    arch = fd._gpu_arch(device)
    world = args.world
    single = check_kernels(args, arch)
    result = {"mode": "single", "world": world, "env": environment(args)}
    for n in (args.check_n, args.n):
        fd._check_divisible(n, 2 * world if args.layout == "zigzag"
                            else world, "--n/--check-n")
    gen = torch.Generator(device=device).manual_seed(1234)
    q, k, v = qkv(args, args.check_n, gen, device)
    o, lse = fd.simulate_ring(q, k, v, world, args.causal,
                              layout=args.layout, backend="kernel",
                              kernel_dir=args.kernels, arch=arch)
    check = judge(o, lse, q, k, v, args, single)
    result["check"] = check
    print("numerics (simulated ring):", json.dumps(check), flush=True)
    if not check["ok"]:
        print("numerics FAILED: no timing")
        return 1
    del q, k, v, o, lse

    total_flops = flops(args.batch, args.heads, args.n, args.d, args.causal)
    gen = torch.Generator(device=device).manual_seed(7)
    q, k, v = qkv(args, args.n, gen, device)
    scale = 1.0 / math.sqrt(args.d)
    out = torch.empty_like(q)
    lse = torch.empty(q.shape[:3], device=device, dtype=torch.float32)
    ms = median_ms(lambda: single(q, k, v, args.causal, scale, out=out,
                                  lse=lse), args.iters, args.warmup)
    result["single"] = {"ms": ms, "tflops": total_flops / ms / 1e9}
    print(f"single GPU, N={args.n}: {ms:.3f} ms "
          f"({result['single']['tflops']:.1f} TFLOP/s)", flush=True)
    out = lse = None
    result["ranks"] = []
    for rank in range(world):
        qs, ks, vs = (fd.shard_sequence(x, rank, world, 2, args.layout)
                      for x in (q, k, v))
        alone = compute_only_ms(qs, ks, vs, rank, world, args, single)
        result["ranks"].append({"rank": rank, "compute_only_ms": alone})
        print(f"  rank {rank}: its ring steps, no communication: "
              f"{alone:.3f} ms", flush=True)
        del qs, ks, vs
    slowest = max(r["compute_only_ms"] for r in result["ranks"])
    result["predicted_speedup"] = ms / slowest
    print(f"predicted {world} GPUs / 1 GPU (compute only, slowest rank): "
          f"{ms / slowest:.3f}x", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
        print(f"wrote {args.out}")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # --seq-len for torchrun: its own parser takes --n for an abbreviation of
    # its options (--nnodes, --nproc_per_node, ...) and stops; --n works with
    # --single or after `torchrun ... -- bench/ring_attention.py`.
    ap.add_argument("--seq-len", "--n", dest="n", type=int, default=131072,
                    help="total sequence length")
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=None,
                    help="K/V heads (GQA); default: --heads")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--dtype", choices=sorted(DT), default="f16")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--layout", choices=fd.LAYOUTS, default="zigzag")
    ap.add_argument("--kernels", default=os.environ.get(
        "FLASHMLIR_KERNEL_DIR", ".cubins"),
        help="fa-compile output: {arch}_d{D}_{dtype}[_causal].{cubin,json}")
    ap.add_argument("--check-n", type=int, default=8192,
                    help="total length of the numerics check")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--sm-margins", default="0,8",
                    help="comma-separated SM margins to time the ring with")
    ap.add_argument("--single", action="store_true",
                    help="one GPU, no torch.distributed: the full kernel and "
                    "the simulated ranks' steps")
    ap.add_argument("--world", type=int, default=2,
                    help="ranks to simulate with --single")
    ap.add_argument("--out", default=None, help="JSON results file")
    args = ap.parse_args()
    args.kv_heads = args.kv_heads or args.heads
    args.sm_margins = [int(x) for x in args.sm_margins.split(",") if x]
    if "RANK" in os.environ and not args.single:
        return distributed_main(args)
    return single_main(args)


if __name__ == "__main__":
    sys.exit(main())
