//===- ScheduleUtils.h - what every fagpu schedule pass shares --*- C++ -*-===//

#ifndef FA_LIB_DIALECT_FAGPU_TRANSFORMS_SCHEDULEUTILS_H
#define FA_LIB_DIALECT_FAGPU_TRANSFORMS_SCHEDULEUTILS_H

#include "fa/Dialect/FAGPU/IR/FAGPU.h"

#include <optional>
#include <string>

namespace mlir::fagpu {

/// Runs `update` on the schedule of every fagpu.attention for `target` in
/// `root`. `update` changes the fields it owns and returns nothing, or why
/// the kernel cannot take the idea; the error then names the pass and the
/// op, and the walk stops.
template <typename UpdateFn>
LogicalResult updateSchedules(Operation *root, Target target, StringRef pass,
                              UpdateFn update) {
  WalkResult result = root->walk([&](AttentionOp op) {
    if (op.getTarget() != target)
      return WalkResult::advance();
    ScheduleFields fields = fieldsOf(op.getSchedule());
    if (std::optional<std::string> why = update(op, fields)) {
      op.emitOpError() << pass << ": " << *why;
      return WalkResult::interrupt();
    }
    op.setScheduleAttr(scheduleOf(op.getContext(), fields));
    return WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}

/// Refuses every fagpu.attention in `root` for another target than sm_90a,
/// whose kernel alone has the idea: "<pass>: only the sm_90a kernel <what>,
/// not <target>".
inline LogicalResult refuseOtherTargets(Operation *root, StringRef pass,
                                        StringRef what) {
  WalkResult other = root->walk([&](AttentionOp op) {
    if (op.getTarget() == Target::sm_90a)
      return WalkResult::advance();
    op.emitOpError() << pass << ": only the sm_90a kernel " << what << ", not "
                     << targetName(op.getTarget());
    return WalkResult::interrupt();
  });
  return failure(other.wasInterrupted());
}

} // namespace mlir::fagpu

#endif // FA_LIB_DIALECT_FAGPU_TRANSFORMS_SCHEDULEUTILS_H
