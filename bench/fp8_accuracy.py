#!/usr/bin/env python3
"""FP8 (e4m3) attention accuracy on the CPU path, FlashAttention-3's test.

O of the e4m3 attention against an exact reference (numpy float64 on the
unquantised float32 inputs), RMSE over all elements, for:

  baseline   fa-quantize-fp8: Q, K, V per tensor (descale = amax / 448)
  block      + fa-block-quantize: one descale per tile of Q (block_r rows)
             and K (block_c rows)
  incoherent fa-quantize-fp8 + fa-incoherent-processing (random Hadamard
             transform of Q and K along D before quantisation)
  both       block + incoherent

on N(0, 1) inputs and on FA3's outlier inputs, N(0, 1) + N(0, 100) on 0.1%
of the entries (standard deviation 10 there). Every fp8 run emulates the
kernel's P cast: P * 2^8 rounded to e4m3 for P V (fa-quantize-probs). The
f32 row is the CPU path on the unquantised inputs (the floor).

Then an attention-sink case: 4 keys (the first) whose scores exceed the
others' by about `--sink-gap` (natural-log units), so that the other
probabilities are ~exp(-gap) of the sinks'; P cast with scale 1, with 2^8,
or kept in f32, all with per-tensor quantisation.

    FA_BUILD_DIR=build python3 bench/fp8_accuracy.py \\
        --out bench/results/2026-12-01-fp8-accuracy-cpu.md
"""
import argparse
import datetime
import os
import pathlib
import subprocess
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]


def load_flashmlir():
    build = os.environ.get("FA_BUILD_DIR", str(ROOT / "build"))
    os.environ["FLASHMLIR_BUILD_DIR"] = os.path.abspath(build)
    sys.path.insert(0, str(ROOT / "python"))
    import flashmlir
    return flashmlir


def reference(q, k, v, scale):
    """softmax(scale Q K^T) V in float64, [B, H, N, D]."""
    s = np.einsum("bhnd,bhmd->bhnm", q.astype(np.float64),
                  k.astype(np.float64)) * scale
    s -= s.max(-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(-1, keepdims=True)
    return p @ v.astype(np.float64)


def inputs(rng, kind, shape):
    x = rng.standard_normal(shape)
    if kind == "outliers":
        # FA3's outlier features: N(0, 1) + N(0, 100) on 0.1% of entries.
        x += rng.standard_normal(shape) * 10.0 * (rng.random(shape) < 1e-3)
    return x.astype(np.float32)


def rmse(o, ref):
    return float(np.sqrt(np.mean((o.astype(np.float64) - ref) ** 2)))


VARIANTS = [
    ("f32 (no quantisation)", {}),
    ("baseline (per tensor)", {"fp8": "tensor"}),
    ("block quantisation", {"fp8": "block"}),
    ("incoherent processing", {"fp8": "tensor", "incoherent": True}),
    ("block + incoherent", {"fp8": "block", "incoherent": True}),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", default="64x1024,64x4096,128x1024,128x4096",
                        help="DxN list (B = H = 1)")
    parser.add_argument("--block-r", type=int, default=128)
    parser.add_argument("--block-c", type=int, default=128)
    parser.add_argument("--sink-gap", type=float, default=8.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    fm = load_flashmlir()
    tiles = {"block_r": args.block_r, "block_c": args.block_c,
             "sram_budget": 1 << 22}
    rows, start = [], time.time()
    shapes = [tuple(int(x) for x in s.split("x")) for s in
              args.shapes.split(",")]
    for d, n in shapes:
        for kind in ["normal", "outliers"]:
            rng = np.random.default_rng(args.seed)
            q, k, v = (inputs(rng, kind, (1, 1, n, d)) for _ in range(3))
            ref = reference(q, k, v, 1 / np.sqrt(d))
            for name, opts in VARIANTS:
                o, _ = fm.run_cpu(q, k, v, hadamard_seed=args.seed, **tiles,
                                  **opts)
                rows.append((d, n, kind, name, rmse(o, ref)))
                print(f"D={d} N={n} {kind:8s} {name:24s} rmse={rows[-1][-1]:.2e}",
                      flush=True)

    # Attention sink: queries share a component u = e_0 of size a, the first
    # four keys have b there, a * b * scale = gap; the rest is N(0, 1).
    sink_rows = []
    for d, n in shapes:
        rng = np.random.default_rng(args.seed)
        q, k, v = (inputs(rng, "normal", (1, 1, n, d)) for _ in range(3))
        a = b = np.sqrt(args.sink_gap * np.sqrt(d))
        q[..., 0] = a
        k[..., :4, 0] = b
        k[..., 4:, 0] = 0.0
        # Sink tokens carry (near) zero values, as in trained models: O is
        # then what the other keys contribute, which a collapsed P loses.
        v[..., :4, :] = 0.0
        ref = reference(q, k, v, 1 / np.sqrt(d))
        s = np.einsum("bhnd,bhmd->bhnm", q.astype(np.float64),
                      k.astype(np.float64)) / np.sqrt(d)
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        sink_mass = float(p[..., :4].sum(-1).mean())
        for name, opts in [("P in f32", {"probs_scale": 0}),
                           ("P cast, scale 1", {"probs_scale": 1}),
                           ("P cast, scale 2^8", {"probs_scale": 256})]:
            o, _ = fm.run_cpu(q, k, v, fp8="tensor", **opts, **tiles)
            sink_rows.append((d, n, sink_mass, name, rmse(o, ref),
                              float(np.sqrt(np.mean((o - ref) ** 2) /
                                            np.mean(ref ** 2)))))
            print(f"sink D={d} N={n} mass={sink_mass:.2f} {name:18s} "
                  f"rmse={sink_rows[-1][4]:.2e} rel={sink_rows[-1][5]:.2e}",
                  flush=True)
    elapsed = time.time() - start
    if args.out:
        write(args, rows, sink_rows, elapsed)


def write(args, rows, sink_rows, elapsed):
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True,
                            cwd=ROOT).stdout.strip()
    lines = [
        "# FP8 (e4m3) attention accuracy on the CPU path",
        "",
        f"{datetime.date.today()}, commit {commit}, "
        f"{elapsed:.0f} s on the shared build machine (CPU, no GPU).",
        "",
        "```",
        "FA_BUILD_DIR=build python3 bench/fp8_accuracy.py "
        f"--shapes {args.shapes} --block-r {args.block_r} "
        f"--block-c {args.block_c} --sink-gap {args.sink_gap} "
        f"--seed {args.seed} --out {args.out}",
        "```",
        "",
        "O's RMSE against an exact reference (float64 on the unquantised "
        "float32 inputs), B = H = 1, non-causal, scale 1/sqrt(D). Inputs: "
        "`normal` N(0, 1); `outliers` N(0, 1) + N(0, 100) on 0.1% of the "
        "entries of Q, K and V. fp8 rows quantise Q, K, V with "
        "`fa-quantize-fp8` (and the passes named) and round P * 2^8 to e4m3 "
        "for P V (`fa-quantize-probs`); products accumulate in f32 "
        f"(Hopper's fp8 MMA accumulates with fewer bits: not emulated). Tiles "
        f"(= quantisation blocks) {args.block_r} x {args.block_c}.",
        "",
    ]
    shapes = sorted({(d, n) for d, n, *_ in rows})
    header = "| variant | " + " | ".join(
        f"D={d} N={n} {kind}" for d, n in shapes
        for kind in ["normal", "outliers"]) + " |"
    lines += [header, "|---" * (1 + 2 * len(shapes)) + "|"]
    for name, _ in VARIANTS:
        cells = []
        for d, n in shapes:
            for kind in ["normal", "outliers"]:
                value = [r[4] for r in rows
                         if r[:4] == (d, n, kind, name)][0]
                cells.append(f"{value:.2e}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "FlashAttention-3 (Shah et al. 2024, Table 3, H100, their outlier "
        "inputs): baseline FP8 (per tensor) 2.4e-2, FlashAttention-3 FP8 "
        "(block quantisation + incoherent processing) 9.1e-3, the abstract's "
        "\"2.6x lower numerical error than a baseline FP8 attention\".",
        "",
        "## Attention sink",
        "",
        f"The first 4 keys score about {args.sink_gap:g} (natural log) above "
        "the others for every query (queries share a component a = b on "
        "e_0, sink keys hold b there, a * b / sqrt(D) = gap). Per-tensor "
        "quantisation; the P cast varies. The sinks' values are 0 (as sink "
        "tokens' are, nearly, in trained models), so O is what the other "
        "keys contribute. `sink mass` is the reference's mean probability "
        "on the 4 sinks; the other keys' probabilities relative to the "
        "running max (set by the sinks in the first K/V block) are "
        "~exp(-gap) each: below e4m3's half-smallest subnormal 2^-10 "
        "(ln: -6.93) for a gap of 8, so a cast without scaling flushes "
        "them to 0.",
        "",
        "| D | N | sink mass | P for P V | O RMSE | O rel. L2 |",
        "|---|---|---|---|---|---|",
    ]
    for d, n, mass, name, err, rel in sink_rows:
        lines.append(f"| {d} | {n} | {mass:.2f} | {name} | {err:.2e} | "
                     f"{rel:.2e} |")
    pathlib.Path(args.out).write_text("\n".join(lines) + "\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
