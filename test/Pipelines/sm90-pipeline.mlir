// RUN: fa-opt %s --fa-sm90-pipeline | FileCheck %s
// RUN: fa-opt %s --fa-sm90-pipeline="ping-pong=false stages=2" | FileCheck %s --check-prefix=NOPP

// fa.attention to the host side of the launch (tensor maps by value) and
// the FlashAttention-3 kernel's PTX (PTX 8.6, sm_90a) from LLVM's NVPTX
// backend through upstream gpu-module-to-binary. The maps are rank 4 over
// strided [B, H, N, D] memrefs: their strides come from the memref.
// CHECK: memref.extract_strided_metadata
// CHECK: llvm.call @faEncodeStridedTensorMap
// D = 64 non-causal defaults to B_r = 192: three consumer warpgroups (512
// threads) with 160 registers each, persistent CTAs.
// CHECK: gpu.launch_func  @fa_kernels::@fa3_sm90_d64_br192_bc128_s3_f16_persistent_q2 blocks in
// CHECK-SAME: threads in (%c512,
// CHECK: gpu.binary @fa_kernels  [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx86">, {{.*}}assembly = "
// CHECK-SAME: .target sm_90a
// CHECK-SAME: .maxntid 512, 1, 1
// CHECK-SAME: setmaxnreg.inc.sync.aligned.u32 \09160;
// CHECK-SAME: bar.sync
// CHECK-SAME: wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16
// CHECK-SAME: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16
// CHECK-SAME: setmaxnreg.dec.sync.aligned.u32
// CHECK-SAME: cp.async.bulk.tensor.4d.shared::cta.global.tile.mbarrier::complete_tx::bytes
// NOPP: gpu.launch_func  @fa_kernels::@fa3_sm90_d64_br192_bc128_s2_f16_nopp
// NOPP-NOT: bar.arrive
func.func @attention(%q: memref<?x?x?x64xf16>, %k: memref<?x?x?x64xf16>, %v: memref<?x?x?x64xf16>,
                     %o: memref<?x?x?x64xf16>, %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v outs(%o, %lse : memref<?x?x?x64xf16>, memref<?x?x?xf32>)
      : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>
  return
}
