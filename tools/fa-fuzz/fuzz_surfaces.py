#!/usr/bin/env python3
"""Fuzzes what users vary besides tool options: hand-written schedules,
launch metadata and the Python entry points' arguments.

  * schedule: an fagpu.attention written by hand, its #fagpu.schedule's
    fields (tiles, stages, consumers, CTAs per SM, setmaxnreg budgets, the
    FlashAttention-3 switches, scheduler, epilogue, kv_splits, tmem_columns,
    row_sum_mma) drawn from valid values and extremes on a random target,
    head dim and mask, then run through fa-opt: the kernel builder and the
    NVVM conversion, the fagpu-* schedule passes, or fagpu-io-report;
  * metadata: fa-compile's launch metadata of seven kernels, mutated at the
    field level (values of every JSON type put anywhere, fields removed and
    added, duplicated keys, non-JSON numbers), read by the C runtime
    (faKernelMetadataCheck) and by the pure-Python checks: both must take
    the same texts, and refuse with MetadataError only;
  * python-args: flash_attn_func, flash_attn_with_kvcache,
    flash_attn_varlen_func and attention called with random tensors
    (shapes, dtypes, ranks, non-tensors, views) and values (flags, scales,
    windows, softcaps, split counts, cache lengths, block tables, prefix
    sums) on the CPU, a GPU stood in for up to the kernel (the target and
    device queries, as python/tests/test_entry_point_arguments.py does);
    the kernels are the real ones' metadata and PTX (ptxas off), so every
    check of runtime.Kernel runs, ending at its refusal of CPU tensors.

Every execution must end as a success or a clean refusal (fa-opt: exit 1
with "error:"; Python: KernelArgumentError, CompileError or MetadataError
with a message). Findings: a crash or hang, another exception type, a
refusal without a message, a silent accept of a value outside its range
(ScheduleValidation.h's fields; the entry points' documented arguments), a
KV cache written by a refused call, and C and Python disagreeing on
metadata. Each is printed with what reproduces it; the exit status is the
number of findings (capped at 100).

Usage: fuzz_surfaces.py [--build build] [--seconds 60] [--seed 1]
                        [--targets schedule,metadata,python-args] [--jobs 2]
       fuzz_surfaces.py --replay SEED   (a python-args finding's call)
"""
import argparse
import concurrent.futures
import copy
import json
import os
import random
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fuzz_options import pick  # noqa: E402

SRC = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

# -- schedules ----------------------------------------------------------------

ARCHS = ["sm_80", "sm_90a", "sm_100a"]
SCHEDULERS = ["single", "static", "dynamic"]
EPILOGUES = ["registers", "tma_store", "tma_store_in_q", "staged_copy",
             "staged_copy_in_q"]


def schedule_vector(rng):
    """A target, the op's shape and attributes, and the schedule's fields."""
    arch = rng.choice(ARCHS)
    f = {
        "block_r": pick(rng, [64, 128, 192], [0, -1, 1, 7, 2**20 + 1, 2**62]),
        "block_c": pick(rng, [32, 64, 128, 176, 224], [0, -64, 3, 2**21]),
        "consumers": pick(rng, [0, 1, 2, 3], [4, -1, 1000]),
        "ctas_per_sm": pick(rng, [1, 2], [0, -1, 33]),
        "producer_registers": pick(rng, [0, 24, 32, 40], [8, 23, 264, -8]),
        "consumer_registers": pick(rng, [0, 160, 232, 240], [7, 264, -1]),
        "stages": pick(rng, [0, 1, 2, 3, 4], [9, -1, 2**31]),
        "ping_pong": rng.choice(["true", "false"]),
        "overlap_softmax": rng.choice(["true", "false"]),
        "scheduler": rng.choice(SCHEDULERS),
        "q_buffers": pick(rng, [1, 2], [0, 3, -1]),
        "epilogue": rng.choice(EPILOGUES),
        "q_in_registers": rng.choice(["true", "false"]),
    }
    # A schedule that fa-map-to-gpu writes for the target, most of the time
    # (then one field or two drawn as above): invalid combinations of valid
    # values are found where most of the schedule is sound.
    if rng.random() < 0.85:
        base = {"sm_80": dict(block_r=128, block_c=64, consumers=0,
                              ctas_per_sm=1, producer_registers=0,
                              consumer_registers=0, stages=2,
                              ping_pong="false", overlap_softmax="false",
                              scheduler="single", q_buffers=1,
                              epilogue="registers", q_in_registers="true"),
                "sm_90a": dict(block_r=128, block_c=128, consumers=2,
                               ctas_per_sm=1, producer_registers=24,
                               consumer_registers=240, stages=2,
                               ping_pong="true", overlap_softmax="true",
                               scheduler="single", q_buffers=1,
                               epilogue="registers", q_in_registers="false"),
                "sm_100a": dict(block_r=128, block_c=128, consumers=0,
                                ctas_per_sm=1, producer_registers=0,
                                consumer_registers=0, stages=3,
                                ping_pong="false", overlap_softmax="false",
                                scheduler="single", q_buffers=1,
                                epilogue="registers",
                                q_in_registers="false")}[arch]
        for key in rng.sample(sorted(f), rng.choice([1, 1, 2])):
            base[key] = f[key]
        f = base
    if rng.random() < 0.15:
        f["kv_splits"] = pick(rng, [2, 4, 8], [0, -1, 2**40])
    if arch == "sm_100a" and rng.random() < 0.7 or rng.random() < 0.05:
        f["tmem_columns"] = pick(rng, [256, 512], [0, 33, 1024, -64])
    if rng.random() < 0.05:
        f["row_sum_mma"] = "true"
    op = {
        "arch": arch,
        "head_dim": pick(rng, [64, 128, 96, 256], [1, 48, 512], 0.1),
        "dtype": pick(rng, ["f16", "bf16"], ["f8E4M3FN"], 0.05),
        "causal": rng.random() < 0.3,
        "window": pick(rng, [None, None, 64], [0, -3, 2**40], 0.1),
        "lse": rng.random() < 0.8,
        "kv_lengths": rng.random() < 0.1,
        "static": rng.random() < 0.3,
    }
    return op, f


def schedule_module(op, f):
    d, t = op["head_dim"], op["dtype"]
    out_t = "bf16" if t == "f8E4M3FN" else t
    shape = "2x4x300" if op["static"] else "?x?x?"
    qkv = f"memref<{shape}x{d}x{t}>"
    o = f"memref<{shape}x{d}x{out_t}>"
    lse = f"memref<{'2x4x300' if op['static'] else '?x?x?'}xf32>"
    args = [f"%q: {qkv}", f"%k: {qkv}", f"%v: {qkv}", f"%o: {o}"]
    types = [qkv, qkv, qkv, o]
    outs = "%o"
    if op["lse"]:
        args.append(f"%lse: {lse}")
        types.append(lse)
        outs += ", %lse"
    kv = ""
    if op["kv_lengths"]:
        args.append("%kl: memref<?xi32>")
        kv = " kv_lengths(%kl : memref<?xi32>)"
    attrs = [f"target = #fagpu.target<{op['arch']}>", "scale = 0.125 : f32"]
    if op["causal"]:
        attrs.append("causal")
    if op["window"] is not None:
        attrs.append(f"window = {op['window']} : i64")
    fields = ", ".join(f"{k} = {v}" for k, v in f.items())
    attrs.append(f"schedule = #fagpu.schedule<{fields}>")
    return (f"func.func @fuzz({', '.join(args)}) {{\n"
            f"  fagpu.attention %q, %k, %v{kv} outs({outs}) "
            f"{{{', '.join(attrs)}}}\n"
            f"    : {', '.join(types)}\n"
            f"  return\n}}\n")


def schedule_out_of_range(op, f):
    """The fields ScheduleValidation.h (checkSchedule) refuses for the
    target, where the refusal is certain: a verifier that accepts one of
    them accepted silently."""
    arch = op["arch"]
    sm90 = arch == "sm_90a"
    bad = []
    for key in ("block_r", "block_c"):
        if not 1 <= f[key] <= 2**20:
            bad.append(key)
    if not 0 <= f["stages"] <= 8:
        bad.append("stages")
    if not 0 <= f["consumers"] <= (3 if sm90 else 0):
        bad.append("consumers")
    if f["ctas_per_sm"] not in ((1, 2) if sm90 else (1,)):
        bad.append("ctas_per_sm")
    for key in ("producer_registers", "consumer_registers"):
        v = f[key]
        if v != 0 and (not sm90 or v % 8 or not 24 <= v <= 256):
            bad.append(key)
    if f["q_buffers"] not in ((1, 2) if sm90 else (1,)):
        bad.append("q_buffers")
    if not sm90:
        for key, off in (("ping_pong", "false"), ("overlap_softmax", "false"),
                         ("scheduler", "single"), ("epilogue", "registers")):
            if f[key] != off:
                bad.append(key)
        if f.get("kv_splits", 0) != 0:
            bad.append("kv_splits")
        if f.get("row_sum_mma", "false") == "true":
            bad.append("row_sum_mma")
    if f.get("kv_splits", 0) < 0:
        bad.append("kv_splits")
    if arch != "sm_80" and f["q_in_registers"] == "true":
        bad.append("q_in_registers")
    tmem = f.get("tmem_columns", 0)
    if tmem and (arch != "sm_100a" or tmem not in (32, 64, 128, 256, 512)):
        bad.append("tmem_columns")
    return bad


SCHEDULE_PIPELINES = [
    ["--fagpu-build-kernels", "--convert-fagpu-to-nvvm"],
    ["--fagpu-build-kernels"],
    ["--fagpu-warp-specialize", "--fagpu-pipeline-kv", "--fagpu-ping-pong",
     "--fagpu-overlap-softmax", "--fagpu-persistent",
     "--fagpu-tma-store-epilogue", "--fagpu-build-kernels"],
    ["--fagpu-io-report=output=-"],
]


def run_schedule(build, tmp, rng):
    op, f = schedule_vector(rng)
    pipeline = rng.choice(SCHEDULE_PIPELINES)
    if pipeline[0].startswith("--fagpu-io-report"):
        op["static"] = True  # it counts the bytes of static shapes only
    text = schedule_module(op, f)
    fd, path = tempfile.mkstemp(suffix=".mlir", dir=tmp)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    cmd = [os.path.join(build, "bin", "fa-opt"), path, *pipeline,
           "-o", os.devnull]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True,
                              timeout=120, errors="replace")
    except subprocess.TimeoutExpired:
        return "hang", cmd, text, ""
    out = proc.stdout + proc.stderr
    if proc.returncode < 0 or "PLEASE submit a bug report" in out or \
            "LLVM ERROR" in out or "Assertion" in out:
        verdict = f"crash (rc {proc.returncode})"
    elif proc.returncode == 0:
        bad = schedule_out_of_range(op, f)
        verdict = f"silent accept ({', '.join(bad)})" if bad else "ok"
    elif "error:" not in out:
        verdict = "failure without a diagnostic"
    else:
        verdict = "refused"
    if verdict in ("ok", "refused"):
        os.unlink(path)
    return verdict, cmd, text, out


# -- metadata -------------------------------------------------------------------

METADATA_BASES = {
    "base": ["--arch", "sm_90a"],
    "dynamic": ["--arch", "sm_90a", "--causal"],
    "paged": ["--arch", "sm_90a", "--kv-lengths", "--page-size", "64"],
    "varlen": ["--arch", "sm_90a", "--varlen"],
    "split": ["--arch", "sm_90a", "--split-kv", "auto"],
    "e4m3": ["--arch", "sm_90a", "--dtype", "e4m3"],
    "sm80": ["--arch", "sm_80"],
    # Backward kernels: their own format, read by faBackwardMetadataCheck
    # and flashmlir.backward's checks.
    "backward": ["--arch", "sm_90a", "--backward", "--causal"],
    "backward-det": ["--arch", "sm_90a", "--backward", "--deterministic"],
}
VALUES = [None, True, False, 0, 1, -1, 2, 3, 16, 64, 128, 256, 1024, 2**31,
          2**63, -2**63, 0.5, 1.0, 128.0, 1e308, "", "x", "f16", "bf16",
          "e4m3", "128B", "32B", "tensormap", "pointer", "static", "dynamic",
          [], [1], [64, 128], [384, 1, 1], [0, 1, 1], {}, {"name": "x"},
          {"x": 1}]
KEYS = ["rank", "box", "swizzle", "l2_promotion", "kind", "dtype", "name",
        "tma_box_rows_o", "value_layout", "page_size", "kv_splits", "softcap",
        "scale", "varlen", "split_kv", "grid", "arch", "causal", "window",
        "preprocess", "convert", "deterministic", "block_c"]
# Text-level edits: JSON the two readers must both refuse, or both take.
TEXT_EDITS = [
    lambda t, r: t.replace(": 128", ": 0128", 1),
    lambda t, r: t.replace(", ", " ", 1),
    lambda t, r: t.replace("]", ",]", 1),
    lambda t, r: t.replace("}", ",}", 1),
    lambda t, r: t[:-1] + ', "extra": NaN}',
    lambda t, r: t[:-1] + ', "extra": -Infinity}',
    lambda t, r: t[:-1] + ', "extra": fast}',
    lambda t, r: t[:-1] + ', "extra": "a\tb"}',
    lambda t, r: t[:-1] + ', "extra": "\\u00e9"}',
    lambda t, r: t[:-1] + ', "extra": ' + "[" * 40 + "]" * 40 + "}",
    lambda t, r: t[:-1] + ', "extra": 1e999}',
    lambda t, r: t.replace('"name": "q"', '"name": "q", "name": "q"', 1),
    lambda t, r: t[:r.randrange(len(t))],
    lambda t, r: t + " x",
    lambda t, r: t.replace("true", "True", 1),
    lambda t, r: t.replace("false", "0", 1),
]


def _paths(o, prefix=()):
    yield prefix
    items = o.items() if isinstance(o, dict) else \
        enumerate(o) if isinstance(o, list) else ()
    for key, value in items:
        yield from _paths(value, prefix + (key,))


def mutate_metadata(rng, meta):
    """A mutated copy of `meta` as JSON text."""
    meta = copy.deepcopy(meta)
    for _ in range(rng.choice([1, 1, 2, 3])):
        path = rng.choice([p for p in _paths(meta) if p])
        parent = meta
        for key in path[:-1]:
            parent = parent[key]
        value = copy.deepcopy(rng.choice(VALUES))
        r = rng.random()
        if r < 0.55:
            parent[path[-1]] = value
        elif r < 0.75:
            parent.pop(path[-1])
        elif isinstance(parent, dict):
            parent[rng.choice(KEYS)] = value
        else:
            parent.insert(rng.randrange(len(parent) + 1), value)
    text = json.dumps(meta)
    if rng.random() < 0.25:
        text = rng.choice(TEXT_EDITS)(text, rng)
    return text


METADATA_WORKER = r"""
import json, os, sys
sys.path.insert(0, os.environ["FA_SRC"] + "/python")
from flashmlir import runtime
lib = runtime.runtime_library()
assert lib is not None, "no libFARuntime.so"
from flashmlir import backward
for line in sys.stdin:
    is_backward, text = json.loads(line)
    print("TRY", flush=True)
    check = (lib.faBackwardMetadataCheck if is_backward
             else lib.faKernelMetadataCheck)
    c = None if check(text.encode()) == 0 else \
        (lib.faRuntimeLastError() or b"").decode(errors="replace")
    # The pure-Python reader and checks (what runs without the library).
    os.environ["FLASHMLIR_RUNTIME_LIB"] = ""
    try:
        meta = runtime.load_metadata(text)
        if is_backward:
            backward._check_metadata(meta)
        else:
            runtime.validate_metadata(meta)
        py = None
    except runtime.MetadataError as e:
        py = str(e) or "(empty)"
    except Exception as e:
        py = "EXC " + type(e).__name__ + ": " + str(e)
    finally:
        os.environ["FLASHMLIR_RUNTIME_LIB"] = os.environ["FA_RUNTIME_LIB"]
    print(json.dumps([c, py]), flush=True)
"""


def metadata_bases(build, tmp):
    bases = {}
    for name, flags in METADATA_BASES.items():
        out = os.path.join(tmp, f"base-{name}")
        subprocess.run([os.path.join(build, "bin", "fa-compile"),
                        "--head-dim", "128", *flags, "--no-cubin", "-o", out],
                       check=True, capture_output=True)
        with open(out + ".json") as fh:
            bases[name] = json.load(fh)
    return bases


def run_metadata(build, bases, rng, stop, record):
    env = dict(os.environ, FA_SRC=SRC,
               FA_RUNTIME_LIB=os.path.join(build, "lib", "libFARuntime.so"))
    env["FLASHMLIR_RUNTIME_LIB"] = env["FA_RUNTIME_LIB"]
    while time.time() < stop:
        batch = []
        for _ in range(200):
            name = rng.choice(sorted(bases))
            batch.append((name, mutate_metadata(rng, bases[name])))
        proc = subprocess.Popen([sys.executable, "-c", METADATA_WORKER],
                                env=env, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            out, err = proc.communicate(
                "".join(json.dumps([n.startswith("backward"), t]) + "\n"
                        for n, t in batch), timeout=300)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        answers = [json.loads(l) for l in out.splitlines() if l != "TRY"]
        for (name, text), (c, py) in zip(batch, answers):
            what = f"{name}: {text}"
            if py is not None and py.startswith("EXC "):
                record("metadata", what, f"python raised {py[4:120]}")
            elif (c is None) != (py is None):
                record("metadata", what,
                       f"readers disagree (C: {c or 'accepts'}; Python: "
                       f"{py or 'accepts'})")
            elif c == "" or py == "(empty)":
                record("metadata", what, "refusal without a message")
            else:
                record("metadata", what, "ok" if c is None else "refused")
        if len(answers) < len(batch):
            record("metadata", f"{batch[len(answers)][0]}: "
                   f"{batch[len(answers)][1]}",
                   f"crash (exit {proc.returncode}): {err[-200:]}")


# -- Python entry points ----------------------------------------------------

PY_ARGS_WORKER = r'''
import json, math, os, random, sys
sys.path.insert(0, os.environ["FA_SRC"] + "/python")
import torch
import flashmlir
from flashmlir import runtime

CLEAN = (runtime.KernelArgumentError, runtime.MetadataError,
         flashmlir.CompileError)
ARCH = {"arch": "sm_90a"}


def arch_and_dtype(q):
    # flashmlir._arch_and_dtype without the CUDA check (CPU tensors stand in
    # for a GPU's).
    if not isinstance(q, torch.Tensor):
        raise runtime.KernelArgumentError("q must be a CUDA tensor")
    dtype = {torch.float16: "f16", torch.bfloat16: "bf16"}.get(q.dtype)
    if dtype is None:
        raise runtime.KernelArgumentError(
            f"q must be float16, bfloat16 or (sm_90a) float8_e4m3fn, got "
            f"{q.dtype}")
    return ARCH["arch"], dtype


class PtxOnly:
    """The compiler extension with ptxas off: the real metadata and PTX of
    each requested kernel (0.3-1 s, not a cubin's 10 s), the PTX standing
    in for the image. runtime.Kernel's checks then run as on a GPU, up to
    refusing the CPU tensors."""
    def __init__(self, ext):
        self.ext = ext
    def compile(self, options):
        raw = dict(self.ext.compile(options, run_ptxas=False))
        raw["cubin"] = raw["ptx"].encode() + b"\0"
        return raw
    def __getattr__(self, name):
        return getattr(self.ext, name)


# No disk cache: its entries would hold PTX for cubins.
os.environ["FLASHMLIR_CACHE_DIR"] = ""
_extension = flashmlir.compiler._extension
flashmlir.compiler._extension = lambda: PtxOnly(_extension())
flashmlir._arch_and_dtype = arch_and_dtype
runtime.device_facts = lambda i: (((9, 0), 132, 4800)
                                  if ARCH["arch"] == "sm_90a"
                                  else ((8, 0), 108, 2039))
torch.cuda.current_device = lambda: 0


def pick(rng, valid, extreme, p=0.2):
    return rng.choice(extreme) if rng.random() < p else rng.choice(valid)


DTYPES = [torch.float16, torch.bfloat16]
BAD_DTYPES = [torch.float32, torch.int32, torch.float64]


def tensor(rng, shape, dtype):
    r = rng.random()
    if r < 0.04:
        return rng.choice([[1], "q", None, 3, (1, 2)])
    if r < 0.08:
        shape = shape[:-1] if len(shape) > 1 else shape + [2]
    elif r < 0.12:
        shape = shape + [1]
    t = torch.randn(shape).to(rng.choice(BAD_DTYPES) if rng.random() < 0.05
                               else dtype)
    if rng.random() < 0.05 and t.dim() >= 2:
        t = t.transpose(0, 1)
    return t


def flag(rng):
    return pick(rng, [True, False], ["False", 1, None, 0.0, "yes"], 0.1)


def scale(rng):
    return pick(rng, [None, 0.125, 0.5], [0, -1.0, float("nan"),
                                          float("inf"), "0.5", True, 1e30],
                0.15)


def window(rng):
    return pick(rng, [(-1, -1), (3, 0), (0, 3), (16, 16)],
                [(1.7, 0), ("3", "3"), (-2, 5), (2**40, 0), 5, None,
                 (1, 2, 3)], 0.15)


def softcap(rng):
    return pick(rng, [0.0, 30.0], [-1.0, float("nan"), float("inf"), True,
                                   "30", 1e30], 0.15)


def splits(rng):
    return pick(rng, [0, 1, 2], [5000, -1, 2.0, True, None], 0.15)


def bad_flag(v):
    return not isinstance(v, bool)


def bad_scale(v):
    return v is not None and (isinstance(v, bool) or
                              not isinstance(v, (int, float)) or
                              not math.isfinite(v) or v <= 0)


def bad_window(w):
    return not (isinstance(w, (tuple, list)) and len(w) == 2 and
                all(isinstance(x, int) and not isinstance(x, bool) and
                    x >= -1 for x in w))


def bad_softcap(c):
    return isinstance(c, bool) or not isinstance(c, (int, float)) or \
        not math.isfinite(c) or c < 0


def bad_splits(n):
    return isinstance(n, bool) or not isinstance(n, int) or \
        not 0 <= n <= 1024


def make_call(rng):
    """(name, function, args, kwargs, caches, invalid): `invalid` lists
    the values the call must refuse; `caches` the tensors a refused call
    must leave as they were."""
    ARCH["arch"] = pick(rng, ["sm_90a"], ["sm_80"], 0.15)
    dtype = rng.choice(DTYPES)
    b = pick(rng, [1, 2, 3], [0])
    hkv = rng.choice([1, 2])
    hq = hkv * pick(rng, [1, 2, 4], [3])
    d = pick(rng, [64, 128, 96], [0, 48, 1, 257])
    nq = pick(rng, [1, 7, 16], [0])
    nk = pick(rng, [16, 33, 64], [0, 1])
    api = rng.choice(["flash_attn_func", "flash_attn_with_kvcache",
                      "flash_attn_varlen_func", "attention",
                      "flex_attention", "create_block_mask"])
    invalid, caches = [], []
    kw = {}
    if api == "flex_attention":
        # On the host (CPU tensors): traced regions, captured tensors of
        # random sizes (a read that may leave one must be refused before
        # anything runs), shapes and scales at their edges.
        args = [tensor(rng, [b, hq, nq, d], dtype),
                tensor(rng, [b, hkv, nk, d], dtype),
                tensor(rng, [b, hkv, nk, d], dtype)]
        table = torch.randn(pick(rng, [hq, 64], [0, 1, 2]))
        ids = torch.randint(0, pick(rng, [4], [100]), (pick(rng, [64], [3]),))
        score_mods = [None, lambda s, b, h, q, k: s + table[h],
                      lambda s, b, h, q, k: s * table[(q + k) % 7],
                      lambda s, b, h, q, k: torch.tanh(s / 3.0) * 3.0,
                      lambda s, b, h, q, k: s + table[ids[k]],
                      lambda s, b, h, q, k: torch.where(q >= k, s, -s)]
        mask_mods = [None, lambda b, h, q, k: q >= k,
                     lambda b, h, q, k: ids[q] == ids[k],
                     lambda b, h, q, k: (k < 5) | (q // 4 == k // 4)]
        kw = dict(score_mod=rng.choice(score_mods),
                  mask_mod=rng.choice(mask_mods), scale=scale(rng),
                  enable_gqa=pick(rng, [True], [False, "yes"]))
        checks = (("scale", bad_scale), ("enable_gqa", bad_flag))
        if rng.random() < 0.2:
            # A block mask in the mask's place: made for these lengths, or
            # for others (which the call must refuse), or not one at all.
            causal = mask_mods[1]
            q_len = pick(rng, [nq], [nq + 1])
            made = flashmlir.create_block_mask(causal, None, None,
                                               max(q_len, 1), max(nk, 1),
                                               device="cpu", BLOCK_SIZE=8)
            kw["mask_mod"] = None
            kw["block_mask"] = pick(rng, [made], [torch.zeros(1, 1, 1, 4),
                                                  "mask"])
            if kw["block_mask"] is not made or q_len != nq or nk < 1:
                invalid.append("block_mask")
        if rng.random() < 0.25:
            # The same regions compiled for the sm_90a kernel (what
            # flex_attention does for CUDA tensors, which this machine may
            # not have): compiled with their captures as parameters, or
            # refused by name.
            api = "flex_compile"
            kw.pop("enable_gqa")
            # The module text has no block mask (a launch argument).
            kw.pop("block_mask", None)
            invalid = [x for x in invalid if x != "block_mask"]
            checks = (("scale", bad_scale),)
    elif api == "create_block_mask":
        # FlexAttention's create_block_mask on the host: sizes at their
        # edges, masks that cannot be evaluated (a read past the ids, Python
        # control flow on an index).
        ids = torch.randint(0, 4, (pick(rng, [64], [3]),))

        def branchy(b, h, q, k):
            if q > k:
                return True
            return False
        mask = pick(rng, [lambda b, h, q, k: q >= k,
                          lambda b, h, q, k: ids[q] == ids[k],
                          lambda b, h, q, k: (k < 5) | (q // 4 == k // 4)],
                    [branchy, 3, None])
        sizes = [pick(rng, [1, 2, None], [0, -1, True, 2.5, "2", 2**31]),
                 pick(rng, [1, 3, None], [0, -2, False]),
                 pick(rng, [1, 7, 16], [0, -3, 2**31, 3.0]),
                 pick(rng, [1, 9, 33], [0, True, 2**40])]
        args = [mask] + sizes
        kw = dict(device="cpu", BLOCK_SIZE=pick(rng, [8, 16, 128],
                                                [0, True, 7.5, -8]))
        for name, value, optional in zip(("B", "H", "Q_LEN", "KV_LEN"), sizes,
                                         (True, True, False, False)):
            if not (value is None and optional) and (
                    isinstance(value, bool) or not isinstance(value, int) or
                    not 1 <= value < 2**31):
                invalid.append(name)
        bs = kw["BLOCK_SIZE"]
        if isinstance(bs, bool) or not isinstance(bs, int) or bs < 1:
            invalid.append("BLOCK_SIZE")
        if not callable(mask):
            invalid.append("mask_mod")
        checks = ()
    elif api == "attention":
        args = [tensor(rng, [b, hq, nq, d], dtype),
                tensor(rng, [b, hkv, nk, d], dtype),
                tensor(rng, [b, hkv, nk, d], dtype)]
        kw = dict(causal=flag(rng), scale=scale(rng), num_splits=splits(rng))
        checks = (("causal", bad_flag), ("scale", bad_scale),
                  ("num_splits", bad_splits))
    elif api == "flash_attn_func":
        args = [tensor(rng, [b, nq, hq, d], dtype),
                tensor(rng, [b, nk, hkv, d], dtype),
                tensor(rng, [b, nk, hkv, d], dtype)]
        kw = dict(causal=flag(rng), softmax_scale=scale(rng),
                  window_size=window(rng), softcap=softcap(rng),
                  num_splits=splits(rng))
        if rng.random() < 0.1:
            kw["dropout_p"] = rng.choice([0.1, -1.0, "0"])
        checks = (("causal", bad_flag), ("softmax_scale", bad_scale),
                  ("window_size", bad_window), ("softcap", bad_softcap),
                  ("num_splits", bad_splits),
                  ("dropout_p", lambda p: p != 0.0))
    elif api == "flash_attn_with_kvcache":
        paged = rng.random() < 0.3
        cap = nk
        if paged:
            page = pick(rng, [16, 64], [8, 0])
            pages_per_seq = rng.choice([1, 2])
            pages = max(b, 1) * pages_per_seq
            kc = tensor(rng, [pages, page, hkv, d], dtype)
            vc = tensor(rng, [pages, page, hkv, d], dtype)
            table = torch.randperm(pages).reshape(max(b, 1), pages_per_seq) \
                .to(torch.int32)[:b]
            if rng.random() < 0.2 and table.numel():
                table = table.clone()
                table.view(-1)[rng.randrange(max(table.numel(), 1))] = \
                    rng.choice([-1, pages, 2**31 - 1])
            if rng.random() < 0.05:
                table = table.long()
            kw["block_table"] = table
            cap = page * pages_per_seq
        else:
            kc = tensor(rng, [b, nk, hkv, d], dtype)
            vc = tensor(rng, [b, nk, hkv, d], dtype)
        args = [tensor(rng, [b, nq, hq, d], dtype), kc, vc]
        caches = [c for c in (kc, vc) if isinstance(c, torch.Tensor)]
        new = 0
        if rng.random() < 0.6:
            new = pick(rng, [1, 2], [0, cap + 1])
            kw["k"] = tensor(rng, [b, new, hkv, d], dtype)
            kw["v"] = tensor(rng, [b, new, hkv, d], dtype)
        r = rng.random()
        if r < 0.5:
            kw["cache_seqlens"] = pick(rng, [0, 3, cap - new], [-1, cap + 1,
                                                                 3.0, None])
        elif r < 0.9:
            lens = [pick(rng, [0, 3, max(cap - new, 0)], [-1, cap + 5])
                    for _ in range(b)]
            kw["cache_seqlens"] = torch.tensor(lens, dtype=pick(
                rng, [torch.int32], [torch.int64, torch.float32], 0.1))
        kw.update(causal=flag(rng), softmax_scale=scale(rng),
                  window_size=window(rng), softcap=softcap(rng),
                  num_splits=splits(rng),
                  return_softmax_lse=flag(rng))
        lens = kw.get("cache_seqlens")
        if isinstance(lens, int) and not isinstance(lens, bool) and \
                (lens < 0 or lens + new > cap):
            invalid.append("cache_seqlens")
        checks = (("causal", bad_flag), ("softmax_scale", bad_scale),
                  ("window_size", bad_window), ("softcap", bad_softcap),
                  ("num_splits", bad_splits),
                  ("return_softmax_lse", bad_flag))
    else:
        sizes = [pick(rng, [1, 5, 16], [0]) for _ in range(max(b, 1))]
        total = sum(sizes)
        cu = [0]
        for s in sizes:
            cu.append(cu[-1] + s)
        cu_q = torch.tensor(cu, dtype=torch.int32)
        if rng.random() < 0.1:
            cu_q = torch.tensor(list(reversed(cu)), dtype=torch.int32)
        if rng.random() < 0.05:
            cu_q = cu_q.long()
        args = [tensor(rng, [total, hq, d], dtype),
                tensor(rng, [total, hkv, d], dtype),
                tensor(rng, [total, hkv, d], dtype), cu_q, cu_q.clone(),
                pick(rng, [max(sizes)], [max(sizes) - 1, 0, 6.9, "7", True,
                                         total + 1]),
                pick(rng, [max(sizes)], ["garbage", None])]
        kw = dict(causal=flag(rng), softmax_scale=scale(rng),
                  window_size=window(rng), softcap=softcap(rng))
        m = args[5]
        if isinstance(m, bool) or not isinstance(m, int) or m < 1:
            invalid.append("max_seqlen_q")
        checks = (("causal", bad_flag), ("softmax_scale", bad_scale),
                  ("window_size", bad_window), ("softcap", bad_softcap))
    for key, bad in checks:
        if key in kw and bad(kw[key]):
            invalid.append(key)
    return api, args, kw, caches, invalid


def describe(api, args, kw):
    def d(x):
        if isinstance(x, torch.Tensor):
            if x.dtype in (torch.int32, torch.int64) and x.numel() <= 16:
                return f"tensor({x.tolist()}, {x.dtype})"
            return f"<{x.dtype} {list(x.shape)}>"
        return repr(x)
    return f"{api}({', '.join([d(a) for a in args] + [f'{k}={d(v)}' for k, v in kw.items()])})"


def flex_compile(q, k, v, score_mod=None, mask_mod=None, scale=None):
    """flex_attention's GPU module, compiled for sm_90a: its kernel takes
    one parameter per captured tensor, of the capture's shape. (The text
    takes shapes from tensors: what flex_attention refuses before tracing,
    this refuses too.)"""
    if not all(isinstance(x, torch.Tensor) and x.dim() == 4
               for x in (q, k, v)):
        raise flashmlir.CompileError("flex_compile: q, k, v must be 4-D "
                                     "tensors")
    regions, captures = flashmlir.flex.trace_regions(
        score_mod, mask_mod, shape=(q.shape[0], q.shape[1], q.shape[2],
                                    k.shape[2]))
    dtype = "bf16" if q.dtype == torch.bfloat16 else "f16"
    text = flashmlir.flex.flex_module_text(regions, captures, q.shape[-1],
                                           v.shape[-1], dtype, scale)
    (name, meta), = flashmlir.compile_module(text, arch="sm_90a").launches
    params = [p for p in meta["params"] if p["name"].startswith("capture")]
    assert [p["shape"] for p in params] == \
        [[str(d) for d in c.shape] for c in captures], (params, captures)


for line in sys.stdin:
    seed = int(line)
    rng = random.Random(seed)
    api, args, kw, caches, invalid = make_call(rng)
    flashmlir._launchers.clear()
    flashmlir._calls.clear()
    before = [c.clone() for c in caches]
    print("TRY", flush=True)
    try:
        if api == "flex_compile":
            flex_compile(*args, **kw)
        else:
            getattr(flashmlir, api)(*args, **kw)
        verdict = (f"silent accept ({', '.join(invalid)})" if invalid
                   else "ok")
    except CLEAN as e:
        verdict = "refused" if str(e).strip() else "refusal without a message"
        # runtime.Kernel's refusal of the CPU tensors: the call reached the
        # kernel, every argument before it accepted.
        if "must be on a CUDA device" in str(e):
            verdict = (f"silent accept ({', '.join(invalid)})" if invalid
                       else "ok (reached the kernel)")
        if any(not torch.equal(b, c) for b, c in zip(before, caches)):
            verdict = "cache written by a refused call"
    except Exception as e:
        verdict = f"{type(e).__name__}: {str(e)[:160]}"
    print(json.dumps([seed, verdict, describe(api, args, kw)]), flush=True)
'''


class Worker:
    """A Python worker process fed one line at a time: the answer to each
    (its JSON line), None if the process died on it, "hang" after
    `timeout` seconds without one."""
    def __init__(self, code, env):
        self.proc = subprocess.Popen([sys.executable, "-c", code], env=env,
                                     stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.buffer = b""

    def ask(self, line, timeout=120):
        import select
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()
        deadline = time.time() + timeout
        while True:
            while b"\n" in self.buffer:
                answer, self.buffer = self.buffer.split(b"\n", 1)
                if answer != b"TRY":
                    return json.loads(answer)
            left = deadline - time.time()
            if left <= 0:
                self.proc.kill()
                return "hang"
            ready, _, _ = select.select([self.proc.stdout], [], [], left)
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                if not chunk:
                    return None
                self.buffer += chunk

    def stderr(self):
        self.proc.kill()
        return self.proc.communicate()[1].decode(errors="replace")[-300:]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def run_python_args(build, rng, stop, record):
    env = dict(os.environ, FA_SRC=SRC, FLASHMLIR_RUNTIME_LIB=os.path.join(
        build, "lib", "libFARuntime.so"))
    worker = None
    while time.time() < stop:
        worker = worker or Worker(PY_ARGS_WORKER, env)
        seed = rng.randrange(2**31)
        answer = worker.ask(str(seed))
        if isinstance(answer, list):
            _, verdict, what = answer
            record("python-args", f"{what} [seed {seed}]", verdict)
            continue
        record("python-args", f"[seed {seed}]",
               "hang" if answer == "hang" else
               f"crash (exit {worker.proc.poll()}): {worker.stderr()}")
        worker = None
    if worker:
        worker.close()


# -- driver -------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--targets", default="schedule,metadata,python-args")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--replay", type=int, metavar="SEED",
                    help="run the python-args call of a finding's seed")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    if args.replay is not None:
        worker = Worker(PY_ARGS_WORKER, dict(
            os.environ, FA_SRC=SRC,
            FLASHMLIR_RUNTIME_LIB=os.path.join(build, "lib",
                                               "libFARuntime.so")))
        answer = worker.ask(str(args.replay))
        print(answer if isinstance(answer, list) else
              f"{answer or 'crash'}: {worker.stderr()}")
        return 0
    rng = random.Random(args.seed)
    targets = args.targets.split(",")
    counts, findings = {}, []

    def record(target, what, verdict, text=""):
        kind = verdict.split(" (")[0]
        counts.setdefault(target, {}).setdefault(kind, 0)
        counts[target][kind] += 1
        if kind not in ("ok", "refused"):
            findings.append((target, verdict, what, text[-300:]))

    start = time.time()
    share = args.seconds / len(targets)
    with tempfile.TemporaryDirectory(prefix="fuzz-surfaces-") as tmp:
        for n, target in enumerate(targets):
            stop = start + share * (n + 1)
            if target == "schedule":
                with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
                    pending = set()
                    while time.time() < stop or pending:
                        while time.time() < stop and len(pending) < args.jobs:
                            pending.add(pool.submit(
                                run_schedule, build, tmp,
                                random.Random(rng.randrange(2**31))))
                        done, pending = concurrent.futures.wait(
                            pending,
                            return_when=concurrent.futures.FIRST_COMPLETED)
                        for fut in done:
                            verdict, cmd, text, out = fut.result()
                            record("schedule", " ".join(cmd) + "\n" + text,
                                   verdict, out)
            elif target == "metadata":
                bases = metadata_bases(build, tmp)
                run_metadata(build, bases, rng, stop, record)
            elif target == "python-args":
                run_python_args(build, rng, stop, record)
            else:
                sys.exit(f"unknown target {target!r}")
    elapsed = time.time() - start
    total = sum(sum(c.values()) for c in counts.values())
    print(f"fuzz_surfaces: {total} executions in {elapsed:.0f} s (seed "
          f"{args.seed})")
    for target, c in counts.items():
        print(f"  {target}: " +
              ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
    for target, verdict, what, text in findings:
        print(f"FINDING [{target}] {verdict}: {what}")
        if text.strip():
            print("    " + text.strip().splitlines()[-1][:200])
    return min(len(findings), 100)


if __name__ == "__main__":
    sys.exit(main())
