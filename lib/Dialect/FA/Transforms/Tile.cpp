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
#include "fa/Dialect/FAGPU/IR/Heuristics.h"

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
    if (!target.empty()) {
      std::optional<fagpu::Target> gpu = fagpu::symbolizeTarget(target);
      if (!gpu) {
        emitError(getOperation().getLoc())
            << "fa-tile: target must be sm_80, sm_90a or sm_100a, got '"
            << target << "'";
        return signalPassFailure();
      }
      WalkResult result = getOperation().walk([&](AttentionOp op) {
        return succeeded(tileForTarget(op, *gpu)) ? WalkResult::advance()
                                                  : WalkResult::interrupt();
      });
      if (result.wasInterrupted())
        signalPassFailure();
      return;
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

  /// The GPU kernel's tiles: the op's, else the options, else the table.
  LogicalResult tileForTarget(AttentionOp op, fagpu::Target gpu) {
    // The kernels take base pointers and tensor maps of packed rows: refuse
    // other layouts here, before the loop nest takes views of them.
    static constexpr StringLiteral kOperands[] = {"Q", "K", "V", "O", "LSE"};
    for (auto [name, operand] : llvm::zip(kOperands, op->getOperands())) {
      auto type = dyn_cast<MemRefType>(operand.getType());
      if (type && !type.getLayout().isIdentity())
        return op.emitOpError()
               << "fa-tile: " << fagpu::targetName(gpu) << ": " << name
               << " must be a contiguous memref (identity layout), got "
               << type << "; copy strided views into contiguous buffers "
               << "first";
    }
    if (op.isVarlen() && gpu != fagpu::Target::sm_90a)
      return op.emitOpError()
             << "fa-tile: " << fagpu::targetName(gpu)
             << ": varlen batches have a GPU kernel on sm_90a only (and run "
                "on the CPU path)";
    if ((op.getKvLengths() || op.isPaged()) && gpu != fagpu::Target::sm_90a)
      return op.emitOpError()
             << "fa-tile: " << fagpu::targetName(gpu)
             << ": per-sequence key lengths and paged K/V have a GPU kernel "
                "on sm_90a only (and run on the CPU path)";
    if (op.hasFP8KeyValues() && gpu != fagpu::Target::sm_90a)
      return op.emitOpError()
             << "fa-tile: " << fagpu::targetName(gpu)
             << ": an e4m3 K/V beside a "
             << op.getQueryType().getElementType()
             << " query has a kernel on sm_90a only (the CPU path runs "
                "it: fa-run --kv-dtype e4m3)";
    std::string elt;
    llvm::raw_string_ostream(elt) << op.getQueryType().getElementType();
    // sm_90a tiles e4m3 for its fagpu level (fa-map-to-gpu), where
    // fagpu-build-kernels refuses it until the e4m3 kernel exists.
    bool fp8 = op.isFP8();
    if (gpu != fagpu::Target::sm_90a)
      if (std::optional<std::string> why =
              checkTargetElementType(fagpu::targetName(gpu), elt))
        return op.emitOpError() << "fa-tile: " << *why;
    int64_t d = op.getHeadDim();
    const fagpu::KernelDefaults *row =
        fagpu::defaultsFor(gpu, d, op.getCausal());
    int64_t br = op.getBlockR().value_or(blockR);
    // An e4m3 cache beside a 16-bit Q (sm_90a): its kernel's tiles.
    bool widens = gpu == fagpu::Target::sm_90a && op.hasFP8KeyValues();
    if (br == 0 && widens)
      br = fagpu::kWideningBlockR;
    if (br == 0 && row && op.getKvSplits())
      br = fagpu::splitKVDefaults(gpu, d, op.getCausal()).blockR;
    if (br == 0) {
      if (!row)
        return op.emitOpError()
               << "fa-tile: no " << fagpu::targetName(gpu)
               << " kernel for head dim " << d << " (the table has 64, 128"
               << (gpu == fagpu::Target::sm_90a
                       ? ", 192 and 256, and multiples of 32 up to 256 on "
                         "their tiles"
                       : " and 256")
               << "); give block-r and block-c to tile it anyway";
      br = row->blockR;
    }
    int64_t bc = op.getBlockC().value_or(blockC);
    bool explicitBlockC = bc != 0;
    if (bc == 0)
      bc = fp8      ? fagpu::fp8DefaultBlockC(d)
           : widens ? fagpu::kWideningBlockC
                    : fagpu::defaultBlockC(gpu, d, op.getCausal(), br);
    // A paged cache: a K/V block lies in one page (one TMA box) or spans
    // whole pages (one box each, gathered into the block's tile); B_c stays
    // a multiple of the MMA's k = 16, and so does the page.
    if (op.isPaged()) {
      int64_t pageSize = op.getPageSize();
      if (pageSize % 16 != 0)
        return op.emitOpError()
               << "fa-tile: " << fagpu::targetName(gpu)
               << ": the page size must be a multiple of 16 rows (the K/V "
                  "blocks are whole MMA steps of whole pages), got "
               << pageSize;
      if (pageSize % bc != 0 && bc % pageSize != 0) {
        if (explicitBlockC)
          return op.emitOpError()
                 << "fa-tile: block_c=" << bc << " and the page size "
                 << pageSize
                 << " do not divide one another: a K/V block must lie in "
                    "one page or span whole pages";
        while (pageSize % bc != 0 || bc % 16 != 0)
          --bc;
      }
    }
    Builder b(op.getContext());
    op.setBlockRAttr(b.getI64IntegerAttr(br));
    op.setBlockCAttr(b.getI64IntegerAttr(bc));
    return success();
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
