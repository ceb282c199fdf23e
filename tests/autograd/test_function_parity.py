"""One semantics, two front doors (API.md §4): every custom Function of the project's corpus
(tests/corpus/functions.py, tests/corpus/saved_writes.py), applied eagerly to `sg.Tensor`
and called inside `sg.grad`, gives the same gradients, and both match central
differences in float64 (first order, and second order where the Function's backward is
differentiable). Where the two doors differ, the difference is asserted here and written
in docs/guide.md ("Eager and compiled: where they differ").

Each program is a corpus function `f(*args)` calling `MyFn.apply`: the compiled door is
`sg.grad(f, wrt=...)` on NumPy arrays, the eager door `f` called on leaves
`sg.tensor(arg, requires_grad=True)` (NumPy functions reach the runtime through the
array protocols) followed by `.backward()`. `test_every_corpus_function_is_covered`
fails for a Function class no program here applies.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.autograd import Function
from srcgrad.autograd.graph import saved_tensors_hooks
from tests.conftest import numeric_grad
from tests.corpus import functions as F
from tests.corpus import saved_writes as S

RNG = np.random.default_rng(13)
X = RNG.standard_normal(4)
Y = RNG.standard_normal(4)
V = RNG.standard_normal(4)
U = RNG.standard_normal(4)
SORTABLE = RNG.permutation(5) * 0.5 + RNG.standard_normal(5) * 0.01
S0, S1 = np.array(1.0), np.array(2.0)
RTOL, ATOL = 1e-6, 1e-7  # against central differences
SAME = 1e-12  # eager against compiled: the same formulas


# ---------------------------------------------------------------- the two doors
def eager_grads(f, args, wrt=None):
    """Eager door: `f` on leaves requiring grad (those in wrt), `.backward()`, the `.grad`s."""
    wrt = range(len(args)) if wrt is None else wrt
    ts = [sg.tensor(a, requires_grad=True) if i in wrt else a for i, a in enumerate(args)]
    out = f(*ts)
    out.backward()
    return [None if ts[i].grad is None else np.asarray(ts[i].grad.detach().numpy())
            for i in wrt]


def compiled_grads(f, args, wrt=None):
    wrt = tuple(range(len(args))) if wrt is None else tuple(wrt)
    grads = sg.grad(f, wrt=wrt)(*args)
    return [np.asarray(g) for g in (grads if isinstance(grads, tuple) else (grads,))]


def central(f, args, wrt=None):
    wrt = range(len(args)) if wrt is None else wrt
    return [numeric_grad(f, [np.array(a) for a in args], i) for i in wrt]


def assert_all_close(actual, expected, rtol=RTOL, atol=ATOL):
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol)


# ---------------------------------------------------------------- first order: the same
FIRST = [
    (F.f_func, (X, Y)),
    (F.f_func_twice, (X, Y)),
    (F.f_exp, (X,)),
    (F.f_sort, (SORTABLE, RNG.standard_normal(5))),
    (F.f_simple, (X,)),
    (F.f_materialize_off, (X,)),
    (F.f_mulxyz, (S0, S1)),
    (F.f_mul, (X, Y)),
    (F.f_sq, (X,)),
    (F.f_sq_once, (X,)),
    (F.f_pow, (X,)),
    (F.f_mulconst, (X,)),
    (F.f_needs, (X, Y)),
    (F.f_extra_none, (X,)),
    (F.f_broadcast_grad, (X,)),
    (F.f_cube, (X,)),
    (F.f_two_calls_sum, (X, Y)),
    (S.rebound_not_written, (X, Y)),
    (S.copy_written, (X, Y)),
    (S.other_array_written, (X, Y)),
    (S.dirty, (X,)),
    (S.dirty_scale_rows, (X, np.array(1.5))),
]


@pytest.mark.parametrize("f,args", FIRST, ids=[c[0].__name__ for c in FIRST])
def test_first_order_eager_equals_compiled_equals_central_differences(f, args):
    eager = eager_grads(f, args)
    assert_all_close(eager, central(f, args))
    assert_all_close(eager, compiled_grads(f, args), rtol=SAME, atol=SAME)


def test_a_custom_rule_is_used_by_both_doors():
    """StraightThrough's backward is deliberately not round's derivative: both doors use it."""
    x = np.array([0.4, 1.6, -2.2])
    (eager,) = eager_grads(F.f_straight_through, (x,))
    np.testing.assert_allclose(eager, 2 * np.round(x))
    np.testing.assert_allclose(compiled_grads(F.f_straight_through, (x,))[0], eager)


# ---------------------------------------------------------------- second order
def _h1(d):
    def h(x, v):
        return np.sum(d(x) * v)
    return h


def _h2(d):
    def h(x, y, v, u):
        gx, gy = d(x, y)
        return np.sum(gx * v) + np.sum(gy * u)
    return h


def eager_hvp(f, args, dirs):
    """The gradient of <grad f, dirs> (create_graph=True), per argument (None: unreached)."""
    ts = [sg.tensor(a, requires_grad=True) for a in args]
    grads = sg.autograd.grad(f(*ts), ts, create_graph=True)
    inner = sum((g * sg.tensor(v)).sum() for g, v in zip(grads, dirs))
    if not inner.requires_grad:  # the gradient's graph never reaches an input
        return [None] * len(ts)
    out = sg.autograd.grad(inner, ts, allow_unused=True)
    return [None if g is None else np.asarray(g.detach().numpy()) for g in out]


def compiled_hvp(f, args, dirs):
    n = len(args)
    h = (_h1 if n == 1 else _h2)(sg.grad(f, wrt=tuple(range(n)) if n > 1 else 0))
    full = tuple(args) + tuple(dirs)
    return compiled_grads(h, full, range(n)), central(h, full, range(n))


SECOND = [
    (F.f_sq, (X,)),
    (F.f_exp, (X,)),
    (F.f_pow, (X,)),
    (F.f_mulconst, (X,)),
    (F.f_broadcast_grad, (X,)),
    (F.f_needs, (X, Y)),
    (F.f_mulxyz, (S0, S1)),
]


@pytest.mark.parametrize("f,args", SECOND, ids=[c[0].__name__ for c in SECOND])
def test_second_order_eager_equals_compiled_equals_central_differences(f, args):
    dirs = (V, U)[:len(args)] if args[0].ndim else (np.array(0.7), np.array(-1.3))[:len(args)]
    compiled, numeric = compiled_hvp(f, args, dirs)
    assert_all_close(compiled, numeric, rtol=1e-5, atol=1e-6)
    eager = eager_hvp(f, args, dirs)  # None: no path, a zero second derivative
    eager = [np.zeros_like(c) if e is None else e for e, c in zip(eager, compiled)]
    assert_all_close(eager, compiled, rtol=1e-10, atol=1e-10)


def test_a_saved_intermediate_is_a_constant_eagerly_and_differentiated_when_compiled():
    """Documented difference. Cube saves x*x, computed in forward (under no_grad): torch,
    and the eager door, treat it as a constant in the backward's graph, so the second
    derivative never reaches x; compiled code recomputes it from x, so it is exact (6x)."""
    compiled, numeric = compiled_hvp(F.f_cube, (X,), (V,))
    assert_all_close(compiled, numeric, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(compiled[0], 6 * X * V, rtol=1e-10)
    assert eager_hvp(F.f_cube, (X,), (V,)) == [None]


def test_func_twice_second_order_differs_by_the_saved_intermediate_only():
    """FuncTwice saves w = x*z (z = 4) and its backward reads it in gy = g*(x + z + w): eagerly
    w is a constant there, so d(gy)/dx lacks the 2*out*z term (out = x*y + y*z + w*y); all
    else agrees with the compiled door, which matches central differences."""
    z = 4.0
    compiled, numeric = compiled_hvp(F.f_func_twice, (X, Y), (V, U))
    assert_all_close(compiled, numeric, rtol=1e-5, atol=1e-6)
    eager = eager_hvp(F.f_func_twice, (X, Y), (V, U))
    out = X * Y + Y * z + X * z * Y
    np.testing.assert_allclose(eager[1], compiled[1], rtol=1e-10)
    np.testing.assert_allclose(eager[0], compiled[0] - 2 * out * z * U, rtol=1e-10, atol=1e-12)


def test_once_differentiable_refuses_a_second_derivative_in_both_doors():
    with pytest.raises(sg.CompileError, match="trying to differentiate twice a function that was "
                                              "marked with @once_differentiable"):
        sg.grad(_h1(sg.grad(F.f_sq_once)))(X, V)
    x = sg.tensor(X, requires_grad=True)
    (g,) = sg.autograd.grad(F.f_sq_once(x), x, sg.tensor(1.0, dtype=np.float64,
                                                         requires_grad=True), create_graph=True)
    with pytest.raises(RuntimeError, match="^trying to differentiate twice a function that was "
                                           "marked with @once_differentiable$"):
        (g * sg.tensor(V)).sum().backward()


# ---------------------------------------------------------------- errors: the same texts
SAME_ERROR = [
    (F.f_too_few, (X, Y), "function TooFewBackward returned an incorrect number of gradients "
                          "(expected 2, got 1)"),
    (F.f_extra_value, (X,), "function ExtraValueBackward returned an incorrect number of "
                            "gradients (expected 1, got 2)"),
    (F.f_grad_for_non_tensor, (X,), "function GradForNonTensorBackward returned a gradient "
                                    "different than None at position 2, but the corresponding "
                                    "forward input was not a Variable"),
    (F.f_wrong_shape, (X,), "Function WrongShapeBackward returned an invalid gradient at index 0 "
                            "- got [10] but expected shape compatible with [4]"),
    (F.f_no_backward, (X,), "You must implement either the backward or vjp method for your custom "
                            "autograd.Function to use it with backward mode AD."),
    (F.f_save_int, (X,), "save_for_backward can only save variables, but argument 1 is of type "
                         "int"),
    (S.dirty_not_returned, (X,), "Some elements marked as dirty during the forward method were "
                                 "not returned as output. The inputs that are modified inplace "
                                 "must all be outputs of the Function."),
]
# The eager door raises torch's exception types; the compiled door raises what it can see
# in the source as a CompileError (at compile time) and the rest at run time.
EAGER_TYPE = {F.f_no_backward: NotImplementedError, F.f_save_int: TypeError}
COMPILED_AT_RUN_TIME = {F.f_wrong_shape}  # a shape is known when the gradient is computed


@pytest.mark.parametrize("f,args,text", SAME_ERROR, ids=[c[0].__name__ for c in SAME_ERROR])
def test_the_same_error_text_in_both_doors(f, args, text):
    with pytest.raises(EAGER_TYPE.get(f, RuntimeError)) as eager:
        eager_grads(f, args)
    assert str(eager.value) == text
    kind = RuntimeError if f in COMPILED_AT_RUN_TIME else sg.CompileError
    with pytest.raises(kind) as compiled:
        compiled_grads(f, args)
    assert text in str(compiled.value)


# ---------------------------------------------------------------- writes into saved values
VERSION_ERROR = "one of the variables needed for gradient computation "
CERTAIN = [S.item_write, S.view_write, S.base_of_saved_view_write, S.known_array_augmented]


@pytest.mark.parametrize("f", CERTAIN + [S.output_written], ids=lambda f: f.__name__)
def test_a_write_into_a_saved_value_is_refused_by_both_doors(f):
    """Documented difference: where the compiler can prove the write it is a CompileError
    naming the save and the write; eagerly (as in torch) the version check raises at
    backward: `... has been modified by an inplace operation: [...] is at version 1;
    expected version 0 instead`."""
    args = (X,) if f is S.output_written else (X, Y)
    with pytest.raises(RuntimeError, match="^" + VERSION_ERROR + "has been modified by an inplace "
                                           r"operation: \[torch.DoubleTensor \[\d+\]\] \(srcgrad: a float64 "
                                           r"sg.Tensor of shape \(\d+,\)\), which is "
                                           r"output 0 of \S+, is at version \d+; expected version "
                                           r"\d+ instead\. Hint: "):
        eager_grads(f, args)
    with pytest.raises(sg.CompileError, match=VERSION_ERROR + "is modified by an inplace operation"):
        compiled_grads(f, args)


@pytest.mark.parametrize("f,args", [
    (S.maybe_scalar_augmented, (X, Y)),
    # strided: y's layout is not known to the compiler (of a C-ordered x the reshape is a
    # view, the write certain: a CompileError, test_saved_versions.py)
    (S.reshaped_then_written, (np.repeat(np.arange(1.0, 7.0).reshape(2, 3), 2, axis=1)[:, ::2],
                               np.full((2, 3), 0.5))),
], ids=["maybe_scalar_augmented", "reshaped_then_written"])
def test_a_possible_write_raises_at_run_time_in_both_doors(f, args):
    """Both raise torch's error at backward; the compiled text names where the value was saved
    and written (`[float64 [4]], which was saved by Mul at FILE:LINE ...`) where torch names
    the op that produced it (`[torch.DoubleTensor [4]], which is output 0 of Mul`)."""
    with pytest.raises(RuntimeError, match="^" + VERSION_ERROR + "has been modified") as eager:
        eager_grads(f, args)
    assert "is at version 1; expected version 0 instead" in str(eager.value)
    with pytest.raises(RuntimeError, match="^" + VERSION_ERROR + "has been modified") as compiled:
        compiled_grads(f, args)
    assert "which was saved by Mul at " in str(compiled.value)


def test_a_zero_dim_value_is_written_eagerly_and_rebound_by_numpy():
    """Documented difference: for a 0-d x, `y = x * 2.0` is a NumPy scalar in compiled code,
    so `y += 1.0` rebinds it and the saved value is intact; a 0-d Tensor is written in
    place, as in torch, and the version check raises."""
    args = (np.array(0.5), np.array(1.5))
    assert_all_close(compiled_grads(S.maybe_scalar_augmented, args),
                     central(S.maybe_scalar_augmented, args))
    with pytest.raises(RuntimeError, match="^" + VERSION_ERROR + "has been modified"):
        eager_grads(S.maybe_scalar_augmented, args)


def test_loop_write_before_save():
    """Documented difference (Note [Saved values written in place]): the next iteration
    writes what this one saved; torch's version check, and the eager door, raise; the
    compiled door does not see that write and differentiates the program as written."""
    args = (X, Y, 2)
    with pytest.raises(RuntimeError, match="^" + VERSION_ERROR):
        eager_grads(S.loop_write_before_save, args, wrt=(0, 1))
    assert_all_close(compiled_grads(S.loop_write_before_save, args, (0, 1)),
                     central(S.loop_write_before_save, args, (0, 1)))


def test_loop_item_write():
    """A save and a write in one loop body: checked at run time where the body runs (issue
    11, I9), as torch's check raises at backward."""
    with pytest.raises(RuntimeError, match="^" + VERSION_ERROR + "has been modified"):
        eager_grads(S.loop_item_write, (X, Y))
    with pytest.raises(RuntimeError, match="^" + VERSION_ERROR + "has been modified") as info:
        compiled_grads(S.loop_item_write, (X, Y))
    assert "which was saved by Mul at " in str(info.value)


def test_loop_maybe_scalar():
    with pytest.raises(RuntimeError, match="^" + VERSION_ERROR):
        eager_grads(S.loop_maybe_scalar, (X, Y, 2), wrt=(0, 1))
    with pytest.raises(RuntimeError, match="^" + VERSION_ERROR + "has been modified") as info:
        compiled_grads(S.loop_maybe_scalar, (X, Y, 2), (0, 1))
    assert "which was saved by Mul at " in str(info.value)


@pytest.mark.xfail(strict=True, reason="the eager runtime does not take a Tensor as NumPy's `out=` "
                                       "yet (np.multiply(y, 2.0, out=y))")
def test_out_write():
    with pytest.raises(RuntimeError, match="^" + VERSION_ERROR):
        eager_grads(S.out_write, (X, Y))


# ---------------------------------------------------------------- mark_dirty and writes
def test_mark_dirty_on_an_argument():
    """Documented difference: applied to a leaf that requires grad, torch (and the eager door)
    refuse to dirty it; compiled transforms never change the caller's array, so the
    argument is differentiated as if copied first — the eager result for a copy."""
    with pytest.raises(RuntimeError, match="^a leaf Variable that requires grad has been used in "
                                           "an in-place operation.$"):
        eager_grads(F.f_dirty, (X,))
    (compiled,) = compiled_grads(F.f_dirty, (X,))
    x = sg.tensor(X, requires_grad=True)
    F.f_dirty(x * 1.0).backward()
    np.testing.assert_allclose(compiled, x.grad.numpy())
    np.testing.assert_allclose(compiled, central(F.f_dirty, (X,))[0])


def test_writes_without_mark_dirty():
    """Documented difference: a forward that writes its input without mark_dirty is a
    CompileError in compiled code; torch, and the eager door, accept it silently and use
    the custom backward (here the identity, though forward zeroed x[0])."""
    (eager,) = eager_grads(S.writes_without_mark, (X,))
    np.testing.assert_allclose(eager, np.ones(4))
    with pytest.raises(sg.CompileError, match="writes its input `x` in place without marking it"):
        compiled_grads(S.writes_without_mark, (X,))


def test_saved_then_dirtied():
    """Documented difference: the forward saves x, then writes it and marks it dirty.
    Eagerly the saved value is the dirtied output as it is when forward returns (torch
    records saved versions after mark_dirty), so the backward runs; compiled code
    refuses the write into a saved value."""
    assert_all_close(eager_grads(S.saved_then_dirtied, (X,)), central(S.saved_then_dirtied, (X,)))
    with pytest.raises(sg.CompileError, match=VERSION_ERROR):
        compiled_grads(S.saved_then_dirtied, (X,))


def test_mark_dirty_on_a_view():
    """A dirtied view rewrites its base's history (torch's CopySlices) eagerly; compiled code
    reads the written base after the call. Both match central differences."""
    eager = eager_grads(S.dirty_view_of_caller, (X,))
    assert_all_close(eager, central(S.dirty_view_of_caller, (X,)))
    assert_all_close(eager, compiled_grads(S.dirty_view_of_caller, (X,)), rtol=SAME, atol=SAME)


# ---------------------------------------------------------------- saved-tensor hooks
class Recorder:
    def __init__(self):
        self.log = []

    def pack(self, x):
        self.log.append(("pack", np.array(x)))
        return ("packed", x)

    def unpack(self, packed):
        self.log.append(("unpack", np.array(packed[1])))
        return packed[1]


def test_hooks_pack_and_unpack_the_same_values_in_the_same_order():
    """f_two_calls: Exp saves e, Func saves (e, y, e*2, out); both doors pack the five at
    forward time in save order and unpack them at backward, Func's first."""
    compiled = Recorder()
    with saved_tensors_hooks(compiled.pack, compiled.unpack):
        out, vjp_fn = sg.vjp(F.f_two_calls, X, Y)
    compiled_grads_ = vjp_fn(np.ones(4))
    eager = Recorder()
    x, y = sg.tensor(X, requires_grad=True), sg.tensor(Y, requires_grad=True)
    with saved_tensors_hooks(eager.pack, eager.unpack):
        result = F.f_two_calls(x, y)
    assert [k for k, _ in eager.log] == ["pack"] * 5
    result.backward(sg.tensor(np.ones(4)))
    assert [k for k, _ in eager.log] == [k for k, _ in compiled.log] == ["pack"] * 5 + ["unpack"] * 5
    for (_, a), (_, b) in zip(eager.log, compiled.log):
        np.testing.assert_allclose(a, b)
    np.testing.assert_allclose(x.grad.numpy(), compiled_grads_[0])
    np.testing.assert_allclose(y.grad.numpy(), compiled_grads_[1])


def test_hooks_that_change_saved_values_change_both_gradients():
    with saved_tensors_hooks(lambda t: 2 * t, lambda t: t):
        _, vjp_fn = sg.vjp(F.f_sq, X)
        x = sg.tensor(X, requires_grad=True)
        y = F.f_sq(x)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), vjp_fn(np.array(1.0))[0])
    np.testing.assert_allclose(x.grad.numpy(), 4 * X)


# ---------------------------------------------------------------- coverage
PROGRAMS = ([f for f, _ in FIRST + SECOND] + [f for f, _, _ in SAME_ERROR]
            + CERTAIN + [S.output_written, S.maybe_scalar_augmented, S.reshaped_then_written,
                         S.loop_write_before_save, S.loop_maybe_scalar, S.out_write, F.f_dirty,
                         S.writes_without_mark, S.saved_then_dirtied, S.dirty_view_of_caller,
                         F.f_straight_through, F.f_cube, F.f_func_twice, F.f_sq_once,
                         F.f_two_calls])


def _applied(f) -> set:
    """The Function classes program `f` applies (its global names, and the programs it calls)."""
    module = inspect.getmodule(f)
    found = set()
    for name in f.__code__.co_names:
        value = getattr(module, name, None)
        if isinstance(value, type) and issubclass(value, Function) and value is not Function:
            found.add(value)
        elif inspect.isfunction(value) and value is not f:
            found |= _applied(value)
    return found


def test_every_corpus_function_is_covered():
    corpus = {v for m in (F, S) for v in vars(m).values()
              if isinstance(v, type) and issubclass(v, Function) and v is not Function}
    covered = set().union(*(_applied(f) for f in PROGRAMS))
    missing = sorted(c.__name__ for c in corpus - covered)
    assert not missing, f"corpus Functions without a parity case: {missing}"
