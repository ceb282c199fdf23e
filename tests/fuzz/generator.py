"""A seeded generator of random NumPy programs over the README's surface.

Why our own generator over `random.Random(seed)` instead of hypothesis strategies: a seed
names a program exactly (the slice and `KNOWN_FAILURES` are lists of ints that mean the
same program on every machine and version of hypothesis), generation needs no test
runner, and a failing program is shrunk as Python *source* (tests/fuzz/shrink.py works on
the AST), which gives readable repros whatever produced them.

The grammar is typed by shape: every expression is generated for a target shape (a
tuple; `()` is a NumPy scalar) from variables whose shapes are known, so every program
runs in NumPy. Python floats have the type FLOAT. One small function per construct:
`e_*` builds an expression, `s_*` a statement. Inputs stay in the domains of the
functions (`log(e * e + 1.0)`, `exp(tanh(e))`), loops are short, `while` loops carry a
counter, so programs terminate and stay finite; kinks (abs, max, where, branches on
data) are allowed: the oracle discards points where the two finite-difference step
sizes disagree.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from tests.fuzz import boundary, surface_forms

FLOAT = "float"  # the type of a Python float
DIMS = (1, 2, 3, 4)


@dataclass
class Program:
    seed: int
    source: str
    entry: str
    args: list  # ARGS: [("array", shape) | ("float",) | ("tuple"|"list", [shapes]) | ("dict", [(k, shape)])]
    output: str  # "scalar" | "array" | "tuple"
    features: set = field(default_factory=set)


@dataclass
class Scope:
    """What the code being generated can read: names and their types."""

    vars: dict = field(default_factory=dict)  # name -> shape tuple or FLOAT
    ints: dict = field(default_factory=dict)  # loop index name -> exclusive bound
    seqs: dict = field(default_factory=dict)  # name -> list of element shapes (tuple/list)
    lists: dict = field(default_factory=dict)  # name -> element shape (homogeneous, grows)
    dicts: dict = field(default_factory=dict)  # name -> {key: shape}
    calls: dict = field(default_factory=dict)  # closure/lambda name -> (shape, nargs)

    def copy(self) -> Scope:
        return Scope(dict(self.vars), dict(self.ints), dict(self.seqs), dict(self.lists),
                     {k: dict(v) for k, v in self.dicts.items()}, dict(self.calls))


def size(shape) -> int:
    return math.prod(shape)


def paren(e: str) -> str:
    """e, parenthesised unless it is a (dotted) name: ready for `.attr` and `[...]`."""
    return e if e.replace(".", "").replace("_", "").isalnum() and not e[0].isdigit() else f"({e})"


UNARY = ["np.sin({0})", "np.cos({0})", "np.tanh({0})", "np.exp(np.tanh({0}))",
         "np.log({0} * {0} + 1.0)", "np.sqrt({0} * {0} + 1.0)", "({0}) ** 2", "({0}) ** 3",
         "-({0})", "np.abs({0})", "np.maximum({0}, 0.0)", "np.square({0})",
         "1.0 / (1.0 + np.exp(-({0})))", "np.arctan({0})", "np.log1p(np.exp(np.tanh({0})))",
         "np.clip({0}, -1.0, 1.0)", "np.exp(-({0}) * ({0}))"]
# Issue 29's sweep rows (srcgrad/rules/table_sweep.py), each spelled as a function of one
# expression e of the shape being built (its text repeated where a row takes two arrays),
# and each away from its kinks and jumps on the fuzzer's data (fmod of a tanh by 1.5 never
# jumps). Drawn from their own stream in place of a UNARY pick (Note [Idiom spellings]):
# a seed's program keeps its structure and its other spellings. Only the rows the shape
# s fits are offered.
def sweep_unary(e: str, s: tuple):
    forms = ["np.sinc({0})", "np.copysign({0}, 1.5)", "np.fmod(np.tanh({0}), 1.5)",
             "np.nan_to_num({0})", "(np.heaviside({0}, 0.5) * {0})",
             "np.polyval(np.array([0.5, -1.0, 2.0]), {0})",
             # compositions (srcgrad/rules/compositions.py)
             "np.linspace({0}, 1.5, 3)[1]", "(np.real({0}) + np.imag({0}))",
             "np.select([({0}) > 0.0], [({0}) * 2.0], {0})",
             "np.interp({0}, np.array([-1.0, 0.0, 1.0]), np.array([0.5, -0.3, 1.2]))",
             "(({0}) * np.astype(np.searchsorted(np.array([-0.5, 0.5]), {0}), 'float64'))",
             # integer and boolean results (nondiff rows), used as valid Array-API code
             # uses them (a where's condition, a cast): never a bool times a float
             "np.where(np.signbit({0}), {0}, 0.5 * {0})",
             "np.where(np.isneginf({0}), 0.0, np.where(np.isposinf({0}), 1.0, {0}))",
             "np.where(np.isreal({0}), {0}, 0.0)", "np.where(np.iscomplex({0}), 0.0, {0})",
             "(({0}) * np.fix({0}))", "(({0}) + np.spacing({0}))",
             "np.where(np.isclose({0}, 0.5), 0.0, {0})",
             "np.where(np.allclose({0}, 0.0), 0.0, {0})",
             "np.where(np.array_equal({0}, {0}), {0}, 0.0)",
             "np.where(np.array_equiv({0}, {0}), {0}, 0.0)",
             "np.where(np.isin({0}, np.array([0.5])), 0.0, {0})",
             "(({0}) * np.astype(np.digitize({0}, np.array([-0.5, 0.5])), 'float64'))",
             "(({0}) * (np.nanargmax({0}) - np.nanargmin({0})))",
             # issue 29's second sweep (srcgrad/rules/table_sweep2.py, compositions.py)
             "np.modf({0})[0]", "(np.modf({0})[1] * {0})", "np.ldexp({0}, 2)",
             "np.frexp({0})[0]", "np.divmod({0}, 0.7)[1]", "(np.i0({0}) * 0.1)",
             "np.geomspace(np.exp({0}), 2.0, 3)[1]", "np.logspace({0}, 1.0, 3, base=2.0)[1]",
             "np.fmax({0}, 0.2)", "np.fmin({0}, -0.1)", "(np.ptp({0}) * {0})"]
    if s:
        forms += ["np.nancumsum({0}, axis=0)", "np.cumulative_sum({0}, axis=0)"]
    if len(s) == 2:
        forms += ["np.rot90({0}, 2)", "np.rollaxis({0}, 1).T",
                  "np.block([[({0})[:, :1], ({0})[:, 1:]]])",
                  "(np.linalg.norm({0}, 'nuc', axis=(0, 1)) * {0})"]
        if s[1] >= 2:
            forms.append("np.gradient({0}, axis=1)")
    if len(s) == 2 and s[0] == s[1]:
        n = s[0]
        forms += ["np.rot90({0})", f"np.linalg.pinv(({{0}}) * 0.3 + 2.0 * np.eye({n}))",
                  f"np.linalg.lstsq(({{0}}) * 0.3 + 2.0 * np.eye({n}), {{0}})[0]",
                  f"(np.linalg.cond(({{0}}) * 0.3 + 2.0 * np.eye({n})) * {{0}})"]
    if len(s) == 1:
        forms.append("np.lib.stride_tricks.sliding_window_view({0}, 1, axis=0)[:, 0]")
        if s[0] >= 2:
            forms += ["np.gradient({0}, 0.5, axis=0)", "np.correlate({0}, ({0})[:2], 'same')"]
    if len(s) == 2:
        forms += ["np.kron(({0})[:, :1], ({0})[:1, :])",
                  "(np.meshgrid(({0})[0], ({0})[:, 0])[0] * ({0}))"]
    if len(s) == 2 and s[0] >= s[1]:  # Q of a well-conditioned tall matrix: shape s
        forms += [f"np.linalg.qr(({{0}}) * 0.3 + 2.0 * np.eye({s[0]}, {s[1]}))[0]",
                  "(({0}) * np.linalg.svdvals({0}))"]
    if len(s) == 2 and s[0] == s[1]:
        forms += ["np.linalg.matrix_power(({0}) * 0.3, 3)", "np.linalg.svd({0})[0]",
                  f"np.linalg.qr(({{0}}) * 0.3 + 2.0 * np.eye({s[0]}))[1]"]
        if s[0] >= 2:
            forms += ["np.cov({0})", "np.corrcoef({0})"]
    if s:
        forms.append("np.concatenate(np.array_split({0}, 2))")
    if len(s) == 2:
        forms.append("np.concatenate(np.vsplit({0}, 1) + np.hsplit({0}, 1), axis=0)[:" + str(s[0]) + "]")
    if len(s) == 1:
        forms += ["np.kron({0}, ({0})[:1])", "np.ediff1d(np.concatenate(({0}, ({0})[:1])))"]
        if s[0] >= 2:
            forms += ["np.convolve(({0})[1:], ({0})[:2])", "np.append(({0})[1:], ({0})[:1])"]
    if s and s[-1] == 3:
        forms.append("np.cross({0}, np.roll({0}, 1, axis=-1))")
    return forms


MATH_UNARY = ["math.sin({0})", "math.cos({0})", "math.tanh({0})", "math.exp(math.tanh({0}))",
              "math.sqrt({0} * {0} + 1.0)", "math.log({0} * {0} + 1.0)", "{0} ** 2"]
BINARY = ["({a} + {b})", "({a} - {b})", "({a} * {b})", "({a} / ({b} * {b} + 1.0))",
          "np.maximum({a}, {b})", "np.minimum({a}, {b})", "np.where({a} > {b}, {a}, {b} * 0.5)",
          "np.add({a}, {b})", "np.multiply({a}, {b})"]
REDUCE_AXIS = ["np.sum({e}, axis={k})", "({e}).sum(axis={k})", "np.mean({e}, axis={k})",
               "np.max({e}, axis={k})", "({e}).min(axis={k})", "np.prod(np.tanh({e}), axis={k})"]
SWEEP_REDUCE_ALL = ["np.nansum({e})", "np.nanmean({e})", "np.nanmax({e})", "np.nanmin({e})",
                    "np.median({e})", "np.quantile({e}, 0.3)", "np.percentile({e}, 70.0)",
                    "np.nanvar({e})", "np.nanmedian({e})", "np.nanquantile({e}, 0.6)",
                    "np.linalg.vector_norm({e})"]
SWEEP_REDUCE_AXIS = ["np.nansum({e}, axis={k})", "np.nanmean({e}, axis={k})",
                     "np.nanmax({e}, axis={k})", "np.nanmin({e}, axis={k})",
                     "np.trapezoid({e}, axis={k})", "np.median({e}, axis={k})",
                     "np.quantile({e}, 0.3, axis={k})", "np.nanstd({e}, axis={k})",
                     "np.nanmedian({e}, axis={k})", "np.ptp({e}, axis={k})",
                     "np.vecdot({e}, {e}, axis={k})"]
REDUCE_ALL = ["np.sum({e})", "({e}).sum()", "np.mean({e})", "({e}).mean()", "np.max({e})",
              "np.min({e})", "np.linalg.norm({e})", "np.sum(np.exp(np.tanh({e})))"]

# custom Functions: (forward of x, derivative in terms of x, derivative in terms of the output y)
FUNCTION_FORMULAS = [
    ("x ** 3", "3.0 * x * x", None),
    ("np.sin(x)", "np.cos(x)", None),
    ("np.tanh(x)", "1.0 - np.tanh(x) ** 2", "1.0 - y * y"),
    ("np.exp(np.tanh(x))", "np.exp(np.tanh(x)) * (1.0 - np.tanh(x) ** 2)", None),
    ("0.5 * x * x", "x", None),
    ("1.0 / (1.0 + np.exp(-x))", "np.exp(-x) / (1.0 + np.exp(-x)) ** 2", "y * (1.0 - y)"),
]


class Generator:
    """One program: `Generator(seed).program()`."""

    def __init__(self, seed: int, max_stmts: int = 6, max_depth: int = 3, boundary_share: float = 0.0):
        self.seed = seed
        # issue 28's index objects and call forms (tests/fuzz/boundary.py), drawn only where
        # the share is set (Note [Boundary share]): a seventh stream
        self.boundary = random.Random(seed ^ 0xB0DA28)
        self.boundary_share = boundary_share
        self.rng = random.Random(seed)
        # Note [Idiom spellings]: other spellings of a construct (np.hstack for a
        # concatenate, np.add.at for a `+=` write, ...) are drawn from their own stream,
        # so a seed's program keeps its structure whatever spellings are added.
        self.idioms = random.Random(seed ^ 0x1D1011)
        # sg.grad of a helper and functools.partial inside f (issue 11, H2): a third stream
        self.inside = random.Random(seed ^ 0x2E57ED)
        # f's own defaulted parameter, which the oracle never passes: a fourth stream
        self.signature = random.Random(seed ^ 0x5167DE)
        # sg.jvp / sg.vjp of a helper inside f, its defaults left out: a fifth stream
        self.transforms_inside = random.Random(seed ^ 0x7E57ED)
        # issue 29's sweep rows in place of a unary (sweep_unary): a sixth stream
        self.sweep = random.Random(seed ^ 0x5EE29)
        # srcgrad's hidden names (a loop's break flag, an unrolled element, the iterated
        # rows) are spellings a program may use too (fuzz seed 2684023): an eighth stream
        # spells a few variables so
        self.hidden = random.Random(seed ^ 0x41DDE4)
        # code after a loop reading the names its body bound and its target, as Python
        # keeps them (Note [Names a loop binds] in srcgrad.frontend.loops): a ninth stream
        self.after_loops = random.Random(seed ^ 0xAF7E12)
        self.max_stmts = max_stmts
        self.max_depth = max_depth
        self.scope = Scope()
        self.top: list[str] = []  # module-level helpers and Function classes
        self.helpers: dict = {}  # shape -> helper name
        self.helper_nargs: dict = {}  # helper name -> (number of arrays, "plain"|"default"|"none")
        self.consts: list[str] = []  # module-level constants (read, never written)
        self.functions: list = []  # (name, nargs)
        self.features: set = set()
        self.names = 0
        self.loop_depth = 0
        self.output = "scalar"
        self.out_shape = ()

    # ------------------------------------------------------------------ small utilities
    def fresh(self, prefix: str) -> str:
        self.names += 1
        if prefix in ("v", "y", "w") and self.hidden.random() < 0.05:
            return f"{self.hidden.choice(('_break', '_break_', '_item', '_sequence'))}{self.names}"
        return f"{prefix}{self.names}"

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def pick(self, seq):
        return self.rng.choice(list(seq))

    def const(self) -> str:
        return self.spell_const(self.pick(["0.5", "2.0", "1.5", "0.25", "3.0", "0.1"]))

    def spell_const(self, c: str) -> str:
        """A constant as a call on constants (folded when compiling), or through a loop
        index (`float(i)`, `math.factorial(i)`: run with the function)."""
        r = self.idioms.random()
        if r < 0.12:
            self.features.add("constant_call")
            return {"0.5": "np.linspace(0, 1, 3)[1]", "2.0": "float(math.factorial(2))",
                    "1.5": "(math.floor(1.7) + 0.5)", "0.25": "np.linspace(0.0, 1.0, 5)[1]",
                    "3.0": "float(math.comb(3, 1))", "0.1": "np.array([0.1, 0.2])[0]"}[c]
        if r < 0.2 and self.scope.ints:
            i = self.idioms.choice(sorted(self.scope.ints))
            self.features.add("index_call")
            return self.idioms.choice([f"({c} + 0.0 * float({i}))",
                                       f"({c} * math.factorial({i}) / math.factorial({i}))"])
        return c

    def cut(self) -> str:
        return f"{self.rng.uniform(-1.0, 1.0):.2f}"

    def random_shape(self, max_rank: int = 3) -> tuple:
        rank = self.pick([0, 1, 1, 2, 2, 3][: max_rank * 2])
        return tuple(self.pick(DIMS) for _ in range(rank))

    def arrays(self, pred=lambda s: True) -> list:
        return [n for n, s in self.scope.vars.items() if s != FLOAT and pred(s)]

    def target_shape(self) -> tuple:
        shapes = [s for s in self.scope.vars.values() if s != FLOAT]
        if shapes and self.chance(0.75):
            return self.pick(shapes)
        return self.random_shape()

    def broadcast_shape(self, s: tuple) -> tuple:
        """A shape that broadcasts to s."""
        options = [s, ()]
        options += [s[k:] for k in range(1, len(s))]
        options += [tuple(1 if j == k else d for j, d in enumerate(s)) for k in range(len(s))]
        return self.pick(options)

    # ------------------------------------------------------------------ expressions
    def expr(self, s, depth: int | None = None) -> str:
        """An expression of shape s (FLOAT: a Python float)."""
        depth = self.pick([0, 1, 1, 2, 2, self.max_depth]) if depth is None else depth
        if s == FLOAT:
            return self.e_float(depth)
        if depth <= 0:
            return self.leaf(s)
        makers = [(self.e_unary, 6), (self.e_binary, 8), (self.e_reduce, 2), (self.e_matmul, 1),
                  (self.e_transpose, 1), (self.e_reshape, 1), (self.e_slice, 1), (self.e_index, 1),
                  (self.e_fancy, 0.5), (self.e_concat, 0.5), (self.e_stack, 0.4), (self.e_call, 0.6),
                  (self.e_container, 1), (self.e_ifexp, 0.4), (self.e_math, 1), (self.e_mask, 0.4),
                  (self.e_shape_attr, 0.3), (self.e_global, 0.3)]
        functions, weights = zip(*makers)
        for _ in range(6):
            text = self.rng.choices(functions, weights)[0](s, depth - 1)
            if text is not None:
                return text
        return self.leaf(s)

    def leaf(self, s) -> str:
        exact = [n for n, t in self.scope.vars.items() if t == s or (s == () and t == FLOAT)]
        if exact and self.chance(0.9):
            return self.pick(exact)
        if s == ():
            if self.chance(0.2):
                return self.const()
            return f"np.sum({self.any_var()})"
        same_size = self.arrays(lambda t: size(t) == size(s) and len(t) > 0)
        if same_size:
            return f"{self.pick(same_size)}.reshape({s!r})"
        arrays = self.arrays(lambda t: len(t) > 0)
        if not arrays or self.chance(0.1):
            self.features.add("constant_array")
            return f"(np.mean({self.any_var()}) * np.ones({s!r}))"
        return self.resized(self.pick(arrays), s)

    def resized(self, v: str, s: tuple) -> str:
        """The values of array v, repeated or cut to fill shape s (no constant arrays)."""
        n, m = size(self.scope.vars[v]), size(s)
        flat = f"{v}.ravel()" if len(self.scope.vars[v]) > 1 else v
        if n < m:
            flat = f"np.tile({flat}, {-(-m // n)})"
        if n != m:
            flat = f"{flat}[:{m}]"
        return flat + (f".reshape({s!r})" if len(s) != 1 else "")

    def any_var(self) -> str:
        arrays = self.arrays()
        return self.pick(arrays) if arrays else self.pick(list(self.scope.vars))

    def e_float(self, depth: int) -> str:
        floats = [n for n, t in self.scope.vars.items() if t == FLOAT]
        base = self.pick(floats) if floats else self.const()
        if depth <= 0 or not floats:
            return base
        self.features.add("math")
        return self.pick(MATH_UNARY).format(self.e_float(depth - 1)) if self.chance(0.6) else (
            f"({base} * {self.e_float(depth - 1)} + {self.const()})")

    def e_unary(self, s, depth):
        form = self.pick(UNARY)
        if self.sweep.random() < 0.15:  # an issue-29 sweep row instead (sweep_unary)
            form = self.sweep.choice(sweep_unary("{0}", s))
        if self.boundary_share and self.boundary.random() < self.boundary_share / 2:
            self.features.add("index_form")
            form = self.boundary.choice(boundary.index_unary(s))
        text = form.format(self.expr(s, depth))
        return text if text.startswith("np.") and text.endswith(")") else f"({text})"

    def e_binary(self, s, depth):
        a, b = self.expr(s, depth), self.expr(self.broadcast_shape(s), depth)
        if self.chance(0.2):
            b = self.const()
        if self.chance(0.5):
            a, b = b, a
            if self.chance(0.5) and not a[0].isdigit():
                return f"({a} * {b} + {self.const()})"
        if a[0].isdigit() and b[0].isdigit():
            b = self.expr(s, depth)
        return self.pick(BINARY).format(a=a, b=b)

    def e_reduce(self, s, depth):
        if s == ():
            if self.chance(0.15):
                n = self.pick(DIMS)
                x, y = self.expr((n,), depth), self.expr((n,), depth)
                return self.pick([f"({x} @ {y})", f"np.dot({x}, {y})", f"{paren(x)}.dot({y})",
                                  f"np.inner({x}, {y})"])
            inner = self.random_shape() or (self.pick(DIMS),)
            form = self.pick(REDUCE_ALL)
            if self.sweep.random() < 0.15:  # an issue-29 sweep row instead
                form = self.sweep.choice(SWEEP_REDUCE_ALL)
            if self.boundary_share and self.boundary.random() < self.boundary_share:
                self.features.add("index_form")
                form = self.boundary.choice(boundary.index_reduce_all())
            return form.format(e=self.expr(inner, depth))
        if len(s) >= 3:
            return None
        ones = [k for k, d in enumerate(s) if d == 1]
        if ones and self.chance(0.4):
            k = self.pick(ones)
            inner = s[:k] + (self.pick(DIMS),) + s[k + 1:]
            op = self.pick(["np.sum", "np.mean", "np.max"])
            return f"{op}({self.expr(inner, depth)}, axis={k}, keepdims=True)"
        k = self.rng.randint(0, len(s))
        inner = s[:k] + (self.known_dim(s, k),) + s[k:]
        axis = k - len(inner) if self.chance(0.25) else k
        form = self.pick(REDUCE_AXIS)
        if self.sweep.random() < 0.15:  # an issue-29 sweep row instead
            form = self.sweep.choice(SWEEP_REDUCE_AXIS)
        if self.boundary_share and self.boundary.random() < self.boundary_share:
            self.features.add("index_form")
            form = self.boundary.choice(boundary.index_reduce_axis())
        return form.format(e=self.expr(inner, depth), k=axis)

    def known_dim(self, s: tuple, axis: int) -> int:
        """A size for a new axis at `axis` such that s with it inserted is a variable's shape."""
        dims = [t[axis] for t in self.scope.vars.values()
                if t != FLOAT and len(t) == len(s) + 1 and t[:axis] + t[axis + 1:] == s]
        return self.pick(dims) if dims and self.chance(0.8) else self.pick(DIMS)

    def e_matmul(self, s, depth):
        k = self.known_dim(s[:1], 1) if s else self.pick(DIMS)
        if len(s) == 2:
            a, b = self.expr((s[0], k), depth), self.expr((k, s[1]), depth)
        elif len(s) == 1:
            a, b = self.expr((s[0], k), depth), self.expr((k,), depth)
            if self.chance(0.4):
                a, b = self.expr((k,), depth), self.expr((k, s[0]), depth)
        elif len(s) == 3:
            a, b = self.expr((s[0], s[1], k), depth), self.expr((k, s[2]), depth)
        else:
            return None
        return self.pick([f"({a} @ {b})", f"np.dot({a}, {b})", f"np.matmul({a}, {b})",
                          f"{paren(a)}.dot({b})"])

    def e_transpose(self, s, depth):
        if len(s) == 2:
            e = self.expr((s[1], s[0]), depth)
            return self.pick([f"{paren(e)}.T", f"np.transpose({e})", f"np.swapaxes({e}, 0, 1)"])
        if len(s) == 3:
            perm = list(range(3))
            self.rng.shuffle(perm)
            inv = [perm.index(i) for i in range(3)]
            return f"np.transpose({self.expr(tuple(s[i] for i in inv), depth)}, {tuple(perm)!r})"
        return None

    def e_reshape(self, s, depth):
        n = size(s)
        if s and s[0] == 1 and len(s) > 1 and self.chance(0.4):
            return self.pick([f"{paren(self.expr(s[1:], depth))}[None]",
                              f"np.expand_dims({self.expr(s[1:], depth)}, 0)"])
        inner = self.pick([(n,), (1, n), (n, 1)] + ([(2, n // 2)] if n % 2 == 0 else []))
        e = paren(self.expr(inner, depth))
        if len(s) == 1 and self.chance(0.5):
            return self.pick([f"{e}.reshape(-1)", f"{e}.ravel()", f"{e}.flatten()"])
        return self.pick([f"{e}.reshape({s!r})", f"np.reshape({e}, {s!r})"])

    def e_slice(self, s, depth):
        if not s:
            return None
        extra = self.rng.randint(0, 2)
        start = self.rng.randint(0, extra)
        if len(s) >= 2 and self.chance(0.3):
            e = paren(self.expr((s[0], s[1] + extra) + s[2:], depth))
            return f"{e}[:, {start}:{start + s[1]}]"
        choice = self.rng.randint(0, 3)
        if choice == 0:
            return f"{paren(self.expr((s[0] + extra,) + s[1:], depth))}[{start}:{start + s[0]}]"
        if choice == 1:
            return f"{paren(self.expr((2 * s[0] - 1,) + s[1:], depth))}[::2]"
        if choice == 2:
            return f"{paren(self.expr(s, depth))}[::-1]"
        return f"{paren(self.expr((s[0] + extra,) + s[1:], depth))}[-{s[0]}:]"

    def e_index(self, s, depth):
        if len(s) >= 3:
            return None
        ints = [(i, b) for i, b in self.scope.ints.items()]
        if ints and self.chance(0.5):
            i, bound = self.pick(ints)
            return f"{paren(self.expr((bound,) + s, depth))}[{i}]"
        m = self.pick(DIMS)
        i = self.rng.randint(-m, m - 1)
        if s and self.chance(0.3):
            return f"{paren(self.expr((s[0], m) + s[1:], depth))}[:, {i}]"
        if self.chance(0.2):
            return f"{paren(self.expr(s + (m,), depth))}[..., {i}]"
        return f"{paren(self.expr((m,) + s, depth))}[{i}]"

    def e_fancy(self, s, depth):
        if not s:
            return None
        m = self.pick(DIMS)
        idx = [self.rng.randrange(m) for _ in range(s[0])]
        e = paren(self.expr((m,) + s[1:], depth))
        self.features.add("fancy")
        return self.pick([f"{e}[{idx!r}]", f"{e}[np.array({idx!r})]",
                          f"np.take({e}, {idx!r}, axis=0)"])

    def e_mask(self, s, depth):
        if s != ():
            return None
        inner = self.random_shape()
        if not inner:
            return None
        e, m = paren(self.expr(inner, depth)), self.expr(inner, depth)
        self.features.add("boolean_index")
        return self.pick([f"np.sum({e}[{e} > {self.cut()}])", f"np.sum({e}[{m} > 0.0])"])

    def e_concat(self, s, depth):
        if not s:
            return None
        axis = self.rng.randrange(len(s))
        if s[axis] < 2:
            return None
        a = self.rng.randint(1, s[axis] - 1)
        x = self.expr(s[:axis] + (a,) + s[axis + 1:], depth)
        y = self.expr(s[:axis] + (s[axis] - a,) + s[axis + 1:], depth)
        spelled = self.spell_concat(x, y, axis, len(s))
        if spelled is not None:
            return spelled
        return f"np.concatenate([{x}, {y}], axis={axis})" if axis else f"np.concatenate(({x}, {y}))"

    def spell_concat(self, x, y, axis, rank):
        """np.hstack/vstack/dstack/column_stack where one means this concatenation."""
        options = {(0, 1): ["hstack"], (1, 2): ["hstack", "column_stack"], (2, 3): ["dstack"]}
        names = options.get((axis, rank), ["vstack"] if axis == 0 else ["hstack"] if axis == 1 else [])
        if not names or self.idioms.random() > 0.5:
            return None
        self.features.add("stacking")
        return f"np.{self.idioms.choice(names)}([{x}, {y}])"

    def e_stack(self, s, depth):
        if not s or s[0] > 3:
            return None
        parts = ", ".join(self.expr(s[1:], depth) for _ in range(s[0]))
        if self.idioms.random() < 0.4:  # np.array of traced values: a stack
            self.features.add("array_of_traced")
            return f"np.array([{parts}])"
        return f"np.stack([{parts}])"

    def e_call(self, s, depth):
        options = [n for n, (t, _) in self.scope.calls.items() if t == s]
        r = self.rng.random()
        if options and r < 0.4:
            name = self.pick(options)
            return f"{name}({', '.join(self.expr(s, depth) for _ in range(self.scope.calls[name][1]))})"
        if r < 0.7 and s != ():
            return self.call_function(s, depth)
        return self.call_helper(s, depth)

    def e_container(self, s, depth):
        options = [f"{n}[{i}]" for n, shapes in self.scope.seqs.items()
                   for i, t in enumerate(shapes) if t == s]
        options += [f"{n}[{k!r}]" for n, d in self.scope.dicts.items() for k, t in d.items() if t == s]
        options += [f"{n}[{self.pick(['0', '-1'])}]" for n, t in self.scope.lists.items() if t == s]
        options += [f"np.sum(np.stack({n}), axis=0)" for n, t in self.scope.lists.items() if t == s]
        return self.pick(options) if options else None

    def e_ifexp(self, s, depth):
        return f"({self.expr(s, depth)} if {self.cond(depth)} else {self.expr(s, depth)})"

    def e_math(self, s, depth):
        if s != () or not any(t == FLOAT for t in self.scope.vars.values()):
            return None
        return f"({self.e_float(depth + 1)} * {self.expr(s, depth)})"

    def e_shape_attr(self, s, depth):
        arrays = self.arrays(lambda t: len(t) > 0)
        if not arrays:
            return None
        v = self.pick(arrays)
        return self.pick([f"({self.expr(s, depth)} / {v}.shape[0])", f"({self.expr(s, depth)} * {v}.size)",
                          f"({self.expr(s, depth)} * len({v}))"])

    def cond(self, depth: int = 1) -> str:
        s = self.random_shape()
        e = paren(self.expr(s, min(depth, 1)))
        floats = [n for n, t in self.scope.vars.items() if t == FLOAT]
        r = self.rng.random()
        if floats and r < 0.15:
            return f"{self.pick(floats)} > {self.cut()}"
        if s and r < 0.35:
            return f"{e}[{', '.join('0' * len(s))}] > {self.cut()}"
        base = self.pick([f"np.sum({e}) > {self.cut()}", f"np.mean({e}) < {self.cut()}"] +
                         ([f"{e}.max() > {self.cut()}"] if s else []))
        if self.chance(0.15):  # the second operand may call a helper that writes into
            # arrays, which Python runs on some paths only (`a and f(x)`, `a or f(x)`)
            rest = self.call_helper(s, 0) if self.inside.random() < 0.3 else self.expr(s, 0)
            return f"{base} {self.inside.choice(['and', 'and', 'or'])} np.sum({rest}) < {self.cut()}"
        if self.chance(0.1):
            return f"not {base}"
        return base

    # ------------------------------------------------------------------ callees
    def call_helper(self, s, depth):
        """A module-level function of arrays of shape s (with its own small body); some take
        a keyword with a default (`scale=0.5`) or an optional array (`b=None`)."""
        name = self.helpers.get(s)
        if name is None:
            name = self.fresh("helper")
            nargs = self.rng.randint(1, 2)
            kind = self.pick(["plain", "plain", "default", "none"])
            self.features.add("helper")
            outer, outer_loop = self.scope, self.loop_depth
            self.scope, self.loop_depth = Scope(vars={f"a{i}": s for i in range(nargs)}), 0
            params = ", ".join(self.scope.vars)
            body = []
            if kind == "default":
                params += ", scale=0.5"
            elif kind == "none":
                params += ", b=None"
                body += ["    if b is None:", "        b = a0 * 0.5"]
                self.scope.vars["b"] = s
            for _ in range(self.rng.choice([0, 0, 1, 2])):
                body += self.statement(1, allow_return=False)
            result = self.expr(s, 2)
            body.append(f"    return ({result}) * scale" if kind == "default" else f"    return {result}")
            self.scope, self.loop_depth = outer, outer_loop
            self.top.append(f"def {name}({params}):\n" + "\n".join(body) + "\n")
            self.helpers[s] = name  # after the body: a helper never calls itself
            self.helper_nargs[name] = (nargs, kind)
        nargs, kind = self.helper_nargs[name]
        args = [self.expr(s, depth) for _ in range(nargs)]
        if self.transforms_inside.random() < 0.05:  # forward or reverse mode of the helper in compiled
            # code, on its arrays only (a defaulted `scale` or `b` takes its default)
            self.features.add("nested_grad")
            ones = ", ".join(f"np.ones_like({a})" for a in args)
            if self.transforms_inside.random() < 0.5:
                return f"sg.jvp({name}, ({', '.join(args)},), ({ones},))[1]"
            return f"sg.vjp({name}, {', '.join(args)})[1](np.ones_like({args[0]}))[0]"
        if kind == "default" and self.chance(0.5):
            args.append(f"scale={self.const()}")
        elif kind == "none" and self.chance(0.5):
            args.append(self.pick(["", "b="]) + self.expr(s, depth))
        r = self.inside.random()
        if s == () and r < 0.15:  # a transform called in compiled code: d helper / d a0
            self.features.add("nested_grad")
            return f"sg.grad({name})({', '.join(args)})"
        if kind == "default" and r < 0.6 and not any(a.startswith("scale=") for a in args):
            self.features.add("partial")
            return f"functools.partial({name}, scale={self.const()})({', '.join(args)})"
        return f"{name}({', '.join(args)})"

    def e_global(self, s, depth):
        """A module-level constant: a float `K`, or an array `W` that broadcasts to s."""
        name = self.fresh("K" if s == () else "W")
        if s == ():
            self.consts.append(f"{name} = {self.const()}")
        else:
            shape = self.broadcast_shape(s) or s
            self.consts.append(f"{name} = np.linspace(-1.0, 1.0, {size(shape)}).reshape({shape!r})")
            self.features.add("constant_array")
        return f"({self.expr(s, depth)} {self.pick(['*', '+', '-'])} {name})"

    def call_function(self, s, depth):
        """`FnK.apply(...)` of a custom Function written into the module."""
        self.features.add("function")
        if not self.functions or self.chance(0.3):
            self.functions.append(self.write_function())
        name, nargs = self.pick(self.functions)
        args = [self.expr(s, depth) for _ in range(nargs)]
        if nargs == 1 and self.chance(0.3):
            return f"{name}.apply({args[0]}) * {self.const()}"
        return f"{name}.apply({', '.join(args)})"

    def write_function(self):
        name = self.fresh("Fn")
        fwd, dx, dy = self.pick(FUNCTION_FORMULAS)
        two = self.chance(0.3)
        save_out = dy is not None and not two and self.chance(0.5)
        style = self.pick(["ctx", "ctx", "setup_context"])
        once = self.chance(0.2)
        out = f"({fwd}) * z" if two else fwd
        lines = [f"class {name}(Function):"]
        params = "x, z" if two else "x"
        if style == "ctx":
            lines += ["    @staticmethod", f"    def forward(ctx, {params}):", f"        y = {out}"]
            saved = "x, z" if two else "x, y"
            lines.append(f"        ctx.save_for_backward({saved})")
            lines.append(f"        ctx.save_for_forward({saved})")
            lines.append("        return y")
        else:
            lines += ["    @staticmethod", f"    def forward({params}):", f"        return {out}", "",
                      "    @staticmethod", "    def setup_context(ctx, inputs, output):",
                      f"        {params}{',' if not two else ''} = inputs",
                      "        ctx.save_for_backward(x, output)" if not two else
                      "        ctx.save_for_backward(x, z)",
                      "        ctx.save_for_forward(x, output)" if not two else
                      "        ctx.save_for_forward(x, z)"]
        unpack = "x, z = ctx.saved_tensors" if two else "x, y = ctx.saved_tensors"
        deriv = dy if save_out else dx
        lines += ["", "    @staticmethod"] + (["    @once_differentiable"] if once else [])
        if two:
            lines += ["    def backward(ctx, g):", f"        {unpack}",
                      f"        return g * z * ({dx}), g * ({fwd})"]
        else:
            lines += ["    def backward(ctx, g):", f"        {unpack}", f"        return g * ({deriv})"]
        lines += ["", "    @staticmethod"]
        if two:
            lines += ["    def jvp(ctx, xt, zt):", f"        {unpack}",
                      f"        return xt * z * ({dx}) + zt * ({fwd})"]
        else:
            lines += ["    def jvp(ctx, xt):", f"        {unpack}", f"        return xt * ({deriv})"]
        self.top.append("\n".join(lines) + "\n")
        return name, 2 if two else 1

    # ------------------------------------------------------------------ statements
    def statement(self, indent: int, allow_return: bool = True) -> list[str]:
        makers = [self.s_assign] * 5 + [self.s_rebind] * 3 + [
            self.s_augassign, self.s_setitem, self.s_setitem, self.s_alias_write, self.s_copy_fill,
            self.s_if, self.s_if, self.s_for_range, self.s_for_iter, self.s_while, self.s_closure,
            self.s_container, self.s_unpack]
        if self.loop_depth:
            makers += [self.s_break_continue] * 2
        if allow_return:
            makers += [self.s_early_return]
        for _ in range(6):
            lines = self.pick(makers)(indent)
            if lines:
                return lines
        return self.s_assign(indent)

    def block(self, indent: int, n: int, allow_return: bool = True) -> list[str]:
        lines = []
        for _ in range(n):
            lines += self.statement(indent, allow_return)
        return lines or [self.pad(indent) + "pass"]

    def pad(self, indent: int) -> str:
        return "    " * indent

    def nested(self, indent: int, n: int, allow_return: bool = True) -> list[str]:
        """A block whose new names do not escape it (they may be unbound after it)."""
        saved = self.scope
        self.scope = saved.copy()
        lines = self.block(indent, n, allow_return)
        kept = saved.copy()
        self.scope = kept
        return lines

    def s_assign(self, indent):
        s = FLOAT if self.chance(0.05) and self.rng.random() < 0.5 else self.target_shape()
        name = self.fresh("v")
        text = self.expr(s)
        self.scope.vars[name] = s
        return [f"{self.pad(indent)}{name} = {text}"]

    def s_rebind(self, indent):
        name = self.pick(list(self.scope.vars))
        return [f"{self.pad(indent)}{name} = {self.expr(self.scope.vars[name])}"]

    def s_augassign(self, indent):
        name = self.pick(list(self.scope.vars))
        s = self.scope.vars[name]
        if s == FLOAT:
            return [f"{self.pad(indent)}{name} += {self.e_float(1)}"]
        if len(s):
            self.features.add("inplace")
        op = self.pick(["+=", "-=", "*="])
        rhs = self.expr(self.broadcast_shape(s), self.rng.randint(0, 2))
        return [f"{self.pad(indent)}{name} {op} {rhs}"]

    def index_into(self, s):
        """(index text, shape of the indexed region) for a write into an array of shape s."""
        r = self.rng.random()
        ints = [(i, b) for i, b in self.scope.ints.items() if b <= s[0]]
        if ints and r < 0.3:
            i, _ = self.pick(ints)
            return i, s[1:]
        if r < 0.5:
            return str(self.rng.randint(-s[0], s[0] - 1)), s[1:]
        if r < 0.65:
            a = self.rng.randint(0, s[0] - 1)
            b = self.rng.randint(a + 1, s[0])
            return f"{a}:{b}", (b - a,) + s[1:]
        if r < 0.75 and len(s) >= 2:
            return f"{self.rng.randrange(s[0])}, {self.rng.randrange(s[1])}", s[2:]
        if r < 0.85 and len(s) >= 2:
            return f":, {self.rng.randrange(s[1])}", (s[0],) + s[2:]
        if r < 0.92:
            k = self.rng.randint(1, s[0])
            idx = self.rng.sample(range(s[0]), k)
            self.features.add("fancy")
            return repr(idx), (k,) + s[1:]
        return None, None

    def s_setitem(self, indent):
        names = self.arrays(lambda t: len(t) > 0)
        if not names:
            return None
        name = self.pick(names)
        s = self.scope.vars[name]
        self.features.add("inplace")
        index, region = self.index_into(s)
        if index is None:  # boolean mask write
            self.features.add("boolean_index")
            op = self.pick(["=", "*="])
            return [f"{self.pad(indent)}{name}[{name} > {self.cut()}] {op} {self.const()}"]
        op = self.pick(["=", "=", "+=", "*=", "-="])
        value = self.expr(self.broadcast_shape(region), 2)
        if op in ("+=", "-=") and self.idioms.random() < 0.4:  # no repeated index: the same write
            self.features.add("ufunc_at")
            ufunc = "add" if op == "+=" else "subtract"
            return [f"{self.pad(indent)}np.{ufunc}.at({name}, {self.at_index(index)}, {value})"]
        return [f"{self.pad(indent)}{name}[{index}] {op} {value}"]

    @staticmethod
    def at_index(index: str) -> str:
        """`x[index]`'s index text as an argument of `ufunc.at`."""
        if index.startswith("["):
            return index
        parts = [p.strip() for p in index.split(",")]
        parts = ["slice(None)" if p == ":" else f"slice({p.replace(':', ', ')})" if ":" in p else p
                 for p in parts]
        return parts[0] if len(parts) == 1 else f"({', '.join(parts)})"

    def s_alias_write(self, indent):
        """A name for (part of) an array, then a write through it."""
        names = self.arrays(lambda t: len(t) > 0)
        if not names:
            return None
        base = self.pick(names)
        s = self.scope.vars[base]
        kind = self.rng.randrange(5)
        if kind == 0:
            view, vs = base, s
        elif kind == 1:
            view, vs = f"{base}[{self.rng.randrange(s[0])}]", s[1:]
        elif kind == 2 and len(s) == 2:
            view, vs = f"{base}.T", (s[1], s[0])
        elif kind == 3 and s[0] > 1:
            view, vs = f"{base}[1:]", (s[0] - 1,) + s[1:]
        else:
            view, vs = f"{base}.reshape(-1)", (size(s),)
        name = self.fresh("w")
        self.features.update({"inplace", "view_write"})
        lines = [f"{self.pad(indent)}{name} = {view}"]
        self.scope.vars[name] = vs
        if vs and self.chance(0.6):
            index, region = self.index_into(vs)
            if index is not None:
                value = self.expr(self.broadcast_shape(region), 1)
                return lines + [f"{self.pad(indent)}{name}[{index}] = {value}"]
        op = self.pick(["+=", "*="])
        return lines + [f"{self.pad(indent)}{name} {op} {self.expr(self.broadcast_shape(vs), 1)}"]

    def s_copy_fill(self, indent):
        """`y = np.zeros(...)` (or a copy) filled row by row in a loop."""
        s = self.target_shape()
        if not s or s[0] > 4:
            return None
        name, i = self.fresh("y"), self.fresh("i")
        v = paren(self.leaf(s))
        start = self.pick([f"np.zeros({s!r})", f"np.zeros_like({v})", f"{v}.copy()", f"np.copy({v})"])
        self.features.update({"inplace", "loop"})
        lines = [f"{self.pad(indent)}{name} = {start}", f"{self.pad(indent)}for {i} in range({s[0]}):"]
        self.scope.ints[i] = s[0]
        self.loop_depth += 1
        op = self.pick(["=", "+=", "="])
        lines.append(f"{self.pad(indent + 1)}{name}[{i}] {op} {self.expr(s[1:], 2)}")
        self.loop_depth -= 1
        del self.scope.ints[i]
        self.scope.vars[name] = s
        return lines

    def s_if(self, indent):
        self.features.add("if")
        lines = [f"{self.pad(indent)}if {self.cond()}:"]
        lines += self.nested(indent + 1, self.rng.randint(1, 2))
        for _ in range(self.rng.choice([0, 0, 1])):
            lines.append(f"{self.pad(indent)}elif {self.cond()}:")
            lines += self.nested(indent + 1, self.rng.randint(1, 2))
        if self.chance(0.6):
            lines.append(f"{self.pad(indent)}else:")
            lines += self.nested(indent + 1, self.rng.randint(1, 2))
        return lines

    def loop_body(self, indent, header: list[str], ints: dict, names: dict,
                  runs: bool = True) -> list[str]:
        """The loop `header` and a body; where the loop surely `runs` its body's first
        iteration through, its names may be read after it (the ninth stream)."""
        if self.loop_depth >= 2:
            return None
        self.features.add("loop")
        saved = self.scope
        self.scope = saved.copy()
        self.scope.ints.update(ints)
        self.scope.vars.update(names)
        self.loop_depth += 1
        body = self.block(indent + 1, self.rng.randint(1, 3))
        self.loop_depth -= 1
        inside, self.scope = self.scope, saved.copy()
        jumps = any(line.strip().startswith(("break", "continue", "if")) and (
            "break" in line or "continue" in line) for line in body)
        if self.after_loops.random() < 0.25 and runs and not jumps:  # (else a name may be
            # unbound after it: NumPy's NameError would discard the program)
            self.scope.vars.update((n, t) for n, t in inside.vars.items() if n not in saved.vars)
            self.scope.ints.update((n, b) for n, b in inside.ints.items() if n not in saved.ints)
            self.features.add("loop_names_after")
        return header + body

    def s_for_range(self, indent):
        i = self.fresh("i")
        arrays = self.arrays(lambda t: len(t) > 0)
        if arrays and self.chance(0.4):
            v = self.pick(arrays)
            n = self.scope.vars[v][0]
            head = self.pick([f"range({v}.shape[0])", f"range(len({v}))"])
        else:
            n = self.rng.randint(1, 4)
            head = self.pick([f"range({n})", f"range(0, {n})"])
        return self.loop_body(indent, [f"{self.pad(indent)}for {i} in {head}:"], {i: n}, {})

    def s_for_iter(self, indent):
        """for over an array's rows, a tuple literal, zip, enumerate, or a container."""
        arrays = self.arrays(lambda t: len(t) > 0)
        r = self.rng.randrange(5)
        row = self.fresh("r")
        if r == 0 and arrays:
            v = self.pick(arrays)
            return self.loop_body(indent, [f"{self.pad(indent)}for {row} in {v}:"], {},
                                  {row: self.scope.vars[v][1:]})
        if r == 1 and arrays:
            v = self.pick(arrays)
            s = self.scope.vars[v]
            i = self.fresh("i")
            return self.loop_body(indent, [f"{self.pad(indent)}for {i}, {row} in enumerate({v}):"],
                                  {i: s[0]}, {row: s[1:]})
        if r == 2 and arrays:
            v = self.pick(arrays)
            s = self.scope.vars[v]
            other = self.expr(s, 1)
            row2 = self.fresh("r")
            return self.loop_body(indent, [f"{self.pad(indent)}for {row}, {row2} in zip({v}, {other}):"],
                                  {}, {row: s[1:], row2: s[1:]})
        if r == 3:
            s = self.target_shape()
            items = ", ".join(self.expr(s, 1) for _ in range(self.rng.randint(1, 3)))
            return self.loop_body(indent, [f"{self.pad(indent)}for {row} in ({items},):"], {}, {row: s})
        containers = [(n, t) for n, t in self.scope.lists.items()] + [
            (n, shapes[0]) for n, shapes in self.scope.seqs.items() if len(set(shapes)) == 1]
        if not containers:
            return None
        name, s = self.pick(containers)
        return self.loop_body(indent, [f"{self.pad(indent)}for {row} in {name}:"], {}, {row: s},
                              runs=False)  # (a list may be empty)

    def s_while(self, indent):
        if self.loop_depth >= 2:
            return None
        k, n = self.fresh("k"), self.rng.randint(1, 4)
        self.features.add("while")
        if self.chance(0.5):
            head = [f"{self.pad(indent)}{k} = 0", f"{self.pad(indent)}while {k} < {n} and {self.cond()}:",
                    f"{self.pad(indent + 1)}{k} += 1"]
            return self.loop_body(indent, head, {}, {}, runs=False)
        head = [f"{self.pad(indent)}{k} = 0", f"{self.pad(indent)}while True:",
                f"{self.pad(indent + 1)}{k} += 1", f"{self.pad(indent + 1)}if {k} > {n}:",
                f"{self.pad(indent + 2)}break"]
        return self.loop_body(indent, head, {}, {}, runs=False)

    def s_break_continue(self, indent):
        self.features.add("break")
        word = self.pick(["break", "continue"])
        return [f"{self.pad(indent)}if {self.cond()}:", f"{self.pad(indent + 1)}{word}"]

    def s_early_return(self, indent):
        self.features.add("early_return")
        return [f"{self.pad(indent)}if {self.cond()}:", f"{self.pad(indent + 1)}return {self.result()}"]

    def s_closure(self, indent):
        """A nested def or lambda that reads the enclosing names."""
        s = self.target_shape()
        name = self.fresh("c")
        self.features.add("closure")
        saved = self.scope
        self.scope = saved.copy()
        self.scope.vars["p"] = s
        if self.chance(0.4):
            lines = [f"{self.pad(indent)}{name} = lambda p: {self.expr(s, 2)}"]
        else:
            lines = [f"{self.pad(indent)}def {name}(p):"]
            if self.chance(0.5):
                t = self.fresh("t")
                lines.append(f"{self.pad(indent + 1)}{t} = {self.expr(s, 2)}")
                self.scope.vars[t] = s
            lines.append(f"{self.pad(indent + 1)}return {self.expr(s, 2)}")
        self.scope = saved
        self.scope.calls[name] = (s, 1)
        return lines

    def s_container(self, indent):
        """A list (grown by append, also in a loop) or a dict of arrays."""
        s = self.target_shape()
        name = self.fresh("L")
        self.features.add("container")
        if self.chance(0.5):
            lines = [f"{self.pad(indent)}{name} = [{self.expr(s, 1)}]"]
            if self.chance(0.5) and self.loop_depth < 2:
                i = self.fresh("i")
                lines += [f"{self.pad(indent)}for {i} in range({self.rng.randint(1, 3)}):",
                          f"{self.pad(indent + 1)}{name}.append({self.expr(s, 1)} * {name}[-1])"]
            else:
                lines.append(f"{self.pad(indent)}{name}.append({self.expr(s, 1)})")
            lines += self.change_item(indent, f"{name}[-1]")
            self.scope.lists[name] = s
            return lines
        t = self.target_shape()
        first = self.expr(s, 1)
        made = f"dict(a={first})" if self.idioms.random() < 0.4 else f"{{'a': {first}}}"
        lines = [f"{self.pad(indent)}{name} = {made}",
                 f"{self.pad(indent)}{name}['b'] = {self.expr(t, 1)}"]
        lines += self.change_item(indent, f"{name}['b']")
        self.scope.dicts[name] = {"a": s, "b": t}
        return lines

    def change_item(self, indent, value) -> list[str]:
        """`L[0] = ...` / `d['a'] = ...` on a list or dict made earlier, maybe outside the
        enclosing if/loop (issue 11, R1: a rebinding of that name, which the block merges
        or carries); drawn from the idioms stream, so a seed keeps its structure."""
        keys = {n: ["0", "-1"] for n in self.scope.lists}
        keys.update({n: [repr(k) for k in d] for n, d in self.scope.dicts.items()})
        if not keys or self.idioms.random() >= 0.6:
            return []
        self.features.add("container_item")
        other = self.idioms.choice(sorted(keys))
        at = f"{other}[{self.idioms.choice(keys[other])}]"
        return [f"{self.pad(indent)}{at} = {at} * 0.5 + np.sum({value}) * 0.25"]

    def s_unpack(self, indent):
        s, t = self.target_shape(), self.target_shape()
        a, b = self.fresh("v"), self.fresh("v")
        if self.chance(0.5):
            x, y = self.expr(s, 1), self.expr(t, 1)
            before, right = self.spell_unpack(x, y, s, t, a, indent)
            line = "\n".join(before + [f"{self.pad(indent)}{a}, {b} = {right}"])
        else:
            tup = self.fresh("T")
            line = (f"{self.pad(indent)}{tup} = ({self.expr(s, 1)}, {self.expr(t, 1)})\n"
                    f"{self.pad(indent)}{a}, {b} = {tup}")
        self.scope.vars[a], self.scope.vars[b] = s, t
        return [line]

    def spell_unpack(self, x, y, s, t, a, indent) -> tuple:
        """(lines before, right side) for `a, b = x, y`: also an array unpacked along axis 0
        (`np.stack([x, y])`), and x scaled by 1 through an unpacked shape (`n, m = v.shape`)."""
        r = self.idioms.random()
        arrays = self.arrays(lambda u: 1 <= len(u) <= 3)
        if r < 0.25 and arrays:
            v = self.idioms.choice(sorted(arrays))
            shape = self.scope.vars[v]
            dims = [f"{a}_n{k}" for k in range(len(shape))]
            self.features.add("unpack_shape")
            comma = "," if len(dims) == 1 else ""
            before = [f"{self.pad(indent)}{', '.join(dims)}{comma} = {v}.shape"]
            return before, f"{paren(x)} * ({dims[-1]} / {shape[-1]}), {y}"
        if r < 0.5 and s == t and s != FLOAT:
            self.features.add("unpack_array")
            return [], f"np.stack([{x}, {y}])"
        return [], f"{x}, {y}"

    # ------------------------------------------------------------------ the program
    def result(self) -> str:
        if self.output == "scalar":
            return self.expr((), self.rng.randint(1, 3))
        if self.output == "array":
            return self.expr(self.out_shape, self.rng.randint(1, 2))
        return f"{self.expr(self.out_shape, 1)}, {self.expr((), 2)}"

    def arguments(self) -> list:
        args = []
        for _ in range(self.rng.randint(1, 3)):
            r = self.rng.random()
            if r < 0.72:
                args.append(("array", self.random_shape() or (self.pick(DIMS),)))
            elif r < 0.82:
                args.append(("float",))
            elif r < 0.92:
                args.append((self.pick(["tuple", "list"]), [self.random_shape() for _ in range(2)]))
            else:
                args.append(("dict", [("w", self.random_shape()), ("b", self.random_shape())]))
        return args

    def bind_arguments(self, args) -> list[str]:
        names = []
        for n, spec in enumerate(args):
            name = f"x{n}"
            names.append(name)
            if spec[0] == "array":
                self.scope.vars[name] = spec[1]
            elif spec[0] == "float":
                self.scope.vars[name] = FLOAT
            elif spec[0] == "dict":
                self.scope.dicts[name] = dict(spec[1])
                self.features.add("container_arg")
            else:
                self.scope.seqs[name] = list(spec[1])
                self.features.add("container_arg")
        return names

    def defaulted_parameter(self, names: list, prologue: list, body: list) -> None:
        """Sometimes f takes one more parameter with a default (`scale=1.0`, or `b=None`
        set in the body), which the oracle never passes: every transform's later calls
        then omit it as the first did (the guarded call once lost the defaults). The
        result is multiplied by it, a 1.0: the program computes what it did without it."""
        if self.signature.random() >= 0.25 or self.output == "tuple":
            return
        self.features.add("default_param")
        if self.signature.random() < 0.5:
            names.append("scale=1.0")
            factor = "scale"
        else:
            names.append("b=None")
            prologue += ["    if b is None:", "        b = 1.0"]
            factor = "b"
        body[-1] = f"    return ({body[-1][len('    return '):]}) * {factor}"

    def program(self) -> Program:
        args = self.arguments()
        names = self.bind_arguments(args)
        if not any(s != FLOAT for s in self.scope.vars.values()):
            # reads of containers give the body arrays to work with
            for name, shapes in self.scope.seqs.items():
                self.scope.vars[f"{name}_0"] = shapes[0]
            for name, d in self.scope.dicts.items():
                self.scope.vars[f"{name}_w"] = d["w"]
        prologue = [f"    {n} = {n[:-2]}[0]" for n in self.scope.vars if n.endswith("_0")]
        prologue += [f"    {n} = {n[:-2]}['w']" for n in self.scope.vars if n.endswith("_w")]
        if "container_arg" not in self.features and self.chance(0.2):
            self.output = self.pick(["array", "tuple"])
            self.out_shape = self.target_shape() or (2,)
        arrays = [n for n, t in self.scope.vars.items() if t != FLOAT]  # (the arguments')
        body = self.block(1, self.rng.randint(1, self.max_stmts))
        if arrays and self.sweep.random() < 0.1:  # issue 29: `assert` runs in the forward
            self.features.add("assert")
            body.insert(0, f"    assert np.all(np.isfinite({self.sweep.choice(arrays)})), 'finite'")
        body.append(f"    return {self.result()}")
        self.defaulted_parameter(names, prologue, body)
        header = ["import math", "", "import numpy as np", "",
                  *(["import functools"] if "partial" in self.features else []),
                  *(["import srcgrad as sg"] if "nested_grad" in self.features else []),
                  "from srcgrad.autograd import Function",
                  "from srcgrad.autograd.function import once_differentiable", "",
                  f"ARGS = {args!r}", f"OUTPUT = {self.output!r}", *self.consts, ""]
        source = "\n".join(header) + "\n" + "\n\n".join(self.top) + ("\n\n" if self.top else "")
        source += f"def f({', '.join(names)}):\n" + "\n".join(prologue + body) + "\n"
        return Program(self.seed, source, "f", args, self.output, set(self.features))


# Of the boundary seeds, the share drawing one of issue 29 §2's Python-surface forms
# (tests/fuzz/surface_forms.py: try/except, comprehensions, star unpacking, methods, ...)
SURFACE_SHARE_OF_BOUNDARY = 0.15


def generate(seed: int, boundary_share: float | None = None) -> Program:
    """Seed's program; with a boundary share (default: $SRCGRAD_FUZZ_BOUNDARY, Note
    [Boundary share]) some seeds call a random table row and others draw index objects
    and call forms (tests/fuzz/boundary.py)."""
    share = boundary.share() if boundary_share is None else boundary_share
    if share and random.Random(seed ^ 0x5F29).random() < share * SURFACE_SHARE_OF_BOUNDARY:
        return Program(**surface_forms.surface_program(random.Random(seed), seed))
    if share and random.Random(seed ^ 0xB0DA).random() < share * boundary.ROW_SHARE_OF_BOUNDARY:
        program = boundary.row_program(seed)
        if program is not None:
            return program
    return Generator(seed, boundary_share=share).program()
