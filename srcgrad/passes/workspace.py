"""Workspace buffers: a batched program's large temporaries written into arrays it is
given, allocated once per Jacobian plan, instead of fresh arrays on every call.

A batched Jacobian pass (Note [Batching] in srcgrad.passes.batch) allocates arrays B
times larger than one seed's, on every chunk of every call. Fresh arrays of hundreds
of kilobytes come from the operating system each time (glibc serves them by mmap, or
trims them off the heap when they are freed), so a call spends as long on page faults
as on arithmetic: measured on the 64x64 MLP Hessian, 3x. This pass gives each large
ufunc result (`xp.multiply(a, b, out=_ws3)`, matmul included) a buffer parameter, and
lets results whose lifetimes do not overlap share one buffer of their shape and dtype.

A buffer is never what the function returns, never an operand a view may be taken of
(every reader of it must make a new array, as in srcgrad.passes.inplace), and never an
operand of the op that writes it. The caller passes the same buffers on every call (one
set per thread) and copies what it keeps before the next call.

Note [A view keeps its array alive]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A value written into a dead operand (`xp.add(a, b, out=b)`, srcgrad.passes.inplace) takes
over that operand's buffer, and views may be taken of it (`_add.reshape(...)`, a slice):
they read the buffer for as long as they live. So a value's lifetime here ends at the last
use of any view of it, transitively, and a view the function returns keeps it to the end;
a buffer whose value ended at its own last use was handed to the next ufunc while a view of
it was still read (a forward Jacobian of a gradient through `np.subtract.at` and a product
of two reshapes was wrong: fuzz seed 2651683).
"""

from __future__ import annotations

import numpy

from srcgrad.ir.core import Var, operand_vars
from srcgrad.passes.inplace import MIN_SIZE, allocates, ufunc_name


def assign_workspace(ops: list, results: list, probe, namer) -> list:
    """Mark ops to write into workspace buffers (attrs "out"/"ufunc"); returns the
    buffers as (parameter Var, shape, dtype), in parameter order."""
    last_use: dict = {}
    for i, op in enumerate(ops):
        for v in op.operand_vars():
            last_use[v] = i
    pinned = {v for r in results for v in operand_vars(r)}
    for v in pinned:
        last_use[v] = len(ops)
    for op in reversed(ops):  # Note [A view keeps its array alive]
        if not allocates(op):
            end = max((last_use.get(o, -1) for o in op.outs), default=-1)
            for v in op.operand_vars():
                last_use[v] = max(last_use.get(v, -1), end)
    for op in ops:  # a value a view may be taken of is never a buffer
        if not allocates(op):
            pinned.update(op.operand_vars())
    free: dict = {}  # (shape, dtype) -> buffers not in use
    busy: dict = {}  # Var holding a buffer -> the buffer
    buffers: list = []
    for i, op in enumerate(ops):
        for v in [v for v in busy if last_use.get(v, -1) < i]:  # dead before this op
            buf = busy.pop(v)
            if buf not in busy.values():
                free.setdefault((probe.shapes[v], probe.dtypes[v]), []).append(buf)
        into = op.attrs.get("out")
        if into is not None:  # written into a dead operand: it keeps that buffer
            if into in busy:
                busy[op.outs[0]] = busy[into]
            continue
        name = ufunc_name(op.prim)
        out = op.outs[0] if len(op.outs) == 1 else None
        if name is None or out is None or out in pinned or out not in probe.dtypes:
            continue
        shape, dtype = probe.shapes.get(out), probe.dtypes[out]
        if shape is None or numpy.prod(shape) < MIN_SIZE:
            continue
        reads = {busy[v] for v in op.operand_vars() if v in busy}
        pool = [b for b in free.get((shape, dtype), []) if b not in reads]
        if pool:
            buf = pool[0]
            free[(shape, dtype)].remove(buf)
        else:
            buf = Var(namer.fresh("_ws"))
            buffers.append((buf, shape, dtype))
        op.attrs["out"], op.attrs["ufunc"] = buf, name
        busy[out] = buf
    return buffers
