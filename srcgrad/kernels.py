"""One-op kernels: the generated forward, backward and JVP of a single table row.

Note [One-op kernels]
~~~~~~~~~~~~~~~~~~~~~
The eager runtime (srcgrad.autograd) records one graph node per Tensor op. The node's
backward is not a second list of formulas: it is the generated code of the row's VJP
formulas, written by the same passes and codegen as a whole compiled function, for a
graph holding that one op. A kernel is generated once per (row, static arguments,
active operands) and cached in memory and on disk, like every generated module:

    k = op_kernel("multiply", {}, (True, False))
    ans, saved = k.forward(x, y)        # def multiply_fwd(x, y): ...; return ans, (y,)
    (gx, gy) = k.backward(saved, g)     # gy is None: y is not active

`forward` returns what the backward reads and nothing else (the saved-value pass
derives it from the formulas' free variables; a shape where only the shape is read),
and `saved_from` says where each saved value comes from, so the runtime can show it
as `_saved_<name>` and hand Tensors instead of arrays to a backward that must itself
be differentiable (create_graph=True).

Python numbers should be passed as dynamic operands (inactive), not as static
arguments: a static value is part of the kernel's key, so each distinct number would
compile a kernel of its own.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from srcgrad import backend, kernel_numpy, pipeline, rules
from srcgrad.codegen import emit, names
from srcgrad.codegen.cache import default_cache
from srcgrad.codegen.loader import load_module, pseudo_filename
from srcgrad.ir.core import Const, EqFields, FrozenFields, Graph, Var
from srcgrad.ir.expand import Expander, Namer
from srcgrad.passes import saved as saved_pass
from srcgrad.passes.dce import dce
from srcgrad.passes.jvp import forward as forward_mode
from srcgrad.passes.jvp import tangent_name
from srcgrad.passes.vjp import reverse


def sequence_count(param: str) -> str:
    """The static key saying how many arrays a sequence parameter (`arrays` of
    concatenate, a `*others` varargs) takes: `{"#arrays": 3}`."""
    return "#" + param


class OpKernel(FrozenFields):
    """One row's generated kernels (a `@dataclass(frozen=True)` written out:
    srcgrad.ir.core.Loc says why)."""

    __match_args__ = ("rule", "forward", "backward", "jvp", "saved_from", "saved_names", "source")

    def __init__(self, rule: str, forward: Callable, backward: Callable, jvp: Callable,
                 saved_from: tuple, saved_names: tuple, source: str):
        set_ = object.__setattr__
        set_(self, "rule", rule)
        set_(self, "forward", forward)  # forward(*dynamic) -> (ans, saved)
        # backward(saved, *cotangents) -> one gradient per dynamic operand or None
        set_(self, "backward", backward)
        # jvp(*dynamic, *tangents of the active operands) -> (ans, tangent of ans)
        set_(self, "jvp", jvp)
        # per saved value: ("input", i) | ("output", k) | ("shape", i) | ("computed", None)
        set_(self, "saved_from", saved_from)
        set_(self, "saved_names", saved_names)  # a readable name per saved value
        set_(self, "source", source)  # the generated module


_KERNELS: dict = {}  # (rule, repr(static), active) -> OpKernel


def op_kernel(rule_name: str, static: dict, active: tuple) -> OpKernel:
    """The kernel of row `rule_name` with these static arguments and active operands."""
    key = (rule_name, repr(sorted(static.items(), key=lambda kv: kv[0])), tuple(active))
    kernel = _KERNELS.get(key)
    if kernel is None:
        kernel = _KERNELS[key] = _build(rule_name, dict(static), tuple(bool(a) for a in active), key)
    return kernel


def _build(rule_name, static, active, key) -> OpKernel:
    rule = rules.RULES[rule_name]
    graph, namer = op_graph(rule, static)
    if len(active) != len(graph.inputs):
        raise ValueError(f"op_kernel({rule_name!r}): {len(graph.inputs)} dynamic operands "
                         f"({', '.join(v.name for v in graph.inputs)}), but {len(active)} "
                         "active flags")
    program = _program(rule, graph, namer, active)
    cache_key = _cache_key(key)
    cache = default_cache()
    source = cache.get(cache_key)
    if source is None:
        source = emit.render_module(program.sources, version=pipeline.VERSION,
                                    origin=f"rule {rule_name}", key=cache_key,
                                    helpers=emit.helpers_used(program.sources), constants=())
        path = cache.put(cache_key, source) if not program.constants else ""
    else:
        path = str(cache.path_for(cache_key))
    # xp: NumPy with direct paths for plain ndarrays (Note [The kernels' NumPy])
    ns = load_module(source, path or pseudo_filename(cache_key),
                     {**backend.module_globals(), "xp": kernel_numpy, **program.constants})
    fwd, bwd, jvp = (ns[n] for n in program.entries)
    return OpKernel(rule_name, fwd, bwd, jvp, program.saved_from, program.saved_names, source)


def op_graph(rule, static: dict) -> tuple:
    """(Graph of the one op, Namer): a dynamic input per parameter not in `static`
    (as many as `static[sequence_count(p)]` says for a sequence parameter `p`)."""
    namer = Namer(names.RESERVED)
    expander = Expander(namer)
    inputs, kwargs, args = [], {}, []
    params = list(rule.py_signature.parameters.values())
    # parameters before a `*varargs` are passed positionally, the rest by name
    n_positional = next((i for i, p in enumerate(params) if p.kind is p.VAR_POSITIONAL), 0)
    for index, param in enumerate(params):
        name = param.name
        if name in static:
            value = static[name]
        elif sequence_count(name) in static:
            value = [Var(namer.fresh(f"{name}{i}")) for i in range(static[sequence_count(name)])]
            inputs += value
        else:
            value = Var(namer.fresh(name))
            inputs.append(value)
        if param.kind is param.VAR_POSITIONAL:
            args += list(value)
        elif index < n_positional:
            args.append(value)
        else:
            kwargs[name] = value
    out = expander.apply(rule, args, kwargs)
    outs = list(out) if isinstance(out, tuple) else [out]
    tree = ("tuple", tuple(("leaf",) for _ in outs)) if isinstance(out, tuple) else ("leaf",)
    graph = Graph(name=rule.name, inputs=inputs, ops=expander.ops, outputs=outs, out_tree=tree,
                  param_names=tuple(v.name for v in inputs))
    return graph, namer


class _Program(EqFields):
    """A row's kernel sources and what loading them needs (a `@dataclass` written out)."""

    __slots__ = __match_args__ = ("sources", "entries", "constants", "saved_from", "saved_names")

    def __init__(self, sources: list, entries: tuple, constants: dict, saved_from: tuple,
                 saved_names: tuple):
        self.sources = sources
        self.entries = entries
        self.constants = constants
        self.saved_from = saved_from
        self.saved_names = saved_names


def _program(rule, graph, namer, active) -> _Program:
    wrt = [v for v, a in zip(graph.inputs, active) if a]
    cts = [Var(namer.fresh(names.cotangent_name(o.name))) for o in graph.outputs]
    seeds = [(o, ct) for o, ct in zip(graph.outputs, cts) if isinstance(o, Var)]
    backward, grads = reverse(graph.ops, wrt, seeds, namer)
    grad_list = [grads.get(v) if a else Const(None) for v, a in zip(graph.inputs, active)]
    grad_list = [Const(None) if g is None else g for g in grad_list]
    ops = graph.ops + backward
    results = list(graph.outputs) + grad_list
    ops, results = pipeline.optimize(ops, results)
    outputs, grad_list = results[:len(graph.outputs)], results[len(graph.outputs):]
    names.tidy_temporaries(ops, [v.name for v in graph.inputs + cts])
    forward, backward, saved = saved_pass.split(ops, graph.inputs, cts, outputs)
    defined_forward = set(graph.inputs) | {o for op in forward for o in op.outs}
    for g in grad_list:  # a gradient that *is* a forward value is read by the backward
        if isinstance(g, Var) and g in defined_forward and g not in saved:
            saved.append(g)
    pool = emit.ConstPool()
    base = rule.name
    params = [v.name for v in graph.inputs]
    out_src = _tuple([emit.operand_source(o, pool) for o in outputs], single=len(outputs) == 1)
    saved_src = _tuple([v.name for v in saved])
    fwd = emit.render_function(f"{base}_fwd", params, emit.block_lines(forward, pool),
                               f"{out_src}, {saved_src}")
    unpack = [f"{', '.join(v.name for v in saved)}, = _saved", ""] if saved else []
    bwd = emit.render_function(f"{base}_bwd", ["_saved"] + [c.name for c in cts],
                               unpack + emit.block_lines(backward, pool, backward=True),
                               _tuple([emit.operand_source(g, pool) for g in grad_list]))
    jvp = _jvp_function(rule, graph, namer, active, pool)
    return _Program([fwd, bwd, jvp], (f"{base}_fwd", f"{base}_bwd", f"{base}_jvp"),
                    dict(pool.values), *_saved_origins(saved, graph, forward))


def _jvp_function(rule, graph, namer, active, pool) -> str:
    tangent_params = [Var(namer.fresh(tangent_name(v.name))) for v, a in zip(graph.inputs, active) if a]
    seeds = dict(zip([v for v, a in zip(graph.inputs, active) if a], tangent_params))
    ops, tangents = forward_mode(graph.ops, seeds, namer)
    outs = graph.outputs
    touts = [tangents.get(o) if isinstance(o, Var) else None for o in outs]
    touts = [Const(None) if t is None else t for t in touts]
    ops, results = pipeline.optimize(ops, list(outs) + touts)
    ops = dce(ops, results)
    names.tidy_temporaries(ops, [v.name for v in graph.inputs + tangent_params])
    outs, touts = results[:len(outs)], results[len(outs):]
    single = len(outs) == 1
    out_src = _tuple([emit.operand_source(o, pool) for o in outs], single)
    tan_src = _tuple([emit.operand_source(t, pool) for t in touts], single)
    return emit.render_function(f"{rule.name}_jvp", [v.name for v in graph.inputs]
                                + [t.name for t in tangent_params],
                                emit.block_lines(ops, pool), f"{out_src}, {tan_src}")


def _saved_origins(saved, graph, forward) -> tuple:
    """(saved_from, saved_names): where each saved value comes from (Note [One-op kernels])."""
    producers = {o: op for op in forward for o in op.outs}
    output_index = {o: k for k, o in enumerate(graph.outputs) if isinstance(o, Var)}
    origins, labels = [], []
    for v in saved:
        producer = producers.get(v)
        if v in graph.inputs:
            origin, label = ("input", graph.inputs.index(v)), v.name
        elif v in output_index:
            origin, label = ("output", output_index[v]), "result"
        elif (producer is not None and producer.prim == "shape" and isinstance(producer.args[0], Var)
              and producer.args[0] in graph.inputs):
            i = graph.inputs.index(producer.args[0])
            origin, label = ("shape", i), f"{graph.inputs[i].name}_sym_sizes"
        else:
            origin, label = ("computed", None), v.name.lstrip("_")
        origins.append(origin)
        labels.append(label)
    return tuple(origins), tuple(labels)


def _tuple(items: list, single: bool = False) -> str:
    if single:
        return items[0]
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


def _cache_key(key: tuple) -> str:
    h = hashlib.sha256()
    for part in (repr(key), pipeline.VERSION, pipeline.compiler_fingerprint()):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()
