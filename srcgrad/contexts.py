"""The process state that the runtime's context managers set and compiled code reads.

`sg.autograd.graph.saved_tensors_hooks` and `allow_mutation_on_saved_tensors` live
with the eager runtime, but every transform reads their state on each call (which
variant of the generated module to run). Keeping the state here, below both the
compiler and the runtime, lets `sg.grad` read it without importing the runtime.
"""

from __future__ import annotations

import weakref
from _thread import _local  # threading.local itself: importing threading costs a cache hit 0.6 ms

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


# The active allow-mutation context (torch keeps one per process, not per thread) and
# the callbacks run when it changes: each transform's dispatcher forgets the variant it
# was bound to (srcgrad.api._Dispatch.unbind).
_allow_mutation: list = [None]
_mode_listeners: list = []


def mutation_allowed():
    """The active `allow_mutation_on_saved_tensors` context, or None."""
    return _allow_mutation[0]


def set_mutation_allowed(context) -> None:
    """Enter (`context`) or leave (None) the allow-mutation mode and tell the listeners."""
    _allow_mutation[0] = context
    notify_mode_change()


def notify_mode_change() -> None:
    """Run the listeners: the hooks or the allow-mutation mode changed."""
    alive = []
    for ref in _mode_listeners:
        callback = ref()
        if callback is not None:
            callback()
            alive.append(ref)
    _mode_listeners[:] = alive


def on_mutation_mode_change(callback) -> None:
    """Call `callback()` whenever an `allow_mutation_on_saved_tensors` context is entered
    or left (held weakly: a bound method of an object that dies is dropped)."""
    _mode_listeners.append(weakref.WeakMethod(callback))
