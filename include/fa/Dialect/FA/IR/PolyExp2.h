//===- PolyExp2.h - software exp2 coefficients ------------------*- C++ -*-===//
//
// FlashAttention-4's software exp2: exp2(y) = 2^floor(y) * p(y - floor(y)),
// p of degree 2..5 approximating 2^f on [0, 1). Coefficients (p0 first) are
// relative-error minimax, computed with Lawson's iteratively reweighted least
// squares on 4001 Chebyshev points and rounded to f32. Max relative error of
// the f32 polynomial: 1.7e-3, 7.5e-5, 2.6e-6, 9.0e-8 for degrees 2..5.
// Shared by every lowering of the fa softmax steps so they agree bit for bit.
//
//===----------------------------------------------------------------------===//

#ifndef FA_DIALECT_FA_IR_POLYEXP2_H
#define FA_DIALECT_FA_IR_POLYEXP2_H

namespace mlir::fa {

inline constexpr double kPolyExp2Coefficients[4][6] = {
    {1.0017247200012207, 0.657636284828186, 0.3371894359588623},
    {0.9999251961708069, 0.6958335638046265, 0.22606715559959412,
     0.07802452147006989},
    {1.0000026226043701, 0.6930038332939148, 0.2414427548646927,
     0.052011460065841675, 0.013534167781472206},
    {0.9999999403953552, 0.6931530833244324, 0.24015361070632935,
     0.05582631751894951, 0.00898933969438076, 0.0018775766948238015}};

/// The coefficients p0..p_degree for a degree in [2, 5].
inline const double *polyExp2Coefficients(int64_t degree) {
  return kPolyExp2Coefficients[degree - 2];
}

} // namespace mlir::fa

#endif // FA_DIALECT_FA_IR_POLYEXP2_H
