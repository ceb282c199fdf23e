"""Programs of a new user's first hour (tests/test_newcomer_errors.py): each meets an
error or a warning that must name the user's file and line (issue 31)."""

import numpy as np

from srcgrad.autograd import Function


def warns(x):
    y = np.sqrt(x)  # negative entries: NumPy's "invalid value encountered in sqrt"
    return np.sum(y * 0.0 + x)


def two(x, y):
    return np.sum(np.sin(x) * y)


def vec(x):
    return np.sin(x)


def double(x):
    return x * 2


class Model:
    def __init__(self):
        self.w = 0.5

    def loss(self, x):
        return np.sum(np.sin(x) * self.w)


def rounds(x, T, dt):
    n = round(T / dt)
    return np.sum(x) * n


def copies_dict(x, P):
    Q = dict(P)
    return np.sum(x * Q["a"])


class Cube(Function):  # a backward and no jvp
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x ** 2 * g


def cube_sum(x):
    return np.sum(Cube.apply(x))


def refused(x):
    return np.sum(np.sin(x) * round(np.sum(x)))
