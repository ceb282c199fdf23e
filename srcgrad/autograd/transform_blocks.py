"""Analytical Jacobians of the functions transforms return, for `gradcheck` and
`srcgrad check` (issue 10: they accept every transform's output).

`sg.grad(f)` and `sg.value_and_grad(f)` are generated code, which the compiler
differentiates like any function. Two kinds are not source the compiler can read:

* `sg.jacobian(f)` / `sg.hessian(f)` assemble their matrix in Python from many
  passes of generated code. Column `a` of the block for argument `i` is the
  tangent out of the generated JVP for `i` along the basis vector `e_a`
  (`f_jvp(*args, e_a)`, for a Hessian the JVP of the generated gradient), and that
  JVP is generated code: its own Jacobian w.r.t. the arguments, by the mode asked
  for, is the derivative of that column. This holds whichever mode the Jacobian
  itself was built with (every mode gives the same matrix).
* `vjp_fn` from `sg.vjp` is linear in its cotangent (a property of the generated
  backward, not an assumption: gradcheck compares with central differences): its
  Jacobian column `a` is `vjp_fn(e_a) - vjp_fn(0)`.
"""

from __future__ import annotations

import numpy

from srcgrad.ir import tree as pytree


def handles(func) -> bool:
    """Whether `func` is a transform's output whose derivative is computed here."""
    from srcgrad import jacobians

    return isinstance(func, jacobians.Jacobian) or _is_vjp_fn(func)


def _is_vjp_fn(func) -> bool:
    compiled = getattr(func, "__srcgrad__", None)
    return getattr(func, "__name__", None) == "vjp_fn" and getattr(compiled, "kind", None) == "vjp"


def analytical_blocks(func, inputs, diff, mode) -> list:
    """blocks[k][j]: (size of output leaf k, size of input diff[j]) of `func(*inputs)`."""
    if _is_vjp_fn(func):
        return _linear_blocks(func, inputs, diff)
    return _jacobian_blocks(func, inputs, diff, mode)


def _jacobian_blocks(jac, inputs, diff, mode) -> list:
    """The derivative of a Jacobian (or Hessian) object's result, leaf by leaf in the
    order of `pytree.flatten(jac(*inputs))`: output k of f, then argument j of wrt."""
    from srcgrad import jacobians
    from srcgrad.pipeline import vjp_jvp

    fn = vjp_jvp.source_function(jac.f)
    per_leaf: dict = {}  # (k, j) -> rows, one (size of out k, size of input d) per d
    n_out = None
    for j, i in enumerate(jac.indices):
        impl = vjp_jvp.compiled_jvp(fn, (i,)).entry()
        arg = numpy.asarray(inputs[i])
        for a in range(arg.size):
            basis = numpy.zeros(arg.size)
            basis[a] = 1.0
            _, outs, blocks = jacobians.jacobian_blocks(
                impl, tuple(inputs) + (basis.reshape(arg.shape),), tuple(diff), mode)
            n_out = len(outs) // 2  # impl returns (outputs, tangents out)
            for k in range(n_out):
                per_leaf.setdefault((k, j), []).append(blocks[n_out + k])
    result = []
    for k in range(n_out or 0):
        for j in range(len(jac.indices)):
            columns = per_leaf[(k, j)]  # columns[a][d]: (size of out k, size of input d)
            size_a = len(columns)
            row = []
            for d in range(len(diff)):
                stacked = numpy.stack([c[d] for c in columns], axis=1)  # (out, a, input d)
                row.append(stacked.reshape(-1, stacked.shape[-1]) if size_a else
                           numpy.zeros((0, numpy.size(inputs[diff[d]]))))
            result.append(row)
    return result


def _linear_blocks(vjp_fn, inputs, diff) -> list:
    """Columns `vjp_fn(e_a) - vjp_fn(0)` of the linear map, per cotangent input."""
    base = [numpy.asarray(g, dtype=float) for g in pytree.flatten(vjp_fn(*inputs))[0]]
    zero = [numpy.asarray(g, dtype=float) for g in pytree.flatten(
        vjp_fn(*[numpy.zeros_like(x) if i in diff else x for i, x in enumerate(inputs)]))[0]]
    blocks = [[None] * len(diff) for _ in base]
    for j, d in enumerate(diff):
        x = numpy.asarray(inputs[d])
        cols = []
        for a in range(x.size):
            e = numpy.zeros(x.size)
            e[a] = 1.0
            args = [numpy.zeros_like(v) if i in diff else v for i, v in enumerate(inputs)]
            args[d] = e.reshape(x.shape)
            outs = pytree.flatten(vjp_fn(*args))[0]
            cols.append([numpy.reshape(numpy.asarray(o, dtype=float) - z, -1)
                         for o, z in zip(outs, zero)])
        for k in range(len(base)):
            blocks[k][j] = (numpy.stack([c[k] for c in cols], axis=1) if cols
                            else numpy.zeros((base[k].size, 0)))
    return blocks
