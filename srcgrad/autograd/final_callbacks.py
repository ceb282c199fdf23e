"""The final callbacks of a backward pass (`Variable._execution_engine.queue_callback`).

Note [Final callbacks]
~~~~~~~~~~~~~~~~~~~~~~
torch's GraphTask keeps a list of final callbacks; `queue_callback` appends to the list
of the pass running in this thread (outside any pass: torch's "Final callbacks can only
be installed during backward pass." error). When every node of the pass has run, the
engine calls them in order, a callback queued by a callback included, with the pass's
grad mode (create_graph) on; an exception propagates out of backward()/grad(). A pass
that fails drops its callbacks uncalled. A nested (reentrant) backward has its own
list. srcgrad.autograd.engine's `_run` opens and runs the list (`pass_stack`, `run_callbacks`);
srcgrad.autograd.variable's engine object queues into it.
"""

from __future__ import annotations

import threading

from srcgrad.autograd import grad_mode

__all__ = ["queue_callback", "pass_stack", "run_callbacks"]


class _Lists(threading.local):
    def __init__(self):
        self.stack = []  # one list of callbacks per running pass, innermost last


_LISTS = _Lists()


def queue_callback(callback) -> None:
    stack = _LISTS.stack
    if not stack:
        raise RuntimeError("Final callbacks can only be installed during backward pass.")
    stack[-1].append(callback)


def pass_stack() -> list:
    """This thread's stack of callback lists: the engine's `_run` pushes a pass's list
    (a plain list: a context-manager object cost each pass two calls) and pops it."""
    return _LISTS.stack


def run_callbacks(callbacks: list, create_graph) -> None:
    """Call what a pass queued, in order, with the pass's grad mode; its list is still
    on the stack, so a callback may queue another one."""
    state = grad_mode.STATE
    prev = state.grad_enabled
    state.grad_enabled = bool(create_graph)
    try:
        i = 0
        while i < len(callbacks):  # a callback may queue another one
            callbacks[i]()
            i += 1
    finally:
        state.grad_enabled = prev
        callbacks.clear()
