"""Batching: one derivative program over a batch of seeds (`sg.jacobian`, `sg.hessian`).

Note [Batching]
~~~~~~~~~~~~~~~
A Jacobian is the derivative program run on every basis seed: a JVP on each input
direction (forward) or a VJP on each output direction (reverse). Instead of running
the program once per seed, this pass rewrites it *once* so that the seeds, and every
value computed from them, carry a leading batch axis of size B, while primal values
(computed from the arguments alone) do not. It is JAX's batching rules, emitted as
source: each op that reads a batched value gets its batched spelling here, at compile
time, and the generated code runs one pass per chunk of B seeds.

The program is specialised: it is compiled for the argument shapes and one B, after
the shape probe (Note [Shape specialisation] in srcgrad.passes.shapes) ran it with
unbatched example seeds. So every value's *unbatched* shape is known, static values
computed from shapes (`xp.shape(x)`, sizes) are constants, and each batched spelling
is written with literal axes and shapes:

* elementwise ops broadcast: a primal operand lines up with the batched one on the
  right, so only a batched operand of lower rank than the result needs its axes
  padded (`(B, 3)` against a `(4, 3)` primal becomes `(B, 1, 3)`);
* reductions and axis arguments shift by one (a negative axis is unchanged; None
  becomes every axis but the batch axis);
* reshape / broadcast_to prepend B, transpose keeps the batch axis first;
* matmul / dot / tensordot / einsum get their batched spelling (a 1-D batched
  operand swaps sides: `a @ v_b` is `v_b @ a.T`);
* an index gets a leading `:` (refused where NumPy would move advanced-index axes to
  the front: non-adjacent integer arrays);
* `unbroadcast` / `expand_reduced` become the sums and reshapes their shapes imply.

An op with a batched operand and no batched form here raises `Unbatchable` (with the
op and why): the caller falls back to one pass per seed (srcgrad.jacobians), which is
slower but always available. Control flow, custom Functions and effects are refused
that way today.

After batching, chains of products, matmuls and sums of batched values with primal
ones become contractions in a chosen order (Note [Seed-linear fusion] in
srcgrad.passes.batch_fuse), and what no seed reaches runs once per call, not once per
chunk (Note [Hoisting the primal] in srcgrad.pipeline.batched).
"""

from __future__ import annotations

import numpy

from srcgrad import rules
from srcgrad.ir.core import Const, Op, Pack, Var, operand_vars, substitute
from srcgrad.ir.expand import Expander
from srcgrad.passes.batch_base import (
    MAPPED_OPTIONS,
    Unbatchable,
    _axes,
    _elementwise,
    _shift,
    _static,
    refuse_mapped_options,
)
from srcgrad.passes.batch_contract import HANDLERS as CONTRACTIONS
from srcgrad.passes.batch_index import HANDLERS as INDEXING
from srcgrad.passes.batch_layout import HANDLERS as LAYOUT
from srcgrad.passes.batch_linalg import HANDLERS as LINALG
from srcgrad.passes.batch_scalars import HANDLERS as SCALARS
from srcgrad.passes.batch_search import HANDLERS as SEARCH


def fold_static(ops: list, values: dict) -> list:
    """Reads of static values the probe computed from shapes alone (shapes, sizes)
    replaced by constants: the variant is compiled for these shapes."""
    mapping = {v: Const(value) for v, value in values.items()
               if isinstance(v, Var) and v.kind == "static"}
    return substitute(ops, mapping)


def decide_none_tests(ops: list, inputs: list, args: tuple, mapping=None) -> tuple:
    """(ops, mapping): `x is None` decided for the variant's arguments, and each `if` on
    a decided test replaced by its branch (`mapping`: the `if`'s values -> the branch's).
    The program is compiled for arguments of these classes (`def f(x, y=None)` with
    `if y is None:`), and straight-line code batches."""
    known = dict(zip(inputs, args))
    mapping = {} if mapping is None else mapping
    out: list = []
    for op in ops:
        op.args = tuple(_follow_map(a, mapping) for a in op.args)
        if op.prim in ("is_", "is_not") and len(op.args) == 2:
            value = _none_test(op, known, out)
            if value is not None:
                mapping[op.outs[0]] = Const(value)
                continue
        if op.prim == "cond" and isinstance(op.args[0], Const):
            block = op.blocks[0 if op.args[0].value else 1]
            body, _ = decide_none_tests(block.ops, inputs, args, mapping)
            out.extend(body)
            mapping.update((o, _follow_map(r, mapping)) for o, r in zip(op.outs, block.results))
            continue
        for block in op.blocks:
            block.ops, _ = decide_none_tests(block.ops, inputs, args, mapping)
            block.results = [_follow_map(r, mapping) for r in block.results]
        out.append(op)
    return substitute(out, mapping), mapping


def _follow_map(a, mapping):
    if isinstance(a, Var):
        while isinstance(a, Var) and a in mapping:
            a = mapping[a]
        return a
    if isinstance(a, Pack):
        return Pack(tuple(_follow_map(i, mapping) for i in a.items), a.style)
    return a


def _none_test(op, known, before):
    """True/False for `a is None` (`is not`) when `a` is an argument or the value of an
    op that is not a branch (never None), else None."""
    a, b = op.args
    other = b if isinstance(a, Const) and a.value is None else a if (
        isinstance(b, Const) and b.value is None) else None
    if not isinstance(other, Var):
        return None
    if other in known:
        is_none = known[other] is None
    elif any(other in o.outs and not o.blocks for o in before):
        is_none = False
    else:
        return None
    return is_none if op.prim == "is_" else not is_none


def order_commutative(ops: list) -> list:
    """Operands of `+` and `*` in one order (by name), so that CSE merges `h_t * h` with
    `h * h_t`: the JVP of `h * h` writes both, and in a batched program each is a full
    pass over B times the data. IEEE addition and multiplication commute exactly."""
    for op in ops:
        if op.prim in ("add", "multiply") and all(isinstance(a, Var) for a in op.args):
            op.args = tuple(sorted(op.args, key=lambda v: v.name))
    return ops


def batch(ops: list, seeds: list, size: int, shapes: dict, namer) -> tuple:
    """(batched ops, rename, batched Vars): `seeds` (Vars) carry a leading axis of `size`.

    `shapes` holds the unbatched shape of every value (the probe's). `rename` maps an
    op output that the batched program computes under another name (an op that became
    the identity) to that operand; read results through it. Raises Unbatchable."""
    b = _Batcher(size, shapes, namer)
    b.batched.update(seeds)
    for op in ops:
        b.op(op)
    return b.out, b.rename, b.batched


class _Batcher:
    def __init__(self, size, shapes, namer):
        self.size, self.shapes, self.namer = size, shapes, namer
        self.out: list = []
        self.batched: set = set()
        self.rename: dict = {}
        self.expander = Expander(namer, self.out)
        self.ints: set = set()  # values the probe saw as integers of shape () (a loop's counter)

    # ------------------------------------------------------------------ facts
    def is_b(self, operand) -> bool:
        return any(v in self.batched for v in operand_vars(operand))

    def shape(self, operand) -> tuple:
        if isinstance(operand, Const):
            return numpy.shape(operand.value)
        shape = self.shapes.get(operand) if isinstance(operand, Var) else None
        if shape is None:
            raise Unbatchable(f"the shape of `{operand}` depends on the data")
        return tuple(shape)

    def rank(self, operand) -> int:
        return len(self.shape(operand))

    def _map(self, operand):
        def follow(v):
            while v in self.rename:
                v = self.rename[v]
            return v
        if isinstance(operand, Var):
            return follow(operand)
        if isinstance(operand, Pack):
            return Pack(tuple(self._map(i) for i in operand.items), operand.style)
        return operand

    # ------------------------------------------------------------------ emitting
    def op(self, op):
        # (its blocks too: an unbatched branch may read a renamed value, a lifted
        # no_alias's result: fuzz seed 2663984)
        substitute([op], self.rename)
        rule = rules.RULES[op.prim]
        if not any(self.is_b(a) for a in op.args) and not any(
                v in self.batched for blk in op.blocks for v in blk.free_vars()):
            self.out.append(op)  # primal, or a tangent that no seed reaches
            return
        if op.prim == "assert_true":
            return self.assert_each(op, *op.args)
        if rule.control or rule.effect or rule.io or op.blocks:
            raise Unbatchable(f"`{op.prim}` (control flow, effects) has no batched form yet")
        if op.prim in ("dtype", "result_type"):
            self.out.append(op)  # the batch axis changes no dtype
            return
        if rule.static_out:
            raise Unbatchable(f"`{op.prim}` of a batched value that is not a constant of the shapes")
        if any(o not in self.shapes for o in op.outs):
            raise Unbatchable(f"the shape of `{op.prim}`'s result depends on the data")
        self.loc = op.loc
        self.expander.loc = op.loc
        handler = _handlers().get(op.prim)
        if handler is None and rule.elementwise and not rule.render.startswith("math."):
            handler = _elementwise
        if handler is None:
            raise Unbatchable(f"`{op.prim}` has no batched form")
        if handler is not _elementwise:
            refuse_mapped_options(self, op, rule, handler)
        handler(self, op, *op.args)

    def assert_each(self, op, test, message):
        """The user's `assert` of a batched test holds for every example: `all` of a test of
        one element per example; one of several elements raises as each example's `if not
        test` does (the truth value of an array with more than one element is ambiguous)."""
        if int(numpy.prod(self.shape(test))) == 1:
            test = self.expander.apply(rules.RULES["all"], [test], {})
        self.out.append(Op("assert_true", (test, message), (), op.loc, dict(op.attrs)))

    def keep(self, op, *args):
        """`op` itself, on (batched) operands `args`: its outputs are batched."""
        self.out.append(Op(op.prim, tuple(args), op.outs, op.loc, dict(op.attrs)))
        self.batched.update(op.outs)

    def alias(self, op, value):
        """`op`'s single output is `value` (already batched)."""
        self.rename[op.outs[0]] = value
        if isinstance(value, Var) and self.is_b(value):
            return
        raise Unbatchable(f"`{op.prim}`: an unbatched alias")

    def call(self, prim, *args, shape=None):
        """Emit `prim(*args)` (batched operands) and return its batched result; `shape`:
        the result's unbatched shape, for later ops that read it."""
        v = self.expander.apply(rules.RULES[prim], list(args), {})
        if not isinstance(v, Var):  # folded: a constant would be baked into the module
            raise Unbatchable(f"`{prim}` of a constant (fuzz seed 3713)")
        self.out[-1].attrs["backward"] = True
        self.batched.add(v)
        if shape is not None:
            self.shapes[v] = tuple(shape)
        return v

    def pad(self, operand, rank):
        """A batched operand with singleton axes after the batch axis up to `rank`."""
        shape = self.shape(operand)
        if len(shape) >= rank:
            return operand
        return self.call("reshape", operand, (self.size,) + (1,) * (rank - len(shape)) + shape,
                         shape=(1,) * (rank - len(shape)) + shape)

    def full(self, operand, like=None):
        """Any operand as a batched one (an unbatched operand broadcast along the batch).
        `like`: a batched value of the operand's shape, for a constant operand, whose
        broadcast would fold to an array baked into the module (fuzz seed 3713): it is
        zeros like `like` plus the constant."""
        if self.is_b(operand):
            return operand
        shape = self.shape(operand)
        if isinstance(operand, Const) and like is not None and self.shape(like) == shape:
            return self.call("add", self.call("zeros_like", like, shape=shape), operand, shape=shape)
        return self.call("broadcast_to", operand, (self.size,) + shape, shape=shape)


# ---------------------------------------------------------------------- handlers
def _same_shape(b, op, x, *rest):
    b.keep(op, x, *rest)


def _reduction(b, op, x, axis, *rest):
    r = b.rank(x)
    b.keep(op, x, Const(_shift(_static(axis, op.prim), r)), *rest)


def _scan(b, op, x, axis):
    value, r = _static(axis, op.prim), b.rank(x)
    if value is None and r != 1:
        raise Unbatchable(f"`{op.prim}` over the flattened array")
    b.keep(op, x, Const(1 if value is None else _shift(value, r)))


def _norm(b, op, x, ord_, axis, keepdims):
    value, r = _static(axis, "norm"), b.rank(x)
    if isinstance(value, tuple) or (value is None and r != 1):
        raise Unbatchable("a matrix `norm`")
    b.keep(op, x, ord_, Const(1 if value is None else _shift(value, r)), keepdims)


def _reshape(b, op, x, shape):
    value = _static(shape, "reshape")
    value = (value,) if isinstance(value, int) else tuple(value)
    b.keep(Op("reshape", (), op.outs, op.loc), x, Const((b.size,) + value))


def _ravel(b, op, x):
    b.keep(Op("reshape", (), op.outs, op.loc), x, Const((b.size, -1)))


def _transpose(b, op, x, axes):
    r, value = b.rank(x), _static(axes, "transpose")
    perm = tuple(range(r - 1, -1, -1)) if value is None else _axes(value, r)
    b.keep(Op("transpose", (), op.outs, op.loc), x, Const((0,) + tuple(a + 1 for a in perm)))


def _T(b, op, x):
    _transpose(b, op, x, Const(None))


def _matrix_transpose(b, op, x):
    b.keep(op, x)  # swapaxes(-1, -2): negative axes stay


def _swapaxes(b, op, x, a1, a2):
    r = b.rank(x)
    b.keep(op, x, Const(_axes(_static(a1, op.prim), r)[0] + 1),
           Const(_axes(_static(a2, op.prim), r)[0] + 1))


def _moveaxis(b, op, x, source, destination):
    r = b.rank(x)
    src = tuple(a + 1 for a in _axes(_static(source, op.prim), r))
    dst = tuple(a + 1 for a in _axes(_static(destination, op.prim), r))
    b.keep(op, x, Const(src), Const(dst))


def _expand_dims(b, op, x, axis):
    value = _static(axis, op.prim)
    n = len(value) if isinstance(value, (tuple, list)) else 1
    b.keep(op, x, Const(_shift_result_axes(value, b.rank(x) + n)))


def _shift_result_axes(value, n):
    """Axes counted in the *result* (expand_dims, stack): as non-negative, plus one."""
    if isinstance(value, (tuple, list)):
        return tuple(int(a) % n + 1 for a in value)
    return int(value) % n + 1


def _squeeze(b, op, x, axis):
    value, shape = _static(axis, op.prim), b.shape(x)
    axes = tuple(i for i, n in enumerate(shape) if n == 1) if value is None else _axes(value, len(shape))
    b.keep(op, x, Const(tuple(a + 1 for a in axes)))


def _flip(b, op, x, axis):
    b.keep(op, x, Const(_shift(_static(axis, op.prim), b.rank(x))))


def _roll(b, op, x, shift, axis):
    value = _static(axis, op.prim)
    if value is None:  # the flattened array rolled, then shaped back
        flat = b.call("reshape", x, (b.size, -1), shape=(int(numpy.prod(b.shape(x))),))
        rolled = b.call("roll", flat, shift, 1, shape=b.shape(flat))
        return b.keep(Op("reshape", (), op.outs, op.loc), rolled, Const((b.size,) + b.shape(x)))
    b.keep(op, x, shift, Const(_shift(value, b.rank(x))))


def _diagonal(b, op, x, offset, axis1, axis2):
    r = b.rank(x)
    b.keep(op, x, offset, Const(_axes(_static(axis1, op.prim), r)[0] + 1),
           Const(_axes(_static(axis2, op.prim), r)[0] + 1))


def _diff(b, op, x, n, axis):
    b.keep(op, x, n, Const(_shift(_static(axis, op.prim), b.rank(x))))


def _last_two(b, op, x, *rest):
    if b.rank(x) < 2:
        raise Unbatchable(f"`{op.prim}` of a 1-D value")
    b.keep(op, x, *rest)


def _broadcast_to(b, op, x, shape):
    value = _static(shape, op.prim)
    value = (value,) if isinstance(value, int) else tuple(value)
    b.keep(op, b.pad(x, len(value)), Const((b.size,) + value))


def _unbroadcast(b, op, x, shape):
    """The sums `unbroadcast` does, decided now (the helper's own logic, shifted)."""
    xshape, target = b.shape(x), tuple(_static(shape, op.prim))
    if xshape == target:
        return b.alias(op, x)
    lead = len(xshape) - len(target)
    if lead < 0 or any(m == 1 and n != 1 for m, n in zip(xshape[lead:], target)):
        return b.keep(Op("broadcast_to", (), op.outs, op.loc), b.pad(x, len(target)),
                      Const((b.size,) + target))
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(target)
                                      if n == 1 and xshape[lead + i] != 1)
    if len(axes) == lead:
        return b.keep(Op("sum", (), op.outs, op.loc), x, Const(tuple(a + 1 for a in axes)),
                      Const(False))
    summed = b.call("sum", x, tuple(a + 1 for a in axes), False)
    b.keep(Op("reshape", (), op.outs, op.loc), summed, Const((b.size,) + target))


def _expand_reduced(b, op, x, shape, axis, keepdims):
    target, value = tuple(_static(shape, op.prim)), _static(axis, op.prim)
    if _static(keepdims, op.prim) or value is None:
        return b.alias(op, x)
    axes = _axes(value, len(target))
    kept = tuple(1 if i in axes else n for i, n in enumerate(target))
    b.keep(Op("reshape", (), op.outs, op.loc), x, Const((b.size,) + kept))


def _concatenate(b, op, arrays, axis):
    value = _static(axis, op.prim)
    if value is None or not isinstance(arrays, Pack):
        raise Unbatchable("`concatenate` of the flattened arrays")
    items = Pack(tuple(b.full(a) for a in arrays.items), arrays.style)
    b.keep(op, items, Const(_shift(value, b.rank(op.outs[0]))))


def _stack(b, op, arrays, axis):
    if not isinstance(arrays, Pack):
        raise Unbatchable("`stack` of an array")
    like = next((a for a in arrays.items if b.is_b(a)), None)  # (stack's items share a shape)
    items = Pack(tuple(b.full(a, like) for a in arrays.items), arrays.style)
    b.keep(op, items, Const(_shift_result_axes(_static(axis, op.prim), b.rank(op.outs[0]))))


def _concat_bar(b, op, c, arrays, axis):
    """The pieces of c that concatenate's operands were: slices along the shifted axis.
    c is made batched first: where only an operand is (its shape is all concat_bar reads),
    an unbatched c sliced along the shifted axis gave pieces of the wrong axis (a constant
    cotangent of sum(concatenate([x, C]))): fuzz seed 2601781, issue 28."""
    c = b.full(c)
    value, r = _static(axis, op.prim), b.rank(c)
    if value is None:
        raise Unbatchable("`concat_bar` of the flattened arrays")
    a = _axes(value, r)[0]
    start = 0
    for out in op.outs:
        n = b.shape(out)[a]
        index = (slice(None),) * (a + 1) + (slice(start, start + n),)
        b.keep(Op("getitem", (), (out,), op.loc), c, Const(index))
        start += n


def _stack_bar(b, op, c, arrays, axis):
    if not b.is_b(c):  # its pieces are c's slices at the unbatched axis, the same for every
        # example (of the arrays, only their count is read): unbatched
        b.out.append(Op(op.prim, (c, arrays, axis), op.outs, op.loc, dict(op.attrs)))
        return
    c = b.full(c)  # (as _concat_bar)
    a = _axes(_static(axis, op.prim), b.rank(c))[0]
    for i, out in enumerate(op.outs):
        b.keep(Op("getitem", (), (out,), op.loc), c, Const((slice(None),) * (a + 1) + (i,)))


def _no_alias(b, op, x, base, *others):
    """The write check of an argument, example by example (`no_alias_batched`): a check of
    the whole batched arrays would raise for interleaved examples that share no memory."""
    mapped = Const(tuple(b.is_b(v) for v in (base, *others)))
    b.keep(Op("no_alias_batched", (), op.outs, op.loc), b.full(x), base, mapped, *others)


# ---------------------------------------------------------------------- scans, folds, transposes
def _axis_param(b, op, x, axis, *rest):
    """A helper row with one int `axis` after x (shift, excumprod, diff_bar)."""
    b.keep(op, x, Const(_shift(_static(axis, op.prim), b.rank(x))), *rest)


def _linrec(b, op, a, bb, axis, reverse):
    rank = b.rank(op.outs[0])
    a2, b2 = (b.pad(v, rank) if b.is_b(v) else v for v in (a, bb))
    b.keep(op, a2, b2, Const(_shift(_static(axis, op.prim), rank)), reverse)


def _shift_op(b, op, x, axis, reverse, fill):
    b.keep(op, x, Const(_shift(_static(axis, op.prim), b.rank(x))), reverse, fill)


def _diff_bar(b, op, c, n, axis):
    b.keep(op, c, n, Const(_shift(_static(axis, op.prim), b.rank(c))))


def _fold_axes(b, op, x, axis):
    b.keep(op, x, Const(tuple(a + 1 for a in _axes(_static(axis, op.prim), b.rank(x)))))


def _unfold_axes(b, op, x, shape, axis):
    target = tuple(_static(shape, op.prim))
    axes = tuple(a + 1 for a in _axes(_static(axis, op.prim), len(target)))
    b.keep(op, x, Const((b.size,) + target), Const(axes))


def _diagonal_bar(b, op, c, shape, offset, axis1, axis2):
    target = tuple(_static(shape, op.prim))
    a1 = _axes(_static(axis1, op.prim), len(target))[0] + 1
    a2 = _axes(_static(axis2, op.prim), len(target))[0] + 1
    b.keep(op, c, Const((b.size,) + target), offset, Const(a1), Const(a2))


MAPPED_OPTIONS.update((_concat_bar, _stack_bar))  # (they read their `arrays`' shapes only)

_HANDLERS = {
    "zeros_like": _same_shape, "ones_like": _same_shape, "full_like": _same_shape,
    "empty_like": _same_shape, "copy": _same_shape, "astype": _same_shape,
    "as_columns": _same_shape, "from_columns": _same_shape,  # a trailing unit axis
    "sum": _reduction, "mean": _reduction, "prod": _reduction, "max": _reduction,
    "min": _reduction, "var": _reduction, "std": _reduction, "nansum": _reduction,
    "nanmean": _reduction, "nanmax": _reduction, "nanmin": _reduction, "all": _reduction,
    "any": _reduction, "count_nonzero": _reduction, "no_alias": _no_alias,
    "cumsum": _scan, "cumprod": _scan, "norm": _norm,
    "reshape": _reshape, "ravel": _ravel, "flatten": _ravel,
    "transpose": _transpose, "T": _T, "matrix_transpose": _matrix_transpose,
    "swapaxes": _swapaxes, "moveaxis": _moveaxis, "expand_dims": _expand_dims,
    "squeeze": _squeeze, "flip": _flip, "roll": _roll, "diagonal": _diagonal,
    "trace": _diagonal, "diff": _diff, "tril": _last_two, "triu": _last_two,
    "broadcast_to": _broadcast_to, "unbroadcast": _unbroadcast,
    "expand_reduced": _expand_reduced,
    "nan_to_num": _same_shape,
    "concatenate": _concatenate, "stack": _stack, "concat_bar": _concat_bar,
    "stack_bar": _stack_bar,
    "linrec": _linrec, "shift": _shift_op,
    "excumprod": _axis_param, "diff_bar": _diff_bar, "fold_axes": _fold_axes,
    "unfold_axes": _unfold_axes, "diagonal_bar": _diagonal_bar,
}


def _handlers() -> dict:
    """Every batched form: the ones above, the contractions (srcgrad.passes.batch_contract),
    indexing (batch_index), the layout rows (batch_layout), the rows of Python values (batch_scalars), linear
    algebra on stacks (batch_linalg) and searching and sorting (batch_search)."""
    if "matmul" not in _HANDLERS:
        _HANDLERS.update(CONTRACTIONS)
        _HANDLERS.update(INDEXING)
        _HANDLERS.update(LAYOUT)
        _HANDLERS.update(SCALARS)
        _HANDLERS.update(LINALG)
        _HANDLERS.update(SEARCH)
    return _HANDLERS


def batched_rules() -> frozenset:
    """The differentiable rows with a batched form (elementwise rows other than the
    `math.*` ones, which take Python floats, and those with a handler: math's too)."""
    return frozenset(n for n, r in rules.RULES.items() if (r.vjp or r.jvp) and (
        n in _handlers() or r.elementwise and not r.render.startswith("math.")))
