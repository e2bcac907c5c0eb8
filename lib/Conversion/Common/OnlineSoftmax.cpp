//===- OnlineSoftmax.cpp - the online softmax in registers
//------------------===//
//
// Out-of-line definitions of OnlineSoftmax.h (see there).
//
//===----------------------------------------------------------------------===//

#include "OnlineSoftmax.h"

using namespace mlir;

namespace mlir::fa {

SoftmaxConfig softmaxConfigOf(fagpu::AttentionOp op) {
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

fagpu::SoftmaxStepOp createSoftmaxStep(OpBuilder &b, Location loc,
                                       const SoftmaxConfig &config, Type probs,
                                       Type rows, Value s, Value m, Value l,
                                       Value keyStart, Value row0, Value nk,
                                       Value scaleLog2, Value shift, Value o,
                                       bool masked, bool firstRowOnly) {
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
      config.queryGroup ? i64(config.queryGroup) : IntegerAttr(), firstRowOnly);
}

FailureOr<SoftmaxConfig> tensorCoreConfigOf(fagpu::AttentionOp op,
                                            StringRef target) {
  auto fail = [&](const Twine &why) -> FailureOr<SoftmaxConfig> {
    return op.emitOpError() << "cannot be lowered to " << target << ": " << why;
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

Value SoftmaxEmitter::applySoftcap(MutableArrayRef<Value> s, Value scaleLog2) {
  if (config.softcap <= 0)
    return scaleLog2;
  Value inner = fmul(scaleLog2, cf(1.0 / (config.softcap * kLog2E)));
  Value outer = cf(config.softcap * kLog2E);
  for (Value &v : s)
    v = fmul(tanhApprox(fmul(v, inner)), outer);
  return cf(1.0);
}

void SoftmaxEmitter::applyMask(MutableArrayRef<Value> s, Value kStart,
                               Value row0, Value nk, Value quadLane,
                               Value shift) {
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
      Value col = add(add(kStart, c32(n * 8 + (e % 2))), mul(quadLane, c32(2)));
      Value row = e < 2 ? row0 : row1;
      s[4 * n + e] =
          select(keyVisible(col, row, nk, shift), s[4 * n + e], negInf);
    }
}

Value SoftmaxEmitter::visibleLimit(Value kStart, Value row, Value nk,
                                   Value shift) {
  if (!config.causal)
    return sub(nk, kStart);
  if (!shift)
    return sub(minu(nk, add(row, c32(1))), kStart);
  return sub(arith::MinSIOp::create(b, loc, nk, add(add(row, shift), c32(1))),
             kStart);
}

Value SoftmaxEmitter::keyVisible(Value col, Value row, Value nk, Value shift) {
  Value visible = ult(col, nk);
  auto lt = [&](Value x, Value y) {
    return shift
               ? arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, x, y)
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

Value SoftmaxEmitter::treeMax(ArrayRef<Value> xs) {
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

SoftmaxEmitter::SoftmaxStep
SoftmaxEmitter::onlineSoftmax(MutableArrayRef<Value> s, std::array<Value, 2> &m,
                              std::array<Value, 2> &l, Value effScale,
                              Value moved, bool firstRowOnly) {
  Value negInf = cf(-std::numeric_limits<double>::infinity());
  int64_t tiles = s.size() / 4;
  SoftmaxStep step;
  step.moved = moved;
  std::array<Value, 2> base, rowSum;
  int64_t rows = firstRowOnly ? 1 : 2;
  if (firstRowOnly) {
    // Row g + 8 is padding: P = 0 adds nothing to O or l, and an alpha of
    // 1 leaves its O registers as they are.
    step.alpha[1] = cf(1.0);
    for (int64_t n = 0; n < tiles; ++n)
      s[4 * n + 2] = s[4 * n + 3] = cf(0.0);
  }
  for (int64_t h = 0; h < rows; ++h) {
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
  std::array<Value, 2> negBase;
  for (int64_t h = 0; h < rows; ++h)
    negBase[h] = arith::NegFOp::create(b, loc, base[h]);
  // e4m3 P: exp2(y + log2 s) = s exp2(y), an exact power-of-two scale at
  // the cost of one add per row (l carries s, which O / l cancels).
  if (config.probsScale > 0)
    for (int64_t h = 0; h < rows; ++h)
      negBase[h] = fadd(negBase[h], cf(std::log2(config.probsScale)));
  for (int64_t n = 0; n < tiles; ++n)
    for (int64_t e = 0; e < 2 * rows; ++e) {
      s[4 * n + e] =
          exp2Score(s[4 * n + e], effScale, negBase[e / 2], 4 * n + e);
      if (!config.noRowSum)
        rowSum[e / 2] = fadd(rowSum[e / 2], s[4 * n + e]);
    }
  for (int64_t h = 0; h < rows; ++h)
    l[h] = config.noRowSum ? fmul(step.alpha[h], l[h])
                           : fma(step.alpha[h], l[h], rowSum[h]);
  return step;
}

SoftmaxEmitter::RowUpdate SoftmaxEmitter::moveBase(Value mx, Value &m,
                                                   Value effScale) {
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

SmallVector<Value> SoftmaxEmitter::packProbabilities(ArrayRef<Value> p) {
  SmallVector<Value> frags;
  for (size_t i = 0; i + 8 <= p.size(); i += 8)
    frags.append({packPair(p[i + 0], p[i + 1]), packPair(p[i + 2], p[i + 3]),
                  packPair(p[i + 4], p[i + 5]), packPair(p[i + 6], p[i + 7])});
  return frags;
}

SmallVector<Value> SoftmaxEmitter::packProbabilitiesE4M3(ArrayRef<Value> p) {
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
    halves =
        LLVM::InsertElementOp::create(b, loc, halves, pair(p0, p1), c32(0));
    halves =
        LLVM::InsertElementOp::create(b, loc, halves, pair(p2, p3), c32(1));
    return LLVM::BitcastOp::create(b, loc, i32, halves);
  };
  SmallVector<Value> frags;
  for (size_t i = 0; i + 16 <= p.size(); i += 16)
    for (size_t half : {0, 8})
      for (size_t row : {0, 2})
        frags.push_back(quad(p[i + half + row], p[i + half + row + 1],
                             p[i + half + 4 + row], p[i + half + 4 + row + 1]));
  return frags;
}

SoftmaxEmitter::RowTotal SoftmaxEmitter::rowTotal(Value l) {
  RowTotal total;
  total.sum = fadd(l, shflXor(l, 1));
  total.sum = fadd(total.sum, shflXor(total.sum, 2));
  total.positive = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT,
                                         total.sum, cf(0.0));
  total.inverse =
      select(total.positive,
             arith::DivFOp::create(b, loc, outputScale ? outputScale : cf(1.0),
                                   total.sum),
             cf(0.0));
  return total;
}

void SoftmaxEmitter::storeLse(const RowTotal &total, Value m, Value row,
                              Value nq, Value lseBase, Value quadLane) {
  if (!config.writesLse)
    return;
  auto ifLead = scf::IfOp::create(
      b, loc, arith::AndIOp::create(b, loc, ult(row, nq), eq(quadLane, c32(0))),
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

std::array<Value, 4> SoftmaxEmitter::transposeQuad(ArrayRef<Value> words,
                                                   Value quadLane) {
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

void SoftmaxEmitter::storeRows(ArrayRef<Value> o, std::array<Value, 2> factor,
                               Value row0, Value nq, Value oBase,
                               Value rowStride, int64_t headDim, Value quadLane,
                               bool f32Out) {
  int64_t blocks = headDim / 8;
  int64_t transposedBlocks = f32Out ? 0 : blocks / 4 * 4;
  auto scaled = [&](int64_t h, int64_t d, int64_t k) {
    return fmul(o[d * 4 + 2 * h + k], factor[h]);
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
          vec = LLVM::InsertElementOp::create(b, loc, vec, runs[h][4 * run + j],
                                              c32(j));
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
}

} // namespace mlir::fa
