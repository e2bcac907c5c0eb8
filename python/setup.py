"""Builds the flashmlir package's compiled extension (flashmlir._compiler)
with CMake from the repository root; the metadata is in pyproject.toml.

Environment:
  FLASHMLIR_CMAKE_BUILD_DIR  an existing build tree to build the extension
                             in (default: a fresh one under build_temp)
  FLASHMLIR_MLIR_DIR         MLIRConfig.cmake's folder (default Debian's
                             /usr/lib/llvm-22/lib/cmake/mlir)
  FLASHMLIR_NO_EXTENSION=1   no extension: the runtime and torch ops alone
"""
import os
import pathlib
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent.parent


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = os.environ.get("FLASHMLIR_CMAKE_BUILD_DIR")
        build = pathlib.Path(build).resolve() if build else \
            pathlib.Path(self.build_temp).resolve() / "cmake"
        if not (build / "CMakeCache.txt").exists():
            mlir = os.environ.get("FLASHMLIR_MLIR_DIR",
                                  "/usr/lib/llvm-22/lib/cmake/mlir")
            args = ["cmake", "-S", str(ROOT), "-B", str(build),
                    "-DCMAKE_BUILD_TYPE=Release", f"-DMLIR_DIR={mlir}",
                    f"-DPython3_EXECUTABLE={sys.executable}"]
            if shutil.which("ninja"):
                args += ["-G", "Ninja"]
            try:
                import pybind11
                args.append(f"-Dpybind11_DIR={pybind11.get_cmake_dir()}")
            except ImportError:
                pass
            subprocess.check_call(args)
        subprocess.check_call(["cmake", "--build", str(build), "--target",
                               "_compiler"])
        built = list((build / "python" / "flashmlir").glob("_compiler*.so"))
        if not built:
            raise RuntimeError(f"CMake built no _compiler extension in "
                               f"{build}: is pybind11 installed?")
        target = pathlib.Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built[0], target)


extensions = [] if os.environ.get("FLASHMLIR_NO_EXTENSION") == "1" else \
    [CMakeExtension("flashmlir._compiler")]
setup(ext_modules=extensions, cmdclass={"build_ext": CMakeBuild})
