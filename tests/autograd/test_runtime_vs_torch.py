"""Runtime facts checked against torch (issue 28): saved-tensor hooks around a double
backward, versions of saved results, is_inference of views, GradientEdge inputs.
Every expected value was observed in torch 2.14.1 (CPU) and is written in here."""

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.autograd.graph import get_gradient_edge, saved_tensors_hooks


def _t(values, requires_grad=False):
    return sg.tensor(np.array(values, dtype=np.float64), requires_grad=requires_grad)


# ---------------------------------------------------------------- GradientEdge as inputs=
def _edge_graph():
    a = _t([1.0, 2.0], True)
    b = a * 2
    return a, b, (b * b).sum()


def test_grad_takes_gradient_edges():
    a, b, y = _edge_graph()
    e = get_gradient_edge(b)
    # observed in torch 2.14.1: [[4.0, 8.0]] for a list and for a bare edge
    assert [g.tolist() for g in sg.autograd.grad(y, inputs=(e,), retain_graph=True)] == [[4.0, 8.0]]
    assert [g.tolist() for g in sg.autograd.grad(y, inputs=e, retain_graph=True)] == [[4.0, 8.0]]
    mixed = sg.autograd.grad(y, inputs=[get_gradient_edge(a), b])
    assert [g.tolist() for g in mixed] == [[8.0, 16.0], [4.0, 8.0]]


def test_grad_refuses_to_materialize_an_unused_edge():
    """torch 2.13.0, the reference (spec), raises for an unused edge with materialize_grads
    (observed: RuntimeError, the text below; an earlier session saw torch 2.14.1 return
    zeros); a used edge gets its gradient."""
    a, b, y = _edge_graph()
    c = a * 3
    with pytest.raises(RuntimeError, match="materialize_grads cannot be used when the given "
                       "input is a GradientEdge"):
        sg.autograd.grad(y, [get_gradient_edge(c)], allow_unused=True, materialize_grads=True,
                         retain_graph=True)
    (g,) = sg.autograd.grad(y, [get_gradient_edge(b)], materialize_grads=True)
    assert g.tolist() == [4.0, 8.0]  # observed in torch 2.13.0


def test_backward_takes_gradient_edges():
    a, b, y = _edge_graph()
    y.backward(inputs=[get_gradient_edge(b)], retain_graph=True)
    assert a.grad is None and b.grad is None  # observed in torch 2.14.1: None None
    y.backward(inputs=[get_gradient_edge(a)])
    assert a.grad.tolist() == [8.0, 16.0]  # observed in torch 2.14.1


# ---------------------------------------------------------------- versions of saved results
@pytest.mark.parametrize("method", ["exp_", "sigmoid_", "sqrt_"])
def test_saved_result_of_an_inplace_op_shares_the_version(method):
    y = _t([4.0, 9.0], True) * 1
    getattr(y, method)()
    # observed in torch 2.14.1: y._version == 1 and grad_fn._saved_result._version == 1
    assert y._version == 1
    assert y.grad_fn._saved_result._version == 1


def test_saved_result_version_under_hooks():
    a = _t([1.0, 2.0], True)
    with saved_tensors_hooks(lambda x: x, lambda x: x):
        y = a.exp()
    assert (y.grad_fn._saved_result._version, y._version) == (0, 0)  # observed in torch 2.14.1


# ---------------------------------------------------------------- is_inference of views
_VIEWS = {
    "detach": lambda t: t.detach(), "data": lambda t: t.data, "T": lambda t: t.T,
    "reshape": lambda t: t.reshape(4), "diagonal": lambda t: t.diagonal(),
    "unbind": lambda t: t.unbind()[0], "split": lambda t: t.split(1)[0],
    "expand": lambda t: t[0].expand(3, 2), "getitem": lambda t: t[0],
}


@pytest.mark.parametrize("view", sorted(_VIEWS))
def test_is_inference_of_views_follows_the_base(view):
    f = _VIEWS[view]
    with sg.inference_mode():
        inference = _t([[1.0, 2.0], [3.0, 4.0]])
    normal = _t([[1.0, 2.0], [3.0, 4.0]])
    # observed in torch 2.14.1, for every view above: (True, False) outside and inside the mode
    assert (f(inference).is_inference(), f(normal).is_inference()) == (True, False)
    with sg.inference_mode():
        assert (f(inference).is_inference(), f(normal).is_inference()) == (True, False)
        assert (normal + 1).is_inference() and normal.clone().is_inference()


def test_is_inference_after_inplace_ops():
    normal = _t([1.0, 2.0])
    with sg.inference_mode():
        inference = _t([1.0, 2.0])
        inference.add_(1)
        normal.add_(1)
    assert inference.is_inference() and not normal.is_inference()  # observed in torch 2.14.1


# ---------------------------------------------------------------- saved-tensor hooks that change values
def _hooked_cube(hooks_in_backward: bool):
    seen = []

    def pack(x):
        seen.append(("pack", x.tolist()))
        return 2 * x

    def unpack(x):
        seen.append(("unpack", x.tolist()))
        return x

    a = _t([1.0, 2.0], True)
    with saved_tensors_hooks(pack, unpack):
        y = a ** 3
        if hooks_in_backward:
            (g,) = sg.autograd.grad(y.sum(), a, create_graph=True)
            g.sum().backward()
    if not hooks_in_backward:
        (g,) = sg.autograd.grad(y.sum(), a, create_graph=True)
        g.sum().backward()
    return g.tolist(), a.grad.tolist(), seen


def test_value_changing_pack_hook_around_a_double_backward():
    # observed in torch 2.14.1: pow saves a ([1, 2]); the create_graph backward
    # `grad * (3 * self.pow(2))` saves the unpacked self ([2, 4]) and grad ([1, 1]); the
    # gradient through an unpacked tensor reaches `a` itself, not the hook's `2 * x`
    first, grad, seen = _hooked_cube(hooks_in_backward=True)
    assert first == [12.0, 48.0]
    assert grad == [48.0, 96.0]
    assert seen == [("pack", [1.0, 2.0]), ("unpack", [2.0, 4.0]), ("pack", [2.0, 4.0]),
                    ("pack", [1.0, 1.0]), ("unpack", [2.0, 2.0]), ("unpack", [4.0, 8.0])]


def test_value_changing_pack_hook_in_the_forward_only():
    first, grad, seen = _hooked_cube(hooks_in_backward=False)
    # observed in torch 2.14.1
    assert (first, grad) == ([12.0, 48.0], [12.0, 24.0])
    assert seen == [("pack", [1.0, 2.0]), ("unpack", [2.0, 4.0])]


# ---------------------------------------------------------------- forward AD, in-place on views
def _dual(values, tangent):
    from srcgrad.autograd import forward_ad as fw

    return fw.make_dual(_t(values), _t(tangent))


def _tangent(t):
    from srcgrad.autograd import forward_ad as fw

    tangent = fw.unpack_dual(t).tangent
    return None if tangent is None else tangent.tolist()


def _no_grad_view_of_dual():
    p = _dual([1.0, 2.0, 3.0], [1.0, 1.0, 1.0])
    with sg.no_grad():
        v = p[:2]
    v.mul_(_dual([3.0, 3.0], [5.0, 5.0]))
    return _tangent(v), _tangent(p)


def _detached_view_of_dual():
    p = _dual([1.0, 2.0, 3.0], [1.0, 1.0, 1.0])
    v = p.detach()[:2]
    v.mul_(_dual([3.0, 3.0], [5.0, 5.0]))
    return _tangent(v), _tangent(p)


def _view_of_detached_plain():
    b = _t([1.0, 2.0, 3.0])
    d = b.detach()
    v = d[:2]
    v.mul_(_dual([3.0, 3.0], [5.0, 5.0]))
    return _tangent(v), _tangent(d), _tangent(b)


def _no_grad_view_of_plain_then_more():
    b = _t([1.0, 2.0, 3.0])
    with sg.no_grad():
        v = b[:2]
    v.add_(_dual([1.0, 1.0], [2.0, 3.0]))
    v.mul_(2.0)
    return _tangent(v), _tangent(b)


def _detached_view_unary():
    p = _dual([1.0, 2.0, 3.0], [1.0, 1.0, 1.0])
    v = p.detach()[:2]
    v.exp_()
    return _tangent(v), _tangent(p)


def _no_grad_view_copy():
    p = _dual([1.0, 2.0, 3.0], [1.0, 1.0, 1.0])
    with sg.no_grad():
        v = p[:2]
    v.copy_(_t([5.0, 5.0]))
    return _tangent(v), _tangent(p)


def _view_of_a_detached_dual():  # the in-place write reaches the detached base's tangent
    p = _dual([1.0, 2.0, 3.0], [1.0, 1.0, 1.0])
    d = p.detach()
    w = d[1:]
    w.mul_(_dual([2.0, 2.0], [5.0, 5.0]))
    return _tangent(p), _tangent(d), _tangent(w)


def _detach_of_a_view_of_a_dual():
    p = _dual([1.0, 2.0, 3.0], [1.0, 1.0, 1.0])
    v = p[1:].detach()
    v.add_(_dual([2.0, 3.0], [4.0, 4.0]))
    return _tangent(p), _tangent(v), p.tolist()


def _base_written_after_detach():
    p = _dual([1.0, 2.0, 3.0], [1.0, 1.0, 1.0])
    d = p.detach()
    p.mul_(_dual([2.0, 2.0, 2.0], [3.0, 3.0, 3.0]))
    return _tangent(p), _tangent(d), d.tolist()


def _detached_view_times_a_number():
    p = _dual([1.0, 2.0, 3.0], [1.0, 1.0, 1.0])
    d = p.detach()
    d.mul_(2.0)
    return _tangent(p), _tangent(d), p.tolist()


def _no_grad_view_of_plain_then_the_base():
    b = _t([1.0, 2.0, 3.0])
    with sg.no_grad():
        v = b[:2]
    v.mul_(_dual([2.0, 3.0], [1.0, 1.0]))
    return _tangent(b), _tangent(v), _tangent(b[1:])


_FORWARD_INPLACE = {  # observed in torch 2.14.1
    # (issue 28's case, re-checked on the merged main: these five more agree with torch too)
    "view of a detached dual": (_view_of_a_detached_dual,
                                ([1.0, 1.0, 1.0], [0.0, 10.0, 15.0], [10.0, 15.0])),
    "detach of a view of a dual": (_detach_of_a_view_of_a_dual,
                                   ([1.0, 1.0, 1.0], [4.0, 4.0], [1.0, 4.0, 6.0])),
    "base written after detach": (_base_written_after_detach,
                                  ([5.0, 8.0, 11.0], None, [2.0, 4.0, 6.0])),
    "detached dual times a number": (_detached_view_times_a_number,
                                     ([1.0, 1.0, 1.0], None, [2.0, 4.0, 6.0])),
    "no_grad view of plain, then its base": (_no_grad_view_of_plain_then_the_base,
                                             ([1.0, 2.0, 0.0], [1.0, 2.0], [2.0, 0.0])),
    "no_grad view of a dual": (_no_grad_view_of_dual, ([8.0, 13.0], [8.0, 13.0, 1.0])),
    "detached view of a dual": (_detached_view_of_dual, ([5.0, 10.0], [1.0, 1.0, 1.0])),
    "view of a detached plain tensor": (_view_of_detached_plain,
                                        ([5.0, 10.0], [5.0, 10.0, 0.0], None)),
    "no_grad view, add_ then mul_": (_no_grad_view_of_plain_then_more,
                                     ([4.0, 6.0], [4.0, 6.0, 0.0])),
    "detached view, exp_": (_detached_view_unary, (None, [1.0, 1.0, 1.0])),
    "no_grad view, copy_": (_no_grad_view_copy, ([0.0, 0.0], [0.0, 0.0, 1.0])),
}


@pytest.mark.parametrize("case", sorted(_FORWARD_INPLACE))
def test_forward_ad_inplace_on_non_differentiable_views(case):
    from srcgrad.autograd import forward_ad as fw

    run, expected = _FORWARD_INPLACE[case]
    with fw.dual_level():
        assert run() == expected
