"""Calls of user functions traced in place (srcgrad.frontend.trace): a module-level
function, a nested `def` or lambda (closures read the defining scope at call time), a
transform's generated function called from compiled code (Note [Transforms in compiled
code] in srcgrad.frontend.transforms), and the errors that name the user's line for them.
"""

from __future__ import annotations

import gast

from srcgrad.errors import CompileError
from srcgrad.frontend.resolve import resolve
from srcgrad.frontend.scope import NestedFunction, Scope, TraceObject, every_scope
from srcgrad.ir.core import Const, Var

MAX_INLINE_DEPTH = 64


class Inlining:
    """Mixed into the Tracer: `expr`, `error`, `trace_body`, `depth`, `scopes`, `loc`
    and `locate` are the Tracer's."""

    def _generated_entry(self, compiled, node, args=()):
        """The generated function a transform called from compiled code runs; an error
        compiling it that names no line of its own is reported at this call. sg.vmap's
        exists per argument shapes only: compiled for stand-ins of the traced arguments'
        shapes and dtypes where this trace is a variant's (Note [Vmap as batching]). Another
        transform's shape-generic code is used where it can stand in for a variant; where
        it cannot (Compiled.needs_shapes: `enumerate(x)`, a matrix's norm), the variant for
        the stand-ins, as the transform called on those arguments outside would run."""
        try:
            if getattr(compiled, "shape_specialised", False):
                standins = self._stand_ins(args)
                if standins is not None:
                    try:
                        return compiled.entry_at(standins)
                    except (TypeError, ValueError) as err:
                        self.error(node, str(err))
            if hasattr(compiled, "needs_shapes") and compiled.needs_shapes():
                standins = self._stand_ins(args, numbers_as_arrays=True)
                if standins is not None:
                    try:
                        return compiled.entry_at(standins)  # (its own refusal, if any, stands)
                    except (TypeError, ValueError):
                        pass
            return compiled.entry()
        except CompileError as err:
            if err.lineno:
                raise
            self.error(node, err.message, err.hint)

    def _stand_ins(self, args, numbers_as_arrays=False):
        """Zero arrays (or scalars) of the shapes, classes and dtypes the variant's probe
        gives `args`, else None (the shape-generic trace knows none). `numbers_as_arrays`:
        a number's stand-in is a 0-d array, as compiled code reads it (for a variant whose
        source is traced: one for a float or NumPy scalar converts it with float())."""
        probe = getattr(self, "example_probe", None)
        if probe is None:
            return None
        import numpy

        try:
            found = probe([op for ops in [*self.enclosing, self.ops] for op in ops],
                          list(self.mutation.inputs))
        except Exception:  # noqa: BLE001 (the ops fail on these arguments: no facts)
            return None
        out = []
        for a in args:
            if isinstance(a, Const):
                out.append(a.value)
                continue
            if not isinstance(a, Var):  # (a traced dict or list of values: no stand-in)
                return None
            kind, shape = found.kinds.get(a), found.shapes.get(a)
            if kind is None or shape is None:
                return None
            cls, dtype = kind
            if numbers_as_arrays and shape == () and cls is not numpy.ndarray:
                out.append(numpy.zeros((), dtype or (numpy.int64 if cls is int else numpy.float64)))
            elif cls is numpy.ndarray or isinstance(cls, type):
                out.append(numpy.zeros(shape, dtype) if cls is numpy.ndarray else cls(0))
            elif shape == ():  # a number or a 0-d value: one kind and no class (shapes._kind_of),
                out.append(numpy.float64(0.0))  # as a float passed to a vmapped f (issue 28)
            else:
                return None
        return tuple(out)

    def inline_generated(self, fn, args, kwargs, node):
        """Trace a transform's generated function called at `node` (Note [Transforms in
        compiled code]): an error in the generated text is reported at the user's call."""
        from srcgrad.frontend import gradients  # (transforms in compiled code only: issue 15)
        from srcgrad.frontend.parse import parse_function

        lowered = gradients.inline(self, fn, args, kwargs, node)  # a loop's gradient, as IR
        if lowered is not gradients.NOT_LOWERED:
            return lowered
        try:
            return self.inline(parse_function(fn), args, kwargs, node)
        except CompileError as err:
            if err.lineno and fn.__code__.co_filename != err.filename:
                raise  # already at a user's line (a custom Function's backward)
            name = getattr(fn, "__name__", "f")
            self.error(node, f"{err.message} (in the generated code of `{name}`, called here)",
                       err.hint)

    def inline(self, fs, args, kwargs, node):
        """Trace a user function's body in place, its parameters bound to the arguments."""
        import inspect

        self._check_depth(fs.name, node)
        self.fence(fs)
        try:
            bound = inspect.signature(fs.fn).bind(*args, **kwargs)
        except TypeError as err:
            self.error(node, f"bad call to `{fs.name}`: {err}")
        bound.apply_defaults()
        env = {}
        for name, value in bound.arguments.items():
            if isinstance(value, (tuple, list, dict, Var, Const, TraceObject)):
                env[name] = value
            else:
                env[name] = Const(value)
        return self._trace_call(fs.node.body, self._function_scope(fs, env))

    def inline_nested(self, nested, args, kwargs, node):
        """Call a nested def or lambda: its body traced in a scope inside its definer's."""
        self._check_depth(nested.name, node)
        try:
            bound = nested.signature.bind(*args, **kwargs)
        except TypeError as err:
            self.error(node, f"bad call to `{nested.name}`: {err}")
        bound.apply_defaults()
        env = {n: v if isinstance(v, (tuple, list, dict, Var, Const, TraceObject)) else Const(v)
               for n, v in bound.arguments.items()}
        outer = nested.scope
        scope = Scope(env, outer.lookup_free, outer.locate, outer=outer,
                      local_names=nested.local_names)
        return self._trace_call(nested.body, scope)

    # Note [Writes by callees inside blocks]
    # ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
    # A block (an `if` branch, a loop body: Note [Tracing control flow]) traces in a
    # copy of one scope's env and carries out the names of that scope it rebinds. A
    # function called inside the block is traced in place, in scopes pushed while the
    # block is traced: what its writes rebind there (`def bump(v): v[0] = 0`, called as
    # `if c: bump(y)`, rebinds the caller's `y`, which is the block's scope) is the
    # block's to carry, as if the callee's body were written in the block.
    #
    # A function's own `if` may write into its caller's arrays too (`def f(a): if c:
    # a += 1`, called as `f(x)`, rebinds the caller's `x`). The branches of an `if`
    # (`trace_branch`) are traced with every scope outside the block (the callers,
    # a closure's definer) in a copy of its env as well, and the `if` merges what
    # either branch rebinds there as it merges its own names (ControlFlow.branches,
    # if_with_return). A loop body does not: a scope its block neither copied nor
    # pushed would see a value defined in the body leak past it, so Mutation._remap
    # refuses a write that changes a name there (`block_outside`), and the loop is
    # unrolled where its trip count is known (Note [Unrolling loops the lowering
    # refuses] in srcgrad.frontend.unrolling).
    def trace_block(self, stmts, scope, *args, outside=(), **kwargs):
        self.blocks.append((scope, len(self.scopes), outside))
        try:
            return super().trace_block(stmts, scope, *args, **kwargs)
        finally:
            self.blocks.pop()

    def trace_branch(self, stmts, scope, **kwargs):
        """trace_block for a branch of an `if`, plus, per scope outside it, (its env
        before, its env at the branch's end) (Note [Writes by callees inside blocks])."""
        outside = [s for s in every_scope(self.scopes) if s is not scope] if self.depth else []
        before = [s.env for s in outside]
        for s in outside:
            s.env = dict(s.env)
        try:
            result = self.trace_block(stmts, scope, outside=outside, **kwargs)
            return (*result, [(env, s.env) for s, env in zip(outside, before)])
        finally:
            for s, env in zip(outside, before):
                s.env = env

    def block_outside(self, scope) -> bool:
        """Whether `scope`'s names are outside a block traced now that did not copy them
        (Note [Writes by callees inside blocks]); False outside every block. Every block
        from the innermost out to the one `scope` lives in counts: a branch that copied
        the caller's names merges them, but a loop around that branch carries only its
        own (fuzz seed 971186: `return` inside a loop of a called function, whose other
        branch wrote into the caller's array, left the caller reading a value of the
        loop body)."""
        for own, start, copied in reversed(self.blocks):
            if scope is own or any(s is scope for s in self.scopes[start:]):
                return False  # the scope lives inside this block: blocks further out never see it
            if not any(s is scope for s in copied):
                return True
        return False

    def _check_depth(self, name, node):
        if self.depth >= MAX_INLINE_DEPTH:
            self.error(node, f"calls to `{name}` nest more than {MAX_INLINE_DEPTH} deep: "
                       "compiled code inlines every call, so recursion must end at a depth "
                       "known when compiling", "give the recursion a base case decided by "
                       "values known when compiling: a list's length, an array's shape "
                       "(`if x.shape[0] == 1`), or a count passed as a literal (`f(x, 3)`) "
                       "and lowered by each call; not array values or the compiled "
                       "function's own arguments")

    def _trace_call(self, body, scope):
        saved = self.loc, self.locate
        self.depth += 1
        self.scopes.append(scope)
        try:
            return self.trace_body(body, scope)
        except RecursionError:
            self.error(None, "calls nest too deeply to compile (Python's recursion limit)",
                       "give the recursion a base case decided by values known when "
                       "compiling: a list's length, or a literal count lowered by each call")
        finally:
            self.scopes.pop()
            self.depth -= 1
            self.loc, self.locate = saved

    def fence(self, fs) -> None:
        """srcgrad.frontend.fence.fence(fs), once per function a trace reads: the pipeline
        fences the function it traces first, `inline` a callee before binding its
        arguments, and `_function_scope` every scope's function."""
        if fs.node not in self.fenced:  # (the nodes themselves: an id could be reused)
            from srcgrad.frontend.fence import fence

            fence(fs)
            self.fenced.add(fs.node)

    def _function_scope(self, fs, env):
        self.fence(fs)
        return Scope(env, lambda name: resolve(name, fs), fs.loc)


def _at_user_line(fs, err: CompileError) -> CompileError:
    """An error inside a generated function being differentiated again (grad(grad(f))),
    moved to the user's line that generated code came from (its origin comment)."""
    from srcgrad.frontend.parse import is_generated, user_line

    if not is_generated(fs) or err.filename != fs.filename:
        return err
    loc = user_line(err.filename, err.lineno)
    if loc is None:
        return err
    return CompileError.at(loc, f"{err.message} (in the generated code of `{fs.name}`)", err.hint)


class _NestedDef(NestedFunction):
    """A `def` or lambda inside a compiled function: traced at each call, in a scope
    whose free names read the defining scope's bindings at call time (closures capture
    variables). Defaults are evaluated once, at the definition, as Python does."""

    def __init__(self, tracer, node, scope):
        import inspect

        self.node, self.scope = node, scope
        if isinstance(node, gast.Lambda):
            self.name = "<lambda>"
            self.body = [gast.Return(value=node.body)]
            gast.copy_location(self.body[0], node.body)
        else:
            self.name, self.body = node.name, node.body
        a = node.args
        P = inspect.Parameter
        positional = [(x, P.POSITIONAL_ONLY) for x in a.posonlyargs] + \
                     [(x, P.POSITIONAL_OR_KEYWORD) for x in a.args]
        defaults = [tracer.expr(d, scope) for d in a.defaults]
        first_default = len(positional) - len(defaults)
        params = []
        for i, (arg, kind) in enumerate(positional):
            default = defaults[i - first_default] if i >= first_default else P.empty
            params.append(P(arg.id, kind, default=default))
        if a.vararg is not None:
            params.append(P(a.vararg.id, P.VAR_POSITIONAL))
        for arg, d in zip(a.kwonlyargs, a.kw_defaults):
            params.append(P(arg.id, P.KEYWORD_ONLY,
                            default=P.empty if d is None else tracer.expr(d, scope)))
        if a.kwarg is not None:
            params.append(P(a.kwarg.id, P.VAR_KEYWORD))
        self.signature = inspect.Signature(params)
        self.local_names = frozenset(p.name for p in params) | _assigned_names(self.body)

    def __repr__(self):
        return f"<nested function {self.name}>"


def _assigned_names(body) -> frozenset:
    """Names a function body binds (its locals), not looking into nested scopes."""
    names, declared = set(), set()
    stack = list(body)
    while stack:
        n = stack.pop()
        if isinstance(n, gast.Nonlocal):
            declared.update(n.names)
            continue
        if isinstance(n, (gast.FunctionDef, gast.Lambda)):
            if isinstance(n, gast.FunctionDef):
                names.add(n.name)
            continue
        if isinstance(n, (gast.ListComp, gast.GeneratorExp, gast.DictComp, gast.SetComp)):
            continue
        if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store):
            names.add(n.id)
        stack.extend(gast.iter_child_nodes(n))
    return frozenset(names - declared)
