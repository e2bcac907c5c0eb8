// RUN: fa-opt %s --split-input-file --convert-fagpu-to-nvvm | FileCheck %s

// fagpu.modify_scores: the attention's regions inlined on each of the
// thread's scores. Register 4 n + k of a 64 x 16 accumulator (8 of them a
// thread) is row row0 + 8 (k / 2) and key key_start + 2 quadLane + 8 n +
// k % 2; the regions see them as their index values, whose arithmetic the
// lowering narrows to i32 (as FlexAttention's int32 index tensors).

!acc = !fagpu.fragment<64x16xf32, accumulator>

// A mask alone: the scores stay raw (the step's multiply-add scales them)
// and hidden ones become -inf. The region is copied once per register, on
// the row and key of that register.
// CHECK-LABEL: llvm.func @mask_only
// CHECK-SAME: (%[[KEY:.*]]: i32, %[[ROW:.*]]: i32, %[[B:.*]]: i32, %[[H:.*]]: i32, %[[SCALE:.*]]: f32, %[[S:.*]]: f32)
// CHECK: %[[NINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK: %[[KEY0:.*]] = arith.addi %[[KEY]], %{{.*}} : i32
// CHECK: %[[ROW8:.*]] = arith.addi %[[ROW]], %c8_i32
// CHECK-NOT: arith.mulf
// CHECK: %[[V0:.*]] = arith.cmpi sge, %[[ROW]], %[[KEY0]] : i32
// CHECK: arith.select %[[V0]], %[[S]], %[[NINF]] : f32
// The third register: row + 8, the same key.
// CHECK: arith.cmpi sge, %[[ROW8]], %[[KEY0]] : i32
// CHECK-COUNT-5: arith.cmpi sge
// CHECK-NOT: arith.cmpi sge
// CHECK: llvm.return
gpu.module @fa_kernels {
  llvm.func @mask_only(%key: i32, %row: i32, %b: i32, %h: i32, %scale: f32, %x: f32) {
    %s = fagpu.splat %x : !acc
    %r = fagpu.modify_scores %s keys(%key) rows(%row) batch(%b) head(%h) scale(%scale) : !acc
      mask_mod {
      ^bb0(%bi: index, %hi: index, %i: index, %j: index):
        %c = arith.cmpi sge, %i, %j : index
        fagpu.yield %c : i1
      }
    llvm.return
  }
}

// -----

!acc = !fagpu.fragment<64x16xf32, accumulator>

// A softcap and a score_mod: the score in natural units (scale_log2 ln 2),
// capped by tanh.approx, through the region (math.exp as ex2.approx of x
// log2 e, math.log as lg2.approx times ln 2), left in natural units (the
// step's scale is log2 e then).
// CHECK-LABEL: llvm.func @softcap_score_mod
// CHECK-SAME: (%[[KEY:.*]]: i32, %[[ROW:.*]]: i32, %[[B:.*]]: i32, %[[H:.*]]: i32, %[[SCALE:.*]]: f32, %[[S:.*]]: f32)
// CHECK: %[[NAT:.*]] = arith.mulf %[[SCALE]], %{{.*}} : f32
// CHECK: %[[X:.*]] = arith.mulf %[[S]], %[[NAT]] : f32
// CHECK: %[[XC:.*]] = arith.mulf %[[X]], %{{.*}} : f32
// CHECK: %[[T:.*]] = llvm.inline_asm {{.*}}"tanh.approx.f32 $0, $1;", "=f,f" %[[XC]]
// CHECK: %[[CAP:.*]] = arith.mulf %[[T]], %{{.*}} : f32
// The index_cast of the head to i32 is no op: the head is i32 already.
// CHECK: %[[HF:.*]] = arith.sitofp %[[H]] : i32 to f32
// CHECK: %[[E:.*]] = arith.mulf %[[HF]], %{{.*}} : f32
// CHECK: %[[EX:.*]] = llvm.inline_asm {{.*}}"ex2.approx.ftz.f32 $0, $1;", "=f,f" %[[E]]
// CHECK: %[[L:.*]] = llvm.inline_asm {{.*}}"lg2.approx.ftz.f32 $0, $1;", "=f,f" %[[EX]]
// CHECK: %[[LN:.*]] = arith.mulf %[[L]], %{{.*}} : f32
// CHECK: %[[SUM:.*]] = arith.addf %[[CAP]], %[[LN]] : f32
// CHECK-NOT: arith.mulf %[[SUM]]
// CHECK-NOT: arith.select
// CHECK: llvm.return
gpu.module @fa_kernels {
  llvm.func @softcap_score_mod(%key: i32, %row: i32, %b: i32, %h: i32, %scale: f32, %x: f32) {
    %s = fagpu.splat %x : !acc
    %r = fagpu.modify_scores %s keys(%key) rows(%row) batch(%b) head(%h) scale(%scale) {softcap = 30.0 : f32} : !acc
      score_mod {
      ^bb0(%v: f32, %bi: index, %hi: index, %i: index, %j: index):
        %hh = arith.index_cast %hi : index to i32
        %hf = arith.sitofp %hh : i32 to f32
        %e = math.exp %hf : f32
        %l = math.log %e : f32
        %r2 = arith.addf %v, %l : f32
        fagpu.yield %r2 : f32
      }
    llvm.return
  }
}

// -----

!acc = !fagpu.fragment<64x16xf32, accumulator>

// A mask reading a captured [256] i32 tensor (document ids) at the row and
// the key: the indices are clamped to the sequence's last row (Nq - 1) and
// key (Nk - 1); each element is read once for all the thread's scores
// (the row's id and each key's), at its index clamped into the capture;
// whether every index was inside it is asserted once, after the reads (a
// trap otherwise).
// CHECK-LABEL: llvm.func @documents
// CHECK-SAME: (%[[KEY:.*]]: i32, %[[ROW:.*]]: i32, %[[B:.*]]: i32, %[[H:.*]]: i32, %[[SCALE:.*]]: f32, %[[S:.*]]: f32, %[[NQ:.*]]: i32, %[[NK:.*]]: i32, %[[IDS:.*]]: !llvm.ptr<1>)
// CHECK: %[[LASTROW:.*]] = arith.subi %[[NQ]], %c1_i32
// CHECK: %[[LASTKEY:.*]] = arith.subi %[[NK]], %c1_i32
// CHECK: %[[R:.*]] = arith.minui %[[ROW]], %[[LASTROW]] : i32
// CHECK: arith.minui %{{.*}}, %[[LASTKEY]] : i32
// CHECK: %[[IN:.*]] = arith.cmpi ult, %[[R]], %c256_i32 : i32
// CHECK: %[[RC:.*]] = arith.minui %[[R]], %c255_i32 : i32
// CHECK: %[[OFF:.*]] = arith.extui %[[RC]] : i32 to i64
// CHECK: %[[LIN:.*]] = arith.addi %{{.*}}, %[[OFF]] : i64
// CHECK: %[[P:.*]] = llvm.getelementptr %[[IDS]][%[[LIN]]] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i32
// CHECK: %[[DOC_ROW:.*]] = llvm.load %[[P]] {alignment = 4 : i64} : !llvm.ptr<1> -> i32
// CHECK: %[[DOC_KEY:.*]] = llvm.load
// CHECK: arith.cmpi eq, %[[DOC_ROW]], %[[DOC_KEY]] : i32
// CHECK: arith.select
// Four more reads (the second row, three more keys): six for 8 scores.
// CHECK-COUNT-4: llvm.load
// CHECK-NOT: llvm.load
// CHECK: %[[OK:.*]] = arith.xori %{{.*}}, %true : i1
// CHECK-NEXT: scf.if %[[OK]] {
// CHECK-NEXT: llvm.intr.trap
// CHECK-NOT: llvm.intr.trap
// CHECK: llvm.return
gpu.module @fa_kernels {
  llvm.func @documents(%key: i32, %row: i32, %b: i32, %h: i32, %scale: f32, %x: f32, %nq: i32, %nk: i32, %ids: !llvm.ptr<1>) {
    %s = fagpu.splat %x : !acc
    %r = fagpu.modify_scores %s keys(%key) rows(%row) batch(%b) head(%h) scale(%scale) within(%nq, %nk) captures(%ids : !llvm.ptr<1>) : !acc
      mask_mod {
      ^bb0(%bi: index, %hi: index, %i: index, %j: index, %d: tensor<256xi32>):
        %di = tensor.extract %d[%i] : tensor<256xi32>
        %dj = tensor.extract %d[%j] : tensor<256xi32>
        %same = arith.cmpi eq, %di, %dj : i32
        fagpu.yield %same : i1
      }
    llvm.return
  }
}

// -----

// A lanes fragment (sm_100a: tcgen05.ld gives each thread its row of S):
// register c is the thread's row row0 and key key_start + c.
!lanes = !fagpu.fragment<128x4xf32, lanes>
// CHECK-LABEL: llvm.func @lanes_mask
// CHECK-SAME: (%[[KEY:.*]]: i32, %[[ROW:.*]]: i32, %[[B:.*]]: i32, %[[H:.*]]: i32, %[[SCALE:.*]]: f32, %[[S:.*]]: f32)
// CHECK: %[[K1:.*]] = arith.addi %[[KEY]], %c1_i32 : i32
// CHECK: %[[K2:.*]] = arith.addi %[[KEY]], %c2_i32 : i32
// CHECK: %[[K3:.*]] = arith.addi %[[KEY]], %c3_i32 : i32
// CHECK: arith.cmpi sge, %[[ROW]], %[[KEY]] : i32
// CHECK: arith.cmpi sge, %[[ROW]], %[[K1]] : i32
// CHECK: arith.cmpi sge, %[[ROW]], %[[K2]] : i32
// CHECK: arith.cmpi sge, %[[ROW]], %[[K3]] : i32
// CHECK-NOT: arith.cmpi sge
// CHECK: llvm.return
gpu.module @fa_kernels {
  llvm.func @lanes_mask(%key: i32, %row: i32, %b: i32, %h: i32, %scale: f32, %x: f32) {
    %s = fagpu.splat %x : !lanes
    %r = fagpu.modify_scores %s keys(%key) rows(%row) batch(%b) head(%h) scale(%scale) : !lanes
      mask_mod {
      ^bb0(%bi: index, %hi: index, %i: index, %j: index):
        %c = arith.cmpi sge, %i, %j : index
        fagpu.yield %c : i1
      }
    llvm.return
  }
}
