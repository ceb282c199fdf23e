"""Errors srcgrad raises at compile time and from generated code."""

from __future__ import annotations


class CompileError(SyntaxError):
    """User code srcgrad cannot compile (or cannot compile correctly).

    Behaves like SyntaxError: `filename`, `lineno`, `offset` and `text` point at the
    construct, and `str()` reads `file:line:col: message` followed by the source
    line and, where there is one, what to write instead.
    """

    def __init__(self, message: str, *, filename: str = "<unknown>", lineno: int = 0,
                 col: int = 0, text: str = "", hint: str = ""):
        super().__init__(message, (filename, lineno, col + 1, text))
        self.message = message
        self.hint = hint

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


class CacheWarning(UserWarning):
    """The on-disk cache was not used (unsafe directory, unreadable file)."""
