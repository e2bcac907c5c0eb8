// RUN: fa-opt %s | fa-opt | FileCheck %s

// The backward kernel's ops print and parse back: the kernel-level op and
// the kernel-body ops on transposed score tiles.

!q = memref<?x?x?x64xf16>
!r = memref<?x?x?xf32>

// CHECK-LABEL: func.func @kernel
// CHECK: fagpu.attention_backward %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} outs(%{{.*}}, %{{.*}}) {block_c = 64 : i64, block_r = 64 : i64, bottom_right, causal, deterministic, scale = 1.250000e-01 : f32, target = #fagpu.target<sm_80>}
func.func @kernel(%q: !q, %k: !q, %v: !q, %lse: !r, %do: !q, %d: !r,
                  %dq: memref<?x?x?x64xf32>, %dk: !q, %dv: !q) {
  fagpu.attention_backward %q, %k, %v, %lse, %do, %d, %dq outs(%dk, %dv)
      {target = #fagpu.target<sm_80>, scale = 0.125 : f32, causal,
       bottom_right, block_r = 64 : i64, block_c = 64 : i64, deterministic}
    : !q, !q, !q, !r, !q, !r, memref<?x?x?x64xf32>, !q, !q
  return
}

!acc = !fagpu.fragment<64x64xf32, accumulator>
!opa = !fagpu.fragment<64x64xf16, operand_a>

// CHECK-LABEL: func.func @body
// CHECK: %[[P:.*]] = fagpu.backward_probs %{{.*}} lse %{{.*}} queries(%{{.*}}, %{{.*}}) keys(%{{.*}}, %{{.*}}) scale_log2 %{{.*}} causal_shift %{{.*}} : {{(!llvm.ptr)?}}<1> : <64x64xf32, accumulator>
// CHECK: fagpu.backward_probs %{{.*}} lse %{{.*}} queries(%{{.*}}, %{{.*}}) keys(%{{.*}}, %{{.*}}) scale_log2 %{{.*}} : {{(!llvm.ptr)?}}<1> : <64x64xf32, accumulator>
// CHECK: %[[DS:.*]] = fagpu.backward_grad_scores %[[P]], %{{.*}} row_dots %{{.*}} queries(%{{.*}}, %{{.*}}) : {{(!llvm.ptr)?}}<1> : <64x64xf32, accumulator>
// CHECK: fagpu.to_operand_a %[[DS]] : <64x64xf32, accumulator> -> <64x64xf16, operand_a>
// CHECK: fagpu.store_transposed %[[DS]], %{{.*}} : <64x64xf32, accumulator>, <64x64xf16, row_major>
// CHECK: fagpu.semaphore_wait %{{.*}} equals %{{.*}} : {{(!llvm.ptr)?}}<1>
// CHECK: fagpu.atomic_add_rows %{{.*}} rows(%{{.*}}, %{{.*}}) to %{{.*}} scale %{{.*}} : {{(!llvm.ptr)?}}<1> : <64x64xf32, accumulator>
// CHECK: fagpu.semaphore_signal %{{.*}} : {{(!llvm.ptr)?}}<1>
func.func @body(%s: !acc, %dp: !acc, %ptr: !llvm.ptr<1>, %i: i32, %f: f32) {
  %p = fagpu.backward_probs %s lse %ptr queries(%i, %i) keys(%i, %i)
      scale_log2 %f causal_shift %i : !llvm.ptr<1> : !acc
  %p2 = fagpu.backward_probs %s lse %ptr queries(%i, %i) keys(%i, %i)
      scale_log2 %f : !llvm.ptr<1> : !acc
  %ds = fagpu.backward_grad_scores %p, %dp row_dots %ptr queries(%i, %i)
      : !llvm.ptr<1> : !acc
  %a = fagpu.to_operand_a %ds : !acc -> !opa
  %t = fagpu.shared_tile offset 0 : !fagpu.smem_tile<64x64xf16, row_major>
  fagpu.store_transposed %ds, %t : !acc, !fagpu.smem_tile<64x64xf16, row_major>
  fagpu.semaphore_wait %ptr equals %i : !llvm.ptr<1>
  fagpu.atomic_add_rows %ds rows(%i, %i) to %ptr scale %f : !llvm.ptr<1> : !acc
  fagpu.semaphore_signal %ptr : !llvm.ptr<1>
  return
}
