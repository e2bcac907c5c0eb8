//===- Tile.cpp - choose FlashAttention tile sizes ------------------------===//
//
// FlashAttention-1 (Dao et al. 2022, Algorithm 1) sizes its blocks from the
// on-chip memory M: B_c = ceil(M / 4d) so that K_j and V_j take about half of
// it, and B_r = min(ceil(M / 4d), d) so that the score tile B_r x B_c stays
// O(M) while Q_i and O_i stay O(M) too.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/IR/Validation.h"
#include "fa/Dialect/FA/Transforms/Passes.h"

namespace mlir::fa {
#define GEN_PASS_DEF_FATILE
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

constexpr int64_t kDefaultSramBudget = 163840;

/// ceil(a / b) for a >= 0, b > 0, without the overflow of (a + b - 1) / b
/// when a is near INT64_MAX (a huge sram-budget).
int64_t ceilDiv(int64_t a, int64_t b) { return a / b + (a % b != 0); }

/// The most pages a CPU K/V block spans: the loop order copies each page of
/// a block separately (unrolled), so a huge SRAM budget must not turn one
/// block into thousands of copies.
constexpr int64_t kMaxPagesPerBlock = 16;

/// Bytes one block step keeps on chip: Q_i, K_j, V_j in the input type;
/// S_ij, O_i and the row vectors m, l, alpha in f32. With tiles of at most
/// kMaxTileSize rows and head dims of at most kMaxHeadDim (the verifier's
/// ranges) this stays below 2^43: no overflow.
int64_t tileFootprint(int64_t br, int64_t bc, int64_t d, int64_t dv,
                      int64_t eltBytes) {
  return eltBytes * (br * d + bc * d + bc * dv) +
         4 * (br * bc + br * dv + 3 * br);
}

struct FATilePass : fa::impl::FATileBase<FATilePass> {
  using FATileBase::FATileBase;

  void runOnOperation() override {
    if (blockR < 0 || blockC < 0 || sramBudget < 0) {
      emitError(getOperation().getLoc())
          << "fa-tile: block-r, block-c and sram-budget must be "
             "non-negative, got block-r="
          << static_cast<int64_t>(blockR)
          << " block-c=" << static_cast<int64_t>(blockC)
          << " sram-budget=" << static_cast<int64_t>(sramBudget);
      return signalPassFailure();
    }
    for (auto [name, rows] : {std::pair<StringRef, int64_t>{"block-r", blockR},
                              {"block-c", blockC}}) {
      if (rows == 0)
        continue;
      if (std::optional<std::string> error = checkTileSize(name, rows)) {
        emitError(getOperation().getLoc()) << "fa-tile: " << *error;
        return signalPassFailure();
      }
    }
    int64_t budget = sramBudget;
    if (budget == 0) {
      budget = kDefaultSramBudget;
      if (auto module = getOperation()->getParentOfType<ModuleOp>())
        if (auto attr =
                module->getAttrOfType<IntegerAttr>("fa.sram_budget"))
          budget = attr.getInt();
    }
    if (budget <= 0) {
      emitError(getOperation().getLoc())
          << "fa-tile: the SRAM budget must be positive, got " << budget;
      return signalPassFailure();
    }

    WalkResult result = getOperation().walk([&](AttentionOp op) {
      return succeeded(tile(op, budget)) ? WalkResult::advance()
                                         : WalkResult::interrupt();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }

  LogicalResult tile(AttentionOp op, int64_t budget) {
    int64_t d = op.getHeadDim(), dv = op.getValueHeadDim();
    // The verifier guarantees these; the rule below divides by 4 D.
    for (auto [name, dim] : {std::pair<StringRef, int64_t>{"head dim D", d},
                             {"value head dim Dv", dv}})
      if (std::optional<std::string> error = checkHeadDim(name, dim))
        return op.emitOpError() << "fa-tile: " << *error;
    int64_t eltBytes =
        op.getQueryType().getElementType().getIntOrFloatBitWidth() / 8;
    int64_t nq = op.getQueryType().getDimSize(2);
    int64_t nk = op.getKeyType().getDimSize(2);

    int64_t br = blockR, bc = blockC;
    bool explicitTiles = br != 0 || bc != 0;
    int64_t m = budget / eltBytes; // M in elements of the input type
    int64_t ruleC =
        std::clamp<int64_t>(ceilDiv(m, 4 * d), 1, kMaxTileSize);
    if (bc == 0)
      bc = ruleC;
    if (br == 0)
      br = std::min(ruleC, d);
    // Tiles never need to exceed the (static) sequence lengths.
    if (!ShapedType::isDynamic(nq) && nq > 0)
      br = std::min(br, nq);
    // (A paged cache's dim 2 is its page size, not a sequence's length: a
    // block spans at most a sequence's static capacity, its table row of
    // pages, and at most kMaxPagesPerBlock pages, each a copy the CPU nest
    // writes out.)
    if (!ShapedType::isDynamic(nk) && nk > 0 && !op.isPaged())
      bc = std::min(bc, nk);
    if (op.isPaged()) {
      int64_t pages =
          cast<ShapedType>(op.getBlockTable().getType()).getDimSize(1);
      int64_t maxPages = ShapedType::isDynamic(pages)
                             ? kMaxPagesPerBlock
                             : std::clamp<int64_t>(pages, 1, kMaxPagesPerBlock);
      bc = std::min(bc, maxPages * nk);
    }

    if (explicitTiles) {
      int64_t bytes = tileFootprint(br, bc, d, dv, eltBytes);
      if (bytes > budget)
        return op.emitOpError()
               << "tiles block_r=" << br << " block_c=" << bc
               << " need " << bytes << " bytes on chip (D=" << d
               << ", Dv=" << dv << ", " << eltBytes
               << "-byte inputs) but the SRAM budget is " << budget
               << " bytes";
    } else {
      // The FA1 rule is asymptotic; halve B_c, then B_r, until the exact
      // footprint fits.
      while (tileFootprint(br, bc, d, dv, eltBytes) > budget &&
             (bc > 1 || br > 1)) {
        if (bc >= br && bc > 1)
          bc = ceilDiv(bc, 2);
        else
          br = ceilDiv(br, 2);
      }
      if (tileFootprint(br, bc, d, dv, eltBytes) > budget)
        return op.emitOpError()
               << "no tile fits the SRAM budget of " << budget
               << " bytes for D=" << d << ", Dv=" << dv;
    }
    // A paged cache: a K/V block lies in one page or spans whole pages (nk
    // above is the page size).
    if (op.isPaged() && nk % bc != 0 && bc % nk != 0) {
      if (explicitTiles)
        return op.emitOpError()
               << "block_c=" << bc << " and the page size " << nk
               << " do not divide one another: a K/V block must lie in one "
                  "page or span whole pages";
      while (nk % bc != 0)
        --bc;
    }
    Builder b(op.getContext());
    op.setBlockRAttr(b.getI64IntegerAttr(br));
    op.setBlockCAttr(b.getI64IntegerAttr(bc));
    return success();
  }
};

} // namespace
