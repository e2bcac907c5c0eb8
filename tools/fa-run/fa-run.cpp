//===- fa-run.cpp - compile fa.attention for the host, run it, check it ---===//
//
// fa-run takes a function holding fa.attention ops (from a file, or one
// built from command-line shapes), lowers it with fa-cpu-pipeline, runs it
// with MLIR's ExecutionEngine on random inputs, and compares each
// attention's O (and LSE) with a naive softmax(scale * Q K^T) V computed here
// in double precision from that attention's own q, k, v. It exits non-zero
// when the error exceeds the tolerance or an output element was not written
// (outputs are poisoned with NaN before the call).
//
// A function whose one memref-form fa.attention takes the function's
// arguments (q, k, v, o[, lse]) is called as it is (the direct form). Any
// other function -- raised by --raise from linalg, with tensor arguments and
// results, computing the operands, holding several attentions -- is given
// extra arguments that receive each attention's operands and results (the
// capture form, toCaptureForm): fa-run fills every original argument.
//
//===----------------------------------------------------------------------===//

#include "Backward.h"
#include "Host.h"
#include "Modifications.h"

#include "fa/Dialect/FA/IR/FAOps.h"
#include "fa/Dialect/FA/IR/Validation.h"
#include "fa/Pipelines/Pipelines.h"
#include "fa/Support/Float8.h"
#include "fa/Support/ToolVersion.h"
#include "fa/Support/UpstreamParserGuard.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/ExecutionEngine/CRunnerUtils.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ExecutionEngine/Orc/Mangling.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

using namespace mlir;
namespace cl = llvm::cl;
using namespace mlir::fa::run;

// The tool's own options; --help hides the LLVM ones linked in.
static cl::OptionCategory toolOptions("fa-run options");

static cl::opt<std::string> inputFile(cl::cat(toolOptions), cl::Positional,
                                      cl::desc("[input.mlir]"),
                                      cl::init(""));
static cl::opt<std::string>
    loopOrder(cl::cat(toolOptions), "loop-order", cl::desc("fa1 or fa2 (default fa2)"),
              cl::init("fa2"));
static cl::opt<std::string> splitKV(
    cl::cat(toolOptions), "split-kv",
    cl::desc(
        "Split-KV on the CPU path (fa-split-kv): a chunk count, or auto "
        "(mlir::fa::model::autoKVSplits on the static shapes, 132 SMs); off "
        "(default)"),
    cl::init("off"));
static cl::opt<int64_t> blockR(cl::cat(toolOptions), "block-r", cl::desc("B_r override"),
                               cl::init(0));
static cl::opt<int64_t> blockC(cl::cat(toolOptions), "block-c", cl::desc("B_c override"),
                               cl::init(0));
static cl::opt<int64_t> sramBudget(cl::cat(toolOptions), "sram-budget",
                                   cl::desc("fa-tile budget in bytes"),
                                   cl::init(0));
static cl::opt<double> rescaleThreshold(cl::cat(toolOptions), 
    "rescale-threshold",
    cl::desc("Apply fa-conditional-rescale with this threshold (log2 units, "
             "in [0, 64]; leave it out for none)"),
    cl::init(-1.0));
static cl::opt<bool> countRescales(cl::cat(toolOptions), 
    "count-rescales",
    cl::desc("Report rescales performed and skipped, and the largest P"),
    cl::init(false));
static cl::opt<int64_t> polyExp2Degree(cl::cat(toolOptions), 
    "poly-exp2-degree", cl::desc("Apply fa-poly-exp2 with this degree"),
    cl::init(0));
static cl::opt<int64_t> polyExp2Period(cl::cat(toolOptions), 
    "poly-exp2-period", cl::desc("fa-poly-exp2: one exp2 in this many"),
    cl::init(8));
static cl::opt<std::string>
    pipeline(cl::cat(toolOptions), "pipeline",
             cl::desc("Pass pipeline replacing fa-cpu-pipeline (textual, "
                      "anchored on builtin.module)"),
             cl::init(""));
static cl::opt<unsigned> seed(cl::cat(toolOptions), "seed", cl::desc("Random seed"), cl::init(1));
static cl::opt<double> tolerance(cl::cat(toolOptions), 
    "tolerance",
    cl::desc("Max relative L2 error of O (default by dtype: f32 1e-5, "
             "f16 1e-3, bf16 8e-3)"),
    cl::init(-1.0));
static cl::opt<std::string>
    inputKind(cl::cat(toolOptions), "inputs", cl::desc("normal (N(0,1) inputs) or rising (scores "
                                 "grow along the keys, so the row max moves "
                                 "in every block)"),
              cl::init("normal"));
static cl::opt<bool> raise(cl::cat(toolOptions), 
    "raise",
    cl::desc("Run fa-raise-attention first: the input spells attention in "
             "linalg (each raised op is checked against its own operands)"),
    cl::init(false));
static cl::opt<bool> compareUnraised(
    cl::cat(toolOptions), "compare-unraised",
    cl::desc("With --raise: also run the function as written (linalg, not "
             "raised) on the same inputs and compare every argument and "
             "result of the two runs (checks the raising itself)"),
    cl::init(false));
static cl::opt<bool> printModule(cl::cat(toolOptions), "print-input",
                                 cl::desc("Print the module before lowering"),
                                 cl::init(false));

// Shapes for a module built from the command line (no input file).
static cl::opt<int64_t> batch(cl::cat(toolOptions), "batch", cl::init(1));
static cl::opt<int64_t> qHeads(cl::cat(toolOptions), "q-heads", cl::init(1));
static cl::opt<int64_t> kvHeads(cl::cat(toolOptions), "kv-heads", cl::init(0),
                                cl::desc("default: q-heads"));
static cl::opt<int64_t> qLen(cl::cat(toolOptions), "q-len", cl::init(64));
static cl::opt<int64_t> kvLen(cl::cat(toolOptions), "kv-len", cl::init(0),
                              cl::desc("default: q-len"));
static cl::opt<int64_t> headDim(cl::cat(toolOptions), "head-dim", cl::init(64));
static cl::opt<int64_t> valueHeadDim(cl::cat(toolOptions), "value-head-dim", cl::init(0),
                                     cl::desc("default: head-dim"));
static cl::opt<std::string>
    dtype(cl::cat(toolOptions), "dtype",
          cl::desc("f32, f16, bf16 or e4m3 (inputs quantised per tensor, "
                   "x * 448 / amax, with their descales; checked against the "
                   "reference on the same quantised inputs)"),
          cl::init("f32"));
static cl::opt<std::string> kvDtype(
    cl::cat(toolOptions), "kv-dtype",
    cl::desc("K's and V's type: the inputs' (default) or e4m3, an FP8 KV "
             "cache beside Q and O in --dtype f32, f16 or bf16 (K and V "
             "quantised per tensor, x * 448 / amax, with their descales; "
             "checked against the reference on the same quantised K/V)"),
    cl::init(""));
static cl::opt<std::string> outDtype(
    cl::cat(toolOptions), "out-dtype",
    cl::desc("With --dtype e4m3: O's type, f32 (default), f16 or bf16"),
    cl::init("f32"));
static cl::opt<double> probsScale(
    cl::cat(toolOptions), "probs-scale",
    cl::desc("e4m3 attentions: P scaled by this power of two and rounded to "
             "e4m3 for P V, as the kernel does (fa-quantize-probs; default "
             "256); 0 keeps P in f32 (then O matches the reference to f32 "
             "rounding)"),
    cl::init(256.0));
static cl::opt<std::string> fp8(
    cl::cat(toolOptions), "fp8",
    cl::desc("Run the (f32/f16/bf16) attention in e4m3 on the CPU path: "
             "tensor (fa-quantize-fp8) or block (and fa-block-quantize); "
             "checked against the reference on the unquantised inputs, with "
             "--tolerance (default 0.1)"),
    cl::init(""));
static cl::opt<bool> incoherent(
    cl::cat(toolOptions), "incoherent",
    cl::desc("With --fp8: fa-incoherent-processing (Hadamard transform of Q "
             "and K before quantisation)"),
    cl::init(false));
static cl::opt<int64_t> pageSize(
    cl::cat(toolOptions), "page-size", cl::init(0),
    cl::desc("Paged K/V: pages of this many rows, scattered by a block "
             "table (0: contiguous K/V)"));
static cl::list<int64_t> kvLens(
    cl::cat(toolOptions), "kv-lens", cl::CommaSeparated,
    cl::desc("Per-sequence key lengths L1,L2,... (one per batch, each at "
             "most --kv-len): a KV cache's kv_lengths"));
static cl::list<int64_t> varlenQ(
    cl::cat(toolOptions), "varlen-q", cl::CommaSeparated,
    cl::desc("A varlen batch: each sequence's query count L1,L2,... (their "
             "count is the batch); the sequences are packed along N"));
static cl::list<int64_t> varlenKV(
    cl::cat(toolOptions), "varlen-kv", cl::CommaSeparated,
    cl::desc("With --varlen-q: each sequence's key count"));
static cl::opt<bool> causal(cl::cat(toolOptions), "causal", cl::init(false));
static cl::opt<int64_t> window(cl::cat(toolOptions), "window", cl::init(0),
                               cl::desc("|i - j| < window (0: none)"));
static cl::opt<std::string> causalAlign(
    cl::cat(toolOptions), "causal-align",
    cl::desc("Alignment of the causal/window masks: top-left (query i sees "
             "keys j <= i) or bottom-right (query i at key position "
             "i + Nk - Nq, as with a KV cache)"),
    cl::init("top-left"));
static cl::opt<int64_t> diagonalOffset(
    cl::cat(toolOptions), "diagonal-offset", cl::init(0),
    cl::desc("Move the causal/window diagonal d keys right (query i at key "
             "position i + d; 0: none)"));
static cl::opt<double> softcap(cl::cat(toolOptions), "softcap", cl::init(0.0),
                               cl::desc("c * tanh(s / c) (0: none)"));
static cl::opt<double> scale(cl::cat(toolOptions), "scale", cl::init(0.0),
                             cl::desc("0: 1/sqrt(head-dim)"));
static cl::opt<bool> withLse(cl::cat(toolOptions), "lse", cl::desc("Also compute and check LSE"),
                             cl::init(false));
static cl::opt<bool> sinks(
    cl::cat(toolOptions), "sinks",
    cl::desc("Give the generated attention a sink logit per query head "
             "(attention sinks, gpt-oss): log(Nk) + N(0, 1) each, head 0's "
             "-inf (no sink) when there are several heads"),
    cl::init(false));
static cl::opt<bool> backward(
    cl::cat(toolOptions), "backward",
    cl::desc("Also run the attention's backward (fa.attention_backward on "
             "the forward's O and LSE, a random dO) and check dQ, dK, dV "
             "against a naive double-precision reference"),
    cl::init(false));

static cl::opt<std::string> scoreMod(
    cl::cat(toolOptions), "score-mod",
    cl::desc("A score_mod region for the generated attention: none, alibi "
             "(score + slope_h (j - i), slopes 2^(-8 (h + 1) / Hq) captured), "
             "bias (score + bias[b, h, i, j], an N(0, 1) [B, Hq, Nq, Nk] "
             "tensor captured), head-scale (score * w_h, w_h = 0.5 + h / Hq "
             "captured) or tanh (2 tanh(score / 2), a cap as a region)"),
    cl::init("none"));
static cl::opt<std::string> maskMod(
    cl::cat(toolOptions), "mask-mod",
    cl::desc("A mask_mod region for the generated attention: none, document "
             "(query i sees key j of its own document: [B, Nq] and [B, Nk] "
             "i32 document ids captured, three documents a sequence) or "
             "prefix-lm (keys j < --prefix-len seen by every query, the rest "
             "causally: j <= i)"),
    cl::init("none"));
static cl::opt<int64_t>
    prefixLen(cl::cat(toolOptions), "prefix-len", cl::init(0),
              cl::desc("--mask-mod=prefix-lm: the keys every query sees"));

/// The modifications the options ask for (names checked by checkOptions).
static fa::run::Modifications modificationsOfOptions() {
  fa::run::Modifications mods;
  mods.scoreMod = scoreMod;
  mods.maskMod = maskMod;
  mods.prefixLen = prefixLen;
  return mods;
}

namespace {

//===----------------------------------------------------------------------===//
// Host-side element types
//===----------------------------------------------------------------------===//


FailureOr<Elt> toElt(Type t) {
  if (t.isF32())
    return Elt::F32;
  if (t.isF16())
    return Elt::F16;
  if (t.isBF16())
    return Elt::BF16;
  if (isa<Float8E4M3FNType>(t))
    return Elt::E4M3;
  if (t.isSignlessInteger(32))
    return Elt::I32;
  return failure();
}

/// Pages of a generated paged cache beyond the sequences' own.
constexpr int64_t kSparePages = 3;

std::string buildModuleText() {
  int64_t hkv = kvHeads ? kvHeads : qHeads;
  int64_t nk = kvLen ? kvLen : qLen;
  int64_t dv = valueHeadDim ? valueHeadDim : headDim;
  auto memref = [](std::initializer_list<int64_t> dims, StringRef t) {
    std::string s = "memref<";
    for (int64_t d : dims)
      s += std::to_string(d) + "x";
    return s + t.str() + ">";
  };
  bool e4m3 = dtype == "e4m3";
  std::string in = e4m3 ? "f8E4M3FN" : dtype.getValue();
  // An FP8 KV cache: e4m3 K and V beside Q in --dtype.
  bool e4m3KV = kvDtype == "e4m3";
  std::string kvIn = e4m3KV ? "f8E4M3FN" : in;
  // A varlen batch: the sequences packed along N in one batch row.
  bool varlen = !varlenQ.empty();
  int64_t batch = varlen ? 1 : ::batch;
  int64_t qLen = ::qLen;
  if (varlen) {
    qLen = std::accumulate(varlenQ.begin(), varlenQ.end(), int64_t(0));
    nk = std::accumulate(varlenKV.begin(), varlenKV.end(), int64_t(0));
  }
  std::string cuT = memref({int64_t(varlenQ.size()) + 1}, "i32");
  std::string qT = memref({batch, qHeads, qLen, headDim}, in);
  // Paged: every sequence's ceil(Nk / P) pages, scattered over a cache of
  // that many pages plus a few more (fa-run shuffles them).
  int64_t maxPages = pageSize ? (nk + pageSize - 1) / pageSize : 0;
  int64_t kvRows = pageSize ? batch * maxPages + kSparePages : batch;
  int64_t kvRowLen = pageSize ? pageSize : nk;
  std::string kT = memref({kvRows, hkv, kvRowLen, headDim}, kvIn);
  std::string vT = memref({kvRows, hkv, kvRowLen, dv}, kvIn);
  bool lengths = pageSize || !kvLens.empty();
  std::string lensT = memref({batch}, "i32");
  std::string tableT = memref({batch, maxPages}, "i32");
  std::string oT =
      memref({batch, qHeads, qLen, dv}, e4m3 ? outDtype.getValue() : in);
  std::string lT = memref({batch, qHeads, qLen}, "f32");
  std::string attrs;
  auto add = [&](const std::string &a) {
    attrs += (attrs.empty() ? "" : ", ") + a;
  };
  if (causal)
    add("causal");
  // Floats as the f32 attributes they become, in text that parses back to
  // exactly that f32 (std::to_string wrote 1.4e-6 as 0.000001).
  if (window != 0)
    add("window = " + std::to_string(window) + " : i64");
  if (causalAlign == "bottom-right")
    add("bottom_right");
  if (diagonalOffset != 0)
    add("diagonal_offset = " + std::to_string(diagonalOffset) + " : i64");
  if (softcap != 0)
    add("softcap = " + fa::formatF32(static_cast<float>(softcap)) + " : f32");
  if (scale != 0)
    add("scale = " + fa::formatF32(static_cast<float>(scale)) + " : f32");
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "func.func @attention(%q: " << qT << ", %k: " << kT << ", %v: " << vT
     << ", %o: " << oT;
  if (withLse)
    os << ", %lse: " << lT;
  // e4m3: the descales after the outputs, as the op's operands are.
  if (e4m3)
    os << ", %qd: memref<f32>, %kd: memref<f32>, %vd: memref<f32>";
  else if (e4m3KV)
    os << ", %kd: memref<f32>, %vd: memref<f32>";
  // Then the KV cache's lengths and block table, in the op's order.
  if (lengths)
    os << ", %lens: " << lensT;
  if (pageSize)
    os << ", %table: " << tableT;
  if (varlen)
    os << ", %cuq: " << cuT << ", %cuk: " << cuT;
  std::string sinksT = memref({qHeads}, "f32");
  if (sinks)
    os << ", %sinks: " << sinksT;
  // Captures of the score and mask modifications, in this order; key-side
  // ones span a sequence's key capacity (its pages with a paged cache).
  fa::run::Modifications mods = modificationsOfOptions();
  int64_t keyCapacity = pageSize ? maxPages * pageSize : nk;
  std::vector<std::pair<std::string, std::string>> captures =
      mods.captures(batch, qHeads, qLen, keyCapacity);
  for (auto &[name, shape] : captures)
    os << ", %" << name << ": memref<" << shape << ">";
  os << ") {\n  fa.attention %q, %k, %v ";
  if (e4m3)
    os << "descale(%qd, %kd, %vd : memref<f32>, memref<f32>, memref<f32>) ";
  else if (e4m3KV)
    os << "descale(%kd, %vd : memref<f32>, memref<f32>) ";
  if (lengths)
    os << "kv_lengths(%lens : " << lensT << ") ";
  if (pageSize)
    os << "pages(%table : " << tableT << ") ";
  if (varlen)
    os << "varlen(%cuq, %cuk : " << cuT << ", " << cuT << ") ";
  if (sinks)
    os << "sinks(%sinks : " << sinksT << ") ";
  if (!captures.empty()) {
    os << "captures(";
    llvm::interleaveComma(captures, os, [&](auto &c) { os << "%" << c.first; });
    os << " : ";
    llvm::interleaveComma(captures, os,
                          [&](auto &c) { os << "memref<" << c.second << ">"; });
    os << ") ";
  }
  os << "outs(%o";
  if (withLse)
    os << ", %lse";
  os << " : " << oT;
  if (withLse)
    os << ", " << lT;
  os << ")";
  if (!attrs.empty())
    os << " {" << attrs << "}";
  os << " : " << qT << ", " << kT << ", " << vT << "\n";
  os << mods.regions(captures);
  os << "\n  return\n}\n";
  return s;
}

/// What the reference needs to know, read off the op before lowering.
struct Spec : SequenceRows {
  int64_t hq, hkv, d, dv;
  /// score_mod/mask_mod regions of the input (raised, say): no reference
  /// here knows them, so --compare-unraised's run of the function as
  /// written is the check.
  bool regionsFromInput = false;
  float scale;
  bool causal;
  std::optional<int64_t> window;
  bool bottomRight; // query i at key position i + nk - nq
  int64_t diagonalOffset; // ... plus this
  std::optional<float> softcap;
  bool lse;
  Elt elt;    // of the inputs
  Elt outElt; // of O
  /// e4m3: the descale factors' values (per tensor), read after the inputs
  /// are made; 1 otherwise.
  double qDescale = 1, kDescale = 1, vDescale = 1;
  std::optional<unsigned> descaleArgs; // e4m3: the first descale argument
  /// The first input quantised to e4m3: Q (0), or K (1) for an e4m3 K/V.
  unsigned firstE4M3Input = 0;
  /// A KV cache's kv_lengths and block table (direct form): their argument
  /// numbers, and their values once fa-run has made them. With pages, nk
  /// is a sequence's capacity (max_pages * page_size) and K/V are
  /// [numPages, Hkv, pageSize, D].
  std::optional<unsigned> lengthsArg, tableArg;
  std::vector<int64_t> lengths, table;
  int64_t pageSize = 0, maxPages = 0, numPages = 0;
  /// A varlen batch's prefix sums' argument number (their values are
  /// SequenceRows' cuQ, cuK): the tensors have one batch row, nq and nk are
  /// the packed totals.
  std::optional<unsigned> cuArg;
  /// Attention sinks: their argument number and the logits fa-run made
  /// (one per query head; -inf is none).
  std::optional<unsigned> sinksArg;
  std::vector<double> sinks;
  /// fa-run's score and mask modifications (--score-mod, --mask-mod): the
  /// first capture's argument number and the data fa-run made for them.
  std::optional<unsigned> capturesArg;
  fa::run::Modifications mods;

  /// Sequence bi's key count: a KV cache's length where it has them.
  int64_t keysOf(int64_t bi) const {
    return lengths.empty() ? SequenceRows::keysOf(bi) : lengths[bi];
  }
  /// The flat row (in units of D, Dv or one LSE) of query i of (bi, h).
  int64_t queryRow(int64_t bi, int64_t h, int64_t i) const {
    return SequenceRows::queryRow(bi, h, hq, i);
  }
  /// The flat row (in units of D or Dv elements) of key j of (bi, kh),
  /// through the block table of a paged cache.
  int64_t keyRow(int64_t bi, int64_t kh, int64_t j) const {
    if (!pageSize)
      return SequenceRows::keyRow(bi, kh, hkv, j);
    return (table[bi * maxPages + j / pageSize] * hkv + kh) * pageSize +
           j % pageSize;
  }
};

/// Naive attention in double: O and LSE for every (b, h, i).
void reference(const Spec &s, const Buffer &q, const Buffer &k,
               const Buffer &v, std::vector<double> &o,
               std::vector<double> &lse) {
  o.assign(s.batch * s.hq * s.nq * s.dv, 0.0);
  lse.assign(s.batch * s.hq * s.nq, -std::numeric_limits<double>::infinity());
  int64_t group = s.hq / s.hkv;
  std::vector<double> scores(s.nk);
  std::vector<char> visible(s.nk);
  for (int64_t bi = 0; bi < s.sequences(); ++bi)
    for (int64_t h = 0; h < s.hq; ++h) {
      int64_t kh = h / group, nk = s.keysOf(bi), nq = s.queriesOf(bi);
      for (int64_t i = 0; i < nq; ++i) {
        double mx = -std::numeric_limits<double>::infinity();
        int64_t pos = (s.bottomRight ? i + nk - nq : i) + s.diagonalOffset;
        int64_t row = s.queryRow(bi, h, i);
        for (int64_t j = 0; j < nk; ++j) {
          bool vis = true;
          if (s.causal && j > pos)
            vis = false;
          if (s.window && std::llabs(pos - j) >= *s.window)
            vis = false;
          if (vis && !s.mods.keeps(bi, i, j))
            vis = false;
          visible[j] = vis;
          if (!vis)
            continue;
          double dot = 0;
          for (int64_t d = 0; d < s.d; ++d)
            dot += double(q.get(row * s.d + d)) *
                   double(k.get(s.keyRow(bi, kh, j) * s.d + d));
          double x = s.scale * s.qDescale * s.kDescale * dot;
          if (s.softcap)
            x = *s.softcap * std::tanh(x / *s.softcap);
          x = s.mods.score(x, bi, h, i, j);
          scores[j] = x;
          mx = std::max(mx, x);
        }
        // A sink: one more logit in the denominator, with no value row.
        double sink = s.sinks.empty() ? -std::numeric_limits<double>::infinity()
                                      : s.sinks[h];
        mx = std::max(mx, sink);
        if (mx == -std::numeric_limits<double>::infinity())
          continue; // every key masked, no sink: O = 0, LSE = -inf
        double l = std::exp(sink - mx);
        double *out = &o[row * s.dv];
        for (int64_t j = 0; j < nk; ++j) {
          if (!visible[j])
            continue;
          double p = std::exp(scores[j] - mx);
          l += p;
          for (int64_t d = 0; d < s.dv; ++d)
            out[d] += p * v.get(s.keyRow(bi, kh, j) * s.dv + d);
        }
        for (int64_t d = 0; d < s.dv; ++d)
          out[d] *= s.vDescale / l;
        lse[row] = mx + std::log(l);
      }
    }
}

int fail(const Twine &msg) {
  llvm::errs() << "fa-run: error: " << msg << "\n";
  return 1;
}


/// The options' ranges (fa/Dialect/FA/IR/Validation.h); 0 keeps meaning
/// "off" (window, softcap) or "the default" (scale), as documented, but a
/// negative or NaN value is refused instead of silently meaning off.
std::optional<std::string> checkOptions() {
  std::optional<std::string> error;
  auto flag = [](StringRef name, std::string message) {
    return "--" + name.str() + ": " + message;
  };
  if (window != 0 && (error = fa::checkWindow(window)))
    return flag("window", *error);
  if (diagonalOffset != 0 && (error = fa::checkDiagonalOffset(diagonalOffset)))
    return flag("diagonal-offset", *error);
  if (causalAlign != "top-left" && causalAlign != "bottom-right")
    return flag("causal-align", "expected top-left or bottom-right, got '" +
                                    causalAlign + "'");
  if (softcap != 0 && (error = fa::checkSoftcap(softcap)))
    return flag("softcap", *error);
  fa::run::Modifications mods = modificationsOfOptions();
  if (auto bad = mods.check())
    return flag(bad->first, bad->second);
  if (mods.perSequenceData() && !varlenQ.empty())
    return flag(mods.maskMod == "document" ? "mask-mod" : "score-mod",
                "fa-run generates per-sequence data for a batch, not a "
                "varlen batch; use alibi, head-scale, tanh or prefix-lm "
                "there");
  if ((scoreMod != "none" || maskMod != "none") && !inputFile.empty())
    return flag(scoreMod != "none" ? "score-mod" : "mask-mod",
                "modifies the attention fa-run generates; a file's attention "
                "has its own regions");
  if (scale != 0 && (error = fa::checkScale(scale)))
    return flag("scale", *error);
  if (rescaleThreshold.getNumOccurrences() &&
      (error = fa::checkRescaleThreshold(rescaleThreshold)))
    return flag("rescale-threshold", *error);
  if (polyExp2Degree != 0 &&
      (error = fa::checkPolyExp2(polyExp2Degree, polyExp2Period)))
    return flag("poly-exp2-degree/--poly-exp2-period", *error);
  for (auto [name, rows] : {std::pair<StringRef, int64_t>{"block-r", blockR},
                            {"block-c", blockC}})
    if (rows != 0 && (error = fa::checkTileSize("the tile rows", rows)))
      return flag(name, *error);
  if (splitKV != "off" && !pipeline.empty())
    return flag("split-kv", "the pipeline is given (--pipeline): set its "
                            "fa-cpu-pipeline{kv-splits=...} instead");
  if (splitKV != "off" && splitKV != "auto") {
    int64_t n;
    if (!llvm::to_integer(StringRef(splitKV), n, 10))
      return flag("split-kv", "expected off, auto or a chunk count, got '" +
                                  splitKV + "'");
    if ((error = fa::checkKVSplits(n)))
      return flag("split-kv", *error);
  }
  if (!fp8.empty() && fp8 != "tensor" && fp8 != "block")
    return flag("fp8", "expected tensor or block, got '" + fp8 + "'");
  if (incoherent && fp8.empty())
    return flag("incoherent", "transforms Q and K before their e4m3 "
                              "quantisation: give --fp8 too");
  if ((!fp8.empty() || incoherent) && !pipeline.empty())
    return flag("fp8", "the pipeline is given (--pipeline): set its "
                       "fa-cpu-pipeline{fp8=... incoherent=...} instead");
  // P is rounded only in e4m3 attentions (a file's are checked by
  // fa-quantize-probs itself).
  bool e4m3 = dtype == "e4m3" || !fp8.empty();
  if (probsScale != 0 && (e4m3 || probsScale.getNumOccurrences()) &&
      (error =
           fa::checkProbsScale(probsScale, rescaleThreshold.getNumOccurrences()
                                               ? double(rescaleThreshold)
                                               : 0.0)))
    return flag("probs-scale", *error);
  if (pageSize != 0)
    if (auto why = fa::checkPageSize(pageSize))
      return flag("page-size", *why + " (0: contiguous K/V)");
  if (!varlenQ.empty() || !varlenKV.empty()) {
    StringRef name = varlenQ.empty() ? "varlen-kv" : "varlen-q";
    if (varlenQ.size() != varlenKV.size())
      return flag(name, "expected one query and one key count per sequence, "
                        "got " + std::to_string(varlenQ.size()) +
                            " and " + std::to_string(varlenKV.size()));
    for (int64_t n : llvm::concat<int64_t>(varlenQ, varlenKV))
      if (n < 0 || n > (int64_t(1) << 20))
        return flag(name, "expected sequence lengths in [0, 2^20], got " +
                              std::to_string(n));
    if (batch.getNumOccurrences() && batch != int64_t(varlenQ.size()))
      return flag(name, "the lists give the batch (" +
                            std::to_string(varlenQ.size()) +
                            "); leave --batch out");
    if (pageSize || !kvLens.empty() || dtype == "e4m3" || !fp8.empty() ||
        !kvDtype.empty())
      return flag(name, "a varlen batch takes no pages, kv lengths or e4m3 "
                        "inputs (not supported together)");
  }
  if (!kvDtype.empty() && !inputFile.empty())
    return flag("kv-dtype", "types the K/V of the attention fa-run "
                            "generates; a file's attention has its own");
  if (pageSize && !inputFile.empty())
    return flag("page-size", "pages the attention fa-run generates; a "
                             "file's attention takes its own pages operand");
  if (sramBudget < 0)
    return flag("sram-budget", "expected a budget of at least 0 bytes (0: "
                               "the default), got " +
                                   std::to_string(sramBudget));
  if (inputFile.empty()) {
    for (auto [name, value] :
         {std::pair<StringRef, int64_t>{"batch", batch}, {"q-heads", qHeads},
          {"kv-heads", kvHeads}, {"q-len", qLen}, {"kv-len", kvLen}})
      if (value < 0)
        return flag(name, "expected a size of at least 0, got " +
                              std::to_string(value));
    if ((error = fa::checkHeadDim("head dim", headDim)))
      return flag("head-dim", *error);
    if (valueHeadDim != 0 &&
        (error = fa::checkHeadDim("value head dim", valueHeadDim)))
      return flag("value-head-dim", *error);
  }
  return std::nullopt;
}

/// The attention's spec for the reference, read off the op; an error when
/// fa-run cannot check it (dynamic shapes, element type).
FailureOr<Spec> specOf(fa::AttentionOp attention, std::string &error) {
  Spec spec;
  ShapedType qT = attention.getQueryType(), kT = attention.getKeyType(),
             vT = attention.getValueType();
  if (!qT.hasStaticShape() || !kT.hasStaticShape() || !vT.hasStaticShape()) {
    error = "fa.attention must have static shapes";
    return failure();
  }
  spec.batch = qT.getDimSize(0);
  spec.hq = qT.getDimSize(1);
  spec.nq = qT.getDimSize(2);
  spec.d = qT.getDimSize(3);
  spec.hkv = kT.getDimSize(1);
  spec.nk = kT.getDimSize(2);
  spec.dv = vT.getDimSize(3);
  spec.scale = attention.getEffectiveScale();
  spec.causal = attention.getCausal();
  spec.window = attention.getWindow();
  spec.bottomRight = attention.getBottomRight();
  spec.diagonalOffset = attention.getDiagonalOffset().value_or(0);
  if (auto cap = attention.getSoftcap())
    spec.softcap = cap->convertToFloat();
  spec.lse = attention.hasLse();
  FailureOr<Elt> elt = toElt(qT.getElementType());
  if (failed(elt)) {
    error = "unsupported element type";
    return failure();
  }
  spec.elt = *elt;
  FailureOr<Elt> outElt =
      toElt(cast<ShapedType>(attention.hasBufferSemantics()
                                 ? attention.getOuts()[0].getType()
                                 : attention.getResultTypes()[0])
                .getElementType());
  if (failed(outElt)) {
    error = "unsupported output element type";
    return failure();
  }
  spec.outElt = *outElt;
  if (attention.isFP8() || attention.hasFP8KeyValues()) {
    for (Value descale : attention.getDescales())
      if (cast<ShapedType>(descale.getType()).getRank() != 0) {
        error = "fa-run makes per-tensor descales (rank 0); this attention "
                "takes other layouts";
        return failure();
      }
    spec.descaleArgs = 3 + attention.getOuts().size();
    spec.firstE4M3Input = attention.isFP8() ? 0 : 1;
  }
  // kv_lengths and the block table follow the outputs and descales.
  unsigned next = 3 + attention.getOuts().size() + attention.getDescales().size();
  if (attention.getKvLengths())
    spec.lengthsArg = next++;
  if (attention.isPaged()) {
    auto tableType = cast<ShapedType>(attention.getBlockTable().getType());
    if (!tableType.hasStaticShape()) {
      error = "the block table must have a static shape";
      return failure();
    }
    spec.tableArg = next;
    spec.pageSize = attention.getPageSize();
    spec.maxPages = tableType.getDimSize(1);
    spec.numPages = kT.getDimSize(0);
    if (spec.maxPages > (int64_t(1) << 28) / std::max<int64_t>(spec.pageSize, 1)) {
      error = "the block table addresses more than 2^28 keys per sequence; "
              "use smaller shapes";
      return failure();
    }
    spec.nk = spec.maxPages * spec.pageSize;
  }
  if (attention.isVarlen()) {
    auto sums = cast<ShapedType>(attention.getCuSeqlensQ().getType());
    if (!sums.hasStaticShape()) {
      error = "cu_seqlens must have a static shape";
      return failure();
    }
    spec.cuArg = next + (attention.isPaged() ? 1 : 0);
  }
  if (attention.getSinks())
    spec.sinksArg =
        next + (attention.isPaged() ? 1 : 0) + (attention.isVarlen() ? 2 : 0);
  if (attention.hasModifications() && !inputFile.empty() && compareUnraised) {
    spec.regionsFromInput = true;
  } else if (attention.hasModifications()) {
    // fa-run's reference knows the modifications it generates, not a
    // file's regions (those are checked against the unraised function).
    if (!inputFile.empty() || (scoreMod == "none" && maskMod == "none")) {
      error = "fa-run checks the score_mod/mask_mod regions it generates "
              "(--score-mod, --mask-mod), or a file's against the function "
              "as written (--raise --compare-unraised)";
      return failure();
    }
    spec.capturesArg = next + (attention.isPaged() ? 1 : 0) +
                       (attention.isVarlen() ? 2 : 0) +
                       (attention.getSinks() ? 1 : 0);
    // The modifications the op still has: fa-fold-modifications may have
    // made one of them an attribute (--score-mod tanh is softcap = 2
    // then), which the reference reads off the op instead.
    spec.mods = modificationsOfOptions();
    if (attention.getScoreMod().empty())
      spec.mods.scoreMod = "none";
    if (attention.getMaskMod().empty())
      spec.mods.maskMod = "none";
  }
  const int64_t shapes[4][4] = {
      {spec.batch, spec.hq, spec.nq, spec.d},
      {kT.getDimSize(0), spec.hkv, kT.getDimSize(2), spec.d},
      {kT.getDimSize(0), spec.hkv, kT.getDimSize(2), spec.dv},
      {spec.batch, spec.hq, spec.nq, spec.dv}};
  const char *names[] = {"q", "k", "v", "o"};
  for (auto [shape, name] : llvm::zip(shapes, names))
    if (boundedElements(shape) < 0) {
      error = std::string("fa.attention's ") + name +
              " has more than 2^28 elements: fa-run allocates and checks it "
              "on the host; use smaller shapes";
      return failure();
    }
  if (spec.batch * spec.hq * spec.nq > 0 &&
      spec.nk * spec.d >
          (int64_t(1) << 40) / (spec.batch * spec.hq * spec.nq)) {
    error = "the naive reference would take more than 2^40 multiply-adds; "
            "use smaller shapes";
    return failure();
  }
  return spec;
}

/// A KV cache's inputs (direct form): the lengths from --kv-lens (else every
/// sequence full), and a block table that scatters each sequence's pages
/// over a shuffled cache. Records them in `spec` for the reference.
std::optional<std::string> makeKVCache(Spec &spec, std::vector<Buffer> &buffers,
                                       std::mt19937 &rng) {
  if (spec.cuArg) {
    // A varlen batch: the prefix sums of --varlen-q and --varlen-kv, for
    // the attention fa-run generates or a file's (whose packed rows and
    // sequence count they must fit).
    if (varlenQ.empty())
      return std::string("a varlen attention's prefix sums come from "
                         "--varlen-q and --varlen-kv (each sequence's query "
                         "and key count)");
    spec.cuQ = {0};
    spec.cuK = {0};
    for (auto [nq, nk] : llvm::zip(varlenQ, varlenKV)) {
      spec.cuQ.push_back(spec.cuQ.back() + nq);
      spec.cuK.push_back(spec.cuK.back() + nk);
    }
    int64_t sequences = buffers[*spec.cuArg].size() - 1;
    if (int64_t(varlenQ.size()) != sequences)
      return "--varlen-q: the attention's cu_seqlens hold " +
             std::to_string(sequences) + " sequences, got " +
             std::to_string(varlenQ.size()) + " lengths";
    int64_t keyRows = spec.nk;
    if (spec.cuQ.back() > spec.nq || spec.cuK.back() > keyRows)
      return "--varlen-q, --varlen-kv: the sequences need " +
             std::to_string(spec.cuQ.back()) + " query and " +
             std::to_string(spec.cuK.back()) +
             " key rows, the attention's tensors hold " +
             std::to_string(spec.nq) + " and " + std::to_string(keyRows);
    for (size_t i = 0; i < spec.cuQ.size(); ++i) {
      buffers[*spec.cuArg].setInt(i, spec.cuQ[i]);
      buffers[*spec.cuArg + 1].setInt(i, spec.cuK[i]);
    }
  }
  if (spec.lengthsArg) {
    if (!kvLens.empty() && int64_t(kvLens.size()) != spec.batch)
      return "--kv-lens: expected one length per sequence (" +
             std::to_string(spec.batch) + "), got " +
             std::to_string(kvLens.size());
    for (int64_t bi = 0; bi < spec.batch; ++bi) {
      // Default: the generated attention's --kv-len (a page may hold more
      // rows), a file's whole capacity.
      int64_t full = inputFile.empty() ? std::min<int64_t>(
                                             spec.nk, kvLen ? kvLen : qLen)
                                       : spec.nk;
      int64_t n = kvLens.empty() ? full : kvLens[bi];
      if (n < 0 || n > spec.nk)
        return "--kv-lens: sequence " + std::to_string(bi) + "'s length " +
               std::to_string(n) + " is outside [0, " +
               std::to_string(spec.nk) + "] (the keys each sequence has)";
      spec.lengths.push_back(n);
      buffers[*spec.lengthsArg].setInt(bi, n);
    }
  } else if (!kvLens.empty()) {
    return std::string("--kv-lens: the attention takes no kv_lengths");
  }
  if (!spec.tableArg)
    return std::nullopt;
  std::vector<int64_t> pages(spec.numPages);
  for (int64_t i = 0; i < spec.numPages; ++i)
    pages[i] = i;
  std::shuffle(pages.begin(), pages.end(), rng);
  // Distinct pages while they last, then shared ones (prefix sharing).
  for (int64_t e = 0; e < spec.batch * spec.maxPages; ++e) {
    int64_t page = e < spec.numPages ? pages[e] : pages[e % spec.numPages];
    spec.table.push_back(page);
    buffers[*spec.tableArg].setInt(e, page);
  }
  return std::nullopt;
}

/// Attention sinks (direct form): log(Nk) + N(0, 1) per query head, so
/// that a sink weighs about as much as the keys together; head 0 has none
/// (-inf) when there are several. Records them in `spec`.
void makeSinks(Spec &spec, std::vector<Buffer> &buffers, std::mt19937 &rng) {
  if (!spec.sinksArg)
    return;
  std::normal_distribution<double> normal(0.0, 1.0);
  double center = std::log(double(std::max<int64_t>(spec.nk, 1)));
  for (int64_t h = 0; h < spec.hq; ++h) {
    float logit = h == 0 && spec.hq > 1
                      ? -std::numeric_limits<float>::infinity()
                      : float(center + normal(rng));
    spec.sinks.push_back(logit);
    buffers[*spec.sinksArg].set(h, logit);
  }
}

/// Where an attention's operands and results are found among the buffers
/// passed to the entry function.
struct Checked {
  Spec spec;
  std::string label; // empty for the one attention of the direct form
  unsigned q, k, v, o;
  std::optional<unsigned> lse;
};

/// Compares one attention's O (and LSE) with the naive reference of its own
/// q, k, v; prints the report lines and returns whether it passed.
bool checkAttention(const Checked &c, const std::vector<Buffer> &buffers) {
  const Spec &spec = c.spec;
  if (spec.regionsFromInput) {
    llvm::outs() << "fa-run: " << (c.label.empty() ? "" : c.label + ": ")
                 << "score_mod/mask_mod regions of the input: checked "
                    "against the unraised function\n";
    return true;
  }
  std::vector<double> refO, refLse;
  reference(spec, buffers[c.q], buffers[c.k], buffers[c.v], refO, refLse);
  const Buffer &out = buffers[c.o];
  double errSq = 0, refSq = 0, maxAbs = 0;
  int64_t unwritten = 0;
  for (size_t i = 0; i < refO.size(); ++i) {
    double got = out.get(i);
    if (std::isnan(got)) {
      ++unwritten;
      continue;
    }
    errSq += (got - refO[i]) * (got - refO[i]);
    refSq += refO[i] * refO[i];
    maxAbs = std::max(maxAbs, std::fabs(got - refO[i]));
  }
  double relErr = refSq > 0 ? std::sqrt(errSq / refSq) : std::sqrt(errSq);
  double tol = tolerance > 0             ? tolerance
               : spec.outElt == Elt::F32 ? 1e-5
               : spec.outElt == Elt::F16 ? 1e-3
                                         : 8e-3;
  // P rounded to e4m3 for P V (fa-quantize-probs): each P carries up to
  // 2^-4 relative error (3 mantissa bits, nearest), roughly independent
  // across keys, so O's relative L2 error is about their RMS: 1.5e-2 to
  // 2.2e-2 measured on N(0, 1) inputs (test/Integration/CPU/fp8.test). The
  // default admits the per-element bound 2^-4; the tight check is
  // --probs-scale=0.
  if (tolerance <= 0 && spec.elt == Elt::E4M3 && probsScale > 0)
    tol = std::max(tol, 0x1p-4);
  // --fp8: against the unquantised inputs' reference, e4m3's own error.
  if (tolerance <= 0 && !fp8.empty())
    tol = 0.1;
  // The software exp2 is an approximation: each P carries up to its
  // polynomial's relative error (PolyExp2.h: 1.7e-3, 7.5e-5, 2.6e-6, 9.0e-8
  // for degrees 2..5), which O inherits; the default tolerance admits twice
  // that, and no more.
  if (tolerance <= 0 && polyExp2Degree >= 2 && polyExp2Degree <= 5) {
    const double polyError[] = {1.7e-3, 7.5e-5, 2.6e-6, 9.0e-8};
    tol = std::max(tol, 2 * polyError[polyExp2Degree - 2]);
  }
  bool ok = unwritten == 0 && relErr <= tol;

  double lseErr = 0;
  int64_t lseMismatch = 0;
  if (c.lse) {
    const Buffer &lseOut = buffers[*c.lse];
    double eSq = 0, rSq = 0;
    for (size_t i = 0; i < refLse.size(); ++i) {
      double got = lseOut.get(i), want = refLse[i];
      if (std::isinf(want) || std::isinf(got) || std::isnan(got)) {
        if (!(std::isinf(want) && std::isinf(got) && (want < 0) == (got < 0)))
          ++lseMismatch;
        continue;
      }
      eSq += (got - want) * (got - want);
      rSq += want * want;
    }
    // LSE is a log: an absolute error e in it is a relative error e in the
    // softmax normaliser. Relative to max(|LSE|, 1), so that a row whose LSE
    // is near 0 (one visible key, a tiny score) is not held to an
    // ill-conditioned relative error (fa-run FAILed on LSE = 1e-6 with an
    // absolute error of 4e-9).
    lseErr = refLse.empty()
                 ? 0.0
                 : std::sqrt(eSq / std::max(rSq, double(refLse.size())));
    ok = ok && lseMismatch == 0 && lseErr <= std::max(tol, 1e-5);
  }

  auto nameOf = [](Elt e) {
    return e == Elt::F32    ? "f32"
           : e == Elt::F16  ? "f16"
           : e == Elt::BF16 ? "bf16"
                            : "e4m3";
  };
  std::string eltName = nameOf(spec.elt);
  if (spec.outElt != spec.elt)
    eltName += std::string("->") + nameOf(spec.outElt);
  if (!fp8.empty())
    eltName += " fp8=" + fp8 + (incoherent ? "+incoherent" : "");
  if (spec.descaleArgs && spec.firstE4M3Input == 1)
    eltName += " kv=e4m3";
  std::string prefix = "fa-run: ";
  if (!c.label.empty())
    prefix += c.label + ": ";
  llvm::outs() << prefix << loopOrder << " " << eltName << " B=" << spec.batch
               << " Hq=" << spec.hq << " Hkv=" << spec.hkv << " Nq=" << spec.nq
               << " Nk=" << spec.nk << " D=" << spec.d << " Dv=" << spec.dv
               << (spec.causal ? " causal" : "");
  if (spec.window)
    llvm::outs() << " window=" << *spec.window;
  if (spec.bottomRight)
    llvm::outs() << " bottom_right";
  if (spec.diagonalOffset)
    llvm::outs() << " diagonal_offset=" << spec.diagonalOffset;
  if (spec.softcap)
    llvm::outs() << " softcap=" << *spec.softcap;
  if (!spec.sinks.empty())
    llvm::outs() << " sinks";
  if (scoreMod != "none")
    llvm::outs() << " score_mod=" << scoreMod;
  if (maskMod != "none")
    llvm::outs() << " mask_mod=" << maskMod;
  if (!c.label.empty())
    llvm::outs() << " scale=" << fa::formatF32(spec.scale);
  if (spec.pageSize)
    llvm::outs() << " page_size=" << spec.pageSize;
  if (!spec.lengths.empty()) {
    llvm::outs() << " kv_lens=";
    llvm::interleave(spec.lengths, llvm::outs(), ",");
  }
  if (!spec.cuQ.empty()) {
    llvm::outs() << " cu_seqlens_q=";
    llvm::interleave(spec.cuQ, llvm::outs(), ",");
    llvm::outs() << " cu_seqlens_k=";
    llvm::interleave(spec.cuK, llvm::outs(), ",");
  }
  llvm::outs() << " inputs=" << inputKind << "\n";
  llvm::outs() << prefix
               << llvm::formatv("O rel_l2_error={0:e2} max_abs_error={1:e2} "
                                "unwritten={2} tolerance={3:e1}\n",
                                relErr, maxAbs, unwritten, tol);
  if (spec.elt == Elt::E4M3 || !fp8.empty()) {
    llvm::outs() << prefix
                 << llvm::formatv(
                        "O rmse={0:e2}",
                        std::sqrt(errSq / std::max<size_t>(refO.size(), 1)));
    if (spec.elt == Elt::E4M3)
      llvm::outs() << llvm::formatv(" q_descale={0:e3} k_descale={1:e3} "
                                    "v_descale={2:e3}",
                                    spec.qDescale, spec.kDescale,
                                    spec.vDescale);
    llvm::outs() << "\n";
  } else if (spec.firstE4M3Input == 1 && spec.descaleArgs) {
    // An e4m3 K/V: its descales, so that a run can be repeated.
    llvm::outs() << prefix
                 << llvm::formatv("e4m3 K/V k_descale={0:e3} v_descale={1:e3}\n",
                                  spec.kDescale, spec.vDescale);
  }
  if (c.lse)
    llvm::outs() << prefix
                 << llvm::formatv("LSE rel_l2_error={0:e2} inf_mismatches={1}\n",
                                  lseErr, lseMismatch);
  return ok;
}

/// Whether `entry` is the direct form: one memref-form fa.attention whose
/// operands (q, k, v, o[, lse]) are the function's arguments in order, and
/// no results.
bool isDirectForm(func::FuncOp entry, ArrayRef<fa::AttentionOp> attentions) {
  if (attentions.size() != 1 || entry.getNumResults() != 0)
    return false;
  fa::AttentionOp op = attentions[0];
  if (!op.hasBufferSemantics() ||
      entry.getNumArguments() != op->getNumOperands())
    return false;
  for (auto [arg, operand] :
       llvm::zip(entry.getArguments(), op->getOperands()))
    if (arg != operand)
      return false;
  return true;
}

/// Rewrites `entry` so that fa-run can call it with host buffers and see
/// every attention's own operands and results (the capture form):
///  * tensor arguments become memrefs (bufferization.to_tensor inside);
///  * results become trailing memref arguments written before the return;
///  * for each attention, four or five more memref arguments receive a copy
///    of its q, k, v (as the op reads them) and its o (and lse). A
///    tensor-form attention writes o and lse into them directly (so that an
///    element it leaves unwritten stays NaN); a buffer-form one is copied.
/// `numInputs` is the number of the original arguments, `numOutputs` that
/// plus the number of results.
LogicalResult toCaptureForm(func::FuncOp entry,
                            ArrayRef<fa::AttentionOp> attentions,
                            std::vector<Checked> &checked,
                            unsigned &numInputs, unsigned &numOutputs,
                            std::string &error) {
  MLIRContext *ctx = entry.getContext();
  if (!entry.getBody().hasOneBlock()) {
    error = "@" + entry.getName().str() + " must have one block";
    return failure();
  }
  Block &block = entry.front();
  Location loc = entry.getLoc();
  auto memrefOf = [&](Type t) -> MemRefType {
    auto shaped = dyn_cast<ShapedType>(t);
    if (!shaped || !shaped.hasRank() || !shaped.hasStaticShape())
      return nullptr;
    return MemRefType::get(shaped.getShape(), shaped.getElementType());
  };
  numInputs = entry.getNumArguments();
  OpBuilder b(ctx);
  b.setInsertionPointToStart(&block);
  for (BlockArgument arg : block.getArguments()) {
    MemRefType mt = memrefOf(arg.getType());
    if (!mt) {
      error = llvm::formatv("argument {0} of @{1} is {2}: fa-run passes "
                            "statically shaped tensors or memrefs",
                            arg.getArgNumber(), entry.getName(),
                            arg.getType())
                  .str();
      return failure();
    }
    if (isa<MemRefType>(arg.getType()))
      continue;
    Type tensorType = arg.getType();
    arg.setType(mt);
    auto toTensor = bufferization::ToTensorOp::create(
        b, loc, tensorType, arg, /*restrict=*/true, /*writable=*/false);
    arg.replaceAllUsesExcept(toTensor, toTensor);
  }
  auto ret = dyn_cast<func::ReturnOp>(block.getTerminator());
  if (!ret) {
    error = "@" + entry.getName().str() + " must end in func.return";
    return failure();
  }
  // Results: written into trailing arguments.
  b.setInsertionPoint(ret);
  for (Value result : ret.getOperands()) {
    MemRefType mt = memrefOf(result.getType());
    if (!mt) {
      error = "@" + entry.getName().str() +
              " must return statically shaped tensors or memrefs";
      return failure();
    }
    BlockArgument out = block.addArgument(mt, loc);
    if (isa<MemRefType>(result.getType())) {
      memref::CopyOp::create(b, loc, result, out);
    } else {
      auto materialize = bufferization::MaterializeInDestinationOp::create(
          b, loc, result, out);
      materialize.setRestrict(true);
      materialize.setWritable(true);
    }
  }
  ret->setOperands({});
  numOutputs = block.getNumArguments();

  // Each attention's operands and results.
  for (auto [n, op] : llvm::enumerate(attentions)) {
    fa::AttentionOp attention = op;
    if (attention.isFP8()) {
      error = "fa-run checks e4m3 attentions in the direct form only (the "
              "function's arguments are the op's q, k, v, o[, lse], "
              "q_descale, k_descale, v_descale)";
      return failure();
    }
    // Regions of the input are checked by --compare-unraised (specOf).
    if (attention.getKvLengths() || attention.isPaged() ||
        attention.isVarlen() || attention.getSinks() ||
        (attention.hasModifications() && !compareUnraised)) {
      error = "fa-run checks attentions on a KV cache (kv_lengths, pages), "
              "a varlen batch, with sinks or score/mask modifications in the "
              "direct form only (the function's arguments are the op's "
              "operands in order), or regions of the input with "
              "--raise --compare-unraised";
      return failure();
    }
    std::string specError;
    FailureOr<Spec> spec = specOf(attention, specError);
    if (failed(spec)) {
      error = specError;
      return failure();
    }
    Checked c;
    c.spec = *spec;
    std::string where;
    llvm::raw_string_ostream os(where);
    os << "attention " << n + 1 << "/" << attentions.size();
    if (auto fileLoc = dyn_cast<FileLineColLoc>(attention.getLoc()))
      os << " (line " << fileLoc.getLine() << ")";
    if (attentions.size() > 1)
      c.label = where;
    auto capture = [&](Type t) {
      return block.addArgument(memrefOf(t), loc);
    };
    Location opLoc = attention.getLoc();
    BlockArgument q = capture(attention.getQuery().getType());
    BlockArgument k = capture(attention.getKey().getType());
    BlockArgument v = capture(attention.getValue().getType());
    c.q = q.getArgNumber();
    c.k = k.getArgNumber();
    c.v = v.getArgNumber();
    if (attention.hasBufferSemantics()) {
      // q, k, v copied after the op; o and lse written by the op into the
      // capture arguments (NaN-poisoned) and copied to its destinations.
      b.setInsertionPointAfter(attention);
      const Value inputs[] = {attention.getQuery(), attention.getKey(),
                              attention.getValue()};
      const BlockArgument captures[] = {q, k, v};
      for (auto [from, to] : llvm::zip(inputs, captures))
        memref::CopyOp::create(b, opLoc, from, to);
      SmallVector<Value> outs(attention.getOuts());
      for (auto [i, out] : llvm::enumerate(outs)) {
        BlockArgument into = capture(out.getType());
        attention.getOutsMutable()[i].set(into);
        memref::CopyOp::create(b, opLoc, into, out);
        if (i == 0)
          c.o = into.getArgNumber();
        else
          c.lse = into.getArgNumber();
      }
    } else {
      // fa.attention on buffers: q, k, v read through to_buffer (and copied
      // out), o and lse written into the capture arguments.
      b.setInsertionPoint(attention);
      // Named arrays: a braced list inside a range-for's range dangles.
      const Value inputs[] = {attention.getQuery(), attention.getKey(),
                              attention.getValue()};
      const BlockArgument captures[] = {q, k, v};
      SmallVector<Value> operands;
      for (Value from : inputs)
        operands.push_back(bufferization::ToBufferOp::create(
            b, opLoc, memrefOf(from.getType()), from, /*read_only=*/true));
      SmallVector<BlockArgument> outs;
      for (Type t : attention.getResultTypes())
        outs.push_back(capture(t));
      c.o = outs[0].getArgNumber();
      if (outs.size() == 2)
        c.lse = outs[1].getArgNumber();
      // The regions' captures as buffers too; the regions move over.
      SmallVector<Value> capturedBuffers;
      for (Value captured : attention.getCaptures())
        capturedBuffers.push_back(
            isa<TensorType>(captured.getType())
                ? Value(bufferization::ToBufferOp::create(
                      b, opLoc, memrefOf(captured.getType()), captured,
                      /*read_only=*/true))
                : captured);
      auto onBuffers = fa::AttentionOp::create(
          b, opLoc, TypeRange{}, operands[0], operands[1], operands[2],
          ArrayRef<BlockArgument>(outs), ValueRange{}, Value(), Value(),
          Value(), Value(), /*sinks=*/Value(), capturedBuffers,
          attention->getAttrs());
      onBuffers.takeModifications(attention);
      for (auto [from, to] :
           llvm::zip(ArrayRef<Value>(operands).take_front(3), captures))
        memref::CopyOp::create(b, opLoc, from, to);
      SmallVector<Value> results;
      for (auto [t, out] : llvm::zip(attention.getResultTypes(), outs))
        // Not writable: a later in-place update copies instead of
        // overwriting what fa-run checks.
        results.push_back(bufferization::ToTensorOp::create(
            b, opLoc, t, out, /*restrict=*/true, /*writable=*/false));
      (void)onBuffers;
      attention->replaceAllUsesWith(results);
      attention->erase();
    }
    checked.push_back(std::move(c));
  }
  entry.setFunctionType(
      FunctionType::get(ctx, block.getArgumentTypes(), TypeRange{}));
  return success();
}


/// linalg.softmax as its max / sub / exp / sum / div ops, which
/// convert-linalg-to-loops lowers (it does not lower linalg.softmax).
LogicalResult decomposeSoftmaxes(ModuleOp module) {
  SmallVector<linalg::SoftmaxOp> softmaxes;
  module.walk([&](linalg::SoftmaxOp op) { softmaxes.push_back(op); });
  IRRewriter rewriter(module.getContext());
  for (linalg::SoftmaxOp op : softmaxes) {
    rewriter.setInsertionPoint(op);
    FailureOr<SmallVector<Value>> values =
        cast<linalg::AggregatedOpInterface>(op.getOperation())
            .decomposeOperation(rewriter);
    if (failed(values))
      return failure();
    rewriter.replaceOp(op, *values);
  }
  return success();
}

/// --backward: the attention's forward and backward on random inputs
/// (fa::run::runBackward), from the options; what the backward has no form
/// for yet is refused by name. Returns the exit code.
int runBackwardOfOptions(MLIRContext &context) {
  struct Unsupported {
    bool given;
    const char *what;
  };
  const Unsupported unsupported[] = {
      {!inputFile.empty(), "an input file"},
      {raise, "--raise"},
      {!kvLens.empty() || pageSize != 0, "KV caches (--kv-lens, --page-size)"},
      {splitKV != "off", "--split-kv"},
      {dtype == "e4m3" || !fp8.empty() || !kvDtype.empty(),
       "e4m3 inputs (--dtype e4m3, --fp8, --kv-dtype)"},
      {!pipeline.empty(), "--pipeline"},
      {inputKind != "normal", "--inputs"}};
  for (const Unsupported &u : unsupported)
    if (u.given)
      return fail(Twine("--backward: the backward has no form for ") +
                  u.what + " yet");
  if (dtype != "f32" && dtype != "f16" && dtype != "bf16")
    return fail("--dtype must be f32, f16 or bf16 with --backward, got '" +
                dtype + "'");
  fa::run::BackwardProblem problem;
  problem.batch = batch;
  problem.qHeads = qHeads;
  problem.kvHeads = kvHeads ? int64_t(kvHeads) : int64_t(qHeads);
  problem.qLen = qLen;
  problem.kvLen = kvLen ? int64_t(kvLen) : int64_t(qLen);
  problem.headDim = headDim;
  problem.valueHeadDim =
      valueHeadDim ? int64_t(valueHeadDim) : int64_t(headDim);
  problem.dtype = dtype;
  problem.causal = causal;
  problem.sinks = sinks;
  problem.mods = modificationsOfOptions();
  problem.varlenQ.assign(varlenQ.begin(), varlenQ.end());
  problem.varlenKV.assign(varlenKV.begin(), varlenKV.end());
  problem.window = window;
  problem.bottomRight = causalAlign == "bottom-right";
  problem.diagonalOffset = diagonalOffset;
  problem.softcap = softcap;
  problem.scale = scale;
  problem.seed = seed;
  problem.tolerance = tolerance.getNumOccurrences() ? double(tolerance) : 0;
  problem.printModule = printModule;
  std::string tiles;
  if (blockR)
    tiles += " block-r=" + std::to_string(blockR);
  if (blockC)
    tiles += " block-c=" + std::to_string(blockC);
  problem.pipeline = "builtin.module(fa-cpu-pipeline{loop-order=" +
                     loopOrder.getValue() + tiles + "})";
  return fa::run::runBackward(context, problem);
}

/// The module fa-run runs: built from the options, or parsed from the input
/// file (diagnostics through `sourceMgr`). Null, with `error` set, where
/// neither can be had.
OwningOpRef<ModuleOp> loadModule(MLIRContext &context,
                                 llvm::SourceMgr &sourceMgr,
                                 std::string &error) {
  if (inputFile.empty()) {
    std::optional<StringRef> in = fa::mlirElementTypeName(dtype);
    if (!in || dtype == "f8E4M3FN") {
      error = "--dtype must be f32, f16, bf16 or e4m3, got '" + dtype + "'";
      return nullptr;
    }
    if (outDtype.getNumOccurrences() && *in != "f8E4M3FN") {
      error = "--out-dtype: O has the inputs' type (" + dtype +
              "); only --dtype e4m3 takes another";
      return nullptr;
    }
    if (std::optional<std::string> why = fa::checkElementTypes(
            *in, *in == "f8E4M3FN" ? StringRef(outDtype) : *in)) {
      error = "--out-dtype: " + *why;
      return nullptr;
    }
    if (!kvDtype.empty() && kvDtype != "e4m3") {
      error = "--kv-dtype must be e4m3 (or left out: K and V in --dtype), "
              "got '" + kvDtype + "'";
      return nullptr;
    }
    if (!kvDtype.empty() && (*in == "f8E4M3FN" || !fp8.empty())) {
      error = "--kv-dtype e4m3 quantises K and V beside a 16-bit or f32 Q; "
              "--dtype e4m3 and --fp8 quantise Q, K and V together";
      return nullptr;
    }
    if (*in == "f8E4M3FN" && !fp8.empty()) {
      error = "--fp8 quantises f32, f16 or bf16 inputs; --dtype e4m3 "
              "inputs are e4m3 already";
      return nullptr;
    }
    // Named, so that diagnostics point at the options, not at <unknown>.
    return parseSourceString<ModuleOp>(buildModuleText(), &context,
                                       "<fa-run options>");
  }
  auto file = openInputFile(inputFile, &error);
  if (!file)
    return nullptr;
  if (fa::findUpstreamLinalgParserCrash(file->getBuffer()) !=
      StringRef::npos) {
    error = "malformed integer list after 'permutation =' or "
            "'dimensions =': refused because MLIR 22.1.8's linalg "
            "parser crashes on it";
    return nullptr;
  }
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  return parseSourceFile<ModuleOp>(sourceMgr, &context);
}

/// The function fa-run calls and the attentions it checks.
struct Entry {
  std::string name;
  /// Its arguments (the function is replaced during lowering).
  SmallVector<Type> argTypes;
  std::vector<Checked> checked;
  /// The arguments filled with inputs, and those compared after the call.
  unsigned numInputs = 3, numOutputs = 0;
};

/// The entry: the function holding the fa.attention ops (all of them in one
/// function). Two forms:
///  * direct: one buffer-form fa.attention whose operands are the
///    function's arguments (q, k, v, o[, lse]); fa-run fills q, k, v;
///  * capture (anything else: a raised op on values the function computes,
///    tensor arguments and results, several attentions): fa-run fills every
///    argument, and the function is given extra arguments receiving each
///    attention's own q, k, v, o (and lse), against which it is checked
///    (toCaptureForm).
/// Marks it for the C interface; fails with `error` where it cannot be run.
LogicalResult prepareEntry(ModuleOp module, Entry &result,
                           std::string &error) {
  auto refuse = [&](const Twine &why) {
    error = why.str();
    return failure();
  };
  SmallVector<fa::AttentionOp> attentions;
  module->walk([&](fa::AttentionOp op) { attentions.push_back(op); });
  if (attentions.empty() ||
      !attentions.front()->getParentOfType<func::FuncOp>())
    return refuse("the input holds no fa.attention inside a func.func");
  func::FuncOp entry = attentions.front()->getParentOfType<func::FuncOp>();
  for (fa::AttentionOp op : attentions)
    if (op->getParentOfType<func::FuncOp>() != entry)
      return refuse("the fa.attention ops are in more than one function "
                    "(@" +
                    entry.getName() + " and @" +
                    op->getParentOfType<func::FuncOp>().getName() +
                    "): fa-run runs one");
  for (fa::AttentionOp op : attentions)
    if (op->getParentOp() != entry)
      return refuse("an fa.attention is nested in a region of @" +
                    entry.getName() + ": fa-run checks top-level ones");

  result.numOutputs = entry.getNumArguments();
  if (isDirectForm(entry, attentions)) {
    FailureOr<Spec> spec = specOf(attentions.front(), error);
    if (failed(spec))
      return failure();
    for (Type t : entry.getArgumentTypes())
      if (!cast<MemRefType>(t).hasStaticShape() ||
          cast<MemRefType>(t).getRank() > kMaxRank)
        return refuse("@" + entry.getName() +
                      " must take statically shaped memrefs, got " +
                      llvm::formatv("{0}", t).str());
    Checked c;
    c.spec = *spec;
    c.q = 0;
    c.k = 1;
    c.v = 2;
    c.o = 3;
    if (spec->lse)
      c.lse = 4;
    result.checked.push_back(c);
  } else {
    if (inputKind == "rising")
      return refuse("--inputs=rising needs the direct form (the function's "
                    "arguments are the op's q, k, v, o[, lse]): it shapes q "
                    "and k");
    if (failed(toCaptureForm(entry, attentions, result.checked,
                             result.numInputs, result.numOutputs, error)))
      return failure();
    for (Type t : entry.getArgumentTypes())
      if (cast<MemRefType>(t).getRank() > kMaxRank)
        return refuse("@" + entry.getName() + " takes a memref of rank > " +
                      Twine(kMaxRank));
  }
  entry->setAttr("llvm.emit_c_interface", UnitAttr::get(module.getContext()));
  result.name = entry.getName().str();
  result.argTypes.assign(entry.getArgumentTypes().begin(),
                         entry.getArgumentTypes().end());
  return success();
}

/// The lowering: --pipeline, else fa-cpu-pipeline with the options'
/// tiles, loop order and FA3/FA4 passes.
std::string pipelineOfOptions() {
  if (!pipeline.empty())
    return pipeline;
  std::string text = "builtin.module(fa-cpu-pipeline{loop-order=" + loopOrder;
  if (splitKV != "off")
    text += " kv-splits=" + splitKV;
  if (blockR)
    text += " block-r=" + std::to_string(blockR);
  if (blockC)
    text += " block-c=" + std::to_string(blockC);
  if (sramBudget)
    text += " sram-budget=" + std::to_string(sramBudget);
  if (rescaleThreshold.getNumOccurrences())
    text += " rescale-threshold=" + fa::formatDouble(rescaleThreshold);
  if (countRescales)
    text += " count-rescales=true";
  if (polyExp2Degree)
    text += " poly-exp2-degree=" + std::to_string(polyExp2Degree) +
            " poly-exp2-period=" + std::to_string(polyExp2Period);
  if (!fp8.empty())
    text += " fp8=" + fp8;
  if (incoherent)
    text += " incoherent=true";
  text += " probs-scale=" + fa::formatDouble(probsScale);
  return text + "})";
}

/// The entry's arguments on the host: N(0, 1) in its inputs (q, k, v of the
/// direct form, every original argument of the capture form; e4m3 inputs
/// quantised per tensor with their descales; --inputs=rising shapes q and
/// k), the KV cache's lengths and pages, and NaN in the outputs, so that an
/// element left unwritten shows. An error message where it cannot.
std::optional<std::string> makeArguments(Entry &entry,
                                         std::vector<Buffer> &buffers) {
  buffers.resize(entry.argTypes.size());
  for (auto [i, t] : llvm::enumerate(entry.argTypes)) {
    auto mt = cast<MemRefType>(t);
    FailureOr<Elt> e = toElt(mt.getElementType());
    if (failed(e))
      return "unsupported element type " +
             llvm::formatv("{0}", mt.getElementType()).str() +
             " in argument " + std::to_string(i) + " (f32, f16 or bf16)";
    if (boundedElements(mt.getShape()) < 0)
      return "argument " + std::to_string(i) +
             " has more than 2^28 elements: fa-run allocates and checks it "
             "on the host; use smaller shapes";
    buffers[i].elt = *e;
    buffers[i].shape.assign(mt.getShape().begin(), mt.getShape().end());
    buffers[i].allocate();
  }
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (unsigned i = 0; i < entry.numInputs; ++i)
    for (int64_t j = 0; j < buffers[i].size(); ++j)
      buffers[i].set(j, normal(rng));
  Spec &spec = entry.checked.front().spec;
  // e4m3 inputs (direct form): the N(0, 1) draws quantised per tensor,
  // x * 448 / amax, with the descales amax / 448 in their arguments.
  if (std::optional<unsigned> first = spec.descaleArgs) {
    if (inputKind == "rising")
      return std::string("--inputs=rising shapes f32 inputs; not with e4m3");
    double *descales[] = {&spec.qDescale, &spec.kDescale, &spec.vDescale};
    static const char *names[] = {"q_descale", "k_descale", "v_descale"};
    for (unsigned i = spec.firstE4M3Input; i < 3; ++i) {
      std::vector<float> x(buffers[i].size());
      for (float &e : x)
        e = normal(rng);
      float descale =
          fa::quantizeE4M3(x.data(), x.size(), buffers[i].u8.data());
      if (std::optional<std::string> error =
              fa::checkDescale(names[i], descale))
        return error;
      *descales[i] = descale;
      buffers[*first + i - spec.firstE4M3Input].set(0, descale);
    }
  }
  if (inputKind == "rising") {
    // Adversarial for the online softmax: q . k grows with the key index, so
    // every K/V block raises the running max. q = |q|, k_j += c * j.
    for (int64_t j = 0; j < buffers[0].size(); ++j)
      buffers[0].set(j, std::fabs(buffers[0].get(j)) * 0.5f + 0.5f);
    for (int64_t j = 0; j < buffers[1].size(); ++j) {
      int64_t key = (j / spec.d) % spec.nk;
      buffers[1].set(j, buffers[1].get(j) * 0.1f +
                            2.0f * float(key) / float(spec.nk));
    }
  }
  if (std::optional<std::string> error = makeKVCache(spec, buffers, rng))
    return error;
  makeSinks(spec, buffers, rng);
  if (spec.capturesArg) {
    spec.mods.draw(buffers, *spec.capturesArg, spec.batch, spec.hq, spec.nq,
                   spec.nk, rng);
  }
  float nan = std::numeric_limits<float>::quiet_NaN();
  std::optional<unsigned> inputsAfter = spec.descaleArgs  ? spec.descaleArgs
                                        : spec.lengthsArg ? spec.lengthsArg
                                        : spec.tableArg   ? spec.tableArg
                                        : spec.cuArg      ? spec.cuArg
                                        : spec.sinksArg   ? spec.sinksArg
                                                          : spec.capturesArg;
  for (size_t i = entry.numInputs; i < buffers.size(); ++i)
    if (!inputsAfter || i < *inputsAfter)
      for (int64_t j = 0; j < buffers[i].size(); ++j)
        buffers[i].set(j, nan);
  return std::nullopt;
}

/// --compare-unraised: the function as written, lowered without raising
/// (its linalg.softmax decomposed) by `pipelineText`, run on the arguments
/// as they were before the call (`initial`): every argument either run
/// wrote and every result must agree with the raised run's (`buffers`)
/// within the inputs' precision. Prints one line each; false on a mismatch,
/// failure (with `error`) where it cannot run.
FailureOr<bool>
compareWithUnraised(ModuleOp unraised, const Entry &entry,
                    StringRef pipelineText,
                    std::function<llvm::Error(llvm::Module *)> &optimize,
                    const std::vector<Buffer> &initial,
                    const std::vector<Buffer> &buffers, std::string &error) {
  func::FuncOp original = unraised.lookupSymbol<func::FuncOp>(entry.name);
  std::vector<Checked> none;
  unsigned inputs = 0, outputs = 0;
  std::string why;
  if (!original ||
      failed(toCaptureForm(original, {}, none, inputs, outputs, why)) ||
      inputs != entry.numInputs || outputs != entry.numOutputs) {
    error = "--compare-unraised: cannot prepare the unraised @" + entry.name +
            (why.empty() ? "" : ": " + why);
    return failure();
  }
  original->setAttr("llvm.emit_c_interface",
                    UnitAttr::get(unraised.getContext()));
  PassManager unraisedPm(unraised.getContext());
  static_cast<OpPassManager &>(unraisedPm) = *parsePassPipeline(pipelineText);
  if (failed(decomposeSoftmaxes(unraised)) ||
      failed(unraisedPm.run(unraised))) {
    error = "--compare-unraised: lowering the unraised function failed";
    return failure();
  }
  auto unraisedEngine = createEngine(unraised, optimize);
  if (!unraisedEngine) {
    error = "cannot create the execution engine: " +
            llvm::toString(unraisedEngine.takeError());
    return failure();
  }
  std::vector<Buffer> other;
  for (const Buffer &b : initial)
    other.push_back(b.clone());
  if (llvm::Error callError = callEntry(**unraisedEngine, entry.name, other)) {
    error = "cannot call the unraised @" + entry.name + ": " +
            llvm::toString(std::move(callError));
    return failure();
  }
  // The results, and the arguments either run wrote (memref outputs).
  auto written = [&](unsigned i) {
    for (int64_t j = 0; j < initial[i].size(); ++j) {
      float was = initial[i].get(j);
      if (buffers[i].get(j) != was || other[i].get(j) != was)
        return true;
    }
    return false;
  };
  bool ok = true;
  for (unsigned i = 0; i < entry.numOutputs; ++i) {
    if (i < entry.numInputs && !written(i))
      continue;
    double errSq = 0, refSq = 0;
    int64_t nans = 0;
    for (int64_t j = 0; j < buffers[i].size(); ++j) {
      double got = buffers[i].get(j), want = other[i].get(j);
      if (std::isnan(got) != std::isnan(want)) {
        ++nans;
        continue;
      }
      if (std::isnan(got))
        continue;
      errSq += (got - want) * (got - want);
      refSq += want * want;
    }
    double rel = refSq > 0 ? std::sqrt(errSq / refSq) : std::sqrt(errSq);
    // The unraised function computes in its own types (an f16 softmax, an
    // f16 accumulator); the raised one in f32 with f16/bf16 I/O.
    double tol = buffers[i].elt == Elt::F32   ? 1e-4
                 : buffers[i].elt == Elt::F16 ? 1e-2
                                              : 8e-2;
    bool same = nans == 0 && rel <= tol;
    ok = ok && same;
    llvm::outs() << llvm::formatv(
        "fa-run: {0} {1}: raised vs unraised rel_l2_error={2:e2} "
        "nan_mismatches={3} tolerance={4:e1}{5}\n",
        i < entry.numInputs ? "argument" : "result",
        i < entry.numInputs ? i : i - entry.numInputs, rel, nans, tol,
        same ? "" : " MISMATCH");
  }
  return ok;
}
} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  // The compiled code's cf.assert messages (a capture read out of bounds)
  // go to C's stdout just before it aborts: unbuffered, they are not lost
  // when stdout is a pipe.
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  cl::HideUnrelatedOptions(toolOptions);
  fa::setToolVersionPrinter("fa-run");
  cl::ParseCommandLineOptions(argc, argv,
                              "flash-mlir: compile fa.attention for the host, "
                              "run it on random inputs and check it against "
                              "a naive reference\n");
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();

  DialectRegistry registry;
  fa::registerAllFADialects(registry);
  fa::registerAllFAPasses();
  MLIRContext context(registry);
  context.loadAllAvailableDialects();

  if (loopOrder != "fa1" && loopOrder != "fa2")
    return fail("--loop-order must be fa1 or fa2, got '" + loopOrder + "'");
  if (inputKind != "normal" && inputKind != "rising")
    return fail("--inputs must be normal or rising, got '" + inputKind + "'");
  if (std::optional<std::string> error = checkOptions())
    return fail(*error);
  if (backward)
    return runBackwardOfOptions(context);

  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagHandler(sourceMgr, &context);
  std::string error;
  OwningOpRef<ModuleOp> module = loadModule(context, sourceMgr, error);
  if (!module)
    return fail(error.empty() ? "could not parse the input" : error);
  OwningOpRef<ModuleOp> unraised;
  if (compareUnraised) {
    if (!raise)
      return fail("--compare-unraised needs --raise");
    unraised = module->clone();
  }
  if (raise) {
    PassManager raisePm(&context);
    if (failed(parsePassPipeline("func.func(fa-raise-attention)", raisePm)) ||
        failed(raisePm.run(*module)))
      return fail("fa-raise-attention failed");
  }
  // Regions that spell a built-in are checked as the built-in (the CPU
  // pipeline folds them first too); the unraised copy keeps its form.
  {
    PassManager foldPm(&context);
    if (failed(parsePassPipeline("func.func(fa-fold-modifications)", foldPm)) ||
        failed(foldPm.run(*module)))
      return fail("fa-fold-modifications failed");
  }
  if (printModule)
    module->print(llvm::outs());

  Entry entry;
  if (failed(prepareEntry(*module, entry, error)))
    return fail(error);

  // Lower.
  PassManager pm(&context);
  std::string pipelineText = pipelineOfOptions();
  FailureOr<OpPassManager> parsed = parsePassPipeline(pipelineText);
  if (failed(parsed))
    return fail("bad pipeline '" + pipelineText + "'");
  if (parsed->getOpAnchorName() != ModuleOp::getOperationName())
    return fail("the pipeline must be anchored on builtin.module");
  static_cast<OpPassManager &>(pm) = *parsed;
  if (failed(pm.run(*module)))
    return fail("lowering failed");

  // JIT.
  // `transformer` is a function_ref: the std::function must outlive it
  // (AddressSanitizer found the temporary this used to point to).
  std::function<llvm::Error(llvm::Module *)> optimize =
      makeOptimizingTransformer(/*optLevel=*/2, /*sizeLevel=*/0,
                                /*targetMachine=*/nullptr);
  auto maybeEngine = createEngine(*module, optimize);
  if (!maybeEngine)
    return fail("cannot create the execution engine: " +
                llvm::toString(maybeEngine.takeError()));
  std::unique_ptr<ExecutionEngine> &engine = *maybeEngine;

  std::vector<Buffer> buffers;
  if (std::optional<std::string> why = makeArguments(entry, buffers))
    return fail(*why);
  // The arguments as they were before the call, for the unraised run.
  std::vector<Buffer> initial;
  if (compareUnraised)
    for (unsigned i = 0; i < entry.numOutputs; ++i)
      initial.push_back(buffers[i].clone());
  if (llvm::Error callError = callEntry(*engine, entry.name, buffers))
    return fail("cannot call @" + entry.name + ": " +
                llvm::toString(std::move(callError)));

  // Check each attention against the reference of its own operands.
  bool ok = true;
  for (const Checked &c : entry.checked)
    ok = checkAttention(c, buffers) && ok;
  if (countRescales) {
    // memref.global @fa_rescale_counters: rows moved, rows skipped, max P.
    auto counters = engine->lookup("fa_rescale_counters");
    if (!counters) {
      llvm::consumeError(counters.takeError());
      return fail("--count-rescales needs --rescale-threshold");
    }
    const double *c = static_cast<const double *>(*counters);
    double total = c[0] + c[1];
    llvm::outs() << llvm::formatv(
        "fa-run: rescales performed={0} skipped={1} ({2:P} skipped) "
        "max_P={3:f2} (bound 2^threshold={4:f1})\n",
        int64_t(c[0]), int64_t(c[1]), total > 0 ? c[1] / total : 0.0, c[2],
        std::exp2(double(rescaleThreshold)));
  }
  if (compareUnraised) {
    FailureOr<bool> same = compareWithUnraised(
        *unraised, entry, pipelineText, optimize, initial, buffers, error);
    if (failed(same))
      return fail(error);
    ok = ok && *same;
  }
  llvm::outs() << "fa-run: " << (ok ? "PASS" : "FAIL") << "\n";
  return ok ? 0 : 1;
}
