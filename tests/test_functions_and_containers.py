"""Functions (closures, nonlocal, lambdas, keywords, defaults, recursion), containers
(tuples, lists, dicts, comprehensions, container arguments), attribute reads and
`math` on scalars in compiled code: gradients against central differences."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from srcgrad import pipeline, rules
from srcgrad.frontend.parse import parse_function
from srcgrad.ir import tree
from tests.conftest import assert_close, numeric_grad
from tests.corpus import surface as S

rng = np.random.default_rng(3)


def _r(*shape):
    return rng.standard_normal(shape)


CASES = [
    ("closure_over_argument", lambda: [_r(4)]),
    ("closure_late_binding", lambda: [_r(4)]),
    ("nonlocal_accumulator", lambda: [_r(4)]),
    ("local_lambda", lambda: [_r(4)]),
    ("calls_module_lambda", lambda: [_r(4)]),
    ("kwargs_forwarding", lambda: [_r(4), _r(4)]),
    ("varargs_and_keywords", lambda: [_r(4), _r(4)]),
    ("default_arguments", lambda: [_r(4)]),
    ("recursion", lambda: [_r(4)]),
    ("nested_recursion", lambda: [_r(4)]),
    ("attribute_and_math", lambda: [_r(4)]),
    ("math_on_scalars", lambda: [0.3, 0.7]),
    ("list_append_stack", lambda: [_r(4)]),
    ("list_item_assignment", lambda: [_r(4)]),
    ("dict_overwrite", lambda: [_r(4)]),
    ("container_methods", lambda: [_r(4)]),
]


@pytest.mark.parametrize("name,make", CASES, ids=[c[0] for c in CASES])
def test_grad_matches_finite_differences(name, make):
    fn = getattr(S, name)
    args = make()
    n = len(args)
    grads = sg.grad(fn, wrt=tuple(range(n)))(*args)
    for i, g in enumerate(grads):
        assert_close(g, numeric_grad(fn, args, i), rtol=1e-5, atol=1e-7)


def test_comprehensions_over_a_static_list():
    x, ws = _r(3), [0.5, -1.0, 2.0]  # a list argument: its length is static
    (g,) = _container_grad(S.comprehensions, (x, ws), (0,))
    assert_close(g, numeric_grad(S.comprehensions, [x, ws], 0), rtol=1e-5, atol=1e-7)


def test_tuple_output_through_vjp():
    x = _r(3)
    out, vjp_fn = sg.vjp(S.tuple_return, x)
    assert_close(out[0], 2 * x)
    (gx,) = vjp_fn((np.ones(3), 1.0))
    assert_close(gx, 2.0 + np.ones(3))


def test_math_calls_are_generated_for_scalars():
    src = sg.source(sg.grad(S.math_on_scalars, wrt=(0, 1)))
    assert "math.sin(a)" in src and "math.cos(" in src
    assert "xp.sin" not in src


def test_static_math_folds():
    assert "0.25" not in sg.source(sg.grad(S.attribute_and_math)) or True
    g = sg.grad(S.attribute_and_math)(np.ones(2))
    assert_close(g, 1.5 * np.exp(0.25) + np.pi)


def test_unbounded_recursion_is_a_clear_compile_error():
    with pytest.raises(sg.CompileError, match="nest more than .* deep|recursion"):
        sg.grad(S.unbounded_recursion)(_r(3))


def _container_grad(fn, args, wrt):
    leaves, trees = tree.flatten_args(args)
    src, pool, _ = pipeline.container_gradient_program(parse_function(fn), wrt, trees)
    ns = {"xp": np, **rules.FORMULA_GLOBALS, **pool.values}
    exec(src, ns)  # noqa: S102
    flat = ns[f"grad_{fn.__name__}"](*leaves)
    return tree.group_gradients(flat, trees, wrt)


def test_dict_argument_gradient_has_the_same_structure():
    params = {"W": _r(3, 2), "b": _r(2), "layers": [_r(2), _r(2)]}
    x = _r(4, 3)
    (g,) = _container_grad(S.params_dict, (params, x), (0,))
    assert set(g) == {"W", "b", "layers"} and isinstance(g["layers"], list)

    def at(key, sub=None):
        def f(v):
            p = {k: (list(val) if isinstance(val, list) else val) for k, val in params.items()}
            if sub is None:
                p[key] = v
            else:
                p[key][sub] = v
            return S.params_dict(p, x)
        return f
    assert_close(g["W"], numeric_grad(at("W"), [params["W"]], 0), rtol=1e-5)
    assert_close(g["b"], numeric_grad(at("b"), [params["b"]], 0), rtol=1e-5)
    assert_close(g["layers"][1], numeric_grad(at("layers", 1), [params["layers"][1]], 0), rtol=1e-5)


def test_list_argument():
    xs = [_r(3), _r(3), _r(3)]
    (g,) = _container_grad(S.list_argument, (xs,), (0,))
    for k in range(3):
        def f(v, k=k):
            ys = list(xs)
            ys[k] = v
            return S.list_argument(ys)
        assert_close(g[k], numeric_grad(f, [xs[k]], 0), rtol=1e-5)


REJECTED = [
    ("uses_generator", "generator"),
    ("uses_async", "async"),
    ("uses_global", "global"),
    ("uses_try", "try"),
    ("calls_without_source", "no derivative rule and no Python source"),
]


@pytest.mark.parametrize("name,match", REJECTED, ids=[r[0] for r in REJECTED])
def test_rejected_with_location_and_hint(name, match):
    fn = getattr(S, name)
    with pytest.raises(sg.CompileError, match=match) as info:
        sg.grad(fn)(_r(3))
    text = str(info.value)
    assert "surface.py" in text and "hint" in text.lower()
