#!/usr/bin/env bash
# One GPU call's worth of the backward kernel's checks (issue 48), on the
# kernels of bench/build_backward_kernels.sh in $1 (default .bwd): the 2x
# rule over the shape grid, the gpu tests of python/tests/test_backward.py
# (flash_attn_func's gradients included), compute-sanitizer memcheck on the
# first two shapes, and the speed table beside torch SDPA's backward.
# Logs go to $OUT (default .) as backward-*.log.
set -uo pipefail
cd "$(dirname "$0")/.."
K=${1:-.bwd}
O=${OUT:-.}
export FLASHMLIR_KERNEL_DIR=$K FLASHMLIR_BACKWARD_KERNEL_DIR=$K
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$O/backward-device.log"
python3 bench/backward_check.py check --kernels "$K" > "$O/backward-check.log" 2>&1
echo "check: rc $? $(tail -1 "$O/backward-check.log")"
python3 -m pytest -q -m gpu python/tests/test_backward.py > "$O/backward-pytest.log" 2>&1
echo "pytest: rc $? $(tail -1 "$O/backward-pytest.log")"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
"$SAN" --tool memcheck --print-limit 20 python3 bench/backward_check.py check \
  --kernels "$K" --shapes 2 > "$O/backward-memcheck.log" 2>&1
echo "memcheck: rc $? $(grep -E 'ERROR SUMMARY' "$O/backward-memcheck.log" | tail -1)"
for dt in bf16 f16; do
  python3 bench/backward_check.py speed --kernels "$K" --dtype $dt > "$O/backward-speed-$dt.log" 2>&1
  echo "speed $dt: rc $?"; cat "$O/backward-speed-$dt.log"
done
