"""Trace a parsed function (or a rule formula) into IR ops.

The tracer walks the gast AST once, evaluating whatever is static (Note [Static
versus dynamic values] in srcgrad.ir.core) and emitting one `Op` per primitive
applied to dynamic values. Calls to other user functions are traced in place, so
a graph never contains calls; static arguments specialise the callee.

Values during tracing ("tvalues") are: `Var` (dynamic), `Const` (static), or a
native tuple/list/dict of tvalues (a static container of possibly dynamic values).
"""

from __future__ import annotations

import builtins
import math
import operator
import types

import gast

from srcgrad import rules
from srcgrad.errors import CompileError
from srcgrad.frontend import containers
from srcgrad.frontend.control import ControlFlow
from srcgrad.frontend.mutation import VIEW_RULES, Mutation
from srcgrad.frontend.resolve import MISSING, resolve
from srcgrad.ir.core import Const, Graph, Op, Pack, Var, operand_vars
from srcgrad.ir.tree import LEAF, flatten

BINOPS = {gast.Add: "add", gast.Sub: "subtract", gast.Mult: "multiply", gast.Div: "divide",
          gast.Pow: "power", gast.MatMult: "matmul", gast.FloorDiv: "floor_divide",
          gast.Mod: "mod"}
PY_BINOPS = {gast.Add: operator.add, gast.Sub: operator.sub, gast.Mult: operator.mul,
             gast.Div: operator.truediv, gast.Pow: operator.pow, gast.MatMult: operator.matmul,
             gast.FloorDiv: operator.floordiv, gast.Mod: operator.mod,
             gast.BitAnd: operator.and_, gast.BitOr: operator.or_, gast.BitXor: operator.xor,
             gast.LShift: operator.lshift, gast.RShift: operator.rshift}
CMPOPS = {gast.Lt: "less", gast.LtE: "less_equal", gast.Gt: "greater", gast.GtE: "greater_equal",
          gast.Eq: "equal", gast.NotEq: "not_equal"}
PY_CMPOPS = {gast.Lt: operator.lt, gast.LtE: operator.le, gast.Gt: operator.gt,
             gast.GtE: operator.ge, gast.Eq: operator.eq, gast.NotEq: operator.ne,
             gast.Is: operator.is_, gast.IsNot: operator.is_not,
             gast.In: lambda a, b: a in b, gast.NotIn: lambda a, b: a not in b}
UNARYOPS = {gast.USub: "negative", gast.UAdd: "positive", gast.Invert: "invert"}

# Builtins evaluated at compile time when all their arguments are static.
FOLDABLE_BUILTINS = {len, range, int, float, bool, abs, min, max, sum, tuple, list, dict,
                     isinstance, round, slice, zip, enumerate, reversed, sorted, str, type,
                     divmod, any, all, map}

MAX_INLINE_DEPTH = 64


class Namer:
    """Hands out unique identifiers, preferring the hint as given."""

    def __init__(self, taken=()):
        self.taken = set(taken)

    def fresh(self, hint: str) -> str:
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in hint) or "_v"
        if base[0].isdigit():
            base = "_" + base
        name, i = base, 1
        while name in self.taken:
            name, i = f"{base}_{i}", i + 1
        self.taken.add(name)
        return name


def is_temp(var: Var) -> bool:
    return var.name.startswith("_")


class Scope:
    """Name bindings of one function being traced, and how to resolve free names.

    A nested `def`, lambda or comprehension gets a Scope whose `outer` is the scope it
    was defined in: its free names read the enclosing function's *current* bindings
    (Python closures capture variables, not values), then the globals."""

    def __init__(self, env: dict, lookup_free, locate, outer=None, nonlocals=frozenset(),
                 local_names=frozenset()):
        self.env = env  # local name -> tvalue
        self.lookup_free = lookup_free  # name -> value or MISSING
        self.locate = locate  # gast node -> Loc
        self.outer = outer  # the enclosing Scope of a nested def / comprehension, or None
        self.nonlocals = set(nonlocals)  # names declared `nonlocal`: read and written in `outer`
        # names the body assigns (a nested def's locals): never resolved in `outer`
        self.local_names = frozenset(local_names)

    def owner(self, name):
        """The scope whose env holds `name` for reads and writes here, or None."""
        scope = self
        while scope is not None:
            if name in scope.nonlocals:
                scope = scope.outer
                continue
            if name in scope.env:
                return scope
            if name in scope.local_names:
                return None  # a local not bound yet
            scope = scope.outer
        return None

    def free(self, name):
        """A name no scope binds: closure cells, globals, builtins (or MISSING)."""
        scope = self
        while scope.outer is not None:
            scope = scope.outer
        return scope.lookup_free(name)


class TraceObject:
    """A compile-time object that user code uses as a value: a custom Function's `ctx`
    (srcgrad.frontend.function). The tracer asks it for attributes, attribute
    stores and method calls instead of evaluating them."""

    def trace_getattr(self, tracer, name, node):
        raise NotImplementedError

    def trace_setattr(self, tracer, name, value, node):
        raise NotImplementedError

    def trace_method(self, tracer, name, args, kwargs, node):
        raise NotImplementedError


class Tracer(ControlFlow):
    def __init__(self, namer: Namer, ops: list | None = None):
        self.namer = namer
        self.ops = [] if ops is None else ops
        self.loc = None  # Loc of the statement being traced
        self.locate = None  # gast node -> Loc, for the function being traced
        self.depth = 0
        self.scopes: list = []  # the Scopes of the functions being traced, outermost first
        self.mutation = Mutation(self)  # Note [Mutation at trace time]

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
        self.mutation.inputs = list(inputs)
        self.mutation.start(fs.node, self.ops)
        scope = self._function_scope(fs, env)
        self.scopes.append(scope)
        try:
            result = self.trace_body(fs.node.body, scope)
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

    def trace_formula(self, node, env: dict, loc):
        """A rule formula (a parsed gast expression) with its names bound to tvalues."""
        saved = self.loc, self.locate
        self.loc, self.locate = loc, None
        scope = Scope(dict(env), _formula_lookup, lambda n: loc)
        try:
            return self.expr(node, scope)
        finally:
            self.loc, self.locate = saved

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
        elif isinstance(node, gast.FunctionDef):
            self.bind(gast.Name(node.name, gast.Store(), None, None),
                      Const(_NestedDef(self, node, scope)), scope)
        else:
            self.fail(node, f"the statement `{type(node).__name__}`",
                      "see API.md for what compiled functions may contain")

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
        elif isinstance(target, gast.Starred):
            self.fail(target, "a starred assignment target", "index the sequence instead")
        elif isinstance(target, (gast.Tuple, gast.List)):
            if isinstance(value, Const) and isinstance(value.value, (tuple, list)):
                value = [Const(v) for v in value.value]
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
            self.fail(target, f"assignment to `{_describe(target)}`",
                      "assign to a plain name")

    # ------------------------------------------------------------------ expressions
    def expr(self, node, scope):
        method = getattr(self, "expr_" + type(node).__name__, None)
        if method is None:
            self.fail(node, f"the expression `{type(node).__name__}`",
                      "see API.md for what compiled functions may contain")
        return method(node, scope)

    def expr_Constant(self, node, scope):
        return Const(node.value)

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
        return containers.comprehension(self, node, scope)

    expr_GeneratorExp = expr_ListComp
    expr_DictComp = expr_ListComp

    def expr_NamedExpr(self, node, scope):
        value = self.expr(node.value, scope)
        self.bind(node.target, value, scope)
        return value

    def expr_Tuple(self, node, scope):
        return tuple(self._elts(node.elts, scope))

    def expr_List(self, node, scope):
        return list(self._elts(node.elts, scope))

    def _elts(self, elts, scope):
        for e in elts:
            if isinstance(e, gast.Starred):
                inner = self.expr(e.value, scope)
                if isinstance(inner, Const):
                    inner = [Const(v) for v in inner.value]
                if not isinstance(inner, (tuple, list)):
                    self.fail(e, "unpacking an array with `*`")
                yield from inner
            else:
                yield self.expr(e, scope)

    def expr_Dict(self, node, scope):
        out = {}
        for k, v in zip(node.keys, node.values):
            key = self.expr(k, scope) if k is not None else None
            if not isinstance(key, Const):
                self.fail(node, "a dict key that depends on the arguments")
            out[key.value] = self.expr(v, scope)
        return out

    def expr_BinOp(self, node, scope):
        return self.binop(type(node.op), self.expr(node.left, scope),
                          self.expr(node.right, scope), node)

    def binop(self, optype, left, right, node=None):
        if isinstance(left, Const) and isinstance(right, Const):
            return Const(PY_BINOPS[optype](left.value, right.value))
        if isinstance(left, (tuple, list)) or isinstance(right, (tuple, list)):
            if optype in (gast.Add, gast.Mult):
                return self._container_op(optype, left, right, node)
        name = BINOPS.get(optype)
        if name is None or name not in rules.RULES:
            self.fail(node, f"the operator `{optype.__name__}` on arrays")
        return self.apply(rules.RULES[name], [left, right], {})

    def _container_op(self, optype, left, right, node):
        def items(v):
            return [Const(x) for x in v.value] if isinstance(v, Const) else list(v)
        if optype is gast.Add:
            out = items(left) + items(right)
            return tuple(out) if isinstance(left, tuple) else out
        seq, n = (left, right) if isinstance(left, (tuple, list)) else (right, left)
        if not isinstance(n, Const):
            self.fail(node, "repeating a sequence a dynamic number of times")
        return type(seq)(items(seq) * n.value)

    def expr_UnaryOp(self, node, scope):
        operand = self.expr(node.operand, scope)
        if isinstance(operand, Const):
            fn = {gast.USub: operator.neg, gast.UAdd: operator.pos, gast.Not: operator.not_,
                  gast.Invert: operator.invert}[type(node.op)]
            return Const(fn(operand.value))
        if isinstance(node.op, gast.Not):  # a condition's truth value
            return self.apply(rules.RULES["logical_not"], [operand], {})
        return self.apply(rules.RULES[UNARYOPS[type(node.op)]], [operand], {})

    def expr_Compare(self, node, scope):
        left = self.expr(node.left, scope)
        result = None
        for op, comp in zip(node.ops, node.comparators):
            right = self.expr(comp, scope)
            if isinstance(left, Const) and isinstance(right, Const):
                part = Const(PY_CMPOPS[type(op)](left.value, right.value))
            elif type(op) in (gast.Is, gast.IsNot) and (isinstance(left, Const) or isinstance(right, Const)):
                # a dynamic array is never None: `x is None` is static
                part = Const(type(op) is gast.IsNot)
            elif type(op) in CMPOPS:
                part = self.apply(rules.RULES[CMPOPS[type(op)]], [left, right], {})
            else:
                self.fail(node, f"the comparison `{type(op).__name__}` on arrays")
            result = part if result is None else self._and(result, part, node)
            left = right
        return result

    def _and(self, a, b, node):
        if isinstance(a, Const) and isinstance(b, Const):
            return Const(a.value and b.value)
        return self.apply(rules.RULES["logical_and"], [a, b], {})

    def expr_BoolOp(self, node, scope):
        values = [self.expr(v, scope) for v in node.values]
        if all(isinstance(v, Const) for v in values):
            result = values[0].value
            for v in values[1:]:
                result = (result and v.value) if isinstance(node.op, gast.And) else (result or v.value)
            return Const(result)
        # A static first operand decides a short-circuit at compile time.
        first = values[0]
        if isinstance(first, Const):
            decided = (not first.value) if isinstance(node.op, gast.And) else bool(first.value)
            if decided:
                return first
            rest = gast.BoolOp(node.op, node.values[1:]) if len(values) > 2 else node.values[1]
            return self.expr(rest, scope)
        # Dynamic: a condition's truth value (both sides are evaluated: they are pure).
        name = "logical_and" if isinstance(node.op, gast.And) else "logical_or"
        result = values[0]
        for v in values[1:]:
            result = self.apply(rules.RULES[name], [result, v], {})
        return result

    def expr_IfExp(self, node, scope):
        test = self.expr(node.test, scope)
        if isinstance(test, Const):
            return self.expr(node.body if test.value else node.orelse, scope)
        return self.trace_ifexp(node, test, scope)  # Note [Tracing control flow]

    def expr_Attribute(self, node, scope):
        base = self.expr(node.value, scope)
        if isinstance(base, TraceObject):
            return base.trace_getattr(self, node.attr, node)
        if isinstance(base, Const):
            try:
                return Const(getattr(base.value, node.attr))
            except AttributeError:
                self.error(node, f"`{_describe(node)}` does not exist")
        if isinstance(base, Var):
            rule = rules.lookup_attribute(node.attr)
            if rule is None:
                self.fail(node, f"the array attribute `.{node.attr}`")
            return self.apply(rule, [base], {})
        self.fail(node, f"the attribute `.{node.attr}` of a tuple, list or dict")

    def expr_Subscript(self, node, scope):
        base = self.expr(node.value, scope)
        index = self.index(node.slice, scope)
        if isinstance(base, (tuple, list, dict)):
            if not isinstance(index, Const):
                self.fail(node, "indexing a tuple, list or dict with a dynamic index")
            try:
                picked = base[index.value]
            except (IndexError, KeyError, TypeError) as err:
                self.error(node, f"cannot evaluate `{_describe(node)}`: {err}")
            if isinstance(index.value, slice):
                return type(base)(picked)
            return self.mutation.check_decided(picked, node)
        if isinstance(base, Const) and isinstance(index, Const):
            return Const(base.value[index.value])
        return self.apply(rules.RULES["getitem"], [base, index], {})

    def index(self, node, scope):
        if isinstance(node, gast.Slice):
            parts = [Const(None) if p is None else self.expr(p, scope)
                     for p in (node.lower, node.upper, node.step)]
            if all(isinstance(p, Const) for p in parts):
                return Const(slice(*(p.value for p in parts)))
            return Pack(tuple(parts), "slice")
        if isinstance(node, gast.Tuple):
            parts = [self.index(e, scope) for e in node.elts]
            if all(isinstance(p, Const) for p in parts):
                return Const(tuple(p.value for p in parts))
            return tuple(parts)
        return self.expr(node, scope)

    def expr_Call(self, node, scope):
        args = list(self._elts(node.args, scope))
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                value = self.expr(kw.value, scope)
                if not isinstance(value, dict):
                    self.fail(node, "`**` of a value that is not a dict")
                kwargs.update(value)
            else:
                kwargs[kw.arg] = self.expr(kw.value, scope)
        func = node.func
        if isinstance(func, gast.Attribute):
            base = self.expr(func.value, scope)
            if isinstance(base, Var):
                return self.method_call(base, func.attr, args, kwargs, node)
            if isinstance(base, TraceObject):
                return base.trace_method(self, func.attr, args, kwargs, node)
            if isinstance(base, (tuple, list, dict)):
                return containers.method(self, base, func.attr, args, kwargs, node)
            if not isinstance(base, Const):
                self.fail(node, f"the method `.{func.attr}()` of a tuple, list or dict")
            try:
                callee = getattr(base.value, func.attr)
            except AttributeError:
                self.error(node, f"`{_describe(func)}` does not exist")
        else:
            callee_value = self.expr(func, scope)
            if not isinstance(callee_value, Const):
                self.fail(node, "calling a value that is not a function")
            callee = callee_value.value
        return self.call(callee, args, kwargs, node)

    def method_call(self, base, name, args, kwargs, node):
        rule = rules.lookup_method(name)
        if rule is None:
            self.fail(node, f"the array method `.{name}()`",
                      "call the NumPy function instead, e.g. `np.<name>(x, ...)`")
        one_var = len(args) == 1 and isinstance(args[0], Var) and not self.mutation.is_shape(args[0])
        if rule.method_varargs and (len(args) > 1 or one_var):
            args = [tuple(args)]
        elif rule.method_varargs and len(args) == 1 and isinstance(args[0], Const) \
                and isinstance(args[0].value, int):
            args = [Const((args[0].value,))]
        return self.apply(rule, [base, *args], kwargs, node)

    def call(self, callee, args, kwargs, node):
        from srcgrad.frontend import function as custom

        cls = custom.applied_class(callee)
        if cls is not None:  # `MyFn.apply(...)` of a custom Function
            return custom.trace_apply(self, cls, args, kwargs, node)
        if isinstance(callee, _NestedDef):
            return self.inline_nested(callee, args, kwargs, node)
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
            callee = inner.entry()
        if isinstance(callee, types.FunctionType):
            from srcgrad.frontend.parse import parse_function
            return self.inline(parse_function(callee), args, kwargs, node)
        if callee is math.fsum and len(args) == 1:  # fsum over a list: a plain sum
            return self.builtin(sum, args, kwargs, node)
        what = getattr(callee, "__qualname__", None) or getattr(callee, "__name__", repr(callee))
        module = getattr(callee, "__module__", None) or ""
        full = f"{module}.{what}" if module and module != "builtins" else what
        self.error(node, f"cannot differentiate the call to `{full}`: it has no derivative "
                   "rule and no Python source", "use a NumPy function srcgrad knows "
                   "(srcgrad.rules.table), or write the computation in Python")

    def builtin(self, fn, args, kwargs, node):
        static = all(isinstance(a, Const) for a in args) and all(
            isinstance(v, Const) for v in kwargs.values())
        if static:
            return Const(fn(*(a.value for a in args), **{k: v.value for k, v in kwargs.items()}))
        if fn is abs and len(args) == 1:
            return self.apply(rules.RULES["abs"], args, {}, node)
        if fn is len and len(args) == 1 and isinstance(args[0], Var):
            shape = self.apply(rules.RULES["shape"], args, {}, node)
            return self.apply(rules.RULES["getitem"], [shape, Const(0)], {}, node)
        if fn in (len, tuple, list) and len(args) == 1 and isinstance(args[0], (tuple, list)):
            return Const(len(args[0])) if fn is len else fn(args[0])
        if fn is sum and isinstance(args[0], (tuple, list)):
            total = args[1] if len(args) > 1 else Const(0)
            for item in args[0]:
                total = self.binop(gast.Add, total, item, node)
            return total
        if fn in (zip, enumerate) and all(isinstance(a, (tuple, list, Const)) for a in args):
            seqs = [list(a) if not isinstance(a, Const) else [Const(x) for x in a.value]
                    for a in args]
            if fn is enumerate:
                return [(Const(i), v) for i, v in enumerate(seqs[0])]
            return [tuple(items) for items in zip(*seqs)]
        self.fail(node, f"`{fn.__name__}()` of an array", "use the NumPy function instead")

    # ------------------------------------------------------------------ primitives
    def apply(self, rule, args, kwargs, node=None):
        """Bind a call to `rule`'s signature and emit its op (or fold it)."""
        sig = rule.py_signature
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as err:
            self.error(node, f"the call to `{rule.name}` does not fit its supported signature "
                       f"({err})", f"srcgrad supports `{rule.name}({rule.signature})`")
        bound.apply_defaults()
        operands = []
        for name, param in sig.parameters.items():
            value = bound.arguments[name]
            if param.kind is param.VAR_POSITIONAL:
                operands.append(Pack(tuple(to_operand(v) for v in value)))
            else:
                operands.append(to_operand(value if not isinstance(value, (int, float, str))
                                           and value is not None else Const(value)))
        if not any(True for o in operands for _ in operand_vars(o)):
            try:
                folded = Const(evaluate_static(rule, operands))
                if rule.name in VIEW_RULES:
                    self.mutation.note_view(rule.name, operands, folded)
                return folded
            except Exception as err:  # static arguments NumPy (or a rule) refuses: say where
                self.error(node, f"cannot compile this line: `{rule.name}` of its constant "
                           f"arguments fails ({type(err).__name__}: {err})")
        # `nout` sees static values, and sequence operands as tuples (their length is static).
        known = {n: o.value if isinstance(o, Const) else from_operand(o)
                 for n, o in zip(sig.parameters, operands) if not isinstance(o, Var)}
        nout = rule.nout if isinstance(rule.nout, int) else rule.nout(known)
        dynamic_kinds = {v.kind for o in operands for v in operand_vars(o)}
        kind = "static" if rule.static_out or rule.nondiff or dynamic_kinds == {"static"} else "array"
        outs = tuple(Var(self.namer.fresh("_" + rule.name), kind) for _ in range(nout))
        self.ops.append(Op(rule.name, tuple(operands), outs, self.loc))
        if nout == 1:
            self.mutation.note_array(rule.name, outs[0])
            if rule.name in VIEW_RULES:
                self.mutation.note_view(rule.name, operands, outs[0])
        return outs if callable(rule.nout) or nout != 1 else outs[0]

    # ------------------------------------------------------------------ user functions
    def inline(self, fs, args, kwargs, node):
        """Trace a user function's body in place, its parameters bound to the arguments."""
        import inspect

        from srcgrad.frontend.fence import fence

        self._check_depth(fs.name, node)
        fence(fs)
        try:
            bound = inspect.signature(fs.fn).bind(*args, **kwargs)
        except TypeError as err:
            self.error(node, f"bad call to `{fs.name}`: {err}")
        bound.apply_defaults()
        env = {}
        for name, value in bound.arguments.items():
            if isinstance(value, (tuple, list, dict, Var, Const, TraceObject)):
                env[name] = value
            else:
                env[name] = Const(value)
        return self._trace_call(fs.node.body, self._function_scope(fs, env))

    def inline_nested(self, nested, args, kwargs, node):
        """Call a nested def or lambda: its body traced in a scope inside its definer's."""
        self._check_depth(nested.name, node)
        try:
            bound = nested.signature.bind(*args, **kwargs)
        except TypeError as err:
            self.error(node, f"bad call to `{nested.name}`: {err}")
        bound.apply_defaults()
        env = {n: v if isinstance(v, (tuple, list, dict, Var, Const, TraceObject)) else Const(v)
               for n, v in bound.arguments.items()}
        outer = nested.scope
        scope = Scope(env, outer.lookup_free, outer.locate, outer=outer,
                      local_names=nested.local_names)
        return self._trace_call(nested.body, scope)

    def _check_depth(self, name, node):
        if self.depth >= MAX_INLINE_DEPTH:
            self.error(node, f"calls to `{name}` nest more than {MAX_INLINE_DEPTH} deep: "
                       "compiled code inlines every call, so recursion must end at a depth "
                       "known when compiling", "give the recursion a base case decided by "
                       "static values (an int argument, a shape, a list's length), not by "
                       "array values")

    def _trace_call(self, body, scope):
        saved = self.loc, self.locate
        self.depth += 1
        self.scopes.append(scope)
        try:
            return self.trace_body(body, scope)
        except RecursionError:
            self.error(None, "calls nest too deeply to compile (Python's recursion limit)",
                       "give the recursion a base case decided by static values")
        finally:
            self.scopes.pop()
            self.depth -= 1
            self.loc, self.locate = saved

    def _function_scope(self, fs, env):
        from srcgrad.frontend.fence import fence

        fence(fs)
        return Scope(env, lambda name: resolve(name, fs), fs.loc)

    def fail(self, node, what, hint=""):
        """CompileError: `what` is not supported, at `node` (or the current statement)."""
        self.error(node, f"{what} is not supported in compiled code", hint)

    def error(self, node, message, hint=""):
        loc = self.loc
        if node is not None and getattr(node, "lineno", None) and self.locate is not None:
            loc = self.locate(node)
        raise CompileError.at(loc, message, hint=hint)


class _NestedDef:
    """A `def` or lambda inside a compiled function: traced at each call, in a scope
    whose free names read the defining scope's bindings at call time (closures capture
    variables). Defaults are evaluated once, at the definition, as Python does."""

    def __init__(self, tracer, node, scope):
        import inspect

        self.node, self.scope = node, scope
        if isinstance(node, gast.Lambda):
            self.name = "<lambda>"
            self.body = [gast.Return(value=node.body)]
            gast.copy_location(self.body[0], node.body)
        else:
            self.name, self.body = node.name, node.body
        a = node.args
        P = inspect.Parameter
        positional = [(x, P.POSITIONAL_ONLY) for x in a.posonlyargs] + \
                     [(x, P.POSITIONAL_OR_KEYWORD) for x in a.args]
        defaults = [tracer.expr(d, scope) for d in a.defaults]
        first_default = len(positional) - len(defaults)
        params = []
        for i, (arg, kind) in enumerate(positional):
            default = defaults[i - first_default] if i >= first_default else P.empty
            params.append(P(arg.id, kind, default=default))
        if a.vararg is not None:
            params.append(P(a.vararg.id, P.VAR_POSITIONAL))
        for arg, d in zip(a.kwonlyargs, a.kw_defaults):
            params.append(P(arg.id, P.KEYWORD_ONLY,
                            default=P.empty if d is None else tracer.expr(d, scope)))
        if a.kwarg is not None:
            params.append(P(a.kwarg.id, P.VAR_KEYWORD))
        self.signature = inspect.Signature(params)
        self.local_names = frozenset(p.name for p in params) | _assigned_names(self.body)

    def __repr__(self):
        return f"<nested function {self.name}>"


def _assigned_names(body) -> frozenset:
    """Names a function body binds (its locals), not looking into nested scopes."""
    names, declared = set(), set()
    stack = list(body)
    while stack:
        n = stack.pop()
        if isinstance(n, gast.Nonlocal):
            declared.update(n.names)
            continue
        if isinstance(n, (gast.FunctionDef, gast.Lambda)):
            if isinstance(n, gast.FunctionDef):
                names.add(n.name)
            continue
        if isinstance(n, (gast.ListComp, gast.GeneratorExp, gast.DictComp, gast.SetComp)):
            continue
        if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store):
            names.add(n.id)
        stack.extend(gast.iter_child_nodes(n))
    return frozenset(names - declared)


def _formula_lookup(name):
    return rules.FORMULA_GLOBALS.get(name, getattr(builtins, name, MISSING))


def to_operand(value):
    """A tvalue as an op operand: containers of static values fold into one Const."""
    if isinstance(value, (Var, Const, Pack)):
        return value
    if isinstance(value, (tuple, list)):
        items = tuple(to_operand(v) for v in value)
        if all(isinstance(i, Const) for i in items):
            vals = tuple(i.value for i in items)
            return Const(vals if isinstance(value, tuple) else list(vals))
        return Pack(items, "tuple" if isinstance(value, tuple) else "list")
    if isinstance(value, dict):
        raise TypeError("a dict cannot be an operand")
    return Const(value)


def from_operand(operand):
    """The tvalue an operand stands for (a Pack becomes a native tuple)."""
    if isinstance(operand, Pack) and operand.style != "slice":
        items = tuple(from_operand(i) for i in operand.items)
        return items if operand.style == "tuple" else list(items)
    return operand


def evaluate_static(rule, operands):
    """Run a primitive on static operands at compile time."""
    env = dict(rules.FORMULA_GLOBALS)
    for name, operand in zip(rule.params, operands):
        env[name] = _static_value(operand)
    return eval(rule.render, env)  # noqa: S307 (a rule's own render text: trusted)


def _static_value(operand):
    if isinstance(operand, Const):
        return operand.value
    if isinstance(operand, Pack):
        items = tuple(_static_value(i) for i in operand.items)
        if operand.style == "slice":
            return slice(*items)
        return items if operand.style == "tuple" else list(items)
    raise TypeError(operand)


def _describe(node) -> str:
    try:
        import astor

        return astor.to_source(gast.gast_to_ast(node)).strip()
    except Exception:  # describing is best effort
        return type(node).__name__


