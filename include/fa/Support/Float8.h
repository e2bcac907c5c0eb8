//===- Float8.h - e4m3 (f8E4M3FN) conversions on the host -------*- C++ -*-===//
//
// The host's e4m3 codec for the tools and bindings that make e4m3 inputs
// (fa-run --dtype e4m3, flashmlir.run_cpu): the same bit manipulation as
// fa-expand-fp8-casts emits into IR, so host-made and IR-made values agree
// bit for bit (test/Integration/CPU/fp8.test compares them). No MLIR needed.
//
// e4m3: sign, 4 exponent bits (bias 7), 3 mantissa bits; no infinity;
// S.1111.111 is NaN; largest finite 448 = 1.75 * 2^8; smallest subnormal
// 2^-9.
//
//===----------------------------------------------------------------------===//

#ifndef FA_SUPPORT_FLOAT8_H
#define FA_SUPPORT_FLOAT8_H

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace mlir::fa {

/// Exact: every e4m3 value is an f32.
inline float e4m3ToFloat(uint8_t code) {
  uint32_t sign = uint32_t(code & 0x80) << 24, magnitude = code & 0x7f;
  uint32_t bits;
  if (magnitude == 0x7f) {
    bits = 0x7fc00000;
  } else if (magnitude < 8) { // subnormal: m * 2^-9
    float value = float(magnitude) * 0x1p-9f;
    std::memcpy(&bits, &value, 4);
  } else {
    bits = (magnitude + (120 << 3)) << 20;
  }
  bits |= sign;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// Nearest even; past 448 after rounding, or NaN: the NaN code (as
/// APFloat); with `saturate`, finite values past 448 give +-448 instead (the
/// hardware's cvt.rn.satfinite).
inline uint8_t floatToE4M3(float x, bool saturate = true) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  uint32_t sign = (bits >> 24) & 0x80, magnitude = bits & 0x7fffffff;
  if (magnitude > 0x7f800000)
    return uint8_t(sign | 0x7f);
  uint32_t code;
  if (magnitude < 0x3c800000) { // |x| < 2^-6: |x| * 2^9 to an integer
    float absX;
    std::memcpy(&absX, &magnitude, 4);
    volatile float shifted = absX * 0x1p9f + 0x1p23f; // nearest even
    code = uint32_t(shifted - 0x1p23f);
  } else {
    uint32_t rounded = (magnitude + 0x7ffff + ((magnitude >> 20) & 1)) >> 20;
    code = rounded - (120 << 3);
  }
  if (code > 0x7e)
    code = saturate ? 0x7e : 0x7f;
  return uint8_t(sign | code);
}

/// Per-tensor quantisation as fa.quantize defines it: scale = 448 / amax (1
/// for an all-zero x), codes = e4m3(x * scale); returns the descale
/// 1 / scale, so that e4m3ToFloat(code) * descale ~ x.
inline float quantizeE4M3(const float *x, size_t n, uint8_t *codes) {
  float amax = 0;
  for (size_t i = 0; i < n; ++i)
    amax = std::max(amax, std::fabs(x[i]));
  float scale = amax > 0 ? 448.0f / amax : 1.0f;
  for (size_t i = 0; i < n; ++i)
    codes[i] = floatToE4M3(x[i] * scale);
  return 1.0f / scale;
}

} // namespace mlir::fa

#endif // FA_SUPPORT_FLOAT8_H
