//===- FAGPUWarpgroupOps.cpp - verifiers of the kernel-body ops -----------===//

#include "fa/Dialect/FA/IR/Validation.h"
#include "fa/Dialect/FAGPU/IR/FAGPU.h"
#include "fa/Dialect/FAGPU/IR/SharedMemory.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace mlir::fagpu;

LogicalResult WarpSpecializeOp::verify() {
  if (getConsumers() < 1 || getConsumers() > 3)
    return emitOpError("expected 1 to 3 consumer warpgroups, got ")
           << getConsumers();
  // setmaxnreg takes multiples of 8 in [24, 256]; the register file has
  // 64 Ki registers, 128 threads per warpgroup.
  for (int64_t r : {getProducerRegisters(), getConsumerRegisters()})
    if (r < 24 || r > 256 || r % 8 != 0)
      return emitOpError("register budgets must be multiples of 8 in "
                         "[24, 256], got ")
             << r;
  int64_t total =
      128 * (getProducerRegisters() + getConsumers() * getConsumerRegisters());
  if (total > 65536)
    return emitOpError("the budgets need ")
           << total << " registers, more than the 65536 of the register file";
  Block &consumer = getConsumer().front();
  if (consumer.getNumArguments() != 1 ||
      !consumer.getArgument(0).getType().isInteger(32))
    return emitOpError("the consumer region takes its consumer index (i32)");
  if (getProducer().front().getNumArguments() != 0)
    return emitOpError("the producer region takes no arguments");
  return success();
}

/// Row-major tiles need the 16-byte alignment of a cp.async or ldmatrix
/// row; the others the 1 KiB swizzle atom.
static int64_t tileAlignment(SharedTileType type) {
  return type.isRowMajor() ? 16 : 1024;
}

LogicalResult CreatePipelineOp::verify() {
  if (getBarrierOffset() < 0 || getBarrierOffset() % 8 != 0)
    return emitOpError("barrier_offset must be a non-negative multiple of 8");
  if (getType().isCpAsync()) {
    if (getTileOffset() < 0 || getTileOffset() % 16 != 0)
      return emitOpError("tile_offset of a row_major pipeline must be a "
                         "multiple of 16 bytes");
    return success();
  }
  if (getTileOffset() < 0 || getTileOffset() % 1024 != 0)
    return emitOpError("tile_offset must be a multiple of the 1 KiB swizzle "
                       "atom");
  return success();
}

LogicalResult InitPipelinesOp::verify() {
  if (getConsumerArrivals() < 1)
    return emitOpError("consumer_arrivals must be positive");
  for (Value pipeline : getPipelines())
    if (cast<PipelineType>(pipeline.getType()).isCpAsync())
      return emitOpError("a cp.async (row_major) pipeline has no barriers to "
                         "initialise");
  return success();
}

LogicalResult SharedTileOp::verify() {
  int64_t align = tileAlignment(getType());
  if (getOffset() < 0 || getOffset() % align != 0)
    return emitOpError(align == 16
                           ? "offset of a row_major tile must be a multiple "
                             "of 16 bytes"
                           : "offset must be a multiple of the 1 KiB swizzle "
                             "atom");
  return success();
}

LogicalResult CopyAsyncOp::verify() {
  SharedTileType tile = getTile().getType();
  if (!tile.isRowMajor())
    return emitOpError("cp.async fills row_major tiles (a column_blocks tile "
                       "is the TMA's)");
  int64_t threads = getThreads();
  int64_t chunks = tile.getRows() * tile.getCols() *
                   tile.getElementType().getIntOrFloatBitWidth() / 128;
  if (threads < 32 || threads % 32 != 0 || chunks % threads != 0)
    return emitOpError("the tile's ")
           << chunks << " 16-byte chunks must split evenly over " << threads
           << " threads (whole warps)";
  return success();
}

LogicalResult CopyWaitOp::verify() {
  if (getPendingAttr().getInt() < 0)
    return emitOpError("pending must be non-negative");
  return success();
}

LogicalResult LoadFragmentOp::verify() {
  SharedTileType tile = getTile().getType();
  FragmentType result = getResult().getType();
  if (!tile.isRowMajor())
    return emitOpError("ldmatrix reads row_major tiles");
  if (result.getLayout() != FragmentLayout::OperandA)
    return emitOpError("result must be an operand_a fragment");
  if (result.getElementType() != tile.getElementType() ||
      result.getShape()[0] != tile.getRows() ||
      result.getShape()[1] != tile.getCols())
    return emitOpError("result must have the tile's shape and element type, "
                       "got ")
           << result << " for " << tile;
  return success();
}

LogicalResult TileRowsOp::verify() {
  SharedTileType from = getTile().getType(), to = getRows().getType();
  if (from.getCols() != to.getCols() ||
      from.getElementType() != to.getElementType() ||
      to.getBlockRows() != from.getBlockRows() ||
      to.getSwizzle() != from.getSwizzle() ||
      from.getRows() % to.getRows() != 0)
    return emitOpError("expected a block of rows of ")
           << from << " keeping its columns, block_rows and swizzle, got "
           << to;
  return success();
}

/// tcgen05.mma into a TMEM accumulator: no result, M = 128, A from shared
/// memory (K-major) or from TMEM (f16/bf16 pairs, with B MN-major).
static LogicalResult verifyTcgen05Mma(MmaOp op, TmemType acc) {
  if (op.getResult())
    return op.emitOpError("a TMEM accumulator is updated in place: no result");
  if (!acc.getElementType().isF32())
    return op.emitOpError("the TMEM accumulator holds f32");
  SharedTileType b = op.getB().getType();
  if (b.isRowMajor())
    return op.emitOpError("tcgen05.mma reads column_blocks tiles");
  auto sharedA = dyn_cast<SharedTileType>(op.getA().getType());
  if (b.getSwizzle() != kMaxSwizzleBytes ||
      (sharedA && sharedA.getSwizzle() != kMaxSwizzleBytes))
    return op.emitOpError("tcgen05.mma reads 128-byte swizzled tiles");
  int64_t k;
  Type elt;
  if (auto a = dyn_cast<SharedTileType>(op.getA().getType())) {
    if (a.getRows() != acc.getLanes() || a.isRowMajor() || op.getMnMajor())
      return op.emitOpError("a shared-memory A is the K-major 128-row tile of "
                            "S = A B^T");
    k = a.getCols();
    elt = a.getElementType();
  } else if (auto a = dyn_cast<TmemType>(op.getA().getType())) {
    if (a.getElementType().isF32() || !op.getMnMajor())
      return op.emitOpError("a TMEM A holds f16/bf16 pairs (P of O += P V, "
                            "with B mn_major)");
    k = a.getCols();
    elt = a.getElementType();
  } else {
    return op.emitOpError("with a TMEM accumulator A must be a shared-memory "
                          "tile or a TMEM region");
  }
  if (elt != b.getElementType())
    return op.emitOpError("A and B element types differ");
  int64_t bk = op.getMnMajor() ? b.getRows() : b.getCols();
  int64_t bn = op.getMnMajor() ? b.getCols() : b.getRows();
  if (bk != k || bn != acc.getCols())
    return op.emitOpError("shapes do not multiply: A is 128 x ")
           << k << ", B gives " << bk << " x " << bn << ", accumulator 128 x "
           << acc.getCols();
  return success();
}

LogicalResult MmaOp::verify() {
  if (getAcc())
    if (auto tmem = dyn_cast<TmemType>(getAcc().getType()))
      return verifyTcgen05Mma(*this, tmem);
  if (getAccumulate())
    return emitOpError("accumulate(%flag) is for TMEM accumulators; a "
                       "fragment accumulator always adds");
  if (!getResult())
    return emitOpError("a fragment MMA returns its accumulator");
  auto result = getResult().getType();
  if (result.getLayout() != FragmentLayout::Accumulator)
    return emitOpError("result must be an accumulator fragment");
  if (getAcc() && getAcc().getType() != result)
    return emitOpError("accumulator and result types differ");
  SharedTileType b = getB().getType();
  int64_t m = result.getShape()[0], n = result.getShape()[1], k;
  // wgmma is m64; mma.sync (row_major tiles) takes two row tiles per warp.
  if (m != 64 && !b.isRowMajor())
    return emitOpError("a ") << m
                             << "-row result needs mma.sync (row_major tiles); "
                                "wgmma is 64 rows";
  Type elt;
  if (auto a = dyn_cast<SharedTileType>(getA().getType())) {
    if (a.getRows() != m)
      return emitOpError("A has ") << a.getRows() << " rows, the result " << m;
    if (a.isRowMajor() != b.isRowMajor())
      return emitOpError("A and B tiles must have the same layout (wgmma: "
                         "column_blocks, mma.sync: row_major)");
    k = a.getCols();
    elt = a.getElementType();
  } else if (auto a = dyn_cast<FragmentType>(getA().getType())) {
    if (a.getLayout() != FragmentLayout::OperandA)
      return emitOpError("a register A must be an operand_a fragment");
    if (a.getShape()[0] != m)
      return emitOpError("A has ")
             << a.getShape()[0] << " rows, the result " << m;
    k = a.getShape()[1];
    elt = a.getElementType();
  } else {
    return emitOpError("A must be a shared-memory tile or a fragment");
  }
  if (elt != b.getElementType())
    return emitOpError("A and B element types differ");
  // The 8-bit wgmma has no transpose: both operands K-major.
  if (isa<Float8E4M3FNType>(elt) && getMnMajor())
    return emitOpError("an e4m3 MMA reads B K-major (wgmma has no transpose "
                       "for 8-bit types): give V^T, not mn_major V");
  // An MN-major B's descriptor steps whole 128-byte rows of keys.
  if (getMnMajor() && b.getSwizzle() != kMaxSwizzleBytes)
    return emitOpError("an mn_major B is 128-byte swizzled");
  // K-major B is N x K (a * b^T); MN-major B is K x N.
  int64_t bk = getMnMajor() ? b.getRows() : b.getCols();
  int64_t bn = getMnMajor() ? b.getCols() : b.getRows();
  if (bk != k || bn != n)
    return emitOpError("shapes do not multiply: A is ")
           << m << " x " << k << ", B gives " << bk << " x " << bn
           << ", result 64 x " << n;
  return success();
}

LogicalResult SplatOp::verify() {
  if (getResult().getType().getRegisterType() != getValue().getType())
    return emitOpError("a splat fills f32 fragments");
  return success();
}

LogicalResult SoftmaxStepOp::verify() {
  auto s = getS().getType(), p = getP().getType();
  // Row per thread (TMEM lanes): P stays f32 until fagpu.tmem_store packs
  // it; otherwise P is the packed A fragment of the next MMA.
  bool lanes = s.getLayout() == FragmentLayout::Lanes;
  FragmentLayout rowLayout = lanes ? FragmentLayout::Lanes : FragmentLayout::Rows;
  if (s.getLayout() != FragmentLayout::Accumulator && !lanes)
    return emitOpError("scores must be an accumulator or lanes fragment");
  if (lanes && p != s)
    return emitOpError("P of lanes scores is the lanes fragment of their type");
  if (!lanes &&
      (p.getLayout() != FragmentLayout::OperandA || p.getShape() != s.getShape()))
    return emitOpError("P must be the operand_a fragment of the scores' shape");
  for (Type t : {getM().getType(), getL().getType(), getNewM().getType(),
                 getNewL().getType(), getAlpha().getType()})
    if (cast<FragmentType>(t).getLayout() != rowLayout ||
        cast<FragmentType>(t).getShape().size() != 1 ||
        cast<FragmentType>(t).getShape()[0] != s.getShape()[0])
      return emitOpError("m, l and alpha must be ")
             << (lanes ? "lanes" : "rows")
             << " fragments of the scores' rows";
  if (lanes && getO())
    return emitOpError("rescale(%o) scales a register accumulator; lanes "
                       "scores rescale O in TMEM with fagpu.rescale");
  bool fp8 = isa<Float8E4M3FNType>(p.getElementType());
  if (fp8 != bool(getProbsScale()))
    return emitOpError("an e4m3 P is scaled before its cast: probs_scale "
                       "present iff P is e4m3");
  if (auto scale = getProbsScale()) {
    double threshold =
        getRescaleThreshold() ? getRescaleThreshold()->convertToDouble() : 0.0;
    if (std::optional<std::string> why =
            fa::checkProbsScale(scale->convertToDouble(), std::max(threshold, 0.0)))
      return emitOpError(*why);
  }
  if (bool(getMoved()) != bool(getRescaleThreshold()))
    return emitOpError("the moved flag is the result of conditional "
                       "rescaling: present iff rescale_threshold is");
  if (bool(getO()) != bool(getNewO()))
    return emitOpError("rescale(%o) returns the scaled O: both or neither");
  if (getO()) {
    if (getRescaleThreshold())
      return emitOpError("rescale(%o) scales O unconditionally: with "
                         "conditional rescaling use fagpu.rescale .. if");
    auto o = cast<FragmentType>(getO().getType());
    if (o.getLayout() != FragmentLayout::Accumulator ||
        o.getShape()[0] != s.getShape()[0] || getNewO().getType() != o)
      return emitOpError("rescale(%o) takes and returns an accumulator of the "
                         "scores' rows");
  }
  if (getDiagonalShift() && !getCausal() && !getWindow())
    return emitOpError("a diagonal shift moves the causal or window mask: "
                       "give causal or a window");
  if (std::optional<int64_t> w = getWindow(); w && *w < 1)
    return emitOpError("window must be positive");
  if (std::optional<int64_t> d = getExp2PolyDegree(); d && (*d < 2 || *d > 5))
    return emitOpError("expected exp2_poly_degree in [2, 5]");
  if (getNoRowSum() && lanes)
    return emitOpError("no_row_sum leaves the sums to a register MMA; lanes "
                       "scores sum their own row");
  return success();
}

LogicalResult InitRowSumTileOp::verify() {
  SharedTileType tile = getTile().getType();
  // One 8-row group (wgmma's smallest N) of each column block.
  if (tile.getRows() != 8 || tile.getBlockRows() % 8 != 0 ||
      tile.isRowMajor())
    return emitOpError("expected an 8-row column_blocks tile (N = 8)");
  return success();
}

LogicalResult WidenTileOp::verify() {
  SharedTileType src = getSrc().getType(), dst = getDst().getType();
  if (!isa<Float8E4M3FNType>(src.getElementType()))
    return emitOpError("expected an e4m3 source tile, got ")
           << src.getElementType();
  if (!dst.getElementType().isF16() && !dst.getElementType().isBF16())
    return emitOpError("expected an f16 or bf16 destination tile, got ")
           << dst.getElementType();
  if (src.getShape() != dst.getShape())
    return emitOpError("expected tiles of one shape, got ")
           << src.getRows() << "x" << src.getCols() << " and " << dst.getRows()
           << "x" << dst.getCols();
  // Whole 128-byte swizzle lines on both sides: a piece of 8 columns is 8
  // bytes of a source line and 16 of a destination line.
  if (src.isRowMajor() || dst.isRowMajor() ||
      src.getSwizzle() != kMaxSwizzleBytes ||
      dst.getSwizzle() != kMaxSwizzleBytes ||
      src.getBlockRows() != src.getRows() ||
      dst.getBlockRows() != dst.getRows())
    return emitOpError("expected whole column_blocks tiles of the 128-byte "
                       "swizzle");
  if (src.getCols() % 128 != 0)
    return emitOpError("expected whole 128-column lines of e4m3, got ")
           << src.getCols() << " columns";
  return success();
}

LogicalResult RowPartialsOp::verify() {
  FragmentType acc = getAcc().getType(), rows = getResult().getType();
  if (acc.getLayout() != FragmentLayout::Accumulator ||
      acc.getShape().size() != 2 || rows.getLayout() != FragmentLayout::Rows ||
      rows.getShape().size() != 1 || rows.getShape()[0] != acc.getShape()[0])
    return emitOpError("expected an accumulator and the rows fragment of its "
                       "rows");
  return success();
}

LogicalResult RescaleOp::verify() {
  if (auto tmem = dyn_cast<TmemType>(getO().getType())) {
    if (getResult())
      return emitOpError("O in TMEM is rescaled in place: no result");
    if (!tmem.getElementType().isF32() || tmem.getCols() % 32 != 0 ||
        getAlpha().getType().getLayout() != FragmentLayout::Lanes ||
        getAlpha().getType().getShape().size() != 1)
      return emitOpError("expected an f32 TMEM region of whole 32-column "
                         "chunks scaled by a lanes fragment");
    return success();
  }
  auto o = dyn_cast<FragmentType>(getO().getType());
  if (!o || !getResult())
    return emitOpError("expected a fragment O and its scaled result, or O in "
                       "TMEM");
  if (o.getLayout() != FragmentLayout::Accumulator ||
      getAlpha().getType().getLayout() != FragmentLayout::Rows ||
      getAlpha().getType().getShape()[0] != o.getShape()[0] ||
      getResult().getType() != o)
    return emitOpError("expected an accumulator scaled by a rows fragment");
  return success();
}

LogicalResult ModifyScoresOp::verify() {
  FragmentType scores = getS().getType();
  if (scores.getLayout() != FragmentLayout::Accumulator &&
      !(scores.getLayout() == FragmentLayout::Lanes &&
        scores.getShape().size() == 2))
    return emitOpError("expected scores in the accumulator layout or a "
                       "thread's row of them (lanes, sm_100a)");
  if (std::optional<APFloat> cap = getSoftcap();
      cap && !(cap->convertToDouble() > 0))
    return emitOpError("softcap must be positive");
  // The captures' types are the regions' trailing tensor arguments.
  Region &region = getScoreMod().empty() ? getMaskMod() : getScoreMod();
  unsigned leading = getScoreMod().empty() ? 4 : 5;
  SmallVector<Type> captures;
  if (!region.empty() && region.getNumArguments() > leading)
    for (BlockArgument arg : region.getArguments().drop_front(leading))
      captures.push_back(arg.getType());
  if (captures.size() != getCaptures().size())
    return emitOpError() << "expected one pointer of captures(...) per "
                            "tensor argument of the regions, got "
                         << getCaptures().size() << " for " << captures.size();
  if (!captures.empty() && !getNq())
    return emitOpError("captures need within(%nq, %nk): the regions' "
                       "indices are clamped to the sequence");
  return verifyModificationRegions(*this, getScoreMod(), getMaskMod(),
                                   captures);
}

LogicalResult RowTileOp::verify() {
  FragmentType source = getSource().getType(), result = getResult().getType();
  if (source.getLayout() != result.getLayout() ||
      source.getElementType() != result.getElementType() ||
      source.getShape().size() != result.getShape().size() ||
      result.getShape()[0] != kRowsPerConsumer ||
      source.getShape().drop_front() != result.getShape().drop_front())
    return emitOpError("expected a 64-row tile of the source fragment, of its "
                       "layout, element type and columns");
  int64_t index = getIndex();
  if (index < 0 || index >= source.getRowTiles())
    return emitOpError("tile index ")
           << index << " is not one of the source's " << source.getRowTiles()
           << " 64-row tiles";
  return success();
}

/// A fragment of one value per row: `rows` (the quad's threads each hold
/// part of a row's value) or `lanes` (one thread per row).
static bool isRowValues(FragmentType type) {
  return type.getShape().size() == 1 &&
         (type.getLayout() == FragmentLayout::Rows ||
          type.getLayout() == FragmentLayout::Lanes);
}

LogicalResult RowTotalsOp::verify() {
  FragmentType l = getL().getType();
  if (!isRowValues(l))
    return emitOpError("expected the rows' l as a rows or lanes fragment");
  if (getDescale() && l.getLayout() != FragmentLayout::Rows)
    return emitOpError("descale belongs to the e4m3 kernels' rows fragments, "
                       "not to O in TMEM");
  return success();
}

LogicalResult StoreLseOp::verify() {
  FragmentType m = getM().getType();
  if (!isRowValues(m))
    return emitOpError("expected the rows' m and l as rows or lanes "
                       "fragments");
  if (std::optional<APFloat> s = getProbsScale()) {
    double scale = s->convertToDouble();
    int exponent;
    if (!(scale > 0) || std::frexp(scale, &exponent) != 0.5)
      return emitOpError("probs_scale must be a positive power of two, got ")
             << scale;
    if (m.getLayout() != FragmentLayout::Rows)
      return emitOpError("probs_scale belongs to the e4m3 kernels' rows "
                         "fragments, not to O in TMEM");
  }
  return success();
}

/// O's layout through a pointer: a strided O needs its heads (to split the
/// matrix into batch and head) and the three strides.
static LogicalResult verifyStridedOutput(Operation *op, Value heads,
                                         ValueRange strides) {
  if (heads && strides.size() != 3)
    return op->emitOpError("a strided O stored through a pointer needs its "
                           "batch, head and row strides, got ")
           << strides.size();
  return success();
}

/// `columns` of O stored in whole `multiple`-column pieces, at most the
/// tile's `tileColumns`.
static LogicalResult verifyOutputColumns(Operation *op,
                                         std::optional<int64_t> columns,
                                         int64_t multiple,
                                         int64_t tileColumns) {
  if (!columns)
    return success();
  if (*columns < multiple || *columns % multiple != 0 || *columns > tileColumns)
    return op->emitOpError("columns must be a multiple of ")
           << multiple << " in [" << multiple << ", " << tileColumns
           << "] (O's columns, at most the tile's), got " << *columns;
  return success();
}

LogicalResult OutputRowsOp::verify() {
  Type element = getOutElement();
  if (!element.isF16() && !element.isBF16() && !element.isF32())
    return emitOpError("O holds f16, bf16 or (split-KV partials) f32, got ")
           << element;
  if (getColumns() < 8 || getColumns() % 8 != 0)
    return emitOpError("columns must be a positive multiple of 8, got ")
           << getColumns();
  return verifyStridedOutput(*this, getHeads(), getStrides());
}

LogicalResult StoreRowsOp::verify() {
  FragmentType o = getO().getType(), factor = getFactor().getType();
  if (o.getLayout() != FragmentLayout::Accumulator ||
      factor.getLayout() != FragmentLayout::Rows ||
      factor.getShape().size() != 1)
    return emitOpError("expected the O accumulator and its rows' factors");
  if (factor.getShape()[0] != o.getShape()[0])
    return emitOpError("the factors must be those of O's rows");
  Type element = getOutElement();
  if (!element.isF16() && !element.isBF16() && !element.isF32())
    return emitOpError("O holds f16, bf16 or (split-KV partials) f32, got ")
           << element;
  // Whole quads' 8-column groups of the fragment.
  return verifyOutputColumns(*this, getColumns(), 8, o.getShape()[1]);
}

LogicalResult StoreTmemRowsOp::verify() {
  auto tmem = cast<TmemType>(getO().getType());
  FragmentType factor = getFactor().getType();
  if (factor.getLayout() != FragmentLayout::Lanes ||
      factor.getShape().size() != 1)
    return emitOpError("O in TMEM is stored with the lanes factors of its "
                       "rows");
  if (!tmem.getElementType().isF32() || tmem.getCols() % 32 != 0)
    return emitOpError("O in TMEM is f32 in whole 32-column chunks");
  if (!getOutElement().isF16() && !getOutElement().isBF16())
    return emitOpError("O in TMEM is stored as f16 or bf16");
  return success();
}

/// A staging tile: one warpgroup's 64 rows of 16-bit O.
static LogicalResult verifyStagingTile(Operation *op, Value staging) {
  auto tile = cast<SharedTileType>(staging.getType());
  if (tile.getRows() != kRowsPerConsumer)
    return op->emitOpError("a staging tile holds one warpgroup's 64 rows, "
                           "got ")
           << tile.getRows();
  if (tile.getElementType().getIntOrFloatBitWidth() != 16)
    return op->emitOpError("O is staged as f16 or bf16, got ")
           << tile.getElementType();
  return success();
}

LogicalResult StageOutputOp::verify() {
  FragmentType o = getO().getType(), factor = getFactor().getType();
  if (o.getLayout() != FragmentLayout::Accumulator ||
      factor.getLayout() != FragmentLayout::Rows ||
      factor.getShape().size() != 1 || factor.getShape()[0] != o.getShape()[0])
    return emitOpError("expected the O accumulator and its rows' factors");
  if (o.getRowTiles() != 1)
    return emitOpError("a staging tile holds one warpgroup's 64 rows");
  if (failed(verifyStagingTile(*this, getStaging())))
    return failure();
  if (cast<SharedTileType>(getStaging().getType()).getCols() != o.getShape()[1])
    return emitOpError("the staging tile must hold the warpgroup's 64 rows "
                       "of O");
  return success();
}

LogicalResult TmaStoreStagedOp::verify() {
  return verifyStagingTile(*this, getStaging());
}

LogicalResult CopyStagedRowsOp::verify() {
  if (failed(verifyStagingTile(*this, getStaging())))
    return failure();
  // 16-byte pieces, an even number a row: 128 threads cover 64 rows.
  if (failed(verifyOutputColumns(
          *this, getColumns(), 16,
          cast<SharedTileType>(getStaging().getType()).getCols())))
    return failure();
  return verifyStridedOutput(*this, getHeads(), getStrides());
}

LogicalResult MergeSplitsOp::verify() {
  Type element = getOutElement();
  if (!element.isF16() && !element.isBF16())
    return emitOpError("O holds f16 or bf16, got ") << element;
  int64_t d = getHeadDim();
  if (d < 32 || d > 256 || d % 32 != 0)
    return emitOpError("head_dim must be a multiple of 32 in [32, 256] (each "
                       "lane merges head_dim / 32 columns), got ")
           << d;
  if (getHeads() && getStrides().size() != 3)
    return emitOpError("a strided O needs its batch, head and row strides, "
                       "got ")
           << getStrides().size();
  return success();
}

//===----------------------------------------------------------------------===//
// Tile scheduler
//===----------------------------------------------------------------------===//

/// Checks that `pointer` (operand `name` of `op`) is in `space`: 1 for the
/// scheduler's counter, which every CTA shares; 3 for a CTA's tile slot.
static LogicalResult checkAddressSpace(Operation *op, StringRef name,
                                       Value pointer, unsigned space) {
  unsigned actual = cast<LLVM::LLVMPointerType>(pointer.getType())
                        .getAddressSpace();
  if (actual != space)
    return op->emitOpError("expected ")
           << name << " in address space " << space << " ("
           << (space == 1 ? "global" : "shared") << " memory), got "
           << actual;
  return success();
}

LogicalResult FetchTileOp::verify() {
  return checkAddressSpace(*this, "the tile counter", getCounter(), 1);
}

LogicalResult PublishTileOp::verify() {
  return checkAddressSpace(*this, "the tile slot", getSlot(), 3);
}

LogicalResult ReceiveTileOp::verify() {
  return checkAddressSpace(*this, "the tile slot", getSlot(), 3);
}

/// A named barrier's thread count: whole warps of a CTA (bar.sync,
/// bar.arrive).
static LogicalResult verifyBarrierThreads(Operation *op, int64_t threads) {
  if (threads >= 32 && threads <= 1024 && threads % 32 == 0)
    return success();
  return op->emitOpError() << "expected threads to be a positive multiple of "
                              "32 up to 1024 (whole warps), got "
                           << threads;
}

LogicalResult WaitTurnOp::verify() {
  return verifyBarrierThreads(*this, getThreadsAttr().getInt());
}

LogicalResult PassTurnOp::verify() {
  return verifyBarrierThreads(*this, getThreadsAttr().getInt());
}

LogicalResult MmaWaitOp::verify() {
  int64_t pending = getPendingAttr().getInt();
  if (pending < 0 || pending > 7)
    return emitOpError() << "expected pending in [0, 7], got " << pending;
  return success();
}

// Phase bits are an i32 of one bit per stage: the pipeline type's 8 stages
// at most fit.

LogicalResult PipelinePositionOp::verify() {
  auto type = llvm::cast<PipelineType>(getPipeline().getType());
  if (type.isCpAsync() && (getPhases() || getProducer()))
    return emitOpError("a cp.async (row_major) pipeline has no barriers: "
                       "its position is a stage alone");
  if (type.getFillOnce() && getProducer())
    return emitOpError("a fill_once pipeline has no empty barriers to "
                       "acquire a stage by");
  return success();
}

LogicalResult PipelineAdvancePhasesOp::verify() {
  if (llvm::cast<PipelineType>(getPipeline().getType()).isCpAsync())
    return emitOpError("a cp.async (row_major) pipeline has no barriers "
                       "and no phases");
  return success();
}
