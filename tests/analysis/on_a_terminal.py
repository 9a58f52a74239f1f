"""A command run with a real pseudo-terminal as its stdout and/or stderr, for the tests of what the CLI
does on a terminal (widths, colours, progress): written once, so every such test reads the terminal the
same way (drained while the child runs, to its EIO) and none can hang on a full pty buffer."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import termios
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TerminalRun:
    returncode: int
    terminal: bytes  # all the pseudo-terminal received
    stdout: bytes  # b"" where stdout was the terminal
    stderr: bytes  # b"" where stderr was the terminal


def run_on_a_terminal(
    command: Sequence[object], env: Mapping[str, str], *, on_terminal: tuple[str, ...] = ("stdout", "stderr"),
    columns: int | None = None, cwd: Path | None = None, timeout: float = 300,
) -> TerminalRun:
    """Runs ``command`` with the streams named in ``on_terminal`` on one pseudo-terminal, the others piped.
    ``columns``: the terminal's size set to 50 x ``columns`` (``TIOCSWINSZ``); None leaves it unset (0 x 0),
    so only ``COLUMNS`` in ``env`` can tell the child a width."""
    assert set(on_terminal) <= {"stdout", "stderr"}, on_terminal
    main, child = pty.openpty()
    if columns is not None:
        fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                data = os.read(main, 1 << 16)
            except OSError:  # EIO: every writer of the terminal's other side closed it
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain)
    reader.start()
    try:
        done = subprocess.run(
            [str(arg) for arg in command], stdin=subprocess.DEVNULL, env=dict(env), cwd=cwd, timeout=timeout,
            stdout=child if "stdout" in on_terminal else subprocess.PIPE,
            stderr=child if "stderr" in on_terminal else subprocess.PIPE,
        )
    finally:
        os.close(child)
        reader.join()
        os.close(main)
    return TerminalRun(done.returncode, b"".join(chunks), done.stdout or b"", done.stderr or b"")
