"""Programs srcgrad must refuse, each with a CompileError at the right line."""

import numpy as np


def uses_try(x):
    try:
        return np.sum(np.exp(x))
    except ValueError:
        return np.sum(x)


def uses_unknown_numpy(x):
    return np.sum(np.fft.fft(x).real)


def uses_undefined_name(x):
    return np.sum(x * undefined_thing)  # noqa: F821


def uses_generator(x):
    yield np.sum(x)


def vector_output(x):
    return x * 2.0


def returns_tuple(x):
    return np.sum(x), np.sum(x * x)


def calls_opaque(x):
    return np.sum(np.vectorize(lambda v: v * 2.0)(x))
