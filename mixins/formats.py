"""The formats the exporter writes and the analyzer reads: trace file names, their folder, the units of
per-shape labels. A module of plain constants, so the analyzer (which must start fast and never import
the exporter, wrapt or the sglang targets table) and the exporter share one definition of each.
"""

from __future__ import annotations

import re

__all__ = ["TRACE_PREFIX", "TRACE_SUFFIX", "SUBDIR", "STAGING_PREFIX", "TRACE_NAME", "SHAPE_UNITS"]

TRACE_PREFIX = "cuda_graph_capture-"
TRACE_SUFFIX = ".json.gz"
SUBDIR = "graph_capture_profile"  # under SGLANG_TORCH_PROFILER_DIR
# An export's staging directory, beside the traces (``mixins.output_dir``; ``ls`` and ``clean`` name it too)
STAGING_PREFIX = ".capture-trace-tmp."
# The parse of what ``naming.trace_stem`` + the capture numbers write (a plain ``.json`` is accepted for
# traces someone decompressed).
TRACE_NAME = re.compile(
    "^" + re.escape(TRACE_PREFIX)
    + r"(?P<runner>.+?)-TP-(?P<tp>\d+)(?:-PP-(?P<pp>\d+))?(?:-(?P<n>\d+))?\.json(?:\.gz)?$"
)
# What a per-shape label's size counts: ``capture::bs=8`` (decode runners), ``capture::tokens=8192``
# (prefill / piecewise / vision runners); ``mixins.sglang_targets`` rows name one each.
SHAPE_UNITS = ("bs", "tokens")
