#!/usr/bin/env bash
# Installs flash-mlir into build/install and builds and runs the
# out-of-tree consumer project (test/Consumer) against the installed
# package, then imports the installed Python package.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf build/install build/consumer
cmake --install build --prefix build/install > /dev/null
cmake -G Ninja -S test/Consumer -B build/consumer \
  -DCMAKE_CXX_COMPILER=clang++-22 \
  -DCMAKE_PREFIX_PATH="$PWD/build/install" > /dev/null
cmake --build build/consumer > /dev/null
out=$(build/consumer/fa-consumer)
echo "$out"
echo "$out" | grep -q "0 fa ops left"
PYTHONPATH=build/install/lib/python3/dist-packages FLASHMLIR_BUILD_DIR=/nonexistent \
  /usr/bin/python3 -c "import flashmlir; k = flashmlir.compile(head_dim=64); print('installed python package:', k.name)"
echo "install: 2 passed, 0 failed"
