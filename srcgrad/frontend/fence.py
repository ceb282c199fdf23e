"""The fence: reject, up front, every construct compiled code may not contain.

Each rejection is a CompileError at the construct with a suggested rewrite, so a
user sees the first unsupported line before any tracing work is done.
"""

from __future__ import annotations

import gast

from srcgrad.errors import CompileError

# node type -> (what it is, what to do instead)
_REJECTED = {
    gast.Yield: ("a generator (`yield`)", "return a list or an array instead"),
    gast.YieldFrom: ("a generator (`yield from`)", "return a list or an array instead"),
    gast.Await: ("`await`", "differentiate a synchronous function"),
    gast.AsyncFunctionDef: ("an async function", "differentiate a synchronous function"),
    gast.AsyncFor: ("`async for`", "use a plain `for` loop"),
    gast.AsyncWith: ("`async with`", "move the context manager out of the function"),
    gast.Global: ("a `global` statement", "pass the value in as an argument and return the result"),
    gast.With: ("a `with` block", "move the context manager outside the differentiated function"),
    gast.ClassDef: ("a class definition", "define the class at module level"),
    gast.Delete: ("`del`", "let the name go out of use instead"),
    gast.Import: ("an `import` inside the function", "import at module level"),
    gast.ImportFrom: ("an `import` inside the function", "import at module level"),
    gast.SetComp: ("a set comprehension", "use a list"),
    gast.Set: ("a set", "use a tuple or a list"),
    gast.Starred: None,  # allowed only in calls and tuple targets; checked by the tracer
}


def fence(fs) -> None:
    """Raise CompileError at the first construct srcgrad does not compile."""
    for node in gast.walk(fs.node):
        entry = _REJECTED.get(type(node))
        if entry:
            what, hint = entry
            raise CompileError.at(fs.loc(node), f"{what} is not supported in compiled code",
                                  hint=hint)
        if isinstance(node, gast.FunctionDef) and node is not fs.node:
            continue  # nested defs are traced when called
