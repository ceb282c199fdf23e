"""Scatters added in place, for numba (Note [Scatters added in place]).

Note [Scatters added in place]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The transpose of a read `x[i]` is a scatter: zeros of x's shape with the cotangent at
`i`, then added to x's gradient. Written out for numba (Note [Rewrites for numba] in
srcgrad.pipeline.numba_variants) that is

    s = xp.zeros((128,))
    s[1:-1] = v
    y = a + s

which allocates and reads a whole array per read of a slice: in a loop's adjoint over
small arrays (a stencil's `u[:-2]`, `u[1:-1]`, `u[2:]`) most of the time. Where `a` is a
fresh array (the result of arithmetic, a copy, zeros) used only there and `s` is used
only there, the three statements are

    y = a if a.shape == (128,) else a + xp.zeros((128,))
    y[1:-1] += v

the same values for a basic index (each element written once), without the zeros. The
guard keeps broadcasting's result where `a` has another shape; where numba cannot type
the guard (`a` a number) it refuses the variant, which then runs NumPy's code, and the
first call's check compares the result with NumPy's either way (Note [The numba
backend]). A `y` made so is fresh too, so a chain of scatters adds into one array.
"""

from __future__ import annotations

import ast

_FRESH_CALLS = frozenset({"zeros", "ones", "empty", "copy"})


def scatters_added_in_place(tree: ast.Module) -> ast.Module:
    """Note [Scatters added in place], in each function of `tree`."""
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef):
            while _rewrite_one(fn):
                pass
    return tree


def _blocks(node):
    for field in ("body", "orelse"):
        block = getattr(node, field, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
            yield block
            for stmt in block:
                yield from _blocks(stmt)


def _rewrite_one(fn) -> bool:
    uses: dict = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name):
            uses[node.id] = uses.get(node.id, 0) + 1
    for block in _blocks(fn):
        for j, stmt in enumerate(block):
            found = _match(block, j, stmt, uses)
            if found is not None:
                k, s_def, s_store, a, y = found
                shape = ast.unparse(s_def.value.args[0])
                if _has_shape(block, k, shape):  # (a chain's next scatter: no guard)
                    guard = ast.parse(f"{y} = {a}").body[0]
                else:
                    guard = ast.parse(f"{y} = {a} if {a}.shape == {shape} else "
                                      f"{a} + xp.zeros({shape})").body[0]
                target = s_store.targets[0]
                add = ast.AugAssign(ast.Subscript(ast.Name(y, ast.Load()), target.slice, ast.Store()),
                                    ast.Add(), s_store.value)
                block[j:j + 1] = [guard, add]
                block.remove(s_store)
                block.remove(s_def)
                return True
    return False


def _match(block, j, stmt, uses):
    """(index of a's definition, s = zeros, s[i] = v, a, y) where `stmt` is `y = a + s`
    (or `s + a`) as Note [Scatters added in place] takes it, else None."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name) and isinstance(stmt.value, ast.BinOp)
            and isinstance(stmt.value.op, ast.Add)
            and isinstance(stmt.value.left, ast.Name) and isinstance(stmt.value.right, ast.Name)):
        return None
    for a, s in ((stmt.value.left.id, stmt.value.right.id), (stmt.value.right.id, stmt.value.left.id)):
        if a == s or uses.get(s) != 3:  # s: its zeros, its one store, this read
            continue
        i = _defined_at(block, s, j)
        if i is None or i + 1 >= j or not _is_zeros(block[i].value) or not _stores_into(block[i + 1], s):
            continue
        k = _defined_at(block, a, j)
        if k is None or not _fresh(block, k, uses):
            continue
        # every other use of `a`: a store into it (`a[i] = ...`, `a[i] += ...`) between,
        # or in a loop between (a fused chain's `a[i] = v`, srcgrad.codegen.fused)
        if uses.get(a) != 2 + _writes(block[k + 1:j], a):
            continue
        read = {n.id for part in (block[i + 1].targets[0].slice, block[i + 1].value)
                for n in ast.walk(part) if isinstance(n, ast.Name)}
        if any(isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id in read
               for st in block[i + 2:j] for n in ast.walk(st)):
            continue  # (the value written is read later now: none of its names rebound)
        return k, block[i], block[i + 1], a, stmt.targets[0].id
    return None


def _defined_at(block, name, before):
    for i in range(before - 1, -1, -1):
        st = block[i]
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name) \
                and st.targets[0].id == name:
            return i
    return None


def _is_zeros(value) -> bool:
    return (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
            and value.func.attr == "zeros" and isinstance(value.func.value, ast.Name)
            and value.func.value.id == "xp" and len(value.args) == 1 and not value.keywords)


def _stores_into(stmt, name) -> bool:
    """`name[i] = v` or `name[i] += v`, `name` not read in `i` or `v`."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target, value = stmt.targets[0], stmt.value
    elif isinstance(stmt, ast.AugAssign):
        target, value = stmt.target, stmt.value
    else:
        return False
    return (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
            and target.value.id == name
            and not any(isinstance(n, ast.Name) and n.id == name
                        for part in (target.slice, value) for n in ast.walk(part)))


def _writes(stmts, name) -> int:
    """How many stores into `name` `stmts` hold, at their level or in their loops' bodies."""
    return sum(1 for st in stmts for sub in ast.walk(st)
               if isinstance(sub, ast.stmt) and _stores_into(sub, name))


def _fresh(block, k, uses) -> bool:
    """Whether `block[k]` defines an array no other name refers to (`_is_fresh`), or is
    `y = a` of such an `a` that nothing else reads (this rewrite's alias)."""
    value = block[k].value
    if isinstance(value, ast.Name):
        i = _defined_at(block, value.id, k)
        return (i is not None and uses.get(value.id) == 2 + _writes(block[i + 1:k], value.id)
                and _fresh(block, i, uses))
    return _is_fresh(value)


def _is_fresh(value) -> bool:
    """An array no other name refers to: arithmetic's result, a copy, new zeros, or this
    rewrite's guard."""
    if isinstance(value, (ast.BinOp, ast.UnaryOp, ast.IfExp)):
        return True
    return (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
            and value.func.attr in _FRESH_CALLS
            and (value.func.attr != "copy" or not value.args and not value.keywords))



def _has_shape(block, k, shape: str) -> bool:
    """Whether `block[k]` defines zeros of `shape`, this rewrite's guard for it, or an
    alias `y = a` of one of those."""
    value = block[k].value
    if isinstance(value, ast.Name):
        i = _defined_at(block, value.id, k)
        return i is not None and _has_shape(block, i, shape)
    if _is_zeros(value):
        return ast.unparse(value.args[0]) == shape
    return (isinstance(value, ast.IfExp) and isinstance(value.orelse, ast.BinOp)
            and _is_zeros(value.orelse.right) and ast.unparse(value.orelse.right.args[0]) == shape)
