//===- ScheduleValidation.h - each schedule field's range, once -*- C++ -*-===//
//
// A #fagpu.schedule is written by the fagpu-* passes or by hand. Each field
// has one range and the targets whose kernels read it; checkSchedule holds
// both, and the fagpu.attention verifier asks it, so a hand-written field
// out of range, or meant for another target, is an error at the op instead
// of a crash, a division by zero or a field the kernel builder ignores.
//
//===----------------------------------------------------------------------===//

#ifndef FA_DIALECT_FAGPU_IR_SCHEDULEVALIDATION_H
#define FA_DIALECT_FAGPU_IR_SCHEDULEVALIDATION_H

#include "fa/Dialect/FAGPU/IR/FAGPU.h"

#include <optional>
#include <string>

namespace mlir::fagpu {

/// Why `fields` cannot describe a `target` kernel (nullopt if they can):
///  * block_r, block_c: tile sizes in [1, 2^20] (fa::checkTileSize);
///  * stages: 0 (not chosen yet) to 8;
///  * consumers: sm_90a's consumer warpgroups, 0 (not chosen yet) to 3
///    (64 query rows each); 0 elsewhere;
///  * ctas_per_sm: 1, or 2 on sm_90a (two resident CTAs);
///  * producer_registers, consumer_registers: sm_90a's setmaxnreg budgets,
///    0 or multiples of 8 in [24, 256], within the registers a CTA launches
///    with (checkRegisterBudget);
///  * ping_pong, overlap_softmax, a persistent scheduler, q_buffers = 2, a
///    shared-memory epilogue, kv_splits, row_sum_mma: sm_90a's kernel
///    alone reads them;
///  * q_in_registers: sm_80's alone;
///  * tmem_columns: sm_100a's alone, a power of two in [32, 512].
std::optional<std::string> checkSchedule(Target target,
                                         const ScheduleFields &fields);

/// Whether the setmaxnreg budgets fit: an SM has 64K 32-bit registers
/// shared by its resident CTAs; a CTA of 128 (consumers + 1) threads
/// launches with the same count per thread, rounded down to ptxas's
/// granule of 8, and setmaxnreg only moves registers within that
/// allocation (an increase that does not fit waits forever).
std::optional<std::string> checkRegisterBudget(const ScheduleFields &fields);

/// The registers per thread a CTA of `threads` threads launches with when
/// `ctasPerSm` of them share an SM (ptxas's granule of 8).
inline int64_t launchRegistersPerThread(int64_t threads, int64_t ctasPerSm) {
  return 65536 / ctasPerSm / threads / 8 * 8;
}

} // namespace mlir::fagpu

#endif // FA_DIALECT_FAGPU_IR_SCHEDULEVALIDATION_H
