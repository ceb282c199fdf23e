"""docs/numpy_coverage.md: the status of every public NumPy callable in compiled code.

The callables are those of `numpy`, `numpy.linalg`, `numpy.fft`, `numpy.lib.stride_tricks`
(every public name that is callable and not a module), the methods of `numpy.ufunc` and
the public members of `numpy.ndarray`. Each has one status:

* differentiable: a row of the derivative table with derivative formulas (gradchecked
  to second order, forward and reverse, by tests/rules/test_table.py and
  tests/rules/test_compiled_rules.py), an idiom the tracer lowers onto such rows
  (Note [Lowered idioms] in srcgrad/frontend/idioms.py), or a composition of rows whose
  source the tracer reads (Note [Compositions] in srcgrad/rules/compositions.py,
  gradchecked by tests/rules/test_compositions.py);
* non-differentiable: a row marked `nondiff`/`static_out` (integer, boolean or shape
  results; runs as NumPy on active operands; its zero derivative is the truth);
* constant-only: no row; a call whose operands are all constants runs as NumPy at
  compile time, a call with an active operand is a CompileError. Used where no
  derivative is wanted (I/O, dtype queries, index builders);
* refused: no row yet although a derivative exists (or an active operand is refused
  for the stated reason): the same CompileError with an active operand. The list of
  what srcgrad should still learn.

The first two are read from the table; the last two are written here by hand, a
one-line reason each. A name in none of them fails tests/rules/test_numpy_coverage.py,
so a NumPy upgrade that adds a function fails until the function is classified.

    python -m tests.rules.numpy_coverage            the counts
    SRCGRAD_REGEN_DOCS=1 python -m pytest tests/rules/test_numpy_coverage.py   rewrites the doc
"""

from __future__ import annotations

import types

import numpy as np

from srcgrad import rules
from srcgrad.rules import compositions

STATUSES = ("differentiable", "non-differentiable", "constant-only", "refused")
MODULES = {"numpy": np, "numpy.linalg": np.linalg, "numpy.fft": np.fft,
           "numpy.lib.stride_tricks": np.lib.stride_tricks}
UFUNC_METHODS = ("__call__", "accumulate", "at", "outer", "reduce", "reduceat", "resolve_dtypes")

# Idioms lowered onto rows by the tracer, not rows themselves (Note [Lowered idioms]).
IDIOMS = {
    "numpy.array": "a traced array: `copy`; a list of traced values: `stack` per level",
    "numpy.asarray": "a traced array: the array itself; a list of traced values: `stack`",
    "numpy.asanyarray": "as `np.asarray`",
    "ufunc.__call__": "the ufunc's own row where it has one (`np.add(x, y)` is `add`)",
    "ufunc.at": "`np.add.at` / `np.subtract.at`: a scatter (`scatter_index`); "
                "other ufuncs refused",
    "ndarray.sort": "in place: the `sort` row, functionalized (Note [Lowered idioms])",
    "ndarray.fill": "in place: a `setitem` of the whole array, functionalized",
    "numpy.average": "`sum(x * w, axis) / sum(w, axis)` (the weights broadcast along an int "
                     "axis), `mean` without weights (srcgrad/frontend/numpy_forms.py)",
    "numpy.block": "nested lists: leaves given the result's dimensions (`expand_dims`), one "
                   "`concatenate` per level (srcgrad/frontend/numpy_forms.py)",
}


def _group(status: str, reason: str, names: str) -> list:
    return [(name, (status, reason)) for name in names.split()]


def _merge(*groups) -> dict:
    """The groups as one dict; a name in two groups is an error (one status each)."""
    out: dict = {}
    for group in groups:
        for name, entry in group:
            if name in out:
                raise ValueError(f"{name} is classified twice")
            out[name] = entry
    return out


C, R = "constant-only", "refused"
NO_ROW = "no derivative row yet"
HAND = _merge(
    # ---------------------------------------------------------------- constant-only
    _group(C, "I/O, printing, configuration or interop: no numeric result to differentiate",
             "numpy.array2string numpy.array_repr numpy.array_str numpy.base_repr "
             "numpy.binary_repr numpy.format_float_positional numpy.format_float_scientific "
             "numpy.get_include numpy.get_printoptions numpy.getbufsize numpy.geterr "
             "numpy.geterrcall numpy.info numpy.load numpy.loadtxt numpy.save numpy.savetxt "
             "numpy.savez numpy.savez_compressed numpy.genfromtxt numpy.fromfile "
             "numpy.fromregex numpy.fromstring numpy.frombuffer numpy.fromiter "
             "numpy.from_dlpack numpy.set_printoptions numpy.setbufsize numpy.seterr "
             "numpy.seterrcall numpy.printoptions numpy.show_config numpy.show_runtime "
             "numpy.test numpy.typename numpy.linalg.test numpy.fft.test "
             "ndarray.dump ndarray.dumps ndarray.tobytes ndarray.tofile ndarray.to_device "
             "ndarray.device ndarray.ctypes ndarray.data ndarray.base ndarray.flags "
             "ndarray.getfield ndarray.setfield ndarray.setflags ndarray.byteswap "
             "ndarray.view ndarray.itemsize ndarray.nbytes ndarray.strides"),
    _group(C, "a type, dtype, shape or memory query: the result holds no derivative",
             "numpy.can_cast numpy.common_type numpy.isdtype numpy.issubdtype "
             "numpy.min_scalar_type numpy.mintypecode numpy.promote_types numpy.iscomplexobj "
             "numpy.isrealobj numpy.isscalar numpy.isfortran numpy.iterable "
             "numpy.may_share_memory numpy.shares_memory numpy.datetime_data "
             "numpy.broadcast_shapes numpy.einsum_path ufunc.resolve_dtypes"),
    _group(C, "index arrays or masks built from shapes and sizes",
             "numpy.diag_indices numpy.diag_indices_from numpy.indices numpy.ix_ "
             "numpy.mask_indices numpy.ravel_multi_index numpy.unravel_index "
             "numpy.tril_indices numpy.tril_indices_from numpy.triu_indices "
             "numpy.triu_indices_from numpy.tri numpy.nested_iters numpy.fft.fftfreq "
             "numpy.fft.rfftfreq"),
    _group(C, "a window of a given length (kaiser's beta: no row)",
             "numpy.bartlett numpy.blackman numpy.hamming numpy.hanning numpy.kaiser"),
    _group(C, "dates and times", "numpy.busday_count numpy.busday_offset "
             "numpy.datetime_as_string numpy.is_busday numpy.isnat"),
    _group(C, "integer and bit operations", "numpy.bitwise_count numpy.bitwise_left_shift "
             "numpy.bitwise_right_shift numpy.left_shift numpy.right_shift numpy.gcd numpy.lcm "
             "numpy.packbits numpy.unpackbits"),
    _group(C, "an integer or boolean result (not yet a `nondiff` row: an active operand "
             "is refused)",
             "numpy.argpartition numpy.argwhere "
             "numpy.flatnonzero "
             "numpy.lexsort "
             "numpy.nonzero "
             "numpy.bincount numpy.linalg.matrix_rank "
             "ndarray.argpartition ndarray.nonzero ndarray.searchsorted"),
    # ---------------------------------------------------------------- refused
    _group(C, "a type, dtype, shape or memory query: the result holds no derivative",
             "numpy.finfo numpy.iinfo numpy.dtype numpy.busdaycalendar numpy.errstate "
             "numpy.ndindex numpy.broadcast"),
    _group(R, "calls a Python function per element: its code run on whole arrays may mean "
             "something else (a reduction inside it), and sg.vmap does not run inside "
             "compiled code yet; write the function on arrays", "numpy.vectorize"),
    _group(R, "writes into its argument: not lowered onto `setitem` yet",
             "numpy.fill_diagonal "
             "numpy.put_along_axis ndarray.put ndarray.partition ndarray.resize"),
    _group(R, "complex values: srcgrad has no complex convention",
             "numpy.fft.fft numpy.fft.fft2 numpy.fft.fftn numpy.fft.hfft numpy.fft.ifft "
             "numpy.fft.ifft2 numpy.fft.ifftn numpy.fft.ihfft numpy.fft.irfft "
             "numpy.fft.irfft2 numpy.fft.irfftn numpy.fft.rfft numpy.fft.rfft2 "
             "numpy.fft.rfftn numpy.linalg.eig numpy.linalg.eigvals numpy.roots "
             "numpy.sort_complex numpy.angle numpy.real_if_close "
             "ndarray.real ndarray.imag ndarray.conjugate"),
    _group(R, "calls a Python function once per 1-D slice, as many calls as the shape has "
             "slices (unknown to shape-generic code): loop over the slices, or write the "
             "function on the whole array", "numpy.apply_along_axis numpy.apply_over_axes"),
    _group(R, "calls each function on the elements its condition selects only (a data-"
             "dependent subset): write np.where(cond, f(x), g(x)), each branch finite "
             "everywhere", "numpy.piecewise"),
    _group(R, "traces a Python function it receives: not supported yet",
             "numpy.fromfunction numpy.frompyfunc"),
    _group(R, "a data-dependent output shape",
             "numpy.compress numpy.extract numpy.trim_zeros numpy.unique numpy.unique_all "
             "numpy.unique_counts numpy.unique_inverse numpy.unique_values numpy.intersect1d "
             "numpy.setdiff1d numpy.setxor1d numpy.union1d ndarray.compress"),
    _group(R, "a view with arbitrary strides (overlapping elements)",
             "numpy.lib.stride_tricks.as_strided"),
    _group(R, "histograms: piecewise constant counts, edges from data",
             "numpy.histogram numpy.histogram2d numpy.histogramdd numpy.histogram_bin_edges"),
    _group(R, "returns a Python object: its number would lose its derivative",
             "ndarray.item ndarray.tolist ndarray.flat"),
    _group(R, "a matrix class (np.matrix)", "numpy.asmatrix numpy.bmat"),
    _group(R, "NumPy's deprecated alias of np.vstack: write np.vstack", "numpy.row_stack"),
    _group(R, NO_ROW,
             "numpy.choose "
             "numpy.delete "
             "numpy.insert "
             "numpy.nextafter numpy.partition numpy.poly numpy.polyadd "
             "numpy.polydiv numpy.polyfit numpy.polyint "
             "numpy.polysub numpy.require "
             "numpy.resize "
             "numpy.unstack numpy.unwrap "
             "numpy.linalg.multi_dot "
             "numpy.linalg.tensorinv "
             "numpy.linalg.tensorsolve "
             "ndarray.choose"),
    _group(R, "a ufunc method not lowered onto rows yet",
             "ufunc.accumulate ufunc.outer ufunc.reduce ufunc.reduceat"),
)
CLASS_REASON = ("refused", "a scalar type or array class: its constructor of an active value "
                "would drop the derivative")


def public_callables() -> list:
    """(qualified name, object, how it is looked up) for every public callable."""
    out = []
    for module_name, module in MODULES.items():
        for name in dir(module):
            if name.startswith("_"):
                continue
            obj = getattr(module, name)
            if callable(obj) and not isinstance(obj, types.ModuleType):
                out.append((f"{module_name}.{name}", obj, "callable"))
    out += [(f"ufunc.{name}", None, "ufunc") for name in UFUNC_METHODS]
    out += [(f"ndarray.{name}", getattr(np.ndarray, name), "member")
            for name in dir(np.ndarray) if not name.startswith("_")]
    return out


def classify(qualname: str, obj, how: str):
    """(status, row or idiom, reason) of one callable; status None where unclassified."""
    if qualname in IDIOMS:
        return "differentiable", "idiom", IDIOMS[qualname]
    composed = compositions.names().get(qualname)
    if composed is not None:  # Note [Compositions]
        return "differentiable", "composition", composed.__doc__.splitlines()[0]
    if how == "callable":
        rule = rules.lookup_callable(obj)
    elif how == "member":
        name = qualname.removeprefix("ndarray.")
        rule = rules.lookup_method(name) or rules.lookup_attribute(name)
    else:
        rule = None
    if rule is not None:
        if rule.nondiff or rule.static_out:
            return "non-differentiable", rule.name, rule.doc
        return "differentiable", rule.name, rule.doc
    if qualname in HAND:
        status, reason = HAND[qualname]
        return status, "", reason
    if isinstance(obj, type):
        return (*CLASS_REASON[:1], "", CLASS_REASON[1])
    return None, "", ""


def table() -> list:
    """[(qualified name, status, row, reason)], sorted by name."""
    rows = []
    for qualname, obj, how in public_callables():
        status, row, reason = classify(qualname, obj, how)
        rows.append((qualname, status, row, reason))
    return sorted(rows)


def counts(rows) -> dict:
    return {s: sum(1 for r in rows if r[1] == s) for s in STATUSES}


def generated_table(rows) -> str:
    n = counts(rows)
    lines = [f"{len(rows)} public callables: " + ", ".join(f"{n[s]} {s}" for s in STATUSES) + ".",
             "", "| callable | status | row | reason or convention |", "|---|---|---|---|"]
    for qualname, status, row, reason in rows:
        reason = reason.replace("|", "\\|")
        lines.append(f"| `{qualname}` | {status} | {f'`{row}`' if row else ''} | {reason} |")
    return "\n".join(lines)


if __name__ == "__main__":
    rows = table()
    missing = [r[0] for r in rows if r[1] is None]
    print(", ".join(f"{k}: {v}" for k, v in counts(rows).items()), f"(of {len(rows)})")
    if missing:
        print("unclassified:", " ".join(missing))
