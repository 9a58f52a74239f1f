"""Offline analyzer for capture traces: ``ls``, ``summary``, ``diff``, ``check`` (no torch import).

Modules: ``reader`` (streaming JSON, clean errors), ``records`` (identity, segments, signatures,
op -> kernel links), ``compare`` (diff/check), ``render`` (rich tables / JSON), ``cli`` (sub-commands).
"""

from mixins.analysis.reader import TraceError
from mixins.analysis.records import TraceRecord, load_record

__all__ = ["TraceError", "TraceRecord", "load_record"]
