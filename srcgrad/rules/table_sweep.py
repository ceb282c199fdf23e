"""Rows of issue 29's NumPy sweep (docs/numpy_coverage.md), imported by table.py.

Each row's formulas call only other rows (Note [Formula constructs] in table.py), so its
own derivative is exact to any order; each row has cases in tests/rules/cases.py and
a spelling in the compiler fuzzer's grammar (tests/fuzz/generator.py, SWEEP_UNARY and
SWEEP_BINARY).
"""

from srcgrad.rules.core import defrule


def _ub(expr, p):
    return f"unbroadcast({expr}, xp.shape({p}))"


# ---------------------------------------------------------------- elementwise
# sinc'(x) = (cos(pi x) - sinc(x)) / x loses digits near 0 and is 0/0 at 0: there its
# Taylor series (to x**7; the next term is below 1e-17 for |x| < 0.05), whose own
# derivatives are the series of sinc'' and beyond, so every order is exact at 0 too.
_SMALL = "(xp.abs(x) < 0.05)"
_SINC_D = (f"xp.where({_SMALL}, x * (-3.289868133696453 + x * x * (3.246969701133414"
           " + x * x * (-1.144510944732505 + x * x * 0.20918278254123832))),"
           f" (xp.cos(3.141592653589793 * x) - ans) / xp.where({_SMALL}, 1.0, x))")
defrule("sinc", "x", "xp.sinc(x)", targets=("numpy.sinc",), elementwise=True,
        vjp={"x": f"g * {_SINC_D}"}, jvp={"x": f"x_t * {_SINC_D}"},
        doc="at 0: derivative 0, second derivative -pi**2/3 (a Taylor series for |x| < 0.05)")

defrule("heaviside", "x, y", "xp.heaviside(x, y)", targets=("numpy.heaviside",),
        elementwise=True,
        vjp={"y": _ub("xp.where(x == 0, g, 0)", "y")}, jvp={"y": "xp.where(x == 0, y_t, 0)"},
        doc="d/dx1 is 0 (a step; the jump at x1 == 0 is not differentiated); d/dx2 is 1 "
            "where x1 == 0, else 0")

defrule("copysign", "x, y", "xp.copysign(x, y)", targets=("numpy.copysign",),
        elementwise=True,
        vjp={"x": _ub("g * xp.sign(x) * xp.copysign(1.0, y)", "x")},
        jvp={"x": "x_t * xp.sign(x) * xp.copysign(1.0, y)"},
        doc="d/dx1 = sign(x1) * (+-1 by the sign bit of x2), 0 at x1 == 0 as abs; d/dx2 is 0")

defrule("fmod", "x, y", "xp.fmod(x, y)", targets=("numpy.fmod",), elementwise=True,
        vjp={"x": _ub("g", "x"), "y": _ub("-g * xp.trunc(x / y)", "y")},
        jvp={"x": "x_t", "y": "-y_t * xp.trunc(x / y)"},
        doc="away from the jumps (x1 / x2 an integer)")

# (nan=0, an int: a plain signature, read without compiling a `def`; NumPy casts it)
defrule("nan_to_num", "x, nan=0, posinf=None, neginf=None",
        "xp.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf)", targets=("numpy.nan_to_num",),
        vjp={"x": "xp.where(xp.isfinite(x), g, 0)",
             "nan": _ub("xp.where(xp.isnan(x), g, 0)", "nan"),
             "posinf": _ub("xp.where(x == xp.inf, g, 0)", "posinf"),
             "neginf": _ub("xp.where(x == -xp.inf, g, 0)", "neginf")},
        jvp={"x": "xp.where(xp.isfinite(x), x_t, 0)", "nan": "xp.where(xp.isnan(x), nan_t, 0)",
             "posinf": "xp.where(x == xp.inf, posinf_t, 0)",
             "neginf": "xp.where(x == -xp.inf, neginf_t, 0)"},
        doc="the identity where x is finite; a replaced element's derivative is that of "
            "its replacement; copy=False (in place) is not supported")

# ---------------------------------------------------------------- products
defrule("cross", "a, b, axis=None", "xp.cross(a, b, axis=axis)", targets=("numpy.cross",),
        vjp={"a": _ub("xp.cross(b, g, axis=axis)", "a"),
             "b": _ub("xp.cross(g, a, axis=axis)", "b")},
        jvp={"a": "xp.cross(a_t, b, axis=axis)", "b": "xp.cross(a, b_t, axis=axis)"},
        doc="3-vectors (NumPy 2 deprecates 2-vectors); axisa/axisb/axisc are not supported")

defrule("kron", "a, b", "xp.kron(a, b)", targets=("numpy.kron",),
        vjp={"a": "kron_bar(g, b, xp.shape(a), 0)", "b": "kron_bar(g, a, xp.shape(b), 1)"},
        jvp={"a": "xp.kron(a_t, b)", "b": "xp.kron(a, b_t)"})

# Note [Bilinear transposes] in table.py: kron_bar's derivatives are kron and kron_bar.
defrule("kron_bar", "c, other, shape, which", "kron_bar(c, other, shape, which)",
        targets=("srcgrad.rules.helpers.kron_bar",),
        vjp={"c": "unbroadcast(xp.kron(g, other) if which == 0 else xp.kron(other, g),"
                  " xp.shape(c))",
             "other": "kron_bar(c, g, xp.shape(other), 1 if which == 0 else 0)"},
        jvp={"c": "kron_bar(c_t, other, shape, which)",
             "other": "kron_bar(c, other_t, shape, which)"})

# ---------------------------------------------------------------- differences
defrule("ediff1d", "ary", "xp.ediff1d(ary)", targets=("numpy.ediff1d",),
        vjp={"ary": "xp.reshape(diff_bar(g, 1, -1), xp.shape(ary))"},
        jvp={"ary": "xp.ediff1d(ary_t)"},
        doc="to_end/to_begin are not supported")

# ---------------------------------------------------------------- reductions that skip nan
# (the reduction's cotangent broadcast against x, as table.py's `_G`)
_G = "expand_reduced(g, xp.shape(x), axis, keepdims)"
_KEPT = "(xp.logical_not(xp.isnan(x)))"


def _count(mask, keepdims="True"):  # in x's dtype: an int count would promote float32
    return f"xp.astype(xp.sum({mask}, axis=axis, keepdims={keepdims}), xp.result_type(x))"


_SKIP = "xp.where(xp.isnan(x), 0, {})"
defrule("nansum", "x, axis=None, keepdims=False", "xp.nansum(x, axis=axis, keepdims=keepdims)",
        targets=("numpy.nansum",),
        vjp={"x": _SKIP.format(_G)},
        jvp={"x": f"xp.sum({_SKIP.format('x_t')}, axis=axis, keepdims=keepdims)"},
        doc="nan elements get 0")
defrule("nanmean", "x, axis=None, keepdims=False", "xp.nanmean(x, axis=axis, keepdims=keepdims)",
        targets=("numpy.nanmean",),
        vjp={"x": _SKIP.format(f"{_G} / {_count(_KEPT)}")},
        jvp={"x": f"xp.sum({_SKIP.format('x_t')}, axis=axis, keepdims=keepdims)"
                  f" / {_count(_KEPT, 'keepdims')}"},
        doc="nan elements get 0; an all-nan slice's gradient is nan, as its value")
for _name in ("nanmax", "nanmin"):
    # nan never equals the result: the tie mask of max/min skips it as it stands
    _mask = "(x == expand_reduced(ans, xp.shape(x), axis, keepdims))"
    defrule(_name, "x, axis=None, keepdims=False", f"xp.{_name}(x, axis=axis, keepdims=keepdims)",
            targets=(f"numpy.{_name}",),
            vjp={"x": f"({_G} / {_count(_mask)}) * {_mask}"},
            jvp={"x": f"xp.sum(x_t * ({_mask} / {_count(_mask)}), axis=axis, keepdims=keepdims)"},
            doc="ties split evenly as max/min; nan elements get 0; an all-nan slice's "
                "gradient is nan")

# ---------------------------------------------------------------- polynomials, integrals
# p[k] multiplies x ** (n - 1 - k); the integer ranges are cast to the float operand's
# dtype (float32 ** an int64 array would promote to float64)
_DEGREES = "xp.astype(xp.arange(xp.shape(p)[0] - 1, -1, -1), xp.result_type(x))"
_DERIVATIVE = ("xp.polyval(p[:-1] * xp.astype(xp.arange(xp.shape(p)[0] - 1, 0, -1),"
               " xp.result_type(p)), x)")
defrule("polyval", "p, x", "xp.polyval(p, x)", targets=("numpy.polyval",),
        # (a contraction over x's axes: a reshape to (-1, n) is ambiguous for n == 0)
        vjp={"p": f"xp.tensordot(g, xp.expand_dims(x, -1) ** {_DEGREES}, axes=xp.ndim(g))",
             "x": f"g * {_DERIVATIVE}"},
        jvp={"p": "xp.polyval(p_t, x)", "x": f"x_t * {_DERIVATIVE}"},
        doc="p a 1-D array (highest degree first); x of any shape")

# `x=` (sample points) is keyword-free in NumPy's signature but not supported here: the
# `*` keeps `np.trapezoid(y, x)` from binding x to dx (a CompileError instead).
_ENDS = ("0.5 * take_bar(g, xp.shape(y), 0, axis) + 0.5 * take_bar(g, xp.shape(y), -1, axis)")
defrule("trapezoid", "y, *, dx=1.0, axis=-1", "xp.trapezoid(y, dx=dx, axis=axis)",
        targets=("numpy.trapezoid",),
        vjp={"y": f"dx * (xp.broadcast_to(xp.expand_dims(g, axis), xp.shape(y)) - ({_ENDS}))",
             "dx": _ub("g * xp.trapezoid(y, dx=1.0, axis=axis)", "dx")},
        jvp={"y": "xp.trapezoid(y_t, dx=dx, axis=axis)",
             "dx": "dx_t * xp.trapezoid(y, dx=1.0, axis=axis)"},
        doc="uniform spacing dx only (x= sample points are not supported)")

# ---------------------------------------------------------------- 1-D convolutions
# convolve(a, v)[k] = sum_i a[i] v[k - i] ('full'): d/da[i] = sum_k g[k] v[k - i], the
# 'valid' correlation of g with v, which is the middle of the full convolution of g with
# v reversed (g is longer than v and than a, so that slice is always the valid part).
# Every order closes on convolve, slices and reversals.
defrule("convolve", "a, v", "xp.convolve(a, v)", targets=("numpy.convolve",),
        vjp={"a": "xp.convolve(g, v[::-1])[xp.shape(v)[0] - 1:xp.shape(g)[0]]",
             "v": "xp.convolve(g, a[::-1])[xp.shape(a)[0] - 1:xp.shape(g)[0]]"},
        jvp={"a": "xp.convolve(a_t, v)", "v": "xp.convolve(a, v_t)"},
        doc="mode='full' (the default) only")

# ---------------------------------------------------------------- QR (m >= n, reduced)
# A = QR. With X = dA R^-1 and C = Q^T X = Q^T dQ + dR R^-1 (skew plus upper
# triangular), Omega = tril(C, -1) - tril(C, -1)^T is Q^T dQ, so dR = (C - Omega) R and
# dQ = X - Q (C - Omega). Transposed: with M = gR R^T - Q^T gQ and
# N = M - tril(M - M^T, -1), gA = (gQ + Q N) R^-T. Wide matrices (m < n) have a
# non-square R: its solve raises (never a silent value).
def _t(m):
    return f"xp.swapaxes({m}, -1, -2)"


_Q, _R = "ans[0]", "ans[1]"
_X = _t(f"xp.linalg.solve({_t(_R)}, {_t('a_t')})")
_C = f"({_t(_Q)} @ {_X})"
_C_OMEGA = f"({_C} - xp.tril({_C}, -1) + {_t(f'xp.tril({_C}, -1)')})"
_MQR = f"(g[1] @ {_t(_R)} - {_t(_Q)} @ g[0])"
_NQR = f"({_MQR} - xp.tril({_MQR} - {_t(_MQR)}, -1))"
defrule("qr", "a", "xp.linalg.qr(a)", targets=("numpy.linalg.qr",), nout=2,
        vjp={"a": _t(f"xp.linalg.solve({_R}, {_t(f'(g[0] + {_Q} @ {_NQR})')})")},
        jvp={"a": f"({_X} - {_Q} @ {_C_OMEGA}, {_C_OMEGA} @ {_R})"},
        doc="mode='reduced' (the default), m >= n, R invertible; Q and R as LAPACK "
            "gives them (signs included)")

# ---------------------------------------------------------------- SVD (distinct singular values)
# The reduced factors' derivatives (HIPS autograd's grad_svd; JAX's svd_jvp_rule), with
# both rectangular terms always present: (I - U U^T) is 0 where U is square and
# (I - V V^T) where V is, so one formula covers tall, square and wide matrices.
defrule("svd_reduced", "x, full_matrices", "svd_reduced(x, full_matrices)",
        targets=("srcgrad.rules.helpers.svd_reduced",),
        vjp={"x": "svd_reduced(g, full_matrices)"}, jvp={"x": "svd_reduced(x_t, full_matrices)"},
        doc="identity; raises where np.linalg.svd's full U or Vh of a non-square matrix "
            "would be differentiated")

_U, _S, _VH = "ans[0]", "ans[1]", "ans[2]"
_V = _t(_VH)
_EYE_K = "xp.eye(xp.shape(ans[1])[-1], dtype=xp.result_type(ans[1]))"  # (float32 stays)
_SROW, _SCOL = f"xp.expand_dims({_S}, -2)", f"xp.expand_dims({_S}, -1)"
# The coupling of singular values i and j, K_ij s_j + s_i L_ij over s_j^2 - s_i^2, is
# written as its two poles: (K + L)_ij / 2 over s_j - s_i and (K - L)_ij / 2 over
# s_j + s_i. A pair tied to rounding (two equal singular values; the two zeros of a
# rank-deficient matrix, fuzz seed 2640084) was rounding over rounding: nan, or O(1)
# wrong. Now a pole whose denominator is 0 to rounding gets 0, as eigh's repeated pair
# does: the limit for the nuclear norm and along a path that keeps the tie; a function
# that needs the tied pole (the sum of squared singular values) loses that pair's
# coupling (docs/conventions.md). The other pole stays exact.
defrule("singular_ties", "s, sign", "singular_ties(s, sign)",
        targets=("srcgrad.rules.helpers.singular_ties",), nondiff=True,
        doc="0/1 pairs of singular values: no derivative")


def _pole(sign):  # 1 / (s_j + sign * s_i), 0 where that is 0 to rounding (the diagonal too)
    op, tie = ("+" if sign > 0 else "-"), f"singular_ties(ans[1], {sign})"
    return f"((1 - {tie}) / ({_SROW} {op} {_SCOL} + {tie}))"


_FMINUS, _FPLUS = _pole(-1), _pole(1)
_UTGU = f"({_t(_U)} @ g[0])"
_VTGV = f"({_VH} @ {_t('g[2]')})"
_K, _L = f"({_UTGU} - {_t(_UTGU)})", f"({_VTGV} - {_t(_VTGV)})"
_CORE = (f"({_U} @ (0.5 * ({_K} + {_L}) * {_FMINUS} + 0.5 * ({_K} - {_L}) * {_FPLUS}"
         f" + {_EYE_K} * xp.expand_dims(g[1], -1)) @ {_VH})")
_GUT = _t("g[0]")
_EYE_M = "xp.eye(xp.shape(ans[0])[-2], dtype=xp.result_type(ans[1]))"
_EYE_N = "xp.eye(xp.shape(ans[2])[-1], dtype=xp.result_type(ans[1]))"
# Each rectangular term is exactly 0 where its factor is square, but computed it is
# rounding (1e-16) over the singular values: at a square matrix with a zero singular value
# (distinct, so U and V are unique up to sign) that was O(1) wrong (fuzz seed 2624501). So
# it is weighted by 1 for a tall U (a wide V), 0 for a square one. U is m x k with k <= m:
# k // m is 1 exactly where U is square (a Python int from the shapes; a bool would not
# mix on the Array API). Its 1 / s is a pole at a zero singular value of a tall or wide
# matrix (U's extra column is not unique there), dropped as the tied poles above are: it
# was 0 * inf = nan even where no gradient reached U (fuzz seed 2643467).
_TALL_U = f"(1 - xp.shape({_U})[-1] // xp.shape({_U})[-2])"
_WIDE_V = f"(1 - xp.shape({_VH})[-2] // xp.shape({_VH})[-1])"
_ZERO_S = "xp.expand_dims(xp.diagonal(singular_ties(ans[1], 1), axis1=-2, axis2=-1), -2)"
_INV_S = f"((1 - {_ZERO_S}) / ({_SROW} + {_ZERO_S}))"  # 1 / s, 0 where s is 0 to rounding
_TALL = _t(f"{_TALL_U} * ({_V} * {_INV_S}) @ {_GUT} @ ({_EYE_M} - {_U} @ {_t(_U)})")
_WIDE = f"({_WIDE_V} * ({_U} * {_INV_S}) @ g[2] @ ({_EYE_N} - {_V} @ {_VH}))"
# JVP: dS = U^T dA V; its symmetric part over the s_j - s_i pole, its antisymmetric part over s_j + s_i
_DA = "svd_reduced(a_t, full_matrices)"
_DS = f"({_t(_U)} @ {_DA} @ {_V})"
_SYM, _ANTI = f"({_DS} + {_t(_DS)})", f"({_DS} - {_t(_DS)})"
_DU = (f"({_U} @ (0.5 * {_SYM} * {_FMINUS} + 0.5 * {_ANTI} * {_FPLUS})"
       f" + {_TALL_U} * ({_DA} @ {_V} - {_U} @ {_DS}) * {_INV_S})")
_DV = (f"({_V} @ (0.5 * {_SYM} * {_FMINUS} - 0.5 * {_ANTI} * {_FPLUS})"
       f" + {_WIDE_V} * ({_t(_DA)} @ {_U} - {_V} @ {_t(_DS)}) * {_INV_S})")
defrule("svd", "a, full_matrices=True", "xp.linalg.svd(a, full_matrices=full_matrices)",
        targets=("numpy.linalg.svd",), nout=3,
        # (the check first: a wide full Vh would fail to broadcast before it)
        vjp={"a": f"xp.zeros_like(svd_reduced(a, full_matrices)) + {_CORE} + {_TALL} + {_WIDE}"},
        jvp={"a": f"({_DU}, xp.diagonal({_DS}, axis1=-2, axis2=-1), {_t(_DV)})"},
        doc="distinct, nonzero singular values (a pair equal to rounding: U's and V's "
            "coupling pole over s_j - s_i, or s_j + s_i at two zeros, is dropped; S's stays "
            "exact); U and V as LAPACK gives them (signs "
            "included); full_matrices=True only for square matrices (else it raises); "
            "compute_uv=False is np.linalg.svdvals; hermitian= is not supported")

# the singular values alone: d s_i = u_i^T dA v_i (the reduced SVD's factors)
_UVH = "xp.linalg.svd(x, full_matrices=False)"
defrule("svdvals", "x", "xp.linalg.svdvals(x)", targets=("numpy.linalg.svdvals",),
        vjp={"x": f"({_UVH}[0] * xp.expand_dims(g, -2)) @ {_UVH}[2]"},
        jvp={"x": f"xp.diagonal({_t(f'{_UVH}[0]')} @ x_t @ {_t(f'{_UVH}[2]')}, axis1=-2, axis2=-1)"},
        doc="distinct singular values (a repeated one's derivative is not unique)")

# ---------------------------------------------------------------- searching
# Indices into a sorted array: integers, whose derivative is 0 (the truth); np.interp's
# composition (srcgrad/rules/compositions.py) finds its segments with it.
defrule("searchsorted", "a, v, side='left'", "xp.searchsorted(a, v, side=side)",
        targets=("numpy.searchsorted",), nondiff=True, doc="integer indices: no derivative")

# ---------------------------------------------------------------- integer and boolean results
# Tests, indices and piecewise-constant values: run as NumPy on active operands; their
# derivative is 0 (the truth), so no formula.
def _nondiff(name, signature="x", render=None, elementwise=True, doc=""):
    defrule(name, signature, render or f"xp.{name}({signature})", targets=(f"numpy.{name}",),
            elementwise=elementwise, nondiff=True, doc=doc)


for _name in ("signbit", "isneginf", "isposinf", "isreal", "iscomplex"):
    _nondiff(_name)
_nondiff("fix", doc="rounds toward 0: piecewise constant, derivative 0 (as trunc)")
_nondiff("spacing", doc="piecewise constant in x: derivative 0")
# (rtol/atol default None, NumPy's 1e-05 and 1e-08 in the render: a plain signature)
_TOLERANCES = ("rtol=(1e-05 if rtol is None else rtol), atol=(1e-08 if atol is None else atol),"
               " equal_nan=equal_nan")
_nondiff("isclose", "a, b, rtol=None, atol=None, equal_nan=False",
         f"xp.isclose(a, b, {_TOLERANCES})")
_nondiff("allclose", "a, b, rtol=None, atol=None, equal_nan=False",
         f"xp.allclose(a, b, {_TOLERANCES})", elementwise=False)
_nondiff("array_equal", "a1, a2, equal_nan=False", "xp.array_equal(a1, a2, equal_nan=equal_nan)",
         elementwise=False)
_nondiff("array_equiv", "a1, a2", elementwise=False)
_nondiff("isin", "element, test_elements, assume_unique=False, invert=False",
         "xp.isin(element, test_elements, assume_unique=assume_unique, invert=invert)",
         elementwise=False)
_nondiff("digitize", "x, bins, right=False", "xp.digitize(x, bins, right=right)",
         elementwise=False)
for _name in ("nanargmax", "nanargmin"):
    _nondiff(_name, "a, axis=None, keepdims=False",
             f"xp.{_name}(a, axis=axis, keepdims=keepdims)", elementwise=False)
# their Array-API spellings' helpers (srcgrad.codegen.spellings), and digitize's
defrule("nan_arg_extreme", "a, axis, keepdims, largest", "nan_arg_extreme(a, axis, keepdims, largest)",
        targets=("srcgrad.rules.helpers.nan_arg_extreme",), nondiff=True,
        doc="NumPy's nanargmax (largest) / nanargmin for a namespace without them")
defrule("digitize_sorted", "x, bins, right", "digitize_sorted(x, bins, right)",
        targets=("srcgrad.rules.helpers.digitize_sorted",), nondiff=True,
        doc="NumPy's digitize for a namespace without it (searchsorted)")
# Array-API spellings' helpers of differentiable rows (srcgrad.codegen.spellings): only
# in generated primal code of those rows, whose derivatives are the rows' own; traced
# themselves, they are constants, which activity analysis refuses for a varied value
for _name, _sig, _what in (("polyval_horner", "p, x", "polyval"), ("kron_blocks", "a, b", "kron"),
                           ("trapezoid_uniform", "y, dx, axis", "trapezoid with a uniform dx"),
                           ("convolve_full", "a, v", "convolve (mode 'full')"),
                           ("einsum_contract", "subscripts, *operands", "einsum (as matmuls)")):
    defrule(_name, _sig, f"{_name}({_sig})", targets=(f"srcgrad.rules.helpers.{_name}",),
            nondiff=True, doc=f"NumPy's {_what} for a namespace without it")


# ---------------------------------------------------------------- the Python surface
# `assert test, message` in compiled code: the test runs in the forward pass where the
# user wrote it (never at compile time), and has no effect on gradients.
defrule("assert_true", "test, message", "assert_true(test, message)",
        targets=("srcgrad.rules.helpers.assert_true",), nondiff=True, effect=True, io=True,
        nout=0, doc="the user's assert, in the forward pass; nothing to differentiate")
