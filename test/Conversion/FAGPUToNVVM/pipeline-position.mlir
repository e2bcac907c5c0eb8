// RUN: fa-opt %s --convert-fagpu-to-nvvm | FileCheck %s

// A ring position through its lowering, for a 3-stage ring: stage = use
// mod 3, parity = (use / 3) mod 2, flipped by bit `stage` of a persistent
// CTA's phase bits and, for a producer, once more (the empty barrier's
// previous round). The phase bits after a tile of `uses` uses: stage s
// was used ceil((uses - s) / 3) times, and an odd count flips bit s.

!kv = !fagpu.pipeline<stages = 3, buffers = 2, 64x64xf16>

// CHECK-LABEL: llvm.func @consumer
// CHECK: %[[STAGE:.*]] = arith.remui %arg0, %c3_i32{{[_0-9]*}}
// CHECK: %[[ROUND:.*]] = arith.divui %arg0, %c3_i32{{[_0-9]*}}
// CHECK: %[[PARITY:.*]] = arith.andi %[[ROUND]], %c1_i32{{[_0-9]*}}
// CHECK-NOT: arith.xori
// CHECK: llvm.insertvalue %[[STAGE]], %{{.*}}[0]
// CHECK: llvm.insertvalue %[[PARITY]], %{{.*}}[1]

// CHECK-LABEL: llvm.func @persistent_producer
// CHECK: %[[STAGE:.*]] = arith.remui %arg0, %c3_i32{{[_0-9]*}}
// CHECK: %[[ROUND:.*]] = arith.divui %arg0, %c3_i32{{[_0-9]*}}
// CHECK: %[[OWN:.*]] = arith.andi %[[ROUND]], %c1_i32{{[_0-9]*}}
// CHECK: %[[SHIFTED:.*]] = arith.shrui %arg1, %[[STAGE]]
// CHECK: %[[CARRIED:.*]] = arith.andi %[[SHIFTED]], %c1_i32{{[_0-9]*}}
// CHECK: %[[PARITY:.*]] = arith.xori %[[OWN]], %[[CARRIED]]
// CHECK: %[[PREVIOUS:.*]] = arith.xori %[[PARITY]], %c1_i32{{[_0-9]*}}
// CHECK: llvm.insertvalue %[[STAGE]], %{{.*}}[0]
// CHECK: llvm.insertvalue %[[PREVIOUS]], %{{.*}}[1]

// CHECK-LABEL: llvm.func @advance
// Stage 0: ceil(uses / 3) = (uses + 2) / 3 uses, its parity at bit 0.
// CHECK: %[[A0:.*]] = arith.addi %arg1, %c2_i32{{[_0-9]*}}
// CHECK: %[[U0:.*]] = arith.divui %[[A0]], %c3_i32{{[_0-9]*}}
// CHECK: %[[O0:.*]] = arith.andi %[[U0]], %c1_i32{{[_0-9]*}}
// CHECK: %[[F0:.*]] = arith.shli %[[O0]], %c0_i32{{[_0-9]*}}
// CHECK: %[[B0:.*]] = arith.xori %arg0, %[[F0]]
// Stage 1: (uses + 1) / 3 at bit 1; stage 2: uses / 3 at bit 2.
// CHECK: %[[A1:.*]] = arith.addi %arg1, %c1_i32{{[_0-9]*}}
// CHECK: %[[U1:.*]] = arith.divui %[[A1]], %c3_i32{{[_0-9]*}}
// CHECK: %[[F1:.*]] = arith.shli %{{.*}}, %c1_i32{{[_0-9]*}}
// CHECK: %[[B1:.*]] = arith.xori %[[B0]], %[[F1]]
// CHECK: %[[A2:.*]] = arith.addi %arg1, %c0_i32{{[_0-9]*}}
// CHECK: %[[U2:.*]] = arith.divui %[[A2]], %c3_i32{{[_0-9]*}}
// CHECK: %[[F2:.*]] = arith.shli %{{.*}}, %c2_i32{{[_0-9]*}}
// CHECK: %[[B2:.*]] = arith.xori %[[B1]], %[[F2]]
// CHECK: llvm.return %[[B2]]
module attributes {gpu.container_module} {
gpu.module @fa_kernels {
  llvm.mlir.global external @fa_smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
  llvm.func @consumer(%use: i32) -> !llvm.struct<(i32, i32)> {
    %kv = fagpu.create_pipeline {barrier_offset = 65536 : i64, tile_offset = 0 : i64} : !kv
    %stage, %parity = fagpu.pipeline_position %kv[%use] : !kv
    %u = llvm.mlir.undef : !llvm.struct<(i32, i32)>
    %a = llvm.insertvalue %stage, %u[0] : !llvm.struct<(i32, i32)>
    %r = llvm.insertvalue %parity, %a[1] : !llvm.struct<(i32, i32)>
    llvm.return %r : !llvm.struct<(i32, i32)>
  }
  llvm.func @persistent_producer(%use: i32, %bits: i32) -> !llvm.struct<(i32, i32)> {
    %kv = fagpu.create_pipeline {barrier_offset = 65536 : i64, tile_offset = 0 : i64} : !kv
    %stage, %parity = fagpu.pipeline_position %kv[%use] phases %bits producer : !kv
    %u = llvm.mlir.undef : !llvm.struct<(i32, i32)>
    %a = llvm.insertvalue %stage, %u[0] : !llvm.struct<(i32, i32)>
    %r = llvm.insertvalue %parity, %a[1] : !llvm.struct<(i32, i32)>
    llvm.return %r : !llvm.struct<(i32, i32)>
  }
  llvm.func @advance(%bits: i32, %uses: i32) -> i32 {
    %kv = fagpu.create_pipeline {barrier_offset = 65536 : i64, tile_offset = 0 : i64} : !kv
    %next = fagpu.pipeline_advance_phases %kv phases %bits after %uses : !kv
    llvm.return %next : i32
  }
}
}
