"""Forward mode: the jvp pass, sg.jvp, sg.jacobian (both modes), emit --mode forward|both."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from examples import elementwise, logistic, mlp, softmax
from srcgrad import pipeline
from srcgrad.autograd.gradcheck import check_cli
from srcgrad.frontend.parse import parse_function
from tests.conftest import numeric_grad


def numerical_jacobian(f, args, i, eps=1e-6):
    """(out.shape + args[i].shape) central differences of an array-valued f."""
    args = list(args)
    x = np.array(args[i], dtype=np.float64)
    out = np.asarray(f(*args))
    jac = np.zeros(out.shape + x.shape)
    flat = x.reshape(-1)
    for col in range(x.size):
        orig = flat[col]
        flat[col] = orig + eps
        args[i] = x.copy()
        plus = np.asarray(f(*args))
        flat[col] = orig - eps
        args[i] = x.copy()
        minus = np.asarray(f(*args))
        flat[col] = orig
        jac.reshape(out.shape + (x.size,))[..., col] = (plus - minus) / (2 * eps)
    return jac


def chain(x, y):
    z = x * y + np.exp(x)
    h = -z
    return np.sum(h * z), h


def bias(x, b):
    return x + b


def tanh_layer(x, W, b):
    return np.tanh(x @ W + b)


def test_jvp_program_names_tangents_and_interleaves_them():
    source = pipeline.jvp_program(parse_function(chain)).sources[0]
    assert source.splitlines()[0] == "def chain_jvp(x, y, x_t, y_t):"
    assert "z_t = " in source and "h_t = -z_t" in source
    # tangent lines follow their primal line, under the same source comment
    assert source.index("h = -z") < source.index("h_t = -z_t") < source.index("# return")
    assert source.rstrip().splitlines()[-1].strip().startswith("return (")


def test_partial_tangent_of_an_elementwise_op_is_broadcast():
    source = pipeline.jvp_program(parse_function(bias), wrt=(1,)).sources[0]
    assert "def bias_jvp(x, b, b_t):" in source
    assert "xp.broadcast_to(b_t" in source
    x, b = np.ones((3, 4)), np.arange(4.0)
    out, t = sg.jacobian(bias, wrt=1, mode="forward")(x, b), None
    assert out.shape == (3, 4, 4)
    (_, t) = sg.jvp(bias, (x, b), (np.zeros((3, 4)), np.ones(4)))
    assert t.shape == (3, 4) and np.all(t == 1.0)


def loop_built_constant_plus_scalar(x0):  # fuzz seed 974404
    y1 = np.zeros((2,))
    for i2 in range(2):
        y1[i2] = 1.5
    v6 = y1 + np.sum(x0.reshape((2,)))
    return np.sum(np.tile(v6, 2)[np.tile(v6, 2) > 0.75])


def scalar_plus_mask(x):
    return np.sum(x) + (x > 0)  # the mask (no derivative) gives the shape


def scalar_minus_mask_2d(x):
    m = (x > 0) * 1.0
    return np.sum(np.reshape(np.sum(x) - m, (2, 1)) ** 2)


def loop_built_rows_in_2d(x):
    y = np.zeros((2, 3))
    for i in range(2):
        y[i] = 1.5 * i
    v = y + np.sum(x)
    return np.sum(np.tile(v, (2, 1))[np.tile(v * 2.0, (2, 1)) > 0.5] ** 2)


@pytest.mark.parametrize("f", [loop_built_constant_plus_scalar, scalar_plus_mask,
                               scalar_minus_mask_2d, loop_built_rows_in_2d])
def test_partial_tangent_is_broadcast_by_an_operand_without_derivative(f):
    # `y + s` with only the scalar s active has y's shape, also when y carries no derivative
    # (a Var of kind "static": a mask, a constant built in a loop): s_t was not broadcast,
    # so tile/reshape/a mask read a tangent of the wrong shape (a crash) or it escaped
    # (a wrong sum, a () tangent of a (2,) output).
    rng = np.random.default_rng(0)
    x, t = rng.standard_normal(2), rng.standard_normal(2)
    jac = numerical_jacobian(f, (x,), 0)
    out, t_out = sg.jvp(f, (x,), (t,))
    np.testing.assert_allclose(out, f(x))
    assert np.shape(t_out) == np.shape(out)
    np.testing.assert_allclose(t_out, jac @ t, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(sg.jacobian(f, mode="forward")(x), jac, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(sg.jacobian(f, mode="reverse")(x), jac, rtol=1e-6, atol=1e-8)
    if np.ndim(out) == 0:
        np.testing.assert_allclose(sg.grad(f)(x), jac, rtol=1e-6, atol=1e-8)
        hess = numerical_jacobian(lambda z: numerical_jacobian(f, (z,), 0, eps=1e-4), (x,), 0,
                                  eps=1e-4)
        np.testing.assert_allclose(sg.hessian(f)(x), hess, rtol=1e-5, atol=1e-6)


def scaled_by_loop_index(x):
    s = x
    for i in range(3):
        s = s * i + i + x.shape[0]
    return s


def test_known_scalar_operands_do_not_broadcast_a_partial_tangent():
    # a loop index and `x.shape[0]` (static, but Python ints) cannot widen `s * i + i`
    source = pipeline.jvp_program(parse_function(scaled_by_loop_index)).sources[0]
    assert "broadcast_to" not in source
    x, t = np.array([0.3, -0.7, 1.1]), np.array([1.0, 2.0, -1.0])
    _, t_out = sg.jvp(scaled_by_loop_index, (x,), (t,))
    np.testing.assert_allclose(t_out, numerical_jacobian(scaled_by_loop_index, (x,), 0) @ t,
                               rtol=1e-6, atol=1e-8)


def test_jvp_matches_finite_differences_with_tuple_output():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(5), rng.standard_normal(5)
    tx, ty = rng.standard_normal(5), rng.standard_normal(5)
    (s, h), (s_t, h_t) = sg.jvp(chain, (x, y), (tx, ty))
    eps = 1e-6
    (sp, hp), (sm, hm) = chain(x + eps * tx, y + eps * ty), chain(x - eps * tx, y - eps * ty)
    np.testing.assert_allclose(s_t, (sp - sm) / (2 * eps), rtol=1e-6)
    np.testing.assert_allclose(h_t, (hp - hm) / (2 * eps), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(s, chain(x, y)[0])


def test_jvp_checks_its_arguments():
    with pytest.raises(ValueError, match="tangent 0 has shape"):
        sg.jvp(bias, (np.ones(3), np.ones(3)), (np.ones(2), np.ones(3)))
    with pytest.raises(ValueError, match="2 primals but 1 tangents"):
        sg.jvp(bias, (np.ones(3), np.ones(3)), (np.ones(3),))


def _workloads():
    rng = np.random.default_rng(1)
    W1, b1, W2, b2 = mlp.init_params(rng, 4, 6, 3)
    b1 = 0.1 * rng.standard_normal(6)
    X, y = rng.standard_normal((5, 4)), rng.standard_normal((5, 3))
    w, Xl = rng.standard_normal(4), rng.standard_normal((7, 4))
    yl = (rng.random(7) > 0.5).astype(float)
    Ws, Xs = rng.standard_normal((4, 3)), rng.standard_normal((6, 4))
    Ys = np.eye(3)[rng.integers(0, 3, 6)]
    return [
        ("mlp", mlp.loss, (W1, b1, W2, b2, X, y), (0, 1, 2, 3)),
        ("logistic", logistic.loss, (w, 0.3, Xl, yl), (0,)),
        ("softmax", softmax.loss, (Ws, Xs, Ys), (0,)),
        ("elementwise", elementwise.f, (rng.standard_normal(8),), (0,)),
        ("tanh_layer", tanh_layer, (rng.standard_normal(6), rng.standard_normal((6, 5)),
                                    rng.standard_normal(5)), (0, 1, 2)),
    ]


@pytest.mark.parametrize("name,f,args,wrt", _workloads(), ids=[w[0] for w in _workloads()])
def test_jacobian_modes_agree_with_each_other_and_finite_differences(name, f, args, wrt):
    jf = sg.jacobian(f, wrt=wrt, mode="forward")(*args)
    jr = sg.jacobian(f, wrt=wrt, mode="reverse")(*args)
    ja = sg.jacobian(f, wrt=wrt)(*args)
    for j, i in enumerate(wrt):
        expected = numerical_jacobian(f, args, i)
        assert jf[j].shape == np.shape(f(*args)) + np.shape(args[i])
        np.testing.assert_allclose(jf[j], jr[j], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(ja[j], jr[j], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(jf[j], expected, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name,f,args,wrt", _workloads()[:4], ids=[w[0] for w in _workloads()[:4]])
def test_jvp_of_workloads_is_the_gradient_along_the_tangent(name, f, args, wrt):
    rng = np.random.default_rng(2)
    tangents = [rng.standard_normal(np.shape(a)) for a in args]
    tangents = [np.asarray(t) if np.ndim(t) else float(t) for t in tangents]
    _, t_out = sg.jvp(f, args, tangents)
    grads = sg.grad(f, wrt=tuple(range(len(args))))(*args)
    expected = sum(np.sum(g * t) for g, t in zip(grads, tangents))
    np.testing.assert_allclose(t_out, expected, rtol=1e-9, atol=1e-12)


def test_jacobian_of_a_32_to_64_tanh_layer():
    rng = np.random.default_rng(3)
    x, W, b = rng.standard_normal(32), rng.standard_normal((32, 64)) / 6, rng.standard_normal(64)
    jac = sg.jacobian(tanh_layer)(x, W, b)  # auto: forward (32 inputs < 64 outputs)
    hand = (1 - np.tanh(x @ W + b) ** 2)[:, None] * W.T
    assert jac.shape == (64, 32)
    np.testing.assert_allclose(jac, hand, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(sg.jacobian(tanh_layer, mode="reverse")(x, W, b), hand,
                               rtol=1e-12, atol=1e-14)


def test_jacobian_rejects_an_unknown_mode():
    with pytest.raises(ValueError, match="mode must be"):
        sg.jacobian(tanh_layer, mode="sideways")


def test_source_of_a_jacobian_is_the_jvp_module():
    text = sg.source(sg.jacobian(tanh_layer, mode="forward"))
    assert "def tanh_layer_jvp(x, W, b, x_t):" in text


@pytest.mark.parametrize("mode,names", [("forward", ["loss_jvp"]),
                                        ("both", ["grad_loss", "loss_jvp"])])
def test_emit_standalone_forward_and_both(tmp_path, mode, names):
    text = sg.api.emit_standalone(logistic.loss, wrt=("w",), mode=mode)
    for n in names:
        assert f"def {n}(" in text
    path = tmp_path / "standalone.py"
    path.write_text(text)
    ns: dict = {}
    exec(compile(text, str(path), "exec"), ns)  # noqa: S102  (our own generated module)
    rng = np.random.default_rng(4)
    w, X, y, t = rng.standard_normal(3), rng.standard_normal((5, 3)), np.ones(5), rng.standard_normal(3)
    (value,), (tangent,) = ns["loss_jvp"](w, 0.1, X, y, t)
    np.testing.assert_allclose(value, logistic.loss(w, 0.1, X, y))
    np.testing.assert_allclose(tangent, sg.grad(logistic.loss)(w, 0.1, X, y) @ t, rtol=1e-10)


def test_cli_check_reports_both_modes():
    ok, report = check_cli(logistic.loss, "4,scalar,6x4,6")
    assert ok, report
    assert "reverse  output 0 w.r.t. w" in report and "forward  output 0 w.r.t. b" in report
    assert report.rstrip().endswith("OK")
    with pytest.raises(ValueError, match="gives 2 shapes"):
        check_cli(logistic.loss, "4,scalar")


def _constant_array_method(x):
    g = np.ones((2, 2)) * 2.0  # a constant: its methods run on a Const
    return np.sum(g.transpose() * x) + np.sum(g.sum(axis=0) * x[0])


def _constant_array_method_of_an_argument(x):
    g = np.broadcast_to(1.0, (2, 2))
    return np.sum(g.transpose(None) * x * x) + np.sum(g.dot(x))


@pytest.mark.parametrize("f", [_constant_array_method, _constant_array_method_of_an_argument])
def test_a_constant_arrays_methods_in_forward_mode(f):
    """`c.transpose()` of a constant array was looked up as NumPy's bound method, which has
    no rule: 'cannot differentiate the call to ndarray.transpose' (the hessian of a variant
    whose backward spells `g.transpose(None)` of a constant seed, fuzz seed 1100033). The
    method's rule takes the constant as its operand, as for an array Var."""
    x = np.array([[0.3, -0.7], [1.1, 0.4]])
    t = np.array([[1.0, 0.5], [-2.0, 0.25]])
    expected = np.sum(numeric_grad(f, [x], 0) * t)
    np.testing.assert_allclose(sg.jvp(f, (x,), (t,))[1], expected, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(sg.grad(f)(x), numeric_grad(f, [x], 0), rtol=1e-6, atol=1e-8)
