#!/usr/bin/env bash
# Builds flash-mlir with AddressSanitizer + UndefinedBehaviorSanitizer
# (clang-22) into build-asan/ and runs the whole lit suite and the CPU
# pytest suite against it. Our code is instrumented; Debian's libMLIR.so is
# not (its bugs are out of reach of this check). JIT-compiled kernels run
# inside fa-run uninstrumented.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/configure-asan.sh || exit 1
cmake --build build-asan || exit 1
# allow_user_poisoning=0: see scripts/fuzz.sh (instrumented project code and
# uninstrumented libMLIR share allocators).
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:allow_user_poisoning=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
echo "== lit (ASan+UBSan) =="
/usr/lib/llvm-22/bin/lit -sv build-asan/test || status=1
echo "== pytest (ASan+UBSan) =="
# The ring-attention tests (test_distributed.py) run torch.distributed in
# spawned processes, whose torch is not built for the ASan runtime; the
# extension code they call (run_cpu) is covered here by the other tests, and
# they run uninstrumented in scripts/test.sh.
FA_BUILD_DIR="$PWD/build-asan" /usr/bin/python3 -m pytest -q -m "not gpu" \
  --ignore=python/tests/test_distributed.py python/tests || status=1
exit $status
