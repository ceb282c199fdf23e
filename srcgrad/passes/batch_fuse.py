"""Contraction fusion in a batched program (Note [Seed-linear fusion]).

Note [Seed-linear fusion]
~~~~~~~~~~~~~~~~~~~~~~~~~
Every batched value of a Jacobian or Hessian pass (Note [Batching] in
srcgrad.passes.batch) is linear in the seeds: a tangent or cotangent. The batched
program computes it op by op, and each op writes a value B times the size of the
primal one: on the MLP Hessian, `h_t = T[:, None, :] * s` (B x 32 x 640), then
`h_t @ W2`, then ten more passes over B x 32 x 640 arrays, most of them products
with primal values and sums. Written as one einsum, the same value is a chain of
contractions of one batched operand (a *root*: a seed, or a batched value this pass
did not fuse) with primal *factors*, and the contraction order can be chosen:
`einsum('zj,nj,jo->zno', T, s, W2)` contracts `s` and `W2` first (primal, small)
and then the root in one GEMM, and never writes `h_t`.

So this pass keeps a batched value that multiplies, matmuls, sums, negates,
reshapes (unit axes only) or transposes batched values and primal ones *lazily*,
as a sum of terms (coefficient, root, factors, each with einsum letters), and
writes it out where an op it cannot keep reads it, or where it is a result. Each
term becomes pairwise contractions in the cheapest order among a few candidates
(the order the ops were written in, a greedy order and NumPy's optimal path),
costed with BLAS in mind: a contraction with no letter shared by both operands and
the result is one GEMM (`tensordot`), cheap per flop; other pairs are loops
(`einsum`). Adds stay sums of terms (at most MAX_TERMS; beyond, the operands are
written out first), since `s * g_t + c * h_t` summed over an axis is two small
GEMMs where it was five passes over B-sized arrays.

Exact reassociation changes rounding only (products and sums of the same values).
Anything unexpected leaves the program as the batcher wrote it (`fuse` returns it).
"""

from __future__ import annotations

import itertools
import math

import numpy

from srcgrad import rules
from srcgrad.ir.core import Const, Op, Pack, Var, operand_vars
from srcgrad.ir.expand import Expander

MAX_TERMS = 4
MAX_FACTORS = 10
MAX_LETTERS = 40
BLAS_WEIGHT = 0.1  # a GEMM flop against one element of a loop or elementwise pass
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


class _Giveup(Exception):
    """Internal: this value is written out as the batcher wrote it."""


class _Term:
    """coef * contraction of operands [(operand, letters per axis; None: a unit axis)]:
    the first operand is the root (batched), the others primal factors."""

    def __init__(self, coef, operands):
        self.coef, self.operands = coef, operands

    def letters(self) -> set:
        return {ch for _, subs in self.operands for ch in subs if ch is not None}


class _Lin:
    """A lazy batched value: sum of terms, with `out` letters per axis of its shape."""

    def __init__(self, terms, out, cost):
        self.terms, self.out, self.cost = terms, out, cost


def fuse(ops: list, results: list, batched: set, shapes: dict, namer, primal_weight=1.0) -> tuple:
    """(ops, rename): `ops` with seed-linear chains fused (Note [Seed-linear fusion]).
    `shapes`: every value's batched shape; `rename`: results the program computes under
    another name; `primal_weight`: what a primal op costs against a batched one (the
    primal runs once per call, Note [Hoisting the primal]). Returns `ops` unchanged
    when nothing is gained or anything is unknown."""
    try:
        return _Fuser(batched, shapes, namer, primal_weight).run(ops, results)
    except _Giveup:
        return ops, {}


class _Fuser:
    def __init__(self, batched, shapes, namer, primal_weight):
        self.batched, self.shapes, self.namer = batched, shapes, namer
        self.primal_weight = primal_weight
        self.size: dict = {}  # letter -> its size
        self.fresh_ids = itertools.count()
        self.lazy: dict = {}  # Var -> _Lin
        self.rename: dict = {}  # a written-out lazy Var -> the Var holding it
        self.out: list = []
        self.expander = Expander(namer, self.out)

    # ------------------------------------------------------------------ letters
    def letter(self, n: int):
        if n == 1:
            return None
        ch = next(self.fresh_ids)
        self.size[ch] = int(n)
        return ch

    def shape(self, operand) -> tuple:
        if isinstance(operand, Const):
            return numpy.shape(operand.value)
        shape = self.shapes.get(operand)
        if shape is None:
            raise _Giveup
        return tuple(shape)

    # ------------------------------------------------------------------ the walk
    def run(self, ops, results):
        fused = 0
        self.before = self.after = 0.0  # the cost model's estimate of the ops fused, and of their fusion
        for op in ops:
            op = self.mapped(op)
            lin = self.try_lazy(op)
            if lin is not None:
                self.lazy[op.outs[0]] = lin
                self.before += self.op_cost(op)
                fused += 1
                continue
            for v in list(op.operand_vars()):
                if v in self.lazy:
                    self.materialize(v, op.loc)
            op = self.mapped(op)
            if op.blocks:
                raise _Giveup  # a block reads lazy values by name: not rewritten here
            self.out.append(op)
        for r in results:
            for v in operand_vars(r):
                if v in self.lazy:
                    self.materialize(v, None)
        if not fused or self.after > 1.5 * self.before + 1000:
            raise _Giveup  # nothing to gain: the program as the batcher wrote it
        return self.out, dict(self.rename)

    def op_cost(self, op) -> float:
        """What an op the batcher wrote costs in the model of pair_cost."""
        if op.prim in ("reshape", "transpose", "matrix_transpose"):
            return 0.0
        if op.prim == "sum":
            return float(math.prod(self.shape(op.args[0])))
        out = float(math.prod(self.shape(op.outs[0])))
        if op.prim == "matmul":
            x, y = (self.shape(a) for a in op.args[:2])
            return BLAS_WEIGHT * out * (x[-1] if x else 1) + out
        return out

    def mapped(self, op):
        """`op` reading written-out values by their names (a new Op: on giving up, the
        caller's ops are returned as they were)."""
        args = tuple(self._map(a) for a in op.args)
        if all(a is b for a, b in zip(args, op.args)):
            return op
        return Op(op.prim, args, op.outs, op.loc, dict(op.attrs), op.blocks)

    def _map(self, a):
        if isinstance(a, Var):
            return self.rename.get(a, a)
        if isinstance(a, Pack):
            items = tuple(self._map(i) for i in a.items)
            return a if all(x is y for x, y in zip(items, a.items)) else Pack(items, a.style)
        return a

    def lin(self, v) -> _Lin:
        """The lazy form of batched `v` (a root if it was computed by an op)."""
        if v in self.lazy:
            return self.lazy[v]
        subs = tuple(self.letter(n) for n in self.shape(v))
        return _Lin([_Term(1, [(v, subs)])], subs, 0)

    # ------------------------------------------------------------------ lazy ops
    def try_lazy(self, op):
        if len(op.outs) != 1 or op.blocks or op.outs[0] not in self.batched:
            return None
        if op.outs[0] not in self.shapes:
            return None
        handler = _LAZY.get(op.prim)
        if handler is None:
            return None
        lin = handler(self, op, *op.args)
        if lin is None:
            return None
        if len(lin.terms) > MAX_TERMS or any(
                len(t.operands) > MAX_FACTORS + 1 or len(t.letters()) > MAX_LETTERS for t in lin.terms):
            return None
        if tuple(self.size.get(ch, 1) for ch in lin.out) != self.shape(op.outs[0]):
            raise _Giveup  # a bookkeeping error must never reach generated code
        return lin

    def is_b(self, a) -> bool:
        return isinstance(a, Var) and (a in self.batched or a in self.lazy)

    def primal(self, a) -> bool:
        """A primal operand a factor may be: an array Var (a 0-d one may be a Python
        float, which einsum would make a float64 array), or a numeric constant."""
        return (isinstance(a, Var) and a not in self.batched and len(self.shapes.get(a, ())) > 0) or (
            isinstance(a, Const) and isinstance(a.value, (int, float, complex, numpy.ndarray,
                                                          numpy.number)) and not isinstance(a.value, bool))

    def scale(self, lin, coef, extra_cost):
        return _Lin([_Term(t.coef * coef, t.operands) for t in lin.terms], lin.out,
                    lin.cost + extra_cost)

    def with_factor(self, lin, operand, subs, out, cost):
        return _Lin([_Term(t.coef, t.operands + [(operand, subs)]) for t in lin.terms], out,
                    lin.cost + cost)

    def renamed(self, lin, out):
        """`lin`'s terms with its out letters renamed to `out` and every other letter fresh."""
        terms = []
        for t in lin.terms:
            mapping = {a: b for a, b in zip(lin.out, out) if a is not None}
            for ch in t.letters():
                if ch not in mapping:
                    mapping[ch] = self.letter(self.size[ch])
            terms.append(_Term(t.coef, [(o, tuple(None if ch is None else mapping[ch] for ch in s))
                                        for o, s in t.operands]))
        return terms

    # ------------------------------------------------------------------ writing out
    def materialize(self, v, loc):
        lin = self.lazy.pop(v)
        self.expander.loc = loc
        value = None
        for term in lin.terms:
            part = self.emit_term(term, lin.out)
            if value is not None:
                value = self.call("add", value, part)
                self.shapes[value] = self.shapes[part]
                self.after += math.prod(self.shapes[part])
            else:
                value = part
        full = self.shape(v)
        if self.shape(value) != full:  # the unit axes back
            value = self.call("reshape", value, full)
            self.shapes[value] = full
        self.rename[v] = value
        self.batched.add(value)

    def call(self, prim, *args):
        v = self.expander.apply(rules.RULES[prim], list(args), {})
        if not isinstance(v, Var):
            raise _Giveup
        self.out[-1].attrs["backward"] = True
        return v

    def emit_term(self, term, out):
        want = tuple(ch for ch in out if ch is not None)
        operands = []
        for operand, subs in term.operands:  # unit axes squeezed: a letter per axis
            kept = tuple(ch for ch in subs if ch is not None)
            if len(kept) != len(subs):
                operand = self.squeezed(operand, tuple(self.size[ch] for ch in kept))
            operands.append((operand, kept))
        coef = term.coef
        if coef != 1 and len(operands) > 1:  # folded into the smallest factor
            k = min(range(1, len(operands)), key=lambda i: _numel(operands[i][1], self.size))
            factor, subs = operands[k]
            if isinstance(factor, Const):
                factor = Const(coef * factor.value)
            else:
                factor = self.call("multiply", Const(coef), factor)
                self.shapes[factor] = tuple(self.size[ch] for ch in subs)
            operands[k] = (factor, subs)
            coef = 1
        subs_list = [s for _, s in operands]
        if len(operands) > 1:
            path = self.best_path(subs_list, want)
            self.after += self.path_cost(subs_list, want, path)
            value, subs = self.emit_node(_tree(subs_list, want, path), operands, want)
        else:
            value, subs = operands[0]
        if subs != want:  # a single operand: a sum or a transpose of the root
            value = self.call("einsum", _spec([subs], want), value, None, False)
            self.after += _numel(subs, self.size)
        if coef != 1:
            value = self.call("multiply", Const(coef), value)
            self.after += _numel(want, self.size)
        self.shapes[value] = tuple(self.size[ch] for ch in want)
        return value

    def emit_node(self, node, operands, order=None):
        """(value, letters) of a contraction tree node (a leaf: an operand index). The
        batched side is contracted first and leads, so its GEMM result keeps the batch
        axis first; a primal side is written in the order its GEMM reads it (no copy)."""
        if isinstance(node, int):
            return operands[node]
        left, right, kept = node
        if _has_root(right) and not _has_root(left):
            left, right = right, left
        a, sa = self.emit_node(left, operands)
        other_kept = _node_letters(right, operands)
        first = tuple(ch for ch in sa if ch in other_kept)
        b, sb = self.emit_node(right, operands, first if _has_root(left) else None)
        natural = tuple(dict.fromkeys(ch for ch in sa + sb if ch in kept))
        order = tuple(order or ())
        return self.contract(a, sa, b, sb, order + tuple(ch for ch in natural if ch not in order))

    def squeezed(self, operand, shape):
        if isinstance(operand, Const):
            return Const(numpy.reshape(operand.value, shape))
        v = self.call("reshape", operand, shape)
        self.shapes[v] = shape
        return v

    def contract(self, a, sa, b, sb, keep):
        """(value, letters): a and b contracted to the letters `keep` (in that order)."""
        if _is_gemm(sa, sb, keep):
            summed = [ch for ch in sa if ch in set(sb)]  # in the batched side's order
            ax = tuple(sa.index(ch) for ch in summed)
            bx = tuple(sb.index(ch) for ch in summed)
            got = tuple(ch for ch in sa if ch not in summed) + tuple(ch for ch in sb if ch not in summed)
            value = self.call("tensordot", a, b, (ax, bx))
            self.shapes[value] = tuple(self.size[ch] for ch in got)
            if got != keep:
                value = self.call("transpose", value, tuple(got.index(ch) for ch in keep))
        else:
            value = self.call("einsum", _spec([sa, sb], keep), a, b, False)
        self.shapes[value] = tuple(self.size[ch] for ch in keep)
        return value, keep

    # ------------------------------------------------------------------ contraction order
    def best_path(self, subs: list, want: tuple) -> list:
        """Pairs (positions in the shrinking list, as numpy.einsum_path gives them) in the
        cheapest order among: as written, greedy, NumPy's optimal path."""
        if len(subs) == 1:
            return []
        candidates = [[(0, 1)] * (len(subs) - 1), self.greedy(subs, want)]
        if len(subs) <= 6:
            try:
                views = [numpy.broadcast_to(numpy.zeros(()), tuple(self.size[ch] for ch in s))
                         for s in subs]
                path = numpy.einsum_path(_spec(subs, want), *views, optimize=("optimal", 1e18))[0]
                candidates.append([tuple(p) for p in path[1:] if len(p) == 2])
            except (ValueError, KeyError):
                pass
        valid = [c for c in candidates if len(c) == len(subs) - 1]
        return min(valid, key=lambda c: self.path_cost(subs, want, c))

    def greedy(self, subs, want):
        items, path = [(s, i == 0) for i, s in enumerate(subs)], []
        while len(items) > 1:
            best = None
            for i, j in itertools.combinations(range(len(items)), 2):
                rest = [s for k, (s, _) in enumerate(items) if k not in (i, j)]
                keep = want if len(items) == 2 else _kept(items[i][0], items[j][0], rest, want)
                cost = self.pair_cost(items[i], items[j], keep)
                connected = bool(set(items[i][0]) & set(items[j][0]))
                key = (not connected, cost)
                if best is None or key < best[0]:
                    best = (key, (i, j), keep)
            _, (i, j), keep = best
            path.append((i, j))
            root = items[i][1] or items[j][1]
            items = [it for k, it in enumerate(items) if k not in (i, j)] + [(keep, root)]
        return path

    def path_cost(self, subs, want, path):
        items, total = [(s, i == 0) for i, s in enumerate(subs)], 0.0
        for n, (i, j) in enumerate(path):
            rest = [s for k, (s, _) in enumerate(items) if k not in (i, j)]
            keep = want if n == len(path) - 1 else _kept(items[i][0], items[j][0], rest, want)
            total += self.pair_cost(items[i], items[j], keep)
            root = items[i][1] or items[j][1]
            items = [it for k, it in enumerate(items) if k not in (i, j)] + [(keep, root)]
        return total

    def pair_cost(self, a, b, keep):
        """A pair's cost: flops (a GEMM's weighted by BLAS_WEIGHT) and the elements it
        writes; a pair without the root runs once per call, not per chunk."""
        (sa, ra), (sb, rb) = a, b
        flops = math.prod(self.size[ch] for ch in set(sa) | set(sb))
        cost = (BLAS_WEIGHT * flops if _is_gemm(sa, sb, keep) else flops) + _numel(keep, self.size)
        return cost if ra or rb else cost * self.primal_weight


def _tree(subs, want, path):
    """The path as nested (left, right, kept letters) with operand indices as leaves;
    leaves with the root (index 0) are tracked by _has_root."""
    items = [(i, tuple(s)) for i, s in enumerate(subs)]
    for n, (i, j) in enumerate(path):
        (ni, si), (nj, sj) = items[i], items[j]
        rest = [s for k, (_, s) in enumerate(items) if k not in (i, j)]
        keep = tuple(want) if n == len(path) - 1 else _kept(si, sj, rest, want)
        items = [it for k, it in enumerate(items) if k not in (i, j)] + [((ni, nj, frozenset(keep)), keep)]
    return items[0][0]


def _has_root(node) -> bool:
    return node == 0 if isinstance(node, int) else _has_root(node[0]) or _has_root(node[1])


def _node_letters(node, operands) -> set:
    return set(operands[node][1]) if isinstance(node, int) else set(node[2])


def _is_gemm(sa, sb, keep) -> bool:
    """One tensordot: letters both sides share are summed, every other letter kept."""
    shared = set(sa) & set(sb)
    free = (set(sa) | set(sb)) - shared
    return bool(shared) and not (shared & set(keep)) and free == set(keep) and \
        len(set(sa)) == len(sa) and len(set(sb)) == len(sb)


def _numel(subs, size) -> int:
    return math.prod(size[ch] for ch in subs)


def _kept(sa, sb, rest, want) -> tuple:
    """The letters of a pair's result: those a later operand or the result reads."""
    later = set(want).union(*[set(s) for s in rest]) if rest else set(want)
    seen = []
    for ch in tuple(sa) + tuple(sb):
        if ch in later and ch not in seen:
            seen.append(ch)
    return tuple(seen)


def _spec(subs: list, want: tuple) -> str:
    letters = sorted({ch for s in subs for ch in s} | set(want))
    if len(letters) > len(_LETTERS):
        raise _Giveup
    name = dict(zip(letters, _LETTERS))
    return ",".join("".join(name[ch] for ch in s) for s in subs) + "->" + "".join(name[ch] for ch in want)


# ---------------------------------------------------------------------- lazy forms
def _multiply(f, op, x, y):
    if f.is_b(x) and f.is_b(y):
        return None
    if not f.is_b(x):
        x, y = y, x
    if not f.is_b(x) or not f.primal(y):
        return None
    lin = f.lin(x)
    out_shape = f.shape(op.outs[0])
    cost = math.prod(out_shape)
    if isinstance(y, Const) and numpy.ndim(y.value) == 0 and isinstance(y.value, (int, float)):
        if len(lin.out) != len(out_shape):
            return None
        return f.scale(lin, y.value, cost)
    yshape, rank = f.shape(y), len(out_shape)
    if len(lin.out) != rank or len(yshape) > rank or (len(yshape) == rank and yshape[0] != 1):
        return None
    out, ysubs = list(lin.out), []
    for i, n in enumerate(yshape):
        j = rank - len(yshape) + i
        if n == 1:
            ysubs.append(None)
        elif out[j] is not None:
            if f.size[out[j]] != n:
                return None
            ysubs.append(out[j])
        else:
            out[j] = f.letter(n)
            ysubs.append(out[j])
    return f.with_factor(lin, y, tuple(ysubs), tuple(out), cost)


def _divide(f, op, x, y):
    if f.is_b(x) and isinstance(y, Const) and isinstance(y.value, (int, float)) \
            and not isinstance(y.value, bool) and y.value != 0:
        lin = f.lin(x)
        if len(lin.out) == len(f.shape(op.outs[0])):
            return f.scale(lin, 1 / y.value, math.prod(f.shape(op.outs[0])))
    return None


def _negative(f, op, x):
    return f.scale(f.lin(x), -1, math.prod(f.shape(op.outs[0])))


def _add(f, op, x, y, sign=1):
    if not (f.is_b(x) and f.is_b(y)):
        return None
    out_shape = f.shape(op.outs[0])
    a = f.lin(x)
    if x is y:
        return f.scale(a, 1 + sign, math.prod(out_shape))
    b = f.lin(y)
    if len(a.out) != len(b.out) or tuple(f.size.get(ch, 1) for ch in a.out) != out_shape \
            or tuple(f.size.get(ch, 1) for ch in b.out) != out_shape:
        return None
    terms = a.terms + [_Term(t.coef * sign, t.operands) for t in f.renamed(b, a.out)]
    return _Lin(terms, a.out, a.cost + b.cost + math.prod(out_shape))


def _subtract(f, op, x, y):
    return _add(f, op, x, y, -1)


def _matmul(f, op, x, y):
    bx, by = f.is_b(x), f.is_b(y)
    if bx == by:
        return None
    out_shape = f.shape(op.outs[0])
    if bx:
        if not f.primal(y) or len(f.shape(y)) not in (1, 2):
            return None
        lin, yshape = f.lin(x), f.shape(y)
        if len(lin.out) < 2:
            return None
        k = lin.out[-1]
        if yshape[0] != f.size.get(k, 1):
            return None
        if len(yshape) == 1:
            out, ysubs = lin.out[:-1], (k,)
        else:
            n = f.letter(yshape[1])
            out, ysubs = lin.out[:-1] + (n,), (k, n)
        cost = BLAS_WEIGHT * math.prod(out_shape) * yshape[0]
        return f.with_factor(lin, y, ysubs, out, cost)
    if not f.primal(x) or len(f.shape(x)) not in (1, 2):
        return None
    lin, xshape = f.lin(y), f.shape(x)
    if len(lin.out) < 3:
        return None
    k = lin.out[-2]
    if xshape[-1] != f.size.get(k, 1):
        return None
    if len(xshape) == 1:
        out, xsubs = lin.out[:-2] + lin.out[-1:], (k,)
    else:
        m = f.letter(xshape[0])
        out, xsubs = lin.out[:-2] + (m,) + lin.out[-1:], (m, k)
    cost = BLAS_WEIGHT * math.prod(out_shape) * xshape[-1]
    return f.with_factor(lin, x, xsubs, out, cost)


def _sum(f, op, x, axis, keepdims):
    if not f.is_b(x) or not isinstance(axis, Const) or not isinstance(keepdims, Const):
        return None
    lin = f.lin(x)
    rank = len(lin.out)
    value = axis.value
    axes = value if isinstance(value, tuple) else (value,)
    if value is None or not all(isinstance(a, int) for a in axes):
        return None
    axes = {a % rank for a in axes}
    if 0 in axes:
        return None  # the batch axis is never summed
    if keepdims.value:
        out = tuple(None if i in axes else ch for i, ch in enumerate(lin.out))
    else:
        out = tuple(ch for i, ch in enumerate(lin.out) if i not in axes)
    return _Lin(lin.terms, out, lin.cost + math.prod(f.shape(x)))


def _reshape(f, op, x, shape):
    """A reshape that only inserts or removes unit axes relabels; any other is kept."""
    lin = f.lin(x)
    new = f.shape(op.outs[0])
    if tuple(n for n in new if n != 1) != tuple(n for n in f.shape(x) if n != 1):
        return None
    letters = iter(ch for ch in lin.out if ch is not None)
    return _Lin(lin.terms, tuple(next(letters) if n != 1 else None for n in new), lin.cost)


def _transpose(f, op, x, axes):
    if not isinstance(axes, Const) or axes.value is None:
        return None
    lin = f.lin(x)
    perm = tuple(int(a) % len(lin.out) for a in axes.value)
    if len(perm) != len(lin.out) or perm[0] != 0:
        return None
    return _Lin(lin.terms, tuple(lin.out[a] for a in perm), lin.cost)


def _matrix_transpose(f, op, x):
    lin = f.lin(x)
    if len(lin.out) < 3:
        return None
    return _Lin(lin.terms, lin.out[:-2] + (lin.out[-1], lin.out[-2]), lin.cost)


_LAZY = {"multiply": _multiply, "divide": _divide, "negative": _negative, "add": _add,
         "subtract": _subtract, "matmul": _matmul, "sum": _sum, "reshape": _reshape,
         "transpose": _transpose, "matrix_transpose": _matrix_transpose}
