"""spec/torch_semantics.md §14: `sg.autograd.profiler` — event names and counts (forward
ops, one event per backward node inside its `evaluate_function` event), the table,
`record_function`, the Chrome trace, and that the runtime is unhooked outside a profile.
Timings are never asserted (spec Appendix B)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.autograd import engine, ops
from srcgrad.autograd.anomaly_mode import set_detect_anomaly
from srcgrad.autograd.function import Function
from srcgrad.autograd.profiler import (
    _profiler_enabled,
    emit_itt,
    emit_nvtx,
    profile,
    record_function,
)
from tests.autograd.spec_util import check, exact, leaf

ACC = "torch::autograd::AccumulateGrad"
EVAL = "autograd::engine::evaluate_function: "


def _counts(prof) -> dict:
    return {e.key: e.count for e in prof.key_averages()}


def _names(prof) -> list:
    return [e.name for e in prof.function_events]


def test_profile_basic_names_and_counts():  # probe 14.profile_basic
    x, w = leaf([1.0, 2.0, 3.0]), leaf([4.0, 5.0, 6.0])
    with profile() as prof:
        y = x * w
        z = y.sum()
        z.backward()
    assert _names(prof) == [
        "aten::mul", "aten::sum",
        EVAL + "SumBackward0", "SumBackward0",
        EVAL + "MulBackward0", "MulBackward0",
        EVAL + ACC, ACC, EVAL + ACC, ACC]
    assert _counts(prof) == {"aten::mul": 1, "aten::sum": 1, EVAL + "SumBackward0": 1,
                             "SumBackward0": 1, EVAL + "MulBackward0": 1, "MulBackward0": 1,
                             EVAL + ACC: 2, ACC: 2}
    check(x.grad, [4.0, 5.0, 6.0])  # profiling changes nothing
    check(w.grad, [1.0, 2.0, 3.0])


def test_each_node_is_its_own_event_inside_evaluate_function():
    x = leaf([1.0, 2.0])
    with profile() as prof:
        (x.exp() * 2).sum().backward()
    events = prof.function_events
    for evt in events:
        if evt.name.startswith(EVAL):
            assert [c.name for c in evt.cpu_children] == [evt.name[len(EVAL):]]
        elif evt.name.startswith("aten::"):
            assert evt.cpu_parent is None and evt.cpu_children == []
    backward = [e.name for e in events if e.name.endswith("Backward0") and EVAL not in e.name]
    assert backward == ["SumBackward0", "MulBackward0", "ExpBackward0"]


def test_docs_example_counts():  # the profile docstring's loop
    x = sg.randn((1, 1), requires_grad=True)
    with profile() as prof:
        for _ in range(100):
            y = x ** 2
            y.backward()
    counts = _counts(prof)
    assert counts["aten::pow"] == 100
    assert counts["PowBackward0"] == 100 and counts[EVAL + "PowBackward0"] == 100
    assert counts[ACC] == 100
    check(x.grad, 200 * x.detach().numpy(), rtol=1e-5)  # float32: 100 sums


def test_table_columns_and_rows():  # test_profiler_aggregation_table
    x = leaf([1.0, 2.0])
    with profile() as prof:
        (x * x).sum().backward()
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=3)
    lines = table.splitlines()
    header = lines[1].split()
    assert " ".join(header) == "Name Self CPU % Self CPU CPU total % CPU total CPU time avg # of Calls"
    assert set(lines[0]) == {"-", " "} and lines[0] == lines[2] == lines[-2]
    assert len(lines) == 3 + 3 + 2  # header block, row_limit rows, rule and total
    assert lines[-1].startswith("Self CPU time total: ")
    full = prof.key_averages().table()
    assert len(full.splitlines()) == 3 + len(prof.key_averages()) + 2
    assert str(prof) == prof.table()
    width = len(full.splitlines()[0].split("  ")[0])  # the Name column
    names = [line[:width].strip() for line in full.splitlines()[3:-2]]
    assert names == [e.key if len(e.key) < 52 else e.key[:52] + "..." for e in prof.key_averages()]
    assert [line.split()[-1] for line in full.splitlines()[3:-2]] == [
        str(e.count) for e in prof.key_averages()]


def test_table_sort_by_count():
    x = leaf([1.0])
    with profile() as prof:
        for _ in range(3):
            y = x * 2
        y.sum().backward()
    first_row = prof.key_averages().table(sort_by="count").splitlines()[3]
    assert first_row.split()[0] == "aten::mul" and first_row.split()[-1] == "3"


def test_total_average_and_self_time_total():
    x = leaf([1.0, 2.0])
    with profile() as prof:
        (x * 3).sum().backward()
    total = prof.total_average()
    assert total.key == "Total" and total.count == len(prof.function_events)
    self_times = [e.self_cpu_time_total for e in prof.function_events]
    assert all(t >= 0 for t in self_times)
    assert prof.self_cpu_time_total == pytest.approx(sum(self_times))
    for evt in prof.function_events:  # a parent's time covers its children's
        assert evt.cpu_time_total >= sum(c.cpu_time_total for c in evt.cpu_children)


def test_profiler_enabled_flag_and_unhooking():  # torch.autograd._profiler_enabled
    assert not _profiler_enabled()
    assert ops.INSTRUMENT is None and engine.INSTRUMENT is None
    with profile():
        assert _profiler_enabled()
        assert ops.INSTRUMENT is not None and engine.INSTRUMENT is not None
    assert not _profiler_enabled()
    assert ops.INSTRUMENT is None and engine.INSTRUMENT is None
    with pytest.raises(ZeroDivisionError):
        with profile():
            raise ZeroDivisionError
    assert ops.INSTRUMENT is None and not _profiler_enabled()


def test_profiler_and_anomaly_mode_together():
    with set_detect_anomaly(True):
        with profile() as prof:
            x = leaf([1.0])
            (x * 2).sum().backward()
        assert ops.INSTRUMENT is not None  # anomaly mode still needs the hooks
        assert "aten::mul" in _names(prof)
    assert ops.INSTRUMENT is None


def test_results_only_after_the_block():
    with profile() as prof:
        with pytest.raises(RuntimeError, match=exact("Profiler didn't finish running")):
            prof.key_averages()
    assert prof.key_averages() == prof.key_averages()


def test_disabled_profile_records_nothing():
    x = leaf([1.0])
    with profile(enabled=False) as prof:
        assert not _profiler_enabled() and ops.INSTRUMENT is None
        (x * 2).sum().backward()
    with pytest.raises(RuntimeError, match=exact("Profiler didn't finish running")):
        prof.key_averages()


def test_nested_profile_is_an_error():
    with profile():
        with pytest.raises(RuntimeError, match="Profiler is already enabled"):
            with profile():
                pass


def test_record_function_context_and_decorator():  # test_record_function
    x = leaf([1.0, 2.0])

    @record_function("my_decorated")
    def twice(t):
        return t * 2

    with profile() as prof:
        with record_function("outer"):
            y = x + 1
            with record_function("inner"):
                z = twice(y)
        z.sum().backward()
    events = {e.name: e for e in prof.function_events}
    assert events["aten::add"].cpu_parent is events["outer"]
    assert events["inner"].cpu_parent is events["outer"]
    assert events["my_decorated"].cpu_parent is events["inner"]
    assert events["aten::mul"].cpu_parent is events["my_decorated"]
    assert _counts(prof)["my_decorated"] == 1
    assert twice(x).grad_fn.name() == "MulBackward0"  # without a profiler: nothing happens


def test_record_shapes():
    a, b = leaf(np.ones((2, 3))), leaf(np.ones(3))
    with profile(record_shapes=True) as prof:
        (a * b).sum()
        (a * a).sum()
    muls = [e for e in prof.function_events if e.name == "aten::mul"]
    assert [e.input_shapes for e in muls] == [[[2, 3], [3]], [[2, 3], [2, 3]]]
    grouped = prof.key_averages(group_by_input_shape=True)
    assert sorted(str(e.input_shapes) for e in grouped if e.key == "aten::mul") == [
        "[[2, 3], [2, 3]]", "[[2, 3], [3]]"]
    assert "Input Shapes" in grouped.table()


def test_with_stack():
    x = leaf([1.0])
    with profile(with_stack=True) as prof:
        y = x * 2  # noqa: F841
    mul = next(e for e in prof.function_events if e.name == "aten::mul")
    assert "test_spec_14_profiler.py" in mul.stack[0] and "test_with_stack" in mul.stack[0]
    assert "Source Location" in prof.table()


def test_custom_function_events():
    class Cube(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return 3 * x ** 2 * g

    x = leaf([2.0])
    with profile() as prof:
        Cube.apply(x).sum().backward()
    names = _names(prof)
    assert names[:2] == ["Cube", "aten::pow"]  # the apply, and the op its forward ran
    assert EVAL + "CubeBackward" in names and "CubeBackward" in names
    check(x.grad, [12.0])


def test_create_graph_backward_ops_nest_in_their_node():
    x = leaf([1.0, 2.0])
    with profile() as prof:
        g, = sg.autograd.grad((x ** 3).sum(), x, create_graph=True)
    pow_node = next(e for e in prof.function_events if e.name == "PowBackward0")
    assert pow_node.cpu_children and all(c.name.startswith("aten::") for c in pow_node.cpu_children)
    check(g, [3.0, 12.0])


def test_export_chrome_trace(tmp_path):
    x = leaf([1.0, 2.0])
    with profile(record_shapes=True) as prof:
        with record_function("label"):
            (x * 2).sum().backward()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert [e["name"] for e in spans] == _names(prof)
    for e in spans:
        assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float))
        assert e["ts"] >= 0 and e["dur"] >= 0
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
    by_name = {e["name"]: e for e in spans}
    assert by_name["aten::mul"]["args"]["Input Dims"] == [[2], []]
    label = by_name["label"]
    for name in ("aten::mul", "aten::sum", EVAL + "MulBackward0"):  # nested in time
        assert label["ts"] <= by_name[name]["ts"]
        assert by_name[name]["ts"] + by_name[name]["dur"] <= label["ts"] + label["dur"] + 1e-3


@pytest.mark.parametrize("tool", [emit_nvtx, emit_itt])
def test_emit_tools_say_they_do_nothing(tool):
    with pytest.warns(UserWarning, match=f"{tool.__name__} does nothing in srcgrad"):
        with tool():
            (leaf([1.0]) * 2).sum().backward()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with tool(enabled=False):
            pass


@sg.compile
def _compiled_square_sum(x):
    return np.sum(x * x)


def test_compiled_call_is_one_event_and_one_node():
    x = leaf([1.0, 2.0])
    with profile() as prof:
        _compiled_square_sum(x).backward()
    assert _names(prof) == [
        "srcgrad::compiled: _compiled_square_sum",
        EVAL + "CompiledFunctionBackward", "CompiledFunctionBackward", EVAL + ACC, ACC]
    check(x.grad, [2.0, 4.0])
    assert type(_compiled_square_sum).__call__.__name__ == "__call__"  # unwrapped after
    assert not hasattr(type(_compiled_square_sum).__call__, "_srcgrad_instrumented")


def test_options_it_does_not_measure_say_so():
    with pytest.warns(UserWarning, match="measures host \\(CPU\\) time only"):
        with profile(use_cuda=True) as prof:
            (leaf([1.0]) * 2).sum()
    assert _names(prof) == ["aten::mul", "aten::sum"]  # the ops are still recorded
    for option in ("with_flops", "profile_memory"):
        with pytest.warns(UserWarning, match=f"ignores {option}=True"):
            profile(**{option: True})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        profile(record_shapes=True, with_stack=True)
