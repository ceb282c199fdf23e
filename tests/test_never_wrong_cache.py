"""The disk-cache key covers everything generated code bakes in (issue 10 item 7): a
helper or constant read from another module as `mod.helper` / `mod.K`, edited between
runs, gives a new key, never the old module. Each run is a fresh process."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

USER = """
import numpy as np
import helpmod

def f(x):
    return np.sum(helpmod.helper(x) * helpmod.K)
"""
RUN = """
import numpy as np, srcgrad as sg, user
print(sg.grad(user.f)(np.array([1.0, 2.0]))[0])
"""


def _run(tmp_path, cache):
    env = dict(os.environ, SRCGRAD_CACHE_DIR=str(cache), PYTHONPATH=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", RUN], env=env, cwd=tmp_path, capture_output=True,
                         text=True, check=True)
    return float(out.stdout.strip())


def test_helper_and_constant_of_another_module_are_in_the_key(tmp_path):
    cache = tmp_path / "cache"
    (tmp_path / "user.py").write_text(textwrap.dedent(USER))
    helpmod = tmp_path / "helpmod.py"
    # d/dx sum(helper(x) * K) with helper(x) = x * K**p is K**(p + 1)
    for k, power, expected in ((2.0, 1, 4.0), (3.0, 1, 9.0), (3.0, 2, 27.0)):
        helpmod.write_text(f"K = {k}\n\ndef helper(x):\n    return x * K ** {power}\n")
        for pyc in tmp_path.rglob("__pycache__"):
            for f in pyc.iterdir():
                f.unlink()
        assert _run(tmp_path, cache) == expected
