"""sg.vmap (issue 32): every in_axes/out_axes form and composition against a Python loop
of the unbatched function or transform (exact to 1e-12), and its refusals."""

import numpy as np
import pytest

import srcgrad as sg

RNG = np.random.default_rng(0)
TOL = 1e-12


def close(a, b):
    np.testing.assert_allclose(a, b, rtol=TOL, atol=TOL)


def loop_over(fn, args, axes, out_axis=0):
    """The reference: fn called per example, the results stacked on out_axis."""
    size = next(np.shape(a)[ax] for a, ax in zip(args, axes) if ax is not None)
    outs = [fn(*(a if ax is None else np.take(a, i, axis=ax) for a, ax in zip(args, axes)))
            for i in range(size)]
    if isinstance(outs[0], tuple):
        return tuple(np.stack([o[k] for o in outs], out_axis) for k in range(len(outs[0])))
    return np.stack(outs, out_axis)


def layer(x, W, b):
    h = np.tanh(W @ x + b)
    return np.sum(h ** 2)


def two_outputs(x, y):
    return x * y, np.sin(x).sum()


def mlp_loss(W1, b1, W2, b2, x, y):
    h = np.tanh(W1 @ x + b1)
    z = W2 @ h + b2
    z = z - np.max(z)
    logp = z - np.log(np.sum(np.exp(z)))
    return -np.sum(y * logp)


def logistic(w, x, y):
    z = x @ w
    return np.log1p(np.exp(-y * z))


X = RNG.normal(size=(5, 3))
W = RNG.normal(size=(4, 3))
B = RNG.normal(size=4)


# ---------------------------------------------------------------------- in_axes / out_axes
def test_default_axes_map_every_argument():
    Y = RNG.normal(size=(5, 3))
    o1, o2 = sg.vmap(two_outputs)(X, Y)
    r1, r2 = loop_over(two_outputs, (X, Y), (0, 0))
    close(o1, r1), close(o2, r2)


def test_in_axes_tuple_with_none():
    out = sg.vmap(layer, in_axes=(0, None, None))(X, W, B)
    assert out.shape == (5,)
    close(out, loop_over(layer, (X, W, B), (0, None, None)))


@pytest.mark.parametrize("axis", [1, -1])
def test_mapped_axis_not_first_is_moved(axis):
    A = RNG.normal(size=(3, 5))
    vm = sg.vmap(layer, in_axes=(axis, None, None))
    close(vm(A, W, B), loop_over(layer, (A, W, B), (1, None, None)))
    assert "x = xp.moveaxis(x, 1, 0)" in sg.source(vm)  # in the generated function


def test_mapped_middle_axis_of_a_matrix_argument():
    Ws = RNG.normal(size=(4, 6, 3))  # six matrices, mapped along axis 1
    out = sg.vmap(layer, in_axes=(None, 1, None))(X[0], Ws, B)
    close(out, loop_over(layer, (X[0], Ws, B), (None, 1, None)))


def test_out_axes_int_and_tuple():
    y = RNG.normal(size=3)
    A = RNG.normal(size=(3, 5))
    o1, o2 = sg.vmap(two_outputs, in_axes=(1, None), out_axes=(1, 0))(A, y)
    r1, r2 = loop_over(two_outputs, (A, y), (1, None))
    close(o1, r1.T), close(o2, r2)
    o1, o2 = sg.vmap(two_outputs, in_axes=(1, None), out_axes=-1)(A, y)
    close(o1, r1.T), close(o2, r2)


def unmapped_output(x, c):
    return x * 2.0, c + 1.0


def test_output_no_mapped_value_reaches_is_broadcast_or_kept_with_out_axes_none():
    c = RNG.normal(size=2)
    o1, o2 = sg.vmap(unmapped_output, in_axes=(0, None))(X, c)
    assert o2.shape == (5, 2)
    close(o2, np.stack([c + 1.0] * 5))
    o1, o2 = sg.vmap(unmapped_output, in_axes=(0, None), out_axes=(0, None))(X, c)
    close(o2, c + 1.0), close(o1, X * 2.0)


def test_disagreeing_sizes_name_the_arguments():
    with pytest.raises(ValueError, match=r"`x` \(argument 0\) has size 5 on axis 0, `y` "
                                         r"\(argument 1\) has size 4 on axis 0"):
        sg.vmap(two_outputs)(X, np.ones((4, 3)))


def test_argument_errors():
    with pytest.raises(ValueError, match="maps no argument"):
        sg.vmap(layer, in_axes=None)(X, W, B)
    with pytest.raises(ValueError, match="in_axes has 2 entries but 3 arguments"):
        sg.vmap(layer, in_axes=(0, None))(X, W, B)
    with pytest.raises(ValueError, match="in_axes=2 for argument `x` of rank 2"):
        sg.vmap(layer, in_axes=(2, None, None))(X, W, B)
    with pytest.raises(TypeError, match="in_axes must be an int, None, or a tuple"):
        sg.vmap(layer, in_axes="0")
    with pytest.raises(ValueError, match="out_axes\\[0\\] is None but output 0"):
        sg.vmap(unmapped_output, in_axes=(0, None), out_axes=None)(X, np.ones(2))


def test_source_is_one_batched_function_and_cached(monkeypatch):
    vm = sg.vmap(layer, in_axes=(0, None, None))
    vm(X, W, B)
    text = sg.source(vm)
    assert "def layer_vmap(x, W, b):" in text and "for " not in text
    assert "x @ _T" in text  # the batch as one matmul, not one call per example
    import srcgrad.pipeline.vmap as program

    def fail(*a, **k):
        raise AssertionError("compiled again")
    monkeypatch.setattr(program, "vmap_program", fail)
    again = sg.vmap(layer, in_axes=(0, None, None))  # a new transform, the same module
    close(again(X, W, B), vm(X, W, B))
    assert sg.source(again) == text


# ---------------------------------------------------------------------- compositions
def test_per_example_gradients_of_an_mlp():
    W1, b1 = RNG.normal(size=(6, 4)), RNG.normal(size=6)
    W2, b2 = RNG.normal(size=(3, 6)), RNG.normal(size=3)
    Xs, Ys = RNG.normal(size=(7, 4)), np.eye(3)[RNG.integers(0, 3, 7)]
    g = sg.grad(mlp_loss, wrt=(0, 1, 2, 3))
    batched = sg.vmap(g, in_axes=(None, None, None, None, 0, 0))(W1, b1, W2, b2, Xs, Ys)
    reference = loop_over(g, (W1, b1, W2, b2, Xs, Ys), (None,) * 4 + (0, 0))
    for got, want in zip(batched, reference):
        close(got, want)


def test_per_example_value_and_grad_of_logistic_regression():
    w, Xs, ys = RNG.normal(size=4), RNG.normal(size=(9, 4)), np.sign(RNG.normal(size=9))
    vg = sg.value_and_grad(logistic)
    value, grad = sg.vmap(vg, in_axes=(None, 0, 0))(w, Xs, ys)
    rv, rg = loop_over(vg, (w, Xs, ys), (None, 0, 0))
    close(value, rv), close(grad, rg)


def test_gradient_of_mapped_argument():
    g = sg.grad(layer)
    close(sg.vmap(g, in_axes=(0, None, None))(X, W, B), loop_over(g, (X, W, B), (0, None, None)))


@pytest.mark.parametrize("mode", ["forward", "reverse", "auto"])
def test_jacobian_of_vmap(mode):
    J = sg.jacobian(sg.vmap(layer, in_axes=(0, None, None)), wrt=(0, 1), mode=mode)
    Jx, JW = J(X, W, B)
    ref = [sg.jacobian(layer, wrt=(0, 1))(x, W, B) for x in X]
    assert Jx.shape == (5, 5, 3) and J.fallback_reason is None
    for i in range(5):
        close(Jx[i, i], ref[i][0])
        close(np.delete(Jx[i], i, axis=0), 0.0)
    close(JW, np.stack([r[1] for r in ref]))


def test_per_example_hessians_as_jacobian_of_vmap_of_grad():
    def loss(W, x):
        return np.sum(np.tanh(W @ x) ** 2)
    H = sg.jacobian(sg.vmap(sg.grad(loss), in_axes=(None, 0)))(W, X)
    close(H, np.stack([sg.hessian(loss)(W, x) for x in X]))


def vector_valued(x, W):
    return np.tanh(W @ x), np.sin(x)


def test_vmap_of_hessian():
    h = sg.hessian(layer)
    close(sg.vmap(h, in_axes=(0, None, None))(X, W, B), loop_over(h, (X, W, B), (0, None, None)))
    h2 = sg.hessian(layer, wrt=(0, 1))
    got = sg.vmap(h2, in_axes=(0, None, None), out_axes=1)(X, W, B)
    ref = [h2(x, W, B) for x in X]
    for i in range(2):
        for j in range(2):
            close(got[i][j], np.stack([r[i][j] for r in ref], 1))


def test_vmap_of_hessian_of_a_mapped_matrix():
    Ws = RNG.normal(size=(6, 4, 3))
    h = sg.hessian(layer, wrt=1)
    close(sg.vmap(h, in_axes=(None, 0, None))(X[0], Ws, B), loop_over(h, (X[0], Ws, B), (None, 0, None)))


@pytest.mark.parametrize("mode", ["forward", "reverse", "auto"])
def test_vmap_of_jacobian(mode):
    J = sg.jacobian(vector_valued, wrt=(0, 1), mode=mode)
    got = sg.vmap(J, in_axes=(0, None))(X, W)
    ref = [J(x, W) for x in X]
    for k in range(2):
        for j in range(2):
            close(got[k][j], np.stack([r[k][j] for r in ref]))
    vm = sg.vmap(J, in_axes=(0, None))
    vm(X, W)
    assert "for " not in sg.source(vm)  # both batch axes in one generated function


MAPPED = sg.vmap(layer, in_axes=(0, None, None))


def calls_a_vmap(W, Xs, b):
    return np.sum(MAPPED(Xs, W, b) * np.arange(1.0, 6.0))


def makes_a_vmap(W, Xs, b):
    return np.sum(sg.vmap(layer, in_axes=(0, None, None))(Xs, W, b) ** 2)


def test_grad_of_a_function_calling_vmap():
    got = sg.grad(calls_a_vmap)(W, X, B)
    close(got, sum((i + 1) * sg.grad(layer, wrt=1)(X[i], W, B) for i in range(5)))
    got = sg.grad(makes_a_vmap, wrt=(0, 2))(W, X, B)
    want = [sum(2 * layer(X[i], W, B) * sg.grad(layer, wrt=k)(X[i], W, B) for i in range(5))
            for k in (1, 2)]
    close(got[0], want[0]), close(got[1], want[1])


def test_vmap_in_the_shape_generic_trace_is_a_compile_error_at_the_call():
    with pytest.raises(sg.CompileError, match="sg.vmap called inside compiled code") as err:
        sg.source(sg.grad(calls_a_vmap))  # no arguments: no shapes to batch for
    assert err.value.lineno == calls_a_vmap.__code__.co_firstlineno + 1


# ---------------------------------------------------------------------- loops, branches, writes
def for_loop(x, W):
    s = x
    acc = 0.0
    for i in range(3):
        s = np.sin(s) * x + W[i]
        acc = acc + s.sum()
    return acc, s


def while_counted(x, n):
    s = x
    k = 0
    while k < n:
        s = s * 2.0 + 1.0
        k += 1
    return s


def branches(x, c):
    if c > 0:
        y = x * 2.0
    else:
        y = np.sin(x)
    if x.sum() > 0:  # a mapped test: both branches, selected per example
        z = y + 1.0
    else:
        z = y * 3.0
    return z


def while_on_data(x):
    s = np.abs(x).sum() + 0.1  # a different trip count per example
    k = 0
    while s < 10.0:
        s = s * 2.0 + 1.0
        k = k + 1
    return s, k


def newton_sqrt(a):
    x = a
    while np.max(np.abs(x * x - a)) > 1e-9:
        x = 0.5 * (x + a / x)
    return x


def while_loss(w, x):
    s = np.sum(w * x)
    while s < 10.0:
        s = s * 2.0
    return s


def rnn_loss(W, x):
    s = x
    for _ in range(3):
        s = np.tanh(W @ s)
    return s.sum()


def writes(x):
    y = x.copy()
    y[0] = 2.0 * y[1]
    y += 1.0
    y[1:] *= x[:-1]
    return y


def write_at(x, i):
    y = x.copy()
    y[i] = 0.0
    return y


@pytest.mark.parametrize("fn, args, axes", [
    (for_loop, (X, RNG.normal(size=(3, 3))), (0, None)),
    (while_counted, (X, 3), (0, None)),
    (branches, (X, 1.0), (0, None)),
    (branches, (X, -1.0), (0, None)),
    (writes, (X,), (0,)),
])
def test_loops_branches_and_writes_match_the_loop(fn, args, axes):
    out = sg.vmap(fn, in_axes=axes)(*args)
    ref = loop_over(fn, args, axes)
    if not isinstance(out, tuple):
        out, ref = (out,), (ref,)
    for got, want in zip(out, ref):
        close(got, want)


def test_while_with_a_per_example_trip_count_runs_masked():
    s, k = sg.vmap(while_on_data)(X)
    want = [while_on_data(x) for x in X]
    close(s, [w[0] for w in want])
    assert k.tolist() == [w[1] for w in want] and len(set(k.tolist())) > 1
    A = np.abs(RNG.normal(size=(6, 2))) * 10 + 1
    close(sg.vmap(newton_sqrt)(A), loop_over(newton_sqrt, (A,), (0,)))
    vm = sg.vmap(while_on_data)
    vm(X)
    assert "xp.where(" in sg.source(vm)  # finished examples keep their values


def test_gradient_of_a_per_example_while_is_refused_at_its_line():
    with pytest.raises(sg.CompileError, match="trip count per example") as err:
        sg.vmap(sg.grad(while_loss), in_axes=(None, 0))(np.ones(3), np.abs(X) + 0.1)
    assert err.value.lineno == while_loss.__code__.co_firstlineno + 2


def test_write_at_an_index_known_at_run_time_is_refused_at_its_line():
    with pytest.raises(sg.CompileError, match="setitem") as err:
        sg.vmap(write_at, in_axes=(0, None))(X, 1)
    assert err.value.lineno == write_at.__code__.co_firstlineno + 2


def test_per_example_gradient_of_a_loop():
    g = sg.grad(rnn_loss)
    Wr = RNG.normal(size=(3, 3))
    close(sg.vmap(g, in_axes=(None, 0))(Wr, X), loop_over(g, (Wr, X), (None, 0)))


@pytest.mark.parametrize("kind", ["jacfwd", "jacrev", "hessian"])
def test_vmap_of_a_jacobian_or_hessian_of_a_loop(kind):
    """Was a CompileError at `<unknown>:0` ("`for_range` has no batched form"): the
    seeds' batching of the derivative program skipped control flow (batch, not batch_ops)."""
    t = sg.hessian(rnn_loss, wrt=1) if kind == "hessian" else \
        sg.jacobian(rnn_loss, wrt=1, mode="forward" if kind == "jacfwd" else "reverse")
    Wr = RNG.normal(size=(3, 3))
    close(sg.vmap(t, in_axes=(None, 0))(Wr, X), loop_over(t, (Wr, X), (None, 0)))


def test_hessian_of_a_per_example_while_is_refused_at_its_line():
    with pytest.raises(sg.CompileError, match="trip count per example") as err:
        sg.vmap(sg.hessian(while_loss, wrt=1), in_axes=(None, 0))(np.ones(3), np.abs(X) + 0.1)
    assert err.value.lineno == while_loss.__code__.co_firstlineno + 2


def test_vmap_of_vmap():
    Xs = RNG.normal(size=(2, 5, 3))
    vv = sg.vmap(sg.vmap(layer, in_axes=(0, None, None)), in_axes=(1, None, None))
    want = np.array([[layer(Xs[i, j], W, B) for i in range(2)] for j in range(5)])
    close(vv(Xs, W, B), want)
    assert "for " not in sg.source(vv)


def test_a_fresh_process_loads_the_module_from_disk(tmp_path):
    import subprocess
    import sys
    import textwrap
    script = tmp_path / "use_vmap.py"
    script.write_text(textwrap.dedent("""
        import numpy as np, srcgrad as sg
        def loss(w, x, y):
            return np.log1p(np.exp(-y * (x @ w)))
        g = sg.vmap(sg.grad(loss), in_axes=(None, 0, 0))
        w, X, y = np.ones(3), np.arange(12.0).reshape(4, 3) / 10, np.array([1.0, -1, 1, -1])
        out = g(w, X, y)
        ref = np.stack([sg.grad(loss)(w, x, t) for x, t in zip(X, y)])
        assert np.abs(out - ref).max() < 1e-12, out
        print(len(sg.source(g)))
    """))
    root = str(__import__("pathlib").Path(__file__).resolve().parents[1])  # this checkout's srcgrad
    env = dict(__import__("os").environ, SRCGRAD_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=root)
    runs = [subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                           cwd=str(tmp_path)) for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stderr
    assert runs[0].stdout == runs[1].stdout
    assert list((tmp_path / "cache").rglob("*.py"))  # the second run read these


def test_other_array_libraries_are_refused_not_run_on_numpy():
    xp = pytest.importorskip("array_api_strict")
    with pytest.raises(TypeError, match="arrays are not supported yet"):
        sg.vmap(layer, in_axes=(0, None, None))(xp.asarray(X), xp.asarray(W), xp.asarray(B))


def test_vjp_and_jvp_of_vmap():
    vm = sg.vmap(layer, in_axes=(0, None, None))
    out, vjp_fn = sg.vjp(vm, X, W, B)
    close(out, vm(X, W, B))
    gx, gW, gb = vjp_fn(np.arange(1.0, 6.0))
    close(gW, sum((i + 1) * sg.grad(layer, wrt=1)(X[i], W, B) for i in range(5)))
    close(gx, np.stack([(i + 1) * sg.grad(layer)(X[i], W, B) for i in range(5)]))
    T = RNG.normal(size=X.shape)
    out, tangent = sg.jvp(vm, (X, W, B), (T, np.zeros_like(W), np.zeros_like(B)))
    close(tangent, [sg.grad(layer)(X[i], W, B) @ T[i] for i in range(5)])


# ---------------------------------------------------------------------- nan reductions, tests, writes
def _nan_reductions(x):
    y = np.where(x > 0.8, np.nan, x)
    return (np.nanmax(y, axis=0) + np.nansum(y) + np.nanmean(y, axis=-1, keepdims=True)[0]
            + np.nanmin(y) * np.sum(x))


def _boolean_reductions(x):
    return np.where(np.all(x > 0.1, axis=0), x[0], -x[0]) * np.count_nonzero(x > 0.3) \
        + np.any(x > 0.5) * x[1]


def _writes_its_argument(x, y):
    x += y  # the write check (`no_alias`) of argument x, batched
    return np.sum(x * y)


def _nan_loss(x):
    return np.sum(_nan_reductions(x))


def _boolean_loss(x):
    return np.sum(_boolean_reductions(x))


_BATCH_ROWS = [(_nan_reductions, _nan_loss, 1), (_boolean_reductions, _boolean_loss, 1)]


@pytest.mark.parametrize("f, loss, n", _BATCH_ROWS, ids=[f.__name__ for f, _, _ in _BATCH_ROWS])
def test_batched_nan_and_boolean_reductions_and_written_arguments(f, loss, n):
    """nansum/nanmean/nanmax/nanmin, all/any/count_nonzero and the write check of an
    argument had no batched form ("has no batched form yet", about 100 refusals in 6,000
    fuzz programs); values against the examples one by one, gradients against central
    differences per example."""
    from tests.conftest import numeric_grad

    rng = np.random.default_rng(3)
    args = [rng.uniform(size=(4, 3, 5)) for _ in range(n)]
    expected = np.stack([f(*[a[i].copy() for a in args]) for i in range(4)])
    np.testing.assert_allclose(sg.vmap(f)(*[a.copy() for a in args]), expected, rtol=1e-12)
    grads = sg.vmap(sg.grad(loss))(*[a.copy() for a in args])
    for i in range(4):
        example = [a[i].copy() for a in args]
        np.testing.assert_allclose(grads[i], numeric_grad(loss, example, 0), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("axes", [(0, None), (None, 0), (0, 0)])
def test_the_write_check_of_an_argument_is_batched(axes):
    """vmap(grad) of a function writing into its argument x, each argument mapped or not:
    gradients against central differences per example (the gradient program checks the
    write outside the batched part; the next test batches the check itself)."""
    from tests.conftest import numeric_grad

    rng = np.random.default_rng(4)
    x, y = (rng.uniform(size=(3, 2, 4) if a == 0 else (2, 4)) for a in axes)
    grads = sg.vmap(sg.grad(_writes_its_argument), in_axes=axes)(x.copy(), y.copy())
    for i in range(3):
        example = [v[i] if a == 0 else v for v, a in zip((x, y), axes)]
        want = numeric_grad(_writes_its_argument, [example[0].copy(), example[1].copy()], 0)
        np.testing.assert_allclose(grads[i], want, rtol=1e-5, atol=1e-7)


def _grad_of_a_vmap_that_writes(x, y):
    return np.sum(np.tanh(sg.vmap(_writes_its_argument, in_axes=(0, None))(np.stack([x, 0.5 * x]), y)))


def test_the_write_check_of_an_argument_is_batched_inside_a_gradient():
    """sg.grad of a function that calls sg.vmap of one writing into its argument (the
    fuzzer's grad(vmap)): `no_alias` had no batched form (70 refusals in 6,000 programs)."""
    from tests.conftest import numeric_grad

    rng = np.random.default_rng(5)
    x, y = rng.uniform(size=(2, 4)), rng.uniform(size=(2, 4))
    got = sg.grad(_grad_of_a_vmap_that_writes)(x.copy(), y.copy())
    np.testing.assert_allclose(got, numeric_grad(_grad_of_a_vmap_that_writes, [x, y], 0),
                               rtol=1e-5, atol=1e-7)


def _tiled(x):
    return np.sum(np.tile(x.ravel(), 3)[:7] ** 2) + np.sum(np.tile(x, (2, 1, 2)) * 1.5) \
        + np.sum(np.tile(x[0], 2) ** 3)


@pytest.mark.parametrize("axes", [0, 1])
def test_vmap_of_the_gradient_of_tiles(axes):
    """tile's transpose (tile_bar: the tiles summed back) had no batched form ("tile_bar
    has no batched form yet", 14 refusals in 6,000 fuzz programs); per-example central
    differences, x's rank below and equal to the tiled rank."""
    from tests.conftest import numeric_grad

    x = np.random.default_rng(6).normal(size=(3, 2, 4))
    grads = sg.vmap(sg.grad(_tiled), in_axes=axes)(x)
    for i in range(x.shape[axes]):
        example = np.take(x, i, axis=axes)
        np.testing.assert_allclose(grads[i], numeric_grad(_tiled, [example], 0), rtol=1e-5, atol=1e-7)


def _nested_ifs(x, c):
    y = x * 1.0
    if np.sum(x) > 0.0:
        if x[0] > 0.3:  # mapped inside mapped
            y = np.sin(x) * 2.0
        else:
            y = x * x
        if c[0] > 0.0:  # not mapped, inside a mapped branch
            y = y + c
    else:
        y = -x
    return np.sum(y * y)


@pytest.mark.parametrize("c", [[0.5, 0.1, 0.2], [-0.5, 0.1, 0.2]])
def test_ifs_inside_a_branch_of_a_mapped_if(c):
    """An `if` inside a branch of an `if` on mapped data was refused ("an `if` on a mapped
    test whose branch holds `cond`", 32 refusals in 6,000 fuzz programs). Values against
    the examples one by one, the gradient of the batched code against central
    differences. (vmap of the gradient still refuses: the gradient's shape reads inside
    the branches are not known to the batching pass.)"""
    from tests.conftest import numeric_grad

    c = np.array(c)
    x = np.array([[0.5, 0.2, -0.1], [0.1, 0.4, 0.3], [-0.6, -0.2, 0.1], [0.2, -0.9, 0.4]])
    values = sg.vmap(_nested_ifs, in_axes=(0, None))(x, c)
    np.testing.assert_allclose(values, [_nested_ifs(r, c) for r in x], rtol=1e-12)
    grads = sg.grad(_sum_of_nested_ifs)(x, c)  # the batched code, differentiated
    np.testing.assert_allclose(grads, numeric_grad(_sum_of_nested_ifs, [x, c], 0), rtol=1e-5, atol=1e-7)


def _sum_of_nested_ifs(x, c):
    return np.sum(sg.vmap(_nested_ifs, in_axes=(0, None))(x, c))
