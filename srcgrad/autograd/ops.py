"""Tensor ops: every differentiable op is a row of the derivative table.

`apply(rule, static, skey, operands)` runs the forward of the row's one-op kernel
(srcgrad.kernels.op_kernel, generated once per (row, static arguments, active
operands) and cached here in a dict) on the operands' arrays and, when grad mode is
on and an operand requires grad, records one `OpNode` whose backward is the kernel's
(Note [One node per op] in srcgrad.autograd.node). Operators, torch-named methods
(srcgrad.autograd.methods) and NumPy functions applied to Tensors (`__array_ufunc__`,
`__array_function__`) all end here; nothing else computes a derivative.

Operands are *dynamic* (arrays, Tensors, Python numbers in differentiable slots) or
*static* (axis, keepdims, shapes, indices): `bind` sorts a call's arguments by the
rule's signature. The per-op path does no signature binding: operators and methods
pass their operands and statics directly.
"""

from __future__ import annotations

import numpy

from srcgrad import rules
from srcgrad.autograd import grad_mode
from srcgrad.autograd.node import _RAW, _SEQ, node_class
from srcgrad.autograd.saved import add_saved_properties, remember_static
from srcgrad.autograd.tensor import Tensor, _Version, share_storage
from srcgrad.contexts import SPECIAL_MODES, current_hooks, hooks_active, mutation_allowed

_STATE = grad_mode.STATE
_INFERENCE_SEEN = grad_mode.INFERENCE_SEEN
_ndarray = numpy.ndarray
_asarray = numpy.asarray
_new = object.__new__
_KERNELS: dict = {}  # (rule, static key, active) -> _Entry
_NO_STATIC: dict = {}
SEQUENCE_COUNT = "#arrays"

# Rows whose NumPy result may be a view of operand 0: it shares the version counter.
VIEW_RULES = frozenset({"reshape", "ravel", "transpose", "T", "matrix_transpose", "swapaxes",
                        "moveaxis", "expand_dims", "squeeze", "getitem", "diagonal",
                        "broadcast_to", "split"})  # flip: a copy in torch


# Piecewise-constant rows whose torch derivative is `zeros_like(grad)` (SignBackward0,
# FloorBackward0, ...): their node gives a zero gradient, not an undefined one, so an
# input reached only through them gets zeros (torch: `x.sign().sum().backward()` sets
# x.grad to zeros; the gradient of abs's `g * sign(x)` is zeros, not unused). The engine's
# node_backward gives those zeros; such a node has no _bwd. floor_divide too: remainder's
# backward `-g * (x // y)` is torch's `-grad * self.div(other, rounding_mode="floor")`,
# whose derivative is zeros (issue 28).
ZERO_DERIVATIVE_ROWS = frozenset({"sign", "floor", "ceil", "round", "trunc", "rint",
                                  "floor_divide", "trunc_divide"})


class _Entry:
    """A kernel and the facts the per-op path reads from its saved_from."""

    __slots__ = ("kernel", "forward", "saved_in", "saved_out", "keep_operands", "nsaved", "view",
                 "track", "backward", "classes")

    def __init__(self, kernel, view):
        self.kernel = kernel
        self.forward = kernel.forward
        # what a node's _bwd is: the engine's plain loop calls it (Note [One node per op])
        self.backward = None if kernel.rule in ZERO_DERIVATIVE_ROWS else kernel.backward
        self.classes = {}  # node name -> its class, with this kernel's saved properties
        sf = kernel.saved_from
        self.nsaved = len(sf)
        self.saved_in = tuple((j, i) for j, (kind, i) in enumerate(sf) if kind == "input")
        self.saved_out = tuple((j, k) for j, (kind, k) in enumerate(sf) if kind == "output")
        self.keep_operands = any(kind in ("input", "computed") for kind, _ in sf)
        self.view = view
        # whether a saved entry can be a tensor (a shape never is): versions, pack hooks
        self.track = any(kind != "shape" for kind, _ in sf)


def node_class_for(e: _Entry, name: str) -> type:
    """The node class `name` with `_saved_<name>` properties for e's kernel (Note [Saved
    attributes as properties] in srcgrad.autograd.saved)."""
    cls = e.classes.get(name)
    if cls is None:
        cls = e.classes[name] = node_class(name)
        add_saved_properties(cls, e.kernel)
    return cls


def entry_for(rule: str, static: dict, skey, active: tuple) -> _Entry:
    key = (rule, skey, active)
    e = _KERNELS.get(key)
    if e is None:
        from srcgrad.kernels import op_kernel

        e = _KERNELS[key] = _Entry(op_kernel(rule, static, active), rule in VIEW_RULES)
        remember_static(e.kernel, static)  # torch's _saved_dim & co. (srcgrad.autograd.saved)
    return e


def static_key(static: dict):
    """A hashable key of the static arguments (repr where a value is unhashable)."""
    if not static:
        return ()
    key = tuple(static.items())
    try:
        hash(key)
    except TypeError:
        key = repr(key)
    return key


INSTRUMENT = None  # srcgrad.autograd.instrument while profiling/anomaly mode (Note [Instrumentation])


# Rows whose value at a kink or pole is torch's, not the compiler's: the eager runtime
# runs torch's formula instead (Note [Eager rows at kinks and poles] in
# srcgrad.rules.torch_rows). Every path (operators, methods, NumPy protocols, the
# generated backward of another row run on Tensors) reaches `apply`, so this is the one
# place the swap is made.
EAGER_ROWS = {"power": "torch_power", "arctan2": "torch_arctan2", "hypot": "torch_hypot",
              "clip": "torch_clip", "logaddexp": "torch_logaddexp", "relu": "torch_relu",
              "divide": "torch_divide", "var": "var", "norm": "norm", "prod": "torch_prod",
              "cumprod": "torch_cumprod"}  # (var, norm: by operands)
_TENSORISH = (Tensor, _ndarray)


def _eager_row(rule: str, static: dict, operands: tuple) -> str:
    if rule == "var":  # torch's var_backward over all of x with n <= correction: no graph
        x = operands[0]._data if isinstance(operands[0], Tensor) else numpy.asarray(operands[0])
        if (static.get("axis") is None or x.ndim == 0) and x.size - static.get("ddof", 0) <= 0:
            return "torch_var_nodof"
        return rule
    if rule == "norm":  # torch's norm_backward where its value at 0 is not the compiler's
        ord = static.get("ord")
        if ord in (None, "fro", 2):
            return "torch_norm2"
        if isinstance(ord, (int, float)) and ord < 1 and ord not in (0, -numpy.inf):
            return "torch_norm_small_p"
        return rule
    rule = EAGER_ROWS[rule]
    if rule == "torch_clip" and not any(isinstance(b, _TENSORISH) for b in operands[1:]):
        return "torch_clamp_scalar"  # torch's clamp(Scalar min, Scalar max)
    if rule == "torch_power" and isinstance(operands[0], _TENSORISH) and (
            len(operands) == 1 or not isinstance(operands[1], _TENSORISH)):
        return number_power_row(operands[1] if len(operands) > 1 else None)
    return rule


def number_power_row(exponent) -> str:
    """The row of a Tensor to a number power (methods.pow_ asks directly: `x ** c` is on
    every training step's path)."""
    if exponent is not None and exponent == 0:
        return "torch_power_zero"  # torch's pow_backward: zeros_like(self), no graph
    return "torch_power_scalar"  # torch's pow(Tensor, Scalar) (a static y: one operand)


def apply(rule: str, static: dict, skey, operands: tuple, name: str, hooked: bool = False):
    """Run row `rule` on `operands` (its dynamic operands in signature order)."""
    if rule in EAGER_ROWS:
        rule = _eager_row(rule, static, operands)
    if INSTRUMENT is not None and not hooked:
        return INSTRUMENT.apply(rule, static, skey, operands, name)
    datas = []
    if _STATE.grad_enabled and not (_INFERENCE_SEEN[0] and _STATE.inference):
        # One pass over the operands gives the arrays, the active flags (the kernel's
        # key) and the graph edges: an op records a node iff an operand requires grad.
        active = []
        edges = []
        record = False
        for a in operands:
            if isinstance(a, Tensor):
                datas.append(a._data)
                if a._rg:
                    record = True
                    active.append(True)
                    fn = a._grad_fn
                    if fn is not None:
                        edges.append((fn, a._output_nr))
                    else:
                        acc = a._acc() if a._acc is not None else None
                        edges.append((acc if acc is not None else a.accumulator(), 0))
                    continue
            else:
                datas.append(a)
            active.append(False)
            edges.append(None)
        if record:
            key = (rule, skey, tuple(active))
            e = _KERNELS.get(key) or entry_for(rule, static, skey, key[2])
            ans, saved = e.forward(*datas)
            if type(ans) is not _ndarray:
                if type(ans) is tuple:
                    out = _record(e, name, ans, saved, operands, tuple(edges))
                    if DUAL.hook is not None:
                        DUAL.hook(rule, static, skey, operands, out)
                    return out
                ans = _asarray(ans)
            elif not e.view and (ans is datas[0] or ans.base is not None) \
                    and _aliases(ans, datas[0]):
                ans, saved = _owned(ans, saved)
            # _record's one-output case, with OpNode.__init__ and Tensor._make written
            # out: this runs once per recorded op
            node = _new(e.classes.get(name) or node_class_for(e, name))
            node._next = tuple(edges)
            node._seq = next(_SEQ)
            node._name = name
            node._kernel = e.kernel
            node._saved = saved
            node._operands = operands if e.keep_operands else None
            node._versions = None
            node._nout = 1
            node._meta_out = ((ans.shape, ans.dtype),)
            node._bwd = e.backward
            out = _new(Tensor)
            out._data = ans
            out._output_nr = 0
            out._vc = _Version()
            if ans.dtype.kind in "fc":
                out._rg = True
                out._grad_fn = node
            else:
                out._rg = False
                out._grad_fn = None
            if e.view and isinstance(operands[0], Tensor) and _is_view_of(ans, operands[0]):
                share_storage(out, operands[0])
            if e.track:
                if SPECIAL_MODES[0] or _INFERENCE_SEEN[0]:
                    _track_saved(node, e, saved, operands, (out,))
                else:  # _track_saved's versions, no hooks or inference tensors: written out
                    versions = None
                    for j, i in e.saved_in:
                        a = operands[i]
                        if a.__class__ is Tensor or isinstance(a, Tensor):
                            if versions is None:
                                versions = [None] * e.nsaved
                            fn = a._grad_fn
                            vc = a._vc
                            versions[j] = (vc, vc.v, None, None) if fn is None else (
                                vc, vc.v, (fn, a._output_nr), a)
                    if e.saved_out:  # (one output: k is 0)
                        if versions is None:
                            versions = [None] * e.nsaved
                        for j, _ in e.saved_out:
                            versions[j] = (out._vc, 0, 0, None)  # label: Note [Saved outputs' labels]
                    node._versions = versions
            if DUAL.hook is not None:  # a forward-AD level is open: the outputs' tangents
                DUAL.hook(rule, static, skey, operands, out)
            return out
    else:
        for a in operands:
            datas.append(a._data if isinstance(a, Tensor) else a)
    e = _KERNELS.get((rule, skey, _INACTIVE[len(operands)])) or entry_for(
        rule, static, skey, _INACTIVE[len(operands)])
    ans, _ = e.forward(*datas)
    if not e.view and type(ans) is _ndarray and datas and _aliases(ans, datas[0]):
        ans = ans.copy()
    if type(ans) is tuple:
        out = tuple(_plain(a, operands, e) for a in ans)
    else:
        out = _plain(ans, operands, e)
    if DUAL.hook is not None:
        DUAL.hook(rule, static, skey, operands, out)
    return out


class _AllFalse(dict):
    """n -> (False,) * n, made once per n (an op may have any number of operands)."""

    def __missing__(self, n):
        value = self[n] = (False,) * n
        return value


_INACTIVE = _AllFalse()


class _Dual:
    """Forward-mode AD's hooks (Note [Dual tensors] in srcgrad.autograd.forward_ad), None
    unless a dual level is open: `hook(rule, static, skey, operands, out)` gives an op's
    outputs their tangents, `written(target, result)` moves an in-place op's tangent,
    `stored(target, value, index)` that of a write recording no graph."""

    __slots__ = ("hook", "written", "stored")

    def __init__(self):
        self.hook = self.written = self.stored = None


DUAL = _Dual()


def _aliases(ans, d0) -> bool:
    """Whether a row that is not a view in torch (flip, fliplr, atleast_2d, ...) returned
    operand 0's memory, as NumPy may: the result is copied, so writing it in place never
    changes the operand behind autograd's back."""
    return ans is d0 or ans.base is not None and type(d0) is _ndarray and \
        numpy.may_share_memory(ans, d0)


def _owned(ans, saved):
    fresh = ans.copy()
    if saved:
        saved = tuple(fresh if s is ans else s for s in saved)
    return fresh, saved


def _plain(ans, operands, e):
    if type(ans) is not _ndarray:
        ans = _asarray(ans)
    t = _new(Tensor)  # Tensor._make(ans) written out: once per op under no_grad
    t._data = ans
    t._rg = False
    t._grad_fn = None
    t._output_nr = 0
    t._vc = _Version()
    if _INFERENCE_SEEN[0] and _STATE.inference:
        t._inference = True
    if e.view and isinstance(operands[0], Tensor) and _is_view_of(ans, operands[0]):
        share_storage(t, operands[0])
        if operands[0]._rg and ans.dtype.kind in "fc":
            # torch: a view made under no_grad or inference mode of a Tensor that requires
            # grad requires grad too, as a leaf (grad_fn None; observed in torch 2.14.1)
            t._rg = True
    return t


def _is_view_of(ans, source) -> bool:
    """Whether NumPy returned a view of `source`'s memory (a reshape may copy: its result
    then has a `.base` too, but shares no memory)."""
    return ans.base is not None and numpy.may_share_memory(ans, source._data)


def _edge(a):
    if (type(a) is Tensor or isinstance(a, Tensor)) and a._rg:
        fn = a._grad_fn
        if fn is not None:
            return (fn, a._output_nr)
        acc = a._acc() if a._acc is not None else None
        return (acc if acc is not None else a.accumulator(), 0)
    return None


def _record(e: _Entry, name: str, ans, saved, operands, edges):
    """The node of an op with several outputs (`apply` records a one-output op itself)."""
    cls = node_class_for(e, name)
    keep = operands if e.keep_operands else None
    outs_data = tuple(a if type(a) is _ndarray else _asarray(a) for a in ans)
    node = cls(name, e.kernel, saved, keep, edges, len(outs_data),
               tuple((a.shape, a.dtype) for a in outs_data))
    outs = []
    for k, a in enumerate(outs_data):
        diff = a.dtype.kind in "fc"
        outs.append(Tensor._make(a, diff, node if diff else None, k))
    if e.view and isinstance(operands[0], Tensor):  # split: every output is a view
        for k, a in enumerate(outs_data):
            if _is_view_of(a, operands[0]):
                share_storage(outs[k], operands[0], (name, k))
    if e.track:
        _track_saved(node, e, saved, operands, outs)
    return tuple(outs)


# Note [Saved outputs' labels]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A version entry's label is the (producer node, output_nr) that torch's "modified by an
# inplace operation" error names. A saved *output*'s producer is the node itself, so its
# label is the output_nr alone (saved._check_version pairs it with the node): a (node, k)
# held in node._versions made every node saving its output (tanh, exp, softmax, ...) a
# reference cycle, freed by the cycle collector instead of when the graph is dropped.
def _track_saved(node, e, saved, operands, outs):
    """Record versions of saved Tensors; pack them when saved-tensor hooks are active."""
    versions = None
    for j, i in e.saved_in:
        a = operands[i]
        if isinstance(a, Tensor):
            if _INFERENCE_SEEN[0] and a._inference and not _STATE.inference:
                raise RuntimeError(
                    "Inference tensors cannot be saved for backward. Please do not use Tensors "
                    "created in inference mode in computation tracked by autograd. To work around "
                    "this, you can make a clone to get a normal tensor and use it in autograd, or "
                    "use `torch.no_grad()` instead of `torch.inference_mode()` (srcgrad: "
                    "`sg.no_grad()` instead of `sg.inference_mode()`).")
            if versions is None:
                versions = [None] * e.nsaved
            fn = a._grad_fn  # (counter, version, producer, tensor to watch for detach_())
            vc = a._vc
            versions[j] = (vc, vc.v, None, None) if fn is None else (
                vc, vc.v, (fn, a._output_nr), a)
    for j, k in e.saved_out:
        if versions is None:
            versions = [None] * e.nsaved
        t = outs[k]
        versions[j] = (t._vc, t._vc.v, k, None)  # Note [Saved outputs' labels]
    node._versions = versions
    if SPECIAL_MODES[0]:  # a saved-tensor hooks or allow-mutation context is open somewhere
        if hooks_active():
            _pack_all(node, e, saved, operands, outs, current_hooks())
        elif mutation_allowed() is not None:  # clone-on-write of saved tensors (graph.py)
            _pack_all(node, e, saved, operands, outs, mutation_allowed().eager_hooks())


def _pack_all(node, e, saved, operands, outs, hooks):
    pack, unpack = hooks
    packed = [_RAW] * e.nsaved
    kept = list(saved)
    for j, (kind, i) in enumerate(e.kernel.saved_from):
        if kind == "input":
            a = operands[i]
            if isinstance(a, Tensor):
                value = a
            elif isinstance(a, _ndarray):
                value = Tensor._make(a)
            else:
                continue  # a Python number is never hooked
        elif kind == "output":
            value = outs[i]
        elif kind == "computed" and isinstance(saved[j], _ndarray):
            value = Tensor._make(saved[j])
        else:
            continue
        version = value._vc.v
        packed[j] = pack(value)
        if value._vc.v != version:
            raise RuntimeError(
                "A saved tensor pack hook is modifying its input in place. Tensors provided as "
                "input to pack hook cannot be modified by in-place operations as this can lead "
                "to unexpected side-effects. Please open an issue if you need to perform in-place "
                "operations on the input to a pack hook.")
        kept[j] = None
    node._packed = packed
    node._unpack = unpack
    node._saved = tuple(kept)


# ---------------------------------------------------------------- generic calls by signature
def is_dynamic(value, differentiable: bool) -> bool:
    if isinstance(value, (Tensor, _ndarray)):
        return True
    if differentiable and isinstance(value, (int, float, complex, numpy.number)) \
            and not isinstance(value, bool):
        return True
    return False


def freeze(value):
    if isinstance(value, list):
        return tuple(freeze(v) for v in value)
    if isinstance(value, tuple):
        return tuple(freeze(v) for v in value)
    if isinstance(value, numpy.integer):
        return int(value)
    if isinstance(value, Tensor) and value._data.ndim == 0 and value._data.dtype.kind in "iu":
        return int(value._data)
    return value


def bind(rule, args, kwargs) -> tuple:
    """(static dict, dynamic operands) of a call of `rule` (the generic, slower path)."""
    sig = rule.py_signature
    bound = sig.bind(*args, **kwargs)
    static, dynamic = {}, []
    for pname, param in sig.parameters.items():
        if pname in bound.arguments:
            value = bound.arguments[pname]
        elif param.default is not param.empty:
            value = param.default
        else:
            continue
        if param.kind is param.VAR_POSITIONAL:
            dynamic.extend(value)
            continue
        if pname == "arrays":
            value = list(value)
            static[SEQUENCE_COUNT] = len(value)
            dynamic.extend(value)
        elif is_dynamic(value, pname in rule.vjp):
            dynamic.append(value)
        else:
            static[pname] = freeze(value)
    return static, tuple(dynamic)


def call_rule(rule, args, kwargs, name=None):
    static, dynamic = bind(rule, args, kwargs)
    result = apply(rule.name, static, static_key(static), dynamic, name or node_name(rule.name))
    if rule.static_out:
        return _unwrap(result)
    return result


def _unwrap(value):
    if isinstance(value, Tensor):
        return value._data if value._data.ndim else value._data.item()
    if isinstance(value, tuple):
        return tuple(_unwrap(v) for v in value)
    return value


# ---------------------------------------------------------------- torch's node names
_TORCH_NAMES = {
    "multiply": "Mul", "add": "Add", "subtract": "Sub", "divide": "Div", "power": "Pow",
    "negative": "Neg", "positive": "Positive", "copy": "Clone", "astype": "ToCopy",
    "reshape": "View", "ravel": "View", "flatten": "View", "T": "T", "transpose": "Permute",
    "matrix_transpose": "Transpose", "swapaxes": "Transpose", "broadcast_to": "Expand",
    "expand_dims": "Unsqueeze", "squeeze": "Squeeze", "concatenate": "Cat", "stack": "Stack",
    "log1p": "Log1P", "clip": "Clamp", "tile": "Repeat", "repeat": "RepeatInterleave",
    "inv": "LinalgInv", "det": "LinalgDet", "slogdet": "LinalgSlogdet", "solve": "LinalgSolve",
    "cholesky": "LinalgCholesky", "eigh": "LinalgEigh", "norm": "LinalgVectorNorm",
    "arcsin": "Asin", "arccos": "Acos", "arctan": "Atan", "arcsinh": "Asinh",
    "arccosh": "Acosh", "arctanh": "Atanh", "arctan2": "Atan2", "mod": "Remainder",
    "take_along_axis": "Gather", "where": "Where", "conjugate": "Conj", "outer": "Outer",
    "torch_fmod": "Fmod",
}
_NAME_CACHE: dict = {}


def node_name(rule: str) -> str:
    name = _NAME_CACHE.get(rule)
    if name is None:
        base = _TORCH_NAMES.get(rule) or "".join(p.capitalize() for p in rule.split("_"))
        name = _NAME_CACHE[rule] = base + "Backward0"
    return name


def strip(value):
    if isinstance(value, Tensor):
        return value._data
    if isinstance(value, (list, tuple)):
        return type(value)(strip(v) for v in value)
    return value


# ---------------------------------------------------------------- the namespace of helpers
class _Namespace:
    """`t.__array_namespace__()`: what srcgrad.rules.helpers call when generated backward
    code runs on Tensors (create_graph=True). Array creation makes Tensors, `asarray` keeps
    them; every other NumPy function dispatches to the rows through the protocols."""

    def __getattr__(self, name):
        return getattr(numpy, name)

    @staticmethod
    def asarray(x, dtype=None, copy=None):
        if isinstance(x, Tensor):
            if dtype is not None and x.dtype != dtype:
                return x.astype(dtype)
            return x.clone() if copy else x
        return numpy.array(x, dtype=dtype, copy=copy)  # indices, constants: plain arrays

    @staticmethod
    def cumulative_prod(x, axis=None, dtype=None, include_initial=False):
        return numpy.cumprod(x, axis=axis)

    @staticmethod
    def cumulative_sum(x, axis=None, dtype=None, include_initial=False):
        return numpy.cumsum(x, axis=axis)

    @staticmethod
    def broadcast_arrays(*arrays):
        shape = numpy.broadcast_shapes(*(numpy.shape(a) for a in arrays))
        return [a if numpy.shape(a) == shape else numpy.broadcast_to(a, shape) for a in arrays]

    @staticmethod
    def bincount(x, weights=None, minlength=0):
        if not isinstance(weights, Tensor):
            return numpy.bincount(strip(x), weights=weights, minlength=minlength)
        index = strip(x)
        size = max(int(minlength), int(index.max()) + 1 if index.size else 0)
        return apply("scatter_index", {"shape": (size,)}, (size,), (weights, index),
                     "IndexPutBackward0")

    @staticmethod
    def trunc_divide(x, y):  # torch's div(rounding_mode="trunc"): one node (helpers.trunc_divide)
        return apply("trunc_divide", _NO_STATIC, (), (x, y), "DivBackward2")

    @staticmethod
    def zeros(shape, dtype=None):
        return Tensor._make(numpy.zeros(shape, dtype=dtype))

    @staticmethod
    def ones(shape, dtype=None):
        return Tensor._make(numpy.ones(shape, dtype=dtype))

    @staticmethod
    def empty(shape, dtype=None):
        return Tensor._make(numpy.zeros(shape, dtype=dtype))

    @staticmethod
    def arange(*args, **kwargs):
        return numpy.arange(*args, **kwargs)  # indices: plain arrays

    @staticmethod
    def full(shape, fill_value, dtype=None):
        if isinstance(fill_value, Tensor):
            return call_rule(rules.RULES["full"], (shape, fill_value), {"dtype": dtype})
        return Tensor._make(numpy.full(shape, fill_value, dtype=dtype))


NAMESPACE = _Namespace()


Tensor.__array_namespace__ = lambda self, api_version=None: NAMESPACE
