"""Offline analyzer for capture traces (no torch import): ``read`` -> ``model`` -> ``commands/*``, one module
per command; the pipeline and each module's part: docs/DESIGN.md §7."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mixins.analysis.read.safe_io import TraceError

if TYPE_CHECKING:
    from mixins.analysis.model.records import TraceRecord, load_record

__all__ = ["TraceError", "TraceRecord", "load_record"]


def __getattr__(name: str) -> Any:
    """``records`` on first use: ``attribute`` and ``time`` never build a record (start-up time)."""
    if name in ("TraceRecord", "load_record"):
        from mixins.analysis.model import records

        return getattr(records, name)
    raise AttributeError(f"module 'mixins.analysis' has no attribute {name!r}")
