//===- SplitKV.cpp - split-KV (flash-decoding) chunk count ----------------===//
//
// Decode attends one query per sequence to a long KV cache: B * Hq query
// blocks leave most SMs idle. Cutting the keys into S chunks computed in
// parallel, then merged by log-sum-exp, multiplies the work items by S.
// This pass only chooses S (the kv_splits attribute); fa-lower-fa2 builds
// the split nest and the merge.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/IR/Validation.h"
#include "fa/Dialect/FA/Transforms/Passes.h"
#include "fa/Model/KVChunk.h"

#include "llvm/ADT/StringExtras.h"

namespace mlir::fa {
#define GEN_PASS_DEF_FASPLITKV
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

/// Query rows per work item and keys per block the rule assumes (the GPU
/// kernels' tiles; fa-tile chooses the real ones after this pass).
constexpr int64_t kRowsPerItem = 128, kKeysPerBlock = 128;

/// mlir::fa::model::autoKVSplits on static shapes; 1 (no split) otherwise.
int64_t autoSplits(AttentionOp op, int64_t sms, int64_t dramGBps) {
  ShapedType q = op.getQueryType(), k = op.getKeyType();
  for (int64_t d : {q.getDimSize(0), q.getDimSize(1), q.getDimSize(2),
                    k.getDimSize(2)})
    if (ShapedType::isDynamic(d))
      return 1;
  int64_t queryBlocks = llvm::divideCeil(q.getDimSize(2), kRowsPerItem);
  int64_t tiles = q.getDimSize(0) * q.getDimSize(1) * queryBlocks;
  return model::autoKVSplits(tiles, queryBlocks,
                             llvm::divideCeil(k.getDimSize(2), kKeysPerBlock),
                             sms, dramGBps);
}

struct FASplitKVPass : fa::impl::FASplitKVBase<FASplitKVPass> {
  using FASplitKVBase::FASplitKVBase;

  void runOnOperation() override {
    std::optional<int64_t> fixed;
    if (splits != "auto") {
      int64_t n;
      if (!llvm::to_integer(StringRef(splits), n, 10)) {
        emitError(getOperation().getLoc())
            << "fa-split-kv: splits must be auto or a count, got '" << splits
            << "'";
        return signalPassFailure();
      }
      if (std::optional<std::string> why = checkKVSplits(n)) {
        emitError(getOperation().getLoc()) << "fa-split-kv: " << *why;
        return signalPassFailure();
      }
      fixed = n;
    }
    if (sms < 1) {
      emitError(getOperation().getLoc())
          << "fa-split-kv: sms must be positive, got " << int64_t(sms);
      return signalPassFailure();
    }
    if (dramGBps < 0) {
      emitError(getOperation().getLoc())
          << "fa-split-kv: dram-gbps must be 0 (unknown) or positive, got "
          << int64_t(dramGBps);
      return signalPassFailure();
    }
    Builder b(&getContext());
    WalkResult result = getOperation().walk([&](AttentionOp op) {
      int64_t n = fixed ? *fixed : autoSplits(op, sms, dramGBps);
      // The auto rule leaves a varlen batch whole; an explicit count is
      // refused (its chunks and merge are not written for packed rows).
      if (op.isVarlen() && !fixed)
        n = 1;
      if (op.isVarlen() && n > 1) {
        op.emitOpError("fa-split-kv: varlen batches are not split yet");
        return WalkResult::interrupt();
      }
      if (n > 1)
        op.setKvSplitsAttr(b.getI64IntegerAttr(n));
      else
        op.removeKvSplitsAttr();
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
