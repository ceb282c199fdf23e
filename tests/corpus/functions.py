"""Custom Functions and functions calling them (the seed documents' examples, in NumPy).

They live in a module file so `inspect.getsource` reads them as a user's file would be
read: tests/autograd/test_function.py runs them eagerly and
tests/test_custom_function_compiled.py compiles them.
"""

import numpy as np

from srcgrad.autograd import Function
from srcgrad.autograd.function import once_differentiable


class Func(Function):
    """save_for_backward(x, y, w, out) with an intermediate w, and ctx.z (not an array)."""

    @staticmethod
    def forward(ctx, x, y, z):
        w = x * z
        out = x * y + y * z + w * y
        ctx.save_for_backward(x, y, w, out)
        ctx.z = z  # z is not a tensor
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        x, y, w, out = ctx.saved_tensors
        z = ctx.z
        gx = grad_out * (y + y * z)
        gy = grad_out * (x + z + w)
        gz = None
        return gx, gy, gz


class FuncTwice(Function):
    """Func without @once_differentiable: saves the intermediate w and is differentiated twice."""

    @staticmethod
    def forward(ctx, x, y, z):
        w = x * z
        out = x * y + y * z + w * y
        ctx.save_for_backward(x, y, w, out)
        ctx.z = z
        return out

    @staticmethod
    def backward(ctx, grad_out):
        x, y, w, out = ctx.saved_tensors
        z = ctx.z
        return grad_out * (y + y * z), grad_out * (x + z + w), None


class Exp(Function):
    @staticmethod
    def forward(ctx, i):
        result = np.exp(i)
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx, grad_output):
        result, = ctx.saved_tensors
        return grad_output * result


class Sort(Function):
    """Two outputs, the indices marked non-differentiable (backward still gets a slot)."""

    @staticmethod
    def forward(ctx, x):
        idx = np.argsort(x)
        ordered = np.take_along_axis(x, idx, axis=-1)
        ctx.mark_non_differentiable(idx)
        ctx.save_for_backward(x, idx)
        return ordered, idx

    @staticmethod
    @once_differentiable
    def backward(ctx, g1, g2):  # still need to accept g2
        x, idx = ctx.saved_tensors
        return np.take_along_axis(g1, np.argsort(idx), axis=-1)


class SimpleFunc(Function):
    @staticmethod
    def forward(ctx, x):
        return x.copy(), x.copy()

    @staticmethod
    @once_differentiable
    def backward(ctx, g1, g2):
        return g1 + g2  # No check for None necessary


class MaterializeOff(Function):
    """set_materialize_grads(False): an output that receives no gradient gives None."""

    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(x)
        return x.copy(), x.copy()

    @staticmethod
    @once_differentiable
    def backward(ctx, g1, g2):
        x, = ctx.saved_tensors
        grad_input = np.zeros_like(x)
        if g1 is not None:  # We must check for None now
            grad_input += g1
        if g2 is not None:
            grad_input += g2
        return grad_input


class MulXYZ(Function):
    """save_for_forward and jvp, with `vjp` as the alias of backward."""

    @staticmethod
    def forward(ctx, x, y, z):
        ctx.save_for_backward(x, y)
        ctx.save_for_forward(x, y)
        ctx.z = z
        return x * y * z

    @staticmethod
    def jvp(ctx, x_t, y_t, _):
        x, y = ctx.saved_tensors
        z = ctx.z
        return z * (y * x_t + x * y_t)

    @staticmethod
    def vjp(ctx, grad_out):
        x, y = ctx.saved_tensors
        z = ctx.z
        return z * grad_out * y, z * grad_out * x, None


class Sq(Function):
    """Differentiable backward: double backward works (torch: g=6, gg=2 at x=3)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 2

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 2 * x * g


class SqOnce(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 2

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 2 * x * g


class PowSetup(Function):
    """setup_context style, forward with a default argument."""

    @staticmethod
    def forward(x, k=2):
        return x ** k

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, k = inputs
        ctx.save_for_backward(x)
        ctx.k = k

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * ctx.k * x ** (ctx.k - 1), None


class MulConst(Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.k = k
        return x * k

    @staticmethod
    def backward(ctx, g):
        return g * ctx.k, None


class NeedsGrad(Function):
    """Uses ctx.needs_input_grad to compute only what is asked for."""

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        gx = g * y if ctx.needs_input_grad[0] else None
        gy = g * x if ctx.needs_input_grad[1] else None
        return gx, gy


class TooFew(Function):
    @staticmethod
    def forward(ctx, x, y):
        return x * y

    @staticmethod
    def backward(ctx, g):
        return g


class ExtraNone(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2.0

    @staticmethod
    def backward(ctx, g):
        return g * 2.0, None, None


class ExtraValue(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2.0

    @staticmethod
    def backward(ctx, g):
        return g * 2.0, g


class GradForNonTensor(Function):
    @staticmethod
    def forward(ctx, x, k):
        return x * k

    @staticmethod
    def backward(ctx, g):
        return g * 2.0, g


class WrongShape(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2.0

    @staticmethod
    def backward(ctx, g):
        return np.ones(10) * np.sum(g)


class BroadcastGrad(Function):
    """Returns a (1, n) gradient for an (n,) input: accepted and summed (torch's rule)."""

    @staticmethod
    def forward(ctx, x):
        return x * 2.0

    @staticmethod
    def backward(ctx, g):
        return np.reshape(g * 2.0, (1, -1))


class Dirty(Function):
    @staticmethod
    def forward(ctx, x):
        x *= 2
        ctx.mark_dirty(x)
        return x

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        return grad_output * 2


class DirtyNotReturned(Function):
    @staticmethod
    def forward(ctx, x):
        x *= 2
        ctx.mark_dirty(x)
        return x.copy()

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * 2


class NoBackward(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2.0


class SaveInt(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x, 3)
        return x

    @staticmethod
    def backward(ctx, g):
        return g


class Cube(Function):
    """Saves its input and an intermediate (x**2); the backward is differentiable."""

    @staticmethod
    def forward(ctx, x):
        x2 = x * x
        ctx.save_for_backward(x, x2)
        return x2 * x

    @staticmethod
    def backward(ctx, g):
        x, x2 = ctx.saved_tensors
        return 3.0 * x2 * g


class StraightThrough(Function):
    """A straight-through estimator: forward rounds, backward passes the gradient on."""

    @staticmethod
    def forward(ctx, x):
        return np.round(x)

    @staticmethod
    def backward(ctx, g):
        return g


# ---------------------------------------------------------------- functions calling them

def f_func(a, b):
    return np.sum(Func.apply(a, b, 4))


def f_func_twice(a, b):
    return np.sum(FuncTwice.apply(a, b, 4) ** 2)


def f_exp(x):
    return np.sum(Exp.apply(x) * x)


def f_sort(x, w):
    ordered, idx = Sort.apply(x)
    return np.sum(ordered * w)


def f_simple(x):
    a, b = SimpleFunc.apply(x)
    return np.sum(a * 3.0)


def f_materialize_off(x):
    a, b = MaterializeOff.apply(x)
    return np.sum(a * 3.0)


def f_mulxyz(a, b):
    return MulXYZ.apply(a, b, 4.0)


def f_sq(x):
    return np.sum(Sq.apply(x))


def f_sq_once(x):
    return np.sum(SqOnce.apply(x))


def f_pow(x):
    return np.sum(PowSetup.apply(x) + PowSetup.apply(x, k=3))


def f_mulconst(x):
    return np.sum(MulConst.apply(x, k=3.0))


def f_needs(x, y):
    return np.sum(NeedsGrad.apply(x, y))


def f_too_few(x, y):
    return np.sum(TooFew.apply(x, y))


def f_extra_none(x):
    return np.sum(ExtraNone.apply(x))


def f_extra_value(x):
    return np.sum(ExtraValue.apply(x))


def f_grad_for_non_tensor(x):
    return np.sum(GradForNonTensor.apply(x, 3.0))


def f_wrong_shape(x):
    return np.sum(WrongShape.apply(x))


def f_broadcast_grad(x):
    return np.sum(BroadcastGrad.apply(x) * x)


def f_dirty(x):
    return np.sum(Dirty.apply(x))


def f_no_backward(x):
    return np.sum(NoBackward.apply(x))


def f_save_int(x):
    return np.sum(SaveInt.apply(x))


def f_cube(x):
    return np.sum(Cube.apply(x))


def f_straight_through(x):
    return np.sum(StraightThrough.apply(x) ** 2)


def f_two_calls(x, y):
    """Two Functions in sequence (pack/unpack order under hooks)."""
    e = Exp.apply(x)
    return Func.apply(e, y, 2)


def f_two_calls_sum(x, y):
    return np.sum(f_two_calls(x, y))


class Mul(Function):
    """a * b, saving both for backward and for forward."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        ctx.save_for_forward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad * b, grad * a

    @staticmethod
    def jvp(ctx, a_t, b_t):
        a, b = ctx.saved_tensors
        return a_t * b + a * b_t


def f_mul(a, b):
    return np.sum(np.sin(Mul.apply(a, b)))
