// fagpu-tmem-accumulators places the sm_100a accumulators in tensor memory:
// two S/P buffers of B_c columns, then O's head_dim, allocated as the power
// of two (at least 32) tcgen05.alloc takes; more than 512 is refused.
// RUN: fa-opt %s --split-input-file --fagpu-tmem-accumulators --verify-diagnostics | FileCheck %s

#s128 = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 0, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 3, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
#s64 = #fagpu.schedule<block_r = 128, block_c = 64, consumers = 0, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 2, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>
#hopper = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 0, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>

// 2 x 128 + 128 = 384 -> 512; 2 x 64 + 64 = 192 -> 256; 2 x 64 + 256 = 384
// -> 512; 2 x 128 + 64 = 320 -> 512. Hopper's kernel keeps its
// accumulators in registers: no field.
// CHECK-LABEL: func.func @placed
// CHECK: block_c = 128, {{.*}} q_in_registers = false, tmem_columns = 512>
// CHECK: block_c = 64, {{.*}} q_in_registers = false, tmem_columns = 256>
// CHECK: block_c = 64, {{.*}} q_in_registers = false, tmem_columns = 512>
// CHECK: block_c = 128, {{.*}} q_in_registers = false, tmem_columns = 512>
// CHECK: target = #fagpu.target<sm_90a>
// CHECK-NOT: tmem_columns
// CHECK: return
func.func @placed(%q: memref<?x?x?x128xf16>, %o: memref<?x?x?x128xf16>,
                  %q64: memref<?x?x?x64xf16>, %o64: memref<?x?x?x64xf16>,
                  %q256: memref<?x?x?x256xf16>, %o256: memref<?x?x?x256xf16>,
                  %l: memref<?x?x?xf32>) {
  fagpu.attention %q, %q, %q outs(%o, %l) {target = #fagpu.target<sm_100a>, scale = 0.125 : f32, schedule = #s128}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?xf32>
  fagpu.attention %q64, %q64, %q64 outs(%o64, %l) {target = #fagpu.target<sm_100a>, scale = 0.125 : f32, schedule = #s64}
    : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?xf32>
  fagpu.attention %q256, %q256, %q256 outs(%o256, %l) {target = #fagpu.target<sm_100a>, scale = 0.0625 : f32, schedule = #s64}
    : memref<?x?x?x256xf16>, memref<?x?x?x256xf16>, memref<?x?x?x256xf16>, memref<?x?x?x256xf16>, memref<?x?x?xf32>
  fagpu.attention %q64, %q64, %q64 outs(%o64, %l) {target = #fagpu.target<sm_100a>, scale = 0.125 : f32, schedule = #s128}
    : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?xf32>
  fagpu.attention %q, %q, %q outs(%o, %l) {target = #fagpu.target<sm_90a>, scale = 0.125 : f32, schedule = #hopper}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?xf32>
  return
}

// -----

#s192 = #fagpu.schedule<block_r = 128, block_c = 192, consumers = 0, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 2, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>

// 2 x 192 + 256 = 640 columns do not fit.
func.func @too_wide(%q: memref<?x?x?x256xf16>, %o: memref<?x?x?x256xf16>, %l: memref<?x?x?xf32>) {
  // expected-error @+1 {{fagpu-tmem-accumulators: two S/P buffers of 192 columns and O of 256 need 640 tensor-memory columns, more than the SM's 512}}
  fagpu.attention %q, %q, %q outs(%o, %l) {target = #fagpu.target<sm_100a>, scale = 0.0625 : f32, schedule = #s192}
    : memref<?x?x?x256xf16>, memref<?x?x?x256xf16>, memref<?x?x?x256xf16>, memref<?x?x?x256xf16>, memref<?x?x?xf32>
  return
}

// -----

#odd = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 0, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 3, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false, tmem_columns = 384>

func.func @not_a_power_of_two(%q: memref<?x?x?x128xf16>, %o: memref<?x?x?x128xf16>, %l: memref<?x?x?xf32>) {
  // expected-error @+1 {{expected tmem_columns a power of two in [32, 512] (what tcgen05.alloc takes), got 384}}
  fagpu.attention %q, %q, %q outs(%o, %l) {target = #fagpu.target<sm_100a>, scale = 0.125 : f32, schedule = #odd}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?xf32>
  return
}

// -----

#tmemOnHopper = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 0, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false, tmem_columns = 512>

func.func @tmem_on_hopper(%q: memref<?x?x?x128xf16>, %o: memref<?x?x?x128xf16>, %l: memref<?x?x?xf32>) {
  // expected-error @+1 {{tmem_columns places accumulators in tensor memory, which only sm_100a has}}
  fagpu.attention %q, %q, %q outs(%o, %l) {target = #fagpu.target<sm_90a>, scale = 0.125 : f32, schedule = #tmemOnHopper}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?xf32>
  return
}

// -----

// The optional fields parse in either order (the attribute alone: no
// target has both a split and tensor memory, which the op's verifier
// refuses).
#both = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 0, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 3, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false, tmem_columns = 512, kv_splits = 4>
// CHECK-LABEL: func.func @optional_order
// CHECK-SAME: q_in_registers = false, kv_splits = 4, tmem_columns = 512>
func.func @optional_order() attributes {schedule = #both} {
  return
}

// -----

#unknown = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 0, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 3, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false, tmem_rows = 4>
// expected-error @-1 {{unknown schedule field 'tmem_rows'}}
