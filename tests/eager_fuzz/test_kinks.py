"""The eager fuzzer's kinks-and-poles mode (tests/eager_fuzz/kinks.py) without torch: its
programs, its judge, and sg.Tensor's side of every program (torch's side runs in
`benchmarks/fuzz_eager.py --torch`, where torch is importable)."""

import math

import srcgrad as sg
from tests.eager_fuzz import kinks


def test_programs_are_deterministic_and_sit_on_kinks():
    assert [kinks.generate(s) for s in range(50)] == [kinks.generate(s) for s in range(50)]
    for seed in range(200):
        _, inputs = kinks.generate(seed)
        assert all(v in kinks.POINTS for values in inputs for v in values)


def test_every_program_runs_under_sg_tensor():
    """sg.Tensor answers every program (a nan is an answer); the var of one element raised
    ZeroDivisionError in its backward (seed 379) before the var row divided by a NumPy
    number."""
    raised = {}
    for seed in range(400):
        expr, inputs = kinks.generate(seed)
        result = kinks.evaluate(sg, expr, inputs)
        if isinstance(result, kinks.Raised):
            raised[seed] = (expr, inputs, str(result))
    assert not raised


def test_judge():
    nan = math.nan
    ours = ([[0.0, nan]], [[1.0, 2.0]])
    assert kinks.judge("x.abs()", ours, ([[-0.0, nan]], [[1.0, 2.0 + 1e-15]])) == "agree"
    assert kinks.judge("x.abs()", ours, ([[1.0, nan]], [[1.0, 2.0]])) == "wrong"
    assert kinks.judge("x.abs()", ours, kinks.Raised("RuntimeError")) == "wrong"
    # a documented second-order difference (tests/autograd/test_kinks_vs_torch.py)
    assert kinks.judge("x.relu()", ([[0.0]], None), ([[0.0]], [[0.0]])) == "documented"
    assert kinks.judge("x.relu()", ([[1.0]], None), ([[0.0]], [[0.0]])) == "wrong"
