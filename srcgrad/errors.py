"""Errors srcgrad raises at compile time and from generated code.

Note [How a CompileError prints]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
`CompileError` is a `SyntaxError`, so an uncaught one prints the way Python prints a
syntax error: `File "user.py", line N`, the source line with a caret, then
`CompileError: <msg>`. That display reads `msg`, never `str()`, so the suggested
rewrite is attached as an exception note (`add_note`, Python 3.11+), which Python
prints on the line after; on 3.10, which prints no notes, it is folded into `msg`.
`str(err)` (what `srcgrad emit` prints and what `pytest.raises(match=)` reads) is
`file:line:col: message`, the source line and the hint.

The frames between the user's call and the line that raised (the tracer, the
passes) say nothing to a user and push their own line off the screen: a transform
re-raises with `hide_internal_frames(err)`, which keeps only frames outside srcgrad.
An implicit context (the AttributeError that made the tracer say "`np.foo` does not
exist") is internal too and is not shown; an explicit `raise ... from err` still is.
"""

from __future__ import annotations

import os
import types

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


class CompileError(SyntaxError):
    """User code srcgrad cannot compile (or cannot compile correctly).

    Behaves like SyntaxError: `filename`, `lineno`, `offset` and `text` point at the
    construct, and `str()` reads `file:line:col: message` followed by the source
    line and, where there is one, what to write instead (Note [How a CompileError
    prints]).
    """

    def __init__(self, message: str, *, filename: str = "<unknown>", lineno: int = 0,
                 col: int = 0, text: str = "", hint: str = ""):
        shown = message
        if hint and not hasattr(BaseException, "add_note"):  # 3.10 prints no notes
            shown = f"{message}\n  hint: {hint}"
        super().__init__(shown, (filename, lineno, col + 1, text))
        self.message = message
        self.hint = hint
        if hint and hasattr(self, "add_note"):
            self.add_note(f"hint: {hint}")
        self.__suppress_context__ = True  # the tracer's own exception is not the user's

    @classmethod
    def at(cls, loc, message: str, hint: str = "") -> CompileError:
        """An error at a `srcgrad.ir.core.Loc` (or None when there is none)."""
        if loc is None:
            return cls(message, hint=hint)
        return cls(message, filename=loc.file, lineno=loc.line, col=loc.col, text=loc.text,
                   hint=hint)

    def __str__(self) -> str:
        where = f"{self.filename}:{self.lineno}:{(self.offset or 1)}"
        lines = [f"{where}: {self.message}"]
        if self.text:
            lines.append(f"    {self.text.strip()}")
        if self.hint:
            lines.append(f"  hint: {self.hint}")
        return "\n".join(lines)

    def __reduce__(self):  # keyword-only arguments: pickle (multiprocessing) needs this
        return (_rebuild, (type(self), self.message, self.filename or "<unknown>",
                           self.lineno or 0, (self.offset or 1) - 1, self.text or "", self.hint))


def _rebuild(cls, message, filename, lineno, col, text, hint):
    return cls(message, filename=filename, lineno=lineno, col=col, text=text, hint=hint)


def _internal(frame: types.FrameType) -> bool:
    """A frame of srcgrad itself, or of code it generated for dispatch."""
    filename = frame.f_code.co_filename
    return filename.startswith(_PACKAGE_DIR) or filename.startswith("<srcgrad")


def hide_internal_frames(err: BaseException) -> BaseException:
    """`err` with srcgrad's own frames dropped from its traceback (Note [How a
    CompileError prints]); use as `raise hide_internal_frames(err)` in an `except`.

    Set `SRCGRAD_TRACEBACK=full` to keep every frame (when debugging srcgrad).
    """
    if os.environ.get("SRCGRAD_TRACEBACK") == "full":
        return err
    kept = []
    tb = err.__traceback__
    while tb is not None:
        if not _internal(tb.tb_frame):
            kept.append(tb)
        tb = tb.tb_next
    new = None
    for entry in reversed(kept):
        new = types.TracebackType(new, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return err.with_traceback(new)


class CacheWarning(UserWarning):
    """The on-disk cache was not used (unsafe directory, unreadable file)."""

