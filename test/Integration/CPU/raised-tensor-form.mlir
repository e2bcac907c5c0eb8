// RUN: fa-run %s --raise --print-input | FileCheck %s
// RUN: fa-run %s --raise --loop-order=fa1 --block-r=16 --block-c=16 | FileCheck %s --check-prefix=EXEC
// RUN: not fa-run %s --raise --inputs=rising 2>&1 | FileCheck %s --check-prefix=RISING
// RUN: fa-run %s --raise --compare-unraised | FileCheck %s --check-prefix=SAME

// A tensor-form function (tensor arguments and result, as torch-mlir emits
// it) whose attention does not read the arguments: Q, K, V arrive as
// [B, N, H, D] (torch's layout before .transpose(1, 2)) and are transposed
// to [B, H, N, D] in the function. The raised op's operands are the
// transposed tensors; fa-run runs the whole function and checks the op
// against a reference of its own operands (a reference reading the
// arguments as [B, H, N, D] would FAIL; before issue 15, fa-run refused
// tensor arguments).
// CHECK: func.func @attn
// CHECK-DAG: %[[Q:.*]] = linalg.transpose ins(%arg0 : tensor<1x40x2x32xf32>)
// CHECK-DAG: %[[K:.*]] = linalg.transpose ins(%arg1 : tensor<1x56x2x32xf32>)
// CHECK-DAG: %[[V:.*]] = linalg.transpose ins(%arg2 : tensor<1x56x2x32xf32>)
// CHECK: fa.attention %[[Q]], %[[K]], %[[V]] {causal, scale = 0.176776692 : f32} : tensor<1x2x40x32xf32>, tensor<1x2x56x32xf32>, tensor<1x2x56x32xf32> -> tensor<1x2x40x32xf32>
// CHECK: fa-run: fa2 f32 B=1 Hq=2 Hkv=2 Nq=40 Nk=56 D=32 Dv=32 causal inputs=normal
// CHECK-NEXT: unwritten=0
// CHECK-NEXT: fa-run: PASS
// EXEC: fa-run: fa1 f32 B=1 Hq=2 Hkv=2 Nq=40 Nk=56 D=32 Dv=32 causal inputs=normal
// EXEC: fa-run: PASS
// RISING: fa-run: error: --inputs=rising needs the direct form
// The raised function computes what the linalg one does (run unraised on
// the same inputs):
// SAME: fa-run: result 0: raised vs unraised rel_l2_error={{[0-9.]+}}e-{{0[5-9]|1[0-9]}} nan_mismatches=0 tolerance=1.0e-04
// SAME-NEXT: fa-run: PASS
func.func @attn(%q: tensor<1x40x2x32xf32>, %k: tensor<1x56x2x32xf32>, %v: tensor<1x56x2x32xf32>) -> tensor<1x2x40x32xf32> {
  %e1 = tensor.empty() : tensor<1x2x40x32xf32>
  %t2 = linalg.transpose ins(%q : tensor<1x40x2x32xf32>) outs(%e1 : tensor<1x2x40x32xf32>) permutation = [0, 2, 1, 3]
  %e3 = tensor.empty() : tensor<1x2x56x32xf32>
  %t4 = linalg.transpose ins(%k : tensor<1x56x2x32xf32>) outs(%e3 : tensor<1x2x56x32xf32>) permutation = [0, 2, 1, 3]
  %e5 = tensor.empty() : tensor<1x2x56x32xf32>
  %t6 = linalg.transpose ins(%v : tensor<1x56x2x32xf32>) outs(%e5 : tensor<1x2x56x32xf32>) permutation = [0, 2, 1, 3]
  %zc7 = arith.constant 0.000000e+00 : f32
  %e8 = tensor.empty() : tensor<1x2x40x56xf32>
  %z9 = linalg.fill ins(%zc7 : f32) outs(%e8 : tensor<1x2x40x56xf32>) -> tensor<1x2x40x56xf32>
  %qk10 = linalg.generic {indexing_maps = [affine_map<(b, h, i, j, d) -> (b, h, i, d)>, affine_map<(b, h, i, j, d) -> (b, h, j, d)>, affine_map<(b, h, i, j, d) -> (b, h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%t2, %t4 : tensor<1x2x40x32xf32>, tensor<1x2x56x32xf32>) outs(%z9 : tensor<1x2x40x56xf32>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %m = arith.mulf %a, %b : f32
      %r = arith.addf %acc, %m : f32
      linalg.yield %r : f32
    } -> tensor<1x2x40x56xf32>
  %ninf11 = arith.constant 0xFF800000 : f32
  %sqrt_d12 = arith.constant 5.65685415 : f32
  %e13 = tensor.empty() : tensor<1x2x40x56xf32>
  // scale and causal mask
  %g14 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%qk10 : tensor<1x2x40x56xf32>) outs(%e13 : tensor<1x2x40x56xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %i = linalg.index 2 : index
    %j = linalg.index 3 : index
    %hidden = arith.cmpi ugt, %j, %i : index
    %x = arith.divf %a0, %sqrt_d12 : f32
    %r = arith.select %hidden, %ninf11, %x : f32
      linalg.yield %r : f32
    } -> tensor<1x2x40x56xf32>
  %e15 = tensor.empty() : tensor<1x2x40x56xf32>
  %sm16 = linalg.softmax dimension(3) ins(%g14 : tensor<1x2x40x56xf32>) outs(%e15 : tensor<1x2x40x56xf32>) -> tensor<1x2x40x56xf32>
  %zc17 = arith.constant 0.000000e+00 : f32
  %e18 = tensor.empty() : tensor<1x2x40x32xf32>
  %z19 = linalg.fill ins(%zc17 : f32) outs(%e18 : tensor<1x2x40x32xf32>) -> tensor<1x2x40x32xf32>
  %pv20 = linalg.generic {indexing_maps = [affine_map<(b, h, i, d, j) -> (b, h, i, j)>, affine_map<(b, h, i, d, j) -> (b, h, j, d)>, affine_map<(b, h, i, d, j) -> (b, h, i, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%sm16, %t6 : tensor<1x2x40x56xf32>, tensor<1x2x56x32xf32>) outs(%z19 : tensor<1x2x40x32xf32>) {
    ^bb0(%a: f32, %b: f32, %acc: f32):
      %m = arith.mulf %a, %b : f32
      %r = arith.addf %acc, %m : f32
      linalg.yield %r : f32
    } -> tensor<1x2x40x32xf32>
  return %pv20 : tensor<1x2x40x32xf32>
}
