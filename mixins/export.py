"""Write a ``torch.profiler`` profile as a gzip Chrome/Perfetto trace: fast, atomic, never fatal.

Why not ``prof.export_chrome_trace("x.json.gz")``: torch gzips line by line at level 9 (22 s for a
487k-event capture on a 2-core VM, ~90 % of it compression) and Kineto swallows write errors (a full
disk leaves a 35-byte gzip with no JSON in it). Here Kineto writes plain JSON to a hidden temporary
file (the only part that blocks the caller), then a background thread streams it through zlib in
1 MiB chunks, inserting our ``capture_trace`` metadata as the first key, checks that Kineto's JSON
is complete, and ``os.replace``s the result into place. A reader never sees a partial file under the
final name; on any failure the temporaries are removed and a single WARNING is logged.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
import zlib
from pathlib import Path
from typing import Any

from mixins import settings
from mixins.metadata import build_metadata, trace_header
from mixins.naming import capture_numbers, discover_ranks, trace_dir, trace_stem, validate_runner_name

logger = logging.getLogger("mixins")

CHUNK = 1 << 20
_TAIL_KEEP = 64 << 10  # the tail we verify (and whose traceName we fix) stays in memory


class IncompleteTraceError(RuntimeError):
    """Kineto returned normally but wrote no complete JSON (it swallows write errors)."""


def export_cuda_graph_capture_trace(
    prof: Any,
    *,
    runner_name: str,
    tp_rank: int | None = None,
    pp_rank: int | None = None,
    pp_size: int | None = None,
    tp_size: int | None = None,
) -> Path | None:
    """Export ``prof`` as ``cuda_graph_capture-{runner_name}-TP-{tp}[-PP-{pp}][-{n}].json.gz``.

    A no-op returning ``None`` unless ``SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE`` is on. Returns the
    final path (the file appears there once compression finishes; ``wait_for_exports()`` waits), or
    ``None`` when the export failed and was logged. Same keywords as upstream sglang's function, plus
    ``tp_size`` (recorded so ``capture-trace check`` can tell a missing rank; discovered when omitted).
    """
    if not settings.trace_enabled():
        return None
    return export_profile(
        prof, runner_name=runner_name, tp_rank=tp_rank, pp_rank=pp_rank, pp_size=pp_size, tp_size=tp_size
    )


def export_profile(
    prof: Any,
    *,
    runner_name: str,
    runner: object = None,
    tp_rank: int | None = None,
    pp_rank: int | None = None,
    pp_size: int | None = None,
    tp_size: int | None = None,
) -> Path | None:
    """The export itself, switch already checked; ``runner`` feeds rank discovery and metadata."""
    final: Path | None = None
    try:
        name = validate_runner_name(runner_name)
        ranks = discover_ranks(runner, tp_rank=tp_rank, pp_rank=pp_rank, pp_size=pp_size)
        directory = trace_dir(settings.profiler_dir())
        final, index = capture_numbers.reserve(directory, trace_stem(name, ranks))
        metadata = build_metadata(name, ranks, index, runner, tp_size=tp_size)
        directory.mkdir(parents=True, exist_ok=True)
        raw = _kineto_json(prof, final)
        job = _Compression(raw, final, metadata, settings.gzip_level(), runner_name=name)
    except Exception as exc:
        report_failure(runner_name, final, exc)
        return None
    if settings.background() and not settings.strict():
        _background.start(job)
    else:
        job.run()
    return final


def _kineto_json(prof: Any, final: Path) -> Path:
    """Let Kineto write plain JSON next to the final file (same filesystem, so os.replace is atomic)."""
    fd, tmp = tempfile.mkstemp(dir=final.parent, prefix=f".{final.name}.", suffix=".json.tmp")
    os.close(fd)
    try:
        prof.export_chrome_trace(tmp)
    except BaseException:
        _remove(Path(tmp))
        raise
    finally:
        _remove(Path(tmp + ".tmp"))  # Kineto's own staging file, left behind when its write failed
    return Path(tmp)


class _Compression:
    """Stream Kineto's JSON into gzip with our metadata, verify, and move into place."""

    def __init__(self, raw: Path, final: Path, metadata: dict[str, Any], level: int, *, runner_name: str):
        self.raw = raw
        self.final = final
        self.metadata = metadata
        self.level = level
        self.runner_name = runner_name

    def run(self) -> None:
        tmp: Path | None = None
        try:
            fd, tmp_name = tempfile.mkstemp(dir=self.final.parent, prefix=f".{self.final.name}.", suffix=".tmp")
            tmp = Path(tmp_name)
            with os.fdopen(fd, "wb") as out:
                self._compress_into(out)
                out.flush()
                os.fsync(out.fileno())
            os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide the trace from other users of the box
            os.replace(tmp, self.final)
            tmp = None
            logger.info("CUDA graph capture trace saved to: %s", self.final)
        except Exception as exc:
            report_failure(self.runner_name, self.final, exc)
        finally:
            if tmp is not None:
                _remove(tmp)
            _remove(self.raw)

    def _compress_into(self, out: Any) -> None:
        deflate = zlib.compressobj(self.level, zlib.DEFLATED, 31)  # wbits 31: gzip container
        pending = b""
        started = saw_events = False
        with open(self.raw, "rb") as src:
            while chunk := src.read(CHUNK):
                pending += chunk
                if not started:
                    body = pending.lstrip()
                    if not body:
                        continue
                    if not body.startswith(b"{"):
                        raise IncompleteTraceError(f"{self.raw.name} does not start with a JSON object")
                    pending, started = body[1:], True
                    out.write(deflate.compress(trace_header(self.metadata, pending)))
                saw_events = saw_events or b'"traceEvents"' in pending
                if len(pending) > 2 * _TAIL_KEEP:
                    cut = len(pending) - _TAIL_KEEP
                    out.write(deflate.compress(pending[:cut]))
                    pending = pending[cut:]
        tail = pending.rstrip()
        if not started or not saw_events or not tail.endswith(b"}") or b'"traceName"' not in tail:
            raise IncompleteTraceError(
                f"Kineto wrote an incomplete trace ({self.raw.stat().st_size} bytes of JSON; disk full?)"
            )
        tail = tail.replace(_json_bytes(str(self.raw)), _json_bytes(str(self.final)), 1) + b"\n"
        out.write(deflate.compress(tail))
        out.write(deflate.flush())


def _json_bytes(text: str) -> bytes:
    return json.dumps(text).encode()


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    except OSError as exc:
        logger.debug("could not remove temporary file %s: %s", path, exc)


def report_failure(runner_name: object, path: Path | None, exc: BaseException) -> None:
    """The failure policy: strict mode re-raises; otherwise one single-line WARNING."""
    if settings.strict():
        raise exc
    where = path if path is not None else "(no path)"
    detail = " ".join(str(exc).split()) or type(exc).__name__
    logger.warning(
        "CUDA graph capture trace of %s not saved to %s: %s: %s", runner_name, where, type(exc).__name__, detail
    )


class _Background:
    """Compression threads, joined (bounded) before the interpreter or a multiprocessing child exits."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._exit_hook_pid: int | None = None

    def start(self, job: _Compression) -> None:
        thread = threading.Thread(target=job.run, name=f"capture-trace:{job.final.name}", daemon=True)
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
            self._ensure_exit_hook()
        thread.start()

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
        if not self.wait(timeout):
            running = sorted(t.name.removeprefix("capture-trace:") for t in self._threads if t.is_alive())
            logger.warning(
                "exiting after %ss (%s) with CUDA graph capture traces still compressing, not saved: %s",
                timeout, settings.EXIT_TIMEOUT, ", ".join(running),
            )

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for every export started so far; True when none is still running."""
        import time

        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            thread.join(remaining)
        return not any(t.is_alive() for t in threads)


_background = _Background()


def wait_for_exports(timeout: float | None = None) -> bool:
    """Block until background trace exports finish (or ``timeout`` seconds pass); True when all done."""
    return _background.wait(timeout)


__all__ = [
    "IncompleteTraceError",
    "export_cuda_graph_capture_trace",
    "export_profile",
    "report_failure",
    "wait_for_exports",
]
