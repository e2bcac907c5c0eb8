//===- FAToSM100.cpp - FlashAttention-4 structure on Blackwell (tcgen05) --===//
//
// Builds a forward attention kernel for sm_100a from a tiled fa.attention,
// in the LLVM and NVVM dialects, with the structure of FlashAttention-4:
// the accumulators live in tensor memory (TMEM), one thread issues the
// tensor-core work, and the softmax warps own one query row per thread.
//
// COMPILE-VERIFIED ONLY: no Blackwell GPU is available to this project.
// ptxas (--gpu-name sm_100a) accepts the PTX and lit checks its
// structure; no result of this kernel has ever been computed.
//
// Roles (192 threads, one CTA per tile of B_r = 128 query rows):
//  * warps 0-3, softmax: tcgen05.mma with M = 128 writes row i of its
//    accumulator to TMEM lane i, and warp w may only touch lanes
//    32w..32w+31, so thread i of the warpgroup owns row i: its scores are
//    one tcgen05.ld (32x32b shape) of B_c columns, its row max and row sum
//    need no shuffles;
//  * warp 4, loads: lane 0 issues the TMA loads (Q, then a ring of K and V
//    stages), as on Hopper;
//  * warp 5, MMA: allocates TMEM (warp-wide tcgen05.alloc, 512 columns)
//    and lane 0 issues every tcgen05.mma, each group followed by a
//    tcgen05.commit that arrives on an mbarrier when the MMAs complete.
//
// TMEM columns (32-bit, 128 lanes): S/P buffer 0 at [0, B_c), buffer 1 at
// [B_c, 2 B_c), O at [2 B_c, 2 B_c + D). P_j overwrites the first B_c / 2
// columns of its S buffer as f16/bf16 pairs and is the A operand of
// O += P_j V_j straight from TMEM (k-step kk = columns 8 kk .. 8 kk + 7).
//
// The runtimes launch only Nk >= 1, so every tile visits at least one
// K/V block (the tile decoder keeps windowed ranges non-empty too).
//
// Order of work for block j (buffer b = j mod 2):
//   MMA:     wait o_done(j-1) (P_{j-1} read), issue S_{j+1} into 1 - b,
//            commit k_empty, s_full[1 - b];  wait p_full[b], issue
//            O += P_j V_j, commit v_empty, o_done.
//   softmax: wait s_full[b], ld S_j, mask, FA4 base update, P = exp2(..),
//            wait o_done(j-1), rescale O in TMEM if a row of the warp moved
//            its base, st P_j, arrive p_full[b].
// tcgen05.mma instructions are ordered only when they share the
// accumulator, hence the explicit o_done wait before S_{j+1} overwrites the
// buffer P_{j-1} is read from.
//
// Instruction descriptor (kind::f16, 32 bits): bits 4-5 D type (1 = f32),
// 7-9 / 10-12 A / B type (0 = f16, 1 = bf16), 15 / 16 transpose A / B
// (0 = K-major), 17-22 N >> 3, 24-28 M >> 4. Shared-memory descriptors
// are Common/TMAKernel.h's with the sm_100a format bits.
//
//===----------------------------------------------------------------------===//

#include "KernelLowerings.h"

#include "../Common/TMAKernel.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <limits>

using namespace mlir;
using namespace mlir::fa;

namespace {

constexpr int64_t kBlockR = fagpu::kSM100BlockR;
constexpr int64_t kLoadWarp = 4; // warps 0-3 are the softmax warpgroup
constexpr int64_t kMmaWarp = 5;
constexpr int64_t kThreads = 32 * 6;
constexpr int64_t kLdColumns = 32; // columns per tcgen05.ld/st (x32)
// Shared-memory descriptor format of sm_100a: version 0b001 at bits 46-48,
// 128-B swizzle = 2 at bits 61-63.
constexpr int64_t kTcgen05Swizzle128 = int64_t(1) << 46 | int64_t(2) << 61;

/// The mask and FA4 choices (SoftmaxConfig) and the shared-memory layout
/// (fagpu::SM100Layout) the kernel is built for.
struct KernelSpec : SoftmaxConfig, fagpu::SM100Layout {
  bool bf16 = false;
  /// The kernel's parameters, in launch order.
  SmallVector<fagpu::KernelParam> abi;

  int64_t threads() const { return kThreads; }
  int64_t oColumn() const { return 2 * blockC; }
  /// TMEM columns to allocate: a power of two >= 32 holding both S/P
  /// buffers and O (512 for the default tiles, all of the SM's TMEM).
  int64_t tmemColumns() const {
    return std::max<int64_t>(32, llvm::PowerOf2Ceil(oColumn() + headDim));
  }
  std::string kernelName() const {
    return "fa4_sm100_d" + std::to_string(headDim) + "_br" +
           std::to_string(kBlockR) + "_bc" + std::to_string(blockC) + "_s" +
           std::to_string(stages) + (bf16 ? "_bf16" : "_f16") +
           (causal ? "_causal" : "") + suffix();
  }
};

class KernelBuilder : public TMAKernelEmitter {
public:
  KernelBuilder(OpBuilder &b, Location loc, const KernelSpec &spec)
      : TMAKernelEmitter(b, loc, spec.bf16, spec, spec.headDim, kBlockR,
                         spec.blockC),
        spec(spec) {}

  LLVM::LLVMFuncOp build(gpu::GPUModuleOp module);

private:
  // mbarriers.
  Value barrier(Value index) {
    return sharedAt(add(c32(spec.barrierOffset()), mul(index, c32(8))));
  }
  Value barrier(int64_t index) { return barrier(c32(index)); }
  Value qFull() { return barrier(0); }
  Value kFull(Value stage) { return barrier(add(c32(1), stage)); }
  Value vFull(Value stage) { return barrier(add(c32(1 + spec.stages), stage)); }
  Value kEmpty(Value stage) {
    return barrier(add(c32(1 + 2 * spec.stages), stage));
  }
  Value vEmpty(Value stage) {
    return barrier(add(c32(1 + 3 * spec.stages), stage));
  }
  Value sFull(Value buffer) {
    return barrier(add(c32(1 + 4 * spec.stages), buffer));
  }
  Value pFull(Value buffer) {
    return barrier(add(c32(3 + 4 * spec.stages), buffer));
  }
  Value oDone() { return barrier(5 + 4 * spec.stages); }

  Value kOffset(Value stage) {
    return add(c32(spec.qBytes()), mul(stage, c32(2 * spec.kvTileBytes())));
  }
  Value vOffset(Value stage) {
    return add(kOffset(stage), c32(spec.kvTileBytes()));
  }

  // Ring position of K/V block j (the ring starts empty at firstBlock).
  Value stageOf(Value j) {
    return remu(sub(j, tile.firstBlock), c32(spec.stages));
  }
  Value ringParity(Value j) {
    return arith::AndIOp::create(
        b, loc, divu(sub(j, tile.firstBlock), c32(spec.stages)), c32(1));
  }
  /// Local block index i = j - firstBlock: S/P buffer i mod 2, used for
  /// the (i / 2)-th time.
  Value bufferOf(Value i) { return remu(i, c32(2)); }
  Value bufferParity(Value i) {
    return arith::AndIOp::create(b, loc, divu(i, c32(2)), c32(1));
  }
  Value bit(Value i) { return arith::AndIOp::create(b, loc, i, c32(1)); }

  /// A TMEM address (lane << 16 | column) as the !llvm.ptr<6> the tcgen05
  /// ops take.
  Value tmemAt(Value laneBase, Value column) {
    return LLVM::IntToPtrOp::create(b, loc, tmemPtr, add(laneBase, column));
  }

  /// 32-bit instruction descriptor of a kind::f16 MMA with f32
  /// accumulation, M = 128, the given N and B major-ness.
  Value instrDescriptor(int64_t n, bool transposeB) {
    int64_t type = spec.bf16 ? 1 : 0;
    int64_t desc = int64_t(1) << 4 | type << 7 | type << 10 |
                   int64_t(transposeB) << 16 | (n >> 3) << 17 |
                   (kBlockR >> 4) << 24;
    return c32(desc);
  }
  void mma(Value d, Value a, Value bDesc, Value idesc, Value accumulate) {
    NVVM::Tcgen05MMAOp::create(
        b, loc, NVVM::Tcgen05MMAKind::F16, NVVM::CTAGroupKind::CTA_1,
        NVVM::Tcgen05MMACollectorOp::DISCARD,
        /*aShift=*/false, d, a, bDesc, idesc, accumulate, Value(), Value());
  }
  void commit(Value bar) {
    NVVM::Tcgen05CommitOp::create(b, loc, bar, Value());
  }
  void fenceAfterSync() {
    NVVM::Tcgen05FenceOp::create(b, loc,
                                 NVVM::Tcgen05FenceKind::AFTER_THREAD_SYNC);
  }
  void fenceBeforeSync() {
    NVVM::Tcgen05FenceOp::create(b, loc,
                                 NVVM::Tcgen05FenceKind::BEFORE_THREAD_SYNC);
  }

  /// `count` consecutive 32-bit TMEM columns of this thread's lane, from
  /// `column`, as f32 (tcgen05.ld 32x32b.x32 per 32 columns, then
  /// tcgen05.wait::ld).
  SmallVector<Value> loadColumns(Value column, int64_t count);
  /// Stores 32-bit values to consecutive columns of this thread's lane
  /// (tcgen05.st 32x32b), then waits for them unless `wait` is false.
  void storeColumns(Value column, ArrayRef<Value> values, bool wait = true);

  void emitLoads();
  void emitMma();
  void emitSoftmax();
  /// S_j = Q K_j^T into buffer (j - firstBlock) mod 2.
  void issueScores(Value j);

  const KernelSpec &spec;
  Type tmemPtr;
  Value tid, warp, lane;
  Value tmemBase; // column 0 of lane 0
  AttentionTile tile;
};

SmallVector<Value> KernelBuilder::loadColumns(Value column, int64_t count) {
  auto chunkType = VectorType::get({kLdColumns}, i32);
  auto shape = NVVM::Tcgen05LdStShapeAttr::get(
      b.getContext(), NVVM::Tcgen05LdStShape::SHAPE_32X32B);
  // Warp w reads its own 32 lanes: lane field 32 w.
  Value laneBase =
      add(tmemBase, arith::ShLIOp::create(b, loc, mul(warp, c32(32)), c32(16)));
  SmallVector<Value> chunks;
  for (int64_t c = 0; c < count; c += kLdColumns)
    chunks.push_back(NVVM::Tcgen05LdOp::create(
        b, loc, chunkType, UnitAttr(), shape,
        tmemAt(laneBase, add(column, c32(c))), Value()));
  NVVM::Tcgen05WaitOp::create(b, loc, NVVM::Tcgen05WaitKind::LOAD);
  SmallVector<Value> out;
  for (Value chunk : chunks)
    for (int64_t e = 0; e < kLdColumns; ++e)
      out.push_back(arith::BitcastOp::create(
          b, loc, f32, LLVM::ExtractElementOp::create(b, loc, chunk, c32(e))));
  return out;
}

void KernelBuilder::storeColumns(Value column, ArrayRef<Value> values,
                                 bool wait) {
  auto chunkType = VectorType::get({kLdColumns}, i32);
  auto shape = NVVM::Tcgen05LdStShapeAttr::get(
      b.getContext(), NVVM::Tcgen05LdStShape::SHAPE_32X32B);
  Value laneBase =
      add(tmemBase, arith::ShLIOp::create(b, loc, mul(warp, c32(32)), c32(16)));
  for (size_t c = 0; c < values.size(); c += kLdColumns) {
    Value chunk = LLVM::PoisonOp::create(b, loc, chunkType);
    for (int64_t e = 0; e < kLdColumns; ++e) {
      Value v = values[c + e];
      if (v.getType() != i32)
        v = arith::BitcastOp::create(b, loc, i32, v);
      chunk = LLVM::InsertElementOp::create(b, loc, chunk, v, c32(e));
    }
    NVVM::Tcgen05StOp::create(b, loc, UnitAttr(), shape,
                              tmemAt(laneBase, add(column, c32(c))), chunk,
                              Value());
  }
  if (wait)
    NVVM::Tcgen05WaitOp::create(b, loc, NVVM::Tcgen05WaitKind::STORE);
}

void KernelBuilder::emitLoads() {
  // The ring starts empty: a fresh "empty" barrier passes the wait on
  // parity 1.
  prefetchTensorMaps();
  expectBytes(qFull(), spec.qBytes());
  loadTile(qMap, c32(0), kBlockR, tile.qStart, queryMatrix(tile), qFull());
  OpBuilder::InsertionGuard guard(b);
  auto loop =
      scf::ForOp::create(b, loc, tile.firstBlock, tile.numBlocks, c32(1));
  b.setInsertionPointToStart(loop.getBody());
  Value j = loop.getInductionVar();
  Value stage = stageOf(j);
  Value parity = arith::XOrIOp::create(b, loc, ringParity(j), c32(1));
  Value row = mul(j, c32(spec.blockC));
  waitBarrier(kEmpty(stage), parity);
  expectBytes(kFull(stage), spec.kvTileBytes());
  loadTile(kMap, kOffset(stage), spec.blockC, row, keyValueMatrix(tile),
           kFull(stage));
  waitBarrier(vEmpty(stage), parity);
  expectBytes(vFull(stage), spec.kvTileBytes());
  loadTile(vMap, vOffset(stage), spec.blockC, row, keyValueMatrix(tile),
           vFull(stage));
}

void KernelBuilder::issueScores(Value j) {
  Value i = sub(j, tile.firstBlock);
  Value stage = stageOf(j);
  waitBarrier(kFull(stage), ringParity(j));
  Value buffer = bufferOf(i);
  Value sTmem = tmemAt(tmemBase, mul(buffer, c32(spec.blockC)));
  Value idesc = instrDescriptor(spec.blockC, /*transposeB=*/false);
  for (int64_t kk = 0; kk < spec.headDim / 16; ++kk)
    mma(sTmem, kMajorDescriptor(c32(0), kBlockR, kk, kTcgen05Swizzle128),
        kMajorDescriptor(kOffset(stage), spec.blockC, kk, kTcgen05Swizzle128),
        idesc, arith::ConstantIntOp::create(b, loc, kk != 0, 1));
  // K_j is free once these MMAs completed; S_j is ready for the softmax.
  commit(kEmpty(stage));
  commit(sFull(buffer));
}

void KernelBuilder::emitMma() {
  waitBarrier(qFull(), c32(0));
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
    waitBarrier(oDone(), bit(sub(i, c32(1))));
    // Orders the MMAs below after the wait (they must not start before
    // P_{j-1} has been read).
    fenceAfterSync();
    b.setInsertionPointAfter(ifPrev);
    issueScores(next);
  }
  Value buffer = bufferOf(i);
  waitBarrier(pFull(buffer), bufferParity(i));
  fenceAfterSync();
  Value stage = stageOf(j);
  waitBarrier(vFull(stage), ringParity(j));
  Value oTmem = tmemAt(tmemBase, c32(spec.oColumn()));
  Value pColumn = mul(buffer, c32(spec.blockC));
  Value idesc = instrDescriptor(spec.headDim, /*transposeB=*/true);
  Value notFirst = ult(c32(0), i);
  for (int64_t kk = 0; kk < spec.blockC / 16; ++kk)
    mma(oTmem, tmemAt(tmemBase, add(pColumn, c32(8 * kk))),
        valueDescriptor(vOffset(stage), kk, kTcgen05Swizzle128), idesc,
        kk == 0 ? notFirst : arith::ConstantIntOp::create(b, loc, 1, 1));
  commit(vEmpty(stage));
  commit(oDone());
}

void KernelBuilder::emitSoftmax() {
  Value negInf = cf(-std::numeric_limits<double>::infinity());
  Value row = add(tile.qStart, tid);
  int64_t bc = spec.blockC;
  bool conditional = spec.rescaleThreshold >= 0;
  Value oColumn = c32(spec.oColumn());

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
    waitBarrier(sFull(buffer), bufferParity(i));
    fenceAfterSync();
    SmallVector<Value> s = loadColumns(sColumn, bc);
    Value effScale = applySoftcap(s, scaleLog2);
    if (masked) {
      Value kStart = mul(j, c32(bc));
      Value shift = spec.bottomRight ? diagonalShift() : Value();
      if (!spec.window) {
        Value limit = visibleLimit(kStart, row, nk, shift);
        for (int64_t c = 0; c < bc; ++c)
          s[c] = select(slt(c32(c), limit), s[c], negInf);
      } else {
        for (int64_t c = 0; c < bc; ++c)
          s[c] = select(keyVisible(add(kStart, c32(c)), row, nk, shift),
                        s[c], negInf);
      }
    }
    Value mx = negInf;
    for (Value v : s)
      mx = fmax(mx, v);
    RowUpdate update = moveBase(mx, m, effScale);
    Value negBase = arith::NegFOp::create(b, loc, update.base);
    Value rowSum = cf(0.0);
    for (int64_t c = 0; c < bc; ++c) {
      s[c] = exp2Score(s[c], effScale, negBase, c);
      rowSum = fadd(rowSum, s[c]);
    }
    l = fma(update.alpha, l, rowSum);

    // O of blocks before j moves to the new base once P_{j-1} V_{j-1} has
    // landed in it; FA4 skips the TMEM round trip unless a row of the warp
    // moved (tcgen05.ld/st are warp-collective, so the vote keeps the warp
    // converged).
    {
      auto ifPrev = scf::IfOp::create(b, loc, ult(c32(0), i), false);
      OpBuilder::InsertionGuard g2(b);
      b.setInsertionPointToStart(ifPrev.thenBlock());
      waitBarrier(oDone(), bit(sub(i, c32(1))));
      fenceAfterSync();
      Value doRescale = conditional
                            ? Value(NVVM::VoteSyncOp::create(
                                  b, loc, b.getI1Type(), c32(-1), update.moved,
                                  NVVM::VoteSyncKindAttr::get(
                                      b.getContext(), NVVM::VoteSyncKind::any)))
                            : arith::ConstantIntOp::create(b, loc, 1, 1);
      auto ifRescale = scf::IfOp::create(b, loc, doRescale, false);
      b.setInsertionPointToStart(ifRescale.thenBlock());
      // 32 columns at a time, so O never occupies more than 32 registers.
      for (int64_t c = 0; c < spec.headDim; c += kLdColumns) {
        Value column = add(oColumn, c32(c));
        SmallVector<Value> o = loadColumns(column, kLdColumns);
        for (Value &v : o)
          v = fmul(v, update.alpha);
        storeColumns(column, o, /*wait=*/false);
      }
      NVVM::Tcgen05WaitOp::create(b, loc, NVVM::Tcgen05WaitKind::STORE);
    }
    // P_j as f16/bf16 pairs over the first B_c / 2 columns of its buffer.
    SmallVector<Value> p;
    for (int64_t c = 0; c < bc; c += 2)
      p.push_back(packPair(s[c], s[c + 1]));
    storeColumns(sColumn, p);
    fenceBeforeSync();
    NVVM::MBarrierArriveOp::create(b, loc, Type(), pFull(buffer), Value());
    scf::YieldOp::create(b, loc, ValueRange{m, l});
    return SmallVector<Value>(loop.getResults());
  };
  Value unmaskedStop =
      arith::MaxUIOp::create(b, loc, tile.unmaskedEnd, tile.firstBlock);
  SmallVector<Value> state =
      emitLoop(tile.firstBlock, unmaskedStop, ValueRange{negInf, cf(0.0)},
               /*masked=*/false);
  state = emitLoop(unmaskedStop, tile.numBlocks, state, /*masked=*/true);
  Value m = state[0], l = state[1];

  // Epilogue: O / l and LSE = (m + log2 l) ln 2 of this thread's row; a
  // row that saw no key (l = 0) gets O = 0 and LSE = -inf.
  waitBarrier(oDone(), bit(sub(sub(tile.numBlocks, tile.firstBlock), c32(1))));
  fenceAfterSync();
  Value positive =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, l, cf(0.0));
  Value inv =
      select(positive, arith::DivFOp::create(b, loc, cf(1.0), l), cf(0.0));
  Value inRange = ult(row, nq);
  Value rowIndex = add(mul(ext64(tile.qMatrix), ext64(nq)), ext64(row));
  Value oRow = gep(globalPtr, half, oPtr, mul(rowIndex, c64(spec.headDim)));
  // 32 columns of O at a time (tcgen05.ld is warp-collective: every lane
  // loads, rows past Nq do not store), written as 16-byte stores.
  auto quad = VectorType::get({4}, i32);
  for (int64_t c = 0; c < spec.headDim; c += kLdColumns) {
    SmallVector<Value> o = loadColumns(add(oColumn, c32(c)), kLdColumns);
    SmallVector<Value> packed;
    for (int64_t d = 0; d < kLdColumns; d += 8) {
      Value v = LLVM::PoisonOp::create(b, loc, quad);
      for (int64_t e = 0; e < 4; ++e)
        v = LLVM::InsertElementOp::create(
            b, loc, v,
            packPair(fmul(o[d + 2 * e], inv), fmul(o[d + 2 * e + 1], inv)),
            c32(e));
      packed.push_back(v);
    }
    auto ifRow = scf::IfOp::create(b, loc, inRange, false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifRow.thenBlock());
    for (size_t q = 0; q < packed.size(); ++q)
      LLVM::StoreOp::create(b, loc, packed[q],
                            gep(globalPtr, half, oRow, c64(c + 8 * int64_t(q))),
                            /*alignment=*/16);
  }
  if (!spec.writesLse)
    return;
  auto ifRow = scf::IfOp::create(b, loc, inRange, false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifRow.thenBlock());
  Value lse = select(positive, fmul(fadd(m, lg2(l)), cf(kLn2)), negInf);
  LLVM::StoreOp::create(b, loc, lse, gep(globalPtr, f32, lsePtr, rowIndex), 4);
}

LLVM::LLVMFuncOp KernelBuilder::build(gpu::GPUModuleOp module) {
  OpBuilder::InsertionGuard guard(b);
  tmemPtr = LLVM::LLVMPointerType::get(b.getContext(), 6);
  LLVM::LLVMFuncOp fn = beginKernel(module, spec.kernelName(), kThreads, 1, spec.abi);

  tid = NVVM::ThreadIdXOp::create(b, loc, i32);
  warp = divu(tid, c32(32));
  lane = remu(tid, c32(32));
  Value tmemSlot = sharedAt(spec.tmemSlotOffset());

  // Barriers, made visible to the async proxy before anyone uses them.
  {
    auto ifInit = scf::IfOp::create(b, loc, eq(tid, c32(0)), false);
    OpBuilder::InsertionGuard g2(b);
    b.setInsertionPointToStart(ifInit.thenBlock());
    for (int64_t k = 0; k < spec.numBarriers(); ++k) {
      // p_full collects one arrival per softmax thread; every other barrier
      // one arrival (TMA expect_tx or tcgen05.commit).
      bool isPFull = k >= 3 + 4 * spec.stages && k < 5 + 4 * spec.stages;
      NVVM::MBarrierInitOp::create(b, loc, barrier(k),
                                   c32(isPFull ? kBlockR : 1), Value());
    }
    NVVM::FenceMbarrierInitOp::create(b, loc);
  }
  // TMEM: the MMA warp allocates all columns (warp-wide) and gives up the
  // right to allocate more; the address goes through shared memory.
  {
    auto ifMma = scf::IfOp::create(b, loc, eq(warp, c32(kMmaWarp)), false);
    OpBuilder::InsertionGuard g2(b);
    b.setInsertionPointToStart(ifMma.thenBlock());
    NVVM::Tcgen05AllocOp::create(b, loc, tmemSlot, c32(spec.tmemColumns()));
    NVVM::Tcgen05RelinquishAllocPermitOp::create(b, loc);
  }
  fenceBeforeSync();
  NVVM::Barrier0Op::create(b, loc);
  fenceAfterSync();
  tmemBase = LLVM::LoadOp::create(b, loc, i32, tmemSlot);
  tile = decodeTile(NVVM::BlockIdXOp::create(b, loc, i32));

  auto roles = scf::IfOp::create(b, loc, ult(warp, c32(kLoadWarp)), true);
  {
    OpBuilder::InsertionGuard g2(b);
    b.setInsertionPointToStart(roles.thenBlock());
    emitSoftmax();
    b.setInsertionPointToStart(roles.elseBlock());
    auto ifLead = scf::IfOp::create(b, loc, eq(lane, c32(0)), false);
    b.setInsertionPointToStart(ifLead.thenBlock());
    auto ifLoad = scf::IfOp::create(b, loc, eq(warp, c32(kLoadWarp)), true);
    b.setInsertionPointToStart(ifLoad.thenBlock());
    emitLoads();
    b.setInsertionPointToStart(ifLoad.elseBlock());
    emitMma();
  }
  // Everyone is done with TMEM (the epilogue read O): free it.
  fenceBeforeSync();
  NVVM::Barrier0Op::create(b, loc);
  {
    auto ifMma = scf::IfOp::create(b, loc, eq(warp, c32(kMmaWarp)), false);
    OpBuilder::InsertionGuard g2(b);
    b.setInsertionPointToStart(ifMma.thenBlock());
    fenceAfterSync();
    // Lane 0 ran the MMA loop alone: reconverge the warp for the
    // warp-collective dealloc.
    NVVM::SyncWarpOp::create(b, loc, c32(-1));
    NVVM::Tcgen05DeallocOp::create(b, loc, tmemAt(tmemBase, c32(0)),
                                   c32(spec.tmemColumns()));
  }
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
  if (2 * s.blockC + d > 512)
    return fail("two S buffers of " + Twine(s.blockC) + " columns and O of " +
                Twine(d) + " exceed the 512 TMEM columns");
  if (s.stages < 2 || s.stages > 4)
    return fail("the kernel needs a K/V ring of 2 to 4 stages, got " +
                Twine(s.stages) + ": run fagpu-pipeline-kv");
  KernelSpec &spec = reader.spec;
  static_cast<fagpu::SM100Layout &>(spec) = fagpu::sm100Layout(d, s);
  spec.bf16 = op.isBF16();
  spec.abi = fagpu::kernelParams(fagpu::Target::sm_100a, s,
                                 spec.bf16 ? "bf16" : "f16");
  if (spec.sharedBytes() > fagpu::maxSharedBytes())
    return fail("the schedule needs " + Twine(spec.sharedBytes()) +
                " bytes of shared memory, more than " +
                Twine(fagpu::maxSharedBytes() / 1024) + " KiB");
  return spec;
}

} // namespace

LogicalResult mlir::fa::lowerSM100Kernels(ModuleOp module) {
  auto build = [](OpBuilder &b, Location loc, const KernelSpec &spec,
                  gpu::GPUModuleOp kernels) {
    return KernelBuilder(b, loc, spec).build(kernels);
  };
  auto launch = [](fagpu::AttentionOp op, LLVM::LLVMFuncOp kernel,
                   const KernelSpec &spec) {
    replaceWithTensorMapLaunch(op, kernel,
                               TensorMapLaunch{spec.headDim, kBlockR,
                                               spec.bf16, kThreads,
                                               spec.sharedBytes(), spec.abi});
  };
  return lowerEachKernel<KernelSpec>(module, fagpu::Target::sm_100a, specOf,
                                     build, launch);
}
