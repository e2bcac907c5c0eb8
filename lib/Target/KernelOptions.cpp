//===- KernelOptions.cpp - The kernel options' table and checks -----------===//

#include "fa/Target/KernelOptions.h"

#include "fa/Dialect/FA/IR/Validation.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <cstdio>
#include <type_traits>

using namespace mlir;
using namespace mlir::fa;

namespace {
/// Whether T is std::optional<U>, and U.
template <typename T> struct OptionalOf {
  static constexpr bool value = false;
  using type = T;
};
template <typename U> struct OptionalOf<std::optional<U>> {
  static constexpr bool value = true;
  using type = U;
};

template <typename T> constexpr OptionKind kindOf() {
  if constexpr (std::is_same_v<T, bool>)
    return OptionKind::Bool;
  else if constexpr (std::is_integral_v<T>)
    return OptionKind::Int;
  else if constexpr (std::is_floating_point_v<T>)
    return OptionKind::Real;
  else
    return OptionKind::Text;
}

/// A typed choice's spellings; empty for other types.
template <typename T> llvm::StringRef choicesOf() {
  using U = typename OptionalOf<T>::type;
  if constexpr (std::is_enum_v<U>)
    return fagpu::choiceList<U>();
  else
    return "";
}
} // namespace

llvm::ArrayRef<KernelOptionInfo> fa::kernelOptionTable() {
  static const KernelOptionInfo table[] = {
#define FA_KERNEL_OPTION(Field, Type, Default, Flag, FlagForm_, Keyword,       \
                         KeywordForm_, Help)                                   \
  {#Field,                                                                     \
   Flag,                                                                       \
   #Keyword,                                                                   \
   kindOf<Type>(),                                                             \
   FlagForm::FlagForm_,                                                        \
   KeywordForm::KeywordForm_,                                                  \
   Help,                                                                       \
   choicesOf<Type>()},
#include "fa/Target/KernelOptions.def"
  };
  return table;
}

const KernelOptionInfo *fa::lookupKernelOptionKeyword(llvm::StringRef keyword) {
  for (const KernelOptionInfo &option : kernelOptionTable())
    if (option.keyword == keyword)
      return &option;
  return nullptr;
}

std::string fa::describeKernelOptionValues(const KernelOptionInfo &option) {
  switch (option.keywordForm) {
  case KeywordForm::ChunkCount:
    return "None, 'auto' or a chunk count";
  case KeywordForm::NoneOrBool:
    return "True or False or None";
  case KeywordForm::Choice:
    return "one of the strings " + option.choices.str();
  case KeywordForm::Plain:
    break;
  case KeywordForm::NoneIsDefault:
    if (!option.choices.empty())
      return "one of the strings " + option.choices.str() + ", or None";
    break;
  }
  std::string kind;
  switch (option.kind) {
  case OptionKind::Bool:
    kind = "True or False";
    break;
  case OptionKind::Int:
    kind = "an integer";
    break;
  case OptionKind::Real:
    kind = "a number";
    break;
  case OptionKind::Text:
    kind = "a string";
    break;
  }
  return option.keywordForm == KeywordForm::NoneIsDefault ? kind + " or None"
                                                          : kind;
}

/// Sets field `field` (of type T) from `value` where its kind takes it.
template <typename T>
static bool assign(T &field, const KernelOptionValue &value) {
  if constexpr (OptionalOf<T>::value) {
    typename OptionalOf<T>::type choice;
    if (!assign(choice, value))
      return false;
    return field = choice, true;
  } else if constexpr (std::is_enum_v<T>) {
    if (const std::string *s = std::get_if<std::string>(&value))
      if (std::optional<T> choice = fagpu::parseChoice<T>(*s))
        return field = *choice, true;
  } else if constexpr (std::is_same_v<T, bool>) {
    if (const bool *b = std::get_if<bool>(&value))
      return field = *b, true;
  } else if constexpr (std::is_integral_v<T>) {
    if (const int64_t *i = std::get_if<int64_t>(&value))
      return field = T(*i), true;
  } else if constexpr (std::is_floating_point_v<T>) {
    if (const double *d = std::get_if<double>(&value))
      return field = *d, true;
    if (const int64_t *i = std::get_if<int64_t>(&value))
      return field = T(*i), true;
  } else {
    if (const std::string *s = std::get_if<std::string>(&value))
      return field = *s, true;
  }
  return false;
}

template <typename T>
static bool setInForm(T &field, const T &defaultValue, KeywordForm form,
                      const KernelOptionValue &value) {
  bool none = std::holds_alternative<std::monostate>(value);
  switch (form) {
  case KeywordForm::Plain:
  case KeywordForm::Choice:
    return assign(field, value);
  case KeywordForm::NoneIsDefault:
    if (none)
      return field = defaultValue, true;
    return assign(field, value);
  case KeywordForm::ChunkCount:
    // None: no split (0); "auto": the launch picks (-1); else the count.
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      if (none)
        return field = 0, true;
      if (const std::string *s = std::get_if<std::string>(&value))
        return *s == "auto" && (field = -1, true);
      return assign(field, value);
    }
    return false;
  case KeywordForm::NoneOrBool:
    // None: the back end's choice (-1); False 0; True 1.
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      if (none)
        return field = -1, true;
      if (const bool *b = std::get_if<bool>(&value))
        return field = *b ? 1 : 0, true;
    }
    return false;
  }
  return false;
}

std::optional<std::string> fa::setKernelOption(KernelOptions &options,
                                               const KernelOptionInfo &option,
                                               const KernelOptionValue &value) {
  static const KernelOptions defaults;
  // NaN is a NoneIsDefault real's sentinel ("the measured default"), spelt
  // None: a NaN given is a mistake, not a request for the default.
  if (const double *d = std::get_if<double>(&value))
    if (std::isnan(*d) && option.keywordForm == KeywordForm::NoneIsDefault)
      return option.keyword.str() + " must be " +
             describeKernelOptionValues(option) +
             " (pass None for the default; NaN is not a value)";
  bool set = false;
#define FA_KERNEL_OPTION(Field, Type, Default, Flag, FlagForm_, Keyword,       \
                         KeywordForm_, Help)                                   \
  if (option.field == #Field)                                                  \
    set = setInForm<Type>(options.Field, defaults.Field,                       \
                          KeywordForm::KeywordForm_, value);
#include "fa/Target/KernelOptions.def"
  if (set)
    return std::nullopt;
  return option.keyword.str() + " must be " +
         describeKernelOptionValues(option);
}

std::optional<KernelOptionError>
fa::checkKernelOptions(const KernelOptions &o) {
  auto optionOf = [](llvm::StringRef field) {
    for (const KernelOptionInfo &option : kernelOptionTable())
      if (option.field == field)
        return &option;
    llvm_unreachable("a field of KernelOptions.def");
  };
  // The kernels' positions are 32-bit (fa/Model/Positions.h).
  constexpr unsigned positionBits = 32;
  std::optional<std::string> why;
  auto fail = [&](llvm::StringRef field) {
    return KernelOptionError{optionOf(field), *why};
  };
  if ((why = checkHeadDim("head_dim", o.headDim)))
    return fail("headDim");
  if (o.valueHeadDim != 0 &&
      (why = checkHeadDim("value_head_dim", o.valueHeadDim)))
    return fail("valueHeadDim");
  if (o.window != 0 && (why = checkWindow(o.window, positionBits)))
    return fail("window");
  if (o.diagonalOffset != 0 &&
      (why = checkDiagonalOffset(o.diagonalOffset, positionBits)))
    return fail("diagonalOffset");
  if (o.scale != 0.0 && (why = checkScale(o.scale))) // NaN too: it is not 0
    return fail("scale");
  if (o.softcap != 0.0 && (why = checkSoftcap(o.softcap)))
    return fail("softcap");
  if (o.blockR != 0 && (why = checkTileSize("block_r", o.blockR)))
    return fail("blockR");
  if (o.blockC != 0 && (why = checkTileSize("block_c", o.blockC)))
    return fail("blockC");
  if (o.kvSplits < -1) {
    why = "expected kv_splits off (None), auto or a chunk count, got " +
          std::to_string(o.kvSplits);
    return fail("kvSplits");
  }
  if (o.kvSplits == 1) {
    why = "kv_splits = 1 is no split: give off (None), auto or a count of at "
          "least 2";
    return fail("kvSplits");
  }
  if (o.kvSplits > 1 && (why = checkKVSplits(o.kvSplits)))
    return fail("kvSplits");
  if (o.pageSize != 0) {
    if ((why = checkPageSize(o.pageSize))) {
      *why += " (0: contiguous K/V)";
      return fail("pageSize");
    }
  }
  // NaN: the measured default; < 0: off (-inf too would reach the metadata
  // as text that is not JSON).
  if (std::isinf(o.rescaleThreshold) && o.rescaleThreshold < 0) {
    why = "expected a finite rescale_threshold (< 0 turns rescaling off), "
          "got -inf";
    return fail("rescaleThreshold");
  }
  if (o.rescaleThreshold >= 0 &&
      (why = checkRescaleThreshold(o.rescaleThreshold, "rescale_threshold")))
    return fail("rescaleThreshold");
  if (o.polyExp2Degree < -1) {
    why = "expected -1 (the target's default), 0 (off) or a degree, got " +
          std::to_string(o.polyExp2Degree);
    return fail("polyExp2Degree");
  }
  // The period is written into the metadata whatever the degree; a degree
  // of -1 may pick the software exp2 on the target.
  if ((why = checkPolyExp2(o.polyExp2Degree > 0 ? o.polyExp2Degree
                                                : kMinPolyExp2Degree,
                           o.polyExp2Period)))
    return fail(o.polyExp2Degree > 0 ? "polyExp2Degree" : "polyExp2Period");
  return std::nullopt;
}

std::string fa::kernelFileName(const KernelOptions &o) {
  auto n = [](int64_t v) { return std::to_string(v); };
  std::string name = fagpu::stringifyTarget(o.arch).str() + "_d" + n(o.headDim);
  int64_t valueHeadDim = o.valueHeadDim ? o.valueHeadDim : o.headDim;
  if (valueHeadDim != o.headDim)
    name += "_dv" + n(valueHeadDim);
  name += "_" + fagpu::choiceName(o.dtype).str();
  // e4m3 kernels are named by their O too (f16 or bf16, bf16 by default).
  if (o.dtype == fagpu::ElementType::E4M3)
    name +=
        "_" +
        fagpu::choiceName(o.outDtype.value_or(fagpu::ElementType::BF16)).str();
  if (o.causal)
    name += "_causal";
  if (o.window)
    name += "_w" + n(o.window);
  if (o.softcap != 0.0) {
    char text[32];
    std::snprintf(text, sizeof(text), "%g", o.softcap); // Python's :g
    name += std::string("_sc") + text;
  }
  if (o.bottomRight)
    name += "_bralign";
  if (o.diagonalOffset)
    name += "_do" + n(o.diagonalOffset);
  if (o.kvSplits != 0)
    name += "_splitkv";
  if (o.kvLengths)
    name += "_kvlens";
  if (o.pageSize)
    name += "_paged" + n(o.pageSize);
  if (o.varlen)
    name += "_varlen";
  if (o.queryGroup)
    name += "_qg" + n(o.queryGroup);
  if (o.maxRows)
    name += "_mr" + n(o.maxRows);
  if (o.kvDtype == fagpu::ElementType::E4M3 &&
      o.dtype != fagpu::ElementType::E4M3)
    name += "_kve4m3";
  if (o.backward)
    name += "_bwd";
  if (o.deterministic)
    name += "_det";
  return name;
}

std::optional<KernelOptionError> fa::checkNamedByFile(const KernelOptions &o) {
  // The fields kernelFileName spells (and ptxas's path, which changes no
  // kernel); a split kernel by name is one whose launch picks the count.
  static const llvm::StringRef named[] = {
      "arch",        "headDim",        "valueHeadDim",  "dtype",
      "outDtype",    "kvDtype",        "causal",        "window",
      "bottomRight", "diagonalOffset", "softcap",       "kvSplits",
      "kvLengths",   "pageSize",       "varlen",        "queryGroup",
      "maxRows",     "backward",       "deterministic", "ptxas"};
  llvm::ArrayRef<KernelOptionInfo> table = kernelOptionTable();
  if (o.kvSplits > 0)
    return KernelOptionError{lookupKernelOptionKeyword("kv_splits"),
                             "a split-KV kernel found by its file name picks "
                             "its chunk count at launch: give auto, not " +
                                 std::to_string(o.kvSplits)};
  static const KernelOptions defaults;
  size_t index = 0;
  auto same = [](const auto &x, const auto &y) {
    if constexpr (std::is_floating_point_v<std::decay_t<decltype(x)>>)
      return x == y || (std::isnan(x) && std::isnan(y));
    else
      return x == y;
  };
#define FA_KERNEL_OPTION(Field, Type, Default, Flag, FlagForm_, Keyword,       \
                         KeywordForm_, Help)                                   \
  if (!llvm::is_contained(named, table[index].field) &&                        \
      !same(o.Field, defaults.Field))                                          \
    return KernelOptionError{&table[index],                                    \
                             "not part of a kernel's file name: name such a "  \
                             "kernel yourself"};                               \
  ++index;
#include "fa/Target/KernelOptions.def"
  return std::nullopt;
}
