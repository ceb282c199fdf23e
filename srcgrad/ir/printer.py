"""Print IR as text, one op per line, like a jaxpr:

    graph f(x, y):
      _multiply = multiply(x, y)                  # t1.py:3
      z = add(_multiply, _exp)                    # t1.py:3
      return (z,)
"""

from __future__ import annotations

from srcgrad.ir.core import Const, Pack, Var


def operand_text(a) -> str:
    if isinstance(a, Var):
        return a.name
    if isinstance(a, Pack):
        inner = ", ".join(operand_text(i) for i in a.items)
        return {"slice": f"slice({inner})", "list": f"[{inner}]"}.get(a.style, f"({inner})")
    if isinstance(a, Const):
        return repr(a.value) if not hasattr(a.value, "shape") else f"<const {type(a.value).__name__}>"
    return repr(a)


def op_text(op, with_loc: bool = True) -> str:
    outs = ", ".join(o.name for o in op.outs)
    text = f"{outs} = {op.prim}({', '.join(operand_text(a) for a in op.args)})"
    if with_loc and op.loc is not None:
        text = f"{text:<48}# {op.loc.file.rsplit('/', 1)[-1]}:{op.loc.line}"
    return text


def print_ops(ops, indent: str = "  ", with_loc: bool = True) -> str:
    return "\n".join(indent + op_text(op, with_loc) for op in ops)


def print_graph(graph, with_loc: bool = True) -> str:
    head = f"graph {graph.name}({', '.join(v.name for v in graph.inputs)}):"
    body = print_ops(graph.ops, with_loc=with_loc)
    ret = f"  return ({', '.join(operand_text(o) for o in graph.outputs)},)"
    return "\n".join(part for part in (head, body, ret) if part)
