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

from srcgrad.frontend.scope import Undecided, mixed_in
from srcgrad.ir.core import Block, Const, Op, Var
from srcgrad.ir.tree import unflatten

IFEXP = "_ifexp"  # the value of a conditional expression, merged beside the names

RETURNED, RESULT = "_returned", "_result"


def _lower_loop_return(loop):
    """`for ...: ... return v ...` as
    `_returned = False; for ...: ... _result = v; _returned = True; break`
    followed by `if _returned: return _result` (the rest of the function goes into the
    branch that falls through: Note [Tracing control flow]). A `return` in a loop
    nested inside leaves that loop by its `break`, and every enclosing loop by an
    `if _returned: break` after the loop it nests in. The caller binds `_result` to
    Unset first (Note [Results of returns inside loops])."""
    import copy

    from srcgrad.frontend.loops import _assign, _name  # (loops only: issue 15)

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
    return [_assign(RETURNED, gast.Constant(value=False, kind=None), loop), new_loop, done]


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



def _changed(before, then_env, else_env):
    """What an `if` does to the names of `before` (an env, bound again after it) whose
    branches end with `then_env`/`else_env`: ([(env, name, then value, else value)] to
    merge, [(env, name, value)] to bind as it is)."""
    merged, same = [], []
    for name in dict.fromkeys(list(then_env) + list(else_env)):
        a_, b_ = then_env.get(name), else_env.get(name)
        if a_ is None or b_ is None:
            continue  # defined in one branch only: not defined after the `if`
        if a_ is b_:  # the same value either way (`y = x` in both): no merge, so an
            if a_ is not before.get(name):  # in-place write through `y` still reaches `x`
                same.append((before, name, a_))
            continue
        if isinstance(a_, Undecided) or isinstance(b_, Undecided):
            same.append((before, name, a_ if isinstance(a_, Undecided) else b_))  # reading it
            continue  # is the error
        merged.append((before, name, a_, b_))
    return merged, same


def _outside(then_out, else_out):
    """_changed for the scopes outside an `if`'s branches (Note [Writes by callees
    inside blocks]): trace_branch's (env before, env at the end) per scope."""
    merged, same = [], []
    for (before, then_env), (_, else_env) in zip(then_out, else_out):
        more, more_same = _changed(before, then_env, else_env)
        merged += more
        same += more_same
    return merged, same


def _bind(bindings):
    for env, name, value in bindings:
        env[name] = value


class ControlFlow:
    """Control-flow statements, mixed into the Tracer (srcgrad.frontend.trace); the loops'
    (srcgrad.frontend.loops.Loops) are mixed in at the first use (Note [Mixins imported
    on demand] in srcgrad.frontend.scope)."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        from srcgrad.frontend.loops import Loops  # (loops only, not on a straight-line compile: issue 15)
        return mixed_in(self, name, Loops)

    # ------------------------------------------------------------------ blocks
    def trace_block(self, stmts, scope, bindings=None, prologue=None, epilogue=None):
        """(ops, env after, returned value, epilogue value): `stmts` traced into a new
        op list, in a copy of the scope's env updated with `bindings`; `prologue(scope)`
        runs first and `epilogue(scope)` last, both inside the block."""
        from srcgrad.frontend import containers  # (blocks only: issue 15)

        saved_ops, saved_env = self.ops, scope.env
        self.ops, scope.env = [], {**saved_env, **(bindings or {})}
        containers.enter_block(self)  # Note [Containers changed inside blocks]
        try:
            if prologue is not None:
                prologue(scope)
            returned = self.trace_statements(stmts, scope)
            tail = epilogue(scope) if epilogue is not None and returned is None else None
            return self.ops, scope.env, returned, tail
        finally:
            containers.leave_block(self)
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
                from srcgrad.frontend.results import Unset  # (loops only: issue 15)
                scope.env[RESULT] = Unset()  # Note [Results of returns inside loops]
                return self.trace_statements(_lower_loop_return(stmt) + list(stmts[i + 1:]), scope)
            later = self.__dict__.setdefault("later_statements", [])
            later.append((stmts, i + 1))  # what may read a loop's names: Note [Names a loop binds]
            try:
                self.stmt(stmt, scope)
            finally:
                later.pop()
        return None

    # ------------------------------------------------------------------ if
    def trace_if(self, node, scope):
        test = self.expr(node.test, scope)
        if isinstance(test, Const):
            self.trace_statements(node.body if test.value else node.orelse, scope)
            return
        self.branches(node, test, scope, node.body, node.orelse)

    def trace_ifexp(self, node, test, scope):
        """`a if c else b` on a run-time condition: a `cond` computing one value; what
        a call in a branch writes is merged as an `if` statement's writes are."""
        return self.branches(node, test, scope, [], [], lambda s: self.expr(node.body, s),
                             lambda s: self.expr(node.orelse, s))

    def branches(self, node, test, scope, then_stmts, else_stmts, then_value=None,
                 else_value=None):
        """Both branches of a run-time `if`, merged: every name they rebind (also through
        writes in place) is bound to its merged value. `then_value`/`else_value` (scope ->
        value, traced last in each branch): the value of a conditional expression, merged
        too and returned."""
        loc = self.loc
        then_ops, then_env, _, a, then_out = self.trace_branch(then_stmts, scope, epilogue=then_value)
        else_ops, else_env, _, b, else_out = self.trace_branch(else_stmts, scope, epilogue=else_value)
        merged, same = _changed(scope.env, then_env, else_env)
        more, more_same = _outside(then_out, else_out)  # Note [Writes by callees inside blocks]
        merged, same = merged + more, same + more_same
        expression = then_value is not None
        if expression and a is b and not then_ops and not else_ops and not merged:
            _bind(same)
            return a  # `x if c else x`
        if expression:
            merged.append((None, IFEXP, a, b))
        self.loc = loc
        values = self.merge_branches(node, test, then_ops, else_ops, [m[2] for m in merged],
                                     [m[3] for m in merged], [m[1] for m in merged])
        shared: dict = {}  # names bound to one container on both paths share it after the `if`
        for i, (_, _, a_, b_) in enumerate(merged):  # too (a later `L.append` reaches `M`)
            if isinstance(a_, (list, dict)):
                values[i] = shared.setdefault((id(a_), id(b_)), values[i])
        value = values.pop() if expression else None
        _bind([(env, name, v) for (env, name, _, _), v in zip(merged, values) if env is not None])
        _bind(same)
        return value

    def if_with_return(self, node, rest, scope):
        loc = self.loc
        test = self.expr(node.test, scope)
        then_stmts = node.body if always_returns(node.body) else node.body + rest
        else_stmts = node.orelse if always_returns(node.orelse) else node.orelse + rest
        if isinstance(test, Const):
            return self.trace_statements(then_stmts if test.value else else_stmts, scope)
        then_ops, _, then_value, _, then_out = self.trace_branch(then_stmts, scope)
        else_ops, _, else_value, _, else_out = self.trace_branch(else_stmts, scope)
        if then_value is None or else_value is None:
            self.fail(node, "a function that returns on some paths only",
                      "return a value at the end of the function")
        merged, same = _outside(then_out, else_out)  # the callers' names (Note [Writes by
        merged.insert(0, (None, "result", then_value, else_value))  # callees inside blocks])
        self.loc = loc
        values = self.merge_branches(node, test, then_ops, else_ops, [m[2] for m in merged],
                                     [m[3] for m in merged], [m[1] for m in merged])
        _bind([(env, name, v) for (env, name, _, _), v in zip(merged[1:], values[1:])])
        _bind(same)
        return values[0]

    def merge_branches(self, node, test, then_ops, else_ops, then_values, else_values, names):
        """Emit `cond`; returns the merged value per name (containers merged leafwise)."""
        from srcgrad.frontend import containers  # (these three: branches only, issue 15)
        from srcgrad.frontend.loops import _kind, _leaves
        from srcgrad.frontend.results import given_structure

        then_leaves, else_leaves, trees, outs, leaves = [], [], [], [], []
        pairs: dict = {}  # (id then, id else) -> the output: names sharing storage on both
        # paths share it after the `if` too (a later write through one reaches the other)
        for name, a, b in zip(names, then_values, else_values):
            a, b = given_structure(a, b)  # Note [Results of returns inside loops]
            la, ta = _leaves(a)
            lb, tb = _leaves(b)
            if ta != tb:
                self.refuse_structure(node, name, (a, b), "between the branches of the `if` at line "
                                      f"{self.loc.line}")
            trees.append((ta, len(la), a, b))
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
        self.mutation.note_merged_views(then_leaves, else_leaves, outs)  # (aliases.py)
        self.ops.append(Op("cond", (test,), tuple(outs), self.loc,
                           blocks=(Block(then_ops, then_leaves), Block(else_ops, else_leaves))))
        merged, i = [], 0
        for tree, n, a, b in trees:  # Note [Containers merged across paths]
            merged.append(containers.merged(self, unflatten(tree, leaves[i:i + n]), [a, b], self.loc))
            i += n
        return merged

    def refuse_structure(self, node, name, values, where, loop=None):
        """`name` holds containers of different structures on two paths (`where`): the
        line of the change is named when a block changed one (`.append` in one branch);
        `loop`: the line of the loop whose iterations would change it."""
        from srcgrad.frontend import containers  # (blocks only: issue 15)

        locs = [loc for loc in map(lambda v: containers.structure_change(self, v), values) if loc]
        if locs and loop is not None and name.startswith("_tape"):  # (vjp_control's tape)
            # generated code of a loop's derivative read back as source: a gradient's own is
            # read through its IR (Note [Transforms of loop gradients]), sg.vmap's is not
            self.loc = locs[0]
            self.error(None, "srcgrad's generated code of a loop's derivative cannot be traced "
                       "again (its loop keeps a tape): a transform of sg.vmap(sg.grad(f)), or "
                       "of sg.vmap of a jacobian or hessian, of a function with a loop is not "
                       "supported yet",
                       "transform first and map last (sg.vmap(sg.hessian(f)), "
                       "sg.vmap(sg.jacobian(f)) are supported), or write the loop out")
        if locs and loop is not None:
            self.loc = locs[0]
            self.error(None, f"the length or keys of `{name}` would depend on array values: this "
                       f"line changes them in every iteration of the loop at line {loop}",
                       "preallocate an array and write into it (`y = np.zeros(n)`, then `y[i] = v` "
                       "in the loop), or loop over a literal `range(3)`, which is traced once per "
                       "iteration")
        if locs:
            self.loc = locs[0]
            self.error(None, f"the length or keys of `{name}` would depend on array values: this "
                       f"line changes them, and `{name}` differs {where}",
                       "change it the same way on every path (append on both branches, e.g. "
                       "`np.where(c, v, 0.0)`), or write into a preallocated array")
        self.fail(node, f"`{name}` holding differently shaped containers {where}",
                  "give it the same structure on both paths (as many items, the same keys), "
                  "or keep its parts in separate names")
