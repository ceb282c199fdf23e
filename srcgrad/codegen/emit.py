"""IR → Python source.

Python decides every line: each op becomes one statement, rendered from its rule's
`render` template by substituting operands into the template's AST (so precedence
is always right) and dropping keyword arguments left at their defaults. jinja2
only lays out the module and function skeletons (templates/). Every module is
checked with `ast.parse` before it leaves this module, its functions with it.
"""

from __future__ import annotations

import ast
import functools
import inspect
import math
import os
import warnings

import numpy

from srcgrad import rules
from srcgrad.codegen.namespaces import (  # the namespace a render is for, and what it knows
    _NAMESPACE,
    _int_arrays_as_floats,
    _is_static,
    _Known,
    _may_be_number,
    _missing_names,
    _note_copies,
    _note_kinds,
    _note_tape_masks,
    _operands_made_arrays,
    _refused,
    namespace,  # noqa: F401 - the pipelines' `emit.namespace(...)`
)
from srcgrad.codegen.skeletons import (  # noqa: F401 - the pipelines' `emit.render_module(...)`
    helpers_used,
    render_function,
    render_module,
    templates_fingerprint,
)
from srcgrad.ir.core import Const, Pack, Var


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
            if isinstance(operand, Const) and isinstance(operand.value, list) \
                    and (self.rule.elementwise or self.rule.nondiff):
                # a constant list is an array to these rows (they take no sequence of arrays):
                # the Array API takes no list (`np.searchsorted([0.0, 1.0], x)`, fuzz seed
                # 2768435), and `c < [1.0, 0.0]` of minimum's derivative is Python's for a float
                return _xp_asarray(operand_ast(operand, self.pool))
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
        if _may_be_number(operand, self.known) or isinstance(operand, Const) and (
                type(operand.value) is float
                or type(operand.value) is bool and self.rule.name == "where"):
            # (where's condition folded to a Python bool, `np.maximum(0.5, 0.0)`'s
            # derivative: the Array API takes only an array there; fuzz seed 2643979)
            return _xp_asarray(node)
        return node

    def visit_Subscript(self, node):
        node.value = self.visit(node.value)
        if isinstance(node.slice, ast.Name) and node.slice.id in self.operands:
            operand = self.operands[node.slice.id]
            node.slice = operand_ast(operand, self.pool, in_index=True)
            if self.wrap_floats and (not isinstance(operand, Var) or self._is_int(operand)) and not (
                    isinstance(operand, Const) and getattr(operand.value, "ndim", 0)):
                # (an index array stays alone: the Array API takes a mask only as the sole
                # index, helpers._full_index; fuzz seed 2700011, issue 28)
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
                if isinstance(operand, Const) and _same_const(operand.value, default) \
                        and _callee_default_is(node.func, kw.arg, operand.value):
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


def _callee_default_is(func: ast.expr, keyword: str, value) -> bool:
    """Whether the function a render calls (`xp.max`, `xp.linalg.norm`, a rule helper)
    takes `value` for `keyword` when it is left out. A keyword equal to the *row's*
    default is dropped for readability only where this holds: the row's default is not
    the callee's (torch_softmax's axis=-1 inside `xp.max(x, axis=axis)`, whose own
    default is None, rendered as a max over every axis)."""
    path = []
    while isinstance(func, ast.Attribute):
        path.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name):
        return False
    return _default_of(func.id, tuple(reversed(path)), keyword, value)


@functools.cache
def _default_of_cached(root: str, path: tuple, keyword: str):
    from srcgrad.rules import helpers

    if root != "xp" and hasattr(helpers, root):  # a rule helper
        target = getattr(helpers, root) if not path else None
    else:  # `xp.max`, or a method of an array operand (`x.sum`: NumPy's function's defaults)
        target = numpy
    for name in path:
        target = getattr(target, name, None)
    try:
        parameter = inspect.signature(target).parameters.get(keyword)
    except (TypeError, ValueError):  # a ufunc, a builtin (print): no signature to read,
        return _UNREAD  # and no keyword of theirs has another default than the row's
    return inspect.Parameter.empty if parameter is None else parameter.default


_UNREAD = object()


def _default_of(root: str, path: tuple, keyword: str, value) -> bool:
    default = _default_of_cached(root, path, keyword)
    if default is _UNREAD:
        return True
    if default is numpy._NoValue:  # NumPy's "not given": its own default, False or None
        return value is False or value is None
    return _same_const(value, default)


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
        if _gathers(op, known):
            render = "gather_index(x, index)"
    if label != "numpy":  # (CuPy too, which is spelled as NumPy)
        from srcgrad.codegen import spellings

        if op.prim in spellings.OTHER_NAMESPACES and not (  # (an Array-API spelling wins)
                spelling != "numpy" and op.prim in spellings.ARRAY_API):
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
        operands = _array_api_operands(op, operands, known.bools, label, known.ints, known.arrays,
                                       known.pybools)
        operands = _int_arrays_as_floats(op, operands, known, _AsNumber)
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


def _array_api_operands(op, operands: dict, bools: set, label: str, ints=frozenset(),
                        arrays=frozenset(), pybools=None) -> dict:
    """Operands as the Array API takes them: a boolean mask in arithmetic is cast to the
    other operand's dtype (NumPy reads True as 1; the Array API refuses), a Python bool
    beside an array is `int(...)` (array_api_strict promotes a Python bool with boolean
    arrays only: `(nv > na) * (lo // 2)` of np.correlate's composition, fuzz seed
    2805139). (An integer list or array as an index is a gather: _gathers.)"""
    from srcgrad.codegen import spellings  # (as op_expr's: imported by an Array-API render)

    if op.prim in spellings.BOOLEAN_RESULTS:
        # (a comparison of Python numbers is a Python bool, which arithmetic takes as it is:
        # `point + (i < extras)` of np.array_split's composition, fuzz seed 2620101)
        if not all(isinstance(a, Const) and isinstance(a.value, (int, float)) or isinstance(a, Var)
                   and (a.name in ints or a.kind == "static" and a.name not in arrays)
                   for a in operands.values()):
            bools.update(o.name for o in op.outs)
        elif pybools is not None:
            pybools.update(o.name for o in op.outs)
    if op.prim in spellings.ARITHMETIC and len(operands) == 2:
        (p, a), (q, b) = operands.items()
        if isinstance(a, Var) and a.name in bools or isinstance(b, Var) and b.name in bools:
            operands = {p: _AsNumber(a, b, bools, arrays=arrays), q: _AsNumber(b, a, bools, arrays=arrays)}
        elif pybools:
            operands = {k: _AsNumber(v, w, pybools, "int") if isinstance(v, Var) and v.name in pybools
                        and not (isinstance(w, Var) and w.name in ints or isinstance(w, Const)) else v
                        for (k, v), w in (((p, a), b), ((q, b), a))}
    if op.prim in spellings.COUNTS:
        x = operands["x"]
        if isinstance(x, Var) and x.name in bools:
            operands = {**operands, "x": _AsNumber(x, Const(0), bools, "int64")}
    return operands


def _gathers(op, known) -> bool:
    """Whether a getitem's index may hold an integer list or array (`x[[2, 0]]`,
    `x[:, idx]`): a constant one, or an array computed at run time. The Array API reads
    one only with integers on every axis; rendered as helpers.gather_index, whose
    transpose is scatter_index (Note [Scatter-add without add.at])."""
    index = op.args[1] if op.prim == "getitem" and len(op.args) > 1 else None
    if isinstance(index, Const):
        values = index.value
        return any(isinstance(v, (list, numpy.ndarray)) and numpy.asarray(v).dtype.kind in "iu"
                   for v in (values if isinstance(values, tuple) else (values,)))
    items = index.items if isinstance(index, Pack) else (index,)
    return any(isinstance(v, Var) and v.kind == "array" and v.name not in known.ints
               for v in items)


class _AsNumber:
    """An operand read as a number: `xp.astype(mask, other.dtype)` for a boolean Var
    (`xp.asarray(other).dtype` where other may be a Python float: fuzz seed 2768435);
    `int(b)` for a Python bool (dtype "int", `bools` the Python bools)."""

    def __init__(self, operand, other, bools, dtype="float64", arrays=None):
        self.operand, self.other, self.bools, self.dtype = operand, other, bools, dtype
        self.arrays = arrays

    def ast(self, pool):
        node = operand_ast(self.operand, pool)
        if not (isinstance(self.operand, Var) and self.operand.name in self.bools):
            return node
        if self.dtype == "int":
            return ast.Call(ast.Name("int", ast.Load()), [node], [])
        if self.arrays is not None and self.operand.name not in self.arrays:
            node = _xp_asarray(node)  # (a comparison of a Python float is a Python bool)
        if isinstance(self.other, Var) and self.other.name not in self.bools:
            other = operand_ast(self.other, pool)
            if self.arrays is not None and self.other.name not in self.arrays:
                other = _xp_asarray(other)
            dtype = ast.Attribute(other, "dtype", ast.Load())
        else:
            dtype = ast.Attribute(ast.Name("xp", ast.Load()), self.dtype, ast.Load())
        return ast.Call(ast.Attribute(ast.Name("xp", ast.Load()), "astype", ast.Load()), [node, dtype], [])


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
    if "entry" in op.attrs:  # one tape per saved quantity (Note [One tape per saved quantity])
        from srcgrad.codegen.tape_lines import tape_statement

        _note_tape_masks(op)
        return tape_statement(op, lambda a: operand_source(a, pool))
    if op.prim in ("tape_push", "tape_pop"):  # a tuple per iteration (Note [Reverse mode
        _note_tape_masks(op)                   # of control flow]): its masks, by position
    if op.prim == "tape_pop":
        return f"{targets}, = {op.args[0].name}.pop()" if op.outs else f"{op.args[0].name}.pop()"
    if not op.outs:
        return ast.unparse(op_expr(op, pool))
    if len(op.outs) == 1 and callable(rules.RULES[op.prim].nout):
        targets += ","
    return f"{targets} = {ast.unparse(op_expr(op, pool))}"


def control_lines(op, pool: ConstPool, backward: bool) -> list:
    """`if`/`for`/`while` statements for a control-flow op (Note [Regions])."""
    def body(block, extra=lambda: ()):
        lines = block_lines(block.ops, pool, backward=backward)
        lines += list(extra())  # (after the block: what its ops made is known by then)
        return ["    " + line if line else "" for line in (lines or ["pass"])]

    def assign(targets, values):
        pairs = [(t, v) for t, v in zip(targets, values) if t != v]
        if not pairs:
            return []
        _note_copies(pairs)
        return [f"{', '.join(t for t, _ in pairs)} = {', '.join(v for _, v in pairs)}"]

    names = [o.name for o in op.outs]
    if op.prim == "cond":
        then, other = op.blocks
        return ([f"if {operand_source(op.args[0], pool)}:"]
                + body(then, lambda: assign(names, [operand_source(r, pool) for r in then.results]))
                + ["else:"]
                + body(other, lambda: assign(names, [operand_source(r, pool) for r in other.results])))
    block = op.blocks[0]
    carried = [p.name for p in block.params[1:]]
    inits = [operand_source(a, pool) for a in op.args[-1].items]
    results = [operand_source(r, pool) for r in block.results]
    if op.prim == "while_loop":
        flag = block.params[0].name
        return (assign([flag] + carried, [operand_source(op.args[0], pool)] + inits)
                + [f"while {flag}:"]
                + body(block, lambda: assign([flag] + carried, results))
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
            + body(block, lambda: assign(carried, results) + leave)
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
        if op.prim == "fused":  # srcgrad.pipeline.fusion: one loop (Note [Fused elementwise chains])
            from srcgrad.codegen.fused import fused_lines

            lines.extend(fused_lines(op, pool, block_lines))
            last = object()
        elif rules.RULES[op.prim].control:
            lines.extend(control_lines(op, pool, backward))
            last = object()  # a comment again after the block
        else:
            lines.append(op_statement(op, pool))
    return lines
