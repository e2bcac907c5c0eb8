#!/usr/bin/env bash
# Builds the libFuzzer harness (in build-asan/, with ASan+UBSan) and runs it
# for a bounded time on a corpus seeded from the lit tests.
# Usage: bash scripts/fuzz.sh [seconds=60] [jobs=1] [runs=0]
# With runs > 0 the run is reproducible (fixed seed, fresh corpus, that many
# executions): CI uses it so that a finding is a finding, not luck.
set -uo pipefail
cd "$(dirname "$0")/.."
SECONDS_TO_RUN=${1:-60}
JOBS=${2:-1}
RUNS=${3:-0}
cmake -G Ninja -S . -B build-asan \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
  -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
  -DFA_ENABLE_SANITIZERS=ON -DFA_BUILD_FUZZER=ON > /dev/null || exit 1
cmake --build build-asan --target fa-fuzz || exit 1
SEEDS=build-asan/fuzz-seeds
CORPUS=build-asan/fuzz-corpus
mkdir -p "$SEEDS" "$CORPUS"
# One seed per `// -----` case of every lit test.
/usr/bin/python3 - "$SEEDS" <<'PY'
import pathlib, sys
out = pathlib.Path(sys.argv[1])
n = 0
for f in sorted(p for p in pathlib.Path("test").rglob("*.mlir") if "Fuzz" not in p.parts):
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
ASAN_OPTIONS=detect_leaks=0 bin/fa-fuzz fuzz-corpus fuzz-seeds \
  -max_total_time="$SECONDS_TO_RUN" -max_len=16384 -timeout=30 \
  "${PARALLEL[@]}" -print_final_stats=1 -artifact_prefix=fuzz-crash- 2>&1 |
  tail -25
