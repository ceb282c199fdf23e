"""The engine: `backward` and `grad` over the graph of OpNodes (spec §1, §2, §4, §10).

Note [Engine order]
~~~~~~~~~~~~~~~~~~~
A pass first walks the graph from the roots and counts, per node, the edges that reach
it. A node runs when every node that feeds it has run (its gradients are then
complete: contributions from several uses are summed in its buffer first, so a tensor
hook sees the total once). Among ready nodes the most recently created runs first,
and AccumulateGrad nodes as soon as they are ready, as torch's CPU ready queue does
(`sequence_nr` order); hooks therefore fire in torch's order.

With `inputs=` only nodes on a path to an input are *needed*; under `grad()` an
input's gradient is *captured* where it arrives (after its tensor hooks), and the
node that would consume it runs only if it is needed to reach another input. For
each node, when its gradient is ready: tensor hooks, the retain_grad capture, the
grad() capture, Node pre-hooks, the node (AccumulateGrad: `.grad`, then the
post-accumulate hooks), Node post-hooks.

Without create_graph, gradients are plain arrays from end to end (the kernels run on
arrays; a hook sees a Tensor wrapping the array). With create_graph they are Tensors,
grad mode is on while the pass runs, and each kernel runs on Tensors: its ops are
recorded, so the result can be differentiated again (Note [One node per op]).
"""

from __future__ import annotations

import operator
import sys
import warnings

import numpy

from srcgrad.autograd import accumulate as _acc
from srcgrad.autograd import grad_mode
from srcgrad.autograd.engine_roots import _arr, _meta, _roots, _sequence
from srcgrad.autograd.final_callbacks import pass_stack, run_callbacks
from srcgrad.autograd.node import (
    SECOND_TIME,
    SEQUENCE_NRS_SET,
    AccumulateGrad,
    GradientEdge,
    Node,
    ready_order,
    saves_an_operand,
    task_stack,
    torch_size,
)
from srcgrad.autograd.ops import ZERO_DERIVATIVE_ROWS
from srcgrad.autograd.saved import saved_value
from srcgrad.autograd.tensor import Tensor

__all__ = ["backward", "grad"]

_STATE = grad_mode.STATE
_ndarray = numpy.ndarray

# Note [Stealing a gradient]
# torch's AccumulateGrad makes a leaf's first `.grad` the incoming gradient itself, not a
# copy, where nothing else holds it (its use count) and its layout is the parameter's.
# _run_plain does the same: a gradient array the backward kernel made is held by the loop's
# local `g` and by the kernel's output tuple (or the sum's buffer) only, so CPython counts
# 3 references with getrefcount's own argument; any other holder (a retained `.grad`, the
# cotangent the caller passed, a second slot of the same tuple, a saved value) counts more,
# and the gradient is copied as before. Only on the CPython versions whose counts are known
# (3.14 may borrow a stack reference); accumulate.stealable checks the layout.
_STEALS = (3, 11) <= sys.version_info[:2] <= (3, 13) and hasattr(sys, "getrefcount")
_refcount = getattr(sys, "getrefcount", None)
INSTRUMENT = None  # srcgrad.autograd.instrument while profiling/anomaly mode (Note [Instrumentation])

CREATE_GRAPH_WARNING = (
    "Using backward() with create_graph=True will create a reference cycle between the "
    "parameter and its gradient which can cause a memory leak. We recommend using "
    "autograd.grad when creating the graph to avoid this. If you have to use this function, "
    "make sure to reset the .grad fields of your parameters to None after use to break the "
    "cycle and avoid the leak.")


# ---------------------------------------------------------------- public entry points
def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False,
             grad_variables=None, inputs=None) -> None:
    """Accumulate the gradients of `tensors` into the `.grad` of the graph's leaves."""
    if grad_variables is not None:
        warnings.warn("`grad_variables` is deprecated. Use `grad_tensors` instead.",
                      FutureWarning, stacklevel=2)
        grad_tensors = grad_variables if grad_tensors is None else grad_tensors
    if create_graph:
        warnings.warn(CREATE_GRAPH_WARNING, UserWarning, stacklevel=3)
    targets = None
    if inputs is not None:
        inputs = _sequence(inputs)
        if not inputs:
            raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
        targets = set()
        for t in inputs:
            if isinstance(t, GradientEdge):  # torch: the node only; no .grad is kept
                targets.add(t.node)
            elif t._grad_fn is None:
                targets.add(t.accumulator())
            else:
                t.retain_grad()
                targets.add(t._grad_fn)
    roots, grads = _roots(tensors, grad_tensors, create_graph)
    if retain_graph is None:
        retain_graph = create_graph
    _run(roots, grads, retain_graph, create_graph, True, targets, {})


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         only_inputs=True, allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """The gradients of `outputs` with respect to `inputs` (a tuple; `.grad` untouched)."""
    if materialize_grads and allow_unused is False:
        raise ValueError("Expected allow_unused to be True or not passed when materialize_grads="
                         "True, but got: allow_unused=False.")
    if allow_unused is None:
        allow_unused = materialize_grads
    if not only_inputs:
        warnings.warn("only_inputs argument is deprecated and is ignored now (defaults to True). "
                      "To accumulate gradient for other parts of the graph, please use "
                      "torch.autograd.backward (srcgrad: sg.autograd.backward).", FutureWarning,
                      stacklevel=2)
    keys = list(inputs.keys()) if isinstance(inputs, dict) else None
    seq = _sequence(inputs)
    if not seq:
        raise RuntimeError("`inputs` argument to `grad()` cannot be empty.")
    for t in seq:
        if not isinstance(t, GradientEdge) and not t._rg:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    if retain_graph is None:
        retain_graph = create_graph
    if is_grads_batched:
        results = _batched(outputs, seq, grad_outputs, retain_graph, create_graph)
    else:
        roots, grads = _roots(outputs, grad_outputs, create_graph)
        results = _grad_once(roots, grads, seq, retain_graph, create_graph)
    out = []
    for i, (t, g) in enumerate(zip(seq, results)):
        if g is None:
            if not allow_unused:
                raise RuntimeError(f"The differentiated Tensor at index {i} appears to not have "
                                   "been used in the graph. Set allow_unused=True if this is the "
                                   "desired behavior.")
            if materialize_grads:
                if isinstance(t, GradientEdge):  # observed in torch 2.13.0 (an unused edge)
                    raise RuntimeError("materialize_grads cannot be used when the given input "
                                       "is a GradientEdge")
                g = Tensor._make(numpy.zeros(*_meta(t)))
        out.append(g if g is None or isinstance(g, Tensor) else Tensor._make(_arr(g)))
    return dict(zip(keys, out)) if keys is not None else tuple(out)


def _grad_once(roots, grads, seq, retain_graph, create_graph):
    captures = {}
    for i, t in enumerate(seq):
        if isinstance(t, GradientEdge):
            edge = tuple(t)
        else:
            edge = (t.accumulator(), 0) if t._grad_fn is None else (t._grad_fn, t._output_nr)
        captures.setdefault(edge, []).append(i)
    results = [None] * len(seq)
    _run(roots, grads, retain_graph, create_graph, False, set(), captures, results)
    return results


def _batched(outputs, seq, grad_outputs, retain_graph, create_graph):
    outs = _sequence(outputs)
    gos = _sequence(grad_outputs)
    for i, (o, g) in enumerate(zip(outs, gos)):
        if tuple(g.shape[1:]) != tuple(o.shape):
            raise RuntimeError(
                "If `is_grads_batched=True`, we interpret the first dimension of each grad_output "
                "as the batch dimension. The sizes of the remaining dimensions are expected to "
                f"match the shape of corresponding output, but a mismatch was detected: "
                f"grad_output[{i}] has a shape of {torch_size(g.shape[1:])} and output[{i}] has a "
                f"shape of {torch_size(o.shape)}. If you only want some tensors in `grad_output` "
                "to be considered batched, consider using vmap.")
    n = gos[0].shape[0]
    per_batch = []
    for b in range(n):
        roots, grads = _roots(outs, [g[b] for g in gos], create_graph)
        per_batch.append(_grad_once(roots, grads, seq, True if b < n - 1 else retain_graph,
                                    create_graph))
    results = []
    for i in range(len(seq)):
        column = [r[i] for r in per_batch]
        if any(c is None for c in column):
            results.append(None)
        elif create_graph:
            results.append(numpy.stack(column))
        else:
            results.append(numpy.stack([_arr(c) for c in column]))
    return results


# ---------------------------------------------------------------- the pass
class _Task:
    """One backward/grad pass (what register_multi_grad_hook asks about)."""

    __slots__ = ("deps", "needed", "captures", "roots")

    def will_execute(self, node) -> bool:
        """Whether `node` is in this pass's graph and runs or captures a gradient."""
        if node is None or (node not in self.deps and node not in self.roots):
            return False
        return self.needed is None or node in self.needed or any(
            n is node for n, _ in self.captures)


def _discover(root_nodes) -> tuple:
    """(deps, ops): per node the number of edges into it from nodes reachable from the
    roots (a root reached by no edge: 0), and the reachable nodes that are not
    AccumulateGrad (the nodes the pass orders by sequence number). `deps` holds every
    reachable node, so it is the walk's set of visited nodes too (one dict, not a dict
    and a set: this runs once per pass)."""
    deps = dict.fromkeys(root_nodes, 0)
    acc = AccumulateGrad
    stack = [n for n in deps if type(n) is not acc]
    ops = stack[:]
    while stack:
        for e in stack.pop()._next:
            if e is not None:
                child = e[0]
                if child in deps:
                    deps[child] += 1
                else:
                    deps[child] = 1
                    if type(child) is not acc:  # its _next is (): nothing to walk
                        stack.append(child)
                        ops.append(child)
    return deps, ops


_seq = operator.attrgetter("_seq")


def _needed(root_nodes, deps, targets, captures) -> set:
    """Nodes on a path to a target or a capture (Note [Engine order])."""
    capture_nodes = {n for n, _ in captures}
    order, remaining = [], dict(deps)
    ready = [n for n in set(root_nodes) if remaining.get(n, 0) == 0]
    while ready:
        node = ready.pop()
        order.append(node)
        for e in node._next:
            if e is not None:
                remaining[e[0]] -= 1
                if remaining[e[0]] == 0:
                    ready.append(e[0])
    needed = set(targets)
    for node in reversed(order):
        if node in needed:
            continue
        for e in node._next:
            if e is not None and (e[0] in needed or e[0] in capture_nodes):
                needed.add(node)
                break
    return needed


def _run(roots, grads, retain_graph, create_graph, accumulate, targets, captures, results=None):
    """A pass, then its final callbacks (Note [Final callbacks] in
    srcgrad.autograd.final_callbacks)."""
    stack = pass_stack()
    callbacks = []
    stack.append(callbacks)
    try:
        _run_pass(roots, grads, retain_graph, create_graph, accumulate, targets, captures, results)
        if callbacks:
            run_callbacks(callbacks, create_graph)
    finally:
        stack.pop()  # a pass that failed drops its callbacks uncalled


def _run_pass(roots, grads, retain_graph, create_graph, accumulate, targets, captures,
              results=None):
    """One pass (Note [Engine order]). Op nodes run in decreasing sequence number: a node's
    consumers were all created after it, so each node runs once its gradient is complete,
    in the order torch's ready queue gives. An AccumulateGrad node runs as soon as the last
    edge into it has delivered."""
    root_nodes = [n for n, _ in roots]
    deps, ops = _discover(root_nodes)
    task = _Task()
    task.deps = deps
    task.roots = set(root_nodes)
    task.captures = captures
    task.needed = None if targets is None else _needed(root_nodes, deps, targets, captures)
    needed = task.needed
    capture_nodes = {n for n, _ in captures} if captures else ()
    plain = needed is None and not captures and INSTRUMENT is None
    ops.sort(key=_seq, reverse=True)
    order = ops
    if SEQUENCE_NRS_SET[0]:  # Note [Sequence numbers set by hand] in srcgrad.autograd.node
        order = ready_order(root_nodes, deps)
    stack = task_stack()
    stack.append(task)
    prev_mode = _STATE.grad_enabled
    _STATE.grad_enabled = bool(create_graph)
    executed = []
    buffers = {}
    try:
        for (node, nr), g in zip(roots, grads):
            buf = buffers.get(node)
            if buf is None:
                buf = buffers[node] = [None] * node.n_outputs()
            buf[nr] = g if buf[nr] is None else buf[nr] + g
        for node in root_nodes:  # a leaf given as a root
            if type(node) is AccumulateGrad and deps.get(node, 0) == 0 and node in buffers:
                _run_accumulate(node, buffers.pop(node), plain, needed, capture_nodes,
                                create_graph, accumulate, captures, results)
        if plain:
            _run_plain(order, buffers, deps, create_graph, accumulate, retain_graph)
            return
        for node in order:
            buf = buffers.pop(node, None)
            if buf is None:
                out = None  # no gradient reached it
            else:
                runs = needed is None or node in needed
                if not runs and node not in capture_nodes:
                    continue
                out = _process(node, buf, runs, create_graph, accumulate, captures, results)
                if not runs:
                    continue
                executed.append(node)
            for k, e in enumerate(node._next):
                if e is None:
                    continue
                child, nr = e
                if needed is not None and child not in needed and child not in capture_nodes:
                    continue
                g = None if out is None else out[k]
                if g is not None:
                    cbuf = buffers.get(child)
                    if cbuf is None:
                        cbuf = buffers[child] = [None] * child.n_outputs()
                    cbuf[nr] = g if cbuf[nr] is None else cbuf[nr] + g
                if type(child) is AccumulateGrad:
                    d = deps[child] - 1
                    deps[child] = d
                    if d == 0 and child in buffers:
                        _run_accumulate(child, buffers.pop(child), plain, needed, capture_nodes,
                                        create_graph, accumulate, captures, results)
    finally:
        _STATE.grad_enabled = prev_mode
        stack.pop()
        if not retain_graph:
            for node in executed:
                node.release()


def _run_plain(order, buffers, deps, create_graph, accumulate, retain_graph):
    """The loop of a pass with no inputs= and no captures (backward() of everything).
    An op node with a `_bwd` (a one-output table row) and no hooks, saved-tensor packing
    or changed saved tensor runs its kernel here directly, and a leaf without hooks gets
    its first `.grad` here: node_backward's, release's and accumulate's steps for those
    cases, written out (they run once per node of every pass)."""
    pop, get = buffers.pop, buffers.get
    for node in order:
        buf = pop(node, None)
        if buf is None:
            out = None  # no gradient reached it
        elif node._tpre is None and node._retain is None and node._pre is None \
                and node._post is None:  # a node without hooks
            bwd = node._bwd if not create_graph else None
            saved = node._saved
            if bwd is not None and saved is not None and node._packed is None:
                versions = node._versions
                if versions is not None:
                    for v in versions:  # changed in place or detach_()ed since saved?
                        if v is not None and (v[0].v != v[1] or v[3] is not None
                                              and v[3]._grad_fn is None):
                            bwd = None  # node_backward raises torch's error
                            break
            else:
                bwd = None
            if bwd is not None:
                out = bwd(saved, buf[0])
                if not retain_graph:  # OpNode.release
                    for v in saved:
                        if type(v) is _ndarray:
                            node._saved = node._operands = None
                            break
                    else:  # a saved number operand (a node keeping no operands has none)
                        if node._operands is not None and saves_an_operand(node._kernel):
                            node._saved = node._operands = None
            else:
                out = node_backward(node, buf, create_graph)
                if not retain_graph:
                    node.release()  # torch frees a node's saved tensors once it ran
        else:
            out = _process(node, buf, True, create_graph, accumulate, {}, None)
            if not retain_graph:
                node.release()
        k = -1
        for e in node._next:
            k += 1
            if e is None:
                continue
            child, nr = e
            g = None if out is None else out[k]
            if type(child) is AccumulateGrad:  # nr is 0
                d = deps[child] - 1
                deps[child] = d
                cbuf = get(child)
                if d:  # more edges to come: keep the sum
                    if g is not None:
                        if cbuf is None:
                            buffers[child] = [g]
                        else:
                            cbuf[0] = g if cbuf[0] is None else cbuf[0] + g
                    continue
                if cbuf is not None:
                    del buffers[child]
                    if g is not None:
                        cbuf[0] = g if cbuf[0] is None else cbuf[0] + g
                    g = cbuf[0]
                elif g is None:
                    continue  # no gradient reached the leaf
                var = child.variable
                if not create_graph and var._grad is None and var._hooks is None \
                        and var._post_hooks is None and child._pre is None and child._post is None:
                    if accumulate and g is not None:  # accumulate()'s first .grad
                        # (held by `g` and by `out` or `cbuf` alone: Note [Stealing a gradient])
                        var._grad = Tensor._make(g if _STEALS and _refcount(g) == 3 and _acc.stealable(
                            var._data, g) else _acc.layout_copy(var._data, g))
                else:
                    _run_accumulate(child, [g], True, None, (), create_graph, accumulate, {}, None)
            elif g is not None:
                cbuf = get(child)
                if cbuf is None:
                    if child._bwd is not None:  # a one-output row's node (ops.apply): nr is 0
                        buffers[child] = [g]
                    else:
                        cbuf = buffers[child] = [None] * child.n_outputs()
                        cbuf[nr] = g
                else:
                    cbuf[nr] = g if cbuf[nr] is None else cbuf[nr] + g


def _run_accumulate(node, buf, plain, needed, capture_nodes, create_graph, accumulate, captures,
                    results):
    var = node.variable
    if plain and var._hooks is None and var._post_hooks is None and node._pre is None and \
            node._post is None:
        if accumulate and buf[0] is not None:
            _acc.accumulate(var, buf[0], create_graph)
        return
    runs = needed is None or node in needed
    if runs or node in capture_nodes:
        _process(node, buf, runs, create_graph, accumulate, captures, results)


def _process(node, buf, runs, create_graph, accumulate, captures, results, hooked=False) -> tuple:
    """Hooks, captures and the node itself, in torch's order (Note [Engine order])."""
    if INSTRUMENT is not None and not hooked:
        return INSTRUMENT.evaluate(node, buf, runs, create_graph, accumulate, captures, results)
    if type(node) is AccumulateGrad:
        var = node.variable
        if var._hooks and buf[0] is not None:
            buf[0] = _acc.tensor_hooks(var._hooks, buf[0], create_graph)
    else:
        if node._tpre:
            for nr, hooks in node._tpre.items():
                if hooks and buf[nr] is not None:
                    buf[nr] = _acc.tensor_hooks(hooks, buf[nr], create_graph)
        if node._retain:
            for nr, ref in node._retain.items():
                t = ref()
                if t is not None and buf[nr] is not None:
                    _acc.retain(t, buf[nr], create_graph)
    if captures:
        for nr in range(len(buf)):
            slots = captures.get((node, nr))
            if slots is not None and buf[nr] is not None:
                for i in slots:
                    results[i] = buf[nr]
    if not runs:
        return ()
    if node._pre:
        buf = _acc.node_prehooks(node, buf, create_graph)
    if type(node) is AccumulateGrad:
        out = ()
        if accumulate and buf[0] is not None:
            var = node.variable
            fresh = var._grad is None
            _acc.accumulate(var, buf[0], create_graph)
            if fresh and var._grad is not None:  # torch hands the new .grad to post-hooks
                buf = [var._grad]
    elif node._kernel is not None and all(g is None for g in buf):  # a row's backward of
        out = (None,) * len(node._next)  # undefined gradients is undefined; a custom Function's
        # backward is still called (torch: materialized, or None without materialize_grads)
    else:
        out = (node_backward if INSTRUMENT is None else INSTRUMENT.node_backward)(
            node, buf, create_graph)
    if node._post:
        out = _acc.node_posthooks(node, out, buf, create_graph)
    return out




def node_backward(node, cts, create_graph) -> tuple:
    """The node's gradients, one per next edge (Note [One node per op])."""
    saved = node._saved
    if saved is None:
        raise RuntimeError(SECOND_TIME)
    if node._kernel is None:  # a custom Function's node (srcgrad.autograd.custom)
        return node.run_backward(cts, create_graph)
    if getattr(node._kernel, "rule", None) in ZERO_DERIVATIVE_ROWS:
        ct = _arr(cts[0])
        out = []
        for e in node._next:  # zeros of each operand's shape (floor_divide's broadcast)
            if e is None:
                out.append(None)
                continue
            zeros = numpy.zeros(_edge_shape(e, ct.shape), ct.dtype)
            out.append(Tensor._make(zeros) if create_graph else zeros)
        return tuple(out)
    if node._nout > 1 and any(c is None for c in cts):  # kernels read every cotangent
        cts = [numpy.zeros(s, d) if c is None else c for c, (s, d) in zip(cts, node._meta_out)]
    if create_graph:
        saved = _tensor_saved(node)
        cts = [c if c is None or isinstance(c, Tensor) else Tensor._make(_arr(c)) for c in cts]
        out = node._kernel.backward(saved, *cts)
        return tuple(g if g is None or isinstance(g, Tensor) else Tensor._make(_arr(g))
                     for g in out)
    if node._packed is not None:
        saved = tuple(saved_value(node, j, False) for j in range(len(saved)))
    elif node._versions is not None:
        for v in node._versions:  # unchanged since saved? (else saved_value raises)
            if v is not None and (v[0].v != v[1] or v[3] is not None and v[3]._grad_fn is None):
                saved = tuple(saved_value(node, j, False) for j in range(len(saved)))
                break
    return node._kernel.backward(saved, *cts)


def _edge_shape(edge, default) -> tuple:
    """The shape of the gradient an edge takes: its node's output (a leaf's shape)."""
    target, nr = edge
    meta = getattr(target, "_meta_out", None)
    if meta is not None:
        return meta[nr][0]
    variable = getattr(target, "variable", None)
    return variable.shape if variable is not None else default


def _tensor_saved(node) -> tuple:
    """Saved values as Tensors, recomputed where the kernel computed them in forward."""
    kinds = node._kernel.saved_from
    saved = node._saved
    fresh = None
    if any(kind == "computed" and isinstance(saved[j], numpy.ndarray)
           for j, (kind, _) in enumerate(kinds)):  # an array computed from the inputs
        _, fresh = node._kernel.forward(*node._operands)
    return tuple(fresh[j] if fresh is not None and kind == "computed"
                 else saved_value(node, j, True) for j, (kind, _) in enumerate(kinds))


def call_node(node, grads) -> tuple:
    """`grad_fn(*grads)`: run one node directly on Tensors."""
    if type(node) is AccumulateGrad:
        return ()
    cg = _STATE.grad_enabled
    cts = [None if g is None else g if cg else _arr(g) for g in grads]
    out = node_backward(node, cts, cg)
    return tuple(g if g is None or isinstance(g, Tensor) else Tensor._make(_arr(g)) for g in out)


def _tensor_backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate this tensor's gradient into the leaves' `.grad` (torch's Tensor.backward)."""
    backward(self, gradient, retain_graph, create_graph, inputs=inputs)


def _call_node(self, *grads):
    """`grad_fn(*grads)`: one argument per forward output."""
    n = self.n_outputs()
    if len(grads) != n:
        raise TypeError(f"expected {n} arguments, got {len(grads)} instead")
    result = call_node(self, grads)
    return result[0] if len(result) == 1 else result


Tensor.backward = _tensor_backward
Node.__call__ = _call_node
