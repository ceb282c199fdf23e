"""The functional autograd API (`sg.autograd.functional`), mirroring
`torch.autograd.functional` (spec/torch_semantics.md §9): `vjp`, `jvp`, `jacobian`,
`hessian`, `vhp`, `hvp` of a function of Tensors.

Each follows torch's algorithm, so structure, `strict` and `create_graph` behave as
torch's do: `vjp` is one backward; `jvp` is the double-backward trick (the gradient of a
vjp with respect to its cotangent); `vhp` a double backward; `hvp` torch's triple
backward; `jacobian` one backward per output element, or with `vectorize=True` one
batched pass (Note [Vectorized Jacobians]); `hessian` the Jacobian of a Jacobian.

Note [Vectorized Jacobians]
~~~~~~~~~~~~~~~~~~~~~~~~~~~
torch's `vectorize=True` runs vmap over the basis seeds. Here the seeds of all rows
(reverse mode) or all columns (forward mode) are one `batching.Batched` (Note [Batched
seeds]):

* reverse mode (`strategy="reverse-mode"`): `func` runs once; one backward pass through
  the engine carries the Batched identity cotangents (shape `(sum of output numels,) +
  output shape`) through every node's generated VJP kernel at once;
* forward mode (`strategy="forward-mode"`): `func` runs once inside a dual level on duals
  whose tangents are the Batched identity seeds (shape `(sum of input numels,) + input
  shape`); every op's generated JVP kernel runs once on the whole batch.

The Jacobian is then the batch axis split per output (per input) and reshaped. With
`create_graph=True` the Jacobian must be differentiable, which a Batched (plain arrays)
is not: reverse mode then takes the per-row loop, as `vectorize=False` does.
"""

from __future__ import annotations

import numpy

from srcgrad.autograd import (
    batching_rules,  # noqa: F401  (NumPy functions on a Batched)
    engine,
    forward_ad,
    grad_mode,
)
from srcgrad.autograd.batching import Batched, BatchingError
from srcgrad.autograd.node import torch_size
from srcgrad.autograd.tensor import Tensor

__all__ = ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"]

_STRATEGY = ('Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your '
             'function has more outputs than inputs, "forward-mode" tends to be more performant. '
             'Otherwise, prefer to use "reverse-mode".')
_OUTPUTS = "outputs of the user-provided function"


# ---------------------------------------------------------------- torch's helpers
def _as_tuple(value, arg_name: str, fn_name: str) -> tuple:
    """(whether `value` was a tuple, it as a tuple of Tensors)."""
    is_tuple = isinstance(value, tuple)
    items = value if is_tuple else (value,)
    for i, el in enumerate(items):
        if not isinstance(el, Tensor):
            where = f"value at index {i}" if is_tuple else f"given {arg_name}"
            raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple "
                            f"of Tensors but the {where} has type {type(el)}.")
    return is_tuple, items


def _tuple_postprocess(res, to_unpack):
    """Undo `_as_tuple`: one flag, or (outer, inner) flags for a nested result."""
    if isinstance(to_unpack, tuple):
        if not to_unpack[1]:
            res = tuple(el[0] for el in res)
        if not to_unpack[0]:
            res = res[0]
    elif not to_unpack:
        res = res[0]
    return res


def _grad_preprocess(inputs, create_graph: bool, need_graph: bool) -> tuple:
    """New Tensor objects for the inputs: differentiable views where the caller wants a
    graph back to them, fresh leaves otherwise (so a Tensor func captures by closure is
    told apart from the one passed in)."""
    out = []
    for t in inputs:
        if create_graph and t.requires_grad:
            out.append(t.view_as(t))
        else:
            out.append(t.detach().requires_grad_(need_graph))
    return tuple(out)


def _grad_postprocess(values, create_graph: bool):
    if isinstance(values[0], Tensor) or values[0] is None:
        return values if create_graph else tuple(v if v is None else v.detach() for v in values)
    return tuple(_grad_postprocess(v, create_graph) for v in values)


def _validate_v(v, other, is_other_tuple: bool) -> None:
    if len(other) != len(v):
        if is_other_tuple:
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(other)} but got "
                               f"{len(v)}.")
        raise RuntimeError("The given v should contain a single Tensor.")
    for idx, (el_v, el_other) in enumerate(zip(v, other)):
        if tuple(el_v.shape) != tuple(el_other.shape):
            prefix = f"Entry {idx} in " if is_other_tuple else ""
            raise RuntimeError(f"{prefix}v has invalid size: should be {torch_size(el_other.shape)} "
                               f"but got {torch_size(el_v.shape)}.")


def _check_requires_grad(values, input_type: str, strict: bool) -> None:
    if not strict:
        return
    for i, t in enumerate(values):
        if t is None:
            raise RuntimeError(f"The output of the user-provided function is independent of "
                               f"input {i}. This is not allowed in strict mode.")
        if t.requires_grad:
            continue
        if input_type == "hessian":
            raise RuntimeError(f"The hessian of the user-provided function with respect to input {i} "
                               "is independent of the input. This is not allowed in strict mode. "
                               "You should ensure that your function is thrice differentiable and "
                               "that the hessian depends on the inputs.")
        if input_type == "jacobian":
            raise RuntimeError(f"While computing the hessian, found that the jacobian of the "
                               f"user-provided function with respect to input {i} is independent "
                               "of the input. This is not allowed in strict mode. You should ensure "
                               "that your function is twice differentiable and that the jacobian "
                               "depends on the inputs (this would be violated by a linear function "
                               "for example).")
        if input_type == "grad_inputs":
            raise RuntimeError(f"The gradient with respect to input {i} is independent of the "
                               "inputs of the user-provided function. This is not allowed in "
                               "strict mode.")
        raise RuntimeError(f"Output {i} of the user-provided function does not require gradients. "
                           "The outputs must be computed in a differentiable manner from the input "
                           "when running in strict mode.")


def _autograd_grad(outputs, inputs, grad_outputs=None, create_graph=False, retain_graph=None):
    """`sg.autograd.grad` over the outputs that require grad (None where none do)."""
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o is not None and o.requires_grad]
    if not pairs:
        return (None,) * len(inputs)
    return engine.grad(tuple(o for o, _ in pairs), inputs, tuple(g for _, g in pairs),
                       allow_unused=True, create_graph=create_graph, retain_graph=retain_graph)


_STAGE_NONE = {
    "back": "The output of the user-provided function is independent of input {i}. This is not "
            "allowed in strict mode.",
    "back_trick": "The gradient with respect to the input is independent of entry {i} in the "
                  "grad_outputs when using the double backward trick to compute forward mode "
                  "gradients. This is not allowed in strict mode.",
    "double_back": "The jacobian of the user-provided function is independent of input {i}. This "
                   "is not allowed in strict mode.",
    "double_back_trick": "The hessian of the user-provided function is independent of entry {i} "
                         "in the grad_jacobian. This is not allowed in strict mode as it prevents "
                         "from using the double backward trick to replace forward mode AD.",
}


def _fill_in_zeros(grads, refs, strict, create_graph, stage) -> tuple:
    """Zeros for the None gradients (or torch's strict-mode errors)."""
    res = []
    for i, g in enumerate(grads):
        if g is None:
            if strict:
                raise RuntimeError(_STAGE_NONE[stage].format(i=i))
            g = _zeros_like(refs[i])
        elif strict and create_graph and not g.requires_grad:
            what = "hessian" if "double" in stage else "jacobian"
            raise RuntimeError(f"The {what} of the user-provided function is independent of input "
                               f"{i}. This is not allowed in strict mode when create_graph=True.")
        res.append(g)
    return tuple(res)


def _zeros_like(t: Tensor, requires_grad: bool = False) -> Tensor:
    z = Tensor._make(numpy.zeros_like(t._data))
    return z.requires_grad_() if requires_grad else z


def _v_or_none(v, inputs, is_inputs_tuple, create_graph, fn_name):
    if v is not None:
        _, v = _as_tuple(v, "v", fn_name)
        v = _grad_preprocess(v, create_graph=create_graph, need_graph=False)
        _validate_v(v, inputs, is_inputs_tuple)
        return v
    if len(inputs) != 1 or inputs[0]._data.size != 1:
        raise RuntimeError("The vector v can only be None if the input to the user-provided "
                           "function is a single Tensor with a single element.")
    return None


def _scalar_output(outputs, is_outputs_tuple, fn_name):
    if is_outputs_tuple or not isinstance(outputs[0], Tensor):
        raise RuntimeError(f"The function given to {fn_name} should return a single Tensor")
    if outputs[0]._data.size != 1:
        raise RuntimeError(f"The Tensor returned by the function given to {fn_name} should "
                           "contain a single element")


# ---------------------------------------------------------------- vjp, jvp
def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """`(func(*inputs), v^T J)`: the vector-Jacobian product, shaped like the inputs."""
    with grad_mode.enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        is_outputs_tuple, outputs = _as_tuple(func(*inputs), _OUTPUTS, "vjp")
        _check_requires_grad(outputs, "outputs", strict=strict)
        if v is not None:
            _, v = _as_tuple(v, "v", "vjp")
            v = _grad_preprocess(v, create_graph=create_graph, need_graph=False)
            _validate_v(v, outputs, is_outputs_tuple)
        elif len(outputs) != 1 or outputs[0]._data.size != 1:
            raise RuntimeError("The vector v can only be None if the user-provided function "
                               "returns a single Tensor with a single element.")
        grads = _autograd_grad(outputs, inputs, v, create_graph=create_graph)
        result = _fill_in_zeros(grads, inputs, strict, create_graph, "back")
    outputs = _grad_postprocess(outputs, create_graph)
    result = _grad_postprocess(result, create_graph)
    return _tuple_postprocess(outputs, is_outputs_tuple), _tuple_postprocess(result, is_inputs_tuple)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """`(func(*inputs), J v)`: the Jacobian-vector product, shaped like the outputs
    (torch's double-backward trick: J v is the gradient of `u -> u^T J` at v)."""
    with grad_mode.enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        v = _v_or_none(v, inputs, is_inputs_tuple, create_graph, "jvp")
        is_outputs_tuple, outputs = _as_tuple(func(*inputs), _OUTPUTS, "jvp")
        _check_requires_grad(outputs, "outputs", strict=strict)
        # the backward is linear in grad_outputs: their value never shows in the result
        grad_outputs = tuple(_zeros_like(o, requires_grad=True) for o in outputs)
        grad_inputs = _autograd_grad(outputs, inputs, grad_outputs, create_graph=True)
        _check_requires_grad(grad_inputs, "grad_inputs", strict=strict)
        grads = _autograd_grad(grad_inputs, grad_outputs, v, create_graph=create_graph)
        result = _fill_in_zeros(grads, outputs, strict, create_graph, "back_trick")
    outputs = _grad_postprocess(outputs, create_graph)
    result = _grad_postprocess(result, create_graph)
    return (_tuple_postprocess(outputs, is_outputs_tuple),
            _tuple_postprocess(result, is_outputs_tuple))


# ---------------------------------------------------------------- jacobian
def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    """The Jacobian of `func` at `inputs`: `J[i][j]` of shape `out_i.shape + in_j.shape`
    (a Tensor where inputs or outputs are a single Tensor, see spec §9)."""
    assert strategy in ("forward-mode", "reverse-mode"), _STRATEGY
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError(
                "torch.autograd.functional.jacobian (srcgrad: sg.autograd.functional.jacobian): "
                "`create_graph=True` and `strategy=\"forward-"
                "mode\"` are not supported together (yet). Please either set `create_graph=False` "
                "or `strategy=\"reverse-mode\"`.")
        return _jacfwd(func, inputs, strict, vectorize)
    with grad_mode.enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        is_outputs_tuple, outputs = _as_tuple(func(*inputs), _OUTPUTS, "jacobian")
        _check_requires_grad(outputs, "outputs", strict=strict)
        if vectorize and strict:
            raise RuntimeError("torch.autograd.functional.jacobian (srcgrad: "
                               "sg.autograd.functional.jacobian): `strict=True` and "
                               "`vectorized=True` are not supported together. Please either set "
                               "`strict=False` or `vectorize=False`.")
        result = None
        if vectorize and not create_graph:
            try:
                result = _jacrev_batched(outputs, inputs)
            except BatchingError:  # an op that cannot run on a batch: row by row instead
                result = None
        if result is None:
            result = _jacrev_rows(outputs, inputs, create_graph, strict)
    result = _grad_postprocess(result, create_graph)
    return _tuple_postprocess(result, (is_outputs_tuple, is_inputs_tuple))


def _jacrev_rows(outputs, inputs, create_graph, strict) -> tuple:
    """One backward per output element (torch's vectorize=False)."""
    jac = []
    for i, out in enumerate(outputs):
        rows = [[] for _ in inputs]
        flat = out.reshape(-1)
        for k in range(out._data.size):
            grads = _autograd_grad((flat[k],), inputs, retain_graph=True, create_graph=create_graph)
            for j, (g, inp) in enumerate(zip(grads, inputs)):
                if g is None:
                    if strict:
                        raise RuntimeError(f"Output {i} of the user-provided function is "
                                           f"independent of input {j}. This is not allowed in "
                                           "strict mode.")
                    g = _zeros_like(inp)
                elif strict and create_graph and not g.requires_grad:
                    raise RuntimeError(f"The jacobian of the user-provided function is independent "
                                       f"of input {i}. This is not allowed in strict mode when "
                                       "create_graph=True.")
                rows[j].append(g)
        jac.append(tuple(_stack_rows(r, out, inp) for r, inp in zip(rows, inputs)))
    return tuple(jac)


def _stack_rows(rows, out, inp) -> Tensor:
    shape = tuple(out.shape) + tuple(inp.shape)
    if not rows:  # an empty output
        return Tensor._make(numpy.zeros(shape, inp._data.dtype))
    if not any(r.requires_grad for r in rows):
        return Tensor._make(numpy.stack([r._data for r in rows]).reshape(shape))
    # differentiable: a stack of at most _FAN_IN rows per op (one kernel per operand count)
    parts = [numpy.stack(rows[i:i + _FAN_IN]) for i in range(0, len(rows), _FAN_IN)]
    while len(parts) > 1:
        parts = [numpy.concatenate(parts[i:i + _FAN_IN]) for i in range(0, len(parts), _FAN_IN)]
    return parts[0].reshape(shape)


_FAN_IN = 32


def _basis(tensors, dtype_of) -> tuple:
    """Per tensor, a Batched whose seeds are the rows of the identity over all tensors'
    elements (tensor k's seeds are nonzero in its own block of rows only)."""
    numels = [t._data.size for t in tensors]
    total = sum(numels)
    seeds, start = [], 0
    for t, n in zip(tensors, numels):
        block = numpy.zeros((total, n), dtype=dtype_of(t))
        block[start:start + n] = numpy.eye(n, dtype=block.dtype)
        seeds.append(Batched(block.reshape((total,) + tuple(t.shape))))
        start += n
    return seeds, numels


def _jacrev_batched(outputs, inputs) -> tuple:
    """All rows of J in one backward pass (Note [Vectorized Jacobians])."""
    live = [k for k, o in enumerate(outputs) if o.requires_grad]
    seeds, numels = _basis(outputs, lambda t: t._data.dtype)
    total = sum(numels)
    grads = [None] * len(inputs)
    if live:
        edges = [(o._grad_fn, o._output_nr) if o._grad_fn is not None else (o.accumulator(), 0)
                 for o in (outputs[k] for k in live)]
        grads = engine._grad_once(edges, [seeds[k] for k in live], inputs, True, False)
    jac_in = []
    for g, inp in zip(grads, inputs):
        data = numpy.zeros((total,) + tuple(inp.shape), inp._data.dtype) if g is None else \
            numpy.broadcast_to(_data_of(g), (total,) + tuple(inp.shape))
        jac_in.append(data)
    jac, start = [], 0
    for out, n in zip(outputs, numels):
        jac.append(tuple(Tensor._make(numpy.array(d[start:start + n]).reshape(
            tuple(out.shape) + tuple(inp.shape))) for d, inp in zip(jac_in, inputs)))
        start += n
    return tuple(jac)


def _data_of(g):
    if isinstance(g, Batched):
        return g.data
    return g._data if isinstance(g, Tensor) else numpy.asarray(g)


def _jacfwd(func, inputs, strict, vectorize):
    """All columns of J in one forward-mode pass (Note [Vectorized Jacobians])."""
    if strict:
        raise RuntimeError("torch.autograd.functional.jacobian (srcgrad: sg.autograd.functional."
                           "jacobian): `strict=True` and `strategy=\""
                           "forward-mode\"` are not supported together (yet). Please either set "
                           "`strict=False` or `strategy=\"reverse-mode\"`.")
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
    if not vectorize:
        raise NotImplementedError("Computing Jacobian using forward-AD or forward-over-reverse "
                                  "Hessian isonly implemented for `vectorize=True`.")
    seeds, numels = _basis(inputs, lambda t: t._data.dtype)
    try:
        is_outputs_tuple, outputs, tangents = _forward_pass(func, inputs, seeds)
    except BatchingError:  # an op that cannot run on a batch: one pass per column instead
        is_outputs_tuple, outputs, tangents = _forward_columns(func, inputs, seeds)
    jac = []
    for out, t in zip(outputs, tangents):
        total = sum(numels)
        data = numpy.zeros((total,) + tuple(out.shape), out._data.dtype) if t is None else \
            numpy.broadcast_to(_data_of(t), (total,) + tuple(out.shape))
        row, start = [], 0
        for inp, n in zip(inputs, numels):
            block = data[start:start + n].reshape((n, -1)).T  # (out numel, in numel)
            row.append(Tensor._make(numpy.array(block).reshape(tuple(out.shape) + tuple(inp.shape))))
            start += n
        jac.append(tuple(row))
    return _tuple_postprocess(tuple(jac), (is_outputs_tuple, is_inputs_tuple))


def _forward_pass(func, inputs, seeds) -> tuple:
    """(is_outputs_tuple, outputs, their tangents) of one forward-mode pass."""
    with forward_ad.dual_level():
        duals = tuple(forward_ad.make_dual(t, s) for t, s in zip(inputs, seeds))
        is_outputs_tuple, outputs = _as_tuple(func(*duals), "outputs", "jacobian")
        return is_outputs_tuple, outputs, [forward_ad.unpack_dual(o).tangent for o in outputs]


def _forward_columns(func, inputs, seeds) -> tuple:
    """`_forward_pass` one seed at a time, the tangents stacked into batches."""
    columns = []
    for b in range(seeds[0].size):
        column = tuple(Tensor._make(numpy.array(s.data[b])) for s in seeds)
        is_outputs_tuple, outputs, tangents = _forward_pass(func, inputs, column)
        columns.append(tangents)
    stacked = [None if all(c[k] is None for c in columns) else Batched(numpy.stack(
        [numpy.zeros_like(o._data) if c[k] is None else c[k]._data for c in columns]))
        for k, o in enumerate(outputs)]
    return is_outputs_tuple, outputs, stacked


# ---------------------------------------------------------------- second order
def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    """The Hessian of scalar `func` at `inputs`: `H[i][j]` of shape `in_i.shape + in_j.shape`.
    With `outer_jacobian_strategy="forward-mode"` (and vectorize=True) it is
    forward-over-reverse: tangents flow through the create_graph backward."""
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")
    assert outer_jacobian_strategy in ("forward-mode", "reverse-mode"), (
        'Expected strategy to be either "forward-mode" or "reverse-mode".')

    def ensure_single_output_function(*inp):
        out = func(*inp)
        is_out_tuple, t_out = _as_tuple(out, _OUTPUTS, "hessian")
        _check_requires_grad(t_out, "outputs", strict=strict)
        if is_out_tuple or not isinstance(out, Tensor):
            raise RuntimeError("The function given to hessian should return a single Tensor")
        if out._data.size != 1:
            raise RuntimeError("The Tensor returned by the function given to hessian should "
                               "contain a single element")
        return out.squeeze()

    def jac_func(*inp):
        if outer_jacobian_strategy == "forward-mode":
            inp = tuple(t.requires_grad_(True) for t in inp)
        jac = jacobian(ensure_single_output_function, inp, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict=strict)
        return jac

    res = jacobian(jac_func, inputs, create_graph=create_graph, strict=strict, vectorize=vectorize,
                   strategy=outer_jacobian_strategy)
    return _tuple_postprocess(res, (is_inputs_tuple, is_inputs_tuple))


def _first_derivative(func, inputs, v, create_graph, strict, name):
    """vhp's and hvp's common start (torch's order of checks): the inputs and `v` checked,
    `func` run, its scalar output checked, and its gradient with a graph."""
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", name)
    inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
    v = _v_or_none(v, inputs, is_inputs_tuple, create_graph, name)
    is_outputs_tuple, outputs = _as_tuple(func(*inputs), _OUTPUTS, name)
    _check_requires_grad(outputs, "outputs", strict=strict)
    _scalar_output(outputs, is_outputs_tuple, name)
    jac = _autograd_grad(outputs, inputs, create_graph=True)
    _check_requires_grad(jac, "jacobian", strict=strict)
    return is_inputs_tuple, inputs, v, is_outputs_tuple, outputs, jac


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """`(func(*inputs), v^T H)` for scalar `func` (a double backward)."""
    with grad_mode.enable_grad():
        is_inputs_tuple, inputs, v, is_outputs_tuple, outputs, jac = _first_derivative(
            func, inputs, v, create_graph, strict, "vhp")
        grads = _autograd_grad(jac, inputs, v, create_graph=create_graph)
        result = _fill_in_zeros(grads, inputs, strict, create_graph, "double_back")
    outputs = _grad_postprocess(outputs, create_graph)
    result = _grad_postprocess(result, create_graph)
    return _tuple_postprocess(outputs, is_outputs_tuple), _tuple_postprocess(result, is_inputs_tuple)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """`(func(*inputs), H v)` for scalar `func` (torch's double-backward trick on the
    gradient: H v is the gradient of `u -> (u^T H)` at v)."""
    with grad_mode.enable_grad():
        is_inputs_tuple, inputs, v, is_outputs_tuple, outputs, jac = _first_derivative(
            func, inputs, v, create_graph, strict, "hvp")
        grad_jac = tuple(_zeros_like(t, requires_grad=True) for t in inputs)
        double_back = _autograd_grad(jac, inputs, grad_jac, create_graph=True)
        _check_requires_grad(jac, "hessian", strict=strict)
        with grad_mode.set_grad_enabled(True if create_graph else grad_mode.is_grad_enabled()):
            grads = _autograd_grad(double_back, grad_jac, v, create_graph=create_graph)
            result = _fill_in_zeros(grads, inputs, strict, create_graph, "double_back_trick")
    outputs = _grad_postprocess(outputs, create_graph)
    result = _grad_postprocess(result, create_graph)
    return _tuple_postprocess(outputs, is_outputs_tuple), _tuple_postprocess(result, is_inputs_tuple)
