//===- Modifications.cpp - score_mod / mask_mod bodies inlined ------------===//

#include "Modifications.h"

#include "fa/Dialect/FA/IR/FAOps.h"
#include "fa/Dialect/FA/IR/ScoreModDerivative.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace mlir::fa;

/// Clones `region`'s body at `b` for `leading` and the capture memrefs;
/// with `tangents`, the score's tangent (its first block argument's) is 1
/// and each cloned op's tangent is recorded there, keyed by the original
/// value. Returns the yielded value's clone.
static Value inlineBody(OpBuilder &b, Region &region, ValueRange leading,
                        ValueRange captures, DenseMap<Value, Value> *tangents) {
  Block &block = region.front();
  IRMapping map;
  map.map(block.getArguments().take_front(leading.size()), leading);
  DenseMap<Value, Value> memrefOf;
  for (auto [arg, memref] :
       llvm::zip(block.getArguments().drop_front(leading.size()), captures))
    memrefOf[arg] = memref;
  if (tangents)
    (*tangents)[block.getArgument(0)] = arith::ConstantOp::create(
        b, region.getLoc(), b.getFloatAttr(leading[0].getType(), 1.0));
  for (Operation &op : block.without_terminator()) {
    if (auto extract = dyn_cast<tensor::ExtractOp>(op)) {
      if (Value memref = memrefOf.lookup(extract.getTensor())) {
        SmallVector<Value> indices;
        for (Value index : extract.getIndices())
          indices.push_back(map.lookup(index));
        // A read past the capture's bounds stops the program with a message
        // rather than reading other memory (an unsigned compare: a negative
        // index is a huge one).
        Location loc = op.getLoc();
        Value inBounds = arith::ConstantIntOp::create(b, loc, 1, 1);
        for (auto [d, index] : llvm::enumerate(indices))
          inBounds = b.createOrFold<arith::AndIOp>(
              loc, inBounds,
              arith::CmpIOp::create(
                  b, loc, arith::CmpIPredicate::ult, index,
                  b.createOrFold<memref::DimOp>(loc, memref, d)));
        if (!matchPattern(inBounds, m_One()))
          cf::AssertOp::create(
              b, loc, inBounds,
              "fa: a score_mod or mask_mod reads a captured tensor out of its "
              "bounds");
        map.map(extract.getResult(),
                memref::LoadOp::create(b, op.getLoc(), memref, indices)
                    .getResult());
        continue;
      }
    }
    if (auto dim = dyn_cast<tensor::DimOp>(op)) {
      if (Value memref = memrefOf.lookup(dim.getSource())) {
        map.map(dim.getResult(),
                memref::DimOp::create(b, op.getLoc(), memref,
                                      map.lookup(dim.getIndex()))
                    .getResult());
        continue;
      }
    }
    Operation *clone = b.clone(op, map);
    if (!tangents)
      continue;
    SmallVector<Value> operandTangents;
    for (Value operand : op.getOperands())
      operandTangents.push_back(tangents->lookup(operand));
    if (Value tangent = buildTangent(b, clone, operandTangents))
      (*tangents)[op.getResult(0)] = tangent;
  }
  return map.lookup(cast<YieldOp>(block.getTerminator()).getValues()[0]);
}

Value mlir::fa::loops::inlineModification(OpBuilder &b, Region &region,
                                          ValueRange leading,
                                          ValueRange captures) {
  return inlineBody(b, region, leading, captures, /*tangents=*/nullptr);
}

Value mlir::fa::loops::inlineScoreModSlope(OpBuilder &b, Region &scoreMod,
                                           ValueRange leading,
                                           ValueRange captures) {
  DenseMap<Value, Value> tangents;
  inlineBody(b, scoreMod, leading, captures, &tangents);
  Value yielded =
      cast<YieldOp>(scoreMod.front().getTerminator()).getValues()[0];
  if (Value slope = tangents.lookup(yielded))
    return slope;
  return arith::ConstantOp::create(b, scoreMod.getLoc(),
                                   b.getFloatAttr(yielded.getType(), 0.0));
}
