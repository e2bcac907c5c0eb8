// RUN: fa-opt %s --split-input-file --verify-diagnostics

// score_mod and mask_mod at the fagpu level: what the sm_90a kernel can
// evaluate (fagpu::verifyModificationRegions), each refusal by name.

#s = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 24, consumer_registers = 240, stages = 2, ping_pong = true, overlap_softmax = true, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
func.func @sin(%q: memref<?x?x?x128xf16>) {
  fagpu.attention %q, %q, %q outs(%q) {target = #fagpu.target<sm_90a>, scale = 0.125 : f32, schedule = #s}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>
    score_mod {
    ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
      // expected-error @+1 {{'math.sin' op in score_mod has no sm_90a lowering (arith ops and math.tanh, math.exp, math.exp2, math.log, math.log2, math.absf, math.sqrt and math.fma of f32, and reads of captures)}}
      %r = math.sin %x : f32
      fagpu.yield %r : f32
    }
  return
}

// -----

#s = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 24, consumer_registers = 240, stages = 2, ping_pong = true, overlap_softmax = true, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
func.func @f64_exp(%q: memref<?x?x?x128xf16>) {
  fagpu.attention %q, %q, %q outs(%q) {target = #fagpu.target<sm_90a>, scale = 0.125 : f32, schedule = #s}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>
    score_mod {
    ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
      %w = arith.extf %x : f32 to f64
      // expected-error @+1 {{'math.exp' op in score_mod has no sm_90a lowering}}
      %e = math.exp %w : f64
      %r = arith.truncf %e : f64 to f32
      fagpu.yield %r : f32
    }
  return
}

// -----

#s = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 24, consumer_registers = 240, stages = 2, ping_pong = true, overlap_softmax = true, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
func.func @mask_args(%q: memref<?x?x?x128xf16>) {
  // expected-error @+1 {{expected mask_mod's block arguments to be (index, index, index, index), got (f32, index, index, index, index)}}
  fagpu.attention %q, %q, %q outs(%q) {target = #fagpu.target<sm_90a>, scale = 0.125 : f32, schedule = #s}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>
    mask_mod {
    ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
      %c = arith.cmpi sge, %i, %j : index
      fagpu.yield %c : i1
    }
  return
}

// -----

#s = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 24, consumer_registers = 240, stages = 2, ping_pong = true, overlap_softmax = true, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
func.func @score_yields_i1(%q: memref<?x?x?x128xf16>) {
  // expected-error @+1 {{expected score_mod to end in fagpu.yield of one 'f32'}}
  fagpu.attention %q, %q, %q outs(%q) {target = #fagpu.target<sm_90a>, scale = 0.125 : f32, schedule = #s}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>
    score_mod {
    ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index):
      %c = arith.cmpi sge, %i, %j : index
      fagpu.yield %c : i1
    }
  return
}

// -----

#fp8s = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 0, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
func.func @e4m3(%q: memref<1x1x64x128xf8E4M3FN>, %o: memref<1x1x64x128xf16>, %d: memref<f32>) {
  // Every target's 16-bit kernel evaluates the regions; no e4m3 one does.
  // expected-error @+1 {{score_mod and mask_mod have a kernel with 16-bit Q, K and V only}}
  fagpu.attention %q, %q, %q descale(%d, %d, %d : memref<f32>, memref<f32>, memref<f32>) outs(%o) {target = #fagpu.target<sm_90a>, scale = 1.0 : f32, probs_scale = 256.0 : f32, schedule = #fp8s}
    : memref<1x1x64x128xf8E4M3FN>, memref<1x1x64x128xf8E4M3FN>, memref<1x1x64x128xf8E4M3FN>, memref<1x1x64x128xf16>
    mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %c = arith.cmpi sge, %i, %j : index
      fagpu.yield %c : i1
    }
  return
}

// -----

!rows = !fagpu.fragment<64xf32, rows>
func.func @modify_rows(%s: !rows, %k: i32, %scale: f32) -> !rows {
  // expected-error @+1 {{expected scores in the accumulator layout}}
  %r = fagpu.modify_scores %s keys(%k) rows(%k) batch(%k) head(%k) scale(%scale) : !rows
  return %r : !rows
}

// -----

!acc = !fagpu.fragment<64x128xf32, accumulator>
func.func @modify_softcap(%s: !acc, %k: i32, %scale: f32) -> !acc {
  // expected-error @+1 {{softcap must be positive}}
  %r = fagpu.modify_scores %s keys(%k) rows(%k) batch(%k) head(%k) scale(%scale) {softcap = 0.0 : f32} : !acc
  return %r : !acc
}

// -----

func.func @yield_outside() {
  %c = arith.constant 1.0 : f32
  // expected-error @+1 {{'fagpu.yield' op expects parent op to be one of 'fagpu.attention, fagpu.modify_scores'}}
  fagpu.yield %c : f32
}

// -----

#s = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 24, consumer_registers = 240, stages = 2, ping_pong = true, overlap_softmax = true, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
func.func @captures_without_regions(%q: memref<?x?x?x128xf16>, %c: memref<4xf32>) {
  // expected-error @+1 {{expected captures only with a score_mod or mask_mod region that reads them}}
  fagpu.attention %q, %q, %q captures(%c : memref<4xf32>) outs(%q) {target = #fagpu.target<sm_90a>, scale = 0.125 : f32, schedule = #s}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>
  return
}

// -----

#s = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 24, consumer_registers = 240, stages = 2, ping_pong = true, overlap_softmax = true, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
func.func @capture_of_i1(%q: memref<?x?x?x128xf16>, %c: memref<4xi1>) {
  // expected-error @+1 {{a capture's elements must be f32, f16, bf16, i8, i32 or i64, got 'memref<4xi1>'}}
  fagpu.attention %q, %q, %q captures(%c : memref<4xi1>) outs(%q) {target = #fagpu.target<sm_90a>, scale = 0.125 : f32, schedule = #s}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>
    mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index, %m: tensor<4xi1>):
      %v = tensor.extract %m[%h] : tensor<4xi1>
      fagpu.yield %v : i1
    }
  return
}

// -----

func.func @sinks_on_sm80(%q: memref<?x?x?x64xf16>, %s: memref<?xf32>) {
  // expected-error @+1 {{attention sinks have a kernel on sm_90a with a 16-bit Q only}}
  fagpu.attention %q, %q, %q sinks(%s : memref<?xf32>) outs(%q) {target = #fagpu.target<sm_80>, scale = 0.125 : f32,
      schedule = #fagpu.schedule<block_r = 128, block_c = 64, consumers = 0, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 2, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>}
    : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>
  return
}

// -----

!acc = !fagpu.fragment<64x128xf32, accumulator>
func.func @capture_reads_need_bounds(%s: !acc, %k: i32, %scale: f32, %p: !llvm.ptr<1>) -> !acc {
  // expected-error @+1 {{captures need within(%nq, %nk): the regions' indices are clamped to the sequence}}
  %r = fagpu.modify_scores %s keys(%k) rows(%k) batch(%k) head(%k) scale(%scale) captures(%p : !llvm.ptr<1>) : !acc
    mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index, %d: tensor<8xi32>):
      %di = tensor.extract %d[%i] : tensor<8xi32>
      %dj = tensor.extract %d[%j] : tensor<8xi32>
      %same = arith.cmpi eq, %di, %dj : i32
      fagpu.yield %same : i1
    }
  return %r : !acc
}

// -----

!acc = !fagpu.fragment<64x128xf32, accumulator>
func.func @capture_pointer_count(%s: !acc, %k: i32, %scale: f32) -> !acc {
  // expected-error @+1 {{expected one pointer of captures(...) per tensor argument of the regions, got 0 for 1}}
  %r = fagpu.modify_scores %s keys(%k) rows(%k) batch(%k) head(%k) scale(%scale) within(%k, %k) : !acc
    mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index, %d: tensor<8xi32>):
      %di = tensor.extract %d[%i] : tensor<8xi32>
      %zero = arith.constant 0 : i32
      %ok = arith.cmpi sge, %di, %zero : i32
      fagpu.yield %ok : i1
    }
  return %r : !acc
}
