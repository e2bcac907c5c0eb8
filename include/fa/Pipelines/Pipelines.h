//===- Pipelines.h - flash-mlir pass pipelines ------------------*- C++ -*-===//

#ifndef FA_PIPELINES_PIPELINES_H
#define FA_PIPELINES_PIPELINES_H

#include "fa/Dialect/FA/Transforms/Passes.h"
#include "fa/Dialect/FAGPU/IR/Choices.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir {
class DialectRegistry;
namespace fa {

/// How fa-cpu-pipeline quantises higher-precision attentions to e4m3.
enum class FP8Quantization { None, Tensor, Block };

struct CPUPipelineOptions : public PassPipelineOptions<CPUPipelineOptions> {
  PassOptions::Option<LoopOrder> loopOrder{
      *this, "loop-order", llvm::cl::desc("Loop order of the attention"),
      llvm::cl::init(LoopOrder::FA2),
      llvm::cl::values(
          clEnumValN(LoopOrder::FA1, "fa1",
                     "FlashAttention-1: K/V outer, state in memory"),
          clEnumValN(LoopOrder::FA2, "fa2",
                     "FlashAttention-2: Q outer and parallel"))};
  PassOptions::Option<bool> foldModifications{
      *this, "fold-modifications",
      llvm::cl::desc("Run fa-fold-modifications first (regions that spell "
                     "the causal mask or a softcap become the built-in); "
                     "false runs the regions as written, to check the fold "
                     "against them"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> skipMaskedBlocks{
      *this, "skip-masked-blocks",
      llvm::cl::desc("Run fa-skip-masked-blocks (the block pairs a mask_mod "
                     "hides entirely are skipped); false computes every "
                     "pair, to check the skipping against it"),
      llvm::cl::init(true)};
  PassOptions::Option<int64_t> ringWorld{
      *this, "ring-world",
      llvm::cl::desc("Run fa-ring-attention over this many ranks (0: no "
                     "ring): every rank's ring steps and merges, the whole "
                     "attention computed as context parallelism would"),
      llvm::cl::init(0)};
  PassOptions::Option<std::string> ringLayout{
      *this, "ring-layout",
      llvm::cl::desc("fa-ring-attention's sharding: zigzag or contiguous"),
      llvm::cl::init("zigzag")};
  PassOptions::Option<std::string> kvSplits{
      *this, "kv-splits",
      llvm::cl::desc("Run fa-split-kv with this chunk count (auto or N; "
                     "empty: no split)"),
      llvm::cl::init("")};
  PassOptions::Option<int64_t> sramBudget{
      *this, "sram-budget",
      llvm::cl::desc("On-chip budget in bytes for fa-tile (0: default)"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> blockR{
      *this, "block-r", llvm::cl::desc("Query rows per tile (0: rule)"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> blockC{
      *this, "block-c", llvm::cl::desc("Key rows per tile (0: rule)"),
      llvm::cl::init(0)};
  PassOptions::Option<double> rescaleThreshold{
      *this, "rescale-threshold",
      llvm::cl::desc("Run fa-conditional-rescale with this threshold "
                     "(log2 units; negative: off)"),
      llvm::cl::init(-1.0)};
  PassOptions::Option<bool> countRescales{
      *this, "count-rescales",
      llvm::cl::desc("Instrument fa-conditional-rescale"),
      llvm::cl::init(false)};
  PassOptions::Option<int64_t> polyExp2Degree{
      *this, "poly-exp2-degree",
      llvm::cl::desc("Run fa-poly-exp2 with this degree (0: off)"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> polyExp2Period{
      *this, "poly-exp2-period",
      llvm::cl::desc("fa-poly-exp2: emulate one exp2 in this many"),
      llvm::cl::init(8)};
  PassOptions::Option<FP8Quantization> fp8{
      *this, "fp8", llvm::cl::desc("Run higher-precision attentions in e4m3"),
      llvm::cl::init(FP8Quantization::None),
      llvm::cl::values(
          clEnumValN(FP8Quantization::None, "none", "as written"),
          clEnumValN(FP8Quantization::Tensor, "tensor",
                     "fa-quantize-fp8: per-tensor descales"),
          clEnumValN(FP8Quantization::Block, "block",
                     "fa-quantize-fp8, then fa-block-quantize: one descale "
                     "per tile of Q and K"))};
  PassOptions::Option<bool> incoherent{
      *this, "incoherent",
      llvm::cl::desc("With fp8: fa-incoherent-processing (a random Hadamard "
                     "transform of Q and K before quantisation)"),
      llvm::cl::init(false)};
  PassOptions::Option<uint64_t> hadamardSeed{
      *this, "hadamard-seed", llvm::cl::desc("fa-incoherent-processing's seed"),
      llvm::cl::init(0)};
  PassOptions::Option<double> probsScale{
      *this, "probs-scale",
      llvm::cl::desc("e4m3 attentions: fa-quantize-probs with this scale "
                     "(P rounded to e4m3 for P V as the kernel does; 0: P "
                     "kept in f32)"),
      llvm::cl::init(256.0)};
};

struct SM80PipelineOptions : public PassPipelineOptions<SM80PipelineOptions> {
  PassOptions::Option<std::string> chip{
      *this, "chip", llvm::cl::desc("GPU to compile for (sm_80, sm_90a)"),
      llvm::cl::init("sm_90a")};
  PassOptions::Option<double> rescaleThreshold{
      *this, "rescale-threshold",
      llvm::cl::desc("FA4 conditional rescaling in the kernel (< 0: off)"),
      llvm::cl::init(-1.0)};
  PassOptions::Option<int64_t> polyExp2Degree{
      *this, "poly-exp2-degree",
      llvm::cl::desc("FA4 software exp2 in the kernel (0: off)"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> polyExp2Period{
      *this, "poly-exp2-period",
      llvm::cl::desc("Emulate one exp2 in this many"), llvm::cl::init(8)};
  PassOptions::Option<bool> queryInRegisters{
      *this, "q-in-registers",
      llvm::cl::desc("Keep Q fragments in registers where they fit"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> deterministicBackward{
      *this, "deterministic-backward",
      llvm::cl::desc("Backward kernels add into dQ in a fixed order"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> vectorReductions{
      *this, "vector-reductions",
      llvm::cl::desc("Backward kernels add into dQ two columns a reduction "
                     "(red.global.add.v2.f32, PTX 8.1: a chip of sm_90 or "
                     "later)"),
      llvm::cl::init(false)};
};

/// fa.attention -> fagpu-tile{target=sm_80}, fa-lower-fa2, the FA4 passes ->
/// fa-map-to-gpu -> convert-fagpu-to-nvvm (gpu.launch_func + mma.sync
/// kernel) -> NVVM target attached -> LLVM dialect in the gpu.module ->
/// gpu-module-to-binary (PTX). ptxas then makes the cubin (fa-compile).
void buildSM80Pipeline(OpPassManager &pm, const SM80PipelineOptions &options);
/// Its two halves: up to the kernel in NVVM (convert-fagpu-to-nvvm), and from
/// there to PTX.
void buildSM80KernelPipeline(OpPassManager &pm,
                             const SM80PipelineOptions &options);
void buildSM80EmissionPipeline(OpPassManager &pm,
                               const SM80PipelineOptions &options);

/// The spellings of a fagpu::Switch option: on, off, auto.
inline auto switchValues() {
  return llvm::cl::values(
      clEnumValN(fagpu::Switch::On, "on", "on"),
      clEnumValN(fagpu::Switch::Off, "off", "off"),
      clEnumValN(fagpu::Switch::Auto, "auto", "the heuristics table's choice"));
}

struct SM90PipelineOptions : public PassPipelineOptions<SM90PipelineOptions> {

  PassOptions::Option<int64_t> ctasPerSm{
      *this, "ctas-per-sm",
      llvm::cl::desc("Resident CTAs per SM the kernel is built for (0: two "
                     "with one consumer warpgroup, else one)"),
      llvm::cl::init(0)};
  PassOptions::Option<std::string> kvSplits{
      *this, "kv-splits",
      llvm::cl::desc("Run fa-split-kv with this chunk count (auto or N; "
                     "empty: no split): a split-KV kernel, the last chunk "
                     "of each tile merging"),
      llvm::cl::init("")};
  PassOptions::Option<int64_t> stages{
      *this, "stages",
      llvm::cl::desc("K/V ring depth (2 to 4; 0: 3 where it fits, else 2)"),
      llvm::cl::init(0)};
  PassOptions::Option<bool> pingPong{
      *this, "ping-pong",
      llvm::cl::desc("Alternate the consumer warpgroups on the tensor cores"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> intraOverlap{
      *this, "intra-overlap",
      llvm::cl::desc("Overlap the softmax of block j with P V of block j-1"),
      llvm::cl::init(true)};
  PassOptions::Option<int64_t> queryGroup{
      *this, "query-group",
      llvm::cl::desc("Pack-GQA beyond one query: G query heads a K/V head in "
                     "one tile's rows (0: off; fagpu-pack-query-heads)"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> maxRows{
      *this, "max-rows",
      llvm::cl::desc("Tiles of at most 8 real rows: each consumer thread "
                     "steps only its first row (0: off; fagpu-max-rows)"),
      llvm::cl::init(0)};
  PassOptions::Option<fagpu::Switch> rowSumMma{
      *this, "row-sum-mma",
      llvm::cl::desc("e4m3: P's row sums by MMA (on, off or auto)"),
      llvm::cl::init(fagpu::Switch::Auto), switchValues()};
  PassOptions::Option<fagpu::Switch> persistent{
      *this, "persistent",
      llvm::cl::desc("Persistent CTAs striding over the tiles: on, off or "
                     "auto (the back end's measured choice)"),
      llvm::cl::init(fagpu::Switch::Auto), switchValues()};
  PassOptions::Option<int64_t> producerRegisters{
      *this, "producer-registers",
      llvm::cl::desc("setmaxnreg.dec count of the producer"),
      llvm::cl::init(24)};
  PassOptions::Option<fagpu::EpilogueRequest> epilogue{
      *this, "epilogue",
      llvm::cl::desc("How O leaves the kernel: tma (stmatrix + TMA store; "
                     "varlen: + a copy of whole rows), direct (st.global "
                     "from registers) or auto"),
      llvm::cl::init(fagpu::EpilogueRequest::Auto),
      llvm::cl::values(
          clEnumValN(fagpu::EpilogueRequest::Tma, "tma", "TMA store"),
          clEnumValN(fagpu::EpilogueRequest::Direct, "direct",
                     "st.global from registers"),
          clEnumValN(fagpu::EpilogueRequest::Auto, "auto",
                     "the heuristics table's choice"))};
  PassOptions::Option<int64_t> consumerRegisters{
      *this, "consumer-registers",
      llvm::cl::desc("setmaxnreg.inc count of the consumers (0: 240 with two "
                     "consumer warpgroups, 160 with three)"),
      llvm::cl::init(0)};
  PassOptions::Option<double> rescaleThreshold{
      *this, "rescale-threshold",
      llvm::cl::desc("FA4 conditional rescaling in the kernel (< 0: off)"),
      llvm::cl::init(-1.0)};
  PassOptions::Option<int64_t> polyExp2Degree{
      *this, "poly-exp2-degree",
      llvm::cl::desc("FA4 software exp2 in the kernel (0: off)"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> polyExp2Period{
      *this, "poly-exp2-period",
      llvm::cl::desc("Emulate one exp2 in this many"), llvm::cl::init(8)};
};

/// fa.attention -> the tile level (fagpu-tile{target=sm_90a}, fa-lower-fa2, FA4
/// passes) -> fa-map-to-gpu -> fagpu-warp-specialize, fagpu-persistent,
/// fagpu-row-sum-mma, fagpu-pipeline-kv, fagpu-ping-pong,
/// fagpu-overlap-softmax, fagpu-tma-store-epilogue -> convert-fagpu-to-nvvm
/// (tensor maps + gpu.launch_func + NVVM kernel) -> NVVM target sm_90a ->
/// LLVM dialect -> gpu-module-to-binary.
void buildSM90Pipeline(OpPassManager &pm, const SM90PipelineOptions &options);
void buildSM90KernelPipeline(OpPassManager &pm,
                             const SM90PipelineOptions &options);
void buildSM90EmissionPipeline(OpPassManager &pm);
struct SM100PipelineOptions : public PassPipelineOptions<SM100PipelineOptions> {
  PassOptions::Option<int64_t> stages{
      *this, "stages",
      llvm::cl::desc("K/V ring depth (2 to 4; 0: 3 where it fits, else 2)"),
      llvm::cl::init(0)};
  PassOptions::Option<double> rescaleThreshold{
      *this, "rescale-threshold",
      llvm::cl::desc("FA4 conditional rescaling (log2 units; < 0: off)"),
      llvm::cl::init(8.0)};
  PassOptions::Option<int64_t> polyExp2Degree{
      *this, "poly-exp2-degree",
      llvm::cl::desc("FA4 software exp2 degree (0: off)"), llvm::cl::init(3)};
  PassOptions::Option<int64_t> polyExp2Period{
      *this, "poly-exp2-period",
      llvm::cl::desc("Emulate one exp2 in this many"), llvm::cl::init(8)};
};

/// fa.attention -> the tile level (FA4 defaults on) -> fa-map-to-gpu ->
/// fagpu-pipeline-kv -> convert-fagpu-to-nvvm (tensor maps +
/// gpu.launch_func + tcgen05 kernel) -> NVVM target sm_100a -> gpu-module-to-binary.
/// Compile-verified only: no Blackwell GPU has run this kernel.
void buildSM100Pipeline(OpPassManager &pm, const SM100PipelineOptions &options);
void buildSM100KernelPipeline(OpPassManager &pm,
                              const SM100PipelineOptions &options);
void buildSM100EmissionPipeline(OpPassManager &pm);

/// From a gpu.module in NVVM to PTX of `ptxVersion` (e.g. "ptx80") for
/// `chip`; shared by both back ends.
void buildGPUEmissionPipeline(OpPassManager &pm, StringRef chip,
                              StringRef ptxVersion);

/// fa.attention (tensors or memrefs) -> tiles -> loop order -> scf/arith/math
/// -> LLVM dialect, ready for mlir-runner or the ExecutionEngine.
void buildCPUPipeline(OpPassManager &pm, const CPUPipelineOptions &options);

/// The part of the CPU pipeline from the fa tile-op level down to LLVM.
void buildLoopsToLLVMPipeline(OpPassManager &pm);

void registerPipelines();

/// Dialects, passes and translations the fa tools need.
void registerAllFADialects(DialectRegistry &registry);
void registerAllFAPasses();

} // namespace fa
} // namespace mlir

#endif // FA_PIPELINES_PIPELINES_H
