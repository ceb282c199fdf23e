"""Audit of issue 28 on the current code: the cases no other test covers, and the ones
still wrong. A test marked xfail(strict=True) is a case that is wrong TODAY (a crash, or
an error without the user's line, or an answer where torch/the issue's rule wants an
error); it passes, and so fails strictly, once fixed. Truth is central differences
(float64), the project's own documented convention, or torch's value observed in torch
2.13.0 (CPU, float64; the runtime's reference) and written in here."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.autograd.graph import get_gradient_edge
from srcgrad.errors import CompileError
from tests.conftest import assert_close, numeric_grad

M23 = np.array([[1.0, 2.0, 0.3], [3.0, 5.0, -1.0]])
B22 = np.array([[0.5, -1.0], [2.0, 0.3]])
A22 = np.array([[1.0, 2.0], [3.0, 5.0]])


def _t(values, requires_grad=False):
    return sg.tensor(np.array(values, dtype=np.float64), requires_grad=requires_grad)


def _right_or_refused_here(call, fd, line_text):
    """`call()` equals `fd` (central differences), or raises a CompileError naming this
    file at the line holding `line_text`."""
    try:
        got = call()
    except CompileError as err:
        assert err.filename == __file__, str(err)
        assert line_text in (err.text or ""), str(err)
        return
    assert_close(got, fd, rtol=1e-5, atol=1e-7)


# ---------------------------------------------------------------- item 4: norm(x, 2) of a matrix
def norm_two(A):
    return np.linalg.norm(A, 2)  # audit: norm two


def test_jvp_of_matrix_two_norm_is_right_or_refused_at_the_line():
    """sg.jvp ran the shape-generic code, whose norm could not choose the matrix norm
    (NotImplementedError); a program with such a form now runs NumPy's variant for the
    arguments' shapes (CompiledJvp.entry_at)."""
    v = np.ones_like(M23)
    fd = np.sum(numeric_grad(norm_two, [M23], 0) * v)
    _right_or_refused_here(lambda: sg.jvp(norm_two, (M23,), (v,))[1], fd, "# audit: norm two")


def _fd_of_sg_grad(v, eps=1e-6):
    """Central differences, along v, of sg.grad(norm_two), which
    test_grad_and_hessian_of_matrix_two_norm_are_right checks against differences of
    norm_two (as the composition matrix judges a transform of a transform)."""
    g = sg.grad(norm_two)
    return (g(M23 + eps * v) - g(M23 - eps * v)) / (2 * eps)


def test_jvp_of_grad_of_matrix_two_norm_is_right_or_refused_at_the_line():
    """sg.jvp(sg.grad(f)) traced the gradient's shape-generic code, whose norm leaves the
    matrix norm to run time (NotImplementedError without the user's line); a gradient
    whose generic code cannot stand in for a variant now gives the transform of it its
    variant for the arguments' shapes (Compiled.needs_shapes)."""
    v = np.ones_like(M23)
    _right_or_refused_here(lambda: sg.jvp(sg.grad(norm_two), (M23,), (v,))[1],
                           _fd_of_sg_grad(v), "# audit: norm two")


def test_vmap_of_grad_of_matrix_two_norm_is_right_or_refused_at_the_line():
    """As sg.jvp's: sg.vmap batches the gradient's variant for one example's shapes."""
    batch = np.stack([M23, M23 * 0.5 + 1.0])
    fd = np.stack([numeric_grad(norm_two, [m], 0) for m in batch])
    _right_or_refused_here(lambda: sg.vmap(sg.grad(norm_two))(batch), fd, "# audit: norm two")


def norm_two_of_the_axes(A):
    return np.linalg.norm(A, 2, axis=(0, 1))


def test_the_rewrite_the_error_names_computes_the_second_order():
    """The NotImplementedError's rewrite, axis=(0, 1), is known to be a matrix norm when
    compiling: sg.jvp(sg.grad) and sg.vmap(sg.grad) of it are right."""
    v = np.ones_like(M23)
    got = sg.jvp(sg.grad(norm_two_of_the_axes), (M23,), (v,))[1]
    assert_close(got, _fd_of_grad(v), rtol=1e-4, atol=1e-5)
    batch = np.stack([M23, M23 * 0.5 + 1.0])
    assert_close(sg.vmap(sg.grad(norm_two_of_the_axes))(batch),
                 np.stack([numeric_grad(norm_two, [m], 0) for m in batch]), rtol=1e-5, atol=1e-7)


def _fd_of_grad(v, eps=1e-5):
    """Central differences, along v, of norm_two's central-difference gradient."""
    return (numeric_grad(norm_two, [M23 + eps * v], 0, 1e-4)
            - numeric_grad(norm_two, [M23 - eps * v], 0, 1e-4)) / (2 * eps)


def test_grad_and_hessian_of_matrix_two_norm_are_right():
    assert_close(sg.grad(norm_two)(M23), numeric_grad(norm_two, [M23], 0), rtol=1e-5,
                 atol=1e-7)
    v = np.linspace(0.5, 1.5, M23.size).reshape(M23.shape)
    assert_close(np.tensordot(sg.hessian(norm_two)(M23), v, 2), _fd_of_grad(v), rtol=1e-4,
                 atol=1e-5)


# ---------------------------------------------------------------- item 4 / item 1: einsum's optimize= path
def einsum_path_list(A):
    return np.sum(np.einsum("ij,jk,kl->il", A, B22, A,
                            optimize=["einsum_path", (0, 1), (0, 1)]) ** 2)  # audit: path


@pytest.mark.parametrize("transform", ["grad", "jvp"])
def test_einsum_with_an_explicit_path_is_right_or_refused(transform):
    """An explicit path of three operands is followed step by step
    (numpy_forms._along_path); NumPy raised IndexError before (the whole path reached
    each pairwise einsum)."""
    fd = numeric_grad(einsum_path_list, [A22], 0)
    if transform == "grad":
        call = lambda: sg.grad(einsum_path_list)(A22)  # noqa: E731
    else:
        fd = np.sum(fd)
        call = lambda: sg.jvp(einsum_path_list, (A22,), (np.ones_like(A22),))[1]  # noqa: E731
    _right_or_refused_here(call, fd, "optimize=")


# ---------------------------------------------------------------- the compiler at x ** y's pole
def power(x, y):
    return x ** y


def test_power_pole_on_zero_d_arrays_is_the_documented_value():
    # docs/conventions.md, "Kinks and poles": the compiler's x ** y at x == 0, y == -1 is
    # d/dx -inf (y * x ** (y - 1)) and d/dy nan (inf * 0)
    with np.errstate(all="ignore"):
        gx, gy = sg.grad(power, wrt=(0, 1))(np.array(0.0), np.array(-1.0))
    assert gx == -np.inf and np.isnan(gy)


def test_power_pole_on_numpy_scalars_is_an_answer():
    """np.float64 arguments: the scalar variant made the base a NumPy value before the
    power (passes/scalars._as_numpy); it raised ZeroDivisionError before."""
    zero, minus_one = np.float64(0.0), np.float64(-1.0)
    with np.errstate(all="ignore"):
        assert power(zero, minus_one) == np.inf  # the user's function runs
        gx, gy = sg.grad(power, wrt=(0, 1))(zero, minus_one)
    assert gx == -np.inf and np.isnan(gy)


# ---------------------------------------------------------------- item 3: complex cotangents
def real_sin(x):
    return np.sin(x)


def real_sum(x):
    return np.sum(np.sin(x))


@pytest.mark.parametrize("f, cotangent", [(real_sin, np.ones(2, dtype=complex)),
                                          (real_sum, 1j), (real_sum, np.complex128(2.0))],
                         ids=["array", "python-complex", "numpy-complex"])
def test_complex_cotangent_is_refused(f, cotangent):
    """vjp_fn accepted a complex cotangent and returned a complex gradient for a real
    input (arguments._float_cotangent now refuses it, as a complex tangent is)."""
    _, back = sg.vjp(f, np.ones(2))
    with pytest.raises(TypeError, match="complex"):
        back(cotangent)


# ---------------------------------------------------------------- item 4: one-element outputs, eager side
def test_eager_one_element_output_backward_and_grad_follow_torch():
    # observed in torch 2.13.0: x = [0.5], y = (x ** 3).reshape(1, 1)
    # y.backward() -> x.grad == [0.75]; autograd.grad(y, x) -> ([0.75],)
    x = _t([0.5], True)
    (x ** 3).reshape(1, 1).backward()
    assert x.grad.tolist() == [0.75]
    x = _t([0.5], True)
    assert [g.tolist() for g in sg.autograd.grad((x ** 3).reshape(1, 1), x)] == [[0.75]]


# ---------------------------------------------------------------- item 4: GradientEdge as outputs
@pytest.mark.parametrize("case", ["grad-vector", "grad-0d", "grad-edges-both", "backward"])
def test_gradient_edge_as_output(case):
    """An edge as `outputs=`/`tensors=` raised AttributeError ('_rg'); it is now a root
    (engine_roots._edge_gradient)."""
    a = _t([1.0, 2.0], True)
    if case == "grad-vector":
        b = a * 2
        out = sg.autograd.grad(get_gradient_edge(b), a, grad_outputs=_t([1.0, 1.0]))
        assert [g.tolist() for g in out] == [[2.0, 2.0]]  # observed in torch 2.13.0
    elif case == "grad-0d":
        s = _t(2.0, True)
        out = sg.autograd.grad(get_gradient_edge(s * 3), s)
        assert [g.tolist() for g in out] == [3.0]  # observed in torch 2.13.0
    elif case == "grad-edges-both":
        b = a * 3
        out = sg.autograd.grad([get_gradient_edge(b)], [get_gradient_edge(a)],
                               grad_outputs=[_t([1.0, 2.0])])
        assert [g.tolist() for g in out] == [[3.0, 6.0]]  # observed in torch 2.13.0
    else:
        b = a * 3
        sg.autograd.backward(get_gradient_edge(b), grad_tensors=_t([1.0, 1.0]))
        assert a.grad.tolist() == [3.0, 3.0]  # observed in torch 2.13.0


def test_materialize_grads_with_a_gradient_edge_follows_torch_2_13():
    a = _t([1.0, 2.0], True)
    b = a * 2
    y = (b * b).sum()
    c = a * 3
    # observed in torch 2.13.0: RuntimeError "materialize_grads cannot be used when the
    # given input is a GradientEdge"
    with pytest.raises(RuntimeError, match="materialize_grads cannot be used when the given "
                       "input is a GradientEdge"):
        sg.autograd.grad(y, [get_gradient_edge(c)], allow_unused=True, materialize_grads=True)
