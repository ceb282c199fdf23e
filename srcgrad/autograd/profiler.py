"""`sg.autograd.profiler`: torch.autograd.profiler's `profile`, `record_function`,
`emit_nvtx`, `emit_itt` (torch_semantics.md §14).

Inside `with profile() as prof:` every forward op is an event named as torch names it
(`aten::mul`, `aten::sum`, ...), and every node a backward pass runs is two nested
events: `autograd::engine::evaluate_function: MulBackward0` (the node with its hooks)
around `MulBackward0` (its formula); AccumulateGrad nodes are
`torch::autograd::AccumulateGrad`. `record_function("label")` adds user ranges. Times
are wall-clock microseconds from `time.perf_counter_ns`; an event's self time is its
time less that of the events nested directly in it (on the same thread). How the
runtime reports ops and nodes only while a profiler is active: Note [Instrumentation]
in srcgrad.autograd.instrument.

Only CPU (host) time is measured: with `use_cuda=True` CuPy kernels are timed as the
host sees them (launches are asynchronous), which `profile` says in a warning. One
profiler is active at a time in the process (torch: per thread).
"""

from __future__ import annotations

import functools
import json
import os
import threading
import time
import warnings

from srcgrad.autograd import instrument
from srcgrad.autograd.profiler_events import (
    FunctionEvent,
    FunctionEventAvg,
    Interval,
    format_time,
    populate_cpu_children,
)

__all__ = ["profile", "record_function", "emit_nvtx", "emit_itt", "EventList", "FunctionEvent",
           "FunctionEventAvg", "Interval", "_profiler_enabled", "kineto_available"]

_STATE = instrument.STATE
_local = threading.local()  # per thread: the events now open (for nesting and self time)
_perf_ns = time.perf_counter_ns


def kineto_available() -> bool:
    """torch's: whether the Kineto profiler backend is built in; srcgrad's profiler is its own
    Python recorder, so False (torch 2.14 with Kineto says True)."""
    return False


def _profiler_enabled() -> bool:
    """Whether a profiler is recording (torch.autograd._profiler_enabled)."""
    return _STATE.profiler is not None


_format_time = format_time


def _format_time_share(time_us: float, total_us: float) -> str:
    if total_us == 0:
        return "NaN"
    return f"{time_us * 100.0 / total_us:.2f}%"


def _shapes(operands) -> list:
    return [list(a.shape) if hasattr(a, "shape") and hasattr(a, "dtype") else []
            for a in operands]


def _stack_strings() -> list:
    """`file(line): function` of the user's frames, innermost first (torch's evt.stack)."""
    return [f"{f.filename}({f.lineno}): {f.name}" for f in reversed(instrument.user_frames())]


class EventList(list):
    """A list of events (FunctionEvent or FunctionEventAvg) with torch's summaries; a list
    made by hand has its tree (cpu_parent/cpu_children) built by _populate_cpu_children."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args)
        self._tree_built = False

    def _populate_cpu_children(self) -> None:
        populate_cpu_children(self)

    def _build_tree(self) -> None:
        self._populate_cpu_children()
        self._tree_built = True

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0) -> EventList:
        if not self._tree_built:
            raise AssertionError("Expected tree to be built before calling key_averages")
        groups = {}
        for evt in self:
            key = (evt.key,)
            if group_by_input_shape:
                key += (str(evt.input_shapes),)
            if group_by_stack_n > 0:
                key += tuple(evt.stack[:group_by_stack_n])
            avg = groups.get(key)
            if avg is None:
                avg = groups[key] = FunctionEventAvg()
            avg.add(evt)
        for avg in groups.values():  # grouped by shape / stack: the group's; else none
            avg.input_shapes = avg.input_shapes if group_by_input_shape else None
            avg.stack = list(avg.stack or [])[:group_by_stack_n] if group_by_stack_n > 0 else []
        out = EventList(groups.values())
        out._tree_built = True
        return out

    def total_average(self) -> FunctionEventAvg:
        total = FunctionEventAvg()
        for evt in self:
            total.key = None
            total.add(evt)
        total.key = "Total"
        return total

    @property
    def self_cpu_time_total(self) -> float:
        return sum(evt.self_cpu_time_total for evt in self)

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75,
              max_name_column_width=55, max_shapes_column_width=80, header=None,
              top_level_events_only=False) -> str:
        return _build_table(self, sort_by, row_limit, max_src_column_width,
                            max_name_column_width, max_shapes_column_width, header,
                            top_level_events_only)

    def export_chrome_trace(self, path) -> None:
        """Write the events as Chrome trace JSON (chrome://tracing, Perfetto): one complete
        ("X") event per range, `ts`/`dur` in microseconds."""
        pid = os.getpid()
        events = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                   "args": {"name": "srcgrad CPU"}}]
        base = min((evt.start_ns for evt in self if isinstance(evt, FunctionEvent)), default=0)
        for evt in self:
            if not isinstance(evt, FunctionEvent):
                continue
            args = {}
            if evt.input_shapes is not None:
                args["Input Dims"] = evt.input_shapes
            if evt.stack:
                args["Call stack"] = ";".join(evt.stack)
            events.append({"name": evt.name, "cat": evt.category, "ph": "X",
                           "ts": (evt.start_ns - base) / 1e3,
                           "dur": (evt.end_ns - evt.start_ns) / 1e3,
                           "pid": pid, "tid": evt.thread, "args": args})
        with open(path, "w") as f:
            json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, f)

    def __str__(self) -> str:
        return self.table()


def _build_table(events, sort_by, row_limit, max_src_column_width, max_name_column_width,
                 max_shapes_column_width, header, top_level_events_only) -> str:
    """torch's fixed-width table (torch.autograd.profiler_util._build_table, CPU columns)."""
    if not events:
        return ""
    if sort_by is not None:
        events = sorted(events, key=lambda evt: getattr(evt, sort_by), reverse=True)
    if top_level_events_only:
        events = [evt for evt in events if getattr(evt, "cpu_parent", None) is None]
    has_shapes = any(evt.input_shapes is not None for evt in events)
    has_stack = any(evt.stack for evt in events)
    if row_limit is not None and row_limit > 0:
        events = events[:row_limit]
    name_width = max(len(evt.key) for evt in events) + 4
    if max_name_column_width is not None:
        name_width = min(name_width, max_name_column_width)
    headers = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg",
               "# of Calls"]
    widths = [name_width] + [12] * (len(headers) - 1)
    aligns = [">"] * len(headers)
    if has_shapes:
        headers.append("Input Shapes")
        widths.append(min(max(len(str(evt.input_shapes)) for evt in events) + 4,
                          max_shapes_column_width or 1 << 30))
        aligns.append(">")
    if has_stack:
        headers.append("Source Location")
        widths.append(min(max((len(s) for evt in events for s in evt.stack), default=0) + 4,
                          max_src_column_width or 1 << 30))
        aligns.append("<")
    row_format = "".join("{: " + a + str(w) + "}  " for a, w in zip(aligns, widths))
    sep = "".join("-" * w + "  " for w in widths)
    total = sum(evt.self_cpu_time_total for evt in events)
    lines = []
    if header is not None:
        lines += ["=" * (sum(widths) + 2 * (len(widths) - 1)), header]
    lines += [sep, row_format.format(*headers), sep]
    for evt in events:
        name = evt.key
        if max_name_column_width is not None and len(name) >= max_name_column_width - 3:
            name = name[:max_name_column_width - 3] + "..."
        row = [name, _format_time_share(evt.self_cpu_time_total, total),
               evt.self_cpu_time_total_str, _format_time_share(evt.cpu_time_total, total),
               evt.cpu_time_total_str, evt.cpu_time_str, evt.count]
        if has_shapes:
            row.append(str(evt.input_shapes)[:widths[len(row)]])
        if has_stack:
            row.append(evt.stack[0][:widths[-1]] if evt.stack else "")
        lines.append(row_format.format(*row))
        if has_stack:
            for entry in evt.stack[1:]:
                lines.append(row_format.format(*([""] * (len(row) - 1)), entry[:widths[-1]]))
    lines += [sep, f"Self CPU time total: {_format_time(total)}"]
    return "\n".join(lines) + "\n"


def _open_events() -> list:
    stack = getattr(_local, "open", None)
    if stack is None:
        stack = _local.open = []
    return stack


class profile:  # noqa: N801 (torch's name)
    """Record the ops and backward nodes run inside the block (torch.autograd.profiler.profile)."""

    def __init__(self, enabled=True, *, use_cuda=False, use_device=None, record_shapes=False,
                 with_flops=False, profile_memory=False, with_stack=False, with_modules=False,
                 use_kineto=False, use_cpu=True, use_mtia=False, experimental_config=None,
                 acc_events=False, custom_trace_id_callback=None):
        self.enabled = enabled
        self.record_shapes = record_shapes
        self.with_stack = with_stack
        self.function_events = None
        self._events = []
        self._next_id = 0
        if not enabled:
            return
        if use_cuda or (use_device not in (None, "cpu")):
            warnings.warn("srcgrad's profiler measures host (CPU) time only: CUDA kernels are not "
                          "timed on the device, and their launches are asynchronous.",
                          UserWarning, stacklevel=2)
        for flag, label in ((with_flops, "with_flops"), (profile_memory, "profile_memory"),
                            (with_modules, "with_modules")):
            if flag:
                warnings.warn(f"srcgrad's profiler ignores {label}=True: it records names, "
                              "times, input shapes and stacks only.", UserWarning, stacklevel=2)

    def __enter__(self):
        if not self.enabled:
            return self
        if _STATE.profiler is not None:
            raise RuntimeError("Profiler is already enabled on this thread")
        self._events = []
        self.function_events = None
        _STATE.profiler = self
        instrument.refresh()
        return self

    def __exit__(self, *exc) -> bool:
        if not self.enabled:
            return False
        _STATE.profiler = None
        instrument.refresh()
        now = _perf_ns()
        for evt in _open_events():  # ranges left open by an exception
            evt.end_ns = now
        _local.open = []
        self.function_events = EventList(self._events)
        self.function_events._tree_built = True  # parents and children set while recording
        return False

    # -------------------------------------------------------------- recording
    def begin(self, name, operands=None, category="cpu_op") -> FunctionEvent:
        stack = _open_events()
        parent = stack[-1] if stack else None
        self._next_id += 1
        evt = FunctionEvent(self._next_id, name, threading.get_native_id(), 0, 0,
                            input_shapes=_shapes(operands) if self.record_shapes and operands
                            is not None else ([] if self.record_shapes else None),
                            stack=_stack_strings() if self.with_stack else [], category=category)
        evt.cpu_parent = parent
        if parent is not None:
            parent.cpu_children.append(evt)
        self._events.append(evt)
        stack.append(evt)
        evt.start_ns = evt.end_ns = _perf_ns()
        return evt

    def end(self, evt) -> None:
        evt.end_ns = _perf_ns()
        stack = _open_events()
        if stack and stack[-1] is evt:
            stack.pop()

    # -------------------------------------------------------------- results
    def _check_finish(self) -> None:
        if self.function_events is None:
            raise RuntimeError("Profiler didn't finish running")

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0) -> EventList:
        self._check_finish()
        return self.function_events.key_averages(group_by_input_shape, group_by_stack_n)

    def total_average(self) -> FunctionEventAvg:
        self._check_finish()
        return self.function_events.total_average()

    @property
    def self_cpu_time_total(self) -> float:
        self._check_finish()
        return self.function_events.self_cpu_time_total

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75,
              max_name_column_width=55, max_shapes_column_width=80, header=None,
              top_level_events_only=False) -> str:
        self._check_finish()
        return self.function_events.table(sort_by, row_limit, max_src_column_width,
                                          max_name_column_width, max_shapes_column_width,
                                          header, top_level_events_only)

    def export_chrome_trace(self, path) -> None:
        self._check_finish()
        self.function_events.export_chrome_trace(path)

    def events(self) -> EventList:
        self._check_finish()
        return self.function_events

    def __str__(self) -> str:
        return self.table()


class record_function:  # noqa: N801 (torch's name)
    """A user range in the profile: `with record_function("label"):` or as a decorator
    (`@record_function("label")`). Does nothing while no profiler is active."""

    def __init__(self, name: str, args=None):
        self.name = name
        self.args = args
        self._event = None
        self._profiler = None

    def __enter__(self):
        prof = _STATE.profiler
        if prof is not None:
            self._profiler = prof
            self._event = prof.begin(self.name, None, "user_annotation")
        return self

    def __exit__(self, *exc) -> bool:
        if self._event is not None:
            self._profiler.end(self._event)
            self._event = self._profiler = None
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with record_function(self.name, self.args):
                return fn(*args, **kwargs)

        return wrapper


class _NoTool:
    """emit_nvtx / emit_itt: accepted, and they say that they do nothing here."""

    _tool = ""

    def __init__(self, enabled=True, record_shapes=False):
        self.enabled = enabled
        self.record_shapes = record_shapes

    def __enter__(self):
        if self.enabled:
            warnings.warn(f"{type(self).__name__} does nothing in srcgrad: no {self._tool} ranges "
                          "are emitted. Use sg.autograd.profiler.profile() to record ops and "
                          "backward nodes.", UserWarning, stacklevel=2)
        return self

    def __exit__(self, *exc) -> bool:
        return False


class emit_nvtx(_NoTool):  # noqa: N801 (torch's name)
    """torch's NVTX ranges for nvprof / Nsight: not emitted by srcgrad (a warning says so)."""

    _tool = "NVTX"


class emit_itt(_NoTool):  # noqa: N801 (torch's name)
    """torch's ITT ranges for VTune: not emitted by srcgrad (a warning says so)."""

    _tool = "ITT"
