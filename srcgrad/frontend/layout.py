"""Views of arguments, and `x op= v` on them, decided at run time (Note [Views of arguments]).

Note [Views of arguments]
~~~~~~~~~~~~~~~~~~~~~~~~~
Whether `x.reshape(-1)` / `x.ravel()` is a view of `x` or a copy depends on x's memory
layout, and whether `x[i]` is a view of a row or an immutable scalar on x's rank and
on i; the shape-generic trace knows neither (Note [Mutation at trace time]). When `x`
is an argument as the caller passed it (or a view the program made of one before any
write), the generated code holds that very object and runs the same view operation on
it, so NumPy's own answer is at hand at run time: `storage_written(x, view)` (the view
is an ndarray sharing x's buffer), computed right where the view is made. A write
through the view then reaches x as `where(flag, <x with the write>, x)`, and a view of
x made before a write into x reads `where(flag, <the view of the new x>, <itself>)`.
Both operands have the same shape (a reshape keeps the elements, an index write puts
back what it read), so the select never fails on the path not taken; the flag is a
run-time value the probe never folds (it reads arrays), so a variant decides nothing
from its first call's layout.

An argument written in place before the view is made is still the caller's object in
the user's program (same buffer, same strides), where the generated code holds a copy
with the write: the flag is then taken from the same view made of the argument as
passed (`_caller_array` follows writes, and branch and loop values that are it on
every path).

`x op= v` where x is such an argument or view, and another name shares it, writes
into x if it is an ndarray and only rebinds it if it is a NumPy scalar (a float
argument, an element of a vector): `storage_written(x, x)` says which, and a `cond` on
it runs the write (and the re-derivation of every name sharing x) on the ndarray path
only, since there the written value may not fit back into the array (`w = x[1];
w += np.ones(3)` rebinds a scalar w to an array, which `x[1] = w` would reject).
After it, a name whose relation to x differs between the two paths is recorded as a
merge of both (Note [Aliases across blocks]): a later write reaching it is Undecided.

Values the compiled code computed itself (`y = x * 2.0`) are not covered here: the
generated code may compute them differently from the user's program (folded, fused,
written into a reused buffer), so their layout need not be NumPy's. A variant decides
them from the user's program's semantics instead, where its guard fixes what NumPy's
answer depends on (Note [Layout facts] in srcgrad.frontend.layout_facts); elsewhere they
keep the Undecided marker.
"""

from __future__ import annotations

from srcgrad import rules
from srcgrad.frontend.scope import Undecided
from srcgrad.ir.core import Block, Const, Op, Pack, Var


class ArgumentViews:
    """Mixed into Mutation (srcgrad.frontend.mutation): `tracer`, `views`, `history`,
    `inputs`, `arrays` and `_chain` are Mutation's."""

    def note_view_flag(self, name, operands, out, how) -> None:
        """`out = name(*operands)` is a view of its first operand or not depending on
        run-time facts (`how`: not certain); record NumPy's answer where it can be had."""
        parent = operands[0]
        if name == "ravel" or name == "reshape" and _nonempty_shape(operands[1]):
            self.arrays[id(out)] = out  # a reshape to a shape with axes is an ndarray
        if not isinstance(out, Var):
            return
        if self._user_object(parent):
            self.view_flags[id(out)] = self.tracer.apply(rules.RULES["storage_written"],
                                                         [parent, out], {})
            return
        base = self._caller_array(parent)
        if base is not None:  # the same view of the caller's array decides (its writes in
            # place kept its object and layout, where the generated code copied it)
            mirror = self.tracer.apply(rules.RULES[name], [base, *operands[1:]], {})
            if id(mirror) in self.view_flags:
                self.view_flags[id(out)] = self.view_flags[id(mirror)]

    def runtime_answer(self, parent) -> bool:
        """A view of `parent` is decided at run time from the caller's object (the layout
        facts decide the other values: Note [Layout facts])."""
        return self._user_object(parent) or self._caller_array(parent) not in (None, _CYCLE)

    def _caller_array(self, t):
        """The argument (or view of one made before any write) that `t` is the very
        object of in the user's program: `t` is it after writes in place (`history`),
        or a branch or loop value that is it on every path. None where unknown.

        A depth-first walk of the merged values' sources, with its own stack: an unrolled
        loop merges a value per iteration, hundreds deep (fuzz seed 1303819: a recursive
        walk exceeded Python's recursion limit)."""
        seen: set = set()
        frames: list = []  # per value being resolved: [its sources, the next one, arrays found]
        result = self._caller_step(t, seen, frames)
        while frames:
            frame = frames[-1]
            if result is not _PENDING and result is not _CYCLE:  # a source's answer
                frame[2][id(result)] = result  # (a loop param's _CYCLE: other sources decide)
            if frame[1] < len(frame[0]):
                frame[1] += 1
                result = self._caller_step(frame[0][frame[1] - 1], seen, frames)
                continue
            frames.pop()
            found = frame[2]
            result = None if len(found) != 1 or None in found.values() else next(iter(found.values()))
        return result

    def _caller_step(self, t, seen, frames):
        """_caller_array's answer for `t`, or _PENDING with a frame pushed for its sources."""
        while id(t) in self.history:
            t = self.history[id(t)]
        if id(t) in seen:
            return _CYCLE  # a loop param: its other sources decide
        seen.add(id(t))
        if self._user_object(t):
            return t
        sources = self.merged.get(id(t))
        if not sources:
            return None
        frames.append([list(sources), 0, {}])
        return _PENDING

    def array_flag(self, t):
        """A run-time flag: `t` is an ndarray (not a NumPy scalar), where the caller's
        object tells it; None elsewhere."""
        entry = self.views.get(id(t))
        if entry is not None and entry[4] == "int" and id(t) in self.view_flags:
            return self.view_flags[id(t)]  # an int-indexed view is one iff it is an ndarray
        base = t if self._user_object(t) else self._caller_array(t)
        if base is None or base is _CYCLE:
            return None
        return self.tracer.apply(rules.RULES["storage_written"], [base, base], {})

    def _user_object(self, t) -> bool:
        """`t` is an argument as the caller passed it, or a view made of one before any
        write into it (Note [Views of arguments])."""
        chain = self._chain(t)
        if any(id(c) in self.history for c in chain):
            return False
        root = chain[-1]
        return isinstance(root, Var) and any(v is root for v in self.inputs)

    def select_view(self, flag, view_value, otherwise):
        """`view_value` where the step was a view at run time, else `otherwise`."""
        return self.tracer.apply(rules.RULES["where"], [flag, view_value, otherwise], {})

    def note_flagged_view(self, value, parent, rule, rest, kind, flag) -> None:
        """`value` is a view of `parent` iff `flag` (a write through it reaches `parent`
        on that condition)."""
        self.views[id(value)] = (value, parent, rule, rest, kind)
        self.view_flags[id(value)] = flag


    def write_if_array(self, old, new, node, flag) -> None:
        """`x op= v` where x is an argument or a view of one that may be an ndarray or a
        NumPy scalar (Note [Views of arguments]): the names sharing x's storage read the
        write where x is an ndarray at run time, and keep their value where it is a
        scalar (which `op=` only rebinds). The caller binds x itself to `new`."""
        tr = self.tracer
        self.saved.written(old, False, tr.loc)
        outer, then_ops, checked = tr.ops, [], set(self.checked)
        tr.ops = then_ops
        try:
            remap = self.write(old, new, node, "name", flagged=True)
            pairs, seen = [], set()
            for t in self._references():
                if id(t) not in seen:
                    seen.add(id(t))
                    r = remap(t)
                    if r is not None:
                        pairs.append((t, r))
        finally:
            tr.ops = outer
        self.checked = checked  # the check ran on one path only
        self.views.pop(id(new), None)  # its recorded parent is the block's: not visible here
        self.view_flags.pop(id(new), None)
        self.arrays.pop(id(new), None)
        decided = [(t, r) for t, r in pairs if not isinstance(r, Undecided)]
        outs = [Var(tr.namer.fresh(t.name if isinstance(t, Var) else "w"),
                    t.kind if isinstance(t, Var) else "array") for t, _ in decided]
        tr.ops.append(Op("cond", (flag,), tuple(outs), tr.loc, blocks=(
            Block(then_ops, [r for _, r in decided]), Block([], [t for t, _ in decided]))))
        mapping = {id(t): r for t, r in pairs}
        mapping.update((id(t), out) for (t, _), out in zip(decided, outs))
        for (t, r), out in zip(decided, outs):
            entry = self.views.get(id(t))
            parent = mapping.get(id(entry[1])) if entry is not None else None
            if isinstance(parent, Var):  # a view of the written array on both paths
                _, _, rule, rest, kind = entry
                self.views[id(out)] = (out, parent, rule, rest, kind)
                if id(t) in self.view_flags:
                    self.view_flags[id(out)] = self.view_flags[id(t)]
            else:  # it may be `new`'s storage (an ndarray written in place) or not
                self.merged[id(out)] = (r, t, new)
                # on both paths the object t was, written or not: `x op= h(x)` reads it again
                # after h (Mutation._reread; fuzz seed 2100169)
                self.history.setdefault(id(out), t)
        self._remap(lambda t: mapping.get(id(t)))


_CYCLE = object()  # _caller_array met a value it is already looking at
_PENDING = object()  # _caller_array's step pushed a frame: the answer comes from its sources


def _nonempty_shape(shape) -> bool:
    """A reshape target with at least one axis (the result is an ndarray; to `()` a NumPy
    scalar may stay a scalar)."""
    if isinstance(shape, Const):
        v = shape.value
        return isinstance(v, int) or isinstance(v, tuple) and len(v) > 0
    return isinstance(shape, Pack) and len(shape.items) > 0
