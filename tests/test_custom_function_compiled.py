"""Custom Functions inside compiled code: `sg.grad`, `sg.vjp`, `sg.jvp` of functions that
call `MyFn.apply` (Note [Custom Functions] in srcgrad.frontend.function), checked
against central differences; errors per spec/torch_semantics.md §5; saved-tensor
hooks per §7 (Note [Saved-tensor hooks] in srcgrad.passes.hooks)."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.autograd import Function
from srcgrad.autograd.graph import save_on_cpu, saved_tensors_hooks
from tests.conftest import numeric_grad
from tests.corpus import functions as F
from tests.corpus.functions import Mul

RNG = np.random.default_rng(0)
X = RNG.standard_normal(4)
Y = RNG.standard_normal(4)

CASES = [
    (F.f_func, (X, Y)),
    (F.f_func_twice, (X, Y)),
    (F.f_exp, (X,)),
    (F.f_sort, (RNG.permutation(5) * 0.5 + RNG.standard_normal(5) * 0.01, RNG.standard_normal(5))),
    (F.f_simple, (X,)),
    (F.f_materialize_off, (X,)),
    (F.f_mulxyz, (np.array(1.0), np.array(2.0))),
    (F.f_sq, (X,)),
    (F.f_pow, (X,)),
    (F.f_mulconst, (X,)),
    (F.f_needs, (X, Y)),
    (F.f_extra_none, (X,)),
    (F.f_broadcast_grad, (X,)),
    (F.f_cube, (X,)),
    (F.f_two_calls, (X, Y)),
]


def _scalar(f):
    return lambda *a: np.sum(f(*a))


@pytest.mark.parametrize("f,args", CASES, ids=[c[0].__name__ for c in CASES])
def test_grad_matches_central_differences(f, args):
    grads = sg.grad(_scalar_fn(f), wrt=tuple(range(len(args))))(*args)
    for i, g in enumerate(grads):
        np.testing.assert_allclose(g, numeric_grad(_scalar(f), args, i), rtol=1e-6, atol=1e-7)


def _scalar_fn(f):
    return f if f not in (F.f_two_calls,) else F.f_two_calls_sum


@pytest.mark.parametrize("f,args", CASES, ids=[c[0].__name__ for c in CASES])
def test_vjp_matches_grad(f, args):
    out, vjp_fn = sg.vjp(f, *args)
    np.testing.assert_allclose(out, f(*args))
    grads = vjp_fn(np.ones_like(out))
    for i, g in enumerate(grads):
        np.testing.assert_allclose(g, numeric_grad(_scalar(f), args, i), rtol=1e-6, atol=1e-7)


def test_the_seed_example_values():
    """torch: d = Func.apply(1., 2., 4); d.backward() gives a.grad = 10, b.grad = 9."""
    ga, gb = sg.grad(F.f_func, wrt=(0, 1))(np.array(1.0), np.array(2.0))
    assert (float(ga), float(gb)) == (10.0, 9.0)


def test_straight_through_uses_the_custom_backward():
    x = np.array([0.4, 1.6, -2.2])
    np.testing.assert_allclose(sg.grad(F.f_straight_through)(x), 2 * np.round(x))


def test_forward_mode_uses_the_custom_jvp():
    """torch test_custom_function_save_for_forward: primal 8, tangent 8."""
    out, tangent = sg.jvp(F.f_mulxyz, (np.array(1.0), np.array(2.0)), (np.array(1.0), np.array(0.0)))
    assert (float(out), float(tangent)) == (8.0, 8.0)
    out, tangent = sg.jvp(F.f_mulxyz, (X, Y), (Y, X))
    np.testing.assert_allclose(tangent, 4.0 * (Y * Y + X * X))


def test_forward_mode_without_jvp_is_an_error():
    with pytest.raises(sg.CompileError, match="You must implement the jvp function"):
        sg.jvp(F.f_exp, (X,), (X,))


def test_generated_code_names_the_outputs_and_keeps_the_users_lines():
    text = sg.source(sg.grad(F.f_func, wrt=(0, 1)))
    assert "w = a * 4" in text
    assert "# grad of: gx = grad_out * (y + y * z)" in text
    assert "differentiable_once" in text and "FuncBackward" in text


# ---------------------------------------------------------------- higher order

def test_double_backward_through_a_differentiable_backward():
    """torch probe 5.custom_fn_double_backward_via_differentiable_backward: Sq at 3 gives g=6, gg=2."""
    x = np.array(3.0)
    assert float(sg.grad(F.f_sq)(x)) == 6.0
    assert float(sg.grad(sg.grad(F.f_sq))(x)) == 2.0


def test_a_saved_intermediate_differentiated_twice_is_right():
    """Cube saves the intermediate x*x; the generated code recomputes it from x, so the
    second derivative (6x) is exact (torch would treat it as a constant)."""
    x = np.array(0.7)
    np.testing.assert_allclose(sg.grad(sg.grad(F.f_cube))(x), 6 * 0.7, rtol=1e-12)
    hess = sg.hessian(lambda_cube)(X)
    np.testing.assert_allclose(hess, np.diag(6 * X), rtol=1e-12, atol=1e-12)
    d = sg.grad(F.f_func_twice, wrt=0)
    np.testing.assert_allclose(sg.grad(lambda_first(d))(X, Y),
                               numeric_grad(lambda_first(d), (X, Y), 0), rtol=1e-5, atol=1e-6)


def lambda_cube(x):
    return F.f_cube(x)


def lambda_first(d):
    def first(x, y):
        return np.sum(d(x, y))
    first.__qualname__ = first.__name__ = "first"
    return first


def test_once_differentiable_refuses_a_second_reverse_derivative():
    with pytest.raises(sg.CompileError, match="trying to differentiate twice a function that was "
                                              r"marked with @once_differentiable \(SqOnceBackward\)"):
        sg.grad(sg.grad(F.f_sq_once))(np.array(3.0))


def test_once_differentiable_refuses_forward_over_reverse():
    with pytest.raises(sg.CompileError, match="@once_differentiable"):
        sg.hessian(F.f_sq_once)(X)


def test_once_differentiable_first_order_is_fine():
    np.testing.assert_allclose(sg.grad(F.f_sq_once)(X), 2 * X)


# ---------------------------------------------------------------- errors

def test_too_few_gradients():
    with pytest.raises(sg.CompileError, match=r"function TooFewBackward returned an incorrect number "
                                              r"of gradients \(expected 2, got 1\)"):
        sg.grad(F.f_too_few)(X, Y)


def test_extra_non_none_gradient():
    with pytest.raises(sg.CompileError, match=r"function ExtraValueBackward returned an incorrect "
                                              r"number of gradients \(expected 1, got 2\)"):
        sg.grad(F.f_extra_value)(X)


def test_gradient_for_a_non_tensor_input():
    with pytest.raises(sg.CompileError, match="returned a gradient different than None at position 2, "
                                              "but the corresponding forward input was not a Variable"):
        sg.grad(F.f_grad_for_non_tensor)(X)


def test_wrong_gradient_shape_is_a_runtime_error():
    with pytest.raises(RuntimeError, match=r"Function WrongShapeBackward returned an invalid gradient "
                                           r"at index 0 - got \[10\] but expected shape compatible "
                                           r"with \[4\]"):
        sg.grad(F.f_wrong_shape)(X)


def test_mark_dirty_on_an_argument():
    """The forward writes the argument in place; compiled transforms never change the
    caller's array (Note [Mutation at trace time]). More in tests/test_saved_versions.py."""
    x = X.copy()
    np.testing.assert_allclose(sg.grad(F.f_dirty)(x), np.full(4, 2.0))
    np.testing.assert_array_equal(x, X)


def test_no_backward():
    with pytest.raises(sg.CompileError, match="You must implement either the backward or vjp method"):
        sg.grad(F.f_no_backward)(X)


def test_save_for_backward_of_a_number():
    with pytest.raises(sg.CompileError, match="save_for_backward can only save variables, but "
                                              "argument 1 is of type int"):
        sg.grad(F.f_save_int)(X)


# ---------------------------------------------------------------- saved-tensor hooks

class Recorder:
    def __init__(self):
        self.log = []

    def pack(self, x):
        self.log.append(("pack", np.array(x)))
        return ("packed", len(self.log), x)

    def unpack(self, packed):
        self.log.append(("unpack", np.array(packed[2])))
        return packed[2]

    def kinds(self):
        return [k for k, _ in self.log]


def test_pack_at_forward_unpack_at_backward_counts_and_order():
    rec = Recorder()
    with saved_tensors_hooks(rec.pack, rec.unpack):
        out, vjp_fn = sg.vjp(F.f_two_calls, X, Y)
    # Exp saves one value, Func four; packed at forward time, in save order.
    assert rec.kinds() == ["pack"] * 5
    e = np.exp(X)
    for (_, got), want in zip(rec.log, [e, e, Y, e * 2, out]):
        np.testing.assert_allclose(got, want)
    grads = vjp_fn(np.ones(4))
    # The backward runs Func's backward first, then Exp's: one unpack per saved value.
    assert rec.kinds() == ["pack"] * 5 + ["unpack"] * 5
    np.testing.assert_allclose(rec.log[-1][1], e)
    plain_out, plain_fn = sg.vjp(F.f_two_calls, X, Y)  # no hooks: the hook-free variant
    assert len(rec.log) == 10
    for a, b in zip(grads, plain_fn(np.ones(4))):
        np.testing.assert_allclose(a, b)


def test_hooks_bound_at_forward_time():
    rec = Recorder()
    out, vjp_fn = sg.vjp(F.f_exp, X)
    with saved_tensors_hooks(rec.pack, rec.unpack):
        vjp_fn(np.array(1.0))  # saved without hooks: none apply now
    assert rec.log == []


def test_hooks_can_transform_saved_values():
    """torch §7 case 2: scaling hooks change what the backward sees."""
    with saved_tensors_hooks(lambda t: 2 * t, lambda t: t):
        _, vjp_fn = sg.vjp(F.f_sq, X)
    np.testing.assert_allclose(vjp_fn(np.array(1.0))[0], 4 * X)


def test_innermost_hooks_apply():
    with saved_tensors_hooks(lambda t: 3 * t, lambda t: 3 * t):
        with saved_tensors_hooks(lambda t: 5 * t, lambda t: 5 * t):
            _, vjp_fn = sg.vjp(F.f_sq, X)
    np.testing.assert_allclose(vjp_fn(np.array(1.0))[0], 2 * 5 * 5 * X)


def test_save_on_cpu_gives_the_same_gradients():
    with save_on_cpu():
        _, vjp_fn = sg.vjp(F.f_func, X, Y)
    _, plain = sg.vjp(F.f_func, X, Y)
    for a, b in zip(vjp_fn(np.array(1.0)), plain(np.array(1.0))):
        np.testing.assert_allclose(a, b)


def _product_sum(x, y):
    return np.sum(x * y)


def _square_sum(a):
    return np.sum(a * a)


def test_hooks_apply_to_what_builtin_ops_save():
    """torch §7 (c) 1-3 without custom Functions: x*y saves y for x's gradient and x for
    y's; each is packed at forward and unpacked at backward, once."""
    rec = Recorder()
    x, y = np.array([1.0, 2.0]), np.ones(2)
    with saved_tensors_hooks(rec.pack, rec.unpack):
        _, vjp_fn = sg.vjp(_product_sum, x, y)
    assert rec.kinds() == ["pack", "pack"]
    assert sorted(tuple(v) for _, v in rec.log) == [(1.0, 1.0), (1.0, 2.0)]
    grads = vjp_fn(1.0)
    assert rec.kinds() == ["pack", "pack", "unpack", "unpack"]
    np.testing.assert_allclose(grads[0], y)
    with saved_tensors_hooks(lambda t: 2 * t, lambda t: t):
        _, vjp_fn = sg.vjp(_square_sum, np.ones(2))
    np.testing.assert_allclose(vjp_fn(1.0)[0], [4.0, 4.0])  # torch: a.grad == 4 * a
    with saved_tensors_hooks(lambda t: ("stored", t * 2), lambda p: p[1]):
        _, vjp_fn = sg.vjp(_square_sum, np.array([1.0, 2.0]))
    np.testing.assert_allclose(vjp_fn(1.0)[0], [4.0, 8.0])  # any object can be packed
    with saved_tensors_hooks(lambda t: 3 * t, lambda t: 3 * t):
        with saved_tensors_hooks(lambda t: 5 * t, lambda t: 5 * t):
            _, vjp_fn = sg.vjp(_square_sum, np.ones(2))
    np.testing.assert_allclose(vjp_fn(1.0)[0], [50.0, 50.0])  # only the innermost pair


def test_hook_variant_is_a_separate_module():
    from srcgrad.pipeline import vjp_jvp

    with saved_tensors_hooks(lambda t: t, lambda t: t):
        sg.vjp(F.f_exp, X)
    sg.vjp(F.f_exp, X)
    hooked, plain = vjp_jvp._VJP_HOOKS[F.f_exp], vjp_jvp._VJP[F.f_exp]
    assert "def f_exp_fwd(pack_hook, x):" in hooked.module_source
    assert "pack_hook" not in plain.module_source
    assert hooked.options() != plain.options()


def test_needs_input_grad_is_static_from_activity():
    """Only x is differentiated: the backward's `g * x if ctx.needs_input_grad[1]` folds away
    (in the generic module; a variant also drops `gx = 1.0 * y`, its seed being 1.0)."""
    g = sg.grad(F.f_needs, wrt=0)
    generic = sg.source(g)
    assert "gx = " in generic and "gy = " not in generic
    np.testing.assert_allclose(g(X, Y), Y)
    assert "gy = " not in sg.source(g)


# ---------------------------------------------------------------- jvp's tangents (fuzz seed 911909)
# torch gives a custom Function's jvp a zero tangent for a floating tensor input without
# one (spec §5, probe 5.jvp_receives_None_for_nontensor_and_nondual). An input computed
# from no differentiated argument (`np.zeros_like(x)`, a constant array) is a static
# value to the compiler, which passed None for it as for a number: the user's `xt * z`
# was `None * z` in the generated code (TypeError). And torch checks the size of the
# tangent jvp returns: a tangent of another shape was summed into the caller's tangent.

TWOS = np.array([2.0, -1.0, 0.5])


def scaled_by_a_computed_array(x):
    return np.sum(np.sin(Mul.apply(np.zeros_like(x) + TWOS, x)))


def scaled_by_a_constant_array(x):
    return np.sum(np.sin(Mul.apply(TWOS, x)))


def scaled_by_a_computed_array_second(x):
    return np.sum(np.sin(Mul.apply(x, np.ones_like(x) * TWOS)))


@pytest.mark.parametrize("fn", [scaled_by_a_computed_array, scaled_by_a_constant_array,
                                scaled_by_a_computed_array_second])
def test_jvp_receives_zeros_for_an_array_input_without_a_tangent(fn):
    x = np.array([0.3, -0.5, 0.8])
    expected = numeric_grad(fn, (x,), 0)
    direction = np.array([1.0, 0.5, -2.0])
    out, tangent = sg.jvp(fn, (x,), (direction,))
    np.testing.assert_allclose(out, fn(x))
    np.testing.assert_allclose(tangent, expected @ direction, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(sg.jacobian(fn, mode="forward")(x), expected, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(sg.grad(fn)(x), expected, rtol=1e-6, atol=1e-8)


class ReturnsInputWithOuterTangent(Function):
    @staticmethod
    def forward(ctx, x, z):
        ctx.save_for_forward(x, z)
        return x

    @staticmethod
    def jvp(ctx, xt, zt):
        x, z = ctx.saved_tensors
        return xt * z  # (3,) * (3, 1): a (3, 3) tangent of a (3,) output


def tangent_of_another_shape(x0):
    x0 = x0 + ReturnsInputWithOuterTangent.apply(np.zeros_like(x0), x0.reshape((3, 1)))
    return np.min(x0)


def test_a_jvp_tangent_of_another_shape_raises_torchs_error():
    x = np.array([0.3, -0.5, 0.8])
    message = (r"Trying to set a forward gradient that has a different size than that of the "
               r"original Tensor, this is not supported. Tensor is of size \[3\] while the given "
               r"forward gradient is of size \[3, 3\].")
    with pytest.raises(RuntimeError, match=message):
        sg.jvp(tangent_of_another_shape, (x,), (np.ones(3),))
    with pytest.raises(RuntimeError, match=message):
        sg.jacobian(tangent_of_another_shape, mode="forward")(x)
