// A two-layer attention block as torch-mlir emits it (linalg on tensors,
// static shapes), the input of flash-mlir's end-to-end checks:
//  * layer 1: causal grouped-query attention, f16, Q [2, 8, 128, 128],
//    K/V [2, 2, 128, 128] (repeat_kv), D = 128, scale 1/sqrt(128), softmax
//    in f32 (mixed precision);
//  * layer 2: non-causal attention, bf16, [2, 4, 96, 64], D = 64, scale 0.5
//    folded into Q and K as sqrt(0.5) each.
// fa-raise-attention turns it into two fa.attention ops on the function's
// arguments (test/Pipelines/torch-two-layer.test checks them and the sm_90a
// compilation; test/Integration/CPU/torch-two-layer.test runs it on the
// host with fa-run --raise).
func.func @two_layer_block(%q1: tensor<2x8x128x128xf16>, %k1: tensor<2x2x128x128xf16>, %v1: tensor<2x2x128x128xf16>, %q2: tensor<2x4x96x64xbf16>, %k2: tensor<2x4x96x64xbf16>, %v2: tensor<2x4x96x64xbf16>) -> (tensor<2x8x128x128xf16>, tensor<2x4x96x64xbf16>) {
  // Layer 1: Hugging Face Llama eager attention in f16 as torch-mlir lowers it:
  // repeat_kv (unsqueeze, expand, reshape), q @ k.transpose(2, 3) as
  // collapse_shape + batch_matmul + expand_shape, * 1/sqrt(128) (an f64
  // truncated in the body), a causal mask from torch.ones(N, N).tril(),
  // softmax(dtype=torch.float32).to(torch.float16), @ v.
  %x1 = tensor.expand_shape %k1 [[0], [1, 2], [3], [4]] output_shape [2, 2, 1, 128, 128] : tensor<2x2x128x128xf16> into tensor<2x2x1x128x128xf16>
  %e2 = tensor.empty() : tensor<2x2x4x128x128xf16>
  %g3 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, 0, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]}
      ins(%x1 : tensor<2x2x1x128x128xf16>) outs(%e2 : tensor<2x2x4x128x128xf16>) {
    ^bb0(%a0: f16, %out: f16):
      linalg.yield %a0 : f16
    } -> tensor<2x2x4x128x128xf16>
  %c4 = tensor.collapse_shape %g3 [[0], [1, 2], [3], [4]] : tensor<2x2x4x128x128xf16> into tensor<2x8x128x128xf16>
  %x5 = tensor.expand_shape %v1 [[0], [1, 2], [3], [4]] output_shape [2, 2, 1, 128, 128] : tensor<2x2x128x128xf16> into tensor<2x2x1x128x128xf16>
  %e6 = tensor.empty() : tensor<2x2x4x128x128xf16>
  %g7 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, 0, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]}
      ins(%x5 : tensor<2x2x1x128x128xf16>) outs(%e6 : tensor<2x2x4x128x128xf16>) {
    ^bb0(%a0: f16, %out: f16):
      linalg.yield %a0 : f16
    } -> tensor<2x2x4x128x128xf16>
  %e8 = tensor.empty() : tensor<2x8x128x128xf16>
  %t9 = linalg.transpose ins(%c4 : tensor<2x8x128x128xf16>) outs(%e8 : tensor<2x8x128x128xf16>) permutation = [0, 1, 3, 2]
  %c10 = tensor.collapse_shape %q1 [[0, 1], [2], [3]] : tensor<2x8x128x128xf16> into tensor<16x128x128xf16>
  %c11 = tensor.collapse_shape %t9 [[0, 1], [2], [3]] : tensor<2x8x128x128xf16> into tensor<16x128x128xf16>
  %zc12 = arith.constant 0.000000e+00 : f16
  %e13 = tensor.empty() : tensor<16x128x128xf16>
  %z14 = linalg.fill ins(%zc12 : f16) outs(%e13 : tensor<16x128x128xf16>) -> tensor<16x128x128xf16>
  %mm15 = linalg.batch_matmul ins(%c10, %c11 : tensor<16x128x128xf16>, tensor<16x128x128xf16>) outs(%z14 : tensor<16x128x128xf16>) -> tensor<16x128x128xf16>
  %x16 = tensor.expand_shape %mm15 [[0, 1], [2], [3]] output_shape [2, 8, 128, 128] : tensor<16x128x128xf16> into tensor<2x8x128x128xf16>
  %s6417 = arith.constant 0.088388347648318433 : f64
  %e18 = tensor.empty() : tensor<2x8x128x128xf16>
  %g19 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x16 : tensor<2x8x128x128xf16>) outs(%e18 : tensor<2x8x128x128xf16>) {
    ^bb0(%a0: f16, %out: f16):
    %c = arith.truncf %s6417 : f64 to f16
    %r = arith.mulf %a0, %c : f16
      linalg.yield %r : f16
    } -> tensor<2x8x128x128xf16>
  %true20 = arith.constant true
  %e21 = tensor.empty() : tensor<128x128xi1>
  %ones22 = linalg.fill ins(%true20 : i1) outs(%e21 : tensor<128x128xi1>) -> tensor<128x128xi1>
  %diag23 = arith.constant 0 : i64
  %e24 = tensor.empty() : tensor<128x128xi1>
  // tril
  %g25 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%ones22 : tensor<128x128xi1>) outs(%e24 : tensor<128x128xi1>) {
    ^bb0(%a0: i1, %out: i1):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %i64 = arith.index_cast %i : index to i64
    %j64 = arith.index_cast %j : index to i64
    %d = arith.subi %j64, %i64 : i64
    %keep = arith.cmpi sle, %d, %diag23 : i64
    %false = arith.constant false
    %r = arith.select %keep, %a0, %false : i1
      linalg.yield %r : i1
    } -> tensor<128x128xi1>
  %e26 = tensor.empty() : tensor<128x128xi1>
  // logical_not
  %g27 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%g25 : tensor<128x128xi1>) outs(%e26 : tensor<128x128xi1>) {
    ^bb0(%a0: i1, %out: i1):
    %true = arith.constant true
    %r = arith.xori %a0, %true : i1
      linalg.yield %r : i1
    } -> tensor<128x128xi1>
  %ninf6428 = arith.constant 0xFFF0000000000000 : f64
  %e29 = tensor.empty() : tensor<2x8x128x128xf16>
  // masked_fill(logical_not(mask), -inf)
  %g30 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g19, %g27 : tensor<2x8x128x128xf16>, tensor<128x128xi1>) outs(%e29 : tensor<2x8x128x128xf16>) {
    ^bb0(%a0: f16, %a1: i1, %out: f16):
    %c = arith.truncf %ninf6428 : f64 to f16
    %r = arith.select %a1, %c, %a0 : f16
      linalg.yield %r : f16
    } -> tensor<2x8x128x128xf16>
  %e31 = tensor.empty() : tensor<2x8x128x128xf32>
  %g32 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g30 : tensor<2x8x128x128xf16>) outs(%e31 : tensor<2x8x128x128xf32>) {
    ^bb0(%a0: f16, %out: f32):
    %r = arith.extf %a0 : f16 to f32
      linalg.yield %r : f32
    } -> tensor<2x8x128x128xf32>
  %ninf33 = arith.constant 0xFF800000 : f32
  %e34 = tensor.empty() : tensor<2x8x128x1xf32>
  %mf35 = linalg.fill ins(%ninf33 : f32) outs(%e34 : tensor<2x8x128x1xf32>) -> tensor<2x8x128x1xf32>
  %g36 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%g32 : tensor<2x8x128x128xf32>) outs(%mf35 : tensor<2x8x128x1xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %r = arith.maximumf %a0, %out : f32
      linalg.yield %r : f32
    } -> tensor<2x8x128x1xf32>
  %e37 = tensor.empty() : tensor<2x8x128x128xf32>
  %g38 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g32, %g36 : tensor<2x8x128x128xf32>, tensor<2x8x128x1xf32>) outs(%e37 : tensor<2x8x128x128xf32>) {
    ^bb0(%a0: f32, %a1: f32, %out: f32):
    %r = arith.subf %a0, %a1 : f32
      linalg.yield %r : f32
    } -> tensor<2x8x128x128xf32>
  %e39 = tensor.empty() : tensor<2x8x128x128xf32>
  %g40 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g38 : tensor<2x8x128x128xf32>) outs(%e39 : tensor<2x8x128x128xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %r = math.exp %a0 : f32
      linalg.yield %r : f32
    } -> tensor<2x8x128x128xf32>
  %zc41 = arith.constant 0.000000e+00 : f32
  %e42 = tensor.empty() : tensor<2x8x128x1xf32>
  %z43 = linalg.fill ins(%zc41 : f32) outs(%e42 : tensor<2x8x128x1xf32>) -> tensor<2x8x128x1xf32>
  %g44 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%g40 : tensor<2x8x128x128xf32>) outs(%z43 : tensor<2x8x128x1xf32>) {
    ^bb0(%a0: f32, %out: f32):
    %r = arith.addf %a0, %out : f32
      linalg.yield %r : f32
    } -> tensor<2x8x128x1xf32>
  %e45 = tensor.empty() : tensor<2x8x128x128xf32>
  %g46 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g40, %g44 : tensor<2x8x128x128xf32>, tensor<2x8x128x1xf32>) outs(%e45 : tensor<2x8x128x128xf32>) {
    ^bb0(%a0: f32, %a1: f32, %out: f32):
    %r = arith.divf %a0, %a1 : f32
      linalg.yield %r : f32
    } -> tensor<2x8x128x128xf32>
  %e47 = tensor.empty() : tensor<2x8x128x128xf16>
  %g48 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g46 : tensor<2x8x128x128xf32>) outs(%e47 : tensor<2x8x128x128xf16>) {
    ^bb0(%a0: f32, %out: f16):
    %r = arith.truncf %a0 : f32 to f16
      linalg.yield %r : f16
    } -> tensor<2x8x128x128xf16>
  %c49 = tensor.collapse_shape %g48 [[0, 1], [2], [3]] : tensor<2x8x128x128xf16> into tensor<16x128x128xf16>
  %c50 = tensor.collapse_shape %g7 [[0, 1, 2], [3], [4]] : tensor<2x2x4x128x128xf16> into tensor<16x128x128xf16>
  %zc51 = arith.constant 0.000000e+00 : f16
  %e52 = tensor.empty() : tensor<16x128x128xf16>
  %z53 = linalg.fill ins(%zc51 : f16) outs(%e52 : tensor<16x128x128xf16>) -> tensor<16x128x128xf16>
  %mm54 = linalg.batch_matmul ins(%c49, %c50 : tensor<16x128x128xf16>, tensor<16x128x128xf16>) outs(%z53 : tensor<16x128x128xf16>) -> tensor<16x128x128xf16>
  %x55 = tensor.expand_shape %mm54 [[0, 1], [2], [3]] output_shape [2, 8, 128, 128] : tensor<16x128x128xf16> into tensor<2x8x128x128xf16>
  // Layer 2: scaled_dot_product_attention(q, k, v, scale=0.5) in bf16 as
  // PyTorch's math decomposition writes it: sqrt(0.5) folded into q and
  // into k.transpose(-2, -1), then matmul, softmax (amax / sub / exp / sum /
  // div), matmul; not causal.
  %s6456 = arith.constant 0.70710678118654757 : f64
  %e57 = tensor.empty() : tensor<2x4x96x64xbf16>
  %g58 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%q2 : tensor<2x4x96x64xbf16>) outs(%e57 : tensor<2x4x96x64xbf16>) {
    ^bb0(%a0: bf16, %out: bf16):
    %c = arith.truncf %s6456 : f64 to bf16
    %r = arith.mulf %a0, %c : bf16
      linalg.yield %r : bf16
    } -> tensor<2x4x96x64xbf16>
  %e59 = tensor.empty() : tensor<2x4x64x96xbf16>
  %t60 = linalg.transpose ins(%k2 : tensor<2x4x96x64xbf16>) outs(%e59 : tensor<2x4x64x96xbf16>) permutation = [0, 1, 3, 2]
  %s6461 = arith.constant 0.70710678118654757 : f64
  %e62 = tensor.empty() : tensor<2x4x64x96xbf16>
  %g63 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%t60 : tensor<2x4x64x96xbf16>) outs(%e62 : tensor<2x4x64x96xbf16>) {
    ^bb0(%a0: bf16, %out: bf16):
    %c = arith.truncf %s6461 : f64 to bf16
    %r = arith.mulf %a0, %c : bf16
      linalg.yield %r : bf16
    } -> tensor<2x4x64x96xbf16>
  %c64 = tensor.collapse_shape %g58 [[0, 1], [2], [3]] : tensor<2x4x96x64xbf16> into tensor<8x96x64xbf16>
  %c65 = tensor.collapse_shape %g63 [[0, 1], [2], [3]] : tensor<2x4x64x96xbf16> into tensor<8x64x96xbf16>
  %zc66 = arith.constant 0.000000e+00 : bf16
  %e67 = tensor.empty() : tensor<8x96x96xbf16>
  %z68 = linalg.fill ins(%zc66 : bf16) outs(%e67 : tensor<8x96x96xbf16>) -> tensor<8x96x96xbf16>
  %mm69 = linalg.batch_matmul ins(%c64, %c65 : tensor<8x96x64xbf16>, tensor<8x64x96xbf16>) outs(%z68 : tensor<8x96x96xbf16>) -> tensor<8x96x96xbf16>
  %x70 = tensor.expand_shape %mm69 [[0, 1], [2], [3]] output_shape [2, 4, 96, 96] : tensor<8x96x96xbf16> into tensor<2x4x96x96xbf16>
  %ninf71 = arith.constant 0xFF80 : bf16
  %e72 = tensor.empty() : tensor<2x4x96x1xbf16>
  %mf73 = linalg.fill ins(%ninf71 : bf16) outs(%e72 : tensor<2x4x96x1xbf16>) -> tensor<2x4x96x1xbf16>
  %g74 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x70 : tensor<2x4x96x96xbf16>) outs(%mf73 : tensor<2x4x96x1xbf16>) {
    ^bb0(%a0: bf16, %out: bf16):
    %r = arith.maximumf %a0, %out : bf16
      linalg.yield %r : bf16
    } -> tensor<2x4x96x1xbf16>
  %e75 = tensor.empty() : tensor<2x4x96x96xbf16>
  %g76 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x70, %g74 : tensor<2x4x96x96xbf16>, tensor<2x4x96x1xbf16>) outs(%e75 : tensor<2x4x96x96xbf16>) {
    ^bb0(%a0: bf16, %a1: bf16, %out: bf16):
    %r = arith.subf %a0, %a1 : bf16
      linalg.yield %r : bf16
    } -> tensor<2x4x96x96xbf16>
  %e77 = tensor.empty() : tensor<2x4x96x96xbf16>
  %g78 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g76 : tensor<2x4x96x96xbf16>) outs(%e77 : tensor<2x4x96x96xbf16>) {
    ^bb0(%a0: bf16, %out: bf16):
    %r = math.exp %a0 : bf16
      linalg.yield %r : bf16
    } -> tensor<2x4x96x96xbf16>
  %zc79 = arith.constant 0.000000e+00 : bf16
  %e80 = tensor.empty() : tensor<2x4x96x1xbf16>
  %z81 = linalg.fill ins(%zc79 : bf16) outs(%e80 : tensor<2x4x96x1xbf16>) -> tensor<2x4x96x1xbf16>
  %g82 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%g78 : tensor<2x4x96x96xbf16>) outs(%z81 : tensor<2x4x96x1xbf16>) {
    ^bb0(%a0: bf16, %out: bf16):
    %r = arith.addf %a0, %out : bf16
      linalg.yield %r : bf16
    } -> tensor<2x4x96x1xbf16>
  %e83 = tensor.empty() : tensor<2x4x96x96xbf16>
  %g84 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g78, %g82 : tensor<2x4x96x96xbf16>, tensor<2x4x96x1xbf16>) outs(%e83 : tensor<2x4x96x96xbf16>) {
    ^bb0(%a0: bf16, %a1: bf16, %out: bf16):
    %r = arith.divf %a0, %a1 : bf16
      linalg.yield %r : bf16
    } -> tensor<2x4x96x96xbf16>
  %c85 = tensor.collapse_shape %g84 [[0, 1], [2], [3]] : tensor<2x4x96x96xbf16> into tensor<8x96x96xbf16>
  %c86 = tensor.collapse_shape %v2 [[0, 1], [2], [3]] : tensor<2x4x96x64xbf16> into tensor<8x96x64xbf16>
  %zc87 = arith.constant 0.000000e+00 : bf16
  %e88 = tensor.empty() : tensor<8x96x64xbf16>
  %z89 = linalg.fill ins(%zc87 : bf16) outs(%e88 : tensor<8x96x64xbf16>) -> tensor<8x96x64xbf16>
  %mm90 = linalg.batch_matmul ins(%c85, %c86 : tensor<8x96x96xbf16>, tensor<8x96x64xbf16>) outs(%z89 : tensor<8x96x64xbf16>) -> tensor<8x96x64xbf16>
  %x91 = tensor.expand_shape %mm90 [[0, 1], [2], [3]] output_shape [2, 4, 96, 64] : tensor<8x96x64xbf16> into tensor<2x4x96x64xbf16>
  return %x55, %x91 : tensor<2x8x128x128xf16>, tensor<2x4x96x64xbf16>
}
