"""Grad modes (`sg.no_grad`, `sg.enable_grad`, `sg.set_grad_enabled`, `sg.inference_mode`),
mirroring `torch.autograd.grad_mode` (spec/torch_semantics.md §10).

Note [Grad mode state]
~~~~~~~~~~~~~~~~~~~~~~
The mode is thread-local: one `_State` per thread, whose class attributes are the
defaults every new thread starts from (grad enabled, inference mode off). Every eager
op asks whether to record a node, so the question must be cheap: `is_grad_enabled()`
is one attribute read on a `threading.local`, and the runtime may read
`grad_mode.STATE.grad_enabled` directly where even the call matters.

Each context manager sets the state on `__enter__` and restores on `__exit__` exactly
what it found, so modes nest and an exception inside a block leaves the state as it
was before the block. Like torch's, every mode is also a decorator (`@no_grad()` and
`@no_grad`; `@inference_mode` too); a decorated generator function runs each of its
steps under the mode and gives the caller back its own mode at every `yield`
(torch's `context_decorator`). A decorator makes a fresh context (`clone()`) per call,
so recursive and concurrent calls never share the state one instance saved.

`set_grad_enabled(mode)` changes the mode as soon as it is constructed (so the plain
call `set_grad_enabled(False)` switches grad off), and restores on `__exit__` what it
found when constructed. Used as a decorator it first undoes its construction.

`inference_mode(True)` turns grad off and inference mode on; `inference_mode(False)`
turns grad *on* and inference mode off (torch's `c10::InferenceMode(enabled)` sets
grad mode to `not enabled`).
"""

from __future__ import annotations

import functools
import inspect
import threading
import warnings

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "inference_mode", "is_grad_enabled",
           "is_inference_mode_enabled"]


class _State(threading.local):
    grad_enabled = True  # class attributes: each new thread's defaults
    inference = False


STATE = _State()
# Whether any thread ever entered inference_mode(True): until then no thread's
# STATE.inference can be True, and the per-op path skips reading it (a thread-local
# read costs as much as the rest of a Tensor's construction). Never reset: a program
# that used inference mode once reads the thread's state from then on.
INFERENCE_SEEN = [False]


def is_grad_enabled() -> bool:
    """Whether ops record the autograd graph in this thread."""
    return STATE.grad_enabled


def is_inference_mode_enabled() -> bool:
    """Whether this thread is inside `inference_mode()`."""
    return STATE.inference


def _set_grad_enabled(mode: bool) -> None:
    STATE.grad_enabled = bool(mode)


_CLASS_WARNING = ("Decorating classes is deprecated and will be disabled in future versions. "
                  "You should only decorate functions or methods. To preserve the current "
                  "behavior of class decoration, you can directly decorate the `__init__` "
                  "method and nothing else.")


def _context_decorator(make_context, func):
    """`func` running under a fresh context from `make_context()` at each call (each step
    of a generator function)."""
    if inspect.isgeneratorfunction(func):
        return _generator_decorator(make_context, func)

    @functools.wraps(func)
    def decorated(*args, **kwargs):
        with make_context():
            return func(*args, **kwargs)

    return decorated


def _generator_decorator(make_context, func):
    @functools.wraps(func)
    def generator(*args, **kwargs):
        gen = func(*args, **kwargs)
        try:
            with make_context():
                response = gen.send(None)
            while True:
                try:
                    request = yield response
                except GeneratorExit:
                    with make_context():
                        gen.close()
                    raise
                except BaseException as exc:  # thrown in by the caller: pass it on
                    with make_context():
                        response = gen.throw(exc)
                else:
                    with make_context():
                        response = gen.send(request)
        except StopIteration as stop:
            return stop.value

    return generator


class _DecoratorContextManager:
    """A context manager that is also a decorator."""

    def __call__(self, func):
        if inspect.isclass(func):
            warnings.warn(_CLASS_WARNING, FutureWarning, stacklevel=2)
            cls = func
            func = lambda *args, **kwargs: cls(*args, **kwargs)
        return _context_decorator(self.clone, func)

    def clone(self):
        return self.__class__()


class _NoParamDecoratorContextManager(_DecoratorContextManager):
    """Also usable bare: `@no_grad` decorates as `@no_grad()` does."""

    def __new__(cls, orig_func=None):
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)


class _SavedState:
    """Enter saves the whole state on a per-instance stack (an instance may be entered
    again while active), exit restores what the matching enter found."""

    def _push(self):
        stack = self.__dict__.setdefault("_saved", [])
        stack.append((STATE.grad_enabled, STATE.inference))

    def _pop(self):
        STATE.grad_enabled, STATE.inference = self._saved.pop()


class no_grad(_NoParamDecoratorContextManager, _SavedState):  # noqa: N801 (torch's name)
    """Ops inside record no graph: outputs do not require grad and have no grad_fn."""

    def __enter__(self):
        self._push()
        STATE.grad_enabled = False

    def __exit__(self, *exc):
        self._pop()
        return False


class enable_grad(_NoParamDecoratorContextManager, _SavedState):  # noqa: N801
    """Grad mode on inside (e.g. within `no_grad`)."""

    def __enter__(self):
        self._push()
        STATE.grad_enabled = True

    def __exit__(self, *exc):
        self._pop()
        return False


class set_grad_enabled(_DecoratorContextManager):  # noqa: N801
    """Grad mode set to `mode`: immediately when constructed, so a plain call
    `set_grad_enabled(False)` switches it off; as a context it restores on exit what it
    found when constructed."""

    def __init__(self, mode: bool):
        self.prev = STATE.grad_enabled
        self.mode = bool(mode)
        STATE.grad_enabled = self.mode

    def __call__(self, func):
        STATE.grad_enabled = self.prev  # decorating is not switching the mode now
        return super().__call__(func)

    def __enter__(self):
        STATE.grad_enabled = self.mode

    def __exit__(self, *exc):
        STATE.grad_enabled = self.prev
        return False

    def clone(self):
        return self.__class__(self.mode)


class inference_mode(_DecoratorContextManager, _SavedState):  # noqa: N801
    """`inference_mode(True)`: grad off and inference mode on (tensors made inside are
    inference tensors); `inference_mode(False)`: grad on and inference mode off."""

    def __new__(cls, mode_or_func=True, mode=None):
        if mode is not None or mode_or_func is None or isinstance(mode_or_func, bool):
            return super().__new__(cls)  # inference_mode(), (False), (mode=False)
        return cls()(mode_or_func)  # bare `@inference_mode`

    def __init__(self, mode: bool = True):
        self.mode = bool(mode)

    def __enter__(self):
        self._push()
        if self.mode:
            INFERENCE_SEEN[0] = True
        STATE.grad_enabled, STATE.inference = not self.mode, self.mode

    def __exit__(self, *exc):
        self._pop()
        return False

    def clone(self):
        return self.__class__(self.mode)
