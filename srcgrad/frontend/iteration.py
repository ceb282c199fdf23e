"""What a `for` loop iterates over (Note [Tracing control flow] in srcgrad.frontend.control):
an index plan `(start, stop, step, index -> loop-variable value)` for a run-time loop over
`range(...)`, `range(...)[::-1]`, an array's rows, `enumerate`/`zip` of arrays; or, for a
sequence known when compiling (a tuple, list, dict, a static range whose body indexes a
container), None and its items, traced one by one.
"""

from __future__ import annotations

import gast

from srcgrad.ir.core import Const, Var

SEQUENCE = "_sequence"  # hidden names of the arrays `for row in x` iterates over


def fresh_name(prefix: str, loop, scope, bare_first: bool = False) -> str:
    """A hidden name of `loop` (its break flag, its unrolled element): `prefix` and the
    count of scope names with that prefix (0: `prefix` alone where `bare_first`), or the
    next free number where the scope or the loop's own code already has the name (code
    srcgrad generated, traced again, binds `_break1` itself: fuzz seed 2684023, where
    vmap's mask and the gradient's break flag were one variable and a 4-step loop stopped
    after one step)."""
    taken = set(scope.env) | {n.id for n in gast.walk(loop) if isinstance(n, gast.Name)}
    k = sum(1 for n in scope.env if n.startswith(prefix))
    while _numbered(prefix, k, bare_first) in taken:
        k += 1
    return _numbered(prefix, k, bare_first)


def _numbered(prefix, k, bare_first):
    return prefix if bare_first and k == 0 else f"{prefix}{k}"


class Iteration:
    """Mixed into Loops (srcgrad.frontend.loops): `expr`, `apply`, `fail` are the Tracer's."""

    def loop_plan(self, node, scope):
        """(start, stop, step, index -> loop-variable value) for an index loop, or None."""
        it = node.iter
        if isinstance(it, gast.Subscript) and _is_builtin_call(it.value, ("range",)):
            return self._reversed_range(node, it, scope)
        if isinstance(it, gast.Call) and isinstance(it.func, gast.Name) and it.func.id == "range" \
                and not it.keywords:
            args = [self.expr(a, scope) for a in it.args]
            if len(args) == 1:
                args = [Const(0), args[0]]
            start, stop, step = (args + [Const(1)])[:3]
            if all(isinstance(a, Const) for a in (start, stop, step)) and _subscripts_containers(
                    node, scope):  # `for i in range(3): layers[i]`: the index must be static
                return self._static(node, Const(range(start.value, stop.value, step.value)))
            return start, stop, step, lambda i, inner: i
        if _is_builtin_call(it, ("enumerate",)) and len(it.args) == 1 and not it.keywords:
            seq = self.expr(it.args[0], scope)
            if isinstance(seq, Var):
                (name,) = self._sequences(node, scope, [seq])
                return (Const(0), self._length(seq), Const(1),
                        lambda i, inner: (i, self._row(inner.env[name], i)))
            return self._static(node, self.builtin(enumerate, [seq], {}, it))
        if _is_builtin_call(it, ("zip",)) and not it.keywords:
            seqs = self.elements(it.args, scope)  # in order: a later one may write (Note
            # [Operands evaluated in order] in srcgrad.ir.expand)
            if all(isinstance(s, Var) for s in seqs) and seqs:
                names = self._sequences(node, scope, seqs)
                return (Const(0), self._shortest(seqs), Const(1),
                        lambda i, inner: tuple(self._row(inner.env[n], i) for n in names))
            return self._static(node, self.builtin(zip, seqs, {}, it))
        value = self.expr(it, scope)
        if isinstance(value, Var):  # rows of an array
            (name,) = self._sequences(node, scope, [value])
            return (Const(0), self._length(value), Const(1),
                    lambda i, inner: self._row(inner.env[name], i))
        return self._static(node, value)

    def _static(self, node, value):
        """None, the plan of a loop traced once per element; the iterable, evaluated here
        once as Python does (a call in it runs once: fuzz seed 703573), is kept for
        static_items."""
        self.__dict__.setdefault("iterables", {})[id(node)] = value
        return None

    def _reversed_range(self, node, it, scope):
        """`for i in range(a, b)[::-1]`: the same indices, last first (a `for_range` with
        step -1; `reversed(range(...))` is the other spelling)."""
        sl = it.slice
        if not (isinstance(sl, gast.Slice) and sl.lower is None and sl.upper is None
                and isinstance(sl.step, gast.UnaryOp) and isinstance(sl.step.op, gast.USub)
                and isinstance(sl.step.operand, gast.Constant) and sl.step.operand.value == 1) \
                or it.value.keywords:
            self.fail(node, "a loop over a slice of a `range` other than `[::-1]`",
                      "loop over `range(start, stop, step)` with the bounds you mean")
        args = [self.expr(a, scope) for a in it.value.args]
        if len(args) == 1:
            args = [Const(0), args[0]]
        start, stop, step = (args + [Const(1)])[:3]
        if all(isinstance(a, Const) for a in (start, stop, step)):
            r = range(start.value, stop.value, step.value)[::-1]
            return Const(r.start), Const(r.stop), Const(r.step), lambda i, inner: i
        if not (isinstance(step, Const) and step.value == 1):
            self.fail(node, "`range(a, b, step)[::-1]` with a step known only at run time",
                      "loop over `reversed(range(a, b, step))`, or a step of 1")
        from srcgrad import rules

        last = self.apply(rules.RULES["subtract"], [stop, Const(1)], {})
        before = self.apply(rules.RULES["subtract"], [start, Const(1)], {})
        return last, before, Const(-1), lambda i, inner: i

    def _sequences(self, node, scope, values) -> list:
        """Bind the arrays a loop iterates over to hidden names: a row is a view of the
        array *as the body sees it*, so a write through a row reaches it (Note [Aliases
        across blocks]); Python evaluates the iterable once, so it is not re-read. The
        names are fresh of the program's and recorded (`hidden_sequences`), so leaving the
        loop drops these only, never a variable of the user's spelled `_sequence0`."""
        names = []
        hidden = self.__dict__.setdefault("hidden_sequences", set())
        for value in values:
            name = fresh_name(SEQUENCE, node, scope)
            scope.env[name] = value
            hidden.add(name)
            names.append(name)
        return names

    def static_items(self, node, scope):
        """The elements of a loop traced once per element, from the iterable loop_plan
        evaluated (read again where the loop iterates over a name)."""
        iterables = self.__dict__.get("iterables", {})
        value = iterables.pop(id(node)) if id(node) in iterables else self.expr(node.iter, scope)
        return self._items(node, value)

    def _items(self, node, value):
        if isinstance(value, Const):
            try:
                return [Const(v) for v in value.value]
            except TypeError:
                self.fail(node.iter, "a loop over a value that is not iterable")
        if isinstance(value, dict):
            return [Const(k) for k in value]
        if isinstance(value, list):
            return value  # itself: the body may change it (trace_unrolled_for)
        if isinstance(value, tuple):
            return list(value)
        self.fail(node.iter, "this loop's iterable", "loop over range(...), an array, or a list")

    def _length(self, array):
        from srcgrad import rules

        shape = self.apply(rules.RULES["shape"], [array], {})
        return self.apply(rules.RULES["getitem"], [shape, Const(0)], {})

    def _shortest(self, arrays):
        """The number of rows `zip` takes: the fewest of its arrays' (fuzz seed 1004433:
        the first one's, and a shorter array's row past its end raised IndexError)."""
        from srcgrad import rules

        lengths = [self._length(array) for array in arrays]
        if len(lengths) > 1 and hasattr(self, "shape_fact"):  # a variant's lengths are known
            lengths = [self.shape_fact(n) for n in lengths]
        if all(isinstance(n, Const) for n in lengths):
            return Const(min(n.value for n in lengths))
        stop = lengths[0]
        for n in lengths[1:]:  # a Python int, as `len` is (a shape fact where shapes are known)
            stop = self.apply(rules.RULES["py_int"], [self.apply(rules.RULES["minimum"], [stop, n], {})], {})
        return stop

    def _row(self, array, index):
        from srcgrad import rules

        return self.apply(rules.RULES["getitem"], [array, index], {})


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


def _target_names(target) -> list:
    return [n.id for n in gast.walk(target) if isinstance(n, gast.Name)]

