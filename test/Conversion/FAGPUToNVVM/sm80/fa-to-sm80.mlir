// RUN: fa-opt %s --split-input-file --fa-sm80-kernel-pipeline --cse | FileCheck %s

// FA2 on mma.sync: the launch, the schedule, and each hardware step of the
// kernel as an op that prints.

// CHECK-LABEL: func.func @attention
// grid (ceil(Nq / 128), Hq, B), 4 warps, 48 KiB of dynamic shared memory:
// Q 128x64 f16 (16 KiB) + 2 stages x (K, V) 64x64 f16 (32 KiB)
// CHECK: %[[NQ:.*]] = memref.dim %{{.*}}, %c2 : memref<?x?x?x64xf16>
// CHECK: %[[GX:.*]] = arith.ceildivui %[[NQ]], %c128
// CHECK: gpu.launch_func @fa_kernels::@fa2_sm80_d64_br128_bc64_f16 blocks in (%[[GX]], %{{.*}}, %{{.*}}) threads in (%c128, %c1, %c1) dynamic_shared_memory_size %c49152_i32
// CHECK-SAME: args(%{{.*}} : !llvm.ptr<1>, %{{.*}} : !llvm.ptr<1>, %{{.*}} : !llvm.ptr<1>, %{{.*}} : !llvm.ptr<1>, %{{.*}} : !llvm.ptr<1>, %{{.*}} : i32, %{{.*}} : i32, %{{.*}} : i32, %{{.*}} : i32, %{{.*}} : f32)
// CHECK-NOT: fa.attention

// CHECK: gpu.module @fa_kernels
// CHECK: llvm.mlir.global external @fa_smem() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
// CHECK: llvm.func @fa2_sm80_d64_br128_bc64_f16
// CHECK-SAME: fagpu.schedule = #fagpu.schedule<block_r = 128, block_c = 64, consumers = 0, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 2, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = true>, fagpu.shared_memory_bytes = 49152 : i64, fagpu.target = #fagpu.target<sm_80>, fagpu.threads = 128 : i64
// CHECK-SAME: nvvm.kernel, nvvm.maxntid = array<i32: 128, 1, 1>
// Prologue: Q and the first K/V tile in flight with cp.async (16 B, zero-fill
// past the end), one commit group.
// CHECK: nvvm.cp.async.shared.global %{{.*}}, %{{.*}}, 16, cache = cg, %{{.*}} : !llvm.ptr<3>, !llvm.ptr<1>, i32
// CHECK: nvvm.cp.async.commit.group
// Q fragments kept in registers: ldmatrix.x4 after the first wait.
// CHECK: nvvm.cp.async.wait.group 0
// CHECK: nvvm.barrier0
// CHECK: nvvm.ldmatrix %{{.*}} {eltType = #nvvm.ld_st_matrix_elt_type<b16>, layout = #nvvm.mma_layout<row>, num = 4 : i32, shape = #nvvm.ld_st_matrix_shape<m = 8, n = 8>}
// The unmasked K/V loop: wait for tile j, prefetch tile j + 1 into the
// other stage, S = Q K^T, softmax, O += P V.
// CHECK: scf.for
// CHECK:   nvvm.cp.async.wait.group 0
// CHECK:   nvvm.barrier0
// CHECK:   scf.if
// CHECK:     nvvm.cp.async.shared.global
// CHECK:   nvvm.cp.async.commit.group
// CHECK:   nvvm.ldmatrix {{.*}}layout = #nvvm.mma_layout<row>
// CHECK:   nvvm.mma.sync A[{{.*}}] B[{{.*}}] C[{{.*}}] {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (vector<2xf16>, vector<2xf16>, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// row max over the quad of threads that share a row
// CHECK:   nvvm.shfl.sync  bfly %{{.*}}, %{{.*}}, %c1_i32, %c31_i32{{.*}} : f32 -> f32
// CHECK:   nvvm.shfl.sync  bfly %{{.*}}, %{{.*}}, %c2_i32, %c31_i32{{.*}} : f32 -> f32
// P = exp2(s * scale log2 e - m): one fma feeding ex2.approx
// CHECK:   %[[ARG:.*]] = math.fma %{{.*}}, %{{.*}}, %{{.*}} : f32
// CHECK:   llvm.inline_asm "ex2.approx.ftz.f32 $0, $1;", "=f,f" %[[ARG]]
// P converted to f16 pairs in registers, the A operand of P V:
// CHECK:   llvm.fptrunc %{{.*}} : vector<2xf32> to vector<2xf16>
// V read transposed:
// CHECK:   nvvm.ldmatrix {{.*}}layout = #nvvm.mma_layout<col>
// CHECK:   nvvm.mma.sync
// CHECK: } {fa.kv_loop = "unmasked"}
// The masked loop (ragged last block) compares key positions with Nk.
// CHECK: scf.for
// CHECK:   arith.cmpi ult
// CHECK: } {fa.kv_loop = "masked"}
// Epilogue: the quad's partial sums reduced once, O / l transposed within
// the quad (three shuffles a run of 32 columns) and stored 16 B a lane, LSE.
// CHECK: nvvm.shfl.sync  bfly
// CHECK: nvvm.shfl.sync  bfly %{{.*}}, %{{.*}}, %c3_i32{{.*}} : i32 -> i32
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<1>
// CHECK: llvm.inline_asm "lg2.approx.ftz.f32 $0, $1;"
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 4 : i64} : f32, !llvm.ptr<1>
func.func @attention(%q: memref<?x?x?x64xf16>, %k: memref<?x?x?x64xf16>, %v: memref<?x?x?x64xf16>,
                     %o: memref<?x?x?x64xf16>, %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v outs(%o, %lse : memref<?x?x?x64xf16>, memref<?x?x?xf32>)
      : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>
  return
}

// -----

// bf16, D = 256, causal: B_r = 64 (one row tile per warp), B_c = 32, Q kept
// in registers (64 per thread), bf16 MMA operands as packed i32; the
// masked loop compares keys with the diagonal.
// CHECK-LABEL: func.func @causal_bf16
// CHECK: gpu.launch_func @fa_kernels::@fa2_sm80_d256_br64_bc32_bf16_causal
// CHECK-SAME: dynamic_shared_memory_size %c98304_i32
// CHECK: llvm.func @fa2_sm80_d256_br64_bc32_bf16_causal
// CHECK-SAME: fagpu.schedule = #fagpu.schedule<block_r = 64, block_c = 32,
// CHECK-SAME: q_in_registers = true>
// CHECK: } {fa.kv_loop = "unmasked"}
// CHECK: scf.for
// CHECK:   nvvm.mma.sync A[{{.*}}] B[{{.*}}] C[{{.*}}] {{{.*}}multiplicandAPtxType = #nvvm.mma_type<bf16>{{.*}}} : (i32, i32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// The causal/ragged limit min(Nk, row + 1) - kStart, then one signed
// compare of each register's column offset against it.
// CHECK:   arith.minui
// CHECK:   arith.cmpi slt
// CHECK: } {fa.kv_loop = "masked"}
func.func @causal_bf16(%q: memref<2x8x100x256xbf16>, %k: memref<2x2x300x256xbf16>, %v: memref<2x2x300x256xbf16>,
                       %o: memref<2x8x100x256xbf16>, %lse: memref<2x8x100xf32>) {
  fa.attention %q, %k, %v outs(%o, %lse : memref<2x8x100x256xbf16>, memref<2x8x100xf32>) {causal}
      : memref<2x8x100x256xbf16>, memref<2x2x300x256xbf16>, memref<2x2x300x256xbf16>
  return
}

// -----

// Window and softcap: scores go through tanh.approx, every visited block is
// masked with |i - j| < w, and the loop starts at the window's first block.
// CHECK-LABEL: func.func @window_softcap
// CHECK: gpu.launch_func  @fa_kernels::@fa2_sm80_d64_br128_bc64_f16_w32_sc30
// CHECK: llvm.func @fa2_sm80_d64_br128_bc64_f16_w32_sc30
// CHECK: } {fa.kv_loop = "unmasked"}
// CHECK: scf.for
// CHECK:   llvm.inline_asm "tanh.approx.f32 $0, $1;"
// CHECK: } {fa.kv_loop = "masked"}
func.func @window_softcap(%q: memref<?x?x?x64xf16>, %o: memref<?x?x?x64xf16>, %lse: memref<?x?x?xf32>) {
  fa.attention %q, %q, %q outs(%o, %lse : memref<?x?x?x64xf16>, memref<?x?x?xf32>) {window = 32 : i64, softcap = 30.0 : f32}
      : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>
  return
}
