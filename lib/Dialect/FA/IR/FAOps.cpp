//===- FAOps.cpp - fa dialect operations ------------------------*- C++ -*-===//
//
// Verifiers name the operand, the expected value and the actual value in one
// line, so a front end that builds a bad op learns exactly what to fix.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/IR/FAOps.h"
#include "fa/Dialect/FA/IR/ScoreModDerivative.h"
#include "fa/Dialect/FA/IR/Validation.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

#include <cmath>
#include <string>

using namespace mlir;
using namespace mlir::fa;

/// Fails with "expected <what> to be <expected> (<whose>), got <actual>" when
/// both sizes are static and differ.
static LogicalResult checkSameDim(Operation *op, StringRef what,
                                  int64_t expected, StringRef whose,
                                  int64_t actual) {
  if (ShapedType::isDynamic(expected) || ShapedType::isDynamic(actual) ||
      expected == actual)
    return success();
  return op->emitOpError() << "expected " << what << " to be " << expected
                           << " (" << whose << "), got " << actual;
}

static LogicalResult checkRank(Operation *op, StringRef name, ShapedType type,
                               int64_t rank, StringRef layout) {
  if (type.getRank() == rank)
    return success();
  return op->emitOpError() << "expected " << name << " to have rank " << rank
                           << " (" << layout << "), got rank "
                           << type.getRank();
}

/// Fails with the diagnostic of a range check (Validation.h), if any.
static LogicalResult checkRange(Operation *op,
                                std::optional<std::string> error) {
  if (!error)
    return success();
  return op->emitOpError(*error);
}

static LogicalResult checkElementType(Operation *op, StringRef name,
                                      Type expected, StringRef whose,
                                      Type actual) {
  if (expected == actual)
    return success();
  return op->emitOpError() << "expected " << name << " element type to be "
                           << expected << " (" << whose << "), got " << actual;
}

/// An element type by its MLIR name, for Validation.h's type checks.
static std::string typeName(Type type) {
  std::string name;
  llvm::raw_string_ostream os(name);
  type.print(os);
  return name;
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

void AttentionOp::build(OpBuilder &builder, OperationState &state,
                        TypeRange results, Value query, Value key, Value value,
                        ValueRange outs, ValueRange descales, Value kvLengths,
                        Value blockTable, Value cuSeqlensQ, Value cuSeqlensK,
                        Value sinks, ValueRange captures,
                        ArrayRef<NamedAttribute> attrs) {
  state.addOperands({query, key, value});
  state.addOperands(outs);
  state.addOperands(descales);
  if (kvLengths)
    state.addOperands(kvLengths);
  if (blockTable)
    state.addOperands(blockTable);
  if (cuSeqlensQ)
    state.addOperands(cuSeqlensQ);
  if (cuSeqlensK)
    state.addOperands(cuSeqlensK);
  if (sinks)
    state.addOperands(sinks);
  state.addOperands(captures);
  state.addTypes(results);
  // score_mod and mask_mod, empty (takeModifications fills them).
  state.addRegion();
  state.addRegion();
  Properties &props = state.getOrAddProperties<Properties>();
  props.operandSegmentSizes = {1,
                               1,
                               1,
                               static_cast<int32_t>(outs.size()),
                               static_cast<int32_t>(descales.size()),
                               kvLengths ? 1 : 0,
                               blockTable ? 1 : 0,
                               cuSeqlensQ ? 1 : 0,
                               cuSeqlensK ? 1 : 0,
                               sinks ? 1 : 0,
                               static_cast<int32_t>(captures.size())};
  for (NamedAttribute attr : attrs)
    if (attr.getName() != getOperandSegmentSizesAttrName(state.name))
      state.addAttribute(attr.getName(), attr.getValue());
}

/// Checks one descale operand of an fp8 attention: rank 0 (per tensor),
/// [B, Hkv] (per batch and K/V head) or, for Q and K, [B, H, ceil(N / tile)]
/// with the tile size given (per block).
static LogicalResult checkDescaleType(AttentionOp op, StringRef name,
                                      Value descale, ShapedType input,
                                      ShapedType key,
                                      std::optional<int64_t> tile) {
  auto type = cast<ShapedType>(descale.getType());
  if (isa<MemRefType>(type) != op.hasBufferSemantics())
    return op.emitOpError() << "expected " << name << " to be a "
                            << (op.hasBufferSemantics() ? "memref" : "tensor")
                            << " like the inputs, got " << type;
  Operation *o = op.getOperation();
  switch (type.getRank()) {
  case 0:
    return success();
  case 2:
    // The query's batch: a paged K/V's dim 0 counts pages.
    return failure(
        failed(checkSameDim(o, name.str() + " batch size",
                            op.getQueryType().getDimSize(0),
                            "the inputs'", type.getDimSize(0))) ||
        failed(checkSameDim(o, name.str() + " head count", key.getDimSize(1),
                            "the K/V heads'", type.getDimSize(1))));
  case 3: {
    if (name == "v_descale")
      return op.emitOpError("expected v_descale of rank 0 or 2 (per tensor, "
                            "per batch and K/V head), got rank 3: V is not "
                            "block-quantised");
    if (!tile)
      return op.emitOpError()
             << "expected " << name
             << " of rank 3 (per block) to come with the tile sizes "
                "block_r and block_c (blocks are tiles: run fa-tile first)";
    int64_t n = input.getDimSize(2);
    int64_t blocks = ShapedType::isDynamic(n) ? ShapedType::kDynamic
                                              : (n + *tile - 1) / *tile;
    return failure(
        failed(checkSameDim(o, name.str() + " batch size", input.getDimSize(0),
                            "the inputs'", type.getDimSize(0))) ||
        failed(checkSameDim(o, name.str() + " head count", input.getDimSize(1),
                            "its input's", type.getDimSize(1))) ||
        failed(checkSameDim(o, name.str() + " block count", blocks,
                            "ceil(N / tile)", type.getDimSize(2))));
  }
  default:
    return op.emitOpError()
           << "expected " << name
           << " of rank 0 (per tensor), 2 ([B, Hkv]) or 3 ([B, H, "
              "ceil(N / tile)]), got rank "
           << type.getRank();
  }
}

/// score_mod and mask_mod are functions the op evaluates at each score, not
/// code that control flow enters: from the op, control goes back to its
/// parent and no value flows through the regions (buffer deallocation and
/// other region-aware analyses read this).
void AttentionOp::getSuccessorRegions(
    RegionBranchPoint point, SmallVectorImpl<RegionSuccessor> &regions) {
  if (point.isParent())
    regions.push_back(RegionSuccessor(
        getOperation(), getOperation()->getResults().take_front(0)));
}

float AttentionOp::getEffectiveScale() {
  if (std::optional<APFloat> scale = getScale())
    return scale->convertToFloat();
  return 1.0f / std::sqrt(static_cast<float>(getHeadDim()));
}

/// `effect` on every operand of `operands` (one operand, or an optional or
/// variadic group).
static void
addEffects(SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
               &effects,
           MemoryEffects::Effect *effect, MutableOperandRange operands) {
  for (OpOperand &operand : operands)
    effects.emplace_back(effect, &operand, SideEffects::DefaultResource::get());
}

void AttentionOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  if (!hasBufferSemantics())
    return;
  for (MutableOperandRange inputs :
       {MutableOperandRange(getQueryMutable()),
        MutableOperandRange(getKeyMutable()),
        MutableOperandRange(getValueMutable()), getDescalesMutable(),
        getKvLengthsMutable(), getBlockTableMutable(), getCuSeqlensQMutable(),
        getCuSeqlensKMutable(), getSinksMutable()})
    addEffects(effects, MemoryEffects::Read::get(), inputs);
  // Captured memrefs are read (the regions see their values).
  for (OpOperand &capture : getCapturesMutable())
    if (isa<MemRefType>(capture.get().getType()))
      addEffects(effects, MemoryEffects::Read::get(), capture);
  addEffects(effects, MemoryEffects::Write::get(), getOutsMutable());
}

/// kv_lengths [B] and a block table [B, P]: i32 of the inputs' kind, one
/// row per sequence; with pages, K and V are [num_pages, Hkv, page_size, D]
/// with a static page size.
static LogicalResult verifyKVCache(AttentionOp op) {
  ShapedType q = op.getQueryType(), k = op.getKeyType();
  Operation *o = op.getOperation();
  auto checkKind = [&](StringRef name, Value v) -> LogicalResult {
    if (isa<MemRefType>(v.getType()) != op.hasBufferSemantics())
      return op.emitOpError()
             << "expected " << name << " to be a "
             << (op.hasBufferSemantics() ? "memref" : "tensor")
             << " like the inputs, got " << v.getType();
    return success();
  };
  if (Value lengths = op.getKvLengths()) {
    auto type = cast<ShapedType>(lengths.getType());
    if (failed(checkKind("kv_lengths", lengths)) ||
        failed(checkRank(o, "kv_lengths", type, 1, "[B]")) ||
        failed(checkSameDim(o, "kv_lengths size", q.getDimSize(0),
                            "the query's batch size", type.getDimSize(0))))
      return failure();
  }
  if (op.isVarlen() != static_cast<bool>(op.getCuSeqlensK()))
    return op.emitOpError("expected both cu_seqlens_q and cu_seqlens_k");
  if (op.isVarlen()) {
    auto qSums = cast<ShapedType>(op.getCuSeqlensQ().getType());
    auto kSums = cast<ShapedType>(op.getCuSeqlensK().getType());
    if (failed(checkKind("cu_seqlens_q", op.getCuSeqlensQ())) ||
        failed(checkKind("cu_seqlens_k", op.getCuSeqlensK())) ||
        failed(checkRank(o, "cu_seqlens_q", qSums, 1, "[B + 1]")) ||
        failed(checkRank(o, "cu_seqlens_k", kSums, 1, "[B + 1]")) ||
        failed(checkSameDim(o, "cu_seqlens_k size", qSums.getDimSize(0),
                            "cu_seqlens_q's", kSums.getDimSize(0))))
      return failure();
    if (qSums.getDimSize(0) == 0 || qSums.getDimSize(0) == 1)
      return op.emitOpError("expected cu_seqlens of at least two entries "
                            "(B + 1 prefix sums, B >= 1), got ")
             << qSums.getDimSize(0);
    // Packed sequences: one batch row of tensors.
    for (auto [name, type] :
         {std::pair<StringRef, ShapedType>{"Q", q}, {"K", k},
          {"V", op.getValueType()}})
      if (failed(checkSameDim(o, name.str() + " batch size", 1,
                              "packed varlen sequences", type.getDimSize(0))))
        return failure();
    if (op.getKvLengths() || op.getBlockTable() || !op.getDescales().empty() ||
        op.getKvSplits())
      return op.emitOpError("varlen batches take no kv_lengths, pages, "
                            "descales or kv_splits (not supported together)");
  }
  Value table = op.getBlockTable();
  if (!table)
    return success();
  auto type = cast<ShapedType>(table.getType());
  if (failed(checkKind("block table", table)) ||
      failed(checkRank(o, "block table", type, 2, "[B, max_pages]")) ||
      failed(checkSameDim(o, "block table rows", q.getDimSize(0),
                          "the query's batch size", type.getDimSize(0))))
    return failure();
  if (k.isDynamicDim(2))
    return op.emitOpError("expected a static page size (dim 2 of the paged "
                          "K/V cache [num_pages, Hkv, page_size, D])");
  if (k.getDimSize(2) < 1)
    return op.emitOpError("expected a page size of at least 1");
  if (!op.getDescales().empty() &&
      cast<ShapedType>(op.getKeyDescale().getType()).getRank() == 3)
    return op.emitOpError("expected k_descale of rank 0 or 2 with a paged "
                          "cache: per-block descales follow K's rows, "
                          "which pages scatter");
  return success();
}

/// Checks a score_mod or mask_mod region (if present): one block whose
/// arguments are `leading` then one tensor per capture (a memref capture's
/// values as a tensor of its shape), ending in fa.yield of one `yielded`;
/// its ops are free of side effects, use only values of the region, and
/// read the captures with tensor.extract (or ask tensor.dim) only.
static LogicalResult verifyModRegion(Operation *op, Region &region,
                                     StringRef name, ArrayRef<Type> leading,
                                     TypeRange captures, Type yielded) {
  if (region.empty())
    return success();
  Block &block = region.front();
  SmallVector<Type> expected(leading);
  for (Type capture : captures) {
    auto shaped = cast<ShapedType>(capture);
    expected.push_back(
        RankedTensorType::get(shaped.getShape(), shaped.getElementType()));
  }
  if (failed(verifyRegionArguments(
          op, block, name, expected,
          (" (the " + Twine(leading.size()) +
           " leading ones, then each capture as a tensor)")
              .str())))
    return failure();
  auto yield = block.empty() ? YieldOp() : dyn_cast<YieldOp>(block.back());
  if (!yield || yield.getValues().size() != 1 ||
      yield.getValues()[0].getType() != yielded)
    return op->emitOpError() << "expected " << name << " to end in fa.yield of "
                             << "one " << yielded;
  for (BlockArgument capture : block.getArguments().drop_front(leading.size()))
    for (Operation *user : capture.getUsers())
      if (!isa<tensor::ExtractOp, tensor::DimOp>(user))
        return user->emitOpError()
               << "in " << name
               << " reads a capture other than by tensor.extract or "
                  "tensor.dim";
  WalkResult walk = region.walk([&](Operation *inner) {
    for (Value operand : inner->getOperands())
      if (!region.isAncestor(operand.getParentRegion())) {
        inner->emitOpError() << "in " << name
                             << " uses a value defined outside it; pass it "
                                "through captures(...)";
        return WalkResult::interrupt();
      }
    if (isMemoryEffectFree(inner))
      return WalkResult::advance();
    inner->emitOpError() << "in " << name
                         << " has side effects (a score or mask modification "
                            "computes a value from its arguments and "
                            "captures only)";
    return WalkResult::interrupt();
  });
  return failure(walk.wasInterrupted());
}

LogicalResult mlir::fa::verifyRegionArguments(Operation *op, Block &block,
                                              StringRef name,
                                              TypeRange expected,
                                              StringRef detail) {
  if (block.getArgumentTypes() == expected)
    return success();
  std::string want, got;
  llvm::raw_string_ostream w(want), g(got);
  llvm::interleaveComma(expected, w);
  llvm::interleaveComma(block.getArgumentTypes(), g);
  return op->emitOpError() << "expected " << name
                           << "'s block arguments to be (" << want << ")"
                           << detail << ", got (" << got << ")";
}

/// Both modification regions of an attention or a score tile.
static LogicalResult verifyModifications(Operation *op, Region &scoreMod,
                                         Region &maskMod, TypeRange captures) {
  Builder b(op->getContext());
  Type index = b.getIndexType();
  Type indices[] = {index, index, index, index};
  Type scoreArgs[] = {b.getF32Type(), index, index, index, index};
  if (scoreMod.empty() && maskMod.empty() && !captures.empty())
    return op->emitOpError("expected captures only with a score_mod or "
                           "mask_mod region that reads them");
  return failure(failed(verifyModRegion(op, scoreMod, "score_mod", scoreArgs,
                                        captures, b.getF32Type())) ||
                 failed(verifyModRegion(op, maskMod, "mask_mod", indices,
                                        captures, b.getI1Type())));
}

/// A score_mod the backward's chain rule goes through: every op on the
/// score's path has a derivative rule (ScoreModDerivative.h).
static LogicalResult verifyDifferentiable(Region &scoreMod) {
  Operation *op = findUndifferentiable(scoreMod);
  if (!op)
    return success();
  return op->emitOpError()
         << "in score_mod has no derivative rule, so the backward cannot "
            "take the chain rule through it (rules: "
         << differentiableOpNames() << ")";
}

LogicalResult AttentionOp::verify() {
  Operation *op = getOperation();
  ShapedType q = getQueryType(), k = getKeyType(), v = getValueType();
  bool isMemref = hasBufferSemantics();
  if (isa<MemRefType>(k) != isMemref || isa<MemRefType>(v) != isMemref)
    return emitOpError(
        "expected query, key and value to be all tensors or all memrefs");

  if (failed(checkRank(op, "query", q, 4, "[B, Hq, Nq, D]")) ||
      failed(checkRank(op, "key", k, 4, "[B, Hkv, Nk, D]")) ||
      failed(checkRank(op, "value", v, 4, "[B, Hkv, Nk, Dv]")))
    return failure();
  Type elt = q.getElementType();
  // K and V share a type: Q's, or e4m3 beside a 16-bit or f32 Q (an FP8
  // KV cache).
  Type kvElt = hasFP8KeyValues() ? k.getElementType() : elt;
  if (failed(checkElementType(op, "key", elt, "the query's",
                              kvElt == elt ? k.getElementType() : elt)) ||
      failed(checkElementType(op, "value", kvElt,
                              kvElt == elt ? "the query's" : "the key's",
                              v.getElementType())))
    return failure();
  if (hasFP8KeyValues() && !isa<Float16Type, BFloat16Type, Float32Type>(elt))
    return emitOpError() << "expected the query of an e4m3 K/V to be f16, "
                            "bf16 or f32, got "
                         << elt;
  if (q.isDynamicDim(3))
    return emitOpError("expected query head dim D to be static");
  if (v.isDynamicDim(3))
    return emitOpError("expected value head dim Dv to be static");
  if (failed(checkRange(op, checkHeadDim("query head dim D", q.getDimSize(3)))) ||
      failed(checkRange(op, checkHeadDim("value head dim Dv",
                                         v.getDimSize(3)))))
    return failure();

  // With pages, dim 0 of K and V counts pages, not sequences.
  int64_t kvBatch = isPaged() ? k.getDimSize(0) : q.getDimSize(0);
  if (failed(checkSameDim(op, "key batch size", kvBatch,
                          isPaged() ? "the key's" : "the query's",
                          k.getDimSize(0))) ||
      failed(checkSameDim(op, isPaged() ? "value page count"
                                        : "value batch size",
                          kvBatch, isPaged() ? "the key's" : "the query's",
                          v.getDimSize(0))) ||
      failed(checkSameDim(op, "value head count", k.getDimSize(1), "the key's",
                          v.getDimSize(1))) ||
      failed(checkSameDim(op, "value sequence length", k.getDimSize(2),
                          "the key's", v.getDimSize(2))) ||
      failed(checkSameDim(op, "key head dim", q.getDimSize(3), "the query's",
                          k.getDimSize(3))))
    return failure();
  if (failed(verifyKVCache(*this)))
    return failure();
  for (Value capture : getCaptures())
    if (isa<MemRefType>(capture.getType()) != isMemref)
      return emitOpError() << "expected captures to be "
                           << (isMemref ? "memrefs" : "tensors")
                           << " like the inputs, got " << capture.getType();
  if (failed(verifyModifications(op, getScoreMod(), getMaskMod(),
                                 getCaptures().getTypes())))
    return failure();
  if (Value sinks = getSinks()) {
    // One logit per query head, of the inputs' kind.
    auto type = cast<ShapedType>(sinks.getType());
    if (isa<MemRefType>(type) != isMemref)
      return emitOpError() << "expected sinks to be a "
                           << (isMemref ? "memref" : "tensor")
                           << " like the inputs, got " << type;
    if (failed(checkSameDim(op, "sinks size", q.getDimSize(1),
                            "the query heads'", type.getDimSize(0))))
      return failure();
  }
  if (std::optional<std::string> why =
          checkMaskPlacement(getCausal(), getWindow().has_value(),
                             getBottomRight(), getDiagonalOffset().has_value()))
    return emitOpError(*why);
  if (std::optional<int64_t> splits = getKvSplits())
    if (failed(checkRange(op, checkKVSplits(*splits))))
      return failure();
  int64_t hq = q.getDimSize(1), hkv = k.getDimSize(1);
  if (!ShapedType::isDynamic(hq) && !ShapedType::isDynamic(hkv) &&
      (hkv == 0 || hq % hkv != 0))
    return emitOpError() << "expected query heads (" << hq
                         << ") to be a multiple of key/value heads (" << hkv
                         << ")";

  // Outputs: O [B, Hq, Nq, Dv] in the input type, LSE [B, Hq, Nq] in f32.
  SmallVector<ShapedType> outputs;
  if (isMemref) {
    if (!getResults().empty())
      return emitOpError("expected no results with memref operands (the "
                         "outputs are written to outs(...))");
    for (Value out : getOuts())
      outputs.push_back(cast<ShapedType>(out.getType()));
  } else {
    if (!getOuts().empty())
      return emitOpError("expected no outs(...) with tensor operands (the "
                         "outputs are results)");
    for (Type t : getResultTypes())
      outputs.push_back(cast<ShapedType>(t));
  }
  if (outputs.empty() || outputs.size() > 2)
    return emitOpError() << "expected 1 or 2 outputs (O, then optionally "
                            "LSE), got "
                         << outputs.size();
  ShapedType o = outputs[0];
  if (failed(checkRank(op, "output", o, 4, "[B, Hq, Nq, Dv]")) ||
      failed(checkRange(
          op, checkElementTypes(typeName(elt), typeName(o.getElementType())))))
    return failure();
  size_t descales = isFP8() ? 3 : hasFP8KeyValues() ? 2 : 0;
  if (getDescales().size() != descales)
    return emitOpError() << "expected "
                         << (isFP8() ? "three descale factors (q_descale, "
                                       "k_descale, v_descale) with e4m3 inputs"
                             : hasFP8KeyValues()
                                 ? "two descale factors (k_descale, "
                                   "v_descale) with an e4m3 K/V"
                                 : "no descale factors without e4m3 "
                                   "inputs")
                         << ", got " << getDescales().size();
  if (hasFP8KeyValues()) {
    // Per tensor or per (batch, K/V head): a KV cache is not quantised per
    // block (its blocks fill as it grows).
    static constexpr StringLiteral kNames[] = {"k_descale", "v_descale"};
    for (int i = 0; i < 2; ++i) {
      Value descale = getDescales()[i];
      if (cast<ShapedType>(descale.getType()).getRank() == 3)
        return emitOpError()
               << "expected " << kNames[i]
               << " of rank 0 or 2 (per tensor, per batch and K/V head) for "
                  "an e4m3 K/V, got rank 3";
      if (failed(checkDescaleType(*this, kNames[i], descale, k, k,
                                  std::nullopt)))
        return failure();
    }
  }
  if (isFP8()) {
    static constexpr StringLiteral kNames[] = {"q_descale", "k_descale",
                                               "v_descale"};
    std::optional<int64_t> tiles[] = {getBlockR(), getBlockC(), std::nullopt};
    ShapedType inputs[] = {q, k, v};
    for (int i = 0; i < 3; ++i)
      if (failed(checkDescaleType(*this, kNames[i], getDescales()[i], inputs[i],
                                  k, tiles[i])))
        return failure();
  }
  if (failed(checkSameDim(op, "output batch size", q.getDimSize(0),
                          "the query's", o.getDimSize(0))) ||
      failed(checkSameDim(op, "output head count", hq, "the query's",
                          o.getDimSize(1))) ||
      failed(checkSameDim(op, "output sequence length", q.getDimSize(2),
                          "the query's", o.getDimSize(2))) ||
      failed(checkSameDim(op, "output head dim", v.getDimSize(3),
                          "the value's", o.getDimSize(3))))
    return failure();
  if (outputs.size() == 2) {
    ShapedType lse = outputs[1];
    if (failed(checkRank(op, "lse", lse, 3, "[B, Hq, Nq]")))
      return failure();
    if (!lse.getElementType().isF32())
      return emitOpError() << "expected lse element type to be f32, got "
                           << lse.getElementType();
    if (failed(checkSameDim(op, "lse batch size", q.getDimSize(0),
                            "the query's", lse.getDimSize(0))) ||
        failed(checkSameDim(op, "lse head count", hq, "the query's",
                            lse.getDimSize(1))) ||
        failed(checkSameDim(op, "lse sequence length", q.getDimSize(2),
                            "the query's", lse.getDimSize(2))))
      return failure();
  }

  AttentionParams params;
  if (std::optional<APFloat> scale = getScale())
    params.scale = scale->convertToDouble();
  if (std::optional<APFloat> cap = getSoftcap())
    params.softcap = cap->convertToDouble();
  params.window = getWindow();
  params.diagonalOffset = getDiagonalOffset();
  params.blockR = getBlockR();
  params.blockC = getBlockC();
  return checkRange(op, validateAttentionParams(params));
}

//===----------------------------------------------------------------------===//
// Tile ops
//===----------------------------------------------------------------------===//

static LogicalResult verifyPolyExp2(Operation *op,
                                    std::optional<int64_t> degree,
                                    std::optional<int64_t> period);

/// State buffers (m, l, alpha, O, S) are on-chip tiles: static shapes.
static LogicalResult checkStatic(Operation *op, StringRef name,
                                 ShapedType type) {
  if (type.hasStaticShape())
    return success();
  return op->emitOpError() << "expected " << name
                           << " to have a static shape, got " << type;
}

/// Checks a row vector of the state (m, l, alpha) against the tile's B_r.
static LogicalResult checkRowVector(Operation *op, StringRef name, Value v,
                                    int64_t rows, StringRef whose) {
  auto type = cast<ShapedType>(v.getType());
  if (failed(checkStatic(op, name, type)))
    return failure();
  return checkSameDim(op, Twine(name + " length").str(), rows, whose,
                      type.getDimSize(0));
}

/// Checks that a (possibly dynamic) input tile has at most `bound` rows.
static LogicalResult checkAtMostRows(Operation *op, StringRef name,
                                     ShapedType type, int64_t bound,
                                     StringRef whose) {
  int64_t rows = type.getDimSize(0);
  if (ShapedType::isDynamic(rows) || rows <= bound)
    return success();
  return op->emitOpError() << "expected " << name << " to have at most "
                           << bound << " rows (" << whose << "), got " << rows;
}

LogicalResult InitStateOp::verify() {
  auto acc = cast<ShapedType>(getAcc().getType());
  if (failed(checkStatic(*this, "acc", acc)))
    return failure();
  int64_t rows = acc.getDimSize(0);
  return failure(
      failed(checkRowVector(*this, "max", getMax(), rows, "acc rows")) ||
      failed(checkRowVector(*this, "sum", getSum(), rows, "acc rows")));
}

LogicalResult ScoreTileOp::verify() {
  auto q = cast<ShapedType>(getQuery().getType());
  auto k = cast<ShapedType>(getKey().getType());
  auto s = cast<ShapedType>(getScores().getType());
  if (failed(checkStatic(*this, "scores", s)))
    return failure();
  if (q.isDynamicDim(1))
    return emitOpError("expected query head dim to be static");
  // An e4m3 key tile beside a 16-bit or f32 query (an FP8 KV cache) or
  // the query's type.
  bool fp8Key = isa<Float8E4M3FNType>(k.getElementType()) &&
                !isa<Float8E4M3FNType>(q.getElementType());
  if ((!fp8Key && failed(checkElementType(*this, "key", q.getElementType(),
                                          "the query's",
                                          k.getElementType()))) ||
      failed(checkSameDim(*this, "key head dim", q.getDimSize(1),
                          "the query's", k.getDimSize(1))) ||
      failed(checkAtMostRows(*this, "query", q, s.getDimSize(0),
                             "the score tile's B_r")) ||
      failed(checkAtMostRows(*this, "key", k, s.getDimSize(1),
                             "the score tile's B_c")))
    return failure();
  if (std::optional<std::string> why =
          checkMaskPlacement(getCausal(), getWindow().has_value(),
                             getBottomRight(), getDiagonalOffset().has_value()))
    return emitOpError(*why);
  bool modified = !getScoreMod().empty() || !getMaskMod().empty();
  if (modified != (getCoordinates().size() == 4) ||
      (!modified && !getCoordinates().empty()))
    return emitOpError() << "expected coordinates(batch, head, first query "
                            "row, first key) with a score_mod or mask_mod, "
                            "and only then; got "
                         << getCoordinates().size() << " values";
  if (failed(verifyModifications(*this, getScoreMod(), getMaskMod(),
                                 getCaptures().getTypes())))
    return failure();
  if (Value unmodified = getUnmodified()) {
    if (getScoreMod().empty())
      return emitOpError("expected unmodified only with a score_mod (without "
                         "one it equals the scores)");
    if (unmodified.getType() != s)
      return emitOpError() << "expected unmodified to be " << s
                           << " like the scores, got " << unmodified.getType();
  }
  if (getDescale() && !isa<Float8E4M3FNType>(k.getElementType()))
    return emitOpError() << "expected descale only with e4m3 keys, got "
                         << k.getElementType();
  AttentionParams params;
  params.scale = getScale().convertToDouble();
  if (std::optional<APFloat> cap = getSoftcap())
    params.softcap = cap->convertToDouble();
  params.window = getWindow();
  params.diagonalOffset = getDiagonalOffset();
  return checkRange(*this, validateAttentionParams(params));
}

LogicalResult SoftmaxUpdateOp::verify() {
  auto s = cast<ShapedType>(getScores().getType());
  if (failed(checkStatic(*this, "scores", s)))
    return failure();
  int64_t rows = s.getDimSize(0);
  if (failed(checkRowVector(*this, "max", getMax(), rows, "score rows")) ||
      failed(checkRowVector(*this, "sum", getSum(), rows, "score rows")) ||
      failed(checkRowVector(*this, "correction", getCorrection(), rows,
                            "score rows")))
    return failure();
  return verifyPolyExp2(*this, getExp2PolyDegree(), getExp2PolyPeriod());
}

/// exp2_poly_degree and exp2_poly_period: both or neither, in the ranges of
/// checkPolyExp2.
static LogicalResult verifyPolyExp2(Operation *op,
                                    std::optional<int64_t> degree,
                                    std::optional<int64_t> period) {
  AttentionParams params;
  params.polyExp2Degree = degree;
  params.polyExp2Period = period;
  return checkRange(op, validateAttentionParams(params));
}

LogicalResult ConditionalSoftmaxUpdateOp::verify() {
  auto s = cast<ShapedType>(getScores().getType());
  if (failed(checkStatic(*this, "scores", s)))
    return failure();
  int64_t rows = s.getDimSize(0);
  if (failed(checkRowVector(*this, "base", getBase(), rows, "score rows")) ||
      failed(checkRowVector(*this, "sum", getSum(), rows, "score rows")) ||
      failed(checkRowVector(*this, "correction", getCorrection(), rows,
                            "score rows")))
    return failure();
  if (Value counters = getCounters()) {
    auto type = cast<ShapedType>(counters.getType());
    if (!type.hasStaticShape() || type.getDimSize(0) != 3)
      return emitOpError() << "expected counters to be memref<3xf64> (moved, "
                              "skipped, max P), got "
                           << type;
  }
  if (failed(checkRange(*this,
                        checkRescaleThreshold(
                            getThreshold().convertToDouble(), "threshold"))))
    return failure();
  return verifyPolyExp2(*this, getExp2PolyDegree(), getExp2PolyPeriod());
}

LogicalResult RescaleOp::verify() {
  auto acc = cast<ShapedType>(getAcc().getType());
  if (failed(checkStatic(*this, "acc", acc)))
    return failure();
  return checkRowVector(*this, "factor", getFactor(), acc.getDimSize(0),
                        "acc rows");
}

LogicalResult PVAccumulateOp::verify() {
  auto p = cast<ShapedType>(getProbs().getType());
  auto v = cast<ShapedType>(getValue().getType());
  auto acc = cast<ShapedType>(getAcc().getType());
  if (failed(checkStatic(*this, "probs", p)) ||
      failed(checkStatic(*this, "acc", acc)))
    return failure();
  if (v.isDynamicDim(1))
    return emitOpError("expected value head dim to be static");
  bool fp8 = isa<Float8E4M3FNType>(v.getElementType());
  if ((getDescale() || getProbsScale()) && !fp8)
    return emitOpError() << "expected descale and probs_scale only with e4m3 "
                            "values, got "
                         << v.getElementType();
  if (std::optional<APFloat> scale = getProbsScale())
    if (failed(checkRange(*this, checkProbsScale(scale->convertToDouble()))))
      return failure();
  return failure(
      failed(checkSameDim(*this, "acc rows", p.getDimSize(0), "the probs'",
                          acc.getDimSize(0))) ||
      failed(checkSameDim(*this, "acc columns", v.getDimSize(1),
                          "the value head dim", acc.getDimSize(1))) ||
      failed(checkAtMostRows(*this, "value", v, p.getDimSize(1),
                             "the probs' B_c")));
}

LogicalResult NormalizeOp::verify() {
  auto acc = cast<ShapedType>(getAcc().getType());
  if (failed(checkStatic(*this, "acc", acc)))
    return failure();
  return checkRowVector(*this, "sum", getSum(), acc.getDimSize(0), "acc rows");
}

LogicalResult LogSumExpOp::verify() {
  auto m = cast<ShapedType>(getMax().getType());
  if (failed(checkStatic(*this, "max", m)))
    return failure();
  int64_t rows = m.getDimSize(0);
  return failure(
      failed(checkRowVector(*this, "sum", getSum(), rows, "max length")) ||
      failed(checkAtMostRows(*this, "lse", cast<ShapedType>(getLse().getType()),
                             rows, "the max length")));
}

#define GET_OP_CLASSES
#include "fa/Dialect/FA/IR/FAOps.cpp.inc"

LogicalResult MergePartialsOp::verify() {
  auto parts = getPartialOut().getType(), lses = getPartialLse().getType();
  auto out = getOut().getType();
  auto same = [](int64_t a, int64_t b) {
    return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
  };
  if (!same(parts.getDimSize(0), lses.getDimSize(0)))
    return emitOpError("expected as many partial LSEs as partial outputs, "
                       "got ")
           << lses.getDimSize(0) << " and " << parts.getDimSize(0);
  if (!same(parts.getDimSize(1), out.getDimSize(0)) ||
      !same(lses.getDimSize(1), out.getDimSize(0)))
    return emitOpError("expected the partials' rows to be the output's");
  if (!same(parts.getDimSize(2), out.getDimSize(1)))
    return emitOpError("expected the partial outputs' columns to be the "
                       "output's (")
           << out.getDimSize(1) << "), got " << parts.getDimSize(2);
  if (Value lse = getLse())
    if (!same(cast<MemRefType>(lse.getType()).getDimSize(0), out.getDimSize(0)))
      return emitOpError("expected one LSE per output row");
  return success();
}

//===----------------------------------------------------------------------===//
// QuantizeOp, HadamardOp
//===----------------------------------------------------------------------===//

LogicalResult QuantizeOp::verify() {
  MemRefType in = getInput().getType(), out = getOutput().getType();
  auto descale = cast<MemRefType>(getDescale().getType());
  for (int64_t d = 0; d < 4; ++d)
    if (failed(checkSameDim(*this, "output dim " + std::to_string(d),
                            in.getDimSize(d), "the input's",
                            out.getDimSize(d))))
      return failure();
  std::optional<int64_t> block = getBlock();
  if (!block) {
    if (descale.getRank() != 0)
      return emitOpError() << "expected a rank-0 descale without block (one "
                              "per tensor), got "
                           << descale;
    return success();
  }
  if (failed(checkRange(*this, checkTileSize("block", *block))))
    return failure();
  if (descale.getRank() != 3)
    return emitOpError() << "expected descale [B, H, ceil(N / block)] with "
                            "block, got "
                         << descale;
  int64_t n = in.getDimSize(2);
  int64_t blocks = ShapedType::isDynamic(n) ? ShapedType::kDynamic
                                            : (n + *block - 1) / *block;
  return failure(
      failed(checkSameDim(*this, "descale batch size", in.getDimSize(0),
                          "the input's", descale.getDimSize(0))) ||
      failed(checkSameDim(*this, "descale head count", in.getDimSize(1),
                          "the input's", descale.getDimSize(1))) ||
      failed(checkSameDim(*this, "descale block count", blocks,
                          "ceil(N / block)", descale.getDimSize(2))));
}

LogicalResult HadamardOp::verify() {
  MemRefType in = getInput().getType(), out = getOutput().getType();
  for (int64_t d = 0; d < 4; ++d)
    if (failed(checkSameDim(*this, "output dim " + std::to_string(d),
                            in.getDimSize(d), "the input's",
                            out.getDimSize(d))))
      return failure();
  int64_t dim = in.getDimSize(3);
  if (ShapedType::isDynamic(dim))
    return emitOpError("expected the head dim D to be static");
  if (failed(checkRange(*this, checkHadamardDim(dim))))
    return failure();
  if (static_cast<int64_t>(getSigns().size()) != dim)
    return emitOpError() << "expected " << dim
                         << " signs (one per column), got "
                         << getSigns().size();
  return success();
}

//===----------------------------------------------------------------------===//
// Backward (FABackwardOps.td)
//===----------------------------------------------------------------------===//

/// As fa.attention's: the regions are functions the op evaluates.
void AttentionBackwardOp::getSuccessorRegions(
    RegionBranchPoint point, SmallVectorImpl<RegionSuccessor> &regions) {
  if (point.isParent())
    regions.push_back(RegionSuccessor(
        getOperation(), getOperation()->getResults().take_front(0)));
}

float AttentionBackwardOp::getEffectiveScale() {
  if (std::optional<APFloat> scale = getScale())
    return scale->convertToFloat();
  return 1.0f / std::sqrt(static_cast<float>(getQueryType().getDimSize(3)));
}

void AttentionBackwardOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  for (MutableOperandRange inputs :
       {MutableOperandRange(getQueryMutable()),
        MutableOperandRange(getKeyMutable()),
        MutableOperandRange(getValueMutable()),
        MutableOperandRange(getOutMutable()),
        MutableOperandRange(getLseMutable()),
        MutableOperandRange(getGradOutMutable()), getSinksMutable(),
        getCuSeqlensQMutable(), getCuSeqlensKMutable(), getCapturesMutable()})
    addEffects(effects, MemoryEffects::Read::get(), inputs);
  for (MutableOperandRange grads :
       {MutableOperandRange(getGradQueryMutable()),
        MutableOperandRange(getGradKeyMutable()),
        MutableOperandRange(getGradValueMutable()), getGradSinksMutable()})
    addEffects(effects, MemoryEffects::Write::get(), grads);
}

LogicalResult AttentionBackwardOp::verify() {
  Operation *op = getOperation();
  MemRefType q = getQueryType(), k = getKeyType(), v = getValueType();
  auto o = cast<MemRefType>(getOut().getType());
  auto lse = cast<MemRefType>(getLse().getType());
  auto dO = cast<MemRefType>(getGradOut().getType());
  auto dq = cast<MemRefType>(getGradQuery().getType());
  auto dk = cast<MemRefType>(getGradKey().getType());
  auto dv = cast<MemRefType>(getGradValue().getType());
  if (failed(checkRank(op, "query", q, 4, "[B, Hq, Nq, D]")) ||
      failed(checkRank(op, "key", k, 4, "[B, Hkv, Nk, D]")) ||
      failed(checkRank(op, "value", v, 4, "[B, Hkv, Nk, Dv]")) ||
      failed(checkRank(op, "out", o, 4, "[B, Hq, Nq, Dv]")) ||
      failed(checkRank(op, "lse", lse, 3, "[B, Hq, Nq]")) ||
      failed(checkRank(op, "grad_out", dO, 4, "[B, Hq, Nq, Dv]")) ||
      failed(checkRank(op, "grad_query", dq, 4, "[B, Hq, Nq, D]")) ||
      failed(checkRank(op, "grad_key", dk, 4, "[B, Hkv, Nk, D]")) ||
      failed(checkRank(op, "grad_value", dv, 4, "[B, Hkv, Nk, Dv]")))
    return failure();
  Type elt = q.getElementType();
  for (auto [name, type] : {std::pair<StringRef, MemRefType>{"key", k},
                            {"value", v},
                            {"out", o},
                            {"grad_out", dO}})
    if (failed(checkElementType(op, name, elt, "the query's",
                                type.getElementType())))
      return failure();
  if (q.isDynamicDim(3) || v.isDynamicDim(3))
    return emitOpError("expected the head dims D and Dv to be static");
  if (failed(checkRange(op, checkHeadDim("query head dim D",
                                         q.getDimSize(3)))) ||
      failed(checkRange(op, checkHeadDim("value head dim Dv",
                                         v.getDimSize(3)))))
    return failure();
  // Every shape against the one its rule names: Q's for the query-side
  // tensors, K's for the key-side ones, the head dims D and Dv.
  struct Same {
    const char *what;
    MemRefType type;
    int64_t dim;
    MemRefType like;
    int64_t likeDim;
    const char *whose;
  };
  const Same rules[] = {
      {"key batch size", k, 0, q, 0, "the query's"},
      {"key head dim", k, 3, q, 3, "the query's"},
      {"value batch size", v, 0, q, 0, "the query's"},
      {"value head count", v, 1, k, 1, "the key's"},
      {"value sequence length", v, 2, k, 2, "the key's"},
      {"out batch size", o, 0, q, 0, "the query's"},
      {"out head count", o, 1, q, 1, "the query's"},
      {"out sequence length", o, 2, q, 2, "the query's"},
      {"out head dim", o, 3, v, 3, "the value's"},
      {"lse batch size", lse, 0, q, 0, "the query's"},
      {"lse head count", lse, 1, q, 1, "the query's"},
      {"lse sequence length", lse, 2, q, 2, "the query's"},
      {"grad_out batch size", dO, 0, q, 0, "the query's"},
      {"grad_out head count", dO, 1, q, 1, "the query's"},
      {"grad_out sequence length", dO, 2, q, 2, "the query's"},
      {"grad_out head dim", dO, 3, v, 3, "the value's"},
      {"grad_query batch size", dq, 0, q, 0, "the query's"},
      {"grad_query head count", dq, 1, q, 1, "the query's"},
      {"grad_query sequence length", dq, 2, q, 2, "the query's"},
      {"grad_query head dim", dq, 3, q, 3, "the query's"},
      {"grad_key batch size", dk, 0, k, 0, "the key's"},
      {"grad_key head count", dk, 1, k, 1, "the key's"},
      {"grad_key sequence length", dk, 2, k, 2, "the key's"},
      {"grad_key head dim", dk, 3, k, 3, "the key's"},
      {"grad_value batch size", dv, 0, v, 0, "the value's"},
      {"grad_value head count", dv, 1, v, 1, "the value's"},
      {"grad_value sequence length", dv, 2, v, 2, "the value's"},
      {"grad_value head dim", dv, 3, v, 3, "the value's"}};
  for (const Same &rule : rules)
    if (failed(checkSameDim(op, rule.what, rule.like.getDimSize(rule.likeDim),
                            rule.whose, rule.type.getDimSize(rule.dim))))
      return failure();
  int64_t hq = q.getDimSize(1), hkv = k.getDimSize(1);
  if (!ShapedType::isDynamic(hq) && !ShapedType::isDynamic(hkv) &&
      (hkv == 0 || hq % hkv != 0))
    return emitOpError() << "expected query heads (" << hq
                         << ") to be a multiple of key/value heads (" << hkv
                         << ")";
  if (static_cast<bool>(getCuSeqlensQ()) != static_cast<bool>(getCuSeqlensK()))
    return emitOpError("expected both cu_seqlens_q and cu_seqlens_k");
  if (getCuSeqlensQ()) {
    auto sums = cast<MemRefType>(getCuSeqlensQ().getType());
    if (failed(checkSameDim(
            op, "cu_seqlens_k size", sums.getDimSize(0), "cu_seqlens_q's",
            cast<MemRefType>(getCuSeqlensK().getType()).getDimSize(0))))
      return failure();
    if (sums.getDimSize(0) == 0 || sums.getDimSize(0) == 1)
      return emitOpError("expected cu_seqlens of at least two entries (B + 1 "
                         "prefix sums, B >= 1), got ")
             << sums.getDimSize(0);
    // Packed sequences: one batch row (the other tensors follow Q's and
    // K's by the rules above).
    for (auto [name, type] :
         {std::pair<StringRef, MemRefType>{"query", q}, {"key", k}})
      if (failed(checkSameDim(op, (name + " batch size").str(), 1,
                              "packed varlen sequences", type.getDimSize(0))))
        return failure();
  }
  if (static_cast<bool>(getSinks()) != static_cast<bool>(getGradSinks()))
    return emitOpError("expected sinks and their gradient together (the "
                       "forward's sinks(...) and a fourth output dsinks)");
  for (auto [name, sinks] : {std::pair<StringRef, Value>{"sinks", getSinks()},
                             {"grad_sinks", getGradSinks()}})
    if (sinks &&
        failed(checkSameDim(op, (name + " size").str(), hq, "the query heads'",
                            cast<MemRefType>(sinks.getType()).getDimSize(0))))
      return failure();
  if (std::optional<std::string> why =
          checkMaskPlacement(getCausal(), getWindow().has_value(),
                             getBottomRight(), getDiagonalOffset().has_value()))
    return emitOpError(*why);
  if (failed(verifyModifications(op, getScoreMod(), getMaskMod(),
                                 getCaptures().getTypes())) ||
      failed(verifyDifferentiable(getScoreMod())))
    return failure();
  AttentionParams params;
  if (std::optional<APFloat> scale = getScale())
    params.scale = scale->convertToDouble();
  if (std::optional<APFloat> cap = getSoftcap())
    params.softcap = cap->convertToDouble();
  params.window = getWindow();
  params.diagonalOffset = getDiagonalOffset();
  params.blockR = getBlockR();
  params.blockC = getBlockC();
  return checkRange(op, validateAttentionParams(params));
}

LogicalResult GradSinkOp::verify() {
  return checkSameDim(
      *this, "dot length", cast<ShapedType>(getLse().getType()).getDimSize(0),
      "the lse's", cast<ShapedType>(getDot().getType()).getDimSize(0));
}

LogicalResult RowDotOp::verify() {
  auto dO = cast<ShapedType>(getGradOut().getType());
  auto o = cast<ShapedType>(getOut().getType());
  auto dot = cast<ShapedType>(getDot().getType());
  return failure(
      failed(checkSameDim(*this, "out columns", dO.getDimSize(1),
                          "the grad_out's", o.getDimSize(1))) ||
      failed(checkSameDim(*this, "out rows", dO.getDimSize(0),
                          "the grad_out's", o.getDimSize(0))) ||
      failed(checkSameDim(*this, "dot length", dO.getDimSize(0),
                          "the grad_out's rows", dot.getDimSize(0))));
}

LogicalResult RecomputeProbsOp::verify() {
  auto s = cast<ShapedType>(getScores().getType());
  if (failed(checkStatic(*this, "scores", s)))
    return failure();
  return checkAtMostRows(*this, "lse", cast<ShapedType>(getLse().getType()),
                         s.getDimSize(0), "the scores' B_r");
}

LogicalResult GradValuesOp::verify() {
  auto p = cast<ShapedType>(getProbs().getType());
  auto dO = cast<ShapedType>(getGradOut().getType());
  auto acc = cast<ShapedType>(getAcc().getType());
  if (failed(checkStatic(*this, "probs", p)) ||
      failed(checkStatic(*this, "acc", acc)))
    return failure();
  return failure(
      failed(checkSameDim(*this, "acc rows", p.getDimSize(1), "the probs' B_c",
                          acc.getDimSize(0))) ||
      failed(checkSameDim(*this, "acc columns", dO.getDimSize(1),
                          "the grad_out's", acc.getDimSize(1))) ||
      failed(checkAtMostRows(*this, "grad_out", dO, p.getDimSize(0),
                             "the probs' B_r")));
}

LogicalResult GradProbsOp::verify() {
  auto dO = cast<ShapedType>(getGradOut().getType());
  auto v = cast<ShapedType>(getValue().getType());
  auto dp = cast<ShapedType>(getGradProbs().getType());
  if (failed(checkStatic(*this, "grad_probs", dp)))
    return failure();
  return failure(
      failed(checkSameDim(*this, "value columns", dO.getDimSize(1),
                          "the grad_out's", v.getDimSize(1))) ||
      failed(checkAtMostRows(*this, "grad_out", dO, dp.getDimSize(0),
                             "the grad_probs' B_r")) ||
      failed(checkAtMostRows(*this, "value", v, dp.getDimSize(1),
                             "the grad_probs' B_c")));
}

LogicalResult GradScoresOp::verify() {
  auto p = cast<ShapedType>(getProbs().getType());
  auto grad = cast<ShapedType>(getGrad().getType());
  if (failed(checkStatic(*this, "probs", p)) ||
      failed(checkStatic(*this, "grad", grad)))
    return failure();
  if (p != grad)
    return emitOpError() << "expected grad to have the probs' type " << p
                         << ", got " << grad;
  if (getSoftcap().has_value() != static_cast<bool>(getScores()))
    return emitOpError("expected the score tile exactly with softcap (its "
                       "derivative reads the capped scores)");
  if (Value s = getScores())
    if (s.getType() != p)
      return emitOpError() << "expected scores to have the probs' type " << p
                           << ", got " << s.getType();
  if (std::optional<APFloat> cap = getSoftcap())
    if (failed(checkRange(*this, checkSoftcap(cap->convertToDouble()))))
      return failure();
  return checkAtMostRows(*this, "dot", cast<ShapedType>(getDot().getType()),
                         p.getDimSize(0), "the probs' B_r");
}

LogicalResult ChainScoreModOp::verify() {
  auto x = cast<ShapedType>(getUnmodified().getType());
  if (failed(checkStatic(*this, "unmodified", x)))
    return failure();
  if (getGrad().getType() != x)
    return emitOpError() << "expected grad to have the unmodified scores' type "
                         << x << ", got " << getGrad().getType();
  if (getCoordinates().size() != 4)
    return emitOpError() << "expected coordinates(batch, head, first query "
                            "row, first key), got "
                         << getCoordinates().size() << " values";
  Region none;
  if (failed(verifyModifications(*this, getScoreMod(), none,
                                 getCaptures().getTypes())))
    return failure();
  return verifyDifferentiable(getScoreMod());
}

/// dK += scale dS^T Q and dQ += scale dS K: `rows` (Q or K) against dS's
/// B_r or B_c, the accumulator's columns against the rows' head dim.
static LogicalResult verifyGradProduct(Operation *op, ShapedType ds,
                                       ShapedType rows, StringRef rowsName,
                                       int64_t bound, StringRef boundName,
                                       ShapedType acc, float scale) {
  if (failed(checkStatic(op, "grad_scores", ds)))
    return failure();
  if (failed(checkRange(op, checkScale(scale))))
    return failure();
  return failure(
      failed(checkAtMostRows(op, rowsName, rows, bound, boundName)) ||
      failed(checkSameDim(op, "acc columns", rows.getDimSize(1),
                          ("the " + rowsName + "'s head dim").str(),
                          acc.getDimSize(1))));
}

LogicalResult GradKeysOp::verify() {
  auto ds = cast<ShapedType>(getGradScores().getType());
  auto acc = cast<ShapedType>(getAcc().getType());
  if (failed(checkStatic(*this, "acc", acc)) ||
      failed(checkSameDim(*this, "acc rows", ds.getDimSize(1),
                          "the grad_scores' B_c", acc.getDimSize(0))))
    return failure();
  return verifyGradProduct(*this, ds, cast<ShapedType>(getQuery().getType()),
                           "query", ds.getDimSize(0), "the grad_scores' B_r",
                           acc, getScale().convertToFloat());
}

LogicalResult GradQueriesOp::verify() {
  auto ds = cast<ShapedType>(getGradScores().getType());
  auto acc = cast<ShapedType>(getAcc().getType());
  if (failed(checkAtMostRows(*this, "acc", acc, ds.getDimSize(0),
                             "the grad_scores' B_r")))
    return failure();
  return verifyGradProduct(*this, ds, cast<ShapedType>(getKey().getType()),
                           "key", ds.getDimSize(1), "the grad_scores' B_c",
                           acc, getScale().convertToFloat());
}
