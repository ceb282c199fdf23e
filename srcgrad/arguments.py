"""Checks of the arguments a transform is called with, before anything is compiled."""

from __future__ import annotations

import functools
import inspect
import types

import numpy

# srcgrad.ir.tree (containers) is imported where an argument is one: a call on arrays and
# floats, a disk-cache hit's first call among them, does not import the IR (issue 15)
_PLAIN = frozenset({numpy.ndarray, float, int, numpy.float64, numpy.float32})


def plain_function(fn):
    """What a transform compiles for `fn`: `fn`, or for a functools.partial a plain
    function with the parameters it leaves open (srcgrad.frontend.parse.partial_function)."""
    if _user_method(fn):  # `sg.grad(sim.loss)`: `self` a constant (Note [Bound methods])
        fn = functools.partial(fn.__func__, fn.__self__)
    code = getattr(fn, "__code__", None)
    if code is not None and (code.co_kwonlyargcount or code.co_flags & 0x08) \
            and not code.co_flags & 0x04:  # `def f(x, *, s=2.0)`, `def f(x, **kw)`
        from srcgrad.frontend.parse import keyword_function  # (gast: not on a disk-cache hit)

        return keyword_function(fn)
    if not isinstance(fn, functools.partial):
        return fn
    from srcgrad.frontend.parse import partial_function  # (gast: not on a disk-cache hit)

    return partial_function(fn)


def _user_method(fn) -> bool:
    """A method bound to an object (not a class) whose function is plain Python."""
    func = getattr(fn, "__func__", None)
    return isinstance(fn, types.MethodType) and isinstance(func, types.FunctionType) \
        and not isinstance(fn.__self__, type) and not func.__module__.startswith("srcgrad")


def bound_args(fn, args: tuple, transform: str = "srcgrad") -> tuple:
    """`args` with `fn`'s defaults after them (`fn`'s positional arguments), without
    inspect.signature where `args` are all of them already: a first call's (issue 15)."""
    code = getattr(fn, "__code__", None)
    if code is None or code.co_argcount != len(args) or code.co_flags & 0x04:  # (*args)
        try:
            full = inspect.signature(fn).bind(*args)
        except TypeError as err:
            raise call_error(transform, fn, args, {}, err) from None
        full.apply_defaults()
        args = full.args
    return tuple(args)


def check_arity(transform: str, fn, args: tuple) -> None:
    """A TypeError naming `fn` and what it takes where a transform of it is called with
    positional `args` that `fn` cannot take (the common call is checked without
    inspect.signature: issue 15)."""
    code = getattr(fn, "__code__", None)
    if code is not None and code.co_argcount == len(args) and not code.co_flags & 0x0C \
            and not code.co_kwonlyargcount:
        return
    try:
        inspect.signature(fn).bind(*args)
    except TypeError as err:
        raise call_error(transform, fn, args, {}, err) from None
    except ValueError:  # no signature (a builtin): the call itself says what is wrong
        return


def call_error(transform: str, fn, args, kwargs, err: TypeError) -> TypeError:
    """`err` (inspect's "too many positional arguments") as a TypeError that names the
    function, its parameters and how many arguments the transform's call gave it."""
    name = getattr(fn, "__name__", "f")
    try:
        signature = f"{name}{inspect.signature(fn)}"
    except (TypeError, ValueError):
        signature = f"{name}()"
    given = f"{len(args)} positional argument{'' if len(args) == 1 else 's'}"
    if kwargs:
        given += f" and the keyword{'' if len(kwargs) == 1 else 's'} {', '.join(kwargs)}"
    return TypeError(f"{transform}: {signature} was called with {given}: {err}; pass the "
                     f"arguments {signature} takes")


def check_float_arguments(transform: str, fn, args, indices) -> None:
    """A TypeError naming the argument when a differentiated argument (or a leaf of it)
    is an integer, a bool or complex: the derivative of a function of integers is not
    defined, and silently differentiating them as floats hides a bug (JAX and torch refuse
    too). Complex arguments would need the conjugate convention, which srcgrad does not
    implement yet."""
    for i in indices:
        for leaf in _leaves(args[i]):
            kind = leaf.dtype.kind if leaf.__class__ is numpy.ndarray else \
                numpy.result_type(leaf).kind if _numeric(leaf) else None
            if kind in ("i", "u", "b"):
                what = (f"an integer array ({numpy.result_type(leaf)})" if hasattr(leaf, "dtype")
                        else f"the {type(leaf).__name__} {leaf!r}")
                raise TypeError(f"{transform}: argument `{_name(fn, i)}` is {what}; srcgrad "
                                "differentiates floating-point arguments only (pass a float, "
                                "or x.astype(float), or leave it out of wrt)")
            if kind == "c":
                raise TypeError(f"{transform}: argument `{_name(fn, i)}` is complex; complex "
                                "differentiation is not supported yet")
    # one not differentiated too: a real formula run on a complex constant is a plausible
    # wrong gradient (d/dx |x * z| came out complex; boundary fuzz seed 2600360, issue 28)
    check_not_complex(transform, fn, args)


def check_not_complex(transform: str, fn, args, what: str = "argument") -> None:
    """A TypeError naming the first complex argument (or leaf of one) of `sg.vjp` or
    `sg.jvp` (`what`: "argument", or "tangent" for jvp's tangents), as
    check_float_arguments refuses them for the other transforms: the derivative table has
    no conjugate convention yet, and a real formula on complex values is a plausible
    wrong answer (`sg.jvp` of `np.abs(z)` gave a complex tangent for a real output,
    issue 28). Integers stay accepted here: sg.vjp and sg.jvp treat them as constants."""
    for i, a in enumerate(args):
        for leaf in _leaves(a):
            if leaf.__class__ is complex or getattr(getattr(leaf, "dtype", None), "kind", "") == "c":
                name = _name(fn, i) if i < _arity(fn) else str(i)
                raise TypeError(f"{transform}: {what} `{name}` is complex; complex "
                                "differentiation is not supported yet")


def _arity(fn) -> int:
    try:
        return len(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return 0


def _name(fn, i: int) -> str:
    """The name of `fn`'s parameter `i`, for a message (the signature is read only then:
    inspect.signature is a tenth of a millisecond of every first call, issue 15)."""
    return list(inspect.signature(fn).parameters)[i]


def _leaves(value) -> list:
    if value.__class__ in _PLAIN:
        return [value]
    from srcgrad.ir import tree as pytree

    return pytree.flatten(value)[0]


def any_container(args) -> bool:
    """Whether some argument is a tuple, list, dict or record (srcgrad.ir.tree.is_node)."""
    for a in args:
        if a.__class__ not in _PLAIN:
            from srcgrad.ir import tree as pytree

            if pytree.is_node(a):
                return True
    return False


def _numeric(value) -> bool:
    return isinstance(value, (int, float, complex, numpy.ndarray, numpy.generic))




def shape_of(value) -> tuple:
    """`numpy.shape(value)`, without converting an array or a float (this runs per
    argument of every sg.vjp / sg.jvp call, and numpy.shape copies a float into an array)."""
    cls = value.__class__
    if cls is numpy.ndarray:
        return value.shape
    if cls is float or cls is int:
        return ()
    return numpy.shape(value)


def check_cotangents(cotangent, out_tree, out_leaves, specialized: bool) -> list:
    """The leaves of `vjp_fn`'s `cotangent`, checked against the output it is the
    cotangent of: the same structure, each leaf the same shape (a clear error, never a
    gradient of the wrong shape). A variant compiled for arrays gets arrays."""
    from srcgrad.ir import tree as pytree

    cts, ct_tree = pytree.flatten(cotangent)
    if ct_tree != out_tree:
        raise ValueError(f"vjp_fn: the cotangent's structure {pytree.describe(ct_tree)} does "
                         f"not match the output's {pytree.describe(out_tree)}")
    for k, (ct, o) in enumerate(zip(cts, out_leaves)):
        if shape_of(ct) != shape_of(o):
            where = f" {k}" if len(cts) > 1 else ""
            raise ValueError(f"vjp_fn: cotangent{where} has shape {numpy.shape(ct)}, but the "
                             f"output{where} has shape {numpy.shape(o)}")
    cts = [_float_cotangent(c, o) for c, o in zip(cts, out_leaves)]
    if specialized:  # its backward was compiled for arrays of the outputs' shapes
        cts = [c if c.__class__ is numpy.ndarray else numpy.asarray(c) for c in cts]
    return cts


def _float_cotangent(ct, out):
    """An integer or bool cotangent cast to its output's floating dtype, as torch casts
    a `backward(gradient)` of another dtype to the output's (observed in torch 2.x:
    `sin(x).backward(torch.tensor([1, 2, 3]))` gives float64 gradients): integer
    arithmetic in the backward would otherwise give integer (truncated) gradients."""
    kind = ct.dtype.kind if ct.__class__ is numpy.ndarray else \
        "i" if isinstance(ct, (int, numpy.integer, numpy.bool_)) else \
        "c" if isinstance(ct, complex) or getattr(getattr(ct, "dtype", None), "kind", "") == "c" else "f"
    if kind == "c":  # as check_not_complex refuses a complex argument or tangent (issue 28)
        raise TypeError("vjp_fn: the cotangent is complex; complex differentiation is not "
                        "supported yet")
    if kind not in "iub":
        return ct
    dtype = numpy.result_type(out)
    dtype = dtype if dtype.kind in "fc" else numpy.dtype(numpy.float64)
    return numpy.asarray(ct, dtype=dtype) if ct.__class__ is numpy.ndarray else dtype.type(ct)
