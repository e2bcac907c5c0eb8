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
// The runtimes evaluate it, and the lowering's own host launch emits it as
// index arithmetic (hostLaunchGrid, lib/Conversion/Common/Launch.cpp),
// rather than derive the grid again; both parse it with GridFormulaParser.
// Grammar:
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

/// The magnitude no number, name or intermediate value of a formula may pass.
inline constexpr int64_t kGridFormulaLimit = int64_t(1) << 62;

/// Parses a grid formula (the grammar above) into values of a `Domain`, which
/// says what a number, a name and each operation give:
///
///   struct Domain {
///     using Value = ...;
///     std::string why;  // set by an operation that fails
///     std::optional<Value> number(int64_t);
///     std::optional<Value> name(std::string_view);
///     std::optional<Value> add(const Value &, const Value &);  // also sub,
///     // mul, div, min, max; ceil(const Value &)
///   };
///
/// GridFormula evaluates in exact rationals; the lowering's host launch
/// emits the same formula as IR (lib/Conversion/Common/Launch.cpp). Every
/// failure sets `error` and gives nullopt: a syntax error, nesting deeper
/// than 32, a number past 2^62, or the domain's own reason.
template <typename Domain> class GridFormulaParser {
public:
  using Value = typename Domain::Value;
  static constexpr int64_t kLimit = kGridFormulaLimit;
  static constexpr int kMaxDepth = 32;

  GridFormulaParser(std::string_view text, Domain &domain, std::string &error)
      : text(text), domain(domain), error(error) {}

  /// The value of the whole text.
  std::optional<Value> parse() {
    std::optional<Value> value = expr();
    if (value && skipSpace() != text.size())
      value = fail("unexpected '" + std::string(1, text[pos]) + "'");
    return value;
  }

private:
  std::optional<Value> fail(const std::string &why) {
    if (error.empty())
      error = "grid formula '" + std::string(text) + "': " + why;
    return std::nullopt;
  }

  /// A domain operation's result, its failure reported.
  std::optional<Value> checked(std::optional<Value> value) {
    if (!value)
      return fail(domain.why);
    return value;
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

  std::optional<Value> expr() {
    std::optional<Value> left = term();
    while (left) {
      bool plus = accept('+');
      if (!plus && !accept('-'))
        break;
      std::optional<Value> right = term();
      if (!right)
        return std::nullopt;
      left =
          checked(plus ? domain.add(*left, *right) : domain.sub(*left, *right));
    }
    return left;
  }

  std::optional<Value> term() {
    std::optional<Value> left = factor();
    while (left) {
      bool times = accept('*');
      if (!times && !accept('/'))
        break;
      std::optional<Value> right = factor();
      if (!right)
        return std::nullopt;
      left = checked(times ? domain.mul(*left, *right)
                           : domain.div(*left, *right));
    }
    return left;
  }

  std::optional<Value> factor() {
    // Hostile metadata must not exhaust the stack.
    if (++depth > kMaxDepth)
      return fail("nested deeper than " + std::to_string(kMaxDepth));
    std::optional<Value> value = primary();
    --depth;
    return value;
  }

  std::optional<Value> primary() {
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
      return checked(domain.number(value));
    }
    if (accept('(')) {
      std::optional<Value> inner = expr();
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
      std::optional<Value> first = expr();
      if (!first)
        return std::nullopt;
      std::optional<Value> result;
      if (name == "ceil") {
        result = checked(domain.ceil(*first));
      } else {
        if (!accept(','))
          return fail("',' expected in " + std::string(name));
        std::optional<Value> second = expr();
        if (!second)
          return std::nullopt;
        result = checked(name == "min" ? domain.min(*first, *second)
                                       : domain.max(*first, *second));
      }
      if (result && !accept(')'))
        return fail("')' expected after " + std::string(name) + "'s argument");
      return result;
    }
    return checked(domain.name(name));
  }

  std::string_view text;
  Domain &domain;
  std::string &error;
  size_t pos = 0;
  int depth = 0;
};

/// Evaluates grid formulas in exact rationals. `lookup` gives a name's value
/// (nullopt: the name is not known). Every failure sets `error` and gives
/// nullopt: a syntax error, a name `lookup` has no value for, nesting deeper
/// than 32, a division by zero, a value whose magnitude passes 2^62, a result
/// that is not a whole number.
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
  /// num / den in lowest terms, den > 0.
  struct Rational {
    int64_t num = 0, den = 1;
  };
  static constexpr int64_t kLimit = kGridFormulaLimit;

  /// The parser's domain: exact rationals.
  struct Rationals {
    using Value = Rational;
    const Lookup &lookup;
    /// Checking a formula's form: its values are placeholders.
    bool checkOnly;
    std::string why;

    std::optional<Rational> failure(std::string reason) {
      why = std::move(reason);
      return std::nullopt;
    }

    /// num / den reduced, or a failure where a part passes the limit.
    std::optional<Rational> make(__int128 num, __int128 den) {
      if (den == 0) {
        if (checkOnly)
          return Rational{0, 1};
        return failure("division by zero");
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
      if (num > kLimit || num < -kLimit || den > kLimit)
        return checkOnly ? std::optional<Rational>(Rational{0, 1})
                         : failure("a value passes 2^62");
      return Rational{int64_t(num), int64_t(den)};
    }

    std::optional<Rational> number(int64_t value) { return Rational{value, 1}; }
    std::optional<Rational> name(std::string_view name) {
      std::optional<int64_t> value = lookup(name);
      if (!value)
        return failure(checkOnly ? "unknown name '" + std::string(name) + "'"
                                 : "no value for '" + std::string(name) + "'");
      if (*value > kLimit || *value < -kLimit)
        return failure("the value of '" + std::string(name) + "' passes 2^62");
      return Rational{*value, 1};
    }
    std::optional<Rational> add(const Rational &x, const Rational &y) {
      return make((__int128)x.num * y.den + (__int128)y.num * x.den,
                  (__int128)x.den * y.den);
    }
    std::optional<Rational> sub(const Rational &x, const Rational &y) {
      return make((__int128)x.num * y.den - (__int128)y.num * x.den,
                  (__int128)x.den * y.den);
    }
    std::optional<Rational> mul(const Rational &x, const Rational &y) {
      return make((__int128)x.num * y.num, (__int128)x.den * y.den);
    }
    std::optional<Rational> div(const Rational &x, const Rational &y) {
      return make((__int128)x.num * y.den, (__int128)x.den * y.num);
    }
    std::optional<Rational> ceil(const Rational &x) {
      // ceil(n / d) for d > 0: floor((n + d - 1) / d), n of either sign.
      __int128 n = x.num, d = x.den;
      return make(n >= 0 ? (n + d - 1) / d : -((-n) / d), 1);
    }
    bool less(const Rational &x, const Rational &y) const {
      return (__int128)x.num * y.den < (__int128)y.num * x.den;
    }
    std::optional<Rational> min(const Rational &x, const Rational &y) {
      return less(x, y) ? x : y;
    }
    std::optional<Rational> max(const Rational &x, const Rational &y) {
      return less(x, y) ? y : x;
    }
  };

  static std::optional<int64_t> run(std::string_view text, const Lookup &lookup,
                                    std::string &error, bool checkOnly) {
    Rationals domain{lookup, checkOnly, {}};
    std::optional<Rational> value =
        GridFormulaParser<Rationals>(text, domain, error).parse();
    if (!value)
      return std::nullopt;
    if (value->den != 1 && !checkOnly) {
      error =
          "the grid formula '" + std::string(text) + "' is not a whole number";
      return std::nullopt;
    }
    return value->num;
  }
};

} // namespace mlir::fa::model

#endif // FA_MODEL_GRIDFORMULA_H
