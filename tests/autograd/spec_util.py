"""Helpers for the spec case tests (tests/autograd/test_spec_*.py).

The case tests turn spec/torch_semantics.md's "(b) Errors" rows and "(c) Test cases"
into tests against the public API. Values are torch's (the spec's probes), written out
as NumPy arrays; error texts are torch's exact texts, except where a text spells a
torch type (`torch.Size([2])`, `torch.complex64`, `torch.FloatTensor`): there srcgrad
may spell the same thing its own way (`(2,)`, `complex64`), and `shape_re`/`dtype_re`
accept either spelling and nothing else. Where torch's text names a torch type or API
(`torch.FloatTensor`, `torch.autograd.set_detect_anomaly`), srcgrad's text is torch's with
" (srcgrad: <srcgrad's name>)" after that name (Note [torch's words, srcgrad's names]).
"""

from __future__ import annotations

import contextlib
import re
import warnings

import numpy as np

import srcgrad as sg


def leaf(values, dtype=np.float64):
    """A leaf that requires grad (`torch.tensor(values, requires_grad=True)`)."""
    return sg.tensor(np.asarray(values, dtype=dtype), requires_grad=True)


def const(values, dtype=np.float64):
    return sg.tensor(np.asarray(values, dtype=dtype))


def val(t):
    """A Tensor's values as a NumPy array (whatever it requires)."""
    assert isinstance(t, sg.Tensor), f"expected a Tensor, got {type(t).__name__}"
    return np.asarray(t.detach().numpy())


def check(t, expected, rtol=1e-6, atol=1e-12):
    """`t` is a Tensor with these values (and this shape)."""
    actual = val(t)
    expected = np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape, f"shape {actual.shape}, expected {expected.shape}"
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)


def exact(text: str) -> str:
    """A `match=` pattern for exactly this message."""
    return "^" + re.escape(text) + "$"


def shape_re(*dims) -> str:
    """torch's `torch.Size([2, 3])`, or srcgrad's `(2, 3)` / `[2, 3]`, as a pattern."""
    inner = ", ".join(str(d) for d in dims)
    tup = f"({inner},)" if len(dims) == 1 else f"({inner})"
    return "(?:" + "|".join(re.escape(s) for s in (f"torch.Size([{inner}])", tup, f"[{inner}]")) + ")"


def dtype_re(name: str) -> str:
    """`torch.complex64` or `complex64`."""
    return "(?:torch\\.)?" + re.escape(name)


SECOND_TIME = ("Trying to backward through the graph a second time (or directly access saved "
               "tensors after they have already been freed). Saved intermediate values of the "
               "graph are freed when you call .backward() or autograd.grad(). Specify "
               "retain_graph=True if you need to backward through the graph a second time or if "
               "you need to access saved tensors after calling backward.")

NONLEAF_GRAD_WARNING = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
    "attribute won't be populated during autograd.backward(). If you indeed want the .grad "
    "field to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. If "
    "you access the non-leaf Tensor by mistake, make sure you access the leaf Tensor instead. "
    "See github.com/pytorch/pytorch/pull/30531 for more information.")


@contextlib.contextmanager
def no_warnings():
    """A block in which any warning is an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


def node_names(fn):
    """The names of a node's next functions (None for a missing edge)."""
    return [None if f is None else f.name() for f, _ in fn.next_functions]
