"""One transform called from several threads at once, with arguments of different shapes
(Note [One compile at a time] in srcgrad.pipeline.modules, Note [Guards another thread
may be running] in srcgrad.api): every result is the arithmetic's, in the process and
from the disk cache afterwards. The interpreter switches threads every microsecond here,
so compiles and dispatches interleave as finely as they can."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.pipeline import modules
from tests.conftest import assert_close, numeric_grad


def mean_of(x):
    return np.mean(np.sin(x) * x)  # its variants bake in 1/n: a wrong shape's is wrong


def exact(x):
    return (np.sin(x) + x * np.cos(x)) / x.size


SHAPES = [(3,), (4,), (2, 3), (5,)]


@pytest.fixture
def fine_thread_switches():
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)


def _in_threads(call, n_threads=4, calls=60):
    """Each thread calls `call(x)` on the shapes in turn, starting at its own shape;
    returns the (shape, result) pairs and the errors."""
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(s) for s in SHAPES]
    start, results, errors = threading.Barrier(n_threads), [], []

    def work(k):
        start.wait()
        for i in range(calls):
            x = xs[(i + k) % len(xs)]
            try:
                results.append((x, call(x)))
            except Exception as err:  # noqa: BLE001 - reported below
                errors.append(repr(err))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return xs, results, errors


@pytest.mark.parametrize("transform", ["grad", "vjp", "jvp"])
def test_first_calls_from_several_threads(transform, fine_thread_switches):
    for _round in range(3):  # each round compiles every variant anew, threads racing
        sg.cache_clear()
        g = sg.grad(mean_of)
        call = {"grad": g,
                "vjp": lambda x: sg.vjp(mean_of, x)[1](1.0)[0],
                "jvp": lambda x: sg.jvp(mean_of, (x,), (np.ones_like(x),))[1]}[transform]
        xs, results, errors = _in_threads(call)
        assert not errors, errors[:3]
        for x, got in results:
            want = exact(x) if transform != "jvp" else np.sum(exact(x))
            assert_close(got, want)
        modules.clear()  # this process's modules: the next ones come from the disk cache
        for x in xs:
            assert_close(sg.grad(mean_of)(x), exact(x))
    assert_close(sg.grad(mean_of)(xs[0]), numeric_grad(mean_of, [xs[0]], 0))


def test_dispatch_while_other_threads_retarget(fine_thread_switches):
    """Every variant compiled: each call of a shape other than the last retargets the
    guards while other threads are inside them (Note [Guards another thread may be
    running]); a thread passing one shape's guards must call that shape's variant."""
    g = sg.grad(mean_of)
    rng = np.random.default_rng(1)
    for s in SHAPES:
        g(rng.standard_normal(s))
    xs, results, errors = _in_threads(g, calls=2000)
    assert not errors, errors[:3]
    wrong = [x.shape for x, got in results if got.shape != x.shape or not np.allclose(got, exact(x))]
    assert not wrong, f"{len(wrong)} of {len(results)} calls ran another shape's variant"
