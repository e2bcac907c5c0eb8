// RUN: fa-opt %s --split-input-file --fagpu-build-kernels | FileCheck %s

// fagpu-build-kernels with score_mod and mask_mod on sm_80: as in the sm_90a
// kernel, fagpu.modify_scores comes before each block's softmax step with
// the CTA's batch and query head, the thread's first row and the block's
// first key, at the kernel's scale and with the softcap; the step then
// takes the natural-unit scores at log2(e) and applies no softcap. The
// captures are pointer parameters after the kernel's own, which
// modify_scores reads within the sequence's queries and keys; the name
// carries a hash of the regions.

#m = #fagpu.schedule<block_r = 64, block_c = 64, consumers = 0, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 2, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = true>
// CHECK-LABEL: func.func @mods
// CHECK: gpu.launch_func @fa_kernels::@[[NAME:fa2_sm80_d64_br64_bc64_f16_mod[0-9a-f]{16}_sc30]]
// CHECK: llvm.func @[[NAME]](
// CHECK-SAME: %[[CAP:arg[0-9]+]]: !llvm.ptr<1> {llvm.noalias})
// CHECK-SAME: {dtype = "f32", kind = "pointer", name = "capture0", shape = ["4"]}]
// CHECK: %[[S:.*]] = fagpu.modify_scores {{.*}} within(%{{.*}}, %{{.*}}) captures(%[[CAP]] : !llvm.ptr<1>) {softcap = 3.000000e+01 : f32} : <64x64xf32, accumulator> score_mod {
// CHECK: tensor.extract
// CHECK: fagpu.yield %{{.*}} : f32
// CHECK-NEXT: } mask_mod {
// CHECK: fagpu.yield %{{.*}} : i1
// CHECK: %[[LOG2E:.*]] = arith.constant 1.44269502 : f32
// CHECK: fagpu.softmax_step %[[S]], {{.*}} scale %[[LOG2E]] {tree_row_max} :
func.func @mods(%q: memref<?x?x?x64xf16>, %o: memref<?x?x?x64xf16>, %lse: memref<?x?x?xf32>, %slopes: memref<4xf32>) {
  fagpu.attention %q, %q, %q captures(%slopes : memref<4xf32>) outs(%o, %lse) {target = #fagpu.target<sm_80>, scale = 0.125 : f32, softcap = 30.0 : f32, schedule = #m}
    : memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?x64xf16>, memref<?x?x?xf32>
    score_mod {
    ^bb0(%x: f32, %b: index, %h: index, %i: index, %j: index, %m: tensor<4xf32>):
      %slope = tensor.extract %m[%h] : tensor<4xf32>
      %r = arith.addf %x, %slope : f32
      fagpu.yield %r : f32
    } mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index, %m: tensor<4xf32>):
      %c = arith.cmpi sge, %i, %j : index
      fagpu.yield %c : i1
    }
  return
}
