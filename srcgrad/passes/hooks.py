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
active the hook-free variant runs at zero cost. Values the derivative table's
own formulas save are not hooked yet.

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
