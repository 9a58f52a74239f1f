"""From a stream of events to a per-trace record: identity, segments, op signatures, op -> kernel links.

The pipeline: ``reader`` (slices of typed events) -> ``collect`` (arrays, classified by ``events``)
-> ``segments`` (capture ranges) -> ``link`` (op -> launch -> kernel) -> ``model.TraceRecord``.
This module runs it; the names other modules and tests import are re-exported from here.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable

from mixins.analysis.model import events as E
from mixins.analysis.model.collect import Collector
from mixins.analysis.model.identity import Identity, identity_from_name, identity_of, is_trace_name
from mixins.analysis.model.link import Links, link, name_captured_launches
from mixins.analysis.model.record import (
    ALL,
    OUTSIDE,
    CompactTrace,
    Kernel,
    Op,
    Segment,
    Signature,
    TraceRecord,
    compact,
)
from mixins.analysis.model.segments import assigner, segments_of
from mixins.analysis.read.reader import TraceError, compact_json, open_trace
from mixins.analysis.serialise import identity_json, json_value, op_json, summarize

__all__ = [
    "Identity",
    "Kernel",
    "Signature",
    "Op",
    "Segment",
    "TraceRecord",
    "OUTSIDE",
    "ALL",
    "identity_from_name",
    "identity_of",
    "load_record",
    "is_trace_name",
    "summarize",
    "compact",
    "CompactTrace",
    "op_json",
    "identity_json",
    "json_value",
]


def _signatures(c: Collector) -> list[Signature]:
    """Normalise each distinct raw (name, dims, types, concrete) once; equal signatures share one object."""
    cache: dict[bytes, str] = {}
    sig_list: list[Signature] = [Signature("", "", "", "")] * len(c.raw_sigs)
    canon: dict[Signature, Signature] = {}
    for (name, dims, types, concrete), sid in c.raw_sigs.items():
        sig = Signature(
            name or "", compact_json(dims, cache), compact_json(types, cache), compact_json(concrete, cache)
        )
        sig_list[sid] = canon.setdefault(sig, sig)
    return sig_list


def _segment_index(c: Collector, segs: list[Segment], source: str) -> array:
    """Segment index per event by time and process; ``len(segs)`` stands for (outside)."""
    n = len(c.kind)
    seg_of = array("i", bytes(4 * n)) if n else array("i")
    if source in ("filename", "all"):
        return seg_of  # one segment holds everything: index 0
    find = assigner(segs, c.pids)
    outside = len(segs)
    ts_a, pid_a = c.ts, c.pid
    for i in range(n):
        j = find(ts_a[i], pid_a[i])
        seg_of[i] = outside if j < 0 else j
    return seg_of


def _count_kinds(c: Collector, seg_of: array, all_segs: list[Segment]) -> None:
    kinds = c.kind
    for i in range(len(kinds)):
        s = all_segs[seg_of[i]]
        s.events += 1
        k = kinds[i]
        if k == E.K_KERNEL:
            s.kernels += 1
        elif k == E.K_LAUNCH:
            s.launches += 1
        elif k == E.K_GRAPH:
            s.graph_launches += 1


def _place_ops(c: Collector, seg_of: array, all_segs: list[Segment], links: Links) -> None:
    """Each op goes to its segment with what it launched, in time order (file order breaks ties)."""
    sig_list = _signatures(c)
    ts_a = c.ts
    for k, ev in enumerate(c.op_ev):
        s = all_segs[seg_of[ev]]
        s.cpu_ops += 1
        if not c.op_shapes[k]:
            s.ops_without_shapes += 1
        s.ops.append(
            Op(
                sig_list[c.op_sig[k]],
                ts_a[ev],
                tuple(links.op_kernels.get(k, ())),
                links.op_graphs.get(k, 0),
                bool(c.op_shapes[k]),
            )
        )
    for s in all_segs:
        s.ops.sort(key=lambda o: o.ts)


def build(path: str, size: int, identity: Identity, c: Collector) -> TraceRecord:
    """The TraceRecord of a collected trace."""
    segs, source = segments_of(c.ranges, identity)
    seg_of = _segment_index(c, segs, source)
    all_segs = segs + [Segment(OUTSIDE)]
    links = link(c, seg_of, all_segs)
    _count_kinds(c, seg_of, all_segs)
    _place_ops(c, seg_of, all_segs, links)
    for s in all_segs:
        name_captured_launches(s)
    result = list(segs)
    if all_segs[-1].events:
        result.append(all_segs[-1])
    return TraceRecord(path, size, identity, len(c.kind), result, source)


def load_record(path: str, progress: Callable[[int, int], None] | None = None) -> TraceRecord:
    """Read ``path`` in one streaming pass; raises TraceError for any bad input."""
    stream = open_trace(path, progress)
    c = Collector()
    for events in stream.events():
        c.add(events)
    identity = identity_of(path, stream.metadata)
    try:
        return build(path, stream.size, identity, c)
    except (MemoryError, RecursionError) as exc:  # pragma: no cover - defensive
        raise TraceError(path, f"cannot analyse: {type(exc).__name__}") from None
