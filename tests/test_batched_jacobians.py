"""Batched Jacobians and Hessians (Note [Batching] in srcgrad.passes.batch).

Every row of the derivative table that has a batched form is run through
`sg.jacobian` (forward and reverse: one generated pass over all identity seeds) and
`sg.hessian` (batched forward over reverse), on the cases of tests/rules/cases.py,
and compared with central differences in float64. A case the pass refuses runs the
per-seed code instead; those are listed (with why) in REFUSED, so a new refusal, or
a refusal that went away, fails here rather than passing silently.
"""

from __future__ import annotations

import importlib.util
import itertools

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.passes import batch
from tests.rules.test_compiled_rules import _SYMMETRIC_INPUT, _substitute, _sym, compiled_cases

_counter = itertools.count()
BATCHED = batch.batched_rules()
CASES = [c for c in compiled_cases("jvp") if c[0].name in BATCHED]
FIRST = [c for i, c in enumerate(CASES) if i == 0 or CASES[i - 1][0] is not c[0]]

# (row, case, pass) -> why the batched pass refuses it (it then runs one pass per seed).
REFUSED = {
    ("cumsum", "none", "forward"): "over the flattened array",
    ("getitem", "mask", "forward"): "depends on the data",  # a boolean mask: nonzero count
    ("setitem", "mask", "forward"): "at an index computed at run time",
    ("setitem", "repeated", "forward"): "at an index computed at run time",
    ("einsum", "batched-ellipsis", "forward"): "with an ellipsis",
    ("einsum", "ellipsis-broadcast", "forward"): "with an ellipsis",
    ("einsum_bar", "diag", "forward"): "with an ellipsis or one operand",
    ("einsum_bar", "summed", "forward"): "a repeated or self-summed index",
    ("matmul_bar", "x-batch-broadcast", "forward"): "of stacks of matrices",
    ("tensordot_bar", "dot-scalar", "forward"): "of a scalar operand",
    ("take", "flat", "reverse"): "`take_bar` into the flattened array",
    ("take_bar", "flat", "forward"): "`take_bar` into the flattened array",
    ("pad_bar", "reflect", "forward"): "copies elements into the border",
    ("pad_bar", "wrap", "forward"): "copies elements into the border",
    ("repeat", "int", "reverse"): "`repeat_bar` has no batched form",
    ("solve", "batch-vector", "forward"): "a stack of matrices with one vector",
    # pinv's and svd's formulas read shapes the probe does not keep as facts (the rank's
    # cut): one pass per seed
    **{("pinv", case, "forward"): "`matmul`'s result depends on the data"
       for case in ("tall", "wide", "square", "batch", "rcond")},
    ("pinv", "tall", "reverse"): "`matmul`'s result depends on the data",
    ("pinv", "tall", "hessian"): "`matmul`'s result depends on the data",
    ("svd", "square", "reverse"): "`multiply`'s result depends on the data",
    ("svd", "square", "hessian"): "`broadcast_to`'s result depends on the data",
}
def _module(tmp_path, rule, args):
    """A module with `p(<operands>)`, the row's primal, and `f(<operands>, w...)`, a
    scalar (weighted sum of the outputs); (module, wrt, values, weights)."""
    params, values, wrt, pieces = [], [], [], {}
    for name in rule.params:
        value = args[name]
        if isinstance(value, np.generic):
            value = np.asarray(value)
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, np.ndarray) for v in value):
            names = [f"{name}{i}" for i in range(len(value))]
            for n, v in zip(names, value):
                if name in rule.jvp and v.dtype.kind == "f":
                    wrt.append(len(params))
                params.append(n)
                values.append(v)
            joined = ", ".join(names)
            pieces[name] = f"[{joined}]" if isinstance(value, list) else f"({joined},)"
        elif isinstance(value, np.ndarray):
            if name in rule.jvp and value.dtype.kind == "f":
                wrt.append(len(params))
            params.append(name)
            values.append(value)
            pieces[name] = name
        else:
            pieces[name] = repr(value)
    expr = _substitute(rule.render, pieces)
    module = _load(tmp_path, "\n".join([
        "import math", "import numpy as xp", "from srcgrad.rules.helpers import *  # noqa: F403", "",
        f"def p({', '.join(params)}):", f"    return {expr}", ""]))
    outs = module.p(*values)
    outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
    rng = np.random.default_rng(11)
    weights = [rng.standard_normal(np.shape(o)) for o in outs]
    w_names = [f"w{i}" for i in range(len(outs))]
    picks = [f"_out[{i}]" for i in range(len(outs))] if len(w_names) > 1 or isinstance(
        module.p(*values), (tuple, list)) else ["_out"]
    total = " + ".join(f"xp.sum({w} * {o})" for w, o in zip(w_names, picks))
    source = "\n".join(["import math", "import numpy as xp",
                        "from srcgrad.rules.helpers import *  # noqa: F403", "",
                        f"def p({', '.join(params)}):", f"    return {expr}", "",
                        f"def f({', '.join(params + w_names)}):", f"    _out = {expr}",
                        f"    return {total}", ""])
    return _load(tmp_path, source), wrt, values, weights


def _load(tmp_path, source):
    path = tmp_path / f"batched_case_{next(_counter)}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def numeric_jacobian(fn, args, index, eps=1e-6):
    """Central differences of every output leaf of fn w.r.t. args[index]:
    a list of arrays of shape out.shape + arg.shape."""
    x = np.array(args[index], dtype=np.float64)
    columns = []
    for i in range(x.size):
        xp_, xm = x.copy().reshape(-1), x.copy().reshape(-1)
        xp_[i] += eps
        xm[i] -= eps
        ap, am = list(args), list(args)
        ap[index], am[index] = xp_.reshape(x.shape), xm.reshape(x.shape)
        hi, lo = fn(*ap), fn(*am)
        hi = list(hi) if isinstance(hi, (tuple, list)) else [hi]
        lo = list(lo) if isinstance(lo, (tuple, list)) else [lo]
        columns.append([(np.asarray(h, float) - np.asarray(m, float)) / (2 * eps) for h, m in zip(hi, lo)])
    outs = fn(*args)
    outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
    return [np.stack([c[k] for c in columns], axis=-1).reshape(np.shape(o) + x.shape) if x.size
            else np.zeros(np.shape(o) + x.shape) for k, o in enumerate(outs)]


def _leaves(result, multi):
    """The Jacobian as [output][argument] arrays (it nests like jax's: a tuple over
    the outputs when f returns one, each a tuple over the arguments of `wrt`)."""
    return [list(r) for r in (list(result) if multi else [result])]


def _expect_path(rule, case_id, jac, kind):
    refused = REFUSED.get((rule.name, case_id, kind))
    if refused is None:
        assert jac.fallback_reason is None, f"{rule.name}-{case_id}: {jac.fallback_reason}"
    else:
        assert jac.fallback_reason is not None and refused in jac.fallback_reason, jac.fallback_reason


# forward mode on every case, reverse mode on each row's first (time: ~500 compiles)
JACOBIAN_CASES = [c + ("forward",) for c in CASES] + [c + ("reverse",) for c in FIRST]


@pytest.mark.parametrize("rule,case_id,args,mode", JACOBIAN_CASES,
                         ids=[f"{r.name}-{c}-{m}" for r, c, _, m in JACOBIAN_CASES])
def test_batched_jacobian_of_every_row(tmp_path, rule, case_id, args, mode):
    module, wrt, values, _ = _module(tmp_path, rule, args)
    jac = sg.jacobian(module.p, wrt=tuple(wrt), mode=mode)
    got = jac(*values)
    _expect_path(rule, case_id, jac, mode)
    expected = [numeric_jacobian(module.p, values, i) for i in wrt]
    got = _leaves(got, isinstance(module.p(*values), (tuple, list)))
    for j, i in enumerate(wrt):
        for k, e in enumerate(expected[j]):
            g = got[k][j]
            if rule.name in _SYMMETRIC_INPUT:
                continue  # defined on symmetric matrices only: the Hessian test covers them
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6, err_msg=f"output {k}, argument {i}")


@pytest.mark.parametrize("rule,case_id,args", FIRST, ids=[f"{r.name}-{c}" for r, c, _ in FIRST])
def test_batched_hessian_of_every_row(tmp_path, rule, case_id, args):
    """Forward over reverse through the row's VJP formulas: against central differences
    of the gradient (sg.grad's, itself checked against differences of f in
    tests/rules/test_compiled_rules.py)."""
    module, wrt, values, weights = _module(tmp_path, rule, args)
    hess = sg.hessian(module.f, wrt=tuple(wrt))
    got = hess(*values, *weights)
    _expect_path(rule, case_id, hess, "hessian")
    grad = sg.grad(module.f, wrt=tuple(wrt))
    full = list(values) + list(weights)
    for a, i in enumerate(wrt):
        for b, j in enumerate(wrt):
            expected = numeric_jacobian(lambda *xs, a=a: grad(*xs)[a], full, j)[0]
            block = np.asarray(got[a][b])
            if rule.name in _SYMMETRIC_INPUT:
                block, expected = _sym(block.reshape(expected.shape)), _sym(expected)
                continue
            np.testing.assert_allclose(block, expected, rtol=1e-5, atol=1e-6,
                                       err_msg=f"block ({i}, {j})")


def test_every_batched_row_has_a_case():
    assert {c[0].name for c in CASES} == {n for n in BATCHED if any(
        c[0].name == n for c in compiled_cases("jvp"))}
    assert len({c[0].name for c in CASES}) >= 90


# ---------------------------------------------------------------------- Hessians, by hand
def mlp_loss(W1, b1, W2, X, y):
    h = np.tanh(X @ W1 + b1)
    return np.mean((h @ W2 - y) ** 2)


def picks(x, W):
    z = x[1:] * x[:-1] + np.sum(W @ x[::2][:2])
    return np.sum(np.exp(z) / np.sum(z ** 2)) + np.max(np.cumsum(x))


def rows(A, v):
    r = A[[0, 2], :] @ v
    return np.sum(np.sin(np.concatenate([r, A[:2].T @ r])) ** 2) + np.mean(A[:, 1:] ** 3, axis=0).sum()


def second_differences(f, args, i, j, eps=1e-4):
    """d2 f / d args[i] d args[j] by central differences of f itself (float64)."""
    xi, xj = np.asarray(args[i], float), np.asarray(args[j], float)
    out = np.zeros(xi.shape + xj.shape)
    flat = out.reshape(xi.size, xj.size)

    def at(di, dj):
        a = list(args)
        a[i] = np.asarray(a[i], float) + di.reshape(xi.shape)
        a[j] = (a[j] if i != j else a[i]) + dj.reshape(xj.shape)
        return float(f(*a))

    for p in range(xi.size):
        for q in range(xj.size):
            ep, eq = np.zeros(xi.size), np.zeros(xj.size)
            ep[p], eq[q] = eps, eps
            flat[p, q] = (at(ep, eq) - at(ep, -eq) - at(-ep, eq) + at(-ep, -eq)) / (4 * eps * eps)
    return out


def _mlp_args():
    rng = np.random.default_rng(1)
    return (rng.standard_normal((4, 5)) * 0.5, rng.standard_normal(5) * 0.1,
            rng.standard_normal((5, 3)), rng.standard_normal((6, 4)), rng.standard_normal((6, 3)))


@pytest.mark.parametrize("f,args,wrt", [
    (mlp_loss, _mlp_args(), (0, 1, 2)),
    (picks, (np.random.default_rng(2).standard_normal(6), np.random.default_rng(3).standard_normal((2, 2))),
     (0, 1)),
    (rows, (np.random.default_rng(4).standard_normal((3, 4)), np.random.default_rng(5).standard_normal(4)),
     (0, 1)),
], ids=["mlp", "indexing-reductions", "rows-concatenate"])
def test_hessian_matches_second_differences(f, args, wrt):
    H = sg.hessian(f, wrt=wrt)
    got = H(*args)
    assert H.fallback_reason is None, H.fallback_reason
    for a, i in enumerate(wrt):
        for b, j in enumerate(wrt):
            np.testing.assert_allclose(got[a][b], second_differences(f, args, i, j),
                                       rtol=1e-5, atol=1e-6, err_msg=f"block ({i}, {j})")


def test_hessian_single_argument_layout():
    args = _mlp_args()
    got = sg.hessian(mlp_loss, wrt=1)(*args)
    assert got.shape == (5, 5) and got.flags.c_contiguous
    np.testing.assert_allclose(got, second_differences(mlp_loss, args, 1, 1), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------- chunks, modes, layouts
def layer(x, W, b):
    return np.tanh(x @ W + b), np.sum(x ** 2) * W


@pytest.mark.parametrize("mode", ["forward", "reverse", "auto"])
def test_chunk_size_gives_identical_results(mode):
    rng = np.random.default_rng(6)
    x, W, b = rng.standard_normal(5), rng.standard_normal((5, 3)), rng.standard_normal(3)
    whole = sg.jacobian(layer, wrt=(0, 1), mode=mode)(x, W, b)
    for chunk in (1, 4, 7, 1000):
        jac = sg.jacobian(layer, wrt=(0, 1), mode=mode, chunk_size=chunk)
        got = jac(x, W, b)
        assert jac.fallback_reason is None
        for g_out, w_out in zip(got, whole):
            for g, w in zip(g_out, w_out):
                # the contraction order of a fused chain may depend on how many chunks
                # there are (Note [Seed-linear fusion]): equal up to rounding
                np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-15)
    for k, fn in enumerate([lambda x: layer(x, W, b)[0], lambda x: layer(x, W, b)[1]]):
        np.testing.assert_allclose(whole[k][0], numeric_jacobian(fn, [x], 0)[0], rtol=1e-6, atol=1e-8)


def test_hessian_chunks_identical():
    args = _mlp_args()
    whole = sg.hessian(mlp_loss, wrt=(0, 2))(*args)
    for chunk in (1, 3, 16):
        got = sg.hessian(mlp_loss, wrt=(0, 2), chunk_size=chunk)(*args)
        for a in range(2):
            for b in range(2):
                np.testing.assert_allclose(got[a][b], whole[a][b], rtol=1e-13, atol=1e-15)


def test_chunk_size_must_be_positive():
    with pytest.raises(ValueError, match="chunk_size"):
        sg.jacobian(layer, chunk_size=0)


def test_identity_and_constant_outputs():
    """A tangent that is the seed itself, and an output no seed reaches."""
    def f(x, y):
        return x, y * 2.0, np.ones(2)

    x, y = np.arange(3.0), np.arange(2.0)
    for mode in ("forward", "reverse"):
        jac = sg.jacobian(f, wrt=0, mode=mode)
        jx, jy, jc = jac(x, y)
        assert jac.fallback_reason is None, jac.fallback_reason
        np.testing.assert_array_equal(jx, np.eye(3))
        np.testing.assert_array_equal(jy, np.zeros((2, 3)))
        np.testing.assert_array_equal(jc, np.zeros((2, 3)))
        jx[0, 0] = 7.0  # a result of its own: the next call is unchanged
        np.testing.assert_array_equal(jac(x, y)[0], np.eye(3))


def test_python_float_argument():
    def f(a, x):
        return np.sin(a * x)

    x = np.linspace(0.0, 1.0, 4)
    for mode in ("forward", "reverse"):
        got = sg.jacobian(f, wrt=0, mode=mode)(0.5, x)
        np.testing.assert_allclose(got, x * np.cos(0.5 * x), rtol=1e-12)


def test_control_flow_falls_back_to_one_pass_per_seed():
    def f(x):
        for _ in range(2):
            x = np.sin(x)
        return x

    x = np.linspace(0.1, 0.9, 3)
    jac = sg.jacobian(f, mode="forward")
    got = jac(x)
    assert jac.fallback_reason is not None and "Unbatchable" in jac.fallback_reason
    np.testing.assert_allclose(got, numeric_jacobian(f, [x], 0)[0], rtol=1e-6, atol=1e-8)


def test_a_constant_stacked_with_batched_values_falls_back():
    # fuzz seed 3713: np.array([np.sum(x), 0.1, 0.5]) broadcasts the constants along the
    # batch, which folded to an array constant (a crash); now one pass per seed
    def f(x):
        return np.max(np.array([np.sum(x), 0.1, 0.5]))

    for x in (np.full((2, 3), 0.01), np.full((2, 3), 1.0)):
        jac = sg.jacobian(f, mode="forward")
        np.testing.assert_allclose(jac(x), numeric_jacobian(f, [x], 0)[0], rtol=1e-6, atol=1e-8)


def test_results_survive_the_next_call():
    """Workspace buffers are reused across calls (srcgrad.passes.workspace): what a call
    returned must not change when the next call, at other arguments, runs."""
    args = _mlp_args()
    H = sg.hessian(mlp_loss, wrt=(0, 1), chunk_size=7)
    first = H(*args)
    kept = [[np.copy(b) for b in row] for row in first]
    other = H(*[a * 1.5 for a in args])
    for row, saved, new in zip(first, kept, other):
        for b, s, n in zip(row, saved, new):
            np.testing.assert_array_equal(b, s)
            assert not np.shares_memory(b, n)
    np.testing.assert_allclose(first[1][1], second_differences(mlp_loss, args, 1, 1), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------- fusion and the hoisted primal
def _chunk_source(jac, kind):
    """The per-chunk function of the batched program that ran last (Note [Hoisting the primal])."""
    source = sg.source(jac)
    start = source.index(f"_{kind}(")
    return source[start:source.index("\ndef ", start)]


def test_mlp_hessian_chunks_are_gemms_and_the_primal_runs_once():
    """Note [Seed-linear fusion]: the 2nd-order terms of the MLP Hessian are contractions
    of the seed with primal factors, so a chunk is GEMMs, and the primal (tanh) runs in
    `_primal`, once per call; the result still matches second differences."""
    args = _mlp_args()
    H = sg.hessian(mlp_loss, wrt=1, chunk_size=2)  # 3 chunks, the last padded
    got = H(*args)
    assert H.fallback_reason is None, H.fallback_reason
    chunk = _chunk_source(H, "hessian")
    assert "tensordot" in chunk and "tanh" not in chunk and "xp.multiply(" not in chunk, chunk
    assert "def mlp_loss_hessian_primal(" in sg.source(H)
    np.testing.assert_allclose(got, second_differences(mlp_loss, args, 1, 1), rtol=1e-5, atol=1e-6)


def fused_forms(x, A, c):
    """Every lazy form of batch_fuse: a matmul from the left, a unit-axis index, a product
    with a broadcast primal, a division by a constant, a difference of two tangents, a
    transpose, sums with and without keepdims, a negation, a reshape to unit axes."""
    y = A @ np.tanh(x)
    z = (y * c[:, None] - y / 3.0).T
    s = np.sum(z, axis=0, keepdims=True) - 0.5 * (A @ np.sum(x * c[:4, None], axis=1))[None, :]
    return -np.reshape(s, (5, 1)) + np.sum(np.exp(x) @ x.T, axis=1)[:1, None]


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_fused_forms_match_central_differences(mode):
    rng = np.random.default_rng(11)
    args = (rng.standard_normal((4, 3)), rng.standard_normal((5, 4)), rng.standard_normal(5))
    for wrt in (0, 1, 2):
        jac = sg.jacobian(fused_forms, wrt=wrt, mode=mode, chunk_size=5)
        got = jac(*args)
        assert jac.fallback_reason is None, jac.fallback_reason
        np.testing.assert_allclose(got, numeric_jacobian(fused_forms, args, wrt)[0],
                                   rtol=1e-6, atol=1e-8, err_msg=f"wrt {wrt}")


def scaled_tanh(x, W):
    return np.tanh(x @ W) * 2.0 - x @ W / 4.0


def test_fusion_keeps_float32():
    """einsum makes a Python float a float64 array: a fused chain multiplies by
    constants outside the einsum, so float32 tangents stay float32 as NumPy's own
    arithmetic keeps them."""
    rng = np.random.default_rng(12)
    x, W = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((4, 5)).astype(np.float32)
    jac = sg.jacobian(scaled_tanh, wrt=0, mode="forward")
    got = jac(x, W)
    assert jac.fallback_reason is None and got.dtype == np.float32
    expected = numeric_jacobian(scaled_tanh, (x.astype(float), W.astype(float)), 0)[0]
    np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-4)


def shared_tangent(x, W):
    h = np.tanh(x @ W)
    return np.sum(h * h * h, axis=1) + np.sum((h @ W.T) * x, axis=0)[:3]


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_a_tangent_read_by_many_ops(mode):
    """A lazy value several ops read (h_t in h*h*h's product rule) is copied into each
    reader's terms; the sum of terms stays bounded (MAX_TERMS) and exact."""
    rng = np.random.default_rng(13)
    args = (rng.standard_normal((3, 4)), rng.standard_normal((4, 4)) * 0.5)
    for wrt in (0, 1):
        jac = sg.jacobian(shared_tangent, wrt=wrt, mode=mode)
        got = jac(*args)
        assert jac.fallback_reason is None, jac.fallback_reason
        np.testing.assert_allclose(got, numeric_jacobian(shared_tangent, args, wrt)[0],
                                   rtol=1e-6, atol=1e-8)
    H = sg.hessian(lambda_free_loss, wrt=(0, 1))
    got = H(*args)
    for a in range(2):
        for b in range(2):
            np.testing.assert_allclose(got[a][b], second_differences(lambda_free_loss, args, a, b),
                                       rtol=1e-5, atol=1e-6)


def lambda_free_loss(x, W):
    return np.sum(shared_tangent(x, W) ** 2)


def test_without_chunk_size_a_fused_program_takes_all_its_seeds_at_once():
    """default_chunk guesses from the largest argument (here 51 of 400 seeds a pass); the
    fused Hessian holds no value larger than a seed times the output, so the program is
    batched again for all 400 (srcgrad.pipeline.batched.batched_ops), with the same result."""
    rng = np.random.default_rng(14)
    W1, b1 = rng.standard_normal((32, 400)) / 6, rng.standard_normal(400) * 0.1
    W2, X, y = rng.standard_normal((400, 3)) / 20, rng.standard_normal((8, 32)), rng.standard_normal((8, 3))
    args = (W1, b1, W2, X, y)
    auto = sg.hessian(mlp_loss, wrt=1)
    got = auto(*args)
    (plan,) = [p for p in auto._plans.values() if p is not None]
    assert plan.size == 400
    chunked = sg.hessian(mlp_loss, wrt=1, chunk_size=51)(*args)
    h = np.tanh(X @ W1 + b1)  # the closed form: Gauss-Newton part plus the tanh curvature
    s, r = 1 - h * h, (2 / y.size) * (h @ W2 - y)
    expected = (2 / y.size) * (W2 @ W2.T) * (s.T @ s)
    expected[np.diag_indices_from(expected)] += np.sum((r @ W2.T) * (-2 * h * s), axis=0)
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(chunked, expected, rtol=1e-10, atol=1e-12)


def _written_then_viewed(x0):
    # the gradient's tangent `x0_t - scatter(...)` is written into a dead operand's buffer
    # and reshaped and sliced; those views are read after that buffer's own last use
    np.subtract.at(x0, slice(0, 2), x0[0, :, :1])
    x0[[1, 2]] += np.mean(x0) * (x0.ravel()[:8].reshape((2, 4, 1)) * x0.ravel()[:8].reshape((2, 4, 1)))
    return np.mean(x0)


@pytest.mark.parametrize("transform", ["hessian", "jacfwd of grad"])
def test_a_view_of_a_workspace_value_keeps_its_buffer(transform):
    """Note [A view keeps its array alive] (srcgrad.passes.workspace): the buffer of a value
    written into a dead operand went to the next ufunc while views of the value were still
    read; the forward Jacobian of the gradient (sg.hessian's) was off by 0.015 here (fuzz
    seed 2651683)."""
    x = np.random.default_rng(0).normal(size=(3, 4, 3))
    if transform == "hessian":
        got = sg.hessian(_written_then_viewed)(x.copy())
    else:
        got = sg.jacobian(sg.grad(_written_then_viewed), mode="forward")(x.copy())
    np.testing.assert_allclose(got, second_differences(_written_then_viewed, [x], 0, 0),
                               rtol=1e-5, atol=1e-6)
