//===- BlockQuantize.cpp - one e4m3 descale per tile of Q and K -----------===//
//
// FlashAttention-3's block quantisation: Q and K quantised per block of
// B_r / B_c rows (the tiles), so a block without large values keeps a fine
// e4m3 step, and a score tile's descale is one scalar.
//
//===----------------------------------------------------------------------===//

#include "Quantization.h"

#include "fa/Dialect/FA/Transforms/Passes.h"

namespace mlir::fa {
#define GEN_PASS_DEF_FABLOCKQUANTIZE
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

struct FABlockQuantizePass
    : fa::impl::FABlockQuantizeBase<FABlockQuantizePass> {
  void runOnOperation() override {
    if (failed(
            forEachAttention(getOperation(), /*fp8=*/true, [&](AttentionOp op) {
              return blockQuantize(op);
            })))
      signalPassFailure();
  }

  LogicalResult blockQuantize(AttentionOp op) {
    if (!op.getBlockR() || !op.getBlockC())
      return op.emitOpError("has no tile sizes; fa-block-quantize makes the "
                            "quantisation blocks the tiles (run fa-tile "
                            "first)");
    QuantizeOp q = quantizeWriting(op.getQuery(), op);
    QuantizeOp k = quantizeWriting(op.getKey(), op);
    if (!q || !k)
      return op.emitOpError(
          "has e4m3 Q or K not made by fa.quantize here; fa-block-quantize "
          "changes how they are quantised (run fa-quantize-fp8 first)");
    // V stays per tensor: its quantisation must be its own.
    QuantizeOp v = quantizeWriting(op.getValue(), op);
    if (v && (v == q || v == k))
      return op.emitOpError("quantises V with the fa.quantize of Q or K; "
                            "fa-block-quantize keeps V per tensor (quantise "
                            "it separately)");
    OpBuilder b(op);
    Location loc = op.getLoc();
    std::pair<QuantizeOp, int64_t> sides[] = {{q, *op.getBlockR()},
                                              {k, *op.getBlockC()}};
    for (auto [index, side] : llvm::enumerate(sides)) {
      auto [quantize, tile] = side;
      if (std::optional<int64_t> block = quantize.getBlock()) {
        // Already per block: Q and K made by one fa.quantize.
        if (*block != tile)
          return op.emitOpError()
                 << "quantises Q and K with one fa.quantize, whose blocks of "
                 << *block
                 << " rows cannot be both tiles (block_r = " << *op.getBlockR()
                 << ", block_c = " << *op.getBlockC() << ")";
        op.getDescalesMutable()[index].set(quantize.getDescale());
        continue;
      }
      Value oldDescale = quantize.getDescale();
      if (op.getDescales()[index] != oldDescale)
        return op.emitOpError("reads descales its fa.quantize does not write");
      // [B, H, ceil(N / tile)] next to the quantisation.
      b.setInsertionPoint(quantize);
      Value input = quantize.getInput();
      auto type = cast<MemRefType>(input.getType());
      int64_t n = type.getDimSize(2);
      int64_t blocks = ShapedType::isDynamic(n) ? ShapedType::kDynamic
                                                : (n + tile - 1) / tile;
      SmallVector<Value> sizes;
      for (int64_t dim = 0; dim < 2; ++dim)
        if (type.isDynamicDim(dim))
          sizes.push_back(memref::DimOp::create(b, loc, input, dim));
      if (ShapedType::isDynamic(blocks))
        sizes.push_back(arith::CeilDivUIOp::create(
            b, loc, memref::DimOp::create(b, loc, input, 2),
            arith::ConstantIndexOp::create(b, loc, tile)));
      Value descale = memref::AllocOp::create(
          b, loc,
          MemRefType::get({type.getDimSize(0), type.getDimSize(1), blocks},
                          b.getF32Type()),
          sizes);
      quantize.getDescaleMutable().set(descale);
      quantize.setBlockAttr(b.getI64IntegerAttr(tile));
      op.getDescalesMutable()[index].set(descale);
      b.setInsertionPointAfter(op);
      memref::DeallocOp::create(b, loc, descale);
      // The per-tensor descale is now unused but for its alloc and dealloc.
      if (llvm::all_of(oldDescale.getUsers(), [](Operation *user) {
            return isa<memref::DeallocOp>(user);
          }))
        if (Operation *alloc = oldDescale.getDefiningOp<memref::AllocOp>()) {
          for (Operation *user :
               llvm::make_early_inc_range(oldDescale.getUsers()))
            user->erase();
          alloc->erase();
        }
    }
    return success();
  }
};

} // namespace
