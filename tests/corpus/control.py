"""Programs with data-dependent control flow, compiled in tests/test_control_flow.py."""

import numpy as np


def branch(x):
    if np.sum(x) > 0:
        y = np.sin(x) * 2.0
    else:
        y = np.cos(x)
    return np.sum(y * x)


def early_return(x):
    s = np.sum(x)
    if s > 0:
        return np.sum(x ** 2)
    return np.sum(np.exp(x))


def loop(x, W):
    h = x
    for t in range(5):
        h = np.tanh(W @ h)
    return np.sum(h)


def running_logsumexp(x):
    m = x[0]
    s = 0.0
    for i in range(x.shape[0]):
        xi = x[i]
        if xi > m:
            s = s * np.exp(m - xi) + 1.0
            m = xi
        else:
            s = s + np.exp(xi - m)
    return m + np.log(s)


def while_loop(x):
    n = 0
    y = x
    while np.sum(y) < 100.0:
        y = y * 1.5 + 0.1
        n = n + 1
    return np.sum(y * y)


def rows(x, w):
    total = 0.0
    for row in x:
        total = total + np.sum(np.sin(row) * w)
    return total


def with_continue(x):
    total = 0.0
    for i in range(x.shape[0]):
        if x[i] < 0:
            continue
        total = total + x[i] ** 2
    return total


def with_break(x):
    total = 0.0
    for i in range(x.shape[0]):
        total = total + np.sin(x[i])
        if total > 1.0:
            break
    return total * 2.0


def while_break(x):
    y = x
    while True:
        y = y * 1.1
        if np.sum(y) > 10.0:
            break
    return np.sum(y ** 2)


def ifexp_and_or(x, y):
    a = np.sum(x)
    b = np.sum(y)
    z = x * 2.0 if a > 0 and b > 0 else y * 3.0
    w = np.sin(y) if not (a > 1 or b < -1) else np.cos(x)
    return np.sum(z * w)


def elif_chain(x):
    s = np.sum(x)
    if s > 1:
        r = x ** 2
    elif s > -1:
        r = np.sin(x)
    else:
        r = -x
    return np.sum(r)


def nested(x, W):
    h = x
    for i in range(3):
        for j in range(2):
            h = np.tanh(W @ h) + h * 0.5
    return np.sum(h)


def walrus(x):
    n = 0
    y = x
    while (s := np.sum(y)) < 50.0:
        y = y + s * 0.1
        n = n + 1
    return np.sum(y)


def long_loop(x, n):
    s = x
    for i in range(n):
        s = s * 0.99999 + 0.00001
    return np.sum(s)


def rnn(Wx, Wh, b, xs, y):
    h = np.zeros((xs.shape[1], Wh.shape[0]))
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] @ Wx + h @ Wh + b)
    return np.mean((h - y) ** 2)


def counter_starting_at_zero(x):
    acc = 0
    for i in range(3):
        acc = acc + x * i
    return np.sum(acc)


def growing(x):
    acc = x[:1]
    for i in range(1, x.shape[0]):
        acc = np.concatenate([acc, acc[-1:] * x[i]])
    return np.sum(acc ** 2)


def subscript_write_in_branch_in_loop(x):
    y = x * 1.0
    for i in range(x.shape[0]):
        if x[i] > 0:
            y[i] = y[i] * 2.0 * x[i]
        else:
            y[i] = np.sin(y[i])
    return np.sum(y * y)


def append_then_stack(x):
    rows = []
    for i in range(3):
        rows.append(np.sin(x * i))
    return np.sum(np.stack(rows) ** 2)


def write_through_view_in_loop(x):
    b = x * 1.0
    for i in range(2):
        v = b[1:]
        v *= x[0]
    return np.sum(b ** 2)


def append_in_dynamic_loop(x):
    rows = []
    for i in range(x.shape[0]):
        rows.append(x * i)
    return np.sum(np.stack(rows))


def return_in_loop(x):
    s = 0.0
    for i in range(x.shape[0]):
        s = s + x[i] ** 2
        if s > 2.0:
            return s * np.sin(x[0])
    return s
