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
// RUN: fa-opt %s --split-input-file --fa-sm90-kernel-pipeline | FileCheck %s
// RUN: fa-opt %s --split-input-file --fa-sm90-kernel-pipeline=persistent=off | FileCheck %s --check-prefix=OFF
// RUN: fa-opt %s --split-input-file --fa-sm90-kernel-pipeline=persistent=on | FileCheck %s --check-prefix=ON
// RUN: not fa-opt %s --split-input-file --fa-sm90-kernel-pipeline=persistent=maybe 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: for the --persistent option: Cannot find option named 'maybe'!

func.func @d64(%q: memref<?x?x?x64xf16>, %k: memref<?x?x?x64xf16>,
               %v: memref<?x?x?x64xf16>, %o: memref<?x?x?x64xf16>,
               %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v outs(%o, %lse : memref<?x?x?x64xf16>, memref<?x?x?xf32>)
      : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>
  return
}
// CHECK-LABEL: func.func @d64
// CHECK: gpu.launch_func @fa_kernels::@fa3_sm90_d64_br192_bc128_s3_f16_persistent_q2
// CHECK: scheduler = static, q_buffers = 2
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
// CHECK-NEXT: arith.constant 256
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
// The host launch's grid is the kernel's formula (fagpu::launchGrid), as
// the runtimes evaluate it: min(ceil(Nq / block_r) * Hq * B, SMs *
// ctas_per_sm), with no device to ask for SMs (2^31 - 1): a CTA per tile.
// ON: %[[X:.*]] = arith.minui %{{.*}}, %c2147483647 : index
// ON: gpu.launch_func @fa_kernels::@fa3_sm90_d64_br192_bc128_s3_f16_persistent_q2 blocks in (%[[X]], %c1{{.*}}, %c1{{.*}})

// -----

// Causal tiles differ in length: persistent CTAs (the default at D = 128)
// take them from a dynamic tile scheduler. The host passes a zeroed u32
// counter as the last kernel parameter; CTA x starts with tile x, and the
// producer fetches each next tile as gridDim.x + atomicAdd(counter, 1)
// after issuing a tile's loads. It writes the tile's index into the slot of
// the Q buffer it loads, before the q_full arrival that releases it; the
// consumers read it after their q_full wait. The fetch that returns
// tiles - 1 is the launch's last and resets the counter; the index past
// the last tile goes through the next slot with a bare q_full arrival, and
// ends the consumers' loop.
func.func @d128_causal(%q: memref<?x?x?x128xf16>, %k: memref<?x?x?x128xf16>,
                       %v: memref<?x?x?x128xf16>, %o: memref<?x?x?x128xf16>,
                       %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v outs(%o, %lse : memref<?x?x?x128xf16>, memref<?x?x?xf32>)
      {causal} : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>
  return
}
// CHECK-LABEL: func.func @d128_causal
// CHECK: %[[T0:.*]] = gpu.wait async
// CHECK-NEXT: %[[COUNTER:.*]], %[[T1:.*]] = gpu.alloc async [%[[T0]]] () : memref<1xi32>
// CHECK: %[[T2:.*]] = gpu.memset async [%[[T1]]] %[[COUNTER]], %c0_i32{{.*}} : memref<1xi32>, i32
// CHECK: %[[T3:.*]] = gpu.launch_func async [%[[T2]]] @fa_kernels::@fa3_sm90_d128_br128_bc128_s2_f16_causal_persistent_q2 blocks
// CHECK-SAME: %{{.*}} : i32, %{{.*}} : !llvm.ptr<1>)
// CHECK-NEXT: %[[T4:.*]] = gpu.dealloc async [%[[T3]]] %[[COUNTER]]
// CHECK-NEXT: gpu.wait [%[[T4]]]
// CHECK: llvm.func @fa3_sm90_d128_br128_bc128_s2_f16_causal_persistent_q2(
// CHECK-SAME: %arg10: i32, %[[CTR:arg11]]: !llvm.ptr<1>)
// CHECK-SAME: scheduler = dynamic
// Producer: the loop runs while the tile id is below the tile count.
// CHECK: %[[FIRST:.*]] = nvvm.read.ptx.sreg.ctaid.x
// CHECK: arith.cmpi ult, %[[FIRST]], %[[TILES:.*]] : i32
// CHECK: scf.while (%[[ID:.*]] = %[[FIRST]], %{{.*}} = %c0_i32{{.*}}, %{{.*}} = %c0_i32{{.*}}) : (i32, i32, i32)
// CHECK-NEXT: %[[MORE:.*]] = arith.cmpi ult, %[[ID]], %[[TILES]]
// CHECK-NEXT: scf.condition(%[[MORE]])
// CHECK: ^bb0(%[[TILE:.*]]: i32, %{{.*}}: i32, %{{.*}}: i32):
// The tile's index goes into its Q buffer's slot, then the Q load.
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: llvm.store volatile %[[TILE]], %{{.*}} : i32, !llvm.ptr<3>
// CHECK: nvvm.mbarrier.arrive.expect_tx
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global
// After the tile's loads: the next tile from the counter.
// CHECK: scf.for
// CHECK: %[[TAKEN:.*]] = llvm.atomicrmw add %[[CTR]], %c1_i32{{.*}} monotonic
// CHECK: %[[LASTID:.*]] = arith.subi %{{.*}}, %c1_i32
// CHECK-NEXT: %[[IS_LAST:.*]] = arith.cmpi eq, %[[TAKEN]], %[[LASTID]]
// CHECK-NEXT: scf.if %[[IS_LAST]] {
// CHECK: llvm.atomicrmw xchg %[[CTR]], %c0_i32{{.*}} monotonic
// CHECK: %[[GRID:.*]] = nvvm.read.ptx.sreg.nctaid.x
// CHECK-NEXT: %[[NEXT:.*]] = arith.addi %[[GRID]], %[[TAKEN]]
// CHECK: scf.yield %[[NEXT]], %{{.*}}, %{{.*}} : i32, i32, i32
// The end: the id past the last tile through the next slot, a bare
// arrival on its q_full.
// CHECK: llvm.store volatile %{{.*}}#0, %{{.*}} : i32, !llvm.ptr<3>
// CHECK: nvvm.mbarrier.arrive %{{.*}} : !llvm.ptr<3>
// Consumers: the peeled first tile is the CTA's own; the second comes from
// the slot of Q buffer 1 once its q_full completes.
// CHECK: nvvm.setmaxregister  increase 240
// CHECK: nvvm.read.ptx.sreg.ctaid.x
// CHECK: nvvm.wgmma.mma_async
// CHECK: %[[SECOND:.*]] = llvm.load volatile %{{.*}} : !llvm.ptr<3> -> i32
// CHECK: scf.while (%[[CID:.*]] = %[[SECOND]], %{{.*}} = %{{.*}}, %{{.*}} = %c1_i32{{.*}}, {{.*}}) : (i32, i32, i32, f32,
// CHECK-NEXT: %[[CMORE:.*]] = arith.cmpi ult, %[[CID]], %{{.*}}
// CHECK-NEXT: scf.condition(%[[CMORE]])
// Each later tile ends by reading the next tile's index.
// CHECK: %[[CNEXT:.*]] = llvm.load volatile %{{.*}} : !llvm.ptr<3> -> i32
// CHECK: scf.yield %[[CNEXT]],
// After the loop: the last tile's P V and store.
// CHECK: wgmma.mma_async
// CHECK: llvm.return
// OFF-LABEL: func.func @d128_causal
// OFF: gpu.launch_func @fa_kernels::@fa3_sm90_d128_br128_bc128_s3_f16_causal blocks
// OFF-NOT: nvvm.read.ptx.sreg.nctaid.x
// OFF-NOT: llvm.atomicrmw
// OFF: llvm.return
// ON-LABEL: func.func @d128_causal
// ON: @fa3_sm90_d128_br128_bc128_s2_f16_causal_persistent_q2

// -----

// Non-causal persistent kernels deal their equal tiles statically and take
// no counter.
func.func @d128(%q: memref<?x?x?x128xf16>, %k: memref<?x?x?x128xf16>,
                %v: memref<?x?x?x128xf16>, %o: memref<?x?x?x128xf16>,
                %lse: memref<?x?x?xf32>) {
  fa.attention %q, %k, %v outs(%o, %lse : memref<?x?x?x128xf16>, memref<?x?x?xf32>)
      : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>
  return
}
// CHECK-LABEL: func.func @d128
// CHECK-NOT: gpu.alloc
// CHECK: gpu.launch_func @fa_kernels::@fa3_sm90_d128_br128_bc128_s2_f16_persistent_q2 blocks
// CHECK-SAME: %{{.*}} : f32, %{{.*}} : i32)
// CHECK: scheduler = static
// CHECK-NOT: llvm.atomicrmw
// CHECK: llvm.return
