"""Saved-tensor hooks (`sg.autograd.graph`), mirroring `torch.autograd.graph`.

`saved_tensors_hooks(pack, unpack)` is a context manager; only the innermost active
pair applies. Compiled code reads the active pair when the forward runs (`sg.vjp`
picks the hook variant of the generated module, Note [Saved-tensor hooks] in
srcgrad.passes.hooks); with no hooks active the hook-free variant runs at no cost.

`allow_mutation_on_saved_tensors()` lets compiled code write in place into values a
custom Function saved (Note [Saved values written in place] in
srcgrad.frontend.versions): the mode is part of the variant, and while the context
is active transforms look their variant up on each call (Note [Modes the guards
test] in srcgrad.contexts), so calls outside it pay nothing for it.
"""

from __future__ import annotations

from srcgrad import contexts
from srcgrad.contexts import current_hooks

__all__ = ["saved_tensors_hooks", "save_on_cpu", "disable_saved_tensors_hooks", "current_hooks",
           "allow_mutation_on_saved_tensors", "increment_version"]

# The state lives in srcgrad.contexts, which the compiler reads without importing the runtime.
_stack = contexts.hooks_stack
_disabled = contexts.disabled_messages


class saved_tensors_hooks:  # noqa: N801 (torch's name)
    """Within this context, values saved for backward go through `pack_hook` when saved
    and through `unpack_hook` when the backward reads them."""

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook, self.unpack_hook = pack_hook, unpack_hook

    def __enter__(self):
        disabled = _disabled()
        if disabled:
            raise RuntimeError(disabled[-1])
        # transforms take their slow path, which reads the hooks (Note [Modes the guards test])
        self._entry = (self.pack_hook, self.unpack_hook)
        contexts.push_hooks(self._entry)
        return self

    def __exit__(self, *exc):
        stack = _stack()
        if not stack:  # exited twice (torch: a no-op then)
            return False
        if stack[-1] is not getattr(self, "_entry", None):
            raise RuntimeError("saved_tensors_hooks: exiting a context that is not the innermost "
                               "active one (exited twice, or out of order); the active hooks "
                               "are left as they are")
        contexts.pop_hooks()
        return False


class save_on_cpu(saved_tensors_hooks):  # noqa: N801
    """Saved values live in host memory until the backward needs them.

    CuPy arrays are copied to NumPy when saved and back to their device when
    unpacked; NumPy arrays are kept as they are. `pin_memory` copies into pinned
    host memory (CuPy only).
    """

    def __init__(self, pin_memory=False, device_type="cuda"):
        self.pin_memory = pin_memory

        def pack(x):
            module = type(x).__module__.split(".")[0]
            if module != "cupy":
                return (None, x)
            import cupy

            if pin_memory:
                host = cupy.cuda.alloc_pinned_memory(x.nbytes)
                out = __import__("numpy").frombuffer(host, x.dtype, x.size).reshape(x.shape)
                x.get(out=out)
            else:
                out = cupy.asnumpy(x)
            return (x.device, out)

        def unpack(packed):
            device, x = packed
            if device is None:
                return x
            import cupy

            with device:
                return cupy.asarray(x)

        super().__init__(pack, unpack)


class disable_saved_tensors_hooks:  # noqa: N801
    """Entering `saved_tensors_hooks` inside raises RuntimeError(error_message); so does
    entering this while hooks are active."""

    def __init__(self, error_message):
        self.error_message = error_message

    def __enter__(self):
        if _stack():
            raise RuntimeError(self.error_message)
        _disabled().append(self.error_message)
        return self

    def __exit__(self, *exc):
        disabled = _disabled()
        if disabled:  # (exited twice: torch's is a no-op then)
            disabled.pop()
        return False


class allow_mutation_on_saved_tensors:  # noqa: N801 (torch's name)
    """Within this context, a value saved for backward may be modified in place; the
    backward uses the value as it was when saved.

    Eagerly (sg.Tensor), as torch does: every tensor an op saves inside the context is
    packed by this context's own pair of hooks, and the first in-place write into memory
    a saved tensor shares clones that tensor first (`before_write`, called by every write
    of srcgrad.autograd.inplace); unpacking hands back the clone. Compiled code is
    functional: the value as saved is already kept and nothing is copied. A backward of a
    graph recorded inside the context (eager, or `sg.vjp`'s `vjp_fn`) must run inside the
    same context.
    """

    def __enter__(self):
        if contexts.mutation_allowed() is not None:
            raise RuntimeError("allow_mutation_on_saved_tensors contexts cannot be nested")
        self._saved = []  # [tensor, its clone or None] per tensor saved in the context
        contexts.set_mutation_allowed(self)
        return self

    def __exit__(self, *exc):
        contexts.set_mutation_allowed(None)
        self._saved = []
        return False

    def eager_hooks(self) -> tuple:
        """The (pack, unpack) pair that eager ops recorded in the context save through."""
        return self._pack, self._unpack

    def _pack(self, tensor):
        entry = [tensor, None]
        self._saved.append(entry)
        return entry

    def _unpack(self, entry):
        if contexts.mutation_allowed() is not self:
            raise AssertionError("Trying to backward outside of the "
                                 "'allow_mutation_on_saved_tensors' contextin which the graph "
                                 "was originally recorded.")
        return entry[0] if entry[1] is None else entry[1]

    def before_write(self, target) -> None:
        """`target`'s memory is about to be written: clone every saved tensor sharing it."""
        import numpy

        memory = target._data
        for entry in self._saved:
            if entry[1] is None and numpy.may_share_memory(entry[0]._data, memory):
                saved = entry[0]
                entry[1] = type(saved)._make(saved._data.copy())


def increment_version(tensor) -> None:
    """Add 1 to the version counter of `tensor` (or of each tensor of an iterable), as an
    in-place op would: for code that writes a Tensor's array behind autograd's back."""
    for t in (tensor,) if hasattr(tensor, "_vc") else tensor:
        if t._inference:
            continue  # torch: inference tensors have no version counter
        t._vc.v += 1


# ---------------------------------------------------------------- the eager graph's nodes
from srcgrad.autograd.node import GradientEdge, Node, RemovableHandle, current_task  # noqa: E402

__all__ += ["Node", "register_multi_grad_hook", "get_gradient_edge", "GradientEdge"]


def get_gradient_edge(tensor) -> GradientEdge:
    if not tensor.requires_grad:
        raise RuntimeError("It is not possible to get the gradient edge for a Tensor that does "
                           "not require gradients")
    if tensor.grad_fn is None:
        return GradientEdge(tensor.accumulator(), 0)
    return GradientEdge(tensor.grad_fn, tensor.output_nr)


def register_multi_grad_hook(tensors, fn, *, mode="all"):
    """`fn` is called once per backward pass: with every relevant tensor's gradient
    (None where a tensor is not in the pass) when they are all computed (`mode="all"`),
    or with the first one computed (`mode="any"`)."""
    if mode not in ("all", "any"):
        raise ValueError(f"Expects mode to be one of ('all', 'any') but got {mode}")
    tensors = tuple(tensors)
    state = {"task": None, "grads": None, "count": 0, "expected": 0, "fired": False}

    def node_of(t):
        if t.grad_fn is not None:
            return t.grad_fn
        acc = t._acc() if t._acc is not None else None
        return acc

    def start(task):
        state.update(task=task, grads=[None] * len(tensors), count=0, fired=False,
                     expected=sum(1 for t in tensors if t.requires_grad
                                  and task.will_execute(node_of(t))))

    def make_hook(i):
        def hook(grad):
            task = current_task()
            if state["task"] is not task:
                start(task)
            if mode == "any":
                if not state["fired"]:
                    state["fired"] = True
                    fn(grad)
                return None
            state["grads"][i] = grad
            state["count"] += 1
            if state["count"] == state["expected"]:
                fn(tuple(state["grads"]))
            return None

        return hook

    handles = [t.register_hook(make_hook(i)) for i, t in enumerate(tensors) if t.requires_grad]
    return _MultiHandle(handles)


class _MultiHandle:
    def __init__(self, handles):
        self.handles = handles

    def remove(self) -> None:
        for h in self.handles:
            h.remove()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


_ = RemovableHandle


def __getattr__(name: str):
    """`graph.Variable` (torch's module has it) without importing the Tensor runtime here."""
    if name == "Variable":
        from srcgrad.autograd.variable import Variable

        return Variable
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
