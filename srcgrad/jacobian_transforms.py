"""sg.vjp and sg.jvp of a function that sg.jacobian or sg.hessian returned (issue 28).

Note [Transforms of a Jacobian]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A Jacobian has no generated source (Note [Jacobians of Jacobians] in srcgrad.jacobian_trees),
so sg.vjp and sg.jvp of one are computed from its own Jacobian, S = sg.jacobian(J,
wrt=every primal), which srcgrad.jacobians computes from the function's second (for a
Hessian, third) derivatives: vjp_fn(ct)[i] = sum over J's output leaves of
tensordot(ct_k, S_k[i], ct_k.ndim), and the tangent of leaf k is sum over primals of
tensordot(S_k[i], t_i, t_i.ndim). Exact, and S costs one Hessian per output element:
a composition for small problems, not a fast path. Array primals only; a tuple, list or
dict primal, has_aux, and sg.grad / sg.value_and_grad / sg.hessian of a Jacobian (a
scalar only for a 0-d argument of a scalar function) stay a CompileError at the call.
"""

from __future__ import annotations

import numpy

from srcgrad.errors import CompileError
from srcgrad.ir import tree as pytree
from srcgrad.jacobians import Jacobian, JacobianSource


def is_jacobian(f) -> bool:
    return isinstance(f, Jacobian)


def _refuse(jac, why: str):
    message = JacobianSource(jac).refusal()
    raise CompileError(f"{message} ({why})")


def _second(jac, primals, transform: str, has_aux: bool):
    """(J's output, its leaves' tree, S_k per output leaf: a tuple over the primals)."""
    if has_aux:
        _refuse(jac, f"sg.{transform} with has_aux of a Jacobian")
    if any(pytree.is_node(p) for p in primals):
        _refuse(jac, f"sg.{transform} of a Jacobian at a tuple, list or dict primal")
    primals = tuple(numpy.float64(p) if p.__class__ is float else p for p in primals)
    out = jac(*primals)
    leaves, tree = pytree.flatten(out)
    second = Jacobian(jac, tuple(range(len(primals))), False, "auto")(*primals)
    return out, leaves, tree, _at_leaves(tree, second)


def _at_leaves(tree, value) -> list:
    """The parts of `value` at the leaves of `tree` (value nests at least that deep)."""
    if tree[0] == "leaf":
        return [value]
    if tree[0] in ("tuple", "list"):
        return [p for t, v in zip(tree[1], value) for p in _at_leaves(t, v)]
    if tree[0] == "dict":
        return [p for k, t in zip(tree[1], tree[2]) for p in _at_leaves(t, value[k])]
    return [p for name, t in zip(tree[2], tree[3]) for p in _at_leaves(t, getattr(value, name))]


def vjp(jac, primals, has_aux: bool):
    """`(out, vjp_fn)` of sg.vjp(jac, *primals) (Note [Transforms of a Jacobian])."""
    out, leaves, tree, second = _second(jac, primals, "vjp", has_aux)

    def vjp_fn(cotangent):
        cts, ct_tree = pytree.flatten(cotangent)
        if ct_tree != tree:
            raise ValueError(f"vjp_fn: the cotangent is {pytree.describe(ct_tree)}, but the "
                             f"Jacobian is {pytree.describe(tree)}")
        grads = []
        for i, p in enumerate(primals):
            total = numpy.zeros(numpy.shape(p))
            for k, ct in enumerate(cts):
                ct = numpy.asarray(ct, dtype=float)
                if ct.shape != numpy.shape(leaves[k]):
                    raise ValueError(f"vjp_fn: cotangent {k} has shape {ct.shape}, but the "
                                     f"Jacobian's output has shape {numpy.shape(leaves[k])}")
                total = total + numpy.tensordot(ct, second[k][i], axes=ct.ndim)
            grads.append(total)
        return tuple(grads)

    return out, vjp_fn


def jvp(jac, primals, tangents, has_aux: bool):
    """`(out, tangent_out)` of sg.jvp(jac, primals, tangents)."""
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise ValueError(f"jvp: {len(primals)} primals but {len(tangents)} tangents; "
                         "give one tangent per primal")
    out, leaves, tree, second = _second(jac, primals, "jvp", has_aux)
    touts = []
    for k, leaf in enumerate(leaves):
        total = numpy.zeros(numpy.shape(leaf))
        for i, t in enumerate(tangents):
            t = numpy.asarray(t, dtype=float)
            if t.shape != numpy.shape(primals[i]):
                raise ValueError(f"jvp: tangent {i} has shape {t.shape}, but primal {i} has "
                                 f"shape {numpy.shape(primals[i])}")
            total = total + numpy.tensordot(second[k][i], t, axes=t.ndim)
        touts.append(total)
    return out, pytree.unflatten(tree, touts)
