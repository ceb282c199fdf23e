"""docs/numpy_coverage.md is generated from tests/rules/numpy_coverage.py and current.

`SRCGRAD_REGEN_DOCS=1 python -m pytest tests/rules/test_numpy_coverage.py` rewrites the
table between the markers. The test fails when NumPy has a public callable that is not
classified (a NumPy upgrade adding a function), when a hand classification is stale (the
function got a row, or NumPy no longer has it), and when the doc differs from the table.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.rules import numpy_coverage as cov

DOC = Path(__file__).resolve().parents[2] / "docs" / "numpy_coverage.md"
BEGIN, END = "<!-- BEGIN GENERATED TABLE -->", "<!-- END GENERATED TABLE -->"


def test_every_public_callable_is_classified():
    missing = [name for name, status, _, _ in cov.table() if status is None]
    assert not missing, f"classify these in tests/rules/numpy_coverage.py: {missing}"


def test_hand_classifications_are_current():
    names = {name: (obj, how) for name, obj, how in cov.public_callables()}
    gone = sorted(set(cov.HAND) - set(names))
    assert not gone, f"NumPy has no such callables (remove them): {gone}"
    rowed = sorted(n for n in cov.HAND if cov.classify(n, *names[n])[1])
    assert not rowed, f"these have rows now (remove their hand classification): {rowed}"
    assert all(cov.HAND[n][1] for n in cov.HAND), "every hand classification has a reason"


def test_a_classified_twice_name_is_an_error():
    try:
        cov._merge(cov._group("refused", "a", "numpy.x"), cov._group("refused", "b", "numpy.x"))
    except ValueError as err:
        assert "numpy.x" in str(err)
    else:
        raise AssertionError("a name in two groups was accepted")


def test_coverage_doc_is_current():
    text = DOC.read_text()
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    expected = f"{head}{BEGIN}\n{cov.generated_table(cov.table())}\n{END}{tail}"
    if os.environ.get("SRCGRAD_REGEN_DOCS"):
        DOC.write_text(expected)
    assert text == expected, "docs/numpy_coverage.md is stale: rerun with SRCGRAD_REGEN_DOCS=1"
