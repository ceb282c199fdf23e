"""The function transforms of API.md §1: grad, value_and_grad, vjp, jvp, jacobian,
hessian, source.

This is the public face: it checks and normalises arguments and picks the variant a
call runs. A transform returns a plain function. Its first call with arguments of
new shapes looks the generated module for those shapes up or compiles it (the
pipeline: srcgrad.pipeline.modules), and from then on a tuple of argument shapes
picks the generated function: no per-call source inspection or signature binding
(DESIGN decision 11). The generated function has the user function's own
parameters and defaults, so Python binds the arguments.
"""

from __future__ import annotations

import functools
import inspect
import sys
from types import FunctionType

import numpy

from srcgrad import arguments, contexts
from srcgrad.codegen.cache import default_cache
from srcgrad.codegen.loader import compile_module, render_dispatcher  # not emit: a hit renders nothing else
from srcgrad.digest import sha256
from srcgrad.errors import (
    CompileError,
    ProbeFailed,
    at_user_call,
    hide_internal_frames,
    note_user_call,
    note_user_line,
)
from srcgrad.pipeline import modules  # (no frontend, no IR: a disk-cache hit compiles nothing)


def _normalize_wrt(fn, wrt) -> tuple:
    """(parameter indices, single) for `wrt` given as an int, a name, or a tuple of them."""
    params = [p for p in inspect.signature(fn).parameters.values()]
    names_ = [p.name for p in params]
    single = not isinstance(wrt, (tuple, list))
    items = [wrt] if single else list(wrt)
    if not items:
        raise ValueError("wrt must name at least one argument")
    indices = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (int, str)):
            raise TypeError(f"wrt must be an int, an argument name, or a tuple of them; got {item!r}")
        if isinstance(item, str):
            if item not in names_:
                raise ValueError(f"wrt={item!r}: {fn.__name__}() has no argument named {item!r} "
                                 f"(it has {', '.join(names_)})")
            indices.append(names_.index(item))
        else:
            if not -len(names_) <= item < len(names_):
                raise ValueError(f"wrt={item}: {fn.__name__}() has {len(names_)} arguments")
            indices.append(item % len(names_))
    return tuple(indices), single


class _Dispatch:
    """The function a transform returns, and the variants behind it.

    The returned object is a real Python function with the user function's
    signature whose code is generated (srcgrad.codegen.loader.render_dispatcher): it
    compares each argument's shape (or, for Python scalars, its class) with those of
    the variant used last and calls it directly; a miss looks the variant for the new
    shapes up (compiling it once) and gives the function its guards. While saved-tensor hooks or
    `allow_mutation_on_saved_tensors` are active every call misses (Note [Modes the
    guards test] in srcgrad.contexts) and binds no guards.
    """

    def __init__(self, fn, compiled):
        self.fn, self.compiled = fn, compiled
        self.variants: dict = {}  # guard values -> generated function
        self.signature = inspect.signature(fn)
        plain = all(p.kind is p.POSITIONAL_OR_KEYWORD for p in self.signature.parameters.values())
        self.params = list(self.signature.parameters) if plain else None
        self.globals = {"_miss": self.miss}
        # until its first call, the function misses with any arguments: one code object
        # for every transform (no compile per transform), its signature the user's by
        # `__wrapped__`; the first call binds the arguments and gives it the guards' code
        self.function = FunctionType(_unbound.__code__, self.globals, _unbound.__name__)
        # the guards' code, swapped in later, declares the user's parameters; their defaults
        # live on the function, not the code, so they are set here, once, for every code
        self.function.__defaults__ = tuple(p.default for p in self.signature.parameters.values()
                                           if p.default is not p.empty) or None
        if self.params is None:  # *args / keyword-only: the tracer rejects these; say so on call
            self.function = self._function(guards=(), impl=None)
        self.codes: dict = {}  # a variant's function -> the dispatcher code calling it

    def _function(self, guards, impl):
        if self.params is None:  # *args / keyword-only: the tracer rejects these; say so on call
            def function(*args, **kwargs):
                return self.miss(*args, **kwargs)
            return function
        # (the parameters without their defaults: only the code is kept, and the returned
        # function holds the defaults, set in __init__)
        name = self.fn.__name__ if self.fn.__name__.isidentifier() else "_lambda"  # `<lambda>`
        text = render_dispatcher(name, self.params, self.params, list(guards), impl)
        code = _dispatcher_code(text, f"<srcgrad dispatch {self.fn.__qualname__}>")
        namespace = self.globals
        exec(code, namespace)  # noqa: S102 (our own generated text)
        return namespace.pop(name)

    def miss(self, *args, **kwargs):
        try:
            return self._miss(*args, **kwargs)
        except CompileError as err:  # the user's line, not the compiler's frames under it
            raise hide_internal_frames(at_user_call(err, self.compiled.kind)) from None

    def _miss(self, *args, **kwargs):
        if kwargs or len(args) != len(self.signature.parameters):
            try:
                bound = self.signature.bind(*args, **kwargs)
            except TypeError as err:  # name the function and what it takes
                raise arguments.call_error(self.compiled.kind, self.fn, args, kwargs, err) from None
            bound.apply_defaults()
            args = bound.args
        arguments.check_float_arguments(self.compiled.kind, self.fn, args, self.compiled.wrt)
        if self.compiled.stale():  # a global or helper it baked in was rebound: recompile
            self.variants.clear(), self.compiled.forget()
        if self.compiled.kind in ("grad", "value_and_grad") and contexts.current_hooks() is not None:
            return self._under_hooks(args)  # never bound to the guards: every call comes here
        mode = modules.mutation_allowed()
        if arguments.any_container(args):  # containers and records: no fast guard
            from srcgrad.ir import tree as pytree

            leaves, trees = pytree.flatten_args(args)
            key = ("tree", trees, tuple([modules.guard_value(a) for a in leaves]), mode)
            impl = self.variants.get(key)
            if impl is None:
                impl = self.variants[key] = self.compiled.specialized_tree(args, trees, key)
            return impl(*args)
        key = tuple([modules.guard_value(a) for a in args])
        impl = self.variants.get((key, mode))
        if impl is None:
            known = None
            try:
                impl = self.variants[key, mode] = self.compiled.specialized(args, key)
            except ProbeFailed as failed:  # these arguments make the function itself fail: let
                known = failed.error  # the generic code raise it from a generated line (outside
            if impl is None:  # this except), or raise it where that code does not compile
                try:
                    entry = self.compiled.entry()
                except CompileError:
                    if known is None:
                        raise
                    raise note_user_call(known, self.compiled.kind) from None
                try:
                    return entry(*args)
                except Exception as err:
                    if isinstance(err, TypeError):  # (a non-scalar output: the line that asked)
                        note_user_call(err, self.compiled.kind)
                    raise note_user_line(err) from None
        if not contexts.SPECIAL_MODES[0]:  # (in one, every call comes here: Note [Modes the guards test])
            self._retarget(key, impl)
        return impl(*args)

    def _under_hooks(self, args):
        """grad / value_and_grad while saved-tensor hooks are active: through `sg.vjp`'s
        hook variant, whose forward packs each value the backward reads and whose
        backward unpacks it (DESIGN decision 6), so every transform honours the hooks
        and `sg.grad` agrees with `sg.vjp` under them. The guards test that no hooks are
        active (Note [Modes the guards test]), so the fast path never skips this."""
        c = self.compiled
        result = vjp(self.fn, *args, has_aux=c.has_aux)
        (value, vjp_fn), aux = (result[:2], result[2]) if c.has_aux else (result, None)
        every = vjp_fn(numpy.ones_like(value))
        grads = tuple(every[i] for i in c.wrt)
        grads = grads[0] if c.single else grads
        if c.kind == "value_and_grad":
            return ((value, aux), grads) if c.has_aux else (value, grads)
        return (grads, aux) if c.has_aux else grads

    # Note [Guards another thread may be running]
    # Retargeting swaps the returned function's code while another thread may be inside
    # the old code, between its guards and its call. So nothing the old code reads is
    # ever rebound: each variant's guard values and function are globals of names of
    # its own (`_g0_1`, `_impl_1`: written once, when the variant first gets guards),
    # and the swap of `__code__` is one step. Rebinding shared names (`_g0`, `_impl`)
    # let a thread pass the new shapes' guards and call the old shapes' variant, whose
    # constants (a mean's 1/n) were another shape's.
    def _retarget(self, key, impl):
        """Make the guards of the returned function those of `key`'s variant (`impl`)."""
        if self.params is None:
            return
        code = self.codes.get(impl)
        if code is None:
            tag = f"_{len(self.codes)}"
            guards = modules.guard_tests(self.params, key, self.compiled.bindings, self.globals, tag)
            self.globals[f"_impl{tag}"] = impl
            code = self.codes[impl] = self._function(guards, f"_impl{tag}").__code__
        self.function.__code__ = code


def _dispatcher_code(text: str, filename: str):
    """The code of a dispatcher's text, compiled once and then kept in the disk cache
    beside the modules, where a later process reads it (compiling it was a fifth of a
    millisecond of a disk-cache hit's first call: issue 15). Its code file is checked
    against the text and the name (Note [Cache file format]), so a key's collision
    only costs a compile."""
    key = "dispatch-" + sha256(f"{filename}\0{text}".encode()).hexdigest()[:40]
    return default_cache().code(key, text, filename, compile_module)


def compiled_transforms():
    """srcgrad.pipeline.vjp_jvp, for sg.vjp and sg.jvp called inside compiled code: the
    tracer (srcgrad.frontend.transforms) sits below the pipeline and asks through api."""
    from srcgrad.pipeline import vjp_jvp  # (a compile's only)

    return vjp_jvp


def _unbound(*args, **kwargs):
    return _miss(*args, **kwargs)  # noqa: F821 (a global of each transform's own namespace)


def _transform(fn, kind: str, wrt, has_aux: bool, backend=None):
    fn = arguments.plain_function(fn)  # functools.partial: a function of its open parameters
    indices, single = _normalize_wrt(fn, wrt)
    compiled = modules.Compiled(fn, kind, indices, single, has_aux)
    if backend is not None:
        compiled.backend_option = _backend_option(backend)
    transformed = _Dispatch(fn, compiled).function
    functools.update_wrapper(transformed, fn)
    transformed.__srcgrad__ = compiled
    transformed.__wrapped__ = fn
    transformed.__name__ = f"{kind}_{fn.__name__}"
    return transformed


def grad(f=None, wrt=0, *, has_aux=False, backend=None):
    """The gradient of scalar `f` w.r.t. argument(s) `wrt` (API.md §1). Usable as `@grad`.
    `backend="numba"`: each shape-specialised variant compiled by numba where it can be
    (Note [The numba backend]; `sg.explain` says which)."""
    if f is None:
        return lambda fn: grad(fn, wrt, has_aux=has_aux, backend=backend)
    return _transform(f, "grad", wrt, has_aux, backend)


def value_and_grad(f=None, wrt=0, *, has_aux=False, backend=None):
    """`(value, grads)` of scalar `f` (`((value, aux), grads)` with has_aux)."""
    if f is None:
        return lambda fn: value_and_grad(fn, wrt, has_aux=has_aux, backend=backend)
    return _transform(f, "value_and_grad", wrt, has_aux, backend)


def _backend_option(backend):
    if backend != "numba":
        raise ValueError(f"backend={backend!r}: srcgrad's transforms take backend=None (the "
                         "arguments' array namespace) or backend='numba'")
    from srcgrad.pipeline import numba_variants

    numba_variants.require()  # an ImportError naming the extra, at the transform, not a call
    return backend


# function -> its guarded plain sg.vjp call, which answers None for arguments unlike
# those of the call that bound it (Note [The plain sg.vjp call] in srcgrad.pipeline.vjp_jvp)
_PLAIN_VJP: dict = {}


def vjp(f, *primals, has_aux=False, backend=None):
    """`(out, vjp_fn)`: `vjp_fn(cotangent)` returns one gradient per primal, nested like
    the primal when it is a tuple, list or dict of arrays. With `has_aux`, `f` returns
    `(out, aux)` and the result is `(out, vjp_fn, aux)` (aux is not differentiated).

    The saved-tensor hooks active now (`sg.autograd.graph.saved_tensors_hooks`) pack
    each array the backward keeps (what custom Functions save, and what the derivative
    formulas read); `vjp_fn` unpacks it with the same pair. A forward run
    inside `allow_mutation_on_saved_tensors` needs its `vjp_fn` run inside it too.
    `backend="numba"`: forward and backward compiled by numba where it can.
    """
    if backend is not None:
        backend = _backend_option(backend)
    if not has_aux and backend is None:
        guarded = _PLAIN_VJP.get(f)
        if guarded is not None:
            result = guarded(primals)
            if result is not None:
                return result
    from srcgrad.pipeline import vjp_jvp  # (not on a gradient's disk-cache hit: issue 15)

    try:
        if _is_jacobian(f):  # Note [Transforms of a Jacobian]
            from srcgrad import jacobian_transforms

            return jacobian_transforms.vjp(f, primals, has_aux)
        return vjp_jvp.vjp(f, primals, has_aux, _PLAIN_VJP, backend=backend)
    except CompileError as err:  # one naming no line (sg.vjp of a Jacobian): the user's call
        raise hide_internal_frames(at_user_call(err, "vjp")) from None


def jvp(f, primals, tangents, *, has_aux=False, backend=None):
    """`(out, tangent_out)`: `f(*primals)` and its directional derivative along `tangents`
    (one per primal, of the same structure and shapes). With `has_aux`, `f` returns
    `(out, aux)` and the result is `(out, tangent_out, aux)`.

    Forward mode: one pass of generated code computes both, with no reverse pass.
    `out` and `tangent_out` have the structure of `f`'s result. `backend="numba"`: that
    pass compiled by numba where it can.
    """
    if backend is not None:
        backend = _backend_option(backend)
    from srcgrad.pipeline import vjp_jvp  # (not on a gradient's disk-cache hit: issue 15)

    try:
        if _is_jacobian(f):  # Note [Transforms of a Jacobian]
            from srcgrad import jacobian_transforms

            return jacobian_transforms.jvp(f, primals, tangents, has_aux)
        return vjp_jvp.jvp(f, primals, tangents, has_aux, backend)
    except CompileError as err:  # one naming no line (sg.jvp of a Jacobian): the user's call
        raise hide_internal_frames(at_user_call(err, "jvp")) from None



def _is_jacobian(f) -> bool:
    """Whether sg.jacobian or sg.hessian returned `f` (none has, if their module is not
    imported yet: no import on sg.vjp's path)."""
    module = sys.modules.get("srcgrad.jacobians")
    return module is not None and isinstance(f, module.Jacobian)


def jacobian(f, wrt=0, *, mode="auto", chunk_size=None, backend=None):
    """A function returning the Jacobian of `f` w.r.t. argument(s) `wrt`, shape
    `out.shape + arg.shape` (a tuple over `wrt` when it is a tuple; nested like
    `f`'s result when that is a tuple, list or dict).

    `mode="reverse"` seeds the backward with every output element, `"forward"` the
    forward mode with every input element, in one batched pass (Note [Batching]);
    `"auto"` picks the one with fewer seeds. `chunk_size` bounds the seeds per pass.
    `backend="numba"`: one pass per seed, each by sg.vjp or sg.jvp compiled by numba.
    """
    from srcgrad import jacobians  # the batching pass: imported when a Jacobian is asked for

    return jacobians.Jacobian(f, *_normalize_wrt(f, wrt), mode, chunk_size,
                              backend=backend and _backend_option(backend))


def hessian(f, wrt=0, *, chunk_size=None, backend=None):
    """A function returning the Hessian of scalar `f`, by forward-over-reverse: the
    batched forward mode of the gradient. For a tuple `wrt`, `H[i][j]` is the block
    for arguments `wrt[i]` and `wrt[j]`. `backend="numba"`: one forward pass of the
    gradient per seed, compiled by numba."""
    from srcgrad import jacobians

    return jacobians.Jacobian(grad(f, wrt), *_normalize_wrt(f, wrt), "forward", chunk_size,
                              of=f, hooked_mode="reverse", backend=backend and _backend_option(backend))


def vmap(f, in_axes=0, out_axes=0):
    """`f` mapped over a batch axis of its arguments, JAX's semantics: one generated
    function over the batch (Note [Vmap as batching] in srcgrad.pipeline.vmap)."""
    from srcgrad import vmapping  # the batching pass: imported when a vmap is asked for

    return vmapping.VMapped(f, in_axes, out_axes)


def source(g) -> str:
    """The generated Python source behind a function a transform returned."""
    compiled = getattr(g, "__srcgrad__", None)
    if compiled is None:
        raise TypeError(f"sg.source: {g!r} was not returned by a srcgrad transform")
    if getattr(compiled, "module_source", None) is None:  # not called yet: the generic variant
        compiled.load()
    return compiled.module_source  # else the variant that ran last


def explain(g) -> str:
    """A short text: what a transform compiled (its variants), for which backend, and
    where numba's was not taken, why (Note [The numba backend])."""
    compiled = getattr(g, "__srcgrad__", None)
    if compiled is None:
        raise TypeError(f"sg.explain: {g!r} was not returned by a srcgrad transform")
    if hasattr(compiled, "explain"):  # a jacobian, hessian or vmap: its plans say
        return compiled.explain()
    miss = getattr(g, "__globals__", {}).get("_miss")
    variants = getattr(getattr(miss, "__self__", None), "variants", {})
    fn = compiled.fn
    where = f"{getattr(fn, '__code__', None) and fn.__code__.co_filename}:" \
            f"{getattr(getattr(fn, '__code__', None), 'co_firstlineno', '?')}"
    lines = [f"{compiled.kind} of {fn.__qualname__} ({where}), backend: "
             + (compiled.backend_option or "the arguments' array namespace (NumPy for NumPy arrays)"),
             f"variants compiled: {len(variants)} (one per argument shapes, dtypes and classes)"]
    records = getattr(compiled, "numba_records", {})
    lines += [f"  {record.line()}" for record in records.values()]
    if compiled.backend_option == "numba" and len(variants) > len(records):
        lines.append(f"  {len(variants) - len(records)} other: NumPy (arguments that are not NumPy "
                     "arrays and numbers, containers, or shapes the function fails on)")
    return "\n".join(lines)


def cache_clear() -> None:
    """Empty the in-memory and on-disk module caches."""
    modules.clear()
    _PLAIN_VJP.clear()
    default_cache().clear()


def emit_standalone(func, wrt=None, mode="reverse", optimize=True, backend="numpy", args=None) -> str:
    """A module that runs without srcgrad: `grad_<func>` (mode "reverse"), `<func>_jvp`
    ("forward") or both (for `srcgrad emit`). `wrt` defaults to every argument.
    `backend`: the namespace it imports, "numpy", "cupy" or "array-api". `args`: example
    arguments, which give dict, list, tuple and record arguments their structure
    (Note [Emitted container arguments] in srcgrad.pipeline.standalone)."""
    if wrt is None:
        indices, single = tuple(range(len(inspect.signature(func).parameters))), False
    else:
        if isinstance(wrt, (tuple, list)):  # `--wrt x`, one name: its gradient bare
            wrt = tuple(wrt) if len(wrt) > 1 else wrt[0]
        indices, single = _normalize_wrt(func, wrt)  # an int or a name, as sg.grad reads it
    from srcgrad.pipeline.standalone import standalone_module  # (`srcgrad emit`'s only)

    return standalone_module(func, indices, single, mode, optimize, namespace=backend, args=args)

