"""Nested Python structures (tuples, lists, dicts) of leaves, flattened and rebuilt.

A tree definition is a plain tuple so it is hashable and printable:
`("leaf",)`, `("tuple", children)`, `("list", children)`, `("dict", keys, children)`.

Note [Container arguments]
~~~~~~~~~~~~~~~~~~~~~~~~~~
`sg.grad(f)(params, x)` with `params` a dict (tuple, list, nesting) of arrays: the
function is compiled for the *structure* of its arguments. `flatten_args` gives the
leaves and one tree definition per argument; the tracer binds each parameter to a
native container of fresh Vars (`Tracer.trace_function(fs, arg_trees)`), so the
generated function takes the leaves as flat parameters (`params_W, params_b, x`),
and `group_gradients` nests the flat gradients back into each argument's structure.
The trees are part of the variant's key: another structure compiles another variant.
"""

from __future__ import annotations

LEAF = ("leaf",)


def flatten(value, is_leaf=None):
    """(leaves, treedef) of a nested tuple/list/dict value."""
    leaves: list = []

    def walk(v):
        if is_leaf is not None and is_leaf(v):
            leaves.append(v)
            return LEAF
        if isinstance(v, tuple) and not hasattr(v, "_fields"):
            return ("tuple", tuple(walk(c) for c in v))
        if isinstance(v, list):
            return ("list", tuple(walk(c) for c in v))
        if isinstance(v, dict):
            keys = tuple(v.keys())
            return ("dict", keys, tuple(walk(v[k]) for k in keys))
        leaves.append(v)
        return LEAF

    return leaves, walk(value)


def unflatten(treedef, leaves):
    """Inverse of `flatten`."""
    it = iter(leaves)

    def build(t):
        if t[0] == "leaf":
            return next(it)
        if t[0] == "tuple":
            return tuple(build(c) for c in t[1])
        if t[0] == "list":
            return [build(c) for c in t[1]]
        return {k: build(c) for k, c in zip(t[1], t[2])}

    return build(treedef)


def num_leaves(treedef) -> int:
    if treedef[0] == "leaf":
        return 1
    children = treedef[1] if treedef[0] != "dict" else treedef[2]
    return sum(num_leaves(c) for c in children)


def flatten_args(args) -> tuple:
    """(all leaves, one tree definition per argument) of a call's arguments."""
    leaves, trees = [], []
    for a in args:
        sub, tree = flatten(a)
        leaves += sub
        trees.append(tree)
    return leaves, tuple(trees)


def leaf_ranges(trees) -> list:
    """(first leaf index, number of leaves) of each argument."""
    out, start = [], 0
    for t in trees:
        n = num_leaves(t)
        out.append((start, n))
        start += n
    return out


def group_gradients(flat, trees, wrt) -> tuple:
    """Flat leaf gradients (for the leaves of the arguments `wrt`, in order) nested
    back into those arguments' structures."""
    out, k = [], 0
    for i in wrt:
        n = num_leaves(trees[i])
        out.append(unflatten(trees[i], flat[k:k + n]))
        k += n
    return tuple(out)
