"""The torch namespace on tensors: `sg.cat`, `sg.where`, `sg.softmax`, ... and dtypes.

torch's functions with torch's signatures (`dim=`, `keepdim=`, `out=`), each the Tensor
method of the same name or a NumPy function applied to Tensors (a row of the table):
nothing here computes a derivative. `out=` follows torch: refused with its "don't
support automatic differentiation" error when grad mode is on and an input requires
grad; otherwise the result is written into `out` (a version bump, as torch's).

Dtypes are torch's dtype objects standing for NumPy's (srcgrad.autograd.dtypes), so
`t.dtype == sg.float32` and `sg.zeros(2, dtype=sg.float64)` mean what they do in torch;
the default floating dtype is srcgrad.autograd.tensor.DEFAULT_FLOAT (float32).
"""

from __future__ import annotations

import builtins

import numpy

from srcgrad.autograd import dtypes as _dt
from srcgrad.autograd import grad_mode, tensor, torch_methods
from srcgrad.autograd import strided as _strided
from srcgrad.autograd.ops import apply
from srcgrad.autograd.tensor import _RNG, Tensor, _check_device, _leaf, _shape

# ---------------------------------------------------------------- dtypes
# torch's dtype objects, each standing for its NumPy dtype (Note [Dtype objects] in
# srcgrad.autograd.dtypes)
float16 = half = _dt.of("float16")
float32 = float = _dt.of("float32")  # noqa: A001 (torch's names)
float64 = double = _dt.of("float64")
complex64 = cfloat = _dt.of("complex64")
complex128 = cdouble = _dt.of("complex128")
uint8, int8 = _dt.of("uint8"), _dt.of("int8")
int16 = short = _dt.of("int16")
int32 = int = _dt.of("int32")  # noqa: A001
int64 = long = _dt.of("int64")
bool = _dt.of("bool")  # noqa: A001
iinfo, dtype = _dt.iinfo, _dt.dtype

DTYPES = ["dtype", "float16", "half", "float32", "float", "float64", "double", "complex64", "cfloat",
          "complex128", "cdouble", "uint8", "int8", "int16", "short", "int32", "int", "int64",
          "long", "bool", "finfo", "iinfo", "get_default_dtype", "set_default_dtype",
          "is_floating_point", "is_complex"]


def get_default_dtype():
    return _dt.of(tensor.DEFAULT_FLOAT)


class finfo(_dt.finfo):  # noqa: N801 (torch's name)
    __doc__ = _dt.finfo.__doc__

    def __init__(self, type=None):  # noqa: A002 (torch's parameter name)
        super().__init__(tensor.DEFAULT_FLOAT if type is None else type)


def set_default_dtype(d) -> None:
    """torch's: the dtype Python floats (and zeros/ones/rand/...) make; float32 or float64."""
    dt = numpy.dtype(d)
    if dt.kind != "f" or dt.itemsize < 4:
        raise TypeError(f"only floating-point types are supported as the default type, got "
                        f"torch.{dt.name}" if dt.kind != "f" else
                        "couldn't find storage object Float16Storage")
    tensor.DEFAULT_FLOAT = dt


def is_floating_point(input) -> bool:
    return input._data.dtype.kind == "f"


def is_complex(input) -> bool:
    return input._data.dtype.kind == "c"


# ---------------------------------------------------------------- out=
def _requires_grad(values) -> bool:
    for v in values:
        if isinstance(v, Tensor) and v._rg:
            return True
        if isinstance(v, (list, tuple)) and _requires_grad(v):
            return True
    return False


def _finish(name, result, out, inputs):
    if out is None:
        return result
    if grad_mode.STATE.grad_enabled and _requires_grad(inputs):
        raise RuntimeError(f"{name}(): functions with out=... arguments don't support automatic "
                           "differentiation, but one of the arguments requires grad.")
    from srcgrad.autograd.inplace import after_write, check_target

    check_target(out)
    value = result._data if isinstance(result, Tensor) else numpy.asarray(result)
    if out._data.shape != value.shape:  # torch resizes out
        out._data = numpy.empty(value.shape, out._data.dtype)
    out._data[...] = value
    out._vc.v += 1
    after_write(out, False)
    return out


# ---------------------------------------------------------------- sequences of tensors
def _tensors(name, tensors) -> list:
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{name}(): argument 'tensors' (position 1) must be tuple of Tensors, "
                        f"not {type(tensors).__name__}")
    if not tensors:
        raise ValueError(f"{name}(): expected a non-empty list of Tensors")
    return list(tensors)


def cat(tensors, dim=0, *, out=None):
    parts = _tensors("cat", tensors)
    if out is None and dim.__class__ is builtins.int and builtins.all(
            p.__class__ is Tensor for p in parts):
        # the concatenate row as NumPy's protocol would bind it (ops.bind: the count, then
        # the axis), without the binding: a third of the op's time at batch 8
        n = len(parts)
        return apply("concatenate", {"#arrays": n, "axis": dim}, (("#arrays", n), ("axis", dim)),
                     tuple(parts), "CatBackward0")
    return _finish("cat", numpy.concatenate(parts, axis=dim), out, parts)


concat = concatenate = cat


def stack(tensors, dim=0, *, out=None):
    parts = _tensors("stack", tensors)
    return _finish("stack", numpy.stack(parts, axis=dim), out, parts)


def hstack(tensors, *, out=None):
    return _finish("hstack", numpy.hstack(_tensors("hstack", tensors)), out, tensors)


def vstack(tensors, *, out=None):
    return _finish("vstack", numpy.vstack(_tensors("vstack", tensors)), out, tensors)


def where(condition, input=None, other=None, *, out=None):
    cond = condition._data if isinstance(condition, Tensor) else numpy.asarray(condition)
    if input is None and other is None:
        return torch_methods.nonzero(Tensor._make(cond), as_tuple=True)
    if cond.dtype != numpy.bool_:
        raise RuntimeError(f"where expected condition to be a boolean tensor, but got a tensor "
                           f"with dtype {cond.dtype.name.capitalize()}")
    return _finish("where", numpy.where(cond, input, other), out, (input, other))


def einsum(equation, *operands):
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    return numpy.einsum(equation, *operands)


# ---------------------------------------------------------------- through the methods
def _method(name, with_out=True):
    def fn(input, *args, out=None, **kwargs):
        result = getattr(input, name)(*args, **kwargs)
        return _finish(name, result, out, (input,) + args) if with_out else result

    fn.__name__ = name
    fn.__qualname__ = name
    return fn


_METHOD_FUNCTIONS = (
    "sqrt exp exp2 expm1 log log2 log10 log1p sin cos tan sinh cosh tanh asin acos atan asinh "
    "acosh atanh abs neg negative sign floor ceil trunc round reciprocal rsqrt square sigmoid "
    "relu sum mean prod amax amin all any var std cumsum cumprod clamp clip matmul mm bmm mv "
    "dot outer add sub mul div true_divide pow maximum minimum fmod remainder atan2 "
    "logsumexp gather index_select masked_fill masked_select sort argsort argmax argmin topk "
    "median var_mean std_mean flip roll tril triu norm reshape flatten squeeze unsqueeze permute "
    "transpose t narrow select split split_with_sizes chunk unbind movedim "
    "isnan isinf isfinite logical_not lt le gt ge eq ne scatter scatter_add index_add lerp "
    "addcmul addcdiv nonzero clone detach trace scatter_reduce"
).split()
_NO_OUT = {"split", "split_with_sizes", "chunk", "unbind", "reshape", "flatten", "squeeze",
           "unsqueeze", "permute", "transpose", "t", "narrow", "select", "detach", "movedim",
           "nonzero", "var_mean", "std_mean"}
_FUNCTIONS = {name: _method(name, name not in _NO_OUT) for name in _METHOD_FUNCTIONS}


def softmax(input, dim, dtype=None):
    return torch_methods.softmax(input, dim, dtype)


def log_softmax(input, dim, dtype=None):
    return torch_methods.log_softmax(input, dim, dtype)


def max(input, dim=None, keepdim=False, *, out=None):  # noqa: A001
    return _finish("max", input.max(dim, keepdim), out, (input, dim))


def min(input, dim=None, keepdim=False, *, out=None):  # noqa: A001
    return _finish("min", input.min(dim, keepdim), out, (input, dim))


def numel(input):
    return input.numel()


def randint(*args, size=None, dtype=None, requires_grad=False, device="cpu", generator=None):
    """torch.randint(low=0, high, size): integers in [low, high), int64 by default."""
    if size is None:
        *bounds, size = args
    else:
        bounds = list(args)
    low, high = (0, bounds[0]) if len(bounds) == 1 else bounds
    _check_device(device)
    values = _RNG[0].integers(low, high, size=_shape(tuple(size)))
    return _leaf(values.astype(numpy.int64 if dtype is None else dtype), requires_grad)


def randperm(n, *, dtype=None, requires_grad=False, device="cpu", generator=None):
    _check_device(device)
    return _leaf(_RNG[0].permutation(n).astype(numpy.int64 if dtype is None else dtype),
                 requires_grad)


_FUNCTIONS.update(softmax=softmax, log_softmax=log_softmax, max=max, min=min, numel=numel,
                  cat=cat, concat=cat, concatenate=cat, stack=stack, hstack=hstack,
                  vstack=vstack, where=where, einsum=einsum, randint=randint, randperm=randperm,
                  as_strided=_strided.as_strided, empty_strided=_strided.empty_strided)
globals().update({k: v for k, v in _FUNCTIONS.items() if k not in globals()})
__all__ = sorted(set(_FUNCTIONS) | set(DTYPES))
