"""Randomised CPU checks of both loop orders through fa-run.

Shapes, tiles, masks and dtypes are drawn from a seeded generator, so every
run covers the same cases and a failure can be replayed with the printed
command line. fa-run compares against a naive double-precision reference.
"""
import random
import re
import subprocess

import pytest

_RNG = random.Random(20261129)


def _draw_case(i):
    d = _RNG.choice([16, 32, 64, 128])
    hkv = _RNG.choice([1, 2])
    case = {
        "loop-order": _RNG.choice(["fa1", "fa2"]),
        "q-len": _RNG.choice([1, 3, 17, 64, 77, 130]),
        "kv-len": _RNG.choice([1, 5, 31, 64, 131, 257]),
        "head-dim": d,
        "value-head-dim": _RNG.choice([d, 16]),
        "kv-heads": hkv,
        "q-heads": hkv * _RNG.choice([1, 3]),
        "batch": _RNG.choice([1, 2]),
        "dtype": _RNG.choice(["f32", "f32", "f16", "bf16"]),
        "seed": i + 1,
    }
    flags = [f"--{k}={v}" for k, v in case.items()]
    if _RNG.random() < 0.5:
        flags.append("--causal")
    if _RNG.random() < 0.3:
        flags.append(f"--window={_RNG.choice([1, 4, 33])}")
    if _RNG.random() < 0.5:
        flags.append("--lse")
    if _RNG.random() < 0.5:
        flags += [f"--block-r={_RNG.choice([1, 8, 32])}",
                  f"--block-c={_RNG.choice([1, 16, 48])}"]
    return flags


CASES = [_draw_case(i) for i in range(24)]


@pytest.mark.parametrize("flags", CASES, ids=[" ".join(c) for c in CASES])
def test_random_attention_matches_reference(fa_run, flags):
    proc = subprocess.run([fa_run, *flags], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "fa-run: PASS" in proc.stdout
    err = float(re.search(r"O rel_l2_error=(\S+)", proc.stdout).group(1))
    tol = float(re.search(r"tolerance=(\S+)", proc.stdout).group(1))
    assert err <= tol


def test_checker_fails_on_impossible_tolerance(fa_run):
    """The harness itself must be able to fail: f32 rounding error (~1e-7)
    exceeds a 1e-12 tolerance, so fa-run must report FAIL and exit 1."""
    proc = subprocess.run([fa_run, "--q-len=33", "--kv-len=45", "--head-dim=16",
                           "--tolerance=1e-12"], capture_output=True, text=True)
    assert proc.returncode == 1
    assert "fa-run: FAIL" in proc.stdout


def test_fa1_and_fa2_agree_to_rounding(fa_run):
    """Same inputs (same seed), two loop orders: both within 1e-6 of the
    reference, so within 2e-6 of each other."""
    errs = []
    for order in ["fa1", "fa2"]:
        proc = subprocess.run([fa_run, f"--loop-order={order}", "--q-len=100",
                               "--kv-len=90", "--head-dim=32", "--block-r=16",
                               "--block-c=16", "--causal", "--seed=7"],
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        errs.append(float(re.search(r"O rel_l2_error=(\S+)",
                                    proc.stdout).group(1)))
    assert max(errs) < 1e-6
