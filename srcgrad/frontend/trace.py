"""Trace a parsed function (or a rule formula) into IR ops.

The tracer walks the gast AST once, evaluating whatever is static (Note [Static
versus dynamic values] in srcgrad.ir.core) and emitting one `Op` per primitive
applied to dynamic values. Calls to other user functions are traced in place, so
a graph never contains calls; static arguments specialise the callee.

Values during tracing ("tvalues") are: `Var` (dynamic), `Const` (static), or a
native tuple/list/dict of tvalues (a static container of possibly dynamic values).
"""

from __future__ import annotations

import functools
import math
import types

import gast
import numpy

from srcgrad import rules
from srcgrad.errors import CompileError
from srcgrad.frontend import described, idioms, numpy_forms, python_forms
from srcgrad.frontend.classes import applied_class
from srcgrad.frontend.control import ControlFlow
from srcgrad.frontend.inlining import Inlining, _at_user_line, _NestedDef
from srcgrad.frontend.mutation import SHARING_RULES, VIEW_RULES, Mutation
from srcgrad.frontend.resolve import MISSING
from srcgrad.frontend.scope import TraceObject, Undecided
from srcgrad.ir.core import Const, Graph, Var
from srcgrad.ir.expand import Expander, Namer, describe, may_call
from srcgrad.ir.tree import LEAF, flatten
from srcgrad.rules import compositions

# Builtins evaluated at compile time when all their arguments are static.
FOLDABLE_BUILTINS = {len, range, int, float, bool, abs, min, max, sum, tuple, list, dict,
                     isinstance, round, slice, zip, enumerate, reversed, sorted, str, type,
                     divmod, any, all, map, filter}

_COMPARISONS = frozenset({"less", "less_equal", "greater", "greater_equal", "equal", "not_equal"})
_INT_ARITHMETIC = frozenset({"add", "subtract", "multiply", "floor_divide", "mod", "negative",
                             "py_int", "maximum", "minimum"})


# Note [Python numbers of arrays]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# `float(x)`, `int(x)`, `x.item()` and `x.tolist()` of a traced array are CompileErrors
# (issue 29 decided it): the Python number they make has no derivative, and a gradient
# that flows into it would be silently zero. torch's `.item()` returns a number with no
# gradient; JAX raises (ConcretizationTypeError) and so does HIPS autograd, and srcgrad
# follows them: a zero gradient is a claim. A value of kind "static" (a loop index, a
# shape) is a plain number and converts (srcgrad.frontend.idioms.lower_builtin).


def _from_srcgrad(callee) -> bool:
    """A callee defined in srcgrad's package: one of its transforms (srcgrad.api), or a
    function the tracer refuses to inline (srcgrad.frontend.transforms)."""
    module = getattr(callee, "__module__", None)
    return isinstance(module, str) and (module == "srcgrad" or module.startswith("srcgrad."))


def _const(value):
    """A Python value as a tvalue (tvalues, such as a NestedDef's defaults, stay as they are)."""
    return value if isinstance(value, (Var, Const, tuple, list, dict, TraceObject)) else Const(value)


def is_temp(var: Var) -> bool:
    return var.name.startswith("_")


HELD = "_held"  # hidden names of operands held while later operands are traced (Tracer.hold)


class _Held:
    """What Tracer.hold gives back for a held operand: the hidden name it is under."""

    def __init__(self, name):
        self.name = name


class Tracer(Inlining, Expander, ControlFlow):
    """An Expander (srcgrad.ir.expand) for the whole user-code surface."""

    def __init__(self, namer: Namer, ops: list | None = None):
        super().__init__(namer, ops)
        self.depth = 0
        self.scopes: list = []  # the Scopes of the functions being traced, outermost first
        self.mutation = Mutation(self)  # Note [Mutation at trace time]
        self.python_ints: dict = {}  # id(Var) -> Var: a shape's item, `x.size`, `x.ndim`
        # Note [Shape facts]: (ops, inputs) -> {Var: value computed from shapes alone}, set
        # by the pipeline when it compiles a variant for known argument shapes
        self.facts = None
        self.enclosing: list = []  # the op lists of the blocks around the one traced now
        # (scope, len(scopes) at its start) per block traced now (Inlining.block_outside)
        self.blocks: list = []
        self._facts_seen: tuple = (None, {})
        self.fenced: set = set()  # the function nodes fenced (Inlining.fence)

    # ------------------------------------------------------------------ entry points
    def trace_function(self, fs, arg_trees=None) -> Graph:
        """A whole function, every parameter dynamic.

        `arg_trees` (default `fs.arg_trees`, else all leaves): per parameter, the tree
        definition (srcgrad.ir.tree.flatten) of its example argument. A parameter whose
        tree is a tuple/list/dict is bound to a native container of fresh Vars, one per
        leaf; `Graph.inputs` and `Graph.param_names` then list the *leaves* (named
        `<param>_<key>`), in `flatten` order (Note [Container arguments]).
        """
        args = fs.node.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs:
            raise CompileError.at(fs.loc(fs.node), "compiled functions take plain positional "
                                  "parameters only (no *args, **kwargs or keyword-only)",
                                  hint="list the parameters explicitly")
        names = [a.id for a in args.args]
        if arg_trees is None:
            arg_trees = getattr(fs, "arg_trees", None)
        trees = list(arg_trees or ()) + [LEAF] * (len(names) - len(arg_trees or ()))
        env, inputs, leaf_names = {}, [], []
        for name, tree in zip(names, trees):
            value, leaves = self._input_tree(name, tree)
            env[name] = value
            inputs += [leaf for _, leaf in leaves]
            leaf_names += [path for path, _ in leaves]
        defaults = {}
        n_default = len(args.defaults)
        for name, default in zip(names[len(names) - n_default:], fs.fn.__defaults__ or ()):
            if name in leaf_names:
                defaults[name] = default
        self._parameters = {v: (name, fs.fn) for name, v in env.items() if isinstance(v, Var)}
        self.mutation.inputs = list(inputs)
        self.mutation.start(fs.node, self.ops)
        scope = self._function_scope(fs, env)
        self.scopes.append(scope)
        try:
            result = self.trace_body(fs.node.body, scope)
            self.mutation.finish(scope.env, self.ops)  # Note [Saved values written in place]
        except CompileError as err:
            raise _at_user_line(fs, err) from None
        finally:
            self.scopes.pop()
        result = self.mutation.check_decided(result, None)
        leaves, tree = flatten(result, is_leaf=lambda v: isinstance(v, (Var, Const)))
        return Graph(name=fs.name, inputs=inputs, ops=self.ops, outputs=leaves, out_tree=tree,
                     param_names=tuple(leaf_names), defaults=defaults, loc=fs.loc(fs.node))

    def _input_tree(self, name, tree):
        """(tvalue, [(leaf name, Var)]) for a parameter whose argument has `tree`."""
        if tree[0] == "leaf":
            var = Var(self.namer.fresh(name))
            return var, [(name, var)]
        if tree[0] == "record":  # Note [Records]
            _, cls, names, children, statics = tree
            fields, leaves = {}, []
            for key, child in zip(names, children):
                fields[key], sub = self._input_tree(f"{name}_{key}", child)
                leaves += sub
            fields.update((key, Const(value)) for key, value in statics)
            from srcgrad.frontend import records  # (records only: not on a plain compile, issue 15)
            return records.bind(cls, fields), leaves
        if tree[0] == "dict":
            keys, children = tree[1], tree[2]
        else:
            keys, children = range(len(tree[1])), tree[1]
        out, leaves = {}, []
        for key, child in zip(keys, children):
            value, sub = self._input_tree(f"{name}_{key}", child)
            out[key] = value
            leaves += sub
        if tree[0] == "dict":
            return out, leaves
        items = [out[k] for k in keys]
        return (tuple(items) if tree[0] == "tuple" else items), leaves

    # ------------------------------------------------------------------ statements
    def trace_body(self, stmts, scope):
        self.locate = scope.locate
        returned = self.trace_statements(stmts, scope)
        return Const(None) if returned is None else returned

    def stmt(self, node, scope):
        if isinstance(node, gast.Assign):
            value = self.expr(node.value, scope)
            for target in node.targets:
                self.bind(target, value, scope)
        elif isinstance(node, gast.AnnAssign):
            if node.value is not None:
                self.bind(node.target, self.expr(node.value, scope), scope)
        elif isinstance(node, gast.AugAssign):
            self.mutation.aug_assign(node, scope)
        elif isinstance(node, gast.Expr):
            if isinstance(node.value, gast.Constant):
                return  # a docstring or a bare literal
            if isinstance(node.value, gast.Call):  # `lst.append(v)`, `update(params)`, `ctx.f(x)`
                if not self.mutation.inplace_method(node.value, scope):
                    self.expr(node.value, scope)
                return
            self.fail(node, "an expression statement", "assign its result or remove it")
        elif isinstance(node, gast.Nonlocal):
            for name in node.names:
                if scope.outer is None or scope.outer.owner(name) is None:
                    self.error(node, f"no binding for nonlocal `{name}` found")
                scope.nonlocals.add(name)
        elif isinstance(node, gast.If):
            self.trace_if(node, scope)
        elif isinstance(node, gast.For):
            self.trace_for(node, scope)
        elif isinstance(node, gast.While):
            self.trace_while(node, scope)
        elif isinstance(node, gast.Pass):
            return
        elif isinstance(node, gast.Assert):  # runs in the forward, no effect on gradients
            python_forms.trace_assert(self, node, scope)
        elif isinstance(node, gast.Try):  # Note [try in compiled code]
            python_forms.trace_try(self, node, scope)
        elif isinstance(node, gast.Raise):
            python_forms.trace_raise(self, node, scope)
        elif isinstance(node, gast.FunctionDef):
            self.bind(gast.Name(node.name, gast.Store(), None, None),
                      Const(_NestedDef(self, node, scope)), scope)
        else:
            # (statements with a specific rewrite are refused earlier, by srcgrad.frontend.fence)
            self.fail(node, f"the statement `{type(node).__name__}`",
                      "move it out of the compiled function: compile the computation, and do "
                      "the rest around the call")

    def _is_ctx_call(self, node, scope) -> bool:
        """A method call on a TraceObject (Note [Custom Functions] in frontend.function)."""
        return (isinstance(node, gast.Call) and isinstance(node.func, gast.Attribute)
                and isinstance(node.func.value, gast.Name)
                and isinstance(scope.env.get(node.func.value.id), TraceObject))

    def bind(self, target, value, scope):
        if isinstance(target, gast.Name):
            if isinstance(value, Var) and is_temp(value):
                value.name = self.namer.fresh(target.id)  # SSA values named after sources
            owner = scope.owner(target.id) if target.id in scope.nonlocals else scope
            owner.env[target.id] = value
        elif isinstance(target, gast.Subscript):
            self.mutation.store_subscript(target, value, scope)
        elif isinstance(target, (gast.Tuple, gast.List)) and any(
                isinstance(t, gast.Starred) for t in target.elts):
            python_forms.star_bind(self, target, value, scope)  # `a, *rest = x`
        elif isinstance(target, (gast.Tuple, gast.List)):
            if isinstance(value, Const) and (isinstance(value.value, (tuple, list))
                                             or getattr(value.value, "ndim", 0) >= 1):
                value = [Const(v) for v in value.value]  # (a constant array: its rows)
            if isinstance(value, Var) and not any(isinstance(t, gast.Starred) for t in target.elts):
                # `r, c = x.shape`, `a, b = x`: the count is the syntax's (the `unpack` row)
                value = self.apply(rules.RULES["unpack"], [value, Const(len(target.elts))], {},
                                   target)
            if not isinstance(value, (tuple, list)):
                self.fail(target, "unpacking an array into names",
                          "index it instead: `a, b = x[0], x[1]`")
            if len(value) != len(target.elts):
                self.fail(target, f"unpacking {len(value)} values into {len(target.elts)} names")
            for t, v in zip(target.elts, value):
                self.bind(t, v, scope)
        elif isinstance(target, gast.Attribute) and isinstance(
                base := self.expr(target.value, scope), TraceObject):
            base.trace_setattr(self, target.attr, value, target)  # `ctx.z = z`
        else:
            self.fail(target, f"assignment to `{describe(target)}`",
                      "assign to a plain name")

    # ------------------------------------------------------------------ expressions
    def expr_Name(self, node, scope):
        owner = scope.owner(node.id)
        if owner is not None:
            return self.mutation.check_decided(owner.env[node.id], node)
        if node.id in scope.local_names and node.id not in scope.nonlocals:
            self.error(node, f"local variable `{node.id}` referenced before assignment")
        value = scope.free(node.id)
        if value is MISSING:
            self.error(node, f"name `{node.id}` is not defined")
        return Const(value)

    def expr_Lambda(self, node, scope):
        return Const(_NestedDef(self, node, scope))

    def expr_ListComp(self, node, scope):
        from srcgrad.frontend import containers  # (not on a straight-line compile: issue 15)
        return containers.comprehension(self, node, scope)

    expr_GeneratorExp = expr_ListComp

    def star_items(self, value, node):  # `f(*x)`, `zip(*x)`: an array's rows, where known
        return python_forms.rows(self, value, node, "unpacking an array with `*`") \
            if isinstance(value, Var) else value

    def expr_JoinedStr(self, node, scope):  # an f-string of constants: `f"w_{i}"`
        return python_forms.joined_str(self, node, scope)
    expr_DictComp = expr_ListComp

    def expr_NamedExpr(self, node, scope):
        value = self.expr(node.value, scope)
        self.bind(node.target, value, scope)
        return value

    def expr_Dict(self, node, scope):
        out = {}
        parts = [part for k, v in zip(node.keys, node.values)
                 for part in (((self.expr, k),) if k is not None else ()) + ((self.expr, v),)]
        values = iter(self.in_order(parts, scope))  # (Note [Operands evaluated in order])
        for k in node.keys:
            key = next(values) if k is not None else None
            value = next(values)
            if not isinstance(key, Const):  # (also `{**d}`)
                self.fail(node, "a dict key that depends on the arguments",
                          "use constant keys (`{'a': x}`, `{0: x}`), or a list indexed by position")
            out[key.value] = value
        return out

    def binop(self, optype, left, right, node=None):
        if not (isinstance(left, Const) and isinstance(right, Const)) and optype in (gast.Add, gast.Mult) \
                and (isinstance(left, (tuple, list)) or isinstance(right, (tuple, list))):
            return self._container_op(optype, left, right, node)
        return super().binop(optype, left, right, node)

    def _container_op(self, optype, left, right, node):
        def items(v):
            return [Const(x) for x in v.value] if isinstance(v, Const) else list(v)
        if optype is gast.Add:
            out = items(left) + items(right)
            return tuple(out) if isinstance(left, tuple) else out
        seq, n = (left, right) if isinstance(left, (tuple, list)) else (right, left)
        if not isinstance(n, Const):
            self.fail(node, "repeating a sequence a dynamic number of times",
                      "repeat a literal number of times (`[x] * 2`), or use `np.tile` on an array")
        return type(seq)(items(seq) * n.value)

    def expr_BoolOp(self, node, scope):
        """`a and f(x)` / `a or f(x)`: Python calls f only where `a` does not decide, and
        f may write into arrays, so the rest is traced as the branch of an `if` (`f(x)
        if a else a`, `a if a else f(x)`) rather than evaluated on every path."""
        if not any(may_call(v) for v in node.values[1:]):
            return super().expr_BoolOp(node, scope)
        first = self.expr(node.values[0], scope)
        conj = isinstance(node.op, gast.And)
        rest = gast.BoolOp(node.op, node.values[1:]) if len(node.values) > 2 else node.values[1]
        if isinstance(first, Const):
            return first if bool(first.value) != conj else self.expr(rest, scope)
        def rest_value(s):
            return self.expr(rest, s)

        def first_value(s):
            return first

        return self.branches(node, first, scope, [], [], rest_value if conj else first_value,
                             first_value if conj else rest_value)

    def dynamic_ifexp(self, node, test, scope):
        return self.trace_ifexp(node, test, scope)  # Note [Tracing control flow]

    def expr_Attribute(self, node, scope):
        if isinstance(node.value, gast.Name) and rules.lookup_attribute(node.attr) is None:
            base = self.expr_Name(node.value, scope) if node.value.id in scope.env else None
            if isinstance(base, Var) and base in getattr(self, "_parameters", {}):
                described.not_an_array(self, node, *self._parameters[base])
        return super().expr_Attribute(node, scope)

    def dynamic_attribute(self, base, node):
        if isinstance(base, TraceObject):
            return base.trace_getattr(self, node.attr, node)
        if node.attr in getattr(base, "_fields", ()):  # a namedtuple argument's field
            return getattr(base, node.attr)
        return super().dynamic_attribute(base, node)

    def call_method(self, base, name, args, kwargs, node):
        if name in ("item", "tolist") and isinstance(base, Var):  # Note [Python numbers of arrays]
            self.error(node, f"the array method `.{name}()` is not supported in compiled code: "
                       "Python numbers carry no derivative, so the result would be a silent "
                       "constant", "drop it: a 0-d array works as a number in compiled code")
        if isinstance(base, TraceObject):
            return base.trace_method(self, name, args, kwargs, node)
        if isinstance(base, Var) and base in getattr(self, "_parameters", {}) \
                and rules.lookup_method(name) is None and not hasattr(numpy.ndarray, name) \
                and isinstance(node.func, gast.Attribute):  # `sim.step(y)` of an argument
            described.not_an_array(self, node.func, *self._parameters[base])
        if isinstance(base, (tuple, list, dict)):
            from srcgrad.frontend import containers  # (not on a straight-line compile: issue 15)
            return containers.method(self, base, name, args, kwargs, node)
        return super().call_method(base, name, args, kwargs, node)

    def hold(self, value, scope):
        """An operand, under a hidden name while later operands are traced (Note [Operands
        evaluated in order] in srcgrad.ir.expand): a write into its storage rebinds it as
        it rebinds every name (`x.dot(f(x))` sees f's write into x, `(x > 0).dot(f(x))`
        does not); a tuple, list or dict holding arrays is rebuilt the same way."""
        if not isinstance(value, (Var, tuple, list, dict)):
            return value
        name = f"{HELD}{sum(1 for n in scope.env if n.startswith(HELD))}"
        scope.env[name] = value
        return _Held(name)

    def release(self, held, scope):
        if isinstance(held, _Held):
            return scope.env.pop(held.name)
        return held

    def call_value(self, value, args, kwargs, node):
        if isinstance(value, TraceObject):  # `model(x)`: its class's __call__
            return value.trace_method(self, "__call__", args, kwargs, node)
        return super().call_value(value, args, kwargs, node)

    def is_array_operand(self, value) -> bool:
        return isinstance(value, Var) and not self.mutation.is_shape(value)

    def subscript_object(self, obj, index, node):  # `np.r_[x, C]`: Note [No silent constants]
        return numpy_forms.index_object(self, obj, index, node)

    def decided(self, value, node):
        return self.mutation.check_decided(value, node)

    def call(self, callee, args, kwargs, node):
        cls = applied_class(callee)
        if cls is not None:  # `MyFn.apply(...)` of a custom Function
            from srcgrad.frontend import function as custom  # (custom Functions only: issue 15)
            return custom.trace_apply(self, cls, args, kwargs, node)
        if isinstance(callee, _NestedDef):
            return self.inline_nested(callee, args, kwargs, node)
        if isinstance(callee, functools.partial):  # its bound values are constants
            return self.call(callee.func, [_const(a) for a in callee.args] + list(args),
                             {**{k: _const(v) for k, v in callee.keywords.items()}, **kwargs}, node)
        if _from_srcgrad(callee):  # sg.grad(f) inside (srcgrad's own functions only)
            from srcgrad.frontend import transforms  # (not on a plain compile: issue 15)
            lowered = transforms.lower_call(self, callee, args, kwargs, node)
            if lowered is not transforms.NOT_LOWERED:
                return lowered
        lowered = idioms.lower_call(self, callee, args, kwargs, node)  # Note [Lowered idioms]
        if lowered is not idioms.NOT_LOWERED:
            return lowered
        composed = compositions.composition(callee)  # Note [Compositions]
        if composed is not None:
            from srcgrad.frontend.parse import parse_function
            out = self.inline(parse_function(composed), args, kwargs, node)
            if composed.__name__ in compositions.READ_ONLY_VIEWS and args:
                self.mutation.note_view(composed.__name__, [args[0]], out)
            return out
        rule = rules.lookup_callable(callee)
        if rule is not None:
            if "out" in kwargs:  # `np.add(a, b, out=c)`: c's storage now holds the result
                kwargs = dict(kwargs)
                out = kwargs.pop("out")
                return self.mutation.write_out(out, self.apply(rule, args, kwargs, node), node)
            return self.apply(rule, args, kwargs, node)
        if callee in FOLDABLE_BUILTINS:
            return self.builtin(callee, args, kwargs, node)
        inner = getattr(callee, "__srcgrad__", None)
        if inner is not None:
            # A transformed function called from compiled code: trace the code it runs,
            # the generated source (this is how grad(grad(f)) and jvp(grad(f)) work).
            return self.inline_generated(self._generated_entry(inner, node, args), args, kwargs, node)
        if getattr(callee, "__srcgrad_gradient__", None) is not None:
            # a gradient's generated function itself (a stand-in for a call giving fewer
            # arguments calls it: srcgrad.pipeline.vjp_jvp.given_arguments)
            return self.inline_generated(callee, args, kwargs, node)
        if isinstance(callee, types.FunctionType):
            # never srcgrad's own Python, but the compositions' helpers (Note [Compositions])
            if _from_srcgrad(callee) and callee.__module__ != compositions.__name__:
                from srcgrad.frontend import transforms  # (not on a plain compile: issue 15)
                transforms.internal_call(self, callee, node)
            from srcgrad.frontend.parse import parse_function
            return self.inline(parse_function(callee), args, kwargs, node)
        if callee is math.fsum and len(args) == 1:  # fsum over a list: a plain sum
            return self.builtin(sum, args, kwargs, node)
        return python_forms.call_other(self, callee, args, kwargs, node)  # `sim.step(y)`

    def builtin(self, fn, args, kwargs, node):
        return python_forms.builtin(self, fn, args, kwargs, node)

    # ------------------------------------------------------------------ primitives
    def note_fold(self, rule, operands, folded) -> None:
        if rule.name in VIEW_RULES or rule.name in SHARING_RULES:
            self.mutation.note_view(rule.name, operands, folded)

    def note_op(self, rule, operands, outs) -> None:
        if len(outs) == 1 and (rule.name in ("size", "ndim") or rule.name == "getitem"
                               and self.mutation.is_shape(operands[0])
                               and isinstance(operands[1], Const) and isinstance(operands[1].value, int)
                               or rule.name in _INT_ARITHMETIC and self._ints_only(operands)):
            self.python_ints[id(outs[0])] = outs[0]  # a number, never iterated (_length)
        self.mutation.note_made(rule, operands, outs)
        if len(outs) == 1:
            self.mutation.note_array(rule.name, outs[0])
            if rule.name in VIEW_RULES or rule.name in SHARING_RULES:
                self.mutation.note_view(rule.name, operands, outs[0])
        elif rule.name in SHARING_RULES:  # `a, b = np.split(x, 2)`: each may be a view of x
            for out in outs:
                self.mutation.note_view(rule.name, operands, out)
        elif rule.name == "unpack":  # `r0, r1 = x`: x[0], x[1] (views of rows, or scalars)
            self.mutation.note_unpack(operands[0], outs)

    def _ints_only(self, operands) -> bool:
        """Operands that are Python ints from shapes (`python_ints`) or int constants."""
        return all(id(v) in self.python_ints if isinstance(v, Var) else
                   isinstance(v, Const) and isinstance(v.value, int) for v in operands)

    def _length(self, array):
        """The item count of a `for` over a traced value (srcgrad.frontend.loops): a
        number is refused as Python refuses it, not iterated as a 0-d array."""
        if id(array) in self.python_ints:
            self.error(None, "a `for` loop over a number: 'int' object is not iterable",
                       "loop over `range(n)` for the numbers 0 .. n-1")
        from srcgrad.frontend.iteration import Iteration  # (loops only: issue 15)
        return Iteration._length(self, array)  # (Note [Mixins imported on demand])

    # Note [Shape facts]
    # ~~~~~~~~~~~~~~~~~~~
    # A variant compiled for known argument shapes (Note [Shape specialisation] in
    # srcgrad.passes.shapes) may decide, while tracing, what depends on shapes alone:
    # `if x.shape[0] == 1:` ending a recursion over `x[1:]`, `[x[i] for i in
    # range(len(x))]`. Such a value is a fact of every call the variant's guard admits
    # when the shape probe says so: the probe runs the ops traced so far on the first
    # call's arguments and reports only the values that follow from shapes (never from
    # data: a boolean mask's count is not one). Only comparisons and `range()` ask. In
    # a branch body the probe runs the enclosing ops and the branch's so far (shapes do
    # not depend on which branch runs); in a loop body it cannot (the loop's params
    # have no value), so nothing there is a fact. What is not a fact stays traced, and
    # the shape-generic code (no facts) refuses these programs as before.
    def shape_fact(self, value):
        """`value` as a constant when it is a shape fact of this variant, else itself."""
        if self.facts is None or id(value) not in self.python_ints:  # (a shape's item, size,
            return value  # ndim, or int arithmetic on them: no probe for a loop index)
        lists = [*self.enclosing, self.ops]
        seen = tuple((id(ops), len(ops)) for ops in lists)
        if self._facts_seen[0] != seen:
            try:
                known = self.facts([op for ops in lists for op in ops], list(self.mutation.inputs))
            except Exception:  # noqa: BLE001 (the ops fail on these arguments: no facts)
                known = {}
            self._facts_seen = (seen, known)
        found = self._facts_seen[1].get(value, MISSING)
        return value if found is MISSING or not isinstance(found, (int, tuple)) else Const(found)

    def trace_block(self, *args, **kwargs):
        self.enclosing.append(self.ops)  # (shape_fact reads them)
        try:
            return super().trace_block(*args, **kwargs)
        finally:
            self.enclosing.pop()

    def apply(self, rule, args, kwargs, node=None):
        if self.facts is not None and rule.name in _COMPARISONS:  # Note [Shape facts]
            args = [self.shape_fact(a) for a in args]
        for value in (*args, *kwargs.values()):  # what a list or tuple holds becomes an
            if isinstance(value, (list, tuple, Undecided)):  # operand here, read unchecked
                self.mutation.check_decided(value, None)  # by the name (fuzz seed 912233)
        return super().apply(rule, args, kwargs, node)
