"""Rows of issue 29's second NumPy sweep (docs/numpy_coverage.md), imported by table.py
after table_sweep.py, on the same terms: each row's formulas call only rows (Note
[Formula constructs] in table.py), and each has cases in tests/rules/cases.py.
"""

from srcgrad.rules.core import defrule


def _ub(expr, p):
    return f"unbroadcast({expr}, xp.shape({p}))"


def _t(m):
    return f"xp.swapaxes({m}, -1, -2)"


# ---------------------------------------------------------------- floating-point parts
# ldexp(x1, x2) = x1 * 2**x2 with x2 an integer: linear in x1, so its derivatives are
# ldexp again (exact: a power-of-two scaling); x2 has no derivative.
defrule("ldexp", "x1, x2", "xp.ldexp(x1, x2)", targets=("numpy.ldexp",), elementwise=True,
        vjp={"x1": _ub("xp.ldexp(g, x2)", "x1")}, jvp={"x1": "xp.ldexp(x1_t, x2)"},
        doc="x2 an integer array (no derivative)")

# modf's integral part is piecewise constant (derivative 0); the fractional part x - trunc(x)
# has derivative 1 away from the integers
defrule("modf", "x", "xp.modf(x)", targets=("numpy.modf",), nout=2, elementwise=True,
        vjp={"x": "g[0]"}, jvp={"x": "(x_t, xp.zeros_like(x_t))"},
        doc="the fractional part's derivative is 1, the integral part's 0 (jumps at the "
            "integers are not differentiated)")

# np.frexp's exponent, for the frexp composition (mantissa = ldexp(x, -exponent))
defrule("frexp_exponent", "x", "xp.frexp(x)[1]",
        targets=("srcgrad.rules.helpers.frexp_exponent",), elementwise=True, nondiff=True,
        doc="an integer: no derivative")

# ---------------------------------------------------------------- pseudo-inverse
# The derivative of P = A+ where A's rank is constant (Golub and Pereyra 1973):
#   dP = -P dA P + P P^T dA^T (I - A P) + (I - P A) dA^T P^T P,
# transposed term by term for the VJP. It closes on pinv (`ans`), matmul and eye, so
# every order is exact.
_P = "ans"
_PT = _t(_P)
_EYE_M = "xp.eye(xp.shape(a)[-2], dtype=xp.result_type(ans))"
_EYE_N = "xp.eye(xp.shape(a)[-1], dtype=xp.result_type(ans))"
_LEFT = f"({_EYE_M} - a @ {_P})"  # I - A P (m x m)
_RIGHT = f"({_EYE_N} - {_P} @ a)"  # I - P A (n x n)
defrule("pinv", "a, rcond=None", "xp.linalg.pinv(a, rcond=rcond)",
        targets=("numpy.linalg.pinv",),
        vjp={"a": f"-({_PT} @ g @ {_PT}) + {_LEFT} @ {_t('g')} @ {_P} @ {_PT}"
                  f" + {_PT} @ {_P} @ {_t('g')} @ {_RIGHT}"},
        jvp={"a": f"-({_P} @ a_t @ {_P}) + {_P} @ {_PT} @ {_t('a_t')} @ {_LEFT}"
                  f" + {_RIGHT} @ {_t('a_t')} @ {_PT} @ {_P}"},
        doc="where the rank is constant (singular values at or below rcond * the largest "
            "are zero); hermitian= and rtol= are not supported")
