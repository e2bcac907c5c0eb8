//===- WarpgroupToNVVM.cpp - the kernel-body ops to NVVM, one pattern each ===//
//
// Lowers the ops `fagpu-build-kernels` writes a kernel in. Values change
// form on the way (a 1:N type conversion):
//   !fagpu.fragment<...>  -> its registers (getRegisters() x f32 or i32)
//   !fagpu.smem_tile<...> -> (aligned shared base, byte offset)
//   !fagpu.pipeline<...>  -> (aligned shared base, barrier offset, tile
//                             offset)
// so loops carry fragments as the registers they are, and each op's pattern
// emits its hardware sequence on them. The types say which: column-block
// tiles are sm_90a's (TMA, mbarrier, wgmma, stmatrix), row-major tiles
// sm_80's (cp.async groups, ldmatrix, mma.sync). The softmax arithmetic on
// accumulator fragments (Common/OnlineSoftmax.h) is the same for both: the
// mma.sync C fragment is the accumulator layout, and a 128-row fragment is
// two such row tiles per warp.
//
// This file holds the type conversion, the warp roles, the tile scheduler
// and device asserts; the other ops' patterns are in one file per theme
// (PipelineToNVVM, TensorCoreToNVVM, SoftmaxToNVVM, EpilogueToNVVM,
// Tcgen05ToNVVM.cpp) over WarpgroupLowering.h.
//
//===----------------------------------------------------------------------===//

#include "WarpgroupToNVVM.h"

#include "WarpgroupLowering.h"

#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/SCF/Transforms/Patterns.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::warpgroup;

namespace {

//===----------------------------------------------------------------------===//
// Warp roles
//===----------------------------------------------------------------------===//

/// scf.if on the warpgroup: the producer gives registers back, the
/// consumers (warpgroup - 1) take them.
struct WarpSpecializeLowering : OpConversionPattern<fagpu::WarpSpecializeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::WarpSpecializeOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpEmitter e(rewriter, loc, rewriter.getF16Type());
    Value group = adaptor.getWarpgroup().front();
    auto roles = scf::IfOp::create(rewriter, loc, e.eq(group, e.c32(0)), true);
    rewriter.setInsertionPoint(roles.thenBlock()->getTerminator());
    NVVM::SetMaxRegisterOp::create(rewriter, loc, op.getProducerRegisters(),
                                   NVVM::SetMaxRegisterAction::decrease);
    rewriter.inlineBlockBefore(&op.getProducer().front(),
                               roles.thenBlock()->getTerminator());
    rewriter.setInsertionPoint(roles.elseBlock()->getTerminator());
    NVVM::SetMaxRegisterOp::create(rewriter, loc, op.getConsumerRegisters(),
                                   NVVM::SetMaxRegisterAction::increase);
    Value consumer = e.sub(group, e.c32(1));
    rewriter.inlineBlockBefore(&op.getConsumer().front(),
                               roles.elseBlock()->getTerminator(), {consumer});
    rewriter.eraseOp(op);
    return success();
  }
};

/// Ping-pong hand-offs: named barriers of the two partners' 256 threads.
struct WaitTurnLowering : OpConversionPattern<fagpu::WaitTurnOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::WaitTurnOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    OpEmitter e(rewriter, op.getLoc(), rewriter.getF16Type());
    NVVM::BarrierOp::create(
        rewriter, op.getLoc(), Type(), adaptor.getBarrier().front(),
        e.c32(op.getThreads()), NVVM::BarrierReductionAttr(), Value());
    rewriter.eraseOp(op);
    return success();
  }
};

struct PassTurnLowering : OpConversionPattern<fagpu::PassTurnOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::PassTurnOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    OpEmitter e(rewriter, op.getLoc(), rewriter.getF16Type());
    NVVM::BarrierArriveOp::create(rewriter, op.getLoc(),
                                  adaptor.getBarrier().front(),
                                  e.c32(op.getThreads()));
    rewriter.eraseOp(op);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Tile scheduler
//===----------------------------------------------------------------------===//

/// gridDim.x + atomicAdd(counter, 1); the fetch that takes the last count
/// (tiles - 1) swaps the counter back to 0 for the next launch.
struct FetchTileLowering : OpConversionPattern<fagpu::FetchTileOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::FetchTileOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpEmitter e(rewriter, loc, rewriter.getF16Type());
    Value counter = adaptor.getCounter().front();
    Value taken = LLVM::AtomicRMWOp::create(
        rewriter, loc, LLVM::AtomicBinOp::add, counter, e.c32(1),
        LLVM::AtomicOrdering::monotonic);
    Value last = e.eq(taken, e.sub(adaptor.getTiles().front(), e.c32(1)));
    auto ifLast = scf::IfOp::create(rewriter, loc, last, false);
    {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToStart(ifLast.thenBlock());
      LLVM::AtomicRMWOp::create(rewriter, loc, LLVM::AtomicBinOp::xchg, counter,
                                e.c32(0), LLVM::AtomicOrdering::monotonic);
    }
    Value grid = NVVM::GridDimXOp::create(rewriter, loc, e.i32);
    rewriter.replaceOp(op, e.add(grid, taken));
    return success();
  }
};

/// A volatile store: the consumers' read follows the mbarrier wait, which
/// the compiler cannot see as ordering plain shared-memory accesses.
struct PublishTileLowering : OpConversionPattern<fagpu::PublishTileOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::PublishTileOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    LLVM::StoreOp::create(rewriter, op.getLoc(), adaptor.getId().front(),
                          adaptor.getSlot().front(), /*alignment=*/4,
                          /*isVolatile=*/true);
    rewriter.eraseOp(op);
    return success();
  }
};

struct ReceiveTileLowering : OpConversionPattern<fagpu::ReceiveTileOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::ReceiveTileOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<LLVM::LoadOp>(
        op, rewriter.getI32Type(), adaptor.getSlot().front(), /*alignment=*/4,
        /*isVolatile=*/true);
    return success();
  }
};

/// cf.assert in a kernel -> a trap where the condition fails: the launch
/// fails ("unspecified launch failure") and the CUDA context with it, as
/// after torch's device-side asserts, but without the message. CUDA prints
/// one only through __assertfail, a call, and ptxas serialises every
/// asynchronous tensor-core product (wgmma, tcgen05) of a function that
/// makes a call, wherever it sits (C7510): the sm_90a varlen and
/// chunked-prefill kernels ran 1.6-1.7x slower with it on an H100
/// (bench/results/2026-12-06-serving-host-plans-h100.md). The rules and
/// their messages stay in the IR (the cf.assert's), and
/// FLASHMLIR_CHECK_INPUTS=1 has the Python entry points check the same
/// values on the host, with the messages. An scf.if, not a branch: the
/// kernel body is still structured here.
struct DeviceAssertLowering : OpConversionPattern<cf::AssertOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(cf::AssertOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (!op->getParentOfType<gpu::GPUModuleOp>())
      return failure();
    Location loc = op.getLoc();
    Value one = arith::ConstantIntOp::create(rewriter, loc, 1, 1);
    Value failed = arith::XOrIOp::create(rewriter, loc, adaptor.getArg(), one);
    auto ifFailed = scf::IfOp::create(rewriter, loc, failed, false);
    rewriter.setInsertionPointToStart(ifFailed.thenBlock());
    LLVM::Trap::create(rewriter, loc);
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void mlir::fa::populateWarpgroupTypeConversions(TypeConverter &converter) {
  converter.addConversion([](Type type) { return type; });
  converter.addConversion(
      [](fagpu::FragmentType type, SmallVectorImpl<Type> &registers) {
        registers.append(type.getRegisters(), type.getRegisterType());
        return success();
      });
  converter.addConversion(
      [](fagpu::SharedTileType type, SmallVectorImpl<Type> &values) {
        MLIRContext *ctx = type.getContext();
        values.append(
            {LLVM::LLVMPointerType::get(ctx, 3), IntegerType::get(ctx, 32)});
        return success();
      });
  // A TMEM region: the allocation's address and the region's first column.
  converter.addConversion(
      [](fagpu::TmemType type, SmallVectorImpl<Type> &values) {
        values.append(2, IntegerType::get(type.getContext(), 32));
        return success();
      });
  converter.addConversion(
      [](fagpu::BarriersType type, SmallVectorImpl<Type> &values) {
        MLIRContext *ctx = type.getContext();
        values.append(
            {LLVM::LLVMPointerType::get(ctx, 3), IntegerType::get(ctx, 32)});
        return success();
      });
  converter.addConversion(
      [](fagpu::PipelineType type, SmallVectorImpl<Type> &values) {
        MLIRContext *ctx = type.getContext();
        values.append({LLVM::LLVMPointerType::get(ctx, 3),
                       IntegerType::get(ctx, 32), IntegerType::get(ctx, 32)});
        return success();
      });
}

void mlir::fa::populateWarpgroupToNVVMPatterns(const TypeConverter &converter,
                                               RewritePatternSet &patterns) {
  patterns.add<WarpSpecializeLowering, WaitTurnLowering, PassTurnLowering>(
      converter, patterns.getContext());
  warpgroup::populatePipelinePatterns(converter, patterns);
  warpgroup::populateTensorCorePatterns(converter, patterns);
  warpgroup::populateSoftmaxPatterns(converter, patterns);
  warpgroup::populateModificationPatterns(converter, patterns);
  warpgroup::populateEpiloguePatterns(converter, patterns);
  warpgroup::populateBackwardPatterns(converter, patterns);
  patterns.add<FetchTileLowering, PublishTileLowering, ReceiveTileLowering>(
      converter, patterns.getContext());
  warpgroup::populateTcgen05Patterns(converter, patterns);
  patterns.add<DeviceAssertLowering>(converter, patterns.getContext());
}

LogicalResult mlir::fa::lowerWarpgroupOps(ModuleOp module) {
  MLIRContext *ctx = module.getContext();
  TypeConverter converter;
  populateWarpgroupTypeConversions(converter);
  RewritePatternSet patterns(ctx);
  populateWarpgroupToNVVMPatterns(converter, patterns);
  ConversionTarget target(*ctx);
  target.addLegalDialect<LLVM::LLVMDialect, NVVM::NVVMDialect,
                         arith::ArithDialect, math::MathDialect,
                         gpu::GPUDialect, memref::MemRefDialect>();
  target.addIllegalDialect<fagpu::FAGPUDialect>();
  target.addLegalOp<fagpu::AttentionOp>();
  // Its score_mod and mask_mod stay as they are (fagpu.yield included)
  // until a kernel builder copies them.
  target.markOpRecursivelyLegal<fagpu::AttentionOp>();
  // Device-side asserts become traps in the kernels; host code keeps its
  // cf.assert for convert-cf-to-llvm.
  target.addDynamicallyLegalOp<cf::AssertOp>(
      [](cf::AssertOp op) { return !op->getParentOfType<gpu::GPUModuleOp>(); });
  scf::populateSCFStructuralTypeConversionsAndLegality(converter, patterns,
                                                       target);
  return applyPartialConversion(module, target, std::move(patterns));
}
