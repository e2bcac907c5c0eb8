"""A launch grid dimension as the lowering writes it (the metadata's "grid":
an integer or a formula over the launch's sizes and the kernel's fields,
e.g. ``min(ceil(Nq / block_r) * Hq * B, SMs * ctas_per_sm)``), evaluated
rather than derived again. The twin of include/fa/Model/GridFormula.h (the
C runtime's); a test checks they agree. Grammar::

    expr   := term (('+' | '-') term)*
    term   := factor (('*' | '/') factor)*
    factor := integer | name | '(' expr ')' | 'ceil' '(' expr ')'
            | 'min' '(' expr ',' expr ')' | 'max' '(' expr ',' expr ')'

Arithmetic is exact (rationals); ceil rounds up; a dimension must come out
a whole number. Failures raise GridFormulaError: a syntax error, a name
without a value (an unknown one, where checked), nesting deeper than 32, a
division by zero, a value whose magnitude passes 2^62, a result that is
not a whole number."""
from fractions import Fraction

_LIMIT = 1 << 62
_MAX_DEPTH = 32


class GridFormulaError(ValueError):
    pass


class _Parser:
    def __init__(self, text, lookup, check_only):
        self.text, self.lookup, self.check_only = text, lookup, check_only
        self.pos = 0
        self.depth = 0

    def fail(self, why):
        raise GridFormulaError(f"grid formula '{self.text}': {why}")

    def skip_space(self):
        while self.pos < len(self.text) and self.text[self.pos] == " ":
            self.pos += 1
        return self.pos

    def accept(self, c):
        if self.skip_space() < len(self.text) and self.text[self.pos] == c:
            self.pos += 1
            return True
        return False

    def make(self, value):
        if abs(value.numerator) > _LIMIT or value.denominator > _LIMIT:
            if self.check_only:
                return Fraction(0)
            self.fail("a value passes 2^62")
        return value

    def divide(self, a, b):
        if b == 0:
            if self.check_only:
                return Fraction(0)
            self.fail("division by zero")
        return self.make(a / b)

    def expr(self):
        left = self.term()
        while True:
            if self.accept("+"):
                left = self.make(left + self.term())
            elif self.accept("-"):
                left = self.make(left - self.term())
            else:
                return left

    def term(self):
        left = self.factor()
        while True:
            if self.accept("*"):
                left = self.make(left * self.factor())
            elif self.accept("/"):
                left = self.divide(left, self.factor())
            else:
                return left

    def factor(self):
        # Hostile metadata must not exhaust the stack.
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            self.fail(f"nested deeper than {_MAX_DEPTH}")
        value = self.primary()
        self.depth -= 1
        return value

    def primary(self):
        text = self.text
        if self.skip_space() >= len(text):
            self.fail("a value is missing at the end")
        c = text[self.pos]
        if c in "0123456789":
            value = 0
            while self.pos < len(text) and text[self.pos] in "0123456789":
                digit = ord(text[self.pos]) - ord("0")
                self.pos += 1
                if value > (_LIMIT - digit) // 10:
                    self.fail("a value passes 2^62")
                value = value * 10 + digit
            return Fraction(value)
        if self.accept("("):
            inner = self.expr()
            if not self.accept(")"):
                self.fail("')' expected")
            return inner
        if not (c.isascii() and (c.isalpha() or c == "_")):
            self.fail(f"unexpected '{c}'")
        start = self.pos
        while self.pos < len(text) and text[self.pos].isascii() and \
                (text[self.pos].isalnum() or text[self.pos] == "_"):
            self.pos += 1
        name = text[start:self.pos]
        if name in ("ceil", "min", "max"):
            if not self.accept("("):
                self.fail(f"'(' expected after {name}")
            first = self.expr()
            if name == "ceil":
                # math.ceil of an exact rational.
                result = self.make(Fraction(-(-first.numerator //
                                              first.denominator)))
            else:
                if not self.accept(","):
                    self.fail(f"',' expected in {name}")
                second = self.expr()
                result = min(first, second) if name == "min" \
                    else max(first, second)
            if not self.accept(")"):
                self.fail(f"')' expected after {name}'s argument")
            return result
        value = self.lookup(name)
        if value is None:
            self.fail(f"unknown name '{name}'" if self.check_only
                      else f"no value for '{name}'")
        if abs(value) > _LIMIT:
            self.fail(f"the value of '{name}' passes 2^62")
        return Fraction(value)


def _run(text, lookup, check_only):
    parser = _Parser(text, lookup, check_only)
    value = parser.expr()
    if parser.skip_space() != len(text):
        parser.fail(f"unexpected '{text[parser.pos]}'")
    if value.denominator != 1 and not check_only:
        raise GridFormulaError(f"the grid formula '{text}' is not a whole "
                               f"number")
    return int(value)


def evaluate(formula, names):
    """The value of a grid dimension: an int as it is, a formula evaluated
    with `names` (a dict of the sizes and the kernel's fields)."""
    if isinstance(formula, int) and not isinstance(formula, bool):
        return formula
    return _run(formula, names.get, False)


def check(formula, known):
    """Whether a grid dimension is an integer or a formula over the names in
    `known`, whatever their values (the metadata readers' check); raises
    GridFormulaError otherwise."""
    if isinstance(formula, int) and not isinstance(formula, bool):
        return
    if not isinstance(formula, str):
        raise GridFormulaError(f"a grid dimension must be an integer or a "
                               f"formula, got {formula!r}")
    _run(formula, lambda name: 1 if name in known else None, True)
