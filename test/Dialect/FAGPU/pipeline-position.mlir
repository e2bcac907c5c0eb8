// RUN: fa-opt %s | fa-opt | FileCheck %s

// Round trip of a pipeline's ring positions: a role's use of the ring as a
// stage and barrier parity (consumer and producer, with a persistent CTA's
// phase bits), and the phase bits after a tile.

!kv = !fagpu.pipeline<stages = 3, buffers = 2, 64x64xf16>
!once = !fagpu.pipeline<stages = 1, buffers = 1, 128x64xf16, fill_once>

// CHECK-LABEL: llvm.func @positions
// CHECK: %{{.*}}, %{{.*}} = fagpu.pipeline_position %[[KV:.*]][%arg0] : <stages = 3, buffers = 2, 64x64xf16>
// CHECK: %{{.*}}, %{{.*}} = fagpu.pipeline_position %[[KV]][%arg0] producer : <stages = 3, buffers = 2, 64x64xf16>
// CHECK: %{{.*}}, %{{.*}} = fagpu.pipeline_position %[[KV]][%arg0] phases %arg1 : <stages = 3, buffers = 2, 64x64xf16>
// CHECK: %[[S:.*]], %[[P:.*]] = fagpu.pipeline_position %[[KV]][%arg0] phases %arg1 producer : <stages = 3, buffers = 2, 64x64xf16>
// CHECK: fagpu.pipeline_acquire %[[KV]][%[[S]]] buffer 0 parity %[[P]]
// CHECK: fagpu.pipeline_advance_phases %[[KV]] phases %arg1 after %arg0 : <stages = 3, buffers = 2, 64x64xf16>
// CHECK: fagpu.pipeline_position %{{.*}}[%arg0] : <stages = 1, buffers = 1, 128x64xf16, fill_once>
module attributes {gpu.container_module} {
gpu.module @fa_kernels {
  llvm.mlir.global external @fa_smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
  llvm.func @positions(%use: i32, %bits: i32) -> i32 {
    %kv = fagpu.create_pipeline {barrier_offset = 65536 : i64, tile_offset = 0 : i64} : !kv
    %s0, %p0 = fagpu.pipeline_position %kv[%use] : !kv
    %s1, %p1 = fagpu.pipeline_position %kv[%use] producer : !kv
    %s2, %p2 = fagpu.pipeline_position %kv[%use] phases %bits : !kv
    %s3, %p3 = fagpu.pipeline_position %kv[%use] phases %bits producer : !kv
    fagpu.pipeline_acquire %kv[%s3] buffer 0 parity %p3 : !kv
    %next = fagpu.pipeline_advance_phases %kv phases %bits after %use : !kv
    %q = fagpu.create_pipeline {barrier_offset = 65600 : i64, tile_offset = 49152 : i64} : !once
    %s4, %p4 = fagpu.pipeline_position %q[%use] : !once
    llvm.return %next : i32
  }
}
}
