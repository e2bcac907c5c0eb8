//===- IncoherentProcessing.cpp - Hadamard transform before fp8 -----------===//
//
// FlashAttention-3's incoherent processing: Q' = Q M and K' = K M with
// M = diag(s) H_D / sqrt(D) orthogonal, so Q' K'^T = Q K^T, while outliers
// of Q and K are spread over each row before the rows are quantised.
//
//===----------------------------------------------------------------------===//

#include "Quantization.h"

#include "fa/Dialect/FA/IR/Validation.h"
#include "fa/Dialect/FA/Transforms/Passes.h"

#include <random>

namespace mlir::fa {
#define GEN_PASS_DEF_FAINCOHERENTPROCESSING
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

struct FAIncoherentProcessingPass
    : fa::impl::FAIncoherentProcessingBase<FAIncoherentProcessingPass> {
  using FAIncoherentProcessingBase::FAIncoherentProcessingBase;

  void runOnOperation() override {
    if (failed(forEachAttention(getOperation(), /*fp8=*/true,
                                [&](AttentionOp op) { return rotate(op); })))
      signalPassFailure();
  }

  LogicalResult rotate(AttentionOp op) {
    QuantizeOp q = quantizeWriting(op.getQuery(), op);
    QuantizeOp k = quantizeWriting(op.getKey(), op);
    if (!q || !k)
      return op.emitOpError(
          "has e4m3 Q or K not made by fa.quantize here; "
          "fa-incoherent-processing transforms them before quantisation "
          "(run fa-quantize-fp8 first)");
    // V M would need M^T applied to O: V's quantisation must be its own.
    QuantizeOp v = quantizeWriting(op.getValue(), op);
    if (v && (v == q || v == k))
      return op.emitOpError("quantises V with the fa.quantize of Q or K; "
                            "fa-incoherent-processing transforms Q and K "
                            "only (quantise V separately)");
    int64_t dim = op.getHeadDim();
    if (std::optional<std::string> error = checkHadamardDim(dim))
      return op.emitOpError() << "fa-incoherent-processing: " << *error;
    // One sign vector for Q and K: M must be the same on both sides.
    std::mt19937_64 rng(seed);
    SmallVector<bool> signs;
    for (int64_t i = 0; i < dim; ++i)
      signs.push_back(rng() & 1);
    OpBuilder b(op);
    Location loc = op.getLoc();
    SmallVector<Value> rotated;
    // Q and K made by one fa.quantize (self-attention on one buffer): one
    // transform serves both.
    SmallVector<QuantizeOp, 2> quantizes = {q};
    if (k != q)
      quantizes.push_back(k);
    for (QuantizeOp quantize : quantizes) {
      b.setInsertionPoint(quantize);
      Value input = quantize.getInput();
      auto type = cast<MemRefType>(input.getType());
      Value out = allocLike(b, loc, input, type.getShape(), b.getF32Type());
      HadamardOp::create(b, loc, input, out, signs);
      quantize.getInputMutable().set(out);
      rotated.push_back(out);
    }
    b.setInsertionPointAfter(op);
    for (Value buffer : rotated)
      memref::DeallocOp::create(b, loc, buffer);
    return success();
  }
};

} // namespace
