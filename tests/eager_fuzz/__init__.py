"""Differential fuzzing of srcgrad's eager runtime (sg.Tensor, srcgrad/autograd/).

generator.py writes random torch-style programs over sg.Tensor from a seed; oracle.py runs
each one with `.backward()`, `sg.autograd.grad` and `create_graph=True`, and judges the
gradients against central differences of the same program run under `sg.no_grad()`.
benchmarks/fuzz_eager.py runs campaigns; test_eager_fuzz_slice.py is the CI slice.
"""
