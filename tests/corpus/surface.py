"""User functions for tests/test_functions_and_containers.py and tests/test_mutation.py.

They live in a module file so `inspect.getsource` reads them as a user's file would be
read. Each is plain NumPy: the tests run it directly for finite differences.
"""

import math

import numpy as np

# ---------------------------------------------------------------- functions


def closure_over_argument(x):
    def scaled(v):
        return v * x  # x: the differentiated argument, captured
    return np.sum(scaled(np.sin(x)) + scaled(2.0))


def closure_late_binding(x):
    a = x * 2.0

    def f():
        return a * a
    a = x + 1.0  # closures capture the variable: f sees this binding
    return np.sum(f())


def nonlocal_accumulator(x):
    total = 0.0

    def add(v):
        nonlocal total
        total = total + np.sum(v * v)
    add(x)
    add(np.sin(x))
    return total


def local_lambda(x):
    sq = lambda v: v * v  # noqa: E731
    twice = lambda v, k=2.0: k * v  # noqa: E731
    return np.sum(twice(sq(x)) + sq(3.0))


module_lambda = lambda x: np.sum(np.exp(x) * x)  # noqa: E731


def calls_module_lambda(x):
    return module_lambda(x * 2.0)


def _inner(x, scale=1.0, shift=0.0, power=2):
    return scale * (x + shift) ** power


def _forward(x, **kw):
    return _inner(x, **kw)


def kwargs_forwarding(x, y):
    return np.sum(_forward(x, scale=y, shift=0.5) + _forward(y, power=3))


def _star(*parts, weight=1.0):
    return weight * sum(p * p for p in parts)


def varargs_and_keywords(x, y):
    return np.sum(_star(x, y, weight=0.5) + _star(x))


def default_arguments(x, k=3.0):
    return np.sum(_inner(x, k))


def _power(x, n):
    return 1.0 if n == 0 else x * _power(x, n - 1)


def recursion(x):
    return np.sum(_power(x, 5))


def _forever(x):
    return _forever(x * 2.0)


def unbounded_recursion(x):
    return np.sum(_forever(x))


def nested_recursion(x):
    def fact_poly(v, n):
        return v if n <= 1 else v * fact_poly(v, n - 1) * n
    return np.sum(fact_poly(x, 4))


def attribute_and_math(x):
    return np.sum(x * CFG.scale) * math.exp(CFG.bias) + math.pi * np.sum(x)


class Config:
    scale = 1.5
    bias = 0.25


CFG = Config()


def math_on_scalars(a, b):
    s = math.sin(a) * math.cos(b) + math.exp(-a * b)
    s = s + math.tanh(a) + math.sqrt(b * b + 1.0) + math.log(b * b + 2.0)
    return s + math.atan(a) * math.log1p(b * b) + math.fabs(a - 3.0)


# ---------------------------------------------------------------- containers


def tuple_return(x):
    return (x * 2.0, np.sum(x))


def list_append_stack(x):
    rows = []
    rows.append(x * 1.0)
    rows.append(x * x)
    rows += [x * 3.0]
    rows.extend([np.sin(x)])
    out = np.stack(rows)
    return np.sum(out * out)


def list_item_assignment(x):
    parts = [x, x * 2.0, x * 3.0]
    parts[1] = np.cos(x)
    parts[-1] = parts[0] * parts[1]
    return np.sum(np.concatenate(parts))


def dict_overwrite(x):
    d = {"a": x, "b": x * 2.0}
    d["a"] = np.exp(x)  # overwrite
    d["c"] = d["a"] * d["b"]
    total = sum(np.sum(v) * len(k) for k, v in d.items())
    return total + sum(np.sum(v) for v in d.values()) + len(d.keys())


def comprehensions(x, ws):
    hs = [np.tanh(w * x) for w in ws]
    sq = sum(h * h for h in hs if h is not None)
    named = {"h" + str(i): h for i, h in enumerate(hs)}
    return np.sum(sq) + np.sum(np.concatenate([named["h0"], named["h1"]]))


def params_dict(params, x):
    h = np.tanh(x @ params["W"] + params["b"])
    return np.sum(h * h) + np.sum(params["layers"][0] * params["layers"][1])


def list_argument(xs):
    return np.sum(np.stack(xs) ** 2) + np.sum(xs[0] * xs[2])


def container_methods(x):
    lst = [x]
    lst.insert(0, x * 2.0)
    last = lst.pop()
    d = {}
    d.setdefault("a", last)
    d.update({"b": lst[0]})
    return np.sum(d.get("a") * d["b"]) + np.sum(d.get("z", 1.0))


# ---------------------------------------------------------------- mutation


def subscript_writes(x):
    y = x * 1.0
    y[0] = 2.0 * x[1]
    y[1:3] = np.sin(x[1:3])
    y[3] += x[0] * x[0]
    return np.sum(y * y)


def subscript_2d(a):
    b = a + 0.0
    b[0, 1] += a[1, 0] * 3.0
    b[:, 0] = b[:, 1] * 2.0
    b[1] *= 0.5
    return np.sum(b ** 3)


def mask_write(x):
    y = x * 2.0
    y[x > 0] = np.sqrt(x[x > 0])
    y[y < -1.0] = 0.0
    return np.sum(y * x)


def write_through_view(b):
    c = b * 1.0
    v = c[1:]
    v *= 2.0  # changes c too
    return np.sum(c * c) + np.sum(v)


def write_through_transpose(a):
    m = a * 1.0
    t = m.T
    t[0] = 0.0  # zeroes m's first column
    return np.sum(m * np.arange(1.0, 1.0 + m.size).reshape(m.shape))


def name_alias(x):
    y = x.copy()  # an ndarray: `z += x` writes into it
    z = y
    z += x  # y is z: both change
    return np.sum(y * x)


def augmented_on_argument(x):
    x += 1.0
    return np.sum(x * x)


def augmented_rebind_scalar(x):
    s = np.sum(x)
    t = 0.0
    t += s * s
    return t


def out_argument(a, b):
    c = np.zeros_like(a)
    np.multiply(a, b, out=c)
    d = np.add(c, a, out=c)
    return np.sum(c * d)


def view_then_base_write(b):
    c = b * 1.0
    v = c[:2]
    c[0] = 10.0  # v sees it
    return np.sum(v * b[:2])


def mutate_in_callee(x):
    y = x * 1.0
    _zero_first(y)
    return np.sum(y * x)


def _zero_first(a):
    a[0] = 0.0


def write_in_nested(x):
    acc = np.zeros(3)

    def put(i, v):
        acc[i] = v
    put(0, np.sum(x))
    put(2, np.sum(x * x))
    return np.sum(acc * acc)


def reshape_then_write(x):
    y = x * 1.0
    r = y.reshape(-1)
    r[0] = 0.0
    return np.sum(y)  # y may or may not see the write: refused


def reshape_write_unread(x):
    y = x * 1.0
    r = y.reshape(-1)
    r[0] = 0.0
    return np.sum(r * r)  # y is not read again: fine


def int_index_view_aug(x):
    m = np.outer(x, x)
    row = m[0]
    row += 1.0  # m[0] is a row (a view) for 2-D m, a scalar for 1-D m
    return np.sum(m)


def writes_global(x):
    GLOBAL_BUFFER[0] = np.sum(x)
    return np.sum(GLOBAL_BUFFER)


GLOBAL_BUFFER = np.zeros(3)


# ---------------------------------------------------------------- rejected


def uses_generator(x):
    def gen():
        yield x
    return np.sum(list(gen())[0])


async def uses_async(x):
    return x


def uses_global(x):
    global GLOBAL_BUFFER
    GLOBAL_BUFFER = x
    return np.sum(x)


def uses_try(x):
    try:
        return np.sum(x)
    except ValueError:
        return 0.0


def calls_without_source(x):
    return np.sum(np.vectorize(math.exp)(x))


# ---------------------------------------------------------------- mutation and control flow


def write_in_branch(x):
    y = x * 1.0
    if np.sum(x) > 0:
        y[0] = y[1] * x[2]
    else:
        y[1:] *= 3.0
    return np.sum(y * y)


def write_in_loop(x):
    y = x * 1.0
    for i in range(3):
        y[i] = y[i] * 2.0 * x[i]
    return np.sum(y)


def append_in_loop(x):
    lst = []
    for i in range(2):
        lst.append(x[i] * x)
    return np.sum(np.stack(lst))


def inplace_sort_and_fill(x):
    y = x * 1.0
    y.sort()  # in place, as NumPy does
    z = x * 2.0
    w = z[1:]
    w.fill(0.5)  # through a view: z changes
    return np.sum(y * np.arange(1.0, 1.0 + y.size)) + np.sum(z * z)
