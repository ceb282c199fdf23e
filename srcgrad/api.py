"""The function transforms of API.md §1: grad, value_and_grad, vjp, source.

A transform returns a plain function. Its first call parses the user function,
looks the generated module up in the cache (memory, then disk) or compiles it, and
from then on calls the generated function directly: no per-call hashing, source
inspection or signature binding (DESIGN decision 11). The generated function has
the user function's own parameters and defaults, so Python binds the arguments.
"""

from __future__ import annotations

import functools
import inspect

import numpy

from srcgrad import pipeline, rules
from srcgrad.codegen import emit
from srcgrad.codegen.cache import default_cache
from srcgrad.codegen.loader import load_module, pseudo_filename
from srcgrad.frontend.parse import parse_function
from srcgrad.ir import tree as pytree

_MEMORY: dict = {}  # cache key -> loaded module namespace (this process)


class _Compiled:
    """What a transform compiles to, built on first use."""

    def __init__(self, fn, kind: str, wrt=None, single=False, has_aux=False):
        self.fn, self.kind, self.wrt, self.single, self.has_aux = fn, kind, wrt, single, has_aux
        self.namespace = None
        self.module_source = None
        self.out_tree = None

    def options(self) -> tuple:
        return (self.kind, self.wrt, self.single, self.has_aux)

    def fingerprint(self) -> str | None:
        """For a compiled function referenced from other compiled code."""
        from srcgrad.frontend.resolve import fingerprint

        fp = fingerprint(parse_function(self.fn))
        return None if fp is None else f"{self.kind}:{self.options()!r}:{fp}"

    def load(self) -> dict:
        if self.namespace is not None:
            return self.namespace
        fs = parse_function(self.fn)
        key = pipeline.cache_key(fs, self.options())
        hit = _MEMORY.get(key) if key else None
        if hit is not None:
            self.namespace, self.module_source, self.out_tree = hit
            return self.namespace
        cache = default_cache()
        source = cache.get(key) if key else None
        constants: dict = {}
        out_tree = None
        if source is None:
            source, constants, out_tree = self._generate(fs, key or "uncached")
            path = cache.put(key, source) if key and not constants else ""
        else:
            path = str(cache.path_for(key))
            out_tree = self._out_tree_from_source(fs)
        filename = path or pseudo_filename(key or f"{fs.name}-{id(self.fn):x}")
        namespace = {"xp": numpy, **rules.FORMULA_GLOBALS, **constants}
        ns = load_module(source, filename, namespace)
        self.namespace, self.module_source, self.out_tree = ns, source, out_tree
        if key:
            _MEMORY[key] = (ns, source, out_tree)
        return ns

    def _out_tree_from_source(self, fs):
        if self.kind != "vjp":
            return None
        graph, _ = pipeline.trace(fs)  # the vjp output structure is not in the module text
        return graph.out_tree

    def _generate(self, fs, key: str) -> tuple:
        origin = f"{_short_path(fs.filename)}:{fs.name}"
        if self.kind == "vjp":
            program = pipeline.vjp_program(fs)
            functions, constants, out_tree = program.sources, program.constants, program.out_tree
        else:
            source, pool = pipeline.gradient_program(
                fs, self.wrt, single=self.single, has_aux=self.has_aux,
                with_value=self.kind == "value_and_grad")
            functions, constants, out_tree = [source], dict(pool.values), None
        module = emit.render_module(functions, version=pipeline.VERSION, origin=origin, key=key,
                                    helpers=emit.helpers_used(functions),
                                    constants=sorted(constants))
        return module, constants, out_tree

    def entry(self, index: int = 0):
        ns = self.load()
        return ns[_entry_names(self)[index]]


def _entry_names(compiled) -> tuple:
    from srcgrad.codegen import names

    name = compiled.fn.__name__
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


def _transform(fn, kind: str, wrt, has_aux: bool):
    indices, single = _normalize_wrt(fn, wrt)
    compiled = _Compiled(fn, kind, indices, single, has_aux)
    impl = None

    @functools.wraps(fn)
    def transformed(*args, **kwargs):
        nonlocal impl
        if impl is None:
            impl = compiled.entry()
        return impl(*args, **kwargs)

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


def vjp(f, *primals):
    """`(out, vjp_fn)`: `vjp_fn(cotangent)` returns one gradient per primal."""
    compiled = _VJP.get(f)
    if compiled is None:
        compiled = _VJP[f] = _Compiled(f, "vjp")
    fwd, bwd = compiled.entry(0), compiled.entry(1)
    out_leaves, saved = fwd(*primals)
    out_tree = compiled.out_tree
    out = pytree.unflatten(out_tree, out_leaves)

    def vjp_fn(cotangent):
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
    compiled.load()
    return compiled.module_source


def cache_clear() -> None:
    """Empty the in-memory and on-disk module caches."""
    _MEMORY.clear()
    _VJP.clear()
    default_cache().clear()


def emit_standalone(func, wrt=None, mode="reverse", optimize=True) -> str:
    """A module that runs with NumPy alone: `grad_<func>` (for `srcgrad emit`)."""
    fs = parse_function(func)
    if wrt is None:
        wrt = tuple(range(len(fs.node.args.args)))
        single = False
    else:
        wrt, single = _normalize_wrt(func, tuple(wrt) if len(wrt) > 1 else wrt[0])
    if mode != "reverse":
        raise ValueError(f"mode={mode!r}: only 'reverse' is available in this version")
    source, pool = pipeline.gradient_program(fs, wrt, single=single, optimized=optimize)
    if pool.values:
        raise ValueError(f"{fs.name} uses constants that have no literal form "
                         f"({', '.join(pool.values)}); emit cannot write them into a module")
    return emit.render_module([source], version=pipeline.VERSION,
                              origin=f"{_short_path(fs.filename)}:{fs.name}", key="standalone",
                              helpers=emit.helpers_used([source]), standalone=True)
