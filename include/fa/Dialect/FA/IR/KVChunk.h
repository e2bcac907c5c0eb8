//===- KVChunk.h - the K/V blocks of a split-KV chunk ----------*- C++ -*-===//
//
// Split-KV cuts the K/V blocks a query tile visits into chunks computed in
// parallel. The rule is written once over an arithmetic `A` (Value, c,
// add, sub, mul, divu, minu, maxu): the CPU nest (fa-lower-fa2, on index
// values) and the GPU kernel (on i32) then split the same keys.
//
//===----------------------------------------------------------------------===//

#ifndef FA_DIALECT_FA_IR_KVCHUNK_H
#define FA_DIALECT_FA_IR_KVCHUNK_H

#include <utility>

namespace mlir::fa {

/// The blocks [begin, end) of the visible blocks [first, end) that chunk
/// `chunk` of `splits` visits. Chunks are ceil(n / splits) blocks long, in
/// order: all but the last ones are full and no intermediate exceeds
/// n + splits. Trailing chunks may be empty; an empty chunk's partial is
/// O = 0, LSE = -inf, which the merge weighs 0.
template <typename A>
std::pair<typename A::Value, typename A::Value>
kvChunk(A &a, typename A::Value first, typename A::Value end,
        typename A::Value chunk, typename A::Value splits) {
  using V = typename A::Value;
  V n = a.sub(a.maxu(end, first), first);
  V size = a.divu(a.add(n, a.sub(splits, a.c(1))), splits);
  V begin = a.minu(a.mul(chunk, size), n);
  V stop = a.minu(a.add(begin, size), n);
  return {a.add(first, begin), a.add(first, stop)};
}

} // namespace mlir::fa

#endif // FA_DIALECT_FA_IR_KVCHUNK_H
