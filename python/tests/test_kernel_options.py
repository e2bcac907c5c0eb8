"""The kernel options are declared once (fa/Target/KernelOptions.def):
fa-compile's flags and flashmlir.compile()'s keywords both come from that
table, take the same values to the same kernel, and are refused by the same
range check (fa::checkKernelOptions) with the same words."""
import re
import subprocess

import pytest

# Tool flags of fa-compile that are not kernel options.
_TOOL_FLAGS = {"o", "out-dir", "emit", "no-cubin", "help", "help-list",
               "version"}


def _help_flags(build_dir):
    text = subprocess.run([str(build_dir / "bin" / "fa-compile"), "--help"],
                          capture_output=True, text=True, check=True).stdout
    return set(re.findall(r"^\s+--?([a-z0-9-]+)", text, re.M))


def test_flags_and_keywords_are_the_table(flashmlir, build_dir):
    from flashmlir.compiler import kernel_option_flags

    flags = kernel_option_flags()
    options = flashmlir.kernel_options()
    assert set(flags) == set(options)
    # Every flag fa-compile lists is a row of the table or one of the tool's
    # own; every row has its flag.
    listed = _help_flags(build_dir)
    assert listed - _TOOL_FLAGS == set(flags.values())
    # The keywords compile() took before the table, with their defaults.
    expected = {
        "causal": False, "window": 0,
        "softcap": 0.0, "bottom_right": False, "block_r": 0, "block_c": 0,
        "stages": 0, "ping_pong": True, "intra_overlap": True,
        "kv_lengths": False, "page_size": 0,
        "varlen": False, "diagonal_offset": 0, "query_group": 0,
        "poly_exp2_period": 8}
    for keyword, default in expected.items():
        assert options[keyword][1] == "plain", keyword
        assert options[keyword][2] == default, keyword
    # None-spelt keywords: None is the default (or the back end's choice).
    for keyword in ("value_head_dim", "out_dtype", "kv_dtype", "scale",
                    "rescale_threshold", "poly_exp2_degree"):
        assert options[keyword][1] == "none_is_default", keyword
    assert options["persistent"][1] == "none_or_bool"
    assert options["kv_splits"][1] == "chunk_count"
    # Typed choices, by name.
    assert options["row_sum_mma"][1:] == ("choice", "auto")
    assert options["epilogue"][1:] == ("choice", "auto")
    assert options["sm90_kernel"][1:] == ("choice", "wgmma")
    assert options["arch"][1:] == ("choice", "sm_90a")
    assert options["dtype"][1:] == ("choice", "f16")
    assert options["out_dtype"][1:] == ("none_is_default", None)
    assert options["kv_dtype"][1:] == ("none_is_default", None)


@pytest.mark.parametrize("keyword,bad,names", [
    ("epilogue", "stmatrix", "tma, direct or auto"),
    ("epilogue", 1, "tma, direct or auto"),
    ("row_sum_mma", "sometimes", "on, off or auto"),
    ("row_sum_mma", True, "on, off or auto"),
    ("sm90_kernel", "tcgen05", "wgmma or mma-sync"),
    ("arch", "sm_75", "sm_80, sm_90a or sm_100a"),
    ("arch", 90, "sm_80, sm_90a or sm_100a"),
    ("dtype", "fp16", "f16, bf16 or e4m3"),
    ("kv_dtype", "e5m2", "f16, bf16 or e4m3, or None"),
    ("out_dtype", "f32", "f16, bf16 or e4m3, or None"),
])
def test_typed_choices_refuse_other_names(flashmlir, keyword, bad, names):
    """A choice nobody has is refused with the names there are, not built
    as the default (an unknown epilogue used to become 'auto')."""
    with pytest.raises(flashmlir.CompileError,
                       match=f"{keyword} must be one of the strings {names}"):
        flashmlir.compile(head_dim=128, cache_dir="", **{keyword: bad})


def test_unknown_keyword_is_refused(flashmlir):
    with pytest.raises(flashmlir.CompileError,
                       match="unknown kernel option 'casual'"):
        flashmlir.compile(head_dim=64, casual=True)


def test_keywords_the_table_added(flashmlir):
    """scale, lse, epilogue, ctas_per_sm: fa-compile had them, compile()
    did not; they reach the kernel's metadata."""
    k = flashmlir.compile(head_dim=128, scale=0.5, lse=False,
                          epilogue="direct", ctas_per_sm=1, cache_dir="")
    assert k.metadata["scale"] == 0.5
    assert k.metadata["writes_lse"] is False
    assert k.metadata["tma_box_rows_o"] == 0  # direct: no O tensor map
    with pytest.raises(flashmlir.CompileError,
                       match=r"expected scale in \[2\^-64, 2\^64\], got -1"):
        flashmlir.compile(head_dim=64, scale=-1.0, cache_dir="")


@pytest.mark.parametrize("flags,keywords", [
    (["--head-dim", "64", "--causal", "--causal-align", "bottom-right",
      "--split-kv", "auto"],
     dict(head_dim=64, causal=True, bottom_right=True, kv_splits="auto")),
    (["--head-dim", "128", "--kv-lengths", "--page-size", "64",
      "--persistent=false", "--no-lse", "--rescale-threshold", "off"],
     dict(head_dim=128, kv_lengths=True, page_size=64, persistent=False,
          lse=False, rescale_threshold=-1.0)),
    (["--head-dim", "128", "--dtype", "bf16", "--window", "100",
      "--diagonal-offset", "3", "--causal", "--split-kv", "4"],
     dict(head_dim=128, dtype="bf16", window=100, diagonal_offset=3,
          causal=True, kv_splits=4)),
])
def test_flag_and_keyword_build_one_kernel(flashmlir, build_dir, tmp_path,
                                           flags, keywords):
    prefix = tmp_path / "k"
    subprocess.run([str(build_dir / "bin" / "fa-compile"), *flags,
                    "--no-cubin", "-o", str(prefix)], check=True,
                   capture_output=True)
    k = flashmlir.compile(**keywords, cache_dir="")
    assert (prefix.with_suffix(".ptx")).read_text() == k.ptx
    import json
    meta = json.loads(prefix.with_suffix(".json").read_text())
    assert meta["kernel"] == k.name


@pytest.mark.parametrize("flag,value,keyword,pyvalue", [
    ("window", "4294967297", "window", 4294967297),
    ("head-dim", "0", "head_dim", 0),
    ("page-size", "-1", "page_size", -1),
    ("rescale-threshold", "200", "rescale_threshold", 200.0),
    ("poly-exp2-period", "0", "poly_exp2_period", 0),
])
def test_one_range_check_for_both(flashmlir, build_dir, tmp_path, flag,
                                  value, keyword, pyvalue):
    """fa-compile says `--flag: <message>`, compile() says `<message>`: the
    same words from fa::checkKernelOptions."""
    got = subprocess.run([str(build_dir / "bin" / "fa-compile"),
                          f"--{flag}", value, "--no-cubin", "-o",
                          str(tmp_path / "k")], capture_output=True,
                         text=True)
    assert got.returncode != 0
    prefix = f"fa-compile: error: --{flag}: "
    assert got.stderr.startswith(prefix), got.stderr
    message = got.stderr[len(prefix):].strip()
    with pytest.raises(flashmlir.CompileError) as error:
        flashmlir.compile(**{"head_dim": 128, keyword: pyvalue},
                          cache_dir="")
    assert str(error.value) == message


def test_kernel_file_names_agree(flashmlir):
    """flashmlir.kernel_file_name (pure Python: what a machine without the
    compiler looks kernels up by) and fa::kernelFileName (what fa-compile
    --out-dir writes) give every combination of the named options one
    name."""
    import itertools
    ext = flashmlir.compiler._extension()
    rows = itertools.product(
        ("sm_90a", "sm_80"), (64, 128), (None, 96), ("f16", "bf16", "e4m3"),
        (False, True), (0, 17), (0.0, 5.0, 30.2), (False, True), (0, 7),
        (False, True), (False, True), (0, 64), (False, True), (0, 4),
        (None, "e4m3"), (0, 8), (False, True), (False, True))
    seen = compared = 0
    for (arch, d, dv, dtype, causal, window, softcap, bottom_right, offset,
         split, lengths, page, varlen, group, kv, max_rows, backward,
         deterministic) in rows:
        # Every 37th of the 2^16 * 3^2 combinations: every value of every
        # option, in many pairings (the rule is a concatenation).
        seen += 1
        if seen % 37:
            continue
        compared += 1
        python = flashmlir.kernel_file_name(
            arch, d, dtype, causal, window=window, bottom_right=bottom_right,
            split_kv=split, kv_lengths=lengths, page_size=page,
            varlen=varlen, softcap=softcap, value_head_dim=dv,
            diagonal_offset=offset, query_group=group, kv_dtype=kv,
            max_rows=max_rows, backward=backward,
            deterministic=deterministic)
        cpp = ext.kernel_file_name(dict(
            arch=arch, head_dim=d, dtype=dtype, causal=causal, window=window,
            bottom_right=bottom_right, kv_splits="auto" if split else None,
            kv_lengths=lengths, page_size=page, varlen=varlen,
            softcap=softcap, value_head_dim=dv, diagonal_offset=offset,
            query_group=group, kv_dtype=kv, max_rows=max_rows,
            backward=backward, deterministic=deterministic))
        assert python == cpp
    assert compared > 15200
    assert flashmlir.kernel_file_name(
        "sm_90a", 128, "f16", True, bottom_right=True, split_kv=True,
        kv_lengths=True, page_size=64, query_group=4, kv_dtype="e4m3") == \
        "sm_90a_d128_f16_causal_bralign_splitkv_kvlens_paged64_qg4_kve4m3"
    assert flashmlir.kernel_file_name(
        "sm_90a", 128, "f16", False, split_kv=True, kv_lengths=True,
        kv_dtype="e4m3", max_rows=8) == \
        "sm_90a_d128_f16_splitkv_kvlens_mr8_kve4m3"


def test_out_dir_names_by_the_rule(flashmlir, build_dir, tmp_path):
    """fa-compile --out-dir writes the file flashmlir's lookup finds, and
    refuses options the name does not spell (a lookup would not see
    them)."""
    fc = str(build_dir / "bin" / "fa-compile")
    got = subprocess.run([fc, "--head-dim", "64", "--causal", "--causal-align",
                          "bottom-right", "--split-kv", "auto", "--no-cubin",
                          "--out-dir", str(tmp_path)], capture_output=True,
                         text=True)
    assert got.returncode == 0, got.stderr
    name = flashmlir.kernel_file_name("sm_90a", 64, "f16", True,
                                      bottom_right=True, split_kv=True)
    assert (tmp_path / f"{name}.ptx").exists()
    assert (tmp_path / f"{name}.json").exists()
    for flags, why in [
            (["--stages", "3"], "--stages: not part of a kernel's file name"),
            (["--split-kv", "4"], "--split-kv: a split-KV kernel found by"),
            (["-o", str(tmp_path / "x")], "--out-dir: give -o")]:
        got = subprocess.run([fc, "--head-dim", "64", "--no-cubin",
                              "--out-dir", str(tmp_path), *flags],
                             capture_output=True, text=True)
        assert got.returncode != 0 and why in got.stderr, got.stderr
