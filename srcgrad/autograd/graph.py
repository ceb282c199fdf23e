"""Saved-tensor hooks (`sg.autograd.graph`), mirroring `torch.autograd.graph`.

`saved_tensors_hooks(pack, unpack)` is a context manager; only the innermost active
pair applies. Compiled code reads the active pair when the forward runs (`sg.vjp`
picks the hook variant of the generated module, Note [Saved-tensor hooks] in
srcgrad.passes.hooks); with no hooks active the hook-free variant runs at no cost.
"""

from __future__ import annotations

import threading

__all__ = ["saved_tensors_hooks", "save_on_cpu", "disable_saved_tensors_hooks", "current_hooks"]

_state = threading.local()


def _stack() -> list:
    stack = getattr(_state, "hooks", None)
    if stack is None:
        stack = _state.hooks = []
    return stack


def _disabled() -> list:
    messages = getattr(_state, "disabled", None)
    if messages is None:
        messages = _state.disabled = []
    return messages


def current_hooks():
    """The innermost active `(pack_hook, unpack_hook)`, or None."""
    stack = _stack()
    return stack[-1] if stack else None


class saved_tensors_hooks:  # noqa: N801 (torch's name)
    """Within this context, values saved for backward go through `pack_hook` when saved
    and through `unpack_hook` when the backward reads them."""

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook, self.unpack_hook = pack_hook, unpack_hook

    def __enter__(self):
        disabled = _disabled()
        if disabled:
            raise RuntimeError(disabled[-1])
        _stack().append((self.pack_hook, self.unpack_hook))
        return self

    def __exit__(self, *exc):
        _stack().pop()
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
        _disabled().pop()
        return False
