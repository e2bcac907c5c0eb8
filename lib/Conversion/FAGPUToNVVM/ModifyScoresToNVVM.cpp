//===- ModifyScoresToNVVM.cpp - score_mod and mask_mod to NVVM ------------===//
//
// fagpu.modify_scores: the attention's score_mod and mask_mod inlined on
// each score of a thread's accumulator fragment.
// One pattern per op; WarpgroupToNVVM.cpp says how values change form.
//
//===----------------------------------------------------------------------===//

#include "WarpgroupLowering.h"

#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"

#include <cmath>
#include <limits>
#include <map>
#include <vector>

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::warpgroup;

namespace {

/// Element `indices` of a capture (a contiguous array of `type` at global
/// pointer `base`). Each index is clamped to its dim for the load, so that
/// the load never leaves the array, and whether it was below it joins
/// `inBounds`, which the caller asserts once (a trap otherwise, as the
/// kernel's other device checks): one branch per op rather than per read,
/// which left ptxas room to schedule the loads without spilling.
Value loadCapture(OpBuilder &b, Location loc, Value base, RankedTensorType type,
                  ValueRange indices, Value &inBounds) {
  // The indices are i32 (the regions' index arithmetic, narrowed); the
  // offset is i64 (checkCaptureType bounds each dim by 2^31).
  Type i64 = b.getI64Type();
  Value linear = arith::ConstantIntOp::create(b, loc, 0, 64);
  for (auto [d, i] : llvm::enumerate(indices)) {
    int64_t size = type.getDimSize(d);
    Value below =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, i,
                              arith::ConstantIntOp::create(b, loc, size, 32));
    inBounds =
        inBounds ? arith::AndIOp::create(b, loc, inBounds, below) : below;
    Value clamped = arith::MinUIOp::create(
        b, loc, i, arith::ConstantIntOp::create(b, loc, size - 1, 32));
    linear = arith::AddIOp::create(
        b, loc,
        arith::MulIOp::create(b, loc, linear,
                              arith::ConstantIntOp::create(b, loc, size, 64)),
        arith::ExtUIOp::create(b, loc, i64, clamped));
  }
  Type element = type.getElementType();
  Value address = LLVM::GEPOp::create(b, loc, base.getType(), element, base,
                                      ValueRange{linear});
  return LLVM::LoadOp::create(b, loc, element, address,
                              element.getIntOrFloatBitWidth() / 8);
}

/// The capture elements one fagpu.modify_scores has read, by pointer and
/// index values: a region that reads at the row or key (a document id) reads
/// each once for all the thread's scores, and checks it once.
struct CaptureReads {
  std::map<std::vector<void *>, Value> values;
  /// Whether every read's indices were inside its capture.
  Value inBounds;
};

/// Copies `region`'s block at the builder's insertion point with its
/// leading arguments bound to `args` and its trailing tensor arguments (the
/// captures) read through the global pointers `captures`, returning the
/// yielded value. The math ops become the SFU's approximations, as the
/// kernel's own exponentials and softcap are (ex2.approx, lg2.approx,
/// tanh.approx); a capture's reads become clamped loads (loadCapture) and
/// its dims constants; index arithmetic is narrowed to i32; the rest is
/// copied (arith, math.absf, math.sqrt and math.fma have LLVM lowerings
/// downstream).
Value inlineRegion(OpEmitter &e, OpBuilder &b, Region &region, ValueRange args,
                   ValueRange captures, CaptureReads &reads) {
  Block &block = region.front();
  IRMapping mapping;
  mapping.map(block.getArguments().take_front(args.size()), args);
  DenseMap<Value, Value> pointerOf;
  for (auto [arg, pointer] :
       llvm::zip(block.getArguments().drop_front(args.size()), captures))
    pointerOf[arg] = pointer;
  Location loc = region.getParentOp()->getLoc();
  // The regions' index arithmetic runs in i32, as FlexAttention's index
  // tensors (int32) do: 64-bit integer operations and conversions cost
  // the softmax several instructions per score.
  Type i32 = b.getI32Type();
  auto narrowed = [&](Type type) { return type.isIndex() ? i32 : type; };
  for (Operation &op : block.without_terminator()) {
    auto operand = [&](unsigned i) { return mapping.lookup(op.getOperand(i)); };
    Value lowered;
    if (auto extract = dyn_cast<tensor::ExtractOp>(op)) {
      SmallVector<Value> indices;
      Value pointer = pointerOf.lookup(extract.getTensor());
      std::vector<void *> key = {pointer.getAsOpaquePointer()};
      for (Value i : extract.getIndices()) {
        indices.push_back(mapping.lookup(i));
        key.push_back(indices.back().getAsOpaquePointer());
      }
      Value &read = reads.values[key];
      if (!read)
        read = loadCapture(b, loc, pointer, extract.getTensor().getType(),
                           indices, reads.inBounds);
      lowered = read;
    } else if (auto dim = dyn_cast<tensor::DimOp>(op)) {
      auto type = cast<RankedTensorType>(dim.getSource().getType());
      lowered = arith::ConstantIntOp::create(
          b, loc, type.getDimSize(*dim.getConstantIndex()), 32);
    } else if (auto constant = dyn_cast<arith::ConstantOp>(op);
               constant && constant.getType().isIndex()) {
      lowered = arith::ConstantIntOp::create(
          b, loc, cast<IntegerAttr>(constant.getValue()).getInt(), 32);
    } else if (isa<arith::IndexCastOp, arith::IndexCastUIOp>(op)) {
      // index is i32 here: a cast to or from it is an extension, a
      // truncation or nothing.
      Value in = operand(0);
      Type to = narrowed(op.getResult(0).getType());
      unsigned from = in.getType().getIntOrFloatBitWidth();
      unsigned width = to.getIntOrFloatBitWidth();
      if (from == width)
        lowered = in;
      else if (from > width)
        lowered = arith::TruncIOp::create(b, loc, to, in);
      else if (isa<arith::IndexCastOp>(op))
        lowered = arith::ExtSIOp::create(b, loc, to, in);
      else
        lowered = arith::ExtUIOp::create(b, loc, to, in);
    } else if (isa<math::TanhOp>(op)) {
      lowered = e.tanhApprox(operand(0));
    } else if (isa<math::Exp2Op>(op)) {
      lowered = e.ex2(operand(0));
    } else if (isa<math::ExpOp>(op)) {
      lowered = e.ex2(e.fmul(operand(0), e.cf(M_LOG2E)));
    } else if (isa<math::Log2Op>(op)) {
      lowered = e.lg2(operand(0));
    } else if (isa<math::LogOp>(op)) {
      lowered = e.fmul(e.lg2(operand(0)), e.cf(M_LN2));
    }
    if (lowered) {
      mapping.map(op.getResult(0), lowered);
      continue;
    }
    Operation *copy = b.clone(op, mapping);
    for (OpResult result : copy->getResults())
      result.setType(narrowed(result.getType()));
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
    // With a softcap or score_mod the scores leave in natural units, which
    // the regions see; without, as they came (the step's scale does the
    // rest in both: ModifyScoresOp::stepScale).
    bool natural = op.returnsNaturalUnits();
    Value scale = natural ? e.fmul(scaleLog2, e.cf(M_LN2)) : Value();
    Value negInf = e.cf(-std::numeric_limits<double>::infinity());

    // Regions that read captures see the sequence's last row or key in
    // place of positions past it (whose scores are masked or never
    // stored), so that they read where the host path reads.
    SmallVector<Value> captures;
    for (ValueRange pointer : adaptor.getCaptures())
      captures.push_back(pointer.front());
    Value lastRow, lastKey;
    if (!captures.empty()) {
      lastRow = e.sub(adaptor.getNq().front(), e.c32(1));
      lastKey = e.sub(adaptor.getNk().front(), e.c32(1));
    }
    auto clamp = [&](Value v, Value last) {
      return last ? e.minu(v, last) : v;
    };

    // The regions' indices (i32: inlineRegion narrows index to it). The
    // accumulator layout: row tile r's register 4 n + k is row row0 + 16 r +
    // 8 (k / 2) and key key_start + 8 n + k % 2 + 2 quadLane (as the step's
    // mask reads it). A lanes fragment: register c is row row0, key
    // key_start + c.
    Value batch = adaptor.getBatch().front();
    Value head = adaptor.getHead().front();
    Value row0 = adaptor.getRow0().front();
    Value keyStart = adaptor.getKeyStart().front();
    SmallVector<Value> rowOf(s.size()), keyOf(s.size());
    if (op.getS().getType().getLayout() == fagpu::FragmentLayout::Lanes) {
      Value row = clamp(row0, lastRow);
      for (int64_t c = 0, end = s.size(); c < end; ++c) {
        rowOf[c] = row;
        keyOf[c] = clamp(c ? e.add(keyStart, e.c32(c)) : keyStart, lastKey);
      }
    } else {
      Value keyBase = e.add(keyStart, e.mul(e.position().quadLane, e.c32(2)));
      int64_t rowTiles = op.getS().getType().getRowTiles();
      int64_t perTile = s.size() / rowTiles;
      SmallVector<Value> rows, keys;
      for (int64_t r = 0; r < 2 * rowTiles; ++r)
        rows.push_back(clamp(r ? e.add(row0, e.c32(8 * r)) : row0, lastRow));
      for (int64_t n = 0; n < perTile / 4; ++n)
        for (int64_t k = 0; k < 2; ++k) {
          int64_t offset = 8 * n + k;
          keys.push_back(
              clamp(offset ? e.add(keyBase, e.c32(offset)) : keyBase, lastKey));
        }
      for (int64_t i = 0, end = s.size(); i < end; ++i) {
        int64_t tile = i / perTile, inTile = i % perTile;
        rowOf[i] = rows[2 * tile + (inTile % 4) / 2];
        keyOf[i] = keys[2 * (inTile / 4) + inTile % 2];
      }
    }

    CaptureReads reads;
    for (int64_t i = 0, end = s.size(); i < end; ++i) {
      Value row = rowOf[i], key = keyOf[i];
      Value x = natural ? e.fmul(s[i], scale) : s[i];
      if (softcap) {
        double cap = softcap->convertToDouble();
        x = e.fmul(e.tanhApprox(e.fmul(x, e.cf(1.0 / cap))), e.cf(cap));
      }
      if (!scoreMod.empty())
        x = inlineRegion(e, rewriter, scoreMod, {x, batch, head, row, key},
                         captures, reads);
      if (!maskMod.empty())
        x = e.select(inlineRegion(e, rewriter, maskMod, {batch, head, row, key},
                                  captures, reads),
                     x, negInf);
      s[i] = x;
    }
    if (reads.inBounds)
      cf::AssertOp::create(rewriter, loc, reads.inBounds,
                           "a score_mod or mask_mod read past a capture");
    rewriter.replaceOpWithMultiple(op, {s});
    return success();
  }
};

} // namespace

void mlir::fa::warpgroup::populateModificationPatterns(
    const TypeConverter &converter, RewritePatternSet &patterns) {
  patterns.add<ModifyScoresLowering>(converter, patterns.getContext());
}
