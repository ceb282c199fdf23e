"""`sg.utils`: torch.utils's autograd-related part (`sg.utils.checkpoint`)."""

from srcgrad.utils import checkpoint

__all__ = ["checkpoint"]
