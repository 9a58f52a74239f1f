"""sglang-capture-trace: persist SGLang CUDA-graph capture profiles as Chrome/Perfetto traces.

Importing this package imports nothing: the public names below are loaded on first use (module
``__getattr__``), so ``import mixins.analysis`` and the analyzer CLI never pay for wrapt or torch, and
the start-up hook can import ``mixins.settings`` cheaply (docs/DESIGN.md §4).
"""

from __future__ import annotations

from importlib import import_module

TYPE_CHECKING = False  # not typing's: every ``capture-trace`` run imports this package, most never typing
if TYPE_CHECKING:
    from typing import Any

    from mixins.capture_trace import CaptureTraceMixin, with_capture_trace
    from mixins.export import export_cuda_graph_capture_trace, wait_for_exports

_LAZY = {
    "CaptureTraceMixin": "mixins.capture_trace",
    "with_capture_trace": "mixins.capture_trace",
    "export_cuda_graph_capture_trace": "mixins.export",
    "wait_for_exports": "mixins.export",
}

__all__ = ["CaptureTraceMixin", "export_cuda_graph_capture_trace", "wait_for_exports", "with_capture_trace"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mixins' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
