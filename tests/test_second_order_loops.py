"""Second derivatives through loops (issue 15): forward over reverse through the generated
forward loop and its adjoint loop (Note [Tangents on tapes] in srcgrad.passes.jvp_control,
Note [Transforms of loop gradients] in srcgrad.pipeline.graphs).

Every expected value is arithmetic: central differences (float64) of a hand-written NumPy
gradient where one is short, else of the first-order gradient, which tests of their own
check against central differences of the function."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from tests.conftest import assert_close, numeric_grad
from tests.corpus.functions import MulXYZ


def rnn(x, W):
    h = x
    for _t in range(4):
        h = np.tanh(W @ h + 0.1 * x)
    return np.sum(h * h)


def rnn_hand_grad(x, W):
    """d rnn / d x by hand (BPTT), independent of srcgrad."""
    hs = [x]
    for _ in range(4):
        hs.append(np.tanh(W @ hs[-1] + 0.1 * x))
    g_h, g_x = 2 * hs[-1], np.zeros_like(x)
    for t in range(4, 0, -1):
        g_pre = g_h * (1 - hs[t] ** 2)
        g_x = g_x + 0.1 * g_pre
        g_h = W.T @ g_pre
    return g_x + g_h


def shrink(x):
    """A `while` loop: its trip count depends on the data (constant near the point)."""
    h = x
    while np.sum(h * h) > 0.05:
        h = np.sin(h) * 0.8
    return np.sum(h * h * h) + np.sum(h * x)


def newton_break(x):
    """A loop that leaves by `break`."""
    h = x
    for _t in range(20):
        h = np.tanh(h * 1.2) + 0.05 * x
        if np.sum(h * h) < 0.02:
            break
    return np.sum(np.exp(h))


def indexed(x, xs):
    """A loop-carried array and a read indexed by the loop counter."""
    h = x
    for t in range(3):
        h = np.sin(h * xs[t]) + h
    return np.sum(h * h)


def nested(x):
    h = x
    for _i in range(2):
        for _j in range(3):
            h = np.cos(h) * 0.9 + 0.1 * x
    return np.sum(h ** 3)


def nested_rnn(x, W):
    """An inner loop whose carried value starts afresh each outer step, reading W."""
    h = x
    for _i in range(3):
        s = h * 0.0
        for j in range(2):
            s = s + np.tanh(W @ h * (j + 1.0))
        h = 0.5 * h + 0.3 * s
    return np.sum(h * h * x)


def nested_while(x):
    h = x
    for _i in range(2):
        while np.sum(h * h) > 0.3:
            h = np.sin(h) * 0.9
        h = h + 0.2 * x
    return np.sum(h ** 3)


def branchy(x, w):
    """A branch inside the loop (its backward reads values the forward branch exports)."""
    h = x
    for _t in range(3):
        if np.sum(h) > 0:
            h = np.tanh(h * w)
        else:
            h = np.sin(h) * w + h * h
    return np.sum(h ** 2) + np.sum(w * h)


def rows(x, xs):
    """A loop over the rows of an array."""
    h = x
    for r in xs:
        h = np.tanh(h * r) + 0.5 * h
    return np.sum(h * h)


def while_in_branch(x):
    """A loop inside an `if`: its tape leaves the branch as an exported value."""
    h = x
    if np.sum(x) > 0:
        while np.sum(h * h) > 0.2:
            h = np.sin(h) * 0.8
    else:
        h = h * 2.0
    return np.sum(h ** 3) + np.sum(h * x)


def scalar_loop(x):
    h = x
    for _t in range(4):
        h = np.sin(h * 1.3) + 0.2 * h
    return h * h


def scalar_while(x):
    h = x
    while h * h > 0.01:
        h = h * 0.7 + 0.001 * np.sin(x)
    return h * x


def _differences(grad, args, index, eps=1e-6):
    """Central differences of a gradient function (one column per element of args[index])."""
    x = np.asarray(args[index], dtype=np.float64)
    cols = []
    for i in range(x.size):
        step = np.zeros(x.size)
        step[i] = eps
        plus, minus = list(args), list(args)
        plus[index] = x + step.reshape(x.shape)
        minus[index] = x - step.reshape(x.shape)
        cols.append((np.asarray(grad(*plus)) - np.asarray(grad(*minus))).reshape(-1) / (2 * eps))
    return np.stack(cols, axis=1)


RNG = np.random.default_rng(15)
X = RNG.standard_normal(4) * 0.5
W = RNG.standard_normal((4, 4)) * 0.4


def test_hand_gradient_of_the_rnn_matches_differences_of_the_loss():
    expected = np.array([(rnn(X + e, W) - rnn(X - e, W)) / 2e-6 for e in np.eye(4) * 1e-6])
    np.testing.assert_allclose(rnn_hand_grad(X, W), expected, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("chunk_size", [None, 1])
def test_hessian_through_an_rnn_loop(chunk_size):
    hessian = sg.hessian(rnn, chunk_size=chunk_size)
    expected = _differences(rnn_hand_grad, (X, W), 0)
    for _ in range(2):  # the first call compiles, the second reuses
        H = hessian(X, W)
        np.testing.assert_allclose(H, expected, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(H, H.T, atol=1e-12)


def test_hessian_through_an_rnn_loop_wrt_the_weights():
    H = sg.hessian(rnn, wrt=1)(X, W)
    g = sg.grad(rnn, wrt=1)
    expected = _differences(g, (X, W), 1)
    np.testing.assert_allclose(H.reshape(16, 16), expected, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("chunk_size", [None, 1])
@pytest.mark.parametrize("fn, args", [
    (shrink, (np.array([0.6, -0.5, 0.4]),)),
    (newton_break, (np.array([0.3, -0.2, 0.1]),)),
    (indexed, (np.array([0.3, -0.4]), np.array([[1.1, 0.7], [0.5, -0.9], [1.3, 0.2]]))),
    (nested, (np.array([0.2, -0.7, 1.1]),)),
    (nested_while, (np.array([0.9, -0.8, 0.7]),)),
    (while_in_branch, (np.array([0.9, -0.3, 0.7]),)),
], ids=["while", "break", "indexed", "nested", "nested_while", "while_in_branch"])
def test_hessian_through_loops(fn, args, chunk_size):
    hessian = sg.hessian(fn, chunk_size=chunk_size)
    expected = _differences(sg.grad(fn), args, 0)
    for _ in range(2):
        np.testing.assert_allclose(hessian(*args), expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("fn, args", [
    (branchy, (np.array([0.3, -0.4, 0.8]), np.array([0.9, 1.1, -0.7]))),
    (rows, (np.array([0.3, -0.4]), np.array([[1.1, 0.7], [0.5, -0.9], [1.3, 0.2]]))),
], ids=["branch", "rows"])
def test_hessian_blocks_through_loops(fn, args):
    H = sg.hessian(fn, wrt=(0, 1))(*args)
    for i in range(2):
        g = lambda *a, i=i: sg.grad(fn, wrt=(0, 1))(*a)[i]  # noqa: E731
        for j in range(2):
            n_i, n_j = np.size(args[i]), np.size(args[j])
            np.testing.assert_allclose(H[i][j].reshape(n_i, n_j), _differences(g, args, j),
                                       rtol=1e-6, atol=1e-7)


def test_the_while_loop_runs_a_data_dependent_number_of_steps():
    # the two points take different trip counts: each Hessian is its own loop's
    hessian = sg.hessian(shrink)
    for x in (np.array([0.6, -0.5, 0.4]), np.array([2.0, 1.5, -1.0])):
        np.testing.assert_allclose(hessian(x), _differences(sg.grad(shrink), (x,), 0),
                                   rtol=1e-6, atol=1e-7)


def test_jvp_of_a_loop_gradient_is_a_hessian_vector_product():
    v = RNG.standard_normal(4)
    g, hv = sg.jvp(sg.grad(rnn), (X, W), (v, np.zeros_like(W)))
    np.testing.assert_allclose(g, rnn_hand_grad(X, W), rtol=1e-10)
    np.testing.assert_allclose(hv, _differences(rnn_hand_grad, (X, W), 0) @ v, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("mode", ["forward", "auto"])
def test_jacobian_of_a_loop_gradient(mode):
    x = np.array([0.6, -0.5, 0.4])
    J = sg.jacobian(sg.grad(shrink), mode=mode)(x)
    np.testing.assert_allclose(J, _differences(sg.grad(shrink), (x,), 0), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("fn", [scalar_loop, scalar_while])
@pytest.mark.parametrize("x", [0.7, -1.2])
def test_grad_of_grad_of_a_scalar_loop(fn, x):
    d, d2 = sg.grad(fn), sg.grad(sg.grad(fn))
    expected = (d(x + 1e-6) - d(x - 1e-6)) / 2e-6
    for _ in range(2):
        np.testing.assert_allclose(d2(x), expected, rtol=1e-6, atol=1e-8)


def test_third_derivative_of_a_scalar_loop():
    d2, d3 = sg.grad(sg.grad(scalar_loop)), sg.grad(sg.grad(sg.grad(scalar_loop)))
    np.testing.assert_allclose(d3(0.4), (d2(0.4 + 1e-5) - d2(0.4 - 1e-5)) / 2e-5, rtol=1e-6)


@pytest.mark.parametrize("fn, args", [
    (rnn, (X, W)),
    (shrink, (np.array([0.6, -0.5, 0.4]),)),
    (newton_break, (np.array([0.3, -0.2, 0.1]),)),
    (indexed, (np.array([0.3, -0.4]), np.array([[1.1, 0.7], [0.5, -0.9], [1.3, 0.2]]))),
    (branchy, (np.array([0.3, -0.4, 0.8]), np.array([0.9, 1.1, -0.7]))),
    (rows, (np.array([0.3, -0.4]), np.array([[1.1, 0.7], [0.5, -0.9], [1.3, 0.2]]))),
    (nested, (np.array([0.2, -0.7, 1.1]),)),
    (nested_rnn, (np.array([0.3, -0.6, 0.2]),
                  np.array([[0.5, -0.2, 0.3], [0.1, 0.4, -0.6], [-0.3, 0.2, 0.7]]))),
    (nested_while, (np.array([0.9, -0.8, 0.7]),)),
    (while_in_branch, (np.array([0.9, -0.3, 0.7]),)),
], ids=["rnn", "while", "break", "indexed", "branch", "rows", "nested", "nested_rnn", "nested_while",
        "while_in_branch"])
def test_reverse_mode_jacobian_of_a_loop_gradient(fn, args):
    # reverse over reverse: each row runs the backward again on the saved tapes
    jacobian = sg.jacobian(sg.grad(fn), mode="reverse")
    expected = _differences(sg.grad(fn), args, 0)
    for _ in range(2):
        np.testing.assert_allclose(jacobian(*args), expected, rtol=1e-6, atol=1e-7)


grad_rnn = sg.grad(rnn)


def _squared_gradient_norm_rnn(x, W):
    return np.sum(grad_rnn(x, W) ** 2)  # a loop's gradient called in compiled code


def _squared_gradient_norm_nested(x):
    return np.sum(grad_nested(x) ** 2)


grad_nested = sg.grad(nested)


def test_grad_of_a_function_calling_a_nested_loop_gradient():
    x = np.array([0.2, -0.7, 1.1])
    expected = _differences(lambda x: np.array([_squared_gradient_norm_nested(x)]), (x,), 0)[0]
    np.testing.assert_allclose(sg.grad(_squared_gradient_norm_nested)(x), expected, rtol=1e-6, atol=1e-8)


def test_grad_of_a_function_calling_a_loop_gradient():
    g = sg.grad(_squared_gradient_norm_rnn)
    expected = _differences(lambda x, W: np.array([_squared_gradient_norm_rnn(x, W)]), (X, W), 0)[0]
    np.testing.assert_allclose(g(X, W), expected, rtol=1e-6, atol=1e-8)


def test_vjp_of_a_loop_gradient_runs_twice():
    x = np.array([0.6, -0.5, 0.4])
    out, vjp_fn = sg.vjp(sg.grad(shrink), x)
    H = _differences(sg.grad(shrink), (x,), 0)
    for v in (np.array([1.0, 0.0, 0.0]), np.array([0.2, -1.0, 0.5])):
        (row,) = vjp_fn(v)
        np.testing.assert_allclose(row, v @ H, rtol=1e-6, atol=1e-7)


def test_vjp_of_a_nested_loop_gradient_runs_twice():
    # each backward run has its own cotangent tapes, whose pops span the outer iterations
    x = np.array([0.2, -0.7, 1.1])
    _, vjp_fn = sg.vjp(sg.grad(nested), x)
    H = _differences(sg.grad(nested), (x,), 0)
    for v in (np.array([1.0, 0.0, 0.0]), np.array([0.2, -1.0, 0.5]), np.array([1.0, 0.0, 0.0])):
        (row,) = vjp_fn(v)
        np.testing.assert_allclose(row, v @ H, rtol=1e-6, atol=1e-7)


def _returns_from_nested_loops(a0):
    for _ in range(1):
        for _ in range(4):
            b = np.sin(a0) * 1.5
            return b * a0
    return a0 * 0.0


def _nested_loops_in_a_branch(a0, a1):
    if a1 < 0.36:
        for _ in range(2):
            for _ in range(2):
                a0 = np.sin(a0) * a0
    return a0 * 1.0


def test_reverse_over_reverse_with_a_return_in_nested_loops():
    """The inner gradient's backward ops are primal code to the outer gradient, which emits
    its own backward after them: the inner ones must not carry the backward mark (the
    outer check of the inner gradient's value was emitted before the inner adjoint loop
    computed it: an UnboundLocalError)."""
    for a in (np.float64(-2.72), np.float64(0.4)):
        g, eps = sg.grad(_returns_from_nested_loops), 1e-5
        expected = (g(a + eps) - g(a - eps)) / (2 * eps)
        assert_close(sg.grad(sg.grad(_returns_from_nested_loops))(a), expected, rtol=1e-6, atol=1e-8)


def _in_a_branch_of_one(a0):
    return _nested_loops_in_a_branch(a0, a0)


def _loop_in_an_if_in_an_if(a0):
    h = a0
    if a0 > 0:
        if a0 > 1.0:
            for _ in range(2):
                h = np.sin(h) * h
    return h * 1.0


def _nested_loops_in_an_if_in_a_loop(a0):
    h = a0
    for _i in range(2):
        if h > 0.1:
            for _j in range(2):
                for _k in range(2):
                    h = np.tanh(h * 0.8) + 0.1 * a0
        else:
            h = h * 0.5 + np.sin(a0)
    return h * h


def _three_nested_loops(a0):
    h = a0
    for _i in range(2):
        for _j in range(2):
            for _k in range(2):
                h = np.sin(h) * 0.9 + 0.1 * a0
    return h ** 3


@pytest.mark.parametrize("fn, points", [
    (_in_a_branch_of_one, (-0.7, 0.9)),
    (_loop_in_an_if_in_an_if, (1.3, 0.6, -0.4)),
    (_nested_loops_in_an_if_in_a_loop, (0.05, 0.3, -0.5, 1.5)),
    (_three_nested_loops, (0.05, 0.3, -0.5, 1.5)),
], ids=["nested-loops-in-if", "loop-in-if-in-if", "nested-loops-in-if-in-loop", "three-nested-loops"])
def test_reverse_over_reverse_of_nested_loops_and_branches(fn, points):
    """Reverse mode over the gradient of loops nested in loops and `if`s (Note [Reverse
    mode over adjoint loops]): before, 0.0 where the second derivative is 0.535 (fuzz
    seed 62219, the first case), and wrong values for the others. The points take the
    branches both ways."""
    g, d2, eps = sg.grad(fn), sg.grad(sg.grad(fn)), 1e-6
    for a in map(np.float64, points):
        assert_close(d2(a), (g(a + eps) - g(a - eps)) / (2 * eps), rtol=1e-6, atol=1e-8)


def nested_in_branch(x):
    h = x
    if np.sum(x) > 0:
        for _ in range(2):
            for _ in range(3):
                h = np.cos(h) * 0.9 + 0.1 * x
    else:
        h = h * h
    return np.sum(h ** 3)


def while_nest_in_else(x):
    h = x
    if np.sum(x) > 0:
        h = h * 2.0
    else:
        for _ in range(2):
            while np.sum(h * h) > 0.3:
                h = np.sin(h) * 0.9
            h = h + 0.2 * x
    return np.sum(h ** 3) + np.sum(h * x)


def nest_in_if_in_loop(x, W):
    h = x
    for _i in range(2):
        if np.sum(h) > 0.1:
            for _j in range(2):
                for _k in range(2):
                    h = np.tanh(W @ h) + 0.1 * x
        else:
            h = h * 0.5 + np.sin(x)
    return np.sum(h * h)


def loop_in_if_in_if(x):
    h = x
    if np.sum(x) > 0:
        if np.sum(x) > 1.0:
            for _ in range(2):
                for _ in range(2):
                    h = np.sin(h) * h
    return np.sum(h * 1.0)


W3 = np.array([[0.5, -0.2, 0.3], [0.1, 0.4, -0.6], [-0.3, 0.2, 0.7]])


@pytest.mark.parametrize("fn, args", [
    (nested_in_branch, (np.array([0.2, 0.7, 1.1]),)),
    (nested_in_branch, (np.array([0.2, -0.7, -1.1]),)),
    (while_nest_in_else, (np.array([-0.9, -0.8, 0.7]),)),
    (while_nest_in_else, (np.array([0.9, -0.8, 0.7]),)),
    (nest_in_if_in_loop, (np.array([0.3, 0.6, 0.2]), W3)),
    (nest_in_if_in_loop, (np.array([-0.3, -0.6, 0.2]), W3)),
    (loop_in_if_in_if, (np.array([0.3, 0.6, 0.8]),)),
    (loop_in_if_in_if, (np.array([0.3, 0.6, 0.2]),)),
], ids=["nest-in-if", "nest-in-if-else-taken", "while-nest-in-else", "while-nest-in-else-not-taken",
        "nest-in-if-in-loop", "nest-in-if-in-loop-else", "if-in-if", "if-in-if-inner-not-taken"])
def test_reverse_mode_jacobian_and_vjp_of_branchy_nested_loop_gradients(fn, args):
    expected = _differences(sg.grad(fn), args, 0)
    np.testing.assert_allclose(sg.jacobian(sg.grad(fn), mode="reverse")(*args), expected,
                               rtol=1e-6, atol=1e-7)
    _, vjp_fn = sg.vjp(sg.grad(fn), *args)
    for v in (np.ones(args[0].size), np.linspace(-1.0, 0.5, args[0].size)):  # twice: own tapes
        np.testing.assert_allclose(vjp_fn(v)[0], v @ expected, rtol=1e-6, atol=1e-7)


def _gradient_of_a_returning_loop(a0):
    for _ in range(1):
        if not a0 < 0.1:
            return a0 * 3.0 + 1.5
    return a0


def _calls_it_in_a_branch(x):
    if np.sum(x * x) > 100.0:
        return np.sum(x) * 0.0
    return sg.grad(_gradient_of_a_returning_loop)(np.sum(x) * 0.1) * np.sum(x * x)


def test_a_loop_gradient_called_in_a_branch_keeps_its_tape_entries():
    """The outer backward pushes what the inner adjoint loop popped; the tape pass must
    count that push as a read, or it prunes the pop and the push reads an unbound name
    (fuzz seed 300253: a NameError in generated code)."""
    for x in (np.array([0.3, 2.0, -0.4]), np.array([-1.0, 0.2, 0.1])):
        assert_close(sg.grad(_calls_it_in_a_branch)(x), numeric_grad(_calls_it_in_a_branch, [x], 0))


# ---------------------------------------------------------------------- value_and_grad and has_aux
# Their generated gradients are rebuilt as IR like sg.grad's (Note [Transforms of loop
# gradients]): no generated adjoint loop is traced as source.
def shrink_hand_grad(x):
    """d shrink / d x by hand: h_{k+1} = 0.8 sin(h_k), a diagonal Jacobian."""
    h, dh = x, np.ones_like(x)
    while np.sum(h * h) > 0.05:
        h, dh = np.sin(h) * 0.8, dh * 0.8 * np.cos(h)
    return (3 * h * h + x) * dh + h


def rnn_aux(x, W):
    h = x
    for _t in range(4):
        h = np.tanh(W @ h + 0.1 * x)
    return np.sum(h * h), (2.0 * h, np.sum(h))


def rnn_forward(x, W):
    """rnn_aux's aux by hand, flattened: 2 h and sum(h)."""
    h = x
    for _t in range(4):
        h = np.tanh(W @ h + 0.1 * x)
    return np.concatenate([2.0 * h, [np.sum(h)]])


def shrink_aux(x):
    h = x
    while np.sum(h * h) > 0.05:
        h = np.sin(h) * 0.8
    return np.sum(h * h * h) + np.sum(h * x), h


XS = np.array([0.6, -0.5, 0.4])


def test_hand_gradient_of_the_while_loop_matches_differences_of_the_loss():
    expected = np.array([(shrink(XS + e) - shrink(XS - e)) / 2e-6 for e in np.eye(3) * 1e-6])
    np.testing.assert_allclose(shrink_hand_grad(XS), expected, rtol=1e-6, atol=1e-8)


def _vg_rnn(x, W):
    return sg.value_and_grad(rnn)(x, W)[1]


def _vg_shrink(x):
    return sg.value_and_grad(shrink)(x)[1]


def _aux_rnn(x, W):
    return sg.grad(rnn_aux, has_aux=True)(x, W)[0]


def _aux_shrink(x):
    g, h = sg.grad(shrink_aux, has_aux=True)(x)
    return g


def _vg_aux_shrink(x):
    (value, h), g = sg.value_and_grad(shrink_aux, has_aux=True)(x)
    return g


CASES = [(_vg_rnn, rnn_hand_grad, (X, W)), (_vg_shrink, shrink_hand_grad, (XS,)),
         (_aux_rnn, rnn_hand_grad, (X, W)), (_aux_shrink, shrink_hand_grad, (XS,)),
         (_vg_aux_shrink, shrink_hand_grad, (XS,))]
IDS = ["value_and_grad-for", "value_and_grad-while", "has_aux-for", "has_aux-while",
       "value_and_grad-has_aux-while"]


@pytest.mark.parametrize("mode", ["forward", "reverse"])
@pytest.mark.parametrize("gradient, hand, args", CASES, ids=IDS)
def test_jacobian_of_a_loop_gradient_through_value_and_grad_or_has_aux(gradient, hand, args, mode):
    np.testing.assert_allclose(gradient(*args), hand(*args), rtol=1e-10)
    expected = _differences(hand, args, 0)
    jacobian = sg.jacobian(gradient, mode=mode)
    for _ in range(2):
        np.testing.assert_allclose(jacobian(*args), expected, rtol=1e-6, atol=1e-7)


def _squared(gradient):
    return {_vg_rnn: _sq_vg_rnn, _vg_shrink: _sq_vg_shrink, _aux_rnn: _sq_aux_rnn,
            _aux_shrink: _sq_aux_shrink, _vg_aux_shrink: _sq_vg_aux_shrink}[gradient]


def _sq_vg_rnn(x, W):
    return np.sum(_vg_rnn(x, W) ** 2)


def _sq_vg_shrink(x):
    return np.sum(_vg_shrink(x) ** 2)


def _sq_aux_rnn(x, W):
    return np.sum(_aux_rnn(x, W) ** 2)


def _sq_aux_shrink(x):
    return np.sum(_aux_shrink(x) ** 2)


def _sq_vg_aux_shrink(x):
    return np.sum(_vg_aux_shrink(x) ** 2)


@pytest.mark.parametrize("gradient, hand, args", CASES, ids=IDS)
def test_grad_of_a_function_of_a_loop_gradient_through_value_and_grad_or_has_aux(gradient, hand, args):
    """Reverse over reverse: d/dx |g(x)|^2 = 2 H g, H by differences of the hand gradient."""
    expected = 2 * _differences(hand, args, 0).T @ hand(*args)
    squared = sg.grad(_squared(gradient))
    for _ in range(2):
        np.testing.assert_allclose(squared(*args), expected, rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------------- a user's loop popping a list
def pops_in_a_literal_range(x):
    items = [x, 2.0 * x, x * x]
    s = x * 0.0
    for i in range(3):
        v = items.pop()
        s = s + np.sin(v) * (i + 1.0)
    return np.sum(s)


def pops_in_a_reversed_range(x):
    items = [x, 2.0 * x, x * x]
    s = x * 0.0
    for i in range(3)[::-1]:
        v = items.pop()  # HERE
        s = s + np.sin(v) * (i + 1.0)
    return np.sum(s)


def test_a_users_loop_popping_a_list_is_ordinary_code():
    """No pattern meant for generated adjoint loops applies to a user's loop: one over a
    literal range is traced per iteration (right gradient); `range(3)[::-1]` is a run-time
    loop, refused for what it does (the list's length changes each iteration), at its line."""
    x = np.array([0.3, -0.7])
    assert_close(sg.grad(pops_in_a_literal_range)(x), numeric_grad(pops_in_a_literal_range, [x], 0))
    with pytest.raises(sg.CompileError, match="the length or keys of `items`") as info:
        sg.grad(pops_in_a_reversed_range)(x)
    assert info.value.lineno == pops_in_a_reversed_range.__code__.co_firstlineno + 4
    assert "generated" not in info.value.message


def _vjp_of_a_loop_inside(x):
    value, vjp_fn = sg.vjp(shrink, x)
    return np.sum(vjp_fn(1.0)[0] ** 2)


def test_vjp_of_a_loop_function_inside_compiled_code_is_refused_at_the_call():
    """sg.vjp's generated forward/backward hold the loop's tape (not rebuilt as IR, unlike
    a gradient's): refused naming the call, with sg.grad as the rewrite."""
    with pytest.raises(sg.CompileError, match="`sg.vjp` of a function with a loop") as info:
        sg.grad(_vjp_of_a_loop_inside)(XS)
    assert info.value.lineno == _vjp_of_a_loop_inside.__code__.co_firstlineno + 1
    assert "sg.grad" in info.value.hint


def _linear_loop(x):
    for _ in range(3):
        x = x * 2.0 + 1.0
    return np.sum(x)


def _vjp_of_a_linear_loop_inside(x):
    value, vjp_fn = sg.vjp(_linear_loop, x)
    (g,) = vjp_fn(1.0)
    return value * np.sum(g * x)


def test_vjp_of_a_loop_with_no_tape_inside_compiled_code_compiles():
    """A loop of linear steps keeps no tape (its backward reads no iteration's values):
    its generated code is traced as before. d/dx (sum(8x + 7) * 8 sum(x)) by hand."""
    x = np.array([0.3, -0.2])
    expected = 8.0 * (8.0 * np.sum(x)) + 8.0 * np.sum(8.0 * x + 7.0)
    assert_close(sg.grad(_vjp_of_a_linear_loop_inside)(x), np.full(2, expected), rtol=1e-12)
    assert_close(sg.grad(_vjp_of_a_linear_loop_inside)(x),
                 numeric_grad(_vjp_of_a_linear_loop_inside, [x], 0))


def two_args_loop(x, y):
    h = x
    for _ in range(3):
        h = np.sin(h * y) + 0.3 * h
    return np.sum(h * h) + np.sum(y * h), {"h": h, "c": 2.0}


def _uses_tuple_wrt_and_a_dict_aux(x, y):
    (gx, gy), aux = sg.grad(two_args_loop, wrt=(0, 1), has_aux=True)(x, y)
    return np.sum(gx * gx) + np.sum(aux["h"] * gy) * aux["c"]


def _uses_value_and_grad_with_a_dict_aux(x, y):
    (value, aux), gy = sg.value_and_grad(two_args_loop, wrt=1, has_aux=True)(x, y)
    return np.sum(gy * aux["h"]) + value


@pytest.mark.parametrize("fn", [_uses_tuple_wrt_and_a_dict_aux, _uses_value_and_grad_with_a_dict_aux])
def test_loop_gradients_with_tuple_wrt_and_dict_aux_differentiated_again(fn):
    x, y = np.array([0.3, -0.5, 0.8]), np.array([1.1, 0.7, -0.4])
    for i in (0, 1):
        expected = numeric_grad(fn, [x, y], i)
        assert_close(sg.grad(fn, wrt=i)(x, y), expected, rtol=1e-6, atol=1e-8)
        t = np.linspace(0.3, 1.1, 3)
        _, tangent = sg.jvp(fn, (x, y), (t, np.zeros(3)) if i == 0 else (np.zeros(3), t))
        assert_close(tangent, np.sum(expected * t), rtol=1e-6, atol=1e-8)


def scaled_loop(x, scale=None, shift=0.0):
    """A loop whose parameters default to None (tested in the code) and to a number."""
    if scale is None:
        scale = 0.9
    for _t in range(3):
        x = np.sin(x) * scale + shift
    return np.sum(x * x)


grad_scaled_loop = sg.grad(scaled_loop)


def _calls_with_defaults(x):
    return np.sum(grad_scaled_loop(x) ** 2)  # scale and shift: their defaults (fuzz seed 950348)


def _calls_with_constants(x):
    return np.sum(grad_scaled_loop(x, None, 0.25) * x) + grad_scaled_loop(0.5, 1.5)


@pytest.mark.parametrize("fn", [_calls_with_defaults, _calls_with_constants])
def test_a_loop_gradient_called_with_default_and_constant_arguments(fn):
    """Each argument of a loop's gradient called in compiled code binds its parameter in the
    gradient's IR, whatever value it is (the graph tests `scale is None` as the generated
    code does): before, a default None sent the call to a trace of the generated source,
    which stopped at the tape (a refusal naming a generated line, or a crash)."""
    x = np.array([0.3, -0.8, 1.2])
    expected = _differences(lambda x: np.array([fn(x)]), (x,), 0)[0]
    np.testing.assert_allclose(sg.grad(fn)(x), expected, rtol=1e-6, atol=1e-8)


def _calls_with_a_tuple(x):
    return np.sum(grad_rows_of((x, 2 * x)))


def rows_of(pair):
    a, b = pair
    for _t in range(2):
        a = np.sin(a) * b
    return np.sum(a)


grad_rows_of = sg.grad(rows_of)


def test_a_loop_gradient_called_with_a_tuple_is_refused_at_the_users_call():
    x = np.array([0.3, -0.8])
    with pytest.raises(sg.CompileError) as info:
        sg.grad(_calls_with_a_tuple)(x)
    message = str(info.value)
    assert "grad_rows_of((x, 2 * x))" in message and "argument `pair`" in message
    assert "_tape" not in message


def loop_over_a_custom_function(x):
    """A custom Function whose jvp reads what save_for_forward saved, before a loop."""
    x = x * MulXYZ.apply(x, x, 1.5)
    for _t in range(2):
        x = np.sin(x)
    return np.sum(x * x)


grad_loop_over_a_custom_function = sg.grad(loop_over_a_custom_function)


def _calls_the_gradient_of_a_custom_function_loop(x):
    return grad_loop_over_a_custom_function(x)


def test_forward_mode_of_a_loop_gradient_over_a_custom_function_called_in_compiled_code():
    """The loop's gradient is inlined as IR, its inputs renamed to the caller's values; the
    Function's call record (what it saved for forward) was not renamed with them, so its
    jvp read an undefined name (fuzz seed 971920: NameError `x0_1`)."""
    x = np.array([0.3, -0.6])
    jac = sg.jacobian(_calls_the_gradient_of_a_custom_function_loop, mode="forward")(x)
    expected = _differences(grad_loop_over_a_custom_function, (x,), 0)
    np.testing.assert_allclose(jac, expected, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(sg.hessian(loop_over_a_custom_function)(x), expected, rtol=1e-6, atol=1e-7)


def doubles_in_place(x, c):
    for _ in (x, (2,), (2, 2)):  # a loop over a tuple: unrolled
        w = c
        w += w  # in place where c is an array, a rebinding where it is a float
    k = 0
    while k < 2:  # (a while loop: the Hessian runs one pass per seed)
        k += 1
        x = np.sin(x)
    return np.sum(x * x * c)


def test_hessian_differentiates_the_gradient_variant_of_its_arguments():
    """sg.hessian's per-seed columns differentiate the gradient compiled for the call's
    arguments (Compiled.entry_at): the generic gradient refuses `w += w` (an ndarray's
    write or a float's rebinding, which it cannot tell apart), the variant knows c is an
    array (fuzz seed 1100007: sg.grad compiled, sg.hessian was refused)."""
    x, c = np.array([0.3, -0.7]), np.array([0.5, 1.5])
    expected = _differences(lambda v: sg.grad(doubles_in_place)(v, c.copy()), (x,), 0)
    np.testing.assert_allclose(sg.hessian(doubles_in_place)(x, c.copy()), expected, rtol=1e-6, atol=1e-7)
