"""srcgrad's own transforms called inside compiled code: `sg.grad(f)(x)`, `sg.jvp(f, ...)`,
`sg.vjp(f, x)` in a function that is itself differentiated.

Note [Transforms in compiled code]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The derivative program a transform generates is plain Python over NumPy, which the
tracer can trace like any user function (this is how `sg.grad(sg.grad(f))` works: the
outer transform differentiates the inner one's generated source). So a transform
called inside compiled code is never traced through srcgrad's own Python (api.py
checks arguments and raises, which compiled code cannot do); instead:

* `sg.grad(f, wrt)`, `sg.value_and_grad`, `sg.jacobian`, `sg.hessian`, `sg.vmap` of a static
  function run at compile time: the value is the transformed function, and a call of it
  traces its generated program (the tracer's `__srcgrad__` path), whether it is bound
  to a name first (`df = sg.grad(f)`, inside or outside) or called at once.
* `sg.jvp(f, primals, tangents)` traces `f`'s JVP program on the traced primals and
  tangents and nests the result like `f`'s.
* `sg.vjp(f, *primals)` traces `f`'s forward program; its `vjp_fn` is a `VjpFn` whose
  call traces the backward on the saved values and the cotangent.

Each traces the transform's shape-generic program where that can stand in for the
variant the transform would run outside on the traced arguments; where it cannot
(`Compiled.needs_shapes`: it refuses a form decided on the row count, `first, *rest = x`,
or leaves one to run time, a matrix's norm) and this trace is a variant's, the variant
for stand-ins of the arguments' shapes (`_shaped_entry`, `Inlining._generated_entry`);
a transform OF a transformed function (`sg.jacobian(sg.grad(g))`, `sg.vmap` of it) reads
that variant the same way (`vjp_jvp.shaped_args`).

The pipeline that makes those programs sits above the frontend, so the transforms and
the module that compiles them are registered (`register`, from srcgrad.api once it is
imported: `_registered`); the tracer knows them by identity. Any other function from
srcgrad's own package is refused at the user's call site (`internal_call`): tracing
srcgrad's Python would report an error inside srcgrad, at a line the user never wrote.
"""

from __future__ import annotations

import sys

from srcgrad.errors import CompileError
from srcgrad.frontend.scope import NestedFunction, TraceObject
from srcgrad.ir import tree as pytree

# Const and Var (srcgrad.ir.core) are bound by `lower_call`, the only way into the code
# that reads them: srcgrad.api imports this module, and a disk-cache hit imports no IR (S4)

NOT_LOWERED = object()

_TRANSFORMS: dict = {}  # api function -> its name ("grad", "jvp", ...)
_PIPELINE = []  # [srcgrad.pipeline.vjp_jvp], once srcgrad.api is imported
# transforms whose value is a function of static arguments (run at compile time)
_STATIC = ("grad", "value_and_grad", "jacobian", "hessian", "vmap")


def register(pipeline, **transforms) -> None:
    """Called by srcgrad.api: its transforms, and the module compiling their programs."""
    _PIPELINE[:] = [pipeline]
    _TRANSFORMS.update({fn: name for name, fn in transforms.items()})


def _registered() -> None:
    """Register srcgrad.api's transforms the first time the tracer asks. api does not
    import this module (a disk-cache hit imports no frontend: issue 15), so it cannot
    register them when imported; and the frontend sits below api, so it does not import
    api either: a callee can be one of its transforms only once srcgrad.api has been
    imported, and then it is in sys.modules."""
    api = sys.modules.get("srcgrad.api")
    if not _PIPELINE and api is not None:
        register(api.compiled_transforms(),
                 **{name: getattr(api, name) for name in _STATIC + ("jvp", "vjp")})


def transform_name(callee):
    _registered()
    try:
        return _TRANSFORMS.get(callee)
    except TypeError:  # an unhashable callee
        return None


def lower_call(tracer, callee, args, kwargs, node):
    """The traced value of a transform called in compiled code, or NOT_LOWERED."""
    global Const, Var
    from srcgrad.ir.core import Const, Var  # (the tracer has it imported: a dict lookup)
    name = transform_name(callee)
    if name is None:
        return NOT_LOWERED
    if name in _STATIC:
        return _static_transform(tracer, name, callee, args, kwargs, node)
    if name == "jvp":
        return _jvp(tracer, args, kwargs, node)
    return _vjp(tracer, args, kwargs, node)


def internal_call(tracer, callee, node) -> None:
    """Refuse, at the user's line, a call of a function from srcgrad's own package that
    the tracer would otherwise inline (generated modules are `srcgrad.generated`)."""
    module = getattr(callee, "__module__", None) or ""
    if (module == "srcgrad" or module.startswith("srcgrad.")) and module != "srcgrad.generated":
        tracer.fail(node, f"calling `{module}.{getattr(callee, '__qualname__', callee)}`",
                    "call srcgrad's transforms (sg.grad, sg.value_and_grad, sg.jvp, sg.vjp) "
                    "inside compiled code, or call this outside the compiled function")


def _static_values(tracer, name, args, kwargs, node) -> tuple:
    values = []
    for v in [*args, *kwargs.values()]:
        value = _static(v)
        if value is NOT_LOWERED:
            tracer.fail(node, f"`sg.{name}` of a value computed in the compiled function",
                        f"pass `sg.{name}` a function defined at module level and literal "
                        "options (`wrt=1`)")
        values.append(value)
    return values[:len(args)], dict(zip(kwargs, values[len(args):]))


def _static(value):
    """The Python value of a static tvalue (a Const, or a tuple/list of them), else NOT_LOWERED."""
    if isinstance(value, Const):
        return value.value
    if isinstance(value, (tuple, list)):
        items = [_static(v) for v in value]
        return NOT_LOWERED if any(i is NOT_LOWERED for i in items) else type(value)(items)
    return NOT_LOWERED


def _is_nested_def(value) -> bool:
    return isinstance(value, Const) and isinstance(value.value, NestedFunction)


def _function_argument(tracer, name, value, node):
    """The Python function a transform inside compiled code differentiates."""
    fn = value.value if isinstance(value, Const) else value
    if isinstance(fn, NestedFunction):
        tracer.fail(node, f"`sg.{name}` of a function defined inside the compiled function",
                    "define the function at module level (it may take what it closed over "
                    "as extra arguments) and pass that to the transform")
    if not callable(fn):
        tracer.error(node, f"`sg.{name}`: its first argument must be a function, got "
                     f"{type(fn).__name__}")
    return fn


def _static_transform(tracer, name, callee, args, kwargs, node):
    """`sg.grad(f, ...)`: the transformed function, made now (Note [Transforms in compiled code])."""
    if args and _is_nested_def(args[0]) or "f" in kwargs and _is_nested_def(kwargs["f"]):
        _function_argument(tracer, name, args[0] if args else kwargs["f"], node)
    values, options = _static_values(tracer, name, args, kwargs, node)
    try:
        return Const(callee(*values, **options))
    except CompileError:
        raise
    except (TypeError, ValueError) as err:  # bad options: the error api raises, at this line
        tracer.error(node, f"`sg.{name}`: {err}")


def _sequence(tracer, what, value, node) -> list:
    if isinstance(value, Const) and isinstance(value.value, (tuple, list)):
        return [Const(v) for v in value.value]
    if not isinstance(value, (tuple, list)):
        tracer.error(node, f"`sg.jvp`: {what} must be a tuple or list (one per argument of f)")
    return list(value)


def _leaves_only(tracer, name, values, node) -> None:
    for v in values:
        if not isinstance(v, (Var, Const)) or isinstance(v, Const) and isinstance(
                v.value, (tuple, list, dict)):
            tracer.fail(node, f"`sg.{name}` inside compiled code of a tuple, list or dict argument",
                        "pass the arrays as separate arguments of the function")


def _programs():
    _registered()
    if not _PIPELINE:  # registered from srcgrad.api, imported before any transform runs
        raise CompileError("srcgrad's transforms are not loaded")
    return _PIPELINE[0]


def _trace_generated(tracer, fn, args, node):
    return tracer.inline_generated(fn, list(args), {}, node)


def _jvp(tracer, args, kwargs, node):
    """`sg.jvp(f, primals, tangents, has_aux=...)`: f's JVP program traced on them."""
    names = ("f", "primals", "tangents")
    bound = dict(zip(names, args), **{k: v for k, v in kwargs.items() if k in names})
    has_aux = _flag(tracer, "jvp", kwargs, node)
    if set(bound) != set(names) or len(args) > 3:
        tracer.error(node, "`sg.jvp` takes (f, primals, tangents, *, has_aux=False)")
    fn = _function_argument(tracer, "jvp", bound["f"], node)
    primals = _sequence(tracer, "primals", bound["primals"], node)
    tangents = _sequence(tracer, "tangents", bound["tangents"], node)
    if len(primals) != len(tangents):
        tracer.error(node, f"`sg.jvp`: {len(primals)} primals but {len(tangents)} tangents; "
                     "give one tangent per primal")
    _leaves_only(tracer, "jvp", primals + tangents, node)
    pipeline = _programs()
    compiled = pipeline.compiled_jvp(pipeline.source_function(fn, len(primals)))
    entry = _shaped_entry(tracer, compiled, primals, compiled.entry, compiled.entry_at)
    outs, touts = _trace_generated(tracer, entry, primals + tangents, node)
    out_tree = compiled.out_tree
    tree, n_out = _split_aux(tracer, out_tree, has_aux, "jvp", node)
    out, tout = pytree.unflatten(tree, list(outs)[:n_out]), pytree.unflatten(tree, list(touts)[:n_out])
    if has_aux:
        return out, tout, pytree.unflatten(*pytree.aux_part(out_tree, list(outs)))
    return out, tout


def _shaped_entry(tracer, compiled, primals, generic, at):
    """`generic()`, the transform's shape-generic code; where that cannot stand in for a
    variant (Compiled.needs_shapes: `first, *rest = x`, a matrix's norm), `at(stand-ins)`:
    its variant for the primals' shapes where this trace is a variant's
    (Inlining._stand_ins), as the transform called on such arrays outside runs."""
    if compiled.needs_shapes():
        standins = tracer._stand_ins(primals, numbers_as_arrays=True)
        if standins is not None:
            return at(standins)
    return generic()


def _flag(tracer, name, kwargs, node) -> bool:
    value = kwargs.get("has_aux", Const(False))
    if not isinstance(value, Const):
        tracer.error(node, f"`sg.{name}`: has_aux must be True or False when compiling")
    return bool(value.value)


def _split_aux(tracer, tree, has_aux, name, node):
    try:
        return pytree.split_aux(tree, has_aux, name)
    except TypeError as err:
        tracer.error(node, str(err))


def _vjp(tracer, args, kwargs, node):
    """`sg.vjp(f, *primals, has_aux=...)`: f's forward program traced on the primals, and
    a `VjpFn` whose call traces its backward."""
    if not args:
        tracer.error(node, "`sg.vjp` takes (f, *primals, has_aux=False)")
    has_aux = _flag(tracer, "vjp", kwargs, node)
    fn = _function_argument(tracer, "vjp", args[0], node)
    primals = list(args[1:])
    _leaves_only(tracer, "vjp", primals, node)
    pipeline = _programs()
    compiled = pipeline.compiled_vjp(pipeline.source_function(fn, len(primals)))
    from srcgrad.frontend import gradients  # (IR: not on a disk-cache hit)

    def at(standins):  # (the variant's: sg.vjp's own at these shapes)
        gradients.refuse_loop_vjp(tracer, compiled, node, standins)
        return compiled.vjp_variant(list(standins))[:2]

    def generic():
        gradients.refuse_loop_vjp(tracer, compiled, node)  # (L2: a loop's tape, refused here)
        return compiled.entry(0), compiled.entry(1)

    fwd, bwd = _shaped_entry(tracer, compiled, primals, generic, at)
    outs, saved = _trace_generated(tracer, fwd, primals, node)
    outs = list(outs)
    out_tree = compiled.out_tree
    tree, n_out = _split_aux(tracer, out_tree, has_aux, "vjp", node)
    vjp_fn = VjpFn(bwd, saved, tree, outs[n_out:], len(primals))
    out = pytree.unflatten(tree, outs[:n_out])
    if has_aux:
        return out, vjp_fn, pytree.unflatten(*pytree.aux_part(out_tree, outs))
    return out, vjp_fn


class VjpFn(TraceObject):
    """The `vjp_fn` of `sg.vjp` inside compiled code: calling it traces the backward
    program on the values the forward saved (Note [Transforms in compiled code])."""

    def __init__(self, bwd, saved, tree, aux_outs, n_primals):
        self.bwd, self.saved, self.tree = bwd, saved, tree
        self.aux_outs, self.n_primals = aux_outs, n_primals

    def trace_method(self, tracer, name, args, kwargs, node):
        import numpy

        if name != "__call__":
            tracer.fail(node, f"the method `.{name}()` of a vjp_fn")
        if len(args) != 1 or kwargs:
            tracer.error(node, "vjp_fn takes one cotangent, shaped like f's output")
        cts, tree = pytree.flatten(args[0], is_leaf=lambda v: isinstance(v, (Var, Const)))
        if tree != self.tree:
            tracer.error(node, f"vjp_fn: the cotangent is {pytree.describe(tree)}, but f's "
                         f"output is {pytree.describe(self.tree)}")
        zeros = [tracer.call(numpy.zeros_like, [a], {}, node) for a in self.aux_outs]
        grads = _trace_generated(tracer, self.bwd, [self.saved, *cts, *zeros], node)
        return tuple(grads) if isinstance(grads, (tuple, list)) else (grads,)

    def trace_getattr(self, tracer, name, node):
        tracer.fail(node, f"the attribute `.{name}` of a vjp_fn")

    def trace_setattr(self, tracer, name, value, node):
        tracer.fail(node, f"assigning to `.{name}` of a vjp_fn")

    def __repr__(self):
        return "<vjp_fn traced in compiled code>"
