"""The IR: named SSA values, ops on them, and graphs of ops.

The IR is deliberately tiny. A `Graph` is a function: input `Var`s, a list of
`Op`s in execution order, and outputs. Every `Op` applies one primitive (a row of
the derivative table, or one of the few structural primitives below) to operands
and defines fresh `Var`s. Operands are `Var`s, `Const`s (static Python values
folded at trace time) or `Pack`s (a static-length sequence of operands, for
`np.concatenate([a, b])` or `np.einsum(s, *ops)`).

Note [Static versus dynamic values]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The tracer evaluates everything it can at compile time: module attributes,
arithmetic on literals, `axis=` arguments, tuples of values. Only values that
depend on the function's arguments become `Var`s. So an `Op`'s operands that a
rule treats as parameters (`axis`, `keepdims`, an index template) are normally
`Const`s, and the generated code prints them as literals.
"""

from __future__ import annotations

import reprlib
from collections.abc import Iterator
from typing import Any


class _Factory:
    """The default of a field whose default is a new empty dict or list, as a dataclass's
    `field(default_factory=...)` shows it."""

    def __repr__(self) -> str:
        return "<factory>"


FACTORY = _Factory()


class Fields:
    """The repr `@dataclass` gives a class, over its fields (`__match_args__`, in order),
    written out (the decorator's cost: Loc's docstring)."""

    __slots__ = ()
    __match_args__: tuple = ()

    def _values(self) -> tuple:
        return tuple([getattr(self, f) for f in self.__match_args__])

    @reprlib.recursive_repr()
    def __repr__(self) -> str:
        fields = ", ".join([f"{f}={getattr(self, f)!r}" for f in self.__match_args__])
        return f"{self.__class__.__qualname__}({fields})"


class EqFields(Fields):
    """What `@dataclass` (eq=True, not frozen) adds: equality over the fields, no hash."""

    __slots__ = ()

    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return self._values() == other._values()
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


class Frozen:
    """What `frozen=True` adds: FrozenInstanceError on assigning or deleting an attribute
    (an `__init__` sets its fields with `object.__setattr__`)."""

    __slots__ = ()

    def __setattr__(self, name, value):
        _frozen("assign to", name)

    def __delattr__(self, name):
        _frozen("delete", name)


class FrozenFields(Frozen, EqFields):
    """What `@dataclass(frozen=True)` adds, written out (the decorator's cost: Loc's
    docstring): equality and hash over the fields, FrozenInstanceError on assigning or
    deleting one. Loc, Const and Pack here, srcgrad.rules.core.Rule and others."""

    __slots__ = ()

    def __hash__(self):
        return hash(self._values())


class Loc(FrozenFields):
    """Where an op came from in user (or rule) source.

    Loc, Op, Block, Graph, Var, Const and Pack are written out as `@dataclass` (Loc,
    Const and Pack frozen, the others with eq=False) would make them, the same
    constructors, equality, hash, repr and FrozenInstanceError: the decorator generates
    and compiles those methods, ~12 of them, at every compiling process's start-up, and
    importing `dataclasses` costs ~1 ms more (issue 15). Not being dataclasses, none of
    them is a record to srcgrad.ir.tree.is_record, as every caller that meets a Var or a
    Const there already treated them (a leaf)."""

    __match_args__ = ("file", "line", "col", "text")

    def __init__(self, file: str, line: int, col: int, text: str):
        set_ = object.__setattr__
        set_(self, "file", file)
        set_(self, "line", line)  # 1-based line in `file`
        set_(self, "col", col)  # 0-based column
        set_(self, "text", text)  # the source line, stripped

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"

    @reprlib.recursive_repr()
    def __repr__(self) -> str:
        return (f"{self.__class__.__qualname__}(file={self.file!r}, line={self.line!r}, "
                f"col={self.col!r}, text={self.text!r})")

    def _values(self) -> tuple:  # (the fields spelled out: Locs are hashed often)
        return (self.file, self.line, self.col, self.text)


def _frozen(what: str, name: str):
    from dataclasses import FrozenInstanceError

    raise FrozenInstanceError(f"cannot {what} field {name!r}")


class Var:
    """An SSA value. Identity is the object; `name` is unique within one graph (a
    dataclass with eq=False written out: Loc)."""

    __slots__ = ("name", "kind")
    __match_args__ = ("name", "kind")

    def __init__(self, name: str, kind: str = "array"):
        self.name = name
        # 'array' for values that may carry a derivative; 'static' for values that never
        # do (shapes, ints, booleans, dtypes). Activity analysis only follows 'array' vars.
        self.kind = kind

    def __repr__(self) -> str:
        return self.name


class Const(FrozenFields):
    """A value known at compile time (a literal, a folded expression, a global); a frozen
    dataclass written out (Loc)."""

    __match_args__ = ("value",)

    def __init__(self, value: Any):
        object.__setattr__(self, "value", value)

    def __repr__(self) -> str:
        return f"Const({self.value!r})"

    def _values(self) -> tuple:  # (spelled out: Consts are compared and hashed often)
        return (self.value,)


class Pack(FrozenFields):
    """A fixed-length sequence of operands: `[a, b]` in `np.concatenate([a, b])`; a frozen
    dataclass written out (Loc)."""

    __match_args__ = ("items", "style")

    def __init__(self, items: tuple, style: str = "tuple"):
        set_ = object.__setattr__
        set_(self, "items", items)
        # 'tuple' or 'list': how the sequence is written back into generated code.
        set_(self, "style", style)

    def __repr__(self) -> str:
        return f"Pack{self.items!r}"


Operand = Var | Const | Pack


class Op:
    """One primitive application: `outs = prim(*args)` (a dataclass written out: Loc)."""

    __match_args__ = ("prim", "args", "outs", "loc", "attrs", "blocks")

    def __init__(self, prim: str, args: tuple, outs: tuple, loc: Loc | None = None,
                 attrs: dict = FACTORY, blocks: tuple = ()):
        self.prim = prim  # a rule name (srcgrad.rules) or a structural primitive
        self.args = args  # Operands, in the rule signature's parameter order
        self.outs = outs  # Vars defined here, never defined elsewhere
        self.loc = loc
        # Static, primitive-specific data that is not an operand. Used by `getitem`
        # (the index template) and by structural primitives; empty for table rows.
        self.attrs = {} if attrs is FACTORY else attrs
        # Nested bodies of control-flow ops (Note [Regions]); empty for every other op.
        self.blocks = blocks

    @reprlib.recursive_repr()
    def __repr__(self) -> str:
        return (f"{self.__class__.__qualname__}(prim={self.prim!r}, args={self.args!r}, "
                f"outs={self.outs!r}, loc={self.loc!r}, attrs={self.attrs!r}, blocks={self.blocks!r})")

    def operand_vars(self) -> Iterator[Var]:
        """The Vars this op reads, looking inside Packs and nested blocks."""
        for a in self.args:
            yield from operand_vars(a)
        for block in self.blocks:
            yield from block.free_vars()


class Block:
    """A nested body: `ops` run in order, then `results` are its values.

    Note [Regions]
    ~~~~~~~~~~~~~~
    Control flow is structured: an `if` is one op `cond(pred)` with a then-block
    and an else-block; a loop is one op `for_range(start, stop, step)` or `while`
    with a body block. A block reads values of the enclosing code directly (its
    *free* Vars), as Python code in a branch or loop body does, so every pass that
    asks an op what it reads (`Op.operand_vars`) sees them, and top-level passes
    (DCE, liveness, buffer reuse) treat a control-flow op as one op. Values a loop
    carries from one iteration to the next are block `params` (bound at the top of
    each iteration) paired with block `results` (their values at its end).
    """

    __match_args__ = ("ops", "results", "params")

    def __init__(self, ops: list, results: list, params: list = FACTORY):
        self.ops = ops
        self.results = results  # operands: the block's values (branch values, carried values)
        self.params = [] if params is FACTORY else params  # Vars bound on entry (loop-carried, index)

    @reprlib.recursive_repr()
    def __repr__(self) -> str:
        return (f"{self.__class__.__qualname__}(ops={self.ops!r}, results={self.results!r}, "
                f"params={self.params!r})")

    def free_vars(self) -> Iterator[Var]:
        defined = set(self.params)
        for op in self.ops:
            for v in op.operand_vars():
                if v not in defined:
                    yield v
            defined.update(op.outs)
        for r in self.results:
            for v in operand_vars(r):
                if v not in defined:
                    yield v


class Graph:
    """A function in IR form (a dataclass written out: Loc)."""

    __match_args__ = ("name", "inputs", "ops", "outputs", "out_tree", "param_names", "defaults", "loc")

    def __init__(self, name: str, inputs: list, ops: list, outputs: list, out_tree: Any = None,
                 param_names: tuple = (), defaults: dict = FACTORY, loc: Loc | None = None):
        self.name = name
        self.inputs = inputs  # Vars, one per positional parameter of the function
        self.ops = ops  # Ops in execution order
        self.outputs = outputs  # Operands returned, flattened
        # How `outputs` nest into the returned Python value: see srcgrad.ir.tree.
        self.out_tree = out_tree
        # Parameter names and defaults of the source function (for signatures).
        self.param_names = param_names
        self.defaults = {} if defaults is FACTORY else defaults
        self.loc = loc

    @reprlib.recursive_repr()
    def __repr__(self) -> str:
        return (f"{self.__class__.__qualname__}(name={self.name!r}, inputs={self.inputs!r}, "
                f"ops={self.ops!r}, outputs={self.outputs!r}, out_tree={self.out_tree!r}, "
                f"param_names={self.param_names!r}, defaults={self.defaults!r}, loc={self.loc!r})")


def operand_vars(a) -> Iterator[Var]:
    if isinstance(a, Var):
        yield a
    elif isinstance(a, Pack):
        for item in a.items:
            yield from operand_vars(item)


def map_operand(a, fn):
    """Rebuild operand `a` with every Var replaced by `fn(var)`."""
    if isinstance(a, Var):
        return fn(a)
    if isinstance(a, Pack):
        return Pack(tuple(map_operand(i, fn) for i in a.items), a.style)
    return a


def substitute(ops: list, mapping: dict) -> list:
    """Ops with every read of a Var in `mapping` replaced by its image (in place)."""
    if not mapping:
        return ops

    def fn(v):
        while isinstance(v, Var) and v in mapping:
            v = mapping[v]
        return v

    for op in ops:
        op.args = tuple(map_operand(a, fn) for a in op.args)
        if op.prim == "custom_call":  # its call record holds Vars the backward/jvp read too
            call = op.attrs["function"]
            mapped = call.map_vars(fn)
            if mapped is not call:
                op.attrs = {**op.attrs, "function": mapped}
        for block in op.blocks:
            substitute(block.ops, mapping)
            block.results = [map_operand(r, fn) for r in block.results]
    return ops


def uses(ops: list) -> dict:
    """Var -> number of reads in `ops`."""
    count: dict = {}
    for op in ops:
        for v in op.operand_vars():
            count[v] = count.get(v, 0) + 1
    return count


def defined_names(ops) -> set:
    """Names of every value `ops` (and their nested blocks) define or read."""
    out: set = set()
    for op in ops:
        out.update(v.name for v in op.outs)
        out.update(v.name for v in op.operand_vars())
        for block in op.blocks:
            out.update(v.name for v in block.params)
            out |= defined_names(block.ops)
    return out
