// RUN: fa-opt %s --split-input-file --verify-diagnostics

// The valid range of every value of fa.attention and its tile ops
// (fa/Dialect/FA/IR/Validation.h), one regression case per finding of the
// hardening sweep (issue 16). Before, the first two crashed fa-tile with
// SIGFPE and the others were accepted.

// Head dim 0: fa-tile divided by 4 D (SIGFPE).
func.func @f(%q: tensor<1x2x16x0xf16>, %k: tensor<1x2x16x0xf16>, %v: tensor<1x2x16x64xf16>) {
  // expected-error @+1 {{expected query head dim D in [1, 65536], got 0 (tile sizes divide by it and tile footprints grow with it)}}
  %r = fa.attention %q, %k, %v : tensor<1x2x16x0xf16>, tensor<1x2x16x0xf16>, tensor<1x2x16x64xf16> -> tensor<1x2x16x64xf16>
  return
}

// -----

// Head dim 2^62: 4 D wrapped to 0 in fa-tile (SIGFPE).
func.func @f(%q: tensor<1x2x16x4611686018427387904xf16>, %k: tensor<1x2x16x4611686018427387904xf16>, %v: tensor<1x2x16x64xf16>) {
  // expected-error @+1 {{expected query head dim D in [1, 65536], got 4611686018427387904}}
  %r = fa.attention %q, %k, %v : tensor<1x2x16x4611686018427387904xf16>, tensor<1x2x16x4611686018427387904xf16>, tensor<1x2x16x64xf16> -> tensor<1x2x16x64xf16>
  return
}

// -----

// Value head dim 0.
func.func @f(%q: tensor<1x2x16x64xf16>, %k: tensor<1x2x16x64xf16>, %v: tensor<1x2x16x0xf16>) {
  // expected-error @+1 {{expected value head dim Dv in [1, 65536], got 0}}
  %r = fa.attention %q, %k, %v : tensor<1x2x16x64xf16>, tensor<1x2x16x64xf16>, tensor<1x2x16x0xf16> -> tensor<1x2x16x0xf16>
  return
}

// -----

// Head dim just past the bound.
func.func @f(%q: tensor<1x2x1x65537xf16>, %k: tensor<1x2x1x65537xf16>, %v: tensor<1x2x1x8xf16>) {
  // expected-error @+1 {{expected query head dim D in [1, 65536], got 65537}}
  %r = fa.attention %q, %k, %v : tensor<1x2x1x65537xf16>, tensor<1x2x1x65537xf16>, tensor<1x2x1x8xf16> -> tensor<1x2x1x8xf16>
  return
}

// -----

// Scale 1e-30: log2(e) * scale flushes to 0: every score 0.
func.func @f(%q: tensor<1x2x16x64xf16>, %k: tensor<1x2x16x64xf16>, %v: tensor<1x2x16x64xf16>) {
  // expected-error @+1 {{expected scale in [2^-64, 2^64], got 1e-30}}
  %r = fa.attention %q, %k, %v {scale = 1.0e-30 : f32} : tensor<1x2x16x64xf16>, tensor<1x2x16x64xf16>, tensor<1x2x16x64xf16> -> tensor<1x2x16x64xf16>
  return
}

// -----

// Scale 3e+38: scores overflow to inf: NaN outputs.
func.func @f(%q: tensor<1x2x16x64xf16>, %k: tensor<1x2x16x64xf16>, %v: tensor<1x2x16x64xf16>) {
  // expected-error @+1 {{expected scale in [2^-64, 2^64], got 3e+38}}
  %r = fa.attention %q, %k, %v {scale = 3.0e+38 : f32} : tensor<1x2x16x64xf16>, tensor<1x2x16x64xf16>, tensor<1x2x16x64xf16> -> tensor<1x2x16x64xf16>
  return
}

// -----

// Scale inf: infinite scale.
func.func @f(%q: tensor<1x2x16x64xf16>, %k: tensor<1x2x16x64xf16>, %v: tensor<1x2x16x64xf16>) {
  // expected-error @+1 {{expected scale in [2^-64, 2^64], got inf}}
  %r = fa.attention %q, %k, %v {scale = 0x7F800000 : f32} : tensor<1x2x16x64xf16>, tensor<1x2x16x64xf16>, tensor<1x2x16x64xf16> -> tensor<1x2x16x64xf16>
  return
}

// -----

// Scale nan: NaN scale.
func.func @f(%q: tensor<1x2x16x64xf16>, %k: tensor<1x2x16x64xf16>, %v: tensor<1x2x16x64xf16>) {
  // expected-error @+1 {{expected scale in [2^-64, 2^64], got nan}}
  %r = fa.attention %q, %k, %v {scale = 0x7FC00000 : f32} : tensor<1x2x16x64xf16>, tensor<1x2x16x64xf16>, tensor<1x2x16x64xf16> -> tensor<1x2x16x64xf16>
  return
}

// -----

// Softcap 1e+30: reached the kernel-name suffix as _sc<int64 overflow>.
func.func @f(%q: tensor<1x2x16x64xf16>, %k: tensor<1x2x16x64xf16>, %v: tensor<1x2x16x64xf16>) {
  // expected-error @+1 {{expected softcap in [2^-64, 2^24], got 1e+30}}
  %r = fa.attention %q, %k, %v {softcap = 1.0e+30 : f32} : tensor<1x2x16x64xf16>, tensor<1x2x16x64xf16>, tensor<1x2x16x64xf16> -> tensor<1x2x16x64xf16>
  return
}

// -----

// Softcap inf: infinite cap.
func.func @f(%q: tensor<1x2x16x64xf16>, %k: tensor<1x2x16x64xf16>, %v: tensor<1x2x16x64xf16>) {
  // expected-error @+1 {{expected softcap in [2^-64, 2^24], got inf}}
  %r = fa.attention %q, %k, %v {softcap = 0x7F800000 : f32} : tensor<1x2x16x64xf16>, tensor<1x2x16x64xf16>, tensor<1x2x16x64xf16> -> tensor<1x2x16x64xf16>
  return
}

// -----

// Softcap nan: NaN cap.
func.func @f(%q: tensor<1x2x16x64xf16>, %k: tensor<1x2x16x64xf16>, %v: tensor<1x2x16x64xf16>) {
  // expected-error @+1 {{expected softcap in [2^-64, 2^24], got nan}}
  %r = fa.attention %q, %k, %v {softcap = 0x7FC00000 : f32} : tensor<1x2x16x64xf16>, tensor<1x2x16x64xf16>, tensor<1x2x16x64xf16> -> tensor<1x2x16x64xf16>
  return
}

// -----

// Window -1.
func.func @f(%q: tensor<1x2x16x64xf16>, %k: tensor<1x2x16x64xf16>, %v: tensor<1x2x16x64xf16>) {
  // expected-error @+1 {{expected window to be at least 1, got -1}}
  %r = fa.attention %q, %k, %v {window = -1 : i64} : tensor<1x2x16x64xf16>, tensor<1x2x16x64xf16>, tensor<1x2x16x64xf16> -> tensor<1x2x16x64xf16>
  return
}

// -----

// A negative diagonal offset: the first rows would see no key.
func.func @f(%q: tensor<1x2x16x64xf16>, %k: tensor<1x2x16x64xf16>, %v: tensor<1x2x16x64xf16>) {
  // expected-error @+1 {{expected diagonal_offset in [0, 4611686018427387904] (2^62), got -2}}
  %r = fa.attention %q, %k, %v {causal, diagonal_offset = -2 : i64} : tensor<1x2x16x64xf16>, tensor<1x2x16x64xf16>, tensor<1x2x16x64xf16> -> tensor<1x2x16x64xf16>
  return
}

// -----

// A diagonal offset with no mask to move.
func.func @f(%q: tensor<1x2x16x64xf16>, %k: tensor<1x2x16x64xf16>, %v: tensor<1x2x16x64xf16>) {
  // expected-error @+1 {{diagonal_offset moves the causal or window mask: give causal or a window}}
  %r = fa.attention %q, %k, %v {diagonal_offset = 2 : i64} : tensor<1x2x16x64xf16>, tensor<1x2x16x64xf16>, tensor<1x2x16x64xf16> -> tensor<1x2x16x64xf16>
  return
}

// -----

// block_r past the largest tile: tile footprints overflowed int64.
func.func @f(%q: tensor<1x2x16x64xf16>, %k: tensor<1x2x16x64xf16>, %v: tensor<1x2x16x64xf16>) {
  // expected-error @+1 {{expected block_r in [1, 1048576], got 1048577}}
  %r = fa.attention %q, %k, %v {block_r = 1048577 : i64} : tensor<1x2x16x64xf16>, tensor<1x2x16x64xf16>, tensor<1x2x16x64xf16> -> tensor<1x2x16x64xf16>
  return
}

// -----

// block_c = INT64_MAX.
func.func @f(%q: tensor<1x2x16x64xf16>, %k: tensor<1x2x16x64xf16>, %v: tensor<1x2x16x64xf16>) {
  // expected-error @+1 {{expected block_c in [1, 1048576], got 9223372036854775807}}
  %r = fa.attention %q, %k, %v {block_c = 9223372036854775807 : i64} : tensor<1x2x16x64xf16>, tensor<1x2x16x64xf16>, tensor<1x2x16x64xf16> -> tensor<1x2x16x64xf16>
  return
}

// -----

// Rescale threshold 200: P = 2^200 overflows f32 to inf.
func.func @f(%s: memref<16x32xf32>, %m: memref<16xf32>, %a: memref<16xf32>) {
  // expected-error @+1 {{expected threshold in [0, 64], got 200}}
  %r = fa.conditional_softmax_update %s, %m, %m -> %a {threshold = 200.0 : f32} : memref<16x32xf32>, memref<16xf32>, memref<16xf32> -> memref<16xf32>
  return
}

// -----

// Rescale threshold 127: tau >= 127 overflows P.
func.func @f(%s: memref<16x32xf32>, %m: memref<16xf32>, %a: memref<16xf32>) {
  // expected-error @+1 {{expected threshold in [0, 64], got 127}}
  %r = fa.conditional_softmax_update %s, %m, %m -> %a {threshold = 127.0 : f32} : memref<16x32xf32>, memref<16xf32>, memref<16xf32> -> memref<16xf32>
  return
}

// -----

// Rescale threshold inf: reached the kernel-name suffix as _cr-9223372036854775808.
func.func @f(%s: memref<16x32xf32>, %m: memref<16xf32>, %a: memref<16xf32>) {
  // expected-error @+1 {{expected threshold in [0, 64], got inf}}
  %r = fa.conditional_softmax_update %s, %m, %m -> %a {threshold = 0x7F800000 : f32} : memref<16x32xf32>, memref<16xf32>, memref<16xf32> -> memref<16xf32>
  return
}

// -----

// Rescale threshold nan: NaN threshold.
func.func @f(%s: memref<16x32xf32>, %m: memref<16xf32>, %a: memref<16xf32>) {
  // expected-error @+1 {{expected threshold in [0, 64], got nan}}
  %r = fa.conditional_softmax_update %s, %m, %m -> %a {threshold = 0x7FC00000 : f32} : memref<16x32xf32>, memref<16xf32>, memref<16xf32> -> memref<16xf32>
  return
}

// -----

// Software exp2 period past the largest tile.
func.func @f(%s: memref<16x32xf32>, %m: memref<16xf32>) {
  // expected-error @+1 {{expected exp2_poly_period in [1, 1048576], got 1048577}}
  fa.softmax_update %s, %m, %m -> %m {exp2_poly_degree = 3 : i64, exp2_poly_period = 1048577 : i64} : memref<16x32xf32>, memref<16xf32>, memref<16xf32> -> memref<16xf32>
  return
}

// -----

// Software exp2 degree 1 (no coefficient table).
func.func @f(%s: memref<16x32xf32>, %m: memref<16xf32>) {
  // expected-error @+1 {{expected exp2_poly_degree in [2, 5], got 1}}
  fa.softmax_update %s, %m, %m -> %m {exp2_poly_degree = 1 : i64, exp2_poly_period = 8 : i64} : memref<16x32xf32>, memref<16xf32>, memref<16xf32> -> memref<16xf32>
  return
}

// -----

// score_tile: scale inf.
func.func @f(%q: memref<?x64xf16>, %k: memref<?x64xf16>, %s: memref<16x32xf32>, %i: index) {
  // expected-error @+1 {{expected scale in [2^-64, 2^64], got inf}}
  fa.score_tile %q, %k -> %s at [%i, %i] {scale = 0x7F800000 : f32} : memref<?x64xf16>, memref<?x64xf16> -> memref<16x32xf32>
  return
}

// -----

// score_tile: softcap 1e30.
func.func @f(%q: memref<?x64xf16>, %k: memref<?x64xf16>, %s: memref<16x32xf32>, %i: index) {
  // expected-error @+1 {{expected softcap in [2^-64, 2^24], got 1e+30}}
  fa.score_tile %q, %k -> %s at [%i, %i] {scale = 1.0 : f32, softcap = 1.0e+30 : f32} : memref<?x64xf16>, memref<?x64xf16> -> memref<16x32xf32>
  return
}
