//===- Backward.cpp - fa-run --backward -----------------------------------===//
//
// Compiles an attention's forward and its backward (fa.attention, then
// fa.attention_backward on the forward's O and LSE) through the CPU
// pipeline, runs both on random inputs and a random dO, and checks O, the
// LSE and dQ, dK, dV against a naive double-precision reference that
// builds the whole N x N probabilities and differentiates softmax(scale Q
// K^T) V by the chain rule: an independent check of the forward's LSE, the
// backward's recomputation from it and its loop order.
//
//===----------------------------------------------------------------------===//

#include "Backward.h"
#include "Host.h"

#include "fa/Dialect/FA/IR/Validation.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <limits>
#include <random>

using namespace mlir;
using namespace mlir::fa::run;

namespace {

std::string memref(ArrayRef<int64_t> shape, StringRef elt) {
  std::string s = "memref<";
  for (int64_t d : shape)
    s += std::to_string(d) + "x";
  return s + elt.str() + ">";
}

/// The problem's rows: B sequences, or its varlen batch packed along N.
SequenceRows rowsOf(const BackwardProblem &p) {
  if (!p.varlenQ.empty())
    return SequenceRows::packed(p.varlenQ, p.varlenKV);
  SequenceRows rows;
  rows.batch = p.batch;
  rows.nq = p.qLen;
  rows.nk = p.kvLen;
  return rows;
}

/// The module: the forward writes O and the LSE, the backward reads them.
std::string moduleText(const BackwardProblem &p) {
  SequenceRows l = rowsOf(p);
  std::string qT = memref({l.batch, p.qHeads, l.nq, p.headDim}, p.dtype);
  std::string kT = memref({l.batch, p.kvHeads, l.nk, p.headDim}, p.dtype);
  std::string vT = memref({l.batch, p.kvHeads, l.nk, p.valueHeadDim}, p.dtype);
  std::string oT = memref({l.batch, p.qHeads, l.nq, p.valueHeadDim}, p.dtype);
  std::string lT = memref({l.batch, p.qHeads, l.nq}, "f32");
  std::string cuT = memref({int64_t(l.cuQ.size())}, "i32");
  std::string attrs;
  auto add = [&](const std::string &a) {
    attrs += (attrs.empty() ? "" : ", ") + a;
  };
  if (p.causal)
    add("causal");
  if (p.window)
    add("window = " + std::to_string(p.window) + " : i64");
  if (p.bottomRight)
    add("bottom_right");
  if (p.diagonalOffset)
    add("diagonal_offset = " + std::to_string(p.diagonalOffset) + " : i64");
  if (p.softcap != 0)
    add("softcap = " + fa::formatF32(static_cast<float>(p.softcap)) +
        " : f32");
  if (p.scale != 0)
    add("scale = " + fa::formatF32(static_cast<float>(p.scale)) + " : f32");
  std::string braces = attrs.empty() ? "" : " {" + attrs + "}";
  std::string sT = memref({p.qHeads}, "f32");
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "func.func @backward(%q: " << qT << ", %k: " << kT << ", %v: " << vT
     << ", %o: " << oT << ", %lse: " << lT << ", %do: " << oT << ", %dq: " << qT
     << ", %dk: " << kT << ", %dv: " << vT;
  if (p.sinks)
    os << ", %sinks: " << sT << ", %dsinks: " << sT;
  if (l.varlen())
    os << ", %cuq: " << cuT << ", %cuk: " << cuT;
  // The modifications' captures, last; both ops take them and the regions.
  auto captures = p.mods.captures(l.batch, p.qHeads, l.nq, l.nk);
  std::string captureList, captureTypes;
  for (auto &[name, shape] : captures) {
    os << ", %" << name << ": memref<" << shape << ">";
    captureList += (captureList.empty() ? "%" : ", %") + name;
    captureTypes +=
        (captureTypes.empty() ? "memref<" : ", memref<") + shape + ">";
  }
  std::string capturesOperand =
      captures.empty()
          ? ""
          : " captures(" + captureList + " : " + captureTypes + ")";
  std::string regions = p.mods.regions(captures);
  std::string sinks = p.sinks ? " sinks(%sinks : " + sT + ")" : "";
  std::string varlen =
      l.varlen() ? " varlen(%cuq, %cuk : " + cuT + ", " + cuT + ")" : "";
  os << ") {\n"
     << "  fa.attention %q, %k, %v" << varlen << sinks << capturesOperand
     << " outs(%o, %lse : " << oT << ", " << lT << ")" << braces << " : " << qT
     << ", " << kT << ", " << vT << "\n"
     << regions << "\n"
     << "  fa.attention_backward %q, %k, %v, %o, %lse, %do" << sinks << varlen
     << capturesOperand << " outs(%dq, %dk, %dv" << (p.sinks ? ", %dsinks" : "")
     << " : " << qT << ", " << kT << ", " << vT << (p.sinks ? ", " + sT : "")
     << ")" << braces << " : " << qT << ", " << kT << ", " << vT << ", " << oT
     << ", " << lT << ", " << oT << "\n"
     << regions << "\n  return\n}\n";
  return s;
}

/// The reference in double: O, the LSE and the gradients of
/// softmax(cap(scale Q K^T) masked) V with respect to Q, K and V for the
/// loss sum(dO o O), from the whole probability matrix of each head.
struct Reference {
  std::vector<double> o, lse, dq, dk, dv, dsinks;
};

/// Argument numbers of the backward's module.
enum Argument : unsigned {
  kQ,
  kK,
  kV,
  kO,
  kLse,
  kGradOut,
  kGradQ,
  kGradK,
  kGradV,
  kSinks,
  kGradSinks
};

Reference reference(const BackwardProblem &p, const Modifications &mods,
                    const std::vector<Buffer> &in) {
  const Buffer &q = in[kQ], &k = in[kK], &v = in[kV], &dO = in[kGradOut];
  SequenceRows layout = rowsOf(p);
  int64_t d = p.headDim, dv = p.valueHeadDim;
  int64_t group = p.qHeads / p.kvHeads;
  double scale = p.scale != 0 ? p.scale : 1.0 / std::sqrt(double(d));
  int64_t queryRows = layout.batch * p.qHeads * layout.nq;
  int64_t keyRows = layout.batch * p.kvHeads * layout.nk;
  Reference r;
  r.o.assign(queryRows * dv, 0.0);
  r.lse.assign(queryRows, -std::numeric_limits<double>::infinity());
  r.dq.assign(queryRows * d, 0.0);
  r.dk.assign(keyRows * d, 0.0);
  r.dv.assign(keyRows * dv, 0.0);
  r.dsinks.assign(p.sinks ? p.qHeads : 0, 0.0);
  std::vector<double> x(layout.nk), capped(layout.nk), prob(layout.nk),
      dp(layout.nk);
  std::vector<char> visible(layout.nk);
  for (int64_t b = 0; b < layout.sequences(); ++b)
    for (int64_t h = 0; h < p.qHeads; ++h) {
      int64_t kh = h / group, nq = layout.queriesOf(b), nk = layout.keysOf(b);
      auto qAt = [&](int64_t i, int64_t c) {
        return double(q.get(layout.queryRow(b, h, p.qHeads, i) * d + c));
      };
      auto kAt = [&](int64_t j, int64_t c) {
        return double(k.get(layout.keyRow(b, kh, p.kvHeads, j) * d + c));
      };
      auto vAt = [&](int64_t j, int64_t c) {
        return double(v.get(layout.keyRow(b, kh, p.kvHeads, j) * dv + c));
      };
      auto dOAt = [&](int64_t i, int64_t c) {
        return double(dO.get(layout.queryRow(b, h, p.qHeads, i) * dv + c));
      };
      for (int64_t i = 0; i < nq; ++i) {
        int64_t pos =
            (p.bottomRight ? i + nk - nq : i) + p.diagonalOffset;
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < nk; ++j) {
          visible[j] = !(p.causal && j > pos) &&
                       !(p.window && std::llabs(pos - j) >= p.window) &&
                       mods.keeps(b, i, j);
          if (!visible[j])
            continue;
          double dot = 0;
          for (int64_t c = 0; c < d; ++c)
            dot += qAt(i, c) * kAt(j, c);
          x[j] = scale * dot;
          capped[j] =
              p.softcap ? p.softcap * std::tanh(x[j] / p.softcap) : x[j];
          double s = mods.score(capped[j], b, h, i, j);
          prob[j] = s;
          mx = std::max(mx, s);
        }
        int64_t row = layout.queryRow(b, h, p.qHeads, i);
        // A sink: a logit in the denominator whose value row is zero.
        double sink = p.sinks ? double(in[kSinks].get(h))
                              : -std::numeric_limits<double>::infinity();
        mx = std::max(mx, sink);
        if (mx == -std::numeric_limits<double>::infinity())
          continue; // no visible key, no sink: O = 0, LSE = -inf
        double l = std::exp(sink - mx);
        for (int64_t j = 0; j < nk; ++j)
          if (visible[j])
            l += (prob[j] = std::exp(prob[j] - mx));
        r.lse[row] = mx + std::log(l);
        double rowDot = 0; // D_i = sum_j P_ij dP_ij
        for (int64_t j = 0; j < nk; ++j) {
          if (!visible[j])
            continue;
          prob[j] /= l;
          dp[j] = 0;
          for (int64_t c = 0; c < dv; ++c) {
            r.o[row * dv + c] += prob[j] * vAt(j, c);
            dp[j] += dOAt(i, c) * vAt(j, c);
          }
          rowDot += prob[j] * dp[j];
        }
        // The sink's score gradient P_sink (dP_sink - D) with dP_sink = 0.
        if (p.sinks)
          r.dsinks[h] -= std::exp(sink - mx) / l * rowDot;
        for (int64_t j = 0; j < nk; ++j) {
          if (!visible[j])
            continue;
          // The chain rule: score_mod' at the capped score, then cap'.
          double slope = mods.slope(capped[j], b, h, i, j);
          if (p.softcap) {
            double t = std::tanh(x[j] / p.softcap);
            slope *= 1 - t * t;
          }
          // d loss / d (Q K^T)_ij.
          double ds = prob[j] * (dp[j] - rowDot) * slope * scale;
          int64_t keyRow = layout.keyRow(b, kh, p.kvHeads, j);
          for (int64_t c = 0; c < d; ++c) {
            r.dq[row * d + c] += ds * kAt(j, c);
            r.dk[keyRow * d + c] += ds * qAt(i, c);
          }
          for (int64_t c = 0; c < dv; ++c)
            r.dv[keyRow * dv + c] += prob[j] * dOAt(i, c);
        }
      }
    }
  return r;
}

/// Relative L2 error of `got` against `want` and whether it is within
/// `tolerance`, printed as the forward's checks print theirs; NaN anywhere
/// (an element never written) fails.
/// `floor`: each reference value counts at least this much in the norm (the
/// LSE's 1, as the forward's check: a log near 0, one visible key with a
/// tiny score, is not held to an ill-conditioned relative error; an f16
/// gradient's smallest normal).
bool compare(StringRef name, const Buffer &got, const std::vector<double> &want,
             double tolerance, double floor = 0) {
  double errSq = 0, refSq = 0, maxAbs = 0;
  int64_t unwritten = 0, infMismatches = 0, finite = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    double g = got.get(i), w = want[i];
    if (std::isnan(g)) {
      ++unwritten;
      continue;
    }
    if (std::isinf(w) || std::isinf(g)) {
      infMismatches += g != w;
      continue;
    }
    errSq += (g - w) * (g - w);
    refSq += w * w;
    ++finite;
    maxAbs = std::max(maxAbs, std::fabs(g - w));
  }
  refSq = std::max(refSq, floor * floor * double(finite));
  double rel = refSq > 0 ? std::sqrt(errSq / refSq) : std::sqrt(errSq);
  bool ok = unwritten == 0 && infMismatches == 0 && rel <= tolerance;
  llvm::outs() << llvm::formatv(
      "fa-run: {0} rel_l2_error={1:e2} max_abs_error={2:e2} unwritten={3} "
      "inf_mismatches={4} tolerance={5:e1}{6}\n",
      name, rel, maxAbs, unwritten, infMismatches, tolerance,
      ok ? "" : " FAIL");
  return ok;
}

} // namespace

int mlir::fa::run::runBackward(MLIRContext &context,
                               const BackwardProblem &p) {
  auto fail = [](const Twine &why) {
    llvm::errs() << "fa-run: error: " << why << "\n";
    return 1;
  };
  // Every buffer within fa-run's bound, the naive reference's
  // B Hq Nq Nk (D + Dv) multiply-adds within 2^40: a diagnostic, not an
  // allocation failure.
  SequenceRows layout = rowsOf(p);
  int64_t widest = std::max(p.headDim, p.valueHeadDim);
  const int64_t shapes[2][4] = {{layout.batch, p.qHeads, layout.nq, widest},
                                {layout.batch, p.kvHeads, layout.nk, widest}};
  for (const int64_t(&shape)[4] : shapes)
    if (boundedElements(shape) < 0)
      return fail("--backward: a tensor of more than 2^28 elements; fa-run "
                  "allocates and checks it on the host: use smaller shapes");
  int64_t rows = layout.batch * p.qHeads * layout.nq;
  if (rows > 0 && layout.nk * 2 * widest > (int64_t(1) << 40) / rows)
    return fail("--backward: the naive reference would take more than 2^40 "
                "multiply-adds; use smaller shapes");
  std::string text = moduleText(p);
  if (p.printModule)
    llvm::outs() << text;
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(text, &context, "<fa-run --backward>");
  if (!module)
    return fail("could not build the backward's module");
  func::FuncOp entry = module->lookupSymbol<func::FuncOp>("backward");
  entry->setAttr("llvm.emit_c_interface", UnitAttr::get(&context));
  SmallVector<Type> argTypes(entry.getArgumentTypes());
  PassManager pm(&context);
  FailureOr<OpPassManager> parsed = parsePassPipeline(p.pipeline);
  if (failed(parsed))
    return fail("bad pipeline '" + p.pipeline + "'");
  static_cast<OpPassManager &>(pm) = *parsed;
  if (failed(pm.run(*module)))
    return fail("lowering failed");
  std::function<llvm::Error(llvm::Module *)> optimize =
      makeOptimizingTransformer(/*optLevel=*/2, /*sizeLevel=*/0,
                                /*targetMachine=*/nullptr);
  auto engine = createEngine(*module, optimize);
  if (!engine)
    return fail("cannot create the execution engine: " +
                llvm::toString(engine.takeError()));

  // q, k, v, dO ~ N(0, 1) in the inputs' type; NaN in O, the LSE and the
  // gradients, so that an element left unwritten shows.
  std::vector<Buffer> buffers(argTypes.size());
  Elt elt = p.dtype == "f16" ? Elt::F16 : p.dtype == "bf16" ? Elt::BF16
                                                           : Elt::F32;
  for (auto [i, t] : llvm::enumerate(argTypes)) {
    auto type = cast<MemRefType>(t);
    buffers[i].elt = type.getElementType().isSignlessInteger(32) ? Elt::I32
                     : i == kLse || i >= kSinks                  ? Elt::F32
                                                                 : elt;
    buffers[i].shape.assign(type.getShape().begin(), type.getShape().end());
    buffers[i].allocate();
  }
  std::mt19937 rng(p.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  float nan = std::numeric_limits<float>::quiet_NaN();
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (buffers[i].elt == Elt::I32)
      continue;
    bool input = i < 3 || i == kGradOut;
    for (int64_t j = 0; j < buffers[i].size(); ++j)
      buffers[i].set(j, input ? normal(rng) : nan);
  }
  // The modifications' captures are the module's last arguments.
  size_t captureCount =
      p.mods.captures(layout.batch, p.qHeads, layout.nq, layout.nk).size();
  size_t firstCapture = buffers.size() - captureCount;
  Modifications mods = p.mods;
  mods.draw(buffers, firstCapture, layout.batch, p.qHeads, layout.nq, layout.nk,
            rng);
  if (layout.varlen()) {
    // The prefix sums, the two arguments before the captures.
    size_t cuArg = firstCapture - 2;
    for (size_t i = 0; i < layout.cuQ.size(); ++i) {
      buffers[cuArg].setInt(i, layout.cuQ[i]);
      buffers[cuArg + 1].setInt(i, layout.cuK[i]);
    }
  }
  if (p.sinks) {
    // fa-run's forward draws: log(Nk) + N(0, 1), head 0 none.
    std::normal_distribution<double> logit(0.0, 1.0);
    double center = std::log(double(std::max<int64_t>(layout.nk, 1)));
    for (int64_t h = 0; h < p.qHeads; ++h)
      buffers[kSinks].set(h, h == 0 && p.qHeads > 1
                                 ? -std::numeric_limits<float>::infinity()
                                 : float(center + logit(rng)));
  }
  if (llvm::Error error = callEntry(**engine, "backward", buffers))
    return fail("cannot call @backward: " + llvm::toString(std::move(error)));

  Reference want = reference(p, mods, buffers);
  // The forward's tolerances; the gradients sum more products, each
  // rounded once to the gradients' type at the end.
  double forward = elt == Elt::F32 ? 1e-5 : elt == Elt::F16 ? 1e-3 : 8e-3;
  double gradient = elt == Elt::F32 ? 2e-5 : elt == Elt::F16 ? 2e-3 : 1.6e-2;
  if (p.tolerance > 0)
    forward = gradient = p.tolerance;
  llvm::outs() << llvm::formatv(
      "fa-run: backward {0} B={1} Hq={2} Hkv={3} Nq={4} Nk={5} D={6} Dv={7}"
      "{8}{9}{10}{11}{12}\n",
      p.dtype, layout.batch, p.qHeads, p.kvHeads, layout.nq, layout.nk,
      p.headDim, p.valueHeadDim, p.causal ? " causal" : "",
      p.window ? " window=" + std::to_string(p.window) : "",
      p.sinks ? " sinks" : "",
      layout.varlen()
          ? " cu_seqlens_q=" +
                llvm::join(llvm::map_range(
                               layout.cuQ,
                               [](int64_t v) { return std::to_string(v); }),
                           ",") +
                " cu_seqlens_k=" +
                llvm::join(llvm::map_range(
                               layout.cuK,
                               [](int64_t v) { return std::to_string(v); }),
                           ",")
          : std::string(),
      (p.mods.scoreMod != "none" ? " score_mod=" + p.mods.scoreMod : "") +
          (p.mods.maskMod != "none" ? " mask_mod=" + p.mods.maskMod : ""));
  // f16 keeps values below its smallest normal, 2^-14, as subnormals 2^-24
  // apart: a gradient there (a tiny scale, a saturated softcap) carries no
  // relative precision, so each reference value counts at least 2^-14 in
  // the norm (one spacing an element is then 2^-10 of it, within the
  // tolerance). bf16 and f32 have f32's range.
  double gradientFloor = elt == Elt::F16 ? std::ldexp(1.0, -14) : 0.0;
  bool ok = compare("O", buffers[kO], want.o, forward);
  ok = compare("LSE", buffers[kLse], want.lse, 1e-5, /*floor=*/1.0) && ok;
  ok = compare("dQ", buffers[kGradQ], want.dq, gradient, gradientFloor) && ok;
  ok = compare("dK", buffers[kGradK], want.dk, gradient, gradientFloor) && ok;
  ok = compare("dV", buffers[kGradV], want.dv, gradient, gradientFloor) && ok;
  // A sum over every row of the batch: f32 accumulation, the gradients'
  // f32 tolerance at least.
  if (p.sinks)
    ok = compare("dsinks", buffers[kGradSinks], want.dsinks,
                 std::max(gradient, 2e-5)) &&
         ok;
  llvm::outs() << "fa-run: " << (ok ? "PASS" : "FAIL") << "\n";
  return ok ? 0 : 1;
}
