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
chains] in srcgrad.pipeline.fusion).
"""

from __future__ import annotations

import math


def fused_lines(op, pool, block_lines) -> list:
    """The loop's lines; `block_lines` (emit's) writes the chain's ops on numbers."""
    block = op.blocks[0]
    index, loads = block.params[0], block.params[1:]
    shape = op.attrs["shape"]
    n = math.prod(shape)
    lines = [f"# one loop over the {n} values of the elementwise chain (fused)"]
    sources = {}
    for a, flat in zip(op.args, op.attrs["read_flat"]):
        sources[a] = flat or a.name
        if flat:
            lines.append(f"{flat} = {a.name}.ravel()")
    for out, kind, flat in zip(op.outs, op.attrs["kinds"], op.attrs["flat"]):
        lines.append(f"{out.name} = 0.0" if kind == "sum" else f"{flat or out.name} = xp.empty({n})")
    body = [f"{v.name} = {sources[a]}[{index.name}]" for a, v in zip(op.args, loads)]
    run: list = []
    for inner in block.ops + [None]:  # one comment style per run of forward or gradient ops
        if run and (inner is None or bool(inner.attrs.get("backward")) != bool(run[0].attrs.get("backward"))):
            body += block_lines(run, pool, backward=bool(run[0].attrs.get("backward")))
            run = []
        if inner is not None:
            run.append(inner)
    for out, kind, flat, v in zip(op.outs, op.attrs["kinds"], op.attrs["flat"], block.results):
        target = f"{out.name} +" if kind == "sum" else f"{flat or out.name}[{index.name}]"
        if body[-1].startswith(f"{v.name} = ") and _read_once(v, block):  # the last number: stored
            body[-1] = f"{target}= {body[-1][len(v.name) + 3:]}" if kind == "sum" else \
                f"{target} = {body[-1][len(v.name) + 3:]}"
        else:
            body.append(f"{target}= {v.name}" if kind == "sum" else f"{target} = {v.name}")
    lines.append(f"for {index.name} in range({n}):")
    lines += ["    " + line if line else "" for line in body]
    for out, flat in zip(op.outs, op.attrs["flat"]):
        if flat:
            lines.append(f"{out.name} = {flat}.reshape({shape!r})")
    return lines


def _read_once(v, block) -> bool:
    """Whether `v` is read by no op of the loop and once among its results."""
    return block.results.count(v) == 1 and not any(v in op.operand_vars() for op in block.ops)
