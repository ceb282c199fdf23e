"""Saved-tensor hooks in generated code (the hook variant of `sg.vjp`).

Note [Saved-tensor hooks]
~~~~~~~~~~~~~~~~~~~~~~~~~
DESIGN decision 6: when `saved_tensors_hooks` (or `save_on_cpu`) is active at the
forward call, `sg.vjp` runs a second variant of the generated module whose forward
takes the pack hook and whose backward takes the unpack hook:

    def f_fwd(pack_hook, a, b):           def f_bwd(unpack_hook, _saved, grad_d):
        ...                                   _packed_x, ... = _saved
        _packed_x = pack_hook(x)              x = unpack_hook(_packed_x)

Each value a custom Function's `save_for_backward` saved is packed once, right
after the call (torch packs at save time), and unpacked at each `ctx.saved_tensors`
access of its backward (torch unpacks on every access); pack and unpack are kept
even where their result is unused, so the counts are torch's. The hook state is
part of the variant (its cache key), never a run-time branch: with no hooks
active the hook-free variant runs at zero cost.

The values the derivative table's formulas read are hooked too (`hook_saved`):
each array the backward reads from the forward is packed at the end of the
forward and unpacked once at the start of the backward. Where torch saves one
tensor for two nodes (`a * a`) it packs twice and the compiler once; the values
the backward computes with are the same. Shapes, dtypes and the packed objects
themselves are not hooked (torch never hooks a Python number).

The vjp pass emits the pack ops among the backward ops (that is where it reads a
Function's saved values); `place_packs` moves each to just after its call.
"""

from __future__ import annotations


def place_packs(ops: list) -> tuple:
    """(ops with every `saved_pack` moved after its `custom_call`, the hook ops' outputs).

    The outputs are kept alive through optimisation (a pack or unpack is a call of
    user code: it runs even when its value is not read).
    """
    packs = [op for op in ops if op.prim == "saved_pack"]
    after: dict = {}
    for op in packs:
        op.attrs.pop("backward", None)  # it runs in the forward
        after.setdefault(id(op.attrs["after"]), []).append(op)
    placed = []
    for op in ops:
        if op.prim == "saved_pack":
            continue
        placed.append(op)
        placed.extend(after.get(id(op), ()))
    alive = [o for op in placed if op.prim in ("saved_pack", "saved_unpack") for o in op.outs]
    return placed, alive


def hook_saved(forward: list, backward: list, saved: list, hooks, namer) -> list:
    """Pack each saved array at the end of `forward` and unpack it at the start of
    `backward` (both lists are extended in place); returns the new saved list."""
    from srcgrad.ir.core import Op, Var, defined_names

    pack_fn, unpack_fn = hooks
    # Temporaries were renumbered after tracing (names.tidy_temporaries) without the
    # namer seeing their new names: a fresh `_packed_reshape` could be a Function's
    # pack already (fuzz seed 7223: the second pack overwrote the first).
    namer.taken.update(defined_names(forward + backward))
    hooked = {o for op in forward if op.prim == "saved_pack" for o in op.outs}
    unpacks, out = [], []
    for v in saved:
        if v.kind != "array" or v in hooked or v in hooks:
            out.append(v)
            continue
        packed = Var(namer.fresh("_packed_" + v.name.lstrip("_")), "static")
        forward.append(Op("saved_pack", (pack_fn, v), (packed,), None, {}))
        unpacks.append(Op("saved_unpack", (unpack_fn, packed), (v,), None, {}))
        out.append(packed)
    backward[:0] = unpacks
    return out
