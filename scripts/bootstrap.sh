#!/usr/bin/env bash
# Installs what flash-mlir needs on Debian 12 (LLVM/MLIR 22 from Debian,
# clang, ninja, Python test tools, and torch for the torch.distributed (gloo)
# tests of the ring attention) and builds it into build/.
# Usage: bash scripts/bootstrap.sh [extra cmake args...]
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi

PACKAGES="libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools clang-22
  libclang-rt-22-dev cmake ninja-build python3 python3-dev python3-pybind11
  python3-numpy
  python3-pytest
  python3-torch"
missing=""
for p in $PACKAGES; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "bootstrap: installing$missing"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
fi

cmake -G Ninja -S . -B build \
  -DCMAKE_BUILD_TYPE=Release \
  -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
  -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
  "$@"
cmake --build build
echo "bootstrap: built flash-mlir in build/ (tools in build/bin)"
