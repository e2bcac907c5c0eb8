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
/// `type` (i32 unless given).
struct IRArithmetic {
  using Value = mlir::Value;
  IRArithmetic(OpBuilder &b, Location loc, Type type = Type())
      : b(b), loc(loc), type(type ? type : b.getI32Type()) {}
  OpBuilder &b;
  Location loc;
  Type type;
  Value c(int64_t v) {
    return arith::ConstantOp::create(b, loc, type, b.getIntegerAttr(type, v));
  }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubIOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulIOp::create(b, loc, x, y); }
  Value divu(Value x, Value y) { return arith::DivUIOp::create(b, loc, x, y); }
  Value minu(Value x, Value y) { return arith::MinUIOp::create(b, loc, x, y); }
  Value maxu(Value x, Value y) { return arith::MaxUIOp::create(b, loc, x, y); }
  Value maxs(Value x, Value y) { return arith::MaxSIOp::create(b, loc, x, y); }
};

/// The same, folding as it builds (constants stay constants): the CPU loop
/// nests, whose static bounds the IO report reads and whose canonical form
/// the lit tests check. The kernels keep IRArithmetic, whose IR their PTX
/// is checked against.
struct FoldingIRArithmetic {
  using Value = mlir::Value;
  FoldingIRArithmetic(OpBuilder &b, Location loc)
      : b(b), loc(loc), type(b.getIndexType()) {}
  OpBuilder &b;
  Location loc;
  Type type;
  Value c(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value add(Value x, Value y) {
    return b.createOrFold<arith::AddIOp>(loc, x, y);
  }
  Value sub(Value x, Value y) {
    return b.createOrFold<arith::SubIOp>(loc, x, y);
  }
  Value mul(Value x, Value y) {
    return b.createOrFold<arith::MulIOp>(loc, x, y);
  }
  Value divu(Value x, Value y) {
    return b.createOrFold<arith::DivUIOp>(loc, x, y);
  }
  Value minu(Value x, Value y) {
    return b.createOrFold<arith::MinUIOp>(loc, x, y);
  }
  Value maxu(Value x, Value y) {
    return b.createOrFold<arith::MaxUIOp>(loc, x, y);
  }
  Value maxs(Value x, Value y) {
    return b.createOrFold<arith::MaxSIOp>(loc, x, y);
  }
};

} // namespace mlir::fa

#endif // FA_SUPPORT_IRARITHMETIC_H
