"""What the code being rendered calls: the array namespace a render is for, and what is
known of the values rendered so far there (Note [Python numbers in other namespaces]).
srcgrad.codegen.emit renders each op under the namespace set here.
"""

from __future__ import annotations

import ast
import contextlib
import contextvars
import inspect

import numpy

from srcgrad import rules
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

    __slots__ = ("bools", "arrays", "static", "ints", "tapes", "int_arrays", "floats", "pybools")

    def __init__(self):
        self.bools: set = set()
        self.arrays: set = set()
        self.static: set = set()
        self.ints: set = set()  # Python ints (a `range` loop's index): an index's one axis
        self.tapes: dict = {}  # a tape's name: what its entries hold of masks (`holds`)
        self.int_arrays: set = set()  # integer arrays (an argmax, an index): cast in arithmetic
        self.floats: set = set()  # values known to be floats (arrays or numbers): what casts them
        self.pybools: set = set()  # comparisons of Python numbers: Python bools

    def holds(self, name: str):
        """What the value `name` holds of values its arithmetic casts: True (a boolean
        mask), "int" (an integer array), "pyint" (a Python int), "float", ("list", h) (a
        tape whose entries hold h), ("tuple", (h, ...)) (a tape's entry of several
        quantities), or None. A mask saved on a tape, or in a tuple on a tape pushed on an
        outer loop's tape, pops as a mask (fuzz seed 2684438)."""
        if name in self.bools:
            return True
        if name in self.ints:  # (a loop's index read after it: fuzz seed 2724337)
            return "pyint"
        if name in self.int_arrays:
            return "int"
        return "float" if name in self.floats else self.tapes.get(name)

    def bind(self, name: str, held) -> None:
        """`name` holds `held` (as `holds` says), with what it was known to hold before."""
        if held is True:
            self.bools.add(name)
        elif held == "int":
            self.int_arrays.add(name)
        elif held == "pyint":
            self.ints.add(name)
        elif held == "float":
            self.floats.add(name)
        elif held is not None:
            self.tapes[name] = _either(self.tapes.get(name), held)


def _either(a, b):
    """What a value holds when it holds `a` or `b` (two pushes on one tape): a position is
    cast where either push's is (casting a float as a number changes nothing)."""
    if a is None or a == b:
        return b
    if b is None:
        return a
    if not isinstance(a, tuple):  # (a value that is cast wins over a tape of them)
        return a
    if not isinstance(b, tuple) or a[0] != b[0]:
        return b if not isinstance(b, tuple) else a
    if a[0] == "list":
        return ("list", _either(a[1], b[1]))
    return ("tuple", tuple(_either(x, y) for x, y in zip(a[1], b[1]))) if len(a[1]) == len(b[1]) else a


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
# an elementwise row's operand, spellings.ARRAY_OPERANDS) that is not known to be one is written
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
        from srcgrad.codegen import spellings  # (as _note_kinds')

        operands = {n for n, p in rule.py_signature.parameters.items()
                    if rule.elementwise and p.default is empty and p.kind is p.POSITIONAL_OR_KEYWORD}
        params = _ARRAY_PARAMS[rule.name] = frozenset(rule.vjp) | frozenset(rule.jvp) | operands \
            | spellings.ARRAY_OPERANDS.get(rule.name, frozenset())
    return params


def _operands_made_arrays(rule, operands: dict, known: _Known) -> frozenset:
    """The parameters whose operands are written `xp.asarray(...)` unless known to be arrays:
    the rule's array parameters, except in an elementwise call with an operand known to be
    an array, where the other values (the differentiable operands) may stay Python numbers
    (every namespace takes one beside an array, as NumPy's weak scalars: a float32 array
    stays float32); a mask (where's condition) is always an array, and it is not the
    array beside which the others may be numbers: `xp.where(mask, 1.0, 2.0)` is two
    numbers, which the Array API refuses (fuzz seed 2400278)."""
    params = _array_params(rule)
    values = frozenset(rule.vjp) | frozenset(rule.jvp)
    if rule.elementwise and any(isinstance(operands.get(p), Var) and operands[p].name in known.arrays
                                for p in values):
        return params - values
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


def _note_copies(pairs) -> None:
    """A name bound to another's value (a branch's or a loop's result, a tape's unpacked
    entry) is a boolean mask where that value is one: its arithmetic casts it for the
    Array API as the original's does (fuzz seed 2665382: a tie mask saved across a
    branch of a nested gradient)."""
    if _NAMESPACE.get()[2] == "numpy":
        return
    known = _NAMESPACE.get()[3]
    for target, value in pairs:
        known.bind(target, known.holds(value))


def _note_tape_masks(op) -> None:
    """A tape pushed a boolean mask pops one, alone or at its position in a tuple, through
    tapes pushed on outer loops' tapes: its arithmetic casts it for the Array API (fuzz
    seed 2684438: a tie mask saved in a loop of a nested gradient, its tuple tape saved
    again by the outer loop, reached array_api_strict's * uncast)."""
    if _NAMESPACE.get()[2] == "numpy" or op.prim not in ("tape_push", "tape_pop"):
        return
    known, tape = _NAMESPACE.get()[3], op.args[0].name
    if op.prim == "tape_push":
        value = op.args[1]
        if isinstance(value, Pack):
            items = tuple(known.holds(v.name) if isinstance(v, Var) else None for v in value.items)
            held = ("tuple", items) if any(h is not None for h in items) else None
        else:
            held = known.holds(value.name) if isinstance(value, Var) else None
        known.bind(tape, None if held is None else ("list", held))
        return
    held = known.tapes.get(tape)
    if held is None or held[0] != "list":
        return
    if "entry" in op.attrs:
        known.bind(op.outs[0].name, held[1])
    elif isinstance(held[1], tuple) and held[1] and held[1][0] == "tuple":
        for out, item in zip(op.outs, held[1][1]):
            known.bind(out.name, item)


def _int_arrays_as_floats(op, operands: dict, known, cast) -> dict:
    """An integer array (spellings.INT_ARRAY_RESULTS, what keeps one's dtype, arithmetic of
    them and Python ints) in arithmetic with a value known to be a float, or in a true
    division, is `cast(it, Const(0.0), int_arrays)` to float64, as NumPy promotes an int64
    array with any float (float32 too); the Array API refuses mixed kinds and divides
    floats only (`x * np.argmax(x)`; its cotangent `g * argmax`, or argmax itself where g
    is 1). A value not known to be either (a shape's item) is left as it is."""
    from srcgrad.codegen import spellings  # (as emit's: imported by an Array-API render)

    outs = [o.name for o in op.outs]
    items = list(operands.items())
    ints = [isinstance(v, Var) and v.name in known.int_arrays for _, v in items]
    floats = [isinstance(v, Const) and type(v.value) is float or isinstance(v, Var) and (
        v.name in known.floats or v.kind == "array" or v.name in known.arrays) and not (
        v.name in known.int_arrays or v.name in known.bools or v.name in known.ints) for _, v in items]
    if op.prim in spellings.INT_ARRAY_RESULTS:
        known.int_arrays.update(outs)
    elif op.prim == "unbroadcast" and ints[:1] == [True]:  # a cotangent (`1 * argmax`'s is
        known.floats.update(outs)  # argmax itself: fuzz seed 2760707) is a float
        return {**operands, items[0][0]: cast(items[0][1], Const(0.0), known.int_arrays)}
    elif op.prim == "where" and len(items) == 3 and any(ints[1:]) and not all(ints[1:]):
        known.floats.update(outs)  # (NumPy promotes the integer branch)
        return {k: cast(v, Const(0.0), known.int_arrays) if i and j else v
                for j, ((k, v), i) in enumerate(zip(items, ints))}
    elif op.prim in spellings.SAME_DTYPE and items:
        (known.int_arrays if ints[0] else known.floats if floats[0] else set()).update(outs)
    if op.prim not in spellings.ARITHMETIC or len(items) != 2:
        return operands
    if any(ints) and (op.prim == "divide" or any(floats)):
        known.floats.update(outs)
        return {k: cast(v, Const(0.0), known.int_arrays) if i else v for (k, v), i in zip(items, ints)}
    whole = [i or isinstance(v, Var) and v.name in known.ints or isinstance(v, Const) and type(
        v.value) is int for i, (_, v) in zip(ints, items)]
    if any(ints) and all(whole) and op.prim != "divide":
        known.int_arrays.update(outs)  # (an integer array's sum, difference or product)
    elif any(floats):
        known.floats.update(outs)
    return operands
