/* An out-of-tree C consumer of the installed libFlashMLIRCAPI.so: parse a
 * module holding one fa.attention, compile it for sm_90a to PTX (no GPU and
 * no ptxas needed) and check what an embedding compiler reads back: the PTX
 * entry, the launch metadata, the version. Exit status 0 only if all hold. */
#include "fa-c/Compiler.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/IR.h"

#include <stdio.h>
#include <string.h>

static const char *kModule =
    "func.func @layer(%q: memref<2x8x256x128xbf16>, %k: memref<2x2x256x128xbf16>,\n"
    "                 %v: memref<2x2x256x128xbf16>, %o: memref<2x8x256x128xbf16>) {\n"
    "  fa.attention %q, %k, %v outs(%o : memref<2x8x256x128xbf16>) {causal}\n"
    "      : memref<2x8x256x128xbf16>, memref<2x2x256x128xbf16>,"
    " memref<2x2x256x128xbf16>\n"
    "  return\n}\n";

static void printRef(MlirStringRef s, void *unused) {
  (void)unused;
  fwrite(s.data, 1, s.length, stderr);
}

static MlirLogicalResult onDiagnostic(MlirDiagnostic d, void *unused) {
  (void)unused;
  fprintf(stderr, "c-consumer: diagnostic: ");
  mlirDiagnosticPrint(d, printRef, NULL);
  fprintf(stderr, "\n");
  return mlirLogicalResultSuccess();
}

/* Whether `s` contains `needle` (MlirStringRef is not 0-terminated). */
static int contains(MlirStringRef s, const char *needle) {
  size_t n = strlen(needle);
  for (size_t i = 0; n <= s.length && i + n <= s.length; ++i)
    if (memcmp(s.data + i, needle, n) == 0)
      return 1;
  return 0;
}

static int check(int ok, const char *what) {
  printf("c-consumer: %s: %s\n", what, ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}

int main(void) {
  int failures = 0;
  failures += check(strcmp(faVersion(), FA_VERSION_STRING) == 0,
                    "library version matches the headers' " FA_VERSION_STRING);

  MlirContext ctx = mlirContextCreate();
  mlirContextAttachDiagnosticHandler(ctx, onDiagnostic, NULL, NULL);
  faContextRegisterAll(ctx);
  MlirModule module =
      mlirModuleCreateParse(ctx, mlirStringRefCreateFromCString(kModule));
  failures += check(!mlirModuleIsNull(module), "parse");

  FaCompileOptions options = faCompileOptionsDefault();
  options.target = "sm_90a";
  options.runPtxas = 0; /* PTX only: no CUDA toolkit needed */
  FaCompiledKernel *kernel = faCompileModule(module, &options);
  failures += check(kernel != NULL, "faCompileModule for sm_90a");
  if (kernel) {
    MlirStringRef name = faCompiledKernelName(kernel);
    MlirStringRef ptx = faCompiledKernelPtx(kernel);
    MlirStringRef metadata = faCompiledKernelMetadata(kernel);
    printf("c-consumer: kernel %.*s, %zu bytes of PTX, %zu of metadata\n",
           (int)name.length, name.data, ptx.length, metadata.length);
    failures += check(name.length > 0, "kernel name");
    failures += check(ptx.length > 0 && contains(ptx, ".target sm_90a") &&
                          contains(ptx, ".entry") &&
                          contains(ptx, "wgmma.mma_async"),
                      "PTX for sm_90a (.entry, wgmma)");
    failures += check(contains(metadata, "\"kernel\"") &&
                          contains(metadata, "\"params\"") &&
                          contains(metadata, "\"scale\"") &&
                          contains(metadata, "\"writes_lse\": false"),
                      "launch metadata (kernel, params, scale, no LSE)");
    failures += check(faCompiledKernelLaunchCount(kernel) == 1, "one launch");
    faCompiledKernelDestroy(kernel);
  }
  if (!mlirModuleIsNull(module))
    mlirModuleDestroy(module);
  mlirContextDestroy(ctx);
  printf("c-consumer: %s\n", failures ? "FAILED" : "passed");
  return failures ? 1 : 0;
}
