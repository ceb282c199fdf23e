"""`np.linalg.svd`'s keyword forms (issue 29, §1: "linalg.svd (also compute_uv=False)").
`compute_uv=False` is the singular values alone, the `svdvals` row; compute_uv=True
passed by name is the svd row; hermitian=True is refused with a rewrite that compiles
(srcgrad.frontend.numpy_forms.svd). Checked against central differences in float64:
first and second order, reverse and forward mode, a matrix and a stack of them."""

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.errors import CompileError

RNG = np.random.default_rng(3)
POINTS = {"tall": RNG.standard_normal((4, 3)), "stack": RNG.standard_normal((2, 3, 4))}


def values_by_name(a):
    return np.sum(np.linalg.svd(a, compute_uv=False) ** 3)


def values_by_position(a):
    return np.sum(np.sin(np.linalg.svd(a, False, False)))


def factors_by_name(a):
    u, s, vh = np.linalg.svd(a, full_matrices=False, compute_uv=True, hermitian=False)
    return np.sum(s * s * s) + np.sum(u[..., :3, 0] ** 2 * vh[..., 0, :3] ** 2)


def numeric_gradient(f, x, h=1e-6):
    out = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = h
        out[i] = (f(x + e) - f(x - e)) / (2 * h)
    return out


FUNCTIONS = [values_by_name, values_by_position, factors_by_name]


@pytest.mark.parametrize("point", sorted(POINTS))
@pytest.mark.parametrize("f", FUNCTIONS, ids=[f.__name__ for f in FUNCTIONS])
def test_gradient_equals_central_differences(f, point):
    x = POINTS[point]
    want = numeric_gradient(f, x)
    np.testing.assert_allclose(sg.grad(f)(x), want, rtol=1e-6, atol=1e-7)
    u = np.cos(np.arange(x.size)).reshape(x.shape)
    _, tangent = sg.jvp(f, (x,), (u,))
    np.testing.assert_allclose(tangent, np.sum(want * u), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("f", FUNCTIONS, ids=[f.__name__ for f in FUNCTIONS])
def test_second_order_equals_differences_of_the_gradient(f):
    x = POINTS["tall"]
    grad = sg.grad(f)
    want = np.stack([numeric_gradient(lambda y, i=i: grad(y)[i], x) for i in np.ndindex(x.shape)])
    np.testing.assert_allclose(sg.hessian(f)(x).reshape(want.shape), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(sg.jacobian(sg.grad(f), mode="forward")(x).reshape(want.shape),
                               want, rtol=1e-5, atol=1e-6)


def hermitian(a):
    return np.sum(np.linalg.svd(a @ a.T, hermitian=True)[1])


def test_hermitian_is_refused_with_a_rewrite():
    with pytest.raises(CompileError, match="hermitian=True") as err:
        sg.grad(hermitian)(POINTS["tall"])
    assert "drop `hermitian=True`" in str(err.value)


def test_a_constant_matrix_runs_as_numpy():
    def f(x):
        return x * np.sum(np.linalg.svd(np.eye(3) * 2.0, compute_uv=False, hermitian=True))
    assert sg.grad(f)(1.5) == pytest.approx(6.0)
