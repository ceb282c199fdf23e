"""The derivative table: one `defrule` per primitive.

Read Note [The derivative table] in srcgrad.rules.core for the formula language.
Conventions at kinks and ties are stated in each row's `doc` and collected in
docs/conventions.md (its table is generated from this file and checked by
tests/rules/test_conventions.py).

Note [Formula constructs]
~~~~~~~~~~~~~~~~~~~~~~~~~
Formulas use only: calls of `xp.<fn>` (incl. `xp.linalg.<fn>`) and helper names,
each a row; positional and keyword arguments; the operators + - * / // % ** @,
unary - and comparisons (each an operator row); subscripts of arrays (the
`getitem` row) and of multi-output values (`ans[1]`, `g[0]`, `xp.linalg.eigh(x)[1]`);
tuple displays (`(-1, -2)` as an argument; a multi-output JVP is a tuple, one
contribution per output); constants (numbers, strings, None, True/False); and
*static* expressions, folded at compile time: `a if cond else b`, `is None`,
`==`, `and`, `or`, `not`, arithmetic on static values, and the constant `xp.inf`.
A static condition may test whether an optional array parameter `is None`
(`clip`'s bounds, `einsum`'s second operand): that is known when compiling.
Conditional expressions also appear nested in argument position
(`linrec((xp.ravel(x) if axis is None else x), ...)`) and in two renders
(`einsum`, `pad`), always on static conditions.

Sequence parameters (`arrays` of concatenate/stack) take a list of arrays: their
VJP evaluates to a tuple with one cotangent per element, and their JVP reads
`arrays_t`, a sequence of tangents (zeros for inactive elements). For
multi-output rows `g` is a tuple with an entry for every output (zeros where an
output has no cotangent); `concat_bar`/`stack_bar` have `len(arrays)` outputs.

Note [Bilinear transposes]
~~~~~~~~~~~~~~~~~~~~~~~~~~
For a bilinear `B(x, y)` the VJPs are transposes `T0(g, y) = dB/dx^T g` and
`T1(g, x)`. They are linear in both arguments, and their own derivatives close
on the same three functions: for `T0(c, y)` with cotangent h,
``<h, T0(c, y)> = <c, B(h, y)>``, so ``vjp_c = B(h, y)`` and ``vjp_y = T1(c, h)``.
That is how `matmul_bar`, `tensordot_bar` and `einsum_bar` stay differentiable to
any order with one helper each.

Note [Zero-safe products]
~~~~~~~~~~~~~~~~~~~~~~~~~
`prod` and `cumprod` never divide by x. The product of all elements but one is
``excumprod(x, forward) * excumprod(x, reverse)`` (exclusive cumulative products),
and `cumprod`'s VJP is a reverse linear recurrence (`linrec`, a log-depth scan).
Their own derivatives are again shifts, scans and products, so every order is
exact with any number of zeros.
"""

from numbers import Integral

from srcgrad.rules.core import defrule

# ---------------------------------------------------------------- structural helpers
# `xp.shape(x)` is how formulas ask for a shape: the saved-value pass keeps the
# shape, not the array, when a formula needs nothing else of x.
defrule("shape", "x", "xp.shape(x)", targets=("numpy.shape",), attribute="shape",
        nondiff=True, static_out=True)

defrule("ndim", "x", "xp.ndim(x)", targets=("numpy.ndim",), attribute="ndim",
        nondiff=True, static_out=True)

defrule("size", "x", "xp.size(x)", targets=("numpy.size",), attribute="size",
        nondiff=True, static_out=True)

defrule("dtype", "x", "x.dtype", attribute="dtype", nondiff=True, static_out=True)

defrule("result_type", "x, *more", "xp.result_type(x, *more)",
        targets=("numpy.result_type",),
        nondiff=True, static_out=True, doc="a formula's way to ask for x's dtype")

defrule("unbroadcast", "x, shape", "unbroadcast(x, shape)",
        targets=("srcgrad.rules.helpers.unbroadcast",),
        vjp={"x": "unbroadcast(g, xp.shape(x))"},
        jvp={"x": "unbroadcast(x_t, shape)"})

defrule("broadcast_to", "x, shape", "xp.broadcast_to(x, shape)",
        targets=("numpy.broadcast_to",),
        vjp={"x": "unbroadcast(g, xp.shape(x))"},
        jvp={"x": "xp.broadcast_to(x_t, shape)"})

defrule("expand_reduced", "x, shape, axis, keepdims", "expand_reduced(x, shape, axis, keepdims)",
        targets=("srcgrad.rules.helpers.expand_reduced",),
        vjp={"x": "xp.reshape(g, xp.shape(x))"},
        jvp={"x": "expand_reduced(x_t, shape, axis, keepdims)"})

defrule("scatter_index", "x, shape, index", "scatter_index(x, shape, index)",
        targets=("srcgrad.rules.helpers.scatter_index",),
        vjp={"x": "g[index]"},
        jvp={"x": "scatter_index(x_t, shape, index)"})

defrule("reduced_size", "shape, axis", "reduced_size(shape, axis)",
        targets=("srcgrad.rules.helpers.reduced_size",), nondiff=True, static_out=True)

defrule("inverse_axes", "axes", "inverse_axes(axes)",
        targets=("srcgrad.rules.helpers.inverse_axes",), nondiff=True, static_out=True)

defrule("linear_pad_mode", "mode", "linear_pad_mode(mode)",
        targets=("srcgrad.rules.helpers.linear_pad_mode",), nondiff=True, static_out=True)

defrule("vector_only", "x, axis, ord=None", "vector_only(x, axis, ord)",
        targets=("srcgrad.rules.helpers.vector_only",),
        vjp={"x": "g"}, jvp={"x": "x_t"},
        doc="identity; raises where linalg.norm would be a matrix norm other than 'fro'")

# Scans and axis folding (Note [Zero-safe products]).
defrule("shift", "x, axis, reverse, fill", "shift(x, axis, reverse, fill)",
        targets=("srcgrad.rules.helpers.shift",),
        vjp={"x": "shift(g, axis, not reverse, 0)"},
        jvp={"x": "shift(x_t, axis, reverse, 0)"})

defrule("linrec", "a, b, axis, reverse", "linrec(a, b, axis, reverse)",
        targets=("srcgrad.rules.helpers.linrec",),
        vjp={"a": "unbroadcast(shift(ans, axis, reverse, 0)"
                  " * linrec(shift(a, axis, not reverse, 0), g, axis, not reverse), xp.shape(a))",
             "b": "unbroadcast(linrec(shift(a, axis, not reverse, 0), g, axis, not reverse),"
                  " xp.shape(b))"},
        jvp={"a": "linrec(a, a_t * shift(ans, axis, reverse, 0), axis, reverse)",
             "b": "linrec(a, b_t, axis, reverse)"})

defrule("excumprod", "x, axis, reverse", "excumprod(x, axis, reverse)",
        targets=("srcgrad.rules.helpers.excumprod",),
        vjp={"x": "ans * linrec(shift(x, axis, not reverse, 0),"
                  " shift(g, axis, not reverse, 0), axis, not reverse)"},
        jvp={"x": "shift(linrec(x, x_t * ans, axis, reverse), axis, reverse, 0)"})

defrule("fold_axes", "x, axis", "fold_axes(x, axis)",
        targets=("srcgrad.rules.helpers.fold_axes",),
        vjp={"x": "unfold_axes(g, xp.shape(x), axis)"},
        jvp={"x": "fold_axes(x_t, axis)"})

defrule("unfold_axes", "x, shape, axis", "unfold_axes(x, shape, axis)",
        targets=("srcgrad.rules.helpers.unfold_axes",),
        vjp={"x": "fold_axes(g, axis)"},
        jvp={"x": "unfold_axes(x_t, shape, axis)"})

# Transposes of bilinear maps (Note [Bilinear transposes]).
defrule("matmul_bar", "c, other, shape, which", "matmul_bar(c, other, shape, which)",
        targets=("srcgrad.rules.helpers.matmul_bar",),
        vjp={"c": "unbroadcast(g @ other if which == 0 else other @ g, xp.shape(c))",
             "other": "matmul_bar(c, g, xp.shape(other), 1 if which == 0 else 0)"},
        jvp={"c": "matmul_bar(c_t, other, shape, which)",
             "other": "matmul_bar(c, other_t, shape, which)"})

_CONTRACT = ('(xp.dot({a}, {b}) if axes == "dot" else xp.inner({a}, {b}) if axes == "inner"'
             ' else xp.tensordot({a}, {b}, axes=axes))')
defrule("tensordot_bar", "c, other, axes, shape, which",
        "tensordot_bar(c, other, axes, shape, which)",
        targets=("srcgrad.rules.helpers.tensordot_bar",),
        vjp={"c": "unbroadcast(" + _CONTRACT.format(a="g", b="other") + " if which == 0 else "
                  + _CONTRACT.format(a="other", b="g") + ", xp.shape(c))",
             "other": "tensordot_bar(c, g, axes, xp.shape(other), 1 if which == 0 else 0)"},
        jvp={"c": "tensordot_bar(c_t, other, axes, shape, which)",
             "other": "tensordot_bar(c, other_t, axes, shape, which)"})

defrule("einsum_bar", "c, other, subscripts, shape, which",
        "einsum_bar(c, other, subscripts, shape, which)",
        targets=("srcgrad.rules.helpers.einsum_bar",),
        vjp={"c": "unbroadcast((xp.einsum(subscripts, g) if other is None"
                  " else xp.einsum(subscripts, g, other)) if which == 0"
                  " else xp.einsum(subscripts, other, g), xp.shape(c))",
             "other": "einsum_bar(c, g, subscripts, xp.shape(other), 1 if which == 0 else 0)"},
        jvp={"c": "einsum_bar(c_t, other, subscripts, shape, which)",
             "other": "einsum_bar(c, other_t, subscripts, shape, which)"})

defrule("diagonal_bar", "c, shape, offset, axis1, axis2",
        "diagonal_bar(c, shape, offset, axis1, axis2)",
        targets=("srcgrad.rules.helpers.diagonal_bar",),
        vjp={"c": "unbroadcast(xp.diagonal(g, offset=offset, axis1=axis1, axis2=axis2),"
                  " xp.shape(c))"},
        jvp={"c": "diagonal_bar(c_t, shape, offset, axis1, axis2)"})

defrule("tile_bar", "c, shape, reps", "tile_bar(c, shape, reps)",
        targets=("srcgrad.rules.helpers.tile_bar",),
        vjp={"c": "xp.tile(g, reps)"},
        jvp={"c": "tile_bar(c_t, shape, reps)"})

defrule("repeat_bar", "c, shape, repeats, axis", "repeat_bar(c, shape, repeats, axis)",
        targets=("srcgrad.rules.helpers.repeat_bar",),
        vjp={"c": "xp.repeat(g, repeats, axis=axis)"},
        jvp={"c": "repeat_bar(c_t, shape, repeats, axis)"})

defrule("pad_bar", "c, shape, pad_width, mode", "pad_bar(c, shape, pad_width, mode)",
        targets=("srcgrad.rules.helpers.pad_bar",),
        vjp={"c": "xp.pad(g, pad_width, mode=mode)"},
        jvp={"c": "pad_bar(c_t, shape, pad_width, mode)"})


def _count_arrays(args):
    return len(args["arrays"])


defrule("concat_bar", "c, arrays, axis", "concat_bar(c, arrays, axis)",
        targets=("srcgrad.rules.helpers.concat_bar",), nout=_count_arrays,
        vjp={"c": "xp.concatenate(g, axis=axis)"},
        jvp={"c": "concat_bar(c_t, arrays, axis)"},
        doc="reads only the shapes of `arrays`")

defrule("stack_bar", "c, arrays, axis", "stack_bar(c, arrays, axis)",
        targets=("srcgrad.rules.helpers.stack_bar",), nout=_count_arrays,
        vjp={"c": "xp.stack(g, axis=axis)"},
        jvp={"c": "stack_bar(c_t, arrays, axis)"},
        doc="reads only the length of `arrays`")

# ---------------------------------------------------------------- elementwise, one argument


def _unary(name, deriv, doc="", targets=None, method=None):
    """Elementwise `f(x)` whose derivative is `deriv` (an expression over x and ans)."""
    defrule(name, "x", f"xp.{name}(x)", targets=targets or (f"numpy.{name}",), method=method,
            elementwise=True, vjp={"x": f"g * {deriv}"}, jvp={"x": f"x_t * {deriv}"}, doc=doc)


defrule("exp", "x", "xp.exp(x)", targets=("numpy.exp",), elementwise=True,
        vjp={"x": "g * ans"}, jvp={"x": "x_t * ans"})
_unary("exp2", "(ans * 0.6931471805599453)")
defrule("log", "x", "xp.log(x)", targets=("numpy.log",), elementwise=True,
        vjp={"x": "g / x"}, jvp={"x": "x_t / x"}, doc="at 0: g / 0 (inf)")
defrule("log2", "x", "xp.log2(x)", targets=("numpy.log2",), elementwise=True,
        vjp={"x": "g / (x * 0.6931471805599453)"}, jvp={"x": "x_t / (x * 0.6931471805599453)"})
defrule("log10", "x", "xp.log10(x)", targets=("numpy.log10",), elementwise=True,
        vjp={"x": "g / (x * 2.302585092994046)"}, jvp={"x": "x_t / (x * 2.302585092994046)"})
defrule("log1p", "x", "xp.log1p(x)", targets=("numpy.log1p",), elementwise=True,
        vjp={"x": "g / (1 + x)"}, jvp={"x": "x_t / (1 + x)"})
_unary("expm1", "(ans + 1)")
defrule("sqrt", "x", "xp.sqrt(x)", targets=("numpy.sqrt",), elementwise=True,
        vjp={"x": "g / (2 * ans)"}, jvp={"x": "x_t / (2 * ans)"},
        doc="at 0: derivative inf (g / 0); g == 0 there gives nan")
defrule("cbrt", "x", "xp.cbrt(x)", targets=("numpy.cbrt",), elementwise=True,
        vjp={"x": "g / (3 * ans * ans)"}, jvp={"x": "x_t / (3 * ans * ans)"},
        doc="at 0: derivative inf, as sqrt")
_unary("square", "(2 * x)")
defrule("reciprocal", "x", "xp.reciprocal(x)", targets=("numpy.reciprocal",),
        elementwise=True, vjp={"x": "-g * ans * ans"}, jvp={"x": "-x_t * ans * ans"})
_unary("sin", "xp.cos(x)")
_unary("cos", "-xp.sin(x)")
_unary("tan", "(1 + ans * ans)")
defrule("arcsin", "x", "xp.arcsin(x)", targets=("numpy.arcsin",), elementwise=True,
        vjp={"x": "g / xp.sqrt(1 - x * x)"}, jvp={"x": "x_t / xp.sqrt(1 - x * x)"},
        doc="at +-1: derivative inf")
defrule("arccos", "x", "xp.arccos(x)", targets=("numpy.arccos",), elementwise=True,
        vjp={"x": "-g / xp.sqrt(1 - x * x)"}, jvp={"x": "-x_t / xp.sqrt(1 - x * x)"},
        doc="at +-1: derivative -inf")
defrule("arctan", "x", "xp.arctan(x)", targets=("numpy.arctan",), elementwise=True,
        vjp={"x": "g / (1 + x * x)"}, jvp={"x": "x_t / (1 + x * x)"})
_unary("sinh", "xp.cosh(x)")
_unary("cosh", "xp.sinh(x)")
_unary("tanh", "(1 - ans * ans)")
defrule("arcsinh", "x", "xp.arcsinh(x)", targets=("numpy.arcsinh",), elementwise=True,
        vjp={"x": "g / xp.sqrt(x * x + 1)"}, jvp={"x": "x_t / xp.sqrt(x * x + 1)"})
defrule("arccosh", "x", "xp.arccosh(x)", targets=("numpy.arccosh",), elementwise=True,
        vjp={"x": "g / xp.sqrt(x * x - 1)"}, jvp={"x": "x_t / xp.sqrt(x * x - 1)"},
        doc="at 1: derivative inf")
defrule("arctanh", "x", "xp.arctanh(x)", targets=("numpy.arctanh",), elementwise=True,
        vjp={"x": "g / (1 - x * x)"}, jvp={"x": "x_t / (1 - x * x)"})
_unary("abs", "xp.sign(x)", targets=("numpy.abs", "numpy.fabs"),
       doc="at 0: derivative 0 (sign(0) == 0); numpy.absolute is the same object")
defrule("conjugate", "x", "xp.conjugate(x)", targets=("numpy.conjugate",), method="conj",
        elementwise=True, vjp={"x": "g"}, jvp={"x": "x_t"},
        doc="real arrays only (the identity); numpy.conj is the same object")
_unary("deg2rad", "0.017453292519943295", targets=("numpy.deg2rad", "numpy.radians"))
_unary("rad2deg", "57.29577951308232", targets=("numpy.rad2deg", "numpy.degrees"))

# Python's `math` on scalars: generated code calls `math.<fn>` (about 4x faster than
# NumPy's ufuncs on Python floats). Derivative formulas stay in `math` too.
def _math(name, deriv, doc=""):
    defrule(f"math_{name}", "x", f"math.{name}(x)", targets=(f"math.{name}",), elementwise=True,
            vjp={"x": f"g * {deriv}"}, jvp={"x": f"x_t * {deriv}"}, doc=doc)


_math("exp", "ans")
_math("expm1", "(ans + 1)")
_math("log", "(1 / x)", doc="one argument only (no base)")
_math("log2", "(1 / (x * 0.6931471805599453))")
_math("log10", "(1 / (x * 2.302585092994046))")
_math("log1p", "(1 / (1 + x))")
_math("sqrt", "(0.5 / ans)", doc="at 0: math raises (division by zero)")
_math("sin", "math.cos(x)")
_math("cos", "(-math.sin(x))")
_math("tan", "(1 + ans * ans)")
_math("sinh", "math.cosh(x)")
_math("cosh", "math.sinh(x)")
_math("tanh", "(1 - ans * ans)")
_math("asin", "(1 / math.sqrt(1 - x * x))")
_math("acos", "(-1 / math.sqrt(1 - x * x))")
_math("atan", "(1 / (1 + x * x))")
_math("fabs", "xp.sign(x)", doc="at 0: derivative 0")

# Integer-valued `math` functions: piecewise constant (floor, ceil, trunc) or defined on
# ints only (factorial, comb, perm, gcd, isqrt), so no derivative. Of a loop index
# they run in generated code; of constants they fold.
for _name, _sig in (("floor", "x"), ("ceil", "x"), ("trunc", "x"), ("factorial", "x"),
                    ("isqrt", "x"), ("comb", "n, k"), ("perm", "n, k=None"), ("gcd", "a, b")):
    defrule(f"pymath_{_name}", _sig, f"math.{_name}({_sig.split('=')[0]})",
            targets=(f"math.{_name}",), nondiff=True, static_out=True,
            doc="derivative 0 (an integer result)")

# `float(i)` / `int(i)` of a value known to be a Python number when the function runs
# (a loop index, a shape): never of a traced array, which would lose its derivative.
defrule("py_float", "x", "float(x)", nondiff=True, static_out=True,
        doc="float() of a loop index or a shape")
defrule("py_int", "x", "int(x)", nondiff=True, static_out=True,
        doc="int() of a loop index or a shape")
# `round(T / dt)` of Python numbers: an int (a trip count); piecewise constant, so its
# derivative is zero wherever it is defined (srcgrad.frontend.python_forms.builtin)
defrule("builtin_round", "x", "round(x)", nondiff=True, static_out=True,
        doc="round() of a Python number: an int, derivative 0")

defrule("negative", "x", "-x", targets=("numpy.negative",), elementwise=True,
        vjp={"x": "-g"}, jvp={"x": "-x_t"})
defrule("positive", "x", "+x", targets=("numpy.positive",), elementwise=True,
        vjp={"x": "g"}, jvp={"x": "x_t"})
defrule("copy", "x", "xp.copy(x)", targets=("numpy.copy",), method="copy",
        vjp={"x": "g"}, jvp={"x": "x_t"})
defrule("astype", "x, dtype", "xp.astype(x, dtype)", targets=("numpy.astype",),
        method="astype",
        vjp={"x": "xp.astype(g, xp.result_type(x, 1.0))"}, jvp={"x": "xp.astype(x_t, dtype)"},
        doc="the cotangent is cast back to x's dtype")

# ---------------------------------------------------------------- elementwise, two arguments


def _ub(expr, p):
    return f"unbroadcast({expr}, xp.shape({p}))"


defrule("add", "x, y", "x + y", targets=("numpy.add",), elementwise=True,
        vjp={"x": _ub("g", "x"), "y": _ub("g", "y")},
        jvp={"x": "x_t", "y": "y_t"})

defrule("subtract", "x, y", "x - y", targets=("numpy.subtract",), elementwise=True,
        vjp={"x": _ub("g", "x"), "y": _ub("-g", "y")},
        jvp={"x": "x_t", "y": "-y_t"})

defrule("multiply", "x, y", "x * y", targets=("numpy.multiply",), elementwise=True,
        vjp={"x": _ub("g * y", "x"), "y": _ub("g * x", "y")},
        jvp={"x": "x_t * y", "y": "x * y_t"})

# d/dy is -g * x / y**2 written -(g / y) * x / y: it reads x and y, never ans, so what a
# backward saves is torch's (DivBackward0 saves self and other; a write into the result is
# no error); (g / y) is d/dx's, shared, and no x / y appears for CSE to fold into ans.
defrule("divide", "x, y", "x / y", targets=("numpy.divide", "numpy.true_divide"),
        elementwise=True,
        vjp={"x": _ub("g / y", "x"), "y": _ub("-(g / y) * x / y", "y")},
        jvp={"x": "x_t / y", "y": "-y_t * ans / y"})

defrule("power", "x, y", "x ** y", targets=("numpy.power", "builtins.pow"), elementwise=True,
        vjp={"x": _ub("g * y * x ** (y - 1 + (y == 0))", "x"),
             "y": _ub("g * ans * xp.where(x == 0, 0, xp.log(xp.where(x == 0, 1, x)))", "y")},
        jvp={"x": "x_t * y * x ** (y - 1 + (y == 0))",
             "y": "y_t * ans * xp.where(x == 0, 0, xp.log(xp.where(x == 0, 1, x)))"},
        doc="d/dx = y * x ** (y - 1), written y * x ** (y - 1 + (y == 0)) so that y == 0 "
            "gives 0 also at x == 0 (x ** 0 is constant; torch and JAX give 0); a constant "
            "y folds, so 0 ** 1 == 0 stays exact at every order; d/dy at x == 0 is 0, "
            "never nan")

defrule("mod", "x, y", "x % y", targets=("numpy.remainder",), elementwise=True,
        vjp={"x": _ub("g", "x"), "y": _ub("-g * (x // y)", "y")},
        jvp={"x": "x_t", "y": "-y_t * (x // y)"},
        doc="away from the jumps; numpy.mod is the same object")

defrule("arctan2", "x, y", "xp.arctan2(x, y)", targets=("numpy.arctan2",), elementwise=True,
        vjp={"x": _ub("g * y / (x * x + y * y)", "x"), "y": _ub("-g * x / (x * x + y * y)", "y")},
        jvp={"x": "x_t * y / (x * x + y * y)", "y": "-y_t * x / (x * x + y * y)"},
        doc="arctan2(x1, x2): undefined (nan) at the origin")

defrule("hypot", "x, y", "xp.hypot(x, y)", targets=("numpy.hypot",), elementwise=True,
        vjp={"x": _ub("g * x / xp.where(ans == 0, 1, ans)", "x"),
             "y": _ub("g * y / xp.where(ans == 0, 1, ans)", "y")},
        jvp={"x": "x_t * x / xp.where(ans == 0, 1, ans)",
             "y": "y_t * y / xp.where(ans == 0, 1, ans)"},
        doc="at the origin: gradient 0")

defrule("logaddexp", "x, y", "xp.logaddexp(x, y)", targets=("numpy.logaddexp",),
        elementwise=True,
        vjp={"x": _ub("g * xp.exp(x - ans)", "x"), "y": _ub("g * xp.exp(y - ans)", "y")},
        jvp={"x": "x_t * xp.exp(x - ans)", "y": "y_t * xp.exp(y - ans)"})

defrule("logaddexp2", "x, y", "xp.logaddexp2(x, y)", targets=("numpy.logaddexp2",),
        elementwise=True,
        vjp={"x": _ub("g * xp.exp2(x - ans)", "x"), "y": _ub("g * xp.exp2(y - ans)", "y")},
        jvp={"x": "x_t * xp.exp2(x - ans)", "y": "y_t * xp.exp2(y - ans)"})

# The cotangent goes inside `where` so the result keeps its dtype (float32 stays float32).
_TIE = "xp.where({a} {op} {b}, {t}, xp.where({a} == {b}, 0.5 * {t}, 0))"
for _name, _op in (("maximum", ">"), ("minimum", "<")):
    defrule(_name, "x, y", f"xp.{_name}(x, y)", targets=(f"numpy.{_name}",), elementwise=True,
            vjp={"x": _ub(_TIE.format(a="x", b="y", op=_op, t="g"), "x"),
                 "y": _ub(_TIE.format(a="y", b="x", op=_op, t="g"), "y")},
            jvp={"x": _TIE.format(a="x", b="y", op=_op, t="x_t"),
                 "y": _TIE.format(a="y", b="x", op=_op, t="y_t")},
            doc="ties (x == y): each operand gets half the gradient")

# The eager runtime's x.relu() (torch's ReluBackward0): its backward reads the result, so
# the result is what the node saves and version-checks, as torch's threshold_backward.
defrule("relu", "x", "xp.maximum(x, 0)", elementwise=True,
        vjp={"x": "xp.where(ans > 0, g, 0)"},
        jvp={"x": "xp.where(ans > 0, x_t, 0)"},
        doc="the eager `Tensor.relu()` only: relu'(0) = 0; nan stays nan")

defrule("where", "condition, x, y", "xp.where(condition, x, y)", targets=("numpy.where",),
        elementwise=True,
        vjp={"x": _ub("xp.where(condition, g, 0)", "x"),
             "y": _ub("xp.where(condition, 0, g)", "y")},
        jvp={"x": "xp.where(condition, x_t, 0)", "y": "xp.where(condition, 0, y_t)"},
        doc="the condition is not differentiated; the untaken branch gets exactly 0 "
            "(an inf/nan there does not leak); one-argument where is not a primitive")

_CLIP = ("{t} if a_min is None and a_max is None"
         " else xp.where(x > a_max, 0, {t}) if a_min is None"
         " else xp.where(x < a_min, 0, {t}) if a_max is None"
         " else xp.where(x < a_min, 0, xp.where(x > a_max, 0, {t}))")
defrule("clip", "x, a_min=None, a_max=None", "xp.clip(x, a_min, a_max)",
        targets=("numpy.clip",), method="clip", elementwise=True,
        vjp={"x": _ub(_CLIP.format(t="g"), "x"),
             "a_min": _ub("xp.where(x < a_min, g, 0)", "a_min"),
             "a_max": _ub("xp.where(x > a_max, g, 0)", "a_max")},
        jvp={"x": _CLIP.format(t="x_t"),
             "a_min": "xp.where(x < a_min, a_min_t, 0)",
             "a_max": "xp.where(x > a_max, a_max_t, 0)"},
        doc="at a bound (x == a_min or x == a_max) the gradient goes to x, not to the bound "
            "(PyTorch's clamp); assumes a_min <= a_max")

# ---------------------------------------------------------------- not differentiable


def _nondiff(name, signature="x", render=None, targets=None, method=None, elementwise=True,
             doc=""):
    defrule(name, signature, render or f"xp.{name}({signature})",
            targets=(f"numpy.{name}",) if targets is None else targets, method=method,
            elementwise=elementwise, nondiff=True, doc=doc)


_nondiff("sign", doc="derivative 0 everywhere, at 0 too")
_nondiff("floor")
_nondiff("ceil")
_nondiff("trunc")
_nondiff("rint")
_nondiff("round", "x, decimals=0", "xp.round(x, decimals)",
         targets=("numpy.round", "numpy.around"), method="round")
for _name, _op in (("less", "<"), ("less_equal", "<="), ("greater", ">"),
                   ("greater_equal", ">="), ("equal", "=="), ("not_equal", "!="),
                   ("floor_divide", "//"), ("bitwise_and", "&"), ("bitwise_or", "|"),
                   ("bitwise_xor", "^")):
    _nondiff(_name, "x, y", f"x {_op} y")
_nondiff("invert", "x", "~x")
for _name in ("isnan", "isinf", "isfinite", "logical_not"):
    _nondiff(_name)
for _name in ("logical_and", "logical_or", "logical_xor"):
    _nondiff(_name, "x, y")
_nondiff("argmax", "x, axis=None, keepdims=False",
         "xp.argmax(x, axis=axis, keepdims=keepdims)", method="argmax", elementwise=False)
_nondiff("argmin", "x, axis=None, keepdims=False",
         "xp.argmin(x, axis=axis, keepdims=keepdims)", method="argmin", elementwise=False)
_nondiff("argsort", "x, axis=-1", "xp.argsort(x, axis=axis)", method="argsort",
         elementwise=False)
_nondiff("count_nonzero", "x, axis=None, keepdims=False",
         "xp.count_nonzero(x, axis=axis, keepdims=keepdims)", elementwise=False)
for _name in ("all", "any"):
    _nondiff(_name, "x, axis=None, keepdims=False", f"xp.{_name}(x, axis=axis, keepdims=keepdims)",
             method=_name, elementwise=False)
_nondiff("zeros_like", "x, dtype=None", "xp.zeros_like(x, dtype=dtype)")
_nondiff("empty_like", "x, dtype=None", "xp.empty_like(x, dtype=dtype)")
_nondiff("ones_like", "x, dtype=None", "xp.ones_like(x, dtype=dtype)")
_nondiff("zeros", "shape, dtype=None", "xp.zeros(shape, dtype=dtype)", elementwise=False)
_nondiff("ones", "shape, dtype=None", "xp.ones(shape, dtype=dtype)", elementwise=False)
_nondiff("empty", "shape, dtype=None", "xp.empty(shape, dtype=dtype)", elementwise=False)
_nondiff("identity", "n, dtype=None", "xp.identity(n, dtype=dtype)", elementwise=False)
_nondiff("eye", "N, M=None, k=0, dtype=None", "xp.eye(N, M, k=k, dtype=dtype)",
         elementwise=False)
_nondiff("arange", "start, stop=None, step=None, dtype=None",
         "xp.arange(start, stop, step, dtype=dtype)", elementwise=False)

defrule("full", "shape, fill_value, dtype=None", "xp.full(shape, fill_value, dtype=dtype)",
        targets=("numpy.full",),
        vjp={"fill_value": "unbroadcast(g, xp.shape(fill_value))"},
        jvp={"fill_value": "xp.broadcast_to(fill_value_t, shape)"})
defrule("full_like", "x, fill_value, dtype=None", "xp.full_like(x, fill_value, dtype=dtype)",
        targets=("numpy.full_like",),
        vjp={"fill_value": "unbroadcast(g, xp.shape(fill_value))"},
        jvp={"fill_value": "xp.broadcast_to(fill_value_t, xp.shape(x))"},
        doc="differentiable in fill_value only")

# ---------------------------------------------------------------- reductions
# `expand_reduced(g, ...)` reshapes a reduction's cotangent to broadcast against x.
_G = "expand_reduced(g, xp.shape(x), axis, keepdims)"
_ANS = "expand_reduced(ans, xp.shape(x), axis, keepdims)"
_N = "reduced_size(xp.shape(x), axis)"
_CENTERED = "(x - xp.mean(x, axis=axis, keepdims=True))"


def _count(mask):  # how many elements tie, in x's dtype (an int count would promote float32);
    # read from ans, which has it: x may be a Python number, which the Array API's
    # result_type refuses (fuzz seed 2630312, ptp of a float)
    return f"xp.astype(xp.sum({mask}, axis=axis, keepdims=True), xp.result_type(ans))"


def _reduce_jvp(deriv):
    return f"xp.sum(x_t * {deriv}, axis=axis, keepdims=keepdims)"


defrule("sum", "x, axis=None, keepdims=False", "xp.sum(x, axis=axis, keepdims=keepdims)",
        targets=("numpy.sum",), method="sum",
        vjp={"x": "xp.broadcast_to(g if keepdims or axis is None"
                  " else expand_reduced(g, xp.shape(x), axis, keepdims), xp.shape(x))"},
        jvp={"x": "xp.sum(x_t, axis=axis, keepdims=keepdims)"})

defrule("mean", "x, axis=None, keepdims=False", "xp.mean(x, axis=axis, keepdims=keepdims)",
        targets=("numpy.mean",), method="mean",
        vjp={"x": f"xp.broadcast_to({_G}, xp.shape(x)) / {_N}"},
        jvp={"x": "xp.mean(x_t, axis=axis, keepdims=keepdims)"})

_OTHERS = ("unfold_axes(excumprod(fold_axes(x, axis), -1, False)"
           " * excumprod(fold_axes(x, axis), -1, True), xp.shape(x), axis)")
defrule("prod", "x, axis=None, keepdims=False", "xp.prod(x, axis=axis, keepdims=keepdims)",
        targets=("numpy.prod",), method="prod",
        vjp={"x": f"{_G} * {_OTHERS}"},
        jvp={"x": _reduce_jvp(_OTHERS)},
        doc="exact with zeros: each element gets the product of the others, computed "
            "without division (Note [Zero-safe products])")

for _name in ("max", "min"):
    _mask = f"(x == {_ANS})"
    _share = f"{_mask} / {_count(_mask)}"
    defrule(_name, "x, axis=None, keepdims=False", f"xp.{_name}(x, axis=axis, keepdims=keepdims)",
            targets=(f"numpy.{_name}", f"numpy.a{_name}"), method=_name,
            # the cotangent is divided by the tie count before it meets the full-size
            # mask: one pass over x fewer than g * mask / count
            vjp={"x": f"({_G} / {_count(_mask)}) * {_mask}"},
            jvp={"x": _reduce_jvp(_share)},
            doc="ties: the gradient is split evenly among the elements equal to the result")

# 2 / (n - ddof) as a NumPy number of x's float dtype: inf where n == ddof (a nan gradient,
# torch's), not Python's ZeroDivisionError (the var of one element, ddof=1)
defrule("var", "x, axis=None, ddof=0, keepdims=False",
        "xp.var(x, axis=axis, ddof=ddof, keepdims=keepdims)", targets=("numpy.var",),
        method="var",
        # (an array over the count: with one element and ddof=1 NumPy's 0 / 0 is nan, as
        # torch's; `2 / 0` of Python numbers was a ZeroDivisionError)
        vjp={"x": f"{_G} * {_CENTERED} * 2 / ({_N} - ddof)"},
        jvp={"x": f"{_reduce_jvp(_CENTERED)} * 2 / ({_N} - ddof)"})

# std, or inf where it is 0 to rounding: equal values' centred deviations and std are both
# rounding (of the mean), and their ratio, the derivative, was 0.83 for std of three equal
# values, whose true derivative is 0 (fuzz seed 2667271)
# ("0 to rounding": a quarter of it vanishes beside the largest |x|, in x's own precision)
_MAX_ABS = "xp.max(xp.abs(x), axis=axis, keepdims=keepdims)"
_STD_OR_INF = f"xp.where({_MAX_ABS} + ans / 4 == {_MAX_ABS}, xp.inf, ans)"
defrule("std", "x, axis=None, ddof=0, keepdims=False",
        "xp.std(x, axis=axis, ddof=ddof, keepdims=keepdims)", targets=("numpy.std",),
        method="std",
        vjp={"x": f"expand_reduced(g / {_STD_OR_INF}, xp.shape(x), axis, keepdims)"
                  f" * {_CENTERED} / ({_N} - ddof)"},
        jvp={"x": f"{_reduce_jvp(_CENTERED)} / (({_N} - ddof) * {_STD_OR_INF})"},
        doc="where std is 0 to rounding (all equal: NumPy's std of [x, x, x] may be 2e-16) the "
            "gradient is 0, not nan or rounding's ratio")

defrule("cumsum", "x, axis=None", "xp.cumsum(x, axis=axis)", targets=("numpy.cumsum",),
        method="cumsum",
        vjp={"x": "xp.reshape(xp.flip(xp.cumsum(xp.flip(g, axis), axis=axis), axis),"
                  " xp.shape(x))"},
        jvp={"x": "xp.cumsum(x_t, axis=axis)"})

_X1 = "(xp.ravel(x) if axis is None else x)"
_A1 = "(0 if axis is None else axis)"
defrule("cumprod", "x, axis=None", "xp.cumprod(x, axis=axis)", targets=("numpy.cumprod",),
        method="cumprod",
        vjp={"x": f"xp.reshape(shift(ans, {_A1}, False, 1)"
                  f" * linrec(shift({_X1}, {_A1}, True, 0), g, {_A1}, True), xp.shape(x))"},
        jvp={"x": f"linrec({_X1}, (xp.ravel(x_t) if axis is None else x_t)"
                  f" * shift(ans, {_A1}, False, 1), {_A1}, False)"},
        doc="exact with zeros: a linear recurrence, no division (Note [Zero-safe products])")

# linalg.norm: the derivative factor d (x's shape); vjp = G * d, jvp = sum(x_t * d).
_V = "vector_only(x, axis, ord)"
_SAFE_A = f"xp.where({_ANS} == 0, 1, {_ANS})"
_NORM_D = (
    f"x / {_SAFE_A} if ord is None or ord == 'fro'"
    f" else {_V} / {_SAFE_A} if ord == 2"
    f" else xp.sign({_V}) if ord == 1"
    f" else xp.sign({_V}) * (xp.abs({_V}) == {_ANS})"
    f" / {_count(f'(xp.abs({_V}) == {_ANS})')}"
    f" if ord == xp.inf or ord == -xp.inf"
    f" else xp.zeros_like({_V}) if ord == 0"
    f" else xp.sign({_V}) * (xp.abs({_V}) / {_SAFE_A}) ** (ord - 1)")
defrule("norm", "x, ord=None, axis=None, keepdims=False",
        "xp.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)",
        targets=("numpy.linalg.norm",),
        vjp={"x": f"{_G} * ({_NORM_D})"},
        jvp={"x": _reduce_jvp(f"({_NORM_D})")},
        doc="vector norms of any ord (None, 2, 1, inf, -inf, 0, p) and the Frobenius norm "
            "(ord None/'fro' over all axes or an axis pair); the other matrix norms (2, -2, "
            "'nuc', 1, -1, inf, -inf) are the composition norm_of_matrices (singular values, "
            "sums of absolute values). At x == 0 the gradient is 0; inf-norm ties split evenly")

# ---------------------------------------------------------------- linear algebra
defrule("matmul", "x, y", "x @ y", targets=("numpy.matmul", "numpy.linalg.matmul"),
        vjp={"x": "matmul_bar(g, y, xp.shape(x), 0)", "y": "matmul_bar(g, x, xp.shape(y), 1)"},
        jvp={"x": "x_t @ y", "y": "x @ y_t"},
        doc="1-D operands promoted as NumPy does; batch dimensions broadcast")

defrule("dot", "x, y", "xp.dot(x, y)", targets=("numpy.dot",), method="dot",
        vjp={"x": 'tensordot_bar(g, y, "dot", xp.shape(x), 0)',
             "y": 'tensordot_bar(g, x, "dot", xp.shape(y), 1)'},
        jvp={"x": "xp.dot(x_t, y)", "y": "xp.dot(x, y_t)"})

defrule("vdot", "x, y", "xp.vdot(x, y)", targets=("numpy.vdot",),
        vjp={"x": "xp.reshape(g * xp.ravel(y), xp.shape(x))",
             "y": "xp.reshape(g * xp.ravel(x), xp.shape(y))"},
        jvp={"x": "xp.vdot(x_t, y)", "y": "xp.vdot(x, y_t)"},
        doc="real arrays (the dot of the flattened arrays)")

defrule("inner", "x, y", "xp.inner(x, y)", targets=("numpy.inner",),
        vjp={"x": 'tensordot_bar(g, y, "inner", xp.shape(x), 0)',
             "y": 'tensordot_bar(g, x, "inner", xp.shape(y), 1)'},
        jvp={"x": "xp.inner(x_t, y)", "y": "xp.inner(x, y_t)"})

defrule("tensordot", "x, y, axes=2", "xp.tensordot(x, y, axes=axes)",
        targets=("numpy.tensordot",),
        vjp={"x": "tensordot_bar(g, y, axes, xp.shape(x), 0)",
             "y": "tensordot_bar(g, x, axes, xp.shape(y), 1)"},
        jvp={"x": "xp.tensordot(x_t, y, axes=axes)", "y": "xp.tensordot(x, y_t, axes=axes)"})

defrule("outer", "x, y", "xp.outer(x, y)", targets=("numpy.outer",),
        vjp={"x": "xp.reshape(g @ xp.ravel(y), xp.shape(x))",
             "y": "xp.reshape(xp.ravel(x) @ g, xp.shape(y))"},
        jvp={"x": "xp.outer(x_t, y)", "y": "xp.outer(x, y_t)"})

defrule("einsum", "subscripts, x, y=None, optimize=False",
        "xp.einsum(subscripts, x, optimize=optimize) if y is None"
        " else xp.einsum(subscripts, x, y, optimize=optimize)",
        targets=("numpy.einsum",),
        vjp={"x": "einsum_bar(g, y, subscripts, xp.shape(x), 0)",
             "y": "einsum_bar(g, x, subscripts, xp.shape(y), 1)"},
        jvp={"x": "xp.einsum(subscripts, x_t, optimize=optimize) if y is None"
                  " else xp.einsum(subscripts, x_t, y, optimize=optimize)",
             "y": "xp.einsum(subscripts, x, y_t, optimize=optimize)"},
        doc="one or two operands (implicit or explicit output, '...', repeated indices)")

defrule("trace", "x, offset=0, axis1=0, axis2=1",
        "xp.trace(x, offset=offset, axis1=axis1, axis2=axis2)", targets=("numpy.trace",),
        method="trace",
        vjp={"x": "diagonal_bar(xp.expand_dims(g, -1), xp.shape(x), offset, axis1, axis2)"},
        jvp={"x": "xp.trace(x_t, offset=offset, axis1=axis1, axis2=axis2)"})

defrule("diag", "v, k=0", "xp.diag(v, k)", targets=("numpy.diag",),
        vjp={"v": "diag_bar(g, xp.shape(v), k)"}, jvp={"v": "xp.diag(v_t, k)"},
        doc="v 1-D (a matrix with v on its k-th diagonal) or 2-D (its k-th diagonal)")

# Its transpose is diag again: placing on a diagonal and reading it are adjoint.
defrule("diag_bar", "c, shape, k", "diag_bar(c, shape, k)",
        targets=("srcgrad.rules.helpers.diag_bar",),
        vjp={"c": "xp.diag(g, k)"}, jvp={"c": "diag_bar(c_t, shape, k)"})

defrule("diagonal", "x, offset=0, axis1=0, axis2=1",
        "xp.diagonal(x, offset=offset, axis1=axis1, axis2=axis2)", targets=("numpy.diagonal",),
        method="diagonal",
        vjp={"x": "diagonal_bar(g, xp.shape(x), offset, axis1, axis2)"},
        jvp={"x": "xp.diagonal(x_t, offset=offset, axis1=axis1, axis2=axis2)"})

for _name in ("tril", "triu"):
    defrule(_name, "x, k=0", f"xp.{_name}(x, k)", targets=(f"numpy.{_name}",),
            vjp={"x": f"unbroadcast(xp.{_name}(g, k), xp.shape(x))"},  # (1-d x: its rows)
            jvp={"x": f"xp.{_name}(x_t, k)"})

_AT = "xp.swapaxes(ans, -1, -2)"
defrule("inv", "x", "xp.linalg.inv(x)", targets=("numpy.linalg.inv",),
        vjp={"x": f"-({_AT} @ g @ {_AT})"}, jvp={"x": "-(ans @ x_t @ ans)"},
        doc="batched")

# NumPy 2 reads a 1-D `b` as one vector for every matrix in a batched `a`; the
# derivatives work on columns (..., M, 1) in that case and on matrices otherwise.
_COLS = "xp.ndim(b)"
defrule("solve", "a, b", "xp.linalg.solve(a, b)",
        targets=("numpy.linalg.solve", "srcgrad.rules.helpers.broadcast_solve"),
        vjp={"a": f"-matmul_bar(xp.linalg.solve(xp.swapaxes(a, -1, -2), as_columns(g, {_COLS})),"
                  f" as_columns(ans, {_COLS}), xp.shape(a), 0)",
             "b": f"unbroadcast(from_columns(xp.linalg.solve(xp.swapaxes(a, -1, -2),"
                  f" as_columns(g, {_COLS})), {_COLS}), xp.shape(b))"},
        jvp={"a": f"-from_columns(xp.linalg.solve(a, a_t @ as_columns(ans, {_COLS})), {_COLS})",
             "b": "xp.linalg.solve(a, b_t)"},
        doc="b of shape (M,) (one vector, also for a batched a) or (..., M, K), as in NumPy 2")

defrule("as_columns", "x, b_ndim", "as_columns(x, b_ndim)",
        targets=("srcgrad.rules.helpers.as_columns",),
        vjp={"x": "from_columns(g, b_ndim)"}, jvp={"x": "as_columns(x_t, b_ndim)"})

defrule("from_columns", "x, b_ndim", "from_columns(x, b_ndim)",
        targets=("srcgrad.rules.helpers.from_columns",),
        vjp={"x": "as_columns(g, b_ndim)"}, jvp={"x": "from_columns(x_t, b_ndim)"})

_INVT = "xp.swapaxes(xp.linalg.inv(x), -1, -2)"
_DLOGDET = "xp.trace(xp.linalg.solve(x, x_t), axis1=-2, axis2=-1)"
defrule("det", "x", "xp.linalg.det(x)", targets=("numpy.linalg.det",),
        vjp={"x": f"xp.expand_dims(g * ans, (-1, -2)) * {_INVT}"},
        jvp={"x": f"ans * {_DLOGDET}"},
        doc="x must be nonsingular (the derivative raises LinAlgError otherwise)")

defrule("slogdet", "x", "xp.linalg.slogdet(x)", targets=("numpy.linalg.slogdet",), nout=2,
        vjp={"x": f"xp.expand_dims(g[1], (-1, -2)) * {_INVT}"},
        jvp={"x": f"(xp.zeros_like(ans[0]), {_DLOGDET})"},
        doc="outputs (sign, logabsdet): sign is piecewise constant (no derivative)")

_L = "ans"
_LINV = "xp.linalg.inv(ans)"
_LINVT = "xp.swapaxes(xp.linalg.inv(ans), -1, -2)"


def _phi(m):  # lower triangle with half the diagonal
    return f"(0.5 * (xp.tril({m}) + xp.tril({m}, -1)))"


def _sym(m):
    return f"(0.5 * ({m} + xp.swapaxes({m}, -1, -2)))"


defrule("cholesky", "x", "xp.linalg.cholesky(x)", targets=("numpy.linalg.cholesky",),
        vjp={"x": _sym(f"({_LINVT} @ {_phi('(xp.swapaxes(ans, -1, -2) @ g)')} @ {_LINV})")},
        jvp={"x": f"{_L} @ {_phi(f'({_LINV} @ x_t @ {_LINVT})')}"},
        doc="x symmetric positive definite; the gradient is symmetrized (x_bar == x_bar.T) "
            "and tangents are taken symmetric, as PyTorch does")

_W, _VEC = "ans[0]", "ans[1]"
_VT = "xp.swapaxes(ans[1], -1, -2)"
_GAP = f"(xp.expand_dims({_W}, -2) - xp.expand_dims({_W}, -1))"
_F = f"xp.where({_GAP} == 0, 0, 1 / xp.where({_GAP} == 0, 1, {_GAP}))"
_M = f"({_VT} @ x_t @ {_VEC})"
defrule("eigh", "x, UPLO='L'", "xp.linalg.eigh(x, UPLO)", targets=("numpy.linalg.eigh",),
        nout=2,
        vjp={"x": _sym(f"(({_VEC} * xp.expand_dims(g[0], -2)"
                       f" + {_VEC} @ ({_F} * ({_VT} @ g[1]))) @ {_VT})")},
        jvp={"x": f"(xp.diagonal({_M}, axis1=-2, axis2=-1), {_VEC} @ ({_F} * {_M}))"},
        doc="x symmetric; gradient symmetrized, tangents symmetric; eigenvectors assume "
            "distinct eigenvalues (a repeated pair contributes 0, the eigenvalue part "
            "stays exact)")

_EV = "xp.linalg.eigh(x, UPLO)[1]"
defrule("eigvalsh", "x, UPLO='L'", "xp.linalg.eigvalsh(x, UPLO)",
        targets=("numpy.linalg.eigvalsh",),
        vjp={"x": f"({_EV} * xp.expand_dims(g, -2)) @ xp.swapaxes({_EV}, -1, -2)"},
        jvp={"x": f"xp.diagonal(xp.swapaxes({_EV}, -1, -2) @ x_t @ {_EV}, axis1=-2, axis2=-1)"},
        doc="x symmetric; exact also for repeated eigenvalues of the sum")

# ---------------------------------------------------------------- shape
defrule("reshape", "x, shape", "xp.reshape(x, shape)", targets=("numpy.reshape",),
        method="reshape", method_varargs=True,
        vjp={"x": "xp.reshape(g, xp.shape(x))"}, jvp={"x": "xp.reshape(x_t, shape)"})

defrule("ravel", "x", "xp.ravel(x)", targets=("numpy.ravel",), method="ravel",
        vjp={"x": "xp.reshape(g, xp.shape(x))"}, jvp={"x": "xp.ravel(x_t)"})

defrule("flatten", "x", "xp.ravel(x)", method="flatten",
        vjp={"x": "xp.reshape(g, xp.shape(x))"}, jvp={"x": "xp.ravel(x_t)"},
        doc="x.flatten() (a copy in NumPy; rendered as ravel, compiled code never aliases it)")

defrule("transpose", "x, axes=None", "xp.transpose(x, axes)",
        targets=("numpy.transpose", "numpy.permute_dims"), method="transpose",
        method_varargs=True, attribute="T",
        vjp={"x": "xp.transpose(g) if axes is None else xp.transpose(g, inverse_axes(axes))"},
        jvp={"x": "xp.transpose(x_t, axes)"},
        doc="also x.T (all axes reversed)")

# `x.T` of a known 2-D array: what shape-specialised code writes for matmul cotangents
# (srcgrad.passes.simplify); `xp.transpose` costs a Python-level call.
defrule("T", "x", "x.T", vjp={"x": "xp.transpose(g)"}, jvp={"x": "xp.transpose(x_t)"})

defrule("matrix_transpose", "x", "xp.swapaxes(x, -1, -2)",
        targets=("numpy.matrix_transpose", "numpy.linalg.matrix_transpose"), attribute="mT",
        vjp={"x": "xp.swapaxes(g, -1, -2)"}, jvp={"x": "xp.swapaxes(x_t, -1, -2)"})

defrule("swapaxes", "x, axis1, axis2", "xp.swapaxes(x, axis1, axis2)",
        targets=("numpy.swapaxes",), method="swapaxes",
        vjp={"x": "xp.swapaxes(g, axis1, axis2)"}, jvp={"x": "xp.swapaxes(x_t, axis1, axis2)"})

defrule("moveaxis", "x, source, destination", "xp.moveaxis(x, source, destination)",
        targets=("numpy.moveaxis",),
        vjp={"x": "xp.moveaxis(g, destination, source)"},
        jvp={"x": "xp.moveaxis(x_t, source, destination)"})

defrule("expand_dims", "x, axis", "xp.expand_dims(x, axis)", targets=("numpy.expand_dims",),
        vjp={"x": "xp.reshape(g, xp.shape(x))"}, jvp={"x": "xp.expand_dims(x_t, axis)"})

defrule("squeeze", "x, axis=None", "xp.squeeze(x, axis=axis)", targets=("numpy.squeeze",),
        method="squeeze",
        vjp={"x": "xp.reshape(g, xp.shape(x))"}, jvp={"x": "xp.squeeze(x_t, axis=axis)"})

defrule("flip", "x, axis=None", "xp.flip(x, axis)", targets=("numpy.flip",),
        vjp={"x": "xp.flip(g, axis)"}, jvp={"x": "xp.flip(x_t, axis)"})

for _name in ("fliplr", "flipud"):
    defrule(_name, "x", f"xp.{_name}(x)", targets=(f"numpy.{_name}",),
            vjp={"x": f"xp.{_name}(g)"}, jvp={"x": f"xp.{_name}(x_t)"})

defrule("roll", "x, shift, axis=None", "xp.roll(x, shift, axis=axis)", targets=("numpy.roll",),
        vjp={"x": "xp.roll(g, -shift, axis=axis)"}, jvp={"x": "xp.roll(x_t, shift, axis=axis)"},
        doc="an int shift (a tuple of shifts is refused when compiling)")

defrule("concatenate", "arrays, axis=0", "xp.concatenate(arrays, axis=axis)",
        targets=("numpy.concatenate",),
        vjp={"arrays": "concat_bar(g, arrays, axis)"},
        jvp={"arrays": "xp.concatenate(arrays_t, axis=axis)"},
        doc="`arrays` is a sequence: its VJP is a tuple (one cotangent per array) and "
            "arrays_t a sequence of tangents (zeros for inactive arrays); axis=None "
            "is not supported")

defrule("stack", "arrays, axis=0", "xp.stack(arrays, axis=axis)", targets=("numpy.stack",),
        vjp={"arrays": "stack_bar(g, arrays, axis)"},
        jvp={"arrays": "xp.stack(arrays_t, axis=axis)"},
        doc="`arrays` is a sequence, as in concatenate")

# `np.hstack`/`vstack`/`dstack`/`column_stack`: a concatenation after promoting each
# element to the joined rank (atleast_1d/2d/3d, or a column); `stacked_bar` cuts the
# cotangent back into pieces of the elements' own shapes.
for _name in ("hstack", "vstack", "dstack", "column_stack"):
    defrule(_name, "arrays", f"xp.{_name}(arrays)", targets=(f"numpy.{_name}",),
            vjp={"arrays": f"stacked_bar(g, arrays, {_name!r})"},
            jvp={"arrays": f"xp.{_name}(arrays_t)"},
            doc="`arrays` is a sequence, as in concatenate (elements of any rank NumPy takes)")

defrule("stacked_bar", "c, arrays, how", "stacked_bar(c, arrays, how)",
        targets=("srcgrad.rules.helpers.stacked_bar",), nout=_count_arrays,
        vjp={"c": "xp.hstack(g) if how == 'hstack' else xp.vstack(g) if how == 'vstack'"
                  " else xp.dstack(g) if how == 'dstack' else xp.column_stack(g)"},
        jvp={"c": "stacked_bar(c_t, arrays, how)"},
        doc="reads only the shapes of `arrays`")

for _name in ("atleast_1d", "atleast_2d", "atleast_3d"):
    defrule(_name, "x", f"xp.{_name}(x)", targets=(f"numpy.{_name}",),
            vjp={"x": "xp.reshape(g, xp.shape(x))"}, jvp={"x": f"xp.{_name}(x_t)"},
            doc="one argument (several arguments: call it on each)")

# `a, b, c = x`: generated code unpacks as the user wrote it, so a length that
# differs from the target count raises Python's ValueError at run time.
defrule("unpack", "x, count", "x", nout=lambda args: args["count"],
        vjp={"x": "xp.stack(g, axis=0)"}, jvp={"x": "stack_bar(x_t, ans, 0)"},
        doc="`a, b = x` of an array (along axis 0) or of a shape; the count is the "
            "number of targets")


def _split_count(args):
    ios = args["indices_or_sections"]
    try:
        return int(ios) if isinstance(ios, Integral) or getattr(ios, "ndim", 1) == 0 \
            else len(ios) + 1
    except TypeError:
        return len(ios) + 1


defrule("split", "x, indices_or_sections, axis=0", "xp.split(x, indices_or_sections, axis=axis)",
        targets=("numpy.split",), nout=_split_count,
        vjp={"x": "xp.concatenate(g, axis=axis)"},
        jvp={"x": "xp.split(x_t, indices_or_sections, axis=axis)"},
        doc="multi-output: g is a tuple with a (possibly zero) cotangent for every piece")

defrule("split_bounds", "shape, axis, indices_or_sections",
        "split_bounds(shape, axis, indices_or_sections)",
        targets=("srcgrad.rules.helpers.split_bounds",), nondiff=True, static_out=True,
        doc="the pieces' bounds, for the Array-API spelling of split")

defrule("tile", "x, reps", "xp.tile(x, reps)", targets=("numpy.tile",),
        vjp={"x": "tile_bar(g, xp.shape(x), reps)"}, jvp={"x": "xp.tile(x_t, reps)"})

defrule("repeat", "x, repeats, axis=None", "xp.repeat(x, repeats, axis=axis)",
        targets=("numpy.repeat",), method="repeat",
        vjp={"x": "repeat_bar(g, xp.shape(x), repeats, axis)"},
        jvp={"x": "xp.repeat(x_t, repeats, axis=axis)"})

defrule("pad", "x, pad_width, mode='constant', constant_values=0",
        "xp.pad(x, pad_width, mode=mode, constant_values=constant_values) if mode == 'constant'"
        " else xp.pad(x, pad_width, mode=mode)",
        targets=("numpy.pad",),
        vjp={"x": "pad_bar(g, xp.shape(x), pad_width, linear_pad_mode(mode))"},
        jvp={"x": "xp.pad(x_t, pad_width, mode=linear_pad_mode(mode))"},
        doc="modes constant (constant_values not differentiated), edge, reflect, symmetric, "
            "wrap; other modes are refused at compile time (a CompileError at the call)")

defrule("diff", "x, n=1, axis=-1", "xp.diff(x, n=n, axis=axis)", targets=("numpy.diff",),
        vjp={"x": "diff_bar(g, n, axis)"}, jvp={"x": "xp.diff(x_t, n=n, axis=axis)"},
        doc="prepend/append are not supported")

defrule("diff_bar", "c, n, axis", "diff_bar(c, n, axis)",
        targets=("srcgrad.rules.helpers.diff_bar",),
        vjp={"c": "xp.diff(g, n=n, axis=axis)"}, jvp={"c": "diff_bar(c_t, n, axis)"})

defrule("sort", "x, axis=-1", "xp.sort(x, axis=axis)", targets=("numpy.sort",),
        vjp={"x": "take_along_bar(g, xp.shape(x), xp.argsort(x, axis=axis), axis)"},
        jvp={"x": "xp.take_along_axis(x_t, xp.argsort(x, axis=axis), axis=axis)"},
        doc="ties: each sorted position passes its gradient to the element argsort puts "
            "there (sort is continuous at ties, so any assignment is a one-sided derivative)")

# ---------------------------------------------------------------- indexing
defrule("take", "x, indices, axis=None", "xp.take(x, indices, axis=axis)",
        targets=("numpy.take",), method="take",
        vjp={"x": "take_bar(g, xp.shape(x), indices, axis)"},
        jvp={"x": "xp.take(x_t, indices, axis=axis)"},
        doc="repeated indices accumulate; mode='raise' only")

defrule("take_bar", "c, shape, indices, axis", "take_bar(c, shape, indices, axis)",
        targets=("srcgrad.rules.helpers.take_bar",),
        vjp={"c": "xp.take(g, indices, axis=axis)"},
        jvp={"c": "take_bar(c_t, shape, indices, axis)"})

defrule("take_along_axis", "x, indices, axis=-1", "xp.take_along_axis(x, indices, axis=axis)",
        targets=("numpy.take_along_axis",),
        vjp={"x": "take_along_bar(g, xp.shape(x), indices, axis)"},
        jvp={"x": "xp.take_along_axis(x_t, indices, axis=axis)"},
        doc="repeated indices accumulate")

defrule("take_along_bar", "c, shape, indices, axis", "take_along_bar(c, shape, indices, axis)",
        targets=("srcgrad.rules.helpers.take_along_bar",),
        vjp={"c": "xp.take_along_axis(g, indices, axis=axis)"},
        jvp={"c": "take_along_bar(c_t, shape, indices, axis)"})

# `index` is the subscript: a constant, or a pack of constants, vars and slices.
defrule("getitem", "x, index", "x[index]",
        vjp={"x": "scatter_index(g, xp.shape(x), index)"},
        jvp={"x": "x_t[index]"},
        doc="gathers with repeated indices accumulate (add.at)")


# getitem as the Array API renders a gather (Note [Scatter-add without add.at])
defrule("gather_index", "x, index", "gather_index(x, index)",
        targets=("srcgrad.rules.helpers.gather_index",),
        vjp={"x": "scatter_index(g, xp.shape(x), index)"},
        jvp={"x": "gather_index(x_t, index)"},
        doc="x[index], one integer array among slices read as NumPy reads it")


# `x[index] = v` as a function (Note [Mutation at trace time] in srcgrad.frontend.mutation).
defrule("setitem", "x, index, v", "setitem(x, index, v)",
        targets=("srcgrad.rules.helpers.setitem",),
        vjp={"x": "setitem(g, index, 0.0)", "v": "unbroadcast(setitem_bar(g, index), xp.shape(v))"},
        jvp={"x": "setitem(x_t, index, 0.0)", "v": "setitem(xp.zeros_like(ans), index, v_t)"},
        doc="a copy of x with v written at index; repeated integer indices: the last write "
            "wins, and only it receives a gradient")

defrule("setitem_bar", "c, index", "setitem_bar(c, index)",
        targets=("srcgrad.rules.helpers.setitem_bar",),
        vjp={"c": "setitem(xp.zeros_like(c), index, g)"}, jvp={"c": "setitem_bar(c_t, index)"},
        doc="c[index], zero where a repeated index was overwritten")

# The identity on x, checking that argument `base` (written in place) shares no memory
# with the other arguments (Note [Mutation at trace time]).
defrule("no_alias", "x, base, *others", "no_alias(x, base, *others)",
        targets=("srcgrad.rules.helpers.no_alias",), alias_check=True,
        vjp={"x": "g"}, jvp={"x": "x_t"},
        doc="identity; raises where a written argument shares memory with another")
# no_alias under sg.vmap inside code another transform traces (srcgrad.passes.batch): each
# example's check, `mapped[k]` saying which of base and others carry the batch axis 0
# (Note [Writes into mapped arguments] in srcgrad.pipeline.vmap).
defrule("no_alias_batched", "x, base, mapped, *others", "no_alias_batched(x, base, mapped, *others)",
        targets=("srcgrad.rules.helpers.no_alias_batched",), alias_check=True,
        vjp={"x": "g"}, jvp={"x": "x_t"},
        doc="identity; raises where an example's written argument shares memory with another's")

# A Python number as a NumPy value, so that an operator on it follows NumPy's rules
# (inf or nan at a singular point, not ZeroDivisionError): Note [Scalar code].
defrule("numpy_number", "x", "numpy_number(x)", targets=("srcgrad.rules.helpers.numpy_number",),
        vjp={"x": "g"}, jvp={"x": "x_t"})

# The identity, with a run-time check that grad's output is a scalar; the compiler
# inserts it when it cannot prove the output is 0-d.
defrule("ensure_scalar", "x, name", "ensure_scalar(x, name)",
        targets=("srcgrad.rules.helpers.ensure_scalar",),
        vjp={"x": "g"}, jvp={"x": "x_t"})


# ---------------------------------------------------------------- custom Functions
# Note [Custom Functions] in srcgrad.frontend.function. `custom_call` names the
# outputs of a Function's inlined forward; its derivatives are the user's
# backward/jvp, traced by the passes (never formulas), so it is a structural row.
defrule("custom_call", "outputs, inputs", "outputs", nondiff=True,
        nout=lambda args: len(args["outputs"]))

defrule("check_grad", "grad, shape, name, index", "check_grad(grad, shape, name, index)",
        targets=("srcgrad.rules.helpers.check_grad",),
        vjp={"grad": "unbroadcast(g, xp.shape(grad))"},
        jvp={"grad": "check_grad(grad_t, shape, name, index)"})

# A jvp's tangent of an output, checked for the output's shape; and the tangent the jvp
# receives for an input that has none (zeros, or None for a number or an integer array).
defrule("check_tangent", "tangent, shape", "check_tangent(tangent, shape)",
        targets=("srcgrad.rules.helpers.check_tangent",),
        vjp={"tangent": "g"}, jvp={"tangent": "check_tangent(tangent_t, shape)"})
defrule("zero_tangent", "x", "zero_tangent(x)", targets=("srcgrad.rules.helpers.zero_tangent",),
        nondiff=True)

# math.<name>(x) of a batched x (srcgrad.passes.batch_scalars) is NumPy's row on the
# checked value: x, or math's ValueError / OverflowError where an example's call raises.
defrule("math_checked", "x, name", "math_checked(x, name)",
        targets=("srcgrad.rules.helpers.math_checked",), vjp={"x": "g"}, jvp={"x": "x_t"},
        doc="x; raises as Python's math.<name> would for an element (not NumPy's nan or inf)")

# An input of a batched `if` branch on a mapped test (srcgrad.passes.batch_control): x,
# whose cotangent is selected (not multiplied) to the examples that take the branch, so an
# inf or nan of the branch an example does not take stops here.
defrule("taken_input", "x, taken", "taken_input(x, taken)",
        targets=("srcgrad.rules.helpers.taken_input",),
        vjp={"x": _ub("xp.where(taken, g, 0)", "x")}, jvp={"x": "xp.where(taken, x_t, 0)"},
        doc="the batched branch's input: x; its cotangent where the example takes the branch")

# Differentiating it is a CompileError (srcgrad.passes.vjp / jvp): it only appears in
# generated backward code, so reaching it means a second derivative.
defrule("differentiable_once", "x, name", "differentiable_once(x, name)",
        targets=("srcgrad.rules.helpers.differentiable_once",),
        vjp={"x": "differentiable_once(g, name)"}, jvp={"x": "differentiable_once(x_t, name)"})

# In-place writes into what a Function saved (Note [Saved values written in place] in
# srcgrad.frontend.versions): a flag computed at the write, checked where the backward
# reads the saved value.
defrule("storage_written", "saved, target", "storage_written(saved, target)",
        targets=("srcgrad.rules.helpers.storage_written",), nondiff=True, static_out=True)
defrule("check_saved", "x, written, name, saved_at, writes",
        "check_saved(x, written, name, saved_at, writes)",
        targets=("srcgrad.rules.helpers.check_saved",), effect=True,
        vjp={"x": "g"}, jvp={"x": "x_t"},
        doc="identity; raises where an in-place write changed a value a Function saved")

# Saved-tensor hooks (Note [Saved-tensor hooks] in srcgrad.passes.hooks): `pack`
# and `unpack` are the hook functions, parameters of the generated forward/backward.
defrule("saved_pack", "pack, x", "pack(x)", nondiff=True)
defrule("saved_unpack", "unpack, packed", "unpack(packed)", nondiff=True)


# ---------------------------------------------------------------- control flow (Note [Regions])
# Structural: codegen writes `if`/`for`/`while` blocks and passes/vjp.py differentiates
# them; the renders are never used. Their derivatives are not formulas.
defrule("cond", "pred", "pred", control=True, doc="if/else on a run-time condition")
defrule("for_range", "start, stop, step, inits", "range(start, stop, step)", control=True,
        doc="a loop over range(...) with loop-carried values")
defrule("while_loop", "test, inits", "test", control=True,
        doc="a while loop; the test is carried")
# `print(...)` in compiled code prints in the forward pass, where the user wrote it.
defrule("print", "*values, sep=' ', end='\\n'", "print(*values, sep=sep, end=end)",
        targets=("builtins.print",), nondiff=True, effect=True, io=True, nout=0,
        doc="prints in the forward pass; nothing to differentiate")
# `x is None` where x may be None at run time (a parameter with a None default).
defrule("is_", "x, y", "x is y", targets=("operator.is_",), nondiff=True, static_out=True)
defrule("is_not", "x, y", "x is not y", targets=("operator.is_not",), nondiff=True, static_out=True)
# The tape of a loop's reverse mode: values its adjoint reads, one entry per iteration.
defrule("tape_new", "", "[]", nondiff=True, static_out=True, effect=True)
defrule("tape_push", "tape, values", "tape.append(values)", nondiff=True, effect=True, nout=0)
defrule("tape_pop", "tape", "tape.pop()", nondiff=True, effect=True)
defrule("tape_len", "tape", "len(tape)", nondiff=True, static_out=True)
defrule("tape_copy", "tape", "list(tape)", nondiff=True)  # in the backward: not static_out

# Issue 29's NumPy sweep: its rows live in their own file (docs/numpy_coverage.md).
import srcgrad.rules.table_sweep  # noqa: E402, F401
import srcgrad.rules.table_sweep2  # noqa: E402, F401

# The eager runtime's torch rows (Note [Eager rows at kinks and poles]); no targets.
from srcgrad.rules import torch_rows  # noqa: E402,F401
