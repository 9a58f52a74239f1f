"""The output directory: who may control it, a private staging directory inside it, stale-temp sweeping.

The trust policy and the sweep's rules: docs/DESIGN.md §2. Never imports torch: the analyzer uses this module too.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import secrets
import socket
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mixins.formats import STAGING_PREFIX, SUBDIR

# Every field bounded: a name another user planted is data, parsed without raising (docs/DESIGN.md §2).
_STAGING = re.compile(
    re.escape(STAGING_PREFIX) + r"([1-9][0-9]{0,9})\.([0-9]{1,20})\.([0-9a-f]{8})\.([A-Za-z0-9._-]{1,64})"
)
_HOST_CHARS = re.compile(r"[^A-Za-z0-9.-]")
PID_MAX = 1 << 22  # Linux's PID_MAX_LIMIT: no process has a larger pid, and os.kill takes it
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
DEFAULT_NAME_MAX = 255
# What an export ever puts in its staging directory: Kineto's JSON, Kineto's own temp name for it (Kineto
# writes ``<path>.tmp``, then renames it onto ``<path>``), our gzip, or torch's memory snapshot
# (``mixins.memory_snapshot``). A directory holding anything else is not ours to empty, whatever its name says.
RAW_NAME = "trace.json"
KINETO_STAGING_SUFFIX = ".tmp"
GZ_NAME = "trace.json.gz"
SNAPSHOT_NAME = "snapshot.pickle"
STAGING_FILES = frozenset({RAW_NAME, RAW_NAME + KINETO_STAGING_SUFFIX, GZ_NAME, SNAPSHOT_NAME})
STAGING_MODE = 0o700

logger = logging.getLogger("mixins")
_fd_path_fallback_logged = False


class UnsafeDirectoryError(PermissionError):
    """The output directory can be rearranged by another user; nothing is written there."""


def who(uid: int) -> str:
    """``uid N (name)`` for messages."""
    try:
        import pwd

        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _refusal(path: Path, st: os.stat_result, link: os.stat_result | None) -> str | None:
    """Why ``path`` must not be written into, or None when it is safe."""
    me = os.geteuid()
    if link is not None and link.st_uid not in (me, 0):
        return f"is a symbolic link owned by {who(link.st_uid)}"
    if link is not None and link.st_nlink != 1:  # fs.protected_hardlinks=0: anyone may link root's symlink
        return (f"is a symbolic link with {link.st_nlink} hard links (another user can hard-link "
                f"{who(link.st_uid)}'s symbolic link to a name of their choosing)")
    if st.st_uid not in (me, 0):
        return f"is owned by {who(st.st_uid)}, not by this process's {who(me)} or root"
    if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
        mode = stat.S_IMODE(st.st_mode)
        ours = st.st_uid == me
        fix = f"; if nobody else uses it, `chmod o-w {path}` (or remove it) lets exports resume" if ours else ""
        return f"is writable by every user without the sticky bit (mode {mode:04o}){fix}"
    return None


DIR_MODE = 0o755  # directories we create: this mode minus the umask's bits, never more (docs/DESIGN.md §2)


def _umask() -> int:
    """The process umask, read without changing it (``os.umask`` sets it for every thread meanwhile)."""
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8) & 0o777
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def make_dirs(path: Path) -> None:
    """``mkdir -p`` with ``DIR_MODE`` minus the umask on every directory we create, whatever the umask or a default
    ACL says (docs/DESIGN.md §2, "Directories we create"); the trust check judges the last one."""
    mode = DIR_MODE & ~_umask()
    missing = []
    for candidate in (path, *path.parents):
        if os.path.lexists(candidate):
            break
        missing.append(candidate)
    for directory in reversed(missing):
        try:
            os.mkdir(directory, mode)
        except FileExistsError:
            continue  # another process made it first: judged like any existing directory
        fd = os.open(directory, _DIR_FLAGS | os.O_NOFOLLOW)
        try:
            if os.fstat(fd).st_uid == os.geteuid():
                os.fchmod(fd, mode)
        finally:
            os.close(fd)


def _same_link(a: os.stat_result, b: os.stat_result | None) -> bool:
    return b is not None and (a.st_dev, a.st_ino, a.st_nlink) == (b.st_dev, b.st_ino, b.st_nlink)


def _open_dir(name: str | Path, dir_fd: int | None, shown: Path,
              follow: Callable[[os.stat_result], bool] = lambda link: True) -> tuple[int, str | None]:
    """``name`` (in ``dir_fd``) opened as a directory, and why the trust policy refuses it (``_refusal``; None:
    trusted). Never through a link, except a symbolic link that ``follow`` accepts: then the directory it points
    to, judged with the link's ``lstat`` (owner, links), and the same link, with the same link count, must still
    be there after the open (UnsafeDirectoryError). Any other case raises the OSError of the open."""
    link: os.stat_result | None = None
    try:
        fd = os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=dir_fd)  # what we check is what we hold
    except OSError as exc:
        try:
            link = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            raise exc from None
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR) or not stat.S_ISLNK(link.st_mode) or not follow(link):
            raise
        fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
        try:
            after: os.stat_result | None = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            after = None
        if not _same_link(link, after):
            os.close(fd)
            changed = f"refusing to write traces into {shown}: it changed while it was opened"
            raise UnsafeDirectoryError(changed) from None
    try:
        return fd, _refusal(shown, os.fstat(fd), link)
    except BaseException:
        os.close(fd)
        raise


def open_trusted(path: Path) -> int:
    """Create ``path`` if needed, open it and check the trust policy; returns a directory fd."""
    make_dirs(path)
    fd, reason = _open_dir(path, None, path)
    if reason is not None:
        os.close(fd)
        raise UnsafeDirectoryError(
            f"refusing to write traces into {path}: it {reason}; "
            "set SGLANG_TORCH_PROFILER_DIR to a directory only this user can write (README: output directories)"
        )
    return fd


def not_a_directory(path: Path) -> Path | None:
    """The nearest part of ``path`` that exists, when it is not a directory: nothing can be made under it."""
    existing = next((p for p in (path, *path.parents) if os.path.lexists(p)), None)
    return existing if existing is not None and not existing.is_dir() else None


def refusal_of(path: Path) -> str | None:
    """Why an export could not write under ``path``, found without creating anything (``doctor``): a part
    of it is not a directory, or, when ``path`` exists, the trust policy's reason (``open_trusted``).
    None: an export would write there (creating what is missing)."""
    blocked = not_a_directory(path)
    if blocked is not None:
        return f"{blocked} is not a directory"
    if not os.path.lexists(path):
        return None  # the export makes the rest: new directories are ours, with our mode
    try:
        os.close(open_trusted(path))
    except UnsafeDirectoryError as exc:
        return str(exc)
    except OSError as exc:
        return f"cannot open {path}: {exc.strerror or exc}"
    return None


def fd_path(fd: int, fallback: Path) -> str:
    """``/proc/self/fd/N``, which resolves through the descriptor (nothing renamed on the way can redirect a
    writer that takes only a path); without /proc, the directory's path (logged once; docs/DESIGN.md §1)."""
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
class Here:
    """Where this process runs: what a staging name must carry for its pid to mean anything here."""

    host: str
    pid_namespace: int
    pid: int
    euid: int

    @classmethod
    def now(cls) -> Here:
        return cls(_host(), _pid_namespace(), os.getpid(), os.geteuid())


@dataclass(frozen=True)
class StagingName:
    """Who made a staging directory, recovered from its name."""

    name: str
    pid: int
    pid_namespace: int
    host: str

    @classmethod
    def parse(cls, name: str) -> StagingName | None:
        """None unless every field is one we could have written (pid 1..PID_MAX, ...): never raises."""
        match = _STAGING.fullmatch(name) if isinstance(name, str) else None
        if match is None or int(match[1]) > PID_MAX:
            return None
        return cls(name, int(match[1]), int(match[2]), match[4])

    def is_ours(self, here: Here | None = None) -> bool:
        """Made on this host in this pid namespace, so its pid can be checked here."""
        here = here or Here.now()
        return self.host == here.host and self.pid_namespace == here.pid_namespace

    def process_gone(self, here: Here | None = None) -> bool:
        here = here or Here.now()
        if not self.is_ours(here) or self.pid == here.pid:
            return False
        return not pid_alive(self.pid)


def pid_alive(pid: int) -> bool:
    """``kill(pid, 0)``: True unless ESRCH; False for a pid no process can have (never raises)."""
    if not 0 < pid <= PID_MAX:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: alive, another user's
        return True
    return True


def make_staging(dir_fd: int) -> tuple[str, int]:
    """A fresh 0700 directory of ours inside ``dir_fd``; returns (name, fd)."""
    for _ in range(16):
        name = f"{STAGING_PREFIX}{os.getpid()}.{_pid_namespace()}.{secrets.token_hex(4)}.{_host()}"
        try:
            os.mkdir(name, STAGING_MODE, dir_fd=dir_fd)
        except FileExistsError:
            continue
        fd = os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=dir_fd)
        os.fchmod(fd, STAGING_MODE)  # mkdir's mode passed through the umask; the directory must stay private
        return name, fd
    raise FileExistsError(f"could not create a unique staging directory {STAGING_PREFIX}* (16 names taken)")


_SIZE_ENTRIES = 16  # a staging directory holds at most 3 files; a planted one may hold millions


def not_our_staging(fd: int) -> tuple[str | None, int]:
    """Why the directory open as ``fd`` is not a staging directory this process may empty (None: it is),
    and the bytes of its first few entries, in one bounded scan.

    The one rule of ``clean``, ``ls`` and the exporter's sweep: a directory (never a link), owned by this
    user, mode ``STAGING_MODE``, holding only ``STAGING_FILES``. A name alone proves nothing: where another
    user can rename in the parent, root's real trace folder can be given a staging name.
    """
    st = os.fstat(fd)
    why: str | None = None
    if st.st_uid != os.geteuid():
        why = "another user's"
    elif stat.S_IMODE(st.st_mode) != STAGING_MODE:
        why = f"mode {stat.S_IMODE(st.st_mode):04o}, not a staging directory's {STAGING_MODE:04o}"
    total = 0
    with os.scandir(fd) as entries:
        for seen, entry in enumerate(entries):
            if seen >= _SIZE_ENTRIES:
                break
            if why is None and (seen >= len(STAGING_FILES) or entry.name not in STAGING_FILES):
                why = "holds files no export writes"
            try:
                total += entry.stat(follow_symlinks=False).st_size
            except OSError:
                pass
    return why, total


def remove_staging(dir_fd: int, name: str) -> bool:
    """Remove a staging directory of ours and the plain files in it, by descriptor; False if it is not
    verifiably ours (:func:`not_our_staging`)."""
    try:
        fd = os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=dir_fd)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        if not_our_staging(fd)[0] is not None:
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
    """A staging directory found in an output directory (for ``capture-trace ls`` and ``clean``).

    ``kept``: why ``clean`` keeps it although its process is gone (None: ``clean`` removes it, or did).
    ``ls`` and ``clean`` read it from here, so ``ls`` never promises a removal ``clean`` refuses.
    """

    name: str
    pid: int
    host: str
    bytes: int
    process_gone: bool
    removed: bool
    kept: str | None = None


def _inspect(dir_fd: int, name: str) -> tuple[int, str | None]:
    """(bytes in the first few entries, why it is not our staging) of an entry: bounded, since it may
    be anyone's, and never following a link."""
    try:
        fd = os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=dir_fd)
    except OSError:
        try:
            link = stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
        except OSError:
            link = False
        return 0, "a symbolic link, not a directory" if link else "not a directory"
    try:
        why, total = not_our_staging(fd)
    except OSError:
        why, total = "unreadable", 0
    finally:
        os.close(fd)
    return total, why


# What one export's sweep may remove; the rest waits for the next export or `capture-trace ls`.
MAX_REMOVALS = 16


def sweep(dir_fd: int, *, remove: bool = True, listing: bool = True, unsafe: str | None = None) -> list[StaleTemp]:
    """Staging directories in ``dir_fd``; those whose process is gone are removed when ``remove``.

    ``listing`` (``capture-trace ls`` and ``clean``): every name that parses, with sizes and, for those
    whose process is gone, why ``clean`` keeps them (``unsafe``: why nothing may be removed in this
    directory at all). Without it, the exporter's cheap sweep (docs/DESIGN.md §2, "Sweeping").
    """
    here = Here.now()
    ours = (f".{here.pid_namespace}.", f".{here.host}")  # the exporter's first, cheapest filter
    found: list[StaleTemp] = []
    removals = 0
    with os.scandir(dir_fd) as entries:
        for entry in entries:
            if not entry.name.startswith(STAGING_PREFIX):
                continue
            if not listing and (ours[0] not in entry.name or not entry.name.endswith(ours[1])):
                continue
            try:
                capped = not listing and removals >= MAX_REMOVALS
                temp = _examine(dir_fd, entry, here, remove=remove and not capped, listing=listing, unsafe=unsafe)
            except Exception as exc:  # noqa: BLE001 - an untrusted entry never stops the sweep
                logger.debug("staging directory %r skipped: %s", entry.name, exc)
                continue
            if temp is not None:
                found.append(temp)
                removals += temp.removed
    return found


def _examine(dir_fd: int, entry: os.DirEntry[str], here: Here, *, remove: bool, listing: bool,
             unsafe: str | None) -> StaleTemp | None:
    staging = StagingName.parse(entry.name)
    if staging is None:
        return None
    if not listing:  # the exporter's fast path: rule out what it may not remove before any system call
        if not staging.is_ours(here) or staging.pid == here.pid or not remove:
            return None
        if entry.stat(follow_symlinks=False).st_uid != here.euid or not entry.is_dir(follow_symlinks=False):
            return None
    gone = staging.process_gone(here)
    if not listing and not gone:
        return None
    size, why = _inspect(dir_fd, entry.name) if listing else (0, None)
    kept = (unsafe or why) if gone else None
    removed = remove and gone and kept is None and remove_staging(dir_fd, entry.name)
    return StaleTemp(entry.name, staging.pid, staging.host, size, gone, removed, kept)


def _open_listed(name: str | Path, dir_fd: int | None, shown: Path) -> tuple[int, str | None] | None:
    """``name`` (in ``dir_fd``) opened as a directory, and why nothing may be removed in it (the trust
    policy's reason), or None when it is no directory we may look into: a symbolic link is followed
    only when it is this user's or root's (another user's could point into a private directory of ours)."""
    try:
        fd, reason = _open_dir(name, dir_fd, shown, follow=lambda link: link.st_uid in (os.geteuid(), 0))
    except OSError:
        return None
    return fd, (None if reason is None else f"the directory {reason}")


def sweep_path(directory: str, *, remove: bool = True) -> list[StaleTemp]:
    """Staging directories where exports put them, for ``ls`` (``remove`` False) and ``clean``: in
    ``directory`` and in its ``SUBDIR`` (the profiler directory's trace folder), each opened by
    descriptor without following another user's link; removals only where no other user can rename."""
    top = _open_listed(directory, None, Path(directory))
    if top is None:
        return []
    found: list[StaleTemp] = []
    try:
        sub = _open_listed(SUBDIR, top[0], Path(directory) / SUBDIR)
        for fd, unsafe in [top] + ([] if sub is None else [sub]):
            try:
                found += sweep(fd, remove=remove, unsafe=unsafe)
            except OSError:  # the listing itself failed; single entries never get here
                pass
            finally:
                if fd != top[0]:
                    os.close(fd)
    finally:
        os.close(top[0])
    return found
