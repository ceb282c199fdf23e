"""The batched program's two functions (Note [Hoisting the primal]).

Note [Hoisting the primal]
~~~~~~~~~~~~~~~~~~~~~~~~~~
A batched Jacobian or Hessian pass (Note [Batching] in srcgrad.passes.batch) runs once
per chunk of seeds, but most of its ops read no seed: the primal program, the gradient
of a Hessian, and the primal factors that contraction fusion combines (Note
[Seed-linear fusion] in srcgrad.passes.batch_fuse). On the 640-unit MLP Hessian, 20
chunks recomputed `tanh(X @ W1 + b1)` 20 times. So the program is split where the
seeds reach: `f_<kind>_primal(<params>)` runs every op no seed reaches, once per
call, and returns the outputs and every value the seeded ops read;
`f_<kind>(<those values>, <seeds>, _workspace)` runs the rest, once per chunk. The
primal function's values are parameters of the chunk function, so no buffer reuse
(srcgrad.passes.inplace) or workspace (srcgrad.passes.workspace) writes into them.
"""

from __future__ import annotations

import numpy

from srcgrad.codegen import emit, names
from srcgrad.ir.core import Var, operand_vars
from srcgrad.passes.array_spellings import spell_for_arrays
from srcgrad.passes.batch import batch, order_commutative
from srcgrad.passes.batch_fuse import fuse
from srcgrad.passes.cse import cse
from srcgrad.passes.dce import dce
from srcgrad.passes.identity_seeds import contract_identity_seeds
from srcgrad.passes.inplace import reuse_buffers
from srcgrad.passes.shapes import probe
from srcgrad.passes.workspace import assign_workspace


def batched_ops(ops, seeds, results, inputs, args, examples, size, namer, budget=None):
    """(ops, results, chunk): `ops` (one seed's derivative program, shapes known) batched
    over `size` seeds (Note [Batching]) and fused (Note [Seed-linear fusion]). With
    `budget` (bytes), `chunk` says how many seeds would keep the largest batched value
    of the fused program within it (fused programs hold far smaller values than unfused
    ones: the MLP Hessian's 640 seeds fit in one pass); where that is more than `size`,
    the caller compiles again for `chunk` seeds (batch() rewrites `ops` in place)."""
    ops, results = _batched_ops(ops, seeds, results, inputs, args, examples, size, namer)
    if budget is None:
        return ops, results, size
    total = sum(int(numpy.size(e)) for e in examples)
    per_seed = _largest_per_seed(ops, seeds, inputs, args, examples, size)
    return ops, results, max(size, min(total, budget // max(per_seed, 1)))


def _follow(v, alias):
    while isinstance(v, Var) and v in alias:
        v = alias[v]
    return v


def _batched_ops(ops, seeds, results, inputs, args, examples, size, namer):
    shapes = probe(ops, inputs, tuple(args) + tuple(examples)).shapes
    ops, rename, batched = batch(ops, seeds, size, shapes, namer)
    results = [_follow(r, rename) for r in results]
    ops, alias = cse(order_commutative(ops))
    results = [_follow(r, alias) for r in results]
    ops = dce(ops, results)
    # contraction chains of batched values as GEMMs in a good order (srcgrad.passes.batch_fuse);
    # what no seed reaches runs once per call (Note [Hoisting the primal])
    chunks = max(1.0, sum(int(numpy.size(e)) for e in examples) / size)
    shapes = probe(ops, inputs, tuple(args) + _batched(examples, size)).shapes
    ops, fused = fuse(ops, results, batched, shapes, namer, primal_weight=1 / chunks)
    results = [_follow(r, fused) for r in results]
    return dce(ops, results), results


def _batched(examples, size) -> tuple:
    return tuple(numpy.zeros((size,) + numpy.shape(e), numpy.result_type(e)) for e in examples)


def _largest_per_seed(ops, seeds, inputs, args, examples, size) -> int:
    """Bytes per seed of the largest value the per-chunk function holds."""
    _, seeded = split(ops, seeds)
    facts = probe(ops, inputs, tuple(args) + _batched(examples, size))
    sizes = [int(numpy.prod(facts.shapes[o])) * numpy.dtype(facts.dtypes[o]).itemsize
             for op in seeded for o in op.outs if o in facts.shapes and o in facts.dtypes]
    return max(sizes + [8]) // size


def split(ops: list, seeds: list) -> tuple:
    """(primal ops, seeded ops): the ops no seed reaches, and the others."""
    reached = set(seeds)
    primal, seeded = [], []
    for op in ops:
        if any(v in reached for v in op.operand_vars()):
            reached.update(op.outs)
            seeded.append(op)
        else:
            primal.append(op)
    return primal, seeded


def _defined(ops) -> set:
    return {o for op in ops for o in op.outs}


def emit_batched(name, ops, params, seeds, results, n_first, args, examples, size, namer):
    """(sources, entry names, constants): `name`_primal, `name` (one chunk),
    `name`_workspace and `name`_chunk (the number of seeds a chunk takes)."""
    batched_examples = _batched(examples, size)
    if len(seeds) == 1 and size == sum(int(numpy.size(e)) for e in examples):
        # one chunk of every seed: the identity (Note [Identity seeds]); what it leaves
        # reading no seed is hoisted into the primal function below
        facts = probe(ops, params + seeds, tuple(args) + tuple(batched_examples))
        ops = contract_identity_seeds(ops, seeds[0], facts.shapes, namer)
    primal, seeded = split(ops, seeds)
    chunk_results = results[n_first:]
    inside = _defined(seeded) | set(seeds)
    needed = []
    for v in [v for op in seeded for v in op.operand_vars()] + \
            [v for r in chunk_results for v in operand_vars(r)]:
        if v not in inside and v not in needed:
            needed.append(v)
    facts = probe(ops, params + seeds, tuple(args) + tuple(batched_examples))
    spell_for_arrays(ops, facts.arrays)
    reuse_buffers(primal, params, list(results[:n_first]) + needed, facts)
    reuse_buffers(seeded, needed + seeds, chunk_results, facts)
    buffers = assign_workspace(seeded, chunk_results, facts, namer)
    workspace = Var(namer.fresh("_workspace"))
    names.tidy_temporaries(primal + seeded, [v.name for v in params + seeds] + [b.name for b, _, _ in buffers]
                           + [workspace.name])
    pool = emit.ConstPool()
    firsts = _tuple([emit.operand_source(o, pool) for o in results[:n_first]])
    hoisted = _tuple([v.name for v in needed])
    primal_src = emit.render_function(f"{name}_primal", [v.name for v in params],
                                      emit.block_lines(primal, pool), f"{firsts}, {hoisted}")
    unpack = [f"{', '.join(b.name for b, _, _ in buffers)}, = {workspace.name}"] if buffers else []
    chunk_src = emit.render_function(
        name, [v.name for v in needed + seeds] + [workspace.name],
        unpack + emit.block_lines(seeded, pool),
        _tuple([emit.operand_source(o, pool) for o in chunk_results]))
    # the buffers the caller allocates once and passes on every call (srcgrad.passes.workspace)
    allocate = emit.render_function(f"{name}_workspace", [], [], _tuple(
        [f"xp.empty({shape!r}, dtype={numpy.dtype(dtype).name!r})" for _, shape, dtype in buffers]))
    chunk = emit.render_function(f"{name}_chunk", [], [], repr(int(size)))
    return ([primal_src, chunk_src, allocate, chunk],
            (f"{name}_primal", name, f"{name}_workspace", f"{name}_chunk"), pool)


def _tuple(items: list) -> str:
    if len(items) == 1:
        return f"({items[0]},)"
    return f"({', '.join(items)})"
