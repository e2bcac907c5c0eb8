//===- Modifications.cpp - fa-run's score and mask modifications ----------===//

#include "Modifications.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <iterator>

using namespace mlir::fa::run;

/// The tanh score_mod's cap: small enough that the scores of N(0, 1)
/// inputs reach its curved part, so its derivative differs from 1.
static constexpr double kTanhCap = 2.0;

std::optional<std::pair<std::string, std::string>>
Modifications::check() const {
  if (!llvm::is_contained({"none", "alibi", "bias", "head-scale", "tanh"},
                          scoreMod))
    return {{"score-mod", "expected none, alibi, bias, head-scale or tanh, "
                          "got '" +
                              scoreMod + "'"}};
  if (!llvm::is_contained({"none", "document", "prefix-lm"}, maskMod))
    return {{"mask-mod",
             "expected none, document or prefix-lm, got '" + maskMod + "'"}};
  if (prefixLen != 0 && maskMod != "prefix-lm")
    return {{"prefix-len", "is for --mask-mod=prefix-lm"}};
  if (prefixLen < 0)
    return {{"prefix-len",
             "expected at least 0 keys, got " + std::to_string(prefixLen)}};
  return std::nullopt;
}

std::vector<std::pair<std::string, std::string>>
Modifications::captures(int64_t batch, int64_t hq, int64_t nq,
                        int64_t keyCapacity) const {
  std::vector<std::pair<std::string, std::string>> list;
  std::string heads = std::to_string(hq) + "xf32";
  if (scoreMod == "alibi")
    list.push_back({"slopes", heads});
  if (scoreMod == "head-scale")
    list.push_back({"scales", heads});
  if (scoreMod == "bias")
    list.push_back({"bias", std::to_string(batch) + "x" + std::to_string(hq) +
                                "x" + std::to_string(nq) + "x" +
                                std::to_string(keyCapacity) + "xf32"});
  if (maskMod == "document") {
    list.push_back(
        {"qdoc", std::to_string(batch) + "x" + std::to_string(nq) + "xi32"});
    list.push_back({"kdoc", std::to_string(batch) + "x" +
                                std::to_string(keyCapacity) + "xi32"});
  }
  return list;
}

std::string Modifications::regions(
    const std::vector<std::pair<std::string, std::string>> &captures) const {
  std::string captureArgs;
  auto shapeOf = [&](const std::string &name) {
    for (auto &[n, shape] : captures)
      if (n == name)
        return shape;
    return std::string();
  };
  for (auto &[name, shape] : captures)
    captureArgs += ", %c_" + name + ": tensor<" + shape + ">";
  auto position = [](const char *var, const char *index) {
    return std::string("    %") + var + "64 = arith.index_cast %" + index +
           " : index to i64\n    %" + var + "f = arith.sitofp %" + var +
           "64 : i64 to f32\n";
  };
  std::string s;
  llvm::raw_string_ostream os(s);
  if (scoreMod != "none")
    os << "  score_mod {\n  ^bb0(%s: f32, %b: index, %h: index, %i: index, "
          "%j: index"
       << captureArgs << "):\n";
  if (scoreMod == "alibi")
    os << "    %slope = tensor.extract %c_slopes[%h] : tensor<"
       << shapeOf("slopes") << ">\n"
       << position("i", "i") << position("j", "j")
       << "    %d = arith.subf %jf, %if : f32\n"
       << "    %r = math.fma %slope, %d, %s : f32\n";
  if (scoreMod == "head-scale")
    os << "    %w = tensor.extract %c_scales[%h] : tensor<" << shapeOf("scales")
       << ">\n"
       << "    %r = arith.mulf %s, %w : f32\n";
  if (scoreMod == "bias")
    os << "    %x = tensor.extract %c_bias[%b, %h, %i, %j] : tensor<"
       << shapeOf("bias") << ">\n"
       << "    %r = arith.addf %s, %x : f32\n";
  if (scoreMod == "tanh")
    os << "    %c = arith.constant " << std::to_string(kTanhCap) << " : f32\n"
       << "    %a = arith.divf %s, %c : f32\n"
       << "    %t = math.tanh %a : f32\n"
       << "    %r = arith.mulf %t, %c : f32\n";
  if (scoreMod != "none")
    os << "    fa.yield %r : f32\n  }";
  if (maskMod == "document")
    os << " mask_mod {\n  ^bb0(%b: index, %h: index, %i: index, %j: index"
       << captureArgs << "):\n"
       << "    %x = tensor.extract %c_qdoc[%b, %i] : tensor<" << shapeOf("qdoc")
       << ">\n"
       << "    %y = tensor.extract %c_kdoc[%b, %j] : tensor<" << shapeOf("kdoc")
       << ">\n"
       << "    %same = arith.cmpi eq, %x, %y : i32\n"
       << "    fa.yield %same : i1\n  }";
  if (maskMod == "prefix-lm")
    os << " mask_mod {\n  ^bb0(%b: index, %h: index, %i: index, %j: index"
       << captureArgs << "):\n"
       << "    %p = arith.constant " << prefixLen << " : index\n"
       << "    %inPrefix = arith.cmpi ult, %j, %p : index\n"
       << "    %causal = arith.cmpi ule, %j, %i : index\n"
       << "    %seen = arith.ori %inPrefix, %causal : i1\n"
       << "    fa.yield %seen : i1\n  }";
  return s;
}

void Modifications::draw(std::vector<Buffer> &buffers, unsigned first,
                         int64_t batch, int64_t heads, int64_t queries,
                         int64_t keys, std::mt19937 &rng) {
  hq = heads;
  nq = queries;
  nk = keys;
  unsigned arg = first;
  if (scoreMod == "alibi") {
    for (int64_t h = 0; h < hq; ++h) {
      slopes.push_back(std::exp2(-8.0 * double(h + 1) / double(hq)));
      buffers[arg].set(h, float(slopes.back()));
    }
    ++arg;
  }
  if (scoreMod == "head-scale") {
    // Temperatures from 0.5 to 1.5.
    for (int64_t h = 0; h < hq; ++h) {
      headScales.push_back(float(0.5 + double(h) / double(hq)));
      buffers[arg].set(h, float(headScales.back()));
    }
    ++arg;
  }
  if (scoreMod == "bias") {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (int64_t e = 0; e < buffers[arg].size(); ++e) {
      float x = normal(rng);
      bias.push_back(x);
      buffers[arg].set(e, x);
    }
    ++arg;
  }
  if (maskMod == "document") {
    // Three documents a sequence: two random cuts, the same proportions
    // for the queries and the keys.
    std::uniform_real_distribution<double> cut(0.0, 1.0);
    for (int64_t bi = 0; bi < batch; ++bi) {
      double cuts[2] = {cut(rng), cut(rng)};
      std::sort(std::begin(cuts), std::end(cuts));
      auto documentOf = [&](int64_t row, int64_t rows) {
        double x = (double(row) + 0.5) / double(rows);
        return int64_t(x >= cuts[0]) + int64_t(x >= cuts[1]);
      };
      for (int64_t i = 0; i < nq; ++i) {
        qDoc.push_back(documentOf(i, nq));
        buffers[arg].setInt(bi * nq + i, qDoc.back());
      }
      for (int64_t j = 0; j < nk; ++j) {
        kDoc.push_back(documentOf(j, nk));
        buffers[arg + 1].setInt(bi * nk + j, kDoc.back());
      }
    }
  }
}

double Modifications::score(double x, int64_t bi, int64_t h, int64_t i,
                            int64_t j) const {
  if (scoreMod == "alibi")
    return x + slopes[h] * double(j - i);
  if (scoreMod == "head-scale")
    return x * headScales[h];
  if (scoreMod == "bias")
    return x + bias[((bi * hq + h) * nq + i) * nk + j];
  if (scoreMod == "tanh")
    return kTanhCap * std::tanh(x / kTanhCap);
  return x;
}

double Modifications::slope(double x, int64_t bi, int64_t h, int64_t i,
                            int64_t j) const {
  if (scoreMod == "head-scale")
    return headScales[h];
  if (scoreMod == "tanh") {
    double t = std::tanh(x / kTanhCap);
    return 1 - t * t;
  }
  return 1; // none, and the additive alibi and bias
}

bool Modifications::keeps(int64_t bi, int64_t i, int64_t j) const {
  if (maskMod == "document")
    return qDoc[bi * nq + i] == kDoc[bi * nk + j];
  if (maskMod == "prefix-lm")
    return j < prefixLen || j <= i;
  return true;
}
