"""`sg.nn`: torch.nn's stateless part, `sg.nn.functional` (no `nn.Module`: API.md §3)."""

from srcgrad.nn import functional

__all__ = ["functional"]
