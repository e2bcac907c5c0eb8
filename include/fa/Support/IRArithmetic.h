//===- IRArithmetic.h - integer rules written once, emitted as IR -*- C++
//-*-===//
//
// The K/V block range (mlir::fa::model::kvBlockRange) and split-KV's chunks
// (mlir::fa::model::kvChunk) are written once over an arithmetic: on integers
// (the IO report, the runtimes) or as IR through this adaptor, in i32 (the GPU
// kernels' positions) or index (the CPU loop nests).
//
//===----------------------------------------------------------------------===//

#ifndef FA_SUPPORT_IRARITHMETIC_H
#define FA_SUPPORT_IRARITHMETIC_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"

namespace mlir::fa {

/// Integer arithmetic as arith ops at the builder's position, on values of
/// `type` (i32 unless given). With `fold` each op folds as it is built
/// (constants stay constants): the CPU loop nests, whose static bounds the
/// IO report reads; the kernels build without folding, the IR their PTX is
/// checked against.
struct IRArithmetic {
  using Value = mlir::Value;
  IRArithmetic(OpBuilder &b, Location loc, Type type = Type(),
               bool fold = false)
      : b(b), loc(loc), type(type ? type : b.getI32Type()), fold(fold) {}
  OpBuilder &b;
  Location loc;
  Type type;
  bool fold;
  Value c(int64_t v) {
    return arith::ConstantOp::create(b, loc, type, b.getIntegerAttr(type, v));
  }
  Value add(Value x, Value y) { return build<arith::AddIOp>(x, y); }
  Value sub(Value x, Value y) { return build<arith::SubIOp>(x, y); }
  Value mul(Value x, Value y) { return build<arith::MulIOp>(x, y); }
  Value divu(Value x, Value y) { return build<arith::DivUIOp>(x, y); }
  Value minu(Value x, Value y) { return build<arith::MinUIOp>(x, y); }
  Value maxu(Value x, Value y) { return build<arith::MaxUIOp>(x, y); }
  Value maxs(Value x, Value y) { return build<arith::MaxSIOp>(x, y); }
  Value mins(Value x, Value y) { return build<arith::MinSIOp>(x, y); }
  Value divs(Value x, Value y) { return build<arith::DivSIOp>(x, y); }

private:
  template <typename Op> Value build(Value x, Value y) {
    if (fold)
      return b.createOrFold<Op>(loc, x, y);
    return Op::create(b, loc, x, y);
  }
};

} // namespace mlir::fa

#endif // FA_SUPPORT_IRARITHMETIC_H
