"""`gradcheck` / `gradgradcheck` (torch_semantics.md §11): for plain functions of NumPy
arrays here, for functions of `sg.Tensor`s (and `Function.apply`) in
srcgrad.autograd.gradcheck_eager, chosen by the inputs.

The analytical Jacobians come from srcgrad's generated code: one backward pass
per output element (reverse mode, `check_backward_ad`) and one forward-mode pass
per input element (`check_forward_ad`); the numerical ones from central
differences. Which inputs "require grad": floating-point NumPy arrays (0-d
included). Python scalars, integer arrays and other objects are passed through
unchanged, and, as in PyTorch, are not counted in "input {j}" of the messages.
Outputs are all floating-point leaves of the result (tuples, lists, dicts).

Messages follow PyTorch's, with Jacobians laid out as PyTorch prints them: one
row per input element, one column per output element.
"""

from __future__ import annotations

import warnings

import numpy

from srcgrad.autograd import gradcheck_eager
from srcgrad.autograd.gradcheck_eager import GradcheckError
from srcgrad.ir import tree as pytree

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError"]

_FAST_MODE_NOTE = ("\n\nThe above quantities relating the numerical and analytical jacobians are computed "
                   "\nin fast mode. See: https://github.com/pytorch/pytorch/issues/53876 for more "
                   "background \nabout fast mode. Below, we recompute numerical and analytical "
                   "jacobians in slow mode:\n\n")




def _eager_module(inputs):
    """srcgrad.autograd.gradcheck_eager when `inputs` holds an sg.Tensor, else None."""
    items = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    return gradcheck_eager if gradcheck_eager.has_tensor(items) else None


def _requires_grad(x) -> bool:
    return isinstance(x, numpy.ndarray) and x.dtype.kind in "fc"


def _prepare(inputs):
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    diff = [i for i, x in enumerate(inputs) if _requires_grad(x)]
    if not diff:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but none "
                         "of them have requires_grad=True.")
    for j, i in enumerate(diff):
        x = inputs[i]
        if any(stride == 0 and n > 1 for stride, n in zip(x.strides, x.shape)):
            raise RuntimeError(f"The {j}th input has a dimension with stride 0. gradcheck only supports "
                               "inputs that are non-overlapping to be able to compute the numerical "
                               "gradients correctly. You should call .contiguous on the input before "
                               "passing it to gradcheck.")
        if x.dtype not in (numpy.float64, numpy.complex128):
            warnings.warn(f"Input #{j} requires gradient and is not a double precision floating point "
                          "or complex. This check will likely fail if all the inputs are not of double "
                          "precision floating point or complex. ", UserWarning, stacklevel=3)
    return inputs, diff


def _leaves(out):
    return [numpy.asarray(leaf) for leaf in pytree.flatten(out)[0]]


def _differentiable_outputs(leaves) -> list:
    return [k for k, leaf in enumerate(leaves) if leaf.dtype.kind in "fc"]


def _numerical_blocks(func, inputs, diff, outs, eps):
    """blocks[k][j]: (output k size, input diff[j] size) central differences."""
    shapes = [o.shape for o in outs]
    blocks = [[numpy.zeros((o.size, inputs[i].size)) for i in diff] for o in outs]
    for j, i in enumerate(diff):
        x = inputs[i].copy()
        flat = x.reshape(-1)
        for col in range(x.size):
            orig = flat[col]
            args = list(inputs)
            args[i] = x
            flat[col] = orig + eps
            plus = _leaves(func(*args))
            flat[col] = orig - eps
            minus = _leaves(func(*args))
            flat[col] = orig
            for a, b in ((plus, shapes), (minus, shapes)):
                got = [p.shape for p in a]
                if got != b:
                    bad = next(k for k in range(min(len(got), len(b))) if got[k] != b[k])
                    raise AssertionError(
                        "Expected `func` to return outputs with the same shape when inputs are "
                        f"perturbed on index {numpy.unravel_index(col, x.shape)} by {eps}, but got: "
                        f"shapes {b[bad]} and {got[bad]}.")
            for k in range(len(outs)):
                blocks[k][j][:, col] = ((plus[k] - minus[k]) / (2 * eps)).reshape(-1)
    return blocks


def _analytical_blocks(func, inputs, diff, mode):
    from srcgrad import jacobians
    from srcgrad.autograd import transform_blocks

    if transform_blocks.handles(func):  # sg.jacobian / sg.hessian / vjp_fn: not source
        return None, transform_blocks.analytical_blocks(func, inputs, diff, mode)
    _, outs, blocks = jacobians.jacobian_blocks(func, inputs, diff, mode)
    return [numpy.asarray(o) for o in outs], blocks


def _compare(numerical, analytical, outputs, diff, atol, rtol):
    """The first failing (output i, input j, numerical, analytical), or None."""
    for n_k, k in enumerate(outputs):
        for j in range(len(diff)):
            n, a = numerical[k][j], analytical[k][j]
            if not numpy.all(numpy.abs(a - n) <= atol + rtol * numpy.abs(n)):
                return n_k, j, n, a
    return None


def _mismatch_message(i, j, n, a):
    # PyTorch prints the Jacobian transposed: rows are input elements.
    return (f"Jacobian mismatch for output {i} with respect to input {j},\n"
            f"numerical:{numpy.array2string(n.T)}\nanalytical:{numpy.array2string(a.T)}\n")


def _fail(message, raise_exception):
    if raise_exception:
        raise GradcheckError(message)
    return False


def gradcheck(func, inputs, *, eps=1e-06, atol=1e-05, rtol=0.001, raise_exception=True, nondet_tol=0.0,
              check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
              check_batched_forward_grad=False, check_forward_ad=False, check_backward_ad=True,
              fast_mode=False, masked=None) -> bool:
    """Check srcgrad's derivatives of `func` at `inputs` against central differences.

    Returns True, or raises GradcheckError (returns False with
    raise_exception=False) naming the first mismatching output/input pair.
    For NumPy functions `check_undefined_grad`, `nondet_tol` and the batched checks
    are accepted for PyTorch compatibility: generated code is deterministic and never
    produces an undefined gradient, so they always pass. For sg.Tensor inputs they run
    (srcgrad.autograd.gradcheck_eager).
    """
    if not (check_forward_ad or check_backward_ad):
        raise AssertionError("Expected at least one of check_forward_ad or check_backward_ad to be True")
    if check_batched_grad and not check_backward_ad:
        raise AssertionError("Setting check_batched_grad=True requires check_backward_ad to be True")
    if check_batched_forward_grad and not check_forward_ad:
        raise AssertionError("Setting check_batched_forward_grad=True requires check_forward_ad "
                             "to be True")
    eager = _eager_module(inputs)
    if eager is not None:  # a function of sg.Tensors (Function.apply included): the engine
        return eager.gradcheck(func, inputs, eps=eps, atol=atol, rtol=rtol,
                               raise_exception=raise_exception, nondet_tol=nondet_tol,
                               check_undefined_grad=check_undefined_grad,
                               check_forward_ad=check_forward_ad,
                               check_backward_ad=check_backward_ad, fast_mode=fast_mode,
                               check_batched_grad=check_batched_grad,
                               check_batched_forward_grad=check_batched_forward_grad)
    inputs, diff = _prepare(inputs)
    out_leaves = _leaves(func(*inputs))  # an error in func propagates
    outputs = _differentiable_outputs(out_leaves)
    modes = (["reverse"] if check_backward_ad else []) + (["forward"] if check_forward_ad else [])
    if fast_mode:
        return _fast_check(func, inputs, diff, out_leaves, outputs, modes, eps, atol, rtol,
                           raise_exception)
    numerical = _numerical_blocks(func, inputs, diff, out_leaves, eps)
    for mode in modes:
        _, analytical = _analytical_blocks(func, inputs, diff, mode)
        bad = _compare(numerical, analytical, outputs, diff, atol, rtol)
        if bad is not None:
            return _fail(_mismatch_message(*bad), raise_exception)
        if mode == "reverse" and not _backward_scales_with_grad_output(func, inputs, diff):
            return _fail("backward not multiplied by grad_output", raise_exception)
    return True


def _backward_scales_with_grad_output(func, inputs, diff) -> bool:
    """A zero cotangent must give zero gradients."""
    from srcgrad.autograd import transform_blocks
    from srcgrad.pipeline import vjp_jvp

    if transform_blocks.handles(func):  # its blocks are built column by column: linear
        return True
    compiled = vjp_jvp.compiled_vjp(vjp_jvp.source_function(func))
    fwd, bwd = compiled.entry(0), compiled.entry(1)
    outs, saved = fwd(*inputs)
    grads = bwd(saved, *[numpy.zeros(numpy.shape(o)) for o in outs])
    return all(numpy.all(numpy.asarray(grads[i]) == 0) for i in diff)


def _fast_check(func, inputs, diff, out_leaves, outputs, modes, eps, atol, rtol, raise_exception):
    """Compare v^T J u for random u (per input) and v (per output); slow mode for the message."""
    rng = numpy.random.default_rng(0)
    us = [rng.standard_normal(inputs[i].shape) for i in diff]
    vs = [rng.standard_normal(o.shape) for o in out_leaves]
    numerical = _numerical_blocks(func, inputs, diff, out_leaves, eps)
    for mode in modes:
        _, analytical = _analytical_blocks(func, inputs, diff, mode)
        for n_k, k in enumerate(outputs):
            for j in range(len(diff)):
                n = vs[k].reshape(-1) @ numerical[k][j] @ us[j].reshape(-1)
                a = vs[k].reshape(-1) @ analytical[k][j] @ us[j].reshape(-1)
                if abs(a - n) > atol + rtol * abs(n):
                    slow_n, slow_a = numerical[k][j], analytical[k][j]
                    msg = (f"Jacobian mismatch for output {n_k} with respect to input {j},\n"
                           f"numerical:{n}\nanalytical:{a}\n" + _FAST_MODE_NOTE
                           + f"Numerical:\n {numpy.array2string(slow_n.T)}\n"
                           f"Analytical:\n{numpy.array2string(slow_a.T)}\n\n"
                           f"The max per-element difference (slow mode) is: "
                           f"{numpy.max(numpy.abs(slow_a - slow_n))}.\n")
                    return _fail(msg, raise_exception)
    return True


# ---------------------------------------------------------------------- second order
_GRADGRAD_COUNT = [0]


def _vjp_function(func, inputs, diff, out_example):
    """A compiled function `(inputs..., grad_outputs...) -> J(inputs)^T grad_outputs`.

    Its source is written here (`sum(out_k * v_k)` over the outputs) and its
    gradient w.r.t. the differentiable inputs is generated by srcgrad, so
    gradchecking it checks the generated second-order code.
    """
    from srcgrad import api
    from srcgrad.codegen.loader import load_module

    paths = _leaf_paths(out_example)
    n = len(inputs)
    xs = [f"x{i}" for i in range(n)]
    vs = [f"v{k}" for k in range(len(paths))]
    terms = " + ".join(f"np.sum(out{p} * {v})" for p, v in zip(paths, vs)) or "0.0"
    _GRADGRAD_COUNT[0] += 1
    name = f"gradgrad_{getattr(func, '__name__', 'f')}"
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    source = (f"def {name}({', '.join(xs + vs)}):\n"
              f"    out = func({', '.join(xs)})\n"
              f"    return {terms}\n")
    filename = f"<srcgrad-gradgradcheck-{_GRADGRAD_COUNT[0]}>"
    ns = load_module(source, filename, {"func": func, "np": numpy})  # registered in linecache
    return api.grad(ns[name], wrt=tuple(diff))


def _leaf_paths(value, prefix=""):
    if isinstance(value, (tuple, list)) and not hasattr(value, "_fields"):
        return [p for i, v in enumerate(value) for p in _leaf_paths(v, f"{prefix}[{i}]")]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _leaf_paths(v, f"{prefix}[{k!r}]")]
    return [prefix]


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-06, atol=1e-05, rtol=0.001,
                  gen_non_contig_grad_outputs=False, raise_exception=True, nondet_tol=0.0,
                  check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
                  check_fwd_over_rev=False, check_rev_over_rev=True, fast_mode=False,
                  masked=False) -> bool:
    """gradcheck of `(inputs, grad_outputs) -> J(inputs)^T grad_outputs`, the generated
    backward, whose derivatives are srcgrad's second-order code. Random grad_outputs
    (float64, fixed seed) are used unless given. With sg.Tensor inputs the backward is
    the eager engine's create_graph pass (srcgrad.autograd.gradcheck_eager)."""
    if not (check_fwd_over_rev or check_rev_over_rev):
        raise AssertionError("Expected at least one of check_fwd_over_rev or check_rev_over_rev "
                             "to be True")
    for flag, name in ((check_undefined_grad, "check_undefined_grad"),
                       (check_batched_grad, "check_batched_grad")):
        if flag and not check_rev_over_rev:
            raise AssertionError(f"Setting {name}=True requires check_rev_over_rev to be True")
    eager = _eager_module(inputs)
    if eager is not None:
        return eager.gradgradcheck(func, inputs, grad_outputs, eps=eps, atol=atol, rtol=rtol,
                                   raise_exception=raise_exception, nondet_tol=nondet_tol,
                                   check_undefined_grad=check_undefined_grad,
                                   check_fwd_over_rev=check_fwd_over_rev,
                                   check_rev_over_rev=check_rev_over_rev, fast_mode=fast_mode,
                                   check_batched_grad=check_batched_grad)
    inputs, diff = _prepare(inputs)
    out = func(*inputs)
    leaves = _leaves(out)
    if grad_outputs is None:
        rng = numpy.random.default_rng(0)
        grad_outputs = tuple(rng.standard_normal(leaf.shape) for leaf in leaves)
    else:
        grad_outputs = tuple(grad_outputs) if isinstance(grad_outputs, (tuple, list)) \
            else (grad_outputs,)
        grad_outputs = tuple(numpy.asarray(g, dtype=numpy.float64) for g in grad_outputs)
    if len(grad_outputs) != len(leaves):
        raise ValueError(f"gradgradcheck: {len(grad_outputs)} grad_outputs for {len(leaves)} outputs")
    backward = _vjp_function(func, inputs, diff, out)
    return gradcheck(backward, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception, nondet_tol=nondet_tol,
                     check_undefined_grad=check_undefined_grad, check_forward_ad=check_fwd_over_rev,
                     check_backward_ad=check_rev_over_rev, fast_mode=fast_mode)


# ---------------------------------------------------------------------- srcgrad check
def _parse_arg_spec(spec: str) -> list:
    """`"3x4,4,scalar"` -> [(3, 4), (4,), ()]."""
    shapes = []
    for item in (s.strip() for s in spec.split(",")):
        if item in ("scalar", "()", ""):
            shapes.append(())
            continue
        try:
            shape = tuple(int(n) for n in item.lower().split("x"))
        except ValueError:
            raise ValueError(f"--args: cannot read {item!r}; write shapes like 3x4, 4 or scalar") from None
        if any(n < 0 for n in shape):
            raise ValueError(f"--args: negative dimension in {item!r}")
        shapes.append(shape)
    return shapes


def check_cli(func, args_spec, *, seed: int = 0, modes=("reverse", "forward")) -> tuple:
    """`srcgrad check`: (ok, report) of reverse- and forward-mode Jacobians of `func` at
    random float64 inputs of the shapes in `args_spec`, against central differences.

    `args_spec` is `"3x4,4,scalar"` or a list with one item per argument (what the CLI
    parses from `"(3,4), (4,), 2, 0.5"`): a shape tuple is a random float64 array; an int
    is passed as it is and not differentiated; a float is a 0-d float64 array holding it.
    `modes`: which Jacobians (`srcgrad check --mode`); one that cannot be computed (a
    custom Function without `jvp` in forward mode) is reported as failed, and the
    others are still checked.
    """
    import inspect

    params = list(inspect.signature(func).parameters)
    items = _parse_arg_spec(args_spec) if isinstance(args_spec, str) else list(args_spec)
    if len(items) != len(params):
        raise ValueError(f"--args gives {len(items)} shapes but {func.__name__}() takes "
                         f"{len(params)} arguments ({', '.join(params)})")
    rng = numpy.random.default_rng(seed)
    inputs = tuple(numpy.asarray(rng.standard_normal(s)) if isinstance(s, tuple)
                   else s if isinstance(s, int) else numpy.asarray(s, dtype=numpy.float64)
                   for s in items)
    diff = [i for i, s in enumerate(items) if not isinstance(s, int)]
    outs = _leaves(func(*inputs))
    numerical = _numerical_blocks(func, inputs, diff, outs, 1e-6)
    lines = [f"srcgrad check {func.__name__}(" + ", ".join(
        f"{p}: {_describe_item(s)}" for p, s in zip(params, items))
        + f")  float64 inputs, seed {seed}, central differences eps=1e-6, atol=1e-5, rtol=1e-3"]
    ok = True
    for mode in modes:
        try:
            _, analytical = _analytical_blocks(func, inputs, diff, mode)
        except Exception as err:  # noqa: BLE001 (reported, as a mismatch is)
            ok = False
            lines.append(f"  {mode:7s}  cannot compute the {mode}-mode Jacobian: "
                         f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")
            continue
        for k in range(len(outs)):
            for j, p in enumerate(params[i] for i in diff):
                n, a = numerical[k][j], analytical[k][j]
                err = float(numpy.max(numpy.abs(a - n))) if n.size else 0.0
                good = bool(numpy.all(numpy.abs(a - n) <= 1e-5 + 1e-3 * numpy.abs(n)))
                ok &= good
                lines.append(f"  {mode:7s}  output {k} w.r.t. {p}: max |analytical - numerical| = "
                             f"{err:.2e}  {'ok' if good else 'MISMATCH'}")
    lines.append("OK" if ok else "FAILED: analytical and numerical Jacobians differ")
    return ok, "\n".join(lines) + "\n"


def _describe_item(item) -> str:
    """`3x4`, `scalar` (a 0-d array), or the number passed (`int 2`, `float 0.5`)."""
    if isinstance(item, tuple):
        return "x".join(map(str, item)) if item else "scalar"
    return f"{type(item).__name__} {item!r}"


def __getattr__(name: str):
    """torch's deprecated `get_numerical_jacobian` / `get_analytical_jacobian` (for
    sg.Tensors), from their own module on first use."""
    if name in ("get_numerical_jacobian", "get_analytical_jacobian"):
        from srcgrad.autograd import gradcheck_jacobians

        return getattr(gradcheck_jacobians, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
