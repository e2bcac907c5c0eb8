//===- SM90KernelBuilder.h - the sm_90a kernel builder ----------*- C++ -*-===//
//
// The FlashAttention-3 kernel builder of SM90Kernel.cpp (which describes the
// kernel) and SM90Producer.cpp (its producer warpgroup): the kernel's spec,
// the consumer's row state and the builder's members.
//
//===----------------------------------------------------------------------===//

#ifndef FA_LIB_CONVERSION_FAGPUTONVVM_SM90KERNELBUILDER_H
#define FA_LIB_CONVERSION_FAGPUTONVVM_SM90KERNELBUILDER_H

#include "KernelLowerings.h"

#include "../Common/TMAKernel.h"
#include "fa/Dialect/FAGPU/IR/Heuristics.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

#include <functional>

namespace mlir::fa::sm90 {

using fagpu::kRowsPerConsumer;             // wgmma M
constexpr int64_t kPingPongBarrier = 1;    // named barriers 1 .. consumers
constexpr int64_t kEpilogueBarrier = 4;    // 4 + c: consumer c's four warps
constexpr int64_t kWidenBarrier = 8;       // the producer warpgroup's 128
constexpr int64_t kWidenValuesBarrier = 9; // the V widener's 128

/// What the generated kernel is specialised for: the mask and FA4 choices
/// (SoftmaxConfig), the shared-memory layout (fagpu::SM90Layout), the
/// score_mod / mask_mod (KernelModifications), and the rest of the
/// #fagpu.schedule.
struct KernelSpec : SoftmaxConfig, fagpu::SM90Layout, KernelModifications {
  // Resident CTAs per SM: 2 with one consumer (B_r = 64), whose registers
  // and shared memory leave room for a second CTA; its prologue and
  // epilogue then run under the other's GEMMs.
  int64_t ctasPerSM = 1;
  /// O (and, but for e4m3, Q/K/V) in bf16, else f16.
  bool bf16 = false;
  /// e4m3 Q, K and V (elementBytes 1) with per-tensor descales; V read as
  /// the V^T the layout kernel writes.
  bool fp8 = false;
  bool pingPong = true;
  bool intraOverlap = true;
  bool persistent = false;
  int64_t producerRegisters = 24;
  int64_t consumerRegisters = 240;
  /// Split-KV: the IR launch's chunk count (0: no split).
  int64_t kvSplits = 0;
  /// A KV cache: per-sequence key counts, and the rows per page of a paged
  /// K/V (0: contiguous).
  fagpu::KernelInputs inputs;
  /// The kernel's parameters, in launch order.
  SmallVector<fagpu::KernelParam> abi;
  /// The attention's head dims: Q's and K's columns (D), and V's and O's
  /// (Dv, at most D). headDim, the tiles', is D padded to whole 64-column
  /// blocks; the TMA zero-fills the columns past each tensor's own.
  int64_t keyColumns = 0, outputColumns = 0;

  /// An e4m3 cache read by one consumer: a warpgroup of its own widens V
  /// while the producer's widens K (SM90Layout::widensKeyValues).
  bool valueWidener = false;

  /// Attention sinks: kernel parameter `sinks`, [Hq] f32.
  bool sinks = false;
  /// A mask_mod's kernel takes `key_ranges`: per query tile the keys its
  /// mask may let through and those it lets through to every row
  /// (KernelBuilder::tileOf), or a null pointer.
  bool keyRanges = false;
  /// Tiles of at most 8 real rows (the schedule's max_rows): each consumer
  /// thread steps only its first row.
  bool firstRowOnly = false;

  int64_t threads() const {
    return 128 * (1 + consumers + (valueWidener ? 1 : 0));
  }
  /// e4m3: P's row sums by an MMA against the layout's ones-column tile
  /// (the softmax step then skips them: SoftmaxConfig::noRowSum).
  bool rowSumMma() const { return rowSumTiles; }
  int64_t columnBlocks() const { return headDim * elementBytes / 128; }
  std::string kernelName() const {
    return "fa3_sm90_d" + std::to_string(keyColumns) +
           (outputColumns != keyColumns ? "_dv" + std::to_string(outputColumns)
                                        : std::string()) +
           "_br" + std::to_string(blockR()) + "_bc" + std::to_string(blockC) +
           "_s" + std::to_string(stages) + (fp8 ? "_e4m3" : "") +
           (bf16 ? "_bf16" : "_f16") + (causal ? "_causal" : "") +
           (pingPong || consumers == 1 ? "" : "_nopp") +
           (intraOverlap ? "" : "_noovl") + (persistent ? "_persistent" : "") +
           // The scheduler where it is not the mask's default (dynamic for
           // causal tiles of unequal length, static for equal ones).
           (persistent && dynamicTiles != causal
                ? (dynamicTiles ? "_dynamic" : "_static")
                : "") +
           (qBuffers == 2 ? "_q2" : "") + (rowSumMma() ? "_rsmma" : "") +
           epilogueSuffix() + (kvSplits ? "_splitkv" : "") +
           (consumers == 1 && ctasPerSM == 1 ? "_1cta" : "") +
           (inputs.keyLengths ? "_kvlens" : "") +
           (inputs.pageSize ? "_paged" + std::to_string(inputs.pageSize) : "") +
           (inputs.varlen ? "_varlen" : "") +
           (widensKeyValues ? "_kve4m3" : "") + (sinks ? "_sinks" : "") +
           (firstRowOnly ? "_mr8" : "") + modificationsName + suffix();
  }
  /// The epilogue, named where it is not the default for the head dim, and
  /// O staged in a Q buffer where a staging tile of its own would fit
  /// (fagpu-tma-store-epilogue stages in Q only when it does not), so that
  /// kernels of different shared-memory layouts never share a name.
  std::string epilogueSuffix() const {
    std::string name;
    bool staged = fagpu::stagesOutput(epilogue);
    if (staged != (headDim >= 128))
      name = !staged                              ? "_stg"
             : fagpu::storesOutputByTma(epilogue) ? "_tma"
                                                  : "_copy";
    if (fagpu::stagesOutputInQ(epilogue)) {
      fagpu::SM90Layout separate = *this;
      separate.epilogue = fagpu::storesOutputByTma(epilogue)
                              ? fagpu::Epilogue::TmaStore
                              : fagpu::Epilogue::StagedCopy;
      if (separate.sharedBytes() <= fagpu::maxSharedBytes(ctasPerSM))
        name += "_oinq";
    }
    return name;
  }
};

/// A consumer's softmax state: the O accumulator and, per row, the running
/// base m and sum l.
struct RowState {
  Value o, m, l;
};

/// What the softmax of one block of scores hands to its P V.
struct BlockStep {
  Value p, alpha;
  Value moved; // FA4 conditional rescaling only
};

/// Writes the kernel in warpgroup-level fagpu ops: the warp roles, the Q
/// and K/V pipelines between them, TMA loads, MMAs on fragments, the
/// softmax step and the epilogue. The tile loop (static, dynamic or one
/// tile per CTA) and the ring positions are scf and arith around them.
/// Values are named like the math: `s` scores, `p` probabilities, `o`
/// accumulator, `m` running max (or FA4 base), `l` sum.
class KernelBuilder : public TMAKernelEmitter {
public:
  KernelBuilder(OpBuilder &b, Location loc, const KernelSpec &spec)
      : TMAKernelEmitter(b, loc, spec.bf16, spec, spec.headDim, spec.blockR(),
                         spec.blockC),
        spec(spec) {
    MLIRContext *ctx = b.getContext();
    using fagpu::FragmentLayout;
    elementBytes = spec.elementBytes;
    // Q, K, V and P: the tensor cores' operands.
    Type input = spec.fp8 ? Type(Float8E4M3FNType::get(ctx)) : half;
    scoresType = fagpu::FragmentType::get(ctx, {kRowsPerConsumer, spec.blockC},
                                          f32, FragmentLayout::Accumulator);
    outType = fagpu::FragmentType::get(ctx, {kRowsPerConsumer, spec.headDim},
                                       f32, FragmentLayout::Accumulator);
    probsType = fagpu::FragmentType::get(ctx, {kRowsPerConsumer, spec.blockC},
                                         input, FragmentLayout::OperandA);
    rowsType = fagpu::FragmentType::get(ctx, {kRowsPerConsumer}, f32,
                                        FragmentLayout::Rows);
    // Row sums by MMA: l is column 0 of an m64n8 accumulator.
    sumsType = fagpu::FragmentType::get(ctx, {kRowsPerConsumer, 8}, f32,
                                        FragmentLayout::Accumulator);
    qTileType = fagpu::SharedTileType::get(ctx, {spec.blockR(), spec.headDim},
                                           input, spec.blockR());
    consumerRowsType = fagpu::SharedTileType::get(
        ctx, {kRowsPerConsumer, spec.headDim}, input, spec.blockR());
    kvTileType = fagpu::SharedTileType::get(ctx, {spec.blockC, spec.headDim},
                                            input, spec.blockC);
    // e4m3: the V buffer holds a V^T tile [D, B_c] (as many bytes as K's),
    // its rows of B_c keys in column blocks of the widest swizzle dividing
    // them.
    valueTileType =
        spec.fp8
            ? fagpu::SharedTileType::get(ctx, {spec.headDim, spec.blockC},
                                         input, spec.headDim,
                                         fagpu::valueTileSwizzle(spec.blockC))
            : kvTileType;
    // An e4m3 cache: its K and V tiles as the TMA writes them, one 128-byte
    // line per row of D codes.
    cacheTileType =
        fagpu::SharedTileType::get(ctx, {spec.blockC, spec.headDim},
                                   Float8E4M3FNType::get(ctx), spec.blockC);
  }

  LLVM::LLVMFuncOp build(gpu::GPUModuleOp module);

private:
  /// K and V, the two buffers of each stage of the K/V pipeline.
  static constexpr int64_t kKey = 0, kValue = 1;

  /// Tile `tileIndex` of this CTA uses Q buffer tileIndex mod qBuffers, for
  /// the (tileIndex / qBuffers)-th time: the parity its barriers wait on.
  Value qBufferOf(Value tileIndex) {
    return spec.qBuffers == 1
               ? c32(0)
               : arith::AndIOp::create(b, loc, tileIndex, c32(1));
  }
  Value qRoundOf(Value tileIndex) {
    return arith::AndIOp::create(b, loc, divu(tileIndex, c32(spec.qBuffers)),
                                 c32(1));
  }
  /// Where the producer leaves the index of the tile whose Q it loads into
  /// `buffer` (dynamic scheduler).
  Value tileSlot(Value buffer) {
    return sharedAt(add(c32(spec.tileSlotOffset()), mul(buffer, c32(4))));
  }

  Value waitStage(Value pipeline, Value stage, Value parity, int64_t buffer) {
    fagpu::PipelineWaitOp::create(b, loc, pipeline, stage, parity, buffer);
    return fagpu::PipelineTileOp::create(
        b, loc,
        cast<fagpu::PipelineType>(pipeline.getType()).getBufferTile(buffer),
        pipeline, stage, buffer);
  }
  void release(Value pipeline, Value stage, int64_t buffer) {
    fagpu::PipelineReleaseOp::create(b, loc, pipeline, stage, buffer);
  }
  Value kvTile(Value stage, int64_t buffer) {
    return fagpu::PipelineTileOp::create(
        b, loc, buffer == kValue ? valueTileType : kvTileType, kvPipe, stage,
        buffer);
  }
  Value pin(Value fragment) {
    return fagpu::PinOp::create(b, loc, fragment.getType(), fragment);
  }
  void mmaWait(int64_t pending) { fagpu::MmaWaitOp::create(b, loc, pending); }

  /// S = Q K^T for one consumer.
  Value issueScores(Value kTile) {
    return fagpu::MmaOp::create(b, loc, scoresType, qTile, kTile, Value(),
                                Value(), /*mn_major=*/false)
        .getResult();
  }
  /// O += P V: V MN-major (transposed by the MMA), or for e4m3, whose
  /// wgmma has no transpose, the K-major V^T tile.
  Value issueValues(Value p, Value o, Value vTile) {
    return fagpu::MmaOp::create(b, loc, outType, p, vTile, o, Value(),
                                /*mn_major=*/!spec.fp8)
        .getResult();
  }

  /// Row sums by MMA: l's column 0 += P 1 (the consumer's row-sum tile).
  Value issueRowSums(Value p, Value l) {
    return fagpu::MmaOp::create(b, loc, sumsType, p, rowSumTile, l, Value(),
                                /*mn_major=*/false)
        .getResult();
  }
  /// The state a block's products accumulate into: O (and with row sums
  /// by MMA, l) moved to the block's base, pinned ahead of the MMAs.
  RowState rescaleState(const RowState &state, const BlockStep &step) {
    RowState moved = state;
    moved.o = pin(rescale(state.o, step));
    if (spec.rowSumMma())
      moved.l = pin(rescale(state.l, step));
    return moved;
  }
  /// A block's products: with row sums by MMA first l += P 1, then
  /// O += P V, each its own MMA group. The softmax after them waits for all
  /// but the last group (wait_group 1): S_j's and the row sums' (issuing
  /// the sums after P V and waiting for S_j alone measured slower,
  /// bench/results/2026-12-03-e4m3-row-sum-mma.md).
  void issueProducts(RowState &state, const BlockStep &step, Value vTile) {
    if (spec.rowSumMma())
      state.l = issueRowSums(step.p, state.l);
    state.o = issueValues(step.p, state.o, vTile);
  }
  /// After their mma_wait: O (and l) may be read.
  void pinProducts(RowState &state) {
    state.o = pin(state.o);
    if (spec.rowSumMma())
      state.l = pin(state.l);
  }

  /// Softcap, mask and the online softmax of block `block`'s scores `s`
  /// (scaled by `effScale`, scoresScale's) of `tile`: updates the base and
  /// sum in `state` (O untouched); returns P and alpha. With score_mod or
  /// mask_mod, fagpu.modify_scores applies the scale, softcap and regions
  /// first and the step takes the result at a scale of 1; `maskMod` false:
  /// a full block, whose mask_mod lets every key through, skips it.
  BlockStep softmax(Value s, RowState &state, bool masked, Value block,
                    Value effScale, Value row0, const AttentionTile &tile,
                    bool maskMod = true);
  BlockStep modifiedSoftmax(Value s, RowState &state, bool masked, Value block,
                            Value effScale, Value row0,
                            const AttentionTile &tile, bool maskMod);
  /// O *= alpha (under a warp vote with conditional rescaling).
  Value rescale(Value o, const BlockStep &step) {
    return fagpu::RescaleOp::create(b, loc, o.getType(), o, step.alpha,
                                    step.moved)
        .getResult();
  }

  void emitTileLoop(llvm::function_ref<SmallVector<Value>(
                        const AttentionTile &, Value tileIndex, ValueRange)>
                        body,
                    llvm::function_ref<void(ValueRange)> finish = nullptr);
  void emitDynamicTileLoop(Value first,
                           llvm::function_ref<SmallVector<Value>(
                               const AttentionTile &, Value, ValueRange)>
                               body,
                           llvm::function_ref<void(ValueRange)> finish);
  SmallVector<Value>
  emitLoopTile(Value id, Value tileIndex, ValueRange carried,
               llvm::function_ref<SmallVector<Value>(const AttentionTile &,
                                                     Value, ValueRange)>
                   body);
  /// Dynamic scheduler: the id of the CTA's tile number `tileIndex` (its
  /// second or later). The producer takes it from the counter, the
  /// consumers read it from the slot of the tile's Q buffer once its Q has
  /// landed. Ids past the last tile end the loop.
  Value nextTile(Value tileIndex);
  /// The producer's turn on the Q buffer of its tile number `tileIndex`:
  /// waits until the consumers released the buffer's previous tile and,
  /// with the dynamic scheduler, leaves `id` in its slot. Returns the
  /// buffer.
  Value claimQBuffer(Value tileIndex, Value id);
  /// The producer's end of the dynamic loop: the id past the last tile goes
  /// to the consumers through the next Q buffer's slot, as if it were a
  /// tile (a commit without bytes), so they leave their loop.
  void announceEnd(Value endId, Value tileIndex);

  /// What a tile hands to the next one in the cross-tile pipeline: its
  /// last block's P V and its store are still to do.
  struct PendingTile {
    RowState state;
    BlockStep last;
    Value vStage, vParity, row0, qMatrix;
    // Varlen: where its rows end and its LSE starts (storeTile's).
    Value rowEnd, lse;
    // e4m3: V's descale of its (batch, K/V head).
    Value vDescale;
    // O staged in the Q buffer: the tile's buffer, released after its
    // store has read it.
    Value qBuffer;
  };
  SmallVector<Value> packPending(const PendingTile &tile);
  PendingTile unpackPending(ValueRange values);
  /// O / l and LSE of a tile's rows: by TMA through the consumer's rows of
  /// the staging tile `staging`, or from registers. `rowEnd` (default Nq)
  /// bounds the rows, `lse` (default the kernel's) is where the LSE's
  /// matrix 0 starts; `vDescaleOfTile` (e4m3; default the current tile's)
  /// is V's descale of the tile stored.
  void storeTile(const RowState &state, Value row0, Value qMatrix,
                 Value staging, Value rowEnd = Value(), Value lse = Value(),
                 Value vDescaleOfTile = Value());
  /// e4m3: the descales of `tile` as descaleLayout lays them out (per
  /// tensor, its (batch, K/V head)'s, or per block): the kernel's scale
  /// times Q's into tileScaleLog2, where K's start and how far apart its
  /// blocks' are into kDescaleBase and kDescaleStep (scoresScale reads
  /// them), and V's into vDescale: S = q_descale k_descale (Q8 K8^T) and
  /// O = v_descale P V8. No-op for 16-bit kernels.
  void useDescales(const AttentionTile &tile);
  /// The scale of block `block`'s scores in log2 units: the kernel's for
  /// 16-bit kernels; e4m3: the tile's times K's descale of the block (a
  /// load issued where this is called, ahead of the MMA it waits for).
  Value scoresScale(Value block);
  /// Element `index` of a descale array (f32, read-only for the kernel).
  Value loadDescale(Value ptr, Value index);
  /// The epilogue stores' `columns` where O has fewer columns than the
  /// tiles (a padded head dim), else none.
  IntegerAttr paddedColumns();
  /// The columns of O the epilogue stores: O's own, at most the tiles'.
  int64_t storedColumns();
  /// The consumer's rows of the staging tile for the tile in `qBuffer`.
  Value stagingRows(Value qBuffer);

  /// O = 0, m = -inf, l = 0: a tile's state before its first block (and an
  /// empty split-KV chunk's partial).
  RowState initialState() {
    RowState state;
    state.o = fagpu::SplatOp::create(b, loc, outType, cf(0.0));
    state.m = fagpu::SplatOp::create(
        b, loc, rowsType, cf(-std::numeric_limits<double>::infinity()));
    state.l = fagpu::SplatOp::create(
        b, loc, spec.rowSumMma() ? sumsType : rowsType, cf(0.0));
    return state;
  }
  /// The state `tile` starts from: with attention sinks, as if a key of
  /// the query head's sink logit s and a zero value row had been seen
  /// (fa.init_state's sink): m = log2(e) s, l = 1, or with s = -inf (no
  /// sink) m = -inf, l = 0. A row's l is the sum of its quad's four
  /// threads' partial sums (the epilogue adds them), so the sink's 1 is
  /// the first lane's of each quad.
  RowState initialState(const AttentionTile &tile) {
    if (!sinksPtr)
      return initialState();
    Value logit = LLVM::LoadOp::create(
        b, loc, f32, gep(globalPtr, f32, sinksPtr, ext64(tile.qHead)),
        /*alignment=*/4, /*isVolatile=*/false, /*isNonTemporal=*/false,
        /*isInvariant=*/true);
    Value none =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, logit,
                              cf(-std::numeric_limits<double>::infinity()));
    Value otherLane = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::ne, remu(tid, c32(4)), c32(0));
    Value zeroL = arith::OrIOp::create(b, loc, none, otherLane);
    RowState state;
    state.o = fagpu::SplatOp::create(b, loc, outType, cf(0.0));
    state.m = fagpu::SplatOp::create(b, loc, rowsType,
                                     fmul(logit, cf(1.4426950408889634)));
    state.l = fagpu::SplatOp::create(b, loc, rowsType,
                                     select(zeroL, cf(0.0), cf(1.0)));
    return state;
  }
  /// The first of the two rows (g and g + 8 of its warp's 16) the thread
  /// holds in a tile starting at `qStart`.
  Value threadRow0(Value qStart) {
    return add(add(qStart, mul(consumer, c32(kRowsPerConsumer))),
               add(mul(warpInGroup, c32(16)), g));
  }
  /// Split-KV: the chunk of the tile's K/V blocks this CTA (blockIdx.y)
  /// visits (mlir::fa::model::kvChunk, the CPU nest's rule).
  AttentionTile chunkOf(AttentionTile tile);
  /// Tile `id` (decodeTile) with its K/V blocks narrowed to the keys that
  /// `key_ranges` gives it, where the launch passes them.
  AttentionTile tileOf(Value id);
  /// Split-KV: the consumer's chunk of the tile (nothing to attend in an
  /// empty chunk: its partial is the initial state, O = 0 and LSE =
  /// -inf), its partial stored, then the merge by the rows' last chunk.
  void emitSplitConsumerTile(const AttentionTile &tile, Value tileIndex);

  void emitProducer();
  void emitProducerTile(const AttentionTile &tile, Value tileIndex);
  void emitWideningProducer();
  /// The tile loop of a role that loads or widens K/V: `perTile` for each
  /// of the CTA's tiles with blocks (a split-KV chunk may have none).
  void emitLoadingTileLoop(
      llvm::function_ref<void(const AttentionTile &, Value)> perTile);
  /// The V widener's tiles: each K/V block's V from the cache ring into
  /// the K/V ring (valueWidener).
  void emitValueWidener();
  /// An e4m3 cache's producer: the warpgroup widens each K/V block the
  /// TMA brought into the cache ring into the K/V ring (one thread issues
  /// the loads).
  void emitWideningProducerTile(const AttentionTile &tile, Value tileIndex);
  /// Loads K/V block `j` of `tile` (rows `firstKey` ..) into buffers K and
  /// V of stage `stage` of `pipe`: a page's rows, pages gathered, or rows
  /// of a contiguous K/V.
  void loadKeyValueBlock(const AttentionTile &tile, Value j, Value pipe,
                         Value stage, bool acquireKey, bool acquireValue,
                         Value parity);
  std::optional<PendingTile> emitConsumerTile(const AttentionTile &tile,
                                              Value tileIndex,
                                              const PendingTile *previous);
  void finishPendingTile(const PendingTile &tile);
  /// Whether a persistent kernel stages O in the tile's Q buffer: the
  /// producer may load a later tile's Q there only once the TMA store has
  /// read it, so the buffer is released after the store, not after the
  /// tile's last S.
  bool releasesQAfterStore() const {
    return spec.persistent && spec.epilogue == fagpu::Epilogue::TmaStoreInQ;
  }
  /// After a store staged in Q buffer `qBuffer`: its reads done, the
  /// buffer goes back to the producer (one arrival per warp; the storing
  /// thread's warp arrives after its wait).
  void releaseQAfterStore(Value qBuffer) {
    fagpu::StoreWaitOp::create(b, loc);
    release(qPipe, qBuffer, 0);
  }
  void emitConsumer(Value consumer);
  /// Ping-pong: this consumer's turn on the tensor cores, and its hand-over.
  void waitTurn() {
    if (spec.pingPong)
      fagpu::WaitTurnOp::create(b, loc, ownTurn, 2 * 128);
  }
  void passTurn() {
    if (spec.pingPong)
      fagpu::PassTurnOp::create(b, loc, otherTurn, 2 * 128);
  }

  // Every tile starts its K/V blocks at stage 0: block j of the tile is
  // the ring's use j - first, so its stage depends on the inner loop's
  // counter alone and ptxas keeps the wgmma descriptors in uniform
  // registers (a ring position carried across a persistent CTA's tiles
  // made it build them per thread and move them, R2UR, before each wgmma).
  // The cost is the phase, which a persistent CTA carries in phaseBits
  // (fagpu.pipeline_position says how).
  Value blockInTile(Value j) { return sub(j, tileFirst); }
  /// Where block j of the current tile sits in the K/V ring: its stage,
  /// and the parity a consumer waits with (`producer`: acquires with).
  fagpu::PipelinePositionOp kvPosition(Value j, bool producer = false) {
    return fagpu::PipelinePositionOp::create(b, loc, kvPipe, blockInTile(j),
                                             phaseBits, producer);
  }
  /// ... in an e4m3 cache's ring. Its kernels run one tile per CTA
  /// (fagpu-persistent refuses them), so no phase bits.
  fagpu::PipelinePositionOp cachePosition(Value j, bool producer = false) {
    return fagpu::PipelinePositionOp::create(b, loc, cachePipe, blockInTile(j),
                                             Value(), producer);
  }
  Value stageOf(Value j) { return kvPosition(j).getStage(); }
  Value parityOf(Value j, bool producer = false) {
    return kvPosition(j, producer).getParity();
  }

  const KernelSpec &spec;
  fagpu::FragmentType scoresType, outType, probsType, rowsType, sumsType;
  fagpu::SharedTileType qTileType, consumerRowsType, kvTileType, valueTileType;
  fagpu::SharedTileType cacheTileType; // an e4m3 cache's K or V tile
  Value qPipe, kvPipe;                 // the Q buffers and the K/V ring
  Value cachePipe;   // an e4m3 cache's tiles (SM90Layout::widensKeyValues)
  Value stagingTile; // the O staging tile (TMA store, not in Q)
  Value tid, warpInGroup, g;
  Value consumer;           // this consumer's index
  Value ownTurn, otherTurn; // ping-pong named barriers
  Value epilogueBarrier;    // named barrier of this consumer's four warps
  Value rowSumTile;         // row sums by MMA: this consumer's ones column
  Value qTile;              // this consumer's Q rows in the current tile
  // e4m3: the descales on the device and their layout (fagpu::DescaleLayout),
  // the kernel's scale before them; of the consumer's current tile, the
  // scores' scale before K's descale, where its K descales start and how
  // far apart its blocks' are (0: one for all), and V's descale.
  Value qDescalePtr, kDescalePtr, vDescalePtr, descaleLayout;
  /// The captures' global pointers (KernelSpec::captures of them).
  SmallVector<Value> capturePtrs;
  /// Attention sinks: the [Hq] f32 logits (null without).
  Value sinksPtr;
  /// A mask_mod's key ranges, [B, Hq, query tiles, 4] i32 (may be null at
  /// launch; absent from kernels without a mask_mod).
  Value keyRangesPtr;
  Value kernelScaleLog2, tileScaleLog2, kDescaleBase, kDescaleStep, vDescale;
  Value tileFirst;         // the current tile's first K/V block
  Value phaseBits;         // persistent only: see blockInTile
  bool inProducer = false; // while emitting the producer's tile loop
  /// The producer's varlen search resumes where its last tile's sequence
  /// began: its tiles come in increasing order (a stride of the grid, or
  /// the dynamic scheduler's counter), so over the launch it reads each
  /// prefix sum once instead of all B of them per tile (one thread, so no
  /// warp search).
  bool keepsVarlenCursor() const { return inProducer && varlenRealTiles; }
};

} // namespace mlir::fa::sm90

#endif // FA_LIB_CONVERSION_FAGPUTONVVM_SM90KERNELBUILDER_H
