//===- Backward.h - fa-run --backward ---------------------------*- C++ -*-===//

#ifndef FA_TOOLS_FA_RUN_BACKWARD_H
#define FA_TOOLS_FA_RUN_BACKWARD_H

#include "Modifications.h"

#include "mlir/IR/MLIRContext.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mlir::fa::run {

/// The attention whose forward and backward fa-run --backward runs, from
/// its options (checked by fa-run before).
struct BackwardProblem {
  int64_t batch, qHeads, kvHeads, qLen, kvLen, headDim, valueHeadDim;
  std::string dtype; // f32, f16 or bf16
  bool causal = false, bottomRight = false;
  /// A sink logit per query head (fa-run's --sinks: log(Nk) + N(0, 1),
  /// head 0's -inf), and their gradient checked too.
  bool sinks = false;
  /// fa-run's score and mask modifications (--score-mod, --mask-mod): the
  /// forward and the backward take the same regions, the reference their
  /// modification and its derivative.
  Modifications mods;
  /// A varlen batch: each sequence's query and key count (fa-run's
  /// --varlen-q, --varlen-kv), packed along N in one batch row; batch,
  /// qLen and kvLen are then unused.
  std::vector<int64_t> varlenQ, varlenKV;
  int64_t window = 0, diagonalOffset = 0;
  double softcap = 0, scale = 0;
  unsigned seed = 1;
  /// The relative L2 error allowed (0: by dtype).
  double tolerance = 0;
  /// The textual pipeline lowering the module for the host.
  std::string pipeline;
  bool printModule = false;
};

/// Runs the problem; prints each check and PASS or FAIL. The exit status.
int runBackward(MLIRContext &context, const BackwardProblem &problem);

} // namespace mlir::fa::run

#endif // FA_TOOLS_FA_RUN_BACKWARD_H
