#!/usr/bin/env python3
"""Fuzzes the option space of fa-run, fa-compile and flashmlir.compile.

Random option vectors mix valid values with the extremes an adversary (or a
typo) gives: 0, negatives, NaN, +-inf, 1e30, 2^31, 2^32 + 1, 2^63 - 1.
Every run must end one of two ways:

  * success: fa-run prints PASS (a differential check of the compiled
    kernel against its double-precision reference on random inputs),
    fa-compile exits 0 with PTX, flashmlir.compile returns a kernel;
  * a clean refusal: a non-zero exit with an "error:" line (fa-run,
    fa-compile) or a CompileError with text (flashmlir.compile).

Anything else is a finding: a crash signal, a hang, fa-run FAIL (a wrong
answer), a failure without a message, a silent accept of a value outside
fa/Dialect/FA/IR/Validation.h's ranges (checked for the options whose range
the tool must enforce). Findings are printed with the command that
reproduces them; the exit status is the number of findings (capped at 100).

Usage: fuzz_options.py [--build build] [--seconds 60] [--seed 1]
                       [--targets fa-run,fa-compile,python] [--jobs 2]
"""
import argparse
import concurrent.futures
import json
import math
import os
import random
import subprocess
import sys
import time

INT64_MAX = 2**63 - 1
EXTREME_INTS = [0, -1, 1, 2**31, 2**32 + 1, INT64_MAX, -(2**63)]
EXTREME_FLOATS = ["0", "-2", "nan", "inf", "-inf", "1e30", "3e38", "1e-30",
                  "1e-45", "4e38"]


def pick(rng, valid, extreme, p_extreme=0.2):
    return rng.choice(extreme) if rng.random() < p_extreme else rng.choice(valid)


def fa_run_vector(rng):
    """A bounded-size fa-run request (each run is a JIT compile and a naive
    reference in double: keep it under a second when valid)."""
    hkv = rng.choice([1, 1, 2])
    opts = {
        "--q-len": pick(rng, [0, 1, 7, 33, 64, 100], EXTREME_INTS + [-3], 0.1),
        "--kv-len": pick(rng, [1, 5, 33, 77, 131], EXTREME_INTS, 0.1),
        "--head-dim": pick(rng, [8, 16, 32, 64], [0, -1, 65537, 2**62], 0.1),
        "--q-heads": hkv * rng.choice([1, 2]),
        "--kv-heads": hkv,
        "--dtype": pick(rng, ["f32", "f16", "bf16"], ["f64", "i8"], 0.05),
        "--loop-order": pick(rng, ["fa1", "fa2"], ["fa3"], 0.05),
    }
    if rng.random() < 0.3:
        opts["--causal"] = None
    if rng.random() < 0.3:
        opts["--lse"] = None
    if rng.random() < 0.3:
        opts["--window"] = pick(rng, [1, 4, 20], [-5, 2**32 + 1, INT64_MAX])
    if rng.random() < 0.3:
        opts["--causal-align"] = pick(rng, ["top-left", "bottom-right"],
                                      ["middle", ""], 0.05)
    if rng.random() < 0.3:
        opts["--softcap"] = pick(rng, ["3", "30", "0.5"], EXTREME_FLOATS)
    if rng.random() < 0.3:
        opts["--scale"] = pick(rng, ["0.125", "0.5", "1.4e-6", "0.088388"],
                               EXTREME_FLOATS)
    if rng.random() < 0.2:
        opts["--block-r"] = pick(rng, [8, 16, 32], [-1, 2**21, INT64_MAX])
        opts["--block-c"] = pick(rng, [8, 16, 64], [-1, 2**21, INT64_MAX])
    if rng.random() < 0.2:
        opts["--rescale-threshold"] = pick(rng, ["0", "8", "64"],
                                           EXTREME_FLOATS + ["65"])
    if rng.random() < 0.15:
        opts["--poly-exp2-degree"] = pick(rng, [2, 3, 5], [1, 9, -1])
        opts["--poly-exp2-period"] = pick(rng, [1, 4, 8], [0, -3, 2**21])
    if rng.random() < 0.1:
        opts["--sram-budget"] = pick(rng, [4096, 65536], [-1, INT64_MAX, 1])
    if rng.random() < 0.2:
        opts["--split-kv"] = pick(rng, ["2", "7", "auto"],
                                  ["0", "1025", "-3", "x"])
    # KV caches and varlen batches: each sequence's lengths as lists.
    if rng.random() < 0.15:
        opts["--page-size"] = pick(rng, [8, 16, 32], [0, -4, 2**21, INT64_MAX])
    if rng.random() < 0.15:
        opts["--kv-lens"] = ",".join(
            str(pick(rng, [0, 1, 7, 33], [-1, 2**40], 0.1))
            for _ in range(rng.choice([1, 1, 2])))
    if rng.random() < 0.15:
        n = rng.choice([1, 2, 3])
        opts["--varlen-q"] = ",".join(
            str(pick(rng, [0, 1, 9, 40], [-2, 2**21], 0.1)) for _ in range(n))
        opts["--varlen-kv"] = ",".join(
            str(pick(rng, [0, 1, 9, 40], [-2, 2**21], 0.1))
            for _ in range(pick(rng, [n], [n + 1], 0.1)))
    # Attention variants: sinks, score and mask modifications.
    if rng.random() < 0.15:
        opts["--sinks"] = None
    if rng.random() < 0.15:
        opts["--score-mod"] = pick(rng, ["alibi", "bias", "head-scale", "tanh"],
                                   ["relative", ""],
                                   0.1)
    if rng.random() < 0.15:
        opts["--mask-mod"] = pick(rng, ["document", "prefix-lm"], ["sliding"],
                                  0.1)
        if opts["--mask-mod"] == "prefix-lm" or rng.random() < 0.1:
            opts["--prefix-len"] = pick(rng, [0, 5, 40], [-1, INT64_MAX])
    if rng.random() < 0.1:
        opts["--backward"] = None
    return opts


def fa_compile_vector(rng):
    opts = {
        "--arch": pick(rng, ["sm_80", "sm_90a", "sm_100a"], ["sm_75", ""], 0.05),
        "--head-dim": pick(rng, [64, 96, 128, 256], [0, 80, 2**32 + 64], 0.15),
        "--dtype": pick(rng, ["f16", "bf16"], ["f32"], 0.05),
        "--no-cubin": None,
        "--emit": "ptx",
    }
    if rng.random() < 0.3:
        opts["--causal"] = None
    if rng.random() < 0.3:
        opts["--window"] = pick(rng, [1, 128, 4096], [-5, 2**32 + 1, INT64_MAX])
    if rng.random() < 0.3:
        opts["--causal-align"] = pick(rng, ["top-left", "bottom-right"],
                                      ["middle", ""], 0.05)
    if rng.random() < 0.3:
        opts["--softcap"] = pick(rng, ["30", "50", "30.5"], EXTREME_FLOATS)
    if rng.random() < 0.3:
        opts["--rescale-threshold"] = pick(rng, ["0", "8", "off"],
                                           EXTREME_FLOATS + ["65", "200"])
    if rng.random() < 0.2:
        opts["--poly-exp2-degree"] = pick(rng, [0, 3, 5], [1, 9, -7])
        opts["--poly-exp2-period"] = pick(rng, [1, 8], [0, 2**40])
    if rng.random() < 0.15:
        opts["--split-kv"] = pick(rng, ["2", "16", "auto"],
                                  ["0", "1", "1025", "many"])
    if rng.random() < 0.1:
        opts["--kv-lengths"] = None
    if rng.random() < 0.1:
        opts["--page-size"] = pick(rng, [16, 64, 256], [-1, 40, 2**21])
    if rng.random() < 0.1:
        opts["--varlen"] = None
    if rng.random() < 0.1:
        # An e4m3 KV cache beside a 16-bit Q.
        opts["--kv-dtype"] = pick(rng, ["e4m3"], ["e5m2", "f16", ""], 0.2)
    if rng.random() < 0.15:
        # The backward kernel: what it takes compiles (windows and
        # diagonal offsets included), the rest (softcaps, KV caches,
        # sm_100a, ...) is refused by name.
        opts["--backward"] = None
    return opts


def argv(tool, opts):
    out = [tool]
    for k, v in opts.items():
        out.append(k if v is None else f"{k}={v}")
    return out


def out_of_range(opts, max_window=INT64_MAX):
    """The option values Validation.h refuses (the tool must refuse them
    too, or it accepted silently). Sentinels: 0 is off/default for window,
    softcap, scale; rescale-threshold 'off'."""
    def f(key):
        v = opts.get(key)
        return None if v is None else float(v)
    bad = []
    w = opts.get("--window")
    if w is not None and w != 0 and not 1 <= w <= max_window:
        bad.append("window")
    c = f("--softcap")
    if c is not None and c != 0 and not 2**-64 <= c <= 2**24:
        bad.append("softcap")
    s = f("--scale")
    if s is not None and s != 0 and not 2**-64 <= s <= 2**64:
        bad.append("scale")
    t = opts.get("--rescale-threshold")
    if t not in (None, "off") and not 0 <= float(t) <= 64:
        bad.append("rescale-threshold")
    d = opts.get("--head-dim")
    if d is not None and not 1 <= d <= 65536:
        bad.append("head-dim")
    a = opts.get("--causal-align")
    if a is not None and a not in ("top-left", "bottom-right"):
        bad.append("causal-align")
    # Bottom-right aligns a mask: without causal or a window it is refused.
    if a == "bottom-right" and "--causal" not in opts and not w:
        bad.append("causal-align")
    # A page of 1 to 2^20 rows (0 or absent: contiguous); lengths in range.
    p = opts.get("--page-size")
    if p is not None and p != 0 and not 1 <= p <= 2**20:
        bad.append("page-size")
    for key in ("--kv-lens", "--varlen-q", "--varlen-kv"):
        v = opts.get(key)
        if v is not None and any(not 0 <= int(x) <= 2**20
                                 for x in str(v).split(",")):
            bad.append(key.lstrip("-"))
    if opts.get("--varlen-q") is not None and \
            len(str(opts["--varlen-q"]).split(",")) != \
            len(str(opts["--varlen-kv"]).split(",")):
        bad.append("varlen-kv")
    # Split-KV: auto or a count in [1, 1024] (fa-compile: at least 2).
    k = opts.get("--split-kv")
    if k is not None and k != "auto":
        low = 2 if "--arch" in opts else 1
        k = str(k)
        if not (k.lstrip("-").isdigit() and low <= int(k) <= 1024):
            bad.append("split-kv")
    return bad


def classify(tool, opts, proc, timed_out):
    text = (proc.stdout if proc else "") + (proc.stderr if proc else "")
    if timed_out:
        return "hang", text
    rc = proc.returncode
    if rc < 0:
        return f"crash (signal {-rc})", text
    if rc == 0:
        if tool == "fa-run" and "fa-run: PASS" not in text:
            return "success without PASS", text
        # The GPU kernels compare 32-bit positions.
        bad = out_of_range(opts, INT64_MAX if tool == "fa-run" else 2**31 - 1)
        if bad:
            return f"silent accept ({', '.join(bad)})", text
        return "ok", text
    if tool == "fa-run" and "fa-run: FAIL" in text:
        return "wrong answer (FAIL vs the reference)", text
    if "error" not in text:
        return "failure without a diagnostic", text
    return "refused", text


def run_tool(build, tool, opts, timeout):
    cmd = argv(os.path.join(build, "bin", tool), opts)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True,
                              timeout=timeout, errors="replace")
        return cmd, proc, False
    except subprocess.TimeoutExpired:
        return cmd, None, True


PY_WORKER = r"""
import json, os, sys
sys.path.insert(0, os.environ["FA_SRC"] + "/python")
import flashmlir
ext = os.environ["FA_BUILD"] + "/python/flashmlir"
if ext not in flashmlir.__path__:
    flashmlir.__path__.insert(0, ext)
for line in sys.stdin:
    kwargs = json.loads(line)
    for k, v in list(kwargs.items()):
        if isinstance(v, str) and k not in ("arch", "dtype", "sm90_kernel"):
            kwargs[k] = float(v)
    print("TRY", flush=True)
    try:
        flashmlir.compile(**kwargs)
        print("OK", flush=True)
    except flashmlir.CompileError as e:
        print("ERR" if str(e).strip() else "EMPTY", flush=True)
    except (TypeError, ValueError, OverflowError) as e:
        print("ERR", flush=True)
"""


def python_vector(rng):
    kw = {"head_dim": pick(rng, [64, 96, 128], [0, 80, 2**40], 0.15),
          "arch": pick(rng, ["sm_80", "sm_90a", "sm_100a"], ["sm_75"], 0.05)}
    if rng.random() < 0.3:
        kw["window"] = pick(rng, [0, 128], [-5, 2**31, 2**32 + 1])
    if rng.random() < 0.3:
        kw["softcap"] = pick(rng, ["30", "0"], EXTREME_FLOATS)
    if rng.random() < 0.3:
        kw["rescale_threshold"] = pick(rng, ["8", "-1"], EXTREME_FLOATS + ["200"])
    if rng.random() < 0.2:
        kw["poly_exp2_degree"] = pick(rng, [0, 3], [1, 9])
        kw["poly_exp2_period"] = pick(rng, [1, 8], [0, 2**21])
    return kw


def python_out_of_range(kw):
    bad = []
    w = kw.get("window", 0)
    if w != 0 and not 1 <= w < 2**31:
        bad.append("window")
    c = float(kw.get("softcap", 0))
    if c != 0 and not 2**-64 <= c <= 2**24:
        bad.append("softcap")
    t = kw.get("rescale_threshold")
    if t is not None and (math.isnan(float(t)) or float(t) > 64):
        bad.append("rescale_threshold")
    d = kw.get("head_dim")
    if not 1 <= d <= 65536:
        bad.append("head_dim")
    return bad


def run_python(src, build, rng, stop):
    """Runs vectors in batches of 8 in worker processes until `stop` (a
    crash kills one worker; the vector it was on is the finding, and the
    next batch gets a new worker)."""
    results = []
    env = dict(os.environ, FA_SRC=src, FA_BUILD=build)
    while time.time() < stop:
        batch = [python_vector(rng) for _ in range(8)]
        proc = subprocess.Popen([sys.executable, "-c", PY_WORKER], env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
        lines_in = "".join(json.dumps(kw) + "\n" for kw in batch)
        timed_out = False
        try:
            out, _ = proc.communicate(lines_in, timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
            timed_out = True
        verdicts = [l for l in out.splitlines() if l in ("OK", "ERR", "EMPTY")]
        for kw, v in zip(batch, verdicts):
            bad = python_out_of_range(kw)
            if v == "EMPTY":
                results.append((kw, "failure without a diagnostic"))
            elif v == "OK" and bad:
                results.append((kw, f"silent accept ({', '.join(bad)})"))
            else:
                results.append((kw, "ok" if v == "OK" else "refused"))
        if len(verdicts) < len(batch):  # the worker died on this vector
            rc = proc.returncode
            results.append((batch[len(verdicts)],
                            "hang" if timed_out else f"crash (exit {rc})"))
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--src", default=os.path.dirname(os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))))
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--targets", default="fa-run,fa-compile,python")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    rng = random.Random(args.seed)
    targets = args.targets.split(",")
    deadline = time.time() + args.seconds
    share = args.seconds / len(targets)
    counts, findings = {}, []

    def record(target, what, verdict, text=""):
        counts.setdefault(target, {}).setdefault(verdict.split(" (")[0], 0)
        counts[target][verdict.split(" (")[0]] += 1
        if verdict not in ("ok", "refused"):
            findings.append((target, verdict, what, text[-300:]))

    start = time.time()
    for n, target in enumerate(targets):
        stop = min(deadline, start + share * (n + 1))
        if target in ("fa-run", "fa-compile"):
            make = fa_run_vector if target == "fa-run" else fa_compile_vector
            timeout = 60 if target == "fa-run" else 120
            with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
                pending = set()
                while time.time() < stop or pending:
                    while time.time() < stop and len(pending) < args.jobs:
                        opts = make(rng)
                        pending.add(pool.submit(run_tool, build, target, opts,
                                                timeout))
                    done, pending = concurrent.futures.wait(
                        pending, return_when=concurrent.futures.FIRST_COMPLETED)
                    for fut in done:
                        cmd, proc, timed_out = fut.result()
                        opts = {}
                        for a in cmd[1:]:
                            k, _, v = a.partition("=")
                            opts[k] = (None if not _ else
                                       int(v) if v.lstrip("-").isdigit() else v)
                        verdict, text = classify(target, opts, proc, timed_out)
                        record(target, " ".join(cmd), verdict, text)
        elif target == "python":
            for kw, verdict in run_python(args.src, build, rng, stop):
                record("python", f"flashmlir.compile(**{kw})", verdict)
        else:
            sys.exit(f"unknown target {target!r}")
    elapsed = time.time() - start
    total = sum(sum(c.values()) for c in counts.values())
    print(f"fuzz_options: {total} executions in {elapsed:.0f} s (seed "
          f"{args.seed})")
    for target, c in counts.items():
        print(f"  {target}: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
    for target, verdict, what, text in findings:
        print(f"FINDING [{target}] {verdict}: {what}")
        if text.strip():
            print("    " + text.strip().splitlines()[-1][:200])
    return min(len(findings), 100)


if __name__ == "__main__":
    sys.exit(main())
