"""Anomaly detection: `sg.autograd.detect_anomaly`, `set_detect_anomaly`
(torch_semantics.md §12; torch.autograd.anomaly_mode).

While anomaly mode is on, every node records the Python stack of the forward call
that created it (`grad_fn.metadata["traceback_"]`); in backward, an error in a node
is preceded by a UserWarning showing that stack ("Traceback of forward call that
caused the error"), and with `check_nan` a NaN in what a node returns raises
"Function 'XBackward0' returned nan values in its 0th output.". The version-counter
error's hint changes too (srcgrad.autograd.node.anomaly_hint reads
`is_anomaly_enabled`). How the runtime does this at no cost while the mode is off:
Note [Instrumentation] in srcgrad.autograd.instrument.

The mode is process-wide, as torch's is.
"""

from __future__ import annotations

import warnings

from srcgrad.autograd import instrument

__all__ = ["detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled",
           "is_anomaly_check_nan_enabled", "set_anomaly_enabled"]

_STATE = instrument.STATE


def is_anomaly_enabled() -> bool:
    """Whether anomaly detection is on (torch.is_anomaly_enabled)."""
    return _STATE.anomaly


def is_anomaly_check_nan_enabled() -> bool:
    """Whether anomaly detection checks backward results for NaN
    (torch.is_anomaly_check_nan_enabled)."""
    return _STATE.check_nan


def set_anomaly_enabled(enabled: bool, check_nan: bool = True) -> None:
    """Set the mode (torch._C._set_anomaly_enabled): no context, no warning."""
    _STATE.anomaly = bool(enabled)
    _STATE.check_nan = bool(check_nan)
    instrument.refresh()


class detect_anomaly:  # noqa: N801 (torch's name)
    """Context manager that turns anomaly detection on for its block (not a decorator,
    as in torch: calling an instance is a TypeError)."""

    def __init__(self, check_nan: bool = True) -> None:
        self.prev = is_anomaly_enabled()
        self.check_nan = check_nan
        self.prev_check_nan = is_anomaly_check_nan_enabled()
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime "
                      "and should only be enabled for debugging.", UserWarning, stacklevel=2)

    def __enter__(self) -> None:
        set_anomaly_enabled(True, self.check_nan)

    def __exit__(self, *args) -> bool:
        set_anomaly_enabled(self.prev, self.prev_check_nan)
        return False


class set_detect_anomaly:  # noqa: N801 (torch's name)
    """Set anomaly detection on or off: at once when called, and back to what it was at
    the end of a `with` block."""

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        self.prev = is_anomaly_enabled()
        self.prev_check_nan = is_anomaly_check_nan_enabled()
        set_anomaly_enabled(mode, check_nan)

    def __enter__(self) -> None:
        pass

    def __exit__(self, *args) -> bool:
        set_anomaly_enabled(self.prev, self.prev_check_nan)
        return False
