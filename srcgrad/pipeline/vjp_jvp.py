"""sg.vjp's and sg.jvp's compiled forms, imported on their first call: a gradient's
disk-cache hit (srcgrad.startup.TRANSFORM_HIT) runs none of this.

`compiled_vjp` and `compiled_jvp` keep one `Compiled` (srcgrad.pipeline.modules) per
function; `vjp` and `jvp` are the bodies of srcgrad.api's, which check and flatten the
arguments and pick the variant; `source_function` is the function a transform of `f`
differentiates (a transform's output, a custom Function's `apply`).
"""

from __future__ import annotations

import functools
import inspect
import linecache

import numpy

from srcgrad import arguments, backend, contexts
from srcgrad.arguments import check_cotangents
from srcgrad.codegen.loader import load_module
from srcgrad.errors import CompileError, ProbeFailed, note_user_line
from srcgrad.pipeline import modules
from srcgrad.pipeline.modules import Compiled, _module, _programs, guard_value, mutation_allowed

_VJP: dict = {}  # function -> Compiled, so repeated sg.vjp(f, ...) calls compile once
_VJP_HOOKS: dict = {}  # function -> CompiledVjpHooks: the saved-tensor-hook variant


class CompiledVjpHooks(Compiled):
    """The variant of `sg.vjp` run while saved-tensor hooks are active: `f_fwd(pack_hook,
    ...)`, `f_bwd(unpack_hook, _saved, ...)` (Note [Saved-tensor hooks], srcgrad.passes.hooks)."""

    def __init__(self, fn, arg_trees=None):
        super().__init__(fn, "vjp", arg_trees=arg_trees)

    def options(self, shapes=None) -> tuple:
        return super().options(shapes) + ("saved_tensors_hooks",)

    def _generate(self, fs, key: str, args=None) -> tuple:  # args: a variant (vjp_variant), whose
        # layout facts decide views of computed values (Note [Layout facts])
        return _module(fs, key, _programs().vjp_program(fs, hooks=True, allow_mutation=mutation_allowed(),
                                                        args=args))


# Note [The plain sg.vjp call]
# Most calls of sg.vjp pass arrays and floats, with no hooks, no allow-mutation context
# and no aux, to a function returning one array. At small sizes the Python around the
# generated forward and backward (flattening trees, building a closure, checking the
# cotangent's structure) cost as much as they did, so that call takes a short path:
# the variant's forward runs at once and `vjp_fn` is a small object checking one shape.
# Once a plain function's call took it, srcgrad.api keeps a guarded call for the
# function (`guarded_call`), generated as sg.grad's dispatcher is: the next sg.vjp of
# that function with arguments of the same shapes, dtypes and classes, its bindings
# unchanged and no hook or allow-mutation context active (Note [Modes the guards
# test]), runs the variant's forward in one step, without importing this module.
_PLAIN_PRIMALS = frozenset({numpy.ndarray, float, numpy.float64})
_LEAF = ("leaf",)  # srcgrad.ir.tree.LEAF, whose module a plain call's hit does not import


def plain_vjp(f, primals, guards: dict | None = None):
    """`(out, vjp_fn)` of sg.vjp's plain call, or None when the call is not one.
    `guards`: srcgrad.api's table of guarded calls, where `f`'s is bound to this call's
    variant when `f` is a plain function (Note [The plain sg.vjp call])."""
    for p in primals:
        if p.__class__ not in _PLAIN_PRIMALS:
            return None
    fn = source_function(f, len(primals), shaped_args(f, primals))
    compiled = compiled_vjp(fn)
    leaves = [numpy.float64(p) if p.__class__ is float else p for p in primals]
    fwd, bwd, specialized = compiled.vjp_variant(leaves)
    if compiled.out_tree != _LEAF:
        return None
    if guards is not None and fn is f and not contexts.SPECIAL_MODES[0]:
        guards[f] = guarded_call(primals, fwd, bwd, specialized, compiled)
    outs, saved = fwd(*leaves)
    out = outs[0]
    return out, _PlainVjpFn(bwd, saved, out, specialized, compiled)


_GUARDED_CODES: dict = {}  # a guarded call's text -> its code (the text names no function)


def guarded_call(primals, fwd, bwd, specialized, compiled):
    """A function of sg.vjp's primals returning `(out, vjp_fn)` where they pass the
    guards of this variant, else None (Note [The plain sg.vjp call]): e.g.

        def plain_vjp(primals):
            if len(primals) == 2:
                p0, p1 = primals
                if p0.__class__ is _c0 and p0.shape == _g0 and ... and p1.__class__ is _g1 and ...:
                    outs, saved = _fwd(p0, _float64(p1))
                    out = outs[0]
                    return out, _vjp_fn(_bwd, saved, out, _specialized, _compiled)
            return None
    """
    params = [f"p{i}" for i in range(len(primals))]
    namespace = {"_fwd": fwd, "_bwd": bwd, "_specialized": specialized, "_compiled": compiled,
                 "_vjp_fn": _PlainVjpFn, "_float64": numpy.float64}
    tests = modules.guard_tests(params, [guard_value(p) for p in primals], compiled.bindings, namespace)
    leaves = [f"_float64({name})" if p.__class__ is float else name for name, p in zip(params, primals)]
    text = "\n".join([
        "def plain_vjp(primals):",
        f"    if len(primals) == {len(params)}:",
        f"        {''.join(name + ', ' for name in params)}= primals",
        f"        if {' and '.join(tests)}:",
        f"            outs, saved = _fwd({', '.join(leaves)})",
        "            out = outs[0]",
        "            return out, _vjp_fn(_bwd, saved, out, _specialized, _compiled)",
        "    return None", ""])
    code = _GUARDED_CODES.get(text)
    if code is None:
        code = _GUARDED_CODES[text] = compile(text, "<srcgrad plain sg.vjp>", "exec")
    exec(code, namespace)  # noqa: S102 (our own generated text)
    return namespace["plain_vjp"]


class _PlainVjpFn:
    """`vjp_fn` of a plain sg.vjp call: the backward of one array output."""

    __slots__ = ("bwd", "saved", "out", "shape", "specialized", "__srcgrad__")
    __name__ = "vjp_fn"  # as the general path's closure is named (gradcheck recognises it)
    # what inspect (srcgrad check, gradcheck) reads: one cotangent (`*extra` is for the error)
    __signature__ = inspect.Signature([inspect.Parameter(
        "cotangent", inspect.Parameter.POSITIONAL_OR_KEYWORD)])

    def __init__(self, bwd, saved, out, specialized, compiled):
        self.bwd, self.saved, self.out, self.specialized = bwd, saved, out, specialized
        self.shape = getattr(out, "shape", None)
        self.__srcgrad__ = compiled  # sg.source(vjp_fn)

    def __call__(self, cotangent, *extra):
        cls = cotangent.__class__
        if cls is numpy.ndarray and cotangent.shape == self.shape and not extra \
                and cotangent.dtype.kind == "f":
            return self.bwd(self.saved, cotangent)
        if extra:
            raise extra_cotangents(1 + len(extra), self.__srcgrad__)
        if cls is float and self.shape == ():
            return self.bwd(self.saved, numpy.asarray(cotangent) if self.specialized else cotangent)
        cts = check_cotangents(cotangent, _LEAF, (self.out,), self.specialized)
        return self.bwd(self.saved, *cts)


def extra_cotangents(n: int, compiled) -> TypeError:
    """vjp_fn called with several cotangents: it takes one, shaped as the output."""
    name = getattr(compiled, "fn_name", None) or getattr(getattr(compiled, "fn", None), "__name__", "f")
    return TypeError(f"vjp_fn (of sg.vjp({name}, ...)) takes one cotangent, shaped as {name}'s "
                     f"output; got {n}: for a tuple output pass one tuple of cotangents")


def source_function(f, given: int | None = None, args: tuple | None = None):
    """The Python function whose source is differentiated when `f` is transformed.

    For a function returned by a transform (`sg.grad(g)`) that is the generated
    function, not `g` (which `inspect.unwrap` would find through `__wrapped__`); with
    the call's `args`, a gradient's variant for them (Compiled.entry_at).
    `given`: how many positional arguments the transform's call passes, where fewer
    than the function's parameters make the rest take their defaults (given_arguments).
    """
    fn = _source_function(f, args)
    return fn if given is None else given_arguments(fn, given)


def shaped_args(f, primals):
    """`primals` where `f`'s generated code exists per argument shapes only (sg.vmap's:
    its entry for them) or where its shape-generic code cannot stand in for a variant
    (Compiled.needs_shapes: `enumerate(x)` in `g` of `sg.jacobian(sg.grad(g))`, the
    gradient's variant for them, as `sg.grad(g)(x)` runs), else None (a gradient's
    shape-generic entry)."""
    inner = getattr(f, "__srcgrad__", None)
    if inner is None:
        return None
    if getattr(inner, "shape_specialised", False) or (
            hasattr(inner, "needs_shapes") and inner.needs_shapes()):
        return tuple(primals)
    return None


def _source_function(f, args=None):
    inner = getattr(f, "__srcgrad__", None)
    if inner is not None:
        return inner.entry() if args is None or not hasattr(inner, "entry_at") else inner.entry_at(args)
    if getattr(f, "__name__", None) != "apply" or getattr(f, "__self__", None) is None:
        return f  # not a bound `apply`: no need to import the frontend (a disk-cache hit)
    from srcgrad.frontend.classes import applied_class

    cls = applied_class(f)
    return _apply_function(cls) if cls is not None else f


_GIVEN: dict = {}  # (function, number of arguments given) -> the function of those (given_arguments)


def given_arguments(fn, n: int):
    """`fn`, or where a transform is called with only `fn`'s first `n` positional
    arguments and the rest have defaults, a function of those `n` calling `fn`
    (srcgrad.frontend.parse.leading_function), kept per (fn, n) so one Compiled serves
    every call. The defaults are then constants of the program: sg.vjp's vjp_fn returns
    one gradient per primal and sg.jvp takes one tangent per primal, as torch.func's
    do, and a default that is no array (`b=None`) is never differentiated."""
    code = getattr(fn, "__code__", None)
    if code is None or code.co_argcount <= n:
        return fn
    made = _GIVEN.get((fn, n))
    # its text lives in linecache only: made again if something emptied linecache since
    if made is None or made.__code__.co_filename not in linecache.cache:
        from srcgrad.frontend.parse import leading_function  # (gast: only for such a call)

        made = _GIVEN[fn, n] = leading_function(fn, n)
    return made


_APPLY: dict = {}  # Function class -> a plain function calling its `apply`


def _apply_function(cls):
    """`def <Name>_apply(a, b): return <Name>.apply(a, b)`, for `sg.vjp(MyFn.apply, ...)`:
    a function with the forward's parameters whose source the compiler can read."""
    from srcgrad.autograd.function import uses_setup_context  # the base class, not the runtime

    fn = _APPLY.get(cls)
    # its text lives in linecache only: made again if something emptied linecache since
    if fn is None or fn.__code__.co_filename not in linecache.cache:
        params = list(inspect.signature(cls.forward).parameters)
        if not uses_setup_context(cls):
            params = params[1:]  # ctx
        name = f"{cls.__name__}_apply"
        text = f"def {name}({', '.join(params)}):\n    return {cls.__name__}.apply({', '.join(params)})\n"
        ns = load_module(text, f"<srcgrad apply {cls.__qualname__}>", {cls.__name__: cls})
        fn = _APPLY[cls] = ns[name]
    return fn


class CompiledJvp(Compiled):
    """`<f>_jvp(<params>, <param>_t for param in wrt)`: see srcgrad.pipeline.programs.jvp_program."""

    def __init__(self, fn, wrt=None, arg_trees=None):
        super().__init__(fn, "jvp", wrt, arg_trees=arg_trees)
        self._entry = None

    def forget(self) -> None:
        super().forget()
        self._entry = self._refused = None

    def _generate(self, fs, key: str, args=None) -> tuple:
        return _module(fs, key, _programs().jvp_program(fs, wrt=self.wrt, args=args))

    def entry_at(self, args):
        """sg.jvp's function for arguments like `args` (their leaves): the shape-generic
        code, or where that refuses a decision on shapes (a recursion ending on
        `x.shape[0] == 1`), a variant traced for their shapes (Note [Shape facts] in
        srcgrad.frontend.trace; H2). The generic code's refusal stands when the variant
        cannot be made either."""
        generic = None
        if getattr(self, "_refused", None) is None:
            try:
                generic = self.entry()
            except CompileError as err:
                self._refused = err
            else:  # a form the shape-generic code leaves to run time (a matrix's
                if not modules.reads_vector_only(generic):  # norm): NumPy's variant
                    return generic  # decides it (numpy_forms.norm)
        key = (tuple([guard_value(a) for a in args]), mutation_allowed())
        hit = self.variants.get(key)
        if hit is None:
            try:
                ns = self._variant(tuple(args), key[0])
            except (CompileError, ProbeFailed):
                if generic is not None:
                    return generic
                raise self._refused from None
            hit = self.variants[key] = ns[self.fn_name + "_jvp"]
        return hit

    def _variant(self, args, shapes):
        key = self.cache_key(self.options(shapes))
        return self._load(key, lambda: self._generate(self.parsed(), key or "uncached", args),
                          example=args)

    def numba_entry(self, p_leaves, t_leaves):
        """backend="numba": the variant for these primals compiled by numba for these
        primals and tangents (Note [The numba backend]), NumPy's where numba cannot take it,
        the generic code where no variant can be made."""
        shapes = tuple([guard_value(a) for a in (*p_leaves, *t_leaves)])
        key = ("numba", shapes, mutation_allowed())
        hit = self.variants.get(key)
        if hit is None:
            from srcgrad.pipeline import numba_variants

            p_shapes = shapes[:len(p_leaves)]
            try:
                fallback = self._variant(tuple(p_leaves), p_shapes)[self.fn_name + "_jvp"]
                rendered = self.numba_rendered(p_shapes, tuple(p_leaves))[self.fn_name + "_jvp"]
            except (CompileError, ProbeFailed):
                return self.entry_at(p_leaves)
            with modules.COMPILING:
                hit = self.variants[key] = numba_variants.variant(
                    self, rendered, (*p_leaves, *t_leaves), fallback=fallback)
        return hit

    def entry(self, index: int = 0):
        if self._entry is None:
            ns = self.load()  # sets fn_name (quick key or parse): a hit parses nothing
            self._entry = ns[self.fn_name + "_jvp"]
        return self._entry

    def entry_for(self, target):
        """The generic JVP bound to a non-NumPy namespace (Note [Array namespaces])."""
        ns = self.load_for(target)
        return ns[self.fn_name + "_jvp"]


_JVP: dict = {}  # (source function, wrt) -> CompiledJvp, so repeated calls compile once


def compiled_jvp(fn, wrt=None, trees=None, backend=None) -> CompiledJvp:
    """`sg.jvp`'s module for `fn` (tangents for the parameters `wrt`, default all);
    `trees`: the arguments' tree definitions when some are containers; `backend`: "numba"
    or None."""
    key = (fn, wrt, trees) if backend is None else (fn, wrt, trees, backend)
    compiled = _JVP.get(key)
    if compiled is None:
        compiled = _JVP[key] = CompiledJvp(fn, wrt, trees)
        compiled.backend_option = backend
    elif compiled.stale():
        compiled.forget()
    return compiled


def compiled_vjp(fn, hooks: bool = False, trees=None, backend=None) -> Compiled:
    """`sg.vjp`'s module for `fn`; `hooks`: the saved-tensor-hook variant; `trees`: the
    arguments' tree definitions when some are containers; `backend`: "numba" or None
    (numba takes neither hooks nor containers: their variants run on NumPy)."""
    if hooks:
        table, make = _VJP_HOOKS, CompiledVjpHooks
    else:
        table, make = _VJP, lambda f, t: Compiled(f, "vjp", arg_trees=t)
    backend = backend if not hooks and trees is None else None
    key = fn if trees is None and backend is None else (fn, trees, backend)
    compiled = table.get(key)
    if compiled is None:
        compiled = table[key] = make(fn, trees)
        compiled.backend_option = backend
    elif compiled.stale():
        compiled.forget()
    return compiled


def vjp(f, primals: tuple, has_aux: bool, guards: dict | None = None, backend=None):
    """srcgrad.api.vjp's call (its docstring says what it returns); `guards`: its table
    of guarded plain calls (Note [The plain sg.vjp call]); `backend`: "numba" or None."""
    given = f
    arguments.check_not_complex("vjp", f, primals)
    f, hooks = arguments.plain_function(f), contexts.current_hooks()  # (functools.partial)
    recorded_in = contexts.mutation_allowed()
    if hooks is None and recorded_in is None and not has_aux and backend is None:
        # Note [The plain sg.vjp call]; srcgrad.api looks guarded calls up by what it was
        # given: none for the function a partial stands for
        plain = plain_vjp(f, primals, guards if f is given else None)
        if plain is not None:
            return plain
    from srcgrad.ir import tree as pytree

    leaves, trees = pytree.flatten_args(primals)
    leaves = [numpy.float64(v) if v.__class__ is float else v for v in leaves]  # inf/nan, as NumPy
    nested = any(t != pytree.LEAF for t in trees)
    fn = source_function(f, len(primals), shaped_args(f, primals))
    compiled = compiled_vjp(fn, hooks=hooks is not None,
                           trees=trees if nested else None, backend=backend)
    # a variant for these leaves' shapes, under hooks and for container arguments too: it
    # decides what layout and shape facts decide (a loop over a row count, unrolled)
    fwd, bwd, specialized = compiled.vjp_variant(leaves)
    if hooks is None:
        out_leaves, saved = fwd(*leaves)
    else:
        out_leaves, saved = fwd(hooks[0], *leaves)
        bwd = functools.partial(bwd, hooks[1])
    out_tree, n_out = pytree.split_aux(compiled.out_tree, has_aux, "vjp")
    out = pytree.unflatten(out_tree, out_leaves[:n_out])
    aux_zeros = [numpy.zeros(numpy.shape(a)) for a in out_leaves[n_out:]]

    def vjp_fn(cotangent, *extra):
        if extra:
            raise extra_cotangents(1 + len(extra), compiled)
        if recorded_in is not None and contexts.mutation_allowed() is not recorded_in:
            raise AssertionError("Trying to backward outside of the 'allow_mutation_on_saved_tensors' "
                                 "contextin which the graph was originally recorded.")  # sic, torch
        cts = arguments.check_cotangents(cotangent, out_tree, out_leaves, specialized)
        flat = bwd(saved, *cts, *aux_zeros)
        return pytree.group_gradients(flat, trees, range(len(trees))) if nested else flat

    vjp_fn.__srcgrad__ = compiled  # sg.source(vjp_fn)
    vjp_fn.__signature__ = _PlainVjpFn.__signature__
    if has_aux:
        return out, vjp_fn, pytree.unflatten(*pytree.aux_part(compiled.out_tree, out_leaves))
    return out, vjp_fn


def jvp(f, primals, tangents, has_aux: bool, backend_option=None):
    """srcgrad.api.jvp's call (its docstring says what it returns); `backend_option`: "numba" or None."""
    from srcgrad.ir import tree as pytree

    name = getattr(f, "__name__", "f")
    for what, value in (("primals", primals), ("tangents", tangents)):
        if not isinstance(value, (tuple, list)):  # an array would be iterated as its rows
            raise TypeError(f"jvp(f, primals, tangents): {what} is a tuple of {name}'s arguments "
                            f"(one per parameter); got {type(value).__name__}: pass "
                            f"sg.jvp({name}, (x,), (t,)) for one argument")
    primals, tangents = tuple(primals), tuple(tangents)
    arguments.check_not_complex("jvp", f, primals)
    arguments.check_not_complex("jvp", f, tangents, what="tangent")
    if len(primals) != len(tangents):
        raise ValueError(f"jvp: {len(primals)} primals but {len(tangents)} tangents; "
                         "give one tangent per primal")
    p_leaves, trees = pytree.flatten_args(primals)
    t_leaves, t_trees = pytree.flatten_args(tangents)
    for i, (p, t) in enumerate(zip(trees, t_trees)):
        if p != t:
            raise ValueError(f"jvp: tangent {i} is {pytree.describe(t)}, but primal {i} is "
                             f"{pytree.describe(p)}")
    for i, (p, t) in enumerate(zip(p_leaves, t_leaves)):
        if arguments.shape_of(p) != arguments.shape_of(t):
            raise ValueError(f"jvp: tangent {i} has shape {numpy.shape(t)}, but primal {i} "
                             f"has shape {numpy.shape(p)}")
    # Python floats as NumPy's: inf/nan at singular points (`0.0 ** -0.5`), no ZeroDivisionError
    p_leaves, t_leaves = ([numpy.float64(v) if v.__class__ is float else v for v in ls]
                          for ls in (p_leaves, t_leaves))
    fn = given_arguments(arguments.plain_function(source_function(f, None, shaped_args(f, primals))),
                         len(primals))
    n = len(inspect.signature(fn).parameters)
    if len(primals) != n:
        raise TypeError(f"jvp: {getattr(fn, '__name__', 'f')}() takes {n} arguments; got "
                        f"{len(primals)} primals: primals is a tuple with one value per argument")
    nested = any(t != pytree.LEAF for t in trees)
    compiled = compiled_jvp(fn, trees=trees if nested else None,
                            backend=None if nested else backend_option)
    target = backend.target_of(*p_leaves, *t_leaves)  # Note [Array namespaces]
    if target is not backend.NUMPY:
        impl = compiled.entry_for(target)
    elif compiled.backend_option == "numba":
        impl = compiled.numba_entry(p_leaves, t_leaves)
    else:
        impl = compiled.entry_at(p_leaves)
    try:
        outs, touts = impl(*p_leaves, *t_leaves)
    except Exception as err:  # the user's line that the failing generated line came from
        raise note_user_line(err) from None
    tree, n_out = pytree.split_aux(compiled.out_tree, has_aux, "jvp")
    out, tout = pytree.unflatten(tree, outs[:n_out]), pytree.unflatten(tree, touts[:n_out])
    if has_aux:
        return out, tout, pytree.unflatten(*pytree.aux_part(compiled.out_tree, outs))
    return out, tout


modules.TABLES.extend((_VJP, _VJP_HOOKS, _JVP, _GIVEN))  # what srcgrad.api.cache_clear empties
