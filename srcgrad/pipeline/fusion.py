"""Elementwise chains fused into one loop, for numba (Note [Fused elementwise chains]).

Note [Fused elementwise chains]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
numba compiles `t = xp.tanh(x); y = t * xp.exp(-x * x)` as a loop and a new array per
statement: a chain of k ops over n values reads and writes k arrays. `fuse` makes each
maximal chain of float64 elementwise ops of one result shape (with its gradient's where
no forward op follows a gradient's; a loop body's ops as a block of their own) one
`fused` op: its block's params are the loop indices and one number per array read, its
ops the chain's on numbers, its results the numbers written into arrays (values read
after the chain) or added into sums (`sum(v, axis, keepdims)` at its end: a sequential
sum, within 1e-12 relative of NumPy's pairwise one). srcgrad.codegen.fused writes the
loops. An op joins when its operands are numbers, the chain's values or arrays that
broadcast to its shape (`x[:, None, :]`); the chain is placed at its last op, so an
outside op reading one of its values (or a sum, complete only after the loop) ends it
first. The probe's facts decide every test: the code holds for every call the variant's
guard admits. Only numba's rendering fuses (`fusing`; benchmarks/bench_fusion.py).
"""

from __future__ import annotations

import contextlib
import contextvars

import numpy

from srcgrad.ir.core import Block, Const, Op, Var, defined_names
from srcgrad.ir.expand import Namer

_FUSING = contextvars.ContextVar("srcgrad_fusing", default=None)

# rows whose render numba takes on float64 numbers exactly as NumPy computes it on arrays
FUSIBLE = frozenset({
    "negative", "positive", "add", "subtract", "multiply", "divide", "power", "mod",
    "exp", "exp2", "log", "log2", "log10", "log1p", "expm1", "sqrt", "square", "reciprocal",
    "sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh",
    "arccosh", "arctanh", "abs", "deg2rad", "rad2deg", "arctan2", "hypot", "logaddexp",
    "logaddexp2", "maximum", "minimum", "relu", "sign", "floor", "ceil", "trunc", "rint",
    "copysign", "fmod", "torch_sigmoid", "torch_relu", "torch_divide", "torch_logaddexp",
    "torch_arctan2", "torch_hypot", "torch_fmod"})
_SPECIAL = ("add_into", "add_at", "math", "python_float", "python_value")
_NUMBERS = (int, float, bool, numpy.floating, numpy.integer)
_FLOAT64 = numpy.dtype(numpy.float64)


@contextlib.contextmanager
def fusing(fs):
    """`fs`'s programs compiled inside fuse (numba's); another's (compiled for NumPy) do not."""
    token = _FUSING.set(fs)
    try:
        yield
    finally:
        _FUSING.reset(token)


def enabled(fs) -> bool:  # (`fs`: the parsed function a program compiles)
    return _FUSING.get() is fs


def fuse(ops: list, results: list, found, taken=()) -> list:
    """`ops` with each maximal elementwise chain one `fused` op (Note [Fused elementwise
    chains]); `results`: the values read after `ops`; `taken`: names in use besides theirs."""
    taken = set(taken) | defined_names(ops)
    ops = [_in_blocks(op, found, taken) if op.blocks and op.prim != "fused" else op for op in ops]
    chains = _chains(ops, found, _forward_first(ops))
    if not chains:
        return ops
    namer = Namer(taken | defined_names(ops))
    read_after = _reads_outside(ops, chains, results)
    placed = {chain[-1]: chain for chain in chains}
    members = {i for chain in chains for i in chain}
    return [_fused_op([ops[j] for j in placed[i]], read_after, found, namer) if i in placed else op
            for i, op in enumerate(ops) if i in placed or i not in members]


def _in_blocks(op, found, taken: set) -> Op:
    """`op` with each nested block's chains fused (a loop body's, each iteration's)."""
    blocks = tuple(Block(fuse(b.ops, list(b.results), found, taken), b.results, b.params) for b in op.blocks)
    taken.update(*(defined_names(b.ops) for b in blocks))  # (the next op's loops name theirs anew)
    return Op(op.prim, op.args, op.outs, op.loc, op.attrs, blocks)


def _forward_first(ops) -> bool:
    """Whether no forward op follows a gradient's: then a chain may hold both (as a gradient)."""
    flags = [bool(op.attrs.get("backward")) for op in ops]
    return flags == sorted(flags)


def _chains(ops, found, cross: bool) -> list:
    """Index lists of the maximal chains of two or more ops, in order."""
    chains, chain, shape, values, sums = [], [], None, set(), set()

    def close():
        if len(chain) >= 2 and any(ops[j].prim != "sum" for j in chain):
            chains.append(list(chain))
        chain.clear(), values.clear(), sums.clear()

    # (a scatter added to an array is written in place: Note [Scatters added in place])
    scattered = {o for op in ops if op.prim == "scatter_index" for o in op.outs}
    for i, op in enumerate(ops):
        reads = set(op.operand_vars())
        if reads & sums or chain and not cross and bool(
                op.attrs.get("backward")) != bool(ops[chain[-1]].attrs.get("backward")):
            close()
        if chain and _is_sum_of(op, values, found):
            chain.append(i)
            sums.update(op.outs)
            continue
        s = None if reads & scattered else _elementwise_shape(op, found)
        fits = s is not None and (not chain or s == shape) and _operands_fit(op, s, found, values)
        if not fits and (reads & values or s is not None):
            close()  # (an op of another shape starts a chain of its own)
            fits = s is not None and _operands_fit(op, s, found, values)
        if fits:
            shape = s
            chain.append(i)
            values.update(op.outs)
    close()
    return chains


def _elementwise_shape(op, found):
    """The shape of `op`'s result where it is a fusible float64 elementwise op, else None."""
    shape = found.shapes.get(op.outs[0]) if op.prim in FUSIBLE and len(op.outs) == 1 else None
    ok = shape and not op.blocks and not any(k in op.attrs for k in _SPECIAL)
    return shape if ok and found.dtypes.get(op.outs[0]) == _FLOAT64 else None


def _operands_fit(op, shape, found, values) -> bool:
    """Numbers, the chain's values, or arrays that broadcast to `shape` (read as float64s)."""
    return all(isinstance(a.value, _NUMBERS) if isinstance(a, Const) else isinstance(a, Var) and (
        a in values or _is_number(a, found) or _broadcasts(found.shapes.get(a), shape)
        and a in found.dtypes and found.dtypes[a].kind in "fiub") for a in op.args)


def _broadcasts(s, shape) -> bool:
    """Whether an array of shape `s` (1-D or more) broadcasts to `shape` unchanged."""
    return bool(s) and len(s) <= len(shape) and all(d in (1, n) for d, n in zip(s[::-1], shape[::-1]))


def _is_number(v, found) -> bool:  # (a Python or NumPy scalar: a number in the loop too)
    return found.shapes.get(v) == () and v not in found.dtypes


def _is_sum_of(op, values, found) -> bool:
    """`sum(v, axis, keepdims)` of a value `v` of the chain, over every axis or some."""
    return (op.prim == "sum" and len(op.args) == 3 and op.args[0] in values
            and not any(k in op.attrs for k in _SPECIAL) and all(isinstance(a, Const) for a in op.args[1:])
            and op.args[2].value in (False, True)
            and bool(_axes(op.args[1].value, len(found.shapes[op.args[0]]))))


def _axes(axis, ndim):
    """`axis` (None, an int or a tuple of ints) as a sorted tuple of axes; None if not one."""
    axes = tuple(range(ndim)) if axis is None else axis if isinstance(axis, tuple) else (axis,)
    return tuple(sorted({a % ndim for a in axes})) if all(
        type(a) is int and -ndim <= a < ndim for a in axes) else None


def _reads_outside(ops, chains, results) -> set:
    """The chains' values read by an op outside their chain, or after `ops`."""
    owner = {o: n for n, chain in enumerate(chains) for j in chain for o in ops[j].outs}
    chain_of = {j: n for n, chain in enumerate(chains) for j in chain}
    return {v for v in results if isinstance(v, Var) and v in owner} | {
        v for i, op in enumerate(ops) for v in op.operand_vars()
        if v in owner and chain_of.get(i) != owner[v]}


def _fused_op(chain: list, read_after: set, found, namer) -> Op:
    """One `fused` op of a chain's ops (Note [Fused elementwise chains])."""
    defined = {o for op in chain for o in op.outs}
    shape = found.shapes[next(op.outs[0] for op in chain if op.prim != "sum")]
    arrays = list(dict.fromkeys(  # the arrays the loop reads, in order of first use
        a for op in chain for a in op.args
        if isinstance(a, Var) and a not in defined and not _is_number(a, found)))
    loads = {a: Var(namer.fresh(f"{a.name.lstrip('_') or 'v'}_i")) for a in arrays}
    numbers = {o: Var(namer.fresh(f"{o.name.lstrip('_')}_i")) if o in read_after else o
               for op in chain if op.prim != "sum" for o in op.outs}
    body, outs = [], []  # outs: (Var, its number, "store" | "sum" | (axes, keepdims))
    for op in chain:
        if op.prim == "sum":  # "sum": a number, the sum of every value
            axes, keep = _axes(op.args[1].value, len(shape)), bool(op.args[2].value)
            kind = "sum" if not keep and len(axes) == len(shape) else (axes, keep)
            outs.append((op.outs[0], numbers.get(op.args[0], op.args[0]), kind))
            continue
        args = tuple(loads.get(a, numbers.get(a, a)) if isinstance(a, Var) else a for a in op.args)
        attrs = {"backward": True} if op.attrs.get("backward") else {}
        body.append(Op(op.prim, args, tuple(numbers[o] for o in op.outs), op.loc, attrs))
        outs += [(o, numbers[o], "store") for o in op.outs if o in read_after]
    reads = tuple(found.shapes[a] for a in arrays)
    nested = any(s != shape for s in reads) or any(isinstance(k, tuple) for _, _, k in outs)
    flat_too = len(shape) != 1 and not nested  # (one loop over the flattened arrays)
    index = [Var(namer.fresh("i"), "static") for _ in (shape if nested else (0,))]
    attrs = {"shape": shape, "kinds": tuple(k for _, _, k in outs), "reads": reads, "nested": nested,
             "flat": tuple(namer.fresh(f"{v.name}_flat") if flat_too and k == "store" else None
                           for v, _, k in outs),
             "read_flat": tuple(namer.fresh(f"{a.name}_flat") if flat_too else None for a in arrays),
             "backward": any(op.attrs.get("backward") for op in chain)}
    return Op("fused", tuple(arrays), tuple(v for v, _, _ in outs), None, attrs,
              (Block(body, [n for _, n, _ in outs], [*index, *loads.values()]),))
