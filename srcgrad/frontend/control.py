"""Tracing control flow: `if`, `for`, `while`, early `return` → region ops.

Note [Tracing control flow]
~~~~~~~~~~~~~~~~~~~~~~~~~~~
A condition or trip count known at compile time is decided while tracing: the
taken branch is traced, a loop over a tuple or list is traced once per element.
Otherwise the construct becomes one op with nested blocks (Note [Regions]):

* `if c:` → `cond(c)` with a then-block and an else-block; each block's results
  are the values, at its end, of the names either branch assigns, and the op's
  outputs rebind those names.
* `for i in range(a, b, s):` (also `for row in x`, `enumerate(x)`, `zip(x, y)`)
  → `for_range(a, b, s, inits)`; names assigned in the body that exist before the
  loop are *carried*: block params bound at the top of each iteration, block
  results at its end, op outputs after the loop. No unrolling: code size and
  compile time do not grow with the trip count.
* `while c:` → `while_loop(c0, inits)`, the condition traced before the loop and
  again at the end of the body, so it is one more carried value (`:=` in the
  condition assigns like any statement).
* An `if` with a `return` in a branch takes the rest of the function into the
  branch that falls through, so both branches end in a return and the function's
  result is the `cond`'s outputs.
* `break` sets a flag of its own loop (`_break`, `_break1`, ... by depth among
  enclosing loops that break); what follows it in the body is dropped (an `if`
  holding it takes the rest of the body into its branches). The loop leaves at
  once: a `while` tests `not flag` with its condition, a `for_range` carries the
  flag and its op's attrs["until"] names the flag's param, which generated code
  tests after each iteration (`if _break_1: break`). So an iteration only starts
  with the flag False, and the body is traced with it bound to False, not read
  from the param; the adjoint loop runs as many iterations as the tape holds
  (Note [Reverse mode of control flow]). A `return` inside loops sets
  `_returned`/`_result` and breaks out of each loop in turn (`if _returned: break`
  after every inner loop), then `if _returned: return _result` follows the
  outermost one.
"""

from __future__ import annotations

import gast

from srcgrad.frontend.aliases import Undecided
from srcgrad.ir.core import Block, Const, Op, Pack, Var
from srcgrad.ir.tree import flatten, unflatten

RETURNED, RESULT = "_returned", "_result"


def _name(n, ctx):
    return gast.Name(id=n, ctx=ctx, annotation=None, type_comment=None)


def _assign(target, value, at):
    return gast.copy_location(gast.Assign(targets=[_name(target, gast.Store())], value=value,
                                          type_comment=None), at)


def _lower_loop_return(loop):
    """`for ...: ... return v ...` as
    `_returned = False; _result = None; for ...: ... _result = v; _returned = True; break`
    followed by `if _returned: return _result` (the rest of the function goes into the
    branch that falls through: Note [Tracing control flow]). A `return` in a loop
    nested inside leaves that loop by its `break`, and every enclosing loop by an
    `if _returned: break` after the loop it nests in."""
    import copy

    class Returns(gast.NodeTransformer):
        def visit_FunctionDef(self, node):
            return node  # a nested def's returns are its own

        def visit_Lambda(self, node):
            return node

        def visit_Return(self, node):
            value = node.value or gast.Constant(value=None, kind=None)
            return [_assign(RESULT, value, node),
                    _assign(RETURNED, gast.Constant(value=True, kind=None), node),
                    gast.copy_location(gast.Break(), node)]

        def visit_loop(self, node):
            if not contains_return(node.body):
                return node
            self.generic_visit(node)
            leave = gast.If(test=_name(RETURNED, gast.Load()),
                            body=[gast.copy_location(gast.Break(), node)], orelse=[])
            return [node, gast.copy_location(leave, node)]

        visit_For = visit_While = visit_loop

    new_loop = copy.copy(loop)
    new_loop.body = _flat([Returns().visit(copy.deepcopy(s)) for s in loop.body])
    done = gast.copy_location(gast.If(test=_name(RETURNED, gast.Load()),
                                      body=[gast.copy_location(gast.Return(value=_name(RESULT, gast.Load())),
                                                               loop)], orelse=[]), loop)
    return [_assign(RETURNED, gast.Constant(value=False, kind=None), loop),
            _assign(RESULT, gast.Constant(value=None, kind=None), loop), new_loop, done]


def _flat(stmts):
    return [s for b in stmts for s in (b if isinstance(b, list) else [b])]


def always_returns(stmts) -> bool:
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, gast.Return):
        return True
    return isinstance(last, gast.If) and always_returns(last.body) and always_returns(last.orelse)


def contains_return(stmts) -> bool:
    """Whether the statements return from the function (a nested def's returns are its own)."""
    def walk(node):
        if isinstance(node, gast.Return):
            return True
        if isinstance(node, (gast.FunctionDef, gast.Lambda)):
            return False
        return any(walk(child) for child in gast.iter_child_nodes(node))

    return any(walk(s) for s in stmts)


def assigned_names(stmts) -> list:
    """Names a statement list assigns, in order of first assignment."""
    names: dict = {}
    for s in stmts:
        for n in gast.walk(s):
            if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store):
                names.setdefault(n.id, None)
    return list(names)


def lower_jumps(stmts, flag="_break"):
    """(statements without `break`/`continue`, whether a `break` was removed).

    A jump ends its iteration: what follows it is dropped, and an `if` holding one
    takes the rest of the body into both of its branches (the branch that jumps
    drops it again). `break` also sets the loop's break flag `flag`, which the caller
    tests (Note [Tracing control flow]). Loops nested inside keep their own jumps.
    """
    found = []

    def lower(body):
        for i, stmt in enumerate(body):
            if isinstance(stmt, gast.Continue):
                return body[:i]
            if isinstance(stmt, gast.Break):
                found.append(stmt)
                return body[:i] + [_assign_flag(stmt, flag)]
            if isinstance(stmt, gast.If) and _jumps(stmt):
                rest = body[i + 1:]
                branch = gast.If(test=stmt.test, body=lower(stmt.body + rest) or [gast.Pass()],
                                 orelse=lower(stmt.orelse + rest))
                return body[:i] + [gast.copy_location(branch, stmt)]
        return body

    return lower(list(stmts)), bool(found)


SEQUENCE = "_sequence"  # hidden names of the arrays `for row in x` iterates over
BREAK_FLAG = "_break"  # a loop's flag: this name, then its depth among loops with one
ITEM = "_item"  # the element an unrolled loop binds its target to (trace_unrolled_for)


def _assign_flag(node, flag):
    return _assign(flag, gast.Constant(value=True, kind=None), node)


def _not_flag(node, flag):
    return gast.copy_location(gast.UnaryOp(op=gast.Not(), operand=_name(flag, gast.Load())), node)


def _jumps(stmt) -> bool:
    """Whether `stmt` holds a break/continue of the enclosing loop."""
    if isinstance(stmt, (gast.Break, gast.Continue)):
        return True
    if isinstance(stmt, (gast.For, gast.While, gast.FunctionDef)):
        return False
    return any(_jumps(child) for child in gast.iter_child_nodes(stmt) if isinstance(child, gast.stmt))


def _leaves(value):
    return flatten(value, is_leaf=lambda v: isinstance(v, (Var, Const)))


class ControlFlow:
    """Control-flow statements, mixed into the Tracer (srcgrad.frontend.trace)."""

    # ------------------------------------------------------------------ blocks
    def trace_block(self, stmts, scope, bindings=None, prologue=None, epilogue=None):
        """(ops, env after, returned value, epilogue value): `stmts` traced into a new
        op list, in a copy of the scope's env updated with `bindings`; `prologue(scope)`
        runs first and `epilogue(scope)` last, both inside the block."""
        saved_ops, saved_env = self.ops, scope.env
        self.ops, scope.env = [], {**saved_env, **(bindings or {})}
        try:
            if prologue is not None:
                prologue(scope)
            returned = self.trace_statements(stmts, scope)
            tail = epilogue(scope) if epilogue is not None and returned is None else None
            return self.ops, scope.env, returned, tail
        finally:
            self.ops, scope.env = saved_ops, saved_env

    def trace_statements(self, stmts, scope):
        """Trace statements; the value of a `return` reached, else None."""
        for i, stmt in enumerate(stmts):
            self.loc = scope.locate(stmt)
            if isinstance(stmt, gast.Return):
                return Const(None) if stmt.value is None else self.expr(stmt.value, scope)
            if isinstance(stmt, gast.If) and contains_return([stmt]):
                return self.if_with_return(stmt, stmts[i + 1:], scope)
            if isinstance(stmt, (gast.For, gast.While)) and contains_return(stmt.body):
                return self.trace_statements(_lower_loop_return(stmt) + list(stmts[i + 1:]), scope)
            self.stmt(stmt, scope)
        return None

    # ------------------------------------------------------------------ if
    def trace_if(self, node, scope):
        loc = self.loc
        test = self.expr(node.test, scope)
        if isinstance(test, Const):
            self.trace_statements(node.body if test.value else node.orelse, scope)
            return
        then_ops, then_env, _, _ = self.trace_block(node.body, scope)
        else_ops, else_env, _, _ = self.trace_block(node.orelse, scope)
        before = scope.env
        merged, same = {}, {}
        for name in dict.fromkeys(list(then_env) + list(else_env)):
            a, b = then_env.get(name), else_env.get(name)
            if a is None or b is None:
                continue  # defined in one branch only: not defined after the `if`
            if a is b:  # the same value either way (`y = x` in both): no merge, so an
                if a is not before.get(name):  # in-place write through `y` still reaches `x`
                    same[name] = a
                continue
            if isinstance(a, Undecided) or isinstance(b, Undecided):
                same[name] = a if isinstance(a, Undecided) else b  # reading it is the error
                continue
            merged[name] = (a, b)
        self.loc = loc
        values = self.merge_branches(node, test, then_ops, else_ops,
                                     [v[0] for v in merged.values()], [v[1] for v in merged.values()],
                                     list(merged))
        scope.env.update(zip(merged, values))
        scope.env.update(same)

    def trace_ifexp(self, node, test, scope):
        """`a if c else b` on a run-time condition: a `cond` computing one value."""
        then_ops, _, _, a = self.trace_block([], scope, epilogue=lambda s: self.expr(node.body, s))
        else_ops, _, _, b = self.trace_block([], scope, epilogue=lambda s: self.expr(node.orelse, s))
        if a is b and not then_ops and not else_ops:
            return a  # `x if c else x`
        (value,) = self.merge_branches(node, test, then_ops, else_ops, [a], [b], ["_ifexp"])
        return value

    def if_with_return(self, node, rest, scope):
        loc = self.loc
        test = self.expr(node.test, scope)
        then_stmts = node.body if always_returns(node.body) else node.body + rest
        else_stmts = node.orelse if always_returns(node.orelse) else node.orelse + rest
        if isinstance(test, Const):
            return self.trace_statements(then_stmts if test.value else else_stmts, scope)
        then_ops, _, then_value, _ = self.trace_block(then_stmts, scope)
        else_ops, _, else_value, _ = self.trace_block(else_stmts, scope)
        if then_value is None or else_value is None:
            self.fail(node, "a function that returns on some paths only",
                      "return a value at the end of the function")
        self.loc = loc
        (result,) = self.merge_branches(node, test, then_ops, else_ops, [then_value], [else_value],
                                        ["result"])
        return result

    def merge_branches(self, node, test, then_ops, else_ops, then_values, else_values, names):
        """Emit `cond`; returns the merged value per name (containers merged leafwise)."""
        then_leaves, else_leaves, trees, outs, leaves = [], [], [], [], []
        pairs: dict = {}  # (id then, id else) -> the output: names sharing storage on both
        # paths share it after the `if` too (a later write through one reaches the other)
        for name, a, b in zip(names, then_values, else_values):
            la, ta = _leaves(a)
            lb, tb = _leaves(b)
            if ta != tb:
                self.fail(node, f"`{name}` holding differently shaped containers in the two branches",
                          "give it the same structure on both paths (as many items, the same keys), "
                          "or keep its parts in separate names")
            trees.append((ta, len(la)))
            for x, y in zip(la, lb):
                if isinstance(x, Undecided) or isinstance(y, Undecided):
                    leaves.append(x if isinstance(x, Undecided) else y)  # reading it is the error
                    continue
                if (id(x), id(y)) in pairs:
                    leaves.append(pairs[id(x), id(y)])
                    continue
                then_leaves.append(x)
                else_leaves.append(y)
                outs.append(Var(self.namer.fresh(name), _kind(x, y)))
                leaves.append(outs[-1])
                pairs[id(x), id(y)] = outs[-1]
                self.mutation.note_merge(outs[-1], (x, y))
                self.note_maybe_none(outs[-1], x, y)
        self.ops.append(Op("cond", (test,), tuple(outs), self.loc,
                           blocks=(Block(then_ops, then_leaves), Block(else_ops, else_leaves))))
        merged, i = [], 0
        for tree, n in trees:
            merged.append(unflatten(tree, leaves[i:i + n]))
            i += n
        return merged

    # ------------------------------------------------------------------ loops
    def trace_for(self, node, scope):
        if node.orelse:
            self.fail(node, "`for ... else`", "use a flag variable")
        outer_sequences = {n for n in scope.env if n.startswith(SEQUENCE)}  # enclosing loops'
        plan = self.loop_plan(node, scope)
        if plan is None:  # a static sequence: one trace per element
            self.trace_unrolled_for(node, scope)
            return
        start, stop, step, per_index = plan
        body, flag = self._loop_body(node, scope)
        breaks = flag in scope.env

        def prologue(inner):
            if breaks:  # an iteration starts only while the flag is False
                inner.env[flag] = Const(False)
            self.bind(node.target, per_index(index, inner), inner)
        carried = [n for n in assigned_names(body) + _target_names(node.target)
                   if n in scope.env and n not in _target_names(node.target)]
        index = Var(self.namer.fresh(_index_name(node.target)), "static")
        kinds = [_kind(scope.env[n]) for n in carried]
        while True:  # until the carried names and kinds cover what the body does
            params = [Var(self.namer.fresh(n), k) for n, k in zip(carried, kinds)]
            self.mutation.note_loop_params(node, carried, params, scope.env)
            for name, param in zip(carried, params):
                self.note_maybe_none(param, scope.env[name])
            body_ops, env_after, _, _ = self.trace_block(body, scope, dict(zip(carried, params)),
                                                         prologue=prologue)
            if not (self._carry_more(carried, kinds, scope.env, env_after, _target_names(node.target))
                    or self._widen(kinds, carried, env_after)):
                break
        self.close_loop(node, scope, "for_range", (start, stop, step), carried, params, [index],
                        body_ops, env_after)
        if flag in carried:  # leave the loop at once after an iteration that breaks
            self.ops[-1].attrs["until"] = params[carried.index(flag)]
        scope.env.pop(flag, None)
        for name in [n for n in scope.env if n.startswith(SEQUENCE) and n not in outer_sequences]:
            scope.env.pop(name)  # its own only: an enclosing loop's rows still write through its own

    def trace_while(self, node, scope):
        if node.orelse:
            self.fail(node, "`while ... else`", "use a flag variable")
        body, flag = self._loop_body(node, scope)
        test_node = node.test
        breaks = flag in scope.env
        if breaks:  # `while not _break and test`
            test_node = gast.copy_location(gast.BoolOp(op=gast.And(), values=[_not_flag(node, flag),
                                                                               node.test]), node.test)

        def prologue(inner):
            if breaks:  # the test was False after an iteration that broke
                inner.env[flag] = Const(False)
        test = self.expr(test_node, scope)  # the first test, before the loop (`:=` binds here)
        carried = [n for n in assigned_names([node.test] + body) if n in scope.env]
        if isinstance(test, Const) and not test.value:
            return  # never entered
        kinds = [_kind(scope.env[n]) for n in carried]
        running = Var(self.namer.fresh("_running"), "static")
        while True:  # until the carried names and kinds cover what the body does
            params = [Var(self.namer.fresh(n), k) for n, k in zip(carried, kinds)]
            self.mutation.note_loop_params(node, carried, params, scope.env)
            for name, param in zip(carried, params):
                self.note_maybe_none(param, scope.env[name])
            body_ops, env_after, _, next_test = self.trace_block(
                body, scope, dict(zip(carried, params)), prologue=prologue,
                epilogue=lambda inner: self.expr(test_node, inner))
            if not (self._carry_more(carried, kinds, scope.env, env_after, ())
                    or self._widen(kinds, carried, env_after)):
                break
        self.close_loop(node, scope, "while_loop", (test,), carried, params, [], body_ops, env_after,
                        extra_param=running, extra_result=next_test)
        scope.env.pop(flag, None)

    @staticmethod
    def _carry_more(carried, kinds, before, after, targets) -> bool:
        """Carry every name of the enclosing code the body rebinds, also without an
        `=` on it (`y[i] = v` and writes through views rebind `y`: Note [Mutation at
        trace time]); True when one was added, so the body is traced again."""
        more = [n for n, v in before.items() if n in after and after[n] is not v
                and n not in carried and n not in targets and isinstance(v, (Var, Const))]
        carried.extend(more)
        kinds.extend(_kind(before[n]) for n in more)
        return bool(more)

    @staticmethod
    def _widen(kinds, carried, env_after) -> bool:
        """Make a carried value 'array' when the body makes it one (`h = np.zeros(n)`
        before a loop that sets `h = np.tanh(x @ W + h)`); True when one changed, so
        the body is traced again: activity analysis follows only 'array' values."""
        changed = False
        for i, name in enumerate(carried):
            if kinds[i] == "static" and _kind(env_after.get(name, Const(0))) == "array":
                kinds[i], changed = "array", True
        return changed

    def _loop_body(self, node, scope):
        """(the loop's body with break/continue lowered, its break flag's name); a
        `break` adds the flag, one per loop, so nested loops never share one. The
        loop leaves as soon as the flag is set (Note [Tracing control flow])."""
        depth = sum(1 for n in scope.env if n.startswith(BREAK_FLAG))
        flag = f"{BREAK_FLAG}{depth}" if depth else BREAK_FLAG
        body, breaks = lower_jumps(node.body, flag)
        if breaks:
            scope.env[flag] = Const(False)
        return body, flag

    def close_loop(self, node, scope, prim, args, carried, params, bound, body_ops, env_after,
                   extra_param=None, extra_result=None):
        self.loc = scope.locate(node)  # the loop statement's line, not its body's last
        inits, results = [], []
        for name, param in zip(carried, params):
            init, result = scope.env[name], env_after.get(name, param)
            for value in (init, result):
                if isinstance(value, Undecided):
                    self.mutation.check_decided(value, None)  # raises, with what it cannot decide
                if not isinstance(value, (Var, Const)):
                    self.fail(node, f"`{name}`, a tuple, list or dict, changing in a loop",
                              "keep arrays in separate variables, or write into a preallocated "
                              "array with x[i] = v")
            inits.append(init)
            results.append(result)
        block_params = bound + params
        if extra_param is not None:  # a while loop's test, carried like a variable
            block_params = [extra_param] + block_params
            results = [extra_result] + results
        outs = tuple(Var(self.namer.fresh(n), p.kind) for n, p in zip(carried, params))
        for init, out in zip(inits, outs):
            self.note_maybe_none(out, init)
        self.mutation.check_loop_containers(node, scope.env, env_after, carried)
        self.mutation.note_loop_outputs(prim, args, inits, params, results[-len(params):] if params
                                        else [], outs)
        self.ops.append(Op(prim, (*args, Pack(tuple(inits))), outs, self.loc,
                           blocks=(Block(body_ops, results, block_params),)))
        scope.env.update(zip(carried, outs))

    def note_maybe_none(self, out, *sources):
        """`out` may be None at run time when a source may (`x is None` stays a run-time
        test for it: Expander.may_be_none)."""
        if any(isinstance(s, Const) and s.value is None or self.may_be_none(s) for s in sources):
            if not hasattr(self, "maybe_none"):
                self.maybe_none = set()
            self.maybe_none.add(id(out))

    def trace_unrolled_for(self, node, scope):
        """A loop over a tuple, list, dict (or zip/enumerate of them): one trace of the
        body per element. `break`/`continue` are lowered as in other loops (lower_jumps):
        after a break that depends on data, each later element's body runs under
        `if not _break`, and the loop variable is bound inside that guard, so after the
        loop it holds the element that broke, as in Python."""
        items = self.static_items(node, scope)
        depth = sum(1 for n in scope.env if n.startswith(BREAK_FLAG))
        flag = f"{BREAK_FLAG}{depth}" if depth else BREAK_FLAG
        item = f"{ITEM}{sum(1 for n in scope.env if n.startswith(ITEM))}"
        lowered, breaks = lower_jumps(node.body, flag)
        bind = gast.copy_location(gast.Assign(targets=[node.target], value=_name(item, gast.Load()),
                                              type_comment=None), node.target)
        if breaks:
            scope.env[flag] = Const(False)
        for value in items:
            done = scope.env.get(flag)
            if not breaks or (isinstance(done, Const) and not done.value):
                self.bind(node.target, value, scope)  # no break taken so far: plain
                body = lowered
            elif isinstance(done, Const):
                break  # a break on static values: the rest never runs
            else:  # the element's body, the loop variable included, runs under the guard
                scope.env[item] = value
                body = [gast.copy_location(gast.If(test=_not_flag(node, flag), body=[bind] + lowered,
                                                   orelse=[]), node)]
            for stmt in body:
                self.loc = scope.locate(stmt)
                self.stmt(stmt, scope)
            scope.env.pop(item, None)
        if breaks:
            scope.env.pop(flag, None)

    def loop_plan(self, node, scope):
        """(start, stop, step, index -> loop-variable value) for an index loop, or None."""
        it = node.iter
        if isinstance(it, gast.Subscript) and _is_builtin_call(it.value, ("range",)):
            # `range(...)[::-1]`: an adjoint loop of srcgrad's own generated code
            self.fail(node, "differentiating a generated loop adjoint again (a second "
                      "derivative through a loop)", "unroll the loop (write its body once per "
                      "iteration) and take the second derivative of that loop-free code")
        if isinstance(it, gast.Call) and isinstance(it.func, gast.Name) and it.func.id == "range" \
                and not it.keywords:
            args = [self.expr(a, scope) for a in it.args]
            if len(args) == 1:
                args = [Const(0), args[0]]
            start, stop, step = (args + [Const(1)])[:3]
            if all(isinstance(a, Const) for a in (start, stop, step)) and _subscripts_containers(
                    node, scope):
                return None  # `for i in range(3): layers[i]`: the index must be static
            return start, stop, step, lambda i, inner: i
        value = self.expr(it, scope) if not _is_builtin_call(it, ("enumerate", "zip")) else None
        if isinstance(value, Var):  # rows of an array
            (name,) = self._sequences(scope, [value])
            return (Const(0), self._length(value), Const(1),
                    lambda i, inner: self._row(inner.env[name], i))
        if _is_builtin_call(it, ("enumerate",)) and len(it.args) == 1:
            seq = self.expr(it.args[0], scope)
            if isinstance(seq, Var):
                (name,) = self._sequences(scope, [seq])
                return (Const(0), self._length(seq), Const(1),
                        lambda i, inner: (i, self._row(inner.env[name], i)))
        if _is_builtin_call(it, ("zip",)):
            seqs = [self.expr(a, scope) for a in it.args]
            if any(isinstance(s, Var) for s in seqs) and all(isinstance(s, Var) for s in seqs):
                names = self._sequences(scope, seqs)
                return (Const(0), self._length(seqs[0]), Const(1),
                        lambda i, inner: tuple(self._row(inner.env[n], i) for n in names))
        return None

    @staticmethod
    def _sequences(scope, values) -> list:
        """Bind the arrays a loop iterates over to hidden names: a row is a view of the
        array *as the body sees it*, so a write through a row reaches it (Note [Aliases
        across blocks]); Python evaluates the iterable once, so it is not re-read."""
        names = []
        for value in values:
            name = f"{SEQUENCE}{sum(1 for n in scope.env if n.startswith(SEQUENCE))}"
            scope.env[name] = value
            names.append(name)
        return names

    def static_items(self, node, scope):
        value = self.expr(node.iter, scope)
        if isinstance(value, Const):
            try:
                return [Const(v) for v in value.value]
            except TypeError:
                self.fail(node.iter, "a loop over a value that is not iterable")
        if isinstance(value, dict):
            return [Const(k) for k in value]
        if isinstance(value, (tuple, list)):
            return list(value)
        self.fail(node.iter, "this loop's iterable", "loop over range(...), an array, or a list")

    def _length(self, array):
        from srcgrad import rules

        shape = self.apply(rules.RULES["shape"], [array], {})
        return self.apply(rules.RULES["getitem"], [shape, Const(0)], {})

    def _row(self, array, index):
        from srcgrad import rules

        return self.apply(rules.RULES["getitem"], [array, index], {})


def _kind(*values) -> str:
    """'array' when any value may carry a derivative: a float, or an array Var."""
    for v in values:
        if isinstance(v, Var) and v.kind == "array":
            return "array"
        if isinstance(v, Const) and isinstance(v.value, (float, complex)):
            return "array"
    return "static"


def _target_names(target) -> list:
    return [n.id for n in gast.walk(target) if isinstance(n, gast.Name)]


def _index_name(target) -> str:
    names = _target_names(target)
    return names[0] if len(names) == 1 and isinstance(target, gast.Name) else "_i"


def _is_builtin_call(node, names) -> bool:
    return isinstance(node, gast.Call) and isinstance(node.func, gast.Name) and node.func.id in names


def _subscripts_containers(node, scope) -> bool:
    """Whether the loop body subscripts a tuple/list/dict with the loop variable, or
    changes one (`lst.append(v)`): then a static range is traced per iteration."""
    names = set(_target_names(node.target))

    def container(n):
        return isinstance(n, gast.Name) and isinstance(scope.env.get(n.id), (tuple, list, dict))

    for n in gast.walk(gast.Module(body=node.body, type_ignores=[])):
        if isinstance(n, gast.Subscript) and container(n.value) and (
                isinstance(n.ctx, gast.Store)
                or any(isinstance(m, gast.Name) and m.id in names for m in gast.walk(n.slice))):
            return True
        if isinstance(n, gast.Call) and isinstance(n.func, gast.Attribute) and container(n.func.value):
            return True
    return False


