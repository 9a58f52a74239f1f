"""Files the analyzer opens or writes because a user (or a directory listing) named them: traces sit in
shared directories and the analyzer often runs as root (docs/DESIGN.md §7.2); memory snapshots are read
without unpickling an object (§7.5). ``TraceError``, the analyzer's one error for bad input, lives here:
the reader opens files through this module."""

from __future__ import annotations

import errno
import io
import os
import select
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import IO, Any

import msgspec

__all__ = ["TraceError", "open_input", "read_small_json", "load_snapshot", "output_file", "STDOUT_NAMES", "file_kind",
           "SMALL_JSON_BYTES", "MAX_SNAPSHOT_BYTES"]

# Written to this process's own descriptor, whatever it is (a pipe, a terminal, a file): never opened by name.
STDOUT_NAMES = {"-": 1, "/dev/stdout": 1, "/dev/stderr": 2}
SMALL_JSON_BYTES = 16 << 20  # a side file such as TraceLens's execution_details.json (real ones: a few KB)
MAX_SNAPSHOT_BYTES = 2 << 30  # a real snapshot of a whole capture is tens of MiB; past this refused before reading

_IN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class TraceError(Exception):
    """Bad input, already phrased for ``capture-trace: error: <path>: <what>``."""

    def __init__(self, path: str, message: str, not_a_trace: bool = False, wrong_role: str | None = None) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message
        # valid JSON that is not a trace (execution_details.json, a config): a directory listing skips
        # such a file unless its name says it is a trace (``jobs.collect_results``)
        self.not_a_trace = not_a_trace
        # a trace of a role the command does not read (``model.roles``): skipped too, when listed
        self.wrong_role = wrong_role

    def __reduce__(self) -> tuple[type[TraceError], tuple[str, str, bool, str | None]]:  # survive process pools
        return (TraceError, (self.path, self.message, self.not_a_trace, self.wrong_role))


# ``ls -l``'s type letter (``stat.filemode``) -> what a non-regular file is, for an error line
_KINDS = {"d": "a directory", "p": "a FIFO", "c": "a character device", "b": "a block device", "s": "a socket",
          "l": "a symbolic link"}


def file_kind(mode: int) -> str:
    return _KINDS.get(stat.filemode(mode)[0], "not a regular file")


def _os_error(path: str, exc: OSError, verb: str = "") -> TraceError:
    if exc.errno == errno.ENOENT:
        return TraceError(path, "no such file")
    if exc.errno == errno.ELOOP:
        return TraceError(path, "a symbolic link (not followed: name the file it points to)")
    if exc.errno == errno.ENXIO:
        return TraceError(path, "not a regular file (a socket or a device without a driver)")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return TraceError(path, f"{verb}permission denied")
    return TraceError(path, f"{verb}{exc.strerror or exc}")


def open_input(path: str) -> tuple[int, os.stat_result]:
    """A read-only descriptor of the regular file ``path`` and its ``fstat`` (a link or FIFO at the name
    is refused, never followed or waited on); TraceError otherwise."""
    try:
        fd = os.open(path, _IN_FLAGS)
    except OSError as exc:
        raise _os_error(path, exc) from None
    except ValueError:  # possible only in-process: a command line cannot carry a NUL
        raise TraceError(path, "invalid path (contains a NUL byte)") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise TraceError(path, f"not a regular file ({file_kind(st.st_mode)})")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_small_json(path: str, what: str, limit: int = SMALL_JSON_BYTES) -> Any:
    """A small JSON side file, read through :func:`open_input` with a size cap; any nesting depth is
    one error line, never a traceback."""
    fd, _ = open_input(path)
    try:
        with os.fdopen(fd, "rb") as f:
            data = f.read(limit + 1)
    except OSError as exc:
        raise _os_error(path, exc, f"cannot read {what}: ") from None
    if len(data) > limit:
        raise TraceError(path, f"cannot read {what}: larger than {limit >> 20} MiB (the limit)")
    try:
        return msgspec.json.decode(data)
    except RecursionError:
        raise TraceError(path, f"cannot read {what}: invalid JSON: nested too deeply") from None
    except msgspec.ValidationError:  # the untyped decoder refuses only numbers out of range
        raise TraceError(path, f"cannot read {what}: invalid JSON: number out of range") from None
    except msgspec.DecodeError as exc:
        raise TraceError(path, f"cannot read {what}: invalid JSON: {exc}") from None


def load_snapshot(path: str) -> dict[str, Any]:
    """The memory snapshot (torch's ``_snapshot()`` pickled) at ``path``: a dict with a ``segments`` list and
    a ``device_traces`` list of lists, built from pickle opcodes alone (every global and persistent id is
    refused: torch's layout needs none). Anything else is a TraceError naming the file."""
    import pickle  # here, not at the top: only ``memory`` reads a pickle

    class BuiltinsOnly(pickle.Unpickler):
        def find_class(self, module: str, name: str) -> Any:  # every opcode naming a global comes here
            raise TraceError(path, f"not a memory snapshot: refused to load {module}.{name}: a memory snapshot "
                                   "holds only dicts, lists, strings and numbers")

        def persistent_load(self, pid: Any) -> Any:
            raise TraceError(path, "not a memory snapshot: refused a persistent id: a memory snapshot has none")

    fd, st = open_input(path)
    with os.fdopen(fd, "rb") as handle:
        if st.st_size > MAX_SNAPSHOT_BYTES:
            limit = f"{MAX_SNAPSHOT_BYTES:,}-byte limit for a memory snapshot"
            raise TraceError(path, f"{st.st_size:,} bytes: over the {limit}")
        data = handle.read(MAX_SNAPSHOT_BYTES + 1)
    try:
        snapshot = BuiltinsOnly(io.BytesIO(data)).load()
    except pickle.UnpicklingError as exc:
        raise TraceError(path, f"not a memory snapshot (unreadable pickle: {exc})") from None
    except (EOFError, ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError, MemoryError,
            RecursionError) as exc:
        raise TraceError(path, f"not a memory snapshot (unreadable pickle: {type(exc).__name__})") from None
    traces = snapshot.get("device_traces", []) if isinstance(snapshot, dict) else None
    if not (
        isinstance(snapshot, dict)
        and isinstance(snapshot.get("segments"), list)
        and isinstance(traces, list)
        and all(isinstance(t, list) for t in traces)
    ):
        raise TraceError(path, "not a memory snapshot (expected a dict with 'segments' and 'device_traces' lists)")
    return snapshot


@contextmanager
def output_file(path: str) -> Iterator[IO[bytes]]:
    """A binary file for the output ``path`` (``--csv``, ``--annotate``, ``report -o``), all or nothing, by
    the rules of docs/DESIGN.md §7.2 (stdout by descriptor, FIFOs and devices in place, else a renamed temp file)."""
    fd_no = STDOUT_NAMES.get(path)
    if fd_no is not None:
        sys.stdout.flush()
    fd = os.dup(fd_no) if fd_no is not None else _special_fd(path)
    if fd is not None:
        with _writing(path, fd, stdout=fd_no is not None) as f:
            yield f
        return
    directory = os.path.dirname(os.path.abspath(path))
    tmp = None
    try:
        import tempfile  # here, not at the top: ~2 ms of every run, and only a command writing a file needs it

        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
        mask = os.umask(0)
        os.umask(mask)
        os.fchmod(fd, 0o666 & ~mask)  # as an ordinary new file, not mkstemp's 0600
        with os.fdopen(fd, "wb") as f:
            yield f
        os.replace(tmp, path)  # rename never follows a link at ``path``: it replaces the name itself
        tmp = None
    except OSError as exc:
        raise TraceError(path, f"cannot write: {exc.strerror or exc}") from None
    finally:
        if tmp is not None:
            with suppress(OSError):
                os.unlink(tmp)


def _foreign_owner(st: os.stat_result) -> bool:
    return st.st_uid not in (os.geteuid(), 0)


def _refuse_foreign(path: str, st: os.stat_result) -> None:
    """A FIFO, device or symbolic link another user owns is refused: anyone may plant one in ``/tmp``."""
    if _foreign_owner(st):
        from mixins.output_dir import who  # the one wording of "uid N (name)"

        raise TraceError(path, f"cannot write: {file_kind(st.st_mode)} owned by {who(st.st_uid)} "
                               "(refused: only this user's or root's are written)")


def _special_fd(path: str) -> int | None:
    """A non-blocking write descriptor when ``path`` is a FIFO or character device: never created, truncated
    or replaced. None when a regular file is to be written there (nothing, a file or a dangling link: the
    rename replaces the name itself). Another user's FIFO, device or link is refused; a link of ours (or
    root's) is followed once and its target judged like any output name."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _os_error(path, exc, "cannot write: ") from None
    target = path
    if stat.S_ISLNK(st.st_mode):
        _refuse_foreign(path, st)
        target = os.path.realpath(path)
        try:
            st = os.lstat(target)
        except OSError:
            return None
    if stat.S_ISREG(st.st_mode):
        return None
    if not (stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode)):
        raise TraceError(path, f"cannot write: {file_kind(st.st_mode)}, not a regular file (refused)")
    _refuse_foreign(path, st)
    try:
        fd = os.open(target, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ENXIO and stat.S_ISFIFO(st.st_mode):
            raise TraceError(path, "cannot write: a FIFO that nobody is reading") from None
        raise _os_error(path, exc, "cannot write: ") from None
    got = os.fstat(fd)
    if (got.st_dev, got.st_ino) != (st.st_dev, st.st_ino) or _foreign_owner(got):  # swapped since the lstat
        os.close(fd)
        raise TraceError(path, "cannot write: the file changed while it was opened (refused)")
    return fd


# A FIFO's or device's reader that accepts nothing for this long has stopped: the write fails, never hangs.
STALL_S = 30.0


class _Deadlined(io.FileIO):
    """A non-blocking descriptor's file whose writes wait at most ``STALL_S`` for each bit of progress."""

    stalled = False  # once timed out, the flush at close fails at once instead of waiting again

    def write(self, data: Any) -> int:
        while (done := super().write(data)) is None:  # None: the reader took nothing yet (EAGAIN)
            if self.stalled or not select.select([], [self], [], STALL_S)[1]:
                self.stalled = True
                raise TimeoutError(errno.ETIMEDOUT, f"its reader took nothing for {STALL_S:g} s")
        return done


@contextmanager
def _writing(path: str, fd: int, stdout: bool = False) -> Iterator[IO[bytes]]:
    """``fd`` as a file; EPIPE on stdout propagates (the command exits 141, ``mixins.cli.main``), on a
    named FIFO it is that output's error line."""
    try:
        with (os.fdopen(fd, "wb") if stdout else io.BufferedWriter(_Deadlined(fd, "w"))) as f:
            yield f  # type: ignore[misc]
    except BrokenPipeError:
        if stdout:
            raise
        raise TraceError(path, "cannot write: its reader closed it (broken pipe)") from None
    except OSError as exc:  # a stalled reader too: _Deadlined's TimeoutError says how long it waited
        raise TraceError(path, f"cannot write: {exc.strerror or exc}") from None
