"""Program templates of issue 29 §2's Python surface (srcgrad/frontend/python_forms.py),
for the fuzzer's grammar: tests/fuzz/generator.py should draw from SURFACE_FORMS (say
one program in twenty: `surface_program(rng, seed)`), so every construct that compiles
since then is in the campaign the same day. (The generator was being rewritten on
another branch when these forms landed; the coordinator wires this in.)

Each form is a whole module: a function `f` over the arguments ARGS (the oracle's
specs: ("array", shape) or ("float",)), returning a scalar, that runs in NumPy on any
values (domains kept: `np.sin`, `x * x + 1.0`), so the oracle's usual checks apply
(value, reverse and forward gradients against central differences, second order,
and HIPS autograd's twin: so no form tests `isinstance(x, np.ndarray)` of a traced
argument, which autograd's ArrayBox answers differently).
`{c}` in a source is a constant the generator draws (a float in [0.5, 2.0]), so one
form gives many programs. Forms that depend on a row count (comprehensions over rows,
star unpacking, `max(x)`) compile in the shape-specialised variants the oracle calls.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SurfaceForm:
    name: str
    source: str  # a module defining `f`
    args: tuple  # the oracle's argument specs
    features: frozenset


def _form(name, source, args, *features):
    return SurfaceForm(name, source, tuple(args), frozenset({name, *features}))


V3 = ("array", (3,))
M23 = ("array", (2, 3))

SURFACE_FORMS = [
    _form("try_finally", '''
import numpy as np
def f(x):
    try:
        y = np.sin(x) * {c}
    finally:
        k = 2.0
    return np.sum(y * x) * k
''', [V3], "try"),
    _form("try_except_static", '''
import numpy as np
TABLE = {{"a": {c}}}
def f(x):
    try:
        p = TABLE["b"]
    except KeyError:
        p = 2.0
    else:
        p = p + 1.0
    return np.sum(x ** 2 * p)
''', [V3], "try"),
    _form("try_except_traced", '''
import numpy as np
def f(x):
    try:
        y = np.exp(np.tanh(x) * {c})
    except FloatingPointError:
        y = x
    return np.sum(y * y)
''', [V3], "try"),
    _form("fstring_keys", '''
import numpy as np
def f(x):
    d = {{f"w_{{i}}": x[i] * {c} for i in range(3)}}
    assert x.shape[0] == 3, f"three items, not {{x.shape}}"
    return d["w_0"] * d["w_2"] + d["w_{{}}".format(1)]
''', [V3], "fstring"),
    _form("isinstance_of_args", '''
import numpy as np
def g(v, p):
    s = p["a"] if isinstance(p, dict) else p
    return v[0] * s if isinstance(v, (list, tuple)) else v * s
def f(x, y):
    return np.sum(g(x, {{"a": {c}}}) * g([y, x], {c}))
''', [V3, V3], "isinstance"),
    _form("rows_comprehension", '''
import numpy as np
def f(x):
    norms = [np.sum(r * r) for r in x]
    return sum(norms) * {c} + sum(np.sum(np.sin(r)) for r in x)
''', [M23], "comprehension"),
    _form("enumerate_rows_dict", '''
import numpy as np
def f(x):
    d = {{i: np.cos(r) * {c} for i, r in enumerate(x)}}
    return np.sum(d[0] * d[1])
''', [M23], "comprehension"),
    _form("builtin_extrema", '''
import numpy as np
def f(x):
    a = max(x[0], x[1] * {c}) + min(x[1], x[2])
    b = max([x[0], x[1], x[2]]) - min(x * x)
    return a * b + max(x) + abs(x[0]) + sum([x[1], x[2]])
''', [V3], "builtin"),
    _form("max_in_loop", '''
import numpy as np
def f(x):
    best = x[0]
    for i in range(3):
        best = max(best, x[i] * {c})
    return best * x[1]
''', [V3], "builtin", "loop"),
    _form("star_unpacking", '''
import numpy as np
def f(x):
    a, *rest = x
    first, *mid, last = [x[0], x[1] * {c}, x[2]]
    return a * np.sum(np.array(rest) ** 2) + first * last + sum(mid)
''', [V3], "unpacking"),
    _form("star_calls", '''
import numpy as np
def h(a, b, c):
    return a * b + c
def v(*args, **kw):
    return sum(t * t for t in args) * kw.get("s", 1.0)
def f(x):
    return h(*x) + v(*x, s={c}) + sum(p * q for p, q in zip(*np.stack([x, x * 2.0])))
''', [V3], "unpacking"),
    _form("bound_method", '''
import numpy as np
class Sim:
    def __init__(self, dt):
        self.dt = dt
    def step(self, y):
        return y + self.dt * np.sin(y)
SIM = Sim({c} * 0.1)
def f(x):
    return np.sum(SIM.step(SIM.step(x)) ** 2)
''', [V3], "object"),
    _form("round_trip_count", '''
import numpy as np
T, DT = {c}, 0.25
def f(x):
    y = x
    for _ in range(round(T / DT)):
        y = y + DT * np.sin(y)
    return np.sum(y * y)
''', [V3], "round", "loop"),
    _form("dict_list_copies", '''
import numpy as np
P = {{"a": {c}, "b": 0.5}}
def f(x):
    Q = dict(P)
    Q["a"] = Q["a"] * x[0]
    L = list(x)
    return np.sum(Q["a"] * x ** 2 + Q["b"]) + L[0] * L[2]
''', [V3], "containers"),
    _form("early_return_after_write", '''
import numpy as np
def f(x):
    y = x.copy()
    for i in range(3):
        if y[i] > 0.0:
            y[i] = y[i] * {c}
        if np.sum(y) > 1.0:
            return np.sum(y ** 2)
    return np.sum(y)
''', [V3], "loop", "mutation"),
    _form("write_into_loop_bound", '''
import numpy as np
def f(x):
    y = x.copy()
    view = y[:2]
    for i in range(len(view)):
        y[i + 1] = y[i] * {c} + view[i]
    return np.sum(y ** 2)
''', [V3], "loop", "mutation"),
]


def surface_program(rng, seed: int) -> dict:
    """A drawn form as the fields of tests/fuzz/generator.py's Program (seed, source,
    entry, args, output, features)."""
    form = SURFACE_FORMS[rng.randrange(len(SURFACE_FORMS))]
    c = round(rng.uniform(0.5, 2.0), 3)
    return dict(seed=seed, source=form.source.format(c=c).lstrip(), entry="f",
                args=list(form.args), output="scalar", features=set(form.features))
