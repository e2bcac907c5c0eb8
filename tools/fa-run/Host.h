//===- Host.h - fa-run's host buffers and JIT ------------------*- C++ -*-===//
//
// What fa-run's runs share (the forward's checks in fa-run.cpp, the
// backward's in Backward.cpp): host buffers of the element types the
// kernels take, with their memref descriptors, and the JIT that runs a
// lowered module on them.
//
//===----------------------------------------------------------------------===//

#ifndef FA_TOOLS_FA_RUN_HOST_H
#define FA_TOOLS_FA_RUN_HOST_H

#include "fa/Support/Float8.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/BuiltinOps.h"

#include "llvm/ADT/ArrayRef.h"

#include <cassert>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

namespace mlir::fa::run {

enum class Elt { F32, F16, BF16, E4M3, I32 };

/// IEEE half and bfloat16 conversions, round to nearest even.
uint16_t floatToHalf(float f);
float halfToFloat(uint16_t h);
uint16_t floatToBF16(float f);
float bf16ToFloat(uint16_t b);

/// Where each sequence's rows lie in fa-run's [batch, H, N, D] buffers:
/// `batch` sequences of nq queries and nk keys, or a varlen batch (one
/// batch row, the sequences packed along N by the prefix sums cuQ, cuK).
/// The forward's checks (fa-run.cpp's Spec, which adds a KV cache's lengths
/// and pages) and the backward's (Backward.cpp) index through it.
struct SequenceRows {
  int64_t batch = 1, nq = 0, nk = 0;
  /// A varlen batch's prefix sums, [sequences + 1] each (empty: not one).
  std::vector<int64_t> cuQ, cuK;

  /// A varlen batch of sequences of queries[s] queries and keys[s] keys.
  static SequenceRows packed(llvm::ArrayRef<int64_t> queries,
                             llvm::ArrayRef<int64_t> keys) {
    SequenceRows rows;
    rows.cuQ = {0};
    rows.cuK = {0};
    for (size_t s = 0; s < queries.size(); ++s) {
      rows.cuQ.push_back(rows.cuQ.back() + queries[s]);
      rows.cuK.push_back(rows.cuK.back() + keys[s]);
    }
    rows.nq = rows.cuQ.back();
    rows.nk = rows.cuK.back();
    return rows;
  }
  bool varlen() const { return !cuQ.empty(); }
  int64_t sequences() const {
    return varlen() ? int64_t(cuQ.size()) - 1 : batch;
  }
  int64_t queriesOf(int64_t s) const {
    return varlen() ? cuQ[s + 1] - cuQ[s] : nq;
  }
  int64_t keysOf(int64_t s) const {
    return varlen() ? cuK[s + 1] - cuK[s] : nk;
  }
  /// The flat row (in units of one row of D elements, or one LSE) of query
  /// i of sequence s, head h of `heads`.
  int64_t queryRow(int64_t s, int64_t h, int64_t heads, int64_t i) const {
    return varlen() ? h * nq + cuQ[s] + i : (s * heads + h) * nq + i;
  }
  /// The flat row of key j of sequence s, K/V head kh of `heads`.
  int64_t keyRow(int64_t s, int64_t kh, int64_t heads, int64_t j) const {
    return varlen() ? kh * nk + cuK[s] + j : (s * heads + kh) * nk + j;
  }
};

/// The highest memref rank fa-run passes.
constexpr int64_t kMaxRank = 8;

/// A buffer of one memref argument with its descriptor.
struct Buffer {
  Elt elt = Elt::F32;
  std::vector<int64_t> shape;
  std::vector<float> f32;    // used for F32
  std::vector<uint16_t> u16; // used for F16 / BF16
  std::vector<uint8_t> u8;   // used for E4M3
  std::vector<int32_t> i32;  // used for I32 (key lengths, block tables)
  // A ranked memref descriptor: {allocated, aligned, offset, sizes[rank],
  // strides[rank]}, the sizes and strides contiguous whatever the rank.
  struct Desc {
    void *allocated, *aligned;
    int64_t offset;
    int64_t sizesAndStrides[2 * kMaxRank];
  } desc;

  int64_t size() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  void allocate() {
    if (elt == Elt::F32)
      f32.assign(size(), 0.0f);
    else if (elt == Elt::E4M3)
      u8.assign(size(), 0);
    else if (elt == Elt::I32)
      i32.assign(size(), 0);
    else
      u16.assign(size(), 0);
    void *data = this->data();
    desc.allocated = desc.aligned = data;
    desc.offset = 0;
    int64_t rank = static_cast<int64_t>(shape.size()), stride = 1;
    for (int64_t i = rank - 1; i >= 0; --i) {
      desc.sizesAndStrides[i] = shape[i];
      desc.sizesAndStrides[rank + i] = stride;
      stride *= shape[i];
    }
  }
  void *descriptor() { return &desc; }
  /// A copy of the data with its own descriptor.
  Buffer clone() const {
    Buffer b = *this;
    b.desc.allocated = b.desc.aligned = b.data();
    return b;
  }
  void *data() {
    if (elt == Elt::F32)
      return f32.data();
    if (elt == Elt::I32)
      return i32.data();
    return elt == Elt::E4M3 ? static_cast<void *>(u8.data())
                            : static_cast<void *>(u16.data());
  }
  float get(int64_t i) const {
    switch (elt) {
    case Elt::E4M3:
      return fa::e4m3ToFloat(u8[i]);
    case Elt::F32:
      return f32[i];
    case Elt::F16:
      return halfToFloat(u16[i]);
    case Elt::BF16:
      return bf16ToFloat(u16[i]);
    case Elt::I32:
      return float(i32[i]);
    }
    return 0;
  }
  /// An i32 operand's element (lengths, prefix sums, page numbers), exact:
  /// through `set`'s float it would round above 2^24.
  void setInt(int64_t i, int64_t v) {
    assert(elt == Elt::I32 && "an integer operand");
    i32[i] = static_cast<int32_t>(v);
  }
  void set(int64_t i, float v) {
    switch (elt) {
    case Elt::E4M3:
      u8[i] = fa::floatToE4M3(v);
      break;
    case Elt::F32:
      f32[i] = v;
      break;
    case Elt::F16:
      u16[i] = floatToHalf(v);
      break;
    case Elt::BF16:
      u16[i] = floatToBF16(v);
      break;
    case Elt::I32:
      i32[i] = static_cast<int32_t>(v);
      break;
    }
  }
};

/// The JIT for a lowered module, with the soft-float entry points LLVM may
/// call for half conversions.
llvm::Expected<std::unique_ptr<ExecutionEngine>>
createEngine(ModuleOp module,
             std::function<llvm::Error(llvm::Module *)> &optimize);

/// Calls _mlir_ciface_<name> through its packed wrapper: one pointer per
/// argument, each to a pointer to the memref descriptor.
llvm::Error callEntry(ExecutionEngine &engine, StringRef name,
                      std::vector<Buffer> &buffers);

/// The host buffers fa-run allocates and the naive references walk: each
/// at most 2^28 elements (1 GiB of f32), so that sizes never overflow and an
/// impossible request is a diagnostic, not std::bad_alloc.
constexpr int64_t kMaxBufferElements = int64_t(1) << 28;

/// The element count of `shape`, or -1 past kMaxBufferElements.
inline int64_t boundedElements(llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return -1;
    if (d != 0 && n > kMaxBufferElements / d)
      return -1;
    n *= d;
  }
  return n;
}

} // namespace mlir::fa::run

#endif // FA_TOOLS_FA_RUN_HOST_H
