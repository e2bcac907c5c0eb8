// B_r = 192 (the default for non-causal D = 64): three consumer warpgroups
// of 64 rows, 512 threads, 160 registers each after setmaxnreg, and the
// ping-pong turn passed round robin (consumer c arrives on barrier
// 1 + (c + 1) mod 3). Causal D = 64 takes B_r = 128: two consumers, and
// persistent CTAs fed by the dynamic tile scheduler (persistent.mlir).
// RUN: fa-opt %s --split-input-file --fa-sm90-kernel-pipeline | FileCheck %s

func.func @d64(%q: memref<?x?x?x64xf16>, %k: memref<?x?x?x64xf16>,
               %v: memref<?x?x?x64xf16>, %o: memref<?x?x?x64xf16>,
               %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v outs(%o, %lse : memref<?x?x?x64xf16>, memref<?x?x?xf32>)
      : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>
  return
}
// CHECK-LABEL: func.func @d64
// Q tensor map boxes of 192 rows, 512 threads.
// CHECK: llvm.call @faEncodeStridedTensorMapL2(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c64_i64, %{{.*}}, %{{.*}}, %{{.*}}, %c192_i32,
// CHECK: gpu.launch_func @fa_kernels::@fa3_sm90_d64_br192_bc128_s3_f16
// CHECK-SAME: threads in (%c512,
// CHECK: consumers = 3, ctas_per_sm = 1, producer_registers = 24, consumer_registers = 160
// CHECK-SAME: nvvm.maxntid = array<i32: 512, 1, 1>
// q_empty and the stage "empty" barriers wait for 12 consumer warps.
// CHECK: nvvm.mbarrier.init %{{.*}}, %c12_i32
// CHECK: nvvm.setmaxregister  decrease 24
// CHECK: nvvm.setmaxregister  increase 160
// CHECK: %[[NEXT:.*]] = arith.addi %{{.*}}, %c1_i32
// CHECK: %[[MOD:.*]] = arith.remui %[[NEXT]], %c3_i32
// CHECK-NEXT: %[[TURN:.*]] = arith.addi %c1_i32{{.*}}, %[[MOD]]
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %c256_i32
// CHECK: nvvm.barrier.arrive id = %[[TURN]] number_of_threads = %c256_i32

// -----

func.func @d64_causal(%q: memref<?x?x?x64xf16>, %k: memref<?x?x?x64xf16>,
                      %v: memref<?x?x?x64xf16>, %o: memref<?x?x?x64xf16>,
                      %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v outs(%o, %lse : memref<?x?x?x64xf16>, memref<?x?x?xf32>)
      {causal} : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>
  return
}
// CHECK-LABEL: func.func @d64_causal
// CHECK: gpu.launch_func async [%{{.*}}] @fa_kernels::@fa3_sm90_d64_br128_bc128_s3_f16_causal_persistent_q2
// CHECK-SAME: threads in (%c384,
