//===- WarpgroupLowering.h - what the kernel-body patterns share -*- C++
//-*-===//
//
// Private to lib/Conversion/FAGPUToNVVM: the emitter each kernel-body
// pattern builds its op's hardware sequence with, the lowered form of a
// pipeline and the kernel's shared memory, shared by the pattern files of
// the kernel-body lowering (WarpgroupToNVVM.cpp and one file per theme:
// pipelines, tensor cores and copies, softmax, epilogue, tcgen05), and each
// theme's populate function.
//
//===----------------------------------------------------------------------===//

#ifndef FA_LIB_CONVERSION_FAGPUTONVVM_WARPGROUPLOWERING_H
#define FA_LIB_CONVERSION_FAGPUTONVVM_WARPGROUPLOWERING_H

#include "../Common/TMAKernel.h"

#include "mlir/Transforms/DialectConversion.h"

namespace mlir::fa::warpgroup {

/// A wgmma matrix descriptor's layout bits (62-63) for a tile of `swizzle`
/// bytes: 1 for the 128-byte swizzle, 2 for 64, 3 for 32.
constexpr int64_t wgmmaSwizzleBits(int64_t swizzle) {
  int64_t mode = swizzle == 128 ? 1 : swizzle == 64 ? 2 : 3;
  return mode << 62;
}
inline constexpr int64_t kWgmmaSwizzle128 = wgmmaSwizzleBits(128);

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
  Location location() const { return loc; }

  using TMAKernelEmitter::add;
  using TMAKernelEmitter::alignedSharedBase;
  using TMAKernelEmitter::andi;
  using TMAKernelEmitter::applyMask;
  using TMAKernelEmitter::applySoftcap;
  using TMAKernelEmitter::c32;
  using TMAKernelEmitter::c64;
  using TMAKernelEmitter::cf;
  using TMAKernelEmitter::divu;
  using TMAKernelEmitter::eq;
  using TMAKernelEmitter::ex2;
  using TMAKernelEmitter::expectBytes;
  using TMAKernelEmitter::ext64;
  using TMAKernelEmitter::f32;
  using TMAKernelEmitter::fmul;
  using TMAKernelEmitter::gep;
  using TMAKernelEmitter::globalPtr;
  using TMAKernelEmitter::half;
  using TMAKernelEmitter::halfPair;
  using TMAKernelEmitter::i32;
  using TMAKernelEmitter::kMajorDescriptor;
  using TMAKernelEmitter::lg2;
  using TMAKernelEmitter::ult;
  /// wgmma's descriptor of the K-major tile `type` at `tileOffset`, k-step
  /// `kk`, in the tile's swizzle.
  Value wgmmaKMajorDescriptor(Value tileOffset, fagpu::SharedTileType type,
                              int64_t kk) {
    return kMajorDescriptor(tileOffset, type.getBlockRows(), kk,
                            wgmmaSwizzleBits(type.getSwizzle()),
                            type.getSwizzle());
  }
  using TMAKernelEmitter::exp2Score;
  using TMAKernelEmitter::fadd;
  using TMAKernelEmitter::fma;
  using TMAKernelEmitter::fmax;
  using TMAKernelEmitter::keyVisible;
  using TMAKernelEmitter::loadTile;
  using TMAKernelEmitter::minu;
  using TMAKernelEmitter::moveBase;
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
  using TMAKernelEmitter::RowUpdate;
  using TMAKernelEmitter::select;
  using TMAKernelEmitter::sharedAt;
  using TMAKernelEmitter::sharedPtr;
  using TMAKernelEmitter::shflXor;
  using TMAKernelEmitter::slt;
  using TMAKernelEmitter::smem;
  using TMAKernelEmitter::SoftmaxStep;
  using TMAKernelEmitter::storeLse;
  using TMAKernelEmitter::storeRowBlock;
  using TMAKernelEmitter::storeRows;
  using TMAKernelEmitter::sub;
  using TMAKernelEmitter::tanhApprox;
  using TMAKernelEmitter::valueDescriptor;
  using TMAKernelEmitter::visibleLimit;
  using TMAKernelEmitter::waitBarrier;
  using TMAKernelEmitter::warpUniform;

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
      : type(cast<fagpu::PipelineType>(pipeline.getType())), base(lowered[0]),
        barrierOffset(lowered[1]), tileOffset(lowered[2]) {}

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

inline Type elementOf(fagpu::PipelineType type) {
  return type.getTile().getElementType();
}

/// The kernel's shared memory (`fa_smem`, which fagpu-build-kernels
/// declares) as seen from `op`; null where the module has none.
inline LLVM::GlobalOp sharedGlobal(Operation *op) {
  return SymbolTable::lookupNearestSymbolFrom<LLVM::GlobalOp>(
      op, StringAttr::get(op->getContext(), "fa_smem"));
}
/// Whether `op`'s module declares it: the patterns that address it fail to
/// match without it rather than dereference a missing global.
inline bool hasSharedMemory(Operation *op) {
  return static_cast<bool>(sharedGlobal(op));
}

/// The dynamic shared memory of the kernel containing `op`: aligned to the
/// 1 KiB swizzle atom for column-block tiles; row-major tiles (cp.async,
/// ldmatrix) need only the 16 bytes the global is declared with.
inline Value sharedBase(OpEmitter &e, Operation *op, bool rowMajor = false) {
  LLVM::GlobalOp global = sharedGlobal(op);
  if (rowMajor)
    return LLVM::AddressOfOp::create(e.builder(), op->getLoc(), global);
  return e.alignedSharedBase(global);
}

/// The softmax configuration a step op carries (the sm_90a/sm_80 and
/// the sm_100a steps read it alike).
/// After a warpgroup's threads wrote a shared-memory tile an MMA will read:
/// each fences its writes for the async proxy (wgmma reads shared memory
/// through it), then the 128 meet at named barrier `barrier`.
inline void publishToAsyncProxy(OpEmitter &e, Location loc, Value barrier) {
  OpBuilder &b = e.builder();
  NVVM::FenceProxyOp::create(
      b, loc, NVVM::ProxyKind::async_shared,
      NVVM::SharedSpaceAttr::get(b.getContext(),
                                 NVVM::SharedSpace::shared_cta));
  NVVM::BarrierOp::create(b, loc, Type(), barrier, e.c32(128),
                          NVVM::BarrierReductionAttr(), Value());
}

inline SoftmaxConfig configOf(fagpu::SoftmaxStepOp op) {
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
  config.queryGroup = op.getQueryGroup().value_or(0);
  return config;
}

// The patterns of each theme, in the order populateWarpgroupToNVVMPatterns
// adds them.
/// TMA pipelines, their barriers and stages, shared-memory tiles.
void populatePipelinePatterns(const TypeConverter &converter,
                              RewritePatternSet &patterns);
/// wgmma and mma.sync, fragments, cp.async copies (sm_80), pins, splats.
void populateTensorCorePatterns(const TypeConverter &converter,
                                RewritePatternSet &patterns);
/// The online softmax on accumulator fragments.
void populateSoftmaxPatterns(const TypeConverter &converter,
                             RewritePatternSet &patterns);
/// score_mod and mask_mod inlined on the scores (fagpu.modify_scores).
void populateModificationPatterns(const TypeConverter &converter,
                                  RewritePatternSet &patterns);
/// Normalisation, the LSE and O's stores, the split-KV merge.
void populateEpiloguePatterns(const TypeConverter &converter,
                              RewritePatternSet &patterns);
/// The backward kernel: transposed score tiles, dS through shared memory,
/// dQ's atomic adds.
void populateBackwardPatterns(const TypeConverter &converter,
                              RewritePatternSet &patterns);
/// sm_100a: barriers, tensor memory, tcgen05.mma and its softmax/epilogue.
void populateTcgen05Patterns(const TypeConverter &converter,
                             RewritePatternSet &patterns);

} // namespace mlir::fa::warpgroup

#endif // FA_LIB_CONVERSION_FAGPUTONVVM_WARPGROUPLOWERING_H
