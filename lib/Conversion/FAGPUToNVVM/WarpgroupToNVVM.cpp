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
//===----------------------------------------------------------------------===//

#include "WarpgroupToNVVM.h"

#include "../Common/TMAKernel.h"

#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/SCF/Transforms/Patterns.h"
#include "mlir/Transforms/DialectConversion.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/xxhash.h"

using namespace mlir;
using namespace mlir::fa;

namespace {

/// A wgmma matrix descriptor's layout bits (62-63) for a tile of `swizzle`
/// bytes: 1 for the 128-byte swizzle, 2 for 64, 3 for 32.
static constexpr int64_t wgmmaSwizzleBits(int64_t swizzle) {
  int64_t mode = swizzle == 128 ? 1 : swizzle == 64 ? 2 : 3;
  return mode << 62;
}
constexpr int64_t kWgmmaSwizzle128 = wgmmaSwizzleBits(128);

/// The emitter helpers, for one pattern's op: the element type, mask and
/// FA4 config, and tile sizes are the op's.
class OpEmitter : public TMAKernelEmitter {
public:
  OpEmitter(OpBuilder &b, Location loc, Type element,
            const SoftmaxConfig &config = SoftmaxConfig(), int64_t headDim = 0,
            int64_t blockC = 0)
      : TMAKernelEmitter(b, loc, element.isBF16(), config, headDim,
                         /*blockR=*/0, blockC) {
    if (isa<Float8E4M3FNType>(element))
      elementBytes = 1;
  }

  OpBuilder &builder() { return b; }

  using TMAKernelEmitter::add;
  using TMAKernelEmitter::alignedSharedBase;
  using TMAKernelEmitter::applyMask;
  using TMAKernelEmitter::applySoftcap;
  using TMAKernelEmitter::c32;
  using TMAKernelEmitter::c64;
  using TMAKernelEmitter::cf;
  using TMAKernelEmitter::divu;
  using TMAKernelEmitter::eq;
  using TMAKernelEmitter::ult;
  using TMAKernelEmitter::expectBytes;
  using TMAKernelEmitter::ex2;
  using TMAKernelEmitter::ext64;
  using TMAKernelEmitter::lg2;
  using TMAKernelEmitter::f32;
  using TMAKernelEmitter::fmul;
  using TMAKernelEmitter::gep;
  using TMAKernelEmitter::globalPtr;
  using TMAKernelEmitter::half;
  using TMAKernelEmitter::halfPair;
  using TMAKernelEmitter::i32;
  using TMAKernelEmitter::kMajorDescriptor;
  /// wgmma's descriptor of the K-major tile `type` at `tileOffset`, k-step
  /// `kk`, in the tile's swizzle.
  Value wgmmaKMajorDescriptor(Value tileOffset, fagpu::SharedTileType type,
                              int64_t kk) {
    return kMajorDescriptor(tileOffset, type.getBlockRows(), kk,
                            wgmmaSwizzleBits(type.getSwizzle()),
                            type.getSwizzle());
  }
  using TMAKernelEmitter::loadTile;
  using TMAKernelEmitter::mul;
  using TMAKernelEmitter::oMap;
  using TMAKernelEmitter::onlineSoftmax;
  using TMAKernelEmitter::outputScale;
  using TMAKernelEmitter::packPair;
  using TMAKernelEmitter::packProbabilities;
  using TMAKernelEmitter::packProbabilitiesE4M3;
  using TMAKernelEmitter::remu;
  using TMAKernelEmitter::rowTotal;
  using TMAKernelEmitter::RowTotal;
  using TMAKernelEmitter::select;
  using TMAKernelEmitter::sharedAt;
  using TMAKernelEmitter::sharedPtr;
  using TMAKernelEmitter::smem;
  using TMAKernelEmitter::SoftmaxStep;
  using TMAKernelEmitter::storeLse;
  using TMAKernelEmitter::storeRowBlock;
  using TMAKernelEmitter::storeRows;
  using TMAKernelEmitter::sub;
  using TMAKernelEmitter::valueDescriptor;
  using TMAKernelEmitter::waitBarrier;
  using TMAKernelEmitter::warpUniform;
  using TMAKernelEmitter::exp2Score;
  using TMAKernelEmitter::fadd;
  using TMAKernelEmitter::fma;
  using TMAKernelEmitter::fmax;
  using TMAKernelEmitter::keyVisible;
  using TMAKernelEmitter::moveBase;
  using TMAKernelEmitter::RowUpdate;
  using TMAKernelEmitter::slt;
  using TMAKernelEmitter::visibleLimit;

  /// The thread's place in its warpgroup, computed at the start of the
  /// kernel: values every thread keeps, like the kernel's own reads of
  /// %tid.x there (LLVM merges the copies).
  struct ThreadPosition {
    Value lane, warpInGroup, quadLane;
  };
  ThreadPosition position() {
    OpBuilder::InsertionGuard guard(b);
    if (LLVM::LLVMFuncOp kernel = kernelOf())
      b.setInsertionPointToStart(&kernel.getBody().front());
    Value tid = NVVM::ThreadIdXOp::create(b, loc, i32);
    Value lane = remu(tid, c32(32));
    return {lane, divu(remu(tid, c32(128)), c32(32)), remu(lane, c32(4))};
  }
  /// The thread's id, read at the start of the kernel.
  Value threadId() {
    OpBuilder::InsertionGuard guard(b);
    setInsertionPointToThreadSetup(kernelOf());
    return setupThreadId();
  }
  LLVM::LLVMFuncOp kernelOf() {
    Operation *parent = b.getInsertionBlock()->getParentOp();
    return isa<LLVM::LLVMFuncOp>(parent)
               ? cast<LLVM::LLVMFuncOp>(parent)
               : parent->getParentOfType<LLVM::LLVMFuncOp>();
  }
  /// Per-thread values go after the leading ops of the kernel's entry
  /// block that depend on the thread and block ids alone (the kernel's own
  /// id reads and what it derives from them, and what earlier patterns
  /// put there): LLVM keeps the first of equal values, so they keep the
  /// order in which the kernel and then the patterns first ask for them.
  void setInsertionPointToThreadSetup(LLVM::LLVMFuncOp kernel) {
    Block &entry = kernel.getBody().front();
    llvm::SmallPtrSet<Operation *, 32> setup;
    Block::iterator it = entry.begin();
    for (; it != entry.end(); ++it) {
      Operation *op = &*it;
      bool fromIds =
          isa<NVVM::ThreadIdXOp, NVVM::BlockIdXOp, NVVM::BlockIdYOp,
              NVVM::BlockIdZOp, arith::ConstantOp>(op) ||
          (isa<arith::ArithDialect>(op->getDialect()) &&
           llvm::all_of(op->getOperands(), [&](Value v) {
             return v.getDefiningOp() && setup.contains(v.getDefiningOp());
           }));
      if (!fromIds)
        break;
      setup.insert(op);
    }
    b.setInsertionPoint(&entry, it);
  }
  /// In the thread setup (the builder there), each per-thread value is
  /// computed once: an equal op already before the insertion point is
  /// reused instead of created again.
  template <typename Predicate> Operation *findInSetup(Predicate same) {
    Block *block = b.getInsertionBlock();
    for (Operation &op :
         llvm::make_range(block->begin(), b.getInsertionPoint()))
      if (same(op))
        return &op;
    return nullptr;
  }
  Value setupThreadId() {
    if (Operation *op = findInSetup(
            [](Operation &op) { return isa<NVVM::ThreadIdXOp>(op); }))
      return op->getResult(0);
    return NVVM::ThreadIdXOp::create(b, loc, i32);
  }
  Value setupConstant(int64_t v) {
    Attribute value = b.getI32IntegerAttr(v);
    if (Operation *op = findInSetup([&](Operation &op) {
          auto c = dyn_cast<arith::ConstantOp>(op);
          return c && c.getValue() == value;
        }))
      return op->getResult(0);
    return c32(v);
  }
  template <typename OpTy> Value setupOp(Value x, Value y) {
    if (Operation *op = findInSetup([&](Operation &op) {
          return isa<OpTy>(op) && op.getOperand(0) == x &&
                 op.getOperand(1) == y;
        }))
      return op->getResult(0);
    return OpTy::create(b, loc, x, y);
  }

  /// The per-lane parts of the sm_80 ldmatrix.x4 addresses in row-major
  /// tiles of `rowBytes`-byte rows, computed once at the start of the
  /// kernel. Lane L gives the address of row L % 8 of matrix L / 8; of
  /// the matrix index, bit 0 (lo) and bit 1 (hi) pick a row half or a
  /// chunk, by operand. In a row-major tile the physical chunk of logical
  /// chunk C + c (C even and known at compile time, c in {0, 1} per lane)
  /// is (C & ~7) + (((C & 7) + c) ^ (row & 7)), and row & 7 = L & 7 for
  /// every row read, so 4 per-lane chunk offsets exist per choice of bit;
  /// the rest of each address is a constant the backend folds into the
  /// load.
  struct LdmatrixLanes {
    SmallVector<Value> chunkLo; // c = lo, for C & 7 = 0, 2, 4, 6
    SmallVector<Value> chunkHi; // c = hi
    Value rowsHi;   // (hi * 8 + L % 8) rows: B of S = A B^T (n8 tile = hi)
    Value rowsLo;   // (lo * 8 + L % 8) rows: A, and B of P V (k half = lo)
    Value warpRows; // the warp's first row of a `rowTiles` fragment
  };
  LdmatrixLanes ldmatrixLanes(int64_t rowBytes, int64_t rowTiles) {
    OpBuilder::InsertionGuard guard(b);
    setInsertionPointToThreadSetup(kernelOf());
    auto k = [&](int64_t v) { return setupConstant(v); };
    auto addS = [&](Value x, Value y) { return setupOp<arith::AddIOp>(x, y); };
    auto mulS = [&](Value x, Value y) { return setupOp<arith::MulIOp>(x, y); };
    auto divS = [&](Value x, Value y) { return setupOp<arith::DivUIOp>(x, y); };
    auto remS = [&](Value x, Value y) { return setupOp<arith::RemUIOp>(x, y); };
    auto xorS = [&](Value x, Value y) { return setupOp<arith::XOrIOp>(x, y); };
    Value tid = setupThreadId();
    Value warp = divS(tid, k(32));
    Value lane = remS(tid, k(32));
    Value mi = divS(lane, k(8));
    Value miLo = remS(mi, k(2)), miHi = divS(mi, k(2));
    Value row7 = remS(lane, k(8));
    LdmatrixLanes lanes;
    for (int64_t j = 0; j < 8; j += 2) {
      lanes.chunkLo.push_back(mulS(xorS(addS(k(j), miLo), row7), k(16)));
      lanes.chunkHi.push_back(mulS(xorS(addS(k(j), miHi), row7), k(16)));
    }
    lanes.rowsHi = mulS(addS(mulS(miHi, k(8)), row7), k(rowBytes));
    lanes.rowsLo = mulS(addS(mulS(miLo, k(8)), row7), k(rowBytes));
    lanes.warpRows =
        addS(lanes.rowsLo, mulS(warp, k(16 * rowTiles * rowBytes)));
    return lanes;
  }
  /// Byte offset of logical chunk `chunk` (even) plus the lane's part.
  Value chunkOffset(ArrayRef<Value> table, int64_t chunk) {
    return add(table[(chunk & 7) / 2], c32((chunk & ~int64_t(7)) * 16));
  }
  /// ldmatrix.x4 (optionally .trans) of four 8 x 8 b16 matrices.
  std::array<Value, 4> ldmatrix4(Value address, bool transpose) {
    MLIRContext *ctx = b.getContext();
    auto resultType =
        LLVM::LLVMStructType::getLiteral(ctx, {i32, i32, i32, i32});
    auto op = NVVM::LdMatrixOp::create(
        b, loc, resultType, address, b.getI32IntegerAttr(4),
        NVVM::MMALayoutAttr::get(ctx, transpose ? NVVM::MMALayout::col
                                                : NVVM::MMALayout::row),
        NVVM::LdStMatrixShapeAttr::get(ctx, 8, 8),
        NVVM::LdStMatrixEltTypeAttr::get(ctx, NVVM::LdStMatrixEltType::B16));
    std::array<Value, 4> r;
    for (int64_t i = 0; i < 4; ++i)
      r[i] = LLVM::ExtractValueOp::create(b, loc, op, ArrayRef<int64_t>{i});
    return r;
  }
  /// mma.sync.m16n8k16 D = A B + C, f32 accumulators.
  std::array<Value, 4> mmaSync(ArrayRef<Value> a, ArrayRef<Value> bFrag,
                               ArrayRef<Value> c, bool bf16) {
    MLIRContext *ctx = b.getContext();
    auto resultType =
        LLVM::LLVMStructType::getLiteral(ctx, {f32, f32, f32, f32});
    // f16 operands are typed as pairs of halves; bf16 ones as packed i32.
    auto operand = [&](Value v) -> Value {
      return bf16 ? v : LLVM::BitcastOp::create(b, loc, halfPair, v);
    };
    SmallVector<Value> aOps, bOps;
    for (Value v : a)
      aOps.push_back(operand(v));
    for (Value v : bFrag)
      bOps.push_back(operand(v));
    NVVM::MMATypes type = bf16 ? NVVM::MMATypes::bf16 : NVVM::MMATypes::f16;
    auto op = NVVM::MmaOp::create(
        b, loc, resultType, aOps, bOps, c, ArrayRef<int64_t>{16, 8, 16},
        std::nullopt, std::nullopt, std::array<NVVM::MMATypes, 2>{type, type},
        std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                       NVVM::MMALayout::col});
    std::array<Value, 4> r;
    for (int64_t i = 0; i < 4; ++i)
      r[i] = LLVM::ExtractValueOp::create(b, loc, op, ArrayRef<int64_t>{i});
    return r;
  }

  /// The thread's warp, computed once at the start of the kernel.
  Value warpIndex() {
    OpBuilder::InsertionGuard guard(b);
    setInsertionPointToThreadSetup(kernelOf());
    return setupOp<arith::DivUIOp>(setupThreadId(), setupConstant(32));
  }

  /// A TMEM address (lane << 16 | column) as the !llvm.ptr<6> the tcgen05
  /// ops take.
  Value tmemAt(Value base, Value column) {
    return LLVM::IntToPtrOp::create(
        b, loc, LLVM::LLVMPointerType::get(b.getContext(), 6),
        add(base, column));
  }
  /// Warp w of the softmax warpgroup may only touch TMEM lanes 32 w ..
  /// 32 w + 31: the lane field of its addresses.
  Value warpLanes(Value base) {
    return add(base, arith::ShLIOp::create(b, loc, mul(warpIndex(), c32(32)),
                                           c32(16)));
  }
  /// `count` consecutive 32-bit columns of this thread's lane from
  /// `column` of the region at `base`, as f32: tcgen05.ld 32x32b.x32 per 32
  /// columns, then tcgen05.wait::ld.
  SmallVector<Value> loadColumns(Value base, Value column, int64_t count) {
    auto chunkType = VectorType::get({kTmemChunk}, i32);
    auto shape = NVVM::Tcgen05LdStShapeAttr::get(
        b.getContext(), NVVM::Tcgen05LdStShape::SHAPE_32X32B);
    Value laneBase = warpLanes(base);
    SmallVector<Value> chunks;
    for (int64_t c = 0; c < count; c += kTmemChunk)
      chunks.push_back(NVVM::Tcgen05LdOp::create(
          b, loc, chunkType, UnitAttr(), shape,
          tmemAt(laneBase, add(column, c32(c))), Value()));
    NVVM::Tcgen05WaitOp::create(b, loc, NVVM::Tcgen05WaitKind::LOAD);
    SmallVector<Value> out;
    for (Value chunk : chunks)
      for (int64_t i = 0; i < kTmemChunk; ++i)
        out.push_back(arith::BitcastOp::create(
            b, loc, f32,
            LLVM::ExtractElementOp::create(b, loc, chunk, c32(i))));
    return out;
  }
  /// Stores 32-bit values to consecutive columns of this thread's lane
  /// (tcgen05.st 32x32b.x32), then waits for them unless `wait` is false.
  void storeColumns(Value base, Value column, ArrayRef<Value> values,
                    bool wait = true) {
    auto chunkType = VectorType::get({kTmemChunk}, i32);
    auto shape = NVVM::Tcgen05LdStShapeAttr::get(
        b.getContext(), NVVM::Tcgen05LdStShape::SHAPE_32X32B);
    Value laneBase = warpLanes(base);
    for (size_t c = 0; c < values.size(); c += kTmemChunk) {
      Value chunk = LLVM::PoisonOp::create(b, loc, chunkType);
      for (int64_t i = 0; i < kTmemChunk; ++i) {
        Value v = values[c + i];
        if (v.getType() != i32)
          v = arith::BitcastOp::create(b, loc, i32, v);
        chunk = LLVM::InsertElementOp::create(b, loc, chunk, v, c32(i));
      }
      NVVM::Tcgen05StOp::create(b, loc, UnitAttr(), shape,
                                tmemAt(laneBase, add(column, c32(c))), chunk,
                                Value());
    }
    if (wait)
      NVVM::Tcgen05WaitOp::create(b, loc, NVVM::Tcgen05WaitKind::STORE);
  }
  /// Orders the thread's tcgen05 ops around a thread synchronisation.
  void tcgen05FenceAfter() {
    NVVM::Tcgen05FenceOp::create(b, loc,
                                 NVVM::Tcgen05FenceKind::AFTER_THREAD_SYNC);
  }
  void tcgen05FenceBefore() {
    NVVM::Tcgen05FenceOp::create(b, loc,
                                 NVVM::Tcgen05FenceKind::BEFORE_THREAD_SYNC);
  }
  /// Columns of one tcgen05.ld/st (the x32 repetition of 32x32b).
  static constexpr int64_t kTmemChunk = 32;

  /// Lane 0 of each warp runs `body`.
  void onLaneZero(llvm::function_ref<void()> body) {
    auto ifLead = scf::IfOp::create(b, loc, eq(position().lane, c32(0)),
                                    /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifLead.thenBlock());
    body();
  }
  /// The first thread of the warpgroup runs `body`.
  void onFirstThread(ThreadPosition pos, llvm::function_ref<void()> body) {
    auto ifFirst = scf::IfOp::create(
        b, loc,
        arith::AndIOp::create(b, loc, eq(pos.warpInGroup, c32(0)),
                              eq(pos.lane, c32(0))),
        /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifFirst.thenBlock());
    body();
  }
};

/// A pipeline as its lowered values.
struct PipelineValues {
  fagpu::PipelineType type;
  Value base, barrierOffset, tileOffset;

  PipelineValues(Value pipeline, ValueRange lowered)
      : type(cast<fagpu::PipelineType>(pipeline.getType())),
        base(lowered[0]), barrierOffset(lowered[1]), tileOffset(lowered[2]) {}

  /// Barrier number `index` of the pipeline.
  Value barrier(OpEmitter &e, Value index) const {
    e.smem = base;
    return e.sharedAt(e.add(barrierOffset, e.mul(index, e.c32(8))));
  }
  Value full(OpEmitter &e, Value stage, int64_t buffer) const {
    return barrier(e, e.add(e.c32(buffer * type.getStages()), stage));
  }
  Value empty(OpEmitter &e, Value stage, int64_t buffer) const {
    int64_t first = (type.getBuffers() + buffer) * type.getStages();
    return barrier(e, e.add(e.c32(first), stage));
  }
  /// Byte offset of buffer `buffer` of `stage` (both buffers' tiles have
  /// the same bytes).
  Value tile(OpEmitter &e, Value stage, int64_t buffer) const {
    int64_t bytes = type.getTile().getBytes();
    Value offset =
        e.add(tileOffset, e.mul(stage, e.c32(type.getBuffers() * bytes)));
    return buffer ? e.add(offset, e.c32(buffer * bytes)) : offset;
  }
};

Type elementOf(fagpu::PipelineType type) {
  return type.getTile().getElementType();
}

//===----------------------------------------------------------------------===//
// Warp roles
//===----------------------------------------------------------------------===//

/// scf.if on the warpgroup: the producer gives registers back, the
/// consumers (warpgroup - 1) take them.
struct WarpSpecializeLowering
    : OpConversionPattern<fagpu::WarpSpecializeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::WarpSpecializeOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpEmitter e(rewriter, loc, rewriter.getF16Type());
    Value group = adaptor.getWarpgroup().front();
    auto roles =
        scf::IfOp::create(rewriter, loc, e.eq(group, e.c32(0)), true);
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
    NVVM::BarrierOp::create(rewriter, op.getLoc(), Type(),
                            adaptor.getBarrier().front(),
                            e.c32(op.getThreads()),
                            NVVM::BarrierReductionAttr(), Value());
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
// Pipelines and shared-memory tiles
//===----------------------------------------------------------------------===//

/// The kernel's shared memory (`fa_smem`, which fagpu-build-kernels
/// declares) as seen from `op`; null where the module has none.
LLVM::GlobalOp sharedGlobal(Operation *op) {
  return SymbolTable::lookupNearestSymbolFrom<LLVM::GlobalOp>(
      op, StringAttr::get(op->getContext(), "fa_smem"));
}
/// Whether `op`'s module declares it: the patterns that address it fail to
/// match without it rather than dereference a missing global.
bool hasSharedMemory(Operation *op) {
  return static_cast<bool>(sharedGlobal(op));
}

/// The dynamic shared memory of the kernel containing `op`: aligned to the
/// 1 KiB swizzle atom for column-block tiles; row-major tiles (cp.async,
/// ldmatrix) need only the 16 bytes the global is declared with.
Value sharedBase(OpEmitter &e, Operation *op, bool rowMajor = false) {
  LLVM::GlobalOp global = sharedGlobal(op);
  if (rowMajor)
    return LLVM::AddressOfOp::create(e.builder(), op->getLoc(), global);
  return e.alignedSharedBase(global);
}

struct CreatePipelineLowering
    : OpConversionPattern<fagpu::CreatePipelineOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::CreatePipelineOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    OpEmitter e(rewriter, op.getLoc(), elementOf(op.getType()));
    if (!hasSharedMemory(op))
      return rewriter.notifyMatchFailure(op, "no fa_smem in the module");
    SmallVector<Value> values = {sharedBase(e, op, op.getType().isCpAsync()),
                                 e.c32(op.getBarrierOffset()),
                                 e.c32(op.getTileOffset())};
    rewriter.replaceOpWithMultiple(op, {values});
    return success();
  }
};

/// One thread initialises the barriers (stage by stage: the full barriers
/// of its buffers, then their empty ones), fences them for the async
/// proxy (TMA), and the CTA waits for it.
struct InitPipelinesLowering : OpConversionPattern<fagpu::InitPipelinesOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::InitPipelinesOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpEmitter e(rewriter, loc, rewriter.getF16Type());
    Value tid = NVVM::ThreadIdXOp::create(rewriter, loc, e.i32);
    auto ifInit =
        scf::IfOp::create(rewriter, loc, e.eq(tid, e.c32(0)), false);
    {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToStart(ifInit.thenBlock());
      Value producerArrivals = e.c32(1);
      Value consumerArrivals = e.c32(op.getConsumerArrivals());
      for (auto [pipeline, lowered] :
           llvm::zip(op.getPipelines(), adaptor.getPipelines())) {
        PipelineValues p(pipeline, lowered);
        for (int64_t s = 0; s < p.type.getStages(); ++s) {
          for (int64_t buf = 0; buf < p.type.getBuffers(); ++buf)
            NVVM::MBarrierInitOp::create(rewriter, loc,
                                         p.full(e, e.c32(s), buf),
                                         producerArrivals, Value());
          for (int64_t buf = 0; buf < p.type.getBuffers(); ++buf)
            NVVM::MBarrierInitOp::create(rewriter, loc,
                                         p.empty(e, e.c32(s), buf),
                                         consumerArrivals, Value());
        }
      }
      NVVM::FenceMbarrierInitOp::create(rewriter, loc);
    }
    NVVM::Barrier0Op::create(rewriter, loc);
    rewriter.eraseOp(op);
    return success();
  }
};

struct PipelineAcquireLowering
    : OpConversionPattern<fagpu::PipelineAcquireOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::PipelineAcquireOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    PipelineValues p(op.getPipeline(), adaptor.getPipeline());
    OpEmitter e(rewriter, op.getLoc(), elementOf(p.type));
    e.waitBarrier(
        p.empty(e, adaptor.getStage().front(), op.getBuffer()),
        adaptor.getParity().front());
    rewriter.eraseOp(op);
    return success();
  }
};

/// What every TMA load into a pipeline stage does around its boxes: one
/// arrival on the stage's full barrier announcing the whole tile's bytes,
/// then `issue(emitter, tileOffset, barrier, tile)` writes the boxes into
/// the stage's buffer.
template <typename Op, typename Adaptor>
static LogicalResult lowerStageLoad(
    Op op, Adaptor adaptor, ConversionPatternRewriter &rewriter,
    llvm::function_ref<void(OpEmitter &, Value, Value, fagpu::SharedTileType)>
        issue) {
  PipelineValues p(op.getPipeline(), adaptor.getPipeline());
  fagpu::SharedTileType tile = p.type.getBufferTile(op.getBuffer());
  OpEmitter e(rewriter, op.getLoc(), elementOf(p.type), SoftmaxConfig(),
              tile.getCols());
  Value stage = adaptor.getStage().front();
  Value full = p.full(e, stage, op.getBuffer());
  e.expectBytes(full, tile.getBytes());
  issue(e, p.tile(e, stage, op.getBuffer()), full, tile);
  rewriter.eraseOp(op);
  return success();
}

struct TmaLoadLowering : OpConversionPattern<fagpu::TmaLoadOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::TmaLoadOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    return lowerStageLoad(
        op, adaptor, rewriter,
        [&](OpEmitter &e, Value tileOffset, Value full,
            fagpu::SharedTileType tile) {
          e.loadTile(adaptor.getMap().front(), tileOffset, tile.getRows(),
                     adaptor.getRow().front(),
                     llvm::to_vector(llvm::map_range(
                         adaptor.getMatrixCoords(),
                         [](ValueRange v) { return v.front(); })),
                     full, /*firstRow=*/0, /*tileRows=*/0,
                     op.getColumn() ? adaptor.getColumn().front() : Value(),
                     tile.getSwizzle());
        });
  }
};

/// One box of `page_rows` rows per page and column block, page i's at
/// tile row i * page_rows.
struct TmaLoadPagesLowering : OpConversionPattern<fagpu::TmaLoadPagesOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::TmaLoadPagesOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    int64_t pageRows = op.getPageRows();
    return lowerStageLoad(
        op, adaptor, rewriter,
        [&](OpEmitter &e, Value tileOffset, Value full,
            fagpu::SharedTileType tile) {
          for (auto [i, page] : llvm::enumerate(adaptor.getPages()))
            e.loadTile(adaptor.getMap().front(), tileOffset, pageRows,
                       adaptor.getRow().front(),
                       SmallVector<Value>{adaptor.getHead().front(),
                                          page.front()},
                       full, /*firstRow=*/int64_t(i) * pageRows,
                       /*tileRows=*/tile.getRows());
        });
  }
};

struct PipelineCommitLowering
    : OpConversionPattern<fagpu::PipelineCommitOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::PipelineCommitOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    PipelineValues p(op.getPipeline(), adaptor.getPipeline());
    OpEmitter e(rewriter, op.getLoc(), elementOf(p.type));
    NVVM::MBarrierArriveOp::create(
        rewriter, op.getLoc(), Type(),
        p.full(e, adaptor.getStage().front(), op.getBuffer()), Value());
    rewriter.eraseOp(op);
    return success();
  }
};

struct PipelineWaitLowering : OpConversionPattern<fagpu::PipelineWaitOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::PipelineWaitOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    PipelineValues p(op.getPipeline(), adaptor.getPipeline());
    OpEmitter e(rewriter, op.getLoc(), elementOf(p.type));
    e.waitBarrier(p.full(e, adaptor.getStage().front(), op.getBuffer()),
                  adaptor.getParity().front());
    rewriter.eraseOp(op);
    return success();
  }
};

/// One arrival per consumer warp (lane 0).
struct PipelineReleaseLowering
    : OpConversionPattern<fagpu::PipelineReleaseOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::PipelineReleaseOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    PipelineValues p(op.getPipeline(), adaptor.getPipeline());
    OpEmitter e(rewriter, op.getLoc(), elementOf(p.type));
    Value empty = p.empty(e, adaptor.getStage().front(), op.getBuffer());
    if (op.getCommit()) {
      // The issuing thread's tcgen05.mma done: the stage is free.
      NVVM::Tcgen05CommitOp::create(rewriter, op.getLoc(), empty, Value());
      rewriter.eraseOp(op);
      return success();
    }
    e.onLaneZero([&] {
      NVVM::MBarrierArriveOp::create(rewriter, op.getLoc(), Type(), empty,
                                     Value());
    });
    rewriter.eraseOp(op);
    return success();
  }
};

struct PipelineTileLowering : OpConversionPattern<fagpu::PipelineTileOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::PipelineTileOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    PipelineValues p(op.getPipeline(), adaptor.getPipeline());
    OpEmitter e(rewriter, op.getLoc(), elementOf(p.type));
    SmallVector<Value> tile = {
        p.base, p.tile(e, adaptor.getStage().front(), op.getBuffer())};
    rewriter.replaceOpWithMultiple(op, {tile});
    return success();
  }
};

struct SharedTileLowering : OpConversionPattern<fagpu::SharedTileOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::SharedTileOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (!hasSharedMemory(op))
      return rewriter.notifyMatchFailure(op, "no fa_smem in the module");
    OpEmitter e(rewriter, op.getLoc(), op.getType().getElementType());
    SmallVector<Value> tile = {sharedBase(e, op, op.getType().isRowMajor()),
                               e.c32(op.getOffset())};
    rewriter.replaceOpWithMultiple(op, {tile});
    return success();
  }
};

/// Rows index * R ..: R 128-byte rows further in each column block.
struct TileRowsLowering : OpConversionPattern<fagpu::TileRowsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::TileRowsOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    OpEmitter e(rewriter, op.getLoc(), op.getType().getElementType());
    ValueRange tile = adaptor.getTile();
    int64_t rowBytes = op.getType().getRows() * op.getType().getSwizzle();
    // The rows' offset depends on the index alone (a consumer's): computed
    // once, where the index is defined, not per tile.
    Value index = adaptor.getIndex().front();
    Value rowOffset;
    {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointAfterValue(index);
      rowOffset = e.mul(index, e.c32(rowBytes));
    }
    SmallVector<Value> rows = {tile[0], e.add(tile[1], rowOffset)};
    rewriter.replaceOpWithMultiple(op, {rows});
    return success();
  }
};

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
    OpEmitter e(rewriter, op.getLoc(), bType.getElementType(),
                SoftmaxConfig(), bType.getCols(), bType.getRows());
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
      acc = registerSharedMma(e, op, adaptor.getA(), bTile,
                              adaptor.getAcc());
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
          b, loc, accType, acc,
          e.wgmmaKMajorDescriptor(aTile[1], aType, kk),
          e.wgmmaKMajorDescriptor(bTile[1], bType, kk),
          NVVM::MMAShapeAttr::get(ctx, 64, n, kStep),
          NVVM::WGMMATypesAttr::get(ctx, type),
          NVVM::WGMMATypesAttr::get(ctx, type),
          NVVM::WGMMATypesAttr::get(ctx, NVVM::WGMMATypes::f32),
          NVVM::WGMMAScaleOutAttr::get(ctx, kk == 0
                                                ? NVVM::WGMMAScaleOut::zero
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
      operands.push_back(
          mnMajor ? e.valueDescriptor(vTile[1], kk, kWgmmaSwizzle128)
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
    NVVM::WgmmaWaitGroupSyncOp::create(rewriter, op.getLoc(),
                                       op.getPending());
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

//===----------------------------------------------------------------------===//
// Online softmax
//===----------------------------------------------------------------------===//

SoftmaxConfig configOf(fagpu::SoftmaxStepOp op) {
  SoftmaxConfig config;
  config.causal = op.getCausal();
  config.window = op.getWindow().value_or(0);
  if (std::optional<APFloat> cap = op.getSoftcap())
    config.softcap = cap->convertToDouble();
  if (std::optional<APFloat> t = op.getRescaleThreshold())
    config.rescaleThreshold = t->convertToDouble();
  config.polyDegree = op.getExp2PolyDegree().value_or(0);
  config.polyPeriod = op.getExp2PolyPeriod().value_or(8);
  if (std::optional<APFloat> scale = op.getProbsScale())
    config.probsScale = scale->convertToDouble();
  config.treeRowMax = op.getTreeRowMax();
  config.noRowSum = op.getNoRowSum();
  return config;
}

struct SoftmaxStepLowering : OpConversionPattern<fagpu::SoftmaxStepOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::SoftmaxStepOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (op.getS().getType().getLayout() == fagpu::FragmentLayout::Lanes)
      return rewriter.notifyMatchFailure(op, "lanes: LanesSoftmaxStepLowering");
    SoftmaxConfig config = configOf(op);
    OpEmitter e(rewriter, op.getLoc(), op.getP().getType().getElementType(),
                config);
    SmallVector<Value> s(adaptor.getS());
    ValueRange mIn = adaptor.getM(), lIn = adaptor.getL();
    // Softcap first on every row tile, then tile by tile the mask and the
    // step; the moved flag chains across the thread's row tiles.
    Value effScale = e.applySoftcap(s, adaptor.getScaleLog2().front());
    int64_t rowTiles = op.getS().getType().getRowTiles();
    int64_t perTile = s.size() / rowTiles;
    SmallVector<Value> p, mOut, lOut, alpha, newO;
    OpEmitter::SoftmaxStep step;
    for (int64_t r = 0; r < rowTiles; ++r) {
      MutableArrayRef<Value> tile =
          MutableArrayRef<Value>(s).slice(r * perTile, perTile);
      if (op.getMasked()) {
        Value row0 = adaptor.getRow0().front();
        if (r)
          row0 = e.add(row0, e.c32(16 * r));
        e.applyMask(tile, adaptor.getKeyStart().front(), row0,
                    adaptor.getNk().front(), e.position().quadLane,
                    op.getDiagonalShift() ? adaptor.getDiagonalShift().front()
                                          : Value());
      }
      std::array<Value, 2> m = {mIn[2 * r], mIn[2 * r + 1]};
      std::array<Value, 2> l = {lIn[2 * r], lIn[2 * r + 1]};
      step = e.onlineSoftmax(tile, m, l, effScale, step.moved);
      if (op.getO()) {
        // Register 4 i + e of the row tile is in its row g + 8 (e / 2).
        ValueRange o = adaptor.getO();
        int64_t oPerTile = o.size() / rowTiles;
        for (int64_t i = 0; i < oPerTile; ++i)
          newO.push_back(e.fmul(o[r * oPerTile + i], step.alpha[(i % 4) / 2]));
      }
      mOut.append(m.begin(), m.end());
      lOut.append(l.begin(), l.end());
      alpha.append(step.alpha.begin(), step.alpha.end());
      p.append(config.probsScale > 0 ? e.packProbabilitiesE4M3(tile)
                                     : e.packProbabilities(tile));
    }
    SmallVector<SmallVector<Value>> results = {p, mOut, lOut, alpha};
    if (op.getMoved())
      results.push_back({step.moved});
    if (op.getNewO())
      results.push_back(newO);
    rewriter.replaceOpWithMultiple(op, std::move(results));
    return success();
  }
};

/// The thread's row (0 .. 2 R - 1, as in a rows fragment) that accumulator
/// register `i` of a fragment with `perTile` registers a row tile lies in:
/// register 4 i + e of row tile r is in its row g + 8 (e / 2).
static int64_t accumulatorRow(int64_t i, int64_t perTile) {
  return 2 * (i / perTile) + (i % 4) / 2;
}

/// The row-sum tile: each of the warpgroup's threads writes 16-byte pieces
/// (row 0 of every k-step's 8-row atom is e4m3 ones, the rest zero), then
/// the writes are fenced for the async proxy that wgmma reads through and
/// the warpgroup meets at its named barrier.
struct InitRowSumTileLowering
    : OpConversionPattern<fagpu::InitRowSumTileOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::InitRowSumTileOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    fagpu::SharedTileType type = op.getTile().getType();
    if (!isa<Float8E4M3FNType>(type.getElementType()))
      return rewriter.notifyMatchFailure(op, "the ones are e4m3 codes");
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    OpEmitter e(rewriter, loc, type.getElementType());
    ValueRange tile = adaptor.getTile();
    e.smem = tile[0];
    // Column block kk (`swizzle` keys) starts block_rows * swizzle bytes
    // after block kk - 1; the tile's 8 rows are its first 8 * swizzle
    // bytes, 16-byte piece c of them in row c / (swizzle / 16). The
    // swizzle moves pieces within a row only, so row 0 is the ones row
    // whatever it XORs.
    int64_t swizzle = type.getSwizzle(), perBlock = swizzle / 2;
    int64_t pieces = type.getCols() / swizzle * perBlock;
    constexpr uint32_t kFourOnes = 0x38383838; // e4m3 1.0 = 0x38
    auto vec = VectorType::get({4}, e.i32);
    Value tid = e.remu(NVVM::ThreadIdXOp::create(rewriter, loc, e.i32),
                       e.c32(128));
    for (int64_t first = 0; first < pieces; first += 128) {
      Value piece = e.add(tid, e.c32(first));
      auto inTile = scf::IfOp::create(
          rewriter, loc, e.ult(piece, e.c32(pieces)), false);
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToStart(inTile.thenBlock());
      Value chunk = e.remu(piece, e.c32(perBlock));
      Value byte =
          e.add(e.mul(e.divu(piece, e.c32(perBlock)),
                      e.c32(type.getBlockRows() * swizzle)),
                e.mul(chunk, e.c32(16)));
      Value onesRow = e.ult(chunk, e.c32(swizzle / 16));
      Value word = e.select(onesRow, e.c32(kFourOnes), e.c32(0));
      Value value = LLVM::PoisonOp::create(rewriter, loc, vec);
      for (int64_t i = 0; i < 4; ++i)
        value = LLVM::InsertElementOp::create(rewriter, loc, value, word,
                                              e.c32(i));
      LLVM::StoreOp::create(rewriter, loc, value,
                            e.sharedAt(e.add(tile[1], byte)), 16);
    }
    NVVM::FenceProxyOp::create(
        rewriter, loc, NVVM::ProxyKind::async_shared,
        NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
    NVVM::BarrierOp::create(rewriter, loc, Type(), adaptor.getBarrier().front(),
                            e.c32(128), NVVM::BarrierReductionAttr(), Value());
    rewriter.eraseOp(op);
    return success();
  }
};

/// Per row, the sum of the accumulator columns the thread holds.
struct RowPartialsLowering : OpConversionPattern<fagpu::RowPartialsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::RowPartialsOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    OpEmitter e(rewriter, op.getLoc(), rewriter.getF16Type());
    ValueRange acc = adaptor.getAcc();
    int64_t rowTiles = op.getAcc().getType().getRowTiles();
    int64_t perTile = acc.size() / rowTiles;
    SmallVector<Value> rows(2 * rowTiles);
    for (int64_t i = 0; i < int64_t(acc.size()); ++i) {
      Value &row = rows[accumulatorRow(i, perTile)];
      row = row ? e.fadd(row, acc[i]) : acc[i];
    }
    rewriter.replaceOpWithMultiple(op, {rows});
    return success();
  }
};

/// O *= alpha; with FA4's flag only if some row of the warp moved (a warp
/// vote), else O as it was.
struct RescaleLowering : OpConversionPattern<fagpu::RescaleOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::RescaleOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (!op.getResult())
      return rewriter.notifyMatchFailure(op, "TMEM: TmemRescaleLowering");
    Location loc = op.getLoc();
    OpEmitter e(rewriter, loc, rewriter.getF16Type());
    ValueRange o = adaptor.getO(), alpha = adaptor.getAlpha();
    size_t perTile =
        o.size() / cast<fagpu::FragmentType>(op.getO().getType()).getRowTiles();
    auto scaled = [&]() {
      SmallVector<Value> r;
      for (size_t i = 0; i < o.size(); ++i)
        r.push_back(e.fmul(o[i], alpha[accumulatorRow(i, perTile)]));
      return r;
    };
    if (!op.getMoved()) {
      rewriter.replaceOpWithMultiple(op, {scaled()});
      return success();
    }
    Value anyMoved = NVVM::VoteSyncOp::create(
        rewriter, loc, rewriter.getI1Type(), e.c32(-1),
        adaptor.getMoved().front(),
        NVVM::VoteSyncKindAttr::get(rewriter.getContext(),
                                    NVVM::VoteSyncKind::any));
    SmallVector<Type> types(o.size(), e.f32);
    auto ifOp = scf::IfOp::create(rewriter, loc, types, anyMoved, true);
    {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToStart(ifOp.thenBlock());
      scf::YieldOp::create(rewriter, loc, scaled());
      rewriter.setInsertionPointToStart(ifOp.elseBlock());
      scf::YieldOp::create(rewriter, loc, o);
    }
    rewriter.replaceOpWithMultiple(
        op, {SmallVector<Value>(ifOp.getResults())});
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Epilogue
//===----------------------------------------------------------------------===//

/// Where the rows of one (batch, head) matrix of O start: element `first`
/// of its row 0 and `stride` elements between rows (i64). Contiguous
/// [B * H, N, D] without `heads`; with them, the strided [B, H, N, D] O of
/// fagpu.store_output and fagpu.merge_splits, the matrix being
/// batch * heads + head.
struct OutputRows {
  Value first, stride;
};
/// `heads` and `strides` are the op's own i32/i64 operands (scalars the
/// conversion leaves as they are).
static OutputRows outputRows(OpEmitter &e, Value heads, ValueRange strides,
                             Value matrix, Value nq, int64_t headDim) {
  if (!heads)
    return {e.mul(e.ext64(matrix), e.mul(e.ext64(nq), e.c64(headDim))),
            e.c64(headDim)};
  Value batch = e.ext64(e.divu(matrix, heads));
  Value head = e.ext64(e.remu(matrix, heads));
  return {e.add(e.mul(batch, strides[0]), e.mul(head, strides[1])),
          strides[2]};
}

struct StoreOutputLowering : OpConversionPattern<fagpu::StoreOutputOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::StoreOutputOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto oType = dyn_cast<fagpu::FragmentType>(op.getO().getType());
    if (!oType)
      return rewriter.notifyMatchFailure(op, "TMEM: TmemStoreOutputLowering");
    int64_t headDim = oType.getShape()[1];
    Type element = op.getOutElement();
    SoftmaxConfig config;
    config.writesLse = bool(op.getLse());
    if (std::optional<APFloat> s = op.getProbsScale())
      config.probsScale = s->convertToDouble();
    OpEmitter e(rewriter, op.getLoc(), element, config, headDim);
    if (op.getDescale())
      e.outputScale = adaptor.getDescale().front();
    ValueRange o = adaptor.getO();
    ValueRange mIn = adaptor.getM(), lIn = adaptor.getL();
    std::array<Value, 2> m = {mIn[0], mIn[1]};
    std::array<Value, 2> l = {lIn[0], lIn[1]};
    Value row0 = adaptor.getRow0().front();
    Value matrix = adaptor.getMatrix().front();
    Value nq = adaptor.getNq().front();
    Value lseBase;
    if (op.getLse())
      lseBase = e.gep(e.globalPtr, e.f32, adaptor.getLse().front(),
                      e.mul(e.ext64(matrix), e.ext64(nq)));
    OpEmitter::ThreadPosition pos = e.position();
    if (!op.getStaging()) {
      // O / l and LSE straight from registers: each quad writes 16 B of a
      // row per 8 columns (32 B for f32 partials), of O's `columns` where
      // the fragment has padding columns past them.
      bool f32Out = element.isF32();
      int64_t columns = op.getColumns().value_or(headDim);
      OutputRows rows =
          outputRows(e, op.getHeads(), op.getStrides(), matrix, nq, columns);
      Value oBase = e.gep(e.globalPtr, f32Out ? e.f32 : e.half,
                          adaptor.getOut().front(), rows.first);
      // Row tile r holds rows row0 + 16 r (+ 8).
      int64_t rowTiles = oType.getRowTiles();
      int64_t perTile = o.size() / rowTiles;
      for (int64_t r = 0; r < rowTiles; ++r)
        e.storeRows(SmallVector<Value>(o.slice(r * perTile, perTile)),
                    {mIn[2 * r], mIn[2 * r + 1]}, {lIn[2 * r], lIn[2 * r + 1]},
                    r ? e.add(row0, e.c32(16 * r)) : row0, nq, oBase, lseBase,
                    rows.stride, columns, pos.quadLane, f32Out);
      rewriter.eraseOp(op);
      return success();
    }
    storeThroughStaging(e, op, adaptor, o, m, l, lseBase, pos);
    rewriter.eraseOp(op);
    return success();
  }

  static void storeThroughStaging(OpEmitter &e, fagpu::StoreOutputOp op,
                                  OneToNOpAdaptor adaptor, ValueRange o,
                                  std::array<Value, 2> m,
                                  std::array<Value, 2> l, Value lseBase,
                                  OpEmitter::ThreadPosition pos) {
    OpBuilder &b = e.builder();
    Location loc = op.getLoc();
    MLIRContext *ctx = b.getContext();
    auto stagingType = cast<fagpu::SharedTileType>(op.getStaging().getType());
    int64_t headDim = stagingType.getCols();
    int64_t blockStride = stagingType.getBlockRows() * kSwizzleBytes;
    ValueRange staging = adaptor.getStaging();
    e.smem = staging[0];
    Value stage = staging[1];
    Value barrier = adaptor.getSyncBarrier().front();
    Value row0 = adaptor.getRow0().front();
    e.oMap = adaptor.getOut().front();
    auto syncWarps = [&] {
      NVVM::BarrierOp::create(b, loc, Type(), barrier, e.c32(128),
                              NVVM::BarrierReductionAttr(), Value());
    };
    std::array<OpEmitter::RowTotal, 2> total = {e.rowTotal(l[0]),
                                                e.rowTotal(l[1])};
    // The staging tile is free once the previous TMA store (or every
    // thread's copy) has read it.
    bool copyRows = op.getCopyRows();
    Value blockMap =
        op.getBlockMap() ? adaptor.getBlockMap().front() : Value();
    if (!copyRows || blockMap)
      e.onFirstThread(pos, [&] {
        NVVM::CpAsyncBulkWaitGroupOp::create(b, loc, 0, b.getUnitAttr());
      });
    syncWarps();
    // stmatrix.x4 writes four 8 x 8 blocks of f16 pairs, laid out as the
    // accumulator (thread t: row t / 4, columns 2 (t % 4) ..): column
    // groups i and i + 1 of rows g and g + 8. Lane L gives the address of
    // row L % 8 of block L / 8: warp row 8 ((L / 8) % 2) + L % 8, column
    // group i + L / 16, its 16-B chunk XORed with the row mod 8 (128-B
    // swizzle).
    Value blockOf = e.divu(pos.lane, e.c32(8));
    Value rowInBlock = e.remu(pos.lane, e.c32(8));
    Value row = e.add(e.add(e.mul(pos.warpInGroup, e.c32(16)),
                            e.mul(e.remu(blockOf, e.c32(2)), e.c32(8))),
                      rowInBlock);
    Value rowAddress = e.add(stage, e.mul(row, e.c32(kSwizzleBytes)));
    Value secondGroup = e.divu(pos.lane, e.c32(16));
    for (int64_t i = 0; i < headDim / 8; i += 2) {
      SmallVector<Value> pairs;
      for (int64_t group : {i, i + 1})
        for (int64_t h = 0; h < 2; ++h)
          pairs.push_back(
              e.packPair(e.fmul(o[4 * group + 2 * h], total[h].inverse),
                         e.fmul(o[4 * group + 2 * h + 1], total[h].inverse)));
      Value chunk = arith::XOrIOp::create(
          b, loc, e.add(e.c32(i % 8), secondGroup), rowInBlock);
      Value offset =
          e.add(e.add(rowAddress, e.c32((i / 8) * blockStride)),
                e.mul(chunk, e.c32(16)));
      NVVM::StMatrixOp::create(
          b, loc, e.sharedAt(offset), pairs,
          NVVM::MMALayoutAttr::get(ctx, NVVM::MMALayout::row),
          NVVM::LdStMatrixShapeAttr::get(ctx, 8, 8),
          NVVM::LdStMatrixEltTypeAttr::get(ctx, NVVM::LdStMatrixEltType::B16));
    }
    if (copyRows && !blockMap) {
      // The copy reads what other warps' stmatrix wrote (both generic
      // proxy): the barrier orders them.
      syncWarps();
      copyStagedRows(e, op, adaptor, stage, blockStride, pos);
    } else {
      // The generic-proxy writes become visible to the TMA (async proxy),
      // then one thread stores the 64 rows.
      NVVM::FenceProxyOp::create(
          b, loc, NVVM::ProxyKind::async_shared,
          NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
      syncWarps();
      auto storeBlock = [&] {
        e.onFirstThread(pos, [&] {
          // The issuer is warp 0, lane 0: its row0 is the block's first
          // row.
          Value matrix = adaptor.getMatrix().front();
          SmallVector<Value> coords = {matrix};
          if (Value heads = op.getHeads())
            coords = {e.remu(matrix, heads), e.divu(matrix, heads)};
          e.storeRowBlock(stage, blockStride, row0, coords);
          NVVM::CpAsyncBulkCommitGroupOp::create(b, loc);
        });
      };
      if (!blockMap) {
        storeBlock();
      } else {
        // A box of 64 rows that reach past Nq would write the next
        // sequence's rows: only whole blocks leave by TMA. The warpgroup's
        // first row is row0 - (16 w + lane / 4) of the thread's.
        Value firstRow = e.sub(
            row0, e.add(e.mul(pos.warpInGroup, e.c32(16)),
                        e.divu(pos.lane, e.c32(4))));
        Value whole = arith::CmpIOp::create(
            b, loc, arith::CmpIPredicate::ule,
            e.add(firstRow, e.c32(fagpu::kRowsPerConsumer)),
            adaptor.getNq().front());
        auto ifWhole = scf::IfOp::create(b, loc, whole, /*withElse=*/true);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(ifWhole.thenBlock());
        e.oMap = blockMap;
        storeBlock();
        b.setInsertionPointToStart(ifWhole.elseBlock());
        copyStagedRows(e, op, adaptor, stage, blockStride, pos);
      }
    }
    for (int64_t h = 0; h < 2; ++h)
      e.storeLse(total[h], m[h], e.add(row0, e.c32(8 * h)),
                 adaptor.getNq().front(), lseBase, pos.quadLane);
  }

  /// copy_rows: the warpgroup's 64 staged rows to O, 16-byte pieces of
  /// `columns` per row, piece p of the tile (row p / pieces, its piece
  /// p % pieces) by thread p mod 128: the pieces of a row, and of the
  /// rows after it, go to adjacent lanes, so a warp's store writes whole
  /// 32-byte sectors. A piece of row r, column block c, chunk k of its
  /// 128-byte line lies at chunk k XOR (r mod 8) (the 128-B swizzle
  /// stmatrix wrote). Rows at or past Nq are skipped.
  static void copyStagedRows(OpEmitter &e, fagpu::StoreOutputOp op,
                             OneToNOpAdaptor adaptor, Value stage,
                             int64_t blockStride,
                             OpEmitter::ThreadPosition pos) {
    OpBuilder &b = e.builder();
    Location loc = op.getLoc();
    auto stagingType = cast<fagpu::SharedTileType>(op.getStaging().getType());
    int64_t columns = op.getColumns().value_or(stagingType.getCols());
    constexpr int64_t kPieceBytes = 16, kPiecesPerLine = kSwizzleBytes / 16;
    int64_t pieces = columns * 2 / kPieceBytes; // per row, 16-bit O
    Value matrix = adaptor.getMatrix().front();
    Value nq = adaptor.getNq().front();
    OutputRows rows = outputRows(e, op.getHeads(), op.getStrides(), matrix,
                                 nq, columns);
    Value oBase =
        e.gep(e.globalPtr, e.half, adaptor.getOut().front(), rows.first);
    // The warpgroup's first row: the thread's row0 is row 16 w + lane / 4
    // of it (w its warp).
    Value thread = e.add(e.mul(pos.warpInGroup, e.c32(32)), pos.lane);
    Value firstRow = e.sub(
        adaptor.getRow0().front(),
        e.add(e.mul(pos.warpInGroup, e.c32(16)), e.divu(pos.lane, e.c32(4))));
    Type pieceType = VectorType::get({4}, e.i32);
    for (int64_t first = 0; first < fagpu::kRowsPerConsumer * pieces;
         first += 128) {
      Value linear = e.add(thread, e.c32(first));
      Value row = e.divu(linear, e.c32(pieces));
      Value piece = e.remu(linear, e.c32(pieces));
      Value chunk = arith::XOrIOp::create(
          b, loc, e.remu(piece, e.c32(kPiecesPerLine)),
          e.remu(row, e.c32(8)));
      Value offset = e.add(
          e.add(stage, e.mul(e.divu(piece, e.c32(kPiecesPerLine)),
                             e.c32(blockStride))),
          e.add(e.mul(row, e.c32(kSwizzleBytes)),
                e.mul(chunk, e.c32(kPieceBytes))));
      Value outRow = e.add(firstRow, row);
      auto ifRow = scf::IfOp::create(b, loc, e.ult(outRow, nq), false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifRow.thenBlock());
      Value values = LLVM::LoadOp::create(b, loc, pieceType,
                                          e.sharedAt(offset), kPieceBytes);
      Value element = e.add(e.mul(e.ext64(outRow), rows.stride),
                            e.ext64(e.mul(piece, e.c32(8))));
      LLVM::StoreOp::create(b, loc, values,
                            e.gep(e.globalPtr, e.half, oBase, element),
                            kPieceBytes);
    }
  }
};

/// Each warp counts itself in for its 16 rows; the last chunk's warp merges
/// them, a lane head_dim / 32 adjacent columns.
struct MergeSplitsLowering : OpConversionPattern<fagpu::MergeSplitsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::MergeSplitsOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    int64_t headDim = op.getHeadDim();
    int64_t columns = headDim / 32; // per lane
    OpEmitter e(rewriter, loc, op.getOutElement());
    OpBuilder &b = e.builder();
    auto one = [&](ValueRange values) { return values.front(); };
    Value matrix = one(adaptor.getMatrix()), nq = one(adaptor.getNq()),
          splits = one(adaptor.getSplits()),
          matrices = one(adaptor.getMatrices());
    Value oPartial = one(adaptor.getOPartial()),
          lsePartial = one(adaptor.getLsePartial()), out = one(adaptor.getOut());
    Value lse = op.getLse() ? one(adaptor.getLse()) : Value();
    OpEmitter::ThreadPosition pos = e.position();
    Value warpRow0 =
        e.add(one(adaptor.getRowsStart()), e.mul(pos.warpInGroup, e.c32(16)));
    auto ifRows = scf::IfOp::create(b, loc, e.ult(warpRow0, nq), false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifRows.thenBlock());

    // Count in, once every lane's partial stores are visible GPU-wide: each
    // lane fences its own stores, and the warp barrier orders all the
    // fences before lane 0's atomic (lanes of a warp are scheduled
    // independently since Volta).
    NVVM::MembarOp::create(b, loc, NVVM::MemScopeKind::GPU);
    NVVM::SyncWarpOp::create(b, loc, e.c32(-1));
    Value counter =
        e.gep(e.globalPtr, e.i32, one(adaptor.getArrivals()),
              e.add(e.mul(e.ext64(matrix), e.ext64(nq)), e.ext64(warpRow0)));
    auto ifLead = scf::IfOp::create(b, loc, TypeRange{e.i32},
                                    e.eq(pos.lane, e.c32(0)),
                                    /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPointToStart(ifLead.thenBlock());
      Value before = LLVM::AtomicRMWOp::create(
          b, loc, LLVM::AtomicBinOp::add, counter, e.c32(1),
          LLVM::AtomicOrdering::acq_rel, StringRef("device"));
      scf::YieldOp::create(b, loc, before);
      b.setInsertionPointToStart(ifLead.elseBlock());
      scf::YieldOp::create(b, loc, e.c32(0));
    }
    Value before = e.warpUniform(ifLead.getResult(0));
    auto ifLast = scf::IfOp::create(
        b, loc, e.eq(before, e.sub(splits, e.c32(1))), false);
    b.setInsertionPointToStart(ifLast.thenBlock());
    e.onLaneZero(
        [&] { LLVM::StoreOp::create(b, loc, e.c32(0), counter, 4); });
    // The other chunks' partials were written by other SMs, after the
    // acquire above. The LSE are read past this SM's L1 (volatile): a
    // 128-byte line holds 32 rows' LSE, and another warp of this SM may
    // have read the line before these rows' chunks were written.
    NVVM::MembarOp::create(b, loc, NVVM::MemScopeKind::GPU);
    Value rowsStart = warpRow0;
    Value rowEnd = arith::MinUIOp::create(b, loc, e.add(warpRow0, e.c32(16)),
                                          nq);
    auto rows = scf::ForOp::create(b, loc, rowsStart, rowEnd, e.c32(1));
    b.setInsertionPointToStart(rows.getBody());
    Value row = rows.getInductionVar();
    Value rowIndex = e.add(e.mul(e.ext64(matrix), e.ext64(nq)), e.ext64(row));
    Value rowsPerChunk = e.mul(e.ext64(matrices), e.ext64(nq));
    auto partialRow = [&](Value chunk) {
      return e.add(e.mul(e.ext64(chunk), rowsPerChunk), rowIndex);
    };
    auto loadLse = [&](Value chunk) -> Value {
      return LLVM::LoadOp::create(
          b, loc, e.f32, e.gep(e.globalPtr, e.f32, lsePartial, partialRow(chunk)),
          /*alignment=*/4, /*isVolatile=*/true);
    };
    Value negInf = e.cf(-std::numeric_limits<double>::infinity());
    // m = max_s LSE_s.
    auto maxLoop = scf::ForOp::create(b, loc, e.c32(0), splits, e.c32(1),
                                      ValueRange{negInf});
    {
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPointToStart(maxLoop.getBody());
      Value m = arith::MaximumFOp::create(
          b, loc, maxLoop.getRegionIterArgs()[0],
          loadLse(maxLoop.getInductionVar()));
      scf::YieldOp::create(b, loc, m);
    }
    Value m = maxLoop.getResult(0);
    // sum_s w_s and sum_s w_s O_s over the chunks that saw a key.
    SmallVector<Value> init(columns + 1, e.cf(0.0));
    auto sumLoop =
        scf::ForOp::create(b, loc, e.c32(0), splits, e.c32(1), init);
    {
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPointToStart(sumLoop.getBody());
      Value chunk = sumLoop.getInductionVar();
      ValueRange acc = sumLoop.getRegionIterArgs();
      Value lseChunk = loadLse(chunk);
      Value seen = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT,
                                         lseChunk, negInf);
      auto ifSeen = scf::IfOp::create(b, loc, acc.getTypes(), seen, true);
      b.setInsertionPointToStart(ifSeen.thenBlock());
      Value w = e.ex2(e.fmul(arith::SubFOp::create(b, loc, lseChunk, m),
                             e.cf(llvm::numbers::log2e)));
      SmallVector<Value> next = {
          arith::AddFOp::create(b, loc, acc[0], w).getResult()};
      Value oRow = e.gep(
          e.globalPtr, e.f32, oPartial,
          e.add(e.mul(partialRow(chunk), e.c64(headDim)),
                e.ext64(e.mul(pos.lane, e.c32(columns)))));
      // The lane's columns as vectors of four (two, one where its columns
      // are not a multiple: D = 96 gives a lane three, 12 bytes apart), so
      // that the warp's loads cover whole 32-byte sectors. Not volatile
      // (NVPTX would split a volatile vector into scalar loads, each moving
      // a sector for 4 bytes): a partial O row fills whole 128-byte lines
      // of its own, read once per launch by this warp alone, so this SM's
      // L1 holds no stale copy of them (L1 starts each launch empty).
      int64_t width = columns % 4 == 0 ? 4 : columns % 2 == 0 ? 2 : 1;
      for (int64_t c = 0; c < columns; c += width) {
        auto vectorType = VectorType::get({width}, e.f32);
        Value x = LLVM::LoadOp::create(
            b, loc, vectorType, e.gep(e.globalPtr, e.f32, oRow, e.c64(c)),
            /*alignment=*/4 * width);
        for (int64_t i = 0; i < width; ++i) {
          Value xi = LLVM::ExtractElementOp::create(b, loc, x, e.c32(i));
          next.push_back(
              math::FmaOp::create(b, loc, w, xi, acc[1 + c + i]).getResult());
        }
      }
      scf::YieldOp::create(b, loc, next);
      b.setInsertionPointToStart(ifSeen.elseBlock());
      scf::YieldOp::create(b, loc, acc);
      b.setInsertionPointAfter(ifSeen);
      scf::YieldOp::create(b, loc, ifSeen.getResults());
    }
    Value total = sumLoop.getResult(0);
    Value positive = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT,
                                           total, e.cf(0.0));
    Value inverse = arith::SelectOp::create(
        b, loc, positive, arith::DivFOp::create(b, loc, e.cf(1.0), total),
        e.cf(0.0));
    OutputRows outRows =
        outputRows(e, op.getHeads(), op.getStrides(), matrix, nq, headDim);
    Value oRow =
        e.gep(e.globalPtr, e.half, out,
              e.add(e.add(outRows.first, e.mul(e.ext64(row), outRows.stride)),
                    e.ext64(e.mul(pos.lane, e.c32(columns)))));
    // Pairs of 16-bit columns, or single ones where a lane's columns are
    // odd (and so its pairs would not be 4-byte aligned).
    for (int64_t c = 0; c < columns; c += columns % 2 == 0 ? 2 : 1) {
      Value first = e.fmul(sumLoop.getResult(1 + c), inverse);
      Value ptr = e.gep(e.globalPtr, e.half, oRow, e.c64(c));
      if (columns % 2 != 0) {
        LLVM::StoreOp::create(
            b, loc, arith::TruncFOp::create(b, loc, e.half, first), ptr,
            /*alignment=*/2);
        continue;
      }
      Value packed =
          e.packPair(first, e.fmul(sumLoop.getResult(2 + c), inverse));
      LLVM::StoreOp::create(b, loc, packed, ptr, /*alignment=*/4);
    }
    if (lse) {
      auto ifLane0 = scf::IfOp::create(b, loc, e.eq(pos.lane, e.c32(0)), false);
      b.setInsertionPointToStart(ifLane0.thenBlock());
      Value merged = arith::SelectOp::create(
          b, loc, positive,
          arith::AddFOp::create(b, loc, m,
                                e.fmul(e.lg2(total), e.cf(llvm::numbers::ln2))),
          negInf);
      LLVM::StoreOp::create(b, loc, merged,
                            e.gep(e.globalPtr, e.f32, lse, rowIndex),
                            /*alignment=*/4);
    }
    rewriter.eraseOp(op);
    return success();
  }
};

struct StoreWaitLowering : OpConversionPattern<fagpu::StoreWaitOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::StoreWaitOp op, OneToNOpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    OpEmitter e(rewriter, op.getLoc(), rewriter.getF16Type());
    // `.read`: the shared memory is free once the stores have read it; their
    // global writes complete on their own.
    e.onFirstThread(e.position(), [&] {
      NVVM::CpAsyncBulkWaitGroupOp::create(rewriter, op.getLoc(), 0,
                                           rewriter.getUnitAttr());
    });
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
    Value taken = LLVM::AtomicRMWOp::create(rewriter, loc,
                                            LLVM::AtomicBinOp::add, counter,
                                            e.c32(1),
                                            LLVM::AtomicOrdering::monotonic);
    Value last = e.eq(taken, e.sub(adaptor.getTiles().front(), e.c32(1)));
    auto ifLast = scf::IfOp::create(rewriter, loc, last, false);
    {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToStart(ifLast.thenBlock());
      LLVM::AtomicRMWOp::create(rewriter, loc, LLVM::AtomicBinOp::xchg,
                                counter, e.c32(0),
                                LLVM::AtomicOrdering::monotonic);
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
    auto ifLead =
        scf::IfOp::create(rewriter, loc, e.eq(lane, e.c32(0)), false);
    rewriter.setInsertionPoint(ifLead.thenBlock()->getTerminator());
    auto ifLoad = scf::IfOp::create(
        rewriter, loc, e.eq(warp, e.c32(op.getLoadWarp())), true);
    rewriter.inlineBlockBefore(&op.getLoad().front(),
                               ifLoad.thenBlock()->getTerminator());
    rewriter.inlineBlockBefore(&op.getMma().front(),
                               ifLoad.elseBlock()->getTerminator());
    rewriter.eraseOp(op);
    return success();
  }
};

struct CreateBarriersLowering
    : OpConversionPattern<fagpu::CreateBarriersOp> {
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
    auto ifInit =
        scf::IfOp::create(rewriter, loc, e.eq(tid, e.c32(0)), false);
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
    NVVM::MBarrierArriveOp::create(
        rewriter, op.getLoc(), Type(),
        barrierAt(e, op.getBarriers().getType(), adaptor.getBarriers(),
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
    NVVM::Tcgen05CommitOp::create(
        rewriter, op.getLoc(),
        barrierAt(e, op.getBarriers().getType(), adaptor.getBarriers(),
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
    NVVM::Tcgen05DeallocOp::create(
        rewriter, loc, e.tmemAt(tmem[0], tmem[1]),
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
        op, {e.loadColumns(tmem[0], tmem[1], op.getTmem().getType().getCols())});
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
  static constexpr int64_t kTcgen05Swizzle128 =
      int64_t(1) << 46 | int64_t(2) << 61;

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
    Value idesc = e.c32(int64_t(1) << 4 | type << 7 | type << 10 |
                        int64_t(mnMajor) << 16 | (n >> 3) << 17 | (m >> 4)
                                                                      << 24);
    ValueRange acc = adaptor.getAcc(), bTile = adaptor.getB();
    Value d = e.tmemAt(acc[0], acc[1]);
    Value first = op.getAccumulate() ? adaptor.getAccumulate().front()
                                     : Value();
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
      NVVM::Tcgen05WaitOp::create(rewriter, loc,
                                  NVVM::Tcgen05WaitKind::STORE);
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

/// O / l of the thread's row from TMEM, 32 columns at a time, as 16-byte
/// stores; LSE = (m + log2 l) ln 2. A row that saw no key (l = 0) gets
/// O = 0 and LSE = -inf.
struct TmemStoreOutputLowering : OpConversionPattern<fagpu::StoreOutputOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(fagpu::StoreOutputOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto type = dyn_cast<fagpu::TmemType>(op.getO().getType());
    if (!type)
      return rewriter.notifyMatchFailure(op, "fragments: StoreOutputLowering");
    Location loc = op.getLoc();
    OpEmitter e(rewriter, loc, op.getOutElement());
    int64_t headDim = type.getCols();
    ValueRange o = adaptor.getO();
    Value m = adaptor.getM().front(), l = adaptor.getL().front();
    Value row = adaptor.getRow0().front(), nq = adaptor.getNq().front();
    Value positive = arith::CmpFOp::create(
        rewriter, loc, arith::CmpFPredicate::OGT, l, e.cf(0.0));
    Value inv = e.select(
        positive, arith::DivFOp::create(rewriter, loc, e.cf(1.0), l),
        e.cf(0.0));
    Value inRange = e.ult(row, nq);
    Value rowIndex =
        e.add(e.mul(e.ext64(adaptor.getMatrix().front()), e.ext64(nq)),
              e.ext64(row));
    Value oRow = e.gep(e.globalPtr, e.half, adaptor.getOut().front(),
                       e.mul(rowIndex, e.c64(headDim)));
    auto quad = VectorType::get({4}, e.i32);
    for (int64_t c = 0; c < headDim; c += OpEmitter::kTmemChunk) {
      SmallVector<Value> chunk = e.loadColumns(o[0], e.add(o[1], e.c32(c)),
                                               OpEmitter::kTmemChunk);
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
    if (op.getLse()) {
      auto ifRow = scf::IfOp::create(rewriter, loc, inRange, false);
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPoint(ifRow.thenBlock()->getTerminator());
      Value lse = e.select(positive,
                           e.fmul(e.fadd(m, e.lg2(l)), e.cf(kLn2)),
                           e.cf(-std::numeric_limits<double>::infinity()));
      LLVM::StoreOp::create(
          rewriter, loc, lse,
          e.gep(e.globalPtr, e.f32, adaptor.getLse().front(), rowIndex), 4);
    }
    rewriter.eraseOp(op);
    return success();
  }
};

/// The address of a NUL-terminated string constant of `module` (one global
/// per distinct text, named by its xxh3 hash, which is the same in every
/// process: the PTX of a kernel does not change between builds).
static Value stringConstant(OpBuilder &b, gpu::GPUModuleOp module,
                            Location loc, StringRef text) {
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
    Value failed =
        arith::XOrIOp::create(rewriter, loc, adaptor.getArg(), one);
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
        values.append({LLVM::LLVMPointerType::get(ctx, 3),
                       IntegerType::get(ctx, 32)});
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
        values.append({LLVM::LLVMPointerType::get(ctx, 3),
                       IntegerType::get(ctx, 32)});
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

void mlir::fa::populateWarpgroupToNVVMPatterns(
    const TypeConverter &converter, RewritePatternSet &patterns) {
  patterns.add<WarpSpecializeLowering, WaitTurnLowering, PassTurnLowering,
               CreatePipelineLowering, InitPipelinesLowering,
               PipelineAcquireLowering, TmaLoadLowering, TmaLoadPagesLowering,
               PipelineCommitLowering,
               PipelineWaitLowering, PipelineReleaseLowering,
               PipelineTileLowering, SharedTileLowering, TileRowsLowering,
               MmaLowering, LoadFragmentLowering, CopyAsyncLowering,
               CopyCommitLowering, CopyWaitLowering, MmaWaitLowering,
               PinLowering, SplatLowering, SoftmaxStepLowering, RescaleLowering,
               InitRowSumTileLowering, RowPartialsLowering,
               StoreOutputLowering, MergeSplitsLowering, StoreWaitLowering,
               FetchTileLowering, PublishTileLowering, ReceiveTileLowering,
               TcgenRolesLowering, CreateBarriersLowering, InitBarriersLowering,
               BarrierWaitLowering, BarrierArriveLowering, MmaCommitLowering,
               TmemAllocLowering, TmemDeallocLowering, TmemSliceLowering,
               TmemLoadLowering, TmemStoreLowering, Tcgen05MmaLowering,
               TmemRescaleLowering, LanesSoftmaxStepLowering,
               TmemStoreOutputLowering, DeviceAssertLowering>(
      converter, patterns.getContext());
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
  target.addDynamicallyLegalOp<cf::AssertOp>([](cf::AssertOp op) {
    return !op->getParentOfType<gpu::GPUModuleOp>();
  });
  scf::populateSCFStructuralTypeConversionsAndLegality(converter, patterns,
                                                       target);
  return applyPartialConversion(module, target, std::move(patterns));
}
