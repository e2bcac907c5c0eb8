"""FlexAttention's score_mod and mask_mod, traced into fa.attention regions.

``flex_attention(query, key, value, score_mod=fn, mask_mod=fn)`` takes the
functions torch's FlexAttention takes,

    score_mod(score, b, h, q_idx, kv_idx) -> score
    mask_mod(b, h, q_idx, kv_idx) -> bool (key kv_idx visible to q_idx)

and traces each into the region of one ``fa.attention`` (the dialect's
``score_mod`` / ``mask_mod``): every argument is a symbolic value, and each
operator (``+ - * / // %``, comparisons, ``& | ^ ~``) and torch function
(``torch.where``, ``torch.tanh``, ``torch.exp``, ...) applied to symbolic
values appends one arith or math op. Indexing a torch tensor the function
closes over (a bias, per-head slopes, document ids) with symbolic indices
makes the tensor a capture of the attention, read by ``tensor.extract``.
What cannot be traced (Python ``if`` / ``and`` / ``or`` on a traced value,
an unsupported torch function, a numpy array indexed by a traced index) is
a CompileError naming it.

On CPU tensors the attention runs on the host: fa-cpu-pipeline lowers it
(the regions, once ``fa-fold-modifications`` has turned those that spell
the causal mask, a sliding window or a softcap into the built-ins, are
inlined at each score) and the JIT runs it, as ``flashmlir.run_cpu`` does.
On CUDA tensors the module is compiled in-process for the GPU
(``compile_module``, cached by its text; the compiler extension is needed,
as for ``flashmlir.compile``): regions that fold become the built-in
masks and softcap, the others are evaluated on every score by the sm_90a
kernel (arith ops and tanh, exp, exp2, log, log2, abs, sqrt, fma), the
captured tensors passed to it as arrays on the query's device.
"""
import functools
import math
import struct

from .errors import CompileError

_F32, _INDEX, _BOOL = "f32", "index", "i1"
_INTEGERS = ("index", "i32", "i64")


def _f32_literal(value):
    """An f32 constant as MLIR's hexadecimal form: exact, and inf/-inf
    included."""
    value = float(value)
    if math.isnan(value):
        raise CompileError("flex_attention: a NaN constant in score_mod or "
                           "mask_mod")
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    return f"0x{bits:08X}"


class _Trace:
    """The ops of one region, in order, and the captures of the attention
    (shared by both regions)."""

    def __init__(self, what, captures):
        self.check_bounds = False
        self.what = what
        self.lines = []
        self.count = 0
        self.captures = captures

    def fail(self, message):
        raise CompileError(f"flex_attention: {self.what}: {message}")

    def emit(self, text, type, bounds=None):
        """Appends an op; `bounds` is an integer result's range (lo, hi),
        both included, where the tracer knows it (None: unknown)."""
        self.count += 1
        name = f"%v{self.count}"
        self.lines.append(f"    {name} = {text}")
        return _Sym(self, name, type, bounds)

    def constant(self, value, type):
        if type == _F32:
            return self.emit(f"arith.constant {_f32_literal(value)} : f32", type)
        if type == _BOOL:
            return self.emit(f"arith.constant {'true' if value else 'false'}",
                             type)
        return self.emit(f"arith.constant {int(value)} : {type}", type,
                         (int(value), int(value)))

    def value(self, x, type=None):
        """x as a traced value: a number becomes a constant (of `type`, or
        of its own kind), a traced value is converted to `type`."""
        if isinstance(x, _Sym):
            if x.trace is not self:
                self.fail("a traced value of the other function is used here")
            return self.convert(x, type) if type else x
        if isinstance(x, bool) or type_name(x) == "bool_":
            return self.convert(self.constant(bool(x), _BOOL), type or _BOOL)
        if isinstance(x, int) or type_name(x).startswith("int"):
            return self.constant(int(x), type or _INDEX)
        if isinstance(x, float) or type_name(x).startswith("float"):
            if type and type != _F32:
                self.fail(f"a float constant {x!r} where an integer is "
                          f"needed")
            return self.constant(float(x), _F32)
        if type_name(x) == "Tensor" and x.dim() == 0:
            # A 0-d tensor (a captured one indexed by constants) is a
            # capture of its own, read whole.
            value = _extract(self, x, ())
            return self.convert(value, type) if type else value
        self.fail(f"cannot trace a value of type {type_name(x)}")

    def convert(self, x, type):
        if x.type == type:
            return x
        if type == _F32:
            if x.type == _INDEX:
                x = self.emit(f"arith.index_cast {x.name} : index to i64",
                              "i64")
            if x.type == _BOOL:
                return self.emit(f"arith.uitofp {x.name} : i1 to f32", _F32)
            return self.emit(f"arith.sitofp {x.name} : {x.type} to f32", _F32)
        if type in _INTEGERS and x.type in _INTEGERS:
            if _INDEX in (type, x.type):
                return self.emit(
                    f"arith.index_cast {x.name} : {x.type} to {type}", type,
                    x.bounds)
            op = "extsi" if type == "i64" else "trunci"
            return self.emit(f"arith.{op} {x.name} : {x.type} to {type}", type,
                             x.bounds)
        self.fail(f"a {x.type} value where a {type} one is needed")

    def common(self, a, b):
        """Both operands in one type: f32 if either is, else an integer
        type (index where they differ), i1 if both are."""
        if any(isinstance(x, float) or type_name(x).startswith("float")
               for x in (a, b)):
            return _F32
        a, b = (x if isinstance(x, _Sym) else None for x in (a, b))
        types = {x.type for x in (a, b) if x is not None}
        if _F32 in types:
            return _F32
        if types == {_BOOL}:
            return _BOOL
        types.discard(_BOOL)
        return types.pop() if len(types) == 1 else _INDEX


def type_name(x):
    return type(x).__name__


_FLOAT_CMP = {"lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge",
              "eq": "oeq", "ne": "une"}
_INT_CMP = {"lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge", "eq": "eq",
            "ne": "ne"}

# torch functions of one float operand, and the math op each becomes.
_UNARY = {"tanh": "math.tanh", "exp": "math.exp", "exp2": "math.exp2",
          "log": "math.log", "log2": "math.log2", "sqrt": "math.sqrt",
          "rsqrt": "math.rsqrt", "sin": "math.sin", "cos": "math.cos",
          "floor": "math.floor", "ceil": "math.ceil",
          "round": "math.roundeven", "erf": "math.erf"}


def _range_of(op, a, b):
    """The range of integer op `op` on operands of ranges a and b (None:
    unknown), the bounds the tracer checks captured reads against."""
    if a is None or b is None:
        return None
    if op == "addi":
        return a[0] + b[0], a[1] + b[1]
    if op == "subi":
        return a[0] - b[1], a[1] - b[0]
    if op == "muli":
        corners = [x * y for x in a for y in b]
        return min(corners), max(corners)
    if op == "floordivsi" and b[0] == b[1] and b[0] > 0:
        return a[0] // b[0], a[1] // b[0]
    if op == "maxsi":
        return max(a[0], b[0]), max(a[1], b[1])
    if op == "minsi":
        return min(a[0], b[0]), min(a[1], b[1])
    return None


class _Sym:
    """A traced SSA value of a score_mod or mask_mod body; an integer one
    may know its range (`bounds`, both ends included)."""
    __slots__ = ("trace", "name", "type", "bounds")
    __hash__ = object.__hash__

    def __init__(self, trace, name, type, bounds=None):
        self.trace, self.name, self.type = trace, name, type
        self.bounds = bounds

    # Python control flow cannot depend on a traced value.
    def __bool__(self):
        self.trace.fail("Python control flow on a traced value (if, and, "
                        "or, not, a chained comparison): use torch.where, "
                        "& and | instead")

    def __index__(self):
        self.trace.fail("a traced value is used as a Python integer (a list "
                        "or numpy array indexed by it?): index torch tensors "
                        "only")

    __int__ = __float__ = __index__

    def _arith(self, other, float_op, int_op, reverse=False, to_float=False):
        t = self.trace
        type = _F32 if to_float else t.common(self, other)
        if type == _BOOL:
            t.fail(f"arithmetic ({float_op}) on booleans")
        a, b = t.value(self, type), t.value(other, type)
        if reverse:
            a, b = b, a
        op = float_op if type == _F32 else int_op
        bounds = None if type == _F32 else _range_of(op, a.bounds, b.bounds)
        return t.emit(f"arith.{op} {a.name}, {b.name} : {type}", type, bounds)

    def __add__(self, o): return self._arith(o, "addf", "addi")
    def __radd__(self, o): return self._arith(o, "addf", "addi", True)
    def __sub__(self, o): return self._arith(o, "subf", "subi")
    def __rsub__(self, o): return self._arith(o, "subf", "subi", True)
    def __mul__(self, o): return self._arith(o, "mulf", "muli")
    def __rmul__(self, o): return self._arith(o, "mulf", "muli", True)

    def __truediv__(self, o):
        return self._arith(o, "divf", None, to_float=True)

    def __rtruediv__(self, o):
        return self._arith(o, "divf", None, True, to_float=True)

    def __floordiv__(self, o):
        if self.trace.common(self, o) == _F32:
            return _math("math.floor", self / o)
        return self._arith(o, None, "floordivsi")

    def __rfloordiv__(self, o):
        if self.trace.common(self, o) == _F32:
            return _math("math.floor", o / self)
        return self._arith(o, None, "floordivsi", True)

    def __mod__(self, o):
        # Python's and torch's remainder takes the divisor's sign:
        # a - floor(a / b) * b, in [0, c - 1] for a divisor c > 0.
        r = self - (self // o) * o
        if r.type != _F32 and not isinstance(o, _Sym) and int(o) > 0:
            r.bounds = (0, int(o) - 1)
        return r

    def __neg__(self):
        t = self.trace
        if self.type == _F32:
            return t.emit(f"arith.negf {self.name} : f32", _F32)
        return 0 - self

    def __abs__(self):
        if self.type == _F32:
            return _math("math.absf", self)
        bounds = None
        if self.bounds:
            lo, hi = self.bounds
            bounds = ((lo, hi) if lo >= 0 else (-hi, -lo) if hi <= 0
                      else (0, max(-lo, hi)))
        return self.trace.emit(f"math.absi {self.name} : {self.type}",
                               self.type, bounds)

    def _compare(self, other, kind):
        t = self.trace
        type = t.common(self, other)
        if type == _BOOL and kind not in ("eq", "ne"):
            t.fail("an ordering comparison of booleans")
        a, b = t.value(self, type), t.value(other, type)
        if type == _F32:
            return t.emit(f"arith.cmpf {_FLOAT_CMP[kind]}, {a.name}, {b.name} "
                          f": f32", _BOOL)
        return t.emit(f"arith.cmpi {_INT_CMP[kind]}, {a.name}, {b.name} : "
                      f"{type}", _BOOL)

    def __lt__(self, o): return self._compare(o, "lt")
    def __le__(self, o): return self._compare(o, "le")
    def __gt__(self, o): return self._compare(o, "gt")
    def __ge__(self, o): return self._compare(o, "ge")
    def __eq__(self, o): return self._compare(o, "eq")
    def __ne__(self, o): return self._compare(o, "ne")

    def _logic(self, other, op, reverse=False):
        t = self.trace
        type = t.common(self, other)
        if type == _F32:
            t.fail(f"a bitwise operation ({op}) on floats")
        a, b = t.value(self, type), t.value(other, type)
        if reverse:
            a, b = b, a
        return t.emit(f"arith.{op} {a.name}, {b.name} : {type}", type)

    def __and__(self, o): return self._logic(o, "andi")
    def __rand__(self, o): return self._logic(o, "andi", True)
    def __or__(self, o): return self._logic(o, "ori")
    def __ror__(self, o): return self._logic(o, "ori", True)
    def __xor__(self, o): return self._logic(o, "xori")
    def __rxor__(self, o): return self._logic(o, "xori", True)

    def __invert__(self):
        if self.type != _BOOL:
            self.trace.fail("~ on a non-boolean value")
        return self._logic(True, "xori")

    # The tensor methods a score_mod may call on its score.
    def tanh(self): return _math("math.tanh", self)
    def exp(self): return _math("math.exp", self)
    def log(self): return _math("math.log", self)
    def sqrt(self): return _math("math.sqrt", self)
    def abs(self): return abs(self)

    def sigmoid(self):
        return 1.0 / (1.0 + _math("math.exp", -self))

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return _torch_function(func, args, kwargs or {})


def _math(op, x):
    t = x.trace
    x = t.value(x, _F32)
    return t.emit(f"{op} {x.name} : f32", _F32)


def _trace_of(args):
    for a in args:
        if isinstance(a, _Sym):
            return a.trace
        if isinstance(a, (tuple, list)):
            found = _trace_of(a)
            if found:
                return found
    return None


def _torch_function(func, args, kwargs):
    """A torch function called with traced values: its op, or a
    CompileError naming it."""
    import torch
    t = _trace_of(list(args) + list(kwargs.values()))
    name = getattr(func, "__name__", str(func))
    if func is torch.Tensor.__getitem__:
        return _extract(t, args[0], args[1])
    if kwargs:
        t.fail(f"torch.{name} with keyword arguments "
               f"({', '.join(kwargs)}) is not traced")
    if func is torch.where:
        if len(args) != 3:
            t.fail("torch.where(condition, x, y) takes three arguments")
        c = t.value(args[0], _BOOL)
        type = t.common(args[1], args[2])
        if type == _BOOL and not all(isinstance(a, _Sym) for a in args[1:]):
            type = _BOOL
        a, b = t.value(args[1], type), t.value(args[2], type)
        bounds = None
        if a.bounds and b.bounds:
            bounds = (min(a.bounds[0], b.bounds[0]),
                      max(a.bounds[1], b.bounds[1]))
        return t.emit(f"arith.select {c.name}, {a.name}, {b.name} : {type}",
                      type, bounds)
    if name in _UNARY and len(args) == 1:
        return _math(_UNARY[name], args[0])
    if name in ("abs", "neg", "negative") and len(args) == 1:
        return abs(args[0]) if name == "abs" else -args[0]
    if name == "sigmoid" and len(args) == 1:
        return t.value(args[0], _F32).sigmoid()
    if name in ("maximum", "minimum", "max", "min") and len(args) == 2:
        type = t.common(*args)
        a, b = t.value(args[0], type), t.value(args[1], type)
        if type == _F32:
            op = "maximumf" if name.startswith("max") else "minimumf"
        else:
            op = "maxsi" if name.startswith("max") else "minsi"
        return t.emit(f"arith.{op} {a.name}, {b.name} : {type}", type,
                      _range_of(op, a.bounds, b.bounds))
    if name == "clamp" and len(args) in (2, 3):
        x = args[0]
        if args[1] is not None:
            x = _torch_function(torch.maximum, (x, args[1]), {})
        if len(args) == 3 and args[2] is not None:
            x = _torch_function(torch.minimum, (x, args[2]), {})
        return x
    if name in ("logical_and", "logical_or", "logical_xor") and len(args) == 2:
        a, b = (t.value(x, _BOOL) for x in args)
        op = {"logical_and": "andi", "logical_or": "ori",
              "logical_xor": "xori"}[name]
        return a._logic(b, op)
    if name == "logical_not" and len(args) == 1:
        return ~t.value(args[0], _BOOL)
    t.fail(f"torch.{name} is not traced into a region (traced: torch.where, "
           f"{', '.join('torch.' + n for n in sorted(_UNARY))}, torch.abs, "
           f"torch.sigmoid, torch.maximum, torch.minimum, torch.clamp, "
           f"torch.logical_and/or/xor/not, arithmetic, comparisons, & | ^ ~, "
           f"indexing captured tensors)")


# Captured tensors' dtypes: the element type of their memref, and the numpy
# dtype they are handed over in (16-bit floats widened, 8/16-bit and
# boolean integers as int32; a boolean element is then compared with 0).
_CAPTURE_TYPES = {"float32": ("f32", "float32"), "float16": ("f32", "float32"),
                  "bfloat16": ("f32", "float32"), "float64": ("f32", "float32"),
                  "int32": ("i32", "int32"), "int64": ("i64", "int64"),
                  "int16": ("i32", "int32"), "int8": ("i32", "int32"),
                  "uint8": ("i32", "int32"), "bool": ("i32", "int32")}


def _extract(t, tensor, index):
    """tensor[index] with traced indices: the tensor becomes a capture
    (once, by identity) and one element of it is read."""
    dtype = str(tensor.dtype).replace("torch.", "")
    if dtype not in _CAPTURE_TYPES:
        t.fail(f"a captured tensor of dtype {dtype} (float, int or bool "
               f"tensors are captured)")
    index = index if isinstance(index, tuple) else (index,)
    if any(i is Ellipsis or i is None or isinstance(i, slice) for i in index):
        t.fail("a captured tensor is indexed with a slice, None or ...: "
               "index it down to one element")
    if len(index) != tensor.dim():
        t.fail(f"a captured tensor of {tensor.dim()} dimensions is indexed "
               f"with {len(index)} indices: index it down to one element")
    for i, size in zip(index, tensor.shape):
        if not isinstance(i, _Sym) and not 0 <= int(i) < size:
            t.fail(f"a constant index {int(i)} out of range for a captured "
                   f"dimension of {size}")
    if tensor.device.type != "cpu" or tensor.requires_grad:
        tensor = tensor.detach().cpu()
    captures = t.captures
    for position, (captured, _, _) in enumerate(captures):
        if captured is tensor:
            break
    else:
        element, _ = _CAPTURE_TYPES[dtype]
        shape = "x".join(str(d) for d in tensor.shape)
        captures.append((tensor, element,
                         f"tensor<{shape + 'x' if shape else ''}{element}>"))
        position = len(captures) - 1
    _, element, type = captures[position]
    indices = [t.value(i, _INDEX) for i in index]
    if t.check_bounds:
        # Every read in range, for every (b, h, q_idx, kv_idx) of the call:
        # the index's range, from the arguments' and the captured integer
        # values' ranges, within the dimension.
        for k, (i, size) in enumerate(zip(indices, tensor.shape)):
            if i.bounds is None:
                t.fail(f"index {k} of a captured tensor of shape "
                       f"{list(tensor.shape)} cannot be bounded (an index "
                       f"computed by an op the tracer has no range for)")
            if i.bounds[0] < 0 or i.bounds[1] >= size:
                t.fail(f"index {k} of a captured tensor of shape "
                       f"{list(tensor.shape)} takes values in "
                       f"[{i.bounds[0]}, {i.bounds[1]}] for this call's "
                       f"shapes: out of range")
    bounds = None
    if element != _F32 and tensor.numel() > 0:
        bounds = (int(tensor.min()), int(tensor.max()))
    value = t.emit(f"tensor.extract %cap{position}"
                   f"[{', '.join(i.name for i in indices)}] : {type}",
                   element, bounds)
    if dtype == "bool":
        return value != 0
    return value


_SCORE_ARGS = ("%score: f32", "%b: index", "%h: index", "%q_idx: index",
               "%kv_idx: index")


def _trace(fn, what, leading, result, captures, shape):
    t = _Trace(what, captures)
    # The index arguments' ranges: (B, Hq, Nq, Nk) of the call.
    t.check_bounds = shape is not None
    ranges = [None] * (len(leading) - 4) + (
        [(0, n - 1) for n in shape] if shape else [None] * 4)
    args = [_Sym(t, arg.split(":")[0], arg.split(": ")[1], r)
            for arg, r in zip(leading, ranges)]
    out = fn(*args)
    if result == _BOOL and isinstance(out, _Sym) and out.type != _BOOL:
        t.fail(f"returns a {out.type} value; a mask_mod returns a boolean "
               f"(key visible)")
    if type_name(out) == "Tensor":
        t.fail("returns a tensor, not a traced value (a constant tensor, or "
               "a computation on a captured tensor that no traced index "
               "reads)")
    out = t.value(out, result)
    return t, out


def trace_regions(score_mod=None, mask_mod=None, shape=None):
    """The regions' text (to follow fa.attention's types) and the captured
    tensors (CPU, in the regions' capture order) of FlexAttention's
    score_mod and mask_mod; ("", []) for neither. With `shape` = (B, Hq,
    Nq, Nk), every read of a captured tensor is checked in range for those
    index ranges (a CompileError otherwise)."""
    captures = []
    traced = []
    if score_mod is not None:
        if not callable(score_mod):
            raise CompileError(f"flex_attention: score_mod must be callable, "
                               f"got {type_name(score_mod)}")
        traced.append(("score_mod", _trace(score_mod, "score_mod",
                                           _SCORE_ARGS, _F32, captures,
                                           shape)))
    if mask_mod is not None:
        if not callable(mask_mod):
            raise CompileError(f"flex_attention: mask_mod must be callable, "
                               f"got {type_name(mask_mod)}")
        traced.append(("mask_mod", _trace(mask_mod, "mask_mod",
                                          _SCORE_ARGS[1:], _BOOL, captures,
                                          shape)))
    capture_args = "".join(f", %cap{i}: {type}"
                           for i, (_, _, type) in enumerate(captures))
    text = []
    for kind, (t, out) in traced:
        leading = _SCORE_ARGS if kind == "score_mod" else _SCORE_ARGS[1:]
        text.append(f"  {kind} {{\n  ^bb0({', '.join(leading)}{capture_args}):"
                    f"\n" + "\n".join(t.lines) +
                    ("\n" if t.lines else "") +
                    f"    fa.yield {out.name} : {out.type}\n  }}")
    return " ".join(text), [c[0] for c in captures]


def flex_module_text(regions, captures, head_dim, value_head_dim, dtype,
                     scale=None, return_lse=False):
    """The module compile_module takes for flex_attention on a GPU: one
    fa.attention on [?, ?, ?, D] tensors of `dtype` (f16 or bf16) with the
    traced regions, its captures as the function's arguments."""
    from .compiler import _f32_text
    t = f"tensor<?x?x?x{head_dim}x{dtype}>"
    tv = f"tensor<?x?x?x{value_head_dim}x{dtype}>"
    tl = "tensor<?x?x?xf32>"
    types = [_CAPTURE_TYPES[str(c.dtype).replace("torch.", "")][0]
             for c in captures]
    capture_types = [
        "tensor<" + "".join(f"{d}x" for d in c.shape) + f"{e}>"
        for c, e in zip(captures, types)]
    args = "".join(f", %input{i}: {ct}" for i, ct in enumerate(capture_types))
    operands = (f" captures({', '.join(f'%input{i}' for i in range(len(captures)))}"
                f" : {', '.join(capture_types)})" if captures else "")
    attrs = f" {{scale = {_f32_text(scale)} : f32}}" if scale is not None \
        else ""
    results = f"{tv}, {tl}" if return_lse else tv
    values = "%o, %lse" if return_lse else "%o"
    return (f"func.func @flex(%q: {t}, %k: {t}, %v: {tv}{args}) -> "
            f"({results}) {{\n  {values} = fa.attention %q, %k, %v{operands}"
            f"{attrs} : {t}, {t}, {tv} -> {results}\n{regions}\n"
            f"  return {values} : {results}\n}}\n")


class BlockMask:
    """Block sparsity of a mask_mod, for flex_attention on a GPU (made by
    create_block_mask; FlexAttention's BlockMask plays this part there).
    For each (batch, query head, query tile of block_size rows) it keeps
    [first key, end key): the hull of the keys the mask lets through
    anywhere in the tile's rows ((0, 0) where it lets none through), and
    [full first, full end): the longest run of keys it lets through to
    every row of the tile ((0, 0) where there is none). The kernel reads
    only the K/V blocks that meet the hull, and skips the mask_mod on the
    whole blocks inside the full run; the result is the same as without
    them, only the reads and the work change. mask_mod is the function it
    was made from, which flex_attention compiles."""

    def __init__(self, key_ranges, block_size, q_len, kv_len, mask_mod):
        self.key_ranges = key_ranges  # int32 [B | 1, H | 1, tiles, 4]
        self.block_size = block_size
        self.q_len, self.kv_len = q_len, kv_len
        self.mask_mod = mask_mod
        self._expanded = {}

    def __repr__(self):
        b, h, tiles, _ = self.key_ranges.shape
        return (f"BlockMask(B={b}, H={h}, Q_LEN={self.q_len}, "
                f"KV_LEN={self.kv_len}, BLOCK_SIZE={self.block_size}, "
                f"tiles={tiles})")

    def _covered(self, first):
        """The fraction of (query tile, key) pairs inside the ranges that
        start at entry `first` of each tile (0: the hulls, 2: the full
        runs)."""
        ranges = self.key_ranges.long()
        keys = (ranges[..., first + 1] - ranges[..., first]).clamp(min=0)
        return float(keys.sum()) / (keys.numel() * self.kv_len)

    def sparsity(self):
        """The fraction of (query row, key) pairs outside the tiles' hulls:
        the share of the attention's work the kernel leaves out."""
        return 1.0 - self._covered(0)

    def full_fraction(self):
        """The fraction of (query row, key) pairs in the tiles' full runs:
        the share of the work that skips the mask_mod."""
        return self._covered(2)

    def ranges_for(self, batch, heads, block_r, device):
        """The kernel's key_ranges for a launch of `batch` sequences and
        `heads` query heads whose tiles are block_r rows: contiguous int32
        [batch, heads, tiles, 4] on `device` (kept for the next call)."""
        b, h, tiles, _ = self.key_ranges.shape
        if block_r != self.block_size:
            raise CompileError(
                f"flex_attention: the kernel's query tiles are {block_r} "
                f"rows; make the block mask with "
                f"create_block_mask(..., BLOCK_SIZE={block_r}) (it has "
                f"{self.block_size})")
        if b not in (1, batch) or h not in (1, heads):
            raise CompileError(
                f"flex_attention: the block mask is for B={b}, H={h}; the "
                f"call has B={batch}, H={heads} (a block mask made with B "
                f"or H None broadcasts)")
        key = (batch, heads, str(device))
        if key not in self._expanded:
            self._expanded[key] = self.key_ranges.to(device).expand(
                batch, heads, tiles, 4).contiguous()
        return self._expanded[key]


def create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN, device="cuda",
                      BLOCK_SIZE=128):
    """FlexAttention's create_block_mask: mask_mod(b, h, q_idx, kv_idx)
    evaluated on torch index tensors (broadcasting: b [B, 1, 1, 1], h
    [1, H, 1, 1], q_idx [1, 1, rows, 1], kv_idx [1, 1, 1, KV_LEN]) over
    every pair, a chunk of query rows at a time, on `device`; B or H None:
    the mask does not depend on it (one entry, broadcast at the call).
    BLOCK_SIZE is the query tile of the kernel that reads it (128 for the
    sm_90a kernels of 16-bit inputs). Returns a BlockMask for
    flex_attention(..., block_mask=). A mask_mod that the tensors cannot
    evaluate (Python control flow on an index) is a CompileError."""
    import torch
    if not callable(mask_mod):
        raise CompileError(f"create_block_mask: mask_mod must be callable, "
                           f"got {type_name(mask_mod)}")
    for name, value, optional in (("B", B, True), ("H", H, True),
                                  ("Q_LEN", Q_LEN, False),
                                  ("KV_LEN", KV_LEN, False),
                                  ("BLOCK_SIZE", BLOCK_SIZE, False)):
        if value is None and optional:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or \
                not 1 <= value < 2**31:
            raise CompileError(f"create_block_mask: {name} must be an int "
                               f"in [1, 2^31){' or None' if optional else ''}"
                               f", got {value!r}")
    batch, heads = B or 1, H or 1
    tiles = -(-Q_LEN // BLOCK_SIZE)
    # Query rows a chunk: whole tiles, about 2^26 pairs a chunk.
    per_row = batch * heads * KV_LEN
    chunk_tiles = max(1, (1 << 26) // max(1, per_row * BLOCK_SIZE))
    b = torch.arange(batch, device=device).view(batch, 1, 1, 1)
    h = torch.arange(heads, device=device).view(1, heads, 1, 1)
    kv = torch.arange(KV_LEN, device=device).view(1, 1, 1, KV_LEN)
    ranges = torch.zeros(batch, heads, tiles, 4, dtype=torch.int32,
                         device=device)
    for t0 in range(0, tiles, chunk_tiles):
        t1 = min(tiles, t0 + chunk_tiles)
        rows = min(Q_LEN, t1 * BLOCK_SIZE) - t0 * BLOCK_SIZE
        q = torch.arange(t0 * BLOCK_SIZE, t0 * BLOCK_SIZE + rows,
                         device=device).view(1, 1, rows, 1)
        try:
            visible = mask_mod(b, h, q, kv)
        except Exception as e:  # e.g. Python `if` on an index tensor
            raise CompileError(
                f"create_block_mask: mask_mod could not be evaluated on "
                f"index tensors ({type(e).__name__}: {e})") from e
        visible = torch.as_tensor(visible, device=device).to(torch.bool)
        visible = visible.expand(batch, heads, rows, KV_LEN)
        pad = (t1 - t0) * BLOCK_SIZE - rows
        if pad:
            visible = torch.cat([visible, visible.new_zeros(
                batch, heads, pad, KV_LEN)], dim=2)
        rows_of = visible.view(batch, heads, t1 - t0, BLOCK_SIZE, KV_LEN)
        seen = rows_of.any(dim=3)
        # Keys every (real) row of the tile sees: padding rows count as
        # seeing all.
        if pad:
            real = (torch.arange((t1 - t0) * BLOCK_SIZE, device=device) <
                    rows).view(1, 1, t1 - t0, BLOCK_SIZE, 1)
            rows_of = rows_of | ~real
        full = rows_of.all(dim=3)
        any_key = seen.any(dim=-1)
        first = seen.to(torch.int32).argmax(dim=-1)
        last = KV_LEN - 1 - seen.flip(-1).to(torch.int32).argmax(dim=-1)
        zero = torch.zeros_like(first)
        ranges[:, :, t0:t1, 0] = torch.where(any_key, first, zero).to(
            torch.int32)
        ranges[:, :, t0:t1, 1] = torch.where(any_key, last + 1, zero).to(
            torch.int32)
        # The longest run of full keys: at key j a run has lasted j - (the
        # last key before j that is not full); its end is after the key
        # where that is largest.
        index = torch.arange(KV_LEN, device=device).expand_as(full)
        breaks = torch.where(full, torch.full_like(index, -1), index)
        last_break = torch.cummax(breaks, dim=-1).values
        run = torch.where(full, index - last_break, torch.zeros_like(index))
        length, run_end = run.max(dim=-1)
        ranges[:, :, t0:t1, 2] = (run_end + 1 - length).to(torch.int32) * \
            (length > 0)
        ranges[:, :, t0:t1, 3] = (run_end + 1).to(torch.int32) * (length > 0)
    return BlockMask(ranges, BLOCK_SIZE, Q_LEN, KV_LEN, mask_mod)


def _flex_on_gpu(query, key, value, regions, captures, scale, return_lse,
                 block_mask=None):
    """flex_attention on CUDA tensors: the module compiled (cached by its
    text) for the tensors' GPU and launched with the captures. Regions that
    use an op the kernel does not lower are a CompileError naming it."""
    from . import _arch_and_dtype
    from .compiler import compile_module
    arch, dtype = _arch_and_dtype(query)
    if dtype not in ("f16", "bf16"):
        raise CompileError(f"flex_attention: CUDA tensors must be float16 or "
                           f"bfloat16, got {query.dtype}")
    text = flex_module_text(regions, captures, query.shape[-1],
                            value.shape[-1], dtype, scale, return_lse)
    try:
        module = compile_module(text, arch=arch)
    except CompileError as e:
        raise CompileError(
            f"flex_attention: these score_mod/mask_mod regions have no GPU "
            f"kernel (the host pipeline runs any: pass CPU tensors): "
            f"{e}") from e
    # Each capture as the module's argument type (float32, int32 or int64),
    # contiguous on the query's device.
    import torch
    arrays = [c.detach().to(device=query.device, dtype=getattr(
        torch, _CAPTURE_TYPES[str(c.dtype).replace("torch.", "")][1]))
        .contiguous() for c in captures]
    kernel = module.kernel(0)
    key_ranges = None
    # A mask that folded into the built-in masks needs no ranges: the
    # kernel's own block range is already the mask's.
    if block_mask is not None and "key_ranges" in kernel._param_names:
        key_ranges = block_mask.ranges_for(
            query.shape[0], query.shape[1], int(kernel.meta["block_r"]),
            query.device)
    out, lse = kernel(query, key, value, captures=arrays,
                      key_ranges=key_ranges)
    return (out, lse) if return_lse else out


def flex_attention(query, key, value, score_mod=None, mask_mod=None,
                   scale=None, enable_gqa=False, return_lse=False,
                   block_mask=None):
    """FlexAttention's call (torch.nn.attention.flex_attention): query
    [B, Hq, Nq, D], key [B, Hkv, Nk, D], value [B, Hkv, Nk, Dv] torch
    tensors. On the CPU (computed in float32; the result in query's dtype)
    any traced regions run; on a GPU (float16 or bfloat16, sm_90a) the
    compiled kernel runs them, folded into its built-in masks and softcap
    where they spell one. score_mod(score, b, h, q_idx, kv_idx) and mask_mod(b, h, q_idx,
    kv_idx) traced into the attention's regions (module docstring). Hq !=
    Hkv needs enable_gqa=True, as FlexAttention's. A query row that the
    mask hides entirely gives O = 0 and LSE = -inf. Returns O, or (O, LSE)
    with return_lse (LSE in natural log, float32). On the CPU it is
    differentiable with respect to query, key and value (the backward of
    the same regions on the host); captured tensors and the LSE get no
    gradient.

    block_mask (create_block_mask, whose mask_mod it carries; also taken in
    mask_mod's place, where FlexAttention's signature has it): on a GPU
    the kernel reads only the K/V blocks that meet each query tile's
    range. The host pipeline finds the blocks to skip itself
    (fa-skip-masked-blocks), so on CPU tensors only its mask_mod is used."""
    import numpy as np
    import torch
    from . import _flag
    if isinstance(mask_mod, BlockMask):  # FlexAttention's 5th argument
        if block_mask is not None:
            raise CompileError("flex_attention: a block mask given twice "
                               "(as mask_mod and block_mask)")
        mask_mod, block_mask = None, mask_mod
    if block_mask is not None:
        if not isinstance(block_mask, BlockMask):
            raise CompileError(
                f"flex_attention: block_mask must come from "
                f"flashmlir.create_block_mask, got {type_name(block_mask)}")
        if mask_mod is not None and mask_mod is not block_mask.mask_mod:
            raise CompileError(
                "flex_attention: mask_mod differs from the block mask's: "
                "give one of them (the block mask carries its mask_mod)")
        mask_mod = block_mask.mask_mod
    from .compiler import _extension, _checked_options
    enable_gqa = _flag("flex_attention", "enable_gqa", enable_gqa)
    return_lse = _flag("flex_attention", "return_lse", return_lse)
    for name, x in (("query", query), ("key", key), ("value", value)):
        if not isinstance(x, torch.Tensor):
            raise CompileError(f"flex_attention: {name} must be a torch "
                               f"tensor, got {type_name(x)}")
        if x.dim() != 4:
            raise CompileError(f"flex_attention: {name} must be 4-D [B, H, "
                               f"N, D], got {x.dim()}-D")
        if x.device != query.device:
            raise CompileError(f"flex_attention: {name} is on {x.device}, "
                               f"query on {query.device}")
    if query.shape[1] != key.shape[1] and not enable_gqa:
        raise CompileError(
            f"flex_attention: {query.shape[1]} query heads and "
            f"{key.shape[1]} key/value heads need enable_gqa=True")
    if block_mask is not None and (block_mask.q_len, block_mask.kv_len) != (
            query.shape[2], key.shape[2]):
        raise CompileError(
            f"flex_attention: the block mask is for Q_LEN={block_mask.q_len}"
            f", KV_LEN={block_mask.kv_len}; the call has {query.shape[2]} "
            f"queries and {key.shape[2]} keys")
    scale = _checked_options(scale=scale)["scale"]
    regions, captures = trace_regions(
        score_mod, mask_mod,
        shape=(query.shape[0], query.shape[1], query.shape[2], key.shape[2]))
    if query.is_cuda:
        return _flex_on_gpu(query, key, value, regions, captures, scale,
                            return_lse, block_mask)
    arrays = []
    for tensor in captures:
        _, numpy_dtype = _CAPTURE_TYPES[str(tensor.dtype).replace("torch.",
                                                                  "")]
        x = tensor.detach().cpu()
        x = x.float() if numpy_dtype == "float32" else x.to(
            torch.int32 if numpy_dtype == "int32" else torch.int64)
        # np.array, not np.ascontiguousarray: a 0-d capture stays 0-d.
        arrays.append(np.array(x.numpy(), order="C"))
    out, lse = _autograd_function().apply(query, key, value, regions,
                                          arrays, scale)
    return (out, lse) if return_lse else out


def _host_arrays(*tensors):
    import numpy as np
    return [np.ascontiguousarray(x.detach().float().numpy()) for x in tensors]


@functools.lru_cache(maxsize=None)
def _autograd_function():
    """flex_attention on the host as a torch.autograd.Function: the forward
    runs fa.attention with the traced regions, the backward
    fa.attention_backward with the same ones (the score_mod's derivative
    taken from its body: docs/dialect.md); captured tensors get no
    gradient, nor does the LSE."""
    import torch
    from .compiler import _extension

    class FlexAttentionFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, query, key, value, regions, captures, scale):
            out, lse = _extension().run_cpu(
                *_host_arrays(query, key, value), scale=scale,
                regions=regions, captures=captures)
            out, lse = torch.from_numpy(out), torch.from_numpy(lse)
            ctx.save_for_backward(query, key, value, out, lse)
            ctx.regions, ctx.captures, ctx.scale = regions, captures, scale
            ctx.mark_non_differentiable(lse)
            return out.to(query.dtype), lse

        @staticmethod
        def backward(ctx, grad_out, grad_lse):
            query, key, value, out, lse = ctx.saved_tensors
            dq, dk, dv = _extension().run_cpu_backward(
                *_host_arrays(query, key, value, out, lse, grad_out),
                scale=ctx.scale, regions=ctx.regions,
                captures=ctx.captures)
            return (torch.from_numpy(dq).to(query.dtype),
                    torch.from_numpy(dk).to(key.dtype),
                    torch.from_numpy(dv).to(value.dtype), None, None, None)

    return FlexAttentionFunction
