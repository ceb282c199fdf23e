"""sg.optim against torch's observed trajectories and against textbook NumPy updates."""

import numpy as np
import pytest

import srcgrad as sg


def _data(dtype=np.float32):
    X = np.sin(np.arange(12.0).reshape(4, 3) * 0.7).astype(dtype)
    Y = np.cos(np.arange(8.0).reshape(4, 2) * 0.3).astype(dtype)
    W0 = (np.arange(6.0).reshape(3, 2) * 0.1 - 0.25).astype(dtype)
    b0 = np.array([0.05, -0.1], dtype)
    return X, Y, W0, b0


def _run(cls, kw, steps=5, dtype=np.float32):
    X, Y, W0, b0 = _data(dtype)
    W, b = sg.tensor(W0, requires_grad=True), sg.tensor(b0, requires_grad=True)
    opt = cls([W, b], **kw)
    for _ in range(steps):
        opt.zero_grad()
        loss = ((sg.tensor(X) @ W + b - sg.tensor(Y)) ** 2).mean()
        loss.backward()
        opt.step()
    return W, b, opt


# observed in torch 2.14.1 (/tmp/obs/optim_torch.py: the same problem, 5 steps, float32)
TORCH = {
    "sgd": ("SGD", dict(lr=0.1), [
        -0.1617143601179123, -0.08408407866954803, -0.0032108465675264597, 0.05949103832244873,
        0.13328701257705688, 0.1986023634672165], [0.2174304723739624, 0.031239932402968407]),
    "sgd_mom": ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01), [
        -0.03435884043574333, 0.011375414207577705, 0.05994857847690582, 0.07098272442817688,
        0.10283267498016357, 0.12043434381484985], [0.4473150074481964, 0.21405303478240967]),
    "sgd_nest": ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01), [
        0.01876898854970932, 0.05679481104016304, 0.06337860971689224, 0.06734340637922287,
        0.055058661848306656, 0.06934097409248352], [0.4977487623691559, 0.26154717803001404]),
    "adam": ("Adam", dict(lr=0.05), [
        -0.008223947137594223, 0.08890017867088318, 0.18615524470806122, 0.13412299752235413,
        -0.0890304297208786, 0.0005829073488712311], [0.29520922899246216, 0.1433185338973999]),
    "adam_wd_ams": ("Adam", dict(lr=0.05, weight_decay=0.1, amsgrad=True), [
        -0.008672434836626053, 0.08929316699504852, 0.18248587846755981, 0.08632169663906097,
        -0.1008220687508583, 0.0035063065588474274], [0.2942901849746704, 0.14276057481765747]),
    "adamw": ("AdamW", dict(lr=0.05), [
        -0.007863249629735947, 0.08901889622211456, 0.18604351580142975, 0.13421647250652313,
        -0.0892220288515091, 0.00021976977586746216], [0.2948477268218994, 0.14332115650177002]),
    "adamw_ams": ("AdamW", dict(lr=0.05, betas=(0.8, 0.99), weight_decay=0.1, amsgrad=True), [
        -0.008779730647802353, 0.08560451120138168, 0.1802508533000946, 0.12571726739406586,
        -0.10053779929876328, -0.002035580575466156], [0.2888616621494293, 0.13985058665275574]),
}


@pytest.mark.parametrize("case", sorted(TORCH))
def test_matches_torch_trajectory(case):
    cls, kw, W_t, b_t = TORCH[case]
    W, b, _ = _run(getattr(sg.optim, cls), kw)
    assert W.dtype == np.float32
    np.testing.assert_allclose(W.detach().numpy().ravel(), W_t, rtol=2e-6, atol=2e-7)
    np.testing.assert_allclose(b.detach().numpy(), b_t, rtol=2e-6, atol=2e-7)


# ---------------------------------------------------------------- textbook NumPy, float64
def _numpy_run(kind, kw, steps=5):
    X, Y, W, b = _data(np.float64)
    params = [W.copy(), b.copy()]
    state = [{} for _ in params]
    for t in range(1, steps + 1):
        R = X @ params[0] + params[1] - Y
        dR = 2 * R / R.size
        grads = [X.T @ dR, dR.sum(0)]
        for p, g, s in zip(params, grads, state):
            lr, wd = kw["lr"], kw.get("weight_decay", 0.0)
            if kind == "SGD":
                g = g + wd * p
                mu, damp = kw.get("momentum", 0.0), kw.get("dampening", 0.0)
                if mu:
                    s["buf"] = g.copy() if "buf" not in s else mu * s["buf"] + (1 - damp) * g
                    g = g + mu * s["buf"] if kw.get("nesterov") else s["buf"]
                p -= lr * g
                continue
            b1, b2 = kw.get("betas", (0.9, 0.999))
            if kind == "AdamW":
                p *= 1 - lr * kw.get("weight_decay", 1e-2)
            else:
                g = g + wd * p
            s["m"] = b1 * s.get("m", 0) + (1 - b1) * g
            s["v"] = b2 * s.get("v", 0) + (1 - b2) * g * g
            v = s["v"]
            if kw.get("amsgrad"):
                v = s["vmax"] = np.maximum(s.get("vmax", 0), v)
            m_hat, v_hat = s["m"] / (1 - b1 ** t), v / (1 - b2 ** t)
            p -= lr * m_hat / (np.sqrt(v_hat) + 1e-8)
    return params


@pytest.mark.parametrize("case", sorted(TORCH))
def test_matches_numpy_float64(case):
    cls, kw, _, _ = TORCH[case]
    W, b, _ = _run(getattr(sg.optim, cls), kw, steps=7, dtype=np.float64)
    W_n, b_n = _numpy_run(cls, kw, steps=7)
    assert W.dtype == np.float64
    np.testing.assert_allclose(W.detach().numpy(), W_n, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(b.detach().numpy(), b_n, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("case", ["sgd_mom", "adam_wd_ams", "adamw"])
def test_state_dict_round_trip_continues_the_trajectory(case):
    cls, kw, W_t, b_t = TORCH[case]
    cls = getattr(sg.optim, cls)
    W, b, opt = _run(cls, kw, steps=3)
    sd = opt.state_dict()
    assert [g["params"] for g in sd["param_groups"]] == [[0, 1]]
    assert sorted(sd["state"]) == [0, 1]
    if "adam" in case:
        assert sd["state"][0]["step"].item() == 3.0 and sd["state"][0]["step"].dtype == np.float32
    X, Y, _, _ = _data()
    W2, b2 = sg.tensor(W.detach().numpy(), requires_grad=True), sg.tensor(b.detach().numpy(),
                                                                           requires_grad=True)
    opt2 = cls([W2, b2], lr=123.0)  # the loaded groups' lr replaces this one
    opt2.load_state_dict(sd)
    assert opt2.param_groups[0]["lr"] == kw["lr"] and opt2.param_groups[0]["params"][0] is W2
    for _ in range(2):
        opt2.zero_grad()
        ((sg.tensor(X) @ W2 + b2 - sg.tensor(Y)) ** 2).mean().backward()
        opt2.step()
    np.testing.assert_allclose(W2.detach().numpy().ravel(), W_t, rtol=2e-6, atol=2e-7)
    np.testing.assert_allclose(b2.detach().numpy(), b_t, rtol=2e-6, atol=2e-7)
    # the loaded state is a copy: stepping opt2 left opt's state as it was
    assert opt.state[W]["exp_avg" if "adam" in case else "momentum_buffer"] is not \
        opt2.state[W2]["exp_avg" if "adam" in case else "momentum_buffer"]


def test_param_groups_take_their_own_options():
    W, b = sg.tensor([1.0, 2.0], requires_grad=True), sg.tensor([3.0], requires_grad=True)
    opt = sg.optim.SGD([{"params": [W]}, {"params": b, "lr": 0.5}], lr=0.1)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
    assert opt.param_groups[1]["momentum"] == 0
    (W.sum() + b.sum()).backward()
    opt.step()
    assert W.tolist() == pytest.approx([0.9, 1.9]) and b.tolist() == pytest.approx([2.5])
    opt.param_groups[0]["lr"] = 1.0  # torch: a scheduler edits the group dict
    opt.step()
    assert W.tolist() == pytest.approx([-0.1, 0.9])


def test_zero_grad_sets_none_by_default_and_zeros_in_place_otherwise():
    W = sg.tensor([1.0, 2.0], requires_grad=True)
    opt = sg.optim.Adam([W])
    (W * W).sum().backward()
    opt.zero_grad()
    assert W.grad is None
    (W * W).sum().backward()
    g = W.grad
    opt.zero_grad(set_to_none=False)
    assert W.grad is g and g.tolist() == [0.0, 0.0]


def test_step_bumps_the_version_so_a_stale_graph_fails():
    W = sg.tensor([1.0, 2.0], requires_grad=True)
    opt = sg.optim.SGD([W], lr=0.1)
    (W * W).sum().backward()
    y = (W * W).sum()  # saves W
    v = W._version
    opt.step()
    assert W._version == v + 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_step_with_closure_returns_its_loss_and_parameters_without_grad_are_skipped():
    W = sg.tensor([1.0, 2.0], requires_grad=True)
    untouched = sg.tensor([5.0], requires_grad=True)
    opt = sg.optim.Adam([W, untouched], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = (W * W).sum()
        loss.backward()
        return loss

    assert opt.step(closure).item() == 5.0
    assert untouched.tolist() == [5.0] and untouched not in opt.state


def test_errors_as_torch():
    W = sg.tensor([1.0], requires_grad=True)
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        sg.optim.SGD([W], lr=-1)
    with pytest.raises(ValueError, match="Nesterov momentum requires a momentum and zero damp"):
        sg.optim.SGD([W], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1: 1.0"):
        sg.optim.Adam([W], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="can't optimize a non-leaf Tensor"):
        sg.optim.Adam([W * 2])
    with pytest.raises(ValueError, match="empty parameter list"):
        sg.optim.AdamW([])
    with pytest.raises(TypeError, match="iterable of Tensors"):
        sg.optim.SGD(W, lr=0.1)
    assert sg.optim.AdamW([W]).param_groups[0]["weight_decay"] == 1e-2
