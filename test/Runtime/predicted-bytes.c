/* Prints the runtime's traffic prediction for a kernel's metadata file
 * (no driver, no GPU):
 *   predicted-bytes KERNEL.json B Hq Hkv Nq Nk
 *     faMetadataPredictedBytes for a batch of one shape;
 *   predicted-bytes KERNEL.json --sequences Hq Hkv Nq1:Nk1,Nq2:Nk2,...
 *     faMetadataPredictedSequenceBytes for sequences of their own lengths
 *     (a KV cache's, a varlen batch's).
 * Exit status 1 with the runtime's message on error. */
#include "fa-c/Runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  int sequences = argc == 6 && strcmp(argv[2], "--sequences") == 0;
  if (argc != 7 && !sequences) {
    fprintf(stderr, "usage: predicted-bytes KERNEL.json B Hq Hkv Nq Nk\n"
                    "       predicted-bytes KERNEL.json --sequences Hq Hkv "
                    "Nq1:Nk1,...\n");
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
  unsigned long long reads = 0, writes = 0;
  int status;
  if (sequences) {
    static long queries[4096], keys[4096];
    long count = 0;
    for (char *item = strtok(argv[5], ","); item && count < 4096;
         item = strtok(NULL, ","), ++count)
      if (sscanf(item, "%ld:%ld", &queries[count], &keys[count]) != 2) {
        fprintf(stderr, "predicted-bytes: bad sequence '%s'\n", item);
        return 2;
      }
    status = faMetadataPredictedSequenceBytes(
        json, strtol(argv[3], NULL, 10), strtol(argv[4], NULL, 10), count,
        queries, keys, &reads, &writes);
  } else {
    long shape[5];
    for (int i = 0; i < 5; ++i)
      shape[i] = strtol(argv[2 + i], NULL, 10);
    status = faMetadataPredictedBytes(json, shape[0], shape[1], shape[2],
                                      shape[3], shape[4], &reads, &writes);
  }
  if (status) {
    fprintf(stderr, "predicted-bytes: %s\n", faRuntimeLastError());
    return 1;
  }
  printf("runtime read_bytes: %llu\nruntime write_bytes: %llu\n", reads,
         writes);
  return 0;
}
