"""The fuzzer's boundary grammar (tests/fuzz/boundary.py) and its opt-in transforms
(tests/fuzz/compose.py): the generator produces each construct, and the oracle judges it
(a right program passes, a wrong answer is reported wrong)."""

from __future__ import annotations

import numpy as np
import pytest

import srcgrad as sg
from tests.fuzz import boundary, compose, oracle
from tests.fuzz.generator import generate


@pytest.fixture
def program_dir(tmp_path):
    return tmp_path


def _explain(result) -> str:
    return "; ".join(f"{f.transform} {f.call}: {f.outcome}: {f.detail}" for f in result.failures)


# ---------------------------------------------------------------- any table row
def test_row_programs_reach_every_differentiable_row():
    rows = {r.name for r, _, _ in boundary.row_cases()}
    assert len(rows) > 150  # every differentiable row with a float array operand
    drawn = set()
    for seed in range(3000):
        program = boundary.row_program(seed)
        if program is not None:
            drawn |= {f[4:] for f in program.features if f.startswith("row:")}
    assert len(drawn) >= 0.9 * len(rows), sorted(rows - drawn)


def test_the_campaign_grammar_draws_row_programs_only_with_a_boundary_share():
    assert not any("table_row" in generate(s).features for s in range(2600000, 2600100))
    rows = [s for s in range(2600000, 2600100) if "table_row" in generate(s, 0.3).features]
    assert len(rows) > 5


@pytest.mark.parametrize("row", ["power", "cholesky", "concatenate", "einsum"])
def test_oracle_judges_a_row_program(program_dir, row):
    seed = next(s for s in range(20000) if (p := boundary.row_program(s)) is not None
                and f"row:{row}" in p.features)
    program = boundary.row_program(seed)
    result = oracle.check(program, program_dir)
    assert result.outcome == "pass", _explain(result)
    assert {"grad", "jvp", "hessian"} <= set(result.transforms)


def test_oracle_reports_a_wrong_row_derivative(program_dir, monkeypatch):
    program = next(p for s in range(20000) if (p := boundary.row_program(s)) is not None
                   and "row:power" in p.features)
    grad = sg.grad
    monkeypatch.setattr(oracle.sg, "grad", lambda f, wrt: (lambda *a: tuple(
        1.001 * g for g in grad(f, wrt=wrt)(*a))))
    result = oracle.check(program, program_dir, transforms=["grad"])
    assert result.outcome == "wrong", _explain(result)


# ---------------------------------------------------------------- index objects, call forms
def test_generator_draws_index_objects_and_call_forms():
    sources = "\n".join(generate(s, 1.0).source for s in range(2600000, 2600600))
    for construct in ("np.r_[", "np.c_[", "np.s_[", "np.ix_(", ") > 0.2]", "np.sum(a=",
                      ".sum(None)", "np.clip(", "a_min="):
        assert construct in sources, construct


INDEXED = '''
import numpy as np
ARGS = [('array', (3,)), ('array', (2, 3))]
OUTPUT = 'scalar'


def f(x0, x1):
    return np.sum(np.sin(x0) * BODY)
'''


@pytest.mark.parametrize("body", [
    "np.r_[x0[:1], x0[1:]]", "np.c_[x0, 2.0 * x0].sum(axis=1)", "x0[np.s_[::-1]][::-1]",
    "x1[np.ix_([1, 0], [0, 1, 2])][0]", "np.sum(x1[x1 > 0.2])", "x1.sum(0)", "np.sum(x1, 0)",
    "np.clip(x0, a_min=-1.0, a_max=1.0)", "x1.max(0)", "np.mean(x1, axis=0, keepdims=False)"])
def test_oracle_passes_index_objects_and_call_forms(program_dir, body):
    program = oracle.spec_from_source(INDEXED.replace("BODY", body), seed=7)
    result = oracle.check(program, program_dir)
    assert result.outcome == "pass", _explain(result)


@pytest.mark.parametrize("body", ["np.sum(a=x1, axis=0)", "np.mean(a=x1, axis=0)",
                                  "np.linalg.norm(x=x0) * x0", "pow(x0, 2) + pow(1.5, x0)",
                                  "np.multiply(x0, 0.5, dtype=None)", "np.add(x0, x0, out=None)",
                                  "x0.__neg__().__mul__(x0).__add__(1.0).__abs__()",
                                  "x1.__matmul__(x0).__pow__(2).__truediv__(2.0).sum().__sub__(x0)",
                                  "np.add.reduce(x1) + np.multiply.reduce(x1, axis=0)",
                                  "np.maximum.reduce(x1, 0, keepdims=True)[0] * np.minimum.reduce("
                                  "x0, axis=None)"])
def test_numpys_own_keyword_names_and_builtin_pow(program_dir, body):
    """Refused before (the boundary campaign's top reasons): `np.sum(a=x)`, NumPy's name for
    the array, "does not fit its supported signature" (the row's is `x`: expand renames
    NumPy's first parameter); Python's `pow` had no row (now the power row's target);
    `dtype=None`/`out=None` (NumPy's no-op defaults) did not fit the row's signature; an
    operator's own method (`x.__mul__(y)`) was "not supported" (now the operator's row);
    `np.add.reduce` had no rule (now sum's, over axis 0 by default)."""
    program = oracle.spec_from_source(INDEXED.replace("BODY", body), seed=7)
    result = oracle.check(program, program_dir)
    assert result.outcome == "pass", _explain(result)


def test_grad_of_a_function_calling_vmap_with_a_float_argument():
    """The nested fuzzer's grad(vmap) (issue 28): sg.grad of a function calling
    sg.vmap(f, in_axes=(0, None)) with a Python float crashed (TypeError: 'str' object is
    not callable, frontend/inlining.py: a float's stand-in); against central differences."""
    def f(x0, x1):
        return np.sum(np.sin(x0) * x0[::-1]) * x1

    def g(x0, x1):
        return np.sum(np.tanh(sg.vmap(f, in_axes=(0, None))(np.stack([x0, 0.5 * x0]), x1)))

    x = np.array([0.3, 0.5, -0.2])
    got = sg.grad(g, wrt=0)(x, 0.7)
    eye = np.eye(3) * 1e-6
    want = [(g(x + e, 0.7) - g(x - e, 0.7)) / 2e-6 for e in eye]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)


# ---------------------------------------------------------------- two-deep compositions
NESTED = '''
import numpy as np
ARGS = [('array', (3,)), ('float',)]
OUTPUT = 'scalar'


def f(x0, x1):
    return np.sum(np.sin(x0) * x0[::-1]) * x1 + np.sum(np.exp(0.3 * x0)) * x1 * x1
'''


def _seed_of(kind):
    return next(s for s in range(200) if compose.pick(s, compose.COMPOSITIONS, "nested") == kind)


@pytest.mark.parametrize("kind", compose.COMPOSITIONS)
def test_oracle_passes_each_composition(program_dir, kind):
    program = oracle.spec_from_source(NESTED, seed=_seed_of(kind))
    assert "nested" in oracle.applicable(program, oracle.OPT_IN)
    result = oracle.check(program, program_dir, transforms=["nested"])
    assert result.outcome == "pass", _explain(result)


def test_oracle_reports_jacobian_of_jacobian_returning_the_inner_jacobian(program_dir, monkeypatch):
    """issue 28's bug: sg.jacobian(sg.jacobian(f)) returned the gradient, not the Hessian."""
    program = oracle.spec_from_source(NESTED, seed=_seed_of("jacobian(jacobian)"))
    jacobian = sg.jacobian

    def inner_only(f, **kw):
        return f if getattr(f, "_fake_outer", False) else _mark(jacobian(f, **kw))

    def _mark(j):
        j._fake_outer = True
        return j
    monkeypatch.setattr(compose.sg, "jacobian", inner_only)
    result = oracle.check(program, program_dir, transforms=["nested"])
    assert result.outcome == "wrong" and "structure" in result.failures[0].detail, _explain(result)


def test_oracle_reports_a_wrong_hessian_product(program_dir, monkeypatch):
    program = oracle.spec_from_source(NESTED, seed=_seed_of("jvp(grad)"))
    jvp = sg.jvp
    monkeypatch.setattr(compose.sg, "jvp", lambda f, p, t: (lambda o, d: (o, 1.01 * d))(*jvp(f, p, t)))
    result = oracle.check(program, program_dir, transforms=["nested"])
    assert result.outcome == "wrong", _explain(result)


# ---------------------------------------------------------------- complex arguments
def _complex_seed(kind):
    return next(s for s in range(200) if compose.pick(s, compose.COMPLEX_KINDS, "complex") == kind)


@pytest.mark.parametrize("kind", compose.COMPLEX_KINDS)
def test_oracle_counts_a_refused_complex_argument_as_right(program_dir, kind):
    program = oracle.spec_from_source(NESTED, seed=_complex_seed(kind))
    result = oracle.check(program, program_dir, transforms=["complex"])
    assert result.outcome == "pass", _explain(result)


def test_oracle_reports_a_value_for_a_complex_argument_as_wrong(program_dir, monkeypatch):
    program = oracle.spec_from_source(NESTED, seed=_complex_seed("grad"))
    monkeypatch.setattr(compose.sg, "grad", lambda f, wrt: (lambda *a: tuple(np.zeros(3) for _ in a)))
    result = oracle.check(program, program_dir, transforms=["complex"])
    assert result.outcome == "wrong" and result.failures[0].detail.startswith("complex:"), _explain(result)


def test_vmap_of_grad_refuses_a_complex_argument():
    """Fuzz seed 2600029 (boundary campaign): sg.vmap(sg.grad(f)) batched the generated
    gradient and returned a complex 'gradient' where sg.grad refuses complex arguments."""
    def f(x):
        return np.sum(np.tanh(x) ** 2)

    batch = np.ones((2, 3)) + 0.5j
    with pytest.raises(TypeError, match="vmap of grad: argument `x` is complex"):
        sg.vmap(sg.grad(f))(batch)
    with pytest.raises(TypeError, match="is complex"):
        sg.vmap(sg.jacobian(f))(batch)
    assert np.iscomplexobj(sg.vmap(f)(batch))  # vmap alone differentiates nothing
