//===- KernelOptionFlags.h - Flags of the kernel options ----*- C++ -*-===//
//
// One llvm::cl flag per kernel option (KernelOptions.def), each spelt in its
// flag form, registered in the tool's category: fa-compile declares none of
// its kernel options itself.
//
//===----------------------------------------------------------------------===//

#ifndef FA_TARGET_KERNELOPTIONFLAGS_H
#define FA_TARGET_KERNELOPTIONFLAGS_H

#include "fa/Target/KernelOptions.h"

#include "llvm/Support/CommandLine.h"

namespace mlir {
namespace fa {

namespace detail {
/// What a flag holds for a field of type T in form F.
template <FlagForm F, typename T> struct FlagStorage { using type = T; };
template <typename T> struct FlagStorage<FlagForm::Alignment, T> {
  using type = std::string;
};
template <typename T> struct FlagStorage<FlagForm::ChunkCount, T> {
  using type = std::string;
};
template <typename T> struct FlagStorage<FlagForm::Threshold, T> {
  using type = std::string;
};
template <typename T> struct FlagStorage<FlagForm::Tristate, T> {
  using type = llvm::cl::boolOrDefault;
};
template <typename T> struct FlagStorage<FlagForm::Choice, T> {
  using type = std::string;
};
template <typename T> struct FlagStorage<FlagForm::OptionalChoice, T> {
  using type = std::string;
};
} // namespace detail

class KernelOptionFlags {
public:
  /// Registers the flags in `category` (construct once, before
  /// cl::ParseCommandLineOptions).
  explicit KernelOptionFlags(llvm::cl::OptionCategory &category);

  /// The parsed flags into `options`, then checkKernelOptions: a value the
  /// flag's form cannot read (--split-kv lots) or one out of its range is
  /// the option's error.
  std::optional<KernelOptionError> apply(KernelOptions &options) const;

private:
  llvm::cl::OptionCategory &category; // the tool's, where --help lists them
#define FA_KERNEL_OPTION(Field, Type, Default, Flag, FlagForm_, Keyword,       \
                         KeywordForm, Help)                                    \
  llvm::cl::opt<typename detail::FlagStorage<FlagForm::FlagForm_, Type>::type> \
      Field;
#include "fa/Target/KernelOptions.def"
};

} // namespace fa
} // namespace mlir

#endif // FA_TARGET_KERNELOPTIONFLAGS_H
