"""What the boundary campaigns (benchmarks/fuzz.py --boundary, seeds 2600000+ and the
trial 2700000+) found, each tested at its mechanism; every test failed before its fix."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg


def test_vmap_of_grad_with_an_if_on_data():
    """Seed 2700169 (nested: vmap(grad)): the gradient saves `multiply_saved = None` on the
    branch not taken; batched, both branches run and `1.0 * None` crashed (ProbeFailed in
    passes/shapes.py). The merged value is the other branch's (passes/batch_control)."""
    def f(x0):
        if x0 > 0.08:
            pass
        else:
            x0 = x0 * (x0 * x0)
        return x0

    xs = np.array([0.5, -0.5, 0.1, -2.0])
    got = sg.vmap(sg.grad(f))(xs)
    np.testing.assert_allclose(got, [sg.grad(f)(float(x)) for x in xs])
    np.testing.assert_allclose(got, np.where(xs > 0.08, 1.0, 3 * xs * xs))


def test_vmap_of_grad_with_an_if_on_data_of_arrays():
    """The same with arrays: the loop's value, or a CompileError that says what vmap
    cannot batch (today: the gradient's `shape` of a batched value), never a crash."""
    def f(x, w):
        if np.sum(x * w) > 0.0:
            y = np.sin(x) * w
        else:
            y = np.exp(0.5 * x) * w * w
        return np.sum(y)

    xs = np.array([[0.5, 0.2], [-0.7, -0.1], [0.1, 0.3]])
    w = np.array([1.5, -0.5])
    try:
        got = sg.vmap(sg.grad(f), in_axes=(0, None))(xs, w)
    except sg.CompileError as err:
        # at the user's call, not at the generated gradient's line (errors.at_user_call)
        assert err.filename == __file__ and "sg.vmap" in err.message, (err.filename, err.lineno)
        return
    np.testing.assert_allclose(got, np.stack([sg.grad(f)(x, w) for x in xs]))


def test_grad_of_a_constant_mask_index_on_the_array_api():
    """Seed 2700011 (array_api): `x[np.array([True, False, True])]` was emitted as
    `x[mask, ...]`, which array_api_strict refuses (a mask must be the sole index)."""
    xs = pytest.importorskip("array_api_strict")

    def f(x0):
        y = (np.add(3.0, x0))[np.array([True, False, True])]
        return np.sum(y * y)

    x = np.array([1.0, 2.0, 3.0])
    got = sg.grad(f)(xs.asarray(x))
    np.testing.assert_allclose(np.asarray(got), 2 * (3.0 + x) * [1, 0, 1])


def _abs_of_product(x, z):
    return np.sum(np.abs(x * z))


Z = np.array([1.0 + 2.0j, -0.5 + 0.3j])
X = np.array([0.7, -1.2])


@pytest.mark.parametrize("call", [
    lambda: sg.grad(_abs_of_product)(X, Z),
    lambda: sg.grad(_abs_of_product, wrt=0)(X, Z),
    lambda: sg.value_and_grad(_abs_of_product, wrt=0)(X, Z),
    lambda: sg.jacobian(_abs_of_product, wrt=0)(X, Z),
    lambda: sg.hessian(_abs_of_product, wrt=0)(X, Z),
    lambda: sg.jacobian(sg.grad(_abs_of_product, wrt=0))(X, Z),
], ids=["grad", "grad-wrt-0", "value_and_grad", "jacobian", "hessian", "jacobian-of-grad"])
def test_a_complex_argument_not_differentiated_is_refused(call):
    """Seed 2600360 (complex: jacobian(grad) with the complex array not differentiated):
    the transforms checked only the differentiated arguments, and sg.grad of |x * z| for a
    complex z returned a complex gradient ([-1.34+1.79j, ...]; the differences give
    [2.236, -0.583]). A complex constant argument is refused as sg.vjp refuses it."""
    with pytest.raises(TypeError, match="argument `z` is complex; complex differentiation"):
        call()


@pytest.mark.parametrize("test", ["np.iscomplex", "np.isreal"])
def test_iscomplex_of_a_python_float_on_the_array_api(test):
    """Seed 2600845 (campaign 2600000, array_api): the Array-API spelling of iscomplex /
    isreal read `x.dtype` of a Python float argument (AttributeError in generated code)."""
    xs = pytest.importorskip("array_api_strict")
    check = {"np.iscomplex": np.iscomplex, "np.isreal": np.isreal}[test]

    def f(x, c):
        return np.sum(x * x) * np.where(check(c), 0.5, 2.0) * c

    x = np.array([1.0, -2.0])
    gx, gc = sg.grad(f, wrt=(0, 1))(xs.asarray(x), -0.7)
    want = 2.0 if test == "np.iscomplex" else 0.5
    np.testing.assert_allclose(np.asarray(gx), 2 * x * want * -0.7)
    np.testing.assert_allclose(float(gc), np.sum(x * x) * want)


C1 = np.arange(12.0).reshape(4, 3)


def _sum_of_concatenate(x0):
    return np.sum(np.concatenate([x0, C1], axis=0))


def _sum_of_stack(x0):
    return np.sum(np.stack([x0, C1[:2]], axis=1) * 2.0)


@pytest.mark.parametrize("f", [_sum_of_concatenate, _sum_of_stack])
def test_vmap_of_grad_of_concatenate_with_a_constant(f):
    """Seed 2601781 (campaign 2600000, nested vmap(grad) of a table-row program): the
    gradient's concat_bar of a constant cotangent was sliced along the batch-shifted axis
    while the cotangent was not batched: shape (6, 2) for (3, 2, 3) (passes/batch.py)."""
    xs = np.arange(18.0).reshape(3, 2, 3) * 0.1
    got = sg.vmap(sg.grad(f))(xs)
    np.testing.assert_allclose(got, np.stack([sg.grad(f)(x) for x in xs]))


class _Same(sg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x


def _writes_what_a_function_saved(x0, x1):
    w1 = x0.reshape(-1)
    w1[[2]] = _Same.apply(x0[:1])
    return np.dot(x1[:1], np.mean(w1) * np.ones((1,)))


def test_vmap_of_grad_raises_the_programs_own_saved_value_error():
    """Seed 2602382 (campaign 2600000, nested vmap(grad)): a write into a value a custom
    Function saved is torch's RuntimeError (by design, as sg.grad raises it); under sg.vmap
    the probe's ProbeFailed wrapper escaped instead (pipeline/vmap._probe)."""
    x0, x1 = np.array([0.3, -0.2, 0.5]), np.array([1.5, 0.5, -1.0, 2.0])
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        sg.grad(_writes_what_a_function_saved)(x0, x1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        sg.vmap(sg.grad(_writes_what_a_function_saved), in_axes=(0, None))(np.stack([x0, x0]), x1)


def _norm_of_ones_by_keyword():
    return np.linalg.norm(x=np.ones((3,)))


def _through_a_helper():
    return _norm_of_ones_by_keyword()


def test_a_constant_array_passed_by_keyword_to_a_folded_call():
    """Seed 2610202 (every transform): a helper's `np.linalg.norm(x=np.ones((3,)))`, a
    call on constants folded while compiling, crashed with "truth value of an array is
    ambiguous": numpy_forms._static tested `NOT_LOWERED in kwargs.values()`, which
    compares each value with ==, and the array answers elementwise. Now by identity."""
    def f(x):
        return np.sum(x) * _through_a_helper()

    np.testing.assert_allclose(sg.grad(f)(np.ones(3)), np.full(3, np.sqrt(3.0)), rtol=1e-12)


def _nanstd_of_equal_entries(x0):
    return np.sum(x0 * np.nanstd(x0 * np.ones((3, 4)), axis=1)[0])


def test_nanstd_of_equal_entries_has_the_gradient_of_std():
    """Seed 2621101 (every transform): nanstd, composed as sqrt(nanvar), gave nan where its
    entries are all equal (sqrt's derivative at 0); the function is identically 0 there
    (every entry is x0), so the gradient is 0, as the std row's convention gives."""
    x = np.array([0.520976])
    np.testing.assert_array_equal(sg.grad(_nanstd_of_equal_entries)(x), [0.0])
    np.testing.assert_array_equal(sg.grad(lambda v: np.sum(v * np.std(v * np.ones((3, 4)),
                                                                      axis=1)[0]))(x), [0.0])
    y = np.array([[0.3, 1.1, np.nan], [2.0, -0.4, 0.7]])  # away from 0: sqrt's derivative
    g = sg.grad(lambda v: np.sum(np.nanstd(v, axis=1)))(y)
    d = np.nan_to_num(y - np.nanmean(y, axis=1, keepdims=True))
    want = d / (np.sum(~np.isnan(y), axis=1, keepdims=True) * np.nanstd(y, axis=1, keepdims=True))
    np.testing.assert_allclose(g, np.where(np.isnan(y), 0.0, want), rtol=1e-10)


# a program writing into its first argument, as seeds 2621193 (`x0 += ...`) and 2621850
# (`w1 = x0.T[0]; w1 *= ...`) do, with a saturating tanh around it in the grad(vmap) wrapper
WRITES_ITS_ARGUMENT = '''
import numpy as np
ARGS = [('array', (3,))]
OUTPUT = 'scalar'


def f(x0):
    for i in range(1):
        x0 += np.max(x0[:1].reshape((1, 1)), axis=0)
    return np.sum(np.sin(x0) * x0) + 2.0
'''


def _nested_seed(kind):
    from tests.fuzz import compose
    return next(s for s in range(200) if compose.pick(s, compose.COMPOSITIONS, "nested") == kind)


def test_the_composition_oracle_judges_a_program_that_writes_its_argument(tmp_path):
    """Seeds 2621193 and 2621850 (false positives): grad(vmap)'s value check ran f on the
    oracle's own first argument, f's in-place write moved it, and the differences were
    then taken at the moved point while srcgrad's gradient was at the first one (it was
    exactly right there). Each call now gets its own copy."""
    from tests.fuzz import oracle
    program = oracle.spec_from_source(WRITES_ITS_ARGUMENT, seed=_nested_seed("grad(vmap)"))
    result = oracle.check(program, tmp_path, transforms=["nested"])
    assert result.outcome == "pass", [f.detail for f in result.failures]


@pytest.mark.parametrize("factor", [1.01, 0.0])
def test_the_composition_oracle_still_flags_a_wrong_gradient_of_grad_of_vmap(
        tmp_path, monkeypatch, factor):
    """The other half: a gradient 1% off (or a zero one) through the same program is
    reported wrong, so the copies did not make the check one that cannot fail."""
    from tests.fuzz import compose, oracle
    grad = sg.grad

    def off(f, wrt=0):
        g = grad(f, wrt=wrt)
        return (lambda *a: factor * g(*a)) if f.__name__ == "_nested" else g
    monkeypatch.setattr(compose.sg, "grad", off)
    program = oracle.spec_from_source(WRITES_ITS_ARGUMENT, seed=_nested_seed("grad(vmap)"))
    result = oracle.check(program, tmp_path, transforms=["nested"])
    assert result.outcome == "wrong", [f.detail for f in result.failures]
    assert "grad(vmap): along a random direction" in result.failures[0].detail


def _svd_of_a_repeated_row(x1):
    """A 4x4 matrix whose last row is its first (as the fuzz program's tile/reshape makes
    it): one singular value exactly 0 for every x1, the others distinct."""
    u, s, vh = np.linalg.svd(np.tile(x1.ravel(), 2)[:16].reshape((4, 4)))
    return u, vh


@pytest.mark.parametrize("mode", ["jvp", "vjp"])
def test_svd_factors_of_a_square_matrix_with_a_zero_singular_value(mode):
    """Seed 2624501: the derivative of np.linalg.svd's U (and Vh) at a square matrix with
    a zero singular value was wrong in its last column: the rectangular term
    (I - U U^T) dA V / s, exactly 0 where U is square, was rounding (1e-16) over a singular
    value of rounding size. Against central differences along inputs that keep it 0, of
    the factors with each singular vector's sign matched to the point's (LAPACK picks the
    sign of a null vector by rounding: it flips between neighbours, here v4's at 1e-4)."""
    rng = np.random.default_rng(3)
    x, t = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    u0, vh0 = _svd_of_a_repeated_row(x)

    def matched(y):
        u, vh = _svd_of_a_repeated_row(y)
        su, sv = np.sign(np.sum(u * u0, axis=0)), np.sign(np.sum(vh * vh0, axis=1))
        return u * su, vh * sv[:, None]
    e = 1e-5
    fd = [(p - m) / (2 * e) for p, m in zip(matched(x + e * t), matched(x - e * t))]
    if mode == "jvp":
        _, got = sg.jvp(_svd_of_a_repeated_row, (x,), (t,))
        for g, d in zip(got, fd):
            np.testing.assert_allclose(g, d, atol=1e-7)
    else:
        cu, cv = rng.normal(size=(4, 4)), rng.normal(size=(4, 4))
        _, vjp_fn = sg.vjp(_svd_of_a_repeated_row, x)
        (got,) = vjp_fn((cu, cv))
        np.testing.assert_allclose(np.sum(got * t), np.sum(cu * fd[0]) + np.sum(cv * fd[1]),
                                   rtol=1e-6)
