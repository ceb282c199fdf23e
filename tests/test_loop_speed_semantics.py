"""Loops at compiler speed keep their meaning (issue 15).

* `break` and `return` leave the forward loop at once, and the adjoint loop runs the
  iterations that ran: a Newton iteration bounded by 100,000 steps that converges in
  a few stops there (the loop's own `print` counts the iterations it ran), and its
  gradient matches central differences.

Every gradient here is checked against central differences (tests.conftest).
"""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from tests.conftest import assert_close, numeric_grad


# ---------------------------------------------------------------------- break / return
def newton_sqrt(a, n):
    """sqrt(a) by Newton's method: leaves the loop when the step is tiny."""
    x = a * 1.0
    for _i in range(n):
        dx = (x * x - a) / (2.0 * x)
        x = x - dx
        if np.max(np.abs(dx)) < 1e-12:
            break
    return np.sum(x * x * x)


def newton_counting(a, n):
    x = a * 1.0
    for _i in range(n):
        print("step")
        dx = (x * x - a) / (2.0 * x)
        x = x - dx
        if np.max(np.abs(dx)) < 1e-12:
            break
    return np.sum(x)


def newton_return(a, n):
    """`return` inside the loop: also leaves it at once."""
    x = a * 1.0
    for _i in range(n):
        print("step")
        dx = (x * x - a) / (2.0 * x)
        x = x - dx
        if np.max(np.abs(dx)) < 1e-12:
            return np.sum(x * a)
    return np.sum(x)


def strided_break(x, w):
    """A negative step from a non-zero start: the adjoint loop's indices are the ones that ran."""
    acc = x * 0.0
    for i in range(9, 0, -2):
        acc = acc + w[i] * np.sin(x * i)
        if np.sum(acc) > 1.5:
            break
    return np.sum(acc * acc)


def nested_break(x, w):
    """A break in the inner loop leaves only that loop; the outer one runs on."""
    h = x * 1.0
    for j in range(3):
        for i in range(10):
            h = np.tanh(h * w[i] + 0.1 * j)
            if np.sum(h) < 0.2 * i:
                break
        h = h + 0.5
    return np.sum(h * h)


def while_break(x):
    s = x * 0.0
    k = 0
    while True:
        s = s + np.cos(x * k)
        k = k + 1
        if k >= 7:
            break
    return np.sum(s * x)


def float_newton(a, n):
    """On Python floats (the math variant)."""
    x = a
    for _i in range(n):
        dx = (x * x - a) / (2.0 * x)
        x = x - dx
        if abs(dx) < 1e-12:
            break
    return x * x * x


RNG = np.random.default_rng(15)
CASES = [
    ("newton", newton_sqrt, lambda: [np.array([2.0, 3.0, 0.5]), 100_000], (0,)),
    ("newton-return", newton_return, lambda: [np.array([2.0, 3.0]), 100_000], (0,)),
    ("strided", strided_break, lambda: [np.array([0.3, 0.2]), RNG.uniform(0.5, 1.0, 10)], (0, 1)),
    ("nested", nested_break, lambda: [np.array([0.6, 0.9]), RNG.uniform(0.5, 1.5, 10)], (0, 1)),
    ("while-break", while_break, lambda: [np.array([0.4, 1.3])], (0,)),
]


@pytest.mark.parametrize("name,f,make,wrt", CASES, ids=[c[0] for c in CASES])
def test_breaking_loops_reverse_mode(name, f, make, wrt, capsys):
    args = make()
    grads = sg.grad(f, wrt=wrt)(*args)
    capsys.readouterr()
    for i, g in zip(wrt, grads):
        assert_close(g, numeric_grad(lambda *a: f(*a), args, i), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name,f,make,wrt", CASES, ids=[c[0] for c in CASES])
def test_breaking_loops_forward_mode(name, f, make, wrt, capsys):
    args = make()
    tangents = [np.linspace(0.5, 1.5, np.size(a)).reshape(np.shape(a)) if i in wrt
                else np.zeros_like(a) if isinstance(a, np.ndarray) else 0 for i, a in enumerate(args)]
    _, out_t = sg.jvp(f, args, tangents)
    capsys.readouterr()
    expected = sum(np.sum(numeric_grad(f, args, i) * tangents[i]) for i in wrt)
    assert_close(out_t, expected, rtol=1e-5, atol=1e-7)


def test_break_leaves_the_forward_loop_at_once(capsys):
    """Bound 100,000; Newton converges in a few steps: the loop body ran only those."""
    a = np.array([2.0, 3.0])
    g = sg.grad(newton_counting)(a, 100_000)
    steps = capsys.readouterr().out.count("step")
    assert 3 <= steps <= 10
    assert_close(g, 0.5 / np.sqrt(a))


def test_return_leaves_the_forward_loop_at_once(capsys):
    a = np.array([2.0, 3.0])
    value, g = sg.value_and_grad(newton_return)(a, 100_000)
    steps = capsys.readouterr().out.count("step")
    assert 3 <= steps <= 10
    assert_close(value, np.sum(np.sqrt(a) * a))
    assert_close(g, 1.5 * np.sqrt(a))


def test_break_on_python_floats():
    g = sg.grad(float_newton)(2.0, 100_000)
    assert_close(g, numeric_grad(float_newton, [2.0, 100_000], 0), rtol=1e-6)


def test_vjp_of_a_breaking_loop_runs_twice():
    """sg.vjp's backward pops copies of the tapes: vjp_fn twice gives the same rows."""
    a = np.array([2.0, 3.0, 5.0])
    out, vjp_fn = sg.vjp(lambda v: newton_sqrt(v, 100_000), a)
    first, = vjp_fn(1.0)
    second, = vjp_fn(2.0)
    assert_close(first, 1.5 * np.sqrt(a))
    assert_close(second, 3.0 * np.sqrt(a))


def test_generated_loop_leaves_by_break():
    """The forward loop leaves with Python's `break`; the adjoint loop's range is the
    number of iterations the tape recorded, not the bound."""
    g = sg.grad(newton_counting)
    g(np.array([2.0]), 100_000)
    source = sg.source(g)
    assert "        break" in source
    assert "range(_tape_len)[::-1]" in source and "range(n)[::-1]" not in source


# ---------------------------------------------------------------------- sums in adjoint loops
def rnn(Wx, Wh, b, xs, y):
    h = np.zeros((xs.shape[1], Wh.shape[0]))
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] @ Wx + h @ Wh + b)
    return np.mean((h - y) ** 2)


def two_rows(xs, w):
    """xs[t] and xs[t - 1] in one step: two contributions to one row sum."""
    s = w * 0.0
    for t in range(1, xs.shape[0]):
        s = np.sin(s + xs[t] * w - xs[t - 1])
    return np.sum(s * s)


def two_loops(xs, w):
    """Two adjoint loops summing into gradients of the same xs."""
    a = w * 1.0
    for t in range(xs.shape[0]):
        a = np.tanh(a * xs[t])
    c = w * 0.5
    for t in range(xs.shape[0]):
        c = c + np.cos(xs[t]) * a
    return np.sum(c)


def nested_rows(xs, w):
    """An adjoint loop inside an adjoint loop, each with its sums."""
    h = w * 1.0
    for _k in range(2):
        for t in range(xs.shape[0]):
            h = np.tanh(h * w + xs[t])
        h = h * 0.9
    return np.sum(h * h)


def _rnn_args(T=6, dtype=np.float64):
    rng = np.random.default_rng(4)
    return [a.astype(dtype) for a in (rng.standard_normal((3, 5)) * 0.4, rng.standard_normal((5, 5)) * 0.3,
                                      rng.standard_normal(5) * 0.1, rng.standard_normal((T, 2, 3)),
                                      rng.standard_normal((2, 5)))]


SUMS = [
    ("rnn", rnn, _rnn_args, (0, 1, 2, 3)),
    ("two-rows", two_rows, lambda: [np.random.default_rng(5).standard_normal((6, 4)),
                                    np.random.default_rng(6).standard_normal(4)], (0, 1)),
    ("two-loops", two_loops, lambda: [np.random.default_rng(7).standard_normal((5, 3)),
                                      np.random.default_rng(8).standard_normal(3)], (0, 1)),
    ("nested", nested_rows, lambda: [np.random.default_rng(9).standard_normal((4, 3)) * 0.5,
                                     np.random.default_rng(10).standard_normal(3)], (0, 1)),
]


@pytest.mark.parametrize("name,f,make,wrt", SUMS, ids=[c[0] for c in SUMS])
def test_sums_in_adjoint_loops(name, f, make, wrt):
    args = make()
    g = sg.grad(f, wrt=wrt)
    for _ in range(2):  # the second call reuses the variant: its buffers are fresh per call
        grads = g(*args)
        for i, gi in zip(wrt, grads):
            assert_close(gi, numeric_grad(f, args, i), rtol=1e-5, atol=1e-7)


def test_rows_of_xs_summed_in_place():
    """The cotangent of xs[t] is added into one row of one buffer: no full-size
    scatter per step (O(T), not O(T^2)), and W's sums are `+=`."""
    g = sg.grad(rnn, wrt=(0, 3))
    args = _rnn_args()
    gWx, gxs = g(*args)
    source = sg.source(g)
    assert "scatter_index" not in source
    assert "[t_1] += " in source and "_sum += " in source
    assert_close(gxs, numeric_grad(rnn, args, 3), rtol=1e-5, atol=1e-7)


def branchy_rows(xs, w):
    """A reduction inside a branch inside a loop, on a value known to be an array."""
    s = w * 0.0
    for t in range(xs.shape[0]):
        if t % 2 == 0:
            s = s + np.sum(np.tanh(xs[t] * w), axis=0)
        else:
            s = s * np.max(np.cos(xs[t]), axis=0)
    return np.sum(s * s)


@pytest.mark.parametrize("f,args,wrt", [
    (rnn, _rnn_args(), (0, 1, 2)),
    (branchy_rows, [np.random.default_rng(11).standard_normal((5, 3, 4)),
                    np.random.default_rng(12).standard_normal(4)], (0, 1)),
])
def test_loop_bodies_call_array_methods(f, args, wrt):
    """A variant writes `g.sum(axis=0)` for an array inside loop and branch bodies too, as
    in straight-line code (NumPy's `np.sum` wrapper costs about a microsecond more a call:
    50 of them were 5% of the RNN's gradient)."""
    g = sg.grad(f, wrt=wrt)
    grads = g(*args)
    source = sg.source(g)
    body = source[source.index("for "):]
    assert "xp.sum(" not in body and "xp.max(" not in body and ".sum(axis=0)" in body, body
    for i, gi in zip(wrt, grads):
        assert_close(gi, numeric_grad(f, args, i), rtol=1e-5, atol=1e-7)


def test_sums_in_place_with_float32():
    """float32 arguments (a cotangent may be float64 where the buffer is float32: then
    the sum is NumPy's, not in place)."""
    args = _rnn_args(dtype=np.float32)
    grads = sg.grad(rnn, wrt=(0, 3))(*args)
    expected = sg.grad(rnn, wrt=(0, 3))(*[a.astype(np.float64) for a in args])
    for a, e in zip(grads, expected):
        assert_close(a, e, rtol=1e-3, atol=1e-5)


# ---------------------------------------------------------------------- dead carried values
def rnn_summed_loss(Wh, xs):
    """A loss summed in the loop: the gradient never reads its value."""
    h = xs[0] * 0.0
    loss = 0.0
    for t in range(xs.shape[0]):
        h = np.tanh(h @ Wh + xs[t])
        loss = loss + np.sum(h * h)
    return loss


def test_a_summed_loss_is_not_computed_by_grad():
    rng = np.random.default_rng(11)
    args = [rng.standard_normal((4, 4)) * 0.4, rng.standard_normal((5, 3, 4))]
    g = sg.grad(rnn_summed_loss, wrt=(0, 1))
    for i, gi in zip((0, 1), g(*args)):
        assert_close(gi, numeric_grad(rnn_summed_loss, args, i), rtol=1e-5, atol=1e-7)
    forward = sg.source(g).split("# grad of:")[0]
    assert "loss" not in forward.split("for t in")[1]  # the forward loop carries h only
    value, _ = sg.value_and_grad(rnn_summed_loss, wrt=(0, 1))(*args)
    assert_close(value, rnn_summed_loss(*args))


# ---------------------------------------------------------------------- scalar code
def euler(k, v0, dt):
    """A pendulum, explicit Euler; `t = i * dt` from the loop index."""
    x = 1.0
    v = v0
    for i in range(50):
        t = i * dt
        a = -k * np.sin(x) - 0.1 * np.cos(x) * v + 0.01 * np.sin(t)
        x = x + dt * v
        v = v + dt * a
    return x * x + v * v


@pytest.mark.parametrize("kind", [float, np.float64])
def test_scalar_ode_on_python_floats(kind):
    """np.float64 arguments run the Python-float code (`math`, no NumPy call), as
    Python floats do; `t = i * dt` stays a Python float."""
    args = [kind(2.0), kind(0.3), kind(0.01)]
    g = sg.grad(euler, wrt=(0, 1, 2))
    grads = g(*args)
    for i, gi in enumerate(grads):
        assert_close(gi, numeric_grad(euler, [float(a) for a in args], i), rtol=1e-5, atol=1e-8)
    source = sg.source(g)
    assert "xp." not in source and "math.sin(" in source


def test_np_float64_at_a_singular_point_matches_arrays():
    """A float64 argument takes NumPy's values where Python would raise (Note [Scalar code])."""
    def ratio(x, y):
        return x / y
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        value, grads = sg.value_and_grad(ratio, wrt=(0, 1))(np.float64(1.0), np.float64(0.0))
        expected, arrays = sg.value_and_grad(ratio, wrt=(0, 1))(np.array(1.0), np.array(0.0))
    assert value == expected
    np.testing.assert_array_equal(np.asarray(grads, dtype=float), np.asarray(arrays, dtype=float))


def powers_of_the_index(x):
    """`2.0 ** i` and `1 / (i + 1)` on the loop index: Python's arithmetic on ints."""
    s = x * 0.0
    for i in range(-3, 3):
        s = s + np.sin(x) * 2 ** i + x / (i + 4)
    return s * s


@pytest.mark.parametrize("kind", [float, np.float64, np.array])
def test_loop_index_arithmetic_is_pythons(kind):
    x = kind(0.7)
    g = sg.grad(powers_of_the_index)(x)
    assert_close(g, numeric_grad(powers_of_the_index, [0.7], 0), rtol=1e-6)


def test_vjp_fn_sums_in_place_and_runs_twice():
    """sg.vjp's backward sums in place too; each vjp_fn call starts its own buffers."""
    args = _rnn_args()
    out, vjp_fn = sg.vjp(rnn, *args)
    first = vjp_fn(1.0)
    second = vjp_fn(2.0)
    for i in (0, 1, 2, 3):
        expected = numeric_grad(rnn, args, i)
        assert_close(first[i], expected, rtol=1e-5, atol=1e-7)
        assert_close(second[i], 2.0 * expected, rtol=1e-5, atol=1e-7)
    assert "scatter_index" not in sg.source(vjp_fn)


def _zeros_beside_a_loop(x0, x2):
    y1 = np.tile(x2.ravel(), 6).reshape((4, 3, 2))
    for i in range(4):
        y1[i] = np.reshape(x0.reshape((6, 1)), (3, 2))
    _unused = np.zeros_like(x0)  # CSE merges the adjoint sum's start with this forward value
    return np.sum(y1.ravel()[:3] ** 2)


def test_a_forward_zeros_merged_with_a_sum_start_is_not_summed_into():
    """The adjoint loop sums into its start only when that is a backward op: a forward
    `zeros_like` merged with it is one of sg.vjp's residuals, which every vjp_fn call
    reads (fuzz seed 50848: the second call returned first + second gradient)."""
    rng = np.random.default_rng(3)
    args = [rng.normal(size=(3, 2)), rng.normal(size=(4, 1))]
    _, vjp_fn = sg.vjp(_zeros_beside_a_loop, *args)
    first, second = vjp_fn(1.0), vjp_fn(2.0)
    for i in (0, 1):
        expected = numeric_grad(_zeros_beside_a_loop, args, i)
        assert_close(first[i], expected, rtol=1e-5, atol=1e-7)
        assert_close(second[i], 2.0 * expected, rtol=1e-5, atol=1e-7)


def _clipped_square(x):
    return (np.clip(np.zeros_like(x), -1.0, 1.0) + 2.0) * x * x


@pytest.mark.parametrize("x", [np.float64(0.3), np.float64(-0.7), 0.3])
def test_np_float64_values_take_no_array_methods(x):
    """A variant for an np.float64 argument computes on Python floats (scalars pass), so
    a call the shape probe made a method (`v.clip(a, b)`, seen on an ndarray) must be
    `xp.clip(v, a, b)` again (fuzz seed 81498: 'float' object has no attribute 'clip')."""
    g = sg.grad(_clipped_square)
    assert_close(g(np.array(float(x))), numeric_grad(_clipped_square, [np.array(float(x))], 0))
    assert_close(g(x), numeric_grad(_clipped_square, [np.array(float(x))], 0))


def _loop_carrying_a_float_unchanged(a0, a1, scale=0.5):
    for _ in range(4):
        _items = [np.maximum(a0, a0)]
        a1 = a1
    return np.hstack([np.ones((2,)), a1 * np.ones((2,))])[-4]


def _calls_the_loops_gradient(x):
    return np.sum((sg.grad(_loop_carrying_a_float_unchanged)(0.5, 0.25, scale=3.0) + 1.0) * x * x)


def test_an_adjoint_loop_whose_sum_starts_as_a_folded_constant():
    """Inside compiled code the inner gradient's arguments are constants, so an adjoint
    loop's sum can start as a folded array: no buffer to sum into, and no crash (fuzz seed
    61013: 'unhashable type: numpy.ndarray' in the in-place sums)."""
    x = np.array([0.3, -0.5])
    assert_close(sg.grad(_calls_the_loops_gradient)(x), numeric_grad(_calls_the_loops_gradient, [x], 0))


def _subscripts_a_scalar(x):
    y = x * 2.0 + 1.0
    return y[()] * np.sin(x[()])


def test_np_float64_values_keep_numpy_scalar_syntax():
    """An np.float64 argument computes as a Python float in its variant, but `x[()]` on it
    (or on arithmetic of it) is NumPy's scalar indexing: the variant hands NumPy a NumPy
    value there (F3 found "'float' object is not subscriptable"). On a Python float
    argument Python itself raises, and so does the compiled code."""
    for x in (np.float64(0.5), np.float64(-1.25)):
        expected = numeric_grad(_subscripts_a_scalar, [np.array(float(x))], 0)
        assert_close(sg.grad(_subscripts_a_scalar)(x), expected)
        assert_close(sg.grad(_subscripts_a_scalar)(np.array(float(x))), expected)
    with pytest.raises(TypeError, match="not subscriptable"):
        sg.grad(_subscripts_a_scalar)(0.5)
