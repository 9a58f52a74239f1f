"""The formats the exporter writes and the analyzer reads, one home each (docs/DESIGN.md §7.6): trace file
names and their folder, the segment label's grammar and units, ``time``'s phases. Standard library only: the
analyzer imports it and must never import the exporter, wrapt or the sglang targets table.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = [
    "TRACE_PREFIX", "TRACE_SUFFIX", "SUBDIR", "STAGING_PREFIX", "TRACE_NAME", "SHAPE_UNITS", "rank_tag",
    "MEMORY_PREFIX", "MEMORY_SUFFIX", "MEMORY_NAME", "BS", "TOKENS", "SEGMENT_PREFIX", "VARIANT", "UNKNOWN_SHAPE",
    "SIZE", "segment_name", "label_text", "segment_label", "label_size", "label_variant", "mentions_size", "size_hint",
    "PHASES",
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
BS, TOKENS = "bs", "tokens"
SHAPE_UNITS = (BS, TOKENS)

# -- the segment label: ``capture::bs=8,variant=FULL`` ------------------------------------------------
# A shape's capture is a ``record_function`` range named SEGMENT_PREFIX + label; the label is
# ``name=value`` fields joined by commas, the size first (``{unit}={n}``, a unit of SHAPE_UNITS), then the
# arguments that tell two captures of one size apart (``variant=``, ``stream=``, ``attention=``, ...).
# The analyzer shows the label (a repeated one gets ``#2``, ``#3``: ``segments._unique_labels``).
SEGMENT_PREFIX = "capture::"
VARIANT = "variant"  # the field sglang's ``variant_label`` argument is written as (``sglang_targets``)
# The one label without a size: a lazy capture whose shape could not be read (``capture_trace.lazy_label``).
UNKNOWN_SHAPE = SEGMENT_PREFIX + "graph"
# A batch size or token count read from a label: at most this many digits (fits 64 bits; int() of a
# 4,301-digit string raises). Every size pattern uses it; a longer one stays plain text.
SIZE = r"\d{1,18}(?!\d)"
_SEGMENT = re.compile("^" + re.escape(SEGMENT_PREFIX) + r"(?P<label>.+)$")
_SIZE_FIELD = re.compile(r"(?:^|,)(?P<unit>" + "|".join(SHAPE_UNITS) + r")=(?P<n>" + SIZE + r")(?=,|#|$)")
_VARIANT_FIELD = re.compile(r"(?:^|,)" + VARIANT + r"=([^,#]+)")


def label_text(fields: Iterable[tuple[str, object]]) -> str:
    """``bs=8,variant=FULL`` from ``(("bs", 8), ("variant", "FULL"))``: a label, without the prefix."""
    return ",".join(f"{name}={value}" for name, value in fields)


def segment_name(fields: Iterable[tuple[str, object]]) -> str:
    """``capture::bs=8,variant=FULL``: the name of a shape's range, as the exporter writes it."""
    return SEGMENT_PREFIX + label_text(fields)


def segment_label(name: str) -> str | None:
    """The label of one of our segment ranges (``bs=8`` for ``capture::bs=8``), None for any other name."""
    m = _SEGMENT.match(name)
    return m["label"] if m else None


def label_size(label: str) -> tuple[str, int] | None:
    """``("bs", 8)`` for ``bs=8,variant=x``, ``("tokens", 8192)`` for ``tokens=8192,prefix_num_chunks=2``."""
    m = _SIZE_FIELD.search(label)
    return (m["unit"], int(m["n"])) if m else None


def label_variant(label: str) -> str | None:
    """The ``variant=`` of a label (``bs=8,variant=FULL`` -> ``FULL``), None when it has none."""
    m = _VARIANT_FIELD.search(label)
    return m.group(1) if m else None


def size_hint(unit: str) -> re.Pattern[str]:
    """``{unit}=N`` anywhere in a range's name, after a non-alphanumeric or at its start: how ``attribute``
    reads a replay's shape from a range around it (ours, or another tool's with the same field)."""
    return re.compile(r"(?:^|[^A-Za-z0-9])" + re.escape(unit) + "=(" + SIZE + ")")


def mentions_size(name: str) -> bool:
    """False for names no :func:`size_hint` pattern can match (a cheap test before the patterns)."""
    return any(unit + "=" in name for unit in SHAPE_UNITS)


# -- ``time``: the phases a segment's wall time is cut into, the order its JSON and report stack them ---
PHASES = ("warmup", "capture", "instantiate", "other")
