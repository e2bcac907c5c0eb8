//===- Validation.cpp - valid ranges of fa.attention's values -------------===//

#include "fa/Dialect/FA/IR/Validation.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

using namespace mlir;
using namespace mlir::fa;

/// The shortest "%.<n>g" text of `value` that reads back as the same value.
template <typename T>
static std::string shortest(T value, int minDigits, int maxDigits) {
  if (std::isnan(value))
    return "nan";
  if (std::isinf(value))
    return value < 0 ? "-inf" : "inf";
  char buffer[64];
  for (int digits = minDigits; digits < maxDigits; ++digits) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", digits, double(value));
    if (static_cast<T>(std::strtod(buffer, nullptr)) == value)
      return buffer;
  }
  std::snprintf(buffer, sizeof(buffer), "%.*g", maxDigits, double(value));
  return buffer;
}

/// MLIR's float literals need a '.' before any exponent ("3.0", "1.0e+30").
static std::string asFloatLiteral(std::string text) {
  if (text.find_first_of(".ni") != std::string::npos) // has '.', inf, nan
    return text;
  size_t e = text.find('e');
  return e == std::string::npos ? text + ".0" : text.insert(e, ".0");
}

std::string fa::formatDouble(double value) {
  return asFloatLiteral(shortest(value, 6, 17));
}

std::string fa::formatF32(float value) {
  return asFloatLiteral(shortest(value, 6, 9));
}

static std::string str(int64_t v) { return std::to_string(v); }

/// A value in a diagnostic: as the f32 it is when it is one (an attribute),
/// else as the double it is (an option), both in their shortest exact text.
static std::string str(double v) {
  if (std::isfinite(v) && static_cast<double>(static_cast<float>(v)) == v)
    return shortest(static_cast<float>(v), 6, 9);
  return shortest(v, 6, 17);
}

std::optional<std::string> fa::checkHeadDim(llvm::StringRef name,
                                            int64_t dim) {
  if (dim >= 1 && dim <= kMaxHeadDim)
    return std::nullopt;
  return "expected " + name.str() + " in [1, " + str(kMaxHeadDim) +
         "], got " + str(dim) +
         " (tile sizes divide by it and tile footprints grow with it)";
}

std::optional<std::string> fa::checkTileSize(llvm::StringRef name,
                                             int64_t rows) {
  if (rows >= 1 && rows <= kMaxTileSize)
    return std::nullopt;
  return "expected " + name.str() + " in [1, " + str(kMaxTileSize) +
         "], got " + str(rows) + " (rows of an on-chip tile)";
}

std::optional<std::string> fa::checkScale(double scale) {
  if (scale >= kMinScale && scale <= kMaxScale)
    return std::nullopt;
  return "expected scale in [2^-64, 2^64], got " + str(scale) +
         " (log2(e) * scale must be a normal f32 and the scores finite); "
         "leave it out for 1/sqrt(D)";
}

std::optional<std::string> fa::checkSoftcap(double softcap) {
  if (softcap > 0 && softcap <= kMaxSoftcap)
    return std::nullopt;
  return "expected softcap in (0, 2^24], got " + str(softcap) +
         " (a larger cap changes no f32 score); leave softcap out to disable "
         "capping";
}

std::optional<std::string> fa::checkWindow(int64_t window,
                                           unsigned positionBits) {
  if (window < 1)
    return "expected window to be at least 1, got " + str(window) +
           " (keys with |i - j| < window are visible); leave window out for "
           "no sliding window";
  if (positionBits < 64) {
    int64_t max = (int64_t(1) << (positionBits - 1)) - 1;
    if (window > max)
      return "expected window to be at most " + str(max) + ", got " +
             str(window) + " (this back end compares " + str(int64_t(positionBits)) +
             "-bit positions); a window of at least the key length masks "
             "nothing: leave it out";
  }
  return std::nullopt;
}

std::optional<std::string> fa::checkRescaleThreshold(double threshold,
                                                     llvm::StringRef name) {
  if (threshold >= 0 && threshold <= kMaxRescaleThreshold)
    return std::nullopt;
  return "expected " + name.str() + " in [0, 64], got " +
         str(threshold) +
         " (log2 units: P may reach 2^threshold and its sums must stay finite "
         "in f32)";
}

std::optional<std::string> fa::checkPolyExp2(int64_t degree, int64_t period) {
  if (degree < kMinPolyExp2Degree || degree > kMaxPolyExp2Degree)
    return "expected exp2_poly_degree in [2, 5], got " + str(degree) +
           " (the software exp2's polynomials)";
  if (period < 1 || period > kMaxPolyExp2Period)
    return "expected exp2_poly_period in [1, " + str(kMaxPolyExp2Period) +
           "], got " + str(period) +
           " (one exponential in period columns of a tile)";
  return std::nullopt;
}

std::optional<std::string>
fa::validateAttentionParams(const AttentionParams &p) {
  std::optional<std::string> error;
  if (p.headDim && (error = checkHeadDim("head dim", *p.headDim)))
    return error;
  if (p.valueHeadDim &&
      (error = checkHeadDim("value head dim", *p.valueHeadDim)))
    return error;
  if (p.scale && (error = checkScale(*p.scale)))
    return error;
  if (p.softcap && (error = checkSoftcap(*p.softcap)))
    return error;
  if (p.window && (error = checkWindow(*p.window, p.positionBits)))
    return error;
  if (p.blockR && (error = checkTileSize("block_r", *p.blockR)))
    return error;
  if (p.blockC && (error = checkTileSize("block_c", *p.blockC)))
    return error;
  if (p.rescaleThreshold &&
      (error = checkRescaleThreshold(*p.rescaleThreshold)))
    return error;
  if (p.polyExp2Degree || p.polyExp2Period) {
    if (!p.polyExp2Degree || !p.polyExp2Period)
      return std::string(
          "expected exp2_poly_degree and exp2_poly_period together");
    if ((error = checkPolyExp2(*p.polyExp2Degree, *p.polyExp2Period)))
      return error;
  }
  return std::nullopt;
}

std::optional<std::string> mlir::fa::checkKVSplits(int64_t splits) {
  if (splits < 1 || splits > 1024)
    return "expected kv_splits in [1, 1024], got " + std::to_string(splits);
  return std::nullopt;
}
