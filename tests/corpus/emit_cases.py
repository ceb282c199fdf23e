"""Functions of records and of a self-read write (tests/test_emit_parity.py): what sg.grad
compiles and `srcgrad emit` once refused or emitted wrongly (issue 31). Imports NumPy
only: the parity test's subprocess, where srcgrad is not importable, unpickles these
classes."""

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np


@dataclass
class Params:
    w: np.ndarray
    b: np.ndarray
    scale: int = 2  # configuration: a static field, carried unchanged


class Pair(NamedTuple):
    a: np.ndarray
    b: np.ndarray


def dataclass_loss(p, x):
    return np.sum(np.sin(p.w * x + p.b)) * p.scale


def namedtuple_loss(t, x):
    return np.sum(t.a * x * t.b)


def nested_loss(params, x):
    (w1, b1), layers = params["first"], params["rest"]
    h = np.tanh(x @ w1 + b1)
    for w in layers:
        h = np.tanh(h @ w)
    return np.sum(h ** 2)


def self_read_write(u):
    u = u.copy()
    u[0] = u[1]  # a 1-D u: u[1] is a scalar, not a view of u
    return np.sum(u * u)
