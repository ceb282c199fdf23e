"""The profiler's events with torch's constructors and aggregation (torch.autograd.
profiler_util): `FunctionEvent`, `FunctionEventAvg`, `Interval`, and the tree building
of `EventList._populate_cpu_children` (srcgrad.autograd.profiler's EventList uses it).

Times are kept in nanoseconds (what the recorder reads, `time.perf_counter_ns`) and
shown in microseconds, as torch's. An event's self time is its time less that of its
direct children (torch's `self_cpu_time_total`). Only CPU events exist here: the device
times are 0.
"""

from __future__ import annotations

import itertools
from operator import attrgetter

__all__ = ["FunctionEvent", "FunctionEventAvg", "Interval", "populate_cpu_children",
           "format_time"]


def format_time(time_us: float) -> str:
    if time_us >= 1e6:
        return f"{time_us / 1e6:.3f}s"
    if time_us >= 1e3:
        return f"{time_us / 1e3:.3f}ms"
    return f"{time_us:.3f}us"


class Interval:
    __slots__ = ("start", "end")

    def __init__(self, start, end):
        self.start, self.end = start, end

    def elapsed_us(self):
        return self.end - self.start


class FunctionEvent:
    """One recorded range: an op, a backward node, or a `record_function` label (torch's
    constructor: `FunctionEvent(id, name, thread, start_us, end_us, ...)`)."""

    __slots__ = ("id", "name", "thread", "start_ns", "end_ns", "cpu_parent", "cpu_children",
                 "input_shapes", "stack", "category", "node_id", "sequence_nr", "is_async",
                 "is_remote", "scope")
    count = 1
    device_time_total = self_device_time_total = device_time = 0
    cpu_memory_usage = device_memory_usage = 0

    def __init__(self, id, name, thread, start_us, end_us, fwd_thread=None,  # noqa: A002
                 input_shapes=None, stack=None, scope=0, use_device=None, cpu_memory_usage=0,
                 device_memory_usage=0, is_async=False, is_remote=False, sequence_nr=-1,
                 node_id=-1, device_type=None, device_index=0, device_resource_id=None,
                 is_legacy=False, flops=None, trace_name=None, concrete_inputs=None,
                 kwinputs=None, is_user_annotation=False, *, category="cpu_op"):
        self.id = id
        self.name = name
        self.thread = thread
        self.start_ns = start_us * 1000
        self.end_ns = end_us * 1000
        self.cpu_parent = None
        self.cpu_children = []
        self.input_shapes = input_shapes
        self.stack = stack
        self.category = category
        self.node_id, self.sequence_nr, self.scope = node_id, sequence_nr, scope
        self.is_async, self.is_remote = is_async, is_remote

    def append_cpu_child(self, child) -> None:
        self.cpu_children.append(child)

    def set_cpu_parent(self, parent) -> None:
        self.cpu_parent = parent

    @property
    def key(self) -> str:
        return self.name

    @property
    def time_range(self) -> Interval:
        return Interval(self.start_ns / 1e3, self.end_ns / 1e3)

    @property
    def cpu_time_total(self) -> float:
        return (self.end_ns - self.start_ns) / 1e3

    @property
    def self_cpu_time_total(self) -> float:
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children)

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total

    cpu_time_total_str = property(lambda self: format_time(self.cpu_time_total))
    self_cpu_time_total_str = property(lambda self: format_time(self.self_cpu_time_total))
    cpu_time_str = property(lambda self: format_time(self.cpu_time))

    def __repr__(self) -> str:
        return (f"<FunctionEvent id={self.id} name={self.name} thread={self.thread} "
                f"cpu_time={self.cpu_time_total_str} self_cpu_time={self.self_cpu_time_total_str} "
                f"input_shapes={self.input_shapes}>")


class FunctionEventAvg:
    """Events with the same key, summed (what `key_averages()` lists); torch's: the first
    event added gives the key, later ones must have it."""

    is_async = is_remote = False

    def __init__(self):
        self.key = None
        self.count = 0
        self.node_id = 0
        self.cpu_time_total = self.self_cpu_time_total = 0
        self.device_time_total = self.self_device_time_total = 0
        self.cpu_memory_usage = self.device_memory_usage = 0
        self.input_shapes = None
        self.stack = None
        self.cpu_parent = None
        self.cpu_children = None

    def add(self, other) -> FunctionEventAvg:
        if self.key is None:
            self.key = other.key
            self.node_id, self.is_async = other.node_id, other.is_async
            self.cpu_parent, self.cpu_children = other.cpu_parent, other.cpu_children
            self.input_shapes, self.stack = other.input_shapes, other.stack
        if not isinstance(other, (FunctionEvent, FunctionEventAvg)):
            raise AssertionError("Expected other to be a FunctionEvent or FunctionEventAvg")
        if other.key != self.key:
            raise AssertionError(f"Expected keys to match, but got {other.key} vs {self.key}")
        self.cpu_time_total += other.cpu_time_total
        self.self_cpu_time_total += other.self_cpu_time_total
        self.count += other.count
        return self

    __iadd__ = add

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total / self.count if self.count else 0.0

    @property
    def self_cpu_time(self) -> float:
        return self.self_cpu_time_total / self.count if self.count else 0.0

    device_time = 0.0
    cpu_time_total_str = property(lambda self: format_time(self.cpu_time_total))
    self_cpu_time_total_str = property(lambda self: format_time(self.self_cpu_time_total))
    cpu_time_str = property(lambda self: format_time(self.cpu_time))

    def __repr__(self) -> str:
        return (f"<FunctionEventAvg key={self.key} self_cpu_time={self.self_cpu_time_total_str} "
                f"cpu_time={self.cpu_time_str} input_shapes={self.input_shapes}>")


def populate_cpu_children(events) -> None:
    """torch's EventList._populate_cpu_children: per (thread, node_id), an event is the
    child of the innermost earlier event whose range contains it."""
    sync = sorted((e for e in events if not e.is_async), key=attrgetter("thread"))
    for _, group in itertools.groupby(sync, key=lambda e: (e.thread, e.node_id)):
        current = []
        for event in sorted(group, key=lambda e: (e.start_ns, -e.end_ns)):
            while current:
                parent = current[-1]
                if event.start_ns >= parent.end_ns or event.end_ns > parent.end_ns:
                    current.pop()  # cannot be its parent
                else:
                    parent.append_cpu_child(event)
                    if event.cpu_parent is not None:
                        raise AssertionError(f"There is already a CPU parent event for "
                                             f"{event.key}")
                    event.set_cpu_parent(parent)
                    break
            current.append(event)
