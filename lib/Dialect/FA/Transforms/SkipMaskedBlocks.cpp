//===- SkipMaskedBlocks.cpp - block sparsity from a mask_mod --------------===//
//
// fa-skip-masked-blocks: a block loop's body runs only for the block pairs
// where its score tile's mask_mod may let a key through. The test is the
// region evaluated over the block's index ranges in interval arithmetic:
// every integer value of the body becomes a range [lo, hi] and every i1 a
// pair (can be true, can be false), each emitted as IR on the block's
// bounds. A pair whose mask can be true nowhere contributes P = 0, so
// skipping it leaves the online-softmax state and the gradients unchanged.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/IR/FAOps.h"
#include "fa/Dialect/FA/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"

#include <optional>

namespace mlir::fa {
#define GEN_PASS_DEF_FASKIPMASKEDBLOCKS
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

/// An integer value's range, both ends included (index arithmetic).
struct Range {
  Value lo, hi;
};
/// What an i1 may be: canTrue, canFalse (at least one holds).
struct Truth {
  Value canTrue, canFalse;
};

/// Evaluates a mask_mod body over index ranges, emitting the bounds at the
/// builder's point. Values it cannot bound are absent from the maps.
class IntervalEvaluator {
public:
  IntervalEvaluator(OpBuilder &b, Location loc) : b(b), loc(loc) {}

  /// Whether `maskMod` can be true and can be false somewhere in `b` x `h`
  /// x [iLo, iHi] x [jLo, jHi] (null where the body cannot be bounded).
  std::optional<Truth> evaluate(Region &maskMod, Range batch, Range head,
                                Range query, Range key);

private:
  void visit(Operation &op);
  std::optional<Range> range(Value v) {
    auto it = ranges.find(v);
    if (it != ranges.end())
      return it->second;
    return std::nullopt;
  }
  /// An i1's truth; an unbounded one may be either.
  Truth truth(Value v) {
    auto it = truths.find(v);
    if (it != truths.end())
      return it->second;
    return {boolean(true), boolean(true)};
  }
  Value boolean(bool v) {
    return arith::ConstantIntOp::create(b, loc, b.getI1Type(), v);
  }
  Value index(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  template <typename OpT> Value make(Value x, Value y) {
    return b.createOrFold<OpT>(loc, x, y);
  }
  Value cmp(arith::CmpIPredicate p, Value x, Value y) {
    return b.createOrFold<arith::CmpIOp>(loc, p, x, y);
  }
  Value both(Value x, Value y) { return make<arith::AndIOp>(x, y); }
  Value either(Value x, Value y) { return make<arith::OrIOp>(x, y); }

  OpBuilder &b;
  Location loc;
  DenseMap<Value, Range> ranges;
  DenseMap<Value, Truth> truths;
};

/// The ops visit has a rule for.
bool isBoundedIntegerOp(Operation *op) {
  return isa<arith::ConstantOp, arith::AddIOp, arith::SubIOp, arith::MulIOp,
             arith::FloorDivSIOp, arith::DivSIOp, arith::DivUIOp,
             arith::MinSIOp, arith::MaxSIOp, arith::IndexCastOp,
             arith::IndexCastUIOp, arith::ExtSIOp, arith::ExtUIOp,
             arith::TruncIOp, arith::SelectOp, arith::CmpIOp, arith::AndIOp,
             arith::OrIOp, arith::XOrIOp>(op);
}

/// The positive constant `v` is, if it is one.
std::optional<int64_t> positiveConstant(Value v) {
  APInt c;
  if (!matchPattern(v, m_ConstantInt(&c)) || c.getSExtValue() <= 0)
    return std::nullopt;
  return c.getSExtValue();
}

void IntervalEvaluator::visit(Operation &op) {
  using P = arith::CmpIPredicate;
  if (op.getNumResults() != 1 || !isBoundedIntegerOp(&op))
    return;
  Value result = op.getResult(0);
  bool isBool = result.getType().isInteger(1);
  if (auto c = dyn_cast<arith::ConstantOp>(op)) {
    auto attr = dyn_cast<IntegerAttr>(c.getValue());
    if (!attr)
      return;
    if (isBool) {
      bool v = attr.getValue().getBoolValue();
      truths[result] = {boolean(v), boolean(!v)};
    } else {
      Value v = index(attr.getValue().getSExtValue());
      ranges[result] = {v, v};
    }
    return;
  }
  if (isBool) {
    if (auto c = dyn_cast<arith::CmpIOp>(op)) {
      std::optional<Range> x = range(c.getLhs()), y = range(c.getRhs());
      if (!x || !y)
        return;
      P p = c.getPredicate();
      // Unsigned compares are signed ones on non-negative ranges; a
      // negative end makes either outcome possible.
      Value negative;
      if (p == P::ult || p == P::ule || p == P::ugt || p == P::uge) {
        negative = either(cmp(P::slt, x->lo, index(0)),
                          cmp(P::slt, y->lo, index(0)));
        p = p == P::ult   ? P::slt
            : p == P::ule ? P::sle
            : p == P::ugt ? P::sgt
                          : P::sge;
      }
      // x > y is y < x, x >= y is y <= x.
      if (p == P::sgt || p == P::sge) {
        std::swap(x, y);
        p = p == P::sgt ? P::slt : P::sle;
      }
      Truth t;
      switch (p) {
      case P::slt: // x < y somewhere iff x.lo < y.hi; not everywhere iff
                   // x.hi >= y.lo
        t = {cmp(P::slt, x->lo, y->hi), cmp(P::sge, x->hi, y->lo)};
        break;
      case P::sle:
        t = {cmp(P::sle, x->lo, y->hi), cmp(P::sgt, x->hi, y->lo)};
        break;
      case P::eq:
      case P::ne: {
        // Equal somewhere iff the ranges meet; unequal somewhere unless
        // both are the same single value.
        Value meet = both(cmp(P::sle, x->lo, y->hi), cmp(P::sle, y->lo, x->hi));
        Value single = both(both(cmp(P::eq, x->lo, x->hi),
                                 cmp(P::eq, y->lo, y->hi)),
                            cmp(P::eq, x->lo, y->lo));
        Value differ = make<arith::XOrIOp>(single, boolean(true));
        t = p == P::eq ? Truth{meet, differ} : Truth{differ, meet};
        break;
      }
      default:
        return;
      }
      if (negative)
        t = {either(t.canTrue, negative), either(t.canFalse, negative)};
      truths[result] = t;
      return;
    }
    if (isa<arith::AndIOp, arith::OrIOp, arith::XOrIOp, arith::SelectOp>(op)) {
      if (auto s = dyn_cast<arith::SelectOp>(op)) {
        Truth c = truth(s.getCondition()), x = truth(s.getTrueValue()),
              y = truth(s.getFalseValue());
        truths[result] = {
            either(both(c.canTrue, x.canTrue), both(c.canFalse, y.canTrue)),
            either(both(c.canTrue, x.canFalse), both(c.canFalse, y.canFalse))};
        return;
      }
      Truth x = truth(op.getOperand(0)), y = truth(op.getOperand(1));
      if (isa<arith::AndIOp>(op))
        truths[result] = {both(x.canTrue, y.canTrue),
                          either(x.canFalse, y.canFalse)};
      else if (isa<arith::OrIOp>(op))
        truths[result] = {either(x.canTrue, y.canTrue),
                          both(x.canFalse, y.canFalse)};
      else
        truths[result] = {
            either(both(x.canTrue, y.canFalse), both(x.canFalse, y.canTrue)),
            either(both(x.canTrue, y.canTrue), both(x.canFalse, y.canFalse))};
    }
    return;
  }
  // Integer results: ranges in index arithmetic.
  if (isa<arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtSIOp,
          arith::ExtUIOp, arith::TruncIOp>(op)) {
    if (std::optional<Range> x = range(op.getOperand(0)))
      ranges[result] = *x;
    return;
  }
  if (auto s = dyn_cast<arith::SelectOp>(op)) {
    std::optional<Range> x = range(s.getTrueValue()),
                         y = range(s.getFalseValue());
    if (x && y)
      ranges[result] = {make<arith::MinSIOp>(x->lo, y->lo),
                        make<arith::MaxSIOp>(x->hi, y->hi)};
    return;
  }
  std::optional<Range> x = range(op.getOperand(0));
  if (!x)
    return;
  if (isa<arith::MulIOp>(op)) {
    APInt c;
    if (!matchPattern(op.getOperand(1), m_ConstantInt(&c)))
      return;
    Value factor = index(c.getSExtValue());
    Value lo = make<arith::MulIOp>(x->lo, factor),
          hi = make<arith::MulIOp>(x->hi, factor);
    ranges[result] = c.isNegative() ? Range{hi, lo} : Range{lo, hi};
    return;
  }
  if (isa<arith::FloorDivSIOp, arith::DivSIOp, arith::DivUIOp>(op)) {
    // Monotone in the dividend for a positive divisor (divsi truncates,
    // floordivsi floors; divui is floordivsi on the non-negative indices).
    std::optional<int64_t> c = positiveConstant(op.getOperand(1));
    if (!c)
      return;
    Value divisor = index(*c);
    if (isa<arith::DivSIOp>(op))
      ranges[result] = {make<arith::DivSIOp>(x->lo, divisor),
                        make<arith::DivSIOp>(x->hi, divisor)};
    else
      ranges[result] = {make<arith::FloorDivSIOp>(x->lo, divisor),
                        make<arith::FloorDivSIOp>(x->hi, divisor)};
    return;
  }
  std::optional<Range> y = range(op.getOperand(1));
  if (!y)
    return;
  if (isa<arith::AddIOp>(op))
    ranges[result] = {make<arith::AddIOp>(x->lo, y->lo),
                      make<arith::AddIOp>(x->hi, y->hi)};
  else if (isa<arith::SubIOp>(op))
    ranges[result] = {make<arith::SubIOp>(x->lo, y->hi),
                      make<arith::SubIOp>(x->hi, y->lo)};
  else if (isa<arith::MinSIOp>(op))
    ranges[result] = {make<arith::MinSIOp>(x->lo, y->lo),
                      make<arith::MinSIOp>(x->hi, y->hi)};
  else if (isa<arith::MaxSIOp>(op))
    ranges[result] = {make<arith::MaxSIOp>(x->lo, y->lo),
                      make<arith::MaxSIOp>(x->hi, y->hi)};
}

std::optional<Truth> IntervalEvaluator::evaluate(Region &maskMod, Range batch,
                                                 Range head, Range query,
                                                 Range key) {
  Block &body = maskMod.front();
  Range leading[] = {batch, head, query, key};
  for (auto [arg, r] : llvm::zip(body.getArguments().take_front(4), leading))
    ranges[arg] = r;
  for (Operation &op : body.without_terminator())
    visit(op);
  Value yielded = cast<YieldOp>(body.getTerminator()).getValues().front();
  auto it = truths.find(yielded);
  if (it == truths.end())
    return std::nullopt;
  return it->second;
}

/// Whether `v` is available at `point` in `body`: a block argument, or
/// defined outside the body or by an op before `point`.
bool availableAt(Value v, Block *body, Operation *point) {
  Operation *def = v.getDefiningOp();
  if (!def)
    return true;
  Operation *inBody = body->findAncestorOpInBlock(*def);
  return !inBody || inBody->isBeforeInBlock(point);
}

/// `tile` as scf.if (partial) { tile } else { tile without its mask_mod },
/// `partial` being whether the mask can be false on the block.
void computeFullBlocksUnmasked(ScoreTileOp tile, Value partial) {
  OpBuilder b(tile);
  Location loc = tile.getLoc();
  auto choice = scf::IfOp::create(b, loc, partial, /*withElseRegion=*/true);
  b.setInsertionPoint(choice.elseBlock()->getTerminator());
  auto whole = cast<ScoreTileOp>(b.clone(*tile));
  whole.getMaskMod().getBlocks().clear();
  if (whole.getScoreMod().empty()) {
    // Without regions the tile takes no coordinates or captures.
    whole.getCoordinatesMutable().clear();
    whole.getCapturesMutable().clear();
  }
  tile->moveBefore(choice.thenBlock()->getTerminator());
}

/// Wraps the block loop body around `tile` (from its first op with memory
/// effects) in the tile's block test. Returns whether it did.
bool skipMaskedBlocks(ScoreTileOp tile) {
  auto loop = dyn_cast<scf::ForOp>(tile->getParentOp());
  if (!loop || tile.getMaskMod().empty() || !loop.getInitArgs().empty())
    return false;
  Block *body = loop.getBody();
  Operation *first = nullptr;
  for (Operation &op : body->without_terminator())
    if (!isMemoryEffectFree(&op)) {
      first = &op;
      break;
    }
  ValueRange coordinates = tile.getCoordinates();
  Value needed[] = {coordinates[0], coordinates[1], coordinates[2],
                    coordinates[3], tile.getQuery(), tile.getKey()};
  if (!first || llvm::any_of(needed, [&](Value v) {
        return !availableAt(v, body, first);
      }))
    return false;
  // The test is built aside and kept only if it bounds the mask.
  auto scratch = std::make_unique<Block>();
  auto discard = [&] {
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(*scratch)))
      op.erase();
    return false;
  };
  OpBuilder b(tile.getContext());
  b.setInsertionPointToStart(scratch.get());
  Location loc = tile.getLoc();
  // The block's positions: queries [q0, q0 + rows), keys [k0, k0 + cols).
  auto last = [&](Value start, Value tileRows) {
    Value one = arith::ConstantIndexOp::create(b, loc, 1);
    return b.createOrFold<arith::SubIOp>(
        loc, b.createOrFold<arith::AddIOp>(loc, start, tileRows), one);
  };
  Value rows = b.createOrFold<memref::DimOp>(loc, tile.getQuery(), 0);
  Value cols = b.createOrFold<memref::DimOp>(loc, tile.getKey(), 0);
  IntervalEvaluator evaluator(b, loc);
  std::optional<Truth> mask =
      evaluator.evaluate(tile.getMaskMod(), {coordinates[0], coordinates[0]},
                         {coordinates[1], coordinates[1]},
                         {coordinates[2], last(coordinates[2], rows)},
                         {coordinates[3], last(coordinates[3], cols)});
  if (!mask || matchPattern(mask->canTrue, m_One()))
    return discard();
  Value visible = mask->canTrue;
  body->getOperations().splice(first->getIterator(),
                               scratch->getOperations());
  b.setInsertionPoint(first);
  auto ifVisible =
      scf::IfOp::create(b, loc, visible, /*withElseRegion=*/false);
  Block *then = ifVisible.thenBlock();
  // Move [first, terminator) into the test (the loop yields nothing, so
  // no value leaves the moved ops).
  then->getOperations().splice(then->begin(), body->getOperations(),
                               first->getIterator(),
                               body->getTerminator()->getIterator());
  // A block the mask keeps whole (it cannot be false there) needs no
  // mask_mod per score: the tile without it, chosen at run time.
  if (!matchPattern(mask->canFalse, m_One()))
    computeFullBlocksUnmasked(tile, mask->canFalse);
  return true;
}

struct FASkipMaskedBlocksPass
    : fa::impl::FASkipMaskedBlocksBase<FASkipMaskedBlocksPass> {
  void runOnOperation() override {
    SmallVector<ScoreTileOp> tiles;
    getOperation().walk([&](ScoreTileOp tile) { tiles.push_back(tile); });
    for (ScoreTileOp tile : tiles)
      skipMaskedBlocks(tile);
  }
};

} // namespace
