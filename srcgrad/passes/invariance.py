"""Derivative edges that are exactly zero because of a shift invariance.

Note [Shift invariance of softmax]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The stable softmax and log-softmax subtract a per-row constant first:

    m = np.max(x, axis=1, keepdims=True)
    s = x - m
    e = np.exp(s);  S = np.sum(e, axis=1, keepdims=True)
    p = e / S                      # softmax
    logp = s - np.log(S)           # log-softmax

Both are unchanged when every row of `s` is shifted by a constant, so the
derivative of the program with respect to `m` *through s* is zero — yet the chain
rule computes it as a sum of terms that cancel only up to rounding, and paying
for the max's VJP (a mask, a tie count, two full passes) besides. JAX's
`log_softmax` gets this by `stop_gradient` on the max; here it is proved from the
program: when every use of `s` is inside such a softmax/log-softmax over the
axes `m` was reduced over, the edge `s = x - m` -> `m` carries no cotangent.
"""

from __future__ import annotations

from srcgrad.ir.core import Const, Var

_KEEPDIMS_REDUCTIONS = frozenset({"max", "min", "mean", "sum", "prod"})


def zero_edges(ops: list) -> frozenset:
    """{(id(op), param)}: derivative edges that are identically zero."""
    producer = {o: op for op in ops for o in op.outs}
    users: dict = {}
    for op in ops:
        for v in set(op.operand_vars()):
            users.setdefault(v, []).append(op)
    edges = set()
    for op in ops:
        if op.prim != "subtract" or not all(isinstance(a, Var) for a in op.args):
            continue
        s, m = op.outs[0], op.args[1]
        axes = _keepdims_axes(producer.get(m))
        if axes is not None and _only_softmax_uses(s, axes, users):
            edges.add((id(op), "y"))
    return frozenset(edges)


def _keepdims_axes(op):
    """The axis argument of a keepdims=True reduction, or None."""
    if op is None or op.prim not in _KEEPDIMS_REDUCTIONS:
        return None
    axis, keepdims = op.args[1], op.args[-1]
    if isinstance(axis, Const) and axis.value is not None and isinstance(keepdims, Const) \
            and keepdims.value is True:
        return axis.value
    return None


def _only_softmax_uses(s, axes, users) -> bool:
    """Every use of `s` is exp(s) feeding softmax/normaliser, or `s - log(S)`."""
    uses = users.get(s, [])
    exps = [u for u in uses if u.prim == "exp"]
    if len(exps) != 1:
        return False
    e = exps[0].outs[0]
    sums = [u for u in users.get(e, []) if u.prim == "sum"]
    if len(sums) != 1 or _keepdims_axes(sums[0]) != axes:
        return False
    S = sums[0].outs[0]
    for u in users.get(e, []):  # e / S (softmax) or the sum itself
        if u is not sums[0] and not (u.prim == "divide" and u.args == (e, S)):
            return False
    logs = []
    for u in users.get(S, []):  # log(S), or the softmax's denominator
        if u.prim == "log":
            logs.append(u.outs[0])
        elif not (u.prim == "divide" and u.args == (e, S)):
            return False
    for L in logs:
        if any(not (u.prim == "subtract" and u.args == (s, L)) for u in users.get(L, [])):
            return False
    for u in uses:  # s itself: only through exp and `s - log(S)`
        if u is not exps[0] and not (u.prim == "subtract" and u.args[0] is s
                                     and u.args[1] in logs):
            return False
    return True
