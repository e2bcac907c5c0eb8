# -*- Python -*-
import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "FLASH_MLIR"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.fa_obj_root, "test")
config.excludes = ["CMakeLists.txt", "README.md", "lit.cfg.py", "lit.site.cfg.py", "Inputs", "Consumer", "ConsumerC", "ConsumerVersion", "Fuzz"]

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%fa_src_root", config.fa_src_root))
config.substitutions.append(("%fa_tools_dir", config.fa_tools_dir))
config.substitutions.append(("%fa_obj_root", config.fa_obj_root))
config.substitutions.append(("%fa_version", config.fa_version))
config.substitutions.append(
    ("%fa_soversion", ".".join(config.fa_version.split(".")[:2])))
config.substitutions.append(("%cmake", config.cmake_command))
# libFlashMLIRCAPI.so (not built under the sanitizers).
if config.fa_capi_shared:
    config.available_features.add("capi-shared")
# How MLIR is linked (FA_MLIR_DYLIB): libMLIR.so, or its component libraries.
config.substitutions.append(
    ("%fa_mlir_link", "DYLIB" if config.fa_mlir_dylib else "COMPONENTS"))
config.substitutions.append(
    ("%fa_no_libmlir",
     "" if config.fa_mlir_dylib else "--implicit-check-not=libMLIR.so"))

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

tool_dirs = [config.fa_tools_dir, config.llvm_tools_dir]
tools = ["fa-opt", "fa-run", "fa-compile", "mlir-runner"]
llvm_config.add_tool_substitutions(tools, tool_dirs)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.fa_tools_dir, append_path=True)

# ptxas from the CUDA toolkit (as fa-compile finds it), for tests that
# assemble PTX directly.
_cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
_ptxas = os.path.join(_cuda, "bin", "ptxas")
if not os.path.exists(_ptxas):
    _ptxas = "/usr/local/cuda/bin/ptxas"
config.substitutions.append(("%ptxas", _ptxas))
