"""Every template of tests/fuzz/surface_forms.py compiles and its gradient matches
central differences (so the forms the fuzzer draws are programs srcgrad compiles)."""

from __future__ import annotations

import importlib
import random
import sys

import numpy as np
import pytest

import srcgrad as sg
from tests.conftest import assert_close, numeric_grad
from tests.fuzz.surface_forms import SURFACE_FORMS, surface_program


@pytest.mark.parametrize("form", SURFACE_FORMS, ids=[f.name for f in SURFACE_FORMS])
def test_a_surface_form_compiles_with_the_gradient_of_central_differences(form, tmp_path):
    name = f"surface_form_{form.name}"
    (tmp_path / f"{name}.py").write_text(form.source.format(c=1.25).lstrip())
    sys.path.insert(0, str(tmp_path))
    try:
        f = importlib.import_module(name).f
    finally:
        sys.path.remove(str(tmp_path))
    rng = np.random.default_rng(3)
    args = [rng.uniform(-1.0, 1.0, spec[1]) for spec in form.args]
    wrt = tuple(range(len(args)))
    grads = sg.grad(f, wrt=wrt)(*args)
    for i, g in enumerate(grads):
        assert_close(g, numeric_grad(f, args, i), rtol=1e-5, atol=1e-7)


def test_surface_program_gives_the_generators_program_fields():
    p = surface_program(random.Random(5), 5)
    assert set(p) == {"seed", "source", "entry", "args", "output", "features"}
    assert "def f(" in p["source"] and "{c}" not in p["source"]



def test_the_generator_draws_the_surface_forms_at_its_boundary_share():
    from tests.fuzz.generator import generate

    def forms_drawn(share):
        heads = {form.name: form.source.split("{c}")[0].lstrip()[:60] for form in SURFACE_FORMS}
        sources = [generate(seed, boundary_share=share).source for seed in range(200)]
        return {name for name, head in heads.items() for src in sources if src.startswith(head)}

    assert len(forms_drawn(1.0)) >= 3  # several forms join the campaign's grammar
    assert not forms_drawn(0.0)  # the CI slice's seeds (no boundary share) keep their programs
