"""torch.optim.Adam and AdamW: bias-corrected moments, amsgrad, (decoupled) weight decay."""

from __future__ import annotations

import numpy

from srcgrad.optim.optimizer import Optimizer, bump, grad_array, state_tensor

__all__ = ["Adam", "AdamW"]


class Adam(Optimizer):
    """torch's single-tensor Adam (the CPU default), in its order of operations:
    m = lerp(m, g, 1 - beta1); v = beta2 * v + (1 - beta2) * g * g;
    denom = sqrt(v or max(v_max, v)) / sqrt(1 - beta2**t) + eps;
    p += (-lr / (1 - beta1**t)) * m / denom. Weight decay adds weight_decay * p to g
    (Adam) or first scales p by 1 - lr * weight_decay (AdamW, decoupled)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if eps < 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        for i in (0, 1):
            if not 0.0 <= betas[i] < 1.0:
                raise ValueError(f"Invalid beta parameter at index {i}: {betas[i]}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize, foreach=foreach, capturable=capturable,
                                      differentiable=differentiable, fused=fused,
                                      decoupled_weight_decay=decoupled_weight_decay))

    def _update_group(self, group: dict) -> None:
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        weight_decay, amsgrad = group["weight_decay"], group["amsgrad"]
        decoupled = group["decoupled_weight_decay"]
        for p in group["params"]:
            g = grad_array(p, group["maximize"])
            if g is None:
                continue
            state = self.state.get(p)
            if state is None:  # torch: lazily, at the parameter's first step
                zeros = numpy.zeros_like(p._data)
                state = self.state[p] = {"step": state_tensor(numpy.float32(0)),
                                         "exp_avg": state_tensor(zeros),
                                         "exp_avg_sq": state_tensor(zeros)}
                if amsgrad:
                    state["max_exp_avg_sq"] = state_tensor(zeros)
            step_t = state["step"]._data
            step_t += 1
            if weight_decay != 0:
                if decoupled:
                    p._data *= 1 - lr * weight_decay
                else:
                    g = g + weight_decay * p._data
            m, v = state["exp_avg"]._data, state["exp_avg_sq"]._data
            m += (1 - beta1) * (g - m)  # torch's lerp_ with weight < 0.5
            numpy.multiply(v, beta2, out=v)
            v += (1 - beta2) * g * g
            step = float(step_t)
            step_size = lr / (1 - beta1 ** step)
            bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
            if amsgrad:
                vmax = state["max_exp_avg_sq"]._data
                numpy.maximum(vmax, v, out=vmax)
                v = vmax
            denom = numpy.sqrt(v) / bias_correction2_sqrt + eps
            p._data += (-step_size * m) / denom
            bump(p)


class AdamW(Adam):
    """Adam with decoupled weight decay (torch 2.x: weight_decay=1e-2 by default)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)
