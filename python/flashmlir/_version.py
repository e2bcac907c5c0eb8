"""flash-mlir's version: the CMake project's (CMakeLists.txt), which
python/tests/test_packaging.py checks this against."""
__version__ = "0.2.0"
