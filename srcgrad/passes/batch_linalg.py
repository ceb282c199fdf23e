"""Batched forms of linear-algebra rows (Note [Batching] in srcgrad.passes.batch).

NumPy's `linalg` functions, and the Array API's, work on stacks of matrices: every axis
before the last two is a batch axis. So a row on a batched matrix is the row itself on
the stack, and each of its outputs (`eigh`'s eigenvalues and vectors, `slogdet`'s sign
and logarithm, ...) gains the leading axis. Only the matrix may be mapped: an argument
beside it (`UPLO`, `rcond`, `full_matrices`) is a constant of the program."""

from __future__ import annotations

from srcgrad.passes.batch_base import Unbatchable


def _on_stacks(b, op, x, *options):
    if b.rank(x) < 2:
        raise Unbatchable(f"`{op.prim}` of a value with fewer than two axes")
    if any(b.is_b(a) for a in options):
        raise Unbatchable(f"`{op.prim}` with a mapped argument beside the matrix")
    b.keep(op, x, *options)


HANDLERS = {name: _on_stacks for name in (
    "inv", "det", "slogdet", "cholesky", "eigh", "eigvalsh", "pinv", "svd", "svd_reduced",
    "svdvals", "qr")}
