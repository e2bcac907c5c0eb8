"""Issue 49's variants beside the peers, in one process on one GPU: each
attention of test/Inputs/flex_regions_inlined_f16.mlir (launched from the
artefacts of

    build/bin/fa-compile-module --arch sm_90a -o .flex-inlined \\
        test/Inputs/flex_regions_inlined_f16.mlir

with the key ranges flashmlir.create_block_mask makes where the kernel
takes them) against torch's FlexAttention compiled by torch.compile with
its own block mask (torch.nn.attention.flex_attention.create_block_mask),
the same score_mod / mask_mod written in torch; the causal rows also
against cuDNN and FA2 through SDPA. B 1, H 16, N 16k, D 128, f16, scale
1/sqrt(128); do_bench medians (ms) and TFLOP/s of the work the mask
leaves (4 D per visible query-key pair, counted on the mask itself).
Each row also gives the relative L2 difference of our output from
FlexAttention's (both f16; the 2x rule against float64 is flex_module's
check, at smaller sizes).

    python3 bench/flex_peers.py .flex-inlined OUT.json
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import median_ms  # noqa: E402
from flex_module import (SCALE, Kernel, MASKS, captures_for,  # noqa: E402
                         inlined_captures, key_ranges_for)

B, H, N, D = 1, 16, 16384, 128


def peer_variants(caps):
    """Launch index in the inlined module -> (name, score_mod, mask_mod)
    for torch's FlexAttention (None: no such modification)."""
    slopes, ids = caps

    def causal(b, h, i, j):
        return i >= j

    def alibi(s, b, h, i, j):
        return s + torch.exp2(-2.0 * (h + 1)) * (j - i)

    def prefix(b, h, i, j):
        return (i >= j) | (j < 64)

    def docs96(b, h, i, j):
        return (i // 96 == j // 96) & (i >= j)

    def decay(s, b, h, i, j):
        d = (i - j).abs()
        return 30 * torch.tanh(s / 30) + 0.5 * torch.log1p(torch.exp(-d / 32))

    def alibi_captured(s, b, h, i, j):
        return s + slopes[h] * (j - i)

    def docs_ids(b, h, i, j):
        return (ids[i] == ids[j]) & (i >= j)

    return {
        0: ("ALiBi + causal", alibi, causal),
        1: ("prefix-LM 64", None, prefix),
        2: ("documents of 96, causal", None, docs96),
        3: ("softcap 30 + distance decay", decay, None),
        5: ("ALiBi from captured slopes, causal", alibi_captured, causal),
        6: ("packed documents from captured ids, causal", None, docs_ids),
        7: ("built-in causal", None, causal),
    }


def visible_pairs(mask_mod):
    """Query-key pairs the mask leaves, counted in row chunks."""
    if mask_mod is None:
        return N * N
    total = 0
    j = torch.arange(N, device="cuda")[None, :]
    for r0 in range(0, N, 1024):
        i = torch.arange(r0, r0 + 1024, device="cuda")[:, None]
        total += int(mask_mod(0, 0, i, j).sum())
    return total


def rel_l2(a, b):
    return float((a.double() - b.double()).norm() / b.double().norm())


def main():
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.attention.flex_attention import (
        create_block_mask as torch_block_mask, flex_attention)

    folder, out_path = sys.argv[1], sys.argv[2]
    with open(os.path.join(folder, "module.cubin"), "rb") as f:
        cubin = f.read()
    caps = inlined_captures("cuda")
    compiled = torch.compile(flex_attention, dynamic=False)
    torch.manual_seed(0)
    q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.float16)
               for _ in range(3))
    rows = []
    for index, (name, score_mod, mask_mod) in peer_variants(caps).items():
        with open(os.path.join(folder, f"launch{index}.json")) as f:
            meta = json.load(f)
        kernel = Kernel(cubin, meta)
        captures = captures_for(meta, caps)
        module_name = [n for n in MASKS if n.startswith(name)]
        ranges = (key_ranges_for(module_name[0], meta, caps, B, H, N)
                  if module_name else None)
        key_ranges = ranges[0] if ranges else None
        row = {"variant": name, "kernel": meta["kernel"],
               "key_ranges": key_ranges is not None}
        ours = lambda: kernel(q, k, v, captures=captures,  # noqa: E731
                              key_ranges=key_ranges)
        row["ours_ms"] = median_ms(ours)
        block_mask = (torch_block_mask(mask_mod, None, None, N, N,
                                       device="cuda")
                      if mask_mod is not None else None)
        flex = lambda: compiled(q, k, v, score_mod=score_mod,  # noqa: E731
                                block_mask=block_mask, scale=SCALE)
        try:
            o_flex = flex()
            row["flex_ms"] = median_ms(flex)
            o_ours, _ = ours()
            torch.cuda.synchronize()
            row["rel_l2_vs_flex"] = rel_l2(o_ours, o_flex)
        except Exception as e:  # a peer that cannot compile is a row, too
            row["flex_error"] = f"{type(e).__name__}: {e}"[:300]
        if name in ("built-in causal", "ALiBi + causal"):
            for label, backend in (("cudnn_ms", SDPBackend.CUDNN_ATTENTION),
                                   ("fa2_ms", SDPBackend.FLASH_ATTENTION)):
                with sdpa_kernel(backend):
                    row[label] = median_ms(
                        lambda: torch.nn.functional.scaled_dot_product_attention(
                            q, k, v, is_causal=True, scale=SCALE))
        flops = 4 * B * H * D * visible_pairs(mask_mod)
        for key in [k for k in row if k.endswith("_ms")]:
            row[key.replace("_ms", "_tflops")] = flops / row[key] / 1e9
        if "flex_ms" in row:
            row["ours_vs_flex_speed"] = row["flex_ms"] / row["ours_ms"]
        rows.append(row)
        print(json.dumps(row), flush=True)
    with open(out_path, "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(),
                   "torch": torch.__version__, "shape": [B, H, N, D],
                   "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
