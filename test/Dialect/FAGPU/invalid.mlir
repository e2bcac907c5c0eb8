// RUN: fa-opt %s --split-input-file --verify-diagnostics

#s = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 24, consumer_registers = 240, stages = 2, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 2, epilogue = registers, q_in_registers = false>
func.func @q_buffers_need_persistence(%q: memref<1x1x64x64xf16>) {
  // expected-error @+1 {{a second Q buffer (cross-tile pipeline) needs a persistent tile scheduler}}
  fagpu.attention %q, %q, %q outs(%q) {target = #fagpu.target<sm_90a>, scale = 1.0 : f32, schedule = #s}
    : memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x64xf16>
  return
}

// -----

#s = #fagpu.schedule<block_r = 64, block_c = 128, consumers = 1, ctas_per_sm = 2, producer_registers = 24, consumer_registers = 232, stages = 2, ping_pong = true, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
func.func @ping_pong_needs_two(%q: memref<1x1x64x64xf16>) {
  // expected-error @+1 {{ping-pong needs at least two consumer warpgroups, got 1}}
  fagpu.attention %q, %q, %q outs(%q) {target = #fagpu.target<sm_90a>, scale = 1.0 : f32, schedule = #s}
    : memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x64xf16>
  return
}

// -----

#s = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 240, stages = 2, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
func.func @budget_without_roles(%q: memref<1x1x64x64xf16>) {
  // expected-error @+1 {{consumer_registers without producer_registers}}
  fagpu.attention %q, %q, %q outs(%q) {target = #fagpu.target<sm_90a>, scale = 1.0 : f32, schedule = #s}
    : memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x64xf16>
  return
}

// -----

#s = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 0, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
func.func @value_dim(%q: memref<1x1x64x64xf16>, %o: memref<1x1x64x128xf16>) {
  // expected-error @+1 {{expected out's head dim to be v's (64), got 128}}
  fagpu.attention %q, %q, %q outs(%o) {target = #fagpu.target<sm_90a>, scale = 1.0 : f32, schedule = #s}
    : memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x128xf16>
  return
}

// -----

#s = #fagpu.schedule<block_r = 0, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 0, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
func.func @tiles(%q: memref<1x1x64x64xf16>) {
  // expected-error @+1 {{schedule: expected block_r in [1, 1048576], got 0}}
  fagpu.attention %q, %q, %q outs(%q) {target = #fagpu.target<sm_90a>, scale = 1.0 : f32, schedule = #s}
    : memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x64xf16>
  return
}

// -----

func.func @bad_field(%q: memref<1x1x64x64xf16>) {
  // expected-error @+1 {{expected true or false for 'ping_pong'}}
  fagpu.attention %q, %q, %q outs(%q) {target = #fagpu.target<sm_90a>, scale = 1.0 : f32, schedule = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 0, ping_pong = maybe, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>}
    : memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x64xf16>
  return
}

// -----

#fp8s = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 0, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
func.func @fp8_without_descales(%q: memref<1x1x64x128xf8E4M3FN>, %o: memref<1x1x64x128xf16>) {
  // expected-error @+1 {{e4m3 inputs need their descales: descale(%q_descale, %k_descale, %v_descale)}}
  fagpu.attention %q, %q, %q outs(%o) {target = #fagpu.target<sm_90a>, scale = 1.0 : f32, schedule = #fp8s}
    : memref<1x1x64x128xf8E4M3FN>, memref<1x1x64x128xf8E4M3FN>, memref<1x1x64x128xf8E4M3FN>, memref<1x1x64x128xf16>
  return
}

// -----

#fp8s = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 0, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
func.func @descales_of_two_layouts(%q: memref<2x4x64x128xf8E4M3FN>, %k: memref<2x2x64x128xf8E4M3FN>, %o: memref<2x4x64x128xf16>, %d: memref<f32>, %h: memref<2x2xf32>) {
  // expected-error @+1 {{the three descales must be of one layout: one per tensor (rank 0), [B, Hkv] (rank 2), or per block (Q's and K's of rank 3, V's of rank 0)}}
  fagpu.attention %q, %k, %k descale(%h, %d, %d : memref<2x2xf32>, memref<f32>, memref<f32>) outs(%o) {target = #fagpu.target<sm_90a>, scale = 1.0 : f32, probs_scale = 256.0 : f32, schedule = #fp8s}
    : memref<2x4x64x128xf8E4M3FN>, memref<2x2x64x128xf8E4M3FN>, memref<2x2x64x128xf8E4M3FN>, memref<2x4x64x128xf16>
  return
}

// -----

// Per block, V's descale is one per tensor (FA3 quantises V per tensor).
#fp8s = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 0, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
func.func @per_block_v(%q: memref<2x4x300x128xf8E4M3FN>, %k: memref<2x2x500x128xf8E4M3FN>, %o: memref<2x4x300x128xf16>, %qd: memref<2x4x3xf32>, %kd: memref<2x2x4xf32>, %vd: memref<2x2xf32>) {
  // expected-error @+1 {{the three descales must be of one layout}}
  fagpu.attention %q, %k, %k descale(%qd, %kd, %vd : memref<2x4x3xf32>, memref<2x2x4xf32>, memref<2x2xf32>) outs(%o) {target = #fagpu.target<sm_90a>, scale = 1.0 : f32, probs_scale = 256.0 : f32, schedule = #fp8s}
    : memref<2x4x300x128xf8E4M3FN>, memref<2x2x500x128xf8E4M3FN>, memref<2x2x500x128xf8E4M3FN>, memref<2x4x300x128xf16>
  return
}

// -----

// Per-block descales are the schedule's tiles: 300 queries are 3 blocks of
// 128, 500 keys 4.
#fp8s = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 0, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
func.func @per_block_query_tiles(%q: memref<2x4x300x128xf8E4M3FN>, %k: memref<2x2x500x128xf8E4M3FN>, %o: memref<2x4x300x128xf16>, %qd: memref<2x4x5xf32>, %kd: memref<2x2x4xf32>, %vd: memref<f32>) {
  // expected-error @+1 {{per-block Q descales must be contiguous of shape [2, 4, 3] (the schedule's 128 x 128 tiles), got 'memref<2x4x5xf32>'}}
  fagpu.attention %q, %k, %k descale(%qd, %kd, %vd : memref<2x4x5xf32>, memref<2x2x4xf32>, memref<f32>) outs(%o) {target = #fagpu.target<sm_90a>, scale = 1.0 : f32, probs_scale = 256.0 : f32, schedule = #fp8s}
    : memref<2x4x300x128xf8E4M3FN>, memref<2x2x500x128xf8E4M3FN>, memref<2x2x500x128xf8E4M3FN>, memref<2x4x300x128xf16>
  return
}

// -----

#fp8s = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 0, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
func.func @per_block_key_heads(%q: memref<2x4x300x128xf8E4M3FN>, %k: memref<2x2x500x128xf8E4M3FN>, %o: memref<2x4x300x128xf16>, %qd: memref<2x4x3xf32>, %kd: memref<2x4x4xf32>, %vd: memref<f32>) {
  // expected-error @+1 {{per-block K descales must be contiguous of shape [2, 2, 4] (the schedule's 128 x 128 tiles), got 'memref<2x4x4xf32>'}}
  fagpu.attention %q, %k, %k descale(%qd, %kd, %vd : memref<2x4x3xf32>, memref<2x4x4xf32>, memref<f32>) outs(%o) {target = #fagpu.target<sm_90a>, scale = 1.0 : f32, probs_scale = 256.0 : f32, schedule = #fp8s}
    : memref<2x4x300x128xf8E4M3FN>, memref<2x2x500x128xf8E4M3FN>, memref<2x2x500x128xf8E4M3FN>, memref<2x4x300x128xf16>
  return
}

// -----

#fp8s = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 0, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
func.func @descales_of_query_heads(%q: memref<2x4x64x128xf8E4M3FN>, %k: memref<2x2x64x128xf8E4M3FN>, %o: memref<2x4x64x128xf16>, %h: memref<2x4xf32>) {
  // expected-error @+1 {{[B, Hkv] descales must be contiguous of shape [2, 2], got 'memref<2x4xf32>'}}
  fagpu.attention %q, %k, %k descale(%h, %h, %h : memref<2x4xf32>, memref<2x4xf32>, memref<2x4xf32>) outs(%o) {target = #fagpu.target<sm_90a>, scale = 1.0 : f32, probs_scale = 256.0 : f32, schedule = #fp8s}
    : memref<2x4x64x128xf8E4M3FN>, memref<2x2x64x128xf8E4M3FN>, memref<2x2x64x128xf8E4M3FN>, memref<2x4x64x128xf16>
  return
}

// -----

#fp8s = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 0, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
func.func @descales_on_f16(%q: memref<1x1x64x128xf16>, %d: memref<f32>) {
  // expected-error @+1 {{descales belong to e4m3 inputs}}
  fagpu.attention %q, %q, %q descale(%d, %d, %d : memref<f32>, memref<f32>, memref<f32>) outs(%q) {target = #fagpu.target<sm_90a>, scale = 1.0 : f32, schedule = #fp8s}
    : memref<1x1x64x128xf16>, memref<1x1x64x128xf16>, memref<1x1x64x128xf16>, memref<1x1x64x128xf16>
  return
}

// -----

#fp8s = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 0, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 3, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
func.func @fp8_on_sm100(%q: memref<1x1x64x128xf8E4M3FN>, %o: memref<1x1x64x128xf16>, %d: memref<f32>) {
  // expected-error @+1 {{e4m3 inputs have a kernel on sm_90a only}}
  fagpu.attention %q, %q, %q descale(%d, %d, %d : memref<f32>, memref<f32>, memref<f32>) outs(%o) {target = #fagpu.target<sm_100a>, scale = 1.0 : f32, probs_scale = 256.0 : f32, schedule = #fp8s}
    : memref<1x1x64x128xf8E4M3FN>, memref<1x1x64x128xf8E4M3FN>, memref<1x1x64x128xf8E4M3FN>, memref<1x1x64x128xf16>
  return
}

// -----

#fp8s = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 0, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
func.func @probs_scale_not_a_power_of_two(%q: memref<1x1x64x128xf8E4M3FN>, %o: memref<1x1x64x128xf16>, %d: memref<f32>) {
  // expected-error @+1 {{expected probs scale to be a power of two in [1, 256], got 3 (P is scaled before its e4m3 cast and unscaled after: a power of two keeps both exact)}}
  fagpu.attention %q, %q, %q descale(%d, %d, %d : memref<f32>, memref<f32>, memref<f32>) outs(%o) {target = #fagpu.target<sm_90a>, scale = 1.0 : f32, probs_scale = 3.0 : f32, schedule = #fp8s}
    : memref<1x1x64x128xf8E4M3FN>, memref<1x1x64x128xf8E4M3FN>, memref<1x1x64x128xf8E4M3FN>, memref<1x1x64x128xf16>
  return
}

// -----

#fp8s = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 0, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
func.func @probs_scale_on_f16(%q: memref<1x1x64x128xf16>) {
  // expected-error @+1 {{probs_scale scales e4m3 probabilities: it belongs to e4m3 inputs}}
  fagpu.attention %q, %q, %q outs(%q) {target = #fagpu.target<sm_90a>, scale = 1.0 : f32, probs_scale = 256.0 : f32, schedule = #fp8s}
    : memref<1x1x64x128xf16>, memref<1x1x64x128xf16>, memref<1x1x64x128xf16>, memref<1x1x64x128xf16>
  return
}

// -----

// The schedule's epilogue names one of the five.
// expected-error @+1 {{expected registers, tma_store, tma_store_in_q, staged_copy or staged_copy_in_q for 'epilogue', got 'tma'}}
#bad_epilogue = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 0, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = tma, q_in_registers = false>

// -----

func.func @bad_optional_bool(%q: memref<1x1x64x64xf16>) {
  // expected-error @+1 {{expected true or false for 'row_sum_mma'}}
  fagpu.attention %q, %q, %q outs(%q) {target = #fagpu.target<sm_90a>, scale = 1.0 : f32, schedule = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 0, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false, row_sum_mma = maybe>}
    : memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x64xf16>
  return
}

// -----
// Each schedule field's range and target (ScheduleValidation.h): fields a
// target's kernel does not read are refused there, not ignored.

#s = #fagpu.schedule<block_r = 64, block_c = 64, consumers = 0, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 2, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false, kv_splits = 4>
func.func @split_on_sm80(%q: memref<1x1x64x64xf16>) {
  // expected-error @+1 {{schedule: kv_splits (split-KV): only the sm_90a kernel has it; the sm_80 kernel would ignore it}}
  fagpu.attention %q, %q, %q outs(%q) {target = #fagpu.target<sm_80>, scale = 1.0 : f32, schedule = #s}
    : memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x64xf16>
  return
}

// -----

#s = #fagpu.schedule<block_r = 64, block_c = 64, consumers = 0, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 2, ping_pong = false, overlap_softmax = false, scheduler = dynamic, q_buffers = 1, epilogue = registers, q_in_registers = false>
func.func @scheduler_on_sm80(%q: memref<1x1x64x64xf16>) {
  // expected-error @+1 {{schedule: a persistent scheduler: only the sm_90a kernel has it; the sm_80 kernel would ignore it}}
  fagpu.attention %q, %q, %q outs(%q) {target = #fagpu.target<sm_80>, scale = 1.0 : f32, schedule = #s}
    : memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x64xf16>
  return
}

// -----

#s = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 0, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 3, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = tma_store, q_in_registers = false, tmem_columns = 512>
func.func @epilogue_on_sm100(%q: memref<1x1x64x128xf16>) {
  // expected-error @+1 {{schedule: a shared-memory epilogue: only the sm_90a kernel has it; the sm_100a kernel would ignore it}}
  fagpu.attention %q, %q, %q outs(%q) {target = #fagpu.target<sm_100a>, scale = 1.0 : f32, schedule = #s}
    : memref<1x1x64x128xf16>, memref<1x1x64x128xf16>, memref<1x1x64x128xf16>, memref<1x1x64x128xf16>
  return
}

// -----

#s = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 0, producer_registers = 0, consumer_registers = 0, stages = 2, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
func.func @no_ctas(%q: memref<1x1x64x64xf16>) {
  // expected-error @+1 {{schedule: ctas_per_sm must be 1 or 2 on sm_90a, got 0}}
  fagpu.attention %q, %q, %q outs(%q) {target = #fagpu.target<sm_90a>, scale = 1.0 : f32, schedule = #s}
    : memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x64xf16>
  return
}

// -----

#s = #fagpu.schedule<block_r = 128, block_c = 128, consumers = -1, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 2, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
func.func @negative_consumers(%q: memref<1x1x64x64xf16>) {
  // expected-error @+1 {{schedule: consumers must be 0 (not chosen yet) to 3 (64 query rows each), got -1}}
  fagpu.attention %q, %q, %q outs(%q) {target = #fagpu.target<sm_90a>, scale = 1.0 : f32, schedule = #s}
    : memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x64xf16>
  return
}

// -----

#s = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 144115188075855871, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 2, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
func.func @huge_consumers(%q: memref<1x1x64x64xf16>) {
  // expected-error @+1 {{schedule: consumers must be 0 (not chosen yet) to 3 (64 query rows each), got 144115188075855871}}
  fagpu.attention %q, %q, %q outs(%q) {target = #fagpu.target<sm_90a>, scale = 1.0 : f32, schedule = #s}
    : memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x64xf16>
  return
}

// -----

// Two CTAs of 256 threads launch with 128 registers a thread: 240 for the
// consumer does not fit (the increase would wait forever).
#s = #fagpu.schedule<block_r = 64, block_c = 64, consumers = 1, ctas_per_sm = 2, producer_registers = 24, consumer_registers = 240, stages = 2, ping_pong = false, overlap_softmax = true, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
func.func @budget(%q: memref<1x1x64x64xf16>) {
  // expected-error @+1 {{schedule: producer and consumer registers (24, 240) need 33792 registers, more than the 32768 a CTA of 256 threads launches with (128 each, 2 CTAs per SM)}}
  fagpu.attention %q, %q, %q outs(%q) {target = #fagpu.target<sm_90a>, scale = 1.0 : f32, schedule = #s}
    : memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x64xf16>
  return
}

// -----

#s = #fagpu.schedule<block_r = 128, block_c = 1152921504606846976, consumers = 2, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 0, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
func.func @huge_block(%q: memref<1x1x64x64xf16>) {
  // expected-error @+1 {{schedule: expected block_c in [1, 1048576], got 1152921504606846976}}
  fagpu.attention %q, %q, %q outs(%q) {target = #fagpu.target<sm_90a>, scale = 1.0 : f32, schedule = #s}
    : memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x64xf16>
  return
}

// -----

#s = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 0, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = true>
func.func @q_registers_on_sm90(%q: memref<1x1x64x64xf16>) {
  // expected-error @+1 {{schedule: q_in_registers: only the sm_80 kernel keeps Q in registers; the sm_90a kernel would ignore it}}
  fagpu.attention %q, %q, %q outs(%q) {target = #fagpu.target<sm_90a>, scale = 1.0 : f32, schedule = #s}
    : memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x64xf16>
  return
}

// -----

#s = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 0, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
func.func @window_past_32_bits(%q: memref<1x1x64x64xf16>) {
  // expected-error @+1 {{window}}
  fagpu.attention %q, %q, %q outs(%q) {target = #fagpu.target<sm_90a>, scale = 1.0 : f32, schedule = #s, window = 4294967297 : i64}
    : memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x64xf16>
  return
}

// -----

#s = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 0, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
func.func @heads(%q: memref<1x4x64x64xf16>, %k: memref<1x3x64x64xf16>) {
  // expected-error @+1 {{expected query heads (4) to be a multiple of key/value heads (3)}}
  fagpu.attention %q, %k, %k outs(%q) {target = #fagpu.target<sm_90a>, scale = 1.0 : f32, schedule = #s}
    : memref<1x4x64x64xf16>, memref<1x3x64x64xf16>, memref<1x3x64x64xf16>, memref<1x4x64x64xf16>
  return
}

// -----

#s = #fagpu.schedule<block_r = 64, block_c = 64, consumers = 0, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 2, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
func.func @varlen_on_sm80(%q: memref<1x2x64x64xf16>, %cu: memref<3xi32>) {
  // expected-error @+1 {{per-sequence key lengths, pages and varlen batches have a kernel on sm_90a only, not sm_80}}
  fagpu.attention %q, %q, %q varlen(%cu, %cu : memref<3xi32>, memref<3xi32>) outs(%q) {target = #fagpu.target<sm_80>, scale = 1.0 : f32, schedule = #s}
    : memref<1x2x64x64xf16>, memref<1x2x64x64xf16>, memref<1x2x64x64xf16>, memref<1x2x64x64xf16>
  return
}

// -----

// An e4m3 K/V beside a 16-bit Q (an FP8 KV cache): K's and V's descales,
// none of Q's, per tensor or [B, Hkv], no probs_scale, sm_90a only.
#kv = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 0, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
func.func @kv_with_q_descale(%q: memref<1x4x1x128xf16>, %k: memref<1x2x64x128xf8E4M3FN>, %o: memref<1x4x1x128xf16>, %d: memref<f32>) {
  // expected-error @+1 {{an e4m3 K/V needs K's and V's descales, and Q has none: descale(%k_descale, %v_descale)}}
  fagpu.attention %q, %k, %k descale(%d, %d, %d : memref<f32>, memref<f32>, memref<f32>) outs(%o) {target = #fagpu.target<sm_90a>, scale = 1.0 : f32, schedule = #kv} : memref<1x4x1x128xf16>, memref<1x2x64x128xf8E4M3FN>, memref<1x2x64x128xf8E4M3FN>, memref<1x4x1x128xf16>
  return
}

// -----

#kv = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 0, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
func.func @kv_mixed_values(%q: memref<1x4x1x128xf16>, %k: memref<1x2x64x128xf8E4M3FN>, %v: memref<1x2x64x128xf16>, %o: memref<1x4x1x128xf16>, %d: memref<f32>) {
  // expected-error @+1 {{an e4m3 K/V takes e4m3 K and V beside Q and out of one 16-bit type}}
  fagpu.attention %q, %k, %v descale(%d, %d : memref<f32>, memref<f32>) outs(%o) {target = #fagpu.target<sm_90a>, scale = 1.0 : f32, schedule = #kv} : memref<1x4x1x128xf16>, memref<1x2x64x128xf8E4M3FN>, memref<1x2x64x128xf16>, memref<1x4x1x128xf16>
  return
}

// -----

#kv = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 0, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
func.func @kv_per_block(%q: memref<1x4x1x128xf16>, %k: memref<1x2x64x128xf8E4M3FN>, %o: memref<1x4x1x128xf16>, %d: memref<f32>, %b: memref<1x2x1xf32>) {
  // expected-error @+1 {{an e4m3 K/V's descales are per tensor or [B, Hkv], not per block}}
  fagpu.attention %q, %k, %k descale(%b, %d : memref<1x2x1xf32>, memref<f32>) outs(%o) {target = #fagpu.target<sm_90a>, scale = 1.0 : f32, schedule = #kv} : memref<1x4x1x128xf16>, memref<1x2x64x128xf8E4M3FN>, memref<1x2x64x128xf8E4M3FN>, memref<1x4x1x128xf16>
  return
}

// -----

#kv = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 0, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
func.func @kv_probs_scale(%q: memref<1x4x1x128xf16>, %k: memref<1x2x64x128xf8E4M3FN>, %o: memref<1x4x1x128xf16>, %d: memref<f32>) {
  // expected-error @+1 {{probs_scale scales e4m3 probabilities: an e4m3 K/V keeps P at Q's precision}}
  fagpu.attention %q, %k, %k descale(%d, %d : memref<f32>, memref<f32>) outs(%o) {target = #fagpu.target<sm_90a>, scale = 1.0 : f32, probs_scale = 256.0 : f32, schedule = #kv} : memref<1x4x1x128xf16>, memref<1x2x64x128xf8E4M3FN>, memref<1x2x64x128xf8E4M3FN>, memref<1x4x1x128xf16>
  return
}

// -----

#kv = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 0, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
func.func @two_descales_16bit(%q: memref<1x4x1x128xf16>, %k: memref<1x2x64x128xf16>, %o: memref<1x4x1x128xf16>, %d: memref<f32>) {
  // expected-error @+1 {{descales belong to e4m3 inputs}}
  fagpu.attention %q, %k, %k descale(%d, %d : memref<f32>, memref<f32>) outs(%o) {target = #fagpu.target<sm_90a>, scale = 1.0 : f32, schedule = #kv} : memref<1x4x1x128xf16>, memref<1x2x64x128xf16>, memref<1x2x64x128xf16>, memref<1x4x1x128xf16>
  return
}

// -----

#kv = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 0, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
func.func @one_descale(%q: memref<1x4x1x128xf16>, %k: memref<1x2x64x128xf8E4M3FN>, %o: memref<1x4x1x128xf16>, %d: memref<f32>) {
  // expected-error @+1 {{expected descale(%q, %k, %v : ...) or descale(%k, %v : ...) with a type each}}
  fagpu.attention %q, %k, %k descale(%d : memref<f32>) outs(%o) {target = #fagpu.target<sm_90a>, scale = 1.0 : f32, schedule = #kv} : memref<1x4x1x128xf16>, memref<1x2x64x128xf8E4M3FN>, memref<1x2x64x128xf8E4M3FN>, memref<1x4x1x128xf16>
  return
}
