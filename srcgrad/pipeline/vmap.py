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
value reaches is broadcast along the batch, as JAX does. An op with no batched form
(control flow, effects, an index computed from a mapped value) is a CompileError at
the op's line: never a per-example Python loop, never a silent copy of one result.
"""

from __future__ import annotations

from srcgrad.codegen import emit, names
from srcgrad.errors import CompileError
from srcgrad.ir.core import Const, Var, operand_vars
from srcgrad.passes.array_spellings import spell_for_arrays
from srcgrad.passes.batch import Unbatchable, _Batcher, decide_none_tests, fold_static, order_commutative
from srcgrad.passes.batch_control import batch_ops
from srcgrad.passes.cse import cse
from srcgrad.passes.dce import dce
from srcgrad.passes.shapes import probe
from srcgrad.pipeline.graphs import trace
from srcgrad.pipeline.programs import Functions, _follow, optimize


def vmap_program(fs, in_axes: tuple, out_axes, examples: tuple, size: int, batched_args: tuple):
    """`def <f>_vmap(<params>)` for arguments mapped along `in_axes` (one int or None per
    parameter) with batch `size`; `examples`: one unbatched example per parameter,
    `batched_args`: the arguments with their batch axes first (for the probe).
    `out_axes`: one int or None per output leaf, or one for every leaf."""
    graph, namer = trace(fs, args=examples)
    graph.ops, decided = decide_none_tests(graph.ops, graph.inputs, examples)
    outputs = [_follow(o, decided) for o in graph.outputs]
    found = probe(graph.ops, graph.inputs, examples)
    ops, outputs = optimize(graph.ops, outputs, found.shapes, found.values, found.floats)
    found = probe(ops, graph.inputs, examples)  # the optimised program's own values
    ops = dce(fold_static(ops, found.values), outputs)
    mapped = [v for v, ax in zip(graph.inputs, in_axes) if ax is not None]
    ops, rename, batched = _batch(ops, mapped, size, dict(found.shapes), namer, fs)
    outputs = [_follow(o, rename) for o in outputs]
    ops, alias = cse(order_commutative(ops))
    outputs = [_follow(o, alias) for o in outputs]
    ops = dce(ops, outputs)
    outs = out_axes if isinstance(out_axes, (tuple, list)) else (out_axes,) * len(outputs)
    if len(outs) != len(outputs):
        raise ValueError(f"vmap: out_axes has {len(outs)} entries but {fs.name}() returns "
                         f"{len(outputs)} values")
    facts = probe(ops, graph.inputs, batched_args)
    spell_for_arrays(ops, facts.arrays)
    names.tidy_temporaries(ops, [v.name for v in graph.inputs])
    pool = emit.ConstPool()
    lines = [f"{v.name} = xp.moveaxis({v.name}, {ax}, 0)"
             for v, ax in zip(graph.inputs, in_axes) if ax not in (None, 0)]
    lines += emit.block_lines(ops, pool)
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


def _batch(ops, mapped, size, shapes, namer, fs):
    """srcgrad.passes.batch.batch, where a refusal names the op's line."""
    b = _Batcher(size, shapes, namer)
    b.batched.update(mapped)
    try:
        batch_ops(b, ops)  # control flow too (Note [Batching control flow])
    except Unbatchable as err:
        op = err.op
        raise CompileError.at(op.loc, f"sg.vmap: {err}: `{op.prim}` has no batched form yet "
                              f"(in {fs.name}())", _HINT) from None
    return b.out, b.rename, b.batched


_HINT = ("map a function without it (a loop whose trip count is known can be written "
         "out), or call the function once per example yourself")
