// torch-mlir's SDPA decomposition as it emits it (f16): aten.sub's alpha as a
// multiply by sitofp(1), the scale from scalar arithmetic. Read by
// python/tests/test_compiler.py (compile_module(raise_attention=True)).
func.func @sdpa(%q: tensor<1x2x64x32xf16>, %k: tensor<1x2x64x32xf16>, %v: tensor<1x2x64x32xf16>) -> tensor<1x2x64x32xf16> {
  %dim = arith.constant 32 : i64
  %dimf = arith.sitofp %dim : i64 to f64
  %sq = math.sqrt %dimf : f64
  %one = arith.constant 1.000000e+00 : f64
  %scale = arith.divf %one, %sq : f64
  %ekt = tensor.empty() : tensor<1x2x32x64xf16>
  %kt = linalg.transpose ins(%k : tensor<1x2x64x32xf16>) outs(%ekt : tensor<1x2x32x64xf16>) permutation = [0, 1, 3, 2]
  %cq = tensor.collapse_shape %q [[0, 1], [2], [3]] : tensor<1x2x64x32xf16> into tensor<2x64x32xf16>
  %ck = tensor.collapse_shape %kt [[0, 1], [2], [3]] : tensor<1x2x32x64xf16> into tensor<2x32x64xf16>
  %zero = arith.constant 0.000000e+00 : f16
  %es = tensor.empty() : tensor<2x64x64xf16>
  %zs = linalg.fill ins(%zero : f16) outs(%es : tensor<2x64x64xf16>) -> tensor<2x64x64xf16>
  %mm = linalg.batch_matmul ins(%cq, %ck : tensor<2x64x32xf16>, tensor<2x32x64xf16>) outs(%zs : tensor<2x64x64xf16>) -> tensor<2x64x64xf16>
  %s = tensor.expand_shape %mm [[0, 1], [2], [3]] output_shape [1, 2, 64, 64] : tensor<2x64x64xf16> into tensor<1x2x64x64xf16>
  %e1 = tensor.empty() : tensor<1x2x64x64xf16>
  %sc = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s : tensor<1x2x64x64xf16>) outs(%e1 : tensor<1x2x64x64xf16>) {
  ^bb0(%x: f16, %o: f16):
    %c = arith.truncf %scale : f64 to f16
    %r = arith.mulf %x, %c : f16
    linalg.yield %r : f16
  } -> tensor<1x2x64x64xf16>
  %ninf = arith.constant 0xFC00 : f16
  %em = tensor.empty() : tensor<1x2x64x1xf16>
  %fm = linalg.fill ins(%ninf : f16) outs(%em : tensor<1x2x64x1xf16>) -> tensor<1x2x64x1xf16>
  %mx = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%sc : tensor<1x2x64x64xf16>) outs(%fm : tensor<1x2x64x1xf16>) {
  ^bb0(%x: f16, %o: f16):
    %r = arith.maximumf %x, %o : f16
    linalg.yield %r : f16
  } -> tensor<1x2x64x1xf16>
  %alpha1 = arith.constant 1 : i64
  %e2 = tensor.empty() : tensor<1x2x64x64xf16>
  %sub = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sc, %mx : tensor<1x2x64x64xf16>, tensor<1x2x64x1xf16>) outs(%e2 : tensor<1x2x64x64xf16>) {
  ^bb0(%x: f16, %m: f16, %o: f16):
    %al = arith.sitofp %alpha1 : i64 to f16
    %ma = arith.mulf %m, %al : f16
    %r = arith.subf %x, %ma : f16
    linalg.yield %r : f16
  } -> tensor<1x2x64x64xf16>
  %e3 = tensor.empty() : tensor<1x2x64x64xf16>
  %ex = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sub : tensor<1x2x64x64xf16>) outs(%e3 : tensor<1x2x64x64xf16>) {
  ^bb0(%x: f16, %o: f16):
    %r = math.exp %x : f16
    linalg.yield %r : f16
  } -> tensor<1x2x64x64xf16>
  %e4 = tensor.empty() : tensor<1x2x64x1xf16>
  %fz = linalg.fill ins(%zero : f16) outs(%e4 : tensor<1x2x64x1xf16>) -> tensor<1x2x64x1xf16>
  %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%ex : tensor<1x2x64x64xf16>) outs(%fz : tensor<1x2x64x1xf16>) {
  ^bb0(%x: f16, %o: f16):
    %r = arith.addf %x, %o : f16
    linalg.yield %r : f16
  } -> tensor<1x2x64x1xf16>
  %e5 = tensor.empty() : tensor<1x2x64x64xf16>
  %p = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%ex, %sum : tensor<1x2x64x64xf16>, tensor<1x2x64x1xf16>) outs(%e5 : tensor<1x2x64x64xf16>) {
  ^bb0(%x: f16, %l: f16, %o: f16):
    %r = arith.divf %x, %l : f16
    linalg.yield %r : f16
  } -> tensor<1x2x64x64xf16>
  %cp = tensor.collapse_shape %p [[0, 1], [2], [3]] : tensor<1x2x64x64xf16> into tensor<2x64x64xf16>
  %cv = tensor.collapse_shape %v [[0, 1], [2], [3]] : tensor<1x2x64x32xf16> into tensor<2x64x32xf16>
  %eo = tensor.empty() : tensor<2x64x32xf16>
  %zo = linalg.fill ins(%zero : f16) outs(%eo : tensor<2x64x32xf16>) -> tensor<2x64x32xf16>
  %mo = linalg.batch_matmul ins(%cp, %cv : tensor<2x64x64xf16>, tensor<2x64x32xf16>) outs(%zo : tensor<2x64x32xf16>) -> tensor<2x64x32xf16>
  %out = tensor.expand_shape %mo [[0, 1], [2], [3]] output_shape [1, 2, 64, 32] : tensor<2x64x32xf16> into tensor<1x2x64x32xf16>
  return %out : tensor<1x2x64x32xf16>
}
