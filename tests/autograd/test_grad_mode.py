"""Grad modes as state: nesting, exceptions, decorators, generators, threads
(spec/torch_semantics.md §10 (a)). What the modes do to ops is tested with tensors in
test_spec_10_grad_modes.py."""

from __future__ import annotations

import threading
import warnings

import pytest

import srcgrad as sg
from srcgrad.autograd import grad_mode


@pytest.fixture(autouse=True)
def _restore_mode():
    """A failing test must not leave the next one with grad off."""
    before = (grad_mode.STATE.grad_enabled, grad_mode.STATE.inference)
    yield
    grad_mode.STATE.grad_enabled, grad_mode.STATE.inference = before


def _modes():
    return sg.is_grad_enabled(), sg.is_inference_mode_enabled()


def test_public_names():
    for name in ("no_grad", "enable_grad", "set_grad_enabled", "inference_mode",
                 "is_grad_enabled", "is_inference_mode_enabled"):
        assert getattr(sg, name) is getattr(grad_mode, name)
        assert getattr(sg.autograd, name) is getattr(grad_mode, name)


def test_defaults():
    assert _modes() == (True, False)


def test_no_grad_and_enable_grad_nest_and_restore():
    with sg.no_grad():
        assert _modes() == (False, False)
        with sg.enable_grad():
            assert _modes() == (True, False)
            with sg.no_grad():
                assert _modes() == (False, False)
            assert _modes() == (True, False)
        assert _modes() == (False, False)
    assert _modes() == (True, False)


def test_exit_restores_after_an_exception():
    with pytest.raises(ZeroDivisionError):
        with sg.no_grad():
            raise ZeroDivisionError
    assert sg.is_grad_enabled()
    with pytest.raises(KeyError):
        with sg.inference_mode():
            raise KeyError("x")
    assert _modes() == (True, False)


def test_exit_does_not_swallow_exceptions():
    for ctx in (sg.no_grad(), sg.enable_grad(), sg.set_grad_enabled(True), sg.inference_mode()):
        with pytest.raises(ValueError, match="boom"):
            with ctx:
                raise ValueError("boom")


def test_one_instance_entered_twice():
    ng = sg.no_grad()
    with sg.enable_grad():
        with ng:
            with sg.enable_grad():
                with ng:
                    assert not sg.is_grad_enabled()
                assert sg.is_grad_enabled()
            assert not sg.is_grad_enabled()
        assert sg.is_grad_enabled()


def test_enter_returns_none_like_torch():
    with sg.no_grad() as a, sg.enable_grad() as b, sg.inference_mode() as c:
        assert (a, b, c) == (None, None, None)


# ---------------------------------------------------------------- set_grad_enabled

def test_set_grad_enabled_as_a_function_switches_now():
    sg.set_grad_enabled(False)
    assert not sg.is_grad_enabled()
    sg.set_grad_enabled(True)
    assert sg.is_grad_enabled()


def test_set_grad_enabled_context_restores():
    with sg.set_grad_enabled(False):
        assert not sg.is_grad_enabled()
        with sg.set_grad_enabled(True):
            assert sg.is_grad_enabled()
        assert not sg.is_grad_enabled()
    assert sg.is_grad_enabled()
    with sg.no_grad():
        with sg.set_grad_enabled(True):
            assert sg.is_grad_enabled()
        assert not sg.is_grad_enabled()


def test_plain_call_inside_a_block_reenables(  # test_set_grad_enabled
):
    with sg.set_grad_enabled(False):
        sg.set_grad_enabled(True)
        assert sg.is_grad_enabled()
    assert sg.is_grad_enabled()


def test_set_grad_enabled_as_decorator_does_not_switch_at_decoration():
    @sg.set_grad_enabled(False)
    def f():
        return sg.is_grad_enabled()

    assert sg.is_grad_enabled()
    assert f() is False
    assert sg.is_grad_enabled()
    with sg.no_grad():

        @sg.set_grad_enabled(True)
        def g():
            return sg.is_grad_enabled()

        assert not sg.is_grad_enabled()
        assert g() is True
        assert not sg.is_grad_enabled()


# ---------------------------------------------------------------- decorators

@pytest.mark.parametrize("make", [lambda f: sg.no_grad()(f), lambda f: sg.no_grad(f)],
                         ids=["parens", "bare"])
def test_no_grad_decorator(make):
    @make
    def f(a, *, b=2):
        """doc"""
        return sg.is_grad_enabled(), a + b

    assert f(1) == (False, 3)
    assert f(1, b=5) == (False, 6)
    assert sg.is_grad_enabled()
    assert f.__name__ == "f" and f.__doc__ == "doc"


def test_enable_grad_decorator_no_paren():  # test_enable_grad_decorator_no_paren
    @sg.enable_grad
    def f():
        return sg.is_grad_enabled()

    with sg.no_grad():
        assert f() is True
        assert not sg.is_grad_enabled()


@pytest.mark.parametrize("decorate", [sg.inference_mode, sg.inference_mode(), sg.inference_mode(True)],
                         ids=["bare", "parens", "true"])
def test_inference_mode_decorator(decorate):
    @decorate
    def f():
        return _modes()

    assert f() == (False, True)
    assert _modes() == (True, False)


def test_inference_mode_false_decorator():
    @sg.inference_mode(False)
    def f():
        return _modes()

    with sg.inference_mode():
        assert f() == (True, False)
        assert _modes() == (False, True)


def test_decorator_restores_after_an_exception():
    @sg.no_grad()
    def f():
        raise RuntimeError("inside")

    with pytest.raises(RuntimeError, match="inside"):
        f()
    assert sg.is_grad_enabled()


def test_decorated_recursion_keeps_each_level():
    @sg.no_grad()
    def f(n):
        if n == 0:
            return [sg.is_grad_enabled()]
        with sg.enable_grad():
            inner = f(n - 1)
            return inner + [sg.is_grad_enabled()]

    assert f(3) == [False, True, True, True]
    assert sg.is_grad_enabled()


def test_decorating_a_class_warns_and_constructs_under_the_mode():
    with pytest.warns(FutureWarning, match="Decorating classes is deprecated"):

        @sg.no_grad()
        class C:
            def __init__(self):
                self.mode = sg.is_grad_enabled()

    assert C().mode is False
    assert sg.is_grad_enabled()


def test_class_warning_text():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        sg.no_grad()(type("C", (), {}))
    assert [str(w.message) for w in seen] == [
        "Decorating classes is deprecated and will be disabled in future versions. You should "
        "only decorate functions or methods. To preserve the current behavior of class "
        "decoration, you can directly decorate the `__init__` method and nothing else."]
    assert seen[0].category is FutureWarning


# ---------------------------------------------------------------- generator functions

def test_generator_runs_each_step_under_the_mode():  # test_set_grad_generator_functions
    @sg.no_grad()
    def gen():
        for _ in range(3):
            yield sg.is_grad_enabled()

    seen = []
    for mode in gen():
        seen.append((mode, sg.is_grad_enabled()))  # the caller's own mode between steps
    assert seen == [(False, True)] * 3

    @sg.enable_grad()
    def gen2():
        yield sg.is_grad_enabled()
        yield sg.is_grad_enabled()

    with sg.no_grad():
        it = gen2()
        assert next(it) is True
        assert not sg.is_grad_enabled()
        assert next(it) is True
        assert not sg.is_grad_enabled()


def test_generator_send_throw_close_and_return_value():
    log = []

    @sg.no_grad
    def gen():
        try:
            got = yield 1
            log.append(("sent", got, sg.is_grad_enabled()))
            try:
                yield 2
            except ValueError as e:
                log.append(("thrown", str(e), sg.is_grad_enabled()))
            yield 3
        finally:
            log.append(("finally", sg.is_grad_enabled()))
        return "done"  # noqa: B901 (a generator's return value is the point here)

    it = gen()
    assert next(it) == 1
    assert it.send("hello") == 2
    assert it.throw(ValueError("v")) == 3
    it.close()
    assert log == [("sent", "hello", False), ("thrown", "v", False), ("finally", False)]
    assert sg.is_grad_enabled()

    @sg.no_grad()
    def ret():
        yield 1
        return 42

    it = ret()
    next(it)
    with pytest.raises(StopIteration) as stop:
        next(it)
    assert stop.value.value == 42


def test_generator_exception_propagates():
    @sg.inference_mode()
    def gen():
        yield 1
        raise KeyError("k")

    it = gen()
    next(it)
    with pytest.raises(KeyError):
        next(it)
    assert _modes() == (True, False)


# ---------------------------------------------------------------- inference mode

def test_inference_mode_table():  # probe 10.mode_table, the state part
    with sg.inference_mode():
        assert _modes() == (False, True)
        with sg.enable_grad():  # probe 10.enable_grad_inside_inference_mode
            assert _modes() == (True, True)
        with sg.inference_mode(False):
            assert _modes() == (True, False)
        assert _modes() == (False, True)
    assert _modes() == (True, False)


def test_inference_mode_false_enables_grad_like_torch():
    # c10::InferenceMode(false) sets grad mode to true
    with sg.no_grad():
        with sg.inference_mode(False):
            assert _modes() == (True, False)
        assert _modes() == (False, False)


def test_inference_mode_restores_grad_off():
    with sg.no_grad():
        with sg.inference_mode():
            assert _modes() == (False, True)
        assert _modes() == (False, False)


# ---------------------------------------------------------------- threads

def _in_thread(fn):
    out = []
    errors = []

    def run():
        try:
            out.append(fn())
        except BaseException as e:  # reported in the main thread
            errors.append(e)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if errors:
        raise errors[0]
    return out[0]


def test_a_new_thread_starts_from_the_defaults():
    with sg.no_grad():
        assert _in_thread(_modes) == (True, False)
    with sg.inference_mode():
        assert _in_thread(_modes) == (True, False)


def test_a_thread_does_not_change_another_threads_mode():
    def switch_off():
        sg.set_grad_enabled(False)
        with sg.inference_mode():
            pass
        return _modes()

    assert _in_thread(switch_off) == (False, False)
    assert _modes() == (True, False)


def test_threads_interleaved():
    """Two threads hold opposite modes at the same time (barriers force the overlap)."""
    barrier = threading.Barrier(2)
    results = {}

    def worker(name, ctx):
        with ctx:
            barrier.wait()
            results[name] = sg.is_grad_enabled()
            barrier.wait()
        results[name + "-after"] = sg.is_grad_enabled()

    a = threading.Thread(target=worker, args=("off", sg.no_grad()))
    b = threading.Thread(target=worker, args=("on", sg.enable_grad()))
    a.start()
    b.start()
    a.join()
    b.join()
    assert results == {"off": False, "on": True, "off-after": True, "on-after": True}


def test_is_grad_enabled_reads_the_thread_local_state():
    """Ops read STATE.grad_enabled directly (Note [Grad mode state]): keep them one."""
    grad_mode.STATE.grad_enabled = False
    assert sg.is_grad_enabled() is False
    grad_mode.STATE.grad_enabled = True
    assert sg.is_grad_enabled() is True
