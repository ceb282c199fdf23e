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

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Loc:
    """Where an op came from in user (or rule) source."""

    file: str
    line: int  # 1-based line in `file`
    col: int  # 0-based column
    text: str  # the source line, stripped

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(eq=False, repr=False)  # (its own repr: no generated one to compile, issue 15)
class Var:
    """An SSA value. Identity is the object; `name` is unique within one graph."""

    name: str
    # 'array' for values that may carry a derivative; 'static' for values that never
    # do (shapes, ints, booleans, dtypes). Activity analysis only follows 'array' vars.
    kind: str = "array"

    def __repr__(self) -> str:
        return self.name


@dataclass(frozen=True, repr=False)
class Const:
    """A value known at compile time (a literal, a folded expression, a global)."""

    value: Any

    def __repr__(self) -> str:
        return f"Const({self.value!r})"


@dataclass(frozen=True, repr=False)
class Pack:
    """A fixed-length sequence of operands: `[a, b]` in `np.concatenate([a, b])`."""

    items: tuple
    # 'tuple' or 'list': how the sequence is written back into generated code.
    style: str = "tuple"

    def __repr__(self) -> str:
        return f"Pack{self.items!r}"


Operand = Var | Const | Pack


@dataclass(eq=False)
class Op:
    """One primitive application: `outs = prim(*args)`."""

    prim: str  # a rule name (srcgrad.rules) or a structural primitive
    args: tuple  # Operands, in the rule signature's parameter order
    outs: tuple  # Vars defined here, never defined elsewhere
    loc: Loc | None = None
    # Static, primitive-specific data that is not an operand. Used by `getitem`
    # (the index template) and by structural primitives; empty for table rows.
    attrs: dict = field(default_factory=dict)
    # Nested bodies of control-flow ops (Note [Regions]); empty for every other op.
    blocks: tuple = ()

    def operand_vars(self) -> Iterator[Var]:
        """The Vars this op reads, looking inside Packs and nested blocks."""
        for a in self.args:
            yield from operand_vars(a)
        for block in self.blocks:
            yield from block.free_vars()


@dataclass(eq=False)
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

    ops: list
    results: list  # operands: the block's values (branch values, carried values)
    params: list = field(default_factory=list)  # Vars bound on entry (loop-carried, index)

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


@dataclass(eq=False)
class Graph:
    """A function in IR form."""

    name: str
    inputs: list  # Vars, one per positional parameter of the function
    ops: list  # Ops in execution order
    outputs: list  # Operands returned, flattened
    # How `outputs` nest into the returned Python value: see srcgrad.ir.tree.
    out_tree: Any = None
    # Parameter names and defaults of the source function (for signatures).
    param_names: tuple = ()
    defaults: dict = field(default_factory=dict)
    loc: Loc | None = None


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
