"""`sg.func`: torch.func's names over functions of `sg.Tensor`s, built on the compiled
transforms (API.md §3; DESIGN decision 14).

Note [sg.func on the compiled transforms]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
torch.func's transforms take a function of tensors. Here the function is compiled as
srcgrad compiles any function (its NumPy calls, operators and ndarray methods: `np.tanh(t)`
and `t @ W` are the same source whether `t` is a Tensor or an array), and the transform
is srcgrad's own (`sg.grad`, `sg.vmap`, `sg.jacobian`, `sg.hessian`, `sg.vjp`, `sg.jvp`):
tensors in are read as their arrays, arrays out come back as new tensors. A function the
compiler cannot take (a Tensor-only method, say) is its CompileError at the user's line.

The results are not connected to the autograd graph (they are new leaves, as arrays
are): a transform applied to tensors that require grad while grad mode is on would give
results whose backward silently stops, so it raises instead. Transforms compose
(`sg.func.vmap(sg.func.grad(f), in_dims=(None, 0, 0))`): each result keeps the array
transform it wraps, and the next transform is applied to that.
"""

from __future__ import annotations

import functools

__all__ = ["vmap", "grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian"]


def _arrays(args, name: str):
    from srcgrad.autograd import grad_mode
    from srcgrad.autograd.tensor import Tensor

    out = []
    for a in args:
        if isinstance(a, Tensor):
            if a.requires_grad and grad_mode.is_grad_enabled():
                raise RuntimeError(
                    f"sg.func.{name}: an input requires grad; the transform's results would not "
                    "be connected to the autograd graph (its backward would stop there). "
                    "Call it on t.detach(), or under sg.no_grad()")
            out.append(a.data)
        elif isinstance(a, (tuple, list)):
            out.append(type(a)(_arrays(a, name)))
        elif isinstance(a, dict):
            out.append(dict(zip(a, _arrays(list(a.values()), name))))
        else:
            out.append(a)
    return out


def _tensors(value):
    import numpy

    from srcgrad.autograd.tensor import Tensor, from_numpy

    if isinstance(value, tuple):
        return tuple(_tensors(v) for v in value)
    if isinstance(value, list):
        return [_tensors(v) for v in value]
    if isinstance(value, dict):
        return {k: _tensors(v) for k, v in value.items()}
    if isinstance(value, Tensor) or value is None:
        return value
    if isinstance(value, (numpy.ndarray, numpy.generic, float, int)):
        return from_numpy(numpy.array(value))
    return value


class _TensorFunction:
    """A transform's result over tensors: `array_fn` is the compiled transform it calls."""

    def __init__(self, array_fn, name: str, of, post=None):
        self.array_fn, self.name = array_fn, name
        self.post = post  # grad_and_value: (value, grads) -> (grads, value), after the call
        functools.update_wrapper(self, of, updated=())

    def __call__(self, *args):
        out = self.array_fn(*_arrays(args, self.name))
        return _tensors(out if self.post is None else self.post(out))


def _plain(func, name: str):
    """The array function behind `func` (the compiled transform of another sg.func result)."""
    if not isinstance(func, _TensorFunction):
        return func
    if func.post is not None and name != "vmap":
        raise NotImplementedError(f"sg.func.{name} of sg.func.{func.name}: not yet; "
                                  f"apply it to sg.func.grad instead")
    return func.array_fn


def _api():
    from srcgrad import api

    return api


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """torch.func.vmap: `sg.vmap(func, in_axes=in_dims, out_axes=out_dims)` (one generated
    function over the batch; `chunk_size` changes nothing there, `randomness` is unused:
    compiled code draws no random numbers)."""
    return _TensorFunction(_api().vmap(_plain(func, "vmap"), in_dims, out_dims), "vmap", func,
                           getattr(func, "post", None))  # (a batched result swaps the same way)


def grad(func, argnums=0, has_aux=False):
    """torch.func.grad: the gradient of scalar `func` w.r.t. `argnums` (`(grads, aux)` with has_aux)."""
    return _TensorFunction(_api().grad(_plain(func, "grad"), argnums, has_aux=has_aux), "grad", func)


def grad_and_value(func, argnums=0, has_aux=False):
    """torch.func.grad_and_value: `(grads, value)` (`(grads, (value, aux))` with has_aux)."""
    inner = _api().value_and_grad(_plain(func, "grad_and_value"), argnums, has_aux=has_aux)
    return _TensorFunction(inner, "grad_and_value", func, _swap)


def _swap(pair):
    value, grads = pair
    return grads, value


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None):
    """torch.func.jacrev: the Jacobian by reverse mode, shape `out.shape + arg.shape`."""
    if has_aux:
        raise NotImplementedError("sg.func.jacrev(has_aux=True): not yet; return the aux "
                                  "from another function")
    return _TensorFunction(_api().jacobian(_plain(func, "jacrev"), argnums, mode="reverse",
                                           chunk_size=chunk_size), "jacrev", func)


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """torch.func.jacfwd: the Jacobian by forward mode."""
    if has_aux:
        raise NotImplementedError("sg.func.jacfwd(has_aux=True): not yet; return the aux "
                                  "from another function")
    return _TensorFunction(_api().jacobian(_plain(func, "jacfwd"), argnums, mode="forward"), "jacfwd", func)


def hessian(func, argnums=0):
    """torch.func.hessian: the Hessian of scalar `func` (forward over reverse, as torch's)."""
    return _TensorFunction(_api().hessian(_plain(func, "hessian"), argnums), "hessian", func)


def vjp(func, *primals, has_aux=False):
    """torch.func.vjp: `(output, vjp_fn)` (`(output, vjp_fn, aux)` with has_aux)."""
    result = _api().vjp(_plain(func, "vjp"), *_arrays(primals, "vjp"), has_aux=has_aux)
    out, fn = result[0], result[1]

    def vjp_fn(cotangents):
        return _tensors(tuple(fn(*_arrays([cotangents], "vjp"))))
    return (_tensors(out), vjp_fn) + tuple(_tensors(r) for r in result[2:])


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """torch.func.jvp: `(output, jvp_out)` (`(output, jvp_out, aux)` with has_aux)."""
    result = _api().jvp(_plain(func, "jvp"), tuple(_arrays(primals, "jvp")), tuple(_arrays(tangents, "jvp")),
                        has_aux=has_aux)
    return tuple(_tensors(r) for r in result)
