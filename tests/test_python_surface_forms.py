"""Issue 29 §2, the Python surface inside differentiated functions: each form compiles
and matches central differences in float64 (first order, and second order through
sg.hessian where the form is on the derivative's path), or is refused at the user's
line with the construct named and a rewrite. The same forms, as fuzz templates:
tests/fuzz/surface_forms.py. Each test failed before srcgrad.frontend.python_forms."""

from __future__ import annotations

import functools
import operator

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.errors import CompileError
from tests.conftest import assert_close, numeric_grad

X = np.array([0.3, -0.7, 1.1])
M = np.array([[0.3, -0.7, 1.1], [0.2, 0.5, -0.4]])


def numeric_hessian(f, x, eps=1e-4):
    """Central differences of central differences (float64)."""
    n = x.size
    h = np.zeros((n, n))
    def at(i, j, di, dj):
        y = x.copy()
        y[i] += di
        y[j] += dj
        return f(y)

    for i in range(n):
        for j in range(n):
            h[i, j] = (at(i, j, eps, eps) - at(i, j, eps, -eps) - at(i, j, -eps, eps)
                       + at(i, j, -eps, -eps)) / (4 * eps * eps)
    return h


def check(f, x, *rest, second=True):
    """f's gradient in x (and Hessian) against central differences; its value too."""
    value, grad = sg.value_and_grad(f)(x, *rest)
    assert_close(value, f(x, *rest), rtol=1e-12)
    assert_close(grad, numeric_grad(f, [x, *rest], 0), rtol=1e-6, atol=1e-8)
    if second:
        assert_close(sg.hessian(f)(x, *rest), numeric_hessian(lambda y: f(y, *rest), x),
                     rtol=1e-4, atol=1e-6)


# ---------------------------------------------------------------------- try
def try_finally(x):
    try:
        y = np.sin(x) * x
    finally:
        scale = 2.0
    return np.sum(y) * scale


def try_except_static(x, key="b"):
    table = {"a": 3.0}
    try:
        p = table[key]  # a KeyError while compiling: the handler is traced instead
    except KeyError:
        p = 2.0
    else:
        p = p + 1.0
    return np.sum(x ** p)


def try_numpy_on_constants(x):
    try:
        inv = np.linalg.inv(np.zeros((3, 3)))  # LinAlgError while compiling (constants)
    except np.linalg.LinAlgError:
        inv = np.eye(3) * 2.0
    return np.sum((inv @ x) ** 2)


def try_except_traced(x):
    try:
        y = np.exp(x)  # does not raise on these arguments: the handler never runs
    except FloatingPointError:
        y = x
    return np.sum(y * y)


def test_try_finally_and_except_around_code_that_does_not_raise():
    check(try_finally, X)
    check(try_except_traced, X)
    check(try_numpy_on_constants, X)
    # the handler of an error raised while compiling runs as in Python (p = 2.0)
    assert_close(sg.grad(lambda x: try_except_static(x, "b"))(X), 2 * X)
    assert_close(sg.grad(lambda x: try_except_static(x, "a"))(X), 4 * X ** 3)


def try_around_max(x):
    try:
        m = max(x[0], x[1])
    except TypeError:
        m = x[2]
    return m * x[0]


def test_an_error_of_srcgrad_itself_is_not_handed_to_the_users_handler(monkeypatch):
    from srcgrad.frontend import python_forms

    # a stand-in for a bug: a call with the wrong arguments, inside srcgrad's own code
    monkeypatch.setattr(python_forms, "_extremum", python_forms.rows)
    sg.cache_clear()
    with pytest.raises(TypeError, match="positional arguments"):  # (not the handler's x[2])
        sg.grad(try_around_max)(X)


def try_reraise(x):
    try:
        p = {"a": 1.0}["b"]
    except KeyError:
        raise  # noqa: TRY201 (the construct under test)
    return np.sum(x * p)


def raise_on_data(x):
    if np.sum(x) > 10.0:
        raise ValueError("too large")
    return np.sum(x * x)


def return_in_try(x):
    try:
        return np.sum(np.sin(x))
    except ValueError:
        return np.sum(x)


def test_raising_paths_raise_or_are_refused_with_a_rewrite():
    with pytest.raises(KeyError):  # raised while compiling, re-raised as Python does
        sg.grad(try_reraise)(X)
    with pytest.raises(CompileError, match="`raise` on a path that depends on array") as err:
        sg.grad(raise_on_data)(X)
    assert err.value.lineno == raise_on_data.__code__.co_firstlineno + 2
    assert "assert" in err.value.hint
    with pytest.raises(CompileError, match="`return`, `break` or `continue` inside `try`") as err:
        sg.grad(return_in_try)(X)
    assert err.value.filename == __file__
    assert "assign the result" in err.value.hint


# ---------------------------------------------------------------------- f-strings, str
def fstring_keys(x):
    params = {f"w_{i}": x[i] for i in range(3)}
    label = f"{'layer'!s:>8}_{2:03d}"
    assert x.shape[0] == 3, f"expected 3 rows in {label}"
    return params["w_0"] * params["w_2"] + np.sum(x ** 2) * len(label) + params["w_{}".format(1)]  # noqa: UP032


def fstring_of_traced(x):
    v = np.sum(x)
    return np.sum(x * x) if f"{v}" else v


def test_fstrings_and_str_methods_of_constants_are_their_text():
    check(fstring_keys, X)
    with pytest.raises(CompileError, match="an f-string of a traced array") as err:
        sg.grad(fstring_of_traced)(X)
    assert "print" in err.value.hint


def assert_with_traced_fstring(x):
    s = np.sum(x)
    assert s < 100.0, f"sum {s} too large"
    return s * s


def test_an_assert_message_formatting_traced_values_is_its_source_text():
    check(assert_with_traced_fstring, X)
    with pytest.raises(AssertionError, match=r"sum \{s\} too large"):
        sg.grad(assert_with_traced_fstring)(X + 100.0)


# ---------------------------------------------------------------------- isinstance
def isinstance_checks(x, p):
    scale = p["a"] if isinstance(p, dict) else p
    if isinstance(x, np.ndarray) and not isinstance(x, (list, str)):
        return np.sum(x * x) * scale
    return x * scale


def type_is(x):
    if type(x) is np.ndarray:
        return np.sum(x ** 3)
    return x ** 2


def test_isinstance_and_type_of_arguments_are_decided_when_compiling():
    check(isinstance_checks, X, {"a": 2.0})
    check(type_is, X)
    # a Python float argument takes the other branch, as in Python
    assert_close(sg.grad(type_is)(0.5), 1.0)


def isinstance_of_computed(x):
    s = np.sum(x)
    return s * 2.0 if isinstance(s, float) else s


def first_is_array(xs):
    return np.sum(xs[0] ** 2) * (3.0 if isinstance(xs[0], np.ndarray) else 1.0)


def test_isinstance_of_a_container_arguments_leaf_is_not_the_containers_class():
    # (a one-leaf list: its leaf lines up with the argument; its class is not the list's)
    assert_close(sg.grad(first_is_array)([X]), [6.0 * X])


def test_isinstance_of_a_computed_value_is_refused():
    with pytest.raises(CompileError, match="`isinstance\\(\\)` of a computed") as err:
        sg.grad(isinstance_of_computed)(X)
    assert "np.ndim(v) == 0" in err.value.hint


# ---------------------------------------------------------------------- comprehensions
def rows_comprehension(x):
    norms = [np.sum(r ** 2) for r in x]
    by_row = {i: np.sin(r) for i, r in enumerate(x)}
    return sum(norms) * np.sum(by_row[1]) + sum(np.sum(r) ** 3 for r in x)


def range_comprehension(x):
    return sum([x[i] * x[i + 1] for i in range(x.shape[0] - 1)])


def test_comprehensions_over_rows_and_range():
    check(rows_comprehension, M.copy(), second=False)
    flat = M.ravel()
    assert_close(sg.hessian(rows_comprehension)(M).reshape(6, 6),
                 numeric_hessian(lambda v: rows_comprehension(v.reshape(2, 3)), flat),
                 rtol=1e-4, atol=1e-6)
    check(range_comprehension, X)


def test_a_comprehension_over_rows_in_shape_generic_code_is_refused_with_a_rewrite():
    with pytest.raises(CompileError, match="row count is not known") as err:
        sg.source(sg.grad(rows_comprehension))  # (no shapes: the generic code)
    assert "x[0]" in err.value.hint


# ---------------------------------------------------------------------- builtins
def builtin_extrema(x, a=2.0):
    pair = max(x[0], x[1]) + min(x[0], x[2] * 2.0)
    listed = max([x[0], x[1], x[2]]) - min(x[1] * x[2], x[0])
    return pair + listed * max(a, 1.0) + max(x * x) + min(x) + abs(x[0]) + abs(-3.0)


def builtin_sum_abs(x):
    return sum([x[0], np.sin(x[1])]) + np.sum(abs(x) ** 3) + sum(x)


def test_builtin_max_min_sum_abs_on_arrays_and_scalars():
    check(builtin_extrema, X)
    check(builtin_sum_abs, X)


def max_inside_loop(x):
    best = x[0]
    for i in range(3):
        best = max(best, x[i] * 1.5)
    return best * x[1]


def max_of_rows(x):
    return np.sum(max(x) * 2.0) + np.sum(min(x))


def test_builtin_max_of_an_array_is_numpys_where_python_can_compare_its_rows():
    check(max_of_rows, X)
    column = np.array([[0.3], [1.2], [-0.4]])  # rows of one item compare as Python does
    assert_close(sg.grad(max_of_rows)(column), numeric_grad(max_of_rows, [column], 0))
    with pytest.raises(AssertionError, match="truth value of an array"):
        sg.grad(max_of_rows)(M)  # (Python raises ValueError: ambiguous, here too)


def test_builtin_max_inside_a_loop_picks_the_item_python_picks():
    check(max_inside_loop, X)
    check(max_inside_loop, np.array([2.0, 0.5, -1.0]))


def _square(v):
    return v * v


def functional_builtins(x):
    a = sum(map(np.sin, x)) + np.sum(list(map(_square, x)))
    b = sum(map(lambda u, w: u * w, [x[0], x[1]], [x[2], x[0]]))
    c = functools.reduce(operator.mul, [x[0], x[1], x[2]])
    d = functools.reduce(lambda p, q: p + _square(q), list(x), 0.0)
    e = sum(x[i] for i in filter(lambda i: i % 2 == 0, range(3))) + operator.neg(x[2])
    return a + b + c + d + e


def test_map_filter_functools_reduce_and_operator_functions():
    check(functional_builtins, X)


def filter_on_data(x):
    return sum(filter(lambda v: v > 0.0, [x[0], x[1]]))


def test_filter_with_a_test_on_array_values_is_refused_with_a_rewrite():
    with pytest.raises(CompileError, match="`filter\\(\\)` with a test on array values") as err:
        sg.grad(filter_on_data)(X)
    assert "np.where" in err.value.hint

def star_unpacking(x):
    a, *rest = x
    first, *middle, last = [x[0], x[1] * 2.0, x[2], x[0] * x[1]]
    return a * np.sum(np.array(rest) ** 2) + first * last + sum(middle)


def _three(a, b, c):
    return a * b + c


def _var(*args, **kwargs):
    return sum(v * v for v in args) * kwargs.get("s", 1.0) + kwargs["t"]


def star_calls(x):
    args = (x[0], x[1])
    opts = {"s": 2.0, "t": x[2]}
    return _three(*args, x[2]) + _var(*x, **opts) + _var(x[0], t=1.0)


def test_star_unpacking_and_star_calls():
    check(star_unpacking, X)
    check(star_calls, X)


def test_star_unpacking_in_shape_generic_code_is_refused_with_a_rewrite():
    with pytest.raises(CompileError, match="star unpacking of an array") as err:
        sg.source(sg.grad(star_unpacking))
    assert "x[1:]" in err.value.hint


def keyword_only(x, *, s=2.0):
    return np.sum(np.sin(x) * x) * s


def keyword_options(x, **options):
    return np.sum(x ** 3) * options.get("scale", 0.5)


def test_top_level_keyword_only_parameters_and_kwargs():
    check(keyword_only, X)
    check(keyword_options, X)
    assert_close(sg.grad(keyword_only)(X, s=3.0), 1.5 * sg.grad(keyword_only)(X))


def top_varargs(*xs):
    return np.sum(xs[0] * xs[0])


def test_top_level_varargs_are_refused_with_a_rewrite():
    with pytest.raises(CompileError, match="plain positional parameters only") as err:
        sg.grad(top_varargs)(X)
    assert "list the parameters explicitly" in err.value.hint


# ---------------------------------------------------------------------- objects
class Sim:
    def __init__(self, dt, k):
        self.dt = dt
        self.k = k

    def step(self, y):
        return y + self.dt * np.sin(self.k * y)

    def loss(self, y):
        for _ in range(3):
            y = self.step(y)
        return np.sum(y ** 2)


SIM = Sim(0.1, 2.0)


def uses_global_sim(x):
    return np.sum(SIM.step(SIM.step(x)) ** 2)


def test_bound_methods_read_float_attributes_as_constants():
    check(uses_global_sim, X)
    check(SIM.loss, X)  # sg.grad of the bound method itself


def test_a_changed_float_attribute_compiles_again():
    sim = Sim(0.1, 2.0)
    grad = sg.grad(sim.loss)
    first = grad(X)
    assert_close(first, numeric_grad(sim.loss, [X], 0), rtol=1e-6)
    sim.dt = 0.3  # (a binding of the generated code: Note [Bound methods])
    assert_close(grad(X), numeric_grad(sim.loss, [X], 0), rtol=1e-6)
    assert not np.allclose(grad(X), first)


def test_sg_compile_and_vjp_of_a_bound_method_follow_its_attributes():
    sim = Sim(0.1, 2.0)
    for dt in (0.1, 0.3):
        sim.dt = dt
        expected = numeric_grad(sim.loss, [X], 0)
        t = sg.tensor(X.copy(), requires_grad=True)
        sg.compile(sim.loss)(t).backward()
        assert_close(t.grad.numpy(), expected, rtol=1e-6)
        out, vjp_fn = sg.vjp(sim.loss, X)
        assert_close(out, sim.loss(X), rtol=1e-12)
        assert_close(vjp_fn(1.0)[0], expected, rtol=1e-6)


def steps_argument(x, sim):
    return np.sum(sim.step(x))


def test_a_method_of_an_object_argument_says_the_argument_is_an_array():
    with pytest.raises(CompileError, match="`sim.step`: compiled code reads the argument `sim` "
                                           "as an array") as err:
        sg.grad(steps_argument)(X, SIM)
    assert err.value.lineno == steps_argument.__code__.co_firstlineno + 1
    assert "dataclass" in err.value.hint


def constructs(x):
    return np.sum(Sim(0.1, 2.0).step(x))


def test_constructing_an_object_inside_is_refused_with_a_rewrite():
    with pytest.raises(CompileError, match="constructing a `Sim` object") as err:
        sg.grad(constructs)(X)
    assert "construct it outside" in err.value.hint


# ---------------------------------------------------------------------- round, dict(P)
def integrate(x, T=1.0, dt=0.1):
    y = x
    for _ in range(round(T / dt)):
        y = y + dt * np.sin(y)
    return np.sum(y ** 2)


def test_round_of_float_arguments_is_a_static_trip_count():
    check(integrate, X)
    check(integrate, X, 0.5, 0.25)  # two steps
    assert_close(sg.grad(integrate)(X, 0.5, 0.25), numeric_grad(integrate, [X, 0.5, 0.25], 0))


def round_of_differentiated(x):
    return np.sum(x) * round(np.sum(x))


def test_round_of_a_differentiated_value_is_refused_as_int_is():
    with pytest.raises(CompileError, match="builtin_round"):
        sg.grad(round_of_differentiated)(X)


P0 = {"a": 2.0, "b": 0.5}


def dict_copies(x, P):
    Q = dict(P)
    Q["a"] = Q["a"] * x[0]
    R = dict(P, b=3.0)
    L = list(x)
    return np.sum(Q["a"] * x ** 2 + R["b"]) + L[0] * L[2] + P["a"]


def test_dict_and_list_copies_of_containers():
    check(dict_copies, X, P0)
    assert P0 == {"a": 2.0, "b": 0.5}  # the copy was written, not the argument


# ---------------------------------------------------------------------- held-out loops
def early_return_after_write(x):
    y = x.copy()
    for i in range(4):
        if y[i] > 0.0:
            y[i] = y[i] * 2.0  # a write on some paths only
        if np.sum(y) > 2.0:
            return np.sum(y ** 2)  # an early return after it
    return np.sum(y)


def write_into_loop_bound(x):
    y = x.copy()
    view = y[:2]  # shares y's storage: its length bounds the loop
    for i in range(len(view)):
        y[i + 1] = y[i] * 2.0 + view[i]
    n = y.shape[0]
    for i in range(n):
        y[i] = y[i] * y[0]  # y[0] changes in the first iteration
    return np.sum(y ** 2)


@pytest.mark.parametrize("x", [np.array([0.3, 0.7, 1.1, 0.5]), np.array([-0.3, 0.2, -0.1, 0.4]),
                               np.array([0.9, 1.5, -1.1, 0.5])])
def test_early_return_inside_a_loop_after_a_write_on_some_paths(x):
    check(early_return_after_write, x)


def while_bound_is_a_view_written(x):
    y = x.copy()
    bound = y[:1]  # the `while` test reads bound[0], which the body writes through y
    k = 0
    while k < 3 and y[1] < bound[0] * 5.0:
        y[1] = y[1] + 0.5 * bound[0]
        y[0] = y[0] * 1.1
        k += 1
    return np.sum(y ** 2)


def test_a_write_into_an_array_sharing_memory_with_a_loop_bound():
    check(write_into_loop_bound, X)
    check(while_bound_is_a_view_written, np.array([0.5, 0.3, 1.0]))


@pytest.mark.parametrize("constant", ["(3.0).__neg__()", "np.negative(3.0).__neg__()",
                                      "np.float64(2.0).__mul__(1.5)", "(3).__add__(0)"])
def test_a_dunder_method_of_a_constant_number_is_folded(tmp_path, constant):
    """Fuzz seed 2640188: `np.negative(3.0).__neg__()` is a method-wrapper of a NumPy
    number, which was refused as a call with no derivative rule."""
    path = tmp_path / "dunder_constant.py"
    path.write_text(f"import numpy as np\n\n\ndef f(x):\n    return np.sum(x * {constant})\n")
    namespace: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    c = float(eval(constant, {"np": np}))
    assert_close(sg.grad(namespace["f"])(np.ones(3)), np.full(3, c))
