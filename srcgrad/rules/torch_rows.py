"""The eager runtime's own rows: torch's derivative formulas where torch's value at a kink
or a pole is not the compiler's convention.

Note [Eager rows at kinks and poles]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
`sg.Tensor` follows torch (spec/torch_semantics.md), compiled code follows the
conventions of docs/conventions.md. Away from kinks and poles the two agree; at them
they may not (torch's `atan2` gradient at the origin is 0, the compiler's is nan; torch's
`x ** y` has d/dy == -inf at x == 0, y < 0, the compiler's 0; torch 2.14's `clamp` passes
no gradient at a scalar bound, and splits a tensor bound's tie in half). The rows below
are torch's formulas, written as torch writes them (`grad * (exponent * self.pow(exponent
- 1))`, so a create_graph backward records the ops torch records and a saved-tensor hook
sees what torch's sees), and srcgrad.autograd.ops.apply runs one of them wherever the
eager runtime would run the compiler's row (`EAGER_ROWS` there). Compiled code never
reads them: they have no targets (NumPy's fmod is table_sweep's `fmod`, the same formulas).
docs/conventions.md ("Kinks and poles") lists every row's value at its kinks under
torch, under sg.Tensor and under compiled code, and tests/autograd/test_kinks_vs_torch.py
holds torch's observed values."""

from srcgrad.rules.core import RULES, defrule


def _ub(expr, p):
    return f"unbroadcast({expr}, xp.shape({p}))"


# torch's pow_backward_self / pow_backward_exponent (PowBackward0/1/2): d/dx is 0 where
# the exponent is 0 (also at x == 0), d/dy is 0 where x == 0 and y >= 0, else
# ans * log(x) (so -inf at x == 0, y < 0, and nan for x < 0).
_POW_X = "xp.where(y == 0, 0, {t} * (y * x ** (y - 1 + (y == 0))))"
# (y == 0) in the exponent: x ** 0 == 1 there, so the untaken branch's own derivative is
# finite and a second derivative of x ** 0 is 0, not 0 * inf at x == 0 (torch's is an
# undefined gradient, no graph)
_POW_Y = "{t} * xp.where((x == 0) * (y >= 0), 0, ans * xp.log(x))"
defrule("torch_power", "x, y", "x ** y", elementwise=True,
        vjp={"x": _ub(_POW_X.format(t="g"), "x"), "y": _ub(_POW_Y.format(t="g"), "y")},
        jvp={"x": _POW_X.format(t="x_t"), "y": _POW_Y.format(t="y_t")},
        doc="the eager `x ** y` (torch's pow): d/dx 0 where y == 0; d/dy at x == 0 is 0 for "
            "y >= 0 and ans * log(0) (-inf for y < 0) otherwise")

# torch's pow_backward for a number exponent 0: zeros_like(self), no graph (the row above
# would connect it to x with a zero derivative); ops._eager_row picks it for `x ** 0`.
# zeros_like(x), not of g: torch's node saves self (`_saved_self is x`, freed by a backward).
defrule("torch_power_zero", "x, y", "x ** y", elementwise=True,
        vjp={"x": "xp.zeros_like(x)"}, jvp={"x": "xp.zeros_like(x_t)"},
        doc="the eager `x ** 0` for a number 0 (torch's): gradient 0 with no graph")

# A number exponent (torch's pow(Tensor, Scalar), PowBackward0): no `where`, so the
# gradient of x ** 3 is a MulBackward0 of grad and 3 * x ** 2, as torch's. torch computes
# pow(x, 0.5) as sqrt(x) and pow(x, -0.5) as rsqrt(x) (helpers.torch_pow), its value and,
# through `c * x.pow(c - 1)`, its derivatives: x ** 0.5 at -0.0 has derivative
# 0.5 * rsqrt(-0.0) == -inf, x ** 1.5 at -inf 1.5 * sqrt(-inf) == nan. On Tensors (a
# create_graph backward) torch_pow is `x ** c` again, so each order is one PowBackward0.
defrule("torch_power_scalar", "x, y", "torch_pow(x, y)", elementwise=True,
        targets=("srcgrad.rules.helpers.torch_pow",),
        vjp={"x": "g * (y * torch_pow(x, y - 1 + (y == 0)))"},
        jvp={"x": "x_t * (y * torch_pow(x, y - 1 + (y == 0)))"},
        doc="the eager `x ** c` for a number c (torch's): c * x ** (c - 1), 0 for c == 0; "
            "x ** 0.5 is sqrt(x) and x ** -0.5 is 1 / sqrt(x), as torch computes them")

# torch's rsqrt (RsqrtBackward0): 1 / sqrt(x), derivative -0.5 * grad * result ** 3 (so
# +inf at -0.0, where -0.5 * x ** -1.5 is -inf).
defrule("torch_rsqrt", "x", "1 / xp.sqrt(x)", elementwise=True,
        vjp={"x": "-0.5 * g * ans ** 3"}, jvp={"x": "-0.5 * x_t * ans ** 3"},
        doc="the eager `rsqrt` (torch's): 1 / sqrt(x), derivative -0.5 * ans ** 3")

# torch's atan2_backward: 1 / (x*x + y*y) with the origin's inf replaced by 0, so the
# gradient at the origin is (y * 0, -x * 0) == 0; its forward mode divides (nan there).
_ATAN2_R = "xp.where(x * x + y * y == 0, 0, xp.reciprocal(x * x + y * y))"
defrule("torch_arctan2", "x, y", "xp.arctan2(x, y)", elementwise=True,
        vjp={"x": _ub(f"g * y * {_ATAN2_R}", "x"), "y": _ub(f"g * -x * {_ATAN2_R}", "y")},
        jvp={"x": "x_t * y / (x * x + y * y)", "y": "-y_t * x / (x * x + y * y)"},
        doc="the eager `atan2` (torch's): gradient 0 at the origin (forward mode: nan)")

# torch's HypotBackward0: grad * self / result (nan at the origin, 0 / 0).
defrule("torch_hypot", "x, y", "xp.hypot(x, y)", elementwise=True,
        vjp={"x": _ub("g * x / ans", "x"), "y": _ub("g * y / ans", "y")},
        jvp={"x": "x_t * x / ans", "y": "y_t * y / ans"},
        doc="the eager `hypot` (torch's): nan at the origin")

# torch 2.13's clamp (the reference, ../shared/spec: ClampBackward1 / clamp_backward_min_max,
# observed over every order of x, min, max): x gets g on the closed interval, min <= x <= max
# (a tie goes to x, not split); with Tensor bounds, min gets it where x < min < max, and max
# where x > max or max < min (the result is max). So where x < min == max no one gets it, as
# in torch. One bound: x where x >= min (x <= max), the bound where x is beyond it. (torch
# 2.14 passes it strictly inside and splits ties: docs/conventions.md.)
_CLAMP_X = ("(xp.where(x <= a_max, {t}, 0) if a_min is None else "
            "(xp.where(x >= a_min, {t}, 0) if a_max is None else "
            "xp.where(xp.logical_and(x >= a_min, x <= a_max), {t}, 0)))")
_CLAMP_MIN = ("(xp.where(x < a_min, {t}, 0) if a_max is None else "
              "xp.where(xp.logical_and(x < a_min, a_min < a_max), {t}, 0))")
_CLAMP_MAX = ("(xp.where(x > a_max, {t}, 0) if a_min is None else "
              "xp.where(xp.logical_or(x > a_max, a_max < a_min), {t}, 0))")
_CLAMP = {"x": _CLAMP_X, "a_min": _CLAMP_MIN, "a_max": _CLAMP_MAX}
# Its forward mode (clamp_jvp) is not the transpose: where(min > max, max_t, where(x < min,
# min_t, where(x > max, max_t, x_t))), and with one bound a tie goes to the bound.
_CLAMP_JVP = {
    "x": ("(xp.where(x < a_max, {t}, 0) if a_min is None else "
          "(xp.where(x > a_min, {t}, 0) if a_max is None else "
          "xp.where(xp.logical_and(a_min <= a_max, xp.logical_and(x >= a_min, x <= a_max)), {t}, 0)))"),
    "a_min": ("(xp.where(x <= a_min, {t}, 0) if a_max is None else "
              "xp.where(xp.logical_and(a_min <= a_max, x < a_min), {t}, 0))"),
    "a_max": ("(xp.where(x >= a_max, {t}, 0) if a_min is None else "
              "xp.where(xp.logical_or(a_min > a_max, x > a_max), {t}, 0))")}

defrule("torch_clip", "x, a_min=None, a_max=None", "xp.clip(x, a_min, a_max)",
        elementwise=True,
        vjp={p: _ub(_CLAMP[p].format(t="g"), p) for p in ("x", "a_min", "a_max")},
        jvp={p: _CLAMP_JVP[p].format(t=f"{p}_t") for p in ("x", "a_min", "a_max")},
        doc="the eager `clamp` with Tensor bounds (torch 2.13's): x gets the gradient on "
            "min <= x <= max; min where x < min < max; max where x > max or max < min")

defrule("torch_clamp_scalar", "x, a_min=None, a_max=None", "xp.clip(x, a_min, a_max)",
        elementwise=True,
        vjp={"x": _CLAMP_X.format(t="g")}, jvp={"x": _CLAMP_X.format(t="x_t")},
        doc="the eager `clamp` with number bounds (torch 2.13's): derivative 1 on the closed "
            "interval min <= x <= max (at a bound too), 0 outside")

# torch's SigmoidBackward0: grad * (1 - result) * result, so 0 at +-inf (the eager
# runtime's sigmoid used to be exp(-logaddexp(0, -x)), whose derivative is nan at -inf).
defrule("torch_sigmoid", "x", "xp.exp(-xp.logaddexp(0, -x))", elementwise=True,
        vjp={"x": "g * (1 - ans) * ans"}, jvp={"x": "x_t * (1 - ans) * ans"},
        doc="the eager `sigmoid` (torch's): derivative (1 - ans) * ans, 0 at +-inf")

# torch's fmod (C's fmod: the sign of x, x - y * trunc(x / y)); the eager `fmod` used to
# run `mod` (Python's %, the sign of y): fmod(-1, 2) was 1, torch's is -1. FmodBackward1:
# other's gradient -grad * trunc(x / y). The compiler's `fmod` (rules/table_sweep.py) has the
# same formulas; this row is the eager method's, with torch's node name (ops.py).
defrule("torch_fmod", "x, y", "xp.fmod(x, y)", elementwise=True,
        vjp={"x": _ub("g", "x"), "y": _ub("-g * trunc_divide(x, y)", "y")},
        jvp={"x": "x_t", "y": "-y_t * trunc_divide(x, y)"},
        doc="the eager `fmod` (torch's): the sign of x; d/dy = -trunc(x / y), one-sided at the jumps")

# torch's div(x, y, rounding_mode="trunc") (DivBackward2): fmod's d/dy. Its derivative is
# zeros, connected to x and y (ops.ZERO_DERIVATIVE_ROWS): a second derivative of fmod is 0,
# where trunc(x / y) would differentiate x / y (0 * inf or 0 / 0 at y == 0 or y == inf).
defrule("trunc_divide", "x, y", "trunc_divide(x, y)", targets=("srcgrad.rules.helpers.trunc_divide",),
        elementwise=True, nondiff=True,
        doc="trunc(x / y), torch's div(rounding_mode='trunc'): derivative 0 (fmod's d/dy)")

# torch's LogaddexpBackward0: grad / (1 + exp(other - self)): 1 at x == inf (the
# compiler's exp(x - ans) is exp(inf - inf), nan).
defrule("torch_logaddexp", "x, y", "xp.logaddexp(x, y)", elementwise=True,
        vjp={"x": _ub("g / (1 + xp.exp(y - x))", "x"), "y": _ub("g / (1 + xp.exp(x - y))", "y")},
        jvp={"x": "x_t / (1 + xp.exp(y - x))", "y": "y_t / (1 + xp.exp(x - y))"},
        doc="the eager `logaddexp` (torch's): d/dx = 1 / (1 + exp(y - x)), 1 at x == inf")

# ---------------------------------------------------------------- second order at kinks
# (issue 28: the first-order values above already matched; these rows make the create_graph
# backward's graph torch's too, observed in tests/autograd/test_kinks_vs_torch.py)

# torch's relu backward is threshold_backward(grad, result, 0), whose derivative w.r.t.
# result is zeros_like(grad): the gradient is connected to x with a zero derivative, so a
# double backward gives zeros, not an unused (None) input. Where ans <= 0 it is 0 itself,
# so `where(ans <= 0, ans, g)` is that connected zero at no extra cost: its derivative
# reaches x through relu's own backward only where ans <= 0, which passes nothing there (an
# exact 0). `ans <= 0` (not `ans > 0`) passes g where ans is nan, as threshold_backward does.
defrule("torch_relu", "x", "xp.maximum(x, 0)", elementwise=True,
        vjp={"x": "xp.where(ans <= 0, ans, g)"},
        jvp={"x": "xp.where(ans > 0, x_t, 0)"},
        doc="the eager `relu` (torch's threshold_backward): relu'(0) = 0, a zero second "
            "derivative")

# torch's DivBackward0: other's gradient -grad * ((self / other) / other), whose
# derivative at y == 0 differs from the compiler's `-(g / y) * x / y` (nan, not inf).
defrule("torch_divide", "x, y", "x / y", elementwise=True,
        vjp={"x": _ub("g / y", "x"), "y": _ub("-g * ((x / y) / y)", "y")},
        jvp={"x": "x_t / y", "y": "-y_t * ans / y"},
        doc="the eager `x / y` (torch's DivBackward0 formulas)")

# torch's var_backward over every element with no degree of freedom left (n <= correction):
# grad * where(x == mean, nan, inf), which reads x only through a comparison (no graph);
# ops._eager_row picks this row for those shapes only.
defrule("torch_var_nodof", "x, axis=None, ddof=0, keepdims=False",
        "xp.var(x, axis=axis, ddof=ddof, keepdims=keepdims)",
        # (0 * inf is the nan: formulas name constants, and xp.nan is not one of them)
        vjp={"x": "g * xp.where(x == xp.mean(x), 0 * xp.inf, xp.inf)"},
        jvp={"x": RULES["var"].jvp["x"]},
        doc="the eager `var` of n <= correction elements (torch's): nan where x equals the "
            "mean, else inf, with no graph")

# torch's norm_backward, p == 2: grad * (self / norm).masked_fill_(norm == 0, 0) (the
# compiler divides by where(norm == 0, 1, norm): finite second order at 0, torch nan);
# p < 1: sgn(self) * |self| ** (p - 1) masked to 0 at self == 0, times grad * norm ** (1 - p).
_NG = "expand_reduced(g, xp.shape(x), axis, keepdims)"
_NA = "expand_reduced(ans, xp.shape(x), axis, keepdims)"
_NV = "(x if ord is None or ord == 'fro' else vector_only(x, axis, ord))"
defrule("torch_norm2", "x, ord=None, axis=None, keepdims=False",
        "xp.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)",
        vjp={"x": f"{_NG} * xp.where({_NA} == 0, 0, {_NV} / {_NA})"},
        jvp={"x": f"xp.sum(x_t * xp.where({_NA} == 0, 0, {_NV} / {_NA}), axis=axis, "
                  "keepdims=keepdims)"},
        doc="the eager 2-norm (torch's norm_backward): 0 at x == 0, nan at second order")
defrule("torch_norm_small_p", "x, ord=None, axis=None, keepdims=False",
        "xp.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)",
        vjp={"x": "xp.sign(vector_only(x, axis, ord)) * xp.where(x == 0, 0, xp.abs(x) ** "
                  f"(ord - 1)) * {_NG} * {_NA} ** (1 - ord)"},
        jvp={"x": "xp.sum(x_t * xp.sign(vector_only(x, axis, ord)) * xp.where(x == 0, 0, "
                  f"xp.abs(x) ** (ord - 1)) * {_NA} ** (1 - ord), axis=axis, keepdims=keepdims)"},
        doc="the eager p-norm for p < 1 (torch's norm_backward): 0 at a zero entry")

# torch's softmax and log_softmax are one op each (SoftmaxBackward0: _softmax_backward_data,
# grad_output's projection off the output; LogSoftmaxBackward0: grad - exp(out) * sum(grad)).
# As compositions of sub/exp/sum/div/log the eager runtime recorded 5-12 nodes a call
# (4-8x torch's time at batch 8); one row each records one. The shift by the max along
# `axis` keeps exp finite; it is a constant of the value, not differentiated, as torch's
# (helpers.softmax_along/log_softmax_along compute it once).
defrule("torch_softmax", "x, axis=-1", "softmax_along(x, axis)",
        targets=("srcgrad.rules.helpers.softmax_along",),
        vjp={"x": "ans * (g - xp.sum(g * ans, axis=axis, keepdims=True))"},
        jvp={"x": "ans * (x_t - xp.sum(x_t * ans, axis=axis, keepdims=True))"},
        doc="the eager softmax along one axis, one node (torch's SoftmaxBackward0)")
defrule("torch_log_softmax", "x, axis", "log_softmax_along(x, axis)",
        targets=("srcgrad.rules.helpers.log_softmax_along",),
        vjp={"x": "g - xp.exp(ans) * xp.sum(g, axis=axis, keepdims=True)"},
        jvp={"x": "x_t - xp.sum(xp.exp(ans) * x_t, axis=axis, keepdims=True)"},
        doc="the eager log_softmax along one axis, one node (torch's LogSoftmaxBackward0)")

# torch's nll_loss, reduction='mean', no class weights (NllLossBackward0): -mean of the
# picked log-probabilities over the targets kept. `picked` is True at (n, target[n]) for
# each kept target (srcgrad.nn.functional.nll_loss makes it), `count` how many (x's
# dtype). A `where`, not a product with a one-hot: a -inf log-probability off the
# target (a masked logit) must not make 0 * -inf = nan; and not take_along_axis, whose
# backward is a scatter (add.at): 2-3x the time of the whole row at small batches.
# With no target kept the value is 0/0 = nan and the gradient 0, as torch's (the
# backward divides by at least 1). cross_entropy is this after torch_log_softmax: two
# nodes a call, as torch records.
defrule("torch_nll_loss", "x, picked, count",
        "-(xp.sum(xp.where(picked, x, 0)) / count)",  # "-(": the docs read "-x" as an operator
        vjp={"x": "xp.where(picked, -g / xp.maximum(count, 1), 0)"},
        jvp={"x": "-(xp.sum(xp.where(picked, x_t, 0)) / count)"},
        doc="the eager nll_loss's common case (mean, no weight), one node (torch's "
            "NllLossBackward0)")

# torch's nll_loss of (N, C) input with class weights or reduction 'sum'/'none', one node
# as torch's (NllLossBackward0): `wpicked` is weight[target[n]] at (n, target[n]) (0 where
# ignored), `denom` the sum of those weights ('mean'). As torch, the weight is a constant.
_NLL_TERMS = "xp.where(picked, x * wpicked, 0)"
_NLL_G = ("(g / denom if reduction == 'mean' else xp.expand_dims(g, -1) if reduction == 'none' "
          "else g)")
defrule("torch_nll_weighted", "x, picked, wpicked, denom, reduction",
        f"-(xp.sum({_NLL_TERMS}) / denom) if reduction == 'mean' else "
        f"-xp.sum({_NLL_TERMS}, axis=-1) if reduction == 'none' else -xp.sum({_NLL_TERMS})",
        vjp={"x": f"xp.where(picked, -{_NLL_G} * wpicked, 0)"},
        jvp={"x": "-(xp.sum(xp.where(picked, x_t * wpicked, 0)) / denom) if reduction == 'mean' "
                  "else -xp.sum(xp.where(picked, x_t * wpicked, 0), axis=-1) if reduction == 'none' "
                  "else -xp.sum(xp.where(picked, x_t * wpicked, 0))"},
        doc="the eager nll_loss of (N, C) input with class weights or reduction 'sum'/'none', "
            "one node (torch's NllLossBackward0)")

# torch's prod_backward and cumprod_backward (ProdBackward0/1, CumprodBackward0): no zero
# in x, the gradient divides the result by x (nan at an inf entry: inf / inf); with a zero,
# products of the others; one element passes the cotangent with no graph. Which formula
# runs depends on x's values and on grad mode (helpers.torch_prod_bar/torch_cumprod_bar:
# a create_graph backward runs them on Tensors, recording torch's ops, so the second
# derivative is torch's). The compiler's prod/cumprod never divide (Note [Zero-safe
# products]); the eager rows keep their forward-mode formulas.
defrule("torch_prod_bar", "g, x, ans, axis, keepdims", "torch_prod_bar(g, x, ans, axis, keepdims)",
        targets=("srcgrad.rules.helpers.torch_prod_bar",), nondiff=True,
        doc="the eager prod's backward (torch's prod_backward); differentiated by running on "
            "Tensors in a create_graph backward, never by the compiler")
defrule("torch_cumprod_bar", "g, x, ans, axis", "torch_cumprod_bar(g, x, ans, axis)",
        targets=("srcgrad.rules.helpers.torch_cumprod_bar",), nondiff=True,
        doc="the eager cumprod's backward (torch's cumprod_backward); differentiated by "
            "running on Tensors in a create_graph backward, never by the compiler")
defrule("torch_prod", "x, axis=None, keepdims=False", "xp.prod(x, axis=axis, keepdims=keepdims)",
        vjp={"x": "torch_prod_bar(g, x, ans, axis, keepdims)"}, jvp={"x": RULES["prod"].jvp["x"]},
        doc="the eager `prod` (torch's): g * ans / x without zeros (nan at an inf entry), the "
            "products of the others with them")
defrule("torch_cumprod", "x, axis=None", "xp.cumprod(x, axis=axis)",
        vjp={"x": "torch_cumprod_bar(g, x, ans, axis)"}, jvp={"x": RULES["cumprod"].jvp["x"]},
        doc="the eager `cumprod` (torch's): reversed_cumsum(ans * g) / x without zeros, "
            "products with them; one element passes g")
