"""flashmlir.create_block_mask and flex_attention(block_mask=): each query
tile's key range is the hull of the keys the mask lets through (checked
against a brute-force loop over the tiles, ragged lengths, masks that
depend on the batch and head, tiles that see no key); on CPU tensors the
block mask's mask_mod gives the same result as passing it directly; bad
arguments are refused by name, at create_block_mask, at flex_attention and
at a kernel's key_ranges."""
import math

import pytest

torch = pytest.importorskip("torch")


def brute_ranges(mask_mod, b, h, q_len, kv_len, block):
    """[first, end) of the keys each (batch, head, tile) sees, and the first
    longest run of keys all its rows see, element by element."""
    tiles = -(-q_len // block)
    out = torch.zeros(b, h, tiles, 4, dtype=torch.int32)
    for bi in range(b):
        for hi in range(h):
            for t in range(tiles):
                rows = range(t * block, min(q_len, (t + 1) * block))
                sees = [[bool(mask_mod(torch.tensor(bi), torch.tensor(hi),
                                       torch.tensor(i), torch.tensor(j)))
                         for i in rows] for j in range(kv_len)]
                keys = [j for j in range(kv_len) if any(sees[j])]
                if keys:
                    out[bi, hi, t, :2] = torch.tensor([keys[0], keys[-1] + 1])
                best, start = (0, 0), None
                for j in range(kv_len + 1):
                    if j < kv_len and all(sees[j]):
                        start = j if start is None else start
                    elif start is not None:
                        if j - start > best[1] - best[0]:
                            best = (start, j)
                        start = None
                out[bi, hi, t, 2:] = torch.tensor(best)
    return out


DOCS = torch.tensor([0] * 9 + [1] * 14 + [2] * 3 + [3] * 21)  # 47 positions

MASKS = {
    "causal": lambda b, h, q, kv: q >= kv,
    "prefix_lm": lambda b, h, q, kv: (q >= kv) | (kv < 5),
    "documents": lambda b, h, q, kv: (DOCS[q] == DOCS[kv]) & (q >= kv),
    "per_head_window": lambda b, h, q, kv: (q - kv).abs() <= 2 + 3 * h,
    "batch_and_empty": lambda b, h, q, kv: (b == 1) & (kv > q + 20),
}


@pytest.mark.parametrize("name", sorted(MASKS))
@pytest.mark.parametrize("block", [8, 16])
def test_ranges_are_the_hull_of_the_visible_keys(flashmlir, name, block):
    mask = MASKS[name]
    b, h, q_len, kv_len = 2, 3, 47, 47
    if name == "documents":
        b, h = 1, 2
    got = flashmlir.create_block_mask(mask, b, h, q_len, kv_len,
                                      device="cpu", BLOCK_SIZE=block)
    want = brute_ranges(mask, b, h, q_len, kv_len, block)
    assert torch.equal(got.key_ranges, want), (got.key_ranges, want)
    assert got.key_ranges.dtype == torch.int32
    assert 0.0 <= got.sparsity() < 1.0
    assert 0.0 <= got.full_fraction() <= 1.0 - got.sparsity()


def test_broadcast_batch_and_head(flashmlir):
    """B or H None: one entry, expanded for the call."""
    mask = MASKS["causal"]
    block = flashmlir.create_block_mask(mask, None, None, 40, 33,
                                        device="cpu", BLOCK_SIZE=16)
    assert tuple(block.key_ranges.shape) == (1, 1, 3, 4)
    # Causal: tile t sees keys [0, 16 (t + 1)) and all its rows [0, 16 t + 1).
    assert block.key_ranges[0, 0].tolist() == [[0, 16, 0, 1], [0, 32, 0, 17],
                                                [0, 33, 0, 33]]
    full = block.ranges_for(2, 4, 16, "cpu")
    assert tuple(full.shape) == (2, 4, 3, 4) and full.is_contiguous()
    assert torch.equal(full[1, 3], block.key_ranges[0, 0])
    with pytest.raises(flashmlir.CompileError, match="BLOCK_SIZE=128"):
        block.ranges_for(2, 4, 128, "cpu")
    per_head = flashmlir.create_block_mask(mask, 1, 2, 40, 33, device="cpu",
                                           BLOCK_SIZE=16)
    with pytest.raises(flashmlir.CompileError, match="B=1, H=2"):
        per_head.ranges_for(1, 4, 16, "cpu")


def test_bad_arguments(flashmlir):
    mask = MASKS["causal"]
    with pytest.raises(flashmlir.CompileError, match="must be callable"):
        flashmlir.create_block_mask(3, 1, 1, 8, 8, device="cpu")
    for kwargs, what in (({"B": 0}, "B must be"), ({"Q_LEN": True}, "Q_LEN"),
                         ({"KV_LEN": 2**31}, "KV_LEN"),
                         ({"BLOCK_SIZE": 1.5}, "BLOCK_SIZE")):
        args = {"B": 1, "H": 1, "Q_LEN": 8, "KV_LEN": 8}
        args.update({k: v for k, v in kwargs.items() if k != "BLOCK_SIZE"})
        with pytest.raises(flashmlir.CompileError, match=what):
            flashmlir.create_block_mask(
                mask, args["B"], args["H"], args["Q_LEN"], args["KV_LEN"],
                device="cpu", BLOCK_SIZE=kwargs.get("BLOCK_SIZE", 128))

    def branchy(b, h, q, kv):
        if q > kv:  # Python control flow on an index tensor
            return True
        return False
    with pytest.raises(flashmlir.CompileError, match="could not be evaluated"):
        flashmlir.create_block_mask(branchy, 1, 1, 8, 8, device="cpu")


def inputs(seed, n=47):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(1, 2, n, 16, generator=g) for _ in range(3)]


def test_flex_attention_with_a_block_mask_on_cpu(flashmlir):
    """The block mask's mask_mod is the call's, whether given as
    block_mask or in mask_mod's place (FlexAttention's fifth argument)."""
    q, k, v = inputs(3)
    mask = MASKS["documents"]
    block = flashmlir.create_block_mask(mask, 1, 2, 47, 47, device="cpu",
                                        BLOCK_SIZE=16)
    want = flashmlir.flex_attention(q, k, v, mask_mod=mask)
    for got in (flashmlir.flex_attention(q, k, v, block_mask=block),
                flashmlir.flex_attention(q, k, v, None, block),
                flashmlir.flex_attention(q, k, v, mask_mod=mask,
                                         block_mask=block)):
        assert torch.allclose(got, want, atol=0, rtol=0)
    # Without the mask the result differs: the block mask did carry it.
    assert not torch.allclose(flashmlir.flex_attention(q, k, v), want)


def test_flex_attention_refuses_mismatched_block_masks(flashmlir):
    q, k, v = inputs(4)
    block = flashmlir.create_block_mask(MASKS["causal"], 1, 2, 47, 47,
                                        device="cpu", BLOCK_SIZE=16)
    with pytest.raises(flashmlir.CompileError, match="differs from the block"):
        flashmlir.flex_attention(q, k, v, mask_mod=MASKS["prefix_lm"],
                                 block_mask=block)
    with pytest.raises(flashmlir.CompileError, match="given twice"):
        flashmlir.flex_attention(q, k, v, None, block, block_mask=block)
    with pytest.raises(flashmlir.CompileError, match="create_block_mask"):
        flashmlir.flex_attention(q, k, v, block_mask=torch.zeros(1, 1, 3, 2))
    short = flashmlir.create_block_mask(MASKS["causal"], 1, 2, 40, 47,
                                        device="cpu", BLOCK_SIZE=16)
    with pytest.raises(flashmlir.CompileError, match="Q_LEN=40, KV_LEN=47"):
        flashmlir.flex_attention(q, k, v, block_mask=short)


def test_kernel_key_ranges_are_checked(flashmlir):
    """A mask_mod kernel takes key_ranges (i32 [B, Hq, ceil(Nq / block_r),
    2]); a launch may omit them; wrong shapes, dtypes and kernels without a
    mask_mod are refused before anything runs."""
    regions, captures = flashmlir.flex.trace_regions(
        None, lambda b, h, q, kv: (q >= kv) | (kv < 64))
    text = flashmlir.flex.flex_module_text(regions, captures, 64, 64, "f16")
    module = flashmlir.compile_module(text, arch="sm_90a")
    (name, meta), = module.launches
    assert meta["params"][-1] == {
        "dtype": "i32", "kind": "pointer", "name": "key_ranges",
        "shape": ["B", "Hq", "ceil(Nq / block_r)", "4"]}, meta["params"]
    kernel = module.kernel(0)
    q = torch.zeros(2, 4, 300, 64, dtype=torch.float16)
    tiles = math.ceil(300 / meta["block_r"])
    for bad in (torch.zeros(2, 4, tiles, 4),
                torch.zeros(2, 4, tiles + 1, 4, dtype=torch.int32),
                torch.zeros(2, 4, tiles, 2, dtype=torch.int32),
                torch.zeros(1, 4, tiles, 4, dtype=torch.int32), [0, 0]):
        with pytest.raises(flashmlir.runtime.KernelArgumentError,
                           match=r"key_ranges must be an int32 tensor of "
                                 rf"shape \(2, 4, {tiles}, 4\)"):
            kernel(q, q, q, key_ranges=bad)
    # A kernel without a mask_mod takes none.
    regions, captures = flashmlir.flex.trace_regions(
        lambda s, b, h, q, kv: s + 0.5 * h, None)
    text = flashmlir.flex.flex_module_text(regions, captures, 64, 64, "f16")
    plain = flashmlir.compile_module(text, arch="sm_90a").kernel(0)
    assert all(p["name"] != "key_ranges" for p in plain.meta["params"])
    with pytest.raises(flashmlir.runtime.KernelArgumentError,
                       match="has no mask_mod"):
        plain(q, q, q, key_ranges=torch.zeros(2, 4, tiles, 4,
                                              dtype=torch.int32))
