"""The output directory: who may control it, a private staging directory inside it, stale-temp sweeping.

Trust policy (docs/DESIGN.md §2): we write only into a directory that no other user can rearrange —
owned by this process's user or by root, and not writable by others unless the sticky bit is set
(as on ``/tmp``) — and whose last path component is not a symbolic link someone else owns. Everything
after the check goes through the directory's file descriptor, never its path again.

Every export works inside its own staging directory, created 0700 in the output directory (same
filesystem, so the final ``rename`` is atomic) and named ``.capture-trace-tmp.<pid>.<pidns>.<rand>.<host>``
so the process that owns it can be recognised later: the next export into the directory and
``capture-trace ls`` remove those whose process is gone (same host and pid namespace, pid not running,
owned by us). Never imports torch: the analyzer uses this module too.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import secrets
import socket
import stat
from dataclasses import dataclass
from pathlib import Path

STAGING_PREFIX = ".capture-trace-tmp."
_STAGING = re.compile(r"\.capture-trace-tmp\.(\d+)\.(\d+)\.([0-9a-z]+)\.(.+)")
_HOST_CHARS = re.compile(r"[^A-Za-z0-9.-]")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
DEFAULT_NAME_MAX = 255

logger = logging.getLogger("mixins")
_fd_path_fallback_logged = False


class UnsafeDirectoryError(PermissionError):
    """The output directory can be rearranged by another user; nothing is written there."""


def _who(uid: int) -> str:
    try:
        import pwd

        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _refusal(path: Path, st: os.stat_result, link: os.stat_result | None) -> str | None:
    """Why ``path`` must not be written into, or None when it is safe."""
    me = os.geteuid()
    if link is not None and link.st_uid not in (me, 0):
        return f"is a symbolic link owned by {_who(link.st_uid)}"
    if st.st_uid not in (me, 0):
        return f"is owned by {_who(st.st_uid)}, not by this process's {_who(me)} or root"
    if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
        return f"is writable by every user without the sticky bit (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def open_trusted(path: Path) -> int:
    """Create ``path`` if needed, open it and check the trust policy; returns a directory fd."""
    path.mkdir(parents=True, exist_ok=True)
    link: os.stat_result | None = None
    try:
        fd = os.open(path, _DIR_FLAGS | os.O_NOFOLLOW)  # what we check is what we hold: no lstat/open race
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR) or not os.path.islink(path):
            raise
        link = os.lstat(path)  # a symlink: its owner must be trusted too, then follow it
        fd = os.open(path, _DIR_FLAGS)
    try:
        st = os.fstat(fd)
        reason = _refusal(path, st, link)
        if reason is not None:
            raise UnsafeDirectoryError(
                f"refusing to write traces into {path}: it {reason}; "
                "set SGLANG_TORCH_PROFILER_DIR to a directory only this user can write (README: output directories)"
            )
    except BaseException:
        os.close(fd)
        raise
    return fd


def fd_path(fd: int, fallback: Path) -> str:
    """A path that names the directory open as ``fd`` itself (for writers that take only a path).

    ``/proc/self/fd/N`` resolves through the descriptor, so renaming or replacing anything on the way
    to the directory cannot redirect the writer. Without /proc, the directory's path (logged once).
    """
    magic = f"/proc/self/fd/{fd}"
    try:
        if os.path.samestat(os.stat(magic), os.fstat(fd)):
            return magic
    except OSError:
        pass
    global _fd_path_fallback_logged
    if not _fd_path_fallback_logged:
        _fd_path_fallback_logged = True
        logger.info("capture-trace: /proc/self/fd is not available; Kineto is given the staging directory's path")
    return str(fallback)


def name_max(dir_fd: int) -> int:
    try:
        return int(os.fpathconf(dir_fd, "PC_NAME_MAX"))
    except (OSError, ValueError):
        return DEFAULT_NAME_MAX


# -- staging directories ----------------------------------------------------------------------------


def _host() -> str:
    return _HOST_CHARS.sub("_", socket.gethostname())[:64] or "_"


def _pid_namespace() -> int:
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


@dataclass(frozen=True)
class StagingName:
    """Who made a staging directory, recovered from its name."""

    name: str
    pid: int
    pid_namespace: int
    host: str

    @classmethod
    def parse(cls, name: str) -> StagingName | None:
        match = _STAGING.fullmatch(name)
        if match is None:
            return None
        return cls(name, int(match[1]), int(match[2]), match[4])

    def is_ours(self) -> bool:
        """Made on this host in this pid namespace, so its pid can be checked here."""
        return self.host == _host() and self.pid_namespace == _pid_namespace()

    def process_gone(self) -> bool:
        if not self.is_ours() or self.pid == os.getpid():
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except OSError:  # EPERM: alive, another user's
            return False
        return False


def make_staging(dir_fd: int) -> tuple[str, int]:
    """A fresh 0700 directory of ours inside ``dir_fd``; returns (name, fd)."""
    for _ in range(16):
        name = f"{STAGING_PREFIX}{os.getpid()}.{_pid_namespace()}.{secrets.token_hex(4)}.{_host()}"
        try:
            os.mkdir(name, 0o700, dir_fd=dir_fd)
        except FileExistsError:
            continue
        fd = os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=dir_fd)
        os.fchmod(fd, 0o700)  # mkdir's mode passed through the umask; the directory must stay private
        return name, fd
    raise FileExistsError(f"could not create a unique staging directory {STAGING_PREFIX}* (16 names taken)")


def remove_staging(dir_fd: int, name: str) -> bool:
    """Remove a staging directory of ours and the plain files in it, by descriptor; False if not ours."""
    try:
        fd = os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=dir_fd)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        if os.fstat(fd).st_uid != os.geteuid():
            return False
        for entry in os.listdir(fd):
            try:
                os.unlink(entry, dir_fd=fd)
            except FileNotFoundError:
                pass
            except OSError:  # not ours to guess about (a directory someone put there): leave it all
                return False
    finally:
        os.close(fd)
    try:
        os.rmdir(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass
    except OSError:
        return False
    return True


@dataclass(frozen=True)
class StaleTemp:
    """A staging directory found in an output directory (for ``capture-trace ls``)."""

    name: str
    pid: int
    host: str
    bytes: int
    process_gone: bool
    removed: bool


def _size(dir_fd: int, name: str) -> int:
    try:
        fd = os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=dir_fd)
    except OSError:
        return 0
    try:
        total = 0
        for entry in os.listdir(fd):
            try:
                total += os.stat(entry, dir_fd=fd, follow_symlinks=False).st_size
            except OSError:
                pass
        return total
    finally:
        os.close(fd)


def sweep(dir_fd: int, *, remove: bool = True) -> list[StaleTemp]:
    """Staging directories in ``dir_fd``; those whose process is gone are removed when ``remove``."""
    found = []
    for entry in os.listdir(dir_fd):
        staging = StagingName.parse(entry) if entry.startswith(STAGING_PREFIX) else None
        if staging is None:
            continue
        gone = staging.process_gone()
        size = _size(dir_fd, entry)
        removed = remove and gone and remove_staging(dir_fd, entry)
        found.append(StaleTemp(entry, staging.pid, staging.host, size, gone, removed))
    return found


def sweep_path(directory: str, *, remove: bool = True) -> list[StaleTemp]:
    """``sweep`` by path, for the analyzer (read-only users just get the list)."""
    try:
        fd = os.open(directory, _DIR_FLAGS)
    except OSError:
        return []
    try:
        return sweep(fd, remove=remove)
    except OSError:
        return []
    finally:
        os.close(fd)
