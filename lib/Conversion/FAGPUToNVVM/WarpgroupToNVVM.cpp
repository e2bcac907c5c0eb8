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
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/xxhash.h"

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

/// The address of a NUL-terminated string constant of `module` (one global
/// per distinct text, named by its xxh3 hash, which is the same in every
/// process: the PTX of a kernel does not change between builds).
static Value stringConstant(OpBuilder &b, gpu::GPUModuleOp module, Location loc,
                            StringRef text) {
  std::string name =
      "fa_str_" + llvm::utohexstr(llvm::xxh3_64bits(text), /*LowerCase=*/true);
  auto global = module.lookupSymbol<LLVM::GlobalOp>(name);
  if (!global) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    std::string bytes = (text + Twine('\0')).str();
    global = LLVM::GlobalOp::create(
        b, loc, LLVM::LLVMArrayType::get(b.getI8Type(), bytes.size()),
        /*isConstant=*/true, LLVM::Linkage::Internal, name,
        b.getStringAttr(bytes));
  }
  return LLVM::AddressOfOp::create(b, loc, global);
}

/// cf.assert in a kernel -> CUDA's device-side assert: where the condition
/// fails, __assertfail(message, file, line, function, 1) reports the
/// message with the failing block and thread, and the kernel traps (the
/// launch fails with an assert error and the context with it, as after
/// torch's device asserts). An scf.if, not a branch: the kernel body is
/// still structured here.
struct DeviceAssertLowering : OpConversionPattern<cf::AssertOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(cf::AssertOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto module = op->getParentOfType<gpu::GPUModuleOp>();
    if (!module)
      return failure();
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    auto ptr = LLVM::LLVMPointerType::get(ctx);
    Type i32 = rewriter.getI32Type(), i64 = rewriter.getI64Type();
    auto callee = module.lookupSymbol<LLVM::LLVMFuncOp>("__assertfail");
    if (!callee) {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToStart(module.getBody());
      callee = LLVM::LLVMFuncOp::create(
          rewriter, loc, "__assertfail",
          LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx),
                                      {ptr, ptr, i32, ptr, i64}));
    }
    StringRef file = "flash-mlir";
    unsigned line = 0;
    if (auto fileLoc = loc->findInstanceOf<FileLineColLoc>()) {
      file = fileLoc.getFilename();
      line = fileLoc.getLine();
    }
    auto kernel = op->getParentOfType<LLVM::LLVMFuncOp>();
    StringRef function = kernel ? kernel.getSymName() : "kernel";
    Value one = arith::ConstantIntOp::create(rewriter, loc, 1, 1);
    Value failed = arith::XOrIOp::create(rewriter, loc, adaptor.getArg(), one);
    auto ifFailed = scf::IfOp::create(rewriter, loc, failed, false);
    rewriter.setInsertionPointToStart(ifFailed.thenBlock());
    LLVM::CallOp::create(
        rewriter, loc, callee,
        ValueRange{stringConstant(rewriter, module, loc, adaptor.getMsg()),
                   stringConstant(rewriter, module, loc, file),
                   arith::ConstantIntOp::create(rewriter, loc, line, 32),
                   stringConstant(rewriter, module, loc, function),
                   arith::ConstantIntOp::create(rewriter, loc, 1, 64)});
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
  warpgroup::populateEpiloguePatterns(converter, patterns);
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
  // Device-side asserts become __assertfail calls in the kernels; host
  // code keeps its cf.assert for convert-cf-to-llvm.
  target.addDynamicallyLegalOp<cf::AssertOp>(
      [](cf::AssertOp op) { return !op->getParentOfType<gpu::GPUModuleOp>(); });
  scf::populateSCFStructuralTypeConversionsAndLegality(converter, patterns,
                                                       target);
  return applyPartialConversion(module, target, std::move(patterns));
}
