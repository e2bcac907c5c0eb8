//===- AttentionToBuffers.cpp - tensor fa.attention to memref form --------===//

#include "fa/Dialect/FA/Transforms/Passes.h"

#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "mlir/Dialect/Bufferization/Transforms/OneShotAnalysis.h"
#include "mlir/Dialect/Bufferization/Transforms/OneShotModuleBufferize.h"

namespace mlir::fa {
#define GEN_PASS_DEF_FAATTENTIONTOBUFFERS
#define GEN_PASS_DEF_FABUFFERIZEAROUNDATTENTION
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

/// %o = fa.attention %q, %k, %v : tensors -> tensor
///   ==>
/// %qb = bufferization.to_buffer %q ...
/// %ob = memref.alloc(...)
/// fa.attention %qb, %kb, %vb outs(%ob)
/// %o = bufferization.to_tensor %ob restrict writable
struct TensorAttentionToBuffers : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    if (op.hasBufferSemantics())
      return failure();
    Location loc = op.getLoc();
    auto toBuffer = [&](Value tensor) -> Value {
      auto type = cast<RankedTensorType>(tensor.getType());
      auto memrefType = MemRefType::get(type.getShape(), type.getElementType());
      return bufferization::ToBufferOp::create(rewriter, loc, memrefType,
                                               tensor, /*read_only=*/true);
    };
    Value q = toBuffer(op.getQuery());
    Value k = toBuffer(op.getKey());
    Value v = toBuffer(op.getValue());

    // Outputs are [B, Hq, Nq, Dv] and [B, Hq, Nq]: their dynamic sizes are
    // the query's first three.
    SmallVector<Value> outs;
    for (Type resultType : op.getResultTypes()) {
      auto tensorType = cast<RankedTensorType>(resultType);
      SmallVector<Value> dynamicSizes;
      for (int64_t dim = 0; dim < tensorType.getRank(); ++dim)
        if (tensorType.isDynamicDim(dim))
          dynamicSizes.push_back(memref::DimOp::create(rewriter, loc, q, dim));
      auto memrefType = MemRefType::get(tensorType.getShape(),
                                        tensorType.getElementType());
      outs.push_back(
          memref::AllocOp::create(rewriter, loc, memrefType, dynamicSizes));
    }
    SmallVector<Value> descales;
    for (Value descale : op.getDescales())
      descales.push_back(toBuffer(descale));
    Value kvLengths = op.getKvLengths() ? toBuffer(op.getKvLengths()) : Value();
    Value blockTable =
        op.getBlockTable() ? toBuffer(op.getBlockTable()) : Value();
    auto bufferOf = [&](Value v) { return v ? toBuffer(v) : Value(); };
    // The regions see captures as tensors in both forms: they move as they
    // are.
    SmallVector<Value> captures;
    for (Value capture : op.getCaptures())
      captures.push_back(toBuffer(capture));
    auto onBuffers = AttentionOp::create(
        rewriter, loc, TypeRange{}, q, k, v, outs, descales, kvLengths,
        blockTable, bufferOf(op.getCuSeqlensQ()), bufferOf(op.getCuSeqlensK()),
        bufferOf(op.getSinks()), captures, op->getAttrs());
    for (auto [from, to] : {std::pair<Region *, Region *>{
                                &op.getScoreMod(), &onBuffers.getScoreMod()},
                            {&op.getMaskMod(), &onBuffers.getMaskMod()}})
      rewriter.inlineRegionBefore(*from, *to, to->end());
    SmallVector<Value> results;
    for (auto [resultType, out] : llvm::zip(op.getResultTypes(), outs))
      results.push_back(bufferization::ToTensorOp::create(
          rewriter, loc, resultType, out, /*restrict=*/true,
          /*writable=*/true));
    rewriter.replaceOp(op, results);
    return success();
  }
};

struct FAAttentionToBuffersPass
    : fa::impl::FAAttentionToBuffersBase<FAAttentionToBuffersPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<TensorAttentionToBuffers>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

struct FABufferizeAroundAttentionPass
    : fa::impl::FABufferizeAroundAttentionBase<FABufferizeAroundAttentionPass> {
  void runOnOperation() override {
    bufferization::OneShotBufferizationOptions options;
    options.bufferizeFunctionBoundaries = true;
    // The attentions and their regions (whose captures are tensors in
    // both forms) are left as they are.
    options.opFilter.denyOperation([](Operation *op) {
      return isa<AttentionOp, AttentionBackwardOp>(op) ||
             op->getParentOfType<AttentionOp>() ||
             op->getParentOfType<AttentionBackwardOp>();
    });
    bufferization::BufferizationState state;
    if (failed(bufferization::runOneShotModuleBufferize(getOperation(), options,
                                                        state)))
      signalPassFailure();
  }
};

} // namespace
