#!/usr/bin/env bash
# The A/B of a refactor on the H200, in one command: every kernel in the
# folder (default .ab/, <name>__old and <name>__new pairs compiled here by
# the two fa-compile builds) checked and timed side by side with torch's
# FA2 and cuDNN backends at N = 1k, 4k, 16k; then compute-sanitizer
# memcheck and synccheck on the new kernels. Results go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-.ab}
OUT=${OUT:-ab-out}
mkdir -p "$OUT" "$OUT/new"
export PYTHONUNBUFFERED=1
status=0
if [ "${SANITIZE_ONLY:-0}" != 1 ]; then
python3 bench/sweep.py --kernels "$DIR" --out "$OUT" --sizes 1024,4096,16384 \
  2>&1 | grep -v -E "UserWarning|return F.scaled" > "$OUT/sweep.log" || status=1
tail -3 "$OUT/sweep.log"
python3 bench/ab_summary.py "$OUT/sweep.json" | tee "$OUT/ab.md" | grep "^ab "
fi
[ "${SANITIZE:-1}" = 1 ] || exit $status
# The sanitizers read the new kernels under their plain names.
for f in "$DIR"/*__new.json; do
  b=$(basename "$f" .json); cp "$DIR/$b.json" "$OUT/new/${b%__new}.json"
  cp "$DIR/$b.cubin" "$OUT/new/${b%__new}.cubin"
done
for tool in memcheck synccheck; do
  compute-sanitizer --tool "$tool" --error-exitcode 3 \
    python3 bench/sanitize.py "$OUT/new" > "$OUT/sanitize-$tool.log" 2>&1
  rc=$?
  grep -E "ERROR SUMMARY|sanitize:" "$OUT/sanitize-$tool.log" | tail -2
  echo "$tool exit $rc"
  [ $rc = 0 ] || status=1
done
rm -rf "$OUT/new"
exit $status
