// RUN: fa-opt %s --split-input-file | fa-opt --split-input-file | FileCheck %s
// RUN: fa-opt %s --split-input-file --canonicalize | FileCheck %s --check-prefix=CANON

// Round trip of fagpu.attention's score_mod and mask_mod (FlexAttention's
// regions, copied from fa.attention by fa-map-to-gpu) and of the op that
// evaluates them in the kernel, fagpu.modify_scores.

#s = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 24, consumer_registers = 240, stages = 2, ping_pong = true, overlap_softmax = true, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
// CHECK-LABEL: func @alibi_prefix
// CHECK: fagpu.attention
// CHECK: score_mod {
// CHECK: ^bb0(%{{.*}}: f32, %{{.*}}: index, %{{.*}}: index, %[[I:.*]]: index, %[[J:.*]]: index):
// CHECK: arith.subi %[[J]], %[[I]] : index
// CHECK: fagpu.yield %{{.*}} : f32
// CHECK: } mask_mod {
// CHECK: fagpu.yield %{{.*}} : i1
// The regions are isolated from above: canonicalisation keeps their
// constants inside.
// CANON-LABEL: func @alibi_prefix
// CANON: score_mod {
// CANON: arith.constant 1.250000e-01 : f32
// CANON: fagpu.yield
func.func @alibi_prefix(%q: memref<?x?x?x128xf16>, %o: memref<?x?x?x128xf16>) {
  fagpu.attention %q, %q, %q outs(%o) {target = #fagpu.target<sm_90a>, scale = 0.125 : f32, schedule = #s}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      %d = arith.subi %j, %i : index
      %di = arith.index_cast %d : index to i32
      %df = arith.sitofp %di : i32 to f32
      %slope = arith.constant 0.125 : f32
      %bias = arith.mulf %slope, %df : f32
      %r = arith.addf %s, %bias : f32
      fagpu.yield %r : f32
    } mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %c = arith.cmpi sge, %i, %j : index
      %p = arith.constant 64 : index
      %prefix = arith.cmpi slt, %j, %p : index
      %vis = arith.ori %c, %prefix : i1
      fagpu.yield %vis : i1
    }
  return
}

// -----

!acc = !fagpu.fragment<64x128xf32, accumulator>
// CHECK-LABEL: func @modify
// CHECK: fagpu.modify_scores %{{.*}} keys(%{{.*}}) rows(%{{.*}}) batch(%{{.*}}) head(%{{.*}}) scale(%{{.*}}) {softcap = 3.000000e+01 : f32} : <64x128xf32, accumulator> score_mod {
// CHECK: math.tanh
// CHECK: fagpu.yield %{{.*}} : f32
// CHECK: } mask_mod {
// CHECK: fagpu.yield %{{.*}} : i1
func.func @modify(%s: !acc, %key: i32, %row: i32, %b: i32, %h: i32, %scale: f32) -> !acc {
  %r = fagpu.modify_scores %s keys(%key) rows(%row) batch(%b) head(%h) scale(%scale) {softcap = 30.0 : f32} : !acc
    score_mod {
    ^bb0(%x: f32, %bi: index, %hi: index, %i: index, %j: index):
      %t = math.tanh %x : f32
      fagpu.yield %t : f32
    } mask_mod {
    ^bb0(%bi: index, %hi: index, %i: index, %j: index):
      %c = arith.cmpi sge, %i, %j : index
      fagpu.yield %c : i1
    }
  return %r : !acc
}
