// RUN: fa-opt %s --fa-sm90-kernel-pipeline="max-rows=8" --mlir-print-ir-before=convert-fagpu-to-nvvm -o /dev/null 2>&1 | FileCheck %s
// RUN: fa-opt %s --fa-sm90-kernel-pipeline --mlir-print-ir-before=convert-fagpu-to-nvvm -o /dev/null 2>&1 | FileCheck %s --check-prefix=ANY

// Decode on an e4m3 cache with max_rows = 8 (fagpu-max-rows): the kernel
// is a variant of its own (`_mr8`, its schedule's max_rows), whose three
// softmax steps (the first block, the loop, the masked tail) take each
// thread's first row alone; without the option the steps take both rows.
// CHECK: llvm.func @fa3_sm90_d128_br64_bc128_s2_f16_1cta_kvlens_paged64_kve4m3_mr8(
// CHECK-SAME: max_rows = 8
// CHECK-COUNT-3: fagpu.softmax_step {{.*}}first_row_only
// CHECK-NOT: fagpu.softmax_step
// ANY: llvm.func @fa3_sm90_d128_br64_bc128_s2_f16_1cta_kvlens_paged64_kve4m3(
// ANY: fagpu.softmax_step
// ANY-NOT: first_row_only
func.func @decode(%q: memref<?x?x?x128xf16>, %k: memref<?x?x64x128xf8E4M3FN>,
                  %v: memref<?x?x64x128xf8E4M3FN>, %o: memref<?x?x?x128xf16>,
                  %lse: memref<?x?x?xf32>, %kd: memref<f32>, %vd: memref<f32>,
                  %lens: memref<?xi32>, %table: memref<?x?xi32>) {
  fa.attention %q, %k, %v descale(%kd, %vd : memref<f32>, memref<f32>)
      kv_lengths(%lens : memref<?xi32>) pages(%table : memref<?x?xi32>)
      outs(%o, %lse : memref<?x?x?x128xf16>, memref<?x?x?xf32>)
      : memref<?x?x?x128xf16>, memref<?x?x64x128xf8E4M3FN>, memref<?x?x64x128xf8E4M3FN>
  return
}
