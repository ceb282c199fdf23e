"""Nested Python structures (tuples, lists, dicts, records) of leaves, flattened and rebuilt.

A tree definition is a plain tuple so it is hashable and printable:
`("leaf",)`, `("tuple", children)`, `("list", children)`, `("dict", keys, children)`,
`("record", cls, names, children, statics)` for a namedtuple or dataclass instance.

Note [Records]
~~~~~~~~~~~~~~
A namedtuple or a dataclass (a model class whose methods read `self.W`) is a tree node
whose children are its fields, in declaration order. A field holding an array, a float
or a container is a child (differentiated); a field holding anything else (an int, a
bool, a string, None, a function: configuration) is *static*: its value is part of the
tree definition, so the compiled variant knows it and the gradient record carries it
unchanged. A rebuilt dataclass is made without calling `__init__` (its fields are set
directly, as `copy` does), so validation in `__post_init__` does not see gradients.
We keep this small module rather than depend on optree: the compiler needs tree
definitions that are plain hashable data it can put in cache keys and walk while
tracing, and records are the only node kind users asked for.

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

import numpy

LEAF = ("leaf",)
# classes that are never containers: a call whose arguments are all of them has no tree
_PLAIN_LEAVES = frozenset({numpy.ndarray, float, int, numpy.float64, numpy.float32})


def is_record(value) -> bool:
    """A namedtuple or dataclass instance (Note [Records]). Class attribute tests only:
    this runs on every argument of every call that flattens its arguments."""
    cls = value.__class__
    if issubclass(cls, tuple):
        return hasattr(cls, "_fields")
    return hasattr(cls, "__dataclass_fields__") and cls is not type


def record_fields(value) -> tuple:
    if isinstance(value, tuple):
        return tuple(value._fields)
    import dataclasses  # (a dataclass instance exists: its module is imported; a cache hit is not)

    return tuple(f.name for f in dataclasses.fields(value))


def _static_field(value) -> bool:
    """Configuration, not data: part of the tree definition (Note [Records])."""
    if isinstance(value, (bool, int, str, bytes, type(None))) and not isinstance(value, float):
        return True
    return callable(value) and not hasattr(value, "shape")


def is_node(value) -> bool:
    """Whether `value` is a container the trees look into (else it is a leaf)."""
    return isinstance(value, (tuple, list, dict)) or is_record(value)


def flatten(value, is_leaf=None):
    """(leaves, treedef) of a nested tuple/list/dict/record value."""
    if is_leaf is None and value.__class__ in _PLAIN_LEAVES:
        return [value], LEAF
    leaves: list = []

    def walk(v):
        if is_leaf is not None and is_leaf(v):
            leaves.append(v)
            return LEAF
        if is_record(v):
            names, children, statics = [], [], []
            for name in record_fields(v):
                field = getattr(v, name)
                if _static_field(field):
                    statics.append((name, field))
                else:
                    names.append(name)
                    children.append(walk(field))
            return ("record", type(v), tuple(names), tuple(children), tuple(statics))
        if isinstance(v, tuple):
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
        if t[0] == "record":
            return make_record(t[1], {**dict(zip(t[2], (build(c) for c in t[3]))), **dict(t[4])})
        return {k: build(c) for k, c in zip(t[1], t[2])}

    return build(treedef)


def make_record(cls, fields: dict):
    """An instance of namedtuple or dataclass `cls` with these field values."""
    if issubclass(cls, tuple):
        return cls(**fields)
    obj = cls.__new__(cls)
    for name, value in fields.items():
        object.__setattr__(obj, name, value)  # frozen dataclasses too, as copy.copy does
    return obj


def children(treedef) -> tuple:
    """The child tree definitions of a node (none for a leaf)."""
    if treedef[0] == "leaf":
        return ()
    return treedef[{"dict": 2, "record": 3}.get(treedef[0], 1)]


def num_leaves(treedef) -> int:
    if treedef[0] == "leaf":
        return 1
    return sum(num_leaves(c) for c in children(treedef))


def flatten_args(args) -> tuple:
    """(all leaves, one tree definition per argument) of a call's arguments."""
    if all(a.__class__ in _PLAIN_LEAVES for a in args):  # the common call: arrays and numbers
        return list(args), (LEAF,) * len(args)
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


# ---------------------------------------------------------------------- results with aux
def split_aux(tree, has_aux: bool, name: str) -> tuple:
    """(the differentiated output's tree, its number of leaves) of a result `tree`;
    with has_aux the result must be `(out, aux)` and `out` comes first in the leaves."""
    if not has_aux:
        return tree, num_leaves(tree)
    if tree[0] not in ("tuple", "list") or len(tree[1]) != 2:
        raise TypeError(f"{name}(..., has_aux=True) needs a function returning (out, aux)")
    return tree[1][0], num_leaves(tree[1][0])


def aux_part(tree, leaves) -> tuple:
    """(aux's tree, aux's leaves) of an `(out, aux)` result."""
    return tree[1][1], leaves[num_leaves(tree[1][0]):]


def describe(t) -> str:
    if t[0] == "leaf":
        return "array"
    if t[0] == "record":
        return f"{t[1].__name__}(" + ", ".join(f"{k}={describe(c)}" for k, c in zip(t[2], t[3])) + ")"
    if t[0] == "dict":
        return "{" + ", ".join(f"{k!r}: {describe(c)}" for k, c in zip(t[1], t[2])) + "}"
    inner = ", ".join(describe(c) for c in t[1])
    return f"({inner})" if t[0] == "tuple" else f"[{inner}]"
