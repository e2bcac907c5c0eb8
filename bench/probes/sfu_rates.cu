// Throughput of the softmax's conversion and exponential instructions on
// sm_90a, one op kind per kernel: how many results per clock an SM gets,
// and whether two kinds share a pipe (a mixed kernel takes the sum of the
// two times if they do, the larger one if not). Each thread runs 8
// independent chains; an FADD per op varies the input (full-rate pipe) and
// an XOR keeps the result live.
//
//   nvcc -arch=sm_90a -O3 -o sfu_rates bench/probes/sfu_rates.cu
//   ./sfu_rates            (on the H200)
#include <cstdio>
#include <cuda_runtime.h>

constexpr int kIters = 4096, kChains = 8;

__device__ __forceinline__ unsigned ex2f32(float x) {
  float y;
  asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return __float_as_uint(y);
}
__device__ __forceinline__ unsigned ex2f16x2(float x) {
  unsigned h = __float_as_uint(x), y;
  asm volatile("ex2.approx.f16x2 %0, %1;" : "=r"(y) : "r"(h));
  return y;
}
__device__ __forceinline__ unsigned ex2bf16x2(float x) {
  unsigned h = __float_as_uint(x), y;
  asm volatile("ex2.approx.ftz.bf16x2 %0, %1;" : "=r"(y) : "r"(h));
  return y;
}
__device__ __forceinline__ unsigned e4m3x2(float x) {
  unsigned short y;
  asm volatile("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;"
               : "=h"(y) : "f"(x), "f"(x + 1.0f));
  return y;
}
__device__ __forceinline__ unsigned f16x2(float x) {
  unsigned y;
  asm volatile("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(y) : "f"(x), "f"(x + 1.0f));
  return y;
}
__device__ __forceinline__ unsigned e4m3x2h(float x) {
  unsigned short y;
  unsigned h = __float_as_uint(x);
  asm volatile("cvt.rn.satfinite.e4m3x2.f16x2 %0, %1;" : "=h"(y) : "r"(h));
  return y;
}
__device__ __forceinline__ unsigned fmax3(float x) {
  float y;
  asm volatile("max.f32 %0, %1, %2;" : "=f"(y) : "f"(x), "f"(x * 0.5f));
  return __float_as_uint(y);
}

template <int Kind>
__global__ void run(unsigned *out, float seed) {
  float x[kChains];
  unsigned acc = 0;
#pragma unroll
  for (int c = 0; c < kChains; ++c)
    x[c] = seed + threadIdx.x * 1e-3f + c;
  for (int i = 0; i < kIters; ++i) {
#pragma unroll
    for (int c = 0; c < kChains; ++c) {
      x[c] += 0.25f;
      float v = -x[c] * 1e-3f;
      if (Kind == 0) acc ^= ex2f32(v);
      if (Kind == 1) acc ^= ex2f16x2(v);
      if (Kind == 2) acc ^= ex2bf16x2(v);
      if (Kind == 3) acc ^= e4m3x2(v);
      if (Kind == 4) acc ^= f16x2(v);
      if (Kind == 5) acc ^= e4m3x2h(v);
      if (Kind == 6) acc ^= fmax3(v);
      // The e4m3 softmax's mix: two ex2 and one cvt.e4m3x2 per pair.
      if (Kind == 7) { acc ^= ex2f32(v); acc ^= ex2f32(v + 1.f);
                       acc ^= e4m3x2(v); }
      if (Kind == 8) { acc ^= ex2f32(v); acc ^= ex2f32(v + 1.f); }
    }
  }
  if (acc == 0x12345678u) out[0] = acc;
}

template <int Kind> void time(const char *name, int opsPerStep,
                              unsigned *out, int sms, int clockKHz) {
  dim3 grid(sms * 4), block(512);
  run<Kind><<<grid, block>>>(out, 1.f);
  cudaEvent_t a, b;
  cudaEventCreate(&a); cudaEventCreate(&b);
  cudaEventRecord(a);
  for (int r = 0; r < 5; ++r) run<Kind><<<grid, block>>>(out, 1.f);
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms; cudaEventElapsedTime(&ms, a, b);
  double instr = 5.0 * grid.x * block.x * kIters * kChains * opsPerStep;
  double perClockSM = instr / (ms * 1e-3) / (clockKHz * 1e3) / sms;
  printf("%-34s %8.3f ms  %6.2f thread-instr / clock / SM\n", name, ms,
         perClockSM);
}

int main() {
  int sms, khz;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0);
  printf("SMs %d, clock %d MHz (rates at that clock)\n", sms, khz / 1000);
  unsigned *out; cudaMalloc(&out, 4);
  time<0>("ex2.approx.ftz.f32", 1, out, sms, khz);
  time<1>("ex2.approx.f16x2", 1, out, sms, khz);
  time<2>("ex2.approx.ftz.bf16x2", 1, out, sms, khz);
  time<3>("cvt.rn.satfinite.e4m3x2.f32", 1, out, sms, khz);
  time<4>("cvt.rn.f16x2.f32", 1, out, sms, khz);
  time<5>("cvt.rn.satfinite.e4m3x2.f16x2", 1, out, sms, khz);
  time<6>("max.f32", 1, out, sms, khz);
  time<8>("2 ex2.f32", 2, out, sms, khz);
  time<7>("2 ex2.f32 + 1 cvt.e4m3x2.f32", 3, out, sms, khz);
  printf("%s\n", cudaGetErrorString(cudaGetLastError()));
  return 0;
}
