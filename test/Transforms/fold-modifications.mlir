// fa-fold-modifications: regions that spell a built-in become the attribute
// (one pattern per form); everything else stays a region.
// RUN: fa-opt %s --split-input-file --fa-fold-modifications | FileCheck %s

// mask_mod { j <= i } (and i >= j): the causal mask; the capture nothing
// reads any more goes too.
// CHECK-LABEL: func.func @causal_key_first
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 1.250000e-01 : f32} : tensor<1x2x16x64xf32>
// CHECK-NOT: mask_mod
// CHECK-NOT: captures
// CHECK-LABEL: func.func @causal_query_first
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} {causal} : tensor<1x2x16x64xf32>
func.func @causal_key_first(%q: tensor<1x2x16x64xf32>, %s: tensor<2xf32>) -> tensor<1x2x16x64xf32> {
  %o = fa.attention %q, %q, %q captures(%s : tensor<2xf32>) {scale = 0.125 : f32}
      : tensor<1x2x16x64xf32>, tensor<1x2x16x64xf32>, tensor<1x2x16x64xf32> -> tensor<1x2x16x64xf32>
    mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index, %c: tensor<2xf32>):
      %v = arith.cmpi ule, %j, %i : index
      fa.yield %v : i1
    }
  return %o : tensor<1x2x16x64xf32>
}
func.func @causal_query_first(%q: tensor<1x2x16x64xf32>) -> tensor<1x2x16x64xf32> {
  %o = fa.attention %q, %q, %q
      : tensor<1x2x16x64xf32>, tensor<1x2x16x64xf32>, tensor<1x2x16x64xf32> -> tensor<1x2x16x64xf32>
    mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %v = arith.cmpi sge, %i, %j : index
      fa.yield %v : i1
    }
  return %o : tensor<1x2x16x64xf32>
}

// -----

// Not the causal mask: j < i (strictly lower), j <= i beside a window, and
// j <= i on a KV cache (whose causal attribute has an alignment of its own).
// CHECK-LABEL: func.func @not_causal
// CHECK: fa.attention {{.*}} mask_mod
// CHECK: arith.cmpi ult
// CHECK-LABEL: func.func @beside_window
// CHECK: fa.attention {{.*}}window = 4 : i64{{.*}} mask_mod
// CHECK-LABEL: func.func @kv_cache
// CHECK: fa.attention {{.*}} mask_mod
func.func @not_causal(%q: tensor<1x2x16x64xf32>) -> tensor<1x2x16x64xf32> {
  %o = fa.attention %q, %q, %q
      : tensor<1x2x16x64xf32>, tensor<1x2x16x64xf32>, tensor<1x2x16x64xf32> -> tensor<1x2x16x64xf32>
    mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %v = arith.cmpi ult, %j, %i : index
      fa.yield %v : i1
    }
  return %o : tensor<1x2x16x64xf32>
}
func.func @beside_window(%q: tensor<1x2x16x64xf32>) -> tensor<1x2x16x64xf32> {
  %o = fa.attention %q, %q, %q {window = 4 : i64}
      : tensor<1x2x16x64xf32>, tensor<1x2x16x64xf32>, tensor<1x2x16x64xf32> -> tensor<1x2x16x64xf32>
    mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %v = arith.cmpi ule, %j, %i : index
      fa.yield %v : i1
    }
  return %o : tensor<1x2x16x64xf32>
}
func.func @kv_cache(%q: memref<2x2x1x64xf16>, %k: memref<2x2x64x64xf16>, %o: memref<2x2x1x64xf16>, %len: memref<2xi32>) {
  fa.attention %q, %k, %k kv_lengths(%len : memref<2xi32>) outs(%o : memref<2x2x1x64xf16>)
      : memref<2x2x1x64xf16>, memref<2x2x64x64xf16>, memref<2x2x64x64xf16>
    mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %v = arith.cmpi ule, %j, %i : index
      fa.yield %v : i1
    }
  return
}

// -----

// score_mod { c * tanh(s / c) } and { tanh(s * (1 / c)) * c }: a softcap;
// { s }: nothing; mask_mod { true }: nothing.
// CHECK-LABEL: func.func @softcap_div
// CHECK: fa.attention {{.*}}{softcap = 3.000000e+01 : f32} :
// CHECK-NOT: score_mod
// CHECK-LABEL: func.func @softcap_mul
// CHECK: fa.attention {{.*}}{softcap = 5.000000e+01 : f32} :
// CHECK-NOT: score_mod
// CHECK-LABEL: func.func @identity_and_true
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} : tensor<1x2x16x64xf32>
// CHECK-NOT: _mod
func.func @softcap_div(%q: tensor<1x2x16x64xf32>) -> tensor<1x2x16x64xf32> {
  %o = fa.attention %q, %q, %q
      : tensor<1x2x16x64xf32>, tensor<1x2x16x64xf32>, tensor<1x2x16x64xf32> -> tensor<1x2x16x64xf32>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      %c = arith.constant 30.0 : f32
      %a = arith.divf %s, %c : f32
      %t = math.tanh %a : f32
      %r = arith.mulf %c, %t : f32
      fa.yield %r : f32
    }
  return %o : tensor<1x2x16x64xf32>
}
func.func @softcap_mul(%q: tensor<1x2x16x64xf32>) -> tensor<1x2x16x64xf32> {
  %o = fa.attention %q, %q, %q
      : tensor<1x2x16x64xf32>, tensor<1x2x16x64xf32>, tensor<1x2x16x64xf32> -> tensor<1x2x16x64xf32>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      %inv = arith.constant 0.02 : f32
      %c = arith.constant 50.0 : f32
      %a = arith.mulf %s, %inv : f32
      %t = math.tanh %a : f32
      %r = arith.mulf %t, %c : f32
      fa.yield %r : f32
    }
  return %o : tensor<1x2x16x64xf32>
}
func.func @identity_and_true(%q: tensor<1x2x16x64xf32>) -> tensor<1x2x16x64xf32> {
  %o = fa.attention %q, %q, %q
      : tensor<1x2x16x64xf32>, tensor<1x2x16x64xf32>, tensor<1x2x16x64xf32> -> tensor<1x2x16x64xf32>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      fa.yield %s : f32
    } mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %t = arith.constant true
      fa.yield %t : i1
    }
  return %o : tensor<1x2x16x64xf32>
}

// -----

// Not a softcap: the factors disagree (s / 30 inside, 20 outside), a
// softcap attribute already there; a score_mod that remains keeps the
// captures it reads.
// CHECK-LABEL: func.func @caps_disagree
// CHECK: score_mod
// CHECK-LABEL: func.func @softcap_given
// CHECK: {softcap = 2.000000e+01 : f32}
// CHECK: score_mod
// CHECK-LABEL: func.func @captures_kept
// CHECK: fa.attention {{.*}} captures(%{{.*}} : tensor<2xf32>) {causal}
// CHECK: score_mod
// CHECK-NOT: mask_mod
func.func @caps_disagree(%q: tensor<1x2x16x64xf32>) -> tensor<1x2x16x64xf32> {
  %o = fa.attention %q, %q, %q
      : tensor<1x2x16x64xf32>, tensor<1x2x16x64xf32>, tensor<1x2x16x64xf32> -> tensor<1x2x16x64xf32>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      %c = arith.constant 30.0 : f32
      %d = arith.constant 20.0 : f32
      %a = arith.divf %s, %c : f32
      %t = math.tanh %a : f32
      %r = arith.mulf %t, %d : f32
      fa.yield %r : f32
    }
  return %o : tensor<1x2x16x64xf32>
}
func.func @softcap_given(%q: tensor<1x2x16x64xf32>) -> tensor<1x2x16x64xf32> {
  %o = fa.attention %q, %q, %q {softcap = 20.0 : f32}
      : tensor<1x2x16x64xf32>, tensor<1x2x16x64xf32>, tensor<1x2x16x64xf32> -> tensor<1x2x16x64xf32>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      %c = arith.constant 30.0 : f32
      %a = arith.divf %s, %c : f32
      %t = math.tanh %a : f32
      %r = arith.mulf %t, %c : f32
      fa.yield %r : f32
    }
  return %o : tensor<1x2x16x64xf32>
}
func.func @captures_kept(%q: tensor<1x2x16x64xf32>, %slopes: tensor<2xf32>) -> tensor<1x2x16x64xf32> {
  %o = fa.attention %q, %q, %q captures(%slopes : tensor<2xf32>)
      : tensor<1x2x16x64xf32>, tensor<1x2x16x64xf32>, tensor<1x2x16x64xf32> -> tensor<1x2x16x64xf32>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %m: tensor<2xf32>):
      %slope = tensor.extract %m[%h] : tensor<2xf32>
      %d = arith.subi %j, %i : index
      %di = arith.index_cast %d : index to i64
      %df = arith.sitofp %di : i64 to f32
      %r = math.fma %slope, %df, %s : f32
      fa.yield %r : f32
    } mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index, %m: tensor<2xf32>):
      %v = arith.cmpi ule, %j, %i : index
      fa.yield %v : i1
    }
  return %o : tensor<1x2x16x64xf32>
}

// -----

// FlexAttention's sliding window: j <= i and i - j <= 63 -> causal and
// window 64 (|i - j| < 64); with i - j < 64 the same. A window bound on
// j - i (the wrong way round) is not folded.
// CHECK-LABEL: func.func @sliding_window_le
// CHECK: fa.attention {{.*}}{causal, window = 64 : i64} :
// CHECK-NOT: mask_mod
// CHECK-LABEL: func.func @sliding_window_lt
// CHECK: fa.attention {{.*}}{causal, window = 64 : i64} :
// CHECK-LABEL: func.func @wrong_way
// CHECK: mask_mod
func.func @sliding_window_le(%q: tensor<1x2x16x64xf32>) -> tensor<1x2x16x64xf32> {
  %o = fa.attention %q, %q, %q
      : tensor<1x2x16x64xf32>, tensor<1x2x16x64xf32>, tensor<1x2x16x64xf32> -> tensor<1x2x16x64xf32>
    mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %c = arith.cmpi sge, %i, %j : index
      %d = arith.subi %i, %j : index
      %w = arith.constant 63 : index
      %n = arith.cmpi sle, %d, %w : index
      %v = arith.andi %c, %n : i1
      fa.yield %v : i1
    }
  return %o : tensor<1x2x16x64xf32>
}
func.func @sliding_window_lt(%q: tensor<1x2x16x64xf32>) -> tensor<1x2x16x64xf32> {
  %o = fa.attention %q, %q, %q
      : tensor<1x2x16x64xf32>, tensor<1x2x16x64xf32>, tensor<1x2x16x64xf32> -> tensor<1x2x16x64xf32>
    mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %d = arith.subi %i, %j : index
      %w = arith.constant 64 : index
      %n = arith.cmpi slt, %d, %w : index
      %c = arith.cmpi ule, %j, %i : index
      %v = arith.andi %n, %c : i1
      fa.yield %v : i1
    }
  return %o : tensor<1x2x16x64xf32>
}
func.func @wrong_way(%q: tensor<1x2x16x64xf32>) -> tensor<1x2x16x64xf32> {
  %o = fa.attention %q, %q, %q
      : tensor<1x2x16x64xf32>, tensor<1x2x16x64xf32>, tensor<1x2x16x64xf32> -> tensor<1x2x16x64xf32>
    mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %c = arith.cmpi sge, %i, %j : index
      %d = arith.subi %j, %i : index
      %w = arith.constant 63 : index
      %n = arith.cmpi sle, %d, %w : index
      %v = arith.andi %c, %n : i1
      fa.yield %v : i1
    }
  return %o : tensor<1x2x16x64xf32>
}

// The backward takes the same folds: FlexAttention's causal mask and tanh
// softcap become its attributes (so it reaches the built-in backward), the
// unread capture is dropped.
// CHECK-LABEL: func.func @backward
// CHECK: fa.attention_backward %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} outs(%{{.*}}, %{{.*}}, %{{.*}} : {{.*}}) {causal, softcap = 2.000000e+01 : f32}
// CHECK-NOT: score_mod
// CHECK-NOT: mask_mod
// CHECK: return
func.func @backward(%q: memref<1x2x40x64xf32>, %lse: memref<1x2x40xf32>, %unused: memref<2xf32>) {
  fa.attention_backward %q, %q, %q, %q, %lse, %q captures(%unused : memref<2xf32>)
      outs(%q, %q, %q : memref<1x2x40x64xf32>, memref<1x2x40x64xf32>, memref<1x2x40x64xf32>)
      : memref<1x2x40x64xf32>, memref<1x2x40x64xf32>, memref<1x2x40x64xf32>, memref<1x2x40x64xf32>, memref<1x2x40xf32>, memref<1x2x40x64xf32>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %u: tensor<2xf32>):
      %c = arith.constant 20.0 : f32
      %a = arith.divf %s, %c : f32
      %t = math.tanh %a : f32
      %r = arith.mulf %c, %t : f32
      fa.yield %r : f32
    } mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index, %u: tensor<2xf32>):
      %v = arith.cmpi sle, %j, %i : index
      fa.yield %v : i1
    }
  return
}
