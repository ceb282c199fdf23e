"""NumPy call forms and index objects lowered onto rows, or refused (Note [No silent
constants] in srcgrad.passes.activity).

Each of these would otherwise turn a traced value into a constant or crash:

* `np.r_[x, C]` / `np.c_[x, C]` are a `getitem` of a constant object with x in its
  index: evaluated at run time, the derivative through x was lost. They are a
  `concatenate` of `atleast_1d` items (r_) or of `column_stack`ed items along the last
  axis (c_). `np.s_[i]` / `np.index_exp[i]` are the index itself. Any other constant
  that is not an array, indexed with a traced value, is refused.
* `np.einsum`'s sublist form (`np.einsum(A, (0, 1), (1, 0))`) becomes its subscript
  string; three or more operands are contracted pairwise, left to right, each step
  keeping the indices a later operand or the output still needs.
* `np.linalg.norm` matrix norms other than Frobenius (ord 'nuc', 2, -2, 1, -1, inf,
  -inf over two axes) have no row of their own: where the matrix is known when
  compiling (an axis pair, or a 2-d argument in a shape-specialised variant) they are
  the composition `norm_of_matrices` (singular values, or sums of absolute values:
  Note [Compositions]); otherwise the row's `vector_only` refuses when the derivative
  runs, naming the ord (srcgrad.errors.note_user_line adds the user's line to the error).
* `np.block` of nested lists is a `concatenate` per level of leaves given the result's
  number of dimensions (`expand_dims`), as NumPy builds it.
* `np.average(x, axis, weights)` is `sum(x * w, axis) / sum(w, axis)`.
* `np.linalg.svd(a, compute_uv=False)` is the singular values alone (the `svdvals`
  row); `hermitian=True` is refused (NumPy then reads one triangle through eigh).
"""

from __future__ import annotations

import inspect

import numpy

from srcgrad import rules
from srcgrad.ir.core import Const, Pack, Var

NOT_LOWERED = object()
# NumPy's letters for sublist ints 0..51, in their order (an implicit output is sorted)
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def index_object(tracer, obj, index, node):
    """`obj[index]` of a constant object with a traced value in `index`."""
    items = list(index) if isinstance(index, tuple) else [index]
    if obj is numpy.s_ or obj is numpy.index_exp:
        if all(isinstance(i, (Var, Const)) for i in items):
            return index if obj is numpy.s_ or isinstance(index, tuple) else (index,)
        tracer.fail(node, f"`np.{'s_' if obj is numpy.s_ else 'index_exp'}` of a slice with "
                    "traced bounds", "write the index in place: `x[a:b]`")
    if obj is numpy.r_ or obj is numpy.c_:
        name = "r_" if obj is numpy.r_ else "c_"
        # NumPy's AxisConcatenator: r_ joins along 0 at least 1-d, c_ along -1 at least 2-d
        # with a vector made a column (trans1d 0); a leading directive string sets them
        axis, ndmin, trans1d = (0, 1, -1) if name == "r_" else (-1, 2, 0)
        if items and isinstance(items[0], Const) and isinstance(items[0].value, str):
            axis, ndmin, trans1d = _directive(tracer, name, items.pop(0).value, ndmin, trans1d, node)
        promote = "atleast_1d" if ndmin <= 1 else "atleast_2d" if trans1d in (-1, 1) else "column"
        parts = []
        for item in items:
            if isinstance(item, Const) and isinstance(item.value, slice):
                item = Const(numpy.r_[item.value])  # a static range of numbers
            elif isinstance(item, Const) and isinstance(item.value, str) or isinstance(item, Pack):
                tracer.fail(node, f"`np.{name}` with a directive string after its first item, or a "
                            "traced slice", "use np.concatenate / np.column_stack of the arrays")
            elif isinstance(item, (list, tuple)):
                item = _stack_nested(tracer, item, node)
            elif not isinstance(item, (Var, Const)):
                tracer.fail(node, f"`np.{name}` of a value that is not an array")
            if promote == "column":
                parts.append(tracer.apply(rules.RULES["column_stack"], [[item]], {}, node))
            else:
                parts.append(tracer.apply(rules.RULES[promote], [item], {}, node))
        return tracer.apply(rules.RULES["concatenate"], [parts], {"axis": Const(axis)}, node)
    tracer.fail(node, f"indexing the object `{type(obj).__name__}` with a traced value "
                "(srcgrad cannot read what its __getitem__ computes)",
                "index it with constants only, or compute the value with NumPy functions")


def _directive(tracer, name, text, ndmin, trans1d, node):
    """(axis, ndmin, trans1d) of an `np.r_`/`np.c_` directive string ('0', '-1', '0,2',
    '1,2,0'), as NumPy reads it, where the promotion is one of atleast_1d, atleast_2d or
    a column (ndmin up to 2); 'r' and 'c' (an np.matrix result) and others are refused."""
    try:
        numbers = [int(v) for v in text.split(",")]
    except ValueError:
        numbers = []
    if not 1 <= len(numbers) <= 3:
        tracer.fail(node, f"`np.{name}['{text}', ...]`" + (
            " (the directive builds an np.matrix, whose `*` is a matrix product)"
            if text in ("r", "c") else " (an unknown directive)"),
                    "use np.concatenate of np.atleast_2d / np.column_stack of the arrays")
    axis = numbers[0]
    if len(numbers) > 1:
        ndmin = numbers[1]
    if len(numbers) > 2:
        trans1d = numbers[2]
    if ndmin > 2 or ndmin == 2 and trans1d not in (-2, -1, 0, 1):
        tracer.fail(node, f"`np.{name}['{text}', ...]` (a promotion to {ndmin} dimensions with "
                    f"the vector's axis at {trans1d})",
                    "promote the arrays with np.expand_dims, then np.concatenate them")
    return axis, ndmin, trans1d


def _stack_nested(tracer, seq, node):
    """A nested list/tuple of traced values and constants as one array."""
    items = [_stack_nested(tracer, item, node) if isinstance(item, (tuple, list)) else item
             for item in seq]
    if not items:
        tracer.fail(node, "an empty list inside `np.array` of traced values")
    for item in items:
        if not isinstance(item, (Var, Const)):
            tracer.fail(node, "`np.array` of a list holding a dict or an object",
                        "build the array from numbers and arrays")
    return tracer.apply(rules.RULES["stack"], [items], {"axis": Const(0)}, node)


def _static(value):
    """The plain Python value of a tvalue made of constants only, else NOT_LOWERED."""
    if isinstance(value, Const):
        return value.value
    if isinstance(value, (tuple, list)):
        items = [_static(v) for v in value]
        if any(i is NOT_LOWERED for i in items):
            return NOT_LOWERED
        return type(value)(items)
    if isinstance(value, dict):
        items = {k: _static(v) for k, v in value.items()}
        # (`is`, not `in`: `in` compares with ==, which an array value answers elementwise)
        return NOT_LOWERED if any(i is NOT_LOWERED for i in items.values()) else items
    return NOT_LOWERED


# ---------------------------------------------------------------------- einsum
def einsum(tracer, args, kwargs, node):
    if set(kwargs) - {"optimize"} or not args:
        return NOT_LOWERED
    optimize = kwargs.get("optimize", Const(False))
    first = args[0]
    if isinstance(first, Const) and isinstance(first.value, str):
        spec, operands = first.value.replace(" ", ""), list(args[1:])
        if len(operands) <= 2:
            return NOT_LOWERED
    else:
        spec, operands = _sublists(tracer, args, node)
        if len(operands) <= 2:
            return tracer.apply(rules.RULES["einsum"], [Const(spec), *operands],
                                {"optimize": optimize}, node)
    lhs, arrow, out = spec.partition("->")
    inputs = lhs.split(",")
    if len(inputs) != len(operands):
        tracer.error(node, f"`np.einsum('{spec}', ...)` names {len(inputs)} operands but is "
                     f"given {len(operands)}")
    if "." in spec:
        tracer.fail(node, "`np.einsum` of three or more operands with '...'",
                    "nest einsums of two operands each")
    if not arrow:  # implicit output: the indices used once, sorted (as NumPy)
        letters = "".join(inputs)
        out = "".join(sorted(ch for ch in set(letters) if letters.count(ch) == 1))
    path = _static(optimize)
    if isinstance(path, (list, tuple)) and path and path[0] == "einsum_path":
        return _along_path(tracer, list(zip(inputs, operands)), out, path[1:], node)
    acc, acc_sub = operands[0], inputs[0]
    for k in range(1, len(operands)):
        if k == len(operands) - 1:
            keep = out
        else:
            needed = set(out) | set("".join(inputs[k + 1:]))
            keep = "".join(dict.fromkeys(ch for ch in acc_sub + inputs[k] if ch in needed))
        acc = tracer.apply(rules.RULES["einsum"],
                           [Const(f"{acc_sub},{inputs[k]}->{keep}"), acc, operands[k]],
                           {"optimize": optimize}, node)
        acc_sub = keep
    return acc


def _along_path(tracer, pending, out, steps, node):
    """An explicit `optimize=['einsum_path', (i, j), ...]`, as NumPy reads it: each step
    contracts the pending operands it names (in pairs, left to right) and appends the
    result to the end; each contraction keeps the indices another operand or the output
    still needs. (Passing the whole path to each pairwise einsum made NumPy raise.)"""
    for step in steps:
        if not isinstance(step, (list, tuple)) or not step or \
                any(not isinstance(i, int) or not 0 <= i < len(pending) for i in step):
            tracer.error(node, f"`np.einsum`'s path step {step!r} does not name pending operands")
        picked = [pending[i] for i in step]
        pending = [p for i, p in enumerate(pending) if i not in set(step)]
        needed = set(out) | set("".join(sub for sub, _ in pending))
        (acc_sub, acc), rest = picked[0], picked[1:]
        for k, (sub, operand) in enumerate(rest):
            later = needed | set("".join(s for s, _ in rest[k + 1:]))
            keep = "".join(dict.fromkeys(ch for ch in acc_sub + sub if ch in later))
            acc = tracer.apply(rules.RULES["einsum"], [Const(f"{acc_sub},{sub}->{keep}"), acc, operand],
                               {"optimize": Const(False)}, node)
            acc_sub = keep
        pending.append((acc_sub, acc))
    if len(pending) != 1:
        tracer.error(node, "`np.einsum`'s path leaves operands uncontracted")
    sub, value = pending[0]
    if sub != out:  # (a path of one step over every operand ends in the output's order)
        value = tracer.apply(rules.RULES["einsum"], [Const(f"{sub}->{out}"), value], {}, node)
    return value


def _sublists(tracer, args, node):
    """(subscripts, operands) of `einsum(op0, sub0, op1, sub1, ..., [out])`."""
    def letters(sub):
        sub = _static(sub)
        sub = Const(sub) if sub is not NOT_LOWERED else None
        if sub is None or not isinstance(sub.value, (list, tuple)):
            tracer.fail(node, "`np.einsum` with an operand where a sublist belongs "
                        "(sublists must be constant tuples of ints)")
        text = ""
        for i in sub.value:
            if i is Ellipsis:
                text += "..."
            elif isinstance(i, (int, numpy.integer)) and 0 <= i < len(_LETTERS):
                text += _LETTERS[i]
            else:
                tracer.error(node, f"`np.einsum` sublist item {i!r} is not an int in [0, 52)")
        return text

    operands, subs = list(args[0::2]), [letters(s) for s in args[1::2]]
    out = None
    if len(args) % 2 == 1:  # the last item is the output sublist
        out = letters(operands.pop())
    return ",".join(subs) + ("" if out is None else "->" + out), operands


# ---------------------------------------------------------------------- linalg.norm
_NORM = inspect.Signature([inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                             default=d) for n, d in
                           (("x", inspect.Parameter.empty), ("ord", None), ("axis", None),
                            ("keepdims", False))])


def norm(tracer, args, kwargs, node):
    try:
        bound = _NORM.bind(*args, **kwargs)
    except TypeError:
        return NOT_LOWERED
    ord_, axis = (_static(bound.arguments.get(n, Const(None))) for n in ("ord", "axis"))
    if ord_ is NOT_LOWERED or axis is NOT_LOWERED:
        return NOT_LOWERED
    ord_, axis = Const(ord_), Const(axis)
    x = bound.arguments["x"]
    if not isinstance(x, Var):
        return NOT_LOWERED
    o, a = ord_.value, axis.value
    if o is None or o == "fro":
        return NOT_LOWERED
    matrix = o == "nuc" or (isinstance(a, tuple) and len(a) == 2)
    if not matrix and a is None:  # a 2-d x: known in a shape-specialised variant
        ndim = tracer.shape_fact(tracer.apply(rules.RULES["ndim"], [x], {}, node))
        matrix = isinstance(ndim, Const) and ndim.value == 2
    if matrix:  # singular values or sums of absolute values (Note [Compositions])
        from srcgrad.frontend.parse import parse_function
        from srcgrad.rules import compositions
        return tracer.inline(parse_function(compositions.norm_of_matrices),
                             [x, ord_, axis, bound.arguments.get("keepdims", Const(False))],
                             {}, node)
    return NOT_LOWERED


_SVD = inspect.Signature([inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                            default=d) for n, d in
                          (("a", inspect.Parameter.empty), ("full_matrices", True),
                           ("compute_uv", True), ("hermitian", False))])


def svd(tracer, args, kwargs, node):
    try:
        bound = _SVD.bind(*args, **kwargs)
    except TypeError:
        return NOT_LOWERED
    a, get = bound.arguments["a"], bound.arguments.get
    if not isinstance(a, Var):
        return NOT_LOWERED  # constants: NumPy's own call
    full, uv, hermitian = (_static(get(n, Const(d))) for n, d in
                           (("full_matrices", True), ("compute_uv", True), ("hermitian", False)))
    if any(v is NOT_LOWERED for v in (full, uv, hermitian)):
        tracer.fail(node, "`np.linalg.svd` with a traced full_matrices, compute_uv or hermitian",
                    "write each flag as True or False: they choose the form being "
                    "differentiated, which the compiled code fixes")
    if hermitian:
        tracer.fail(node, "`np.linalg.svd(..., hermitian=True)`",
                    "drop `hermitian=True`: the general SVD of a symmetric matrix has the same "
                    "singular values")
    if not uv:
        return tracer.apply(rules.RULES["svdvals"], [a], {}, node)
    return tracer.apply(rules.RULES["svd"], [a], {"full_matrices": Const(full)}, node)


# ---------------------------------------------------------------------- block
def block(tracer, args, kwargs, node):
    """`np.block` of nested lists holding traced values, as NumPy builds it: each leaf
    given the result's number of dimensions (leading 1s), then one `concatenate` per
    nesting level, the innermost along the last axis. The depth and the leaves'
    dimensions are read while tracing (a shape fact of this variant; `_leaf_ndim`)."""
    if kwargs or len(args) != 1 or not isinstance(args[0], list) or \
            _static(args[0]) is not NOT_LOWERED:
        return NOT_LOWERED
    leaves = []

    def depth(x):
        if not isinstance(x, list):
            leaves.append(x)
            return 0
        if not x:
            tracer.fail(node, "`np.block` of an empty list")  # (NumPy raises too)
        depths = {depth(item) for item in x}
        if len(depths) != 1:
            tracer.fail(node, "`np.block` of lists nested to different depths")  # (as NumPy)
        return 1 + depths.pop()

    levels = depth(args[0])
    ndim = max([levels] + [n for n in (_leaf_ndim(tracer, leaf, node) for leaf in leaves)
                           if n is not None])

    def build(x, level):
        if level == levels:
            known = _leaf_ndim(tracer, x, node)
            pad = 0 if known is None else ndim - known
            if isinstance(x, Const):
                return Const(numpy.reshape(x.value, (1,) * pad + numpy.shape(x.value)))
            return x if not pad else tracer.apply(rules.RULES["expand_dims"], [x],
                                                   {"axis": Const(tuple(range(pad)))}, node)
        parts = [build(item, level + 1) for item in x]
        return tracer.apply(rules.RULES["concatenate"], [parts],
                            {"axis": Const(level - levels)}, node)

    return build(args[0], 0)


def _leaf_ndim(tracer, leaf, node):
    if isinstance(leaf, Const):
        return numpy.ndim(leaf.value)
    # Unknown in shape-generic code: such a leaf is taken to have the result's number of
    # dimensions; one with fewer makes a concatenation raise (NumPy's ValueError), never a
    # different value (a block of equal-dimension arrays needs no padding).
    ndim = tracer.shape_fact(tracer.apply(rules.RULES["ndim"], [leaf], {}, node))
    return ndim.value if isinstance(ndim, Const) else None

# ---------------------------------------------------------------------- average
_AVERAGE = inspect.Signature([inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                default=d) for n, d in
                              (("a", inspect.Parameter.empty), ("axis", None),
                               ("weights", None), ("returned", False))]
                             + [inspect.Parameter("keepdims", inspect.Parameter.KEYWORD_ONLY,
                                                  default=False)])


def average(tracer, args, kwargs, node):
    try:
        bound = _AVERAGE.bind(*args, **kwargs)
    except TypeError:
        return NOT_LOWERED
    get = bound.arguments.get
    a, w = bound.arguments["a"], get("weights", Const(None))
    axis, returned, keepdims = (_static(get(n, Const(d))) for n, d in
                                (("axis", None), ("returned", False), ("keepdims", False)))
    if any(v is NOT_LOWERED for v in (axis, returned, keepdims)):
        tracer.fail(node, "`np.average` with a traced axis, returned or keepdims")
    axis, returned, keepdims = Const(axis), Const(returned), Const(keepdims)
    static = {"axis": axis, "keepdims": keepdims}
    if isinstance(w, Const) and w.value is None:
        mean = tracer.apply(rules.RULES["mean"], [a], static, node)
        if not returned.value:
            return mean
        count = tracer.apply(rules.RULES["divide"], [
            tracer.apply(rules.RULES["size"], [a], {}, node),
            tracer.apply(rules.RULES["size"], [mean], {}, node)], {}, node)
        return mean, tracer.apply(rules.RULES["multiply"], [
            tracer.apply(rules.RULES["ones_like"], [mean], {}, node), count], {}, node)
    if axis.value is not None and not isinstance(axis.value, int):
        tracer.fail(node, "`np.average` with weights over a tuple of axes",
                    "write sum(x * w, axis) / sum(w, axis)")
    # NumPy: weights of x's shape, or (with an int axis) 1-d along that axis; both are
    # weights of x's shape once the 1-d ones lie on the axis (moveaxis of a broadcast)
    if axis.value is None:
        wfull = w
    else:
        wdim, adim = _ndim(tracer, w, node), _ndim(tracer, a, node)
        if wdim is None or adim is None:
            tracer.fail(node, "`np.average` with weights and an axis, of arrays whose ranks "
                        "are not known when compiling", "write sum(x * w, axis) / sum(w, axis)")
        wfull = w
        if wdim == 1 and adim != 1:
            moved = tracer.apply(rules.RULES["moveaxis"], [a, axis, Const(-1)], {}, node)
            spread = tracer.apply(rules.RULES["broadcast_to"], [
                w, tracer.apply(rules.RULES["shape"], [moved], {}, node)], {}, node)
            wfull = tracer.apply(rules.RULES["moveaxis"], [spread, Const(-1), axis], {}, node)
    wa = tracer.apply(rules.RULES["multiply"], [a, wfull], {}, node)
    num = tracer.apply(rules.RULES["sum"], [wa], static, node)
    den = tracer.apply(rules.RULES["sum"], [
        tracer.apply(rules.RULES["broadcast_to"], [
            wfull, tracer.apply(rules.RULES["shape"], [wa], {}, node)], {}, node)], static, node)
    avg = tracer.apply(rules.RULES["divide"], [num, den], {}, node)
    if returned.value:
        return avg, tracer.apply(rules.RULES["broadcast_to"], [
            den, tracer.apply(rules.RULES["shape"], [avg], {}, node)], {}, node)
    return avg


def _ndim(tracer, v, node):
    """The rank of `v` when known while compiling (a constant, or a shape fact)."""
    if isinstance(v, Const):
        return numpy.ndim(v.value)
    found = tracer.shape_fact(tracer.apply(rules.RULES["ndim"], [v], {}, node))
    return found.value if isinstance(found, Const) else None
