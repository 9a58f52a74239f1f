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

import argparse
import math
from array import array
from collections.abc import Callable
from itertools import chain
from typing import Any

from msgspec import Struct, field

from mixins.analysis import render
from mixins.analysis.jobs import OK, TROUBLE, add_jobs_option, collect_results, expand_paths, map_files, with_limits
from mixins.analysis.model import events as E
from mixins.analysis.model.events import C_INSTANTIATE
from mixins.analysis.model.identity import Identity
from mixins.analysis.model.record import Segment
from mixins.analysis.model.roles import identify, run_labels
from mixins.analysis.model.segments import segments_of, size_json
from mixins.analysis.model.timeline import BareEvent, Timeline, load_timeline
from mixins.formats import PHASES
from mixins.helptext import add_command, non_negative_int

__all__ = ["PHASES", "NOTE", "TopOp", "SegmentTime", "TraceTime", "time_trace", "phases_json"]

NOTE = (
    "profiling inflates CPU time (every op and runtime call is recorded while the trace is taken): "
    "read shares and compare runners and batch sizes; absolute times are upper bounds"
)
_FOREVER = 1 << 62
DEFAULT_TOP = 5  # ops per phase shown by default (``--top``; also the report page's time section)
_NS_PER_US = 1000.0  # the trace's µs floats; time is computed in integer ns (exact sums)
_CHUNK = 1 << 14  # calls (or points) worked at once where a segment's columns are cut in chunks


def _ns(us: float) -> int:
    return round(us * _NS_PER_US)


def phases_json(phases_ns: dict[str, int], wall_ns: int) -> tuple[float, dict[str, float], dict[str, float]]:
    """(wall_us, phases in µs, shares). Exact in integer ns (``phases_ns`` sum to ``wall_ns``, also in the
    JSON); in µs floats ``other`` is chosen so the sum equals wall_us where a float can make it so, else it is
    off by less than a nanosecond (for some splits no float ``other`` makes a float sum exact)."""
    wall = wall_ns / _NS_PER_US
    out = {p: phases_ns[p] / _NS_PER_US for p in PHASES[:-1]}
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


class TopOp(Struct, frozen=True):
    """A CPU op or runtime call name within one phase: summed self time and how often it ran."""

    phase: str
    op: str
    self_ns: int
    count: int

    def as_json(self) -> dict[str, Any]:
        return {"phase": self.phase, "op": self.op, "self_us": self.self_ns / _NS_PER_US, "count": self.count}


class SegmentTime(Struct):
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
            **size_json(self.label),
            "variant": self.variant,
            "wall_us": wall,
            "phases": phases,
            "shares": shares,
            "wall_ns": self.wall_ns,
            "phases_ns": dict(self.phases_ns),
            "capture_windows": self.capture_windows,
            "top": [t.as_json() for t in self.top],
        }


class TraceTime(Struct):
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
            "role": self.identity.role,
            "run": None,  # the run's label: set where all the traces shown are known (``time_doc``)
            "runner": ident.pop("runner"),
            "tp_rank": ident.pop("tp_rank"),
            **ident,
            "segment_source": self.segment_source,
            "totals": {"wall_us": wall, "phases": phases, "shares": shares, "top": [t.as_json() for t in self.top]},
            "segments": [s.as_json() for s in self.segments],
        }


_WARMUP, _CAPTURE, _INSTANTIATE, _OTHER = range(len(PHASES))  # phase index: PHASES order
Spent = tuple[Any, Any]  # self ns and calls per (phase index, name id): two int64 arrays


class _Calls:
    """The timeline's CPU ops, then its runtime calls, as numpy columns (times in integer ns), and their
    order by start, the longer first on a tie (a parent before its children), file order after that."""

    def __init__(self, tl: Timeline) -> None:
        import numpy as np

        ops, calls = tl.ops, tl.calls
        names: dict[str, int] = {}
        op_names = [names.setdefault(n, len(names)) for n, _, _ in tl.signatures]
        call_names = [names.setdefault(n, len(names)) for n in tl.call_names]
        self.names = list(names)
        self.n_ops = len(ops.start)  # indexes below are cpu_ops, the rest runtime calls

        def column(a: array, b: array, kind: Any) -> Any:
            return np.concatenate((np.frombuffer(a, kind), np.frombuffer(b, kind)))

        def ns(a: array, b: array) -> Any:
            us = column(a, b, np.float64)
            return np.rint(np.multiply(us, _NS_PER_US, out=us), out=us).astype(np.int64)

        self.ts, self.end = ns(ops.start, calls.start), ns(ops.end, calls.end)
        self.thread = column(ops.thread, calls.thread, np.int32)
        self.name = np.concatenate((np.array(op_names, np.int32)[np.array(ops.label, np.intp)],
                                    np.array(call_names, np.int32)[np.array(calls.name, np.intp)]))
        pids = {p: n for n, p in enumerate(dict.fromkeys(tl.thread_pid))}
        self.pid_index = pids
        self.pid = np.array([pids[p] for p in tl.thread_pid], np.int32)  # per thread
        self.order = np.lexsort((-self.end, self.ts)).astype(np.int32 if len(self.ts) < 1 << 31 else np.int64)
        self.starts = self.ts[self.order]


def _windows(tl: Timeline, marks: list[tuple[int, int]]) -> list[tuple[Any, int, int]]:
    """(pid, BeginCapture end, EndCapture end) in ns of each capture window (``marks``: the one definition,
    ``Timeline.capture_windows``); a window never closed runs to the segment's end."""
    c = tl.calls
    return [(tl.thread_pid[c.thread[b]], _ns(c.end[b]), _ns(c.end[e]) if e >= 0 else _FOREVER) for b, e in marks]


class _Placed(Struct):
    """Each segment's calls, and the segment of each capture window and instantiate (by its begin)."""

    members: list[Any]
    window_segment: list[int]
    instantiate_segment: list[int]


def _placed(tl: Timeline, segs: list[Segment], source: str, cs: _Calls, begins: list[int], insts: list[int]
            ) -> _Placed | None:
    """Where two segments of one process overlap in time (captures on two threads at once): each call goes
    to one segment, where ``summary`` counts it (``Timeline.segment_finder``: the innermost containing one of
    its process), and each capture window and instantiate to its begin's. None when no two overlap: a
    call is then in at most one, and slicing the calls by time (``_segment``) is the same answer for less."""
    import numpy as np

    ends: dict[Any, float] = {}
    overlap = False
    for s in sorted((s for s in segs if math.isfinite(s.start) and math.isfinite(s.end)), key=lambda s: s.start):
        overlap = overlap or s.start < ends.get(s.pid, -math.inf)
        ends[s.pid] = max(s.end, ends.get(s.pid, -math.inf))
    if not overlap:
        return None
    find = tl.segment_finder(segs, source)
    c = tl.calls
    owner = np.array([find(t, th) for t, th in zip(chain(tl.ops.start, c.start), cs.thread.tolist(), strict=True)])
    placed = owner[cs.order]
    members = [cs.order[placed == j] for j in range(len(segs))]
    return _Placed(members, [find(c.start[i], c.thread[i]) for i in begins],
                   [find(c.start[i], c.thread[i]) for i in insts])


class _Context(Struct):
    """What every segment's computation reads: the calls, windows, instantiates, and where segments of a
    process overlap, which segment each belongs to."""

    calls: _Calls
    windows: list[tuple[Any, int, int]]
    instantiates: list[tuple[Any, int, int]]
    top: int
    span: tuple[int, int]
    placed: _Placed | None = None
    vectorised: bool = True  # self time by columns where calls nest properly (False: always the stack walk)


def _union(a: Any, b: Any) -> tuple[Any, Any]:
    """The intervals ``[a, b)`` (numpy columns, ``a`` ascending) merged where they touch or overlap, empty
    ones dropped: one running maximum of the ends, so millions of warm-up ops cost no Python step each."""
    import numpy as np

    keep = b > a
    keep_all = bool(keep.all())  # ``b`` is then overwritten: callers pass a temporary
    if not keep_all:
        a, b = a[keep], b[keep]
    del keep
    if not len(a):
        return a, b
    reach = np.maximum.accumulate(b, out=b if keep_all else None)
    last = np.flatnonzero(a[1:] > reach[:-1])  # the last of each merged interval, bar the very last
    last += 1
    starts = a[np.concatenate(([0], last))]
    last -= 1
    return starts, reach[np.append(last, len(a) - 1)]


class _Pieces:
    """``[s0, s1)`` cut into consecutive runs, each in one phase (``ends``, ``phase``): where several phases'
    intervals cover a point the first of capture, instantiate, warm-up has it; what none covers is other.
    Any ``[a, b)`` is measured per phase by ``searchsorted`` on prefix sums (:meth:`cover`)."""

    def __init__(self, s0: int, s1: int, sets: dict[int, tuple[Any, Any]]) -> None:
        """``sets``: each phase's merged intervals, emptied once read (warm-up's can be millions)."""
        import numpy as np

        a, b = sets[_WARMUP]  # one interval per op that never nests (millions): its ends interleave in order
        few = np.concatenate(([s0, s1], *(np.ravel(sets[k]) for k in (_CAPTURE, _INSTANTIATE))))
        points = np.empty(2 * len(a) + len(few), np.int64)
        points[: 2 * len(a) : 2], points[1 : 2 * len(a) : 2], points[2 * len(a) :] = a, b, few
        points.sort()
        points = points[:-1]  # each starts a piece (equal points: a piece of nothing, merged with the next)
        phase = np.full(len(points), _OTHER, np.int8)
        for lo in range(0, len(points), _CHUNK):
            at, of = points[lo : lo + _CHUNK], phase[lo : lo + _CHUNK]
            for k in (_WARMUP, _INSTANTIATE, _CAPTURE):  # the later in precedence overwrite
                a, b = sets[k]
                if len(a):
                    i = np.searchsorted(a, at, "right") - 1
                    of[(i >= 0) & (b[np.maximum(i, 0)] > at)] = k
        sets.clear()
        change = np.ones(len(phase), bool)
        np.not_equal(phase[1:], phase[:-1], out=change[1:])
        self.s0, self.phase, starts = s0, phase[change], points[change]
        del points, phase, change
        self.ends = np.append(starts, s1)[1:]
        size = np.subtract(self.ends, starts, out=starts)
        self.lengths = [int(size.sum(where=self.phase == k)) for k in range(len(PHASES))]
        self._before: Any = None

    @property
    def starts(self) -> Any:  # each run's start, and s1 past the last (an empty run of "other")
        import numpy as np

        return np.concatenate(([self.s0], self.ends))

    def cover(self, a: Any, b: Any) -> Any:
        """Per phase (rows), how much of each ``[a, b)`` (columns; within ``[s0, s1]``, ``a <= b``) lies in it:
        the run ``a`` is in when ``b`` is too (the usual case), else by prefix sums per phase."""
        import numpy as np

        out = np.zeros((len(PHASES), len(a)), np.int64)
        if not len(self.ends):
            return out
        i = np.searchsorted(self.ends, a, "right")
        single = b <= self.ends[np.minimum(i, len(self.ends) - 1)]
        at = np.flatnonzero(single)
        out[np.append(self.phase, _OTHER)[i[at]], at] = b[at] - a[at]
        cross = np.flatnonzero(~single)
        if len(cross):
            out[:, cross] = self._upto(b[cross]) - self._upto(a[cross])
        return out

    def _upto(self, t: Any) -> Any:
        """Per phase (rows), the length of each ``[s0, t)`` that lies in it."""
        import numpy as np

        starts = self.starts
        if self._before is None:  # phase k's length in the runs before run i (made on first use)
            self._before = np.zeros((len(self.ends) + 1, len(PHASES)), np.int64)
            self._before[np.arange(1, len(self.ends) + 1), self.phase] = np.diff(starts)
            np.cumsum(self._before, axis=0, out=self._before)
        i = np.searchsorted(self.ends, t, "right")
        got = self._before[i].T.copy()
        got[np.append(self.phase, _OTHER)[i], np.arange(len(t))] += t - starts[i]
        return got


def _pieces(ctx: _Context, members: Any, s0: int, s1: int, pid: Any, j: int) -> tuple[_Pieces, int]:
    """Segment ``j``'s phase pieces, and its number of capture windows."""
    import numpy as np

    mine = pid is None
    placed = ctx.placed
    if placed is not None:  # segments of a process overlap: what began in this one
        ours = [(a, b) for k, (_, a, b) in enumerate(ctx.windows) if placed.window_segment[k] == j]
        theirs = [(a, b) for k, (_, a, b) in enumerate(ctx.instantiates) if placed.instantiate_segment[k] == j]
    else:  # a window never closed runs to the end of the segment it began in, not into every later one
        ours = [(a, b) for p, a, b in ctx.windows if (mine or p == pid) and (b != _FOREVER or s0 <= a <= s1)]
        theirs = [(a, b) for p, a, b in ctx.instantiates if mine or p == pid]

    def clipped(ivs: list[tuple[int, int]]) -> Any:
        return np.array(sorted((max(a, s0), min(b, s1)) for a, b in ivs if min(b, s1) > max(a, s0)),
                        np.int64).reshape(-1, 2)

    windows = clipped(ours)
    capture = _union(*windows.T)
    first = int(capture[0][0]) if len(capture[0]) else s1
    cs = ctx.calls
    warm = members[(members < cs.n_ops) & (cs.ts[members] < first)]  # cpu_ops starting before the first window
    a, b = cs.ts[warm], np.minimum(cs.end[warm], first)
    del warm
    sets = {_WARMUP: _union(a, b), _CAPTURE: capture, _INSTANTIATE: _union(*clipped(theirs).T)}  # a: in order
    del a, b
    return _Pieces(s0, s1, sets), len(windows)


def _top(spent: Spent, n: int, names: list[str]) -> list[TopOp]:
    """Per phase, the ``n`` names with the most self time."""
    import numpy as np

    ns, calls = spent
    out = []
    for k, phase in enumerate(PHASES):
        rows = sorted(((int(ns[k, i]), i) for i in np.flatnonzero(ns[k] > 0).tolist()), reverse=True)
        out += [TopOp(phase, names[i], v, int(calls[k, i])) for v, i in rows[:n]]
    return out


#: The most calls a segment may have for its nesting by columns (their temporaries then stay a constant
#: whatever the trace's size); larger segments are nested by the stack walk (~10 B a call).
COLUMNS_MAX_CALLS = 1 << 17


def _spent(ctx: _Context, members: Any, pieces: _Pieces, s0: int, s1: int) -> Spent:
    """Each call's self time (its duration less the calls nested in it on its thread), cut by the phases:
    what lies in a phase counts there and only there, and nothing outside the segment counts. So on one
    thread a phase's ops never add up to more than the phase (an op starting in warm-up and running on
    through a capture window gives each phase its own part); threads at work at once each count theirs.

    Which call each is nested in, two ways, one answer: by columns (:func:`_parents`, numpy) when the
    segment's calls nest properly on each thread, else by a stack of open calls per thread
    (:func:`_parents_walk`: any nesting); ``ctx.vectorised`` False forces the walk (the property test in
    tests/analysis/test_time_paths.py holds them equal), and so does a segment of more than
    ``COLUMNS_MAX_CALLS`` calls (memory per event at the event limit: tests/analysis/test_bounds.py)."""
    columns = ctx.vectorised and len(members) <= COLUMNS_MAX_CALLS
    got = _parents(ctx.calls, members) if columns else None
    return _self_time(ctx.calls, members, _parents_walk(ctx.calls, members) if got is None else got, pieces, s0, s1)


def _self_time(cs: _Calls, members: Any, parent: Any, pieces: _Pieces, s0: int, s1: int, chunk: int = _CHUNK
               ) -> Spent:
    """Self time per phase and name: each call's part in each phase (:meth:`_Pieces.cover`) less the part
    of each call nested in it up to its own end (all of that call when the nesting is proper), exact
    integers (``np.subtract.at``); one phase at a time and a chunk of calls at a time, so what is held is
    one integer a call."""
    import numpy as np

    def cover(at: Any, end: Any, k: int) -> Any:
        a = np.clip(cs.ts[at], s0, s1)
        return pieces.cover(a, np.maximum(a, np.clip(end, s0, s1)))[k]

    name, nested = cs.name[members], np.flatnonzero(parent >= 0)
    ns = np.zeros((len(PHASES), len(cs.names)), np.int64)
    calls = np.zeros_like(ns)
    for k in np.flatnonzero(pieces.lengths).tolist():  # a phase the segment lacks holds nothing
        own = np.empty(len(members), np.int64)
        for lo in range(0, len(members), chunk):
            at = members[lo : lo + chunk]
            own[lo : lo + chunk] = cover(at, cs.end[at], k)
        for lo in range(0, len(nested), chunk):
            child = members[nested[lo : lo + chunk]]
            up = parent[nested[lo : lo + chunk]]
            np.subtract.at(own, up, cover(child, np.minimum(cs.end[child], cs.end[members[up]]), k))
        spent = np.flatnonzero(own > 0)
        np.add.at(ns[k], name[spent], own[spent])
        calls[k] = np.bincount(name[spent], minlength=len(cs.names))
    return ns, calls


def _parents(cs: _Calls, members: Any) -> Any:
    """Per call (in start order, a parent before its children), the innermost call open at its start on
    its thread (position, -1: none), or None where the calls do not nest: one runs past its parent's end
    or ends before it starts (the stack walk's rule decides those).

    Depth = calls before it on its thread still open at its start (end > start): its rank less those
    closed, by ``searchsorted`` on the sorted ends (zero-length calls tied on its start and placed after it
    are not before it); its parent = the last call before it one level up."""
    import numpy as np

    t, e, thread = cs.ts[members], cs.end[members], cs.thread[members]
    if (e < t).any():
        return None
    m = len(t)
    out = np.full(m, -1, np.int64)
    order = np.argsort(thread, kind="stable")
    cut = np.flatnonzero(np.diff(thread[order])) + 1
    for lo, hi in zip([0, *cut.tolist()], [*cut.tolist(), m], strict=True):
        rows = order[lo:hi]
        s, en = t[rows], e[rows]
        k = hi - lo
        rank = np.arange(k, dtype=np.int64)
        closed = np.searchsorted(np.sort(en), s, "right")
        zero = en == s
        if zero.any():
            counted = np.concatenate(([0], np.cumsum(zero)))
            first, last = np.searchsorted(s, s, "left"), np.searchsorted(s, s, "right")
            closed = closed - (counted[last] - counted[np.maximum(rank, first)])
        depth = rank - closed
        if (depth < 0).any():
            return None
        keys = np.sort(depth * (k + 1) + rank)
        nested = np.flatnonzero(depth > 0)
        j = np.searchsorted(keys, (depth[nested] - 1) * (k + 1) + rank[nested]) - 1
        if (j < 0).any() or (keys[np.maximum(j, 0)] // (k + 1) != depth[nested] - 1).any():
            return None
        out[rows[nested]] = rows[keys[j] % (k + 1)]
    has = out >= 0
    return None if (e[has] > e[out[has]]).any() else out


def _parents_walk(cs: _Calls, members: Any, chunk: int = _CHUNK) -> Any:
    """Per call, the call on top of its thread's stack of open calls at its start (-1: none): any nesting.
    A call is popped once it has ended, so memory is the nesting depth; columns are read a chunk at a time."""
    import numpy as np

    out = array("q", bytes(8 * len(members)))
    stacks: dict[int, list[tuple[int, int]]] = {}  # per thread: (position, end) of the calls open
    n = 0
    for lo in range(0, len(members), chunk):
        at = members[lo : lo + chunk]
        for t, e, thread in zip(cs.ts[at].tolist(), cs.end[at].tolist(), cs.thread[at].tolist(), strict=True):
            stack = stacks.get(thread)
            if stack is None:
                stack = stacks[thread] = []
            while stack and stack[-1][1] <= t:
                stack.pop()
            out[n] = stack[-1][0] if stack else -1
            stack.append((n, e))
            n += 1
    return np.frombuffer(out, np.int64)


def _segment(ctx: _Context, j: int, seg: Segment) -> tuple[SegmentTime, Spent | None]:
    import numpy as np

    cs = ctx.calls
    bounded = math.isfinite(seg.start) and math.isfinite(seg.end)
    s0, s1 = (_ns(seg.start), _ns(seg.end)) if bounded else ctx.span
    s1 = max(s0, s1)
    pid = seg.pid if bounded else None
    if ctx.placed is not None:
        members = ctx.placed.members[j]
    else:
        members = cs.order[np.searchsorted(cs.starts, s0, "left") : np.searchsorted(cs.starts, s1, "right")]
        if pid is not None:
            members = members[cs.pid[cs.thread[members]] == cs.pid_index.get(pid, -1)]
    pieces, n_windows = _pieces(ctx, members, s0, s1, pid, j)
    phases = dict(zip(PHASES, pieces.lengths, strict=True))
    spent = _spent(ctx, members, pieces, s0, s1) if ctx.top > 0 else None
    top = _top(spent, ctx.top, cs.names) if spent is not None else []
    return SegmentTime(seg.label, seg.bs, E.segment_variant(seg.label), s1 - s0, phases, n_windows, top), spent


def build(path: str, identity: Identity, tl: Timeline, top: int, vectorised: bool = True) -> TraceTime:
    """The TraceTime of a trace's timeline; ``vectorised`` False: every
    segment's self time by the stack walk (``_spent``)."""
    segs, source = segments_of(tl.ranges, identity)
    cs = _Calls(tl)
    c = tl.calls
    inst = [i for i in range(len(c.kind)) if c.kind[i] == C_INSTANTIATE]
    instantiates = [(tl.thread_pid[c.thread[i]], _ns(c.start[i]), _ns(c.end[i])) for i in inst]
    span = (_ns(tl.span[0]), _ns(tl.span[1])) if tl.span is not None else (0, 0)
    marks = tl.capture_windows()
    placed = _placed(tl, segs, source, cs, [b for b, _ in marks], inst)
    ctx = _Context(cs, _windows(tl, marks), instantiates, top, span, placed, vectorised)
    done = [_segment(ctx, j, s) for j, s in enumerate(segs)]
    spent = [x for _, x in done if x is not None]
    total = _top((sum(x[0] for x in spent), sum(x[1] for x in spent)), top, cs.names) if spent else []
    return TraceTime(path, identity, source, [s for s, _ in done], total)


def time_trace(path: str, top: int = DEFAULT_TOP, progress: Callable[[int, int], None] | None = None) -> TraceTime:
    """Read ``path`` in one streaming pass and time its segments; raises TraceError for bad input."""
    tl = load_timeline(path, progress, fields=BareEvent)
    return build(path, identify(tl), tl, top)


# -- the command ---------------------------------------------------------------------------------------


def add(subparsers: Any) -> None:
    p = add_command(
        subparsers,
        "time",
        "Split each segment (batch size, variant) of each runner's capture into warm-up passes, the "
        "capture window, graph instantiation and the rest; bars per segment, top CPU ops by self time per "
        "phase, runners side by side. Profiling inflates CPU time: compare shares, runners and batch sizes.",
        ["capture-trace time /tmp/graph_capture_profile", "capture-trace time --json --top 3 run1"],
        exit_codes=("every trace was timed", "(not used)", "bad input or usage (other files still reported)"),
    )
    p.add_argument("paths", metavar="TRACE_OR_DIR", nargs="+", help="trace files or directories of traces")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument(
        "--top", type=non_negative_int("--top"), default=DEFAULT_TOP, metavar="N", help="top N ops per phase"
    )
    add_jobs_option(p)
    p.set_defaults(func=with_limits(cmd_time, p))


def _time_job(path: str, top: int, progress: Callable[[int, int], None] | None = None) -> TraceTime:
    return time_trace(path, top, progress)


def time_doc(traces: list[Any], identities: list[Identity]) -> dict[str, Any]:
    """``time --json``'s document for the traces' objects and their identities (``time`` and ``report``
    print it): each trace says its run; given several runs, ``comparison`` sets them side by side."""
    labels = run_labels(i.run for i in identities)
    for t, i in zip(traces, identities, strict=True):
        t["run"] = labels[i.run]
    doc: dict[str, Any] = {"note": NOTE, "traces": traces}
    if len(labels) > 1:
        runs = doc["runs"] = list(labels.values())
        rows = compare_runs(traces, runs)
        if any(sum(w is not None for w in r["wall_us"]) > 1 for r in rows):  # a runner and shape in two runs
            doc["comparison"] = rows
    return doc


def compare_runs(traces: list[dict[str, Any]], runs: list[str]) -> list[dict[str, Any]]:
    """Per runner (with its ranks) and shape, the wall time in each run, in ``runs`` order, and its change
    against the first run (a fraction; null where either is missing or the first is 0)."""
    cells: dict[tuple[Any, ...], dict[str, float]] = {}
    for t in traces:
        who = (t.get("runner") or "?", t.get("tp_rank"), t.get("pp_rank") or 0, t.get("capture_index", 1))
        for s in t["segments"]:
            cells.setdefault((*who, s["label"]), {})[t["run"]] = s["wall_us"]
    rows = []
    for (runner, tp, pp, index, label), got in cells.items():
        walls = [got.get(r) for r in runs]
        first = walls[0]
        change = [None if w is None or not first else round(w / first - 1.0, 4) for w in walls]
        rows.append(
            {"runner": runner, "tp_rank": tp, "pp_rank": pp, "capture_index": index, "label": label,
             **size_json(label), "wall_us": walls, "change": change}
        )
    return rows


def cmd_time(args: argparse.Namespace) -> int:
    from mixins.analysis.model.roles import READS
    from mixins.analysis.serialise import to_json

    files, listed, bad = expand_paths(list(args.paths))
    results, bad_files = collect_results(
        map_files(_time_job, files, (args.top,), args.jobs, not args.json), listed, reads=("time", READS["time"])
    )
    if not results and (bad or bad_files):  # each file said why on stderr: no empty document
        return TROUBLE
    doc = time_doc([to_json(r) for r in results], [r.identity for r in results])
    if args.json:
        render.print_json(doc)
    elif results:
        from mixins.analysis.commands.time_render import render_time

        render_time(doc)
    return TROUBLE if bad or bad_files else OK
