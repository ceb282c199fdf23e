"""How each row of the table is written for a namespace that lacks NumPy's names.

Note [Spellings]
~~~~~~~~~~~~~~~~
Rules render with NumPy's names (`xp.transpose`, `xp.concatenate`, `xp.shape(x)`),
which NumPy and CuPy have. The Array API (array_api_strict, and dask through
array_api_compat) names some of them differently and lacks others. Rather than a
second table, `ARRAY_API` lists only the rows that differ: a row's replacement
render (over the same parameter names, in the Array API's names), or a `Refused`
with the reason; every other row's render is already valid Array-API code.
srcgrad.codegen.emit looks a row up here while rendering for an Array-API target
(Note [Array namespaces] in srcgrad.backend), and a refused row is a CompileError
naming the op and the namespace. A conditional expression whose test is static
after substitution (`axes is None`) is folded by emit, so a render may branch on a
static parameter.

tests/backends/test_array_api.py runs the rule table's gradcheck cases on
array_api_strict and checks that every refused row is refused, with its reason.
"""

from __future__ import annotations

from srcgrad.ir.core import FrozenFields


class Refused(FrozenFields):
    """A row the Array API cannot express, and why (a frozen dataclass written out as
    srcgrad.ir.core.Loc is: issue 15)."""

    __match_args__ = ("reason",)

    def __init__(self, reason: str):
        object.__setattr__(self, "reason", reason)


_REVERSED = "tuple(range(x.ndim - 1, -1, -1))"
# (the loop variable is `_d_`, a name no operand has: an operand named `i` or `j`, rot90's
# own axes, was captured by it, fuzz seed 2648651)
_SWAPPED = ("tuple(axis2 % x.ndim if _d_ == axis1 % x.ndim else axis1 % x.ndim if _d_ == axis2 % x.ndim "
            "else _d_ for _d_ in range(x.ndim))")

# NumPy's isclose: |a - b| <= atol + rtol |b|, equal infinities close, nan only with equal_nan
_CLOSE = ("((a == b) | (xp.abs(xp.asarray(a - b)) <= (1e-08 if atol is None else atol)"
          " + (1e-05 if rtol is None else rtol) * xp.abs(xp.asarray(b))))")
_ISCLOSE = (f"{_CLOSE} if not equal_nan else "
            f"({_CLOSE} | (xp.isnan(xp.asarray(a)) & xp.isnan(xp.asarray(b))))")



def _promoted(n: int, x: str = "a") -> str:
    """NumPy's atleast_{n}d of `x` (new axes in front; a 0-d x may be a Python number)."""
    return f"xp.reshape(xp.asarray({x}), (1,) * max(0, {n} - xp.asarray({x}).ndim) + xp.asarray({x}).shape)"


# atleast_3d: a vector's (1, n, 1), a matrix's (m, n, 1)
_AT3 = ("xp.reshape(xp.asarray({0}), (1, 1, 1) if xp.asarray({0}).ndim == 0 else (1,) "
        "+ xp.asarray({0}).shape + (1,) if xp.asarray({0}).ndim == 1 else xp.asarray({0}).shape "
        "+ (1,) * max(0, 3 - xp.asarray({0}).ndim))")

_REM = "xp.remainder(xp.asarray(x), y)"
# nanmax/nanmin: the max/min of the values with nan read as -inf/+inf, nan where every
# value of the slice is nan (NumPy's value, with its RuntimeWarning not raised)
_NANEXT = ("xp.where(xp.all(xp.isnan(x), axis=axis, keepdims=keepdims), xp.nan, "
           "xp.{0}(xp.where(xp.isnan(x), {1}xp.inf, x), axis=axis, keepdims=keepdims))")
_EQUAL = "(xp.asarray(a1) == xp.asarray(a2))"
_BOTH_NAN = "(xp.isnan(xp.asarray(a1)) & xp.isnan(xp.asarray(a2)))"

ARRAY_API: dict = {
    "nanmax": _NANEXT.format("max", "-"),
    "nanmin": _NANEXT.format("min", ""),
    "array_equal": f"(xp.asarray(a1).shape == xp.asarray(a2).shape and bool(xp.all({_EQUAL} "
                   f"if not equal_nan else {_EQUAL} | {_BOTH_NAN})))",
    # x may be a Python number (emit writes `x.shape` for a known array: Note [Python
    # numbers in other namespaces])
    "shape": "xp.asarray(x).shape",
    "ndim": "xp.asarray(x).ndim",
    "size": "math.prod(xp.asarray(x).shape)",
    "exp2": "2.0 ** x",
    "cbrt": "xp.sign(x) * xp.abs(x) ** (1.0 / 3.0)",  # (to rounding: 27 -> 3 + 4e-16)
    "arcsin": "xp.asin(x)",
    "arccos": "xp.acos(x)",
    "arctan": "xp.atan(x)",
    "arcsinh": "xp.asinh(x)",
    "arccosh": "xp.acosh(x)",
    "arctanh": "xp.atanh(x)",
    "arctan2": "xp.atan2(x, y)",
    "conjugate": "xp.conj(x)",
    "deg2rad": "x * (math.pi / 180.0)",
    "rad2deg": "x * (180.0 / math.pi)",
    "copy": "xp.asarray(x, copy=True)",
    "astype": "xp.astype(x, getattr(xp, dtype) if isinstance(dtype, str) else dtype)",
    "reshape": "xp.reshape(x, (shape,) if isinstance(shape, int) else shape)",
    "tile": "xp.tile(x, (reps,) if isinstance(reps, int) else reps)",
    # the Array API's full takes a Python number: an array fill value is broadcast
    "full": "xp.full(shape, fill_value, dtype=dtype) if isinstance(fill_value, (int, float)) "
            "else xp.broadcast_to(xp.asarray(fill_value, dtype=dtype), "
            "(shape,) if isinstance(shape, int) else shape)",
    "full_like": "xp.full_like(x, fill_value, dtype=dtype) if isinstance(fill_value, (int, float)) "
                 "else xp.broadcast_to(xp.asarray(fill_value, dtype=x.dtype if dtype is None "
                 "else dtype), x.shape)",
    "rint": "xp.round(x)",
    "round": "xp.round(x) if decimals == 0 else _refuse_decimals",
    "identity": "xp.eye(n, dtype=dtype)",
    "arange": "xp.arange(start, stop, 1 if step is None else step, dtype=dtype)",
    "var": "xp.var(x, axis=axis, correction=ddof, keepdims=keepdims)",
    "std": "xp.std(x, axis=axis, correction=ddof, keepdims=keepdims)",
    "cumsum": "xp.cumulative_sum(xp.reshape(x, (-1,)) if axis is None else x, axis=0 if axis is None "
              "else axis)",
    "cumprod": "xp.cumulative_prod(xp.reshape(x, (-1,)) if axis is None else x, axis=0 if axis is None "
               "else axis)",
    # NumPy's default and 'fro' are the 2-norm of the flattened axes; an `ord` with an int
    # axis is a vector norm, and so is one with no axis of a vector (vector_only raises,
    # when called, for a matrix: the shape-generic code cannot lower a matrix norm to
    # singular values as a NumPy variant, whose shapes are known, does).
    "norm": "xp.linalg.vector_norm(x, axis=axis, keepdims=keepdims) if ord is None or ord == 'fro' "
            "else (xp.linalg.vector_norm(x, ord=ord, axis=axis, keepdims=keepdims) "
            "if isinstance(axis, int) else xp.linalg.vector_norm(vector_only(x, axis, ord), ord=ord, "
            "axis=axis, keepdims=keepdims))",
    "dot": "x * y if x.ndim == 0 or y.ndim == 0 else "
           "xp.tensordot(x, y, axes=((x.ndim - 1,), (max(y.ndim - 2, 0),)))",
    "inner": "xp.tensordot(x, y, axes=((x.ndim - 1,), (y.ndim - 1,)))",
    "outer": "xp.reshape(x, (-1, 1)) * xp.reshape(y, (1, -1))",
    # (the Array API has no einsum: helpers.einsum_contract, Note [Einsum as matmuls];
    # einsum_bar calls it in such a namespace)
    "einsum": "einsum_contract(subscripts, x) if y is None else einsum_contract(subscripts, x, y)",
    "trace": "xp.sum(xp.linalg.diagonal(xp.moveaxis(x, (axis1, axis2), (-2, -1)), offset=offset), "
             "axis=-1)",
    "diagonal": "xp.linalg.diagonal(xp.moveaxis(x, (axis1, axis2), (-2, -1)), offset=offset)",
    "tril": "xp.tril(x, k=k)",
    "triu": "xp.triu(x, k=k)",
    "eigh": "xp.linalg.eigh(x) if UPLO == 'L' else _refuse_uplo",
    "eigvalsh": "xp.linalg.eigvalsh(x) if UPLO == 'L' else _refuse_uplo",
    "ravel": "xp.reshape(x, (-1,))",
    "flatten": "xp.reshape(x, (-1,))",
    "transpose": f"xp.permute_dims(x, {_REVERSED} if axes is None else axes)",
    "T": f"xp.permute_dims(x, {_REVERSED})",
    "matrix_transpose": "xp.matrix_transpose(x)",
    "swapaxes": f"xp.permute_dims(x, {_SWAPPED})",
    "expand_dims": "xp.expand_dims(x, axis=axis)",
    "squeeze": "xp.squeeze(x, axis=tuple(i for i, n in enumerate(x.shape) if n == 1) "
               "if axis is None else axis)",
    "flip": "xp.flip(x, axis=axis)",
    "concatenate": "xp.concat(arrays, axis=axis)",
    "fliplr": "xp.flip(x, axis=1)",
    "flipud": "xp.flip(x, axis=0)",
    "logaddexp2": "xp.logaddexp(x * math.log(2.0), y * math.log(2.0)) / math.log(2.0)",
    "vdot": "xp.vecdot(xp.reshape(x, (-1,)), xp.reshape(y, (-1,)))",
    # (the pieces as slices: helpers.split_bounds says where, within the axis)
    "split": "tuple(xp.asarray(x)[(slice(None),) * (axis % xp.asarray(x).ndim) + (slice(a, b), ...)] "
             "for a, b in split_bounds(xp.asarray(x).shape, axis, indices_or_sections))",
    "pad": Refused("the Array API has no pad"),
    "pad_bar": Refused("the Array API has no pad"),
    "diff": "xp.diff(x, n=n, axis=axis)",
    # the Array API's take wants a 1-d index array and an axis (NumPy's None: the flat
    # array): helpers.gather_index takes any index array along one axis, a 0-d one
    # (np.take(s, k, axis=ax), median's middle element: fuzz seed 2610161) dropping it
    "take": "gather_index(xp.reshape(x, (-1,)) if axis is None else x, (slice(None),) * "
            "(0 if axis is None else axis % xp.asarray(x).ndim) + (xp.asarray(indices),))",
    # NumPy's promotions (a 0-d x may be a Python number): atleast_2d puts new axes in
    # front, atleast_3d a vector's between (1, n, 1) and a matrix's after
    "atleast_1d": _promoted(1, "x"),
    "atleast_2d": _promoted(2, "x"),
    "atleast_3d": _AT3.format("x"),
    # hstack/vstack/dstack/column_stack: a concatenation of the promoted elements (as NumPy's)
    "hstack": f"xp.concat([{_promoted(1)} for a in arrays], axis=0 if xp.asarray(arrays[0]).ndim <= 1 "
              f"else 1)",
    "vstack": f"xp.concat([{_promoted(2)} for a in arrays], axis=0)",
    "dstack": f"xp.concat([{_AT3.format('a')} for a in arrays], axis=2)",
    "column_stack": "xp.concat([xp.reshape(xp.asarray(a), (-1, 1)) if xp.asarray(a).ndim < 2 else a "
                    "for a in arrays], axis=1)",
    # `a, b = x`: the Array API does not iterate an array (array_api_strict raises); a shape
    # is a tuple
    "unpack": "x if isinstance(x, tuple) else xp.unstack(x)",
    # diag of a vector: the eye of its k-th diagonal times the vector padded to its size, as
    # a column (k >= 0: row i holds v[i]) or a row (k < 0: column i holds v[i])
    "diag": "xp.linalg.diagonal(v, offset=k) if v.ndim == 2 else xp.eye(v.shape[0] + abs(k), k=k, "
            "dtype=v.dtype) * xp.reshape(xp.concat([v, xp.zeros((abs(k),), dtype=v.dtype)]), "
            "(-1, 1) if k >= 0 else (1, -1))",
    "repeat_bar": Refused("the transpose of repeat needs a cumulative sum with take (not "
                          "implemented for the Array API)"),
    # issue 29's sweep rows (srcgrad/rules/table_sweep.py)
    "sinc": "xp.where(x == 0, 1.0, xp.sin(math.pi * x) / (math.pi * xp.where(x == 0, 1.0, x)))",
    "heaviside": "xp.where(x < 0, 0.0, xp.where(x > 0, 1.0, y))",
    # C's fmod from the Array API's remainder (floored): where the two differ (a nonzero
    # remainder of the other sign than x), fmod is the remainder less y
    "fmod": f"xp.where(({_REM} != 0) & (({_REM} < 0) != (xp.asarray(x) < 0)), {_REM} - y, {_REM})",
    "nan_to_num": "xp.where(x == -xp.inf, (-xp.finfo(x.dtype).max if neginf is None else neginf), "
                  "xp.where(x == xp.inf, (xp.finfo(x.dtype).max if posinf is None else posinf), "
                  "xp.where(xp.isnan(x), nan, x)))",
    # (the Array API's axis counts from the end of the broadcast shape: negative only)
    "cross": "xp.linalg.cross(a, b, axis=-1 if axis is None else axis if axis < 0 "
             "else axis - max(a.ndim, b.ndim))",
    "kron": "kron_blocks(a, b)",
    "polyval": "polyval_horner(p, x)",
    "trapezoid": "trapezoid_uniform(y, dx, axis)",
    "convolve": "convolve_full(a, v)",
    "frexp_exponent": "frexp_exponent(x)",
    "ediff1d": "xp.diff(xp.reshape(ary, (-1,)))",
    "nansum": "xp.sum(xp.where(xp.isnan(x), 0.0, x), axis=axis, keepdims=keepdims)",
    # integer and boolean results (their derivative is 0): the Array API's names
    "isneginf": "x == -xp.inf",
    "isposinf": "x == xp.inf",
    # (xp.asarray: x may be a Python float, which has no dtype: fuzz seed 2600845)
    "isreal": "xp.imag(x) == 0 if xp.isdtype(xp.asarray(x).dtype, 'complex floating') "
              "else xp.ones_like(xp.asarray(x), dtype=xp.bool)",
    "iscomplex": "xp.imag(x) != 0 if xp.isdtype(xp.asarray(x).dtype, 'complex floating') "
                 "else xp.zeros_like(xp.asarray(x), dtype=xp.bool)",
    "fix": "xp.trunc(x)",
    "isclose": _ISCLOSE,
    # (fuzz seed 2400409: array_api_strict's isin takes integer arrays only)
    "isin": "xp.any(xp.reshape(xp.asarray(element), xp.asarray(element).shape + (1,)) == "
            "xp.reshape(xp.asarray(test_elements), (-1,)), axis=-1) != invert",
    # x1 * 2**x2 in two halves of the exponent, so a large one (2**1100) does not overflow
    # where the product does not: exact, as NumPy's (powers of two)
    "ldexp": "xp.asarray(x1) * xp.pow(2.0, xp.astype(xp.asarray(x2) // 2, xp.asarray(x1).dtype)) * "
             "xp.pow(2.0, xp.astype(xp.asarray(x2) - xp.asarray(x2) // 2, xp.asarray(x1).dtype))",
    "nanargmax": "nan_arg_extreme(a, axis, keepdims, True)",
    "nanargmin": "nan_arg_extreme(a, axis, keepdims, False)",
    "digitize": "digitize_sorted(x, bins, right)",
    # the next float away from 0 (from +0 for -0.0, as NumPy's), less x
    "spacing": "xp.nextafter(xp.asarray(x), xp.where(xp.asarray(x) < 0, xp.full_like(xp.asarray(x), "
               "-xp.inf), xp.full_like(xp.asarray(x), xp.inf))) - xp.asarray(x)",
    # (shapes that do not broadcast are not equivalent: False, as NumPy's)
    "array_equiv": "all(_p_ == _q_ or 1 in (_p_, _q_) for _p_, _q_ in zip(xp.asarray(a1).shape[::-1], "
                   "xp.asarray(a2).shape[::-1])) and bool(xp.all(xp.asarray(a1) == xp.asarray(a2)))",
    "allclose": f"bool(xp.all({_ISCLOSE}))",
    # issue 29's second sweep (srcgrad/rules/table_sweep2.py)
    # (a tuple, not a call: emit makes no operand an array, and x may be a Python float,
    # fuzz seed 2647261)
    "modf": "(xp.asarray(x) - xp.trunc(xp.asarray(x)), xp.trunc(xp.asarray(x)))",
    "pinv": "xp.linalg.pinv(a) if rcond is None else xp.linalg.pinv(a, rtol=rcond)",
    "nanmean": "xp.sum(xp.where(xp.isnan(x), 0.0, x), axis=axis, keepdims=keepdims) / "
               "xp.sum(xp.astype(xp.logical_not(xp.isnan(x)), x.dtype), axis=axis, keepdims=keepdims)",
}

# Placeholders a render names on a static branch it cannot take: the reason it gives.
REFUSED_BRANCHES = {
    "_refuse_decimals": "round with decimals != 0 (the Array API's round has no decimals)",
    "_refuse_uplo": "UPLO='U' (the Array API's eigh reads one triangle of its choice)",
}


# Rows whose result is boolean, and the arithmetic rows that read a boolean operand as a
# number in NumPy (a tie mask times a cotangent): emit casts it for the Array API.
BOOLEAN_RESULTS = frozenset({"less", "less_equal", "greater", "greater_equal", "equal", "not_equal",
                             "isnan", "isinf", "isfinite", "logical_not", "logical_and",
                             "logical_or", "logical_xor", "isin", "isclose", "signbit",
                             "isneginf", "isposinf"})
ARITHMETIC = frozenset({"add", "subtract", "multiply", "divide"})
# Rows whose result is an integer array: NumPy promotes it with a float operand in arithmetic
# (`x * np.argmax(x)`), the Array API refuses mixed kinds, so emit casts it to the float's dtype.
INT_ARRAY_RESULTS = frozenset({"argmax", "argmin", "nanargmax", "nanargmin", "argsort", "searchsorted",
                               "digitize", "count_nonzero"})
# Rows whose result has their first operand's dtype (an integer array stays one)
SAME_DTYPE = frozenset({"unbroadcast", "reshape", "broadcast_to", "expand_dims", "squeeze",
                        "transpose", "T", "matrix_transpose", "swapaxes", "getitem", "ravel",
                        "flatten", "copy", "negative", "sum", "flip",
                        # (a cotangent spread back: fuzz seed 2796941, `g * argmax` with g a
                        # getitem's transpose, of the seed 1.0)
                        "scatter_index", "expand_reduced", "moveaxis", "tile", "roll"})
# Rows whose result is a Python int (an index's one axis: emit's Note [Python numbers in
# other namespaces])
INT_RESULTS = frozenset({"py_int", "ndim", "size", "tape_len", "pymath_floor", "pymath_ceil",
                         "pymath_trunc", "pymath_isqrt", "pymath_factorial", "pymath_comb",
                         "pymath_perm", "pymath_gcd"})
COUNTS = frozenset({"sum"})  # NumPy counts a mask with sum; the Array API sums numbers only

# Rows whose Array-API functions take Python numbers where NumPy's do (a fill value, a
# bound): those parameters, left as they are; every other operand of a call that may be a
# Python number is made an array (`xp.asarray(<float>)`: emit's Note [Python numbers in
# other namespaces]), clip's `x` too.
SCALAR_ARGS = {"full": frozenset({"fill_value"}), "full_like": frozenset({"fill_value"}),
               "clip": frozenset({"a_min", "a_max"}), "shift": frozenset({"fill"})}

# Rows with an integer or boolean result (no derivative, so not an array parameter by
# their vjp) whose functions take these operands as arrays: a Python float there is made
# one (`xp.argmax(c)` of a float raises in array_api_strict; fuzz seed 2768435).
ARRAY_OPERANDS = {"argmax": frozenset({"x"}), "argmin": frozenset({"x"}),
                  "argsort": frozenset({"x"}), "all": frozenset({"x"}), "any": frozenset({"x"}),
                  "count_nonzero": frozenset({"x"}), "nanargmax": frozenset({"a"}),
                  "nanargmin": frozenset({"a"}), "digitize": frozenset({"x", "bins"}),
                  "isin": frozenset({"element", "test_elements"}),
                  "searchsorted": frozenset({"a", "v"})}


# Rows where NumPy's function is more lenient than every other namespace's, whatever
# its spelling (CuPy is spelled as NumPy): their render for every namespace but NumPy.
# - an array operand that may be a Python number (a gradient's seed `1.0`, a value the
#   scalar pass made a float, `1.0 / size` of shape-generic code): NumPy takes any
#   array_like, CuPy's `broadcast_to` and `zeros_like` raise TypeError for a float, as
#   the Array API's do (xp.asarray returns an array as it is);
# - column_stack of 0-d or 3-d arrays, which CuPy refuses: NumPy's definition (a column
#   of each array under 2-d, joined along axis 1); a namespace without
#   `xp.concatenate` (the Array API's) still refuses the row by name;
# - solve of a matrix right-hand side whose batch axes differ from a's, which NumPy
#   broadcasts and CuPy refuses (srcgrad.rules.helpers.broadcast_solve).
OTHER_NAMESPACES = {
    "broadcast_to": "xp.broadcast_to(xp.asarray(x), shape)",
    **{f"{kind}_like": f"xp.{kind}_like(xp.asarray(x), dtype=dtype)" for kind in ("ones", "empty")},
    # the zero cotangent of a value that may be None (a loop's `return` value where the loop
    # did not return), which NumPy's zeros_like makes an object 0 and no other namespace
    # takes: a float 0, unread, as NumPy's
    "zeros_like": "xp.zeros_like(xp.asarray(0.0 if x is None else x), dtype=dtype)",
    "column_stack": "xp.concatenate([xp.reshape(a, (-1, 1)) if a.ndim < 2 else a for a in arrays], axis=1)",
    "solve": "broadcast_solve(a, b)",
}


def spelling_of(rule_name: str, spelling: str):
    """The render of row `rule_name` for `spelling` ("numpy": None, the rule's own),
    or a `Refused`."""
    if spelling == "numpy":
        return None
    return ARRAY_API.get(rule_name)
