// fagpu-row-sum-mma sets `row_sum_mma` on e4m3 kernels (mode=on), follows
// the heuristics table by default (off: it measured slower), leaves 16-bit
// kernels alone, refuses split-KV, and runs before fagpu-pipeline-kv so the
// ring fits around its tile.
// RUN: fa-opt %s --split-input-file --fagpu-row-sum-mma=mode=on | FileCheck %s --check-prefix=ON
// RUN: fa-opt %s --split-input-file --fagpu-row-sum-mma | FileCheck %s --check-prefix=AUTO
// RUN: fa-opt %s --split-input-file --fagpu-pipeline-kv | FileCheck %s --check-prefix=RING
// RUN: fa-opt %s --split-input-file --fagpu-row-sum-mma=mode=on --fagpu-pipeline-kv | FileCheck %s --check-prefix=RINGRS
// RUN: not fa-opt %s --split-input-file --fagpu-row-sum-mma=mode=sometimes 2>&1 | FileCheck %s --check-prefix=MODE

#none = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 24, consumer_registers = 240, stages = 0, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>

// ON-LABEL: func.func @e4m3_d256
// ON: q_in_registers = false, row_sum_mma = true>
// AUTO-LABEL: func.func @e4m3_d256
// AUTO-NOT: row_sum_mma
// At D = 256 three stages of K and V^T (3 x 64 KiB) fit beside Q
// (32 KiB); the row-sum tile (2 x 8 x 128 bytes, on a 1 KiB boundary)
// leaves room for two.
// RING-LABEL: func.func @e4m3_d256
// RING: stages = 3,
// RINGRS-LABEL: func.func @e4m3_d256
// RINGRS: stages = 2, {{.*}} row_sum_mma = true>
// MODE: for the --mode option: Cannot find option named 'sometimes'!
func.func @e4m3_d256(%q: memref<1x2x200x256xf8E4M3FN>, %o: memref<1x2x200x256xf16>, %qd: memref<f32>) {
  fagpu.attention %q, %q, %q descale(%qd, %qd, %qd : memref<f32>, memref<f32>, memref<f32>) outs(%o) {probs_scale = 2.560000e+02 : f32, scale = 0.0625 : f32, schedule = #none, target = #fagpu.target<sm_90a>} : memref<1x2x200x256xf8E4M3FN>, memref<1x2x200x256xf8E4M3FN>, memref<1x2x200x256xf8E4M3FN>, memref<1x2x200x256xf16>
  return
}

// -----

#none = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2, ctas_per_sm = 1, producer_registers = 24, consumer_registers = 240, stages = 0, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false>

// A 16-bit kernel's P is not e4m3: no ones column to sum it against.
// ON-LABEL: func.func @f16
// ON-NOT: row_sum_mma
func.func @f16(%q: memref<?x?x?x128xf16>, %o: memref<?x?x?x128xf16>) {
  fagpu.attention %q, %q, %q outs(%o) {target = #fagpu.target<sm_90a>, scale = 0.125 : f32, schedule = #none}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>
  return
}
