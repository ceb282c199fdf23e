"""exp, tanh, sin and cos of one float64 that a compiler can vectorize, for numba's fused loops.

Note [Vectorizable math for numba]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
numba compiles `np.tanh(v)` of a number to a call of libm's scalar `tanh` (15 ns a value
here), and a call stops LLVM vectorizing the loop around it, so a fused elementwise chain
of transcendental functions (Note [Fused elementwise chains] in srcgrad.pipeline.fusion)
ran no faster compiled than on NumPy, whose loops call SIMD code, and 4.5x slower than
jax.jit, which emits its own polynomials. pip's numba has no SVML (its llvmlite is not
patched for it). So a fused loop calls the functions below instead: the textbook
algorithms, written as straight-line float arithmetic and selects, which LLVM inlines
and vectorizes (AVX2: four values at a time):

* exp: x = k ln2 + r with |r| <= ln2/2 (Cody-Waite: ln2 in two parts, the first with
  trailing zeros so that k ln2_hi is exact), exp(r) - 1 by its Taylor series to r**13
  (the truncation is below 5e-18 of the result), times 2**k as two table entries (so
  that neither overflows where the result does not, and subnormal results round once);
* tanh(x) = t / (t + 2) with t = expm1(2|x|) (no cancellation near 0), its sign copied
  from x, and |x| capped at 20, where tanh rounds to 1;
* sin and cos: x = n pi/2 + r, pi/2 in three parts of 33 bits (fdlibm's medium-range
  reduction: exact products for |n| < 2**20), r carried as a double-double, then fdlibm's
  kernels on [-pi/4, pi/4] and the quadrant's select. Past |x| = 1e5 the reduction
  would lose bits, so the loop notes such an argument and runs again with libm's
  (`fused_lines` writes both loops); nan and inf give nan as libm does.

Each is within 2 ulp of NumPy's own function (checked on 250,000 points from subnormals
to the limits, multiples of pi/2 included: tests/test_numba_math.py), and a variant's
first call still compares the whole result with NumPy's (Note [The numba backend]). The
kernels are plain Python over floats, so the tests run them without numba, and their
source is written into the module numba compiles (`kernel_source`), which keeps a
module standalone and its cache key (the module's text) honest. Where a module calls
them its functions are compiled with `fastmath={"contract"}`: LLVM may fuse a multiply
and an add into one FMA, one rounding instead of two (more accurate, and 1.4x faster on
the chain); no other fast-math assumption (no reassociation, nans and infs kept).
"""

from __future__ import annotations

import inspect
import math
import re

import numpy

SIMD_LOG2E = 1.4426950408889634
SIMD_LN2_HI = 6.93147180369123816490e-01  # ln 2 in two parts (fdlibm's): k * SIMD_LN2_HI is exact
SIMD_LN2_LO = 1.90821492927058770002e-10
SIMD_SHIFT = 6755399441055744.0  # 1.5 * 2**52: (v + SHIFT) - SHIFT is v rounded to an integer
SIMD_POW2_LO = -560
SIMD_POW2 = numpy.ldexp(1.0, numpy.arange(SIMD_POW2_LO, 540))  # 2**k, exact
SIMD_TWO_OVER_PI = 0.63661977236758134308
SIMD_PIO2_1 = 1.57079632673412561417e+00  # pi/2 in three parts of 33 bits, and the rest (fdlibm's)
SIMD_PIO2_2 = 6.07710050630396597660e-11
SIMD_PIO2_3 = 2.02226624871116645580e-21
SIMD_PIO2_3T = 8.47842766036889956997e-32
TRIG_LIMIT = 1e5  # |x| beyond which sin and cos are libm's


def _simd_expm1_poly(r):
    """exp(r) - 1 for |r| <= ln(2)/2: Taylor to r**13."""
    p = 1.6059043836821613e-10
    p = p * r + 2.08767569878681e-09
    p = p * r + 2.505210838544172e-08
    p = p * r + 2.755731922398589e-07
    p = p * r + 2.7557319223985893e-06
    p = p * r + 2.48015873015873e-05
    p = p * r + 0.0001984126984126984
    p = p * r + 0.001388888888888889
    p = p * r + 0.008333333333333333
    p = p * r + 0.041666666666666664
    p = p * r + 0.16666666666666666
    p = p * r + 0.5
    p = p * r + 1.0
    return p * r


def simd_exp(x):
    """exp(x) of a float64: within 1 ulp of libm's, nan and the overflows as libm."""
    xc = min(max(x, -746.0), 710.0)  # beyond: 0 and inf, through 2**k below
    xc = xc if xc == xc else 0.0  # nan: any number in range (the result is x)
    kf = (xc * SIMD_LOG2E + SIMD_SHIFT) - SIMD_SHIFT
    r = (xc - kf * SIMD_LN2_HI) - kf * SIMD_LN2_LO
    q = _simd_expm1_poly(r)
    k = int(kf)
    a = k >> 1  # 2**k as 2**a * 2**(k - a): neither overflows nor underflows alone
    y = (1.0 + q) * SIMD_POW2[a - SIMD_POW2_LO] * SIMD_POW2[k - a - SIMD_POW2_LO]
    return y if x == x else x


def _simd_expm1_tanh(v):
    """exp(v) - 1 for 0 <= v <= 40 (tanh's range): 2**k q + (2**k - 1), with no cancellation."""
    kf = (v * SIMD_LOG2E + SIMD_SHIFT) - SIMD_SHIFT
    r = (v - kf * SIMD_LN2_HI) - kf * SIMD_LN2_LO
    q = _simd_expm1_poly(r)
    s = SIMD_POW2[int(kf) - SIMD_POW2_LO]
    return s * q + (s - 1.0)


def simd_tanh(x):
    """tanh(x) of a float64: within 2 ulp of libm's."""
    a = min(abs(x), 20.0)  # tanh(20) rounds to 1.0
    a = a if a == a else 0.0
    t = _simd_expm1_tanh(2.0 * a)
    y = math.copysign(t / (t + 2.0), x)
    return y if x == x else x


def _simd_sin_kernel(x, y):
    """sin(x + y) for |x| <= pi/4, y the tail of x (fdlibm's __kernel_sin)."""
    z = x * x
    v = z * x
    r = 8.33333333332248946124e-03 + z * (-1.98412698298579493134e-04 + z * (
        2.75573137070700676789e-06 + z * (-2.50507602534068634195e-08 + z * 1.58969099521155010221e-10)))
    return x - ((z * (0.5 * y - v * r) - y) - v * -1.66666666666666324348e-01)


def _simd_cos_kernel(x, y):
    """cos(x + y) for |x| <= pi/4 (fdlibm's __kernel_cos)."""
    z = x * x
    r = z * (4.16666666666666019037e-02 + z * (-1.38888888888741095749e-03 + z * (
        2.48015872894767294178e-05 + z * (-2.75573143513906633035e-07 + z * (
            2.08757232129817482790e-09 + z * -1.13596475577881948265e-11)))))
    hz = 0.5 * z
    w = 1.0 - hz
    return w + (((1.0 - w) - hz) + (z * r - x * y))


def _simd_reduced(x):
    """(hi, lo, q): x - n pi/2 as the double-double hi + lo, and n's quadrant as -2..2."""
    x = 0.0 if abs(x) > TRIG_LIMIT else x  # beyond: the loop runs libm's instead (nan stays)
    nf = (x * SIMD_TWO_OVER_PI + SIMD_SHIFT) - SIMD_SHIFT
    r1 = x - nf * SIMD_PIO2_1  # exact
    w1 = nf * SIMD_PIO2_2
    r2 = r1 - w1
    w2 = nf * SIMD_PIO2_3
    r = r2 - w2
    tail = ((r1 - r2) - w1) + ((r2 - r) - w2) - nf * SIMD_PIO2_3T
    hi = r + tail
    return hi, (r - hi) + tail, nf - 4.0 * ((0.25 * nf + SIMD_SHIFT) - SIMD_SHIFT)


def simd_sin(x):
    """sin(x) of a float64 with |x| <= TRIG_LIMIT (or nan): within 1 ulp of libm's."""
    hi, lo, q = _simd_reduced(x)
    s, c = _simd_sin_kernel(hi, lo), _simd_cos_kernel(hi, lo)
    y = s if q == 0.0 else c if q == 1.0 else -c if q == -1.0 else -s
    return y if x != 0.0 else x  # sin(-0.0) is -0.0


def simd_cos(x):
    """cos(x) of a float64 with |x| <= TRIG_LIMIT (or nan): within 1 ulp of libm's."""
    hi, lo, q = _simd_reduced(x)
    s, c = _simd_sin_kernel(hi, lo), _simd_cos_kernel(hi, lo)
    return c if q == 0.0 else -s if q == 1.0 else s if q == -1.0 else -c


KERNELS = {"exp": simd_exp, "tanh": simd_tanh, "sin": simd_sin, "cos": simd_cos}
_NEEDS = {"simd_exp": (_simd_expm1_poly,), "simd_tanh": (_simd_expm1_poly, _simd_expm1_tanh),
          "simd_sin": (_simd_reduced, _simd_sin_kernel, _simd_cos_kernel),
          "simd_cos": (_simd_reduced, _simd_sin_kernel, _simd_cos_kernel)}
_CALL = re.compile(r"\bxp\.(exp|tanh|sin|cos)\((\w+)\)")
BEYOND = "_trig_beyond"  # the fused loop's flag: an argument of sin/cos past TRIG_LIMIT
NAMES = tuple(_NEEDS)  # the kernels' names in a module that calls them
MARKER = "# Note [Vectorizable math for numba]"  # the first line of kernel_source's block


def calls_kernels(names) -> bool:
    """Whether a module's text (or its globals) calls the kernels: numba compiles it
    with FMA contraction (the Note)."""
    if isinstance(names, str):
        return any(re.search(rf"\b{name}\(", names) for name in NAMES)
    return any(name in names for name in NAMES)


def vectorized(lines: list) -> tuple:
    """(`lines` with each `xp.exp/tanh/sin/cos(v)` of a number calling the kernel, whether a
    sin or cos was among them): each such line is followed by the update of BEYOND."""
    out, trig, noted = [], False, set()
    for line in lines:
        calls = _CALL.findall(line) if not line.lstrip().startswith("#") else ()
        if not calls:
            out.append(line)
            continue
        out.append(_CALL.sub(lambda m: f"simd_{m.group(1)}({m.group(2)})", line))
        indent = line[:len(line) - len(line.lstrip())]
        for name, arg in calls:
            if name in ("sin", "cos") and arg not in noted:
                trig = True
                noted.add(arg)
                out.append(f"{indent}{BEYOND} = {BEYOND} | (abs({arg}) > {TRIG_LIMIT:g})")
    return out, trig


def kernel_source(text: str) -> str:
    """The source of the kernels `text` calls, each jitted inline where numba compiles a
    caller (and plain Python elsewhere); '' where it calls none."""
    used = [name for name in NAMES if re.search(rf"\b{name}\(", text)]
    if not used:
        return ""
    functions = []
    for name in used:
        for f in _NEEDS[name] + (globals()[name],):
            if f not in functions:
                functions.append(f)
    constants = [f"{k} = {v!r}" for k, v in globals().items()
                 if k.startswith("SIMD_") and k != "SIMD_POW2" or k == "TRIG_LIMIT"]
    lines = [f"{MARKER} (srcgrad.codegen.numba_math): exp, tanh, sin",
             "# and cos as float arithmetic numba's LLVM vectorizes; within 2 ulp of libm's.",
             "import math", "", "from numba.extending import register_jitable", "", *constants,
             f"SIMD_POW2 = xp.ldexp(1.0, xp.arange(SIMD_POW2_LO, {SIMD_POW2_LO + len(SIMD_POW2)}))"]
    for f in functions:
        lines += ["", "", '@register_jitable(inline="always")', inspect.getsource(f).rstrip()]
    return "\n".join(lines) + "\n"
