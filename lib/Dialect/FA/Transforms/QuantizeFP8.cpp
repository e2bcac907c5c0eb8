//===- QuantizeFP8.cpp - run a higher-precision attention in e4m3 ---------===//
//
// Q, K and V are quantised per tensor, x8 = e4m3(x * 448 / amax) with
// descale amax / 448, and the attention takes the e4m3 buffers and the
// descales: S = scale * q_descale * k_descale * Q8 K8^T, O = v_descale * P V8.
//
//===----------------------------------------------------------------------===//

#include "Quantization.h"

#include "fa/Dialect/FA/Transforms/Passes.h"

namespace mlir::fa {
#define GEN_PASS_DEF_FAQUANTIZEFP8
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

struct FAQuantizeFP8Pass : fa::impl::FAQuantizeFP8Base<FAQuantizeFP8Pass> {
  void runOnOperation() override {
    if (failed(forEachAttention(getOperation(), /*fp8=*/false,
                                [&](AttentionOp op) { return quantize(op); })))
      signalPassFailure();
  }

  LogicalResult quantize(AttentionOp op) {
    if (op.hasFP8KeyValues())
      return op.emitOpError("has an e4m3 K/V already; fa-quantize-fp8 "
                            "quantises 16-bit or f32 Q, K and V together");
    if (!op.hasBufferSemantics())
      return op.emitOpError("has tensor operands; fa-quantize-fp8 needs the "
                            "memref form (run fa-attention-to-buffers first)");
    OpBuilder b(op);
    Location loc = op.getLoc();
    Type e4m3 = b.getType<Float8E4M3FNType>();
    SmallVector<Value> inputs, descales, fresh;
    for (Value x : {op.getQuery(), op.getKey(), op.getValue()}) {
      auto type = cast<MemRefType>(x.getType());
      Value x8 = allocLike(b, loc, x, type.getShape(), e4m3);
      Value descale = allocLike(b, loc, x, {}, b.getF32Type());
      QuantizeOp::create(b, loc, x, x8, descale, /*block=*/IntegerAttr());
      inputs.push_back(x8);
      descales.push_back(descale);
      fresh.append({x8, descale});
    }
    auto quantized = AttentionOp::create(
        b, loc, TypeRange{}, inputs[0], inputs[1], inputs[2], op.getOuts(),
        descales, op.getKvLengths(), op.getBlockTable(), op.getCuSeqlensQ(),
        op.getCuSeqlensK(), op.getSinks(), op.getCaptures(), op->getAttrs());
    quantized.takeModifications(op);
    b.setInsertionPointAfter(quantized);
    for (Value buffer : fresh)
      memref::DeallocOp::create(b, loc, buffer);
    op.erase();
    return success();
  }
};

} // namespace
