//===- Passes.td - fa conversion passes --------------------*- tablegen -*-===//

#ifndef FA_CONVERSION_PASSES_TD
#define FA_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertFAToLoops : Pass<"convert-fa-to-loops"> {
  let summary = "Lower the fa tile ops to scf loops over memref, arith and math";
  let description = [{
    Expands each tile-level op into a loop nest on its buffers: the score
    tile (dot products in f32, scale and log2(e) folded into one multiply,
    softcap, then the bounds/causal/window mask as a select to -inf), the
    online-softmax step with `math.exp2`, the rescale, the P V accumulation,
    the normalisation and the log-sum-exp. This is the host path used to
    execute and check every algorithm variant without a GPU.
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::linalg::LinalgDialect"];
}

#endif // FA_CONVERSION_PASSES_TD
