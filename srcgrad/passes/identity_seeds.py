"""Contractions of identity seeds: `tensordot(seed, M)` over all of the seed's axes is M.

Note [Identity seeds]
~~~~~~~~~~~~~~~~~~~~~
A batched Jacobian or Hessian (Note [Batching] in srcgrad.passes.batch) whose chunk
takes every seed at once runs its per-chunk function once, on the identity: the seed
of element `e` of the seeded value is one at `e` and zero elsewhere
(srcgrad.jacobians._Batched.seeds). Seed-linear fusion (Note [Seed-linear fusion])
leaves most seeded ops as one contraction of the seed with a primal factor,

    tensordot(seed, M, axes=((1, ..., r), A))     seed: (N,) + S, N = prod(S)

whose value on the identity is M with its axes A brought to the front, in the seed's
axis order, and flattened into one axis of N: a transpose and a reshape, where the
GEMM against the identity costs N * N * (the rest of M) multiplications. On the
32 x 10 output of the benchmark MLP's reverse Jacobian (320 seeds) that GEMM and the
identity it reads were nine tenths of the call.

Only a program with one seed parameter qualifies: with several, each seed is a band
of the identity's columns, and a contraction of one is M in a band of rows with zeros
around it.
"""

from __future__ import annotations

from srcgrad import rules
from srcgrad.ir.core import Const, Op, Var
from srcgrad.ir.expand import Expander


def contract_identity_seeds(ops: list, seed: Var, shapes: dict, namer) -> list:
    """`ops` with each full contraction of `seed`, which holds the identity, replaced by
    the other operand transposed and reshaped (Note [Identity seeds])."""
    out = []
    for op in ops:
        perm = _contracted_into(op, seed, shapes)
        if perm is None:
            out.append(op)
            continue
        expander = Expander(namer, out)
        expander.loc = op.loc
        m = op.args[1]
        if perm != tuple(range(len(perm))):
            m = expander.apply(rules.RULES["transpose"], [m, Const(perm)], {})
            out[-1].attrs["backward"] = True
        op.outs[0].name = namer.fresh("_reshape")  # (named for what computes it now)
        out.append(Op("reshape", (m, Const(shapes[op.outs[0]])), op.outs, op.loc, {"backward": True}))
    return out


def _contracted_into(op, seed: Var, shapes: dict):
    """For `tensordot(seed, M, axes)` summing over every axis of the seed but its first:
    the permutation of M's axes that brings the summed ones to the front in the seed's
    order. None for any other op."""
    if op.prim != "tensordot" or op.args[0] is not seed or not isinstance(op.args[1], Var) \
            or not isinstance(op.args[2], Const) or op.args[1] is seed:
        return None
    seed_rank, m_shape = len(shapes.get(seed, ())), shapes.get(op.args[1])
    if seed_rank < 2 or m_shape is None or op.outs[0] not in shapes:
        return None
    axes = op.args[2].value
    if isinstance(axes, int):
        seed_axes, m_axes = tuple(range(seed_rank - axes, seed_rank)), tuple(range(axes))
    else:
        seed_axes, m_axes = (tuple(a) if isinstance(a, (tuple, list)) else (a,) for a in axes)
    seed_axes = tuple(a % seed_rank for a in seed_axes)
    m_axes = tuple(a % len(m_shape) for a in m_axes)
    if sorted(seed_axes) != list(range(1, seed_rank)) or len(set(m_axes)) != len(m_axes):
        return None
    summed = tuple(m for _, m in sorted(zip(seed_axes, m_axes)))
    return summed + tuple(a for a in range(len(m_shape)) if a not in m_axes)
