"""Offline analyzer for capture traces: ``ls``, ``summary``, ``diff``, ``check``, ``attribute`` (no torch import).

Pipeline: ``reader`` (streaming JSON, clean errors) -> ``events`` (named predicates) -> ``collect``
(compact arrays) -> ``segments`` -> ``link`` (op -> launch -> kernel) -> ``model`` (the per-trace record),
run by ``records``; ``compare`` (diff/check), ``serialise`` (one JSON path), ``render`` (rich tables),
``cli`` (sub-commands). Attribution: ``timeline`` (intervals, calls, device work) -> ``windows``
(capture side) and ``attribute`` (replay side), ``attribute_cmd`` (its sub-command), ``annotate``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mixins.analysis.read.reader import TraceError

if TYPE_CHECKING:
    from mixins.analysis.model.records import TraceRecord, load_record

__all__ = ["TraceError", "TraceRecord", "load_record"]


def __getattr__(name: str) -> Any:
    """``records`` on first use: ``attribute`` and ``time`` never build a record (start-up time)."""
    if name in ("TraceRecord", "load_record"):
        from mixins.analysis.model import records

        return getattr(records, name)
    raise AttributeError(f"module 'mixins.analysis' has no attribute {name!r}")
