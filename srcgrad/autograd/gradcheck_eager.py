"""`gradcheck` / `gradgradcheck` of functions of `sg.Tensor`s, `Function.apply` included
(torch_semantics.md §11; srcgrad.autograd.gradcheck sends calls with Tensor inputs here).

The analytical Jacobians come from the eager engine: one `sg.autograd.grad` (a VJP)
per element of each differentiable output, each run twice to check that backward is
reentrant (`nondet_tol`), or, with `check_forward_ad`, one forward-mode pass with dual
tensors per input element. The numerical ones are central differences, the function
being called on fresh leaf Tensors holding the perturbed values (grad mode on, so a
function that itself differentiates, as gradgradcheck's does, works).

As in torch, "input j" counts the Tensors that require grad, "output i" the outputs
that require grad; Jacobians print one row per input element.

`check_undefined_grad` runs backward with undefined (None) output gradients, all of
them and, for several outputs, one at a time, and requires undefined or zero input
gradients. A row's node passes undefined gradients on (its backward of undefined
gradients is undefined); a custom Function's backward is called with them (zeros, or
None under `set_materialize_grads(False)`), so this checks custom Functions.
`check_batched_grad` runs one batched backward per output (srcgrad.autograd.gradcheck_batched).
`check_batched_forward_grad` runs one batched forward-mode pass per input (the same module).
Not done here: `masked` is accepted and ignored;
complex inputs are refused (torch checks them as Wirtinger derivatives).
"""

from __future__ import annotations

import importlib.util
import warnings

import numpy

from srcgrad.autograd import engine, grad_mode
from srcgrad.autograd.node import torch_size
from srcgrad.autograd.tensor import Tensor

__all__ = ["gradcheck", "gradgradcheck", "has_tensor", "GradcheckError"]

_NONDET_NOTE = (
    "\n\nNOTE: If your op relies on non-deterministic operations, this failure might be "
    "expected: call gradcheck/gradgradcheck with a `nondet_tol` keyword argument as large as "
    "the differences you accept.\n")
_FAST_MODE_NOTE = ("\n\nThe above quantities relating the numerical and analytical jacobians are "
                   "computed \nin fast mode. See: https://github.com/pytorch/pytorch/issues/53876 "
                   "for more background \nabout fast mode. Below, we recompute numerical and "
                   "analytical jacobians in slow mode:\n\n")


def has_tensor(inputs) -> bool:
    return any(isinstance(x, Tensor) for x in inputs)


class GradcheckError(RuntimeError):
    """A gradient check failed (a RuntimeError, as in PyTorch); srcgrad.autograd.gradcheck
    re-exports it, for arrays and Tensors alike."""


def _error(message):
    return GradcheckError(message)


def _as_tuple(x) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _tensor_outputs(out) -> list:
    return [o for o in _as_tuple(out) if isinstance(o, Tensor)]


def _prepare(inputs) -> list:
    """The indices of the inputs that require grad, with torch's checks and warnings."""
    diff = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    if not diff:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but "
                         "none of them have requires_grad=True.")
    for j, i in enumerate(diff):
        data = inputs[i]._data
        if data.dtype.kind == "c":
            raise NotImplementedError("gradcheck of complex Tensors is not supported by srcgrad's "
                                      "eager runtime yet")
        if any(s == 0 and n > 1 for s, n in zip(data.strides, data.shape)):
            raise RuntimeError(f"The {j}th input has a dimension with stride 0. gradcheck only "
                               "supports inputs that are non-overlapping to be able to compute "
                               "the numerical gradients correctly. You should call .contiguous "
                               "on the input before passing it to gradcheck.")
        if data.dtype != numpy.float64:
            warnings.warn(f"Input #{j} requires gradient and is not a double precision floating "
                          "point or complex. This check will likely fail if all the inputs are "
                          "not of double precision floating point or complex. ", UserWarning,
                          stacklevel=4)
    return diff


def _fmt(a) -> str:
    """An array printed as torch prints a tensor."""
    return repr(Tensor._make(numpy.array(a, order="C")))


# ---------------------------------------------------------------- numerical
def _evaluate(func, inputs, i, data) -> list:
    """The output arrays of `func` with input i replaced by a fresh leaf holding `data`."""
    args = list(inputs)
    x = inputs[i]
    args[i] = Tensor._make(data, rg=x._rg)
    with grad_mode.enable_grad():
        outs = _tensor_outputs(func(*args))
    return [numpy.array(o._data, dtype=numpy.float64) if o._data.dtype.kind in "fiub"
            else numpy.array(o._data) for o in outs]


def _check_shapes(expected, got, index, eps):
    for a, b in zip(expected, got):
        if a != b.shape:
            raise AssertionError(
                "Expected `func` to return outputs with the same shape when inputs are perturbed "
                f"on index {index} by {eps}, but got: shapes {torch_size(a)} and "
                f"{torch_size(b.shape)}.")


def _numerical(func, inputs, diff, shapes, eps) -> list:
    """blocks[k][j]: d output k / d input diff[j], shape (output size, input size)."""
    blocks = [[numpy.zeros((int(numpy.prod(s)), inputs[i]._data.size)) for i in diff]
              for s in shapes]
    for j, i in enumerate(diff):
        base = numpy.array(inputs[i]._data, copy=True)
        flat = base.reshape(-1)
        for col in range(base.size):
            orig = flat[col]
            flat[col] = orig + eps
            plus = _evaluate(func, inputs, i, base.copy())
            flat[col] = orig - eps
            minus = _evaluate(func, inputs, i, base.copy())
            flat[col] = orig
            index = tuple(int(n) for n in numpy.unravel_index(col, base.shape))
            _check_shapes(shapes, plus, index, eps)
            _check_shapes(shapes, minus, index, eps)
            for k in range(len(shapes)):
                blocks[k][j][:, col] = ((plus[k] - minus[k]) / (2 * eps)).reshape(-1)
    return blocks


def _directional(func, inputs, i, u, shapes, eps) -> list:
    """(f(x + eps u) - f(x - eps u)) / 2 eps for input i, per output (fast mode)."""
    base = numpy.asarray(inputs[i]._data, dtype=numpy.float64)
    plus = _evaluate(func, inputs, i, (base + eps * u).astype(inputs[i]._data.dtype))
    minus = _evaluate(func, inputs, i, (base - eps * u).astype(inputs[i]._data.dtype))
    _check_shapes(shapes, plus, "(direction u)", eps)
    return [(p - m) / (2 * eps) for p, m in zip(plus, minus)]


# ---------------------------------------------------------------- analytical
def _vjp(out, diff_inputs, v) -> list:
    """J(out)^T v per input, flattened arrays (zeros where an input is unused)."""
    grads = engine.grad([out], diff_inputs, [Tensor._make(v)], retain_graph=True,
                        allow_unused=True)
    return [numpy.zeros(x._data.size) if g is None else numpy.array(g._data, dtype=float).reshape(-1)
            for g, x in zip(grads, diff_inputs)]


def _reverse(out, diff_inputs, nondet_tol) -> list:
    """blocks[j] of one output by VJPs of its one-hot cotangents; each VJP twice."""
    blocks = [numpy.zeros((out._data.size, x._data.size)) for x in diff_inputs]
    for row in range(out._data.size):
        v = numpy.zeros(out._data.shape, dtype=out._data.dtype)
        v.reshape(-1)[row] = 1
        first = _vjp(out, diff_inputs, v)
        _check_reentrant(first, _vjp(out, diff_inputs, v), nondet_tol)
        for j, a in enumerate(first):
            blocks[j][row, :] = a
    return blocks


def _check_reentrant(first, second, nondet_tol) -> None:
    """Two backward passes with the same grad_output agree within nondet_tol (torch's
    reentrancy check, slow and fast mode alike)."""
    for a, b in zip(first, second):
        if a.size and numpy.max(numpy.abs(a - b)) > nondet_tol:
            raise _error(
                "Backward is not reentrant, i.e., running backward with same input and "
                "grad_output multiple times gives different values, although analytical "
                "gradient matches numerical gradient.The tolerance for nondeterminism was "
                f"{nondet_tol}." + _NONDET_NOTE)


def _forward_ad():
    """srcgrad.autograd.forward_ad, or None (then check_forward_ad says it checks nothing)."""
    if importlib.util.find_spec("srcgrad.autograd.forward_ad") is None:
        warnings.warn("gradcheck: srcgrad.autograd.forward_ad is not available, so "
                      "check_forward_ad=True checks nothing", UserWarning, stacklevel=5)
        return None
    from srcgrad.autograd import forward_ad

    return forward_ad


def _jvp(fwad, func, inputs, diff, j, tangent, n_out) -> list:
    """The output tangents (flat arrays) of `func` with input diff[j] carrying `tangent`."""
    with fwad.dual_level():
        args = list(inputs)
        for m, i in enumerate(diff):
            t = tangent if m == j else numpy.zeros_like(inputs[i]._data)
            args[i] = fwad.make_dual(inputs[i].detach(), Tensor._make(t))
        outs = _tensor_outputs(func(*args))[:n_out]
        result = []
        for o in outs:
            t = fwad.unpack_dual(o).tangent
            result.append(numpy.zeros(o._data.size) if t is None
                          else numpy.array(t._data, dtype=float).reshape(-1))
    return result


def _forward_blocks(fwad, func, inputs, diff, shapes) -> list:
    """blocks[k][j] from dual tensors: one forward pass per input element."""
    blocks = [[numpy.zeros((int(numpy.prod(s)), inputs[i]._data.size)) for i in diff]
              for s in shapes]
    for j, i in enumerate(diff):
        data = inputs[i]._data
        for col in range(data.size):
            tangent = numpy.zeros_like(data)
            tangent.reshape(-1)[col] = 1
            for k, t in enumerate(_jvp(fwad, func, inputs, diff, j, tangent, len(shapes))):
                blocks[k][j][:, col] = t
    return blocks


# ---------------------------------------------------------------- the checks
def _mismatch(i, j, n, a, forward=False) -> str:
    mode = "computed with forward mode " if forward else ""
    return (f"Jacobian {mode}mismatch for output {i} with respect to input {j},\n"
            f"numerical:{_fmt(n.T)}\nanalytical:{_fmt(a.T)}\n")


def _close(a, n, atol, rtol) -> bool:
    return bool(numpy.all(numpy.abs(a - n) <= atol + rtol * numpy.abs(n)))


def gradcheck(func, inputs, *, eps=1e-06, atol=1e-05, rtol=0.001, raise_exception=True,
              nondet_tol=0.0, check_undefined_grad=True, check_forward_ad=False,
              check_backward_ad=True, fast_mode=False, check_batched_grad=False,
              check_batched_forward_grad=False, **_ignored) -> bool:
    """srcgrad.autograd.gradcheck for Tensor inputs (see the module docstring)."""
    inputs = _as_tuple(inputs)
    diff = _prepare(inputs)
    diff_inputs = [inputs[i] for i in diff]
    with grad_mode.enable_grad():
        outs = _tensor_outputs(func(*inputs))  # an error in func propagates
    diff_out = [k for k, o in enumerate(outs) if o.requires_grad]
    shapes = [o._data.shape for o in outs]
    try:
        if fast_mode:
            _fast(func, inputs, diff, outs, diff_out, shapes, eps, atol, rtol, nondet_tol,
                  check_forward_ad, check_backward_ad)
        else:
            _slow(func, inputs, diff, outs, diff_out, shapes, eps, atol, rtol, nondet_tol,
                  check_forward_ad, check_backward_ad)
        if check_batched_forward_grad:
            from srcgrad.autograd.gradcheck_batched import check_batched_forward_grad as fwd

            fwd(func, inputs, _error)
        if check_backward_ad:
            if check_batched_grad:
                from srcgrad.autograd.gradcheck_batched import check_batched_grad as batched

                for n_k, k in enumerate(diff_out):
                    batched(diff_inputs, outs[k], n_k, _error)
            _check_mul_by_grad_output(outs, diff_out, diff_inputs)
            if check_undefined_grad:
                _check_undefined_grad(func, inputs, diff_inputs)
    except GradcheckError:
        if not raise_exception:
            return False
        raise
    return True


def _slow(func, inputs, diff, outs, diff_out, shapes, eps, atol, rtol, nondet_tol, fwd, bwd):
    numerical = _numerical(func, inputs, diff, shapes, eps)
    if not diff_out:  # torch: only a function with no differentiable output is checked so
        if any(numpy.any(b != 0) for blocks in numerical for b in blocks):
            raise _error("Numerical gradient for function expected to be zero")
        return
    diff_inputs = [inputs[i] for i in diff]
    if bwd:
        for n_k, k in enumerate(diff_out):
            analytical = _reverse(outs[k], diff_inputs, nondet_tol)
            for j in range(len(diff)):
                if not _close(analytical[j], numerical[k][j], atol, rtol):
                    raise _error(_mismatch(n_k, j, numerical[k][j], analytical[j]))
    fwad = _forward_ad() if fwd else None
    if fwad is not None:
        blocks = _forward_blocks(fwad, func, inputs, diff, shapes)
        for n_k, k in enumerate(diff_out):
            for j in range(len(diff)):
                if not _close(blocks[k][j], numerical[k][j], atol, rtol):
                    raise _error(_mismatch(n_k, j, numerical[k][j], blocks[k][j], True))


def _unit(rng, shape):
    """A random direction as torch's fast mode draws it: uniform [0, 1), norm 1."""
    v = rng.random(shape)
    return v / (numpy.linalg.norm(v) or 1.0)


def _fast(func, inputs, diff, outs, diff_out, shapes, eps, atol, rtol, nondet_tol, fwd, bwd):
    """v^T J u against central differences along u (atol scaled by sum(u) sum(v), as
    torch's _adjusted_atol); a failure is recomputed in slow mode for the message."""
    rng = numpy.random.default_rng(0)
    us = [_unit(rng, inputs[i]._data.shape) for i in diff]
    vs = [_unit(rng, s) for s in shapes]
    directional = [_directional(func, inputs, i, u, shapes, eps) for i, u in zip(diff, us)]
    if not diff_out:
        if any(numpy.any(d != 0) for per_input in directional for d in per_input):
            raise _error("Numerical gradient for function expected to be zero")
        return
    diff_inputs = [inputs[i] for i in diff]
    fwad = _forward_ad() if fwd else None
    tangents = None if fwad is None else [
        _jvp(fwad, func, inputs, diff, j, u.astype(inputs[i]._data.dtype), len(shapes))
        for j, (i, u) in enumerate(zip(diff, us))]
    for n_k, k in enumerate(diff_out):
        n = [float(numpy.sum(vs[k] * d[k])) for d in directional]
        analytical = []
        if bwd:
            v = vs[k].astype(outs[k]._data.dtype)
            grads = _vjp(outs[k], diff_inputs, v)
            _check_reentrant(grads, _vjp(outs[k], diff_inputs, v), nondet_tol)
            analytical.append((False, [float(g @ u.reshape(-1)) for g, u in zip(grads, us)]))
        if tangents is not None:
            analytical.append((True, [float(vs[k].reshape(-1) @ t[k]) for t in tangents]))
        for forward, a_row in analytical:
            for j, (a, nj) in enumerate(zip(a_row, n)):
                tol = atol * float(us[j].sum()) * float(vs[k].sum())
                if abs(a - nj) > tol + rtol * abs(nj):
                    raise _error(_fast_message(func, inputs, diff, shapes, eps, k, n_k, j, nj, a,
                                               outs, nondet_tol, fwad if forward else None))


def _fast_message(func, inputs, diff, shapes, eps, k, n_k, j, n, a, outs, nondet_tol,
                  fwad) -> str:
    slow_n = _numerical(func, inputs, diff, shapes, eps)[k][j]
    if fwad is None:
        slow_a = _reverse(outs[k], [inputs[i] for i in diff], nondet_tol)[j]
    else:
        slow_a = _forward_blocks(fwad, func, inputs, diff, shapes)[k][j]
    mode = "computed with forward mode " if fwad is not None else ""
    return (f"Jacobian {mode}mismatch for output {n_k} with respect to input {j},\n"
            f"numerical:{_fmt(numpy.float64(n))}\nanalytical:{_fmt(numpy.float64(a))}\n"
            + _FAST_MODE_NOTE + f"Numerical:\n {_fmt(slow_n.T)}\nAnalytical:\n{_fmt(slow_a.T)}\n\n"
            f"The max per-element difference (slow mode) is: "
            f"{numpy.max(numpy.abs(slow_a - slow_n)) if slow_n.size else 0.0}.\n")


def _check_mul_by_grad_output(outs, diff_out, diff_inputs) -> None:
    """A zero grad_output must give zero (or undefined) input gradients."""
    if not diff_out:
        return
    roots = [outs[k] for k in diff_out]
    zeros = [Tensor._make(numpy.zeros_like(o._data)) for o in roots]
    grads = engine.grad(roots, diff_inputs, zeros, retain_graph=True, allow_unused=True)
    for g in grads:
        if g is not None and numpy.any(g._data != 0):
            raise _error("backward not multiplied by grad_output")


_BC_WARNING = ("Backwards compatibility: New undefined gradient support checking feature is "
               "enabled by default, but it may break existing callers of this function. If this "
               "is true for you, you can call this function with \"check_undefined_grad=False\" "
               "to disable the feature")
_NOTES = 'Please look at "Notes about undefined output gradients" in "tools/autograd/derivatives.yaml"'


def _check_undefined_grad(func, inputs, diff_inputs) -> None:
    """Backward with undefined output gradients gives undefined or zero input gradients
    (torch's _test_undefined_backward_mode): all undefined, then one at a time."""
    def outputs():
        with grad_mode.enable_grad():
            return [o for o in _tensor_outputs(func(*inputs)) if o.requires_grad]

    n = len(outputs())
    cases = [None] + (list(range(n)) if n > 1 else [])  # None: every gradient undefined
    for undefined in cases:
        outs = outputs()
        roots = [(o._grad_fn, o._output_nr) if o._grad_fn is not None else (o.accumulator(), 0)
                 for o in outs]
        grads = [None if undefined is None or k == undefined else numpy.zeros_like(o._data)
                 for k, o in enumerate(outs)]
        try:
            results = engine._grad_once(roots, grads, diff_inputs, False, False)
        except RuntimeError as err:
            warnings.warn(_BC_WARNING, UserWarning, stacklevel=4)
            raise _error("Expected backward function to handle undefined output grads. "
                         + _NOTES) from err
        for g in results:
            if g is not None and numpy.any((g._data if isinstance(g, Tensor) else g) != 0):
                warnings.warn(_BC_WARNING, UserWarning, stacklevel=4)
                raise _error("Expected all input grads to be undefined or zero when all output "
                             "grads are undefined or zero. " + _NOTES)


# ---------------------------------------------------------------- second order
def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-06, atol=1e-05, rtol=0.001,
                  raise_exception=True, nondet_tol=0.0, check_undefined_grad=True,
                  check_fwd_over_rev=False, check_rev_over_rev=True, fast_mode=False,
                  check_batched_grad=False, **_ignored) -> bool:
    """gradcheck of `(inputs, grad_outputs) -> grad(func(inputs), inputs, grad_outputs,
    create_graph=True)`: the backward's own derivatives, by the engine's create_graph pass.
    Random grad_outputs in [-1, 1) (requiring grad, fixed seed) unless given."""
    inputs = _as_tuple(inputs)
    _prepare(inputs)
    with grad_mode.enable_grad():
        outs = [o for o in _tensor_outputs(func(*inputs)) if o.requires_grad]
    if grad_outputs is None:
        rng = numpy.random.default_rng(0)
        grad_outputs = tuple(
            Tensor._make(rng.uniform(-1, 1, o._data.shape).astype(o._data.dtype), rg=True)
            for o in outs)
    else:
        grad_outputs = tuple(g if isinstance(g, Tensor) else Tensor._make(numpy.asarray(g))
                             for g in _as_tuple(grad_outputs))
    n_inputs = len(inputs)

    def backward_of_func(*args):
        ins, gos = args[:n_inputs], args[n_inputs:]
        outputs = [o for o in _tensor_outputs(func(*ins)) if o.requires_grad]
        wrt = [a for a in ins if isinstance(a, Tensor) and a.requires_grad]
        grads = engine.grad(outputs, wrt, list(gos), create_graph=True, allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return gradcheck(backward_of_func, inputs + tuple(grad_outputs), eps=eps, atol=atol,
                     rtol=rtol, raise_exception=raise_exception, nondet_tol=nondet_tol,
                     check_undefined_grad=check_undefined_grad,
                     check_forward_ad=check_fwd_over_rev, check_backward_ad=check_rev_over_rev,
                     fast_mode=fast_mode, check_batched_grad=check_batched_grad)
