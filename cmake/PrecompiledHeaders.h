//===- PrecompiledHeaders.h - MLIR headers parsed once a build ------------===//
//
// The MLIR and LLVM headers that nearly every translation unit of the
// compiler libraries and tools includes, precompiled once (CMake's
// target_precompile_headers, FA_PRECOMPILED_HEADERS) and reused by each
// target of the same flags. Parsing and instantiating these headers is most
// of a translation unit's compile time; on a 2-core build machine the
// precompiled header halves a clean build. Only stable, external headers
// belong here: a change to one of the project's headers must not rebuild
// every translation unit.
//
//===----------------------------------------------------------------------===//

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Transforms/DialectConversion.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/raw_ostream.h"
