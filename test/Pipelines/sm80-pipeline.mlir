// RUN: fa-opt %s --fa-sm80-pipeline="chip=sm_80" | FileCheck %s
// RUN: fa-opt %s --fa-sm80-pipeline="chip=sm_90a rescale-threshold=8" | FileCheck %s --check-prefix=SM90

// fa.attention to a launch of the kernel and the kernel's PTX, made by
// LLVM's NVPTX backend through upstream gpu-module-to-binary.
// CHECK: gpu.launch_func  @fa_kernels::@fa2_sm80_d64_br128_bc64_f16 blocks in
// CHECK: gpu.binary @fa_kernels  [#gpu.object<#nvvm.target<O = 3, chip = "sm_80", features = "+ptx80">, {{.*}}assembly = "
// CHECK-SAME: .target sm_80
// CHECK-SAME: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// SM90: gpu.launch_func  @fa_kernels::@fa2_sm80_d64_br128_bc64_f16_cr8
// SM90: gpu.binary @fa_kernels  [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">, {{.*}}assembly = "
// SM90-SAME: vote.sync.any.pred
func.func @attention(%q: memref<?x?x?x64xf16>, %k: memref<?x?x?x64xf16>, %v: memref<?x?x?x64xf16>,
                     %o: memref<?x?x?x64xf16>, %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v outs(%o, %lse : memref<?x?x?x64xf16>, memref<?x?x?xf32>)
      : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>
  return
}
