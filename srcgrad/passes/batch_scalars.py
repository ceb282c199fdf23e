"""Batched forms of rows that take one Python value per example (Note [Batching] in
srcgrad.passes.batch): Python's `math` functions and `a, b = x` unpacking.

Note [Python's math over a batch]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
`math.tanh(s)` of a traced scalar takes a Python float; batched, `s` holds one float
per example, which `math` refuses. It becomes NumPy's row of the same function (`tanh`,
whose derivative is the same formula) on `math_checked(s, "tanh")`: s itself, or the
error an example's own `math` call raises where NumPy would give nan or inf instead
(`math.log(0.0)`, `math.sqrt(-1.0)`: ValueError; `math.exp(1000.0)`: OverflowError), so
a batch never yields a value the unbatched function would not.
"""

from __future__ import annotations

from srcgrad.ir.core import Const, Op

_AS_NUMPY = {"acos": "arccos", "asin": "arcsin", "atan": "arctan", "fabs": "abs"}


def _math(b, op, x):
    name = op.prim.removeprefix("math_")
    checked = b.call("math_checked", x, Const(name), shape=b.shape(x))
    b.keep(Op(_AS_NUMPY.get(name, name), (), op.outs, op.loc), checked)


def _unpack(b, op, x, count):
    """`a, b = x` of a batched x: each target is its row of every example, x[:, k]."""
    for k, out in enumerate(op.outs):
        b.rename[out] = b.call("getitem", x, (slice(None), k), shape=b.shape(out))


HANDLERS = {"unpack": _unpack, **{f"math_{name}": _math for name in (
    "acos", "asin", "atan", "cos", "cosh", "exp", "expm1", "fabs", "log", "log10", "log1p",
    "log2", "sin", "sinh", "sqrt", "tan", "tanh")}}
