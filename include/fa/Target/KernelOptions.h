//===- KernelOptions.h - A kernel's options, declared once ---*- C++ -*-===//
//
// fa::KernelOptions and its table, both generated from KernelOptions.def:
// the struct the compiler takes, the table the surfaces read (fa-compile's
// flags in KernelOptionFlags.h, flashmlir.compile()'s keywords through
// setKernelOption), and the one range check every surface calls
// (checkKernelOptions).
//
//===----------------------------------------------------------------------===//

#ifndef FA_TARGET_KERNELOPTIONS_H
#define FA_TARGET_KERNELOPTIONS_H

#include "fa/Dialect/FAGPU/IR/Choices.h"
#include "fa/Dialect/FAGPU/IR/FAGPU.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <variant>

namespace mlir {
namespace fagpu {
/// The targets by the names of their enum (fagpu::stringifyTarget), for
/// --arch and arch=.
template <> struct ChoiceNames<Target> {
  static constexpr std::array<std::pair<Target, const char *>, 3> values = {
      {{Target::sm_80, "sm_80"},
       {Target::sm_90a, "sm_90a"},
       {Target::sm_100a, "sm_100a"}}};
};
} // namespace fagpu

namespace fa {

struct KernelOptions {
#define FA_KERNEL_OPTION(Field, Type, Default, Flag, FlagForm, Keyword,        \
                         KeywordForm, Help)                                    \
  Type Field = Default;
#include "fa/Target/KernelOptions.def"
  /// Not an option of the kernel: whether the compile runs ptxas (fa-compile's
  /// --emit and --no-cubin, compile()'s run_ptxas).
  bool runPtxas = true;
};

/// How fa-compile spells an option's value (KernelOptions.def).
enum class FlagForm {
  Plain,
  Alignment,
  Inverted,
  ChunkCount,
  Threshold,
  Tristate,
  Choice,
  OptionalChoice
};
/// How compile()'s keyword spells it.
enum class KeywordForm { Plain, NoneIsDefault, ChunkCount, NoneOrBool, Choice };
/// The field's type.
enum class OptionKind { Bool, Int, Real, Text };

struct KernelOptionInfo {
  llvm::StringRef field, flag, keyword;
  OptionKind kind;
  FlagForm flagForm;
  KeywordForm keywordForm;
  llvm::StringRef help;
  /// A typed choice's spellings ("on, off or auto"); empty otherwise.
  llvm::StringRef choices;
};

/// Every option, in KernelOptions.def's order.
llvm::ArrayRef<KernelOptionInfo> kernelOptionTable();
/// The option of a keyword; nullptr for none.
const KernelOptionInfo *lookupKernelOptionKeyword(llvm::StringRef keyword);

/// What the keyword of `option` takes, as the type errors say it: "True or
/// False", "an integer or None", "None, 'auto' or a chunk count", ...
std::string describeKernelOptionValues(const KernelOptionInfo &option);

/// A value as a binding holds it before it becomes a field: None, a bool,
/// an integer, a real or a string.
using KernelOptionValue =
    std::variant<std::monostate, bool, int64_t, double, std::string>;

/// Sets the option of `keyword` from `value` in its keyword form (None for a
/// NoneIsDefault keyword's default, "auto" for a chunk count, ...). On a
/// value of the wrong type, the reason without the value: "causal must be
/// True or False" (the binding appends what it got).
std::optional<std::string> setKernelOption(KernelOptions &options,
                                           const KernelOptionInfo &option,
                                           const KernelOptionValue &value);

/// The file name (without .ptx/.cubin/.json) of a kernel in a kernel
/// folder: the target, head dims, dtypes and what the kernel computes (masks,
/// split-KV, KV cache, varlen, query groups), e.g.
/// sm_90a_d128_f16_causal_bralign_splitkv_kvlens_paged64. flashmlir's
/// kernel lookup (flashmlir.kernel_file_name) spells the same rule in
/// Python, for machines without the compiler; a test checks they agree.
std::string kernelFileName(const KernelOptions &options);
struct KernelOptionError;
/// Why `options` cannot be named by kernelFileName: an option the name does
/// not spell (a schedule choice, a scale, a fixed split count) away from
/// its default, which a lookup by name would not see.
std::optional<KernelOptionError> checkNamedByFile(const KernelOptions &options);

/// A value out of its range, and the option it belongs to; the message
/// names the value by its keyword ("expected head_dim in [1, 65536], got
/// 0"), a tool puts its flag before it.
struct KernelOptionError {
  const KernelOptionInfo *option;
  std::string message;
};

/// Every value through its one range check (fa/Dialect/FA/IR/Validation.h),
/// with the GPU kernels' 32-bit positions; 0 (and the other "not given"
/// values) are not checked. Combinations a target refuses are left to the
/// compiler, which knows the target's reasons.
std::optional<KernelOptionError>
checkKernelOptions(const KernelOptions &options);

} // namespace fa
} // namespace mlir

#endif // FA_TARGET_KERNELOPTIONS_H
