"""`sg.optim`: torch.optim's SGD, Adam and AdamW over `sg.Tensor` parameters (API.md §3)."""

from srcgrad.optim.adam import Adam, AdamW
from srcgrad.optim.optimizer import Optimizer
from srcgrad.optim.sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW"]
