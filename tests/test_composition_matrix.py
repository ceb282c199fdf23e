"""The composition matrix (issue 28): every pair of srcgrad's transforms, composed two
deep, gives the right value and shape, or is refused with an error naming the
composition and this file's line. Right means: against central differences (float64)
of the inner function, which is itself checked against central differences of the
function it transforms (`test_inner`), so every number is checked against arithmetic.
Shapes follow JAX: the derivative of an `out.shape`-valued function of an `x.shape`
argument has shape `out.shape + x.shape`; nesting appends the argument's dims again.

What a transform in the INNER place means, as a function `h` of x (F the function
transformed, `ct` and `t` fixed constants):

  grad            h = sg.grad(F)
  value_and_grad  h(x) = v * g, where (v, g) = sg.value_and_grad(F)(x): a function that
                  calls value_and_grad and uses both the value and the gradient
  vjp             h(x) = vjp_fn(ct)[0], where (_, vjp_fn) = sg.vjp(F, x)
  jvp             h(x) = sg.jvp(F, (x,), (t,))[1]
  jacfwd/jacrev/jacauto   h = sg.jacobian(F, mode="forward" | "reverse" | "auto")
  hessian         h = sg.hessian(F)

and in the OUTER place, applied to h at x (what is compared, D the central-difference
derivative of h, shape h(x).shape + x.shape):

  grad            sg.grad(h)(x)                        == D (h must be scalar)
  value_and_grad  sg.value_and_grad(h)(x)              == (h(x), D)
  vjp             sg.vjp(h, x), then vjp_fn(ct_h)[0]   == (h(x), ct_h . D)
  jvp             sg.jvp(h, (x,), (t_h,))              == (h(x), D . t_h)
  jacfwd/...      sg.jacobian(h, mode=...)(x)          == D
  hessian         sg.hessian(h)(x)                     == D of D (h must be scalar)

Refused, by rule (`expected_refusal`), and nothing else is:
  * grad or value_and_grad OF sg.grad(F) where F unpacks x's rows: the outer transform
    reads the gradient's shape-generic code (a transformed function is parsed before any
    call gives shapes), whose row-count refusal names F's line (h is not scalar anyway);
  * grad, value_and_grad or hessian OF a jacobian or hessian: a Jacobian is assembled
    from many passes and has no generated source to differentiate; a CompileError at
    the line of the outer call. (sg.jacobian of one is computed from the function's
    higher derivatives, Note [Jacobians of Jacobians] in srcgrad.jacobian_trees, and sg.vjp
    and sg.jvp of one from that, Note [Transforms of a Jacobian].)
  * sg.vjp of a function with a loop called inside a function that is differentiated
    (its backward pops the loop's tape): a CompileError at the `sg.vjp` line;
  * grad, value_and_grad or hessian of a function whose output is not a scalar (JAX's
    rule, not torch's: see test_one_element_outputs): a TypeError naming the function,
    with a note naming the line of the call (sg.hessian checks this before tracing
    anything, so it is the error a hessian of a non-scalar loop vjp meets first).
`sg.vmap` is in the matrix too, outer and inner (the section "vmap in the matrix" below:
exact, 1e-12, against Python loops of the unbatched transforms, with its own refusals).
The functions F run straight-line code, a `for` loop, a `while` loop, and forms decided
on x's row count (`enumerate(x)`, `first, *rest = x`: a transform of their gradient runs
the gradient's variant for x's shape, as `sg.grad(F)(x)` does); x is a vector and a 0-d
array (where grad of a gradient is defined). `grad∘grad∘grad` and the
nested Jacobians of vector functions (shape (m, n, n)) have tests of their own.
"""

from __future__ import annotations

import linecache

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.errors import CompileError
from tests.conftest import assert_close


def f_line(x):
    return np.sum(np.sin(x) * x) + np.sum(x ** 3) * 0.5


def f_for(x):
    acc = np.sum(x) * 0.0 + 1.0
    for i in range(3):
        acc = acc * 0.5 + np.sum(np.sin(x * (i + 1)))
    return acc


def f_while(x):
    acc = np.sum(x * x)
    k = 0
    while k < 3:
        acc = np.sin(acc) + np.sum(x) * 0.3
        k = k + 1
    return acc


def g_line(x):
    return np.sin(x[:2]) * x[2] + x[0] ** 2


def g_for(x):
    acc = x[:2] * 1.0
    for i in range(2):
        acc = np.sin(acc) * x[2] + x[1:] * (i + 1)
    return acc


def g_while(x):
    acc = x[1:] * x[0]
    k = 0
    while k < 2:
        acc = np.cos(acc) * x[:2]
        k = k + 1
    return acc


def f_rows(x):
    # forms decided on the row count, which only a variant for x's shape knows
    first, *rest = x
    acc = sum(np.sin(r) * (i + 1) for i, r in enumerate(x))
    return acc + first * rest[0] ** 2


def g_rows(x):
    head, *tail = x
    return np.stack([np.sin(r) * head for r in tail]) + x[:2] ** 2


SCALAR = {"line": f_line, "for": f_for, "while": f_while, "rows": f_rows}
VECTOR = {"line": g_line, "for": g_for, "while": g_while, "rows": g_rows}
VECTOR_ONLY = {f_rows}  # (a 0-d array has no rows)
LOOPS = {f_for, f_while, g_for, g_while}
JACOBIANS = {"jacfwd": "forward", "jacrev": "reverse", "jacauto": "auto"}
TRANSFORMS = ["grad", "value_and_grad", "vjp", "jvp", *JACOBIANS, "hessian"]
POINTS = {"vector": np.array([0.3, -0.5, 0.8]), "0-d": np.array(0.4)}


def vag_of(F):
    def vag_h(x):
        v, gr = sg.value_and_grad(F)(x)
        return v * gr
    return vag_h


def vjp_of(F, ct):
    def vjp_h(x):
        out, back = sg.vjp(F, x)
        return back(ct)[0]
    return vjp_h


def jvp_of(F, t):
    def jvp_h(x):
        return sg.jvp(F, (x,), (t,))[1]
    return jvp_h


def constant(shape, value):
    return np.full(shape, value) + np.arange(int(np.prod(shape))).reshape(shape) * 0.1


def inner(name, F, x):
    """The function h: `name` in the inner place (the module docstring)."""
    if name == "grad":
        return sg.grad(F)
    if name == "value_and_grad":
        return vag_of(F)
    if name == "vjp":
        return vjp_of(F, constant(np.shape(F(x)), 1.3))
    if name == "jvp":
        return jvp_of(F, constant(np.shape(x), 0.7))
    if name in JACOBIANS:
        return sg.jacobian(F, mode=JACOBIANS[name])
    return sg.hessian(F)


def apply_outer(name, h, x):
    """`name` in the outer place, applied to h at x (the module docstring)."""
    if name == "grad":
        return sg.grad(h)(x)
    if name == "value_and_grad":
        return sg.value_and_grad(h)(x)
    if name == "vjp":
        out, back = sg.vjp(h, x)
        return out, back(constant(np.shape(out), 0.9))[0]
    if name == "jvp":
        return sg.jvp(h, (x,), (constant(np.shape(x), 0.4),))
    if name in JACOBIANS:
        return sg.jacobian(h, mode=JACOBIANS[name])(x)
    return sg.hessian(h)(x)


def fd(h, x, eps=1e-6):
    """Central differences of h at x: shape h(x).shape + x.shape."""
    x = np.asarray(x, dtype=float)
    cols = []
    for i in range(x.size):
        step = np.zeros(x.size)
        step[i] = eps
        step = step.reshape(x.shape)
        cols.append((np.asarray(h(x + step)) - np.asarray(h(x - step))) / (2 * eps))
    out = np.stack(cols, axis=-1)
    return out.reshape(np.shape(h(x)) + x.shape)


def expected(outer, h, x):
    value = np.asarray(h(x))
    if outer == "hessian":
        return fd(lambda y: fd(h, y, 1e-4), x, 1e-4)
    d = fd(h, x)
    if outer == "grad" or outer in JACOBIANS:
        return d
    if outer == "value_and_grad":
        return value, d
    if outer == "vjp":
        ct = constant(value.shape, 0.9)
        return value, np.tensordot(ct, d, axes=value.ndim)
    t = constant(np.shape(x), 0.4)
    return value, np.tensordot(d, t, axes=np.ndim(x))


def expected_refusal(inner_name, outer, F, h, x):
    """(error class, text its message holds) for a refused cell, else None."""
    if (inner_name in JACOBIANS or inner_name == "hessian") and outer in (
            "grad", "value_and_grad", "hessian"):
        return CompileError, f"sg.{outer}"
    if outer == "hessian" and np.ndim(h(x)) != 0:  # checked before anything is traced
        return TypeError, "needs a scalar output"
    if inner_name == "vjp" and F in LOOPS:
        return CompileError, "`sg.vjp` of a function with a loop"
    if inner_name == "grad" and F in VECTOR_ONLY and outer in ("grad", "value_and_grad"):
        # (the outer transform reads the gradient's shape-generic code, before any call's
        # shapes; its row-count refusal, at F's line, comes before the scalar check)
        return CompileError, "row count is not known when compiling"
    if outer in ("grad", "value_and_grad", "hessian") and np.ndim(h(x)) != 0:
        return TypeError, "needs a scalar output"
    return None


def cells():
    for fname, F in SCALAR.items():
        for point in ["vector"] if F in VECTOR_ONLY else POINTS:
            for i in TRANSFORMS:
                for o in TRANSFORMS:
                    yield pytest.param(F, point, i, o, id=f"{o}-of-{i}-{fname}-{point}")
    for fname, G in VECTOR.items():  # vector-valued: the inner transforms that take one
        for i in ("vjp", "jvp", *JACOBIANS):
            for o in TRANSFORMS:
                yield pytest.param(G, "vector", i, o, id=f"{o}-of-{i}-{fname}_vec-vector")


def assert_tree_close(actual, wanted):
    if isinstance(wanted, tuple):
        assert isinstance(actual, tuple) and len(actual) == len(wanted)
        for a, w in zip(actual, wanted):
            assert_tree_close(a, w)
        return
    assert np.shape(actual) == np.shape(wanted), (np.shape(actual), np.shape(wanted))
    assert_close(actual, wanted, rtol=1e-5, atol=1e-6)


def assert_names_this_file(err, call):
    """The error names a line of this file: CompileError's location (whose source line
    holds `call`), else a note (a TypeError about a whole function)."""
    if isinstance(err, CompileError):
        assert err.filename == __file__, str(err)
        assert call in linecache.getline(__file__, err.lineno), str(err)
    else:
        notes = "\n".join(getattr(err, "__notes__", []))
        assert __file__.rsplit("/", 1)[-1] in notes, (str(err), notes)


@pytest.mark.parametrize("F, point, inner_name, outer", list(cells()))
def test_composition(F, point, inner_name, outer):
    x = POINTS[point]
    h = inner(inner_name, F, x)
    refusal = expected_refusal(inner_name, outer, F, h, x)
    if refusal is not None:
        cls, text = refusal
        with pytest.raises(cls) as info:
            apply_outer(outer, h, x)
        assert text in str(info.value), str(info.value)
        call = "sg.vjp(F" if text.startswith("`sg.vjp`") else "first, *rest = x" \
            if text.startswith("row count") else \
            "sg.jacobian(" if outer in JACOBIANS else f"sg.{outer}("
        assert_names_this_file(info.value, call if cls is CompileError else "")
        return
    assert_tree_close(apply_outer(outer, h, x), expected(outer, h, x))


def inner_cells():
    for F in SCALAR.values():
        for point in ["vector"] if F in VECTOR_ONLY else POINTS:
            for name in TRANSFORMS:
                yield pytest.param(F, name, point, id=f"{name}-{F.__name__}-{point}")
    for G in VECTOR.values():  # (not grad, value_and_grad, hessian: they need a scalar)
        for name in ("vjp", "jvp", *JACOBIANS):
            yield pytest.param(G, name, "vector", id=f"{name}-{G.__name__}-vector")


@pytest.mark.parametrize("F, name, point", list(inner_cells()))
def test_inner(F, name, point):
    """Each inner function h against central differences of F (one transform deep)."""
    x = POINTS[point]
    h = inner(name, F, x)
    d = fd(F, x)
    if name == "grad" or name in JACOBIANS:
        want = d
    elif name == "value_and_grad":
        want = F(x) * d
    elif name == "vjp":
        want = np.tensordot(constant(np.shape(F(x)), 1.3), d, axes=np.ndim(F(x)))
    elif name == "jvp":
        want = np.tensordot(d, constant(np.shape(x), 0.7), axes=np.ndim(x))
    else:
        want = fd(lambda y: fd(F, y, 1e-4), x, 1e-4)
    assert_tree_close(h(x), want)


# ------------------------------------------------------------ nested Jacobians (item 1)

@pytest.mark.parametrize("G", list(VECTOR.values()), ids=lambda G: G.__name__)
@pytest.mark.parametrize("m1", list(JACOBIANS.values()))
@pytest.mark.parametrize("m2", list(JACOBIANS.values()))
def test_jacobian_of_jacobian_is_second_derivatives(G, m1, m2):
    """sg.jacobian(sg.jacobian(g)) of g: (3,) -> (2,) is (2, 3, 3), g's second
    derivatives. Before issue 28 it was the inner Jacobian, (2, 3): the outer Jacobian
    copied the inner's state through functools.update_wrapper's __dict__."""
    x = POINTS["vector"]
    jj = sg.jacobian(sg.jacobian(G, mode=m1), mode=m2)(x)
    assert jj.shape == (2, 3, 3)
    assert_close(jj, fd(lambda y: fd(G, y, 1e-4), x, 1e-4), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("F", list(SCALAR.values()), ids=lambda F: F.__name__)
@pytest.mark.parametrize("m1", list(JACOBIANS.values()))
def test_jacobian_of_jacobian_of_scalar_is_hessian(F, m1):
    x = POINTS["vector"]
    jj = sg.jacobian(sg.jacobian(F, mode=m1), mode=m1)(x)
    assert jj.shape == (3, 3)
    assert_close(jj, sg.hessian(F)(x), rtol=1e-10, atol=1e-12)
    assert_close(jj, fd(lambda y: fd(F, y, 1e-4), x, 1e-4), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("F", list(SCALAR.values()), ids=lambda F: F.__name__)
@pytest.mark.parametrize("mode", list(JACOBIANS.values()))
def test_jacobian_of_hessian_is_third_derivatives(F, mode):
    x = POINTS["vector"]
    jh = sg.jacobian(sg.hessian(F), mode=mode)(x)
    assert jh.shape == (3, 3, 3)
    assert_close(jh, fd(sg.hessian(F), x), rtol=1e-5, atol=1e-6)
    assert_close(jh, np.swapaxes(jh, 0, 2), rtol=1e-8, atol=1e-10)  # symmetric, as d3f is


def pair(x, y):
    return {"a": np.sin(x) * y[0], "b": (np.sum(x) * np.sum(y * y), y ** 2 * x[1])}


def test_nested_jacobian_trees_follow_jax():
    """Tuple wrt on both levels and a dict/tuple output: each leaf of the inner Jacobian
    (out.shape + arg_i.shape) gains, per outer argument, that argument's shape, as
    jax.jacobian(jax.jacobian(pair, (0, 1)), (0, 1)) nests them."""
    x, y = np.array([0.2, 0.7]), np.array([1.1, -0.4, 0.5])
    got = sg.jacobian(sg.jacobian(pair, wrt=(0, 1)), wrt=(1, 0))(x, y)
    args = (x, y)
    for key, leaf_of in (("a", lambda o: o["a"]), ("b0", lambda o: o["b"][0]),
                         ("b1", lambda o: o["b"][1])):
        leaf = leaf_of(got)
        assert isinstance(leaf, tuple) and len(leaf) == 2
        for i in range(2):
            assert isinstance(leaf[i], tuple) and len(leaf[i]) == 2
            for slot, o in enumerate((1, 0)):
                def inner_d(v, i=i, o=o, leaf_of=leaf_of):
                    a = list(args)
                    a[o] = v
                    return fd(lambda u: leaf_of(pair(*[u if k == i else a[k] for k in range(2)])),
                              a[i], 1e-4)
                want = fd(inner_d, args[o], 1e-4)
                assert leaf[i][slot].shape == want.shape, (key, i, o)
                assert_close(leaf[i][slot], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("F", [F for F in SCALAR.values() if F not in VECTOR_ONLY],
                         ids=lambda F: F.__name__)
def test_grad_grad_grad(F):
    x = POINTS["0-d"]
    ggg = sg.grad(sg.grad(sg.grad(F)))(x)
    assert np.shape(ggg) == ()
    assert_close(ggg, fd(sg.grad(sg.grad(F)), x), rtol=1e-5, atol=1e-6)
    assert_close(ggg, fd(lambda y: fd(lambda u: fd(F, u, 1e-3), y, 1e-3), x, 1e-3),
                 rtol=1e-3, atol=1e-4)


def test_transform_of_a_jacobian_names_the_users_line():
    """sg.vjp of a Jacobian was refused at `<unknown>:0:1`; it is computed now, and what
    is still refused (sg.grad of one, sg.vjp with has_aux) names the call's line."""
    jac = sg.jacobian(f_line)
    with pytest.raises(CompileError) as info:
        sg.grad(jac)(POINTS["0-d"])  # the line named
    err = info.value
    assert err.filename == __file__ and "# the line named" in linecache.getline(__file__, err.lineno)
    assert "sg.grad" in str(err) and "sg.jacobian of `f_line`" in str(err)
    with pytest.raises(CompileError) as info:
        sg.vjp(sg.jacobian(g_line), POINTS["vector"], has_aux=True)  # the vjp line
    err = info.value
    assert err.filename == __file__ and "# the vjp line" in linecache.getline(__file__, err.lineno)
    assert "has_aux" in str(err)


@pytest.mark.parametrize("mode", list(JACOBIANS.values()))
def test_vjp_and_jvp_of_a_jacobian_of_two_arguments(mode):
    """Note [Transforms of a Jacobian]: every primal's gradient and a tangent per primal,
    on a function of two arguments whose Jacobian is w.r.t. the second."""
    x, y = np.array([0.3, -0.2, 0.6]), np.array([0.5, 1.5])

    def two(x, y):
        return np.sin(x[:2] * y) + y[0] * x[2] ** 2

    jac = sg.jacobian(two, wrt=1, mode=mode)
    out, back = sg.vjp(jac, x, y)
    ct = constant(out.shape, 0.3)
    gx, gy = back(ct)
    assert gx.shape == x.shape and gy.shape == y.shape
    assert_close(gx, fd(lambda u: np.sum(ct * jac(u, y)), x), rtol=1e-5, atol=1e-7)
    assert_close(gy, fd(lambda v: np.sum(ct * jac(x, v)), y), rtol=1e-5, atol=1e-7)
    tx, ty = constant(x.shape, 0.2), constant(y.shape, -0.4)
    out2, tout = sg.jvp(jac, (x, y), (tx, ty))
    assert_close(out2, jac(x, y))
    want = np.tensordot(fd(lambda u: jac(u, y), x), tx, 1) + np.tensordot(fd(lambda v: jac(x, v), y), ty, 1)
    assert tout.shape == out.shape
    assert_close(tout, want, rtol=1e-5, atol=1e-7)


def test_hessian_of_a_vector_function_is_refused():
    """sg.hessian of a non-scalar function returned the Hessian of its sum (the per-seed
    code dropped the gradient's scalar check, which no output read)."""
    with pytest.raises(TypeError, match="hessian of g_line\\(\\) needs a scalar output"):
        sg.hessian(g_line)(POINTS["vector"])


def test_hessian_of_a_jacobian_is_refused_at_the_call():
    with pytest.raises(CompileError) as info:
        sg.hessian(sg.jacobian(f_line))(POINTS["vector"])
    assert info.value.filename == __file__
    assert "sg.hessian of a sg.jacobian" in str(info.value)


# ------------------------------------------------------------ vmap in the matrix (issue 32)
# sg.vmap as a transform in both places. Right means: exactly (1e-12) what a Python loop of
# the unbatched transforms gives, each of which the matrix above checks against arithmetic.
#
#   OUTER  sg.vmap(h) for h each inner function above (and sg.vmap(sg.vmap(h))), over a
#          batch of points: == np.stack([h(x_i) for x_i in batch]).
#   INNER  vmap      h = sg.vmap(F), at a batch X of shape (2,) + x.shape: its derivative is
#                    block-diagonal, blocks sg.jacobian(F)(X[i]) (a loop);
#          vmap_sum  h(X) = np.sum(sg.vmap(F)(X)), a function calling vmap: its gradient
#                    is np.stack([grad of sum F at X[i]]), its Hessian block-diagonal.
# The functions F: the matrix's straight-line, `for` and `while` ones, and one of each kind
# with in-place writes (`y[0] = ...`, `y += ...`). Refused (and nothing else is): grad,
# value_and_grad and hessian of a non-scalar vmap (the rule above: TypeError naming the
# function, with the line of the call in a note); grad, value_and_grad and hessian OF a
# vmap of a jacobian or hessian (as of a jacobian: a CompileError at the outer call).
VTOL = 1e-12


# A transform of sg.vmap's generated code of a loop's derivative (its loop keeps a tape):
# refused at the loop's line (srcgrad.frontend.control), in each cell that reaches it.
TAPE_REFUSAL = "generated code of a loop's derivative cannot be traced again"


def f_write(x):
    y = x * 1.0
    y[0] = np.sin(x[1]) * x[2]
    y += x ** 2
    return np.sum(y * y)


def g_write(x):
    y = x[:2] * 1.0
    y[1] = np.cos(x[2]) * y[0]
    y *= x[1:]
    return y


VSCALAR = {**SCALAR, "write": f_write}
VVECTOR = {**VECTOR, "write": g_write}
BATCH = np.array([[0.3, -0.5, 0.8], [-0.2, 0.6, 0.1]])
BATCH_0D = np.array([0.4, -0.3])  # examples of the 0-d point


def loop(h, X):
    return np.stack([np.asarray(h(X[i])) for i in range(len(X))])


def assert_exact(actual, wanted):
    if isinstance(wanted, tuple):
        assert isinstance(actual, tuple) and len(actual) == len(wanted)
        for a, w in zip(actual, wanted):
            assert_exact(a, w)
        return
    assert np.shape(actual) == np.shape(wanted), (np.shape(actual), np.shape(wanted))
    np.testing.assert_allclose(actual, wanted, rtol=VTOL, atol=VTOL)


def vmap_outer_cells():
    for fname, F in VSCALAR.items():
        for point in ("vector",) if F is f_write or F in VECTOR_ONLY else ("vector", "0-d"):
            for i in TRANSFORMS:
                yield pytest.param(F, point, i, id=f"vmap-of-{i}-{fname}-{point}")
    for fname, G in VVECTOR.items():
        for i in ("vjp", "jvp", *JACOBIANS):
            yield pytest.param(G, "vector", i, id=f"vmap-of-{i}-{fname}_vec-vector")


@pytest.mark.parametrize("F, point, inner_name", list(vmap_outer_cells()))
def test_vmap_of_each_transform(F, point, inner_name):
    X = BATCH if point == "vector" else BATCH_0D
    h = inner(inner_name, F, X[0])
    if inner_name == "vjp" and F in LOOPS:  # the matrix's rule, at the inner sg.vjp's line
        with pytest.raises(CompileError, match="`sg.vjp` of a function with a loop") as info:
            sg.vmap(h)(X)
        assert_names_this_file(info.value, "sg.vjp(F")
        return
    assert_exact(sg.vmap(h)(X), loop(h, X))


@pytest.mark.parametrize("inner_name", ["grad", "jvp", "jacrev", "hessian"])
@pytest.mark.parametrize("F", [f_for, f_write], ids=lambda F: F.__name__)
def test_vmap_of_vmap_of_a_transform(F, inner_name):
    XX = np.stack([BATCH, BATCH[::-1] * 0.5])  # (2, 2, 3)
    h = inner(inner_name, F, XX[0, 0])
    if F is f_for and inner_name != "jvp":  # the inner vmap's code pushes the loop's tape
        with pytest.raises(CompileError, match=TAPE_REFUSAL) as info:
            sg.vmap(sg.vmap(h))(XX)
        assert_names_this_file(info.value, "for i in range(3)")
        return
    assert_exact(sg.vmap(sg.vmap(h))(XX), np.stack([loop(h, XX[k]) for k in range(2)]))


def block_diagonal(blocks):
    """(B,) + out + (B,) + x: blocks[i] at [i, ..., i, ...], zeros elsewhere."""
    b = len(blocks)
    out_nd = blocks[0].ndim - BATCH.ndim + 1
    full = np.zeros((b,) + blocks[0].shape[:out_nd] + (b,) + blocks[0].shape[out_nd:])
    for i, block in enumerate(blocks):
        full[(i,) + (slice(None),) * out_nd + (i,)] = block
    return full


def vmap_inner(name, F):
    if name == "vmap":
        return sg.vmap(F)

    def vmap_sum(X):
        return np.sum(sg.vmap(F)(X))
    return vmap_sum


def vmap_expected(outer, inner_name, F):
    """What `outer` of the vmap inner function gives at BATCH, from loops of F's own
    unbatched transforms (sg.jacobian of F per example)."""
    X = BATCH
    jacs = [np.asarray(sg.jacobian(F)(x)) for x in X]
    if inner_name == "vmap":
        value, d = loop(F, X), block_diagonal(jacs)
    else:
        value = np.sum(loop(F, X))
        d = np.stack([j.reshape(-1, *x.shape).sum(0) for j, x in zip(jacs, X)])
    if outer == "hessian":
        hess = [np.asarray(sg.jacobian(sg.jacobian(F))(x)) for x in X]
        return block_diagonal([hh.reshape(-1, *hh.shape[-2:]).sum(0) for hh in hess])
    if outer == "grad" or outer in JACOBIANS:
        return d
    if outer == "value_and_grad":
        return value, d
    if outer == "vjp":
        ct = constant(np.shape(value), 0.9)
        return value, np.tensordot(ct, d, axes=np.ndim(value))
    t = constant(X.shape, 0.4)
    return value, np.tensordot(d, t, axes=X.ndim)


def vmap_inner_cells():
    for fam in (VSCALAR, VVECTOR):
        for fname, F in fam.items():
            tag = fname if fam is VSCALAR else f"{fname}_vec"
            for i in ("vmap", "vmap_sum"):
                for o in TRANSFORMS:
                    yield pytest.param(F, i, o, id=f"{o}-of-{i}-{tag}")


@pytest.mark.parametrize("F, inner_name, outer", list(vmap_inner_cells()))
def test_each_transform_of_vmap(F, inner_name, outer):
    h = vmap_inner(inner_name, F)
    if outer in ("grad", "value_and_grad") and inner_name == "vmap":  # traced shape-generic
        with pytest.raises(CompileError, match="need a scalar output") as info:
            apply_outer(outer, h, BATCH)
        assert_names_this_file(info.value, f"sg.{outer}(")
        return
    if outer == "hessian" and inner_name == "vmap":  # (checked before anything is traced)
        with pytest.raises(TypeError, match="needs a scalar output") as info:
            apply_outer(outer, h, BATCH)
        assert_names_this_file(info.value, "")
        return
    assert_exact(apply_outer(outer, h, BATCH), vmap_expected(outer, inner_name, F))


@pytest.mark.parametrize("F, inner_name, outer", [
    pytest.param(F, i, o, id=f"{o}-of-{i}-of-grad-{fname}")
    for fname, F in VSCALAR.items() for i in ("vmap", "vmap_sum") for o in TRANSFORMS])
def test_each_transform_of_vmap_of_grad(F, inner_name, outer):
    """Three deep: per-example gradients, transformed (sg.jacobian of them: per-example
    Hessians, JAX's jacfwd(vmap(grad(f)))); of a loop's, refused at the loop's line."""
    if F in LOOPS and not (inner_name == "vmap" and outer in (
            "grad", "value_and_grad", "hessian")):
        # (forward mode of a function calling it traces shape-generic first, where the
        # vmap has no code to read: that refusal, at the same line)
        shape_generic = inner_name == "vmap_sum" and outer in ("jvp", "jacfwd")
        with pytest.raises(CompileError, match="sg.vmap called inside compiled code"
                           if shape_generic else TAPE_REFUSAL) as info:
            apply_outer(outer, vmap_inner(inner_name, sg.grad(F)), BATCH)
        assert_names_this_file(info.value, "sg.vmap(F)(X)" if inner_name == "vmap_sum" else
                               "for i in range(3)" if F is f_for else "while k < 3")
        return
    test_each_transform_of_vmap(sg.grad(F), inner_name, outer)


def two_args(w, x):
    acc = np.sum(np.sin(w * x) * x)
    for i in range(2):
        acc = acc + np.sum(w ** 2 * x[i])
    return acc


def two_args_vec(w, x):
    y = w[:2] * x[1:]
    y[0] = np.cos(y[1]) * w[2]
    return y


TWO_ARGS = {
    "grad-w": lambda: sg.grad(two_args),
    "grad-both": lambda: sg.grad(two_args, wrt=(0, 1)),
    "value_and_grad-x": lambda: sg.value_and_grad(two_args, wrt=1),
    "hessian-w": lambda: sg.hessian(two_args),
    "jacfwd-vec": lambda: sg.jacobian(two_args_vec, mode="forward"),
    "jacrev-vec-both": lambda: sg.jacobian(two_args_vec, wrt=(0, 1), mode="reverse"),
}


@pytest.mark.parametrize("out_axes", [0, 1])
@pytest.mark.parametrize("in_axes", [(None, 0), (0, None), (0, 0), (1, 0)])
@pytest.mark.parametrize("name", list(TWO_ARGS))
def test_vmap_in_axes_and_out_axes_of_transforms(name, in_axes, out_axes):
    """Per-example transforms of a two-argument function, each in_axes/out_axes form,
    against a loop (the batch axis is where in_axes puts it, the result's at out_axes)."""
    t = TWO_ARGS[name]()
    w, x = BATCH[0] * 0.7, BATCH[1]
    args = tuple(a if ax is None else np.stack([a, a[::-1] * 0.5, a * 1.5], axis=ax)
                 for a, ax in zip((w, x), in_axes))
    outs = [t(*(a if ax is None else np.take(a, i, axis=ax) for a, ax in zip(args, in_axes)))
            for i in range(3)]
    if out_axes == 1 and np.ndim(outs[0] if not isinstance(outs[0], tuple) else outs[0][0]) == 0:
        out_axes = 0  # (a scalar's batch axis can only be 0)

    def stacked(leaves):
        if isinstance(leaves[0], tuple):
            return tuple(stacked([leaf[k] for leaf in leaves]) for k in range(len(leaves[0])))
        return np.stack(leaves, axis=out_axes if np.ndim(leaves[0]) else 0)
    got = sg.vmap(t, in_axes=in_axes, out_axes=out_axes)(*args)
    assert_exact(got, stacked(outs))
