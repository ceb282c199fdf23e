"""Errors and warnings a new user meets name the user's function, file and line and say
what to pass (issue 31). Programs: tests/corpus/newcomer_errors.py."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.cli import main
from srcgrad.errors import CompileError
from tests.corpus import newcomer_errors as N

FILE = N.__file__
x = np.array([0.3, -0.5, 0.8])


def _line(text: str) -> int:
    """The line of tests/corpus/newcomer_errors.py holding `text`."""
    lines = Path(FILE).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def test_a_numpy_warning_in_generated_code_names_the_users_file_and_line():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sg.grad(N.warns)(x)
    runtime = [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert runtime, [str(w.message) for w in caught]
    for w in runtime:  # the forward sqrt and its gradient's line: both the user's line 10
        assert (w.filename, w.lineno) == (FILE, _line("y = np.sqrt(x)"))
        assert "invalid value encountered" in str(w.message)
        assert str(w.message).endswith("(in the code srcgrad generated for this line)")


def test_a_numpy_warning_outside_generated_code_is_left_alone():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        np.sqrt(-1.0)
    assert caught[0].filename == __file__ and "srcgrad" not in str(caught[0].message)


@pytest.mark.parametrize("call,message", [
    (lambda: sg.grad(N.two)(x, x, x), "grad: two(x, y) was called with 3 positional arguments: "
                                      "too many positional arguments; pass the arguments two(x, y) takes"),
    (lambda: sg.value_and_grad(N.two)(x), "value_and_grad: two(x, y) was called with 1 positional "
                                          "argument: missing a required argument: 'y'"),
    (lambda: sg.vjp(N.two, x, x, x), "vjp: two(x, y) was called with 3 positional arguments: too many"),
    (lambda: sg.jacobian(N.vec)(x, x), "jacobian: vec(x) was called with 2 positional arguments"),
    (lambda: sg.hessian(N.two)(x, x, x), "hessian: two(x, y) was called with 3 positional arguments"),
])
def test_too_many_or_too_few_arguments_name_the_function_and_its_parameters(call, message):
    with pytest.raises(TypeError) as err:
        call()
    assert message in str(err.value)


def test_an_extra_cotangent_to_vjp_fn_says_it_takes_one():
    for out, vjp_fn in (sg.vjp(N.vec, x), sg.vjp(N.two, x, x)):  # the plain and the general path
        with pytest.raises(TypeError, match=r"vjp_fn \(of sg.vjp\((vec|two), \.\.\.\)\) takes one "
                                            r"cotangent, shaped as \w+'s output; got 2"):
            vjp_fn(np.ones_like(out), np.ones_like(out))


def test_primals_that_are_no_tuple_are_named_as_such():
    with pytest.raises(TypeError, match=r"jvp\(f, primals, tangents\): primals is a tuple of vec's "
                                        r"arguments \(one per parameter\); got ndarray: pass "
                                        r"sg.jvp\(vec, \(x,\), \(t,\)\)"):
        sg.jvp(N.vec, x, x)
    with pytest.raises(TypeError, match="got 2 primals: primals is a tuple with one value per argument"):
        sg.jvp(N.vec, (x, x), (x, x))


def test_an_integer_cotangent_is_cast_to_the_outputs_dtype_as_torch_does():
    # observed in torch 2.x: torch.sin(x).backward(torch.tensor([1, 2, 3])) with a float64 x
    # gives float64 gradients cos(x) * [1, 2, 3] (the engine casts the gradient's dtype)
    (g,) = sg.vjp(N.double, x)[1](np.array([1, 2, 3]))
    assert g.dtype == np.float64
    np.testing.assert_array_equal(g, [2.0, 4.0, 6.0])
    (g,) = sg.vjp(N.double, x)[1](np.array([True, False, True]))
    assert g.dtype == np.float64
    np.testing.assert_array_equal(g, [2.0, 0.0, 2.0])
    (g,) = sg.vjp(N.vec, x)[1](np.array([1, 2, 3]))
    np.testing.assert_allclose(g, np.cos(x) * [1, 2, 3], rtol=1e-15)


def test_a_bound_method_reading_a_float_attribute_compiles_with_self_a_constant():
    # issue 29 §2 (refused before, "the array attribute `.w`"): `self.w` is the float it holds
    np.testing.assert_allclose(sg.grad(N.Model().loss)(x), 0.5 * np.cos(x), rtol=1e-15)


def test_round_of_float_arguments_is_an_int_and_dict_of_an_array_is_refused():
    # issue 29 §2: `round(T / dt)` of Python floats compiles (a count, derivative 0)
    np.testing.assert_allclose(sg.grad(N.rounds)(x, 1.0, 0.1), np.full(3, 10.0))
    with pytest.raises(CompileError) as err:  # (Python's dict() of an array raises too)
        sg.grad(N.copies_dict)(x, np.ones(3))
    assert (err.value.filename, err.value.lineno) == (FILE, _line("Q = dict(P)"))
    assert err.value.message.startswith("`dict()` of an array (`P`, the argument: compiled code "
                                        "reads every argument")


def test_check_mode_reverse_checks_a_function_without_jvp(capsys):
    spec = f"{FILE}:cube_sum"
    assert main(["check", spec, "--args", "(3,)", "--mode", "reverse"]) == 0
    out = capsys.readouterr().out
    assert "reverse  output 0 w.r.t. x" in out and "forward" not in out and out.endswith("OK\n")
    # both modes: reverse is still reported; forward says why it cannot be computed
    assert main(["check", spec, "--args", "(3,)"]) == 1
    out = capsys.readouterr().out
    assert "reverse  output 0 w.r.t. x: max |analytical - numerical|" in out
    assert "forward  cannot compute the forward-mode Jacobian:" in out
    assert "jvp" in out.split("forward  cannot compute")[1]


def test_the_dask_example_says_which_extra_installs_it():
    text = (Path(__file__).resolve().parent.parent / "examples" / "dask_logistic.py").read_text()
    assert "pip install -e '.[dask]'" in text.split('"""')[1]


@pytest.mark.parametrize("call", [
    lambda: sg.grad(N.refused)(x), lambda: sg.jacobian(N.refused)(x),
    lambda: sg.hessian(N.refused)(x), lambda: sg.vjp(N.refused, x),
    lambda: sg.jvp(N.refused, (x,), (x,))], ids=["grad", "jacobian", "hessian", "vjp", "jvp"])
def test_every_transform_shows_a_compile_error_as_sg_grad_does(call):
    # the compiler's own frames are dropped: what is left is the call and the user's line
    with pytest.raises(CompileError) as err:
        call()
    tb, frames = err.value.__traceback__, []
    while tb is not None:
        frames.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    ours = [f for f in frames if f.startswith(str(Path(sg.__file__).parent))]
    assert len(ours) <= 2, frames  # (sg.grad: its dispatcher and the frame that re-raises)
    assert (err.value.filename, err.value.lineno) == (FILE, _line("round(np.sum(x))"))
