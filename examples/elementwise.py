"""The gradient of an elementwise chain, checked against its closed form.

Run:  python examples/elementwise.py  (with srcgrad installed: `pip install -e .` in the
repository root), or  python -m examples.elementwise  from the repository root.
It prints the Python source srcgrad generated for the gradient.
"""

import numpy as np


def f(x):
    return np.sum(np.sin(x) * np.exp(-x * x) + np.tanh(x) ** 2)


def df_closed_form(x):
    # d/dx sin(x) exp(-x^2) = exp(-x^2) (cos x - 2x sin x)
    # d/dx tanh(x)^2 = 2 tanh(x) (1 - tanh(x)^2)
    t = np.tanh(x)
    return np.exp(-x * x) * (np.cos(x) - 2.0 * x * np.sin(x)) + 2.0 * t * (1.0 - t * t)


def main():
    # Imported here so that f above can be imported without srcgrad installed.
    import srcgrad as sg

    x = np.linspace(-3.0, 3.0, 1001)
    df = sg.grad(f)
    g = df(x)
    err = np.max(np.abs(g - df_closed_form(x)))
    print(f"f(x) = {f(x):.6f}   max |grad - closed form| = {err:.2e}")
    print()
    print("# the code srcgrad generated:")
    print(sg.source(df))


if __name__ == "__main__":
    main()
