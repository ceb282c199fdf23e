"""The value of a `return` inside a loop, before any return has run.

Note [Results of returns inside loops]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A `return` inside a loop is lowered to `_result = v; _returned = True; break`, with
`_result` bound before the loop and `if _returned: return _result` after it (Note
[Tracing control flow] in srcgrad.frontend.control). Before the loop `_result` has
no value yet, and nothing reads it unless `_returned` is True, which only a path
that assigned it sets. It is bound to `Unset`, a None that takes any structure:

* where an `if` merges it with a container (`return a, b` in one branch), it is
  first given that container's structure, a None per leaf (`shaped_like`), so the
  merge is leafwise as for any container; a None leaf may be None at run time
  (Loops.note_maybe_none), as a plain `_result = None` merged with an array is;
* a loop that carries it is traced once with `_result` unset in the body (the
  block param is the Unset itself); the structure `_result` has at the end of that
  iteration becomes its structure before the loop (`Loops._widen`), Nones again,
  and the body is traced once more with params of that structure.

So the returned value may be a tuple, list, dict or record of arrays. Two returns of
different structures (a tuple on one path, an array on another) are still refused:
a merge gives one structure to the function's result.
"""

from __future__ import annotations

from srcgrad.ir.core import Const, Var
from srcgrad.ir.tree import LEAF, flatten, unflatten


class Unset(Const):
    """A name with no value yet (Note [Results of returns inside loops]): None, read
    as None, that a merge gives the structure of the value on the other path. (A frozen
    dataclass written out, as Const is: equal to another Unset, never to a Const.)"""

    def __init__(self, value: object = None):
        object.__setattr__(self, "value", value)

    def __repr__(self) -> str:
        return "Const(None)"


def _leaves(value):
    return flatten(value, is_leaf=lambda v: isinstance(v, (Var, Const)))


def shaped_like(value):
    """An Unset per leaf of `value`, in `value`'s structure (a fresh container)."""
    leaves, tree = _leaves(value)
    return unflatten(tree, [Unset() for _ in leaves])


def given_structure(a, b):
    """(a, b), where one of them, an Unset, is given the other's structure."""
    if isinstance(a, Unset) and _leaves(b)[1] != LEAF:
        return shaped_like(b), b
    if isinstance(b, Unset) and _leaves(a)[1] != LEAF:
        return a, shaped_like(a)
    return a, b
