//===- FADialect.td - The fa dialect -----------------------*- tablegen -*-===//
//
// The `fa` dialect: attention as one op, and the tile-level ops of the
// online softmax that FlashAttention-style lowerings are built from.
//
//===----------------------------------------------------------------------===//

#ifndef FA_DIALECT_FA_IR_FADIALECT_TD
#define FA_DIALECT_FA_IR_FADIALECT_TD

include "mlir/IR/OpBase.td"

def FA_Dialect : Dialect {
  let name = "fa";
  let cppNamespace = "::mlir::fa";
  let summary = "FlashAttention: attention and its online-softmax tile ops";
  let description = [{
    The `fa` dialect has two levels.

    * `fa.attention` states `O = softmax(scale * Q K^T [masked]) V` for whole
      `[B, H, N, D]` operands (tensors or memrefs), with causal, sliding
      window and softcap variants and grouped-query heads.
    * The tile-level ops (`fa.init_state`, `fa.score_tile`,
      `fa.softmax_update`, `fa.rescale`, `fa.pv_accumulate`,
      `fa.normalize`, `fa.logsumexp`) write out the online-softmax state of
      one block of query rows: the running max `m`, the running sum `l`, and
      the unnormalised accumulator `O`. Loop-order passes
      (`fa-lower-fa1`, `fa-lower-fa2`) produce them; algorithm passes rewrite
      them; backends lower them.

    Scores at tile level are kept in base 2: `fa.score_tile` multiplies by
    `log2(e)`, so every exponential is an `exp2` and `m` is in log2 units.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

class FA_Op<string mnemonic, list<Trait> traits = []>
    : Op<FA_Dialect, mnemonic, traits>;

#endif // FA_DIALECT_FA_IR_FADIALECT_TD
