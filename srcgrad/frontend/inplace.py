"""In-place statements: `x op= v`, `x[i] = v`, `x.sort()`, `out=` (Note [Mutation at trace time]).

Each statement works out which storage it writes and what that storage holds
afterwards, then hands the write to `Mutation.write` (srcgrad.frontend.mutation),
which rebinds every name sharing it. `x op= v` on a name is the delicate one: it
writes into an ndarray but only rebinds a scalar.
"""

from __future__ import annotations

import gast
import numpy

from srcgrad import rules
from srcgrad.ir.core import Const, Pack, Var


class InPlaceStatements:
    """Mixed into Mutation (srcgrad.frontend.mutation): `tracer`, `write`, `_chain`,
    `history`, `write_log`, `saved` and the alias bookkeeping are Mutation's."""

    def aug_assign(self, node, scope):
        tr = self.tracer
        target, optype = node.target, type(node.op)
        if isinstance(target, gast.Name):
            load = gast.Name(target.id, gast.Load(), None, None)
            old = tr.expr(load, scope)
            mark = len(self.write_log)
            rhs = tr.expr(node.value, scope)
            old = self._reread(load, old, scope, mark)
            if isinstance(old, list) and optype in (gast.Add, gast.Mult):
                from srcgrad.frontend.containers import _iterate, block_changes

                old = block_changes(tr, old, node, "changing a list", structural=True)  # (R1)
                if optype is gast.Add:  # `lst += items` extends the list itself
                    old.extend(_iterate(tr, rhs, node))
                else:
                    old[:] = tr.binop(optype, old, rhs, node)
                return
            new = tr.binop(optype, old, rhs, node)
            if isinstance(old, Const) and not isinstance(old.value, numpy.ndarray):
                tr.bind(target, new, scope)  # an immutable Python value: rebinding
                return
            if not isinstance(old, (Var, Const)):
                tr.bind(target, new, scope)
                return
            self._augment(old, new, node, target.id, _OPS.get(optype, "op"),
                          lambda value: tr.bind(target, value, scope))
        elif isinstance(target, gast.Subscript):
            # Python's order: the target and its index, the item read, then the right side
            # (which may write into the same array: the store goes into what it holds then)
            base = tr.expr(target.value, scope)
            index = tr.index(target.slice, scope)
            if isinstance(base, (tuple, list, dict)):
                from srcgrad.frontend.containers import set_item

                key = index.value if isinstance(index, Const) else None
                if key is None or isinstance(key, slice):
                    tr.fail(node, "augmented assignment to a dynamic or sliced container item")
                try:
                    current = base[key]
                except (IndexError, KeyError, TypeError) as err:
                    tr.error(node, f"cannot evaluate this item: {err}")
                held = tr.hold(current, scope) if id(current) not in self.views or \
                    self.certainly_a_view(current) else current  # a write by the right side
                # rebinds an array or a view of one; one that may be a copy keeps what was read
                rhs = tr.expr(node.value, scope)
                current = tr.release(held, scope)
                new = tr.binop(optype, current, rhs, node)
                if isinstance(current, Var) or isinstance(current, Const) and isinstance(
                        current.value, numpy.ndarray):
                    # NumPy runs `item.__iadd__(v)`: an array item is written in place, so every
                    # name sharing it changes too (`L = [y]; L[0] += x` changes y), then the
                    # item is stored back
                    def store_back(value):  # into the container the name holds now: a
                        # write that poisoned its item bound a copy of it (_remap in blocks)
                        pure = all(isinstance(n, _PURE_NODES) for n in gast.walk(target.value))
                        set_item(tr, tr.expr(target.value, scope) if pure else base, index, value, node)

                    self._augment(current, new, node, f"{_shown(target.value)}[{key!r}]",
                                  _OPS.get(optype, "op"), store_back)
                    return
                set_item(tr, base, index, new, node)
                return
            self._check_local(target, scope)
            current = tr.apply(rules.RULES["getitem"], [base, index], {}, node)
            mark = len(self.write_log)
            # a view (`x[0:2]`) sees what the right side writes into x, a copy (`x[1]` of a
            # vector, `x[[0, 1]]`) does not; one that is either by the run-time layout
            # (`x[0]`: a row of a matrix, an element of a vector) takes what NumPy read then
            certain, maybe = self.certainly_a_view(current), id(current) in self.views
            held = tr.hold(current, scope) if maybe else current
            rhs = tr.expr(node.value, scope)
            after = tr.release(held, scope)
            if not certain and after is not current:  # the right side wrote into its storage
                flag = self.view_flags.get(id(current))
                if flag is None:
                    op = _OPS.get(optype, "op")
                    tr.fail(node, f"`{_shown(target)} {op}= ...` with a right side that writes into "
                            f"`{_shown(target.value)}` (NumPy reads the item before the right side "
                            "where it is a copy, after it where it is a view, and the compiler cannot "
                            "tell which here)", f"compute the right side first: `v = ...` then "
                            f"`{_shown(target)} {op}= v`")
                after = self.select_view(flag, after, current)
            current = after
            base = self._reread(target.value, base, scope, mark)
            self.store(base, index, tr.binop(optype, current, rhs, node), node)
        else:
            tr.fail(node, f"augmented assignment to `{type(target).__name__}`",
                    "assign to a name or an array item")

    def _augment(self, old, new, node, shown, op, rebind):
        """`<shown> op= ...` on an array value `old` (a name, or a container's item), whose
        result is `new`: in place where others share its storage, else a rebinding
        (`rebind(value)` binds the name or stores the item)."""
        tr = self.tracer
        self._refuse_shared(old, node, f"`{shown} {op}= ...`")
        self.layout.written(self._chain(old))  # a view or scalar decided by a loop param's fact
        refs = self._family_refs(old) + self.saved.references(old)
        if refs <= 1:  # only this name sees the storage for certain: in place == rebinding
            bound = self._guard_input(old, new)
            self.history[id(bound)] = old
            # names that are its storage on some paths only (`y = x if c else z; y += 1`,
            # or `z = x if c else w; x += 1`) change on those paths only (Note [Aliases
            # across blocks]; fuzz seeds 28843, 21400); `y` itself reads the same either way
            self._poison_merged(old, tr.loc)
            rebind(bound)
        elif self.is_array(old) or self.layout.is_array(old):  # (Note [Layout facts])
            self.write(old, new, node, "name")
        elif self.layout.is_scalar(old):  # a NumPy scalar: immutable (Note [Layout facts])
            rebind(new)
        elif (flag := self.array_flag(old)) is not None:  # Note [Views of arguments]
            self.write_if_array(old, new, node, flag)
            rebind(new)
        else:
            self.saved.written(old, False, tr.loc)
            self._poison_family(old, node, f"`{shown} {op}= ...` writes into `{shown}` "
                                "if it is an ndarray (changing every name that shares it) but "
                                "only rebinds it if it is a scalar, and the compiler cannot "
                                "tell which", f"write `{shown} = {shown} {op} ...` to "
                                "leave the other names unchanged")
            self._poison_merged(old, tr.loc)
            rebind(new)

    def _reread(self, node, old, scope, mark):
        """What the storage `old` was read from holds after the right side of `x op= ...`
        ran: `old` itself unless that right side wrote into arrays (an inlined helper
        writing through a view of x: NumPy's in-place op sees its write; fuzz seed 316)."""
        if len(self.write_log) == mark or not isinstance(old, (Var, Const)) or not all(
                isinstance(n, _PURE_NODES) for n in gast.walk(node)):
            return old  # nothing written, or re-reading would run a call again
        now = self.tracer.expr(node, scope)
        return now if isinstance(now, (Var, Const)) and self._same_object(now, old) else old

    def _same_object(self, now, old) -> bool:
        """`now` is the object `old` was, after writes: by their history, or a merge each of
        whose values is (a write that reached it on some paths only: a helper's `a0 *= k`
        where a0 may be an ndarray or a scalar; fuzz seed 2100169, where `x0 += h(x0, x0)`
        added to the value before h's write)."""
        target, todo, seen = self.origin(old), [now], set()
        while todo:
            t = todo.pop()
            if self.origin(t) is target or id(t) in seen:
                continue
            seen.add(id(t))
            sources = self.merged.get(id(t))
            if not sources:
                return False
            todo.extend(sources)
        return True

    def inplace_method(self, call, scope) -> bool:
        """`x.sort()` / `x.fill(v)` as a statement on an array: a write into x. True when
        handled; other ndarray methods that write in place are refused."""
        tr = self.tracer
        func = call.func
        if not isinstance(func, gast.Attribute) or func.attr not in _INPLACE_METHODS:
            return False
        base = tr.expr(func.value, scope)
        if not isinstance(base, (Var, Const)) or (isinstance(base, Const) and not isinstance(
                base.value, numpy.ndarray)):
            return False  # a list's `.sort()`, an object's method: an ordinary call
        if func.attr not in ("sort", "fill") or call.keywords or len(call.args) > 1:
            tr.fail(call, f"the in-place array method `.{func.attr}()`",
                    "use the NumPy function that returns a new array and assign it")
        self._check_local(gast.Subscript(value=func.value, slice=None, ctx=gast.Store()), scope)
        args = [tr.expr(a, scope) for a in call.args]
        if func.attr == "sort":
            new = tr.apply(rules.RULES["sort"], [base, *args], {}, call)
        else:
            new = tr.apply(rules.RULES["setitem"], [base, Const(Ellipsis), args[0]], {}, call)
        self.write(base, new, call, "out")
        return True

    def store_subscript(self, target, value, scope):
        tr = self.tracer
        base = tr.expr(target.value, scope)
        index = tr.index(target.slice, scope)
        if isinstance(base, (tuple, list, dict)):
            from srcgrad.frontend.containers import set_item

            set_item(tr, base, index, value, target)
            return
        self._check_local(target, scope)
        self.store(base, index, value, target)

    def store(self, base, index, value, node):
        """`base[index] = value` on an array tvalue."""
        tr = self.tracer
        if isinstance(base, Const) and not isinstance(base.value, numpy.ndarray):
            tr.error(node, f"'{type(base.value).__name__}' object does not support item assignment")
        if not isinstance(base, (Var, Const)):
            tr.fail(node, "item assignment into this value")
        root = self._chain(base)[-1]
        if self._views_of(value, root) and not self._copies_first(base, index, value, root):
            # NumPy copies overlapping strided views element by element (seed 9079: `x[:, 0] =
            # x.ravel()[:4]`), so its result depends on memory order; compiled code's does not
            # (Note [Assigning a view of the array itself])
            tr.fail(node, "assigning into an array a view of that same array",
                    "assign a copy: `x[...] = (...).copy()`")
        new = tr.apply(rules.RULES["setitem"], [base, index, value], {}, node)
        self.write(base, new, node, "subscript")

    # Note [Assigning a view of the array itself]
    # ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
    # Compiled code computes `x[index] = v` from v as it was before the write (copy
    # first). NumPy does the same where its source says so (numpy/_core/src/multiarray):
    # * an integer-array index: mapping.c's array_assign_subscript copies a value that
    #   `solve_may_share_memory` says may overlap x (`_integer_array_index`, I5);
    # * a 0-d value (`x[1:] = x[:1].reshape(())`): one element, read once
    #   (PyArray_AssignRawScalar, or PyArray_Pack for an integer on every axis);
    # * a basic index (integers, slices, None, ...) whose destination `x[index]` is not
    #   1-D: PyArray_AssignArray (array_assign_array.c) copies an overlapping value when
    #   the destination has more than one axis, and a 0-d destination is one element;
    # * a 1-D destination: PyArray_AssignArray copies where the value's strides run the
    #   other way; where they run the same way raw_array_assign_array copies element by
    #   element, forwards or backwards as memmove would, which is copy-first only when
    #   both strides are equal. Known here for slices of a 1-D array: each stride is
    #   the array's stride times the product of the slice steps (`x[1:] = x[:-1]`).
    # A boolean mask on every axis (array_assign_boolean_subscript) has no overlap
    # check: refused, as is every other case. The rule was checked against NumPy on
    # 15,000 random cases of each kind (views through slices, transposes, reshapes,
    # integers and new axes; C, F and strided roots): never a difference.
    def _copies_first(self, base, index, value, root) -> bool:
        """Whether NumPy's `base[index] = value`, value a view of `root`, writes what
        copying the value first writes (Note [Assigning a view of the array itself])."""
        if _integer_array_index(index):
            return True
        if self._rank(value) == 0:
            return True  # a NumPy scalar, or a 0-d array
        kinds = self._basic_kinds(index)
        rank = self._rank(base)
        if kinds is None or rank is None:
            return False
        if rank - kinds.count("int") + kinds.count("new") != 1:
            return True
        root_fact = self.layout.fact(root)
        if kinds != ["slice"] or root_fact is None or root_fact.ndim != 1:
            return False
        (part,) = _parts(index)
        if not (isinstance(part, Const) and isinstance(part.value, slice)):
            return False
        base_steps, src = self._slice_steps(base, root), self._slice_steps(value, root)
        if base_steps is None or src is None:
            return False
        dst = base_steps * (part.value.step or 1)  # strides, in units of the root's stride
        return dst == src or dst * src < 0

    def _basic_kinds(self, index) -> list | None:
        """The kinds of a basic index's parts ("int", "slice", "new", "..."), None where
        a part may be an array or is not known. A run-time scalar counts as an integer
        (a 0-d boolean would make it an advanced index: copied first too)."""
        kinds = []
        for p in _parts(index):
            v = p.value if isinstance(p, Const) else p
            if isinstance(v, (bool, numpy.bool_)):
                return None
            if isinstance(v, (int, numpy.integer)):
                kinds.append("int")
            elif isinstance(v, slice):
                kinds.append("slice")
            elif v is None:
                kinds.append("new")
            elif v is Ellipsis:
                kinds.append("...")
            elif isinstance(p, Pack):
                kinds.append("slice")  # a slice with bounds known at run time
            elif isinstance(v, Var) and self._an_int(v):
                kinds.append("int")
            else:
                return None
        return kinds

    def _an_int(self, v, depth=0) -> bool:
        """`v` is a Python int: a shape's item, a `for` loop's index, or int arithmetic
        on them and int constants (`x[i + 1]`)."""
        if isinstance(v, Const):
            return isinstance(v.value, (int, numpy.integer)) and not isinstance(v.value, bool)
        if not isinstance(v, Var) or depth > 20:
            return False
        if self.layout._an_int(v):
            return True
        made = self.layout.made.get(id(v))
        return made is not None and made[0] in _INT_ARITHMETIC and all(
            self._an_int(o, depth + 1) for o in made[2])

    def _rank(self, v) -> int | None:
        """`v`'s number of axes where known: its layout fact's, or its base's through a
        basic index (`v2[i]` of a 1-D v2 is 0-d whatever i is)."""
        fact = self.layout.fact(v)
        if fact is not None and fact.ndim is not None:
            return fact.ndim
        view = self.views.get(id(v))
        if view is None or not view[3]:
            return None
        shape = view[3][0]
        if view[2] == "reshape" and isinstance(shape, Const):  # `.reshape(())`: 0-d
            return len(shape.value) if isinstance(shape.value, tuple) else 1
        if view[2] != "getitem":
            return None
        kinds, rank = self._basic_kinds(view[3][0]), self._rank(view[1])
        if kinds is None or rank is None:
            return None
        return rank - kinds.count("int") + kinds.count("new")

    def _slice_steps(self, value, root) -> int | None:
        """The product of the slice steps from `root` to `value` when every step between
        them is a basic slice (`x[1:]`, `x[::-1][:3]`), else None."""
        steps, cur = 1, value
        while cur is not root:
            if id(cur) not in self.views:
                return None
            _, parent, rule, rest, _ = self.views[id(cur)]
            index = rest[0] if rule == "getitem" and rest else None
            if isinstance(index, Const) and isinstance(index.value, tuple) and len(index.value) == 1:
                index = Const(index.value[0])
            if not (isinstance(index, Const) and isinstance(index.value, slice)):
                return None
            steps *= index.value.step or 1
            cur = parent
        return steps

    def _views_of(self, value, root) -> bool:
        """Whether `value` is, on some path (branch merges included), `root` or its view."""
        todo, seen = [value], set()
        while todo:
            v = todo.pop()
            if id(v) in seen:
                continue
            seen.add(id(v))
            if v is root or (id(v) in self.views and self._chain(v)[-1] is root):
                return True
            todo.extend(self.merged.get(id(v), ()))
        return False

    def write_out(self, out, result, node):
        """`f(..., out=c)`: c's storage holds `result`; the call returns c."""
        tr = self.tracer
        if isinstance(out, tuple) and len(out) == 1:
            out = out[0]
        if isinstance(out, Const) and out.value is None:
            return result
        if not isinstance(out, (Var, Const)) or not isinstance(result, (Var, Const)):
            tr.fail(node, "this `out=` argument", "assign the result instead: `c = np.f(...)`")
        if isinstance(out, Const) and not isinstance(out.value, numpy.ndarray):
            tr.error(node, "`out=` must be an array")
        # NumPy casts into out's dtype and requires the result's shape to be out's.
        shaped = tr.apply(rules.RULES["broadcast_to"],
                          [result, tr.apply(rules.RULES["shape"], [out], {}, node)], {}, node)
        return self.write(out, shaped, node, "out")


    def _check_local(self, target, scope):
        """Item assignment must write into a local array, not a global or an attribute."""
        node = target.value
        while isinstance(node, gast.Subscript):
            node = node.value
        if isinstance(node, gast.Name) and scope.owner(node.id) is not None:
            return
        what = f"`{node.id}`" if isinstance(node, gast.Name) else "this value"
        self.tracer.error(target, f"writing into {what}, which is not a local variable of the "
                          "compiled function (a global, closure value or attribute), is not "
                          "supported", "copy it into a local first (`w = w.copy()`) and return "
                          "the result")


# Expressions that read names, attributes, items and constants only (re-read after a write).
_PURE_NODES = (gast.Name, gast.Attribute, gast.Subscript, gast.Constant, gast.Slice, gast.Tuple,
               gast.Load, gast.UnaryOp, gast.USub, gast.BinOp, gast.operator)

_INPLACE_METHODS = frozenset({"sort", "fill", "put", "partition", "resize", "itemset", "setfield",
                              "byteswap"})
_OPS = {gast.Add: "+", gast.Sub: "-", gast.Mult: "*", gast.Div: "/", gast.Pow: "**",
        gast.MatMult: "@", gast.FloorDiv: "//", gast.Mod: "%"}


def _shown(node) -> str:
    """How the user wrote a container's name (`L`, `self.items`)."""
    import ast

    return ast.unparse(gast.gast_to_ast(node)) if not isinstance(node, gast.Name) else node.id


def _integer_array_index(index) -> bool:
    """Whether `x[index] = v` indexes with an integer array (a constant list or array of
    ints, beside ints and slices): NumPy's advanced assignment then copies a `v` that
    overlaps `x` before writing (its map iterator's copy-if-overlap), which is what
    compiled code computes. Not a boolean mask: a mask with every axis of `x` is
    assigned element by element with no copy, so its result depends on memory order."""
    parts = index if isinstance(index, tuple) else (
        tuple(Const(v) for v in index.value) if isinstance(index, Const)
        and isinstance(index.value, tuple) else (index,))
    found = False
    for p in parts:
        value = _constant(p)
        if value is None and not (isinstance(p, Const) and p.value is None):
            return False  # a value known only at run time: its dtype too
        if isinstance(value, (list, numpy.ndarray)):
            if numpy.asarray(value).dtype.kind not in "iu":
                return False
            found = True
        elif not (value is None or value is Ellipsis or isinstance(value, slice)
                  or isinstance(value, (int, numpy.integer)) and not isinstance(value, bool)):
            return False
    return found


_INT_ARITHMETIC = frozenset({"add", "subtract", "multiply", "floor_divide", "negative"})


def _parts(index) -> tuple:
    """An index's parts, each a Const, a Var or a Pack (a slice with run-time bounds):
    `x[1:, i]` has (Const(slice), Var)."""
    if isinstance(index, Const) and isinstance(index.value, tuple):
        return tuple(Const(v) for v in index.value)
    if isinstance(index, Pack) and index.style != "slice":
        return tuple(index.items)
    return tuple(index) if isinstance(index, tuple) else (index,)


def _constant(v):
    """The Python value of a Const, or of a (nested) list of them; None otherwise."""
    if isinstance(v, Const):
        return v.value
    if isinstance(v, list):
        items = [_constant(x) for x in v]
        return None if any(i is None for i in items) else items
    return None
