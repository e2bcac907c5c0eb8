//===- RingAttention.cpp - an attention as ring (context-parallel) steps --===//
//
// Context parallelism splits a sequence's rows over `world` ranks; K/V
// shards travel around the ring, each rank attends its queries to the
// shard it holds at each step, and the partial results merge by
// log-sum-exp:
//
//   LSE = m + log(sum_s exp(LSE_s - m)),  O = sum_s exp(LSE_s - LSE) O_s
//
// which is the attention over the union of the steps' keys. Under a causal
// mask, query chunk q against key chunk k (global chunk indices) is whole
// when k < q, top-left causal when k = q (the chunks are equally long and
// aligned) and fully masked when k > q. Zig-zag sharding gives rank r the
// chunks r and 2 world - 1 - r so that every rank has as many whole and
// diagonal pairs at every step.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace mlir::fa {
#define GEN_PASS_DEF_FARINGATTENTION
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

/// One partial attention of a rank's query chunk: at ring step `step` it
/// holds the K/V shard of rank `source`, whose chunk `keyChunk` it attends
/// to (top-left causal on the diagonal).
struct RingPiece {
  int64_t step, source, keyChunk;
  bool diagonal;
};

struct FARingAttentionPass
    : fa::impl::FARingAttentionBase<FARingAttentionPass> {
  using FARingAttentionBase::FARingAttentionBase;

  void runOnOperation() override {
    if (world < 1 || world > 1024) {
      emitError(getOperation().getLoc())
          << "fa-ring-attention: world must be in [1, 1024], got "
          << int64_t(world);
      return signalPassFailure();
    }
    if (rank < -1 || rank >= world) {
      emitError(getOperation().getLoc())
          << "fa-ring-attention: rank must be -1 (every rank) or in [0, "
          << int64_t(world) << "), got " << int64_t(rank);
      return signalPassFailure();
    }
    if (layout != "zigzag" && layout != "contiguous") {
      emitError(getOperation().getLoc())
          << "fa-ring-attention: layout must be zigzag or contiguous, got '"
          << std::string(layout) << "'";
      return signalPassFailure();
    }
    SmallVector<AttentionOp> ops;
    getOperation().walk([&](AttentionOp op) { ops.push_back(op); });
    for (AttentionOp op : ops)
      if (failed(rewrite(op)))
        return signalPassFailure();
  }

  bool zigzag() const { return layout == "zigzag"; }
  int64_t chunks() const { return zigzag() ? 2 * world : world; }

  /// The global chunks of rank `r`'s rows.
  SmallVector<int64_t> chunksOf(int64_t r) const {
    if (zigzag())
      return {r, 2 * world - 1 - r};
    return {r};
  }

  /// What query chunk `queryChunk` of rank `r` attends to, in step order;
  /// fully masked pairs are left out.
  SmallVector<RingPiece> piecesOf(int64_t r, int64_t queryChunk,
                                  bool causal) const {
    SmallVector<RingPiece> pieces;
    for (int64_t step = 0; step < world; ++step) {
      int64_t source = (r - step + world) % world;
      for (int64_t keyChunk : chunksOf(source)) {
        if (causal && keyChunk > queryChunk)
          continue;
        pieces.push_back(
            {step, source, keyChunk, causal && keyChunk == queryChunk});
      }
    }
    return pieces;
  }

  LogicalResult rewrite(AttentionOp op) {
    auto fail = [&](const Twine &why) {
      return op.emitOpError("fa-ring-attention: ") << why;
    };
    if (!op.hasBufferSemantics())
      return fail("needs the memref form (run fa-attention-to-buffers "
                  "first)");
    if (op.getKvLengths() || op.getBlockTable() || op.getCuSeqlensQ())
      return fail("KV caches and varlen batches have no ring form");
    if (op.getWindow() || op.getDiagonalOffset())
      return fail("sliding windows and diagonal offsets have no ring form "
                  "yet");
    if (op.getKvSplits() || op.getBlockR() || op.getBlockC())
      return fail("runs before fa-tile and fa-split-kv (the ring steps are "
                  "tiled each)");
    if (op.getDescales().size())
      return fail("e4m3 attentions have no ring form yet");
    // A sink joins each row's softmax once, not once per ring piece.
    if (op.getSinks())
      return fail("attention sinks have no ring form yet");
    if (op.hasModifications())
      return fail("score_mod and mask_mod have no ring form yet");
    auto q = cast<MemRefType>(op.getQuery().getType());
    auto k = cast<MemRefType>(op.getKey().getType());
    auto v = cast<MemRefType>(op.getValue().getType());
    auto o = cast<MemRefType>(op.getOuts()[0].getType());
    for (MemRefType t : {q, k, v, o})
      if (!t.hasStaticShape())
        return fail("needs static shapes, got ") << t;
    int64_t n = q.getDimSize(2);
    if (k.getDimSize(2) != n)
      return fail("a ring shards one sequence: Nq must equal Nk, got ")
             << n << " and " << k.getDimSize(2);
    if (n % chunks() != 0)
      return fail("the sequence length ")
             << n << " must be a multiple of " << chunks() << " ("
             << std::string(layout)
             << " sharding over " << int64_t(world) << " ranks)";

    OpBuilder b(op);
    Location loc = op.getLoc();
    int64_t c = n / chunks();
    int64_t batch = q.getDimSize(0), heads = q.getDimSize(1);
    int64_t dv = v.getDimSize(3);
    Type f32 = b.getF32Type();
    Type outElement = o.getElementType();
    Value lse = op.getOuts().size() > 1 ? op.getOuts()[1] : Value();
    bool causal = op.getCausal();

    auto index = [&](int64_t x) -> OpFoldResult { return b.getIndexAttr(x); };
    // Rows [chunk * c, chunk * c + c) of a [B, H, N, ...] buffer.
    auto rows = [&](Value buffer, int64_t chunk) -> Value {
      auto type = cast<MemRefType>(buffer.getType());
      SmallVector<OpFoldResult> offsets(type.getRank(), index(0)),
          sizes, strides(type.getRank(), index(1));
      for (int64_t size : type.getShape())
        sizes.push_back(index(size));
      offsets[2] = index(chunk * c);
      sizes[2] = index(c);
      return memref::SubViewOp::create(b, loc, buffer, offsets, sizes,
                                       strides);
    };
    // Slot `i` of a stacked [S, ...] buffer, as a buffer of rank one less.
    auto slot = [&](Value stacked, int64_t i) -> Value {
      auto type = cast<MemRefType>(stacked.getType());
      SmallVector<OpFoldResult> offsets(type.getRank(), index(0)),
          sizes = {index(1)}, strides(type.getRank(), index(1));
      offsets[0] = index(i);
      for (int64_t size : type.getShape().drop_front())
        sizes.push_back(index(size));
      auto reduced = memref::SubViewOp::inferRankReducedResultType(
          type.getShape().drop_front(), type, offsets, sizes, strides);
      return memref::SubViewOp::create(b, loc, cast<MemRefType>(reduced),
                                       stacked, offsets, sizes, strides);
    };
    // [d0, .., dk] -> [d0 * .. * d(k-1), dk] (or to one dim with `all`).
    auto collapse = [&](Value buffer, ArrayRef<ReassociationIndices> groups) {
      return memref::CollapseShapeOp::create(b, loc, buffer, groups)
          .getResult();
    };
    // dst = extf(src), elementwise over 4-D buffers.
    auto widen = [&](Value src, Value dst) {
      auto map = b.getMultiDimIdentityMap(4);
      SmallVector<utils::IteratorType> parallel(
          4, utils::IteratorType::parallel);
      linalg::GenericOp::create(
          b, loc, ValueRange{src}, ValueRange{dst},
          ArrayRef<AffineMap>{map, map}, parallel,
          [&](OpBuilder &nb, Location nl, ValueRange args) {
            Value wide = arith::ExtFOp::create(nb, nl, f32, args[0]);
            linalg::YieldOp::create(nb, nl, wide);
          });
    };

    // The attention's own attributes (scale, softcap), without the mask,
    // which each piece sets.
    SmallVector<NamedAttribute> attrs;
    for (NamedAttribute attr : op->getAttrs())
      if (attr.getName() != op.getCausalAttrName() &&
          attr.getName() != op.getBottomRightAttrName() &&
          attr.getName() != op.getOperandSegmentSizesAttrName())
        attrs.push_back(attr);
    if (!op.getScale())
      attrs.push_back(
          b.getNamedAttr(op.getScaleAttrName(),
                         b.getF32FloatAttr(op.getEffectiveScale())));

    SmallVector<int64_t> ranks;
    for (int64_t r = 0; r < world; ++r)
      if (rank < 0 || r == rank)
        ranks.push_back(r);
    for (int64_t r : ranks) {
      for (int64_t queryChunk : chunksOf(r)) {
        SmallVector<RingPiece> pieces = piecesOf(r, queryChunk, causal);
        int64_t count = pieces.size();
        auto partO = memref::AllocOp::create(
            b, loc, MemRefType::get({count, batch, heads, c, dv}, f32));
        auto partLse = memref::AllocOp::create(
            b, loc, MemRefType::get({count, batch, heads, c}, f32));
        Value query = rows(op.getQuery(), queryChunk);
        for (auto [i, piece] : llvm::enumerate(pieces)) {
          Value pieceO = outElement.isF32()
                             ? slot(partO, i)
                             : memref::AllocOp::create(
                                   b, loc,
                                   MemRefType::get({batch, heads, c, dv},
                                                   outElement))
                                   .getResult();
          SmallVector<NamedAttribute> pieceAttrs = attrs;
          if (piece.diagonal)
            pieceAttrs.push_back(
                b.getNamedAttr(op.getCausalAttrName(), b.getUnitAttr()));
          pieceAttrs.push_back(b.getNamedAttr(
              "fa.ring_step",
              b.getDictionaryAttr(
                  {b.getNamedAttr("rank", b.getI64IntegerAttr(r)),
                   b.getNamedAttr("step", b.getI64IntegerAttr(piece.step)),
                   b.getNamedAttr("source",
                                  b.getI64IntegerAttr(piece.source)),
                   b.getNamedAttr("query_chunk",
                                  b.getI64IntegerAttr(queryChunk)),
                   b.getNamedAttr("key_chunk",
                                  b.getI64IntegerAttr(piece.keyChunk))})));
          AttentionOp::create(
              b, loc, TypeRange{}, query, rows(op.getKey(), piece.keyChunk),
              rows(op.getValue(), piece.keyChunk),
              ValueRange{pieceO, slot(partLse, i)}, ValueRange{}, Value(),
              Value(), Value(), Value(), /*sinks=*/Value(),
              /*captures=*/ValueRange{}, pieceAttrs);
          // A kernel writes its partial O in O's type: rounded there,
          // widened for the merge.
          if (!outElement.isF32()) {
            widen(pieceO, slot(partO, i));
            memref::DeallocOp::create(b, loc, pieceO);
          }
        }
        // The merge writes contiguous rows; O's and LSE's are strided
        // slices of the whole sequence (copied by linalg.copy, whose loops
        // need no runtime library, unlike memref.copy of strided views).
        auto mergedO = memref::AllocOp::create(
            b, loc, MemRefType::get({batch, heads, c, dv}, outElement));
        Value mergedLse;
        if (lse)
          mergedLse = memref::AllocOp::create(
              b, loc, MemRefType::get({batch, heads, c}, f32));
        MergePartialsOp::create(
            b, loc, collapse(partO, {{0}, {1, 2, 3}, {4}}),
            collapse(partLse, {{0}, {1, 2, 3}}),
            collapse(mergedO, {{0, 1, 2}, {3}}),
            lse ? collapse(mergedLse, {{0, 1, 2}}) : Value());
        linalg::CopyOp::create(b, loc, ValueRange{mergedO},
                               ValueRange{rows(op.getOuts()[0], queryChunk)});
        if (lse) {
          linalg::CopyOp::create(b, loc, ValueRange{mergedLse},
                                 ValueRange{rows(lse, queryChunk)});
          memref::DeallocOp::create(b, loc, mergedLse);
        }
        for (Value buffer : {Value(mergedO), Value(partO), Value(partLse)})
          memref::DeallocOp::create(b, loc, buffer);
      }
    }
    op.erase();
    return success();
  }
};

} // namespace
