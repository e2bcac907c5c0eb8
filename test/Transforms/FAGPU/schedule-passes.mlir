// Each FlashAttention-3 pass sets its own fields of the #fagpu.schedule and
// nothing else; together they give the default sm_90a kernel.
// RUN: fa-opt %s --split-input-file --fagpu-warp-specialize | FileCheck %s --check-prefix=WS
// RUN: fa-opt %s --split-input-file --fagpu-warp-specialize=producer-registers=32 | FileCheck %s --check-prefix=WS32
// RUN: fa-opt %s --split-input-file --fagpu-persistent | FileCheck %s --check-prefix=PERS
// RUN: fa-opt %s --split-input-file --fagpu-persistent --fagpu-pipeline-kv | FileCheck %s --check-prefix=RING
// RUN: fa-opt %s --split-input-file --fagpu-ping-pong | FileCheck %s --check-prefix=PP
// RUN: fa-opt %s --split-input-file --fagpu-overlap-softmax | FileCheck %s --check-prefix=OVL
// RUN: fa-opt %s --split-input-file --fagpu-pipeline-kv --fagpu-tma-store-epilogue | FileCheck %s --check-prefix=EPI
// RUN: fa-opt %s --split-input-file --fagpu-persistent --fagpu-pipeline-kv --fagpu-tma-store-epilogue | FileCheck %s --check-prefix=PERSEPI
// RUN: not fa-opt %s --split-input-file --fagpu-tma-store-epilogue 2>&1 | FileCheck %s --check-prefix=ORDER

#none = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 0, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>

// Warp specialisation: a 24-register producer and what the CTA's registers
// leave two consumers: 384 threads launch with 65536 / 384 = 168 each (a
// multiple of 8), (168 x 384 / 128 - 24) / 2 = 240.
// WS-LABEL: func.func @causal_d128
// WS: producer_registers = 24, consumer_registers = 240, stages = 0, ping_pong = false
// The share comes from the registers the CTA launches with, 168 a thread
// for 384 threads: a producer of 32 leaves the consumers (504 - 32) / 2,
// 232 rounded down to 8, not 240 (which would not fit: see
// sm90/invalid-options.mlir).
// WS32-LABEL: func.func @causal_d128
// WS32: producer_registers = 32, consumer_registers = 232
// Persistent: causal tiles differ in length, so a dynamic scheduler, and
// a second Q buffer for the cross-tile pipeline.
// PERS-LABEL: func.func @causal_d128
// PERS: producer_registers = 0, {{.*}} scheduler = dynamic, q_buffers = 2, epilogue = registers
// The ring: three stages do not fit next to two Q buffers at D = 128
// (2 x 32 KiB + 3 x 64 KiB), two do.
// RING-LABEL: func.func @causal_d128
// RING: stages = 2, {{.*}} scheduler = dynamic, q_buffers = 2
// PP-LABEL: func.func @causal_d128
// PP: stages = 0, ping_pong = true, overlap_softmax = false
// OVL-LABEL: func.func @causal_d128
// OVL: ping_pong = false, overlap_softmax = true
// One tile per CTA at D = 128: three stages, and the 32 KiB staging tile
// does not fit next to them, so O is staged in the dead Q buffer.
// EPI-LABEL: func.func @causal_d128
// EPI: stages = 3, {{.*}} scheduler = single, q_buffers = 1, epilogue = tma_store_in_q
// ORDER: fagpu-tma-store-epilogue: the staging tile is placed after the K/V ring: run fagpu-pipeline-kv first
func.func @causal_d128(%q: memref<?x?x?x128xf16>, %o: memref<?x?x?x128xf16>, %l: memref<?x?x?xf32>) {
  fagpu.attention %q, %q, %q outs(%o, %l) {target = #fagpu.target<sm_90a>, scale = 0.125 : f32, causal, schedule = #none}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?xf32>
  return
}

// -----

#none = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 0, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>

// A varlen batch: a TMA box would write into the next sequence's rows, so
// O is staged and its rows copied (persistent: a staging tile of its own
// fits next to two stages); with one tile per CTA no staging tile fits
// next to three stages: the rows are staged in the dead Q buffer.
// EPI-LABEL: func.func @varlen_d128
// EPI: stages = 3, {{.*}} scheduler = single, q_buffers = 1, epilogue = staged_copy_in_q
// PERSEPI-LABEL: func.func @varlen_d128
// PERSEPI: stages = 2, {{.*}} scheduler = dynamic, q_buffers = 2, epilogue = staged_copy
func.func @varlen_d128(%q: memref<1x?x?x128xf16>, %o: memref<1x?x?x128xf16>, %l: memref<1x?x?xf32>, %cu: memref<?xi32>) {
  fagpu.attention %q, %q, %q varlen(%cu, %cu : memref<?xi32>, memref<?xi32>) outs(%o, %l) {target = #fagpu.target<sm_90a>, scale = 0.125 : f32, causal, bottom_right, schedule = #none}
    : memref<1x?x?x128xf16>, memref<1x?x?x128xf16>, memref<1x?x?x128xf16>, memref<1x?x?x128xf16>, memref<1x?x?xf32>
  return
}

// -----

#none = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 0, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>

// A paged cache of 16-row pages: each 128-key block is gathered from 8
// pages, and one tile per CTA (three stages, no spilled producer) beat the
// persistent kernel (fagpu::shortPagePersistence); 128-row pages keep the
// D 128 row's persistence.
// PERS-LABEL: func.func @pages_of_16
// PERS: scheduler = single, q_buffers = 1
// RING-LABEL: func.func @pages_of_16
// RING: stages = 3, {{.*}} scheduler = single, q_buffers = 1
// PERS-LABEL: func.func @pages_of_128
// PERS: scheduler = dynamic, q_buffers = 2
func.func @pages_of_16(%q: memref<?x?x?x128xf16>, %kv: memref<?x?x16x128xf16>, %o: memref<?x?x?x128xf16>, %l: memref<?x?x?xf32>, %lens: memref<?xi32>, %table: memref<?x?xi32>) {
  fagpu.attention %q, %kv, %kv kv_lengths(%lens : memref<?xi32>) pages(%table : memref<?x?xi32>) outs(%o, %l) {target = #fagpu.target<sm_90a>, scale = 0.125 : f32, causal, bottom_right, schedule = #none}
    : memref<?x?x?x128xf16>, memref<?x?x16x128xf16>, memref<?x?x16x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?xf32>
  return
}
func.func @pages_of_128(%q: memref<?x?x?x128xf16>, %kv: memref<?x?x128x128xf16>, %o: memref<?x?x?x128xf16>, %l: memref<?x?x?xf32>, %lens: memref<?xi32>, %table: memref<?x?xi32>) {
  fagpu.attention %q, %kv, %kv kv_lengths(%lens : memref<?xi32>) pages(%table : memref<?x?xi32>) outs(%o, %l) {target = #fagpu.target<sm_90a>, scale = 0.125 : f32, causal, bottom_right, schedule = #none}
    : memref<?x?x?x128xf16>, memref<?x?x128x128xf16>, memref<?x?x128x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?xf32>
  return
}

// -----

#one = #fagpu.schedule<block_r = 64, block_c = 128, consumers = 1, ctas_per_sm = 2, producer_registers = 0, consumer_registers = 0, stages = 0, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>

// One consumer, two CTAs per SM: each CTA has 32K registers,
// (32768 / 128 - 24) / 1 = 232; no ping-pong partner in the CTA; not the
// table's tiles, so not persistent; D = 64 keeps the register epilogue.
// WS-LABEL: func.func @one_consumer
// WS: producer_registers = 24, consumer_registers = 232
// PERS-LABEL: func.func @one_consumer
// PERS: scheduler = single, q_buffers = 1
// PP-LABEL: func.func @one_consumer
// PP: ping_pong = false
// EPI-LABEL: func.func @one_consumer
// EPI: epilogue = registers
func.func @one_consumer(%q: memref<?x?x?x64xf16>, %o: memref<?x?x?x64xf16>, %l: memref<?x?x?xf32>) {
  fagpu.attention %q, %q, %q outs(%o, %l) {target = #fagpu.target<sm_90a>, scale = 0.125 : f32, causal, schedule = #one}
    : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?xf32>
  return
}

// -----

#sm80 = #fagpu.schedule<block_r = 128, block_c = 64, consumers = 0, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 2, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = true>

// The FA3 passes leave other targets alone.
// WS-LABEL: func.func @sm80
// WS: #fagpu.schedule<block_r = 128, block_c = 64, consumers = 0, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 2, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = true>
// PP-LABEL: func.func @sm80
// PP: ping_pong = false
func.func @sm80(%q: memref<?x?x?x64xf16>, %o: memref<?x?x?x64xf16>, %l: memref<?x?x?xf32>) {
  fagpu.attention %q, %q, %q outs(%o, %l) {target = #fagpu.target<sm_80>, scale = 0.125 : f32, schedule = #sm80}
    : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?xf32>
  return
}
