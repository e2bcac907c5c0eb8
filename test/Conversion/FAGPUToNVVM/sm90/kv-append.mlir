// RUN: fa-opt %s --split-input-file --fa-sm90-kernel-pipeline | FileCheck %s

// A KV-cache attention's module carries the append kernel its launch runs
// first when a call brings new keys and values: one thread a (sequence,
// new row, head, 8 columns), the position lengths[b] + row checked against
// the capacity and a paged cache's table entry against the pages (traps, as
// the attention's own checks), one 16-byte load and store each for K and
// V, and seen[b] = lengths[b] + Nnew from the thread of (b, 0, 0, 0). It
// comes after the attention kernel, whose code is as without it.
// CHECK-LABEL: llvm.func @fa3_sm90_d128_br128_bc128_s3_f16_kvlens_paged64
// CHECK-SAME: fagpu.kv_append = "fa_kv_append_d128_f16"
// CHECK-LABEL: llvm.func @fa_kv_append_d128_f16(
// Its grid, which the runtimes evaluate (fagpu::kvAppendGrid): a thread a
// (sequence, new row, head, 8 columns), 256 a CTA.
// CHECK-SAME: fagpu.grid = {x = "ceil(B * Nnew * Hkv * (D / 8) / 256)", y = 1 : i64, z = 1 : i64}
// CHECK-SAME: nvvm.kernel, nvvm.maxntid = array<i32: 256, 1, 1>
// CHECK: %[[CHUNK:.*]] = arith.remui %{{.*}}, %c16_i64
// CHECK: %[[LENGTH:.*]] = llvm.load
// CHECK: %[[POSITION:.*]] = arith.addi %{{.*}}, %[[ROW:.*]] : i64
// CHECK: arith.cmpi ult, %[[POSITION]]
// CHECK: llvm.intr.trap
// CHECK: scf.if %{{.*}} -> (i64, i64)
// CHECK: arith.divui %[[POSITION]]
// CHECK: %[[PAGE:.*]] = arith.extui
// CHECK: arith.cmpi ult, %[[PAGE]]
// CHECK: llvm.intr.trap
// CHECK: arith.remui %[[POSITION]]
// CHECK: } else {
// CHECK: arith.muli %[[CHUNK]], %c8_i64
// CHECK: llvm.load %{{.*}} invariant {alignment = 16 : i64} : !llvm.ptr<1> -> vector<4xi32>
// CHECK: llvm.store %{{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>
// CHECK: llvm.load %{{.*}} invariant {alignment = 16 : i64} : !llvm.ptr<1> -> vector<4xi32>
// CHECK: llvm.store %{{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>
// CHECK: scf.if
// CHECK-NEXT: arith.addi %[[LENGTH]], %arg8 : i32
// CHECK: llvm.store
func.func @decode(%q: memref<?x?x?x128xf16>, %k: memref<?x?x64x128xf16>,
                  %v: memref<?x?x64x128xf16>, %o: memref<?x?x?x128xf16>,
                  %lse: memref<?x?x?xf32>, %lens: memref<?xi32>,
                  %table: memref<?x?xi32>) {
  fa.attention %q, %k, %v kv_lengths(%lens : memref<?xi32>)
      pages(%table : memref<?x?xi32>)
      outs(%o, %lse : memref<?x?x?x128xf16>, memref<?x?x?xf32>)
      : memref<?x?x?x128xf16>, memref<?x?x64x128xf16>, memref<?x?x64x128xf16>
  return
}

// -----

// An e4m3 cache beside a bf16 Q: the new rows are quantised on the way
// in, x / descale (descale[0], or descale[b * Hkv + h] per head) rounded to
// nearest and saturated at +-448, two codes a cvt (the second value in the
// high byte), 8 bytes a store.
// CHECK-LABEL: llvm.func @fa3_sm90_d128_br64_bc128_s2_bf16_1cta_kvlens_kve4m3
// CHECK-SAME: fagpu.kv_append = "fa_kv_append_d128_bf16_to_e4m3"
// CHECK-LABEL: llvm.func @fa_kv_append_d128_bf16_to_e4m3(
// CHECK: llvm.load %{{.*}} invariant {alignment = 16 : i64} : !llvm.ptr<1> -> vector<4xi32>
// CHECK: arith.select
// CHECK: %[[DESCALE:.*]] = llvm.load %{{.*}} : !llvm.ptr<1> -> f32
// CHECK: llvm.bitcast %{{.*}} : vector<4xi32> to vector<8xbf16>
// CHECK: %[[X0:.*]] = arith.extf %{{.*}} : bf16 to f32
// CHECK: %[[Q0:.*]] = arith.divf %[[X0]], %[[DESCALE]]
// CHECK: %[[X1:.*]] = arith.extf %{{.*}} : bf16 to f32
// CHECK: %[[Q1:.*]] = arith.divf %[[X1]], %[[DESCALE]]
// CHECK: llvm.inline_asm "cvt.rn.satfinite.e4m3x2.f32 $0, $1, $2;", "=h,f,f" %[[Q1]], %[[Q0]] : (f32, f32) -> i16
// CHECK-COUNT-3: llvm.inline_asm "cvt.rn.satfinite.e4m3x2.f32
// CHECK-NOT: llvm.inline_asm
// CHECK: llvm.bitcast %{{.*}} : vector<4xi16> to vector<2xi32>
// CHECK-NEXT: llvm.getelementptr %{{.*}} -> !llvm.ptr<1>, i8
// CHECK-NEXT: llvm.store %{{.*}} {alignment = 8 : i64} : vector<2xi32>, !llvm.ptr<1>
// CHECK-COUNT-4: llvm.inline_asm "cvt.rn.satfinite.e4m3x2.f32
// CHECK-NOT: llvm.inline_asm
// CHECK: llvm.store %{{.*}} {alignment = 8 : i64} : vector<2xi32>, !llvm.ptr<1>
func.func @decode_e4m3(%q: memref<?x?x?x128xbf16>,
                       %k: memref<?x?x?x128xf8E4M3FN>,
                       %v: memref<?x?x?x128xf8E4M3FN>,
                       %o: memref<?x?x?x128xbf16>, %lse: memref<?x?x?xf32>,
                       %kd: memref<f32>, %vd: memref<f32>,
                       %lens: memref<?xi32>) {
  fa.attention %q, %k, %v descale(%kd, %vd : memref<f32>, memref<f32>)
      kv_lengths(%lens : memref<?xi32>)
      outs(%o, %lse : memref<?x?x?x128xbf16>, memref<?x?x?xf32>)
      : memref<?x?x?x128xbf16>, memref<?x?x?x128xf8E4M3FN>, memref<?x?x?x128xf8E4M3FN>
  return
}

// -----

// Without per-sequence lengths there is nowhere to append: no kernel.
// CHECK-LABEL: llvm.func @fa3_sm90_d128
// CHECK-NOT: fagpu.kv_append
// CHECK-NOT: fa_kv_append
func.func @prefill(%q: memref<1x8x256x128xf16>, %k: memref<1x8x256x128xf16>,
                   %v: memref<1x8x256x128xf16>, %o: memref<1x8x256x128xf16>,
                   %lse: memref<1x8x256xf32>) {
  fa.attention %q, %k, %v outs(%o, %lse : memref<1x8x256x128xf16>, memref<1x8x256xf32>)
      : memref<1x8x256x128xf16>, memref<1x8x256x128xf16>, memref<1x8x256x128xf16>
  return
}
