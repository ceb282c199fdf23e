"""IR → Python source.

Python decides every line: each op becomes one statement, rendered from its rule's
`render` template by substituting operands into the template's AST (so precedence
is always right) and dropping keyword arguments left at their defaults. jinja2
only lays out the module and function skeletons (templates/). Every module is
checked with `ast.parse` before it leaves this module, its functions with it.
"""

from __future__ import annotations

import ast
import contextlib
import contextvars
import functools
import inspect
import math
import os
import re
import warnings
from pathlib import Path

import numpy

from srcgrad import rules
from srcgrad.codegen import templating
from srcgrad.digest import sha256  # (not OpenSSL's: its load is 3 ms of a compile)
from srcgrad.errors import CompileError
from srcgrad.ir.core import Const, Pack, Var

# ---------------------------------------------------------------------- namespaces
# What the code being rendered calls (Note [Array namespaces] in srcgrad.backend):
# (spelling, mutable, label, what is known of the values so far, the namespace module).
# NumPy's unless a pipeline renders inside `namespace()`.


class _Known:
    """What the code rendered so far for another namespace than NumPy holds, by name (a
    name is bound once in a render): boolean arrays, arrays of the namespace, and Python
    values that are never arrays (shapes, sizes). Note [Python numbers in other namespaces]."""

    __slots__ = ("bools", "arrays", "static", "ints")

    def __init__(self):
        self.bools: set = set()
        self.arrays: set = set()
        self.static: set = set()
        self.ints: set = set()  # Python ints (a `range` loop's index): an index's one axis


_NAMESPACE = contextvars.ContextVar("srcgrad_namespace", default=("numpy", True, "numpy", _Known(), None))


@contextlib.contextmanager
def namespace(spelling: str, mutable: bool, label: str, module=None):
    """Render for a namespace: its spelling (srcgrad.codegen.spellings), whether its
    arrays may be written in place (`out=`), its name for error messages, and the
    namespace `module` itself (when known) to check every `xp.<name>` against."""
    token = _NAMESPACE.set((spelling, mutable, label, _Known(), module))
    try:
        yield
    finally:
        _NAMESPACE.reset(token)


# ---------------------------------------------------------------------- operands
class ConstPool:
    """Constants that have no literal form, bound as module globals `_const0`, ..."""

    def __init__(self):
        self.by_id: dict = {}
        self.values: dict = {}

    def name_for(self, value) -> str:
        entry = self.by_id.get(id(value))
        if entry is None:
            name = f"_const{len(self.values)}"
            self.by_id[id(value)] = (name, value)  # keep value alive so its id stays unique
            self.values[name] = value
            return name
        return entry[0]


def operand_ast(operand, pool: ConstPool, in_index: bool = False) -> ast.expr:
    if isinstance(operand, Var):
        return ast.Name(operand.name, ast.Load())
    if isinstance(operand, Pack):
        items = [operand_ast(i, pool) for i in operand.items]
        if operand.style == "slice":
            if in_index:
                return ast.Slice(*(None if _is_none(i) else a for i, a in zip(operand.items, items)))
            return _call("slice", items)
        if in_index and operand.style == "tuple":
            return ast.Tuple([operand_ast(i, pool, in_index=True) for i in operand.items], ast.Load())
        return (ast.Tuple if operand.style == "tuple" else ast.List)(items, ast.Load())
    return const_ast(operand.value, pool, in_index)


def _is_none(operand) -> bool:
    return isinstance(operand, Const) and operand.value is None


def _call(name, args):
    return ast.Call(ast.Name(name, ast.Load()), list(args), [])


def _xp_asarray(node: ast.expr) -> ast.expr:
    return ast.Call(ast.Attribute(ast.Name("xp", ast.Load()), "asarray", ast.Load()), [node], [])


def const_ast(value, pool: ConstPool, in_index: bool = False) -> ast.expr:
    if isinstance(value, numpy.generic) and value.dtype.kind in "fiub" and value.ndim == 0:
        # a NumPy scalar keeps its dtype (NEP 50: it is not a weak Python scalar)
        if _NAMESPACE.get()[0] == "array-api":  # dtypes are not callable there
            return ast.parse(f"xp.asarray({value.item()!r}, dtype=xp.{value.dtype.name})",
                             mode="eval").body
        return ast.Call(ast.Attribute(ast.Name("xp", ast.Load()), value.dtype.name, ast.Load()),
                        [ast.Constant(value.item())], [])
    if isinstance(value, numpy.ndarray) and _NAMESPACE.get()[2] != "numpy":
        # a folded constant (`np.ones(3)`) is NumPy's: another namespace's arrays do not
        # mix with it (array_api_strict and CuPy raise TypeError), so it is converted
        return _xp_asarray(ast.Name(pool.name_for(value), ast.Load()))
    if value is None or value is Ellipsis or isinstance(value, (bool, str, int)):
        return ast.Constant(value)
    if isinstance(value, float):
        if math.isfinite(value):
            return ast.Constant(value)
        return _call("float", [ast.Constant(repr(value))])
    if isinstance(value, tuple):
        return ast.Tuple([const_ast(v, pool, in_index) for v in value], ast.Load())
    if isinstance(value, list):
        return ast.List([const_ast(v, pool) for v in value], ast.Load())
    if isinstance(value, slice):
        parts = [None if p is None else const_ast(p, pool) for p in (value.start, value.stop, value.step)]
        if in_index:
            return ast.Slice(*parts)
        return _call("slice", [p or ast.Constant(None) for p in parts])
    if isinstance(value, type) and issubclass(value, numpy.generic):
        return ast.Attribute(ast.Name("xp", ast.Load()), value.__name__, ast.Load())
    if isinstance(value, numpy.dtype):
        return ast.Attribute(ast.Name("xp", ast.Load()), value.name, ast.Load())
    return ast.Name(pool.name_for(value), ast.Load())


# ---------------------------------------------------------------------- ops
def _template(render: str) -> ast.expr:
    """A render's expression, a fresh tree per op: `_Substitute` edits it in place (a
    parse of the short text costs half of copying a cached tree through ast.unparse)."""
    return ast.parse(render, mode="eval").body


class _Substitute(ast.NodeTransformer):
    """Put an op's operands into its rule's render template.

    `wrap_floats` (an Array-API call): a float constant operand is made an array, and so
    is any operand of `array_params` that `known` does not know to be an array (Note
    [Python numbers in other namespaces]); `known` also lets `xp.asarray(x)` of a known
    array be `x`."""

    def __init__(self, rule, operands: dict, pool, wrap_floats: bool = False, array_params=(),
                 known: _Known | None = None, numbers=()):
        self.rule, self.operands, self.pool = rule, operands, pool
        self.defaults = {n: p.default for n, p in rule.py_signature.parameters.items()}
        self.wrap_floats = wrap_floats
        self.array_params, self.known = array_params, known
        self.numbers = numbers  # parameters the namespace takes as Python numbers (SCALAR_ARGS)

    def visit_Name(self, node):
        if node.id in self.operands:
            operand = self.operands[node.id]
            if isinstance(operand, _AsNumber):
                return operand.ast(self.pool)
            if node.id in self.array_params:
                return self._as_array(operand)
            if self.wrap_floats and isinstance(operand, Const) and type(operand.value) is float \
                    and node.id not in self.numbers:
                # Array-API functions take arrays, not Python floats (NumPy takes both)
                return _xp_asarray(operand_ast(operand, self.pool))
            return operand_ast(operand, self.pool)
        return node

    def _as_array(self, operand) -> ast.expr:
        """An operand the namespace's function takes as an array: made one unless known to
        be one (a Python float argument, `1.0`, a list of arrays and numbers for stack)."""
        if isinstance(operand, Pack) and operand.style in ("tuple", "list"):
            items = [self._as_array(i) for i in operand.items]
            return (ast.Tuple if operand.style == "tuple" else ast.List)(items, ast.Load())
        node = operand_ast(operand, self.pool)
        if _may_be_number(operand, self.known) or isinstance(operand, Const) and type(operand.value) is float:
            return _xp_asarray(node)
        return node

    def visit_Subscript(self, node):
        node.value = self.visit(node.value)
        if isinstance(node.slice, ast.Name) and node.slice.id in self.operands:
            operand = self.operands[node.slice.id]
            node.slice = operand_ast(operand, self.pool, in_index=True)
            if self.wrap_floats and (not isinstance(operand, Var) or self._is_int(operand)):
                node.slice = _with_ellipsis(node.slice)
        else:
            node.slice = self.visit(node.slice)
        return node

    def visit_Call(self, node):
        wrap, array_params = self.wrap_floats, self.array_params
        if _is_xp_call(node, "asarray"):  # its operand is made an array here: not twice
            known = self._known_array(node)
            if known is not None:
                return known
            self.wrap_floats, self.array_params = False, frozenset()
        try:
            return self._substitute_call(node)
        finally:
            self.wrap_floats, self.array_params = wrap, array_params

    def _is_int(self, operand) -> bool:
        return self.known is not None and operand.name in self.known.ints

    def _known_array(self, node) -> ast.expr | None:
        """`xp.asarray(x)` of an operand known to be the namespace's array: that operand."""
        if self.known is None or node.keywords or len(node.args) != 1:
            return None
        if not isinstance(node.args[0], ast.Name):
            return None
        operand = self.operands.get(node.args[0].id)
        if isinstance(operand, Var) and operand.name in self.known.arrays:
            return operand_ast(operand, self.pool)
        return None

    def _substitute_call(self, node):
        node.func = self.visit(node.func)
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred) and isinstance(a.value, ast.Name) \
                    and isinstance(self.operands.get(a.value.id), Pack):
                items = self.operands[a.value.id].items
                if a.value.id in self.array_params:
                    args.extend(self._as_array(i) for i in items)
                else:
                    args.extend(operand_ast(i, self.pool) for i in items)
            else:
                args.append(self.visit(a))
        node.args = args
        keywords = []
        for kw in node.keywords:
            if isinstance(kw.value, ast.Name) and kw.value.id in self.operands:
                operand = self.operands[kw.value.id]
                default = self.defaults.get(kw.value.id, inspect.Parameter.empty)
                if isinstance(operand, Const) and _same_const(operand.value, default):
                    continue
            keywords.append(self.visit(kw))
        node.keywords = keywords
        return node


def _is_xp_call(node: ast.Call, name: str) -> bool:
    func = node.func
    return (isinstance(func, ast.Attribute) and func.attr == name and isinstance(func.value, ast.Name)
            and func.value.id == "xp")


def _with_ellipsis(index: ast.expr) -> ast.expr:
    """A static index ending in `...` where it has none: the Array API wants every axis
    named or an ellipsis (`x[1]` of a matrix is `x[1, ...]`); NumPy reads both alike."""
    parts = list(index.elts) if isinstance(index, ast.Tuple) else [index]
    if any(isinstance(p, ast.Constant) and p.value is Ellipsis for p in parts):
        return index
    return ast.Tuple(parts + [ast.Constant(Ellipsis)], ast.Load())


def _same_const(value, default) -> bool:
    if default is inspect.Parameter.empty:
        return False
    return type(value) is type(default) and value == default


def op_expr(op, pool: ConstPool) -> ast.expr:
    rule = rules.RULES[op.prim]
    spelling, _, label, known, module = _NAMESPACE.get()
    render, method = rule.render, op.attrs.get("as_method")
    if spelling != "numpy":  # Note [Spellings]
        from srcgrad.codegen import spellings  # (another namespace's renders only: issue 15)
        spelled = spellings.spelling_of(op.prim, spelling)
        if isinstance(spelled, spellings.Refused):
            raise _refused(op, label, spelled.reason)
        render, method = spelled or render, None  # methods are NumPy's
    if label != "numpy":  # (CuPy too, which is spelled as NumPy)
        from srcgrad.codegen import spellings

        if op.prim in spellings.OTHER_NAMESPACES:
            render, method = spellings.OTHER_NAMESPACES[op.prim], None
    template = _template(render)
    if "arrays" in op.attrs:  # srcgrad.passes.array_spellings: operands known to be arrays
        template = _NotNone(op.attrs["arrays"]).visit(template)
    if method and _is_namespace_call(template, rule.params[0]):
        # xp.f(x, *rest) -> x.method(*rest): the receiver is known to be an array
        template.func = ast.Attribute(template.args[0], method, ast.Load())
        template.args = template.args[1:]
    operands = dict(zip(rule.params, op.args))
    if spelling != "numpy":  # a spelled render may branch on a parameter left at its default
        for name, p in rule.py_signature.parameters.items():
            if name not in operands and p.default is not inspect.Parameter.empty:
                operands[name] = Const(p.default)
    if spelling != "numpy":
        operands = _array_api_operands(op, operands, known.bools, label)
    wrap = spelling != "numpy" and (isinstance(template, ast.Call)
                                    or op.prim == "getitem" and not _is_static(operands["x"], known))
    other = label != "numpy"  # Note [Python numbers in other namespaces]
    numbers = spellings.SCALAR_ARGS.get(op.prim, frozenset()) if other else frozenset()
    arrays = _operands_made_arrays(rule, operands, known) - numbers \
        if other and isinstance(template, ast.Call) else frozenset()
    expr = _Substitute(rule, operands, pool, wrap_floats=wrap, array_params=arrays,
                       known=known if other else None, numbers=numbers).visit(template)
    if spelling != "numpy" or " is None" in render:  # (einsum's absent operand: `None is None`)
        expr = _FoldStatic().visit(expr)
    if spelling != "numpy":
        for node in ast.walk(expr):
            if isinstance(node, ast.Name) and node.id in spellings.REFUSED_BRANCHES:
                raise _refused(op, label, spellings.REFUSED_BRANCHES[node.id])
        missing = _missing_names(expr, module)
        if missing:
            raise _refused(op, label, f"it has no `xp.{missing}`")
    if other:
        _note_kinds(op, expr, known)
    return expr


# Note [Python numbers in other namespaces]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# NumPy's functions take a Python number wherever they take an array; the Array API's
# take arrays (`xp.tanh(0.5)`, `xp.minimum(c, c)` of two floats, `xp.stack([a, 3.0])`
# and `c.shape` raise in array_api_strict). Another namespace runs the shape-generic
# code, compiled once for every call, so whether an argument `c` is a float is not
# known when rendering. What is known, by name as the ops are rendered in order
# (`_Known`): a namespace call's result is an array (`_note_kinds`), so is arithmetic
# or indexing on one, and a static row's result (a shape) never is. An operand the
# namespace function takes as an array (`_array_params`: a differentiable parameter,
# an elementwise row's operand) that is not known to be one is written
# `xp.asarray(c)`, a float constant too, unless an elementwise call has an operand
# known to be an array (one Python number beside it is taken everywhere, weak as in
# NumPy); `xp.asarray(x)` of a known array is `x`. CuPy too, though spelled as NumPy:
# its reductions and shape functions call the operand's method (`cupy.sum(c)` is
# `c.sum()`, cupy.clip `c.clip`), which a float lacks.
# The shape rows read `xp.asarray(x).shape` (srcgrad.codegen.spellings). A static
# receiver's index (`_shape[0]`, a tuple) gets no Array-API ellipsis; an index known
# to be a Python int (a `range` loop's index, int arithmetic on one, INT_RESULTS)
# gets one as a constant index does (`x[i, ...]`: the Array API indexes every axis).
# NumPy constants folded at compile time are converted for every namespace but NumPy's.

_ARRAY_PARAMS: dict = {}  # rule name -> the parameters its function takes as arrays


def _array_params(rule) -> frozenset:
    params = _ARRAY_PARAMS.get(rule.name)
    if params is None:
        empty = inspect.Parameter.empty
        operands = {n for n, p in rule.py_signature.parameters.items()
                    if rule.elementwise and p.default is empty and p.kind is p.POSITIONAL_OR_KEYWORD}
        params = _ARRAY_PARAMS[rule.name] = frozenset(rule.vjp) | frozenset(rule.jvp) | operands
    return params


def _operands_made_arrays(rule, operands: dict, known: _Known) -> frozenset:
    """The parameters whose operands are written `xp.asarray(...)` unless known to be arrays:
    the rule's array parameters, except in an elementwise call with an operand known to be
    an array, where the other values (the differentiable operands) may stay Python numbers
    (every namespace takes one beside an array, as NumPy's weak scalars: a float32 array
    stays float32); a mask (where's condition) is always an array."""
    params = _array_params(rule)
    if rule.elementwise and any(isinstance(operands.get(p), Var) and operands[p].name in known.arrays
                                for p in params):
        return params - frozenset(rule.vjp) - frozenset(rule.jvp)
    return params


def _may_be_number(operand, known: _Known | None) -> bool:
    """A Var that may hold a Python number (or bool): neither a known array nor a static value."""
    return (known is not None and isinstance(operand, Var) and operand.name not in known.arrays
            and operand.name not in known.static)


def _is_static(operand, known: _Known) -> bool:
    return isinstance(operand, Var) and operand.name in known.static


def _note_kinds(op, expr, known: _Known) -> None:
    from srcgrad.codegen import spellings

    names = [o.name for o in op.outs]
    if op.prim in spellings.INT_RESULTS or _makes_int(expr, known.ints):
        known.ints.update(names)
    if rules.RULES[op.prim].static_out:
        known.static.update(names)
    elif _makes_array(expr, known.arrays):
        known.arrays.update(names)


def _makes_int(node, ints: set) -> bool:
    """Python int arithmetic on known ints and int literals (`i + 1` of a loop index)."""
    if isinstance(node, ast.Name):
        return node.id in ints
    if isinstance(node, ast.Constant):
        return type(node.value) is int
    if isinstance(node, ast.BinOp) and not isinstance(node.op, (ast.Div, ast.Pow)):
        return _makes_int(node.left, ints) and _makes_int(node.right, ints)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _makes_int(node.operand, ints)
    return False


def _makes_array(node, arrays: set) -> bool:
    """Is this expression (each of its values, for several outputs) the namespace's array?"""
    if isinstance(node, ast.Call):
        return _is_namespace_function(node.func)
    if isinstance(node, ast.Name):
        return node.id in arrays
    if isinstance(node, ast.BinOp):
        return _makes_array(node.left, arrays) or _makes_array(node.right, arrays)
    if isinstance(node, ast.UnaryOp):
        return _makes_array(node.operand, arrays)
    if isinstance(node, ast.Subscript):
        return _makes_array(node.value, arrays)
    if isinstance(node, ast.Compare):  # (of two Python numbers: a bool)
        return any(_makes_array(n, arrays) for n in (node.left, *node.comparators))
    if isinstance(node, ast.IfExp):
        return _makes_array(node.body, arrays) and _makes_array(node.orelse, arrays)
    return False


def _is_namespace_function(func) -> bool:
    """`xp.f` or `xp.linalg.f`, f not a NumPy scalar type (`xp.float64(2.0)` is a NumPy
    scalar under NumPy's spelling, CuPy's)."""
    chain = []
    while isinstance(func, ast.Attribute):
        chain.append(func.attr)
        func = func.value
    return (isinstance(func, ast.Name) and func.id == "xp" and bool(chain)
            and not isinstance(getattr(numpy, chain[0], None), type))


def _array_api_operands(op, operands: dict, bools: set, label: str) -> dict:
    """Operands as the Array API takes them: a boolean mask in arithmetic is cast to the
    other operand's dtype (NumPy reads True as 1; the Array API refuses), and an integer
    list or array as a constant index is refused (its gradient needs a scatter-add)."""
    from srcgrad.codegen import spellings  # (as op_expr's: imported by an Array-API render)

    if op.prim in spellings.BOOLEAN_RESULTS:
        bools.update(o.name for o in op.outs)
    if op.prim in spellings.ARITHMETIC and len(operands) == 2:
        (p, a), (q, b) = operands.items()
        if isinstance(a, Var) and a.name in bools or isinstance(b, Var) and b.name in bools:
            operands = {p: _AsNumber(a, b, bools), q: _AsNumber(b, a, bools)}
    if op.prim in spellings.COUNTS:
        x = operands["x"]
        if isinstance(x, Var) and x.name in bools:
            operands = {**operands, "x": _AsNumber(x, Const(0), bools, "int64")}
    if op.prim == "getitem":
        index = operands.get("index")
        values = index.value if isinstance(index, Const) else ()
        for v in values if isinstance(values, tuple) else (values,):
            if isinstance(v, (list, numpy.ndarray)) and numpy.asarray(v).dtype.kind in "iu":
                raise _refused(op, label, spellings.NO_SCATTER_ADD.reason)
    return operands


class _AsNumber:
    """An operand read as a number: `xp.astype(mask, other.dtype)` for a boolean Var."""

    def __init__(self, operand, other, bools, dtype="float64"):
        self.operand, self.other, self.bools, self.dtype = operand, other, bools, dtype

    def ast(self, pool):
        node = operand_ast(self.operand, pool)
        if not (isinstance(self.operand, Var) and self.operand.name in self.bools):
            return node
        if isinstance(self.other, Var) and self.other.name not in self.bools:
            dtype = ast.Attribute(operand_ast(self.other, pool), "dtype", ast.Load())
        else:
            dtype = ast.Attribute(ast.Name("xp", ast.Load()), self.dtype, ast.Load())
        return ast.Call(ast.Attribute(ast.Name("xp", ast.Load()), "astype", ast.Load()), [node, dtype], [])


def _missing_names(expr, module) -> str | None:
    """The first `xp.a.b` the expression calls that `module` lacks (None: all there, or
    no module to ask)."""
    if module is None:
        return None
    for node in ast.walk(expr):
        chain = []
        while isinstance(node, ast.Attribute):
            chain.append(node.attr)
            node = node.value
        if chain and isinstance(node, ast.Name) and node.id == "xp":
            obj = module
            for name in reversed(chain):
                obj = getattr(obj, name, None)
                if obj is None:
                    return ".".join(reversed(chain))
    return None


def _refused(op, label: str, reason: str) -> CompileError:
    return CompileError.at(op.loc, f"`{op.prim}` has no equivalent in {label}: {reason}",
                           hint="compute this with NumPy, or write it with Array-API functions")


class _NotNone(ast.NodeTransformer):
    """Decide a render's `p is None` (`is not None`) for parameters `p` bound to known
    arrays (srcgrad.passes.array_spellings): False (True), so the branch taken stays."""

    def __init__(self, params):
        self.params = params

    def visit_IfExp(self, node):
        self.generic_visit(node)
        test = node.test
        if (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id in self.params
                and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Is, ast.IsNot))
                and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None):
            return node.body if isinstance(test.ops[0], ast.IsNot) else node.orelse
        return node


class _FoldStatic(ast.NodeTransformer):
    """Fold `a if <test> else b` whose test reads no variable (`None is None` once a
    static parameter is substituted): a spelled render's branch on a static value."""

    def visit_IfExp(self, node):
        self.generic_visit(node)
        names = {n.id for n in ast.walk(node.test) if isinstance(n, ast.Name)}
        if names <= {"int", "str", "isinstance"}:
            try:
                with warnings.catch_warnings():  # `2 is None`: a literal compared by identity
                    warnings.simplefilter("ignore", SyntaxWarning)
                    taken = eval(ast.unparse(node.test),  # noqa: S307 - constants only, no names
                                 {"__builtins__": {"int": int, "str": str, "isinstance": isinstance}})
            except Exception:  # noqa: BLE001 - not static after all: keep the run-time test
                return node
            return node.body if taken else node.orelse
        return node


def _is_namespace_call(node, first_param) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "xp"
            and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id == first_param)


def op_statement(op, pool: ConstPool) -> str:
    targets = ", ".join(o.name for o in op.outs)
    into = op.attrs.get("out") if _NAMESPACE.get()[1] else None  # immutable arrays: no out=
    if "add_at" in op.attrs or "add_into" in op.attrs:  # Note [Sums in adjoint loops]
        acc = (op.attrs.get("add_at") or op.attrs["add_into"]).name
        at = f"[{operand_source(op.args[2], pool)}]" if "add_at" in op.attrs else ""
        added = op_expr(op, pool) if at or not _NAMESPACE.get()[1] else op.args[1]
        if not _NAMESPACE.get()[1]:  # immutable arrays: a new sum
            return f"{acc} = {ast.unparse(added)}" if not at else f"{acc} = {acc} + {ast.unparse(added)}"
        return f"{acc}{at} += {operand_source(op.args[0] if at else op.args[1], pool)}"
    if into is not None:  # srcgrad.passes.inplace: the result reuses a dead operand's buffer
        args = ", ".join(operand_source(a, pool) for a in op.args)
        return f"{targets} = xp.{op.attrs['ufunc']}({args}, out={into.name})"
    if "math" in op.attrs:  # Note [Scalar code]: Python floats in, a Python float out
        return f"{targets} = math.{op.attrs['math']}({', '.join(operand_source(a, pool) for a in op.args)})"
    if "python_float" in op.attrs:  # an np.float64 argument as a Python float
        return f"{targets} = float({operand_source(op.args[0], pool)})"
    if "python_value" in op.attrs:
        return f"{targets} = {operand_source(op.attrs['python_value'], pool)}"
    if op.prim == "custom_call":  # Note [Custom Functions]: name the forward's outputs
        return f"{targets} = {', '.join(operand_source(a, pool) for a in op.args[0].items)}"
    if op.prim == "tape_pop":  # a tuple per iteration (Note [Reverse mode of control flow])
        return f"{targets}, = {op.args[0].name}.pop()" if op.outs else f"{op.args[0].name}.pop()"
    if not op.outs:
        return ast.unparse(op_expr(op, pool))
    if len(op.outs) == 1 and callable(rules.RULES[op.prim].nout):
        targets += ","
    return f"{targets} = {ast.unparse(op_expr(op, pool))}"


def control_lines(op, pool: ConstPool, backward: bool) -> list:
    """`if`/`for`/`while` statements for a control-flow op (Note [Regions])."""
    def body(block, extra=()):
        lines = block_lines(block.ops, pool, backward=backward) + list(extra)
        return ["    " + line if line else "" for line in (lines or ["pass"])]

    def assign(targets, values):
        pairs = [(t, v) for t, v in zip(targets, values) if t != v]
        if not pairs:
            return []
        return [f"{', '.join(t for t, _ in pairs)} = {', '.join(v for _, v in pairs)}"]

    names = [o.name for o in op.outs]
    if op.prim == "cond":
        then, other = op.blocks
        return ([f"if {operand_source(op.args[0], pool)}:"]
                + body(then, assign(names, [operand_source(r, pool) for r in then.results]))
                + ["else:"]
                + body(other, assign(names, [operand_source(r, pool) for r in other.results])))
    block = op.blocks[0]
    carried = [p.name for p in block.params[1:]]
    inits = [operand_source(a, pool) for a in op.args[-1].items]
    results = [operand_source(r, pool) for r in block.results]
    if op.prim == "while_loop":
        flag = block.params[0].name
        return (assign([flag] + carried, [operand_source(op.args[0], pool)] + inits)
                + [f"while {flag}:"]
                + body(block, assign([flag] + carried, results))
                + assign(names, carried))
    start, stop, step = (operand_source(a, pool) for a in op.args[:3])
    bounds = stop if start == "0" and step == "1" else (
        f"{start}, {stop}" if step == "1" else f"{start}, {stop}, {step}")
    iterable = f"range({bounds})" + ("[::-1]" if op.attrs.get("reverse") else "")
    until = op.attrs.get("until")  # a `break`'s flag (Note [Tracing control flow])
    leave = [f"if {until.name}:", "    break"] if until is not None else []
    if _NAMESPACE.get()[2] != "numpy":  # Note [Python numbers in other namespaces]
        _NAMESPACE.get()[3].ints.add(block.params[0].name)
    return (assign(carried, inits)
            + [f"for {block.params[0].name} in {iterable}:"]
            + body(block, assign(carried, results) + leave)
            + assign(names, carried))


def operand_source(operand, pool: ConstPool) -> str:
    if isinstance(operand, Var):  # (what ast.unparse writes of its Name, without the unparser)
        return operand.name
    return ast.unparse(operand_ast(operand, pool))


# ---------------------------------------------------------------------- blocks
def block_lines(ops: list, pool: ConstPool, *, backward: bool = False) -> list:
    """Statements for `ops`, one comment per run of ops from one source line."""
    lines, last = [], object()
    for op in ops:
        loc = op.loc
        key = (loc.file, loc.line) if loc else None
        if key != last:
            if loc is not None:
                if lines:
                    lines.append("")
                where = f"({os.path.basename(loc.file)}:{loc.line})"
                lines.append(f"# grad of: {loc.text}  {where}" if backward else f"# {loc.text}  {where}")
            last = key
        if rules.RULES[op.prim].control:
            lines.extend(control_lines(op, pool, backward))
            last = object()  # a comment again after the block
        else:
            lines.append(op_statement(op, pool))
    return lines


# ---------------------------------------------------------------------- templates
@functools.cache
def _template_dir() -> Path:
    return Path(_template_folder())


@functools.cache
def _template_folder() -> str:
    """templates/, found with os.path first (pathlib's objects and an import of
    srcgrad.templates cost a first compile 0.35 ms: issue 15)."""
    here = os.path.dirname(os.path.dirname(__file__))  # the srcgrad package
    for path in (os.path.join(here, "templates"),  # a wheel
                 os.path.join(os.path.dirname(here), "templates")):  # a source checkout
        if os.path.isfile(os.path.join(path, "module.py.j2")):
            return path
    return str(_template_dir_elsewhere())


def _template_dir_elsewhere() -> Path:
    try:  # a directory in another layout: no importlib.resources where it need not (issue 15)
        import srcgrad.templates as package

        path = Path(package.__file__).parent
        if (path / "module.py.j2").is_file():
            return path
    except (ImportError, AttributeError, TypeError):
        pass
    try:
        import importlib.resources

        path = Path(str(importlib.resources.files("srcgrad.templates")))
        if path.is_dir():
            return path
    except (ModuleNotFoundError, TypeError):
        pass
    return Path(__file__).resolve().parents[2] / "templates"  # a source checkout


@functools.lru_cache(maxsize=1)
def _environment():
    import jinja2  # only when a module is rendered: a disk-cache hit never needs it

    return jinja2.Environment(loader=jinja2.FileSystemLoader(_template_folder()),
                              trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                              undefined=jinja2.StrictUndefined, autoescape=False)


@functools.cache
def _parsed_template(name: str):
    """A template's nodes for srcgrad.codegen.templating, or None where it uses more of
    Jinja2 than that subset (Note [Templates without jinja2])."""
    try:
        with open(os.path.join(_template_folder(), name), encoding="utf-8") as file:
            return templating.parse(file.read())
    except templating.Unsupported:
        return None


def _render(template: str, **context) -> str:
    """Render templates/<name>: without jinja2 where the template allows (a fresh process's
    first compile then never imports it), else with it."""
    nodes = _parsed_template(template)
    if nodes is None:
        return _environment().get_template(template).render(**context)
    return templating.render(nodes, context)


@functools.lru_cache(maxsize=1)
def templates_fingerprint() -> str:
    h = sha256()
    for path in sorted(_template_dir().glob("*.j2")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def render_function(name: str, params: list, body: list, result: str, doc: str = "") -> str:
    text = _render("function.py.j2", name=name, params=params, body=body, result=result, doc=doc)
    return text.rstrip("\n")  # (checked by ast.parse in its module: render_module)


# What a standalone module imports, and how its helpers find their arrays' namespace.
_STANDALONE = {
    "numpy": ("NumPy", ["import math", "import numpy", "import numpy as xp"],
              "def _namespace(x):\n    get = getattr(x, \"__array_namespace__\", None)\n"
              "    return get() if get is not None else numpy"),
    "cupy": ("CuPy and array_api_compat", ["import math", "import numpy", "import cupy as xp",
                                           "import array_api_compat"],
             "def _namespace(x):\n    return array_api_compat.array_namespace(x)"),
    "array-api": ("an Array-API namespace: array_api_strict here; rebind `xp` to run on another",
                  ["import math", "import array_api_strict as xp"],
                  "def _namespace(x):\n    get = getattr(x, \"__array_namespace__\", None)\n"
                  "    return get() if get is not None else xp"),
}


def render_module(functions: list, *, version: str, origin: str, key: str, helpers=(),
                  constants=(), standalone: bool = False, backend: str = "numpy",
                  command: str = "", check: bool = True) -> str:
    """A module of `functions`. `standalone`: it imports its namespace (`backend`, one
    of "numpy", "cupy", "array-api") and carries the helpers it calls (and only those,
    with what they call), so it runs without srcgrad; `command` is the `srcgrad emit`
    command line that writes it again. `check`: parse the text (a SyntaxError here is
    srcgrad's bug); a caller that compiles it at once passes False, its compile checks."""
    helper_sources, imports, needs = [], [], ""
    if standalone:
        needs, imports, namespace_def = _STANDALONE[backend]
        helper_sources = [namespace_def if name == "_namespace" else _helper_source(name)
                          for name in _helper_closure(helpers)]
        used = "\n".join(helper_sources + list(functions))
        imports = [line for line in imports if _import_used(line, used)]
        if "numpy." in used and not any(line.split("#")[0].strip() == "import numpy"
                                         for line in imports):
            imports = imports + ["import numpy  # shape bookkeeping in the helpers"]
    text = _render("module.py.j2",
        functions=functions, version=version, origin=origin, key=key, helpers=list(helpers),
        constants=list(constants), standalone=standalone, helper_sources=helper_sources,
        imports=imports, needs=needs, backend=backend,
        command=command or f"srcgrad emit {origin}")
    if check:
        ast.parse(text)
    return text


def _helper_closure(helpers) -> list:
    """`helpers` and every function of srcgrad.rules.helpers they call, transitively:
    private ones first, each in the order the helpers module defines them."""
    from srcgrad.rules import helpers as module

    defined = {name for name, value in vars(module).items()
               if inspect.isfunction(value) and value.__module__ == module.__name__}
    needed, stack = set(), list(helpers)
    while stack:
        name = stack.pop()
        if name in needed:
            continue
        needed.add(name)
        tree = ast.parse(_helper_source(name))
        stack += [n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id in defined]
    order = [name for name in vars(module) if name in needed]
    return [n for n in order if n.startswith("_")] + [n for n in order if not n.startswith("_")]


def _import_used(line: str, text: str) -> bool:
    """Whether the module name an `import X [as Y]` line binds is used in `text`."""
    words = line.split("#")[0].split()
    bound = words[-1] if "as" in words else words[1]
    return re.search(rf"\b{re.escape(bound)}\b", text) is not None


def _helper_source(name: str) -> str:
    from srcgrad.rules import helpers

    return inspect.getsource(getattr(helpers, name)).rstrip("\n")


def helpers_used(source_lines) -> list:
    """Helper functions (srcgrad.rules.helpers) a body calls, in a stable order."""
    text = "\n".join(source_lines)
    if not any(h in text for h in rules.HELPER_NAMES):
        return []  # (most specialised code calls none: no parse of it, issue 15)
    tree = ast.parse(text)
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call)
              and isinstance(n.func, ast.Name)}
    return [h for h in rules.HELPER_NAMES if h in called]
