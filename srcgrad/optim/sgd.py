"""torch.optim.SGD: momentum, dampening, Nesterov momentum, weight decay, maximize."""

from __future__ import annotations

import numpy

from srcgrad.optim.optimizer import Optimizer, bump, grad_array, state_tensor

__all__ = ["SGD"]


class SGD(Optimizer):
    """torch's update, per parameter (its single-tensor path, the CPU default):
    g += weight_decay * p; buf = g (first step) or momentum * buf + (1 - dampening) * g;
    g = g + momentum * buf (nesterov) or buf; p -= lr * g."""

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, maximize=False, foreach=None, differentiable=False,
                 fused=None):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize, foreach=foreach,
                                      differentiable=differentiable, fused=fused))

    def _update_group(self, group: dict) -> None:
        lr, momentum, dampening = group["lr"], group["momentum"], group["dampening"]
        weight_decay, nesterov = group["weight_decay"], group["nesterov"]
        for p in group["params"]:
            g = grad_array(p, group["maximize"])
            if g is None:
                continue
            if weight_decay != 0:
                g = g + weight_decay * p._data
            if momentum != 0:
                state = self.state.setdefault(p, {})
                buf = state.get("momentum_buffer")
                if buf is None:
                    buf = state["momentum_buffer"] = state_tensor(g)
                else:
                    b = buf._data
                    numpy.multiply(b, momentum, out=b)
                    numpy.add(b, (1 - dampening) * g if dampening else g, out=b)
                g = g + momentum * buf._data if nesterov else buf._data
            p._data -= lr * g
            bump(p)
