"""A seeded generator of random torch-style programs over sg.Tensor.

A program is the source of a module defining `f(x0, x1, ...)`: the leaves come in as
float64 `sg.Tensor`s (requiring grad, or not: the oracle runs the same text both ways),
and `f` returns `(out, watched)`, a scalar Tensor and the list of tensors whose
`.grad` it retained. The text is what a user of the runtime writes: torch method names
(`x.sin()`, `x.sum(dim=1, keepdim=True)`, `x.t()`, `x.narrow(0, 1, 2)`, `x.add_(y)`,
`x[1:] = y`), custom `sg.autograd.Function`s, hooks, `retain_grad()`, `if t.sum() > 0:`
and loops. Never NumPy-written code run on Tensors (its semantics are NumPy's).

Why our own generator over `random.Random(seed)`: a seed names a program exactly, so the
CI slice and a campaign's failure lists are lists of ints.

The grammar is typed by shape: each expression is made for a target shape from the
variables in scope (whose shapes are known), so every program runs. Values stay in the
domains of the functions (`(e * e + 1.0).log()`, `e.tanh().exp()`), loops are short.

The generator also models what torch *saves* for backward (derivatives.yaml: `mul`
saves the other operand, `exp`/`tanh`/`sigmoid`/`relu` their result, `add` nothing,
in-place ops that need the old value save a clone of it) per storage group (a tensor,
its views and its detach() aliases share one version counter). An ordinary program
never writes in place into a group that a recorded node saved, a leaf, a view of a
leaf or one of several views an op returned; a program drawn as a *raise* program does
exactly one such thing on purpose and says in a `# expect:` comment which error torch
raises for it (spec §3, §6). The oracle holds srcgrad to that prediction both ways.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

# expectation key -> the start of torch's message (spec/torch_semantics.md §3, §6)
EXPECT_MESSAGES = {
    "version": "one of the variables needed for gradient computation has been modified by an "
               "inplace operation",
    "leaf": "a leaf Variable that requires grad is being used in an in-place operation.",
    "view_leaf": "a view of a leaf Variable that requires grad is being used in an in-place "
                 "operation.",
    "multi": "is a view and is being modified inplace. This view is the output of a function "
             "that returns multiple views.",
}


@dataclass
class Program:
    seed: int
    source: str
    shapes: list  # the leaves' shapes
    expect: list = field(default_factory=list)  # keys of EXPECT_MESSAGES
    features: set = field(default_factory=set)


@dataclass
class Group:
    """One storage (a version counter): a tensor, its views, its detach() aliases."""

    saved: bool = False  # a recorded node saved a member of it
    frozen: bool = False  # no writes allowed (a retained grad, maybe-saved after a branch)
    leaf: bool = False


@dataclass
class Var:
    shape: tuple
    group: int
    rg: bool
    contig: bool = True
    view: bool = False
    multi: bool = False  # one of several views an op returned (or a view of one)
    expanded: bool = False
    alias: bool = False  # a detach() alias
    leaf: bool = False


@dataclass
class Expr:
    text: str
    shape: tuple
    rg: bool
    group: int
    saves: frozenset = frozenset()  # groups a recorded node of this expression saved
    out_saved: bool = False  # the op that made the value saved its result
    contig: bool = True
    view: bool = False
    multi: bool = False
    expanded: bool = False
    alias: bool = False


def size(shape) -> int:
    return math.prod(shape)


def paren(t: str) -> str:
    if t.replace("_", "").isalnum() and not t[0].isdigit():
        return t
    if t.startswith("(") and _balanced_outer(t):
        return t
    if t.endswith((")", "]")) and _chain(t):
        return t
    return f"({t})"


def _balanced_outer(t: str) -> bool:
    depth = 0
    for i, c in enumerate(t):
        depth += c in "([{"
        depth -= c in ")]}"
        if depth == 0 and i < len(t) - 1:
            return False
    return True


def _chain(t: str) -> bool:
    """`a.b(...)[...]`: a primary an attribute can follow."""
    depth = 0
    for c in t:
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0 and c in " +-*/@<>=!,":
            return False
    return True


# unary ops: template, saves its input, saves its result (torch's derivatives.yaml)
UNARY = [
    ("{0}.sin()", True, False), ("{0}.cos()", True, False), ("{0}.tanh()", False, True),
    ("{0}.sigmoid()", False, True), ("{0}.tanh().exp()", False, True),
    ("{0}.relu()", False, True), ("{0}.abs()", True, False), ("{0}.square()", True, False),
    ("({0} ** 2)", True, False), ("{0}.pow(3)", True, False), ("(-{0})", False, False),
    ("{0}.neg()", False, False), ("{0}.atan()", True, False),
    ("{0}.clamp(-0.5, 0.5)", True, False), ("{0}.clamp(min=-0.3)", True, False),
    ("({0} * {0} + 1.0).log()", True, False), ("({0} * {0} + 1.0).sqrt()", True, True),
    ("(2.5 * {0})", False, False), ("({0} / 3.0)", False, False), ("({0} - 0.5)", False, False),
    ("(0.5 - {0})", False, False), ("{0}.mul(0.3)", False, False), ("{0}.add(1.0)", False, False),
    ("{0}.clone()", False, False),
]
# binary ops: template, saves a (when b requires grad), saves b (when a requires grad)
BINARY = [
    ("({a} + {b})", "", ""), ("({a} - {b})", "", ""), ("{a}.add({b}, alpha=0.5)", "", ""),
    ("{a}.sub({b})", "", ""), ("({a} * {b})", "b", "a"), ("{a}.mul({b})", "b", "a"),
    ("({a} / ({b} * {b} + 1.0))", "b", "b"), ("{a}.maximum({b})", "*", "*"),
    ("{a}.minimum({b})", "*", "*"),
]
# in-place ops of one operand: template, saves the operand's group, saves the target after
INPLACE_BINARY = [
    ("{t}.add_({e})", False), ("{t}.sub_({e})", False), ("{t} += {e}", False),
    ("{t} -= {e}", False), ("{t}.mul_({e})", True), ("{t} *= {e}", True),
    ("{t}.add_({e}, alpha=-0.5)", False),
]
INPLACE_UNARY = [
    ("{t}.mul_(0.5)", False), ("{t}.add_(1.0)", False), ("{t}.sin_()", False),
    ("{t}.cos_()", False), ("{t}.neg_()", False), ("{t}.clamp_(-1.0, 1.0)", False),
    ("{t}.pow_(2)", False), ("{t}.abs_()", False), ("{t}.tanh_()", True),
    ("{t}.sigmoid_()", True), ("{t}.relu_()", True), ("{t} *= 0.7", False),
    ("{t}.zero_()", False), ("{t}.fill_(0.25)", False), ("{t}.div_(2.0)", False),
]

# custom Functions: name -> (class source, number of tensor inputs, saves inputs, saves output)
FUNCTIONS = {
    "Cube": ('''class Cube(sg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3.0 * x * x
''', 1, True, False),
    "SinF": ('''class SinF(sg.autograd.Function):
    @staticmethod
    def forward(x):
        return x.sin()

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.cos()
''', 1, True, False),
    "TanhF": ('''class TanhF(sg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x.tanh()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * (1.0 - y * y)
''', 1, False, True),
    "MulXY": ('''class MulXY(sg.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        gx = g * y if ctx.needs_input_grad[0] else None
        gy = g * x if ctx.needs_input_grad[1] else None
        return gx, gy
''', 2, True, False),
    "ScaleK": ('''class ScaleK(sg.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.k = k
        return x * k

    @staticmethod
    def backward(ctx, g):
        return g * ctx.k, None
''', 1, False, False),
}


class Generator:
    def __init__(self, seed: int):
        self.seed = seed
        self.r = random.Random(seed)
        self.vars: dict = {}
        self.groups: dict = {}
        self.lines: list = []
        self.classes: list = []
        self.count = 0
        self.expect: list = []
        self.features: set = set()
        self.raise_mode = self.r.random() < 0.12
        self.in_loop = False

    # ------------------------------------------------------------ bookkeeping
    def group(self, leaf=False) -> int:
        g = len(self.groups)
        self.groups[g] = Group(leaf=leaf)
        return g

    def name(self, prefix="v") -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def emit(self, line: str, indent: int = 1):
        self.lines.append("    " * indent + line)

    def commit(self, e: Expr):
        for g in e.saves:
            self.groups[g].saved = True

    def bind(self, name: str, e: Expr):
        if e.out_saved and e.rg:
            self.groups[e.group].saved = True
        self.vars[name] = Var(e.shape, e.group, e.rg, e.contig, e.view, e.multi, e.expanded,
                              e.alias)

    def ref(self, name: str) -> Expr:
        v = self.vars[name]
        return Expr(name, v.shape, v.rg, v.group, frozenset(), False, v.contig, v.view, v.multi,
                    v.expanded, v.alias)

    def fresh(self, text, shape, operands, saved_ops=(), out_saved=False, contig=None) -> Expr:
        rg = any(o.rg for o in operands)
        saves = frozenset().union(*(o.saves for o in operands)) if operands else frozenset()
        if rg:
            saves = saves | {o.group for o in saved_ops}
        if contig is None:
            contig = all(o.contig for o in operands)
        return Expr(text, shape, rg, self.group(), saves, out_saved and rg, contig)

    @staticmethod
    def viewed(e: Expr, text, shape, multi=False, expanded=False, contig=False) -> Expr:
        return Expr(text, shape, e.rg, e.group, e.saves, e.out_saved, contig, True,
                    e.multi or multi, e.expanded or expanded, e.alias)

    def random_shape(self):
        r = self.r
        nd = r.choice([0, 1, 1, 2, 2, 2, 3])
        return tuple(r.choice((1, 2, 3, 3, 4)) for _ in range(nd))

    def pick_shape(self):
        if self.vars and self.r.random() < 0.7:
            return self.vars[self.r.choice(list(self.vars))].shape
        return self.random_shape()

    # ------------------------------------------------------------ expressions
    def e(self, shape, depth=0) -> Expr:
        r = self.r
        if depth >= 2:
            return self.e_leafish(shape)
        kinds = ["var", "var", "view", "view", "unary", "unary", "binary", "binary", "binary",
                 "reduce", "matmul", "custom", "detach", "scalar"]
        for _ in range(6):
            kind = r.choice(kinds)
            e = getattr(self, "e_" + kind)(shape, depth)
            if e is not None:
                return e
        return self.e_leafish(shape)

    def e_leafish(self, shape) -> Expr:
        e = self.e_var(shape, 3) or self.e_view(shape, 3)
        if e is not None:
            return e
        return self.e_fill(shape)

    def e_fill(self, shape) -> Expr:
        """A value of `shape` from any variable: a reduction expanded."""
        name = self.r.choice(list(self.vars))
        src = self.ref(name)
        red = self.r.choice([".sum()", ".mean()", ".tanh().mean()"])
        s = self.fresh(paren(src.text) + red, (), [src])
        if shape == ():
            return s
        dims = ", ".join(map(str, shape))
        if self.r.random() < 0.5:
            ex = self.viewed(s, f"{s.text}.expand({dims})", shape, expanded=True)
            return ex
        return self.fresh(f"({s.text} * sg.ones({dims}, dtype=np.float64))", shape, [s],
                          saved_ops=[])

    def e_var(self, shape, depth):
        names = [n for n, v in self.vars.items() if v.shape == shape]
        if not names:
            return None
        return self.ref(self.r.choice(names))

    def e_scalar(self, shape, depth):
        if shape != ():
            return None
        names = list(self.vars)
        src = self.ref(self.r.choice(names))
        if not src.shape:
            return src
        form = self.r.choice(["sum", "mean", "amax", "max", "prod", "norm", "var", "index"])
        t = paren(src.text)
        if form == "index":
            idx = ", ".join(str(self.r.randrange(n)) for n in src.shape)
            return self.viewed(src, f"{t}[{idx}]", ())
        if form in ("var",) and size(src.shape) < 2:
            form = "sum"
        text = {"sum": f"{t}.sum()", "mean": f"{t}.mean()", "amax": f"{t}.amax()",
                "max": f"{t}.max()", "prod": f"{t}.tanh().prod()", "norm": f"{t}.norm()",
                "var": f"{t}.var()"}[form]
        saves_in = form in ("amax", "max", "norm", "var")
        # prod saves its result, as torch's prod_backward (the eager row torch_prod)
        out = form in ("amax", "max", "norm", "prod")
        return self.fresh(text, (), [src], [src] if saves_in else [], out_saved=out)

    def e_unary(self, shape, depth):
        tmpl, s_in, s_out = self.r.choice(UNARY)
        a = self.e(shape, depth + 1)
        text = tmpl.format(paren(a.text))
        if tmpl.startswith("{0}.clone()"):
            return self.fresh(text, shape, [a], contig=a.contig)
        return self.fresh(text, shape, [a], [a] if s_in else [], out_saved=s_out)

    def bshape(self, shape):
        """A shape that broadcasts to `shape`."""
        r = self.r
        s = list(shape)
        if s and r.random() < 0.3:
            s = s[r.randrange(len(s) + 1):]
        return tuple(1 if r.random() < 0.25 else n for n in s)

    def e_binary(self, shape, depth):
        r = self.r
        tmpl, sa, sb = r.choice(BINARY)
        a = self.e(shape, depth + 1)
        if r.random() < 0.15:
            b_text = r.choice(["0.5", "2.0", "-1.5"])
            if "{b} * {b}" in tmpl or "maximum" in tmpl or "minimum" in tmpl or "sub(" in tmpl \
                    or "alpha" in tmpl:
                b_text = None
            if b_text is not None:
                text = tmpl.format(a=paren(a.text), b=b_text)
                return self.fresh(text, shape, [a])
        b = self.e(self.bshape(shape), depth + 1)
        if r.random() < 0.3 and "{a}." not in tmpl:
            a, b = b, a
        text = tmpl.format(a=paren(a.text), b=paren(b.text))
        saved = []
        if (sa == "b" and b.rg) or sa == "*":
            saved.append(a)
        if (sb == "a" and a.rg) or (sb == "b" and b.rg) or sb == "*":
            saved.append(b)
        return self.fresh(text, shape, [a, b], saved)

    def e_reduce(self, shape, depth):
        r = self.r
        k = r.randrange(len(shape) + 1)
        n = r.choice((2, 3, 4))
        keep = r.random() < 0.25 and shape and shape[min(k, len(shape) - 1)] == 1
        if keep:
            k = min(k, len(shape) - 1)
            inner = shape[:k] + (n,) + shape[k + 1:]
        else:
            inner = shape[:k] + (n,) + shape[k:]
        a = self.e(inner, depth + 1)
        t = paren(a.text)
        kd = ", keepdim=True" if keep else ""
        # no std: the std of an expanded (equal) slice is at sqrt's kink, 0/0 in torch
        form = r.choice(["sum", "sum", "mean", "amax", "maxv", "min0", "prod", "var", "norm"])
        dim = k if r.random() < 0.7 else k - len(inner)
        text = {"sum": f"{t}.sum(dim={dim}{kd})", "mean": f"{t}.mean({dim}{kd})",
                "amax": f"{t}.amax({dim}{kd})", "maxv": f"{t}.max(dim={dim}{kd}).values",
                "min0": f"{t}.min({dim}{kd})[0]", "prod": f"{t}.tanh().prod({dim}{kd})",
                "var": f"{t}.var({dim}{kd})", "std": f"({t} * {t} + 1.0).std({dim}{kd})",
                "norm": f"({t} * {t} + 0.5).norm(dim={dim}{kd})"}[form]
        saves_in = form in ("amax", "var", "std", "norm")
        out = form in ("amax", "std", "norm", "prod")
        return self.fresh(text, shape, [a], [a] if saves_in else [], out_saved=out)

    def e_matmul(self, shape, depth):
        r = self.r
        k = r.choice((1, 2, 3, 4))
        if len(shape) == 0:
            a, b = self.e((k,), depth + 1), self.e((k,), depth + 1)
            form = r.choice(["{a} @ {b}", "{a}.dot({b})"])
        elif len(shape) == 1:
            if r.random() < 0.5:
                a, b = self.e(shape + (k,), depth + 1), self.e((k,), depth + 1)
                form = r.choice(["{a} @ {b}", "{a}.mv({b})", "{a}.matmul({b})"])
            else:
                a, b = self.e((k,), depth + 1), self.e((k,) + shape, depth + 1)
                form = "{a} @ {b}"
        elif len(shape) == 2:
            a, b = self.e((shape[0], k), depth + 1), self.e((k, shape[1]), depth + 1)
            form = r.choice(["{a} @ {b}", "{a}.mm({b})", "{a}.matmul({b})"])
        else:
            a = self.e(shape[:-1] + (k,), depth + 1)
            b = self.e((k, shape[-1]) if r.random() < 0.5 else shape[:-2] + (k, shape[-1]),
                       depth + 1)
            form = "{a} @ {b}"
        text = "(" + form.format(a=paren(a.text), b=paren(b.text)) + ")"
        saved = ([a] if b.rg else []) + ([b] if a.rg else [])
        return self.fresh(text, shape, [a, b], saved, contig=True)

    def e_custom(self, shape, depth):
        name = self.r.choice(list(FUNCTIONS))
        src, nin, s_in, s_out = FUNCTIONS[name]
        if name not in self.classes:
            self.classes.append(name)
        self.features.add("custom")
        a = self.e(shape, depth + 1)
        if name == "ScaleK":
            return self.fresh(f"ScaleK.apply({a.text}, {self.r.choice(['0.5', '-2.0', '3.0'])})",
                              shape, [a])
        if nin == 2:
            b = self.e(self.bshape(shape) if self.r.random() < 0.3 else shape, depth + 1)
            if self.r.random() < 0.5:
                a, b = b, a
            return self.fresh(f"MulXY.apply({a.text}, {b.text})", shape, [a, b], [a, b])
        return self.fresh(f"{name}.apply({a.text})", shape, [a], [a] if s_in else [],
                          out_saved=s_out, contig=a.contig)

    def e_detach(self, shape, depth):
        a = self.e(shape, depth + 1)
        self.features.add("detach")
        return Expr(f"{paren(a.text)}.detach()", shape, False, a.group, frozenset(), False,
                    a.contig, True, a.multi, a.expanded, True)

    def e_view(self, shape, depth):
        names = list(self.vars)
        self.r.shuffle(names)
        for name in names[:6]:
            e = self.derive(self.ref(name), shape)
            if e is not None:
                return e
        return None

    def derive(self, v: Expr, target):
        """A view (or an indexing copy) of `v` with shape `target`, or None."""
        r = self.r
        vs, t = v.shape, paren(v.text)
        opts = []
        nd = len(vs)
        if vs == target:
            opts.append(lambda: self.viewed(v, f"{t}[:]", target) if nd else None)
            if v.contig:
                opts.append(lambda: self.viewed(v, f"{t}.reshape({', '.join(map(str, target))})"
                                                if target else f"{t}.reshape(())", target,
                                                contig=True))
            if nd == 2:
                opts.append(lambda: self.viewed(v, f"{t}.t().t()", target))
        if size(vs) == size(target) and vs != target and v.contig:
            dims = ", ".join(map(str, target)) if target else "()"
            opts.append(lambda dims=dims: self.viewed(v, f"{t}.reshape({dims})", target,
                                                      contig=True))
            if target:
                opts.append(lambda: self.viewed(v, f"{t}.view({', '.join(map(str, target))})",
                                                target, contig=True))
            if len(target) == 1 and nd > 1:
                opts.append(lambda: self.viewed(v, f"{t}.flatten()", target, contig=True))
        if nd >= 2 and sorted(vs) == sorted(target) and vs != target:
            perm = self.permutation(vs, target)
            if perm is not None:
                if nd == 2:
                    opts.append(lambda: self.viewed(v, r.choice([f"{t}.t()", f"{t}.T",
                                                                 f"{t}.transpose(0, 1)"]),
                                                    target))
                else:
                    swap = [i for i in range(nd) if perm[i] != i]
                    if len(swap) == 2:
                        opts.append(lambda swap=swap: self.viewed(
                            v, f"{t}.transpose({swap[0]}, {swap[1]})", target))
                    opts.append(lambda perm=perm: self.viewed(
                        v, f"{t}.permute({', '.join(map(str, perm))})", target))
        if len(target) == nd + 1:
            for k in range(len(target)):
                if target[k] == 1 and target[:k] + target[k + 1:] == vs:
                    form = r.choice([f"{t}.unsqueeze({k})", f"{t}.unsqueeze({k - len(target)})"]
                                    + ([f"{t}[None]"] if k == 0 else [])
                                    + ([f"{t}[:, None]"] if k == 1 else []))
                    opts.append(lambda form=form: self.viewed(v, form, target))
                    break
        if len(target) == nd - 1:
            for k in range(nd):
                if vs[:k] + vs[k + 1:] == target:
                    i = r.randrange(vs[k])
                    forms = [f"{t}.select({k}, {i})", f"{t}.select({k}, {i - vs[k]})"]
                    if k == 0:
                        forms += [f"{t}[{i}]", f"{t}[{i - vs[0]}]"]
                    if k == 1:
                        forms.append(f"{t}[:, {i}]")
                    if k == nd - 1:
                        forms.append(f"{t}[..., {i}]")
                    if vs[k] == 1:
                        forms.append(f"{t}.squeeze({k})")
                    form = r.choice(forms)
                    if r.random() < 0.08:
                        form = f"{t}.unbind({k})[{i}]"
                        opts.append(lambda form=form: self.viewed(v, form, target, multi=True))
                    else:
                        opts.append(lambda form=form: self.viewed(v, form, target))
                    break
        if len(target) == nd and vs != target and all(a <= b for a, b in zip(target, vs)):
            diff = [d for d in range(nd) if target[d] != vs[d]]
            if len(diff) == 1:
                d = diff[0]
                n, m = target[d], vs[d]
                s = r.randrange(m - n + 1)
                pre = ":, " * d
                forms = [f"{t}.narrow({d}, {s}, {n})", f"{t}[{pre}{s}:{s + n}]"]
                if d == nd - 1 and d > 0:
                    forms.append(f"{t}[..., {s}:{s + n}]")
                if -(-m // 2) == n and m > 1:
                    forms.append(f"{t}[{pre}::2]")
                if n == 1:
                    forms.append(f"{t}[{pre}{s}:{s + 1}]")
                form = r.choice(forms)
                opts.append(lambda form=form: self.viewed(v, form, target))
                if d == 0 and r.random() < 0.3:  # an index array: a copy (IndexBackward0)
                    idx = [r.randrange(m) for _ in range(n)]
                    opts.append(lambda idx=idx: self.fresh(f"{t}[{idx}]", target, [v]))
                if s == 0 and r.random() < 0.15:
                    form2 = f"{t}.split({n}, {d})[0]" if r.random() < 0.5 else \
                        f"{t}.split([{n}, {m - n}], dim={d})[0]" if m > n else None
                    if form2:
                        opts.append(lambda form2=form2: self.viewed(v, form2, target,
                                                                    multi=True))
        if len(target) >= nd and any(n > 1 for n in target) and (
                len(target) > nd or any(a == 1 and b > 1 for a, b in zip(vs, target))):
            lead = len(target) - nd
            if all(a == b or a == 1 for a, b in zip(vs, target[lead:])):
                dims = ", ".join(str(n) if (i < lead or vs[i - lead] != n or r.random() < 0.5)
                                 else "-1" for i, n in enumerate(target))
                opts.append(lambda dims=dims: self.viewed(v, f"{t}.expand({dims})", target,
                                                          expanded=True))
        if nd == 2 and vs[0] == vs[1] and target == (vs[0],):
            opts.append(lambda: self.viewed(v, f"{t}.diagonal()", target))
        r.shuffle(opts)
        for make in opts:
            e = make()
            if e is not None:
                return e
        return None

    @staticmethod
    def permutation(vs, target):
        used, perm = set(), []
        for n in target:
            for i, m in enumerate(vs):
                if m == n and i not in used:
                    used.add(i)
                    perm.append(i)
                    break
        return perm if len(perm) == len(vs) else None

    # ------------------------------------------------------------ statements
    def s_assign(self):
        shape = self.pick_shape()
        known = len(self.groups)
        e = self.e(shape)
        name = self.name()
        self.emit(f"{name} = {e.text}")
        self.commit(e)
        self.bind(name, e)
        if e.alias:  # a detach() alias: its value must not change behind the twin's back
            self.groups[e.group].frozen = True
        # hooks and retain_grad on a new tensor only (the twin's forward model of a hook
        # scales the deviation of the value from here on: no earlier use may exist)
        if e.group >= known and not e.view and e.rg and not self.in_loop:
            r = self.r.random()
            if r < 0.12:
                c = self.r.choice(["0.5", "2.0", "-1.0", "3.0"])
                self.emit(f"if {name}.requires_grad:")
                self.emit(f"    {name}.register_hook(lambda g: g * {c})")
                self.features.add("hook")
            elif r < 0.2:
                self.emit(f"if {name}.requires_grad:")
                self.emit(f"    {name}.retain_grad()")
                self.emit(f"    watched.append({name})")
                self.groups[e.group].frozen = True
                self.features.add("retain_grad")

    def writable(self, name, allow_saved=False) -> bool:
        v = self.vars[name]
        g = self.groups[v.group]
        if not v.rg or v.leaf or g.leaf or g.frozen or v.multi or v.expanded or v.alias:
            return False
        return allow_saved or not g.saved

    def s_inplace(self):
        names = [n for n in self.vars if self.writable(n)]
        if not names:
            return self.s_assign()
        name = self.r.choice(names)
        v = self.ref(name)
        r = self.r
        form = r.random()
        self.features.add("inplace")
        if form < 0.35:
            tmpl, s_e = r.choice(INPLACE_BINARY)
            e = self.e(self.bshape(v.shape))
            if v.group in e.saves or (s_e and e.group == v.group):
                return self.s_assign()
            self.emit(tmpl.format(t=name, e=e.text))
            self.commit(e)
            if s_e:
                self.groups[e.group].saved = True
        elif form < 0.6:
            tmpl, s_out = r.choice(INPLACE_UNARY)
            self.emit(tmpl.format(t=name))
            if s_out:
                self.groups[v.group].saved = True
        elif form < 0.9 and v.shape:
            # a write through a view of the target: t[idx] = e, t[idx].mul_(...), narrow
            k = r.randrange(len(v.shape))
            n = v.shape[k]
            s = r.randrange(n)
            ln = r.randint(1, n - s)
            pre = ":, " * k
            sliced = r.random() < 0.5
            idx, sub = (f"{pre}{s}:{s + ln}", v.shape[:k] + (ln,) + v.shape[k + 1:]) if sliced \
                else (f"{pre}{s}", v.shape[:k] + v.shape[k + 1:])
            how = r.random()
            if how < 0.45:
                e = self.e(self.bshape(sub)) if r.random() < 0.8 else None
                if e is not None and v.group in e.saves | {e.group}:
                    return self.s_assign()
                self.emit(f"{name}[{idx}] = {e.text if e else '0.5'}")
                if e is not None:
                    self.commit(e)
                self.features.add("setitem")
            elif how < 0.7:
                op = r.choice(["mul_(2.0)", "add_(1.0)", "tanh_()", "sin_()", "zero_()"])
                self.emit(f"{name}[{idx}].{op}")
                if op == "tanh_()":
                    self.groups[v.group].saved = True
            elif how < 0.85:
                e = self.e(self.bshape(sub))
                if v.group in e.saves | {e.group}:
                    return self.s_assign()
                self.emit(f"{name}[{idx}] += {e.text}")
                self.commit(e)
            else:
                e = self.e(self.bshape(sub))
                if v.group in e.saves | {e.group}:
                    return self.s_assign()
                if not sliced:
                    self.emit(f"{name}.select({k}, {s}).mul_({e.text})")
                else:
                    self.emit(f"{name}.narrow({k}, {s}, {ln}).mul_({e.text})")
                self.commit(e)
                self.groups[e.group].saved = True
        elif v.shape and not v.view:
            n = v.shape[0]
            idx = sorted(set(r.randrange(n) for _ in range(r.randint(1, n))))
            e = self.e((len(idx),) + v.shape[1:])
            if v.group in e.saves | {e.group}:
                return self.s_assign()
            self.emit(f"{name}[{idx}] = {e.text}")
            self.commit(e)
            self.features.add("index_put")
        else:
            e = self.e(v.shape)
            if v.group in e.saves | {e.group}:
                return self.s_assign()
            self.emit(f"{name}.copy_({e.text})")
            self.commit(e)
        return None

    def s_view(self):
        """A named view of a variable, often written into right away."""
        names = [n for n in self.vars if self.vars[n].shape]
        if not names:
            return self.s_assign()
        src = self.ref(self.r.choice(names))
        vs = src.shape
        k = self.r.randrange(len(vs))
        target = self.r.choice([vs[:k] + vs[k + 1:], vs[:k] + (max(1, vs[k] - 1),) + vs[k + 1:],
                                tuple(reversed(vs))])
        e = self.derive(src, target)
        if e is None:
            return self.s_assign()
        name = self.name("w")
        self.emit(f"{name} = {e.text}")
        self.commit(e)
        self.bind(name, e)
        self.features.add("view")
        if self.r.random() < 0.6 and self.writable(name):
            self.s_inplace_on(name)
        return None

    def s_inplace_on(self, name):
        v = self.ref(name)
        tmpl, s_e = self.r.choice(INPLACE_BINARY[:6])
        e = self.e(self.bshape(v.shape))
        if v.group in e.saves | {e.group}:
            return
        self.emit(tmpl.format(t=name, e=e.text))
        self.commit(e)
        if s_e:
            self.groups[e.group].saved = True

    def s_if(self):
        cond_src = self.ref(self.r.choice(list(self.vars)))
        t = paren(cond_src.text)
        cond = self.r.choice([f"{t}.sum() > 0", f"{t}.mean() < 0.2", f"float({t}.sum()) > -0.5",
                              f"({t} > 0).sum() >= 1"])
        shape = self.pick_shape()
        name = self.name()
        before = {g: grp.saved for g, grp in self.groups.items()}
        e1, e2 = self.branch(shape, len(self.groups)), self.branch(shape, len(self.groups))
        # one branch requiring grad, the other not: whether the name requires grad (and so
        # which tensors a later op with it saves) is known at run time only. The constant
        # branch reads a leaf (a zero term), so both require grad.
        if e1.rg != e2.rg:
            lift = self.fresh(f"{paren(e1.text if not e1.rg else e2.text)} + 0.0 * x0.sum()",
                              shape, [e2 if e1.rg else e1, self.ref("x0")])
            e1, e2 = (e1, lift) if e1.rg else (lift, e2)
        self.emit(f"if {cond}:")
        self.emit(f"{name} = {e1.text}", 2)
        self.emit("else:")
        self.emit(f"{name} = {e2.text}", 2)
        self.features.add("if")
        both = e1.saves & e2.saves
        for g in e1.saves | e2.saves:
            if g in both:
                self.groups[g].saved = True
            elif not before.get(g, False):
                self.groups[g].frozen = True  # saved in one branch only
        e = Expr(name, shape, e1.rg and e2.rg, self.group(), contig=e1.contig and e2.contig)
        self.vars[name] = Var(shape, e.group, e.rg, e.contig)
        if e1.rg != e2.rg or e1.out_saved or e2.out_saved or e1.view or e2.view:
            self.groups[e.group].frozen = True
        for b in (e1, e2):
            if b.view:  # an alias of another variable in one branch
                self.groups[b.group].frozen = True

    def branch(self, shape, known) -> Expr:
        """A branch's value: a new tensor (an alias of a variable would make the name a
        leaf, or a view, in one branch only)."""
        e = self.e(shape)
        if e.group < known:
            e = self.fresh(f"{paren(e.text)} * 1.0", shape, [e])
        return e

    def s_loop(self):
        r = self.r
        shape = self.pick_shape()
        init = self.e(shape)
        acc = self.name("acc")
        self.emit(f"{acc} = {paren(init.text)}.clone()")
        self.commit(init)
        self.bind(acc, self.fresh(acc, shape, [init], contig=init.contig))
        g0 = self.vars[acc].group
        rows = [n for n, v in self.vars.items() if len(v.shape) == len(shape) + 1 and
                v.shape[1:] == shape and n != acc]
        n = r.randint(1, 3)
        if rows:
            row = r.choice(rows)
            n = min(n, self.vars[row].shape[0])
        self.emit(f"for i in range({n}):")
        self.in_loop = True
        writes = r.random() < 0.5
        body = r.randint(1, 2)
        self.features.add("loop")
        for _ in range(body):
            saved_vars = {k: v for k, v in self.vars.items() if k != acc}
            acc_var = self.vars.pop(acc)
            e = self.e(shape, 1)
            if rows and r.random() < 0.6:
                sel = self.ref(row)
                pick = self.viewed(sel, f"{row}[i]", shape)
                e = self.fresh(f"({e.text} + {pick.text})", shape, [e, pick])
            self.vars = saved_vars
            self.vars[acc] = acc_var
            self.commit(e)
            if writes:
                form = r.choice([f"{acc}.add_({e.text})", f"{acc}.mul_(0.9).add_({e.text})",
                                 f"{acc} += {e.text} * (i + 1)", f"{acc}.sub_({e.text})"])
                self.emit(form, 2)
                if e.rg:  # an in-place write of a value requiring grad: acc requires grad
                    self.vars[acc].rg = True
            else:
                form = r.random()
                # the new acc requires grad where the old one or e does (a loop over values
                # that never require grad leaves acc a constant: the output must not rely on
                # it alone, `out.backward()` would raise)
                rg = self.vars[acc].rg or e.rg
                if form < 0.4:
                    self.emit(f"{acc} = {acc} * 0.5 + {e.text}", 2)
                    self.vars[acc] = Var(shape, self.group(), rg)
                elif form < 0.7:
                    self.emit(f"{acc} = ({acc} + {e.text}).tanh()", 2)
                    self.vars[acc] = Var(shape, self.group(), rg)
                else:
                    self.emit(f"{acc} = {acc} * {paren(e.text)}", 2)
                    # mul saves each operand for the other's gradient
                    self.groups[self.vars[acc].group].saved = True
                    if self.vars[acc].rg:
                        self.groups[e.group].saved = True
                    elif n > 1:  # saved from the second iteration on if acc requires grad
                        self.groups[e.group].frozen = True  # by then (e's or a later line's)
                    self.vars[acc] = Var(shape, self.group(), rg)
        if r.random() < 0.3:
            self.emit(f"if {acc}.sum() > 2.0:", 2)
            self.emit("break", 3)
        self.in_loop = False
        self.groups[self.vars[acc].group].frozen = True
        self.groups[g0].frozen = True

    # ------------------------------------------------------------ deliberate errors (torch raises)
    def s_violation(self):
        r = self.r
        choices = []
        leaves = [n for n, v in self.vars.items() if v.leaf]
        if leaves:
            choices += ["leaf", "view_leaf"]
        saved = [n for n in self.vars if self.writable(n, allow_saved=True) and
                 self.groups[self.vars[n].group].saved and not self.vars[n].view]
        if saved:
            choices += ["version", "version"]
        multi = [n for n, v in self.vars.items() if v.shape and v.shape[0] >= 2 and v.rg and
                 not v.leaf and not self.groups[v.group].leaf and not v.expanded and not v.alias]
        if multi:
            choices.append("multi")
        if not choices:
            return
        kind = r.choice(choices)
        if kind == "leaf":
            name = r.choice(leaves)
            self.emit(r.choice([f"{name}.add_(1.0)", f"{name}.mul_(2.0)", f"{name} += 1.0"]))
        elif kind == "view_leaf":
            name = r.choice([n for n in leaves if self.vars[n].shape] or leaves)
            if not self.vars[name].shape:
                self.emit(f"{name}.add_(1.0)")
                kind = "leaf"
            else:
                self.emit(r.choice([f"{name}[0] = 0.0", f"{name}[:1].mul_(2.0)",
                                    f"{name}.narrow(0, 0, 1).add_(1.0)"]))
        elif kind == "version":
            name = r.choice(saved)
            self.emit(r.choice([f"{name}.add_(1.0)", f"{name}.mul_(0.5)", f"{name}.zero_()",
                                f"{name}[0] = 0.0" if self.vars[name].shape else
                                f"{name}.sub_(0.1)"]))
        else:
            name = r.choice(multi)
            a, b = self.name("p"), self.name("p")
            self.emit(r.choice([f"{a}, {b} = {name}.split([1, {self.vars[name].shape[0] - 1}])",
                                f"{a}, *{b} = {name}.unbind(0)", f"{a}, {b} = {name}.chunk(2)"
                                if self.vars[name].shape[0] == 2 else
                                f"{a}, *{b} = {name}.unbind(0)"]))
            self.emit(f"{a}.mul_(2.0)")
        self.expect.append(kind)
        self.features.add("raise_" + kind)

    # ------------------------------------------------------------ the program
    def program(self) -> Program:
        r = self.r
        nleaves = r.randint(1, 3)
        shapes = []
        for i in range(nleaves):
            s = self.random_shape() if r.random() < 0.6 or not shapes else r.choice(shapes)
            shapes.append(s)
            g = self.group(leaf=True)
            self.vars[f"x{i}"] = Var(s, g, True, leaf=True)
        for i in range(nleaves):
            if r.random() < 0.1:
                c = r.choice(["2.0", "-0.5"])
                self.emit(f"if x{i}.requires_grad:")
                self.emit(f"    x{i}.register_hook(lambda g: g * {c})")
                self.features.add("leaf_hook")
        nstmts = r.randint(2, 9)
        violation_at = r.randrange(nstmts) if self.raise_mode else -1
        for k in range(nstmts):
            if k == violation_at:
                self.s_violation()
            roll = r.random()
            if roll < 0.4:
                self.s_assign()
            elif roll < 0.65:
                self.s_inplace()
            elif roll < 0.8:
                self.s_view()
            elif roll < 0.9:
                self.s_if()
            else:
                self.s_loop()
        # the output reads every variable's final value
        terms = []
        for name, v in self.vars.items():
            if v.leaf and r.random() < 0.7:
                continue
            t = name
            form = r.choice(["{0}.sum()", "({0} * {0}).mean()", "{0}.tanh().sum()",
                             "{0}.pow(2).sum()", "{0}.sin().mean()", "{0}.sum()"])
            coef = r.choice(["0.7", "-0.3", "1.3", "0.25", "-1.1"])
            terms.append((f"{form.format(t)} * {coef}", v.rg))
        if not any(rg for _, rg in terms):
            terms.append(("x0.sum() * 0.1", True))
        body = ["    watched = []"] + self.lines
        body.append(f"    out = {terms[0][0]}")
        for t, _ in terms[1:]:
            body.append(f"    out = out + {t}")
        body.append("    return out, watched")
        params = ", ".join(f"x{i}" for i in range(nleaves))
        head = ["import numpy as np", "", "import srcgrad as sg", ""]
        for kind in self.expect:
            head.insert(0, f"# expect: {kind}")
        for cls in self.classes:
            head += ["", FUNCTIONS[cls][0]]
        source = "\n".join(head + ["", f"def f({params}):"] + body) + "\n"
        return Program(self.seed, source, shapes, list(self.expect), self.features)


def generate(seed: int) -> Program:
    return Generator(seed).program()
