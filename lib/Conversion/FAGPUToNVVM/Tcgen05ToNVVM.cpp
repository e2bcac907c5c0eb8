//===- Tcgen05ToNVVM.cpp - sm_100a ops to NVVM ----------------------------===//
//
// sm_100a: warp roles, mbarriers, tensor memory, tcgen05.mma and the
// softmax and epilogue on TMEM accumulators.
// One pattern per op; WarpgroupToNVVM.cpp says how values change form.
//
//===----------------------------------------------------------------------===//

#include "WarpgroupLowering.h"

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::warpgroup;

namespace {

//===----------------------------------------------------------------------===//
// Tensor memory and tcgen05 (sm_100a)
//===----------------------------------------------------------------------===//

/// The barrier of use `use` of a lowered !fagpu.barriers (base, byte
/// offset): barrier use mod N.
Value barrierAt(OpEmitter &e, fagpu::BarriersType type, ValueRange barriers,
                Value use) {
  e.smem = barriers[0];
  Value index = e.remu(use, e.c32(type.getCount()));
  return e.sharedAt(e.add(barriers[1], e.mul(index, e.c32(8))));
}
/// Its phase: (use / N) mod 2.
Value barrierPhase(OpEmitter &e, Location loc, fagpu::BarriersType type,
                   Value use) {
  return arith::AndIOp::create(e.builder(), loc,
                               e.divu(use, e.c32(type.getCount())), e.c32(1));
}

/// scf.if: warps 0-3 the softmax; lane 0 of the load warp and of the MMA
/// warp their roles.
struct TcgenRolesLowering : OpConversionPattern<fagpu::TcgenRolesOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::TcgenRolesOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpEmitter e(rewriter, loc, rewriter.getF16Type());
    Value warp = adaptor.getWarp().front();
    Value lane = e.position().lane;
    auto roles = scf::IfOp::create(rewriter, loc, e.ult(warp, e.c32(4)), true);
    rewriter.inlineBlockBefore(&op.getSoftmax().front(),
                               roles.thenBlock()->getTerminator());
    rewriter.setInsertionPoint(roles.elseBlock()->getTerminator());
    auto ifLead = scf::IfOp::create(rewriter, loc, e.eq(lane, e.c32(0)), false);
    rewriter.setInsertionPoint(ifLead.thenBlock()->getTerminator());
    auto ifLoad = scf::IfOp::create(rewriter, loc,
                                    e.eq(warp, e.c32(op.getLoadWarp())), true);
    rewriter.inlineBlockBefore(&op.getLoad().front(),
                               ifLoad.thenBlock()->getTerminator());
    rewriter.inlineBlockBefore(&op.getMma().front(),
                               ifLoad.elseBlock()->getTerminator());
    rewriter.eraseOp(op);
    return success();
  }
};

struct CreateBarriersLowering : OpConversionPattern<fagpu::CreateBarriersOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::CreateBarriersOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (!hasSharedMemory(op))
      return rewriter.notifyMatchFailure(op, "no fa_smem in the module");
    OpEmitter e(rewriter, op.getLoc(), rewriter.getF16Type());
    SmallVector<Value> values = {sharedBase(e, op), e.c32(op.getOffset())};
    rewriter.replaceOpWithMultiple(op, {values});
    return success();
  }
};

/// Thread 0 initialises each operand's barriers in the order of their
/// offsets, then fences them for the async proxy; no CTA barrier.
struct InitBarriersLowering : OpConversionPattern<fagpu::InitBarriersOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::InitBarriersOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpEmitter e(rewriter, loc, rewriter.getF16Type());
    Value tid = NVVM::ThreadIdXOp::create(rewriter, loc, e.i32);
    auto ifInit = scf::IfOp::create(rewriter, loc, e.eq(tid, e.c32(0)), false);
    rewriter.setInsertionPoint(ifInit.thenBlock()->getTerminator());
    for (auto [value, lowered, arrivals] :
         llvm::zip(op.getBarriers(), adaptor.getBarriers(), op.getArrivals())) {
      SmallVector<Value> barriers;
      if (auto type = dyn_cast<fagpu::PipelineType>(value.getType())) {
        PipelineValues p(value, lowered);
        int64_t count =
            type.getStages() * type.getBuffers() * (type.getFillOnce() ? 1 : 2);
        for (int64_t i = 0; i < count; ++i)
          barriers.push_back(p.barrier(e, e.c32(i)));
      } else {
        int64_t count = cast<fagpu::BarriersType>(value.getType()).getCount();
        e.smem = lowered[0];
        for (int64_t i = 0; i < count; ++i)
          barriers.push_back(
              e.sharedAt(e.add(lowered[1], e.mul(e.c32(i), e.c32(8)))));
      }
      for (Value barrier : barriers)
        NVVM::MBarrierInitOp::create(rewriter, loc, barrier, e.c32(arrivals),
                                     Value());
    }
    NVVM::FenceMbarrierInitOp::create(rewriter, loc);
    rewriter.eraseOp(op);
    return success();
  }
};

struct BarrierWaitLowering : OpConversionPattern<fagpu::BarrierWaitOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::BarrierWaitOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    OpEmitter e(rewriter, op.getLoc(), rewriter.getF16Type());
    fagpu::BarriersType type = op.getBarriers().getType();
    Value use = adaptor.getUse().front();
    Value barrier = barrierAt(e, type, adaptor.getBarriers(), use);
    e.waitBarrier(barrier, barrierPhase(e, op.getLoc(), type, use));
    e.tcgen05FenceAfter();
    rewriter.eraseOp(op);
    return success();
  }
};

struct BarrierArriveLowering : OpConversionPattern<fagpu::BarrierArriveOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::BarrierArriveOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    OpEmitter e(rewriter, op.getLoc(), rewriter.getF16Type());
    e.tcgen05FenceBefore();
    NVVM::MBarrierArriveOp::create(rewriter, op.getLoc(), Type(),
                                   barrierAt(e, op.getBarriers().getType(),
                                             adaptor.getBarriers(),
                                             adaptor.getUse().front()),
                                   Value());
    rewriter.eraseOp(op);
    return success();
  }
};

struct MmaCommitLowering : OpConversionPattern<fagpu::MmaCommitOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::MmaCommitOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    OpEmitter e(rewriter, op.getLoc(), rewriter.getF16Type());
    NVVM::Tcgen05CommitOp::create(rewriter, op.getLoc(),
                                  barrierAt(e, op.getBarriers().getType(),
                                            adaptor.getBarriers(),
                                            adaptor.getUse().front()),
                                  Value());
    rewriter.eraseOp(op);
    return success();
  }
};

/// The allocating warp writes the address to the shared-memory slot; the
/// CTA barrier between tcgen05 fences publishes it (and the barriers
/// initialised before it); every thread reads it.
struct TmemAllocLowering : OpConversionPattern<fagpu::TmemAllocOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::TmemAllocOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (!hasSharedMemory(op))
      return rewriter.notifyMatchFailure(op, "no fa_smem in the module");
    Location loc = op.getLoc();
    OpEmitter e(rewriter, loc, rewriter.getF16Type());
    e.smem = sharedBase(e, op);
    Value slot = e.sharedAt(op.getSlotOffset());
    auto ifAlloc = scf::IfOp::create(
        rewriter, loc,
        e.eq(adaptor.getWarp().front(), e.c32(op.getAllocWarp())), false);
    {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPoint(ifAlloc.thenBlock()->getTerminator());
      NVVM::Tcgen05AllocOp::create(rewriter, loc, slot,
                                   e.c32(op.getType().getColumns()));
      NVVM::Tcgen05RelinquishAllocPermitOp::create(rewriter, loc);
    }
    e.tcgen05FenceBefore();
    NVVM::Barrier0Op::create(rewriter, loc);
    e.tcgen05FenceAfter();
    SmallVector<Value> tmem = {LLVM::LoadOp::create(rewriter, loc, e.i32, slot),
                               e.c32(0)};
    rewriter.replaceOpWithMultiple(op, {tmem});
    return success();
  }
};

struct TmemDeallocLowering : OpConversionPattern<fagpu::TmemDeallocOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::TmemDeallocOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpEmitter e(rewriter, loc, rewriter.getF16Type());
    ValueRange tmem = adaptor.getTmem();
    e.tcgen05FenceBefore();
    NVVM::Barrier0Op::create(rewriter, loc);
    auto ifFree = scf::IfOp::create(
        rewriter, loc,
        e.eq(adaptor.getWarp().front(), e.c32(op.getAllocWarp())), false);
    rewriter.setInsertionPoint(ifFree.thenBlock()->getTerminator());
    e.tcgen05FenceAfter();
    NVVM::SyncWarpOp::create(rewriter, loc, e.c32(-1));
    NVVM::Tcgen05DeallocOp::create(rewriter, loc, e.tmemAt(tmem[0], tmem[1]),
                                   e.c32(op.getTmem().getType().getColumns()));
    rewriter.eraseOp(op);
    return success();
  }
};

struct TmemSliceLowering : OpConversionPattern<fagpu::TmemSliceOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::TmemSliceOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    OpEmitter e(rewriter, op.getLoc(), rewriter.getF16Type());
    ValueRange tmem = adaptor.getTmem();
    SmallVector<Value> slice = {tmem[0],
                                e.add(tmem[1], adaptor.getColumn().front())};
    rewriter.replaceOpWithMultiple(op, {slice});
    return success();
  }
};

struct TmemLoadLowering : OpConversionPattern<fagpu::TmemLoadOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::TmemLoadOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    OpEmitter e(rewriter, op.getLoc(), rewriter.getF16Type());
    ValueRange tmem = adaptor.getTmem();
    rewriter.replaceOpWithMultiple(
        op,
        {e.loadColumns(tmem[0], tmem[1], op.getTmem().getType().getCols())});
    return success();
  }
};

/// f16/bf16 regions take the row as pairs (element 2 c in the low half of
/// column c), f32 ones as it is.
struct TmemStoreLowering : OpConversionPattern<fagpu::TmemStoreOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::TmemStoreOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    fagpu::TmemType type = op.getTmem().getType();
    OpEmitter e(rewriter, op.getLoc(), type.getElementType());
    ValueRange row = adaptor.getValue();
    SmallVector<Value> columns(row);
    if (!type.getElementType().isF32()) {
      columns.clear();
      for (size_t c = 0; c < row.size(); c += 2)
        columns.push_back(e.packPair(row[c], row[c + 1]));
    }
    ValueRange tmem = adaptor.getTmem();
    e.storeColumns(tmem[0], tmem[1], columns);
    rewriter.eraseOp(op);
    return success();
  }
};

/// One tcgen05.mma (kind::f16, cta_group::1) per 16-element k-step. The
/// 32-bit instruction descriptor: bits 4-5 D type (1 = f32), 7-9 / 10-12 A
/// / B type (0 = f16, 1 = bf16), 15 / 16 transpose A / B (0 = K-major),
/// 17-22 N >> 3, 24-28 M >> 4. Shared-memory descriptors are the sm_90a
/// ones with the sm_100a format bits.
struct Tcgen05MmaLowering : OpConversionPattern<fagpu::MmaOp> {
  using OpConversionPattern::OpConversionPattern;
  /// Version 0b001 at bits 46-48, 128-B swizzle = 2 at bits 61-63.
  static constexpr int64_t kTcgen05Swizzle128 = int64_t(1) << 46 | int64_t(2)
                                                                       << 61;

  LogicalResult
  matchAndRewrite(fagpu::MmaOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (op.getResult() || !op.getAcc())
      return rewriter.notifyMatchFailure(op, "fragments: MmaLowering");
    Location loc = op.getLoc();
    fagpu::SharedTileType bType = op.getB().getType();
    auto accType = cast<fagpu::TmemType>(op.getAcc().getType());
    OpEmitter e(rewriter, loc, bType.getElementType(), SoftmaxConfig(),
                bType.getCols(), bType.getRows());
    int64_t type = bType.getElementType().isBF16() ? 1 : 0;
    int64_t n = accType.getCols(), m = accType.getLanes();
    bool mnMajor = op.getMnMajor();
    Value idesc =
        e.c32(int64_t(1) << 4 | type << 7 | type << 10 |
              int64_t(mnMajor) << 16 | (n >> 3) << 17 | (m >> 4) << 24);
    ValueRange acc = adaptor.getAcc(), bTile = adaptor.getB();
    Value d = e.tmemAt(acc[0], acc[1]);
    Value first =
        op.getAccumulate() ? adaptor.getAccumulate().front() : Value();
    auto flag = [&](int64_t kk) -> Value {
      if (kk == 0 && first)
        return first;
      return arith::ConstantIntOp::create(rewriter, loc, kk != 0, 1);
    };
    auto mma = [&](Value a, Value b, Value accumulate) {
      NVVM::Tcgen05MMAOp::create(
          rewriter, loc, NVVM::Tcgen05MMAKind::F16, NVVM::CTAGroupKind::CTA_1,
          NVVM::Tcgen05MMACollectorOp::DISCARD,
          /*aShift=*/false, d, a, b, idesc, accumulate, Value(), Value());
    };
    if (auto aTile = dyn_cast<fagpu::SharedTileType>(op.getA().getType())) {
      // S = Q K^T: both operands K-major in shared memory.
      Value aOffset = adaptor.getA()[1];
      for (int64_t kk = 0; kk < aTile.getCols() / 16; ++kk) {
        Value a = e.kMajorDescriptor(aOffset, aTile.getRows(), kk,
                                     kTcgen05Swizzle128);
        Value b = e.kMajorDescriptor(bTile[1], bType.getRows(), kk,
                                     kTcgen05Swizzle128);
        mma(a, b, flag(kk));
      }
    } else {
      // O += P V: P from TMEM, k-step kk in 32-bit columns 8 kk .. 8 kk + 7
      // (16 f16 pairs' worth), V MN-major.
      ValueRange aTmem = adaptor.getA();
      for (int64_t kk = 0; kk < bType.getRows() / 16; ++kk) {
        Value a = e.tmemAt(aTmem[0], e.add(aTmem[1], e.c32(8 * kk)));
        Value b = e.valueDescriptor(bTile[1], kk, kTcgen05Swizzle128);
        mma(a, b, flag(kk));
      }
    }
    rewriter.eraseOp(op);
    return success();
  }
};

/// Every softmax thread's own row: 32 columns at a time from TMEM, times
/// alpha, back to TMEM; FA4's skip is a warp vote (tcgen05.ld/st are
/// warp-collective).
struct TmemRescaleLowering : OpConversionPattern<fagpu::RescaleOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::RescaleOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto type = dyn_cast<fagpu::TmemType>(op.getO().getType());
    if (!type)
      return rewriter.notifyMatchFailure(op, "fragments: RescaleLowering");
    Location loc = op.getLoc();
    OpEmitter e(rewriter, loc, rewriter.getF16Type());
    ValueRange o = adaptor.getO();
    Value alpha = adaptor.getAlpha().front();
    {
      OpBuilder::InsertionGuard guard(rewriter);
      if (op.getMoved()) {
        Value anyMoved = NVVM::VoteSyncOp::create(
            rewriter, loc, rewriter.getI1Type(), e.c32(-1),
            adaptor.getMoved().front(),
            NVVM::VoteSyncKindAttr::get(rewriter.getContext(),
                                        NVVM::VoteSyncKind::any));
        auto ifMoved = scf::IfOp::create(rewriter, loc, anyMoved, false);
        rewriter.setInsertionPoint(ifMoved.thenBlock()->getTerminator());
      }
      for (int64_t c = 0; c < type.getCols(); c += OpEmitter::kTmemChunk) {
        Value column = e.add(o[1], e.c32(c));
        SmallVector<Value> row =
            e.loadColumns(o[0], column, OpEmitter::kTmemChunk);
        for (Value &v : row)
          v = e.fmul(v, alpha);
        e.storeColumns(o[0], column, row, /*wait=*/false);
      }
      NVVM::Tcgen05WaitOp::create(rewriter, loc, NVVM::Tcgen05WaitKind::STORE);
    }
    rewriter.eraseOp(op);
    return success();
  }
};

/// The online-softmax step on the thread's own row (lanes fragments).
struct LanesSoftmaxStepLowering : OpConversionPattern<fagpu::SoftmaxStepOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::SoftmaxStepOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (op.getS().getType().getLayout() != fagpu::FragmentLayout::Lanes)
      return rewriter.notifyMatchFailure(op, "quads: SoftmaxStepLowering");
    SoftmaxConfig config = configOf(op);
    OpEmitter e(rewriter, op.getLoc(), rewriter.getF16Type(), config);
    Value negInf = e.cf(-std::numeric_limits<double>::infinity());
    SmallVector<Value> s(adaptor.getS());
    Value effScale = e.applySoftcap(s, adaptor.getScaleLog2().front());
    if (op.getMasked()) {
      Value kStart = adaptor.getKeyStart().front();
      Value row = adaptor.getRow0().front(), nk = adaptor.getNk().front();
      Value shift =
          op.getDiagonalShift() ? adaptor.getDiagonalShift().front() : Value();
      if (!config.window) {
        // Column c is visible iff c < min(Nk, row + 1) - kStart.
        Value limit = e.visibleLimit(kStart, row, nk, shift);
        for (int64_t c = 0; c < int64_t(s.size()); ++c)
          s[c] = e.select(e.slt(e.c32(c), limit), s[c], negInf);
      } else {
        for (int64_t c = 0; c < int64_t(s.size()); ++c)
          s[c] = e.select(e.keyVisible(e.add(kStart, e.c32(c)), row, nk, shift),
                          s[c], negInf);
      }
    }
    // A row per thread: its max and sum need no shuffles.
    Value mx = negInf;
    for (Value v : s)
      mx = e.fmax(mx, v);
    Value m = adaptor.getM().front(), l = adaptor.getL().front();
    OpEmitter::RowUpdate update = e.moveBase(mx, m, effScale);
    Value negBase = arith::NegFOp::create(rewriter, op.getLoc(), update.base);
    Value rowSum = e.cf(0.0);
    for (int64_t c = 0; c < int64_t(s.size()); ++c) {
      s[c] = e.exp2Score(s[c], effScale, negBase, c);
      rowSum = e.fadd(rowSum, s[c]);
    }
    l = e.fma(update.alpha, l, rowSum);
    SmallVector<SmallVector<Value>> results = {s, {m}, {l}, {update.alpha}};
    if (op.getMoved())
      results.push_back({update.moved});
    rewriter.replaceOpWithMultiple(op, std::move(results));
    return success();
  }
};

/// O times its row's factor from TMEM, 32 columns at a time, as 16-byte
/// stores (a row that saw no key has factor 0: O = 0).
struct StoreTmemRowsLowering : OpConversionPattern<fagpu::StoreTmemRowsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::StoreTmemRowsOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto type = cast<fagpu::TmemType>(op.getO().getType());
    Location loc = op.getLoc();
    OpEmitter e(rewriter, loc, op.getOutElement());
    int64_t headDim = type.getCols();
    ValueRange o = adaptor.getO();
    Value inv = adaptor.getFactor().front();
    Value row = adaptor.getRow0().front(), nq = adaptor.getNq().front();
    Value inRange = e.ult(row, nq);
    Value rowIndex = e.add(
        e.mul(e.ext64(adaptor.getMatrix().front()), e.ext64(nq)), e.ext64(row));
    Value oRow = e.gep(e.globalPtr, e.half, adaptor.getOut().front(),
                       e.mul(rowIndex, e.c64(headDim)));
    auto quad = VectorType::get({4}, e.i32);
    for (int64_t c = 0; c < headDim; c += OpEmitter::kTmemChunk) {
      SmallVector<Value> chunk =
          e.loadColumns(o[0], e.add(o[1], e.c32(c)), OpEmitter::kTmemChunk);
      SmallVector<Value> packed;
      for (int64_t d = 0; d < OpEmitter::kTmemChunk; d += 8) {
        Value v = LLVM::PoisonOp::create(rewriter, loc, quad);
        for (int64_t i = 0; i < 4; ++i)
          v = LLVM::InsertElementOp::create(
              rewriter, loc, v,
              e.packPair(e.fmul(chunk[d + 2 * i], inv),
                         e.fmul(chunk[d + 2 * i + 1], inv)),
              e.c32(i));
        packed.push_back(v);
      }
      auto ifRow = scf::IfOp::create(rewriter, loc, inRange, false);
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPoint(ifRow.thenBlock()->getTerminator());
      for (size_t q = 0; q < packed.size(); ++q)
        LLVM::StoreOp::create(
            rewriter, loc, packed[q],
            e.gep(e.globalPtr, e.half, oRow, e.c64(c + 8 * int64_t(q))),
            /*alignment=*/16);
    }
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void mlir::fa::warpgroup::populateTcgen05Patterns(
    const TypeConverter &converter, RewritePatternSet &patterns) {
  patterns.add<TcgenRolesLowering, CreateBarriersLowering, InitBarriersLowering,
               BarrierWaitLowering, BarrierArriveLowering, MmaCommitLowering,
               TmemAllocLowering, TmemDeallocLowering, TmemSliceLowering,
               TmemLoadLowering, TmemStoreLowering, Tcgen05MmaLowering,
               TmemRescaleLowering, LanesSoftmaxStepLowering,
               StoreTmemRowsLowering>(converter, patterns.getContext());
}
