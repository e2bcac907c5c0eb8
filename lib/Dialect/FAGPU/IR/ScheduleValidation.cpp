//===- ScheduleValidation.cpp - each schedule field's range, once ---------===//

#include "fa/Dialect/FAGPU/IR/ScheduleValidation.h"
#include "fa/Dialect/FA/IR/Validation.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::fagpu;

std::optional<std::string>
mlir::fagpu::checkRegisterBudget(const ScheduleFields &f) {
  for (int64_t r : {f.producerRegisters, f.consumerRegisters})
    if (r < 24 || r > 256 || r % 8 != 0)
      return "setmaxnreg counts must be multiples of 8 in [24, 256], got " +
             std::to_string(r);
  const int64_t threads = 128 * (f.consumers + 1);
  const int64_t perThread = launchRegistersPerThread(threads, f.ctasPerSm);
  const int64_t pool = perThread * threads;
  int64_t total =
      128 * (f.producerRegisters + f.consumers * f.consumerRegisters);
  if (total > pool)
    return "producer and consumer registers (" +
           std::to_string(f.producerRegisters) + ", " +
           std::to_string(f.consumerRegisters) + ") need " +
           std::to_string(total) + " registers, more than the " +
           std::to_string(pool) + " a CTA of " + std::to_string(threads) +
           " threads launches with (" + std::to_string(perThread) + " each" +
           (f.ctasPerSm > 1 ? ", " + std::to_string(f.ctasPerSm) +
                                  " CTAs per SM"
                            : std::string()) +
           ")";
  return std::nullopt;
}

std::optional<std::string>
mlir::fagpu::checkSchedule(Target target, const ScheduleFields &f) {
  for (auto [name, rows] : {std::pair<StringRef, int64_t>{"block_r", f.blockR},
                            {"block_c", f.blockC}})
    if (std::optional<std::string> why = fa::checkTileSize(name, rows))
      return why;
  if (f.stages < 0 || f.stages > 8)
    return "stages must be 0 (not chosen yet) to 8, got " +
           std::to_string(f.stages);
  bool sm90 = target == Target::sm_90a;
  std::string name = targetName(target).str();
  if (f.consumers < 0 || f.consumers > (sm90 ? 3 : 0))
    return sm90 ? "consumers must be 0 (not chosen yet) to 3 (64 query rows "
                  "each), got " +
                      std::to_string(f.consumers)
                : "consumers (consumer warpgroups) are an sm_90a schedule "
                  "choice; the " +
                      name + " kernel has none, got " +
                      std::to_string(f.consumers);
  if (f.ctasPerSm < 1 || f.ctasPerSm > (sm90 ? 2 : 1))
    return "ctas_per_sm must be 1" + std::string(sm90 ? " or 2" : "") +
           " on " + name + ", got " + std::to_string(f.ctasPerSm);
  // Fields only sm_90a's kernel reads.
  struct Only {
    bool set;
    const char *what;
  };
  const Only sm90Only[] = {
      {f.producerRegisters != 0 || f.consumerRegisters != 0,
       "producer_registers and consumer_registers (setmaxnreg budgets of "
       "warp-specialised kernels)"},
      {f.pingPong, "ping_pong"},
      {f.overlapSoftmax, "overlap_softmax"},
      {f.scheduler != TileScheduler::Single, "a persistent scheduler"},
      {f.qBuffers != 1, "q_buffers = 2 (the cross-tile pipeline)"},
      {f.epilogue != Epilogue::Registers, "a shared-memory epilogue"},
      {f.kvSplits != 0, "kv_splits (split-KV)"},
      {f.rowSumMma, "row_sum_mma"},
      {f.queryGroup != 0, "query_group (pack-GQA beyond one query)"},
      {f.maxRows != 0, "max_rows (tiles of at most 8 real rows)"}};
  if (!sm90)
    for (const Only &only : sm90Only)
      if (only.set)
        return std::string(only.what) +
               ": only the sm_90a kernel has it; the " + name +
               " kernel would ignore it";
  if (f.qInRegisters && target != Target::sm_80)
    return "q_in_registers: only the sm_80 kernel keeps Q in registers; "
           "the " +
           name + " kernel would ignore it";
  if (f.tmemColumns != 0) {
    if (target != Target::sm_100a)
      return "tmem_columns places accumulators in tensor memory, which "
             "only sm_100a has";
    if (f.tmemColumns < 32 || f.tmemColumns > 512 ||
        !llvm::isPowerOf2_64(f.tmemColumns))
      return "expected tmem_columns a power of two in [32, 512] (what "
             "tcgen05.alloc takes), got " +
             std::to_string(f.tmemColumns);
  }
  // Pack-GQA: G rows a query, whole queries a tile (G divides B_r), so a
  // tile's queries are [qStart / G, (qStart + B_r) / G).
  if (f.queryGroup != 0 &&
      (f.queryGroup < 2 || f.queryGroup > 64 ||
       !llvm::isPowerOf2_64(f.queryGroup) ||
       (f.blockR > 0 && f.blockR % f.queryGroup != 0)))
    return "expected query_group 0 (no packing) or a power of two in [2, "
           "64] that divides block_r (" +
           std::to_string(f.blockR) + "), got " +
           std::to_string(f.queryGroup);
  // Eight rows are each consumer thread's first (warp 0's rows g); any
  // other bound would leave a thread a padding row it still steps.
  if (f.maxRows != 0 && f.maxRows != 8)
    return "expected max_rows 0 (tiles of any rows) or 8 (each thread's "
           "first row only), got " +
           std::to_string(f.maxRows);
  if (f.kvSplits < 0 || f.kvSplits > 1024)
    return "expected kv_splits in [0, 1024] (0: no split), got " +
           std::to_string(f.kvSplits);
  if (f.qBuffers != 1 && f.qBuffers != 2)
    return "expected 1 or 2 q_buffers, got " + std::to_string(f.qBuffers);
  if (f.consumerRegisters != 0 && f.producerRegisters == 0)
    return "consumer_registers without producer_registers: register budgets "
           "belong to warp-specialised kernels";
  if (f.producerRegisters != 0 || f.consumerRegisters != 0) {
    if (f.consumers < 1)
      return "register budgets need the consumer warpgroups they split the "
             "registers between: consumers is 0";
    if (std::optional<std::string> why = checkRegisterBudget(f))
      return why;
  }
  return std::nullopt;
}
