"""sg.autograd.gradcheck / gradgradcheck on plain functions (torch_semantics.md §11),
and every table row's JVP through the compiler."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.autograd import GradcheckError, gradcheck, gradgradcheck

XD = np.array([1.0, 2.0, 3.0])
KINK = np.array([5e-7, 1.0, 2.0])  # |y| has a kink within eps of KINK[0]


def sin_square(x):
    return np.sin(x ** 2)


def two_outputs(x, y):
    return x * y, np.abs(y)


def abs_of_second(x, y):
    return x * 2.0 + np.abs(y)


def test_autograd_is_importable_from_the_package():
    assert sg.autograd.gradcheck is gradcheck
    assert issubclass(GradcheckError, RuntimeError)


def test_gradcheck_and_gradgradcheck_pass():
    assert gradcheck(sin_square, (XD,)) is True
    assert gradcheck(sin_square, XD, check_forward_ad=True) is True
    assert gradcheck(sin_square, (XD,), fast_mode=True) is True
    assert gradgradcheck(sin_square, (XD,)) is True
    assert gradgradcheck(two_outputs, (XD, XD + 1.0)) is True


def test_mismatch_names_output_and_input():
    with pytest.raises(GradcheckError) as info:
        gradcheck(abs_of_second, (XD, KINK))
    assert str(info.value).startswith("Jacobian mismatch for output 0 with respect to input 1,\n"
                                      "numerical:")
    assert "\nanalytical:" in str(info.value)
    assert gradcheck(abs_of_second, (XD, KINK), raise_exception=False) is False


def test_indices_count_only_differentiable_inputs_and_outputs():
    with pytest.raises(GradcheckError, match="^Jacobian mismatch for output 1 with respect to input 0,"):
        gradcheck(two_outputs, (3.0, KINK))  # the Python scalar is not input 0
    with pytest.raises(GradcheckError, match="^Jacobian mismatch for output 1 with respect to input 1,"):
        gradcheck(two_outputs, (XD, KINK), check_forward_ad=True, check_backward_ad=False)


def test_fast_mode_message():
    with pytest.raises(GradcheckError) as info:
        gradcheck(abs_of_second, (XD, KINK), fast_mode=True)
    text = str(info.value)
    assert text.startswith("Jacobian mismatch for output 0 with respect to input 1,\nnumerical:")
    assert "computed \nin fast mode. See: https://github.com/pytorch/pytorch/issues/53876" in text
    assert "The max per-element difference (slow mode) is: " in text


def test_validation_errors():
    with pytest.raises(ValueError, match="gradcheck expects at least one input tensor to require "
                                         "gradient, but none of them have requires_grad=True."):
        gradcheck(sin_square, (np.arange(3),), raise_exception=False)
    with pytest.raises(AssertionError, match="Expected at least one of check_forward_ad or "
                                             "check_backward_ad to be True"):
        gradcheck(sin_square, (XD,), check_backward_ad=False)
    with pytest.raises(RuntimeError, match="The 0th input has a dimension with stride 0"):
        gradcheck(sin_square, (np.broadcast_to(XD, (2, 3)),), raise_exception=False)


def test_single_precision_input_warns():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gradcheck(sin_square, (XD.astype(np.float32),), raise_exception=False, eps=1e-3, atol=1e-2)
    assert any(str(w.message) == "Input #0 requires gradient and is not a double precision floating "
               "point or complex. This check will likely fail if all the inputs are not of double "
               "precision floating point or complex. " for w in caught)


def test_errors_in_func_propagate():
    def bad(x):
        raise KeyError("boom")

    with pytest.raises(KeyError):
        gradcheck(bad, (XD,), raise_exception=False)


# ---------------------------------------------------------------------- every row's JVP
cases = pytest.importorskip("tests.rules.cases")
compiled_rules = pytest.importorskip("tests.rules.test_compiled_rules")


JVP_CASES = compiled_rules.compiled_cases("jvp")


@pytest.mark.parametrize("rule,case_id,args", JVP_CASES, ids=cases.case_ids(JVP_CASES))
def test_rule_jvp_through_the_compiler(tmp_path, rule, case_id, args):
    """sg.jvp of `sum(w * <row>)` against central differences along a random direction."""
    module, wrt, values = compiled_rules._build(tmp_path, rule, args)
    assert wrt, "a differentiable case must have a float operand"
    rng = np.random.default_rng(5)
    tangents = [np.zeros(np.shape(v)) for v in values]
    for i in wrt:
        t = rng.standard_normal(np.shape(values[i]))
        if rule.name in compiled_rules._SYMMETRIC_INPUT:
            t = compiled_rules._sym(t)
        tangents[i] = t
    _, t_out = sg.jvp(module.f, values, tangents)
    eps = 1e-6
    plus = [v + eps * t if i in wrt else v for i, (v, t) in enumerate(zip(values, tangents))]
    minus = [v - eps * t if i in wrt else v for i, (v, t) in enumerate(zip(values, tangents))]
    expected = (module.f(*plus) - module.f(*minus)) / (2 * eps)
    np.testing.assert_allclose(t_out, expected, rtol=1e-5, atol=1e-6)
