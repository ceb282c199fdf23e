"""Tracing loops: `for` over a range, an array's rows, enumerate/zip of them, or a
static sequence; `while`; and `break`/`continue` lowered to flags (Note [Tracing
control flow] in srcgrad.frontend.control).

Note [Containers carried by loops]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A carried name may hold a tuple, list or dict (`pair = (pair[1], pair[0] * 2)`,
`L = [...]` rebuilt in the body, `L[0] = v` on a list from before the loop:
srcgrad.frontend.containers). The loop carries it leafwise, as a `cond` merges
containers: one block param per leaf, bound in the body as a container of the same
structure, one result and one op output per leaf, constants the body leaves alone
(a string, None, a function) staying constants. Its structure is static, so it must
be the same before the loop and at the end of every iteration; otherwise the loop is
refused, naming the line that changed it (`L.append(v)` in a loop over an array's
rows: the length would depend on the trip count; a literal `range(3)` is traced per
iteration instead). Leafwise carrying gives each iteration fresh params, so what was
one object must stay one: two carried names holding the same list are refused, and
so is a body that writes into arrays in place while it carries a container whose
items share memory with other names (the write would not reach them next time).

Note [Names a loop binds]
~~~~~~~~~~~~~~~~~~~~~~~~~
After a loop, Python's names hold what the last iteration bound: the body's names and
the loop's target (`for i in range(n)` leaves `i == n - 1`). A name that code after the
loop may read (Tracer.later_statements: the rest of each enclosing statement list, and
enclosing loops, whose next iteration reads it) and that the loop binds is carried by
it: bound to Unset first where nothing bound it before (Note [Results of returns inside
loops]: None after a loop that never ran), the target too. Before, a name first bound
in the body was "not defined" after the loop, and a target bound before it kept its
old value: a silently wrong gradient. A name no code after the loop reads is not
carried, so a body's temporaries cost nothing.
"""

from __future__ import annotations

import gast

from srcgrad.frontend import containers
from srcgrad.frontend.iteration import SEQUENCE, Iteration, _target_names, fresh_name
from srcgrad.frontend.results import Unset, shaped_like
from srcgrad.frontend.scope import Undecided
from srcgrad.frontend.unrolling import ITEM, REST_OF, Unrolling, _name, _not_flag
from srcgrad.ir.core import Block, Const, Op, Pack, Var
from srcgrad.ir.tree import LEAF, flatten, is_record, unflatten


def _assign(target, value, at):
    return gast.copy_location(gast.Assign(targets=[_name(target, gast.Store())], value=value,
                                          type_comment=None), at)


def assigned_names(stmts) -> list:
    """Names a statement list assigns, in order of first assignment."""
    names: dict = {}
    for s in stmts:
        for n in gast.walk(s):
            if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store):
                names.setdefault(n.id, None)
    return list(names)


def _names_read(later, loop) -> set:
    """The names the statements `later` (pairs of a list and where in it they start) may
    read before binding them, outside the loop statement `loop` (an augmented assignment
    reads its target). A plain assignment, or a `for` binding its target for its body,
    hides the name from the statements after it in its list."""
    read = set()
    for stmts, start in later:
        bound = set()
        for stmt in stmts[start:]:
            if isinstance(stmt, gast.For):
                read |= _reads(stmt.iter, loop) - bound
                read |= _reads(gast.Module(body=stmt.body, type_ignores=[]), loop) - (
                    bound | set(_target_names(stmt.target)))
            else:
                read |= _reads(stmt, loop) - bound
            if isinstance(stmt, gast.Assign):
                bound |= {t.id for t in stmt.targets if isinstance(t, gast.Name)}
    return read


def _reads(node, loop) -> set:
    read, todo = set(), [node]
    while todo:
        n = todo.pop()
        if n is loop:
            continue
        if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Load):
            read.add(n.id)
        elif isinstance(n, gast.AugAssign) and isinstance(n.target, gast.Name):
            read.add(n.target.id)
        todo.extend(gast.iter_child_nodes(n))
    return read


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


BREAK_FLAG = "_break"  # a loop's flag: this name, then its depth among loops with one


def _assign_flag(node, flag):
    return _assign(flag, gast.Constant(value=True, kind=None), node)


def _jumps(stmt) -> bool:
    """Whether `stmt` holds a break/continue of the enclosing loop."""
    if isinstance(stmt, (gast.Break, gast.Continue)):
        return True
    if isinstance(stmt, (gast.For, gast.While, gast.FunctionDef)):
        return False
    return any(_jumps(child) for child in gast.iter_child_nodes(stmt) if isinstance(child, gast.stmt))


def _leaves(value):
    return flatten(value, is_leaf=lambda v: isinstance(v, (Var, Const)))



class Loops(Unrolling, Iteration):
    """Loop statements, mixed into the Tracer through ControlFlow."""

    def trace_for(self, node, scope):
        if node.orelse:
            self.fail(node, "`for ... else`", "use a flag variable")
        outer_sequences = {n for n in scope.env if n.startswith(SEQUENCE)}

        def unroll(err):  # Note [Unrolling loops the lowering refuses]
            body, flag = self._loop_body(node, scope)
            self.unroll_for(node, scope, err, body, flag, flag in scope.env)
            self._leave_for(scope, flag, outer_sequences)
        self.keeping_body_names(node, scope, lambda: self.lowered_or_unrolled(
            node, scope, lambda: self._lower_for(node, scope), unroll))

    def keeping_body_names(self, node, scope, trace):
        """`trace()` the loop `node`, its body's names that code after it reads bound
        after it as Python binds them (Note [Names a loop binds])."""
        targets = set(_target_names(node.target)) if isinstance(node, gast.For) else set()
        later = self.__dict__.setdefault("later_statements", [])
        read = _names_read(later, node)
        names = [n for n in assigned_names(node.body) + sorted(targets) if n in read
                 and n not in scope.env]
        for name in names:
            scope.env[name] = Unset()
        later.append(([node], 0))  # an enclosing loop's next iteration reads them too
        try:
            trace()
        finally:
            later.pop()
        for name in names:  # (no path of the body assigned it: as before the loop)
            if isinstance(scope.env.get(name), Unset):
                scope.env.pop(name)

    def _leave_for(self, scope, flag, outer_sequences):
        scope.env.pop(flag, None)
        hidden = self.__dict__.get("hidden_sequences", ())
        for name in [n for n in scope.env if n in hidden and n not in outer_sequences]:
            scope.env.pop(name)  # its own only: an enclosing loop's rows still write through its own

    def _lower_for(self, node, scope):
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
        carried = [n for n in dict.fromkeys(assigned_names(body) + _target_names(node.target))
                   if n in scope.env]  # (the target too: it keeps the last element's value)
        index = Var(self.namer.fresh(_index_name(node.target)), "static")
        kinds = [_carry_kind(scope.env[n]) for n in carried]
        while True:  # until the carried names and kinds cover what the body does
            params = self._loop_params(node, carried, kinds, scope.env)
            mark = _writes(self)
            body_ops, env_after, _, _ = self.trace_block(body, scope, dict(zip(carried, params)),
                                                         prologue=prologue)
            if not (self._carry_more(carried, kinds, scope.env, env_after, _target_names(node.target),
                                     _writes(self) > mark)
                    or self._widen(kinds, carried, scope.env, env_after)):
                break
        self.close_loop(node, scope, "for_range", (start, stop, step), carried, params, [index],
                        body_ops, env_after, writes=_writes(self) > mark)
        if flag in carried:  # leave the loop at once after an iteration that breaks
            self.ops[-1].attrs["until"] = params[carried.index(flag)]
        self._leave_for(scope, flag, outer_sequences)

    def trace_while(self, node, scope):
        if node.orelse:
            self.fail(node, "`while ... else`", "use a flag variable")

        if hasattr(node, REST_OF):  # the rest of an unrolled loop, unrolled on (its body
            flag, err = getattr(node, REST_OF)  # lowered already, its flag the loop's)
            self.unroll_while(node, scope, err, node.body, node.test, flag)
            return

        def unroll(err):  # Note [Unrolling loops the lowering refuses]
            body, flag = self._loop_body(node, scope)
            self.unroll_while(node, scope, err, body, self._while_test(node, flag, scope),
                              flag if flag in scope.env else None)
            scope.env.pop(flag, None)
        self.keeping_body_names(node, scope, lambda: self.lowered_or_unrolled(
            node, scope, lambda: self._lower_while(node, scope), unroll))

    @staticmethod
    def _while_test(node, flag, scope):
        if flag not in scope.env:
            return node.test
        return gast.copy_location(gast.BoolOp(op=gast.And(), values=[_not_flag(node, flag),
                                                                      node.test]), node.test)

    def _lower_while(self, node, scope):
        body, flag = self._loop_body(node, scope)
        breaks = flag in scope.env
        test_node = self._while_test(node, flag, scope)  # `while not _break and test`

        def prologue(inner):
            if breaks:  # the test was False after an iteration that broke
                inner.env[flag] = Const(False)
        test = self.expr(test_node, scope)  # the first test, before the loop (`:=` binds here)
        carried = [n for n in assigned_names([node.test] + body) if n in scope.env]
        if isinstance(test, Const) and not test.value:
            return  # never entered
        kinds = [_carry_kind(scope.env[n]) for n in carried]
        running = Var(self.namer.fresh("_running"), "static")
        while True:  # until the carried names and kinds cover what the body does
            params = self._loop_params(node, carried, kinds, scope.env)
            mark = _writes(self)
            body_ops, env_after, _, next_test = self.trace_block(
                body, scope, dict(zip(carried, params)), prologue=prologue,
                epilogue=lambda inner: self.expr(test_node, inner))
            if not (self._carry_more(carried, kinds, scope.env, env_after, (), _writes(self) > mark)
                    or self._widen(kinds, carried, scope.env, env_after)):
                break
        self.close_loop(node, scope, "while_loop", (test,), carried, params, [], body_ops, env_after,
                        extra_param=running, extra_result=next_test, writes=_writes(self) > mark)
        scope.env.pop(flag, None)

    def _loop_params(self, node, carried, kinds, env) -> list:
        """Per carried name its block param: a Var, or a container of the same structure
        as the name's first value whose leaves are params, except the constants the body
        leaves alone (Note [Containers carried by loops])."""
        params, slots, leaf_params = [], {}, []
        for name, kind in zip(carried, kinds):
            if kind == PENDING:  # traced once unset (Note [Results of returns inside loops])
                params.append(env[name])
                continue
            if not isinstance(kind, tuple):
                params.append(Var(self.namer.fresh(name), kind))
                slots[name], leaf_params = env[name], leaf_params + [params[-1]]
                continue
            _, tree, leaf_kinds = kind
            leaves = []
            for i, (leaf, k) in enumerate(zip(_leaves(env[name])[0], leaf_kinds)):
                if k == FIXED:
                    leaves.append(leaf)
                    continue
                leaves.append(Var(self.namer.fresh(name), k))
                slots[f"{name}[{i}]"], leaf_params = leaf, leaf_params + [leaves[-1]]
            params.append(unflatten(tree, leaves))
        self.mutation.note_loop_params(node, list(slots), leaf_params, {**env, **slots})
        for init, param in zip(slots.values(), leaf_params):
            self.note_maybe_none(param, init)
        return params

    def _carry_more(self, carried, kinds, before, after, targets, writes) -> bool:
        """Carry every name of the enclosing code the body rebinds, also without an
        `=` on it (`y[i] = v` and writes through views rebind `y`: Note [Mutation at
        trace time]; `L[0] = v` rebinds a list: Note [Containers changed inside
        blocks]); True when one was added, so the body is traced again. A container
        another name or container shares, or, in a body that writes into arrays in
        place, one holding an array another name shares, is not carried:
        Mutation.check_loop_containers refuses it, or what it holds is Undecided after
        the loop (Note [Aliases across blocks])."""
        more = [n for n, v in before.items() if n in after and after[n] is not v
                and n not in carried and n not in targets
                and (isinstance(v, (Var, Const)) or is_node(v) and self._unshared(v, writes))]
        carried.extend(more)
        kinds.extend(_carry_kind(before[n]) for n in more)
        return bool(more)

    @staticmethod
    def _widen(kinds, carried, before, env_after) -> bool:
        """Make a carried value 'array' when the body makes it one (`h = np.zeros(n)`
        before a loop that sets `h = np.tanh(x @ W + h)`), and a container's constant
        leaf a param when the body changes it; True when one changed, so the body is
        traced again: activity analysis follows only 'array' values."""
        changed = False
        for i, name in enumerate(carried):
            after = env_after.get(name, Const(0))
            if kinds[i] == PENDING:  # Note [Results of returns inside loops]
                if after is before[name]:
                    continue  # never assigned: stays unset, not carried (close_loop)
                after_leaves, tree = _leaves(after)
                if tree == LEAF:
                    kinds[i] = _kind(after)
                else:
                    before[name] = shaped_like(after)
                    kinds[i] = ("tree", tree, tuple(_widen_leaf(FIXED, u, a) for u, a in zip(
                        _leaves(before[name])[0], after_leaves)))
                changed = True
                continue
            if not isinstance(kinds[i], tuple):
                if kinds[i] == "static" and _kind(after) == "array":
                    kinds[i], changed = "array", True
                continue
            _, tree, leaf_kinds = kinds[i]
            after_leaves, after_tree = _leaves(after)
            if after_tree != tree:
                continue  # refused by close_loop, naming the change
            new = tuple(_widen_leaf(k, a, b) for k, a, b in zip(leaf_kinds, _leaves(before[name])[0],
                                                                 after_leaves))
            if new != leaf_kinds:
                kinds[i], changed = ("tree", tree, new), True
        return changed

    def _loop_body(self, node, scope):
        """(the loop's body with break/continue lowered, its break flag's name); a
        `break` adds the flag, one per loop, so nested loops never share one. The
        loop leaves as soon as the flag is set (Note [Tracing control flow])."""
        flag = fresh_name(BREAK_FLAG, node, scope, bare_first=True)
        body, breaks = lower_jumps(node.body, flag)
        if breaks:
            scope.env[flag] = Const(False)
        return body, flag

    def close_loop(self, node, scope, prim, args, carried, params, bound, body_ops, env_after,
                   extra_param=None, extra_result=None, writes=False):
        self.loc = scope.locate(node)  # the loop statement's line, not its body's last
        inits, results, flat_params, names, trees = [], [], [], [], []
        for name, param in zip(carried, params):
            init, result = scope.env[name], env_after.get(name, param)
            for value in (init, result):
                if isinstance(value, Undecided):
                    self.mutation.check_decided(value, None)  # raises, with what it cannot decide
            init_leaves, tree = _leaves(init)
            result_leaves, result_tree = _leaves(result)
            param_leaves = _leaves(param)[0]
            if result_tree != tree:
                self.refuse_structure(node, name, (result, init), "before the loop at line "
                                      f"{self.loc.line} and after an iteration of it",
                                      loop=self.loc.line)
            for a, b, p in zip(init_leaves, result_leaves, param_leaves):
                for value in (a, b):
                    if isinstance(value, Undecided):
                        self.mutation.check_decided(value, None)
                fixed = p is a and (tree != LEAF or isinstance(p, Unset))
                if not isinstance(a, (Var, Const)) or not isinstance(b, (Var, Const)) or (
                        fixed and not _same_leaf(a, b)):
                    self.fail(node, f"`{name}`, a tuple, list or dict holding functions or other "
                              "objects that change in a loop", "keep arrays in separate variables, "
                              "or write into a preallocated array with x[i] = v")
                if fixed:
                    continue  # a constant leaf the body leaves alone
                inits.append(a)
                results.append(b)
                flat_params.append(p)
                names.append(name)
            trees.append((tree, param_leaves))
        self._refuse_shared_containers(node, carried, scope.env, env_after)
        if writes:
            self._refuse_shared_items(node, carried, scope.env)
        block_params = bound + flat_params
        if extra_param is not None:  # a while loop's test, carried like a variable
            block_params = [extra_param] + block_params
            results = [extra_result] + results
        outs = tuple(Var(self.namer.fresh(n), p.kind) for n, p in zip(names, flat_params))
        for init, out in zip(inits, outs):
            self.note_maybe_none(out, init)
        self.mutation.check_loop_containers(node, scope.env, env_after, carried)
        self.mutation.note_loop_outputs(prim, args, inits, flat_params,
                                        results[-len(flat_params):] if flat_params else [], outs,
                                        body_ops, names)
        self.ops.append(Op(prim, (*args, Pack(tuple(inits))), outs, self.loc,
                           blocks=(Block(body_ops, results, block_params),)))
        by_param = {id(p): o for p, o in zip(flat_params, outs)}
        for name, (tree, param_leaves) in zip(carried, trees):
            after = unflatten(tree, [by_param.get(id(p), p) for p in param_leaves])
            scope.env[name] = containers.merged(self, after, [scope.env[name], env_after.get(name, after)],
                                                self.loc)  # Note [Containers merged across paths]

    def _unshared(self, container, writes) -> bool:
        """Whether one name alone refers to `container` and, where the body `writes` into
        arrays, no item of it shares memory with another name."""
        refs = containers.references(self, container)
        if refs != 1:
            return False
        return not writes or not any(self.mutation._mutable(leaf) and self.mutation._family_refs(leaf) > 1
                                     for leaf in _leaves(container)[0])

    def _refuse_shared_containers(self, node, carried, before, after):
        """A loop carries each name's container as its own leaves, so two carried names
        (or two places in one) holding the same list or dict, before the loop or after
        an iteration, would no longer share it: refused."""
        for env in (before, after):
            owner: dict = {}
            for name in carried:
                for sub in _containers_in(env.get(name)):
                    if id(sub) in owner:
                        self.fail(node, f"a loop changing `{name}`, which shares a "
                                  f"{type(sub).__name__} with `{owner[id(sub)]}`", "give each name "
                                  "its own copy (`M = list(L)`) before and in the loop")
                    owner[id(sub)] = name

    def _refuse_shared_items(self, node, carried, env):
        """A loop body that writes into arrays in place, carrying a container whose
        items share memory with another name or item: a write through one would not
        reach the other's param on the next iteration (Note [Containers carried by loops])."""
        for name in carried:
            value = env[name]
            if not is_node(value):
                continue
            for leaf in _leaves(value)[0]:
                if self.mutation._mutable(leaf) and self.mutation._family_refs(leaf) > 1:
                    self.fail(node, f"a loop that writes into arrays in place while it changes "
                              f"`{name}`, whose items share memory with other names",
                              f"give `{name}` its own copies of the items before the loop "
                              f"(`{name}[k] = {name}[k].copy()` for each)")

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
        flag = fresh_name(BREAK_FLAG, node, scope, bare_first=True)
        item = fresh_name(ITEM, node, scope)
        while f"{ITEM}{item}_sequence" in scope.env:  # an outer loop's, whose element is not
            item += "_"  # bound now (fuzz seed 3601157: nested loops beside a user's `_item1`)
        lowered, breaks = lower_jumps(node.body, flag)
        bind = gast.copy_location(gast.Assign(targets=[node.target], value=_name(item, gast.Load()),
                                              type_comment=None), node.target)
        if breaks:
            scope.env[flag] = Const(False)
        iterating = self.__dict__.setdefault("iterating", [])  # containers.block_changes reads it
        iterating.append(items)
        # an element is read when its iteration starts, as it is then: a write in an earlier
        # iteration rebinds the names and containers holding the array it wrote, so a
        # temporary sequence is held under a hidden name too (fuzz seed 501217: `for r in
        # (x, x.reshape(-1)): x *= ...` read the first x in the second iteration); a list
        # a name holds is held itself: later iterations see what the body changes in it, not
        # a rebinding of the name (`for v in L: L = [...]` iterates the old list)
        held = f"{ITEM}{item}_sequence"
        scope.env[held] = items if isinstance(node.iter, gast.Name) else list(items)
        try:
            self._unrolled_iterations(node, scope, items, breaks, flag, item, bind, lowered, held)
        finally:
            iterating.pop()
            if held is not None:
                scope.env.pop(held, None)
        if breaks:
            scope.env.pop(flag, None)

    def _unrolled_iterations(self, node, scope, items, breaks, flag, item, bind, lowered, held):
        """The body once per element, read when its iteration starts: a list the body
        changes (`L[-1] = v`, `L.append(v)`) is iterated as it is then, as in Python."""
        i = 0
        while i < len(items):
            if i:  # what the sequence holds now (`held`: the temporary's hidden name)
                items = scope.env[held] if held is not None else self.static_items(node, scope)
            value, i = items[i], i + 1
            if i > MAX_UNROLLED:
                self.fail(node, f"a loop over a list that grows in every iteration (more than "
                          f"{MAX_UNROLLED} iterations)")
            done = scope.env.get(flag)
            if breaks and isinstance(done, Const) and done.value:
                break  # a break on static values: the rest never runs
            self.unrolled_iteration(node, scope, value, item, bind, lowered, flag,
                                    guarded=breaks and not isinstance(done, Const))



def _kind(*values) -> str:
    """'array' when any value may carry a derivative: a float, or an array Var."""
    for v in values:
        if isinstance(v, Var) and v.kind == "array":
            return "array"
        if isinstance(v, Const) and isinstance(v.value, (float, complex)):
            return "array"
    return "static"


def _index_name(target) -> str:
    names = _target_names(target)
    return names[0] if len(names) == 1 and isinstance(target, gast.Name) else "_i"


MAX_UNROLLED = 10_000  # iterations of a loop over a list, which Python would run forever
FIXED = "fixed"  # a container leaf kind: a constant the body leaves alone, not a param
PENDING = "pending"  # no value before the loop: Note [Results of returns inside loops]


def _carry_kind(value):
    """A carried name's kind: 'array'/'static', or for a container ("tree", its tree,
    its leaves' kinds), constants (ints, strings, None, functions) FIXED at first;
    PENDING for a name with no value yet, whose structure the body gives it."""
    if isinstance(value, Unset):
        return PENDING
    if not is_node(value):
        return _kind(value)
    leaves, tree = _leaves(value)
    return ("tree", tree, tuple(FIXED if _fixed(leaf) else _kind(leaf) for leaf in leaves))


def _fixed(leaf) -> bool:
    return isinstance(leaf, Const) and _kind(leaf) == "static" and not hasattr(leaf.value, "shape")


def _widen_leaf(kind, before, after):
    if kind == FIXED:
        same = _same_leaf(before, after)
        plain = isinstance(before.value, (bool, int, float, complex, str, type(None)))
        return FIXED if same or not plain else _kind(before, after)  # (close_loop refuses a
        # function that changes: a param would not be callable)
    return "array" if kind == "static" and _kind(after) == "array" else kind


def _same_leaf(before, after) -> bool:
    return after is before or (isinstance(after, Const) and type(after.value) is type(before.value)
                               and _same_constant(after.value, before.value))


def _same_constant(a, b) -> bool:
    try:
        return bool(a == b)
    except Exception:  # an object whose == is not a truth value
        return a is b


def _writes(tracer) -> int:
    """How many in-place writes the trace has made so far."""
    return len(getattr(tracer.mutation, "write_log", ()))


def is_node(value) -> bool:
    """A tuple, list, dict or record of tvalues (a Var is a dataclass, not a record)."""
    return isinstance(value, (tuple, list, dict)) or (
        not isinstance(value, (Var, Const)) and is_record(value))


def _containers_in(value) -> list:
    """The lists and dicts in a tvalue, nested ones included (records and tuples are
    immutable: sharing them is harmless)."""
    out, todo, seen = [], [value], set()
    while todo:
        v = todo.pop()
        if isinstance(v, (list, dict)):
            out.append(v)
        if isinstance(v, (list, dict, tuple)) and id(v) not in seen:
            seen.add(id(v))
            todo.extend(v.values() if isinstance(v, dict) else v)
    return out
