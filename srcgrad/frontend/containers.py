"""Tuples, lists and dicts of arrays while tracing: methods and comprehensions.

Containers are the tracer's own native Python containers of tvalues (Note [Static
versus dynamic values] in srcgrad.ir.core): their *structure* is static, their
elements may be dynamic. So `lst.append(v)`, `lst[i] = v` and `d[k] = v` mutate
the native container at trace time; names bound to the same list see the change,
exactly as in Python, and no op is emitted. Only the elements reach the IR.

Note [Containers changed inside blocks]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
An if/loop block on array values (Note [Tracing control flow] in
srcgrad.frontend.control) is traced in a copy of the env whose containers are the
enclosing code's objects, so an in-place change there would leak into the other
branch and past the block. `block_changes` says what a change inside a block may do:

* a container the block made (not reachable from any name when the block began:
  `trace_block` records those, `enter_block`) is changed in place: no one outside
  sees it;
* a container from outside the block that exactly one name refers to (no other name,
  no container or record holding it) is copied on write and the copy bound to that
  name: the change is a rebinding (`L[0] = v` is `L = L[:0] + [v] + L[1:]`), which an
  `if` merges and a loop carries leafwise, as any rebound name (Note [Containers
  carried by loops] in srcgrad.frontend.loops);
* one that other names or containers share is refused: a copy would miss them; so is
  one an enclosing unrolled loop iterates over (`for v in L:`), whose iterator would
  not see the copy.

A change of structure (`.append`, a new dict key) is legal, but a container's
structure is static: when it differs between the branches of an `if`, or between
before a loop and the end of its body, the block is refused, naming the line of
the change (`structure_change`).

Note [Containers merged across paths]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Where paths meet (an `if` on array values, a loop's iterations), a name bound to a
list or dict on each path gets one container, built leafwise by the merge. In Python
it *is* one of the paths' objects (`M = L if c else K`; `for ...: M = K`), so a later
change through it reaches that object, and one through `L` reaches `M` when `c` was
true. A container both paths hold (`T = (L, x)` or `T = (L, y)`) stays that object
in the merged value (`merged`). For the others the merge records which objects the
new one may be (the same positions on each path); a later change to the merged
container, or to one of those objects, is refused while another object it may be
(following those links in turn: two merges of one branch's list may be one object)
can still be reached from a name (`_refuse_ambiguous`): a copy could not tell which
one the change reaches. Containers no name reaches after the merge
(the copies a branch wrote into, a list built in a branch) cannot be told apart, so
`L = []; if c: L.append(x) else: L.append(y)` followed by `L.append(z)` compiles.
"""

from __future__ import annotations

import gast

from srcgrad.frontend.scope import Scope, every_scope
from srcgrad.ir.core import Const, Var
from srcgrad.ir.tree import is_record as _is_record
from srcgrad.ir.tree import record_fields

# Methods that read a container and leave it unchanged, or change only its structure.
_LIST_METHODS = {"append", "extend", "insert", "pop", "copy", "index", "count", "reverse", "clear"}
_DICT_METHODS = {"items", "keys", "values", "get", "update", "pop", "copy", "setdefault", "clear"}
_TUPLE_METHODS = {"index", "count"}
_CHANGING = {"append", "extend", "insert", "pop", "reverse", "clear", "update", "setdefault"}
_KEEPS_STRUCTURE = {"reverse"}  # changing methods after which the container has the same shape


def _static(tracer, value, node, what):
    if not isinstance(value, Const):
        tracer.fail(node, f"{what} that depends on array values")
    return value.value


def _items(value):
    """The elements of a static sequence tvalue, as tvalues."""
    if isinstance(value, Const):
        return [Const(v) for v in value.value]
    if isinstance(value, dict):
        return [Const(k) for k in value]
    return list(value)


def method(tracer, base, name, args, kwargs, node):
    """`base.<name>(*args, **kwargs)` for a native tuple/list/dict tvalue."""
    allowed = (_DICT_METHODS if isinstance(base, dict) else
               _LIST_METHODS if isinstance(base, list) else _TUPLE_METHODS)
    if name not in allowed or kwargs:
        kind = type(base).__name__
        tracer.fail(node, f"the {kind} method `.{name}()`",
                    f"compiled code supports {', '.join(sorted(allowed))} on a {kind}")
    if name in _CHANGING:
        base = block_changes(tracer, base, node, f"`.{name}()` of a {type(base).__name__}",
                             structural=name not in _KEEPS_STRUCTURE)
    if isinstance(base, dict):
        return _dict_method(tracer, base, name, args, node)
    if name == "append":
        base.append(args[0])
    elif name == "extend":
        base.extend(_iterate(tracer, args[0], node))
    elif name == "insert":
        base.insert(_static(tracer, args[0], node, "a list position"), args[1])
    elif name == "pop":
        return base.pop(*(_static(tracer, a, node, "a list position") for a in args))
    elif name == "copy":
        return list(base)
    elif name == "reverse":
        base.reverse()
    elif name == "clear":
        base.clear()
    else:  # index / count: by identity of tvalues, or equality of static values
        target = args[0]
        hits = [i for i, v in enumerate(base) if v is target or (
            isinstance(v, Const) and isinstance(target, Const) and _equal(v.value, target.value))]
        if name == "count":
            return Const(len(hits))
        if not hits:
            tracer.error(node, "list.index(x): x not in list")
        return Const(hits[0])
    return Const(None)


def _equal(a, b):
    try:
        return bool(a == b)
    except Exception:  # arrays: ambiguous truth value
        return a is b


def _dict_method(tracer, base, name, args, node):
    if name == "items":
        return [(Const(k), v) for k, v in base.items()]
    if name == "keys":
        return [Const(k) for k in base]
    if name == "values":
        return list(base.values())
    if name == "copy":
        return dict(base)
    if name == "clear":
        base.clear()
        return Const(None)
    if name == "update":
        other = args[0] if args else {}
        if not isinstance(other, dict):
            tracer.fail(node, "`dict.update` with something other than a dict")
        base.update(other)
        return Const(None)
    key = _static(tracer, args[0], node, "a dict key")
    if name == "get":
        return base.get(key, args[1] if len(args) > 1 else Const(None))
    if name == "setdefault":
        return base.setdefault(key, args[1] if len(args) > 1 else Const(None))
    if key not in base and len(args) < 2:  # pop
        tracer.error(node, f"KeyError: {key!r}")
    return base.pop(key, *args[1:])


def _iterate(tracer, value, node):
    """The elements of an iterable whose length is known when compiling."""
    if isinstance(value, (tuple, list)):
        return list(value)
    if isinstance(value, dict):
        return [Const(k) for k in value]
    if isinstance(value, Const):
        try:
            return [Const(v) for v in value.value]
        except TypeError:
            tracer.error(node, f"{type(value.value).__name__} is not iterable")
    if isinstance(value, Var):  # its rows, where their count is a shape fact
        from srcgrad.frontend.python_forms import rows  # (Note [Python forms decided when compiling])
        return rows(tracer, value, node, "iterating over an array in a comprehension")
    tracer.fail(node, "iterating over this value")


def set_item(tracer, base, index, value, node):
    """`base[index] = value` for a native list/dict: the container itself changes."""
    if isinstance(base, tuple):
        tracer.error(node, "'tuple' object does not support item assignment")
    key = _static(tracer, index, node, "a list index or dict key")
    structural = isinstance(key, slice) or isinstance(base, dict) and key not in base
    base = block_changes(tracer, base, node, "item assignment into a list or dict", structural)
    if isinstance(base, list):
        if isinstance(key, slice):
            base[key] = _iterate(tracer, value, node)
        else:
            try:
                base[key] = value
            except (IndexError, TypeError) as err:
                tracer.error(node, f"cannot assign to this list item: {err}")
    else:
        base[key] = value


def comprehension(tracer, node, scope):
    """A list/dict comprehension or generator expression over static iterables: each
    element is traced in turn (the iterables' lengths are known when compiling).
    Its variables live in their own scope, as in Python 3."""
    inner = Scope({}, scope.lookup_free, scope.locate, outer=scope)
    out = {} if isinstance(node, gast.DictComp) else []

    def walk(i):
        if i == len(node.generators):
            if isinstance(node, gast.DictComp):
                key = tracer.expr(node.key, inner)
                out[_static(tracer, key, node, "a dict key")] = tracer.expr(node.value, inner)
            else:
                out.append(tracer.expr(node.elt, inner))
            return
        gen = node.generators[i]
        if getattr(gen, "is_async", 0):
            tracer.fail(node, "an async comprehension")
        for item in _iterate(tracer, tracer.expr(gen.iter, inner if i else scope), node):
            tracer.bind(gen.target, item, inner)
            keep = True
            for cond in gen.ifs:
                test = tracer.expr(cond, inner)
                if not isinstance(test, Const):
                    tracer.fail(cond, "a comprehension `if` on array values",
                                "use `np.where` or boolean indexing")
                keep = keep and bool(test.value)
            if keep:
                walk(i + 1)

    walk(0)
    return out


# ---------------------------------------------------------------------- inside blocks
def enter_block(tracer):
    """Record, as a block starts, the containers its enclosing code can reach (the
    block's own names included): any other container it changes, it made itself."""
    tracer.__dict__.setdefault("outside_containers", []).append(_reachable(tracer))


def leave_block(tracer):
    tracer.outside_containers.pop()


def block_changes(tracer, base, node, what, structural):
    """The container to change for `what` on `base` (Note [Containers changed inside
    blocks]): `base` itself in straight-line code or when the block made it, else a
    copy now bound to the one name that refers to `base`."""
    _refuse_ambiguous(tracer, base, node, what)
    outside = tracer.__dict__.get("outside_containers")
    if not outside:
        return base  # straight-line code: every name holding it sees the change
    if id(base) not in outside[-1]:
        if structural:
            _note_structure_change(tracer, base)
        return base  # made inside this block: no one outside sees it
    if any(base is it for it in tracer.__dict__.get("iterating", ())):
        tracer.fail(node, f"{what} inside an `if`/loop on array values, on a list that a "
                    "loop outside that `if`/loop iterates over", "loop over a copy "
                    "(`for v in list(L):`), or collect the new values in another list")
    scope, name = _sole_name(tracer, base, node, what)
    new = dict(base) if isinstance(base, dict) else list(base)
    scope.env[name] = new
    if id(base) in tracer.__dict__.get("structure_changes", {}):
        _note_structure_change(tracer, new, tracer.structure_changes[id(base)][1])
    if structural:
        _note_structure_change(tracer, new)
    return new


def merged(tracer, value, sources, loc):
    """`value`, the merge of `sources` (one per path, of the same structure), with the
    lists and dicts every path shares kept as themselves; each other one is recorded
    as possibly being its paths' objects (Note [Containers merged across paths])."""
    if isinstance(value, (Var, Const)):
        return value
    if isinstance(value, (list, dict)) and all(s is sources[0] for s in sources):
        return sources[0]
    if isinstance(value, (list, dict)):
        _note_identities(tracer, value, [s for s in sources if isinstance(s, (list, dict))], loc)
    kids = _children(value)
    if not kids:
        return value
    per_source = [_children(s) for s in sources]
    if any(len(k) != len(kids) or type(s) is not type(value) for k, s in zip(per_source, sources)):
        return value  # (a merge keeps the structure: not reached)
    new = [merged(tracer, kid, [k[i] for k in per_source], loc) for i, kid in enumerate(kids)]
    if all(a is b for a, b in zip(new, kids)):
        return value
    if isinstance(value, list):
        value[:] = new
    elif isinstance(value, dict):
        value.update(zip(value, new))
    elif is_record(value):
        return _replace_fields(value, new)
    else:
        return tuple(new)
    return value


def _replace_fields(record, values):
    from srcgrad.ir.tree import make_record

    return make_record(type(record), dict(zip(record_fields(record), values)))


def _note_identities(tracer, container, sources, loc):
    """Record that `container` may be any of `sources`, and each of them `container`
    (`_refuse_ambiguous` follows these links in turn)."""
    table = tracer.__dict__.setdefault("merged_containers", {})
    maybe = {id(s): s for s in sources if s is not container}
    table[id(container)] = (container, maybe, loc)  # keeps them alive: ids stay unique
    for s in sources:
        hit = table.get(id(s))
        if hit is None or hit[0] is not s:
            table[id(s)] = hit = (s, {}, loc)
        hit[1][id(container)] = container


def _refuse_ambiguous(tracer, base, node, what):
    """A change to a container a merge made, or merged, while another object it may
    be is reachable (Note [Containers merged across paths])."""
    table = tracer.__dict__.get("merged_containers", {})
    hit = table.get(id(base))
    if hit is None or hit[0] is not base:
        return
    maybe, todo = {id(base)}, [base]  # what it may be, and what those may be in turn
    while todo:
        entry = table.get(id(todo.pop()))
        for i, other in entry[1].items() if entry is not None else ():
            if i not in maybe and table.get(i, (None,))[0] is other:
                maybe.add(i)
                todo.append(other)
    live = _reachable(tracer)
    if not any(i in live for i in maybe - {id(base)}):
        return
    kind = type(base).__name__
    tracer.fail(node, f"{what} on a {kind} that is, depending on the path taken at line "
                f"{hit[2].line}, one of several {kind}s that other names still hold",
                f"bind a copy on each path (`M = {kind}(L)`), so that no other name holds "
                f"the {kind} that is changed")


def structure_change(tracer, value):
    """The Loc of the first change of structure inside a block to a container in
    `value` (a tvalue, possibly nested), or None."""
    changes = tracer.__dict__.get("structure_changes", {})
    todo = [value]
    while todo:
        v = todo.pop()
        if isinstance(v, (list, dict, tuple)):
            hit = changes.get(id(v))
            if hit is not None and hit[0] is v:
                return hit[1]
            todo.extend(v.values() if isinstance(v, dict) else v)
    return None


def _note_structure_change(tracer, container, loc=None):
    changes = tracer.__dict__.setdefault("structure_changes", {})
    if id(container) not in changes or changes[id(container)][0] is not container:
        changes[id(container)] = (container, loc or tracer.loc)  # keeps it alive: ids stay unique


def is_record(v) -> bool:
    return not isinstance(v, (Var, Const)) and _is_record(v)  # a Var is a dataclass


def _children(v):
    if isinstance(v, dict):
        return list(v.values())
    if isinstance(v, (list, tuple)) and not is_record(v):
        return list(v)
    if is_record(v):
        return [getattr(v, f) for f in record_fields(v)]
    return []


def _reachable(tracer) -> set:
    """ids of the containers (and records) reachable from a name in a scope being traced."""
    seen: set = set()
    todo = [v for scope in every_scope(tracer.scopes) for v in scope.env.values()]
    while todo:
        v = todo.pop()
        if isinstance(v, (list, dict, tuple)) or is_record(v):
            if id(v) not in seen:
                seen.add(id(v))
                todo.extend(_children(v))
    return seen


def references(tracer, base) -> int:
    """How many names, containers and records refer to the container `base`."""
    names, holders = _referrers(tracer, base)
    return len(names) + len(holders)


def _referrers(tracer, base):
    """(the (scope, name) pairs bound to `base`, the names whose containers hold it)."""
    names = [(scope, n) for scope in every_scope(tracer.scopes) for n, v in scope.env.items() if v is base]
    holders, seen = [], set()
    todo = [(n, v) for scope in every_scope(tracer.scopes) for n, v in scope.env.items()]
    while todo:
        n, v = todo.pop()
        if id(v) in seen or not (isinstance(v, (list, dict, tuple)) or is_record(v)):
            continue
        seen.add(id(v))
        kids = _children(v)
        holders.extend(n for k in kids if k is base)
        todo.extend((n, k) for k in kids)
    return names, holders


def _sole_name(tracer, base, node, what):
    """(scope, name) of the one name that refers to the container `base`; refused when
    another name, or a container or record, refers to it too."""
    names, holders = _referrers(tracer, base)
    if len(names) == 1 and not holders:
        return names[0]
    kind = type(base).__name__
    shown = [n for _, n in names if not n.startswith("_")]
    others = ", ".join([f"`{n}`" for n in shown] + [f"a container in `{n}`" for n in sorted(set(holders))])
    if not shown:
        tracer.fail(node, f"{what} inside an `if`/loop on array values, on a {kind} that only "
                    f"{others} holds", f"build a new {kind} inside the `if`/loop and assign it "
                    "where the old one was (`d[k] = [v, ...]`)")
    tracer.fail(node, f"{what} inside an `if`/loop on array values, on a {kind} that {others} "
                f"share", f"give the {kind} one name before the `if`/loop: bind a copy (`{shown[0]}"
                f" = {kind}({shown[0]})`) and change only that name inside it")
