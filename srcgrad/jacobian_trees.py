"""Jacobians whose function is itself a Jacobian, and Jacobians of functions of tuple,
list and dict arguments: the stand-in functions srcgrad.jacobians differentiates instead
(Note [Jacobians of Jacobians], Note [Jacobians of container arguments])."""

from __future__ import annotations

import copy
import linecache
import sys

import numpy

from srcgrad.ir import tree as pytree


def inspect_unwrap(fn):
    while getattr(fn, "__wrapped__", None) is not None:
        fn = fn.__wrapped__
    return fn


# Note [Jacobians of Jacobians]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A Jacobian has no generated source a transform could read (it is assembled from many
# passes), so sg.jacobian(sg.jacobian(g)) is computed from g: its entries are g's second
# derivatives, d2 g_k[e] / d x_i d x_o for the inner `wrt` i and the outer `wrt` o, and
# for each output element e they are one Hessian, of `sum(g(...)[k] * ct)` with ct the
# one-hot of e (a generated function, `contract`, of g's arguments and ct: one compile
# for every e). sg.jacobian(sg.hessian(f)) is the same with g = sg.grad(f), the
# Hessian's own function, whose generated gradient the Hessian's program differentiates
# twice more. The result is shaped and nested as JAX's: each leaf of the inner
# Jacobian's result (out_k.shape + arg_i.shape) gains the outer argument's shape, in a
# tuple over the outer `wrt` when it is a tuple. Before issue 28 the outer Jacobian
# copied the inner's state (functools.update_wrapper's __dict__) and returned the inner
# Jacobian, a plausible wrong answer. Anything else over a Jacobian (sg.grad, sg.vjp,
# sg.jvp, sg.hessian, three deep) is a CompileError at the user's call: JacobianSource.entry.


def nested_jacobian(inner, outer_indices, outer_single, args):
    """sg.jacobian(inner, wrt=outer_indices)(*args) for `inner` a Jacobian (of g) or a
    Hessian (its g the gradient): Note [Jacobians of Jacobians]."""
    api = sys.modules["srcgrad.api"]  # (above this module: it made `inner`, so it is imported)
    g = inner.f
    out = g(*copy.deepcopy(args))  # its output's structure (on copies: g may write into them)
    leaves, tree = pytree.flatten(out)
    wrt = tuple(sorted(set(inner.indices) | set(outer_indices)))
    where = {i: n for n, i in enumerate(wrt)}
    results = []
    for k, path in enumerate(_leaf_paths(tree)):
        hess = api.hessian(_contract(inner, g, len(args), k, path), wrt=wrt)
        shape = numpy.shape(leaves[k])
        ct = numpy.zeros(shape)
        rows = []
        for e in range(ct.size):
            ct.reshape(-1)[e] = 1.0
            rows.append(hess(*args, ct))
            ct.reshape(-1)[e] = 0.0
        per_inner = []
        for i in inner.indices:
            per_outer = []
            for o in outer_indices:
                block_shape = shape + numpy.shape(args[i]) + numpy.shape(args[o])
                stacked = numpy.array([r[where[i]][where[o]] for r in rows]) if rows else \
                    numpy.zeros(block_shape)
                per_outer.append(stacked.reshape(block_shape))
            per_inner.append(per_outer[0] if outer_single else tuple(per_outer))
        results.append(per_inner[0] if inner.single else tuple(per_inner))
    return pytree.unflatten(tree, results)


def _leaf_paths(tree, prefix: str = "") -> list:
    """The index expression of each leaf of an output tree, in pytree.flatten's order."""
    if tree[0] == "leaf":
        return [prefix]
    if tree[0] in ("tuple", "list"):
        return [p for n, c in enumerate(tree[1]) for p in _leaf_paths(c, f"{prefix}[{n}]")]
    if tree[0] == "dict":
        return [p for key, c in zip(tree[1], tree[2]) for p in _leaf_paths(c, f"{prefix}[{key!r}]")]
    return [p for name, c in zip(tree[2], tree[3]) for p in _leaf_paths(c, f"{prefix}.{name}")]


def _contract(inner, g, n: int, k: int, path: str):
    """`def <g>_contract(a0, .., _ct): return _np.sum(_fn(a0, ..)<path> * _ct)`, kept on
    `inner` per output leaf; its text in linecache, where the compiler reads it."""
    made = inner.__dict__.setdefault("_contracts", {})
    if (n, k) in made:
        return made[n, k]
    params = ", ".join(f"a{j}" for j in range(n))
    name = f"{getattr(inspect_unwrap(g), '__name__', 'g')}_contract"
    name = name if name.isidentifier() else "_lambda_contract"
    text = f"def {name}({params}, _ct):\n    return _np.sum(_fn({params}){path} * _ct)\n"
    filename = f"<srcgrad contract {name} {id(inner):x} {k}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
    ns = {"_fn": g, "_np": numpy, "__name__": getattr(g, "__module__", None) or "__main__"}
    exec(compile(text, filename, "exec", dont_inherit=True), ns)  # noqa: S102 (our own text)
    made[n, k] = ns[name]
    return ns[name]


# Note [Jacobians of container arguments]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The per-seed and batched code take arrays, one seed space per argument; a tuple, list
# or dict argument (an IndexError in generated code before issue 28) is handled by a
# stand-in function of its leaves, `def f_leaves(a0, a1_0, a1_1): return _fn(a0,
# {'w': a1_0, 'b': a1_1})`, whose Jacobian (or Hessian) w.r.t. the leaves of the `wrt`
# arguments is regrouped like JAX's: for each output leaf, each argument's block is
# nested like the argument (a dict of out.shape + leaf.shape arrays). A Hessian's blocks
# nest twice: its outer level is its gradient's, so H['w']['b'] is d2f / dw db. A
# namedtuple or dataclass argument is refused (its fields would need a constructor).


def leaf_function(fn, trees, transform):
    """The stand-in of `fn` taking the leaves of container arguments (the Note above)."""
    params, calls = [], []
    for j, tree in enumerate(trees):
        names = iter(f"a{j}_{k}" for k in range(10 ** 6))

        def build(t, names=names):
            if t[0] == "leaf":
                name = next(names)
                params.append(name)
                return name
            if t[0] == "tuple":
                return "(" + "".join(build(c) + ", " for c in t[1]) + ")"
            if t[0] == "list":
                return "[" + ", ".join(build(c) for c in t[1]) + "]"
            if t[0] == "dict" and all(isinstance(key, (str, int)) for key in t[1]):
                return "{" + ", ".join(f"{key!r}: {build(c)}" for key, c in zip(t[1], t[2])) + "}"
            raise TypeError(f"{transform}: an argument holds a namedtuple, dataclass or a "
                            "dict with keys other than str and int; pass its arrays as "
                            "separate arguments, or in tuples, lists or dicts")

        if tree == pytree.LEAF:
            params.append(f"a{j}")
            calls.append(f"a{j}")
        else:
            calls.append(build(tree))
    base = getattr(inspect_unwrap(fn), "__name__", "f")
    name = f"{base}_leaves" if f"{base}_leaves".isidentifier() else "_lambda_leaves"
    text = f"def {name}({', '.join(params)}):\n    return _fn({', '.join(calls)})\n"
    filename = f"<srcgrad leaves {name} {id(fn):x} {abs(hash(trees)):x}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
    ns = {"_fn": fn, "__name__": getattr(fn, "__module__", None) or "__main__"}
    exec(compile(text, filename, "exec", dont_inherit=True), ns)  # noqa: S102 (our own text)
    return ns[name]
