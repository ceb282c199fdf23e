"""Eager / compiled parity: every row and case of the derivative table's tests, run on
`sg.Tensor`, against `sg.vjp` of the same call and central differences, first and second
order (issue 12's "Done when").

Each case is the module tests/rules/test_compiled_rules.py writes for it (`_build`):

    def f(x, y, w0):                 # w0: fixed random weights on the output
        _out = <the row's primal, as a user writes it: x @ y, xp.exp(x), x[index], ...>
        return xp.sum(w0 * _out)

`f` is called once on NumPy arrays through `sg.vjp` (the compiler) and once eagerly with
Tensors in place of the differentiable arrays: NumPy functions reach the runtime through
`__array_ufunc__` / `__array_function__`, operators and methods through Tensor's own.
First order: `f(...).backward()` fills the leaves' `.grad`; it must equal `sg.vjp(f, ...)`'s
gradients and the central difference of `f`. Second order: `sg.autograd.grad(...,
create_graph=True)`, then the gradient of `<grad, v>` for a random direction `v`; it must
equal `sg.grad` of the compiled `h(..., v) = <GRAD(...), v>` and the central difference of
`h` (whose first-order gradient the compiled test checks against central differences).

Every differentiable row must be covered here or listed in `NOT_EAGER` with the reason:
a row without a case fails `test_every_differentiable_row_has_a_parity_case`.
"""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.rules import RULES
from tests.conftest import numeric_grad
from tests.rules.cases import case_ids
from tests.rules.test_compiled_rules import _SYMMETRIC_INPUT, _build, _sym, compiled_cases

# Rows that are not eager ops, and why. Everything else with a VJP formula must have a case.
NOT_EAGER = {
    **{name: "a `math` function of a Tensor returns a Python float (as with torch): the value "
             "leaves the graph, so there is no eager op to differentiate"
       for name in RULES if name.startswith("math_")},
    "differentiable_once": "differentiating it is a CompileError by design "
                           "(tests/test_custom_function_compiled.py checks the error)",
    "torch_var_nodof": "the eager var of n <= correction elements only, whose value is nan or "
                       "inf: no finite difference judges it; tests/autograd/"
                       "test_kinks_vs_torch.py pins torch's values",
    "full": "NumPy dispatches np.full on `like=` only, so a Tensor fill value never reaches "
            "the runtime (torch.full takes a number too); sg.full is the eager factory",
}

CASES = [c for c in compiled_cases("vjp") if c[0].name not in NOT_EAGER]

FIRST_RTOL, FIRST_ATOL = 1e-5, 1e-6  # against central differences (as the compiled test)
SECOND_RTOL, SECOND_ATOL = 1e-4, 1e-5
SAME_RTOL = 1e-7  # eager against compiled: the same formulas, perhaps summed in another order


# ---------------------------------------------------------------- coverage

def test_every_differentiable_row_has_a_parity_case():
    covered = {rule.name for rule, _, _ in CASES}
    missing = sorted(name for name, rule in RULES.items()
                     if rule.vjp and name not in covered and name not in NOT_EAGER)
    assert not missing, f"differentiable rows without an eager parity case: {missing}"


def test_not_eager_names_rows():
    assert set(NOT_EAGER) <= set(RULES)
    assert all(RULES[name].vjp for name in NOT_EAGER), "a nondiff row needs no exclusion"


# ---------------------------------------------------------------- helpers

def _as_array(value):
    if isinstance(value, sg.Tensor):
        return np.asarray(value.detach().numpy(), dtype=np.float64)
    return np.asarray(value, dtype=np.float64)


def _compare(rule, actual, expected, what, rtol, atol):
    actual, expected = _as_array(actual), _as_array(expected)
    if rule.name in _SYMMETRIC_INPUT:  # defined on symmetric matrices: compare symmetric parts
        actual, expected = _sym(actual), _sym(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape}, expected {expected.shape}"
    scale = max(1.0, float(np.max(np.abs(expected), initial=0.0)))
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol * scale, err_msg=what)


def _eager_args(values, wrt):
    """The call's arguments as a user holds them: a fresh leaf Tensor for each
    differentiable array, a constant Tensor for every other float array (the output
    weights too); integer and boolean arrays (indices, masks) stay NumPy arrays."""
    leaves = {i: sg.tensor(values[i], requires_grad=True) for i in wrt}

    def constant(v):
        return sg.tensor(v) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v

    return [leaves[i] if i in leaves else constant(v) for i, v in enumerate(values)], \
        [leaves[i] for i in wrt]


def _directions(values, wrt):
    rng = np.random.default_rng(3)
    return [rng.standard_normal(np.shape(values[i])) for i in wrt]


# ---------------------------------------------------------------- first order

@pytest.mark.parametrize("rule,case_id,args", CASES, ids=case_ids(CASES))
def test_first_order(tmp_path, rule, case_id, args):
    module, wrt, values = _build(tmp_path, rule, args)
    assert wrt, "a differentiable case must have a float operand"
    eager_args, leaves = _eager_args(values, wrt)
    loss = module.f(*eager_args)
    assert isinstance(loss, sg.Tensor), f"the eager call returned {type(loss).__name__}"
    assert loss.requires_grad and loss.grad_fn is not None
    np.testing.assert_allclose(float(loss.item()), float(module.f(*values)), rtol=1e-10, atol=1e-12)
    loss.backward()

    out, vjp_fn = sg.vjp(module.f, *values)
    compiled = vjp_fn(np.ones_like(out))
    for k, i in enumerate(wrt):
        assert leaves[k].grad is not None, f"argument {i}: no .grad after backward"
        assert leaves[k].grad.shape == np.shape(values[i])
        _compare(rule, leaves[k].grad, compiled[i], f"argument {i}: eager vs sg.vjp", SAME_RTOL,
                 SAME_RTOL)
        _compare(rule, leaves[k].grad, numeric_grad(module.f, values, i),
                 f"argument {i}: eager vs central differences", FIRST_RTOL, FIRST_ATOL)


# ---------------------------------------------------------------- second order

def _eager_second_order(module, values, wrt, directions):
    """d/dx <grad f(x), v> by create_graph=True and a second `sg.autograd.grad`."""
    eager_args, leaves = _eager_args(values, wrt)
    grads = sg.autograd.grad(module.f(*eager_args), leaves, create_graph=True)
    assert len(grads) == len(leaves)
    total = None
    for g, v in zip(grads, directions):
        assert isinstance(g, sg.Tensor) and g.shape == v.shape
        term = (g * v).sum()
        total = term if total is None else total + term
    if not total.requires_grad:  # every gradient is constant in x (a linear row)
        return [np.zeros(np.shape(v)) for v in directions]
    second = sg.autograd.grad(total, leaves, allow_unused=True)
    return [np.zeros(np.shape(v)) if s is None else s for s, v in zip(second, directions)]


@pytest.mark.parametrize("rule,case_id,args", CASES, ids=case_ids(CASES))
def test_second_order(tmp_path, rule, case_id, args):
    module, wrt, values = _build(tmp_path, rule, args)
    directions = _directions(values, wrt)
    eager = _eager_second_order(module, values, wrt, directions)

    h_values = values + directions
    compiled = sg.grad(module.h, wrt=tuple(wrt))(*h_values)
    for k, i in enumerate(wrt):
        _compare(rule, eager[k], compiled[k], f"argument {i}: eager vs sg.grad of <GRAD, v>",
                 1e-6, 1e-8)
        _compare(rule, eager[k], numeric_grad(module.h, h_values, i),
                 f"argument {i}: eager vs central differences of <GRAD, v>", SECOND_RTOL,
                 SECOND_ATOL)
