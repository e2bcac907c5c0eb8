//===- fa-opt.cpp - flash-mlir optimizer driver ---------------------------===//
//
// mlir-opt with the fa dialect, passes and pipelines registered. The input
// is read here first so that inputs known to crash the upstream parser get
// a diagnostic instead (include/fa/Support/UpstreamParserGuard.h).
//
//===----------------------------------------------------------------------===//

#include "fa/Pipelines/Pipelines.h"
#include "fa/Support/ToolVersion.h"
#include "fa/Support/UpstreamParserGuard.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::fa::registerAllFADialects(registry);
  mlir::fa::registerAllFAPasses();
  mlir::fa::setToolVersionPrinter("fa-opt");
  auto [inputFilename, outputFilename] = mlir::registerAndParseCLIOptions(
      argc, argv, "flash-mlir optimizer driver\n", registry);
  mlir::MlirOptMainConfig config =
      mlir::MlirOptMainConfig::createFromCLOptions();
  // --show-dialects / --list-passes read no input (that overload sets up
  // InitLLVM itself).
  if (config.shouldShowDialects() || config.shouldListPasses())
    return mlir::asMainReturnCode(
        mlir::MlirOptMain(argc, argv, inputFilename, outputFilename, registry));
  llvm::InitLLVM init(argc, argv);
  // As mlir-opt: reading a terminal is often a mistake; say so.
  if (inputFilename == "-" &&
      llvm::sys::Process::FileDescriptorIsDisplayed(fileno(stdin)))
    llvm::errs() << "(processing input from stdin now, hit ctrl-c/ctrl-d to "
                    "interrupt)\n";

  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input =
      mlir::openInputFile(inputFilename, &error);
  if (!input) {
    llvm::errs() << error << "\n";
    return 1;
  }
  llvm::StringRef text = input->getBuffer();
  if (size_t at = mlir::fa::findUpstreamLinalgParserCrash(text);
      at != llvm::StringRef::npos) {
    size_t line = text.take_front(at).count('\n') + 1;
    llvm::errs() << inputFilename << ":" << line
                 << ": error: malformed integer list after '"
                 << text.drop_front(at).take_until([](char c) {
                      return c == ' ' || c == '=';
                    })
                 << " =' (expected [i, j, ...]); refused because MLIR "
                    "22.1.8's linalg parser crashes on it\n";
    return 1;
  }
  std::unique_ptr<llvm::ToolOutputFile> output =
      mlir::openOutputFile(outputFilename, &error);
  if (!output) {
    llvm::errs() << error << "\n";
    return 1;
  }
  if (mlir::failed(mlir::MlirOptMain(output->os(), std::move(input), registry,
                                     config)))
    return 1;
  output->keep();
  return 0;
}
