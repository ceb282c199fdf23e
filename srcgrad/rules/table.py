"""The derivative table: one `defrule` per primitive.

Read Note [The derivative table] in srcgrad.rules.core for the formula language.
Conventions at kinks and ties are stated in each row's `doc` and collected in
docs/conventions (generated from this file by tests/rules/test_conventions.py).
"""

from srcgrad.rules.core import defrule

# ---------------------------------------------------------------- structural helpers
# `xp.shape(x)` is how formulas ask for a shape: the saved-value pass keeps the
# shape, not the array, when a formula needs nothing else of x.
defrule("shape", "x", "xp.shape(x)", targets=("numpy.shape",), attribute="shape",
        nondiff=True, static_out=True)

defrule("unbroadcast", "x, shape", "unbroadcast(x, shape)",
        targets=("srcgrad.rules.helpers.unbroadcast",),
        vjp={"x": "xp.broadcast_to(g, xp.shape(x))"},
        jvp={"x": "unbroadcast(x_t, shape)"})

defrule("broadcast_to", "x, shape", "xp.broadcast_to(x, shape)",
        targets=("numpy.broadcast_to",),
        vjp={"x": "unbroadcast(g, xp.shape(x))"},
        jvp={"x": "xp.broadcast_to(x_t, shape)"})

defrule("expand_reduced", "x, shape, axis, keepdims", "expand_reduced(x, shape, axis, keepdims)",
        targets=("srcgrad.rules.helpers.expand_reduced",),
        vjp={"x": "xp.reshape(g, xp.shape(x))"},
        jvp={"x": "expand_reduced(x_t, shape, axis, keepdims)"})

defrule("scatter_index", "x, shape, index", "scatter_index(x, shape, index)",
        targets=("srcgrad.rules.helpers.scatter_index",),
        vjp={"x": "g[index]"},
        jvp={"x": "scatter_index(x_t, shape, index)"})

# ---------------------------------------------------------------- arithmetic
defrule("add", "x, y", "x + y", targets=("numpy.add",), elementwise=True,
        vjp={"x": "unbroadcast(g, xp.shape(x))", "y": "unbroadcast(g, xp.shape(y))"},
        jvp={"x": "x_t", "y": "y_t"})

defrule("multiply", "x, y", "x * y", targets=("numpy.multiply",), elementwise=True,
        vjp={"x": "unbroadcast(g * y, xp.shape(x))", "y": "unbroadcast(g * x, xp.shape(y))"},
        jvp={"x": "x_t * y", "y": "x * y_t"})

defrule("negative", "x", "-x", targets=("numpy.negative",), elementwise=True,
        vjp={"x": "-g"}, jvp={"x": "-x_t"})

defrule("exp", "x", "xp.exp(x)", targets=("numpy.exp",), elementwise=True,
        vjp={"x": "g * ans"}, jvp={"x": "x_t * ans"})

# ---------------------------------------------------------------- reductions
defrule("sum", "x, axis=None, keepdims=False", "xp.sum(x, axis=axis, keepdims=keepdims)",
        targets=("numpy.sum",), method="sum",
        vjp={"x": "xp.broadcast_to(g if keepdims or axis is None"
                  " else expand_reduced(g, xp.shape(x), axis, keepdims), xp.shape(x))"},
        jvp={"x": "xp.sum(x_t, axis=axis, keepdims=keepdims)"})

# ---------------------------------------------------------------- linear algebra
defrule("matmul", "x, y", "x @ y", targets=("numpy.matmul",),
        vjp={"x": "g @ xp.swapaxes(y, -1, -2)", "y": "xp.swapaxes(x, -1, -2) @ g"},
        jvp={"x": "x_t @ y", "y": "x @ y_t"},
        doc="2-D only in this first row; 1-D and batched operands to follow")

# ---------------------------------------------------------------- indexing
# `index` is the subscript: a constant, or a pack of constants, vars and slices.
defrule("getitem", "x, index", "x[index]",
        vjp={"x": "scatter_index(g, xp.shape(x), index)"},
        jvp={"x": "x_t[index]"},
        doc="gathers with repeated indices accumulate (add.at)")
