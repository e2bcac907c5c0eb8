//===- Modifications.h - fa-run's score and mask modifications --*- C++ -*-===//
//
// The score_mod and mask_mod regions fa-run writes into the attention it
// generates (--score-mod, --mask-mod), the data it draws for their
// captures, and the naive reference's reading of both (the modified score,
// its derivative for the backward, the mask): shared by the forward's
// checks (fa-run.cpp) and the backward's (Backward.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef FA_TOOLS_FA_RUN_MODIFICATIONS_H
#define FA_TOOLS_FA_RUN_MODIFICATIONS_H

#include "Host.h"

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace mlir::fa::run {

class Modifications {
public:
  /// score_mod: none, alibi (score + slope_h (j - i)), bias (score +
  /// bias[b, h, i, j]), head-scale (score * w_h) or tanh (2 tanh(score /
  /// 2), a cap written as a region); mask_mod: none, document or prefix-lm
  /// (keys below `prefixLen` seen by every query, the rest causally).
  std::string scoreMod = "none", maskMod = "none";
  int64_t prefixLen = 0;

  /// What is wrong with the names, as (flag, message); none if nothing.
  std::optional<std::pair<std::string, std::string>> check() const;
  bool any() const { return scoreMod != "none" || maskMod != "none"; }
  /// Whether the captures hold one row per sequence of a batch (a bias,
  /// document ids), which fa-run draws for B sequences of equal lengths.
  bool perSequenceData() const {
    return scoreMod == "bias" || maskMod == "document";
  }

  /// The captures' names and shapes ("4xf32"), in operand order, for
  /// `batch` sequences of `nq` queries and `keyCapacity` keys, `hq` heads.
  std::vector<std::pair<std::string, std::string>>
  captures(int64_t batch, int64_t hq, int64_t nq, int64_t keyCapacity) const;
  /// The regions' text, to follow the op's types; `captures` as above.
  std::string regions(
      const std::vector<std::pair<std::string, std::string>> &captures) const;

  /// Draws the captures' values into `buffers` from argument `first` on
  /// (shapes as captures() gave them for `nk` = the key capacity) and keeps
  /// them for the reference.
  void draw(std::vector<Buffer> &buffers, unsigned first, int64_t batch,
            int64_t hq, int64_t nq, int64_t nk, std::mt19937 &rng);

  /// score_mod(x, b, h, i, j) (x after scale and softcap) and its
  /// derivative with respect to x.
  double score(double x, int64_t bi, int64_t h, int64_t i, int64_t j) const;
  double slope(double x, int64_t bi, int64_t h, int64_t i, int64_t j) const;
  /// Whether mask_mod leaves key j visible to query i of sequence bi.
  bool keeps(int64_t bi, int64_t i, int64_t j) const;

private:
  int64_t hq = 0, nq = 0, nk = 0;
  std::vector<double> slopes;      // alibi [Hq]
  std::vector<double> bias;        // bias [B, Hq, Nq, Nk]
  std::vector<double> headScales;  // head-scale [Hq]
  std::vector<int64_t> qDoc, kDoc; // document ids [B, Nq], [B, Nk]
};

} // namespace mlir::fa::run

#endif // FA_TOOLS_FA_RUN_MODIFICATIONS_H
