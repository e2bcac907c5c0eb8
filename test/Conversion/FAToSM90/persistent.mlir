// Persistent CTAs: CTA x runs tiles x, x + gridDim.x, ... The default
// (persistent=auto) turns it on for non-causal D = 64 and 128. Each tile
// starts its K/V blocks at ring stage 0; the loop carries the parity bit of
// every stage (flipped when the tile used the stage an odd number of
// times) and the tile count (Q buffer and parity of q_full / q_empty).
// Where two Q buffers fit (`_q2`), the consumers run the cross-tile
// pipeline: the CTA's first tile is peeled, and each later tile issues the
// previous tile's last P V with its own first S, then stores the previous
// tile's rows; the loop carries that pending tile (O, m, l, P, alpha, its
// V stage and parity, its rows).
// RUN: fa-opt %s --split-input-file --convert-fa-to-sm90 | FileCheck %s
// RUN: fa-opt %s --split-input-file --convert-fa-to-sm90=persistent=false | FileCheck %s --check-prefix=OFF
// RUN: fa-opt %s --split-input-file --convert-fa-to-sm90=persistent=true | FileCheck %s --check-prefix=ON
// RUN: not fa-opt %s --split-input-file --convert-fa-to-sm90=persistent=maybe 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: cannot be lowered to sm_90a wgmma: persistent must be true, false or auto, got 'maybe'

func.func @d64(%q: memref<?x?x?x64xf16>, %k: memref<?x?x?x64xf16>,
               %v: memref<?x?x?x64xf16>, %o: memref<?x?x?x64xf16>,
               %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v outs(%o, %lse : memref<?x?x?x64xf16>, memref<?x?x?xf32>)
      : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>
  return
}
// CHECK-LABEL: func.func @d64
// CHECK: gpu.launch_func @fa_kernels::@fa3_sm90_d64_br192_bc128_s3_f16_persistent_q2
// CHECK: persistent = true
// The warpgroup index is shuffled from lane 0: ptxas then keeps the Q
// descriptors in uniform registers.
// CHECK: %[[GROUP:.*]] = arith.divui %{{.*}}, %c128_i32
// CHECK: nvvm.shfl.sync  idx %c-1_i32, %[[GROUP]], %c0_i32
// The producer's tile loop, then the consumers'.
// CHECK: %[[CTA:.*]] = nvvm.read.ptx.sreg.ctaid.x
// CHECK: %[[GRID:.*]] = nvvm.read.ptx.sreg.nctaid.x
// CHECK: scf.for %{{.*}} = %[[CTA]] to %{{.*}} step %[[GRID]] iter_args(%[[PHASES:.*]] = %c0_i32{{.*}}, %[[TILES:.*]] = %c0_i32{{.*}})
// Consumers: CTAs with no tile skip everything.
// CHECK: %[[C2:.*]] = nvvm.read.ptx.sreg.ctaid.x
// CHECK: %[[G3:.*]] = nvvm.read.ptx.sreg.nctaid.x
// CHECK: %[[ANY:.*]] = arith.cmpi ult, %[[C2]],
// CHECK: scf.if %[[ANY]] {
// The peeled first tile (Q buffer 0, parity 0), then the loop from the
// CTA's second tile: tile count 1, the phase bits after the first tile,
// and the pending tile.
// CHECK: %[[SECOND:.*]] = arith.addi %[[C2]], %[[G3]]
// CHECK: scf.for %{{.*}} = %[[SECOND]] to %{{.*}} step %[[G3]] iter_args(%[[P2:.*]] = %{{.*}}, %[[T2:.*]] = %c1_i32{{.*}}, %{{.*}}) -> (i32, i32, f32,
// The previous tile's last P V (wgmma with A from registers) is issued
// right after this tile's first S, before the turn passes on.
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.barrier.arrive
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 1
// Stage s was used ceil((blocks - s) / 3) times: its bit flips if odd.
// The consumers read the bit of block j's stage for its barrier parity.
// CHECK: %[[SHIFTED:.*]] = arith.shrui %[[P2]], %{{.*}}
// CHECK: arith.andi %[[SHIFTED]], %c1_i32
// CHECK: %[[BIT0:.*]] = arith.xori %[[P2]], %{{.*}} : i32
// CHECK: %[[BIT1:.*]] = arith.xori %[[BIT0]], %{{.*}}
// CHECK: %[[BIT2:.*]] = arith.xori %[[BIT1]], %{{.*}}
// CHECK: %[[NEXT:.*]] = arith.addi %[[T2]], %c1_i32
// CHECK-NEXT: scf.yield %[[BIT2]], %[[NEXT]], %{{.*}} : i32, i32, f32,
// After the loop: the last tile's P V and store.
// CHECK: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16
// CHECK: llvm.return
// OFF-LABEL: func.func @d64
// OFF: gpu.launch_func @fa_kernels::@fa3_sm90_d64_br192_bc128_s3_f16 blocks
// OFF-NOT: nvvm.read.ptx.sreg.nctaid.x
// OFF: llvm.return
// ON-LABEL: func.func @d64
// ON: @fa3_sm90_d64_br192_bc128_s3_f16_persistent_q2

// -----

// Causal tiles differ in length: a persistent grid deals them as a snake,
// every other whole round of gridDim.x tiles reversed, so a CTA pairs long
// and short tiles of neighbouring heads. Causal kernels are persistent on
// request only (one tile per CTA by default).
func.func @d128_causal(%q: memref<?x?x?x128xf16>, %k: memref<?x?x?x128xf16>,
                       %v: memref<?x?x?x128xf16>, %o: memref<?x?x?x128xf16>,
                       %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v outs(%o, %lse : memref<?x?x?x128xf16>, memref<?x?x?xf32>)
      {causal} : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>
  return
}
// CHECK-LABEL: func.func @d128_causal
// CHECK: gpu.launch_func @fa_kernels::@fa3_sm90_d128_br128_bc128_s3_f16_causal blocks
// CHECK-NOT: nvvm.read.ptx.sreg.nctaid.x
// CHECK: llvm.return
// ON-LABEL: func.func @d128_causal
// ON: @fa3_sm90_d128_br128_bc128_s2_f16_causal_persistent_q2
// ON: scf.for %[[TILE:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args
// ON: %[[G:.*]] = nvvm.read.ptx.sreg.nctaid.x
// ON-NEXT: %[[ROUND:.*]] = arith.divui %[[TILE]], %[[G]]
// ON-NEXT: %[[POS:.*]] = arith.remui %[[TILE]], %[[G]]
// ON: %[[WHOLE:.*]] = arith.cmpi ule
// ON: %[[ODD:.*]] = arith.trunci %[[ROUND]] : i32 to i1
// ON: %[[BACK:.*]] = arith.subi %{{.*}}, %[[POS]]
// ON: %[[REV:.*]] = arith.addi %{{.*}}, %[[BACK]]
// ON: %[[FLIP:.*]] = arith.andi %[[WHOLE]], %[[ODD]]
// ON-NEXT: %[[DEALT:.*]] = arith.select %[[FLIP]], %[[REV]], %[[TILE]]
// ON-NEXT: arith.remui %[[DEALT]]
// ON-NEXT: arith.divui %[[DEALT]]
