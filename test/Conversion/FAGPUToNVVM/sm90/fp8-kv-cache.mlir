// RUN: fa-opt %s --split-input-file --fa-sm90-kernel-pipeline | FileCheck %s

// An e4m3 KV cache beside an f16 Q, at its default tiles (B_r 64, B_c 128):
// one CTA per SM of three warpgroups -- the producer (40 registers)
// issuing the loads and widening each block's K, the consumer, and a
// warpgroup widening V (both at 232) -- two 16-bit K/V stages and two
// stages of the cache's e4m3 tiles. Each widener converts 16 pieces of 8
// codes a thread and block (16 x 4 pairs), fences for the async proxy and
// meets at its own barrier; the consumer's MMAs stay 16-bit.
// CHECK-LABEL: llvm.func @fa3_sm90_d128_br64_bc128_s2_f16_1cta_kvlens_paged64_kve4m3
// CHECK-SAME: ctas_per_sm = 1
// CHECK-SAME: stages = 2
// CHECK-SAME: fagpu.shared_memory_bytes = 230544
// CHECK-SAME: maxntid = array<i32: 384, 1, 1>
// CHECK: nvvm.setmaxregister decrease 40
// CHECK-COUNT-64: nvvm.convert.f8x2.to.f16x2
// CHECK: nvvm.barrier id = %c8_i32{{.*}} number_of_threads = %c128_i32
// CHECK: nvvm.setmaxregister increase 232
// CHECK-COUNT-64: nvvm.convert.f8x2.to.f16x2
// CHECK: nvvm.barrier id = %c9_i32{{.*}} number_of_threads = %c128_i32
// CHECK-NOT: nvvm.convert.f8x2.to.f16x2
// CHECK: nvvm.wgmma.mma_async {{.*}} A[<f16>
func.func @decode(%q: memref<?x?x?x128xf16>, %k: memref<?x?x64x128xf8E4M3FN>,
                  %v: memref<?x?x64x128xf8E4M3FN>, %o: memref<?x?x?x128xf16>,
                  %lse: memref<?x?x?xf32>, %kd: memref<f32>, %vd: memref<f32>,
                  %lens: memref<?xi32>, %table: memref<?x?xi32>) {
  fa.attention %q, %k, %v descale(%kd, %vd : memref<f32>, memref<f32>)
      kv_lengths(%lens : memref<?xi32>) pages(%table : memref<?x?xi32>)
      outs(%o, %lse : memref<?x?x?x128xf16>, memref<?x?x?xf32>)
      : memref<?x?x?x128xf16>, memref<?x?x64x128xf8E4M3FN>, memref<?x?x64x128xf8E4M3FN>
  return
}
