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
inline SoftmaxConfig softmaxConfigOf(fagpu::AttentionOp op) {
  SoftmaxConfig config;
  config.causal = op.getCausal();
  config.window = op.getWindow().value_or(0);
  if (std::optional<APFloat> cap = op.getSoftcap())
    config.softcap = cap->convertToDouble();
  config.rescaleThreshold = op.getRescaleThresholdOrOff();
  config.polyDegree = op.getExp2PolyDegree().value_or(0);
  config.polyPeriod = op.getExp2PolyPeriod().value_or(8);
  config.writesLse = bool(op.getLse());
  config.bottomRight = op.getBottomRight();
  config.diagonalOffset = op.getDiagonalOffset().value_or(0);
  if (std::optional<APFloat> s = op.getProbsScale())
    config.probsScale = s->convertToDouble();
  config.queryGroup = op.getSchedule().getQueryGroup();
  return config;
}

/// fagpu.softmax_step of the scores `s` with the mask and FA4 choices of
/// `config` (the moved flag with conditional rescaling); with `o` (only
/// without conditional rescaling) the step also returns O * alpha.
inline fagpu::SoftmaxStepOp
createSoftmaxStep(OpBuilder &b, Location loc, const SoftmaxConfig &config,
                  Type probs, Type rows, Value s, Value m, Value l,
                  Value keyStart, Value row0, Value nk, Value scaleLog2,
                  Value shift, Value o, bool masked) {
  bool conditional = config.rescaleThreshold >= 0;
  auto i64 = [&](int64_t v) { return b.getI64IntegerAttr(v); };
  auto f32 = [&](double v) { return b.getF32FloatAttr(v); };
  return fagpu::SoftmaxStepOp::create(
      b, loc, probs, rows, rows, rows, conditional ? b.getI1Type() : Type(),
      o ? o.getType() : Type(), s, m, l, keyStart, row0, nk, scaleLog2, shift,
      o, masked, config.causal,
      config.window ? i64(config.window) : IntegerAttr(),
      config.softcap > 0 ? f32(config.softcap) : FloatAttr(),
      conditional ? f32(config.rescaleThreshold) : FloatAttr(),
      config.polyDegree ? i64(config.polyDegree) : IntegerAttr(),
      config.polyDegree ? i64(config.polyPeriod) : IntegerAttr(),
      config.probsScale > 0 ? f32(config.probsScale) : FloatAttr(),
      config.treeRowMax, config.noRowSum,
      config.queryGroup ? i64(config.queryGroup) : IntegerAttr());
}

/// The first check of every tensor-core kernel: D and Dv are head dims of
/// the kernel's (fagpu::checkHeadDims; `target` is "<arch> <kernel>").
/// Returns the mask and FA4 config of `op`, or the
/// error "cannot be lowered to <target>: <why>" on the op.
inline FailureOr<SoftmaxConfig> tensorCoreConfigOf(fagpu::AttentionOp op,
                                                   StringRef target) {
  auto fail = [&](const Twine &why) -> FailureOr<SoftmaxConfig> {
    return op.emitOpError() << "cannot be lowered to " << target << ": "
                            << why;
  };
  int64_t d = op.getHeadDim();
  fagpu::Target arch = target.starts_with("sm_90a")    ? fagpu::Target::sm_90a
                       : target.starts_with("sm_100a") ? fagpu::Target::sm_100a
                                                       : fagpu::Target::sm_80;
  if (std::optional<std::string> why = fagpu::checkHeadDims(
          arch, target.ends_with("wgmma"), d, op.getValueHeadDim()))
    return fail(*why);
  return softmaxConfigOf(op);
}

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
    return op.emitOpError() << "cannot be lowered to " << target << ": "
                            << why;
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
  Value applySoftcap(MutableArrayRef<Value> s, Value scaleLog2) {
    if (config.softcap <= 0)
      return scaleLog2;
    Value inner = fmul(scaleLog2, cf(1.0 / (config.softcap * kLog2E)));
    Value outer = cf(config.softcap * kLog2E);
    for (Value &v : s)
      v = fmul(tanhApprox(fmul(v, inner)), outer);
    return cf(1.0);
  }

  /// Keys past the end and, if causal, above the diagonal or, with a
  /// window, outside the band get -inf. `row0` is the thread's first row,
  /// `quadLane` = lane % 4; `shift` (bottom-right masks' Nk - Nq, plus the
  /// diagonal offset) moves the diagonal (rows then compare as signed
  /// positions).
  void applyMask(MutableArrayRef<Value> s, Value kStart, Value row0, Value nk,
                 Value quadLane, Value shift = Value()) {
    Value negInf = cf(-std::numeric_limits<double>::infinity());
    Value row1 = add(row0, c32(8));
    // Pack-GQA beyond one query: the rows' queries (G a power of two).
    if (config.queryGroup) {
      Value log2G = c32(llvm::Log2_64(config.queryGroup));
      row0 = arith::ShRUIOp::create(b, loc, row0, log2G);
      row1 = arith::ShRUIOp::create(b, loc, row1, log2G);
    }
    if (!config.window) {
      // Register (n, e) holds column 8 n + (e % 2) + 2 quadLane of the
      // block: visible iff that offset is below the row's limit.
      std::array<Value, 2> limit;
      for (int64_t h = 0; h < 2; ++h)
        limit[h] = sub(visibleLimit(kStart, h ? row1 : row0, nk, shift),
                       mul(quadLane, c32(2)));
      for (int64_t n = 0; n < int64_t(s.size()) / 4; ++n)
        for (int64_t e = 0; e < 4; ++e)
          s[4 * n + e] = select(slt(c32(n * 8 + (e % 2)), limit[e / 2]),
                                s[4 * n + e], negInf);
      return;
    }
    for (int64_t n = 0; n < int64_t(s.size()) / 4; ++n)
      for (int64_t e = 0; e < 4; ++e) {
        Value col =
            add(add(kStart, c32(n * 8 + (e % 2))), mul(quadLane, c32(2)));
        Value row = e < 2 ? row0 : row1;
        s[4 * n + e] =
            select(keyVisible(col, row, nk, shift), s[4 * n + e], negInf);
      }
  }

  /// Without a window, query `row` sees exactly the keys kStart + c with
  /// c < limit (signed; the limit may be negative or past the block):
  /// limit = min(Nk, row + 1 if causal) - kStart. One compare against a
  /// constant per score instead of the column arithmetic and two compares.
  /// Bottom-right: min(Nk, row + shift + 1), signed (a row before every key
  /// has a limit below 0).
  Value visibleLimit(Value kStart, Value row, Value nk,
                     Value shift = Value()) {
    if (!config.causal)
      return sub(nk, kStart);
    if (!shift)
      return sub(minu(nk, add(row, c32(1))), kStart);
    return sub(arith::MinSIOp::create(b, loc, nk,
                                      add(add(row, shift), c32(1))),
               kStart);
  }
  Value slt(Value x, Value y) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, x, y);
  }

  /// Whether query `row` sees key `col`: inside the keys and, if causal,
  /// at or below the diagonal, with a window inside the band.
  /// Bottom-right (`shift` = Nk - Nq): the row's key position row + shift,
  /// compared signed.
  Value keyVisible(Value col, Value row, Value nk, Value shift = Value()) {
    Value visible = ult(col, nk);
    auto lt = [&](Value x, Value y) {
      return shift ? arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                           x, y)
                   : ult(x, y);
    };
    if (shift)
      row = add(row, shift);
    if (config.causal)
      visible = arith::AndIOp::create(
          b, loc, visible,
          arith::CmpIOp::create(b, loc,
                                shift ? arith::CmpIPredicate::sle
                                      : arith::CmpIPredicate::ule,
                                col, row));
    if (config.window) {
      Value w = c32(config.window);
      visible = arith::AndIOp::create(
          b, loc, visible,
          arith::AndIOp::create(b, loc, lt(row, add(col, w)),
                                lt(col, add(row, w))));
    }
    return visible;
  }

  /// The max of `xs` as a balanced tree: depth log2 |xs| instead of |xs|.
  Value treeMax(ArrayRef<Value> xs) {
    SmallVector<Value> level(xs);
    while (level.size() > 1) {
      SmallVector<Value> next;
      for (size_t i = 0; i + 1 < level.size(); i += 2)
        next.push_back(fmax(level[i], level[i + 1]));
      if (level.size() % 2)
        next.push_back(level.back());
      level = std::move(next);
    }
    return level.front();
  }

  struct SoftmaxStep {
    std::array<Value, 2> alpha; // O scale of rows g and g + 8
    Value moved; // FA4: some row of this thread moved its base (or null)
  };

  /// One online-softmax step in log2 units for rows g (h = 0) and g + 8
  /// (h = 1): new base m (the running max, or FA4's base that moves only
  /// past the threshold), alpha = exp2(m_old - m_new), s replaced by
  /// P = exp2(s * scale - m) (one FMA, one ex2, or on a compile-time
  /// pattern the FMA-pipe exp2), l = alpha l + rowsum(P). `moved` chains
  /// onto the flag of earlier row tiles of the thread.
  SoftmaxStep onlineSoftmax(MutableArrayRef<Value> s, std::array<Value, 2> &m,
                            std::array<Value, 2> &l, Value effScale,
                            Value moved = Value()) {
    Value negInf = cf(-std::numeric_limits<double>::infinity());
    int64_t tiles = s.size() / 4;
    SoftmaxStep step;
    step.moved = moved;
    std::array<Value, 2> base, rowSum;
    for (int64_t h = 0; h < 2; ++h) {
      Value mx = negInf;
      if (config.treeRowMax && tiles) {
        SmallVector<Value> row;
        for (int64_t n = 0; n < tiles; ++n)
          row.append({s[4 * n + 2 * h], s[4 * n + 2 * h + 1]});
        mx = treeMax(row);
      } else {
        for (int64_t n = 0; n < tiles; ++n)
          mx = fmax(mx, fmax(s[4 * n + 2 * h], s[4 * n + 2 * h + 1]));
      }
      mx = fmax(mx, shflXor(mx, 1));
      mx = fmax(mx, shflXor(mx, 2));
      RowUpdate update = moveBase(mx, m[h], effScale);
      base[h] = update.base;
      step.alpha[h] = update.alpha;
      if (Value move = update.moved)
        step.moved =
            step.moved ? arith::OrIOp::create(b, loc, step.moved, move) : move;
      rowSum[h] = cf(0.0);
    }
    std::array<Value, 2> negBase = {arith::NegFOp::create(b, loc, base[0]),
                                    arith::NegFOp::create(b, loc, base[1])};
    // e4m3 P: exp2(y + log2 s) = s exp2(y), an exact power-of-two scale at
    // the cost of one add per row (l carries s, which O / l cancels).
    if (config.probsScale > 0)
      for (Value &nb : negBase)
        nb = fadd(nb, cf(std::log2(config.probsScale)));
    for (int64_t n = 0; n < tiles; ++n)
      for (int64_t e = 0; e < 4; ++e) {
        s[4 * n + e] =
            exp2Score(s[4 * n + e], effScale, negBase[e / 2], 4 * n + e);
        if (!config.noRowSum)
          rowSum[e / 2] = fadd(rowSum[e / 2], s[4 * n + e]);
      }
    for (int64_t h = 0; h < 2; ++h)
      l[h] = config.noRowSum ? fmul(step.alpha[h], l[h])
                             : fma(step.alpha[h], l[h], rowSum[h]);
    return step;
  }

  struct RowUpdate {
    Value base;  // the base P is computed against (0 for an empty row)
    Value alpha; // exp2(m_old - base): the O and l scale
    Value moved; // FA4: the base moved (null without conditional rescaling)
  };

  /// The base update of one row whose block max (raw scores) is `mx`:
  /// m <- max(m, mx * scale), or with FA4's conditional rescaling the base
  /// moves only when the block max exceeds it by more than the threshold.
  RowUpdate moveBase(Value mx, Value &m, Value effScale) {
    Value negInf = cf(-std::numeric_limits<double>::infinity());
    Value mOld = m;
    Value mBlock = fmul(mx, effScale);
    Value mNew, move;
    if (config.rescaleThreshold >= 0) {
      // FA4: the stored value is the scaling base; it moves only when
      // the block's max exceeds it by more than the threshold.
      move = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT,
                                   arith::SubFOp::create(b, loc, mBlock, mOld),
                                   cf(config.rescaleThreshold));
      mNew = select(move, mBlock, mOld);
    } else {
      mNew = fmax(mOld, mBlock);
    }
    // A row with no visible key so far keeps m = -inf: use base 0.
    Value empty =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, mNew, negInf);
    RowUpdate update;
    update.base = select(empty, cf(0.0), mNew);
    update.alpha = ex2(arith::SubFOp::create(b, loc, mOld, update.base));
    if (move) {
      update.alpha = select(move, update.alpha, cf(1.0));
      update.moved = move;
    }
    m = mNew;
    return update;
  }

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
  SmallVector<Value> packProbabilities(ArrayRef<Value> p) {
    SmallVector<Value> frags;
    for (size_t i = 0; i + 8 <= p.size(); i += 8)
      frags.append({packPair(p[i + 0], p[i + 1]), packPair(p[i + 2], p[i + 3]),
                    packPair(p[i + 4], p[i + 5]),
                    packPair(p[i + 6], p[i + 7])});
    return frags;
  }

  /// Keys 32k .. 32k + 31 of P as e4m3 (FP8), the A fragment (a0..a3) of
  /// k-step k of the e4m3 P V, four keys a register, lowest byte first:
  /// a0 row g and a1 row g + 8 hold the thread's keys of n8 tiles 4k and
  /// 4k + 1, a2 and a3 those of 4k + 2 and 4k + 3 (the A slots' key order
  /// fagpu.softmax_step documents). Rounded to nearest, saturating.
  SmallVector<Value> packProbabilitiesE4M3(ArrayRef<Value> p) {
    Type fp8 = b.getType<Float8E4M3FNType>();
    auto pair = [&](Value lo, Value hi) -> Value {
      // cvt puts its first operand in the upper byte.
      return NVVM::ConvertF32x2ToF8x2Op::create(
          b, loc, b.getI16Type(), hi, lo, NVVM::FPRoundingMode::RN,
          NVVM::SaturationMode::SATFINITE, /*relu=*/false, fp8);
    };
    // The two halves as one <2 x i16> (PTX mov.b32 {lo, hi}) rather than
    // zext, shl and or: ptxas writes the second cvt's F2FP straight into
    // the upper half of the first's register.
    auto quad = [&](Value p0, Value p1, Value p2, Value p3) -> Value {
      Value halves =
          LLVM::PoisonOp::create(b, loc, VectorType::get({2}, b.getI16Type()));
      halves = LLVM::InsertElementOp::create(b, loc, halves, pair(p0, p1),
                                             c32(0));
      halves = LLVM::InsertElementOp::create(b, loc, halves, pair(p2, p3),
                                             c32(1));
      return LLVM::BitcastOp::create(b, loc, i32, halves);
    };
    SmallVector<Value> frags;
    for (size_t i = 0; i + 16 <= p.size(); i += 16)
      for (size_t half : {0, 8})
        for (size_t row : {0, 2})
          frags.push_back(quad(p[i + half + row], p[i + half + row + 1],
                               p[i + half + 4 + row],
                               p[i + half + 4 + row + 1]));
    return frags;
  }

  /// A row's total: l summed over the quad, and the factor O is stored
  /// with, outputScale / l (0 for a row that saw no key: O = 0 there).
  struct RowTotal {
    Value sum, positive, inverse;
  };
  RowTotal rowTotal(Value l) {
    RowTotal total;
    total.sum = fadd(l, shflXor(l, 1));
    total.sum = fadd(total.sum, shflXor(total.sum, 2));
    total.positive = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT,
                                           total.sum, cf(0.0));
    total.inverse = select(
        total.positive,
        arith::DivFOp::create(b, loc, outputScale ? outputScale : cf(1.0),
                              total.sum),
        cf(0.0));
    return total;
  }

  /// LSE = (m + log2 l − log2 probsScale) ln 2 of `row` (-inf for a row
  /// that saw no key; l carries the probs scale of an e4m3 P), stored by
  /// the quad's lane 0 if the row is below Nq.
  void storeLse(const RowTotal &total, Value m, Value row, Value nq,
                Value lseBase, Value quadLane) {
    if (!config.writesLse)
      return;
    auto ifLead = scf::IfOp::create(
        b, loc,
        arith::AndIOp::create(b, loc, ult(row, nq), eq(quadLane, c32(0))),
        false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifLead.thenBlock());
    Value log2Sum = lg2(total.sum);
    if (config.probsScale > 0)
      log2Sum = fadd(log2Sum, cf(-std::log2(config.probsScale)));
    Value lse = select(total.positive, fmul(fadd(m, log2Sum), cf(kLn2)),
                       cf(-std::numeric_limits<double>::infinity()));
    LLVM::StoreOp::create(b, loc, lse, gep(globalPtr, f32, lseBase, ext64(row)),
                          4);
  }

  /// Four n8 blocks of a row, one 32-bit word (two columns) of each in
  /// every lane of the quad (lane c: columns 2c, 2c + 1), transposed within
  /// the quad: lane c gets block c whole, its 8 columns in order (word j
  /// from lane j). Word i of lane c goes to lane i as its word c, so the
  /// words of one diagonal d = c ^ i swap between lanes c and c ^ d: one
  /// butterfly shuffle by d moves a diagonal, and selects on the lane's
  /// bits pick its word of each diagonal before and after (3 shuffles and
  /// 24 selects, no local memory).
  std::array<Value, 4> transposeQuad(ArrayRef<Value> words, Value quadLane) {
    Value bit0 = arith::TruncIOp::create(b, loc, b.getI1Type(), quadLane);
    Value bit1 = arith::TruncIOp::create(
        b, loc, b.getI1Type(), arith::ShRUIOp::create(b, loc, quadLane, c32(1)));
    // w[c ^ d]: the bits of the constant d swap the selects' arms.
    auto byLane = [&](ArrayRef<Value> w, int64_t d) {
      auto mux = [&](Value bit, bool flip, Value one, Value zero) {
        return flip ? select(bit, zero, one) : select(bit, one, zero);
      };
      Value low = mux(bit0, d & 1, w[1], w[0]);
      Value high = mux(bit0, d & 1, w[3], w[2]);
      return mux(bit1, d & 2, high, low);
    };
    SmallVector<Value> diagonals;
    for (int64_t d = 0; d < 4; ++d) {
      Value word = byLane(words, d);
      diagonals.push_back(d ? shflXor(word, d) : word);
    }
    return {byLane(diagonals, 0), byLane(diagonals, 1), byLane(diagonals, 2),
            byLane(diagonals, 3)};
  }

  /// The epilogue from registers: O / l stored as f16/bf16, or f32 pairs
  /// with `f32Out` (split-KV partials), rows past Nq skipped (row r at
  /// `oBase` + r * `rowStride` elements, an i64); and the LSE.
  ///
  /// f32 pairs: a quad writes 32 B, a whole sector, per 8 columns. f16/bf16
  /// pairs would be 16 B, half a sector, which L1 merges with the store of
  /// the next 8 columns only sometimes (ncu: +26-31% of O's bytes written,
  /// varying between runs). So each run of 32 columns is transposed within
  /// the quad first (transposeQuad) and leaves as one 16-byte store a lane:
  /// 64 contiguous bytes of the row a quad, two whole sectors. Columns past
  /// the last run of 32 (none at the shipped head dims) keep the pairs.
  void storeRows(ArrayRef<Value> o, std::array<Value, 2> m,
                 std::array<Value, 2> l, Value row0, Value nq, Value oBase,
                 Value lseBase, Value rowStride, int64_t headDim,
                 Value quadLane, bool f32Out = false) {
    int64_t blocks = headDim / 8;
    int64_t transposedBlocks = f32Out ? 0 : blocks / 4 * 4;
    std::array<RowTotal, 2> totals = {rowTotal(l[0]), rowTotal(l[1])};
    auto scaled = [&](int64_t h, int64_t d, int64_t k) {
      return fmul(o[d * 4 + 2 * h + k], totals[h].inverse);
    };
    // Every lane of the warp shuffles, before the branches on the rows.
    std::array<SmallVector<Value>, 2> runs;
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t d = 0; d < transposedBlocks; d += 4) {
        SmallVector<Value> words;
        for (int64_t i = 0; i < 4; ++i)
          words.push_back(packPair(scaled(h, d + i, 0), scaled(h, d + i, 1)));
        llvm::append_range(runs[h], transposeQuad(words, quadLane));
      }
    auto wordVector = VectorType::get({4}, i32);
    for (int64_t h = 0; h < 2; ++h) {
      Value row = add(row0, c32(8 * h));
      {
        auto ifRow = scf::IfOp::create(b, loc, ult(row, nq), false);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(ifRow.thenBlock());
        Value rowBase = mul(ext64(row), rowStride);
        auto store = [&](Value value, Value col, int64_t alignment) {
          Value ptr = gep(globalPtr, f32Out ? f32 : half, oBase,
                          add(rowBase, ext64(col)));
          LLVM::StoreOp::create(b, loc, value, ptr, alignment);
        };
        // Lane c of the quad: columns 8 c .. 8 c + 7 of each run of 32.
        for (int64_t run = 0; run < transposedBlocks / 4; ++run) {
          Value vec = LLVM::PoisonOp::create(b, loc, wordVector);
          for (int64_t j = 0; j < 4; ++j)
            vec = LLVM::InsertElementOp::create(
                b, loc, vec, runs[h][4 * run + j], c32(j));
          store(vec, add(c32(run * 32), mul(quadLane, c32(8))),
                /*alignment=*/16);
        }
        for (int64_t d = transposedBlocks; d < blocks; ++d) {
          Value lo = scaled(h, d, 0), hi = scaled(h, d, 1);
          Value pair;
          if (f32Out) {
            pair = LLVM::PoisonOp::create(b, loc, VectorType::get({2}, f32));
            pair = LLVM::InsertElementOp::create(b, loc, pair, lo, c32(0));
            pair = LLVM::InsertElementOp::create(b, loc, pair, hi, c32(1));
          } else {
            pair = packPair(lo, hi);
          }
          store(pair, add(c32(d * 8), mul(quadLane, c32(2))),
                /*alignment=*/f32Out ? 8 : 4);
        }
      }
    }
    // The LSE of rows row0 and row0 + 8 (a warp's 16 rows) back to back,
    // as the staged epilogues store them, so that L1 can merge the two
    // 8-row stores where they share a sector (fagpu::lseStoreBytes counts
    // 16 rows a store); row0 + 8's O stores no longer come between them.
    for (int64_t h = 0; h < 2; ++h)
      storeLse(totals[h], m[h], add(row0, c32(8 * h)), nq, lseBase,
               quadLane);
  }

  const SoftmaxConfig &config;
  /// e4m3 kernels: V's descale, folded into the epilogue's 1 / l (null: 1).
  Value outputScale;
};

} // namespace mlir::fa

#endif // FA_LIB_CONVERSION_COMMON_ONLINESOFTMAX_H
