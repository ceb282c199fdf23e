"""Array namespaces: the one place that picks and binds `xp` for generated code.

Note [Array namespaces]
~~~~~~~~~~~~~~~~~~~~~~~
Generated modules call one array namespace, `xp` (DESIGN decision 10), and the rule
helpers (srcgrad.rules.helpers) by their bare names. A call's arguments choose the
namespace (`target_of`), through `array_api_compat.array_namespace`, the maintained
library that knows every array type's namespace (NumPy, CuPy, dask, and anything with
`__array_namespace__`, such as `array_api_strict`); arguments of two namespaces are
an error, except NumPy arrays beside dask ones, which dask takes as they are (the
weights of a model beside its chunked data). The namespace decides two things about
the generated code, so it is part of every variant's cache key (`Target.key`):

* its *spelling* (`Target.spelling`): NumPy and CuPy are called with NumPy's names
  (`xp.transpose`, `xp.concatenate`); every other namespace with the Array API's
  (`xp.permute_dims`, `xp.concat`, `xp.linalg.vector_norm`), rewritten by one table
  (srcgrad.codegen.spellings); a row the Array API cannot express is a CompileError
  naming the op and the namespace;
* whether buffers may be reused (`Target.mutable`): dask and Array-API arrays are
  never written with `out=` (srcgrad.passes.inplace), and non-NumPy namespaces run
  the shape-generic variant, which has no specialised in-place code at all.

`module_globals(target)` is what a loaded module is bound to. The dispatch guard of
a transform tests each argument's class (O(1)), which tells NumPy's ndarray from a
CuPy, dask or array_api_strict array, so the namespace is found once per variant.
"""

from __future__ import annotations

import math

import numpy


class Target:
    """The namespace a module is generated for and bound to (immutable, compared by value).

    A plain class, not a frozen dataclass, and array_api_compat is imported only for an
    argument that is not a NumPy array: this module is imported by every process that
    runs a transform, a disk-cache hit included (issue 15)."""

    __slots__ = ("name", "spelling", "mutable", "xp", "label")

    def __init__(self, name: str, spelling: str, mutable: bool, xp: object = None, label: str = ""):
        set_ = object.__setattr__
        set_(self, "name", name)  # "numpy", "cupy", "dask", "array-api": messages, `emit --backend`
        set_(self, "spelling", spelling)  # "numpy" or "array-api" (srcgrad.codegen.spellings)
        set_(self, "mutable", mutable)  # arrays may be written in place (`out=` buffer reuse)
        set_(self, "xp", xp)  # the namespace module bound as `xp` (None: decided when loading)
        set_(self, "label", label)  # the namespace's module name, for messages

    def __setattr__(self, name, value):
        raise AttributeError(f"Target is immutable: cannot set {name!r}")

    def _fields(self) -> tuple:
        return (self.name, self.spelling, self.mutable, self.xp, self.label)

    def __eq__(self, other):
        return self._fields() == other._fields() if other.__class__ is Target else NotImplemented

    def __hash__(self):
        return hash(self._fields())

    def __reduce__(self):
        return Target, self._fields()

    def __repr__(self):
        return ("Target(name={!r}, spelling={!r}, mutable={!r}, xp={!r}, label={!r})"
                .format(*self._fields()))

    @property
    def key(self) -> tuple:
        """What a variant's cache key says about the namespace (empty for NumPy, so the
        keys of NumPy modules are those of before namespaces existed)."""
        return () if self.name == "numpy" else (("backend", self.name, self.label),)

    def describe(self) -> str:
        return self.label or self.name


NUMPY = Target("numpy", "numpy", True, numpy, "numpy")
# `srcgrad emit --backend ...`: the target of a standalone module, before any array exists.
STANDALONE = {
    "numpy": NUMPY,
    "cupy": Target("cupy", "numpy", True, None, "cupy"),
    "array-api": Target("array-api", "array-api", False, None, "array-api"),
}


def reference(target: Target):
    """The namespace a standalone module for `target` is checked against: its own, or
    array_api_strict (the Array API's reference) for "array-api" where installed."""
    if target.xp is not None or target.name != "array-api":
        return target.xp
    try:
        import array_api_strict
    except ImportError:
        return None
    return array_api_strict


class MixedNamespaces(TypeError):
    """Arguments of one call belong to two array libraries."""


def namespace_of(*values):
    """The array namespace of these arguments (NumPy for NumPy arrays, Python numbers
    and lists); a TypeError when they mix array libraries."""
    return target_of(*values).xp


def target_of(*values) -> Target:
    """The Target for a call's arguments (containers are looked into)."""
    seen: dict = {}
    for v in _leaves(values):
        if v.__class__ not in _SCALARS:
            t = target_for(v)
            if t is not NUMPY or not isinstance(v, numpy.generic):  # a NumPy scalar mixes with any
                seen.setdefault(t.key, t)
    if len(seen) > 1 and any(t.name == "dask" for t in seen.values()):
        seen.pop((), None)  # dask takes NumPy arrays as they are (weights beside chunked data)
    if len(seen) > 1:
        names = ", ".join(t.describe() for t in seen.values())
        raise MixedNamespaces(f"srcgrad: the arguments mix array libraries ({names}); pass arrays "
                              "of one library (convert with that library's asarray)")
    return next(iter(seen.values()), NUMPY)


_SCALARS = frozenset({int, float, complex, bool, type(None), str})


def _leaves(values):
    for v in values:
        if isinstance(v, (tuple, list)):
            yield from _leaves(v)
        elif isinstance(v, dict):
            yield from _leaves(v.values())
        else:
            yield v


_BY_CLASS: dict = {}  # array class -> Target (a class's namespace never changes)


def target_for(value) -> Target:
    """The Target of one argument (NUMPY for anything that is not an array)."""
    cls = value.__class__
    t = _BY_CLASS.get(cls)
    if t is None:
        t = _BY_CLASS[cls] = _target_of_array(value)
    return t


def _target_of_array(value) -> Target:
    if isinstance(value, (numpy.ndarray, numpy.generic)):
        return NUMPY
    import array_api_compat as compat  # another library's array: never on a NumPy-only path

    if not compat.is_array_api_obj(value):
        return NUMPY
    xp = compat.array_namespace(value)
    if compat.is_numpy_namespace(xp):
        return NUMPY
    if compat.is_cupy_namespace(xp):  # CuPy mirrors NumPy's names: bind the module itself
        import cupy

        return Target("cupy", "numpy", True, cupy, "cupy")
    if compat.is_dask_namespace(xp):  # array_api_compat's dask.array: Array-API names
        return Target("dask", "array-api", False, xp, "dask.array")
    return Target("array-api", "array-api", False, xp, getattr(xp, "__name__", "array-api"))


def module_globals(target: Target = NUMPY, reads=None) -> dict:
    """The globals a generated module is loaded with, for `target` (or a namespace module).

    `reads`: the names its code reads as globals and does not define (srcgrad.codegen.loader
    .free_globals), where known. A module reading none but `xp` and `math` is bound without
    the rule helpers, whose import (srcgrad.rules.helpers) is half a millisecond of a
    disk-cache hit (issue 15); any other name binds them all, as without `reads`."""
    xp = target.xp if isinstance(target, Target) else target
    if reads is not None and reads <= _PLAIN_GLOBALS:
        return {"xp": xp, "math": math}
    from srcgrad import rules

    return {**rules.FORMULA_GLOBALS, "xp": xp, "math": math}


_PLAIN_GLOBALS = frozenset({"xp", "math"})
