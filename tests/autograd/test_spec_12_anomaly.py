"""spec/torch_semantics.md §12: anomaly detection — every "(c) Test cases" entry, the (b)
messages, the state probes, and torch's test_anomaly_* tests (custom Functions, nested
create_graph backward) on sg.Tensor."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.autograd import anomaly_mode, engine, ops
from srcgrad.autograd import grad as autograd_grad
from srcgrad.autograd.anomaly_mode import (
    detect_anomaly,
    is_anomaly_check_nan_enabled,
    is_anomaly_enabled,
    set_detect_anomaly,
)
from srcgrad.autograd.function import Function
from tests.autograd.spec_util import check, exact, leaf

ENABLED = ("Anomaly Detection has been enabled. This mode will increase the runtime and should "
           "only be enabled for debugging.")
NO_FORWARD_INFO = ("Error detected in {}. No forward pass information available. Enable detect "
                   "anomaly during forward pass for more information.")
TRACEBACK = "Error detected in {}. Traceback of forward call that caused the error:\n"


@pytest.fixture(autouse=True)
def _anomaly_off():
    yield
    anomaly_mode.set_anomaly_enabled(False, True)  # a failed test leaves no mode behind


def _messages(record) -> list:
    return [str(w.message) for w in record]


# ---------------------------------------------------------------- (c) test cases
def test_case_1_nan_in_backward_with_forward_traceback():
    x = leaf([0.0])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError, match=exact(
                "Function 'SqrtBackward0' returned nan values in its 0th output.")):
            with np.errstate(invalid="ignore", divide="ignore"):
                with detect_anomaly():
                    (x.sqrt() * 0).sum().backward()  # the line the traceback shows
    messages = [m for m in _messages(w) if "Anomaly" in m or "Error detected" in m]
    assert messages[0] == ENABLED
    assert messages[1].startswith(TRACEBACK.format("SqrtBackward0"))
    assert "test_spec_12_anomaly.py" in messages[1]
    assert "(x.sqrt() * 0).sum().backward()  # the line the traceback shows" in messages[1]
    assert len(messages) == 2


def test_case_2_forward_outside_anomaly_mode():
    x = leaf([0.0])
    y = (x.sqrt() * 0).sum()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError, match=exact(
                "Function 'SqrtBackward0' returned nan values in its 0th output.")):
            with np.errstate(invalid="ignore", divide="ignore"):
                with detect_anomaly():
                    y.backward()
    assert NO_FORWARD_INFO.format("SqrtBackward0") in _messages(w)


def test_case_3_check_nan_false_lets_nan_through():
    x = leaf([0.0])
    with warnings.catch_warnings(record=True):
        with np.errstate(invalid="ignore", divide="ignore"):
            with detect_anomaly(check_nan=False):
                (x.sqrt() * 0).sum().backward()
    assert np.isnan(x.grad.numpy()).all() and x.grad.shape == (1,)


def test_nan_without_anomaly_is_silent():  # probe 12.nan_without_anomaly_silently_nan
    x = leaf([0.0])
    with np.errstate(invalid="ignore", divide="ignore"):
        (x.sqrt() * 0).sum().backward()
    assert np.isnan(x.grad.numpy()).all()


def test_case_4_version_error_hint_and_warning():  # test_anomaly_grad_warnings
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError) as info:
            with detect_anomaly():
                a = leaf(np.random.default_rng(0).standard_normal(5))
                d1 = a + 1
                d2 = d1 ** 2
                d1 += 1
                autograd_grad(d2.sum(), a)
    assert str(info.value).startswith("one of the variables needed for gradient computation has "
                                      "been modified by an inplace operation")
    assert str(info.value).endswith(
        "Hint: the backtrace further above shows the operation that failed to compute its "
        "gradient. The variable in question was changed in there or anywhere later. Good luck!")
    messages = _messages(w)
    assert len(messages) == 2
    assert "Anomaly Detection has been enabled" in messages[0]
    assert "Error detected in PowBackward0" in messages[1]
    assert "d2 = d1 ** 2" in messages[1]


def test_version_error_hint_without_anomaly():
    a = leaf([1.0, 2.0])
    d1 = a + 1
    d2 = d1 ** 2
    d1 += 1
    with pytest.raises(RuntimeError) as info:
        autograd_grad(d2.sum(), a)
    assert str(info.value).endswith(
        "Hint: enable anomaly detection to find the operation that failed to compute its "
        "gradient, with torch.autograd.set_detect_anomaly(True, check_nan=False) "
        "(srcgrad: sg.autograd.set_detect_anomaly(True, check_nan=False)).")


# ---------------------------------------------------------------- (a) states
def test_set_detect_anomaly_states():  # probe 12.set_detect_anomaly_states
    states = [is_anomaly_enabled()]
    with set_detect_anomaly(True):
        states.append((is_anomaly_enabled(), is_anomaly_check_nan_enabled()))
    states.append(is_anomaly_enabled())
    with set_detect_anomaly(True, check_nan=False):
        states.append((is_anomaly_enabled(), is_anomaly_check_nan_enabled()))
    states.append(is_anomaly_enabled())
    assert states == [False, (True, True), False, (True, False), False]


def test_anomaly_context_nesting():  # probe 12.anomaly_context_nesting
    seen = []
    with warnings.catch_warnings(record=True):
        with detect_anomaly():
            seen.append(is_anomaly_enabled())
            with set_detect_anomaly(False):
                seen.append(is_anomaly_enabled())
                with detect_anomaly():
                    seen.append(is_anomaly_enabled())
                seen.append(is_anomaly_enabled())
    assert seen == [True, False, True, False]
    assert not is_anomaly_enabled()


def test_set_detect_anomaly_as_a_function():
    set_detect_anomaly(True, check_nan=False)
    assert (is_anomaly_enabled(), is_anomaly_check_nan_enabled()) == (True, False)
    set_detect_anomaly(False)
    assert (is_anomaly_enabled(), is_anomaly_check_nan_enabled()) == (False, True)


def test_detect_anomaly_is_not_a_decorator():
    with warnings.catch_warnings(record=True):
        mode = detect_anomaly()
    with pytest.raises(TypeError, match=exact("'detect_anomaly' object is not callable")):
        mode(lambda: None)


def test_enabling_warns():
    with pytest.warns(UserWarning, match=exact(ENABLED)):
        with detect_anomaly():
            pass


def test_runtime_hooks_only_while_on():  # Note [Instrumentation]: free when off
    assert ops.INSTRUMENT is None and engine.INSTRUMENT is None
    with set_detect_anomaly(True):
        assert ops.INSTRUMENT is not None and engine.INSTRUMENT is not None
    assert ops.INSTRUMENT is None and engine.INSTRUMENT is None
    with pytest.raises(ZeroDivisionError):
        with set_detect_anomaly(True):
            raise ZeroDivisionError
    assert ops.INSTRUMENT is None and engine.INSTRUMENT is None


def test_forward_records_traceback_in_metadata():
    x = leaf([1.0, 2.0])
    with set_detect_anomaly(True):
        y = x * 2
    assert "y = x * 2" in "".join(y.grad_fn.metadata["traceback_"])
    z = x * 3
    assert z.grad_fn.metadata == {}


def test_no_check_when_off_and_gradients_unchanged():
    x = leaf([1.0, 2.0, 3.0])
    with set_detect_anomaly(True):
        (x.exp() * x).sum().backward()
    e = np.exp([1.0, 2.0, 3.0])
    check(x.grad, e * np.array([1.0, 2.0, 3.0]) + e)


def test_error_in_hook_keeps_its_type_and_warns():
    x = leaf([1.0, 2.0])
    with set_detect_anomaly(True):
        y = x * 2

        def hook(g):
            raise ValueError("from the hook")

        y.register_hook(hook)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            with pytest.raises(ValueError, match="from the hook"):
                y.sum().backward()
    assert any(m.startswith(TRACEBACK.format("MulBackward0")) for m in _messages(w))


# ---------------------------------------------------------------- custom Functions
class _ErrorInBackward(Function):  # the detect_anomaly docstring's MyFunc
    @staticmethod
    def forward(ctx, inp):
        return inp.clone()

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError("Some error in backward")


def test_docs_example_error_in_custom_backward():
    def run_fn(a):
        out = _ErrorInBackward.apply(a)
        return out.sum()

    inp = leaf(np.random.default_rng(1).random((10, 10)))
    out = run_fn(inp)
    with pytest.raises(RuntimeError, match=exact("Some error in backward")):
        out.backward()  # without anomaly mode: the error alone
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError, match=exact("Some error in backward")):
            with detect_anomaly():
                inp = leaf(np.random.default_rng(1).random((10, 10)))
                out = run_fn(inp)
                out.backward()
    stack = next(m for m in _messages(w) if m.startswith("Error detected"))
    assert stack.startswith(TRACEBACK.format("_ErrorInBackwardBackward"))
    assert "out = run_fn(inp)" in stack and "out = _ErrorInBackward.apply(a)" in stack


class _NanGrad(Function):  # test_anomaly_detect_nan
    @staticmethod
    def forward(ctx, inp1, inp2, fail_0th):
        ctx.fail_0th = fail_0th
        return inp1.sum(0, keepdims=True)

    @staticmethod
    def backward(ctx, g):
        nan = g.expand((10, 10)) * float("nan")
        return (nan, None, None) if ctx.fail_0th else (None, nan, None)


def test_anomaly_detect_nan_custom_function():
    inp = leaf(np.random.default_rng(2).random((10, 10)))
    _NanGrad.apply(inp, inp, True).sum().backward()  # no anomaly mode: no error
    out = _NanGrad.apply(inp, inp, True).sum()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError, match=exact(
                "Function '_NanGradBackward' returned nan values in its 0th output.")):
            with detect_anomaly():
                out.backward()
    assert NO_FORWARD_INFO.format("_NanGradBackward") in _messages(w)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError, match=exact(
                "Function '_NanGradBackward' returned nan values in its 1th output.")):
            with detect_anomaly():
                out = _NanGrad.apply(inp, inp, False).sum()
                out.backward()
    assert any("_NanGrad.apply(inp, inp, False)" in m for m in _messages(w))


class _Outer(Function):  # test_nested_anomaly_detect_nan
    @staticmethod
    def forward(ctx, inp, fail_0th):
        ctx.fail_0th = fail_0th
        ctx.save_for_backward(inp)
        return inp.sum(0, keepdims=True)

    @staticmethod
    def backward(ctx, g):
        inp, = ctx.saved_tensors
        g = g.expand((10, 10))
        return _Inner.apply(g * inp, g + inp, ctx.fail_0th), None


class _Inner(Function):
    @staticmethod
    def forward(ctx, a, b, fail_0th):
        ctx.fail_0th = fail_0th
        return a * 2.0 + b

    @staticmethod
    def backward(ctx, g):
        nan = g * float("nan")
        return (nan, g, None) if ctx.fail_0th else (g, nan, None)


def test_nested_anomaly_detect_nan():
    inp = leaf(np.random.default_rng(3).random((10, 10)))
    ginp, = autograd_grad(_Outer.apply(inp, True), (inp,), grad_outputs=(leaf(np.ones((1, 10))),),
                          create_graph=True)
    ginp.sum().backward()  # no anomaly mode: no error
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError, match=exact(
                "Function '_InnerBackward' returned nan values in its 1th output.")):
            with detect_anomaly():
                out = _Outer.apply(inp, False)
                ginp, = autograd_grad(out, (inp,), grad_outputs=(leaf(np.ones((1, 10))),),
                                      create_graph=True)
                ginp.sum().backward()
    messages = [m for m in _messages(w) if "Anomaly" not in m]
    assert messages[0].startswith(TRACEBACK.format("_InnerBackward"))
    assert "_Inner.apply(g * inp, g + inp, ctx.fail_0th)" in messages[0]
    assert messages[1].startswith(
        "\n\nPrevious calculation was induced by _OuterBackward. Traceback of forward call that "
        "induced the previous calculation:\n")
    assert "out = _Outer.apply(inp, False)" in messages[1]


@sg.compile
def _compiled_sqrt_times_zero(x):
    return np.sum(np.sqrt(x) * 0)


def test_compiled_call_records_its_forward():
    x = leaf([0.0, 1.0])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError, match=exact(
                "Function 'CompiledFunctionBackward' returned nan values in its 0th output.")):
            with np.errstate(invalid="ignore", divide="ignore"):
                with detect_anomaly():
                    y = _compiled_sqrt_times_zero(x)
                    y.backward()
    stack = next(m for m in _messages(w) if m.startswith("Error detected"))
    assert stack.startswith(TRACEBACK.format("CompiledFunctionBackward"))
    assert "y = _compiled_sqrt_times_zero(x)" in stack


def test_in_place_on_a_view_records_its_copyslices_node():
    from srcgrad.autograd import inplace

    plain_write = inplace.write
    root = leaf([[1.0, 2.0], [3.0, 4.0]])
    with set_detect_anomaly(True):
        x = root.clone()
        x[0:1].mul_(2)  # the base's history becomes CopySlices here
    assert x.grad_fn.name() == "torch::autograd::CopySlices"
    assert "x[0:1].mul_(2)  # the base's history" in "".join(x.grad_fn.metadata["traceback_"])
    assert inplace.write is plain_write  # unwrapped when the mode ends
    x.sum().backward()
    check(root.grad, [[2.0, 2.0], [1.0, 1.0]])
