"""Views and in-place ops on them: torch's CopySlices and view grad_fn regeneration
(spec/torch_semantics.md §3, §6).

Note [Views and CopySlices]
~~~~~~~~~~~~~~~~~~~~~~~~~~~
A view (`t[1:]`, `t.T`, `t.view(...)`, `t.select(0, i)`, `t.expand(...)`, the outputs of
`split`) is a Tensor whose array is a NumPy view of its base's array. It shares the
base's version counter and points at the *root* base (`_base`; a view of a view points
at the root), which keeps weak references to its live views
(srcgrad.autograd.tensor.share_storage).

An in-place op on a view `v` of base `b` that records a node `fn` rewrites `b`'s
history, as torch does: `b.grad_fn` becomes a `CopySlices` node whose next edges are
b's previous edge followed by fn's edges other than the one to v itself. Its backward
takes the gradient of the new b, runs fn's backward on the part of it that v covers,
and writes fn's gradient for v's old value back into that part: the part v covered
now came through fn, the rest of b is unchanged.

After any write into b's memory (through b or any of its views) every live view's
grad_fn is regenerated from b's current history: an `AsStridedBackward0` node that
reads the view's elements out of b (torch regenerates lazily, when `grad_fn` is read;
here it is done eagerly, once per write, so the per-op path reads `_grad_fn` as it is).

Where a view's elements lie in the base is found from the arrays' memory, not from
the ops that made the view: `index_map` lays the base's flat indices out in a buffer
with the base's strides and reads them back with the view's strides and offset. This
is exact for every view NumPy makes (slices, transposes, reshapes, diagonals,
broadcasts), and both the regenerated node (a `getitem` row with that index) and
CopySlices' backward are rows of the derivative table on Tensors: a
`create_graph=True` backward through them can be differentiated again.
"""

from __future__ import annotations

import re

import numpy
from numpy.lib.stride_tricks import as_strided

from srcgrad.autograd import grad_mode
from srcgrad.autograd.engine import node_backward
from srcgrad.autograd.node import OpNode
from srcgrad.autograd.ops import _edge, apply, node_name
from srcgrad.autograd.tensor import Tensor

__all__ = ["index_map", "CopySlices", "rebase_view", "refresh_views", "check_creation"]

_STATE = grad_mode.STATE
_E: dict = {}


def index_map(view, base) -> numpy.ndarray:
    """For each element of `view` (an array whose memory lies in `base`'s), its flat
    C-order index in `base` (Note [Views and CopySlices])."""
    if base.size == 0 or view.size == 0:
        return numpy.zeros(view.shape, numpy.intp)
    if not numpy.may_share_memory(view, base):
        raise RuntimeError("srcgrad: a view's memory is no longer its base's (was the base's "
                           "`.data` replaced?)")
    size = base.itemsize
    b_str = [s // size for s in base.strides]
    v_str = [s // size for s in view.strides]
    lo = sum(min(0, (n - 1) * s) for n, s in zip(base.shape, b_str))
    hi = sum(max(0, (n - 1) * s) for n, s in zip(base.shape, b_str))
    buf = numpy.full(hi - lo + 1, -1, numpy.intp)
    step = buf.itemsize
    laid = as_strided(buf[-lo:], base.shape, [s * step for s in b_str])
    laid[...] = numpy.arange(base.size).reshape(base.shape)
    offset = (_address(view) - _address(base)) // size - lo
    return as_strided(buf[offset:], view.shape, [s * step for s in v_str]).copy()


def _address(a) -> int:
    return a.__array_interface__["data"][0]


# ---------------------------------------------------------------- CopySlices
class _CopySlicesKernel:
    """The 'kernel' of a CopySlices node (one for all of them: per-node facts are its
    saved tuple `(index, fn, to_view)`, shapes to the engine, never tensors)."""

    saved_from = (("shape", 0), ("shape", 1), ("shape", 2))
    saved_names = ()

    @staticmethod
    def backward(saved, grad):
        index, fn, to_view = saved
        if isinstance(grad, Tensor):  # create_graph: rows on Tensors, differentiable again
            flat = grad.reshape(-1)
            grads = node_backward(fn, [flat[index]], True)
            part = _sum_to_view(grads, to_view)
            new = apply("setitem", _E, (), (flat, index, 0.0 if part is None else part),
                        "IndexPutBackward0")
            result = new.reshape(grad.shape)
        else:
            result = numpy.array(grad, copy=True, order="C")
            flat = result.reshape(-1)
            grads = node_backward(fn, [flat[index]], False)
            part = _sum_to_view(grads, to_view)
            flat[index] = 0 if part is None else (part._data if isinstance(part, Tensor)
                                                  else part)
        return (result,) + tuple(g for g, v in zip(grads, to_view) if not v)


def _sum_to_view(grads, to_view):
    part = None
    for g, v in zip(grads, to_view):
        if v and g is not None:
            part = g if part is None else part + g
    return part


_KERNEL = _CopySlicesKernel()


class CopySlices(OpNode):
    """The grad_fn of a base after an in-place op on one of its views."""

    __slots__ = ()

    def release(self) -> None:
        saved = self._saved
        if saved is not None:
            fn = saved[1]
            fn.release()
            if fn._saved is None:  # the in-place op's saved tensors are gone
                self._saved = None


def rebase_view(target: Tensor, result: Tensor) -> None:
    """`target` (a view) was written by an op that recorded `result`'s node: the root
    base's history becomes CopySlices (Note [Views and CopySlices])."""
    fn = result._grad_fn
    base = target._base
    index = index_map(target._data, base._data)
    mine = _edge(target)
    to_view = tuple(e is not None and mine is not None and e[0] is mine[0] and e[1] == mine[1]
                    for e in fn._next)
    edges = (_edge(base),) + tuple(e for e, v in zip(fn._next, to_view) if not v)
    node = CopySlices("torch::autograd::CopySlices", _KERNEL, (index, fn, to_view), None, edges,
                      1, ((base._data.shape, base._data.dtype),))
    move_history(base, node, 0)


def move_history(t: Tensor, node, output_nr: int) -> None:
    """`t`'s grad_fn becomes output `output_nr` of `node`; a retained grad follows (torch:
    the retained grad is the current version's)."""
    old = t._grad_fn
    if t._retains_grad and old is not None and old._retain:
        ref = old._retain.pop(t._output_nr, None)
        if node._retain is None:
            node._retain = {}
        node._retain[output_nr] = ref
    t._grad_fn = node
    t._output_nr = output_nr
    t._rg = True


# ---------------------------------------------------------------- regeneration
def refresh_views(base: Tensor, recorded: bool) -> None:
    """After a write into `base`'s memory: every live view's grad_fn from base's current
    history. `recorded`: the write changed a history (a view made in no_grad mode then
    may not be used with grad again, as torch's indirect-rebase check says)."""
    views = base._views
    if not views or not base._rg:
        return
    alive = []
    for ref in views:
        view = ref()
        if view is None:
            continue
        alive.append(ref)
        creation = view._creation
        if creation is not None and recorded:  # torch raises when its grad_fn is next read
            view._stale = creation_message(view, indirect=True)
        if creation is None or creation[0] != "no_grad":  # a no_grad view has no history
            _regenerate(view, base)
    views[:] = alive


def _regenerate(view: Tensor, base: Tensor) -> None:
    prev, prev_inf = _STATE.grad_enabled, _STATE.inference
    _STATE.grad_enabled, _STATE.inference = True, False
    try:  # bookkeeping, not a user op: not profiled (hooked=True)
        if base._data.ndim == 0:  # every element of the view is the base's one element (an
            # expand, unsqueeze or reshape of a 0-d base): NumPy cannot index a 0-d array with
            # an index array, and `base[()]` would be 0-d whatever the view's shape
            shape = view._data.shape
            fresh = apply("broadcast_to", {"shape": shape}, shape, (base,), "AsStridedBackward0",
                          hooked=True)
        else:
            index = numpy.unravel_index(index_map(view._data, base._data), base._data.shape)
            fresh = apply("getitem", _E, (), (base, index), "AsStridedBackward0", hooked=True)
    finally:
        _STATE.grad_enabled, _STATE.inference = prev, prev_inf
    if fresh._grad_fn is not None:
        move_history(view, fresh._grad_fn, 0)


# ---------------------------------------------------------------- torch's view checks
_NO_GRAD_TAIL = (" Given that this use case is ambiguous and error-prone, it is forbidden. You "
                 "can clarify your code by moving both the view and the inplace either both "
                 "inside the no_grad block (if you don't want the inplace to be tracked) or both "
                 "outside (if you want the inplace to be tracked).")
_MULTI_TAIL = (" This view is the output of a function that returns multiple views. Such "
               "functions do not allow the output views to be modified inplace. You should "
               "replace the inplace operation by an out-of-place one.")
_CUSTOM_TAIL = (" This view was created inside a custom Function (or because an input was "
                "returned as-is) and the autograd logic to handle view+inplace would override "
                "the custom backward associated with the custom Function, leading to incorrect "
                "gradients. This behavior is forbidden. You can fix this by cloning the output "
                "of the custom Function.")


def _short(name: str) -> str:
    return re.sub(r"Backward[0-9]*$", "", name.rpartition("::")[2])


def creation_message(view: Tensor, indirect: bool = False) -> str:
    """torch's message for an in-place op on a view that may not be modified in place
    (handle_view_on_rebase): made in no_grad mode, one of several views an op returned,
    or returned by a custom Function."""
    kind = view._creation[0]
    what = "its base or another view of its base has been" if indirect else "is being"
    if kind == "no_grad":
        fn = view._grad_fn
        prefix = ("A view was created in" if fn is None else
                  f"Output {view._output_nr} of {_short(fn.name())} is a view of a view which "
                  "was created in")
        return f"{prefix} no_grad mode and {what} modified inplace with grad mode enabled." + \
            _NO_GRAD_TAIL
    name, nr = view._creation[1], view._creation[2]
    tail = _MULTI_TAIL if kind == "multi" else _CUSTOM_TAIL
    return f"Output {nr} of {_short(name)} is a view and {what} modified inplace." + tail


def mark_custom_view(t: Tensor, name: str, output_nr: int) -> None:
    """`t`, a view returned by a custom Function, may not be modified in place (for
    srcgrad.autograd.custom: torch's CreationMeta::IN_CUSTOM_FUNCTION)."""
    t._creation = ("custom", name, output_nr)


def check_creation(target: Tensor) -> None:
    """Raise torch's error for a recorded in-place op on a view that forbids it."""
    if target._base is None:
        return
    if target._stale is not None:
        raise RuntimeError(target._stale)
    if target.__dict__.get("_custom_view") and (target._creation is None or  # custom.py's
                                                 target._creation[0] != "custom"):  # mark wins
        fn = target._grad_fn
        target._creation = ("custom", fn.name() if fn is not None else "", target._output_nr)
    if target._creation is not None:
        raise RuntimeError(creation_message(target))


# ---------------------------------------------------------------- split, chunk, unbind
def _split_at(t, bounds, dim, name):
    dim = dim % t._data.ndim
    parts = apply("split", {"indices_or_sections": tuple(bounds), "axis": dim},
                  (tuple(bounds), dim), (t,), name)
    if isinstance(parts, Tensor):  # no bounds: one piece, which the op path returns bare
        if parts._base is not None and parts._creation is None and _STATE.grad_enabled:
            parts._creation = ("multi", name, 0)  # still one of "several" views (torch)
        parts = (parts,)
    return parts


def split(self, split_size_or_sections, dim=0):
    """torch's split: pieces of `split_size` along `dim` (the last one shorter), or of the
    given sizes. The pieces are views of self; modifying one in place is an error."""
    n = self._data.shape[dim]
    if isinstance(split_size_or_sections, int):
        size = split_size_or_sections
        bounds = list(range(size, n, size)) if size > 0 else []
        return _split_at(self, bounds, dim, "SplitBackward0")
    bounds = list(numpy.cumsum(split_size_or_sections)[:-1])
    if sum(split_size_or_sections) != n:
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} (input "
                           f"tensor's size at dimension {dim}), but got split_sizes="
                           f"{list(split_size_or_sections)}")
    return _split_at(self, [int(b) for b in bounds], dim, "SplitWithSizesBackward0")


def chunk(self, chunks, dim=0):
    n = self._data.shape[dim]
    size = -(-n // chunks)
    return split(self, max(size, 1), dim)


def unbind(self, dim=0):
    """The slices along `dim`, each without that dimension (views; not writable in place)."""
    dim = dim % self._data.ndim
    parts = _split_at(self, list(range(1, self._data.shape[dim])), dim, "UnbindBackward0")
    out = []
    for k, p in enumerate(parts):
        q = apply("squeeze", {"axis": dim}, dim, (p,), "UnbindBackward0")
        if q._base is not None and q._creation is None and _STATE.grad_enabled:
            q._creation = ("multi", "UnbindBackward0", k)
        out.append(q)
    return tuple(out)


Tensor.split, Tensor.chunk, Tensor.unbind = split, chunk, unbind
_ = node_name
