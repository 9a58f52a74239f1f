"""Everything the export assumes about how Kineto writes a trace, in one place: the facts and the torch
versions they were checked on are in docs/DESIGN.md §3 (2.13.0 re-checked by tests/core/test_kineto.py on
every run). The next torch release that changes any of them should change this file only; a tail without
``traceName`` (a future layout) falls back to "the object closes after ``traceEvents``", said once in the log.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from typing import Any

from mixins.output_dir import KINETO_STAGING_SUFFIX as STAGING_SUFFIX  # noqa: F401 - Kineto writes <path>.tmp

logger = logging.getLogger("mixins")

ALREADY_SAVED = "Trace is already saved"
TRACE_NAME_KEY = b'"traceName"'
EVENTS_KEY = b'"traceEvents"'

_fallbacks_logged: set[str] = set()
_fallbacks_lock = threading.Lock()


class IncompleteTraceError(RuntimeError):
    """Kineto returned normally but wrote no complete JSON (it swallows write errors)."""


class AlreadyExportedError(RuntimeError):
    """Kineto exports a profile once; this profile was exported before."""


def log_fallback_once(what: str) -> None:
    """One INFO line per kind of fallback per process: a changed torch shows up in the log, not as noise."""
    with _fallbacks_lock:
        if what in _fallbacks_logged:
            return
        _fallbacks_logged.add(what)
    logger.info("capture-trace: %s (docs/DESIGN.md §3)", what)


def write_json(prof: Any, path: str) -> None:
    """Let Kineto write plain JSON at ``path`` (it stages at ``path + STAGING_SUFFIX``)."""
    try:
        prof.export_chrome_trace(path)
    except RuntimeError as exc:
        if ALREADY_SAVED in str(exc):
            raise AlreadyExportedError(
                f"this profile was already exported ({ALREADY_SAVED}): Kineto exports a profile once"
            ) from exc
        raise
    if not os.path.exists(path):  # its write to the staging name failed, so it never renamed it
        raise IncompleteTraceError("Kineto wrote no trace (its write failed and it did not say why; disk full?)")


def session_started_after(prof: Any, wall_ns: int) -> bool:
    """Whether the stopped ``torch.profiler.profile`` holds a session that Kineto started after ``wall_ns``
    (``time.time_ns()`` taken when our ``start()`` returned): another profiler's, not ours. False when
    this torch cannot tell."""
    results = getattr(getattr(prof, "profiler", None), "kineto_results", None)
    try:
        start = results.trace_start_ns() if results is not None else None
    except Exception:  # noqa: BLE001 - no way to tell: exported as before
        return False
    return isinstance(start, int) and start > wall_ns


def tail_is_complete(tail: bytes) -> bool:
    """Whether the stripped end of Kineto's JSON shows a finished write (``traceName`` then ``}``)."""
    if not tail.endswith(b"}"):
        return False
    if TRACE_NAME_KEY in tail:
        return True
    body = tail[:-1].rstrip()
    if body.endswith(b"]"):  # traceEvents closed and nothing after it: a layout without traceName
        log_fallback_once("Kineto's trace has no traceName key; completeness checked by its closing brackets")
        return True
    return False


def rename_trace(tail: bytes, written_path: str, final_json: bytes) -> bytes:
    """Point ``traceName`` at the final file instead of the path Kineto was given."""
    old = b'"' + os.fsencode(written_path) + b'"'  # as Kineto wrote it: the path's bytes
    if old not in tail:
        if TRACE_NAME_KEY in tail:
            log_fallback_once("Kineto's traceName is not the path it was given; left unchanged")
        return tail
    return tail.replace(old, final_json, 1)


_EVENTS_OPEN = re.compile(rb'"traceEvents"\s*:\s*\[')
# After the events: members whose values are scalars or lists of strings (Kineto: traceName, maybe
# displayTimeUnit / baseTimeNanoseconds, and the "ERROR" / "WARNING" lists of messages it logged — torch
# 2.7 on a host without a GPU writes `"ERROR": ["… gpuGetDeviceCount failed …"]`).
_STRING = rb'"(?:[^"\\]|\\.)*"'
_STRINGS = rb'\[\s*(?:' + _STRING + rb'\s*(?:,\s*' + _STRING + rb'\s*)*)?\]'
_VALUE = rb'(?:' + _STRING + rb'|[-+0-9.eE]+|true|false|null|' + _STRINGS + rb')'
# Kineto writes traceName's path unescaped (a `"` or `\` in a directory name): to the end of its line,
# until ``rename_trace`` puts the final name there, JSON-escaped.
_TRACE_NAME_RAW = re.escape(TRACE_NAME_KEY) + rb'\s*:\s*"[^\n]*"'
_MEMBER = rb'(?:' + _TRACE_NAME_RAW + rb'|' + _STRING + rb'\s*:\s*' + _VALUE + rb')'
_AFTER_EVENTS = re.compile(rb'\]\s*(?:,\s*' + _MEMBER + rb'\s*)*\}\s*\Z')
_TAIL_SEARCH = 64 << 10


def split_trace(data: bytes) -> tuple[bytes, bytes, bytes]:
    """Kineto's JSON as (everything through ``"traceEvents": [``, the events, the rest from the ``]`` that
    closes them), to join the events of several profiles of one process under one head (docs/DESIGN.md §5.1).
    IncompleteTraceError for any other layout: the closing ``]`` is looked for in the last 64 KiB only, and
    must be followed by keys with scalar or string-list values, ``traceName`` among them, and preceded by an
    event's ``}``."""
    opened = _EVENTS_OPEN.search(data)
    if opened is None:
        raise IncompleteTraceError("Kineto's JSON has no traceEvents array")
    start, pos = max(opened.end(), len(data) - _TAIL_SEARCH), len(data)
    while (pos := data.rfind(b"]", start, pos)) >= 0:
        if _AFTER_EVENTS.match(data, pos) and TRACE_NAME_KEY in data[pos:]:
            events = data[opened.end() : pos].strip()
            if events and not events.endswith(b"}"):
                continue  # the ']' of a list after the events (Kineto's "ERROR"): the events close further left
            return data[: opened.end()], events, data[pos:]
    raise IncompleteTraceError("Kineto's JSON does not end with its traceEvents array, then traceName and "
                               "other keys with scalar or string-list values")
