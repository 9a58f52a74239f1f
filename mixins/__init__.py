"""sglang-capture-trace: persist SGLang CUDA-graph capture profiles as Chrome/Perfetto traces.

Importing this package is cheap (no torch, no sglang): everything heavy is imported when a trace is
actually exported.
"""

from mixins.capture_trace import CaptureTraceMixin, with_capture_trace
from mixins.export import export_cuda_graph_capture_trace, wait_for_exports

__all__ = [
    "CaptureTraceMixin",
    "export_cuda_graph_capture_trace",
    "wait_for_exports",
    "with_capture_trace",
]
