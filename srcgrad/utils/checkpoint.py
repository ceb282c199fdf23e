"""`sg.utils.checkpoint`: activation checkpointing, torch.utils.checkpoint's two variants.

Note [Checkpointing by saved-tensor hooks]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The non-reentrant variant (the default here, as API.md fixes it) is torch's: the
forward runs `fn` once under a `saved_tensors_hooks` pair whose pack hook keeps only a
handle (the saved value's position in the order of saving) and no array. The first
unpack in backward runs `fn` again on the same inputs, with grad enabled and sg's
random generator put back where it was at the forward, under a second pair of hooks
that collects what each op saves, in the same order; each handle then reads its
counterpart. The recomputed values are connected to the same inputs (arguments and
tensors `fn` closes over), so `grad`, `backward(inputs=...)` and create_graph backward
work as without the checkpoint, and closed-over parameters receive their gradients.
A recomputation that saves a different number of values raises torch's CheckpointError;
with early stop (the default) the recomputation stops once it has saved every value
the forward saved. What a node keeps besides its saved values (srcgrad's nodes keep
their operands) is still kept: the saving is the arrays the ops computed to save.

The reentrant variant is a custom Function: forward under no_grad, backward recomputes
under enable_grad on detached inputs and runs `backward` on the recomputed outputs
(torch's; it accumulates closed-over parameters' `.grad` itself, so `autograd.grad`
cannot reach them).
"""

from __future__ import annotations

import contextlib

from srcgrad.autograd import grad_mode
from srcgrad.autograd.function import Function
from srcgrad.autograd.graph import saved_tensors_hooks
from srcgrad.autograd.tensor import _RNG, Tensor

__all__ = ["checkpoint", "checkpoint_sequential", "set_checkpoint_early_stop", "CheckpointError"]


class CheckpointError(RuntimeError):
    pass


_EARLY_STOP = [True]


@contextlib.contextmanager
def set_checkpoint_early_stop(enable: bool):
    """Within this context, non-reentrant recomputations stop (or not) once they have
    recomputed every saved value (torch's; early stop is the default)."""
    before = _EARLY_STOP[0]
    _EARLY_STOP[0] = bool(enable)
    try:
        yield
    finally:
        _EARLY_STOP[0] = before


class _Stop(Exception):
    """Raised inside a recomputation once it has saved everything the forward saved."""


class _Handle:
    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index


class _Rng:
    """sg's generator state at the forward, put back around the recomputation."""

    def __init__(self, preserve):
        self.state = _RNG[0].bit_generator.state if preserve else None

    @contextlib.contextmanager
    def replay(self):
        if self.state is None:
            yield
            return
        now = _RNG[0].bit_generator.state
        _RNG[0].bit_generator.state = self.state
        try:
            yield
        finally:
            _RNG[0].bit_generator.state = now


class _Frame:
    def __init__(self, fn, args, kwargs, rng, early_stop, check):
        self.fn, self.args, self.kwargs, self.rng = fn, args, kwargs, rng
        self.early_stop, self.check = early_stop, check
        self.count = 0  # values saved by the forward
        self.recomputed = None

    def pack(self, x):
        handle = _Handle(self.count)
        self.count += 1
        return handle

    def unpack(self, handle):
        if self.recomputed is None:
            self.recompute()
        return self.recomputed[handle.index]

    def recompute(self):
        values = []

        def pack(x):
            values.append(x)
            if self.early_stop and len(values) == self.count:
                raise _Stop
            return len(values) - 1

        stopped = False
        with self.rng.replay(), grad_mode.enable_grad(), saved_tensors_hooks(pack, values.__getitem__):
            try:
                self.fn(*self.args, **self.kwargs)
            except _Stop:
                stopped = True
        if not stopped and len(values) != self.count and self.check != "none":
            raise CheckpointError(
                "torch.utils.checkpoint (srcgrad: sg.utils.checkpoint): A different number of "
                "tensors was saved during the original forward and recomputation.\n"
                f"Number of tensors saved during forward: {self.count}\n"
                f"Number of tensors saved during recomputation: {len(values)}.\n")
        self.recomputed = values


def checkpoint(function, *args, use_reentrant=False, preserve_rng_state=True, context_fn=None,
               determinism_check="default", debug=False, early_stop=True, **kwargs):
    """`function(*args, **kwargs)` without keeping what its ops save for backward: the
    backward recomputes it (Note [Checkpointing by saved-tensor hooks])."""
    if determinism_check not in ("default", "none"):
        raise ValueError("determinism_check should be one of ['default', 'none'], but got "
                         f"{determinism_check}")
    if use_reentrant:
        if kwargs:
            raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
        if context_fn is not None:
            raise ValueError("Passing `context_fn` or `debug` is only supported when "
                             "use_reentrant=False.")
        return _Reentrant.apply(function, preserve_rng_state, *args)
    frame = _Frame(function, args, kwargs, _Rng(preserve_rng_state),
                   early_stop and _EARLY_STOP[0], determinism_check)
    forward_ctx = contextlib.nullcontext() if context_fn is None else context_fn()[0]
    with forward_ctx, saved_tensors_hooks(frame.pack, frame.unpack):
        return function(*args, **kwargs)


class _Reentrant(Function):
    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, *args):
        ctx.run_function = run_function
        ctx.rng = _Rng(preserve_rng_state)
        ctx.inputs = args
        with grad_mode.no_grad():
            return run_function(*args)

    @staticmethod
    def backward(ctx, *grads):
        from srcgrad.autograd.engine import backward

        inputs = [a.detach().requires_grad_(a.requires_grad) if isinstance(a, Tensor) else a
                  for a in ctx.inputs]
        with ctx.rng.replay(), grad_mode.enable_grad():
            outputs = ctx.run_function(*inputs)
        if isinstance(outputs, Tensor):
            outputs = (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grads)
                 if isinstance(o, Tensor) and o.requires_grad and g is not None]
        if not pairs:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is not "
                               "necessary")
        backward([o for o, _ in pairs], [g for _, g in pairs])
        return (None, None) + tuple(a.grad if isinstance(a, Tensor) else None for a in inputs)


def checkpoint_sequential(functions, segments, input, use_reentrant=False, **kwargs):
    """torch's: the functions in `segments` runs, each but the last checkpointed."""
    functions = list(functions)

    def run(start, end):
        def forward(x):
            for j in range(start, end + 1):
                x = functions[j](x)
            return x

        return forward

    size = len(functions) // segments
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant, **kwargs)
    return run(end + 1, len(functions) - 1)(input)
