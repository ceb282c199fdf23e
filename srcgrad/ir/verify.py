"""Check IR invariants; run after every pass in tests.

* every Var is defined once (as an input or by one op) and named uniquely;
* every read comes after the definition;
* every op's primitive is a rule, with one operand per signature parameter;
* graph outputs are defined.
"""

from __future__ import annotations

from srcgrad import rules
from srcgrad.ir.core import operand_vars


class VerifyError(AssertionError):
    pass


def verify_ops(ops: list, inputs: list, outputs: list = ()) -> None:
    defined: set = set()
    names: dict = {}

    def define(v, where):
        if v in defined:
            raise VerifyError(f"{v.name} defined twice ({where})")
        other = names.get(v.name)
        if other is not None and other is not v:
            raise VerifyError(f"two values named {v.name} ({where})")
        defined.add(v)
        names[v.name] = v

    for v in inputs:
        define(v, "input")
    for i, op in enumerate(ops):
        rule = rules.RULES.get(op.prim)
        if rule is None:
            raise VerifyError(f"op {i}: unknown primitive {op.prim!r}")
        if len(op.args) != len(rule.params):
            raise VerifyError(f"op {i} ({op.prim}): {len(op.args)} operands for "
                              f"{len(rule.params)} parameters")
        for v in op.operand_vars():
            if v not in defined:
                raise VerifyError(f"op {i} ({op.prim}) reads {v.name} before it is defined")
        for o in op.outs:
            define(o, f"op {i} ({op.prim})")
    for out in outputs:
        for v in operand_vars(out):
            if v not in defined:
                raise VerifyError(f"output {v.name} is never defined")


def verify_graph(graph) -> None:
    verify_ops(graph.ops, graph.inputs, graph.outputs)


