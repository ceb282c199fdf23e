"""`sg.vmap`'s program: a function's primal program batched over a leading axis of its
mapped arguments, written as one generated function (Note [Vmap as batching]).

Note [Vmap as batching]
~~~~~~~~~~~~~~~~~~~~~~~
A Jacobian's batched pass (Note [Batching] in srcgrad.passes.batch) gives every seed and
every value computed from one a leading axis of B seeds. `sg.vmap` is the same rewrite
with the mapped *arguments* in the seeds' place: the function is traced on one example
(each mapped argument's first slice), its shapes probed, and each op that reads a mapped
value gets its batched spelling; ops that read only unmapped arguments run once, as
JAX's do. So `sg.vmap(sg.grad(f), in_axes=(None, 0, 0))` batches the *generated
gradient* (the transform's entry: plain NumPy the tracer reads back), which is the
per-example gradient in one pass of matmuls over the batch.

The generated function takes the arguments as the user passes them: a mapped axis
other than 0 is moved to the front by its first lines (`xp.moveaxis`, a view), and an
output's batch axis is moved to its `out_axes` by the return. An output no mapped
value reaches is broadcast along the batch, as JAX does. Loops and branches are batched
too (Note [Batching control flow] in srcgrad.passes.batch_control). An op with no
batched form (an effect, an index computed from a mapped value, a per-example trip
count in a gradient) is a CompileError at the op's line: never a per-example Python
loop, never a silent copy of one result.
"""

from __future__ import annotations

import os

import numpy

from srcgrad.codegen import emit, names
from srcgrad.errors import CompileError, ProbeFailed
from srcgrad.ir.core import Const, Pack, Var, operand_vars
from srcgrad.passes.array_spellings import spell_for_arrays
from srcgrad.passes.batch import (
    Unbatchable,
    _Batcher,
    decide_none_tests,
    fold_static,
    order_commutative,
)
from srcgrad.passes.batch_control import batch_ops
from srcgrad.passes.cse import cse
from srcgrad.passes.dce import dce
from srcgrad.passes.shapes import probe
from srcgrad.pipeline.graphs import trace
from srcgrad.pipeline.programs import Functions, _follow, optimize


def _probe(ops, inputs, args):
    """probe, whose failure is the program's own error on these arguments, as running it
    would raise (a saved value written in place is torch's RuntimeError, by design:
    campaign 2600000 seed 2602382), not the probe's wrapper (vmap has no generic code)."""
    try:
        return probe(ops, inputs, args)
    except ProbeFailed as err:
        raise (err.__cause__ or err) from None


def vmap_program(fs, in_axes: tuple, out_axes, examples: tuple, size: int, batched_args: tuple,
                 traceable: bool = False):
    """`def <f>_vmap(<params>)` for arguments mapped along `in_axes` (one int or None per
    parameter) with batch `size`; `examples`: one unbatched example per parameter,
    `batched_args`: the arguments with their batch axes first (for the probe).
    `out_axes`: one int or None per output leaf, or one for every leaf. `traceable`:
    code another transform traces, so plain ops only (Note [Unbuffered rows])."""
    graph, namer = trace(fs, args=examples)
    graph.ops, decided = decide_none_tests(graph.ops, graph.inputs, examples)
    outputs = [_follow(o, decided) for o in graph.outputs]
    found = _probe(graph.ops, graph.inputs, examples)
    ops, outputs = optimize(graph.ops, outputs, found.shapes, found.values, found.floats)
    found = _probe(ops, graph.inputs, examples)  # the optimised program's own values
    ops = dce(fold_static(ops, found.values), outputs)
    mapped = [v for v, ax in zip(graph.inputs, in_axes) if ax is not None]
    ops, written, checks = (ops, {}, []) if traceable else _lift_no_alias(ops, graph.inputs)
    ops, outputs, batched = _batch(ops, outputs, mapped, size, found, namer, fs, written)
    outs = out_axes if isinstance(out_axes, (tuple, list)) else (out_axes,) * len(outputs)
    if len(outs) != len(outputs):
        raise ValueError(f"vmap: out_axes has {len(outs)} entries but {fs.name}() returns "
                         f"{len(outputs)} values")
    facts = _probe(ops, graph.inputs, batched_args)
    spell_for_arrays(ops, facts.arrays)
    names.tidy_temporaries(ops, [v.name for v in graph.inputs])
    pool = emit.ConstPool()
    lines = [f"{v.name} = xp.moveaxis({v.name}, {ax}, 0)"
             for v, ax in zip(graph.inputs, in_axes) if ax not in (None, 0)]
    lines += _check_lines(checks, graph.inputs, in_axes, examples, size)
    lines += _block_lines(ops, pool, set() if traceable else _wide_rows(ops, facts))
    results = []
    for k, (out, ax) in enumerate(zip(outputs, outs)):
        text = emit.operand_source(out, pool)
        is_batched = any(v in batched for v in operand_vars(out))
        if ax is None:
            if is_batched:
                raise ValueError(f"vmap: out_axes[{k}] is None but output {k} of {fs.name}() "
                                 "depends on a mapped argument")
            results.append(text)
            continue
        if not is_batched:  # no mapped value reaches it: the same for every example
            shape = found.shapes.get(out) if isinstance(out, Var) else None
            if shape is None and isinstance(out, Const):
                text = f"xp.asarray({text})"
                shape = tuple(getattr(out.value, "shape", ()))
            if shape is None:
                raise CompileError(f"vmap: the shape of output {k} of {fs.name}() depends on the data")
            text = f"xp.broadcast_to({text}, {(size,) + tuple(shape)!r})"
        if ax != 0:
            text = f"xp.moveaxis({text}, 0, {ax})"
        results.append(text)
    name = f"{fs.name}_vmap"
    result = _nested(graph.out_tree, iter(results))  # nested as f's own result
    source = emit.render_function(name, [v.name for v in graph.inputs], lines, result)
    return Functions([source], (name,), dict(pool.values), graph.out_tree)


def vmap_jacobian_program(fs, kind: str, wrt: tuple, single: bool, in_axes: tuple, out_axes,
                          examples: tuple, size: int, tree) -> Functions:
    """`def <f>_vmap(<params>)`: sg.vmap of sg.jacobian / sg.hessian (`kind` "jacfwd",
    "jacrev" or "hessian" as srcgrad.jacobians names them). One seed's derivative program
    is batched over every identity seed (Note [Batching]), then that program over the
    mapped arguments: two batch axes, (examples, seeds); the blocks are sliced from it as
    srcgrad.jacobians assembles them, with the examples' axis first. `tree`: how the
    result nests (the Jacobian's out tree; for a Hessian, one leaf per `wrt` argument)."""
    if not isinstance(out_axes, int):
        raise ValueError("vmap of a jacobian or hessian: out_axes must be one int")
    from srcgrad.pipeline.programs import seeded_program

    graph, namer, ops, results, n_first, seeds, seed_examples = seeded_program(fs, kind, wrt, examples)
    seed_shapes = [tuple(numpy.shape(e)) for e in seed_examples]
    seed_sizes = [int(numpy.prod(sh)) for sh in seed_shapes]
    total = sum(seed_sizes)
    if total == 0:
        raise CompileError("vmap of a jacobian: no seed (an empty argument or output)")
    inputs = graph.inputs + seeds
    found = _probe(ops, inputs, tuple(examples) + tuple(seed_examples))
    per_seed = [_shape_of(r, found) for r in results[n_first:]]  # each derivative's own shape
    # (batch_ops, not batch: a derivative program of a loop has the loop's control flow,
    # Note [Batching control flow]; a refusal names the op's line, not `<unknown>:0`)
    b = _Batcher(total, dict(found.shapes), namer)
    b.ints.update(_integers(found))
    b.batched.update(seeds)
    try:
        batch_ops(b, ops)
    except Unbatchable as err:
        raise CompileError.at(err.op.loc, f"sg.vmap of a {kind}: {err}: `{err.op.prim}` has no "
                              f"batched form yet (in {fs.name}())", _HINT) from None
    ops, by_seed = b.out, b.batched
    results = [_follow(r, b.rename) for r in results]
    ops, alias = cse(order_commutative(ops))
    results = [_follow(r, alias) for r in results]
    ops = dce(ops, results)
    derivs = results[n_first:]
    seeded = [any(v in by_seed for v in operand_vars(r)) for r in derivs]
    eyes, offset, lines = [], 0, []
    for v, shape, n, e in zip(seeds, seed_shapes, seed_sizes, seed_examples):
        dtype = numpy.dtype(numpy.result_type(e)).name
        eyes.append(numpy.eye(total, dtype=dtype)[:, offset:offset + n].reshape((total,) + shape))
        lines.append(f"{v.name} = xp.eye({total}, dtype={dtype!r})[:, {offset}:{offset + n}]"
                     f".reshape({(total,) + shape!r})")
        offset += n
    found = _probe(ops, inputs, tuple(examples) + tuple(eyes))
    mapped = [v for v, ax in zip(graph.inputs, in_axes) if ax is not None]
    ops, written, checks = _lift_no_alias(ops, graph.inputs)  # (Note [Writes into mapped arguments])
    ops, derivs, by_example = _batch(ops, derivs, mapped, size, found, namer, fs, written)
    facts = _probe(ops, inputs, _batched_examples(examples, in_axes, size) + tuple(eyes))
    spell_for_arrays(ops, facts.arrays)
    names.tidy_temporaries(ops, [v.name for v in inputs])
    pool = emit.ConstPool()
    lines = [f"{v.name} = xp.moveaxis({v.name}, {ax}, 0)"
             for v, ax in zip(graph.inputs, in_axes) if ax not in (None, 0)] + (
        _check_lines(checks, graph.inputs, in_axes, examples, size) + lines)
    lines += emit.block_lines(ops, pool)
    flat = []  # each derivative as (examples, seeds, its elements)
    for k, (r, shape, by_s) in enumerate(zip(derivs, per_seed, seeded)):
        text, full = emit.operand_source(r, pool), (size, total) + shape
        by_b = any(v in by_example for v in operand_vars(r))
        if by_b and not by_s:
            text = f"xp.reshape({text}, {(size, 1) + shape!r})"
        if not (by_b and by_s):
            text = f"xp.broadcast_to({text}, {full!r})"
        lines.append(f"_d{k} = xp.reshape({text}, {(size, total, int(numpy.prod(shape)))!r})")
        flat.append(f"_d{k}")
    leaves = _blocks(kind, flat, per_seed, seed_shapes, seed_sizes, [numpy.shape(examples[i]) for i in wrt],
                     single, size, out_axes)
    name = f"{fs.name}_vmap"
    source = emit.render_function(name, [v.name for v in graph.inputs], lines, _nested(tree, iter(leaves)))
    return Functions([source], (name,), dict(pool.values), tree)


# Note [Unbuffered rows]
# ~~~~~~~~~~~~~~~~~~~~~~
# A batched matmul_bar's per-example outer products are elementwise ops that broadcast
# one operand along the other's rows: `x * g[:, None]` (the per-example gradient of
# `x @ w`), `g[:, :, None] * x[:, None, :]`. NumPy (2.4 measured) runs such an op through
# its iterator's buffers whenever a row is shorter than the buffer (8192 elements): it
# copies rows into the buffer and back, which costs 2-3x the same op without the
# broadcast (1024 x 784 doubles: 330 us against 140 us for `x * 2.0`). Given a buffer
# smaller than a row it runs each row in place, at the speed of the plain op. The
# buffer size is context state (`np.setbufsize`) that also decides how a reduction is
# chunked, so a reduction's last bits change with it; the batched program therefore sets
# it only around such an op, inside `with xp.errstate():`, which restores it on the way
# out (an exception included). An elementwise op's values do not depend on the buffer;
# one that needs a cast (mixed dtypes) does use it, and small buffers would slow it, so
# every operand has the result's dtype. The op is large (the `with` costs about 2 us).
# Code another transform traces (a vmap's `entry_at`: sg.vmap or sg.jacobian of a vmap)
# is written without it: the frontend reads no `with` statement.
_ROW_OPS = ("add", "subtract", "multiply", "divide")
_BUFFER = 8192  # NumPy's default buffer, in elements: a row this long is not buffered
_SMALL_BUFFER = 256  # (a multiple of 16, as NumPy requires; no longer than a marked row)


def _wide_rows(ops, facts) -> set:
    """The top-level ops of Note [Unbuffered rows]: a broadcasting add, subtract,
    multiply or divide of one dtype, of 2**15 elements or more, whose rows (the trailing
    axes over which every operand is either whole or broadcast) are 256 to 8191 long."""
    marked = set()
    for op in ops:
        if op.prim not in _ROW_OPS or len(op.outs) != 1 or op.outs[0] not in facts.shapes:
            continue
        out = op.outs[0]
        shape, dtype = tuple(facts.shapes[out]), facts.dtypes.get(out)
        if dtype is None or dtype.kind not in "fc" or len(shape) < 2 or numpy.prod(shape) < 2 ** 15:
            continue
        patterns, ok = [], True
        for a in op.args:
            if isinstance(a, Var) and facts.dtypes.get(a) == dtype and a in facts.shapes:
                sh = (1,) * (len(shape) - len(facts.shapes[a])) + tuple(facts.shapes[a])
                patterns.append([n == 1 and m != 1 for n, m in zip(sh, shape)])
            elif not (isinstance(a, Const) and type(a.value) in (int, float)):
                ok = False  # (a cast, or a value the probe does not know)
        if not ok or not any(any(p) for p in patterns):
            continue  # (no broadcast: NumPy's loop runs the whole array at once)
        row, k = shape[-1], len(shape) - 2
        while k >= 0 and all(p[k] == p[k + 1] for p in patterns):
            row, k = row * shape[k], k - 1
        if _SMALL_BUFFER <= row < _BUFFER:
            marked.add(id(op))
    return marked


def _block_lines(ops, pool, marked: set) -> list:
    """emit.block_lines, with each op in `marked` run with a small buffer."""
    lines, run = [], []
    for op in ops:
        if id(op) not in marked:
            run.append(op)
            continue
        lines += emit.block_lines(run, pool)
        if op.loc is not None and not (run and _line(run[-1]) == _line(op)):  # (its line's comment)
            lines += ([""] if lines else []) + [
                f"# {op.loc.text}  ({os.path.basename(op.loc.file)}:{op.loc.line})"]
        run = []
        lines += ["with xp.errstate():  # rows unbuffered: Note [Unbuffered rows] in srcgrad.pipeline.vmap",
                  f"    xp.setbufsize({_SMALL_BUFFER})",
                  "    " + emit.op_statement(op, pool)]
    return lines + ([""] if lines and run else []) + emit.block_lines(run, pool)


# Note [Writes into mapped arguments]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Where a function writes into an argument, its program checks once, at the write,
# `no_alias(new, arg, *other args)` (Note [Mutation at trace time] in
# srcgrad.frontend.mutation): the written argument must be writable and share no memory
# with the others, else it raises as NumPy's write would have misbehaved. Under vmap the
# check is each example's: its slice of the written argument against the others'
# slices (or whole unmapped arguments), exactly what a Python loop of the function
# checks. A slice's memory lies within its array's, so where the whole arrays are
# writable and share no memory (numpy.may_share_memory, the bounds that no_alias reads)
# no example's check raises: the common case costs one test per pair. Otherwise the
# examples are checked one by one with no_alias itself, which raises the loop's own
# error at the first example whose check fails. The checks go first in the batched
# function (the op itself is the identity on `new`); a per-example argument of shape ()
# is a NumPy scalar, which no_alias passes, so it has none. Only a check outside loops
# and branches is lifted (it runs once on every call). Another check, and every check in
# code another transform traces (entry_at), which the frontend reads back, is batched as
# the row `no_alias_batched` (srcgrad.passes.batch): the same whole-array test first, then
# example by example, in the batched code itself.
def _lift_no_alias(ops, inputs) -> tuple:
    """(ops without the liftable no_alias ops, each one's result -> its operand, the
    checks: (index of the written argument, indices of the others))."""
    index = {v: i for i, v in enumerate(inputs)}
    kept, renamed, checks = [], {}, []
    for op in ops:
        checked = [i for a in op.args[1:] for i in (a.items if isinstance(a, Pack) else (a,))]
        if op.prim == "no_alias" and all(isinstance(a, Var) and a in index for a in checked):
            renamed[op.outs[0]] = op.args[0]
            checks.append((index[checked[0]], [index[a] for a in checked[1:]]))
        else:
            kept.append(op)
    return kept, renamed, checks


def _check_lines(checks, inputs, in_axes, examples, size) -> list:
    """The per-example checks of Note [Writes into mapped arguments]."""
    lines = []
    for base, others in checks:
        mapped = in_axes[base] is not None
        if not isinstance(examples[base], numpy.ndarray):  # (a scalar: `+=` rebinds it)
            continue
        arrays = [o for o in others if in_axes[o] is not None or isinstance(examples[o], numpy.ndarray)]

        def each(i, by_example):
            return f"{inputs[i].name}[_i]" if by_example and in_axes[i] is not None else inputs[i].name
        name = inputs[base].name
        lines.append(f"# {name} is written in place: Note [Writes into mapped arguments] in "
                     "srcgrad.pipeline.vmap")
        if not mapped and all(in_axes[o] is None for o in arrays):
            lines.append(f"no_alias(None, {', '.join(each(i, False) for i in [base, *arrays])})")
            continue
        tests = [f"not {name}.flags.writeable"] + [f"xp.may_share_memory({name}, {inputs[o].name})"
                                                   for o in arrays]
        lines += [f"if {' or '.join(tests)}:",
                  f"    for _i in range({size}):",
                  f"        no_alias(None, {', '.join(each(i, True) for i in [base, *arrays])})"]
    return lines + ([""] if lines else [])


def _line(op):
    return (op.loc.file, op.loc.line) if op.loc is not None else None


def _shape_of(r, found) -> tuple:
    if isinstance(r, Const):
        return tuple(numpy.shape(r.value))
    shape = found.shapes.get(r)
    if shape is None:
        raise CompileError("vmap of a jacobian: a derivative's shape depends on the data")
    return tuple(shape)


def _batched_examples(examples, in_axes, size) -> tuple:
    return tuple(e if ax is None else numpy.broadcast_to(e, (size,) + numpy.shape(e))
                 for e, ax in zip(examples, in_axes))


def _blocks(kind, flat, per_seed, seed_shapes, seed_sizes, arg_shapes, single, size, out_axis) -> list:
    """The text of each result leaf: per output, its block per `wrt` argument (a tuple,
    or bare for one argument), sliced from the (examples, seeds, elements) derivatives as
    srcgrad.jacobians._split does."""
    starts = [sum(seed_sizes[:j]) for j in range(len(seed_sizes))]

    def moved(text):
        return text if out_axis == 0 else f"xp.moveaxis({text}, 0, {out_axis})"
    leaves = []
    if kind == "jacrev":  # seeds: output elements; derivatives: one per argument
        for k, (oshape, n) in enumerate(zip(seed_shapes, seed_sizes)):
            per_arg = [moved(f"xp.reshape({d}[:, {starts[k]}:{starts[k] + n}, :], "
                             f"{(size,) + oshape + tuple(ashape)!r})")
                       for d, ashape in zip(flat, arg_shapes)]
            leaves.append(per_arg[0] if single else f"({', '.join(per_arg)},)")
        return leaves
    for d, oshape in zip(flat, per_seed):  # seeds: argument elements; one derivative per output
        per_arg = [moved(f"xp.reshape(xp.swapaxes({d}[:, {starts[j]}:{starts[j] + n}, :], 1, 2), "
                         f"{(size,) + oshape + tuple(ashape)!r})")
                   for j, (n, ashape) in enumerate(zip(seed_sizes, arg_shapes))]
        leaves.append(per_arg[0] if single else f"({', '.join(per_arg)},)")
    return leaves


def _nested(tree, leaves) -> str:
    if tree[0] == "leaf":
        return next(leaves)
    if tree[0] == "tuple":
        items = [_nested(c, leaves) for c in tree[1]]
        return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
    if tree[0] == "list":
        return "[" + ", ".join(_nested(c, leaves) for c in tree[1]) + "]"
    if tree[0] == "dict":
        return "{" + ", ".join(f"{k!r}: {_nested(c, leaves)}" for k, c in zip(tree[1], tree[2])) + "}"
    raise CompileError(f"sg.vmap: a result of kind {tree[0]!r} is not supported yet")


def _batch(ops, results, mapped, size, found, namer, fs, renamed=None):
    """srcgrad.passes.batch.batch, where a refusal names the op's line, then cse and dce:
    (ops, the results' batched values, the batched values). `found`: the probe's facts.
    `renamed`: values that are others (a lifted no_alias's result: its operand)."""
    b = _Batcher(size, dict(found.shapes), namer)
    b.ints.update(_integers(found))
    b.batched.update(mapped)
    b.rename.update(renamed or {})
    try:
        batch_ops(b, ops)  # control flow too (Note [Batching control flow])
    except Unbatchable as err:
        op = err.op
        raise CompileError.at(op.loc, f"sg.vmap: {err}: `{op.prim}` has no batched form yet "
                              f"(in {fs.name}())", _HINT) from None
    results = [_follow(r, b.rename) for r in results]
    ops, alias = cse(order_commutative(b.out))
    results = [_follow(r, alias) for r in results]
    return dce(ops, results), results, b.batched


def _integers(found) -> set:
    """The values of shape () the probe knows are integers: a loop's counter (a Python
    int) and 0-d integer arrays (a Python int elsewhere is one kind with floats)."""
    ints = {v for v, kind in found.kinds.items() if kind == (int, None)}
    return ints | {v for v, dtype in found.dtypes.items()
                   if dtype.kind in "iu" and found.shapes.get(v) == ()}


_HINT = ("map a function without it (a loop whose trip count is known can be written "
         "out), or call the function once per example yourself")
