"""sg.vmap of Python's `math` on a traced scalar and of `a, b = x` unpacking (fuzz
campaign 2790000: `math.tanh`, `unpack` had no batched form, the two most frequent vmap
refusals). Each example's `math.f(s)` is NumPy's `f` over the batch on
`math_checked(s, "f")`, which raises as the example's own `math` call would (Note
[Python's math over a batch] in srcgrad.passes.batch_scalars); unpacking reads each
target's row of every example. Checked against the per-example Python calls and against
central differences (sg.grad of the vmap, the vmap of sg.grad, the Hessian)."""

import importlib
import math

import numpy as np
import pytest

import srcgrad as sg


def every_math_function(x):
    s = np.sum(x)
    t = s * 0.25 + 0.1  # in (-1, 1) at X: acos/asin's domain
    return (math.tanh(s) * x + math.exp(s * 0.1) + math.sqrt(s * s + 1.0) * math.atan(s)
            + math.fabs(s) + math.log(s * s + 2.0) + math.sin(s) * math.cos(s) + math.tan(t)
            + math.acos(t) + math.asin(t) + math.cosh(t) + math.sinh(t) + math.expm1(t)
            + math.log10(s * s + 1.0) + math.log2(s * s + 1.0) + math.log1p(s * s))


def unpacked(x):
    a, b = x
    return a * b + math.sin(a) * b


def unpacked_rows(x):  # rows of a matrix, each of them a vector per example
    top, bottom = x
    return np.sum(top * bottom) + math.tanh(np.sum(top))


X = np.array([[0.3, -0.2], [1.5, 0.7], [-0.4, -1.1]])
M = np.stack([X[:2], X[1:], X[::2]])


def _differences(fn, x, eps=1e-6):
    return np.array([(fn(x + eps * u.reshape(x.shape)) - fn(x - eps * u.reshape(x.shape))) / (2 * eps)
                     for u in np.eye(x.size)]).reshape(x.shape)


@pytest.mark.parametrize("fn,data", [(every_math_function, X), (unpacked, X), (unpacked_rows, M)],
                         ids=["math", "unpack", "unpack_rows"])
def test_as_each_example_and_differentiated(fn, data):
    np.testing.assert_allclose(sg.vmap(fn)(data), np.stack([fn(r) for r in data]), rtol=1e-12)

    def total(x):
        return np.sum(np.sin(sg.vmap(fn)(x)))
    np.testing.assert_allclose(sg.grad(total)(data), _differences(total, data), rtol=1e-6, atol=1e-8)
    per_example = sg.vmap(sg.grad(lambda x: np.sum(fn(x))))(data)
    np.testing.assert_allclose(per_example, np.stack([_differences(lambda x: np.sum(fn(x)), r)
                                                      for r in data]), rtol=1e-6, atol=1e-8)
    grad = sg.grad(total)
    H = sg.hessian(total)(data)
    want = np.stack([(grad(data + 1e-5 * u.reshape(data.shape)) - grad(data - 1e-5 * u.reshape(data.shape)))
                     / 2e-5 for u in np.eye(data.size)]).reshape(H.shape)
    np.testing.assert_allclose(H, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("body,error", [
    ("math.log(np.sum(x)) * x", ValueError),  # an example's sum is negative
    ("math.sqrt(np.sum(x)) * x", ValueError),
    ("math.exp(np.sum(x) * 1000.0) * x", OverflowError),
    ("math.acos(np.sum(x)) * x", ValueError),
])
def test_an_examples_math_error_is_pythons(tmp_path, monkeypatch, body, error):
    name = f"math_error_{abs(hash(body))}"
    (tmp_path / f"{name}.py").write_text(f"import math\nimport numpy as np\n\ndef f(x):\n    return {body}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    f = importlib.import_module(name).f
    with pytest.raises(error) as python:
        for row in X:
            f(row)
    with pytest.raises(error) as batched:
        sg.vmap(f)(X)
    assert str(batched.value) == str(python.value)
