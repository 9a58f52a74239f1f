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
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Callable
from heapq import merge
from itertools import accumulate, chain, repeat
from operator import lshift, sub
from typing import Any

from msgspec import Struct, field

from mixins.analysis import render
from mixins.analysis.jobs import OK, TROUBLE, add_jobs_option, collect_results, expand_paths, map_files, with_limits
from mixins.analysis.model import events as E
from mixins.analysis.model.events import C_INSTANTIATE
from mixins.analysis.model.identity import Identity
from mixins.analysis.model.interval_sets import IntervalSet, clip, subtract, union
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


class _Calls:
    """The timeline's CPU ops and runtime calls as one set of parallel arrays in integer ns."""

    def __init__(self, tl: Timeline) -> None:
        ops, calls = tl.ops, tl.calls
        names: dict[str, int] = {}
        op_names = [names.setdefault(n, len(names)) for n, _, _ in tl.signatures]
        call_names = [names.setdefault(n, len(names)) for n in tl.call_names]
        self.names = list(names)
        self.n_ops = len(ops.start)  # indexes below are cpu_ops, the rest runtime calls
        # streamed into the columns in C (map: no Python frame, tuple or list per call, so memory per event stays small)
        self.ts = array("q", map(round, map(_NS_PER_US.__mul__, chain(ops.start, calls.start))))
        self.end = array("q", map(round, map(_NS_PER_US.__mul__, chain(ops.end, calls.end))))
        self.thread = ops.thread + calls.thread
        self.name = array("i", chain(map(op_names.__getitem__, ops.label), map(call_names.__getitem__, calls.name)))
        self.thread_pid = tl.thread_pid
        self._numpy: dict[str, Any] = {}

    def columns(self, name: str) -> Any:
        """One column as a numpy array (a view of the array's buffer; built once)."""
        got = self._numpy.get(name)
        if got is None:
            import numpy as np

            column: array = getattr(self, name)
            got = self._numpy[name] = np.frombuffer(column, np.int64 if column.itemsize == 8 else np.int32)
        return got

    def start_order(self) -> array:
        """Call indexes by start, the longer first on a tie (a parent before its children), file order
        after that (a stable sort).

        One sort on one integer per call, built in C: ``start << 64`` less the end orders by start, then
        by end descending, because |end| <= 8e18 ns < 2**63 (start and duration each within
        ±``MAX_TIME_US``) keeps any two ends' difference under one step of start. No key tuples; one
        sort instead of two (0.35 → 0.20 s on 500k calls).
        """
        keys = list(map(sub, map(lshift, self.ts, repeat(64)), self.end))
        return array("i", sorted(range(len(keys)), key=keys.__getitem__))


def _windows(tl: Timeline, marks: list[tuple[int, int]]) -> list[tuple[Any, int, int]]:
    """(pid, BeginCapture end, EndCapture end) in ns of each capture window (``marks``: the one definition,
    ``Timeline.capture_windows``); a window never closed runs to the segment's end."""
    c = tl.calls
    return [(tl.thread_pid[c.thread[b]], _ns(c.end[b]), _ns(c.end[e]) if e >= 0 else _FOREVER) for b, e in marks]


class _Placed(Struct):
    """Each segment's calls, and the segment of each capture window and instantiate (by its begin)."""

    members: list[array]
    window_segment: list[int]
    instantiate_segment: list[int]


def _placed(
    tl: Timeline, segs: list[Segment], source: str, cs: _Calls, order: array, begins: list[int], instantiates: list[int]
) -> _Placed | None:
    """Where two segments of one process overlap in time (captures on two threads at once): each call goes
    to one segment, where ``summary`` counts it (``Timeline.segment_finder``: the innermost containing one of
    its process), and each capture window and instantiate to its begin's. None when no two overlap: a
    call is then in at most one, and slicing the calls by time (``_segment``) is the same answer for less."""
    ends: dict[Any, float] = {}
    overlap = False
    for s in sorted((s for s in segs if math.isfinite(s.start) and math.isfinite(s.end)), key=lambda s: s.start):
        overlap = overlap or s.start < ends.get(s.pid, -math.inf)
        ends[s.pid] = max(s.end, ends.get(s.pid, -math.inf))
    if not overlap:
        return None
    find = tl.segment_finder(segs, source)
    c = tl.calls
    owner = [find(t, th) for t, th in zip(chain(tl.ops.start, c.start), cs.thread, strict=True)]
    members = [array("i") for _ in segs]
    for i in order:
        if owner[i] >= 0:
            members[owner[i]].append(i)
    def segment_of(calls: list[int]) -> list[int]:  # a window or instantiate: its begin's segment
        return [find(c.start[i], c.thread[i]) for i in calls]

    return _Placed(members, segment_of(begins), segment_of(instantiates))


class _Context(Struct):
    """What every segment's computation reads: the calls in start order, windows, instantiates, and
    where segments of a process overlap, which segment each belongs to."""

    calls: _Calls
    order: array
    starts: array
    windows: list[tuple[Any, int, int]]
    instantiates: list[tuple[Any, int, int]]
    top: int
    span: tuple[int, int]
    placed: _Placed | None = None
    vectorised: bool = True  # self time by columns where calls nest properly (False: always the stack walk)


def _phase_intervals(
    ctx: _Context, members: array, s0: int, s1: int, pid: Any, j: int
) -> tuple[dict[str, IntervalSet], int]:
    """capture / instantiate / warmup interval sets of segment ``j``, and its number of capture windows."""
    mine = pid is None
    placed = ctx.placed
    if placed is not None:  # segments of a process overlap: what began in this one
        ours = [(a, b) for k, (_, a, b) in enumerate(ctx.windows) if placed.window_segment[k] == j]
        theirs = [(a, b) for k, (_, a, b) in enumerate(ctx.instantiates) if placed.instantiate_segment[k] == j]
    else:  # a window never closed runs to the end of the segment it began in, not into every later one
        ours = [(a, b) for p, a, b in ctx.windows if (mine or p == pid) and (b != _FOREVER or s0 <= a <= s1)]
        theirs = [(a, b) for p, a, b in ctx.instantiates if mine or p == pid]
    windows = clip(ours, s0, s1)
    capture = union(windows)
    inst = subtract(union(clip(theirs, s0, s1)), capture)
    first = capture.starts[0] if capture else s1
    cs = ctx.calls
    ops = ((cs.ts[i], min(cs.end[i], first)) for i in members if cs.ts[i] < first and i < cs.n_ops)  # cpu_ops
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


class _Measure:
    """How much of ``[lo, t)`` an interval set covers, for any ``t`` (prefix sums + bisect)."""

    def __init__(self, ivs: IntervalSet) -> None:
        self.starts, self.ends = ivs.starts, ivs.ends
        self.before = array("q", accumulate(map(sub, ivs.ends, ivs.starts), initial=0))

    def __call__(self, t: int) -> int:
        k = bisect_right(self.starts, t) - 1
        return 0 if k < 0 else self.before[k] + min(t, self.ends[k]) - self.starts[k]


def _partition(sets: list[IntervalSet], s0: int, s1: int) -> tuple[array, array]:
    """``[s0, s1)`` cut into consecutive pieces, each in one phase: (piece ends, phase index), ``len(sets)``
    standing for "other" (the gaps). The phases' interval sets are disjoint by construction, so merging
    them by start streams the pieces in order."""
    ends = array("q")
    phase = array("b")
    at = s0
    for a, b, k in merge(*(zip(ivs.starts, ivs.ends, repeat(k)) for k, ivs in enumerate(sets))):
        if a > at:
            ends.append(a)
            phase.append(len(sets))
        ends.append(b)
        phase.append(k)
        at = b
    if at < s1:
        ends.append(s1)
        phase.append(len(sets))
    return ends, phase


#: The most calls a segment may have for self time by columns (their temporaries, ~265 B a call, are then
#: at most ~35 MiB whatever the trace's size); larger segments take the stack walk (~50 B a call).
COLUMNS_MAX_CALLS = 1 << 17


def _spent(ctx: _Context, members: array, sets: dict[str, IntervalSet], s0: int, s1: int) -> _Spent:
    """Each call's self time (its duration less the calls nested in it on its thread), cut by the phases:
    what lies in a phase counts there and only there, and nothing outside the segment counts. So on one
    thread a phase's ops never add up to more than the phase (an op starting in warm-up and running on
    through a capture window gives each phase its own part); threads at work at once each count theirs.

    Two paths, one answer: the columns (:func:`_spent_columns`, numpy) when the segment's calls nest
    properly on each thread, else the stack walk (:func:`_spent_walk`); ``ctx.vectorised`` False forces
    the walk (the property test in tests/analysis/test_time_paths.py holds them equal). A segment of more
    than ``COLUMNS_MAX_CALLS`` calls takes the walk too: the columns' temporaries (~265 B a call) then stay
    a constant, and memory per event at the event limit is the walk's (tests/analysis/test_bounds.py)."""
    present = [(p, ivs) for p, ivs in sets.items() if ivs]
    phases = [p for p, _ in present] + ["other"]
    n = len(phases)
    measures = [_Measure(ivs) for _, ivs in present]
    ends, piece_phase = _partition([ivs for _, ivs in present], s0, s1)
    columns = ctx.vectorised and len(members) <= COLUMNS_MAX_CALLS
    got = _spent_columns(ctx.calls, members, s0, s1, measures, ends, piece_phase) if columns else None
    spent_ns, spent_calls = got if got is not None else _spent_walk(ctx.calls, members, s0, s1, measures, ends,
                                                                     piece_phase)
    out = _Spent()
    for at, calls in enumerate(spent_calls):
        if calls:
            key = (phases[at % n], at // n)
            out.ns[key], out.calls[key] = int(spent_ns[at]), int(calls)
    return out


def _spent_columns(
    cs: _Calls, members: array, s0: int, s1: int, measures: list[_Measure], ends: array, piece_phase: array
) -> tuple[Any, Any] | None:
    """Self time per (name, phase) by columns: each call's parent from its depth on its thread (calls open
    at its start, by ``searchsorted`` on the sorted ends), its own part by ``searchsorted`` on the phase
    pieces, self = own - children's (``np.add.at``, exact integers). None when a call runs past its
    parent's end or ends before it starts (improper nesting: the stack walk's rule decides those)."""
    import numpy as np

    n = len(measures) + 1
    other = n - 1
    m = len(members)
    if not m:
        return [0] * (len(cs.names) * n), [0] * (len(cs.names) * n)
    at = np.frombuffer(members, np.int32) if members.itemsize == 4 else np.array(members, np.int64)
    t, e = cs.columns("ts")[at], cs.columns("end")[at]
    if (e < t).any():
        return None
    a, b = np.clip(t, s0, s1), np.clip(e, s0, s1)
    pieces, piece_of = np.frombuffer(ends, np.int64), np.frombuffer(piece_phase, np.int8)
    if not len(pieces):  # an empty segment: nothing in it
        pieces, piece_of = np.array([s1], np.int64), np.array([other], np.int8)
    valid = b > a
    piece = np.minimum(np.searchsorted(pieces, a, "right"), len(pieces) - 1)
    single = valid & (b <= pieces[piece])
    phase = np.where(single, piece_of[piece], other).astype(np.int64)
    own = np.where(single, b - a, 0)
    parent = _parents(t, e, cs.columns("thread")[at])
    if parent is None:
        return None
    has = np.flatnonzero(parent >= 0)
    if (e[has] > e[parent[has]]).any():
        return None
    self_ns = np.zeros(m * n, np.int64)
    pos = np.arange(m, dtype=np.int64)
    np.add.at(self_ns, pos * n + phase, own)
    np.add.at(self_ns, parent[has] * n + phase[has], -own[has])
    for i in np.flatnonzero(valid & ~single).tolist():  # crossing a phase boundary: a vector (rare)
        vec = _clipped(int(a[i]), int(b[i]), s0, s1, measures, other, n)
        p = int(parent[i])
        for k, x in enumerate(vec):
            self_ns[i * n + k] += x
            if p >= 0:
                self_ns[p * n + k] -= x
    spent = np.flatnonzero(self_ns > 0)
    key = cs.columns("name")[at][spent // n].astype(np.int64) * n + spent % n
    size = len(cs.names) * n
    spent_ns = np.zeros(size, np.int64)
    np.add.at(spent_ns, key, self_ns[spent])
    return spent_ns, np.bincount(key, minlength=size)


def _parents(t: Any, e: Any, thread: Any) -> Any:
    """Per call (in start order, a parent before its children), the innermost call open at its start on
    its thread (position, -1: none), or None where the calls do not nest (the depth rule fails).

    Depth = calls before it on its thread still open at its start (end > start): its rank less those
    closed, by ``searchsorted`` on the sorted ends (zero-length calls tied on its start and placed after it
    are not before it); its parent = the last call before it one level up."""
    import numpy as np

    m = len(t)
    out = np.full(m, -1, np.int64)
    order = np.lexsort((np.arange(m), thread))
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
    return out


def _spent_walk(
    cs: _Calls, members: array, s0: int, s1: int, measures: list[_Measure], ends: array, piece_phase: array
) -> tuple[list[int], list[int]]:
    """Self time per (name, phase) by a stack of open calls per thread: any nesting.

    Most calls lie inside one piece of one phase (and so do the calls nested in them): found by a cursor
    (calls come in start order), such a call carries one number, its phase and self time; only a call
    that crosses a boundary carries a vector per phase, measured with prefix sums (``_Measure``)."""
    n = len(measures) + 1
    other = n - 1
    cursor = 0
    ts, end, thread, name = cs.ts, cs.end, cs.thread, cs.name
    spent_ns = [0] * (len(cs.names) * n)  # by name id * n + phase
    spent_calls = [0] * len(spent_ns)

    def done(i: int, k: int, v: Any) -> None:
        at = name[i] * n
        if k >= 0:  # all of it in phase k
            if v > 0:
                spent_ns[at + k] += v
                spent_calls[at + k] += 1
            return
        for k, x in enumerate(v):
            if x > 0:
                spent_ns[at + k] += x
                spent_calls[at + k] += 1

    # One stack of open calls per thread, [call, phase or -1, self time so far: a number, or a vector
    # per phase when the phase is -1]; a call is final when it is popped, so memory is the nesting depth.
    stacks: dict[int, list[list[Any]]] = {}
    for i in members:  # in start order: a parent before its children
        t, e = ts[i], end[i]
        a = s0 if t < s0 else s1 if t > s1 else t  # [s0, s1) ∩ [t, e)
        b = s0 if e < s0 else s1 if e > s1 else e
        k: int = other
        v: Any = 0  # phase k's self time, or with k = -1 a vector per phase
        if b > a:
            while ends[cursor] <= a:  # calls come in start order; a < s1, the last end
                cursor += 1
            if b <= ends[cursor]:  # the usual case: inside one piece of one phase
                k, v = piece_phase[cursor], b - a
            else:
                k, v = -1, _clipped(a, b, s0, s1, measures, other, n)
        stack = stacks.get(thread[i])
        if stack is None:
            stack = stacks[thread[i]] = []
        while stack and end[stack[-1][0]] <= t:
            done(*stack.pop())
        if stack:
            parent = stack[-1]
            pe = end[parent[0]]
            if e <= pe and k >= 0:
                if v and parent[1] == k:  # the usual case: both in the one piece
                    parent[2] -= v
                elif v:
                    _as_vector(parent, n)[k] -= v
            else:  # a vector, or a child running on past its parent's end: only its part inside counts
                nested = v if e <= pe else _clipped(t, pe, s0, s1, measures, other, n)
                parent_vec = _as_vector(parent, n)
                for j in range(n):
                    parent_vec[j] -= nested[j]
        stack.append([i, k, v])
    for stack in stacks.values():
        for item in stack:
            done(*item)
    return spent_ns, spent_calls


def _as_vector(item: list[Any], n: int) -> list[int]:
    """A stack item's self time as a vector per phase (converted in place from its one-phase form)."""
    if item[1] >= 0:
        vec = [0] * n
        vec[item[1]] = item[2]
        item[1], item[2] = -1, vec
    vector: list[int] = item[2]
    return vector


def _clipped(a: int, b: int, s0: int, s1: int, measures: list[_Measure], other: int, n: int) -> list[int]:
    """[s0, s1) ∩ [a, b) per phase by prefix sums (a child running past its parent's end: rare)."""
    a, b = min(max(a, s0), s1), min(max(b, s0), s1)
    vec = [0] * n
    if b > a:
        got = [m(b) - m(a) for m in measures]
        vec[:other] = got
        vec[other] = (b - a) - sum(got)
    return vec


def _segment(ctx: _Context, j: int, seg: Segment, total: _Spent) -> SegmentTime:
    cs = ctx.calls
    bounded = math.isfinite(seg.start) and math.isfinite(seg.end)
    s0, s1 = (_ns(seg.start), _ns(seg.end)) if bounded else ctx.span
    s1 = max(s0, s1)
    pid = seg.pid if bounded else None
    if ctx.placed is not None:
        members = ctx.placed.members[j]
    else:
        members = ctx.order[bisect_left(ctx.starts, s0) : bisect_right(ctx.starts, s1)]  # an array: 4 B a call
        if pid is not None:
            members = array("i", [i for i in members if cs.thread_pid[cs.thread[i]] == pid])
    sets, n_windows = _phase_intervals(ctx, members, s0, s1, pid, j)
    phases = {p: sets[p].length for p in PHASES[:-1]}
    phases["other"] = (s1 - s0) - sum(phases.values())
    spent = _spent(ctx, members, sets, s0, s1) if ctx.top > 0 else _Spent()
    total.add(spent)
    top = spent.top(ctx.top, cs.names)
    return SegmentTime(seg.label, seg.bs, E.segment_variant(seg.label), s1 - s0, phases, n_windows, top)


def build(path: str, identity: Identity, tl: Timeline, top: int, vectorised: bool = True) -> TraceTime:
    """The TraceTime of a trace's timeline (loaded with or without links); ``vectorised`` False: every
    segment's self time by the stack walk (``_spent``)."""
    segs, source = segments_of(tl.ranges, identity)
    cs = _Calls(tl)
    order = cs.start_order()
    starts = array("q", map(cs.ts.__getitem__, order))
    c = tl.calls
    inst = [i for i in range(len(c.kind)) if c.kind[i] == C_INSTANTIATE]
    instantiates = [(tl.thread_pid[c.thread[i]], _ns(c.start[i]), _ns(c.end[i])) for i in inst]
    span = (_ns(tl.span[0]), _ns(tl.span[1])) if tl.span is not None else (0, 0)
    marks = tl.capture_windows()
    placed = _placed(tl, segs, source, cs, order, [b for b, _ in marks], inst)
    ctx = _Context(cs, order, starts, _windows(tl, marks), instantiates, top, span, placed, vectorised)
    total = _Spent()
    segments = [_segment(ctx, j, s, total) for j, s in enumerate(segs)]
    return TraceTime(path, identity, source, segments, total.top(top, cs.names))


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
