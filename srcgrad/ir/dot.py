"""Draw an IR `Graph` as Graphviz DOT (what `srcgrad graph` prints).

One node per input (an ellipse), per op (a box: `outs = prim(args)` over the source
line it came from) and one for the returned values; an edge for every value an op
reads, from the op (or input) that defined it. Ops marked `attrs["backward"]`
(derivative code: the adjoint of reverse mode, the tangents of forward mode) are
filled, so a gradient's graph shows which part is the original function. The body
of an `if` or a loop (Note [Regions] in srcgrad.ir.core) is a cluster beside the
op that runs it: its parameters are nodes inside the cluster, the values it reads
from the enclosing code come in on edges from outside, and its results go to the
op on dashed edges. Edges are all written at the top level, after the nodes: an edge
written inside a cluster would pull both of its ends into that cluster.

The output is deterministic: node ids are numbered in graph order, so the same
graph always prints the same text.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from srcgrad.ir.core import Block, Graph, Op, operand_vars
from srcgrad.ir.printer import op_text, operand_text

_FORWARD_STYLE = 'shape=box, style="rounded"'
_BACKWARD_STYLE = 'shape=box, style="rounded,filled", fillcolor="#dbe9f6"'
_INPUT_STYLE = 'shape=ellipse, style="filled", fillcolor="#f3f3f3"'
_PARAM_STYLE = "shape=ellipse"


def quote(text: str) -> str:
    """A DOT string literal: `"..."` with backslashes, quotes and newlines escaped."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\n", "\\l") + '"'


def source_label(op: Op) -> str:
    """`file.py:12  h = np.tanh(W @ x)`, the line an op came from ("" when unknown)."""
    if op.loc is None:
        return ""
    text = op.loc.text.strip()
    where = f"{op.loc.file.replace(chr(92), '/').rsplit('/', 1)[-1]}:{op.loc.line}"
    return f"{where}  {text}" if text else where


def op_label(op: Op) -> str:
    """The op as the IR printer writes it, then its source line; left-justified."""
    text = op_text(op, with_loc=False)
    lines = [text if op.outs else text.lstrip(" =")]  # an op run for its effect (tape_push)
    where = source_label(op)
    if where:
        lines.append(where)
    return "\n".join(lines) + "\n"


def block_title(op: Op, index: int) -> str:
    """`then`/`else` for the blocks of an `if`, `body` for a loop's."""
    if op.prim == "cond" and len(op.blocks) == 2:
        return ("then", "else")[index]
    return "body" if len(op.blocks) == 1 else f"block {index}"


@dataclass
class _Writer:
    """Accumulates DOT lines; `defined` maps a Var to the node id that produced it."""

    lines: list = field(default_factory=list)
    edges: list = field(default_factory=list)
    defined: dict = field(default_factory=dict)
    count: int = 0

    def node(self, label: str, style: str, indent: str) -> str:
        node_id = f"n{self.count}"
        self.count += 1
        self.lines.append(f"{indent}{node_id} [label={quote(label)}, {style}];")
        return node_id

    def edges_into(self, target: str, operands, style: str = "") -> None:
        """An edge from each Var's definition to `target`, labelled with its name."""
        seen = set()
        for a in operands:
            for v in operand_vars(a):
                source = self.defined.get(v)
                if source is None or (source, v.name) in seen:
                    continue  # a Var defined nowhere in the drawing (a verifier's matter)
                seen.add((source, v.name))
                attrs = [f"label={quote(v.name)}"] + ([style] if style else [])
                self.edges.append(f"  {source} -> {target} [{', '.join(attrs)}];")

    def ops(self, ops: list, indent: str) -> None:
        for op in ops:
            style = _BACKWARD_STYLE if op.attrs.get("backward") else _FORWARD_STYLE
            node_id = self.node(op_label(op), style, indent)
            self.edges_into(node_id, op.args)
            for i, block in enumerate(op.blocks):
                self.block(block, node_id, i, f"{op.prim}: {block_title(op, i)}", indent)
            for out in op.outs:
                self.defined[out] = node_id

    def block(self, block: Block, owner: str, index: int, title: str, indent: str) -> None:
        """A nested body as a cluster; its results flow to `owner` on dashed edges."""
        cluster = f"cluster_{owner}_{index}"
        inner = indent + "  "
        self.lines.append(f"{indent}subgraph {cluster} {{")
        self.lines.append(f'{inner}label={quote(title)}; style="dashed";')
        for p in block.params:
            self.defined[p] = self.node(p.name, _PARAM_STYLE, inner)
        self.ops(block.ops, inner)
        self.lines.append(f"{indent}}}")
        self.edges_into(owner, block.results, 'style="dashed"')


def to_dot(graph: Graph, title: str | None = None) -> str:
    """The DOT text of `graph` (a `digraph` named after it)."""
    w = _Writer()
    name = title or graph.name
    w.lines += [f"digraph {quote(name)} {{",
                f"  graph [label={quote(name)}, labelloc=t, fontname=Helvetica];",
                "  node [fontname=Courier, fontsize=10];",
                "  edge [fontname=Helvetica, fontsize=9];"]
    for v in graph.inputs:
        w.defined[v] = w.node(v.name, _INPUT_STYLE, "  ")
    w.ops(graph.ops, "  ")
    returned = ", ".join(operand_text(o) for o in graph.outputs)
    out_id = w.node(f"return ({returned},)", 'shape=box, style="bold"', "  ")
    w.edges_into(out_id, graph.outputs)
    w.lines += w.edges + ["}"]
    return "\n".join(w.lines) + "\n"

