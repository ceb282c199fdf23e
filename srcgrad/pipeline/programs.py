"""The programs: a parsed function through the passes, in order, to generated function sources.

`gradient_program`, `vjp_program` and `jvp_program` return generated *function*
sources (srcgrad.pipeline.modules assembles, caches and loads them).
"""

from __future__ import annotations

import numpy

from srcgrad import rules
from srcgrad.codegen import emit, names
from srcgrad.ir.core import Const, Var
from srcgrad.ir.expand import Expander
from srcgrad.passes.array_spellings import spell_for_arrays
from srcgrad.passes.cse import cse
from srcgrad.passes.dce import dce
from srcgrad.passes.hoisting import hoist_loop_invariants, zeros_of_numbers
from srcgrad.passes.inplace import reuse_buffers
from srcgrad.passes.invariance import zero_edges
from srcgrad.passes.scalars import python_scalars
from srcgrad.passes.shapes import Probe, ProbeFailed, probe
from srcgrad.passes.simplify import simplify
from srcgrad.passes.tapes import accumulate_in_place, prune_tapes, split_tapes
from srcgrad.passes.vjp import reverse, zeros_for
from srcgrad.pipeline import fusion
from srcgrad.pipeline.graphs import backward_of, provably_scalar, scalar_output, trace  # noqa: F401 (re-exported)
from srcgrad.pipeline.keys import VERSION, cache_key, compiler_fingerprint  # noqa: F401 (re-exported)


class Functions:
    """Generated function sources plus what their module must bind (a plain class, not a
    dataclass: the decorator's generated methods cost every compiling process: issue 15)."""

    def __init__(self, sources: list, entries: tuple, constants: dict | None = None,
                 out_tree: object = None):
        self.sources = sources
        self.entries = entries  # names of the functions the caller uses, in order
        self.constants = {} if constants is None else constants  # global name -> value
        self.out_tree = out_tree  # vjp: the primal output's tree definition

    def __repr__(self):
        return (f"Functions(sources={self.sources!r}, entries={self.entries!r}, "
                f"constants={self.constants!r}, out_tree={self.out_tree!r})")


def optimize(ops: list, results: list, shapes: dict | None = None, values: dict | None = None,
             floats=()) -> tuple:
    """simplify → cse → dce; returns (ops, results with removed values replaced).
    `floats`: Vars the probe found floating point.

    Nested blocks (Note [Regions]) are optimised on their own, after their op: the
    enclosing level treats a control-flow op as one op reading its blocks' free Vars.
    """
    keep = [r for r in results if isinstance(r, Var)]
    ops, alias = simplify(ops, keep, shapes, values=values, floats=floats)
    results = [_follow(r, alias) for r in results]
    ops, alias = cse(ops)
    results = [_follow(r, alias) for r in results]
    ops = dce(ops, results)
    for op in ops:
        for block in op.blocks:
            block.ops, block.results = optimize(block.ops, block.results, shapes, values, floats)
    prune_tapes(ops)
    ops = dce(ops, results)
    for op in ops:  # what a pruned push read may have been its last reader
        for block in op.blocks:
            block.ops = dce(block.ops, block.results)
    return ops, results


def _follow(v, alias):
    while isinstance(v, Var) and v in alias:
        v = alias[v]
    return v


def gradient_program(fs, wrt: tuple, *, single=False, has_aux=False, with_value=False,
                     optimized=True, fn_name=None, pool=None, args=None,
                     allow_mutation=False) -> tuple:
    """(function source, ConstPool) of grad / value_and_grad of `fs` w.r.t. parameter indices.

    `single`: the user named one parameter (not a tuple), so one gradient is returned bare.
    `args`: the first call's arguments (all of them, defaults applied) when compiling
    a variant specialised to their shapes (Note [Shape specialisation]).
    `allow_mutation`: compiled for `allow_mutation_on_saved_tensors`.
    """
    graph, namer = trace(fs, allow_mutation, args)
    value, aux, aux_tree = scalar_output(graph, has_aux)
    graph.ops = hoist_loop_invariants(graph.ops)  # Note [Invariants off the tape]
    wrt_vars = [graph.inputs[i] for i in wrt]
    check_scalar = isinstance(value, Var) and not provably_scalar(graph.ops, value)
    if check_scalar and args is not None:  # a specialised variant checks once, here
        out_shape = probe(graph.ops, graph.inputs, args).shapes.get(value)
        if out_shape is not None:
            check_scalar = False
            if out_shape != ():
                raise ProbeFailed("grad of a non-scalar output", TypeError(  # the generic code
                    f"grad of {fs.name}() needs a scalar output; it returned an array of "  # says so
                    f"shape {out_shape}. Use sg.vjp, or reduce it (e.g. .sum())"))
    if check_scalar:  # checked at run time by the identity `ensure_scalar`
        value = Expander(namer, graph.ops).apply(rules.RULES["ensure_scalar"], [value, Const(fs.name)], {})
    backward, grad_list = backward_of(graph.ops, value, wrt_vars, namer)
    ops = graph.ops + backward
    results = grad_list + ([value] if with_value or check_scalar else []) + list(aux)
    found = probe(ops, graph.inputs, args) if args is not None else Probe()
    if optimized:
        ops, results = optimize(ops, results, found.shapes, found.values, found.floats)
    spell_for_arrays(ops, found.arrays)
    if args is not None:
        python_scalars(ops, graph.inputs, args)
        zeros_of_numbers(ops, found)
    grad_list, rest = results[:len(wrt)], results[len(wrt):]
    ops, grad_list = _own_gradients(ops, grad_list, graph.inputs, namer)
    if args is not None and optimized:
        reuse_buffers(ops, graph.inputs, grad_list + rest, found)
        accumulate_in_place(ops, grad_list + rest, found)
    names.tidy_temporaries(ops, [v.name for v in graph.inputs])
    split_tapes(ops, found, [v.name for v in graph.inputs])  # Note [One tape per saved quantity]
    if args is not None and optimized and fusion.enabled(fs):  # the numba rendering's loops
        ops = fusion.fuse(ops, grad_list + rest, found, [v.name for v in graph.inputs])
    pool = pool or emit.ConstPool()
    forward = [op for op in ops if not op.attrs.get("backward")]
    backward = [op for op in ops if op.attrs.get("backward")]
    body = emit.block_lines(forward, pool)
    if check_scalar and not with_value:
        rest = rest[1:]  # kept alive only for its check
    if backward:
        body += [""] + emit.block_lines(backward, pool, backward=True)
    grads_src = _tuple_src([emit.operand_source(g, pool) for g in grad_list], single=single)
    if has_aux:
        aux_src = _tree_src(aux_tree, rest[1:] if with_value else rest, pool)
        if with_value:
            result = f"({emit.operand_source(rest[0], pool)}, {aux_src}), {grads_src}"
        else:
            result = f"{grads_src}, {aux_src}"
    elif with_value:
        result = f"{emit.operand_source(rest[0], pool)}, {grads_src}"
    else:
        result = grads_src
    name = fn_name or (names.value_and_grad_fn_name(fs.name) if with_value
                       else names.grad_fn_name(fs.name))
    source = emit.render_function(name, _params(graph, pool), body, result)
    return source, pool


def vjp_program(fs, optimized=True, hooks=False, allow_mutation=False, args=None) -> Functions:
    """Forward (returns outputs and saved values) and backward functions of `fs`.

    `hooks`: the saved-tensor-hook variant, `f_fwd(pack_hook, ...)` and
    `f_bwd(unpack_hook, _saved, ...)` (Note [Saved-tensor hooks] in srcgrad.passes.hooks).
    `allow_mutation`: compiled for `allow_mutation_on_saved_tensors`.
    `args`: the first call's arguments when compiling a variant specialised to their
    shapes (Note [Shape specialisation]); the backward is probed with zero cotangents
    shaped like the outputs, so its cotangents must be NumPy arrays of those shapes
    (sg.vjp's vjp_fn checks the shapes and makes them arrays).
    """
    from srcgrad.passes import hooks as hooks_pass  # (these three: sg.vjp only, issue 15)
    from srcgrad.passes import saved as saved_pass
    from srcgrad.passes.vjp_control import reusable_tapes

    graph, namer = trace(fs, allow_mutation, args)
    hook_vars = (Var(namer.fresh("pack_hook"), "static"),
                 Var(namer.fresh("unpack_hook"), "static")) if hooks else None
    seeds, cotangent_params = [], []
    for i, out in enumerate(graph.outputs):
        ct = Var(namer.fresh(names.cotangent_name(out.name) if isinstance(out, Var) else f"_ct{i}"))
        cotangent_params.append(ct)
        if isinstance(out, Var):
            seeds.append((out, ct))
    backward, grads = reverse(graph.ops, graph.inputs, seeds, namer, hooks=hook_vars,
                              zero_edges=zero_edges(graph.ops))
    tracer = Expander(namer, backward)
    grad_list = [grads[w] if grads[w] is not None else zeros_for(tracer, w) for w in graph.inputs]
    ops = graph.ops + backward
    alive: list = []
    if hooks:
        ops, alive = hooks_pass.place_packs(ops)
    results = list(graph.outputs) + grad_list + alive
    found = Probe()
    if args is not None:  # the hooks' stand-ins: unpack(pack(x)) is x, as torch requires of them
        stand_ins = (_same, _same) if hooks else ()
        found = probe(ops, graph.inputs + cotangent_params + list(hook_vars or ()),
                      tuple(args) + _example_cotangents(graph, args) + stand_ins)
    if optimized:
        ops, results = optimize(ops, results, found.shapes, found.values, found.floats)
    spell_for_arrays(ops, found.arrays)
    ops = reusable_tapes(ops, namer)  # vjp_fn may be called more than once
    if args is not None and optimized:  # each run of the backward makes its own sums
        accumulate_in_place(ops, results, found)
    n_out, n_grad = len(graph.outputs), len(grad_list)
    outputs, grad_list = results[:n_out], results[n_out:n_out + n_grad]
    hook_params = list(hook_vars) if hooks else []
    names.tidy_temporaries(ops, [v.name for v in graph.inputs + cotangent_params + hook_params])
    forward, backward, saved = saved_pass.split(ops, graph.inputs + hook_params[:1],
                                                cotangent_params + hook_params[1:], outputs)
    # A gradient that *is* a forward value (d(x*y)/dx = y) is read by the backward too.
    defined_forward = set(graph.inputs) | {o for op in forward for o in op.outs}
    for g in grad_list:
        if isinstance(g, Var) and g in defined_forward and g not in saved:
            saved.append(g)
    if hooks:
        saved = hooks_pass.hook_saved(forward, backward, saved, hook_vars, namer)
    if args is not None and optimized and fusion.enabled(fs):  # the numba rendering's loops
        taken = [v.name for v in graph.inputs + cotangent_params + hook_params + saved]
        forward = fusion.fuse(forward, list(outputs) + saved, found, taken)
        taken += [o.name for op in forward for o in op.outs]
        backward = fusion.fuse(backward, grad_list, found, taken)
    pool = emit.ConstPool()
    fwd_name, bwd_name = names.forward_fn_name(fs.name), names.backward_fn_name(fs.name)
    out_src = _tuple_src([emit.operand_source(o, pool) for o in outputs], single=False)
    saved_src = _tuple_src([v.name for v in saved], single=False)
    fwd_params = [v.name for v in hook_params[:1]] + _params(graph, pool)
    fwd = emit.render_function(fwd_name, fwd_params, emit.block_lines(forward, pool),
                               f"{out_src}, {saved_src}")
    unpack = [f"{', '.join(v.name for v in saved)}, = _saved"] if saved else []
    bwd_body = unpack + ([""] if unpack else []) + emit.block_lines(backward, pool, backward=True)
    bwd_params = [v.name for v in hook_params[1:]] + ["_saved"] + [c.name for c in cotangent_params]
    bwd = emit.render_function(bwd_name, bwd_params, bwd_body,
                               _tuple_src([emit.operand_source(g, pool) for g in grad_list],
                                          single=False))
    return Functions([fwd, bwd], (fwd_name, bwd_name), dict(pool.values), graph.out_tree)


def _same(value):
    return value


def _example_cotangents(graph, args) -> tuple:
    """Zeros shaped like each output, to probe the backward with; ProbeFailed when an
    output's shape depends on the data (the generic code serves such a function)."""
    facts = probe(graph.ops, graph.inputs, args)
    examples = []
    for out in graph.outputs:
        shape = facts.shapes.get(out) if isinstance(out, Var) else numpy.shape(out.value)
        if shape is None:
            raise ProbeFailed("an output's shape depends on the data")
        dtype = facts.dtypes.get(out, numpy.dtype(numpy.float64)) if isinstance(out, Var) \
            else numpy.result_type(out.value)
        examples.append(numpy.zeros(shape, dtype if dtype.kind in "fc" else numpy.float64))
    return tuple(examples)


_VIEWS = ("getitem", "reshape", "transpose", "T", "swapaxes", "moveaxis", "expand_dims",
          "squeeze", "ravel")


def _own_gradients(ops, grad_list, inputs, namer):
    """Copy returned gradients that alias an input, a read-only broadcast or each other."""
    producers = {o: op for op in ops for o in op.outs}
    tracer = Expander(namer, [])
    seen, out = set(), []
    for g in grad_list:
        if isinstance(g, Var):
            producer = producers.get(g)
            aliased = g in inputs or g in seen or producer is not None and (
                producer.prim == "broadcast_to"  # read-only, maybe zero-strided
                or producer.prim in _VIEWS and producer.args[0] in inputs)
            if aliased:
                copy = tracer.apply(rules.RULES["copy"], [g], {})
                copy.name = namer.fresh(g.name if not g.name.startswith("_") else "grad")
                tracer.ops[-1].attrs["backward"] = True
                g = copy
            seen.add(g)
        out.append(g)
    return ops + tracer.ops, out


def _params(graph, pool) -> list:
    params = []
    for v, name in zip(graph.inputs, graph.param_names):
        if name in graph.defaults:
            params.append(f"{v.name}={emit.operand_source(Const(graph.defaults[name]), pool)}")
        else:
            params.append(v.name)
    return params


def _tuple_src(items: list, single: bool) -> str:
    if single:
        return items[0]
    if len(items) == 1:
        return f"({items[0]},)"
    return f"({', '.join(items)})"


def _tree_src(tree, leaves, pool) -> str:
    it = iter(leaves)

    def build(t):
        if t[0] == "leaf":
            return emit.operand_source(next(it), pool)
        if t[0] == "tuple":
            return _tuple_src([build(c) for c in t[1]], single=False)
        if t[0] == "list":
            return "[" + ", ".join(build(c) for c in t[1]) + "]"
        return "{" + ", ".join(f"{k!r}: {build(c)}" for k, c in zip(t[1], t[2])) + "}"

    return build(tree)


# ---------------------------------------------------------------------- forward mode
def jvp_program(fs, optimized=True, wrt=None, args=None) -> Functions:
    """`def <f>_jvp(<params>, <param>_t...)` returning `(outputs, tangent outputs)`.

    Both are flat tuples of leaves (`out_tree` says how they nest). `wrt` (parameter
    indices, default all) chooses which parameters get a tangent parameter; the
    others are treated as constants.
    """
    from srcgrad.passes.jvp import forward, tangent_name

    graph, namer = trace(fs, args=args)  # args: a variant's (Note [Shape facts])
    wrt = tuple(range(len(graph.inputs))) if wrt is None else tuple(wrt)
    tangent_params = [Var(namer.fresh(tangent_name(graph.inputs[i].name))) for i in wrt]
    ops, tangents = forward(graph.ops, {graph.inputs[i]: t for i, t in zip(wrt, tangent_params)},
                            namer)
    tracer = Expander(namer, ops)
    tangent_outs = []
    for out in graph.outputs:
        t = tangents.get(out) if isinstance(out, Var) else None
        if t is None:
            t = (tracer.apply(rules.RULES["zeros_like"], [out], {}) if isinstance(out, Var)
                 else Const(numpy.zeros_like(out.value, dtype=float)))
            if isinstance(t, Var):
                tracer.ops[-1].attrs["backward"] = True
        tangent_outs.append(t)
    results = list(graph.outputs) + tangent_outs
    if optimized:
        ops, results = optimize(ops, results)
    n = len(graph.outputs)
    outputs, tangent_outs = results[:n], results[n:]
    names.tidy_temporaries(ops, [v.name for v in graph.inputs + tangent_params])
    pool = emit.ConstPool()
    name = f"{fs.name}_jvp"
    out_src = _tuple_src([emit.operand_source(o, pool) for o in outputs], single=False)
    tan_src = _tuple_src([emit.operand_source(t, pool) for t in tangent_outs], single=False)
    params = [v.name for v in graph.inputs] + [t.name for t in tangent_params]
    source = emit.render_function(name, params, emit.block_lines(ops, pool), f"{out_src}, {tan_src}")
    return Functions([source], (name,), dict(pool.values), graph.out_tree)


# ---------------------------------------------------------------------- container arguments
def container_gradient_program(fs, wrt: tuple, arg_trees: tuple, **options) -> tuple:
    """`gradient_program` for arguments that are tuples/lists/dicts of arrays
    (Note [Container arguments] in srcgrad.ir.tree).

    `arg_trees`: one tree definition per parameter (`tree.flatten_args`). Returns
    `(source, pool, leaf_wrt)`: the generated function takes every argument's leaves
    as flat parameters and returns one gradient per leaf in `leaf_wrt` (a tuple, never
    bare); `tree.group_gradients(grads, arg_trees, wrt)` nests them back.
    """
    from srcgrad.ir.tree import leaf_ranges

    ranges = leaf_ranges(arg_trees)
    leaf_wrt = tuple(j for i in wrt for j in range(ranges[i][0], ranges[i][0] + ranges[i][1]))
    fs = fs.replace(arg_trees=tuple(arg_trees))
    options["single"] = False
    source, pool = gradient_program(fs, leaf_wrt, **options)
    return source, pool, leaf_wrt


# ---------------------------------------------------------------------- batched Jacobians
def output_shapes(fs, args) -> list:
    """The shape of each of `fs`'s output leaves on arguments like `args`."""
    from srcgrad.passes.batch import decide_none_tests

    graph, _ = trace(fs, args=args)
    graph.ops, decided = decide_none_tests(graph.ops, graph.inputs, args)
    graph.outputs = [_follow(o, decided) for o in graph.outputs]
    facts = probe(graph.ops, graph.inputs, args)
    shapes = []
    for out in graph.outputs:
        shape = facts.shapes.get(out) if isinstance(out, Var) else numpy.shape(out.value)
        if shape is None:
            raise ProbeFailed("an output's shape depends on the data")
        shapes.append(tuple(shape))
    return shapes


def batched_program(fs, kind: str, wrt: tuple, args: tuple, size: int, budget=None) -> Functions:
    """One pass of a derivative program over `size` seeds at once (Note [Batching] in
    srcgrad.passes.batch), specialised to the shapes of `args`:

    * "jacfwd": outputs, and the batched tangents of the outputs;
    * "jacrev": outputs, and the batched gradients w.r.t. `wrt` (seeds: output cotangents);
    * "hessian": gradients w.r.t. `wrt`, and their batched tangents: forward over reverse.

    `f_<kind>_primal(<params>)` -> (the first of those, values the seeded ops read), once
    per call; `f_<kind>(<those values>, <seeds>, _workspace)` -> the batched ones, once per
    chunk (Note [Hoisting the primal] in srcgrad.pipeline.batched). Every seed has a
    leading axis of `size`; a tangent result no seed reaches is returned unbatched (zeros).
    Raises Unbatchable (an op with no batched form) or ProbeFailed (the arguments make
    `f` fail); the caller then runs one pass per seed.
    """
    from srcgrad.pipeline.batched import batched_ops, emit_batched

    graph, namer, ops, results, n_first, seeds, examples = seeded_program(fs, kind, wrt, args)
    inputs = graph.inputs + seeds
    ops, results, chunk = batched_ops(ops, seeds, results, inputs, args, examples, size, namer, budget)
    if chunk > size:  # more seeds fit a chunk of the fused program: compiled for them
        return batched_program(fs, kind, wrt, args, chunk)
    sources, entries, pool = emit_batched(f"{fs.name}_{kind}", ops, graph.inputs, seeds, results, n_first,
                                          args, examples, size, namer)
    return Functions(sources, entries, dict(pool.values), graph.out_tree)


def seeded_program(fs, kind: str, wrt: tuple, args: tuple) -> tuple:
    """(graph, namer, ops, results, n_first, seeds, seed examples): one seed's derivative
    program of `kind` (batched_program's), optimised and with the shapes' statics folded;
    the first `n_first` results are the outputs (gradients for "hessian"), the rest the
    derivatives along the seeds. sg.vmap of a Jacobian batches it twice (Note [Vmap as
    batching] in srcgrad.pipeline.vmap)."""
    from srcgrad.passes.batch import Unbatchable, decide_none_tests, fold_static
    from srcgrad.passes.jvp import forward, tangent_name

    graph, namer = trace(fs, args=args)
    if any(op.prim == "custom_call" for op in graph.ops):
        # their forward mode is the user's jvp; the per-seed Hessian differentiates the
        # generated gradient (the user's backward) instead
        raise Unbatchable("a custom Function")
    graph.ops, decided = decide_none_tests(graph.ops, graph.inputs, args)
    graph.outputs = [_follow(o, decided) for o in graph.outputs]
    wrt_vars = [graph.inputs[i] for i in wrt]
    floats = [_float_like(args[i]) for i in wrt]
    if kind == "jacrev":
        seeds = [Var(namer.fresh(names.cotangent_name(o.name) if isinstance(o, Var) else f"_ct{i}"))
                 for i, o in enumerate(graph.outputs)]
        examples = _example_cotangents(graph, args)
        backward, grads = reverse(graph.ops, wrt_vars, [(o, s) for o, s in zip(graph.outputs, seeds)
                                                         if isinstance(o, Var)],
                                  namer, zero_edges=zero_edges(graph.ops))
        tracer = Expander(namer, backward)
        grad_list = [grads[w] if grads[w] is not None else zeros_for(tracer, w) for w in wrt_vars]
        ops, results, n_first = graph.ops + backward, list(graph.outputs) + grad_list, len(graph.outputs)
    else:
        seeds = [Var(namer.fresh(tangent_name(w.name))) for w in wrt_vars]
        examples = tuple(numpy.zeros_like(f) for f in floats)
        ops, firsts = graph.ops, list(graph.outputs)
        if kind == "hessian":
            value, _, _ = scalar_output(graph, has_aux=False)
            if not isinstance(value, Var):
                raise ProbeFailed("a constant loss")
            backward, firsts = backward_of(graph.ops, value, wrt_vars, namer)
            ops = graph.ops + backward
        if kind == "hessian":  # before forward mode extends the loops in graph.ops
            shape = probe(graph.ops, graph.inputs, args).shapes.get(value)
            if shape != ():
                raise ProbeFailed("hessian of a non-scalar function")
        ops, tangents = forward(ops, dict(zip(wrt_vars, seeds)), namer)
        tangent_outs = [tangents.get(o) if isinstance(o, Var) else None for o in firsts]
        tangent_outs = [t if t is not None else Const(0.0) for t in tangent_outs]
        results, n_first = firsts + tangent_outs, len(firsts)
    inputs, example_args = graph.inputs + seeds, tuple(args) + tuple(examples)
    found = probe(ops, inputs, example_args)
    ops, results = optimize(ops, results, found.shapes, found.values, found.floats)
    found = probe(ops, inputs, example_args)  # the optimised program's own values
    ops = dce(fold_static(ops, found.values), results)
    return graph, namer, ops, results, n_first, seeds, examples


def _float_like(a):
    a = numpy.asarray(a)
    return a if a.dtype.kind in "fc" else a.astype(numpy.float64)
