"""Custom Functions (`sg.autograd.Function` subclasses) in compiled code.

Note [Custom Functions]
~~~~~~~~~~~~~~~~~~~~~~~
`y = MyFn.apply(a, b)` in compiled code is traced in the style of JAX's
`custom_vjp`, keeping the IR flat:

* `forward`'s body is traced inline (as any user function), its `ctx` parameter
  bound to a `TraceCtx` that records `save_for_backward`, `save_for_forward`,
  attribute stores (`ctx.z = z`), `mark_non_differentiable` and
  `set_materialize_grads`. The ops it emits are listed in `FunctionCall.body`.
* One op `custom_call` follows: an identity on the forward's outputs (generated
  code just names them: `y = out`) whose operands are `(Pack(forward outputs),
  Pack(inputs))` and whose `attrs["function"]` is the `FunctionCall` record.
  Activity analysis treats it as differentiable in its *inputs* only, so reverse
  mode never differentiates the forward's own ops: the `custom_call` branch of
  srcgrad.passes.vjp traces the user's `backward` instead (`trace_backward`),
  and forward mode the user's `jvp` (`trace_jvp`), skipping the body's ops
  (`body_ops`).
* The generated code is plain code: the forward's ops, then the user's backward
  ops. Differentiating it again (grad of grad) differentiates the user's backward
  *and* the forward's ops that computed what it saved, so a saved intermediate is
  differentiated exactly (where torch treats it as a constant); a gradient
  returned by an `@once_differentiable` backward goes through the identity
  `differentiable_once`, which makes a second derivative reaching it a
  CompileError. Gradients are checked at run time by `check_grad` (shape, torch's
  sum-to rule) unless their shape is provably the input's.
* The user's `jvp` receives each input's tangent; a tensor input without one gets
  zeros as in torch (None under `set_materialize_grads(False)`), a number None. An
  input computed from no differentiated argument is a static value, a tensor or a
  number only at run time, where `zero_tangent` decides. Each tangent it returns is
  checked for its output's shape (`check_tangent`: torch's size error, never a
  tangent broadcast into the caller's).
* With saved-tensor hooks (`sg.vjp` under `saved_tensors_hooks`), each value
  `save_for_backward` saved is packed right after the call (`saved_pack`, in the
  forward) and unpacked at each `ctx.saved_tensors` access (`saved_unpack`, in
  the backward): Note [Saved-tensor hooks] in srcgrad.passes.hooks.
* `ctx.mark_dirty(x)`: the forward wrote input `x` in place (Note [Mutation at
  trace time]) and returns it; after the call, every name that shared `x`'s storage
  reads the `custom_call` output, so the user's backward is its derivative. An input
  written but not marked is a CompileError. Values saved and then written in place
  are Note [Saved values written in place] (srcgrad.frontend.versions).

`ParsedFunction` (srcgrad.frontend.classes) is the parsed class; `FunctionCall`
is what one `apply` site recorded.
"""

from __future__ import annotations

import itertools
import warnings

import gast
import numpy

from srcgrad import rules
from srcgrad.errors import CompileError
from srcgrad.frontend.classes import ParsedFunction, parse_function_class
from srcgrad.frontend.scope import TraceObject
from srcgrad.frontend.versions import checked_saved
from srcgrad.ir.core import FACTORY, Const, Op, Pack, Var
from srcgrad.ir.expand import to_operand
from srcgrad.ir.tree import flatten, unflatten


# ---------------------------------------------------------------------- one call site
class FunctionCall:
    """What one `MyFn.apply(...)` recorded while its forward was traced (a
    `@dataclass(eq=False)` written out: srcgrad.ir.core.Loc says why)."""

    __slots__ = __match_args__ = (
        "parsed", "inputs", "out_tree", "out_leaves", "saved", "saved_records", "saved_forward",
        "attributes", "non_differentiable", "materialize_grads", "loc", "body", "tracer_class")

    def __init__(self, parsed: ParsedFunction, inputs: tuple, out_tree: object, out_leaves: tuple,
                 saved: tuple = (), saved_records: tuple = (), saved_forward: tuple = (),
                 attributes: dict = FACTORY, non_differentiable: frozenset = frozenset(),
                 materialize_grads: bool = True, loc: object = None, body: tuple = (),
                 tracer_class: type = None):
        self.parsed = parsed
        self.inputs = inputs  # tvalues bound to forward's parameters (defaults applied), no ctx
        self.out_tree = out_tree  # how the forward's result nests (srcgrad.ir.tree)
        self.out_leaves = out_leaves  # its leaves, the custom_call outputs in place of forward Vars
        self.saved = saved  # save_for_backward's arguments (Vars, Const(None) or Const arrays)
        self.saved_records = saved_records  # per saved value, its writes (frontend.versions) or None
        self.saved_forward = saved_forward  # save_for_forward's arguments
        self.attributes = {} if attributes is FACTORY else attributes  # ctx.<name> = tvalue
        self.non_differentiable = non_differentiable  # indices into out_leaves
        self.materialize_grads = materialize_grads
        self.loc = loc  # the apply call
        self.body = body  # the ops the forward's body emitted (forward mode skips them)
        self.tracer_class = tracer_class  # the Tracer that recorded the call traces its backward/jvp too

    def __repr__(self) -> str:  # cse compares attrs by repr: one record per call
        return f"<{self.parsed.name}.apply #{id(self):x}>"

    def map_vars(self, fn):
        """This record with each Var it holds replaced by `fn(var)` (a new record; itself
        where nothing changes): srcgrad.ir.core.substitute calls it, since the user's
        backward and jvp read what `save_for_backward` / `save_for_forward` saved and the
        inputs from here, not from the op's operands (fuzz seed 971920: the inputs of a
        loop's gradient inlined in compiled code were renamed in the operands only, and
        the Function's jvp read an undefined name)."""
        fields = {name: _map_tvalue(getattr(self, name), fn)
                  for name in ("inputs", "out_leaves", "saved", "saved_forward", "attributes")}
        if all(fields[name] is getattr(self, name) for name in fields):
            return self
        kept = {name: getattr(self, name) for name in self.__slots__ if name not in fields}
        return FunctionCall(**kept, **fields)

    # The passes reach a custom Function only through these three methods, so they
    # import nothing of the frontend: the call record the tracer left on the op traces
    # the user's backward / jvp into the pass's ops when the pass knows which inputs
    # are active and which outputs have a cotangent.
    def differentiable_inputs(self, op) -> Pack:
        """The operands the `custom_call` is differentiable in: its top-level array inputs."""
        return Pack(tuple(a for a in op.args[1].items if isinstance(a, Var) and a.kind == "array"))

    def backward_ops(self, expander, op, cotangents, active, same_shape, hooks=None) -> list:
        """Trace the user's backward onto `expander.ops`; one cotangent (or None) per input."""
        tracer = self.tracer_class(expander.namer, expander.ops)
        tracer.loc = op.loc
        return trace_backward(tracer, op, cotangents, active, same_shape, hooks)

    def jvp_ops(self, expander, op, tangents) -> dict:
        """Trace the user's jvp onto `expander.ops`; {custom_call output: tangent}."""
        tracer = self.tracer_class(expander.namer, expander.ops)
        tracer.loc = op.loc
        return trace_jvp(tracer, op, tangents)


def _map_tvalue(v, fn):
    """`v` (a Var, a constant, or tuples, lists and dicts of them) with `fn` applied to
    each Var; `v` itself where nothing changes."""
    if isinstance(v, Var):
        return fn(v)
    if isinstance(v, (tuple, list)):
        items = [_map_tvalue(x, fn) for x in v]
        return v if all(a is b for a, b in zip(items, v)) else type(v)(items)
    if isinstance(v, dict):
        items = {k: _map_tvalue(x, fn) for k, x in v.items()}
        return v if all(items[k] is v[k] for k in v) else items
    return v


_METHODS = ("save_for_backward", "save_for_forward", "mark_dirty", "mark_non_differentiable",
            "set_materialize_grads")


class TraceCtx(TraceObject):
    """The `ctx` a Function's method sees while it is traced."""

    def __init__(self, call_name: str, phase: str, call_loc, needs_input_grad=(), saved=(),
                 attributes=None, unpack=None):
        self.call_name, self.phase, self.call_loc = call_name, phase, call_loc
        self.needs_input_grad = tuple(needs_input_grad)
        self.saved, self.saved_forward = tuple(saved), ()
        self.attributes = dict(attributes or {})
        self.unpack = unpack  # tracer -> the saved values as the backward reads them
        self.non_differentiable: tuple = ()
        self.dirty: tuple = ()
        self.saved_records: tuple = ()  # Note [Saved values written in place], per saved value
        self.materialize_grads = True

    def trace_getattr(self, tracer, name, node):
        if name == "saved_tensors":
            if self.phase in ("forward", "setup_context"):
                return ()
            return self.unpack(tracer) if self.unpack is not None else self.saved
        if name == "needs_input_grad":
            return Const(self.needs_input_grad)
        if name in self.attributes:
            return self.attributes[name]
        if name in _METHODS:
            tracer.fail(node, f"`ctx.{name}` used as a value", f"call it: `ctx.{name}(...)`")
        tracer.error(node, f"ctx has no attribute `{name}` (set it in forward: `ctx.{name} = ...`)")

    def trace_setattr(self, tracer, name, value, node):
        if name in _METHODS or name in ("saved_tensors", "needs_input_grad"):
            tracer.error(node, f"cannot assign to `ctx.{name}`")
        self.attributes[name] = value

    def trace_method(self, tracer, name, args, kwargs, node):
        if name not in _METHODS:
            tracer.error(node, f"ctx has no method `{name}`")
        if self.phase not in ("forward", "setup_context"):
            tracer.error(node, f"ctx.{name}() should only be called from inside forward()")
        if kwargs:
            tracer.error(node, f"ctx.{name}() takes positional arguments only")
        if name == "mark_dirty":
            if not all(isinstance(a, (Var, Const)) for a in args):
                tracer.error(node, "ctx.mark_dirty() takes the arrays the forward wrote in place")
            self.dirty = tuple(args)
        elif name == "save_for_backward":
            for i, a in enumerate(args):
                if not _savable(a):
                    tracer.error(node, "save_for_backward can only save variables, but argument "
                                 f"{i} is of type {_type_name(a)}")
            self.saved = tuple(args)
            shown = [getattr(n, "id", None) for n in getattr(node, "args", ())]
            shown += [None] * (len(args) - len(shown))  # `save_for_backward(*xs)`
            self.saved_records = tuple(tracer.mutation.saved.save(a, self.call_name, tracer.loc, name)
                                       for a, name in zip(args, shown))
        elif name == "save_for_forward":
            if not all(_savable(a) for a in args):
                tracer.error(node, "save_for_forward expects all arguments to be tensors; you "
                             "should save non-tensors as attributes on ctx.")
            self.saved_forward = tuple(args)
        elif name == "mark_non_differentiable":
            self.non_differentiable = tuple(args)
        elif name == "set_materialize_grads":
            if len(args) != 1 or not isinstance(args[0], Const):
                tracer.error(node, "ctx.set_materialize_grads() takes one constant bool")
            self.materialize_grads = bool(args[0].value)
        return Const(None)


def _savable(value) -> bool:
    from srcgrad.autograd.function import is_array

    return isinstance(value, Var) or (isinstance(value, Const) and (
        value.value is None or is_array(value.value)))


def _type_name(value) -> str:
    if isinstance(value, Const):
        return type(value.value).__name__
    return type(value).__name__


def _is_tensor_input(value) -> bool:
    from srcgrad.autograd.function import is_array

    return isinstance(value, Var) or (isinstance(value, Const) and is_array(value.value))


# ---------------------------------------------------------------------- forward
def trace_apply(tracer, cls, args, kwargs, node):
    """Trace `cls.apply(*args, **kwargs)`: the forward inline, then one `custom_call` op."""
    from srcgrad.autograd.function import bind_inputs

    call_loc = tracer.loc
    parsed = parse_function_class(cls, call_loc)
    try:
        inputs = bind_inputs(cls, args, kwargs)
    except TypeError as err:
        tracer.error(node, f"bad call to `{parsed.name}.apply`: {err}")
    ctx = TraceCtx(parsed.name, "forward", call_loc,
                   needs_input_grad=[isinstance(v, Var) and v.kind == "array" for v in inputs])
    start = len(tracer.ops)
    writes_before = len(tracer.mutation.write_log)
    for i in _dirty_parameters(parsed):  # torch's dirty inputs are arrays: `x *= 2` writes
        if i < len(inputs) and isinstance(inputs[i], Var):
            tracer.mutation.arrays[id(inputs[i])] = inputs[i]
    if parsed.setup_context is not None:
        output = tracer.inline(parsed.forward, list(inputs), {}, node)
        ctx.phase = "setup_context"
        tracer.inline(parsed.setup_context, [ctx, tuple(inputs), output], {}, node)
    else:
        output = tracer.inline(parsed.forward, [ctx, *inputs], {}, node)
    ctx.phase = "done"
    tracer.loc = call_loc
    leaves, tree = flatten(output, is_leaf=lambda v: isinstance(v, (Var, Const)))
    nondiff = set()
    for marked in ctx.non_differentiable:
        hits = [i for i, leaf in enumerate(leaves) if leaf is marked]
        if not isinstance(marked, Var) or not hits:
            tracer.error(node, f"{parsed.name}: mark_non_differentiable only accepts outputs "
                         "of forward")
        nondiff.update(hits)
    dirty = _dirty_outputs(tracer, parsed, ctx, inputs, leaves, writes_before, node)
    var_leaves = [(i, leaf) for i, leaf in enumerate(leaves) if isinstance(leaf, Var)]
    if not var_leaves:
        return output  # nothing dynamic comes out: nothing to differentiate
    # An output is differentiable (whatever computed it: `np.round` in a straight-through
    # estimator) unless marked non-differentiable or a static value (a shape, a size).
    static = {o for op in tracer.ops[start:] if rules.RULES[op.prim].static_out for o in op.outs}
    outs = []
    for i, leaf in var_leaves:
        kind = "static" if i in nondiff or leaf in static else "array"
        outs.append(Var(tracer.namer.fresh("_" + leaf.name.lstrip("_")), kind))
    new_leaves = list(leaves)
    for (i, _), out in zip(var_leaves, outs):
        new_leaves[i] = out
    call = FunctionCall(parsed, tuple(inputs), tree, tuple(new_leaves), saved=ctx.saved,
                        saved_records=ctx.saved_records,
                        saved_forward=ctx.saved_forward, attributes=ctx.attributes,
                        non_differentiable=frozenset(nondiff),
                        materialize_grads=ctx.materialize_grads, loc=call_loc,
                        body=tuple(tracer.ops[start:]), tracer_class=type(tracer))
    operands = Pack(tuple(leaf for _, leaf in var_leaves)), Pack(tuple(_input_operand(v) for v in inputs))
    tracer.ops.append(Op("custom_call", operands, tuple(outs), call_loc, {"function": call}))
    for (i, leaf), out in zip(var_leaves, outs):
        tracer.mutation.saved.same_storage(out, leaf)
        tracer.mutation.layout.same(out, leaf)  # what forward returned (Note [Layout facts])
        if i in dirty:  # the caller's names for the written input now read the output
            tracer.mutation.write(leaf, out, node, "dirty")
    return unflatten(tree, new_leaves)


def _dirty_parameters(parsed) -> list:
    """Indices (among the inputs) of the forward parameters it passes to `ctx.mark_dirty`."""
    node = parsed.forward.node
    params = _input_names(parsed)
    marked = {a.id for n in gast.walk(node) if isinstance(n, gast.Call)
              and isinstance(n.func, gast.Attribute) and n.func.attr == "mark_dirty"
              for a in n.args if isinstance(a, gast.Name)}
    return [i for i, name in enumerate(params) if name in marked]


def _input_names(parsed) -> list:
    """The forward's parameter names for the inputs (after ctx, unless setup_context)."""
    return [a.id for a in parsed.forward.node.args.args][0 if parsed.setup_context else 1:]


def _dirty_outputs(tracer, parsed, ctx, inputs, leaves, writes_before, node) -> set:
    """Indices of the output leaves `ctx.mark_dirty` marked, checked as torch does; an
    input written in place but not marked is a CompileError (its new value would be
    computed by the forward's own ops, which neither mode differentiates)."""
    mutation = tracer.mutation
    dirty = set()
    for marked in ctx.dirty:
        hits = [i for i, leaf in enumerate(leaves) if leaf is marked]
        if not hits:
            tracer.error(node, "Some elements marked as dirty during the forward method were not "
                         "returned as output. The inputs that are modified inplace must all be "
                         "outputs of the Function.")
        if not any(mutation.origin(marked) is v for v in inputs):
            warnings.warn("ctx.mark_dirty() received a tensor that was not an input. Only input "
                          "Tensors that have been mutated should be passed to ctx.mark_dirty().",
                          stacklevel=2)
        dirty.update(hits)
    marked_origins = {id(mutation.origin(m)) for m in ctx.dirty}
    for old_ids, loc in mutation.write_log[writes_before:]:
        for v, name in zip(inputs, _input_names(parsed)):
            if isinstance(v, Var) and id(v) in old_ids and id(v) not in marked_origins:
                raise CompileError.at(loc, f"{parsed.name}.forward writes its input `{name}` in "
                                      "place without marking it with `ctx.mark_dirty`",
                                      hint=f"call `ctx.mark_dirty({name})` and return it, or "
                                      f"write into a copy (`{name} = {name}.copy()`)")
    return dirty


def _input_operand(value):
    try:
        return to_operand(value)
    except TypeError:  # a dict argument: not differentiable through the call
        return Const(None)


def _output_slots(call):
    """(per forward output: its leaf index or None), one per top-level output."""
    tree = call.out_tree
    if tree[0] in ("tuple", "list"):
        slots, k = [], 0
        for child in tree[1]:
            slots.append(k if child == ("leaf",) else None)
            k += _count_leaves(child)
        return slots
    return [0] if tree == ("leaf",) else [None]


def _count_leaves(tree) -> int:
    if tree[0] == "leaf":
        return 1
    return sum(_count_leaves(c) for c in tree[1])


# ---------------------------------------------------------------------- reverse mode
_access = itertools.count()


def trace_backward(tracer, op, cotangents: dict, active, same_shape, hooks=None) -> list:
    """The cotangent operand (or None) of each input of a `custom_call` op.

    `cotangents` maps the op's outputs to their summed cotangents; `same_shape(a, b)`
    says whether `a` provably has `b`'s shape (then no `check_grad`); `hooks` is
    `(pack Var, unpack Var)` in the saved-tensor-hook variant.
    """
    call: FunctionCall = op.attrs["function"]
    parsed = call.parsed
    if parsed.backward is None:
        raise CompileError.at(call.loc, "You must implement either the backward or vjp method for "
                              "your custom autograd.Function to use it with backward mode AD.")
    grads_in = []
    for slot in _output_slots(call):
        out = call.out_leaves[slot] if slot is not None else None
        if not isinstance(out, Var):
            grads_in.append(Const(None))
            continue
        ct = cotangents.get(out)
        if ct is None:
            ct = _zeros(tracer, out) if call.materialize_grads else Const(None)
        grads_in.append(ct)
    inputs = op.args[1].items
    needs = tuple(isinstance(a, Var) and a in active for a in inputs)
    # A saved output is read as the call's output, as torch's backward sees it (not as
    # the forward's value it names): the backward uses the caller's name, and one
    # saved slot serves both.
    output_of = {id(leaf): o for o, leaf in zip(op.outs, op.args[0].items)}
    saved = tuple(output_of.get(id(v), v) for v in call.saved)
    unpack = _unpacker(tracer, op, call, saved, hooks) if hooks is not None else None

    def read_saved(tr):  # at each `ctx.saved_tensors`: unpacked, then version-checked
        values = unpack(tr) if unpack is not None else saved
        return tuple(checked_saved(tr, v, r)
                     for v, r in zip(values, call.saved_records))

    ctx = TraceCtx(parsed.name, "backward", call.loc, needs_input_grad=needs, saved=call.saved,
                   attributes=call.attributes, unpack=read_saved)
    result = tracer.inline(parsed.backward, [ctx, *grads_in], {}, None)
    tracer.loc = op.loc
    results = list(result) if isinstance(result, (tuple, list)) else [result]
    n = len(call.inputs)
    extra_ok = all(isinstance(r, Const) and r.value is None for r in results[n:])
    if len(results) < n or not extra_ok:
        raise CompileError.at(call.loc, f"function {parsed.node_name} returned an incorrect number "
                              f"of gradients (expected {n}, got {len(results)})")
    grads = []
    for i, (given, r) in enumerate(zip(call.inputs, results)):
        if isinstance(r, Const) and r.value is None:
            grads.append(None)
            continue
        if not _is_tensor_input(given):
            raise CompileError.at(call.loc, f"function {parsed.node_name} returned a gradient "
                                  f"different than None at position {i + 1}, but the "
                                  "corresponding forward input was not a Variable")
        if not (isinstance(r, Var) or (isinstance(r, Const) and _is_tensor_input(r))):
            raise CompileError.at(call.loc, f"expected Variable or None (got {_type_name(r)}) "
                                  f"from {parsed.node_name} at position {i + 1}")
        arg = inputs[i]
        if not (isinstance(arg, Var) and arg in active):
            grads.append(None)  # torch drops a gradient for an input that needs none
            continue
        if not same_shape(r, arg):
            shape = tracer.apply(rules.RULES["shape"], [arg], {})
            r = tracer.apply(rules.RULES["check_grad"], [r, shape, Const(parsed.node_name),
                                                         Const(i)], {})
        if parsed.once_differentiable:
            r = tracer.apply(rules.RULES["differentiable_once"], [r, Const(parsed.node_name)], {})
        grads.append(r)
    return grads


def _zeros(tracer, v):
    shape = tracer.apply(rules.RULES["shape"], [v], {})
    dtype = tracer.apply(rules.RULES["dtype"], [v], {})
    return tracer.apply(rules.RULES["zeros"], [shape, dtype], {})


def _unpacker(tracer, op, call, saved, hooks):
    """Pack every saved Var once (in the forward) and unpack at each access."""
    pack_fn, unpack_fn = hooks
    packed = []
    for i, v in enumerate(saved):
        if isinstance(v, Var):
            out = Var(tracer.namer.fresh("_packed_" + v.name.lstrip("_")), "static")
            tracer.ops.append(Op("saved_pack", (pack_fn, v), (out,), call.loc,
                                 {"hook": ("pack", call, i), "after": op}))
            packed.append((v, out))
        else:
            packed.append((v, None))

    def unpack(tr):
        values = []
        for v, p in packed:
            if p is None:
                values.append(v)
                continue
            out = Var(tr.namer.fresh("_" + v.name.lstrip("_")), "array")
            tr.ops.append(Op("saved_unpack", (unpack_fn, p), (out,), tr.loc,
                             {"hook": ("unpack", next(_access))}))
            values.append(out)
        return tuple(values)

    return unpack


# ---------------------------------------------------------------------- forward mode
def trace_jvp(tracer, op, tangents: dict) -> dict:
    """{custom_call output: tangent} from the user's `jvp`."""
    call: FunctionCall = op.attrs["function"]
    parsed = call.parsed
    if parsed.jvp is None:
        raise CompileError.at(call.loc, "You must implement the jvp function for custom "
                              "autograd.Function to use it with forward mode AD.")
    tangent_args = [_input_tangent(tracer, a, tangents, call.materialize_grads)
                    for a in op.args[1].items]
    needs = tuple(isinstance(a, Var) and a in tangents for a in op.args[1].items)
    ctx = TraceCtx(parsed.name, "jvp", call.loc, needs_input_grad=needs, saved=call.saved_forward,
                   attributes=call.attributes)
    result = tracer.inline(parsed.jvp, [ctx, *tangent_args], {}, None)
    tracer.loc = op.loc
    slots = _output_slots(call)
    results = list(result) if isinstance(result, (tuple, list)) and len(slots) > 1 else [result]
    if len(results) != len(slots):
        raise CompileError.at(call.loc, f"function {parsed.name}'s jvp returned an incorrect number "
                              f"of tangents (expected {len(slots)}, got {len(results)})")
    out_tangents = {}
    for pos, (slot, r) in enumerate(zip(slots, results)):
        is_none = isinstance(r, Const) and r.value is None
        out = call.out_leaves[slot] if slot is not None else None
        differentiable = isinstance(out, Var) and out.kind == "array"
        if not differentiable:
            if not is_none:
                raise CompileError.at(call.loc, f"Function's jvp returned a gradient at position "
                                      f"{pos}, but  the corresponding forward output is not a "
                                      "differentiable Tensor.You should return None at that "
                                      "position instead.")
            continue
        if not is_none:  # torch's check of a forward gradient's size
            shape = tracer.apply(rules.RULES["shape"], [out], {})
            out_tangents[out] = tracer.apply(rules.RULES["check_tangent"], [r, shape], {})
    return out_tangents


def _input_tangent(tracer, a, tangents, materialize):
    """The tangent the user's jvp receives for the input `a`, as torch gives it: its own;
    for a tensor input without one, zeros (None under `set_materialize_grads(False)`);
    None for a non-tensor input. A static Var (computed from no differentiated
    argument: `np.zeros_like(x)`, a shape, a count) is a tensor or a number at run time,
    decided there by `zero_tangent` (fuzz seed 911909: it was given None as a number)."""
    if isinstance(a, Var) and a.kind == "array":
        t = tangents.get(a)
        if t is not None:
            return t
    if not materialize or not _is_tensor_input(a):
        return Const(None)
    if isinstance(a, Const):
        if numpy.asarray(a.value).dtype.kind not in "fc":
            return Const(None)  # an integer array: torch gives None too
        return tracer.apply(rules.RULES["zeros_like"], [a], {})
    return tracer.apply(rules.RULES["zeros_like" if a.kind == "array" else "zero_tangent"], [a], {})
