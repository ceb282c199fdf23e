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
