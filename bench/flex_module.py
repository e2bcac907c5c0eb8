"""Issue 49's FlexAttention-style modules on the GPU. The attentions of
test/Inputs/flex_regions_f16.mlir spell the causal mask, a softcap of 30 and
a sliding window of 64 keys as score_mod / mask_mod regions, which
compileModule folds into the built-in kernels (fa-fold-modifications); those
of test/Inputs/flex_regions_inlined_f16.mlir (ALiBi, prefix-LM, documents, a
distance decay after a softcap, a per-head temperature with a per-batch
mask) fold into none, and the kernel evaluates them on every score
(fagpu.modify_scores). Built here,

    build/bin/fa-compile-module --arch sm_90a -o .flex \\
        test/Inputs/flex_regions_f16.mlir
    build/bin/fa-compile-module --arch sm_90a -o .flex-inlined \\
        test/Inputs/flex_regions_inlined_f16.mlir

this script launches those artefacts alone (the cubin and each launch's
metadata) and checks each launch against the regions' own arithmetic,
written out here in torch (not the metadata's reading of it): in float64,
and in f16 for flash-attention's 2x rule,

    build/bin/fa-compile-module --arch sm_90a -o .flex-sinks \\
        test/Inputs/sinks_f16.mlir

    python3 bench/flex_module.py .flex [.flex-inlined [.flex-sinks]]

A launch whose kernel takes key_ranges (a mask_mod's) runs again with the
ranges flashmlir.create_block_mask makes from the same mask (MASKS), for
the same 2x rule and the time with and without them (and with the hull
alone, no full blocks).
"""
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "python"))
from flashmlir import create_block_mask  # noqa: E402
from flashmlir.runtime import Kernel  # noqa: E402
from common import two_x_l2  # noqa: E402

SCALE = 0.088388346


def softcap_causal(s, b, h, i, j, caps):
    """score_mod 30 tanh(s / 30), mask_mod i >= j."""
    return (30 * torch.tanh(s / 30)).masked_fill(~(i >= j), -math.inf)


def sliding_window(s, b, h, i, j, caps):
    """mask_mod i >= j and i - j <= 63."""
    return s.masked_fill(~((i >= j) & (i - j <= 63)), -math.inf)


def alibi_causal(s, b, h, i, j, caps):
    """score_mod s + 2^(-2 (h + 1)) (j - i), mask_mod i >= j."""
    slope = torch.exp2(-2.0 * (h + 1).to(s.dtype))
    return (s + slope * (j - i).to(s.dtype)).masked_fill(~(i >= j), -math.inf)


def prefix_lm(s, b, h, i, j, caps):
    """mask_mod i >= j or j < 64."""
    return s.masked_fill(~((i >= j) | (j < 64)), -math.inf)


def documents(s, b, h, i, j, caps):
    """mask_mod i // 96 == j // 96 and i >= j."""
    return s.masked_fill(~((i // 96 == j // 96) & (i >= j)), -math.inf)


def capped_decay(s, b, h, i, j, caps):
    """softcap 30, then score_mod s + 0.5 log(1 + exp(-|i - j| / 32))."""
    d = (i - j).abs().to(s.dtype)
    return 30 * torch.tanh(s / 30) + 0.5 * torch.log1p(torch.exp(-d / 32))


def head_temperature(s, b, h, i, j, caps):
    """score_mod 20 tanh(s (h + 1) / 80), mask_mod b even or j < 200."""
    t = 20 * torch.tanh(s * (h + 1).to(s.dtype) / 80)
    return t.masked_fill(~((b % 2 == 0) | (j < 200)), -math.inf)


def alibi_captured(s, b, h, i, j, caps):
    """score_mod s + slopes[h] (j - i) (slopes captured), causal."""
    slope = caps[0][h].to(s.dtype)
    return (s + slope * (j - i).to(s.dtype)).masked_fill(~(i >= j), -math.inf)


def packed_documents(s, b, h, i, j, caps):
    """mask_mod ids[i] == ids[j] (ids captured), causal."""
    ids = caps[1]
    return s.masked_fill(~((ids[i] == ids[j]) & (i >= j)), -math.inf)


def inlined_captures(device):
    """The inlined module's captures: 16 ALiBi slopes 2^(-8 (h + 1) / 16),
    and each of 16k positions' document id (documents of 1 to 1,500
    positions)."""
    slopes = torch.exp2(-8.0 * torch.arange(1, 17, dtype=torch.float32) / 16)
    gen = torch.Generator().manual_seed(49)
    lengths = torch.randint(1, 1500, (64,), generator=gen)
    ids = torch.repeat_interleave(torch.arange(64), lengths)[:16384]
    ids = torch.cat([ids, torch.full((16384 - len(ids),), 64)])
    return [slopes.to(device), ids.to(torch.int32).to(device)]


def causal(s, b, h, i, j, caps):
    """The built-in causal mask."""
    return s.masked_fill(~(i >= j), -math.inf)


def causal_window(s, b, h, i, j, caps):
    """The built-in causal mask with a window of 128 keys."""
    return s.masked_fill(~((i >= j) & (i - j < 128)), -math.inf)


def sink_logits(heads, device):
    """Each head's sink logit (natural log), head 1's -inf (no sink)."""
    x = 1.5 * torch.sin(torch.arange(heads, dtype=torch.float32) + 1.0)
    x[1] = -math.inf
    return x.to(device)


MODULES = [
    [("causal + softcap 30 (regions)", softcap_causal),
     ("sliding window 64 (regions)", sliding_window)],
    [("ALiBi + causal (score_mod)", alibi_causal),
     ("prefix-LM 64 (mask_mod)", prefix_lm),
     ("documents of 96, causal (mask_mod)", documents),
     ("softcap 30 + distance decay (score_mod)", capped_decay),
     ("head temperature + batch mask (both)", head_temperature),
     ("ALiBi from captured slopes, causal", alibi_captured),
     ("packed documents from captured ids, causal", packed_documents),
     ("built-in causal (the baseline)", causal)],
    [("sinks, causal", causal),
     ("sinks, causal window 128", causal_window)],
]


# The mask_mod of each launch that has one, as create_block_mask evaluates
# it (b, h, q_idx, kv_idx index tensors; caps: the captures).
MASKS = {
    "prefix-LM 64 (mask_mod)": lambda b, h, i, j, caps: (i >= j) | (j < 64),
    "documents of 96, causal (mask_mod)":
        lambda b, h, i, j, caps: (i // 96 == j // 96) & (i >= j),
    "head temperature + batch mask (both)":
        lambda b, h, i, j, caps: (b % 2 == 0) | (j < 200),
    "packed documents from captured ids, causal":
        lambda b, h, i, j, caps: (caps[1][i] == caps[1][j]) & (i >= j),
}


def key_ranges_for(name, meta, caps, b, h, n):
    """The launch's key_ranges from its mask (None where it takes none)."""
    if not any(p["name"] == "key_ranges" for p in meta["params"]):
        return None
    mask = MASKS[name]
    block = create_block_mask(lambda bb, hh, i, j: mask(bb, hh, i, j, caps),
                              b, h, n, n, device="cuda",
                              BLOCK_SIZE=int(meta["block_r"]))
    return block.ranges_for(b, h, int(meta["block_r"]), "cuda"), \
        block.sparsity(), block.full_fraction()


def captures_for(meta, caps):
    """The tensors a launch passes for its metadata's capture0, ...: the
    slopes ([16]) or the document ids ([16384])."""
    by_shape = {(16,): caps[0], (16384,): caps[1]}
    return [by_shape[tuple(int(d) for d in p["shape"])]
            for p in meta["params"] if p["name"].startswith("capture")]


def attention(q, k, v, modify, caps=(), sinks=None):
    bsz, heads, n, m = q.shape[0], q.shape[1], q.shape[-2], k.shape[-2]
    dev = q.device
    b = torch.arange(bsz, device=dev)[:, None, None, None]
    h = torch.arange(heads, device=dev)[None, :, None, None]
    i = torch.arange(n, device=dev)[:, None]
    j = torch.arange(m, device=dev)[None, :]
    s = modify((q @ k.transpose(-1, -2)) * SCALE, b, h, i, j, caps)
    if sinks is None:
        return torch.softmax(s, dim=-1) @ v
    # A sink joins each row's denominator as a key with a zero value row.
    sink = sinks.to(s.dtype)[None, :, None, None].expand(bsz, heads, n, 1)
    return torch.softmax(torch.cat([s, sink], dim=-1), dim=-1)[..., :-1] @ v


def main():
    folders = sys.argv[1:] or [".flex"]
    failures = launches = 0
    for folder, module in zip(folders, MODULES):
        failures += check_module(folder, module)
        launches += len(module)
    print(f"flex_module: {launches} launches, "
          f"{'all passed' if not failures else f'{failures} failed'}")
    sys.exit(1 if failures else 0)


def check_module(folder, launches):
    with open(os.path.join(folder, "module.cubin"), "rb") as f:
        cubin = f.read()
    failures = 0
    caps = inlined_captures("cuda")
    for index, (name, modify) in enumerate(launches):
        with open(os.path.join(folder, f"launch{index}.json")) as f:
            meta = json.load(f)
        kernel = Kernel(cubin, meta)
        captures = captures_for(meta, caps)
        names = {p["name"] for p in meta["params"]}
        # The module's shape, then longer sequences on the same kernel.
        for b, h, n in [(1, 4, 256), (2, 4, 1000), (1, 8, 4096)]:
            torch.manual_seed(n + index)
            q, k, v = (torch.randn(b, h, n, 128, device="cuda",
                                   dtype=torch.float16) for _ in range(3))
            sinks = sink_logits(h, "cuda") if "sinks" in names else None
            ref = attention(q.double(), k.double(), v.double(), modify, caps,
                            sinks)
            low = attention(q, k, v, modify, caps, sinks)
            ranges = key_ranges_for(name, meta, caps, b, h, n)
            for key_ranges in [None] + ([ranges[0]] if ranges else []):
                out, _ = kernel(q, k, v, captures=captures, sinks=sinks,
                                key_ranges=key_ranges)
                torch.cuda.synchronize()
                err, base, ok = two_x_l2(out, ref, low)
                failures += not ok
                with_ranges = "" if key_ranges is None else \
                    f", key ranges (sparsity {ranges[1]:.2f})"
                print(f"{name}: kernel {meta['kernel']}, B={b} H={h} N={n}"
                      f"{with_ranges}: rel err {err:.2e} (torch f16 "
                      f"{base:.2e}) {'PASS' if ok else 'FAIL'}")
        print(f"{name}: {speed(kernel, meta, captures, 'sinks' in names)}")
        ranges = key_ranges_for(name, meta, caps, 1, 16, 16384)
        if ranges:
            hull = ranges[0].clone()
            hull[..., 2:] = 0  # no full blocks: the mask_mod everywhere
            print(f"{name}, key ranges without full blocks: "
                  f"{speed(kernel, meta, captures, 'sinks' in names, key_ranges=hull)}")
            print(f"{name}, key ranges (sparsity {ranges[1]:.2f}, full "
                  f"{ranges[2]:.2f}): "
                  f"{speed(kernel, meta, captures, 'sinks' in names, key_ranges=ranges[0])}")
    return failures


def speed(kernel, meta, captures, with_sinks, b=1, h=16, n=16384,
          key_ranges=None):
    """TFLOP/s of the launch at B 1, H 16, N 16k, D 128 (4 N D per key a
    query sees, per head): the median of 20 timed calls."""
    q, k, v = (torch.randn(b, h, n, 128, device="cuda", dtype=torch.float16)
               for _ in range(3))
    sinks = sink_logits(h, "cuda") if with_sinks else None
    times = []
    for _ in range(23):
        start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
        start.record()
        kernel(q, k, v, captures=captures, sinks=sinks, key_ranges=key_ranges)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    t = sorted(times[3:])[len(times[3:]) // 2]
    # Keys a query sees: a window's, else all or (causal) half on average.
    window = meta.get("window") or 0
    keys = min(window, n) if window else n / (2 if meta.get("causal") else 1)
    flops = 4 * b * h * n * keys * 128
    return f"{t * 1e3:.3f} ms, {flops / t / 1e12:.0f} TFLOP/s at B={b} H={h} N={n}"


if __name__ == "__main__":
    main()
