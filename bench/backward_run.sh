#!/usr/bin/env bash
# One GPU call's worth of the backward kernel's checks (issue 48), on the
# kernels of bench/build_backward_kernels.sh in $KERNELS (default .bwd),
# most important first, each part time-boxed so that a short device lease
# still returns the earlier parts:
#   check    the 2x rule over the shape grid (bench/backward_check.py check)
#   checkdet the same over the --deterministic kernels, each run twice
#            for the same bits
#   pytest   the gpu tests of python/tests/test_backward.py
#   memcheck compute-sanitizer memcheck on the first two shapes
#   speed    the kernel's speed table beside torch SDPA's backward
#   step     forward + backward through flash_attn_func on grouped-query
#            shapes, eager and under CUDA graphs
#   train    bench/train_check.py: a small GQA transformer trained with
#            flash_attn_func and with SDPA from the same seeds
#   ab       interleaved A/B of the speed table, $AB_BASE (default
#            .bwd-base) against $KERNELS, two rounds, bf16
# Logs go to $OUT (default .) as backward-*.log.
# Usage: bash bench/backward_run.sh [parts...]   (default: all but ab)
set -uo pipefail
cd "$(dirname "$0")/.."
K=${KERNELS:-.bwd}
O=${OUT:-.}
export FLASHMLIR_KERNEL_DIR=$K FLASHMLIR_BACKWARD_KERNEL_DIR=$K
parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(check checkdet pytest memcheck speed step train)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$O/backward-device.log"
for part in "${parts[@]}"; do
  start=$(date +%s)
  case $part in
    check)
      timeout 240 python3 bench/backward_check.py check --kernels "$K" \
        > "$O/backward-check.log" 2>&1
      echo "check: rc $? $(tail -1 "$O/backward-check.log")" ;;
    checkdet)
      timeout 240 python3 bench/backward_check.py check --deterministic \
        --kernels "$K" > "$O/backward-checkdet.log" 2>&1
      echo "checkdet: rc $? $(tail -1 "$O/backward-checkdet.log")" ;;
    pytest)
      timeout 240 python3 -m pytest -q -m gpu python/tests/test_backward.py \
        > "$O/backward-pytest.log" 2>&1
      echo "pytest: rc $? $(tail -1 "$O/backward-pytest.log")" ;;
    memcheck)
      SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
      timeout 240 "$SAN" --tool memcheck --print-limit 20 python3 \
        bench/backward_check.py check --kernels "$K" --shapes 2 \
        > "$O/backward-memcheck.log" 2>&1
      echo "memcheck: rc $? $(grep -E 'ERROR SUMMARY' "$O/backward-memcheck.log" | tail -1)" ;;
    speed)
      for dt in bf16 f16; do
        timeout 200 python3 bench/backward_check.py speed --kernels "$K" \
          --dtype $dt > "$O/backward-speed-$dt.log" 2>&1
        echo "speed $dt: rc $?"; cat "$O/backward-speed-$dt.log"
      done ;;
    step)
      timeout 240 python3 bench/backward_check.py step --dtype bf16 \
        > "$O/backward-step.log" 2>&1
      echo "step: rc $?"; cat "$O/backward-step.log" ;;
    train)
      timeout 420 python3 bench/train_check.py --json "$O/train.json" \
        > "$O/backward-train.log" 2>&1
      echo "train: rc $?"; cat "$O/backward-train.log" ;;
    ab)
      BASE=${AB_BASE:-.bwd-base}
      for round in 1 2; do
        for side in "$BASE" "$K"; do
          log="$O/backward-ab-$round-$(basename "$side").log"
          timeout 120 python3 bench/backward_check.py speed --kernels "$side" \
            --dtype bf16 > "$log" 2>&1
          echo "ab round $round $side: rc $?"; cat "$log"
        done
      done ;;
    *) echo "unknown part $part" ;;
  esac
  echo "[$part: $(( $(date +%s) - start )) s]"
done
