"""Output names another local user planted, with a real attacker (uid 65534) in a sticky shared directory
like ``/tmp``: a FIFO it holds open and never reads, a symbolic link to its own file or to its terminal,
its terminal's device itself. Root's ``--csv``, ``--annotate`` and ``report -o`` refuse each in one line
(exit 2), at once, and the attacker receives nothing; this user's own FIFO, ``-`` and ``/dev/stdout`` stay
written (tests/analysis/test_hostile.py), and a reader of ours that stops reading is an error, not a hang.
"""

from __future__ import annotations

import os
import select
import stat
from pathlib import Path
from typing import Any

import pytest
from test_hostile import VLLM_CAPTURE, VLLM_REPLAY, cli, one_error

from mixins.analysis.read import safe_io
from mixins.analysis.read.reader import TraceError
from tests.second_user import Nobody, as_nobody

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to fork a child as a second uid")

REFUSED = "(refused: only this user's or root's are written)"


def _write_to(option: str, target: Path) -> Any:
    """The command writing ``target``; a hang (the bug) ends at the timeout as a failure, not forever."""
    if option == "-o":
        return cli("report", VLLM_CAPTURE, "-o", target, "-j", "1", timeout=240)
    return cli("attribute", VLLM_REPLAY, VLLM_CAPTURE, option, target, "-j", "1", timeout=120)


def _drained(fd: int) -> int:
    """Bytes waiting on ``fd`` (non-blocking), read and counted."""
    os.set_blocking(fd, False)
    total = 0
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except (BlockingIOError, OSError):
            return total
        if not chunk:
            return total
        total += len(chunk)


@pytest.mark.parametrize("option", ["--csv", "--annotate", "-o"])
def test_fifo_planted_and_held_by_another_user_is_refused_at_once(shared: Path, option: str) -> None:
    """nobody makes the FIFO at the name root is about to write, opens it for reading and never reads:
    before, root wrote all of it to nobody (or blocked in write() forever once the pipe was full)."""
    fifo = shared / "out.html"

    def trap(ready: Any, _release: int, _reply: int) -> dict[str, int]:
        os.mkfifo(fifo, 0o666)
        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        ready()  # the handshake: the FIFO has a reader from here on
        os.read(_release, 1)
        return {"bytes": _drained(fd)}

    attacker = Nobody(trap)
    try:
        proc = _write_to(option, fifo)
    finally:
        got = attacker.release()
    one_error(proc, fifo, f"cannot write: a FIFO owned by uid 65534 (nobody) {REFUSED}")
    assert got == {"bytes": 0}
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_symlink_planted_by_another_user_is_not_followed(shared: Path) -> None:
    """nobody's link at the output name, pointing at nobody's own file: refused, the file untouched,
    the link left where it was (root no longer writes through it, nor renames over it)."""
    mine = shared / "attackers-file"
    link = shared / "out.csv"

    def plant() -> None:
        mine.write_bytes(b"")
        os.symlink(mine, link)

    as_nobody(plant)
    one_error(_write_to("--csv", link), link, f"cannot write: a symbolic link owned by uid 65534 (nobody) {REFUSED}")
    assert mine.read_bytes() == b"" and os.path.islink(link)


def _attackers_terminal(link: Path | None, where: list[str]) -> Any:
    """nobody opens a pseudo-terminal (its slave device is nobody's), optionally links ``link`` to it,
    and reads whatever arrives on it until released."""

    def trap(ready: Any, release: int, _reply: int) -> dict[str, Any]:
        main, child = os.openpty()
        name = os.ttyname(child)
        if link is not None:
            os.symlink(name, link)
        os.write(where_w, name.encode())
        os.close(where_w)
        ready()
        got = 0
        while True:  # drain, so that a write before the fix never blocks on a full terminal buffer
            readable = select.select([main, release], [], [])[0]
            if release in readable:
                return {"bytes": got + _drained(main)}
            try:
                got += len(os.read(main, 1 << 16))
            except OSError:
                return {"bytes": got}

    where_r, where_w = os.pipe()
    attacker = Nobody(trap)
    os.close(where_w)
    with os.fdopen(where_r, "rb") as f:
        where.append(f.read().decode())
    return attacker


@pytest.mark.parametrize("via", ["symlink", "device"])
def test_another_users_terminal_is_refused(shared: Path, via: str) -> None:
    """The attacker's terminal, named through its link in the shared directory or as /dev/pts/N itself:
    before, root's CSV appeared on nobody's screen."""
    link = shared / "out.csv" if via == "symlink" else None
    where: list[str] = []
    attacker = _attackers_terminal(link, where)
    try:
        st = os.stat(where[0])
        if st.st_uid != 65534:
            pytest.skip(f"devpts here gives a new terminal to uid {st.st_uid}, not to the user who opened it")
        target = link if link is not None else Path(where[0])
        proc = _write_to("--csv", target)
    finally:
        got = attacker.release()
    what = "a symbolic link" if via == "symlink" else "a character device"
    one_error(proc, target, f"cannot write: {what} owned by uid 65534 (nobody) {REFUSED}")
    assert got == {"bytes": 0}


def test_own_fifo_whose_reader_stops_reading_fails_instead_of_hanging(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Our own FIFO, opened by a reader that never reads: past the pipe's buffer the write waits at most
    ``STALL_S`` for progress, then one error; nothing was created beside the FIFO."""
    monkeypatch.setattr(safe_io, "STALL_S", 0.2)
    fifo = tmp_path / "out.csv"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # opened first: the writer's open then succeeds
    try:
        with pytest.raises(TraceError, match="cannot write: its reader took nothing for 0.2 s"):
            with safe_io.output_file(str(fifo)) as f:
                f.write(b"x" * (4 << 20))
    finally:
        os.close(reader)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]
