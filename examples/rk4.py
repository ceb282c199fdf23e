"""RK4 on the Lotka-Volterra equations: a `while` loop of 1000 steps, differentiated
w.r.t. the four rate parameters (tests/golden/rk4_grad.py is its gradient module)."""

import numpy as np


def loss(p, u0):
    """RK4, dt = 0.01 until t reaches 10; p = (a, b, c, d), u = (prey, predators)."""
    u = u0
    t = 0.0
    dt = 0.01
    while t < 9.995:
        k1 = np.stack([p[0] * u[0] - p[1] * u[0] * u[1], p[2] * u[0] * u[1] - p[3] * u[1]])
        v = u + 0.5 * dt * k1
        k2 = np.stack([p[0] * v[0] - p[1] * v[0] * v[1], p[2] * v[0] * v[1] - p[3] * v[1]])
        v = u + 0.5 * dt * k2
        k3 = np.stack([p[0] * v[0] - p[1] * v[0] * v[1], p[2] * v[0] * v[1] - p[3] * v[1]])
        v = u + dt * k3
        k4 = np.stack([p[0] * v[0] - p[1] * v[0] * v[1], p[2] * v[0] * v[1] - p[3] * v[1]])
        u = u + dt / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
        t = t + dt
    return np.sum(u * u)
