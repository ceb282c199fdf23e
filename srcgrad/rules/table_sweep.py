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

defrule("nan_to_num", "x, nan=0.0, posinf=None, neginf=None",
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
