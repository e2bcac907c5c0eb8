//===- TensorCoreToNVVM.cpp - MMAs and copies to NVVM ---------------------===//
//
// wgmma (sm_90a) and mma.sync (sm_80) on fragments, fragment loads, the
// cp.async groups of sm_80, register pins and splats.
// One pattern per op; WarpgroupToNVVM.cpp says how values change form.
//
//===----------------------------------------------------------------------===//

#include "WarpgroupLowering.h"

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::warpgroup;

namespace {

//===----------------------------------------------------------------------===//
// Tensor cores (sm_90a: wgmma)
//===----------------------------------------------------------------------===//

/// wgmma.mma_async per 16-element k-step between a fence and a commit.
/// A from shared memory (S = Q K^T) uses the NVVM op; A from registers
/// (O += P V) has no NVVM op: one inline-asm instruction per k-step with
/// the accumulators tied in and out.
struct MmaLowering : OpConversionPattern<fagpu::MmaOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::MmaOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (!op.getResult())
      return rewriter.notifyMatchFailure(op, "tcgen05: Tcgen05MmaLowering");
    fagpu::SharedTileType bType = op.getB().getType();
    fagpu::FragmentType result = op.getResult().getType();
    OpEmitter e(rewriter, op.getLoc(), bType.getElementType(), SoftmaxConfig(),
                bType.getCols(), bType.getRows());
    ValueRange bTile = adaptor.getB();
    SmallVector<Value> acc;
    if (bType.isRowMajor()) {
      acc = mmaSync(e, op, adaptor);
      if (acc.empty())
        return rewriter.notifyMatchFailure(
            op, "mma.sync: A from shared memory only with K-major B");
    } else if (result.getShape()[0] != 64) {
      return rewriter.notifyMatchFailure(op, "wgmma is 64 rows");
    } else if (isa<fagpu::SharedTileType>(op.getA().getType())) {
      if (op.getAcc() || op.getMnMajor())
        return rewriter.notifyMatchFailure(
            op, "shared-memory A: only S = A B^T into a fresh accumulator");
      acc = sharedSharedMma(e, op, adaptor.getA(), bTile);
    } else {
      if (!op.getAcc())
        return rewriter.notifyMatchFailure(
            op, "register A: only O += P V into an accumulator");
      acc = registerSharedMma(e, op, adaptor.getA(), bTile, adaptor.getAcc());
    }
    if (int64_t(acc.size()) != result.getRegisters())
      return failure();
    rewriter.replaceOpWithMultiple(op, {acc});
    return success();
  }

  /// sm_80: mma.sync.m16n8k16 on row-major tiles. Each ldmatrix.x4 of B
  /// gives the B fragments of two n8 tiles and feeds every row tile of the
  /// warp. S = A B^T (B = K, n x k): for k-step kk and n8 tiles n, n + 1,
  /// the x4's matrices are (n, chunk 2kk), (n, 2kk + 1), (n + 1, 2kk),
  /// (n + 1, 2kk + 1). O += P V (B = V, k x n, read transposed): k rows
  /// 16 kk .. + 7 and + 8 .. + 15 of n8 tiles d, d + 1.
  static SmallVector<Value> mmaSync(OpEmitter &e, fagpu::MmaOp op,
                                    OneToNOpAdaptor adaptor) {
    fagpu::SharedTileType bType = op.getB().getType();
    fagpu::FragmentType result = op.getResult().getType();
    bool bf16 = bType.getElementType().isBF16();
    int64_t rowTiles = result.getRowTiles();
    int64_t n = result.getShape()[1];
    int64_t perTile = n / 2; // accumulator registers of a row tile
    int64_t bRowBytes = bType.getCols() * 2;
    auto aTile = dyn_cast<fagpu::SharedTileType>(op.getA().getType());
    if (aTile && op.getMnMajor())
      return {};
    OpEmitter::LdmatrixLanes bLanes = e.ldmatrixLanes(bRowBytes, rowTiles);
    ValueRange bValues = adaptor.getB();
    e.smem = bValues[0];

    // acc[r][t]: the four registers of n8 tile t of row tile r.
    SmallVector<SmallVector<std::array<Value, 4>>> acc(
        rowTiles, SmallVector<std::array<Value, 4>>(n / 8));
    for (int64_t r = 0; r < rowTiles; ++r)
      for (int64_t t = 0; t < n / 8; ++t)
        for (int64_t i = 0; i < 4; ++i)
          acc[r][t][i] = op.getAcc() ? adaptor.getAcc()[r * perTile + 4 * t + i]
                                     : e.cf(0.0);
    ValueRange aRegs = aTile ? ValueRange() : adaptor.getA();

    if (!op.getMnMajor()) {
      int64_t k = bType.getCols();
      Value bRowBase = e.add(bValues[1], bLanes.rowsHi);
      Value aRowBase;
      int64_t aRowBytes = 0;
      OpEmitter::LdmatrixLanes aLanes;
      if (aTile) {
        aRowBytes = aTile.getCols() * 2;
        aLanes = e.ldmatrixLanes(aRowBytes, rowTiles);
        aRowBase = e.add(adaptor.getA()[1], aLanes.warpRows);
      }
      for (int64_t kk = 0; kk < k / 16; ++kk) {
        SmallVector<SmallVector<Value>> a(rowTiles);
        for (int64_t r = 0; r < rowTiles; ++r) {
          if (!aTile) {
            int64_t first = r * (k / 16) * 4 + 4 * kk;
            a[r].assign(aRegs.begin() + first, aRegs.begin() + first + 4);
            continue;
          }
          e.smem = adaptor.getA()[0];
          Value offset =
              e.add(e.add(aRowBase, e.chunkOffset(aLanes.chunkHi, 2 * kk)),
                    e.c32(16 * r * aRowBytes));
          std::array<Value, 4> f = e.ldmatrix4(e.sharedAt(offset), false);
          a[r].assign(f.begin(), f.end());
        }
        e.smem = bValues[0];
        for (int64_t t = 0; t < n / 8; t += 2) {
          Value offset =
              e.add(e.add(bRowBase, e.chunkOffset(bLanes.chunkLo, 2 * kk)),
                    e.c32(t * 8 * bRowBytes));
          std::array<Value, 4> f = e.ldmatrix4(e.sharedAt(offset), false);
          for (int64_t r = 0; r < rowTiles; ++r) {
            acc[r][t] = e.mmaSync(a[r], {f[0], f[1]}, acc[r][t], bf16);
            acc[r][t + 1] = e.mmaSync(a[r], {f[2], f[3]}, acc[r][t + 1], bf16);
          }
        }
      }
    } else {
      int64_t k = bType.getRows();
      Value bRowBase = e.add(bValues[1], bLanes.rowsLo);
      for (int64_t kk = 0; kk < k / 16; ++kk)
        for (int64_t d = 0; d < n / 8; d += 2) {
          Value offset =
              e.add(e.add(bRowBase, e.chunkOffset(bLanes.chunkHi, d)),
                    e.c32(16 * kk * bRowBytes));
          std::array<Value, 4> f = e.ldmatrix4(e.sharedAt(offset), true);
          for (int64_t r = 0; r < rowTiles; ++r) {
            int64_t first = r * (k / 16) * 4 + 4 * kk;
            SmallVector<Value> a(aRegs.begin() + first,
                                 aRegs.begin() + first + 4);
            acc[r][d] = e.mmaSync(a, {f[0], f[1]}, acc[r][d], bf16);
            acc[r][d + 1] = e.mmaSync(a, {f[2], f[3]}, acc[r][d + 1], bf16);
          }
        }
    }
    SmallVector<Value> out;
    for (int64_t r = 0; r < rowTiles; ++r)
      for (int64_t t = 0; t < n / 8; ++t)
        out.append(acc[r][t].begin(), acc[r][t].end());
    return out;
  }

  static SmallVector<Value> sharedSharedMma(OpEmitter &e, fagpu::MmaOp op,
                                            ValueRange aTile,
                                            ValueRange bTile) {
    OpBuilder &b = e.builder();
    Location loc = op.getLoc();
    MLIRContext *ctx = b.getContext();
    auto aType = cast<fagpu::SharedTileType>(op.getA().getType());
    fagpu::SharedTileType bType = op.getB().getType();
    int64_t n = bType.getRows(), k = aType.getCols();
    SmallVector<Type> fields(n / 2, e.f32);
    auto accType = LLVM::LLVMStructType::getLiteral(ctx, fields);
    Value acc = LLVM::PoisonOp::create(b, loc, accType);
    NVVM::WGMMATypes type = wgmmaType(aType.getElementType());
    // A k-step is 32 bytes of each row: 16 16-bit or 32 e4m3 elements.
    int64_t kStep = kStepOf(aType.getElementType());
    NVVM::WgmmaFenceAlignedOp::create(b, loc);
    for (int64_t kk = 0; kk < k / kStep; ++kk) {
      // The first k-step ignores the accumulator's input (scale-d = 0).
      acc = NVVM::WgmmaMmaAsyncOp::create(
          b, loc, accType, acc, e.wgmmaKMajorDescriptor(aTile[1], aType, kk),
          e.wgmmaKMajorDescriptor(bTile[1], bType, kk),
          NVVM::MMAShapeAttr::get(ctx, 64, n, kStep),
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

  static NVVM::WGMMATypes wgmmaType(Type element) {
    if (isa<Float8E4M3FNType>(element))
      return NVVM::WGMMATypes::e4m3;
    return element.isBF16() ? NVVM::WGMMATypes::bf16 : NVVM::WGMMATypes::f16;
  }
  static int64_t kStepOf(Type element) {
    return 256 / element.getIntOrFloatBitWidth();
  }

  /// O += P V with P in registers: V MN-major (16-bit, `mn_major`, the
  /// transpose bit set), or K-major V^T (N x K: e4m3, whose wgmma has no
  /// transpose) read with the K-major descriptors of S = Q K^T.
  static SmallVector<Value> registerSharedMma(OpEmitter &e, fagpu::MmaOp op,
                                              ValueRange p, ValueRange vTile,
                                              ValueRange o) {
    OpBuilder &b = e.builder();
    Location loc = op.getLoc();
    MLIRContext *ctx = b.getContext();
    fagpu::SharedTileType vType = op.getB().getType();
    Type element = vType.getElementType();
    bool mnMajor = op.getMnMajor();
    int64_t n = mnMajor ? vType.getCols() : vType.getRows(), regs = n / 2;
    int64_t k = mnMajor ? vType.getRows() : vType.getCols();
    int64_t kStep = kStepOf(element);
    std::string elt = stringifyWGMMATypes(wgmmaType(element)).str();
    std::string text = "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                       "wgmma.mma_async.sync.aligned.m64n" +
                       std::to_string(n) + "k" + std::to_string(kStep) +
                       ".f32." + elt + "." + elt + " {";
    for (int64_t i = 0; i < regs; ++i)
      text += (i ? ", $" : "$") + std::to_string(i);
    text += "}, {";
    for (int64_t i = 0; i < 4; ++i)
      text += (i ? ", $" : "$") + std::to_string(regs + i);
    // scale-d, imm-scale-a, imm-scale-b, and for 16-bit types imm-trans-b
    // (1: V is MN-major).
    text += "}, $" + std::to_string(regs + 4) + ", p, 1, 1";
    if (kStep == 16)
      text += mnMajor ? ", 1" : ", 0";
    text += ";\n}";
    std::string constraints;
    for (int64_t i = 0; i < regs; ++i)
      constraints += "=f,";
    constraints += "r,r,r,r,l";
    for (int64_t i = 0; i < regs; ++i)
      constraints += "," + std::to_string(i);
    SmallVector<Type> fields(regs, e.f32);
    auto accType = LLVM::LLVMStructType::getLiteral(ctx, fields);

    SmallVector<Value> acc(o.begin(), o.end());
    NVVM::WgmmaFenceAlignedOp::create(b, loc);
    for (int64_t kk = 0; kk < k / kStep; ++kk) {
      SmallVector<Value> operands(p.begin() + 4 * kk, p.begin() + 4 * kk + 4);
      operands.push_back(mnMajor
                             ? e.valueDescriptor(vTile[1], kk, kWgmmaSwizzle128)
                             : e.wgmmaKMajorDescriptor(vTile[1], vType, kk));
      operands.append(acc.begin(), acc.end());
      auto asmOp = LLVM::InlineAsmOp::create(
          b, loc, accType, operands, text, constraints,
          /*has_side_effects=*/true, /*is_align_stack=*/false,
          LLVM::tailcallkind::TailCallKind::None, LLVM::AsmDialectAttr(),
          ArrayAttr());
      for (int64_t i = 0; i < regs; ++i)
        acc[i] = LLVM::ExtractValueOp::create(b, loc, asmOp.getResult(0),
                                              ArrayRef<int64_t>{i});
    }
    NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
    return acc;
  }
};

struct MmaWaitLowering : OpConversionPattern<fagpu::MmaWaitOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::MmaWaitOp op, OneToNOpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    NVVM::WgmmaWaitGroupSyncOp::create(rewriter, op.getLoc(), op.getPending());
    rewriter.eraseOp(op);
    return success();
  }
};

/// ldmatrix.x4 per row tile and k-step: matrices rows 0-7 / 8-15 of the
/// row tile at chunks 2 kk / 2 kk + 1, exactly a0 .. a3.
struct LoadFragmentLowering : OpConversionPattern<fagpu::LoadFragmentOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::LoadFragmentOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    fagpu::SharedTileType tile = op.getTile().getType();
    fagpu::FragmentType result = op.getResult().getType();
    OpEmitter e(rewriter, op.getLoc(), tile.getElementType());
    int64_t rowBytes = tile.getCols() * 2;
    OpEmitter::LdmatrixLanes lanes =
        e.ldmatrixLanes(rowBytes, result.getRowTiles());
    ValueRange values = adaptor.getTile();
    e.smem = values[0];
    Value rowBase = e.add(values[1], lanes.warpRows);
    SmallVector<Value> regs;
    for (int64_t r = 0; r < result.getRowTiles(); ++r)
      for (int64_t kk = 0; kk < tile.getCols() / 16; ++kk) {
        Value offset =
            e.add(e.add(rowBase, e.chunkOffset(lanes.chunkHi, 2 * kk)),
                  e.c32(16 * r * rowBytes));
        std::array<Value, 4> f = e.ldmatrix4(e.sharedAt(offset), false);
        regs.append(f.begin(), f.end());
      }
    rewriter.replaceOpWithMultiple(op, {regs});
    return success();
  }
};

//===----------------------------------------------------------------------===//
// cp.async copies (sm_80)
//===----------------------------------------------------------------------===//

/// Thread t copies chunks t, t + threads, ...: chunk c of row r of the
/// tile lands at physical chunk c ^ (r & 7) of its row.
struct CopyAsyncLowering : OpConversionPattern<fagpu::CopyAsyncOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::CopyAsyncOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    fagpu::SharedTileType tile = op.getTile().getType();
    OpEmitter e(rewriter, loc, tile.getElementType());
    int64_t threads = op.getThreads();
    int64_t chunksPerRow = tile.getCols() / 8, rowBytes = tile.getCols() * 2;
    int64_t chunks = tile.getRows() * chunksPerRow;
    Value tid = e.threadId();
    Value src = adaptor.getSrc().front(), rowStart = adaptor.getRow().front(),
          bound = adaptor.getBound().front();
    ValueRange dstTile = adaptor.getTile();
    e.smem = dstTile[0];
    for (int64_t it = 0; it < chunks / threads; ++it) {
      Value idx = e.add(tid, e.c32(it * threads));
      Value row = e.divu(idx, e.c32(chunksPerRow));
      Value chunk = e.remu(idx, e.c32(chunksPerRow));
      Value globalRow = e.add(rowStart, row);
      Value inBounds = e.ult(globalRow, bound);
      Value srcRow = e.select(inBounds, globalRow, e.c32(0));
      Value elem = e.add(e.mul(e.ext64(srcRow), e.c64(tile.getCols())),
                         e.ext64(e.mul(chunk, e.c32(8))));
      Value from = e.gep(e.globalPtr, e.half, src, elem);
      Value phys = arith::XOrIOp::create(
          rewriter, loc, chunk,
          arith::AndIOp::create(rewriter, loc, row, e.c32(7)));
      Value swizzled =
          e.add(e.mul(row, e.c32(rowBytes)), e.mul(phys, e.c32(16)));
      Value to = e.sharedAt(e.add(dstTile[1], swizzled));
      Value size = e.select(inBounds, e.c32(16), e.c32(0));
      NVVM::CpAsyncOp::create(
          rewriter, loc, to, from, rewriter.getI32IntegerAttr(16),
          NVVM::LoadCacheModifierKindAttr::get(rewriter.getContext(),
                                               NVVM::LoadCacheModifierKind::CG),
          size);
    }
    rewriter.eraseOp(op);
    return success();
  }
};

struct CopyCommitLowering : OpConversionPattern<fagpu::CopyCommitOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::CopyCommitOp op, OneToNOpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    NVVM::CpAsyncCommitGroupOp::create(rewriter, op.getLoc());
    rewriter.eraseOp(op);
    return success();
  }
};

struct CopyWaitLowering : OpConversionPattern<fagpu::CopyWaitOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::CopyWaitOp op, OneToNOpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    NVVM::CpAsyncWaitGroupOp::create(
        rewriter, op.getLoc(), rewriter.getI32IntegerAttr(op.getPending()));
    NVVM::Barrier0Op::create(rewriter, op.getLoc());
    rewriter.eraseOp(op);
    return success();
  }
};

/// An empty asm that "modifies" each register: no use is scheduled above
/// it, no write below.
struct PinLowering : OpConversionPattern<fagpu::PinOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::PinOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    SmallVector<Value> out;
    for (Value v : adaptor.getInput()) {
      StringRef constraint = v.getType().isF32() ? "=f,0" : "=r,0";
      out.push_back(LLVM::InlineAsmOp::create(
                        rewriter, op.getLoc(), v.getType(), ValueRange{v}, "",
                        constraint, /*has_side_effects=*/true,
                        /*is_align_stack=*/false,
                        LLVM::tailcallkind::TailCallKind::None,
                        LLVM::AsmDialectAttr(), ArrayAttr())
                        .getResult(0));
    }
    rewriter.replaceOpWithMultiple(op, {out});
    return success();
  }
};

struct SplatLowering : OpConversionPattern<fagpu::SplatOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::SplatOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    SmallVector<Value> regs(op.getType().getRegisters(),
                            adaptor.getValue().front());
    rewriter.replaceOpWithMultiple(op, {regs});
    return success();
  }
};

} // namespace

void mlir::fa::warpgroup::populateTensorCorePatterns(
    const TypeConverter &converter, RewritePatternSet &patterns) {
  patterns.add<MmaLowering, LoadFragmentLowering, CopyAsyncLowering,
               CopyCommitLowering, CopyWaitLowering, MmaWaitLowering,
               PinLowering, SplatLowering>(converter, patterns.getContext());
}
