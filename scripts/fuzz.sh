#!/usr/bin/env bash
# Builds the libFuzzer harnesses (in build-asan/, with ASan+UBSan) and runs
# each for a bounded time: fa-fuzz (parsing, verification, pipelines) on a
# corpus seeded from the lit tests, fa-fuzz-metadata (the C runtime's launch
# metadata and image reader) on fa-compile's metadata and the runtime-errors
# cases.
# Usage: bash scripts/fuzz.sh [seconds=60] [jobs=1] [runs=0]
# FA_FUZZ_TARGETS="fa-fuzz fa-fuzz-metadata fa-options fa-surfaces" (the
# default) picks harnesses; fa-options is tools/fa-fuzz/fuzz_options.py on
# the normal build (build/): random option vectors (extreme and non-finite
# values included) for FA_FUZZ_OPTION_TARGETS="fa-run,fa-compile,python",
# fa-run's being a differential run against its reference; fa-surfaces is
# tools/fa-fuzz/fuzz_surfaces.py: hand-written #fagpu.schedule fields
# through fa-opt, launch metadata through the C and Python readers
# (differentially), the Python entry points' arguments; both seeded by
# [runs] when > 0. FA_FUZZ_SURFACE_SECONDS bounds fa-surfaces (default:
# seconds).
# With runs > 0 the run is reproducible (fixed seed, fresh corpus, that many
# executions): CI uses it so that a finding is a finding, not luck.
# ASan: allow_user_poisoning=0 because this project is instrumented and
# Debian's libMLIR is not, while both allocate from the same
# BumpPtrAllocators (the context's attribute uniquer): an instrumented
# inline allocation (e.g. a #fagpu.schedule's storage) poisons the rest of a
# new slab, which libMLIR's uninstrumented allocations then hand out
# without unpoisoning -- a false use-after-poison, not a bug of either.
# FA_FUZZ_OPTION_SECONDS bounds the options fuzz alone (default: seconds).
# FA_FUZZ_SEED_DIRS: the lit-test folders fa-fuzz's seeds come from (default
# test): each seed runs its pipelines under ASan, 0.7 s apiece for
# Transforms and Conversion, 0.04 s for Dialect's verifier cases.
set -uo pipefail
cd "$(dirname "$0")/.."
SECONDS_TO_RUN=${1:-60}
JOBS=${2:-1}
RUNS=${3:-0}
bash scripts/configure-asan.sh || exit 1
TARGETS=${FA_FUZZ_TARGETS:-fa-fuzz fa-fuzz-metadata fa-options fa-surfaces}
SEED=$([ "$RUNS" -gt 0 ] && echo "$RUNS" || echo "$RANDOM")
status=0
if [[ " $TARGETS " == *" fa-options "* ]]; then
  /usr/bin/python3 tools/fa-fuzz/fuzz_options.py --build build \
    --seconds "${FA_FUZZ_OPTION_SECONDS:-$SECONDS_TO_RUN}" --seed "$SEED" \
    --targets "${FA_FUZZ_OPTION_TARGETS:-fa-run,fa-compile,python}" || status=1
fi
if [[ " $TARGETS " == *" fa-surfaces "* ]]; then
  /usr/bin/python3 tools/fa-fuzz/fuzz_surfaces.py --build build \
    --seconds "${FA_FUZZ_SURFACE_SECONDS:-$SECONDS_TO_RUN}" --seed "$SEED" \
    || status=1
fi
ASAN_TARGETS=${TARGETS//fa-options/}
ASAN_TARGETS=${ASAN_TARGETS//fa-surfaces/}
if [ -z "${ASAN_TARGETS// /}" ]; then exit $status; fi
# shellcheck disable=SC2086
cmake --build build-asan --target $ASAN_TARGETS || exit 1
if [[ " $TARGETS " == *" fa-fuzz-metadata "* ]]; then
  MSEEDS=build-asan/fuzz-metadata-seeds
  MCORPUS=build-asan/fuzz-metadata-corpus
  rm -rf "$MSEEDS" && mkdir -p "$MSEEDS" "$MCORPUS"
  if [ "$RUNS" -gt 0 ]; then rm -rf "$MCORPUS" && mkdir -p "$MCORPUS"; fi
  # fa-compile's metadata for each launcher shape (sm_80 grid, sm_90a tile
  # grid with tensor maps, dynamic scheduler, a deterministic backward
  # kernel), then every JSON string of the runtime-errors test.
  for a in "sm_80 64" "sm_90a 128" "sm_90a 128 --causal" \
      "sm_90a 64 --backward --deterministic"; do
    set -- $a
    build/bin/fa-compile --arch "$1" --head-dim "$2" ${3:-} --no-cubin \
      ${4:-} -o "$MSEEDS/k-$1-$2${3:-}" > /dev/null 2>&1 || true
  done
  rm -f "$MSEEDS"/*.ptx
  /usr/bin/python3 - "$MSEEDS" <<'PY'
import pathlib, re, sys
out = pathlib.Path(sys.argv[1])
src = pathlib.Path("test/Runtime/runtime-errors.c").read_text()
n = 0
for m in re.finditer(r'"((?:[^"\\]|\\.)*)"', src):
    text = m.group(1).encode().decode("unicode_escape")
    if "{" in text or ":" in text:
        (out / f"case{n:03d}.json").write_text(text)
        n += 1
print(f"fuzz-metadata: {n} seeds from runtime-errors.c")
PY
  MARGS=(-max_total_time="$SECONDS_TO_RUN" -max_len=8192 -timeout=10
         -print_final_stats=1 -artifact_prefix=fuzz-metadata-crash-)
  if [ "$RUNS" -gt 0 ]; then MARGS+=(-runs="$RUNS" -seed=1); fi
  (cd build-asan &&
    ASAN_OPTIONS=detect_leaks=1:allow_user_poisoning=0 bin/fa-fuzz-metadata fuzz-metadata-corpus \
      fuzz-metadata-seeds "${MARGS[@]}" 2>&1 | tail -12
    exit "${PIPESTATUS[0]}") || status=1
fi
if [[ " $TARGETS " != *" fa-fuzz "* ]]; then exit $status; fi
SEEDS=build-asan/fuzz-seeds
CORPUS=build-asan/fuzz-corpus
mkdir -p "$CORPUS"
# One seed per `// -----` case of every lit test under FA_FUZZ_SEED_DIRS
# (default: all of test/).
rm -rf "$SEEDS" && mkdir -p "$SEEDS"
/usr/bin/python3 - "$SEEDS" ${FA_FUZZ_SEED_DIRS:-test} <<'PY'
import pathlib, sys
out = pathlib.Path(sys.argv[1])
n = 0
files = {p for d in sys.argv[2:] for p in pathlib.Path(d).rglob("*.mlir")}
for f in sorted(p for p in files if "Fuzz" not in p.parts):
    for case in f.read_text().split("// -----"):
        if "fa." in case:
            (out / f"seed{n:04d}.mlir").write_text(case)
            n += 1
print(f"fuzz: {n} seeds from the lit tests")
PY
PARALLEL=()
if [ "$JOBS" -gt 1 ]; then PARALLEL=(-jobs="$JOBS" -workers="$JOBS"); fi
if [ "$RUNS" -gt 0 ]; then
  rm -rf "$CORPUS" && mkdir -p "$CORPUS"
  PARALLEL+=(-runs="$RUNS" -seed=1)
fi
cd build-asan # libFuzzer's per-job logs land here
ASAN_OPTIONS=detect_leaks=0:allow_user_poisoning=0 bin/fa-fuzz fuzz-corpus fuzz-seeds \
  -max_total_time="$SECONDS_TO_RUN" -max_len=16384 -timeout=30 \
  "${PARALLEL[@]}" -print_final_stats=1 -artifact_prefix=fuzz-crash- \
  > fa-fuzz.log 2>&1
rc=$?
tail -25 fa-fuzz.log
if [ "$rc" -ne 0 ]; then
  # The report's head (what was accessed, from where), which the tail cuts.
  grep -A40 -m1 "ERROR: " fa-fuzz.log | head -60
  status=1
fi
exit $status
