"""Segments: the capture ranges of a trace (ours ``capture::…``, a per-bs file name, vLLM's ``capture_N``),
cut the same way for every command, and the (ts, pid) -> segment rule."""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterable
from heapq import heappop, heappush
from typing import Any, NamedTuple

from mixins.analysis.model.events import segment_marker
from mixins.analysis.model.identity import Identity
from mixins.analysis.model.record import ALL, Segment
from mixins.formats import BS, SEGMENT_PREFIX, SHAPE_UNITS, label_text
from mixins.formats import label_size as segment_size

__all__ = ["Range", "segments_of", "assigner", "segment_tables", "segment_size", "size_json", "by_size"]

def size_json(label: str) -> dict[str, Any]:
    """``{"unit", "size"}`` of a segment's label for ``--json`` (both null without a size)."""
    got = segment_size(label)
    return {"unit": got[0], "size": got[1]} if got else {"unit": None, "size": None}


def by_size(labels: list[str]) -> list[str]:
    """Labels in the order to compare runners by: batch sizes, then token counts, each ascending (a
    size's variants keep their order), then labels without a size as they came."""

    def key(label: str) -> tuple[int, int]:
        size = segment_size(label)
        return (len(SHAPE_UNITS), 0) if size is None else (SHAPE_UNITS.index(size[0]), size[1])

    return sorted(labels, key=key)  # stable: equal keys keep their order


class Range(NamedTuple):
    """A ``user_annotation`` range: its name, start, duration and process."""

    name: str
    ts: float
    dur: float
    pid: Any


def _unique_labels(segs: list[Segment]) -> None:
    """The same label twice stays two segments, in time order (``bs=8``, ``bs=8#2``); a suffix never
    takes a label the trace has itself (``bs=8``, ``bs=8``, ``bs=8#2`` → ``bs=8#3`` for the second)."""
    taken = {s.label for s in segs}
    seen: Counter[str] = Counter()
    for s in segs:
        seen[s.label] += 1
        if seen[s.label] > 1:
            label, n = s.label, seen[s.label]
            while f"{label}#{n}" in taken:
                n += 1
            seen[label] = n
            s.label = f"{label}#{n}"
            taken.add(s.label)


def segments_of(ranges: Iterable[Range], identity: Identity) -> tuple[list[Segment], str]:
    """The trace's segments in time order and their source: ``capture::`` ranges, else a per-batch-size
    file name (one segment), else vLLM's ``capture_<bs>[_<variant>]`` ranges, else one segment ``all``."""
    ours: list[Segment] = []
    foreign: list[Segment] = []
    for r in ranges:
        got = segment_marker(r.name) if r.ts == r.ts else None  # a marker without a time bounds nothing
        if got is not None:
            label, bs, is_ours = got
            (ours if is_ours else foreign).append(Segment(label, bs, r.ts, r.ts + r.dur, r.pid))
    if ours:
        segs, source = ours, SEGMENT_PREFIX
    elif identity.bs is not None:
        return [Segment(label_text([(BS, identity.bs)]), identity.bs)], "filename"
    elif foreign:
        segs, source = foreign, "foreign"
    else:
        return [Segment(ALL)], "all"
    segs.sort(key=lambda s: s.start)
    _unique_labels(segs)
    return segs, source


def _innermost_table(segs: list[Segment], idx: list[int]) -> tuple[list[float], list[int], list[int]]:
    """The innermost segment (the latest start among those containing the time) as a step function:
    breakpoints, the segment at each and just after it (-1: none); one sweep with a heap of open ones."""
    order = sorted(range(len(idx)), key=lambda k: segs[idx[k]].start)  # stable: equal starts keep their order
    points = sorted({p for k in order for p in (segs[idx[k]].start, segs[idx[k]].end) if p == p})
    at: list[int] = []
    after: list[int] = []
    heap: list[tuple[int, float]] = []  # (-rank, end) of the segments begun so far
    nxt = 0
    for p in points:
        while nxt < len(order) and segs[idx[order[nxt]]].start <= p:
            end = segs[idx[order[nxt]]].end
            if end == end:  # an end that is NaN contains nothing
                heappush(heap, (-nxt, end))
            nxt += 1
        while heap and heap[0][1] < p:
            heappop(heap)
        at.append(idx[order[-heap[0][0]]] if heap else -1)
        while heap and heap[0][1] <= p:
            heappop(heap)
        after.append(idx[order[-heap[0][0]]] if heap else -1)
    return points, at, after


Table = tuple[list[float], list[int], list[int]]


def segment_tables(segs: list[Segment], pids: dict[Any, int]) -> dict[int | None, Table]:
    """Per pid index, :func:`_innermost_table` over its process's segments; ``None``: over all of them.
    The one rule behind :func:`assigner` and ``Timeline.row_segments``."""
    by_pid: dict[int | None, list[int]] = {}
    for j, s in enumerate(segs):
        by_pid.setdefault(pids.get(s.pid, -1), []).append(j)
    return {key: _innermost_table(segs, idx) for key, idx in [*by_pid.items(), (None, list(range(len(segs))))]}


def assigner(segs: list[Segment], pids: dict[Any, int]) -> Callable[[float, int], int]:
    """Map (ts, pid index) to the innermost containing segment (same process first), else -1."""
    tables = segment_tables(segs, pids)
    fallback = tables[None]

    def find(ts: float, pid: int) -> int:
        if ts != ts:  # NaN: no timestamp
            return -1
        points, at, after = tables.get(pid, fallback)
        k = bisect_right(points, ts) - 1
        if k < 0:
            return -1
        return at[k] if points[k] == ts else after[k]

    return find
