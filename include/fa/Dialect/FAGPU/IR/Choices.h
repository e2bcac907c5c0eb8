//===- Choices.h - what the schedule passes' options ask for ----*- C++ -*-===//
//
// The choices a user makes of one FlashAttention-3 idea, typed once: the
// `fagpu-*` passes' `mode` options and the sm_90a pipeline's options take
// these enums (parsed and printed by their cl::values), and the pipeline
// hands them to its passes unchanged.
//
//===----------------------------------------------------------------------===//

#ifndef FA_DIALECT_FAGPU_IR_CHOICES_H
#define FA_DIALECT_FAGPU_IR_CHOICES_H

#include <optional>

namespace mlir::fagpu {

/// An idea turned on, off, or left to the heuristics table (auto).
enum class Switch { Auto, On, Off };

/// nullopt for auto, else whether the idea is on.
inline std::optional<bool> askedFor(Switch choice) {
  if (choice == Switch::Auto)
    return std::nullopt;
  return choice == Switch::On;
}

/// How O leaves the kernel: as the heuristics table says (auto), through
/// shared memory and a TMA store (tma), or from registers (direct).
enum class EpilogueRequest { Auto, Tma, Direct };

} // namespace mlir::fagpu

#endif // FA_DIALECT_FAGPU_IR_CHOICES_H
