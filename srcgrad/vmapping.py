"""`sg.vmap(f, in_axes=0, out_axes=0)` (API.md §1): `f` mapped over a batch axis, as
one generated function over the batch (Note [Vmap as batching] in srcgrad.pipeline.vmap).

JAX's semantics: `in_axes` is an int or None for every argument, or a tuple with one
int or None per argument; `out_axes` an int or None for every output, or a tuple with
one per output leaf. The batch size is the mapped arguments' common size; where they
disagree the error names each one. The module is compiled once per argument shapes and
axes, cached like the other transforms' (memory and disk), and `sg.source` shows it.
"""

from __future__ import annotations

import functools
import inspect

import numpy

from srcgrad import arguments, backend
from srcgrad.errors import CompileError, at_user_call, hide_internal_frames
from srcgrad.ir import tree as pytree
from srcgrad.jacobians import JacobianSource
from srcgrad.pipeline import modules, programs, vjp_jvp


def _axis(a) -> bool:
    return a is None or isinstance(a, (int, numpy.integer)) and not isinstance(a, bool)


def _check_axes(value, what: str):
    def ok(a):  # an in_axes entry may be a tree of them for a container argument, as JAX's
        return _axis(a) or what == "in_axes" and pytree.is_node(a) and all(
            _axis(leaf) for leaf in pytree.flatten(a)[0])
    if ok(value) or isinstance(value, (tuple, list)) and all(ok(a) for a in value):
        return tuple(value) if isinstance(value, list) else value
    raise TypeError(f"vmap: {what} must be an int, None, or a tuple of them (one per "
                    f"{'argument' if what == 'in_axes' else 'output'}); got {value!r}")


def leaf_axes(arg, axis, name: str) -> list:
    """One axis or None per leaf of a (container) argument: JAX's in_axes prefix, an int
    or None for every leaf, or a tree of them with the argument's own structure."""
    leaves, tree = pytree.flatten(arg)
    if not pytree.is_node(axis):
        return [axis] * len(leaves)
    axis_leaves, axis_tree = pytree.flatten(axis)
    if axis_tree != tree:
        raise ValueError(f"vmap: in_axes for `{name}` is {pytree.describe(axis_tree)} but the "
                         f"argument is {pytree.describe(tree)}: give one int or None, or the "
                         "argument's own structure with one per array")
    return axis_leaves


def examples_of(args, axes) -> tuple:
    """One example of each mapped argument (its first slice), the others as they are."""
    return tuple(a if ax is None else numpy.take(a, 0, axis=ax) for a, ax in zip(args, axes))


class VMapped:
    """The function `sg.vmap(f, in_axes, out_axes)` returns."""

    def __init__(self, f, in_axes=0, out_axes=0):
        if not callable(f):
            raise TypeError(f"vmap: f must be a function, got {type(f).__name__}")
        self._vm_f = f
        self._vm_in_axes = _check_axes(in_axes, "in_axes")
        self._vm_out_axes = _check_axes(out_axes, "out_axes")
        self._vm_plans: dict = {}  # (guards, axes) -> (generated function, out tree)
        self._vm_calls: dict = {}  # guards -> generated function (__call__'s quick path)
        self._vm_module_source = None
        # (not f's __dict__: a Jacobian's or a gradient's attributes are no vmap's, and a
        # transform of this one copies this __dict__, so its names are prefixed)
        functools.update_wrapper(self, f, updated=())
        self.__name__ = f"vmap_{getattr(f, '__name__', 'f')}"
        self.__srcgrad__ = _VmapSource(self)

    def _name(self, i: int) -> str:
        # (read only for an error's text: inspect.signature costs tens of microseconds,
        # which per call is a visible share of a small batched program)
        try:
            params = list(inspect.signature(self._vm_f).parameters)
        except (TypeError, ValueError):
            params = []
        return params[i] if i < len(params) else f"argument {i}"

    def _axes_per_argument(self, n: int) -> tuple:
        axes = self._vm_in_axes if isinstance(self._vm_in_axes, tuple) else (self._vm_in_axes,) * n
        if len(axes) != n:
            raise ValueError(f"vmap: in_axes has {len(axes)} entries but {n} arguments were "
                             f"given to {getattr(self._vm_f, '__name__', 'f')}()")
        return axes

    def axes_for(self, args, axes=None, name_of=None, argument_of=None) -> tuple:
        """(axes, size): one non-negative axis or None per argument, and the batch size.
        For the leaves of container arguments, `axes` (default: in_axes per argument),
        `name_of` (a leaf's name for an error: `p['w']`) and `argument_of` (its
        argument's index) are given."""
        axes = self._axes_per_argument(len(args)) if axes is None else axes
        name_of, argument_of = name_of or self._name, argument_of or (lambda i: i)
        if all(a is None for a in axes):
            raise ValueError("vmap: in_axes maps no argument (every entry is None); map at "
                             "least one")
        found, out = [], []
        for i, (a, ax) in enumerate(zip(args, axes)):
            if ax is None:
                out.append(None)
                continue
            if pytree.is_node(a):
                raise TypeError(f"vmap: argument `{name_of(i)}` is a {type(a).__name__}: mapping "
                                "tuples, lists or dicts is not supported yet; pass the arrays "
                                "as separate arguments")
            ndim = numpy.ndim(a)
            if not -ndim <= ax < ndim:
                raise ValueError(f"vmap: in_axes={ax} for argument `{name_of(i)}` of rank {ndim} "
                                 "(a mapped argument needs that axis)")
            ax = int(ax) % ndim
            found.append((i, ax, numpy.shape(a)[ax]))
            out.append(ax)
        sizes = {s for _, _, s in found}
        if len(sizes) > 1:
            listed = ", ".join(f"`{name_of(i)}` (argument {argument_of(i)}) has size {s} on axis {ax}"
                               for i, ax, s in found)
            raise ValueError(f"vmap got inconsistent sizes for the mapped axes: {listed}")
        size = sizes.pop()
        if size == 0:
            raise ValueError("vmap: the mapped axes have size 0 (no example to trace)")
        return tuple(out), size

    def __call__(self, *args, **kwargs):
        # The quick path: arguments like an earlier call's (guard_value: the shapes,
        # dtypes and classes its axes, size and program follow from), no container among
        # them (a container's guard value is only its class). It is most of the wrapper's
        # cost per call otherwise (axes_for: 10 us of a 0.3 ms per-example gradient).
        guards = tuple([modules.guard_value(a) for a in args])
        fn = self._vm_calls.get(guards)
        if fn is not None and not kwargs:
            return fn(*args)
        if kwargs:
            raise TypeError("vmap: pass the arguments positionally (in_axes counts positions)")
        if any(pytree.is_node(a) for a in args):
            return self._call_on_leaves(args)
        axes, size = self.axes_for(args)
        key = (guards, axes, self._vm_out_axes)
        plan = self._vm_plans.get(key)
        if plan is None:
            try:
                plan = self._vm_plans[key] = self._compile(args, axes, size)
            except CompileError as err:  # the user's line, not the compiler's frames under it
                raise hide_internal_frames(at_user_call(err, "vmap")) from None
        self._vm_calls[guards] = plan[0]
        return plan[0](*args)  # (it returns f's structure: Note [Vmap as batching])

    def _compile(self, args, axes, size, traceable: bool = False):
        """(the generated function, its out tree); `traceable`: for another transform to
        trace (entry_at), so no construct the frontend refuses (Note [Unbuffered rows])."""
        target = backend.target_of(*args)
        if target is not backend.NUMPY:  # the module is bound to NumPy (issue 32: not yet)
            raise TypeError(f"vmap: {target.describe()} arrays are not supported yet (NumPy "
                            "arrays only)")
        source = getattr(self._vm_f, "__srcgrad__", None)
        if isinstance(source, JacobianSource) or getattr(source, "kind", "vmap") != "vmap":
            # a derivative batched into one program: complex arguments are refused as the
            # transform itself refuses them (its own check runs only on its own calls; the
            # batched source reads the generated code: fuzz seed 2600029, issue 28)
            arguments.check_not_complex("vmap of " + getattr(source, "kind", "jacobian"),
                                        self._vm_f, args)
        if isinstance(source, JacobianSource):
            return self._compile_jacobian(args, axes, size)
        inner = getattr(self._vm_f, "__srcgrad__", None)
        if getattr(inner, "shape_specialised", False):  # a vmap of a vmap: the inner one's
            fn = inner.entry_at(examples_of(args, axes))  # generated code for one example
        else:  # a transform's result: its generated code
            fn = vjp_jvp.source_function(self._vm_f, len(args), vjp_jvp.shaped_args(
                self._vm_f, examples_of(args, axes)))
        compiled = modules.Compiled(fn, "vmap")
        parsed = compiled.parsed()
        guards = tuple([modules.guard_value(a) for a in args])
        key = programs.cache_key(parsed, ("vmap", axes, self._vm_out_axes, guards)
                                 + (("traceable",) if traceable else ()))
        examples = examples_of(args, axes)
        batched = tuple(a if ax is None else numpy.moveaxis(a, ax, 0) for a, ax in zip(args, axes))

        def generate():
            from srcgrad.pipeline.vmap import vmap_program  # the batching pass: on a miss only

            functions = vmap_program(parsed, axes, self._vm_out_axes, examples, size, batched,
                                     traceable)
            return modules._module(parsed, key or "uncached", functions)  # noqa: SLF001

        namespace = compiled._load(key, generate)  # noqa: SLF001 (modules' cache)
        self._vm_module_source = compiled.module_source
        tree = compiled.out_tree
        if tree is None:  # a disk hit: the tree _module wrote into the text
            tree = modules.stored_out_tree(compiled.module_source)
        return namespace[f"{parsed.name}_vmap"], tree


    def _compile_jacobian(self, args, axes, size):
        """sg.vmap of sg.jacobian / sg.hessian: its derivative program batched over the
        seeds and then over the examples (srcgrad.pipeline.vmap.vmap_jacobian_program)."""
        jac = self._vm_f
        examples = examples_of(args, axes)
        inner = jac.of or jac.f
        fn = vjp_jvp.source_function(inner, len(args), vjp_jvp.shaped_args(inner, examples))
        compiled = modules.Compiled(fn, "vmap")
        parsed = compiled.parsed()
        if jac.of is not None:
            kind = "hessian"
            n = len(jac.indices)
            tree = pytree.LEAF if jac.single else ("tuple", (pytree.LEAF,) * n)
        else:
            mode = jac.mode
            if mode == "auto":  # fewer seeds wins, as sg.jacobian's own choice
                outs = sum(int(numpy.prod(s)) for s in programs.output_shapes(parsed, examples))
                mode = "forward" if sum(numpy.size(examples[i]) for i in jac.indices) < outs else "reverse"
            kind = "jacfwd" if mode == "forward" else "jacrev"
            tree = programs.trace(parsed, args=examples)[0].out_tree
        guards = tuple([modules.guard_value(a) for a in args])
        key = programs.cache_key(parsed, ("vmap", kind, jac.indices, jac.single, axes,
                                          self._vm_out_axes, guards))

        def generate():
            from srcgrad.pipeline.vmap import vmap_jacobian_program

            functions = vmap_jacobian_program(parsed, kind, jac.indices, jac.single, axes,
                                              self._vm_out_axes, examples, size, tree)
            return modules._module(parsed, key or "uncached", functions)  # noqa: SLF001

        namespace = compiled._load(key, generate)  # noqa: SLF001
        self._vm_module_source = compiled.module_source
        return namespace[f"{parsed.name}_vmap"], tree

    # Note [Vmap of container arguments]
    # A dict, list or tuple argument (the params of `sg.vmap(sg.grad(loss), in_axes=(None,
    # 0, 0))(params, X, Y)`) is mapped leaf by leaf: in_axes gives one axis for all its
    # leaves or a tree of them (leaf_axes). A plain function is traced over the leaves
    # (its parsed source with the arguments' trees, as sg.grad's container variant is); a
    # gradient's container variant is already a generated function of the leaves, whose
    # flat result tree_entry's `regroup` nests back, per example or batched alike.
    def _call_on_leaves(self, args):
        leaves, trees = pytree.flatten_args(args)
        names, owners, flat = [], [], []
        for i, (a, ax) in enumerate(zip(args, self._axes_per_argument(len(args)))):
            sub, tree = pytree.flatten(a)
            flat += leaf_axes(a, ax, self._name(i))
            names += [self._name(i) + path for path in _leaf_paths(tree)]
            owners += [i] * len(sub)
        axes, size = self.axes_for(leaves, tuple(flat), names.__getitem__, owners.__getitem__)
        key = ("tree", trees, tuple([modules.guard_value(a) for a in leaves]), axes,
               self._vm_out_axes, modules.mutation_allowed())
        plan = self._vm_plans.get(key)
        if plan is None:
            try:
                plan = self._vm_plans[key] = self._compile_leaves(leaves, trees, axes, size)
            except CompileError as err:
                raise hide_internal_frames(err) from None
        fn, regroup = plan
        out = fn(*leaves)
        return out if regroup is None else regroup(out)

    def _compile_leaves(self, leaves, trees, axes, size):
        if backend.target_of(*leaves) is not backend.NUMPY:
            raise TypeError("vmap: NumPy arrays only in container arguments")
        if not _axis(self._vm_out_axes):
            raise TypeError("vmap: of container arguments, out_axes must be one int or None "
                            "(for every output) for now")
        examples = examples_of(leaves, axes)
        inner = getattr(self._vm_f, "__srcgrad__", None)
        if isinstance(inner, modules.Compiled) and inner.kind in ("grad", "value_and_grad"):
            # (0-d arrays, not NumPy scalars: a variant for a scalar reads it with float(),
            # which the batching trace refuses as it would in the user's code)
            examples = tuple(numpy.asarray(e) if isinstance(e, numpy.generic) else e
                             for e in examples)
            args = _unflatten_args(trees, examples)
            example_key = ("tree", trees, tuple([modules.guard_value(a) for a in examples]),
                           modules.mutation_allowed())
            fn, regroup = inner.tree_entry(args, trees, example_key)
            compiled = modules.Compiled(fn, "vmap")
        elif inner is None:
            compiled, regroup = modules.Compiled(self._vm_f, "vmap", arg_trees=trees), None
        else:
            raise TypeError(f"vmap of {getattr(self._vm_f, '__name__', 'this transform')} with "
                            "tuple, list or dict arguments: not yet (sg.grad and "
                            "sg.value_and_grad of them, or a plain function, are)")
        parsed = compiled.parsed()
        key = programs.cache_key(parsed, ("vmap", axes, self._vm_out_axes, trees,
                                          tuple([modules.guard_value(a) for a in leaves])))
        batched = tuple(a if ax is None else numpy.moveaxis(a, ax, 0) for a, ax in zip(leaves, axes))

        def generate():
            from srcgrad.pipeline.vmap import vmap_program

            functions = vmap_program(parsed, axes, self._vm_out_axes, examples, size, batched)
            return modules._module(parsed, key or "uncached", functions)  # noqa: SLF001

        namespace = compiled._load(key, generate)  # noqa: SLF001
        self._vm_module_source = compiled.module_source
        return namespace[f"{parsed.name}_vmap"], regroup


def _leaf_paths(tree) -> list:
    """`['w']`, `[0]`, `.field` of each leaf of a tree definition, in flatten's order."""
    kind = tree[0]
    if kind == "leaf":
        return [""]
    if kind == "dict":
        labels = [f"[{k!r}]" for k in tree[1]]
    elif kind == "record":
        labels = [f".{name}" for name in tree[2]]
    else:
        labels = [f"[{i}]" for i in range(len(tree[1]))]
    return [label + rest for label, child in zip(labels, pytree.children(tree))
            for rest in _leaf_paths(child)]


def _unflatten_args(trees, leaves) -> tuple:
    out, start = [], 0
    for tree in trees:
        n = pytree.num_leaves(tree)
        out.append(pytree.unflatten(tree, leaves[start:start + n]))
        start += n
    return tuple(out)


class _VmapSource:
    """What `sg.source` reads, and what other transforms of a vmap trace."""

    def __init__(self, vm):
        self.vm = vm

    @property
    def module_source(self):
        return self.vm._vm_module_source

    def explain(self) -> str:
        """sg.explain's text for a vmap."""
        compiled = self.vm._vm_module_source is not None
        return (f"vmap of {getattr(self.vm._vm_f, '__name__', 'f')}: one batched program for the "
                "arguments' shapes and axes" + ("" if compiled else " (not called yet)"))

    def load(self):
        if self.vm._vm_module_source is None:
            raise ValueError("sg.source of a vmap: call it once first (its batched program "
                             "is compiled for the arguments' shapes and axes)")
        return self.vm._vm_module_source

    shape_specialised = True  # its entry exists per argument shapes only (entry_at)

    def entry(self, index: int = 0):
        # (sg.grad/value_and_grad of a vmap come here: they trace shape-generic code; a
        # vmap's output has the batch axis anyway, so a gradient of it needs a reduction)
        raise CompileError("sg.vmap called inside compiled code without its arguments' "
                           "shapes (sg.source of the outer transform), or there with a tuple, "
                           "list or dict argument, is not supported yet; sg.grad and "
                           "sg.value_and_grad of a vmap also need a scalar output, and a "
                           "vmap's has the batch axis",
                           hint="apply sg.vmap outside: sg.vmap(sg.grad(f)) gives per-example "
                           "gradients; differentiate a function that reduces the vmap's "
                           "output (np.sum(sg.vmap(f)(X))), called with arrays")

    def entry_at(self, args: tuple):
        """The generated function for arguments like `args` (a transform of the vmap at
        them: sg.jacobian's per-seed columns)."""
        axes, size = self.vm.axes_for(tuple(args))
        key = (tuple([modules.guard_value(a) for a in args]), axes, self.vm._vm_out_axes, "traceable")
        if key not in self.vm._vm_plans:  # noqa: SLF001
            self.vm._vm_plans[key] = self.vm._compile(tuple(args), axes, size, traceable=True)  # noqa: SLF001
        return self.vm._vm_plans[key][0]  # noqa: SLF001

    def fingerprint(self):
        return None
