"""sg.vmap of linear algebra on stacks of matrices, of searching and sorting, of
lookups in a table, of the joins that promote their elements (hstack, vstack, dstack,
column_stack), ediff1d, polyval and a stack with a constant item (each refused before:
"`inv` has no batched form"), and the refusal of a mapped index, shift or count
(Note [Mapped options] in srcgrad.passes.batch_base).

Truth is arithmetic: the vmap against a Python loop of the function over the examples,
and the vmap of sg.grad against central differences of each example's function."""

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.errors import CompileError
from srcgrad.rules.helpers import stacked_bar

RNG = np.random.default_rng(7)
A = RNG.standard_normal((3, 4, 4)) + 4.0 * np.eye(4)  # well conditioned, distinct values
SPD = A @ np.swapaxes(A, -1, -2)
V = np.array([[0.31, -1.2, 2.05, 0.47, -0.66], [-0.52, -1.01, -2.2, 0.33, 0.9],
              [0.55, 1.07, 2.12, 0.38, -1.6]])
TABLE = np.array([-1.0, 0.0, 1.0])


def inv(a):
    return np.sum(np.linalg.inv(a) * a.T)


def det(a):
    return np.linalg.det(a) * 2.0


def slogdet(a):
    sign, logdet = np.linalg.slogdet(a)
    return sign * logdet


def symmetric(a):  # the symmetric rows read one triangle: differences of an asymmetric step
    return (a + a.T) * 0.5  # would not be their gradient's convention (docs/conventions.md)


def cholesky(a):
    return np.sum(np.linalg.cholesky(symmetric(a)))


def eigh(a):
    w, q = np.linalg.eigh(symmetric(a))
    return np.sum(w * w) + np.sum(q[:, 0] ** 2)


def eigvalsh(a):
    return np.sum(np.linalg.eigvalsh(symmetric(a)) ** 2)


def pinv(a):
    return np.sum(np.linalg.pinv(a) ** 2)


def qr(a):
    q, r = np.linalg.qr(a)
    return np.sum(r * r) + np.sum(q[0])


def argmin(x):
    return np.sum(x * np.argmin(x))


def argmax_of_matrix(x):  # over the flattened matrix
    m = np.outer(x, x[::-1])
    return np.sum(m) * np.argmax(m)


def sort(x):
    return np.sum(np.sort(x) * np.arange(5.0))


def isin(x):
    return np.sum(np.where(np.isin(np.round(x), [0.0, 1.0]), x, 2.0 * x))


def searchsorted(x):
    return np.sum(x * np.searchsorted(TABLE, x))


def digitize(x):
    return np.sum(x * np.digitize(x, TABLE))


def take_along_the_sort(x):  # indices one per example, in the value and in its gradient
    m = np.outer(x, x[:3])
    return np.sum(np.take_along_axis(m, np.argsort(m, axis=1), axis=1) * np.arange(3.0))


def nan_to_num(x):
    return np.sum(np.nan_to_num(np.log(x * x) * x))


def written_at_the_counter(x):  # `y[i] = ...` at a loop's counter (fuzz: 40 programs)
    y = np.zeros(5)
    for i in range(5):
        y[i] = x[i] * x[(i + 1) % 5]
    return np.sum(y ** 2)


def rows_written_at_the_counter(x):
    m = np.zeros((4, 5))
    for i in range(4):
        m[i] = x * (i + 1.0)
        m[i, i] = x[i] ** 2
    return np.sum(np.tanh(m) ** 2)


def hstack(x):
    return np.sum(np.hstack([x, np.sin(x[:2]), x[3]]) ** 2)


def vstack(x):  # a 1-D element is promoted to a row
    return np.sum(np.vstack([x, np.cos(x) * x]) * np.arange(5.0))


def dstack(x):
    return np.sum(np.dstack([x, x ** 2]) * np.arange(2.0))


def column_stack(x):
    return np.sum(np.column_stack([x, np.outer(x, x[:2])]) ** 2)


def ediff1d(x):
    return np.sum(np.ediff1d(np.outer(x[:2], x)) ** 2)


def polyval(x):  # one polynomial for every example
    return np.sum(np.polyval(np.array([0.5, -1.0, 2.0]), x) ** 2)


def stack_with_constants(x):  # a constant item, and the unbatched cotangent of its piece
    first, *rest = x
    return np.sum(np.stack([first * x[1], 0.25, np.sin(rest[2])]) ** 2)


VALUES = [(inv, A), (det, A), (slogdet, A), (cholesky, SPD), (eigh, SPD), (eigvalsh, SPD),
          (pinv, A), (qr, A), (argmin, V), (argmax_of_matrix, V), (sort, V), (isin, V),
          (searchsorted, V), (digitize, V), (take_along_the_sort, V), (nan_to_num, V),
          (written_at_the_counter, V), (rows_written_at_the_counter, V), (hstack, V),
          (vstack, V), (dstack, V), (column_stack, V), (ediff1d, V), (polyval, V),
          (stack_with_constants, V)]
GRADIENTS = [(f, X) for f, X in VALUES if f not in (pinv, qr)]  # see GRADIENTS_REFUSED


def central_differences(f, x, h=1e-6):
    """d f / d x, of shape f(x).shape + x.shape."""
    columns = []
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = h
        columns.append((np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * h))
    return np.moveaxis(np.array(columns), 0, -1).reshape(np.shape(f(x)) + x.shape)


@pytest.mark.parametrize("f, X", VALUES, ids=[f.__name__ for f, _ in VALUES])
def test_vmap_equals_the_loop_over_examples(f, X):
    np.testing.assert_allclose(sg.vmap(f)(X), [f(x) for x in X], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("f, X", GRADIENTS, ids=[f.__name__ for f, _ in GRADIENTS])
def test_vmap_of_grad_equals_central_differences(f, X):
    got = sg.vmap(sg.grad(f))(X)
    np.testing.assert_allclose(got, [central_differences(f, x) for x in X], rtol=1e-6, atol=1e-7)


SECOND = [sort, take_along_the_sort, written_at_the_counter, rows_written_at_the_counter, eigh,
          hstack, column_stack, stack_with_constants]


@pytest.mark.parametrize("f", SECOND, ids=[f.__name__ for f in SECOND])
def test_vmap_of_a_hessian_equals_the_loop_of_hessians(f):
    """sg.vmap of sg.jacobian(sg.grad(f)): the seeds' batch inside the examples' batch."""
    X = SPD if f is eigh else V
    want = [central_differences(sg.grad(f), x) for x in X]
    got = sg.vmap(sg.jacobian(sg.grad(f)))(X)
    np.testing.assert_allclose(np.reshape(got, np.shape(want)), want, rtol=1e-6, atol=1e-6)


def written_at_a_flag(x, c):  # a 0-d bool index adds an axis: no integer's rank
    y = np.zeros(5) + x
    y[c > 0] = x[0]
    return np.sum(y * x)


def test_a_write_at_an_index_read_at_run_time_that_is_not_an_integer_is_refused():
    with pytest.raises(CompileError, match="at an index computed at run time"):
        sg.vmap(written_at_a_flag, in_axes=(0, None))(V, np.array(1.0))


# Gradients whose batched program needs a form not written yet: refused, never wrong.
GRADIENTS_REFUSED = [(pinv, A), (qr, A)]


@pytest.mark.parametrize("f, X", GRADIENTS_REFUSED, ids=[f.__name__ for f, _ in GRADIENTS_REFUSED])
def test_vmap_of_grad_without_a_batched_form_is_refused(f, X):
    with pytest.raises(CompileError, match="sg.vmap"):
        sg.vmap(sg.grad(f))(X)


# -- Note [Mapped options]: an index, a shift or a count computed from a mapped value --------

def take_at_a_mapped_index(x):
    return np.sum(np.take(x, np.sum(x > 0) - 1) * 3.0)


def item_at_the_argmax(x):
    return x[np.argmax(x)] * 2.0


def gather_by_argsort(x):
    return np.sum(x[np.argsort(x)] * np.arange(5.0))


MAPPED_INDICES = [(take_at_a_mapped_index, "vmap"), (item_at_the_argmax, "vmap"),
                  (item_at_the_argmax, "vmap(grad)"), (gather_by_argsort, "vmap"),
                  (gather_by_argsort, "vmap(grad)")]  # (take's gradient: take_bar, no form)


@pytest.mark.parametrize("f, transform", MAPPED_INDICES,
                         ids=[f"{t}-{f.__name__}" for f, t in MAPPED_INDICES])
def test_a_mapped_index_is_refused_never_spliced_in_whole(f, transform):
    """Before the Note, vmap of `np.take(x, k)` with k one per example read every example's
    x at every example's k (a (3, 3) answer for three examples); the vmap of the gradient
    of `x[np.argmax(x)]` was wrong in value once argmax had a batched form."""
    g = sg.vmap(f) if transform == "vmap" else sg.vmap(sg.grad(f))
    with pytest.raises(CompileError, match="computed from a mapped value"):
        g(V)


def polyval_of_mapped_coefficients(p, x):
    return np.sum(np.polyval(p, x) ** 2)


@pytest.mark.parametrize("x_axis", [None, 0])
def test_polyval_of_mapped_coefficients_is_numpys_horner_per_example(x_axis):
    """One polynomial per example (and x per example, or one x for all): NumPy's own Horner
    steps, so the vmap equals the loop bit for bit; its gradient against differences (with
    x mapped too, p's gradient contracts two mapped values: refused, no batched form)."""
    P, X = V[:, :3], V[:, 1:] if x_axis == 0 else V[0, 1:]
    xs = X if x_axis == 0 else [X] * len(P)
    f = polyval_of_mapped_coefficients
    np.testing.assert_array_equal(sg.vmap(f, in_axes=(0, x_axis))(P, X),
                                  [f(p, x) for p, x in zip(P, xs)])
    grad = sg.vmap(sg.grad(f, wrt=(0, 1)), in_axes=(0, x_axis))
    if x_axis == 0:
        with pytest.raises(CompileError, match="`tensordot` of two batched operands"):
            grad(P, X)
        return
    got = grad(P, X)
    for i, p in enumerate(P):
        np.testing.assert_allclose(got[0][i], central_differences(lambda q: f(q, X), p),
                                   rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(got[1][i], central_differences(lambda y, p=p: f(p, y), X),
                                   rtol=1e-6, atol=1e-7)


K1, K2 = np.array([-0.69, 0.77]), np.array([[[-0.25, -0.28], [-0.29, 0.07]]])


def stacked_bar_of_constant_arrays(x):
    """The transpose of a dstack written as its row, of constant elements (fuzz seed
    3101483: the batched form read the constants as a traced sequence)."""
    out = stacked_bar(x * 0.05 + 1.0, [K1, K2], "dstack")
    return np.sum(np.sin(out[0])) + np.sum(out[1] ** 2)


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_a_batched_jacobian_of_stacked_bar_of_constant_arrays(mode):
    x = np.linspace(-1.0, 1.0, 6).reshape(1, 2, 3)
    jac = sg.jacobian(stacked_bar_of_constant_arrays, mode=mode)
    got = jac(x)
    assert jac.fallback_reason is None, jac.fallback_reason
    np.testing.assert_allclose(got, central_differences(stacked_bar_of_constant_arrays, x),
                               rtol=1e-6, atol=1e-8)
