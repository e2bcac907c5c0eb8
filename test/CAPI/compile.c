/* The compiler C API from plain C: register, parse, compile for the CPU
 * and for sm_90a, and report a bad target as a diagnostic. */
#include "fa-c/Compiler.h"
#include "fa-c/Passes.h"
#include "mlir-c/Pass.h"
#include "mlir-c/Diagnostics.h"

#include <stdio.h>
#include <string.h>

static const char *kModule =
    "func.func @attn(%q: memref<1x4x100x64xf16>, %k: memref<1x2x300x64xf16>,\n"
    "                %v: memref<1x2x300x64xf16>, %o: memref<1x4x100x64xf16>,\n"
    "                %l: memref<1x4x100xf32>) {\n"
    "  fa.attention %q, %k, %v outs(%o, %l : memref<1x4x100x64xf16>, "
    "memref<1x4x100xf32>) {causal}\n"
    "      : memref<1x4x100x64xf16>, memref<1x2x300x64xf16>, "
    "memref<1x2x300x64xf16>\n"
    "  return\n}\n";

static void printRef(MlirStringRef s, void *unused) {
  (void)unused;
  fwrite(s.data, 1, s.length, stdout);
}

static MlirLogicalResult onDiagnostic(MlirDiagnostic d, void *unused) {
  (void)unused;
  printf("diagnostic: ");
  mlirDiagnosticPrint(d, printRef, NULL);
  printf("\n");
  return mlirLogicalResultSuccess();
}

static void firstLine(const char *label, MlirStringRef s, const char *key) {
  const char *p = strstr(s.data, key);
  printf("%s: %.*s\n", label, p ? (int)strcspn(p, "\n") : 0, p ? p : "");
}

/* A call that must fail: prints its reason (faLastError). */
static void reportFailure(const char *what, FaCompiledKernel *k) {
  printf("== %s: %s: %.*s\n", what, k ? "compiled" : "refused",
         (int)faLastError().length, faLastError().data);
  faCompiledKernelDestroy(k);
}

int main(void) {
  MlirContext ctx = mlirContextCreate();
  faContextRegisterAll(ctx);
  /* No faRegisterPasses() yet: faCompileModule registers what its
     pipelines need itself. */
  mlirContextAttachDiagnosticHandler(ctx, onDiagnostic, NULL, NULL);
  MlirDialectHandle fa = mlirGetDialectHandle__fa__();
  printf("dialect: %.*s\n", (int)mlirDialectHandleGetNamespace(fa).length,
         mlirDialectHandleGetNamespace(fa).data);
  /* The library's version and the headers' (fa-c/Version.h). */
  printf("version: %s (headers %s)\n", faVersion(), FA_VERSION_STRING);

  FaCompileOptions options = faCompileOptionsDefault();
  /* sm_100a is compile-verified only; sm_75 is not a target (diagnostic). */
  const char *targets[] = {"cpu", "sm_90a", "sm_100a", "sm_75"};
  const char *mmaOf[] = {"", "wgmma.mma_async", "tcgen05.mma", ""};
  for (int i = 0; i < 4; ++i) {
    MlirModule m =
        mlirModuleCreateParse(ctx, mlirStringRefCreateFromCString(kModule));
    options.target = targets[i];
    FaCompiledKernel *k = faCompileModule(m, &options);
    printf("== %s: %s\n", targets[i], k ? "ok" : "failed");
    if (k) {
      if (i == 0) {
        firstLine("ir", faCompiledKernelIR(k), "llvm.func @attn");
      } else {
        printf("kernel: %.*s\n", (int)faCompiledKernelName(k).length,
               faCompiledKernelName(k).data);
        firstLine("ptx", faCompiledKernelPtx(k), ".target");
        firstLine("mma", faCompiledKernelPtx(k), mmaOf[i]);
        printf("cubin bytes > 0: %d\n", faCompiledKernelCubin(k).length > 0);
        firstLine("metadata", faCompiledKernelMetadata(k), "\"kernel\"");
      }
      faCompiledKernelDestroy(k);
    }
    mlirModuleDestroy(m);
  }
  /* Issue 15: the attention's own scale reaches the launch metadata, so a
   * runtime driven by the compiled artefacts alone applies it. */
  {
    const char *scaled =
        "func.func @attn(%q: memref<1x4x100x64xf16>, %o: memref<1x4x100x64xf16>, "
        "%l: memref<1x4x100xf32>) {\n"
        "  fa.attention %q, %q, %q outs(%o, %l : memref<1x4x100x64xf16>, "
        "memref<1x4x100xf32>) {scale = 0.5 : f32}\n"
        "      : memref<1x4x100x64xf16>, memref<1x4x100x64xf16>, "
        "memref<1x4x100x64xf16>\n"
        "  return\n}\n";
    MlirModule m =
        mlirModuleCreateParse(ctx, mlirStringRefCreateFromCString(scaled));
    options.target = "sm_90a";
    FaCompiledKernel *k = faCompileModule(m, &options);
    printf("== scale 0.5: %s\n", k ? "ok" : "failed");
    if (k) {
      firstLine("scale", faCompiledKernelMetadata(k), "\"scale\"");
      faCompiledKernelDestroy(k);
    }
    mlirModuleDestroy(m);
  }
  /* Issue 15: a module with two attention layers (different head dims,
   * masks, dtypes and scales; one without LSE) compiles to one binary with
   * a launch, and launch metadata, per attention. */
  {
    const char *twoLayers =
        "func.func @layers(%q: memref<2x8x300x128xbf16>, %k: "
        "memref<2x2x300x128xbf16>, %o: memref<2x8x300x128xbf16>, "
        "%l: memref<2x8x300xf32>, %q2: memref<1x4x100x64xf16>, "
        "%o2: memref<1x4x100x64xf16>) {\n"
        "  fa.attention %q, %k, %k outs(%o, %l : memref<2x8x300x128xbf16>, "
        "memref<2x8x300xf32>) {causal}\n"
        "      : memref<2x8x300x128xbf16>, memref<2x2x300x128xbf16>, "
        "memref<2x2x300x128xbf16>\n"
        "  fa.attention %q2, %q2, %q2 outs(%o2 : memref<1x4x100x64xf16>) "
        "{scale = 0.5 : f32}\n"
        "      : memref<1x4x100x64xf16>, memref<1x4x100x64xf16>, "
        "memref<1x4x100x64xf16>\n"
        "  return\n}\n";
    MlirModule m =
        mlirModuleCreateParse(ctx, mlirStringRefCreateFromCString(twoLayers));
    options.target = "sm_90a";
    FaCompiledKernel *k = faCompileModule(m, &options);
    printf("== two layers: %s, %d launches\n", k ? "ok" : "failed",
           (int)faCompiledKernelLaunchCount(k));
    for (intptr_t i = 0; i < faCompiledKernelLaunchCount(k); ++i) {
      printf("launch %d: %.*s\n", (int)i,
             (int)faCompiledKernelLaunchName(k, i).length,
             faCompiledKernelLaunchName(k, i).data);
      firstLine("  scale", faCompiledKernelLaunchMetadata(k, i), "\"scale\"");
      firstLine("  lse", faCompiledKernelLaunchMetadata(k, i),
                "\"writes_lse\"");
    }
    firstLine("ptx entry", faCompiledKernelPtx(k), ".entry");
    printf("out of range: '%.*s'\n",
           (int)faCompiledKernelLaunchName(k, 2).length,
           faCompiledKernelLaunchName(k, 2).data);
    faCompiledKernelDestroy(k);
    mlirModuleDestroy(m);
  }
  /* Hardening (issue 16): bad arguments are refused with a reason, never
   * dereferenced. Before, a null module (a failed parse) crashed. */
  MlirModule bad = mlirModuleCreateParse(
      ctx, mlirStringRefCreateFromCString("func.func @f( {"));
  printf("== failed parse gives a null module: %d\n", mlirModuleIsNull(bad));
  reportFailure("null module", faCompileModule(bad, &options));
  struct {
    const char *what, *target;
    double threshold;
    int degree, period, nullOptions;
  } cases[] = {
      {"null options", "cpu", -1, 0, 8, 1},
      {"null target", NULL, -1, 0, 8, 0},
      {"infinite rescale threshold", "cpu", 1.0 / 0.0, 0, 8, 0},
      {"rescale threshold 200", "sm_90a", 200, 0, 8, 0},
      /* -inf is not "off": it would reach the metadata as text that is not
       * JSON. */
      {"rescale threshold -inf", "sm_90a", -1.0 / 0.0, 0, 8, 0},
      {"software exp2 degree 7", "cpu", -1, 7, 8, 0},
      {"software exp2 period 0 (target default degree)", "sm_100a", -1, -1,
       0, 0},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    MlirModule m =
        mlirModuleCreateParse(ctx, mlirStringRefCreateFromCString(kModule));
    FaCompileOptions o = faCompileOptionsDefault();
    o.target = cases[i].target;
    o.rescaleThreshold = cases[i].threshold;
    o.polyExp2Degree = cases[i].degree;
    o.polyExp2Period = cases[i].period;
    reportFailure(cases[i].what,
                  faCompileModule(m, cases[i].nullOptions ? NULL : &o));
    mlirModuleDestroy(m);
  }
  printf("== null kernel accessors: %d %d %d %d %d\n",
         (int)faCompiledKernelName(NULL).length,
         (int)faCompiledKernelPtx(NULL).length,
         (int)faCompiledKernelCubin(NULL).length,
         (int)faCompiledKernelMetadata(NULL).length,
         (int)faCompiledKernelIR(NULL).length);
  faCompiledKernelDestroy(NULL);
  MlirContext nullContext = {NULL};
  faContextRegisterAll(nullContext);
  printf("== null context: %.*s\n", (int)faLastError().length,
         faLastError().data);

  /* The generated pass C API: a pass manager built from fa passes. */
  faRegisterPasses();
  mlirRegisterFAPasses();
  mlirRegisterFAConversionPasses();
  MlirModule m = mlirModuleCreateParse(ctx, mlirStringRefCreateFromCString(kModule));
  MlirPassManager pm = mlirPassManagerCreate(ctx);
  MlirOpPassManager fpm = mlirPassManagerGetNestedUnder(
      pm, mlirStringRefCreateFromCString("func.func"));
  mlirOpPassManagerAddOwnedPass(fpm, mlirCreateFAFATile());
  mlirOpPassManagerAddOwnedPass(fpm, mlirCreateFAFALowerFA2());
  MlirLogicalResult r = mlirPassManagerRunOnOp(pm, mlirModuleGetOperation(m));
  printf("== pass C API: fa-tile, fa-lower-fa2: %s\n",
         mlirLogicalResultIsSuccess(r) ? "ok" : "failed");
  mlirOperationPrint(mlirModuleGetOperation(m), printRef, NULL);
  mlirPassManagerDestroy(pm);
  mlirModuleDestroy(m);
  mlirContextDestroy(ctx);
  return 0;
}
