"""The eager autograd runtime (`sg.Tensor`, `sg.autograd`), mirroring torch.autograd."""

from srcgrad.autograd.gradcheck import GradcheckError, gradcheck, gradgradcheck

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError"]
