"""A `fused` op (srcgrad.pipeline.fusion) as one explicit loop over flattened arrays.

    # one loop over the 1000000 values of the elementwise chain (fused)
    grad_x = xp.empty(1000000)
    for i in range(1000000):
        x_i = x[i]
        _tanh = xp.tanh(x_i)
        ...
        grad_x[i] = grad_x_i

An n-D chain reads `x.ravel()` and writes into a flat buffer reshaped after the loop; a
sum at the chain's end starts at 0.0 and adds each number (Note [Fused elementwise
chains] in srcgrad.pipeline.fusion). Where an operand broadcasts or a sum is over some
axes, the loops nest, one per axis: `d_i = d[i, 0, i_2]`, `f[i, i_2] += v`. exp, tanh, sin
and cos of a number call the kernels numba vectorizes (Note [Vectorizable math for numba]
in srcgrad.codegen.numba_math); where sin or cos met an argument past their range, the
loop runs again as NumPy's functions' (libm's).
"""

from __future__ import annotations

import math

from srcgrad.codegen import numba_math


def fused_lines(op, pool, block_lines) -> list:
    """The loop's lines, with vectorizable math where the chain has it."""
    lines = _loop_lines(op, pool, block_lines)
    fast, trig = numba_math.vectorized(lines)
    if not trig:
        return fast
    flag = numba_math.BEYOND
    return [f"{flag} = False", *fast,
            f"if {flag}:  # an argument of sin or cos past {numba_math.TRIG_LIMIT:g}: the loop with libm's",
            *("    " + line if line else "" for line in lines)]


def _loop_lines(op, pool, block_lines) -> list:
    """The loop's lines; `block_lines` (emit's) writes the chain's ops on numbers."""
    block, shape, nested = op.blocks[0], op.attrs["shape"], op.attrs.get("nested", False)
    indices = [p.name for p in block.params[:len(shape) if nested else 1]]
    loads = block.params[len(indices):]
    n = math.prod(shape)
    lines = [f"# one loop over the {n} values of the elementwise chain (fused)"]
    sources = {}
    for a, flat in zip(op.args, op.attrs["read_flat"]):
        sources[a] = flat or a.name
        if flat:
            lines.append(f"{flat} = {a.name}.ravel()")
    for out, kind, flat in zip(op.outs, op.attrs["kinds"], op.attrs["flat"]):
        if isinstance(kind, tuple):  # (axes, keepdims): an array of zeros to add into
            axes, keep = kind
            kept = tuple(1 if k in axes else d for k, d in enumerate(shape) if keep or k not in axes)
            lines.append(f"{out.name} = xp.zeros({kept!r})")
        else:
            lines.append(f"{out.name} = 0.0" if kind == "sum" else
                         f"{flat or out.name} = xp.empty({n if len(indices) == 1 else shape!r})")
    reads = op.attrs.get("reads", (shape,) * len(op.args))
    body = [f"{v.name} = {sources[a]}[{_at(indices, s, shape)}]" for a, v, s in zip(op.args, loads, reads)]
    run: list = []
    for inner in block.ops + [None]:  # one comment style per run of forward or gradient ops
        if run and (inner is None or bool(inner.attrs.get("backward")) != bool(run[0].attrs.get("backward"))):
            body += block_lines(run, pool, backward=bool(run[0].attrs.get("backward")))
            run = []
        if inner is not None:
            run.append(inner)
    for out, kind, flat, v in zip(op.outs, op.attrs["kinds"], op.attrs["flat"], block.results):
        if isinstance(kind, tuple):
            at = [("0" if kind[1] else None) if k in kind[0] else i for k, i in enumerate(indices)]
            target = f"{out.name}[{', '.join(i for i in at if i is not None)}] +="
        else:
            target = f"{out.name} +=" if kind == "sum" else f"{flat or out.name}[{', '.join(indices)}] ="
        if body[-1].startswith(f"{v.name} = ") and _read_once(v, block):  # the last number: stored
            body[-1] = f"{target} {body[-1][len(v.name) + 3:]}"
        else:
            body.append(f"{target} {v.name}")
    for depth, (i, d) in enumerate(zip(indices, shape if nested else (n,))):
        lines.append("    " * depth + f"for {i} in range({d}):")
    lines += ["    " * len(indices) + line if line else "" for line in body]
    for out, flat in zip(op.outs, op.attrs["flat"]):
        if flat:
            lines.append(f"{out.name} = {flat}.reshape({shape!r})")
    return lines


def _at(indices, s, shape) -> str:
    """The index of an operand of shape `s` at the loop's point of `shape` (broadcast:
    0 along its axes of length 1, none for the axes it lacks)."""
    if len(indices) == 1 and s == shape:
        return indices[0]
    lead = len(shape) - len(s)
    return ", ".join("0" if d == 1 and shape[lead + k] != 1 else indices[lead + k] for k, d in enumerate(s))


def _read_once(v, block) -> bool:
    """Whether `v` is read by no op of the loop and once among its results."""
    return block.results.count(v) == 1 and not any(v in op.operand_vars() for op in block.ops)
