"""Rule applications and rule formulas as IR ops: the layer the tracer and the passes share.

Note [Formula expansion]
~~~~~~~~~~~~~~~~~~~~~~~~
An `Expander` appends ops to a list. `apply(rule, args, kwargs)` binds a call to a
row's signature and emits its op, or folds it when every operand is static.
`expand(formula, env, loc)` evaluates a derivative formula (the subset of Python in
Note [Formula constructs], srcgrad.rules.table) with its names bound to operands:
the VJP and JVP passes write their ops this way, and so does the one-op kernel
builder. The frontend's `Tracer` is an `Expander` that understands all of the
user-code surface (statements, scopes, user functions, containers, mutation); it
overrides the expression methods below where user code needs more, and the hooks
`note_fold`, `note_op` and `decided`, so this module knows nothing of the frontend.

Values during expansion are `Var` (dynamic), `Const` (static), or native tuples/
lists of them (a multi-output value, a sequence argument).
"""

from __future__ import annotations

import ast
import builtins
import inspect
import operator

import gast

from srcgrad import rules
from srcgrad.errors import CompileError
from srcgrad.ir.bind_targets import ORDERED, by_target_position, first_by_target_name, in_order
from srcgrad.ir.core import Const, Op, Pack, Var, operand_vars
from srcgrad.ir.gast_nodes import to_gast
from srcgrad.ir.renders import evaluate_static

MISSING = object()  # what a name lookup returns for an unbound name

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
PY_UNARYOPS = {gast.USub: operator.neg, gast.UAdd: operator.pos, gast.Not: operator.not_,
               gast.Invert: operator.invert}


class Namer:
    """Hands out unique identifiers, preferring the hint as given."""

    def __init__(self, taken=()):
        self.taken = set(taken)
        self.next_suffix: dict = {}  # base -> the first suffix not tried yet (linear, not quadratic)

    def fresh(self, hint: str) -> str:
        if hint.isascii() and hint.replace("_", "a").isalnum():  # (most hints: no char loop)
            base = hint
        else:
            base = "".join(c if c.isalnum() or c == "_" else "_" for c in hint) or "_v"
        if base[0].isdigit():
            base = "_" + base
        name, i = base, self.next_suffix.get(base, 1)
        if name in self.taken:
            name = f"{base}_{i}"
            while name in self.taken:
                i += 1
                name = f"{base}_{i}"
            self.next_suffix[base] = i + 1
        self.taken.add(name)
        return name


class FormulaScope:
    """A formula's names: its bound operands, then the formula globals and builtins."""

    def __init__(self, env: dict):
        self.env = env

    @staticmethod
    def free(name):
        return rules.FORMULA_GLOBALS.get(name, getattr(builtins, name, MISSING))


_FORMULAS: dict = {}  # formula text -> parsed gast expression


def parse_formula(text: str):
    node = _FORMULAS.get(text)
    if node is None:
        node = _FORMULAS[text] = to_gast(ast.parse(text, mode="eval").body)
    return node


_PLAIN: dict = {}  # a signature's text -> ((name, default), ...) or None (not plain)


def _bound_plainly(text: str, sig, args, kwargs) -> list | None:
    """The values `sig.bind(*args, **kwargs)` and `apply_defaults` give each parameter, in
    order, where every parameter is positional-or-keyword and the call fits; else None
    (inspect binds it, and says what does not fit). inspect's bind was a fifth of
    expanding a formula (issue 15)."""
    params = _PLAIN.get(text, False)
    if params is False:
        params = _PLAIN[text] = tuple((p.name, p.default) for p in sig.parameters.values()) \
            if all(p.kind is p.POSITIONAL_OR_KEYWORD for p in sig.parameters.values()) else None
    if params is None or len(args) > len(params):
        return None
    rest = params[len(args):]
    if kwargs and not kwargs.keys() <= {name for name, _ in rest}:
        return None  # an unknown keyword, or a parameter given twice
    values = list(args)
    for name, default in rest:
        value = kwargs.get(name, default)
        if value is inspect.Parameter.empty:
            return None  # a parameter missing
        values.append(value)
    return values


class Expander:
    def __init__(self, namer: Namer, ops: list | None = None):
        self.namer = namer
        self.ops = [] if ops is None else ops
        self.loc = None  # Loc of the statement (or differentiated op) being expanded
        self.locate = None  # gast node -> Loc, when expanding a parsed user function

    # ------------------------------------------------------------------ entry points
    def expand(self, formula, env: dict, loc):
        """A rule formula (text or parsed expression) with its names bound to operands."""
        node = parse_formula(formula) if isinstance(formula, str) else formula
        saved = self.loc, self.locate
        self.loc, self.locate = loc, None
        try:
            return self.expr(node, FormulaScope(dict(env)))
        finally:
            self.loc, self.locate = saved

    def apply(self, rule, args, kwargs, node=None):
        """Bind a call to `rule`'s signature and emit its op (or fold it)."""
        sig = rule.py_signature
        if rule.name in ORDERED and ("order" in kwargs or len(args) > ORDERED[rule.name]):
            return in_order(self, rule, args, kwargs, node)
        if len(args) > 1:
            args, kwargs = by_target_position(rule, sig, args, kwargs) or (args, kwargs)
        values = _bound_plainly(rule.signature, sig, args, kwargs)
        if values is None:
            try:
                bound = sig.bind(*args, **first_by_target_name(rule, sig, kwargs))
            except TypeError as err:
                self.error(node, f"the call to `{rule.name}` does not fit its supported signature "
                           f"({err})", f"srcgrad supports `{rule.name}({rule.signature})`")
            bound.apply_defaults()
            values = [bound.arguments[name] for name in sig.parameters]
        operands = []
        for param, value in zip(sig.parameters.values(), values):
            if param.kind is param.VAR_POSITIONAL:
                operands.append(Pack(tuple(to_operand(v) for v in value)))
            else:
                operands.append(to_operand(value if not isinstance(value, (int, float, str))
                                           and value is not None else Const(value)))
        if not rule.io and not any(True for o in operands for _ in operand_vars(o)):
            try:
                folded = Const(evaluate_static(rule, operands))
            except Exception as err:  # static arguments NumPy (or a rule) refuses: say where
                self.error(node, f"cannot compile this line: `{rule.name}` of its constant "
                           f"arguments fails ({type(err).__name__}: {err})")
            self.note_fold(rule, operands, folded)
            return folded
        # `nout` sees static values, and sequence operands as tuples (their length is static).
        known = {n: o.value if isinstance(o, Const) else from_operand(o)
                 for n, o in zip(sig.parameters, operands) if not isinstance(o, Var)}
        nout = rule.nout if isinstance(rule.nout, int) else rule.nout(known)
        dynamic_kinds = {v.kind for o in operands for v in operand_vars(o)}
        kind = "static" if rule.static_out or rule.nondiff or dynamic_kinds == {"static"} else "array"
        outs = tuple(Var(self.namer.fresh("_" + rule.name), kind) for _ in range(nout))
        self.ops.append(Op(rule.name, tuple(operands), outs, self.loc))
        self.note_op(rule, operands, outs)
        return outs if callable(rule.nout) or nout != 1 else outs[0]

    # ------------------------------------------------------------------ hooks
    def note_fold(self, rule, operands, folded) -> None:
        """Called after `rule` folded to the Const `folded` (the tracer tracks views)."""

    def note_op(self, rule, operands, outs) -> None:
        """Called after the op of `rule` was emitted (the tracer tracks arrays and views)."""

    def decided(self, value, node):
        """`value` as read by an expression (the tracer refuses undecided mutations)."""
        return value

    # ------------------------------------------------------------------ expressions
    def expr(self, node, scope):
        method = getattr(self, "expr_" + type(node).__name__, None)
        if method is None:
            self.fail(node, f"the expression `{type(node).__name__}`",
                      "format text outside the compiled function: compiled code computes "
                      "numbers and arrays" if isinstance(node, gast.JoinedStr) else
                      "see the README's list of what compiled functions may contain")
        return method(node, scope)

    def expr_Constant(self, node, scope):
        return Const(node.value)

    def expr_Name(self, node, scope):
        if node.id in scope.env:
            return scope.env[node.id]
        value = scope.free(node.id)
        if value is MISSING:
            self.error(node, f"name `{node.id}` is not defined")
        return Const(value)

    def expr_Tuple(self, node, scope):
        return tuple(self.elements(node.elts, scope))

    def expr_List(self, node, scope):
        return list(self.elements(node.elts, scope))

    def elements(self, elts, scope):
        """The values of `elts` (a `*` element gives its items), evaluated in order (Note
        [Operands evaluated in order])."""
        return _unstarred(elts, self.in_order([self.element(e) for e in elts], scope))

    def element(self, e):
        return (self.starred if isinstance(e, gast.Starred) else self.expr), e

    def starred(self, e, scope):
        inner = self.star_items(self.expr(e.value, scope), e)
        if isinstance(inner, Const):
            inner = [Const(v) for v in inner.value]
        if not isinstance(inner, (tuple, list)):
            self.fail(e, "unpacking an array with `*`",
                      "index its rows instead (`x[0], x[1]` for `*x`), or use the array whole")
        return inner

    def star_items(self, value, node):
        """`*value`'s items where the tracer knows them (an array's rows), else `value`."""
        return value

    def in_order(self, parts, scope):
        """Note [Operands evaluated in order]
        ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
        Python evaluates an expression's operands left to right, each to an object, and
        an array object sees a write into it made while a later operand is evaluated:
        `np.add(x, f(x))` adds x as f left it, when f writes into its argument (fuzz
        seed 703573). An operand is a value here, not an object, so one evaluated before
        a later operand that calls a function is held (`hold`: the Tracer keeps it under
        a hidden name, which a write rebinds as it rebinds every name) and read back
        once all are evaluated. `parts`: (evaluate, node) pairs."""
        if type(self).hold is Expander.hold and type(self).release is Expander.release:
            # nothing is ever held (the passes expanding formulas): no part's subtree is
            # walked to ask whether it calls, a tenth of expanding a formula (issue 15)
            return [evaluate(node, scope) for evaluate, node in parts]
        held = [False] * len(parts)  # whether a later part may call: each subtree walked once
        for i in range(len(parts) - 1, 0, -1):
            held[i - 1] = held[i] or may_call(parts[i][1])
        values = [self.hold(evaluate(node, scope), scope) if hold else evaluate(node, scope)
                  for (evaluate, node), hold in zip(parts, held)]
        return [self.release(value, scope) if hold else value for value, hold in zip(values, held)]

    def expr_BinOp(self, node, scope):
        left, right = self.in_order([(self.expr, node.left), (self.expr, node.right)], scope)
        return self.binop(type(node.op), left, right, node)

    def binop(self, optype, left, right, node=None):
        if isinstance(left, Const) and isinstance(right, Const):
            return Const(PY_BINOPS[optype](left.value, right.value))
        name = BINOPS.get(optype)
        if name is None or name not in rules.RULES:
            self.fail(node, f"the operator `{optype.__name__}` on arrays")
        return self.apply(rules.RULES[name], [left, right], {})

    def expr_UnaryOp(self, node, scope):
        operand = self.expr(node.operand, scope)
        if isinstance(operand, Const):
            return Const(PY_UNARYOPS[type(node.op)](operand.value))
        if isinstance(node.op, gast.Not):  # a condition's truth value
            return self.apply(rules.RULES["logical_not"], [operand], {})
        return self.apply(rules.RULES[UNARYOPS[type(node.op)]], [operand], {})

    def expr_Compare(self, node, scope):
        left, *rights = self.in_order([(self.expr, n) for n in (node.left, *node.comparators)],
                                      scope)
        result = None
        for op, right in zip(node.ops, rights):
            if isinstance(left, Const) and isinstance(right, Const):
                part = Const(PY_CMPOPS[type(op)](left.value, right.value))
            elif type(op) in (gast.Is, gast.IsNot) and (isinstance(left, Const) or isinstance(right, Const)):
                value = left if isinstance(right, Const) else right
                if self.may_be_none(value):  # a parameter (`flag=None`), or None on some path
                    part = self.apply(rules.RULES["is_" if type(op) is gast.Is else "is_not"],
                                      [left, right], {})
                else:  # an op's result is never None: `x is None` is static
                    part = Const(type(op) is gast.IsNot)
            elif type(op) in CMPOPS:
                part = self.apply(rules.RULES[CMPOPS[type(op)]], [left, right], {})
            else:
                self.fail(node, f"the comparison `{type(op).__name__}` on arrays")
            result = part if result is None else self._and(result, part)
            left = right
        return result

    def may_be_none(self, value) -> bool:
        """Whether a Var may hold None at run time: a parameter, or a value that is
        None on some path through a branch or loop (`maybe_none`, kept by the tracer)."""
        mutation = getattr(self, "mutation", None)
        inputs = mutation.inputs if mutation is not None else ()
        return isinstance(value, Var) and (any(value is v for v in inputs)
                                           or id(value) in getattr(self, "maybe_none", ()))

    def _and(self, a, b):
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
        return self.dynamic_ifexp(node, test, scope)

    def dynamic_ifexp(self, node, test, scope):
        self.fail(node, "a conditional expression on array values in a formula")

    def expr_Attribute(self, node, scope):
        base = self.expr(node.value, scope)
        if isinstance(base, Const):
            try:
                return Const(getattr(base.value, node.attr))
            except AttributeError:
                self.error(node, f"`{describe(node)}` does not exist")
        if isinstance(base, Var):
            rule = rules.lookup_attribute(node.attr)
            if rule is None:
                self.fail(node, f"the array attribute `.{node.attr}`")
            return self.apply(rule, [base], {})
        return self.dynamic_attribute(base, node)

    def dynamic_attribute(self, base, node):
        self.fail(node, f"the attribute `.{node.attr}` of a tuple, list or dict")

    def expr_Subscript(self, node, scope):
        base, index = self.in_order([(self.expr, node.value), (self.index, node.slice)], scope)
        if isinstance(base, (tuple, list, dict)):
            if not isinstance(index, Const):
                self.fail(node, "indexing a tuple, list or dict with a dynamic index",
                          "stack the items into one array and index that: `np.stack(items)[i]`")
            try:
                picked = base[index.value]
            except (IndexError, KeyError, TypeError) as err:
                self.error(node, f"cannot evaluate `{describe(node)}`: {err}")
            if isinstance(index.value, slice):
                return type(base)(picked)
            return self.decided(picked, node)
        if isinstance(base, Const) and isinstance(index, Const):
            try:
                return Const(base.value[index.value])
            except Exception as err:  # the user's lookup raised (`TABLE["b"]`): a `try` may
                err._srcgrad_static = True  # handle it (Note [try in compiled code])
                raise
        if isinstance(base, Const) and not isinstance(base.value, _INDEXABLE) and not \
                isinstance(base.value, (numpy_namespace().ndarray, numpy_namespace().generic)):
            return self.subscript_object(base.value, index, node)
        return self.apply(rules.RULES["getitem"], [base, index], {})

    def subscript_object(self, obj, index, node):
        """`obj[index]` of a constant object (not an array or a plain container) with a
        traced index: its __getitem__ would run on the traced value at run time, where no
        derivative reaches through it (Note [No silent constants] in passes.activity)."""
        self.fail(node, f"indexing the object `{type(obj).__name__}` with a traced value")

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
        func = node.func
        # Python evaluates `base.method`, then the arguments, which may write into arrays
        # (Note [Operands evaluated in order]): `(v > 3.0).dot(f(v))` reads v before f
        # writes it, `v.dot(f(v))` after (fuzz seed 602080)
        method = isinstance(func, gast.Attribute)
        receiver = [(self.expr, func.value)] if method else []
        values = self.in_order(receiver + [self.element(e) for e in node.args]
                               + [(self.expr, kw.value) for kw in node.keywords], scope)
        base = values[0] if method else None
        args = _unstarred(node.args, values[method:method + len(node.args)])
        kwargs = {}
        for kw, value in zip(node.keywords, values[method + len(node.args):]):
            if kw.arg is None:
                if not isinstance(value, dict):
                    self.fail(node, "`**` of a value that is not a dict")
                kwargs.update(value)
            else:
                kwargs[kw.arg] = value
        if isinstance(func, gast.Attribute):
            if not isinstance(base, Const) or (isinstance(base.value, numpy_namespace().ndarray)
                                               and rules.lookup_method(func.attr) is not None):
                # (a constant array's method too: its rule folds it, or applies it to the
                # other operands; NumPy's bound method has no rule of its own)
                return self.call_method(base, func.attr, args, kwargs, node)
            try:
                callee = getattr(base.value, func.attr)
            except AttributeError:
                self.error(node, f"`{describe(func)}` does not exist")
        else:
            callee_value = self.expr(func, scope)
            if not isinstance(callee_value, Const):
                return self.call_value(callee_value, args, kwargs, node)
            callee = callee_value.value
        return self.call(callee, args, kwargs, node)

    def hold(self, value, scope):
        """Keep `value` while the rest of a call is evaluated; `release` gives it back as
        it is then (the Tracer: an array the arguments wrote into, as it reads after)."""
        return value

    def release(self, held, scope):
        return held

    def call_value(self, value, args, kwargs, node):
        """`value(...)` for a value that is not a static callable."""
        self.fail(node, "calling a value that is not a function")

    def call_method(self, base, name, args, kwargs, node):
        """`base.name(...)` for a dynamic `base`."""
        if not isinstance(base, (Var, Const)):
            self.fail(node, f"the method `.{name}()` of a tuple, list or dict")
        rule = rules.lookup_method(name)
        if rule is None:
            self.fail(node, f"the array method `.{name}()`",
                      f"call the NumPy function instead, e.g. `np.{name}(x)`"
                      if rules.lookup_callable(getattr(numpy_namespace(), name, None)) else "")
        if rule.method_varargs and (len(args) > 1 or (len(args) == 1 and self.is_array_operand(args[0]))):
            args = [tuple(args)]
        elif rule.method_varargs and len(args) == 1 and isinstance(args[0], Const) \
                and isinstance(args[0].value, int):
            args = [Const((args[0].value,))]
        return self.apply(rule, [base, *args], kwargs, node)

    def is_array_operand(self, value) -> bool:
        """Whether a lone `x.reshape(v)` argument is one array dimension (not a shape)."""
        return isinstance(value, Var)

    def call(self, callee, args, kwargs, node):
        rule = rules.lookup_callable(callee)
        if rule is None:
            self.no_rule(callee, node)
        return self.apply(rule, args, kwargs, node)

    def no_rule(self, callee, node):
        what = getattr(callee, "__qualname__", None) or getattr(callee, "__name__", repr(callee))
        module = getattr(callee, "__module__", None) or ""
        full = f"{module}.{what}" if module and module != "builtins" else what
        self.error(node, f"cannot differentiate the call to `{full}`: it has no derivative "
                   "rule and no Python source", "use a NumPy function srcgrad knows "
                   "(srcgrad.rules.table), or write the computation in Python")

    # ------------------------------------------------------------------ errors
    def fail(self, node, what, hint=""):
        """CompileError: `what` is not supported, at `node` (or the current statement)."""
        self.error(node, f"{what} is not supported in compiled code", hint)

    def error(self, node, message, hint=""):
        loc = self.loc
        if node is not None and getattr(node, "lineno", None) and self.locate is not None:
            loc = self.locate(node)
        raise CompileError.at(loc, message, hint=hint)


# Constants indexed by a traced value as arrays are (`C[i]`: a `getitem` row).
_INDEXABLE = (list, tuple, str, bytes, dict, range)


def numpy_namespace():
    return rules.FORMULA_GLOBALS["xp"]


def to_operand(value):
    """A value as an op operand: containers of static values fold into one Const."""
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
    """The value an operand stands for (a Pack becomes a native tuple)."""
    if isinstance(operand, Pack) and operand.style != "slice":
        items = tuple(from_operand(i) for i in operand.items)
        return items if operand.style == "tuple" else list(items)
    return operand


def _unstarred(elts, values) -> list:
    """`values` of `elts` with the items of each `*` element in its place."""
    return [v for e, value in zip(elts, values)
            for v in (value if isinstance(e, gast.Starred) else (value,))]


def may_call(node) -> bool:
    """Whether evaluating `node` may call a function (which may write into arrays)."""
    return any(isinstance(n, (gast.Call, gast.NamedExpr)) for n in gast.walk(node))


def describe(node) -> str:
    """A gast node as source text, for messages."""
    try:
        import astor

        return astor.to_source(gast.gast_to_ast(node)).strip()
    except Exception:  # describing is best effort
        return type(node).__name__
