/* fa-compile-module: an embedding compiler's path through the C API, as a
 * command. Parses a user's MLIR module, optionally raises the attention a
 * front end spelled in linalg (fa-raise-attention, through MLIR's C pass
 * manager), compiles every fa.attention for a GPU target with
 * faCompileModule, and writes what a runtime needs to launch them:
 *
 *   fa-compile-module [--raise] [--arch sm_90a] -o DIR module.mlir
 *
 * DIR/module.ptx, DIR/module.cubin (one binary), and per launch i (program
 * order) DIR/launch<i>.json, the launch's metadata (its kernel, scale,
 * masks, head dim, parameters). Diagnostics go to stderr with their
 * location; the exit status is 0 only if every step succeeded. Linked, like
 * an embedder, against libFlashMLIRCAPI.so alone. */
#include "fa-c/Compiler.h"
#include "fa-c/Version.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void printRef(MlirStringRef s, void *unused) {
  (void)unused;
  fwrite(s.data, 1, s.length, stderr);
}

static MlirLogicalResult onDiagnostic(MlirDiagnostic d, void *unused) {
  (void)unused;
  mlirLocationPrint(mlirDiagnosticGetLocation(d), printRef, NULL);
  fprintf(stderr, ": ");
  mlirDiagnosticPrint(d, printRef, NULL);
  fprintf(stderr, "\n");
  return mlirLogicalResultSuccess();
}

static char *readFile(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap + 1);
  size_t got;
  while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) {
      char *bigger = realloc(buf, 2 * cap + 1);
      if (!bigger) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = bigger;
      cap *= 2;
    }
  }
  fclose(f);
  if (buf) {
    buf[n] = 0;
    *size = n;
  }
  return buf;
}

static int writeFile(const char *dir, const char *name, MlirStringRef data) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(data.data, 1, data.length, f) != data.length) {
    fprintf(stderr, "fa-compile-module: cannot write %s\n", path);
    if (f)
      fclose(f);
    return 1;
  }
  fclose(f);
  return 0;
}

static const char kUsage[] =
    "usage: fa-compile-module [--raise] [--arch sm_80|sm_90a|sm_100a] -o DIR "
    "module.mlir\n";

static int usage(void) {
  fputs(kUsage, stderr);
  return 2;
}

static int help(void) {
  printf("OVERVIEW: compile every fa.attention of an MLIR module for a GPU "
         "through flash-mlir's C API\n\n%s\n"
         "  --raise        raise attention spelled in linalg first "
         "(fa-raise-attention)\n"
         "  --arch ARCH    sm_80, sm_90a (default) or sm_100a\n"
         "  -o DIR         the output folder (made if missing): module.ptx, "
         "module.cubin, launch<i>.json\n"
         "  --help         this text\n"
         "  --version      the version\n",
         kUsage);
  return 0;
}

/* Makes `dir` and its parents (as mkdir -p); 0 on success. */
static int makeFolder(const char *dir) {
  char path[4096];
  size_t n = strlen(dir);
  if (n == 0 || n >= sizeof(path))
    return 1;
  memcpy(path, dir, n + 1);
  for (size_t i = 1; i <= n; ++i) {
    if (path[i] != '/' && path[i] != 0)
      continue;
    char saved = path[i];
    path[i] = 0;
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
      return 1;
    path[i] = saved;
  }
  struct stat st;
  return stat(dir, &st) != 0 || !S_ISDIR(st.st_mode);
}

int main(int argc, char **argv) {
  const char *arch = "sm_90a", *out = NULL, *input = NULL;
  int raise = 0;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
      return help();
    if (!strcmp(argv[i], "--version")) {
      printf("fa-compile-module (flash-mlir %s)\n", FA_VERSION_STRING);
      return 0;
    }
    if (!strcmp(argv[i], "--raise"))
      raise = 1;
    else if (!strcmp(argv[i], "--arch") && i + 1 < argc)
      arch = argv[++i];
    else if (!strcmp(argv[i], "-o") && i + 1 < argc)
      out = argv[++i];
    else if (argv[i][0] != '-' && !input)
      input = argv[i];
    else
      return usage();
  }
  if (!out || !input)
    return usage();
  size_t size = 0;
  char *text = readFile(input, &size);
  if (!text) {
    fprintf(stderr, "fa-compile-module: cannot read %s\n", input);
    return 1;
  }
  free(text);
  /* The output folder before the compile: made if missing, refused if it
   * cannot be. */
  if (makeFolder(out)) {
    fprintf(stderr, "fa-compile-module: -o %s: cannot create the folder "
                    "(%s)\n",
            out, strerror(errno ? errno : ENOTDIR));
    return 1;
  }

  MlirContext ctx = mlirContextCreate();
  mlirContextAttachDiagnosticHandler(ctx, onDiagnostic, NULL, NULL);
  faContextRegisterAll(ctx);
  faRegisterPasses();
  /* Parsed from the file, so that diagnostics name it. */
  MlirModule module = mlirModuleCreateParseFromFile(
      ctx, mlirStringRefCreateFromCString(input));
  int status = 1;
  FaCompiledKernel *kernel = NULL;
  if (mlirModuleIsNull(module))
    goto done;
  if (raise) {
    MlirPassManager pm = mlirPassManagerCreate(ctx);
    MlirOpPassManager opm = mlirPassManagerGetAsOpPassManager(pm);
    MlirLogicalResult parsed = mlirParsePassPipeline(
        opm,
        mlirStringRefCreateFromCString(
            "builtin.module(func.func(fa-raise-attention))"),
        printRef, NULL);
    MlirLogicalResult ran =
        mlirLogicalResultIsSuccess(parsed)
            ? mlirPassManagerRunOnOp(pm, mlirModuleGetOperation(module))
            : parsed;
    mlirPassManagerDestroy(pm);
    if (mlirLogicalResultIsFailure(ran)) {
      fprintf(stderr, "fa-compile-module: fa-raise-attention failed\n");
      goto done;
    }
  }
  FaCompileOptions options = faCompileOptionsDefault();
  options.target = arch;
  kernel = faCompileModule(module, &options);
  if (!kernel) {
    MlirStringRef why = faLastError();
    fprintf(stderr, "fa-compile-module: compilation failed%s%.*s\n",
            why.length ? ": " : "", (int)why.length, why.data);
    goto done;
  }
  intptr_t launches = faCompiledKernelLaunchCount(kernel);
  if (launches == 0) {
    fprintf(stderr, "fa-compile-module: the module holds no fa.attention "
                    "(with --raise: none was raised)\n");
    goto done;
  }
  if (writeFile(out, "module.ptx", faCompiledKernelPtx(kernel)) ||
      writeFile(out, "module.cubin", faCompiledKernelCubin(kernel)))
    goto done;
  for (intptr_t i = 0; i < launches; ++i) {
    char name[64];
    snprintf(name, sizeof(name), "launch%d.json", (int)i);
    if (writeFile(out, name, faCompiledKernelLaunchMetadata(kernel, i)))
      goto done;
    MlirStringRef kernelName = faCompiledKernelLaunchName(kernel, i);
    printf("fa-compile-module: launch %d: %.*s -> %s/%s\n", (int)i,
           (int)kernelName.length, kernelName.data, out, name);
  }
  status = 0;
done:
  if (kernel)
    faCompiledKernelDestroy(kernel);
  if (!mlirModuleIsNull(module))
    mlirModuleDestroy(module);
  mlirContextDestroy(ctx);
  return status;
}
