"""Forward-mode AD on `sg.Tensor` (`sg.autograd.forward_ad`), mirroring `torch.autograd.forward_ad`
(spec/torch_semantics.md §8).

Note [Dual tensors]
~~~~~~~~~~~~~~~~~~~
Inside `dual_level()`, a tensor may carry a tangent (`make_dual`). Every op on Tensors ends
in `ops.apply` (Note [One node per op]); while a level is open, `ops.DUAL.hook` points at
`_propagate`, which runs after the op's own forward: if an operand carries a tangent, the
row's one-op kernel's `jvp` (generated from the same table's JVP formulas as `sg.jvp`, never
a second list) gives the outputs' tangents. The op itself is recorded for reverse mode as
usual, so forward and reverse compose:

* the tangent computation runs on the Tensors themselves when grad mode is on and an
  operand or a tangent requires grad (reverse-over-forward: a tangent is differentiable,
  as functional.jvp(create_graph=True) needs); otherwise on the plain arrays (fast path);
* a backward computed with create_graph=True runs its kernels on Tensors (the saved
  inputs are the dual operands themselves), so tangents flow through it
  (forward-over-reverse). A saved *output* is rebuilt by the engine as a new Tensor whose
  grad_fn is the node: its tangent is found on the node (`_fw` per output), which is
  why `tangent_of` looks there when the tensor has none of its own (so does an in-place
  op's snapshot of its target). A backward *without* create_graph runs on arrays: its
  results carry no tangent (torch's would).

A tangent is stored as `(level, tangent)` in the tensor's (and its node's) `_fw`; it is
valid only while that level is the open one. Exiting the level drops every tangent set
in it (torch: "tangents are deleted when the level is exited"). Internally a tangent
may be a `batching.Batched` (a batch of tangents, functional.jacobian(vectorize=True)):
it flows through the same kernels and is never shown to users.

In-place ops: `inplace.write` calls `ops.DUAL.written(target, result)`, which moves the
out-of-place result's tangent to the target, and `inplace.store` (a write recording no
graph) `ops.DUAL.stored(target, value, index)`. A write through a view changes its base's
tangent where the view lies, and every live view's tangent is refreshed from its base's
(torch: a view's tangent is a view of its base's). A dual that does not require grad is
its own root (views of it are views of *its* tangent). Custom Functions:
srcgrad.autograd.custom's `FORWARD_AD.hook` runs the user's `jvp` with what
`ctx.save_for_forward` saved. An `sg.compile`d function called on duals runs `f`'s ops
eagerly; a NumPy function with no row raises NotImplementedError rather than drop the
tangent.
"""

from __future__ import annotations

import functools
import weakref
from collections import namedtuple

import numpy

from srcgrad import rules
from srcgrad.autograd import grad_mode, ops
from srcgrad.autograd.batching import Batched
from srcgrad.autograd.node import Node, torch_dtype
from srcgrad.autograd.tensor import Tensor

__all__ = ["dual_level", "make_dual", "unpack_dual", "enter_dual_level", "exit_dual_level",
           "UnpackedDualTensor", "tangent_of"]

_STATE = grad_mode.STATE

UnpackedDualTensor = namedtuple("UnpackedDualTensor", ["primal", "tangent"])
UnpackedDualTensor.__doc__ = "What `unpack_dual` returns: `(primal, tangent)`."

Tensor._fw = None  # (level, tangent) while a tensor carries a tangent (Note [Dual tensors])
Node._fw = None  # (level, {output_nr: tangent}) on the node of an op whose outputs got tangents


class _Level:
    """An open dual level: what was given tangents in it, to drop them on exit."""

    __slots__ = ("index", "holders")

    def __init__(self, index: int):
        self.index = index
        self.holders: list = []  # weak references to tensors and nodes holding tangents


class _Current:
    level: _Level | None = None
    busy = False  # computing a tangent: ops inside must not propagate again


_CURRENT = _Current()


# ---------------------------------------------------------------- levels
def enter_dual_level() -> int:
    """Open the (only) dual level and return its index, 0."""
    if _CURRENT.level is not None:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    _CURRENT.level = _Level(0)
    ops.DUAL.hook = _propagate
    ops.DUAL.written = _written
    ops.DUAL.stored = _stored
    plug = _custom_functions()
    if plug is not None:
        plug.hook = _function_hook
    return 0


def exit_dual_level(*, level=None) -> None:
    """Close the dual level (`level`, default the current one); its tangents are dropped."""
    current = _CURRENT.level
    if current is None or (level is not None and level != current.index):
        raise RuntimeError("Trying to exit a forward AD level that was not the last one that "
                           "was created. This is not supported.")
    _CURRENT.level = None
    ops.DUAL.hook = None
    ops.DUAL.written = None
    ops.DUAL.stored = None
    plug = _custom_functions()
    if plug is not None:
        plug.hook = None
    for ref in current.holders:
        holder = ref()
        if holder is not None and holder._fw is not None and holder._fw[0] is current:
            holder._fw = None


class dual_level:
    """`with dual_level() as level:` forward AD inside the block (also a decorator)."""

    def __enter__(self) -> int:
        return enter_dual_level()

    def __exit__(self, *exc) -> None:
        exit_dual_level()

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with dual_level():
                return fn(*args, **kwargs)
        return wrapper


def _level(level) -> _Level | None:
    current = _CURRENT.level
    if current is None or level is None or level == current.index:
        return current
    return None


# ---------------------------------------------------------------- tangents
def tangent_of(t, level: _Level | None = None):
    """The tangent `t` carries at the open level (or None). A Tensor the engine rebuilt
    for a saved output has none of its own: its node holds it (Note [Dual tensors])."""
    level = level or _CURRENT.level
    if level is None:
        return None
    fw = t._fw
    if fw is not None and fw[0] is level:
        return fw[1]
    fn = t._grad_fn
    if fn is not None:
        fw = fn._fw
        if fw is not None and fw[0] is level:
            return fw[1].get(t._output_nr)
    return None


def set_tangent(t: Tensor, tangent, level: _Level | None = None) -> None:
    """`t` carries `tangent` (None: none). Where `t` is an output of a node, the node holds
    it too: any Tensor standing for that output (a saved output the engine rebuilds, an
    in-place op's snapshot of its target) then finds it."""
    level = level or _CURRENT.level
    fn = t._grad_fn
    if tangent is None:
        if t._fw is not None:
            t._fw = None
        if fn is not None and fn._fw is not None and fn._fw[0] is level:
            fn._fw[1].pop(t._output_nr, None)
        return
    if t._fw is None or t._fw[0] is not level:
        level.holders.append(weakref.ref(t))
    t._fw = (level, tangent)
    if fn is not None:
        _set_node_tangent(fn, t._output_nr, tangent, level)


def _set_node_tangent(node, nr: int, tangent, level: _Level) -> None:
    fw = node._fw
    if fw is None or fw[0] is not level:
        level.holders.append(weakref.ref(node))
        node._fw = fw = (level, {})
    fw[1][nr] = tangent


# ---------------------------------------------------------------- make_dual / unpack_dual
def make_dual(tensor, tangent, *, level=None) -> Tensor:
    """A view of `tensor` (same storage and version counter) carrying `tangent`."""
    current = _level(level)
    if current is None:
        raise RuntimeError("Trying to create a dual Tensor for forward AD but no level exists, "
                           "make sure to enter_dual_level() first.")
    if tensor.dtype.kind not in "fc":
        raise ValueError("Expected primal to be floating point or complex, but got: "
                         f"{torch_dtype(tensor.dtype)}")
    if tangent.dtype.kind not in "fc":
        raise ValueError("Expected tangent to be floating point or complex, but got: "
                         f"{torch_dtype(tangent.dtype)}")
    if isinstance(tangent, Tensor) and tangent_of(tangent, current) is not None:
        raise RuntimeError("Setting a forward grad that itself has a forward gradient at the "
                           f"same level{current.index} is not supported.")
    _check_size(tensor.shape, tangent.shape)
    if not isinstance(tangent, Tensor) and not isinstance(tangent, Batched):
        tangent = Tensor._make(numpy.asarray(tangent))
    dual = _alias(tensor, "ViewBackward0")
    set_tangent(dual, tangent, current)
    return dual


def unpack_dual(tensor, *, level=None) -> UnpackedDualTensor:
    """`(primal, tangent)`: outside a level `(tensor, None)`; inside, a new view of the
    primal without tangent and the tangent (None for a tensor that carries none)."""
    current = _level(level)
    if current is None:
        return UnpackedDualTensor(tensor, None)
    tangent = tangent_of(tensor, current)
    return UnpackedDualTensor(_alias(tensor, "AliasBackward0"), tangent)


def _alias(t: Tensor, name: str) -> Tensor:
    """A view of `t` (differentiable if `t` requires grad) that carries no tangent."""
    was, _CURRENT.busy = _CURRENT.busy, True
    try:
        if t._rg and _STATE.grad_enabled:
            shape = tuple(t.shape)
            return ops.apply("reshape", {"shape": shape}, shape, (t,), name)
        # its own root: views of a dual are views of the dual (its tangent), not of the primal
        return Tensor._make(t._data, vc=t._vc)
    finally:
        _CURRENT.busy = was


# ---------------------------------------------------------------- propagation (ops.DUAL.hook)
def _propagate(rule: str, static: dict, skey, operands: tuple, out) -> None:
    """Give the outputs `out` of row `rule` their tangents (Note [Dual tensors])."""
    if _CURRENT.busy or _STATE.inference:
        return
    level = _CURRENT.level
    tangents = [tangent_of(a, level) if isinstance(a, Tensor) else None for a in operands]
    if all(t is None for t in tangents):
        return
    row = rules.RULES[rule]
    outs = out if type(out) is tuple else (out,)
    if row.static_out:
        return
    if row.nondiff:
        touts = (None,) * len(outs)
    else:
        touts = _jvp(rule, static, skey, operands, tangents)
        if type(out) is not tuple:
            touts = (touts,)
    for o, t in zip(outs, touts):
        if not isinstance(o, Tensor) or o._data.dtype.kind not in "fc":
            continue
        t = _full_tangent(o, t, tangents)
        set_tangent(o, t, level)


def _jvp(rule, static, skey, operands, tangents):
    active = tuple(t is not None for t in tangents)
    e = ops.entry_for(rule, static, skey, active)
    given = [t for t in tangents if t is not None]
    # a batch of tangents (functional's vectorize) is never differentiated: arrays only
    differentiable = _STATE.grad_enabled and not any(isinstance(t, Batched) for t in given) and (
        any(isinstance(a, Tensor) and a._rg for a in operands)
        or any(isinstance(t, Tensor) and t._rg for t in given))
    if differentiable:  # recorded: the tangent is itself differentiable (reverse-over-forward)
        args = list(operands) + given
    else:
        args = [a._data if isinstance(a, Tensor) else a for a in operands]
        args += [t._data if isinstance(t, Tensor) else t for t in given]
    _CURRENT.busy = True
    try:
        _, tout = e.kernel.jvp(*args)
    finally:
        _CURRENT.busy = False
    return tout


def _full_tangent(o: Tensor, t, tangents):
    """The tangent as a Tensor of o's shape (a formula may give a broadcastable one, or
    None where the output does not depend on the tangents: zeros, as torch gives)."""
    batch = next((b for b in tangents if isinstance(b, Batched)), None)
    if isinstance(t, Batched):
        return numpy.broadcast_to(t, o.shape) if t.shape != o.shape else t
    if batch is not None:  # a batched computation whose output got a plain (constant) tangent
        return Batched.constant(t, o._data, batch.size)
    if t is None:
        return Tensor._make(numpy.zeros_like(o._data))
    if isinstance(t, Tensor):
        if t.shape != o.shape:
            was, _CURRENT.busy = _CURRENT.busy, True
            try:
                t = numpy.broadcast_to(t, o.shape)
            finally:
                _CURRENT.busy = was
        return t
    t = numpy.asarray(t)
    if t.shape != o._data.shape or t.dtype != o._data.dtype:
        t = numpy.array(numpy.broadcast_to(t, o._data.shape), dtype=o._data.dtype)
    return Tensor._make(t)


def _written(target: Tensor, result) -> None:
    """An in-place op wrote `result` into `target`: the target's tangent is the result's;
    where the target is a view, the written part of its base's tangent is too."""
    level = _CURRENT.level
    t = tangent_of(result, level) if isinstance(result, Tensor) else None
    base = target._base
    if t is None and tangent_of(target, level) is None and (
            base is None or tangent_of(base, level) is None):
        return
    set_tangent(target, t, level)
    if base is not None:
        _write_base_tangent(base, target, t, level)
    _refresh_views(base if base is not None else target, target, level)


def _stored(target: Tensor, value, index) -> None:
    """`target[index] = value` was written with no graph recorded: the target's tangent
    there is value's (zeros for a value without one)."""
    level = _CURRENT.level
    if _CURRENT.busy or _STATE.inference:
        return
    t = tangent_of(value, level) if isinstance(value, Tensor) else None
    old = tangent_of(target, level)
    base = target._base
    if t is None and old is None and (base is None or tangent_of(base, level) is None):
        return
    batch = next((b.size for b in (t, old) if isinstance(b, Batched)), None)
    lead = () if batch is None else (batch,)
    new = numpy.zeros(lead + target._data.shape, target._data.dtype)
    if old is not None:
        new[...] = old.data if isinstance(old, Batched) else _array(old)
    part = (slice(None),) * len(lead) + (index if isinstance(index, tuple) else (index,))
    if t is None:
        new[part] = 0
    else:
        written = t.data if isinstance(t, Batched) else _array(t)
        new[part] = written if batch is None or isinstance(t, Batched) else written[None]
    value_t = Batched(new) if batch is not None else Tensor._make(new)
    set_tangent(target, value_t, level)
    if base is not None:
        _write_base_tangent(base, target, value_t, level)
    _refresh_views(base if base is not None else target, target, level)


def _write_base_tangent(base: Tensor, view: Tensor, t, level) -> None:
    """The base's tangent with the view's elements replaced by `t` (None: zeros)."""
    old = tangent_of(base, level)
    batch = t.size if isinstance(t, Batched) else old.size if isinstance(old, Batched) else None
    lead = () if batch is None else (batch,)
    new = numpy.zeros(lead + base._data.shape, base._data.dtype)
    if old is not None:
        new[...] = old.data if isinstance(old, Batched) else _array(old)
    flat = new.reshape(lead + (-1,))
    where = _positions(view._data, base._data)
    if t is not None:
        written = t.data if isinstance(t, Batched) else _array(t)
        flat[..., where.reshape(-1)] = numpy.broadcast_to(written, lead + view._data.shape) \
            .reshape(lead + (-1,))
    else:
        flat[..., where.reshape(-1)] = 0
    value = Batched(new) if batch is not None else Tensor._make(new)
    set_tangent(base, value, level)


def _refresh_views(root: Tensor, written: Tensor, level) -> None:
    """After a write into `root`'s memory, each live view's tangent is the root's at the
    view's elements (torch: a view's tangent is a view of its base's)."""
    views = getattr(root, "_views", None)
    if not views:
        return
    rt = tangent_of(root, level)
    for ref in views:
        view = ref()
        if view is None or view is written:
            continue
        if rt is None:
            if tangent_of(view, level) is not None:
                set_tangent(view, None, level)
            continue
        where = _positions(view._data, root._data)
        if isinstance(rt, Batched):
            value = Batched(rt.data.reshape(rt.size, -1)[:, where])
        else:
            value = Tensor._make(_array(rt).reshape(-1)[where])
        set_tangent(view, value, level)


def _array(t):
    return t._data if isinstance(t, Tensor) else numpy.asarray(t)


def _positions(view, base) -> numpy.ndarray:
    """Each element of `view`'s flat C-order index in `base` (whose memory it lies in)."""
    if not base.flags.c_contiguous:
        from srcgrad.autograd.views import index_map

        return index_map(view, base)
    size = base.itemsize
    start = (view.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // size
    index = numpy.full(view.shape, start, numpy.intp)
    for k, (n, stride) in enumerate(zip(view.shape, view.strides)):
        index += (numpy.arange(n) * (stride // size)).reshape(
            tuple(-1 if j == k else 1 for j in range(view.ndim)))
    return index


def refuse_without_formula(func, args, kwargs) -> None:
    """A NumPy function with no row in the table, applied to a dual tensor: torch's error for
    an op without a forward formula (a dropped tangent would be a wrong derivative)."""
    level = _CURRENT.level
    if level is None or _CURRENT.busy or _STATE.inference:
        return
    values = list(args) + list(kwargs.values())
    values += [v for seq in values if isinstance(seq, (list, tuple)) for v in seq]
    if any(isinstance(v, Tensor) and tangent_of(v, level) is not None for v in values):
        name = getattr(func, "__name__", str(func))
        raise NotImplementedError(
            f"Trying to use forward AD with {name} that does not support it because it has not "
            f"been implemented yet.\n{name} has no row in srcgrad's derivative table "
            "(srcgrad/rules/table.py): add one, or apply it to unpack_dual(t).primal.")


def _check_size(shape, tangent_shape) -> None:
    """torch's error for a forward gradient (make_dual's, a custom Function jvp's) whose
    size is not its tensor's."""
    if tuple(tangent_shape) != tuple(shape):
        raise RuntimeError(
            "Trying to set a forward gradient that has a different size than that of the "
            f"original Tensor, this is not supported. Tensor is of size {list(shape)} "
            f"while the given forward gradient is of size {list(tangent_shape)}.")


# ---------------------------------------------------------------- custom Functions
def _function_hook(node, inputs: tuple, outs: list) -> list:
    """`custom.FORWARD_AD.hook`: after a custom Function's forward ran on Tensors inside a
    dual level, its outputs' tangents are what the user's `jvp(ctx, *input tangents)`
    returns (`ctx.saved_tensors` there reads what `save_for_forward` saved). A non-tensor
    input's tangent is None; a tensor input without one is zeros unless the Function set
    `ctx.set_materialize_grads(False)`."""
    level = _CURRENT.level
    if level is None or _CURRENT.busy or _STATE.inference:
        return outs
    tangents = [tangent_of(a, level) if isinstance(a, Tensor) else None for a in inputs]
    if all(t is None for t in tangents):
        return outs
    from srcgrad.autograd.function import Function

    cls = node._forward_cls
    if cls.jvp is Function.jvp:
        raise NotImplementedError("You must implement the jvp function for custom "
                                  "autograd.Function to use it with forward mode AD.")
    if node.materialize_grads:
        tangents = [Tensor._make(numpy.zeros_like(a._data)) if t is None and isinstance(a, Tensor)
                    and a._data.dtype.kind in "fc" else t for a, t in zip(inputs, tangents)]
    _CURRENT.busy = True
    try:
        result = node.apply_jvp(*tangents)
    finally:
        _CURRENT.busy = False
    results = result if isinstance(result, tuple) else (result,)
    if len(results) != len(outs):
        raise RuntimeError(f"{cls.__name__}.jvp returned {len(results)} tangents, but forward "
                           f"returned {len(outs)} outputs")
    for k, (o, t) in enumerate(zip(outs, results)):
        if t is not None and not (isinstance(o, Tensor) and o._data.dtype.kind in "fc" and
                                  not any(o is n for n in node.non_differentiable)):
            raise RuntimeError(f"Function's jvp returned a gradient at position {k}, but  the "
                               "corresponding forward output is not a differentiable Tensor."
                               "You should return None at that position instead.")
        if isinstance(o, Tensor) and t is not None and o._data.dtype.kind in "fc":
            if not isinstance(t, Batched):  # torch checks the user's tangent, never broadcasts it
                _check_size(o.shape, numpy.shape(t._data if isinstance(t, Tensor) else t))
            t = _full_tangent(o, t if isinstance(t, (Tensor, Batched)) else
                              Tensor._make(numpy.asarray(t)), ())
            set_tangent(o, t, level)
    return outs


def _custom_functions():
    """srcgrad.autograd.custom's plug (None where that module is absent)."""
    try:
        from srcgrad.autograd import custom
    except ImportError:
        return None
    return getattr(custom, "FORWARD_AD", None)
