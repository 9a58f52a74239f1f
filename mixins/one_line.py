"""One line, whatever the input: a runner name or path with a newline or NUL must not split a log line or
the CLI's ``capture-trace: error: <path>: <what>`` line (a reader of logs would see a forged record)."""

from __future__ import annotations

__all__ = ["one_line"]


def one_line(value: object) -> str:
    """``str(value)`` with every non-printable character escaped as Python writes it (``\\n``, ``\\x00``,
    ``\\u2028``, an undecodable file-name byte as ``\\udcff``)."""
    text = str(value)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)
