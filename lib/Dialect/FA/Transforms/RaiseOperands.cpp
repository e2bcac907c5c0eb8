//===- RaiseOperands.cpp - fa-raise-attention's operands, contractions ----===//
//
// fa-raise-attention's operands and contractions: from what Q K^T and P V
// read back to the Q, K and V the attention takes (through reshapes,
// transposes, scales and grouped heads), and the contractions themselves
// (linalg.matmul, linalg.batch_matmul or an einsum-like linalg.generic).
//
//===----------------------------------------------------------------------===//

#include "RaiseAttention.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/STLExtras.h"

namespace mlir::fa::raise {

//===----------------------------------------------------------------------===//
// Operands: reshapes, transposes, scales and grouped heads around them
//===----------------------------------------------------------------------===//

/// The elementwise generic defining `v` that copies its one input (its body
/// only yields the input's element), whatever its maps; null otherwise.
static linalg::GenericOp copyGeneric(Value v) {
  auto g = v.getDefiningOp<linalg::GenericOp>();
  if (!isElementwise(g) || g.getNumDpsInputs() != 1)
    return nullptr;
  Block &body = g.getRegion().front();
  if (body.getOperations().size() != 1 || yielded(g) != body.getArgument(0))
    return nullptr;
  return g;
}

/// The input of a transpose: linalg.transpose, or a copy generic reading
/// its input through a permutation map. `p`: result dim d is input dim
/// p[d].
static Value transposeInput(Value v, Perm &p) {
  if (auto t = v.getDefiningOp<linalg::TransposeOp>()) {
    p.assign(t.getPermutation().begin(), t.getPermutation().end());
    return t.getInput();
  }
  linalg::GenericOp g = copyGeneric(v);
  if (!g)
    return nullptr;
  AffineMap in = g.getMatchingIndexingMap(g.getDpsInputOperand(0));
  if (!in.isPermutation() || in.isIdentity())
    return nullptr;
  // Input dim k is read at loop (= result) dim in[k].
  p.assign(in.getNumResults(), 0);
  for (auto [k, e] : llvm::enumerate(in.getResults()))
    p[cast<AffineDimExpr>(e).getPosition()] = k;
  return g.getDpsInputOperand(0)->get();
}

/// The operand of an elementwise generic that multiplies or divides by a
/// positive constant without changing the type (the scale folded into Q or
/// K); sets `scale` to the factor.
static Value scaledInput(Value v, Domain domain, double &scale) {
  auto g = v.getDefiningOp<linalg::GenericOp>();
  if (!isElementwise(g))
    return nullptr;
  for (OpOperand *input : g.getDpsInputOperands()) {
    if (!g.getMatchingIndexingMap(input).isIdentity() ||
        input->get().getType() != v.getType())
      continue;
    SymbolicBody body(domain);
    Sym s = body.evalGeneric(g, input->getOperandNumber(),
                             scoresEnv(g.getNumLoops()));
    if (s.kind != Sym::Data || !s.band.empty() || s.scale == 1.0)
      continue;
    scale = s.scale;
    return input->get();
  }
  return nullptr;
}

/// [B, Hkv, G, N, X] repeating [B, Hkv, N, X] G times along dim 2 (torch's
/// repeat_interleave / expand): linalg.broadcast of dim 2, a copy generic
/// reading (d0, d1, d3, d4), or one reading (d0, d1, 0, d3, d4) of an
/// unsqueezed [B, Hkv, 1, N, X]. Returns the 4-D tensor.
static Value repeatSource5D(Value v) {
  if (rankOf(v) != 5 || cast<ShapedType>(v.getType()).isDynamicDim(2))
    return nullptr;
  if (auto b = v.getDefiningOp<linalg::BroadcastOp>())
    return b.getDimensions() == ArrayRef<int64_t>{2} ? b.getInput() : nullptr;
  linalg::GenericOp g = copyGeneric(v);
  if (!g)
    return nullptr;
  MLIRContext *ctx = g.getContext();
  auto d = [&](unsigned k) { return getAffineDimExpr(k, ctx); };
  AffineMap in = g.getMatchingIndexingMap(g.getDpsInputOperand(0));
  Value src = g.getDpsInputOperand(0)->get();
  if (in == AffineMap::get(5, 0, {d(0), d(1), d(3), d(4)}, ctx))
    return src;
  if (in ==
      AffineMap::get(
          5, 0, {d(0), d(1), getAffineConstantExpr(0, ctx), d(3), d(4)}, ctx)) {
    auto ex = src.getDefiningOp<tensor::ExpandShapeOp>();
    SmallVector<ReassociationIndices> unsqueeze = {{0}, {1, 2}, {3}, {4}};
    SmallVector<ReassociationIndices> unsqueeze2 = {{0}, {1}, {2, 3}, {4}};
    if (ex && (ex.getReassociationIndices() == unsqueeze ||
               ex.getReassociationIndices() == unsqueeze2))
      return ex.getSrc();
  }
  return nullptr;
}

/// K or V [B, Hq, N, X] materialised from [B, Hkv, N, X] by repeating each
/// head: the repeat collapsed to 4-D, or a copy generic reading
/// (b, h floordiv G, j, x). Returns the source and G.
static std::optional<std::pair<Value, int64_t>> undoHeadRepeat(Value v) {
  if (auto collapse = v.getDefiningOp<tensor::CollapseShapeOp>()) {
    SmallVector<ReassociationIndices> expected = {{0}, {1, 2}, {3}, {4}};
    if (collapse.getReassociationIndices() == expected)
      if (Value src = repeatSource5D(collapse.getSrc()))
        return std::make_pair(
            src, cast<ShapedType>(collapse.getSrcType()).getDimSize(2));
  }
  auto g = v.getDefiningOp<linalg::GenericOp>();
  if (!isElementwise(g) || g.getNumDpsInputs() != 1 || g.getNumLoops() != 4)
    return std::nullopt;
  Block &body = g.getRegion().front();
  if (body.getOperations().size() != 1 || yielded(g) != body.getArgument(0))
    return std::nullopt;
  AffineMap in = g.getMatchingIndexingMap(g.getDpsInputOperand(0));
  MLIRContext *ctx = g.getContext();
  if (in.getNumResults() != 4 || in.getResult(0) != getAffineDimExpr(0, ctx) ||
      in.getResult(2) != getAffineDimExpr(2, ctx) ||
      in.getResult(3) != getAffineDimExpr(3, ctx))
    return std::nullopt;
  auto bin = dyn_cast<AffineBinaryOpExpr>(in.getResult(1));
  auto cst = bin ? dyn_cast<AffineConstantExpr>(bin.getRHS()) : nullptr;
  if (!bin || bin.getKind() != AffineExprKind::FloorDiv ||
      bin.getLHS() != getAffineDimExpr(1, ctx) || !cst || cst.getValue() < 2)
    return std::nullopt;
  return std::make_pair(g.getDpsInputOperand(0)->get(), cst.getValue());
}

/// Walks from what a contraction reads (in the order `perm`) back to the
/// tensor the attention should take: through transposes, scales (Q and K
/// only: `scale` collects them), and under lifting the collapse from
/// [B, H, N, X] (possibly of a head repeat [B, Hkv, G, N, X]).
Operand peelOperand(Value v, Perm perm, bool allowScale, Lift lift,
                    Domain domain, double &scale) {
  Operand o;
  o.value = v;
  o.perm = std::move(perm);
  // A 3-D [B*H, a, b] read in `p3` as the 4-D tensor it was collapsed from.
  auto liftPerm = [](ArrayRef<int64_t> p3) {
    return Perm{0, 1, p3[1] + 1, p3[2] + 1};
  };
  for (int step = 0; step < 16; ++step) {
    Value cur = o.value;
    Perm p;
    if (Value in = transposeInput(cur, p)) {
      // Logical k is dim perm[k] of the result, dim p[perm[k]] of the input.
      for (int64_t &d : o.perm)
        d = p[d];
      o.value = in;
      continue;
    }
    double s = 1.0;
    if (allowScale)
      if (Value in = scaledInput(cur, domain, s)) {
        scale *= s;
        o.value = in;
        continue;
      }
    if (lift.on() && rankOf(cur) == 3 && o.perm[0] == 0)
      if (auto c = cur.getDefiningOp<tensor::CollapseShapeOp>()) {
        auto src = cast<ShapedType>(c.getSrcType());
        SmallVector<ReassociationIndices> to3 = {{0, 1}, {2}, {3}};
        SmallVector<ReassociationIndices> from5 = {{0, 1, 2}, {3}, {4}};
        if (c.getReassociationIndices() == to3 && src.getDimSize(0) == lift.b &&
            src.getDimSize(1) == lift.h) {
          o.value = c.getSrc();
          o.perm = liftPerm(o.perm);
          continue;
        }
        if (c.getReassociationIndices() == from5 &&
            src.getDimSize(0) == lift.b && !src.isDynamicDim(1) &&
            !src.isDynamicDim(2) &&
            src.getDimSize(1) * src.getDimSize(2) == lift.h)
          if (Value k4 = repeatSource5D(c.getSrc())) {
            o.repeated = cur;
            o.repeatedPerm = o.perm;
            o.value = k4;
            o.perm = liftPerm(o.perm);
            o.group = src.getDimSize(2);
            return o;
          }
      }
    break;
  }
  // A head repeat along dim 1, the head dim as read.
  if (o.group == 1 && rankOf(o.value) == 4 && o.perm[0] == 0 && o.perm[1] == 1)
    if (auto rep = undoHeadRepeat(o.value)) {
      o.repeated = o.value;
      o.repeatedPerm = o.perm;
      o.value = rep->first;
      o.group = rep->second;
    }
  return o;
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

/// acc + a * b with a, b the inputs, each possibly through arith.extf.
static bool isMulAddBody(Block &body) {
  if (body.getNumArguments() != 3)
    return false;
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  if (yield.getNumOperands() != 1)
    return false;
  auto add = yield.getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add || add->getBlock() != &body)
    return false;
  Value acc = body.getArgument(2);
  Value prod = add.getLhs() == acc ? add.getRhs() : add.getLhs();
  if ((add.getLhs() == acc) == (add.getRhs() == acc))
    return false;
  auto mul = prod.getDefiningOp<arith::MulFOp>();
  if (!mul || mul->getBlock() != &body)
    return false;
  auto source = [&](Value x) -> Value {
    if (auto ext = x.getDefiningOp<arith::ExtFOp>())
      if (ext->getBlock() == &body)
        return ext.getIn();
    return x;
  };
  Value a = source(mul.getLhs()), b = source(mul.getRhs());
  if (!((a == body.getArgument(0) && b == body.getArgument(1)) ||
        (a == body.getArgument(1) && b == body.getArgument(0))))
    return false;
  // Nothing else in the body.
  for (Operation &op : body.without_terminator())
    if (&op != add && &op != mul && !(isa<arith::ExtFOp>(op)))
      return false;
  return true;
}

FailureOr<Contraction> matchContraction(Operation *def, bool isScores,
                                        Why &why) {
  const char *what = isScores ? "Q K^T" : "P V";
  auto op = dyn_cast_or_null<linalg::LinalgOp>(def);
  if (!op ||
      !isa<linalg::MatmulOp, linalg::BatchMatmulOp, linalg::GenericOp>(def))
    return why(Twine(what) + " is not a linalg.matmul, linalg.batch_matmul "
                             "or a contraction linalg.generic");
  if (op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1 ||
      def->getNumResults() != 1 || !op.hasPureTensorSemantics())
    return why(Twine(what) + " is not a two-operand contraction on tensors");
  if (op.getNumReductionLoops() != 1)
    return why(Twine(what) + " does not reduce over exactly one dim");
  if (!isZeroInit(op.getDpsInitOperand(0)->get()))
    return why(Twine(what) + " does not accumulate from zero (a bias?)");
  if (!isMulAddBody(*op.getBlock()))
    return why(Twine(what) + "'s body is not acc + a * b");
  int64_t r = rankOf(def->getResult(0));
  if (r < 2 || r > 4 || op.getNumLoops() != r + 1)
    return why(Twine(what) + " is not of rank 2, 3 or 4");
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  AffineMap lhsMap = maps[0], rhsMap = maps[1], outMap = maps[2];
  if (!outMap.isProjectedPermutation() || outMap.getNumResults() != r ||
      !lhsMap.isProjectedPermutation() || lhsMap.getNumResults() != r ||
      rhsMap.getNumResults() != r)
    return why(Twine(what) + "'s indexing maps are not an einsum");
  MLIRContext *ctx = def->getContext();
  int64_t red = -1;
  for (auto [i, it] : llvm::enumerate(op.getIteratorTypesArray()))
    if (it == utils::IteratorType::reduction)
      red = i;
  AffineExpr redExpr = getAffineDimExpr(red, ctx);
  // The roles of the loops: batch dims (in all three), the row i (left
  // and out), the column (right and out: a key j or a value dim), the
  // reduced dim. The batch order is the scores' (Q K^T: its result must be
  // (batch.., i, j)) or P's (P V: its left operand must be (batch.., i, j)),
  // the softmax's layout; the other operands may be read in any order.
  AffineMap anchor = isScores ? outMap : lhsMap;
  SmallVector<AffineExpr> batch(anchor.getResults().take_front(r - 2));
  AffineExpr row = anchor.getResult(r - 2);
  AffineExpr col;
  if (isScores) {
    col = outMap.getResult(r - 1);
    if (col == redExpr)
      return why(Twine(what) + " does not reduce over the head dim");
  } else {
    if (anchor.getResult(r - 1) != redExpr)
      return why(Twine(what) + " does not contract P over the keys (its "
                               "last dim)");
    for (AffineExpr e : outMap.getResults())
      if (!llvm::is_contained(anchor.getResults(), e))
        col = e;
    if (!col)
      return why(Twine(what) + "'s result has no value dim");
  }
  // logical: what each operand's dims must be, in order.
  auto orderOf = [&](AffineMap map, ArrayRef<AffineExpr> logical, bool rhs,
                     Perm &perm, int64_t &group) -> bool {
    perm.assign(r, -1);
    for (auto [k, want] : llvm::enumerate(logical)) {
      for (auto [d, got] : llvm::enumerate(map.getResults())) {
        bool same = got == want;
        // Grouped-query heads: (h floordiv G) for the head of a 4-D K/V.
        if (!same && rhs && r == 4 && k == 1) {
          auto bin = dyn_cast<AffineBinaryOpExpr>(got);
          auto cst = bin ? dyn_cast<AffineConstantExpr>(bin.getRHS()) : nullptr;
          if (bin && bin.getKind() == AffineExprKind::FloorDiv &&
              bin.getLHS() == want && cst && cst.getValue() >= 2) {
            same = true;
            group = cst.getValue();
          }
        }
        if (same) {
          if (perm[k] >= 0)
            return false;
          perm[k] = d;
        }
      }
      if (perm[k] < 0)
        return false;
    }
    return true;
  };
  SmallVector<AffineExpr> lhsLogical(batch), rhsLogical(batch),
      outLogical(batch);
  lhsLogical.append({row, redExpr});
  if (isScores)
    rhsLogical.append({col, redExpr});
  else
    rhsLogical.append({redExpr, col});
  outLogical.append({row, col});
  Contraction c;
  c.op = op;
  c.rank = r;
  c.lhs = op.getDpsInputOperand(0)->get();
  c.rhs = op.getDpsInputOperand(1)->get();
  int64_t unused = 1;
  if (!orderOf(lhsMap, lhsLogical, false, c.lhsPerm, unused))
    return why(Twine(what) + " does not read its left operand as a "
                             "permutation of (batch.., row, reduced)");
  if (!orderOf(rhsMap, rhsLogical, true, c.rhsPerm, c.group))
    return why(Twine(what) + " does not contract the right operand over "
                             "the reduced dim, with the left's batch dims");
  if (!orderOf(outMap, outLogical, false, c.outPerm, unused))
    return why(Twine(what) + "'s result is not a permutation of (batch.., "
                             "row, column)");
  return c;
}

} // namespace mlir::fa::raise
