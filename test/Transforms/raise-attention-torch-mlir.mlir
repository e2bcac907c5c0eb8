// RUN: fa-opt %s --split-input-file --fa-raise-attention | FileCheck %s
// RUN: fa-opt %s --split-input-file --fa-raise-attention=canonicalize=false 2>&1 | FileCheck %s --check-prefix=RAW

// torch-mlir's SDPA decomposition as it emits it: aten.sub lowered with its
// alpha operand as a multiply by a converted constant 1 (x - m * sitofp(1))
// and the scale 1/sqrt(D) computed by scalar arithmetic. The pass
// canonicalises the function first, which folds both, and raises it; without
// that (canonicalize=false) the candidate keeps its remark.
// CHECK-LABEL: func.func @sdpa
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} {scale = 0.176776692 : f32} : tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32> -> tensor<1x2x64x32xf32>
// RAW: remark: not raised: the softmax's numerator is not exp(x - rowmax(x))
func.func @sdpa(%q: tensor<1x2x64x32xf32>, %k: tensor<1x2x64x32xf32>, %v: tensor<1x2x64x32xf32>) -> tensor<1x2x64x32xf32> {
  %dim = arith.constant 32 : i64
  %dimf = arith.sitofp %dim : i64 to f64
  %sq = math.sqrt %dimf : f64
  %one = arith.constant 1.000000e+00 : f64
  %scale = arith.divf %one, %sq : f64
  %ekt = tensor.empty() : tensor<1x2x32x64xf32>
  %kt = linalg.transpose ins(%k : tensor<1x2x64x32xf32>) outs(%ekt : tensor<1x2x32x64xf32>) permutation = [0, 1, 3, 2]
  %cq = tensor.collapse_shape %q [[0, 1], [2], [3]] : tensor<1x2x64x32xf32> into tensor<2x64x32xf32>
  %ck = tensor.collapse_shape %kt [[0, 1], [2], [3]] : tensor<1x2x32x64xf32> into tensor<2x32x64xf32>
  %zero = arith.constant 0.000000e+00 : f32
  %es = tensor.empty() : tensor<2x64x64xf32>
  %zs = linalg.fill ins(%zero : f32) outs(%es : tensor<2x64x64xf32>) -> tensor<2x64x64xf32>
  %mm = linalg.batch_matmul ins(%cq, %ck : tensor<2x64x32xf32>, tensor<2x32x64xf32>) outs(%zs : tensor<2x64x64xf32>) -> tensor<2x64x64xf32>
  %s = tensor.expand_shape %mm [[0, 1], [2], [3]] output_shape [1, 2, 64, 64] : tensor<2x64x64xf32> into tensor<1x2x64x64xf32>
  %e1 = tensor.empty() : tensor<1x2x64x64xf32>
  %sc = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s : tensor<1x2x64x64xf32>) outs(%e1 : tensor<1x2x64x64xf32>) {
  ^bb0(%x: f32, %o: f32):
    %c = arith.truncf %scale : f64 to f32
    %r = arith.mulf %x, %c : f32
    linalg.yield %r : f32
  } -> tensor<1x2x64x64xf32>
  %ninf = arith.constant 0xFF800000 : f32
  %em = tensor.empty() : tensor<1x2x64x1xf32>
  %fm = linalg.fill ins(%ninf : f32) outs(%em : tensor<1x2x64x1xf32>) -> tensor<1x2x64x1xf32>
  %mx = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%sc : tensor<1x2x64x64xf32>) outs(%fm : tensor<1x2x64x1xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.maximumf %x, %o : f32
    linalg.yield %r : f32
  } -> tensor<1x2x64x1xf32>
  %alpha1 = arith.constant 1 : i64
  %e2 = tensor.empty() : tensor<1x2x64x64xf32>
  %sub = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sc, %mx : tensor<1x2x64x64xf32>, tensor<1x2x64x1xf32>) outs(%e2 : tensor<1x2x64x64xf32>) {
  ^bb0(%x: f32, %m: f32, %o: f32):
    %al = arith.sitofp %alpha1 : i64 to f32
    %ma = arith.mulf %m, %al : f32
    %r = arith.subf %x, %ma : f32
    linalg.yield %r : f32
  } -> tensor<1x2x64x64xf32>
  %e3 = tensor.empty() : tensor<1x2x64x64xf32>
  %ex = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sub : tensor<1x2x64x64xf32>) outs(%e3 : tensor<1x2x64x64xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = math.exp %x : f32
    linalg.yield %r : f32
  } -> tensor<1x2x64x64xf32>
  %e4 = tensor.empty() : tensor<1x2x64x1xf32>
  %fz = linalg.fill ins(%zero : f32) outs(%e4 : tensor<1x2x64x1xf32>) -> tensor<1x2x64x1xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%ex : tensor<1x2x64x64xf32>) outs(%fz : tensor<1x2x64x1xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.addf %x, %o : f32
    linalg.yield %r : f32
  } -> tensor<1x2x64x1xf32>
  %e5 = tensor.empty() : tensor<1x2x64x64xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%ex, %sum : tensor<1x2x64x64xf32>, tensor<1x2x64x1xf32>) outs(%e5 : tensor<1x2x64x64xf32>) {
  ^bb0(%x: f32, %l: f32, %o: f32):
    %r = arith.divf %x, %l : f32
    linalg.yield %r : f32
  } -> tensor<1x2x64x64xf32>
  %cp = tensor.collapse_shape %p [[0, 1], [2], [3]] : tensor<1x2x64x64xf32> into tensor<2x64x64xf32>
  %cv = tensor.collapse_shape %v [[0, 1], [2], [3]] : tensor<1x2x64x32xf32> into tensor<2x64x32xf32>
  %eo = tensor.empty() : tensor<2x64x32xf32>
  %zo = linalg.fill ins(%zero : f32) outs(%eo : tensor<2x64x32xf32>) -> tensor<2x64x32xf32>
  %mo = linalg.batch_matmul ins(%cp, %cv : tensor<2x64x64xf32>, tensor<2x64x32xf32>) outs(%zo : tensor<2x64x32xf32>) -> tensor<2x64x32xf32>
  %out = tensor.expand_shape %mo [[0, 1], [2], [3]] output_shape [1, 2, 64, 32] : tensor<2x64x32xf32> into tensor<1x2x64x32xf32>
  return %out : tensor<1x2x64x32xf32>
}

// -----

// torch-mlir's aten.max.dim lowering (older softmax decompositions): one
// generic yields the row max and its argmax; the max is its own result's
// maximumf of the input and its accumulator, which the argmax cannot
// change. Raised; the argmax generic is left dead and erased.
// CHECK-LABEL: func.func @sdpa_max_dim
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} {scale = 0.176776692 : f32}
// CHECK-NOT: linalg.index
// CHECK: return
func.func @sdpa_max_dim(%q: tensor<1x2x64x32xf32>, %k: tensor<1x2x64x32xf32>, %v: tensor<1x2x64x32xf32>) -> tensor<1x2x64x32xf32> {
  %scale = arith.constant 0.17677669529663687 : f64
  %ekt = tensor.empty() : tensor<1x2x32x64xf32>
  %kt = linalg.transpose ins(%k : tensor<1x2x64x32xf32>) outs(%ekt : tensor<1x2x32x64xf32>) permutation = [0, 1, 3, 2]
  %cq = tensor.collapse_shape %q [[0, 1], [2], [3]] : tensor<1x2x64x32xf32> into tensor<2x64x32xf32>
  %ck = tensor.collapse_shape %kt [[0, 1], [2], [3]] : tensor<1x2x32x64xf32> into tensor<2x32x64xf32>
  %zero = arith.constant 0.000000e+00 : f32
  %es = tensor.empty() : tensor<2x64x64xf32>
  %zs = linalg.fill ins(%zero : f32) outs(%es : tensor<2x64x64xf32>) -> tensor<2x64x64xf32>
  %mm = linalg.batch_matmul ins(%cq, %ck : tensor<2x64x32xf32>, tensor<2x32x64xf32>) outs(%zs : tensor<2x64x64xf32>) -> tensor<2x64x64xf32>
  %s = tensor.expand_shape %mm [[0, 1], [2], [3]] output_shape [1, 2, 64, 64] : tensor<2x64x64xf32> into tensor<1x2x64x64xf32>
  %e1 = tensor.empty() : tensor<1x2x64x64xf32>
  %sc = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s : tensor<1x2x64x64xf32>) outs(%e1 : tensor<1x2x64x64xf32>) {
  ^bb0(%x: f32, %o: f32):
    %c = arith.truncf %scale : f64 to f32
    %r = arith.mulf %x, %c : f32
    linalg.yield %r : f32
  } -> tensor<1x2x64x64xf32>
  %ninf = arith.constant 0xFF800000 : f32
  %em = tensor.empty() : tensor<1x2x64x1xf32>
  %fm = linalg.fill ins(%ninf : f32) outs(%em : tensor<1x2x64x1xf32>) -> tensor<1x2x64x1xf32>
  %zi = arith.constant 0 : i64
  %ei = tensor.empty() : tensor<1x2x64x1xi64>
  %fi = linalg.fill ins(%zi : i64) outs(%ei : tensor<1x2x64x1xi64>) -> tensor<1x2x64x1xi64>
  %mx:2 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%sc : tensor<1x2x64x64xf32>) outs(%fm, %fi : tensor<1x2x64x1xf32>, tensor<1x2x64x1xi64>) {
  ^bb0(%x: f32, %o: f32, %oi: i64):
    %idx = linalg.index 3 : index
    %idx64 = arith.index_cast %idx : index to i64
    %mxv = arith.maximumf %x, %o : f32
    %gt = arith.cmpf ogt, %x, %o : f32
    %ni = arith.select %gt, %idx64, %oi : i64
    linalg.yield %mxv, %ni : f32, i64
  } -> (tensor<1x2x64x1xf32>, tensor<1x2x64x1xi64>)
  %alpha1 = arith.constant 1 : i64
  %e2 = tensor.empty() : tensor<1x2x64x64xf32>
  %sub = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sc, %mx#0 : tensor<1x2x64x64xf32>, tensor<1x2x64x1xf32>) outs(%e2 : tensor<1x2x64x64xf32>) {
  ^bb0(%x: f32, %m: f32, %o: f32):
    %r = arith.subf %x, %m : f32
    linalg.yield %r : f32
  } -> tensor<1x2x64x64xf32>
  %e3 = tensor.empty() : tensor<1x2x64x64xf32>
  %ex = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sub : tensor<1x2x64x64xf32>) outs(%e3 : tensor<1x2x64x64xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = math.exp %x : f32
    linalg.yield %r : f32
  } -> tensor<1x2x64x64xf32>
  %e4 = tensor.empty() : tensor<1x2x64x1xf32>
  %fz = linalg.fill ins(%zero : f32) outs(%e4 : tensor<1x2x64x1xf32>) -> tensor<1x2x64x1xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%ex : tensor<1x2x64x64xf32>) outs(%fz : tensor<1x2x64x1xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.addf %x, %o : f32
    linalg.yield %r : f32
  } -> tensor<1x2x64x1xf32>
  %e5 = tensor.empty() : tensor<1x2x64x64xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%ex, %sum : tensor<1x2x64x64xf32>, tensor<1x2x64x1xf32>) outs(%e5 : tensor<1x2x64x64xf32>) {
  ^bb0(%x: f32, %l: f32, %o: f32):
    %r = arith.divf %x, %l : f32
    linalg.yield %r : f32
  } -> tensor<1x2x64x64xf32>
  %cp = tensor.collapse_shape %p [[0, 1], [2], [3]] : tensor<1x2x64x64xf32> into tensor<2x64x64xf32>
  %cv = tensor.collapse_shape %v [[0, 1], [2], [3]] : tensor<1x2x64x32xf32> into tensor<2x64x32xf32>
  %eo = tensor.empty() : tensor<2x64x32xf32>
  %zo = linalg.fill ins(%zero : f32) outs(%eo : tensor<2x64x32xf32>) -> tensor<2x64x32xf32>
  %mo = linalg.batch_matmul ins(%cp, %cv : tensor<2x64x64xf32>, tensor<2x64x32xf32>) outs(%zo : tensor<2x64x32xf32>) -> tensor<2x64x32xf32>
  %out = tensor.expand_shape %mo [[0, 1], [2], [3]] output_shape [1, 2, 64, 32] : tensor<2x64x32xf32> into tensor<1x2x64x32xf32>
  return %out : tensor<1x2x64x32xf32>
}
