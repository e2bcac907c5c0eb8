#!/usr/bin/env bash
# Everything the H200 run does, in one command (run it there, from the repo
# root, with the kernels compiled here by bench/build_kernels.sh in .cubins):
#   1. correctness + timing of every kernel against torch SDPA backends
#   2. compute-sanitizer memcheck, racecheck and synccheck on ragged shapes
# Results go to $OUT (or bench-out/).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-bench-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
status=0
python3 bench/harness.py --kernels .cubins --out "$OUT" --label "${LABEL:-}" \
  2>&1 | grep -v -E "UserWarning|return F.scaled" | tee "$OUT/harness.log" || status=1
if command -v compute-sanitizer >/dev/null && [ "${SANITIZE:-1}" = 1 ]; then
  for tool in memcheck racecheck synccheck; do
    echo "== compute-sanitizer --tool $tool =="
    compute-sanitizer --tool "$tool" --error-exitcode 3 \
      python3 bench/sanitize.py .cubins > "$OUT/sanitize-$tool.log" 2>&1
    rc=$?
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|sanitize:" "$OUT/sanitize-$tool.log"
    echo "$tool exit $rc"
    [ $rc = 0 ] || status=1
  done
fi
exit $status
