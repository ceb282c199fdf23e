"""The profiler's FunctionEvent / FunctionEventAvg / EventList with torch's constructors and
aggregation, and kineto_available; values observed in torch 2.14 (torch's own
test_profiler_aggregation_fake and test_profiler_function_event_avg)."""

from __future__ import annotations

import pytest

import srcgrad as sg
from srcgrad.autograd.profiler import (
    EventList,
    FunctionEvent,
    FunctionEventAvg,
    kineto_available,
)


def test_function_event_constructor_and_attributes():
    # observed in torch 2.14: (3, 'x', 0, 5, 5, 10, 15, 5, 1, 'x', None, None, None, [], False, 0)
    e = FunctionEvent(id=3, name="x", thread=0, start_us=10, end_us=15)
    assert (e.id, e.name, e.thread, e.cpu_time_total, e.self_cpu_time_total, e.time_range.start,
            e.time_range.end, e.time_range.elapsed_us(), e.count, e.key, e.input_shapes, e.stack,
            e.cpu_parent, e.cpu_children, e.is_async, e.device_time_total) == (
        3, "x", 0, 5, 5, 10, 15, 5, 1, "x", None, None, None, [], False, 0)


def test_function_event_avg():
    # observed in torch 2.14: foo 4 30 30 0 7.5
    avg = FunctionEventAvg()
    avg.add(FunctionEvent(id=0, node_id=0, name="foo", thread=0, start_us=10, end_us=15))
    avg.add(FunctionEvent(id=1, node_id=0, name="foo", thread=0, start_us=20, end_us=30))
    avg.add(avg)
    assert (avg.key, avg.count, avg.cpu_time_total, avg.self_cpu_time_total,
            avg.device_time_total, avg.cpu_time) == ("foo", 4, 30, 30, 0, 7.5)
    with pytest.raises(AssertionError, match="^Expected keys to match, but got bar vs foo$"):
        avg.add(FunctionEvent(id=2, name="bar", thread=0, start_us=0, end_us=1))


def test_populate_cpu_children_of_fake_events():
    # torch's test_profiler_aggregation_fake; observed in torch 2.14: [[], [], [5], [], [4]]
    events = EventList()
    ranges = [(1, [(0, 1, 1), (1, 2, 2)]), (0, [(0, 10, 3), (1, 2, 4), (1, 3, 5)])]
    for thread, spans in ranges:
        for start, end, eid in spans:
            events.append(FunctionEvent(id=eid, node_id=0, name="", thread=thread,
                                        start_us=start, end_us=end))
    events._populate_cpu_children()
    assert [[c.id for c in e.cpu_children] for e in events] == [[], [], [5], [], [4]]


def test_key_averages_needs_the_tree_then_self_times():
    ev = EventList([FunctionEvent(id=1, name="a", thread=0, start_us=0, end_us=10, stack=[]),
                    FunctionEvent(id=2, name="b", thread=0, start_us=2, end_us=5, stack=[]),
                    FunctionEvent(id=3, name="a", thread=0, start_us=20, end_us=22, stack=[])])
    with pytest.raises(AssertionError, match="^Expected tree to be built before calling "
                                             "key_averages$"):
        ev.key_averages()
    ev._build_tree()
    # observed in torch 2.14: [('a', 2, 12, 9), ('b', 1, 3, 3)]; parents [None, 1, None];
    # total_average: Total 3 15 12
    assert sorted((k.key, k.count, k.cpu_time_total, k.self_cpu_time_total)
                  for k in ev.key_averages()) == [("a", 2, 12, 9), ("b", 1, 3, 3)]
    assert [e.cpu_parent.id if e.cpu_parent else None for e in ev] == [None, 1, None]
    t = ev.total_average()
    assert (t.key, t.count, t.cpu_time_total, t.self_cpu_time_total) == ("Total", 3, 15, 12)


def test_profile_key_averages_names_counts_and_times():
    # observed in torch 2.14: these names among the keys; aten::sum once (torch counts
    # aten::mul twice: MulBackward0's formula calls it; srcgrad's formula is not an op)
    x = sg.ones(3, requires_grad=True)
    with sg.autograd.profiler.profile() as prof:
        (x * 2).sum().backward()
    ka = prof.key_averages()
    keys = {k.key: k for k in ka}
    for name in ("aten::mul", "aten::sum", "MulBackward0",
                 "autograd::engine::evaluate_function: MulBackward0",
                 "torch::autograd::AccumulateGrad"):
        assert name in keys
    assert keys["aten::sum"].count == 1 and keys["aten::mul"].count == 1
    assert all(k.cpu_time_total >= k.self_cpu_time_total >= 0 for k in ka)
    outer = keys["autograd::engine::evaluate_function: MulBackward0"]
    assert outer.cpu_time_total >= keys["MulBackward0"].cpu_time_total
    assert type(ka) is EventList and type(prof.function_events) is EventList


def test_kineto_available_says_no_kineto():
    # torch 2.14 built with Kineto says True; srcgrad's profiler is not Kineto
    assert kineto_available() is False
