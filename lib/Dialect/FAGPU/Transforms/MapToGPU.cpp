//===- MapToGPU.cpp - the FA2 loop nest onto one GPU kernel ---------------===//
//
// The FA2 loop nest is already the kernel's algorithm: the forall over
// (batch, head, query block) is the grid, the K/V loop the kernel's inner
// loop, the tile ops its body. What changes at the GPU level is where the
// tiles live and who computes them, which is the schedule's business; the
// numerics are read off the tile ops and carried over unchanged.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FAGPU/Transforms/Passes.h"

#include "fa/Dialect/FA/IR/FAOps.h"
#include "fa/Dialect/FA/IR/Validation.h"
#include "fa/Dialect/FAGPU/IR/Heuristics.h"
#include "fa/Dialect/FAGPU/IR/SharedMemory.h"
#include "fa/Model/KVChunk.h"

#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/Support/FormatVariadic.h"

namespace mlir::fagpu {
#define GEN_PASS_DEF_FAMAPTOGPU
#include "fa/Dialect/FAGPU/Transforms/Passes.h.inc"
} // namespace mlir::fagpu

using namespace mlir;
using namespace mlir::fagpu;

namespace {

/// The buffer a view is taken of (through memref.subview chains).
Value rootOf(Value memref) {
  while (auto view = memref.getDefiningOp<memref::SubViewOp>())
    memref = view.getSource();
  return memref;
}

/// What one FA2 nest computes.
struct Nest {
  Value q, k, v, o, lse;
  Value kvLengths, blockTable; // a KV cache's, else null
  Value cuQ, cuK;              // a varlen batch's prefix sums, else null
  // e4m3 inputs: the descale memrefs (fagpu::DescaleLayout's) and the
  // scale of P before its e4m3 cast; null otherwise.
  Value qDescale, kDescale, vDescale;
  FloatAttr probsScale;
  fa::ScoreTileOp score;
  /// Attention sinks: the [Hq] f32 logits (null without).
  Value sinks;
  /// The score tile's captures, as the function's memrefs.
  SmallVector<Value> captures;
  Operation *softmax = nullptr;
  int64_t blockR = 0, blockC = 0;
};

/// Copies a score tile's score_mod or mask_mod into
/// fagpu.attention's region: the same block, ending in fagpu.yield, its
/// ceil and floor divisions expanded into the arith ops LLVM lowers.
/// Returns the first op the kernel has no lowering for, if any.
Operation *copyModification(Region &from, Region &to) {
  if (from.empty())
    return nullptr;
  IRMapping mapping;
  from.cloneInto(&to, mapping);
  auto yield = cast<fa::YieldOp>(to.front().getTerminator());
  OpBuilder b(yield);
  YieldOp::create(b, yield.getLoc(), yield.getValues().front());
  yield.erase();
  RewritePatternSet patterns(to.getContext());
  arith::populateCeilFloorDivExpandOpsPatterns(patterns);
  (void)applyPatternsGreedily(to, std::move(patterns));
  return unsupportedModificationOp(to);
}

/// Reads the attention off `forall`, or emits why it is not an FA2 nest.
FailureOr<Nest> readNest(scf::ForallOp forall) {
  auto fail = [&](const Twine &why) -> FailureOr<Nest> {
    return forall.emitError() << "fa-map-to-gpu: " << why;
  };
  Nest nest;
  SmallVector<fa::ScoreTileOp> scores;
  SmallVector<Operation *> softmax, pv, normalize, lse, init;
  SmallVector<linalg::CopyOp> copies;
  forall.walk([&](Operation *op) {
    if (auto s = dyn_cast<fa::ScoreTileOp>(op))
      scores.push_back(s);
    else if (isa<fa::SoftmaxUpdateOp, fa::ConditionalSoftmaxUpdateOp>(op))
      softmax.push_back(op);
    else if (isa<fa::PVAccumulateOp>(op))
      pv.push_back(op);
    else if (isa<fa::NormalizeOp>(op))
      normalize.push_back(op);
    else if (isa<fa::LogSumExpOp>(op))
      lse.push_back(op);
    else if (isa<fa::InitStateOp>(op))
      init.push_back(op);
    else if (auto copy = dyn_cast<linalg::CopyOp>(op))
      copies.push_back(copy);
    else if (auto load = dyn_cast<memref::LoadOp>(op))
      if (auto role = load->getAttrOfType<StringAttr>(fa::kKVCacheAttr))
        (role.getValue() == "kv_lengths"     ? nest.kvLengths
         : role.getValue() == "block_table"  ? nest.blockTable
         : role.getValue() == "cu_seqlens_q" ? nest.cuQ
                                             : nest.cuK) =
            rootOf(load.getMemRef());
  });
  if (scores.size() != 1 || softmax.size() != 1 || pv.size() != 1 ||
      normalize.size() != 1 || init.size() != 1 || lse.size() > 1)
    return fail("expected the FA2 nest of fa-lower-fa2: one fa.init_state, "
                "fa.score_tile, softmax update, fa.pv_accumulate and "
                "fa.normalize, at most one fa.logsumexp");
  if (Value sink = cast<fa::InitStateOp>(init.front()).getSink()) {
    // The loop order reads head h's logit from the sinks memref (or picks
    // it for the first split-KV chunk only).
    auto load = sink.getDefiningOp<memref::LoadOp>();
    if (!load)
      return fail("attention sinks reach the GPU kernel without split-KV "
                  "only (the CPU pipeline runs them: fa-cpu-pipeline)");
    nest.sinks = rootOf(load.getMemRef());
  }
  nest.score = scores.front();
  for (Value capture : nest.score.getCaptures()) {
    // The kernel reads each capture from global memory as the contiguous
    // array the function passed in.
    nest.captures.push_back(rootOf(capture));
    if (std::optional<std::string> why =
            checkCaptureType(nest.captures.back().getType()))
      return fail("the GPU kernel reads captures as arrays: " + *why +
                  " (the CPU pipeline runs any: fa-cpu-pipeline)");
  }
  nest.softmax = softmax.front();
  // Every tile is a copy of a view of one of the function's memrefs (Q, K,
  // V in; O out): follow the copies from the tile ops' buffers.
  auto copiedInto = [&](Value tile) -> Value {
    for (linalg::CopyOp copy : copies)
      if (rootOf(copy.getOutputs()[0]) == rootOf(tile))
        return rootOf(copy.getInputs()[0]);
    return {};
  };
  auto copiedFrom = [&](Value tile) -> Value {
    for (linalg::CopyOp copy : copies)
      if (rootOf(copy.getInputs()[0]) == rootOf(tile))
        return rootOf(copy.getOutputs()[0]);
    return {};
  };
  nest.q = copiedInto(nest.score.getQuery());
  nest.k = copiedInto(nest.score.getKey());
  nest.v = copiedInto(cast<fa::PVAccumulateOp>(pv.front()).getValue());
  nest.o = copiedFrom(cast<fa::NormalizeOp>(normalize.front()).getAcc());
  if (!lse.empty())
    nest.lse = rootOf(cast<fa::LogSumExpOp>(lse.front()).getLse());
  for (auto [name, value] : {std::pair<StringRef, Value>{"Q", nest.q},
                             {"K", nest.k},
                             {"V", nest.v},
                             {"O", nest.o},
                             {"LSE", nest.lse}}) {
    if (name == "LSE" && lse.empty())
      continue;
    if (!value || forall->isAncestor(value.getParentBlock()->getParentOp()) ||
        value.getParentRegion() == &forall.getRegion())
      return fail("could not trace the " + name +
                  " tiles to a memref defined outside the nest");
    auto type = dyn_cast<MemRefType>(value.getType());
    if (!type || type.getRank() != (name == "LSE" ? 3 : 4))
      return fail(name + " must be a memref of rank " +
                  (name == "LSE" ? "3 [B, H, N]" : "4 [B, H, N, D]"));
    // The kernels take base pointers and tensor maps of packed rows.
    if (!type.getLayout().isIdentity())
      return forall.emitError()
             << "fa-map-to-gpu: " << name << " must be a contiguous memref "
             << "(identity layout), got " << type
             << "; copy strided views into contiguous buffers first";
  }
  // An e4m3 K/V beside a 16-bit Q (an FP8 KV cache): its score tile's
  // descale is K's alone, P V's is V's, P stays 16-bit.
  Type qElt = cast<MemRefType>(nest.q.getType()).getElementType();
  Type kvElt = cast<MemRefType>(nest.k.getType()).getElementType();
  bool fp8KeyValues =
      isa<Float8E4M3FNType>(kvElt) && !isa<Float8E4M3FNType>(qElt);
  if (cast<MemRefType>(nest.v.getType()).getElementType() != kvElt ||
      (!fp8KeyValues && kvElt != qElt))
    return fail("Q, K and V must be of one element type, or K and V e4m3 "
                "beside a 16-bit Q");
  // e4m3: the score tile's descale is q_descale * k_descale and the P V's
  // is v_descale, each loaded from a descale memref (fa-lower-fa2's
  // indices): one factor per tensor (rank 0); the tile's (batch, K/V
  // head)'s of a [B, Hkv] one, at the nest's batch and its head's group; or
  // per block (fa-block-quantize), Q's at the nest's (batch, head, query
  // block) and K's at (batch, K/V head, the K/V loop's block).
  auto pvOp = cast<fa::PVAccumulateOp>(pv.front());
  if (Value scoreDescale = nest.score.getDescale()) {
    SmallVector<Value> ivs(forall.getInductionVars());
    auto isKVHead = [&](Value index) {
      if (index == ivs[1])
        return true;
      auto group = index.getDefiningOp<arith::DivUIOp>();
      return group && group.getLhs() == ivs[1];
    };
    auto kvLoop = nest.score->getParentOfType<scf::ForOp>();
    // `blockIndex`: the index a per-block descale is read at (null: no
    // per-block layout for this factor).
    auto descaleArray = [&](Value factor, Value blockIndex,
                            bool keyHeads) -> Value {
      auto load = factor.getDefiningOp<memref::LoadOp>();
      if (!load)
        return {};
      ValueRange at = load.getIndices();
      auto isHead = [&](Value index) {
        return keyHeads ? isKVHead(index) : index == ivs[1];
      };
      switch (load.getMemRefType().getRank()) {
      case 0:
        break;
      case 2:
        if (at[0] != ivs[0] || !isKVHead(at[1]))
          return {};
        break;
      case 3:
        if (!blockIndex || at[0] != ivs[0] || !isHead(at[1]) ||
            at[2] != blockIndex)
          return {};
        break;
      default:
        return {};
      }
      return rootOf(load.getMemRef());
    };
    if (fp8KeyValues) {
      nest.kDescale = descaleArray(scoreDescale, Value(), /*keyHeads=*/true);
      if (pvOp.getDescale())
        nest.vDescale = descaleArray(pvOp.getDescale(), Value(),
                                     /*keyHeads=*/true);
      if (!nest.kDescale || !nest.vDescale)
        return fail("an e4m3 K/V takes K's and V's descales per tensor "
                    "(rank 0) or per (batch, K/V head) ([B, Hkv]), read at "
                    "fa-lower-fa2's indices");
      if (pvOp.getProbsScaleAttr())
        return fail("an e4m3 K/V keeps P at Q's precision: no probs_scale");
    } else {
      if (auto product = scoreDescale.getDefiningOp<arith::MulFOp>()) {
        nest.qDescale = descaleArray(product.getLhs(),
                                     ivs.size() > 2 ? ivs[2] : Value(),
                                     /*keyHeads=*/false);
        nest.kDescale = descaleArray(
            product.getRhs(), kvLoop ? kvLoop.getInductionVar() : Value(),
            /*keyHeads=*/true);
      }
      if (pvOp.getDescale())
        nest.vDescale = descaleArray(pvOp.getDescale(), Value(),
                                     /*keyHeads=*/true);
      if (!nest.qDescale || !nest.kDescale || !nest.vDescale)
        return fail("e4m3 kernels take descales per tensor (rank 0), per "
                    "(batch, K/V head) ([B, Hkv]), or per block (Q's per "
                    "query tile, K's per K/V tile, V's per tensor), read at "
                    "fa-lower-fa2's indices");
      nest.probsScale = pvOp.getProbsScaleAttr();
      if (!nest.probsScale)
        return fail("the e4m3 P V product needs P cast to e4m3 with its "
                    "scale: run fa-quantize-probs");
    }
  }
  auto scoreType = cast<MemRefType>(nest.score.getScores().getType());
  nest.blockR = scoreType.getDimSize(0);
  nest.blockC = scoreType.getDimSize(1);
  return nest;
}

/// Why the kernels of `target` cannot run `nest`, or nothing.
std::optional<std::string> unsupported(const Nest &nest, Target target) {
  auto q = cast<MemRefType>(nest.q.getType());
  auto v = cast<MemRefType>(nest.v.getType());
  Type elt = q.getElementType();
  // e4m3 with its reason, not as an unknown type. sm_90a maps it to its
  // fagpu level, where fagpu-build-kernels gives the same reason until its
  // kernel exists.
  if (target != Target::sm_90a)
    if (std::optional<std::string> why = fa::checkTargetElementType(
            targetName(target), llvm::formatv("{0}", elt).str()))
      return why;
  bool fp8 = isa<Float8E4M3FNType>(elt);
  if (!elt.isF16() && !elt.isBF16() && !fp8)
    return std::string("element type must be f16") +
           (target == Target::sm_90a ? ", bf16 or e4m3" : " or bf16") +
           ", got " + llvm::formatv("{0}", elt).str();
  if (fp8) {
    if (std::optional<std::string> why =
            checkFP8Tiles(q.getDimSize(3), nest.blockC))
      return why;
    if (nest.kvLengths || nest.blockTable || nest.cuQ)
      return "e4m3 kernels do not take KV caches or varlen batches yet";
    if (v.getDimSize(3) != q.getDimSize(3))
      return "e4m3 kernels take V of Q's head dim (V^T's rows are D)";
  }
  Type kvElt = cast<MemRefType>(nest.k.getType()).getElementType();
  if (isa<Float8E4M3FNType>(kvElt) && !fp8) {
    if (target != Target::sm_90a)
      return "an e4m3 K/V beside a 16-bit Q has a kernel on sm_90a only (the "
             "CPU path runs it: fa-run --kv-dtype e4m3)";
    if (nest.cuQ)
      return "an e4m3 K/V takes no varlen batch";
  }
  int64_t d = q.getDimSize(3);
  // sm_90a's kernels: the wgmma kernel's rule (the mma.sync kernel's
  // builder asks for its own).
  if (std::optional<std::string> why =
          checkHeadDims(target, /*wgmma=*/true, d, v.getDimSize(3)))
    return why;
  // The kernels compare 32-bit positions.
  fa::ScoreTileOp score = nest.score;
  if (std::optional<int64_t> window = score.getWindow())
    if (std::optional<std::string> why =
            fa::checkWindow(*window, /*positionBits=*/32))
      return *why;
  if (std::optional<int64_t> offset = score.getDiagonalOffset())
    if (std::optional<std::string> why =
            fa::checkDiagonalOffset(*offset, /*positionBits=*/32))
      return *why;
  if (nest.cuQ && target != Target::sm_90a)
    return "varlen batches have a GPU kernel on sm_90a only";
  if ((nest.kvLengths || nest.blockTable) && target != Target::sm_90a)
    return "per-sequence key lengths and paged K/V have a GPU kernel on "
           "sm_90a only";
  if (nest.blockTable) {
    int64_t pageSize = cast<MemRefType>(nest.k.getType()).getDimSize(2);
    if (ShapedType::isDynamic(pageSize) ||
        (pageSize % nest.blockC != 0 &&
         (nest.blockC % pageSize != 0 || pageSize % 8 != 0)))
      return "a K/V block (block_c = " + std::to_string(nest.blockC) +
             ") must lie in one page or span whole pages (of a multiple of "
             "8 rows), got pages of " +
             std::to_string(pageSize) + " rows";
  }
  if (target == Target::sm_90a &&
      (nest.blockR % kRowsPerConsumer != 0 || nest.blockR > 192))
    return "block_r must be 64, 128 or 192 (one, two or three consumer "
           "warpgroups of 64 rows), got " +
           std::to_string(nest.blockR);
  return std::nullopt;
}

/// What the FA2 backward's main nest computes.
struct BackwardNest {
  Value q, k, v, lse, dO, rowDots, dqAccum, dK, dV;
  fa::ScoreTileOp score;
  int64_t blockR = 0, blockC = 0;
};

/// Reads the backward off `forall`, or emits why the GPU kernel cannot run
/// it.
FailureOr<BackwardNest> readBackwardNest(scf::ForallOp forall) {
  auto fail = [&](const Twine &why) -> FailureOr<BackwardNest> {
    return forall.emitError() << "fa-map-to-gpu: " << why;
  };
  SmallVector<fa::ScoreTileOp> scores;
  fa::RecomputeProbsOp probs;
  fa::GradValuesOp values;
  fa::GradProbsOp gradProbs;
  fa::GradScoresOp gradScores;
  fa::GradKeysOp keys;
  fa::GradQueriesOp queries;
  SmallVector<linalg::CopyOp> copies;
  SmallVector<linalg::GenericOp> conversions;
  bool chained = false, loads = false;
  forall.walk([&](Operation *op) {
    if (auto s = dyn_cast<fa::ScoreTileOp>(op))
      scores.push_back(s);
    else if (auto p = dyn_cast<fa::RecomputeProbsOp>(op))
      probs = p;
    else if (auto g = dyn_cast<fa::GradValuesOp>(op))
      values = g;
    else if (auto g = dyn_cast<fa::GradProbsOp>(op))
      gradProbs = g;
    else if (auto g = dyn_cast<fa::GradScoresOp>(op))
      gradScores = g;
    else if (auto g = dyn_cast<fa::GradKeysOp>(op))
      keys = g;
    else if (auto g = dyn_cast<fa::GradQueriesOp>(op))
      queries = g;
    else if (isa<fa::ChainScoreModOp>(op))
      chained = true;
    else if (isa<memref::LoadOp>(op))
      loads = true;
    else if (auto copy = dyn_cast<linalg::CopyOp>(op))
      copies.push_back(copy);
    else if (auto generic = dyn_cast<linalg::GenericOp>(op))
      conversions.push_back(generic);
  });
  if (scores.size() != 1 || !probs || !values || !gradProbs || !gradScores ||
      !keys || !queries)
    return fail("expected the backward nest of fa-lower-fa2-backward: one "
                "fa.score_tile, fa.recompute_probs, fa.grad_values, "
                "fa.grad_probs, fa.grad_scores, fa.grad_keys and "
                "fa.grad_queries");
  BackwardNest nest;
  nest.score = scores.front();
  fa::ScoreTileOp score = nest.score;
  // What the kernel does not take yet, each with its way out.
  StringRef cpu = " (the CPU pipeline runs it: fa-cpu-pipeline)";
  if (loads)
    return fail("varlen batches have no GPU backward yet" + cpu);
  if (chained || !score.getScoreMod().empty() || !score.getMaskMod().empty())
    return fail("score_mod and mask_mod have no GPU backward yet" + cpu);
  if (score.getSoftcap())
    return fail("softcaps have no GPU backward yet" + cpu);
  if (auto fn = forall->getParentOfType<FunctionOpInterface>()) {
    WalkResult sinks =
        fn->walk([](fa::GradSinkOp) { return WalkResult::interrupt(); });
    if (sinks.wasInterrupted())
      return fail("attention sinks have no GPU backward yet" + cpu);
  }
  auto copiedInto = [&](Value tile) -> Value {
    for (linalg::CopyOp copy : copies)
      if (rootOf(copy.getOutputs()[0]) == rootOf(tile))
        return rootOf(copy.getInputs()[0]);
    return {};
  };
  auto convertedInto = [&](Value acc) -> Value {
    for (linalg::GenericOp generic : conversions)
      if (generic.getNumDpsInputs() == 1 &&
          rootOf(generic.getDpsInputs()[0]) == rootOf(acc))
        return rootOf(generic.getDpsInits()[0]);
    return {};
  };
  nest.q = rootOf(score.getQuery());
  nest.k = copiedInto(score.getKey());
  nest.v = copiedInto(gradProbs.getValue());
  nest.lse = rootOf(probs.getLse());
  nest.dO = rootOf(values.getGradOut());
  nest.rowDots = rootOf(gradScores.getDot());
  nest.dqAccum = rootOf(queries.getAcc());
  nest.dK = convertedInto(keys.getAcc());
  nest.dV = convertedInto(values.getAcc());
  for (auto [name, value, rank] :
       {std::tuple<StringRef, Value, int64_t>{"Q", nest.q, 4},
        {"K", nest.k, 4},
        {"V", nest.v, 4},
        {"LSE", nest.lse, 3},
        {"dO", nest.dO, 4},
        {"D", nest.rowDots, 3},
        {"dQ's accumulator", nest.dqAccum, 4},
        {"dK", nest.dK, 4},
        {"dV", nest.dV, 4}}) {
    if (!value || forall->isAncestor(value.getParentBlock()->getParentOp()) ||
        value.getParentRegion() == &forall.getRegion())
      return fail("could not trace " + name +
                  " to a memref defined outside the nest");
    auto type = dyn_cast<MemRefType>(value.getType());
    if (!type || type.getRank() != rank || !type.getLayout().isIdentity())
      return forall.emitError() << "fa-map-to-gpu: the backward kernel takes "
                                << name << " as a contiguous memref of rank "
                                << rank << ", got " << value.getType();
  }
  Type elt = cast<MemRefType>(nest.q.getType()).getElementType();
  if (!elt.isF16() && !elt.isBF16())
    return fail("the backward kernel takes f16 or bf16 inputs, got " +
                llvm::formatv("{0}", elt).str() + cpu);
  for (Value t : {nest.k, nest.v, nest.dO, nest.dK, nest.dV})
    if (cast<MemRefType>(t.getType()).getElementType() != elt)
      return fail("the backward kernel takes Q, K, V, dO, dK and dV of one "
                  "element type" +
                  cpu);
  int64_t d = cast<MemRefType>(nest.q.getType()).getDimSize(3);
  if ((d != 64 && d != 128) ||
      cast<MemRefType>(nest.v.getType()).getDimSize(3) != d)
    return fail(
        "the backward kernel takes D = Dv of 64 or 128, got D = " + Twine(d) +
        ", Dv = " + Twine(cast<MemRefType>(nest.v.getType()).getDimSize(3)) +
        cpu);
  auto tile = cast<MemRefType>(probs.getScores().getType());
  nest.blockR = tile.getDimSize(0);
  nest.blockC = tile.getDimSize(1);
  if (nest.blockR != 64 || nest.blockC != 64)
    return fail("the backward kernel's tiles are 64 x 64, got " +
                Twine(nest.blockR) + " x " + Twine(nest.blockC) +
                " (fa-lower-fa2-backward{block-r=64 block-c=64})");
  return nest;
}

struct FAMapToGPUPass : fagpu::impl::FAMapToGPUBase<FAMapToGPUPass> {
  using FAMapToGPUBase::FAMapToGPUBase;

  void runOnOperation() override {
    std::optional<Target> parsed = symbolizeTarget(target);
    if (!parsed) {
      emitError(getOperation().getLoc())
          << "fa-map-to-gpu: target must be sm_80, sm_90a or sm_100a, got '"
          << target << "'";
      return signalPassFailure();
    }
    SmallVector<scf::ForallOp> nests;
    getOperation().walk([&](scf::ForallOp forall) {
      auto order = forall->getAttrOfType<StringAttr>("fa.loop_order");
      if (order && (order.getValue() == "fa2" ||
                    order.getValue() == "fa2-split-kv"))
        nests.push_back(forall);
      if (order && order.getValue() == "fa2-backward")
        backwardNests.push_back(forall);
    });
    for (scf::ForallOp forall : nests)
      if (failed(map(forall, *parsed)))
        return signalPassFailure();
    for (scf::ForallOp forall : backwardNests)
      if (failed(mapBackward(forall, *parsed)))
        return signalPassFailure();
  }

  SmallVector<scf::ForallOp> backwardNests;

  /// The FA2 backward's main nest (fa-lower-fa2-backward's forall over
  /// (batch, K/V head)) -> fagpu.attention_backward. The preprocess nest
  /// (D = rowsum(dO o O)) and dQ's conversion from its f32 accumulator stay
  /// where they are: the kernel reads D and adds into the accumulator.
  LogicalResult mapBackward(scf::ForallOp forall, Target target) {
    FailureOr<BackwardNest> nest = readBackwardNest(forall);
    if (failed(nest))
      return failure();
    if (target != Target::sm_80)
      return forall.emitError()
             << "fa-map-to-gpu: the backward has a GPU kernel on sm_80 only "
                "(mma.sync, which sm_90a runs too: fa-sm80-pipeline "
                "chip=sm_90a), not "
             << targetName(target);
    OpBuilder b(forall);
    fa::ScoreTileOp score = nest->score;
    AttentionBackwardOp::create(
        b, forall.getLoc(), nest->q, nest->k, nest->v, nest->lse, nest->dO,
        nest->rowDots, nest->dqAccum, nest->dK, nest->dV,
        TargetAttr::get(&getContext(), target), score.getScaleAttr(),
        score.getCausalAttr(), score.getWindowAttr(),
        score.getBottomRightAttr(), score.getDiagonalOffsetAttr(),
        b.getI64IntegerAttr(nest->blockR), b.getI64IntegerAttr(nest->blockC),
        deterministicBackward ? b.getUnitAttr() : UnitAttr(),
        vectorReductions ? b.getUnitAttr() : UnitAttr());
    forall.erase();
    return success();
  }

  /// A split-KV nest writes partial (O, LSE) to scratch that a merge nest
  /// combines into the attention's O and LSE. On the GPU one kernel does
  /// both (each CTA one chunk, the tile's last CTA the merge): `nest` is
  /// given the merge's destinations, the merge nest and the scratch go.
  /// Returns the chunk count.
  FailureOr<int64_t> absorbMerge(scf::ForallOp forall, Nest &nest) {
    std::optional<int64_t> splits =
        getConstantIntValue(forall.getMixedUpperBound().back());
    if (forall.getRank() != 4 || !splits)
      return forall.emitError()
             << "fa-map-to-gpu: expected a split-KV nest over (batch, head, "
                "query block, chunk) with a constant chunk count";
    fa::MergePartialsOp merge;
    for (Operation *user : nest.o.getUsers())
      if (auto forall = user->getParentOfType<scf::ForallOp>())
        forall.walk([&](fa::MergePartialsOp op) {
          if (rootOf(op.getPartialOut()) == nest.o)
            merge = op;
        });
    if (!merge)
      return forall.emitError() << "fa-map-to-gpu: found no fa.merge_partials "
                                   "of the split-KV nest's partials";
    Value partialOut = nest.o, partialLse = nest.lse;
    nest.o = rootOf(merge.getOut());
    nest.lse = merge.getLse() ? rootOf(merge.getLse()) : Value();
    merge->getParentOfType<scf::ForallOp>().erase();
    for (Value scratch : {partialOut, partialLse}) {
      for (Operation *user : llvm::make_early_inc_range(scratch.getUsers()))
        if (isa<memref::DeallocOp>(user))
          user->erase();
      if (scratch.use_empty() || llvm::all_of(scratch.getUsers(), [&](auto *u) {
            return forall->isAncestor(u);
          }))
        scratchToErase.push_back(scratch.getDefiningOp());
    }
    return *splits;
  }

  /// Allocations of absorbed split-KV scratch, erased with their nest.
  SmallVector<Operation *> scratchToErase;

  LogicalResult map(scf::ForallOp forall, Target target) {
    FailureOr<Nest> nest = readNest(forall);
    if (failed(nest))
      return failure();
    int64_t kvSplits = 0;
    if (forall->getAttrOfType<StringAttr>("fa.loop_order").getValue() ==
        "fa2-split-kv") {
      if (!nest->lse)
        return forall.emitError() << "fa-map-to-gpu: the split-KV nest writes "
                                     "no partial LSE";
      FailureOr<int64_t> splits = absorbMerge(forall, *nest);
      if (failed(splits))
        return failure();
      if (target != Target::sm_90a)
        return forall.emitError()
               << "fa-map-to-gpu: split-KV has a GPU kernel on sm_90a only, "
                  "not "
               << targetName(target)
               << ": run it on the CPU path, or compile without fa-split-kv";
      kvSplits = *splits;
    }
    if (std::optional<std::string> why = unsupported(*nest, target))
      return forall.emitError() << "fa-map-to-gpu: cannot be mapped to "
                                << targetName(target) << ": " << *why;
    MLIRContext *ctx = &getContext();
    OpBuilder b(forall);
    // The target's fixed structure; every FA3 idea off.
    ScheduleFields fields;
    fields.blockR = nest->blockR;
    fields.blockC = nest->blockC;
    if (target == Target::sm_90a) {
      fields.consumers = nest->blockR / kRowsPerConsumer;
      // One consumer leaves room for a second CTA, which plays the part of
      // the ping-pong partner.
      fields.ctasPerSm = fields.consumers == 1 ? 2 : 1;
      // An e4m3 cache beside a 16-bit Q: the widened K/V ring's two stages
      // and the cache ring's leave no room for a second CTA
      // (SM90Layout::widensKeyValues).
      Type kvElement = cast<MemRefType>(nest->k.getType()).getElementType();
      Type qElement = cast<MemRefType>(nest->q.getType()).getElementType();
      if (isa<Float8E4M3FNType>(kvElement) && !isa<Float8E4M3FNType>(qElement))
        fields.ctasPerSm = 1;
      if (ctasPerSm) {
        if (ctasPerSm != 1 && !(ctasPerSm == 2 && fields.consumers == 1))
          return emitError(forall.getLoc())
                 << "fa-map-to-gpu: ctas-per-sm must be 1, or 2 with one "
                    "consumer warpgroup (block_r = 64), got "
                 << int64_t(ctasPerSm);
        fields.ctasPerSm = ctasPerSm;
      }
    }
    fields.kvSplits = kvSplits;
    if (target == Target::sm_80) {
      fields.stages = 2; // the cp.async double buffer
      fields.qInRegisters = queryInRegisters;
    }

    fa::ScoreTileOp score = nest->score;
    std::optional<APFloat> threshold;
    std::optional<int64_t> degree, period;
    if (auto update = dyn_cast<fa::ConditionalSoftmaxUpdateOp>(nest->softmax)) {
      if (update.getCounters())
        return update.emitError()
               << "fa-map-to-gpu: rescale counters (instrument) exist on the "
                  "CPU path only";
      threshold = update.getThreshold();
      degree = update.getExp2PolyDegree();
      period = update.getExp2PolyPeriod();
    } else {
      auto plain = cast<fa::SoftmaxUpdateOp>(nest->softmax);
      degree = plain.getExp2PolyDegree();
      period = plain.getExp2PolyPeriod();
    }
    if ((!score.getScoreMod().empty() || !score.getMaskMod().empty()) &&
        (nest->qDescale || nest->kDescale))
      return emitError(forall.getLoc())
             << "fa-map-to-gpu: score_mod and mask_mod have a GPU kernel "
                "with 16-bit Q, K and V only, not on "
             << targetName(target)
             << " with e4m3 inputs (the CPU pipeline runs them: "
                "fa-cpu-pipeline)";
    if (nest->sinks && (target != Target::sm_90a || nest->qDescale))
      return emitError(forall.getLoc())
             << "fa-map-to-gpu: attention sinks have a GPU kernel on sm_90a "
                "with a 16-bit Q only, not "
             << targetName(target) << (nest->qDescale ? " with e4m3 Q" : "")
             << " (the CPU pipeline runs them: fa-cpu-pipeline)";
    auto attention = AttentionOp::create(
        b, forall.getLoc(), nest->q, nest->k, nest->v, nest->o, nest->lse,
        nest->kvLengths, nest->blockTable, nest->cuQ, nest->cuK, nest->qDescale,
        nest->kDescale, nest->vDescale, nest->sinks, nest->captures,
        TargetAttr::get(ctx, target), score.getScaleAttr(),
        score.getCausalAttr(), score.getWindowAttr(), score.getSoftcapAttr(),
        threshold ? b.getF32FloatAttr(threshold->convertToFloat())
                  : FloatAttr(),
        degree ? b.getI64IntegerAttr(*degree) : IntegerAttr(),
        degree && period ? b.getI64IntegerAttr(*period) : IntegerAttr(),
        scheduleOf(ctx, fields), score.getBottomRightAttr(), nest->probsScale,
        score.getDiagonalOffsetAttr());
    for (auto [from, to] :
         {std::pair(&score.getScoreMod(), &attention.getScoreMod()),
          std::pair(&score.getMaskMod(), &attention.getMaskMod())})
      if (Operation *op = copyModification(*from, *to)) {
        InFlightDiagnostic diag =
            emitError(forall.getLoc())
            << "fa-map-to-gpu: the GPU kernel has no lowering for "
            << op->getName() << " in a score_mod or mask_mod (it lowers "
            << "arith ops and " << supportedModificationMathOps() << ")";
        attention.erase();
        return diag;
      }
    forall.erase();
    for (Operation *scratch : scratchToErase)
      scratch->erase();
    scratchToErase.clear();
    return success();
  }
};

} // namespace
