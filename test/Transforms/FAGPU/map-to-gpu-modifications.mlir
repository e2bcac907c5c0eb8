// RUN: fa-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(fagpu-tile{target=sm_90a},fa-lower-fa2,fa-map-to-gpu{target=sm_90a}))" -verify-diagnostics | FileCheck %s
// RUN: fa-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(fagpu-tile{target=sm_80},fa-lower-fa2,fa-map-to-gpu{target=sm_80}))" -verify-diagnostics | FileCheck %s --check-prefix=SM80
// RUN: fa-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(fagpu-tile{target=sm_100a},fa-lower-fa2,fa-map-to-gpu{target=sm_100a}))" -verify-diagnostics | FileCheck %s --check-prefix=SM100

// fa-map-to-gpu carries score_mod and mask_mod from the score tile onto
// fagpu.attention (the sm_90a, sm_80 and sm_100a kernels evaluate them on
// every score):
// each block as it was, ending in fagpu.yield, with arith's floor and ceil
// divisions expanded into the ops LLVM lowers. Regions it has no kernel
// for are refused by name.

// CHECK-LABEL: func.func @documents
// CHECK: fagpu.attention
// CHECK-SAME: target = #fagpu.target<sm_90a>
// CHECK: mask_mod {
// CHECK: ^bb0(%{{.*}}: index, %{{.*}}: index, %[[I:.*]]: index, %[[J:.*]]: index):
// CHECK-NOT: arith.floordivsi
// CHECK: arith.divsi %[[I]]
// CHECK: arith.cmpi sge, %[[I]], %[[J]] : index
// CHECK: fagpu.yield %{{.*}} : i1
// CHECK-NEXT: }
// SM80-LABEL: func.func @documents
// SM80: fagpu.attention
// SM80-SAME: target = #fagpu.target<sm_80>
// SM80: mask_mod {
// SM80: fagpu.yield %{{.*}} : i1
// SM100-LABEL: func.func @documents
// SM100: fagpu.attention
// SM100-SAME: target = #fagpu.target<sm_100a>
// SM100: mask_mod {
// SM100: fagpu.yield %{{.*}} : i1
func.func @documents(%q: memref<1x4x256x128xf16>, %o: memref<1x4x256x128xf16>) {
  fa.attention %q, %q, %q outs(%o : memref<1x4x256x128xf16>) {scale = 0.125 : f32}
      : memref<1x4x256x128xf16>, memref<1x4x256x128xf16>, memref<1x4x256x128xf16>
    mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %n = arith.constant 96 : index
      %di = arith.floordivsi %i, %n : index
      %dj = arith.floordivsi %j, %n : index
      %same = arith.cmpi eq, %di, %dj : index
      %c = arith.cmpi sge, %i, %j : index
      %vis = arith.andi %same, %c : i1
      fa.yield %vis : i1
    }
  return
}

// -----

// CHECK-LABEL: func.func @alibi
// CHECK: fagpu.attention
// CHECK: score_mod {
// CHECK: ^bb0(%[[S:.*]]: f32, %{{.*}}: index, %[[H:.*]]: index, %{{.*}}: index, %{{.*}}: index):
// CHECK: arith.index_cast %[[H]]
// CHECK: math.exp2
// CHECK: arith.addf %[[S]]
// CHECK: fagpu.yield %{{.*}} : f32
func.func @alibi(%q: memref<1x4x256x128xf16>, %o: memref<1x4x256x128xf16>) {
  fa.attention %q, %q, %q outs(%o : memref<1x4x256x128xf16>) {scale = 0.125 : f32}
      : memref<1x4x256x128xf16>, memref<1x4x256x128xf16>, memref<1x4x256x128xf16>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      %hi = arith.index_cast %h : index to i32
      %hf = arith.sitofp %hi : i32 to f32
      %e = math.exp2 %hf : f32
      %r = arith.addf %s, %e : f32
      fa.yield %r : f32
    }
  return
}

// -----

// A math op the kernel has no lowering for.
func.func @sin(%q: memref<1x4x256x128xf16>, %o: memref<1x4x256x128xf16>) {
  // expected-error @+1 {{fa-map-to-gpu: the GPU kernel has no lowering for math.sin in a score_mod or mask_mod (it lowers arith ops and math.tanh, math.exp, math.exp2, math.log, math.log2, math.absf, math.sqrt and math.fma of f32, and reads of captures)}}
  fa.attention %q, %q, %q outs(%o : memref<1x4x256x128xf16>) {scale = 0.125 : f32}
      : memref<1x4x256x128xf16>, memref<1x4x256x128xf16>, memref<1x4x256x128xf16>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      %r = math.sin %s : f32
      fa.yield %r : f32
    }
  return
}

// -----

// Captured tensors (per-head slopes here) become fagpu.attention's
// captures, the function's memrefs the kernel reads.
// CHECK-LABEL: func.func @captures
// CHECK-SAME: %[[SLOPES:[a-z0-9]+]]: memref<4xf32>)
// CHECK: fagpu.attention {{.*}} captures(%[[SLOPES]] : memref<4xf32>) outs(
// CHECK: score_mod {
// CHECK: ^bb0(%{{.*}}: f32, %{{.*}}: index, %[[H:.*]]: index, %{{.*}}: index, %{{.*}}: index, %[[M:.*]]: tensor<4xf32>):
// CHECK: tensor.extract %[[M]][%[[H]]] : tensor<4xf32>
func.func @captures(%q: memref<1x4x256x128xf16>, %o: memref<1x4x256x128xf16>, %slopes: memref<4xf32>) {
  fa.attention %q, %q, %q captures(%slopes : memref<4xf32>) outs(%o : memref<1x4x256x128xf16>) {scale = 0.125 : f32}
      : memref<1x4x256x128xf16>, memref<1x4x256x128xf16>, memref<1x4x256x128xf16>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %m: tensor<4xf32>):
      %slope = tensor.extract %m[%h] : tensor<4xf32>
      %r = arith.addf %s, %slope : f32
      fa.yield %r : f32
    }
  return
}

// -----

// The kernel reads a capture as a contiguous array of static shape.
func.func @dynamic_capture(%q: memref<1x4x256x128xf16>, %o: memref<1x4x256x128xf16>, %ids: memref<?xi32>) {
  // expected-error @+1 {{fa-map-to-gpu: the GPU kernel reads captures as arrays: a capture must have a static shape (the CPU pipeline runs any: fa-cpu-pipeline)}}
  fa.attention %q, %q, %q captures(%ids : memref<?xi32>) outs(%o : memref<1x4x256x128xf16>) {scale = 0.125 : f32}
      : memref<1x4x256x128xf16>, memref<1x4x256x128xf16>, memref<1x4x256x128xf16>
    mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index, %d: tensor<?xi32>):
      %di = tensor.extract %d[%i] : tensor<?xi32>
      %dj = tensor.extract %d[%j] : tensor<?xi32>
      %same = arith.cmpi eq, %di, %dj : i32
      fa.yield %same : i1
    }
  return
}
