// RUN: fa-opt %s --fa-lower-fa1 --canonicalize --cse | FileCheck %s --check-prefix=FA1

// Attention sinks in FlashAttention-1's loop order (lower-sinks.mlir has
// FA2's): each query block's state starts with its head's sink.

// The state in memory starts with the sink too: m and l of every
// query block of the head are copied from the tiles the sink started.
// FA1-LABEL: func.func @causal
// FA1-SAME: %[[S:[a-z0-9]+]]: memref<4xf32>
// FA1: scf.forall (%[[H:.*]]) in (4)
// FA1: %[[SINK:.*]] = memref.load %[[S]][%[[H]]] : memref<4xf32>
// FA1: fa.init_state %[[M:.*]], %[[L:[a-z0-9_]+]], %{{.*}} sink(%[[SINK]])
// FA1: scf.for
// FA1: linalg.copy ins(%{{.*}} : memref<?xf32, strided<[1]>>) outs(%{{.*}} : memref<?xf32, strided<[1], offset: ?>>)
// FA1: linalg.copy ins(%{{.*}} : memref<?xf32, strided<[1]>>) outs(%{{.*}} : memref<?xf32, strided<[1], offset: ?>>)
// FA1: scf.for
// FA1: fa.softmax_update
func.func @causal(%q: memref<1x4x77x64xf32>, %k: memref<1x2x131x64xf32>, %s: memref<4xf32>, %o: memref<1x4x77x64xf32>, %l: memref<1x4x77xf32>) {
  fa.attention %q, %k, %k sinks(%s : memref<4xf32>) outs(%o, %l : memref<1x4x77x64xf32>, memref<1x4x77xf32>) {causal, block_r = 32 : i64, block_c = 64 : i64}
      : memref<1x4x77x64xf32>, memref<1x2x131x64xf32>, memref<1x2x131x64xf32>
  return
}

