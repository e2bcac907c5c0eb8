// RUN: fa-opt %s --split-input-file --fa-lower-fa2 --canonicalize --cse | FileCheck %s
// RUN: fa-opt %s --split-input-file --fa-lower-fa2-backward="block-r=32 block-c=64" --canonicalize --cse | FileCheck %s --check-prefix=BWD

// Attention sinks in the loop orders: each query block's state starts with
// its head's sink (fa.init_state ... sink), so the online softmax carries
// it into l and the LSE like a key.

// FlashAttention-2: the sink of head h, loaded once per query block.
// CHECK-LABEL: func.func @causal
// CHECK-SAME: %[[S:[a-z0-9]+]]: memref<4xf32>
// CHECK: scf.forall (%[[H:.*]], %{{.*}}) in (4, 3)
// CHECK: %[[SINK:.*]] = memref.load %[[S]][%[[H]]] : memref<4xf32>
// CHECK: fa.init_state %{{.*}}, %{{.*}}, %{{.*}} sink(%[[SINK]])
// CHECK: scf.for
// CHECK: fa.score_tile
// CHECK: fa.normalize
// CHECK: fa.logsumexp

func.func @causal(%q: memref<1x4x77x64xf32>, %k: memref<1x2x131x64xf32>, %s: memref<4xf32>, %o: memref<1x4x77x64xf32>, %l: memref<1x4x77xf32>) {
  fa.attention %q, %k, %k sinks(%s : memref<4xf32>) outs(%o, %l : memref<1x4x77x64xf32>, memref<1x4x77xf32>) {causal, block_r = 32 : i64, block_c = 64 : i64}
      : memref<1x4x77x64xf32>, memref<1x2x131x64xf32>, memref<1x2x131x64xf32>
  return
}

// -----

// Split-KV: the sink joins once, in the first chunk; the others start
// with -inf (no sink), and the merge counts it once.
// CHECK-LABEL: func.func @split
// CHECK-SAME: %[[S:[a-z0-9]+]]: memref<4xf32>
// CHECK: %[[NONE:.*]] = arith.constant 0xFF800000 : f32
// CHECK: scf.forall (%[[H:.*]], %[[CHUNK:.*]]) in (4, 3)
// CHECK: %[[SINK:.*]] = memref.load %[[S]][%[[H]]] : memref<4xf32>
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[CHUNK]], %c0 : index
// CHECK: %[[THIS:.*]] = arith.select %[[FIRST]], %[[SINK]], %[[NONE]] : f32
// CHECK: fa.init_state %{{.*}}, %{{.*}}, %{{.*}} sink(%[[THIS]])
// CHECK: fa.merge_partials
func.func @split(%q: memref<1x4x2x64xf32>, %k: memref<1x2x300x64xf32>, %s: memref<4xf32>, %o: memref<1x4x2x64xf32>) {
  fa.attention %q, %k, %k sinks(%s : memref<4xf32>) outs(%o : memref<1x4x2x64xf32>) {block_r = 16 : i64, block_c = 64 : i64, kv_splits = 3 : i64}
      : memref<1x4x2x64xf32>, memref<1x2x300x64xf32>, memref<1x2x300x64xf32>
  return
}

// -----

// The backward: after D = rowsum(dO o O), dsinks[h] sums fa.grad_sink over
// the batch and the query blocks of head h (heads in parallel).
// BWD-LABEL: func.func @backward
// BWD-SAME: %[[L:[a-z0-9]+]]: memref<2x4x77xf32>, %[[S:[a-z0-9]+]]: memref<4xf32>, %[[DS:[a-z0-9]+]]: memref<4xf32>
// BWD: fa.row_dot
// BWD: scf.forall (%[[H:.*]]) in (4)
// BWD: %[[SINK:.*]] = memref.load %[[S]][%[[H]]] : memref<4xf32>
// BWD: %[[SUM:.*]] = scf.for %[[B:.*]] = %c0 to %c2 step %c1 iter_args(%[[ACC:.*]] = %cst)
// BWD: scf.for %{{.*}} = %c0 to %c3 step %c1 iter_args(%[[INNER:.*]] = %[[ACC]])
// BWD: %[[PART:.*]] = fa.grad_sink %[[SINK]], %{{.*}}, %{{.*}}
// BWD: arith.addf %[[INNER]], %[[PART]] : f32
// BWD: memref.store %[[SUM]], %[[DS]][%[[H]]] : memref<4xf32>
// BWD: fa.recompute_probs
func.func @backward(%q: memref<2x4x77x64xf32>, %k: memref<2x2x131x64xf32>, %l: memref<2x4x77xf32>, %s: memref<4xf32>, %ds: memref<4xf32>) {
  fa.attention_backward %q, %k, %k, %q, %l, %q sinks(%s : memref<4xf32>)
      outs(%q, %k, %k, %ds : memref<2x4x77x64xf32>, memref<2x2x131x64xf32>, memref<2x2x131x64xf32>, memref<4xf32>) {causal}
      : memref<2x4x77x64xf32>, memref<2x2x131x64xf32>, memref<2x2x131x64xf32>, memref<2x4x77x64xf32>, memref<2x4x77xf32>, memref<2x4x77x64xf32>
  return
}
