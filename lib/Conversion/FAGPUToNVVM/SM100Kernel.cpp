//===- SM100Kernel.cpp - FlashAttention-4 on Blackwell in fagpu ops -------===//
//
// fagpu-build-kernels for sm_100a: writes the forward kernel of an
// fa.attention with the structure of FlashAttention-4 in fagpu ops (each
// lowered by its own pattern in WarpgroupToNVVM.cpp), with the block loops
// and ring positions in scf/arith. The accumulators live in tensor memory
// (TMEM), one thread issues the tensor-core work, and the softmax warps
// own one query row per thread.
//
// COMPILE-VERIFIED ONLY: no Blackwell GPU is available to this project.
// ptxas (--gpu-name sm_100a) accepts the PTX and lit checks its
// structure; no result of this kernel has ever been computed.
//
// Roles (fagpu.tcgen05_roles; 192 threads, one CTA per tile of B_r = 128
// query rows):
//  * warps 0-3, softmax: tcgen05.mma with M = 128 writes row i of its
//    accumulator to TMEM lane i, and warp w may only touch lanes
//    32w..32w+31, so thread i of the warpgroup owns row i: its scores are
//    a `lanes` fragment (fagpu.tmem_load), its row max and row sum need no
//    shuffles;
//  * warp 4, loads: lane 0 issues the TMA loads (Q, a fill_once pipeline,
//    then the K/V ring), as on Hopper;
//  * warp 5, MMA: allocates TMEM (fagpu.tmem_alloc, 512 columns for the
//    default tiles) and lane 0 issues every tcgen05.mma (fagpu.mma with a
//    !fagpu.tmem accumulator), each group followed by commits
//    (fagpu.mma_commit, fagpu.pipeline_release {commit}) that arrive on
//    mbarriers when the MMAs complete.
//
// TMEM columns (32-bit, 128 lanes): S/P buffer 0 at [0, B_c), buffer 1 at
// [B_c, 2 B_c), O at [2 B_c, 2 B_c + D). P_j overwrites the first B_c / 2
// columns of its S buffer as f16/bf16 pairs (fagpu.tmem_store into an f16
// slice) and is the A operand of O += P_j V_j straight from TMEM.
//
// The runtimes launch only Nk >= 1, so every tile visits at least one
// K/V block (the tile decoder keeps windowed ranges non-empty too).
//
// Order of work for block j (buffer b = j mod 2), barriers as
// !fagpu.barriers:
//   MMA:     wait o_done(j-1) (P_{j-1} read), issue S_{j+1} into 1 - b,
//            release K, commit s_full[1 - b];  wait p_full[b], issue
//            O += P_j V_j, release V, commit o_done.
//   softmax: wait s_full[b], ld S_j, softmax_step (mask, FA4 base update,
//            P = exp2(..)), wait o_done(j-1), rescale O in TMEM (only if a
//            row of the warp moved its base), st P_j, arrive p_full[b].
// tcgen05.mma instructions are ordered only when they share the
// accumulator, hence the explicit o_done wait before S_{j+1} overwrites the
// buffer P_{j-1} is read from.
//
//===----------------------------------------------------------------------===//

#include "KernelLowerings.h"

#include "../Common/TMAKernel.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::fa;

namespace {

constexpr int64_t kBlockR = fagpu::kSM100BlockR;
constexpr int64_t kLoadWarp = 4; // warps 0-3 are the softmax warpgroup
constexpr int64_t kMmaWarp = 5;
constexpr int64_t kThreads = 32 * 6;

/// The mask and FA4 choices (SoftmaxConfig) and the shared-memory layout
/// (fagpu::SM100Layout) the kernel is built for, and the attention's
/// score_mod / mask_mod (KernelModifications).
struct KernelSpec : SoftmaxConfig, fagpu::SM100Layout, KernelModifications {
  bool bf16 = false;
  /// The kernel's parameters, in launch order.
  SmallVector<fagpu::KernelParam> abi;

  /// The accumulators in TMEM, and the columns fagpu-tmem-accumulators
  /// allocated for them.
  fagpu::TmemLayout tmem;
  int64_t tmemColumns = 0;

  int64_t threads() const { return kThreads; }
  int64_t oColumn() const { return tmem.oColumn(); }
  std::string kernelName() const {
    return "fa4_sm100_d" + std::to_string(headDim) + "_br" +
           std::to_string(kBlockR) + "_bc" + std::to_string(blockC) + "_s" +
           std::to_string(stages) + (bf16 ? "_bf16" : "_f16") +
           (causal ? "_causal" : "") + modificationsName + suffix();
  }
};

/// Writes the kernel in fagpu ops. Values are named like the math: `s`
/// scores, `p` probabilities, `o` accumulator, `m` running max (or FA4
/// base), `l` sum.
class KernelBuilder : public TMAKernelEmitter {
public:
  KernelBuilder(OpBuilder &b, Location loc, const KernelSpec &spec)
      : TMAKernelEmitter(b, loc, spec.bf16, spec, spec.headDim, kBlockR,
                         spec.blockC),
        spec(spec) {
    MLIRContext *ctx = b.getContext();
    using fagpu::FragmentLayout;
    qTileType = fagpu::SharedTileType::get(ctx, {kBlockR, spec.headDim}, half,
                                           kBlockR);
    kvTileType = fagpu::SharedTileType::get(ctx, {spec.blockC, spec.headDim},
                                            half, spec.blockC);
    scoresTmem = fagpu::TmemType::get(ctx, {kBlockR, spec.blockC}, f32);
    probsTmem = fagpu::TmemType::get(ctx, {kBlockR, spec.blockC}, half);
    outTmem = fagpu::TmemType::get(ctx, {kBlockR, spec.headDim}, f32);
    scoresType = fagpu::FragmentType::get(ctx, {kBlockR, spec.blockC}, f32,
                                          FragmentLayout::Lanes);
    rowType = fagpu::FragmentType::get(ctx, {kBlockR}, f32,
                                       FragmentLayout::Lanes);
  }

  LLVM::LLVMFuncOp build(gpu::GPUModuleOp module);

private:
  /// K and V, the two buffers of each stage of the K/V ring.
  static constexpr int64_t kKey = 0, kValue = 1;

  /// Ring position of K/V block j (the ring starts empty at firstBlock):
  /// its stage and the parity a consumer waits (`producer`: acquires) with.
  fagpu::PipelinePositionOp kvPosition(Value j, bool producer = false) {
    return fagpu::PipelinePositionOp::create(
        b, loc, kvPipe, sub(j, tile.firstBlock), Value(), producer);
  }
  Value stageOf(Value j) { return kvPosition(j).getStage(); }
  Value ringParity(Value j, bool producer = false) {
    return kvPosition(j, producer).getParity();
  }
  /// Local block index i = j - firstBlock: S/P buffer i mod 2, used for
  /// the (i / 2)-th time.
  Value bufferOf(Value i) { return remu(i, c32(2)); }

  /// The TMEM columns of `type` from `column` on.
  Value tmemSlice(fagpu::TmemType type, Value column) {
    return fagpu::TmemSliceOp::create(b, loc, type, tmem, column);
  }
  Value kvTile(Value stage, int64_t buffer) {
    return fagpu::PipelineTileOp::create(b, loc, kvTileType, kvPipe, stage,
                                         buffer);
  }
  /// Use `use` of `barriers` has completed, and the TMEM it hands over
  /// may be touched.
  void waitHandOff(Value barriers, Value use) {
    fagpu::BarrierWaitOp::create(b, loc, barriers, use);
  }
  void commit(Value barriers, Value use) {
    fagpu::MmaCommitOp::create(b, loc, barriers, use);
  }

  void emitLoads();
  void emitMma();
  void emitSoftmax();
  /// S_j = Q K_j^T into buffer (j - firstBlock) mod 2.
  void issueScores(Value j);

  const KernelSpec &spec;
  fagpu::SharedTileType qTileType, kvTileType;
  fagpu::TmemType scoresTmem, probsTmem, outTmem;
  fagpu::FragmentType scoresType, rowType;
  Value qPipe, kvPipe;          // Q (loaded once) and the K/V ring
  Value sFull, pFull, oDone;    // the TMEM hand-offs
  Value tid, warp;
  Value tmem;                     // the allocation
  SmallVector<Value> capturePtrs; // the regions' captured tensors
  AttentionTile tile;
};

void KernelBuilder::emitLoads() {
  // The ring starts empty: a fresh "empty" barrier passes the wait on
  // parity 1.
  prefetchTensorMaps();
  fagpu::TmaLoadOp::create(b, loc, qMap, tile.qStart, queryMatrix(tile), qPipe,
                           c32(0), 0, Value());
  OpBuilder::InsertionGuard guard(b);
  auto loop =
      scf::ForOp::create(b, loc, tile.firstBlock, tile.numBlocks, c32(1));
  b.setInsertionPointToStart(loop.getBody());
  Value j = loop.getInductionVar();
  Value stage = stageOf(j);
  Value parity = ringParity(j, /*producer=*/true);
  Value row = mul(j, c32(spec.blockC));
  for (int64_t buffer : {kKey, kValue}) {
    fagpu::PipelineAcquireOp::create(b, loc, kvPipe, stage, parity, buffer);
    fagpu::TmaLoadOp::create(b, loc, buffer == kKey ? kMap : vMap, row,
                             keyValueMatrix(tile), kvPipe, stage, buffer,
                             Value());
  }
}

void KernelBuilder::issueScores(Value j) {
  Value i = sub(j, tile.firstBlock);
  Value stage = stageOf(j);
  fagpu::PipelineWaitOp::create(b, loc, kvPipe, stage, ringParity(j), kKey);
  Value buffer = bufferOf(i);
  Value s = tmemSlice(scoresTmem, mul(buffer, c32(spec.blockC)));
  Value q = fagpu::PipelineTileOp::create(b, loc, qTileType, qPipe, c32(0), 0);
  fagpu::MmaOp::create(b, loc, Type(), q, kvTile(stage, kKey), s, Value(),
                       /*mn_major=*/false);
  // K_j is free once these MMAs completed; S_j is ready for the softmax.
  fagpu::PipelineReleaseOp::create(b, loc, kvPipe, stage, kKey,
                                   /*commit=*/true);
  commit(sFull, i);
}

void KernelBuilder::emitMma() {
  fagpu::PipelineWaitOp::create(b, loc, qPipe, c32(0), c32(0), 0);
  issueScores(tile.firstBlock);
  OpBuilder::InsertionGuard guard(b);
  auto loop =
      scf::ForOp::create(b, loc, tile.firstBlock, tile.numBlocks, c32(1));
  b.setInsertionPointToStart(loop.getBody());
  Value j = loop.getInductionVar();
  Value i = sub(j, tile.firstBlock);
  Value next = add(j, c32(1));
  {
    // S_{j+1} goes to the buffer P_{j-1} is read from: wait until
    // O += P_{j-1} V_{j-1} completed (MMAs on different accumulators are
    // not ordered), then let it run under the softmax of S_j.
    auto ifNext = scf::IfOp::create(b, loc, ult(next, tile.numBlocks), false);
    OpBuilder::InsertionGuard g2(b);
    b.setInsertionPointToStart(ifNext.thenBlock());
    auto ifPrev = scf::IfOp::create(b, loc, ult(c32(0), i), false);
    b.setInsertionPointToStart(ifPrev.thenBlock());
    waitHandOff(oDone, sub(i, c32(1)));
    b.setInsertionPointAfter(ifPrev);
    issueScores(next);
  }
  Value buffer = bufferOf(i);
  waitHandOff(pFull, i);
  Value stage = stageOf(j);
  fagpu::PipelineWaitOp::create(b, loc, kvPipe, stage, ringParity(j), kValue);
  Value o = tmemSlice(outTmem, c32(spec.oColumn()));
  Value p = tmemSlice(probsTmem, mul(buffer, c32(spec.blockC)));
  Value notFirst = ult(c32(0), i);
  fagpu::MmaOp::create(b, loc, Type(), p, kvTile(stage, kValue), o, notFirst,
                       /*mn_major=*/true);
  fagpu::PipelineReleaseOp::create(b, loc, kvPipe, stage, kValue,
                                   /*commit=*/true);
  commit(oDone, i);
}

void KernelBuilder::emitSoftmax() {
  Value negInf = cf(-std::numeric_limits<double>::infinity());
  Value row = add(tile.qStart, tid);
  int64_t bc = spec.blockC;
  Value o = tmemSlice(outTmem, c32(spec.oColumn()));

  // One loop over blocks [begin, end), masked or not; carries m and l.
  auto emitLoop = [&](Value begin, Value end, ValueRange init, bool masked) {
    auto loop = scf::ForOp::create(b, loc, begin, end, c32(1), init);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value j = loop.getInductionVar();
    Value m = loop.getRegionIterArgs()[0], l = loop.getRegionIterArgs()[1];
    Value i = sub(j, tile.firstBlock);
    Value buffer = bufferOf(i);
    Value sColumn = mul(buffer, c32(bc));
    waitHandOff(sFull, i);
    Value s = fagpu::TmemLoadOp::create(b, loc, scoresType,
                                        tmemSlice(scoresTmem, sColumn));
    Value keyStart = mul(j, c32(bc));
    SoftmaxConfig config = spec;
    Value stepScale = scaleLog2;
    if (spec.modifiesScores()) {
      // FlexAttention's order, as in the sm_90a and sm_80 kernels: the
      // scale, the softcap, score_mod, then the masks, on the thread's row
      // of S; the step applies no softcap and takes natural-unit scores at
      // log2(e), raw ones at the kernel's scale.
      auto modify = spec.modifyScores(b, loc, s, keyStart, row, tile.batch,
                                      tile.qHead, scaleLog2, nq, nk,
                                      capturePtrs, spec.softcap, spec.maskMod);
      s = modify.getResult();
      config.softcap = 0;
      if (modify.returnsNaturalUnits())
        stepScale = cf(M_LOG2E);
    }
    auto step = createSoftmaxStep(
        b, loc, config, scoresType, rowType, s, m, l, keyStart, row, nk,
        stepScale, masked ? diagonalShift(spec, nk, nq) : Value(), Value(),
        masked);
    // O of blocks before j moves to the new base once P_{j-1} V_{j-1} has
    // landed in it (FA4: only if a row of the warp moved).
    {
      auto ifPrev = scf::IfOp::create(b, loc, ult(c32(0), i), false);
      OpBuilder::InsertionGuard g2(b);
      b.setInsertionPointToStart(ifPrev.thenBlock());
      waitHandOff(oDone, sub(i, c32(1)));
      fagpu::RescaleOp::create(b, loc, Type(), o, step.getAlpha(),
                               step.getMoved());
    }
    // P_j as f16/bf16 pairs over the first B_c / 2 columns of its buffer.
    fagpu::TmemStoreOp::create(b, loc, step.getP(),
                               tmemSlice(probsTmem, sColumn));
    fagpu::BarrierArriveOp::create(b, loc, pFull, i);
    scf::YieldOp::create(b, loc, ValueRange{step.getNewM(), step.getNewL()});
    return SmallVector<Value>(loop.getResults());
  };
  Value unmaskedStop =
      arith::MaxUIOp::create(b, loc, tile.unmaskedEnd, tile.firstBlock);
  Value m0 = fagpu::SplatOp::create(b, loc, rowType, negInf);
  Value l0 = fagpu::SplatOp::create(b, loc, rowType, cf(0.0));
  SmallVector<Value> state = emitLoop(tile.firstBlock, unmaskedStop,
                                      ValueRange{m0, l0}, /*masked=*/false);
  state = emitLoop(unmaskedStop, tile.numBlocks, state, /*masked=*/true);

  // Epilogue: once the last O is in TMEM, O / l and the LSE of this
  // thread's row.
  waitHandOff(oDone, sub(sub(tile.numBlocks, tile.firstBlock), c32(1)));
  Value l = state[1];
  auto totals = fagpu::RowTotalsOp::create(b, loc, l.getType(), l.getType(), l,
                                           /*descale=*/Value());
  fagpu::StoreTmemRowsOp::create(b, loc, o, totals.getFactor(), row,
                                 tile.qMatrix, nq, oPtr, half);
  if (spec.writesLse)
    fagpu::StoreLseOp::create(b, loc, state[0], totals.getTotal(), row, nq,
                              fagpu::LseRowsOp::create(b, loc, lsePtr.getType(),
                                                       lsePtr, tile.qMatrix,
                                                       nq),
                              /*probs_scale=*/FloatAttr());
}

LLVM::LLVMFuncOp KernelBuilder::build(gpu::GPUModuleOp module) {
  OpBuilder::InsertionGuard guard(b);
  MLIRContext *ctx = b.getContext();
  LLVM::LLVMFuncOp fn =
      beginKernel(module, spec.kernelName(), kThreads, 1, spec.abi);

  tid = NVVM::ThreadIdXOp::create(b, loc, i32);
  warp = divu(tid, c32(32));
  for (int64_t i = 0; i < spec.captures; ++i)
    capturePtrs.push_back(
        kernelArgument(fn, spec.abi, "capture" + std::to_string(i)));

  // Barriers in shared memory: q_full, the ring's, s_full[2], p_full[2],
  // o_done. p_full collects one arrival per softmax thread; every other
  // barrier one (TMA expect_tx or tcgen05.commit).
  int64_t offset = spec.barrierOffset();
  qPipe = fagpu::CreatePipelineOp::create(
      b, loc,
      fagpu::PipelineType::get(ctx, 1, 1, qTileType, /*fillOnce=*/true),
      offset, /*tile_offset=*/0);
  kvPipe = fagpu::CreatePipelineOp::create(
      b, loc, fagpu::PipelineType::get(ctx, spec.stages, 2, kvTileType),
      offset + 8, spec.kOffset(0));
  auto barriers = [&](int64_t first, int64_t count) -> Value {
    return fagpu::CreateBarriersOp::create(
        b, loc, fagpu::BarriersType::get(ctx, count), offset + 8 * first);
  };
  sFull = barriers(1 + 4 * spec.stages, 2);
  pFull = barriers(3 + 4 * spec.stages, 2);
  oDone = barriers(5 + 4 * spec.stages, 1);
  fagpu::InitBarriersOp::create(
      b, loc, ValueRange{qPipe, kvPipe, sFull, pFull, oDone},
      ArrayRef<int64_t>{1, 1, 1, kBlockR, 1});
  // TMEM: the MMA warp allocates all the columns the kernel uses.
  tmem = fagpu::TmemAllocOp::create(
      b, loc,
      fagpu::TmemType::get(ctx, {kBlockR, spec.tmemColumns}, f32), warp,
      kMmaWarp, spec.tmemSlotOffset());
  tile = decodeTile(NVVM::BlockIdXOp::create(b, loc, i32));

  auto roles = fagpu::TcgenRolesOp::create(b, loc, warp, kLoadWarp, kMmaWarp);
  {
    OpBuilder::InsertionGuard g2(b);
    b.createBlock(&roles.getSoftmax());
    emitSoftmax();
    b.createBlock(&roles.getLoad());
    emitLoads();
    b.createBlock(&roles.getMma());
    emitMma();
  }
  // Everyone is done with TMEM (the epilogue read O): free it.
  fagpu::TmemDeallocOp::create(b, loc, tmem, warp, kMmaWarp);
  LLVM::ReturnOp::create(b, loc, ValueRange{});
  return fn;
}

/// The kernel `op`'s schedule describes, or a diagnostic naming what the
/// tcgen05 kernel cannot do.
FailureOr<KernelSpec> specOf(fagpu::AttentionOp op) {
  SpecReader<KernelSpec> reader{op, "sm_100a tcgen05"};
  if (failed(reader.begin()))
    return failure();
  auto fail = [&](const Twine &why) { return reader.fail(why); };
  const fagpu::ScheduleFields &s = reader.schedule;
  int64_t d = op.getHeadDim();
  if (s.blockR != kBlockR)
    return fail("block_r must be " + Twine(kBlockR) +
                " (tcgen05.mma M, one TMEM lane per row), got " +
                Twine(s.blockR));
  if (s.blockC % 64 != 0 || s.blockC < 64 || s.blockC > 256)
    return fail("block_c must be 64, 128, 192 or 256 (whole tcgen05.ld "
                "chunks of P pairs), got " +
                Twine(s.blockC));
  fagpu::TmemLayout tmem{d, s.blockC};
  if (s.tmemColumns < tmem.usedColumns())
    return fail("the accumulators need " + Twine(tmem.usedColumns()) +
                " TMEM columns, the schedule allocates " +
                Twine(s.tmemColumns) + ": run fagpu-tmem-accumulators");
  if (s.stages < 2 || s.stages > 4)
    return fail("the kernel needs a K/V ring of 2 to 4 stages, got " +
                Twine(s.stages) + ": run fagpu-pipeline-kv");
  KernelSpec &spec = reader.spec;
  static_cast<fagpu::SM100Layout &>(spec) = fagpu::sm100Layout(d, s);
  spec.tmem = tmem;
  spec.tmemColumns = s.tmemColumns;
  spec.bf16 = op.isBF16();
  spec.abi = fagpu::kernelParams(fagpu::Target::sm_100a, s,
                                 spec.bf16 ? "bf16" : "f16");
  // Each capture a pointer parameter, after the attention's own.
  static_cast<KernelModifications &>(spec) =
      KernelModifications::of(op, spec.abi);
  if (spec.sharedBytes() > fagpu::maxSharedBytes())
    return fail("the schedule needs " + Twine(spec.sharedBytes()) +
                " bytes of shared memory, more than " +
                Twine(fagpu::maxSharedBytes() / 1024) + " KiB");
  return spec;
}

} // namespace

LogicalResult mlir::fa::buildSM100Kernels(ModuleOp module) {
  auto build = [](OpBuilder &b, Location loc, const KernelSpec &spec,
                  gpu::GPUModuleOp kernels) {
    return KernelBuilder(b, loc, spec).build(kernels);
  };
  auto launch = [](fagpu::AttentionOp op, LLVM::LLVMFuncOp kernel,
                   const KernelSpec &spec) {
    replaceWithTensorMapLaunch(op, kernel,
                               TensorMapLaunch{spec.headDim, kBlockR,
                                               spec.bf16, kThreads,
                                               spec.sharedBytes(), spec.abi,
                                               /*kvSplits=*/0,
                                               /*valueLayoutKernel=*/{}});
  };
  return lowerEachKernel<KernelSpec>(module, fagpu::Target::sm_100a, specOf,
                                     build, launch);
}
