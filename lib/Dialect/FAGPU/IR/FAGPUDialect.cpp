//===- FAGPUDialect.cpp - The fagpu dialect -------------------------------===//

#include "fa/Dialect/FAGPU/IR/FAGPU.h"
#include "fa/Dialect/FAGPU/IR/ScheduleValidation.h"
#include "fa/Dialect/FA/IR/Validation.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::fagpu;

#include "fa/Dialect/FAGPU/IR/FAGPUDialect.cpp.inc"
#include "fa/Dialect/FAGPU/IR/FAGPUEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "fa/Dialect/FAGPU/IR/FAGPUAttrs.cpp.inc"

/// `fagpu.rescale`'s result: O's type for a fragment O (scaled copy), none
/// for O in tensor memory (scaled in place).
static ParseResult parseInPlace(OpAsmParser &, Type o, Type &result) {
  if (isa<FragmentType>(o))
    result = o;
  return success();
}
static void printInPlace(OpAsmPrinter &, Operation *, Type, Type) {}

/// fagpu.attention's descales: none, `descale(%q, %k, %v : ...)` (e4m3
/// inputs) or `descale(%k, %v : ...)` (an e4m3 K/V beside a 16-bit Q).
static ParseResult
parseDescales(OpAsmParser &parser,
              std::optional<OpAsmParser::UnresolvedOperand> &q,
              std::optional<OpAsmParser::UnresolvedOperand> &k,
              std::optional<OpAsmParser::UnresolvedOperand> &v, Type &qType,
              Type &kType, Type &vType) {
  if (failed(parser.parseOptionalKeyword("descale")))
    return success();
  SmallVector<OpAsmParser::UnresolvedOperand, 3> operands;
  SmallVector<Type, 3> types;
  llvm::SMLoc loc = parser.getCurrentLocation();
  if (parser.parseLParen() || parser.parseOperandList(operands) ||
      parser.parseColonTypeList(types) || parser.parseRParen())
    return failure();
  if ((operands.size() != 2 && operands.size() != 3) ||
      types.size() != operands.size())
    return parser.emitError(loc, "expected descale(%q, %k, %v : ...) or "
                                 "descale(%k, %v : ...) with a type each");
  size_t first = operands.size() - 2;
  if (first) {
    q = operands[0];
    qType = types[0];
  }
  k = operands[first];
  kType = types[first];
  v = operands[first + 1];
  vType = types[first + 1];
  return success();
}
static void printDescales(OpAsmPrinter &printer, Operation *, Value q,
                          Value k, Value v, Type qType, Type kType,
                          Type vType) {
  if (!k)
    return;
  printer << "descale(";
  if (q)
    printer << q << ", ";
  printer << k << ", " << v << " : ";
  if (q)
    printer << qType << ", ";
  printer << kType << ", " << vType << ")";
}

#define GET_OP_CLASSES
#include "fa/Dialect/FAGPU/IR/FAGPUOps.cpp.inc"

void FAGPUDialect::initialize() {
  registerTypes();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "fa/Dialect/FAGPU/IR/FAGPUAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "fa/Dialect/FAGPU/IR/FAGPUOps.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// ScheduleAttr
//===----------------------------------------------------------------------===//

ScheduleFields mlir::fagpu::fieldsOf(ScheduleAttr s) {
  ScheduleFields f;
  f.blockR = s.getBlockR();
  f.blockC = s.getBlockC();
  f.consumers = s.getConsumers();
  f.ctasPerSm = s.getCtasPerSm();
  f.producerRegisters = s.getProducerRegisters();
  f.consumerRegisters = s.getConsumerRegisters();
  f.stages = s.getStages();
  f.pingPong = s.getPingPong();
  f.overlapSoftmax = s.getOverlapSoftmax();
  f.scheduler = s.getScheduler();
  f.qBuffers = s.getQBuffers();
  f.epilogue = s.getEpilogue();
  f.qInRegisters = s.getQInRegisters();
  f.kvSplits = s.getKvSplits();
  f.tmemColumns = s.getTmemColumns();
  f.rowSumMma = s.getRowSumMma();
  f.queryGroup = s.getQueryGroup();
  f.maxRows = s.getMaxRows();
  return f;
}

ScheduleAttr mlir::fagpu::scheduleOf(MLIRContext *context,
                                     const ScheduleFields &f) {
  return ScheduleAttr::get(
      context, f.blockR, f.blockC, f.consumers, f.ctasPerSm,
      f.producerRegisters, f.consumerRegisters, f.stages, f.pingPong,
      f.overlapSoftmax, f.scheduler, f.qBuffers, f.epilogue, f.qInRegisters,
      f.kvSplits, f.tmemColumns, f.rowSumMma, f.queryGroup, f.maxRows);
}

ScheduleAttr
ScheduleAttr::with(llvm::function_ref<void(ScheduleFields &)> apply) const {
  ScheduleFields fields = fieldsOf(*this);
  apply(fields);
  return scheduleOf(getContext(), fields);
}

namespace {
/// The schedule's fields in their printed order, as (keyword, accessor into
/// ScheduleFields) pairs: one list drives the parser and the printer.
enum class FieldKind { Int, Bool, Scheduler, Epilogue };
struct FieldInfo {
  StringLiteral keyword;
  FieldKind kind;
  void *(*slot)(ScheduleFields &);
  /// Printed only when non-zero, and optional in the parsed form (fields
  /// of a variant that most kernels are not).
  bool omittedWhenZero = false;
};
#define FAGPU_FIELD(name, kind, member)                                        \
  FieldInfo{name, FieldKind::kind,                                             \
            [](ScheduleFields &f) -> void * { return &f.member; }}
#define FAGPU_OPTIONAL_FIELD(name, kind, member)                               \
  FieldInfo{name, FieldKind::kind,                                             \
            [](ScheduleFields &f) -> void * { return &f.member; }, true}
const FieldInfo kFields[] = {
    FAGPU_FIELD("block_r", Int, blockR),
    FAGPU_FIELD("block_c", Int, blockC),
    FAGPU_FIELD("consumers", Int, consumers),
    FAGPU_FIELD("ctas_per_sm", Int, ctasPerSm),
    FAGPU_FIELD("producer_registers", Int, producerRegisters),
    FAGPU_FIELD("consumer_registers", Int, consumerRegisters),
    FAGPU_FIELD("stages", Int, stages),
    FAGPU_FIELD("ping_pong", Bool, pingPong),
    FAGPU_FIELD("overlap_softmax", Bool, overlapSoftmax),
    FAGPU_FIELD("scheduler", Scheduler, scheduler),
    FAGPU_FIELD("q_buffers", Int, qBuffers),
    FAGPU_FIELD("epilogue", Epilogue, epilogue),
    FAGPU_FIELD("q_in_registers", Bool, qInRegisters),
    FAGPU_OPTIONAL_FIELD("kv_splits", Int, kvSplits),
    FAGPU_OPTIONAL_FIELD("tmem_columns", Int, tmemColumns),
    FAGPU_OPTIONAL_FIELD("row_sum_mma", Bool, rowSumMma),
    FAGPU_OPTIONAL_FIELD("query_group", Int, queryGroup),
    FAGPU_OPTIONAL_FIELD("max_rows", Int, maxRows),
};
#undef FAGPU_FIELD
#undef FAGPU_OPTIONAL_FIELD
} // namespace

Attribute ScheduleAttr::parse(AsmParser &parser, Type) {
  ScheduleFields fields;
  if (parser.parseLess())
    return {};
  // The fields in order, then the optional ones (printed only when set) in
  // any order.
  SmallVector<const FieldInfo *> order;
  for (const FieldInfo &field : kFields)
    if (!field.omittedWhenZero)
      order.push_back(&field);
  size_t required = order.size();
  for (size_t i = 0;; ++i) {
    if (i >= required) {
      if (failed(parser.parseOptionalComma()))
        break;
      SMLoc at = parser.getCurrentLocation();
      StringRef word;
      if (parser.parseKeyword(&word))
        return {};
      const FieldInfo *optional = nullptr;
      for (const FieldInfo &field : kFields)
        if (field.omittedWhenZero && word == field.keyword)
          optional = &field;
      if (!optional) {
        parser.emitError(at) << "unknown schedule field '" << word << "'";
        return {};
      }
      order.push_back(optional);
    } else if (i > 0 && parser.parseComma()) {
      return {};
    }
    const FieldInfo &field = *order[i];
    if ((i < required && parser.parseKeyword(field.keyword)) ||
        parser.parseEqual())
      return {};
    void *slot = field.slot(fields);
    SMLoc loc = parser.getCurrentLocation();
    switch (field.kind) {
    case FieldKind::Int:
      if (parser.parseInteger(*static_cast<int64_t *>(slot)))
        return {};
      break;
    case FieldKind::Bool: {
      StringRef word;
      if (parser.parseKeyword(&word))
        return {};
      if (word != "true" && word != "false") {
        parser.emitError(loc) << "expected true or false for '"
                              << field.keyword << "'";
        return {};
      }
      *static_cast<bool *>(slot) = word == "true";
      break;
    }
    case FieldKind::Scheduler:
    case FieldKind::Epilogue: {
      StringRef word;
      if (parser.parseKeyword(&word))
        return {};
      if (field.kind == FieldKind::Scheduler) {
        std::optional<TileScheduler> s = symbolizeTileScheduler(word);
        if (!s) {
          parser.emitError(loc)
              << "expected single, static or dynamic for 'scheduler'";
          return {};
        }
        *static_cast<TileScheduler *>(slot) = *s;
      } else {
        std::optional<Epilogue> e = symbolizeEpilogue(word);
        if (!e) {
          parser.emitError(loc) << "expected registers, tma_store, "
                                   "tma_store_in_q, staged_copy or "
                                   "staged_copy_in_q for 'epilogue', got '"
                                << word << "'";
          return {};
        }
        *static_cast<Epilogue *>(slot) = *e;
      }
      break;
    }
    }
  }
  if (parser.parseGreater())
    return {};
  return scheduleOf(parser.getContext(), fields);
}

void ScheduleAttr::print(AsmPrinter &printer) const {
  ScheduleFields fields = fieldsOf(*this);
  printer << "<";
  SmallVector<FieldInfo> printed;
  auto isSet = [&](const FieldInfo &field) {
    void *slot = field.slot(fields);
    return field.kind == FieldKind::Bool ? *static_cast<bool *>(slot)
                                         : *static_cast<int64_t *>(slot) != 0;
  };
  for (const FieldInfo &field : kFields)
    if (!field.omittedWhenZero || isSet(field))
      printed.push_back(field);
  llvm::interleaveComma(printed, printer, [&](const FieldInfo &field) {
    printer << field.keyword << " = ";
    void *slot = field.slot(fields);
    switch (field.kind) {
    case FieldKind::Int:
      printer << *static_cast<int64_t *>(slot);
      break;
    case FieldKind::Bool:
      printer << (*static_cast<bool *>(slot) ? "true" : "false");
      break;
    case FieldKind::Scheduler:
      printer << stringifyTileScheduler(*static_cast<TileScheduler *>(slot));
      break;
    case FieldKind::Epilogue:
      printer << stringifyEpilogue(*static_cast<Epilogue *>(slot));
      break;
    }
  });
  printer << ">";
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

LogicalResult AttentionOp::verify() {
  MemRefType q = getQuery().getType(), k = getKey().getType(),
             v = getValue().getType(), o = getOut().getType();
  if (getSinks() && (getTarget() != Target::sm_90a || isFP8()))
    return emitOpError("attention sinks have a kernel on sm_90a with a "
                       "16-bit Q only");
  if (!getCaptures().empty() && !hasModifications())
    return emitOpError("expected captures only with a score_mod or mask_mod "
                       "region that reads them");
  if (hasModifications()) {
    if (failed(verifyModificationRegions(*this, getScoreMod(), getMaskMod(),
                                         getCaptures().getTypes())))
      return failure();
    // The regions run in every target's 16-bit kernel's softmax, before
    // its step (fagpu.modify_scores).
    if (isFP8() || hasFP8KeyValues())
      return emitOpError("score_mod and mask_mod have a kernel with 16-bit "
                         "Q, K and V only");
  }
  if (hasFP8KeyValues()) {
    // An e4m3 KV cache: K and V e4m3, Q and O one 16-bit type.
    if (v.getElementType() != k.getElementType() ||
        q.getElementType() != o.getElementType())
      return emitOpError("an e4m3 K/V takes e4m3 K and V beside Q and out "
                         "of one 16-bit type");
    if (!getKDescale() || !getVDescale() || getQDescale())
      return emitOpError("an e4m3 K/V needs K's and V's descales, and Q has "
                         "none: descale(%k_descale, %v_descale)");
    if (getTarget() != Target::sm_90a)
      return emitOpError("an e4m3 K/V has a kernel on sm_90a only");
    for (Value descale : {getKDescale(), getVDescale()}) {
      auto type = cast<MemRefType>(descale.getType());
      if (type.getRank() == 3)
        return emitOpError("an e4m3 K/V's descales are per tensor or [B, "
                           "Hkv], not per block (a cache's blocks fill as "
                           "it grows)");
      if (type.getRank() == 2 &&
          (!type.getLayout().isIdentity() ||
           failed(verifyCompatibleShape(
               type.getShape(), {q.getDimSize(0), k.getDimSize(1)}))))
        return emitOpError("[B, Hkv] descales must be contiguous of shape [")
               << q.getDimSize(0) << ", " << k.getDimSize(1) << "], got "
               << type;
    }
    if (getProbsScale())
      return emitOpError("probs_scale scales e4m3 probabilities: an e4m3 "
                         "K/V keeps P at Q's precision");
  } else if (q.getElementType() != k.getElementType() ||
             q.getElementType() != v.getElementType() ||
             (!isFP8() && q.getElementType() != o.getElementType())) {
    return emitOpError("expected q, k, v and out of one element type (out "
                       "f16 or bf16 with e4m3 inputs)");
  }
  bool descales = getQDescale() != nullptr;
  if (!hasFP8KeyValues() && isFP8() != descales)
    return emitOpError(isFP8() ? "e4m3 inputs need their descales: "
                                 "descale(%q_descale, %k_descale, %v_descale)"
                               : "descales belong to e4m3 inputs");
  if (!hasFP8KeyValues() && !descales && getKDescale())
    return emitOpError("descales belong to e4m3 inputs");
  if (isFP8() && getTarget() != Target::sm_90a)
    return emitOpError("e4m3 inputs have a kernel on sm_90a only");
  if (descales) {
    // One layout for the three: per tensor, [B, Hkv] contiguous, or per
    // block (Q's and K's per tile, V's per tensor).
    auto qd = cast<MemRefType>(getQDescale().getType());
    auto kd = cast<MemRefType>(getKDescale().getType());
    auto vd = cast<MemRefType>(getVDescale().getType());
    bool perBlock = qd.getRank() == 3;
    if (kd.getRank() != qd.getRank() ||
        vd.getRank() != (perBlock ? 0 : qd.getRank()))
      return emitOpError("the three descales must be of one layout: one "
                         "per tensor (rank 0), [B, Hkv] (rank 2), or per "
                         "block (Q's and K's of rank 3, V's of rank 0)");
    if (perBlock) {
      ScheduleAttr s = getSchedule();
      auto blocks = [](int64_t n, int64_t tile) {
        return ShapedType::isDynamic(n) || tile <= 0
                   ? ShapedType::kDynamic
                   : (n + tile - 1) / tile;
      };
      auto check = [&](MemRefType type, StringRef name,
                       ArrayRef<int64_t> expected) -> LogicalResult {
        if (type.getLayout().isIdentity() &&
            succeeded(verifyCompatibleShape(type.getShape(), expected)))
          return success();
        auto diag = emitOpError("per-block ")
                    << name << " descales must be contiguous of shape [";
        llvm::interleaveComma(expected, diag, [&](int64_t d) {
          if (ShapedType::isDynamic(d))
            diag << "?";
          else
            diag << d;
        });
        return diag << "] (the schedule's " << s.getBlockR() << " x "
                    << s.getBlockC() << " tiles), got " << type;
      };
      if (failed(check(qd, "Q",
                       {q.getDimSize(0), q.getDimSize(1),
                        blocks(q.getDimSize(2), s.getBlockR())})) ||
          failed(check(kd, "K",
                       {q.getDimSize(0), k.getDimSize(1),
                        blocks(k.getDimSize(2), s.getBlockC())})))
        return failure();
    }
    if (qd.getRank() == 2)
      for (Value descale : {getQDescale(), getKDescale(), getVDescale()}) {
        auto type = cast<MemRefType>(descale.getType());
        if (!type.getLayout().isIdentity() ||
            failed(verifyCompatibleShape(
                type.getShape(), {q.getDimSize(0), k.getDimSize(1)})))
          return emitOpError("[B, Hkv] descales must be contiguous of shape "
                             "[")
                 << q.getDimSize(0) << ", " << k.getDimSize(1) << "], got "
                 << type;
      }
  }
  if (auto probsScale = getProbsScale()) {
    if (!isFP8())
      return emitOpError("probs_scale scales e4m3 probabilities: it belongs "
                         "to e4m3 inputs");
    // P reaches 2^threshold under conditional rescaling.
    double threshold = std::max(getRescaleThresholdOrOff(), 0.0);
    if (std::optional<std::string> why =
            fa::checkProbsScale(probsScale->convertToDouble(), threshold))
      return emitOpError(*why);
  }
  if (ShapedType::isDynamic(getHeadDim()) ||
      ShapedType::isDynamic(getValueHeadDim()))
    return emitOpError("expected static head dims");
  if (k.getDimSize(3) != getHeadDim())
    return emitOpError("expected k's head dim to be q's (")
           << getHeadDim() << "), got " << k.getDimSize(3);
  if (o.getDimSize(3) != getValueHeadDim())
    return emitOpError("expected out's head dim to be v's (")
           << getValueHeadDim() << "), got " << o.getDimSize(3);
  ScheduleAttr s = getSchedule();
  // Each field's range and target, once (ScheduleValidation.h).
  if (std::optional<std::string> why = checkSchedule(getTarget(), fieldsOf(s)))
    return emitOpError("schedule: ") << *why;
  if (s.getQBuffers() == 2 && !s.isPersistent())
    return emitOpError("a second Q buffer (cross-tile pipeline) needs a "
                       "persistent tile scheduler");
  if (s.getPingPong() && s.getConsumers() < 2)
    return emitOpError("ping-pong needs at least two consumer warpgroups, "
                       "got ")
           << s.getConsumers();
  if (s.isSplitKV() && (s.isPersistent() ||
                        s.getEpilogue() != Epilogue::Registers))
    return emitOpError("a split-KV kernel runs one tile per CTA and stores "
                       "its partial O from registers: no persistent "
                       "scheduler, no TMA-store epilogue");
  if (getBottomRight() && !getCausal() && !getWindow())
    return emitOpError("bottom_right aligns the causal or window mask: give "
                       "causal or a window");
  if (getDiagonalOffset() && !getCausal() && !getWindow())
    return emitOpError("diagonal_offset moves the causal or window mask: "
                       "give causal or a window");
  if (std::optional<int64_t> offset = getDiagonalOffset())
    if (std::optional<std::string> why =
            fa::checkDiagonalOffset(*offset, /*positionBits=*/32))
      return emitOpError(*why);
  if (std::optional<int64_t> window = getWindow())
    if (std::optional<std::string> why =
            fa::checkWindow(*window, /*positionBits=*/32))
      return emitOpError(*why);
  int64_t hq = q.getDimSize(1), hkv = k.getDimSize(1);
  if (!ShapedType::isDynamic(hq) && !ShapedType::isDynamic(hkv) &&
      (hkv < 1 || hq % hkv != 0))
    return emitOpError() << "expected query heads (" << hq
                         << ") to be a multiple of key/value heads (" << hkv
                         << ")";
  // KV caches and varlen batches have a kernel on sm_90a alone; another
  // target's would read the tensors as a plain batch.
  if ((getKvLengths() || getBlockTable() || getCuSeqlensQ()) &&
      getTarget() != Target::sm_90a)
    return emitOpError("per-sequence key lengths, pages and varlen batches "
                       "have a kernel on sm_90a only, not ")
           << targetName(getTarget());
  // A KV cache: one length and one table row per sequence; pages of a
  // static size (the kernel's TMA boxes lie within a page).
  auto sameBatch = [&](StringRef name, MemRefType type) -> LogicalResult {
    int64_t b = q.getDimSize(0), n = type.getDimSize(0);
    if (ShapedType::isDynamic(b) || ShapedType::isDynamic(n) || b == n)
      return success();
    return emitOpError("expected ")
           << name << " to have q's batch size (" << b << ") rows, got " << n;
  };
  if (Value lengths = getKvLengths())
    if (failed(sameBatch("kv_lengths", cast<MemRefType>(lengths.getType()))))
      return failure();
  if (static_cast<bool>(getCuSeqlensQ()) != static_cast<bool>(getCuSeqlensK()))
    return emitOpError("expected both cu_seqlens_q and cu_seqlens_k");
  if (getCuSeqlensQ() && (getKvLengths() || getBlockTable()))
    return emitOpError("a varlen batch takes no kv_lengths or pages");
  // Packed rows are G a query: a varlen batch's prefix sums count queries,
  // an e4m3 kernel's per-block Q descales rows.
  if (s.getQueryGroup() && (getCuSeqlensQ() || isFP8()))
    return emitOpError("query_group packs the query heads of a K/V head "
                       "into a tile's rows; varlen batches and e4m3 inputs "
                       "have no packed form");
  if (Value table = getBlockTable()) {
    if (failed(sameBatch("the block table", cast<MemRefType>(table.getType()))))
      return failure();
    if (k.isDynamicDim(2) || k.getDimSize(2) < 1)
      return emitOpError("expected a static page size (dim 2 of the paged "
                         "K/V cache), got ")
             << k;
  }
  if (std::optional<int64_t> degree = getExp2PolyDegree();
      degree && (*degree < 2 || *degree > 5))
    return emitOpError("expected exp2_poly_degree in [2, 5], got ") << *degree;
  if (std::optional<int64_t> period = getExp2PolyPeriod();
      period && *period < 1)
    return emitOpError("expected exp2_poly_period >= 1, got ") << *period;
  return success();
}
