"""Writes through views that are not basic indexes (Note [Views the compiler does not
follow] in srcgrad.frontend.mutation): np.flip/fliplr/flipud/rot90/matrix_transpose are
views in NumPy, so a write through one changes the base and a write into the base changes
the view; each is judged by NumPy's own value and central differences. Rules whose result
may be the operand itself or a view the compiler does not model (atleast_#d, split) leave
the other side unreadable (a CompileError at the line), and a write into a read-only view
is refused as NumPy raises."""

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.errors import CompileError


def flip_written(x1, x2):  # fuzz seed 2630553, shrunk: the write through flip was lost
    for r1, r2 in zip(x2, np.flip(x2, axis=0)):
        r1[0:1] += r2.reshape((1,)) > 0.25
        r2[0:1] = 0.25
    w4 = x1.T
    w4[0:1] = x2
    return np.sum(x1)


def write_through_flip(x, y):
    v = np.flip(x, axis=0)
    v[0] = y * 3.0
    return np.sum(x * np.arange(1.0, 1.0 + x.size).reshape(x.shape))


def write_through_fliplr(x, y):
    v = np.fliplr(x)
    v[:, 0] *= y
    return np.sum(np.sin(x))


def write_through_flipud(x, y):
    v = np.flipud(x)
    v[1:] += y
    return np.sum(x ** 2)


def write_through_rot90(x, y):
    v = np.rot90(x)
    v[0] = y
    return np.sum(x * np.arange(1.0, 1.0 + x.size).reshape(x.shape))


def write_through_matrix_transpose(x, y):
    v = np.matrix_transpose(x)
    v[0] *= y
    return np.sum(np.cos(x))


def base_written_under_flip(x, y):
    v = np.flip(x, axis=1)
    x[0, 0] = y
    return np.sum(v * np.arange(1.0, 1.0 + x.size).reshape(x.shape))


def base_written_under_rot90(x, y):
    v = np.rot90(x, 2)
    x *= y
    return np.sum(v[0] ** 3)


CASES = [write_through_flip, write_through_fliplr, write_through_flipud, write_through_rot90,
         write_through_matrix_transpose, base_written_under_flip, base_written_under_rot90]


def _numeric(f, x, y, eps=1e-6):
    gx = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        gx[i] = (f(xp, y) - f(xm, y)) / (2 * eps)
    gy = (f(x.copy(), y + eps) - f(x.copy(), y - eps)) / (2 * eps)
    return gx, gy


@pytest.mark.parametrize("f", CASES, ids=lambda f: f.__name__)
def test_a_write_through_a_flip_or_rotation_is_numpys(f):
    x, y = np.random.default_rng(3).standard_normal((3, 3)), 0.7
    value, (gx, gy) = sg.value_and_grad(f, wrt=(0, 1))(x, y)
    assert value == pytest.approx(f(x.copy(), y), rel=1e-12)
    nx, ny = _numeric(f, x, y)
    np.testing.assert_allclose(gx, nx, rtol=1e-6, atol=1e-7)
    assert float(gy) == pytest.approx(ny, rel=1e-6, abs=1e-7)


def test_the_fuzz_program_of_seed_2630553():
    x1, x2 = np.array([[0.833383, 0.728026]]), np.array([[-0.443468]])
    value, (g1, g2) = sg.value_and_grad(flip_written, wrt=(0, 1))(x1, x2)
    assert value == pytest.approx(flip_written(x1.copy(), x2.copy()), rel=1e-12)  # 0.978026
    assert g1.tolist() == [[0.0, 1.0]] and g2.tolist() == [[0.0]]  # x2 is overwritten


def read_base_after_atleast_2d_write(x):
    v = np.atleast_2d(x)
    v[0, 0] = 1.0
    return np.sum(x)


def read_view_after_split_base_write(x):
    a, b = np.split(x, 2)
    x[0] = 5.0
    return np.sum(a)


def write_broadcast_to(x):
    v = np.broadcast_to(x, (2, 3))
    v[0, 0] = 1.0
    return np.sum(v)


@pytest.mark.parametrize("f", [read_base_after_atleast_2d_write, read_view_after_split_base_write],
                         ids=lambda f: f.__name__)
def test_a_view_the_compiler_does_not_follow_is_refused_where_read(f):
    with pytest.raises(CompileError) as err:
        sg.grad(f)(np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]) if "atleast" in f.__name__
                   else np.array([1.0, 2.0, 3.0, 4.0]))
    assert "test_views_written.py" in str(err.value)


def test_a_write_into_a_read_only_view_is_refused():
    with pytest.raises(ValueError):  # NumPy: assignment destination is read-only
        write_broadcast_to(np.ones(3))
    with pytest.raises(CompileError, match="read-only view"):
        sg.grad(write_broadcast_to)(np.ones(3))
