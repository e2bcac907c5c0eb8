//===- SM90Producer.cpp - the sm_90a kernel's producer warpgroup ---------===//
//
// The producer role of the FlashAttention-3 kernel (SM90Kernel.cpp): one
// thread of warpgroup 0 issues the TMA loads of Q and of the K/V ring; with
// an e4m3 cache the warpgroup widens the cache's tiles into 16-bit ones.
//
//===----------------------------------------------------------------------===//

#include "SM90KernelBuilder.h"

#include "fa/Model/KVChunk.h"

#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::fa;

namespace mlir::fa::sm90 {

void KernelBuilder::emitProducer() {
  if (spec.widensKeyValues) {
    emitWideningProducer();
    return;
  }
  // One thread issues every load; the rest of the warpgroup is done.
  auto ifIssuer = scf::IfOp::create(b, loc, eq(tid, c32(0)), false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifIssuer.thenBlock());
  prefetchTensorMaps();
  emitLoadingTileLoop([&](const AttentionTile &tile, Value tileIndex) {
    emitProducerTile(tile, tileIndex);
  });
}

void KernelBuilder::emitLoadingTileLoop(
    llvm::function_ref<void(const AttentionTile &, Value)> perTile) {
  inProducer = true;
  // The consumers assert the tiles' lengths, prefix sums and block-table
  // entries (every role decodes every tile; one role checking is enough,
  // and the producer's one issuing thread would check them alone).
  assertsTileInputs = false;
  emitTileLoop([&](const AttentionTile &tile, Value tileIndex, ValueRange) {
    if (!spec.kvSplits) {
      perTile(tile, tileIndex);
      return SmallVector<Value>();
    }
    auto ifAny =
        scf::IfOp::create(b, loc, ult(tile.firstBlock, tile.numBlocks), false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifAny.thenBlock());
    perTile(tile, tileIndex);
    return SmallVector<Value>();
  });
  inProducer = false;
}

void KernelBuilder::emitWideningProducer() {
  // The whole warpgroup decodes the tile (one CTA per tile: specOf) and
  // widens its blocks; one thread issues the loads.
  {
    auto ifIssuer = scf::IfOp::create(b, loc, eq(tid, c32(0)), false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifIssuer.thenBlock());
    prefetchTensorMaps();
  }
  emitLoadingTileLoop([&](const AttentionTile &tile, Value tileIndex) {
    emitWideningProducerTile(tile, tileIndex);
  });
}

void KernelBuilder::emitValueWidener() {
  Value first = eq(remu(tid, c32(128)), c32(0));
  emitLoadingTileLoop([&](const AttentionTile &tile, Value) {
    OpBuilder::InsertionGuard guard(b);
    auto loop =
        scf::ForOp::create(b, loc, tile.firstBlock, tile.numBlocks, c32(1));
    b.setInsertionPointToStart(loop.getBody());
    Value j = loop.getInductionVar();
    auto cache = cachePosition(j);
    Value cached = cache.getStage();
    Value stage = stageOf(j);
    Value parity = parityOf(j, /*producer=*/true);
    fagpu::PipelineWaitOp::create(b, loc, cachePipe, cached, cache.getParity(),
                                  kValue);
    fagpu::PipelineAcquireOp::create(b, loc, kvPipe, stage, parity, kValue);
    Value codes = fagpu::PipelineTileOp::create(b, loc, cacheTileType,
                                                cachePipe, cached, kValue);
    fagpu::WidenTileOp::create(b, loc, codes, kvTile(stage, kValue),
                               c32(kWidenValuesBarrier));
    // The warpgroup's reads of the cache stage are done: its V half back
    // to the issuer, and the widened tile to the consumer.
    fagpu::PipelineReleaseOp::create(b, loc, cachePipe, cached, kValue);
    auto ifFirst = scf::IfOp::create(b, loc, first, false);
    b.setInsertionPointToStart(ifFirst.thenBlock());
    fagpu::PipelineCommitOp::create(b, loc, kvPipe, stage, kValue);
  });
}

void KernelBuilder::emitProducerTile(const AttentionTile &tile,
                                     Value tileIndex) {
  Value buffer = claimQBuffer(tileIndex, tile.id);
  fagpu::TmaLoadOp::create(b, loc, qMap, queryMapRow(tile, tile.qStart),
                           queryMatrix(tile), qPipe, buffer, 0, Value());
  OpBuilder::InsertionGuard guard(b);
  auto loop =
      scf::ForOp::create(b, loc, tile.firstBlock, tile.numBlocks, c32(1));
  b.setInsertionPointToStart(loop.getBody());
  Value j = loop.getInductionVar();
  Value stage = stageOf(j);
  // A stage is free once both consumers released it in the previous round.
  Value parity = parityOf(j, /*producer=*/true);
  loadKeyValueBlock(tile, j, kvPipe, stage, /*acquireKey=*/true,
                    /*acquireValue=*/true, parity);
}

void KernelBuilder::loadKeyValueBlock(const AttentionTile &tile, Value j,
                                      Value pipe, Value stage, bool acquireKey,
                                      bool acquireValue, Value parity) {
  auto acquireBuffer = [&](int64_t buffer) {
    if (buffer == kKey ? acquireKey : acquireValue)
      fagpu::PipelineAcquireOp::create(b, loc, pipe, stage, parity, buffer);
  };
  int64_t pageSize = spec.inputs.pageSize;
  Value firstKey = mul(j, c32(spec.blockC));
  if (pageSize && pageSize < spec.blockC) {
    // Pages shorter than the block: its B_c / page_size pages, read from
    // the block table before the stage is free (off the ring's critical
    // path), gathered into one tile.
    // The last block of a sequence may reach past its table row: those
    // pages are -1, outside the map, which the TMA fills with zeros (and
    // the mask hides).
    SmallVector<Value> pages;
    Value rowStart = mul(tile.batch, maxPages);
    Value firstPage = divu(firstKey, c32(pageSize));
    for (int64_t i = 0; i < spec.blockC / pageSize; ++i) {
      Value index = add(firstPage, c32(i));
      Value inRow = ult(index, maxPages);
      Value entry = add(rowStart, select(inRow, index, c32(0)));
      Value page = loadGlobalI32(blockTablePtr, entry);
      pages.push_back(select(inRow, page, c32(-1)));
    }
    for (int64_t buffer : {kKey, kValue}) {
      acquireBuffer(buffer);
      fagpu::TmaLoadPagesOp::create(b, loc, buffer == kKey ? kMap : vMap,
                                    c32(0), tile.kvHead, pages, pipe, stage,
                                    buffer, pageSize);
    }
    return;
  }
  // The block's row and matrix in the K/V maps (in a paged cache its page,
  // read from the block table before the stage is free, so that the read
  // is off the ring's critical path).
  auto [row, matrix] = keyValueRow(tile, firstKey, pageSize);
  for (int64_t buffer : {kKey, kValue}) {
    acquireBuffer(buffer);
    if (spec.fp8 && buffer == kValue) {
      // V^T [D, Nk_16]: all D rows, the block's keys as columns.
      fagpu::TmaLoadOp::create(b, loc, vMap, c32(0), matrix, pipe, stage,
                               buffer, /*column=*/firstKey);
      continue;
    }
    fagpu::TmaLoadOp::create(b, loc, buffer == kKey ? kMap : vMap, row, matrix,
                             pipe, stage, buffer, Value());
  }
}

void KernelBuilder::emitWideningProducerTile(const AttentionTile &tile,
                                             Value tileIndex) {
  Value issuer = eq(tid, c32(0));
  auto onIssuer = [&](llvm::function_ref<void()> emit) {
    auto ifIssuer = scf::IfOp::create(b, loc, issuer, false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifIssuer.thenBlock());
    emit();
  };
  onIssuer([&] {
    Value buffer = claimQBuffer(tileIndex, tile.id);
    fagpu::TmaLoadOp::create(b, loc, qMap, queryMapRow(tile, tile.qStart),
                             queryMatrix(tile), qPipe, buffer, 0, Value());
  });
  // Block j of the tile (i = j - first) lands in stage i mod S of the
  // cache ring, in round i / S. The issuer keeps S - 1 blocks ahead of the
  // warpgroup's widening: it loads block j + S - 1 into the stage block
  // j - 1 left, which the barrier closing that block's widening freed (the
  // cache ring's empty barriers are not used: its only readers are the
  // threads of the issuer's own warpgroup).
  int64_t cacheStages = spec.stages;
  // Where the V widener reads V, the V half of a cache stage is free once
  // it released it.
  auto loadIfInTile = [&](Value j) {
    auto ifInTile = scf::IfOp::create(b, loc, ult(j, tile.numBlocks), false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifInTile.thenBlock());
    Value freeParity = cachePosition(j, /*producer=*/true).getParity();
    loadKeyValueBlock(tile, j, cachePipe, cachePosition(j).getStage(),
                      /*acquireKey=*/false,
                      /*acquireValue=*/spec.valueWidener, freeParity);
  };
  onIssuer([&] {
    for (int64_t ahead = 0; ahead + 1 < cacheStages; ++ahead)
      loadIfInTile(add(tile.firstBlock, c32(ahead)));
  });
  OpBuilder::InsertionGuard guard(b);
  auto loop =
      scf::ForOp::create(b, loc, tile.firstBlock, tile.numBlocks, c32(1));
  b.setInsertionPointToStart(loop.getBody());
  Value j = loop.getInductionVar();
  onIssuer([&] { loadIfInTile(add(j, c32(cacheStages - 1))); });
  auto cache = cachePosition(j);
  Value cached = cache.getStage(), cachedParity = cache.getParity();
  Value stage = stageOf(j);
  Value parity = parityOf(j, /*producer=*/true);
  SmallVector<int64_t> widened = {kKey};
  if (!spec.valueWidener)
    widened.push_back(kValue);
  for (int64_t buffer : widened) {
    fagpu::PipelineWaitOp::create(b, loc, cachePipe, cached, cachedParity,
                                  buffer);
    fagpu::PipelineAcquireOp::create(b, loc, kvPipe, stage, parity, buffer);
    Value codes = fagpu::PipelineTileOp::create(b, loc, cacheTileType,
                                                cachePipe, cached, buffer);
    fagpu::WidenTileOp::create(b, loc, codes, kvTile(stage, buffer),
                               c32(kWidenBarrier));
    // After the warpgroup's barrier every thread's writes are fenced for
    // the async proxy: one arrival hands the tile to the consumers.
    onIssuer([&] {
      fagpu::PipelineCommitOp::create(b, loc, kvPipe, stage, buffer);
    });
  }
}

} // namespace mlir::fa::sm90
