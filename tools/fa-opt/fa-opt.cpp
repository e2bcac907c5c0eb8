//===- fa-opt.cpp - flash-mlir optimizer driver ---------------------------===//

#include "fa/Pipelines/Pipelines.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::fa::registerAllFADialects(registry);
  mlir::fa::registerAllFAPasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "flash-mlir optimizer driver\n", registry));
}
