"""Write a ``torch.profiler`` profile as a gzip Chrome/Perfetto trace: fast, atomic, never fatal, safe as root.

Not ``prof.export_chrome_trace("x.json.gz")``: torch gzips line by line at level 9 (22 s for a 487k-event
capture) and Kineto swallows write errors. The flow, staged by descriptor and compressed off the caller's
thread, and the failure policy: docs/DESIGN.md §1–2.
"""

from __future__ import annotations

import errno
import json
import logging
import math
import os
import secrets
import socket
import stat
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from mixins import kineto, output_dir, settings
from mixins.kineto import IncompleteTraceError
from mixins.metadata import HEADER_PREFIX, build_metadata, trace_header, trace_text
from mixins.naming import TRACE_SUFFIX, capture_numbers, destination
from mixins.one_line import one_line

logger = logging.getLogger("mixins")
# sglang configures logging once per process (``configure_logger`` in sglang/srt/utils): a handler on the
# root logger at ``--log-level`` (default info), or, with SGLANG_LOGGING_CONFIG_PATH, a dictConfig that
# routes the ``sglang`` logger and disables loggers outside what it names. It logs its capture progress at
# INFO on its module loggers (``sglang.srt.model_executor.cuda_graph_runner``). The "saved to" line goes
# under that tree at that level, so it lands wherever sglang's own capture lines land (docs/DESIGN.md §4).
saved_logger = logging.getLogger("sglang.capture_trace")

CHUNK = 1 << 20
_TAIL_KEEP = 64 << 10  # the tail we verify (and whose traceName we fix) stays in memory
RAW_NAME = output_dir.RAW_NAME  # Kineto's output inside the staging directory
GZ_NAME = output_dir.GZ_NAME  # ours, renamed onto the final name
_ABANDON_WAIT_S = 5.0
_REMOVE_TRIES = 4


class _Abandoned(Exception):
    """Interpreter exit gave up on this export and removed its staging directory."""


def export_cuda_graph_capture_trace(
    prof: Any,
    *,
    runner_name: str,
    tp_rank: int | None = None,
    pp_rank: int | None = None,
    pp_size: int | None = None,
    tp_size: int | None = None,
    runner: object = None,
) -> Path | None:
    """Export ``prof`` as ``cuda_graph_capture-{runner_name}-TP-{tp}[-PP-{pp}][-{n}].json.gz``; upstream's
    keywords plus ``tp_size`` (discovered when omitted) and ``runner`` (the runner object, for rank and size
    discovery and the metadata). None when the switch is off or the export failed (logged). In the background
    mode (the default) the path is returned once Kineto's JSON is staged, the file's path when compression
    finishes (``wait_for_exports()``); with ``SGLANG_CAPTURE_TRACE_BACKGROUND=0`` it is a finished file."""
    if not settings.trace_enabled():
        return None
    final: Path | None = None
    try:
        name, ranks, directory, stem = destination(runner_name, runner, tp_rank=tp_rank, pp_rank=pp_rank,
                                                   pp_size=pp_size)
        final, index = capture_numbers.reserve(directory, stem)
        metadata = build_metadata(name, ranks, index, runner, tp_size=tp_size)
        job = StagedExport.prepare(final, metadata, runner_name=name)
        job.write(prof)  # the blocking part ends with Kineto's write; compressing and publishing is job.run()
    except Exception as exc:
        report_failure(runner_name, final, exc)
        return None
    if settings.background() and not settings.strict() and _background.start(job):
        return final
    return job.run()  # synchronous, or no thread to be had: inline rather than lost


# -- the rewrite step: our metadata first, Kineto's traceName fixed ---------------------------------
# Kept apart from the file handling so that what a trace says about itself changes here only.


def rewrite_tail(tail: bytes, kineto_path: str, final: Path) -> bytes:
    """Kineto's last bytes, checked complete, with ``traceName`` naming the final file."""
    tail = tail.rstrip()
    if not kineto.tail_is_complete(tail):
        raise IncompleteTraceError(f"Kineto wrote an incomplete trace (its JSON ends {tail[-40:]!r}; disk full?)")
    return kineto.rename_trace(tail, kineto_path, json.dumps(trace_text(str(final))).encode()) + b"\n"


def compress_trace(src: Any, out: Any, metadata: dict[str, Any], level: int, kineto_path: str, final: Path) -> None:
    """Stream Kineto's JSON from ``src`` into gzip on ``out``, rewritten as above."""
    deflate = zlib.compressobj(level, zlib.DEFLATED, 31)  # wbits 31: gzip container
    pending = b""
    started = saw_events = False
    while chunk := src.read(CHUNK):
        pending += chunk
        if not started:
            body = pending.lstrip()
            if not body:
                continue
            if not body.startswith(b"{"):
                raise IncompleteTraceError("Kineto's JSON does not start with an object")
            pending, started = body[1:], True
            out.write(deflate.compress(trace_header(metadata, pending)))
        saw_events = saw_events or kineto.EVENTS_KEY in pending
        if len(pending) > 2 * _TAIL_KEEP:
            cut = len(pending) - _TAIL_KEEP
            out.write(deflate.compress(pending[:cut]))
            pending = pending[cut:]
    if not started or not saw_events:
        raise IncompleteTraceError("Kineto wrote no trace events (empty or truncated JSON; disk full?)")
    out.write(deflate.compress(rewrite_tail(pending, kineto_path, final)))
    out.write(deflate.flush())


# -- one export: staged in a private directory, published by descriptor ----------------------------


# (pid, path, st_dev, st_ino) of directories this process has swept completely: a directory full of
# planted names costs one sweep per process, not one per export (docs/DESIGN.md §2, "Sweeping").
_swept: set[tuple[int, str, int, int]] = set()


class StagedExport:
    """An export whose JSON Kineto has written into our staging directory; ``run`` finishes it (a lazy
    trace drives the steps itself)."""

    def __init__(self, final: Path, metadata: dict[str, Any], runner_name: str, out_fd: int, stage: str,
                 stage_fd: int) -> None:
        self.final = final
        self.metadata = metadata
        self.runner_name = runner_name
        self.level = settings.gzip_level()
        self.out_fd, self.stage_name, self.stage_fd = out_fd, stage, stage_fd
        self.sweep_fd: int | None = None  # the output directory again, for the sweep after publishing
        self.saved: Path | None = None
        self.kineto_path = self.staged_path(RAW_NAME)
        # the name beside a taken final name: kept by a caller that re-publishes (a lazy trace), so that
        # every publish replaces the one copy instead of adding another
        self.fallback: str | None = None
        self.report: Callable[[BaseException], None] = self._report
        self._lock = threading.Lock()  # publish, abandon and close never overlap
        self._abandoned = self._closed = self._writing = False
        self.finished = threading.Event()  # published or failed: only the sweep may still run

    def staged_path(self, name: str) -> str:
        """The path a writer that takes only a path (Kineto, torch's snapshot) is given for ``name`` in our
        staging directory: through its descriptor where /proc allows (``output_dir.fd_path``)."""
        return output_dir.fd_path(self.stage_fd, self.final.parent / self.stage_name) + "/" + name

    @classmethod
    def prepare(cls, final: Path, metadata: dict[str, Any], *, runner_name: str) -> StagedExport:
        """Trust check, name length, staging directory; the caller holds the job before the write (``write``)
        so that it can be abandoned during it."""
        out_fd = output_dir.open_trusted(final.parent)
        try:
            limit = output_dir.name_max(out_fd)
            size = len(os.fsencode(final.name))
            if size > limit:
                raise ValueError(
                    f"trace file name is {size} bytes, over the directory's {limit}-byte limit for a name: "
                    f"runner_name has {len(runner_name)} characters, at most {len(runner_name) - size + limit} fit"
                )
            stage, stage_fd = output_dir.make_staging(out_fd)
        except BaseException:
            os.close(out_fd)
            raise
        return cls(final, metadata, runner_name, out_fd, stage, stage_fd)

    def write(self, prof: Any) -> None:
        """Kineto's JSON of ``prof`` into the staging directory; on failure the job is closed. ``abandon``
        during the write removes the staging directory (the writer's descriptors stay open until it
        returns), so a write cut short at exit leaves nothing."""
        try:
            self._mark_writing(True)
            kineto.write_json(prof, self.kineto_path)
            self._mark_writing(False)
        except BaseException:
            with self._lock:
                self._writing = False
            self.close()
            raise

    def _mark_writing(self, writing: bool) -> None:
        with self._lock:
            if self._abandoned:
                raise _Abandoned
            self._writing = writing

    def read_kineto(self, limit: int) -> bytes | None:
        """Kineto's staged JSON, read back by descriptor without following links; None when it is longer
        than ``limit`` bytes (a bounded read: nothing beyond ``limit + 1`` bytes is held)."""
        fd = os.open(RAW_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self.stage_fd)
        with os.fdopen(fd, "rb") as raw:
            data = raw.read(limit + 1)
        return None if len(data) > limit else data

    def run(self) -> Path | None:
        """Compress, verify and publish, then sweep; the path the trace was saved to (the final name, or
        the fallback name when that is taken), or None. Never raises unless strict."""
        with self._lock:  # the sweep's own descriptor: abandon() may close out_fd under a running sweep
            if not self._closed:
                try:
                    self.sweep_fd = os.dup(self.out_fd)
                except OSError:
                    pass
        try:
            try:
                src, out = self._open_files()
                with src, out:
                    compress_trace(src, out, self.metadata, self.level, self.kineto_path, self.final)
                    out.flush()
                    os.fsync(out.fileno())
                self._publish()
            except _Abandoned:
                return None
            except Exception as exc:
                self.report(exc)
                return None
            finally:
                self.close()
            saved_logger.info("CUDA graph capture trace saved to: %s", one_line(self.saved))
            return self.saved
        finally:
            self.finished.set()
            self._sweep()

    def _report(self, exc: BaseException) -> None:
        report_failure(self.runner_name, self.final, exc)

    def _sweep(self) -> None:
        """Remove dead processes' staging directories: after publishing, so planted names never delay
        the caller or the trace; once per process and directory when complete (docs/DESIGN.md §2, "Sweeping")."""
        fd, self.sweep_fd = self.sweep_fd, None
        if fd is None:
            return
        try:
            if self._abandoned:
                return
            st = os.fstat(fd)
            key = (os.getpid(), str(self.final.parent), st.st_dev, st.st_ino)
            if key in _swept:
                return
            removed = [t.name for t in output_dir.sweep(fd, listing=False) if t.removed]
            if len(removed) < output_dir.MAX_REMOVALS:  # not cut short: nothing left for the next export
                _swept.add(key)
        except Exception as exc:  # noqa: BLE001 - sweeping is housekeeping: it never fails an export
            logger.debug("could not sweep stale staging directories: %s", exc)
            return
        finally:
            os.close(fd)
        if removed:
            logger.info("removed %d staging director%s of processes that are gone: %s", len(removed),
                        "y" if len(removed) == 1 else "ies", ", ".join(removed))

    def _open_files(self) -> tuple[Any, Any]:
        """Kineto's JSON (never following a link) and our gzip, created 0644 minus the umask by open(2)
        itself in our 0700 directory: no chmod by path, nothing another user can reach."""
        with self._lock:
            if self._abandoned:
                raise _Abandoned
            raw = os.open(RAW_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self.stage_fd)
            try:
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
                gz = os.open(GZ_NAME, flags, 0o644, dir_fd=self.stage_fd)
            except BaseException:
                os.close(raw)
                raise
        return os.fdopen(raw, "rb"), os.fdopen(gz, "wb")

    def _publish(self) -> None:
        with self._lock:
            if self._abandoned:
                raise _Abandoned
            _warn_if_live_writer(self.out_fd, self.final, self.runner_name)
            try:
                os.replace(GZ_NAME, self.final.name, src_dir_fd=self.stage_fd, dst_dir_fd=self.out_fd)
                self.saved = self.final
            except OSError as exc:
                if exc.errno not in _TAKEN:
                    raise
                self.saved = self._publish_beside(exc)
            else:
                self._remove_fallback()
            os.fsync(self.out_fd)  # the rename itself survives a crash

    def _remove_fallback(self) -> None:
        """The final name took the trace: the copy an earlier publish saved beside it goes (a regular
        file of ours; in the trusted directory nobody else can have replaced it)."""
        name, self.fallback = self.fallback, None
        if name is None:
            return
        try:
            st = os.stat(name, dir_fd=self.out_fd, follow_symlinks=False)
            if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid():
                os.unlink(name, dir_fd=self.out_fd)
        except OSError as exc:
            logger.debug("could not remove the earlier copy %s: %s", one_line(name), exc)

    def _publish_beside(self, refused: OSError) -> Path:
        """The final name holds something we cannot or must not replace (another user's directory, or
        their file when we are not root): save under a fresh name beside it, never replacing anything."""
        if self.fallback is not None:  # a re-publish: replace our copy, never add one
            try:
                os.replace(GZ_NAME, self.fallback, src_dir_fd=self.stage_fd, dst_dir_fd=self.out_fd)
                return self.final.parent / self.fallback
            except OSError as exc:
                if exc.errno not in _TAKEN:
                    raise
        what = _describe(self.out_fd, self.final.name)
        limit = output_dir.name_max(self.out_fd)
        for _ in range(16):
            name = fallback_name(self.final.name, limit)
            try:
                os.link(GZ_NAME, name, src_dir_fd=self.stage_fd, dst_dir_fd=self.out_fd, follow_symlinks=False)
            except FileExistsError:
                continue
            except OSError as exc:
                raise exc from refused
            self.fallback = name
            saved = self.final.parent / name
            logger.warning(
                "CUDA graph capture trace of %s saved to %s instead of %s, which holds %s (%s)",
                one_line(self.runner_name), one_line(saved), one_line(self.final), what,
                one_line(refused.strerror or refused),
            )
            return saved
        raise refused

    def abandon(self) -> None:
        """At exit, past the timeout: remove our staging directory; the thread will not publish. During Kineto's
        write, under the writer, whose descriptors stay open (docs/DESIGN.md §1, "Bookkeeping and exit")."""
        if self._lock.acquire(timeout=_ABANDON_WAIT_S):
            try:
                self._abandoned = True
                if self._writing:
                    self._remove_staging_locked()
                else:
                    self._close_locked()
            finally:
                self._lock.release()

    def close(self) -> None:
        with self._lock:
            self._close_locked()

    def _close_locked(self) -> None:
        if self._closed:
            return
        self._closed = True
        os.close(self.stage_fd)
        self._remove_staging_locked()
        os.close(self.out_fd)

    def _remove_staging_locked(self) -> None:
        # a few tries: a writer may create a file between the listing and the rmdir; once the directory
        # is gone nothing can be created in it
        for _ in range(_REMOVE_TRIES):
            if output_dir.remove_staging(self.out_fd, self.stage_name):
                return
        logger.debug("could not remove staging directory %s", one_line(self.stage_name))


# rename(2) errors meaning "the final name holds something we may not replace" (EISDIR: a directory;
# EPERM/EACCES: another user's entry in a sticky directory, when we are not root; EBUSY: a mount point).
_TAKEN = frozenset({errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST, errno.EPERM, errno.EACCES, errno.EBUSY})


def fallback_name(final_name: str, limit: int = output_dir.DEFAULT_NAME_MAX) -> str:
    """``<final stem>.<8 hex>.json.gz``, the stem cut to fit ``limit`` bytes (runner names are ASCII)."""
    stem = final_name.removesuffix(TRACE_SUFFIX)
    tail = f".{secrets.token_hex(4)}{TRACE_SUFFIX}"
    return stem[: max(1, limit - len(tail))] + tail


def _describe(dir_fd: int, name: str) -> str:
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError as exc:
        return f"something we cannot inspect ({exc.strerror})"
    kind = "a directory" if stat.S_ISDIR(st.st_mode) else "a file" if stat.S_ISREG(st.st_mode) else "an entry"
    return f"{kind} owned by {output_dir.who(st.st_uid)}"


# -- two live processes exporting the same name: the later one's file replaces the other's, so say so ----

_HEAD_BYTES = 64 << 10


def existing_metadata(dir_fd: int, name: str) -> tuple[dict[str, Any], float] | None:
    """The ``capture_trace`` object and mtime of the trace at ``name``, read bounded when it is a regular file
    of ours with one link (docs/DESIGN.md §2, "Two live processes"); None for anything else; never raises."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except (OSError, ValueError):
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_nlink != 1:
            return None
        head = zlib.decompressobj(31).decompress(os.read(fd, _HEAD_BYTES), _HEAD_BYTES)
        if not head.startswith(HEADER_PREFIX):
            return None
        metadata, _ = json.JSONDecoder().raw_decode(head[len(HEADER_PREFIX):].decode("utf-8", "replace"))
    except Exception:  # noqa: BLE001 - whatever the file holds, it is only a hint
        return None
    finally:
        os.close(fd)
    return (metadata, st.st_mtime) if isinstance(metadata, dict) else None


def _process_start(pid: int) -> float | None:
    """When ``pid`` started (seconds since the epoch, to the second), from /proc; None if unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            ticks = int(f.read(4096).rsplit(b")", 1)[1].split()[19])
        with open("/proc/stat", "rb") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith(b"btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def live_writer(dir_fd: int, name: str) -> int | None:
    """The pid of another process of this host, still running (not a reused pid: docs/DESIGN.md §2), that
    wrote the trace at ``name``; None for an earlier run's file."""
    found = existing_metadata(dir_fd, name)
    if found is None:
        return None
    metadata, mtime = found
    pid = metadata.get("pid")
    if isinstance(pid, bool) or not isinstance(pid, int) or pid == os.getpid():
        return None
    if metadata.get("hostname") != socket.gethostname() or not output_dir.pid_alive(pid):
        return None
    started = _process_start(pid)
    if started is not None and started > mtime + 1:  # btime has one-second resolution
        return None
    return pid


def _warn_if_live_writer(dir_fd: int, final: Path, runner_name: str) -> None:
    try:
        pid = live_writer(dir_fd, final.name)
    except Exception:  # noqa: BLE001 - a hint, never a failure
        return
    if pid is not None:
        logger.warning(
            "CUDA graph capture trace %s of pid %d (still running) is replaced by pid %d's: two live processes "
            "export runner %s with the same ranks; give each its own tp_rank/pp_rank",
            one_line(final), pid, os.getpid(), one_line(runner_name),
        )


def report_failure(runner_name: object, path: Path | None, exc: BaseException) -> None:
    """The failure policy: strict mode re-raises; otherwise one single-line WARNING."""
    if settings.strict():
        raise exc
    where = one_line(path) if path is not None else "(no path)"
    detail = one_line(" ".join(str(exc).split())) or type(exc).__name__
    logger.warning(
        "CUDA graph capture trace of %s not saved to %s: %s: %s",
        one_line(runner_name), where, type(exc).__name__, detail,
    )


class Job(Protocol):
    """What the background runs: an export, or a lazy trace's publisher (``mixins.lazy_trace``)."""

    final: Path
    finished: threading.Event

    def run(self) -> Any: ...

    def abandon(self) -> None: ...


class _Background:
    """Compression threads, joined (bounded) before the interpreter or a multiprocessing child exits."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: list[tuple[threading.Thread, Job]] = []
        self._exit_hook_pid: int | None = None
        # a forked child forgets its parent's exports, with a fresh lock (docs/DESIGN.md §2, "Forks and threads")
        os.register_at_fork(after_in_child=self._forget_the_parents)

    def _forget_the_parents(self) -> None:
        self._lock = threading.Lock()
        self._running = []

    def start(self, job: Job) -> bool:
        """Run ``job`` on a thread of its own; False when no thread could be started (a container's pids
        limit): the caller runs it inline rather than lose it."""
        thread = threading.Thread(target=job.run, name=f"capture-trace:{job.final.name}", daemon=True)
        with self._lock:  # started under the lock: pruning never drops a thread not yet started
            try:
                thread.start()
            except RuntimeError as exc:  # "can't start new thread"
                logger.debug("no thread for %s (%s): run inline", job.final.name, exc)
                return False
            self._running = [(t, j) for t, j in self._running if t.is_alive()]
            self._running.append((thread, job))
            self._ensure_exit_hook()
        return True

    def _ensure_exit_hook(self) -> None:
        if self._exit_hook_pid == os.getpid():
            return
        self._exit_hook_pid = os.getpid()
        try:  # runs in threading._shutdown: normal exit and multiprocessing children (fork and spawn)
            threading._register_atexit(self._join_at_exit)  # type: ignore[attr-defined]
        except Exception:
            import atexit

            atexit.register(self._join_at_exit)

    def _join_at_exit(self) -> None:
        timeout = settings.exit_timeout()
        try:  # the exports, not the sweeps after them: a daemon thread cut short mid-sweep harms nothing
            if self.wait(timeout, exports_only=True):
                return
        except Exception as exc:  # noqa: BLE001 - never a traceback at exit; what runs is abandoned below
            logger.debug("waiting for exports at exit failed: %s", exc)
        with self._lock:
            running = [(t, j) for t, j in self._running if t.is_alive() and not j.finished.is_set()]
        for _, job in running:
            job.abandon()
        if running:
            logger.warning(
                "exiting after %ss (%s) with CUDA graph capture traces still compressing, not saved: %s",
                timeout, settings.EXIT_TIMEOUT, ", ".join(sorted(one_line(j.final.name) for _, j in running)),
            )

    def wait(self, timeout: float | None = None, *, exports_only: bool = False) -> bool:
        """Wait for every export started so far, and its sweep unless ``exports_only``; True when none is
        still running."""
        if timeout is not None and math.isnan(timeout):
            raise ValueError("timeout must be a number of seconds or None, got nan")
        if timeout is not None and timeout >= threading.TIMEOUT_MAX:  # inf: join() would raise OverflowError
            timeout = None
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            running = list(self._running)
        for thread, job in running:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not exports_only:
                thread.join(remaining)
            elif thread.is_alive():  # a thread that died without finishing will never set it
                job.finished.wait(remaining)
        return all(not t.is_alive() or (exports_only and j.finished.is_set()) for t, j in running)


_background = _Background()


def run_in_background(job: Job) -> bool:
    """Run ``job`` on its own thread, waited for (bounded) at exit and by ``wait_for_exports``; False when
    no thread could be started (the caller runs it inline)."""
    return _background.start(job)


def wait_for_exports(timeout: float | None = None) -> bool:
    """Block until background trace exports finish (or ``timeout`` seconds pass); True when none is running.

    True says every export has finished, not that every one succeeded: a failure is a logged WARNING.
    """
    return _background.wait(timeout)


__all__ = [
    "IncompleteTraceError",
    "Job",
    "StagedExport",
    "export_cuda_graph_capture_trace",
    "one_line",
    "report_failure",
    "wait_for_exports",
]
