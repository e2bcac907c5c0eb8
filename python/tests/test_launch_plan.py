"""The Python launcher's plans (runtime._LaunchPlan), without a GPU: every
parameter of a real kernel's metadata is bound by its name to the value the
kernel expects, a second launch of the same signature reuses the plan (no
argument check, only the new pointers), and a plan never outlives what it
checked (a misaligned pointer, another shape). The driver is stood in for:
its cuLaunchKernel records the grid and reads the parameter buffer back."""
import ctypes
import struct
import subprocess
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "python"))
from flashmlir import runtime  # noqa: E402
from test_runtime import FakeTensor  # noqa: E402

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def paged_split(tmp_path_factory, build_dir):
    """An sm_90a split-KV kernel over a paged cache with KV lengths: every
    kind of parameter (tensor maps, pointers, scalars, o strides, block
    table, scratch and counters)."""
    out = tmp_path_factory.mktemp("k") / "paged"
    subprocess.run([str(build_dir / "bin" / "fa-compile"), "--arch",
                    "sm_90a", "--head-dim", "128", "--split-kv", "auto",
                    "--kv-lengths", "--page-size", "64", "-o", str(out)],
                   check=True, capture_output=True)
    return str(out)


class FakeLib:
    """cuLaunchKernel and cuTensorMapEncodeTiled: the launch's grid and
    parameters read back, each map's base address."""

    def __init__(self):
        self.launches, self.encoded = [], []

    def cuTensorMapEncodeTiled(self, addr, dtype, rank, base, *rest):
        self.encoded.append(base.value)
        # The map's first 8 bytes hold the base here (the real map is
        # opaque): the test reads the bound maps back through them.
        ctypes.c_uint64.from_address(addr.value).value = base.value
        return 0

    def cuLaunchKernel(self, fn, gx, gy, gz, bx, by, bz, smem, stream,
                       params, extra):
        # Each parameter's first 8 bytes, read while the launch holds them
        # (a 4-byte one's in the low half).
        self.launches.append({"grid": (gx, gy, gz), "block": (bx, by, bz),
                              "smem": smem, "stream": stream.value,
                              "params": [ctypes.string_at(params[i], 8)
                                         for i in range(len(params))]})
        return 0


class FakeDriver:
    def __init__(self):
        self.lib = FakeLib()

    def check(self, status, call):
        assert status == 0, call


@pytest.fixture
def launcher(monkeypatch):
    """The driver, torch's CUDA queries and the runtime's per-stream
    buffers stood in for; returns the fake driver."""
    drv = FakeDriver()
    monkeypatch.setattr(runtime, "_get_driver", lambda: drv)
    monkeypatch.setattr(runtime, "_TENSOR_MAPS",
                        type(runtime._TENSOR_MAPS)())
    monkeypatch.setattr(runtime, "device_facts", lambda i: ((9, 0), 132, 4800))
    monkeypatch.setattr(runtime, "_current_stream", lambda i: 0x5000)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(runtime.Kernel, "_function", lambda self, i: 0xf00)
    buffers = {"split_arrivals": 0x7000, "lse_scratch": 0x8000,
               "split_workspace": 0x9000}
    for name, ptr in buffers.items():
        monkeypatch.setattr(runtime, name,
                            lambda i, s, n, ptr=ptr: FakeTensor((n,), ptr=ptr))
    # The stand-in tensors have signatures as torch tensors do (the
    # runtime's own keeps them for torch.Tensor).
    monkeypatch.setattr(runtime, "_signature", lambda tensors: tuple(
        None if t is None else (t.shape, t.stride(), t.dtype, str(t.device))
        for t in tensors))
    # The split-KV workspace made during a capture (a torch allocation per
    # launch there).
    monkeypatch.setattr(torch, "empty",
                        lambda n, **kw: FakeTensor((n,), ptr=0x9000))
    return drv


def _read(params, meta):
    """The launch's parameters by name, read as their metadata kinds."""
    formats = {"i32": "<i4x", "i64": "<q", "f32": "<f4x"}
    values = {}
    for p, raw in zip(meta["params"], params):
        kind = p.get("kind")
        value = struct.unpack(formats.get(kind, "<Q"), raw)[0]
        # A tensor map's first 8 bytes: its base (FakeLib's encoding).
        values[p["name"]] = ("map", value) if kind == "tensormap" else value
    return values


def _paged_args(b=3, hq=32, hkv=8, nq=1, page=64, pages=40, max_pages=12,
                d=128, base=0x100000):
    """flash-attention's paged decode as the kernel takes it: q, out
    [B, Hq, Nq, D] views of [B, Nq, Hq, D], the cache [pages, Hkv, page, D]
    views of [pages, page, Hkv, D]."""
    q = FakeTensor((b, hq, nq, d), strides=(nq * hq * d, d, hq * d, 1),
                   ptr=base)
    cache = (pages, hkv, page, d)
    cache_strides = (page * hkv * d, d, hkv * d, 1)
    k = FakeTensor(cache, strides=cache_strides, ptr=base + 0x10000)
    v = FakeTensor(cache, strides=cache_strides, ptr=base + 0x20000)
    out = FakeTensor((b, hq, nq, d), strides=(nq * hq * d, d, hq * d, 1),
                     ptr=base + 0x30000)
    lens = FakeTensor((b,), dtype="torch.int32", ptr=base + 0x40000)
    table = FakeTensor((b, max_pages), dtype="torch.int32",
                       ptr=base + 0x50000)
    return q, k, v, out, lens, table


def test_every_parameter_is_bound_by_its_name(paged_split, launcher):
    kernel = runtime.Kernel.load(paged_split)
    q, k, v, out, lens, table = _paged_args()
    kernel(q, k, v, out=out, scale=0.125, num_splits=5, discard_lse=True,
           cache_seqlens=lens, block_table=table)
    (launch,) = launcher.lib.launches
    got = _read(launch["params"], kernel.meta)
    scale_log2 = ctypes.c_float(0.125 * 1.4426950408889634).value
    assert got == {
        "q": ("map", q.data_ptr()), "k": ("map", k.data_ptr()),
        "v": ("map", v.data_ptr()), "o": out.data_ptr(), "lse": 0x8000,
        "Nq": 1, "Nk": 12 * 64, "Hq": 32, "Hkv": 8,
        "scale_log2": scale_log2, "B": 3,
        # Nq is 1: its stride is never stepped and reads as the contiguous
        # one (tensor_strides).
        "o_stride_b": 32 * 128, "o_stride_h": 128, "o_stride_n": 128,
        "kv_lengths": lens.data_ptr(), "block_table": table.data_ptr(),
        "max_pages": 12, "num_pages": 40, "kv_splits": 5,
        "o_partial": 0x9000,
        # After the partial O [S, B, Hq, Nq, D] in f32.
        "lse_partial": 0x9000 + 4 * 5 * 3 * 32 * 1 * 128,
        "split_arrivals": 0x7000}
    # One CTA per (query block, head) tile, the chunks on y.
    assert launch["grid"] == (3 * 32, 5, 1)
    assert launch["block"] == tuple(kernel.meta["block"])
    assert launch["smem"] == kernel.meta["shared_memory_bytes"]
    assert launch["stream"] == 0x5000


def test_a_plan_is_reused_for_new_pointers(paged_split, launcher,
                                           monkeypatch):
    kernel = runtime.Kernel.load(paged_split)
    checks = []
    check = runtime.Kernel._check
    monkeypatch.setattr(runtime.Kernel, "_check",
                        lambda self, *a: checks.append(a) or
                        check(self, *a))
    first = _paged_args()
    second = _paged_args(base=0x900000)
    for q, k, v, out, lens, table in (first, second):
        kernel(q, k, v, out=out, discard_lse=True, cache_seqlens=lens,
               block_table=table)
    assert len(checks) == 1 and len(kernel._plans) == 1
    got = [_read(x["params"], kernel.meta) for x in launcher.lib.launches]
    q, k, v, out, lens, table = second
    assert got[1]["q"] == ("map", q.data_ptr())
    assert got[1]["o"] == out.data_ptr()
    assert got[1]["kv_lengths"] == lens.data_ptr()
    assert got[1]["block_table"] == table.data_ptr()
    assert {n: x for n, x in got[0].items() if n not in (
        "q", "k", "v", "o", "kv_lengths", "block_table")} == {
        n: x for n, x in got[1].items() if n not in (
            "q", "k", "v", "o", "kv_lengths", "block_table")}
    # The caches' maps were encoded once per address: k and v of the two
    # calls, q of each.
    assert sorted(launcher.lib.encoded) == sorted(
        {t.data_ptr() for args in (first, second) for t in args[:3]})


def test_threads_sharing_a_plan_launch_their_own_pointers(paged_split,
                                                          launcher):
    """A plan keeps one parameter array whose pointer cells each launch
    sets: launches from several threads through one plan (one signature)
    each pass their own tensors, never another thread's."""
    import threading
    kernel = runtime.Kernel.load(paged_split)
    calls = [_paged_args(base=0x1000000 * (i + 1)) for i in range(8)]
    q, k, v, out, lens, table = calls[0]
    kernel(q, k, v, out=out, discard_lse=True, cache_seqlens=lens,
           block_table=table)
    launcher.lib.launches.clear()
    barrier = threading.Barrier(len(calls))

    def run(args):
        q, k, v, out, lens, table = args
        barrier.wait()
        for _ in range(50):
            kernel(q, k, v, out=out, discard_lse=True, cache_seqlens=lens,
                   block_table=table)

    threads = [threading.Thread(target=run, args=(a,)) for a in calls]
    # Threads switched as often as the interpreter allows, so that a launch
    # without the plan's lock would see another thread's pointers.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert len(kernel._plans) == 1
    assert len(launcher.lib.launches) == 50 * len(calls)
    owners = {args[0].data_ptr(): args for args in calls}
    for launch in launcher.lib.launches:
        got = _read(launch["params"], kernel.meta)
        q, k, v, out, lens, table = owners[got["q"][1]]
        assert (got["k"], got["v"], got["o"], got["kv_lengths"],
                got["block_table"]) == (
            ("map", k.data_ptr()), ("map", v.data_ptr()), out.data_ptr(),
            lens.data_ptr(), table.data_ptr())


def test_a_plan_checks_what_it_did_not_see(paged_split, launcher):
    kernel = runtime.Kernel.load(paged_split)
    q, k, v, out, lens, table = _paged_args()
    kernel(q, k, v, out=out, discard_lse=True, cache_seqlens=lens,
           block_table=table)
    # The same signature, a misaligned q: checked again, refused.
    bad_q = FakeTensor(q.shape, strides=q.stride(), ptr=q.data_ptr() + 8)
    with pytest.raises(runtime.KernelArgumentError, match="16-byte aligned"):
        kernel(bad_q, k, v, out=out, discard_lse=True, cache_seqlens=lens,
               block_table=table)
    # Another signature (a table of another dtype): a plan of its own,
    # refused.
    bad_table = FakeTensor(table.shape, dtype="torch.int64",
                           ptr=table.data_ptr())
    with pytest.raises(runtime.KernelArgumentError, match="int32"):
        kernel(q, k, v, out=out, discard_lse=True, cache_seqlens=lens,
               block_table=bad_table)
    # A float where an integer is meant is not the integer's plan.
    with pytest.raises(runtime.KernelArgumentError, match="num_splits"):
        kernel(q, k, v, out=out, discard_lse=True, cache_seqlens=lens,
               block_table=table, num_splits=5.0)
    assert len(launcher.lib.launches) == 1


@pytest.fixture(scope="module")
def e4m3(tmp_path_factory, build_dir):
    """An sm_90a e4m3 kernel: its V layout kernel launched first, descales
    and V^T among its parameters."""
    out = tmp_path_factory.mktemp("k") / "e4m3"
    subprocess.run([str(build_dir / "bin" / "fa-compile"), "--arch",
                    "sm_90a", "--head-dim", "128", "--dtype", "e4m3", "-o",
                    str(out)], check=True, capture_output=True)
    return str(out)


def test_e4m3_parameters_are_bound_by_name(e4m3, launcher, monkeypatch):
    kernel = runtime.Kernel.load(e4m3)
    monkeypatch.setattr(runtime.Kernel, "_layout_function",
                        lambda self, i: 0xf01)
    # The per-tensor descales (numbers, made device tensors by torch.full)
    # and V^T's workspace: torch allocations.
    descales = iter([0x50000, 0x50100, 0x50200])
    monkeypatch.setattr(torch, "full", lambda shape, x, **kw: FakeTensor(
        shape, ptr=next(descales)))
    monkeypatch.setattr(torch, "empty", lambda shape, **kw: FakeTensor(
        shape, ptr=0xa000))
    b, hq, hkv, nq, nk, d = 2, 8, 2, 256, 300, 128
    q = FakeTensor((b, hq, nq, d), dtype="torch.float8_e4m3fn", ptr=0x10000)
    k = FakeTensor((b, hkv, nk, d), dtype="torch.float8_e4m3fn", ptr=0x20000)
    v = FakeTensor((b, hkv, nk, d), dtype="torch.float8_e4m3fn", ptr=0x30000)
    out = FakeTensor((b, hq, nq, d), dtype="torch.bfloat16", ptr=0x40000)
    kernel(q, k, v, out=out, discard_lse=True, q_descale=0.5,
           k_descale=0.25, v_descale=2.0)
    layout, attention = launcher.lib.launches
    got = _read(layout["params"], kernel.meta["value_layout"])
    assert got["v"] == v.data_ptr() and got["v_t"] == 0xa000
    assert (got["B"], got["Hkv"], got["Nk"]) == (b, hkv, nk)
    assert (got["v_stride_b"], got["v_stride_h"], got["v_stride_n"]) == \
        v.stride()[:3]
    got = _read(attention["params"], kernel.meta)
    assert got["q"] == ("map", q.data_ptr())
    assert got["k"] == ("map", k.data_ptr())
    assert got["v_t"] == ("map", 0xa000)
    assert got["o"] == out.data_ptr() and got["lse"] == 0x8000
    assert (got["Nq"], got["Nk"], got["Hq"], got["Hkv"], got["B"]) == (
        nq, nk, hq, hkv, b)
    assert [got[n] for n in ("q_descale", "k_descale", "v_descale")] == [
        0x50000, 0x50100, 0x50200]
    assert got["descale_layout"] == runtime.Kernel.DESCALE_PER_TENSOR


def test_a_packed_kernel_takes_packed_tensors_only(tmp_path, build_dir,
                                                   launcher):
    """A query-group kernel (fa-compile --query-group 4) reads Q, O and the
    LSE packed [B, Hkv, Nq G, D]: a launch with the unpacked heads (Hq !=
    Hkv) or rows that are not whole queries is refused with the layout it
    takes; the packed one launches."""
    out = tmp_path / "qg4"
    subprocess.run([str(build_dir / "bin" / "fa-compile"), "--arch",
                    "sm_90a", "--head-dim", "128", "--causal",
                    "--causal-align", "bottom-right", "--split-kv", "auto",
                    "--kv-lengths", "--page-size", "64", "--query-group", "4",
                    "-o", str(out)], check=True, capture_output=True)
    kernel = runtime.Kernel.load(str(out))
    assert kernel.meta["query_group"] == 4
    q, k, v, o, lens, table = _paged_args(hq=32, hkv=8, nq=4)
    with pytest.raises(runtime.KernelArgumentError,
                       match="packed \\[B, Hkv, Nq G, D\\]"):
        kernel(q, k, v, out=o, discard_lse=True, cache_seqlens=lens,
               block_table=table)
    q, k, v, o, lens, table = _paged_args(hq=8, hkv=8, nq=6)
    with pytest.raises(runtime.KernelArgumentError, match="6 rows"):
        kernel(q, k, v, out=o, discard_lse=True, cache_seqlens=lens,
               block_table=table)
    q, k, v, o, lens, table = _paged_args(hq=8, hkv=8, nq=16)
    kernel(q, k, v, out=o, discard_lse=True, cache_seqlens=lens,
           block_table=table)
    assert len(launcher.lib.launches) == 1
