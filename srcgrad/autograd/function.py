"""Custom autograd Functions (`sg.autograd.Function`), mirroring `torch.autograd.Function`.

A Function is a class with static `forward(ctx, *args)` and `backward(ctx, *grads)`
(or `vjp`), optionally `jvp(ctx, *tangents)` and the `setup_context(ctx, inputs,
output)` style (forward without `ctx`). It is used through `MyFn.apply(...)`:

* inside compiled code (`sg.grad`, `sg.vjp`, `sg.jvp` of a function calling it) the
  compiler parses the methods' sources and inlines them into the generated code,
  see Note [Custom Functions] in srcgrad.frontend.function;
* applied to `sg.Tensor`s, `apply` runs `forward` under no_grad and records a
  `<Class>Backward` node whose backward calls the user's `backward` (the ctx *is* that
  node, as in torch): srcgrad.autograd.custom, which registers itself in `RUNTIME`
  when the Tensor runtime is imported, so this module (which the compiler imports)
  never imports the runtime;
* outside both, on plain arrays, `apply` runs `forward` eagerly with a `FunctionCtx`
  and returns its outputs (no graph is recorded for plain arrays).

Error conditions and texts follow torch (spec/torch_semantics.md §5).
"""

from __future__ import annotations

import functools
import inspect
import warnings

import numpy

__all__ = ["Function", "FunctionCtx", "once_differentiable", "is_array", "RUNTIME"]


class _Runtime:
    """What the Tensor runtime (srcgrad.autograd.custom) registers when it is imported."""

    apply = None  # (cls, args, kwargs) -> outputs, or NotImplemented when no Tensor is an input
    once_differentiable = None  # (backward, ctx, args) -> the backward's result, torch's wrapping
    backward_class = None  # cls -> its `<Class>Backward` node class


RUNTIME = _Runtime()


def is_array(value) -> bool:
    """Whether `value` counts as a tensor for a Function (an array, not a Python number)."""
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)) and \
            not isinstance(value, numpy.generic):
        return False
    return isinstance(value, (numpy.ndarray, numpy.generic)) or (
        hasattr(value, "shape") and hasattr(value, "dtype"))


def once_differentiable(fn):
    """Mark a Function's `backward` as not differentiable again.

    In compiled code, differentiating the generated backward a second time is a
    CompileError ("trying to differentiate twice a function that was marked with
    @once_differentiable") where that second derivative would reach it. On Tensors
    the backward runs under no_grad and, when a gradient it was given requires grad,
    its results carry torch's `Error` node, which raises that text if reached.
    """

    @functools.wraps(fn)
    def wrapper(ctx, *args):
        if RUNTIME.once_differentiable is None:  # no Tensor runtime: plain arrays
            return fn(ctx, *args)
        return RUNTIME.once_differentiable(fn, ctx, args)

    wrapper._srcgrad_once_differentiable = True
    return wrapper


class FunctionCtx:
    """The `ctx` a Function's methods receive (eager path; the compiler has its own)."""

    def __init__(self, needs_input_grad=()):
        self.needs_input_grad = tuple(needs_input_grad)
        self.to_save = ()  # what save_for_backward received (None kept)
        self.saved_for_forward = ()
        self.dirty_tensors = ()
        self.non_differentiable = ()
        self.materialize_grads = True
        self._in_forward = True
        self._unpacked = None  # set by a runtime that packs saved values with hooks

    def save_for_backward(self, *tensors):
        for i, t in enumerate(tensors):
            if t is not None and not is_array(t):
                raise TypeError(f"save_for_backward can only save variables, but argument {i} "
                                f"is of type {type(t).__name__}")
        self.to_save = tensors  # the last call wins

    def save_for_forward(self, *tensors):
        if not all(t is None or is_array(t) for t in tensors):
            raise AssertionError("save_for_forward expects all arguments to be tensors; you "
                                 "should save non-tensors as attributes on ctx.")
        self.saved_for_forward = tensors

    def mark_dirty(self, *args):
        self.dirty_tensors = args

    def mark_non_differentiable(self, *args):
        self.non_differentiable = args

    def set_materialize_grads(self, value: bool):
        self.materialize_grads = bool(value)

    @property
    def saved_tensors(self) -> tuple:
        if self._in_forward:
            return ()
        if self._unpacked is not None:
            return self._unpacked()
        return tuple(self.to_save)


class _FunctionMeta(type):
    @property
    def _backward_cls(cls):
        """The class of this Function's backward nodes (`<Class>Backward`), as in torch."""
        return RUNTIME.backward_class(cls)

    def __call__(cls, *args, **kwargs):
        warnings.warn(f"{cls} should not be instantiated. Methods on autograd functions are all "
                      "static, so you should invoke them on the class itself. Instantiating an "
                      "autograd function will raise an error in a future version of PyTorch.",
                      DeprecationWarning, stacklevel=2)
        return super().__call__(*args, **kwargs)


class Function(metaclass=_FunctionMeta):
    """Base class of custom Functions: subclass it, define the static methods, call `apply`."""

    _srcgrad_function = True  # how the compiler recognises `MyFn.apply` (frontend.function)
    generate_vmap_rule = False
    # torch 2.14's: ctx.saved_tensors may be read once (then the references are dropped);
    # backward receives the gradients as one list it may empty (srcgrad.autograd.custom).
    clear_saved_tensors_on_access = False
    boxed_grads_call = False

    def __call__(self, *args, **kwargs):
        raise RuntimeError("Legacy autograd function with non-static forward method is deprecated. "
                           "Please use new-style autograd function with static forward method. "
                           "(Example: https://pytorch.org/docs/stable/autograd.html#torch.autograd.Function)")

    @staticmethod
    def forward(*args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom "
                                  "autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for your "
                                  "custom autograd.Function to use it with backward mode AD.")

    @staticmethod
    def vjp(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for your "
                                  "custom autograd.Function to use it with backward mode AD.")

    @staticmethod
    def jvp(ctx, *grad_inputs):
        raise NotImplementedError("You must implement the jvp function for custom "
                                  "autograd.Function to use it with forward mode AD.")

    @staticmethod
    def vmap(info, in_dims, *args):
        raise NotImplementedError("vmap is not supported by srcgrad")

    @classmethod
    def apply(cls, *args, **kwargs):
        """Run `forward` eagerly (outside compiled code) and return its outputs; on Tensors,
        record the backward node (srcgrad.autograd.custom)."""
        if RUNTIME.apply is not None:
            output = RUNTIME.apply(cls, args, kwargs)
            if output is not NotImplemented:
                return output
        output, _ = run_forward(cls, args, kwargs)
        return output


def uses_setup_context(cls) -> bool:
    return _overrides(cls, "setup_context")


def _overrides(cls, name) -> bool:
    return getattr(cls, name) is not getattr(Function, name)


def bind_inputs(cls, args, kwargs) -> tuple:
    """The forward's inputs, bound to its signature with defaults applied (no ctx)."""
    forward = inspect.unwrap(cls.forward)
    params = list(inspect.signature(forward).parameters.values())
    if not uses_setup_context(cls):
        params = params[1:]  # ctx
    sig = inspect.Signature(params)
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError:
        _raise_call_error(cls, args, kwargs)
        raise
    bound.apply_defaults()
    inputs = []
    for p in params:
        value = bound.arguments[p.name]
        if p.kind is p.VAR_POSITIONAL:
            inputs.extend(value)
        elif p.kind is p.VAR_KEYWORD:
            raise TypeError(f"{cls.__name__}.forward: **kwargs are not supported by apply")
        else:
            inputs.append(value)
    return tuple(inputs)


def _raise_call_error(cls, args, kwargs) -> None:
    """Python's own TypeError for calling a ctx-style forward with these arguments, as
    torch gives it (`F.forward() takes 1 positional argument but 2 were given`): an
    argument-count error is raised before the body runs. (A setup_context-style
    forward keeps the binding's error, torch's `missing a required argument: 'x'`.)"""
    if uses_setup_context(cls):
        return
    forward = inspect.unwrap(cls.forward)
    try:
        inspect.signature(forward).bind(None, *args, **kwargs)
    except TypeError:
        forward(None, *args, **kwargs)


def run_forward(cls, args, kwargs, ctx=None) -> tuple:
    """(output, ctx): `cls.forward` run on `args` with a FunctionCtx (either style).

    Checks what torch checks at the end of forward: dirty tensors are inputs that
    are returned; non-differentiable tensors are outputs.
    """
    check_forward(cls)
    inputs = bind_inputs(cls, args, kwargs)
    ctx = ctx if ctx is not None else FunctionCtx(needs_input_grad=[False] * len(inputs))
    return forward_with(cls, inputs, ctx), ctx


def check_forward(cls) -> None:
    if not _overrides(cls, "forward"):
        raise NotImplementedError("You must implement the forward function for custom "
                                  "autograd.Function.")


def forward_with(cls, inputs: tuple, ctx):
    """`cls.forward` on the bound `inputs` with `ctx` (either style), and torch's checks
    at the end of forward; the output as forward returned it."""
    if uses_setup_context(cls):
        output = cls.forward(*inputs)
        cls.setup_context(ctx, inputs, output)
    else:
        output = cls.forward(ctx, *inputs)
    ctx._in_forward = False
    outputs = output if isinstance(output, tuple) else (output,)
    _check_dirty(ctx, inputs, outputs)
    for t in ctx.non_differentiable:
        if not any(t is o for o in outputs):
            raise RuntimeError("mark_non_differentiable only accepts outputs of the forward")
    return output


def _check_dirty(ctx, inputs, outputs):
    for t in ctx.dirty_tensors:
        if not any(t is i for i in inputs):
            if getattr(t, "_base", None) is not None:  # a view of an intermediate: torch raises
                raise RuntimeError(_NOT_INPUT)
            warnings.warn(_NOT_INPUT, UserWarning, stacklevel=5)
        if not any(t is o for o in outputs):
            raise RuntimeError("Some elements marked as dirty during the forward method were not "
                               "returned as output. The inputs that are modified inplace must all "
                               "be outputs of the Function.")


_NOT_INPUT = ("ctx.mark_dirty() received a tensor that was not an input. Only input Tensors that "
              "have been mutated should be passed to ctx.mark_dirty().")
