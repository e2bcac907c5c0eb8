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

#include "llvm/ADT/StringRef.h"

#include <array>
#include <optional>
#include <string>
#include <utility>

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

/// Which kernel an sm_90a attention gets: FlashAttention-3's (wgmma, TMA,
/// warp roles) or the sm_80 mma.sync kernel built for sm_90a.
enum class SM90Kernel { Wgmma, MmaSync };

/// An attention's element type (its inputs', an e4m3 kernel's O, an e4m3
/// KV cache's K and V).
enum class ElementType { F16, BF16, E4M3 };

/// Each choice's spelling, the one the options, flags and keywords take.
template <typename E> struct ChoiceNames;
template <> struct ChoiceNames<Switch> {
  static constexpr std::array<std::pair<Switch, const char *>, 3> values = {
      {{Switch::On, "on"}, {Switch::Off, "off"}, {Switch::Auto, "auto"}}};
};
template <> struct ChoiceNames<EpilogueRequest> {
  static constexpr std::array<std::pair<EpilogueRequest, const char *>, 3>
      values = {{{EpilogueRequest::Tma, "tma"},
                 {EpilogueRequest::Direct, "direct"},
                 {EpilogueRequest::Auto, "auto"}}};
};

template <> struct ChoiceNames<SM90Kernel> {
  static constexpr std::array<std::pair<SM90Kernel, const char *>, 2> values = {
      {{SM90Kernel::Wgmma, "wgmma"}, {SM90Kernel::MmaSync, "mma-sync"}}};
};

template <> struct ChoiceNames<ElementType> {
  static constexpr std::array<std::pair<ElementType, const char *>, 3> values =
      {{{ElementType::F16, "f16"},
        {ElementType::BF16, "bf16"},
        {ElementType::E4M3, "e4m3"}}};
};

/// The choice spelt `text`; nullopt for none.
template <typename E> std::optional<E> parseChoice(llvm::StringRef text) {
  for (auto [value, name] : ChoiceNames<E>::values)
    if (text == name)
      return value;
  return std::nullopt;
}

/// How `choice` is spelt.
template <typename E> llvm::StringRef choiceName(E choice) {
  for (auto [value, name] : ChoiceNames<E>::values)
    if (value == choice)
      return name;
  return "";
}

/// The spellings for a message: "on, off or auto".
template <typename E> const std::string &choiceList() {
  static const std::string list = [] {
    std::string text;
    const auto &values = ChoiceNames<E>::values;
    for (size_t i = 0; i < values.size(); ++i)
      text += std::string(i == 0                   ? ""
                          : i + 1 == values.size() ? " or "
                                                   : ", ") +
              values[i].second;
    return text;
  }();
  return list;
}

} // namespace mlir::fagpu

#endif // FA_DIALECT_FAGPU_IR_CHOICES_H
