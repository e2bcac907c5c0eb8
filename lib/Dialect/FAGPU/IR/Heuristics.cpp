//===- Heuristics.cpp - the measured defaults of the GPU kernels ----------===//
//
// Every row was measured on the lent H200 against the alternatives named
// in its evidence (files in bench/results/, gains at N = 1k / 4k / 16k);
// sm_100a rows are FlashAttention-4's published choices, never measured
// here (no Blackwell GPU).
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FAGPU/IR/Heuristics.h"
#include "fa/Dialect/FAGPU/IR/KernelABI.h"
#include "fa/Dialect/FAGPU/IR/SharedMemory.h"

using namespace mlir;
using namespace mlir::fagpu;

namespace {

constexpr double kOff = -1.0;

// clang-format off
const KernelDefaults kTable[] = {
  // target, D, causal, B_r, B_c, persistent, TMA store, tau, exp2 degree, period
  {Target::sm_90a, 64, false, 192, 128, true, false, 8.0, 0, 8,
   "B_r 192 (three consumers) +4/+10/+14% over 128: 2026-11-29-sm90-v6-br192-sweep; "
   "persistent + cross-tile +13/+5/+1%: v13-cross-tile-sweep; TMA store +1/-2/-3%, "
   "so registers: v17-epilogue-sweep, again +1/-1/-1% (f16), 0/-1/-3% (bf16): "
   "2026-12-02-d64-epilogue-ab; conditional rescaling +2-7%: v4-variants"},
  {Target::sm_90a, 64, true, 128, 128, true, false, 8.0, 0, 8,
   "B_r 128 with the dynamic scheduler 320/422/436 TFLOP/s vs 64 (two CTAs/SM) "
   "316/392/416 and 192 291/424/482: 2026-11-30-sm90-v15-dynamic-sweep; TMA store "
   "+1/-1/-3%: v17-epilogue-sweep, again +1/-1/-1% (f16), +2/-1/-1% (bf16): "
   "2026-12-02-d64-epilogue-ab"},
  {Target::sm_90a, 128, false, 128, 128, true, true, 8.0, 0, 8,
   "B_c 128: 2026-11-29-sm90-v2-variants; persistent +9/0/0%: v13-cross-tile-sweep; "
   "TMA store +8/+3/+4%: 2026-11-30-sm90-v17-epilogue-sweep"},
  {Target::sm_90a, 128, true, 128, 128, true, true, 8.0, 0, 8,
   "dynamic scheduler +8-11/+4-8/-3-0%: 2026-11-30-sm90-v15-dynamic-sweep; TMA store "
   "+7/+3/+1%: v17-epilogue-sweep"},
  {Target::sm_90a, 192, false, 128, 64, true, true, 8.0, 0, 8,
   "B_c 64 (B_c 128 needs 241 KiB of shared memory); persistent 0.93-0.95x "
   "cuDNN vs one tile per CTA 0.87-0.92x: 2026-12-01-d192; no room for a "
   "staging tile, O staged in the Q buffer vs registers 1.01-1.10x (D 160 "
   "1.00-1.08x): 2026-12-02-d192-stage-in-q"},
  {Target::sm_90a, 192, true, 128, 64, true, true, 8.0, 0, 8,
   "as non-causal D 192; dynamic scheduler 0.93/1.00x cuDNN vs 0.90-0.98x "
   "one tile per CTA: 2026-12-01-d192; O staged in the Q buffer 1.00-1.12x "
   "registers: 2026-12-02-d192-stage-in-q"},
  {Target::sm_90a, 256, false, 128, 64, false, true, 8.0, 0, 8,
   "B_c 64 (80 spills): 2026-11-29-sm90-v2-variants; no room for a second Q buffer, "
   "persistent no gain: v16; TMA store in the dead Q buffer +9/-6/0%: v17-epilogue-sweep"},
  {Target::sm_90a, 256, true, 128, 64, false, true, 8.0, 0, 8,
   "as non-causal D 256; TMA store +12/-6/-4%: 2026-11-30-sm90-v17-epilogue-sweep"},
  // mma.sync: two row tiles per warp where the registers allow
  // (2026-11-29-sm80-v{2,3,4}-tile-sweep); conditional rescaling +9-15% at
  // D >= 128, -3-4% at D = 64; software exp2 -1-8% everywhere
  // (2026-11-29-sm80-fa4-sweep).
  {Target::sm_80, 64, false, 128, 64, false, false, kOff, 0, 8,
   "2026-11-29-sm80-v4-tile-sweep; rescaling -3-4%: sm80-fa4-sweep"},
  {Target::sm_80, 64, true, 128, 64, false, false, kOff, 0, 8,
   "2026-11-29-sm80-v4-tile-sweep; rescaling -3-4%: sm80-fa4-sweep"},
  {Target::sm_80, 128, false, 128, 64, false, false, 8.0, 0, 8,
   "2026-11-29-sm80-v4-tile-sweep; rescaling +9-15%: sm80-fa4-sweep"},
  {Target::sm_80, 128, true, 128, 64, false, false, 8.0, 0, 8,
   "2026-11-29-sm80-v4-tile-sweep; rescaling +9-15%: sm80-fa4-sweep"},
  {Target::sm_80, 256, false, 64, 32, false, false, 8.0, 0, 8,
   "one row tile, Q in registers, B_c 32: 2026-11-29-sm80-v3-tile-sweep; "
   "sm80-fa4-d256-sweep"},
  {Target::sm_80, 256, true, 64, 32, false, false, 8.0, 0, 8,
   "2026-11-29-sm80-v3-tile-sweep; sm80-fa4-d256-sweep"},
  // tcgen05: B_r = M = 128; B_c the MMA N of S where the ring fits; FA4's
  // tau = 8 and degree-3 exp2 on one exponential in eight.
  {Target::sm_100a, 64, false, 128, 128, false, false, 8.0, 3, 8, "FA4 paper; unmeasured"},
  {Target::sm_100a, 64, true, 128, 128, false, false, 8.0, 3, 8, "FA4 paper; unmeasured"},
  {Target::sm_100a, 128, false, 128, 128, false, false, 8.0, 3, 8, "FA4 paper; unmeasured"},
  {Target::sm_100a, 128, true, 128, 128, false, false, 8.0, 3, 8, "FA4 paper; unmeasured"},
  {Target::sm_100a, 256, false, 128, 64, false, false, 8.0, 3, 8, "FA4 paper; unmeasured"},
  {Target::sm_100a, 256, true, 128, 64, false, false, 8.0, 3, 8, "FA4 paper; unmeasured"},
};
// clang-format on

} // namespace

std::optional<std::string> mlir::fagpu::checkHeadDim(Target target, bool wgmma,
                                                     int64_t headDim) {
  if (headDim == 64 || headDim == 128 || headDim == 256)
    return std::nullopt;
  // The wgmma kernel pads D to whole 64-column blocks; a multiple of 32
  // keeps the split-KV merge's columns a whole number per lane.
  if (target == Target::sm_90a && wgmma && headDim % 32 == 0 &&
      headDim > 0 && headDim <= 256)
    return std::nullopt;
  if (target == Target::sm_90a && wgmma)
    return "head dim must be a multiple of 32 up to 256 on sm_90a (wgmma), "
           "got " +
           std::to_string(headDim);
  return "head dim must be 64, 128 or 256 on " + targetName(target).str() +
         (target == Target::sm_90a ? " (mma.sync; the wgmma kernel takes "
                                     "any multiple of 32 up to 256)"
                                   : std::string()) +
         ", got " + std::to_string(headDim);
}

std::optional<std::string>
mlir::fagpu::checkHeadDims(Target target, bool wgmma, int64_t headDim,
                           int64_t valueHeadDim) {
  if (std::optional<std::string> why = checkHeadDim(target, wgmma, headDim))
    return why;
  if (valueHeadDim == headDim)
    return std::nullopt;
  bool padded = target == Target::sm_90a && wgmma;
  if (padded && valueHeadDim % 32 == 0 && valueHeadDim > 0 &&
      valueHeadDim < headDim)
    return std::nullopt;
  return "value head dim must equal the head dim (" + std::to_string(headDim) +
         ")" +
         (padded ? std::string(" or be a multiple of 32 below it")
                 : " on " + targetName(target).str() +
                       (target == Target::sm_90a ? " (mma.sync)" : "") +
                       " (sm_90a's wgmma kernel also takes a multiple of 32 "
                       "below it)") +
         ", got " + std::to_string(valueHeadDim);
}

const KernelDefaults *mlir::fagpu::defaultsFor(Target target, int64_t headDim,
                                               bool causal) {
  if (target == Target::sm_90a)
    headDim = sm90TileHeadDim(headDim);
  for (const KernelDefaults &row : kTable)
    if (row.target == target && row.headDim == headDim && row.causal == causal)
      return &row;
  return nullptr;
}

SplitKVDefaults mlir::fagpu::splitKVDefaults(Target target, int64_t headDim,
                                            bool causal) {
  if (target == Target::sm_90a && headDim <= 128)
    return {kRowsPerConsumer,
            "decode D 128 f16, GB/s of K+V at the best chunk count: B 1 H 32 "
            "Nk 32k 3,832 (B_r 64, 4 chunks) vs 3,662 (B_r 128, 4); B 1 H 8 "
            "Nk 128k 3,786 (64, 16) vs 3,598 (128, 16): "
            "2026-12-01-decode-splitkv-v1"};
  const KernelDefaults *row = defaultsFor(target, headDim, causal);
  return {row ? row->blockR : 0, nullptr};
}

ShortPagePersistence mlir::fagpu::shortPagePersistence(Target target) {
  // A persistent CTA's producer keeps its tile loop's state beside a
  // block's page numbers in 24 registers (it spills); one tile per CTA
  // needs no second Q buffer, so its ring takes a third stage.
  if (target == Target::sm_90a)
    return {false,
            "chunked prefill D 128 f16 causal bottom-right, pages of 16 rows, "
            "TFLOP/s against the contiguous kernel (B 4 Nq 2k Nk 8k; B 1 Nq "
            "4k Nk 16k): persistent (2 stages, 20 bytes spilled) 0.759 / "
            "0.752, persistent with 3 stages and one Q buffer 0.718 / 0.710, "
            "one tile per CTA (3 stages, no spill) 0.859 / 0.841: "
            "2026-12-02-paged16-schedule"};
  return {true, nullptr};
}

L2PromotionDefaults mlir::fagpu::kvL2Promotion(Target target, bool splitKV) {
  // Decode streams each K/V row from DRAM once, in two 128-byte boxes (the
  // swizzle span) of a 256-byte row: a miss of the first need not fetch the
  // second's bytes ahead of it.
  if (target == Target::sm_90a && splitKV)
    return {64,
            "split-KV decode D 128 f16, kernel time against cuDNN's, 3 "
            "rounds, 256B -> 64B: B 1 H 32 Nk 32k 0.976-0.981 -> "
            "0.994-0.997, B 1 H 8 Nk 128k 0.964-0.968 -> 0.984-0.987, B 4 H "
            "32 Nk 8k 0.965-0.969 -> 0.989-0.994 (prefill kernels within "
            "do_bench's noise either way, kept at 256B): "
            "2026-12-02-decode-l2-promotion"};
  return {kDefaultL2Promotion, nullptr};
}

int64_t mlir::fagpu::defaultBlockC(Target target, int64_t headDim, bool causal,
                                   int64_t blockR) {
  // One consumer warpgroup (B_r = 64) shares the SM with a second CTA: its
  // 113 KiB hold B_c = 128 at D = 64 (three stages), 64 at D = 128 (two).
  if (target == Target::sm_90a && blockR == kRowsPerConsumer)
    return 8192 / sm90TileHeadDim(headDim);
  if (const KernelDefaults *row = defaultsFor(target, headDim, causal))
    return row->blockC;
  return 64;
}

int64_t mlir::fagpu::sharedBytesOf(Target target, int64_t headDim,
                                   const ScheduleFields &schedule,
                                   int64_t elementBytes, bool widensKeyValues) {
  switch (target) {
  case Target::sm_90a:
    return sm90Layout(headDim, schedule, elementBytes, widensKeyValues)
        .sharedBytes();
  case Target::sm_100a:
    return sm100Layout(headDim, schedule).sharedBytes();
  case Target::sm_80:
    // Q and a double-buffered K/V ring of cp.async tiles.
    return (schedule.blockR + 2 * 2 * schedule.blockC) * headDim * 2;
  }
  return 0;
}

MachineDefaults mlir::fagpu::machineDefaults(Target target) {
  switch (target) {
  case Target::sm_90a:
    // The H200 every sm_90a kernel was measured on: 132 SMs and 60 MiB of
    // L2 as PyTorch reports them (device/KINDS.md); the DRAM model's miss
    // curve was fitted on it (Traffic.h).
    return {132, 60ll << 20,
            "H200, ncu: bench/results/2026-12-01-io-check-dram.md"};
  case Target::sm_80:
    // A100 (SXM): 108 SMs, 40 MiB of L2; no sm_80 traffic was measured.
    return {108, 40ll << 20, nullptr};
  case Target::sm_100a:
    // B200: 148 SMs, 126 MiB of L2 (NVIDIA's figures; never run here).
    return {148, 126ll << 20, nullptr};
  }
  return {0, 0, nullptr};
}
