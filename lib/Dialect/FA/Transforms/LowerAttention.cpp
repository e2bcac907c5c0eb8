//===- LowerAttention.cpp - FA1 and FA2 loop orders -----------------------===//
//
// Both loop orders are built from the same tile ops; what differs is which
// loop is outside, where the online-softmax state lives, and where the
// normalisation happens:
//
//   FA1 (2022): for j (K/V block): load K_j, V_j
//                 for i (Q block): load Q_i, O_i, l_i, m_i from memory,
//                                  one online-softmax step, O_i /= l_i,
//                                  write O_i, l_i, m_i back
//   FA2 (2023): forall i (Q block): load Q_i; m, l, O local
//                 for j (K/V block): load K_j, V_j, one online-softmax step
//               O_i = O / l; LSE_i = m + log l; write both
//
// Tiles are loaded into on-chip buffers with linalg.copy so that every
// access to the large buffers is explicit (fa-io-report counts them).
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/Transforms/Passes.h"

#include "fa/Model/BlockRange.h"
#include "fa/Model/KVChunk.h"
#include "fa/Support/IRArithmetic.h"

#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/AffineExpr.h"

#include <limits>

namespace mlir::fa {
#define GEN_PASS_DEF_FALOWERFA1
#define GEN_PASS_DEF_FALOWERFA2
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {


/// Everything the loop nests need to know about one buffer-form attention.
struct Problem {
  Value query, key, value, out, lse; // lse is null when not requested
  Value queryDescale, keyDescale, valueDescale;         // null unless e4m3
  Value kvLengths, blockTable; // null unless a KV cache's
  Value cuQ, cuK;              // null unless a varlen batch's prefix sums
  Value sinks;                 // null unless attention sinks ([Hq] f32)
  Value batch, queryHeads, groupSize, queryLen, keyLen; // index values
  int64_t pageSize = 0;        // rows per page of a paged K/V
  int64_t headDim, valueHeadDim, blockR, blockC;
  Type elementType;   // Q's
  Type kvElementType; // K's and V's: Q's, or e4m3 (an FP8 KV cache)
  AttentionOp op;
};

/// On-chip buffers of one query block: the tiles and the softmax state.
struct Tiles {
  Value query, key, value;        // input type, [B_r|B_c, D|Dv]
  Value scores;                   // f32 [B_r, B_c], S then P
  Value max, sum, correction;     // f32 [B_r]
  Value acc;                      // f32 [B_r, Dv]
};

class AttentionLowering {
public:
  AttentionLowering(OpBuilder &builder, Location loc, const Problem &p)
      : b(builder), loc(loc), p(p) {}

  void buildFA1();
  void buildFA2();
  /// Split-KV's second nest: merge_partials of each query block's S
  /// partials into O and LSE; frees the scratch.
  void buildMerge(Value partialOut, Value partialLse, int64_t splits,
                  Value numQBlocks);

private:
  Value index(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value mul(Value a, int64_t c) {
    return b.createOrFold<arith::MulIOp>(loc, a, index(c));
  }
  Value ceilDiv(Value a, int64_t c) {
    return b.createOrFold<arith::CeilDivUIOp>(loc, a, index(c));
  }
  /// An scf.forall over `ubs` (constant bounds as attributes, so that the
  /// loop's static shape prints and folds).
  scf::ForallOp parallelLoop(SmallVector<OpFoldResult> ubs) {
    for (OpFoldResult &ub : ubs)
      if (std::optional<int64_t> c = getConstantIntValue(ub))
        ub = b.getIndexAttr(*c);
    return scf::ForallOp::create(b, loc, ubs, ValueRange{}, std::nullopt);
  }

  /// min(tile, total - start): the length of the block starting at `start`;
  /// shorter than the tile only for the ragged last block.
  Value blockLength(Value start, int64_t tile, Value total) {
    MLIRContext *ctx = b.getContext();
    AffineExpr d0 = getAffineDimExpr(0, ctx), s0 = getAffineSymbolExpr(0, ctx);
    AffineMap map =
        AffineMap::get(1, 1, {getAffineConstantExpr(tile, ctx), s0 - d0}, ctx);
    return affine::AffineMinOp::create(b, loc, map, ValueRange{start, total});
  }

  /// buf[bi, h, row0 : row0 + rows, :] as a rank-reduced view (rank 2 for
  /// [B, H, N, D] buffers, rank 1 for [B, H, N] ones); with `heads` > 1,
  /// heads h .. h + heads - 1 (one more leading dimension: a split-KV
  /// query block's partials).
  Value rowBlock(Value buf, Value bi, OpFoldResult h, Value row0, Value rows,
                 int64_t heads = 1) {
    auto type = cast<MemRefType>(buf.getType());
    OpFoldResult zero = b.getIndexAttr(0), one = b.getIndexAttr(1);
    SmallVector<OpFoldResult> offsets = {bi, h, row0};
    SmallVector<OpFoldResult> sizes = {one, b.getIndexAttr(heads), rows};
    SmallVector<int64_t> shape = {
        getConstantIntValue(rows).value_or(ShapedType::kDynamic)};
    if (heads > 1)
      shape.insert(shape.begin(), heads);
    if (type.getRank() == 4) {
      offsets.push_back(zero);
      sizes.push_back(b.getIndexAttr(type.getDimSize(3)));
      shape.push_back(type.getDimSize(3));
    }
    SmallVector<OpFoldResult> strides(type.getRank(), one);
    MemRefType viewType = memref::SubViewOp::inferRankReducedResultType(
        shape, type, offsets, sizes, strides);
    return memref::SubViewOp::create(b, loc, viewType, buf, offsets, sizes,
                                     strides);
  }

  /// Sequence `bi`: its query and key counts (what the loops, ragged tails
  /// and bottom-right masks use) and where its rows are: batch row bi from
  /// row 0, or in a varlen batch batch row 0 from its prefix sums.
  void setSequence(Value bi) {
    queryLen = p.queryLen;
    qBase = kBase = index(0);
    batchRow = bi;
    setKeyLengthOf(bi);
    if (!p.cuQ)
      return;
    Value next = arith::AddIOp::create(b, loc, bi, index(1));
    auto load = [&](Value sums, Value i, StringRef role) -> Value {
      auto v = memref::LoadOp::create(b, loc, sums, ValueRange{i});
      v->setAttr(kKVCacheAttr, b.getStringAttr(role));
      return arith::IndexCastUIOp::create(b, loc, b.getIndexType(), v);
    };
    qBase = load(p.cuQ, bi, "cu_seqlens_q");
    queryLen = arith::SubIOp::create(b, loc, load(p.cuQ, next, "cu_seqlens_q"),
                                     qBase);
    kBase = load(p.cuK, bi, "cu_seqlens_k");
    keyLen = arith::SubIOp::create(b, loc, load(p.cuK, next, "cu_seqlens_k"),
                                   kBase);
    batchRow = index(0);
  }

  /// Varlen: the longest sequence's query count (the query blocks of the
  /// nest), max over b of cu_q[b + 1] - cu_q[b].
  Value longestQueries() {
    auto loop = scf::ForOp::create(b, loc, index(0), p.batch, index(1),
                                   ValueRange{index(0)});
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value i = loop.getInductionVar();
    auto at = [&](Value j) -> Value {
      return arith::IndexCastUIOp::create(
          b, loc, b.getIndexType(),
          memref::LoadOp::create(b, loc, p.cuQ, ValueRange{j}));
    };
    Value len = arith::SubIOp::create(
        b, loc, at(arith::AddIOp::create(b, loc, i, index(1))), at(i));
    scf::YieldOp::create(
        b, loc,
        ValueRange{arith::MaxUIOp::create(b, loc, loop.getRegionIterArgs()[0],
                                          len)});
    return loop.getResult(0);
  }

  /// Varlen: continue inside `if (qStart < queryLen)`: the nest runs the
  /// longest sequence's query blocks for every sequence.
  void skipPastSequence(Value qStart) {
    if (!p.cuQ)
      return;
    auto ifIn = scf::IfOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, qStart,
                              queryLen),
        false);
    b.setInsertionPoint(ifIn.thenBlock()->getTerminator());
  }

  /// The query-side rows `qStart`.. of `buf` (Q, O, LSE, FA1's state) for
  /// head h of the current sequence.
  Value queryRows(Value buf, Value h, Value qStart, Value rows) {
    return rowBlock(buf, batchRow, h,
                    arith::AddIOp::create(b, loc, qBase, qStart), rows);
  }

  /// Sequence `bi`'s key count: kv_lengths[bi], or Nk for all.
  void setKeyLengthOf(Value bi) {
    keyLen = p.keyLen;
    if (!p.kvLengths)
      return;
    auto n = memref::LoadOp::create(b, loc, p.kvLengths, ValueRange{bi});
    // What the load reads, for fa-map-to-gpu (kKVCacheAttr).
    n->setAttr(kKVCacheAttr, b.getStringAttr("kv_lengths"));
    keyLen =
        arith::IndexCastUIOp::create(b, loc, b.getIndexType(), n).getResult();
  }

  /// The K/V block of keys kStart.. (ragged at the end) copied into the
  /// on-chip tiles; returns their views of its length. With pages, the
  /// block lies in page table[bi, kStart / page_size] from row
  /// kStart % page_size, or (pages shorter than the block: fa-tile makes
  /// one divide the other) spans B_c / page_size whole pages.
  std::pair<Value, Value> loadKVBlock(const Tiles &t, Value bi, Value kvHead,
                                      Value kStart) {
    Value cols = blockLength(kStart, p.blockC, keyLen);
    Value kTile = prefix(t.key, cols), vTile = prefix(t.value, cols);
    if (p.blockTable && p.pageSize < p.blockC) {
      copyPages(t, bi, kvHead, kStart, cols);
      return {kTile, vTile};
    }
    Value slot = batchRow, row = arith::AddIOp::create(b, loc, kBase, kStart);
    if (p.blockTable) {
      Value page = arith::DivUIOp::create(b, loc, kStart, index(p.pageSize));
      slot = pageOf(bi, page);
      row = arith::RemUIOp::create(b, loc, kStart, index(p.pageSize));
    }
    copy(rowBlock(p.key, slot, kvHead, row, cols), kTile);
    copy(rowBlock(p.value, slot, kvHead, row, cols), vTile);
    return {kTile, vTile};
  }

  /// The page table[bi, page] (an index into K/V's dim 0).
  Value pageOf(Value bi, Value page) {
    auto entry =
        memref::LoadOp::create(b, loc, p.blockTable, ValueRange{bi, page});
    entry->setAttr(kKVCacheAttr, b.getStringAttr("block_table"));
    return arith::IndexCastUIOp::create(b, loc, b.getIndexType(), entry);
  }

  /// A block of `cols` keys from kStart over whole pages: page i of the
  /// block fills tile rows i * page_size .. with its first
  /// min(max(cols - i * page_size, 0), page_size) rows. A page past the
  /// sequence's (of a ragged last block) copies nothing; its table index
  /// is clamped to the row so that the read stays inside the table.
  void copyPages(const Tiles &t, Value bi, Value kvHead, Value kStart,
                 Value cols) {
    Value ps = index(p.pageSize);
    Value firstPage = arith::DivUIOp::create(b, loc, kStart, ps);
    Value lastEntry = arith::SubIOp::create(
        b, loc, memref::DimOp::create(b, loc, p.blockTable, 1), index(1));
    for (int64_t i = 0; i < p.blockC / p.pageSize; ++i) {
      Value left = arith::MaxSIOp::create(
          b, loc, arith::SubIOp::create(b, loc, cols, index(i * p.pageSize)),
          index(0));
      Value rows = arith::MinUIOp::create(b, loc, left, ps);
      Value page = arith::MinUIOp::create(
          b, loc, arith::AddIOp::create(b, loc, firstPage, index(i)),
          lastEntry);
      Value slot = pageOf(bi, page);
      for (auto [from, local] :
           {std::pair<Value, Value>{p.key, t.key}, {p.value, t.value}}) {
        auto type = cast<MemRefType>(local.getType());
        SmallVector<OpFoldResult> offsets = {b.getIndexAttr(i * p.pageSize),
                                             b.getIndexAttr(0)};
        SmallVector<OpFoldResult> sizes = {
            rows, b.getIndexAttr(type.getDimSize(1))};
        SmallVector<OpFoldResult> strides(2, b.getIndexAttr(1));
        Value rowsOfTile = memref::SubViewOp::create(b, loc, local, offsets,
                                                     sizes, strides);
        copy(rowBlock(from, slot, kvHead, index(0), rows), rowsOfTile);
      }
    }
  }

  /// The first `rows` rows of a static on-chip buffer.
  Value prefix(Value local, Value rows) {
    auto type = cast<MemRefType>(local.getType());
    SmallVector<OpFoldResult> offsets(type.getRank(), b.getIndexAttr(0));
    SmallVector<OpFoldResult> strides(type.getRank(), b.getIndexAttr(1));
    SmallVector<OpFoldResult> sizes = {rows};
    for (int64_t dim = 1; dim < type.getRank(); ++dim)
      sizes.push_back(b.getIndexAttr(type.getDimSize(dim)));
    return memref::SubViewOp::create(b, loc, local, offsets, sizes, strides);
  }

  void copy(Value from, Value to) {
    linalg::CopyOp::create(b, loc, ValueRange{from}, ValueRange{to});
  }
  void fill(Value buf, float v) {
    Value c = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
    if (cast<MemRefType>(buf.getType()).getElementType() != b.getF32Type())
      c = arith::TruncFOp::create(
          b, loc, cast<MemRefType>(buf.getType()).getElementType(), c);
    linalg::FillOp::create(b, loc, ValueRange{c}, ValueRange{buf});
  }

  Value alloc(ArrayRef<int64_t> shape, Type type) {
    return memref::AllocOp::create(b, loc, MemRefType::get(shape, type));
  }
  Tiles allocTiles() {
    Type f32 = b.getF32Type();
    Tiles t;
    t.query = alloc({p.blockR, p.headDim}, p.elementType);
    t.key = alloc({p.blockC, p.headDim}, p.kvElementType);
    t.value = alloc({p.blockC, p.valueHeadDim}, p.kvElementType);
    t.scores = alloc({p.blockR, p.blockC}, f32);
    t.max = alloc({p.blockR}, f32);
    t.sum = alloc({p.blockR}, f32);
    t.correction = alloc({p.blockR}, f32);
    t.acc = alloc({p.blockR, p.valueHeadDim}, f32);
    return t;
  }
  void deallocTiles(const Tiles &t) {
    for (Value v : {t.query, t.key, t.value, t.scores, t.max, t.sum,
                    t.correction, t.acc})
      memref::DeallocOp::create(b, loc, v);
  }

  /// One descale factor of an e4m3 input for a tile: the tensor's (rank
  /// 0), its (batch, K/V head)'s (rank 2) or its block's (rank 3, blocks
  /// being tiles: block `tileIndex` of head `head`); null without descales.
  Value descaleOf(Value descales, Value bi, Value head, Value kvHead,
                  Value tileIndex) {
    if (!descales)
      return nullptr;
    SmallVector<Value> indices;
    int64_t rank = cast<MemRefType>(descales.getType()).getRank();
    if (rank == 2)
      indices = {bi, kvHead};
    else if (rank == 3)
      indices = {bi, head, tileIndex};
    return memref::LoadOp::create(b, loc, descales, indices);
  }
  /// Query head h's sink logit (null without sinks).
  Value sinkOf(Value h) {
    if (!p.sinks)
      return nullptr;
    return memref::LoadOp::create(b, loc, p.sinks, ValueRange{h});
  }

  /// The score tile's descale: q_descale * k_descale, k_descale alone for
  /// an e4m3 K/V beside a 16-bit Q (null without).
  Value scoreDescale(Value qDescale, Value kDescale) {
    if (!qDescale)
      return kDescale;
    return arith::MulFOp::create(b, loc, qDescale, kDescale);
  }

  /// The score tile of sequence `bi`, query head `h`, query rows from
  /// `row0` and keys from `col0` (positions in the sequence).
  ScoreTileOp scoreTile(Value q, Value k, Value s, Value bi, Value h,
                        Value row0, Value col0, Value descale) {
    AttentionOp op = p.op;
    // score_mod and mask_mod see the unshifted positions.
    SmallVector<Value> coordinates;
    if (op.hasModifications())
      coordinates = {bi, h, row0, col0};
    // Bottom-right masks: positions i + Nk against j + Nq, so that
    // j <= i + Nk - Nq needs no negative index.
    if (op.getBottomRight()) {
      row0 = arith::AddIOp::create(b, loc, row0, keyLen);
      col0 = arith::AddIOp::create(b, loc, col0, queryLen);
    }
    // A diagonal offset d: row i at key position i + d.
    if (std::optional<int64_t> offset = op.getDiagonalOffset())
      row0 = arith::AddIOp::create(b, loc, row0, index(*offset));
    auto tile = ScoreTileOp::create(
        b, loc, q, k, s, /*unmodified=*/Value(), row0, col0, descale,
        coordinates, op.getCaptures(),
        b.getF32FloatAttr(op.getEffectiveScale()),
        op.getCausal() ? b.getUnitAttr() : UnitAttr(), op.getWindowAttr(),
        op.getSoftcapAttr(), op.getBottomRightAttr(),
        op.getDiagonalOffsetAttr());
    // The regions read only their arguments (the verifier's rule): cloned
    // as they are into every tile.
    IRMapping none;
    op.getScoreMod().cloneInto(&tile.getScoreMod(), none);
    op.getMaskMod().cloneInto(&tile.getMaskMod(), none);
    return tile;
  }

  /// [begin, end) of the K/V blocks a query block starting at `qStart`
  /// visits: mlir::fa::model::kvBlockRange, the kernels' and the IO
  /// model's rule (a block no mask lets a key through is skipped, not
  /// masked; bottom-right masks and per-sequence lengths run at least one
  /// block, possibly empty or fully masked).
  std::pair<Value, Value> visitedKeyBlocks(Value qStart) {
    AttentionOp op = p.op;
    IRArithmetic ia(b, loc, b.getIndexType(), /*fold=*/true);
    model::KVRange<IRArithmetic> range = model::kvBlockRange(
        ia, qStart, queryLen, keyLen, p.blockR, p.blockC, op.getCausal(),
        op.getWindow().value_or(0), op.getBottomRight(),
        op.getDiagonalOffset().value_or(0),
        /*keyLengths=*/p.kvLengths || p.cuQ);
    return {range.first, range.end};
  }

  OpBuilder &b;
  Location loc;
  const Problem &p;
  /// The current sequence (setSequence): its key and query counts, its
  /// batch row, and where its query and key rows start.
  Value keyLen, queryLen, batchRow, qBase, kBase;
};

void AttentionLowering::buildFA2() {
  // Split-KV: one more parallel dimension, the chunk of the K/V blocks, whose
  // partial (O, LSE) go to f32 scratch, combined after by merge_partials.
  AttentionOp op = p.op;
  int64_t splits = op.getKvSplits().value_or(1);
  Value numQBlocks =
      ceilDiv(p.cuQ ? longestQueries() : p.queryLen, p.blockR);
  SmallVector<OpFoldResult> ubs = {p.batch, p.queryHeads, numQBlocks};
  if (splits > 1)
    ubs.push_back(b.getIndexAttr(splits));
  Value partialOut, partialLse;
  if (splits > 1) {
    // [B, Hq * S, Nq, Dv] and [B, Hq * S, Nq]: split s of head h is head
    // h * S + s, so the nest's row blocks address them like O and LSE.
    Type f32 = b.getF32Type();
    int64_t dyn = ShapedType::kDynamic;
    Value heads = mul(p.queryHeads, splits);
    partialOut = memref::AllocOp::create(
        b, loc, MemRefType::get({dyn, dyn, dyn, p.valueHeadDim}, f32),
        ValueRange{p.batch, heads, p.queryLen});
    partialLse = memref::AllocOp::create(
        b, loc, MemRefType::get({dyn, dyn, dyn}, f32),
        ValueRange{p.batch, heads, p.queryLen});
  }
  auto forall = parallelLoop(ubs);
  forall->setAttr("fa.loop_order",
                  b.getStringAttr(splits > 1 ? "fa2-split-kv" : "fa2"));
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(forall.getBody()->getTerminator());
    Value bi = forall.getInductionVar(0), h = forall.getInductionVar(1),
          i = forall.getInductionVar(2);
    Value kvHead = arith::DivUIOp::create(b, loc, h, p.groupSize);
    Value qStart = mul(i, p.blockR);
    setSequence(bi);
    skipPastSequence(qStart);
    Value rows = blockLength(qStart, p.blockR, queryLen);

    Tiles t = allocTiles();
    Value qTile = prefix(t.query, rows);
    copy(queryRows(p.query, h, qStart, rows), qTile);
    Value qDescale = descaleOf(p.queryDescale, bi, h, kvHead, i);
    Value vDescale = descaleOf(p.valueDescale, bi, kvHead, kvHead, nullptr);
    // A sink joins the softmax once: split-KV starts the first chunk with
    // it and the others with -inf (none); the merge then counts it once.
    Value sink = sinkOf(h);
    if (sink && splits > 1) {
      Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                          forall.getInductionVar(3), index(0));
      Value none = arith::ConstantOp::create(
          b, loc, b.getF32FloatAttr(-std::numeric_limits<float>::infinity()));
      sink = arith::SelectOp::create(b, loc, first, sink, none);
    }
    InitStateOp::create(b, loc, t.max, t.sum, t.acc, sink);

    auto [begin, end] = visitedKeyBlocks(qStart);
    Value outHead = h;
    if (splits > 1) {
      // Chunk s of the visible blocks (mlir::fa::model::kvChunk, the GPU
      // kernel's rule; possibly none: the partial is then O = 0, LSE = -inf).
      Value s = forall.getInductionVar(3);
      IRArithmetic ia(b, loc, b.getIndexType());
      std::tie(begin, end) = model::kvChunk(ia, begin, end, s, index(splits));
      outHead = arith::AddIOp::create(b, loc, mul(h, splits), s);
    }
    auto loop = scf::ForOp::create(b, loc, begin, end, index(1));
    {
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPoint(loop.getBody()->getTerminator());
      Value kStart = mul(loop.getInductionVar(), p.blockC);
      auto [kTile, vTile] = loadKVBlock(t, bi, kvHead, kStart);
      Value kDescale =
          descaleOf(p.keyDescale, bi, kvHead, kvHead, loop.getInductionVar());
      scoreTile(qTile, kTile, t.scores, bi, h, qStart, kStart,
                scoreDescale(qDescale, kDescale));
      SoftmaxUpdateOp::create(b, loc, t.scores, t.max, t.sum, t.correction,
                              /*exp2_poly_degree=*/IntegerAttr(),
                              /*exp2_poly_period=*/IntegerAttr());
      RescaleOp::create(b, loc, t.acc, t.correction);
      PVAccumulateOp::create(b, loc, t.scores, vTile, t.acc, vDescale,
                             /*probs_scale=*/FloatAttr());
    }
    // The single normalisation of FA2.
    NormalizeOp::create(b, loc, t.acc, t.sum);
    Value out = splits > 1 ? partialOut : p.out;
    Value lse = splits > 1 ? partialLse : p.lse;
    copy(prefix(t.acc, rows), queryRows(out, outHead, qStart, rows));
    if (lse)
      LogSumExpOp::create(b, loc, t.max, t.sum,
                          queryRows(lse, outHead, qStart, rows));
    deallocTiles(t);
  }
  if (splits > 1)
    buildMerge(partialOut, partialLse, splits, numQBlocks);
}

void AttentionLowering::buildMerge(Value partialOut, Value partialLse,
                                   int64_t splits, Value numQBlocks) {
  SmallVector<OpFoldResult> ubs = {p.batch, p.queryHeads, numQBlocks};
  auto forall = parallelLoop(ubs);
  forall->setAttr("fa.loop_order", b.getStringAttr("fa2-merge"));
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(forall.getBody()->getTerminator());
    Value bi = forall.getInductionVar(0), h = forall.getInductionVar(1),
          i = forall.getInductionVar(2);
    Value qStart = mul(i, p.blockR);
    Value rows = blockLength(qStart, p.blockR, p.queryLen);
    // The S partials of (bi, h): heads h * S .. h * S + S - 1.
    auto splitsOf = [&](Value buf) {
      return rowBlock(buf, bi, mul(h, splits), qStart, rows, splits);
    };
    MergePartialsOp::create(
        b, loc, splitsOf(partialOut), splitsOf(partialLse),
        rowBlock(p.out, bi, h, qStart, rows),
        p.lse ? rowBlock(p.lse, bi, h, qStart, rows) : Value());
  }
  memref::DeallocOp::create(b, loc, partialOut);
  memref::DeallocOp::create(b, loc, partialLse);
}

void AttentionLowering::buildFA1() {
  Type f32 = b.getF32Type();
  // l and m live in memory next to O, as in FA1's Algorithm 1.
  SmallVector<Value> stateSizes;
  auto qType = cast<MemRefType>(p.query.getType());
  SmallVector<int64_t> stateShape(qType.getShape().take_front(3));
  for (int64_t dim = 0; dim < 3; ++dim)
    if (qType.isDynamicDim(dim))
      stateSizes.push_back(memref::DimOp::create(b, loc, p.query, dim));
  auto stateType = MemRefType::get(stateShape, f32);
  Value maxMem = memref::AllocOp::create(b, loc, stateType, stateSizes);
  Value sumMem = memref::AllocOp::create(b, loc, stateType, stateSizes);
  fill(p.out, 0.0f);
  fill(sumMem, 0.0f);
  fill(maxMem, -std::numeric_limits<float>::infinity());

  // A varlen batch's LSE nest runs the longest sequence's query blocks.
  Value lseQBlocks =
      ceilDiv(p.cuQ && p.lse ? longestQueries() : p.queryLen, p.blockR);
  SmallVector<OpFoldResult> ubs = {p.batch, p.queryHeads};
  auto forall = parallelLoop(ubs);
  forall->setAttr("fa.loop_order", b.getStringAttr("fa1"));
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(forall.getBody()->getTerminator());
    Value bi = forall.getInductionVar(0), h = forall.getInductionVar(1);
    Value kvHead = arith::DivUIOp::create(b, loc, h, p.groupSize);
    setSequence(bi);
    Value numKBlocks = ceilDiv(keyLen, p.blockC);
    Value numQBlocks = ceilDiv(queryLen, p.blockR);
    Tiles t = allocTiles();
    Value vDescale = descaleOf(p.valueDescale, bi, kvHead, kvHead, nullptr);
    // Rows past a ragged query tail are never written back; give them a
    // defined state anyway.
    InitStateOp::create(b, loc, t.max, t.sum, t.acc, sinkOf(h));
    if (p.sinks) {
      // The state in memory starts with the sink too (m = log2(e) s,
      // l = 1; O = 0 already): every query block's rows.
      auto blocks = scf::ForOp::create(b, loc, index(0),
                                       ceilDiv(queryLen, p.blockR), index(1));
      OpBuilder::InsertionGuard g0(b);
      b.setInsertionPoint(blocks.getBody()->getTerminator());
      Value qStart = mul(blocks.getInductionVar(), p.blockR);
      Value rows = blockLength(qStart, p.blockR, queryLen);
      copy(prefix(t.max, rows), queryRows(maxMem, h, qStart, rows));
      copy(prefix(t.sum, rows), queryRows(sumMem, h, qStart, rows));
    }

    // Outer loop: K/V blocks.
    auto outer = scf::ForOp::create(b, loc, index(0), numKBlocks, index(1));
    {
      OpBuilder::InsertionGuard g1(b);
      b.setInsertionPoint(outer.getBody()->getTerminator());
      Value kStart = mul(outer.getInductionVar(), p.blockC);
      auto [kTile, vTile] = loadKVBlock(t, bi, kvHead, kStart);
      Value kDescale =
          descaleOf(p.keyDescale, bi, kvHead, kvHead, outer.getInductionVar());

      // Inner loop: Q blocks, state round-tripping through memory.
      auto inner = scf::ForOp::create(b, loc, index(0), numQBlocks, index(1));
      OpBuilder::InsertionGuard g2(b);
      b.setInsertionPoint(inner.getBody()->getTerminator());
      Value qStart = mul(inner.getInductionVar(), p.blockR);
      Value rows = blockLength(qStart, p.blockR, queryLen);
      Value qTile = prefix(t.query, rows);
      Value oMem = queryRows(p.out, h, qStart, rows);
      Value maxRows = queryRows(maxMem, h, qStart, rows);
      Value sumRows = queryRows(sumMem, h, qStart, rows);
      copy(queryRows(p.query, h, qStart, rows), qTile);
      copy(oMem, prefix(t.acc, rows));
      copy(maxRows, prefix(t.max, rows));
      copy(sumRows, prefix(t.sum, rows));
      Value qDescale =
          descaleOf(p.queryDescale, bi, h, kvHead, inner.getInductionVar());
      scoreTile(qTile, kTile, t.scores, bi, h, qStart, kStart,
                scoreDescale(qDescale, kDescale));
      // O_i <- (alpha * l_i * O_i + P V_j) / l_new: undo the previous
      // normalisation, rescale, accumulate, normalise again.
      RescaleOp::create(b, loc, t.acc, t.sum);
      SoftmaxUpdateOp::create(b, loc, t.scores, t.max, t.sum, t.correction,
                            /*exp2_poly_degree=*/IntegerAttr(),
                            /*exp2_poly_period=*/IntegerAttr());
      RescaleOp::create(b, loc, t.acc, t.correction);
      PVAccumulateOp::create(b, loc, t.scores, vTile, t.acc, vDescale,
                             /*probs_scale=*/FloatAttr());
      NormalizeOp::create(b, loc, t.acc, t.sum);
      copy(prefix(t.acc, rows), oMem);
      copy(prefix(t.max, rows), maxRows);
      copy(prefix(t.sum, rows), sumRows);
    }
    deallocTiles(t);
  }

  if (p.lse) {
    // LSE = m + log l from the final state in memory.
    auto lseLoop = scf::ForallOp::create(
        b, loc, ArrayRef<OpFoldResult>{ubs[0], ubs[1], lseQBlocks},
        ValueRange{}, std::nullopt);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(lseLoop.getBody()->getTerminator());
    Value bi = lseLoop.getInductionVar(0), h = lseLoop.getInductionVar(1);
    Value qStart = mul(lseLoop.getInductionVar(2), p.blockR);
    setSequence(bi);
    skipPastSequence(qStart);
    Value rows = blockLength(qStart, p.blockR, queryLen);
    Value maxTile = alloc({p.blockR}, f32), sumTile = alloc({p.blockR}, f32);
    fill(maxTile, -std::numeric_limits<float>::infinity());
    fill(sumTile, 0.0f);
    copy(queryRows(maxMem, h, qStart, rows), prefix(maxTile, rows));
    copy(queryRows(sumMem, h, qStart, rows), prefix(sumTile, rows));
    LogSumExpOp::create(b, loc, maxTile, sumTile,
                        queryRows(p.lse, h, qStart, rows));
    memref::DeallocOp::create(b, loc, maxTile);
    memref::DeallocOp::create(b, loc, sumTile);
  }
  memref::DeallocOp::create(b, loc, maxMem);
  memref::DeallocOp::create(b, loc, sumMem);
}

} // namespace

LogicalResult mlir::fa::lowerAttention(RewriterBase &rewriter, AttentionOp op,
                                       LoopOrder order) {
  StringRef pass = order == LoopOrder::FA1 ? "fa-lower-fa1" : "fa-lower-fa2";
  if (!op.hasBufferSemantics())
    return op.emitOpError() << "has tensor operands; " << pass
                            << " needs the memref form (run "
                               "fa-attention-to-buffers first)";
  if (!op.getBlockR() || !op.getBlockC())
    return op.emitOpError() << "has no tile sizes; " << pass
                            << " needs block_r and block_c (run fa-tile first)";
  if (order == LoopOrder::FA1 && op.getKvSplits().value_or(1) > 1)
    return op.emitOpError() << "has kv_splits = " << *op.getKvSplits()
                            << "; split-KV is a FlashAttention-2 loop order "
                               "(fa-lower-fa2)";
  if (op.isPaged() && op.getPageSize() % *op.getBlockC() != 0 &&
      *op.getBlockC() % op.getPageSize() != 0)
    return op.emitOpError()
           << "has block_c = " << *op.getBlockC() << " and pages of "
           << op.getPageSize()
           << " rows: a K/V block must lie in one page or span whole pages "
              "(one dividing the other; fa-tile picks one)";
  Location loc = op.getLoc();
  rewriter.setInsertionPoint(op);
  Problem p;
  p.op = op;
  p.query = op.getQuery();
  p.key = op.getKey();
  p.value = op.getValue();
  p.out = op.getOuts()[0];
  p.lse = op.getOuts().size() == 2 ? op.getOuts()[1] : Value();
  p.queryDescale = op.getQueryDescale();
  p.keyDescale = op.getKeyDescale();
  p.valueDescale = op.getValueDescale();
  p.headDim = op.getHeadDim();
  p.valueHeadDim = op.getValueHeadDim();
  p.blockR = *op.getBlockR();
  p.blockC = *op.getBlockC();
  p.elementType = op.getQueryType().getElementType();
  p.kvElementType = op.getKeyType().getElementType();
  auto dim = [&](Value v, int64_t d) -> Value {
    return rewriter.createOrFold<memref::DimOp>(loc, v, d);
  };
  p.batch = dim(p.query, 0);
  p.cuQ = op.getCuSeqlensQ();
  p.cuK = op.getCuSeqlensK();
  p.sinks = op.getSinks();
  if (p.cuQ) // the sequences of a varlen batch: B + 1 prefix sums
    p.batch = rewriter.createOrFold<arith::SubIOp>(
        loc, dim(p.cuQ, 0), arith::ConstantIndexOp::create(rewriter, loc, 1));
  p.queryHeads = dim(p.query, 1);
  p.queryLen = dim(p.query, 2);
  p.kvLengths = op.getKvLengths();
  p.blockTable = op.getBlockTable();
  p.keyLen = dim(p.key, 2);
  if (p.blockTable) {
    // Every sequence's capacity: its table row of pages.
    p.pageSize = op.getPageSize();
    p.keyLen = rewriter.createOrFold<arith::MulIOp>(
        loc, dim(p.blockTable, 1),
        arith::ConstantIndexOp::create(rewriter, loc, p.pageSize));
  }
  p.groupSize = rewriter.createOrFold<arith::DivUIOp>(loc, p.queryHeads,
                                                      dim(p.key, 1));
  AttentionLowering lowering(rewriter, loc, p);
  if (order == LoopOrder::FA1)
    lowering.buildFA1();
  else
    lowering.buildFA2();
  rewriter.eraseOp(op);
  return success();
}

namespace {

template <typename Base, LoopOrder order>
struct LowerAttentionPass : Base {
  void runOnOperation() override {
    SmallVector<AttentionOp> ops;
    this->getOperation().walk([&](AttentionOp op) { ops.push_back(op); });
    IRRewriter rewriter(&this->getContext());
    for (AttentionOp op : ops)
      if (failed(lowerAttention(rewriter, op, order)))
        return this->signalPassFailure();
  }
};

struct FALowerFA1Pass
    : LowerAttentionPass<fa::impl::FALowerFA1Base<FALowerFA1Pass>,
                         LoopOrder::FA1> {};
struct FALowerFA2Pass
    : LowerAttentionPass<fa::impl::FALowerFA2Base<FALowerFA2Pass>,
                         LoopOrder::FA2> {};

} // namespace
