"""The `Optimizer` base class: torch.optim.Optimizer's param groups, state and state dicts.

Note [Optimizer updates]
~~~~~~~~~~~~~~~~~~~~~~~~
An update is arithmetic on the parameters' arrays, never recorded: torch runs `step()`
under no_grad. The subclasses compute on `p._data` (and state arrays) with NumPy
in place, in torch's order of operations and in the parameter's dtype (a Python float
is a weak scalar under NumPy's NEP 50, so float32 stays float32 as in torch), and then
bump the parameter's version counter as torch's in-place `param.add_` does: a graph
that saved the parameter before the step raises torch's "modified by an inplace
operation" error at backward. The optimizer state holds `sg.Tensor`s (torch's
`state_dict()` holds tensors; `step` is a 0-d float32 tensor as in torch 2.x).
"""

from __future__ import annotations

import copy

import numpy

from srcgrad.autograd import grad_mode
from srcgrad.autograd.node import legacy_type
from srcgrad.autograd.tensor import Tensor

__all__ = ["Optimizer", "required"]


class _Required:
    def __repr__(self) -> str:
        return "<required parameter>"


required = _Required()


class Optimizer:
    """Base of SGD/Adam/AdamW: `param_groups`, `state`, `zero_grad`, `state_dict`."""

    def __init__(self, params, defaults: dict):
        self.defaults = defaults
        self.state: dict = {}
        self.param_groups: list = []
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            "Tensors or dicts, but got " + legacy_type(params._data))
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def __repr__(self) -> str:
        lines = [self.__class__.__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines.extend(f"    {k}: {group[k]}" for k in sorted(group) if k != "params")
        lines.append(")")
        return "\n".join(lines)

    def add_param_group(self, param_group: dict) -> None:
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets will change between runs. "
                            "Please use a list instead.")
        params = list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is "
                                + type(p).__name__)
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        group = dict(param_group, params=params)
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError(f"parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            group.setdefault(name, default)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if len({id(p) for p in params}) != len(params):
            import warnings

            warnings.warn("optimizer contains a parameter group with duplicate parameters; in "
                          "future, this will cause an error; see "
                          "github.com/pytorch/pytorch/issues/40967 for more information",
                          stacklevel=3)
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """torch's: `.grad = None` by default, else the gradient detached and zeroed."""
        for group in self.param_groups:
            for p in group["params"]:
                g = p._grad
                if g is None:
                    continue
                if set_to_none:
                    p._grad = None
                    continue
                if g._grad_fn is not None:
                    g.detach_()
                else:
                    g.requires_grad_(False)
                g._data[...] = 0
                g._vc.v += 1

    def step(self, closure=None):
        loss = None
        if closure is not None:
            with grad_mode.enable_grad():
                loss = closure()
        with grad_mode.no_grad():
            for group in self.param_groups:
                self._update_group(group)
        return loss

    def _update_group(self, group: dict) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    # ------------------------------------------------------------ state dicts
    def state_dict(self) -> dict:
        """torch's layout: parameters replaced by their index over all groups, in order."""
        index: dict = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = []
            for p in group["params"]:
                index.setdefault(id(p), len(index))
                packed["params"].append(index[id(p)])
            groups.append(packed)
        state = {index[id(p)]: s for p, s in self._state_items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def _state_items(self):
        for group in self.param_groups:
            for p in group["params"]:
                s = self.state.get(p)
                if s is not None:
                    yield p, s

    def load_state_dict(self, state_dict: dict) -> None:
        state_dict = copy.deepcopy(state_dict)  # (torch: the loaded state is not shared)
        groups, saved_groups = self.param_groups, state_dict["param_groups"]
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match "
                             "the size of optimizer's group")
        by_index = {i: p for g, s in zip(groups, saved_groups) for i, p in zip(s["params"],
                                                                             g["params"])}
        self.state = {}
        for i, s in state_dict["state"].items():
            p = by_index.get(int(i))
            if p is None:
                continue
            self.state[p] = {k: _cast(v, p, k) for k, v in s.items()}
        self.param_groups = [dict(s, params=g["params"]) for g, s in zip(groups, saved_groups)]


def _cast(value, param, key):
    """torch: state tensors take the parameter's dtype, except `step` (kept float32)."""
    if isinstance(value, Tensor) and key != "step" and value.dtype.kind == "f":
        return Tensor._make(value._data.astype(param._data.dtype, copy=False))
    return value


def grad_array(p: Tensor, maximize: bool):
    """The gradient's array (negated for `maximize`), or None where p has no gradient."""
    g = p._grad
    if g is None:
        return None
    if g._data.shape != p._data.shape:
        raise RuntimeError("the gradient's shape does not match the parameter's")
    return -g._data if maximize else g._data


def bump(p: Tensor) -> None:
    """p was written in place: its version counter moves (Note [Optimizer updates])."""
    p._vc.v += 1


def state_tensor(array) -> Tensor:
    return Tensor._make(numpy.array(array))
