//===- Validation.h - valid ranges of fa.attention's values -----*- C++ -*-===//
//
// One place per value: the range every attribute of fa.attention and every
// option of its passes must lie in, with the reason. The verifiers call
// these; so must every tool and binding that builds such a value from text
// (fa-compile's options, fa-run, the C API, flashmlir.compile) and every
// back end that narrows it, so that a value is refused with the same words
// wherever it enters.
//
// Each check returns std::nullopt when the value is valid, else the
// diagnostic: lower case, no trailing period, "expected <name> in <range>
// (<reason>), got <value>", with what to do where the range alone does not
// say it. Floats in messages are printed in their shortest exact text.
//
//===----------------------------------------------------------------------===//

#ifndef FA_DIALECT_FA_IR_VALIDATION_H
#define FA_DIALECT_FA_IR_VALIDATION_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>

namespace mlir::fa {

/// Head dims D and Dv: at least 1 (fa-tile divides by 4 D, the default scale
/// is 1/sqrt(D)) and at most 2^16, so that every tile footprint and offset
/// (tiles of at most kMaxTileSize rows times D) fits int64 with room; the
/// GPU back ends take 64, 128 or 256.
inline constexpr int64_t kMaxHeadDim = int64_t(1) << 16;

/// block_r / block_c and fa-tile's block-r / block-c: rows of a tile.
inline constexpr int64_t kMaxTileSize = int64_t(1) << 20;

/// scale in [2^-64, 2^64]: log2(e) * scale is folded into one f32 constant
/// that must be a normal number (GPU code flushes subnormals to zero: every
/// score would become 0), and scale * q.k of f16 inputs (|q.k| < 2^48 for
/// D <= 2^16) must stay finite (an infinite score makes inf - inf = NaN
/// outputs).
inline constexpr double kMinScale = 0x1p-64;
inline constexpr double kMaxScale = 0x1p64;

/// softcap in [2^-64, 2^24]: c * tanh(s / c) equals s to f32 precision for
/// every score that survives a softmax once c > 2^24, and s / c then falls
/// into the subnormal range that GPU code flushes to zero. Below 2^-64
/// every capped score is within 2^-64 of 0 (uniform attention), and the
/// backward's slope 1 - tanh^2(s / c), read off the capped score as
/// c tanh(s / c) ln 2 / c, overflows f32 (ln 2 / c past 2^128 at c = 1e-45:
/// NaN gradients). Leave softcap out to disable capping.
inline constexpr double kMinSoftcap = 0x1p-64;
inline constexpr double kMaxSoftcap = 0x1p24;

/// The conditional-rescale threshold tau in [0, 64] (log2 units): a skipped
/// rescale leaves P = exp2(s - base) as large as 2^tau, and l and O sum up to
/// 2^31 keys of P (times |V| < 2^16 for f16): 2^(64 + 31 + 16) stays below
/// the f32 maximum 2^128, and tau >= 127 overflows P itself.
inline constexpr double kMaxRescaleThreshold = 64.0;

/// The software exp2 (FlashAttention-4): degree in [2, 5] (the coefficient
/// tables of PolyExp2.h), period in [1, 2^20]: one exponential in `period`
/// columns of a tile is computed in software, and a tile has at most
/// kMaxTileSize columns, so a larger period changes nothing.
inline constexpr int64_t kMinPolyExp2Degree = 2;
inline constexpr int64_t kMaxPolyExp2Degree = 5;
inline constexpr int64_t kMaxPolyExp2Period = kMaxTileSize;

/// e4m3 (f8E4M3FN): the largest finite value, 448 = 1.75 * 2^8; there is no
/// infinity, so a conversion that overflows saturates here (the hardware's
/// cvt.rn.satfinite) instead of producing the NaN encoding.
inline constexpr double kE4M3Max = 448.0;

/// A descale factor of fp8 inputs (q/k/v_descale) in [2^-126, 2^127]:
/// finite and positive (a zero, negative or NaN descale makes every score
/// 0, flips the softmax or poisons it), and a normal f32, since it becomes
/// one (GPU code flushes subnormals to zero).
inline constexpr double kMinDescale = 0x1p-126;
inline constexpr double kMaxDescale = 0x1p127;

/// The scale of P before its e4m3 cast (fa-quantize-probs): a power of two
/// (the scaling and its undoing are exact) in [1, 2^8]. P = exp2(S - m) is
/// at most 2^threshold (1 without conditional rescaling), and
/// scale * 2^threshold must stay at most 448, else the largest
/// probabilities saturate: 2^8 uses e4m3's range fully at threshold 0
/// (FlashAttention-3's fp8 offset of 8; FlashAttention-4 uses threshold 0
/// for fp8).
inline constexpr double kMaxProbsScale = 256.0;

/// `name` is how the diagnostic names the value, e.g. "query head dim D".
std::optional<std::string> checkHeadDim(llvm::StringRef name, int64_t dim);
std::optional<std::string> checkTileSize(llvm::StringRef name, int64_t rows);
std::optional<std::string> checkScale(double scale);
std::optional<std::string> checkSoftcap(double softcap);
/// A sliding window |i - j| < window: in [1, model::maxPosition(
/// positionBits)] (fa/Model/Positions.h: 2^30 for the GPU kernels' 32-bit
/// positions, 2^62 for the CPU path's).
std::optional<std::string> checkWindow(int64_t window,
                                       unsigned positionBits = 64);
/// How far the causal/window diagonal moves right (query i at key position
/// i + offset): in [0, model::maxPosition(positionBits)]; a negative offset would
/// leave the first rows without any key.
std::optional<std::string> checkDiagonalOffset(int64_t offset,
                                               unsigned positionBits = 64);
/// bottom_right aligns and diagonal_offset moves the diagonal of a causal
/// mask or a window: either needs one of them.
std::optional<std::string> checkMaskPlacement(bool causal, bool window,
                                              bool bottomRight,
                                              bool diagonalOffset);
/// Split-KV chunk count, in [1, 1024] (more splits than that only add
/// merge work: a chunk of a 2^20-key row is already 1024 keys).
std::optional<std::string> checkKVSplits(int64_t splits);
/// Rows per page of a paged K/V cache, in [1, 2^20] (flash-attn's are 16 to
/// 256; the GPU kernel further needs a multiple of 16, checked by fagpu-tile).
std::optional<std::string> checkPageSize(int64_t rows);
/// `name`: "threshold" (the attribute) or "rescale threshold" (options).
std::optional<std::string>
checkRescaleThreshold(double threshold,
                      llvm::StringRef name = "rescale threshold");
/// Degree and period of the software exp2 when it is on.
std::optional<std::string> checkPolyExp2(int64_t degree, int64_t period);

/// Element types by their MLIR names (f16, bf16, f32, f8E4M3FN): Q, K and V
/// share one; O is the inputs' type, or f16, bf16 or f32 for f8E4M3FN inputs
/// (the fp8 MMAs accumulate in f32, and an e4m3 O would throw away the
/// precision the descales keep).
std::optional<std::string> checkElementTypes(llvm::StringRef input,
                                             llvm::StringRef output);
/// The user-facing dtype names of the tools and bindings ("e4m3" for
/// f8E4M3FN, the others as in MLIR) to the MLIR name; std::nullopt for an
/// unknown one.
std::optional<llvm::StringRef> mlirElementTypeName(llvm::StringRef dtype);
/// Whether a GPU target has a kernel for inputs of `elementType` (MLIR
/// name): f8E4M3FN has none yet on any target (sm_90a's e4m3 wgmma kernel is
/// issue 18's next step; sm_80 has no fp8 tensor cores). Never fall back to
/// an f16 kernel silently. sm_90a's tile and fagpu levels take e4m3
/// (fagpu-tile, fa-map-to-gpu); its fagpu-build-kernels gives this reason.
std::optional<std::string> checkTargetElementType(llvm::StringRef arch,
                                                  llvm::StringRef elementType);
/// `name`: "q_descale", "k_descale" or "v_descale".
std::optional<std::string> checkDescale(llvm::StringRef name, double descale);
/// Query head `head`'s sink logit: a finite f32 or -inf (no sink); +inf and
/// NaN would turn every row of the head into NaN.
std::optional<std::string> checkSinkLogit(int64_t head, double logit);
/// P's scale before its e4m3 cast with conditional rescaling at
/// `threshold` (log2 units; 0 when off).
std::optional<std::string> checkProbsScale(double scale,
                                           double threshold = 0.0);
/// fa-incoherent-processing's Hadamard transform needs D a power of two.
std::optional<std::string> checkHadamardDim(int64_t dim);

/// Every value of an fa.attention request at once, as a tool or binding
/// receives them; absent optionals are "not given" (off, or the default).
/// Sentinel conventions ("0 means off") belong to the caller: map them to
/// std::nullopt before calling, so that a negative or NaN value is refused
/// instead of silently meaning off.
struct AttentionParams {
  std::optional<int64_t> headDim, valueHeadDim;
  std::optional<double> scale, softcap;
  std::optional<int64_t> window, diagonalOffset;
  std::optional<int64_t> blockR, blockC;
  std::optional<double> rescaleThreshold;
  std::optional<int64_t> polyExp2Degree, polyExp2Period;
  /// 32 for the GPU back ends (see checkWindow).
  unsigned positionBits = 64;
};

/// The first diagnostic among the values of `params`, or std::nullopt.
std::optional<std::string> validateAttentionParams(const AttentionParams &p);

/// `value` as the shortest text that parses back to the same double, as an
/// MLIR float literal (always a '.': "3.0", "1.4e-06", "1.0e+30"); "inf",
/// "-inf", "nan" for the non-finite ones, which MLIR's parser does not take
/// (check the value first). Use it, not std::to_string (6 decimals), for
/// every float written into IR or a pass option.
std::string formatDouble(double value);
/// The same for an f32 (at most 9 significant digits).
std::string formatF32(float value);

} // namespace mlir::fa

#endif // FA_DIALECT_FA_IR_VALIDATION_H
