//===- SM80Kernel.cpp - FlashAttention-2 on mma.sync in fagpu ops ---------===//
//
// fagpu-build-kernels for sm_80 (and the mma.sync kernel on later GPUs):
// writes the forward kernel of FlashAttention-2 that an fa.attention's
// #fagpu.schedule describes in fagpu ops, each lowered by its own pattern
// in WarpgroupToNVVM.cpp, with the K/V loop in scf/arith:
//
//  * one CTA of four warps owns B_r query rows; warp w owns rows
//    16 R w .. of the tile (R = B_r / 64 m16 row tiles), so every
//    fragment is a warpgroup fragment of B_r rows;
//  * Q and a two-stage K/V ring live in shared memory as row-major tiles
//    (fagpu.shared_tile, and a !fagpu.pipeline of row_major tiles): every
//    thread fills them with fagpu.copy_async (cp.async, zero-fill past the
//    end); commit groups and fagpu.copy_wait (wait_group + bar.sync) order
//    them: block j + 1 is in flight while block j is computed;
//  * S = Q K^T and O += P V are fagpu.mma on row-major tiles: ldmatrix and
//    mma.sync.m16n8k16, synchronous (no mma_wait). Q is read into an
//    operand_a fragment once (fagpu.load_fragment) where its registers fit;
//  * the online softmax, the rescale and the epilogue are the ops (and the
//    Common/OnlineSoftmax.h arithmetic) of the sm_90a kernel: mma.sync's C
//    fragment is the accumulator layout. P never leaves registers: two
//    adjacent C tiles of S are exactly one A tile of P.
//
//===----------------------------------------------------------------------===//

#include "../Common/Launch.h"
#include "../Common/OnlineSoftmax.h"
#include "KernelLowerings.h"
#include "fa/Dialect/FAGPU/IR/SharedMemory.h"
#include "fa/Model/BlockRange.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"

#include <limits>

using namespace mlir;
using namespace mlir::fa;

namespace {

constexpr int64_t kWarps = 4;
constexpr int64_t kThreads = kWarps * 32;
constexpr int64_t kStages = 2;

/// What the generated kernel is specialised for (the mask and FA4 choices
/// in the SoftmaxConfig base, the score_mod / mask_mod in the
/// KernelModifications one).
struct KernelSpec : SoftmaxConfig, KernelModifications {
  int64_t headDim = 0;
  int64_t blockR = 0; // 64 or 128: 16 or 32 rows per warp
  int64_t blockC = 0; // 32 or 64 keys per K/V block
  bool bf16 = false;
  bool queryInRegisters = true;
  /// The kernel's parameters, in launch order.
  SmallVector<fagpu::KernelParam> abi;

  int64_t rowTiles() const { return blockR / (16 * kWarps); }
  /// Keeping Q costs rowTiles * D / 16 * 4 registers per thread for the
  /// whole loop. With two row tiles (O alone is 2 * D / 2 registers) more
  /// than 32 spill, so Q is re-read from shared memory in every block
  /// instead; with one row tile up to 64 fit (D = 256).
  bool keepsQueryInRegisters() const {
    int64_t qRegisters = rowTiles() * headDim / 16 * 4;
    return queryInRegisters && qRegisters <= (rowTiles() == 1 ? 64 : 32);
  }
  int64_t rowBytes() const { return headDim * 2; }
  int64_t qBytes() const { return blockR * rowBytes(); }
  int64_t kvTileBytes() const { return blockC * rowBytes(); }
  int64_t sharedBytes() const {
    return qBytes() + kStages * 2 * kvTileBytes();
  }
  int64_t threads() const { return kThreads; }
  std::string kernelName() const {
    return "fa2_sm80_d" + std::to_string(headDim) + "_br" +
           std::to_string(blockR) + "_bc" + std::to_string(blockC) +
           (bf16 ? "_bf16" : "_f16") + (causal ? "_causal" : "") +
           modificationsName + suffix();
  }
};

/// Writes the kernel in fagpu ops. Values named like the math: `s`
/// scores, `p` probabilities, `o` accumulator, `m` running max (or FA4
/// base), `l` running sum.
class KernelBuilder : public SoftmaxEmitter {
public:
  KernelBuilder(OpBuilder &b, Location loc, const KernelSpec &spec)
      : SoftmaxEmitter(b, loc, spec.bf16, spec), spec(spec) {
    MLIRContext *ctx = b.getContext();
    using fagpu::FragmentLayout;
    scoresType = fagpu::FragmentType::get(ctx, {spec.blockR, spec.blockC}, f32,
                                          FragmentLayout::Accumulator);
    outType = fagpu::FragmentType::get(ctx, {spec.blockR, spec.headDim}, f32,
                                       FragmentLayout::Accumulator);
    probsType = fagpu::FragmentType::get(ctx, {spec.blockR, spec.blockC}, half,
                                         FragmentLayout::OperandA);
    queryType = fagpu::FragmentType::get(ctx, {spec.blockR, spec.headDim}, half,
                                         FragmentLayout::OperandA);
    rowsType =
        fagpu::FragmentType::get(ctx, {spec.blockR}, f32, FragmentLayout::Rows);
    auto rowMajor = [&](int64_t rows) {
      return fagpu::SharedTileType::get(ctx, {rows, spec.headDim}, half, rows,
                                        fagpu::TileLayout::RowMajor);
    };
    qTileType = rowMajor(spec.blockR);
    kvTileType = rowMajor(spec.blockC);
  }

  LLVM::LLVMFuncOp build(gpu::GPUModuleOp module);

private:
  /// K and V, the two buffers of each stage of the ring.
  static constexpr int64_t kKey = 0, kValue = 1;

  Value kvTile(Value stage, int64_t buffer) {
    return fagpu::PipelineTileOp::create(b, loc, kvTileType, kvPipe, stage,
                                         buffer);
  }
  /// cp.async of K/V block `block` into `stage`.
  void copyKV(Value block, Value stage) {
    Value kStart = mul(block, c32(spec.blockC));
    fagpu::CopyAsyncOp::create(b, loc, kBase, kStart, nk, kvTile(stage, kKey),
                               kThreads);
    fagpu::CopyAsyncOp::create(b, loc, vBase, kStart, nk, kvTile(stage, kValue),
                               kThreads);
  }
  /// The thread's first row (row tile r adds 16 r, its second half 8),
  /// computed where it is used: kept live across the loop instead, it cost
  /// ptxas a register (more spills at D = 128, causal).
  Value threadRow0() {
    return add(qStart, add(mul(warp, c32(16 * spec.rowTiles())), g));
  }
  /// One K/V block: wait for its tiles, prefetch the next, S = Q K^T,
  /// (mask,) online softmax, O = alpha O + P V. Returns (O, m, l).
  SmallVector<Value> emitBlock(Value j, ValueRange state, bool masked);

  const KernelSpec &spec;
  fagpu::FragmentType scoresType, outType, probsType, queryType, rowsType;
  fagpu::SharedTileType qTileType, kvTileType;
  Value nq, nk, scaleLog2, numBlocks, qStart, diagonalShift;
  Value batch, head;              // the CTA's (batch, query head)
  SmallVector<Value> capturePtrs; // the regions' captured tensors
  Value warp, g; // the thread's warp, and its row in each 8-row half
  Value kBase, vBase;
  Value qTile, kvPipe;
  Value query; // Q: its operand_a fragment where kept, else its tile
};

LLVM::LLVMFuncOp KernelBuilder::build(gpu::GPUModuleOp module) {
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(module.getBody());

  // Dynamic shared memory: `extern __shared__ char fa_smem[]`; row-major
  // tiles need 16-byte alignment (cp.async, ldmatrix rows).
  auto smemType = LLVM::LLVMArrayType::get(b.getI8Type(), 0);
  if (!module.lookupSymbol<LLVM::GlobalOp>("fa_smem"))
    LLVM::GlobalOp::create(b, loc, smemType, /*isConstant=*/false,
                           LLVM::Linkage::External, "fa_smem", Attribute(),
                           /*alignment=*/16, /*addrSpace=*/3);

  LLVM::LLVMFuncOp fn = declareKernel(b, loc, module, spec.kernelName(),
                                      kThreads, /*ctasPerSM=*/1, spec.abi);
  auto arg = [&](StringRef name) {
    return kernelArgument(fn, spec.abi, name);
  };
  Value qPtr = arg("q"), kPtr = arg("k"), vPtr = arg("v"), oPtr = arg("o"),
        lsePtr = arg("lse"), hq = arg("Hq"), hkv = arg("Hkv");
  nq = arg("Nq");
  nk = arg("Nk");
  scaleLog2 = arg("scale_log2");

  for (int64_t i = 0; i < spec.captures; ++i)
    capturePtrs.push_back(arg("capture" + std::to_string(i)));

  Value tid = NVVM::ThreadIdXOp::create(b, loc, i32);
  Value qBlock = NVVM::BlockIdXOp::create(b, loc, i32);
  head = NVVM::BlockIdYOp::create(b, loc, i32);
  batch = NVVM::BlockIdZOp::create(b, loc, i32);
  warp = divu(tid, c32(32));
  g = divu(remu(tid, c32(32)), c32(4));

  Value kvHead = divu(head, divu(hq, hkv));
  qStart = mul(qBlock, c32(spec.blockR));
  Value qMatrix = add(mul(batch, hq), head);
  auto matrixBase = [&](Value ptr, Value h, Value heads, Value n) {
    Value rows = mul(ext64(add(mul(batch, heads), h)), ext64(n));
    return gep(globalPtr, half, ptr, mul(rows, c64(spec.headDim)));
  };
  Value qBase = matrixBase(qPtr, head, hq, nq);
  kBase = matrixBase(kPtr, kvHead, hkv, nk);
  vBase = matrixBase(vPtr, kvHead, hkv, nk);
  // O and the LSE of this (batch, head), addressed once here: the epilogue
  // stores rows of matrix 0 from these bases, so the 64-bit row offset
  // (batch * Hq + head) * Nq is computed once for both.
  Value oBase = matrixBase(oPtr, head, hq, nq);
  Value lseBase = gep(globalPtr, f32, lsePtr, mul(ext64(qMatrix), ext64(nq)));

  // Shared memory: the Q tile, then kStages x (K tile, V tile).
  qTile = fagpu::SharedTileOp::create(b, loc, qTileType, 0);
  kvPipe = fagpu::CreatePipelineOp::create(
      b, loc, fagpu::PipelineType::get(b.getContext(), kStages, 2, kvTileType),
      /*barrier_offset=*/0, /*tile_offset=*/spec.qBytes());

  // The K/V blocks visited (mlir::fa::model::kvBlockRange: causal stops at the
  // block holding the last query row's diagonal, a window bounds both sides;
  // bottom-right masks move the diagonal by Nk - Nq, a diagonal offset by
  // its keys).
  IRArithmetic ir{b, loc};
  diagonalShift = mlir::fa::model::diagonalShift(ir, nq, nk, spec.bottomRight,
                                                 spec.diagonalOffset);
  mlir::fa::model::KVRange<IRArithmetic> range = mlir::fa::model::kvBlockRange(
      ir, qStart, nq, nk, spec.blockR, spec.blockC, spec.causal, spec.window,
      spec.bottomRight, spec.diagonalOffset);
  Value firstBlock = range.first;
  numBlocks = range.end;

  // Prologue: Q and the first K/V block in flight, one group. Block j sits
  // in stage j mod 2.
  fagpu::CopyAsyncOp::create(b, loc, qBase, qStart, nq, qTile, kThreads);
  copyKV(firstBlock, arith::AndIOp::create(b, loc, firstBlock, c32(1)));
  fagpu::CopyCommitOp::create(b, loc);

  // Q fragments held in registers across the loop where they fit, read
  // once the prologue's copies have landed; else re-read from shared
  // memory by every S = Q K^T.
  query = qTile;
  if (spec.keepsQueryInRegisters()) {
    fagpu::CopyWaitOp::create(b, loc, 0);
    query = fagpu::LoadFragmentOp::create(b, loc, queryType, qTile);
  }
  // Blocks that no mask touches (full, and for causal wholly below the
  // diagonal of the CTA's first row) run without the compare-and-select;
  // the rest (the ragged last block, the diagonal, every windowed block)
  // run masked. Computed after the prologue: before it, the bound stays
  // live across the Q loads (register pressure at D = 256, causal).
  Value unmaskedEnd = mlir::fa::model::unmaskedBlocksEnd(
      ir, range, qStart, nq, nk, spec.blockC, spec.causal, spec.window,
      spec.bottomRight, spec.diagonalOffset);

  SmallVector<Value> init = {
      fagpu::SplatOp::create(b, loc, outType, cf(0.0)),
      fagpu::SplatOp::create(b, loc, rowsType,
                             cf(-std::numeric_limits<double>::infinity())),
      fagpu::SplatOp::create(b, loc, rowsType, cf(0.0))};
  auto emitLoop = [&](Value begin, Value end, ValueRange initState,
                      bool masked) -> ValueRange {
    auto loop = scf::ForOp::create(b, loc, begin, end, c32(1), initState);
    loop->setAttr("fa.kv_loop",
                  b.getStringAttr(masked ? "masked" : "unmasked"));
    OpBuilder::InsertionGuard loopGuard(b);
    b.setInsertionPointToStart(loop.getBody());
    scf::YieldOp::create(
        b, loc,
        emitBlock(loop.getInductionVar(), loop.getRegionIterArgs(), masked));
    return loop.getResults();
  };
  ValueRange afterUnmasked = emitLoop(firstBlock, unmaskedEnd, init, false);
  ValueRange state = emitLoop(unmaskedEnd, numBlocks, afterUnmasked, true);

  // Epilogue: O / l and the LSE from registers, one 64-row tile at a time
  // (a warp's rows 16 t .. 16 t + 15 of each).
  Value row0 = add(add(qStart, mul(warp, c32(16 * spec.rowTiles()))), g);
  Value lseRows;
  if (spec.writesLse)
    lseRows = fagpu::LseRowsOp::create(b, loc, lseBase.getType(), lseBase,
                                       c32(0), nq);
  auto rows = fagpu::OutputRowsOp::create(
      b, loc, oBase.getType(), b.getI64Type(), oBase, c32(0), nq, half,
      /*heads=*/Value(), /*strides=*/ValueRange(), spec.headDim);
  // Row tile t of a fragment (the fragment itself where it has one).
  auto tileOf = [&](Value fragment, int64_t t) -> Value {
    if (spec.rowTiles() == 1)
      return fragment;
    auto type = cast<fagpu::FragmentType>(fragment.getType());
    SmallVector<int64_t> shape(type.getShape());
    shape[0] = fagpu::kRowsPerConsumer;
    return fagpu::RowTileOp::create(
        b, loc,
        fagpu::FragmentType::get(b.getContext(), shape, type.getElementType(),
                                 type.getLayout()),
        fragment, t);
  };
  for (int64_t t = 0; t < spec.rowTiles(); ++t) {
    Value o = tileOf(state[0], t), m = tileOf(state[1], t),
          l = tileOf(state[2], t);
    Value tileRow0 = t ? add(row0, c32(16 * t)) : row0;
    auto totals =
        fagpu::RowTotalsOp::create(b, loc, l.getType(), l.getType(), l,
                                   /*descale=*/Value());
    fagpu::StoreRowsOp::create(b, loc, o, totals.getFactor(), tileRow0, nq,
                               rows.getBase(), rows.getStride(), half,
                               /*columns=*/IntegerAttr());
    if (spec.writesLse)
      fagpu::StoreLseOp::create(b, loc, m, totals.getTotal(), tileRow0, nq,
                                lseRows, /*probs_scale=*/FloatAttr());
  }
  LLVM::ReturnOp::create(b, loc, ValueRange{});
  return fn;
}

SmallVector<Value> KernelBuilder::emitBlock(Value j, ValueRange state,
                                            bool masked) {
  Value o = state[0], m = state[1], l = state[2];
  Value stage = arith::AndIOp::create(b, loc, j, c32(1));
  // Block j has landed, and every warp is done with the stage the
  // prefetch below overwrites (block j - 1's).
  fagpu::CopyWaitOp::create(b, loc, 0);
  {
    Value next = add(j, c32(1));
    auto ifOp = scf::IfOp::create(b, loc, ult(next, numBlocks),
                                  /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    copyKV(next, arith::XOrIOp::create(b, loc, stage, c32(1)));
  }
  fagpu::CopyCommitOp::create(b, loc);

  Value kStart = mul(j, c32(spec.blockC));
  Value kTile = kvTile(stage, kKey), vTile = kvTile(stage, kValue);
  Value s = fagpu::MmaOp::create(b, loc, scoresType, query, kTile, Value(),
                                 Value(), /*mn_major=*/false)
                  .getResult();

  // Without conditional rescaling O is scaled inside the step, row tile by
  // row tile; with it, the warp votes (fagpu.rescale .. if) and skips the
  // multiplies in most blocks after the first few.
  bool conditional = spec.rescaleThreshold >= 0;
  SoftmaxConfig config = spec;
  Value stepScale = scaleLog2;
  if (spec.scoreMod || spec.maskMod) {
    // FlexAttention's order, as in the sm_90a kernel: the scale, the
    // softcap, score_mod, then the masks; the step applies no softcap and
    // takes natural-unit scores at log2(e), raw ones at the kernel's scale.
    auto modify = spec.modifyScores(b, loc, s, kStart, threadRow0(), batch,
                                    head, scaleLog2, nq, nk, capturePtrs,
                                    spec.softcap, spec.maskMod);
    s = modify.getResult();
    config.softcap = 0;
    if (modify.returnsNaturalUnits())
      stepScale = cf(M_LOG2E);
  }
  auto step = createSoftmaxStep(b, loc, config, probsType, rowsType, s, m, l,
                                kStart, threadRow0(), nk, stepScale,
                                masked ? diagonalShift : Value(),
                                conditional ? Value() : o, masked);
  o = conditional ? fagpu::RescaleOp::create(b, loc, outType, o,
                                             step.getAlpha(), step.getMoved())
                        .getResult()
                  : step.getNewO();
  o = fagpu::MmaOp::create(b, loc, outType, step.getP(), vTile, o, Value(),
                           /*mn_major=*/true)
          .getResult();
  return {o, step.getNewM(), step.getNewL()};
}

/// The kernel `op`'s schedule describes, or a diagnostic naming what the
/// mma.sync kernel cannot do.
FailureOr<KernelSpec> specOf(fagpu::AttentionOp op) {
  SpecReader<KernelSpec> reader{op, "sm_80 mma.sync"};
  if (failed(reader.begin()))
    return failure();
  auto fail = [&](const Twine &why) { return reader.fail(why); };
  KernelSpec &spec = reader.spec;
  fagpu::ScheduleAttr s = op.getSchedule();
  if (s.getBlockR() != 64 && s.getBlockR() != 128)
    return fail("block_r must be 64 or 128, got " + Twine(s.getBlockR()));
  if (s.getBlockC() != 32 && s.getBlockC() != 64)
    return fail("block_c must be 32 or 64, got " + Twine(s.getBlockC()));
  if (s.getStages() != kStages)
    return fail("the cp.async ring has " + Twine(kStages) + " stages, got " +
                Twine(s.getStages()));
  spec.headDim = op.getHeadDim();
  spec.blockR = s.getBlockR();
  spec.blockC = s.getBlockC();
  spec.bf16 = op.isBF16();
  spec.queryInRegisters = s.getQInRegisters();
  // The row max as a tree: with the chain, ptxas spills 16 bytes of the
  // D = 128 loop at 255 registers
  // (bench/results/2026-12-03-mma-sync-tree-max.md).
  spec.treeRowMax = true;
  spec.abi = fagpu::kernelParams(fagpu::Target::sm_80, fagpu::fieldsOf(s),
                                 spec.bf16 ? "bf16" : "f16");
  // score_mod and mask_mod, their captures' parameters after the kernel's.
  static_cast<KernelModifications &>(spec) =
      KernelModifications::of(op, spec.abi);
  if (spec.sharedBytes() > fagpu::maxSharedBytes())
    return fail("the tiles need " + Twine(spec.sharedBytes()) +
                " bytes of shared memory, more than " +
                Twine(fagpu::maxSharedBytes() / 1024) + " KiB");
  return spec;
}

/// fagpu.attention -> gpu.launch_func of the kernel on the buffers' aligned
/// pointers, with the kernel's grid (ceil(Nq / B_r), Hq, B) and the dynamic
/// shared memory of the schedule.
void replaceWithLaunch(fagpu::AttentionOp op, LLVM::LLVMFuncOp kernel,
                       const KernelSpec &spec) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  auto globalPtr = LLVM::LLVMPointerType::get(b.getContext(), 1);
  LaunchOperands operands(b, loc, op);
  SmallVector<Value> args =
      launchArguments(spec.abi, [&](const fagpu::KernelParam &p) -> Value {
        if (p.kind == fagpu::ParamKind::Pointer)
          return operands.pointer(p.name, globalPtr);
        if (p.kind == fagpu::ParamKind::F32)
          return operands.scaleLog2;
        return operands.i32(p.name);
      });
  // The grid the lowering gave the kernel, as the runtimes evaluate it.
  gpu::KernelDim3 grid =
      hostLaunchGrid(b, loc, kernel, /*kvSplits=*/0,
                     [&](StringRef size) { return operands.size(size); });
  launchKernel(b, loc, kernel, grid, kThreads, spec.sharedBytes(), args);
  op.erase();
}

} // namespace

LogicalResult mlir::fa::buildSM80Kernels(ModuleOp module) {
  auto build = [](OpBuilder &b, Location loc, const KernelSpec &spec,
                  gpu::GPUModuleOp kernels) {
    return KernelBuilder(b, loc, spec).build(kernels);
  };
  return lowerEachKernel<KernelSpec>(module, fagpu::Target::sm_80, specOf,
                                     build, replaceWithLaunch);
}
