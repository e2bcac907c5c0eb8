// RUN: fa-opt %s --fa-sm100-pipeline | FileCheck %s
// RUN: fa-opt %s --fa-sm100-pipeline="rescale-threshold=-1 poly-exp2-degree=0" | FileCheck %s --check-prefix=PLAIN

// fa.attention to the host side of the launch (tensor maps by value) and
// the Blackwell kernel's PTX (PTX 8.6, sm_100a) from LLVM's NVPTX backend
// through upstream gpu-module-to-binary. Compile-verified only; ptxas
// acceptance is checked in test/Target/fa-compile-sm100.test.
// CHECK: llvm.call @faEncodeTensorMap
// CHECK: gpu.launch_func  @fa_kernels::@fa4_sm100_d64_br128_bc128_s3_bf16_causal_cr8_px3p8 blocks in
// CHECK: gpu.binary @fa_kernels  [#gpu.object<#nvvm.target<O = 3, chip = "sm_100a", features = "+ptx86">, {{.*}}assembly = "
// CHECK-SAME: .target sm_100a
// CHECK-SAME: tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32
// CHECK-SAME: tcgen05.ld.sync.aligned.32x32b.x32.b32
// CHECK-SAME: vote.sync.any.pred
// CHECK-SAME: tcgen05.st.sync.aligned.32x32b.x32.b32
// CHECK-SAME: cp.async.bulk.tensor.3d.shared::cta.global.tile.mbarrier::complete_tx::bytes
// CHECK-SAME: tcgen05.mma.cta_group::1.kind::f16
// CHECK-SAME: tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64
// PLAIN: gpu.launch_func  @fa_kernels::@fa4_sm100_d64_br128_bc128_s3_bf16_causal blocks in
// PLAIN-NOT: vote.sync
func.func @attention(%q: memref<?x?x?x64xbf16>, %k: memref<?x?x?x64xbf16>, %v: memref<?x?x?x64xbf16>,
                     %o: memref<?x?x?x64xbf16>, %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v outs(%o, %lse : memref<?x?x?x64xbf16>, memref<?x?x?xf32>) {causal}
      : memref<?x?x?x64xbf16>, memref<?x?x?x64xbf16>, memref<?x?x?x64xbf16>
  return
}
