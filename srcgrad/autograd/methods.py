"""Tensor operators and methods (torch's names and NumPy's), each a row of the table.

Every method below is a thin call of `ops.apply` with the row, its static arguments
and its dynamic operands: no formula lives here. Operators and the common methods
pass their statics directly (no signature binding on the per-op path); table rows
that name an ndarray method (`rule.method`) and have no hand-written entry here are
bound by signature (`ops.call_rule`).
"""

from __future__ import annotations

import collections

import numpy

from srcgrad import rules
from srcgrad.autograd.ops import apply, call_rule, node_name, number_power_row, static_key
from srcgrad.autograd.saved import keep_numbers
from srcgrad.autograd.tensor import Tensor

_E = {}  # no static arguments
return_types_max = collections.namedtuple("max", ["values", "indices"])
return_types_min = collections.namedtuple("min", ["values", "indices"])
return_types_sort = collections.namedtuple("sort", ["values", "indices"])


def _binary(rule):
    name = node_name(rule)
    keep = rule in ("multiply", "divide")  # torch's MulBackward0/DivBackward0 `_saved_self`

    def op(self, other):
        if other.__class__ is not Tensor:
            if isinstance(other, _SEQUENCES):
                other = numpy.asarray(other)
            elif keep:
                return _kept(apply(rule, _E, (), (self, other), name))
        return apply(rule, _E, (), (self, other), name)

    def rop(self, other):
        if other.__class__ is not Tensor:
            if isinstance(other, _SEQUENCES):
                other = numpy.asarray(other)
            elif keep:
                return _kept(apply(rule, _E, (), (other, self), name))
        return apply(rule, _E, (), (other, self), name)

    op.__name__, rop.__name__ = rule, "r" + rule
    return op, rop


_rdivide = _binary("divide")[1]
_RECIPROCAL = node_name("reciprocal")
_MULTIPLY = node_name("multiply")


def _rtruediv(self, other):
    """`c / t` for a non-Tensor c: torch's Tensor.__rdiv__ is `self.reciprocal() * other`,
    so its grad_fn is MulBackward0 over ReciprocalBackward0, which saves only the
    reciprocal (its result), never t: writing t in place afterwards does not fail the
    backward. An integer t keeps the division (NumPy's reciprocal of an integer is one)."""
    if not numpy.issubdtype(numpy.asarray(self._data).dtype, numpy.inexact):
        return _rdivide(self, other)
    r = apply("reciprocal", _E, (), (self,), _RECIPROCAL)
    return _kept(apply("multiply", _E, (), (r, _operand(other)), _MULTIPLY))


def _kept(out):
    """`out` with its node's number operands kept past a backward (saved.keep_numbers)."""
    if isinstance(out, Tensor):
        keep_numbers(out)
    return out


def _operand(x):
    if isinstance(x, (list, tuple)):
        return numpy.asarray(x)
    return x


_SEQUENCES = (list, tuple)  # what _operand converts (the operators test a Tensor first)


def _unary(rule):
    name = node_name(rule)

    def op(self):
        return apply(rule, _E, (), (self,), name)

    op.__name__ = rule
    return op


def _axis(dim):
    if isinstance(dim, list):
        return tuple(dim)
    return dim


def _reduction(rule, by_dim_suffix=False, name=None):
    full_name = name or node_name(rule)
    dim_name = full_name[:-1] + "1" if by_dim_suffix else full_name

    def op(self, dim=None, keepdim=False, *, axis=None, keepdims=None, dtype=None):
        ax = _axis(dim if axis is None else axis)
        keep = bool(keepdim if keepdims is None else keepdims)
        static = {"axis": ax, "keepdims": keep}
        out = apply(rule, static, (ax, keep), (self,), full_name if ax is None else dim_name)
        return out if dtype is None else out.astype(dtype)

    op.__name__ = rule
    return op


_TAKE_FLAT = {"axis": None}
_TAKE_FLAT_KEY = static_key(_TAKE_FLAT)


def _flat_index(x, indices, ax, keep):
    """The flat positions in x of the `indices` along axis `ax` that argmax/argmin gave."""
    ax = ax % max(x.ndim, 1)
    k = indices if keep else numpy.expand_dims(indices, ax)
    where = list(numpy.indices(k.shape, sparse=True))
    where[ax] = k
    flat = numpy.ravel_multi_index(tuple(where), x.shape)
    return flat if keep else numpy.squeeze(flat, ax)


def _max_min(rule, kind, argrule, rtype):
    full = node_name(rule)[:-1] + "1"  # torch: x.max() is MaxBackward1
    by_dim = node_name(rule)

    def op(self, dim=None, keepdim=False, *, axis=None, keepdims=None):
        if isinstance(dim, Tensor):  # torch.max(a, b): the elementwise maximum
            return apply(kind, _E, (), (self, dim), node_name(kind))
        ax = _axis(dim if axis is None else axis)
        keep = bool(keepdim if keepdims is None else keepdims)
        static = {"axis": ax, "keepdims": keep}
        if ax is None or axis is not None:
            return apply(rule, static, (ax, keep), (self,), full if ax is None else by_dim)
        # torch's max(dim)/min(dim) saves the indices (and x's shape), never x or the
        # values: the values are x taken at the indices, a `take` row whose backward puts
        # the gradient at the index alone (the first extremum, ties not shared)
        indices = apply(argrule, static, (ax, keep), (self,), "")
        values = apply("take", _TAKE_FLAT, _TAKE_FLAT_KEY,
                       (self, _flat_index(self, indices._data, ax, keep)), by_dim)
        if values._grad_fn is not None:  # torch's _saved_dim/_keepdim/_indices (saved.py)
            values._grad_fn._by_dim = (ax, keep, indices)
        return rtype(values, indices)

    op.__name__ = rule
    return op


# ---------------------------------------------------------------- shape methods
def _shape_args(args):
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(args[0])
    return tuple(int(a) for a in args)


def reshape(self, *shape, order="C"):
    shape = _shape_args(shape)
    return apply("reshape", {"shape": shape}, shape, (self,), "ViewBackward0")


def view_as(self, other):
    return reshape(self, other.shape)


def transpose(self, *axes):
    if len(axes) == 2 and all(isinstance(a, int) for a in axes):  # torch: swap two dims
        return apply("swapaxes", {"axis1": axes[0], "axis2": axes[1]}, axes, (self,),
                     "TransposeBackward0")
    axes = _shape_args(axes) if axes else None
    if axes is None and self._data.ndim == 2:
        return t(self)
    return apply("transpose", {"axes": axes}, axes, (self,), "PermuteBackward0")


def permute(self, *dims):
    dims = _shape_args(dims)
    return apply("transpose", {"axes": dims}, dims, (self,), "PermuteBackward0")


def t(self):
    if self._data.ndim < 2:
        return apply("reshape", {"shape": self.shape}, self.shape, (self,), "TBackward0")
    return apply("T", _E, (), (self,), "TBackward0")


def unsqueeze(self, dim):
    return apply("expand_dims", {"axis": dim}, dim, (self,), "UnsqueezeBackward0")


def squeeze(self, dim=None, *, axis=None):
    ax = _axis(dim if axis is None else axis)
    if ax is not None and self._data.shape[ax if isinstance(ax, int) else 0] != 1:
        return apply("reshape", {"shape": self.shape}, self.shape, (self,), "SqueezeBackward1")
    return apply("squeeze", {"axis": ax}, ax, (self,), "SqueezeBackward0")


def expand(self, *sizes):
    sizes = _shape_args(sizes)
    lead = len(sizes) - self._data.ndim
    shape = tuple(self._data.shape[i - lead] if s == -1 else s for i, s in enumerate(sizes))
    return apply("broadcast_to", {"shape": shape}, shape, (self,), "ExpandBackward0")


def expand_as(self, other):
    return expand(self, other.shape)


def flatten(self, start_dim=0, end_dim=-1):
    shape = self._data.shape
    if not shape:
        return reshape(self, (1,))
    end = end_dim % len(shape)
    new = shape[:start_dim] + (int(numpy.prod(shape[start_dim:end + 1])),) + shape[end + 1:]
    return apply("reshape", {"shape": new}, new, (self,), "ViewBackward0")


def flip(self, *dims):
    dims = _shape_args(dims) if dims else None
    return apply("flip", {"axis": dims}, dims, (self,), "FlipBackward0")


def repeat(self, *reps):
    reps = _shape_args(reps)
    return apply("tile", {"reps": reps}, reps, (self,), "RepeatBackward0")


def narrow(self, dim, start, length):
    index = (slice(None),) * (dim % self._data.ndim) + (slice(start, start + length),)
    return apply("getitem", _E, (), (self, index), "SliceBackward0")


def select(self, dim, index):
    index = (slice(None),) * (dim % self._data.ndim) + (index, Ellipsis)  # a view, even 0-d
    return apply("getitem", _E, (), (self, index), "SelectBackward0")


def getitem(self, index):
    if isinstance(index, Tensor):
        index = index._data
    elif isinstance(index, list):
        index = numpy.asarray(index)
    elif isinstance(index, tuple) and any(isinstance(i, (Tensor, list)) for i in index):
        index = tuple(i._data if isinstance(i, Tensor) else numpy.asarray(i)
                      if isinstance(i, list) else i for i in index)
    name = _index_name(index)
    if type(index) is int or type(index) is tuple and len(index) == self._data.ndim and all(
            type(i) is int for i in index):  # t[i] of a 1-d t: a 0-d view, as torch's, not a copy
        index = (index, Ellipsis) if type(index) is int else index + (Ellipsis,)
    return apply("getitem", _E, (), (self, index), name)


def _index_name(index) -> str:
    parts = index if isinstance(index, tuple) else (index,)
    if any(isinstance(p, numpy.ndarray) for p in parts):
        return "IndexBackward0"
    if any(isinstance(p, slice) or p is None or p is Ellipsis for p in parts):
        return "SliceBackward0" if all(isinstance(p, slice) for p in parts) else "AsStridedBackward0"
    return "SelectBackward0"


# ---------------------------------------------------------------- arithmetic helpers
def matmul(self, other):
    if other.__class__ is Tensor and self._data.ndim == 2 and other._data.ndim == 2:
        return apply("matmul", _E, (), (self, other), "MmBackward0")  # _matmul_name's 2-d case
    other = _operand(other)
    return apply("matmul", _E, (), (self, other), _matmul_name(self, other))


def rmatmul(self, other):
    other = _operand(other)
    return apply("matmul", _E, (), (other, self), _matmul_name(other, self))


def _matmul_name(a, b) -> str:
    na = a._data.ndim if isinstance(a, Tensor) else numpy.ndim(a)
    nb = b._data.ndim if isinstance(b, Tensor) else numpy.ndim(b)
    if na == 1 and nb == 1:
        return "DotBackward0"
    if na == 2 and nb == 2:
        return "MmBackward0"
    if na == 2 and nb == 1:
        return "MvBackward0"
    return "BmmBackward0"


def add(self, other, *, alpha=1):
    if alpha != 1:
        other = other * alpha
    return apply("add", _E, (), (self, _operand(other)), "AddBackward0")


def sub(self, other, *, alpha=1):
    if alpha != 1:
        other = other * alpha
    return apply("subtract", _E, (), (self, _operand(other)), "SubBackward0")


def pow_(self, exponent):
    # torch's node names: PowBackward0 for a number exponent, PowBackward1 for a Tensor one
    # (pow(Tensor, Tensor)), PowBackward2 for a number base (__rpow__: pow(Scalar, Tensor))
    if exponent.__class__ is not Tensor and isinstance(exponent, _SEQUENCES):
        exponent = numpy.asarray(exponent)
    if isinstance(exponent, (Tensor, numpy.ndarray)):
        return apply("power", _E, (), (self, exponent), "PowBackward1")
    # (the row asked for directly: ops._eager_row's tests cost a microsecond a call)
    return _kept(apply(number_power_row(exponent), _E, (), (self, exponent), "PowBackward0"))


def _rpow(self, base):
    if base.__class__ is not Tensor and isinstance(base, _SEQUENCES):
        base = numpy.asarray(base)
    if isinstance(base, numpy.ndarray):
        return apply("power", _E, (), (base, self), "PowBackward1")
    return _kept(apply("power", _E, (), (base, self), "PowBackward2"))


def relu(self):
    return apply("relu", _E, (), (self,), "ReluBackward0")


def sigmoid(self):
    # torch's formula, (1 - ans) * ans: 0 at -inf (Note [Eager rows at kinks and poles])
    return apply("torch_sigmoid", _E, (), (self,), "SigmoidBackward0")


def clamp(self, min=None, max=None):
    return _kept(apply("clip", {}, (), (self, _operand(min), _operand(max)), "ClampBackward1")
                 if min is not None and max is not None else _clamp1(self, min, max))


def _clamp1(self, lo, hi):
    static = {"a_min": None} if lo is None else {"a_max": None}
    operands = (self, hi) if lo is None else (self, lo)
    return apply("clip", static, tuple(static), operands, "ClampBackward1")


def astype(self, dtype):
    dtype = numpy.dtype(dtype)
    return apply("astype", {"dtype": dtype}, dtype, (self,), "ToCopyBackward0")


def to(self, *args, dtype=None, **kwargs):
    for a in args:
        if not isinstance(a, str):
            dtype = a
    return self if dtype is None or numpy.dtype(dtype) == self.dtype else astype(self, dtype)


def type_as(self, other):
    return to(self, other.dtype)


def sort(self, dim=-1, descending=False, *, axis=None):
    ax = dim if axis is None else axis
    static = {"axis": ax}
    if descending:
        flipped = flip(self, ax)
        values = apply("sort", static, ax, (flipped,), "SortBackward0")
        indices = apply("argsort", static, ax, (flipped,), "")
        return return_types_sort(flip(values, ax), self.shape[ax] - 1 - flip(indices, ax))
    values = apply("sort", static, ax, (self,), "SortBackward0")
    indices = apply("argsort", static, ax, (self,), "")
    return return_types_sort(values, indices)


def argsort(self, dim=-1, *, axis=None):
    ax = dim if axis is None else axis
    return apply("argsort", {"axis": ax}, ax, (self,), "")


def var(self, dim=None, unbiased=None, keepdim=False, *, correction=None, axis=None, ddof=None,
        keepdims=None):
    ax = _axis(dim if axis is None else axis)
    bare = ax is None and ddof is None and correction is None and unbiased is None
    if ddof is None:  # torch: unbiased by default; NumPy's ddof when given
        ddof = correction if correction is not None else (0 if unbiased is False else 1)
    keep = bool(keepdim if keepdims is None else keepdims)
    static = {"axis": ax, "ddof": ddof, "keepdims": keep}
    out = apply("var", static, (ax, ddof, keep), (self,), "VarBackward0")
    if bare and out._grad_fn is not None:  # torch's _saved_correction is None (saved.py)
        out._grad_fn._bare = True
    return out


def std(self, dim=None, unbiased=None, keepdim=False, *, correction=None, axis=None, ddof=None,
        keepdims=None):
    ax = _axis(dim if axis is None else axis)
    bare = ax is None and ddof is None and correction is None and unbiased is None
    if ddof is None:
        ddof = correction if correction is not None else (0 if unbiased is False else 1)
    keep = bool(keepdim if keepdims is None else keepdims)
    static = {"axis": ax, "ddof": ddof, "keepdims": keep}
    out = apply("std", static, (ax, ddof, keep), (self,), "StdBackward0")
    if bare and out._grad_fn is not None:  # torch's _saved_correction is None (saved.py)
        out._grad_fn._bare = True
    return out


def cumsum(self, dim=None, *, axis=None):
    ax = dim if axis is None else axis
    return apply("cumsum", {"axis": ax}, ax, (self,), "CumsumBackward0")


def cumprod(self, dim=None, *, axis=None):
    ax = dim if axis is None else axis
    return apply("cumprod", {"axis": ax}, ax, (self,), "CumprodBackward0")


def dot(self, other):
    return apply("dot", _E, (), (self, _operand(other)), "DotBackward0")


def clone(self):
    return apply("copy", _E, (), (self,), "CloneBackward0")


def norm(self, p=None, dim=None, keepdim=False):
    static = {"ord": None if p in (None, 2, "fro") and dim is None else p, "axis": _axis(dim),
              "keepdims": keepdim}
    return apply("norm", static, static_key(static), (self,), "LinalgVectorNormBackward0")


def _generic_method(rule):
    def method(self, *args, **kwargs):
        if rule.method_varargs and len(args) > 1:
            args = (args,)
        return call_rule(rule, (self,) + args, kwargs)

    method.__name__ = rule.method
    return method


_UNARY_METHODS = {
    "exp": "exp", "log": "log", "log2": "log2", "log10": "log10", "log1p": "log1p",
    "expm1": "expm1", "sqrt": "sqrt", "square": "square", "reciprocal": "reciprocal",
    "sin": "sin", "cos": "cos", "tan": "tan", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh",
    "asin": "arcsin", "acos": "arccos", "atan": "arctan", "arcsin": "arcsin",
    "arccos": "arccos", "arctan": "arctan", "asinh": "arcsinh", "acosh": "arccosh",
    "atanh": "arctanh", "abs": "abs", "neg": "negative", "negative": "negative",
    "sign": "sign", "floor": "floor", "ceil": "ceil", "trunc": "trunc", "isnan": "isnan",
    "isinf": "isinf", "isfinite": "isfinite", "conj": "conjugate", "exp2": "exp2",
    "rsqrt": None, "logical_not": "logical_not",
}

_BINARY_OPERATORS = {
    "add": "add", "sub": "subtract", "mul": "multiply", "truediv": "divide", "pow": "power",
    "mod": "mod", "floordiv": "floor_divide", "and": "bitwise_and", "or": "bitwise_or",
    "xor": "bitwise_xor",
}
_COMPARISONS = {"lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal",
                "eq": "equal", "ne": "not_equal"}


def install(cls) -> None:
    for dunder, rule in _BINARY_OPERATORS.items():
        op, rop = _binary(rule)
        setattr(cls, f"__{dunder}__", op)
        setattr(cls, f"__r{dunder}__", rop)
    cls.__rtruediv__ = _rtruediv
    cls.__pow__, cls.__rpow__ = pow_, _rpow
    for dunder, rule in _COMPARISONS.items():
        setattr(cls, f"__{dunder}__", _binary(rule)[0])
    cls.__hash__ = lambda self: id(self)
    cls.__matmul__, cls.__rmatmul__ = matmul, rmatmul
    cls.__neg__, cls.__pos__ = _unary("negative"), _unary("positive")
    cls.__abs__, cls.__invert__ = _unary("abs"), _unary("invert")
    cls.__getitem__ = getitem
    named = {}
    for rule in rules.RULES.values():  # NumPy-named methods straight from the table
        if rule.method and not rule.nondiff or rule.method in ("argmax", "argmin", "all", "any",
                                                               "round", "argsort"):
            named[rule.method] = _generic_method(rule)
    for method, rule in _UNARY_METHODS.items():
        if rule is not None:
            named[method] = _unary(rule)
    ops_by_name = {"mul": "multiply", "multiply": "multiply", "div": "divide",
                   "divide": "divide", "true_divide": "divide", "subtract": "subtract",
                   "maximum": "maximum", "minimum": "minimum", "fmod": "torch_fmod",
                   "remainder": "mod", "atan2": "arctan2", "arctan2": "arctan2",
                   "hypot": "hypot", "logaddexp": "logaddexp", "outer": "outer",
                   "inner": "inner", "lt": "less", "le": "less_equal", "gt": "greater",
                   "ge": "greater_equal", "eq": "equal", "ne": "not_equal"}
    for method, rule in ops_by_name.items():
        named[method] = _binary(rule)[0]
    named.update(
        add=add, sub=sub, pow=pow_, matmul=matmul, mm=matmul, mv=matmul, bmm=matmul, dot=dot,
        relu=relu, sigmoid=sigmoid, clamp=clamp, clip=clamp, reshape=reshape, view=reshape,
        view_as=view_as, reshape_as=view_as, transpose=transpose, permute=permute, t=t,
        unsqueeze=unsqueeze, squeeze=squeeze, expand=expand, expand_as=expand_as,
        flatten=flatten, flip=flip, repeat=repeat, narrow=narrow, select=select,
        astype=astype, to=to, type_as=type_as, sort=sort, argsort=argsort, var=var, std=std,
        cumsum=cumsum, cumprod=cumprod, clone=clone, copy=clone, norm=norm,
        sum=_reduction("sum", by_dim_suffix=True), mean=_reduction("mean", by_dim_suffix=True),
        prod=_reduction("prod", by_dim_suffix=True),
        max=_max_min("max", "maximum", "argmax", return_types_max),
        min=_max_min("min", "minimum", "argmin", return_types_min),
        # torch: AmaxBackward0/AminBackward0, all or along dims (max()'s is MaxBackward1)
        amax=_reduction("max", name="AmaxBackward0"), amin=_reduction("min", name="AminBackward0"),
        double=lambda self: astype(self, numpy.float64),
        float=lambda self: astype(self, numpy.float32),
        half=lambda self: astype(self, numpy.float16),
        long=lambda self: astype(self, numpy.int64),
        int=lambda self: astype(self, numpy.int32),
        bool=lambda self: astype(self, numpy.bool_),
        rsqrt=lambda self: apply("torch_rsqrt", _E, (), (self,), "RsqrtBackward0"),
    )
    for name, fn in named.items():
        setattr(cls, name, fn)
    cls.T = property(t)
    cls.mT = property(lambda self: apply("matrix_transpose", _E, (), (self,),
                                         "TransposeBackward0"))


install(Tensor)
