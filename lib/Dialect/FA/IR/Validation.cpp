//===- Validation.cpp - valid ranges of fa.attention's values -------------===//

#include "fa/Dialect/FA/IR/Validation.h"
#include "fa/Model/Positions.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

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
  if (softcap >= kMinSoftcap && softcap <= kMaxSoftcap)
    return std::nullopt;
  return "expected softcap in [2^-64, 2^24], got " + str(softcap) +
         " (a larger cap changes no f32 score, a smaller one leaves every "
         "score 0); leave softcap out to disable capping";
}

std::optional<std::string> fa::checkWindow(int64_t window,
                                           unsigned positionBits) {
  if (window < 1)
    return "expected window to be at least 1, got " + str(window) +
           " (keys with |i - j| < window are visible); leave window out for "
           "no sliding window";
  int64_t max = model::maxPosition(positionBits);
  if (window > max)
    return "expected window to be at most " + str(max) + " (2^" +
           str(int64_t(positionBits) - 2) + "), got " + str(window) +
           " (positions, lengths and offsets are " +
           str(int64_t(positionBits)) +
           "-bit integers kept below 2^" + str(int64_t(positionBits) - 2) +
           ", so that no sum of two wraps); a window of at least the key "
           "length masks nothing: leave it out";
  return std::nullopt;
}

std::optional<std::string> fa::checkDiagonalOffset(int64_t offset,
                                                   unsigned positionBits) {
  int64_t max = model::maxPosition(positionBits);
  if (offset >= 0 && offset <= max)
    return std::nullopt;
  return "expected diagonal_offset in [0, " + str(max) + "] (2^" +
         str(int64_t(positionBits) - 2) + "), got " + str(offset) +
         " (query i sits at key position i + offset; positions, lengths and "
         "offsets are " +
         str(int64_t(positionBits)) + "-bit integers kept below 2^" +
         str(int64_t(positionBits) - 2) +
         " so that no sum of two wraps; a window's right reach beyond its "
         "left one)";
}

std::optional<std::string> fa::checkMaskPlacement(bool causal, bool window,
                                                  bool bottomRight,
                                                  bool diagonalOffset) {
  if (causal || window)
    return std::nullopt;
  if (bottomRight)
    return "bottom_right aligns the causal or window mask: give causal or a "
           "window";
  if (diagonalOffset)
    return "diagonal_offset moves the causal or window mask: give causal or "
           "a window";
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
  if (p.diagonalOffset &&
      (error = checkDiagonalOffset(*p.diagonalOffset, p.positionBits)))
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

std::optional<std::string> mlir::fa::checkPageSize(int64_t rows) {
  if (rows < 1 || rows > (int64_t(1) << 20))
    return "expected a page of 1 to 2^20 rows, got " + std::to_string(rows);
  return std::nullopt;
}

std::optional<llvm::StringRef> fa::mlirElementTypeName(llvm::StringRef dtype) {
  if (dtype == "f16" || dtype == "bf16" || dtype == "f32" ||
      dtype == "f8E4M3FN")
    return dtype;
  if (dtype == "e4m3")
    return llvm::StringRef("f8E4M3FN");
  return std::nullopt;
}

std::optional<std::string> fa::checkElementTypes(llvm::StringRef input,
                                                 llvm::StringRef output) {
  if (input == "f8E4M3FN") {
    if (output == "f16" || output == "bf16" || output == "f32")
      return std::nullopt;
    return "expected the output of e4m3 (f8E4M3FN) inputs to be f16, bf16 "
           "or f32, got " +
           output.str() + " (the fp8 products accumulate in f32)";
  }
  if (input != "f16" && input != "bf16" && input != "f32")
    return "expected inputs of f16, bf16, f32 or e4m3 (f8E4M3FN), got " +
           input.str();
  if (output == input)
    return std::nullopt;
  return "expected the output element type to be the inputs' (" + input.str() +
         "), got " + output.str() +
         "; only e4m3 inputs take another output type";
}

std::optional<std::string>
fa::checkTargetElementType(llvm::StringRef arch, llvm::StringRef elementType) {
  if (elementType != "f8E4M3FN")
    return std::nullopt;
  if (arch == "sm_90a")
    return std::nullopt;
  if (arch == "sm_80")
    return std::string("FP8 (e4m3) inputs need fp8 tensor cores, which "
                       "sm_80 does not have; run them on the CPU path "
                       "(fa-run --dtype e4m3)");
  return "FP8 (e4m3) kernels are built for sm_90a only, not " + arch.str() +
         "; the CPU path runs e4m3 (fa-run --dtype e4m3, "
         "flashmlir.run_cpu(dtype=\"e4m3\"))";
}

std::optional<std::string> fa::checkDescale(llvm::StringRef name,
                                            double descale) {
  if (descale >= kMinDescale && descale <= kMaxDescale)
    return std::nullopt;
  return "expected " + name.str() + " in [2^-126, 2^127], got " + str(descale) +
         " (a descale factor, amax / 448, must be finite, positive and a "
         "normal f32)";
}

std::optional<std::string> fa::checkSinkLogit(int64_t head, double logit) {
  if (logit == -std::numeric_limits<double>::infinity() ||
      (std::isfinite(logit) &&
       std::fabs(logit) <= std::numeric_limits<float>::max()))
    return std::nullopt;
  return "expected sink logit " + std::to_string(head) +
         " to be a finite f32 or -inf (no sink), got " + str(logit);
}

std::optional<std::string> fa::checkProbsScale(double scale, double threshold) {
  int exponent = 0;
  bool powerOfTwo =
      std::isfinite(scale) && scale > 0 && std::frexp(scale, &exponent) == 0.5;
  if (!powerOfTwo || scale < 1 || scale > kMaxProbsScale)
    return "expected probs scale to be a power of two in [1, 256], got " +
           str(scale) +
           " (P is scaled before its e4m3 cast and unscaled "
           "after: a power of two keeps both exact)";
  if (scale * std::exp2(threshold) > kE4M3Max)
    return "expected probs scale * 2^threshold to be at most 448 (e4m3's "
           "largest), got " +
           str(scale) + " * 2^" + str(threshold) +
           " (P reaches 2^threshold under conditional rescaling and would "
           "saturate); lower the scale or the rescale threshold (0 for fp8, "
           "as FlashAttention-4)";
  return std::nullopt;
}

std::optional<std::string> fa::checkHadamardDim(int64_t dim) {
  if (dim >= 1 && (dim & (dim - 1)) == 0)
    return std::nullopt;
  return "expected the head dim D to be a power of two for the Hadamard "
         "transform, got " +
         str(dim) + " (Sylvester's H_D exists for powers of two)";
}
