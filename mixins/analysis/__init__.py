"""Offline analyzer for capture traces: ``ls``, ``summary``, ``diff``, ``check``, ``attribute`` (no torch import).

Pipeline (docs/DESIGN.md §7): ``read/reader`` (streaming JSON, clean errors) -> ``model/timeline`` (the
one per-trace model, classified by ``model/events``) -> its queries: ``model/windows`` (capture windows,
the one namer), ``model/records`` (the op-sequence record of ``summary``/``diff``/``check``), ``time``'s
phases; ``commands/*`` one module per command, ``serialise`` (one JSON path), ``render`` (tables),
``cli`` (dispatch only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mixins.analysis.read.errors import TraceError

if TYPE_CHECKING:
    from mixins.analysis.model.records import TraceRecord, load_record

__all__ = ["TraceError", "TraceRecord", "load_record"]


def __getattr__(name: str) -> Any:
    """``records`` on first use: ``attribute`` and ``time`` never build a record (start-up time)."""
    if name in ("TraceRecord", "load_record"):
        from mixins.analysis.model import records

        return getattr(records, name)
    raise AttributeError(f"module 'mixins.analysis' has no attribute {name!r}")
