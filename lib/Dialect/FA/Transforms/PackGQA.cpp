//===- PackGQA.cpp - grouped query heads as one matrix's rows at decode ---===//
//
// At one query a sequence, query head h G + g of a grouped-query attention
// (G = Hq / Hkv) is row g of matrix h of the view [B, Hkv, G, D] of Q: the
// attention over that view is multi-head attention of G queries, whose
// tiles read each K/V block once per K/V head instead of once per query
// head. fa::model::decodeHeadsPerTile (fa/Model/PackGQA.h) is the rule.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/Transforms/Passes.h"
#include "fa/Model/PackGQA.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace mlir::fa {
#define GEN_PASS_DEF_FAPACKGQA
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

/// [B, Hq, 1, ...] as [B, Hkv, G, ...]: dim 1 split into (Hkv, G), then G
/// merged with the unit query dim.
Value packHeads(OpBuilder &b, Location loc, Value memref, int64_t kvHeads,
                int64_t group) {
  auto type = cast<MemRefType>(memref.getType());
  SmallVector<int64_t> expanded = {type.getDimSize(0), kvHeads, group};
  SmallVector<OpFoldResult> sizes = {
      memref::getMixedSize(b, loc, memref, 0), b.getIndexAttr(kvHeads),
      b.getIndexAttr(group)};
  SmallVector<ReassociationIndices> split = {{0}, {1, 2}};
  SmallVector<ReassociationIndices> merge = {{0}, {1}, {2, 3}};
  for (int64_t d = 2; d < type.getRank(); ++d) {
    expanded.push_back(type.getDimSize(d));
    sizes.push_back(memref::getMixedSize(b, loc, memref, d));
    split.push_back({d + 1});
    if (d > 2)
      merge.push_back({d + 1});
  }
  Value view = memref::ExpandShapeOp::create(b, loc, expanded, memref, split,
                                             sizes);
  return memref::CollapseShapeOp::create(b, loc, view, merge);
}

struct FAPackGQAPass : fa::impl::FAPackGQABase<FAPackGQAPass> {
  void runOnOperation() override {
    getOperation().walk([](AttentionOp op) {
      // Sinks and modifications see query heads, which the packing turns
      // into rows.
      if (!op.hasBufferSemantics() || op.isVarlen() || op.getSinks() ||
          op.hasModifications())
        return;
      ShapedType q = op.getQueryType(), k = op.getKeyType();
      int64_t qHeads = q.getDimSize(1), kvHeads = k.getDimSize(1);
      if (q.getDimSize(2) != 1 || ShapedType::isDynamic(qHeads) ||
          ShapedType::isDynamic(kvHeads))
        return;
      // Per-block descales ([B, H, blocks]) are per query head; per-tensor
      // and [B, Hkv] ones read the same under the packing.
      for (Value descale : op.getDescales())
        if (cast<ShapedType>(descale.getType()).getRank() > 2)
          return;
      // One query at the last key position sees every key: a bottom-right
      // causal mask (any right reach) is vacuous there and is dropped.
      bool causal = op.getCausal();
      int64_t window = op.getWindow().value_or(0);
      if (causal && model::causalMaskIsVacuous(1, op.getBottomRight(), window))
        causal = false;
      int64_t group = model::decodeHeadsPerTile(1, qHeads, kvHeads,
                                                causal || window > 0);
      if (group == 1)
        return;
      OpBuilder b(op);
      Location loc = op.getLoc();
      op.getQueryMutable().assign(
          packHeads(b, loc, op.getQuery(), kvHeads, group));
      SmallVector<Value> outs;
      for (Value out : op.getOuts())
        outs.push_back(packHeads(b, loc, out, kvHeads, group));
      op.getOutsMutable().assign(outs);
      op.removeCausalAttr();
      op.removeBottomRightAttr();
      op.removeDiagonalOffsetAttr();
    });
  }
};

} // namespace
