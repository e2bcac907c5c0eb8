//===- FAToSM90.cpp - FlashAttention-3 on Hopper: TMA, wgmma, warp roles --===//
//
// Builds the forward kernel of FlashAttention-3 for sm_90a from a tiled
// fa.attention, in the LLVM and NVVM dialects:
//
//  * warp specialisation: warpgroup 0 is the producer (its registers cut by
//    setmaxnreg.dec); one elected thread issues every TMA load
//    (cp.async.bulk.tensor) of Q and of the K/V ring. Warpgroups 1 and 2
//    are consumers (setmaxnreg.inc), each owning 64 query rows;
//  * the ring: `stages` K tiles and V tiles in shared memory, each guarded
//    by a "full" mbarrier (arrive.expect_tx by the producer, completed by
//    the TMA's transaction bytes) and an "empty" one (one arrival per
//    consumer warp once its wgmma has read the tile);
//  * S = Q K^T by wgmma.mma_async with both operands in shared memory
//    (128-byte swizzled, K-major); O += P V by wgmma.mma_async with P in
//    registers (the S accumulator layout converted to f16 pairs is the A
//    fragment layout) and V from shared memory (MN-major, transposed);
//  * intra-warpgroup overlap: iteration j issues S_j = Q K_j^T and
//    O += P_{j-1} V_{j-1} back to back, then runs the softmax of S_j while
//    the second product is still on the tensor cores (wait_group 1);
//  * ping-pong: named barriers 1 and 2 hand the tensor cores from one
//    consumer warpgroup to the other, so one's softmax runs under the
//    other's GEMMs;
//  * B_r = 64: one consumer warpgroup and two resident CTAs per SM, which
//    play the part of the ping-pong partners;
//  * persistent CTAs loop over the tiles; with two Q buffers the tiles
//    form one pipeline: a tile's last P V goes to the tensor cores with the
//    next tile's first S (the cross-tile pipeline). Equal tiles are dealt
//    statically (CTA c runs c, c + gridDim, ...); causal tiles, whose
//    lengths differ, by a dynamic scheduler: the producer takes the next
//    tile from a global counter and hands its index to the consumers in
//    shared memory, next to the Q buffer it loads.
//
// Shared-memory tiles, TMA loads, descriptors and the tile decoder are the
// ones of Common/TMAKernel.h; wgmma descriptors mark the 128-byte swizzle
// with bits 62-63 = 1.
//
// Accumulator layout of wgmma m64nNk16 (f32), thread t of the warpgroup,
// w = t / 32, g = (t % 32) / 4, q = t % 4: register 4i + e holds row
// 16w + g + 8 (e / 2), column 8i + 2q + (e % 2) -- the mma.sync C layout
// repeated over N / 8 tiles, so the sm_80 softmax arithmetic carries over.
//
//===----------------------------------------------------------------------===//

#include "KernelLowerings.h"

#include "../Common/TMAKernel.h"

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

namespace {

using fagpu::kRowsPerConsumer;                         // wgmma M
constexpr int64_t kWgmmaSwizzle128 = int64_t(1) << 62; // descriptor bits
constexpr int64_t kPingPongBarrier = 1; // named barriers 1 .. consumers
constexpr int64_t kEpilogueBarrier = 4; // 4 + c: consumer c's four warps

/// What the generated kernel is specialised for: the mask and FA4 choices
/// (SoftmaxConfig), the shared-memory layout (fagpu::SM90Layout), and the
/// rest of the #fagpu.schedule.
struct KernelSpec : SoftmaxConfig, fagpu::SM90Layout {
  // Resident CTAs per SM: 2 with one consumer (B_r = 64), whose registers
  // and shared memory leave room for a second CTA; its prologue and
  // epilogue then run under the other's GEMMs.
  int64_t ctasPerSM = 1;
  bool bf16 = false;
  bool pingPong = true;
  bool intraOverlap = true;
  bool persistent = false;
  int64_t producerRegisters = 24;
  int64_t consumerRegisters = 240;
  /// The kernel's parameters, in launch order.
  SmallVector<fagpu::KernelParam> abi;

  int64_t threads() const { return 128 * (1 + consumers); }
  int64_t columnBlocks() const { return headDim / kColumnsPerBlock; }
  std::string kernelName() const {
    return "fa3_sm90_d" + std::to_string(headDim) + "_br" +
           std::to_string(blockR()) + "_bc" + std::to_string(blockC) + "_s" +
           std::to_string(stages) + (bf16 ? "_bf16" : "_f16") +
           (causal ? "_causal" : "") +
           (pingPong || consumers == 1 ? "" : "_nopp") +
           (intraOverlap ? "" : "_noovl") + (persistent ? "_persistent" : "") +
           (qBuffers == 2 ? "_q2" : "") + epilogueSuffix() + suffix();
  }
  /// The epilogue, named where it is not the default for the head dim.
  std::string epilogueSuffix() const {
    if (tmaStore == (headDim >= 128))
      return "";
    return tmaStore ? "_tma" : "_stg";
  }
};

/// Per-thread softmax state of a consumer: O accumulators (headDim / 2),
/// and for rows g and g + 8 the running base m and sum l.
struct RowState {
  SmallVector<Value> o;
  std::array<Value, 2> m, l;
};

/// Emits the kernel. Values are named like the math: `s` scores, `p`
/// probabilities, `o` accumulator, `m` running max (or FA4 base), `l` sum.
class KernelBuilder : public TMAKernelEmitter {
public:
  KernelBuilder(OpBuilder &b, Location loc, const KernelSpec &spec)
      : TMAKernelEmitter(b, loc, spec.bf16, spec, spec.headDim, spec.blockR(),
                         spec.blockC),
        spec(spec) {}

  LLVM::LLVMFuncOp build(gpu::GPUModuleOp module);

private:
  Value barrier(int64_t index) {
    return sharedAt(spec.barrierOffset() + 8 * index);
  }
  Value barrier(Value index) {
    return sharedAt(add(c32(spec.barrierOffset()), mul(index, c32(8))));
  }
  Value qFull(Value buffer) { return barrier(mul(buffer, c32(2))); }
  Value qEmpty(Value buffer) {
    return barrier(add(mul(buffer, c32(2)), c32(1)));
  }
  int64_t ringBarriers() const { return 2 * spec.qBuffers; }
  Value kFull(Value stage) { return barrier(add(c32(ringBarriers()), stage)); }
  Value vFull(Value stage) {
    return barrier(add(c32(ringBarriers() + spec.stages), stage));
  }
  Value kEmpty(Value stage) {
    return barrier(add(c32(ringBarriers() + 2 * spec.stages), stage));
  }
  Value vEmpty(Value stage) {
    return barrier(add(c32(ringBarriers() + 3 * spec.stages), stage));
  }
  /// Tile `tileIndex` of this CTA uses Q buffer tileIndex mod qBuffers, for
  /// the (tileIndex / qBuffers)-th time: the parity its barriers wait on.
  Value qBufferOf(Value tileIndex) {
    return spec.qBuffers == 1
               ? c32(0)
               : arith::AndIOp::create(b, loc, tileIndex, c32(1));
  }
  /// Where the producer leaves the index of the tile whose Q it loads into
  /// `buffer` (dynamic scheduler).
  Value tileSlot(Value buffer) {
    return sharedAt(add(c32(spec.tileSlotOffset()), mul(buffer, c32(4))));
  }
  Value qRoundOf(Value tileIndex) {
    return arith::AndIOp::create(b, loc, divu(tileIndex, c32(spec.qBuffers)),
                                 c32(1));
  }
  Value kOffset(Value stage) {
    return add(c32(spec.kOffset(0)), mul(stage, c32(2 * spec.kvTileBytes())));
  }
  Value vOffset(Value stage) {
    return add(kOffset(stage), c32(spec.kvTileBytes()));
  }

  /// One arrival per consumer warp (lane 0), after the warp's own
  /// wgmma.wait_group has retired the reads of the tile.
  void releaseTile(Value bar) {
    auto ifLead = scf::IfOp::create(b, loc, eq(lane, c32(0)), false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifLead.thenBlock());
    NVVM::MBarrierArriveOp::create(b, loc, Type(), bar, Value());
  }

  Value kMajor(Value tileOffset, int64_t rows, int64_t kk) {
    return kMajorDescriptor(tileOffset, rows, kk, kWgmmaSwizzle128);
  }
  Value valueMajor(Value tileOffset, int64_t kk) {
    return valueDescriptor(tileOffset, kk, kWgmmaSwizzle128);
  }

  /// Pins values at this point of the instruction stream (an empty asm
  /// that "modifies" them), so no use of a wgmma result is scheduled above
  /// its wait_group and no write of an operand below its wgmma.fence.
  SmallVector<Value> fenceOperands(ArrayRef<Value> values);

  /// S = Q K^T for one consumer: D / 16 wgmma (SS) into one accumulator.
  SmallVector<Value> issueScores(Value kTile);
  /// O += P V: B_c / 16 wgmma with P from registers.
  SmallVector<Value> issueValues(ArrayRef<Value> p, ArrayRef<Value> o,
                                 Value vTile);

  /// Softcap, mask, online softmax of one block of scores: updates the
  /// base and sum in `state` (O untouched); returns P as the A fragments of
  /// P V and alpha per row.
  struct BlockStep : SoftmaxStep {
    SmallVector<Value> p;
  };
  BlockStep softmax(SmallVector<Value> s, RowState &state, bool masked,
                    Value kStart, Value row0, Value nk, Value scaleLog2);
  /// O *= alpha (under a warp vote with conditional rescaling).
  SmallVector<Value> rescale(ArrayRef<Value> o, std::array<Value, 2> alpha,
                             Value moved);

  /// The CTA's tiles, carrying the tile count and the ring's phase bits:
  /// for (tile = blockIdx.x; tile < tiles; tile += gridDim.x), or with the
  /// dynamic scheduler blockIdx.x first, then what nextTile() gives.
  /// `body` may return values that the loop carries to its next call.
  /// With `finish` (persistent only) the CTA's first tile is peeled: `body`
  /// sees no carried values there, the loop runs the other tiles, and
  /// `finish` gets the last carried values; CTAs without a tile skip all.
  void emitTileLoop(llvm::function_ref<SmallVector<Value>(
                        const AttentionTile &, Value tileIndex, ValueRange)>
                        body,
                    llvm::function_ref<void(ValueRange)> finish = nullptr);
  void emitDynamicTileLoop(Value first,
                           llvm::function_ref<SmallVector<Value>(
                               const AttentionTile &, Value, ValueRange)>
                               body,
                           llvm::function_ref<void(ValueRange)> finish);
  /// One tile of a persistent loop: decodes tile `id`, runs `body` on it
  /// and returns the ring's phase bits after it, then the body's values.
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
  /// with the dynamic scheduler, leaves `id` in its slot (the next arrival
  /// on its q_full releases it to the consumers). Returns the buffer.
  Value claimQBuffer(Value tileIndex, Value id);
  /// The producer's end of the dynamic loop: the id past the last tile goes
  /// to the consumers through the next Q buffer's slot, as if it were a
  /// tile (an arrival on q_full without bytes), so they leave their loop.
  void announceEnd(Value endId, Value tileIndex);

  /// What a tile hands to the next one in the cross-tile pipeline: its
  /// last block's P V and its store are still to do.
  struct PendingTile {
    RowState state;
    BlockStep last;
    Value vStage, vParity, row0, qMatrix;
  };
  SmallVector<Value> packPending(const PendingTile &tile);
  PendingTile unpackPending(ValueRange values);
  /// Divides O by l and writes O and LSE of a tile's rows: by TMA through
  /// shared memory (`stage`: the consumer's rows of the staging tile) or
  /// from registers.
  void storeTile(ArrayRef<Value> o, std::array<Value, 2> m,
                 std::array<Value, 2> l, Value row0, Value qMatrix,
                 Value stage);
  /// The consumer's rows of the staging tile for the tile in `qBuffer`.
  Value stagingRows(Value qBuffer) {
    if (spec.stageInQ)
      return add(qRows, mul(qBuffer, c32(spec.qBytes())));
    return add(qRows, c32(spec.oStageOffset()));
  }
  /// Named barrier of this consumer's four warps.
  void syncConsumerWarps() {
    NVVM::BarrierOp::create(b, loc, Type(), epilogueBarrier, c32(128),
                            NVVM::BarrierReductionAttr(), Value());
  }
  Value isStoreIssuer() {
    return arith::AndIOp::create(b, loc, eq(warpInGroup, c32(0)),
                                 eq(lane, c32(0)));
  }

  void emitProducer();
  void emitProducerTile(const AttentionTile &tile, Value tileIndex);
  /// One tile of a consumer. With `previous` (cross-tile pipeline) the
  /// previous tile's last P V is issued with this tile's first S and its
  /// rows are stored after this tile's first softmax. In that pipeline
  /// (two Q buffers) this tile's last P V and store are returned for the
  /// next tile instead of done here.
  std::optional<PendingTile>
  emitConsumerTile(Value consumer, const AttentionTile &tile, Value tileIndex,
                   const std::function<void()> &waitTurn,
                   const std::function<void()> &passTurn,
                   const PendingTile *previous);
  /// The last pending tile's P V and store, after the tile loop.
  void finishPendingTile(const PendingTile &tile,
                         const std::function<void()> &waitTurn,
                         const std::function<void()> &passTurn);
  void emitConsumer(Value consumer);

  // Every tile starts its K/V blocks at stage 0: block j of the tile sits
  // in stage (j - first) mod stages, a value that depends on the inner
  // loop's counter alone, so ptxas keeps the wgmma descriptors in uniform
  // registers (a ring position carried across a persistent CTA's tiles
  // made it build them per thread and move them, R2UR, before each wgmma).
  // The cost is the phase: stage s has completed phaseBits >> s & 1 more
  // rounds (mod 2) than the tile's own count says.
  Value blockInTile(Value j) { return sub(j, tileFirst); }
  Value stageOf(Value j) { return remu(blockInTile(j), c32(spec.stages)); }
  Value parityOf(Value j) {
    Value round = arith::AndIOp::create(
        b, loc, divu(blockInTile(j), c32(spec.stages)), c32(1));
    if (!phaseBits)
      return round;
    Value carried = arith::AndIOp::create(
        b, loc, arith::ShRUIOp::create(b, loc, phaseBits, stageOf(j)), c32(1));
    return arith::XOrIOp::create(b, loc, round, carried);
  }
  /// The phase bits after a tile of `blocks` K/V blocks: stage s was used
  /// ceil((blocks - s) / stages) times.
  Value advancePhases(Value bits, Value blocks) {
    for (int64_t s = 0; s < spec.stages; ++s) {
      Value uses =
          divu(add(blocks, c32(spec.stages - 1 - s)), c32(spec.stages));
      Value flip = arith::ShLIOp::create(
          b, loc, arith::AndIOp::create(b, loc, uses, c32(1)), c32(s));
      bits = arith::XOrIOp::create(b, loc, bits, flip);
    }
    return bits;
  }

  const KernelSpec &spec;
  Value tid, lane, warpInGroup, g, t;
  Value qRows;           // this consumer's rows in a Q buffer
  Value epilogueBarrier; // named barrier of this consumer's four warps
  Value qTile;           // this consumer's Q rows in the current tile's buffer
  Value tileFirst;       // the current tile's first K/V block
  Value phaseBits;       // persistent only: see parityOf
  bool inProducer = false; // while emitting the producer's tile loop
};

SmallVector<Value> KernelBuilder::fenceOperands(ArrayRef<Value> values) {
  SmallVector<Value> out;
  for (Value v : values) {
    StringRef constraint = v.getType().isF32() ? "=f,0" : "=r,0";
    out.push_back(LLVM::InlineAsmOp::create(
                      b, loc, v.getType(), ValueRange{v}, "", constraint,
                      /*has_side_effects=*/true, /*is_align_stack=*/false,
                      LLVM::tailcallkind::TailCallKind::None,
                      LLVM::AsmDialectAttr(), ArrayAttr())
                      .getResult(0));
  }
  return out;
}

SmallVector<Value> KernelBuilder::issueScores(Value kTile) {
  MLIRContext *ctx = b.getContext();
  int64_t n = spec.blockC;
  SmallVector<Type> fields(n / 2, f32);
  auto accType = LLVM::LLVMStructType::getLiteral(ctx, fields);
  Value acc = LLVM::PoisonOp::create(b, loc, accType);
  auto type = spec.bf16 ? NVVM::WGMMATypes::bf16 : NVVM::WGMMATypes::f16;
  NVVM::WgmmaFenceAlignedOp::create(b, loc);
  for (int64_t kk = 0; kk < spec.headDim / 16; ++kk) {
    // The first k-step ignores the accumulator's input (scale-d = 0).
    acc = NVVM::WgmmaMmaAsyncOp::create(
        b, loc, accType, acc, kMajor(qTile, spec.blockR(), kk),
        kMajor(kTile, spec.blockC, kk), NVVM::MMAShapeAttr::get(ctx, 64, n, 16),
        NVVM::WGMMATypesAttr::get(ctx, type),
        NVVM::WGMMATypesAttr::get(ctx, type),
        NVVM::WGMMATypesAttr::get(ctx, NVVM::WGMMATypes::f32),
        NVVM::WGMMAScaleOutAttr::get(ctx, kk == 0 ? NVVM::WGMMAScaleOut::zero
                                                  : NVVM::WGMMAScaleOut::one),
        NVVM::WGMMAScaleInAttr::get(ctx, NVVM::WGMMAScaleIn::one),
        NVVM::WGMMAScaleInAttr::get(ctx, NVVM::WGMMAScaleIn::one),
        NVVM::MMALayoutAttr::get(ctx, NVVM::MMALayout::row),
        NVVM::MMALayoutAttr::get(ctx, NVVM::MMALayout::col),
        NVVM::MMAIntOverflowAttr());
  }
  NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
  SmallVector<Value> s;
  for (int64_t i = 0; i < n / 2; ++i)
    s.push_back(
        LLVM::ExtractValueOp::create(b, loc, acc, ArrayRef<int64_t>{i}));
  return s;
}

SmallVector<Value> KernelBuilder::issueValues(ArrayRef<Value> p,
                                              ArrayRef<Value> o, Value vTile) {
  MLIRContext *ctx = b.getContext();
  int64_t n = spec.headDim, regs = n / 2;
  // wgmma with A in registers has no NVVM op: one inline-asm instruction
  // per k-step, the accumulators tied in and out ("+f").
  std::string elt = spec.bf16 ? "bf16" : "f16";
  std::string text = "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n" +
                     std::to_string(n) + "k16.f32." + elt + "." + elt + " {";
  for (int64_t i = 0; i < regs; ++i)
    text += (i ? ", $" : "$") + std::to_string(i);
  text += "}, {";
  for (int64_t i = 0; i < 4; ++i)
    text += (i ? ", $" : "$") + std::to_string(regs + i);
  // scale-d, imm-scale-a, imm-scale-b, imm-trans-b (V is MN-major).
  text += "}, $" + std::to_string(regs + 4) + ", p, 1, 1, 1;\n}";
  std::string constraints;
  for (int64_t i = 0; i < regs; ++i)
    constraints += "=f,";
  constraints += "r,r,r,r,l";
  for (int64_t i = 0; i < regs; ++i)
    constraints += "," + std::to_string(i);
  SmallVector<Type> fields(regs, f32);
  auto accType = LLVM::LLVMStructType::getLiteral(ctx, fields);

  SmallVector<Value> acc(o.begin(), o.end());
  NVVM::WgmmaFenceAlignedOp::create(b, loc);
  for (int64_t kk = 0; kk < spec.blockC / 16; ++kk) {
    SmallVector<Value> operands(p.begin() + 4 * kk, p.begin() + 4 * kk + 4);
    operands.push_back(valueMajor(vTile, kk));
    operands.append(acc.begin(), acc.end());
    auto op = LLVM::InlineAsmOp::create(
        b, loc, accType, operands, text, constraints,
        /*has_side_effects=*/true, /*is_align_stack=*/false,
        LLVM::tailcallkind::TailCallKind::None, LLVM::AsmDialectAttr(),
        ArrayAttr());
    for (int64_t i = 0; i < regs; ++i)
      acc[i] = LLVM::ExtractValueOp::create(b, loc, op.getResult(0),
                                            ArrayRef<int64_t>{i});
  }
  NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
  return acc;
}

KernelBuilder::BlockStep KernelBuilder::softmax(SmallVector<Value> s,
                                                RowState &state, bool masked,
                                                Value kStart, Value row0,
                                                Value nk, Value scaleLog2) {
  Value effScale = applySoftcap(s, scaleLog2);
  if (masked)
    applyMask(s, kStart, row0, nk, t);
  BlockStep step;
  static_cast<SoftmaxStep &>(step) =
      onlineSoftmax(s, state.m, state.l, effScale);
  step.p = packProbabilities(s);
  return step;
}

SmallVector<Value> KernelBuilder::rescale(ArrayRef<Value> o,
                                          std::array<Value, 2> alpha,
                                          Value moved) {
  auto scaled = [&]() {
    SmallVector<Value> r;
    for (size_t i = 0; i < o.size(); ++i)
      r.push_back(fmul(o[i], alpha[(i % 4) / 2]));
    return r;
  };
  if (!moved)
    return scaled();
  // FA4: rescale only if some row of the warp moved its base (warp vote).
  Value anyMoved = NVVM::VoteSyncOp::create(
      b, loc, b.getI1Type(), c32(-1), moved,
      NVVM::VoteSyncKindAttr::get(b.getContext(), NVVM::VoteSyncKind::any));
  SmallVector<Type> types(o.size(), f32);
  auto ifOp = scf::IfOp::create(b, loc, types, anyMoved, true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    scf::YieldOp::create(b, loc, scaled());
    b.setInsertionPointToStart(ifOp.elseBlock());
    scf::YieldOp::create(b, loc, SmallVector<Value>(o.begin(), o.end()));
  }
  return SmallVector<Value>(ifOp.getResults());
}

void KernelBuilder::emitProducer() {
  NVVM::SetMaxRegisterOp::create(b, loc, spec.producerRegisters,
                                 NVVM::SetMaxRegisterAction::decrease);
  // One thread issues every load; the rest of the warpgroup is done.
  auto ifIssuer = scf::IfOp::create(b, loc, eq(tid, c32(0)), false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifIssuer.thenBlock());
  prefetchTensorMaps();
  inProducer = true;
  emitTileLoop([&](const AttentionTile &tile, Value tileIndex, ValueRange) {
    emitProducerTile(tile, tileIndex);
    return SmallVector<Value>();
  });
  inProducer = false;
}

void KernelBuilder::emitProducerTile(const AttentionTile &tile,
                                     Value tileIndex) {
  Value firstBlock = tile.firstBlock, numBlocks = tile.numBlocks;
  Value kvMatrix = tile.kvMatrix;
  Value buffer = claimQBuffer(tileIndex, tile.id);
  expectBytes(qFull(buffer), spec.qBytes());
  loadTile(qMap, mul(buffer, c32(spec.qBytes())), spec.blockR(), tile.qStart,
           tile.qMatrix, qFull(buffer));
  OpBuilder::InsertionGuard guard(b);
  auto loop = scf::ForOp::create(b, loc, firstBlock, numBlocks, c32(1));
  b.setInsertionPointToStart(loop.getBody());
  Value j = loop.getInductionVar();
  Value stage = stageOf(j);
  // A stage is free once both consumers released it in the previous round
  // (a fresh barrier passes the wait on parity 1).
  Value parity = arith::XOrIOp::create(b, loc, parityOf(j), c32(1));
  Value row = mul(j, c32(spec.blockC));
  waitBarrier(kEmpty(stage), parity);
  expectBytes(kFull(stage), spec.kvTileBytes());
  loadTile(kMap, kOffset(stage), spec.blockC, row, kvMatrix, kFull(stage));
  waitBarrier(vEmpty(stage), parity);
  expectBytes(vFull(stage), spec.kvTileBytes());
  loadTile(vMap, vOffset(stage), spec.blockC, row, kvMatrix, vFull(stage));
}

void KernelBuilder::emitConsumer(Value consumer) {
  NVVM::SetMaxRegisterOp::create(b, loc, spec.consumerRegisters,
                                 NVVM::SetMaxRegisterAction::increase);
  qRows = mul(consumer, c32(kRowsPerConsumer * kSwizzleBytes));
  epilogueBarrier = add(c32(kEpilogueBarrier), consumer);

  // Ping-pong: consumer c waits on barrier 1 + c for its turn on the
  // tensor cores and hands the turn over on the other's after issuing.
  // With three consumers the turn goes round: c hands it to (c + 1) mod 3.
  // Each named barrier joins one waiting and one arriving warpgroup.
  Value ownTurn = add(c32(kPingPongBarrier), consumer);
  Value otherTurn = add(c32(kPingPongBarrier),
                        spec.consumers == 2
                            ? sub(c32(1), consumer)
                            : remu(add(consumer, c32(1)), c32(spec.consumers)));
  Value pairThreads = c32(2 * 128);
  auto waitTurn = [&] {
    if (spec.pingPong)
      NVVM::BarrierOp::create(b, loc, Type(), ownTurn, pairThreads,
                              NVVM::BarrierReductionAttr(), Value());
  };
  auto passTurn = [&] {
    if (spec.pingPong)
      NVVM::BarrierArriveOp::create(b, loc, otherTurn, pairThreads);
  };
  if (spec.pingPong) {
    // Consumer 0 goes first: it pre-arrives on its own barrier.
    auto ifFirst = scf::IfOp::create(b, loc, eq(consumer, c32(0)), false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifFirst.thenBlock());
    NVVM::BarrierArriveOp::create(b, loc, ownTurn, pairThreads);
  }
  if (spec.qBuffers == 1) {
    emitTileLoop([&](const AttentionTile &tile, Value tileIndex, ValueRange) {
      emitConsumerTile(consumer, tile, tileIndex, waitTurn, passTurn,
                       /*previous=*/nullptr);
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
          return packPending(
              *emitConsumerTile(consumer, tile, tileIndex, waitTurn, passTurn,
                                previous ? &*previous : nullptr));
        },
        [&](ValueRange last) {
          finishPendingTile(unpackPending(last), waitTurn, passTurn);
        });
  }
  if (spec.tmaStore) {
    // The shared memory the TMA stores read must outlive them.
    auto ifIssuer = scf::IfOp::create(b, loc, isStoreIssuer(), false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifIssuer.thenBlock());
    NVVM::CpAsyncBulkWaitGroupOp::create(b, loc, 0, UnitAttr());
  }
}

SmallVector<Value> KernelBuilder::packPending(const PendingTile &tile) {
  SmallVector<Value> v(tile.state.o);
  v.append(
      {tile.state.m[0], tile.state.m[1], tile.state.l[0], tile.state.l[1]});
  v.append(tile.last.p);
  v.append({tile.last.alpha[0], tile.last.alpha[1]});
  if (tile.last.moved)
    v.push_back(tile.last.moved);
  v.append({tile.vStage, tile.vParity, tile.row0, tile.qMatrix});
  return v;
}

KernelBuilder::PendingTile KernelBuilder::unpackPending(ValueRange v) {
  int64_t oRegs = spec.headDim / 2, pRegs = spec.blockC / 4;
  PendingTile tile;
  size_t i = 0;
  tile.state.o.assign(v.begin(), v.begin() + oRegs);
  i += oRegs;
  tile.state.m = {v[i], v[i + 1]};
  tile.state.l = {v[i + 2], v[i + 3]};
  i += 4;
  tile.last.p.assign(v.begin() + i, v.begin() + i + pRegs);
  i += pRegs;
  tile.last.alpha = {v[i], v[i + 1]};
  i += 2;
  if (spec.rescaleThreshold >= 0)
    tile.last.moved = v[i++];
  tile.vStage = v[i];
  tile.vParity = v[i + 1];
  tile.row0 = v[i + 2];
  tile.qMatrix = v[i + 3];
  return tile;
}

void KernelBuilder::storeTile(ArrayRef<Value> o, std::array<Value, 2> m,
                              std::array<Value, 2> l, Value row0, Value qMatrix,
                              Value stage) {
  Value lseBase = gep(globalPtr, f32, lsePtr, mul(ext64(qMatrix), ext64(nq)));
  if (!spec.tmaStore) {
    // O / l and LSE straight from registers: each quad writes 16 B of a
    // row per 8 columns.
    Value oBase = gep(globalPtr, half, oPtr,
                      mul(ext64(qMatrix), mul(ext64(nq), c64(spec.headDim))));
    storeRows(o, m, l, row0, nq, oBase, lseBase, spec.headDim, t);
    return;
  }
  std::array<RowTotal, 2> total = {rowTotal(l[0]), rowTotal(l[1])};
  // The staging tile is free once the previous TMA store has read it.
  {
    auto ifIssuer = scf::IfOp::create(b, loc, isStoreIssuer(), false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifIssuer.thenBlock());
    NVVM::CpAsyncBulkWaitGroupOp::create(b, loc, 0, b.getUnitAttr());
  }
  syncConsumerWarps();
  // stmatrix.x4 writes four 8 x 8 blocks of f16 pairs, laid out as the
  // accumulator (thread t: row t / 4, columns 2 (t % 4) ..): column groups
  // i and i + 1 of rows g and g + 8. Lane L gives the address of row L % 8
  // of block L / 8: warp row 8 ((L / 8) % 2) + L % 8, column group
  // i + L / 16, its 16-B chunk XORed with the row mod 8 (128-B swizzle).
  Value blockOf = divu(lane, c32(8));
  Value rowInBlock = remu(lane, c32(8));
  Value row =
      add(add(mul(warpInGroup, c32(16)), mul(remu(blockOf, c32(2)), c32(8))),
          rowInBlock);
  Value rowAddress = add(stage, mul(row, c32(kSwizzleBytes)));
  Value secondGroup = divu(lane, c32(16));
  MLIRContext *ctx = b.getContext();
  for (int64_t i = 0; i < spec.headDim / 8; i += 2) {
    SmallVector<Value> pairs;
    for (int64_t group : {i, i + 1})
      for (int64_t h = 0; h < 2; ++h)
        pairs.push_back(
            packPair(fmul(o[4 * group + 2 * h], total[h].inverse),
                     fmul(o[4 * group + 2 * h + 1], total[h].inverse)));
    Value chunk =
        arith::XOrIOp::create(b, loc, add(c32(i % 8), secondGroup), rowInBlock);
    Value offset =
        add(add(rowAddress, c32((i / 8) * spec.blockR() * kSwizzleBytes)),
            mul(chunk, c32(16)));
    NVVM::StMatrixOp::create(
        b, loc, sharedAt(offset), pairs,
        NVVM::MMALayoutAttr::get(ctx, NVVM::MMALayout::row),
        NVVM::LdStMatrixShapeAttr::get(ctx, 8, 8),
        NVVM::LdStMatrixEltTypeAttr::get(ctx, NVVM::LdStMatrixEltType::B16));
  }
  // The generic-proxy writes become visible to the TMA (async proxy), then
  // one thread stores the 64 rows.
  NVVM::FenceProxyOp::create(
      b, loc, NVVM::ProxyKind::async_shared,
      NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
  syncConsumerWarps();
  {
    auto ifIssuer = scf::IfOp::create(b, loc, isStoreIssuer(), false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifIssuer.thenBlock());
    // The issuer is warp 0, lane 0: its row0 is the block's first row.
    storeRowBlock(stage, spec.blockR() * kSwizzleBytes, row0, qMatrix);
    NVVM::CpAsyncBulkCommitGroupOp::create(b, loc);
  }
  for (int64_t h = 0; h < 2; ++h)
    storeLse(total[h], m[h], add(row0, c32(8 * h)), nq, lseBase, t);
}

void KernelBuilder::finishPendingTile(const PendingTile &tile,
                                      const std::function<void()> &waitTurn,
                                      const std::function<void()> &passTurn) {
  SmallVector<Value> o =
      fenceOperands(rescale(tile.state.o, tile.last.alpha, tile.last.moved));
  waitBarrier(vFull(tile.vStage), tile.vParity);
  waitTurn();
  o = issueValues(tile.last.p, o, vOffset(tile.vStage));
  passTurn();
  NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 0);
  o = fenceOperands(o);
  releaseTile(vEmpty(tile.vStage));
  storeTile(o, tile.state.m, tile.state.l, tile.row0, tile.qMatrix,
            stagingRows(c32(0)));
}

std::optional<KernelBuilder::PendingTile> KernelBuilder::emitConsumerTile(
    Value consumer, const AttentionTile &tile, Value tileIndex,
    const std::function<void()> &waitTurn,
    const std::function<void()> &passTurn, const PendingTile *previous) {
  int64_t oRegs = spec.headDim / 2;
  int64_t pRegs = spec.blockC / 4;
  Value qStart = tile.qStart, qMatrix = tile.qMatrix;
  Value firstBlock = tile.firstBlock, unmaskedEnd = tile.unmaskedEnd,
        numBlocks = tile.numBlocks;
  Value row0 = add(add(qStart, mul(consumer, c32(kRowsPerConsumer))),
                   add(mul(warpInGroup, c32(16)), g));
  Value negInf = cf(-std::numeric_limits<double>::infinity());

  Value qBuffer = qBufferOf(tileIndex);
  qTile = add(qRows, mul(qBuffer, c32(spec.qBytes())));
  waitBarrier(qFull(qBuffer), qRoundOf(tileIndex));

  // Prologue: S of the first block, its softmax (O is still zero). In the
  // cross-tile pipeline the previous tile's last P V goes to the tensor
  // cores behind it, as in the loop below.
  RowState state;
  state.o.assign(oRegs, cf(0.0));
  state.m = {negInf, negInf};
  state.l = {cf(0.0), cf(0.0)};
  Value stage0 = stageOf(firstBlock);
  waitBarrier(kFull(stage0), parityOf(firstBlock));
  waitTurn();
  SmallVector<Value> s = issueScores(kOffset(stage0));
  // No branch may separate a wgmma from its wait: ptxas serializes every
  // wgmma of the kernel when other instructions (phi copies) touch the
  // accumulators in between. Hence the first tile is peeled.
  SmallVector<Value> previousO;
  if (previous) {
    previousO = fenceOperands(
        rescale(previous->state.o, previous->last.alpha, previous->last.moved));
    waitBarrier(vFull(previous->vStage), previous->vParity);
    previousO =
        issueValues(previous->last.p, previousO, vOffset(previous->vStage));
  }
  passTurn();
  // Softmax of S_0 under the previous tile's last P V.
  NVVM::WgmmaWaitGroupSyncOp::create(b, loc,
                                     previous && spec.intraOverlap ? 1 : 0);
  s = fenceOperands(s);
  releaseTile(kEmpty(stage0));
  BlockStep first =
      softmax(s, state, /*masked=*/true, mul(firstBlock, c32(spec.blockC)),
              row0, nk, scaleLog2);
  if (previous) {
    NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 0);
    previousO = fenceOperands(previousO);
    releaseTile(vEmpty(previous->vStage));
    storeTile(previousO, previous->state.m, previous->state.l, previous->row0,
              previous->qMatrix, stagingRows(c32(0)));
  }

  // Loop state: O, m, l, P of the previous block, and its alpha (+ moved).
  bool conditional = spec.rescaleThreshold >= 0;
  auto pack = [&](const RowState &st, const BlockStep &step) {
    SmallVector<Value> v(st.o);
    v.append({st.m[0], st.m[1], st.l[0], st.l[1]});
    v.append(step.p);
    v.append({step.alpha[0], step.alpha[1]});
    if (conditional)
      v.push_back(step.moved);
    return v;
  };
  auto unpack = [&](ValueRange v, RowState &st, BlockStep &step) {
    st.o.assign(v.begin(), v.begin() + oRegs);
    st.m = {v[oRegs], v[oRegs + 1]};
    st.l = {v[oRegs + 2], v[oRegs + 3]};
    step.p.assign(v.begin() + oRegs + 4, v.begin() + oRegs + 4 + pRegs);
    step.alpha = {v[oRegs + 4 + pRegs], v[oRegs + 5 + pRegs]};
    step.moved = conditional ? v[oRegs + 6 + pRegs] : Value();
  };

  auto emitLoop = [&](Value begin, Value end, ValueRange init, bool masked) {
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
    waitBarrier(kFull(stage), parityOf(j));
    waitTurn();
    SmallVector<Value> sj = issueScores(kOffset(stage));
    // O of the blocks before j - 1 moves to block j - 1's base, then
    // O += P_{j-1} V_{j-1} goes to the tensor cores behind S_j.
    SmallVector<Value> o = fenceOperands(rescale(st.o, prev.alpha, prev.moved));
    waitBarrier(vFull(prevStage), parityOf(prevJ));
    o = issueValues(prev.p, o, vOffset(prevStage));
    passTurn();
    // Softmax of S_j under P_{j-1} V_{j-1} (intra-warpgroup overlap).
    NVVM::WgmmaWaitGroupSyncOp::create(b, loc, spec.intraOverlap ? 1 : 0);
    sj = fenceOperands(sj);
    releaseTile(kEmpty(stage));
    BlockStep step =
        softmax(sj, st, masked, mul(j, c32(spec.blockC)), row0, nk, scaleLog2);
    NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 0);
    st.o = fenceOperands(o);
    releaseTile(vEmpty(prevStage));
    scf::YieldOp::create(b, loc, pack(st, step));
    return SmallVector<Value>(loop.getResults());
  };
  Value second = add(firstBlock, c32(1));
  Value unmaskedBegin = arith::MaxUIOp::create(b, loc, second, firstBlock);
  Value unmaskedStop =
      arith::MaxUIOp::create(b, loc, unmaskedEnd, unmaskedBegin);
  SmallVector<Value> after =
      emitLoop(unmaskedBegin, unmaskedStop, pack(state, first), false);
  after = emitLoop(unmaskedStop, numBlocks, after, true);

  // Epilogue: the last block's P V.
  BlockStep last;
  unpack(after, state, last);
  // Every S of the tile has retired (each loop iteration ends with
  // wait_group 0): Q is free, and a persistent producer loads the next
  // tile's Q under this tile's last P V and epilogue.
  releaseTile(qEmpty(qBuffer));
  Value lastJ = sub(numBlocks, c32(1));
  Value lastStage = stageOf(lastJ);
  if (spec.qBuffers == 2) {
    PendingTile pending;
    pending.state = state;
    pending.last = last;
    pending.vStage = lastStage;
    pending.vParity = parityOf(lastJ);
    pending.row0 = row0;
    pending.qMatrix = qMatrix;
    return pending;
  }
  SmallVector<Value> o =
      fenceOperands(rescale(state.o, last.alpha, last.moved));
  waitBarrier(vFull(lastStage), parityOf(lastJ));
  waitTurn();
  o = issueValues(last.p, o, vOffset(lastStage));
  passTurn();
  NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 0);
  o = fenceOperands(o);
  releaseTile(vEmpty(lastStage));
  storeTile(o, state.m, state.l, row0, qMatrix, stagingRows(qBuffer));
  return std::nullopt;
}

void KernelBuilder::emitTileLoop(llvm::function_ref<SmallVector<Value>(
                                     const AttentionTile &, Value, ValueRange)>
                                     body,
                                 llvm::function_ref<void(ValueRange)> finish) {
  Value first = NVVM::BlockIdXOp::create(b, loc, i32);
  if (!spec.persistent) {
    // One tile per CTA (grid = tiles): the ring starts empty.
    AttentionTile tile = decodeTile(first);
    tileFirst = tile.firstBlock;
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
  // Loop state: the ring's phase bits, the tile count, the body's values.
  SmallVector<Value> init = {c32(0), c32(0)};
  if (finish) {
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
    phaseBits = loop.getRegionIterArgs()[0];
    Value tileIndex = loop.getRegionIterArgs()[1];
    SmallVector<Value> after =
        emitLoopTile(loop.getInductionVar(), tileIndex,
                     loop.getRegionIterArgs().drop_front(2), body);
    SmallVector<Value> yielded = {after[0], add(tileIndex, c32(1))};
    yielded.append(after.begin() + 1, after.end());
    scf::YieldOp::create(b, loc, yielded);
  }
  phaseBits = Value();
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
  // body's values.
  SmallVector<Value> init = {first, c32(0), c32(0)};
  if (finish) {
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
    SmallVector<Value> done =
        emitLoopTile(after->getArgument(0), tileIndex,
                     after->getArguments().drop_front(3), body);
    Value nextIndex = add(tileIndex, c32(1));
    SmallVector<Value> yielded = {nextTile(nextIndex), done[0], nextIndex};
    yielded.append(done.begin() + 1, done.end());
    scf::YieldOp::create(b, loc, yielded);
  }
  phaseBits = Value();
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
  AttentionTile tile = decodeTile(id);
  tileFirst = tile.firstBlock;
  SmallVector<Value> next = body(tile, tileIndex, carried);
  SmallVector<Value> after = {
      advancePhases(phaseBits, sub(tile.numBlocks, tile.firstBlock))};
  after.append(next.begin(), next.end());
  return after;
}

Value KernelBuilder::nextTile(Value tileIndex) {
  if (!inProducer) {
    Value buffer = qBufferOf(tileIndex);
    waitBarrier(qFull(buffer), qRoundOf(tileIndex));
    return LLVM::LoadOp::create(b, loc, i32, tileSlot(buffer), /*alignment=*/4,
                                /*isVolatile=*/true);
  }
  Value taken =
      LLVM::AtomicRMWOp::create(b, loc, LLVM::AtomicBinOp::add, tileCounterPtr,
                                c32(1), LLVM::AtomicOrdering::monotonic);
  Value last = eq(taken, sub(tileCount(), c32(1)));
  auto ifLast = scf::IfOp::create(b, loc, last, false);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifLast.thenBlock());
    LLVM::AtomicRMWOp::create(b, loc, LLVM::AtomicBinOp::xchg, tileCounterPtr,
                              c32(0), LLVM::AtomicOrdering::monotonic);
  }
  return add(NVVM::GridDimXOp::create(b, loc, i32), taken);
}

Value KernelBuilder::claimQBuffer(Value tileIndex, Value id) {
  // The Q buffer is free once the consumers finished its previous tile.
  Value buffer = qBufferOf(tileIndex);
  waitBarrier(qEmpty(buffer),
              arith::XOrIOp::create(b, loc, qRoundOf(tileIndex), c32(1)));
  if (spec.dynamicTiles)
    LLVM::StoreOp::create(b, loc, id, tileSlot(buffer), /*alignment=*/4,
                          /*isVolatile=*/true);
  return buffer;
}

void KernelBuilder::announceEnd(Value endId, Value tileIndex) {
  Value buffer = claimQBuffer(tileIndex, endId);
  NVVM::MBarrierArriveOp::create(b, loc, Type(), qFull(buffer), Value());
}

LLVM::LLVMFuncOp KernelBuilder::build(gpu::GPUModuleOp module) {
  OpBuilder::InsertionGuard guard(b);
  LLVM::LLVMFuncOp fn =
      beginKernel(module, spec.kernelName(), spec.threads(), spec.ctasPerSM,
                  spec.abi);
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
  lane = remu(tid, c32(32));
  g = divu(lane, c32(4));
  t = remu(lane, c32(4));

  // Barrier initialisation, made visible to the async proxy (TMA) before
  // any thread uses the barriers.
  {
    auto ifInit = scf::IfOp::create(b, loc, eq(tid, c32(0)), false);
    OpBuilder::InsertionGuard g2(b);
    b.setInsertionPointToStart(ifInit.thenBlock());
    // "full": one producer arrival (+ TMA bytes); "empty": one arrival per
    // consumer warp.
    Value producerArrivals = c32(1), warpArrivals = c32(4 * spec.consumers);
    for (int64_t q = 0; q < spec.qBuffers; ++q) {
      NVVM::MBarrierInitOp::create(b, loc, qFull(c32(q)), producerArrivals,
                                   Value());
      NVVM::MBarrierInitOp::create(b, loc, qEmpty(c32(q)), warpArrivals,
                                   Value());
    }
    for (int64_t s = 0; s < spec.stages; ++s) {
      for (Value full : {kFull(c32(s)), vFull(c32(s))})
        NVVM::MBarrierInitOp::create(b, loc, full, producerArrivals, Value());
      for (Value empty : {kEmpty(c32(s)), vEmpty(c32(s))})
        NVVM::MBarrierInitOp::create(b, loc, empty, warpArrivals, Value());
    }
    NVVM::FenceMbarrierInitOp::create(b, loc);
  }
  NVVM::Barrier0Op::create(b, loc);

  auto roles = scf::IfOp::create(b, loc, eq(group, c32(0)), true);
  {
    OpBuilder::InsertionGuard g2(b);
    b.setInsertionPointToStart(roles.thenBlock());
    emitProducer();
    b.setInsertionPointToStart(roles.elseBlock());
    emitConsumer(sub(group, c32(1)));
  }
  LLVM::ReturnOp::create(b, loc, ValueRange{});
  return fn;
}

/// The kernel `op`'s schedule describes, or a diagnostic naming what the
/// sm_90a kernel cannot do and which pass sets the missing piece.
FailureOr<KernelSpec> specOf(fagpu::AttentionOp op) {
  auto fail = [&](const Twine &msg) -> FailureOr<KernelSpec> {
    return op.emitOpError() << "cannot be lowered to sm_90a wgmma: " << msg;
  };
  FailureOr<SoftmaxConfig> config = tensorCoreConfigOf(op, "sm_90a wgmma");
  if (failed(config))
    return failure();
  fagpu::ScheduleFields s = fagpu::fieldsOf(op.getSchedule());
  int64_t d = op.getHeadDim();
  KernelSpec spec;
  static_cast<SoftmaxConfig &>(spec) = *config;
  static_cast<fagpu::SM90Layout &>(spec) = fagpu::sm90Layout(d, s);
  if (s.blockR != s.consumers * kRowsPerConsumer || s.consumers < 1 ||
      s.consumers > 3)
    return fail("block_r must be 64, 128 or 192 (one, two or three consumer "
                "warpgroups of 64 rows), got " +
                Twine(s.blockR));
  if (s.consumers == 3 && d != 64)
    return fail("block_r = 192 needs D = 64 (three consumers get 160 "
                "registers each; at D = 128 their S, O and P spill)");
  if (s.consumers == 1 && d > 128)
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
  spec.bf16 = op.isBF16();
  spec.pingPong = s.pingPong;
  spec.intraOverlap = s.overlapSoftmax;
  spec.persistent = s.scheduler != fagpu::TileScheduler::Single;
  spec.producerRegisters = s.producerRegisters;
  spec.consumerRegisters = s.consumerRegisters;
  spec.abi = fagpu::kernelParams(fagpu::Target::sm_90a, s,
                                 spec.bf16 ? "bf16" : "f16");
  return spec;
}

} // namespace

LogicalResult mlir::fa::lowerSM90Kernels(ModuleOp module) {
  auto build = [](OpBuilder &b, Location loc, const KernelSpec &spec,
                  gpu::GPUModuleOp kernels) {
    return KernelBuilder(b, loc, spec).build(kernels);
  };
  auto launch = [](fagpu::AttentionOp op, LLVM::LLVMFuncOp kernel,
                   const KernelSpec &spec) {
    replaceWithTensorMapLaunch(
        op, kernel,
        TensorMapLaunch{spec.headDim, spec.blockR(), spec.bf16, spec.threads(),
                        spec.sharedBytes(), spec.abi});
  };
  return lowerEachKernel<KernelSpec>(module, fagpu::Target::sm_90a, specOf,
                                     build, launch);
}
