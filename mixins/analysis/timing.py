"""``time``: where a runner's capture start-up time goes, per segment (batch size, variant).

Each segment's wall time (its range on the CPU, or the trace's CPU span when it has no range) is cut
into four phases on its process's timeline, in this order of precedence:

- ``capture``: from the end of each ``…StreamBeginCapture`` to the end of the ``…StreamEndCapture``
  that closes it (paired per thread, else per process);
- ``instantiate``: ``…GraphInstantiate…`` / ``…GraphUpload`` calls outside capture windows;
- ``warmup``: time inside CPU ops (``cpu_op``) that start in the segment before its first capture
  window: the eager passes (every op of the segment when it has no window, as on CPU);
- ``other``: the rest (allocation, synchronisation, garbage collection, Python between ops).

Boundaries are integer nanoseconds so the phases sum exactly to the wall time. The top CPU ops of a
phase are ``cpu_op`` and runtime/driver calls by self time (own duration minus the calls nested in
it on the same thread), each counted in the phase where it starts. Profiling inflates CPU time;
shares and comparisons are what these numbers are for.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mixins.analysis import events as E
from mixins.analysis.identity import Identity, identity_of
from mixins.analysis.intervals import Interval, clip, length, subtract, union
from mixins.analysis.model import Segment
from mixins.analysis.reader import SlimEvent, open_trace
from mixins.analysis.segments import Range, segments_of

__all__ = ["PHASES", "NOTE", "TopOp", "SegmentTime", "TraceTime", "time_trace", "phases_json"]

PHASES = ("warmup", "capture", "instantiate", "other")
NOTE = (
    "profiling inflates CPU time (every op and runtime call is recorded while the trace is taken): "
    "read shares and compare runners and batch sizes; absolute times are upper bounds"
)
_BEGIN, _END, _INSTANTIATE = range(3)
_FOREVER = 1 << 62


def _ns(us: float) -> int:
    return round(us * 1000)


def phases_json(phases_ns: dict[str, int], wall_ns: int) -> tuple[float, dict[str, float], dict[str, float]]:
    """(wall_us, phases in µs, shares). Exact in integer ns (``phases_ns`` sum to ``wall_ns``, also in the
    JSON); in µs floats ``other`` is chosen so the sum equals wall_us where a float can make it so, else it is
    off by less than a nanosecond (for some splits no float ``other`` makes a float sum exact)."""
    wall = wall_ns / 1000
    out = {p: phases_ns[p] / 1000 for p in PHASES[:-1]}
    parts = sum(out.values())
    other = wall - parts
    rounded = max(0.0, round(other, 3)) + 0.0  # never -0.0
    for candidate in (rounded, *(max(0.0, rounded + k * math.ulp(wall)) for k in (1, -1, 2, -2)), other):
        if parts + candidate == wall:
            other = candidate
            break
    else:
        other = rounded
    out["other"] = other
    shares = {p: round(v / wall, 4) if wall > 0 else 0.0 for p, v in out.items()}
    return wall, out, shares


@dataclass(frozen=True)
class TopOp:
    """A CPU op or runtime call name within one phase: summed self time and how often it ran."""

    phase: str
    op: str
    self_ns: int
    count: int

    def as_json(self) -> dict[str, Any]:
        return {"phase": self.phase, "op": self.op, "self_us": self.self_ns / 1000, "count": self.count}


@dataclass
class SegmentTime:
    label: str
    bs: int | None
    variant: str | None
    wall_ns: int
    phases_ns: dict[str, int]
    capture_windows: int = 0
    top: list[TopOp] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        wall, phases, shares = phases_json(self.phases_ns, self.wall_ns)
        return {
            "label": self.label,
            "bs": self.bs,
            "variant": self.variant,
            "wall_us": wall,
            "phases": phases,
            "shares": shares,
            "wall_ns": self.wall_ns,
            "phases_ns": dict(self.phases_ns),
            "capture_windows": self.capture_windows,
            "top": [t.as_json() for t in self.top],
        }


@dataclass
class TraceTime:
    path: str
    identity: Identity
    segment_source: str
    segments: list[SegmentTime]
    top: list[TopOp] = field(default_factory=list)  # over all segments

    @property
    def wall_ns(self) -> int:
        return sum(s.wall_ns for s in self.segments)

    @property
    def phases_ns(self) -> dict[str, int]:
        return {p: sum(s.phases_ns[p] for s in self.segments) for p in PHASES}

    def as_json(self) -> dict[str, Any]:
        wall, phases, shares = phases_json(self.phases_ns, self.wall_ns)
        ident = self.identity.as_json()
        return {
            "path": self.path,
            "runner": ident.pop("runner"),
            "tp_rank": ident.pop("tp_rank"),
            **ident,
            "segment_source": self.segment_source,
            "totals": {"wall_us": wall, "phases": phases, "shares": shares, "top": [t.as_json() for t in self.top]},
            "segments": [s.as_json() for s in self.segments],
        }


class _Timeline:
    """CPU-side calls as parallel arrays (ns), capture/instantiate marks and annotation ranges."""

    def __init__(self) -> None:
        self.ts = array("q")
        self.end = array("q")
        self.thread = array("i")
        self.name = array("i")
        self.op = array("b")  # 1: a cpu_op, 0: a runtime/driver call
        self.names: dict[str, int] = {}
        self.mark_of: list[int | None] = []  # per name id: _BEGIN / _END / _INSTANTIATE / None
        self.threads: dict[tuple[Any, Any], int] = {}
        self.thread_pid: list[Any] = []
        self.marks: list[tuple[int, int, int, int]] = []  # (ts, kind, thread, end)
        self.ranges: list[Range] = []  # the ones that may be segment markers; the rest only count in
        self.range_lo = _FOREVER  # ... the span: first start and last end (ns) of every range
        self.range_hi = -_FOREVER
        self.wanted: dict[str | None, bool] = {}  # category -> timed (cpu_op, runtime) or a range

    def add(self, events: list[SlimEvent]) -> None:
        ts_a, end_a, thread_a, name_a, op_a = self.ts, self.end, self.thread, self.name, self.op
        threads, names, mark_of = self.threads, self.names, self.mark_of
        wanted = self.wanted
        for cat in {ev.cat for ev in events}.difference(wanted):
            wanted[cat] = cat is not None and (E.is_cpu_op(cat) or E.is_runtime(cat) or E.is_annotation(cat))
        # One comprehension drops what is never timed (most of a capture: python_function calls).
        for ev in [ev for ev in events if wanted[ev.cat] and ev.ts is not None]:
            t, cat = ev.ts, ev.cat
            assert t is not None and cat is not None
            is_op = E.is_cpu_op(cat)
            if not is_op and not E.is_runtime(cat):
                name = ev.name or ""
                dur = ev.dur or 0.0
                self.range_lo = min(self.range_lo, _ns(t))
                self.range_hi = max(self.range_hi, _ns(t + dur))
                if E.may_be_segment_marker(name):  # kept whole only if it can cut a segment
                    self.ranges.append(Range(name, t, dur, ev.pid))
                continue
            thread = threads.get((ev.pid, ev.tid))
            if thread is None:
                thread = self._thread(ev.pid, ev.tid)
            name = ev.name or ""
            nid = names.get(name)
            if nid is None:
                nid = self._name(name)
            start, end = round(t * 1000), round((t + (ev.dur or 0.0)) * 1000)  # ns
            ts_a.append(start)
            end_a.append(end)
            thread_a.append(thread)
            name_a.append(nid)
            op_a.append(is_op)
            if not is_op:
                mark = mark_of[nid]
                if mark is not None:
                    self.marks.append((start, mark, thread, end))

    def _thread(self, pid: Any, tid: Any) -> int:
        self.threads[(pid, tid)] = len(self.thread_pid)
        self.thread_pid.append(pid)
        return len(self.thread_pid) - 1

    def _name(self, name: str) -> int:
        """Intern ``name``; runtime calls of this name mark a capture boundary or an instantiate, or not."""
        self.names[name] = len(self.mark_of)
        self.mark_of.append(
            _BEGIN if E.is_capture_begin(name)
            else _END if E.is_capture_end(name)
            else _INSTANTIATE if E.is_graph_instantiate(name)
            else None
        )
        return len(self.mark_of) - 1

    def span(self) -> tuple[int, int]:
        """First start and last end of the CPU calls and annotation ranges (0, 0 when there are none)."""
        lo = min(min(self.ts, default=_FOREVER), self.range_lo)
        hi = max(max(self.end, default=-_FOREVER), self.range_hi)
        return (lo, hi) if lo <= hi else (0, 0)

    def start_order(self) -> array:
        """Call indexes by start, the longer first on a tie (a parent before its children).

        Two stable sorts on C-level keys: no per-call key tuples, so memory stays a few arrays.
        """
        by_end = sorted(range(len(self.ts)), key=self.end.__getitem__, reverse=True)
        return array("i", sorted(by_end, key=self.ts.__getitem__))

    def self_times(self, order: array) -> array:
        """Each call's duration minus what calls nested in it on the same thread took."""
        ts, end, thread = self.ts, self.end, self.thread
        own = array("q", (e - s for s, e in zip(ts, end, strict=True)))
        stacks: dict[int, list[int]] = {}
        for i in order:
            stack = stacks.setdefault(thread[i], [])
            while stack and end[stack[-1]] <= ts[i]:
                stack.pop()
            if stack:
                parent = stack[-1]
                own[parent] = max(0, own[parent] - (min(end[i], end[parent]) - ts[i]))
            stack.append(i)
        return own

    def windows(self) -> list[tuple[Any, int, int]]:
        """Capture windows (pid, BeginCapture end, EndCapture end).

        An EndCapture closes the latest open BeginCapture of its thread (captures on two streams may
        nest), else the oldest open one of its process; an unclosed window runs to the segment's end.
        """
        opened: dict[int, list[int]] = {}
        out: list[tuple[Any, int, int]] = []
        for _, kind, thread, end in sorted(self.marks):
            if kind == _BEGIN:
                opened.setdefault(thread, []).append(end)
            elif kind == _END:
                pid = self.thread_pid[thread]
                if opened.get(thread):
                    out.append((pid, opened[thread].pop(), end))
                    continue
                other = next((t for t, st in opened.items() if st and self.thread_pid[t] == pid), None)
                if other is not None:
                    out.append((pid, opened[other].pop(0), end))
        out += [(self.thread_pid[t], start, _FOREVER) for t, st in opened.items() for start in st]
        return out

    def instantiates(self) -> list[tuple[Any, int, int]]:
        return [(self.thread_pid[th], ts, end) for ts, kind, th, end in self.marks if kind == _INSTANTIATE]


@dataclass
class _Context:
    """What every segment's computation reads: the timeline in start order, windows, self times."""

    tl: _Timeline
    order: array
    starts: array
    windows: list[tuple[Any, int, int]]
    instantiates: list[tuple[Any, int, int]]
    own: array
    top: int
    names: list[str]
    span: tuple[int, int]


def _phase_intervals(
    ctx: _Context, members: array, s0: int, s1: int, pid: Any
) -> tuple[dict[str, list[Interval]], int]:
    """capture / instantiate / warmup interval sets of one segment, and its number of capture windows."""
    mine = pid is None
    windows = clip(((a, b) for p, a, b in ctx.windows if mine or p == pid), s0, s1)
    capture = union(windows)
    inst = subtract(union(clip(((a, b) for p, a, b in ctx.instantiates if mine or p == pid), s0, s1)), capture)
    first = capture[0][0] if capture else s1
    tl = ctx.tl
    ops = ((tl.ts[i], min(tl.end[i], first)) for i in members if tl.ts[i] < first and tl.op[i])
    warmup = subtract(subtract(union(ops, in_order=True), capture), inst)  # members are in start order
    return {"warmup": warmup, "capture": capture, "instantiate": inst}, len(windows)


class _Spent:
    """Self time and calls per (phase, name id): a segment's, or summed over a trace's segments."""

    def __init__(self) -> None:
        self.ns: Counter[tuple[str, int]] = Counter()
        self.calls: Counter[tuple[str, int]] = Counter()

    def add(self, other: _Spent) -> None:
        self.ns.update(other.ns)
        self.calls.update(other.calls)

    def top(self, n: int, names: list[str]) -> list[TopOp]:
        """Per phase, the ``n`` names with the most self time."""
        out = []
        for phase in PHASES:
            rows = sorted(((ns, k) for k, ns in self.ns.items() if k[0] == phase and ns > 0), reverse=True)
            out += [TopOp(phase, names[k[1]], ns, self.calls[k]) for ns, k in rows[:n]]
        return out


def _spent(ctx: _Context, members: array, sets: dict[str, list[Interval]]) -> _Spent:
    """Each call's self time, in the phase where it starts (members come in start order)."""
    # One cursor per phase's sorted intervals (the phases are disjoint by construction), not one sorted
    # list of all pieces: a trace whose warm-up ops never nest has one interval per op (issue 19).
    phases = [(p, ivs) for p, ivs in sets.items() if ivs]
    at = [0] * len(phases)
    out = _Spent()
    tl, own = ctx.tl, ctx.own
    for i in members:
        t = tl.ts[i]
        phase = "other"
        for n, (p, ivs) in enumerate(phases):
            k = at[n]
            while k < len(ivs) and ivs[k][1] <= t:
                k += 1
            at[n] = k
            if k < len(ivs) and ivs[k][0] <= t:
                phase = p
                break
        key = (phase, tl.name[i])
        out.ns[key] += own[i]
        out.calls[key] += 1
    return out


def _segment(ctx: _Context, seg: Segment, total: _Spent) -> SegmentTime:
    tl = ctx.tl
    bounded = math.isfinite(seg.start) and math.isfinite(seg.end)
    s0, s1 = (_ns(seg.start), _ns(seg.end)) if bounded else ctx.span
    s1 = max(s0, s1)
    pid = seg.pid if bounded else None
    members = ctx.order[bisect_left(ctx.starts, s0) : bisect_right(ctx.starts, s1)]  # an array: 4 B a call
    if pid is not None:
        members = array("i", [i for i in members if tl.thread_pid[tl.thread[i]] == pid])
    sets, n_windows = _phase_intervals(ctx, members, s0, s1, pid)
    phases = {p: length(sets[p]) for p in PHASES[:-1]}
    phases["other"] = (s1 - s0) - sum(phases.values())
    spent = _spent(ctx, members, sets) if ctx.top > 0 else _Spent()
    total.add(spent)
    top = spent.top(ctx.top, ctx.names)
    return SegmentTime(seg.label, seg.bs, E.segment_variant(seg.label), s1 - s0, phases, n_windows, top)


def build(path: str, identity: Identity, tl: _Timeline, top: int) -> TraceTime:
    """The TraceTime of a collected timeline."""
    segs, source = segments_of(tl.ranges, identity)
    order = tl.start_order()
    names = sorted(tl.names, key=tl.names.__getitem__)
    starts = array("q", (tl.ts[i] for i in order))
    ctx = _Context(tl, order, starts, tl.windows(), tl.instantiates(), tl.self_times(order), top, names, tl.span())
    total = _Spent()
    segments = [_segment(ctx, s, total) for s in segs]
    return TraceTime(path, identity, source, segments, total.top(top, names))


def time_trace(path: str, top: int = 5, progress: Callable[[int, int], None] | None = None) -> TraceTime:
    """Read ``path`` in one streaming pass and time its segments; raises TraceError for bad input."""
    stream = open_trace(path, progress)
    tl = _Timeline()
    for events in stream.slim_events():
        tl.add(events)
    return build(path, identity_of(path, stream.metadata), tl, top)
