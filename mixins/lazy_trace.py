"""One trace file per runner class and rank for runners that capture lazily, one CUDA graph per new input
shape while serving: each shape profiled on its own, the one file re-published with all of them through the
ordinary export, within ``MAX_SHAPES`` and ``MAX_EVENT_BYTES`` (docs/DESIGN.md §5.1, "Lazy captures").
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mixins import kineto, settings
from mixins.export import StagedExport, report_failure, run_in_background
from mixins.metadata import build_metadata
from mixins.naming import Ranks, capture_numbers, destination

logger = logging.getLogger("mixins")

#: Shapes kept per file; later captures are not profiled (one INFO line per file).
MAX_SHAPES = 64
#: Kineto event JSON kept per file (uncompressed size); a shape that would pass it is dropped and later
#: captures are not profiled. Each publish rewrites the whole file, so this also bounds one publish.
MAX_EVENT_BYTES = 256 << 20


class MergedProfile:
    """Stands in for a profile in the export: ``export_chrome_trace`` writes the first shape's head, every
    shape's events and the latest shape's tail (its ``traceName`` pointed at the path written)."""

    def __init__(self, head: bytes, segments: list[bytes], tail: bytes, tail_path: str) -> None:
        self.head, self.segments, self.tail, self.tail_path = head, segments, tail, tail_path

    def export_chrome_trace(self, path: str) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        with os.fdopen(os.open(path, flags, 0o600), "wb") as out:
            out.write(self.head)
            for index, segment in enumerate(self.segments):
                out.write(b"\n" if index == 0 else b",\n")
                out.write(zlib.decompress(segment))
            out.write(b"\n  ")
            out.write(kineto.rename_trace(self.tail, self.tail_path, b'"' + os.fsencode(path) + b'"'))


class _Publisher:
    """One run of a file's publisher thread (what ``export.run_in_background`` runs and exit waits for)."""

    def __init__(self, trace: LazyTrace, final: Path) -> None:
        self.trace, self.final = trace, final
        self.finished = threading.Event()

    def run(self) -> None:
        try:
            self.trace.work(self)
        finally:
            self.finished.set()

    def abandon(self) -> None:
        self.trace.abandon()


class LazyTrace:
    """The one file of one runner class and rank in one output directory, growing by a shape per capture."""

    def __init__(self, runner_name: str, ranks: Ranks, final: Path, index: int) -> None:
        self.runner_name, self.ranks, self.final, self.index = runner_name, ranks, final, index
        self._lock = threading.Lock()  # the counters and the queue
        self._publish_lock = threading.Lock()  # one publish at a time, in order
        self._admitted = 0  # shapes being profiled, queued, kept or lost: a slot is freed only by a call
        # that captured nothing, never by a failure of ours (a refused directory must not let every new
        # shape start a profiler)
        self._not_profiled = 0
        self._lost = 0  # profiled, not saved (our failure)
        self._failing = False  # a failure was reported and nothing was saved since: later ones are DEBUG
        self._fallback: str | None = None  # the one name beside a taken final name (export._Export.fallback)
        self._full = False
        self._pending: list[Any] = []
        # the runner the metadata is read from, weakly: this trace lives as long as the process, and a
        # runner's CUDA graphs and memory pool must not (one not weak-referenceable is held)
        self._runner: Callable[[], object] = lambda: None
        self._publisher: _Publisher | None = None
        self._current: StagedExport | None = None
        self._abandoned = False
        # kept by the publisher only (under _publish_lock)
        self._head: bytes | None = None
        self._tail: tuple[bytes, str] = (b"]}", "")
        self._segments: list[bytes] = []
        self._bytes = 0

    def admit(self) -> bool:
        """Whether the next capture may be profiled (a slot is taken: ``add`` or ``release`` it). Refused:
        the caller says ``not_profiled`` once the call has added a graph (a known shape is no loss)."""
        with self._lock:
            if not self._full and self._admitted < MAX_SHAPES:
                self._admitted += 1
                return True
        return False

    def not_profiled(self) -> None:
        """A shape was captured without our profiler: the first such re-publishes the file once, so that it
        says shapes are missing."""
        with self._lock:
            first = self._refuse_locked()
        if first:
            self.add(None, None)

    def _refuse_locked(self) -> bool:
        self._not_profiled += 1
        if self._not_profiled > 1:
            return False
        logger.info(
            "%s: its capture trace holds its first %d shapes (limits: %d shapes, %d MiB of events, "
            "docs/DESIGN.md §5.1); later captures are not profiled", self.runner_name,
            self._admitted, MAX_SHAPES, MAX_EVENT_BYTES >> 20,
        )
        return True

    def release(self) -> None:
        """The admitted call captured nothing (it raised, or the shape was known): free its slot. Never
        for a failure of ours: that shape keeps its slot (``_lose``)."""
        with self._lock:
            self._admitted -= 1

    def add(self, prof: Any, runner: object) -> None:
        """Queue a stopped profile of one shape (None: publish again with the same shapes, the metadata
        changed); publish on the publisher thread (inline when the export is synchronous:
        ``SGLANG_CAPTURE_TRACE_BACKGROUND=0`` or strict)."""
        with self._lock:
            self._pending.append(prof)
            if runner is not None:
                try:
                    self._runner = weakref.ref(runner)
                except TypeError:
                    self._runner = lambda: runner
            if self._publisher is not None:
                return  # the running publisher takes it with the next batch
            if settings.background() and not settings.strict():
                self._publisher = publisher = _Publisher(self, self.final)
            else:
                publisher = None
        if publisher is None:
            self.work(None)
        elif not run_in_background(publisher):  # no thread to be had: publish inline, and let the next start one
            with self._lock:
                if self._publisher is publisher:
                    self._publisher = None
            self.work(None)

    def work(self, publisher: _Publisher | None) -> None:
        """Publish until nothing is queued; a publisher thread ends only under the lock with an empty queue,
        so a profile queued at any moment is published by this run or starts the next."""
        with self._publish_lock:
            while True:
                with self._lock:
                    batch, self._pending = self._pending, []
                    if not batch or self._abandoned:
                        if publisher is not None and self._publisher is publisher:
                            self._publisher = None
                        return
                    runner = self._runner()
                kept = [self._keep(prof) for prof in batch if prof is not None]
                if self._head is not None and (any(kept) or len(kept) < len(batch)):
                    self._publish(runner)

    def _keep(self, prof: Any) -> bool:
        """Kineto's JSON for one shape, staged under the trust policy, read back and kept (compressed).
        True: the file is to be published again (a shape was kept, or one is now missing)."""
        try:
            with self._staged(prof, {}) as job:
                if job is None:
                    return False
                data = job.read_kineto(MAX_EVENT_BYTES - self._bytes + (1 << 20))
                kineto_path = job.kineto_path
            parts = kineto.split_trace(data) if data is not None else None
        except Exception as exc:
            if not self._abandoned:
                self._lose(exc)
            return True
        if parts is None or self._bytes + len(parts[1]) > MAX_EVENT_BYTES:
            with self._lock:
                self._full = True
                self._admitted -= 1
                self._refuse_locked()
            return True  # publish again: the file now says a shape is missing
        head, events, tail = parts
        if self._head is None:
            self._head = head
        self._tail = (tail, kineto_path)
        self._segments.append(zlib.compress(events, 1))
        self._bytes += len(events)
        return True

    @contextmanager
    def _staged(self, prof: Any, metadata: dict[str, Any]) -> Iterator[StagedExport | None]:
        """``prof`` written into a staging directory by Kineto, for the block; the job is ``_current``
        from before the write until it is closed after the block, so that ``abandon`` at exit removes
        whatever a step cut short leaves. None: abandoned."""
        job = StagedExport.prepare(self.final, metadata, runner_name=self.runner_name)
        with self._lock:
            if self._abandoned:
                job.close()
                yield None
                return
            self._current = job
        try:
            job.write(prof)
            yield job
        finally:
            with self._lock:
                self._current = None
            job.close()

    def _lose(self, exc: BaseException) -> None:
        """A shape profiled and not saved: counted as missing, its slot kept."""
        with self._lock:
            self._lost += 1
        self._report(exc)

    def _report(self, exc: BaseException) -> None:
        """One WARNING for a run of failures (a refused directory, a full disk: every shape and publish
        would fail alike); again only after something was saved. Strict mode raises every time."""
        with self._lock:
            first, self._failing = not self._failing, True
        if first or settings.strict():
            report_failure(self.runner_name, self.final, exc)
        else:
            logger.debug("capture trace of %s still not saved: %s", self.runner_name, exc)

    def _publish(self, runner: object) -> None:
        try:
            metadata = build_metadata(self.runner_name, self.ranks, self.index, runner)
            with self._lock:
                metadata["capture_shapes"] = len(self._segments)
                metadata["shapes_not_profiled"] = self._not_profiled + self._lost
            merged = MergedProfile(self._head or b"", list(self._segments), *self._tail)
            with self._staged(merged, metadata) as job:
                if job is None:
                    return
                job.fallback, job.report = self._fallback, self._report
                saved = job.run()  # reports its own failures, through _report
                self._fallback = job.fallback
        except Exception as exc:
            if not self._abandoned:
                self._report(exc)
            return
        if saved is not None:
            with self._lock:
                self._failing = False

    def abandon(self) -> None:
        """At exit, past the timeout: stop publishing; the step in progress (Kineto's write, or the
        export) removes its staging."""
        with self._lock:
            self._abandoned = True
            current = self._current
        if current is not None:
            current.abandon()


_traces: dict[tuple[str, str], LazyTrace] = {}
_traces_lock = threading.Lock()
os.register_at_fork(after_in_child=_traces.clear)  # a forked child starts its own


def trace_for(runner: object, runner_name: str) -> LazyTrace:
    """The one LazyTrace of this runner name, ranks and output directory in this process (a forked child
    starts its own); its file name is reserved when it is first asked for."""
    name, ranks, directory, stem = destination(runner_name, runner)
    key = (os.path.realpath(directory), stem)
    with _traces_lock:
        trace = _traces.get(key)
        if trace is None:
            final, index = capture_numbers.reserve(directory, stem)
            trace = _traces[key] = LazyTrace(name, ranks, final, index)
        return trace
