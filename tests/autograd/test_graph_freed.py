"""A graph is freed as soon as nothing holds its outputs, with the cycle collector off: no
node holds itself (Note [Saved outputs' labels] in srcgrad.autograd.ops). Observed in
torch 2.13.0 (CPU) with gc.disable(): the three objects a pack hook returns for
`x.exp()` (its saved result), `x.tanh()` (its saved result) and `.sin()` (its saved
input) are all freed by `del y, z`; they are freed before the backward too."""

from __future__ import annotations

import gc
import weakref

import srcgrad as sg


class _Holder:
    def __init__(self, t):
        self.t = t


def _run_with_collector_off(body):
    enabled = gc.isenabled()
    gc.disable()
    try:
        return body()
    finally:
        if enabled:
            gc.enable()


def test_nodes_saving_their_output_are_freed_with_the_graph():
    refs = []

    def pack(t):
        holder = _Holder(t.detach())  # detached: the holder itself closes no cycle
        refs.append(weakref.ref(holder))
        return holder

    def body():
        x = sg.tensor([0.5, 1.0, 2.0], requires_grad=True)
        with sg.autograd.graph.saved_tensors_hooks(pack, lambda h: h.t):
            y = x.exp()
            z = x.tanh().sin()
        alive = [r() is not None for r in refs]
        del y, z
        return alive, [r() is None for r in refs]

    alive, freed = _run_with_collector_off(body)
    assert alive == [True, True, True]
    assert freed == [True, True, True]  # torch 2.13.0: [True, True, True]


def test_a_node_saving_its_output_dies_with_its_tensor():
    def body():
        x = sg.tensor([0.5, 1.0], requires_grad=True)
        y = x.tanh()
        node = weakref.ref(y.grad_fn)
        del y
        return node() is None

    assert _run_with_collector_off(body)


def test_the_version_error_still_names_the_saved_output():
    x = sg.tensor([0.5, 1.0], requires_grad=True)
    y = x.exp()
    y.add_(1.0)
    try:
        y.sum().backward()
    except RuntimeError as err:
        text = str(err)
    else:
        raise AssertionError("no error")
    # torch 2.13.0: "... [torch.FloatTensor [2]], which is output 0 of Exp, is at
    # version 1; expected version 0 instead. ..."
    assert "which is output 0 of Exp, is at version 1; expected version 0 instead" in text
