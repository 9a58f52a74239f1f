"""The formats the exporter writes and the analyzer reads: trace file names, their folder, the units of
per-shape labels. A module of plain constants, so the analyzer (which must start fast and never import
the exporter, wrapt or the sglang targets table) and the exporter share one definition of each.
"""

from __future__ import annotations

import re

__all__ = [
    "TRACE_PREFIX", "TRACE_SUFFIX", "SUBDIR", "STAGING_PREFIX", "TRACE_NAME", "SHAPE_UNITS", "rank_tag",
    "MEMORY_PREFIX", "MEMORY_SUFFIX", "MEMORY_NAME",
]

TRACE_PREFIX = "cuda_graph_capture-"
TRACE_SUFFIX = ".json.gz"
SUBDIR = "graph_capture_profile"  # under SGLANG_TORCH_PROFILER_DIR
# An export's staging directory, beside the traces (``mixins.output_dir``; ``ls`` and ``clean`` name it too)
STAGING_PREFIX = ".capture-trace-tmp."


def rank_tag(tp_rank: int, pp_rank: int, pp_size: int, dp_rank: int | None = None) -> str:
    """Who wrote a file, as its name says it: ``-TP-{tp}``, ``-PP-{pp}`` with pipeline stages, ``-DP-{dp}`` for
    a data-parallel replica (``dp_rank`` is None unless the process is one of several replicas, so a
    server without them keeps the upstream name)."""
    tag = f"-TP-{tp_rank}"
    if pp_size > 1:
        tag += f"-PP-{pp_rank}"
    if dp_rank is not None:
        tag += f"-DP-{dp_rank}"
    return tag


# The parse of ``rank_tag`` ...
_RANKS = r"-TP-(?P<tp>\d+)(?:-PP-(?P<pp>\d+))?(?:-DP-(?P<dp>\d+))?"
# ... and of what ``naming.trace_stem`` + the capture numbers write (a plain ``.json`` is accepted for
# traces someone decompressed).
TRACE_NAME = re.compile(
    "^" + re.escape(TRACE_PREFIX) + r"(?P<runner>.+?)" + _RANKS + r"(?:-(?P<n>\d+))?\.json(?:\.gz)?$"
)
# The CUDA memory snapshot of one runner and rank, beside its trace (``mixins.memory_snapshot``).
MEMORY_PREFIX = "cuda_graph_memory-"
MEMORY_SUFFIX = ".pickle"
MEMORY_NAME = re.compile(
    "^" + re.escape(MEMORY_PREFIX) + r"(?P<runner>.+?)" + _RANKS + r"(?:-(?P<n>\d+))?" + re.escape(MEMORY_SUFFIX) + "$"
)
# What a per-shape label's size counts: ``capture::bs=8`` (decode runners), ``capture::tokens=8192``
# (prefill / piecewise / vision runners); ``mixins.sglang_targets`` rows name one each.
SHAPE_UNITS = ("bs", "tokens")
