"""Naming conventions of generated code (deterministic: no counters from globals, no uuids)."""

from __future__ import annotations

import builtins
import keyword

from srcgrad.rules import HELPER_NAMES

# Identifiers generated code may not use for values.
RESERVED = frozenset(keyword.kwlist) | {"xp", "slice", "float", "int"} | set(HELPER_NAMES) | {
    n for n in dir(builtins) if not n.startswith("_")}


def grad_fn_name(fn_name: str) -> str:
    return f"grad_{fn_name}"


def value_and_grad_fn_name(fn_name: str) -> str:
    return f"value_and_grad_{fn_name}"


def forward_fn_name(fn_name: str) -> str:
    return f"{fn_name}_fwd"


def backward_fn_name(fn_name: str) -> str:
    return f"{fn_name}_bwd"


def cotangent_name(value_name: str) -> str:
    return "grad_" + value_name.lstrip("_")


def tidy_temporaries(ops: list, keep_names) -> None:
    """Renumber temporaries (`_shape_3`) in order of definition (`_shape`, `_shape_1`).

    Passes allocate names for values they later delete; renumbering after them
    keeps generated code free of gaps and stable under unrelated pass changes.
    """
    taken = set(keep_names)
    for op in _walk(ops):
        taken.update(o.name for o in op.outs if not o.name.startswith("_"))
    counters: dict = {}
    for op in _walk(ops):
        for o in op.outs:
            if not o.name.startswith("_"):
                continue
            base = numbered_base(o.name)
            n = counters.get(base, 0)
            name = base if n == 0 else f"{base}_{n}"
            while name in taken:
                n += 1
                name = f"{base}_{n}"
            counters[base] = n + 1
            taken.add(name)
            o.name = name


def numbered_base(name: str) -> str:
    """`name` less a trailing `_<digits>`: what `re.sub(r"_\\d+$", "", name)` gives a name
    (compiling that pattern cost a first compile 0.2 ms: issue 15)."""
    head, sep, tail = name.rpartition("_")
    return head if sep and tail.isdecimal() else name


def _walk(ops):
    """Every op, nested blocks' ops after their op; block params as pseudo-ops."""
    for op in ops:
        yield op
        for block in op.blocks:
            yield _Params(block.params)
            yield from _walk(block.ops)


class _Params:
    def __init__(self, params):
        self.outs = params
