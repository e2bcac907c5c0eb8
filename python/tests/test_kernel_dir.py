"""The kernel-directory lookup of flashmlir.attention and the flash_attn_*
entry points (flashmlir._kernel_for): a file named like the request is
launched only if its metadata describes the kernel the call implies --
every field that changes what the kernel computes, defaults included. No
GPU: the refusal comes when the file is loaded, before any launch."""
import json
import subprocess

import pytest

from conftest import ELF_HEADER

DEFAULT = "sm_90a_d128_f16"
CAUSAL = "sm_90a_d128_f16_causal"


def _save(build_dir, kernel_dir, name, *flags, head_dim=128):
    """fa-compile's metadata for `flags` saved as kernel_dir/name.json, with
    a stand-in cubin (the lookup refuses before the cubin is loaded)."""
    subprocess.run([str(build_dir / "bin" / "fa-compile"), "--arch", "sm_90a",
                    "--head-dim", str(head_dim), *flags, "--no-cubin", "-o",
                    str(kernel_dir / name)], check=True, capture_output=True)
    (kernel_dir / f"{name}.cubin").write_bytes(ELF_HEADER)


# (file name, fa-compile flags, _kernel_for's arguments after the first
# five, the field the refusal names).
MISMATCHES = [
    (DEFAULT, ["--scale", "0.5"], {}, "scale"),
    (CAUSAL, ["--causal", "--causal-align", "bottom-right"], {},
     "bottom_right"),
    (DEFAULT, ["--varlen"], {}, "varlen"),
    (DEFAULT, ["--kv-lengths"], {}, "kv_lengths"),
    (DEFAULT, ["--kv-lengths", "--page-size", "64"], {}, "page_size"),
    (DEFAULT, ["--split-kv", "auto"], {}, "split_kv"),
    # A split kernel with a fixed chunk count where the call leaves it to
    # the launch (auto).
    (f"{DEFAULT}_splitkv", ["--split-kv", "4"], dict(split_kv=True),
     "kv_splits"),
    (CAUSAL, ["--causal", "--diagonal-offset", "3"], {}, "diagonal_offset"),
    (DEFAULT, ["--softcap", "5"], {}, "softcap"),
    (f"{DEFAULT}_sc5", ["--softcap", "4"], dict(softcap=5.0), "softcap"),
    (DEFAULT, ["--window", "16"], {}, "window"),
    (DEFAULT, ["--value-head-dim", "64"], {}, "value_head_dim"),
    (DEFAULT, ["--dtype", "bf16"], {}, "dtype"),
    (DEFAULT, ["--no-lse"], {}, "writes_lse"),
    (DEFAULT, ["--causal"], {}, "causal"),
    # The request asks for an option the file lacks.
    (f"{CAUSAL}_bralign", ["--causal"], dict(bottom_right=True),
     "bottom_right"),
    (f"{DEFAULT}_kvlens", [], dict(kv_lengths=True), "kv_lengths"),
]


@pytest.mark.parametrize("name,flags,options,field", MISMATCHES,
                         ids=[f"{m[0]}{''.join(m[1])}" for m in MISMATCHES])
def test_a_file_of_other_options_is_refused(flashmlir, build_dir, tmp_path,
                                            name, flags, options, field):
    from flashmlir import runtime
    _save(build_dir, tmp_path, name, *flags)
    causal = "_causal" in name
    with pytest.raises(runtime.MetadataError,
                       match=f"describes .*'{field}'.* not the requested"):
        flashmlir._kernel_for("sm_90a", 128, "f16", causal, str(tmp_path),
                              **options)


@pytest.mark.parametrize("name,flags,options", [
    (DEFAULT, [], {}),
    (CAUSAL, ["--causal"], {}),
    (f"{CAUSAL}_bralign", ["--causal", "--causal-align", "bottom-right"],
     dict(bottom_right=True)),
    (f"{DEFAULT}_sc5", ["--softcap", "5"], dict(softcap=5.0)),
    (f"{CAUSAL}_w17_bralign_do3",
     ["--causal", "--window", "17", "--causal-align", "bottom-right",
      "--diagonal-offset", "3"],
     dict(window=17, bottom_right=True, diagonal_offset=3)),
    (f"{DEFAULT}_splitkv", ["--split-kv", "auto"], dict(split_kv=True)),
    (f"{DEFAULT}_kvlens_paged64", ["--kv-lengths", "--page-size", "64"],
     dict(kv_lengths=True, page_size=64)),
    (f"{DEFAULT}_varlen", ["--varlen"], dict(varlen=True)),
    # The scale written out explicitly: the default's f32.
    (DEFAULT, ["--scale", "0.08838834764831845"], {}),
])
def test_a_file_of_the_requested_options_is_loaded(flashmlir, build_dir,
                                                   tmp_path, name, flags,
                                                   options):
    _save(build_dir, tmp_path, name, *flags)
    kernel = flashmlir._kernel_for("sm_90a", 128, "f16", "_causal" in name,
                                   str(tmp_path), **options)
    assert kernel.meta == json.loads((tmp_path / f"{name}.json").read_text())


@pytest.mark.parametrize("head_dim", [32, 64, 96, 128, 160, 192, 256])
def test_the_default_scale_of_every_head_dim(flashmlir, build_dir, tmp_path,
                                             head_dim):
    """The compiler's 1/sqrt(D) in f32 (one unit in the last place from
    the correctly rounded value at D = 96) is the default scale."""
    name = f"sm_90a_d{head_dim}_f16"
    _save(build_dir, tmp_path, name, head_dim=head_dim)
    flashmlir._kernel_for("sm_90a", head_dim, "f16", False, str(tmp_path))


def test_value_head_dim_and_e4m3_names(flashmlir, build_dir, tmp_path):
    from flashmlir import runtime
    _save(build_dir, tmp_path, "sm_90a_d192_dv128_f16", "--value-head-dim",
          "128", head_dim=192)
    kernel = flashmlir._kernel_for("sm_90a", 192, "f16", False, str(tmp_path),
                                   value_head_dim=128)
    assert kernel.value_head_dim == 128
    # An e4m3 kernel named for O in bf16 but writing f16.
    _save(build_dir, tmp_path, "sm_90a_d128_e4m3_bf16", "--dtype", "e4m3",
          "--out-dtype", "f16")
    with pytest.raises(runtime.MetadataError, match="'out_dtype'"):
        flashmlir._kernel_for("sm_90a", 128, "e4m3", False, str(tmp_path))


def test_metadata_without_the_newer_fields_reads_as_defaults(
        flashmlir, build_dir, tmp_path):
    """Metadata written before a field existed (no scale, window, varlen,
    ... keys) is the default kernel."""
    _save(build_dir, tmp_path, DEFAULT)
    path = tmp_path / f"{DEFAULT}.json"
    meta = json.loads(path.read_text())
    for key in ("scale", "out_dtype", "value_head_dim", "window", "softcap",
                "bottom_right", "diagonal_offset", "kv_splits", "kv_lengths",
                "page_size", "varlen", "writes_lse"):
        meta.pop(key)
    meta["split_kv"] = False
    path.write_text(json.dumps(meta))
    kernel = flashmlir._kernel_for("sm_90a", 128, "f16", False, str(tmp_path))
    assert "scale" not in kernel.meta
