// RUN: fa-opt %s --split-input-file --fagpu-build-kernels -verify-diagnostics | FileCheck %s

// fagpu-build-kernels with score_mod and mask_mod: before each block's
// softmax step, fagpu.modify_scores evaluates the attention's regions on
// the block's scores with the tile's batch and query head, the thread's
// row and the block's first key, at the kernel's scale_log2 and with the
// softcap (FlexAttention's order: scale, softcap, score_mod, mask); the
// step then takes the natural-unit scores at a scale of log2(e) (raw ones,
// with a mask alone, at the kernel's) and applies no softcap.
// The kernel's name carries a hash of the regions.

// CHECK-LABEL: func.func @mods
// CHECK: gpu.launch_func @fa_kernels::@[[NAME:fa3_sm90_d128_br128_bc128_s2_f16_stg_mod[0-9a-f]{16}_sc30]]
// CHECK: llvm.func @[[NAME]](
// CHECK-SAME: %[[SCALE:arg9]]: f32
// CHECK: %[[S:.*]] = fagpu.modify_scores %{{.*}} keys(%[[KEY:.*]]) rows(%[[ROW:.*]]) batch(%{{.*}}) head(%{{.*}}) scale(%[[SCALE]]) {softcap = 3.000000e+01 : f32} : <64x128xf32, accumulator> score_mod {
// CHECK-NEXT: ^bb0(%{{.*}}: f32, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index):
// CHECK: fagpu.yield %{{.*}} : f32
// CHECK-NEXT: } mask_mod {
// CHECK: fagpu.yield %{{.*}} : i1
// CHECK: %[[LOG2E:.*]] = arith.constant 1.44269502 : f32
// CHECK: fagpu.softmax_step %[[S]], %{{.*}}, %{{.*}} keys(%[[KEY]], %{{.*}}) row %[[ROW]] scale %[[LOG2E]] {masked} :
// The loop's blocks too, then the masked tail.
// CHECK: scf.for
// CHECK: %[[SJ:.*]] = fagpu.modify_scores
// CHECK: fagpu.softmax_step %[[SJ]], {{.*}} scale %{{[^ ]*}} :
// CHECK: scf.for
// CHECK: %[[SM:.*]] = fagpu.modify_scores
// CHECK: fagpu.softmax_step %[[SM]], {{.*}} {masked} :
// CHECK-NOT: softcap
#s = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 24, consumer_registers = 240, stages = 2, ping_pong = true, overlap_softmax = true, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
func.func @mods(%q: memref<?x?x?x128xf16>, %k: memref<?x?x?x128xf16>, %v: memref<?x?x?x128xf16>, %o: memref<?x?x?x128xf16>, %lse: memref<?x?x?xf32>) {
  fagpu.attention %q, %k, %v outs(%o, %lse) {target = #fagpu.target<sm_90a>, scale = 0.125 : f32, softcap = 30.0 : f32, schedule = #s}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?xf32>
    score_mod {
    ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
      %hi = arith.index_cast %h : index to i32
      %hf = arith.sitofp %hi : i32 to f32
      %r = arith.addf %x, %hf : f32
      fagpu.yield %r : f32
    } mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %c = arith.cmpi sge, %i, %j : index
      fagpu.yield %c : i1
    }
  return
}

// -----

// Two attentions with the same regions share a kernel; other regions get
// their own.
#s = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 24, consumer_registers = 240, stages = 2, ping_pong = true, overlap_softmax = true, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
// CHECK-LABEL: func.func @shared
// CHECK: gpu.launch_func @fa_kernels::@[[A:fa3_sm90_d128_br128_bc128_s2_f16_stg_mod[0-9a-f]{16}]]
// CHECK: gpu.launch_func @fa_kernels::@[[A]]
// CHECK-NOT: gpu.launch_func @fa_kernels::@[[A]]
// CHECK: gpu.launch_func @fa_kernels::@fa3_sm90_d128_br128_bc128_s2_f16_stg_mod
// CHECK-COUNT-2: llvm.func @fa3_sm90
// CHECK-NOT: llvm.func @fa3_sm90
func.func @shared(%q: memref<?x?x?x128xf16>, %o: memref<?x?x?x128xf16>, %lse: memref<?x?x?xf32>) {
  fagpu.attention %q, %q, %q outs(%o, %lse) {target = #fagpu.target<sm_90a>, scale = 0.125 : f32, schedule = #s}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?xf32>
    mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %c = arith.cmpi sge, %i, %j : index
      fagpu.yield %c : i1
    }
  fagpu.attention %q, %q, %q outs(%o, %lse) {target = #fagpu.target<sm_90a>, scale = 0.125 : f32, schedule = #s}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?xf32>
    mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %c = arith.cmpi sge, %i, %j : index
      fagpu.yield %c : i1
    }
  fagpu.attention %q, %q, %q outs(%o, %lse) {target = #fagpu.target<sm_90a>, scale = 0.125 : f32, schedule = #s}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?xf32>
    mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %c = arith.cmpi sgt, %i, %j : index
      fagpu.yield %c : i1
    }
  return
}

// -----

// Packed query heads give a row another head than the tile's: refused.
#s = #fagpu.schedule<block_r = 64, block_c = 64, consumers = 1, ctas_per_sm = 2, producer_registers = 24, consumer_registers = 232, stages = 2, ping_pong = false, overlap_softmax = true, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false, query_group = 4>
func.func @query_group(%q: memref<?x?x?x128xf16>, %o: memref<?x?x?x128xf16>, %lse: memref<?x?x?xf32>) {
  // expected-error @+1 {{score_mod and mask_mod see each row's query head: packed query heads (query_group) have no form for them}}
  fagpu.attention %q, %q, %q outs(%o, %lse) {target = #fagpu.target<sm_90a>, scale = 0.125 : f32, schedule = #s}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?xf32>
    mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %c = arith.cmpi sge, %i, %j : index
      fagpu.yield %c : i1
    }
  return
}

// -----

// Captures: each is a pointer parameter after the attention's own
// (capture0: f32 [4]); fagpu.modify_scores takes the kernel's pointers and
// the tile's query and key counts, to which it clamps the indices.
#s = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 24, consumer_registers = 240, stages = 2, ping_pong = true, overlap_softmax = true, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
// CHECK-LABEL: func.func @captures
// CHECK-SAME: %[[SLOPES:[a-z0-9]+]]: memref<4xf32>
// CHECK: memref.extract_aligned_pointer_as_index %[[SLOPES]]
// CHECK: %[[PTR:.*]] = llvm.inttoptr %{{.*}} : i64 to !llvm.ptr<1>
// CHECK: gpu.launch_func @fa_kernels::@{{.*}}_mod{{[0-9a-f]+}} {{.*}} args({{.*}}, %[[PTR]] : !llvm.ptr<1>)
// CHECK: llvm.func @fa3_sm90{{.*}}(%arg0: {{.*}}, %[[CAP:arg[0-9]+]]: !llvm.ptr<1> {llvm.noalias})
// CHECK-SAME: {dtype = "f32", kind = "pointer", name = "capture0", shape = ["4"]}]
// CHECK: fagpu.modify_scores {{.*}} within(%{{.*}}, %{{.*}}) captures(%[[CAP]] : !llvm.ptr<1>)
// CHECK: ^bb0(%{{.*}}: f32, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: tensor<4xf32>):
func.func @captures(%q: memref<?x?x?x128xf16>, %o: memref<?x?x?x128xf16>, %lse: memref<?x?x?xf32>, %slopes: memref<4xf32>) {
  fagpu.attention %q, %q, %q captures(%slopes : memref<4xf32>) outs(%o, %lse) {target = #fagpu.target<sm_90a>, scale = 0.125 : f32, schedule = #s}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?xf32>
    score_mod {
    ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index, %m: tensor<4xf32>):
      %slope = tensor.extract %m[%h] : tensor<4xf32>
      %r = arith.addf %x, %slope : f32
      fagpu.yield %r : f32
    }
  return
}

// -----

// Block sparsity from a mask_mod at run time: the kernel takes `key_ranges`
// (i32 [B, Hq, query tiles, 4]) after its own parameters, and a host launch
// passes a null pointer. Where a launch gives the ranges, each role
// narrows the tile's K/V blocks to those meeting [first key, end key) of
// its (batch, head, query tile) entry, in the same scf.if, so that every
// role agrees on the range; without them the tile keeps its own. The
// consumers also read [full first, full end) (the producer does not), and
// split their unmasked blocks in three loops: the middle one, the whole
// blocks of the full keys, steps the softmax without the mask_mod.
#s = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 24, consumer_registers = 240, stages = 2, ping_pong = true, overlap_softmax = true, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
// CHECK-LABEL: func.func @key_ranges
// CHECK: %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr<1>
// CHECK: gpu.launch_func @fa_kernels::@{{.*}}_mod{{[0-9a-f]+}} {{.*}} args({{.*}}, %[[NULL]] : !llvm.ptr<1>)
// CHECK: llvm.func @fa3_sm90{{.*}}, %[[RANGES:arg[0-9]+]]: !llvm.ptr<1> {llvm.noalias})
// CHECK-SAME: {dtype = "i32", kind = "pointer", name = "key_ranges", shape = ["B", "Hq", "ceil(Nq / block_r)", "4"]}]
// The producer: the hull only (two loads).
// CHECK: %[[ADDRESS:.*]] = llvm.ptrtoint %[[RANGES]] : !llvm.ptr<1> to i64
// CHECK: %[[GIVEN:.*]] = arith.cmpi ne, %[[ADDRESS]], %{{.*}} : i64
// CHECK: %{{.*}}:5 = scf.if %[[GIVEN]] -> (i32, i32, i32, i32, i32) {
// CHECK-COUNT-2: llvm.load
// CHECK-NOT: llvm.load
// CHECK: } else {
// The consumers: the hull and the full keys (four loads).
// CHECK: llvm.ptrtoint %[[RANGES]]
// CHECK: %[[TILE:.*]]:5 = scf.if %{{.*}} -> (i32, i32, i32, i32, i32) {
// CHECK-COUNT-4: llvm.load
// CHECK: } else {
// The unmasked blocks before, within and after the full ones, then the
// masked tail: only the third loop steps without the mask_mod.
// CHECK: scf.for
// CHECK: fagpu.modify_scores {{.*}} mask_mod {
// CHECK: scf.for
// CHECK-NOT: fagpu.modify_scores
// CHECK: fagpu.softmax_step
// CHECK: scf.for
// CHECK: fagpu.modify_scores {{.*}} mask_mod {
// CHECK: scf.for
// CHECK: fagpu.modify_scores {{.*}} mask_mod {
func.func @key_ranges(%q: memref<?x?x?x128xf16>, %o: memref<?x?x?x128xf16>, %lse: memref<?x?x?xf32>) {
  fagpu.attention %q, %q, %q outs(%o, %lse) {target = #fagpu.target<sm_90a>, scale = 0.125 : f32, schedule = #s}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?xf32>
    mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %c = arith.cmpi sge, %i, %j : index
      fagpu.yield %c : i1
    }
  return
}
