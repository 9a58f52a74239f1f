"""What a trace event is: Kineto's categories and call names (CUDA and HIP alike) classified once, as
data; the model stores ``category`` and ``call_kind``, nobody else asks the strings."""

from __future__ import annotations

import re
from typing import Any, TypeVar

from mixins.analysis.read.reader import Event, SlimEvent
from mixins.formats import BS, SIZE, TOKENS, VARIANT, label_size, label_text, mentions_size, segment_label
from mixins.formats import label_variant as segment_variant

_E = TypeVar("_E", Event, SlimEvent)

__all__ = [
    "category", "call_kind",
    "CAT_OTHER", "CAT_PYTHON", "CAT_CPU_OP", "CAT_RUNTIME", "CAT_ANNOTATION", "CAT_GPU_OTHER",
    "CAT_KERNEL", "CAT_MEMCPY", "CAT_MEMSET",
    "C_LAUNCH", "C_GRAPH", "C_COPY", "C_SET", "C_BEGIN", "C_END", "C_INSTANTIATE", "C_OTHER",
    "D_KERNEL", "D_COPY", "D_SET", "NODE_KIND_OF_CALL", "DEVICE_CATEGORIES",
    "is_flow", "module_events", "module_name", "segment_marker", "segment_variant", "SIZE", "vllm_label",
    "ident", "ID_LIMIT", "may_be_segment_marker", "may_be_hint",
]

# -- the one classification ---------------------------------------------------------------------------
# What an event's category is, decided once per distinct category string (``category``). The order
# matters to the timeline's bulk filters: CPU-side kinds between PYTHON and GPU_OTHER, device work from
# KERNEL on (``CAT_KERNEL + D_*``).
(CAT_OTHER, CAT_PYTHON, CAT_CPU_OP, CAT_RUNTIME, CAT_ANNOTATION,
 CAT_GPU_OTHER, CAT_KERNEL, CAT_MEMCPY, CAT_MEMSET) = range(9)
# What a runtime / driver call is, by its name (``call_kind``).
C_LAUNCH, C_GRAPH, C_COPY, C_SET, C_BEGIN, C_END, C_INSTANTIATE, C_OTHER = range(8)
# Device work (``CAT_KERNEL + D_*``), and the node kind a captured call becomes.
D_KERNEL, D_COPY, D_SET = range(3)
NODE_KIND_OF_CALL = {C_LAUNCH: D_KERNEL, C_COPY: D_COPY, C_SET: D_SET}
DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")  # CAT_KERNEL + D_KERNEL / D_COPY / D_SET
_CATEGORIES = {
    "cpu_op": CAT_CPU_OP,
    "python_function": CAT_PYTHON,
    "user_annotation": CAT_ANNOTATION,  # a record_function range on the CPU (our capture::… segments)
    **{name: CAT_KERNEL + d for d, name in enumerate(DEVICE_CATEGORIES)},
}
# A call's kind by the first part of its name found, CUDA and HIP alike (first match wins: graph
# launches before kernel launches).
_CALLS = (
    ("GraphLaunch", C_GRAPH),  # cudaGraphLaunch / hipGraphLaunch / cuGraphLaunch: replays a whole graph
    ("LaunchKernel", C_LAUNCH),  # cudaLaunchKernel[ExC], cuLaunchKernel, hip[Ext]ModuleLaunchKernel …
    ("LaunchCooperativeKernel", C_LAUNCH),  # cudaLaunchCooperativeKernel[MultiDevice], cu…, hip…: grid-synced
    ("Memcpy", C_COPY),  # cudaMemcpyAsync, hipMemcpyWithStream …: a memcpy node when captured
    ("Memset", C_SET),  # cudaMemsetAsync, hipMemsetD32Async …: a memset node when captured
    ("StreamBeginCapture", C_BEGIN),  # cudaStreamBeginCapture[_v2] / hipStreamBeginCapture: a window opens
    ("StreamEndCapture", C_END),
    ("GraphInstantiate", C_INSTANTIATE),  # cudaGraphInstantiate[WithFlags], hipGraphInstantiate…, cu…
    ("GraphUpload", C_INSTANTIATE),  # the upload that may follow instantiation
)

# vLLM's ``capture_<bs>[_<mode>]``; modes have underscores (FULL_DECODE_ONLY, FULL_AND_PIECEWISE)
FOREIGN_SEGMENT = re.compile(r"^capture_(?P<bs>" + SIZE + r")(?:_(?P<variant>[A-Za-z0-9]+(?:_[A-Za-z0-9]+)*))?$")
_MODULE_SUFFIX = re.compile(r"_\d+$")
_MODULE_PREFIX = "nn.Module: "


def is_flow(ev: Event, cat: str) -> bool:
    """An ``ac2g`` flow event pairing a launch (``s``) with its device work (``f``)."""
    return cat == "ac2g" or (ev.ph in ("s", "f") and ev.id is not None and cat.startswith("ac2g"))


def module_events(events: list[_E]) -> list[_E]:
    """The ``nn.Module: …`` ``python_function`` events of a slice (one comprehension: they are most of a
    capture's events)."""
    prefix = _MODULE_PREFIX
    return [
        ev for ev in events if ev.cat == "python_function" and (n := ev.name) is not None and n.startswith(prefix)
    ]


def module_name(name: str) -> str:
    """``nn.Module: Linear_3`` -> ``nn.Module: Linear`` (the instance suffix removed, as TraceLens does)."""
    return _MODULE_SUFFIX.sub("", name)


def segment_marker(name: str) -> tuple[str, int | None, bool] | None:
    """(label, batch size, ours?) if ``name`` is a capture segment range (``capture::bs=8``, vLLM's
    ``capture_32_FULL``, a token count: docs/DESIGN.md §7.4), else None."""
    label = segment_label(name)  # ours: the grammar is mixins.formats'
    if label is not None:
        size = label_size(label)
        return label, size[1] if size is not None and size[0] == BS else None, True
    m = FOREIGN_SEGMENT.match(name)
    if m:
        return vllm_label(int(m["bs"]), m["variant"]), None, False
    return None


def vllm_label(tokens: int, variant: str | None) -> str:
    """The segment label of a vLLM capture size (a token count)."""
    return label_text([(TOKENS, tokens), *([(VARIANT, variant)] if variant else [])])


def may_be_segment_marker(name: str) -> bool:
    """False for names :func:`segment_marker` certainly refuses: such ranges are not kept."""
    return name.startswith("capture")


def may_be_hint(name: str) -> bool:
    """False for ranges ``attribute_match._Hints`` can never read a replay hint from."""
    return mentions_size(name) or "runner=" in name or name.startswith("execute_")


def category(cat: str) -> int:
    """What an event category is (``CAT_*``); other ``gpu_*`` records are device work of their own."""
    got = _CATEGORIES.get(cat)
    if got is not None:
        return got
    if "runtime" in cat or "driver" in cat:
        return CAT_RUNTIME
    return CAT_GPU_OTHER if cat.startswith("gpu_") else CAT_OTHER


def call_kind(name: str) -> int:
    """What a runtime / driver call is (``C_*``), by its name."""
    return next((kind for part, kind in _CALLS if part in name), C_OTHER)


ID_LIMIT = 1 << 62  # ids (correlation, External id, flow id, graph node id) outside [0, this) are absent


def ident(v: Any) -> int:
    """An id as stored in an ``array("q")`` column: -1 when absent, not an int, or out of range."""
    return v if type(v) is int and 0 <= v < ID_LIMIT else -1
