"""The function transforms of API.md §1: grad, value_and_grad, vjp, source.

A transform returns a plain function. Its first call with arguments of new shapes
parses the user function, looks the generated module for those shapes up in the
cache (memory, then disk) or compiles it (Note [Shape specialisation] in
srcgrad.passes.shapes), and from then on a tuple of argument shapes picks the
generated function: no per-call source inspection or signature binding (DESIGN
decision 11). The generated function has the user function's own parameters and
defaults, so Python binds the arguments.
"""

from __future__ import annotations

import functools
import inspect
import math

import numpy

from srcgrad import pipeline, rules
from srcgrad.codegen import emit
from srcgrad.codegen.cache import default_cache
from srcgrad.codegen.loader import load_module, pseudo_filename
from srcgrad.frontend.parse import parse_function
from srcgrad.ir import tree as pytree
from srcgrad.passes.shapes import ProbeFailed

_MEMORY: dict = {}  # cache key -> loaded module namespace (this process)


class _Compiled:
    """What a transform compiles to, built on first use."""

    def __init__(self, fn, kind: str, wrt=None, single=False, has_aux=False):
        self.fn, self.kind, self.wrt, self.single, self.has_aux = fn, kind, wrt, single, has_aux
        self.namespaces: dict = {}  # allow-mutation mode -> the shape-generic variant's globals
        self.module_source = None  # the source of the variant loaded last
        self.out_tree = None
        self.fn_name = None  # the name of the parsed function (set by load)
        self._fs = None

    def options(self, shapes=None) -> tuple:
        return (self.kind, self.wrt, self.single, self.has_aux, shapes) + (
            ("allow_mutation_on_saved_tensors",) if _mutation_allowed() else ())

    def parsed(self):
        if self._fs is None:
            self._fs = parse_function(self.fn)
            self.fn_name = self._fs.name
        return self._fs

    def specialized(self, args: tuple, shapes: tuple):
        """The generated function for arguments of these shapes (`args` a first example)."""
        full = inspect.signature(self.fn).bind(*args)
        full.apply_defaults()
        fs = self.parsed()
        key = pipeline.cache_key(fs, self.options(shapes))
        ns = self._load(fs, key, lambda: self._generate(fs, key or "uncached", tuple(full.args)))
        return ns[_entry_names(self)[0]]

    def specialized_tree(self, args: tuple, trees: tuple, key: tuple):
        """For arguments that are tuples/lists/dicts of arrays: a function taking the
        original arguments, calling generated code on their leaves, and nesting the
        gradients back into each argument's structure (Note [Container arguments])."""
        leaves, _ = pytree.flatten_args(args)
        fs = self.parsed()
        cache = pipeline.cache_key(fs, self.options(key))

        def generate():
            source, pool, _ = pipeline.container_gradient_program(
                fs, self.wrt, trees, has_aux=self.has_aux, with_value=self.kind == "value_and_grad",
                args=tuple(leaves), allow_mutation=_mutation_allowed())
            module = emit.render_module([source], version=pipeline.VERSION,
                                        origin=f"{_short_path(fs.filename)}:{fs.name}",
                                        key=cache or "uncached", helpers=emit.helpers_used([source]),
                                        constants=sorted(pool.values))
            return module, dict(pool.values), None

        impl = self._load(fs, cache, generate)[_entry_names(self)[0]]
        wrt, single, with_value, has_aux = self.wrt, self.single, self.kind == "value_and_grad", self.has_aux

        def call(*args):
            out = impl(*pytree.flatten_args(args)[0])
            value, flat = out if with_value else (None, out)
            if has_aux and not with_value:
                flat, aux = flat
            grads = pytree.group_gradients(flat, trees, wrt)
            grads = grads[0] if single else grads
            if with_value:
                return value, grads
            return (grads, aux) if has_aux else grads

        return call

    def fingerprint(self) -> str | None:
        """For a compiled function referenced from other compiled code."""
        from srcgrad.frontend.resolve import fingerprint

        fp = fingerprint(parse_function(self.fn))
        return None if fp is None else f"{self.kind}:{self.options()!r}:{fp}"

    def load(self) -> dict:
        """The shape-generic variant (what `sg.source` shows before a call, and what
        other compiled code traces when it calls this transform)."""
        mode = _mutation_allowed()
        if mode not in self.namespaces:
            fs = self.parsed()
            key = pipeline.cache_key(fs, self.options())
            self.namespaces[mode] = self._load(fs, key, lambda: self._generate(fs, key or "uncached"))
        return self.namespaces[mode]

    def _load(self, fs, key, generate) -> dict:
        """Module globals for `key`: from memory, the disk cache, or `generate()`."""
        hit = _MEMORY.get(key) if key else None
        if hit is not None:
            ns, self.module_source, self.out_tree = hit
            return ns
        cache = default_cache()
        source = cache.get(key) if key else None
        constants: dict = {}
        if source is None:
            source, constants, out_tree = generate()
            path = cache.put(key, source) if key and not constants else ""
        else:
            path = str(cache.path_for(key))
            out_tree = self._out_tree_from_source(fs)
        filename = path or pseudo_filename(key or f"{fs.name}-{id(self.fn):x}")
        namespace = {"xp": numpy, "math": math, **rules.FORMULA_GLOBALS, **constants}
        ns = load_module(source, filename, namespace)
        self.module_source, self.out_tree = source, out_tree
        if key:
            _MEMORY[key] = (ns, source, out_tree)
        return ns

    def _out_tree_from_source(self, fs):
        if self.kind != "vjp":
            return None
        graph, _ = pipeline.trace(fs)  # the vjp output structure is not in the module text
        return graph.out_tree

    def _generate(self, fs, key: str, args=None) -> tuple:
        origin = f"{_short_path(fs.filename)}:{fs.name}"
        if self.kind == "vjp":
            program = pipeline.vjp_program(fs, allow_mutation=_mutation_allowed())
            functions, constants, out_tree = program.sources, program.constants, program.out_tree
        else:
            source, pool = pipeline.gradient_program(
                fs, self.wrt, single=self.single, has_aux=self.has_aux,
                with_value=self.kind == "value_and_grad", args=args,
                allow_mutation=_mutation_allowed())
            functions, constants, out_tree = [source], dict(pool.values), None
        module = emit.render_module(functions, version=pipeline.VERSION, origin=origin, key=key,
                                    helpers=emit.helpers_used(functions),
                                    constants=sorted(constants))
        return module, constants, out_tree

    def entry(self, index: int = 0):
        ns = self.load()
        return ns[_entry_names(self)[index]]


def _mutation_allowed() -> bool:
    """Whether an `allow_mutation_on_saved_tensors` context is active: part of every
    variant's options (Note [Saved values written in place])."""
    from srcgrad.autograd.graph import mutation_allowed

    return mutation_allowed() is not None


def _entry_names(compiled) -> tuple:
    from srcgrad.codegen import names

    name = compiled.fn_name
    if compiled.kind == "grad":
        return (names.grad_fn_name(name),)
    if compiled.kind == "value_and_grad":
        return (names.value_and_grad_fn_name(name),)
    return (names.forward_fn_name(name), names.backward_fn_name(name))


def _short_path(path: str) -> str:
    import os

    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return rel if not rel.startswith("..") else os.path.basename(path)


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
    signature whose code is generated (templates/dispatch.py.j2): it compares each
    argument's shape (or, for Python scalars, its class) with those of the variant
    used last and calls it directly; a miss looks the variant for the new shapes up
    (compiling it once) and regenerates the guards for it. Entering or leaving
    `allow_mutation_on_saved_tensors` unbinds it (every call misses once), so the
    guards never test that mode.
    """

    def __init__(self, fn, compiled):
        self.fn, self.compiled = fn, compiled
        self.variants: dict = {}  # guard values -> generated function
        self.signature = inspect.signature(fn)
        plain = all(p.kind is p.POSITIONAL_OR_KEYWORD for p in self.signature.parameters.values())
        self.params = list(self.signature.parameters) if plain else None
        self.globals = {"_miss": self.miss, "_impl": None}
        self.function = self._function(guards=())
        from srcgrad.autograd.graph import on_mutation_mode_change

        on_mutation_mode_change(self.unbind)

    def unbind(self):
        """Forget the variant the guards pick: the next call looks it up again."""
        if self.params is not None:
            self.function.__code__ = self._function(guards=()).__code__

    def _function(self, guards):
        if self.params is None:  # *args / keyword-only: the tracer rejects these; say so on call
            def function(*args, **kwargs):
                return self.miss(*args, **kwargs)
            return function
        params = []
        for i, (name, p) in enumerate(self.signature.parameters.items()):
            if p.default is p.empty:
                params.append(name)
            else:
                self.globals[f"_default{i}"] = p.default
                params.append(f"{name}=_default{i}")
        name = self.fn.__name__ if self.fn.__name__.isidentifier() else "_lambda"  # `<lambda>`
        text = emit.render_dispatcher(name, params, self.params, list(guards))
        code = compile(text, f"<srcgrad dispatch {self.fn.__qualname__}>", "exec")
        namespace = self.globals
        exec(code, namespace)  # noqa: S102 (our own generated text)
        return namespace.pop(name)

    def miss(self, *args, **kwargs):
        if kwargs or len(args) != len(self.signature.parameters):
            bound = self.signature.bind(*args, **kwargs)
            bound.apply_defaults()
            args = bound.args
        mode = _mutation_allowed()
        if any(isinstance(a, (tuple, list, dict)) for a in args):  # containers: no fast guard
            leaves, trees = pytree.flatten_args(args)
            key = ("tree", trees, tuple([_guard_value(a) for a in leaves]), mode)
            impl = self.variants.get(key)
            if impl is None:
                impl = self.variants[key] = self.compiled.specialized_tree(args, trees, key)
            return impl(*args)
        key = tuple([_guard_value(a) for a in args])
        impl = self.variants.get((key, mode))
        if impl is None:
            try:
                impl = self.variants[key, mode] = self.compiled.specialized(args, key)
            except ProbeFailed:  # these arguments make the function itself fail:
                return self.compiled.entry()(*args)  # let the generic code raise it, readably
        self._retarget(key, impl)
        return impl(*args)

    def _retarget(self, key, impl):
        """Make the guards of the returned function those of `key`'s variant."""
        if self.params is None:
            return
        guards = []
        for i, (name, value) in enumerate(zip(self.params, key)):
            if isinstance(value, tuple):  # (shape, dtype) of an array
                self.globals[f"_g{i}"], self.globals[f"_d{i}"] = value
                guards.append(f"{name}.shape == _g{i} and {name}.dtype is _d{i}")
            else:
                self.globals[f"_g{i}"] = value
                guards.append(f"{name}.__class__ is _g{i}")
        self.globals["_impl"] = impl
        self.function.__code__ = self._function(guards).__code__


def _guard_value(a):
    """What a variant is specialised on: an array's shape and dtype, or a Python
    value's class."""
    shape = getattr(a, "shape", None)
    return (shape, a.dtype) if isinstance(shape, tuple) else a.__class__


def _transform(fn, kind: str, wrt, has_aux: bool):
    indices, single = _normalize_wrt(fn, wrt)
    compiled = _Compiled(fn, kind, indices, single, has_aux)
    transformed = _Dispatch(fn, compiled).function
    functools.update_wrapper(transformed, fn)
    transformed.__srcgrad__ = compiled
    transformed.__wrapped__ = fn
    transformed.__name__ = f"{kind}_{fn.__name__}"
    return transformed


def grad(f=None, wrt=0, *, has_aux=False):
    """The gradient of scalar `f` w.r.t. argument(s) `wrt` (API.md §1). Usable as `@grad`."""
    if f is None:
        return lambda fn: grad(fn, wrt, has_aux=has_aux)
    return _transform(f, "grad", wrt, has_aux)


def value_and_grad(f=None, wrt=0, *, has_aux=False):
    """`(value, grads)` of scalar `f` (`((value, aux), grads)` with has_aux)."""
    if f is None:
        return lambda fn: value_and_grad(fn, wrt, has_aux=has_aux)
    return _transform(f, "value_and_grad", wrt, has_aux)


_VJP: dict = {}  # function -> _Compiled, so repeated sg.vjp(f, ...) calls compile once
_VJP_HOOKS: dict = {}  # function -> _CompiledVjpHooks: the saved-tensor-hook variant


class _CompiledVjpHooks(_Compiled):
    """The variant of `sg.vjp` run while saved-tensor hooks are active: `f_fwd(pack_hook,
    ...)`, `f_bwd(unpack_hook, _saved, ...)` (Note [Saved-tensor hooks], srcgrad.passes.hooks)."""

    def __init__(self, fn):
        super().__init__(fn, "vjp")

    def options(self) -> tuple:
        return super().options() + ("saved_tensors_hooks",)

    def _generate(self, fs, key: str) -> tuple:
        program = pipeline.vjp_program(fs, hooks=True, allow_mutation=_mutation_allowed())
        module = emit.render_module(program.sources, version=pipeline.VERSION,
                                    origin=f"{_short_path(fs.filename)}:{fs.name}", key=key,
                                    helpers=emit.helpers_used(program.sources),
                                    constants=sorted(program.constants))
        return module, program.constants, program.out_tree


def vjp(f, *primals):
    """`(out, vjp_fn)`: `vjp_fn(cotangent)` returns one gradient per primal.

    The saved-tensor hooks active now (`sg.autograd.graph.saved_tensors_hooks`) pack
    each array the backward keeps (what custom Functions save, and what the derivative
    formulas read); `vjp_fn` unpacks it with the same pair. A forward run
    inside `allow_mutation_on_saved_tensors` needs its `vjp_fn` run inside it too.
    """
    from srcgrad.autograd.graph import current_hooks, mutation_allowed

    hooks = current_hooks()
    recorded_in = mutation_allowed()
    table, make = (_VJP, lambda: _Compiled(f, "vjp")) if hooks is None else (
        _VJP_HOOKS, lambda: _CompiledVjpHooks(f))
    compiled = table.get(f)
    if compiled is None:
        compiled = table[f] = make()
    fwd, bwd = compiled.entry(0), compiled.entry(1)
    if hooks is None:
        out_leaves, saved = fwd(*primals)
    else:
        out_leaves, saved = fwd(hooks[0], *primals)
        bwd = functools.partial(bwd, hooks[1])
    out_tree = compiled.out_tree
    out = pytree.unflatten(out_tree, out_leaves)

    def vjp_fn(cotangent):
        if recorded_in is not None and mutation_allowed() is not recorded_in:
            raise AssertionError("Trying to backward outside of the 'allow_mutation_on_saved_tensors' "
                                 "contextin which the graph was originally recorded.")  # sic, torch
        leaves, ct_tree = pytree.flatten(cotangent)
        if ct_tree != out_tree:
            raise ValueError(f"vjp_fn: the cotangent's structure {_describe_tree(ct_tree)} does "
                             f"not match the output's {_describe_tree(out_tree)}")
        return bwd(saved, *leaves)

    return out, vjp_fn


def _describe_tree(t) -> str:
    if t[0] == "leaf":
        return "array"
    if t[0] == "dict":
        return "{" + ", ".join(f"{k!r}: {_describe_tree(c)}" for k, c in zip(t[1], t[2])) + "}"
    inner = ", ".join(_describe_tree(c) for c in t[1])
    return f"({inner})" if t[0] == "tuple" else f"[{inner}]"


def source(g) -> str:
    """The generated Python source behind a function a transform returned."""
    compiled = getattr(g, "__srcgrad__", None)
    if compiled is None:
        raise TypeError(f"sg.source: {g!r} was not returned by a srcgrad transform")
    if getattr(compiled, "module_source", None) is None:  # not called yet: the generic variant
        compiled.load()
    return compiled.module_source  # else the variant that ran last


def cache_clear() -> None:
    """Empty the in-memory and on-disk module caches."""
    _MEMORY.clear()
    _VJP.clear()
    _VJP_HOOKS.clear()
    default_cache().clear()


def emit_standalone(func, wrt=None, mode="reverse", optimize=True) -> str:
    """A module that runs with NumPy alone: `grad_<func>` (mode "reverse"), `<func>_jvp`
    ("forward") or both (for `srcgrad emit`)."""
    fs = parse_function(func)
    if wrt is None:
        wrt = tuple(range(len(fs.node.args.args)))
        single = False
    else:
        wrt, single = _normalize_wrt(func, tuple(wrt) if len(wrt) > 1 else wrt[0])
    if mode not in ("reverse", "forward", "both"):
        raise ValueError(f"mode={mode!r}: choose 'reverse', 'forward' or 'both'")
    sources, constants = [], {}
    if mode in ("reverse", "both"):
        source, pool = pipeline.gradient_program(fs, wrt, single=single, optimized=optimize)
        sources.append(source)
        constants.update(pool.values)
    if mode in ("forward", "both"):
        program = pipeline.jvp_program(fs, optimized=optimize, wrt=wrt)
        sources.extend(program.sources)
        constants.update(program.constants)
    if constants:
        raise ValueError(f"{fs.name} uses constants that have no literal form "
                         f"({', '.join(constants)}); emit cannot write them into a module")
    return emit.render_module(sources, version=pipeline.VERSION,
                              origin=f"{_short_path(fs.filename)}:{fs.name}", key="standalone",
                              helpers=emit.helpers_used(sources), standalone=True)


# ---------------------------------------------------------------------- forward mode
# jvp, jacobian and hessian (API.md §1), the `--mode forward|both` of `srcgrad emit`
# and `srcgrad check`. A function a transform returned is differentiated through
# the code it runs: its generated source (see `_source_function`).


def _source_function(f):
    """The Python function whose source is differentiated when `f` is transformed.

    For a function returned by a transform (`sg.grad(g)`) that is the generated
    function, not `g` (which `inspect.unwrap` would find through `__wrapped__`).
    """
    inner = getattr(f, "__srcgrad__", None)
    return inner.entry() if inner is not None else f


class _CompiledJvp(_Compiled):
    """`<f>_jvp(<params>, <param>_t for param in wrt)`: see pipeline.jvp_program."""

    def __init__(self, fn, wrt=None):
        super().__init__(fn, "jvp", wrt)
        self._entry = None

    def _out_tree_from_source(self, fs):
        graph, _ = pipeline.trace(fs)
        return graph.out_tree

    def _generate(self, fs, key: str, args=None) -> tuple:
        program = pipeline.jvp_program(fs, wrt=self.wrt)
        module = emit.render_module(program.sources, version=pipeline.VERSION,
                                    origin=f"{_short_path(fs.filename)}:{fs.name}", key=key,
                                    helpers=emit.helpers_used(program.sources),
                                    constants=sorted(program.constants))
        return module, program.constants, program.out_tree

    def entry(self, index: int = 0):
        if self._entry is None:
            ns = self.load()
            self._entry = ns[parse_function(self.fn).name + "_jvp"]
        return self._entry


_JVP: dict = {}  # (source function, wrt) -> _CompiledJvp, so repeated calls compile once


def _compiled_jvp(fn, wrt=None) -> _CompiledJvp:
    key = (fn, wrt)
    compiled = _JVP.get(key)
    if compiled is None:
        compiled = _JVP[key] = _CompiledJvp(fn, wrt)
    return compiled


def _compiled_vjp(fn) -> _Compiled:
    compiled = _VJP.get(fn)
    if compiled is None:
        compiled = _VJP[fn] = _Compiled(fn, "vjp")
    return compiled


def jvp(f, primals, tangents):
    """`(out, tangent_out)`: `f(*primals)` and its directional derivative along `tangents`.

    Forward mode: one pass of generated code computes both, with no reverse pass.
    `out` and `tangent_out` have the structure of `f`'s result.
    """
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise ValueError(f"jvp: {len(primals)} primals but {len(tangents)} tangents; "
                         "give one tangent per primal")
    for i, (p, t) in enumerate(zip(primals, tangents)):
        if numpy.shape(p) != numpy.shape(t):
            raise ValueError(f"jvp: tangent {i} has shape {numpy.shape(t)}, but primal {i} "
                             f"has shape {numpy.shape(p)}")
    fn = _source_function(f)
    compiled = _compiled_jvp(fn)
    impl = compiled.entry()
    n = len(inspect.signature(fn).parameters)
    if len(primals) != n:
        raise TypeError(f"jvp: {getattr(fn, '__name__', 'f')}() takes {n} arguments; "
                        f"got {len(primals)} primals")
    outs, touts = impl(*primals, *tangents)
    tree = compiled.out_tree
    return pytree.unflatten(tree, outs), pytree.unflatten(tree, touts)


def _float_dtype(a):
    dtype = numpy.result_type(a)
    return dtype if dtype.kind in "fc" else numpy.dtype(numpy.float64)


class _Jacobian:
    """The function `jacobian(f, wrt, mode=...)` returns (compiles once, on first use)."""

    def __init__(self, f, wrt, mode):
        if mode not in ("auto", "forward", "reverse"):
            raise ValueError(f"jacobian: mode must be 'auto', 'forward' or 'reverse'; got {mode!r}")
        self.f, self.mode = f, mode
        self.indices, self.single = _normalize_wrt(f, wrt)
        self._modes: dict = {}  # argument shapes -> the mode auto chose
        functools.update_wrapper(self, f)
        self.__name__ = f"jacobian_{getattr(f, '__name__', 'f')}"
        self.__srcgrad__ = _JacobianSource(self)

    def __call__(self, *args):
        mode = self.mode
        if mode == "auto":
            key = tuple(numpy.shape(a) for a in args)
            mode = self._modes.get(key)
            if mode is None:
                out_size = sum(numpy.size(leaf) for leaf in pytree.flatten(self.f(*args))[0])
                in_size = sum(numpy.size(args[i]) for i in self.indices)
                mode = self._modes[key] = "forward" if in_size < out_size else "reverse"
        tree, outs, blocks = _jacobian_blocks(self.f, args, self.indices, mode)
        return self._assemble(args, tree, outs, blocks)

    def _assemble(self, args, tree, outs, blocks):
        """blocks[k][j]: the (out k size, arg j size) matrix; reshaped and nested like jax."""
        leaves = []
        for k, out in enumerate(outs):
            per_arg = tuple(blocks[k][j].reshape(numpy.shape(out) + numpy.shape(args[i]))
                            for j, i in enumerate(self.indices))
            leaves.append(per_arg[0] if self.single else per_arg)
        return pytree.unflatten(tree, leaves)


def _jacobian_blocks(f, args, indices, mode):
    """(out tree, output leaves, blocks): blocks[k][j] is the (size of output k, size of
    argument indices[j]) Jacobian matrix, by forward or reverse mode."""
    if mode == "forward":
        return _forward_blocks(f, args, indices)
    return _reverse_blocks(f, args, indices)


def _forward_blocks(f, args, indices):
    fn = _source_function(f)
    blocks, outs, tree = None, None, None
    for j, i in enumerate(indices):
        compiled = _compiled_jvp(fn, (i,))
        impl = compiled.entry()
        arg = numpy.asarray(args[i])
        basis = numpy.zeros(arg.size, dtype=_float_dtype(arg))
        tangent = basis.reshape(arg.shape)
        for col in range(arg.size):
            basis[col] = 1.0
            outs, touts = impl(*args, tangent)
            basis[col] = 0.0
            if blocks is None:
                tree = compiled.out_tree
                blocks = [[None] * len(indices) for _ in outs]
            for k, t in enumerate(touts):
                if blocks[k][j] is None:
                    blocks[k][j] = numpy.zeros((numpy.size(outs[k]), arg.size),
                                               dtype=numpy.result_type(t, basis))
                blocks[k][j][:, col] = numpy.reshape(t, -1)
        if arg.size == 0:  # no column to learn the output from: evaluate once
            outs, _ = impl(*args, tangent)
            tree = compiled.out_tree
            blocks = blocks or [[None] * len(indices) for _ in outs]
            for k, o in enumerate(outs):
                blocks[k][j] = numpy.zeros((numpy.size(o), 0), dtype=basis.dtype)
    return tree, outs, blocks


def _reverse_blocks(f, args, indices):
    compiled = _compiled_vjp(_source_function(f))
    fwd, bwd = compiled.entry(0), compiled.entry(1)
    outs, saved = fwd(*args)
    cts = [numpy.zeros(numpy.shape(o), dtype=_float_dtype(o)) for o in outs]
    blocks = []
    for k in range(len(outs)):
        flat = cts[k].reshape(-1)
        rows = [numpy.zeros((flat.size, numpy.size(args[i])),
                            dtype=numpy.result_type(_float_dtype(args[i]), flat))
                for i in indices]
        for row in range(flat.size):
            flat[row] = 1.0
            grads = bwd(saved, *cts)
            flat[row] = 0.0
            for j, i in enumerate(indices):
                rows[j][row] = numpy.reshape(grads[i], -1)
        blocks.append(rows)
    return compiled.out_tree, outs, blocks


class _JacobianSource:
    """What `sg.source` reads for a jacobian/hessian: the module(s) it runs."""

    def __init__(self, jac):
        self.jac = jac

    def load(self):
        fn = _source_function(self.jac.f)
        if self.jac.mode == "reverse":
            compiled = _compiled_vjp(fn)
            compiled.load()
            self.module_source = compiled.module_source
        else:
            parts = []
            for i in self.jac.indices:
                compiled = _compiled_jvp(fn, (i,))
                compiled.load()
                parts.append(compiled.module_source)
            self.module_source = "\n".join(parts)
        return self.module_source

    def entry(self, index: int = 0):
        from srcgrad.errors import CompileError

        raise CompileError("calling a jacobian or hessian from compiled code is not supported",
                           hint="call sg.grad / sg.jvp inside, and build the matrix outside")

    def fingerprint(self):
        return None


def jacobian(f, wrt=0, *, mode="auto"):
    """A function returning the Jacobian of `f` w.r.t. argument(s) `wrt`, shape
    `out.shape + arg.shape` (a tuple over `wrt` when it is a tuple; nested like
    `f`'s result when that is a tuple, list or dict).

    `mode="reverse"` runs one backward pass per output element, `"forward"` one
    forward-mode pass per input element; `"auto"` picks the one with fewer passes.
    """
    return _Jacobian(f, wrt, mode)


def hessian(f, wrt=0):
    """A function returning the Hessian of scalar `f`, by forward-over-reverse:
    forward-mode Jacobian of the generated gradient code. For a tuple `wrt`,
    `H[i][j]` is the block for arguments `wrt[i]` and `wrt[j]`."""
    return _Jacobian(grad(f, wrt), wrt, "forward")


def _parse_arg_spec(spec: str) -> list:
    """`"3x4,4,scalar"` -> [(3, 4), (4,), ()]."""
    shapes = []
    for item in (s.strip() for s in spec.split(",")):
        if item in ("scalar", "()", ""):
            shapes.append(())
            continue
        try:
            shape = tuple(int(n) for n in item.lower().split("x"))
        except ValueError:
            raise ValueError(f"--args: cannot read {item!r}; write shapes like 3x4, 4 or scalar") from None
        if any(n < 0 for n in shape):
            raise ValueError(f"--args: negative dimension in {item!r}")
        shapes.append(shape)
    return shapes


def check_cli(func, args_spec: str, *, seed: int = 0) -> tuple:
    """`srcgrad check`: (ok, report) of reverse- and forward-mode Jacobians of `func` at
    random float64 inputs of the shapes in `args_spec`, against central differences."""
    from srcgrad.autograd.gradcheck import _leaves, _numerical_blocks

    params = list(inspect.signature(func).parameters)
    shapes = _parse_arg_spec(args_spec)
    if len(shapes) != len(params):
        raise ValueError(f"--args gives {len(shapes)} shapes but {func.__name__}() takes "
                         f"{len(params)} arguments ({', '.join(params)})")
    rng = numpy.random.default_rng(seed)
    inputs = tuple(numpy.asarray(rng.standard_normal(s)) for s in shapes)
    diff = list(range(len(inputs)))
    outs = _leaves(func(*inputs))
    numerical = _numerical_blocks(func, inputs, diff, outs, 1e-6)
    lines = [f"srcgrad check {func.__name__}(" + ", ".join(
        f"{p}: {'scalar' if s == () else 'x'.join(map(str, s))}" for p, s in zip(params, shapes))
        + f")  float64 inputs, seed {seed}, central differences eps=1e-6, atol=1e-5, rtol=1e-3"]
    ok = True
    for mode in ("reverse", "forward"):
        _, _, analytical = _jacobian_blocks(func, inputs, diff, mode)
        for k in range(len(outs)):
            for j, p in enumerate(params):
                n, a = numerical[k][j], analytical[k][j]
                err = float(numpy.max(numpy.abs(a - n))) if n.size else 0.0
                good = bool(numpy.all(numpy.abs(a - n) <= 1e-5 + 1e-3 * numpy.abs(n)))
                ok &= good
                lines.append(f"  {mode:7s}  output {k} w.r.t. {p}: max |analytical - numerical| = "
                             f"{err:.2e}  {'ok' if good else 'MISMATCH'}")
    lines.append("OK" if ok else "FAILED: analytical and numerical Jacobians differ")
    return ok, "\n".join(lines) + "\n"
