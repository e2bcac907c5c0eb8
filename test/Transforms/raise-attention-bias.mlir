// fa-raise-attention raises additive biases into fa.attention's score_mod
// (issue 49): the bias is captured and read at the scores' position, 0 on
// broadcast dims, times the scales between the add and the softmax. The
// inputs of test/Inputs (run against the unraised functions by
// test/Integration/CPU/raise-bias.test) give the 4-D and 3-D forms:
// RUN: fa-opt %S/../Inputs/attention_bias.mlir --fa-raise-attention | FileCheck %s --check-prefix=FOUR
// RUN: fa-opt %S/../Inputs/attention_bias_3d.mlir --fa-raise-attention | FileCheck %s --check-prefix=THREE
// RUN: fa-opt %S/../Inputs/attention_bias_lifted.mlir --fa-raise-attention | FileCheck %s --check-prefix=LIFTED
// RUN: fa-opt %S/../Inputs/attention_bias_fused.mlir --fa-raise-attention | FileCheck %s --check-prefix=FUSED
// RUN: fa-opt %S/../Inputs/attention_mask_arguments.mlir --fa-raise-attention | FileCheck %s --check-prefix=MASK
// RUN: fa-opt %s --split-input-file --fa-raise-attention | FileCheck %s
// RUN: fa-opt %s --split-input-file --fa-raise-attention --verify-diagnostics -o /dev/null

// A full [B, H, Nq, Nk] bias after the scale: bias[b, h, i, j].
// FOUR: %[[A1:.*]] = fa.attention %arg0, %arg1, %arg2 captures(%arg3 : tensor<2x3x40x56xf32>) {scale = 0.176776692 : f32}
// FOUR: ^bb0(%[[S:.*]]: f32, %[[B:.*]]: index, %[[H:.*]]: index, %[[I:.*]]: index, %[[J:.*]]: index, %[[T:.*]]: tensor<2x3x40x56xf32>):
// FOUR-NEXT: %[[X:.*]] = tensor.extract %[[T]][%[[B]], %[[H]], %[[I]], %[[J]]]
// FOUR-NEXT: %[[R:.*]] = arith.addf %[[S]], %[[X]] : f32
// FOUR-NEXT: fa.yield %[[R]] : f32
// A [B, 1, 1, Nk] padding bias before the scale: bias[b, 0, 0, j] * scale.
// FOUR: fa.attention %arg0, %arg1, %arg2 captures(%arg4 : tensor<2x1x1x56xf32>) {scale = 0.176776692 : f32}
// FOUR: ^bb0(%[[S2:.*]]: f32, %[[B2:.*]]: index, %{{.*}}: index, %{{.*}}: index, %[[J2:.*]]: index, %[[T2:.*]]: tensor<2x1x1x56xf32>):
// FOUR-DAG: %[[SC:.*]] = arith.constant 0.176776692 : f32
// FOUR-DAG: %[[Z:.*]] = arith.constant 0 : index
// FOUR: %[[X2:.*]] = tensor.extract %[[T2]][%[[B2]], %[[Z]], %[[Z]], %[[J2]]]
// FOUR: %[[M2:.*]] = arith.mulf %[[X2]], %[[SC]] : f32
// FOUR: arith.addf %[[S2]], %[[M2]] : f32
// Boolean masks from tensors that are not constants: select(keep, x, -inf)
// reads keep[b, 0, 0, j], beside the causal mask on indices; masked_fill
// (hidden where true) negates; with a bias both regions read their capture.
// MASK: fa.attention %arg0, %arg1, %arg2 captures(%[[KEEP:.*]] : tensor<2x1x1x56xi1>) {causal, scale = 0.176776692 : f32}
// MASK-SAME: mask_mod {
// MASK-NEXT: ^bb0(%[[B:.*]]: index, %{{.*}}: index, %{{.*}}: index, %[[J:.*]]: index, %[[T:.*]]: tensor<2x1x1x56xi1>):
// MASK-NEXT: %[[Z:.*]] = arith.constant 0 : index
// MASK-NEXT: %[[X:.*]] = tensor.extract %[[T]][%[[B]], %[[Z]], %[[Z]], %[[J]]]
// MASK-NEXT: fa.yield %[[X]] : i1
// MASK: fa.attention %arg0, %arg1, %arg2 captures(%arg5, %[[HIDE:.*]] : tensor<2x3x40x56xf32>, tensor<2x3x40x56xi1>) {scale = 0.176776692 : f32}
// MASK: score_mod {
// MASK: } mask_mod {
// MASK-NEXT: ^bb0(%[[B2:.*]]: index, %[[H2:.*]]: index, %[[I2:.*]]: index, %[[J2:.*]]: index, %{{.*}}: tensor<2x3x40x56xf32>, %[[M2:.*]]: tensor<2x3x40x56xi1>):
// MASK-NEXT: %[[TRUE:.*]] = arith.constant true
// MASK-NEXT: %[[X2:.*]] = tensor.extract %[[M2]][%[[B2]], %[[H2]], %[[I2]], %[[J2]]]
// MASK-NEXT: %[[V2:.*]] = arith.xori %[[X2]], %[[TRUE]] : i1
// MASK-NEXT: fa.yield %[[V2]] : i1
// torch-mlir's lifted form: the [B*H, N, N] bias of a 4-D softmax is read at
// b * H + h.
// LIFTED: fa.attention %arg0, %arg1, %arg2 captures(%arg3 : tensor<6x24x32xf32>) {scale = 2.500000e-01 : f32}
// LIFTED: ^bb0(%{{.*}}: f32, %[[B:.*]]: index, %[[H:.*]]: index, %[[I:.*]]: index, %[[J:.*]]: index, %[[T:.*]]: tensor<6x24x32xf32>):
// LIFTED: %[[C3:.*]] = arith.constant 3 : index
// LIFTED: %[[BH:.*]] = arith.muli %[[B]], %[[C3]] : index
// LIFTED: %[[ROW:.*]] = arith.addi %[[BH]], %[[H]] : index
// LIFTED: tensor.extract %[[T]][%[[ROW]], %[[I]], %[[J]]]
// A scale and an f16 bias in one body (x * 0.25 + extf(bias)): the scale
// goes to the attribute, the bias (extended) to score_mod.
// FUSED: fa.attention %arg0, %arg1, %arg2 captures(%arg3 : tensor<6x24x32xf16>) {scale = 2.500000e-01 : f32}
// FUSED: %[[X:.*]] = tensor.extract %{{.*}} : tensor<6x24x32xf16>
// FUSED-NEXT: %[[W:.*]] = arith.extf %[[X]] : f16 to f32
// FUSED-NEXT: arith.addf %{{.*}}, %[[W]] : f32
// The 3-D form [H, N, N] (B = 1): bias[h, i, j].
// THREE: fa.attention {{.*}} captures(%arg3 : tensor<4x40x48xf32>) {scale = 0.176776692 : f32}
// THREE: ^bb0(%[[S3:.*]]: f32, %{{.*}}: index, %[[H3:.*]]: index, %[[I3:.*]]: index, %[[J3:.*]]: index, %[[T3:.*]]: tensor<4x40x48xf32>):
// THREE-NEXT: %[[X3:.*]] = tensor.extract %[[T3]][%[[H3]], %[[I3]], %[[J3]]]
// THREE-NEXT: arith.addf %[[S3]], %[[X3]] : f32

// An f16 bias over the keys, [1, 1, Nk], broadcast over heads and queries
// and extended to f32 in the add: score_mod reads bias[0, 0, j] and extends
// it.
// CHECK-LABEL: func.func @key_bias_f16
// CHECK: fa.attention {{.*}} captures(%{{.*}} : tensor<1x1x16xf16>) {scale = 1.000000e+00 : f32}
// CHECK: ^bb0(%[[S:.*]]: f32, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %[[J:.*]]: index, %[[B:.*]]: tensor<1x1x16xf16>):
// CHECK: %[[C0:.*]] = arith.constant 0 : index
// CHECK: %[[X:.*]] = tensor.extract %[[B]][%[[C0]], %[[C0]], %[[J]]] : tensor<1x1x16xf16>
// CHECK: %[[W:.*]] = arith.extf %[[X]] : f16 to f32
// CHECK: %[[R:.*]] = arith.addf %[[S]], %[[W]] : f32
// CHECK: fa.yield %[[R]] : f32
func.func @key_bias_f16(%q: tensor<2x16x8xf32>, %k: tensor<2x16x8xf32>, %v: tensor<2x16x8xf32>, %bias: tensor<1x1x16xf16>) -> tensor<2x16x8xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e0 = tensor.empty() : tensor<2x16x16xf32>
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %s = linalg.batch_matmul indexing_maps = [affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>, affine_map<(b, i, j, d) -> (b, i, j)>] ins(%q, %k : tensor<2x16x8xf32>, tensor<2x16x8xf32>) outs(%z0 : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %e_b = tensor.empty() : tensor<2x16x16xf32>
  %b = linalg.generic {indexing_maps = [affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (0, 0, j)>, affine_map<(h, i, j) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s, %bias : tensor<2x16x16xf32>, tensor<1x1x16xf16>) outs(%e_b : tensor<2x16x16xf32>) {
    ^bb0(%x: f32, %bb: f16, %o: f32):
      %w = arith.extf %bb : f16 to f32
      %y = arith.addf %w, %x : f32
      linalg.yield %y : f32
    } -> tensor<2x16x16xf32>
  %e9 = tensor.empty() : tensor<2x16x16xf32>
  %p = linalg.softmax dimension(2) ins(%b : tensor<2x16x16xf32>) outs(%e9 : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %e10 = tensor.empty() : tensor<2x16x8xf32>
  %z10 = linalg.fill ins(%zero : f32) outs(%e10 : tensor<2x16x8xf32>) -> tensor<2x16x8xf32>
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x16x16xf32>, tensor<2x16x8xf32>) outs(%z10 : tensor<2x16x8xf32>) -> tensor<2x16x8xf32>
  return %o : tensor<2x16x8xf32>
}

// -----

// A bias added before a softcap's tanh: score_mod applies after the cap.
func.func @bias_inside_cap(%q: tensor<2x16x8xf32>, %k: tensor<2x16x8xf32>, %v: tensor<2x16x8xf32>, %bias: tensor<2x16x16xf32>) -> tensor<2x16x8xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e0 = tensor.empty() : tensor<2x16x16xf32>
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %s = linalg.batch_matmul indexing_maps = [affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>, affine_map<(b, i, j, d) -> (b, i, j)>] ins(%q, %k : tensor<2x16x8xf32>, tensor<2x16x8xf32>) outs(%z0 : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %e_b = tensor.empty() : tensor<2x16x16xf32>
  %b = linalg.generic {indexing_maps = [affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s, %bias : tensor<2x16x16xf32>, tensor<2x16x16xf32>) outs(%e_b : tensor<2x16x16xf32>) {
    ^bb0(%x: f32, %bb: f32, %o: f32):
      %y = arith.addf %x, %bb : f32
      linalg.yield %y : f32
    } -> tensor<2x16x16xf32>
  %e_c = tensor.empty() : tensor<2x16x16xf32>
  %c = linalg.generic {indexing_maps = [affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%b : tensor<2x16x16xf32>) outs(%e_c : tensor<2x16x16xf32>) {
    ^bb0(%x: f32, %o: f32):
      %c = arith.constant 4.0 : f32
      %a = arith.divf %x, %c : f32
      %t = math.tanh %a : f32
      %y = arith.mulf %t, %c : f32
      linalg.yield %y : f32
    } -> tensor<2x16x16xf32>
  %e9 = tensor.empty() : tensor<2x16x16xf32>
  %p = linalg.softmax dimension(2) ins(%c : tensor<2x16x16xf32>) outs(%e9 : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %e10 = tensor.empty() : tensor<2x16x8xf32>
  %z10 = linalg.fill ins(%zero : f32) outs(%e10 : tensor<2x16x8xf32>) -> tensor<2x16x8xf32>
  // expected-remark @+1 {{not raised: a bias tensor is added inside the softcap's tanh (score_mod applies after the cap)}}
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x16x16xf32>, tensor<2x16x8xf32>) outs(%z10 : tensor<2x16x8xf32>) -> tensor<2x16x8xf32>
  return %o : tensor<2x16x8xf32>
}

// -----

// Two bias tensors: one score_mod capture is raised, not two.
func.func @two_biases(%q: tensor<2x16x8xf32>, %k: tensor<2x16x8xf32>, %v: tensor<2x16x8xf32>, %b1: tensor<2x16x16xf32>, %b2: tensor<2x16x16xf32>) -> tensor<2x16x8xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e0 = tensor.empty() : tensor<2x16x16xf32>
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %s = linalg.batch_matmul indexing_maps = [affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>, affine_map<(b, i, j, d) -> (b, i, j)>] ins(%q, %k : tensor<2x16x8xf32>, tensor<2x16x8xf32>) outs(%z0 : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %e_x1 = tensor.empty() : tensor<2x16x16xf32>
  %x1 = linalg.generic {indexing_maps = [affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s, %b1 : tensor<2x16x16xf32>, tensor<2x16x16xf32>) outs(%e_x1 : tensor<2x16x16xf32>) {
    ^bb0(%x: f32, %bb: f32, %o: f32):
      %y = arith.addf %x, %bb : f32
      linalg.yield %y : f32
    } -> tensor<2x16x16xf32>
  %e_x2 = tensor.empty() : tensor<2x16x16xf32>
  %x2 = linalg.generic {indexing_maps = [affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x1, %b2 : tensor<2x16x16xf32>, tensor<2x16x16xf32>) outs(%e_x2 : tensor<2x16x16xf32>) {
    ^bb0(%x: f32, %bb: f32, %o: f32):
      %y = arith.addf %x, %bb : f32
      linalg.yield %y : f32
    } -> tensor<2x16x16xf32>
  %e9 = tensor.empty() : tensor<2x16x16xf32>
  %p = linalg.softmax dimension(2) ins(%x2 : tensor<2x16x16xf32>) outs(%e9 : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %e10 = tensor.empty() : tensor<2x16x8xf32>
  %z10 = linalg.fill ins(%zero : f32) outs(%e10 : tensor<2x16x8xf32>) -> tensor<2x16x8xf32>
  // expected-remark @+1 {{not raised: two bias tensors are added to the scores}}
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x16x16xf32>, tensor<2x16x8xf32>) outs(%z10 : tensor<2x16x8xf32>) -> tensor<2x16x8xf32>
  return %o : tensor<2x16x8xf32>
}

// -----

// A bias read at (h, i, j + 1) is not a broadcast of the scores' position:
// not raised (read as a mask from an argument, which it is not either).
func.func @shifted_bias(%q: tensor<2x16x8xf32>, %k: tensor<2x16x8xf32>, %v: tensor<2x16x8xf32>, %bias: tensor<2x16x17xf32>) -> tensor<2x16x8xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e0 = tensor.empty() : tensor<2x16x16xf32>
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %s = linalg.batch_matmul indexing_maps = [affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>, affine_map<(b, i, j, d) -> (b, i, j)>] ins(%q, %k : tensor<2x16x8xf32>, tensor<2x16x8xf32>) outs(%z0 : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %e_b = tensor.empty() : tensor<2x16x16xf32>
  %b = linalg.generic {indexing_maps = [affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i, j + 1)>, affine_map<(h, i, j) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s, %bias : tensor<2x16x16xf32>, tensor<2x16x17xf32>) outs(%e_b : tensor<2x16x16xf32>) {
    ^bb0(%x: f32, %bb: f32, %o: f32):
      %y = arith.addf %x, %bb : f32
      linalg.yield %y : f32
    } -> tensor<2x16x16xf32>
  %e9 = tensor.empty() : tensor<2x16x16xf32>
  %p = linalg.softmax dimension(2) ins(%b : tensor<2x16x16xf32>) outs(%e9 : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %e10 = tensor.empty() : tensor<2x16x8xf32>
  %z10 = linalg.fill ins(%zero : f32) outs(%e10 : tensor<2x16x8xf32>) -> tensor<2x16x8xf32>
  // expected-remark @+1 {{not raised: the mask is a function argument, not known to be causal or a window}}
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x16x16xf32>, tensor<2x16x8xf32>) outs(%z10 : tensor<2x16x8xf32>) -> tensor<2x16x8xf32>
  return %o : tensor<2x16x8xf32>
}

// -----

// Two boolean masks from tensors: one mask_mod capture is raised, not two.
func.func @two_masks(%q: tensor<2x16x8xf32>, %k: tensor<2x16x8xf32>, %v: tensor<2x16x8xf32>, %m1: tensor<2x16x16xi1>, %m2: tensor<2x16x16xi1>) -> tensor<2x16x8xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e0 = tensor.empty() : tensor<2x16x16xf32>
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %s = linalg.batch_matmul indexing_maps = [affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>, affine_map<(b, i, j, d) -> (b, i, j)>] ins(%q, %k : tensor<2x16x8xf32>, tensor<2x16x8xf32>) outs(%z0 : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %e1 = tensor.empty() : tensor<2x16x16xf32>
  %a = linalg.generic {indexing_maps = [affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s, %m1 : tensor<2x16x16xf32>, tensor<2x16x16xi1>) outs(%e1 : tensor<2x16x16xf32>) {
    ^bb0(%x: f32, %m: i1, %o: f32):
      %y = arith.select %m, %x, %ninf : f32
      linalg.yield %y : f32
    } -> tensor<2x16x16xf32>
  %e2 = tensor.empty() : tensor<2x16x16xf32>
  %b = linalg.generic {indexing_maps = [affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%a, %m2 : tensor<2x16x16xf32>, tensor<2x16x16xi1>) outs(%e2 : tensor<2x16x16xf32>) {
    ^bb0(%x: f32, %m: i1, %o: f32):
      %y = arith.select %m, %ninf, %x : f32
      linalg.yield %y : f32
    } -> tensor<2x16x16xf32>
  %e9 = tensor.empty() : tensor<2x16x16xf32>
  %p = linalg.softmax dimension(2) ins(%b : tensor<2x16x16xf32>) outs(%e9 : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %e10 = tensor.empty() : tensor<2x16x8xf32>
  %z10 = linalg.fill ins(%zero : f32) outs(%e10 : tensor<2x16x8xf32>) -> tensor<2x16x8xf32>
  // expected-remark @+1 {{not raised: two boolean masks from tensors hide keys}}
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x16x16xf32>, tensor<2x16x8xf32>) outs(%z10 : tensor<2x16x8xf32>) -> tensor<2x16x8xf32>
  return %o : tensor<2x16x8xf32>
}

// -----

// Must not fire: scores times a tensor is not a bias.
func.func @scaled_by_tensor(%q: tensor<2x16x8xf32>, %k: tensor<2x16x8xf32>, %v: tensor<2x16x8xf32>, %w: tensor<2x16x16xf32>) -> tensor<2x16x8xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e0 = tensor.empty() : tensor<2x16x16xf32>
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %s = linalg.batch_matmul indexing_maps = [affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>, affine_map<(b, i, j, d) -> (b, i, j)>] ins(%q, %k : tensor<2x16x8xf32>, tensor<2x16x8xf32>) outs(%z0 : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %e1 = tensor.empty() : tensor<2x16x16xf32>
  %m = linalg.generic {indexing_maps = [affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s, %w : tensor<2x16x16xf32>, tensor<2x16x16xf32>) outs(%e1 : tensor<2x16x16xf32>) {
    ^bb0(%x: f32, %y: f32, %o: f32):
      %r = arith.mulf %x, %y : f32
      linalg.yield %r : f32
    } -> tensor<2x16x16xf32>
  %e9 = tensor.empty() : tensor<2x16x16xf32>
  %p = linalg.softmax dimension(2) ins(%m : tensor<2x16x16xf32>) outs(%e9 : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %e10 = tensor.empty() : tensor<2x16x8xf32>
  %z10 = linalg.fill ins(%zero : f32) outs(%e10 : tensor<2x16x8xf32>) -> tensor<2x16x8xf32>
  // expected-remark @+1 {{not raised: the mask is a function argument, not known to be causal or a window}}
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x16x16xf32>, tensor<2x16x8xf32>) outs(%z10 : tensor<2x16x8xf32>) -> tensor<2x16x8xf32>
  return %o : tensor<2x16x8xf32>
}

// -----

// Must not fire (yet): scores minus a tensor (its negation would be the bias).
func.func @minus_bias(%q: tensor<2x16x8xf32>, %k: tensor<2x16x8xf32>, %v: tensor<2x16x8xf32>, %w: tensor<2x16x16xf32>) -> tensor<2x16x8xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e0 = tensor.empty() : tensor<2x16x16xf32>
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %s = linalg.batch_matmul indexing_maps = [affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>, affine_map<(b, i, j, d) -> (b, i, j)>] ins(%q, %k : tensor<2x16x8xf32>, tensor<2x16x8xf32>) outs(%z0 : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %e1 = tensor.empty() : tensor<2x16x16xf32>
  %m = linalg.generic {indexing_maps = [affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s, %w : tensor<2x16x16xf32>, tensor<2x16x16xf32>) outs(%e1 : tensor<2x16x16xf32>) {
    ^bb0(%x: f32, %y: f32, %o: f32):
      %r = arith.subf %x, %y : f32
      linalg.yield %r : f32
    } -> tensor<2x16x16xf32>
  %e9 = tensor.empty() : tensor<2x16x16xf32>
  %p = linalg.softmax dimension(2) ins(%m : tensor<2x16x16xf32>) outs(%e9 : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %e10 = tensor.empty() : tensor<2x16x8xf32>
  %z10 = linalg.fill ins(%zero : f32) outs(%e10 : tensor<2x16x8xf32>) -> tensor<2x16x8xf32>
  // expected-remark @+1 {{not raised: the mask is a function argument, not known to be causal or a window}}
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x16x16xf32>, tensor<2x16x8xf32>) outs(%z10 : tensor<2x16x8xf32>) -> tensor<2x16x8xf32>
  return %o : tensor<2x16x8xf32>
}

// -----

// Must not fire: the scores added to themselves: the other operand comes from
// Q K^T, so it is not a bias (2 S is a scale the symbolic path does not take
// from two reads).
func.func @scores_twice(%q: tensor<2x16x8xf32>, %k: tensor<2x16x8xf32>, %v: tensor<2x16x8xf32>) -> tensor<2x16x8xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e0 = tensor.empty() : tensor<2x16x16xf32>
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %s = linalg.batch_matmul indexing_maps = [affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>, affine_map<(b, i, j, d) -> (b, i, j)>] ins(%q, %k : tensor<2x16x8xf32>, tensor<2x16x8xf32>) outs(%z0 : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %e1 = tensor.empty() : tensor<2x16x16xf32>
  %m = linalg.generic {indexing_maps = [affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s, %s : tensor<2x16x16xf32>, tensor<2x16x16xf32>) outs(%e1 : tensor<2x16x16xf32>) {
    ^bb0(%x: f32, %y: f32, %o: f32):
      %r = arith.addf %x, %y : f32
      linalg.yield %r : f32
    } -> tensor<2x16x16xf32>
  %e9 = tensor.empty() : tensor<2x16x16xf32>
  %p = linalg.softmax dimension(2) ins(%m : tensor<2x16x16xf32>) outs(%e9 : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %e10 = tensor.empty() : tensor<2x16x8xf32>
  %z10 = linalg.fill ins(%zero : f32) outs(%e10 : tensor<2x16x8xf32>) -> tensor<2x16x8xf32>
  // expected-remark @+1 {{not raised: the mask comes from 'linalg.batch_matmul', not from constants and positions}}
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x16x16xf32>, tensor<2x16x8xf32>) outs(%z10 : tensor<2x16x8xf32>) -> tensor<2x16x8xf32>
  return %o : tensor<2x16x8xf32>
}

// -----

// Must not fire: a select to -1, not to -inf: a boolean tensor that changes
// scores rather than hiding keys.
func.func @mask_as_float(%q: tensor<2x16x8xf32>, %k: tensor<2x16x8xf32>, %v: tensor<2x16x8xf32>, %w: tensor<2x16x16xi1>) -> tensor<2x16x8xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e0 = tensor.empty() : tensor<2x16x16xf32>
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %s = linalg.batch_matmul indexing_maps = [affine_map<(b, i, j, d) -> (b, i, d)>, affine_map<(b, i, j, d) -> (b, j, d)>, affine_map<(b, i, j, d) -> (b, i, j)>] ins(%q, %k : tensor<2x16x8xf32>, tensor<2x16x8xf32>) outs(%z0 : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %e1 = tensor.empty() : tensor<2x16x16xf32>
  %m = linalg.generic {indexing_maps = [affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s, %w : tensor<2x16x16xf32>, tensor<2x16x16xi1>) outs(%e1 : tensor<2x16x16xf32>) {
    ^bb0(%x: f32, %y: i1, %o: f32):
      %c = arith.constant -1.0 : f32
      %r = arith.select %y, %x, %c : f32
      linalg.yield %r : f32
    } -> tensor<2x16x16xf32>
  %e9 = tensor.empty() : tensor<2x16x16xf32>
  %p = linalg.softmax dimension(2) ins(%m : tensor<2x16x16xf32>) outs(%e9 : tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %e10 = tensor.empty() : tensor<2x16x8xf32>
  %z10 = linalg.fill ins(%zero : f32) outs(%e10 : tensor<2x16x8xf32>) -> tensor<2x16x8xf32>
  // expected-remark @+1 {{not raised: the mask is a function argument, not known to be causal or a window}}
  %o = linalg.batch_matmul ins(%p, %v : tensor<2x16x16xf32>, tensor<2x16x8xf32>) outs(%z10 : tensor<2x16x8xf32>) -> tensor<2x16x8xf32>
  return %o : tensor<2x16x8xf32>
}
