"""Values a custom Function saved, then written in place (Note [Saved values written in place]).

Note [Saved values written in place]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
PyTorch records a saved tensor's version when it is saved and raises at backward if
an in-place write changed it since ("... modified by an inplace operation"). Compiled
code is functional (Note [Mutation at trace time]): a saved Var holds the value it had
when saved whatever is written later, so the values the compiler itself saves (what
a derivative formula reads) need no check, and none is emitted. A custom Function's
`ctx.save_for_backward(x)` is different: the user saved an *array* in torch's sense,
and a later write into its storage is the mistake torch reports. Each write is
compared with each value saved so far, through the views recorded while tracing:

* certainly written: the write's target and the saved value are one storage through
  steps that are certainly views (the value itself, a basic slice of it, its base).
  Reverse mode raises CompileError naming the line that saved it and the line that
  wrote it (PyTorch finds this only at backward);
* possibly written: they are linked only through a step that is a view or a copy
  depending on run-time facts (`reshape`/`ravel`, a dynamic or integer index, `x +=`
  on a value that may be a NumPy scalar, which only rebinds). The forward computes
  at the write `storage_written(saved, target)`: is the target an array, and do the
  two share a buffer. The backward reads the saved value through
  `check_saved(value, flags, ...)`, which raises PyTorch's RuntimeError, naming both
  lines, when a flag is set;
* separate storages: nothing is emitted.

As in torch, the version is per storage: a write into any view of the saved value's
base counts, even where it does not overlap the saved elements. Forward mode never
checks (torch runs `jvp` inside `apply`, before any later write). Under
`sg.autograd.graph.allow_mutation_on_saved_tensors()` there is neither error nor
check: the functional code already kept the value as saved, which is what torch's
copy-before-write gives.

Two arguments may be one array at run time (`f(a, a)`); a write into one of them is
refused at run time by `no_alias` (Note [Mutation at trace time]) before a saved
value could be involved. Inside a loop body a save is compared with the writes that
follow it in the same iteration; a write in the next iteration into what this one
saved is not seen (the gradient is still that of the values as saved).

Where the flag is computed: in the op list the save was traced into, the backward
reads it beside the saved value. A value saved at the function's own level and
possibly written later inside an `if`/loop (of the function, or of a function
called in it) has a version count, a hidden name of the function's scope
(`_saved_version_<k>`, 0 at the save): the write adds its flag to it, and blocks
carry it as any name they rebind (an `if` merges it, a loop carries it, an early
return's branches merge it with the result). The backward reads its value at the
function's end. Should a count not reach the end from every write (a write inside a
conditional expression, or a block of a called function's own scope), the write
is refused, as any possible write that cannot be checked: `finish` follows each
count back through the ops.

Paths. torch raises only where the write ran after the save, so "certainly written"
is a CompileError only where both are certain to run once the save did: the write is
in the function's own ops. A certain write inside an `if`/loop is counted at run time
like a possible one (fuzz seed 760043: a write in an `else` the data never takes); a
save and a write in one block's ops get a flag beside the saved value, so a block that
does not run neither saves nor raises (seed 760593; a loop body that saves and writes
raises at the first iteration's backward). A save and a write in two branches of one
`if` never meet (`_exclusive`, seed 760692) and are not compared. A value saved inside
a block and certainly written at the function's level after it gets a constant flag:
the backward that reads it runs only where the save did (seed 760699). What stays
refused: a value saved inside a block and *possibly* written after it (its flag would
read the saved value on the path that did not save it), or written in a later block.
"""

from __future__ import annotations

from srcgrad import rules
from srcgrad.errors import CompileError
from srcgrad.ir.core import FACTORY, Const, Fields, Pack, Var

CERTAIN, POSSIBLE = "certain", "possible"
COUNT_NAME = "_saved_version_"  # the hidden name of a record's version count, then its index


class SavedRecord(Fields):
    """One value a Function's `save_for_backward` saved, and the writes that followed (a
    `@dataclass(eq=False)` written out: srcgrad.ir.core.Loc says why)."""

    __slots__ = __match_args__ = ("value", "function", "loc", "allow", "shown", "certain", "ops",
                                  "possible", "hidden", "counted", "where")

    def __init__(self, value: Var, function: str, loc: object, allow: bool, shown: str,
                 certain: list = FACTORY, ops: list | None = None, possible: list = FACTORY,
                 hidden: str | None = None, counted: list = FACTORY, where: tuple = ()):
        self.value = value
        self.function = function  # the Function's class name
        self.loc = loc  # the save_for_backward call
        self.allow = allow  # saved under allow_mutation_on_saved_tensors: writes are allowed
        self.shown = shown  # how the save call names it
        self.certain = [] if certain is FACTORY else certain  # Locs of writes that changed it
        self.ops = ops  # the op list the save was traced into (a block's, or the function's)
        self.possible = [] if possible is FACTORY else possible  # (flag Var, Loc) of writes that may have
        self.hidden = hidden  # the name of its version count in the function's scope
        self.counted = [] if counted is FACTORY else counted  # (count after a write, Loc) in blocks
        self.where = where  # the blocks around the save (_position)


class SavedWrites:
    """The saved values of one trace, checked against each in-place write."""

    def __init__(self, mutation):
        self.mutation = mutation
        self.records: list = []
        self.allow = False  # tracing under allow_mutation_on_saved_tensors
        self.aliases: dict = {}  # id(a custom_call output) -> the forward's value it names
        self.param_inits: dict = {}  # id(loop param) -> the value it starts as

    def note_param(self, param, init) -> None:
        """A loop's `param` starts as `init`: a write through it may reach init's storage
        (it is init's array until the body binds the name to another)."""
        if isinstance(param, Var) and isinstance(init, (Var, Const)):
            self.param_inits[id(param)] = init

    def same_storage(self, name, value) -> None:
        """`name` (a custom_call output) is `value` (what the forward returned)."""
        self.aliases[id(name)] = value

    def save(self, value, function: str, loc, shown: str | None) -> SavedRecord | None:
        """Record `value`, saved by `function` at `loc` (`shown`: its name there)."""
        if not isinstance(value, Var):
            return None  # None, or a constant array (writing into a global is refused)
        tracer = self.mutation.tracer
        record = SavedRecord(value, function, loc, self.allow, shown or "a value", ops=tracer.ops,
                             where=_position(tracer))
        if record.ops is self.mutation.top_ops and tracer.scopes and not record.allow:
            record.hidden = f"{COUNT_NAME}{len(self.records)}"
            tracer.scopes[0].env[record.hidden] = Const(0)
        self.records.append(record)
        return record

    def references(self, target) -> int:
        """How many saved values share `target`'s storage (certainly or possibly)."""
        return sum(1 for r in self.records if self.relation(r.value, target, False) is not None)

    def written(self, target, proven_array: bool, loc) -> None:
        """`target`'s storage was written (`proven_array`: the write itself shows it is an
        ndarray, as a subscript write does; else `x += ...` on a name)."""
        tracer = self.mutation.tracer
        here = _position(tracer)
        for record in self.records:
            if record.allow or _exclusive(record.where, here):
                continue  # no check: the functional code keeps the value as saved, or the
                # save and the write are on different paths
            relation = self.relation(record.value, target, proven_array,
                                     params=record.hidden is not None)
            if relation == CERTAIN and not proven_array and not self.mutation.is_array(target):
                relation = POSSIBLE  # `x += 1` on a value that may be a NumPy scalar
            if relation is None:
                continue
            if relation == CERTAIN and tracer.ops is self.mutation.top_ops:
                if record.ops is self.mutation.top_ops:
                    record.certain.append(loc)  # on every path that reaches the backward
                else:  # saved inside an `if`/loop: its backward runs only where the save
                    # did, and then the write followed it (fuzz seed 760699)
                    record.possible.append((Const(1), loc))
            elif record.ops is tracer.ops:
                # the write and the save are in one op list (the function's, or one
                # block's): the flag is read beside the saved value, and where the block
                # does not run neither does the Function's backward (fuzz seed 760593: a
                # save and a write in an `elif` the data never takes)
                record.possible.append((self._flag(record, target), loc))
            elif self._count(record, target, loc):
                pass  # inside an `if`/loop: the write may not run (fuzz seed 760043)
            elif relation == CERTAIN:
                record.certain.append(loc)
            else:
                # the check reads the saved value where the write is: a value saved
                # inside an `if` exists on one path only (fuzz seed 81318: `v = c if t
                # else x.reshape(...) * F.apply(...)` then a write into x read an unbound
                # name in the generated code)
                _unchecked(record, loc)

    def _flag(self, record, target):
        """`storage_written(saved, target)`, computed here."""
        tracer = self.mutation.tracer
        flag = tracer.apply(rules.RULES["storage_written"], [record.value, target], {})
        if isinstance(flag, Var):
            flag.name = tracer.namer.fresh(f"{getattr(target, 'name', 'x').lstrip('_')}_written")
        return flag

    def _count(self, record, target, loc) -> bool:
        """Add this write's flag to the record's version count, inside a block of the
        function's own scope (Note [Saved values written in place]); False elsewhere."""
        tracer = self.mutation.tracer
        if record.hidden is None or not tracer.blocks or not tracer.scopes:
            return False
        top = tracer.scopes[0]  # a callee's `if` copies its callers' envs, its loop does
        env = top.env  # not: every block around the write counts (Note [Writes by callees
        # inside blocks] in inlining.py; fuzz seed 1401800: a count in a callee's `if` in its
        # `while` never left the loop, a NameError in the backward)
        if tracer.block_outside(top) or record.hidden not in env:
            return False
        count = tracer.apply(rules.RULES["add"], [env[record.hidden], self._flag(record, target)], {})
        if isinstance(count, Var):
            count.name = tracer.namer.fresh(record.hidden.lstrip("_"))
        env[record.hidden] = count
        record.counted.append((count, loc))
        return True

    def finish(self, env, ops) -> None:
        """At the function's end: each count read by the backward, once every write
        counted in a block reaches it (else that write is refused)."""
        for record in self.records:
            if not record.counted:
                continue
            final = env.get(record.hidden)
            reached, defined = _reaching(final, ops)
            # (a count no op defines was traced in a loop body traced again: not the program)
            counted = [(c, loc) for c, loc in record.counted if id(c) in defined]
            for count, loc in counted:
                if id(count) not in reached:
                    _unchecked(record, loc)
            locs = list(dict.fromkeys(loc for _, loc in counted))
            record.possible.append((final, _Writes(locs)))

    def relation(self, saved, target, proven_array: bool, params: bool = False):
        """CERTAIN, POSSIBLE or None: whether writing into `target`'s storage writes
        `saved`'s, judged by the view steps between them. A subscript write proves each
        integer-indexed step above its target was a view, not a scalar. `params`: a
        loop's param may be the array it starts as (a value saved before the loop)."""
        up_saved, up_target = self._path(saved, params), self._path(target, params)
        if proven_array:
            up_target = [(t, "view" if k == "int" else k) for t, k in up_target]
        depth = {id(t): i for i, (t, _) in enumerate(up_target)}
        for i, (t, _) in enumerate(up_saved):
            j = depth.get(id(t))
            if j is not None:
                steps = [k for _, k in up_saved[1:i + 1]] + [k for _, k in up_target[1:j + 1]]
                return CERTAIN if all(k == "view" for k in steps) else POSSIBLE
        return None

    def _path(self, t, params: bool = False) -> list:
        """[(t, None), (its parent, how certain that view step is), ...] up to the root."""
        views = self.mutation.views
        path = [(t, None)]
        while True:
            top = path[-1][0]
            if id(top) in views:
                path.append((views[id(top)][1], views[id(top)][4]))
            elif id(top) in self.aliases:
                path.append((self.aliases[id(top)], "view"))
            elif params and id(top) in self.param_inits:  # the same array, or another
                path.append((self.param_inits[id(top)], "unknown"))
            else:
                return path


def _position(tracer) -> tuple:
    """The blocks being traced now, outermost first: (parent op list, its length when the
    block began, the block's op list). A parent's list does not grow while a block in it
    is traced, so its length now is its length when the block began."""
    lists = [*getattr(tracer, "enclosing", ()), tracer.ops]
    return tuple((parent, len(parent), block) for parent, block in zip(lists, lists[1:]))


def _exclusive(saved_at: tuple, written_at: tuple) -> bool:
    """Whether a save traced at `saved_at` and a write traced later at `written_at` are in
    two branches of one `if` (fuzz seed 760692: `if c: return F.apply(v.ravel())` in
    the first branch, `v[0] = ...` in an `elif`), so that no run makes both: at the first
    level where their blocks differ, both blocks began in one parent op list at one
    length (nothing was emitted between the two branches; the next statement's block
    begins after the `cond` op of this one). A loop body traced again, whose first trace
    the program does not keep, looks the same: its saves are not the program's either."""
    for s, w in zip(saved_at, written_at):
        if s[2] is w[2]:
            continue  # the same block: look one level deeper
        return s[0] is w[0] and s[1] == w[1]
    return False


def _unchecked(record, loc):
    raise CompileError.at(loc, f"this in-place write may change a value that "
                          f"{record.function} saved for backward at {record.loc}, "
                          "and inside an `if`/loop the compiler cannot check it "
                          "at run time", hint="write out of place, or save a copy "
                          "(`ctx.save_for_backward(x.copy())`)")


class _Writes(list):
    """The Locs of the writes one version count adds up (named together in the error)."""


def _reaching(value, ops) -> tuple:
    """(ids of the values `value` is computed from, through the ops (a region op's
    output from its blocks' results at the same place; a loop's from all of them),
    ids of every value the ops define)."""
    producer: dict = {}

    def index(op_list):
        for op in op_list:
            for i, out in enumerate(op.outs):
                producer[id(out)] = (op, i)
            for block in op.blocks or ():
                index(block.ops)
    index(ops)
    seen, todo = set(), [value]
    while todo:
        v = todo.pop()
        if not isinstance(v, Var) or id(v) in seen:
            continue
        seen.add(id(v))
        if id(v) not in producer:
            continue
        op, i = producer[id(v)]
        todo.extend(op.operand_vars())
        for block in op.blocks or ():
            results = list(block.results)
            todo.extend([results[i]] if op.prim == "cond" and i < len(results) else results)
    return seen, producer


def checked_saved(tracer, value, record: SavedRecord | None):
    """`value` (the saved value, or its unpacked copy) as the backward reads it:
    CompileError if it was certainly written, through `check_saved` if it may have been."""
    if record is None or record.allow:
        return value
    if record.certain:
        write = record.certain[0]
        raise CompileError.at(write, f"one of the variables needed for gradient computation is "
                              f"modified by an inplace operation: {record.function} saved "
                              f"`{record.shown}` for backward at {record.loc} "
                              f"(`{record.loc.text}`), and line {write.line} (`{write.text}`) "
                              "writes into it before the backward reads it",
                              hint="write out of place (`x = x + 1`), save a copy "
                              "(`ctx.save_for_backward(x.copy())`), or run under "
                              "`sg.autograd.graph.allow_mutation_on_saved_tensors()`")
    if not record.possible:
        return value
    flags = Pack(tuple(flag for flag, _ in record.possible))
    writes = tuple(" or ".join(f"{_short(w)} (`{w.text}`)" for w in loc) if isinstance(loc, _Writes)
                   else f"{_short(loc)} (`{loc.text}`)" for _, loc in record.possible)
    return tracer.apply(rules.RULES["check_saved"], [
        value, flags, Const(record.function), Const(_short(record.loc)), Const(writes)], {})


def _short(loc) -> str:
    """`file.py:12`, as generated comments name lines (no machine-specific directory)."""
    import os

    return f"{os.path.basename(loc.file)}:{loc.line}"
