"""Jacobians and Hessians from generated code: `sg.jacobian` and `sg.hessian` (API.md §1).

A Jacobian is assembled from one forward-mode pass of the generated JVP per input
element, or one pass of the generated backward per output element (`mode`), and
reshaped like JAX's: `out.shape + arg.shape`, nested like `f`'s result.
"""

from __future__ import annotations

import copy
import functools

import numpy

from srcgrad.arguments import check_float_arguments
from srcgrad.ir import tree as pytree
from srcgrad.pipeline import modules


def _float_dtype(a):
    dtype = numpy.result_type(a)
    return dtype if dtype.kind in "fc" else numpy.dtype(numpy.float64)


class Jacobian:
    """The function `jacobian(f, wrt, mode=...)` returns (compiles once, on first use)."""

    def __init__(self, f, indices: tuple, single: bool, mode: str):
        if mode not in ("auto", "forward", "reverse"):
            raise ValueError(f"jacobian: mode must be 'auto', 'forward' or 'reverse'; got {mode!r}")
        self.f, self.mode = f, mode
        self.indices, self.single = indices, single
        self._modes: dict = {}  # argument shapes -> the mode auto chose
        functools.update_wrapper(self, f)
        self.__name__ = f"jacobian_{getattr(f, '__name__', 'f')}"
        self.__srcgrad__ = JacobianSource(self)

    def __call__(self, *args):
        check_float_arguments(self.__name__.split("_", 1)[0], self.f, args, self.indices)
        mode = self.mode
        if mode == "auto":
            key = tuple(numpy.shape(a) for a in args)
            mode = self._modes.get(key)
            if mode is None:
                # on copies: f may write into its arguments, and the Jacobian is at `args`
                out = self.f(*copy.deepcopy(args))
                out_size = sum(numpy.size(leaf) for leaf in pytree.flatten(out)[0])
                in_size = sum(numpy.size(args[i]) for i in self.indices)
                mode = self._modes[key] = "forward" if in_size < out_size else "reverse"
        tree, outs, blocks = jacobian_blocks(self.f, args, self.indices, mode)
        return self._assemble(args, tree, outs, blocks)

    def _assemble(self, args, tree, outs, blocks):
        """blocks[k][j]: the (out k size, arg j size) matrix; reshaped and nested like jax."""
        leaves = []
        for k, out in enumerate(outs):
            per_arg = tuple(blocks[k][j].reshape(numpy.shape(out) + numpy.shape(args[i]))
                            for j, i in enumerate(self.indices))
            leaves.append(per_arg[0] if self.single else per_arg)
        return pytree.unflatten(tree, leaves)


def jacobian_blocks(f, args, indices, mode):
    """(out tree, output leaves, blocks): blocks[k][j] is the (size of output k, size of
    argument indices[j]) Jacobian matrix, by forward or reverse mode."""
    if mode == "forward":
        return _forward_blocks(f, args, indices)
    return _reverse_blocks(f, args, indices)


def _forward_blocks(f, args, indices):
    fn = modules.source_function(f)
    blocks, outs, tree = None, None, None
    for j, i in enumerate(indices):
        compiled = modules.compiled_jvp(fn, (i,))
        impl = compiled.entry()
        arg = numpy.asarray(args[i])
        basis = numpy.zeros(arg.size, dtype=_float_dtype(arg))
        tangent = basis.reshape(arg.shape)
        for col in range(arg.size):
            basis[col] = 1.0
            outs, touts = impl(*args, tangent)
            if blocks is None:
                tree = compiled.out_tree
                blocks = [[None] * len(indices) for _ in outs]
            for k, t in enumerate(touts):
                if blocks[k][j] is None:
                    blocks[k][j] = numpy.zeros((numpy.size(outs[k]), arg.size),
                                               dtype=numpy.result_type(t, basis))
                blocks[k][j][:, col] = numpy.reshape(t, -1)
            basis[col] = 0.0  # after the copy: a tangent out may be a view of the seed
        if arg.size == 0:  # no column to learn the output from: evaluate once
            outs, _ = impl(*args, tangent)
            tree = compiled.out_tree
            blocks = blocks or [[None] * len(indices) for _ in outs]
            for k, o in enumerate(outs):
                blocks[k][j] = numpy.zeros((numpy.size(o), 0), dtype=basis.dtype)
    return tree, outs, blocks


def _reverse_blocks(f, args, indices):
    compiled = modules.compiled_vjp(modules.source_function(f))
    fwd, bwd = compiled.entry(0), compiled.entry(1)
    outs, saved = fwd(*args)
    cts = [numpy.zeros(numpy.shape(o), dtype=_float_dtype(o)) for o in outs]
    blocks = []
    for k in range(len(outs)):
        flat = cts[k].reshape(-1)
        rows = [numpy.zeros((flat.size, numpy.size(args[i])),
                            dtype=numpy.result_type(_float_dtype(args[i]), flat))
                for i in indices]
        for row in range(flat.size):
            flat[row] = 1.0
            grads = bwd(saved, *cts)
            for j, i in enumerate(indices):
                rows[j][row] = numpy.reshape(grads[i], -1)
            flat[row] = 0.0  # after the copy: a gradient may be a view of the cotangent
        blocks.append(rows)
    return compiled.out_tree, outs, blocks


class JacobianSource:
    """What `sg.source` reads for a jacobian/hessian: the module(s) it runs."""

    def __init__(self, jac):
        self.jac = jac

    def load(self):
        fn = modules.source_function(self.jac.f)
        if self.jac.mode == "reverse":
            compiled = modules.compiled_vjp(fn)
            compiled.load()
            self.module_source = compiled.module_source
        else:
            parts = []
            for i in self.jac.indices:
                compiled = modules.compiled_jvp(fn, (i,))
                compiled.load()
                parts.append(compiled.module_source)
            self.module_source = "\n".join(parts)
        return self.module_source

    def entry(self, index: int = 0):
        from srcgrad.errors import CompileError

        raise CompileError("calling a jacobian or hessian from compiled code is not supported",
                           hint="call sg.grad / sg.jvp inside, and build the matrix outside")

    def fingerprint(self):
        return None
