"""Nested Python structures (tuples, lists, dicts) of leaves, flattened and rebuilt.

A tree definition is a plain tuple so it is hashable and printable:
`("leaf",)`, `("tuple", children)`, `("list", children)`, `("dict", keys, children)`.
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
