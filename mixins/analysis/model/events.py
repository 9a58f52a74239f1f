"""What a trace event is: named predicates over Kineto's categories and names, in one place.

Why one home: CUDA and HIP name the same things differently (``cudaLaunchKernel`` /
``hipExtModuleLaunchKernel``, ``cudaStreamBeginCapture`` / ``hipStreamBeginCapture``), and every
consumer (records, attribute, time) must agree on what counts as a launch, a graph launch, a kernel,
a capture window or one of our segment markers.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

from mixins.analysis.read.reader import Event, SlimEvent

_E = TypeVar("_E", Event, SlimEvent)

__all__ = [
    "category",
    "call_kind",
    "CAT_OTHER", "CAT_PYTHON", "CAT_CPU_OP", "CAT_RUNTIME", "CAT_ANNOTATION", "CAT_GPU_OTHER",
    "CAT_KERNEL", "CAT_MEMCPY", "CAT_MEMSET",
    "C_LAUNCH", "C_GRAPH", "C_COPY", "C_SET", "C_BEGIN", "C_END", "C_INSTANTIATE", "C_OTHER",
    "D_KERNEL", "D_COPY", "D_SET", "NODE_KIND_OF_CALL", "DEVICE_CATEGORIES",
    "K_OTHER",
    "K_CPU_OP",
    "K_LAUNCH",
    "K_GRAPH",
    "K_KERNEL",
    "K_RUNTIME",
    "K_GPU",
    "K_ANNOT",
    "K_FLOW_F",
    "kind_of",
    "is_cpu_op",
    "is_kernel",
    "is_gpu_copy",
    "is_gpu_activity",
    "is_runtime",
    "is_launch",
    "is_graph_launch",
    "is_kernel_launch",
    "is_copy_call",
    "is_set_call",
    "is_gpu_memcpy",
    "is_gpu_memset",
    "is_capture_begin",
    "is_capture_end",
    "is_graph_instantiate",
    "is_annotation",
    "is_flow",
    "is_module",
    "module_events",
    "module_name",
    "segment_marker",
    "segment_variant",
    "OUR_SEGMENT",
    "FOREIGN_SEGMENT",
    "nan_ts",
    "ident",
    "ID_LIMIT",
    "may_be_segment_marker",
    "may_be_hint",
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
# The op-sequence record's per-event kinds (one byte each), derived from the two above (``kind_of``).
K_OTHER, K_CPU_OP, K_LAUNCH, K_GRAPH, K_KERNEL, K_RUNTIME, K_GPU, K_ANNOT, K_FLOW_F = range(9)

OUR_SEGMENT = re.compile(r"^capture::(?P<label>.+)$")
# vLLM's ``capture_<bs>[_<mode>]``; modes have underscores (FULL_DECODE_ONLY, FULL_AND_PIECEWISE)
# A batch size or token count read from a label: at most this many digits (fits 64 bits; int() of a
# 4,301-digit string raises). Every size pattern uses it; a longer one stays plain text.
SIZE = r"\d{1,18}(?!\d)"
FOREIGN_SEGMENT = re.compile(r"^capture_(?P<bs>" + SIZE + r")(?:_(?P<variant>[A-Za-z0-9]+(?:_[A-Za-z0-9]+)*))?$")
_BS = re.compile(r"(?:^|,)bs=(" + SIZE + r")(?:,|$)")
_VARIANT = re.compile(r"(?:^|,)variant=([^,#]+)")
_MODULE_SUFFIX = re.compile(r"_\d+$")
_MODULE_PREFIX = "nn.Module: "


def is_cpu_op(cat: str) -> bool:
    return cat == "cpu_op"


def is_kernel(cat: str) -> bool:
    """A kernel that ran on the device (``kernel``)."""
    return cat == DEVICE_CATEGORIES[D_KERNEL]


def is_gpu_copy(cat: str) -> bool:
    """A memcpy / memset the device did: GPU time of its own, a row of its own."""
    return cat in ("gpu_memcpy", "gpu_memset")


def is_gpu_activity(cat: str) -> bool:
    """Other device-side records (memcpy, memset, gpu_user_annotation …), linked like kernels."""
    return cat.startswith("gpu_")


def is_runtime(cat: str) -> bool:
    """A CUDA/HIP runtime or driver call (carries the ``correlation`` its device work shares)."""
    return "runtime" in cat or "driver" in cat


def is_graph_launch(name: str) -> bool:
    """``cudaGraphLaunch`` / ``hipGraphLaunch`` (and ``cuGraphLaunch``): replays a whole graph."""
    return "GraphLaunch" in name


def is_kernel_launch(name: str) -> bool:
    """One kernel launch (``cudaLaunchKernel[ExC]``, ``cuLaunchKernel``, ``hip[Ext]ModuleLaunchKernel`` …)."""
    return "LaunchKernel" in name


def is_launch(name: str) -> bool:
    """A kernel launch or a graph launch."""
    return is_kernel_launch(name) or is_graph_launch(name)


def is_copy_call(name: str) -> bool:
    """A runtime memcpy (``cudaMemcpyAsync``, ``hipMemcpyWithStream`` …): a memcpy node when captured."""
    return "Memcpy" in name


def is_set_call(name: str) -> bool:
    """A runtime memset (``cudaMemsetAsync``, ``hipMemsetD32Async`` …): a memset node when captured."""
    return "Memset" in name


def is_gpu_memcpy(cat: str) -> bool:
    return cat == DEVICE_CATEGORIES[D_COPY]


def is_gpu_memset(cat: str) -> bool:
    return cat == DEVICE_CATEGORIES[D_SET]


def is_capture_begin(name: str) -> bool:
    """``cudaStreamBeginCapture[_v2]`` / ``hipStreamBeginCapture``: a capture window opens."""
    return "StreamBeginCapture" in name


def is_capture_end(name: str) -> bool:
    return "StreamEndCapture" in name


def is_graph_instantiate(name: str) -> bool:
    """Turning a captured graph into an executable one: ``cudaGraphInstantiate[WithFlags]``,
    ``hipGraphInstantiate…``, ``cuGraphInstantiate…``, and the ``…GraphUpload`` that may follow."""
    return "GraphInstantiate" in name or "GraphUpload" in name


def is_annotation(cat: str) -> bool:
    """A ``record_function`` range on the CPU (our ``capture::…`` segments are these)."""
    return cat == "user_annotation"


def is_flow(ev: Event, cat: str) -> bool:
    """An ``ac2g`` flow event pairing a launch (``s``) with its device work (``f``)."""
    return cat == "ac2g" or (ev.ph in ("s", "f") and ev.id is not None and cat.startswith("ac2g"))


def is_module(cat: str, name: str) -> bool:
    """A ``python_function`` event for an ``nn.Module`` call (``nn.Module: Linear_3``)."""
    return cat == "python_function" and name.startswith(_MODULE_PREFIX)


def module_events(events: list[_E]) -> list[_E]:
    """The :func:`is_module` events of a slice, in order: one comprehension, because nearly all of a
    capture's events are ``python_function`` calls and a Python-level test per event is its main cost."""
    prefix = _MODULE_PREFIX
    return [
        ev for ev in events if ev.cat == "python_function" and (n := ev.name) is not None and n.startswith(prefix)
    ]


def module_name(name: str) -> str:
    """``nn.Module: Linear_3`` -> ``nn.Module: Linear`` (the instance suffix removed, as TraceLens does)."""
    return _MODULE_SUFFIX.sub("", name)


def segment_marker(name: str) -> tuple[str, int | None, bool] | None:
    """(label, batch size, ours?) if ``name`` is a capture segment range, else None.

    Ours: ``capture::bs=8`` (any label after ``capture::``). Foreign: vLLM-style ``capture_32_FULL``.
    """
    m = OUR_SEGMENT.match(name)
    if m:
        label = m["label"]
        bs = _BS.search(label)
        return label, int(bs.group(1)) if bs else None, True
    m = FOREIGN_SEGMENT.match(name)
    if m:
        label = f"bs={m['bs']}" + (f",variant={m['variant']}" if m["variant"] else "")
        return label, int(m["bs"]), False
    return None


def may_be_segment_marker(name: str) -> bool:
    """False for names :func:`segment_marker` certainly refuses (both patterns start with ``capture``):
    a cheap test, so ranges that can never be segments are not kept."""
    return name.startswith("capture")


def may_be_hint(name: str) -> bool:
    """False for ranges ``attribute`` can never read a replay hint from (``…bs=N…``, ``…tokens=N…``,
    ``runner=…``, vLLM's ``execute_N_…``: the patterns of ``attribute._Hints`` all need one of these)."""
    return "bs=" in name or "tokens=" in name or "runner=" in name or name.startswith("execute_")


def segment_variant(label: str) -> str | None:
    """The ``variant=`` of a segment label (``bs=8,variant=FULL`` -> ``FULL``), None when it has none."""
    m = _VARIANT.search(label)
    return m.group(1) if m else None


def category(cat: str) -> int:
    """What an event category is (``CAT_*``): every model asks this, never the strings themselves."""
    if is_cpu_op(cat):
        return CAT_CPU_OP
    if cat == "python_function":
        return CAT_PYTHON
    if is_runtime(cat):
        return CAT_RUNTIME
    if is_kernel(cat):
        return CAT_KERNEL
    if is_gpu_memcpy(cat):
        return CAT_MEMCPY
    if is_gpu_memset(cat):
        return CAT_MEMSET
    if is_annotation(cat):
        return CAT_ANNOTATION
    return CAT_GPU_OTHER if is_gpu_activity(cat) else CAT_OTHER


def call_kind(name: str) -> int:
    """What a runtime / driver call is (``C_*``), by its name."""
    if is_graph_launch(name):
        return C_GRAPH
    if is_kernel_launch(name):
        return C_LAUNCH
    if is_copy_call(name):
        return C_COPY
    if is_set_call(name):
        return C_SET
    if is_capture_begin(name):
        return C_BEGIN
    if is_capture_end(name):
        return C_END
    return C_INSTANTIATE if is_graph_instantiate(name) else C_OTHER


_RECORD_KIND = {
    CAT_CPU_OP: K_CPU_OP, CAT_KERNEL: K_KERNEL, CAT_ANNOTATION: K_ANNOT,
    CAT_MEMCPY: K_GPU, CAT_MEMSET: K_GPU, CAT_GPU_OTHER: K_GPU,
}


def kind_of(ev: Event, cat: str) -> int:
    """The one-byte kind the op-sequence record stores for ``ev`` (from :func:`category` and
    :func:`call_kind`; ac2g flows, which only that record reads, by :func:`is_flow`)."""
    c = category(cat)
    if c == CAT_RUNTIME:
        call = call_kind(ev.name or "")
        return K_GRAPH if call == C_GRAPH else K_LAUNCH if call == C_LAUNCH else K_RUNTIME
    if c == CAT_OTHER or c == CAT_PYTHON:
        return (K_FLOW_F if ev.ph == "f" else K_OTHER) if is_flow(ev, cat) else K_OTHER
    return _RECORD_KIND[c]


def nan_ts(ts: Any) -> float:
    """A timestamp, NaN when the event had none (compares false with everything)."""
    return float("nan") if ts is None else ts


ID_LIMIT = 1 << 62  # ids (correlation, External id, flow id, graph node id) outside [0, this) are absent


def ident(v: Any) -> int:
    """An id as stored in an ``array("q")`` column: -1 when absent, not an int, or out of range."""
    return v if type(v) is int and 0 <= v < ID_LIMIT else -1
