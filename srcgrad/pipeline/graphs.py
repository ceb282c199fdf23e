"""A function's IR for the programs (srcgrad.pipeline.programs): its trace, or, for the
generated function of `sg.grad` / `sg.value_and_grad` (has_aux or not) of a function
with a loop, that gradient rebuilt as IR.
"""

from __future__ import annotations

import numpy

from srcgrad import rules
from srcgrad.codegen import names
from srcgrad.errors import CompileError
from srcgrad.frontend.parse import FunctionSource
from srcgrad.frontend.trace import Tracer
from srcgrad.ir import tree as pytree
from srcgrad.ir.core import Const, Graph, Var
from srcgrad.ir.expand import Expander, Namer
from srcgrad.passes.invariance import zero_edges
from srcgrad.passes.shapes import probe
from srcgrad.passes.vjp import reverse, zeros_for


def trace(fs: FunctionSource, allow_mutation: bool = False, args=None):
    """(graph, namer) of `fs`. `allow_mutation`: traced under
    `allow_mutation_on_saved_tensors` (Note [Saved values written in place] in
    srcgrad.frontend.versions)."""
    gradient = gradient_graph(fs.fn, allow_mutation, args=args)
    if gradient is not None:
        return gradient
    return trace_source(fs, allow_mutation, args=args)


def trace_source(fs: FunctionSource, allow_mutation: bool, namer=None, args=None):
    namer = namer or Namer(names.RESERVED)
    tracer = Tracer(namer)
    tracer.fence(fs)  # (before any tracing work: its first refusal is the user's first error)
    if args is not None:  # a variant for these argument shapes: Note [Shape facts] (H2)
        tracer.facts = lambda ops, inputs: probe(ops, inputs, args).values
        tracer.example_probe = lambda ops, inputs: probe(ops, inputs, args)  # (sg.vmap's stand-ins)
        tracer.mutation.example = args  # its guard checks their layout (Note [Layout facts])
    tracer.mutation.allow = allow_mutation
    graph = tracer.trace_function(fs)
    return graph, namer


def gradient_graph(fn, allow_mutation: bool, namer=None, args=None):
    """(graph, namer): the IR of a gradient transform's result when `fn` is its generated
    function (`sg.grad(g)`, `sg.value_and_grad(g)`, either with has_aux) and `g` has a
    loop; None otherwise (the generated source is traced like any function). `namer`: the
    one of a trace that inlines the graph (such a gradient called in compiled code:
    srcgrad.frontend.gradients). `args`: a variant's example arguments (those of the
    gradient, which are `g`'s), so `g` is traced with their shape and layout facts, as
    its own gradient's variant was (Note [Layout facts]).

    Note [Transforms of loop gradients]
    ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
    A transform of a transform's result (`sg.hessian`'s per-seed columns, `sg.jvp` or
    `sg.jacobian` of `sg.grad(g)`, `sg.grad` of a function calling
    `sg.value_and_grad(g)`) differentiates the generated gradient. Straight-line
    generated code is plain Python the tracer reads back; a loop's gradient is not: its
    tape is a Python list that the forward loop appends to and the adjoint loop
    (`range(...)[::-1]`) pops. Rather than recognise srcgrad's own code in the tracer,
    the gradient of a loop program is rebuilt here as IR, `g`'s ops and their
    backward, with the tape ops and the reversed `for_range` as the VJP pass wrote
    them, which forward mode (Note [Tangents on tapes] in srcgrad.passes.jvp_control)
    and reverse mode (Note [Reverse mode over adjoint loops] in srcgrad.passes.vjp_control)
    differentiate again. Its outputs are those the generated function returns:
    `grads`, `(grads, aux)`, `(value, grads)` or `((value, aux), grads)`, the same
    tree (`_gradient_outputs`). `Compiled.entry` (srcgrad.pipeline.modules) marks
    every grad / value_and_grad transform's generated function with its Compiled, so
    no generated adjoint loop is ever traced as source.
    """
    compiled = getattr(fn, "__srcgrad_gradient__", None)
    if compiled is None:
        return None
    inner = compiled.parsed()
    built = gradient_graph(inner.fn, allow_mutation, namer, args)  # `g` may be a loop's gradient too
    graph, namer = built or trace_source(inner, allow_mutation, namer, args)
    if not _has_loop(graph.ops):
        return None
    value, aux, aux_tree = scalar_output(graph, compiled.has_aux)
    if isinstance(value, Var) and not provably_scalar(graph.ops, value):
        value = Expander(namer, graph.ops).apply(rules.RULES["ensure_scalar"], [value, Const(inner.name)], {})
    wrt_vars = [graph.inputs[i] for i in compiled.wrt]
    backward, grad_list = backward_of(graph.ops, value, wrt_vars, namer)
    for op in backward:  # to a transform of this gradient, all of it is primal code: a
        # gradient program emits its "backward"-marked ops after the rest, which put an outer
        # check of grad_a0 before the inner adjoint loop computing it (UnboundLocalError)
        op.attrs.pop("backward", None)
    outputs, out_tree = _gradient_outputs(compiled, value, aux, aux_tree, grad_list)
    name = (names.value_and_grad_fn_name if compiled.kind == "value_and_grad" else names.grad_fn_name)
    return Graph(name(inner.name), graph.inputs, graph.ops + backward, outputs, out_tree,
                 graph.param_names, graph.defaults, graph.loc), namer


def vjp_has_tape(fs: FunctionSource, allow_mutation: bool, args=None) -> bool:
    """Whether sg.vjp's program of `fs` keeps a loop's tape: a loop whose backward
    reads values of its iterations (a loop of linear steps, `x = 2.0 * x`, needs none).
    `args`: a variant's example arguments (traced with their shapes)."""
    graph, namer = trace(fs, allow_mutation, args=args)
    if not _has_loop(graph.ops):
        return False
    seeds = [(out, Var(namer.fresh("_ct"))) for out in graph.outputs if isinstance(out, Var)]
    backward, _ = reverse(graph.ops, graph.inputs, seeds, namer, zero_edges=zero_edges(graph.ops))
    return _has_tape(graph.ops + backward)


def _has_tape(ops) -> bool:
    return any(op.prim == "tape_new" or any(_has_tape(b.ops) for b in op.blocks) for op in ops)


def backward_of(ops, value, wrt_vars, namer) -> tuple:
    """(backward ops, one gradient per `wrt_vars`) of scalar `value` computed by `ops`."""
    seeds = [(value, Const(1.0))] if isinstance(value, Var) else []
    backward, grads = reverse(ops, wrt_vars, seeds, namer, zero_edges=zero_edges(ops))
    tracer = Expander(namer, backward)
    return backward, [grads[w] if grads[w] is not None else zeros_for(tracer, w) for w in wrt_vars]


def _gradient_outputs(compiled, value, aux, aux_tree, grad_list) -> tuple:
    """(output leaves, out tree) of a gradient transform's generated function, as
    gradient_program writes its return: the gradients bare for one named parameter."""
    grads_tree = pytree.LEAF if compiled.single else ("tuple", (pytree.LEAF,) * len(grad_list))
    if compiled.kind == "value_and_grad":
        first = ("tuple", (pytree.LEAF, aux_tree)) if compiled.has_aux else pytree.LEAF
        return [value, *aux, *grad_list], ("tuple", (first, grads_tree))
    if compiled.has_aux:
        return [*grad_list, *aux], ("tuple", (grads_tree, aux_tree))
    return list(grad_list), grads_tree


def _has_loop(ops) -> bool:
    return any(op.prim in ("for_range", "while_loop") or any(_has_loop(b.ops) for b in op.blocks)
               for op in ops)


def scalar_output(graph, has_aux: bool) -> tuple:
    """(the value, aux leaves, aux tree) of a function grad differentiates."""
    tree = graph.out_tree
    if has_aux:
        if tree[0] not in ("tuple", "list") or len(tree[1]) != 2 or tree[1][0] != ("leaf",):
            raise CompileError.at(graph.loc, f"`{graph.name}` must return `(value, aux)` "
                                  "when has_aux=True")
        return graph.outputs[0], graph.outputs[1:], tree[1][1]
    if tree != ("leaf",):
        raise CompileError.at(graph.loc, f"grad requires `{graph.name}` to return one scalar; "
                              "it returns a tuple, list or dict",
                              hint="use sg.vjp for several outputs, or has_aux=True")
    return graph.outputs[0], [], None


# Reductions whose output is 0-d when they reduce over all axes without keepdims.
_FULL_REDUCTIONS = frozenset({"sum", "mean", "prod", "max", "min", "var", "std", "norm"})


def provably_scalar(ops, value) -> bool:
    """True when `value` is 0-d for every input (so grad needs no run-time check)."""
    scalar: set = set()
    for op in ops:
        rule = rules.RULES[op.prim]
        args = dict(zip(rule.params, op.args))
        if op.prim in _FULL_REDUCTIONS:
            axis, keepdims = args.get("axis", Const(None)), args.get("keepdims", Const(False))
            if (isinstance(axis, Const) and axis.value is None and isinstance(keepdims, Const)
                    and not keepdims.value):
                scalar.update(op.outs)
        elif rule.elementwise and all(
                (isinstance(a, Var) and a in scalar) or (isinstance(a, Const) and numpy.ndim(a.value) == 0)
                for a in op.args):
            scalar.update(op.outs)
    return value in scalar
