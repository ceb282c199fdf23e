"""The pipeline: the one place the compiler's stages are put in order.

    parse → fence → trace (frontend) → activity → vjp / jvp → simplify → cse → dce
    → [split into forward and backward] → emit (codegen) → cache → load (backend)

`programs` runs a parsed function through the passes to generated function sources
(the order lives in `gradient_program`, `vjp_program`, `jvp_program` and `optimize`);
`keys` hashes what a module depends on; `modules` renders the programs into a module,
caches it in memory and on disk and loads it; srcgrad.kernels is the same path for
one table row (the eager runtime's kernels).

The names below are imported from `programs` on first use, so that importing
`srcgrad.pipeline.modules` for a cache hit does not import the compiler.
"""

__all__ = ["VERSION", "Functions", "cache_key", "compiler_fingerprint", "container_gradient_program",
           "gradient_program", "jvp_program", "optimize", "provably_scalar", "trace", "vjp_program"]


def __getattr__(name: str):
    if name not in __all__:
        raise AttributeError(f"module 'srcgrad.pipeline' has no attribute {name!r}")
    from srcgrad.pipeline import programs

    return getattr(programs, name)
