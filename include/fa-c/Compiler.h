/*===- fa-c/Compiler.h - flash-mlir compiler C API ----------------*- C -*-===*\
|*                                                                            *|
|* The fa dialect, its passes and pipelines, and one entry point that         *|
|* compiles a module holding fa.attention for a target, for ML compilers      *|
|* that embed flash-mlir through MLIR's C API. Errors are reported as         *|
|* diagnostics on the context (mlirContextAttachDiagnosticHandler), never     *|
|* by aborting.                                                               *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef FA_C_COMPILER_H
#define FA_C_COMPILER_H

#include "mlir-c/IR.h"
#include "mlir-c/Support.h"

#include "fa-c/Version.h"

#ifdef __cplusplus
extern "C" {
#endif

MLIR_DECLARE_CAPI_DIALECT_REGISTRATION(FA, fa);

/** The version of the library loaded at run time ("0.2.0"), to compare
 *  with the headers' FA_VERSION_STRING (fa-c/Version.h). */
MLIR_CAPI_EXPORTED const char *faVersion(void);

/** Registers the fa dialect, the upstream dialects, extensions and LLVM IR
 *  translations the pipelines need, on `context`, and loads them. */
MLIR_CAPI_EXPORTED void faContextRegisterAll(MlirContext context);

/** Registers every fa pass and pipeline (fa-cpu-pipeline,
 *  fa-sm80-pipeline) and the upstream passes for mlirParsePassPipeline.
 *  faCompileModule does not need it (it registers what it uses). */
MLIR_CAPI_EXPORTED void faRegisterPasses(void);

typedef struct {
  const char *target;      /* "cpu", "sm_80", "sm_90a", "sm_100a" (the
                              Blackwell kernel: compile-verified only) */
  double rescaleThreshold; /* < 0 off; NaN: measured default */
  int polyExp2Degree;      /* 0 off, 2..5; < 0: the target's default (3 on
                              sm_100a as in FA4, else off) */
  int polyExp2Period;
  int runPtxas;            /* GPU targets: also make the cubin */
} FaCompileOptions;

/** Defaults: sm_90a, measured rescaling default, the target's software
 *  exp2 default, ptxas. */
MLIR_CAPI_EXPORTED FaCompileOptions faCompileOptionsDefault(void);

typedef struct FaCompiledKernel FaCompiledKernel;

/** Compiles the module (lowered in place). For "cpu" the module ends in
 *  the LLVM dialect and only `ir` is set; for GPU targets the kernel's PTX,
 *  cubin and JSON launch metadata are set too. Returns NULL on failure
 *  after emitting diagnostics. A null module (e.g. a failed
 *  mlirModuleCreateParse), null options or a null target are refused
 *  (NULL, reason in faLastError(); on the context too when there is a
 *  module), as are a rescaleThreshold above 64 (or +inf) and a software exp2
 *  degree or period out of range (see fa/Dialect/FA/IR/Validation.h). */
MLIR_CAPI_EXPORTED FaCompiledKernel *
faCompileModule(MlirModule module, const FaCompileOptions *options);

/* The accessors return an empty string for a NULL kernel. */
MLIR_CAPI_EXPORTED MlirStringRef faCompiledKernelName(const FaCompiledKernel *);
MLIR_CAPI_EXPORTED MlirStringRef faCompiledKernelPtx(const FaCompiledKernel *);
MLIR_CAPI_EXPORTED MlirStringRef faCompiledKernelCubin(const FaCompiledKernel *);
MLIR_CAPI_EXPORTED MlirStringRef
faCompiledKernelMetadata(const FaCompiledKernel *);
/** The IR after the target's fa lowering: the LLVM-dialect module for
 *  "cpu", the gpu.module in NVVM for GPU targets. */
MLIR_CAPI_EXPORTED MlirStringRef faCompiledKernelIR(const FaCompiledKernel *);
MLIR_CAPI_EXPORTED void faCompiledKernelDestroy(FaCompiledKernel *);

/** GPU targets: every fa.attention of the module is one launch, in program
 *  order, of a kernel in the PTX/cubin above (equal kernels are built
 *  once). The count (0 for a NULL kernel or "cpu"), and each launch's
 *  kernel name and JSON metadata (its own scale, mask, head dim); an index
 *  out of range gives the empty string. The accessors above return the
 *  first launch's. */
MLIR_CAPI_EXPORTED intptr_t
faCompiledKernelLaunchCount(const FaCompiledKernel *);
MLIR_CAPI_EXPORTED MlirStringRef
faCompiledKernelLaunchName(const FaCompiledKernel *, intptr_t index);
MLIR_CAPI_EXPORTED MlirStringRef
faCompiledKernelLaunchMetadata(const FaCompiledKernel *, intptr_t index);

/** Why the last faCompileModule or faContextRegisterAll call on this thread
 *  failed when the cause was its arguments (a null module, context,
 *  options or target; an option out of range); empty otherwise. Diagnostics
 *  of the compilation itself are on the context. */
MLIR_CAPI_EXPORTED MlirStringRef faLastError(void);

#ifdef __cplusplus
}
#endif

#endif /* FA_C_COMPILER_H */
