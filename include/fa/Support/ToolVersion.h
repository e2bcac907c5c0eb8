//===- ToolVersion.h - what the tools' --version prints ---------*- C++ -*-===//
//
// flash-mlir's command-line tools print the project's version (the CMake
// project's, fa-c/Version.h) and the LLVM they were built against, instead
// of LLVM's own version banner.
//
//===----------------------------------------------------------------------===//

#ifndef FA_SUPPORT_TOOLVERSION_H
#define FA_SUPPORT_TOOLVERSION_H

#include "fa-c/Version.h"

#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::fa {

/// Makes --version print "<tool> (flash-mlir X.Y.Z, LLVM A.B.C)"; call
/// before parsing the command line.
inline void setToolVersionPrinter(const char *tool) {
  llvm::cl::SetVersionPrinter([tool](llvm::raw_ostream &os) {
    os << tool << " (flash-mlir " FA_VERSION_STRING ", LLVM "
       << LLVM_VERSION_STRING ")\n";
  });
}

} // namespace mlir::fa

#endif // FA_SUPPORT_TOOLVERSION_H
