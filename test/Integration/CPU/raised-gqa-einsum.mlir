// RUN: fa-run %s --raise --print-input | FileCheck %s
// RUN: fa-run %s --raise --loop-order=fa1 --block-r=16 --block-c=16 | FileCheck %s --check-prefix=EXEC

// Attention on [B, H, N, D] as einsum-style linalg.generics with grouped
// K/V heads (h floordiv 2 in the maps), a causal select mask on
// linalg.index, a divide by sqrt(D) and linalg.softmax over the keys:
// raised to one fa.attention, lowered by fa-cpu-pipeline, run, and
// checked against the naive reference (ragged: 40 queries, 56 keys).
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 1.250000e-01 : f32} : tensor<1x4x40x64xf32>, tensor<1x2x56x64xf32>, tensor<1x2x56x64xf32> -> tensor<1x4x40x64xf32>
// CHECK: fa-run: PASS
// EXEC: fa-run: fa1 f32 B=1 Hq=4 Hkv=2 Nq=40 Nk=56 D=64 Dv=64 causal inputs=normal
// EXEC: fa-run: PASS
#q = affine_map<(b, h, i, j, d) -> (b, h, i, d)>
#k = affine_map<(b, h, i, j, d) -> (b, h floordiv 2, j, d)>
#s = affine_map<(b, h, i, j, d) -> (b, h, i, j)>
#p = affine_map<(b, h, i, d, j) -> (b, h, i, j)>
#v = affine_map<(b, h, i, d, j) -> (b, h floordiv 2, j, d)>
#o = affine_map<(b, h, i, d, j) -> (b, h, i, d)>
#id = affine_map<(b, h, i, j) -> (b, h, i, j)>
func.func @attn(%qm: memref<1x4x40x64xf32>, %km: memref<1x2x56x64xf32>, %vm: memref<1x2x56x64xf32>,
                %om: memref<1x4x40x64xf32>) {
  %q = bufferization.to_tensor %qm restrict : memref<1x4x40x64xf32> to tensor<1x4x40x64xf32>
  %k = bufferization.to_tensor %km restrict : memref<1x2x56x64xf32> to tensor<1x2x56x64xf32>
  %v = bufferization.to_tensor %vm restrict : memref<1x2x56x64xf32> to tensor<1x2x56x64xf32>
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %sqrt_d = arith.constant 8.000000e+00 : f32
  %s_init = tensor.empty() : tensor<1x4x40x56xf32>
  %s_zero = linalg.fill ins(%zero : f32) outs(%s_init : tensor<1x4x40x56xf32>) -> tensor<1x4x40x56xf32>
  %s = linalg.generic {indexing_maps = [#q, #k, #s], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<1x4x40x64xf32>, tensor<1x2x56x64xf32>) outs(%s_zero : tensor<1x4x40x56xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x4x40x56xf32>
  %scaled = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%s : tensor<1x4x40x56xf32>) outs(%s_init : tensor<1x4x40x56xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.divf %in, %sqrt_d : f32
    linalg.yield %r : f32
  } -> tensor<1x4x40x56xf32>
  %masked = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%scaled : tensor<1x4x40x56xf32>) outs(%s_init : tensor<1x4x40x56xf32>) {
  ^bb0(%in: f32, %out: f32):
    %i = linalg.index 2 : index
    %j = linalg.index 3 : index
    %hidden = arith.cmpi ult, %i, %j : index
    %r = arith.select %hidden, %ninf, %in : f32
    linalg.yield %r : f32
  } -> tensor<1x4x40x56xf32>
  %pr = linalg.softmax dimension(3) ins(%masked : tensor<1x4x40x56xf32>) outs(%s_init : tensor<1x4x40x56xf32>) -> tensor<1x4x40x56xf32>
  %o_init = tensor.empty() : tensor<1x4x40x64xf32>
  %o_zero = linalg.fill ins(%zero : f32) outs(%o_init : tensor<1x4x40x64xf32>) -> tensor<1x4x40x64xf32>
  %out = linalg.generic {indexing_maps = [#p, #v, #o], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%pr, %v : tensor<1x4x40x56xf32>, tensor<1x2x56x64xf32>) outs(%o_zero : tensor<1x4x40x64xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x4x40x64xf32>
  bufferization.materialize_in_destination %out in restrict writable %om : (tensor<1x4x40x64xf32>, memref<1x4x40x64xf32>) -> ()
  return
}
