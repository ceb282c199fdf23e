"""The eager fuzzer's kinks-and-poles mode: one op of a row at points where its
derivative is a choice (0, -0, +-1, +-inf, ties), judged against torch
(`benchmarks/fuzz_eager.py --torch`, where torch is importable; torch is never a
dependency of the project).

Central differences cannot judge a kink, so this mode asks torch: each program is one
expression over 1-3 float64 inputs drawn from `POINTS` (small, so ties are common); the
first-order gradients of its sum and the second-order gradient of the sum of those are
computed by `sg.Tensor` and by torch, and must be equal (nan equal to nan, the sign of a
zero ignored). A difference listed in tests/autograd/test_kinks_vs_torch.py's
`DIFFERENCES` (docs/conventions.md, "Kinks and poles") is counted as documented, not
wrong: `KNOWN` names the (expression, order) pairs it covers.
"""

from __future__ import annotations

import math
import random

import numpy as np

POINTS = (0.0, -0.0, 1.0, -1.0, 0.5, 2.0, math.inf, -math.inf)
_UNARY = ("abs sqrt rsqrt log log2 log10 log1p exp expm1 sin cos tan tanh sigmoid relu sign "
          "floor ceil round trunc asin acos atan asinh acosh atanh reciprocal square sinh "
          "cosh").split()
_REDUCE = ("max() min() amax() amin() sum() mean() prod() std() var() norm() norm(p=1) "
           "norm(p=inf) norm(p=3) cumprod(0)").split()
_BINARY = ("x + y", "x - y", "x * y", "x / y", "x ** y", "x.atan2(y)", "x.hypot(y)",
           "x.maximum(y)", "x.minimum(y)", "x.remainder(y)", "x.fmod(y)", "x.logaddexp(y)",
           "x.clamp(min=y)", "x.clamp(max=y)")
_EXPONENTS = (0, 0.5, 1, 1.5, 2, 3, -1, -2, -0.5)
_BOUNDS = (0.0, 1.0, -1.0, 0.5)

# (expression prefix, order) pairs whose difference from torch is documented
KNOWN = {("x.relu()", 2), ("x.remainder(y)", 2), ("x ** 0", 2), ("x.norm()", 2), ("x / y", 2),
         ("x.var()", 2)}


def generate(seed: int):
    """(expression over x, y, z, inputs: one list of values per variable)."""
    rng = random.Random(seed)
    n = rng.randint(1, 3)
    kind = rng.randrange(6)
    if kind == 0:
        expr, arity = f"x.{rng.choice(_UNARY)}()", 1
    elif kind == 1:
        expr, arity = f"x.{rng.choice(_REDUCE)}", 1
    elif kind == 2:
        expr, arity = rng.choice(_BINARY), 2
    elif kind == 3:
        expr, arity = f"x ** {rng.choice(_EXPONENTS)}", 1
    elif kind == 4:
        lo, hi = sorted(rng.sample(_BOUNDS, 2))
        expr = rng.choice((f"x.clamp({lo}, {hi})", f"x.clamp(min={lo})", f"x.clamp(max={hi})"))
        arity = 1
    else:
        expr, arity = rng.choice(("x.clamp(y, z)", f"{rng.choice((0.0, 2.0, -1.0))} ** x")), 0
        arity = 3 if "z" in expr else 1
    inputs = [[rng.choice(POINTS) for _ in range(n)] for _ in range(arity)]
    return expr, inputs


def evaluate(lib, expr: str, inputs):
    """(first-order gradients, second-order gradients) as lists of floats, None where a
    gradient is unused; a `Raised` where the program raises. `lib` is torch or srcgrad."""
    where = getattr(lib, "where", None) or np.where
    try:
        with np.errstate(all="ignore"):
            ts = [lib.tensor(np.array(v, dtype=np.float64), requires_grad=True) for v in inputs]
            env = dict(zip("xyz", ts), where=where, inf=math.inf)
            grads = lib.autograd.grad(eval(expr, env).sum(), ts, create_graph=True,
                                      allow_unused=True)
            active = [g for g in grads if g is not None and g.requires_grad]
            second = None
            if active:
                second = _flat(lib.autograd.grad(sum(g.sum() for g in active), ts,
                                                 allow_unused=True))
            return _flat(grads), second
    except Exception as e:  # noqa: BLE001 - compared with the other library's outcome
        return Raised(type(e).__name__)


class Raised(str):
    """The name of the exception a program raised."""


def _flat(grads):  # `+ 0`: torch's zero gradient may be an expanded tensor without storage
    return [None if g is None else [float(v) for v in np.asarray(
        (g.detach() + 0).numpy(), np.float64).ravel()] for g in grads]


def same(a, b) -> bool:
    """Equal, nan to nan, finite values to 1e-12 (a sum's order), a zero's sign ignored."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b)) or (
            math.isfinite(a) and math.isfinite(b) and abs(a - b) <= 1e-12 * max(1, abs(b)))
    return a == b


def judge(expr, ours, theirs) -> str:
    """'agree', 'documented' (a KNOWN difference) or 'wrong'."""
    if same(ours, theirs):
        return "agree"
    if isinstance(ours, Raised) or isinstance(theirs, Raised):
        return "wrong"
    order = 2 if same(ours[0], theirs[0]) else 1
    known = any(expr.startswith(prefix) and order == k for prefix, k in KNOWN)
    return "documented" if known else "wrong"


def campaign(first_seed: int, programs: int):
    """Counts per verdict and the first wrong programs: {verdict: n}, [(seed, expr, inputs,
    ours, torch's)]."""
    import torch

    import srcgrad as sg

    counts, wrong = {"agree": 0, "documented": 0, "wrong": 0}, []
    for seed in range(first_seed, first_seed + programs):
        expr, inputs = generate(seed)
        ours, theirs = evaluate(sg, expr, inputs), evaluate(torch, expr, inputs)
        verdict = judge(expr, ours, theirs)
        counts[verdict] += 1
        if verdict == "wrong" and len(wrong) < 20:
            wrong.append((seed, expr, inputs, ours, theirs))
    return counts, wrong
