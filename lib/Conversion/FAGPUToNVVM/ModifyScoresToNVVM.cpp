//===- ModifyScoresToNVVM.cpp - score_mod and mask_mod to NVVM ------------===//
//
// fagpu.modify_scores: the attention's score_mod and mask_mod inlined on
// each score of a thread's accumulator fragment.
// One pattern per op; WarpgroupToNVVM.cpp says how values change form.
//
//===----------------------------------------------------------------------===//

#include "WarpgroupLowering.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/IRMapping.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::warpgroup;

namespace {

/// Copies `region`'s block at the emitter's insertion point with its
/// arguments bound to `args`, returning the yielded value. The math ops
/// become the SFU's approximations, as the kernel's own exponentials and
/// softcap are (ex2.approx, lg2.approx, tanh.approx); the rest are copied
/// (arith, math.absf and math.sqrt have LLVM lowerings downstream).
Value inlineRegion(OpEmitter &e, OpBuilder &b, Region &region,
                   ValueRange args) {
  Block &block = region.front();
  IRMapping mapping;
  mapping.map(block.getArguments(), args);
  for (Operation &op : block.without_terminator()) {
    auto operand = [&](unsigned i) { return mapping.lookup(op.getOperand(i)); };
    Value lowered;
    if (isa<math::TanhOp>(op))
      lowered = e.tanhApprox(operand(0));
    else if (isa<math::Exp2Op>(op))
      lowered = e.ex2(operand(0));
    else if (isa<math::ExpOp>(op))
      lowered = e.ex2(e.fmul(operand(0), e.cf(M_LOG2E)));
    else if (isa<math::Log2Op>(op))
      lowered = e.lg2(operand(0));
    else if (isa<math::LogOp>(op))
      lowered = e.fmul(e.lg2(operand(0)), e.cf(M_LN2));
    if (lowered)
      mapping.map(op.getResult(0), lowered);
    else
      b.clone(op, mapping);
  }
  return mapping.lookup(cast<fagpu::YieldOp>(block.getTerminator()).getValue());
}

struct ModifyScoresLowering : OpConversionPattern<fagpu::ModifyScoresOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::ModifyScoresOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpEmitter e(rewriter, loc, rewriter.getF32Type());
    SmallVector<Value> s(adaptor.getS());
    Region &scoreMod = op.getScoreMod(), &maskMod = op.getMaskMod();
    std::optional<APFloat> softcap = op.getSoftcap();
    Value scaleLog2 = adaptor.getScaleLog2().front();
    // Without a softcap or score_mod the scores go straight to log2 units;
    // otherwise through natural units, which the regions see.
    bool natural = softcap || !scoreMod.empty();
    Value scale = natural ? e.fmul(scaleLog2, e.cf(M_LN2)) : scaleLog2;
    Value negInf = e.cf(-std::numeric_limits<double>::infinity());

    // The regions' indices, as index values: row tile r's register 4 n + k
    // is row row0 + 16 r + 8 (k / 2) and key key_start + 8 n + k % 2 +
    // 2 quadLane (the accumulator layout, as the step's mask reads it).
    Type index = rewriter.getIndexType();
    auto asIndex = [&](Value v) -> Value {
      return arith::IndexCastUIOp::create(rewriter, loc, index, v);
    };
    Value batch = asIndex(adaptor.getBatch().front());
    Value head = asIndex(adaptor.getHead().front());
    Value row0 = adaptor.getRow0().front();
    Value keyBase = e.add(adaptor.getKeyStart().front(),
                          e.mul(e.position().quadLane, e.c32(2)));
    int64_t rowTiles = op.getS().getType().getRowTiles();
    int64_t perTile = s.size() / rowTiles;
    SmallVector<Value> rows, keys;
    for (int64_t r = 0; r < 2 * rowTiles; ++r)
      rows.push_back(asIndex(r ? e.add(row0, e.c32(8 * r)) : row0));
    for (int64_t n = 0; n < perTile / 4; ++n)
      for (int64_t k = 0; k < 2; ++k) {
        int64_t offset = 8 * n + k;
        keys.push_back(
            asIndex(offset ? e.add(keyBase, e.c32(offset)) : keyBase));
      }

    for (int64_t i = 0, end = s.size(); i < end; ++i) {
      int64_t tile = i / perTile, inTile = i % perTile;
      Value row = rows[2 * tile + (inTile % 4) / 2];
      Value key = keys[2 * (inTile / 4) + inTile % 2];
      Value x = e.fmul(s[i], scale);
      if (softcap) {
        double cap = softcap->convertToDouble();
        x = e.fmul(e.tanhApprox(e.fmul(x, e.cf(1.0 / cap))), e.cf(cap));
      }
      if (!scoreMod.empty())
        x = inlineRegion(e, rewriter, scoreMod, {x, batch, head, row, key});
      if (natural)
        x = e.fmul(x, e.cf(M_LOG2E));
      if (!maskMod.empty())
        x = e.select(
            inlineRegion(e, rewriter, maskMod, {batch, head, row, key}), x,
            negInf);
      s[i] = x;
    }
    rewriter.replaceOpWithMultiple(op, {s});
    return success();
  }
};

} // namespace

void mlir::fa::warpgroup::populateModificationPatterns(
    const TypeConverter &converter, RewritePatternSet &patterns) {
  patterns.add<ModifyScoresLowering>(converter, patterns.getContext());
}
