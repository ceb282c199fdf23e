"""Runnable srcgrad examples; also imported by ``benchmarks/`` for their loss functions."""
