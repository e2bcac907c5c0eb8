//===- SM90Kernel.cpp - FlashAttention-3 on Hopper in fagpu ops -----------===//
//
// fagpu-build-kernels for sm_90a: writes the forward kernel of
// FlashAttention-3 that an fa.attention's #fagpu.schedule describes, in the
// warpgroup-level fagpu ops (each lowered by its own pattern in
// WarpgroupToNVVM.cpp), with the tile loop and ring positions in scf/arith:
//
//  * warp specialisation (fagpu.warp_specialize): warpgroup 0 is the
//    producer, its registers cut; one thread issues every TMA load of Q and
//    of the K/V ring. Warpgroups 1 .. consumers are consumers, each owning
//    64 query rows;
//  * the ring: a !fagpu.pipeline of `stages` stages of a K and a V tile;
//    the producer acquires a stage's buffer (its empty barrier) and loads
//    it (fagpu.tma_load: arrive.expect_tx on the full barrier, completed by
//    the TMA's bytes); each consumer warp releases it once its MMA has
//    read it. The Q buffers are a pipeline of one buffer per stage;
//  * S = Q K^T (fagpu.mma, both operands in shared memory), O += P V (P in
//    registers: the S accumulator fragment packed to f16 pairs is the A
//    fragment);
//  * intra-warpgroup overlap: iteration j issues S_j = Q K_j^T and
//    O += P_{j-1} V_{j-1} back to back, then runs the softmax of S_j while
//    the second product is still on the tensor cores (mma_wait pending 1);
//  * ping-pong: wait_turn / pass_turn on named barriers hand the tensor
//    cores from one consumer warpgroup to the next, so one's softmax runs
//    under the other's MMAs;
//  * B_r = 64: one consumer warpgroup and two resident CTAs per SM, which
//    play the part of the ping-pong partners;
//  * persistent CTAs loop over the tiles; with two Q buffers the tiles
//    form one pipeline: a tile's last P V goes to the tensor cores with the
//    next tile's first S (the cross-tile pipeline). Equal tiles are dealt
//    statically (CTA c runs c, c + gridDim, ...); causal tiles, whose
//    lengths differ, by a dynamic scheduler: the producer takes the next
//    tile from a global counter and hands its index to the consumers in
//    shared memory, next to the Q buffer it loads;
//  * split-KV (decode): CTA (tile, ctaid.y) attends its tile to one chunk
//    of the keys (mlir::fa::model::kvChunk), stores the chunk's partial O and
//    LSE in f32, and the last chunk of each warp's rows merges them
//    (fagpu.merge_splits), so decode with few (batch, head) tiles still
//    fills the SMs, in one kernel.
//
// The tile decoder is the one of Common/TMAKernel.h; the shared-memory
// layout is fagpu::SM90Layout.
//
//===----------------------------------------------------------------------===//

#include "SM90KernelBuilder.h"

#include "fa/Dialect/FA/IR/Validation.h"
#include "fa/Dialect/FAGPU/IR/Heuristics.h"
#include "fa/Model/KVChunk.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/FormatVariadic.h"

#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::sm90;

namespace mlir::fa::sm90 {

BlockStep KernelBuilder::softmax(Value s, RowState &state, bool masked,
                                 Value block, Value effScale, Value row0,
                                 const AttentionTile &tile, bool maskMod) {
  Value keys = tile.nk, queries = tile.nq;
  if (spec.modifiesScores())
    return modifiedSoftmax(s, state, masked, block, effScale, row0, tile,
                           maskMod);
  // Row sums by MMA: the step leaves l alone (no_row_sum); it is given a
  // zero l, whose alpha-scaled result nothing reads.
  Value l = spec.rowSumMma() ? fagpu::SplatOp::create(b, loc, rowsType, cf(0.0))
                             : state.l;
  auto step = createSoftmaxStep(b, loc, spec, probsType, rowsType, s, state.m,
                                l, mul(block, c32(spec.blockC)), row0, keys,
                                effScale, diagonalShift(spec, keys, queries),
                                Value(), masked, spec.firstRowOnly);
  state.m = step.getNewM();
  if (!spec.rowSumMma())
    state.l = step.getNewL();
  return {step.getP(), step.getAlpha(), step.getMoved()};
}

BlockStep KernelBuilder::modifiedSoftmax(Value s, RowState &state, bool masked,
                                         Value block, Value effScale,
                                         Value row0, const AttentionTile &tile,
                                         bool maskMod) {
  // FlexAttention's order: the scale, the softcap, score_mod, then the
  // masks; the step applies no softcap of its own.
  Value keyStart = mul(block, c32(spec.blockC));
  SoftmaxConfig config = spec;
  config.softcap = 0;
  Region *mask = maskMod ? spec.maskMod : nullptr;
  // A full block of a mask alone modifies nothing: the step takes the raw
  // scores at the kernel's scale.
  Value scores = s, stepScale = effScale;
  if (spec.scoreMod || mask || spec.softcap > 0) {
    auto modify = spec.modifyScores(b, loc, s, keyStart, row0, tile.batch,
                                    tile.qHead, effScale, tile.nq, tile.nk,
                                    capturePtrs, spec.softcap, mask);
    // The step's multiply-add takes the scores to log2 units: natural ones
    // by log2(e), raw ones by the kernel's scale.
    scores = modify.getResult();
    if (modify.returnsNaturalUnits())
      stepScale = cf(M_LOG2E);
  }
  auto step = createSoftmaxStep(
      b, loc, config, probsType, rowsType, scores, state.m, state.l, keyStart,
      row0, tile.nk, stepScale, diagonalShift(spec, tile.nk, tile.nq), Value(),
      masked, spec.firstRowOnly);
  state.m = step.getNewM();
  state.l = step.getNewL();
  return {step.getP(), step.getAlpha(), step.getMoved()};
}

Value KernelBuilder::stagingRows(Value qBuffer) {
  if (!fagpu::stagesOutput(spec.epilogue))
    return Value();
  Value tile = stagingTile;
  if (!spec.hasStagingTile())
    tile = fagpu::PipelineTileOp::create(b, loc, qTileType, qPipe, qBuffer, 0);
  return fagpu::TileRowsOp::create(b, loc, consumerRowsType, tile, consumer);
}

void KernelBuilder::emitConsumer(Value consumerIndex) {
  consumer = consumerIndex;
  // The consumers assert the tiles' inputs (emitProducer).
  assertsTileInputs = true;
  epilogueBarrier = add(c32(kEpilogueBarrier), consumer);
  if (spec.rowSumMma()) {
    // Each consumer's 8 rows of the row-sum tile, written once.
    MLIRContext *ctx = b.getContext();
    Type fp8 = Float8E4M3FNType::get(ctx);
    int64_t rows = 8 * spec.consumers;
    int64_t swizzle = fagpu::valueTileSwizzle(spec.blockC);
    Value tiles = fagpu::SharedTileOp::create(
        b, loc,
        fagpu::SharedTileType::get(ctx, {rows, spec.blockC}, fp8, rows,
                                   swizzle),
        spec.rowSumTileOffset());
    rowSumTile = fagpu::TileRowsOp::create(
        b, loc,
        fagpu::SharedTileType::get(ctx, {8, spec.blockC}, fp8, rows, swizzle),
        tiles, consumer);
    fagpu::InitRowSumTileOp::create(b, loc, rowSumTile, epilogueBarrier);
  }
  // e4m3: each tile takes its descales (useDescales).
  kernelScaleLog2 = scaleLog2;

  // Ping-pong: consumer c waits on barrier 1 + c for its turn on the
  // tensor cores and hands the turn over on the other's after issuing.
  // With three consumers the turn goes round: c hands it to (c + 1) mod 3.
  // Each named barrier joins one waiting and one arriving warpgroup.
  ownTurn = add(c32(kPingPongBarrier), consumer);
  otherTurn = add(c32(kPingPongBarrier),
                  spec.consumers == 2
                      ? sub(c32(1), consumer)
                      : remu(add(consumer, c32(1)), c32(spec.consumers)));
  if (spec.pingPong) {
    // Consumer 0 goes first: it pre-arrives on its own barrier.
    auto ifFirst = scf::IfOp::create(b, loc, eq(consumer, c32(0)), false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifFirst.thenBlock());
    fagpu::PassTurnOp::create(b, loc, ownTurn, 2 * 128);
  }
  // Consumer warps decode each tile with all their lanes.
  collectiveLane = remu(tid, c32(32));
  if (spec.qBuffers == 1) {
    emitTileLoop([&](const AttentionTile &tile, Value tileIndex, ValueRange) {
      if (spec.kvSplits)
        emitSplitConsumerTile(tile, tileIndex);
      else
        emitConsumerTile(tile, tileIndex, /*previous=*/nullptr);
      return SmallVector<Value>();
    });
  } else {
    // Cross-tile pipeline: the CTA's first tile is peeled (nothing pending
    // before it), the loop over the others carries the pending tile, and
    // the last one is finished after the loop.
    emitTileLoop(
        [&](const AttentionTile &tile, Value tileIndex, ValueRange carried) {
          std::optional<PendingTile> previous;
          if (!carried.empty())
            previous = unpackPending(carried);
          return packPending(*emitConsumerTile(
              tile, tileIndex, previous ? &*previous : nullptr));
        },
        [&](ValueRange last) { finishPendingTile(unpackPending(last)); });
  }
  collectiveLane = Value();
  // The shared memory the TMA stores read must outlive them.
  if (fagpu::takesOutputMap(spec.epilogue))
    fagpu::StoreWaitOp::create(b, loc);
}

SmallVector<Value> KernelBuilder::packPending(const PendingTile &tile) {
  SmallVector<Value> v = {tile.state.o, tile.state.m, tile.state.l, tile.last.p,
                          tile.last.alpha};
  if (tile.last.moved)
    v.push_back(tile.last.moved);
  v.append({tile.vStage, tile.vParity, tile.row0, tile.qMatrix});
  if (tile.rowEnd)
    v.push_back(tile.rowEnd);
  if (tile.lse)
    v.push_back(tile.lse);
  if (tile.vDescale)
    v.push_back(tile.vDescale);
  if (tile.qBuffer)
    v.push_back(tile.qBuffer);
  return v;
}

KernelBuilder::PendingTile KernelBuilder::unpackPending(ValueRange v) {
  PendingTile tile;
  tile.state = {v[0], v[1], v[2]};
  tile.last.p = v[3];
  tile.last.alpha = v[4];
  size_t i = 5;
  if (spec.rescaleThreshold >= 0)
    tile.last.moved = v[i++];
  tile.vStage = v[i];
  tile.vParity = v[i + 1];
  tile.row0 = v[i + 2];
  tile.qMatrix = v[i + 3];
  i += 4;
  if (cuSeqlensQPtr) {
    tile.rowEnd = v[i++];
    if (spec.writesLse)
      tile.lse = v[i++];
  }
  if (spec.fp8)
    tile.vDescale = v[i++];
  if (releasesQAfterStore())
    tile.qBuffer = v[i];
  return tile;
}

Value KernelBuilder::loadDescale(Value ptr, Value index) {
  return LLVM::LoadOp::create(b, loc, f32,
                              gep(globalPtr, f32, ptr, ext64(index)),
                              /*alignment=*/4, /*isVolatile=*/false,
                              /*isNonTemporal=*/false, /*isInvariant=*/true);
}

void KernelBuilder::useDescales(const AttentionTile &tile) {
  if (spec.widensKeyValues) {
    // An e4m3 cache: K's and V's descales, per tensor or per (batch, K/V
    // head). S = k_descale (Q K8^T): K's folds into the tile's scale; O =
    // v_descale P V8: V's into the epilogue's normalisation.
    Value perHead = eq(descaleLayout, c32(int64_t(fagpu::DescaleLayout::Head)));
    Value headIndex =
        select(perHead, add(mul(tile.batch, hkv), tile.kvHead), c32(0));
    tileScaleLog2 = fmul(kernelScaleLog2, loadDescale(kDescalePtr, headIndex));
    vDescale = loadDescale(vDescalePtr, headIndex);
    return;
  }
  if (!spec.fp8)
    return;
  // Per (batch, K/V head): all three at b Hkv + h_kv. Per block: Q's at
  // its query block of its (batch, query head), [B, Hq, ceil(Nq / B_r)];
  // K's at block j of its (batch, K/V head), [B, Hkv, ceil(Nk / B_c)]; V's
  // one per tensor. Per tensor: all at 0.
  Value perHead = eq(descaleLayout, c32(int64_t(fagpu::DescaleLayout::Head)));
  Value perBlock = eq(descaleLayout, c32(int64_t(fagpu::DescaleLayout::Block)));
  Value zero = c32(0);
  Value kvMatrix = add(mul(tile.batch, hkv), tile.kvHead);
  Value headIndex = select(perHead, kvMatrix, zero);
  Value keyBlocks = divu(add(nk, c32(blockC - 1)), c32(blockC));
  Value qBlockIndex =
      add(mul(add(mul(tile.batch, hq), tile.qHead), queryBlocks()),
          divu(tile.qStart, c32(blockR)));
  tileScaleLog2 =
      fmul(kernelScaleLog2,
           loadDescale(qDescalePtr, select(perBlock, qBlockIndex, headIndex)));
  kDescaleBase = select(perBlock, mul(kvMatrix, keyBlocks), headIndex);
  kDescaleStep = arith::ExtUIOp::create(b, loc, i32, perBlock);
  vDescale = loadDescale(vDescalePtr, headIndex);
}

Value KernelBuilder::scoresScale(Value block) {
  if (spec.widensKeyValues)
    return tileScaleLog2;
  if (!spec.fp8)
    return scaleLog2;
  return fmul(
      tileScaleLog2,
      loadDescale(kDescalePtr, add(kDescaleBase, mul(block, kDescaleStep))));
}

void KernelBuilder::storeTile(const RowState &state, Value row0, Value qMatrix,
                              Value staging, Value rowEnd, Value lse,
                              Value vDescaleOfTile) {
  if (!vDescaleOfTile)
    vDescaleOfTile = vDescale;
  if (!rowEnd)
    rowEnd = nq;
  if (!lse && spec.writesLse)
    lse = lsePtr;
  if (spec.kvSplits) {
    // The chunk's partial: row block chunk * B * Hq + matrix, in f32.
    Value chunk = NVVM::BlockIdYOp::create(b, loc, i32);
    Value partialMatrix = add(mul(chunk, mul(batches, hq)), qMatrix);
    Value lseRows = fagpu::LseRowsOp::create(b, loc, lsePartialPtr.getType(),
                                             lsePartialPtr, partialMatrix, nq);
    auto rows = fagpu::OutputRowsOp::create(
        b, loc, oPartialPtr.getType(), b.getI64Type(), oPartialPtr,
        partialMatrix, nq, f32, /*heads=*/Value(), /*strides=*/ValueRange(),
        storedColumns());
    auto totals = fagpu::RowTotalsOp::create(
        b, loc, state.l.getType(), state.l.getType(), state.l,
        spec.widensKeyValues ? vDescaleOfTile : Value());
    fagpu::StoreRowsOp::create(b, loc, state.o, totals.getFactor(), row0, nq,
                               rows.getBase(), rows.getStride(), f32,
                               paddedColumns());
    fagpu::StoreLseOp::create(b, loc, state.m, totals.getTotal(), row0, nq,
                              lseRows, /*probs_scale=*/FloatAttr());
    return;
  }
  bool byTma = fagpu::storesOutputByTma(spec.epilogue);
  bool staged = fagpu::stagesOutput(spec.epilogue);
  // Staged rows copied where a block reaches past the sequence's end, the
  // whole blocks stored by TMA (oMap: takesOutputMap).
  Value blockMap = staged && !byTma ? oMap : Value();
  Value l = spec.rowSumMma()
                ? fagpu::RowPartialsOp::create(b, loc, rowsType, state.l)
                : state.l;
  Value lseRows;
  if (spec.writesLse)
    lseRows =
        fagpu::LseRowsOp::create(b, loc, lse.getType(), lse, qMatrix, rowEnd);
  Value heads = stridedMaps ? hq : Value();
  ValueRange strides = stridedMaps ? ValueRange(oStrides) : ValueRange();
  fagpu::OutputRowsOp rows;
  if (!staged)
    rows = fagpu::OutputRowsOp::create(b, loc, oPtr.getType(), b.getI64Type(),
                                       oPtr, qMatrix, rowEnd, half, heads,
                                       strides, storedColumns());
  auto totals = fagpu::RowTotalsOp::create(b, loc, l.getType(), l.getType(), l,
                                           vDescaleOfTile);
  Value factor = totals.getFactor();
  if (!staged) {
    fagpu::StoreRowsOp::create(b, loc, state.o, factor, row0, rowEnd,
                               rows.getBase(), rows.getStride(), half,
                               paddedColumns());
  } else {
    // The staging tile is free once the previous TMA store (or every
    // thread's copy) has read it.
    if (byTma || blockMap)
      fagpu::StoreWaitOp::create(b, loc);
    fagpu::StageOutputOp::create(b, loc, state.o, factor, staging,
                                 epilogueBarrier);
    if (byTma)
      fagpu::TmaStoreStagedOp::create(b, loc, staging, row0, qMatrix, oMap,
                                      heads, epilogueBarrier);
    else
      fagpu::CopyStagedRowsOp::create(b, loc, staging, row0, qMatrix, rowEnd,
                                      oPtr, heads, strides, epilogueBarrier,
                                      blockMap, paddedColumns());
  }
  if (spec.writesLse)
    fagpu::StoreLseOp::create(
        b, loc, state.m, totals.getTotal(), row0, rowEnd, lseRows,
        spec.probsScale > 0 ? b.getF32FloatAttr(spec.probsScale) : FloatAttr());
}

int64_t KernelBuilder::storedColumns() {
  return std::min(spec.outputColumns, spec.headDim);
}

IntegerAttr KernelBuilder::paddedColumns() {
  return spec.outputColumns < spec.headDim
             ? b.getI64IntegerAttr(spec.outputColumns)
             : IntegerAttr();
}

void KernelBuilder::finishPendingTile(const PendingTile &tile) {
  RowState state = rescaleState(tile.state, tile.last);
  Value vTile = waitStage(kvPipe, tile.vStage, tile.vParity, kValue);
  waitTurn();
  issueProducts(state, tile.last, vTile);
  passTurn();
  mmaWait(0);
  pinProducts(state);
  release(kvPipe, tile.vStage, kValue);
  storeTile(state, tile.row0, tile.qMatrix,
            stagingRows(tile.qBuffer ? tile.qBuffer : c32(0)), tile.rowEnd,
            tile.lse, tile.vDescale);
}

std::optional<KernelBuilder::PendingTile>
KernelBuilder::emitConsumerTile(const AttentionTile &tile, Value tileIndex,
                                const PendingTile *previous) {
  Value qStart = tile.qStart, qMatrix = tile.qMatrix;
  Value firstBlock = tile.firstBlock, unmaskedEnd = tile.unmaskedEnd,
        numBlocks = tile.numBlocks;
  Value row0 = threadRow0(qStart);
  // The previous tile (cross-tile pipeline) keeps its V descale; this
  // tile's scores take its own.
  useDescales(tile);
  // A paged cache: the block-table entries of the blocks this tile (or
  // split-KV chunk) reads, before its first score.
  if (int64_t pageSize = spec.inputs.pageSize)
    assertTilePages(tile, collectiveLane, pageSize);

  Value qBuffer = qBufferOf(tileIndex);
  qTile = fagpu::TileRowsOp::create(
      b, loc, consumerRowsType,
      waitStage(qPipe, qBuffer, qRoundOf(tileIndex), 0), consumer);

  // Prologue: S of the first block, its softmax (O is still zero). In the
  // cross-tile pipeline the previous tile's last P V goes to the tensor
  // cores behind it, as in the loop below.
  RowState state = initialState(tile);
  Value stage0 = stageOf(firstBlock);
  Value firstScale = scoresScale(firstBlock);
  fagpu::PipelineWaitOp::create(b, loc, kvPipe, stage0, parityOf(firstBlock),
                                kKey);
  waitTurn();
  Value s = issueScores(kvTile(stage0, kKey));
  // No branch may separate a wgmma from its wait: ptxas serializes every
  // wgmma of the kernel when other instructions (phi copies) touch the
  // accumulators in between. Hence the first tile is peeled.
  RowState previousState;
  if (previous) {
    previousState = rescaleState(previous->state, previous->last);
    Value vTile =
        waitStage(kvPipe, previous->vStage, previous->vParity, kValue);
    issueProducts(previousState, previous->last, vTile);
  }
  passTurn();
  // Softmax of S_0 under the previous tile's last P V.
  mmaWait(previous && spec.intraOverlap ? 1 : 0);
  s = pin(s);
  release(kvPipe, stage0, kKey);
  BlockStep first =
      softmax(s, state, /*masked=*/true, firstBlock, firstScale, row0, tile);
  if (previous) {
    mmaWait(0);
    pinProducts(previousState);
    release(kvPipe, previous->vStage, kValue);
    storeTile(previousState, previous->row0, previous->qMatrix,
              stagingRows(previous->qBuffer ? previous->qBuffer : c32(0)),
              previous->rowEnd, previous->lse, previous->vDescale);
    if (previous->qBuffer)
      releaseQAfterStore(previous->qBuffer);
  }

  // Loop state: O, m, l, P of the previous block, and its alpha (+ moved).
  auto pack = [&](const RowState &st, const BlockStep &step) {
    SmallVector<Value> v = {st.o, st.m, st.l, step.p, step.alpha};
    if (step.moved)
      v.push_back(step.moved);
    return v;
  };
  auto unpack = [&](ValueRange v, RowState &st, BlockStep &step) {
    st = {v[0], v[1], v[2]};
    step = {v[3], v[4], v.size() > 5 ? v[5] : Value()};
  };

  auto emitLoop = [&](Value begin, Value end, ValueRange init, bool masked,
                      bool maskMod = true) {
    auto loop = scf::ForOp::create(b, loc, begin, end, c32(1), init);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value j = loop.getInductionVar();
    RowState st;
    BlockStep prev;
    unpack(loop.getRegionIterArgs(), st, prev);
    Value stage = stageOf(j);
    Value prevJ = sub(j, c32(1));
    Value prevStage = stageOf(prevJ);
    Value scale = scoresScale(j);
    fagpu::PipelineWaitOp::create(b, loc, kvPipe, stage, parityOf(j), kKey);
    waitTurn();
    Value sj = issueScores(kvTile(stage, kKey));
    // O of the blocks before j - 1 moves to block j - 1's base, then
    // O += P_{j-1} V_{j-1} goes to the tensor cores behind S_j.
    st = rescaleState(st, prev);
    Value vTile = waitStage(kvPipe, prevStage, parityOf(prevJ), kValue);
    issueProducts(st, prev, vTile);
    passTurn();
    // Softmax of S_j under P_{j-1} V_{j-1} (intra-warpgroup overlap).
    mmaWait(spec.intraOverlap ? 1 : 0);
    sj = pin(sj);
    release(kvPipe, stage, kKey);
    BlockStep step = softmax(sj, st, masked, j, scale, row0, tile, maskMod);
    mmaWait(0);
    pinProducts(st);
    release(kvPipe, prevStage, kValue);
    scf::YieldOp::create(b, loc, pack(st, step));
    return SmallVector<Value>(loop.getResults());
  };
  Value second = add(firstBlock, c32(1));
  Value unmaskedBegin = arith::MaxUIOp::create(b, loc, second, firstBlock);
  Value unmaskedStop =
      arith::MaxUIOp::create(b, loc, unmaskedEnd, unmaskedBegin);
  SmallVector<Value> after;
  if (tile.fullFirst) {
    // A mask_mod's full blocks within the unmasked ones skip the mask_mod:
    // [begin, full first) and [full end, stop) evaluate it, between not.
    Value fullBegin =
        minu(arith::MaxUIOp::create(b, loc, tile.fullFirst, unmaskedBegin),
             unmaskedStop);
    Value fullStop = minu(
        arith::MaxUIOp::create(b, loc, tile.fullEnd, fullBegin), unmaskedStop);
    after = emitLoop(unmaskedBegin, fullBegin, pack(state, first), false);
    after = emitLoop(fullBegin, fullStop, after, false, /*maskMod=*/false);
    after = emitLoop(fullStop, unmaskedStop, after, false);
  } else {
    after = emitLoop(unmaskedBegin, unmaskedStop, pack(state, first), false);
  }
  after = emitLoop(unmaskedStop, numBlocks, after, true);

  // Epilogue: the last block's P V.
  BlockStep last;
  unpack(after, state, last);
  // Every S of the tile has retired (each loop iteration ends with
  // wait_group 0): Q is free, and a persistent producer loads the next
  // tile's Q under this tile's last P V and epilogue; unless O is staged
  // there (then after the store).
  if (!releasesQAfterStore())
    release(qPipe, qBuffer, 0);
  Value lastJ = sub(numBlocks, c32(1));
  Value lastStage = stageOf(lastJ);
  // Where the tile's rows go: in a varlen batch the sequence's rows of
  // batch row 0, up to its end; its LSE is [Hq, total_q], row qBase + r of
  // head h at h * total_q + qBase + r, which the store addresses as matrix
  // h of rowEnd rows from an LSE pointer moved by h * (total_q - rowEnd)
  // (>= 0: rowEnd <= total_q).
  Value storeRow0 = row0, storeMatrix = qMatrix, rowEnd, lse;
  if (cuSeqlensQPtr) {
    storeRow0 = add(tile.qBase, row0);
    storeMatrix = tile.qHead;
    rowEnd = add(tile.qBase, tile.nq);
    if (spec.writesLse)
      lse = gep(globalPtr, f32, lsePtr,
                ext64(mul(tile.qHead, sub(totalQ, rowEnd))));
  }
  if (spec.qBuffers == 2) {
    PendingTile pending;
    pending.state = state;
    pending.last = last;
    pending.vStage = lastStage;
    pending.vParity = parityOf(lastJ);
    pending.row0 = storeRow0;
    pending.qMatrix = storeMatrix;
    pending.rowEnd = rowEnd;
    pending.lse = lse;
    pending.vDescale = vDescale;
    if (releasesQAfterStore())
      pending.qBuffer = qBuffer;
    return pending;
  }
  state = rescaleState(state, last);
  Value vTile = waitStage(kvPipe, lastStage, parityOf(lastJ), kValue);
  waitTurn();
  issueProducts(state, last, vTile);
  passTurn();
  mmaWait(0);
  pinProducts(state);
  release(kvPipe, lastStage, kValue);
  storeTile(state, storeRow0, storeMatrix, stagingRows(qBuffer), rowEnd, lse);
  if (releasesQAfterStore())
    releaseQAfterStore(qBuffer);
  return std::nullopt;
}

AttentionTile KernelBuilder::chunkOf(AttentionTile tile) {
  IRArithmetic ir{b, loc};
  Value chunk = NVVM::BlockIdYOp::create(b, loc, i32);
  auto [begin, end] = mlir::fa::model::kvChunk(ir, tile.firstBlock,
                                               tile.numBlocks, chunk, kvSplits);
  // The chunk's blocks no mask touches: those of the whole range's.
  tile.unmaskedEnd = arith::MinUIOp::create(
      b, loc, arith::MaxUIOp::create(b, loc, tile.unmaskedEnd, begin), end);
  tile.firstBlock = begin;
  tile.numBlocks = end;
  return tile;
}

AttentionTile KernelBuilder::tileOf(Value id) {
  AttentionTile tile = decodeTile(id);
  if (!keyRangesPtr)
    return tile;
  // Every role decodes every tile the same way, so producer and consumers
  // agree on the narrowed range (and the ring's phases on its length).
  // Blocks outside [first key, end key) hold no key the mask lets through:
  // their P is 0, so leaving them out changes no row's m, l or O. Blocks
  // inside the hull are computed under the mask as before, but for the
  // whole blocks within [full first, full end), where the mask lets every
  // key through to every row: the consumers skip the mask_mod there.
  Value given = arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::ne,
      LLVM::PtrToIntOp::create(b, loc, b.getI64Type(), keyRangesPtr), c64(0));
  auto ifGiven = scf::IfOp::create(b, loc, TypeRange{i32, i32, i32, i32, i32},
                                   given, /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifGiven.thenBlock());
    Value entry = mul(add(mul(tile.qMatrix, queryBlocksOf(nq)),
                          divu(tile.qStart, c32(spec.blockR()))),
                      c32(4));
    // Negative keys count as 0; the ranges are intersected with the
    // tile's own, so no table entry moves a read past the sequence.
    auto key = [&](int64_t i) {
      return arith::MaxSIOp::create(
          b, loc, loadGlobalI32(keyRangesPtr, add(entry, c32(i))), c32(0));
    };
    Value bc = c32(spec.blockC);
    Value first =
        arith::MaxUIOp::create(b, loc, tile.firstBlock, divu(key(0), bc));
    Value end =
        minu(tile.numBlocks, divu(add(key(1), c32(spec.blockC - 1)), bc));
    // A tile whose mask lets no key through still runs one block (every
    // role's loops assume one), fully masked: its rows give O = 0 and an
    // LSE of -inf, as without the ranges.
    Value empty = ule(end, first);
    first = select(empty, tile.firstBlock, first);
    end = select(empty, add(tile.firstBlock, c32(1)), end);
    Value unmaskedEnd = minu(tile.unmaskedEnd, end);
    // The whole blocks of the full keys (the producer has no use for
    // them); the consumers clamp them to their unmasked blocks.
    Value fullFirst = end, fullEnd = end;
    if (!inProducer) {
      fullFirst = divu(add(key(2), c32(spec.blockC - 1)), bc);
      fullEnd = divu(key(3), bc);
    }
    scf::YieldOp::create(
        b, loc, ValueRange{first, end, unmaskedEnd, fullFirst, fullEnd});
    b.setInsertionPointToStart(ifGiven.elseBlock());
    scf::YieldOp::create(b, loc,
                         ValueRange{tile.firstBlock, tile.numBlocks,
                                    tile.unmaskedEnd, tile.numBlocks,
                                    tile.numBlocks});
  }
  tile.firstBlock = ifGiven.getResult(0);
  tile.numBlocks = ifGiven.getResult(1);
  tile.unmaskedEnd = ifGiven.getResult(2);
  tile.fullFirst = ifGiven.getResult(3);
  tile.fullEnd = ifGiven.getResult(4);
  return tile;
}

void KernelBuilder::emitSplitConsumerTile(const AttentionTile &tile,
                                          Value tileIndex) {
  auto ifAny =
      scf::IfOp::create(b, loc, ult(tile.firstBlock, tile.numBlocks), true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifAny.thenBlock());
    emitConsumerTile(tile, tileIndex, /*previous=*/nullptr);
    b.setInsertionPointToStart(ifAny.elseBlock());
    // No keys: O = 0 whatever V's descale (the then-branch's is not here).
    storeTile(initialState(), threadRow0(tile.qStart), tile.qMatrix, Value(),
              Value(), Value(), spec.widensKeyValues ? cf(1.0) : Value());
  }
  fagpu::MergeSplitsOp::create(
      b, loc, add(tile.qStart, mul(consumer, c32(kRowsPerConsumer))),
      tile.qMatrix, nq, kvSplits, mul(batches, hq), splitArrivalsPtr,
      oPartialPtr, lsePartialPtr, oPtr, half, spec.outputColumns,
      stridedMaps ? hq : Value(),
      stridedMaps ? ValueRange(oStrides) : ValueRange(),
      spec.writesLse ? lsePtr : Value());
}

void KernelBuilder::emitTileLoop(llvm::function_ref<SmallVector<Value>(
                                     const AttentionTile &, Value, ValueRange)>
                                     body,
                                 llvm::function_ref<void(ValueRange)> finish) {
  Value first = NVVM::BlockIdXOp::create(b, loc, i32);
  if (!spec.persistent) {
    // One tile per CTA (grid = tiles): the ring starts empty.
    AttentionTile tile = tileOf(first);
    if (spec.kvSplits)
      tile = chunkOf(tile);
    tileFirst = tile.firstBlock;
    if (cuSeqlensQPtr) {
      // A varlen batch: the grid covers the longest sequence's query
      // blocks; a tile past its own sequence's end has nothing to do.
      auto ifRows = scf::IfOp::create(b, loc, ult(tile.qStart, tile.nq), false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifRows.thenBlock());
      body(tile, c32(0), {});
      return;
    }
    body(tile, c32(0), {});
    return;
  }
  if (spec.dynamicTiles) {
    emitDynamicTileLoop(first, body, finish);
    return;
  }
  Value tiles = tileCount();
  Value step = NVVM::GridDimXOp::create(b, loc, i32);
  OpBuilder::InsertionGuard guard(b);
  // Loop state: the ring's phase bits, the tile count, the body's values
  // (the producer's varlen cursor first, where it keeps one).
  bool cursor = keepsVarlenCursor();
  SmallVector<Value> init = {c32(0), c32(0)};
  if (cursor)
    init.append({c32(0), c32(0)});
  if (finish) {
    assert(!cursor && "the producer has no peeled tile");
    auto ifAny = scf::IfOp::create(b, loc, ult(first, tiles), false);
    b.setInsertionPointToStart(ifAny.thenBlock());
    phaseBits = c32(0);
    SmallVector<Value> after = emitLoopTile(first, c32(0), {}, body);
    init = {after[0], c32(1)};
    init.append(after.begin() + 1, after.end());
    first = add(first, step);
  }
  auto loop = scf::ForOp::create(b, loc, first, tiles, step, init);
  {
    OpBuilder::InsertionGuard inLoop(b);
    b.setInsertionPointToStart(loop.getBody());
    ValueRange args = loop.getRegionIterArgs();
    phaseBits = args[0];
    Value tileIndex = args[1];
    if (cursor)
      std::tie(cursorSeq, cursorPrefix) = std::make_pair(args[2], args[3]);
    SmallVector<Value> after =
        emitLoopTile(loop.getInductionVar(), tileIndex,
                     args.drop_front(cursor ? 4 : 2), body);
    SmallVector<Value> yielded = {after[0], add(tileIndex, c32(1))};
    if (cursor)
      yielded.append({cursorSeq, cursorPrefix});
    yielded.append(after.begin() + 1, after.end());
    scf::YieldOp::create(b, loc, yielded);
  }
  phaseBits = cursorSeq = cursorPrefix = Value();
  if (finish)
    finish(loop.getResults().drop_front(2));
}

// Dynamic scheduler. Causal tiles are dealt head-major, each head's longest
// first (decodeTile), to whichever CTA is free next: the first tile of CTA
// c is c, later ones come from a global counter, fetched by the producer
// as gridDim.x + atomicAdd(counter, 1) once it has issued the loads of the
// tile before: a CTA claims a tile when its ring has room for it. A static
// deal of unequal tiles leaves CTAs idle; greedy dealing is what the
// hardware does for one tile per CTA. (The measurements behind both
// choices: docs/hopper.md.)
//
// The counter is zero at launch and the kernel leaves it zero: every CTA
// with a tile fetches until it gets an id past the last tile, so a launch
// of T tiles fetches exactly T times (T - gridDim tiles plus one end per
// CTA) and the fetch that returns T - 1 is the last; that producer resets
// the counter. The next launch on the stream then finds it zero again.
void KernelBuilder::emitDynamicTileLoop(
    Value first,
    llvm::function_ref<SmallVector<Value>(const AttentionTile &, Value,
                                          ValueRange)>
        body,
    llvm::function_ref<void(ValueRange)> finish) {
  Value tiles = tileCount();
  OpBuilder::InsertionGuard guard(b);
  auto ifAny = scf::IfOp::create(b, loc, ult(first, tiles), false);
  b.setInsertionPointToStart(ifAny.thenBlock());
  // Loop state: the tile id, the ring's phase bits, the tile count, the
  // body's values (the producer's varlen cursor first, where it keeps one).
  bool cursor = keepsVarlenCursor();
  SmallVector<Value> init = {first, c32(0), c32(0)};
  if (cursor)
    init.append({c32(0), c32(0)});
  if (finish) {
    assert(!cursor && "the producer has no peeled tile");
    phaseBits = c32(0);
    SmallVector<Value> after = emitLoopTile(first, c32(0), {}, body);
    init = {nextTile(c32(1)), after[0], c32(1)};
    init.append(after.begin() + 1, after.end());
  }
  SmallVector<Type> types;
  for (Value v : init)
    types.push_back(v.getType());
  SmallVector<Location> locs(init.size(), loc);
  auto loop = scf::WhileOp::create(b, loc, types, init);
  {
    OpBuilder::InsertionGuard inLoop(b);
    Block *before = b.createBlock(&loop.getBefore(), {}, types, locs);
    scf::ConditionOp::create(b, loc, ult(before->getArgument(0), tiles),
                             before->getArguments());
    Block *after = b.createBlock(&loop.getAfter(), {}, types, locs);
    phaseBits = after->getArgument(1);
    Value tileIndex = after->getArgument(2);
    if (cursor)
      std::tie(cursorSeq, cursorPrefix) =
          std::make_pair(after->getArgument(3), after->getArgument(4));
    SmallVector<Value> done =
        emitLoopTile(after->getArgument(0), tileIndex,
                     after->getArguments().drop_front(cursor ? 5 : 3), body);
    Value nextIndex = add(tileIndex, c32(1));
    SmallVector<Value> yielded = {nextTile(nextIndex), done[0], nextIndex};
    if (cursor)
      yielded.append({cursorSeq, cursorPrefix});
    yielded.append(done.begin() + 1, done.end());
    scf::YieldOp::create(b, loc, yielded);
  }
  phaseBits = cursorSeq = cursorPrefix = Value();
  if (finish)
    finish(loop.getResults().drop_front(3));
  if (inProducer)
    announceEnd(loop.getResult(0), loop.getResult(2));
}

SmallVector<Value> KernelBuilder::emitLoopTile(
    Value id, Value tileIndex, ValueRange carried,
    llvm::function_ref<SmallVector<Value>(const AttentionTile &, Value,
                                          ValueRange)>
        body) {
  AttentionTile tile = tileOf(id);
  tileFirst = tile.firstBlock;
  SmallVector<Value> next = body(tile, tileIndex, carried);
  SmallVector<Value> after = {fagpu::PipelineAdvancePhasesOp::create(
      b, loc, kvPipe, phaseBits, sub(tile.numBlocks, tile.firstBlock))};
  after.append(next.begin(), next.end());
  return after;
}

Value KernelBuilder::nextTile(Value tileIndex) {
  if (!inProducer) {
    Value buffer = qBufferOf(tileIndex);
    fagpu::PipelineWaitOp::create(b, loc, qPipe, buffer, qRoundOf(tileIndex),
                                  0);
    return fagpu::ReceiveTileOp::create(b, loc, i32, tileSlot(buffer));
  }
  return fagpu::FetchTileOp::create(b, loc, i32, tileCounterPtr, tileCount());
}

Value KernelBuilder::claimQBuffer(Value tileIndex, Value id) {
  // The Q buffer is free once the consumers finished its previous tile.
  Value buffer = qBufferOf(tileIndex);
  fagpu::PipelineAcquireOp::create(
      b, loc, qPipe, buffer,
      arith::XOrIOp::create(b, loc, qRoundOf(tileIndex), c32(1)), 0);
  if (spec.dynamicTiles)
    fagpu::PublishTileOp::create(b, loc, id, tileSlot(buffer));
  return buffer;
}

void KernelBuilder::announceEnd(Value endId, Value tileIndex) {
  Value buffer = claimQBuffer(tileIndex, endId);
  fagpu::PipelineCommitOp::create(b, loc, qPipe, buffer, 0);
}

LLVM::LLVMFuncOp KernelBuilder::build(gpu::GPUModuleOp module) {
  OpBuilder::InsertionGuard guard(b);
  LLVM::LLVMFuncOp fn = beginKernel(module, spec.kernelName(), spec.threads(),
                                    spec.ctasPerSM, spec.abi);
  if (spec.persistent && spec.inputs.varlen)
    dealVarlenRealTiles();
  qDescalePtr = kernelArgument(fn, spec.abi, "q_descale");
  kDescalePtr = kernelArgument(fn, spec.abi, "k_descale");
  vDescalePtr = kernelArgument(fn, spec.abi, "v_descale");
  sinksPtr = kernelArgument(fn, spec.abi, "sinks");
  keyRangesPtr = kernelArgument(fn, spec.abi, "key_ranges");
  for (int64_t i = 0; i < spec.captures; ++i)
    capturePtrs.push_back(
        kernelArgument(fn, spec.abi, "capture" + std::to_string(i)));
  descaleLayout = kernelArgument(fn, spec.abi, "descale_layout");
  tid = NVVM::ThreadIdXOp::create(b, loc, i32);
  // Stating that the warpgroup index is warp-uniform (a shuffle from lane
  // 0) lets ptxas keep the consumer's Q descriptors in uniform registers
  // instead of moving them (R2UR) before each wgmma. The persistent kernel's
  // tile loop needs it; the one-tile kernel measured slower with it
  // (docs/hopper.md), so only the persistent kernel states it.
  Value group = divu(tid, c32(128));
  if (spec.persistent)
    group = warpUniform(group);
  Value inGroup = remu(tid, c32(128));
  warpInGroup = divu(inGroup, c32(32));
  Value lane = remu(tid, c32(32));
  g = divu(lane, c32(4));

  // The Q buffers and the K/V ring: "full" barriers take one producer
  // arrival (+ TMA bytes), "empty" ones one arrival per consumer warp.
  int64_t warpArrivals = 4 * spec.consumers;
  MLIRContext *ctx = b.getContext();
  qPipe = fagpu::CreatePipelineOp::create(
      b, loc, fagpu::PipelineType::get(ctx, spec.qBuffers, 1, qTileType),
      spec.barrierOffset(), /*tile_offset=*/0);
  kvPipe = fagpu::CreatePipelineOp::create(
      b, loc,
      fagpu::PipelineType::get(ctx, spec.kvStages(), 2, kvTileType,
                               /*fillOnce=*/false,
                               valueTileType != kvTileType
                                   ? valueTileType
                                   : fagpu::SharedTileType()),
      spec.barrierOffset() + 8 * 2 * spec.qBuffers, spec.kOffset(0));
  if (spec.hasStagingTile())
    stagingTile =
        fagpu::SharedTileOp::create(b, loc, qTileType, spec.oStageOffset());
  SmallVector<Value> pipelines = {qPipe, kvPipe};
  if (spec.widensKeyValues) {
    cachePipe = fagpu::CreatePipelineOp::create(
        b, loc, fagpu::PipelineType::get(ctx, spec.stages, 2, cacheTileType),
        spec.cacheRingBarrierOffset(), spec.cacheRingOffset());
    pipelines.push_back(cachePipe);
  }
  fagpu::InitPipelinesOp::create(b, loc, pipelines, warpArrivals);

  // The V widener is the warpgroup after the consumers, at their
  // registers.
  auto roles = fagpu::WarpSpecializeOp::create(
      b, loc, group, spec.consumers + (spec.valueWidener ? 1 : 0),
      spec.producerRegisters, spec.consumerRegisters);
  {
    OpBuilder::InsertionGuard g2(b);
    b.createBlock(&roles.getProducer());
    emitProducer();
    Block *consumerBlock =
        b.createBlock(&roles.getConsumer(), {}, {i32}, {loc});
    Value index = consumerBlock->getArgument(0);
    if (!spec.valueWidener) {
      emitConsumer(index);
    } else {
      auto ifWidener = scf::IfOp::create(b, loc, eq(index, c32(spec.consumers)),
                                         /*withElse=*/true);
      b.setInsertionPointToStart(ifWidener.thenBlock());
      emitValueWidener();
      b.setInsertionPointToStart(ifWidener.elseBlock());
      emitConsumer(index);
    }
  }
  LLVM::ReturnOp::create(b, loc, ValueRange{});
  return fn;
}

} // namespace mlir::fa::sm90

namespace {

/// The kernel `op`'s schedule describes, or a diagnostic naming what the
/// sm_90a kernel cannot do and which pass sets the missing piece.
FailureOr<KernelSpec> specOf(fagpu::AttentionOp op) {
  SpecReader<KernelSpec> reader{op, "sm_90a wgmma"};
  reader.takesKVCaches = true;
  if (failed(reader.begin()))
    return failure();
  auto fail = [&](const Twine &why) { return reader.fail(why); };
  KernelSpec &spec = reader.spec;
  const fagpu::ScheduleFields &s = reader.schedule;
  int64_t d = op.getHeadDim();
  spec.fp8 = op.isFP8();
  // An e4m3 K/V beside a 16-bit Q: the producer warpgroup widens the
  // cache's tiles into the 16-bit ring (docs/fp8.md).
  bool widens = op.hasFP8KeyValues();
  if (widens) {
    if (s.scheduler != fagpu::TileScheduler::Single)
      return fail("an e4m3 K/V cache's kernel runs one tile per CTA (its "
                  "producer warpgroup widens one tile's blocks): no "
                  "persistent scheduler");
    if (fagpu::sm90TileHeadDim(d) % 128 != 0)
      return fail("an e4m3 K/V cache needs whole 128-byte rows of codes "
                  "in its tiles (D of 65 to 128 or 193 to 256), got D = " +
                  Twine(d));
    // One descale_layout for both: K's and V's of one rank.
    if (cast<MemRefType>(op.getKDescale().getType()).getRank() !=
        cast<MemRefType>(op.getVDescale().getType()).getRank())
      return fail("an e4m3 K/V cache's descales must be laid out alike (one "
                  "each, or [B, Hkv] each)");
    if (s.producerRegisters < fagpu::kWideningProducerRegisters)
      return fail("the producer warpgroup that widens an e4m3 cache needs " +
                  Twine(fagpu::kWideningProducerRegisters) +
                  " registers or more: run fagpu-warp-specialize");
  }
  if (spec.fp8) {
    if (std::optional<std::string> why = fagpu::checkFP8Tiles(d, s.blockC))
      return fail(*why);
    if (s.epilogue != fagpu::Epilogue::Registers)
      return fail("e4m3 kernels store O from registers: run "
                  "fagpu-tma-store-epilogue");
    if (s.kvSplits)
      return fail("e4m3 kernels have no split-KV form yet");
  }
  // The tiles' head dim, D padded to whole 64-column blocks (the layout's
  // headDim); the tensor maps and the stores keep D.
  static_cast<fagpu::SM90Layout &>(spec) =
      fagpu::sm90Layout(d, s, spec.fp8 ? 1 : 2, widens);
  spec.keyColumns = d;
  spec.outputColumns = op.getValueHeadDim();
  if (s.blockR != s.consumers * kRowsPerConsumer || s.consumers < 1 ||
      s.consumers > 3)
    return fail("block_r must be 64, 128 or 192 (one, two or three consumer "
                "warpgroups of 64 rows), got " +
                Twine(s.blockR));
  if (s.consumers == 3 && spec.headDim != 64)
    return fail("block_r = 192 needs D = 64 (three consumers get 160 "
                "registers each; at D = 128 their S, O and P spill)");
  if (s.consumers == 1 && spec.headDim > 128)
    return fail("block_r = 64 needs D <= 128 (with two CTAs per SM the "
                "kernel launches with 128 registers per thread, and ptxas "
                "cannot fit D = 256's 128 accumulators of P V)");
  if (s.blockC % 16 != 0 || s.blockC < 16 || s.blockC > 256)
    return fail("block_c must be a multiple of 16 in [16, 256], got " +
                Twine(s.blockC));
  if (!s.producerRegisters)
    return fail("the kernel needs producer and consumer warp roles: run "
                "fagpu-warp-specialize");
  if (s.stages < 2 || s.stages > 4)
    return fail("the kernel needs a K/V ring of 2 to 4 stages, got " +
                Twine(s.stages) + ": run fagpu-pipeline-kv");
  if (spec.sharedBytes() > fagpu::maxSharedBytes(s.ctasPerSm))
    return fail("the schedule needs " + Twine(spec.sharedBytes()) +
                " bytes of shared memory, more than " +
                Twine(fagpu::maxSharedBytes(s.ctasPerSm) / 1024) + " KiB");
  spec.ctasPerSM = s.ctasPerSm;
  spec.firstRowOnly = s.maxRows == 8;
  spec.bf16 = op.isBF16();
  spec.pingPong = s.pingPong;
  spec.intraOverlap = s.overlapSoftmax;
  spec.persistent = s.scheduler != fagpu::TileScheduler::Single;
  spec.producerRegisters = s.producerRegisters;
  spec.consumerRegisters = s.consumerRegisters;
  if (s.kvSplits && (spec.persistent || fagpu::stagesOutput(spec.epilogue)))
    return fail("a split-KV kernel runs one tile per CTA and stores its "
                "partial O from registers (no persistent scheduler, no TMA "
                "store)");
  spec.kvSplits = s.kvSplits;
  if (s.rowSumMma && (!spec.fp8 || s.kvSplits))
    return fail("row sums by MMA are for e4m3 kernels without split-KV "
                "(an e4m3 P against an e4m3 ones column)");
  if (s.rowSumMma && spec.writesLse)
    return fail(fagpu::kRowSumMmaLseWhy);
  spec.noRowSum = spec.rowSumMma();
  spec.inputs.keyLengths = static_cast<bool>(op.getKvLengths());
  spec.inputs.pageSize = op.getPageSize();
  spec.inputs.varlen = static_cast<bool>(op.getCuSeqlensQ());
  spec.inputs.narrowValues = spec.outputColumns != spec.keyColumns;
  if (spec.inputs.varlen &&
      (fagpu::storesOutputByTma(spec.epilogue) || s.kvSplits))
    return fail("a varlen kernel stores O from registers or through a "
                "staging tile (staged_copy: whole blocks by TMA, a sequence's "
                "last block by copied rows), not by TMA boxes alone, and has "
                "no split-KV");
  if (spec.persistent && s.epilogue == fagpu::Epilogue::StagedCopyInQ)
    return fail("rows copied from the Q buffer need a one-tile CTA (a "
                "persistent producer refills the buffer)");
  if (int64_t page = spec.inputs.pageSize;
      page && page % s.blockC != 0 && (s.blockC % page != 0 || page % 8 != 0))
    return fail("a K/V block (block_c = " + Twine(s.blockC) +
                ") must lie in one page of " + Twine(page) +
                " rows or span whole pages of a multiple of 8 rows");
  StringRef outDtype = spec.bf16 ? "bf16" : "f16";
  if (spec.fp8) {
    spec.inputs.outputDtype = outDtype.str();
    spec.inputs.headDim = d;
  }
  if (widens)
    spec.inputs.keyValueDtype = "e4m3";
  // One consumer: a warpgroup of its own widens V beside the producer's K.
  spec.valueWidener = widens && spec.consumers == 1;
  spec.abi = fagpu::kernelParams(fagpu::Target::sm_90a, s,
                                 spec.fp8 ? "e4m3" : outDtype, spec.inputs);
  if (op.getSinks()) {
    // One sink per row: the first split-KV chunk's only, and the row's own
    // query head's.
    if (s.kvSplits || s.queryGroup || s.rowSumMma)
      return fail("attention sinks have no split-KV, packed-head or "
                  "row-sum-MMA form yet");
    fagpu::KernelParam param;
    param.name = "sinks";
    param.kind = fagpu::ParamKind::Pointer;
    param.dtype = "f32";
    param.shape = {"Hq"};
    spec.abi.push_back(param);
    spec.sinks = true;
  }
  if (op.hasModifications()) {
    if (s.queryGroup)
      return fail("score_mod and mask_mod see each row's query head: packed "
                  "query heads (query_group) have no form for them");
    // Each capture a pointer parameter, after the attention's own.
    static_cast<KernelModifications &>(spec) =
        KernelModifications::of(op, spec.abi);
    if (spec.maskMod) {
      // Block sparsity from the mask at run time: per query tile of B_r
      // rows, [first key, end key) of the keys its mask_mod may let
      // through and [full first, full end) of keys it lets through to
      // every row (flashmlir.create_block_mask); null: every block, each
      // under the mask.
      fagpu::KernelParam param;
      param.name = "key_ranges";
      param.kind = fagpu::ParamKind::Pointer;
      param.dtype = "i32";
      param.shape = {"B", "Hq", "ceil(Nq / block_r)", "4"};
      spec.abi.push_back(param);
      spec.keyRanges = true;
    }
  }
  return spec;
}

} // namespace

LogicalResult mlir::fa::buildSM90Kernels(ModuleOp module) {
  auto build = [](OpBuilder &b, Location loc, const KernelSpec &spec,
                  gpu::GPUModuleOp kernels) {
    LLVM::LLVMFuncOp kernel = KernelBuilder(b, loc, spec).build(kernels);
    if (spec.fp8) {
      // V^T for the P V product, made before the attention by a kernel of
      // the same module; the launch metadata names it.
      std::string layout = sm90ValueLayoutKernelName(spec.headDim);
      if (!kernels.lookupSymbol(layout))
        buildSM90ValueLayoutKernel(b, loc, kernels, spec.headDim, layout);
      kernel->setAttr("fagpu.value_layout", b.getStringAttr(layout));
    }
    if (spec.inputs.keyLengths && spec.keyColumns == spec.outputColumns &&
        spec.keyColumns % fagpu::kKVAppendColumnsPerThread == 0) {
      // The new keys and values a KV-cache call brings, written into the
      // cache by a kernel of the same module before the attention; the
      // launch metadata names it.
      bool e4m3Cache = spec.inputs.keyValueDtype == "e4m3";
      std::string append =
          sm90KVAppendKernelName(spec.keyColumns, spec.bf16, e4m3Cache);
      if (!kernels.lookupSymbol(append))
        buildSM90KVAppendKernel(b, loc, kernels, spec.keyColumns, spec.bf16,
                                e4m3Cache, append);
      kernel->setAttr("fagpu.kv_append", b.getStringAttr(append));
    }
    return kernel;
  };
  auto launch = [](fagpu::AttentionOp op, LLVM::LLVMFuncOp kernel,
                   const KernelSpec &spec) {
    TensorMapLaunch launch{spec.outputColumns, spec.blockR(),
                           spec.bf16,          spec.threads(),
                           spec.sharedBytes(), spec.abi,
                           spec.kvSplits,      /*valueLayoutKernel=*/{}};
    std::string layout;
    if (spec.fp8) {
      layout = sm90ValueLayoutKernelName(spec.headDim);
      launch.valueLayoutKernel = layout;
    }
    replaceWithTensorMapLaunch(op, kernel, launch);
  };
  return lowerEachKernel<KernelSpec>(module, fagpu::Target::sm_90a, specOf,
                                     build, launch);
}
