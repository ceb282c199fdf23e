"""Custom Functions applied to Tensors: `MyFn.apply(t)` records a `MyFnBackward` node
whose backward calls the user's `backward` (spec/torch_semantics.md §5, §7).

Note [Custom Function nodes]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~
As in torch, the `ctx` a Function's methods see *is* the backward node: an instance
of `<Class>Backward`, a subclass of `BackwardCFunction` (a `Node` and a
`FunctionCtx`), so `ctx.k = 3` is readable as `y.grad_fn.k`. `apply`:

1. binds the arguments to forward's signature; the node's edges are taken from the
   Tensor inputs *before* forward runs (a dirtied input's old history is the edge);
2. runs `forward` under no_grad (either style, srcgrad.autograd.function.forward_with);
3. bumps the version of every dirty tensor (torch's mark_dirty bumps once more on top
   of the in-place op) and, when grad mode is on and a Tensor input requires grad,
   wraps the outputs: a dirty input is rebased onto the node (it *is* the output), an
   input returned as-is comes back as a new view object, a non-differentiable output
   (marked, or an integer dtype) stays a leaf, any other Tensor output gets the node;
4. saves what `save_for_backward` received (below).

The backward (`run_backward`, called by the engine's `node_backward` for any node
without a kernel) hands the user's `backward` Tensors: the gradients (zeros for
outputs that received none, unless `set_materialize_grads(False)`), and checks what
it returns as torch's PyNode and `validate_outputs` do: the number of gradients
(extra trailing Nones allowed), None for non-Tensor inputs, a Tensor (or array)
per gradient, a shape the input broadcasts to (summed back, torch's sum_to), the
input's dtype. Without create_graph the engine passes arrays, so the results go
back as arrays; with it they stay Tensors and the user's ops are recorded, so a
backward written with differentiable ops supports double backward.

Saved values follow torch's SavedVariable: a saved input (or intermediate) comes
back as the same object, a saved output as a new Tensor over the same array whose
grad_fn is the node (no reference cycle); each is version-checked when read
(`version_error`'s text, "output 0 of F" for a saved output), or, when
saved-tensor hooks were active at the end of forward, packed then and unpacked
at each read (no version check through hooks, as in torch). `release()` frees them
after a backward without retain_graph; a node that saved nothing can run again.

Compiled code does the same by other means (Note [Custom Functions] in
srcgrad.frontend.function); where the two doors differ, docs/guide.md says so and
tests/autograd/test_function_parity.py asserts it.
"""

from __future__ import annotations

import re
import warnings

import numpy

from srcgrad.autograd import function as _function_module
from srcgrad.autograd import grad_mode
from srcgrad.autograd.batching import Batched
from srcgrad.autograd.function import (
    RUNTIME,
    Function,
    FunctionCtx,
    bind_inputs,
    check_forward,
    forward_with,
)
from srcgrad.autograd.node import _SEQ, SECOND_TIME, AccumulateGrad, Node, version_error
from srcgrad.autograd.tensor import Tensor
from srcgrad.contexts import current_hooks, mutation_allowed

__all__ = ["BackwardCFunction", "backward_class", "apply", "FORWARD_AD"]

_STATE = grad_mode.STATE
_PACK_MUTATES = (
    "A saved tensor pack hook is modifying its input in place. Tensors provided as input to "
    "pack hook cannot be modified by in-place operations as this can lead to unexpected "
    "side-effects. Please open an issue if you need to perform in-place operations on the "
    "input to a pack hook.")


_ACCESSED_ONCE = (
    "saved_tensors can only be accessed once when clear_saved_tensors_on_access=True is set on "
    "the autograd.Function. Either access saved_tensors only once, or set "
    "clear_saved_tensors_on_access=False.")


class _Cleared(tuple):
    """A node's `_saved` once read under clear_saved_tensors_on_access: nothing held, and
    not None, so the node still runs (its backward then reads saved_tensors again, an error)."""


_CLEARED = _Cleared()


class _ForwardAD:
    """Forward-mode AD (srcgrad.autograd.forward_ad) plugs in here: `hook(node, inputs,
    outputs)` runs after forward on Tensors and may return new outputs (duals); the
    node's `apply_jvp(*tangents)` calls the user's `jvp`, where `ctx.saved_tensors`
    reads what `save_for_forward` saved."""

    hook = None


FORWARD_AD = _ForwardAD()


class BackwardCFunction(Node, FunctionCtx):
    """The node of one custom Function call, and its `ctx` (Note [Custom Function nodes])."""

    _forward_cls = Function
    _kernel = None  # the engine's node_backward calls run_backward for nodes without a kernel

    def __init__(self, needs_input_grad):
        Node.__init__(self, (), next(_SEQ))
        FunctionCtx.__init__(self, needs_input_grad)
        self._saved = ()  # per saved value an entry (see _save); None once freed
        self._out_meta = ()  # per forward output: (shape, dtype), or None for a non-Tensor
        self._in_meta = ()  # per Tensor input: (shape, dtype)
        self._tensor_input = ()  # per forward input: whether it is a Tensor
        self._unpack_hook = None
        self._in_jvp = False

    # ------------------------------------------------------------ torch's BackwardCFunction API
    def apply(self, *args):
        """Run the user's `backward` (or `vjp`) on gradients, as the engine does."""
        cls = self._forward_cls
        has_backward = cls.backward is not Function.backward
        has_vjp = cls.vjp is not Function.vjp
        if has_backward and has_vjp:
            raise RuntimeError("Implementing both 'backward' and 'vjp' for a custom Function is "
                               "not allowed. You should only implement one of them.")
        user_fn = cls.vjp if has_vjp else cls.backward
        if cls.boxed_grads_call:
            return user_fn(self, list(args))
        return user_fn(self, *args)

    def apply_jvp(self, *args):
        """Run the user's `jvp` on tangents (forward-mode AD); a batch of tangents one seed
        at a time, as `_run_batched` does for backward."""
        if any(type(a) is Batched for a in args):
            n = next(a.size for a in args if type(a) is Batched)
            rows = []
            for b in range(n):
                r = self.apply_jvp(*[Tensor._make(a.data[b]) if type(a) is Batched else a
                                     for a in args])
                rows.append(r if isinstance(r, tuple) else (r,))
            return tuple(None if all(r[k] is None for r in rows) else Batched(numpy.stack(
                [numpy.asarray(r[k]._data if isinstance(r[k], Tensor) else r[k]) for r in rows]))
                for k in range(len(rows[0])))
        self._in_jvp = True
        try:
            return self._forward_cls.jvp(self, *args)
        finally:
            self._in_jvp = False

    def name(self) -> str:
        return type(self).__name__

    def n_outputs(self) -> int:
        return len(self._out_meta)

    # ------------------------------------------------------------ saved tensors
    @property
    def saved_tensors(self) -> tuple:
        if self._in_forward:
            return ()
        if self._in_jvp:
            return tuple(self.saved_for_forward)
        if self._saved is None:
            raise RuntimeError(SECOND_TIME)
        if self._saved is _CLEARED:
            raise RuntimeError(_ACCESSED_ONCE)
        values = tuple(_unpack(self, e) for e in self._saved)
        if self._forward_cls.clear_saved_tensors_on_access:
            self._saved = _CLEARED  # the references go; the node can still run (and read again)
        return values

    @property
    def saved_variables(self) -> tuple:
        warnings.warn("'saved_variables' is deprecated; use 'saved_tensors'", DeprecationWarning,
                      stacklevel=2)
        return self.saved_tensors

    @property
    def _raw_saved_tensors(self) -> tuple:
        if self._saved is None:
            raise RuntimeError(SECOND_TIME)
        return tuple(SavedTensor(self, j) for j in range(len(self._saved)))

    def release(self) -> None:
        """Free the saved values (after a backward without retain_graph)."""
        if self._saved or self._saved is _CLEARED:
            self._saved = None

    # ------------------------------------------------------------ the backward
    def run_backward(self, cts, create_graph) -> tuple:
        """One gradient per next edge (Note [Custom Function nodes])."""
        if self._saved is None:
            raise RuntimeError(SECOND_TIME)
        if not create_graph and any(type(c) is Batched for c in cts):
            return self._run_batched(cts)
        grads = []
        for c, meta in zip(cts, self._out_meta):
            if c is None:
                if self.materialize_grads and meta is not None:
                    c = Tensor._make(numpy.zeros(meta[0], meta[1]))
            elif not isinstance(c, Tensor):
                c = Tensor._make(numpy.asarray(c))
            grads.append(c)
        return self._check_grads(self.apply(*grads), create_graph)

    def _run_batched(self, cts) -> tuple:
        """A batch of seeds (Note [Batched seeds] in srcgrad.autograd.batching): the Python
        backward once per seed, the gradients stacked into batches, as torch's vmap runs an
        op without a batching rule in a loop."""
        n = next(c.size for c in cts if type(c) is Batched)
        rows = [self.run_backward([c.data[b] if type(c) is Batched else c for c in cts], False)
                for b in range(n)]
        out = []
        for k, meta in enumerate(self._in_meta):
            column = [r[k] for r in rows]
            out.append(None if all(g is None for g in column) else Batched(numpy.stack(
                [numpy.zeros(meta[0], meta[1]) if g is None else g for g in column])))
        return tuple(out)

    def _check_grads(self, result, create_graph) -> tuple:
        name = self.name()
        result = result if isinstance(result, tuple) else (result,)
        expected = len(self._tensor_input)
        if len(result) > expected and all(g is None for g in result[expected:]):
            result = result[:expected]
        if len(result) != expected:
            raise RuntimeError(f"function {name} returned an incorrect number of gradients "
                               f"(expected {expected}, got {len(result)})")
        out = []
        for i, (g, is_tensor) in enumerate(zip(result, self._tensor_input)):
            if not is_tensor:
                if g is not None:
                    raise RuntimeError(f"function {name} returned a gradient different than None "
                                       f"at position {i + 1}, but the corresponding forward input "
                                       "was not a Variable")
                continue
            if g is not None and not isinstance(g, Tensor):
                if not isinstance(g, (numpy.ndarray, numpy.generic)):
                    raise RuntimeError(f"expected Variable or None (got {type(g).__name__})")
                g = Tensor._make(numpy.asarray(g))
            out.append(g)
        checked = []
        for k, (g, edge, meta) in enumerate(zip(out, self._next, self._in_meta)):
            if g is None or edge is None:  # no gradient, or the input needs none: dropped
                checked.append(None)
                continue
            g = _conform(g, meta, k, name)
            checked.append(g if create_graph else g._data)
        return tuple(checked)


def _conform(g: Tensor, meta, k: int, name: str) -> Tensor:
    """`g` with the input's shape (torch's sum_to where the input broadcasts to it) and dtype."""
    shape, dtype = meta
    if g.shape != shape:
        try:
            expandable = numpy.broadcast_shapes(shape, g.shape) == g.shape
        except ValueError:
            expandable = False
        if not expandable:
            raise RuntimeError(f"Function {name} returned an invalid gradient at index {k} - got "
                               f"{list(g.shape)} but expected shape compatible with {list(shape)}")
        lead = g.ndim - len(shape)
        axes = tuple(range(lead)) + tuple(lead + d for d, n in enumerate(shape)
                                          if n == 1 and g.shape[lead + d] != 1)
        g = numpy.reshape(numpy.sum(g, axis=axes), shape)
    if g.dtype != dtype:
        g = g.astype(dtype)
    return g


def backward_class(cls) -> type:
    """`cls`'s node class, `<Class>Backward` (created once per Function class)."""
    made = cls.__dict__.get("_srcgrad_backward_cls")
    if made is None:
        made = type(cls.__name__ + "Backward", (BackwardCFunction,),
                    {"_forward_cls": cls, "__module__": cls.__module__})
        cls._srcgrad_backward_cls = made
    return made


# ---------------------------------------------------------------- apply on Tensors
def apply(cls, args, kwargs):
    """`cls.apply(*args, **kwargs)` when a Tensor is an input; NotImplemented otherwise."""
    check_forward(cls)
    inputs = bind_inputs(cls, args, kwargs)
    tensors = [a for a in inputs if isinstance(a, Tensor)]
    if not tensors:
        return NotImplemented
    executable = _STATE.grad_enabled and not _STATE.inference and any(t._rg for t in tensors)
    node = backward_class(cls)(tuple(executable and isinstance(a, Tensor) and a._rg
                                     for a in inputs))
    node._tensor_input = tuple(isinstance(a, Tensor) for a in inputs)
    node._in_meta = tuple((t.shape, t.dtype) for t in tensors)
    if executable:
        node._next = tuple(_edge(t) for t in tensors)
    prev = _STATE.grad_enabled
    _STATE.grad_enabled = False
    try:
        output = forward_with(cls, inputs, node)
    finally:
        _STATE.grad_enabled = prev
    for t in node.dirty_tensors:
        if isinstance(t, Tensor):
            t._vc.v += 1  # torch's mark_dirty bumps the version once more
    single = not isinstance(output, tuple)
    outs, wrapped = _wrap_outputs(node, tensors, (output,) if single else output, executable)
    if executable:
        _save(node, wrapped, inputs)
    if FORWARD_AD.hook is not None:
        outs = FORWARD_AD.hook(node, inputs, outs)
    return outs[0] if single else tuple(outs)


def _edge(t: Tensor):
    if not t._rg:
        return None
    if t._grad_fn is not None:
        return (t._grad_fn, t._output_nr)
    return (t.accumulator(), 0)


def _is_in(t, seq) -> bool:
    return any(t is s for s in seq)


def _wrap_outputs(node, tensors, outputs, executable) -> tuple:
    """(outputs as apply returns them, {id(forward's object): returned object})."""
    dirty, nondiff = node.dirty_tensors, node.non_differentiable
    results, meta, wrapped = [], [], {}
    for k, o in enumerate(outputs):
        key = id(o)
        if isinstance(o, numpy.ndarray):  # an array is a tensor here: it becomes a Tensor
            o = Tensor._make(o)
        if not isinstance(o, Tensor):
            results.append(o)
            meta.append(None)
            continue
        meta.append((o.shape, o.dtype))
        if key in wrapped and not _is_in(o, tensors):  # the same tensor returned twice
            results.append(wrapped[key])
            continue
        is_input, is_dirty = _is_in(o, tensors), _is_in(outputs[k], dirty)
        differentiable = executable and o.dtype.kind in "fc" and not _is_in(outputs[k], nondiff)
        if not differentiable:
            if is_input and not is_dirty:
                o = _alias(o, None, 0)
            elif o._rg and not is_dirty:
                o = o.detach()
        elif is_dirty:  # its history before forward (an in-place op in forward may change it)
            _check_dirty_target(o, next((e for t, e in zip(tensors, node._next) if t is o), None))
            if o._base is not None:
                _rebase_view(o, node, k, len(outputs))
            else:
                o._grad_fn, o._output_nr, o._rg = node, k, True
        elif is_input:
            o = _alias(o, node, k)
        else:
            o._grad_fn, o._output_nr, o._rg = node, k, True
            if o._base is not None:
                o._custom_view = True  # a view made inside forward (torch: IN_CUSTOM_FUNCTION)
        wrapped[key] = o
        results.append(o)
    node._out_meta = tuple(meta)
    return results, wrapped


def _alias(t: Tensor, node, k) -> Tensor:
    """An input returned as-is: a new view object of it (torch's view_as_self)."""
    out = Tensor._make(t._data, rg=node is not None, grad_fn=node, output_nr=k, vc=t._vc,
                       base=t._base if t._base is not None else t)
    if node is not None:
        out._custom_view = True
    return out


def _check_dirty_target(t: Tensor, edge) -> None:
    """torch's checks on a dirtied input that is to be rebased onto the node; `edge` is its
    history when apply was called."""
    base = t._base
    if base is not None and base._rg and base._grad_fn is None:
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an "
                           "in-place operation.")
    if t._rg and t._grad_fn is None:
        raise RuntimeError("a leaf Variable that requires grad has been used in an in-place "
                           "operation.")
    fn, nr = edge if edge is not None else (None, 0)
    if base is not None and fn is not None and fn.n_outputs() > 1:
        raise RuntimeError(
            f"Output {nr} of {re.sub(r'Backward[0-9]*$', '', fn.name())} is a view and "
            "is being modified inplace. This view is the output of a function that returns "
            "multiple views. Such functions do not allow the output views to be modified inplace. "
            "You should replace the inplace operation by an out-of-place one.")


def _rebase_view(view: Tensor, node, k: int, n_outputs: int) -> None:
    """A dirtied view: its base's history becomes torch's CopySlices around the node, and
    the base's live views (this one too) read their elements out of that history
    (Note [Views and CopySlices] in srcgrad.autograd.views)."""
    if n_outputs > 1:
        raise RuntimeError(
            "If your Function modifies inplace an input that is a view of another Tensor, your "
            "Function cannot return more than one Tensor. This is not supported by the current "
            "autograd engine. You should either make sure the input is not a view (using "
            ".clone() for example) or make your Function only return one Tensor (potentially "
            "splitting it into two Functions: one doing the inplace that returns a single Tensor "
            "and a second one that does the other operations). You can ask on the forum "
            "https://discuss.pytorch.org/ if you need help to do this change.")
    from srcgrad.autograd import inplace, views

    views.rebase_view(view, Tensor._make(view._data, rg=True, grad_fn=node, output_nr=k))
    inplace.after_write(view, True)


# ---------------------------------------------------------------- saved values
# An entry: (kind, value, counter, version, label, watched), kind "object" (an input or
# an intermediate: handed back as is) or "output" (value = (data, output_nr): a new
# Tensor per read), or None for a saved None. With hooks, value is what pack returned
# and kind is prefixed "packed-".
def _save(node, wrapped, inputs) -> None:
    hooks = current_hooks()
    if hooks is None and mutation_allowed() is not None:  # clone-on-write (graph.py)
        hooks = mutation_allowed().eager_hooks()
    entries = []
    for t in node.to_save:
        if t is None:
            entries.append(None)
            continue
        t = wrapped.get(id(t), t)
        if isinstance(t, numpy.ndarray):
            t = Tensor._make(t)
        if t._grad_fn is node:
            entry = ["output", (t._data, t._output_nr), t._vc, t._vc.v, (node, t._output_nr),
                     None]
        else:
            fn = t._grad_fn
            entry = ["object", t, t._vc, t._vc.v, None if fn is None else (fn, t._output_nr),
                     None if fn is None else t]
        if hooks is not None:
            _pack(node, entry, hooks)
        entries.append(entry)
    node._saved = tuple(entries)


def _pack(node, entry, hooks) -> None:
    pack, unpack = hooks
    value = _unpack(node, entry)
    version = value._vc.v
    packed = pack(value)
    if value._vc.v != version:
        raise RuntimeError(_PACK_MUTATES)
    entry[0], entry[1] = "packed-" + entry[0], packed
    node._unpack_hook = unpack


def _unpack(node, entry, check=True):
    if entry is None:
        return None
    kind, value, counter, version, label, watched = entry
    if kind.startswith("packed-"):
        out = node._unpack_hook(value)
        if not isinstance(out, Tensor):
            raise TypeError("Output of saved tensor unpack_hook expected to be a Tensor but got "
                            f"result of type {type(out).__name__}")
        return out
    if check:
        if watched is not None and watched._grad_fn is None:
            raise RuntimeError("Trying to use a saved tensor that has been detached in-place, "
                               "i.e. with .detach_().This is not supported, please use "
                               "out-of-place `.detach()` instead")
        if counter.v != version:
            if kind == "output":
                raise version_error(value[0], counter.v, version, label)
            fn = value._grad_fn  # torch names a saved input's producer as it is now
            raise version_error(value._data, counter.v, version,
                                None if fn is None else (fn, value._output_nr))
    if kind == "output":
        data, k = value
        return Tensor._make(data, rg=True, grad_fn=node, output_nr=k, vc=counter)
    return value


class SavedTensor:
    """`grad_fn._raw_saved_tensors[j]` (torch's `torch._C._autograd.SavedTensor`)."""

    __slots__ = ("_node", "_index")

    def __init__(self, node, index):
        self._node, self._index = node, index

    def _entry(self):
        saved = self._node._saved
        if saved is None:
            raise RuntimeError(SECOND_TIME)
        return saved[self._index]

    @property
    def data(self):
        entry = self._entry()
        if entry is None:
            return None
        if entry[0].startswith("packed-"):
            return entry[1]
        value = _unpack(self._node, entry, check=False)
        return value.detach() if entry[0] == "output" else value

    @property
    def unpack_hook(self):
        entry = self._entry()
        return self._node._unpack_hook if entry is not None and \
            entry[0].startswith("packed-") else None

    def register_hooks(self, pack_hook, unpack_hook) -> None:
        if self._node._saved is None:
            raise RuntimeError(
                "Calling register_hooks on a saved tensor after it has been freed. Saved "
                "intermediate values of the graph are freed when you call .backward() or "
                "autograd.grad(). Specify retain_graph=True if you need to backward through the "
                "graph a second time or if you need to access saved variables after calling "
                "backward.")
        entry = self._entry()
        if entry is None:
            raise RuntimeError("Calling register_hooks on a saved tensor with value None is "
                               "forbidden")
        if entry[0].startswith("packed-"):
            raise RuntimeError("Calling register_hooks on a saved tensor whose hooks have already "
                               "been set. Hint: only one pair of hooks is allowed at a time.")
        _pack(self._node, entry, (pack_hook, unpack_hook))


# ---------------------------------------------------------------- @once_differentiable
class ErrorNode(Node):
    """torch's `torch::autograd::Error` (DelayedError): raises when a backward reaches it."""

    _kernel = None
    _saved = ()

    def __init__(self, next_edges, nout, message):
        super().__init__(next_edges, next(_SEQ))
        self._nout, self._message = nout, message

    def name(self) -> str:
        return "torch::autograd::Error"

    def n_outputs(self) -> int:
        return self._nout

    def release(self) -> None:
        return None

    def run_backward(self, cts, create_graph):
        raise RuntimeError(self._message)


def once_differentiable(fn, ctx, args):
    """torch's once_differentiable: the backward under no_grad; if grad mode is on and a
    gradient it was given requires grad (create_graph), its results are wrapped by an
    `Error` node so that differentiating them again raises."""
    prev = _STATE.grad_enabled
    _STATE.grad_enabled = False
    try:
        outputs = fn(ctx, *args)
    finally:
        _STATE.grad_enabled = prev
    if not prev or not any(isinstance(a, Tensor) and a._rg for a in args):
        return outputs
    single = not isinstance(outputs, tuple)
    items = (outputs,) if single else outputs
    edges = []
    for v in items:
        if isinstance(v, (Tensor, numpy.ndarray)):
            leaf = Tensor._make(v._data if isinstance(v, Tensor) else v, rg=True)
            edges.append((AccumulateGrad(leaf), 0))
        else:
            edges.append(None)
    err = ErrorNode(tuple(edges), len(items), "trying to differentiate twice a function that was "
                    "marked with @once_differentiable")
    wrapped = tuple(Tensor._make(v._data if isinstance(v, Tensor) else v, rg=True, grad_fn=err,
                                 output_nr=k) if e is not None else v
                    for k, (v, e) in enumerate(zip(items, edges)))
    return wrapped[0] if single else wrapped


RUNTIME.apply = apply
_function_module.BackwardCFunction = BackwardCFunction  # torch.autograd.function's name
RUNTIME.once_differentiable = once_differentiable
RUNTIME.backward_class = backward_class
