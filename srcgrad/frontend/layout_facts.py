"""What NumPy's memory layout and types are for a traced value (Note [Layout facts]).

Note [Layout facts]
~~~~~~~~~~~~~~~~~~~
Whether `v.reshape(-1)` / `v.ravel()` is a view of `v` depends on v's memory layout,
whether `v[i]` is a view of a row or an immutable NumPy scalar on v's rank, and whether
`v op= ...` writes into v or rebinds it on v being an ndarray or a scalar (Note [Mutation
at trace time]). NumPy decides these deterministically from the operands' types, ranks
and strides, so a variant that knows its arguments' shapes, classes and C-contiguity
(its guard checks all three: srcgrad.pipeline.modules.guard_value) can decide them too,
from the user's program's semantics, never from the code srcgrad generates for it.

A fact is an ndarray of a known or unknown rank that is or is not known to be
C-contiguous (`Fact(True, ndim, c)`), or a NumPy / Python scalar (`SCALAR`); a value
with no fact keeps the Undecided marker. The rules below claim C-contiguity only where
NumPy guarantees it, and are checked against NumPy itself (tests/test_layout_facts.py):

* a ufunc (arithmetic, `np.exp`, `np.maximum`, comparisons, `np.where`, `np.clip`)
  whose array operands are all C-contiguous returns a fresh C-contiguous array (order
  'K' follows the operands' layout; with broadcasting too), and a NumPy scalar where
  every operand is 0-d (`np.where` a 0-d array);
* a reduction over every axis is a NumPy scalar; over some axes (of a known rank) a
  fresh array, C-contiguous for a C-contiguous operand, or a scalar when no axis is
  left; `matmul`/`dot` of vectors a scalar, of matrices a fresh C-contiguous array
  (whatever the operands' layouts; a batched matmul only of C-contiguous operands);
* `np.zeros`/`ones`/`full`/`eye`/`arange`, stacking and concatenating C-contiguous
  arrays, `np.tile`, `np.repeat`/`cumsum` with no axis, `ravel`'s copy and `flatten`
  are fresh C-contiguous arrays; a copy, `astype`, `zeros_like` and `repeat`/`cumsum`
  along an axis follow their operand's layout (order 'K');
* `reshape`/`ravel` of a C-contiguous array is a C-contiguous *view* (always), of a
  NumPy scalar a fresh array (never a view); leading integer indices and a leading
  slice with step 1 of a C-contiguous array are C-contiguous views; integers on every
  axis give a NumPy scalar; transposes and other slices are views of unknown layout;
* an array written in place keeps its layout and class (`history`), a branch's value
  has what both paths agree on, and a loop param what its first value has, provided
  each iteration keeps it (checked at the loop's end where a decision used it).

Where a value's shape and strides follow from the variant's arguments, its fact carries
them, and the rules above give way to NumPy's own answer on a stand-in of that layout
(Note [Layout stand-ins] in srcgrad.frontend.layout_models): `x.T` of a (4, 1) array is
C-contiguous, a reshape of a Fortran array that keeps its order is a view. A decision
reads a loop param's flags first, and its layout only where the flags do not decide; the
loop's end then checks that each iteration keeps what was read (`_keeps`). An integer
index known only at run time (a `for` loop's index, a shape's item) selects a view of
the same layout whatever its value.
"""

from __future__ import annotations

import numpy

from srcgrad import rules
from srcgrad.errors import CompileError
from srcgrad.frontend.layout_models import (
    JOINS,
    SCALAR,
    Fact,
    Static,
    array_fact,
    c_layout,
    exact,
    is_view,
    joined,
)
from srcgrad.ir.core import Const, Pack, Var

__all__ = ["SCALAR", "Fact", "Static", "infer", "of_value", "meet", "implies", "LayoutTracker"]


UFUNCS = frozenset({
    "exp", "exp2", "log", "log2", "log10", "log1p", "expm1", "sqrt", "cbrt", "square",
    "reciprocal", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh",
    "arcsinh", "arccosh", "arctanh", "abs", "conjugate", "deg2rad", "rad2deg", "negative",
    "positive", "add", "subtract", "multiply", "divide", "power", "mod", "arctan2", "hypot",
    "logaddexp", "logaddexp2", "maximum", "minimum", "sign", "floor", "ceil", "trunc", "rint",
    "less", "less_equal", "greater", "greater_equal", "equal", "not_equal", "floor_divide",
    "isnan", "isinf", "isfinite", "logical_not", "logical_and", "logical_or", "logical_xor",
    "clip"})
# Python's math module and int helpers: Python numbers
PYTHON_NUMBERS_PREFIXES = ("math_", "pymath_", "py_")
REDUCTIONS = frozenset({"sum", "mean", "prod", "max", "min", "var", "std", "norm", "nansum",
                        "nanmean"})
CREATIONS = frozenset({"zeros", "ones", "full", "empty"})
SAME_LAYOUT = frozenset({"zeros_like", "ones_like", "empty_like", "full_like"})
TRANSPOSES = frozenset({"T", "transpose", "swapaxes", "moveaxis", "matrix_transpose"})


def of_value(value, argument=False) -> Fact | None:
    """The fact of a real value: a constant, or an `argument` as passed, whose strides the
    variant's guard fixes only where it is C-contiguous (Note [Layout stand-ins])."""
    if type(value) is numpy.ndarray:
        if argument and not value.flags.c_contiguous:
            return Fact(True, value.ndim, False)
        return array_fact(value)
    if isinstance(value, (numpy.generic, float, int, complex)):  # bool is an int
        return SCALAR
    return None


def meet(a: Fact | None, b: Fact | None) -> Fact | None:
    """What two paths agree on."""
    if a is None or b is None:
        return None
    if a == b:
        return a
    if a.array and b.array:
        return Fact(True, a.ndim if a.ndim == b.ndim else None, a.c and b.c,
                    a.layout if a.layout == b.layout else None)
    return None


def implies(a: Fact | None, b: Fact | None) -> bool:
    """`a` says all `b` says."""
    return b is None or meet(a, b) == b


def infer(name: str, args: dict) -> Fact | None:
    """The fact of `name(**args)`'s result; `args` maps each parameter to its operand's
    Fact (None: unknown), a Static, or a tuple of them (a sequence operand)."""
    if name.startswith(PYTHON_NUMBERS_PREFIXES) or name in ("size", "ndim", "shape_item"):
        return SCALAR
    found = exact(name, args, UFUNCS, REDUCTIONS)  # Note [Layout stand-ins]
    if found is not None:
        return found
    x = args.get("x")
    if name in UFUNCS or name == "where":
        return _ufunc(name, [a for a in args.values()])
    if name in REDUCTIONS:
        return _reduction(x, args.get("axis", Static(None)), args.get("keepdims", Static(False)))
    if name in CREATIONS:
        shape = args.get("shape")
        ndim = _shape_len(shape.value) if isinstance(shape, Static) else None
        value = shape.value if isinstance(shape, Static) else None
        return Fact(True, ndim, True, c_layout((value,) if isinstance(value, int) else value))
    if name in ("eye", "identity"):
        return Fact(True, 2, True)
    if name in ("arange", "linspace"):
        return Fact(True, 1, True)
    if name in SAME_LAYOUT:
        if isinstance(x, Fact) and x.array:
            return _fresh_like(x)
        return Fact(True, 0, True) if x == SCALAR else None
    if name in ("copy", "astype"):
        return _fresh_like(x) if isinstance(x, Fact) and x.array else \
            SCALAR if name == "astype" and x == SCALAR else None
    if name == "reshape":
        shape = args.get("shape")
        ndim = _shape_len(shape.value) if isinstance(shape, Static) else None
        if isinstance(x, Fact):
            return Fact(True, ndim, x.c or not x.array)  # a scalar's reshape is a fresh array
        return None
    if name in ("ravel", "flatten"):
        if isinstance(x, Fact):
            return Fact(True, 1, x.c or not x.array or name == "flatten")
        return None
    if name in ("matmul", "dot"):
        return _product(name, x, args.get("y"))
    if name == "outer":
        return Fact(True, 2, True)
    if name in ("tile", "repeat", "cumsum"):
        return _repeated(name, x, args)
    if name in JOINS:
        return joined(name, args.get("arrays"))
    if name == "getitem":
        return index_fact(x, args.get("index"))
    if name in TRANSPOSES:
        if isinstance(x, Fact) and x.array:
            return Fact(True, x.ndim, x.c and x.ndim is not None and x.ndim <= 1)
        return None
    if name == "expand_dims":
        axis = args.get("axis")
        if isinstance(x, Fact) and x.array and isinstance(axis, Static) and x.ndim is not None:
            n = len(axis.value) if isinstance(axis.value, tuple) else 1
            return Fact(True, x.ndim + n, x.c)
        return None
    return None


def _fresh_like(x: Fact) -> Fact:
    """A fresh array in x's layout (order 'K'): exactly known for a C-contiguous x."""
    return Fact(True, x.ndim, x.c, c_layout(x.layout[0]) if x.c and x.layout else None)


def _flags(f: Fact | None) -> Fact | None:
    """What `f` says but its strides."""
    return f._replace(layout=None) if f is not None else None


def _ufunc(name, operands) -> Fact | None:
    facts = []
    for op in operands:
        if isinstance(op, Static):
            if not isinstance(op.value, (int, float, complex, bool, numpy.generic)):
                return None  # a list or array literal: NumPy makes an array of it
            facts.append(SCALAR)
        elif isinstance(op, Fact):
            facts.append(op)
        else:
            return None
    arrays = [f for f in facts if f.array]
    if any(f.ndim is None for f in arrays):
        ndims = [f.ndim for f in arrays if f.ndim is not None]
        if not ndims or max(ndims) < 1:
            return None  # it may be 0-d (a scalar) or not
        return Fact(True, None, all(f.c for f in arrays))
    ndim = max((f.ndim for f in arrays), default=0)
    if ndim == 0:  # every operand 0-d: a ufunc returns a NumPy scalar, np.where a 0-d array
        return Fact(True, 0, True) if name == "where" else SCALAR
    return Fact(True, ndim, all(f.c for f in arrays))


def _reduction(x, axis, keepdims) -> Fact | None:
    if not isinstance(axis, Static) or not isinstance(keepdims, Static):
        return None
    if axis.value is None:
        if not keepdims.value:
            return SCALAR
        if not isinstance(x, Fact) or x.ndim is None:
            return None
        return Fact(True, x.ndim, True) if x.array and x.ndim > 0 else SCALAR
    if not isinstance(x, Fact) or not x.array or x.ndim is None:
        return None
    n = len(axis.value) if isinstance(axis.value, tuple) else 1
    ndim = x.ndim if keepdims.value else x.ndim - n
    if ndim == 0 and not keepdims.value:
        return SCALAR
    return Fact(True, ndim, x.c)


def _product(name, x, y) -> Fact | None:
    if not (isinstance(x, Fact) and isinstance(y, Fact) and x.array and y.array):
        return None
    a, b = x.ndim, y.ndim
    if a is None or b is None or a == 0 or b == 0:
        return None
    ndim = (a + b - 2) if name == "dot" or a < 2 or b < 2 else max(a, b)
    if ndim == 0:
        return SCALAR
    shape = _product_shape(name, x.layout[0], y.layout[0]) if x.layout and y.layout else None
    # a fresh C-ordered array: np.dot's always, and matmul's where no operand has batch
    # axes (its core axes are allocated C-ordered; batch axes follow the operands' order 'K':
    # two Fortran-ordered (2, 5, 3, 4) operands give a product that is not C-contiguous)
    c = name == "dot" or (a <= 2 and b <= 2) or (x.c and y.c)
    return Fact(True, ndim, c, c_layout(shape) if c and shape is not None else None)


def _product_shape(name, a, b) -> tuple | None:
    if name == "dot":
        return a[:-1] + (b[:-2] + b[-1:] if len(b) > 1 else ())
    if len(a) == 1:
        return b[:-2] + b[-1:]
    if len(b) == 1:
        return a[:-1]
    try:
        return numpy.broadcast_shapes(a[:-2], b[:-2]) + (a[-2], b[-1])
    except ValueError:
        return None


def _repeated(name, x, args) -> Fact | None:
    """np.tile / np.repeat / np.cumsum: a fresh C-contiguous array where flattened (no
    axis) or tiled (its rank: its operand's or its repetitions' count, the larger); along
    an axis, one in its operand's layout."""
    if not isinstance(x, Fact):
        return None
    if name == "tile":
        reps = args.get("reps")
        if not isinstance(reps, Static) or x.ndim is None:
            return None
        n = len(reps.value) if isinstance(reps.value, tuple) else 1
        return Fact(True, max(x.ndim, n), True)
    axis = args.get("axis")
    if not isinstance(axis, Static):
        return None
    if axis.value is None:
        return Fact(True, 1, True)
    return Fact(True, x.ndim, x.c) if x.array and x.ndim else None  # (order 'K' along an axis)


def index_fact(x, index) -> Fact | None:
    """`x[index]` for a basic index: a view (C-contiguous when only leading integers and
    one leading unit-step slice select), or a NumPy scalar (an integer on every axis)."""
    if not isinstance(x, Fact) or not x.array or x.ndim is None or not isinstance(index, Static):
        return None
    parts = index.value if isinstance(index.value, tuple) else (index.value,)
    kinds = []
    for p in parts:
        if isinstance(p, (int, numpy.integer)) and not isinstance(p, (bool, numpy.bool_)):
            kinds.append("int")
        elif isinstance(p, slice):
            kinds.append("slice")
        elif p is None:
            kinds.append("new")
        elif p is Ellipsis:
            kinds.append("...")
        else:
            return None  # advanced indexing (a copy of unknown layout) or a run-time value
    ints = kinds.count("int")
    if kinds.count("...") > 1 or ints + kinds.count("slice") > x.ndim:
        return None  # NumPy raises
    if set(kinds) <= {"int"} and ints == x.ndim:
        return SCALAR
    ndim = x.ndim - ints + kinds.count("new")
    return Fact(True, ndim, x.c and _leading(parts, kinds))


def _leading(parts, kinds) -> bool:
    """Integers, then at most one unit-step slice, then whole axes: a C-contiguous block."""
    rest = [(p, k) for p, k in zip(parts, kinds) if k != "new"]
    i = 0
    while i < len(rest) and rest[i][1] == "int":
        i += 1
    if i < len(rest) and rest[i][1] == "slice" and rest[i][0].step in (None, 1):
        i += 1
    return all(k == "..." or p == slice(None) for p, k in rest[i:])


def _shape_len(shape) -> int | None:
    if isinstance(shape, (int, numpy.integer)):
        return 1
    if isinstance(shape, tuple):
        return len(shape)
    return None


_BUSY = object()  # a value whose fact is being worked out (a loop param's own result)


class LayoutTracker:
    """The facts of the values one trace makes (Note [Layout facts]), worked out when a
    decision asks: `mutation` is the trace's Mutation (its `inputs` and `history`)."""

    def __init__(self, mutation):
        self.mutation = mutation
        self.example = mutation.example  # the variant's arguments (None: the shape-generic code)
        # id(out) -> (rule name, its params, operands, out), written for every op by
        # Mutation.note_made (a trace that asks no decision never makes a tracker: issue 15)
        self.made: dict = mutation.made
        self.sources: dict = {}  # id(value) -> the values it is on each path
        self.assumed: dict = {}  # id(loop param) -> its first value, while its body traces
        # id(loop param) -> the line of a write that a decision read its fact for
        self.used: dict = {}
        self.decided: dict = {}  # id(view or copy) -> ids of the loop params deciding it
        self.checking: set = set()  # ids of loop params whose iteration _kept checks
        self.kept: dict = {}  # id(loop param) -> the fact every iteration keeps (or None)
        self.fine: set = set()  # ids of loop params whose layout (not flags only) a decision read
        self.coarse = False  # loop params read as their first value's flags only
        self.alive: list = []

    # ------------------------------------------------------------------ recording
    def same(self, out, value) -> None:
        """`out` is `value` (a custom Function's output: the array its forward returned)."""
        if self.example is not None:
            self.made[id(out)] = ("identity", ("x",), (value,), out)

    def assume(self, param, init) -> None:
        """A loop param reads as its first value while the body traces."""
        if self.example is not None:
            self.assumed[id(param)] = (param, init)

    def merge(self, out, sources) -> None:
        """`out` is one of `sources` depending on the path taken; for a loop param (its
        first value and an iteration's result) a decision its body made from the first
        value's fact must hold for the result too."""
        if self.example is None:
            return
        self.sources[id(out)] = tuple(sources)
        self.alive.append(out)  # (its id stays its own)
        if id(out) in self.used and id(out) in self.assumed and not self._keeps(out):
            raise CompileError.at(self.used[id(out)], "an in-place write through a reshape, ravel or "
                                  "index of a value whose memory layout or type a loop changes "
                                  "is not supported in compiled code", hint="copy explicitly "
                                  "where you mean a copy (`.copy()`)")

    def _keeps(self, param) -> bool:
        """Each iteration keeps what the decisions its body made read of the param's
        first value: its layout (Note [Layout stand-ins]) or only its flags."""
        first = self._consult(self.sources[id(param)][0], set())
        need = first if id(param) in self.fine else _flags(first)
        return implies(self._kept(param), need)

    def _kept(self, param) -> Fact | None:
        """The fact each iteration of its loop leaves the param as its first value had it:
        the result's fact, worked out with the param as its first value, implies it
        (its layout, where the loop keeps the shape: `x = x[::-1]`, else its flags)."""
        key = id(param)
        if key not in self.kept:
            init, result = self.sources[key]
            self.checking.add(key)
            coarse = self.coarse
            try:
                self.coarse = False
                first = self._consult(init, set())
                kept = first if implies(self._consult(result, set()), first) else None
                if kept is None:
                    self.coarse = True
                    if implies(self._consult(result, set()), _flags(first)):
                        kept = _flags(first)
                self.kept[key] = kept
            finally:
                self.checking.discard(key)
                self.coarse = coarse
        return self.kept[key]

    # ------------------------------------------------------------------ queries
    def fact(self, t, track=True) -> Fact | None:
        """`t`'s fact; `track`: the decision it makes writes (a loop param read for it must
        keep its fact: `merge`)."""
        found, consulted, fine = self._decide(lambda seen: self._consult(t, seen))
        if track:
            self.note_used(consulted, fine)
        return found

    def _decide(self, compute):
        """(decision, loop params consulted, whether it read their layouts): `compute(seen)`
        with loop params read as their first value's flags, else with its layout."""
        seen: set = set()
        self.coarse = True
        try:
            found = compute(seen)
        finally:
            self.coarse = False
        if found is not None or not seen:
            return found, seen, False
        seen = set()
        return compute(seen), seen, True

    def _consult(self, t, consulted):
        if self.example is None:
            return None
        try:
            return self._fact(t, {}, consulted, 0)
        except RecursionError:  # a very long chain of ops: not known
            return None

    def note_used(self, params, fine=False) -> None:
        for key in params:
            self.used.setdefault(key, self.mutation.tracer.loc)
            if fine:
                self.fine.add(key)

    def written(self, values) -> None:
        """A write through `values` (a view chain): the loop params that decided one of
        them a view or a copy now matter."""
        for v in values:
            self.note_used(*self.decided.get(id(v), ((), False)))

    def _fact(self, t, memo, track, depth):
        if isinstance(t, Const):
            return of_value(t.value)
        if not isinstance(t, Var):
            return None
        key = id(t)
        if key in memo:
            return None if memo[key] is _BUSY else memo[key]
        if depth > 150:
            return None
        memo[key] = _BUSY
        found = self._derive(t, memo, track, depth + 1)
        memo[key] = found
        return found

    def _derive(self, t, memo, track, depth):
        key = id(t)
        before = self.mutation.history.get(key)
        if before is not None:  # written in place: the same array, same layout and class
            f = self._fact(before, memo, track, depth)
            if f is not None and f.array:
                return f
        inputs = self.mutation.inputs
        if len(inputs) == len(self.example):
            for v, a in zip(inputs, self.example):
                if v is t:
                    return of_value(a, argument=True)
        if key in self.mutation.tracer.python_ints:  # a shape's item, a size: a Python int
            return SCALAR
        if key in self.assumed:  # a loop param
            param, init = self.assumed[key]
            if track is not None:
                track.add(key)
            if key in self.sources and key not in self.checking:  # after its loop
                f = self._kept(param)  # (None: an iteration changes what its first value has)
            else:
                f = self._fact(init, memo, track, depth)
            return _flags(f) if self.coarse else f
        if key in self.sources:  # a branch's value, or a loop's output
            facts = [self._fact(s, memo, track, depth) for s in self.sources[key]]
            result = facts[0]
            for f in facts[1:]:
                result = meet(result, f)
            return result
        made = self.made.get(key)
        if made is None:
            return None
        name, params, operands, _ = made
        args = {p: self._operand(o, memo, track, depth) for p, o in zip(params, operands)}
        if name == "getitem":
            args["index"] = self._index(operands[1])
        # the array itself (written, checked); `made` also records names no row has
        # (shape_item, the tracer's own stand-ins)
        rule = rules.RULES.get(name)
        if name in ("setitem", "identity") or (rule is not None and rule.alias_check):
            return args.get("x")
        return infer(name, args)

    def _operand(self, o, memo, track, depth):
        if isinstance(o, Const):
            if isinstance(o.value, numpy.ndarray):
                return of_value(o.value)
            return Static(o.value)
        if isinstance(o, Pack):
            items = [self._operand(i, memo, track, depth) for i in o.items]
            if o.style == "slice":
                if all(isinstance(i, Static) for i in items):
                    return Static(slice(*(i.value for i in items)))
                return None
            if all(isinstance(i, Static) for i in items) and o.style == "tuple":
                return Static(tuple(i.value for i in items))
            return tuple(items)
        return self._fact(o, memo, track, depth)

    def _index(self, index) -> Static | None:
        """A basic index as a Static, an integer known only at run time read as 0: any
        integer in range selects a view of the same layout (out of range, NumPy raises)."""
        def part(p):
            if isinstance(p, Const):
                return p.value
            if isinstance(p, Pack) and p.style == "slice" and all(isinstance(i, Const) for i in p.items):
                return slice(*(i.value for i in p.items))
            if isinstance(p, Var) and self._an_int(p):
                return 0
            raise LookupError

        try:
            if isinstance(index, Pack) and index.style == "tuple":
                return Static(tuple(part(i) for i in index.items))
            return Static(part(index))
        except LookupError:
            return None

    def _an_int(self, v) -> bool:
        """`v` is a Python int: a shape's item or size (the tracer's python_ints), or a
        `for` loop's index (a static value no op, branch, loop or argument made)."""
        key = id(v)
        if key in self.mutation.tracer.python_ints or self.made.get(key, ("",))[0] == "shape_item":
            return True
        return v.kind == "static" and key not in self.made and key not in self.sources \
            and key not in self.assumed and key not in self.mutation.history \
            and not any(v is i for i in self.mutation.inputs)

    # ------------------------------------------------------------------ decisions
    def view_or_copy(self, base, out) -> str | None:
        """`out = reshape/ravel(base)`: "view" or "copy" (NumPy's answer on stand-ins of
        base's layout: Note [Layout stand-ins]; a scalar's is a fresh array), or None (not
        known)."""
        made = self.made.get(id(out))

        def decide(seen):
            f = self._consult(base, seen)
            decision = None if f is None else "copy" if not f.array else "view" if f.c else None
            if f is not None and f.array and (f.layout or f.ndim == 1) and made is not None:
                name, params, operands, _ = made
                args = {p: self._operand(o, {}, None, 0) for p, o in zip(params, operands)}
                args["x"] = f
                answer = is_view(name, args)
                decision = decision if answer is None else "view" if answer else "copy"
            return decision

        return self._decided(out, *self._decide(decide))

    def indexed(self, base, index, out) -> str | None:
        """`out = base[index]` with integers: "view" (of a row), "scalar", or None."""
        if self._index(index) is None:
            return None

        def decide(seen):
            x = self._consult(base, seen)
            if x is None:
                return None
            f = infer("getitem", {"x": x, "index": self._index(index)})
            return None if f is None else "view" if f.array else "scalar"

        return self._decided(out, *self._decide(decide))

    def _decided(self, out, decision, consulted, fine):
        if decision is not None and consulted:
            self.decided[id(out)] = (frozenset(consulted), fine)
            self.alive.append(out)
        return decision

    def is_array(self, t) -> bool:
        f = self.fact(t)
        return f is not None and f.array

    def is_scalar(self, t) -> bool:
        f = self.fact(t)
        return f is not None and not f.array
