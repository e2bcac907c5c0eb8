// A causal grouped-query attention in f32: 8 query heads sharing 2 key/value
// heads, 77 queries against 131 keys, head dim 64. `fa-run` lowers it with
// fa-cpu-pipeline, runs it on random inputs and checks it against a naive
// softmax(scale * Q K^T) V.
func.func @attention(%q: memref<1x8x77x64xf32>, %k: memref<1x2x131x64xf32>,
                     %v: memref<1x2x131x64xf32>, %o: memref<1x8x77x64xf32>,
                     %lse: memref<1x8x77xf32>) {
  fa.attention %q, %k, %v outs(%o, %lse : memref<1x8x77x64xf32>, memref<1x8x77xf32>)
      {causal} : memref<1x8x77x64xf32>, memref<1x2x131x64xf32>, memref<1x2x131x64xf32>
  return
}
