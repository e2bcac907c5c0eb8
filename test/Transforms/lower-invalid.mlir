// RUN: fa-opt %s --split-input-file --fa-lower-fa2 --verify-diagnostics
// RUN: fa-opt %s --split-input-file --fa-lower-fa1 --verify-diagnostics

func.func @untiled(%q: memref<1x1x64x64xf32>, %k: memref<1x1x64x64xf32>,
                   %v: memref<1x1x64x64xf32>, %o: memref<1x1x64x64xf32>) {
  // expected-error @+1 {{has no tile sizes; fa-lower-fa}}
  fa.attention %q, %k, %v outs(%o : memref<1x1x64x64xf32>)
      : memref<1x1x64x64xf32>, memref<1x1x64x64xf32>, memref<1x1x64x64xf32>
  return
}

// -----

func.func @tensors(%q: tensor<1x1x64x64xf32>, %k: tensor<1x1x64x64xf32>,
                   %v: tensor<1x1x64x64xf32>) -> tensor<1x1x64x64xf32> {
  // expected-error @+1 {{needs the memref form (run fa-attention-to-buffers first)}}
  %o = fa.attention %q, %k, %v {block_r = 64 : i64, block_c = 64 : i64}
      : tensor<1x1x64x64xf32>, tensor<1x1x64x64xf32>, tensor<1x1x64x64xf32> -> tensor<1x1x64x64xf32>
  return %o : tensor<1x1x64x64xf32>
}
