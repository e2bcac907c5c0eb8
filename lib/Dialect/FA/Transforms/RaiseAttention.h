//===- RaiseAttention.h - what the raising files share ----------*- C++ -*-===//
//
// Private to lib/Dialect/FA/Transforms: the types and functions the files
// of fa-raise-attention share. RaiseAttention.cpp matches the whole
// attention and holds the pass; RaiseHelpers.cpp (small helpers),
// RaiseSymbolic.cpp (the symbolic evaluation of elementwise bodies and
// masks), RaiseOperands.cpp (operands and contractions) and
// RaiseSoftmax.cpp (softmaxes) define the functions declared here.
//
//===----------------------------------------------------------------------===//

#ifndef FA_LIB_DIALECT_FA_TRANSFORMS_RAISEATTENTION_H
#define FA_LIB_DIALECT_FA_TRANSFORMS_RAISEATTENTION_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include <cmath>
#include <optional>
#include <string>

namespace mlir::fa::raise {

//===----------------------------------------------------------------------===//
// Small helpers (RaiseHelpers.cpp)
//===----------------------------------------------------------------------===//

/// Why a candidate was not raised: the first condition that failed.
struct Why {
  std::string text;
  LogicalResult operator()(const Twine &reason) {
    if (text.empty())
      text = reason.str();
    return failure();
  }
};

/// The rank of a shaped value.
int64_t rankOf(Value v);
/// What a generic's body yields (its first yielded value).
Value yielded(linalg::GenericOp g);
/// A scalar constant, possibly converted: the source constant's value.
std::optional<double> scalarConstant(Value v);
/// Whether `init` (a contraction's or a sum's accumulator) starts at zero.
bool isZeroInit(Value init);
/// An elementwise linalg.generic over its result.
bool isElementwise(linalg::GenericOp g);
/// A broadcast materialised as a copy (StableHLO's broadcast_in_dim).
bool isMaterialisedBroadcast(linalg::GenericOp g);

//===----------------------------------------------------------------------===//
// Symbolic evaluation of elementwise bodies (RaiseSymbolic.cpp)
//===----------------------------------------------------------------------===//

/// ci * i + cj * j + c over the query index i and the key index j (the last
/// two dims of the scores). As a constraint it means `ci*i + cj*j + c <= 0`.
struct Lin {
  int64_t ci = 0, cj = 0, c = 0;
  Lin operator+(const Lin &o) const { return {ci + o.ci, cj + o.cj, c + o.c}; }
  Lin operator-(const Lin &o) const { return {ci - o.ci, cj - o.cj, c - o.c}; }
  Lin scaled(int64_t k) const { return {ci * k, cj * k, c * k}; }
  bool isConstant() const { return ci == 0 && cj == 0; }
  bool operator==(const Lin &o) const {
    return ci == o.ci && cj == o.cj && c == o.c;
  }
};

/// A conjunction of `lin <= 0`: where a boolean mask holds. Empty: true.
using Band = SmallVector<Lin, 2>;

/// Where `band` does not hold, if that is a band.
std::optional<Band> negate(const Band &band);

/// What a scalar in an elementwise body is, as a function of (i, j) and of
/// the data it is applied to.
struct Sym {
  enum Kind { Unknown, Float, Int, Pred, Select, Data } kind = Unknown;
  double value = 0, other = 0; // Float: value; Select: pred ? value : other
  Lin lin;                     // Int: an integer linear in i and j
  Band band;                   // Pred, Select: where it holds; Data: visible
  double scale = 1;            // Data: scale * data
  // Data through a softcap's tanh: scale * tanh(inner * data) (`scale` is
  // then the cap c and inner * c the attention's scale).
  bool capped = false;
  double inner = 1;
  std::string why; // Unknown: why

  static Sym unknown(const Twine &why) {
    Sym s;
    s.why = why.str();
    return s;
  }
  static Sym floating(double v) {
    Sym s;
    s.kind = Float;
    s.value = v;
    return s;
  }
  static Sym integer(Lin l) {
    Sym s;
    s.kind = Int;
    s.lin = l;
    return s;
  }
  static Sym pred(Band b) {
    Sym s;
    s.kind = Pred;
    s.band = std::move(b);
    return s;
  }
  static Sym select(Band b, double a, double o) {
    if (std::isnan(a) || std::isnan(o))
      return unknown("a mask value is NaN");
    Sym s;
    s.kind = Select;
    s.band = std::move(b);
    s.value = a;
    s.other = o;
    return s;
  }
  static Sym data() {
    Sym s;
    s.kind = Data;
    return s;
  }
  bool isTrue() const { return kind == Pred && band.empty(); }
  bool isFalse() const {
    return kind == Pred && band.size() == 1 && band[0].isConstant() &&
           band[0].c > 0;
  }
};

/// The index each loop dim of a generic stands for: a linear function of
/// (i, j), or std::nullopt for the batch and head dims.
using Env = SmallVector<std::optional<Lin>>;

/// The extent of the scores' last two dims, over which masks are compared.
struct Domain {
  int64_t ni = ShapedType::kDynamic, nj = ShapedType::kDynamic;
  bool isStatic() const {
    return !ShapedType::isDynamic(ni) && !ShapedType::isDynamic(nj);
  }
};

/// Evaluates elementwise bodies and the tensors they read (masks) at a
/// symbolic position (i, j).
class SymbolicBody {
public:
  explicit SymbolicBody(Domain domain) : domain(domain) {}

  /// `g`'s yielded value, with input `dataInput` standing for the data (the
  /// scores, Q or K) and every other input evaluated as a mask tensor.
  Sym evalGeneric(linalg::GenericOp g, std::optional<unsigned> dataInput,
                  const Env &loops, int depth = 0);

  /// Tensor `t` at the position whose dims are `dims`.
  Sym evalTensor(Value t, const Env &dims, int depth);

  /// `band` without the constraints that hold on the whole domain.
  Band simplified(const Band &band) const;
  /// Where `band` does not hold, if that is a band.
  std::optional<Band> negated(const Band &band) const {
    return negate(simplified(band));
  }

private:
  Sym outsideValue(Value v, const Env &loops);
  Sym evalOp(Operation *op, ArrayRef<Sym> in, const Env &loops);
  Sym classifyDense(DenseElementsAttr dense, const Env &dims);
  Domain domain;
};

/// The loop dims of an elementwise op over the scores ((i, j) the last two).
Env scoresEnv(int64_t rank);

/// The attention's mask from where the scores stay visible, simplified on
/// the domain [0, ni) x [0, nj): causal (j <= i), a window (|i - j| < w),
/// both, or none.
struct MaskAttrs {
  bool causal = false;
  std::optional<int64_t> window;
  /// The diagonal through (Nq - 1, Nk - 1) rather than (0, 0): a KV cache's
  /// queries at key positions i + Nk - Nq.
  bool bottomRight = false;
};

/// The attention's mask from the band where the scores stay visible, or a
/// failure saying why it is none.
FailureOr<MaskAttrs> classifyBand(Band band, Domain domain, Why &why);

//===----------------------------------------------------------------------===//
// Operands (RaiseOperands.cpp)
//===----------------------------------------------------------------------===//

/// Under lifting, a 3-D [B*H, N, X] value is the [B, H, N, X] tensor it was
/// collapsed from (torch-mlir's matmul on 4-D operands).
struct Lift {
  int64_t b = 0, h = 0;
  bool on() const { return b > 0; }
};

/// A dim order: logical dim k (batch.., N, X as the attention reads it) is
/// dim perm[k] of the tensor.
using Perm = SmallVector<int64_t, 4>;

/// An operand of the attention as found: `value`, read in the order
/// `perm`, holding Hq / group heads; 3-D under lifting, it is expanded to
/// [B, H, N, X].
struct Operand {
  Value value;
  Perm perm;
  int64_t group = 1;
  /// Before the head repeat was undone (to fall back on when K and V are
  /// grouped differently).
  Value repeated;
  Perm repeatedPerm;
};

/// The tensor the attention takes for what a contraction reads as `v` in
/// the order `perm`.
Operand peelOperand(Value v, Perm perm, bool allowScale, Lift lift,
                    Domain domain, double &scale);

//===----------------------------------------------------------------------===//
// Contractions (RaiseOperands.cpp)
//===----------------------------------------------------------------------===//

/// A contraction over the last dim of its result's rows: Q K^T ("..id,
/// ..jd -> ..ij") or P V ("..ij, ..jd -> ..id"), as linalg.matmul (rank 2),
/// linalg.batch_matmul (rank 3; with or without transposed-B indexing
/// maps, which is how MLIR 22 spells batch_matmul_transpose_b) or an
/// einsum-like linalg.generic (rank 2 to 4). The body multiplies the inputs,
/// each possibly extended to a wider float first (f16 x f16 -> f32), and
/// accumulates from zero.
struct Contraction {
  linalg::LinalgOp op;
  Value lhs, rhs;
  /// The order in which each operand and the result are read, relative to
  /// the logical Q [.., Nq, D], K [.., Nk, D], P [.., Nq, Nk],
  /// V [.., Nk, Dv], S [.., Nq, Nk] and O [.., Nq, Dv] (Perm).
  Perm lhsPerm, rhsPerm, outPerm;
  /// The right operand's heads read as h floordiv group.
  int64_t group = 1;
  int64_t rank = 0;
};

/// `def` as Q K^T (`isScores`) or P V, or a failure saying why not.
FailureOr<Contraction> matchContraction(Operation *def, bool isScores,
                                        Why &why);

//===----------------------------------------------------------------------===//
// Softmax (RaiseSoftmax.cpp)
//===----------------------------------------------------------------------===//

/// A softmax over the last dim: returns its input.
FailureOr<Value> matchSoftmax(Value p, Why &why);
/// torch's _safe_softmax around a softmax: returns the softmax and sets
/// `tested` to the tensor tested for -inf, or returns nullptr.
Value safeSoftmaxInput(Value p, Value &tested);
/// Whether `p` is softmax-like: what makes a contraction a candidate P V.
bool looksLikeSoftmax(Value p);

} // namespace mlir::fa::raise

#endif // FA_LIB_DIALECT_FA_TRANSFORMS_RAISEATTENTION_H
