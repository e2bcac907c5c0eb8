// Does compute-sanitizer's racecheck see mbarrier synchronisation between
// generic-proxy shared-memory accesses? One thread stores a value to shared
// memory and arrives on an mbarrier (release, CTA scope, the PTX default);
// a warp waits on the barrier's phase (try_wait.parity: acquire) and reads
// the value, then lane 0 arrives on a second barrier that the writer waits
// on before its next store. That is the hand-over of the sm_90a dynamic
// tile scheduler (producer -> consumers through the slot next to a Q
// buffer, released by q_full; the slot reused after q_empty). With
// `wait` = 0 the readers skip the wait on `full`: a real race, for
// contrast.
//   nvcc -arch=sm_90a -o mbarrier_handoff mbarrier_handoff.cu
//   compute-sanitizer --tool racecheck ./mbarrier_handoff 1
#include <cstdio>
#include <cstdlib>

__global__ void handoff(int *out, int wait) {
  __shared__ alignas(8) unsigned long long full, empty;
  __shared__ volatile int slot;
  unsigned fullAddr = static_cast<unsigned>(__cvta_generic_to_shared(&full));
  unsigned emptyAddr =
      static_cast<unsigned>(__cvta_generic_to_shared(&empty));
  if (threadIdx.x == 0) {
    slot = -1;
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(fullAddr));
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(emptyAddr));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  auto waitParity = [](unsigned addr, int parity) {
    asm volatile("{\n"
                 ".reg .pred done;\n"
                 "wait_%=:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra wait_%=;\n"
                 "}\n" ::"r"(addr),
                 "r"(parity)
                 : "memory");
  };
  for (int round = 0; round < 4; ++round) {
    if (threadIdx.x == 32) {
      if (round > 0 && wait)
        waitParity(emptyAddr, (round - 1) & 1);
      // Give the readers time to run ahead when they do not wait.
      long long start = clock64();
      while (clock64() - start < 20000)
        ;
      slot = 100 + round;
      asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(fullAddr)
                   : "memory");
    } else if (threadIdx.x < 32) {
      if (wait)
        waitParity(fullAddr, round & 1);
      out[round * 32 + threadIdx.x] = slot;
      __syncwarp();
      if (threadIdx.x == 0)
        asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(
                         emptyAddr)
                     : "memory");
    }
  }
}

int main(int argc, char **argv) {
  int wait = argc > 1 ? std::atoi(argv[1]) : 1;
  int *out = nullptr;
  cudaMalloc(&out, 4 * 32 * sizeof(int));
  handoff<<<1, 64>>>(out, wait);
  int host[4 * 32];
  cudaMemcpy(host, out, sizeof(host), cudaMemcpyDeviceToHost);
  int wrong = 0;
  for (int i = 0; i < 4 * 32; ++i)
    wrong += host[i] != 100 + i / 32;
  std::printf("mbarrier_handoff wait=%d: %d of 128 reads wrong (%s)\n", wait,
              wrong, cudaGetErrorString(cudaGetLastError()));
  return 0;
}
