//===- Heuristics.h - the measured defaults of the GPU kernels --*- C++ -*-===//
//
// One table: for each target, head dim and mask, the tiles and schedule
// choices a kernel gets when nobody asks for others, and the measurement
// behind them. fagpu-tile{target}, the fagpu-* passes and fa-compile read it;
// nothing else holds a default.
//
//===----------------------------------------------------------------------===//

#ifndef FA_DIALECT_FAGPU_IR_HEURISTICS_H
#define FA_DIALECT_FAGPU_IR_HEURISTICS_H

#include "fa/Dialect/FAGPU/IR/FAGPU.h"

#include <optional>
#include <string>

namespace mlir::fagpu {

struct KernelDefaults {
  Target target;
  int64_t headDim;
  bool causal;
  int64_t blockR, blockC;
  /// sm_90a: persistent CTAs with the cross-tile pipeline (static tiles, or
  /// a dynamic scheduler when causal).
  bool persistent;
  /// sm_90a: O through shared memory and a TMA store.
  bool tmaStoreEpilogue;
  /// FA4 conditional rescaling threshold in log2 units (< 0: off).
  double rescaleThreshold;
  /// FA4 software exp2: degree (0: off) and one exponential in `period`.
  int64_t polyExp2Degree, polyExp2Period;
  /// The measurement (bench/results/...) or source behind the row.
  const char *evidence;
};

/// The head dims each target's kernels take, the one rule fa-compile,
/// fagpu-tile, fa-map-to-gpu and the kernel builders ask: 64, 128 and 256
/// everywhere; on sm_90a's wgmma kernel (`wgmma`) any multiple of 32 up to
/// 256, run on tiles of whole 64-column blocks (sm90TileHeadDim: 96 on
/// 128, 160 on 192). The reason when `headDim` is not one.
std::optional<std::string> checkHeadDim(Target target, bool wgmma,
                                        int64_t headDim);

/// checkHeadDim, and V's head dim: Dv = D everywhere; on sm_90a's wgmma
/// kernel also a multiple of 32 below D (V's tiles are D's, its columns
/// past Dv zero-filled by the TMA, and O has Dv: DeepSeek's Q/K 192 with
/// V 128).
std::optional<std::string> checkHeadDims(Target target, bool wgmma,
                                         int64_t headDim,
                                         int64_t valueHeadDim);

/// The row for `target`, `headDim`, `causal` (sm_90a: of the head dim its
/// tiles have, sm90TileHeadDim), or null where the table has none.
const KernelDefaults *defaultsFor(Target target, int64_t headDim, bool causal);

/// B_c when only B_r = `blockR` is given (sm_90a with one consumer runs two
/// CTAs per SM, each with half the shared memory).
int64_t defaultBlockC(Target target, int64_t headDim, bool causal,
                      int64_t blockR);

/// B_c of an e4m3 (FP8) sm_90a kernel where none is asked. With e4m3 the
/// two GEMMs of a block take about as long as its softmax, so a wider
/// block amortises each block's fixed softmax work (the row max's
/// shuffles, O's rescale, the barrier handshakes) over more keys: at
/// D = 128 FlashAttention-3's 224 (S 112 registers a thread, P 28, O 64;
/// V^T in 32-byte swizzled column blocks); 256 spills there (S alone takes
/// 128). At D = 256, O takes 128 registers and B_c stays 128
/// (bench/results/2026-12-03-fp8-block-c.md).
inline int64_t fp8DefaultBlockC(int64_t headDim) {
  return headDim == 128 ? 224 : 128;
}

/// Whether an e4m3 sm_90a kernel sums P's rows on the tensor cores
/// (fagpu-row-sum-mma) where nothing is asked. At e4m3 rates each score's
/// exponential takes MUFU as long as its share of the two GEMMs takes the
/// tensor cores (D = 128), and the FADD that sums it competes for the
/// issue slots the exponentials leave; an m64n8 MMA per 32 keys frees them
/// (712 FADD -> 44 in the D = 128 kernel's SASS) for 42 more wgmma. Off:
/// on the H200 it ran 0.96-0.98x the FADD kernel at D = 128 and 0.98-1.02x
/// causal (D 256 causal spills 8 bytes), two runs
/// (bench/results/2026-12-03-e4m3-row-sum-mma.md). The sums as 8 more
/// columns of P V itself (m64n136) ran 0.96-0.98x and lost the LSE to the
/// e4m3 accumulator (bench/results/2026-12-04-e4m3-row-sums-in-pv.md).
inline bool fp8RowSumMmaByDefault(int64_t headDim) {
  (void)headDim;
  return false;
}

/// Why row sums by MMA take attentions without an LSE only: the MMA sums
/// P as e4m3 (rounded, 2^-4 relative) in the e4m3 accumulator, so O / l is
/// consistent but m + log l is not the attention's log-sum-exp: on the
/// H200 this option's was 1.3e-2 to 2.8e-2 off it (fp8.py check 4/24, O
/// passing everywhere) and the P V fold's up to 5.7e-2, against the
/// check's 1e-2 (bench/results/2026-12-04-e4m3-row-sums-in-pv.md).
inline constexpr const char *kRowSumMmaLseWhy =
    "row sums by MMA add up the e4m3-rounded P: their log-sum-exp is off "
    "the attention's by up to 6e-2, so they are for attentions without an "
    "LSE";

/// The e4m3 sm_90a kernel's tiles: its Q and K tiles [B_r | B_c, D] are
/// whole 128-byte rows of e4m3, so D is 128 or 256; P's k-steps are 32
/// keys and V^T's rows [D, B_c] are cut into 32-, 64- or 128-byte
/// swizzled column blocks (valueTileSwizzle), so B_c is a multiple of 32
/// from 64 to 256. The reason when they are not (the mapping and the
/// kernel builder both ask here).
inline std::optional<std::string> checkFP8Tiles(int64_t headDim,
                                                int64_t blockC) {
  if ((headDim == 128 || headDim == 256) && blockC % 32 == 0 &&
      blockC >= 64 && blockC <= 256)
    return std::nullopt;
  return "e4m3 kernels take D of 128 or 256 (the Q and K tiles are whole "
         "128-byte rows of e4m3) and block_c a multiple of 32 from 64 to "
         "256 (P's k-steps of 32 keys), got D = " +
         std::to_string(headDim) + ", block_c = " + std::to_string(blockC);
}

/// B_r of a split-KV (decode) kernel where nothing is asked: decode has one
/// query row per sequence, so B_r is MMA work on padding; one consumer
/// (B_r = 64, two CTAs per SM) where the head dim allows it, else the
/// table's. Null evidence where the table's B_r is kept.
struct SplitKVDefaults {
  int64_t blockR;
  const char *evidence;
};
SplitKVDefaults splitKVDefaults(Target target, int64_t headDim, bool causal);

/// Whether a kernel that gathers each K/V block from several pages (a paged
/// cache's pages shorter than B_c) runs persistent CTAs, against its head
/// dim's row. Null evidence where the row is kept.
struct ShortPagePersistence {
  bool persistent;
  const char *evidence;
};
ShortPagePersistence shortPagePersistence(Target target);

/// The L2 promotion of the K and V tensor maps (bytes L2 fetches from DRAM
/// when a box misses; kDefaultL2Promotion elsewhere). Null evidence where
/// the default is kept.
struct L2PromotionDefaults {
  int64_t bytes;
  const char *evidence;
};
L2PromotionDefaults kvL2Promotion(Target target, bool splitKV);

/// The machine a target's traffic model assumes where nobody gives one
/// (fagpu-io-report's DRAM model): SMs, and the L2 bytes a working set can
/// reuse, of the GPU the target's kernels were measured on; null evidence
/// where none was.
struct MachineDefaults {
  int64_t sms, l2Bytes;
  const char *evidence;
};
MachineDefaults machineDefaults(Target target);

/// The K/V ring depth where nothing is asked: 3 where it fits, else 2.
inline constexpr int64_t kPreferredStages = 3;
/// The producer warpgroup's registers where it widens an e4m3 cache's
/// tiles (fagpu.widen_tile): a piece's 8 codes, its 4 converted words and
/// two addresses live at once beside the loop's ring positions, which the
/// 24 registers of a TMA-only producer do not hold.
inline constexpr int64_t kWideningProducerRegisters = 40;
/// The tiles of an e4m3 cache's kernel (beside a 16-bit Q, sm_90a) where
/// none are asked: one consumer (B_r 64: decode's rows are few) with a
/// warpgroup of its own widening V beside the producer's K, and B_c 128,
/// whose blocks carry twice the bytes per barrier hand-off and widening
/// round of B_c 64's (decode under CUDA graphs 1.48-1.72x the f16 cache's
/// tokens/s against 1.34-1.46x at B_c 64,
/// bench/results/2026-12-06-fp8-kv-cache-h100.md).
inline constexpr int64_t kWideningBlockR = 64, kWideningBlockC = 128;
/// The cache ring's depth of an e4m3 cache's kernel where it fits: 4
/// (decode, one CTA per SM: 1.19-1.31x the f16 cache's tokens/s against
/// 1.17-1.30x with 3, bench/results/2026-12-06-fp8-kv-cache-h100.md).
inline constexpr int64_t kWideningPreferredStages = 4;
/// ... of an e4m3 kernel with B_c = `blockC` at `headDim`: 2 for D = 128
/// at B_c 224 (3 stages take 201 KiB of shared memory and measured 4-5%
/// slower, bench/results/2026-12-03-fp8-block-c.md) and for causal D = 256
/// (3 stages take 225 KiB: 1,073-1,079 TFLOP/s against 1,107-1,109 at
/// N 16k; non-causal D = 256 keeps 3, +2% at 16k and -1.5% at 4k,
/// bench/results/2026-12-03-fp8-d256-stages.txt), else kPreferredStages.
inline int64_t fp8PreferredStages(int64_t headDim, int64_t blockC,
                                  bool causal) {
  if (headDim == 128 && blockC > 128)
    return 2;
  if (headDim == 256 && causal)
    return 2;
  return kPreferredStages;
}
/// The producer warpgroup's setmaxnreg budget on sm_90a (FA3's 24).
inline constexpr int64_t kProducerRegisters = 24;

} // namespace mlir::fagpu

#endif // FA_DIALECT_FAGPU_IR_HEURISTICS_H
