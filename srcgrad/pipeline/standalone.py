"""`srcgrad emit` and sg.emit_standalone: a transform's module written to run with its
array library alone, without srcgrad (imported by those only: nothing of a transform's
call runs it).

Note [Emitted container arguments]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
sg.grad compiles a function of a dict, list, tuple, namedtuple or dataclass argument for
the *structure* of the argument it is called with (Note [Container arguments] in
srcgrad.ir.tree); emit has no call, so it takes the structure from example arguments
(`args=`, `srcgrad emit --args`). The emitted module keeps the user's signature: a
wrapper `grad_f(params, x)` reads the leaves (`params['W1']`, `p.w`, `ws[0]`), calls the
flat-leaf function sg.grad compiles (`_grad_f_leaves`), and rebuilds the gradients as
the arguments nest: dict, list and tuple literals, and for a record the small
import-free helper `_record` (a namedtuple through its class, a dataclass made without
`__init__` with its fields set, as srcgrad.ir.tree.make_record does). Without example
arguments a parameter the body reads as a container (`params['W1']`, `p.w`) is refused
with the `--args` to pass, never emitted as an array.

A constant sg.grad binds as a module global (a folded `np.zeros(3)` a nested function
writes into, a global array) is written as a literal assignment (`_const0 =
numpy.asarray([...], dtype=numpy.float64)`); a constant with no literal form is refused.

A function whose shape-generic code sg.grad cannot compile but whose variant for its
first call's shapes it can (`u[0] = u[1]` on a 1-D `u`: `u[1]` is then a scalar, not a
view of `u`) is emitted as that variant when example arguments are given, with a check
that the arguments have those shapes.
"""

from __future__ import annotations

import ast
import contextlib
import inspect

from srcgrad import backend
from srcgrad.errors import CompileError
from srcgrad.pipeline.keys import VERSION
from srcgrad.pipeline.modules import _programs, parse_function, short_path

# array attributes a parameter read as `x.T` may have: anything else is a record's field
_ARRAY_ATTRIBUTES = frozenset({
    "T", "mT", "shape", "ndim", "size", "dtype", "real", "imag", "flat", "itemsize", "nbytes",
    "strides", "base", "flags", "data", "device"}) | frozenset(
    name for name in dir(__import__("numpy").ndarray) if not name.startswith("_"))

_RECORD_HELPER = '''def _record(like, **fields):
    """A `type(like)` with these fields: a namedtuple through its class, a dataclass
    made without calling `__init__` (its fields set directly, as `copy` does)."""
    cls = type(like)
    if isinstance(like, tuple):
        return cls(**fields)
    out = cls.__new__(cls)
    for name, value in fields.items():
        object.__setattr__(out, name, value)
    return out'''


def standalone_module(func, wrt: tuple, single: bool, mode: str, optimize: bool = True,
                      namespace: str = "numpy", args=None) -> str:
    """A module that runs with NumPy alone: `grad_<func>` (mode "reverse"), `<func>_jvp`
    ("forward") or both (`srcgrad emit`). `args`: example arguments, which give container
    arguments their structure (Note [Emitted container arguments])."""
    from srcgrad.codegen import emit

    fs = parse_function(func)
    if mode not in ("reverse", "forward", "both"):
        raise ValueError(f"mode={mode!r}: choose 'reverse', 'forward' or 'both'")
    for_numba, namespace = namespace == "numba", "numpy" if namespace == "numba" else namespace
    target = backend.STANDALONE[namespace]  # `emit --backend`: Note [Array namespaces]
    params = list(inspect.signature(func).parameters)
    if args is not None:
        from srcgrad.arguments import bound_args

        args = bound_args(func, tuple(args))
    else:
        _refuse_container_uses(fs, params)
    command = " ".join([f"srcgrad emit {short_path(fs.filename)}:{fs.name}"]
                       + ([f"--wrt {','.join(params[i] for i in wrt)}"]
                          if tuple(wrt) != tuple(range(len(params))) else [])
                       + ([f"--mode {mode}"] if mode != "reverse" else [])
                       + (["--no-optimize"] if not optimize else [])
                       + ([f"--backend {namespace}"] if namespace != "numpy" else [])
                       + (["--backend numba"] if for_numba else [])
                       + (["--args ..."] if args is not None else []))
    # (numba: NumPy's code without `out=` buffers, which numba's ufuncs do not take)
    with emit.namespace(target.spelling, target.mutable and not for_numba, target.describe(),
                        backend.reference(target)), tape_arrays(for_numba):
        from srcgrad.pipeline import fusion

        with fusion.fusing(fs) if for_numba else contextlib.nullcontext():
            text = _standalone(fs, func, wrt, single, mode, optimize, namespace, command, args,
                               variant_first=for_numba)
    if "\nimport numpy\n" in text:  # one import of NumPy: the namespace is NumPy itself
        text = text.replace("\nimport numpy as xp\n", "\nxp = numpy  # the array namespace\n", 1)
    if for_numba:
        from srcgrad.pipeline.numba_variants import emitted_for_numba

        text = emitted_for_numba(text, (f"grad_{fs.name}", f"{fs.name}_jvp"))
    return text


def tape_arrays(for_numba: bool):
    """Numba's tapes as preallocated arrays (Note [One tape per saved quantity])."""
    from srcgrad.passes.tapes import preallocated

    return preallocated() if for_numba else contextlib.nullcontext()


def _refuse_container_uses(fs, params) -> None:
    """A ValueError where the body reads a parameter as a container (`params['W1']`,
    `p.w`) and no example arguments say what it holds: emitting it as an array writes a
    module that fails when run (Note [Emitted container arguments])."""
    uses: dict = {}  # parameter -> [(line, col, what it reads)]
    for node in ast.walk(ast.parse(fs.source)):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
                and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            uses.setdefault(node.value.id, []).append((node.lineno, node.col_offset, node.slice.value))
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.attr not in _ARRAY_ATTRIBUTES:
            uses.setdefault(node.value.id, []).append((node.lineno, node.col_offset, "." + node.attr))
    for name in params:
        if name not in uses:
            continue
        found = sorted(uses[name])
        line, _, first = found[0]
        use = f"{name}{first}" if first.startswith(".") else f"{name}[{first!r}]"
        keys = list(dict.fromkeys(k for _, _, k in found))
        container = ("Class(" + ", ".join(f"{k[1:]}=(SHAPE)" for k in keys) + ")"
                     if first.startswith(".") else
                     "{" + ", ".join(f"{k!r}: (SHAPE)" for k in keys) + "}")
        example = ", ".join(container if p == name else "(SHAPE)" for p in params)
        raise ValueError(
            f"{short_path(fs.filename)}:{line + fs.line_offset}: {fs.name}() reads argument "
            f"`{name}` as a container (`{use}`); emit needs its structure: pass example "
            f"arguments, srcgrad emit --args \"{example}\" (a shape is a tuple of ints), or "
            f"srcgrad.api.emit_standalone({fs.name}, args=(...))")


def _standalone(fs, func, wrt, single, mode, optimize, namespace, command, args,
                variant_first=False) -> str:
    from srcgrad.codegen import emit
    from srcgrad.ir import tree as pytree

    sources, constants, extra = [], {}, []
    leaves, trees = pytree.flatten_args(args) if args is not None else (None, None)
    containers = trees is not None and any(t != pytree.LEAF for t in trees)
    if mode in ("reverse", "both"):
        if containers:
            name = f"_grad_{fs.name}_leaves"
            source, pool, _ = _specialised_or_generic(
                lambda a: _programs().container_gradient_program(
                    fs, wrt, trees, optimized=optimize, fn_name=name, args=a), leaves, variant_first)
            sources += [source, _wrapper(func, fs.name, name, trees, wrt, single, args)]
            if "_record(" in sources[-1]:
                extra.append(_RECORD_HELPER)
        else:
            source, pool = _specialised_or_generic(
                lambda a: _programs().gradient_program(fs, wrt, single=single, optimized=optimize,
                                                       args=a), args, variant_first)
            sources.append(source)
        constants.update(pool.values)
    if mode in ("forward", "both"):
        if containers:
            raise ValueError(f"emit --mode {mode} of container arguments ({fs.name}): not yet; "
                             "emit reverse mode, or pass the arrays as separate arguments")
        program = _programs().jvp_program(fs, optimized=optimize, wrt=wrt)
        sources.extend(program.sources)
        constants.update(program.constants)
    if constants:
        extra.append(_constant_lines(fs, constants))
    text = emit.render_module(extra + sources, version=VERSION,
                              origin=f"{short_path(fs.filename)}:{fs.name}",
                              key="standalone", helpers=emit.helpers_used(sources), standalone=True,
                              backend=namespace, command=command)
    return text


def _specialised_or_generic(compile_, args, variant_first=False):
    """The shape-generic program; where only a variant for `args`' shapes compiles
    (Note [Emitted container arguments]), that variant, with a check of the shapes.
    `variant_first` (emit --backend numba with --args): the variant where it compiles,
    whose known shapes spare numba the shape-generic helpers."""
    if variant_first and args is not None and all(hasattr(a, "shape") for a in args):
        try:
            result = compile_(tuple(args))
            return (_with_shape_check(result[0], args, "for numba: --args"),) + tuple(result[1:])
        except CompileError:
            pass
    try:
        return compile_(None)
    except CompileError as err:
        if args is None:
            err.hint = "; ".join(filter(None, [err.hint, (
                "or give `srcgrad emit --args` the arguments' shapes: sg.grad compiles this "
                "for the shapes of its call, and emit then writes that code")]))
            raise
        if any(not hasattr(a, "shape") for a in args):
            raise
        generic = err
    try:
        result = compile_(tuple(args))
    except Exception:
        raise generic from None
    return (_with_shape_check(result[0], args),) + tuple(result[1:])


def _with_shape_check(source: str, args, why="the shape-generic code does not compile") -> str:
    """`source`'s function refusing arguments of other shapes than `args`'."""
    fn = ast.parse(source).body[0]
    names = [a.arg for a in fn.args.args]
    shapes = tuple(tuple(a.shape) for a in args)
    test = " or ".join(f"xp.shape({n}) != {s!r}" for n, s in zip(names, shapes))
    said = ", ".join(f"{n} {s}" for n, s in zip(names, shapes))
    lines = source.split("\n")
    body = fn.lineno  # after the `def` line, and after a docstring
    if isinstance(fn.body[0], ast.Expr) and isinstance(getattr(fn.body[0], "value", None), ast.Constant):
        body = fn.body[0].end_lineno
    message = (f"{fn.name} was emitted for arguments of the shapes {said} ({why}): emit it "
               "again with --args of these shapes")
    check = [f"    if {test}:", f"        raise ValueError({message!r})"]
    return "\n".join(lines[:body] + check + lines[body:])


def _wrapper(func, name: str, impl: str, trees, wrt, single, args) -> str:
    """`grad_<name>(<the user's parameters>)`: the leaves into `impl`, the gradients
    rebuilt as the arguments nest (Note [Emitted container arguments])."""
    from srcgrad.ir import tree as pytree

    params = list(inspect.signature(func).parameters)[:len(trees)]
    reads: list = []

    def read(t, expr):
        if t[0] == "leaf":
            reads.append(expr)
        elif t[0] == "dict":
            for k, c in zip(t[1], t[2]):
                read(c, f"{expr}[{k!r}]")
        elif t[0] == "record":
            for k, c in zip(t[2], t[3]):
                read(c, f"{expr}.{k}")
        else:
            for i, c in enumerate(t[1]):
                read(c, f"{expr}[{i}]")

    for p, t in zip(params, trees):
        read(t, p)
    flat = iter(range(sum(pytree.num_leaves(trees[i]) for i in wrt)))

    def build(t, expr):
        if t[0] == "leaf":
            return f"_g[{next(flat)}]"
        if t[0] == "dict":
            return "{" + ", ".join(f"{k!r}: {build(c, f'{expr}[{k!r}]')}" for k, c in zip(t[1], t[2])) + "}"
        if t[0] == "record":
            fields = [f"{k}={build(c, f'{expr}.{k}')}" for k, c in zip(t[2], t[3])]
            fields += [f"{k}={expr}.{k}" for k, _ in t[4]]  # configuration, carried unchanged
            return f"_record({expr}, {', '.join(fields)})"
        items = [build(c, f"{expr}[{i}]") for i, c in enumerate(t[1])]
        if t[0] == "list":
            return "[" + ", ".join(items) + "]"
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"

    grads = [build(trees[i], params[i]) for i in wrt]
    result = grads[0] if single else "(" + ", ".join(grads) + ("," if len(grads) == 1 else "") + ")"
    return "\n".join([
        f"def grad_{name}({', '.join(params)}):",
        f'    """The gradient of {name}: the arguments\' leaves into {impl}, the gradients',
        '    nested as the arguments are."""',
        f"    _g = {impl}({', '.join(reads)})",
        f"    return {result}"])


def _constant_lines(fs, constants: dict) -> str:
    """Module-level assignments re-creating the arrays sg.grad binds as globals (a
    folded `np.zeros(3)`, a global array), from their values: `float.__repr__` and
    `int.__repr__` read back exactly. Other objects have no such form: refused."""
    import numpy

    lines = ["# the constants the code reads, as the values sg.grad binds"]
    for name, value in constants.items():
        if isinstance(value, (numpy.ndarray, numpy.generic)) and value.dtype.kind in "biuf" \
                and value.size <= 100_000:
            data = repr(numpy.asarray(value).tolist())
            made = f"numpy.asarray({data}, dtype=numpy.{value.dtype.name})"
            lines.append(f"{name} = {made}" if isinstance(value, numpy.ndarray) else
                         f"{name} = {made}[()]")  # a NumPy scalar, not a 0-d array
            continue
        raise ValueError(f"{fs.name} uses a constant that has no literal form ({name}: "
                         f"{type(value).__name__}); emit cannot write it into a module")
    return "\n".join(lines)
