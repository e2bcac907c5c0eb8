// RUN: fa-opt %s --fagpu-build-kernels | FileCheck %s

// fagpu-build-kernels with score_mod and mask_mod on sm_100a: as in the
// sm_90a and sm_80 kernels, fagpu.modify_scores comes before each block's
// softmax step, here on the thread's row of S as tcgen05.ld gives it (a
// lanes fragment), with the tile's batch and query head, the thread's row
// and the block's first key, at the kernel's scale and with the softcap;
// the step then takes the natural-unit scores at log2(e) and applies no
// softcap. The captures are pointer parameters after the kernel's own,
// which modify_scores reads within the sequence's queries and keys; the
// name carries a hash of the regions.

// CHECK-LABEL: func.func @mods
// CHECK: gpu.launch_func @fa_kernels::@[[NAME:fa4_sm100_d128_br128_bc128_s3_f16_mod[0-9a-f]{16}_sc30]]
// CHECK: llvm.func @[[NAME]](
// CHECK-SAME: %[[CAP:arg[0-9]+]]: !llvm.ptr<1> {llvm.noalias})
// CHECK-SAME: {dtype = "f32", kind = "pointer", name = "capture0", shape = ["4"]}]
// CHECK: fagpu.tcgen05_roles
// CHECK: %[[S:.*]] = fagpu.tmem_load %{{.*}} : <128x128xf32> -> <128x128xf32, lanes>
// CHECK: %[[M:.*]] = fagpu.modify_scores %[[S]] {{.*}} within(%{{.*}}, %{{.*}}) captures(%[[CAP]] : !llvm.ptr<1>) {softcap = 3.000000e+01 : f32} : <128x128xf32, lanes> score_mod {
// CHECK: tensor.extract
// CHECK: fagpu.yield %{{.*}} : f32
// CHECK-NEXT: } mask_mod {
// CHECK: fagpu.yield %{{.*}} : i1
// CHECK: %[[LOG2E:.*]] = arith.constant 1.44269502 : f32
// CHECK: fagpu.softmax_step %[[M]], {{.*}} scale %[[LOG2E]] : <128x128xf32, lanes>
// The masked blocks' loop: the same, then the step's own masks.
// CHECK: %[[M2:.*]] = fagpu.modify_scores {{.*}} : <128x128xf32, lanes> score_mod {
// CHECK: fagpu.softmax_step %[[M2]], {{.*}} scale %[[LOG2E]] {masked} : <128x128xf32, lanes>
func.func @mods(%q: memref<?x?x?x128xf16>, %o: memref<?x?x?x128xf16>, %lse: memref<?x?x?xf32>, %slopes: memref<4xf32>) {
  fagpu.attention %q, %q, %q captures(%slopes : memref<4xf32>) outs(%o, %lse) {target = #fagpu.target<sm_100a>, scale = 0.125 : f32, softcap = 30.0 : f32,
      schedule = #fagpu.schedule<block_r = 128, block_c = 128, consumers = 0, ctas_per_sm = 1, producer_registers = 0, consumer_registers = 0, stages = 3, ping_pong = false, overlap_softmax = false, scheduler = single, q_buffers = 1, epilogue = registers, q_in_registers = false, tmem_columns = 512>}
    : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?xf32>
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
