//===- GridFormula.h - a launch grid dimension as the lowering writes it -*- C++
//-*-===//
//
// Part of the MLIR-free model library (include/fa/Model).
//
// The lowering gives each kernel its launch grid (fagpu::launchGrid, the
// metadata's "grid"): per dimension an integer or a formula over the
// launch's sizes (B, Hq, Nq, SMs, kv_splits, ...) and the kernel's own
// fields (block_r, ctas_per_sm, ...), e.g.
//
//   min(ceil(Nq / block_r) * Hq * B, SMs * ctas_per_sm)
//
// The runtimes evaluate it rather than derive the grid again. Grammar:
//
//   expr   := term (('+' | '-') term)*
//   term   := factor (('*' | '/') factor)*
//   factor := integer | name | '(' expr ')' | 'ceil' '(' expr ')'
//           | 'min' '(' expr ',' expr ')' | 'max' '(' expr ',' expr ')'
//
// Arithmetic is exact (rationals): ceil rounds up, and a dimension must come
// out a whole number. flashmlir.runtime.grid_formula is its Python twin; a
// test checks they agree.
//
//===----------------------------------------------------------------------===//

#ifndef FA_MODEL_GRIDFORMULA_H
#define FA_MODEL_GRIDFORMULA_H

#include <cctype>
#include <cstdint>
#include <functional>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>

namespace mlir::fa::model {

/// Evaluates grid formulas. `lookup` gives a name's value (nullopt: the
/// name is not known). Every failure sets `error` and gives nullopt: a
/// syntax error, a name `lookup` has no value for, nesting deeper than 32, a
/// division by zero, a value whose magnitude passes 2^62, a result that is not
/// a whole number.
class GridFormula {
public:
  using Lookup = std::function<std::optional<int64_t>(std::string_view)>;

  /// The value of `text`.
  static std::optional<int64_t>
  evaluate(std::string_view text, const Lookup &lookup, std::string &error) {
    return run(text, lookup, error, /*checkOnly=*/false);
  }

  /// Whether `text` is a formula over the names `known` accepts, whatever
  /// their values (the metadata readers' check); else false and `error`.
  static bool check(std::string_view text,
                    const std::function<bool(std::string_view)> &known,
                    std::string &error) {
    Lookup ones = [&](std::string_view name) -> std::optional<int64_t> {
      if (!known(name))
        return std::nullopt;
      return 1;
    };
    return run(text, ones, error, /*checkOnly=*/true).has_value();
  }

private:
  static std::optional<int64_t> run(std::string_view text, const Lookup &lookup,
                                    std::string &error, bool checkOnly) {
    GridFormula parser(text, lookup, error);
    parser.checkOnly = checkOnly;
    std::optional<Rational> value = parser.expr();
    if (value && parser.skipSpace() != parser.text.size())
      value = parser.fail("unexpected '" +
                          std::string(1, parser.text[parser.pos]) + "'");
    if (!value)
      return std::nullopt;
    if (value->den != 1 && !checkOnly) {
      error =
          "the grid formula '" + std::string(text) + "' is not a whole number";
      return std::nullopt;
    }
    return value->num;
  }

  /// num / den in lowest terms, den > 0.
  struct Rational {
    int64_t num = 0, den = 1;
  };
  static constexpr int64_t kLimit = int64_t(1) << 62;
  static constexpr int kMaxDepth = 32;

  GridFormula(std::string_view text, const Lookup &lookup, std::string &error)
      : text(text), lookup(lookup), error(error) {}

  std::optional<Rational> fail(const std::string &why) {
    if (error.empty())
      error = "grid formula '" + std::string(text) + "': " + why;
    return std::nullopt;
  }

  size_t skipSpace() {
    while (pos < text.size() && text[pos] == ' ')
      ++pos;
    return pos;
  }

  bool accept(char c) {
    if (skipSpace() < text.size() && text[pos] == c) {
      ++pos;
      return true;
    }
    return false;
  }

  /// num / den reduced, or a failure where a part passes the limit.
  std::optional<Rational> make(__int128 num, __int128 den) {
    if (den == 0) {
      // Checking a formula's form: its values are placeholders.
      if (checkOnly)
        return Rational{0, 1};
      return fail("division by zero");
    }
    if (den < 0) {
      num = -num;
      den = -den;
    }
    __int128 a = num < 0 ? -num : num, b = den;
    while (b) {
      __int128 t = a % b;
      a = b;
      b = t;
    }
    if (a > 1) {
      num /= a;
      den /= a;
    }
    if ((num > kLimit || num < -kLimit || den > kLimit) && !checkOnly)
      return fail("a value passes 2^62");
    if (num > kLimit || num < -kLimit || den > kLimit)
      return Rational{0, 1};
    return Rational{int64_t(num), int64_t(den)};
  }

  std::optional<Rational> expr() {
    std::optional<Rational> left = term();
    while (left) {
      bool plus = accept('+');
      if (!plus && !accept('-'))
        break;
      std::optional<Rational> right = term();
      if (!right)
        return std::nullopt;
      __int128 n = (__int128)left->num * right->den,
               m = (__int128)right->num * left->den;
      left = make(plus ? n + m : n - m, (__int128)left->den * right->den);
    }
    return left;
  }

  std::optional<Rational> term() {
    std::optional<Rational> left = factor();
    while (left) {
      bool times = accept('*');
      if (!times && !accept('/'))
        break;
      std::optional<Rational> right = factor();
      if (!right)
        return std::nullopt;
      left = times ? make((__int128)left->num * right->num,
                          (__int128)left->den * right->den)
                   : make((__int128)left->num * right->den,
                          (__int128)left->den * right->num);
    }
    return left;
  }

  std::optional<Rational> factor() {
    // Hostile metadata must not exhaust the stack.
    if (++depth > kMaxDepth)
      return fail("nested deeper than " + std::to_string(kMaxDepth));
    std::optional<Rational> value = primary();
    --depth;
    return value;
  }

  std::optional<Rational> primary() {
    if (skipSpace() >= text.size())
      return fail("a value is missing at the end");
    char c = text[pos];
    if (std::isdigit((unsigned char)c)) {
      int64_t value = 0;
      while (pos < text.size() && std::isdigit((unsigned char)text[pos])) {
        int digit = text[pos++] - '0';
        if (value > (kLimit - digit) / 10)
          return fail("a value passes 2^62");
        value = value * 10 + digit;
      }
      return Rational{value, 1};
    }
    if (accept('(')) {
      std::optional<Rational> inner = expr();
      if (inner && !accept(')'))
        return fail("')' expected");
      return inner;
    }
    if (!std::isalpha((unsigned char)c) && c != '_')
      return fail("unexpected '" + std::string(1, c) + "'");
    size_t start = pos;
    while (pos < text.size() &&
           (std::isalnum((unsigned char)text[pos]) || text[pos] == '_'))
      ++pos;
    std::string_view name = text.substr(start, pos - start);
    if (name == "ceil" || name == "min" || name == "max") {
      if (!accept('('))
        return fail("'(' expected after " + std::string(name));
      std::optional<Rational> first = expr();
      if (!first)
        return std::nullopt;
      std::optional<Rational> result;
      if (name == "ceil") {
        // ceil(n / d) for d > 0: floor((n + d - 1) / d), n of either sign.
        __int128 n = first->num, d = first->den;
        __int128 q = n >= 0 ? (n + d - 1) / d : -((-n) / d);
        result = make(q, 1);
      } else {
        if (!accept(','))
          return fail("',' expected in " + std::string(name));
        std::optional<Rational> second = expr();
        if (!second)
          return std::nullopt;
        bool less = (__int128)first->num * second->den <
                    (__int128)second->num * first->den;
        result = (name == "min") == less ? first : second;
      }
      if (result && !accept(')'))
        return fail("')' expected after " + std::string(name) + "'s argument");
      return result;
    }
    std::optional<int64_t> value = lookup(name);
    if (!value)
      return fail(checkOnly ? "unknown name '" + std::string(name) + "'"
                            : "no value for '" + std::string(name) + "'");
    if (*value > kLimit || *value < -kLimit)
      return fail("the value of '" + std::string(name) + "' passes 2^62");
    return Rational{*value, 1};
  }

  std::string_view text;
  const Lookup &lookup;
  std::string &error;
  size_t pos = 0;
  int depth = 0;
  bool checkOnly = false;
};

} // namespace mlir::fa::model

#endif // FA_MODEL_GRIDFORMULA_H
