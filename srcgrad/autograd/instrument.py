"""What the runtime does differently while a profiler or anomaly mode is on.

Note [Instrumentation]
~~~~~~~~~~~~~~~~~~~~~~
The per-op path (`ops.apply`) and the engine's per-node step (`engine._process`) each
test one module global, `INSTRUMENT`, which is None unless `sg.autograd.profiler.profile`
or anomaly mode (`sg.autograd.detect_anomaly`) is active: with both off, ops and
backward passes cost one global read more than without this module. When either is
on, `refresh()` points both globals at this module, whose `apply` / `evaluate` /
`node_backward` wrap the plain steps:

* `apply` (one forward op): a profiler event `aten::<op>` around the op; under anomaly
  mode, each node the op created records the Python stack of the call in its
  `metadata["traceback_"]` (torch's key), and, when it was created while a backward
  node was running (create_graph), that node as `metadata["parent_"]`.
* `evaluate` (one node of a backward pass, with its hooks): a profiler event
  `autograd::engine::evaluate_function: <Node>`; under anomaly mode with check_nan, a
  NaN in what the node returned raises torch's "Function 'X' returned nan values in
  its ith output."; any error in the node first warns with the traceback of the
  forward call that created it (torch's `print_stack`).
* `node_backward` (the node's formula alone): a profiler event named by the node.

While instrumented the engine takes its general loop (no `_run_plain` fast path), so
every node passes through `evaluate`. Three entry points that make nodes without
`ops.apply` are wrapped only while instrumented, and given back their own function
after: a custom Function's apply on Tensors (`function.RUNTIME.apply`: an event named
by the class, as torch's), an `sg.compile`d call on Tensors (`CompiledFunction.__call__`:
an event `srcgrad::compiled: <function>`), and `inplace.write` (the CopySlices node an
in-place op on a view gives its base records its stack). Both states are
process-wide, as torch's anomaly mode is; the profiler's event nesting is per thread.
"""

from __future__ import annotations

import os
import sys
import threading
import traceback
import warnings

import numpy

from srcgrad.autograd import engine, ops
from srcgrad.autograd.node import AccumulateGrad
from srcgrad.autograd.tensor import Tensor

__all__ = ["STATE", "refresh", "apply", "evaluate", "node_backward", "record_forward",
           "print_stack", "user_frames"]

_AUTOGRAD_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_PACKAGE_DIR = os.path.dirname(_AUTOGRAD_DIR.rstrip(os.sep)) + os.sep
EVALUATE_PREFIX = "autograd::engine::evaluate_function: "


class _State:
    anomaly = False
    check_nan = True
    profiler = None  # the active profiler.profile, or None


STATE = _State()
_local = threading.local()  # per thread: the backward nodes now running (anomaly parents)


def refresh() -> None:
    """Point the runtime's hooks at this module exactly while something needs them."""
    on = sys.modules[__name__] if (STATE.anomaly or STATE.profiler is not None) else None
    ops.INSTRUMENT = on
    engine.INSTRUMENT = on
    _wrap_function_apply(on is not None)
    _wrap_compiled_call(on is not None)
    _wrap_inplace_write(on is not None)


def _wrap_inplace_write(on: bool) -> None:
    """In-place ops (`inplace.write`, looked up as a module global at each call): under
    anomaly mode the node a write gives its target (torch's CopySlices for a view's base)
    records the forward stack too."""
    from srcgrad.autograd import inplace

    current = inplace.write
    wrapped = getattr(current, "_srcgrad_instrumented", None)
    if on and wrapped is None:
        inplace.write = _instrumented_write(current)
    elif not on and wrapped is not None:
        inplace.write = wrapped


def _instrumented_write(plain):
    def write(target, result):
        out = plain(target, result)
        if STATE.anomaly:
            for t in (target, target._base):
                fn = None if t is None else t._grad_fn
                if fn is not None and "traceback_" not in fn.metadata:
                    record_forward(fn)
        return out

    write._srcgrad_instrumented = plain
    return write


def _wrap_function_apply(on: bool) -> None:
    """Custom Functions on Tensors (`function.RUNTIME.apply`, set by srcgrad.autograd.custom):
    wrapped while instrumented, as an op is, and given back its own apply after."""
    from srcgrad.autograd import function

    runtime = getattr(function, "RUNTIME", None)
    if runtime is None:
        return
    current = runtime.apply
    wrapped = getattr(current, "_srcgrad_instrumented", None)
    if on and current is not None and wrapped is None:
        runtime.apply = _instrumented_function_apply(current)
    elif not on and wrapped is not None:
        runtime.apply = wrapped


def _instrumented_function_apply(plain):
    def function_apply(cls, args, kwargs):
        prof = STATE.profiler
        event = None if prof is None else prof.begin(cls.__name__, args)  # torch: the class name
        try:
            out = plain(cls, args, kwargs)
        finally:
            if event is not None:
                prof.end(event)
        if STATE.anomaly and out is not NotImplemented:
            for node in _new_nodes(out, args):
                record_forward(node)
        return out

    function_apply._srcgrad_instrumented = plain
    return function_apply


def _wrap_compiled_call(on: bool) -> None:
    """`sg.compile`d functions called on Tensors (one node per call): the call is an event
    named `srcgrad::compiled: <function>`, and its node records its forward stack."""
    compiled = sys.modules.get("srcgrad.autograd.compiled")
    if compiled is None:  # never imported: no compiled call can run
        return
    cls = compiled.CompiledFunction
    current = cls.__dict__["__call__"]
    wrapped = getattr(current, "_srcgrad_instrumented", None)
    if on and wrapped is None:
        cls.__call__ = _instrumented_compiled_call(current)
    elif not on and wrapped is not None:
        cls.__call__ = wrapped


def _instrumented_compiled_call(plain):
    def call(self, *args):
        prof = STATE.profiler
        event = None if prof is None else prof.begin(
            "srcgrad::compiled: " + getattr(self.fn, "__qualname__", "function"), args)
        try:
            out = plain(self, *args)
        finally:
            if event is not None:
                prof.end(event)
        if STATE.anomaly:
            for node in _new_nodes(out, args):
                record_forward(node)
        return out

    call._srcgrad_instrumented = plain
    return call


def _running() -> list:
    stack = getattr(_local, "nodes", None)
    if stack is None:
        stack = _local.nodes = []
    return stack


# ---------------------------------------------------------------- forward ops
def apply(rule, static, skey, operands, name):
    prof = STATE.profiler
    if prof is None:
        out = ops.apply(rule, static, skey, operands, name, True)
    else:
        event = prof.begin(op_event_name(name, rule), operands)
        try:
            out = ops.apply(rule, static, skey, operands, name, True)
        finally:
            prof.end(event)
    if STATE.anomaly:
        for node in _new_nodes(out, operands):
            record_forward(node)
    return out


def _new_nodes(out, operands):
    """The nodes an op created: its outputs' grad_fns that no operand already had."""
    old = {id(a._grad_fn) for a in operands if isinstance(a, Tensor) and a._grad_fn is not None}
    seen = set()
    for t in _leaves(out):
        fn = t._grad_fn if isinstance(t, Tensor) else None
        if fn is not None and id(fn) not in old and id(fn) not in seen:
            seen.add(id(fn))
            yield fn


def _leaves(value) -> list:
    """The Tensors in an op's or a compiled call's result (tuples, lists, dicts of them)."""
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _leaves(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _leaves(v)]
    return [value]


def user_frames(limit=None) -> list:
    """The calling stack without the runtime's own frames at its top (torch's stack ends
    where Python called into the op)."""
    frames = traceback.extract_stack()[:-1]
    while frames and frames[-1].filename.startswith(_AUTOGRAD_DIR):
        frames.pop()
    return frames if limit is None else frames[-limit:]


def record_forward(node) -> None:
    """Anomaly mode: remember where `node` was created (and by which backward node)."""
    meta = node.metadata
    meta["traceback_"] = traceback.format_list(user_frames())
    running = _running()
    if running:
        meta["parent_"] = running[-1]


_SPECIAL = {"Log1P": "log1p", "ToCopy": "_to_copy", "Mm": "mm", "Mv": "mv", "T": "t"}


def op_event_name(node_name: str, rule: str) -> str:
    """torch's name of the forward op: `aten::mul` for a MulBackward0 node."""
    if not node_name or "::" in node_name:
        return "aten::" + rule
    base = node_name
    end = len(base)
    while end and base[end - 1].isdigit():
        end -= 1
    if base[:end].endswith("Backward"):
        base = base[:end - len("Backward")]
    special = _SPECIAL.get(base)
    if special is not None:
        return "aten::" + special
    chars = []
    for k, c in enumerate(base):
        if c.isupper() and k and (base[k - 1].islower() or base[k - 1].isdigit()):
            chars.append("_")
        chars.append(c.lower())
    return "aten::" + "".join(chars)


# ---------------------------------------------------------------- backward nodes
def evaluate(node, buf, runs, create_graph, accumulate, captures, results):
    """One node of a backward pass with its hooks (engine._process), instrumented."""
    if not runs:
        return engine._process(node, buf, runs, create_graph, accumulate, captures, results, True)
    prof = STATE.profiler
    name = node.name()
    outer = inner = None
    if prof is not None:
        outer = prof.begin(EVALUATE_PREFIX + name, None, "autograd")
        if type(node) is AccumulateGrad:
            inner = prof.begin(name, None, "autograd")
    running = _running()
    running.append(node)
    try:
        out = engine._process(node, buf, runs, create_graph, accumulate, captures, results, True)
        if STATE.anomaly and STATE.check_nan and type(node) is not AccumulateGrad:
            check_nan(node, out)
    except Exception:
        if STATE.anomaly:
            print_stack(node)
        raise
    finally:
        running.pop()
        if inner is not None:
            prof.end(inner)
        if outer is not None:
            prof.end(outer)
    return out


def node_backward(node, buf, create_graph):
    """The node's own formula (engine.node_backward), as its own profiler event."""
    prof = STATE.profiler
    if prof is None:
        return engine.node_backward(node, buf, create_graph)
    event = prof.begin(node.name(), None, "autograd")
    try:
        return engine.node_backward(node, buf, create_graph)
    finally:
        prof.end(event)


def check_nan(node, out) -> None:
    for i, g in enumerate(out or ()):
        if g is None:
            continue
        data = g._data if isinstance(g, Tensor) else g
        kind = getattr(getattr(data, "dtype", None), "kind", None)
        if kind in ("f", "c") and bool((data != data).any()):
            raise RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th output.")
        if kind is None and isinstance(data, float) and numpy.isnan(data):
            raise RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th output.")


def print_stack(node) -> None:
    """torch's warning before an error in `node`: where its forward call was."""
    name = node.name()
    meta = node._meta or {}
    _warn_stack(meta.get("traceback_"), name, False)
    parent = meta.get("parent_")
    while parent is not None:
        pmeta = parent._meta or {}
        _warn_stack(pmeta.get("traceback_"), parent.name(), True)
        parent = pmeta.get("parent_")


def _warn_stack(stack, name, is_parent) -> None:
    if stack is None:
        message = (f"Error detected in {name}. No forward pass information available. Enable "
                   "detect anomaly during forward pass for more information.")
    elif is_parent:
        message = (f"\n\nPrevious calculation was induced by {name}. Traceback of forward call "
                   "that induced the previous calculation:\n" + "".join(stack))
    else:
        message = (f"Error detected in {name}. Traceback of forward call that caused the "
                   "error:\n" + "".join(stack))
    warnings.warn(message, UserWarning, stacklevel=_user_stacklevel())


def _user_stacklevel() -> int:
    """The stacklevel of the first caller outside srcgrad (where the user called backward)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    return level
