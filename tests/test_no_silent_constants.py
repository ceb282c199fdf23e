"""No silent constants (DESIGN.md decision 12, Note [No silent constants] in
srcgrad.passes.activity): a construct whose value depends on a differentiated input
either gets the derivative central differences give, or is refused with a CompileError
naming this file and the construct's line. Never a zero or constant gradient.

The table holds the constructs issue 28 found silently wrong (np.r_, np.c_, einsum's
sublist form gave zeros) or crashing (einsum of three operands, 'ii' at second order,
norm 'nuc' / 2 of a matrix, np.average with weights), and their neighbours (index
objects, a user object's __getitem__, NumPy functions written in Python with traced
arguments, rows' arguments that have no derivative formula). The sweep calls every
public callable of `numpy` (and `numpy.linalg`) on one float array."""

from __future__ import annotations

import contextlib
import io
import sys
import warnings

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.errors import CompileError
from tests.conftest import assert_close, numeric_grad

C = np.array([1.5, -2.0])
M = np.arange(6.0).reshape(2, 3) - 2.0
W2 = np.array([[0.5, -1.0], [2.0, 0.25]])


class Lookup:
    """A user object whose __getitem__ srcgrad cannot read."""

    def __getitem__(self, key):
        return key * 2.0


class Scale:
    def __call__(self, v):
        return v * 3.0


LOOKUP, SCALE = Lookup(), Scale()


def r_vector(x):
    return np.sum(np.r_[x, C] ** 2)


def r_scalar_and_range(x):
    return np.sum(np.r_[x, 2.0, 0:3] * np.r_[x, C, C])


def r_matrix(x):
    return np.sum(np.r_[np.outer(x, x), M[:, :2]] ** 2)


def c_vector(x):
    return np.sum(np.c_[x, C] * W2)


def c_matrix(x):
    return np.sum(np.c_[np.outer(x, x), C] ** 3)


def s_static(x):
    return np.sum(x[np.s_[1:]] ** 2)


def s_traced_index(x):
    return x[np.s_[np.argmax(x)]] ** 3


def r_list_item(x):
    return np.sum(np.r_[[1.0, 2.0], x] ** 2)


def ix_static(A):
    return np.sum(A[np.ix_([0, 1], [1, 2])] ** 2)


def index_exp_static(A):
    return np.sum(A[np.index_exp[1, :]] ** 2)


def user_getitem(x):
    return np.sum(LOOKUP[x])  # refused


def user_call(x):
    return np.sum(SCALE(x))  # refused


def einsum_sublist(A):
    return np.sum(np.einsum(A, (0, 1), (1, 0)) * M.T)


def einsum_sublist_two(A):
    return np.sum(np.einsum(A, [0, 1], A, [2, 1], [0, 2]) ** 2)


def einsum_sublist_implicit(A):
    return np.sum(np.einsum(A, [30, 1]) * M.T)  # (NumPy's letters: output 1, 30 sorted)


def einsum_three(A):
    return np.sum(np.einsum("ij,kj,kl->il", A, A, M) ** 2)


def einsum_three_implicit(A):
    return np.einsum("ij,jk,ki", A, A.T, A @ A.T)


def einsum_trace(S):
    return np.einsum("ii", S) * np.sum(S)


def einsum_trace_only(S):
    return np.einsum("ii", S)


def einsum_optimize(A):
    return np.sum(np.einsum("ij,kj->ik", A, A, optimize=True) ** 2)


def norm_nuc(A):
    return np.linalg.norm(A, "nuc")  # right or refused


def norm_two_matrix(A):
    return np.linalg.norm(A, 2)  # right or refused


def norm_inf_axes(A):
    return np.linalg.norm(A, np.inf, axis=(0, 1))


def norm_fro(A):
    return np.linalg.norm(A, "fro")


def norm_vector_p(x):
    return np.linalg.norm(x, 3)


def average_weights(x):
    return np.average(x, weights=x ** 2 + 1.0)


def average_axis(A):
    return np.sum(np.average(A, axis=1, weights=np.array([1.0, 2.0, 3.0])) ** 2)


def average_plain(A):
    return np.sum(np.average(A, axis=0) ** 2)


def cov_traced(x):
    return np.sum(np.cov(x))  # right or refused


def linspace_traced(x):
    return np.sum(np.linspace(0.0, x[0], 5))  # right or refused


def pad_constant_traced(x):
    return np.sum(np.pad(x, 1, constant_values=x[0]))  # refused


def arange_traced(x):
    return np.sum(np.arange(x[0], x[0] + 3.0))  # refused


def vectorize_traced(x):
    return np.sum(np.vectorize(np.sin)(x))  # right or refused


def polyval_traced(x):
    return np.polyval(x, 2.0)  # right or refused


x2 = np.array([0.3, -1.2])
A23 = np.array([[1.0, 2.0, 0.5], [0.3, -1.0, 2.0]])
S22 = np.array([[1.0, 2.0], [0.3, -1.5]])
CASES = [
    (r_vector, x2), (r_scalar_and_range, x2), (r_matrix, x2), (c_vector, x2),
    (c_matrix, x2), (s_static, x2), (s_traced_index, x2), (r_list_item, x2),
    (ix_static, A23), (index_exp_static, A23),
    (user_getitem, x2), (user_call, x2), (einsum_sublist, A23), (einsum_sublist_two, A23),
    (einsum_sublist_implicit, A23), (einsum_three, A23), (einsum_three_implicit, A23),
    (einsum_trace, S22), (einsum_trace_only, S22),
    (einsum_optimize, A23), (norm_nuc, A23), (norm_two_matrix, A23), (norm_inf_axes, A23),
    (norm_fro, A23), (norm_vector_p, x2), (average_weights, x2), (average_axis, A23),
    (average_plain, A23), (cov_traced, x2), (linspace_traced, x2),
    (pad_constant_traced, x2), (arange_traced, x2), (vectorize_traced, x2),
    (polyval_traced, x2),
]


def _body_line(fn) -> tuple[int, str]:
    import inspect

    lines, start = inspect.getsourcelines(fn)
    return start + len(lines) - 1, lines[-1]


def _mode(fn) -> str:
    """A case marked `# refused` must be refused, one marked `# right or refused` (a NumPy
    function written in Python, which a row may come to cover) may be either; every other
    case must be right (a refusal of a construct srcgrad differentiates is a regression)."""
    text = _body_line(fn)[1]
    return "either" if "# right or refused" in text else "refused" if "# refused" in text \
        else "right"


def _refused(fn, transform) -> bool:
    """Whether `fn` is refused (checked at its line) where it must or may be."""
    mode = _mode(fn)
    if mode == "right":
        return False
    try:
        transform()
    except CompileError as err:
        _check_refusal(err, fn)
        return True
    except NotImplementedError as err:  # a matrix norm whose rank is not known when
        # compiling (sg.jvp traces without shape facts): refused when its derivative
        # runs, naming the ord
        assert "linalg.norm(..., ord=" in str(err), str(err)
        return True
    assert mode == "either", f"{fn.__name__} was not refused"
    return False


def _check_refusal(err: CompileError, fn):
    line, text = _body_line(fn)
    assert err.filename == __file__, str(err)
    assert err.lineno == line, str(err)
    assert err.text.strip() == text.strip(), str(err)


@pytest.mark.parametrize("fn, x", CASES, ids=[f.__name__ for f, _ in CASES])
def test_reverse_mode_is_right_or_refused_at_the_line(fn, x):
    if _refused(fn, lambda: sg.grad(fn)(x)):
        return
    expected = numeric_grad(fn, [x], 0)
    assert np.any(expected != 0)  # (the case tests a derivative, not a zero)
    assert_close(sg.grad(fn)(x), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("fn, x", CASES, ids=[f.__name__ for f, _ in CASES])
def test_forward_mode_is_right_or_refused_at_the_line(fn, x):
    v = np.linspace(0.5, 1.5, x.size).reshape(x.shape)
    if _refused(fn, lambda: sg.jvp(fn, (x,), (v,))):
        return
    eps = 1e-6
    expected = (fn(x + eps * v) - fn(x - eps * v)) / (2 * eps)
    _, tangent = sg.jvp(fn, (x,), (v,))
    assert_close(tangent, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("fn, x", [(einsum_trace, S22), (einsum_trace_only, S22), (einsum_three, A23),
                                   (einsum_sublist_two, A23), (r_vector, x2),
                                   (c_matrix, x2), (average_weights, x2)],
                         ids=lambda v: getattr(v, "__name__", ""))
def test_second_order_is_right(fn, x):
    """`einsum('ii', S)`'s gradient crashed when differentiated again (einsum_bar of a
    Python-float cotangent)."""
    hess = sg.hessian(fn)(x)
    expected = np.stack([numeric_grad(lambda y, i=i: sg.grad(fn)(y).reshape(-1)[i], [x], 0)
                         for i in range(x.size)]).reshape(x.shape + x.shape)
    assert_close(hess, expected, rtol=1e-4, atol=1e-5)


def test_average_gradient_reaches_the_weights():
    def weighted(x, w):
        return np.average(x, weights=w)

    x, w = np.array([0.3, -1.2, 2.0]), np.array([1.0, 3.0, 0.5])
    gx, gw = sg.grad(weighted, wrt=(0, 1))(x, w)
    assert_close(gx, numeric_grad(weighted, [x, w], 0))
    assert_close(gw, numeric_grad(weighted, [x, w], 1))


def test_a_refusal_names_the_argument_without_a_derivative():
    with pytest.raises(CompileError, match="constant_values"):
        sg.grad(pad_constant_traced)(x2)


def test_an_inactive_operand_there_is_not_refused():
    """The refusal is of differentiated values only: `constant_values` of an argument not
    differentiated is a constant of the gradient, truly."""
    def padded(x, c):
        return np.sum(np.pad(x, 1, constant_values=c) ** 2)

    assert_close(sg.grad(padded)(x2, np.float64(0.5)), numeric_grad(padded, [x2, 0.5], 0))


# ---------------------------------------------------------------------- the sweep
_SKIP_PREFIXES = ("set", "save", "load", "from", "get", "show", "print", "info", "test",
                  "source", "genfromtxt", "loadtxt", "memmap", "lookfor", "who", "disp")


def _public_callables(namespace, prefix):
    names = []
    for name in sorted(dir(namespace)):
        obj = getattr(namespace, name, None)
        if name.startswith("_") or name.startswith(_SKIP_PREFIXES) or not callable(obj) \
                or isinstance(obj, type):
            continue
        names.append(f"{prefix}{name}")
    return names


# Rows that read one triangle of a symmetric argument and give the symmetrized gradient
# (their docs in srcgrad.rules.table): differences of one entry see the triangle only.
_SYMMETRIZED = {"cholesky", "eigh", "eigvalsh"}


@pytest.fixture(scope="module")
def sweep_module(tmp_path_factory):
    """One function `f_<name>(x) = np.sum(np.<name>(x))` per public callable, in a file
    (srcgrad reads source)."""
    names = _public_callables(np, "") + _public_callables(np.linalg, "linalg.")
    source = ["import numpy as np"] + [
        f"def f_{n.replace('.', '_')}(x):\n    return np.sum(np.{n}(x))" for n in names]
    path = tmp_path_factory.mktemp("sweep") / "numpy_sweep.py"
    path.write_text("\n".join(source) + "\n")
    sys.path.insert(0, str(path.parent))
    try:
        import numpy_sweep
        yield names, numpy_sweep
    finally:
        sys.path.remove(str(path.parent))
        sys.modules.pop("numpy_sweep", None)


@pytest.mark.parametrize("x", [np.array([0.3, 0.7, 0.45]),
                               np.array([[0.3, 0.7, 0.45], [0.2, 0.55, 0.9], [0.1, 0.35, 0.8]])],
                         ids=["vector", "matrix"])
def test_every_numpy_function_of_one_array_is_right_or_refused(sweep_module, x):
    """For each public NumPy callable f that NumPy can call as f(x): sg.grad of
    np.sum(f(x)) equals central differences, or is refused with a CompileError or a
    TypeError. A wrong value (zeros where the differences are not) fails."""
    names, module = sweep_module
    wrong, crashed, checked, right = [], [], 0, 0
    for name in names:
        fn = getattr(module, "f_" + name.replace(".", "_"))
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            try:
                expected = numeric_grad(fn, [x], 0)
            except Exception:  # noqa: BLE001 (NumPy refuses f(x): not a case)
                continue
            if not np.all(np.isfinite(expected)):
                continue
            checked += 1
            try:
                got = sg.grad(fn)(x.copy())
            except (CompileError, TypeError):
                continue
            except Exception as err:  # noqa: BLE001
                crashed.append(f"{name}: {type(err).__name__}: {err}")
                continue
        got = np.asarray(got, dtype=float)
        if name.split(".")[-1] in _SYMMETRIZED:  # compare the symmetric parts
            got, expected = got + got.T, expected + expected.T
        if got.shape != x.shape or not np.allclose(got, expected, rtol=1e-4, atol=1e-5):
            wrong.append(f"{name}: srcgrad {got.tolist()} vs differences {expected.tolist()}")
        else:
            right += 1
    assert not wrong and not crashed, "\n".join(wrong + crashed)
    assert checked > 100 and right > 60  # (the sweep reaches the table, not only refusals)


def average_returned(x):
    avg, total = np.average(x, weights=x ** 2 + 1.0, returned=True)
    return avg * total


def average_returned_plain(A):
    avg, count = np.average(A, axis=0, returned=True)
    return np.sum(avg * count)


@pytest.mark.parametrize("fn, x", [(average_returned, x2), (average_returned_plain, A23)],
                         ids=["weights", "no_weights"])
def test_average_returned_gives_numpys_pair(fn, x):
    assert_close(sg.jvp(fn, (x,), (np.ones_like(x),))[0], fn(x))
    assert_close(sg.grad(fn)(x), numeric_grad(fn, [x], 0), rtol=1e-5, atol=1e-6)
