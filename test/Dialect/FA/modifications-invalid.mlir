// RUN: fa-opt %s --split-input-file --verify-diagnostics

// score_mod and mask_mod: their block arguments, their value, what their
// ops may do.

func.func @arguments(%q: memref<1x2x8x16xf32>, %o: memref<1x2x8x16xf32>) {
  // expected-error @+1 {{expected score_mod's block arguments to be (f32, index, index, index, index) (the 5 leading ones, then each capture as a tensor), got (f32, index, index, index)}}
  fa.attention %q, %q, %q outs(%o : memref<1x2x8x16xf32>) : memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<1x2x8x16xf32>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index):
      fa.yield %s : f32
    }
  return
}

// -----

func.func @capture_as_tensor(%q: memref<1x2x8x16xf32>, %m: memref<2xf32>, %o: memref<1x2x8x16xf32>) {
  // expected-error @+1 {{expected mask_mod's block arguments to be (index, index, index, index, tensor<2xf32>)}}
  fa.attention %q, %q, %q captures(%m : memref<2xf32>) outs(%o : memref<1x2x8x16xf32>) : memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<1x2x8x16xf32>
    mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index, %x: memref<2xf32>):
      %t = arith.constant true
      fa.yield %t : i1
    }
  return
}

// -----

func.func @yield_type(%q: memref<1x2x8x16xf32>, %o: memref<1x2x8x16xf32>) {
  // expected-error @+1 {{expected mask_mod to end in fa.yield of one 'i1'}}
  fa.attention %q, %q, %q outs(%o : memref<1x2x8x16xf32>) : memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<1x2x8x16xf32>
    mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %c = arith.constant 1.0 : f32
      fa.yield %c : f32
    }
  return
}

// -----

func.func @side_effect(%q: memref<1x2x8x16xf32>, %o: memref<1x2x8x16xf32>) {
  fa.attention %q, %q, %q outs(%o : memref<1x2x8x16xf32>) : memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<1x2x8x16xf32>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      // expected-error @+1 {{'memref.alloc' op in score_mod has side effects (a score or mask modification computes a value from its arguments and captures only)}}
      %m = memref.alloc() : memref<4xf32>
      fa.yield %s : f32
    }
  return
}

// -----

func.func @capture_use(%q: memref<1x2x8x16xf32>, %m: memref<2xf32>, %o: memref<1x2x8x16xf32>) {
  fa.attention %q, %q, %q captures(%m : memref<2xf32>) outs(%o : memref<1x2x8x16xf32>) : memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<1x2x8x16xf32>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %x: tensor<2xf32>):
      // expected-error @+1 {{'tensor.insert' op in score_mod reads a capture other than by tensor.extract or tensor.dim}}
      %y = tensor.insert %s into %x[%h] : tensor<2xf32>
      fa.yield %s : f32
    }
  return
}

// -----

func.func @unread_captures(%q: memref<1x2x8x16xf32>, %m: memref<2xf32>, %o: memref<1x2x8x16xf32>) {
  // expected-error @+1 {{expected captures only with a score_mod or mask_mod region that reads them}}
  fa.attention %q, %q, %q captures(%m : memref<2xf32>) outs(%o : memref<1x2x8x16xf32>) : memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<1x2x8x16xf32>
  return
}

// -----

func.func @capture_kind(%q: tensor<1x2x8x16xf32>, %m: memref<2xf32>) -> tensor<1x2x8x16xf32> {
  // expected-error @+1 {{expected captures to be tensors like the inputs, got 'memref<2xf32>'}}
  %o = fa.attention %q, %q, %q captures(%m : memref<2xf32>) : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32> -> tensor<1x2x8x16xf32>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %x: tensor<2xf32>):
      fa.yield %s : f32
    }
  return %o : tensor<1x2x8x16xf32>
}

// -----

func.func @tile_coordinates(%q: memref<16x32xf32>, %s: memref<16x16xf32>, %i0: index) {
  // expected-error @+1 {{expected coordinates(batch, head, first query row, first key) with a score_mod or mask_mod, and only then; got 0 values}}
  fa.score_tile %q, %q -> %s at [%i0, %i0] {scale = 1.0 : f32} : memref<16x32xf32>, memref<16x32xf32> -> memref<16x16xf32>
    mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %t = arith.constant true
      fa.yield %t : i1
    }
  return
}
