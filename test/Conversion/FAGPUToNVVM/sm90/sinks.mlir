// RUN: fa-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(fagpu-tile{target=sm_90a},fa-lower-fa2,fa-map-to-gpu{target=sm_90a}))" | FileCheck %s --check-prefix=MAP
// RUN: fa-opt %s --split-input-file --fa-sm90-kernel-pipeline | FileCheck %s
// RUN: not fa-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(fagpu-tile{target=sm_80},fa-lower-fa2,fa-map-to-gpu{target=sm_80}))" 2>&1 | FileCheck %s --check-prefix=SM80

// Attention sinks on sm_90a: fa-map-to-gpu takes the [Hq] logits the loop
// order's fa.init_state reads onto fagpu.attention; the kernel takes them as
// its `sinks` parameter (after the attention's own) and starts each tile's
// rows from their head's logit, fa.init_state's rule: m = log2(e) s_h and
// l = 1, or m = -inf and l = 0 for a sink of -inf (no sink). (Checked on an
// H100 against torch: bench/results/2026-12-07-flex-gpu-h100.md.)

// MAP-LABEL: func.func @causal
// MAP-SAME: %[[S:[a-z0-9]+]]: memref<4xf32>
// MAP: fagpu.attention {{.*}} sinks(%[[S]] : memref<4xf32>) outs(
// CHECK-LABEL: func.func @causal
// CHECK: gpu.launch_func async [%{{.*}}] @fa_kernels::@[[K:fa3_sm90_d128_[a-z0-9_]*_sinks[a-z0-9_]*]]
// CHECK: llvm.func @[[K]](
// CHECK-SAME: %arg12: !llvm.ptr<1> {llvm.noalias}
// CHECK-SAME: {dtype = "f32", kind = "pointer", name = "sinks", shape = ["Hq"]}
// The tile's head's logit, loaded once per tile (the kernel's sinks
// parameter at the tile's query head), becomes the rows' m and l.
// CHECK: %[[P:.*]] = llvm.getelementptr %arg12[%{{.*}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
// CHECK: %[[LOGIT:.*]] = llvm.load %[[P]] invariant {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// CHECK: %[[NINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK: %[[NONE:.*]] = arith.cmpf oeq, %[[LOGIT]], %[[NINF]] : f32
// A row's l is its quad's four partial sums: the sink's 1 is lane 0's.
// CHECK: %[[LANE:.*]] = arith.remui %{{.*}}, %c4_i32{{.*}} : i32
// CHECK: %[[OTHER:.*]] = arith.cmpi ne, %[[LANE]], %c0_i32{{.*}} : i32
// CHECK: %[[ZEROL:.*]] = arith.ori %[[NONE]], %[[OTHER]] : i1
// CHECK: %[[LOG2E:.*]] = arith.constant 1.44269502 : f32
// CHECK: %[[M:.*]] = arith.mulf %[[LOGIT]], %[[LOG2E]] : f32
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: %[[L:.*]] = arith.select %[[ZEROL]], %[[ZERO]], %[[ONE]] : f32
// SM80: error: fa-map-to-gpu: attention sinks have a GPU kernel on sm_90a with a 16-bit Q only, not sm_80 (the CPU pipeline runs them: fa-cpu-pipeline)
func.func @causal(%q: memref<1x4x256x128xf16>, %s: memref<4xf32>, %o: memref<1x4x256x128xf16>) {
  fa.attention %q, %q, %q sinks(%s : memref<4xf32>) outs(%o : memref<1x4x256x128xf16>) {causal}
      : memref<1x4x256x128xf16>, memref<1x4x256x128xf16>, memref<1x4x256x128xf16>
  return
}
