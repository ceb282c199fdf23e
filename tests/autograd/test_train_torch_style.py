"""examples/train_torch_style.py (a loop written for torch, `import srcgrad as torch`) against
torch's losses, observed, and against the same loop in NumPy with hand-derived gradients."""

import importlib.util
import math
from pathlib import Path

import numpy as np

import srcgrad as sg

_PATH = Path(__file__).resolve().parents[2] / "examples" / "train_torch_style.py"


def _example():
    spec = importlib.util.spec_from_file_location("train_torch_style", _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# observed in torch 2.14.1: the example with its first line `import torch`, float32
TORCH_LOSSES = [
    1.1010775566101074, 0.8873854875564575, 0.7444940805435181, 0.6373401880264282,
    0.5548509359359741, 0.4993806481361389, 0.4637751579284668, 0.4317089915275574,
    0.3978172838687897, 0.3655601441860199, 0.33887240290641785, 0.3169039487838745,
    0.29646143317222595, 0.2783215641975403, 0.2648559510707855, 0.2547485828399658,
    0.24476294219493866, 0.23428934812545776, 0.22498831152915955, 0.2175089716911316,
    0.2105793058872223, 0.20346525311470032, 0.19687414169311523, 0.1912333071231842,
    0.18591871857643127, 0.18008728325366974, 0.17380966246128082, 0.16786667704582214,
    0.16235724091529846, 0.15672555565834045]
TORCH_ACCURACIES = [
    0.4375, 0.828125, 0.828125, 0.8125, 0.8125, 0.8125, 0.8125, 0.8125, 0.8125, 0.84375,
    0.84375, 0.859375, 0.90625, 0.9375, 0.9375, 0.921875, 0.90625, 0.921875, 0.921875,
    0.921875, 0.921875, 0.921875, 0.9375, 0.9375, 0.9375, 0.9375, 0.9375, 0.9375, 0.9375,
    0.953125]


def test_the_example_is_torch_code_but_for_its_import_line():
    lines = _PATH.read_text().splitlines()
    imports = [ln for ln in lines if ln.startswith(("import ", "from "))]
    assert imports == ["import srcgrad as torch"]
    assert "sg." not in _PATH.read_text() and "numpy" not in _PATH.read_text()


def test_losses_and_accuracies_as_torch():
    losses, accuracies = _example().train()
    np.testing.assert_allclose(losses, TORCH_LOSSES, rtol=2e-5)
    assert accuracies == TORCH_ACCURACIES


def _numpy_train(steps=30, lr=0.05, n=64):
    t = np.arange(float(n)).reshape(n, 1)
    x = np.concatenate([np.sin(t * 0.37), np.cos(t * 0.23), np.sin(t * 0.11 + 1.0)], axis=1)
    y = (x[:, 0] > 0).astype(int) + (x[:, 1] > 0.3).astype(int)
    params = [(np.sin(np.arange(96.0)) * 0.4).reshape(16, 6), np.zeros(16),
              (np.cos(np.arange(48.0) * 1.3) * 0.3).reshape(3, 16), np.zeros(3)]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    erf = np.vectorize(math.erf)
    onehot = np.eye(3)[y]
    losses = []
    for step in range(1, steps + 1):
        W1, b1, W2, b2 = params
        f = np.concatenate([x, x * x], axis=1)
        z = f @ W1.T + b1
        Phi = 0.5 * (1 + erf(z / math.sqrt(2)))
        h = z * Phi
        logits = h @ W2.T + b2
        shifted = logits - logits.max(1, keepdims=True)
        p = np.exp(shifted) / np.exp(shifted).sum(1, keepdims=True)
        losses.append(float(-np.log(p[np.arange(n), y]).mean()))
        dlogits = (p - onehot) / n
        dh = dlogits @ W2
        dz = dh * (Phi + z * np.exp(-z * z / 2) / math.sqrt(2 * math.pi))
        grads = [dz.T @ f, dz.sum(0), dlogits.T @ h, dlogits.sum(0)]
        for i, g in enumerate(grads):
            m[i] = 0.9 * m[i] + 0.1 * g
            v[i] = 0.999 * v[i] + 0.001 * g * g
            m_hat, v_hat = m[i] / (1 - 0.9 ** step), v[i] / (1 - 0.999 ** step)
            params[i] = params[i] - lr * m_hat / (np.sqrt(v_hat) + 1e-8)
    return losses


def test_losses_as_the_numpy_loop_with_hand_gradients_in_float64():
    sg.set_default_dtype(sg.float64)  # every tensor the example makes is then float64
    try:
        losses, _ = _example().train()
    finally:
        sg.set_default_dtype(sg.float32)
    np.testing.assert_allclose(losses, _numpy_train(), rtol=1e-10)
    assert losses[-1] < 0.2 * losses[0]


def test_the_checkpointed_block_is_recomputed_in_backward(monkeypatch):
    module = _example()
    calls = []
    gelu = module.F.gelu
    monkeypatch.setattr(module.F, "gelu", lambda z: calls.append(1) or gelu(z))
    module.train(steps=2)
    assert len(calls) == 4  # forward and recomputation, each step


def test_runs_as_a_script(capsys):
    import runpy

    runpy.run_path(str(_PATH), run_name="__main__")
    assert "final loss 0.1567" in capsys.readouterr().out
