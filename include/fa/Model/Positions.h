//===- Positions.h - how large positions, lengths and offsets get -*- C++ -*-===//
//
// Part of the MLIR-free model library (include/fa/Model).
//
// The kernels add a query's position, a sequence's length, a window and a
// diagonal offset in signed integers of `bits` bits (32 on the GPU, 64 for
// the CPU path's index arithmetic). Each stays at most 2^(bits - 2), so the
// sum of any two stays below 2^(bits - 1) and never wraps; the compiler
// checks windows and offsets against it (fa/Dialect/FA/IR/Validation.h),
// the runtimes the lengths they launch with and the metadata they read.
//
//===----------------------------------------------------------------------===//

#ifndef FA_MODEL_POSITIONS_H
#define FA_MODEL_POSITIONS_H

#include <cstdint>

namespace mlir::fa::model {

/// The largest position, length, window or offset of a back end adding
/// them in `bits`-bit signed integers.
constexpr int64_t maxPosition(unsigned bits) { return int64_t(1) << (bits - 2); }

/// The GPU kernels': 2^30.
inline constexpr int64_t kMaxKernelPosition = maxPosition(32);

} // namespace mlir::fa::model

#endif // FA_MODEL_POSITIONS_H
