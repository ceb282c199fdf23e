"""Judge one generated program (tests/eager_fuzz/generator.py) against central differences.

For a program `f(*leaves) -> (out, watched)`:

* `backward`: leaves requiring grad, `out.backward()`; each leaf's `.grad` (None: zeros) and
  each retained tensor's `.grad`. The forward value must equal that of the `sg.no_grad()`
  run at the same point.
* `grad`: fresh leaves, `sg.autograd.grad(out, leaves, allow_unused=True)`.
* `second`: `sg.autograd.grad(..., create_graph=True)`, then the gradient of `<g, w>`
  (a Hessian-vector product) against central differences of the first-order gradient.

The reference is the *FD twin* of the program: the same text run under `sg.no_grad()` on
leaves that do not require grad, with the constructs whose gradient is not the derivative
of the value replaced by their forward model (an AST rewrite, see `Twin`):
`t.register_hook(lambda g: g * c)` scales t's deviation from its value at the base point by
c (the gradient through t times c), `t.detach()` is the value recorded at the base point
(a constant), `t.retain_grad()` is a probe site where a perturbation is added (the
gradient w.r.t. that tensor), and `if t.requires_grad:` is true. Directional derivatives
along random directions are judged against central differences at two step sizes; a
point where the two differ (a kink, a branch that flips, a loop that breaks earlier) is
discarded, as is a maximum/minimum tie at the base point that a step breaks (`Ties`) and
a non-finite value.

Outcomes: pass, wrong (a gradient or value off), crash (an exception torch would not
raise), by_design (the RuntimeError torch raises for what the program does, predicted by
the generator from the spec's rules: the version counter of a saved tensor (§6), an
in-place op on a leaf or a view of a leaf (§3), on one of several views (§6)),
deviation (the program does what torch raises for, and srcgrad did not raise), refused
(srcgrad's documented not-yet: a function outside the derivative table), discarded.
"""

from __future__ import annotations

import ast
import contextlib
import re
import time
import traceback
from dataclasses import dataclass, field

import numpy as np

import srcgrad as sg
from tests.eager_fuzz.generator import EXPECT_MESSAGES
from tests.fuzz.oracle import Hang, time_limit  # (the compiler fuzzer's)

STEPS = (1e-4, 1e-5)
TOL = 1e-5  # |ad - fd| <= TOL * scale
AGREE = 1e-6  # the two step sizes agree within AGREE * scale, else discard
VALUE_TOL = 1e-9


class Discard(Exception):
    pass


class Refusal(Exception):
    pass


@dataclass
class Failure:
    check: str  # backward | grad | second | retain | value | no_grad
    outcome: str  # wrong | crash | deviation | by_design | refused
    klass: str
    detail: str = ""

    def signature(self) -> tuple:
        return (self.check, self.outcome, self.klass)


@dataclass
class Result:
    outcome: str
    reason: str = ""
    failures: list = field(default_factory=list)
    seconds: float = 0.0


# ---------------------------------------------------------------- the FD twin
class Twin(ast.NodeTransformer):
    """The forward model of hooks, detach and retain_grad (see the module docstring).
    `only_detach`: the autograd program with its detach() values recorded/replayed (the
    second-order reference differentiates the gradient with detached values constant)."""

    def __init__(self, only_detach=False):
        self.only_detach = only_detach

    def visit_ClassDef(self, node):
        return node  # a custom Function's forward/backward run as written (the model is f's)

    def visit_If(self, node):
        self.generic_visit(node)
        t = node.test
        if not self.only_detach and isinstance(t, ast.Attribute) and t.attr == "requires_grad":
            node.test = ast.Constant(True)
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        f = node.func
        if isinstance(f, ast.Attribute) and self.only_detach:
            if f.attr == "detach" and not node.args:
                return ast.Call(ast.Name("_fd_const", ast.Load()), [f.value], [])
        elif isinstance(f, ast.Attribute):
            if f.attr == "register_hook" and len(node.args) == 1:
                return ast.Call(ast.Name("_fd_scale", ast.Load()), [f.value, node.args[0]], [])
            if f.attr == "retain_grad" and not node.args:
                return ast.Call(ast.Name("_fd_probe", ast.Load()), [f.value], [])
            if f.attr == "detach" and not node.args:
                return ast.Call(ast.Name("_fd_const", ast.Load()), [f.value], [])
        return node


class Model:
    """The twin's `_fd_*` functions: record at the base point, replay at the others."""

    def __init__(self):
        self.record = True
        self.values: list = []
        self.k = 0
        self.probe_k = 0
        self.probe = None  # (site, direction, t)

    def start(self, record: bool, probe=None):
        self.record, self.k, self.probe_k, self.probe = record, 0, 0, probe
        if record:
            self.values = []

    def _slot(self, value):
        k = self.k
        self.k += 1
        if self.record:
            self.values.append(np.array(value, copy=True))
            return self.values[-1]
        if k >= len(self.values) or self.values[k].shape != np.shape(value):
            raise Discard("the twin's path differs from the base point's")
        return self.values[k]

    def scale(self, t, hook):
        ones = sg.tensor(np.ones(t.shape))
        c = hook(ones)
        c = np.asarray(c._data if isinstance(c, sg.Tensor) else (1.0 if c is None else c))
        v0 = self._slot(t._data)
        if not self.record:
            t._data[...] = v0 + c * (t._data - v0)

    def const(self, t):
        return sg.tensor(self._slot(t._data))

    def probe_site(self, t):
        k = self.probe_k
        self.probe_k += 1
        if self.probe is not None and self.probe[0] == k:
            _, direction, step = self.probe
            if direction.shape != t.shape:
                raise Discard("probe shape differs")
            t._data[...] = t._data + step * direction


def load(source: str, twin=False, name: str = "<eager-fuzz>"):
    """`f` of the program; twin=True: the FD twin; twin="detach": detach() replayed."""
    tree = ast.parse(source)
    model = None
    if twin:
        tree = ast.fix_missing_locations(Twin(twin == "detach").visit(tree))
    ns: dict = {"__name__": "eager_fuzz_program"}
    if twin:
        model = Model()
        ns.update(_fd_scale=model.scale, _fd_const=model.const, _fd_probe=model.probe_site)
    exec(compile(tree, name, "exec"), ns)
    return ns["f"], model


def expectations(source: str) -> list:
    return re.findall(r"^# expect: (\w+)$", source, re.M)


# ---------------------------------------------------------------- helpers
def _arr(t, shape) -> np.ndarray:
    if t is None:
        return np.zeros(shape)
    return np.array(t._data if isinstance(t, sg.Tensor) else t, dtype=np.float64)


def _value(out) -> float:
    if not isinstance(out, sg.Tensor):
        raise Discard(f"output is a {type(out).__name__}")
    v = float(np.asarray(out._data))
    if not np.isfinite(v):
        raise Discard("non-finite value")
    return v


def normalize(message: str) -> str:
    m = message.splitlines()[0] if message else ""
    m = re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "N", m)
    m = re.sub(r"\(\s*N(,\s*N)*,?\s*\)|\[\s*N(,\s*N)*\s*\]", "SHAPE", m)
    return m[:150]


def _where(tb) -> str:
    frames = [f for f in traceback.extract_tb(tb) if "/srcgrad/" in f.filename.replace("\\", "/")]
    if not frames:
        return "program"
    f = frames[-1]
    return f"{f.filename.rsplit('/srcgrad/', 1)[-1]}:{f.name}"


def classify(exc: BaseException, expect: list):
    """(outcome, class) of an exception srcgrad raised."""
    msg = str(exc)
    if isinstance(exc, RuntimeError):
        for key in ("view_leaf", "leaf", "version", "multi"):
            text = EXPECT_MESSAGES[key]
            if msg.startswith(text) if "leaf" in key else text in msg:
                if key in expect:
                    return "by_design", key
                which = re.search(r"which is (output \d+ of [\w:]+)", msg)
                what = f" ({which.group(1)})" if which else (" (a leaf)" if key == "version"
                                                              else "")
                return "crash", f"unpredicted {key} error{what}"
    if isinstance(exc, (TypeError, NotImplementedError)) and (
            "not in srcgrad's derivative table" in msg or "not supported yet" in msg):
        return "refused", normalize(msg)
    if isinstance(exc, Discard):
        raise exc
    return "crash", f"{type(exc).__name__}: {normalize(msg)} @ {_where(exc.__traceback__)}"


class Ties:
    """maximum/minimum ties at the base point that a step breaks. At a tie torch gives
    each operand half the gradient (derivatives.yaml): the mean of that one op's one-sided
    slopes, but after a second tie-breaking op no mean of the composite's: at seed 208151,
    z = x.detach() - x (exactly 0) and z.maximum(0).minimum(0) is 0 on both sides of x
    (central differences 0) where torch gives z 1/2 * 1/2 of the gradient (seed 247965:
    v.maximum(v.detach()) then a minimum). The twin's run at the base point records each
    call's tied elements; a run at a moved point whose operands no longer tie there
    discards the program. A tie that stays (operands the same function of the leaves:
    the rows of an expand, v and v * 1.0) is smooth and kept."""

    def __init__(self):
        self.record = True
        self.k = 0
        self.tied: list = []

    def start(self, record: bool):
        self.record, self.k = record, 0
        if record:
            self.tied = []

    @contextlib.contextmanager
    def watch(self):
        originals = {name: getattr(sg.Tensor, name) for name in ("maximum", "minimum")}

        def wrap(name, op):
            def tied(a, b, *args, **kwargs):
                va = np.asarray(a._data)
                vb = np.asarray(b._data if isinstance(b, sg.Tensor) else b)
                k, self.k = self.k, self.k + 1
                if self.record:
                    self.tied.append(va == vb)
                elif k < len(self.tied) and np.any(self.tied[k] & (va != vb)):
                    raise Discard(f"{name}: a tie at the base point that a step breaks")
                return op(a, b, *args, **kwargs)
            return tied

        for name, op in originals.items():
            setattr(sg.Tensor, name, wrap(name, op))
        try:
            yield
        finally:
            for name, op in originals.items():
                setattr(sg.Tensor, name, op)


# ---------------------------------------------------------------- one program
class Runner:
    def __init__(self, program, rng):
        self.program = program
        self.source = program.source
        self.expect = expectations(self.source)
        self.f, _ = load(self.source)
        self.twin, self.model = load(self.source, twin=True)
        self.frozen, self.frozen_model = load(self.source, twin="detach")
        self.x = [rng.standard_normal(s) * 0.8 for s in program.shapes]
        self.ties = Ties()
        self.base = None  # the twin's value at x (check() records it before any fd)

    def leaves(self, x=None, rg=True):
        x = self.x if x is None else x
        return [sg.tensor(a.copy(), requires_grad=rg) for a in x]

    def reference(self, x, record=False, probe=None) -> float:
        self.model.start(record, probe)
        self.ties.start(record)
        with sg.no_grad(), self.ties.watch():
            out, _ = self.twin(*self.leaves(x, rg=False))
        return _value(out)

    def moved(self, u, t):
        return [a + t * d for a, d in zip(self.x, u)]

    def fd(self, u, probe=None) -> FD:
        """Central differences at both steps along leaf direction u (or at a probe site)."""
        his, los = [], []
        for h in STEPS:
            if probe is None:
                hi, lo = self.reference(self.moved(u, h)), self.reference(self.moved(u, -h))
            else:
                site, d = probe
                hi = self.reference(self.x, probe=(site, d, h))
                lo = self.reference(self.x, probe=(site, d, -h))
            his.append(hi)
            los.append(lo)
        return FD.of(his, los, self.base)


@dataclass
class FD:
    """Central differences at STEPS, with what tells whether they can judge: `bend`, the
    one-sided differences' disagreement (f(x+h) + f(x-h) - 2 f(x)) / h at each step (h f''
    where f is smooth, shrinking with h; a constant jump of the slope at a kink of the base
    point itself, where the central difference is the mean of the two one-sided slopes and
    autograd's is torch's choice of one: relu'(0) = 0), and `noise`, the rounding error of
    the central difference at the smaller step (|f| eps / h: a value of 1e50 leaves none of
    a gradient of 1 in f(x+h) - f(x-h))."""

    values: tuple
    bend: tuple = (0.0, 0.0)
    noise: float = 0.0

    @classmethod
    def of(cls, his, los, base):
        """`his`, `los`: the values at x + h and x - h for each step; `base`: at x."""
        values = tuple((a - b) / (2 * h) for a, b, h in zip(his, los, STEPS))
        bend = tuple((a + b - 2 * base) / h for a, b, h in zip(his, los, STEPS))
        size = max(abs(his[-1]), abs(los[-1]), abs(base))
        return cls(values, bend, 4 * np.finfo(np.float64).eps * size / STEPS[-1])

    def __iter__(self):
        return iter(self.values)

    @property
    def jump(self) -> float:
        """The part of the bend that does not shrink with the step: bend(h) = J + h f'' where
        f is smooth but for a kink at the base point (J its jump of slope), so J from the two
        steps. A kink with curvature beside it (bends 0.042 and 0.021 at seed 265664's probe,
        J = 0.019) is one too."""
        (b1, b2), (h1, h2) = self.bend, STEPS
        return (b2 * h1 - b1 * h2) / (h1 - h2)


def _judge(ad, fds, scale_terms, what):
    fd1, fd2 = fds
    scale = 1.0 + abs(fd2) + scale_terms
    if not (np.isfinite(ad) and np.isfinite(fd1) and np.isfinite(fd2)):
        raise Discard("non-finite derivative")
    if abs(fd1 - fd2) > AGREE * scale:
        raise Discard(f"{what}: step sizes disagree ({fd1:.6g} vs {fd2:.6g})")
    if fds.noise > 0.1 * TOL * scale:
        raise Discard(f"{what}: the value is too large for central differences")
    if abs(fd1 - fd2) > 100 * TOL * (1.0 + abs(fd1) + abs(fd2)):
        # the steps disagree with each other, whatever autograd says: fd2's error, about
        # (fd1 - fd2) / 99 where f is smooth at these steps, is over TOL of the differences'
        # own size; the function varies faster than the steps resolve (sin of a value of
        # 1e20: seeds 218966, 289157, where autograd's 3e8 in `scale` let them 'agree')
        raise Discard(f"{what}: step sizes disagree ({fd1:.6g} vs {fd2:.6g})")
    if abs(fds.jump) > AGREE * scale + 2 * fds.noise:
        raise Discard(f"{what}: a kink at the base point (one-sided differences disagree)")
    if abs(ad - fd2) > TOL * scale:
        return f"{what}: autograd {ad:.10g}, central differences {fd2:.10g}"
    return None


def _rounding_decides(run, u, ad, terms) -> bool:
    """Whether autograd's derivative along u changes by more than TOL when x moves by
    1e-10 of itself: then float64's rounding of the intermediates decides it, and no
    differences can judge it (eager fuzz seed 3302065: sin of values near 1e15, whose
    gradient of 3e16 torch 2.13 computes 10% apart from srcgrad's, and differences 3x
    apart from both). A smooth function's derivative moves by about 1e-10 there."""
    size = 1.0 + max(float(np.max(np.abs(a), initial=0.0)) for a in run.x)
    leaves = run.leaves(run.moved(u, 1e-10 * size))
    out, _ = run.f(*leaves)
    out.backward()
    moved = sum(float(np.sum(_arr(x.grad, s) * d)) for x, s, d in zip(leaves, run.program.shapes, u))
    return abs(moved - ad) > TOL * (1.0 + abs(ad) + terms)


def check(program, *, second=None, timeout: float = 20.0, seed_data=None) -> Result:
    start = time.monotonic()
    rng = np.random.default_rng(program.seed if seed_data is None else seed_data)
    try:
        with time_limit(timeout):
            result = _check(program, rng, second)
    except Discard as e:
        result = Result("discarded", reason=str(e))
    except Hang:
        result = Result("crash", failures=[Failure("all", "crash", "timeout",
                                                    f"program ran past {timeout:g}s")])
    result.seconds = time.monotonic() - start
    return result


def _fail(check_name, exc, expect) -> Result:
    outcome, klass = classify(exc, expect)
    detail = f"{type(exc).__name__}: {str(exc)[:300]}"
    if outcome == "by_design":
        return Result("by_design", reason=klass)
    if outcome == "refused":
        return Result("refused", reason=klass)
    return Result(outcome, failures=[Failure(check_name, outcome, klass, detail)])


def _check(program, rng, second) -> Result:
    run = Runner(program, rng)
    shapes = program.shapes
    if second is None:
        second = program.seed % 3 == 0
    # a hook fires again in the second backward (torch too): the Hessian of the hooked
    # program is not the derivative of its hooked gradient
    second = second and "register_hook" not in program.source
    # 1. backward() (the forward in grad mode first: by-design errors surface here)
    try:
        leaves = run.leaves()
        out, watched = run.f(*leaves)
        value = _value(out)
        out.backward()
        grads = [_arr(x.grad, s) for x, s in zip(leaves, shapes)]
        wgrads = [(_arr(w._grad, w.shape), w.shape) for w in watched]
    except Discard:
        raise
    except Exception as e:  # noqa: BLE001 - judged
        return _fail("backward", e, run.expect)
    if run.expect:
        return Result("deviation", failures=[Failure(
            "backward", "deviation", f"no error where torch raises ({', '.join(run.expect)})",
            "torch: " + "; ".join(EXPECT_MESSAGES[k] for k in run.expect))])
    try:
        base = run.base = run.reference(run.x, record=True)
    except Discard:
        raise
    except Exception as e:  # noqa: BLE001
        r = _fail("no_grad", e, [])
        r.outcome = "crash" if r.outcome in ("by_design", "crash") else r.outcome
        return r
    failures = []
    if abs(value - base) > VALUE_TOL * (1 + abs(base)):
        failures.append(Failure("value", "wrong", "forward value differs from no_grad's",
                                f"grad mode {value!r}, no_grad {base!r}"))
    # 2. first-order gradients against central differences
    for _ in range(2):
        u = [rng.standard_normal(s) for s in shapes]
        ad = sum(float(np.sum(g * d)) for g, d in zip(grads, u))
        terms = sum(float(np.sum(np.abs(g * d))) for g, d in zip(grads, u))
        msg = _judge(ad, run.fd(u), terms, "backward")
        if msg and _rounding_decides(run, u, ad, terms):
            raise Discard("backward: the derivative moves by more than the tolerance when x "
                          "moves by 1e-10 of itself (float64's rounding decides it)")
        if msg:
            failures.append(Failure("backward", "wrong", "gradient differs", msg))
            break
    # 3. retained grads against a perturbation at their probe sites
    for k, (wg, wshape) in enumerate(wgrads):
        d = rng.standard_normal(wshape)
        ad = float(np.sum(wg * d))
        msg = _judge(ad, run.fd(None, probe=(k, d)), float(np.sum(np.abs(wg * d))), "retain")
        if msg:
            failures.append(Failure("retain", "wrong", "retained grad differs", msg))
    # 4. sg.autograd.grad
    try:
        leaves = run.leaves()
        out, _ = run.f(*leaves)
        gs = sg.autograd.grad(out, leaves, allow_unused=True)
        g2 = [_arr(g, s) for g, s in zip(gs, shapes)]
    except Discard:
        raise
    except Exception as e:  # noqa: BLE001
        r = _fail("grad", e, run.expect)
        return Result(r.outcome, r.reason, failures + r.failures)
    for a, b in zip(grads, g2):
        if not _same(a, b):
            failures.append(Failure("grad", "wrong", "autograd.grad differs from backward()",
                                    f"max diff {np.max(np.abs(a - b)):.3g}"))
            break
    # 5. second order
    if second and not failures:
        try:
            msg = _second(run, rng, grads)
        except Discard:
            msg = None
        except Exception as e:  # noqa: BLE001
            r = _fail("second", e, run.expect)
            return Result(r.outcome, r.reason, failures + r.failures)
        if msg:
            failures.append(Failure("second", "wrong", msg.split(":")[0], msg))
    if failures:
        return Result(failures[0].outcome, failures=failures)
    return Result("pass")


def _same(a, b) -> bool:
    """Two gradients of the same program at the same point (summation order may differ)."""
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=1e-8, atol=1e-10 * (
        1 + float(np.max(np.abs(a), initial=0.0)))))


def _first(run, x, record=False) -> list:
    """The first-order gradient at x, detach() values as at the base point."""
    run.frozen_model.start(record)
    leaves = run.leaves(x)
    out, _ = run.frozen(*leaves)
    gs = sg.autograd.grad(out, leaves, allow_unused=True)
    return [_arr(g, s) for g, s in zip(gs, run.program.shapes)]


def _second(run, rng, grads):
    shapes = run.program.shapes
    leaves = run.leaves()
    out, _ = run.f(*leaves)
    gs = sg.autograd.grad(out, leaves, create_graph=True, allow_unused=True)
    got = [_arr(g, s) for g, s in zip(gs, shapes)]
    for a, b in zip(got, grads):
        if not _same(a, b):
            return "create_graph first order: differs from backward()"
    w = [rng.standard_normal(s) for s in shapes]
    s = None
    for g, wi in zip(gs, w):
        if g is not None and g.requires_grad:
            term = (g * sg.tensor(wi)).sum()
            s = term if s is None else s + term
    if s is None:
        hv = [np.zeros(sh) for sh in shapes]
    else:
        hs = sg.autograd.grad(s, leaves, allow_unused=True)
        hv = [_arr(h, sh) for h, sh in zip(hs, shapes)]
    u = [rng.standard_normal(sh) for sh in shapes]
    ad = sum(float(np.sum(h * d)) for h, d in zip(hv, u))
    g0 = _first(run, run.x, record=True)

    def dot(gs):
        return sum(float(np.sum(a * wi)) for a, wi in zip(gs, w))

    his, los = [], []
    for h in STEPS:
        his.append(dot(_first(run, run.moved(u, h))))
        los.append(dot(_first(run, run.moved(u, -h))))
    terms = sum(float(np.sum(np.abs(h * d))) for h, d in zip(hv, u))
    return _judge(ad, FD.of(his, los, dot(g0)), terms, "second order (Hessian-vector product)")


def repro(program, failure: Failure) -> str:
    return (f"# seed {program.seed}; check {failure.check}: {failure.outcome}: {failure.klass}\n"
            f"# {failure.detail}\n# leaves: shapes {program.shapes}, "
            f"np.random.default_rng({program.seed}).standard_normal(shape) * 0.8\n"
            + program.source)
