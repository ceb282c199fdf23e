"""Loops unrolled at trace time where the loop lowering refuses a write.

Note [Unrolling loops the lowering refuses]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A loop lowered to `for_range`/`while_loop` carries its values leafwise through block
params (Note [Tracing control flow], Note [Containers carried by loops]). A param
starts as one value and is its own name inside the body, so an in-place write there
cannot reach the other names that shared its storage before the loop (`v = x`,
`row = x[0]`, the array `for r in x` iterates over, a tuple holding it), and the
lowering refuses such writes (Note [Aliases across blocks]). Straight-line code has
no such limit: a write rebinds every name that sees the storage (Note [Mutation at
trace time]).

So when the lowering refuses for that reason (`refused_by_lowering`) and the trip
count is known while tracing, the loop is traced again unrolled: the body once per
iteration, in order, as straight-line code, which is what NumPy runs. Known trip
counts: `range(...)` of constants or of shape facts of the variant (`range(len(x))`,
Note [Shape facts] in srcgrad.frontend.trace), the rows of an array whose length is
such a fact (`for r in x`, `enumerate(x)`, `zip(x, y)`), and a `while` whose test is
a constant after every iteration (`while True:` with a counter's `break`, `while k <
3:`). A row is taken when its iteration starts, from the array as it is then (NumPy's
`for r in x` reads `x[i]` then, a view that sees the earlier iterations' writes).
`break`/`continue` are lowered as for any loop (loops.lower_jumps): after a `break`
on data, each later iteration runs under `if not _break`, and a `while` whose test
would depend on data there is not unrolled.

The alternative, carrying every name that shares the written storage and re-deriving
views from the carried base after each write, keeps the loop a loop but needs the view
relation of every alias to be certain on every path; unrolling handles whatever
straight-line code handles, at a size cost, so it is bounded: trip count times body
size (`UNROLL_BUDGET` AST nodes per loop, `TOTAL_BUDGET` per trace, nested unrolls
counted), beyond which the refusal stands with its rewrite hint. The shape-generic
code has no shape facts, so there `for r in x` keeps the refusal; the variant compiled
for the arguments' shapes unrolls it.

The first attempt leaves state behind (ops, names bound, the mutation tables); a
`Snapshot` taken before it is restored before the unrolled trace, so the unrolled code
is traced exactly as if the loop had never been lowered.

Note [Unrolling a while on data]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A `while` whose test reads data (`while k < 3 and np.sum(x) < 1.0:`, or `while True:`
with a counter's `break` and a `break` on data) has no trip count, but often a bound:
a counter that makes the test a constant False after some iterations. Python runs

    while test: body        as        if test: body; while test: body

so where the test is on data, the rest of the loop is traced as the then-branch of an
`if` on it (the else-branch: the loop has ended), and inside that branch the loop goes
on as before: a test that is a constant runs the body straight or ends the loop, one on
data nests another `if`. Inside each branch the values are those of one path, so the
counter stays a constant and ends the nesting at its bound; the `if`s merge what the
iterations wrote as any `if` does (Note [Aliases across blocks]). After a `break` on
data the break flag is data too, and the test would read it (`not _break and test`),
which no constant folds: the rest of the loop is then the branch of an `if not
_break`, inside which the flag is False again, so the test is evaluated only where
Python evaluates it and the counter decides it. The rest of the loop is a `while` node
marked `REST_OF` (its break flag, the lowering's refusal), unrolled on without a
second attempt at lowering it. A test on data with no bound would nest without end:
`MAX_NESTED` levels, then the lowering's refusal stands; each level is counted against
the unrolling budgets like an iteration.
"""

from __future__ import annotations

import gast

from srcgrad.errors import CompileError
from srcgrad.frontend.iteration import fresh_name
from srcgrad.frontend.scope import Undecided
from srcgrad.ir.core import Const

UNROLL_BUDGET = 6000  # AST nodes traced per unrolled loop: trip count x body size
TOTAL_BUDGET = 30000  # the same summed over every unrolled loop of one trace
MAX_TRIPS = 256  # iterations of one unrolled loop
MAX_NESTED = 12  # `if`s nested by unrolling a `while` on data (Note [Unrolling a while on data])
REST_OF = "srcgrad_rest_of"  # a `while` that is the rest of an unrolled one: (its flag, refusal)
ITEM = "_item"  # the element an unrolled loop binds its target to (also Loops.trace_unrolled_for)

# Refusals of the loop lowering that the unrolled code does not meet (aliases.py,
# loops.py): the write or container change is straight-line code once unrolled.
_LOWERING_REFUSALS = (
    "from before the loop is not supported",  # a write into storage another name shares
    "a row of the array the loop iterates over",
    "so the next iteration would write into it",  # a rebound alias written next iteration
    "which an earlier iteration may have left shared with",  # a view an iteration left
    "whose items share memory with other names",  # a carried container's items
    "and a loop does not carry a tuple, list or dict",
    "inside an `if`/loop in a called function, into",  # (I8) a callee's loop writes a caller's
)


def refused_by_lowering(err: CompileError) -> bool:
    """Whether `err` is a refusal of the loop lowering that unrolling avoids."""
    message = err.message or ""
    return any(text in message for text in _LOWERING_REFUSALS) or (
        message.startswith("a write inside a loop into an array that the "))


def _name(n, ctx):
    return gast.Name(id=n, ctx=ctx, annotation=None, type_comment=None)


def _not_flag(node, flag):
    return gast.copy_location(gast.UnaryOp(op=gast.Not(), operand=_name(flag, gast.Load())), node)


def body_size(stmts) -> int:
    return sum(1 for s in stmts for _ in gast.walk(s))


class Snapshot:
    """The tracer's state before a loop is traced, to trace it again from there."""

    def __init__(self, tracer, scope):
        self.objects = []
        mutation = tracer.mutation
        for obj in (tracer, mutation, mutation.saved):
            self.objects.append((obj, {k: (v, _copy(v)) for k, v in vars(obj).items()
                                       if k not in _KEEP}))
        envs, s = {}, scope
        for sc in [*tracer.scopes, scope]:
            s = sc
            while s is not None:
                envs[id(s)] = (s, s.env, dict(s.env))
                s = s.outer
        self.envs = list(envs.values())
        self.records = [(r, len(r.certain), len(r.possible)) for r in mutation.saved.records]

    def restore(self):
        for obj, attrs in self.objects:
            for k in [k for k in vars(obj) if k not in attrs and k not in _KEEP]:
                delattr(obj, k)  # made by the attempt (`maybe_none`, ...)
            for k, (value, content) in attrs.items():
                setattr(obj, k, value)
                if content is not None:
                    value.clear()
                    value.update(content) if isinstance(value, (dict, set)) else value.extend(content)
        for scope, env, content in self.envs:
            scope.env = env
            env.clear()
            env.update(content)
        for record, certain, possible in self.records:
            del record.certain[certain:]
            del record.possible[possible:]


_KEEP = frozenset({"namer", "mutation", "tracer", "saved", "facts"})


def _copy(value):
    if isinstance(value, (dict, set)):
        return type(value)(value) if type(value) in (dict, set) else None
    if type(value) is list:
        return list(value)
    return None


class Unrolling:
    """Mixed into Loops (srcgrad.frontend.loops): `stmt`, `expr`, `bind`, `fail` are the
    Tracer's; `loop_plan`, `_length` Iteration's."""

    def lowered_or_unrolled(self, node, scope, lower, unroll):
        """`lower()` traces the loop as a loop; where it refuses a write the unrolled
        code would not meet, the state is restored and `unroll(err)` traces it unrolled
        (Note [Unrolling loops the lowering refuses])."""
        snapshot = Snapshot(self, scope)
        try:
            lower()
        except CompileError as err:
            if not refused_by_lowering(err):
                raise
            snapshot.restore()
            unroll(err)

    def _spend(self, node, err, trips, body):
        """Count an unrolled loop against the budgets; the refusal `err` stands beyond."""
        cost = trips * body_size(body)
        spent = self.__dict__.get("unrolled_nodes", 0) + cost
        if trips > MAX_TRIPS or cost > UNROLL_BUDGET or spent > TOTAL_BUDGET:
            raise err
        self.unrolled_nodes = spent

    def unroll_for(self, node, scope, err, lowered, flag, breaks):
        """The `for` loop `node` (refused by its lowering with `err`) traced once per
        iteration, when its trip count is known now; else `err` stands."""
        before = set(scope.env)
        plan = self.loop_plan(node, scope)
        rows = [n for n in scope.env if n not in before]  # the arrays whose rows it binds
        if plan is None:
            raise err  # (a static sequence is unrolled already: not this path)
        start, stop, step, per_index = plan
        bounds = [self.shape_fact(b) if hasattr(self, "shape_fact") else b for b in (start, stop, step)]
        if not all(isinstance(b, Const) and isinstance(b.value, int) for b in bounds) \
                or bounds[2].value == 0:
            raise err
        indices = range(*(b.value for b in bounds))
        self._spend(node, err, len(indices), lowered)

        def value_at(k):
            for name in rows:  # read as the iteration starts: a write may have made it Undecided
                self._check_rows(node, scope.env[name])
            return per_index(Const(k), scope)
        self.unrolled_iterations(node, scope, [lambda k=k: value_at(k) for k in indices],
                                 lowered, flag, breaks)

    def _check_rows(self, node, rows):
        """The array an unrolled `for r in x` takes its next row from: refused where an
        earlier iteration's write left it Undecided, on some paths only (Note [Writes
        through merged values inside loops] in srcgrad.frontend.aliases) or as a view
        or a copy, naming the write; both rewrites of the hint compile."""
        if isinstance(rows, Undecided):
            x = node.iter.id if isinstance(node.iter, gast.Name) else "x"
            self.error(node.iter, "cannot compile the next row of this loop: an earlier iteration "
                       f"wrote into the array it iterates over, and {rows.message}",
                       f"iterate over a copy (`for ... in {x}.copy():`) if the rows should not "
                       f"see the loop's writes, or over `range(len({x}))` reading `{x}[i]` at "
                       "the top of the body if they should")

    def unrolled_iterations(self, node, scope, values, lowered, flag, breaks):
        """The lowered body once per element of `values` (thunks: each is read as its
        iteration starts), the loop variable bound to it; after a `break` on data each
        later iteration runs under `if not <flag>` (as Loops.trace_unrolled_for)."""
        item = fresh_name(ITEM, node, scope)
        bind = gast.copy_location(gast.Assign(targets=[node.target], value=_name(item, gast.Load()),
                                              type_comment=None), node.target)
        for value_at in values:
            done = scope.env.get(flag)
            if breaks and isinstance(done, Const) and done.value:
                break  # a break on static values: the rest never runs
            self.loc = scope.locate(node)
            self.unrolled_iteration(node, scope, value_at(), item, bind, lowered, flag,
                                    guarded=breaks and not isinstance(done, Const))

    def unrolled_iteration(self, node, scope, value, item, bind, lowered, flag, guarded):
        """One iteration of an unrolled loop: the loop variable bound to `value`, then
        the lowered body; `guarded` (after a `break` on data) runs both under `if not
        <flag>`, so after the loop the variable holds the element that broke."""
        if not guarded:
            self.bind(node.target, value, scope)
            body = lowered
        else:
            scope.env[item] = value
            body = [gast.copy_location(gast.If(test=_not_flag(node, flag), body=[bind] + lowered,
                                               orelse=[]), node)]
        for stmt in body:
            self.loc = scope.locate(stmt)
            self.stmt(stmt, scope)
        scope.env.pop(item, None)

    def unroll_while(self, node, scope, err, lowered, test_node, flag=None):
        """The `while` loop `node` (refused by its lowering with `err`) traced once per
        iteration while its test is a constant; at a test on data, the rest of the loop
        is traced as the branch of an `if` on it (Note [Unrolling a while on data])."""
        size = body_size(lowered) + body_size([gast.Expr(value=test_node)])
        rest = gast.copy_location(gast.While(test=test_node, body=lowered, orelse=[]), node)
        setattr(rest, REST_OF, (flag, err))  # the rest of this loop (Loops.trace_while)
        for trips in range(MAX_TRIPS + 1):
            self.loc = scope.locate(node)
            broke = scope.env.get(flag, Const(False)) if flag is not None else Const(False)
            if not isinstance(broke, Const):  # a break on data: the rest runs where none ran
                self._unroll_on_data(node, scope, err, _not_flag(node, flag), [rest], flag)
                return
            test = self.expr(test_node, scope)
            if not isinstance(test, Const):
                self._spend(node, err, 1, [gast.Expr(value=test_node)] + lowered)
                self._unroll_on_data(node, scope, err, test, lowered + [rest], None)
                return
            if not test.value:
                return
            self._spend(node, err, 1, [gast.Expr(value=test_node)] + lowered)
            if trips * size > UNROLL_BUDGET:
                raise err
            for stmt in lowered:
                self.loc = scope.locate(stmt)
                self.stmt(stmt, scope)
        raise err

    def _unroll_on_data(self, node, scope, err, test, then, flag):
        """`then` (the rest of an unrolled while) as the then-branch of an `if` on `test`
        (traced, or an expression to trace: `not <flag>`, which is then False inside)."""
        depth = self.__dict__.get("unroll_nesting", 0)
        if depth >= MAX_NESTED:
            raise err
        self.unroll_nesting = depth + 1
        try:
            if isinstance(test, gast.expr):
                test = self.expr(test, scope)
                then = [_assign_false(node, flag)] + then
            self.loc = scope.locate(node)
            self.branches(node, test, scope, then, [])
        finally:
            self.unroll_nesting = depth


def _assign_false(node, flag):
    return gast.copy_location(gast.Assign(targets=[_name(flag, gast.Store())],
                                          value=gast.Constant(value=False, kind=None),
                                          type_comment=None), node)
