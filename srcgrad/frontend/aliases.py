"""Sharing between names across if/loop blocks (Note [Aliases across blocks]).

Note [Aliases across blocks]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Blocks (Note [Tracing control flow] in srcgrad.frontend.control) bind new values to
the names they change, which would cut the sharing between names:

* an `if` whose branches bind a name to the *same* value (`y = x` in both, `x if c
  else x`) binds it after the `if` without a merge, so a later write through `y`
  still reaches `x`;
* a merged value that is another name's storage on some path only (`y = x if c
  else z`) is recorded (`merged`); a write through it makes every such name
  Undecided (reading it is a CompileError), since the write reached it on one path;
* a loop's output is what its last iteration left, or its first value when the loop
  may run no iteration; a param is the first value or the previous iteration's: both
  are recorded as merges (`note_loop_outputs`), so a write after the loop through a
  name the body bound to another name's array (`for ...: y = x`; `y += 1`) makes that
  name Undecided, as a branch would;
* a loop's body starts from params; a param whose first value shares memory with
  another name (`y = x` or `row = x[0]` before the loop) is recorded (`shared`) and
  a write through it inside the body is a CompileError: on the first iteration the
  write reaches the other name, which the body cannot see;
* likewise from the second iteration on: a body that writes through a param and
  leaves another carried name sharing its array at the end of an iteration (`y =
  x[1:]`, on some path or all) is refused where the body reads that name's param
  (`_refuse_carried_views`), since the next iteration's write would reach it.

Note [Views merged across branches]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A write in one branch rebinds the array and every view of it (`r = x[0]` before the
`if`, then `x[1] = v` in it: `x` and `r` get new values on that path), so after the
`if` both are merged values, `x` one of (x', x) and `r` one of (x'[0], x[0]): each
recorded as merged, which a later write through `x` would make `r` Undecided ("on
some paths only"), though `r` is `x[0]` on every path. So a merged output that is, on
each path, the same view (the same rule, the same index or axes, certainly a view)
of values that merge into one output too, or of one value both paths share, is
recorded as that view of it (`note_merged_views`): a later write re-derives it from
the written array, as in straight-line code. The operands of the view must be
the same on both paths (constants, or values from before the `if`), so the view is
well defined after it. An unsure view (an integer index, `reshape`) is recorded only
where one run-time answer decides it on both paths (the same flag: Note [Views of
arguments] in srcgrad.frontend.layout); otherwise it stays merged.

Note [Writes through merged values inside loops]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A write inside a loop body reaches every storage the written value may be, not only
its view chain: after `if c: x = np.arctan(x)` the name `x` is one of (a new array,
the param), so `x[1:][0] = v` writes into the param's storage on the paths that kept
it. Where that param shares memory with other names on the first iteration (`shared`:
the array `for r in x` iterates over, `y = x` before the loop), the write reaches them
on those paths, which the lowered loop cannot carry (its rows were read from the array
as it was before the loop: fuzz seed 910485 summed rows the write had changed). So
`_refuse_shared` walks the branch merges too (`_possible_storages`, as `_storages`)
and refuses such a write as it refuses a write through the param itself. It counts
the params of the loops being traced only (`open_params`): a write after a loop
through its output, which may be a closed loop's param, makes the names it reaches
on some paths Undecided (Mutation.write), as after an `if`. Where the trip count is
known the loop is unrolled instead (Note [Unrolling loops the lowering refuses]);
there the names the write reaches on some paths only are Undecided, and a later read
of them (the next row) is refused, naming the write: which values NumPy reads there
depends on the path the data took.
"""

from __future__ import annotations

import gast
import numpy

from srcgrad.frontend.scope import Undecided
from srcgrad.ir.core import Const, Pack, Var


def _leaves(value, seen=None) -> list:
    """The tvalues a name's value is or holds (in tuples, lists and dicts)."""
    if isinstance(value, (Var, Const)):
        return [value]
    if not isinstance(value, (tuple, list, dict)):
        return []
    seen = set() if seen is None else seen
    if id(value) in seen:
        return []
    seen.add(id(value))
    items = value.values() if isinstance(value, dict) else value
    return [leaf for item in items for leaf in _leaves(item, seen)]


_CERTAIN = "view"  # srcgrad.frontend.mutation.CERTAIN: certainly a view


class BlockAliases:
    """Mixed into Mutation (srcgrad.frontend.mutation): `merged`, `shared`, `tracer`,
    `_chain`, `_scopes`, `_remap` are Mutation's."""

    def note_merge(self, out, sources):
        """`out` is one of `sources` depending on the path taken (an if/else merge)."""
        self.layout.merge(out, sources)
        if any(self._mutable(s) for s in sources):
            self.merged[id(out)] = sources

    def note_merged_views(self, then_leaves, else_leaves, outs):
        """Record each merged output that is one view of one merged value on both paths
        as that view (Note [Views merged across branches])."""
        by_pair = {(id(a), id(b)): out for a, b, out in zip(then_leaves, else_leaves, outs)}
        for a, b, out in zip(then_leaves, else_leaves, outs):
            va, vb = self.views.get(id(a)), self.views.get(id(b))
            if va is None or vb is None or va[2] != vb[2] or va[4] != vb[4] \
                    or len(va[3]) != len(vb[3]) or not all(map(_same_operand, va[3], vb[3])):
                continue
            flag = self.view_flags.get(id(a))  # an unsure view: one run-time answer on both
            if flag is not self.view_flags.get(id(b)) or flag is None and va[4] != _CERTAIN:
                continue  # paths (Note [Views of arguments] in srcgrad.frontend.layout)
            parent = va[1] if va[1] is vb[1] else by_pair.get((id(va[1]), id(vb[1])))
            if parent is None or parent is out:
                continue
            self.views[id(out)] = (out, parent, va[2], va[3], va[4])
            if flag is not None:
                self.view_flags[id(out)] = flag

    def note_loop_outputs(self, prim, args, inits, params, results, outs, body_ops=(), names=()):
        """A loop's carried values (Note [Aliases across blocks]): inside the body a
        param is the first value or what the previous iteration left; after the loop
        the output is what the last iteration left, or the first value when the loop
        may run no iteration: a `while`, or a `range` that is empty. A `range` whose
        bounds are run-time values (`range(len(x))`) is taken to run (known gap: an
        empty one, where the write after the loop would reach the first value's names)."""
        bounds = [a.value for a in args] if prim == "for_range" and all(
            isinstance(a, Const) for a in args) else None
        runs = prim == "for_range" and (bounds is None or not all(
            isinstance(b, int) for b in bounds) or bounds[2] == 0 or len(range(*bounds)) > 0)
        self._refuse_carried_views(params, results, body_ops, names)
        for k, (init, param, result, out) in enumerate(zip(inits, params, results, outs)):
            self.open_params.pop(id(param), None)
            self._refuse_rebound_alias(param, result, names[k] if k < len(names) else None)
            self.note_merge(param, (init, result))
            self.note_merge(out, (result,) if runs else (init, result))
            if id(param) in self.held_written:  # a tuple/list/dict holds what the body wrote
                if id(init) in self.held:  # a nested loop's param started as its enclosing
                    # loop's: that loop's body wrote through its param too (fuzz seed 82246)
                    self.held_written.setdefault(id(init), self.held_written[id(param)])
                self._poison_held(param, init)

    def _refuse_carried_views(self, params, results, body_ops, names):
        """A body that writes through a param `x` and ends an iteration with another
        carried name bound to `x`'s array (`y = x.reshape(4)`, on some path or all):
        the next iteration's write reaches `y`'s param, which the body reads as a value
        of its own (fuzz seed 700838). `shared` covers sharing on entry only."""
        named = dict(zip(map(id, params), names))
        pairs = [(p, r) for p, r in zip(params, results) if self._mutable(r)]
        written = [(p, r) for p, r in pairs if id(p) in self.written_params]
        if not written:
            return
        used = {id(v) for op in body_ops for v in op.operand_vars()}
        used |= {id(v) for r in results if isinstance(r, Var) for v in (r,)}
        memo = {}
        for p, r in written:
            for q, s in pairs:
                if q is p or id(q) not in used or not self._storages(s, memo) & self._storages(r, memo):
                    continue
                loc = self.written_params[id(p)]
                x, y = named.get(id(p), p.name), named.get(id(q), q.name)
                self.tracer.fail(None, f"an in-place write inside a loop (line "
                                 f"{loc.line if loc else '?'}) into `{x}`, which an earlier "
                                 f"iteration may have left shared with `{y}` (a view of it or "
                                 "the same array), so the write would reach it",
                                 f"copy where the loop binds `{y}` (add `.copy()` to the value "
                                 f"bound to `{y}`), or write into one name only")

    def _refuse_rebound_alias(self, param, result, own_name=None):
        """A body that writes through a param and ends its iteration with the name bound to
        another name's array (`x = v` in the body): the next iteration writes into that
        array, which the body does not see (fuzz seed 4718). Also where it is that array
        on some paths only (`x = v if c else x`: a merge, fuzz seed 1402329, whose next
        iteration's write reached `v`'s array and was lost)."""
        if id(param) not in self.written_params or not self._mutable(result):
            return
        root = self._chain(result)[-1]
        names = [] if root is param or self._chain(root)[-1] is param else self._names_of_root(root)
        names = names or self._sharing_names(param, result, own_name)
        if names:
            loc = self.written_params[id(param)]
            listed = ", ".join(f"`{n}`" for n in names)
            self.tracer.fail(None, f"an in-place write inside a loop (line {loc.line if loc else '?'})"
                             f" through a name that an iteration leaves bound to the array of {listed}, "
                             "so the next iteration would write into it", "copy where the loop binds "
                             "it (`y = x.copy()`), or write into one name only")

    def _names_of_root(self, root) -> list:
        """The names (and container items) bound to `root`'s array or a view of it."""
        names = sorted({n for scope in self._scopes() for n, v in scope.env.items()
                        if isinstance(v, (Var, Const)) and self._mutable(v)
                        and self._chain(v)[-1] is root})
        names += sorted({f"{n}[...]" for scope in self._scopes() for n, v in scope.env.items()
                         if isinstance(v, (tuple, list, dict)) and any(
                             self._mutable(leaf) and self._chain(leaf)[-1] is root
                             for leaf in _leaves(v))})  # an item of a container (fuzz seed 200979)
        return names

    def _sharing_names(self, param, result, own_name) -> list:
        """The names other than the loop's own whose arrays `result` may be on some path
        (through branch merges) besides the param's own."""
        memo: dict = {}
        reach = self._storages(result, memo) - self._storages(param, memo)
        if not reach:
            return []
        return sorted({n for scope in self._scopes() for n, v in scope.env.items()
                       if n != own_name and isinstance(v, (Var, Const)) and self._mutable(v)
                       and self._storages(v, memo) & reach})

    def _poison_held(self, param, init):
        """The containers holding a loop param's first value, written through the param
        in the body: a loop carries arrays, not containers, so what they hold after the
        loop is Undecided (reading it is a CompileError; fuzz seeds 388, 2878)."""
        name, holders = self.held[id(param)]
        loc = self.held_written[id(param)]
        root = self._chain(init)[-1]
        marker = Undecided(f"an array that {', '.join(f'`{h}`' for h in holders)} holds was "
                           f"written through `{name}` inside a loop (line {loc.line if loc else '?'}"
                           "), and a loop does not carry a tuple, list or dict",
                           f"read it as `{name}` after the loop, or copy it out of the container "
                           f"before the loop (`{name} = {name}.copy()`)", loc)
        # the loop's own name is bound to its output right after (ControlFlow.close_loop)
        self._remap(lambda r: marker if self._chain(r)[-1] is root else None)

    def check_loop_containers(self, node, before, after, carried):
        """A tuple, list or dict holding an array the body wrote into changes in the body
        (Mutation._remap copies it on write inside blocks) but a loop carries arrays, not
        containers: refused, where the change was dropped after the loop (fuzz seed 2878)."""
        for name, value in before.items():
            if isinstance(value, (tuple, list, dict)) and name not in carried \
                    and after.get(name, value) is not value:
                kind = type(value).__name__
                self.tracer.fail(node, f"a write inside a loop into an array that the {kind} "
                                 f"`{name}` holds", f"take the array out of `{name}` before the "
                                 f"loop as its own copy (`w = {name}[...].copy()`), write into "
                                 "it and use it after the loop")

    def note_loop_params(self, node, carried, params, env):
        """Params of a loop body whose first value shares memory with another name
        (Note [Aliases across blocks])."""
        for name, param in zip(carried, params):
            init = env.get(name)
            self.open_params[id(param)] = param
            self.saved.note_param(param, init)  # Note [Saved values written in place]
            self.layout.assume(param, init)
            if not self._mutable(init) or not isinstance(param, Var) or param.kind != "array" and \
                    not isinstance(init, Const):
                continue
            roots, memo = self._storages(init), {}  # a branch's or loop's other paths too
            others = sorted({n for scope in self._scopes() for n, v in scope.env.items()
                             if n != name and isinstance(v, (Var, Const)) and self._mutable(v)
                             and self._storages(v, memo) & roots})  # (seeds 7752, 28752)
            holders = sorted({n for scope in self._scopes() for n, v in scope.env.items()
                              if isinstance(v, (tuple, list, dict)) and any(
                                  self._mutable(leaf) and self._storages(leaf, memo) & roots
                                  for leaf in _leaves(v))})
            # a container the body reads sees, from the second iteration on, what the
            # previous one wrote through the param: writing through it is refused like a
            # write through a plain alias (fuzz seed 24688: `v = t[1]; while ...: v *= g(t[1])`)
            carried_names = {c.split("[")[0] for c in carried}  # a carried container holds params
            read = [h for h in holders if h not in carried_names
                    and self._reads_shared_item(node, h, roots, memo)]
            others += read
            holders = [h for h in holders if h not in read]
            for table in (self.shared, self.held):  # a nested loop's param starts as the
                if id(init) in table and not others + holders:  # enclosing loop's (seed 4718)
                    others, holders = (table[id(init)][1], []) if table is self.shared \
                        else ([], table[id(init)][1])
            if others or holders:
                # only containers hold it (`v1, v2 = T`): the write is allowed and what
                # they hold is Undecided after the loop (`held`, note_loop_outputs)
                table = self.shared if others else self.held
                table[id(param)] = (name, others + holders)
                if self.is_array(init):
                    self.arrays[id(param)] = param

    def _reads_shared_item(self, node, name, roots, memo) -> bool:
        """Whether the loop `node` reads the container `name` other than through a constant
        key whose item shares nothing with `roots` (`t[1]` where the param is `t[0]`'s
        array is safe: fuzz seed 50522)."""
        value = next((s.env[name] for s in self._scopes() if name in s.env), None)
        safe = set()
        for n in gast.walk(node):
            if isinstance(n, gast.Subscript) and isinstance(n.value, gast.Name) \
                    and n.value.id == name and isinstance(n.slice, gast.Constant):
                try:
                    item = value[n.slice.value]
                except (IndexError, KeyError, TypeError):
                    continue
                if not any(self._mutable(leaf) and self._storages(leaf, memo) & roots
                           for leaf in _leaves(item)):
                    safe.add(id(n.value))
        return any(isinstance(n, gast.Name) and n.id == name and id(n) not in safe
                   for n in gast.walk(node))

    @staticmethod
    def _mutable(v) -> bool:
        return isinstance(v, Var) or isinstance(v, Const) and isinstance(v.value, numpy.ndarray)

    def _refuse_shared(self, t, node, what):
        """A write inside a loop through a value that, on the first iteration, shares
        memory with names the loop does not see it write: refused. The write reaches
        every storage `t` may be, through branch merges too (Note [Writes through
        merged values inside loops])."""
        certain = {id(v) for v in self._chain(t)}
        for v in self._possible_storages(t):
            if id(v) not in certain and id(v) not in self.open_params:
                continue  # (a closed loop's param: a write after its loop is `write`'s)
            self.written_params[id(v)] = self.tracer.loc
            if id(v) in self.held:
                self.held_written[id(v)] = self.tracer.loc
            if id(v) in self.shared:
                name, others = self.shared[id(v)]
                names = ", ".join(f"`{o}`" for o in others if not o.startswith("_sequence")) \
                    or "the array a loop iterates over"  # (`for r in x: y = x; y += 1`)
                paths = "" if id(v) in certain else " (on the paths where it is still that array)"
                if name.startswith("_sequence"):  # a row of `for row in x` written
                    self.tracer.fail(node, f"{what} inside a loop into a row of the array the loop "
                                     f"iterates over ({names}){paths}", "loop over "
                                     "`range(len(x))` and write through `x[i, ...]`")
                self.tracer.fail(node, f"{what} inside a loop into `{name}`{paths}, which shares "
                                 f"memory with {names} from before the loop",
                                 f"copy it before the loop (`{name} = {name}.copy()`) if the write "
                                 f"should not reach {names}; otherwise write into one name only")

    def _possible_storages(self, t) -> list:
        """The values whose storage `t` may be on some path: each value up its view chain
        and, through branch and loop merges (transitively), each source's."""
        out, seen, todo = [], set(), [t]
        while todo:
            for c in self._chain(todo.pop()):
                if id(c) in seen:
                    break
                seen.add(id(c))
                out.append(c)
                todo.extend(s for s in self.merged.get(id(c), ()) if self._mutable(s))
        return out

    def _storages(self, t, memo=None) -> set:
        """The ids of `_possible_storages(t)`. Two values whose storages meet may share
        memory at run time (Note [Aliases across blocks])."""
        if memo is not None and id(t) in memo:
            return memo[id(t)]
        out = {id(v) for v in self._possible_storages(t)}
        if memo is not None:
            memo[id(t)] = out
        return out

    def _on_some_paths(self, loc) -> Undecided:
        return Undecided(f"the in-place write at line {loc.line if loc else '?'} "
                         f"(`{loc.text if loc else ''}`) changed this value on some paths only: "
                         "the written name was bound to it on some paths only (in one branch "
                         "of an if/else or conditional expression, or by a loop's iterations)",
                         "copy explicitly where it is bound (`y = x.copy()`) or write into the "
                         "original name", loc)

    def _poison_merged(self, t, loc):
        """`t`'s storage was written (or rebound, if `t` is a scalar) by a write that
        reaches, on some paths only, the storage of other names: a branch output or loop
        value that is `t` on some path, or that `t` is on some path (Note [Aliases across
        blocks]). Names holding `t`'s own storage for certain are left to the caller."""
        written, memo = self._storages(t), {}
        root = self._chain(t)[-1]
        if not self.merged:
            return  # no merge anywhere: nothing shares it on some paths only
        marker = self._on_some_paths(loc)
        self._remap(lambda r: marker if self._chain(r)[-1] is not root
                    and self._storages(r, memo) & written else None)


def _same_operand(a, b) -> bool:
    """Whether two operands of a view are the same on both paths: one value, or equal
    constants of one type (an index array: equal elements of one dtype)."""
    if a is b:
        return True
    if isinstance(a, Pack) and isinstance(b, Pack):
        return a.style == b.style and len(a.items) == len(b.items) and all(
            map(_same_operand, a.items, b.items))
    if not (isinstance(a, Const) and isinstance(b, Const)) or type(a.value) is not type(b.value):
        return False
    if isinstance(a.value, numpy.ndarray):
        return a.value.dtype == b.value.dtype and numpy.array_equal(a.value, b.value)
    try:
        return bool(a.value == b.value)
    except Exception:  # noqa: BLE001 (a value whose == is not a truth value)
        return False
