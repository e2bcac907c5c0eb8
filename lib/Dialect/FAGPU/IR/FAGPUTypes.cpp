//===- FAGPUTypes.cpp - fragments, shared-memory tiles, pipelines ---------===//

#include "fa/Dialect/FAGPU/IR/FAGPU.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::fagpu;

#define GET_TYPEDEF_CLASSES
#include "fa/Dialect/FAGPU/IR/FAGPUTypes.cpp.inc"

void FAGPUDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "fa/Dialect/FAGPU/IR/FAGPUTypes.cpp.inc"
      >();
}

/// `64x128xf16`: a static shape and its element type.
static ParseResult parseShapedElement(AsmParser &parser,
                                        SmallVectorImpl<int64_t> &shape,
                                        Type &elementType) {
  if (parser.parseDimensionList(shape, /*allowDynamic=*/false) ||
      parser.parseType(elementType))
    return failure();
  return success();
}

static void printShapedElement(AsmPrinter &printer, ArrayRef<int64_t> shape,
                               Type elementType) {
  for (int64_t d : shape)
    printer << d << "x";
  printer << elementType;
}

//===----------------------------------------------------------------------===//
// FragmentType
//===----------------------------------------------------------------------===//

static constexpr int64_t kWarpgroupThreads = 128;

Type FragmentType::parse(AsmParser &parser) {
  SmallVector<int64_t> shape;
  Type elementType;
  StringRef word;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseLess() || parseShapedElement(parser, shape, elementType) ||
      parser.parseComma() || parser.parseKeyword(&word) ||
      parser.parseGreater())
    return {};
  std::optional<FragmentLayout> layout = symbolizeFragmentLayout(word);
  if (!layout) {
    parser.emitError(loc, "expected accumulator, operand_a, rows or lanes, got ")
        << word;
    return {};
  }
  return getChecked([&] { return parser.emitError(loc); },
                    parser.getContext(), shape, elementType, *layout);
}

void FragmentType::print(AsmPrinter &printer) const {
  printer << "<";
  printShapedElement(printer, getShape(), getElementType());
  printer << ", " << stringifyFragmentLayout(getLayout()) << ">";
}

LogicalResult
FragmentType::verify(function_ref<InFlightDiagnostic()> emitError,
                     ArrayRef<int64_t> shape, Type elementType,
                     FragmentLayout layout) {
  // One warpgroup: 64 rows, 16 per warp, in the m16n8 quad layout; 128
  // rows give each warp two such row tiles (mma.sync).
  if (shape.empty() || (shape[0] != 64 && shape[0] != 128))
    return emitError() << "a warpgroup fragment has 64 rows (128: two row "
                          "tiles per warp)";
  // A thread holds rows x columns / 128 of it, in registers: past 512
  // columns no kernel could.
  if (shape.size() == 2 && shape[1] > 512)
    return emitError() << "a warpgroup fragment has at most 512 columns, got "
                       << shape[1];
  switch (layout) {
  case FragmentLayout::Lanes:
    // tcgen05.ld 32x32b: thread t of the warpgroup reads TMEM lane t.
    if (shape[0] != 128 || shape.size() > 2 || !elementType.isF32() ||
        (shape.size() == 2 && shape[1] <= 0))
      return emitError() << "a lanes fragment is 128xNxf32 or 128xf32 (a row "
                            "a thread)";
    return success();
  case FragmentLayout::Accumulator:
  case FragmentLayout::OperandA: {
    // An accumulator is whole n8 tiles (wgmma's N steps by 8: the e4m3
    // row sums are 64 x 8); an A fragment whole 16-column k-steps.
    int64_t step = layout == FragmentLayout::Accumulator ? 8 : 16;
    if (shape.size() != 2 || shape[1] <= 0 || shape[1] % step != 0)
      return emitError() << "expected 64 x N with N a positive multiple of "
                         << step;
    if (layout == FragmentLayout::Accumulator && !elementType.isF32())
      return emitError() << "an accumulator fragment holds f32";
    if (layout == FragmentLayout::OperandA) {
      // e4m3: the A fragment of the k = 32 MMA, four keys per register.
      bool fp8 = isa<Float8E4M3FNType>(elementType);
      if (!elementType.isF16() && !elementType.isBF16() && !fp8)
        return emitError() << "an operand_a fragment holds f16, bf16 or e4m3";
      if (fp8 && (shape[0] != 64 || shape[1] % 32 != 0))
        return emitError() << "an e4m3 operand_a fragment is 64 x N with N a "
                              "multiple of 32 (the e4m3 wgmma's k)";
    }
    return success();
  }
  case FragmentLayout::Rows:
    if (shape.size() != 1 || !elementType.isF32())
      return emitError() << "a rows fragment is 64xf32 or 128xf32";
    return success();
  }
  return success();
}

int64_t FragmentType::getRegisters() const {
  int64_t elements = 1;
  for (int64_t d : getShape())
    elements *= d;
  switch (getLayout()) {
  case FragmentLayout::Accumulator:
    return elements / kWarpgroupThreads;
  case FragmentLayout::OperandA:
    // 16-bit pairs, or e4m3 quads, in 32-bit registers.
    return elements * getElementType().getIntOrFloatBitWidth() /
           (32 * kWarpgroupThreads);
  case FragmentLayout::Rows:
    return elements / 32; // rows g and g + 8 of each warp's 16
  case FragmentLayout::Lanes:
    return elements / kWarpgroupThreads; // the thread's own row
  }
  return 0;
}

Type FragmentType::getRegisterType() const {
  MLIRContext *ctx = getContext();
  if (getLayout() == FragmentLayout::OperandA)
    return IntegerType::get(ctx, 32);
  return Float32Type::get(ctx);
}

//===----------------------------------------------------------------------===//
// SharedTileType
//===----------------------------------------------------------------------===//

Type SharedTileType::parse(AsmParser &parser) {
  SmallVector<int64_t> shape;
  Type elementType;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseLess() || parseShapedElement(parser, shape, elementType))
    return {};
  int64_t blockRows = shape.empty() ? 0 : shape[0];
  int64_t swizzle = kMaxSwizzleBytes;
  TileLayout layout = TileLayout::ColumnBlocks;
  while (succeeded(parser.parseOptionalComma())) {
    if (succeeded(parser.parseOptionalKeyword("row_major"))) {
      layout = TileLayout::RowMajor;
      continue;
    }
    if (succeeded(parser.parseOptionalKeyword("swizzle"))) {
      if (parser.parseEqual() || parser.parseInteger(swizzle))
        return {};
      continue;
    }
    if (parser.parseKeyword("block_rows") || parser.parseEqual() ||
        parser.parseInteger(blockRows))
      return {};
  }
  if (parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(loc); }, parser.getContext(),
                    shape, elementType, blockRows, layout, swizzle);
}

void SharedTileType::print(AsmPrinter &printer) const {
  printer << "<";
  printShapedElement(printer, getShape(), getElementType());
  if (getBlockRows() != getRows())
    printer << ", block_rows = " << getBlockRows();
  if (isRowMajor())
    printer << ", row_major";
  if (getSwizzle() != kMaxSwizzleBytes)
    printer << ", swizzle = " << getSwizzle();
  printer << ">";
}

LogicalResult
SharedTileType::verify(function_ref<InFlightDiagnostic()> emitError,
                       ArrayRef<int64_t> shape, Type elementType,
                       int64_t blockRows, TileLayout layout, int64_t swizzle) {
  bool fp8 = isa<Float8E4M3FNType>(elementType);
  if (!elementType.isF16() && !elementType.isBF16() && !fp8)
    return emitError() << "a swizzled tile holds f16, bf16 or e4m3";
  if (fp8 && layout == TileLayout::RowMajor)
    return emitError() << "an e4m3 tile is read by wgmma only: column blocks";
  // The TMA's and wgmma's swizzle modes: 128, 64 or 32-byte rows.
  if (swizzle != 128 && swizzle != 64 && swizzle != 32)
    return emitError() << "swizzle must be 128, 64 or 32 (bytes), got "
                       << swizzle;
  if (layout == TileLayout::RowMajor && swizzle != kMaxSwizzleBytes)
    return emitError() << "a row_major tile swizzles 16-byte chunks within "
                          "128 bytes: no swizzle width";
  // A column block is `swizzle` bytes of a row: at 128 bytes 64 16-bit or
  // 128 e4m3 elements.
  int64_t blockCols = swizzle * 8 / elementType.getIntOrFloatBitWidth();
  if (shape.size() != 2 || shape[0] <= 0 || shape[0] % 8 != 0 ||
      shape[1] <= 0 || shape[1] % blockCols != 0)
    return emitError() << "expected R x C with R a multiple of 8 (the swizzle "
                          "atom) and C of "
                       << blockCols << " (a " << swizzle
                       << "-byte column block)";
  if (blockRows < shape[0] || blockRows % shape[0] != 0)
    return emitError() << "block_rows (" << blockRows
                       << ") must be a multiple of the rows (" << shape[0]
                       << ")";
  // Row-major rows are contiguous: a block of rows is just rows further.
  if (layout == TileLayout::RowMajor && blockRows != shape[0])
    return emitError() << "a row_major tile has no column blocks: block_rows "
                          "must equal the rows";
  return success();
}

//===----------------------------------------------------------------------===//
// PipelineType
//===----------------------------------------------------------------------===//

Type PipelineType::parse(AsmParser &parser) {
  int64_t stages = 0, buffers = 0;
  SmallVector<int64_t> shape;
  Type elementType;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseLess() || parser.parseKeyword("stages") ||
      parser.parseEqual() || parser.parseInteger(stages) ||
      parser.parseComma() || parser.parseKeyword("buffers") ||
      parser.parseEqual() || parser.parseInteger(buffers) ||
      parser.parseComma() || parseShapedElement(parser, shape, elementType))
    return {};
  TileLayout layout = TileLayout::ColumnBlocks;
  bool fillOnce = false;
  SmallVector<int64_t> secondShape;
  Type secondElement;
  // `swizzle = N` after a tile's shape is that tile's.
  int64_t swizzle = kMaxSwizzleBytes, secondSwizzle = kMaxSwizzleBytes;
  while (succeeded(parser.parseOptionalComma())) {
    if (succeeded(parser.parseOptionalKeyword("fill_once"))) {
      fillOnce = true;
      continue;
    }
    if (succeeded(parser.parseOptionalKeyword("row_major"))) {
      layout = TileLayout::RowMajor;
      continue;
    }
    if (succeeded(parser.parseOptionalKeyword("swizzle"))) {
      if (parser.parseEqual() ||
          parser.parseInteger(secondShape.empty() ? swizzle : secondSwizzle))
        return {};
      continue;
    }
    // Buffer 1's own tile type.
    if (!secondShape.empty() ||
        parseShapedElement(parser, secondShape, secondElement))
      return {};
  }
  if (parser.parseGreater())
    return {};
  auto emitError = [&] { return parser.emitError(loc); };
  auto tile = SharedTileType::getChecked(
      emitError, parser.getContext(), shape, elementType,
      shape.empty() ? 0 : shape[0], layout, swizzle);
  if (!tile)
    return {};
  SharedTileType second;
  if (!secondShape.empty() &&
      !(second = SharedTileType::getChecked(
            emitError, parser.getContext(), secondShape, secondElement,
            secondShape[0], layout, secondSwizzle)))
    return {};
  return getChecked(emitError, parser.getContext(), stages, buffers, tile,
                    fillOnce, second);
}

void PipelineType::print(AsmPrinter &printer) const {
  printer << "<stages = " << getStages() << ", buffers = " << getBuffers()
          << ", ";
  auto printTile = [&](SharedTileType tile) {
    printShapedElement(printer, tile.getShape(), tile.getElementType());
    if (tile.getSwizzle() != kMaxSwizzleBytes)
      printer << ", swizzle = " << tile.getSwizzle();
  };
  printTile(getTile());
  if (SharedTileType second = getSecondTile()) {
    printer << ", ";
    printTile(second);
  }
  if (getTile().isRowMajor())
    printer << ", row_major";
  if (getFillOnce())
    printer << ", fill_once";
  printer << ">";
}

LogicalResult
PipelineType::verify(function_ref<InFlightDiagnostic()> emitError,
                     int64_t stages, int64_t buffers, SharedTileType tile,
                     bool fillOnce, SharedTileType second) {
  if (fillOnce && tile.isRowMajor())
    return emitError() << "a fill_once pipeline is filled by TMA: its tiles "
                          "cannot be row_major";
  if (stages < 1 || stages > 8)
    return emitError() << "expected 1 to 8 stages, got " << stages;
  if (buffers < 1 || buffers > 2)
    return emitError() << "expected 1 or 2 buffers per stage, got " << buffers;
  if (tile.getBlockRows() != tile.getRows())
    return emitError() << "a pipeline holds whole tiles";
  if (second) {
    // Both buffers of a stage hold the same bytes: the stage stride stays
    // buffers * bytes.
    if (buffers != 2 || second == tile)
      return emitError() << "a second tile type is buffer 1's, of a pipeline "
                            "of 2 buffers, and differs from buffer 0's";
    if (second.getElementType() != tile.getElementType() ||
        second.getBytes() != tile.getBytes() || second.isRowMajor() ||
        second.getBlockRows() != second.getRows())
      return emitError() << "buffer 1's tile must be whole, of buffer 0's "
                            "element type and bytes, got "
                         << second << " beside " << tile;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// TmemType
//===----------------------------------------------------------------------===//

/// Lanes and 32-bit columns of an SM's tensor memory.
static constexpr int64_t kTmemLanes = 128, kTmemColumns = 512;

Type TmemType::parse(AsmParser &parser) {
  SmallVector<int64_t> shape;
  Type elementType;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseLess() || parseShapedElement(parser, shape, elementType) ||
      parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(loc); }, parser.getContext(),
                    shape, elementType);
}

void TmemType::print(AsmPrinter &printer) const {
  printer << "<";
  printShapedElement(printer, getShape(), getElementType());
  printer << ">";
}

LogicalResult TmemType::verify(function_ref<InFlightDiagnostic()> emitError,
                               ArrayRef<int64_t> shape, Type elementType) {
  if (shape.size() != 2 || shape[0] != kTmemLanes || shape[1] <= 0)
    return emitError() << "expected 128 x N: a region spans all 128 TMEM "
                          "lanes";
  if (!elementType.isF32() && !elementType.isF16() && !elementType.isBF16())
    return emitError() << "TMEM holds f32 accumulators or f16/bf16 pairs";
  int64_t bits = elementType.getIntOrFloatBitWidth();
  if (shape[1] > kTmemColumns * 32 / bits || shape[1] * bits % 32 != 0)
    return emitError() << "a region spans whole 32-bit columns, at most "
                       << kTmemColumns;
  return success();
}

LogicalResult
BarriersType::verify(function_ref<InFlightDiagnostic()> emitError,
                     int64_t count) {
  if (count < 1)
    return emitError() << "expected at least one barrier, got " << count;
  return success();
}
