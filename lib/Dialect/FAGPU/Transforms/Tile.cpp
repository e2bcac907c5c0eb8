//===- Tile.cpp - a GPU target's kernel tiles for each fa.attention ------===//
//
// The tile level is target-free (fa-tile: FlashAttention-1's rule on an
// SRAM budget); the GPU path's tiles are the kernel's, chosen here from the
// target's measured defaults (Heuristics.h) and checked against what its
// kernels take.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FAGPU/Transforms/Passes.h"

#include "fa/Dialect/FA/IR/FAOps.h"
#include "fa/Dialect/FA/IR/Validation.h"
#include "fa/Dialect/FAGPU/IR/Heuristics.h"

namespace mlir::fagpu {
#define GEN_PASS_DEF_FAGPUTILE
#include "fa/Dialect/FAGPU/Transforms/Passes.h.inc"
} // namespace mlir::fagpu

using namespace mlir;
using namespace mlir::fagpu;

namespace {

struct FAGPUTilePass : fagpu::impl::FAGPUTileBase<FAGPUTilePass> {
  using Base::Base;

  void runOnOperation() override {
    for (auto [name, rows] : {std::pair<StringRef, int64_t>{"block-r", blockR},
                              {"block-c", blockC}}) {
      if (rows == 0)
        continue;
      if (std::optional<std::string> error = fa::checkTileSize(name, rows)) {
        emitError(getOperation().getLoc()) << "fagpu-tile: " << *error;
        return signalPassFailure();
      }
    }
    std::optional<Target> gpu = symbolizeTarget(target);
    if (!gpu) {
      emitError(getOperation().getLoc())
          << "fagpu-tile: target must be sm_80, sm_90a or sm_100a, got '"
          << target << "'";
      return signalPassFailure();
    }
    WalkResult result = getOperation().walk([&](fa::AttentionOp op) {
      return succeeded(tileForTarget(op, *gpu)) ? WalkResult::advance()
                                                : WalkResult::interrupt();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }

  /// The GPU kernel's tiles: the op's, else the options, else the table.
  LogicalResult tileForTarget(fa::AttentionOp op, Target gpu) {
    // The kernels take base pointers and tensor maps of packed rows: refuse
    // other layouts here, before the loop nest takes views of them.
    static constexpr StringLiteral kOperands[] = {"Q", "K", "V", "O", "LSE"};
    for (auto [name, operand] : llvm::zip(kOperands, op->getOperands())) {
      auto type = dyn_cast<MemRefType>(operand.getType());
      if (type && !type.getLayout().isIdentity())
        return op.emitOpError()
               << "fagpu-tile: " << targetName(gpu) << ": " << name
               << " must be a contiguous memref (identity layout), got "
               << type << "; copy strided views into contiguous buffers "
               << "first";
    }
    if (op.isVarlen() && gpu != Target::sm_90a)
      return op.emitOpError()
             << "fagpu-tile: " << targetName(gpu)
             << ": varlen batches have a GPU kernel on sm_90a only (and run "
                "on the CPU path)";
    if ((op.getKvLengths() || op.isPaged()) && gpu != Target::sm_90a)
      return op.emitOpError()
             << "fagpu-tile: " << targetName(gpu)
             << ": per-sequence key lengths and paged K/V have a GPU kernel "
                "on sm_90a only (and run on the CPU path)";
    if (op.hasFP8KeyValues() && gpu != Target::sm_90a)
      return op.emitOpError()
             << "fagpu-tile: " << targetName(gpu)
             << ": an e4m3 K/V beside a "
             << op.getQueryType().getElementType()
             << " query has a kernel on sm_90a only (the CPU path runs "
                "it: fa-run --kv-dtype e4m3)";
    std::string elt;
    llvm::raw_string_ostream(elt) << op.getQueryType().getElementType();
    // sm_90a tiles e4m3 for its fagpu level (fa-map-to-gpu), where
    // fagpu-build-kernels refuses it until the e4m3 kernel exists.
    bool fp8 = op.isFP8();
    if (gpu != Target::sm_90a)
      if (std::optional<std::string> why =
              fa::checkTargetElementType(targetName(gpu), elt))
        return op.emitOpError() << "fagpu-tile: " << *why;
    int64_t d = op.getHeadDim();
    const KernelDefaults *row =
        defaultsFor(gpu, d, op.getCausal());
    int64_t br = op.getBlockR().value_or(blockR);
    // An e4m3 cache beside a 16-bit Q (sm_90a): its kernel's tiles.
    bool widens = gpu == Target::sm_90a && op.hasFP8KeyValues();
    if (br == 0 && widens)
      br = kWideningBlockR;
    if (br == 0 && row && op.getKvSplits())
      br = splitKVDefaults(gpu, d, op.getCausal()).blockR;
    if (br == 0) {
      if (!row)
        return op.emitOpError()
               << "fagpu-tile: no " << targetName(gpu)
               << " kernel for head dim " << d << " (the table has 64, 128"
               << (gpu == Target::sm_90a
                       ? ", 192 and 256, and multiples of 32 up to 256 on "
                         "their tiles"
                       : " and 256")
               << "); give block-r and block-c to tile it anyway";
      br = row->blockR;
    }
    int64_t bc = op.getBlockC().value_or(blockC);
    bool explicitBlockC = bc != 0;
    if (bc == 0)
      bc = fp8      ? fp8DefaultBlockC(d)
           : widens ? kWideningBlockC
                    : defaultBlockC(gpu, d, op.getCausal(), br);
    // A paged cache: a K/V block lies in one page (one TMA box) or spans
    // whole pages (one box each, gathered into the block's tile); B_c stays
    // a multiple of the MMA's k = 16, and so does the page.
    if (op.isPaged()) {
      int64_t pageSize = op.getPageSize();
      if (pageSize % 16 != 0)
        return op.emitOpError()
               << "fagpu-tile: " << targetName(gpu)
               << ": the page size must be a multiple of 16 rows (the K/V "
                  "blocks are whole MMA steps of whole pages), got "
               << pageSize;
      if (pageSize % bc != 0 && bc % pageSize != 0) {
        if (explicitBlockC)
          return op.emitOpError()
                 << "fagpu-tile: block_c=" << bc << " and the page size "
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
};

} // namespace
