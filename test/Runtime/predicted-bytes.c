/* Prints faMetadataPredictedBytes for a kernel's metadata file and a shape:
 *   predicted-bytes KERNEL.json B Hq Hkv Nq Nk
 * (no driver, no GPU). Exit status 1 with the runtime's message on error. */
#include "fa-c/Runtime.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  if (argc != 7) {
    fprintf(stderr, "usage: predicted-bytes KERNEL.json B Hq Hkv Nq Nk\n");
    return 2;
  }
  FILE *f = fopen(argv[1], "rb");
  if (!f) {
    fprintf(stderr, "predicted-bytes: cannot read %s\n", argv[1]);
    return 1;
  }
  static char json[1 << 20];
  size_t n = fread(json, 1, sizeof(json) - 1, f);
  fclose(f);
  json[n] = 0;
  long shape[5];
  for (int i = 0; i < 5; ++i)
    shape[i] = strtol(argv[2 + i], NULL, 10);
  unsigned long long reads = 0, writes = 0;
  if (faMetadataPredictedBytes(json, shape[0], shape[1], shape[2], shape[3],
                               shape[4], &reads, &writes)) {
    fprintf(stderr, "predicted-bytes: %s\n", faRuntimeLastError());
    return 1;
  }
  printf("runtime read_bytes: %llu\nruntime write_bytes: %llu\n", reads,
         writes);
  return 0;
}
