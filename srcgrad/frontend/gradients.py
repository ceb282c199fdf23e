"""A loop's gradient called inside compiled code, inlined as IR.

`sg.grad(g)(x)` or `sg.value_and_grad(g)(x)` (has_aux or not) in a function that is
itself compiled traces the generated gradient (Note [Transforms in compiled code] in
srcgrad.frontend.transforms). When `g` has a loop, that text holds a tape (a Python
list the forward loop appends to) and an adjoint loop over `range(...)[::-1]` that
pops it, which the tracer does not read back; instead the gradient's IR, built by the
pipeline with the tracer's own namer, is spliced into the trace (Note [Transforms of
loop gradients] in srcgrad.pipeline.graphs), and the passes differentiate its tape ops
again.
"""

from __future__ import annotations

import inspect
import sys

from srcgrad.errors import CompileError
from srcgrad.frontend.scope import TraceObject
from srcgrad.ir import tree as pytree
from srcgrad.ir.core import Const, Var, substitute

NOT_LOWERED = object()


def _pipeline():
    """srcgrad.pipeline.graphs (its gradient_graph and vjp_has_tape), or None. The pipeline
    sits above the frontend, which does not import it; a trace that reaches here is one
    the pipeline runs, so it is imported (this module is imported only by such a call:
    not on a plain compile, issue 15)."""
    return sys.modules.get("srcgrad.pipeline.graphs")


def refuse_loop_vjp(tracer, compiled, node, args=None) -> None:
    """`sg.vjp(f, ...)` inside compiled code traces f's generated forward and backward,
    which for most loops hold a tape: a list the forward appends to and the backward
    pops, which the tracer does not read back (and no IR form of them is built, as for
    a gradient: Note [Transforms of loop gradients]). Refused at the user's call, naming
    the cause, rather than by an error inside the generated text; a loop with no tape
    (linear steps) is traced as before. `args`: a variant's example arguments."""
    graphs = _pipeline()
    if graphs is not None and graphs.vjp_has_tape(compiled.parsed(), tracer.mutation.allow, args):
        tracer.fail(node, "`sg.vjp` of a function with a loop, called in a compiled "
                    "function (its backward pops the loop's tape)", "call `sg.grad` or "
                    "`sg.value_and_grad` of a scalar function there (they differentiate "
                    "loops), or `sg.jvp`, or call sg.vjp outside the compiled function")


def inline(tracer, fn, args, kwargs, node):
    """The traced value of generated gradient `fn` called on `args` at `node`, or
    NOT_LOWERED (not a loop's gradient: the generated source is traced).

    The loop's gradient is traced with every parameter a value, so any argument that is
    one value binds it: an array, a number, a constant such as a default `None` (which
    the graph tests as the generated code does, `s is None`). A tuple, list or dict
    argument has leaves the graph has no parameters for: refused at the user's call (the
    generated source's trace would stop at the tape, naming a generated line)."""
    graphs = _pipeline()
    if graphs is None or getattr(fn, "__srcgrad_gradient__", None) is None:
        return NOT_LOWERED
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except TypeError:
        return NOT_LOWERED  # the source's trace reports the bad call
    bound.apply_defaults()
    values = list(bound.arguments.values())
    try:
        built = graphs.gradient_graph(fn, tracer.mutation.allow, tracer.namer)
    except CompileError:  # a form that needs shapes (`enumerate(x)`): traced for those of
        standins = tracer._stand_ins(values, True)  # the arguments where this trace is a variant's,
        if standins is None:  # as the gradient's own variant at them is (Inlining._generated_entry)
            raise
        built = graphs.gradient_graph(fn, tracer.mutation.allow, tracer.namer, args=standins)
    if built is None:
        return NOT_LOWERED
    containers = [name for name, v in bound.arguments.items()
                  if isinstance(v, (tuple, list, dict, TraceObject))]
    if containers:
        tracer.fail(node, f"the gradient of a function with a loop, called in a compiled function "
                    f"with a tuple, list, dict or object as its argument `{containers[0]}`",
                    "pass the arrays as separate arguments, or call the gradient outside the "
                    "compiled function")
    graph, _ = built
    mapping = {p: v if isinstance(v, (Var, Const)) else Const(v) for p, v in zip(graph.inputs, values)}
    substitute(graph.ops, mapping)
    outputs = [mapping.get(r, r) if isinstance(r, Var) else r for r in graph.outputs]
    _primal(graph.ops)
    tracer.ops.extend(graph.ops)
    return pytree.unflatten(graph.out_tree, outputs)


def _primal(ops) -> None:
    """The inlined gradient is the caller's primal code: its ops lose the `backward`
    mark, which places an op among the backward lines of a generated gradient."""
    for op in ops:
        op.attrs.pop("backward", None)
        for block in op.blocks:
            _primal(block.ops)
