//===- SM80Backward.cpp - FlashAttention-2's backward on mma.sync ---------===//
//
// fagpu-build-kernels for fagpu.attention_backward: the main kernel of
// FlashAttention-2's backward in fagpu ops (the preprocess D = rowsum(dO o
// O) and dQ's conversion from f32 are the tile level's own nests):
//
//  * one CTA of four warps owns a block of 64 keys of one (batch, K/V
//    head); warp w owns keys 16 w ..: K and V stay in shared memory, dK and
//    dV accumulate in registers and are written once, at the end;
//  * it visits the query blocks of 64 rows of the head's query heads (for
//    a causal mask only those that see a key of the block), Q and dO
//    through a two-stage cp.async ring: block t + 1 is in flight while t
//    is computed;
//  * per query block, every product is an mma.sync of the forward's kinds
//    (A K-major from shared memory or registers; B row-major, read
//    transposed for the MN-major products):
//      S^T = K Q^T                 P^T = exp2(S^T scale log2 e - LSE log2 e)
//      dV += P^T dO                dP^T = V dO^T
//      dS^T = P^T o (dP^T - D)     dK += dS^T Q
//      dS -> shared memory (transposed), dQ = dS K, added to dQ's f32
//      accumulator atomically (scale folded in)
//    With keys on the rows, the LSE and D are per column; P^T and dS^T
//    are the A operands of dV and dK straight from their accumulators.
//
//===----------------------------------------------------------------------===//

#include "../Common/Launch.h"
#include "../Common/NVVMEmitter.h"
#include "KernelLowerings.h"
#include "fa/Dialect/FAGPU/IR/KernelABI.h"
#include "fa/Dialect/FAGPU/IR/SharedMemory.h"
#include "fa/Model/BlockRange.h"
#include "fa/Support/IRArithmetic.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::fa;

namespace {

constexpr int64_t kWarps = 4;
constexpr int64_t kThreads = kWarps * 32;
constexpr int64_t kStages = 2;
/// Keys per CTA and query rows per block: one m16 row tile per warp.
constexpr int64_t kBlock = 64;
// The preprocess zeroes the turn counters of these query blocks.
static_assert(kBlock == fagpu::kBackwardRows);

/// What the generated kernel is specialised for.
struct BackwardSpec {
  int64_t headDim = 0;
  bool bf16 = false;
  bool causal = false, bottomRight = false;
  /// A sliding window |i' - k| < window (0: none), and the diagonal moved
  /// right by diagonalOffset keys (query i at key position i').
  int64_t window = 0, diagonalOffset = 0;
  /// dQ's adds in the order of the key blocks (semaphores).
  bool deterministic = false;
  /// dQ's adds two columns a reduction (sm_90 and later).
  bool vectorReductions = false;
  SmallVector<fagpu::KernelParam> abi;

  int64_t tileBytes() const { return kBlock * headDim * 2; }
  /// K, V, the Q / dO ring, then the dS tile [64 queries, 64 keys].
  int64_t ringOffset() const { return 2 * tileBytes(); }
  int64_t gradScoresOffset() const {
    return ringOffset() + kStages * 2 * tileBytes();
  }
  int64_t sharedBytes() const {
    return gradScoresOffset() + kBlock * kBlock * 2;
  }
  std::string kernelName() const {
    return "fa2_bwd_sm80_d" + std::to_string(headDim) + "_br64_bc64" +
           (bf16 ? "_bf16" : "_f16") + (causal ? "_causal" : "") +
           (window ? "_w" + std::to_string(window) : "") +
           (bottomRight ? "_bottom_right" : "") +
           (diagonalOffset ? "_do" + std::to_string(diagonalOffset) : "") +
           (deterministic ? "_deterministic" : "");
  }
};

class BackwardBuilder : public NVVMEmitter {
public:
  BackwardBuilder(OpBuilder &b, Location loc, const BackwardSpec &spec)
      : NVVMEmitter(b, loc, spec.bf16), spec(spec) {
    MLIRContext *ctx = b.getContext();
    using fagpu::FragmentLayout;
    auto fragment = [&](int64_t cols, Type elt, FragmentLayout layout) {
      return fagpu::FragmentType::get(ctx, {kBlock, cols}, elt, layout);
    };
    scoresType = fragment(kBlock, f32, FragmentLayout::Accumulator);
    probsType = fragment(kBlock, half, FragmentLayout::OperandA);
    gradType = fragment(spec.headDim, f32, FragmentLayout::Accumulator);
    rowsType =
        fagpu::FragmentType::get(ctx, {kBlock}, f32, FragmentLayout::Rows);
    tileType = fagpu::SharedTileType::get(ctx, {kBlock, spec.headDim}, half,
                                          kBlock, fagpu::TileLayout::RowMajor);
    gradScoresTileType = fagpu::SharedTileType::get(
        ctx, {kBlock, kBlock}, half, kBlock, fagpu::TileLayout::RowMajor);
  }

  LLVM::LLVMFuncOp build(gpu::GPUModuleOp module);

private:
  static constexpr int64_t kQuery = 0, kGradOut = 1;

  /// Element `row * D` of the rows of matrix `matrix` of a [.., N, D]
  /// tensor of `elt` at `ptr`, with N rows a matrix.
  Value matrixBase(Value ptr, Type elt, Value matrix, Value n, int64_t cols) {
    return gep(globalPtr, elt, ptr,
               mul(mul(ext64(matrix), ext64(n)), c64(cols)));
  }
  /// The query head and first row of step `t` of the CTA's loop over
  /// (query head of the group, query block).
  std::pair<Value, Value> stepOf(Value t) {
    Value member = divu(t, blocksPerHead);
    Value block = add(firstBlock, remu(t, blocksPerHead));
    return {add(mul(kvHead, group), member), mul(block, c32(kBlock))};
  }
  /// cp.async of step t's Q and dO blocks into `stage`.
  void copyStep(Value t, Value stage) {
    auto [head, q0] = stepOf(t);
    Value matrix = add(mul(batch, hq), head);
    for (auto [ptr, buffer] : {std::pair(qPtr, kQuery), {doPtr, kGradOut}})
      fagpu::CopyAsyncOp::create(
          b, loc, matrixBase(ptr, half, matrix, nq, spec.headDim), q0, nq,
          fagpu::PipelineTileOp::create(b, loc, tileType, ring, stage, buffer),
          kThreads);
  }
  /// One query block: returns (dK, dV).
  SmallVector<Value> emitStep(Value t, ValueRange grads);

  const BackwardSpec &spec;
  fagpu::FragmentType scoresType, probsType, gradType, rowsType;
  fagpu::SharedTileType tileType, gradScoresTileType;
  Value qPtr, doPtr, lsePtr, rowDotsPtr, dqPtr, semaphoresPtr;
  Value hq, nq, nk, scale, scaleLog2;
  model::VisibleBand<IRArithmetic> band;
  Value batch, kvHead, group, firstBlock, blocksPerHead, steps;
  Value warp, g, k0, keyBlock, keyBlocks;
  Value kTile, vTile, ring, gradScoresTile;
};

LLVM::LLVMFuncOp BackwardBuilder::build(gpu::GPUModuleOp module) {
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(module.getBody());
  auto smemType = LLVM::LLVMArrayType::get(b.getI8Type(), 0);
  if (!module.lookupSymbol<LLVM::GlobalOp>("fa_smem"))
    LLVM::GlobalOp::create(b, loc, smemType, /*isConstant=*/false,
                           LLVM::Linkage::External, "fa_smem", Attribute(),
                           /*alignment=*/16, /*addrSpace=*/3);
  LLVM::LLVMFuncOp fn = declareKernel(b, loc, module, spec.kernelName(),
                                      kThreads, /*ctasPerSM=*/1, spec.abi);
  auto arg = [&](StringRef name) { return kernelArgument(fn, spec.abi, name); };
  qPtr = arg("q");
  doPtr = arg("do");
  lsePtr = arg("lse");
  rowDotsPtr = arg("row_dots");
  dqPtr = arg("dq_accum");
  if (spec.deterministic)
    semaphoresPtr = arg("dq_semaphores");
  hq = arg("Hq");
  nq = arg("Nq");
  nk = arg("Nk");
  scale = arg("scale");
  Value hkv = arg("Hkv");
  scaleLog2 = fmul(scale, cf(llvm::numbers::log2e));

  Value tid = NVVM::ThreadIdXOp::create(b, loc, i32);
  keyBlock = NVVM::BlockIdXOp::create(b, loc, i32);
  // A deterministic kernel's key blocks add into dQ highest first (emitStep),
  // so its CTAs take them from the highest down: a CTA only ever waits for
  // CTAs launched before it (x is the fastest-varying index), which a grid
  // too large to be resident at once needs to make progress.
  if (spec.deterministic) {
    keyBlocks = divu(add(nk, c32(kBlock - 1)), c32(kBlock));
    keyBlock = sub(sub(keyBlocks, c32(1)), keyBlock);
  }
  kvHead = NVVM::BlockIdYOp::create(b, loc, i32);
  batch = NVVM::BlockIdZOp::create(b, loc, i32);
  warp = divu(tid, c32(32));
  g = divu(remu(tid, c32(32)), c32(4));
  group = divu(hq, hkv);
  k0 = mul(keyBlock, c32(kBlock));
  Value kvMatrix = add(mul(batch, hkv), kvHead);

  // The query blocks that see a key of the block (fa/Model/BlockRange.h,
  // checked on integers against every mask by model-checks): the mask's
  // band of keys, then the range it gives the key block.
  Value queryBlocks = divu(add(nq, c32(kBlock - 1)), c32(kBlock));
  IRArithmetic ir{b, loc};
  band = model::visibleBand(ir, nq, nk, spec.causal, spec.window,
                            spec.bottomRight, spec.diagonalOffset);
  model::QueryRange<IRArithmetic> range =
      model::queryBlockRange(ir, band, k0, queryBlocks, kBlock, kBlock);
  firstBlock = range.first;
  blocksPerHead = sub(range.end, firstBlock);
  steps = mul(blocksPerHead, group);

  // Shared memory: K, V, the Q / dO ring, the dS tile.
  kTile = fagpu::SharedTileOp::create(b, loc, tileType, 0);
  vTile = fagpu::SharedTileOp::create(b, loc, tileType, spec.tileBytes());
  ring = fagpu::CreatePipelineOp::create(
      b, loc, fagpu::PipelineType::get(b.getContext(), kStages, 2, tileType),
      /*barrier_offset=*/0, /*tile_offset=*/spec.ringOffset());
  gradScoresTile = fagpu::SharedTileOp::create(b, loc, gradScoresTileType,
                                               spec.gradScoresOffset());

  // Prologue: K, V and step 0's Q and dO in flight, one group.
  Value kBase = matrixBase(arg("k"), half, kvMatrix, nk, spec.headDim);
  Value vBase = matrixBase(arg("v"), half, kvMatrix, nk, spec.headDim);
  fagpu::CopyAsyncOp::create(b, loc, kBase, k0, nk, kTile, kThreads);
  fagpu::CopyAsyncOp::create(b, loc, vBase, k0, nk, vTile, kThreads);
  {
    // A CTA whose keys no query sees has no step 0 (its head and row would
    // divide by zero blocks).
    auto ifSteps = scf::IfOp::create(b, loc, ult(c32(0), steps),
                                     /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifSteps.thenBlock());
    copyStep(c32(0), c32(0));
  }
  fagpu::CopyCommitOp::create(b, loc);

  Value zero = fagpu::SplatOp::create(b, loc, gradType, cf(0.0));
  auto loop =
      scf::ForOp::create(b, loc, c32(0), steps, c32(1), ValueRange{zero, zero});
  {
    OpBuilder::InsertionGuard loopGuard(b);
    b.setInsertionPointToStart(loop.getBody());
    scf::YieldOp::create(
        b, loc, emitStep(loop.getInductionVar(), loop.getRegionIterArgs()));
  }
  // No copy outlives the kernel (a CTA without steps still issued its
  // prologue).
  fagpu::CopyWaitOp::create(b, loc, 0);

  // dK = scale sum dS^T Q and dV, each row written once.
  Value threadRow = add(add(k0, mul(warp, c32(16))), g);
  for (auto [name, acc, factor] :
       {std::tuple<StringRef, Value, Value>{"dk", loop.getResult(0), scale},
        {"dv", loop.getResult(1), cf(1.0)}}) {
    auto rows = fagpu::OutputRowsOp::create(
        b, loc, globalPtr, i64, arg(name), kvMatrix, nk, half,
        /*heads=*/Value(), /*strides=*/ValueRange(), spec.headDim);
    fagpu::StoreRowsOp::create(
        b, loc, acc, fagpu::SplatOp::create(b, loc, rowsType, factor),
        threadRow, nk, rows.getBase(), rows.getStride(), half,
        /*columns=*/IntegerAttr());
  }
  LLVM::ReturnOp::create(b, loc, ValueRange{});
  return fn;
}

SmallVector<Value> BackwardBuilder::emitStep(Value t, ValueRange grads) {
  Value dk = grads[0], dv = grads[1];
  Value stage = arith::AndIOp::create(b, loc, t, c32(1));
  // Step t's blocks have landed, and every warp is done with step t - 1
  // (its ring stage, which the prefetch below overwrites, and the dS tile).
  fagpu::CopyWaitOp::create(b, loc, 0);
  {
    Value next = add(t, c32(1));
    auto ifOp = scf::IfOp::create(b, loc, ult(next, steps),
                                  /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    copyStep(next, arith::XOrIOp::create(b, loc, stage, c32(1)));
  }
  fagpu::CopyCommitOp::create(b, loc);

  auto [head, q0] = stepOf(t);
  Value matrix = add(mul(batch, hq), head);
  Value qTile =
      fagpu::PipelineTileOp::create(b, loc, tileType, ring, stage, kQuery);
  Value doTile =
      fagpu::PipelineTileOp::create(b, loc, tileType, ring, stage, kGradOut);
  Value threadRow = add(add(k0, mul(warp, c32(16))), g);
  Value lse = gep(globalPtr, f32, lsePtr, mul(ext64(matrix), ext64(nq)));
  Value rowDots =
      gep(globalPtr, f32, rowDotsPtr, mul(ext64(matrix), ext64(nq)));

  // P^T from the scores recomputed with the keys on the rows.
  Value s = fagpu::MmaOp::create(b, loc, scoresType, kTile, qTile, Value(),
                                 Value(), /*mn_major=*/false)
                .getResult();
  Value p = fagpu::BackwardProbsOp::create(
      b, loc, scoresType, s, lse, q0, nq, threadRow, nk, scaleLog2,
      band.hasNear ? band.near : Value(), band.hasFar ? band.far : Value());
  Value pOperand = fagpu::ToOperandAOp::create(b, loc, probsType, p);
  dv = fagpu::MmaOp::create(b, loc, gradType, pOperand, doTile, dv, Value(),
                            /*mn_major=*/true)
           .getResult();
  Value dp = fagpu::MmaOp::create(b, loc, scoresType, vTile, doTile, Value(),
                                  Value(), /*mn_major=*/false)
                 .getResult();
  Value ds = fagpu::BackwardGradScoresOp::create(b, loc, scoresType, p, dp,
                                                 rowDots, q0, nq);
  Value dsOperand = fagpu::ToOperandAOp::create(b, loc, probsType, ds);
  dk = fagpu::MmaOp::create(b, loc, gradType, dsOperand, qTile, dk, Value(),
                            /*mn_major=*/true)
           .getResult();

  // dQ = dS K: dS reaches the query rows' warps through shared memory.
  // wait_group 1 leaves the prefetch in flight; its barrier is the point.
  fagpu::StoreTransposedOp::create(b, loc, ds, gradScoresTile);
  fagpu::CopyWaitOp::create(b, loc, 1);
  Value dsRows =
      fagpu::LoadFragmentOp::create(b, loc, probsType, gradScoresTile);
  Value dq = fagpu::MmaOp::create(b, loc, gradType, dsRows, kTile, Value(),
                                  Value(), /*mn_major=*/true)
                 .getResult();
  Value queryRow = add(add(q0, mul(warp, c32(16))), g);
  Value dqBase = matrixBase(dqPtr, f32, matrix, nq, spec.headDim);
  if (!spec.deterministic) {
    fagpu::AtomicAddRowsOp::create(b, loc, dq, queryRow, nq, dqBase, scale,
                                   spec.vectorReductions);
    return {dk, dv};
  }
  // The key blocks that reach query block q0 / 64 are a range .. J (a
  // causal mask or a window's near edge hides a suffix of them, a window's
  // far edge a prefix): key k reaches it while k <= q0 + 63 + near, so
  // J = min((q0 + 63 + near) / 64, blocks - 1), at least this CTA's block
  // for every block it visits. Key block j takes turn J - j there: the sum
  // is the same every run. Highest first, because under a causal mask
  // block J's CTA reaches query block q0 / 64 at its first step and block
  // j's one step after block j + 1's: each CTA waits for one that got
  // there a step earlier. Lowest first chained the waits (block j's first
  // step waited for j steps of lower blocks).
  IRArithmetic ir{b, loc};
  Value lastKeyBlock = model::lastKeyBlockReaching(
      ir, band, q0, sub(keyBlocks, c32(1)), kBlock, kBlock);
  Value queryBlocks = divu(add(nq, c32(kBlock - 1)), c32(kBlock));
  Value semaphore =
      gep(globalPtr, i32, semaphoresPtr,
          ext64(add(mul(matrix, queryBlocks), divu(q0, c32(kBlock)))));
  fagpu::SemaphoreWaitOp::create(b, loc, semaphore,
                                 sub(lastKeyBlock, keyBlock));
  fagpu::AtomicAddRowsOp::create(b, loc, dq, queryRow, nq, dqBase, scale,
                                 spec.vectorReductions);
  fagpu::SemaphoreSignalOp::create(b, loc, semaphore);
  return {dk, dv};
}

/// The kernel `op` describes, or a diagnostic naming what it cannot do.
FailureOr<BackwardSpec> specOf(fagpu::AttentionBackwardOp op) {
  BackwardSpec spec;
  spec.headDim = op.getHeadDim();
  spec.bf16 = op.isBF16();
  spec.causal = op.getCausal();
  spec.bottomRight = op.getBottomRight();
  spec.window = op.getWindow().value_or(0);
  spec.diagonalOffset = op.getDiagonalOffset().value_or(0);
  spec.deterministic = op.getDeterministic();
  spec.vectorReductions = op.getVectorReductions();
  if (spec.headDim != 64 && spec.headDim != 128)
    return op.emitOpError("fagpu-build-kernels: the sm_80 backward kernel "
                          "takes D = 64 or 128, got ")
           << spec.headDim;
  spec.abi =
      fagpu::backwardParams(spec.bf16 ? "bf16" : "f16", spec.deterministic);
  if (spec.sharedBytes() > fagpu::maxSharedBytes())
    return op.emitOpError("fagpu-build-kernels: the backward's tiles need ")
           << spec.sharedBytes() << " bytes of shared memory, more than "
           << fagpu::maxSharedBytes() / 1024 << " KiB";
  return spec;
}

/// fagpu.attention_backward -> gpu.launch_func of its kernel on the
/// buffers' aligned pointers, the grid the lowering gave the kernel.
void replaceWithLaunch(fagpu::AttentionBackwardOp op, LLVM::LLVMFuncOp kernel,
                       const BackwardSpec &spec) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  auto globalPtr = LLVM::LLVMPointerType::get(b.getContext(), 1);
  llvm::StringMap<Value> tensors = {
      {"q", op.getQuery()},          {"k", op.getKey()},
      {"v", op.getValue()},          {"lse", op.getLse()},
      {"do", op.getGradOut()},       {"row_dots", op.getRowDots()},
      {"dq_accum", op.getDqAccum()}, {"dk", op.getGradKey()},
      {"dv", op.getGradValue()}};
  auto dim = [&](Value memref, int64_t d) -> Value {
    return b.createOrFold<memref::DimOp>(loc, memref, d);
  };
  llvm::StringMap<Value> sizes = {{"B", dim(op.getQuery(), 0)},
                                  {"Hq", dim(op.getQuery(), 1)},
                                  {"Nq", dim(op.getQuery(), 2)},
                                  {"Hkv", dim(op.getKey(), 1)},
                                  {"Nk", dim(op.getKey(), 2)}};
  // A deterministic kernel's turn counters: zeroed device memory for the
  // launch.
  Value semaphores;
  if (spec.deterministic) {
    Value block = arith::ConstantIndexOp::create(b, loc, kBlock);
    Value count = arith::MulIOp::create(
        b, loc, arith::MulIOp::create(b, loc, sizes["B"], sizes["Hq"]),
        arith::CeilDivUIOp::create(b, loc, sizes["Nq"], block));
    semaphores =
        gpu::AllocOp::create(
            b, loc, MemRefType::get({ShapedType::kDynamic}, b.getI32Type()),
            /*asyncToken=*/Type(), /*asyncDependencies=*/ValueRange(),
            /*dynamicSizes=*/ValueRange{count},
            /*symbolOperands=*/ValueRange(), /*hostShared=*/false)
            .getMemref();
    gpu::MemsetOp::create(b, loc, /*asyncToken=*/Type(),
                          /*asyncDependencies=*/ValueRange(), semaphores,
                          arith::ConstantIntOp::create(b, loc, 0, 32));
    tensors["dq_semaphores"] = semaphores;
  }
  SmallVector<Value> args =
      launchArguments(spec.abi, [&](const fagpu::KernelParam &p) -> Value {
        if (p.kind == fagpu::ParamKind::Pointer)
          return alignedPointer(b, loc, tensors.lookup(p.name), globalPtr);
        if (p.kind == fagpu::ParamKind::F32)
          return arith::ConstantOp::create(b, loc, op.getScaleAttr());
        return arith::IndexCastOp::create(b, loc, b.getI32Type(),
                                          sizes.lookup(p.name));
      });
  gpu::KernelDim3 grid =
      hostLaunchGrid(b, loc, kernel, /*kvSplits=*/0,
                     [&](StringRef size) { return sizes.lookup(size); });
  launchKernel(b, loc, kernel, grid, kThreads, spec.sharedBytes(), args);
  if (semaphores)
    gpu::DeallocOp::create(b, loc, /*asyncToken=*/Type(),
                           /*asyncDependencies=*/ValueRange(), semaphores);
  op.erase();
}

} // namespace

LogicalResult mlir::fa::buildSM80BackwardKernels(ModuleOp module) {
  SmallVector<fagpu::AttentionBackwardOp> ops;
  module.walk([&](fagpu::AttentionBackwardOp op) { ops.push_back(op); });
  if (ops.empty())
    return success();
  OpBuilder b(module.getContext());
  gpu::GPUModuleOp kernels = getOrCreateKernelModule(module);
  for (fagpu::AttentionBackwardOp op : ops) {
    if (op.getTarget() != fagpu::Target::sm_80)
      return op.emitOpError("fagpu-build-kernels: the backward has a kernel "
                            "on sm_80 (mma.sync) only");
    FailureOr<BackwardSpec> spec = specOf(op);
    if (failed(spec))
      return failure();
    auto kernel = kernels.lookupSymbol<LLVM::LLVMFuncOp>(spec->kernelName());
    if (!kernel) {
      kernel = BackwardBuilder(b, op.getLoc(), *spec).build(kernels);
      fagpu::ScheduleFields fields;
      fields.blockR = op.getBlockR();
      fields.blockC = op.getBlockC();
      fields.stages = kStages;
      kernel->setAttr("fagpu.target", op.getTargetAttr());
      kernel->setAttr("fagpu.schedule",
                      fagpu::scheduleOf(b.getContext(), fields));
      kernel->setAttr("fagpu.backward", b.getUnitAttr());
      kernel->setAttr("fagpu.threads", b.getI64IntegerAttr(kThreads));
      kernel->setAttr("fagpu.shared_memory_bytes",
                      b.getI64IntegerAttr(spec->sharedBytes()));
      kernel->setAttr(fagpu::kGridAttrName,
                      fagpu::backwardGrid(b.getContext()));
      // The preprocess and dQ's conversion, for the runtimes (the host
      // launch below keeps the tile level's nests for them).
      std::string preprocess = spec->kernelName() + "_preprocess";
      std::string convert = spec->kernelName() + "_convert";
      buildSM80BackwardPreprocessKernel(b, op.getLoc(), kernels, preprocess,
                                        spec->headDim, spec->bf16,
                                        spec->deterministic);
      buildSM80BackwardConvertKernel(b, op.getLoc(), kernels, convert,
                                     spec->headDim, spec->bf16);
      kernel->setAttr("fagpu.backward_preprocess", b.getStringAttr(preprocess));
      kernel->setAttr("fagpu.backward_convert", b.getStringAttr(convert));
    }
    replaceWithLaunch(op, kernel, *spec);
  }
  return success();
}
