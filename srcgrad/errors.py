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

import linecache
import os
import re
import sys
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


def at_user_call(err: CompileError, transform: str) -> CompileError:
    """`err`, or where it names no line (an error about a whole function, such as a
    transform of a Jacobian: issue 28), the same error at the user's line that called
    `sg.<transform>`: the innermost frame outside srcgrad and its generated code. Also
    where it names a line of srcgrad's generated code (sg.vmap of a sg.grad batches the
    gradient's generated source: issue 28), which the user never wrote."""
    generated = bool(err.lineno) and _generated_file(err.filename)
    if err.lineno and not generated:
        return err
    frame = _user_frame()
    if frame is None:
        return err
    code = frame.f_code
    text = linecache.getline(code.co_filename, frame.f_lineno)
    where = f" (at line {err.lineno} of the code srcgrad generated for it)" if generated else ""
    message = err.message if err.message.startswith(f"sg.{transform}") else \
        f"sg.{transform}: {err.message}"
    return CompileError(f"{message}{where}", filename=code.co_filename,
                        lineno=frame.f_lineno, text=text, hint=err.hint)


def note_user_call(err: BaseException, transform: str) -> BaseException:
    """`err` (a TypeError about a transform's function as a whole, which has no line of
    its own) with a note naming the user's line that called `sg.<transform>`."""
    frame = _user_frame()
    if frame is not None and hasattr(err, "add_note"):
        err.add_note(f"srcgrad: sg.{transform} called at {frame.f_code.co_filename}:"
                     f"{frame.f_lineno}")
    return err


def _user_frame():
    """The innermost frame outside srcgrad and the code it generated: the user's call."""
    frame = sys._getframe(2)
    while frame is not None and (_internal(frame) or _generated(frame)):
        frame = frame.f_back
    return frame


def _generated(frame: types.FrameType) -> bool:
    return _generated_file(frame.f_code.co_filename)


def _generated_file(filename) -> bool:
    lines = linecache.getlines(filename) if isinstance(filename, str) else []
    return bool(lines) and "@generated by srcgrad" in lines[0]


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


_SOURCE_COMMENT = r"^\s*# (?:grad of: )?(.*)  \((\S+):(\d+)\)$"  # compiled on first use (an error)


def note_user_line(err: BaseException) -> BaseException:
    """Add to an error raised inside generated code the user's line it was generated
    from (the `# <source line>  (file:line)` comment above the failing generated line):
    a shape mismatch names `loss.py:3 (h = x @ W)`, not only a line of a cache file."""
    tb, generated = err.__traceback__, None
    while tb is not None:
        lines = linecache.getlines(tb.tb_frame.f_code.co_filename)
        if lines and "@generated by srcgrad" in lines[0]:
            generated = (lines, tb.tb_lineno)
        tb = tb.tb_next
    if generated is None or not hasattr(err, "add_note"):
        return err
    lines, lineno = generated
    for line in reversed(lines[:lineno]):
        match = re.match(_SOURCE_COMMENT, line.rstrip("\n"))
        if match:
            text, file, line_no = match.groups()
            err.add_note(f"srcgrad: raised by the code generated for {file}:{line_no}: {text}")
            break
    return err


# Note [Warnings from generated code]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# NumPy warns from C (`RuntimeWarning: invalid value encountered in multiply`), and
# Python's warnings machinery places the warning at the executing frame: a line of a
# generated module in the cache. `warn_at_user_lines` wraps `warnings._showwarnmsg`
# (what the C warning code calls, looked up on the module at each warning; catch_warnings
# and pytest's recorder replace `_showwarnmsg_impl` and `showwarning` below it, so a
# recorded warning is rewritten too) to move such a warning to the user's file and line:
# the `# <source line>  (file:line)` comment above the generated line, as note_user_line
# does for errors. The comment names the file relative to the directory of the process
# that generated it, so `ORIGINS` (generated file -> the user function's file, filled as
# modules load) gives the full path. A warning the filters turn into an error is raised
# in generated code and noted by note_user_line like any error.
ORIGINS: dict = {}  # generated module filename -> the compiled function's file


def user_origin(filename: str, lineno: int):
    """(file, line, source text) of the user's line a generated `filename:lineno` was
    generated from, or None (not generated code, or no comment above it)."""
    lines = linecache.getlines(filename)
    if not lines or "@generated by srcgrad" not in lines[0]:
        return None
    for line in reversed(lines[:lineno]):
        match = re.match(_SOURCE_COMMENT, line.rstrip("\n"))
        if match:
            text, file, line_no = match.groups()
            origin = ORIGINS.get(filename)
            if origin and os.path.basename(origin) == os.path.basename(file):
                file = origin
            elif os.path.isfile(file):
                file = os.path.abspath(file)
            return file, int(line_no), text
    return None


def warn_at_user_lines() -> None:
    """Install the hook of Note [Warnings from generated code] (once)."""
    import warnings

    original = getattr(warnings, "_showwarnmsg", None)
    if original is None or getattr(original, "_srcgrad", False):
        return  # (a Python without the hook: warnings keep the generated line)

    def _showwarnmsg(msg):
        where = user_origin(msg.filename, msg.lineno)
        if where is not None:
            msg.filename, msg.lineno, msg.line = where
            if isinstance(msg.message, Warning) and len(msg.message.args) == 1:
                msg.message = type(msg.message)(
                    f"{msg.message.args[0]} (in the code srcgrad generated for this line)")
        original(msg)

    _showwarnmsg._srcgrad = True
    warnings._showwarnmsg = _showwarnmsg


class CacheWarning(UserWarning):
    """The on-disk cache was not used (unsafe directory, unreadable file)."""


class ProbeFailed(Exception):
    """Running the ops on the example arguments raised (a singular matrix, a
    non-scalar loss): the caller runs the generic code instead, which raises the
    same error from a generated line the user can read.

    Defined here, not in srcgrad.passes.shapes (which raises it and re-exports it),
    so that the transforms can catch it without importing the passes: a disk-cache
    hit imports no pass and no IR (issue 15). `error`: the error the generic code would
    raise, where the variant knows it (a non-scalar loss), for where the generic code
    cannot be compiled (a form that needs shapes: srcgrad.api raises it then)."""

    def __init__(self, reason: str = "", error: BaseException | None = None):
        super().__init__(reason)
        self.error = error


def last_line(code) -> int:
    """The last source line a function's code object (its nested code included) spans:
    where its source ends in the file (srcgrad.frontend.parse reads it, and
    srcgrad.pipeline.keys hashes it for a cache key without parsing)."""
    end = code.co_firstlineno
    for _, line_end, _, _ in code.co_positions():
        if line_end is not None and line_end > end:
            end = line_end
    for const in code.co_consts:
        if hasattr(const, "co_positions"):
            end = max(end, last_line(const))
    return end
