"""sg.optim.lr_scheduler: the learning rates of torch's schedules, observed, exactly."""

import pytest

import srcgrad as sg

S = sg.optim.lr_scheduler

# observed in torch 2.14.1: SGD(lr=0.5), each schedule stepped after optimizer.step(),
# param_groups[0]["lr"] after each step (exact floats: the update forms are torch's)
TORCH = {'cos': [0.45320916362186214, 0.33070916362186215, 0.1792908363781379, 0.0567908363781379, 0.01,
                 0.05679083637813787, 0.17929083637813795, 0.33070916362186226, 0.45320916362186237,
                 0.5000000000000002, 0.4532091636218625, 0.3307091636218623, 0.17929083637813803,
                 0.05679083637813795, 0.01, 0.05679083637813787, 0.17929083637813795],
         'exp': [0.45, 0.405, 0.36450000000000005, 0.32805000000000006, 0.2952450000000001,
                 0.2657205000000001, 0.23914845000000007, 0.21523360500000008, 0.19371024450000007,
                 0.17433922005000008, 0.15690529804500009, 0.14121476824050008],
         'lambda': [0.25, 0.16666666666666666, 0.125, 0.1, 0.08333333333333333, 0.07142857142857142, 0.0625,
                    0.05555555555555555, 0.05, 0.045454545454545456, 0.041666666666666664,
                    0.038461538461538464],
         'multistep': [0.5, 0.15, 0.15, 0.15, 0.0135, 0.0135, 0.0135, 0.0135, 0.00405, 0.00405, 0.00405,
                       0.00405],
         'step': [0.5, 0.5, 0.25, 0.25, 0.25, 0.125, 0.125, 0.125, 0.0625, 0.0625, 0.0625, 0.03125]}

MAKE = {
    "step": lambda o: S.StepLR(o, 3, gamma=0.5),
    "multistep": lambda o: S.MultiStepLR(o, [2, 5, 5, 9], gamma=0.3),
    "exp": lambda o: S.ExponentialLR(o, 0.9),
    "cos": lambda o: S.CosineAnnealingLR(o, T_max=5, eta_min=0.01),
    "lambda": lambda o: S.LambdaLR(o, lambda e: 1 / (1 + e)),
}


@pytest.mark.parametrize("name", sorted(TORCH))
def test_rates_equal_torch_s(name):
    W = sg.zeros(1, requires_grad=True)
    opt = sg.optim.SGD([W], lr=0.5)
    sched = MAKE[name](opt)
    assert opt.param_groups[0]["initial_lr"] == 0.5
    lrs = []
    for _ in TORCH[name]:
        opt.step()
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
    assert lrs == TORCH[name]
    assert sched.get_last_lr() == [TORCH[name][-1]]


def test_a_schedule_changes_the_sgd_step():
    W = sg.tensor([1.0], requires_grad=True)
    opt = sg.optim.SGD([W], lr=1.0)
    sched = S.StepLR(opt, 1, gamma=0.5)
    for _ in range(3):
        opt.zero_grad()
        W.sum().backward()  # gradient 1
        opt.step()
        sched.step()
    assert W.item() == pytest.approx(1.0 - 1.0 - 0.5 - 0.25)
