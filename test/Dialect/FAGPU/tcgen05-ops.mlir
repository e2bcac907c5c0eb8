// RUN: fa-opt %s | fa-opt | FileCheck %s

// The sm_100a kernel-body ops print and parse back.

// CHECK-LABEL: llvm.func @roundtrip
// CHECK: fagpu.create_pipeline {{.*}} : <stages = 1, buffers = 1, 128x64xf16, fill_once>
// CHECK: %[[B:.*]] = fagpu.create_barriers offset 49224 : <2>
// CHECK: fagpu.init_barriers %{{.*}}, %{{.*}}, %[[B]] arrivals [1, 1, 128] : !fagpu.pipeline<stages = 1, buffers = 1, 128x64xf16, fill_once>, !fagpu.pipeline<stages = 2, buffers = 2, 64x64xf16>, !fagpu.barriers<2>
// CHECK: %[[T:.*]] = fagpu.tmem_alloc warp %{{.*}} alloc_warp 5 slot 49248 : <128x256xf32>
// CHECK: fagpu.tcgen05_roles %{{.*}} load_warp 4 mma_warp 5 softmax {
// CHECK: fagpu.barrier_wait %[[B]] use %{{.*}} : <2>
// CHECK: fagpu.tmem_slice %[[T]][%{{.*}}] : <128x256xf32> -> <128x64xf32>
// CHECK: fagpu.tmem_load %{{.*}} : <128x64xf32> -> <128x64xf32, lanes>
// CHECK: fagpu.softmax_step {{.*}} : <128x64xf32, lanes>, <128xf32, lanes> -> <128x64xf32, lanes>
// CHECK: fagpu.rescale %{{.*}}, %{{.*}} : !fagpu.tmem<128x64xf32>, <128xf32, lanes>
// CHECK: fagpu.tmem_store %{{.*}}, %{{.*}} : <128x64xf32, lanes>, <128x64xf16>
// CHECK: fagpu.barrier_arrive %[[B]] use %{{.*}} : <2>
// CHECK: } load {
// CHECK: } mma {
// CHECK: fagpu.mma %{{.*}}, %{{.*}} acc(%{{.*}}) accumulate(%{{.*}}) {mn_major} : !fagpu.tmem<128x64xf16>, <64x64xf16>, !fagpu.tmem<128x64xf32>
// CHECK: fagpu.pipeline_release %{{.*}}[%{{.*}}] buffer 1 {commit}
// CHECK: fagpu.mma_commit %[[B]] use %{{.*}} : <2>
// CHECK: fagpu.tmem_dealloc %[[T]] warp %{{.*}} alloc_warp 5 : <128x256xf32>

!q = !fagpu.pipeline<stages = 1, buffers = 1, 128x64xf16, fill_once>
!kv = !fagpu.pipeline<stages = 2, buffers = 2, 64x64xf16>
!row = !fagpu.fragment<128xf32, lanes>
!s = !fagpu.fragment<128x64xf32, lanes>

llvm.func @roundtrip(%warp: i32, %i: i32, %row: i32, %nk: i32, %scale: f32,
                     %not_first: i1, %stage: i32) {
  %c0 = arith.constant 0 : i32
  %q = fagpu.create_pipeline {barrier_offset = 49152 : i64, tile_offset = 0 : i64} : !q
  %kv = fagpu.create_pipeline {barrier_offset = 49160 : i64, tile_offset = 16384 : i64} : !kv
  %b = fagpu.create_barriers offset 49224 : !fagpu.barriers<2>
  fagpu.init_barriers %q, %kv, %b arrivals [1, 1, 128] : !q, !kv, !fagpu.barriers<2>
  %tmem = fagpu.tmem_alloc warp %warp alloc_warp 5 slot 49248 : !fagpu.tmem<128x256xf32>
  fagpu.tcgen05_roles %warp load_warp 4 mma_warp 5 softmax {
    %ninf = arith.constant 0xFF800000 : f32
    %m0 = fagpu.splat %ninf : !row
    fagpu.barrier_wait %b use %i : !fagpu.barriers<2>
    %st = fagpu.tmem_slice %tmem[%c0] : !fagpu.tmem<128x256xf32> -> !fagpu.tmem<128x64xf32>
    %s = fagpu.tmem_load %st : !fagpu.tmem<128x64xf32> -> !s
    %p, %m, %l, %alpha = fagpu.softmax_step %s, %m0, %m0 keys(%row, %nk) row %row scale %scale : !s, !row -> !s
    fagpu.rescale %st, %alpha : !fagpu.tmem<128x64xf32>, !row
    %pt = fagpu.tmem_slice %tmem[%c0] : !fagpu.tmem<128x256xf32> -> !fagpu.tmem<128x64xf16>
    fagpu.tmem_store %p, %pt : !s, !fagpu.tmem<128x64xf16>
    fagpu.barrier_arrive %b use %i : !fagpu.barriers<2>
  } load {
    %z = arith.constant 0 : i32
  } mma {
    %o = fagpu.tmem_slice %tmem[%c0] : !fagpu.tmem<128x256xf32> -> !fagpu.tmem<128x64xf32>
    %pt = fagpu.tmem_slice %tmem[%c0] : !fagpu.tmem<128x256xf32> -> !fagpu.tmem<128x64xf16>
    %vt = fagpu.pipeline_tile %kv[%stage] buffer 1 : !kv -> !fagpu.smem_tile<64x64xf16>
    fagpu.mma %pt, %vt acc(%o) accumulate(%not_first) {mn_major} : !fagpu.tmem<128x64xf16>, !fagpu.smem_tile<64x64xf16>, !fagpu.tmem<128x64xf32>
    fagpu.pipeline_release %kv[%stage] buffer 1 {commit} : !kv
    fagpu.mma_commit %b use %i : !fagpu.barriers<2>
  }
  fagpu.tmem_dealloc %tmem warp %warp alloc_warp 5 : !fagpu.tmem<128x256xf32>
  llvm.return
}
