"""The statements of a tape that holds one saved quantity (Note [One tape per saved
quantity] in srcgrad.passes.tapes): a list, or for numba an array indexed by the loop's
index."""

from __future__ import annotations


def tape_statement(op, source) -> str:
    """`op` (a tape op marked "entry") as one statement; `source(operand)` writes an operand."""
    tape = (op.outs[0] if op.prim == "tape_new" else op.args[0]).name
    if op.prim == "tape_new":
        alloc = op.attrs.get("alloc")
        if alloc is None:
            return f"{tape} = []"
        return f"{tape} = xp.empty({source(alloc)})"  # (n floats)
    slot = op.attrs.get("slot")
    if op.prim == "tape_push":
        value = source(op.args[1])
        return f"{tape}[{slot.name}] = {value}" if slot is not None else f"{tape}.append({value})"
    if op.prim == "tape_pop":
        read = f"{tape}[{slot.name}]" if slot is not None else f"{tape}.pop()"
        return f"{op.outs[0].name} = {read}"
    raise AssertionError(op.prim)
