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
  * grad, value_and_grad, vjp, jvp or hessian OF a jacobian or hessian: a Jacobian is
    assembled from many passes and has no generated source to differentiate; a
    CompileError at the line of the outer call (sg.jacobian of one is computed: Note
    [Jacobians of Jacobians] in srcgrad.jacobians);
  * sg.vjp of a function with a loop called inside a function that is differentiated
    (its backward pops the loop's tape): a CompileError at the `sg.vjp` line;
  * grad, value_and_grad or hessian of a function whose output is not a scalar (JAX's
    rule, not torch's: see test_one_element_outputs): a TypeError naming the function,
    with a note naming the line of the call (sg.hessian checks this before tracing
    anything, so it is the error a hessian of a non-scalar loop vjp meets first).
The functions F run straight-line code, a `for` loop and a `while` loop; x is a vector
and a 0-d array (where grad of a gradient is defined). `grad∘grad∘grad` and the
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


SCALAR = {"line": f_line, "for": f_for, "while": f_while}
VECTOR = {"line": g_line, "for": g_for, "while": g_while}
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
    if (inner_name in JACOBIANS or inner_name == "hessian") and outer not in JACOBIANS:
        return CompileError, f"sg.{outer}"
    if outer == "hessian" and np.ndim(h(x)) != 0:  # checked before anything is traced
        return TypeError, "needs a scalar output"
    if inner_name == "vjp" and F in LOOPS:
        return CompileError, "`sg.vjp` of a function with a loop"
    if outer in ("grad", "value_and_grad", "hessian") and np.ndim(h(x)) != 0:
        return TypeError, "needs a scalar output"
    return None


def cells():
    for fname, F in SCALAR.items():
        for point in POINTS:
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
        call = "sg.vjp(F" if text.startswith("`sg.vjp`") else \
            "sg.jacobian(" if outer in JACOBIANS else f"sg.{outer}("
        assert_names_this_file(info.value, call if cls is CompileError else "")
        return
    assert_tree_close(apply_outer(outer, h, x), expected(outer, h, x))


def inner_cells():
    for F in SCALAR.values():
        for point in POINTS:
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


@pytest.mark.parametrize("F", list(SCALAR.values()), ids=lambda F: F.__name__)
def test_grad_grad_grad(F):
    x = POINTS["0-d"]
    ggg = sg.grad(sg.grad(sg.grad(F)))(x)
    assert np.shape(ggg) == ()
    assert_close(ggg, fd(sg.grad(sg.grad(F)), x), rtol=1e-5, atol=1e-6)
    assert_close(ggg, fd(lambda y: fd(lambda u: fd(F, u, 1e-3), y, 1e-3), x, 1e-3),
                 rtol=1e-3, atol=1e-4)


def test_transform_of_a_jacobian_names_the_users_line():
    """sg.vjp of a Jacobian was refused at `<unknown>:0:1`; now at the call's line."""
    jac = sg.jacobian(g_line)
    with pytest.raises(CompileError) as info:
        sg.vjp(jac, POINTS["vector"])  # the line named
    err = info.value
    assert err.filename == __file__ and "# the line named" in linecache.getline(__file__, err.lineno)
    assert "sg.vjp" in str(err) and "sg.jacobian of `g_line`" in str(err)


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
