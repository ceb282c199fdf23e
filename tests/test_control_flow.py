"""Control flow in compiled code (Note [Tracing control flow], Note [Reverse mode of
control flow]): every program checked against central differences."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from tests.conftest import assert_close, numeric_grad
from tests.corpus import control as C

rng = np.random.default_rng(5)


def _pos(*shape):
    return np.abs(rng.standard_normal(shape)) + 0.5


CASES = [
    ("branch-then", C.branch, lambda: [np.abs(rng.standard_normal(4)) + 0.1]),
    ("branch-else", C.branch, lambda: [-np.abs(rng.standard_normal(4)) - 0.1]),
    ("early-return-taken", C.early_return, lambda: [_pos(4)]),
    ("early-return-not-taken", C.early_return, lambda: [-_pos(4)]),
    ("for-range", C.loop, lambda: [rng.standard_normal(3), rng.standard_normal((3, 3)) * 0.5]),
    ("running-max-logsumexp", C.running_logsumexp, lambda: [rng.standard_normal(7)]),
    ("while-data-dependent", C.while_loop, lambda: [_pos(3)]),
    ("for-over-rows", C.rows, lambda: [rng.standard_normal((4, 3)), rng.standard_normal(3)]),
    ("continue", C.with_continue, lambda: [rng.standard_normal(6)]),
    ("break", C.with_break, lambda: [_pos(6) * 0.3]),
    ("while-true-break", C.while_break, lambda: [_pos(3)]),
    ("ifexp-and-or", C.ifexp_and_or, lambda: [rng.standard_normal(3), rng.standard_normal(3)]),
    ("ifexp-and-or-positive", C.ifexp_and_or, lambda: [_pos(3), _pos(3)]),
    ("elif-first", C.elif_chain, lambda: [_pos(3) + 1]),
    ("elif-middle", C.elif_chain, lambda: [rng.standard_normal(3) * 0.1]),
    ("elif-else", C.elif_chain, lambda: [-_pos(3) - 1]),
    ("nested-loops", C.nested, lambda: [rng.standard_normal(3), rng.standard_normal((3, 3)) * 0.3]),
    ("walrus-while", C.walrus, lambda: [_pos(3) + 1]),
    # a carried value that starts as a constant (np.zeros, the int 0) and becomes
    # differentiable in the body: its kind is widened and the body traced again
    ("rnn-from-zeros", C.rnn, lambda: [rng.standard_normal((3, 4)) * 0.3, rng.standard_normal((4, 4)) * 0.3,
                                        rng.standard_normal(4), rng.standard_normal((5, 2, 3)),
                                        rng.standard_normal((2, 4))]),
    ("int-accumulator", C.counter_starting_at_zero, lambda: [rng.standard_normal(3)]),
    # a carried value whose shape changes every iteration: no shape facts in the loop
    ("growing-shape", C.growing, lambda: [rng.standard_normal(5)]),
    # in-place writes inside loops are carried like assignments
    ("subscript-write-in-branch-in-loop", C.subscript_write_in_branch_in_loop,
     lambda: [rng.standard_normal(5)]),
    ("append-then-stack", C.append_then_stack, lambda: [rng.standard_normal(3)]),
    ("return-in-loop-taken", C.return_in_loop, lambda: [np.array([0.5, 1.2, 0.9, 1.5])]),
    ("return-in-loop-not-taken", C.return_in_loop, lambda: [np.array([0.1, 0.2, 0.3, 0.1])]),
    ("write-through-view-in-loop", C.write_through_view_in_loop, lambda: [rng.standard_normal(4)]),
]


@pytest.mark.parametrize("name,fn,make", CASES, ids=[c[0] for c in CASES])
def test_reverse_mode_matches_finite_differences(name, fn, make):
    args = make()
    grads = sg.grad(fn, wrt=tuple(range(len(args))))(*args)
    for i, g in enumerate(grads):
        assert_close(g, numeric_grad(fn, args, i), rtol=1e-5, atol=1e-7)


def test_running_logsumexp_is_softmax():
    x = rng.standard_normal(9)
    assert_close(sg.grad(C.running_logsumexp)(x), np.exp(x) / np.exp(x).sum(), rtol=1e-10)


def test_trip_count_from_the_input_reuses_one_compiled_variant():
    g = sg.grad(C.long_loop)
    x = np.ones(3)
    for n in (0, 1, 7):
        assert_close(g(x, n), np.full(3, 0.99999 ** n), rtol=1e-12)
    assert len({sg.source(g)}) == 1


def test_a_hundred_thousand_iterations_without_recursion():
    g = sg.grad(C.long_loop)(np.ones(2), 100_000)
    assert_close(g, np.full(2, 0.99999 ** 100_000), rtol=1e-9)


def test_generated_code_does_not_grow_with_the_trip_count():
    a = sg.grad(C.long_loop)
    a(np.ones(2), 3)
    b = sg.grad(C.long_loop)
    b(np.ones(2), 3000)
    assert sg.source(a) == sg.source(b)
    loops = [line for line in sg.source(a).splitlines() if line.strip().startswith("for ")]
    assert 1 <= len(loops) <= 2  # the adjoint loop, and the forward one where it is needed


def test_loop_pushes_only_what_the_adjoint_reads():
    g = sg.grad(C.loop, wrt=(0, 1))
    g(rng.standard_normal(3), rng.standard_normal((3, 3)))
    text = sg.source(g)
    pushes = [line.strip() for line in text.splitlines() if ".append(" in line]
    # one tape per saved quantity, named after it (Note [One tape per saved quantity])
    assert pushes == ["h_1_tape.append(h_1)", "h_tape.append(h)"]  # the loop-invariant W is not taped


# ---------------------------------------------------------------- range(...)[::-1]
def _reversed_run_time_range(x):
    h = x
    for i in range(x.shape[0])[::-1]:  # a bound from the shape: a run-time loop, step -1
        h = np.sin(h) * x[i]
    return np.sum(h)


def _reversed_static_range(x):
    h = x
    for i in range(1, 6, 2)[::-1]:  # 5, 3, 1
        h = np.cos(h) + x[i % 3] * i
    return np.sum(h * h)


@pytest.mark.parametrize("f", [_reversed_run_time_range, _reversed_static_range],
                         ids=lambda f: f.__name__)
def test_a_loop_over_a_reversed_range(f):
    """`for i in range(a, b)[::-1]` runs the same indices as `reversed(range(a, b))`."""
    x = np.array([0.3, -0.5, 0.7])
    assert_close(sg.grad(f)(x), numeric_grad(f, [x], 0))
    t = np.array([0.2, 1.0, -0.4])
    out, t_out = sg.jvp(f, (x,), (t,))
    assert_close(out, f(x))
    assert_close(t_out, numeric_grad(f, [x], 0) @ t, rtol=1e-5, atol=1e-7)


def test_the_shape_generic_module_runs_a_reversed_range():
    from srcgrad.api import emit_standalone

    namespace: dict = {}
    exec(compile(emit_standalone(_reversed_run_time_range), "<emitted>", "exec"), namespace)
    grad = namespace["grad__reversed_run_time_range"]
    for n in (2, 4):  # one module, any length
        x = np.linspace(-0.6, 0.8, n)
        (g,) = grad(x)
        assert_close(g, numeric_grad(_reversed_run_time_range, [x], 0))


def _zip_of_a_longer_and_a_shorter_array(x):
    s = 0.0
    for a, b in zip(x, x[:2] * 2.0):  # zip stops at the shorter: two iterations
        s = s + a * b
    return s


def _zip_of_three_arrays_the_last_shortest(x):
    s = 0.0
    for a, b, c in zip(x, x * x, x[1:2]):
        s = s + a * b * c
    return s


@pytest.mark.parametrize("f", [_zip_of_a_longer_and_a_shorter_array, _zip_of_three_arrays_the_last_shortest])
def test_zip_of_arrays_stops_at_the_shortest(f):
    """A loop over zip of arrays ran the first array's length: the shorter one's row past
    its end raised IndexError (fuzz seed 1004433), generic code and variants alike."""
    x = np.array([0.3, -0.5, 0.9])
    value, grad = sg.value_and_grad(f)(x)
    assert_close(value, f(x))
    assert_close(grad, numeric_grad(f, [x], 0))
    t = np.array([1.0, -0.5, 2.0])
    out, t_out = sg.jvp(f, (x,), (t,))  # (the shape-generic code)
    assert_close(out, f(x))
    assert_close(t_out, numeric_grad(f, [x], 0) @ t)
