"""Programs that write in place into what a custom Function saved, or that use
`ctx.mark_dirty` (Note [Saved values written in place] in srcgrad.frontend.versions).

Every function runs as plain NumPy too (`Function.apply` outside compiled code calls
`forward`), which is what the finite-difference checks differentiate.
"""

import numpy as np

from tests.corpus.functions import DirtyNotReturned, Function  # a class the eager tests use too


class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad * b, grad * a


class Exp(Function):  # the seed documents' example: saves its output
    @staticmethod
    def forward(ctx, x):
        result = np.exp(x)
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx, grad):
        (result,) = ctx.saved_tensors
        return grad * result


# ---------------------------------------------------------------- certainly written
def item_write(x, w):
    y = (x * 2.0).copy()
    z = Mul.apply(y, w)
    y[0] = 5.0
    return np.sum(z * y)


def view_write(x, w):
    y = np.zeros_like(x) + x
    y = y.copy()
    z = Mul.apply(y, w)
    tail = y[1:]
    tail *= 3.0
    return np.sum(z) + np.sum(y)


def base_of_saved_view_write(x, w):
    y = x.copy()
    head = y[:2]
    z = Mul.apply(head, w[:2])
    # y[3] does not overlap head: torch's version counter is per storage all the same
    y[3] = 0.0
    return np.sum(z) + np.sum(y)


def out_write(x, w):
    y = x.copy()
    z = Mul.apply(y, w)
    np.multiply(y, 2.0, out=y)
    return np.sum(z * y)


def known_array_augmented(x, w):
    y = np.ones_like(x)
    z = Mul.apply(y, w * x)
    y += x
    return np.sum(z * y)


def output_written(x):
    y = Exp.apply(x)
    y[1:] += 1.0
    return np.sum(y)


# ---------------------------------------------------------------- possibly written
def maybe_scalar_augmented(x, w):
    # y is an ndarray, or a NumPy scalar for a 0-d x: `y +=` writes or only rebinds
    y = x * 2.0
    z = Mul.apply(y, w)
    y += 1.0
    return np.sum(z * y)


def reshaped_then_written(x, w):
    y = x * 2.0  # keeps x's memory layout: reshape is a view of C-ordered x, a copy of F-ordered
    flat = y.reshape(-1)
    z = Mul.apply(flat, w.reshape(-1))
    y[0, 0] = 7.0
    return np.sum(z) + np.sum(y)


# ---------------------------------------------------------------- never written
def rebound_not_written(x, w):
    y = x * 2.0
    z = Mul.apply(y, w)
    y = y + 1.0
    return np.sum(z * y)


def copy_written(x, w):
    y = x * 2.0
    z = Mul.apply(y, w)
    y = y.copy()
    y[0] = 5.0
    return np.sum(z * y)


def other_array_written(x, w):
    y = x * 2.0
    z = Mul.apply(y, w)
    acc = np.zeros_like(x)
    acc[1:] = z[1:]
    return np.sum(acc * y)


# ---------------------------------------------------------------- mark_dirty
class Double(Function):  # torch_semantics §5 (c) 4: `x.mul_(2); ctx.mark_dirty(x); return x`
    @staticmethod
    def forward(ctx, x):
        x *= 2.0
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad * 2.0

    @staticmethod
    def jvp(ctx, x_t):
        return x_t * 2.0


class ScaleRows(Function):  # writes through a view of its input, saves its written output
    @staticmethod
    def forward(ctx, x, s):
        x[1:] *= s
        ctx.mark_dirty(x)
        ctx.save_for_backward(s, x)
        return x

    @staticmethod
    def backward(ctx, grad):
        s, out = ctx.saved_tensors
        grad_x = grad.copy()
        grad_x[1:] *= s
        return grad_x, np.sum(grad[1:] * out[1:]) / s


class WritesWithoutMark(Function):
    @staticmethod
    def forward(ctx, x):
        x[0] = 0.0
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


class SavedThenDirtied(Function):  # saves its input, then writes it: torch fails at backward
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        x *= 2.0
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 2.0 + 0.0 * x


def dirty(x):
    a = x * 1.0
    b = Double.apply(a)  # `a` is `b` now: both read 2x
    return np.sum(a * b) + np.sum(b ** 2)


def dirty_view_of_caller(x):
    a = x * 1.0
    b = Double.apply(a[1:])  # writes into a's tail
    return np.sum(a * x) + np.sum(b)


def dirty_scale_rows(x, s):
    a = x.copy()
    out = ScaleRows.apply(a, s)
    return np.sum(out * x) + np.sum(a ** 2)


def writes_without_mark(x):
    a = x * 1.0
    return np.sum(WritesWithoutMark.apply(a))


def dirty_not_returned(x):
    return np.sum(DirtyNotReturned.apply(x * 1.0))


def saved_then_dirtied(x):
    return np.sum(SavedThenDirtied.apply(x * 1.0))


# ---------------------------------------------------------------- inside if/loops
def loop_item_write(x, w):
    y = x.copy()
    total = 0.0
    for _ in range(3):
        z = Mul.apply(y, w)
        y[0] = 1.0
        total = total + np.sum(z)
    return total


def loop_maybe_scalar(x, w, n):
    y = x * 1.0
    total = 0.0
    for _ in range(n):
        z = Mul.apply(y, w)
        y += 1.0
        total = total + np.sum(z * y)
    return total


def loop_write_before_save(x, w, n):
    y = x * 1.0
    total = 0.0
    for _ in range(n):
        y += 1.0  # the next iteration writes what this one saved: not seen (the Note says)
        z = Mul.apply(y, w)
        total = total + np.sum(z * y)
    return total
