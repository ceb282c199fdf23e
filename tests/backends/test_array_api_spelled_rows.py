"""Rows the Array API lacks, spelled by helpers as NumPy computes them (polyval by Horner's
rule, kron as interleaved blocks, trapezoid with a uniform dx, convolve in 'full' mode,
frexp's exponent from log2, einsum as matmuls), and a vector's norm of any ord with no axis
(srcgrad.codegen.spellings): sg.grad on array_api_strict arrays equals sg.grad on NumPy's
(which tests/rules gradchecks), and each helper equals NumPy's function, edges included.
Before, each was refused ("has no equivalent in array_api_strict"), among the most
frequent refusals of fuzz campaign 2790000."""

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.rules.helpers import (
    convolve_full,
    einsum_contract,
    frexp_exponent,
    kron_blocks,
    polyval_horner,
    trapezoid_uniform,
)

xs = pytest.importorskip("array_api_strict")


def polynomial(p, x):
    return np.sum(np.polyval(p, x) ** 2) + np.polyval(p, 0.5)


def kronecker(a, b):
    return np.sum(np.kron(a, b) ** 2) + np.sum(np.kron(a[0], b))


def integral(a, b):
    return np.trapezoid(a * a, dx=0.5).sum() + np.trapezoid(b, axis=0).sum()


def convolution(a, b):
    return np.sum(np.convolve(a[0], b[:, 0]) ** 2) + np.sum(np.convolve(b[:2, 1], a[1]))


def vector_norms(a, b):  # no axis, of a vector: a vector norm of the ord given
    v = a[0] * b[:, 0]
    return np.linalg.norm(v, ord=1) + np.linalg.norm(v, 3) + np.linalg.norm(v, np.inf) + np.linalg.norm(
        v, 0.5)


def contractions(a, b):  # einsum's grammar: implicit output, '...', a trace, three operands
    return (np.sum(np.einsum("ij,jk->ik", a, b) ** 2) + np.einsum("ij,ji", a, b)
            + np.sum(np.einsum("...i,i->...", a, b[:, 0])) + np.einsum("ii", b[:2] @ a[:, :2])
            + np.sum(np.einsum("ij,kj,k->i", a, a, b[:2, 1]) ** 2))


def mantissa(a, b):
    return np.sum(np.frexp(a)[0] * b[0, :1]) + np.sum(np.ldexp(a, np.frexp(a)[1]) * b[1, 0])


rng = np.random.default_rng(1)
A, B = rng.standard_normal((2, 3)), rng.standard_normal((3, 2))


@pytest.mark.parametrize("fn,args", [(polynomial, (rng.standard_normal(4), A)), (kronecker, (A, B)),
                                     (integral, (A, B)), (convolution, (A, B)), (mantissa, (A, B)),
                                     (vector_norms, (A, B)), (contractions, (A, B))],
                         ids=lambda v: getattr(v, "__name__", ""))
def test_as_numpy_on_the_array_api(fn, args):
    want = sg.grad(fn, wrt=(0, 1))(*[a.copy() for a in args])
    got = sg.grad(fn, wrt=(0, 1))(*[xs.asarray(a.copy()) for a in args])
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-12, atol=1e-15)


def test_the_helpers_are_numpys():
    r = np.random.default_rng(0)
    x = np.concatenate([r.standard_normal(50) * 10.0 ** r.integers(-300, 300, 50),
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, 0.5, 2.0 ** -1074,
                         np.finfo(float).max, np.nextafter(1.0, 0), np.nextafter(2.0, 0)]])
    e = np.asarray(frexp_exponent(xs.asarray(x)))
    assert e.dtype == np.frexp(x)[1].dtype and np.array_equal(e, np.frexp(x)[1])
    p, X = r.standard_normal(4), r.standard_normal((2, 3))
    np.testing.assert_allclose(np.asarray(polyval_horner(xs.asarray(p), xs.asarray(X))), np.polyval(p, X))
    for sa, sb in [((2, 3), (4,)), ((3,), (2, 2)), ((2, 2), (3, 2)), ((), (3,))]:
        a, b = r.standard_normal(sa), r.standard_normal(sb)
        np.testing.assert_allclose(np.asarray(kron_blocks(xs.asarray(a), xs.asarray(b))), np.kron(a, b))
    Y = r.standard_normal((3, 4))
    for shape, axis in [((3, 4), 0), ((3, 4), -1), ((2, 1), 1), ((2, 0), 1)]:
        Y = r.standard_normal(shape)
        np.testing.assert_allclose(np.asarray(trapezoid_uniform(xs.asarray(Y), 0.5, axis)),
                                   np.trapezoid(Y, dx=0.5, axis=axis))
    for n, m in [(5, 3), (3, 5), (1, 4), (4, 4)]:
        a, v = r.standard_normal(n), r.standard_normal(m)
        np.testing.assert_allclose(np.asarray(convolve_full(xs.asarray(a), xs.asarray(v))), np.convolve(a, v))


def test_a_matrix_norm_is_refused_when_called():
    """A matrix norm other than the Frobenius norm is a composition of singular values in a
    NumPy variant, whose shapes are known; the shape-generic code of another namespace
    raises srcgrad's NotImplementedError when the array turns out to be a matrix."""
    def spectral(a):
        return np.linalg.norm(a, ord=2)
    with pytest.raises(NotImplementedError, match="supported on NumPy arrays only"):
        sg.grad(spectral)(xs.asarray(A.copy()))


@pytest.mark.parametrize("subscripts,shapes", [
    ("ij,jk->ik", [(2, 3), (3, 4)]), ("ij,jk", [(2, 3), (3, 4)]), ("i,i->", [(3,), (3,)]),
    ("ii->i", [(3, 3)]), ("ii", [(3, 3)]), ("ij->", [(2, 3)]), ("...ij,...jk->...ik", [(5, 2, 3), (3, 4)]),
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 4)]), ("i,j->ij", [(2,), (3,)]), ("iij->j", [(2, 2, 3)]),
    ("ij,kj,k->i", [(2, 3), (4, 3), (4,)]), ("...i,...i->...", [(2, 1, 3), (4, 3)]),
    ("ijk,jil->kl", [(2, 3, 4), (3, 2, 5)]), ("a,b,c->abc", [(2,), (3,), (1,)]), ("iji->j", [(2, 3, 2)]),
    (",->", [(), ()]), ("i,->i", [(3,), ()])])
def test_einsum_as_matmuls_is_numpys(subscripts, shapes):
    ops = [np.random.default_rng(3).standard_normal(s) for s in shapes]
    got = np.asarray(einsum_contract(subscripts, *[xs.asarray(o) for o in ops]))
    want = np.einsum(subscripts, *ops)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def correlations(a, b):  # its composition over convolve: lengths as Python ints (fuzz
    x, v = a[0], b[:, 0] * a[1, :1]  # seed 2805139: np.minimum of them made 0-d arrays)
    return sum(np.sum(np.correlate(p, q, mode) ** 2) for p, q in ((x, v), (x[:2], v), (v, x[:2]))
               for mode in ("valid", "same", "full"))


def python_bools(a, b):  # a comparison of Python ints beside an array is int(...) there
    n = a.shape[1]
    return (n > 2) * np.sum(a * b.T) + np.sum(a * (n < 2)) + (n == 3) * a[0, 0]


@pytest.mark.parametrize("fn", [correlations, python_bools], ids=lambda f: f.__name__)
def test_shape_arithmetic_on_the_array_api(fn):
    want = sg.grad(fn, wrt=(0, 1))(A.copy(), B.copy())
    got = sg.grad(fn, wrt=(0, 1))(xs.asarray(A.copy()), xs.asarray(B.copy()))
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-12, atol=1e-15)
