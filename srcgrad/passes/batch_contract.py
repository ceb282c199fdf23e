"""Batched forms of the contractions: matmul, dot, inner, vdot, outer, tensordot,
einsum and their transposes (Note [Batching] in srcgrad.passes.batch).

A batched operand keeps its leading seed axis first in the result: a 1-D batched
operand swaps sides (`A @ v_b` is `v_b @ A.T`), a stack is padded so the batch axis
does not broadcast against the other operand's leading axes, and the transposes of
tensordot and einsum become one einsum with a batch letter.
"""

from __future__ import annotations

import numpy

from srcgrad import rules
from srcgrad.ir.core import Const, Op, Var
from srcgrad.passes.batch_base import Unbatchable, _axes, _elementwise, _static


def _matmul(b, op, x, y):
    """`x @ y` with one or both operands batched (Note [Batching])."""
    rx, ry = b.rank(x), b.rank(y)
    bx, by = b.is_b(x), b.is_b(y)
    mm = Op("matmul", (), op.outs, op.loc)
    if bx and by:
        if rx >= 2 and ry >= 2:
            return b.keep(mm, b.pad(x, ry), b.pad(y, rx))
        if rx == 1 and ry == 1:
            prod = b.call("multiply", x, y, shape=b.shape(x))
            return b.keep(Op("sum", (), op.outs, op.loc), prod, Const(1), Const(False))
        if rx == 1:  # a row against a stack: matmul of stacks, the unit axis dropped
            return _vector_matmul(b, op, _unit(b, x, ry - 2, (1,) + b.shape(x)), b.pad(y, ry))
        return _vector_matmul(b, op, b.pad(x, rx), _unit(b, y, rx - 2, b.shape(y) + (1,)))
    if bx:
        if rx >= 2 or ry <= 2:
            return b.keep(mm, b.pad(x, ry) if rx >= 2 else x, y)
        return _vector_matmul(b, op, _unit(b, x, ry - 2, (1,) + b.shape(x)), y)
    if ry >= 2:
        return b.keep(mm, x, b.pad(y, rx) if rx > ry else y)
    if rx == 1:
        return b.keep(mm, y, x)  # v . a_b
    if rx == 2:
        xt = b.expander.apply(rules.RULES["T"], [x], {})
        return b.keep(mm, y, xt)  # (A @ v_b)[k] = v_b[k] @ A.T
    return _vector_matmul(b, op, x, _unit(b, y, rx - 2, b.shape(y) + (1,)))


def _unit(b, v, lead, shape):
    """A batched vector as a batched row `(1, n)` or column `(n, 1)` (`shape`), with
    `lead` unit axes before it so that it broadcasts against a stack of matrices. Used
    where a 1-D operand meets a stack, which sg.vmap's twice-batched Jacobians write."""
    return b.call("reshape", v, (b.size,) + (1,) * lead + shape, shape=(1,) * lead + shape)


def _vector_matmul(b, op, x, y):
    """`x @ y` of stacks, reshaped to the result's batched shape (the unit axis gone)."""
    prod = b.call("matmul", x, y)
    b.keep(Op("reshape", (), op.outs, op.loc), prod, Const((b.size,) + b.shape(op.outs[0])))


def _dot(b, op, x, y):
    rx, ry = b.rank(x), b.rank(y)
    if rx == 0 or ry == 0:
        return _elementwise(b, Op("multiply", (), op.outs, op.loc), x, y)
    if rx <= 2 and ry <= 2:
        return _matmul(b, op, x, y)
    axes = ((rx - 1,), (max(ry - 2, 0),))  # the last axis of x, the second-to-last of y
    _tensordot(b, Op("tensordot", (), op.outs, op.loc), x, y, Const(axes))


def _inner(b, op, x, y):
    rx, ry = b.rank(x), b.rank(y)
    if rx == 0 or ry == 0:
        return _elementwise(b, Op("multiply", (), op.outs, op.loc), x, y)
    if rx == 1 and ry == 1:
        return _matmul(b, op, x, y)
    _tensordot(b, Op("tensordot", (), op.outs, op.loc), x, y, Const(((rx - 1,), (ry - 1,))))


def _vdot(b, op, x, y):
    """vdot flattens both operands: a matrix-vector product of the batched one."""
    flat = [(_reshaped(b, v, (int(numpy.prod(b.shape(v))),)) if b.is_b(v) else v) for v in (x, y)]
    flat = [v if b.is_b(v) else b.expander.apply(rules.RULES["ravel"], [v], {}) for v in flat]
    for v, orig in zip(flat, (x, y)):
        b.shapes.setdefault(v, (int(numpy.prod(b.shape(orig))),))
    _matmul(b, Op("matmul", (), op.outs, op.loc), *flat)


def _outer(b, op, x, y):
    nx, ny = int(numpy.prod(b.shape(x))), int(numpy.prod(b.shape(y)))
    xs = (b.size, nx, 1) if b.is_b(x) else (nx, 1)
    ys = (b.size, 1, ny) if b.is_b(y) else (ny,)
    xr = b.expander.apply(rules.RULES["reshape"], [x, xs], {})
    yr = b.expander.apply(rules.RULES["reshape"], [y, ys], {})
    b.keep(Op("multiply", (), op.outs, op.loc), xr, yr)


def _matmul_bar(b, op, c, other, shape, which):
    """matmul's transposes as matmuls, for a 2-D `other` (the common case), then batched."""
    target, side = tuple(_static(shape, op.prim)), _static(which, op.prim)
    rc = b.rank(c)
    if b.rank(other) == 1 and rc <= 1:  # an outer product with the vector operand
        v = b.shape(other)
        if side == 0:  # x (n, k) of x @ v: c[:, None] * v
            col = _reshaped(b, c, b.shape(c) + (1,))
            return _elementwise(b, Op("multiply", (), op.outs, op.loc), col, other)
        # y (k, m) of v @ y: v[:, None] * c; y (k,) of v @ y: v * c
        col = _reshaped(b, other, v + (1,) * rc)
        return _elementwise(b, Op("multiply", (), op.outs, op.loc), col, c)
    if b.rank(other) != 2 or rc > 2:
        raise Unbatchable("`matmul_bar` of stacks of matrices")
    k = b.shape(other)
    t_shape = (k[1], k[0])
    if b.is_b(other):  # the batch axis stays first
        other_t = b.call("matrix_transpose", other, shape=t_shape)
    else:
        other_t = b.expander.apply(rules.RULES["T"], [other], {})
        if isinstance(other_t, Var):
            b.shapes[other_t] = t_shape
    if side == 0:  # x of x @ y: c @ y.T
        x, y, out_shape = c, other_t, b.shape(c)[:-1] + (t_shape[1],)
    elif rc == 2:  # y of x @ y: x.T @ c
        x, y, out_shape = other_t, c, (t_shape[0], b.shape(c)[1])
    else:  # a vector y: c @ x
        x, y, out_shape = c, other, (k[1],)
    if out_shape != target:
        raise Unbatchable("`matmul_bar` with broadcast axes to sum")
    _matmul(b, Op("matmul", (x, y), op.outs, op.loc), x, y)


def _reshaped(b, v, shape):
    """`v` reshaped to the unbatched `shape` (the batch axis kept where it has one)."""
    if b.is_b(v):
        return b.call("reshape", v, (b.size,) + shape, shape=shape)
    r = b.expander.apply(rules.RULES["reshape"], [v, shape], {})
    if isinstance(r, Var):  # a constant folds
        b.shapes[r] = shape
    return r


def _tensordot(b, op, x, y, axes):
    rx, ry = b.rank(x), b.rank(y)
    value = _static(axes, op.prim)
    if isinstance(value, int):
        ax, ay = tuple(range(rx - value, rx)), tuple(range(value))
    else:
        ax, ay = (_axes(value[0], rx), _axes(value[1], ry))
    bx, by = b.is_b(x), b.is_b(y)
    if bx and by:
        raise Unbatchable("`tensordot` of two batched operands")
    if bx:
        return b.keep(op, x, y, Const((tuple(a + 1 for a in ax), ay)))
    free_x = rx - len(ax)
    td = b.call("tensordot", x, y, (ax, tuple(a + 1 for a in ay)))
    b.keep(Op("moveaxis", (), op.outs, op.loc), td, Const(free_x), Const(0))


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _einsum(b, op, subscripts, x, y, optimize):
    spec = _static(subscripts, "einsum")
    if "." in spec:
        raise Unbatchable("`einsum` with an ellipsis")
    spec = spec.replace(" ", "")
    inputs, _, output = spec.partition("->")
    if "->" not in spec:
        counts = {ch: inputs.count(ch) for ch in inputs if ch.isalpha()}
        output = "".join(sorted(ch for ch, n in counts.items() if n == 1))
    z = next(ch for ch in _LETTERS if ch not in spec)
    parts = inputs.split(",")
    operands = [x] if isinstance(y, Const) and y.value is None else [x, y]
    parts = [z + p if b.is_b(a) else p for p, a in zip(parts, operands)]
    new = ",".join(parts) + "->" + z + output
    rest = (operands[1] if len(operands) > 1 else Const(None),)
    b.keep(op, Const(new), operands[0], *rest, Const(True))



def _tensordot_bar(b, op, c, other, axes, shape, which):
    """The cotangent of one operand of a contraction, as one einsum (batch letter first)."""
    target, side, spec = tuple(_static(shape, op.prim)), _static(which, op.prim), _static(axes, op.prim)
    nx, ny = (len(target), b.rank(other)) if side == 0 else (b.rank(other), len(target))
    if 0 in (nx, ny):
        raise Unbatchable("`tensordot_bar` of a scalar operand")
    if spec == "dot":
        pair = ((nx - 1,), (max(ny - 2, 0),))
    elif spec == "inner":
        pair = ((nx - 1,), (ny - 1,))
    elif isinstance(spec, int):
        pair = (tuple(range(nx - spec, nx)), tuple(range(spec)))
    else:
        pair = tuple((a,) if isinstance(a, int) else tuple(a) for a in spec)
    ax, ay = _axes(pair[0], nx), _axes(pair[1], ny)
    letters = iter(_LETTERS[1:])
    xs = [next(letters) for _ in range(nx)]
    ys = [next(letters) for _ in range(ny)]
    for i, j in zip(ax, ay):
        ys[j] = xs[i]
    cs = [xs[i] for i in range(nx) if i not in ax] + [ys[j] for j in range(ny) if j not in ay]
    z = _LETTERS[0]
    c_sub = (z if b.is_b(c) else "") + "".join(cs)
    o_sub = (z if b.is_b(other) else "") + "".join(ys if side == 0 else xs)
    out = z + "".join(xs if side == 0 else ys)
    b.keep(Op("einsum", (), op.outs, op.loc), Const(f"{c_sub},{o_sub}->{out}"), c, other, Const(True))


def _einsum_bar(b, op, c, other, subscripts, shape, which):
    """An einsum's cotangent as one einsum, where each index of the operand appears in the
    output or the other operand once (no ellipsis, no diagonal, no index summed alone)."""
    spec, side = _static(subscripts, op.prim).replace(" ", ""), _static(which, op.prim)
    lhs, arrow, out = spec.partition("->")
    inputs = lhs.split(",")
    if "." in spec or len(inputs) != 2 or isinstance(other, Const):
        raise Unbatchable("`einsum_bar` with an ellipsis or one operand")
    if not arrow:
        letters = lhs.replace(",", "")
        out = "".join(sorted(ch for ch in set(letters) if letters.count(ch) == 1))
    target, rest = inputs[side], inputs[1 - side]
    if len(set(target)) != len(target) or any(ch not in out + rest for ch in target):
        raise Unbatchable("`einsum_bar` of a repeated or self-summed index")
    z = next(ch for ch in _LETTERS if ch not in spec)
    subs = (z if b.is_b(c) else "") + out + "," + (z if b.is_b(other) else "") + rest
    b.keep(Op("einsum", (), op.outs, op.loc), Const(f"{subs}->{z}{target}"), c, other, Const(True))


def _solve(b, op, a, rhs):
    """`solve(a, rhs_b)` for a primal matrix: a stack of right-hand sides broadcasts
    against `a`; a batched vector is a matrix of B columns."""
    if b.is_b(a):
        raise Unbatchable("`solve` with a batched matrix")
    if b.rank(rhs) >= 2:  # stacks of matrices: the batch axis goes before a's stack axes
        return b.keep(op, a, b.pad(rhs, b.rank(a)))
    if b.rank(a) != 2:
        raise Unbatchable("`solve` of a stack of matrices with one vector")
    n = b.shape(rhs)[0]
    cols = b.call("matrix_transpose", rhs, shape=(n, b.size))  # (B, n) -> (n, B)
    solved = b.expander.apply(rules.RULES["solve"], [a, cols], {})
    b.keep(Op("matrix_transpose", (), op.outs, op.loc), solved)


HANDLERS = {
    "matmul": _matmul, "dot": _dot, "inner": _inner, "vdot": _vdot, "outer": _outer,
    "matmul_bar": _matmul_bar, "tensordot": _tensordot, "einsum": _einsum,
    "tensordot_bar": _tensordot_bar, "einsum_bar": _einsum_bar, "solve": _solve,
}
