"""CUDA graphs (issue 17): serving frameworks capture a decode step once and
replay it, so the launch path's host work runs once. The runtime's calls
must capture (no host synchronisation, no device-to-host reads, per-stream
buffers zeroed inside the graph) and a replay must compute with the values
the static tensors hold at replay time: each test replays three times with
new queries, caches and lengths, against an fp32 reference of those values.

Kernel folders as the other gpu tests (FLASHMLIR_PAGED_KERNEL_DIR,
FLASHMLIR_VARLEN_KERNEL_DIR, FLASHMLIR_KERNEL_DIR)."""
import os

import pytest

from conftest import masked_reference


def _capture(torch, step):
    """`step` warmed up on a side stream (as torch's CUDA graph docs ask),
    then captured; returns the graph."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    return graph


def _check_replays(torch, step, inputs, gen, reference, out):
    """Fills `inputs` at random, captures `step`, then three times: new
    random inputs, a replay, `out` against `reference()` (2e-3)."""
    for t in inputs:
        t.normal_(generator=gen)
    graph = _capture(torch, step)
    for _ in range(3):
        for t in inputs:
            t.normal_(generator=gen)
        graph.replay()
        torch.cuda.synchronize()
        err = (out.float() - reference()).abs().max().item()
        assert err < 2e-3, err


def _kv_reference(torch, q, k_cache, v_cache, lengths, table, causal):
    """O [B, Nq, Hq, D] of each sequence over its first lengths[b] keys,
    gathered through the block table when there is one."""
    outs = []
    for b, n in enumerate(lengths.tolist()):
        if table is None:
            k, v = k_cache[b, :n], v_cache[b, :n]
        else:
            page = k_cache.shape[1]
            rows = torch.arange(n, device=q.device)
            pages = table[b].long()[rows // page]
            k = k_cache[pages, rows % page]
            v = v_cache[pages, rows % page]
        o = masked_reference(torch, q[b].transpose(0, 1), k.transpose(0, 1),
                             v.transpose(0, 1), q.shape[-1] ** -0.5,
                             causal=causal)
        outs.append(o.transpose(0, 1))
    return torch.stack(outs)


@pytest.mark.gpu
@pytest.mark.parametrize("paged", [False, True])
def test_kvcache_decode_replays(cuda_flashmlir, paged):
    """flash_attn_with_kvcache, split-KV decode (Nq = 1, GQA 4:1), over a
    contiguous cache and a paged one (pages of 64, shuffled; causal, which
    one query at the end sees every key through): captured once, replayed
    with new q, cache contents, lengths (one sequence empty) and, paged, a
    new block table."""
    torch, flashmlir = cuda_flashmlir
    kernel_dir = os.environ.get("FLASHMLIR_PAGED_KERNEL_DIR", ".paged")
    b, hq, hkv, d, capacity, page = 3, 8, 2, 128, 2048, 64
    gen = torch.Generator(device="cuda").manual_seed(7)
    f16 = dict(device="cuda", dtype=torch.float16)
    q = torch.empty(b, 1, hq, d, **f16)
    if paged:
        pages = b * capacity // page + 5
        k_cache = torch.empty(pages, page, hkv, d, **f16)
        table = torch.empty(b, capacity // page, device="cuda",
                            dtype=torch.int32)
    else:
        k_cache = torch.empty(b, capacity, hkv, d, **f16)
        table = None
    v_cache = torch.empty_like(k_cache)
    lengths = torch.empty(b, device="cuda", dtype=torch.int32)

    def fill(step_lengths):
        q.normal_(generator=gen)
        k_cache.normal_(generator=gen)
        v_cache.normal_(generator=gen)
        lengths.copy_(torch.tensor(step_lengths, dtype=torch.int32))
        if paged:
            perm = torch.randperm(k_cache.shape[0], device="cuda",
                                  generator=gen)
            table.copy_(perm[:table.numel()].view_as(table))

    out = torch.empty(b, 1, hq, d, **f16)

    def step():
        out.copy_(flashmlir.flash_attn_with_kvcache(
            q, k_cache, v_cache, cache_seqlens=lengths, block_table=table,
            causal=paged, kernel_dir=kernel_dir))

    fill([1000, 37, 2048])
    graph = _capture(torch, step)
    previous = None
    for step_lengths in ([700, 0, 1531], [2048, 1, 64], [5, 999, 1200]):
        fill(step_lengths)
        graph.replay()
        torch.cuda.synchronize()
        ref = _kv_reference(torch, q, k_cache, v_cache, lengths, table,
                            paged)
        err = (out.float() - ref).abs().max().item()
        assert err < 2e-3, (step_lengths, err)
        # The empty sequence: O = 0 (no key to attend).
        if 0 in step_lengths:
            assert out[step_lengths.index(0)].abs().max().item() == 0
        assert previous is None or not torch.equal(previous, out)
        previous = out.clone()


@pytest.mark.gpu
def test_kvcache_append_replays(cuda_flashmlir):
    """flash_attn_with_kvcache with k and v to append: each replay writes
    the step's new keys at cache_seqlens (as the static lengths say) and
    attends them; the graph's lengths check passes."""
    torch, flashmlir = cuda_flashmlir
    kernel_dir = os.environ.get("FLASHMLIR_PAGED_KERNEL_DIR", ".paged")
    b, hq, hkv, d, capacity = 2, 4, 4, 128, 1024
    f16 = dict(device="cuda", dtype=torch.float16)
    gen = torch.Generator(device="cuda").manual_seed(3)
    q = torch.empty(b, 1, hq, d, **f16)
    k_new = torch.empty(b, 1, hkv, d, **f16)
    v_new = torch.empty_like(k_new)
    k_cache = torch.zeros(b, capacity, hkv, d, **f16)
    v_cache = torch.zeros_like(k_cache)
    lengths = torch.tensor([10, 500], device="cuda", dtype=torch.int32)
    out = torch.empty(b, 1, hq, d, **f16)

    def step():
        out.copy_(flashmlir.flash_attn_with_kvcache(
            q, k_cache, v_cache, k=k_new, v=v_new, cache_seqlens=lengths,
            kernel_dir=kernel_dir))

    for t in (q, k_new, v_new):
        t.normal_(generator=gen)
    k_cache[:, :600].normal_(generator=gen)
    v_cache[:, :600].normal_(generator=gen)
    graph = _capture(torch, step)
    for _ in range(3):
        for t in (q, k_new, v_new):
            t.normal_(generator=gen)
        lengths.add_(1)  # the next decode position, as a server advances it
        graph.replay()
        torch.cuda.synchronize()
        total = lengths + 1
        for i in range(b):
            pos = int(lengths[i])
            assert torch.equal(k_cache[i, pos], k_new[i, 0])
            assert torch.equal(v_cache[i, pos], v_new[i, 0])
        ref = _kv_reference(torch, q, k_cache, v_cache, total, None, False)
        err = (out.float() - ref).abs().max().item()
        assert err < 2e-3, err


@pytest.mark.gpu
def test_prefill_with_tile_counter_replays(cuda_flashmlir):
    """flashmlir.attention on a causal kernel with the dynamic tile
    scheduler (its counter made inside the capture when the capture
    stream has none): replays give the attention of each step's inputs."""
    torch, flashmlir = cuda_flashmlir
    kernel_dir = os.environ.get("FLASHMLIR_KERNEL_DIR", ".cubins")
    f16 = dict(device="cuda", dtype=torch.float16)
    gen = torch.Generator(device="cuda").manual_seed(11)
    q = torch.empty(2, 8, 1000, 128, **f16)
    k = torch.empty_like(q)
    v = torch.empty_like(q)
    out = torch.empty_like(q)

    def step():
        out.copy_(flashmlir.attention(q, k, v, causal=True,
                                      kernel_dir=kernel_dir))

    _check_replays(torch, step, (q, k, v), gen, lambda: masked_reference(
        torch, q, k, v, 128 ** -0.5, causal=True), out)


@pytest.mark.gpu
def test_flash_attn_func_replays(cuda_flashmlir):
    """flash_attn_func on flash-attn's [B, N, H, D] tensors (strided views
    into the kernel, no copy), causal, GQA 2:1: replays follow the inputs."""
    torch, flashmlir = cuda_flashmlir
    kernel_dir = os.environ.get("FLASHMLIR_KERNEL_DIR", ".cubins")
    f16 = dict(device="cuda", dtype=torch.float16)
    gen = torch.Generator(device="cuda").manual_seed(5)
    q = torch.empty(2, 777, 8, 128, **f16)
    k = torch.empty(2, 777, 4, 128, **f16)
    v = torch.empty_like(k)
    out = torch.empty_like(q)

    def step():
        out.copy_(flashmlir.flash_attn_func(q, k, v, causal=True,
                                            kernel_dir=kernel_dir))

    # O [B, N, H, D] against the reference on [B, H, N, D] views.
    _check_replays(torch, step, (q, k, v), gen, lambda: masked_reference(
        torch, q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
        128 ** -0.5, causal=True).transpose(1, 2), out)


@pytest.mark.gpu
def test_varlen_replays(cuda_flashmlir):
    """flash_attn_varlen_func, causal (bottom-right per sequence), GQA 4:1:
    captured once, then replayed with new packed inputs and new prefix sums
    (other lengths in the same buffers, one sequence empty). The prefix sums
    are checked by a device assertion inside the capture, not read."""
    torch, flashmlir = cuda_flashmlir
    kernel_dir = os.environ.get("FLASHMLIR_VARLEN_KERNEL_DIR", ".varlen")
    f16 = dict(device="cuda", dtype=torch.float16)
    hq, hkv, d, total = 8, 2, 128, 1500
    gen = torch.Generator(device="cuda").manual_seed(9)
    q = torch.empty(total, hq, d, **f16)
    k = torch.empty(total, hkv, d, **f16)
    v = torch.empty_like(k)
    out = torch.empty_like(q)
    cu_q = torch.zeros(4, dtype=torch.int32, device="cuda")
    cu_k = torch.zeros_like(cu_q)
    lengths = [([300, 1, 500], [300, 77, 900]),
               ([129, 0, 640], [400, 5, 640]),
               ([1, 700, 64], [700, 700, 64]),
               ([513, 200, 2], [513, 300, 600])]

    def set_lengths(lq, lk):
        for cu, ls in ((cu_q, lq), (cu_k, lk)):
            cu.copy_(torch.tensor([0, *torch.tensor(ls).cumsum(0).tolist()],
                                  dtype=torch.int32))

    def step():
        out.copy_(flashmlir.flash_attn_varlen_func(
            q, k, v, cu_q, cu_k, 700, 1000, causal=True,
            kernel_dir=kernel_dir))

    set_lengths(*lengths[0])
    for t in (q, k, v):
        t.normal_(generator=gen)
    graph = _capture(torch, step)
    for lq, lk in lengths[1:]:
        set_lengths(lq, lk)
        for t in (q, k, v):
            t.normal_(generator=gen)
        graph.replay()
        torch.cuda.synchronize()
        sq, sk = 0, 0
        for nq, nk in zip(lq, lk):
            if nq:
                ref = masked_reference(
                    torch, q[sq:sq + nq].transpose(0, 1),
                    k[sk:sk + nk].transpose(0, 1),
                    v[sk:sk + nk].transpose(0, 1), d ** -0.5,
                    causal=True).transpose(0, 1)
                err = (out[sq:sq + nq].float() - ref).abs().max().item()
                assert err < 2e-3, (lq, lk, err)
            sq, sk = sq + nq, sk + nk
