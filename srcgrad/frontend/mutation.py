"""In-place writes, functionalized while tracing (Note [Mutation at trace time]).

Note [Mutation at trace time]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The IR is functional: an op never changes its operands. A write into an array
(`x[i] = v`, `x[i, j] += v`, `x += y` on an ndarray, `np.add(a, b, out=c)`) becomes
a new value, `setitem(x, index, v)` (a copy with the write applied) or the result of
the ufunc, and every *name* that shared storage with the written array is rebound to
what it reads after the write, so the gradient is that of what NumPy computed:

* the same tvalue under another name (`y = x; y += 1` changes what `x` reads);
* views: `v = b[1:]; v *= 2` rebinds `b` to `setitem(b, slice(1, None), v * 2)`
  and `v` to `b_new[1:]`, re-derived from the new `b` as every other view of `b` is
  (Note [Views of the written array]). Views are recorded as they are made (`getitem`
  with a basic index, `.T`, `transpose`, `swapaxes`, `moveaxis`, `expand_dims`,
  `squeeze`, `reshape`, `ravel`) with the step that made them, and a write walks the
  steps back up to the base (`setitem` for an index, the inverse permutation for a
  transpose, `reshape` to the base's shape for the others) and down again to every
  live view.

Names are found in every scope being traced (callers of an inlined function too:
`def step(p): p[0] = 0` changes the caller's array) and inside native containers.

Where NumPy's behaviour depends on something the compiler does not know, it does
not guess. `reshape`/`ravel` return a view or a copy depending on memory layout; an
integer index returns a view of a row or an immutable scalar depending on ndim; `+=`
on a name writes into an ndarray but rebinds a scalar. Then the names whose value
would differ are bound to an `Undecided` marker, and *reading* one later is a
CompileError naming both lines and a rewrite that says what the user means. A
program that never reads them again compiles (both meanings agree). Where the
array in question is an argument as the caller passed it (or a view made of one
before any write), the generated code holds the very same object, and NumPy's
answer is read from it at run time instead (Note [Views of arguments] in
srcgrad.frontend.layout).

Arguments: compiled transforms are functional. An argument written in place is
copied first (`setitem` copies), so calling `sg.grad(f)(x)` never changes the
caller's `x`, even where `f(x)` itself would (NumPy's `x += 1` on an argument
writes into the caller's array). The gradient is that of the function's value
with respect to the argument values it was given. Two arguments may be the same
array at run time (`f(a, a)`), which the compiler cannot see: where an argument is
written, the generated code checks `no_alias(new, arg, *other args)` once, raising
if the written argument shares memory with another one, or is read-only (where
NumPy's write would raise).
"""

from __future__ import annotations

import numpy

from srcgrad import rules
from srcgrad.errors import CompileError
from srcgrad.frontend.scope import Undecided, every_scope, mixed_in
from srcgrad.ir.core import Const, Var

VIEW_RULES = frozenset({"getitem", "T", "transpose", "swapaxes", "moveaxis", "expand_dims",
                        "squeeze", "reshape", "ravel", "flip", "fliplr", "flipud",
                        "matrix_transpose"})
# Note [Views the compiler does not follow]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Rules whose NumPy result may share memory with their first operand, but whose write-back
# is not modelled (the result is the operand itself, a view, or a copy, depending on its
# ndim: atleast_#d, split; a read-only view: diagonal, broadcast_to, diag of a matrix).
# Each is recorded as a view of unknown kind (no layout fact or run-time flag decides
# it), so a write through it leaves the operand's names Undecided, and a write into the
# operand leaves it Undecided: reading either is a CompileError at the user's line, never
# a value that silently missed NumPy's write (fuzz seed 2630553: np.flip's view, now
# modelled exactly, was a copy here). A write into a read-only view is refused at once,
# as NumPy raises there. Every other rule's result is a fresh array.
SHARING_RULES = frozenset({"atleast_1d", "atleast_2d", "atleast_3d", "split", "diagonal",
                           "broadcast_to", "diag", "sliding_window_view"})
READ_ONLY_RULES = frozenset({"diagonal", "broadcast_to", "sliding_window_view"})
# Rules whose result is always a fresh, writable ndarray.
_ARRAY_RESULTS = frozenset({"setitem", "zeros", "ones", "full", "zeros_like", "ones_like",
                            "full_like", "empty", "empty_like", "array", "copy", "stack",
                            "concatenate", "eye", "arange", "linspace", "tile", "repeat",
                            "outer", "pad", "vstack", "hstack", "diag"})

# How sure a recorded view is: a view always; "int": a view, or an immutable scalar when
# the integer index reaches every axis (a subscript write proves it is a view);
# "unknown": a view or a copy (`reshape`, `ravel`, an array-valued index).
CERTAIN, INT, UNKNOWN = "view", "int", "unknown"


class Mutation:
    """What the tracer knows of storage: recorded for every op here, and the writes
    themselves, whose methods are mixed in at the first use (InPlaceStatements,
    ArgumentViews, BlockAliases: Note [Mixins imported on demand] in
    srcgrad.frontend.scope), as are the layout facts and the saved values' checks."""

    def __init__(self, tracer):
        self.tracer = tracer
        self.inputs: list = []  # the graph's input Vars
        # id(view) -> (view, parent, rule name, other operands, CERTAIN / INT / UNKNOWN)
        self.views: dict = {}
        # id(view) -> a run-time flag: whether it is a view (Note [Views of arguments])
        self.view_flags: dict = {}
        self.arrays: dict = {}  # id(tvalue) -> tvalue known to be a writable ndarray
        self.checked: set = set()  # ids of inputs given their no_alias check
        self.shapes: dict = {}  # id(Var) -> Var: outputs of `shape` (whole shape tuples)
        self.top_ops = None  # the function-level op list (others are if/loop blocks)
        self._saved = None  # SavedWrites: Note [Saved values written in place]
        self.allow = False  # tracing under allow_mutation_on_saved_tensors
        self.history: dict = {}  # id(value after a write) -> the value before it
        self.write_log: list = []  # (ids of the values whose storage a write changed, Loc)
        # id(branch output) -> the values it is on each path (Note [Aliases across blocks])
        self.merged: dict = {}
        # id(loop param) -> (name, other names) when the value it starts as shares memory
        # with another name's: a write through the param would reach them in NumPy
        self.shared: dict = {}
        self.held: dict = {}  # id(loop param) -> (name, containers holding its first value)
        self.held_written: dict = {}  # id(loop param) -> Loc of a write through it
        self.written_params: dict = {}  # id(value) -> Loc of the last write through it
        # id(loop param) -> it, while its loop's body is traced: a write reaches it through
        # branch merges (Note [Writes through merged values inside loops])
        self.open_params: dict = {}
        self._layout = None  # LayoutTracker: Note [Layout facts]
        self.example = None  # the variant's arguments (None: the shape-generic code)
        self.made: dict = {}  # id(out) -> (rule name, its params, operands, out): `note_made`

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        from srcgrad.frontend.aliases import BlockAliases  # (these three: a trace that
        from srcgrad.frontend.inplace import InPlaceStatements  # writes in place or
        from srcgrad.frontend.layout import ArgumentViews  # merges paths: issue 15)
        return mixed_in(self, name, InPlaceStatements, ArgumentViews, BlockAliases)

    @property
    def saved(self):
        """The saved values' checks (made at the first use: a trace with no custom
        Function and no write never imports them, issue 15)."""
        if self._saved is None:
            from srcgrad.frontend.versions import SavedWrites  # (see above: issue 15)
            self._saved = SavedWrites(self)
            self._saved.allow = self.allow
        return self._saved

    @property
    def layout(self):
        """The layout facts (made when a decision or a merge first asks: issue 15)."""
        if self._layout is None:
            from srcgrad.frontend.layout_facts import LayoutTracker  # (see above: issue 15)
            self._layout = LayoutTracker(self)
        return self._layout

    def finish(self, env, ops) -> None:
        """At the function's end: the saved values' write counts (Note [Saved values
        written in place]), where anything was saved."""
        if self._saved is not None:
            self._saved.finish(env, ops)

    def start(self, fs_node, ops):
        self.top_ops = ops

    # ------------------------------------------------------------------ recording
    def note_made(self, rule, operands, outs) -> None:
        """What made each value, where the variant knows its arguments (`example`): the
        record the LayoutTracker works facts out from (Note [Layout facts]), kept here
        since every op writes it and most traces never ask the tracker anything."""
        if self.example is None:
            return
        if len(outs) == 1:
            self.made[id(outs[0])] = (rule.name, rule.params, operands, outs[0])
        elif rule.name == "unpack" and isinstance(operands[0], Var):
            shape = self.made.get(id(operands[0]), ("",))[0] == "shape"
            for i, out in enumerate(outs):  # `a, b = x.shape`: Python ints; `r0, r1 = x`: x[i]
                self.made[id(out)] = ("shape_item", ("x",), (operands[0],), out) if shape \
                    else ("getitem", ("x", "index"), (operands[0], Const(i)), out)

    def note_view(self, name, operands, out):
        base = operands[0]
        if isinstance(base, Const):
            if not isinstance(base.value, numpy.ndarray):
                return
            if isinstance(out, Const):  # a folded view: NumPy itself says
                if isinstance(out.value, numpy.ndarray) and numpy.shares_memory(out.value, base.value):
                    self.views[id(out)] = (out, base, name, tuple(operands[1:]), CERTAIN)
                return
        elif not isinstance(base, Var):
            return
        if name in SHARING_RULES:  # Note [Views the compiler does not follow]
            self.views[id(out)] = (out, base, name, tuple(operands[1:]), UNKNOWN)
            return
        how = _index_kind(operands[1]) if name == "getitem" else (
            UNKNOWN if name in ("reshape", "ravel") else CERTAIN)
        if how in (INT, UNKNOWN) and not self.runtime_answer(base):  # (Note [Layout facts])
            decided = self.layout.indexed(base, operands[1], out) if name == "getitem" else (
                self.layout.view_or_copy(base, out) if how == UNKNOWN else None)
            if decided in ("copy", "scalar"):
                if decided == "copy":
                    self.arrays[id(out)] = out
                return
            how = CERTAIN if decided == "view" else how
        if how is not None:
            self.views[id(out)] = (out, base, name, tuple(operands[1:]), how)
            if how != CERTAIN:
                self.note_view_flag(name, operands, out, how)

    def note_unpack(self, base, outs):
        """`r0, r1 = x` on an array: NumPy binds x[0] and x[1], views of its rows (or
        scalars where x is a vector), which a later write through them changes x with."""
        if isinstance(base, Var) and base.kind == "array" and not self.is_shape(base):
            for i, out in enumerate(outs):
                self.note_view("getitem", [base, Const(i)], out)

    def note_array(self, rule_name, out):
        if rule_name in _ARRAY_RESULTS:
            self.arrays[id(out)] = out
        elif rule_name == "shape":
            self.shapes[id(out)] = out

    def origin(self, t):
        """The value `t` was before the in-place writes that made it."""
        while id(t) in self.history:
            t = self.history[id(t)]
        return t

    def is_shape(self, v) -> bool:
        """`v` is a whole shape tuple (`x.reshape(y.shape)` must not pack it again)."""
        return id(v) in self.shapes

    # ------------------------------------------------------------------ statements
    # ------------------------------------------------------------------ the write
    def write(self, old, new, node, how, flagged=False):
        """`old`'s storage now holds `new`: rebind every name that shares it.

        `flagged`: the write happens only where `old` is an ndarray at run time
        (ArgumentViews.write_if_array): an integer index above it was a view, and the
        rebinding is returned (a function of each tvalue) instead of applied."""
        tr = self.tracer
        if id(new) in self.views and self.views[id(new)][2] in SHARING_RULES:
            del self.views[id(new)]  # (the written storage's new values, not a view of theirs)
        if id(old) in self.views and self.views[id(old)][2] in READ_ONLY_RULES \
                and id(old) not in self.arrays:  # (a write's result: `out=` broadcasts into it)
            tr.fail(node, f"an in-place write into the result of `{self.views[id(old)][2]}`, a "
                          "read-only view in NumPy (the write raises there)",
                    "write into a copy (`.copy()`) of it")
        self._refuse_shared(old, node, "an in-place write")
        self.layout.written(self._chain(old))  # Note [Layout facts]
        if how != "dirty" and not flagged:  # a Function's output replacing its written input
            self.saved.written(old, how != "name", tr.loc)
        new = self._guard_input(old, new)
        updates = {id(old): new}
        self.history[id(new)] = old
        cur, cur_new, unsure = old, new, None
        walked = []  # (view, its value written back, rule, operands, run-time flag), upwards
        while id(cur) in self.views:
            _, parent, rule, rest, kind = self.views[id(cur)]
            if kind == INT and (how != "name" or flagged):
                kind = CERTAIN  # item assignment worked: it was an array, hence a view
            step = None if kind == CERTAIN else self.view_flags.get(id(cur))
            if kind != CERTAIN and step is None:
                self.views[id(cur_new)] = (cur_new, parent, rule, rest, kind)
                unsure = (parent, rule)
                break
            written = self._write_back(parent, rule, rest, cur_new)
            # The write-back makes the parent *from* the child (`b = v.T`): that is no
            # view of the child to record (it would make a cycle of views).
            self.views.pop(id(written), None)
            if step is not None:  # a view of an argument, or not (Note [Views of arguments])
                written = self.select_view(step, written, parent)
            parent_new = self._guard_input(parent, written)
            if step is None:
                self.views[id(cur_new)] = (cur_new, parent_new, rule, rest, CERTAIN)
            else:
                self.note_flagged_view(cur_new, parent_new, rule, rest, kind, step)
            updates[id(parent)] = parent_new
            self.history[id(parent_new)] = parent
            walked.append((cur, cur_new, rule, rest, step))
            cur, cur_new = parent, parent_new
        new = self._views_of_new(walked, cur_new, updates, new)
        self.write_log.append((frozenset(updates), tr.loc))
        self.arrays[id(new)] = new
        unsure_root = self._chain(unsure[0])[-1] if unsure else None
        loc = tr.loc
        memo: dict = {}

        def remap(t):
            if id(t) in updates:
                return updates[id(t)]
            if id(t) in memo:
                return memo[id(t)]
            chain = self._chain(t)
            result = None
            for depth, ancestor in enumerate(chain[1:], 1):
                if id(ancestor) in updates:
                    result = self._rederive(chain[:depth], updates[id(ancestor)], loc)
                    break
            else:
                if unsure is not None and chain[-1] is unsure_root:
                    what = {"reshape": "`reshape` returns a view or a copy depending on memory "
                                       "layout", "ravel": "`ravel` returns a view or a copy "
                                       "depending on memory layout"}.get(
                        unsure[1], f"`{unsure[1]}` returns the array itself or a view of it, "
                        "which the compiler does not follow" if unsure[1] in SHARING_RULES else
                        "this index returns a view or a copy (or a scalar) "
                        "depending on values the compiler does not know")
                    result = Undecided(f"this value may or may not have been changed by the "
                                       f"in-place write at line {loc.line if loc else '?'} "
                                       f"(`{loc.text if loc else ''}`): {what}",
                                       "copy explicitly where you mean a copy (`.copy()`), or "
                                       "write through the original array's index "
                                       "(`x[1:] *= 2`)", loc)
                elif id(chain[-1]) in self.merged and self._views_of(chain[-1], cur):  # seed 21388
                    result = Undecided(f"on some paths this value is the array written at line "
                                       f"{loc.line if loc else '?'} or a view of it, on others "
                                       "not", "copy explicitly where it is chosen (`.copy()`)", loc)
                elif self._storages(t, reach) & written:  # shares it on some paths (seed 21400)
                    result = self._on_some_paths(loc)
            memo[id(t)] = result
            return result

        written, reach = (self._storages(cur), {}) if self.merged else (set(), {})
        if flagged:
            return remap
        self._remap(remap)
        return new

    def _views_of_new(self, walked, top_new, updates, new):
        """The names of the views a write went through read views of the new top array,
        as in NumPy, not the values the write-back made the top from (Note [Views of the
        written array]); returns what the written name reads."""
        value = top_new
        for view, view_new, rule, rest, step in reversed(walked):
            if step is not None:  # a view at run time or not: its own values below
                break
            parent = value
            value = self.tracer.apply(rules.RULES[rule], [parent, *rest], {})
            if not isinstance(value, Var) or value is view_new:
                break
            self.views[id(value)] = (value, parent, rule, rest, CERTAIN)
            self.view_flags.pop(id(value), None)
            self.arrays[id(value)] = value
            self.history[id(value)] = view
            updates[id(view)] = value
            if view_new is new:
                new = value
        return new

    # Note [Views of the written array]
    # ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
    # A write through a chain of views (`v = np.swapaxes(x.reshape(2, 3), 0, 1); w = v[1:];
    # w += d`) is functionalized upwards: `w_new`, `v_new = setitem(v, slice(1, None),
    # w_new)`, `x_new = swapaxes(v_new).reshape(3, 2)`. Those values hold the right numbers
    # but not NumPy's memory: `v_new` is a fresh C-ordered array where NumPy's `v` is a
    # strided view of x, and `x_new` a copy of it. A reduction sums in memory order, so
    # `np.sum(v)` and `np.sum(x)`, which NumPy computes over the very same memory in the same
    # order (equal to the last bit), differed in rounding, and `np.sum(v) > np.sum(x)`
    # (False in NumPy) came out True (fuzz seed 975529: np.where took the other branch,
    # a wrong value and gradient). So after the write-back, each view on the way (certain
    # steps, from the top down) is made again from the new top array, as the views the
    # write did not go through already are (`_rederive`), and its names read that view:
    # every name sharing the storage reads one array, as in NumPy. A step decided at run
    # time (Note [Views of arguments]) selects between two arrays: below it the write-back's
    # values stay.

    def _write_back(self, parent, rule, rest, child):
        tr = self.tracer
        R = rules.RULES
        if rule == "getitem":
            return tr.apply(R["setitem"], [parent, rest[0], child], {})
        if rule == "T":
            return tr.apply(R["T"], [child], {})
        if rule == "transpose":
            if isinstance(rest[0], Const) and rest[0].value is None:
                return tr.apply(R["transpose"], [child], {})
            return tr.apply(R["transpose"], [child, tr.apply(R["inverse_axes"], [rest[0]], {})], {})
        if rule == "swapaxes":
            return tr.apply(R["swapaxes"], [child, *rest], {})
        if rule == "moveaxis":
            return tr.apply(R["moveaxis"], [child, rest[1], rest[0]], {})
        if rule in ("flip", "fliplr", "flipud", "matrix_transpose"):  # (each its own inverse)
            return tr.apply(R[rule], [child, *rest], {})
        # expand_dims, squeeze, reshape, ravel: the same elements in the parent's shape
        return tr.apply(R["reshape"], [child, tr.apply(R["shape"], [parent], {})], {})

    def _rederive(self, below, top_new, loc):
        """Re-apply the view steps of `below` (nearest the top last) from `top_new`."""
        value = top_new
        for view in reversed(below):
            _, _, rule, rest, kind = self.views[id(view)]
            step = None if kind == CERTAIN else self.view_flags.get(id(view))
            if step is not None:  # Note [Views of arguments]
                parent = value
                derived = self.tracer.apply(rules.RULES[rule], [parent, *rest], {})
                value = self.select_view(step, derived, view)
                self.note_flagged_view(value, parent, rule, rest, kind, step)
                continue
            if kind != CERTAIN:
                return Undecided("this view may or may not see the in-place write at line "
                                 f"{loc.line if loc else '?'}: it was made by `{rule}`, which "
                                 "may return a copy", "copy explicitly (`.copy()`) or index the "
                                 "written array again after the write", loc)
            value = self.tracer.apply(rules.RULES[rule], [value, *rest], {})
        if below and isinstance(value, Var) and value is not below[0]:
            # the same object as the view in the user's program, after the write: `x op= f(x)`
            # reads it again once f wrote (Mutation._reread, fuzz seed 1500190)
            self.history.setdefault(id(value), below[0])
        return value

    def certainly_a_view(self, t) -> bool:
        """Whether `t` is a view of another array on every layout (a basic slice)."""
        return id(t) in self.views and self.views[id(t)][4] == CERTAIN

    def _chain(self, t):
        chain = [t]
        while id(chain[-1]) in self.views:
            chain.append(self.views[id(chain[-1])][1])
        return chain

    def _guard_input(self, old, new):
        """An argument written in place: check at run time that no other argument is the
        same memory (Note [Mutation at trace time])."""
        root = self._chain(old)[-1]
        if not isinstance(root, Var) or id(root) in self.checked \
                or not any(v is root for v in self.inputs):
            return new
        self.checked.add(id(root))
        others = [v for v in self.inputs if v is not root and v.kind == "array"]
        if not isinstance(new, (Var, Const)):
            return new
        return self.tracer.apply(rules.RULES["no_alias"], [new, root, *others], {})

    # ------------------------------------------------------------------ names
    def _scopes(self):
        return every_scope(self.tracer.scopes)

    def _remap(self, fn):
        """Replace every tvalue reachable from a name by `fn(tvalue)` (None: unchanged).

        Lists and dicts change in place in straight-line code (every name holding one
        sees it), but inside an if/loop block they are copied on write: the block traces
        in a copy of the env whose containers are the enclosing code's objects, and an
        in-place change would leak the block's values into the other branch and past
        the block (fuzz seed 2878: `w = d["w"]; if c: w[0] = 1`, then `d["w"]` read a
        value defined in the branch only). The copies go to the block's names (shared
        ones stay shared), so the merge after an `if` sees the container change."""
        done: dict = {}  # id(container) -> what it is now (itself in straight-line code)
        in_block = self.top_ops is not None and self.tracer.ops is not self.top_ops

        def rebuild(v):
            if isinstance(v, (Var, Const, Undecided)):
                new = fn(v)
                return v if new is None else new
            if isinstance(v, (list, dict)):
                if id(v) in done:
                    return done[id(v)]
                done[id(v)] = v  # a container holding itself sees the old one
                keys = list(v) if isinstance(v, dict) else range(len(v))
                items = [rebuild(v[k]) for k in keys]
                if all(a is v[k] for a, k in zip(items, keys)):
                    return v
                if not in_block:
                    for k, item in zip(keys, items):
                        v[k] = item
                    return v
                new = dict(zip(keys, items)) if isinstance(v, dict) else items
                done[id(v)] = new
                return new
            if isinstance(v, tuple):
                items = tuple(rebuild(x) for x in v)
                return v if all(a is b for a, b in zip(items, v)) else items
            return v

        for scope in self._scopes():
            outside = in_block and self.tracer.depth > 0 and self.tracer.block_outside(scope)
            for name in list(scope.env):
                old = scope.env[name]
                new = rebuild(old)
                if outside and new is not old:  # Note [Writes by callees inside blocks]
                    self.tracer.fail(None, "an in-place write, inside an `if`/loop in a called "
                                     f"function, into `{name}` of its caller",
                                     "build the result functionally (e.g. `y = np.where(mask, v, "
                                     "y)`), or move the `if`/loop into the caller: a function "
                                     "called inside an `if`/loop may write into its arguments")
                scope.env[name] = new
                if new is not old and isinstance(new, Var) and new.name.startswith("_"):
                    new.name = self.tracer.namer.fresh(name)  # `b` after a write through `v`

    def _references(self):
        seen: set = set()
        out: list = []

        def walk(v):
            if isinstance(v, (Var, Const)):
                out.append(v)
            elif isinstance(v, (list, dict, tuple)):
                if id(v) in seen:
                    return
                seen.add(id(v))
                for x in (v.values() if isinstance(v, dict) else v):
                    walk(x)

        for scope in self._scopes():
            for v in scope.env.values():
                walk(v)
        return out

    def _family_refs(self, t) -> int:
        root = self._chain(t)[-1]
        return sum(1 for r in self._references() if self._chain(r)[-1] is root)

    def is_array(self, t) -> bool:
        if isinstance(t, Const):
            return isinstance(t.value, numpy.ndarray)
        if id(t) in self.arrays:
            return True
        entry = self.views.get(id(t))
        if entry is not None and entry[4] == CERTAIN:
            return True
        # a reference that is a certain view *of* t proves t is an array
        return any(self.views.get(id(r), (None, None, None, None, None))[1] is t
                   and self.views[id(r)][4] == CERTAIN for r in self._references())

    def _poison_family(self, t, node, message, hint):
        root = self._chain(t)[-1]
        marker = Undecided(message, hint, self.tracer.loc)
        self._remap(lambda r: marker if self._chain(r)[-1] is root else None)

    def check_decided(self, value, node):
        """`value` itself, or a CompileError if it (or an element) is Undecided."""
        def walk(v):
            if isinstance(v, Undecided):
                where = self.tracer.loc
                if node is not None and getattr(node, "lineno", None) and self.tracer.locate:
                    where = self.tracer.locate(node)
                raise CompileError.at(where or v.loc, "cannot compile a read of a value after an "
                                      "in-place write whose effect depends on NumPy's memory "
                                      f"layout or types: {v.message}", hint=v.hint)
            if isinstance(v, (tuple, list)):
                for x in v:
                    walk(x)
            elif isinstance(v, dict):
                for x in v.values():
                    walk(x)
        if isinstance(value, Undecided) or node is None:
            walk(value)
        return value



def _index_kind(index):
    """How `x[index]` relates to x: CERTAIN view, INT, UNKNOWN, or None (a copy)."""
    from srcgrad.ir.core import Pack

    parts = index.items if isinstance(index, Pack) and index.style != "slice" else (
        tuple(Const(v) for v in index.value) if isinstance(index, Const)
        and isinstance(index.value, tuple) else (index,))
    kinds = []
    for p in parts:
        if isinstance(p, Pack):  # a slice with dynamic bounds
            kinds.append("slice")
        elif isinstance(p, Const):
            v = p.value
            if v is None or v is Ellipsis or isinstance(v, slice):
                kinds.append("slice")
            elif isinstance(v, (int, numpy.integer)) and not isinstance(v, bool):
                kinds.append("int")
            else:
                return None  # a list, an int or bool array: advanced indexing copies
        else:
            kinds.append("dynamic")
        if isinstance(p, Var):
            kinds[-1] = "dynamic"
    if "dynamic" in kinds:
        return UNKNOWN
    return CERTAIN if "slice" in kinds else INT
