"""flashmlir.compile's disk cache (issue 15): a second process loads the
kernel instead of compiling it; the key follows every option and the
compiler; corrupt, truncated and misplaced entries are compiled again,
never returned; concurrent writers leave one whole entry; off with
FLASHMLIR_CACHE_DIR="" or cache_dir="". CPU only (sm_80 kernels at D 64
compile fastest, ~0.5 s)."""
import concurrent.futures
import hashlib
import json
import os
import pathlib
import subprocess
import sys

import pytest

from conftest import ROOT

KW = dict(head_dim=64, arch="sm_80")


@pytest.fixture
def cache(flashmlir, tmp_path, monkeypatch):
    """An empty disk cache in tmp_path and an empty in-process cache."""
    directory = tmp_path / "cache"
    monkeypatch.setenv("FLASHMLIR_CACHE_DIR", str(directory))
    flashmlir.compiler.clear_cache(disk=False)
    yield directory
    flashmlir.compiler.clear_cache(disk=False)


def entries(directory):
    return sorted(p.name for p in directory.glob("*.fmc"))


def delta(before, after):
    return {f: getattr(after, f) - getattr(before, f)
            for f in ("hits", "misses", "disk_hits", "disk_writes",
                      "disk_rejected", "compiles")}


def test_cache_dir_follows_the_environment(flashmlir, monkeypatch, tmp_path):
    c = flashmlir.compiler
    monkeypatch.setenv("FLASHMLIR_CACHE_DIR", str(tmp_path / "x"))
    assert c.cache_dir() == str(tmp_path / "x")
    monkeypatch.setenv("FLASHMLIR_CACHE_DIR", "")
    assert c.cache_dir() is None
    assert c.cache_info().directory is None
    monkeypatch.delenv("FLASHMLIR_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert c.cache_dir() == str(tmp_path / "xdg" / "flashmlir")
    # The XDG spec: a relative XDG_CACHE_HOME is ignored.
    monkeypatch.setenv("XDG_CACHE_HOME", "relative")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert c.cache_dir() == str(tmp_path / "home" / ".cache" / "flashmlir")


_CHILD = """
import hashlib, json, sys, time
sys.path.insert(0, {python!r})
import flashmlir
t = time.perf_counter()
k = flashmlir.{call}
seconds = time.perf_counter() - t
info = flashmlir.compiler.cache_info()
print(json.dumps(dict(info._asdict(), seconds=seconds,
                      cubin=hashlib.sha256(k.cubin).hexdigest(),
                      ptx=hashlib.sha256(k.ptx.encode()).hexdigest())))
"""


def child(build_dir, directory, call="compile(head_dim=64, arch='sm_80')"):
    # The child loads the extension this process loaded (under the
    # sanitizer run that is the uninstrumented build's: an instrumented one
    # needs the ASan runtime preloaded).
    import flashmlir
    loaded = pathlib.Path(flashmlir.compiler._extension().__file__)
    env = dict(os.environ, FLASHMLIR_BUILD_DIR=str(loaded.parents[2]),
               FLASHMLIR_CACHE_DIR=str(directory))
    out = subprocess.run(
        [sys.executable, "-c",
         _CHILD.format(python=str(ROOT / "python"), call=call)],
        env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_a_second_process_loads_the_kernel(flashmlir, build_dir, tmp_path):
    first = child(build_dir, tmp_path)
    second = child(build_dir, tmp_path)
    assert (first["compiles"], first["disk_writes"], first["disk_hits"]) == \
        (1, 1, 0)
    assert (second["compiles"], second["disk_writes"],
            second["disk_hits"]) == (0, 0, 1)
    assert second["directory"] == str(tmp_path)
    assert (second["cubin"], second["ptx"]) == (first["cubin"], first["ptx"])
    assert len(entries(tmp_path)) == 1
    # Loading is a file read and a hash; compiling runs MLIR and ptxas.
    assert second["seconds"] < first["seconds"] / 2, (first, second)


def test_concurrent_processes_leave_one_whole_entry(flashmlir, build_dir,
                                                    tmp_path):
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        runs = list(pool.map(lambda _: child(build_dir, tmp_path), range(3)))
    assert len({r["cubin"] for r in runs}) == 1
    assert len(entries(tmp_path)) == 1
    assert not list(tmp_path.glob("*.tmp"))
    assert child(build_dir, tmp_path)["disk_hits"] == 1


def test_disk_hit_in_process(flashmlir, cache):
    c = flashmlir.compiler
    before = c.cache_info()
    a = flashmlir.compile(**KW)
    flashmlir.compile(**KW)
    assert delta(before, c.cache_info()) == dict(
        hits=1, misses=1, disk_hits=0, disk_writes=1, disk_rejected=0,
        compiles=1)
    c.clear_cache(disk=False)
    before = c.cache_info()
    b = flashmlir.compile(**KW)
    assert delta(before, c.cache_info())["disk_hits"] == 1
    assert (b.cubin, b.ptx, b.metadata, b.name, b.mlir("kernel"),
            b.mlir("host"), b.ptxas_log) == \
        (a.cubin, a.ptx, a.metadata, a.name, a.mlir("kernel"), a.mlir("host"),
         a.ptxas_log)


def test_every_option_is_in_the_key(flashmlir):
    c = flashmlir.compiler
    base = dict(arch="sm_90a", head_dim=128, dtype="f16", causal=False,
                window=0, bottom_right=False, softcap=0.0, block_r=0,
                block_c=0, rescale_threshold=None, poly_exp2_degree=-1,
                poly_exp2_period=8, stages=0, ping_pong=True,
                intra_overlap=True, persistent=-1, sm90_kernel="wgmma")
    changed = dict(arch="sm_80", head_dim=64, dtype="bf16", causal=True,
                   window=17, bottom_right=True, softcap=30.0, block_r=64,
                   block_c=64, rescale_threshold=8.0, poly_exp2_degree=3,
                   poly_exp2_period=4, stages=3, ping_pong=False,
                   intra_overlap=False, persistent=0, sm90_kernel="mma-sync")
    assert set(changed) == set(base)
    key = c._cache_key("kernel", base)
    assert c._cache_key("kernel", dict(base)) == key
    keys = {key}
    for name, value in changed.items():
        keys.add(c._cache_key("kernel", dict(base, **{name: value})))
    assert len(keys) == len(changed) + 1
    # rescale_threshold None (the measured default) is not 0.0 (always).
    assert c._cache_key("kernel", dict(base, rescale_threshold=0.0)) != key
    # A module and a kernel of the same options never share an entry.
    assert c._cache_key("module", base) != key


def test_compile_passes_every_option_to_the_key(flashmlir, cache):
    flashmlir.compile(**KW)
    flashmlir.compile(**KW, causal=True)
    flashmlir.compile(**KW, rescale_threshold=4.0)
    assert len(entries(cache)) == 3


def test_the_compiler_is_in_the_key(flashmlir, monkeypatch, tmp_path):
    c = flashmlir.compiler
    options = dict(arch="sm_80", head_dim=64)
    key, compiler = c._cache_key("kernel", options), c.compiler_id()
    # Another ptxas ($CUDA_HOME is searched first, as the extension does).
    fake = tmp_path / "cuda" / "bin" / "ptxas"
    fake.parent.mkdir(parents=True)
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    assert str(fake) in c._ptxas_identity()
    assert c.compiler_id() != compiler
    assert c._cache_key("kernel", options) != key
    monkeypatch.delenv("CUDA_HOME")
    assert c.compiler_id() == compiler
    # Another extension (or MLIR library) build.
    monkeypatch.setattr(c, "_extension_identity", lambda: "another build")
    assert c.compiler_id() != compiler
    assert c._cache_key("kernel", options) != key


def test_the_extension_identity_is_its_contents(flashmlir):
    c = flashmlir.compiler
    ident = c._extension_identity()
    with open(c._extension().__file__, "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() in ident
    # Debian's extension runs on libMLIR.so / libLLVM.so, which change the
    # generated code without changing the extension.
    with open("/proc/self/maps") as maps:
        mapped = maps.read()
    for lib in ("libMLIR", "libLLVM"):
        assert (lib in ident) == (lib in mapped)


def _corruptions(data, other):
    """(what, bytes) of entries that must not be returned."""
    magic = b"flashmlir-compile-cache\n"
    header_end = len(magic) + 8 + int.from_bytes(
        data[len(magic):len(magic) + 8], "big")
    flipped = bytearray(data)
    flipped[header_end + 100] ^= 0x40
    yield "empty", b""
    yield "magic only", magic
    yield "truncated in the header", data[:header_end - 10]
    yield "truncated in the payload", data[:len(data) - 100]
    yield "a byte flipped in the payload", bytes(flipped)
    yield "a byte appended", data + b"\0"
    yield "garbage", os.urandom(len(data))
    yield "another key's entry", other
    yield "the header's length wrong", (
        data[:len(magic)] + (header_end + 5).to_bytes(8, "big")
        + data[len(magic) + 8:])
    header = json.loads(data[len(magic) + 8:header_end])
    header["fields"][0][2] += 1
    forged = json.dumps(header).encode()
    yield "the fields' lengths wrong", (
        data[:len(magic)] + len(forged).to_bytes(8, "big") + forged
        + data[header_end:])


def test_corrupt_entries_are_rejected(flashmlir, cache):
    c = flashmlir.compiler
    good = flashmlir.compile(**KW)
    flashmlir.compile(**KW, causal=True)
    key = c._cache_key("kernel", good.options)
    path = cache / (key + ".fmc")
    data = path.read_bytes()
    other = next(p for p in cache.glob("*.fmc") if p != path).read_bytes()
    assert c._disk_load(str(cache), "kernel", key)["cubin"] == good.cubin
    for what, bad in _corruptions(data, other):
        path.write_bytes(bad)
        before = c.cache_info().disk_rejected
        assert c._disk_load(str(cache), "kernel", key) is None, what
        assert c.cache_info().disk_rejected == before + 1, what
        assert not path.exists(), what
    # A directory in the entry's place, or no entry, is a plain miss.
    path.mkdir()
    assert c._disk_load(str(cache), "kernel", key) is None
    path.rmdir()
    assert c._disk_load(str(cache), "kernel", key) is None


def test_a_corrupt_entry_is_compiled_again(flashmlir, cache):
    c = flashmlir.compiler
    good = flashmlir.compile(**KW)
    key = c._cache_key("kernel", good.options)
    path = cache / (key + ".fmc")
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])
    c.clear_cache(disk=False)
    before = c.cache_info()
    again = flashmlir.compile(**KW)
    assert delta(before, c.cache_info()) == dict(
        hits=0, misses=1, disk_hits=0, disk_writes=1, disk_rejected=1,
        compiles=1)
    assert again.cubin == good.cubin and again.ptx == good.ptx
    # Written again, whole (ptxas's log, with its timing, may differ).
    assert c._disk_load(str(cache), "kernel", key)["cubin"] == good.cubin


def test_the_disk_cache_can_be_turned_off(flashmlir, cache, monkeypatch):
    c = flashmlir.compiler
    before = c.cache_info()
    flashmlir.compile(**KW, cache_dir="")
    assert not cache.exists()
    assert delta(before, c.cache_info())["compiles"] == 1
    c.clear_cache(disk=False)
    monkeypatch.setenv("FLASHMLIR_CACHE_DIR", "")
    flashmlir.compile(**KW)
    assert not cache.exists()
    # An explicit directory wins over the environment.
    c.clear_cache(disk=False)
    flashmlir.compile(**KW, cache_dir=str(cache / "explicit"))
    assert len(entries(cache / "explicit")) == 1


def test_an_unwritable_cache_warns_and_compiles(flashmlir, cache,
                                                monkeypatch, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("FLASHMLIR_CACHE_DIR", str(blocker / "cache"))
    with pytest.warns(RuntimeWarning, match="cannot write the compile cache"):
        k = flashmlir.compile(**KW)
    assert k.cubin[:4] == b"\x7fELF"


def test_clear_cache(flashmlir, cache):
    c = flashmlir.compiler
    flashmlir.compile(**KW)
    (cache / ("0" * 64 + ".fmc.abc123.tmp")).write_bytes(b"half")
    (cache / "notes.txt").write_text("kept")
    assert c.clear_cache() == 2
    assert sorted(p.name for p in cache.iterdir()) == ["notes.txt"]
    assert c.cache_info().currsize == 0
    assert c.clear_cache() == 0


_MODULE = """
func.func @f(%q: memref<1x4x100x64xf16>, %o: memref<1x4x100x64xf16>) {
  fa.attention %q, %q, %q outs(%o : memref<1x4x100x64xf16>) {scale = 0.5 : f32}
      : memref<1x4x100x64xf16>, memref<1x4x100x64xf16>, memref<1x4x100x64xf16>
  return
}
"""


def test_compile_module_is_cached_on_disk(flashmlir, build_dir, cache):
    call = f"compile_module({_MODULE!r}, arch='sm_80')"
    first = child(build_dir, cache, call)
    second = child(build_dir, cache, call)
    assert (first["compiles"], second["compiles"], second["disk_hits"]) == \
        (1, 0, 1)
    assert second["cubin"] == first["cubin"]
    c = flashmlir.compiler
    m = flashmlir.compile_module(_MODULE, arch="sm_80")
    assert c.cache_info().disk_hits >= 1
    (name, meta), = m.launches
    assert meta["scale"] == 0.5 and f".entry {name}(" in m.ptx
    # The key is the text byte for byte, and the options.
    flashmlir.compile_module(_MODULE + "\n", arch="sm_80")
    flashmlir.compile_module(_MODULE, arch="sm_80", rescale_threshold=-1)
    assert len(entries(cache)) == 3


def test_compile_errors_are_not_cached(flashmlir, cache):
    for _ in range(2):
        with pytest.raises(flashmlir.CompileError):
            flashmlir.compile(head_dim=64, dtype="f32", arch="sm_80")
    assert not cache.exists() or not entries(cache)


def test_cache_functions_are_exported(flashmlir):
    """The cache's controls are part of the package's API."""
    assert flashmlir.cache_info is flashmlir.compiler.cache_info
    assert flashmlir.clear_cache is flashmlir.compiler.clear_cache
    assert {"cache_info", "clear_cache"} <= set(flashmlir.__all__)
