//===- LowerBackward.cpp - the FlashAttention-2 backward loop order -------===//
//
// fa.attention_backward as FlashAttention-2's backward (FlashAttention-3
// keeps its order): the forward saved O and L = LSE, never P; per K/V block
// the backward recomputes P from L for every query block and accumulates
//
//   preprocess:  D_i = rowsum(dO_i o O_i)                  (all i, first)
//   forall (b, h_kv):
//     for j (K/V block):   load K_j, V_j; dK_j = dV_j = 0 (f32)
//       for g (query head of h_kv), i (query block):
//         S = scale Q_i K_j^T (masked, capped)   P = exp(S - L_i)
//         dV_j += P^T dO_i                      dP = dO_i V_j^T
//         dS = P o (dP - D_i) o cap'            dK_j += scale dS^T Q_i
//         dQ_i += scale dS K_j                  (f32, across j)
//       write dK_j, dV_j
//   dQ = dQ (f32) in dQ's type
//   with sinks: dsinks[h] = sum over (b, i) of fa.grad_sink (after D)
//
// With score_mod and mask_mod (and their captures), every score tile takes
// them as the forward's do; with score_mod it also keeps the score before
// the modification, X, for the chain rule dS o= score_mod'(X)
// (fa.chain_score_mod) and the softcap's derivative.
//
// dK_j and dV_j are owned by their (b, h_kv, j) and written once; dQ_i
// receives a term from every K/V block, so it accumulates in an f32 buffer
// (the GPU kernel's atomics or reduce-adds); the (b, h_kv) iterations touch
// disjoint query heads, so they run in parallel and j runs in order. Blocks
// that a mask hides entirely contribute P = 0 (masked scores are -inf).
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/Transforms/Passes.h"

#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/AffineExpr.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::fa {
#define GEN_PASS_DEF_FALOWERFA2BACKWARD
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

class BackwardLowering {
public:
  BackwardLowering(OpBuilder &b, AttentionBackwardOp op, int64_t blockR,
                   int64_t blockC)
      : b(b), loc(op.getLoc()), op(op), blockR(blockR), blockC(blockC) {}

  void build();

private:
  /// dsinks[h] = the sum of fa.grad_sink over the sequences and the query
  /// blocks of head h (heads in parallel, each sum in order).
  void buildSinkGradients(Value rowDots, Value sequences, Value qHeads);

  /// Where sequence `bi` lies: its batch row, the first of its query and
  /// key rows there, and its query and key counts (a varlen batch's from
  /// the prefix sums; else batch row bi, from row 0, all of N).
  struct Sequence {
    Value batchRow, qBase, kBase, queries, keys;
  };
  Sequence sequence(Value bi) {
    Value nq = dim(op.getQuery(), 2), nk = dim(op.getKey(), 2);
    if (!op.getCuSeqlensQ())
      return {bi, index(0), index(0), nq, nk};
    Value next = add(bi, index(1));
    auto at = [&](Value sums, Value i) -> Value {
      return arith::IndexCastUIOp::create(
          b, loc, b.getIndexType(),
          memref::LoadOp::create(b, loc, sums, ValueRange{i}));
    };
    Value qBase = at(op.getCuSeqlensQ(), bi),
          kBase = at(op.getCuSeqlensK(), bi);
    return {index(0), qBase, kBase,
            arith::SubIOp::create(b, loc, at(op.getCuSeqlensQ(), next), qBase),
            arith::SubIOp::create(b, loc, at(op.getCuSeqlensK(), next), kBase)};
  }
  /// The sequences: B, or a varlen batch's B (its prefix sums less one).
  Value sequenceCount() {
    if (!op.getCuSeqlensQ())
      return dim(op.getQuery(), 0);
    return b.createOrFold<arith::SubIOp>(loc, dim(op.getCuSeqlensQ(), 0),
                                         index(1));
  }

  Value index(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value dim(Value v, int64_t d) {
    return b.createOrFold<memref::DimOp>(loc, v, d);
  }
  Value mul(Value x, Value y) { return b.createOrFold<arith::MulIOp>(loc, x, y); }
  Value add(Value x, Value y) { return b.createOrFold<arith::AddIOp>(loc, x, y); }
  Value ceilDiv(Value a, int64_t c) {
    return b.createOrFold<arith::CeilDivUIOp>(loc, a, index(c));
  }
  /// min(tile, total - start): a block's rows, fewer for the last one.
  Value blockLength(Value start, int64_t tile, Value total) {
    MLIRContext *ctx = b.getContext();
    AffineExpr d0 = getAffineDimExpr(0, ctx), s0 = getAffineSymbolExpr(0, ctx);
    AffineMap map =
        AffineMap::get(1, 1, {getAffineConstantExpr(tile, ctx), s0 - d0}, ctx);
    return affine::AffineMinOp::create(b, loc, map, ValueRange{start, total});
  }
  /// buf[bi, h, row0 : row0 + rows(, :)] as a rank-reduced view.
  Value rows(Value buf, Value bi, Value h, Value row0, Value count) {
    auto type = cast<MemRefType>(buf.getType());
    SmallVector<OpFoldResult> offsets = {bi, h, row0};
    SmallVector<OpFoldResult> sizes = {b.getIndexAttr(1), b.getIndexAttr(1),
                                       count};
    SmallVector<int64_t> shape = {
        getConstantIntValue(count).value_or(ShapedType::kDynamic)};
    if (type.getRank() == 4) {
      offsets.push_back(b.getIndexAttr(0));
      sizes.push_back(b.getIndexAttr(type.getDimSize(3)));
      shape.push_back(type.getDimSize(3));
    }
    SmallVector<OpFoldResult> strides(type.getRank(), b.getIndexAttr(1));
    MemRefType view = memref::SubViewOp::inferRankReducedResultType(
        shape, type, offsets, sizes, strides);
    return memref::SubViewOp::create(b, loc, view, buf, offsets, sizes,
                                     strides);
  }
  /// The first `count` rows of an on-chip tile.
  Value prefix(Value tile, Value count) {
    auto type = cast<MemRefType>(tile.getType());
    SmallVector<OpFoldResult> offsets(type.getRank(), b.getIndexAttr(0));
    SmallVector<OpFoldResult> strides(type.getRank(), b.getIndexAttr(1));
    SmallVector<OpFoldResult> sizes = {count};
    for (int64_t d = 1; d < type.getRank(); ++d)
      sizes.push_back(b.getIndexAttr(type.getDimSize(d)));
    return memref::SubViewOp::create(b, loc, tile, offsets, sizes, strides);
  }
  Value tile(ArrayRef<int64_t> shape, Type type) {
    return memref::AllocOp::create(b, loc, MemRefType::get(shape, type));
  }
  void zero(Value buf) {
    Value c = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
    linalg::FillOp::create(b, loc, ValueRange{c}, ValueRange{buf});
  }
  /// `to` = `from` converted to its element type (f32 accumulators to the
  /// gradients' types; each element rounded once).
  void copyConverted(Value from, Value to);
  scf::ForallOp parallel(SmallVector<OpFoldResult> ubs) {
    for (OpFoldResult &ub : ubs)
      if (std::optional<int64_t> c = getConstantIntValue(ub))
        ub = b.getIndexAttr(*c);
    return scf::ForallOp::create(b, loc, ubs, ValueRange{}, std::nullopt);
  }
  scf::ForOp sequential(Value ub) {
    return scf::ForOp::create(b, loc, index(0), ub, index(1));
  }

  OpBuilder &b;
  Location loc;
  AttentionBackwardOp op;
  int64_t blockR, blockC;
};

void BackwardLowering::copyConverted(Value from, Value to) {
  auto fromType = cast<MemRefType>(from.getType());
  Type target = cast<MemRefType>(to.getType()).getElementType();
  MLIRContext *ctx = b.getContext();
  AffineMap id = AffineMap::getMultiDimIdentityMap(fromType.getRank(), ctx);
  SmallVector<utils::IteratorType> iterators(fromType.getRank(),
                                             utils::IteratorType::parallel);
  linalg::GenericOp::create(
      b, loc, ValueRange{from}, ValueRange{to},
      ArrayRef<AffineMap>{id, id}, iterators,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        Value v = args[0];
        unsigned have = v.getType().getIntOrFloatBitWidth();
        unsigned want = target.getIntOrFloatBitWidth();
        if (v.getType() != target)
          v = want < have ? arith::TruncFOp::create(nb, nloc, target, v)
                                .getResult()
                          : arith::ExtFOp::create(nb, nloc, target, v)
                                .getResult();
        linalg::YieldOp::create(nb, nloc, v);
      });
}

void BackwardLowering::build() {
  Type f32 = b.getF32Type();
  MemRefType qType = op.getQueryType();
  int64_t d = qType.getDimSize(3), dv = op.getValueType().getDimSize(3);
  Value batch = dim(op.getQuery(), 0), qHeads = dim(op.getQuery(), 1);
  // Q's rows (every packed row of a varlen batch): D and dQ cover them all.
  Value nq = dim(op.getQuery(), 2), kvHeads = dim(op.getKey(), 1);
  Value group = b.createOrFold<arith::DivUIOp>(loc, qHeads, kvHeads);
  Value qBlocks = ceilDiv(nq, blockR);
  float scale = op.getEffectiveScale();

  // D = rowsum(dO o O), [B, Hq, Nq] in f32.
  Value rowDots = memref::AllocOp::create(
      b, loc, MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic,
                               ShapedType::kDynamic},
                              f32),
      ValueRange{batch, qHeads, nq});
  {
    scf::ForallOp loop = parallel({batch, qHeads, qBlocks});
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(loop.getBody()->getTerminator());
    SmallVector<Value> ivs = loop.getInductionVars();
    Value q0 = mul(ivs[2], index(blockR));
    Value count = blockLength(q0, blockR, nq);
    RowDotOp::create(b, loc, rows(op.getGradOut(), ivs[0], ivs[1], q0, count),
                     rows(op.getOut(), ivs[0], ivs[1], q0, count),
                     rows(rowDots, ivs[0], ivs[1], q0, count));
  }
  if (op.getSinks())
    buildSinkGradients(rowDots, sequenceCount(), qHeads);
  // A varlen batch's rows outside every sequence: zero gradients (the loops
  // below write those of the sequences only; dQ's accumulator is zeroed).
  if (op.getCuSeqlensQ())
    for (Value grad : {op.getGradKey(), op.getGradValue()}) {
      Type elt = cast<MemRefType>(grad.getType()).getElementType();
      Value zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(elt));
      linalg::FillOp::create(b, loc, ValueRange{zero}, ValueRange{grad});
    }
  // dQ accumulates over the K/V blocks in f32: in the gradient itself when
  // it is f32 (and contiguous), else in a buffer converted at the end.
  Value gradQuery = op.getGradQuery();
  auto gradQueryType = cast<MemRefType>(gradQuery.getType());
  bool inPlace = gradQueryType.getElementType().isF32();
  Value dqAcc = gradQuery;
  if (!inPlace)
    dqAcc = memref::AllocOp::create(
        b, loc,
        MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic,
                         ShapedType::kDynamic, d},
                        f32),
        ValueRange{batch, qHeads, nq});
  zero(dqAcc);

  scf::ForallOp heads = parallel({sequenceCount(), kvHeads});
  // fa-map-to-gpu finds the nest it maps onto the backward kernel by this.
  heads->setAttr("fa.loop_order", b.getStringAttr("fa2-backward"));
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(heads.getBody()->getTerminator());
    Value hkv = heads.getInductionVars()[1];
    // Sequence bi's rows: its own counts and masks, its packed rows.
    Sequence seq = sequence(heads.getInductionVars()[0]);
    Value bi = seq.batchRow, nq = seq.queries, nk = seq.keys;
    Value qBlocks = ceilDiv(nq, blockR), kvBlocks = ceilDiv(nk, blockC);
    auto qRowsOf = [&](Value buf, Value h, Value q0, Value count) {
      return rows(buf, bi, h, add(seq.qBase, q0), count);
    };
    // On-chip tiles of one K/V block and one block pair.
    Value kTile = tile({blockC, d}, qType.getElementType());
    Value vTile = tile({blockC, dv}, qType.getElementType());
    Value dkAcc = tile({blockC, d}, f32), dvAcc = tile({blockC, dv}, f32);
    Value scores = tile({blockR, blockC}, f32);
    Value grads = tile({blockR, blockC}, f32);
    // The scores before score_mod (after the cap): the chain rule's and
    // the softcap derivative's argument. Without score_mod, a copy of the
    // scores before fa.recompute_probs turns them into P.
    bool scoreMod = !op.getScoreMod().empty();
    Value capped =
        op.getSoftcap() || scoreMod ? tile({blockR, blockC}, f32) : Value();

    scf::ForOp blocks = sequential(kvBlocks);
    {
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPoint(blocks.getBody()->getTerminator());
      Value k0 = mul(blocks.getInductionVar(), index(blockC));
      Value cols = blockLength(k0, blockC, nk);
      Value kBlock = prefix(kTile, cols), vBlock = prefix(vTile, cols);
      Value kRow = add(seq.kBase, k0);
      linalg::CopyOp::create(b, loc, rows(op.getKey(), bi, hkv, kRow, cols),
                             kBlock);
      linalg::CopyOp::create(b, loc, rows(op.getValue(), bi, hkv, kRow, cols),
                             vBlock);
      zero(dkAcc);
      zero(dvAcc);
      scf::ForOp members = sequential(group);
      {
        OpBuilder::InsertionGuard inner2(b);
        b.setInsertionPoint(members.getBody()->getTerminator());
        Value h = add(mul(hkv, group), members.getInductionVar());
        scf::ForOp queries = sequential(qBlocks);
        OpBuilder::InsertionGuard inner3(b);
        b.setInsertionPoint(queries.getBody()->getTerminator());
        Value q0 = mul(queries.getInductionVar(), index(blockR));
        Value count = blockLength(q0, blockR, nq);
        Value qRows = qRowsOf(op.getQuery(), h, q0, count);
        Value dORows = qRowsOf(op.getGradOut(), h, q0, count);
        // The masks' positions as the forward's score tile takes them:
        // bottom-right shifts rows by Nk and columns by Nq, an offset
        // moves the rows.
        Value row0 = q0, col0 = k0;
        if (op.getBottomRight()) {
          row0 = add(row0, nk);
          col0 = add(col0, nq);
        }
        if (std::optional<int64_t> offset = op.getDiagonalOffset())
          row0 = add(row0, index(*offset));
        // The modifications see the sequence, the query head and the
        // unshifted positions in the sequence.
        SmallVector<Value> coordinates;
        if (op.hasModifications())
          coordinates = {heads.getInductionVars()[0], h, q0, k0};
        auto scoreTile = ScoreTileOp::create(
            b, loc, qRows, kBlock, scores, scoreMod ? capped : Value(), row0,
            col0, /*descale=*/Value(), coordinates, op.getCaptures(),
            b.getF32FloatAttr(scale),
            op.getCausal() ? b.getUnitAttr() : UnitAttr(), op.getWindowAttr(),
            op.getSoftcapAttr(), op.getBottomRightAttr(),
            op.getDiagonalOffsetAttr());
        // The regions read only their arguments: cloned as they are.
        IRMapping none;
        op.getScoreMod().cloneInto(&scoreTile.getScoreMod(), none);
        op.getMaskMod().cloneInto(&scoreTile.getMaskMod(), none);
        if (capped && !scoreMod)
          memref::CopyOp::create(b, loc, scores, capped);
        RecomputeProbsOp::create(b, loc, scores,
                                 qRowsOf(op.getLse(), h, q0, count));
        GradValuesOp::create(b, loc, scores, dORows, dvAcc);
        GradProbsOp::create(b, loc, dORows, vBlock, grads);
        GradScoresOp::create(b, loc, scores, qRowsOf(rowDots, h, q0, count),
                             op.getSoftcap() ? capped : Value(), grads,
                             op.getSoftcapAttr());
        if (scoreMod) {
          auto chain = ChainScoreModOp::create(b, loc, capped, grads,
                                               coordinates, op.getCaptures());
          IRMapping fresh; // `none` maps the body's arguments by now
          op.getScoreMod().cloneInto(&chain.getScoreMod(), fresh);
        }
        GradKeysOp::create(b, loc, grads, qRows, dkAcc,
                           b.getF32FloatAttr(scale));
        GradQueriesOp::create(b, loc, grads, kBlock,
                              qRowsOf(dqAcc, h, q0, count),
                              b.getF32FloatAttr(scale));
      }
      copyConverted(prefix(dkAcc, cols),
                    rows(op.getGradKey(), bi, hkv, kRow, cols));
      copyConverted(prefix(dvAcc, cols),
                    rows(op.getGradValue(), bi, hkv, kRow, cols));
    }
    for (Value t : {kTile, vTile, dkAcc, dvAcc, scores, grads, capped})
      if (t)
        memref::DeallocOp::create(b, loc, t);
  }
  if (!inPlace) {
    copyConverted(dqAcc, gradQuery);
    memref::DeallocOp::create(b, loc, dqAcc);
  }
  memref::DeallocOp::create(b, loc, rowDots);
}

void BackwardLowering::buildSinkGradients(Value rowDots, Value sequences,
                                          Value qHeads) {
  scf::ForallOp heads = parallel({qHeads});
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(heads.getBody()->getTerminator());
  Value h = heads.getInductionVars()[0];
  Value sink = memref::LoadOp::create(b, loc, op.getSinks(), ValueRange{h});
  Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
  auto overSequences = scf::ForOp::create(
      b, loc, index(0), sequences, index(1), ValueRange{zero},
      [&](OpBuilder &, Location, Value bi, ValueRange sum) {
        Sequence seq = sequence(bi);
        auto overBlocks = scf::ForOp::create(
            b, loc, index(0), ceilDiv(seq.queries, blockR), index(1), sum,
            [&](OpBuilder &, Location, Value i, ValueRange inner) {
              Value q0 = mul(i, index(blockR));
              Value count = blockLength(q0, blockR, seq.queries);
              Value row = add(seq.qBase, q0);
              Value part = GradSinkOp::create(
                  b, loc, b.getF32Type(), sink,
                  rows(op.getLse(), seq.batchRow, h, row, count),
                  rows(rowDots, seq.batchRow, h, row, count));
              scf::YieldOp::create(
                  b, loc,
                  ValueRange{arith::AddFOp::create(b, loc, inner[0], part)});
            });
        scf::YieldOp::create(b, loc, overBlocks.getResults());
      });
  memref::StoreOp::create(b, loc, overSequences.getResult(0), op.getGradSinks(),
                          ValueRange{h});
}

struct FALowerFA2BackwardPass
    : fa::impl::FALowerFA2BackwardBase<FALowerFA2BackwardPass> {
  using FALowerFA2BackwardBase::FALowerFA2BackwardBase;

  void runOnOperation() override {
    SmallVector<AttentionBackwardOp> ops;
    getOperation().walk([&](AttentionBackwardOp op) { ops.push_back(op); });
    for (AttentionBackwardOp op : ops) {
      int64_t br = op.getBlockR().value_or(blockR);
      int64_t bc = op.getBlockC().value_or(blockC);
      if (br < 1 || bc < 1 || br > 1024 || bc > 1024) {
        op.emitOpError("fa-lower-fa2-backward: block-r and block-c must be "
                       "in [1, 1024], got ")
            << br << " and " << bc;
        return signalPassFailure();
      }
      OpBuilder builder(op);
      BackwardLowering(builder, op, br, bc).build();
      op.erase();
    }
  }
};

} // namespace
