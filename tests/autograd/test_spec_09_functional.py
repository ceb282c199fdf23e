"""The functional API on sg.Tensor (spec/torch_semantics.md §9; srcgrad.autograd.functional).

Values are checked against central differences of the same functions run on NumPy
arrays (each test function below is written with NumPy calls and operators, so it runs
on both), torch's printed values where the spec gives them. `vectorize=True` is checked
to give the values of `vectorize=False`, to call the user's function once and to run one
backward (one forward-mode pass); the batch of seeds it runs on (srcgrad.autograd.batching)
is checked on every row of the rule table against one call per seed.
"""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.autograd import batching, engine
from srcgrad.autograd import functional as F
from srcgrad.autograd.batching import Batched, BatchingError
from srcgrad.kernels import op_kernel
from tests.autograd.spec_util import check, const, exact, leaf, shape_re, val
from tests.kernels.test_op_kernels import _active, _split
from tests.rules import evaluate as ev
from tests.rules.cases import case_ids, differentiable_cases

X = [1.0, 2.0]
Y = [3.0, 4.0]
EPS = 1e-6
MODES = [dict(vectorize=False), dict(vectorize=True),
         dict(vectorize=True, strategy="forward-mode")]
MODE_IDS = ["rows", "vectorized", "forward-mode"]


def x_():
    return const(X)


def y_():
    return const(Y)


# ---------------------------------------------------------------- central differences
def fd_jacobian(f, arrays, i, j, eps=EPS):
    """d f(*arrays)[i] / d arrays[j] by central differences: shape out.shape + in.shape."""
    def outs(args):
        o = f(*args)
        return [np.asarray(v, np.float64) for v in (o if isinstance(o, tuple) else (o,))]
    base = arrays[j]
    cols = []
    for k in range(base.size):
        step = np.zeros(base.size)
        step[k] = eps
        plus = list(arrays)
        minus = list(arrays)
        plus[j] = base + step.reshape(base.shape)
        minus[j] = base - step.reshape(base.shape)
        cols.append((outs(plus)[i] - outs(minus)[i]) / (2 * eps))
    out_shape = outs(arrays)[i].shape
    return np.stack(cols, axis=-1).reshape(out_shape + base.shape)


def fd_hessian(f, arrays, i, j):
    """d^2 f / d arrays[i] d arrays[j] (f scalar) by central differences of the gradient
    (a larger step at each level: the rounding error of nested differences is eps^-2)."""
    def grad_i(*args):
        return fd_jacobian(lambda *a: np.sum(f(*a)), list(args), 0, i, eps=1e-4)
    return fd_jacobian(grad_i, arrays, 0, j, eps=1e-4)


# Functions written with NumPy calls and operators: they run on Tensors and on arrays.
def f_two_in_two_out(x, w):
    h = np.tanh(x @ w)
    return h * 2.0 - np.sin(x).sum(), np.exp(w[0, 1:]) * h[1:2, :2].sum()


def f_scalar(x, w):
    return np.sum(np.log1p((x @ w) ** 2)) + np.sum(x * x * x)


ARRAYS = [np.array([[0.3, -0.4, 0.5], [0.1, 0.9, -0.7]]),
          np.array([[0.2, 0.4, -0.1, 0.6], [0.5, -0.3, 0.8, 0.1], [-0.2, 0.7, 0.3, 0.4]])]


def tensors():
    return tuple(const(a) for a in ARRAYS)


# ---------------------------------------------------------------- §9 (c) cases
@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_jacobian_spec_cases(mode):
    check(F.jacobian(lambda x: x ** 2, x_(), **mode), [[2, 0], [0, 4]])
    one = F.jacobian(lambda x: x ** 2, (x_(),), **mode)
    assert isinstance(one, tuple) and len(one) == 1
    check(one[0], [[2, 0], [0, 4]])
    jac = F.jacobian(lambda x, y: (x * y, x + y), (x_(), y_()), **mode)
    assert isinstance(jac, tuple) and all(isinstance(r, tuple) and len(r) == 2 for r in jac)
    check(jac[0][0], [[3, 0], [0, 4]])
    check(jac[0][1], [[1, 0], [0, 2]])
    check(jac[1][0], np.eye(2))
    check(jac[1][1], np.eye(2))


@pytest.mark.parametrize("mode", [dict(), dict(vectorize=True),
                                  dict(vectorize=True, outer_jacobian_strategy="forward-mode")],
                         ids=["rows", "vectorized", "forward-over-reverse"])
def test_hessian_spec_cases(mode):
    check(F.hessian(lambda x: (x ** 3).sum(), x_(), **mode), [[6, 0], [0, 12]])
    h = F.hessian(lambda x, y: (x * y).sum(), (x_(), y_()), **mode)
    check(h[0][0], np.zeros((2, 2)))
    check(h[0][1], np.eye(2))
    check(h[1][0], np.eye(2))
    check(h[1][1], np.zeros((2, 2)))


def test_vjp_jvp_vhp_hvp_spec_cases():
    out, v = F.vjp(lambda x: x ** 2, x_(), sg.ones(2, dtype=np.float64))
    check(out, [1, 4])
    check(v, [2, 4])
    out, v = F.vjp(lambda x: (x ** 3).sum(), x_())
    check(out, 9.0)
    check(v, [3, 12])
    with pytest.raises(RuntimeError, match=exact(
            "The vector v can only be None if the user-provided function returns a single Tensor "
            "with a single element.")):
        F.vjp(lambda x: x ** 2, x_())
    out, t = F.jvp(lambda x: x ** 2, x_(), const([1.0, 0.0]))
    check(out, [1, 4])
    check(t, [2, 0])

    def f(x):
        return (x ** 3).sum()
    for fn in (F.vhp, F.hvp):
        out, r = fn(f, x_(), const([1.0, 0.0]))
        check(out, 9.0)
        check(r, [6, 0])


def test_strict_spec_cases():
    with pytest.raises(RuntimeError, match=exact(
            "Output 0 of the user-provided function does not require gradients. The outputs must "
            "be computed in a differentiable manner from the input when running in strict mode.")):
        F.jacobian(lambda x: sg.ones(2, dtype=np.float64), x_(), strict=True)
    check(F.jacobian(lambda x: sg.ones(2, dtype=np.float64), x_()), np.zeros((2, 2)))
    with pytest.raises(RuntimeError, match=exact(
            "While computing the hessian, found that the jacobian of the user-provided function "
            "with respect to input 0 is independent of the input. This is not allowed in strict "
            "mode. You should ensure that your function is twice differentiable and that the "
            "jacobian depends on the inputs (this would be violated by a linear function for "
            "example).")):
        F.hessian(lambda x: (2 * x).sum(), x_(), strict=True)


# ---------------------------------------------------------------- §9 (b) errors
def test_input_and_output_type_errors():
    with pytest.raises(TypeError, match=exact(
            "The inputs given to jacobian must be either a Tensor or a tuple of Tensors but the "
            "given inputs has type <class 'list'>.")):
        F.jacobian(lambda x: x, [x_()])
    with pytest.raises(TypeError, match=exact(
            "The inputs given to vjp must be either a Tensor or a tuple of Tensors but the value "
            "at index 1 has type <class 'int'>.")):
        F.vjp(lambda x, y: x, (x_(), 1))
    with pytest.raises(TypeError, match=exact(
            "The outputs of the user-provided function given to jacobian must be either a Tensor "
            "or a tuple of Tensors but the value at index 1 has type <class 'str'>.")):
        F.jacobian(lambda x: (x, "a"), x_())


def test_strict_errors():
    with pytest.raises(RuntimeError, match=exact(
            "The output of the user-provided function is independent of input 0. This is not "
            "allowed in strict mode.")):
        F.vjp(lambda x, y: y * 2, (x_(), leaf(Y)), const([1.0, 1.0]), strict=True)
    with pytest.raises(RuntimeError, match=exact(
            "The jacobian of the user-provided function is independent of input 0. This is not "
            "allowed in strict mode when create_graph=True.")):
        F.jacobian(lambda x: x * 2, x_(), strict=True, create_graph=True)
    with pytest.raises(RuntimeError, match=exact(
            "torch.autograd.functional.jacobian (srcgrad: sg.autograd.functional.jacobian): "
            "`strict=True` and `vectorized=True` are not "
            "supported together. Please either set `strict=False` or `vectorize=False`.")):
        F.jacobian(lambda x: x * x, x_(), strict=True, vectorize=True)


def test_strategy_errors():
    with pytest.raises(NotImplementedError, match=exact(
            "Computing Jacobian using forward-AD or forward-over-reverse Hessian isonly "
            "implemented for `vectorize=True`.")):
        F.jacobian(lambda x: x * x, x_(), strategy="forward-mode")
    with pytest.raises(NotImplementedError, match=exact(
            "Computing Jacobian using forward-AD or forward-over-reverse Hessian isonly "
            "implemented for `vectorize=True`.")):
        F.hessian(lambda x: (x * x).sum(), x_(), outer_jacobian_strategy="forward-mode")
    with pytest.raises(AssertionError, match=exact(
            'Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your '
            'function has more outputs than inputs, "forward-mode" tends to be more performant. '
            'Otherwise, prefer to use "reverse-mode".')):
        F.jacobian(lambda x: x * x, x_(), strategy="sideways")


def test_forward_mode_refuses_strict_and_create_graph():
    with pytest.raises(RuntimeError, match=exact(
            "torch.autograd.functional.jacobian (srcgrad: sg.autograd.functional.jacobian): "
            "`strict=True` and `strategy=\"forward-mode\"` "
            "are not supported together (yet). Please either set `strict=False` or "
            "`strategy=\"reverse-mode\"`.")):
        F.jacobian(lambda x: x * x, x_(), strict=True, vectorize=True, strategy="forward-mode")
    with pytest.raises(NotImplementedError, match=exact(
            "torch.autograd.functional.jacobian (srcgrad: sg.autograd.functional.jacobian): "
            "`create_graph=True` and `strategy=\"forward-mode"
            "\"` are not supported together (yet). Please either set `create_graph=False` or "
            "`strategy=\"reverse-mode\"`.")):
        F.jacobian(lambda x: x * x, x_(), create_graph=True, vectorize=True,
                   strategy="forward-mode")


def test_hessian_and_vhp_output_errors():
    with pytest.raises(RuntimeError, match=exact(
            "The Tensor returned by the function given to hessian should contain a single "
            "element")):
        F.hessian(lambda x: x * x, x_())
    with pytest.raises(RuntimeError, match=exact(
            "The function given to hessian should return a single Tensor")):
        F.hessian(lambda x: ((x * x).sum(),), x_())
    with pytest.raises(RuntimeError, match=exact(
            "The Tensor returned by the function given to vhp should contain a single element")):
        F.vhp(lambda x: x * x, x_(), const([1.0, 1.0]))


def test_v_errors():
    text = ("The vector v can only be None if the input to the user-provided function is a "
            "single Tensor with a single element.")
    for fn in (F.jvp, F.vhp, F.hvp):
        with pytest.raises(RuntimeError, match=exact(text)):
            fn(lambda x: (x * x).sum(), x_())
    with pytest.raises(RuntimeError, match="^v has invalid size: should be " + shape_re(2)
                       + " but got " + shape_re(3) + r"\.$"):
        F.vjp(lambda x: x * x, x_(), const([1.0, 1.0, 1.0]))
    with pytest.raises(RuntimeError, match=exact("The given v should contain a single Tensor.")):
        F.vjp(lambda x: x * x, x_(), (const(X), const(X)))


# ---------------------------------------------------------------- structure and v=None
def test_structure_of_results():
    x, w = tensors()
    jac = F.jacobian(f_two_in_two_out, (x, w))
    o0, o1 = f_two_in_two_out(x, w)
    for i, o in enumerate((o0, o1)):
        for j, a in enumerate((x, w)):
            assert jac[i][j].shape == o.shape + a.shape
    assert F.jacobian(lambda a: a.sum(), x).shape == x.shape  # Tensor in, Tensor out
    per_in = F.jacobian(lambda a, b: (a @ b).sum(), (x, w))  # tuple in, Tensor out
    assert isinstance(per_in, tuple) and [t.shape for t in per_in] == [x.shape, w.shape]
    per_out = F.jacobian(lambda a: (a, a.sum()), x)  # Tensor in, tuple out
    assert isinstance(per_out, tuple) and [t.shape for t in per_out] == [x.shape * 2, x.shape]
    h = F.hessian(f_scalar, (x, w))
    assert [[t.shape for t in row] for row in h] == [[x.shape * 2, x.shape + w.shape],
                                                    [w.shape + x.shape, w.shape * 2]]
    out, (gx, gw) = F.vjp(f_scalar, (x, w))  # v=None: a scalar output
    assert out.shape == () and gx.shape == x.shape and gw.shape == w.shape
    out, t = F.jvp(lambda a: (a * a, a.sum()), const(0.5))  # v=None: one one-element input
    assert isinstance(out, tuple) and isinstance(t, tuple)
    check(t[0], 1.0)
    check(t[1], 1.0)
    out, r = F.hvp(lambda a: a ** 3, const(2.0))
    check(r, 12.0)


def test_non_strict_independent_input_gives_zeros():
    x, w = tensors()
    out, (gx, gw) = F.vjp(lambda a, b: (a * a).sum(), (x, w))
    check(gw, np.zeros(w.shape))
    for mode in MODES:
        jac = F.jacobian(lambda a, b: a * 2.0, (x, w), **mode)
        check(jac[1], np.zeros(x.shape + w.shape))
    check(F.hvp(lambda a, b: (a * a).sum(), (x, w), (x, w))[1][1], np.zeros(w.shape))


# ---------------------------------------------------------------- values against central differences
@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_jacobian_against_central_differences(mode):
    jac = F.jacobian(f_two_in_two_out, tensors(), **mode)
    for i in range(2):
        for j in range(2):
            check(jac[i][j], fd_jacobian(f_two_in_two_out, ARRAYS, i, j), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("mode", [dict(), dict(vectorize=True),
                                  dict(vectorize=True, outer_jacobian_strategy="forward-mode")],
                         ids=["rows", "vectorized", "forward-over-reverse"])
def test_hessian_against_central_differences(mode):
    h = F.hessian(f_scalar, tensors(), **mode)
    for i in range(2):
        for j in range(2):
            check(h[i][j], fd_hessian(f_scalar, ARRAYS, i, j), rtol=1e-4, atol=1e-5)


def test_products_against_central_differences():
    rng = np.random.default_rng(0)
    x, w = tensors()
    u = [rng.standard_normal(o.shape) for o in f_two_in_two_out(x, w)]
    v = [rng.standard_normal(a.shape) for a in ARRAYS]
    jac = [[fd_jacobian(f_two_in_two_out, ARRAYS, i, j) for j in range(2)] for i in range(2)]
    _, (gx, gw) = F.vjp(f_two_in_two_out, (x, w), tuple(const(a) for a in u))
    for j, g in enumerate((gx, gw)):
        nd = u[0].ndim
        expected = sum(np.tensordot(u[i], jac[i][j], axes=u[i].ndim) for i in range(2))
        check(g, expected, rtol=1e-5, atol=1e-7)
        del nd
    _, (t0, t1) = F.jvp(f_two_in_two_out, (x, w), tuple(const(a) for a in v))
    for i, t in enumerate((t0, t1)):
        expected = sum(np.tensordot(jac[i][j], v[j], axes=v[j].ndim) for j in range(2))
        check(t, expected, rtol=1e-5, atol=1e-7)
    hess = [[fd_hessian(f_scalar, ARRAYS, i, j) for j in range(2)] for i in range(2)]
    _, hv = F.hvp(f_scalar, (x, w), tuple(const(a) for a in v))
    _, vh = F.vhp(f_scalar, (x, w), tuple(const(a) for a in v))
    for i in range(2):
        expected = sum(np.tensordot(hess[i][j], v[j], axes=v[j].ndim) for j in range(2))
        check(hv[i], expected, rtol=1e-4, atol=1e-5)
        check(vh[i], expected, rtol=1e-4, atol=1e-5)  # H is symmetric


# ---------------------------------------------------------------- vectorize: one batched pass
def _counting(monkeypatch):
    counts = {"func": 0, "per_seed": 0, "backward": 0}
    per_seed, grad_once = batching._per_seed, engine._grad_once

    def count_seed(*args):
        counts["per_seed"] += 1
        return per_seed(*args)

    def count_grad(*args):
        counts["backward"] += 1
        return grad_once(*args)

    monkeypatch.setattr(batching, "_per_seed", count_seed)
    monkeypatch.setattr(engine, "_grad_once", count_grad)

    def wrap(f):
        def g(*args):
            counts["func"] += 1
            return f(*args)
        return g
    return counts, wrap


def test_vectorized_reverse_mode_is_one_pass(monkeypatch):
    counts, wrap = _counting(monkeypatch)
    expected = F.jacobian(f_two_in_two_out, tensors())
    counts.update(func=0, backward=0, per_seed=0)
    got = F.jacobian(wrap(f_two_in_two_out), tensors(), vectorize=True)
    assert counts == {"func": 1, "per_seed": 0, "backward": 1}  # 2*4 + 1*2 = 10 rows at once
    for i in range(2):
        for j in range(2):
            np.testing.assert_allclose(val(got[i][j]), val(expected[i][j]), rtol=1e-12, atol=1e-14)


def test_vectorized_forward_mode_is_one_pass(monkeypatch):
    counts, wrap = _counting(monkeypatch)
    expected = F.jacobian(f_two_in_two_out, tensors())
    counts.update(func=0, backward=0, per_seed=0)
    got = F.jacobian(wrap(f_two_in_two_out), tensors(), vectorize=True, strategy="forward-mode")
    assert counts == {"func": 1, "per_seed": 0, "backward": 0}  # 6 + 12 columns at once
    for i in range(2):
        for j in range(2):
            np.testing.assert_allclose(val(got[i][j]), val(expected[i][j]), rtol=1e-12, atol=1e-14)


def test_vectorize_falls_back_where_an_op_cannot_run_on_a_batch():
    def write(x, v):
        y = x * 1.0
        y[1:] = v * v  # the JVP of `t[i] = v` writes v's tangents into a plain array
        return y

    x, v = const([1.0, 2.0, 3.0]), const([0.5, -1.5])
    arrays = [np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.5])]

    def write_np(x, v):
        y = x * 1.0
        y[1:] = v * v
        return y
    for mode in MODES:
        jac = F.jacobian(write, (x, v), **mode)
        for j in range(2):
            check(jac[j], fd_jacobian(write_np, arrays, 0, j), rtol=1e-6, atol=1e-8)


# ---------------------------------------------------------------- create_graph, inputs, grad modes
def test_without_create_graph_results_are_detached_and_inputs_untouched():
    x = const(X)
    for mode in MODES:
        jac = F.jacobian(lambda a: a ** 3, x, **mode)
        assert not jac.requires_grad and jac.grad_fn is None
    out, g = F.vjp(lambda a: (a ** 3).sum(), x)
    assert not out.requires_grad and not g.requires_grad
    assert not x.requires_grad  # probe 9.jacobian_input_not_modified
    with sg.no_grad():  # works under no_grad
        check(F.jacobian(lambda a: a ** 3, x), np.diag([3.0, 12.0]))
        check(F.hvp(lambda a: (a ** 3).sum(), x, const([1.0, 1.0]))[1], [6.0, 12.0])


@pytest.mark.parametrize("mode", [dict(), dict(vectorize=True)], ids=["rows", "vectorized"])
def test_create_graph_results_are_differentiable(mode):
    x = leaf([0.3, 0.8])

    def f(a):
        return np.sin(a) * a.sum()

    jac = F.jacobian(f, x, create_graph=True, **mode)
    assert jac.requires_grad
    jac.sum().backward()

    def jac_sum(a):
        return np.sum(fd_jacobian(f, [a], 0, 0, eps=1e-4))
    check(x.grad, fd_jacobian(jac_sum, [np.array([0.3, 0.8])], 0, 0, eps=1e-4), rtol=1e-6,
          atol=1e-7)


def test_many_rows_with_and_without_create_graph():
    """More rows than one stack op takes (the rows are stacked 32 at a time)."""
    a0 = np.linspace(-1.0, 1.0, 70)

    def f(a):
        return np.sin(a) * a

    for create_graph in (False, True):
        x = leaf(a0)
        jac = F.jacobian(f, x, create_graph=create_graph)
        check(jac, fd_jacobian(f, [a0], 0, 0), rtol=1e-6, atol=1e-8)
        assert jac.requires_grad == create_graph
    jac.sum().backward()  # d/da of sum_i J_ii = 2 cos a - a sin a
    check(x.grad, 2 * np.cos(a0) - a0 * np.sin(a0))


def test_create_graph_under_no_grad_is_differentiable():
    x = leaf([0.5, 1.5])
    with sg.no_grad():
        out, g = F.vjp(lambda a: (a ** 3).sum(), x, create_graph=True)
    assert g.requires_grad
    g.sum().backward()
    check(x.grad, 6 * np.array([0.5, 1.5]))
    y = leaf([0.5, 1.5])
    out, t = F.jvp(lambda a: a ** 3, y, const([1.0, 2.0]), create_graph=True)
    t.sum().backward()
    check(y.grad, 6 * np.array([0.5, 1.5]) * [1.0, 2.0])
    z = leaf([0.5, 1.5])
    _, hv = F.hvp(lambda a: (a ** 4).sum(), z, const([1.0, 1.0]), create_graph=True)
    hv.sum().backward()
    check(z.grad, 24 * np.array([0.5, 1.5]))


def test_seed_lambda_capture_example():
    """The seed document's example: constants and flags are captured with a lambda,
    `functional.jacobian(lambda x: f(x, constant, flag=flag), input)`."""
    def f(x, constant, flag):
        return x * constant if flag else x + constant

    inp, constant = const([1.0, 2.0, 3.0]), const([4.0, 5.0, 6.0])
    check(F.jacobian(lambda x: f(x, constant, flag=True), inp), np.diag([4.0, 5.0, 6.0]))
    check(F.jacobian(lambda x: f(x, constant, flag=False), inp), np.eye(3))


# ---------------------------------------------------------------- every row on a batch of seeds
VJP_CASES = list(differentiable_cases("vjp"))
JVP_CASES = list(differentiable_cases("jvp"))
B = 3
# Where a batch meets a write into a plain array (helpers.setitem) the kernels cannot run
# batched: BatchingError, and functional falls back to one pass per seed.
CANNOT_BATCH = {("jvp", "setitem"), ("vjp", "setitem_bar")}


def _compare(kind, rule, got, want):
    if (kind, rule.name) in CANNOT_BATCH and isinstance(got, BatchingError):
        return
    assert not isinstance(got, Exception), got
    data = got.data if isinstance(got, Batched) else np.broadcast_to(got, (B,) + np.shape(got))
    np.testing.assert_allclose(np.broadcast_to(data, want.shape), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("rule,case_id,args", VJP_CASES, ids=case_ids(VJP_CASES))
def test_every_row_vjp_on_a_batch_of_seeds(rule, case_id, args):
    static, dynamic, owners = _split(rule, args)
    active = _active(rule, args, owners, dynamic, "vjp")
    kernel = op_kernel(rule.name, static, active)
    ans, saved = kernel.forward(*dynamic)
    rng = np.random.default_rng(1)
    gs = [rng.standard_normal((B,) + np.shape(o)) for o in ev.outputs(rule, ans)]
    try:
        got = kernel.backward(saved, *[Batched(g) for g in gs])
    except BatchingError as err:
        got = [err] * len(dynamic)
    want = [kernel.backward(saved, *[g[b] for g in gs]) for b in range(B)]
    for i, a in enumerate(active):
        if a:
            _compare("vjp", rule, got[i], np.stack(
                [np.broadcast_to(w[i], np.shape(dynamic[i])) for w in want]))


@pytest.mark.parametrize("rule,case_id,args", JVP_CASES, ids=case_ids(JVP_CASES))
def test_every_row_jvp_on_a_batch_of_seeds(rule, case_id, args):
    static, dynamic, owners = _split(rule, args)
    active = _active(rule, args, owners, dynamic, "jvp")
    kernel = op_kernel(rule.name, static, active)
    rng = np.random.default_rng(2)
    ts = [rng.standard_normal((B,) + np.shape(v)) for v, a in zip(dynamic, active) if a]
    try:
        _, got = kernel.jvp(*dynamic, *[Batched(t) for t in ts])
    except BatchingError as err:
        got = (err,) * 8 if ev.multi(rule) else err
    want = [kernel.jvp(*dynamic, *[t[b] for t in ts])[1] for b in range(B)]
    n = len(ev.outputs(rule, kernel.forward(*dynamic)[0]))
    for k in range(n):
        g = got[k] if ev.multi(rule) else got
        w = np.stack([np.asarray(x[k] if ev.multi(rule) else x) for x in want])
        _compare("jvp", rule, g, w)
