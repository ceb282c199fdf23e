"""The eager autograd runtime (`sg.Tensor`, `sg.autograd`), mirroring torch.autograd."""
