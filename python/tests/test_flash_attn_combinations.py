"""flash-attention's entry points with the masks combined with the inference
features (issue 17): windows and softcap on flash_attn_func,
flash_attn_varlen_func and flash_attn_with_kvcache. The argument mapping
is checked on the CPU; the gpu-marked tests run the kernels of
bench/build_kernels.sh, build_varlen_kernels.sh and build_paged_kernels.sh
against an independent per-sequence reference, by flash-attention's 2x rule
(the error to an fp32 reference at most twice that of the same math in
f16)."""
import math
import os

import pytest

from conftest import masked_reference

SOFTCAP = 5.0


# -- the argument mapping (no GPU) ------------------------------------------


# (causal, window, diagonal_offset): the kernels keep j <= p (causal) and
# |p - j| < window around p = i' + diagonal_offset.
@pytest.mark.parametrize("causal,window_size,expected", [
    (False, (-1, -1), (False, 0, 0)),
    (True, (-1, -1), (True, 0, 0)),
    (False, (-1, 0), (True, 0, 0)),        # flash-attn's causal spelling
    (False, (16, 16), (False, 17, 0)),
    (True, (16, 16), (True, 17, 0)),       # causal makes right 0
    (True, (16, -1), (True, 17, 0)),
    (False, (16, 0), (True, 17, 0)),
    (False, (0, 0), (True, 1, 0)),
    (False, (4, 8), (True, 13, 8)),        # separate left and right reaches
    (False, (8, 4), (True, 13, 4)),
    (False, (0, 3), (True, 4, 3)),
    (False, (-1, 3), (True, 0, 3))])       # causal, 3 keys ahead
def test_window_size_maps_to_the_kernels(flashmlir, causal, window_size,
                                         expected):
    got = flashmlir._flash_window("api", causal, window_size, 0.0)
    assert got == expected + (0.0,)


def test_window_size_mapping_keeps_the_same_keys(flashmlir):
    """Every (left, right) the mapping takes keeps exactly flash-attention's
    keys i' - left <= j <= i' + right, by the kernels' own rule."""
    for left in range(-1, 7):
        for right in range(-1, 7):
            if left >= 0 and right == -1:
                continue
            causal, window, offset, _ = flashmlir._flash_window(
                "api", False, (left, right), 0.0)
            for i in range(-4, 12):
                for j in range(0, 16):
                    p = i + offset
                    kept = (not causal or j <= p) and \
                        (not window or abs(p - j) < window)
                    want = (left < 0 or j >= i - left) and \
                        (right < 0 or j <= i + right)
                    assert kept == want, (left, right, i, j)


@pytest.mark.parametrize("window_size,message", [
    ((4, -1), "left only"),
    ((-2, 0), "-1 \\(unbounded\\)"), ((4,), "a pair"), ("ab", "a pair")])
def test_windows_the_kernels_lack_are_refused(flashmlir, window_size,
                                              message):
    from flashmlir import runtime
    with pytest.raises(runtime.KernelArgumentError, match=message):
        flashmlir._flash_window("api", False, window_size, 0.0)


def test_every_entry_point_refuses_a_left_only_window(flashmlir):
    """The three entry points share the mapping: each names itself."""
    from flashmlir import runtime
    torch = pytest.importorskip("torch")
    q4 = torch.zeros(1, 4, 2, 128, dtype=torch.float16)
    q3 = torch.zeros(4, 2, 128, dtype=torch.float16)
    sums = torch.tensor([0, 4], dtype=torch.int32)
    calls = [
        ("flash_attn_func", lambda: flashmlir.flash_attn_func(
            q4, q4, q4, window_size=(2, -1))),
        ("flash_attn_varlen_func", lambda: flashmlir.flash_attn_varlen_func(
            q3, q3, q3, sums, sums, 4, 4, window_size=(2, -1))),
        ("flash_attn_with_kvcache", lambda: flashmlir.flash_attn_with_kvcache(
            q4, q4, q4, window_size=(2, -1)))]
    for name, call in calls:
        with pytest.raises(runtime.KernelArgumentError,
                           match=f"{name}: window_size"):
            call()
    with pytest.raises(runtime.KernelArgumentError, match="softcap must be"):
        flashmlir.flash_attn_func(q4, q4, q4, softcap="big")


def test_kernel_names_carry_window_and_softcap(flashmlir, tmp_path):
    """The names the build scripts write are the ones looked up: a file of
    another softcap under the name is refused, not run."""
    import json
    from flashmlir import runtime
    k = flashmlir.compile(head_dim=64, causal=True, softcap=SOFTCAP,
                          bottom_right=True)
    assert k.metadata["softcap"] == SOFTCAP
    name = tmp_path / "sm_90a_d64_f16_causal_sc5_bralign"
    name.with_suffix(".cubin").write_bytes(k.cubin)
    wrong = dict(k.metadata, softcap=4.0)
    name.with_suffix(".json").write_text(json.dumps(wrong))
    with pytest.raises(runtime.MetadataError, match="softcap"):
        flashmlir._kernel_for("sm_90a", 64, "f16", True, str(tmp_path),
                              bottom_right=True, softcap=SOFTCAP)
    name.with_suffix(".json").write_text(json.dumps(k.metadata))
    loaded = flashmlir._kernel_for("sm_90a", 64, "f16", True, str(tmp_path),
                                   bottom_right=True, softcap=SOFTCAP)
    assert loaded.meta["softcap"] == SOFTCAP


# -- on the GPU ---------------------------------------------------------------


def check_two_x(torch, got, seqs, causal, window_size, softcap):
    """flash-attention's 2x rule per sequence: `got` [Hq, Nq, D] tensors
    against the fp32 reference (flash-attention's causal and window_size,
    applied directly), within twice the f16 math's error."""
    worst, uncapped = 0.0, 0.0
    for n, (out, (q, k, v)) in enumerate(zip(got, seqs)):
        scale = 1 / math.sqrt(q.shape[-1])
        exact = masked_reference(torch, q, k, v, scale, causal,
                                 softcap=softcap, window_size=window_size)
        f16 = masked_reference(torch, q, k, v, scale, causal,
                               softcap=softcap, dtype=torch.float16,
                               window_size=window_size).float()
        ours = (out.float() - exact).abs().max().item()
        math_f16 = (f16 - exact).abs().max().item()
        assert ours <= 2 * math_f16 + 1e-4, (n, ours, math_f16)
        worst = max(worst, ours)
        if softcap:
            plain = masked_reference(torch, q, k, v, scale, causal,
                                     window_size=window_size)
            uncapped = max(uncapped, (plain - exact).abs().max().item())
    if softcap:
        # The inputs make the cap matter: a kernel dropping it would fail.
        assert uncapped > 20 * (worst + 1e-4), (uncapped, worst)


@pytest.mark.gpu
@pytest.mark.parametrize("causal,window_size,softcap,nq,nk", [
    (True, (-1, -1), SOFTCAP, 77, 300),     # bottom-right causal + softcap
    (False, (16, 16), SOFTCAP, 256, 256)])  # window + softcap
def test_flash_attn_func_softcap(cuda_flashmlir, causal, window_size, softcap,
                                 nq, nk):
    torch, flashmlir = cuda_flashmlir
    torch.manual_seed(nq + nk)
    b, hq, hkv, d = 2, 8, 2, 128
    # Scores of a few units, so that softcap 5 bends them.
    q = 3 * torch.randn(b, nq, hq, d, device="cuda", dtype=torch.float16)
    k = torch.randn(b, nk, hkv, d, device="cuda", dtype=torch.float16)
    v = torch.randn(b, nk, hkv, d, device="cuda", dtype=torch.float16)
    out = flashmlir.flash_attn_func(q, k, v, causal=causal,
                                    window_size=window_size, softcap=softcap,
                                    num_splits=1)
    seqs = [tuple(t[i].transpose(0, 1) for t in (q, k, v)) for i in range(b)]
    check_two_x(torch, [out[i].transpose(0, 1) for i in range(b)], seqs,
                causal, window_size, softcap)


@pytest.mark.gpu
@pytest.mark.parametrize("causal,window_size,softcap", [
    (False, (16, 16), 0.0), (True, (16, 0), 0.0), (True, (-1, -1), SOFTCAP),
    (False, (16, 5), 0.0)])
def test_varlen_with_window_or_softcap(cuda_flashmlir, causal, window_size,
                                       softcap):
    torch, flashmlir = cuda_flashmlir
    torch.manual_seed(7)
    lq, lk = [200, 1, 0, 513], [200, 77, 3, 600]
    hq, hkv, d = 8, 2, 128
    cq = [0] + [sum(lq[:i + 1]) for i in range(len(lq))]
    ck = [0] + [sum(lk[:i + 1]) for i in range(len(lk))]
    q = 3 * torch.randn(cq[-1], hq, d, device="cuda", dtype=torch.float16)
    k = torch.randn(ck[-1], hkv, d, device="cuda", dtype=torch.float16)
    v = torch.randn_like(k)
    out = flashmlir.flash_attn_varlen_func(
        q, k, v, torch.tensor(cq, dtype=torch.int32, device="cuda"),
        torch.tensor(ck, dtype=torch.int32, device="cuda"), max(lq), max(lk),
        causal=causal, window_size=window_size, softcap=softcap,
        kernel_dir=os.environ.get("FLASHMLIR_VARLEN_KERNEL_DIR", ".varlen"))
    keep = [i for i in range(len(lq)) if lq[i]]
    seqs = [(q[cq[i]:cq[i + 1]].transpose(0, 1),
             k[ck[i]:ck[i + 1]].transpose(0, 1),
             v[ck[i]:ck[i + 1]].transpose(0, 1)) for i in keep]
    got = [out[cq[i]:cq[i + 1]].transpose(0, 1) for i in keep]
    check_two_x(torch, got, seqs, causal, window_size, softcap)


@pytest.mark.gpu
@pytest.mark.parametrize("causal,window_size,softcap", [
    (True, (64, 0), 0.0), (True, (-1, -1), SOFTCAP), (False, (40, 7), 0.0)])
@pytest.mark.parametrize("nq,lengths,num_splits", [
    (1, [700, 1, 64], 0),    # decode: split-KV, one sequence of one key
    (9, [300, 1000, 9], 1)])  # a chunk after the cache, one CTA per block
def test_kvcache_with_window_or_softcap(cuda_flashmlir, causal, window_size,
                                        softcap, nq, lengths, num_splits):
    torch, flashmlir = cuda_flashmlir
    torch.manual_seed(nq + len(lengths))
    page, hq, hkv, d = 64, 8, 2, 128
    b = len(lengths)
    max_pages = math.ceil(max(lengths) / page)
    pages = b * max_pages + 3
    k_cache = torch.randn(pages, page, hkv, d, device="cuda",
                          dtype=torch.float16)
    v_cache = torch.randn_like(k_cache)
    table = torch.randperm(pages, device="cuda")[:b * max_pages].view(
        b, max_pages).to(torch.int32)
    q = 3 * torch.randn(b, nq, hq, d, device="cuda", dtype=torch.float16)
    out = flashmlir.flash_attn_with_kvcache(
        q, k_cache, v_cache,
        cache_seqlens=torch.tensor(lengths, dtype=torch.int32, device="cuda"),
        block_table=table, causal=causal, window_size=window_size,
        softcap=softcap, num_splits=num_splits,
        kernel_dir=os.environ.get("FLASHMLIR_PAGED_KERNEL_DIR", ".paged"))
    seqs = []
    for i, n in enumerate(lengths):
        j = torch.arange(n, device="cuda")
        rows = table[i].long()[j // page], j % page
        seqs.append((q[i].transpose(0, 1), k_cache[rows].transpose(0, 1),
                     v_cache[rows].transpose(0, 1)))
    check_two_x(torch, [out[i].transpose(0, 1) for i in range(b)], seqs,
                causal, window_size, softcap)
