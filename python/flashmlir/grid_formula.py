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
not a whole number. A formula is parsed once (cached) into a tree of
closures that a launch evaluates on its sizes."""
import functools
from fractions import Fraction

_LIMIT = 1 << 62
_MAX_DEPTH = 32


class GridFormulaError(ValueError):
    pass


class _Parser:
    """Parses a formula into (closure, names): closure(sizes, fail) gives
    its value (an int, or a Fraction where a division is not exact)."""

    def __init__(self, text):
        self.text = text
        self.pos = 0
        self.depth = 0
        self.names = set()

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

    def expr(self):
        left = self.term()
        while True:
            if self.accept("+"):
                left = _binary(left, self.term(), lambda a, b, fail: a + b)
            elif self.accept("-"):
                left = _binary(left, self.term(), lambda a, b, fail: a - b)
            else:
                return left

    def term(self):
        left = self.factor()
        while True:
            if self.accept("*"):
                left = _binary(left, self.factor(), lambda a, b, fail: a * b)
            elif self.accept("/"):
                left = _binary(left, self.factor(), _divide)
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
            return lambda sizes, fail: value
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
                result = _unary(first, lambda a: -(-a.numerator //
                                                   a.denominator))
            else:
                if not self.accept(","):
                    self.fail(f"',' expected in {name}")
                second = self.expr()
                pick = min if name == "min" else max
                result = _binary(first, second, lambda a, b, fail: pick(a, b))
            if not self.accept(")"):
                self.fail(f"')' expected after {name}'s argument")
            return result
        self.names.add(name)

        def lookup(sizes, fail):
            value = sizes.get(name)
            if value is None:
                fail(f"no value for '{name}'")
            if abs(value) > _LIMIT:
                fail(f"the value of '{name}' passes 2^62")
            return value
        return lookup


def _checked(value, fail):
    if abs(value) > _LIMIT or (type(value) is Fraction and
                               value.denominator > _LIMIT):
        fail("a value passes 2^62")
    return value


def _binary(left, right, op):
    return lambda sizes, fail: _checked(
        op(left(sizes, fail), right(sizes, fail), fail), fail)


def _unary(inner, op):
    return lambda sizes, fail: _checked(op(inner(sizes, fail)), fail)


def _divide(a, b, fail):
    if b == 0:
        fail("division by zero")
    if type(a) is int and type(b) is int:
        return a // b if a % b == 0 else Fraction(a, b)
    return Fraction(a) / b


@functools.lru_cache(maxsize=256)
def _compile(text):
    parser = _Parser(text)
    tree = parser.expr()
    if parser.skip_space() != len(text):
        parser.fail(f"unexpected '{text[parser.pos]}'")
    return tree, frozenset(parser.names)


def evaluate(formula, names):
    """The value of a grid dimension: an int as it is, a formula evaluated
    with `names` (a dict of the sizes and the kernel's fields)."""
    if type(formula) is int:
        return formula
    if not isinstance(formula, str):
        raise GridFormulaError(f"a grid dimension must be an integer or a "
                               f"formula, got {formula!r}")

    def fail(why):
        raise GridFormulaError(f"grid formula '{formula}': {why}")
    value = _compile(formula)[0](names, fail)
    if type(value) is not int:
        if value.denominator != 1:
            raise GridFormulaError(f"the grid formula '{formula}' is not a "
                                   f"whole number")
        value = int(value)
    return value


def check(formula, known):
    """Whether a grid dimension is an integer or a formula over the names in
    `known`, whatever their values (the metadata readers' check); raises
    GridFormulaError otherwise."""
    if isinstance(formula, int) and not isinstance(formula, bool):
        return
    if not isinstance(formula, str):
        raise GridFormulaError(f"a grid dimension must be an integer or a "
                               f"formula, got {formula!r}")
    _, names = _compile(formula)
    for name in sorted(names):
        if name not in known:
            raise GridFormulaError(f"grid formula '{formula}': unknown name "
                                   f"'{name}'")
