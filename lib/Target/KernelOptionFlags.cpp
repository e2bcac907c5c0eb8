//===- KernelOptionFlags.cpp - Command-line flags of the kernel options ---===//

#include "fa/Target/KernelOptionFlags.h"

#include "fa/Dialect/FA/IR/Validation.h"

#include "llvm/ADT/StringExtras.h"

#include <cmath>

using namespace mlir;
using namespace mlir::fa;
namespace cl = llvm::cl;

namespace {
/// A flag's initial value: the field's default in the flag's form.
template <FlagForm F, typename T, typename D>
auto initialValue(const D &fieldDefault) {
  if constexpr (F == FlagForm::Alignment)
    return std::string(fieldDefault ? "bottom-right" : "top-left");
  else if constexpr (F == FlagForm::Inverted)
    return !fieldDefault;
  else if constexpr (F == FlagForm::ChunkCount)
    return std::string("off");
  else if constexpr (F == FlagForm::Threshold)
    return std::string("auto");
  else if constexpr (F == FlagForm::Tristate)
    return cl::BOU_UNSET;
  else if constexpr (F == FlagForm::Choice)
    return fagpu::choiceName(fieldDefault).str();
  else if constexpr (F == FlagForm::OptionalChoice)
    return std::string(); // not given: the field's nullopt
  else
    return T(fieldDefault);
}

/// Reads `flag` (form F) into `field`; why it cannot.
template <FlagForm F, typename T, typename S>
std::optional<std::string> readFlag(const S &flag, T &field) {
  if constexpr (F == FlagForm::Alignment) {
    const std::string &v = flag;
    if (v != "top-left" && v != "bottom-right")
      return "expected top-left or bottom-right, got '" + v + "'";
    field = v == "bottom-right";
  } else if constexpr (F == FlagForm::Inverted) {
    field = !flag;
  } else if constexpr (F == FlagForm::ChunkCount) {
    const std::string &v = flag;
    int64_t chunks;
    if (v == "off")
      field = 0;
    else if (v == "auto")
      field = -1;
    else if (llvm::to_integer(llvm::StringRef(v), chunks, 10) && chunks > 0)
      field = chunks;
    else
      return "expected off, auto or a chunk count, got '" + v + "'";
  } else if constexpr (F == FlagForm::Threshold) {
    // "off": never skip a rescale (-1); "auto": the measured default (NaN);
    // a NaN spelt out is a mistake, not "auto".
    const std::string &v = flag;
    double threshold;
    if (v == "off") {
      field = -1.0;
    } else if (v == "auto") {
      field = std::numeric_limits<double>::quiet_NaN();
    } else if (llvm::StringRef(v).getAsDouble(threshold)) {
      return "expected a number, 'off' or 'auto', got '" + v + "'";
    } else {
      if (std::optional<std::string> why =
              checkRescaleThreshold(threshold, "rescale_threshold"))
        return why;
      field = threshold;
    }
  } else if constexpr (F == FlagForm::Tristate) {
    field = flag == cl::BOU_UNSET ? -1 : flag == cl::BOU_TRUE ? 1 : 0;
  } else if constexpr (F == FlagForm::Choice) {
    const std::string &v = flag;
    std::optional<T> choice = fagpu::parseChoice<T>(v);
    if (!choice)
      return "expected " + fagpu::choiceList<T>() + ", got '" + v + "'";
    field = *choice;
  } else if constexpr (F == FlagForm::OptionalChoice) {
    using U = typename T::value_type;
    const std::string &v = flag;
    if (v.empty()) {
      field = std::nullopt;
      return std::nullopt;
    }
    std::optional<U> choice = fagpu::parseChoice<U>(v);
    if (!choice)
      return "expected " + fagpu::choiceList<U>() + ", got '" + v + "'";
    field = *choice;
  } else {
    field = flag;
  }
  return std::nullopt;
}
} // namespace

KernelOptionFlags::KernelOptionFlags(cl::OptionCategory &category)
    : category(category)
#define FA_KERNEL_OPTION(Field, Type, Default, Flag, FlagForm_, Keyword,       \
                         KeywordForm, Help)                                    \
  , Field(Flag, cl::cat(category), cl::desc(Help),                             \
          cl::init(initialValue<FlagForm::FlagForm_, Type>(Default)))
#include "fa/Target/KernelOptions.def"
{
}

std::optional<KernelOptionError>
KernelOptionFlags::apply(KernelOptions &options) const {
  llvm::ArrayRef<KernelOptionInfo> table = kernelOptionTable();
  size_t index = 0;
#define FA_KERNEL_OPTION(Field, Type, Default, Flag, FlagForm_, Keyword,       \
                         KeywordForm, Help)                                    \
  if (std::optional<std::string> why =                                         \
          readFlag<FlagForm::FlagForm_, Type>(Field, options.Field))           \
    return KernelOptionError{&table[index], *why};                             \
  ++index;
#include "fa/Target/KernelOptions.def"
  return checkKernelOptions(options);
}
