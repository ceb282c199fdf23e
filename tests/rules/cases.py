"""Test cases for every row of the derivative table.

`CASES[rule_name]` is a list of `(case_id, {param: spec})`. A spec is a random
array description (`N`, `P`, `U`, `SPD`, `WC`, ...), a list of specs (a sequence
parameter such as concatenate's `arrays`), or a plain static value (an axis, a
shape, a dtype name, an index) whose `repr` evaluates back to it (the compiler
test writes it into source; `INF` reads back as `xp.inf`).

`iter_cases()` yields `(rule, case_id, args)` with concrete, deterministic arrays
(seeded by rule and case id), for tests/rules/test_table.py (formulas evaluated
directly) and for tests that go through the compiler (second order).

Rules whose input must be symmetric (`SYMMETRIC_INPUTS`) are differentiated as
functions of a symmetric matrix: compare against finite differences along
symmetric directions (`symmetric_direction`).
"""

from __future__ import annotations

import zlib

import numpy as np

from srcgrad.rules import RULES


class _Inf(float):
    """inf / -inf whose repr is valid source in a module that has `xp`."""

    def __repr__(self):
        return "xp.inf" if self > 0 else "-xp.inf"


INF = _Inf("inf")
NEG_INF = _Inf("-inf")


class Spec:
    def __init__(self, make, label):
        self.make, self.label = make, label

    def __repr__(self):
        return self.label


def N(*shape):
    """Standard normal."""
    return Spec(lambda rng: rng.standard_normal(shape), f"N{shape}")


def U(lo, hi, *shape):
    """Uniform on (lo, hi)."""
    return Spec(lambda rng: rng.uniform(lo, hi, shape), f"U({lo},{hi}){shape}")


def P(*shape):
    """Positive, away from 0: uniform on (0.5, 2)."""
    return U(0.5, 2.0, *shape)


def NZ(*shape):
    """Away from 0, either sign: |x| in (0.5, 2)."""
    def make(rng):
        return rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    return Spec(make, f"NZ{shape}")


def SPD(n, *batch):
    """Symmetric positive definite with well separated eigenvalues."""
    def make(rng):
        q, _ = np.linalg.qr(rng.standard_normal(batch + (n, n)))
        w = np.arange(1, n + 1, dtype=float) + rng.uniform(0, 0.5, batch + (n,))
        return (q * w[..., None, :]) @ np.swapaxes(q, -1, -2)
    return Spec(make, f"SPD({n}){batch}")


def WC(n, *batch):
    """Well conditioned (random plus a dominant diagonal), not symmetric."""
    def make(rng):
        return rng.standard_normal(batch + (n, n)) * 0.3 + 2 * np.eye(n)
    return Spec(make, f"WC({n}){batch}")


def B(*shape):
    """A random boolean mask."""
    return Spec(lambda rng: rng.random(shape) > 0.5, f"B{shape}")


def I(*values):  # noqa: E743  (an integer index array)
    return Spec(lambda rng: np.array(values, dtype=np.int64), f"I{values}")


def Fixed(value):
    """A fixed float array (e.g. with zeros at chosen places)."""
    return Spec(lambda rng: np.array(value, dtype=np.float64), f"Fixed({value})")


SYMMETRIC_INPUTS = {"cholesky": ("x",), "eigh": ("x",), "eigvalsh": ("x",)}


def symmetric_direction(rule_name, param, v):
    """Project a random direction onto the directions a case may perturb along."""
    if param in SYMMETRIC_INPUTS.get(rule_name, ()):
        return 0.5 * (v + np.swapaxes(v, -1, -2))
    return v


# ---------------------------------------------------------------- case builders

def _unary(dom=N):
    return [("scalar", {"x": dom()}), ("vector", {"x": dom(5)}), ("matrix", {"x": dom(3, 4)})]


def _binary(dx=N, dy=N, **extra):
    return [
        ("same", {"x": dx(3, 4), "y": dy(3, 4), **extra}),
        ("row", {"x": dx(3, 4), "y": dy(4), **extra}),
        ("row-left", {"x": dx(4), "y": dy(3, 4), **extra}),
        ("outer", {"x": dx(3, 1), "y": dy(1, 4), **extra}),
        ("scalar-left", {"x": dx(), "y": dy(3, 4), **extra}),
        ("scalar-right", {"x": dx(3, 4), "y": dy(), **extra}),
    ]


_AXES = [(None, False), (None, True), (0, False), (-1, True), ((0, 2), False),
         ((0, 2), True), (1, False), ((-1, 0), True)]


def _reduce(dom=N, shape=(3, 4, 5), **extra):
    out = [(f"axis={a}-keepdims={k}", {"x": dom(*shape), "axis": a, "keepdims": k, **extra})
           for a, k in _AXES]
    out.append(("0-d", {"x": dom(), "axis": None, "keepdims": False, **extra}))
    return out


def _nondiff(*params):
    return [("forward", {p: N(3, 4) for p in params})]


CASES: dict = {}


def case(name, *items):
    CASES.setdefault(name, []).extend(items)


# ---------------------------------------------------------------- structural, helpers
case("shape", ("x", {"x": N(2, 3)}))
case("ndim", ("x", {"x": N(2, 3)}))
case("size", ("x", {"x": N(2, 3)}))
case("dtype", ("x", {"x": N(2, 3)}))
case("result_type", ("x", {"x": N(2, 3)}), ("x-and-scalar", {"x": N(2, 3), "more": (1.0,)}))
case("ensure_scalar", ("0-d", {"x": N(), "name": "f"}))
case("T", ("matrix", {"x": N(3, 4)}), ("vector", {"x": N(4)}))
case("reduced_size", ("tuple", {"shape": (3, 4, 5), "axis": (0, -1)}),
     ("none", {"shape": (3, 4), "axis": None}))
case("inverse_axes", ("perm", {"axes": (2, -3, 1)}))
case("numpy_number", ("0-d", {"x": N()}), ("array", {"x": N(3)}))
case("is_", ("none", {"x": N(3), "y": None}))
case("is_not", ("none", {"x": N(3), "y": None}))
case("ensure_scalar", ("0-d", {"x": N(), "name": "f"}))
case("T", ("matrix", {"x": N(3, 4)}), ("vector", {"x": N(4)}))
case("linear_pad_mode", ("reflect", {"mode": "reflect"}))
case("vector_only", ("vector", {"x": N(5), "axis": None}), ("axis", {"x": N(3, 4), "axis": 1}))
case("unbroadcast",
     ("lead", {"x": N(3, 4), "shape": (4,)}),
     ("ones", {"x": N(2, 3, 4), "shape": (3, 1)}),
     ("same", {"x": N(3, 4), "shape": (3, 4)}),
     ("up", {"x": N(4), "shape": (3, 4)}),
     ("up-ones", {"x": N(1, 4), "shape": (3, 4)}))
case("broadcast_to",
     ("row", {"x": N(4), "shape": (3, 4)}),
     ("col", {"x": N(3, 1), "shape": (2, 3, 4)}),
     ("scalar", {"x": N(), "shape": (2, 3)}))
case("expand_reduced",
     ("axis", {"x": N(3, 5), "shape": (3, 4, 5), "axis": 1, "keepdims": False}),
     ("tuple", {"x": N(4), "shape": (3, 4, 5), "axis": (0, -1), "keepdims": False}),
     ("keepdims", {"x": N(3, 1, 5), "shape": (3, 4, 5), "axis": 1, "keepdims": True}))
case("scatter_index",
     ("slice", {"x": N(2, 4), "shape": (5, 4), "index": slice(1, 3)}),
     ("duplicates", {"x": N(4, 3), "shape": (5, 3), "index": I(1, 1, 4, 0)}))
case("gather_index",
     ("list", {"x": N(5, 3), "index": [4, 0, 0, -1]}),
     ("second-axis", {"x": N(3, 4), "index": (slice(None), [3, 1, 3])}),
     ("ellipsis", {"x": N(2, 3, 4), "index": (Ellipsis, [[1, 1], [0, 3]])}))
case("shift",
     ("forward", {"x": N(3, 6), "axis": 1, "reverse": False, "fill": 1.0}),
     ("reverse", {"x": N(4, 3), "axis": 0, "reverse": True, "fill": 0.0}),
     ("negative-axis", {"x": N(2, 3, 4), "axis": -2, "reverse": True, "fill": 2.0}))
case("linrec",
     ("forward", {"a": N(3, 7), "b": N(3, 7), "axis": 1, "reverse": False}),
     ("reverse", {"a": N(5, 3), "b": N(5, 3), "axis": 0, "reverse": True}),
     ("broadcast-b", {"a": N(3, 6), "b": N(6), "axis": -1, "reverse": False}),
     ("zeros", {"a": Fixed([[0.5, 0.0, 2.0, 0.0, 1.5]]), "b": N(2, 5), "axis": 1,
                "reverse": True}))
case("excumprod",
     ("forward", {"x": N(3, 6), "axis": 1, "reverse": False}),
     ("reverse", {"x": N(5, 2), "axis": 0, "reverse": True}),
     ("zeros", {"x": Fixed([1.5, 0.0, -2.0, 0.0, 0.7]), "axis": 0, "reverse": False}),
     ("zeros-reverse", {"x": Fixed([1.5, 0.0, -2.0, 0.7]), "axis": 0, "reverse": True}))
case("fold_axes",
     ("none", {"x": N(2, 3, 4), "axis": None}),
     ("middle", {"x": N(2, 3, 4), "axis": 1}),
     ("tuple", {"x": N(2, 3, 4), "axis": (0, 2)}),
     ("last", {"x": N(2, 3, 4), "axis": -1}))
case("unfold_axes",
     ("tuple", {"x": N(3, 8), "shape": (2, 3, 4), "axis": (0, 2)}),
     ("none", {"x": N(24), "shape": (2, 3, 4), "axis": None}),
     ("middle", {"x": N(2, 4, 3), "shape": (2, 3, 4), "axis": 1}))
case("matmul_bar",
     ("x", {"c": N(3, 5), "other": N(4, 5), "shape": (3, 4), "which": 0}),
     ("y", {"c": N(3, 5), "other": N(3, 4), "shape": (4, 5), "which": 1}),
     ("x-vector", {"c": N(5), "other": N(4, 5), "shape": (4,), "which": 0}),
     ("y-vector", {"c": N(3), "other": N(3, 4), "shape": (4,), "which": 1}),
     ("x-batch-broadcast", {"c": N(2, 3, 5), "other": N(2, 4, 5), "shape": (3, 4), "which": 0}),
     ("vectors", {"c": N(), "other": N(4), "shape": (4,), "which": 1}))
case("tensordot_bar",
     ("axes2-x", {"c": N(2, 5), "other": N(3, 4, 5), "axes": 2, "shape": (2, 3, 4), "which": 0}),
     ("axes2-y", {"c": N(2, 5), "other": N(2, 3, 4), "axes": 2, "shape": (3, 4, 5), "which": 1}),
     ("pairs-x", {"c": N(4, 5), "other": N(3, 5, 2), "axes": ((1, 0), (2, 0)),
                  "shape": (3, 2, 4), "which": 0}),
     ("dot-y", {"c": N(3, 2), "other": N(3, 4), "axes": "dot", "shape": (4, 2), "which": 1}),
     ("dot-scalar", {"c": N(3), "other": N(3), "axes": "dot", "shape": (), "which": 0}),
     ("inner-x", {"c": N(3, 5), "other": N(5, 4), "axes": "inner", "shape": (3, 4), "which": 0}),
     ("inner-y", {"c": N(2, 3, 5), "other": N(2, 3, 4), "axes": "inner", "shape": (5, 4),
                  "which": 1}))
case("einsum_bar",
     ("matmul-x", {"c": N(3, 5), "other": N(4, 5), "subscripts": "ij,jk->ik", "shape": (3, 4),
                   "which": 0}),
     ("matmul-y", {"c": N(3, 5), "other": N(3, 4), "subscripts": "ij,jk->ik", "shape": (4, 5),
                   "which": 1}),
     ("diag", {"c": N(3), "other": None, "subscripts": "ii->i", "shape": (3, 3), "which": 0}),
     ("summed", {"c": N(3), "other": N(3, 4), "subscripts": "ij,jk->i", "shape": (4, 5),
                 "which": 1}))
case("diagonal_bar",
     ("offset", {"c": N(3), "shape": (3, 4), "offset": 1, "axis1": 0, "axis2": 1}),
     ("batch", {"c": N(2, 3), "shape": (2, 3, 3), "offset": 0, "axis1": 1, "axis2": 2}),
     ("broadcast", {"c": N(2, 1), "shape": (3, 2, 3), "offset": -1, "axis1": 2, "axis2": 0}))
case("tile_bar",
     ("2d", {"c": N(6, 4), "shape": (3, 2), "reps": (2, 2)}),
     ("promote", {"c": N(2, 3, 4), "shape": (4,), "reps": (2, 3, 1)}),
     ("int", {"c": N(3, 6), "shape": (3, 2), "reps": 3}))
case("repeat_bar",
     ("int", {"c": N(6, 4), "shape": (3, 4), "repeats": 2, "axis": 0}),
     ("array", {"c": N(3, 3), "shape": (3, 3), "repeats": [1, 0, 2], "axis": 0}),
     ("flat", {"c": N(8), "shape": (2, 2), "repeats": 2, "axis": None}))
case("pad_bar",
     ("constant", {"c": N(5, 6), "shape": (3, 4), "pad_width": 1, "mode": "constant"}),
     ("reflect", {"c": N(5, 6), "shape": (3, 4), "pad_width": ((1, 1), (2, 0)),
                  "mode": "reflect"}),
     ("wrap", {"c": N(7), "shape": (4,), "pad_width": (1, 2), "mode": "wrap"}))
case("concat_bar", ("axis0", {"c": N(5, 3), "arrays": [N(2, 3), N(3, 3)], "axis": 0}),
     ("axis-1", {"c": N(2, 4), "arrays": [N(2, 1), N(2, 3)], "axis": -1}))
case("stack_bar", ("axis0", {"c": N(2, 3, 4), "arrays": [N(3, 4), N(3, 4)], "axis": 0}),
     ("axis-1", {"c": N(3, 3), "arrays": [N(3), N(3), N(3)], "axis": -1}))

# ---------------------------------------------------------------- elementwise
for _name in ("exp", "exp2", "expm1", "square", "sin", "cos", "tan", "arctan", "sinh", "cosh",
              "tanh", "arcsinh", "deg2rad", "rad2deg", "negative", "positive", "copy"):
    case(_name, *_unary(N if _name != "tan" else (lambda *s: U(-1.2, 1.2, *s))))
for _name in ("log", "log2", "log10", "log1p", "sqrt", "cbrt", "reciprocal"):
    case(_name, *_unary(P))
case("cbrt", ("negative", {"x": U(-2.0, -0.5, 4)}))
case("reciprocal", ("negative", {"x": U(-2.0, -0.5, 4)}))
for _name in ("arcsin", "arccos", "arctanh"):
    case(_name, *_unary(lambda *s: U(-0.9, 0.9, *s)))
case("arccosh", *_unary(lambda *s: U(1.2, 3.0, *s)))
case("abs", *_unary(NZ))
case("conjugate", ("matrix", {"x": N(3, 4)}))
case("astype", ("float64", {"x": N(3, 4), "dtype": "float64"}))

case("add", *_binary())
case("subtract", *_binary())
case("multiply", *_binary())
case("divide", *_binary(N, NZ))
case("power", *_binary(P, N),
     ("static-int", {"x": N(3, 4), "y": 3}),
     ("static-float", {"x": P(3, 4), "y": 2.5}),
     ("negative-int-exponent", {"x": NZ(5), "y": -2}))
case("mod", *_binary(P, lambda *s: U(0.3, 0.7, *s)))
case("arctan2", *_binary(NZ, NZ))
case("hypot", *_binary(NZ, NZ))
case("logaddexp", *_binary())
case("maximum", *_binary())
case("minimum", *_binary())
case("relu", ("matrix", {"x": N(3, 4)}), ("scalar", {"x": N()}))
case("where",
     ("same", {"condition": B(3, 4), "x": N(3, 4), "y": N(3, 4)}),
     ("broadcast", {"condition": B(3, 1), "x": N(4), "y": N(3, 4)}),
     ("scalar", {"condition": B(3, 4), "x": N(), "y": N(1, 4)}))
case("clip",
     ("static", {"x": N(3, 4), "a_min": -0.5, "a_max": 0.5}),
     ("arrays", {"x": N(3, 4), "a_min": U(-1.0, -0.2, 4), "a_max": U(0.2, 1.0, 3, 1)}),
     ("min-only", {"x": N(3, 4), "a_min": U(-0.5, 0.0), "a_max": None}),
     ("max-only", {"x": N(5), "a_min": None, "a_max": U(0.0, 0.5, 5)}),
     ("scalar-x", {"x": N(), "a_min": U(-1.0, -0.2, 3), "a_max": 1.5}))

# The eager runtime's torch rows (srcgrad/rules/torch_rows.py): the same cases as the
# rows they stand in for, away from the kinks (tests/autograd/test_kinks_vs_torch.py
# holds torch's values at them).
case("torch_power", *_binary(P, N))
case("torch_power_scalar", ("int", {"x": N(3, 4), "y": 3}), ("float", {"x": P(3, 4), "y": 2.5}),
     ("negative-int", {"x": NZ(5), "y": -2}), ("zero", {"x": N(4), "y": 0}))
case("torch_arctan2", *_binary(NZ, NZ))
case("torch_hypot", *_binary(NZ, NZ))
case("torch_clip",
     ("arrays", {"x": N(3, 4), "a_min": U(-1.0, -0.2, 4), "a_max": U(0.2, 1.0, 3, 1)}),
     ("min-only", {"x": N(3, 4), "a_min": U(-0.5, 0.0), "a_max": None}),
     ("max-only", {"x": N(5), "a_min": None, "a_max": U(0.0, 0.5, 5)}),
     ("scalar-x", {"x": N(), "a_min": U(-1.0, -0.2, 3), "a_max": U(1.2, 1.5, 3)}))
case("torch_clamp_scalar",
     ("both", {"x": N(3, 4), "a_min": -0.5, "a_max": 0.5}),
     ("min-only", {"x": N(3, 4), "a_min": -0.25, "a_max": None}),
     ("max-only", {"x": N(5), "a_min": None, "a_max": 0.25}))
case("torch_fmod", *_binary(lambda *s: U(-3.3, 3.3, *s), lambda *s: U(0.7, 0.9, *s)))
case("torch_logaddexp", *_binary())
case("torch_sigmoid", ("matrix", {"x": N(3, 4)}), ("scalar", {"x": N()}))
case("torch_relu", ("matrix", {"x": N(3, 4)}), ("scalar", {"x": N()}))
case("torch_divide", *_binary(N, NZ))
case("torch_rsqrt", ("matrix", {"x": P(3, 4)}), ("scalar", {"x": P()}))
case("trunc_divide", *_nondiff("x", "y"))
# (the eager prod/cumprod: away from zeros the division formula, at them the products;
# the one-element cases pass g; torch's values at zeros and infs: tests/autograd/
# test_kinks_vs_torch.py and tests/eager_fuzz/test_kink_findings.py)
case("torch_prod", *_reduce(NZ),
     ("one-zero", {"x": Fixed([[1.5, 0.0, -2.0], [0.5, 1.2, 0.9]]), "axis": 1, "keepdims": False}),
     ("tuple-axes", {"x": NZ(2, 3, 2), "axis": (0, 2), "keepdims": False}),
     ("one-element", {"x": NZ(1), "axis": None, "keepdims": False}))
case("torch_cumprod", ("none", {"x": NZ(3, 4)}), ("axis0", {"x": NZ(3, 4), "axis": 0}),
     ("axis-1", {"x": NZ(2, 3, 4), "axis": -1}),
     ("one-zero", {"x": Fixed([1.5, 0.0, -2.0, 0.7]), "axis": 0}),
     ("two-zeros", {"x": Fixed([[1.5, 0.0, -2.0, 0.0], [0.5, 1.2, 0.9, 2.0]]), "axis": 1}))
case("torch_prod_bar", ("forward", {"g": N(3), "x": NZ(3, 4), "ans": N(3), "axis": 1,
                                    "keepdims": False}))
case("torch_cumprod_bar", ("forward", {"g": N(3, 4), "x": NZ(3, 4), "ans": N(3, 4), "axis": 1}))
case("torch_power_zero", ("zero", {"x": N(3, 4), "y": 0}), ("zero-float", {"x": N(), "y": 0.0}))
case("torch_norm2",
     ("fro-all", {"x": N(3, 4)}), ("vector", {"x": N(5)}), ("axis", {"x": N(3, 4), "axis": 1}),
     ("axis-keepdims", {"x": N(3, 4), "axis": 0, "keepdims": True}),
     ("ord2-axis", {"x": N(3, 4), "ord": 2, "axis": -1}))
case("torch_norm_small_p", ("ord0.5", {"x": NZ(5), "ord": 0.5}),
     ("ord-1-axis", {"x": NZ(3, 4), "ord": -1, "axis": 1}))
for _name in ("torch_softmax", "torch_log_softmax"):
    case(_name, ("rows", {"x": N(3, 4), "axis": -1}), ("columns", {"x": N(3, 4), "axis": 0}),
         ("vector", {"x": N(5), "axis": 0}), ("3-d", {"x": N(2, 3, 2), "axis": 1}))
_NLL_P = Spec(lambda rng: np.array([[0, 0, 1, 0], [0, 0, 0, 0], [0, 0, 0, 1]], bool),
              "picked[[2],[-],[3]]")
_NLL_W = Spec(lambda rng: np.where(_NLL_P.make(rng), np.array([0.5, 1.0, 2.0, 1.5]), 0.0),
              "wpicked")
case("torch_nll_weighted", *[(r, {"x": N(3, 4), "picked": _NLL_P, "wpicked": _NLL_W,
                                  "denom": Spec(lambda rng: np.array(3.5), "denom3.5"),
                                  "reduction": r}) for r in ("mean", "sum", "none")])
case("torch_nll_loss", ("rows", {"x": N(3, 4), "picked": _NLL_P,
                                 "count": Spec(lambda rng: np.array(2.0), "count2")}),
     ("vector", {"x": N(4), "picked": Spec(lambda rng: np.array([0, 1, 0, 0], bool), "picked[1]"),
                 "count": Spec(lambda rng: np.array(1.0), "count1")}))

# ---------------------------------------------------------------- not differentiable
for _name in ("sign", "floor", "ceil", "trunc", "rint", "isnan", "isinf", "isfinite",
              "logical_not"):
    case(_name, *_nondiff("x"))
case("round", ("decimals", {"x": N(3, 4), "decimals": 1}), ("default", {"x": N(3)}))
for _name in ("less", "less_equal", "greater", "greater_equal", "equal", "not_equal",
              "floor_divide", "logical_and", "logical_or", "logical_xor"):
    case(_name, *_nondiff("x", "y"))
for _name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
    case(_name, ("bool", {"x": B(3, 4), "y": B(4)}))
case("invert", ("bool", {"x": B(3, 4)}))
case("argmax", ("axis", {"x": N(3, 4), "axis": 1}), ("flat", {"x": N(3, 4)}))
case("argmin", ("axis", {"x": N(3, 4), "axis": 0, "keepdims": True}))
case("argsort", ("last", {"x": N(3, 4)}))
case("all", ("axis", {"x": B(3, 4), "axis": 1}))
case("any", ("all", {"x": B(3, 4)}))
case("zeros_like", ("x", {"x": N(3, 4)}))
case("empty_like", ("x", {"x": N(3, 4)}))
case("empty", ("shape", {"shape": (2, 3)}))
case("identity", ("n", {"n": 3}))
case("ones_like", ("x", {"x": N(3, 4), "dtype": "float32"}))
case("zeros", ("shape", {"shape": (2, 3)}))
case("ones", ("int", {"shape": 3, "dtype": "int64"}))
case("eye", ("square", {"N": 3}), ("offset", {"N": 3, "M": 4, "k": 1}))
case("arange", ("stop", {"start": 5}), ("range", {"start": 1, "stop": 7, "step": 2}))
case("full", ("scalar", {"shape": (2, 3), "fill_value": N()}),
     ("row", {"shape": (2, 3), "fill_value": N(3)}))
case("full_like", ("scalar", {"x": N(2, 3), "fill_value": N()}))

# ---------------------------------------------------------------- reductions
case("sum", *_reduce())
case("mean", *_reduce())
case("prod", *_reduce(NZ),
     ("one-zero", {"x": Fixed([[1.5, 0.0, -2.0], [0.5, 1.2, 0.9]]), "axis": 1, "keepdims": False}),
     ("two-zeros", {"x": Fixed([[1.5, 0.0, 0.0], [0.5, 1.2, 0.9]]), "axis": None,
                    "keepdims": False}))
case("max", *_reduce())
case("min", *_reduce())
case("var", *_reduce(), ("ddof", {"x": N(4, 5), "axis": 1, "ddof": 1, "keepdims": False}),
     ("ddof-tuple", {"x": N(3, 4, 5), "axis": (0, 2), "ddof": 2, "keepdims": True}))
case("std", *_reduce(), ("ddof", {"x": N(4, 5), "axis": 0, "ddof": 1, "keepdims": True}))
case("cumsum", ("none", {"x": N(3, 4)}), ("axis0", {"x": N(3, 4), "axis": 0}),
     ("axis-1", {"x": N(2, 3, 4), "axis": -1}))
case("cumprod", ("none", {"x": NZ(3, 4)}), ("axis0", {"x": NZ(3, 4), "axis": 0}),
     ("axis-1", {"x": NZ(2, 3, 4), "axis": -1}),
     ("one-zero", {"x": Fixed([1.5, 0.0, -2.0, 0.7]), "axis": 0}),
     ("two-zeros", {"x": Fixed([[1.5, 0.0, -2.0, 0.0], [0.5, 1.2, 0.9, 2.0]]), "axis": 1}))
case("norm",
     ("fro-all", {"x": N(3, 4)}),
     ("vector", {"x": N(5)}),
     ("axis", {"x": N(3, 4), "axis": 1}),
     ("axis-keepdims", {"x": N(3, 4), "axis": 0, "keepdims": True}),
     ("fro", {"x": N(3, 4), "ord": "fro"}),
     ("fro-pair", {"x": N(2, 3, 4), "axis": (0, 2)}),
     ("ord2", {"x": N(5), "ord": 2}),
     ("ord2-axis", {"x": N(3, 4), "ord": 2, "axis": -1}),
     ("ord1", {"x": NZ(5), "ord": 1}),
     ("inf", {"x": N(5), "ord": INF}),
     ("-inf", {"x": N(3, 4), "ord": NEG_INF, "axis": 1}),
     ("ord3", {"x": NZ(4, 3), "ord": 3, "axis": 0}),
     ("ord0.5", {"x": NZ(5), "ord": 0.5}))

# ---------------------------------------------------------------- linear algebra
case("matmul",
     ("2d", {"x": N(3, 4), "y": N(4, 5)}),
     ("vector-left", {"x": N(4), "y": N(4, 5)}),
     ("vector-right", {"x": N(3, 4), "y": N(4)}),
     ("vectors", {"x": N(4), "y": N(4)}),
     ("batch-left", {"x": N(2, 3, 4), "y": N(4, 5)}),
     ("batch-broadcast", {"x": N(2, 1, 3, 4), "y": N(5, 4, 2)}),
     ("vector-batch", {"x": N(4), "y": N(2, 4, 3)}))
case("dot",
     ("2d", {"x": N(3, 4), "y": N(4, 2)}),
     ("vectors", {"x": N(4), "y": N(4)}),
     ("matrix-vector", {"x": N(3, 4), "y": N(4)}),
     ("nd", {"x": N(2, 3, 4), "y": N(5, 4, 2)}),
     ("scalar", {"x": N(), "y": N(3)}))
case("inner", ("2d", {"x": N(3, 4), "y": N(5, 4)}), ("vectors", {"x": N(4), "y": N(4)}),
     ("nd", {"x": N(2, 3), "y": N(3)}))
case("tensordot",
     ("axes2", {"x": N(2, 3, 4), "y": N(3, 4, 5), "axes": 2}),
     ("axes1", {"x": N(2, 3), "y": N(3, 4), "axes": 1}),
     ("pairs", {"x": N(3, 2, 4), "y": N(2, 5, 3), "axes": ((1, 0), (0, 2))}),
     ("outer", {"x": N(2), "y": N(3), "axes": 0}))
case("outer", ("vectors", {"x": N(3), "y": N(4)}), ("flatten", {"x": N(2, 2), "y": N(3)}))
case("einsum",
     ("matmul", {"subscripts": "ij,jk->ik", "x": N(3, 4), "y": N(4, 5)}),
     ("implicit", {"subscripts": "ij,jk", "x": N(3, 4), "y": N(4, 5)}),
     ("batched-ellipsis", {"subscripts": "...ij,...jk->...ik", "x": N(2, 3, 4), "y": N(4, 5)}),
     ("ellipsis-broadcast", {"subscripts": "...ij,...jk->...ik", "x": N(1, 3, 4),
                             "y": N(2, 4, 5)}),
     ("diag", {"subscripts": "ii->i", "x": N(3, 3)}),
     ("trace", {"subscripts": "ii", "x": N(3, 3)}),
     ("sum", {"subscripts": "ij->", "x": N(3, 4)}),
     ("transpose", {"subscripts": "ij->ji", "x": N(3, 4)}),
     ("summed-in-one", {"subscripts": "ij,jk->i", "x": N(3, 4), "y": N(4, 5)}),
     ("dot", {"subscripts": "i,i->", "x": N(4), "y": N(4)}),
     ("hadamard", {"subscripts": "ij,ij->ij", "x": N(3, 4), "y": N(3, 4), "optimize": True}),
     ("repeated-two-operands", {"subscripts": "ii,i->i", "x": N(3, 3), "y": N(3)}))
case("trace", ("square", {"x": N(3, 3)}), ("offset", {"x": N(3, 4), "offset": 1}),
     ("batch", {"x": N(2, 3, 3), "axis1": 1, "axis2": 2}),
     ("negative", {"x": N(4, 3), "offset": -1}))
case("diagonal", ("square", {"x": N(3, 3)}), ("offset", {"x": N(3, 4), "offset": -1}),
     ("batch", {"x": N(3, 2, 3), "axis1": 0, "axis2": 2}))
for _name in ("tril", "triu"):
    case(_name, ("square", {"x": N(4, 4)}), ("offset", {"x": N(3, 4), "k": -1}),
         ("batch", {"x": N(2, 3, 3), "k": 1}))
case("inv", ("2d", {"x": WC(3)}), ("batch", {"x": WC(3, 2)}))
case("solve",
     ("vector", {"a": WC(3), "b": N(3)}),
     ("matrix", {"a": WC(3), "b": N(3, 2)}),
     ("batch", {"a": WC(3, 2), "b": N(2, 3, 2)}),
     ("broadcast-b", {"a": WC(3, 2), "b": N(3, 2)}),
     # A 1-D b against a batch of as many matrices as b is long: NumPy 2 reads b as a
     # vector; reading it as a matrix would still run, and be wrong.
     ("batch-vector", {"a": WC(3, 3), "b": N(3)}))
case("as_columns", ("vector-rhs", {"x": N(2, 3), "b_ndim": 1}), ("matrix-rhs", {"x": N(3, 2), "b_ndim": 2}))
case("from_columns", ("vector-rhs", {"x": N(2, 3, 1), "b_ndim": 1}),
     ("matrix-rhs", {"x": N(3, 2), "b_ndim": 2}))
case("det", ("2d", {"x": WC(3)}), ("batch", {"x": WC(2, 3)}))
case("slogdet", ("2d", {"x": WC(3)}), ("batch", {"x": WC(3, 2)}),
     ("negative", {"x": Fixed([[0.5, 2.0], [1.5, 0.3]])}))
case("cholesky", ("2d", {"x": SPD(3)}), ("batch", {"x": SPD(3, 2)}))
case("eigh", ("2d", {"x": SPD(3)}), ("batch", {"x": SPD(4, 2)}),
     ("upper", {"x": SPD(3), "UPLO": "U"}))
case("eigvalsh", ("2d", {"x": SPD(3)}), ("batch", {"x": SPD(3, 2)}))

# ---------------------------------------------------------------- shape
case("reshape", ("2d", {"x": N(3, 4), "shape": (2, 6)}), ("flat", {"x": N(3, 4), "shape": -1}),
     ("infer", {"x": N(2, 3, 4), "shape": (4, -1)}))
case("ravel", ("3d", {"x": N(2, 3, 4)}))
case("flatten", ("2d", {"x": N(3, 4)}))
case("transpose", ("reverse", {"x": N(2, 3, 4)}), ("perm", {"x": N(2, 3, 4), "axes": (1, 2, 0)}),
     ("negative", {"x": N(2, 3, 4), "axes": (-1, 0, 1)}))
case("matrix_transpose", ("batch", {"x": N(2, 3, 4)}))
case("swapaxes", ("3d", {"x": N(2, 3, 4), "axis1": 0, "axis2": -1}))
case("moveaxis", ("int", {"x": N(2, 3, 4), "source": 0, "destination": -1}),
     ("tuple", {"x": N(2, 3, 4), "source": (0, 1), "destination": (2, 0)}))
case("expand_dims", ("int", {"x": N(3, 4), "axis": 1}), ("tuple", {"x": N(3), "axis": (0, 2)}))
case("squeeze", ("all", {"x": N(3, 1, 4, 1)}), ("axis", {"x": N(3, 1, 4, 1), "axis": 1}))
case("flip", ("all", {"x": N(3, 4)}), ("axis", {"x": N(3, 4), "axis": 0}),
     ("tuple", {"x": N(2, 3, 4), "axis": (0, 2)}))
case("concatenate", ("axis0", {"arrays": [N(2, 3), N(4, 3)], "axis": 0}),
     ("axis-1", {"arrays": [N(2, 3), N(2, 1), N(2, 2)], "axis": -1}),
     ("default", {"arrays": [N(1, 3), N(2, 3)]}))
case("stack", ("axis0", {"arrays": [N(3), N(3)], "axis": 0}),
     ("axis-1", {"arrays": [N(2, 3), N(2, 3), N(2, 3)], "axis": -1}))
case("split", ("sections", {"x": N(6, 4), "indices_or_sections": 3, "axis": 0}),
     ("indices", {"x": N(6, 4), "indices_or_sections": [1, 4]}),
     ("axis1", {"x": N(4, 6), "indices_or_sections": 2, "axis": 1}))
case("split_bounds", ("sections", {"shape": (6, 2), "axis": 0, "indices_or_sections": 3}),
     ("indices", {"shape": (2, 6), "axis": -1, "indices_or_sections": [1, -2, 9]}))
case("tile", ("2d", {"x": N(3, 2), "reps": (2, 2)}), ("promote", {"x": N(4), "reps": (2, 3, 1)}),
     ("int", {"x": N(3, 2), "reps": 3}), ("short-reps", {"x": N(2, 3, 2), "reps": (2,)}))
case("repeat", ("int", {"x": N(3, 4), "repeats": 2, "axis": 0}),
     ("array", {"x": N(3, 3), "repeats": [1, 0, 2], "axis": 1}),
     ("flat", {"x": N(2, 2), "repeats": 2}))
case("pad", ("int", {"x": N(3, 4), "pad_width": 1}),
     ("pairs", {"x": N(3, 4), "pad_width": ((1, 0), (2, 3)), "constant_values": 1.5}),
     ("reflect", {"x": N(3, 4), "pad_width": ((1, 1), (2, 0)), "mode": "reflect"}),
     ("edge", {"x": N(4), "pad_width": 2, "mode": "edge"}),
     ("symmetric", {"x": N(3, 2), "pad_width": 1, "mode": "symmetric"}),
     ("wrap", {"x": N(4), "pad_width": (1, 3), "mode": "wrap"}))
case("getitem",
     ("slice", {"x": N(5, 4), "index": (slice(1, 3), slice(None, None, 2))}),
     ("int", {"x": N(5, 4), "index": 2}),
     ("newaxis-ellipsis", {"x": N(3, 4), "index": (Ellipsis, None, 1)}),
     ("duplicates", {"x": N(5, 3), "index": I(1, 1, 4, 0, 1)}),
     ("mask", {"x": N(3, 4), "index": B(3, 4)}))

case("setitem",
     ("int", {"x": N(5, 3), "index": 1, "v": N(3)}),
     ("slice-broadcast", {"x": N(4, 3), "index": (slice(1, 3), 0), "v": N()}),
     ("mask", {"x": N(3, 4), "index": B(3, 4), "v": N()}),
     ("repeated", {"x": N(5), "index": I(1, 3, 1), "v": N(3)}))
case("setitem_bar",
     ("slice", {"c": N(5, 3), "index": slice(1, 4)}),
     ("repeated", {"c": N(5), "index": I(1, 3, 1)}))
case("no_alias", ("distinct", {"x": N(3), "base": N(3), "others": (N(3), N(2))}))
case("no_alias_batched", ("distinct", {"x": N(2, 3), "base": N(2, 3), "mapped": (True, True, False),
                                       "others": (N(2, 3), N(3))}))
for _name, _dom in [("exp", N), ("expm1", N), ("log", P), ("log2", P), ("log10", P),
                    ("log1p", P), ("sqrt", P), ("sin", N), ("cos", N), ("tan", lambda: U(-1, 1)),
                    ("sinh", N), ("cosh", N), ("tanh", N), ("asin", lambda: U(-0.9, 0.9)),
                    ("acos", lambda: U(-0.9, 0.9)), ("atan", N), ("fabs", NZ)]:
    case(f"math_{_name}", ("scalar", {"x": _dom()}))


# ---------------------------------------------------------------- sorting, gathering
case("diff", ("default", {"x": N(3, 5)}), ("axis0", {"x": N(4, 3), "axis": 0}),
     ("n2", {"x": N(2, 6), "n": 2}), ("n3-axis", {"x": N(5, 2, 3), "n": 3, "axis": 0}))
case("diff_bar", ("default", {"c": N(3, 4), "n": 1, "axis": -1}),
     ("n2", {"c": N(2, 3), "n": 2, "axis": 0}))
case("sort", ("default", {"x": N(3, 5)}), ("axis0", {"x": N(4, 3), "axis": 0}),
     ("flat", {"x": N(3, 4), "axis": None}))
case("take", ("flat", {"x": N(3, 4), "indices": I(0, 5, 5, 11)}),
     ("axis", {"x": N(3, 4), "indices": I(2, 0, 2), "axis": 1}),
     ("axis-2d", {"x": N(4, 3), "indices": Spec(lambda rng: np.array([[0, 3], [3, 3]]), "I2d"),
                  "axis": 0}))
case("take_bar", ("axis", {"c": N(3, 3), "shape": (3, 4), "indices": I(2, 0, 2), "axis": 1}),
     ("flat", {"c": N(4), "shape": (3, 4), "indices": I(0, 5, 5, 11), "axis": None}))
_IDX = Spec(lambda rng: np.array([[2, 0, 2], [1, 1, 0]]), "I[[2,0,2],[1,1,0]]")
case("take_along_axis", ("axis1", {"x": N(2, 4), "indices": _IDX, "axis": 1}),
     ("flat", {"x": N(2, 3), "indices": I(5, 0, 0), "axis": None}),
     ("axis0", {"x": N(3, 3), "indices": _IDX, "axis": 0}))
case("take_along_bar", ("axis1", {"c": N(2, 3), "shape": (2, 4), "indices": _IDX, "axis": 1}),
     ("flat", {"c": N(3), "shape": (2, 3), "indices": I(5, 0, 0), "axis": None}))


def _materialize(value, rng):
    if isinstance(value, Spec):
        return value.make(rng)
    if isinstance(value, list) and value and all(isinstance(v, Spec) for v in value):
        return [v.make(rng) for v in value]
    return value


def _bind(rule, spec, rng):
    """Bind a case to the rule's signature; a `*varargs` parameter's value is a tuple."""
    values = {k: _materialize(v, rng) for k, v in spec.items()}
    params = rule.py_signature.parameters
    star = next((p for p in params.values() if p.kind is p.VAR_POSITIONAL), None)
    if star is not None and star.name in values:
        packed = tuple(_materialize(v, rng) for v in values.pop(star.name))
        leading = [values.pop(p) for p, par in params.items()
                   if par.kind is par.POSITIONAL_OR_KEYWORD]
        bound = rule.py_signature.bind(*leading, *packed, **values)
    else:
        bound = rule.py_signature.bind(**values)
    bound.apply_defaults()  # every parameter present, as the compiler binds a call
    return dict(bound.arguments)


def iter_cases():
    """Yield `(rule, case_id, args)` for every case: concrete arrays, defaults filled in."""
    for name in sorted(CASES):
        rule = RULES[name]
        for case_id, spec in CASES[name]:
            rng = np.random.default_rng(zlib.crc32(f"{name}/{case_id}".encode()))
            yield rule, case_id, _bind(rule, spec, rng)


def differentiable_cases(kind: str):
    """The cases of rows with a `kind` ("vjp" or "jvp") formula and a float operand.

    Cases with nothing to differentiate (non-differentiable rows, integer-only
    operands) are not collected as tests at all: a skipped test proves nothing.
    """
    from tests.rules.evaluate import differentiable_params

    for rule, case_id, args in iter_cases():
        formulas = getattr(rule, kind)
        if rule.nondiff or rule.static_out:
            continue
        if any(p in formulas for p in differentiable_params(rule, args)):
            yield rule, case_id, args


def case_ids(cases):
    return [f"{rule.name}-{case_id}" for rule, case_id, _ in cases]


case("print", ("forward", {"values": (N(2), "label"), "sep": " ", "end": "\n"}))


# ---------------------------------------------------------------- custom Functions
case("custom_call", ("one", {"outputs": (N(3),), "inputs": (N(3), 2.0)}),
     ("two", {"outputs": (N(3), N(2)), "inputs": (N(3),)}))
case("check_grad", ("same", {"grad": N(3), "shape": (3,), "name": "FBackward", "index": 0}),
     ("sum-to", {"grad": N(2, 1, 3), "shape": (1, 3), "name": "FBackward", "index": 1}))
case("check_tangent", ("same", {"tangent": N(2, 3), "shape": (2, 3)}))
# Where every example takes the branch, taken_input is the identity and so is its
# derivative; where one does not, its cotangent there is 0 by design, which no difference
# of the identity shows: tests/test_vmap_untaken_branch.py checks that against the program.
case("math_checked", ("tanh", {"x": N(3), "name": "tanh"}), ("log", {"x": P(2, 2), "name": "log1p"}))
case("taken_input", ("all-taken", {"x": N(3, 2), "taken": np.ones((3, 1), dtype=bool)}))
case("zero_tangent", ("float", {"x": N(3)}), ("int", {"x": I(1, 2)}))
# Differentiating differentiable_once is a CompileError by design (the case is an integer
# array so no derivative is taken; tests/test_custom_function_compiled.py checks the error).
case("differentiable_once", ("int", {"x": I(1, 2), "name": "FBackward"}))
# Note [Saved values written in place]: the flag, and the identity that checks it (a set
# flag raises; tests/test_saved_versions.py checks the message).
case("storage_written", ("distinct", {"saved": N(3), "target": N(3)}))
case("check_saved", ("unwritten", {"x": N(2, 3), "written": (False, False), "name": "Mul",
                                   "saved_at": "f.py:3", "writes": ("f.py:5", "f.py:6")}))
case("saved_pack", ("copy", {"pack": np.copy, "x": N(3)}))
case("saved_unpack", ("copy", {"unpack": np.copy, "packed": N(3)}))


# ---------------------------------------------------------------- stacking idioms (issue 11)
case("hstack", ("vectors", {"arrays": [N(3), N(1), N(2)]}), ("scalars", {"arrays": [N(), N(2), N()]}),
     ("matrices", {"arrays": [N(2, 3), N(2, 1)]}), ("3-d", {"arrays": [N(2, 1, 2), N(2, 3, 2)]}))
case("vstack", ("matrices", {"arrays": [N(1, 3), N(2, 3)]}), ("mixed", {"arrays": [N(3), N(2, 3)]}),
     ("3-d", {"arrays": [N(1, 2, 2), N(3, 2, 2)]}))
case("dstack", ("3-d", {"arrays": [N(2, 3, 1), N(2, 3, 2)]}),
     ("mixed", {"arrays": [N(1, 3), N(3), N(1, 3, 2)]}))
case("column_stack", ("matrices", {"arrays": [N(3, 1), N(3, 2)]}),
     ("mixed", {"arrays": [N(3), N(3, 2)]}), ("scalars", {"arrays": [N(), N()]}))
case("stacked_bar",
     ("hstack", {"c": N(4), "arrays": [N(), N(3)], "how": "hstack"}),
     ("vstack", {"c": N(3, 2), "arrays": [N(2), N(2, 2)], "how": "vstack"}),
     ("dstack", {"c": N(1, 2, 3), "arrays": [N(2), N(1, 2, 2)], "how": "dstack"}),
     ("column_stack", {"c": N(3, 3), "arrays": [N(3), N(3, 2)], "how": "column_stack"}))
for _name in ("atleast_1d", "atleast_2d", "atleast_3d"):
    case(_name, ("0-d", {"x": N()}), ("vector", {"x": N(3)}), ("matrix", {"x": N(2, 3)}))
case("atleast_3d", ("3-d", {"x": N(2, 1, 3)}))
# (one target, `n, = x.shape`: tests/test_idioms.py; the eager kernels take no 1-output
# row with a computed output count)
case("unpack", ("rows", {"x": N(3, 2), "count": 3}), ("shape", {"x": (3, 4), "count": 2}))
for _name, _spec in (("floor", {"x": 2.5}), ("ceil", {"x": -2.5}), ("trunc", {"x": -2.5}),
                     ("factorial", {"x": 4}), ("isqrt", {"x": 10}), ("comb", {"n": 5, "k": 2}),
                     ("perm", {"n": 5, "k": 2}), ("gcd", {"a": 12, "b": 18})):
    case(f"pymath_{_name}", ("int", _spec))
case("py_float", ("int", {"x": 3}))
case("py_int", ("float", {"x": 3.7}))
case("builtin_round", ("float", {"x": 3.7}))
case("fliplr", ("matrix", {"x": N(3, 4)}), ("3-d", {"x": N(2, 3, 2)}))
case("flipud", ("vector", {"x": N(4)}), ("matrix", {"x": N(3, 4)}))
case("roll", ("flat", {"x": N(3, 4), "shift": 5}), ("axis", {"x": N(3, 4), "shift": -1, "axis": 1}),
     ("axes", {"x": N(2, 3, 4), "shift": 2, "axis": (0, 2)}))
case("logaddexp2", *_binary())
case("count_nonzero", ("all", {"x": B(3, 4)}), ("axis", {"x": B(3, 4), "axis": 1, "keepdims": True}))
case("vdot", ("vectors", {"x": N(4), "y": N(4)}), ("matrices", {"x": N(2, 3), "y": N(3, 2)}))
case("diag", ("vector", {"v": N(3)}), ("vector-k", {"v": N(2), "k": -1}),
     ("square", {"v": N(3, 3)}), ("wide-k", {"v": N(2, 4), "k": 1}),
     ("tall-k", {"v": N(4, 3), "k": -2}))
case("diag_bar", ("of-vector", {"c": N(4, 4), "shape": (3,), "k": 1}),
     ("of-matrix", {"c": N(2), "shape": (4, 3), "k": -2}),
     ("of-wide", {"c": N(2), "shape": (2, 4), "k": 1}))


# ---------------------------------------------------------------- issue 29's sweep (table_sweep.py)
case("sinc", *_unary(), ("near-zero", {"x": Fixed([0.0, 0.01, -0.03, 0.049, 0.051, 0.7])}))


def Z(*shape):
    """Normal with about half the elements exactly 0 (heaviside's x1)."""
    return Spec(lambda rng: np.where(rng.random(shape) > 0.5, 0.0, rng.standard_normal(shape)),
                f"Z{shape}")


case("heaviside", *_binary(Z, N))
case("copysign", *_binary(NZ, NZ))
case("fmod", *_binary(NZ, lambda *s: U(0.3, 0.7, *s)))
case("nan_to_num", ("finite", {"x": N(3, 4)}),
     ("special", {"x": Fixed([1.0, np.nan, np.inf, -np.inf, -2.0]), "nan": N(), "posinf": N(5),
                  "neginf": N()}))
case("cross", ("same", {"a": N(4, 3), "b": N(4, 3)}), ("broadcast", {"a": N(3), "b": N(2, 3)}),
     ("axis0", {"a": N(3, 2), "b": N(3, 2), "axis": 0}))
case("kron", ("matrices", {"a": N(2, 3), "b": N(3, 2)}), ("vector-matrix", {"a": N(3), "b": N(2, 2)}),
     ("3-d", {"a": N(2, 1, 2), "b": N(2, 2)}))
case("kron_bar", ("first", {"c": N(6, 6), "other": N(3, 2), "shape": (2, 3), "which": 0}),
     ("second", {"c": N(2, 6), "other": N(3), "shape": (2, 2), "which": 1}))
case("ediff1d", ("vector", {"ary": N(5)}), ("matrix", {"ary": N(3, 2)}))
_NAN = Fixed([[1.0, np.nan, -2.0, 0.5], [np.nan, 0.3, 0.7, -1.0], [2.0, -0.4, np.nan, 1.5]])
for _name in ("nansum", "nanmean", "nanmax", "nanmin"):
    case(_name, *_reduce(), ("nan-all", {"x": _NAN}), ("nan-axis0", {"x": _NAN, "axis": 0}),
         ("nan-axis1-keep", {"x": _NAN, "axis": 1, "keepdims": True}))
case("polyval", ("matrix-x", {"p": N(4), "x": N(2, 3)}), ("scalar-x", {"p": N(3), "x": N()}),
     ("constant-poly", {"p": N(1), "x": N(3)}))
case("trapezoid", ("vector", {"y": N(5)}), ("axis0", {"y": N(4, 3), "axis": 0, "dx": P()}),
     ("last-axis", {"y": N(2, 3, 4), "dx": 0.5}))
case("convolve", ("longer-a", {"a": N(5), "v": N(3)}), ("longer-v", {"a": N(2), "v": N(4)}),
     ("equal", {"a": N(3), "v": N(3)}), ("one", {"a": N(1), "v": N(3)}))
case("qr", ("square", {"a": WC(3)}), ("tall", {"a": N(5, 3)}), ("batch", {"a": N(2, 4, 2)}))
case("svd", ("square", {"a": N(3, 3)}), ("tall", {"a": N(4, 2), "full_matrices": False}),
     ("wide", {"a": N(2, 3), "full_matrices": False}),
     ("batch", {"a": N(2, 3, 2), "full_matrices": False}))
case("svdvals", ("tall", {"x": N(4, 3)}), ("batch-wide", {"x": N(2, 2, 3)}))
case("singular_ties", ("tied", {"s": Fixed([2.0, 2.0, 1.0, 0.0, 1e-300]), "sign": -1}),
     ("zeros", {"s": Fixed([2.0, 2.0, 1.0, 0.0, 1e-300]), "sign": 1}))
case("svd_reduced", ("square", {"x": N(3, 3), "full_matrices": True}),
     ("tall", {"x": N(3, 2), "full_matrices": False}))
case("searchsorted", ("left", {"a": Fixed([0.1, 0.5, 0.9]), "v": N(2, 3)}),
     ("right", {"a": Fixed([0.1, 0.5, 0.9]), "v": Fixed([0.5, 1.2]), "side": "right"}))
for _name in ("signbit", "isneginf", "isposinf", "isreal", "iscomplex", "fix", "spacing"):
    case(_name, ("special", {"x": Fixed([-1.5, 0.0, np.inf, -np.inf, 2.5])}), ("matrix", {"x": N(3, 4)}))
case("isclose", ("broadcast", {"a": N(3, 4), "b": N(4)}), ("tolerance", {"a": N(3), "b": N(3), "atol": 10.0}))
case("allclose", ("near", {"a": N(3, 4), "b": N(3, 4), "atol": 10.0}))
case("array_equal", ("different", {"a1": N(3), "a2": N(3)}),
     ("nan", {"a1": _NAN, "a2": _NAN, "equal_nan": True}))
case("array_equiv", ("broadcast", {"a1": N(3, 4), "a2": N(4)}))
case("isin", ("values", {"element": N(3, 4), "test_elements": N(5)}))
case("digitize", ("bins", {"x": N(3, 4), "bins": Fixed([-1.0, 0.0, 1.0])}),
     ("right", {"x": N(5), "bins": Fixed([-0.5, 0.5]), "right": True}))
for _name in ("nanargmax", "nanargmin"):
    case(_name, ("nan-axis", {"a": _NAN, "axis": 1}), ("flat", {"a": N(3, 4)}))
case("nan_arg_extreme", ("nan-axis", {"a": _NAN, "axis": 1, "keepdims": True, "largest": True}),
     ("flat", {"a": N(3, 4), "axis": None, "keepdims": False, "largest": False}))
case("digitize_sorted", ("decreasing", {"x": N(3, 4), "bins": Fixed([1.0, 0.0, -1.0]), "right": False}))
case("polyval_horner", ("matrix", {"p": N(4), "x": N(2, 3)}))
case("kron_blocks", ("ranks", {"a": N(2, 3), "b": N(4)}))
case("trapezoid_uniform", ("axis0", {"y": N(3, 4), "dx": 0.5, "axis": 0}))
case("convolve_full", ("longer-v", {"a": N(3), "v": N(5)}))
case("einsum_contract", ("three", {"subscripts": "ij,kj,k->i", "operands": (N(2, 3), N(4, 3), N(4))}))
case("assert_true", ("true", {"test": True, "message": "positive"}),
     ("numpy-bool", {"test": np.True_, "message": None}))


# ---------------------------------------------------------------- issue 29's second sweep (table_sweep2.py)
def IntN(lo, hi, *shape):
    """Random integers in [lo, hi) (ldexp's exponents)."""
    return Spec(lambda rng: rng.integers(lo, hi, shape), f"IntN({lo},{hi}){shape}")


case("ldexp", ("same", {"x1": N(3, 4), "x2": IntN(-3, 4, 3, 4)}),
     ("row", {"x1": N(3, 4), "x2": IntN(-3, 4, 4)}),
     ("row-left", {"x1": N(4), "x2": IntN(-3, 4, 3, 4)}),
     ("scalar-exponent", {"x1": N(2, 3), "x2": 3}))
case("modf", *_unary())
case("frexp_exponent", ("special", {"x": Fixed([0.0, 0.3, -5.0, np.inf, 1e-310])}))
case("pinv", ("tall", {"a": N(4, 3)}), ("wide", {"a": N(2, 3)}), ("square", {"a": WC(3)}),
     ("batch", {"a": N(2, 4, 2)}), ("rcond", {"a": N(3, 2), "rcond": 1e-10}))
