"""The CUDA memory snapshot of a profiled capture, one file per runner × rank beside its trace, instead of
sglang's one name in the working directory for every runner and rank (docs/DESIGN.md §1.3).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from mixins import output_dir, settings
from mixins.formats import MEMORY_PREFIX, MEMORY_SUFFIX
from mixins.naming import capture_numbers, destination
from mixins.one_line import one_line

logger = logging.getLogger("mixins")

#: The name sglang gives every runner's snapshot (0.5.5–0.5.23 ``cuda_graph_runner.py`` /
#: ``decode_cuda_graph_runner.py``; XPU's ``xpu_graph_runner_memory_usage.pickle``), as its log line says it.
UPSTREAM_NAMES = ("cuda_graph_runner_memory_usage.pickle", "xpu_graph_runner_memory_usage.pickle")
#: torch's memory modules whose ``_dump_snapshot`` sglang's hooks call (``torch.xpu`` for XPUGraphRunner).
_MEMORY_MODULES = ("torch.cuda.memory", "torch.xpu.memory")
_STAGED = output_dir.SNAPSHOT_NAME  # torch's file inside our 0700 staging directory

# runner -> the file name of its latest snapshot: the trace exported after the hook names it
_saved: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
_saved_lock = threading.Lock()


def saved_for(runner: object) -> str | None:
    """The file name (in the trace's directory) of the snapshot saved during ``runner``'s hook, if any."""
    with suppress(TypeError), _saved_lock:  # TypeError: not weakly referenceable
        return _saved.get(runner)
    return None


def write_snapshot(dump: Callable[[str], Any], final: Path, runner_name: str) -> Path | None:
    """``dump(path)`` (torch's own ``_dump_snapshot``) into an export's private staging directory (the
    exporter's trust check and name limit: ``export.StagedExport.prepare``), then published atomically at
    ``final``; None when ``dump`` wrote nothing. The staging directory goes whatever happens."""
    from mixins.export import StagedExport

    job = StagedExport.prepare(final, {}, runner_name=runner_name)
    try:
        dump(job.staged_path(_STAGED))
        try:
            fd = os.open(_STAGED, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=job.stage_fd)
        except FileNotFoundError:
            return None
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(_STAGED, final.name, src_dir_fd=job.stage_fd, dst_dir_fd=job.out_fd)
        os.fsync(job.out_fd)
    finally:
        job.close()
    return final


def save(runner: object, runner_name: str, dump: Callable[[str], Any]) -> Path | None:
    """Run the hook's ``_dump_snapshot`` (``dump``) into a file beside the runner's trace; None when it wrote
    nothing (DEBUG) or failed (one WARNING; strict mode raises)."""
    final: Path | None = None
    try:
        _, _, directory, stem = destination(runner_name, runner, prefix=MEMORY_PREFIX)
        final, _ = capture_numbers.reserve(directory, stem, MEMORY_SUFFIX)
        saved = write_snapshot(dump, final, runner_name)
    except Exception as exc:
        if settings.strict():
            raise
        logger.warning(
            "CUDA memory snapshot of %s not saved to %s: %s: %s", one_line(runner_name),
            one_line(final) if final is not None else "(no path)", type(exc).__name__, one_line(str(exc)),
        )
        return None
    if saved is None:
        logger.debug("%s: _dump_snapshot wrote nothing", one_line(runner_name))
        return None
    with suppress(TypeError), _saved_lock:
        _saved[runner] = saved.name
    logger.info("CUDA memory snapshot of %s saved to: %s", one_line(runner_name), one_line(saved))
    return saved


class _NamesTheSnapshot(logging.Filter):
    """sglang's log line says ``Memory Usage is saved to cuda_graph_runner_memory_usage.pickle``: make it
    name the file really written (or say none was)."""

    def __init__(self, saved: list[Path | None]) -> None:
        super().__init__()
        self.saved = saved

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and any(name in record.msg for name in UPSTREAM_NAMES):
            where = str(self.saved[-1]) if self.saved and self.saved[-1] is not None else "no file (not saved)"
            for name in UPSTREAM_NAMES:
                record.msg = record.msg.replace(name, where)
        return True


@contextmanager
def redirected(runner: object, runner_name: Callable[[], str]) -> Iterator[Callable[[Callable[..., Any]], Any]]:
    """Within the block, ``wrap(hook)`` runs ``hook`` with every torch memory module's ``_dump_snapshot``
    saving through ``save`` instead, and the hook module's log line corrected."""
    import wrapt

    saved: list[Path | None] = []
    with suppress(TypeError), _saved_lock:
        _saved.pop(runner, None)  # a trace names only the snapshot of its own hook call

    def dump_snapshot(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        saved.append(save(runner, runner_name(), wrapped))

    def wrap(hook: Callable[..., Any]) -> Any:
        for name in _MEMORY_MODULES:
            # only where torch has one (torch 2.7's torch.xpu.memory has none: wrapt would raise at the call)
            if callable(getattr(sys.modules.get(name), "_dump_snapshot", None)):
                hook = wrapt.transient_function_wrapper(name, "_dump_snapshot")(dump_snapshot)(hook)
        return hook

    hook_logger = _module_logger(runner)
    log_filter = _NamesTheSnapshot(saved)
    if hook_logger is not None:
        hook_logger.addFilter(log_filter)
    try:
        yield wrap
    finally:
        if hook_logger is not None:
            hook_logger.removeFilter(log_filter)


def _module_logger(runner: object) -> logging.Logger | None:
    """The ``logger`` of the module that defines the runner's hook (where sglang logs the snapshot's name)."""
    for cls in type(runner).__mro__:
        module = sys.modules.get(cls.__module__)
        candidate = getattr(module, "logger", None)
        if isinstance(candidate, logging.Logger) and "_post_process_after_profile" in vars(cls):
            return candidate
    return None
