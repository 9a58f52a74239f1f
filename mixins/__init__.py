"""sglang-capture-trace: persist SGLang CUDA-graph capture profiles as Chrome/Perfetto traces.

Importing this package is cheap (no torch, no sglang, not even wrapt): the public names are
resolved on first use (PEP 562), so ``capture-trace`` analysis commands, which never export, do
not pay ~0.3 s of start-up for the exporter's imports; everything heavy is imported when a trace
is actually exported.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mixins.capture_trace import CaptureTraceMixin, with_capture_trace
    from mixins.export import export_cuda_graph_capture_trace, wait_for_exports

__all__ = [
    "CaptureTraceMixin",
    "export_cuda_graph_capture_trace",
    "wait_for_exports",
    "with_capture_trace",
]

_HOME = {
    "CaptureTraceMixin": "mixins.capture_trace",
    "with_capture_trace": "mixins.capture_trace",
    "export_cuda_graph_capture_trace": "mixins.export",
    "wait_for_exports": "mixins.export",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'mixins' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # resolved once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
