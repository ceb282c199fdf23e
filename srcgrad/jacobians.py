"""Jacobians and Hessians from generated code: `sg.jacobian` and `sg.hessian` (API.md §1).

A Jacobian is one generated pass over a batch of identity seeds (Note [Batching] in
srcgrad.passes.batch): the JVP with a leading seed axis on every tangent (forward
mode, one seed per input element) or the VJP with one on every cotangent (reverse
mode, one seed per output element), in chunks of `chunk_size` seeds to bound memory.
The Hessian is the batched forward mode of the gradient (forward over reverse). A
program with an op that has no batched form falls back to one pass per seed (the
per-column code below), as does an argument that is a tuple, list or dict. Results
are reshaped like JAX's: `out.shape + arg.shape`, nested like `f`'s result.
"""

from __future__ import annotations

import copy
import functools
import sys
import threading

import numpy

from srcgrad import backend
from srcgrad.arguments import any_container, check_arity, check_float_arguments
from srcgrad.errors import CompileError, at_user_call, hide_internal_frames, note_user_call
from srcgrad.ir import tree as pytree
from srcgrad.jacobian_trees import inspect_unwrap, leaf_function, nested_jacobian
from srcgrad.passes.batch import Unbatchable
from srcgrad.passes.shapes import ProbeFailed
from srcgrad.pipeline import modules, programs, vjp_jvp


def _float_dtype(a):
    dtype = numpy.result_type(a)
    return dtype if dtype.kind in "fc" else numpy.dtype(numpy.float64)


class Jacobian:
    """The function `jacobian(f, wrt, mode=...)` returns (compiles once per argument
    shapes, on first use). `of`: for `sg.hessian`, the scalar function whose Hessian
    this is (`f` is then its generated gradient, which the per-column fallback runs)."""

    def __init__(self, f, indices: tuple, single: bool, mode: str, chunk_size=None, of=None,
                 hooked_mode=None, backend=None):
        if mode not in ("auto", "forward", "reverse"):
            raise ValueError(f"jacobian: mode must be 'auto', 'forward' or 'reverse'; got {mode!r}")
        if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
            raise ValueError(f"chunk_size must be a positive int or None; got {chunk_size!r}")
        self.f, self.mode, self.chunk_size, self.of = f, mode, chunk_size, of
        self.backend = backend  # "numba": one pass per seed, each compiled by numba
        self.hooked_mode = hooked_mode  # the mode while saved-tensor hooks are active
        self.indices, self.single = indices, single
        self._modes: dict = {}  # argument shapes -> the mode auto chose
        self._plans: dict = {}  # (argument guards, mode) -> a _Batched, or None: per column
        self._reasons: dict = {}  # the same keys -> why that plan runs one pass per seed
        self.fallback_reason = None  # the reason for the last call's arguments (None: batched)
        # (updated=(): not f's __dict__, which for a Jacobian of a Jacobian is the inner's
        # state, f and mode included: the outer then computed the inner Jacobian, issue 28)
        functools.update_wrapper(self, f, updated=())
        self.__name__ = f"jacobian_{getattr(f, '__name__', 'f')}"
        self.__srcgrad__ = JacobianSource(self)
        self._nested = isinstance(of, Jacobian) or isinstance(f, Jacobian)  # Note [Jacobians of Jacobians]

    def __call__(self, *args):
        # names the user's function (not the gradient a Hessian is the Jacobian of)
        transform = "jacobian" if self.of is None else "hessian"
        check_arity(transform, self.of or self.f, args)
        try:
            return self._call(args)
        except CompileError as err:  # as sg.grad shows it: the user's line on top
            raise hide_internal_frames(at_user_call(err, transform)) from None

    def _call(self, args, parts: bool = False):
        """The Jacobian at `args`; with `parts`, (out tree, its leaves) before unflattening."""
        if self._nested:
            return self._of_jacobian(args)
        if any_container(args):  # Note [Jacobians of container arguments]
            return self._of_containers(args)
        if not all(type(args[i]) is numpy.ndarray and args[i].dtype.kind == "f" for i in self.indices) \
                or any(a.__class__ is complex or getattr(getattr(a, "dtype", None), "kind", "") == "c"
                       for a in args):
            # (the check reads f's signature for its message: ~0.1 ms, most of a small call)
            transform = "jacobian" if self.of is None else "hessian"
            check_float_arguments(transform, self.f, args, self.indices)
            _check_numpy_arguments(transform, args)
        hooked = _hooks() is not None
        # under hooks "auto" takes reverse mode, which saves values and packs them as sg.vjp
        mode = (self.hooked_mode or {"auto": "reverse"}.get(self.mode, self.mode)) if hooked else \
            "forward" if self.of is not None else self.mode
        if mode == "auto":
            key = tuple(numpy.shape(a) for a in args)
            mode = self._modes.get(key)
            if mode is None:
                # on copies: f may write into its arguments, and the Jacobian is at `args`
                out = self.f(*copy.deepcopy(args))
                out_size = sum(numpy.size(leaf) for leaf in pytree.flatten(out)[0])
                in_size = sum(numpy.size(args[i]) for i in self.indices)
                mode = self._modes[key] = "forward" if in_size < out_size else "reverse"
        # saved-tensor hooks pack what a backward saves: the per-seed code honours them
        plan = None if hooked or self.backend else self._plan(args, mode)
        if plan is not None:
            tree, outs, blocks = plan.blocks(args)
        else:
            if self.of is not None:
                self._check_scalar(args)
            tree, outs, blocks = jacobian_blocks(self.f, args, self.indices, mode, self.backend)
        leaves = self._assemble(args, outs, blocks)
        return (tree, leaves) if parts else pytree.unflatten(tree, leaves)

    def _check_scalar(self, args):
        """A TypeError where a Hessian's function is not scalar at these argument shapes.
        The batched program checks its own output; the per-seed code differentiates the
        gradient's generated code, whose run-time check (`ensure_scalar`) no output reads,
        so forward mode dropped it and returned the Hessian of the output's sum (issue 28)."""
        key = ("scalar", tuple([modules.guard_value(a) for a in args]))
        if key not in self._modes:
            out = self.of(*copy.deepcopy(args))  # (copies: f may write into its arguments)
            self._modes[key] = numpy.shape(out) if pytree.flatten(out)[1] == pytree.LEAF else "tree"
        shape = self._modes[key]
        if shape != ():
            what = "a tuple, list or dict" if shape == "tree" else f"an array of shape {shape}"
            raise note_user_call(TypeError(
                f"hessian of {getattr(self.of, '__name__', 'f')}() needs a scalar output; it "
                f"returned {what}. Use sg.jacobian(sg.jacobian(f)) for the second derivatives "
                "of each element, or reduce it (e.g. .sum())"), "hessian")

    def _of_jacobian(self, args):
        """This Jacobian where `f` is itself a Jacobian or Hessian (Note [Jacobians of
        Jacobians]); a Hessian of one is refused: its function is not scalar."""
        transform = "jacobian" if self.of is None else "hessian"
        inner = self.of if self.of is not None else self.f
        if self.of is not None or isinstance(inner.f, Jacobian):
            what = ("sg.hessian of a sg.jacobian or sg.hessian" if self.of is not None else
                    "sg.jacobian nested three deep over sg.jacobian or sg.hessian")
            raise at_user_call(CompileError(
                f"{what} (of `{_name(inner)}`) is not supported",
                hint="sg.jacobian(sg.jacobian(f)) and sg.jacobian(sg.hessian(f)) are; a "
                "Hessian is of a scalar function"), transform)
        check_float_arguments(transform, inner, args, tuple(sorted(set(self.indices) |
                                                                   set(inner.indices))))
        return nested_jacobian(inner, self.indices, self.single, args)

    def _of_containers(self, args):
        """This Jacobian where an argument is a tuple, list or dict (Note [Jacobians of
        container arguments]): the Jacobian of a function of their leaves, regrouped."""
        transform = "jacobian" if self.of is None else "hessian"
        check_float_arguments(transform, self.of or self.f, args, self.indices)
        leaves, trees = pytree.flatten_args(args)
        flat = self.__dict__.setdefault("_flat", {}).get(trees)
        if flat is None:
            fn = self.of if self.of is not None else self.f
            stand_in = leaf_function(fn, trees, transform)
            starts = numpy.cumsum([0] + [len(pytree.flatten(a)[0]) for a in args])
            wrt = tuple(k for i in self.indices for k in range(starts[i], starts[i + 1]))
            if self.of is not None:
                api = sys.modules["srcgrad.api"]  # (above this module: it made this Hessian)
                jac = Jacobian(api.grad(stand_in, wrt), wrt, False, "forward", self.chunk_size,
                               of=stand_in, hooked_mode="reverse")
            else:
                jac = Jacobian(stand_in, wrt, False, self.mode, self.chunk_size)
            flat = self._flat[trees] = (jac, starts)
        jac, starts = flat
        out_tree, out_leaves = jac._call(tuple(leaves), parts=True)  # noqa: SLF001 (its own class)
        # one per output leaf: a block per differentiated leaf
        regrouped = [self._group(blocks, trees, starts) for blocks in out_leaves]
        if self.of is not None:  # a Hessian's outer level is its gradient's: regrouped too
            return self._group(regrouped, trees, starts)
        return pytree.unflatten(out_tree, regrouped)

    def _group(self, values, trees, starts):
        """`values` (one per leaf of the `wrt` arguments) nested like those arguments."""
        per_arg, k = [], 0
        for i in self.indices:
            n = starts[i + 1] - starts[i]
            per_arg.append(pytree.unflatten(trees[i], list(values[k:k + n])))
            k += n
        return per_arg[0] if self.single else tuple(per_arg)

    def _plan(self, args, mode):
        """The batched program for these argument shapes (None: one pass per seed)."""
        if any(pytree.is_node(a) for a in args):
            self.fallback_reason = "a tuple, list or dict argument"
            return None
        key = (tuple([modules.guard_value(a) for a in args]), mode)
        if key not in self._plans:
            kind = "hessian" if self.of is not None else "jacfwd" if mode == "forward" else "jacrev"
            try:
                self._plans[key] = _Batched(self.of or self.f, kind, self.indices, self.single,
                                            args, self.chunk_size)
                self._reasons[key] = None
            except (Unbatchable, ProbeFailed, CompileError) as err:
                # the per-seed code still works, or raises the error from its own program
                self._plans[key] = None
                self._reasons[key] = f"{type(err).__name__}: {err}"
        self.fallback_reason = self._reasons[key]
        return self._plans[key]

    def _assemble(self, args, outs, blocks):
        """blocks[k][j]: the (out k size, arg j size) matrix; reshaped like jax's: the
        leaves of the result, which nests them like f's output."""
        leaves = []
        for k, out in enumerate(outs):
            per_arg = tuple(blocks[k][j].reshape(numpy.shape(out) + numpy.shape(args[i]))
                            for j, i in enumerate(self.indices))
            leaves.append(per_arg[0] if self.single else per_arg)
        return leaves


# Seeds per pass when the caller names no chunk_size: as many as keep the per-chunk
# function's largest value within CHUNK_BYTES (srcgrad.pipeline.batched.batched_ops: the
# program is batched for default_chunk's size, measured, and compiled again if more fit).
# Fused programs (Note [Seed-linear fusion]) hold small values: the 640x640 MLP Hessian
# runs in one pass of 640 seeds, a GEMM each step, where 20 chunks of 32 took 2x longer.
CHUNK_BYTES = 5 << 20
MIN_CHUNK = 16


def _check_numpy_arguments(transform: str, args) -> None:
    """A TypeError for arrays of another library: the matrices are assembled with NumPy
    (README: jacobian/hessian on non-NumPy arrays, not yet), which would fail deep inside
    (CuPy refuses the implicit copy to the host) or convert silently."""
    target = backend.target_of(*args)
    if target is not backend.NUMPY:
        raise TypeError(f"{transform}: {target.describe()} arrays are not supported yet (NumPy "
                        "arrays only); build the matrix from sg.vjp or sg.jvp, which take them, "
                        "or pass NumPy copies")


def default_chunk(args, seed_shapes, total) -> int:
    """A chunk size from the largest argument or seed: a proxy for the largest value
    one seed's derivative program holds (its batched form is `chunk` times that)."""
    largest = max([int(numpy.size(a)) for a in args] + [int(numpy.prod(s)) for s in seed_shapes] + [1])
    return max(MIN_CHUNK, min(total, CHUNK_BYTES // (8 * largest)))


class _Batched:
    """One batched program (Note [Batching] in srcgrad.passes.batch) for one tuple of
    argument shapes, and how its chunks of identity seeds assemble the blocks."""

    def __init__(self, fn, kind, indices, single, args, chunk_size):
        self.kind, self.indices = kind, indices
        fs = vjp_jvp.source_function(fn, len(args), _shaped(fn, args))  # (defaults: constants)
        compiled = modules.Compiled(fs, kind, indices, single)
        parsed = compiled.parsed()
        if kind == "jacrev":
            seed_shapes = programs.output_shapes(parsed, args)
            self.dtypes = [numpy.dtype(numpy.float64)] * len(seed_shapes)
        else:
            seed_shapes = [numpy.shape(args[i]) for i in indices]
            self.dtypes = [_float_dtype(args[i]) for i in indices]
        self.seed_shapes = [tuple(s) for s in seed_shapes]
        self.sizes = [int(numpy.prod(s)) for s in self.seed_shapes]
        total = sum(self.sizes)
        if total == 0:
            raise ProbeFailed("no seed: an empty argument or output")
        self.total = total
        size = min(chunk_size or default_chunk(args, seed_shapes, total), total)
        guards = tuple([modules.guard_value(a) for a in args])
        # no chunk_size: the program picks one from its fused values' sizes (CHUNK_BYTES)
        key = programs.cache_key(parsed, ("batched", kind, indices, guards, chunk_size and size))

        def generate():
            functions = programs.batched_program(parsed, kind, indices, tuple(args), size,
                                                 budget=None if chunk_size else CHUNK_BYTES)
            return modules._module(parsed, key or "uncached", functions)  # noqa: SLF001

        namespace = compiled._load(key, generate)  # noqa: SLF001 (modules' cache)
        self.primal = namespace[f"{parsed.name}_{kind}_primal"]  # once per call
        self.impl = namespace[f"{parsed.name}_{kind}"]  # once per chunk of seeds
        self.size = namespace[f"{parsed.name}_{kind}_chunk"]()
        self._allocate = namespace[f"{parsed.name}_{kind}_workspace"]
        self._threads = threading.local()  # each thread's workspace buffers
        self.module_source = compiled.module_source
        if kind == "hessian":
            n = len(indices)
            self.tree = pytree.LEAF if single else ("tuple", (pytree.LEAF,) * n)
        else:
            self.tree = programs.trace(parsed, args=args)[0].out_tree  # (shape facts: H2)
        self._seeds: dict = {}  # chunk start -> the seed arrays (read-only, reused)

    def seeds(self, start):
        """The identity seeds of columns start .. start + size, one array per seed
        parameter (rows past the last column are zero: the last chunk is padded)."""
        hit = self._seeds.get(start)
        if hit is None:
            eye = numpy.zeros((self.size, self.total))
            rows = min(self.size, self.total - start)
            eye[numpy.arange(rows), start + numpy.arange(rows)] = 1.0
            hit, offset = [], 0
            for shape, n, dtype in zip(self.seed_shapes, self.sizes, self.dtypes):
                part = numpy.ascontiguousarray(eye[:, offset:offset + n], dtype=dtype)
                part.flags.writeable = False  # generated code never writes a seed
                hit.append(part.reshape((self.size,) + shape))
                offset += n
            self._seeds[start] = hit
        return hit

    def blocks(self, args):
        """(out tree, output leaves, blocks[k][j]) as jacobian_blocks returns them."""
        columns, outs = None, None
        workspace = getattr(self._threads, "buffers", None)
        if workspace is None:
            workspace = self._threads.buffers = self._allocate()
        firsts, hoisted = self.primal(*args)  # Note [Hoisting the primal]
        for start in range(0, self.total, self.size):
            # what the pass returns may live in the workspace: copied out before the next
            batched = self.impl(*hoisted, *self.seeds(start), workspace)
            rows = min(self.size, self.total - start)
            if columns is None:
                outs = firsts
                # what each batched result differentiates: the arguments (reverse mode)
                # or the outputs (forward mode, and the gradients of a Hessian)
                shapes = ([numpy.shape(args[i]) for i in self.indices] if self.kind == "jacrev"
                          else [numpy.shape(o) for o in firsts])
                width = sum(int(numpy.prod(s)) for s in shapes)
                columns = numpy.empty((self.total, width),
                                      dtype=numpy.result_type(*self.dtypes, *batched))
            offset = 0
            for t, shape in zip(batched, shapes):
                n = int(numpy.prod(shape))
                flat = numpy.broadcast_to(t, (self.size,) + tuple(shape)).reshape(self.size, n)
                columns[start:start + rows, offset:offset + n] = flat[:rows]
                offset += n
        # columns[s, e]: d(result element e) / d(seed s)
        return self.tree, outs, self._split(columns, outs, args)

    def _split(self, columns, outs, args):
        arg_sizes = [numpy.size(args[i]) for i in self.indices]
        if self.kind == "jacrev":  # seeds are output elements; entries are argument elements
            rows, cols = self.sizes, arg_sizes
            matrix = columns
        else:  # seeds are argument elements; entries are output elements
            rows, cols = [numpy.size(o) for o in outs], arg_sizes
            matrix = columns.T
        blocks, r0 = [], 0
        for nr in rows:
            c0, row = 0, []
            for nc in cols:
                row.append(numpy.ascontiguousarray(matrix[r0:r0 + nr, c0:c0 + nc]))
                c0 += nc
            blocks.append(row)
            r0 += nr
        return blocks


def jacobian_blocks(f, args, indices, mode, backend=None):
    """(out tree, output leaves, blocks): blocks[k][j] is the (size of output k, size of
    argument indices[j]) Jacobian matrix, by forward or reverse mode."""
    if mode == "forward":
        return _forward_blocks(f, args, indices, backend)
    return _reverse_blocks(f, args, indices, backend)


def _forward_blocks(f, args, indices, backend=None):
    fn = vjp_jvp.source_function(f, len(args), args)  # (a gradient's: its variant for args)
    blocks, outs, tree = None, None, None
    for j, i in enumerate(indices):
        compiled = vjp_jvp.compiled_jvp(fn, (i,), backend=backend)
        arg = numpy.asarray(args[i])
        basis = numpy.zeros(arg.size, dtype=_float_dtype(arg))
        tangent = basis.reshape(arg.shape)
        if compiled.backend_option == "numba":
            impl = compiled.numba_entry(list(args), [tangent])
        else:
            impl = compiled.entry_at(args)  # the generic code, else a variant (Note [Layout facts])
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


def _shaped(f, args):
    """`args` where `f`'s generated code for them is what these programs batch (sg.vmap's,
    or a gradient whose shape-generic code refuses: vjp_jvp.shaped_args), else None."""
    return vjp_jvp.shaped_args(f, args)


def _hooks():
    from srcgrad import contexts  # the hook state; the eager runtime is not imported

    return contexts.current_hooks()


def _reverse_blocks(f, args, indices, backend=None):
    hooks = _hooks()  # the hook state is part of the variant (issue 10 item 2)
    compiled = vjp_jvp.compiled_vjp(vjp_jvp.source_function(f, len(args), _shaped(f, args)),
                                    hooks=hooks is not None, backend=backend)
    fwd, bwd, _ = compiled.vjp_variant(list(args))  # a variant: Note [Layout facts] decides more
    if hooks is not None:  # packed once by the forward, unpacked by each row's backward
        fwd, bwd = functools.partial(fwd, hooks[0]), functools.partial(bwd, hooks[1])
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
        batched = [p for p in self.jac._plans.values() if p is not None]  # noqa: SLF001
        if batched:  # the batched program that ran last (Note [Batching])
            self.module_source = batched[-1].module_source
            return self.module_source
        fn = vjp_jvp.source_function(self.jac.f)
        if self.jac.mode == "reverse":
            compiled = vjp_jvp.compiled_vjp(fn)
            compiled.load()
            self.module_source = compiled.module_source
        else:
            parts = []
            for i in self.jac.indices:
                compiled = vjp_jvp.compiled_jvp(fn, (i,))
                compiled.load()
                parts.append(compiled.module_source)
            self.module_source = "\n".join(parts)
        return self.module_source

    def explain(self) -> str:
        """sg.explain's text: the plans compiled, and why a plan runs one pass per seed."""
        jac = self.jac
        kind = "jacobian" if jac.of is None else "hessian"
        batched = sum(p is not None for p in jac._plans.values())  # noqa: SLF001
        lines = [f"{kind} of {_name(jac)} (mode {jac.mode}), backend: "
                 + (jac.backend or "the arguments' array namespace (NumPy for NumPy arrays)"),
                 f"plans compiled: {len(jac._plans)} (one per argument shapes and mode), "  # noqa: SLF001
                 f"{batched} batched (all seeds in one program)"]
        lines += [f"  one pass per seed: {why}" for why in jac._reasons.values() if why]  # noqa: SLF001
        return "\n".join(lines)

    def refusal(self) -> str:
        kind = "jacobian" if self.jac.of is None else "hessian"
        return (f"sg.{kind} of `{_name(self.jac)}` cannot be differentiated by sg.grad, "
                "sg.value_and_grad or sg.hessian, nor called inside compiled code: a jacobian "
                "or hessian has no generated source")

    def entry(self, index: int = 0):
        # no line here: srcgrad.api names the user's call (errors.at_user_call), the
        # tracer the line inside compiled code
        raise CompileError(self.refusal(),
                           hint="sg.jacobian, sg.vjp and sg.jvp of it are supported (Note "
                           "[Transforms of a Jacobian]); or differentiate the function itself, "
                           "or call sg.grad inside and build the matrix outside")

    def fingerprint(self):
        return None


def _name(jac) -> str:
    fn = jac.of if jac.of is not None else jac.f
    while isinstance(fn, Jacobian):
        fn = fn.of if fn.of is not None else fn.f
    return getattr(inspect_unwrap(fn), "__name__", "f")
