"""The eager runtime's texts that name a torch type or API keep torch's words and name
srcgrad's after them (issue 31 §3; Note [torch's words, srcgrad's names] in
srcgrad/autograd/node.py).

Each test triggers one message and asserts both halves: with every " (srcgrad: ...)" taken
out, the text is torch's, observed in torch 2.14.1 (so a search for torch's text finds it),
and the srcgrad parts are exactly the names a srcgrad user calls.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import srcgrad as sg
import srcgrad.autograd.functional as F
from srcgrad.utils.checkpoint import CheckpointError, checkpoint

# " (srcgrad: ...)", whose name may hold one level of parentheses: `set_detect_anomaly(True)`
_OURS = re.compile(r" \(srcgrad: ((?:[^()]|\([^()]*\))*)\)")

HINT_TORCH = ("enable anomaly detection to find the operation that failed to compute its gradient, "
              "with torch.autograd.set_detect_anomaly(True, check_nan=False).")
HINT_OURS = "sg.autograd.set_detect_anomaly(True, check_nan=False)"


def split(text: str) -> tuple[str, list[str]]:
    """(torch's text, the srcgrad names) of one of srcgrad's messages."""
    return _OURS.sub("", text), _OURS.findall(text)


def raised(exc_type, f) -> str:
    with pytest.raises(exc_type) as info:
        f()
    return str(info.value)


def test_split_takes_out_only_the_srcgrad_parts():
    # the helper itself: a text without srcgrad's parts is left whole
    assert split("a (b) c") == ("a (b) c", [])
    assert split("x (srcgrad: f(1, 2)) y (srcgrad: z)") == ("x y", ["f(1, 2)", "z"])


def test_version_error_names_the_tensor_type_and_the_anomaly_api():
    x = sg.randn(3, requires_grad=True)
    y = x.exp()
    y.add_(1)
    text = raised(RuntimeError, lambda: y.sum().backward())
    torch_text, ours = split(text)
    assert torch_text == (  # observed in torch 2.14.1
        "one of the variables needed for gradient computation has been modified by an inplace "
        "operation: [torch.FloatTensor [3]], which is output 0 of Exp, is at version 1; expected "
        "version 0 instead. Hint: " + HINT_TORCH)
    assert ours == ["a float32 sg.Tensor of shape (3,)", HINT_OURS]
    assert "[torch.FloatTensor [3]] (srcgrad: a float32 sg.Tensor of shape (3,)), which" in text


def test_version_error_of_a_0d_float64_leaf():
    x = sg.tensor(1.0, requires_grad=True, dtype=np.float64)
    y = x * x
    x.detach().add_(1)
    torch_text, ours = split(raised(RuntimeError, y.backward))
    assert torch_text == (  # observed in torch 2.14.1
        "one of the variables needed for gradient computation has been modified by an inplace "
        "operation: [torch.DoubleTensor []] is at version 1; expected version 0 instead. Hint: "
        + HINT_TORCH)
    assert ours == ["a float64 sg.Tensor of shape ()", HINT_OURS]


def test_the_anomaly_mode_hint_names_no_api():
    # under anomaly mode torch's hint names no function: nothing is added to it
    x = sg.randn(3, requires_grad=True)
    y = x.exp()
    y.add_(1)
    with pytest.warns(UserWarning), sg.autograd.detect_anomaly():
        _, ours = split(raised(RuntimeError, lambda: y.sum().backward()))
    assert ours == ["a float32 sg.Tensor of shape (3,)"]


def test_hook_changing_the_dtype_names_both_types():
    x = sg.ones(2, requires_grad=True)
    y = x * 2
    y.register_hook(lambda g: g.double())
    torch_text, ours = split(raised(RuntimeError, lambda: y.sum().backward()))
    # observed in torch 2.14.1
    assert torch_text == ("hook '<lambda>' has changed the type of value (was torch.FloatTensor "
                          "got torch.DoubleTensor)")
    assert ours == ["a float32 sg.Tensor", "a float64 sg.Tensor"]


@pytest.mark.parametrize("dtype,torch_type", [(np.float64, "torch.DoubleTensor"),
                                              (np.int64, "torch.LongTensor")])
def test_optimizer_given_a_tensor_names_its_type(dtype, torch_type):
    # torch 2.14.1 says torch.LongTensor for int64 (srcgrad said torch.Tensor before)
    text = raised(TypeError, lambda: sg.optim.SGD(sg.ones(2, dtype=dtype), lr=0.1))
    torch_text, ours = split(text)
    assert torch_text == ("params argument given to the optimizer should be an iterable of "
                          f"Tensors or dicts, but got {torch_type}")
    assert ours == [f"a {np.dtype(dtype).name} sg.Tensor"]


_JACOBIAN = "torch.autograd.functional.jacobian: "


@pytest.mark.parametrize("exc_type,kwargs,rest", [
    (RuntimeError, dict(strict=True, vectorize=True),
     "`strict=True` and `vectorized=True` are not supported together. Please either set "
     "`strict=False` or `vectorize=False`."),
    (RuntimeError, dict(strict=True, vectorize=True, strategy="forward-mode"),
     "`strict=True` and `strategy=\"forward-mode\"` are not supported together (yet). Please "
     "either set `strict=False` or `strategy=\"reverse-mode\"`."),
    (NotImplementedError, dict(create_graph=True, vectorize=True, strategy="forward-mode"),
     "`create_graph=True` and `strategy=\"forward-mode\"` are not supported together (yet). "
     "Please either set `create_graph=False` or `strategy=\"reverse-mode\"`."),
], ids=["strict_vectorize", "strict_forward", "create_graph_forward"])
def test_jacobian_refusals_name_srcgrads_jacobian(exc_type, kwargs, rest):
    x = sg.tensor([1.0, 2.0], requires_grad=True)
    text = raised(exc_type, lambda: F.jacobian(lambda x: x * x, x, **kwargs))
    assert split(text) == (_JACOBIAN + rest, ["sg.autograd.functional.jacobian"])  # torch 2.14.1
    assert text.startswith("torch.autograd.functional.jacobian (srcgrad: "
                           "sg.autograd.functional.jacobian): ")


def test_only_inputs_warning_names_srcgrads_backward():
    x = sg.tensor([1.0, 2.0], requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sg.autograd.grad((x * x).sum(), [x], only_inputs=False)
    (w,) = [w for w in caught if w.category is FutureWarning]
    assert split(str(w.message)) == (  # observed in torch 2.14.1
        "only_inputs argument is deprecated and is ignored now (defaults to True). To accumulate "
        "gradient for other parts of the graph, please use torch.autograd.backward.",
        ["sg.autograd.backward"])


def test_inference_tensor_saved_names_srcgrads_modes():
    with sg.inference_mode():
        t = sg.ones(2)
    x = sg.ones(2, requires_grad=True)
    text = raised(RuntimeError, lambda: x * t)
    assert split(text) == (  # observed in torch 2.14.1
        "Inference tensors cannot be saved for backward. Please do not use Tensors created in "
        "inference mode in computation tracked by autograd. To work around this, you can make a "
        "clone to get a normal tensor and use it in autograd, or use `torch.no_grad()` instead "
        "of `torch.inference_mode()`.",
        ["`sg.no_grad()` instead of `sg.inference_mode()`"])


def test_checkpoint_recount_names_srcgrads_checkpoint():
    n = [0]

    def f(a):
        n[0] += 1
        return a.exp().sin() if n[0] == 1 else a.exp() * 2

    y = checkpoint(f, sg.ones(2, requires_grad=True))
    torch_text, ours = split(raised(CheckpointError, lambda: y.sum().backward()))
    # torch 2.14.1's first line (its tips about torch.compile that follow are left out)
    assert torch_text.startswith("torch.utils.checkpoint: A different number of tensors was saved "
                                 "during the original forward and recomputation.\n")
    assert ours == ["sg.utils.checkpoint"]
