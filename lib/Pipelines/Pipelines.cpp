//===- Pipelines.cpp - flash-mlir pass pipelines --------------------------===//

#include "fa/Pipelines/Pipelines.h"

#include "fa/Conversion/Passes.h"
#include "fa/Dialect/FA/IR/FADialect.h"
#include "fa/Dialect/FA/Transforms/Passes.h"
#include "fa/Dialect/FAGPU/IR/FAGPU.h"
#include "fa/Dialect/FAGPU/Transforms/Passes.h"

#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "llvm/Support/ErrorHandling.h"

using namespace mlir;
using namespace mlir::fa;

void mlir::fa::buildLoopsToLLVMPipeline(OpPassManager &pm) {
  // Everything below is upstream MLIR. bf16 conversions are expanded to
  // integer ops so the JIT needs no soft-float runtime for them.
  // e4m3 casts become integer code (LLVM has no f8 type). Math ops LLVM
  // has no intrinsic for (erf, atan, ... in a score_mod) call libm.
  static constexpr const char *kTail = "convert-linalg-to-loops,"
                                       "fa-expand-fp8-casts,"
                                       "func.func(scf-forall-to-parallel),"
                                       "lower-affine,"
                                       "convert-scf-to-cf,"
                                       "expand-strided-metadata,"
                                       "lower-affine,"
                                       "math-expand-ops{ops=tanh},"
                                       "arith-expand{include-bf16},"
                                       "finalize-memref-to-llvm,"
                                       "convert-math-to-llvm,"
                                       "convert-math-to-libm,"
                                       "convert-arith-to-llvm,"
                                       "convert-index-to-llvm,"
                                       "convert-cf-to-llvm,"
                                       "convert-func-to-llvm,"
                                       "reconcile-unrealized-casts";
  if (failed(parsePassPipeline(kTail, pm, llvm::errs())))
    llvm::report_fatal_error("fa: the built-in CPU pipeline does not parse");
}

void mlir::fa::buildCPUPipeline(OpPassManager &pm,
                                const CPUPipelineOptions &options) {
  if (options.foldModifications)
    pm.nest<func::FuncOp>().addPass(createFAFoldModifications());
  pm.nest<func::FuncOp>().addPass(createFAAttentionToBuffers());
  // Bufferize the surrounding code and give its buffers (the attention's
  // outputs among them) their deallocations while fa.attention is still one
  // op; the loop orders then add only balanced alloc/dealloc pairs.
  pm.addPass(createFABufferizeAroundAttention());
  if (failed(parsePassPipeline("buffer-deallocation-pipeline,canonicalize", pm,
                               llvm::errs())))
    llvm::report_fatal_error("fa: the built-in CPU pipeline does not parse");
  OpPassManager &funcPm = pm.nest<func::FuncOp>();
  // Context parallelism: the attention as every rank's ring steps (its
  // partial attentions are then tiled and lowered each).
  if (options.ringWorld > 0) {
    FARingAttentionOptions ring;
    ring.world = options.ringWorld;
    ring.layout = options.ringLayout;
    funcPm.addPass(createFARingAttention(ring));
  }
  // Grouped query heads of a decode as one matrix's rows (before split-KV,
  // whose chunk count sees the packed tiles).
  funcPm.addPass(createFAPackGQA());
  if (!options.kvSplits.empty())
    funcPm.addPass(createFASplitKV(FASplitKVOptions{options.kvSplits}));
  // FP8: inputs quantised where they become e4m3 (before the tiles), the
  // per-block descales once the tiles are known.
  if (options.fp8 != FP8Quantization::None) {
    funcPm.addPass(createFAQuantizeFP8());
    if (options.incoherent)
      funcPm.addPass(createFAIncoherentProcessing(
          FAIncoherentProcessingOptions{options.hadamardSeed}));
  }
  funcPm.addPass(createFATile(
      FATileOptions{options.sramBudget, options.blockR, options.blockC}));
  if (options.fp8 == FP8Quantization::Block)
    funcPm.addPass(createFABlockQuantize());
  if (options.loopOrder == LoopOrder::FA1)
    funcPm.addPass(createFALowerFA1());
  else
    funcPm.addPass(createFALowerFA2());
  // The backward of any fa.attention_backward: FA2's order (both loop
  // orders' forwards save the LSE it reads), on the options' tiles.
  FALowerFA2BackwardOptions backward;
  if (options.blockR)
    backward.blockR = options.blockR;
  if (options.blockC)
    backward.blockC = options.blockC;
  funcPm.addPass(createFALowerFA2Backward(backward));
  if (options.rescaleThreshold >= 0.0)
    pm.addPass(createFAConditionalRescale(FAConditionalRescaleOptions{
        options.rescaleThreshold, options.countRescales}));
  if (options.probsScale > 0)
    pm.nest<func::FuncOp>().addPass(
        createFAQuantizeProbs(FAQuantizeProbsOptions{options.probsScale}));
  if (options.polyExp2Degree > 0)
    pm.nest<func::FuncOp>().addPass(createFAPolyExp2(
        FAPolyExp2Options{options.polyExp2Degree, options.polyExp2Period}));
  // Block sparsity from mask_mod regions, on the loop orders' block loops.
  if (options.skipMaskedBlocks)
    pm.nest<func::FuncOp>().addPass(createFASkipMaskedBlocks());
  pm.addPass(createConvertFAToLoops());
  buildLoopsToLLVMPipeline(pm);
}

/// The GPU path's first half, the same for every target: the tile level
/// with the target's tiles, the FA2 loop order, the FA4 passes on its tile
/// ops, then one fagpu.attention per nest.
static void buildTileLevelForGPU(OpPassManager &pm, StringRef target,
                                 double rescaleThreshold, int64_t polyDegree,
                                 int64_t polyPeriod,
                                 bool queryInRegisters = true,
                                 StringRef kvSplits = "", int64_t ctasPerSm = 0,
                                 bool deterministicBackward = false,
                                 bool vectorReductions = false) {
  OpPassManager &funcPm = pm.nest<func::FuncOp>();
  // Regions that spell the causal mask or a softcap reach the kernels as
  // the built-in (the kernels take no regions yet).
  funcPm.addPass(createFAFoldModifications());
  funcPm.addPass(createFAAttentionToBuffers());
  funcPm.addPass(createFAPackGQA());
  if (!kvSplits.empty())
    funcPm.addPass(createFASplitKV(FASplitKVOptions{kvSplits.str()}));
  funcPm.addPass(fagpu::createFAGPUTile(fagpu::FAGPUTileOptions{target.str()}));
  funcPm.addPass(createFALowerFA2());
  // The backward of any fa.attention_backward, on the backward kernel's
  // 64 x 64 tiles (fa-map-to-gpu maps its main nest onto the kernel).
  FALowerFA2BackwardOptions backward;
  backward.blockR = 64;
  backward.blockC = 64;
  funcPm.addPass(createFALowerFA2Backward(backward));
  if (rescaleThreshold >= 0.0)
    pm.addPass(createFAConditionalRescale(
        FAConditionalRescaleOptions{rescaleThreshold, false}));
  OpPassManager &mapPm = pm.nest<func::FuncOp>();
  // e4m3 inputs: P enters the e4m3 MMA scaled by 2^8 (fa-quantize-probs'
  // default, checked against the rescale threshold); a no-op otherwise.
  mapPm.addPass(createFAQuantizeProbs());
  if (polyDegree > 0)
    mapPm.addPass(
        createFAPolyExp2(FAPolyExp2Options{polyDegree, polyPeriod}));
  mapPm.addPass(fagpu::createFAMapToGPU(
      fagpu::FAMapToGPUOptions{target.str(), queryInRegisters, ctasPerSm,
                               deterministicBackward, vectorReductions}));
}

/// Whether `chip` (sm_<NN>[a]) has f32 vector reductions
/// (red.global.add.v2.f32: sm_90 and later).
static bool chipHasVectorReductions(StringRef chip) {
  unsigned version = 0;
  if (!chip.consume_front("sm_"))
    return false;
  chip.consume_back("a");
  return !chip.getAsInteger(10, version) && version >= 90;
}

void mlir::fa::buildSM80KernelPipeline(OpPassManager &pm,
                                       const SM80PipelineOptions &options) {
  buildTileLevelForGPU(
      pm, "sm_80", options.rescaleThreshold, options.polyExp2Degree,
      options.polyExp2Period, options.queryInRegisters, /*kvSplits=*/"",
      /*ctasPerSm=*/0, options.deterministicBackward, options.vectorReductions);
  pm.addPass(createFAGPUBuildKernels());
  pm.addPass(createConvertFAGPUToNVVM());
}

void mlir::fa::buildGPUEmissionPipeline(OpPassManager &pm, StringRef chip,
                                        StringRef ptxVersion) {
  std::string tail = "nvvm-attach-target{module=fa_kernels O=3 features=+" +
                     ptxVersion.str() + " chip=" + chip.str() +
                     "},gpu.module(convert-scf-to-cf,convert-nvvm-to-llvm,"
                     "convert-math-to-llvm,"
                     "convert-arith-to-llvm),convert-cf-to-llvm,"
                     "gpu.module(reconcile-unrealized-casts),"
                     "gpu-module-to-binary{format=isa}";
  if (failed(parsePassPipeline(tail, pm, llvm::errs())))
    llvm::report_fatal_error("fa: the built-in GPU emission pipeline does "
                             "not parse");
}

namespace {
/// A pipeline whose options cannot be honoured: one pass that says why at
/// the module and fails, in place of the pipeline (the registration's
/// builder has no way to fail itself).
struct RefusePipelinePass
    : PassWrapper<RefusePipelinePass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(RefusePipelinePass)
  explicit RefusePipelinePass(std::string why) : why(std::move(why)) {}
  StringRef getArgument() const override { return "fa-refuse-pipeline"; }
  void runOnOperation() override {
    getOperation().emitError(why);
    signalPassFailure();
  }
  std::string why;
};
} // namespace

/// The chips the mma.sync kernel compiles for: sm_80 and later (its
/// ldmatrix, cp.async and mma.sync m16n8k16 are Ampere's), named sm_<NN>
/// or sm_<NN>a.
static std::optional<std::string> checkMmaSyncChip(StringRef chip) {
  StringRef digits = chip;
  unsigned version = 0;
  if (digits.consume_front("sm_")) {
    digits.consume_back("a");
    if (!digits.getAsInteger(10, version) && version >= 80)
      return std::nullopt;
  }
  return "fa-sm80-pipeline: chip must name an sm_80 or later GPU "
         "(sm_80, sm_86, sm_89, sm_90a, ...): the mma.sync kernel uses "
         "Ampere's ldmatrix, cp.async and mma.sync; got '" +
         chip.str() + "'";
}

void mlir::fa::buildSM80EmissionPipeline(OpPassManager &pm,
                                         const SM80PipelineOptions &options) {
  if (std::optional<std::string> why = checkMmaSyncChip(options.chip)) {
    pm.addPass(std::make_unique<RefusePipelinePass>(*why));
    return;
  }
  if (options.vectorReductions && !chipHasVectorReductions(options.chip)) {
    pm.addPass(std::make_unique<RefusePipelinePass>(
        "fa-sm80-pipeline: vector-reductions needs an sm_90 or later chip, "
        "got '" +
        options.chip.getValue() + "'"));
    return;
  }
  // Vector reductions are PTX 8.1's; the rest of the kernels PTX 8.0's.
  buildGPUEmissionPipeline(pm, options.chip.getValue(),
                           options.vectorReductions ? "ptx81" : "ptx80");
}

void mlir::fa::buildSM90KernelPipeline(OpPassManager &pm,
                                       const SM90PipelineOptions &options) {
  buildTileLevelForGPU(pm, "sm_90a", options.rescaleThreshold,
                       options.polyExp2Degree, options.polyExp2Period,
                       /*queryInRegisters=*/true, options.kvSplits,
                       options.ctasPerSm);
  // FlashAttention-3, one idea per pass. Persistence (a second Q buffer)
  // comes before the ring depth, which must fit next to it; the epilogue
  // after, as its staging tile takes what the ring leaves.
  OpPassManager &funcPm = pm.nest<func::FuncOp>();
  funcPm.addPass(fagpu::createFAGPUWarpSpecialize(
      fagpu::FAGPUWarpSpecializeOptions{options.producerRegisters,
                                        options.consumerRegisters}));
  funcPm.addPass(fagpu::createFAGPUPersistent(
      fagpu::FAGPUPersistentOptions{options.persistent}));
  funcPm.addPass(fagpu::createFAGPUPackQueryHeads(
      fagpu::FAGPUPackQueryHeadsOptions{options.queryGroup}));
  funcPm.addPass(
      fagpu::createFAGPUMaxRows(fagpu::FAGPUMaxRowsOptions{options.maxRows}));
  // The row-sum tile takes shared memory the ring's depth must leave.
  funcPm.addPass(fagpu::createFAGPURowSumMma(
      fagpu::FAGPURowSumMmaOptions{options.rowSumMma}));
  funcPm.addPass(fagpu::createFAGPUPipelineKV(
      fagpu::FAGPUPipelineKVOptions{options.stages}));
  if (options.pingPong)
    funcPm.addPass(fagpu::createFAGPUPingPong());
  if (options.intraOverlap)
    funcPm.addPass(fagpu::createFAGPUOverlapSoftmax());
  funcPm.addPass(fagpu::createFAGPUTmaStoreEpilogue(
      fagpu::FAGPUTmaStoreEpilogueOptions{options.epilogue}));
  pm.addPass(createFAGPUBuildKernels());
  pm.addPass(createConvertFAGPUToNVVM());
}

void mlir::fa::buildSM90EmissionPipeline(OpPassManager &pm) {
  // PTX 8.6 for the shared::cta destination of the TMA loads.
  buildGPUEmissionPipeline(pm, "sm_90a", "ptx86");
}

void mlir::fa::buildSM90Pipeline(OpPassManager &pm,
                                 const SM90PipelineOptions &options) {
  buildSM90KernelPipeline(pm, options);
  buildSM90EmissionPipeline(pm);
}

void mlir::fa::buildSM100KernelPipeline(OpPassManager &pm,
                                        const SM100PipelineOptions &options) {
  buildTileLevelForGPU(pm, "sm_100a", options.rescaleThreshold,
                       options.polyExp2Degree, options.polyExp2Period);
  OpPassManager &funcPm = pm.nest<func::FuncOp>();
  funcPm.addPass(fagpu::createFAGPUPipelineKV(
      fagpu::FAGPUPipelineKVOptions{options.stages}));
  funcPm.addPass(fagpu::createFAGPUTmemAccumulators());
  pm.addPass(createFAGPUBuildKernels());
  pm.addPass(createConvertFAGPUToNVVM());
}

void mlir::fa::buildSM100EmissionPipeline(OpPassManager &pm) {
  // tcgen05 and the shared::cta TMA destination: PTX 8.6 for sm_100a.
  buildGPUEmissionPipeline(pm, "sm_100a", "ptx86");
}

void mlir::fa::buildSM100Pipeline(OpPassManager &pm,
                                  const SM100PipelineOptions &options) {
  buildSM100KernelPipeline(pm, options);
  buildSM100EmissionPipeline(pm);
}

void mlir::fa::buildSM80Pipeline(OpPassManager &pm,
                                 const SM80PipelineOptions &options) {
  buildSM80KernelPipeline(pm, options);
  buildSM80EmissionPipeline(pm, options);
}

void mlir::fa::registerPipelines() {
  // The kernel halves alone (up to convert-fagpu-to-nvvm), for lit tests
  // and for reading the kernel IR.
  PassPipelineRegistration<SM80PipelineOptions>(
      "fa-sm80-kernel-pipeline",
      "fa-sm80-pipeline up to the NVVM kernel (no PTX)",
      buildSM80KernelPipeline);
  PassPipelineRegistration<SM90PipelineOptions>(
      "fa-sm90-kernel-pipeline",
      "fa-sm90-pipeline up to the NVVM kernel (no PTX)",
      buildSM90KernelPipeline);
  PassPipelineRegistration<SM100PipelineOptions>(
      "fa-sm100-kernel-pipeline",
      "fa-sm100-pipeline up to the NVVM kernel (no PTX)",
      buildSM100KernelPipeline);
  PassPipelineRegistration<SM80PipelineOptions>(
      "fa-sm80-pipeline",
      "Lower fa.attention to an mma.sync FlashAttention-2 kernel and emit "
      "its PTX (gpu.binary) with LLVM's NVPTX backend",
      buildSM80Pipeline);
  PassPipelineRegistration<SM90PipelineOptions>(
      "fa-sm90-pipeline",
      "Lower fa.attention to a FlashAttention-3 kernel for sm_90a (TMA, "
      "mbarrier ring, wgmma, warp specialisation, ping-pong) and emit its "
      "PTX (gpu.binary)",
      buildSM90Pipeline);
  PassPipelineRegistration<SM100PipelineOptions>(
      "fa-sm100-pipeline",
      "Lower fa.attention to a FlashAttention-4 style kernel for sm_100a "
      "(TMA, tcgen05.mma into tensor memory, softmax warps with conditional "
      "rescaling and partial software exp2) and emit its PTX (gpu.binary); "
      "compile-verified only",
      buildSM100Pipeline);
  PassPipelineRegistration<CPUPipelineOptions>(
      "fa-cpu-pipeline",
      "Lower fa.attention through fa-tile and a loop order (FA1 or FA2) to "
      "the LLVM dialect for execution on the host",
      buildCPUPipeline);
}

void mlir::fa::registerAllFADialects(DialectRegistry &registry) {
  registry.insert<FADialect, fagpu::FAGPUDialect>();
  registerAllDialects(registry);
  registerAllExtensions(registry);
  // fa-sm80-pipeline serializes gpu.modules: NVVM target and translations.
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  registerAllToLLVMIRTranslations(registry);
}

void mlir::fa::registerAllFAPasses() {
  registerAllPasses();
  registerFAPasses();
  registerFAConversionPasses();
  fagpu::registerFAGPUPasses();
  registerPipelines();
}
