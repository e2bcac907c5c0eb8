"""Training check of the backward kernel (issue 48, item 5): a small causal
grouped-query transformer trained with flash-mlir's flash_attn_func and,
from the same seed, with torch SDPA; the loss curves must agree within
run-to-run noise.

  python3 bench/train_check.py [--steps 500] [--json out.json]

The data is an order-2 Markov chain over 16 tokens: each pair of
previous tokens allows two successors, so the loss falls from ln 16 = 2.77
toward ln 2 = 0.69 only as attention learns to look two positions back.
Parameters are f32 and the step runs under bf16 autocast, so q, k, v reach
attention in bf16; the only difference between the runs is the attention
call (flash_attn_func, whose backward is the fa-compile --backward kernel,
against F.scaled_dot_product_attention(enable_gqa=True) and its backward).

Noise: two correct attentions give different loss curves from the same
seed (bf16 rounding, amplified by training's chaos, most at the phase
transitions of learning), so the yardstick is torch's own pair: SDPA's
FlashAttention backend (enable_gqa) against its memory-efficient backend
(K/V heads repeated: the same function). The check passes when the mean,
over seeds and over the curve's windows of 25 steps, of |loss(flash-mlir)
- loss(SDPA flash)| is at most twice that of |loss(SDPA efficient) -
loss(SDPA flash)| (flash-attn's 2x rule, on the loss curve). A control
shows that the check can fail: SDPA with dK cut (k detached, so the key
projections never learn) must land beyond twice the noise.
It also reports the time per step, eager, for both.

Kernels: FLASHMLIR_KERNEL_DIR / FLASHMLIR_BACKWARD_KERNEL_DIR (bash
bench/build_backward_kernels.sh .bwd builds the forward and backward
kernels these configs need); otherwise they are compiled in-process.
"""

import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import flashmlir  # noqa: E402

# (name, query heads, K/V heads, head dim): GQA 4:1 at D 64, MQA at D 128.
CONFIGS = (("gqa-d64", 8, 2, 64), ("mqa-d128", 4, 1, 128))
LAYERS = 4
VOCAB = 16
# Successors allowed after each pair of tokens.
SUCCESSORS = 2
WINDOW = 25
LR, WARMUP = 3e-3, 20
SEEDS = (0, 1, 2)


def flash_mlir_attention(q, k, v):
    return flashmlir.flash_attn_func(q, k, v, causal=True)


def sdpa_attention(q, k, v):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        out = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
            is_causal=True, enable_gqa=True)
    return out.transpose(1, 2)


def sdpa_efficient_attention(q, k, v):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    g = q.shape[2] // k.shape[2]
    k, v = (t.repeat_interleave(g, 2) for t in (k, v))
    with sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION]):
        out = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
            is_causal=True)
    return out.transpose(1, 2)


class Block(nn.Module):
    def __init__(self, dim, hq, hkv, hd):
        super().__init__()
        self.hq, self.hkv, self.hd = hq, hkv, hd
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.q = nn.Linear(dim, hq * hd, bias=False)
        self.k = nn.Linear(dim, hkv * hd, bias=False)
        self.v = nn.Linear(dim, hkv * hd, bias=False)
        self.o = nn.Linear(hq * hd, dim, bias=False)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(),
                                 nn.Linear(4 * dim, dim))

    def forward(self, x, attention):
        b, n, _ = x.shape
        h = self.norm1(x)
        q = self.q(h).view(b, n, self.hq, self.hd)
        k = self.k(h).view(b, n, self.hkv, self.hd)
        v = self.v(h).view(b, n, self.hkv, self.hd)
        x = x + self.o(attention(q, k, v).reshape(b, n, self.hq * self.hd))
        return x + self.mlp(self.norm2(x))


class Model(nn.Module):
    def __init__(self, n, hq, hkv, hd):
        super().__init__()
        dim = hq * hd
        self.embed = nn.Embedding(VOCAB, dim)
        self.position = nn.Parameter(torch.randn(n, dim) * 0.02)
        self.blocks = nn.ModuleList(Block(dim, hq, hkv, hd)
                                    for _ in range(LAYERS))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, VOCAB, bias=False)

    def forward(self, tokens, attention):
        x = self.embed(tokens) + self.position[:tokens.shape[1]]
        for block in self.blocks:
            x = block(x, attention)
        return self.head(self.norm(x))


def batches(seed, steps, b, n, device):
    """Sequences of the order-2 chain: one transition table for every seed
    (the task), the sequences drawn from the seed."""
    table = torch.randint(0, VOCAB, (VOCAB, VOCAB, SUCCESSORS),
                          generator=torch.Generator().manual_seed(7))
    g = torch.Generator(device="cpu").manual_seed(1000 + seed)
    for _ in range(steps):
        tokens = torch.empty(b, n, dtype=torch.long)
        tokens[:, :2] = torch.randint(0, VOCAB, (b, 2), generator=g)
        pick = torch.randint(0, SUCCESSORS, (b, n), generator=g)
        for i in range(2, n):
            tokens[:, i] = table[tokens[:, i - 2], tokens[:, i - 1],
                                 pick[:, i]]
        yield tokens.to(device)


def sdpa_without_key_gradients(q, k, v):
    return sdpa_attention(q, k.detach(), v)


def train(config, attention, seed, steps, b, n):
    _, hq, hkv, hd = config
    torch.manual_seed(seed)
    model = Model(n, hq, hkv, hd).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0)
    # Linear warm-up over the first WARMUP steps.
    warmup = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda i: min(1.0, (i + 1) / WARMUP))
    losses, times = [], []
    for tokens in batches(seed, steps, b, n, "cuda"):
        torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(tokens[:, :-1], attention)
        # Position i predicts token i + 1 (from the third on: the first
        # two are uniform).
        loss = F.cross_entropy(logits[:, 1:].float().reshape(-1, VOCAB),
                               tokens[:, 2:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        warmup.step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
        losses.append(loss.item())
        if not math.isfinite(losses[-1]):
            break
    return losses, times


def windows(losses):
    return [sum(losses[i:i + WINDOW]) / WINDOW
            for i in range(0, len(losses) - WINDOW + 1, WINDOW)]


def gap(a, b):
    wa, wb = windows(a), windows(b)
    return sum(abs(x - y) for x, y in zip(wa, wb)) / len(wa), \
        abs(wa[-1] - wb[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seqlen", type=int, default=512)
    ap.add_argument("--json")
    args = ap.parse_args()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; "
          f"{LAYERS} layers, B {args.batch}, N {args.seqlen}, "
          f"{args.steps} steps, bf16 autocast, causal")
    print("| config | seed | SDPA flash first / last window | flash-mlir "
          "last window | SDPA efficient last window | gap flash-mlir | "
          "gap SDPA efficient (noise) | ms/step SDPA flash | ms/step "
          "flash-mlir |")
    print("|---|---|---|---|---|---|---|---|---|")
    report, ok = {}, True
    attentions = (("sdpa", sdpa_attention),
                  ("sdpa-efficient", sdpa_efficient_attention),
                  ("flash-mlir", flash_mlir_attention))
    for config in CONFIGS:
        runs = {}
        for seed in SEEDS:
            for name, fn in attentions:
                runs[name, seed] = train(config, fn, seed, args.steps,
                                         args.batch, args.seqlen)
        runs["control", 0] = train(config, sdpa_without_key_gradients, 0,
                                   args.steps, args.batch, args.seqlen)
        if any(len(r[0]) != args.steps for r in runs.values()):
            ok = False
            print(f"| {config[0]} | a loss was not finite |")
            continue
        ours, noise = [], []
        for seed in SEEDS:
            ref = runs["sdpa", seed]
            ours.append(gap(ref[0], runs["flash-mlir", seed][0]))
            noise.append(gap(ref[0], runs["sdpa-efficient", seed][0]))
            w = [windows(runs[name, seed][0])
                 for name in ("sdpa", "flash-mlir", "sdpa-efficient")]
            # Medians of the step times, the first steps (compilation,
            # allocator warm-up) left out.
            ms = [sorted(t[5:])[len(t[5:]) // 2] * 1e3
                  for t in (ref[1], runs["flash-mlir", seed][1])]
            print(f"| {config[0]} | {seed} | {w[0][0]:.3f} / {w[0][-1]:.4f} "
                  f"| {w[1][-1]:.4f} | {w[2][-1]:.4f} | {ours[-1][0]:.4f} | "
                  f"{noise[-1][0]:.4f} | {ms[0]:.2f} | {ms[1]:.2f} |",
                  flush=True)
        mean_ours = sum(g[0] for g in ours) / len(ours)
        mean_noise = sum(g[0] for g in noise) / len(noise)
        control = gap(runs["sdpa", 0][0], runs["control", 0][0])[0]
        agree = mean_ours <= 2 * mean_noise
        powered = control > 2 * mean_noise
        ok = ok and agree and powered
        print(f"| {config[0]} | mean | | | | {mean_ours:.4f} | "
              f"{mean_noise:.4f} | | | "
              + ("within 2x the noise" if agree
                 else "**beyond 2x the noise**"))
        print(f"| {config[0]} | control: SDPA without dK (seed 0) | | "
              f"{windows(runs['control', 0][0])[-1]:.4f} | | {control:.4f} "
              f"| {mean_noise:.4f} | | | "
              + ("beyond 2x the noise: the check can fail" if powered
                 else "**within 2x the noise: the check has no power**"),
              flush=True)
        report[config[0]] = {f"{k[0]}-{k[1]}": v[0] for k, v in runs.items()}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
