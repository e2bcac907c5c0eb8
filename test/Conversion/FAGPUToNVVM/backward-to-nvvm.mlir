// RUN: fa-opt %s --convert-fagpu-to-nvvm --cse | FileCheck %s

// The backward kernel's ops, each through its own pattern, on one 64 x 64
// tile (four warps of one m16 row tile: 32 accumulator registers a thread,
// in 8 n8 tiles of columns 8 t + 2 (lane % 4) + {0, 1}).

!acc = !fagpu.fragment<64x64xf32, accumulator>
!opa = !fagpu.fragment<64x64xf16, operand_a>
!tile = !fagpu.smem_tile<64x64xf16, row_major>

// CHECK-LABEL: llvm.func @body
// backward_probs: the LSE at the thread's 16 columns (clamped below Nq);
// -inf (no key) becomes +inf so that exp2(s - LSE) is 0; per element the
// masks (key < Nk, query < Nq, causal: key <= query + shift) and MUFU
// exp2 of s * scale_log2 - LSE log2(e). (Equal scores and columns are
// CSE'd here: 16 exp2 for 32 registers.)
// CHECK-COUNT-16: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// CHECK: arith.cmpf oeq, %{{.*}}, %cst
// CHECK: arith.select %{{.*}}, %cst_{{[0-9]+}}, %{{.*}} : f32
// CHECK: arith.cmpi ult
// CHECK: arith.cmpi ult
// CHECK: arith.cmpi sle
// CHECK: math.fma %arg0, %arg9
// CHECK: llvm.inline_asm "ex2.approx.ftz.f32 $0, $1;"
// backward_grad_scores: D at the same 16 columns, dS = P (dP - D).
// CHECK-COUNT-16: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// CHECK: arith.subf %arg1
// CHECK: arith.mulf
// to_operand_a: 16 packed pairs.
// CHECK-COUNT-16: llvm.fptrunc %{{.*}} : vector<2xf32> to vector<2xf16>
// store_transposed: 32 16-bit stores into shared memory.
// CHECK-COUNT-32: llvm.store %{{.*}}, %{{.*}} {alignment = 2 : i64} : f16, !llvm.ptr<3>
// The mma of dQ = dS K on the operand: 4 k-steps x 8 n8 tiles.
// CHECK-COUNT-32: nvvm.mma.sync
// atomic_add_rows: the thread's two rows, each below Nq, 16 red.add each.
// CHECK: scf.if
// CHECK-COUNT-16: llvm.atomicrmw fadd %{{.*}}, %{{.*}} monotonic : !llvm.ptr<1>, f32
// CHECK: scf.if
// CHECK-COUNT-16: llvm.atomicrmw fadd %{{.*}}, %{{.*}} monotonic : !llvm.ptr<1>, f32
// CHECK-NOT: llvm.atomicrmw
module attributes {gpu.container_module} {
gpu.module @fa_kernels {
  llvm.mlir.global external @fa_smem() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
  llvm.func @body(%x: f32, %y: f32, %lse: !llvm.ptr<1>, %dots: !llvm.ptr<1>,
                  %dq: !llvm.ptr<1>, %q0: i32, %nq: i32, %row: i32, %nk: i32,
                  %sl2: f32, %shift: i32, %scale: f32) {
    %s = fagpu.splat %x : !acc
    %dp = fagpu.splat %y : !acc
    %p = fagpu.backward_probs %s lse %lse queries(%q0, %nq) keys(%row, %nk) scale_log2 %sl2 causal_shift %shift : !llvm.ptr<1> : !acc
    %ds = fagpu.backward_grad_scores %p, %dp row_dots %dots queries(%q0, %nq) : !llvm.ptr<1> : !acc
    %a = fagpu.to_operand_a %ds : !acc -> !opa
    %t = fagpu.shared_tile offset 0 : !tile
    fagpu.store_transposed %ds, %t : !acc, !tile
    %o = fagpu.mma %a, %t acc(%s) {mn_major} : !opa, !tile, !acc -> !acc
    fagpu.atomic_add_rows %o rows(%row, %nq) to %dq scale %scale : !llvm.ptr<1> : !acc
    llvm.return
  }

  // atomic_add_rows with pairs (sm_90): each thread's two adjacent columns
  // in one red.global.add.v2.f32: 8 a row of 64 columns (16 elements).
  // CHECK-LABEL: llvm.func @pairs
  // CHECK: scf.if
  // CHECK-COUNT-8: llvm.inline_asm has_side_effects "red.global.add.v2.f32 [$0], {$1, $2};", "l,f,f"
  // CHECK: scf.if
  // CHECK-COUNT-8: llvm.inline_asm has_side_effects "red.global.add.v2.f32 [$0], {$1, $2};", "l,f,f"
  // CHECK-NOT: llvm.atomicrmw
  llvm.func @pairs(%x: f32, %dq: !llvm.ptr<1>, %row: i32, %nq: i32, %scale: f32) {
    %o = fagpu.splat %x : !acc
    fagpu.atomic_add_rows %o rows(%row, %nq) to %dq scale %scale : !llvm.ptr<1> {pairs} : !acc
    llvm.return
  }

  // backward_probs with a window's far edge too: key >= query +
  // window_shift beside key <= query + shift.
  // CHECK-LABEL: llvm.func @window
  // CHECK: arith.cmpi ult
  // CHECK: arith.cmpi ult
  // CHECK: %[[NEAR:.*]] = arith.addi %{{.*}}, %arg7
  // CHECK-NEXT: arith.cmpi sle, %{{.*}}, %[[NEAR]]
  // CHECK: %[[FAR:.*]] = arith.addi %{{.*}}, %arg8
  // CHECK-NEXT: arith.cmpi sge, %{{.*}}, %[[FAR]]
  llvm.func @window(%x: f32, %lse: !llvm.ptr<1>, %q0: i32, %nq: i32,
                    %row: i32, %nk: i32, %sl2: f32, %near: i32, %far: i32) {
    %s = fagpu.splat %x : !acc
    %p = fagpu.backward_probs %s lse %lse queries(%q0, %nq) keys(%row, %nk) scale_log2 %sl2 causal_shift %near window_shift %far : !llvm.ptr<1> : !acc
    llvm.return
  }

  // semaphore_wait: thread 0 spins on an acquire load (GPU scope) until the
  // turn comes, then the CTA's barrier; semaphore_signal: each thread's
  // writes made visible at GPU scope, the barrier, thread 0 adds one.
  // CHECK-LABEL: llvm.func @turns
  // CHECK: nvvm.read.ptx.sreg.tid.x
  // CHECK: scf.if
  // CHECK: scf.while
  // CHECK: llvm.load %arg0 atomic syncscope("device") acquire {alignment = 4 : i64} : !llvm.ptr<1> -> i32
  // CHECK: arith.cmpi ne, %{{.*}}, %arg1
  // CHECK: nvvm.barrier0
  // CHECK: nvvm.memory.barrier <gpu>
  // CHECK-NEXT: nvvm.barrier0
  // CHECK: scf.if
  // CHECK: llvm.atomicrmw add %arg0, %{{.*}} syncscope("device") release : !llvm.ptr<1>, i32
  llvm.func @turns(%sem: !llvm.ptr<1>, %turn: i32) {
    fagpu.semaphore_wait %sem equals %turn : !llvm.ptr<1>
    fagpu.semaphore_signal %sem : !llvm.ptr<1>
    llvm.return
  }
}
}
