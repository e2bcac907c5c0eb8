// RUN: fa-opt %s --split-input-file --fa-sm90-kernel-pipeline | FileCheck %s

// An e4m3 KV cache beside an f16 Q (decode: one consumer): one CTA per SM
// (two 16-bit K/V stages and four stages of the cache's e4m3 tiles fill
// its shared memory), one tile per CTA, the producer warpgroup at 40
// registers widening each block's K and V (8 pieces of 8 codes a thread
// and tile: 2 x 8 x 4 conversions of a pair), fencing for the async proxy
// and meeting at its barrier; the consumer's MMAs stay 16-bit.
// CHECK-LABEL: llvm.func @fa3_sm90_d128_br64_bc64_s4_f16_1cta_kvlens_paged64_kve4m3
// CHECK-SAME: ctas_per_sm = 1
// CHECK-SAME: stages = 4
// CHECK-SAME: fagpu.shared_memory_bytes = 165072
// CHECK: nvvm.setmaxregister decrease 40
// CHECK-COUNT-64: nvvm.convert.f8x2.to.f16x2
// CHECK-NOT: nvvm.convert.f8x2.to.f16x2
// CHECK: nvvm.setmaxregister increase 240
// CHECK: nvvm.wgmma.mma_async {{.*}} A[<f16>
func.func @decode(%q: memref<?x?x?x128xf16>, %k: memref<?x?x64x128xf8E4M3FN>,
                  %v: memref<?x?x64x128xf8E4M3FN>, %o: memref<?x?x?x128xf16>,
                  %lse: memref<?x?x?xf32>, %kd: memref<f32>, %vd: memref<f32>,
                  %lens: memref<?xi32>, %table: memref<?x?xi32>) {
  fa.attention %q, %k, %v descale(%kd, %vd : memref<f32>, memref<f32>)
      kv_lengths(%lens : memref<?xi32>) pages(%table : memref<?x?xi32>)
      outs(%o, %lse : memref<?x?x?x128xf16>, memref<?x?x?xf32>)
      {block_r = 64 : i64, block_c = 64 : i64}
      : memref<?x?x?x128xf16>, memref<?x?x64x128xf8E4M3FN>, memref<?x?x64x128xf8E4M3FN>
  return
}
