// RUN: not fa-opt %s --convert-fagpu-to-nvvm 2>&1 | FileCheck %s

// A shared tile in a module that does not declare the kernel's shared
// memory (fa_smem, which fagpu-build-kernels emits) is an error at the op,
// not a crash.
// CHECK: error: failed to legalize operation 'fagpu.shared_tile'
gpu.module @fa_kernels {
  llvm.func @no_smem() {
    %t = fagpu.shared_tile offset 1024 : !fagpu.smem_tile<64x64xf16>
    llvm.return
  }
}
