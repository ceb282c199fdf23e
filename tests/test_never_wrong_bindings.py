"""Issue 10, item 7 (in process): rebinding a global, a user module's member or a helper
that compiled code baked in recompiles; nothing rebound, nothing recompiled.
Every value is checked against central differences of the current NumPy function."""

import importlib
import sys
import textwrap

import numpy as np
import pytest

import srcgrad as sg
from tests.conftest import assert_close, numeric_grad

CONSTANTS = '''
K = 2.0

def scale(x):
    return K * x
'''

USER = '''
import numpy as np
import sgb_constants as c

K = 3.0

def helper(x):
    return np.sin(x) * K

def loss_global(x):
    return np.sum(K * x * x)

def loss_helper(x):
    return np.sum(helper(x))

def loss_module_member(x):
    return np.sum(c.K * x ** 3)

def loss_module_helper(x):
    return np.sum(c.scale(x) ** 2)
'''


@pytest.fixture()
def mods(tmp_path, monkeypatch):
    (tmp_path / "sgb_constants.py").write_text(textwrap.dedent(CONSTANTS))
    (tmp_path / "sgb_user.py").write_text(textwrap.dedent(USER))
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("sgb_constants", "sgb_user"):
        sys.modules.pop(name, None)
    user = importlib.import_module("sgb_user")
    yield user, sys.modules["sgb_constants"]
    for name in ("sgb_constants", "sgb_user"):
        sys.modules.pop(name, None)


X = np.array([0.5, -1.0, 2.0])


def _check(g, f):
    assert_close(g(X), numeric_grad(f, (X,), 0))


def test_a_rebound_global_constant_recompiles(mods):
    user, _ = mods
    g = sg.grad(user.loss_global)
    _check(g, user.loss_global)
    user.K = 5.0
    _check(g, user.loss_global)  # was the gradient for K = 3.0


def test_a_redefined_helper_recompiles(mods):
    user, _ = mods
    g = sg.grad(user.loss_helper)
    _check(g, user.loss_helper)
    user.helper = lambda x: np.cos(x) ** 2  # a rebinding, as a user would write it
    _check(g, user.loss_helper)

    def helper2(x):
        return np.tanh(x) * 4.0
    user.helper = helper2
    _check(g, user.loss_helper)


def test_a_global_the_helper_reads_recompiles(mods):
    user, _ = mods
    g = sg.grad(user.loss_helper)
    _check(g, user.loss_helper)
    user.K = -1.5  # read by helper, not by loss_helper itself
    _check(g, user.loss_helper)


def test_module_members_recompile(mods):
    user, c = mods
    g_member, g_helper = sg.grad(user.loss_module_member), sg.grad(user.loss_module_helper)
    _check(g_member, user.loss_module_member)
    _check(g_helper, user.loss_module_helper)
    c.K = 7.0  # read as c.K by one, by c.scale's body in the other
    _check(g_member, user.loss_module_member)
    _check(g_helper, user.loss_module_helper)


def test_vjp_and_jvp_follow_rebinding(mods):
    user, _ = mods
    for k in (3.0, 4.0):
        user.K = k
        value, vjp_fn = sg.vjp(user.loss_global, X)
        assert_close(value, user.loss_global(X))
        assert_close(vjp_fn(1.0)[0], numeric_grad(user.loss_global, (X,), 0))
        t = np.array([1.0, 0.0, 2.0])
        _, tangent = sg.jvp(user.loss_global, (X,), (t,))
        assert_close(tangent, numeric_grad(user.loss_global, (X,), 0) @ t)


def test_nothing_rebound_nothing_recompiled(mods):
    user, _ = mods
    g = sg.grad(user.loss_helper)
    g(X)
    compiled = g.__srcgrad__
    source = compiled.module_source
    user.unrelated = 1.0
    for _ in range(3):
        g(X)
    assert compiled.module_source is source
    assert not compiled.stale()
