#!/usr/bin/env bash
# Installs flash-mlir into build/install and checks the installed package as
# an embedding ML compiler uses it, each consumer given only
# -Dflash-mlir_DIR (the package finds MLIR itself):
#   1. test/Consumer: C++ against flash-mlir::FAPipelines (fa-cpu-pipeline);
#   2. test/ConsumerC: a plain C program linking only libFlashMLIRCAPI.so,
#      compiling an fa.attention module for sm_90a to PTX (no GPU);
#   3. test/ConsumerVersion: find_package(flash-mlir 9.9) must fail on the
#      version, and 0.1 (another minor, SameMinorVersion) too; 0.2 is found;
# then imports the installed Python package.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix="$PWD/build/install"
pkg="$prefix/lib/cmake/flash-mlir"
rm -rf build/install build/consumer build/consumer-c build/consumer-version
cmake --install build --prefix "$prefix" > /dev/null
passed=0

# 1. C++ consumer.
cmake -G Ninja -S test/Consumer -B build/consumer \
  -DCMAKE_CXX_COMPILER=clang++-22 -Dflash-mlir_DIR="$pkg" > /dev/null
cmake --build build/consumer > /dev/null
out=$(build/consumer/fa-consumer)
echo "$out"
grep -q "0 fa ops left" <<< "$out"
passed=$((passed + 1))

# 2. C consumer of the shared C API library alone.
cmake -G Ninja -S test/ConsumerC -B build/consumer-c \
  -DCMAKE_C_COMPILER=clang-22 -Dflash-mlir_DIR="$pkg" > /dev/null
cmake --build build/consumer-c > /dev/null
needed=$(readelf -d build/consumer-c/fa-c-consumer | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
echo "c-consumer: needs $needed"
# The C API library (by its soname) and the C library, nothing else: no
# libMLIR, libLLVM or libstdc++ of its own.
[ "$needed" = "libFlashMLIRCAPI.so.0.2 libc.so.6 " ] || {
  echo "c-consumer: expected to need libFlashMLIRCAPI.so.0.2 and libc.so.6 only"; exit 1; }
# The installed library, not the build tree's.
loaded=$(ldd build/consumer-c/fa-c-consumer)
grep -q "=> $prefix/lib/libFlashMLIRCAPI.so.0.2 " <<< "$loaded" || {
  echo "c-consumer: does not load $prefix/lib/libFlashMLIRCAPI.so.0.2"; exit 1; }
build/consumer-c/fa-c-consumer
passed=$((passed + 1))

# 3. Versions: a request for another version must fail, and on the version.
for request in 9.9 0.1; do
  if out=$(cmake -S test/ConsumerVersion -B "build/consumer-version/$request" \
      -Dflash-mlir_DIR="$pkg" -DFA_REQUEST=$request 2>&1); then
    echo "$out"
    echo "version: find_package(flash-mlir $request) succeeded; it must fail"
    exit 1
  fi
  grep -q "compatible with requested version \"$request\"" <<< "$out" || {
    echo "$out"; echo "version: the $request request failed for another reason"; exit 1; }
  echo "version: find_package(flash-mlir $request CONFIG REQUIRED) fails: not compatible with $(
    echo "$out" | grep -o 'version: [0-9.]*' | head -1 | cut -d' ' -f2) (ok)"
done
out=$(cmake -S test/ConsumerVersion -B build/consumer-version/0.2 \
  -Dflash-mlir_DIR="$pkg" -DFA_REQUEST=0.2 2>&1) || { echo "$out"; exit 1; }
echo "$out" | grep "found flash-mlir" | sed 's/^-- /version: /'
passed=$((passed + 1))

# 4. The Python package that cmake --install wrote (where the build's
#    FA_PYTHON_INSTALL_DIR says), importable from there alone.
site=$(sed -n 's/^FA_PYTHON_INSTALL_DIR:STRING=//p' build/CMakeCache.txt)
PYTHONPATH="$prefix/$site" FLASHMLIR_BUILD_DIR=/nonexistent \
  /usr/bin/python3 -c "import flashmlir; k = flashmlir.compile(head_dim=64); print('installed python package:', flashmlir.__version__, k.name)"
passed=$((passed + 1))

# 5. pip install ./python (offline: the system's setuptools, the build
#    tree's CMake configuration, only the extension's target built), into a
#    target folder: importable with its version and its compiler.
rm -rf build/pip-target
FLASHMLIR_CMAKE_BUILD_DIR="$PWD/build" /usr/bin/python3 -m pip install -q \
  --no-build-isolation --no-deps --no-index --root-user-action=ignore \
  --target build/pip-target ./python
PYTHONPATH=build/pip-target FLASHMLIR_BUILD_DIR=/nonexistent \
  /usr/bin/python3 -c "import flashmlir; assert flashmlir.__version__ == '$(sed -n 's/^project(flash-mlir VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)', flashmlir.__version__; k = flashmlir.compile(head_dim=64); print('pip-installed python package:', flashmlir.__version__, k.name)"
passed=$((passed + 1))
echo "install: $passed passed, 0 failed"
