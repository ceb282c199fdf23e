"""max and min along one axis, written out for numba, which types `x.max()` of a whole array
only.

Note [Reductions along an axis for numba]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
numba has no `axis=` or `keepdims=` for `max`/`min` (a TypingError: the variant ran
NumPy's code), and a softmax or a logsumexp takes `np.max(z, axis=1, keepdims=True)` for
stability, so every such gradient ran on NumPy under `backend="numba"`. Where the axis is
an int literal, `along_axis` rewrites the call (`x.max(axis=k, keepdims=b)`,
`xp.max(x, axis=k, ...)`, `amax`, and the same of min) into a call of a function named
after the reduction (`reduce_max_axis1_keepdims(x)`, `reduce_min_axism1(x)`), and
`reduction_source` writes the functions the module calls: the array seen as (before,
n, after), its first row along the axis copied, then each later row compared in order.
NumPy's result exactly: `v > m or v != v` keeps the first nan met (NumPy's max of a
row with a nan is nan), an empty axis raises NumPy's ValueError, the dtype is x's; the
result's shape is built from static slices of `x.shape` (the axis is a literal), which
numba types for any number of dimensions. A negative axis counts from the end as NumPy's.
Any other form (an axis tuple, an axis in a variable, `out=`) stays as it is and the
variant runs NumPy's code (Note [The numba backend] in srcgrad.pipeline.numba_variants).
"""

from __future__ import annotations

import ast
import re

MARKER = "# Note [Reductions along an axis for numba]"
_METHODS = {"max": "max", "min": "min", "amax": "max", "amin": "min"}
_CALLED = re.compile(r"\breduce_(max|min)_axis(m?)(\d+)(_keepdims)?\(")
_NAMES = {"max": ("maximum", ">"), "min": ("minimum", "<")}


def along_axis(node):
    """The call of the written-out reduction replacing `node` (a max/min call along one
    literal axis), or None where `node` is any other call."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return None
    kind = _METHODS.get(node.func.attr)
    kw = {k.arg: k.value for k in node.keywords}
    on_xp = isinstance(node.func.value, ast.Name) and node.func.value.id == "xp"
    if kind is None or not kw.keys() <= {"axis", "keepdims"} or "axis" not in kw:
        return None
    if on_xp:
        if len(node.args) != 1:
            return None
        x = node.args[0]
    elif node.args or node.func.attr not in ("max", "min"):
        return None
    else:
        x = node.func.value
    axis, keep = _int_literal(kw["axis"]), kw.get("keepdims", ast.Constant(False))
    if axis is None or not (isinstance(keep, ast.Constant) and type(keep.value) is bool):
        return None
    return ast.Call(ast.Name(_name(kind, axis, keep.value), ast.Load()), [x], [])


def _name(kind: str, axis: int, keep: bool) -> str:
    """`reduce_max_axis1_keepdims`, `reduce_min_axism1`: what _CALLED reads back."""
    return f"reduce_{kind}_axis{'m' if axis < 0 else ''}{abs(axis)}" + ("_keepdims" if keep else "")


def _int_literal(node):
    sign = 1
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node, sign = node.operand, -1
    return sign * node.value if isinstance(node, ast.Constant) and type(node.value) is int else None


def reduction_source(text: str) -> str:
    """The source of the reductions `text` calls, jitted where numba compiles a caller (and
    plain Python over NumPy elsewhere); '' where it calls none."""
    called = sorted(set(_CALLED.findall(text)))
    if not called:
        return ""
    lines = [f"{MARKER} (srcgrad.codegen.numba_reductions): max and",
             "# min along one axis, which numba does not type.",
             "from numba.extending import register_jitable"]
    for kind, minus, digits, keep in called:
        lines += ["", "", "@register_jitable", _reduction(kind, -int(digits) if minus else int(digits),
                                                           bool(keep))]
    return "\n".join(lines) + "\n"


def _reduction(kind: str, axis: int, keep: bool) -> str:
    ufunc, better = _NAMES[kind]
    name = _name(kind, axis, keep)
    after = f"s[{axis + 1}:]" if axis != -1 else "()"
    shape = f"s[:{axis}] + (1,) + {after}" if keep else f"s[:{axis}] + {after}"
    return f'''def {name}(x):
    s = x.shape
    k = {axis} % x.ndim
    n = s[k]
    if n == 0:
        raise ValueError("zero-size array to reduction operation {ufunc} which has no identity")
    before = 1
    for a in range(k):
        before *= s[a]
    rest = 1
    for a in range(k + 1, x.ndim):
        rest *= s[a]
    y = xp.ascontiguousarray(x).reshape((before, n, rest))
    out = y[:, 0, :].copy()
    for i in range(before):
        for j in range(1, n):
            for m in range(rest):
                v = y[i, j, m]
                if v {better} out[i, m] or v != v:
                    out[i, m] = v
    return out.reshape({shape})'''
