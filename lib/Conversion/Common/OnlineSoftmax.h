//===- OnlineSoftmax.h - the softmax side of the tensor-core kernels -*- C++
//-*-===//
//
// Both GPU kernels hold S and O in the same register layout (the mma.sync
// C fragment, which wgmma's m64 accumulator repeats per warp): register
// 4 n + e of a thread holds row g + 8 (e / 2), column 8 n + 2 t + (e % 2),
// g = lane / 4, t = lane % 4. So the score-side arithmetic is one piece of
// code: softcap, the bounds/causal/window mask, the online-softmax step in
// log2 units (with FA4's conditional rescaling and software exp2), packing
// P as the A fragments of P V, and the final O / l and LSE stores.
//
//===----------------------------------------------------------------------===//

#ifndef FA_LIB_CONVERSION_COMMON_ONLINESOFTMAX_H
#define FA_LIB_CONVERSION_COMMON_ONLINESOFTMAX_H

#include "NVVMEmitter.h"

#include "fa/Dialect/FA/IR/FAOps.h"
#include "fa/Dialect/FAGPU/IR/FAGPU.h"
#include "fa/Dialect/FAGPU/IR/Heuristics.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "llvm/Support/FormatVariadic.h"

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>

namespace mlir::fa {

/// The mask and FA4 choices a kernel is specialised for.
struct SoftmaxConfig {
  bool causal = false;
  int64_t window = 0;             // |i - j| < window (0: none)
  double softcap = 0.0;           // scores c * tanh(s / c) (0: none)
  double rescaleThreshold = -1.0; // FA4 conditional rescaling (< 0: off)
  int64_t polyDegree = 0;         // FA4 software exp2 (0: off)
  int64_t polyPeriod = 8;
  bool writesLse = true; // an LSE destination was given
  /// Masks aligned to the last key: query i at key position i + Nk - Nq.
  bool bottomRight = false;
  /// The diagonal moved this many keys right (query i at key position
  /// i + diagonalOffset, plus Nk - Nq when bottom-right).
  int64_t diagonalOffset = 0;
  /// The row max as a balanced tree of maxima, not a chain (the mma.sync
  /// kernel's choice: fagpu.softmax_step's `tree_row_max`).
  bool treeRowMax = false;
  /// P's row sums left to the caller (fagpu.softmax_step's `no_row_sum`:
  /// the e4m3 kernel sums P on the tensor cores): l' = alpha l.
  bool noRowSum = false;
  /// e4m3 P (FP8): P is computed scaled by this power of two (an exp2
  /// offset of its log2) and packed to e4m3; 0 keeps P in 16 bits.
  double probsScale = 0.0;
  /// Pack-GQA beyond one query: rows are G a query, row r is query r / G
  /// (0: a row is a query).
  int64_t queryGroup = 0;

  /// Kernel-name suffix of the FA4 options and the window/softcap mask.
  /// Every value is named exactly, so different kernels never share a name.
  std::string suffix() const {
    return (rescaleThreshold >= 0 ? "_cr" + nameOf(rescaleThreshold) : "") +
           (polyDegree ? "_px" + std::to_string(polyDegree) + "p" +
                             std::to_string(polyPeriod)
                       : "") +
           (window ? "_w" + std::to_string(window) : "") +
           (softcap > 0 ? "_sc" + nameOf(softcap) : "") +
           (bottomRight ? "_bralign" : "") +
           (diagonalOffset ? "_do" + std::to_string(diagonalOffset) : "") +
           (writesLse ? "" : "_nolse") +
           (probsScale > 0 ? "_ps" + nameOf(probsScale) : "") +
           (queryGroup ? "_qg" + std::to_string(queryGroup) : "");
  }

  /// A whole value as its digits (8, 30); any other as the hex of its f32
  /// bits (x41f1999a for 30.2), which the kernel computes with.
  static std::string nameOf(double value) {
    if (value == std::floor(value) && std::fabs(value) < 1e9)
      return std::to_string(int64_t(value));
    float f = float(value);
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof(bits));
    return llvm::formatv("x{0:x-8}", bits).str();
  }
};

/// The mask and FA4 choices of `op`: what the tile ops fixed.
SoftmaxConfig softmaxConfigOf(fagpu::AttentionOp op);

/// fagpu.softmax_step of the scores `s` with the mask and FA4 choices of
/// `config` (the moved flag with conditional rescaling); with `o` (only
/// without conditional rescaling) the step also returns O * alpha.
fagpu::SoftmaxStepOp createSoftmaxStep(OpBuilder &b, Location loc,
                                       const SoftmaxConfig &config, Type probs,
                                       Type rows, Value s, Value m, Value l,
                                       Value keyStart, Value row0, Value nk,
                                       Value scaleLog2, Value shift, Value o,
                                       bool masked, bool firstRowOnly = false);

/// The first check of every tensor-core kernel: D and Dv are head dims of
/// the kernel's (fagpu::checkHeadDims; `target` is "<arch> <kernel>").
/// Returns the mask and FA4 config of `op`, or the
/// error "cannot be lowered to <target>: <why>" on the op.
FailureOr<SoftmaxConfig> tensorCoreConfigOf(fagpu::AttentionOp op,
                                            StringRef target);

/// The start of each target's spec reader: `spec` takes the op's mask and
/// FA4 config once the tensor-core checks pass, `schedule` the fields of its
/// #fagpu.schedule; `fail(why)` reports "cannot be lowered to <target>:
/// <why>" on the op.
template <typename Spec> struct SpecReader {
  fagpu::AttentionOp op;
  StringRef target;
  Spec spec = {};
  fagpu::ScheduleFields schedule = {};
  /// Whether the target's kernel takes a KV cache's kv_lengths and pages.
  bool takesKVCaches = false;

  LogicalResult begin() {
    if (!takesKVCaches && (op.getKvLengths() || op.getBlockTable()))
      return op.emitOpError()
             << "cannot be lowered to " << target
             << ": per-sequence key lengths and paged K/V have a kernel on "
                "sm_90a (wgmma) only";
    FailureOr<SoftmaxConfig> config = tensorCoreConfigOf(op, target);
    if (failed(config))
      return failure();
    static_cast<SoftmaxConfig &>(spec) = *config;
    schedule = fagpu::fieldsOf(op.getSchedule());
    return success();
  }
  FailureOr<Spec> fail(const Twine &why) {
    return op.emitOpError() << "cannot be lowered to " << target << ": " << why;
  }
};

class SoftmaxEmitter : public NVVMEmitter {
public:
  SoftmaxEmitter(OpBuilder &b, Location loc, bool bf16,
                 const SoftmaxConfig &config)
      : NVVMEmitter(b, loc, bf16), config(config) {}

protected:
  /// Softcap: s <- c log2(e) tanh(s * scale / c), already in log2 units.
  /// Returns the scale the softmax then applies (1 with a softcap).
  Value applySoftcap(MutableArrayRef<Value> s, Value scaleLog2);

  /// Keys past the end and, if causal, above the diagonal or, with a
  /// window, outside the band get -inf. `row0` is the thread's first row,
  /// `quadLane` = lane % 4; `shift` (bottom-right masks' Nk - Nq, plus the
  /// diagonal offset) moves the diagonal (rows then compare as signed
  /// positions).
  void applyMask(MutableArrayRef<Value> s, Value kStart, Value row0, Value nk,
                 Value quadLane, Value shift = Value());

  /// Without a window, query `row` sees exactly the keys kStart + c with
  /// c < limit (signed; the limit may be negative or past the block):
  /// limit = min(Nk, row + 1 if causal) - kStart. One compare against a
  /// constant per score instead of the column arithmetic and two compares.
  /// Bottom-right: min(Nk, row + shift + 1), signed (a row before every key
  /// has a limit below 0).
  Value visibleLimit(Value kStart, Value row, Value nk, Value shift = Value());
  Value slt(Value x, Value y) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, x, y);
  }

  /// Whether query `row` sees key `col`: inside the keys and, if causal,
  /// at or below the diagonal, with a window inside the band.
  /// Bottom-right (`shift` = Nk - Nq): the row's key position row + shift,
  /// compared signed.
  Value keyVisible(Value col, Value row, Value nk, Value shift = Value());

  /// The max of `xs` as a balanced tree: depth log2 |xs| instead of |xs|.
  Value treeMax(ArrayRef<Value> xs);

  struct SoftmaxStep {
    std::array<Value, 2> alpha; // O scale of rows g and g + 8
    Value moved; // FA4: some row of this thread moved its base (or null)
  };

  /// One online-softmax step in log2 units for rows g (h = 0) and g + 8
  /// (h = 1): new base m (the running max, or FA4's base that moves only
  /// past the threshold), alpha = exp2(m_old - m_new), s replaced by
  /// P = exp2(s * scale - m) (one FMA, one ex2, or on a compile-time
  /// pattern the FMA-pipe exp2), l = alpha l + rowsum(P). `moved` chains
  /// onto the flag of earlier row tiles of the thread. With
  /// `firstRowOnly` row g + 8 is padding: its P is 0, m and l stay, alpha
  /// is 1.
  SoftmaxStep onlineSoftmax(MutableArrayRef<Value> s, std::array<Value, 2> &m,
                            std::array<Value, 2> &l, Value effScale,
                            Value moved = Value(), bool firstRowOnly = false);

  struct RowUpdate {
    Value base;  // the base P is computed against (0 for an empty row)
    Value alpha; // exp2(m_old - base): the O and l scale
    Value moved; // FA4: the base moved (null without conditional rescaling)
  };

  /// The base update of one row whose block max (raw scores) is `mx`:
  /// m <- max(m, mx * scale), or with FA4's conditional rescaling the base
  /// moves only when the block max exceeds it by more than the threshold.
  RowUpdate moveBase(Value mx, Value &m, Value effScale);

  /// P = exp2(s * scale - base): one FMA and the MUFU ex2, or with FA4's
  /// software exp2 the FMA-pipe polynomial for the registers whose index
  /// is 0 mod period -- a compile-time pattern, so each thread moves
  /// 1/period of its exponentials from MUFU to the FMA pipe.
  Value exp2Score(Value s, Value effScale, Value negBase, int64_t index) {
    Value y = fma(s, effScale, negBase);
    bool soft = config.polyDegree && index % config.polyPeriod == 0;
    return soft ? polyExp2(y, config.polyDegree) : ex2(y);
  }

  /// Keys 16k .. 16k + 15 of P, as f16/bf16 pairs, are the A fragment
  /// (a0..a3) of k-step k of P V: P never leaves registers.
  SmallVector<Value> packProbabilities(ArrayRef<Value> p);

  /// Keys 32k .. 32k + 31 of P as e4m3 (FP8), the A fragment (a0..a3) of
  /// k-step k of the e4m3 P V, four keys a register, lowest byte first:
  /// a0 row g and a1 row g + 8 hold the thread's keys of n8 tiles 4k and
  /// 4k + 1, a2 and a3 those of 4k + 2 and 4k + 3 (the A slots' key order
  /// fagpu.softmax_step documents). Rounded to nearest, saturating.
  SmallVector<Value> packProbabilitiesE4M3(ArrayRef<Value> p);

  /// A row's total: l summed over the quad, and the factor O is stored
  /// with, outputScale / l (0 for a row that saw no key: O = 0 there).
  struct RowTotal {
    Value sum, positive, inverse;
  };
  RowTotal rowTotal(Value l);

  /// LSE = (m + log2 l − log2 probsScale) ln 2 of `row` (-inf for a row
  /// that saw no key; l carries the probs scale of an e4m3 P), stored by
  /// the quad's lane 0 if the row is below Nq.
  void storeLse(const RowTotal &total, Value m, Value row, Value nq,
                Value lseBase, Value quadLane);

  /// Four n8 blocks of a row, one 32-bit word (two columns) of each in
  /// every lane of the quad (lane c: columns 2c, 2c + 1), transposed within
  /// the quad: lane c gets block c whole, its 8 columns in order (word j
  /// from lane j). Word i of lane c goes to lane i as its word c, so the
  /// words of one diagonal d = c ^ i swap between lanes c and c ^ d: one
  /// butterfly shuffle by d moves a diagonal, and selects on the lane's
  /// bits pick its word of each diagonal before and after (3 shuffles and
  /// 24 selects, no local memory).
  std::array<Value, 4> transposeQuad(ArrayRef<Value> words, Value quadLane);

  /// The epilogue from registers: O times its rows' factors (`factor`,
  /// rowTotal's inverse, of rows row0 and row0 + 8) stored as f16/bf16, or
  /// f32 pairs with `f32Out` (split-KV partials), rows past Nq skipped (row
  /// r at `oBase` + r * `rowStride` elements, an i64).
  ///
  /// f32 pairs: a quad writes 32 B, a whole sector, per 8 columns. f16/bf16
  /// pairs would be 16 B, half a sector, which L1 merges with the store of
  /// the next 8 columns only sometimes (ncu: +26-31% of O's bytes written,
  /// varying between runs). So each run of 32 columns is transposed within
  /// the quad first (transposeQuad) and leaves as one 16-byte store a lane:
  /// 64 contiguous bytes of the row a quad, two whole sectors. Columns past
  /// the last run of 32 (none at the shipped head dims) keep the pairs.
  void storeRows(ArrayRef<Value> o, std::array<Value, 2> factor, Value row0,
                 Value nq, Value oBase, Value rowStride, int64_t headDim,
                 Value quadLane, bool f32Out = false);

  const SoftmaxConfig &config;
  /// e4m3 kernels: V's descale, folded into the epilogue's 1 / l (null: 1).
  Value outputScale;
};

} // namespace mlir::fa

#endif // FA_LIB_CONVERSION_COMMON_ONLINESOFTMAX_H
