"""The oracle's opt-in transforms of issue 28 (item 5): two-deep compositions, complex
arguments. Registered in oracle.RUNNERS (oracle.OPT_IN), run by benchmarks/fuzz.py.

`nested`: one composition per program (the seed picks it) of the transform T1 = sg.grad
w.r.t. the first argument, the inner function: jacobian(grad), jacobian(jacobian),
grad(grad), vjp(grad), jvp(grad) (each a Hessian product) against central differences
of T1 itself in float64 (T1 is judged by the first-order transforms; its differences
at two steps must agree, else the point is not judged: a kink); vmap(grad) against a
Python loop of T1; grad of a function that calls sg.vmap(f) against the differences of
that function (whose value is checked against a loop of f).

`complex`: a complex first array argument (x + 0.5j) given to one transform (the seed
picks it): the only right answer is a TypeError/CompileError whose message says
"complex" (a refusal counts as right); a value is wrong, any other exception a crash.
"""

from __future__ import annotations

import copy
import zlib

import numpy as np

import srcgrad as sg
from tests.fuzz import oracle as O

COMPOSITIONS = ("jacobian(grad)", "jacobian(jacobian)", "grad(grad)", "vjp(grad)", "jvp(grad)",
                "vmap(grad)", "grad(vmap)")
STEPS = (1e-4, 1e-5)


def pick(seed: int, options, salt: str):
    return options[zlib.crc32(f"{salt}{seed}".encode()) % len(options)]


def _shape(a) -> tuple:
    return tuple(a[1]) if a[0] == "array" else ()


def _with_first(args, value) -> list:
    """A copy of args with value first, copied too: f may write into its argument (fuzz
    seeds 2621193, 2621850), which must not move the point the oracle judges."""
    out = copy.deepcopy(args)
    out[0] = copy.deepcopy(value)
    return out


def _bumped(args, u, e, spec0):
    x = args[0]
    return _with_first(args, float(x + e * u) if spec0[0] == "float" else np.asarray(x) + e * u)


def _differences(g, args, u, spec0):
    """d/de g(x0 + e u, rest) at two steps; None where they disagree (a kink)."""
    ds = []
    for e in STEPS:
        hi = np.asarray(g(*_bumped(args, u, e, spec0)), dtype=float)
        lo = np.asarray(g(*_bumped(args, u, -e, spec0)), dtype=float)
        ds.append((hi - lo) / (2 * e))
    scale = max(1.0, float(np.max(np.abs(ds[1]), initial=0.0)))
    if not np.all(np.isfinite(ds[1])) or not O._close(ds[0], ds[1], scale * 10):
        return None, scale
    return ds[1], scale


def _weights(shape) -> np.ndarray:
    return np.cos(np.arange(1, int(np.prod(shape)) + 2))[1:].reshape(shape)


def _wrapper(program, directory, kind):
    """The program's module with a function that calls a transform of f inside."""
    n = len(program.args)
    names = ", ".join(f"x{i}" for i in range(n))
    shape0 = _shape(program.args[0])
    if kind == "grad(grad)":
        body = f"    return np.sum(sg.grad(f, wrt=0)({names}) * _V)"
    else:
        axes = "(0" + ", None" * (n - 1) + ",)"
        rest = "".join(f", x{i}" for i in range(1, n))
        body = (f"    return np.sum(np.tanh(sg.vmap(f, in_axes={axes})("
                f"np.stack([x0, 0.5 * x0]){rest})))")
    extra = ("\n\nimport srcgrad as sg  # noqa: E402\n\n"
             f"_V = np.array({_weights(shape0).tolist()!r})\n\n\ndef _nested({names}):\n{body}\n")
    return O.load(program.source + extra, directory, f"{program.seed}n")


def run_nested(state, fn, program, ref):
    kind = pick(program.seed, COMPOSITIONS, "nested")
    mode = pick(program.seed, ("auto", "reverse", "forward"), "mode")
    spec0, shape0 = program.args[0], _shape(program.args[0])
    args, u = copy.deepcopy(ref.args), ref.directions[0][0]
    if "G" not in state:
        state["G"] = sg.grad(fn, wrt=0)
    G = state["G"]
    if kind == "vmap(grad)":
        x = args[0]
        rows = [x, -0.5 * x, x + 0.1]
        batch = np.stack([np.asarray(r, dtype=float) for r in rows])
        axes = (0,) + (None,) * (len(args) - 1)
        got = np.asarray(sg.vmap(G, in_axes=axes)(batch, *args[1:]), dtype=float)
        want = np.stack([np.asarray(G(*_with_first(args, r)), dtype=float) for r in rows])
        if got.shape != want.shape:
            raise O.Wrong(f"structure: vmap(grad) shape {got.shape}, expected {want.shape}")
        if not O._close(got, want, max(1.0, float(np.max(np.abs(want), initial=0.0)))):
            raise O.Wrong(f"vmap(grad): expected the loop's {O._short(want)}, got {O._short(got)}")
        return
    if kind in ("grad(grad)", "grad(vmap)"):
        _run_wrapped(state, fn, program, args, u, kind)
        return
    d, scale = _differences(G, args, u, spec0)
    if d is None:
        return  # a kink of the gradient within a step: not judged here
    if kind == "jacobian(grad)":
        H = sg.jacobian(G, mode=mode)(*args)
        got = _contract(H, u, shape0, kind)
    elif kind == "jacobian(jacobian)":
        H = sg.jacobian(sg.jacobian(fn, wrt=0, mode=mode), wrt=0, mode=mode)(*args)
        got = _contract(H, u, shape0, kind)
    elif kind == "jvp(grad)":
        tangents = [u] + [0.0 if isinstance(a, float) else np.zeros_like(a) for a in args[1:]]
        out, got = sg.jvp(G, tuple(args), tuple(tangents))
        want = np.asarray(G(*copy.deepcopy(args)), dtype=float)
        if not O._close(out, want, scale):
            raise O.Wrong(f"value: jvp(grad)'s primal output {O._short(out)}, grad's {O._short(want)}")
    elif kind == "vjp(grad)":
        out, vjp_fn = sg.vjp(G, *args)
        v = _weights(shape0) if shape0 else 0.7
        hv = vjp_fn(v)[0]
        if np.shape(hv) != shape0:
            raise O.Wrong(f"structure: vjp(grad) cotangent result shape {np.shape(hv)}, expected {shape0}")
        got_s, want_s = float(np.sum(np.asarray(hv) * u)), float(np.sum(v * d))
        if not O._close(got_s, want_s, scale * 10):
            raise O.Wrong(f"vjp(grad): u . H v expected {want_s:.6g}, got {got_s:.6g}")
        return
    got = np.asarray(got, dtype=float)
    if got.shape != shape0:
        raise O.Wrong(f"structure: {kind} gives H u of shape {got.shape}, expected {shape0}")
    if not O._close(got, d, scale * 10):
        raise O.Wrong(f"{kind}: H u expected {O._short(d)}, got {O._short(got)}")


def _run_wrapped(state, fn, program, args, u, kind):
    """grad(grad): sg.grad of `np.sum(sg.grad(f)(...) * V)`, against V . (differences of
    grad f); grad(vmap): sg.grad of `sum(tanh(sg.vmap(f)(stack([x0, 0.5 x0]), ...)))`,
    whose value is checked against a loop of f and whose gradient against its own
    differences."""
    from pathlib import Path

    spec0, shape0 = program.args[0], _shape(program.args[0])
    if "wrapped" not in state:
        module = _wrapper(program, Path(fn.__globals__["__file__"]).parent, kind)
        state["wrapped"] = (module._nested, sg.grad(module._nested, wrt=0))
    inner, outer = state["wrapped"]
    got = outer(*copy.deepcopy(args))
    if np.shape(got) != shape0:
        raise O.Wrong(f"structure: {kind} gradient shape {np.shape(got)}, expected {shape0}")
    if kind == "grad(grad)":
        d, scale = _differences(state["G"], args, u, spec0)
        if d is None:
            return
        want_s = float(np.sum(_weights(shape0) * d))
    else:
        x = args[0]
        value = float(inner(*copy.deepcopy(args)))
        loop = float(sum(np.tanh(float(fn(*_with_first(args, r)))) for r in (x, 0.5 * x)))
        if not O._close(value, loop, max(1.0, abs(loop))):
            raise O.Wrong(f"value: sg.vmap(f) inside f': {value:.6g}, a loop of f: {loop:.6g}")
        d, scale = _differences(inner, args, u, spec0)
        if d is None:
            return
        want_s = float(d)
    got_s = float(np.sum(np.asarray(got, dtype=float) * u))
    if not O._close(got_s, want_s, scale * 10):
        raise O.Wrong(f"{kind}: along a random direction expected {want_s:.6g}, got {got_s:.6g}")


COMPLEX_KINDS = ("grad", "value_and_grad", "vjp", "jvp", "jacobian", "hessian", "vmap(grad)",
                 "jacobian(grad)")


def run_complex(state, fn, program, ref):
    """A complex first array leaf: the transform must refuse, naming it complex."""
    leaves = O.flatten(copy.deepcopy(ref.args), program.args)
    lspecs = O.leaf_specs(program.args)
    k = next(i for i, a in enumerate(lspecs) if a[0] == "array")
    leaves[k] = np.asarray(leaves[k]) + 0.5j
    args = O.unflatten(leaves, program.args)
    kinds = [c for c in COMPLEX_KINDS if c in ("vjp", "jvp", "jacobian") or program.output == "scalar"]
    if any(a[0] not in ("array", "float") for a in program.args):
        kinds = [c for c in kinds if c in ("grad", "value_and_grad", "vjp")] or ["vjp"]
    kind = pick(program.seed, kinds, "complex")
    n = len(args)
    wrt = tuple(range(n))
    try:
        if kind == "grad":
            sg.grad(fn, wrt=wrt)(*args)
        elif kind == "value_and_grad":
            sg.value_and_grad(fn, wrt=wrt)(*args)
        elif kind == "vjp":
            _out, vjp_fn = sg.vjp(fn, *args)
            vjp_fn(ref.cotangent)
        elif kind == "jvp":
            sg.jvp(fn, tuple(args), tuple(args))
        elif kind == "jacobian":
            sg.jacobian(fn, wrt=wrt)(*args)
        elif kind == "hessian":
            sg.hessian(fn, wrt=wrt)(*args)
        elif kind == "vmap(grad)":
            axes = (0,) + (None,) * (n - 1)
            sg.vmap(sg.grad(fn, wrt=0), in_axes=axes)(np.stack([args[0], args[0]]), *args[1:])
        else:
            sg.jacobian(sg.grad(fn, wrt=0))(*args)
    except (TypeError, sg.CompileError) as e:
        if "complex" in str(e).lower():
            return  # the refusal is the right answer
        raise
    raise O.Wrong(f"complex: {kind} of a complex argument returned a value, not a refusal")


def applies(name, program) -> bool:
    plain = all(a[0] in ("array", "float") for a in program.args)
    if name == "nested":
        return plain and program.output == "scalar"
    return any(a[0] == "array" for a in O.leaf_specs(program.args))


RUNNERS = {"nested": run_nested, "complex": run_complex}


def _contract(H, u, shape0, kind):
    want = shape0 + shape0
    if np.shape(H) != want:
        raise O.Wrong(f"structure: {kind} shape {np.shape(H)}, expected {want}")
    return np.tensordot(np.asarray(H, dtype=float), np.asarray(u, dtype=float), axes=len(shape0))
