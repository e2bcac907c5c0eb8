//===- IOReport.cpp - predicted vs. loop-counted HBM traffic --------------===//
//
// The FlashAttention papers bound HBM traffic as Theta(N d + N^2) for standard
// attention, Theta(N^2 d^2 / M) for FA1 and Theta(N^2 d / B_r) for FA2. This
// pass states those models with their constants for one concrete attention,
// then lowers a copy of it with each loop order and counts what the loops
// really move: every read or write of a buffer outside the tiles (function
// arguments and buffers allocated outside the loops), in elements, times the
// trip counts of the enclosing loops.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/Transforms/Passes.h"

#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/ToolOutputFile.h"

namespace mlir::fa {
#define GEN_PASS_DEF_FAIOREPORT
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

/// Elements moved to and from memory outside the tiles.
struct Traffic {
  bool known = true;
  int64_t reads = 0, writes = 0;
  int64_t total() const { return reads + writes; }
};

/// A constant upper bound of an index value: a constant, or an affine.min
/// with a constant among its results (the tile length min(B, N - start)).
std::optional<int64_t> upperBound(OpFoldResult ofr) {
  if (std::optional<int64_t> c = getConstantIntValue(ofr))
    return c;
  auto minOp = dyn_cast_or_null<affine::AffineMinOp>(
      cast<Value>(ofr).getDefiningOp());
  if (!minOp)
    return std::nullopt;
  std::optional<int64_t> bound;
  for (AffineExpr e : minOp.getAffineMap().getResults())
    if (auto c = dyn_cast<AffineConstantExpr>(e))
      bound = bound ? std::min(*bound, c.getValue()) : c.getValue();
  return bound;
}

/// Follows views back to the buffer they look into.
Value rootBuffer(Value v) {
  while (auto view = v.getDefiningOp<memref::SubViewOp>())
    v = view.getSource();
  return v;
}

/// Function arguments and buffers allocated outside every loop stand for
/// HBM; buffers allocated inside the loops are the on-chip tiles.
bool isOffChip(Value v, func::FuncOp func) {
  Value root = rootBuffer(v);
  if (auto arg = dyn_cast<BlockArgument>(root))
    return arg.getOwner()->getParentOp() == func;
  Operation *def = root.getDefiningOp();
  return def && isa<memref::AllocOp>(def) && def->getParentOp() == func;
}

std::optional<int64_t> numElements(Value v) {
  auto type = cast<MemRefType>(v.getType());
  if (type.hasStaticShape())
    return type.getNumElements();
  auto view = v.getDefiningOp<memref::SubViewOp>();
  if (!view)
    return std::nullopt;
  int64_t n = 1;
  for (OpFoldResult size : view.getMixedSizes()) {
    std::optional<int64_t> bound = upperBound(size);
    if (!bound)
      return std::nullopt;
    n *= *bound;
  }
  return n;
}

std::optional<int64_t> tripCount(Operation *op, func::FuncOp func) {
  int64_t trips = 1;
  for (Operation *p = op->getParentOp(); p && p != func; p = p->getParentOp()) {
    if (auto loop = dyn_cast<scf::ForOp>(p)) {
      std::optional<int64_t> lb = getConstantIntValue(loop.getLowerBound());
      std::optional<int64_t> ub = getConstantIntValue(loop.getUpperBound());
      std::optional<int64_t> step = getConstantIntValue(loop.getStep());
      if (!lb || !ub || !step)
        return std::nullopt;
      trips *= std::max<int64_t>(0, (*ub - *lb + *step - 1) / *step);
    } else if (auto forall = dyn_cast<scf::ForallOp>(p)) {
      for (auto [lbOfr, ubOfr, stepOfr] :
           llvm::zip(forall.getMixedLowerBound(), forall.getMixedUpperBound(),
                     forall.getMixedStep())) {
        std::optional<int64_t> lb = getConstantIntValue(lbOfr);
        std::optional<int64_t> ub = getConstantIntValue(ubOfr);
        std::optional<int64_t> step = getConstantIntValue(stepOfr);
        if (!lb || !ub || !step)
          return std::nullopt;
        trips *= std::max<int64_t>(0, (*ub - *lb + *step - 1) / *step);
      }
    }
  }
  return trips;
}

Traffic countTraffic(func::FuncOp func) {
  Traffic traffic;
  func.walk([&](MemoryEffectOpInterface iface) {
    SmallVector<MemoryEffects::EffectInstance> effects;
    iface.getEffects(effects);
    for (const MemoryEffects::EffectInstance &effect : effects) {
      bool isRead = isa<MemoryEffects::Read>(effect.getEffect());
      bool isWrite = isa<MemoryEffects::Write>(effect.getEffect());
      Value v = effect.getValue();
      if ((!isRead && !isWrite) || !v || !isa<MemRefType>(v.getType()) ||
          !isOffChip(v, func))
        continue;
      std::optional<int64_t> n = numElements(v);
      std::optional<int64_t> trips = tripCount(iface, func);
      if (!n || !trips) {
        traffic.known = false;
        continue;
      }
      (isRead ? traffic.reads : traffic.writes) += *n * *trips;
    }
  });
  return traffic;
}

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

struct FAIOReportPass : fa::impl::FAIOReportBase<FAIOReportPass> {
  using FAIOReportBase::FAIOReportBase;

  void runOnOperation() override {
    std::string error;
    std::unique_ptr<llvm::ToolOutputFile> file =
        openOutputFile(outputFile, &error);
    if (!file) {
      emitError(getOperation().getLoc())
          << "fa-io-report: cannot open '" << outputFile << "': " << error;
      return signalPassFailure();
    }
    WalkResult result = getOperation().walk([&](AttentionOp op) {
      return succeeded(report(op, file->os())) ? WalkResult::advance()
                                               : WalkResult::interrupt();
    });
    if (result.wasInterrupted())
      return signalPassFailure();
    file->keep();
  }

  /// Lowers a copy of `op`, on buffers of the same shapes, in a scratch
  /// module, and counts the traffic of the loops.
  FailureOr<Traffic> countLowered(AttentionOp op, LoopOrder order) {
    OpBuilder b(op.getContext());
    Location loc = op.getLoc();
    OwningOpRef<ModuleOp> scratch = ModuleOp::create(loc);
    b.setInsertionPointToEnd(scratch->getBody());
    auto asMemref = [](Type t) -> Type {
      auto shaped = cast<ShapedType>(t);
      return MemRefType::get(shaped.getShape(), shaped.getElementType());
    };
    SmallVector<Type> argTypes = {asMemref(op.getQuery().getType()),
                                  asMemref(op.getKey().getType()),
                                  asMemref(op.getValue().getType())};
    if (op.hasBufferSemantics())
      for (Value out : op.getOuts())
        argTypes.push_back(out.getType());
    else
      for (Type t : op.getResultTypes())
        argTypes.push_back(asMemref(t));
    size_t numOuts = argTypes.size() - 3;
    size_t numDescales = op.getDescales().size();
    for (Value descale : op.getDescales())
      argTypes.push_back(asMemref(descale.getType()));
    if (Value sinks = op.getSinks())
      argTypes.push_back(asMemref(sinks.getType()));
    size_t firstCapture = argTypes.size();
    for (Value capture : op.getCaptures())
      argTypes.push_back(asMemref(capture.getType()));
    auto func = func::FuncOp::create(b, loc, "io_report_scratch",
                                     b.getFunctionType(argTypes, {}));
    Block *body = func.addEntryBlock();
    b.setInsertionPointToEnd(body);
    ValueRange args = body->getArguments();
    auto copy = AttentionOp::create(
        b, loc, TypeRange{}, args[0], args[1], args[2], args.slice(3, numOuts),
        args.slice(3 + numOuts, numDescales), Value(), Value(), Value(),
        Value(), op.getSinks() ? args[firstCapture - 1] : Value(),
        args.drop_front(firstCapture), op->getAttrs());
    // The regions read only their own arguments (the verifier's rule).
    IRMapping none;
    op.getScoreMod().cloneInto(&copy.getScoreMod(), none);
    op.getMaskMod().cloneInto(&copy.getMaskMod(), none);
    func::ReturnOp::create(b, loc);
    IRRewriter rewriter(b);
    if (failed(lowerAttention(rewriter, copy, order)))
      return failure();
    return countTraffic(func);
  }

  LogicalResult report(AttentionOp op, raw_ostream &os) {
    if (op.getKvLengths() || op.isPaged() || op.isVarlen())
      return op.emitOpError(
          "has per-sequence lengths (kv_lengths, varlen) or pages: "
          "fa-io-report counts the "
          "loops of static shapes; the traffic then depends on the "
          "lengths' values (not modelled yet)");
    if (!op.getBlockR() || !op.getBlockC())
      return op.emitOpError(
          "has no tile sizes; fa-io-report needs block_r and block_c (run "
          "fa-tile first)");
    ShapedType q = op.getQueryType(), k = op.getKeyType();
    int64_t batch = q.getDimSize(0), hq = q.getDimSize(1), hkv = k.getDimSize(1);
    int64_t nq = q.getDimSize(2), nk = k.getDimSize(2);
    if (ShapedType::isDynamic(batch) || ShapedType::isDynamic(hq) ||
        ShapedType::isDynamic(nq) || ShapedType::isDynamic(nk))
      return op.emitOpError("fa-io-report needs static shapes");
    int64_t d = op.getHeadDim(), dv = op.getValueHeadDim();
    int64_t br = *op.getBlockR(), bc = *op.getBlockC();
    int64_t tr = ceilDiv(nq, br), tc = ceilDiv(nk, bc);
    int64_t bh = batch * hq;
    bool lse = op.hasLse();

    // The largest count below -- the standard algorithm's N^2 term over
    // every head -- in 128 bits first: a shape whose counts do not fit in
    // 64 bits is refused rather than reported wrapped.
    __int128 largest = (__int128)batch * hq *
                       ((__int128)nq * (d + dv + 4 * (__int128)nk) +
                        (__int128)nk * (d + dv) * (tr + tc + 1) +
                        (__int128)tc * nq * (d + 2 * dv + 8));
    if (largest >= ((__int128)1 << 62))
      return op.emitOpError("fa-io-report: the shape's element counts do "
                            "not fit in 64 bits");
    // Per (batch, query head), in elements.
    int64_t standard = nq * d + nk * (d + dv) + 4 * nq * nk + nq * dv;
    int64_t fa1 = nk * (d + dv) + (nq * dv + 2 * nq) +
                  tc * (nq * d + 2 * nq * dv + 4 * nq) + (lse ? 3 * nq : 0);
    int64_t fa2 = nq * d + tr * nk * (d + dv) + nq * dv + (lse ? nq : 0);

    os << "fa-io-report: " << op.getLoc() << "\n";
    os << "  shape: B=" << batch << " Hq=" << hq << " Hkv=" << hkv
       << " Nq=" << nq << " Nk=" << nk << " D=" << d << " Dv=" << dv
       << " block_r=" << br << " block_c=" << bc << " T_r=" << tr
       << " T_c=" << tc << (lse ? " lse" : "") << "\n";
    os << "  units: elements (Q, K, V, O in the input type; m, l, LSE in "
          "f32)\n";
    os << "  standard predicted: " << bh * standard
       << "  = B*Hq*(Nq*D + Nk*(D+Dv) + 4*Nq*Nk + Nq*Dv)   "
          "[S written, read; P written, read: Theta(N d + N^2)]\n";
    os << "  fa1 predicted: " << bh * fa1
       << "  = B*Hq*(Nk*(D+Dv) + Nq*Dv + 2*Nq + T_c*(Nq*D + 2*Nq*Dv + 4*Nq)"
       << (lse ? " + 3*Nq" : "")
       << ")   [T_c = ceil(Nk/B_c) ~ 4*Nk*D/M: Theta(N^2 d^2 / M)]\n";
    os << "  fa2 predicted: " << bh * fa2
       << "  = B*Hq*(Nq*D + T_r*Nk*(D+Dv) + Nq*Dv" << (lse ? " + Nq" : "")
       << ")   [T_r = ceil(Nq/B_r): Theta(N^2 d / B_r)]\n";

    for (auto [name, order, predicted] :
         {std::tuple{"fa1", LoopOrder::FA1, bh * fa1},
          std::tuple{"fa2", LoopOrder::FA2, bh * fa2}}) {
      FailureOr<Traffic> counted = countLowered(op, order);
      if (failed(counted))
        return failure();
      if (!counted->known) {
        os << "  " << name
           << " counted: unavailable (a loop bound or tile length is not a "
              "constant)\n";
        continue;
      }
      os << "  " << name << " counted: " << counted->total()
         << "  (reads " << counted->reads << ", writes " << counted->writes
         << ")\n";
      bool ragged = nq % br != 0 || nk % bc != 0;
      os << "  " << name << " match: "
         << (counted->total() == predicted ? "yes" : "no")
         << (ragged ? " (ragged tails counted at full tile size)" : "")
         << "\n";
    }
    return success();
  }
};

} // namespace
