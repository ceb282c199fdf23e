"""Forward-mode AD on sg.Tensor (spec/torch_semantics.md §8; srcgrad.autograd.forward_ad).

The table-driven part runs every row of the derivative table (each JVP case of
tests/rules/cases.py, as tests/kernels does) on dual tensors, the way any op on Tensors
runs (`ops.apply`), and checks each output's tangent against central differences of the
row's primal (arithmetic) and against `sg.jvp` of a function calling the row (the
compiler's forward mode of the same formulas).
"""

from __future__ import annotations

import importlib.util
import itertools
import re

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.autograd import forward_ad as fwAD
from srcgrad.autograd import ops
from tests.autograd.spec_util import check, const, exact, leaf, val
from tests.kernels.test_op_kernels import _active, _split
from tests.rules import evaluate as ev
from tests.rules.cases import case_ids, differentiable_cases
from tests.rules.test_compiled_rules import _substitute
from tests.rules.test_table import _close, _direction, _finite_difference, _rng

JVP_CASES = list(differentiable_cases("jvp"))
_counter = itertools.count()


# ---------------------------------------------------------------- every row, on dual tensors
def _module(tmp_path, rule, args, static, owners, dynamic):
    """A module whose `f(<float operands>)` calls the row (the others are its globals)."""
    floats = [i for i, v in enumerate(dynamic) if ev.is_float_array(v)]
    names = [f"_d{i}" for i in range(len(dynamic))]
    pieces, seen = {}, {}
    for i, p in enumerate(owners):
        seen.setdefault(p, []).append(names[i])
    for p in rule.params:
        if p in seen:
            group = seen[p]
            value = args[p]
            if isinstance(value, (list, tuple)):
                joined = ", ".join(group)
                pieces[p] = f"[{joined}]" if isinstance(value, list) else f"({joined},)"
            else:
                pieces[p] = group[0]
        else:
            value = args[p]  # (an inf of the cases reads back as xp.inf)
            pieces[p] = repr(value.item() if isinstance(value, np.generic) else value)
    source = "\n".join([
        "import math",
        "import numpy as xp",
        "from srcgrad.rules.helpers import *  # noqa: F403",
        "",
        f"def f({', '.join(names[i] for i in floats)}):",
        f"    return {_substitute(rule.render, pieces)}",
        "",
    ])
    path = tmp_path / f"dual_case_{next(_counter)}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for i, v in enumerate(dynamic):
        if i not in floats:
            setattr(module, names[i], v)
    return module.f, floats


@pytest.mark.parametrize("rule,case_id,args", JVP_CASES, ids=case_ids(JVP_CASES))
def test_every_row_on_dual_tensors(tmp_path, rule, case_id, args):
    static, dynamic, owners = _split(rule, args)
    active = _active(rule, args, owners, dynamic, "jvp")
    rng = _rng(rule, case_id, "dual")
    f, floats = _module(tmp_path, rule, args, static, owners, dynamic)
    for param in dict.fromkeys(p for p, a in zip(owners, active) if a):
        direction = _direction(rule, param, args[param], rng)
        parts = iter(direction)
        tangents = [next(parts) if p == param and a else None for p, a in zip(owners, active)]
        with fwAD.dual_level():
            operands = tuple(
                fwAD.make_dual(sg.tensor(v), sg.tensor(t)) if t is not None
                else sg.tensor(v) if ev.is_float_array(v) else v
                for v, t in zip(dynamic, tangents))
            out = ops.apply(rule.name, static, ops.static_key(static), operands,
                            ops.node_name(rule.name))
            outs = out if isinstance(out, tuple) else (out,)
            got = [fwAD.unpack_dual(o).tangent for o in outs]
        fd = _finite_difference(rule, args, param, direction)
        primals = [dynamic[i] for i in floats]
        seeds = [tangents[i] if tangents[i] is not None else np.zeros_like(dynamic[i])
                 for i in floats]
        _, compiled = sg.jvp(f, primals, seeds)
        compiled = compiled if ev.multi(rule) else (compiled,)
        for k, (t, expected, c) in enumerate(zip(got, fd, compiled)):
            assert t is not None and t.shape == np.shape(expected), f"output {k}"
            _close(val(t), expected, f"dual tangent {param}, output {k} vs central differences")
            _close(val(t), np.broadcast_to(c, np.shape(expected)),
                   f"dual tangent {param}, output {k} vs sg.jvp")


# ---------------------------------------------------------------- §8 (c) cases
def test_sin_of_a_dual():
    with fwAD.dual_level() as level:
        assert level == 0
        d = fwAD.make_dual(sg.tensor([0.0, 1.0]), sg.tensor([1.0, 2.0]))
        u = fwAD.unpack_dual(d.sin())
    assert type(u).__name__ == "UnpackedDualTensor"
    assert u._fields == ("primal", "tangent")
    assert u[0] is u.primal and u[1] is u.tangent
    check(u.primal, [0.0, 0.84147098], rtol=1e-6)
    check(u.tangent, np.cos([0.0, 1.0]) * [1.0, 2.0], rtol=1e-6)


def test_outside_a_level():
    with pytest.raises(RuntimeError, match=exact(
            "Trying to create a dual Tensor for forward AD but no level exists, make sure to "
            "enter_dual_level() first.")):
        fwAD.make_dual(sg.ones(2), sg.ones(2))
    t = sg.ones(2)
    u = fwAD.unpack_dual(t)
    assert u.primal is t and u.tangent is None
    check(u.primal, [1.0, 1.0])


def test_tangents_are_dropped_at_exit():
    bar = sg.tensor([1.0, 2.0])
    with fwAD.dual_level():
        d = fwAD.make_dual(sg.tensor([3.0, 4.0]), bar)
        assert fwAD.unpack_dual(d).tangent is bar
        e = d * 2
    assert fwAD.unpack_dual(d).tangent is None
    with fwAD.dual_level():  # a new level: nothing carried over
        assert fwAD.unpack_dual(d).tangent is None
        assert fwAD.unpack_dual(e).tangent is None


def test_size_mismatch_and_nesting():
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match=exact(
                "Trying to set a forward gradient that has a different size than that of the "
                "original Tensor, this is not supported. Tensor is of size [2] while the given "
                "forward gradient is of size [3].")):
            fwAD.make_dual(sg.rand(2), sg.rand(3))
        with pytest.raises(RuntimeError, match=exact(
                "Nested forward mode AD is not supported at the moment")):
            fwAD.enter_dual_level()
        with pytest.raises(RuntimeError, match=exact(
                "Nested forward mode AD is not supported at the moment")):
            with fwAD.dual_level():
                pass
    assert fwAD.enter_dual_level() == 0
    fwAD.exit_dual_level(level=0)


def test_exiting_the_wrong_level():
    text = ("Trying to exit a forward AD level that was not the last one that was created. "
            "This is not supported.")
    with pytest.raises(RuntimeError, match=exact(text)):
        fwAD.exit_dual_level()
    fwAD.enter_dual_level()
    try:
        with pytest.raises(RuntimeError, match=exact(text)):
            fwAD.exit_dual_level(level=1)
    finally:
        fwAD.exit_dual_level(level=0)


def test_dtype_errors():
    with fwAD.dual_level():
        with pytest.raises(ValueError, match=exact(
                "Expected primal to be floating point or complex, but got: torch.int64")):
            fwAD.make_dual(sg.tensor(np.array([1, 2])), sg.ones(2))
        with pytest.raises(ValueError, match=exact(
                "Expected tangent to be floating point or complex, but got: torch.int64")):
            fwAD.make_dual(sg.ones(2), sg.tensor(np.array([1, 2])))


def test_tangent_that_is_a_dual():
    with fwAD.dual_level():
        t = fwAD.make_dual(sg.ones(2), sg.ones(2))
        with pytest.raises(RuntimeError, match=exact(
                "Setting a forward grad that itself has a forward gradient at the same level0 is "
                "not supported.")):
            fwAD.make_dual(sg.ones(2), t)


def test_product_rule_of_two_duals():
    with fwAD.dual_level():
        a = fwAD.make_dual(sg.tensor(2.0), sg.tensor(1.0))
        b = fwAD.make_dual(sg.tensor(3.0), sg.tensor(10.0))
        check(fwAD.unpack_dual(a * b).tangent, 23.0)
        assert fwAD.unpack_dual(sg.ones(2) * 2).tangent is None  # plain tensors: no tangent


def test_in_place_into_a_plain_tensor_gives_it_a_tangent():
    with fwAD.dual_level():
        d = fwAD.make_dual(sg.tensor([1.0, 2.0]), sg.tensor([3.0, 4.0]))
        x = sg.zeros(2)
        version = x._version
        x.add_(d)
        assert x._version == version + 1
        check(fwAD.unpack_dual(x).tangent, [3.0, 4.0])
        x.mul_(d)  # product rule through an in-place op: (x d)' = x' d + x d'
        check(fwAD.unpack_dual(x).tangent, [3.0 * 1.0 + 1.0 * 3.0, 4.0 * 2.0 + 2.0 * 4.0])
        y = d.clone()
        y.exp_()
        check(fwAD.unpack_dual(y).tangent, np.exp([1.0, 2.0]) * [3.0, 4.0])


def test_writes_recording_no_graph_move_tangents():
    with fwAD.dual_level():
        x = sg.zeros(2)
        x.copy_(fwAD.make_dual(sg.tensor([7.0, 8.0]), sg.tensor([5.0, 6.0])))
        check(fwAD.unpack_dual(x).tangent, [5.0, 6.0])
        c = fwAD.make_dual(sg.tensor([[1.0, 2.0], [3.0, 4.0]]), sg.ones((2, 2))).clone()
        v = c.T  # a write through a view: the base's tangent changes where the view lies
        v[1] = fwAD.make_dual(sg.tensor([7.0, 8.0]), sg.tensor([5.0, 6.0]))
        check(c, [[1.0, 7.0], [3.0, 8.0]])
        check(fwAD.unpack_dual(c).tangent, [[1.0, 5.0], [1.0, 6.0]])
        c[0] = 0.0  # a constant written: zero tangent there
        check(fwAD.unpack_dual(c).tangent, [[0.0, 0.0], [1.0, 6.0]])
        c.zero_()
        check(fwAD.unpack_dual(c).tangent, np.zeros((2, 2)))


def test_in_place_on_a_dual_that_requires_grad():
    """The op reads a snapshot of the target (its value before the write): the snapshot
    carries the target's tangent, so the product rule sees it."""
    x = leaf([1.0, 2.0])
    with fwAD.dual_level():
        d = fwAD.make_dual(x * 1.0, const([1.0, 2.0]))
        d.mul_(3.0)
        check(fwAD.unpack_dual(d).tangent, [3.0, 6.0])
        e = fwAD.make_dual(x * 1.0, const([1.0, 2.0]))
        e.mul_(e)  # (e^2)' = 2 e e'
        check(fwAD.unpack_dual(e).tangent, [2.0, 8.0])


def test_views_of_a_dual_have_view_tangents():
    with fwAD.dual_level():
        d = fwAD.make_dual(sg.tensor([[1.0, 2.0], [3.0, 4.0]]), sg.tensor([[5.0, 6.0], [7.0, 8.0]]))
        check(fwAD.unpack_dual(d[1]).tangent, [7.0, 8.0])
        check(fwAD.unpack_dual(d.T).tangent, [[5.0, 7.0], [6.0, 8.0]])
        check(fwAD.unpack_dual(d.reshape(4)).tangent, [5.0, 6.0, 7.0, 8.0])


def test_a_view_s_tangent_follows_writes_into_its_base():
    with fwAD.dual_level():
        d = fwAD.make_dual(sg.tensor([1.0, 2.0, 3.0]), sg.ones(3))
        v = d[1:]
        d.mul_(2.0)
        check(fwAD.unpack_dual(v).tangent, [2.0, 2.0])
        v.mul_(d[1:])  # (v w)' = v' w + v w' with w = d[1:] read before the write
        check(d, [2.0, 16.0, 36.0])
        check(fwAD.unpack_dual(d).tangent, [2.0, 16.0, 24.0])
        primal = fwAD.unpack_dual(d).primal
        primal.add_(1.0)  # a write into the primal alone leaves the tangent
        check(d, [3.0, 17.0, 37.0])
        check(fwAD.unpack_dual(d).tangent, [2.0, 16.0, 24.0])


def test_grad_modes():
    with fwAD.dual_level():
        d = fwAD.make_dual(sg.tensor([0.5]), sg.tensor([2.0]))
        assert fwAD.unpack_dual(d.detach()).tangent is None  # detach drops the tangent
        with sg.no_grad():  # no_grad does not affect forward AD
            check(fwAD.unpack_dual(d.exp()).tangent, 2.0 * np.exp([0.5]))
        with sg.inference_mode():  # inference mode drops it
            assert fwAD.unpack_dual(d.exp()).tangent is None


def test_make_dual_of_a_leaf_requiring_grad_is_a_view_reverse_mode_flows_through():
    x = leaf([1.0, 2.0])
    with fwAD.dual_level():
        d = fwAD.make_dual(x, const([1.0, 1.0]))
        assert not d.is_leaf and d.grad_fn.name() == "ViewBackward0"
        assert d._version == x._version
        (d * d).sum().backward()
        primal = fwAD.unpack_dual(d).primal
        assert primal is not fwAD.unpack_dual(d).primal  # a new view on every call
        assert fwAD.unpack_dual(primal).tangent is None
    check(x.grad, [2.0, 4.0])


def test_dual_level_is_a_decorator():
    @fwAD.dual_level()
    def tangent_of_square(x, t):
        return fwAD.unpack_dual(fwAD.make_dual(x, t) ** 2).tangent

    check(tangent_of_square(sg.tensor([3.0]), sg.tensor([1.0])), [6.0])


def test_an_op_without_a_formula_raises():
    with fwAD.dual_level():
        d = fwAD.make_dual(sg.tensor([0.5]), sg.tensor([1.0]))
        with pytest.raises(NotImplementedError, match=(
                "^Trying to use forward AD with i0 that does not support it because it has not "
                "been implemented yet.\n")):  # (np.i0: no row; np.sinc has one since issue 29)
            np.i0(d)
        check(np.i0(sg.tensor([0.5])), np.i0([0.5]))  # no tangent: fine


def test_a_compiled_function_on_duals():
    @sg.compile
    def f(x, y):
        return np.sin(x) * y

    with fwAD.dual_level():
        d = fwAD.make_dual(sg.tensor([0.5, 1.0]), sg.tensor([1.0, 2.0]))
        out = f(d, sg.tensor([3.0, 4.0]))
        check(fwAD.unpack_dual(out).tangent, np.cos([0.5, 1.0]) * [1.0, 2.0] * [3.0, 4.0])


# ---------------------------------------------------------------- composition with reverse mode
def test_forward_over_reverse_hessian_vector_product():
    """A tangent flowing through a create_graph backward gives H v (exp saves its output:
    its tangent is found on the node)."""
    x0 = np.array([0.3, 0.7, 1.1])
    v = np.array([1.0, -2.0, 0.5])
    with fwAD.dual_level():
        x = leaf(x0)
        d = fwAD.make_dual(x, const(v))
        y = (d.exp() * d.sin()).sum() + (d * d * d).sum()
        (g,) = sg.autograd.grad(y, x, create_graph=True)
        hv = fwAD.unpack_dual(g).tangent
    # central differences of the gradient along v
    def grad(z):
        return np.exp(z) * np.sin(z) + np.exp(z) * np.cos(z) + 3 * z * z
    eps = 1e-6
    check(hv, (grad(x0 + eps * v) - grad(x0 - eps * v)) / (2 * eps), rtol=1e-6)


def test_reverse_over_forward_tangents_are_differentiable():
    x0 = np.array([0.2, 0.9])
    x = leaf(x0)
    t = leaf([1.0, 3.0])
    with fwAD.dual_level():
        d = fwAD.make_dual(x, t)
        tangent = fwAD.unpack_dual((d * d.sin()).sum()).tangent
    # tangent = sum((sin x + x cos x) t): d/dt = sin x + x cos x; d/dx = (2 cos x - x sin x) t
    tangent.backward()
    check(t.grad, np.sin(x0) + x0 * np.cos(x0))
    check(x.grad, (2 * np.cos(x0) - x0 * np.sin(x0)) * np.array([1.0, 3.0]))


# ---------------------------------------------------------------- custom Functions
class Sq(sg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_forward(x)
        return x * x

    @staticmethod
    def jvp(ctx, t):
        (x,) = ctx.saved_tensors
        return 2 * x * t


def test_custom_function_jvp_with_save_for_forward():
    with fwAD.dual_level():
        d = fwAD.make_dual(sg.tensor([3.0]), sg.tensor([1.0]))
        check(fwAD.unpack_dual(Sq.apply(d)).tangent, [6.0])


class NoJvp(sg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


def test_custom_function_without_jvp():
    with fwAD.dual_level():
        d = fwAD.make_dual(sg.tensor([3.0]), sg.tensor([1.0]))
        with pytest.raises(NotImplementedError, match=exact(
                "You must implement the jvp function for custom autograd.Function to use it "
                "with forward mode AD.")):
            NoJvp.apply(d)


class Scaled(sg.autograd.Function):
    """set_materialize_grads(False): the jvp sees None for an input without a tangent."""

    seen: list = []

    @staticmethod
    def forward(ctx, x, y):
        ctx.set_materialize_grads(False)
        ctx.save_for_forward(x, y)
        return x * y

    @staticmethod
    def jvp(ctx, x_t, y_t):
        x, y = ctx.saved_tensors
        Scaled.seen.append((x_t is None, y_t is None))
        return x_t * y if y_t is None else x_t * y + x * y_t


def test_custom_function_jvp_without_materialized_tangents():
    Scaled.seen.clear()
    with fwAD.dual_level():
        d = fwAD.make_dual(sg.tensor([3.0]), sg.tensor([2.0]))
        check(fwAD.unpack_dual(Scaled.apply(d, sg.tensor([5.0]))).tangent, [10.0])
    assert Scaled.seen == [(False, True)]


def test_seed_save_for_forward_example():
    """The seed document's `save_for_forward` example (torch.autograd.Function docs)."""

    class Func(sg.autograd.Function):
        @staticmethod
        def forward(ctx, x, y, z: int):
            ctx.save_for_backward(x, y)
            ctx.save_for_forward(x, y)
            ctx.z = z
            return x * y * z

        @staticmethod
        def jvp(ctx, x_t, y_t, _):
            x, y = ctx.saved_tensors
            z = ctx.z
            return z * (y * x_t + x * y_t)

        @staticmethod
        def vjp(ctx, grad_out):
            x, y = ctx.saved_tensors
            z = ctx.z
            return z * grad_out * y, z * grad_out * x, None

    a = sg.tensor(1.0, requires_grad=True, dtype=np.float64)
    t = sg.tensor(1.0, dtype=np.float64)
    b = sg.tensor(2.0, requires_grad=True, dtype=np.float64)
    c = 4
    with fwAD.dual_level():
        a_dual = fwAD.make_dual(a, t)
        d = Func.apply(a_dual, b, c)
        check(d, 8.0)
        check(fwAD.unpack_dual(d).tangent, 8.0)  # z * (y * x_t + x * 0)
        d.backward()
    check(a.grad, 8.0)
    check(b.grad, 4.0)


class _WideTangent(sg.autograd.Function):
    """A jvp returning a tangent of another size than its output's."""

    @staticmethod
    def forward(ctx, x):
        return x * 2.0

    @staticmethod
    def jvp(ctx, t):
        return t * np.ones(3)  # (1,) broadcast to (3,)

    @staticmethod
    def backward(ctx, g):
        return g * 2.0


def _wide(x):
    return _WideTangent.apply(x)


def test_a_custom_jvp_of_another_size_raises_torchs_error():
    """torch checks the tangent a Function's jvp returns against its output's size; the
    eager runtime broadcast a (1,)-sized or smaller tangent and raised nothing (the
    compiled path's check_tangent already raised)."""
    text = exact("Trying to set a forward gradient that has a different size than that of the "
                 "original Tensor, this is not supported. Tensor is of size [1] while the given "
                 "forward gradient is of size [3].")
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match=text):
            _WideTangent.apply(fwAD.make_dual(sg.tensor([1.5]), sg.tensor([1.0])))
    # the compiled path raises torch's text and names the user's line after it
    with pytest.raises(RuntimeError) as raised:
        sg.jvp(_wide, (np.array([1.5]),), (np.array([1.0]),))
    (note,) = raised.value.__notes__
    assert re.match(text, str(raised.value))
    assert re.fullmatch(r"srcgrad: raised by the code generated for "
                        r"test_spec_08_forward_ad\.py:\d+: return _WideTangent\.apply\(x\)", note)
