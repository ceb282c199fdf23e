"""backend="numba" (Note [The numba backend] in srcgrad.pipeline.numba_variants): over the
rule table's gradcheck cases (tests/rules/cases.py, built as tests/rules/test_compiled_rules.py
builds them), a gradient numba compiled equals NumPy's to 1e-12, and a row numba does not
take runs on NumPy with its reason recorded (`sg.explain`), listed by
test_rows_numba_does_not_take. Skipped when numba is not installed.

The whole table takes minutes (numba compiles each case); by default every
fourth case runs, SRCGRAD_NUMBA_ALL=1 runs all of them.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import srcgrad as sg

pytest.importorskip("numba")
compiled_rules = pytest.importorskip("tests.rules.test_compiled_rules")

ALL = compiled_rules.VJP_CASES
CASES = ALL if os.environ.get("SRCGRAD_NUMBA_ALL") else ALL[::4]
NOT_TAKEN: dict = {}  # case id -> the reason recorded for its variant


@pytest.fixture(autouse=True)
def _numba_even_where_slower(monkeypatch):
    """These cases check numba's arithmetic, not the speed rule (Note [The numba backend]:
    a variant numba runs slower on the first call runs NumPy's code; a few-microsecond
    case is either, by the timer's noise)."""
    from srcgrad.pipeline import numba_variants

    monkeypatch.setattr(numba_variants, "SLOWER", float("inf"))


def _close(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype
    scale = float(np.max(np.abs(want[np.isfinite(want)]), initial=1.0)) if want.ndim else 1.0
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * scale)


@pytest.mark.parametrize("rule,case_id,args", CASES, ids=compiled_rules.cases.case_ids(CASES))
def test_numba_gradient_equals_numpys(tmp_path, rule, case_id, args):
    module, wrt, values = compiled_rules._build(tmp_path, rule, args)
    want = sg.grad(module.f, wrt=tuple(wrt))(*values)
    g = sg.grad(module.f, wrt=tuple(wrt), backend="numba")
    got = g(*values)
    for a, b in zip(got, want):
        _close(a, b)
    records = list(g.__srcgrad__.numba_records.values())
    assert len(records) == 1
    if records[0].backend != "numba":
        assert records[0].reason, "a fallback without a reason"
        assert records[0].reason in sg.explain(g)
        NOT_TAKEN[f"{rule.name}[{case_id}]"] = records[0].reason
    else:
        assert "numba" in sg.explain(g).splitlines()[-1]


def test_rows_numba_does_not_take():
    """The rows whose variant runs on NumPy, each with its reason (run with -s to read
    them; after the cases above)."""
    if not NOT_TAKEN:
        pytest.skip("run with the cases above")
    for name, reason in sorted(NOT_TAKEN.items()):
        print(f"{name}: {reason}", file=sys.stderr)
        assert reason.startswith(("numba", "argument")), reason
