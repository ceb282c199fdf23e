"""Graph nodes of the eager runtime: one `OpNode` per recorded Tensor op, one
`AccumulateGrad` per leaf that requires grad (spec/torch_semantics.md §4, §7, §13).

Note [One node per op]
~~~~~~~~~~~~~~~~~~~~~~
An op on Tensors runs the forward of its row's one-op kernel (srcgrad.kernels) on the
arrays and records an `OpNode` holding the kernel and exactly what the kernel's
forward returned as saved (a shape where the formulas read only a shape). The node's
backward *is* `kernel.backward`: generated from the same derivative table as
compiled code, never a second list of formulas.

Saved values are kept raw (arrays) on the fast path. What torch shows through
`_saved_<name>` is rebuilt on demand from `kernel.saved_from`: a saved input is the
input Tensor itself (`_saved_self is a`), a saved output a new Tensor over the same
array whose grad_fn is this node (torch's SavedVariable does the same, which keeps
the node from owning its output: no reference cycle). For `create_graph=True` the
same rebuilt Tensors are handed to the kernel's backward, which then records its own
ops: the gradient is differentiable for every row.

Each saved Tensor's version is recorded when saved and compared when the backward
reads it (spec §6's error text). With saved-tensor hooks active, every saved Tensor
goes through `pack` at record time and `unpack` at each read.
"""

from __future__ import annotations

import itertools
import re
import sys
import threading

import numpy

__all__ = ["Node", "OpNode", "AccumulateGrad", "RemovableHandle", "current_task", "GradientEdge"]

_SEQ = itertools.count()
ACCUMULATE_SEQ = 1 << 64  # AccumulateGrad runs as soon as it is ready (torch: UINT64_MAX)

SECOND_TIME = ("Trying to backward through the graph a second time (or directly access saved "
               "tensors after they have already been freed). Saved intermediate values of the "
               "graph are freed when you call .backward() or autograd.grad(). Specify "
               "retain_graph=True if you need to backward through the graph a second time or if "
               "you need to access saved tensors after calling backward.")


class RemovableHandle:
    """What `register_hook` returns: `remove()` (idempotent) takes the hook out."""

    _ids = itertools.count()

    def __init__(self, hooks: dict, *extra: dict):
        self.id = next(RemovableHandle._ids)
        self._dicts = (hooks,) + extra

    def remove(self) -> None:
        for d in self._dicts:
            d.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def add_hook(hooks: dict, fn) -> RemovableHandle:
    handle = RemovableHandle(hooks)
    hooks[handle.id] = fn
    return handle


def hook_name(fn) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


class Node:
    """A node of the autograd graph (`sg.autograd.graph.Node`): `t.grad_fn`."""

    # Hooks are rare: they live in the instance dict once set and read the class's None
    # until then, so recording a node stores only what every node has.
    __slots__ = ("_next", "_seq", "__dict__", "__weakref__")
    _pre = _post = _tpre = _retain = _meta = None
    _bwd = None  # an OpNode's slot (OpNode.__init__); every other node has none

    def __init__(self, next_edges: tuple, seq: int):
        self._next = next_edges  # per differentiable input: (node, output_nr) or None
        self._seq = seq

    def name(self) -> str:
        return type(self).__name__

    @property
    def next_functions(self) -> tuple:
        return tuple((None, 0) if e is None else e for e in self._next)

    @property
    def metadata(self) -> dict:
        if self._meta is None:
            self._meta = {}
        return self._meta

    def _sequence_nr(self) -> int:
        return self._seq

    def _set_sequence_nr(self, sequence_nr: int) -> None:
        """torch's: the engine runs ready nodes in decreasing sequence number (Note
        [Sequence numbers set by hand])."""
        self._seq = int(sequence_nr)
        SEQUENCE_NRS_SET[0] = True

    def register_prehook(self, fn) -> RemovableHandle:
        """`fn(grad_outputs) -> tuple | None`, run before the node."""
        if self._pre is None:
            self._pre = {}
        return add_hook(self._pre, fn)

    def register_hook(self, fn) -> RemovableHandle:
        """`fn(grad_inputs, grad_outputs) -> tuple | None`, run after the node."""
        if self._post is None:
            self._post = {}
        return add_hook(self._post, fn)

    @property
    def requires_grad(self) -> bool:
        return True

    def _register_hook_dict(self, tensor):  # torch's name; hooks live on the node here
        return None

    def tensor_pre_hooks(self, nr: int, create: bool = False):
        """The Tensor.register_hook hooks of output `nr` (a dict id -> fn, or None)."""
        if self._tpre is None:
            if not create:
                return None
            self._tpre = {}
        hooks = self._tpre.get(nr)
        if hooks is None and create:
            hooks = self._tpre[nr] = {}
        return hooks

    def n_outputs(self) -> int:
        return 1

    def __repr__(self) -> str:
        return f"<{type(self).__name__} object at {id(self):#x}>"

    # __call__ (run the node directly on Tensors) is installed by srcgrad.autograd.engine


class AccumulateGrad(Node):
    """The node that accumulates a leaf's gradient into `.grad`."""

    __slots__ = ("variable",)

    def __init__(self, variable):  # Node.__init__ written out: once per leaf per graph
        self._next = ()
        self._seq = ACCUMULATE_SEQ
        self.variable = variable

    def name(self) -> str:
        return "torch::autograd::AccumulateGrad"


class GradientEdge(tuple):
    """`(node, output_nr)`: where a tensor's gradient enters the graph
    (`sg.autograd.graph.get_gradient_edge`). `grad`/`backward` take one wherever they
    take an input tensor (here, below the engine, so that the engine can tell one apart
    from a sequence of inputs)."""

    __slots__ = ()

    def __new__(cls, node, output_nr):
        return super().__new__(cls, (node, output_nr))

    node = property(lambda self: self[0])
    output_nr = property(lambda self: self[1])


_RAW = object()  # a saved entry that was not packed (a shape, a Python number)


_SAVES_OPERAND: dict = {}  # id(kernel) -> bool; kernels live forever


def saves_an_operand(kernel) -> bool:
    """Whether the kernel saves an operand: torch saves a number operand as a wrapped 0-d
    tensor (`x * 2.0`'s MulBackward0 `_saved_other`), which a backward frees too, so such a
    node cannot run twice (observed in torch 2.14.1); numbers it computes stay (MeanBackward0)."""
    known = _SAVES_OPERAND.get(id(kernel))
    if known is None:
        known = _SAVES_OPERAND[id(kernel)] = any(k == "input" for k, _ in kernel.saved_from)
    return known


class OpNode(Node):
    """The node of one op: backward is the row's generated kernel (Note [One node per op])."""

    __slots__ = ("_name", "_kernel", "_saved", "_operands", "_versions", "_nout", "_meta_out",
                 "_bwd")
    _packed = _unpack = None  # set (in the instance dict) when saved-tensor hooks pack

    def __init__(self, name, kernel, saved, operands, next_edges, nout, meta_out):
        # the kernel's backward where the engine may call it directly (a one-output row
        # whose gradient is not zeros_like: ops.apply sets it), else None
        self._bwd = None
        self._next = next_edges
        self._seq = next(_SEQ)
        self._name = name
        self._kernel = kernel
        self._saved = saved  # the kernel's saved tuple; None once freed
        self._operands = operands  # the dynamic operands (Tensors, arrays, numbers) or None
        # per saved entry: (version counter, version when saved, (producer node, output_nr)
        # or None, the tensor whose detach_() invalidates it or None), or None
        self._versions = None
        self._nout = nout
        self._meta_out = meta_out  # per output: (shape, dtype)

    def name(self) -> str:
        return self._name

    def n_outputs(self) -> int:
        return self._nout

    @property
    def _input_metadata(self) -> tuple:
        return tuple(_InputMetadata(s, d) for s, d in self._meta_out)

    def release(self) -> None:
        """Free the saved arrays (after a backward without retain_graph). Shapes and Python
        numbers are not tensors in torch and stay: such a node can run again."""
        saved = self._saved
        if saved is not None and (self._packed is not None or any(
                type(s) is numpy.ndarray for s in saved) or saves_an_operand(self._kernel)):
            self._saved = None
            self._operands = None
            self._packed = None

    def pack_one(self, j, tensor, pack_hook, unpack_hook):
        if self._packed is None:
            self._packed = [_RAW] * len(self._saved)
        self._packed[j] = pack_hook(tensor)
        self._unpack = unpack_hook

_CLASSES: dict = {}  # node name -> its OpNode subclass (torch: type(grad_fn).__name__ is the name)


def node_class(name: str) -> type:
    cls = _CLASSES.get(name)
    if cls is None:
        short = name.rpartition("::")[2]
        cls = _CLASSES[name] = type(short, (OpNode,), {"__slots__": ()})
    return cls


class _InputMetadata:
    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape, self.dtype = shape, dtype


# ---------------------------------------------------------------- the running pass
_TASKS = threading.local()  # the engine's stack of running passes, per thread


def task_stack() -> list:
    stack = getattr(_TASKS, "stack", None)
    if stack is None:
        stack = _TASKS.stack = []
    return stack


def current_task():
    """The innermost backward/grad pass running in this thread, or None."""
    stack = getattr(_TASKS, "stack", None)
    return stack[-1] if stack else None


# ---------------------------------------------------------------- torch's spellings in messages
_SCALAR = {"f": {2: "Half", 4: "Float", 8: "Double"}, "i": {1: "Char", 2: "Short", 4: "Int",
           8: "Long"}, "u": {1: "Byte"}, "b": {1: "Bool"}, "c": {8: "ComplexFloat",
           16: "ComplexDouble"}}
_C_TYPE = {"float32": "float", "float64": "double", "int64": "long int", "int32": "int",
           "bool": "bool", "float16": "c10::Half"}


def scalar_name(dtype) -> str:
    dtype = numpy.dtype(dtype)
    return _SCALAR.get(dtype.kind, {}).get(dtype.itemsize, dtype.name)


def c_type(dtype) -> str:
    return _C_TYPE.get(numpy.dtype(dtype).name, numpy.dtype(dtype).name)


def torch_dtype(dtype) -> str:
    """`torch.float32` for float32: how torch names a dtype in messages."""
    return "torch." + numpy.dtype(dtype).name


def torch_size(shape) -> str:
    return f"torch.Size({list(shape)})"


# Note [torch's words, srcgrad's names]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The eager runtime's errors keep torch's text verbatim (spec/torch_semantics.md), as a user
# pastes it into a search engine. Where that text names a torch type or a torch API, the name
# is followed at once by " (srcgrad: <srcgrad's name>)": `[torch.FloatTensor [3]] (srcgrad: a
# float32 sg.Tensor of shape (3,))`, `torch.autograd.set_detect_anomaly(True) (srcgrad:
# sg.autograd.set_detect_anomaly(True))`. torch's text up to the name stays a substring, and
# the user learns what to call here. dtypes (`torch.float32`) and sizes (`torch.Size([3])`)
# keep torch's spelling alone: they name a value a srcgrad user reads as is (sg.float32 is
# numpy's float32), not a type or function to look for. The same form is written out in
# functional.py, engine.py, ops.py, optim/optimizer.py and utils/checkpoint.py.
def srcgrad_name(name: str) -> str:
    """The " (srcgrad: ...)" that follows a torch name (Note [torch's words, srcgrad's names])."""
    return f" (srcgrad: {name})"


def legacy_type(data) -> str:
    """torch's legacy type name (`torch.FloatTensor`) and srcgrad's (a float32 sg.Tensor)."""
    return (f"torch.{scalar_name(data.dtype)}Tensor"
            + srcgrad_name(f"a {numpy.dtype(data.dtype).name} sg.Tensor"))


def anomaly_hint() -> str:
    anomaly_mode = sys.modules.get("srcgrad.autograd.anomaly_mode")  # set up by that module
    if anomaly_mode is not None and anomaly_mode.is_anomaly_enabled():
        return ("the backtrace further above shows the operation that failed to compute its "
                "gradient. The variable in question was changed in there or anywhere later. "
                "Good luck!")
    return ("enable anomaly detection to find the operation that failed to compute its gradient, "
            "with torch.autograd.set_detect_anomaly(True, check_nan=False)"
            + srcgrad_name("sg.autograd.set_detect_anomaly(True, check_nan=False)") + ".")


def version_error(data, current, expected, label) -> RuntimeError:
    """torch's error for a saved tensor changed in place (spec §6), with srcgrad's names
    (Note [torch's words, srcgrad's names])."""
    shape = tuple(getattr(data, "shape", ()))
    sizes = ", ".join(str(n) for n in shape)
    ours = srcgrad_name(f"a {numpy.dtype(data.dtype).name} sg.Tensor of shape {shape}")
    where = ""
    if label is not None:
        node, nr = label
        where = f", which is output {nr} of {re.sub(r'Backward[0-9]*$', '', node.name())},"
    return RuntimeError(
        "one of the variables needed for gradient computation has been modified by an inplace "
        f"operation: [torch.{scalar_name(data.dtype)}Tensor [{sizes}]]{ours}{where} is at "
        f"version {current}; expected version {expected} instead. Hint: {anomaly_hint()}")


# Note [Sequence numbers set by hand]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The engine runs op nodes in decreasing sequence number, which is a topological order
# while numbers are creation order (a node's consumers were created after it; Note
# [Engine order] in srcgrad.autograd.engine). `Node._set_sequence_nr` can break that, so
# once any number was set by hand the engine takes `ready_order`: torch's ready queue,
# the highest-numbered node among those whose consumers have all run.
SEQUENCE_NRS_SET = [False]


def ready_order(root_nodes, deps) -> list:
    """The op nodes reachable from the roots, each after all its consumers, the highest
    sequence number first among the ready ones."""
    import heapq

    remaining = dict(deps)
    heap, order, tie = [], [], itertools.count()
    for n in set(root_nodes):
        if remaining.get(n, 0) == 0 and type(n) is not AccumulateGrad:
            heapq.heappush(heap, (-n._seq, next(tie), n))
    while heap:
        node = heapq.heappop(heap)[2]
        order.append(node)
        for e in node._next:
            if e is not None:
                child = e[0]
                remaining[child] -= 1
                if remaining[child] == 0 and type(child) is not AccumulateGrad:
                    heapq.heappush(heap, (-child._seq, next(tie), child))
    return order
