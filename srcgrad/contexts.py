"""The process state that the runtime's context managers set and compiled code reads.

`sg.autograd.graph.saved_tensors_hooks` and `allow_mutation_on_saved_tensors` live
with the eager runtime, but every transform reads their state on each call (which
variant of the generated module to run). Keeping the state here, below both the
compiler and the runtime, lets `sg.grad` read it without importing the runtime.
"""

from __future__ import annotations

from _thread import _local, allocate_lock  # threading's own: importing threading costs a cache hit 0.6 ms

_state = _local()


def hooks_stack() -> list:
    """This thread's active `(pack_hook, unpack_hook)` pairs, innermost last."""
    stack = getattr(_state, "hooks", None)
    if stack is None:
        stack = _state.hooks = []
    return stack


def disabled_messages() -> list:
    """This thread's active `disable_saved_tensors_hooks` messages, innermost last."""
    messages = getattr(_state, "disabled", None)
    if messages is None:
        messages = _state.disabled = []
    return messages


def hooks_active() -> bool:
    """Whether any saved-tensor hooks are active on this thread (cheap: read per op)."""
    return bool(getattr(_state, "hooks", None))


def current_hooks():
    """The innermost active `(pack_hook, unpack_hook)`, or None."""
    stack = hooks_stack()
    return stack[-1] if stack else None


# Note [Modes the guards test]
# A transform's guards (srcgrad.api: the dispatcher of sg.grad and value_and_grad, and
# sg.vjp's plain call) run the variant compiled for no saved-tensor hooks and no
# allow-mutation mode. Hooks are per thread (as torch's), the guards per process: a
# guard that one thread bound must not run in another thread where hooks are active,
# nor after a context was entered. So the guards test one process-wide count,
# `SPECIAL_MODES[0]`: the hook contexts active in any thread, plus one while an
# allow-mutation context is. While it is not 0 every call takes its transform's slow
# path, which reads its own thread's state, and binds no guards.
SPECIAL_MODES: list = [0]
_modes_lock = allocate_lock()
_allow_mutation: list = [None]  # the active allow-mutation context (torch keeps one per process)


def _count_modes(change: int) -> None:
    with _modes_lock:  # (`+=` on a list item is no atomic step: two threads may interleave)
        SPECIAL_MODES[0] += change


def push_hooks(pair) -> None:
    """Enter a `saved_tensors_hooks` context on this thread."""
    hooks_stack().append(pair)
    _count_modes(1)


def pop_hooks() -> None:
    """Leave this thread's innermost `saved_tensors_hooks` context."""
    hooks_stack().pop()
    _count_modes(-1)


def mutation_allowed():
    """The active `allow_mutation_on_saved_tensors` context, or None."""
    return _allow_mutation[0]


def set_mutation_allowed(context) -> None:
    """Enter (`context`) or leave (None) the allow-mutation mode."""
    previous, _allow_mutation[0] = _allow_mutation[0], context
    _count_modes((context is not None) - (previous is not None))
