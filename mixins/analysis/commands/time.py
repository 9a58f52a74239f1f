"""``time``: where a runner's capture start-up time goes, per segment (batch size, variant): its wall time cut
into capture > instantiate > warmup > other, in integer ns so the phases sum exactly, and the top CPU ops of
each phase by self time (the phases and their precedence: docs/DESIGN.md §7, "``time``")."""

from __future__ import annotations

import argparse
import math
from array import array
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from itertools import chain
from typing import Any, NamedTuple

from msgspec import Struct, field

from mixins.analysis import render
from mixins.analysis.jobs import collect_results, expand_paths, map_files, with_limits
from mixins.analysis.model.events import C_INSTANTIATE, segment_variant
from mixins.analysis.model.identity import Identity
from mixins.analysis.model.record import Segment
from mixins.analysis.model.roles import identify, run_labels
from mixins.analysis.model.segments import segments_of, size_json
from mixins.analysis.model.timeline import BareEvent, Timeline, load_timeline
from mixins.analysis.serialise import to_json
from mixins.formats import PHASES
from mixins.helptext import add_command, non_negative_int
from mixins.usage import OK, TROUBLE

__all__ = ["PHASES", "NOTE", "TraceTime", "time_trace", "phases_json"]

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


def phases_json(phases_ns: dict[str, int], wall_ns: int) -> dict[str, Any]:
    """wall_us, phases in µs and shares. Exact in integer ns (``phases_ns`` sum to ``wall_ns``, also in the
    JSON); in µs floats ``other`` is chosen so the sum equals wall_us where a float can make it so, else it is
    off by less than a nanosecond (for some splits no float ``other`` makes a float sum exact)."""
    wall = wall_ns / _NS_PER_US
    out = {p: phases_ns[p] / _NS_PER_US for p in PHASES[:-1]}
    parts = sum(out.values())
    other = wall - parts
    rounded = max(0.0, round(other, 3)) + 0.0  # never -0.0
    near = (rounded, *(max(0.0, rounded + k * math.ulp(wall)) for k in (1, -1, 2, -2)), other)
    out["other"] = next((c for c in near if parts + c == wall), rounded)
    shares = {p: round(v / wall, 4) if wall > 0 else 0.0 for p, v in out.items()}
    return {"wall_us": wall, "phases": out, "shares": shares}


class TraceTime(Struct):
    path: str
    identity: Identity
    segment_source: str
    segments: list[dict[str, Any]]  # each as ``time --json`` shows it (``_Timer.segment``)
    top: list[dict[str, Any]] = field(default_factory=list)  # over all segments

    def as_json(self) -> dict[str, Any]:
        segs = self.segments
        totals = phases_json({p: sum(s["phases_ns"][p] for s in segs) for p in PHASES}, sum(s["wall_ns"] for s in segs))
        ident = self.identity.as_json()
        return {
            "path": self.path,
            "role": self.identity.role,
            "run": None,  # the run's label: set where all the traces shown are known (``time_doc``)
            "runner": ident.pop("runner"),
            "tp_rank": ident.pop("tp_rank"),
            **ident,
            "segment_source": self.segment_source,
            "totals": {**totals, "top": self.top},
            "segments": self.segments,
        }


_WARMUP, _CAPTURE, _INSTANTIATE, _OTHER = range(len(PHASES))  # phase index: PHASES order
Spent = tuple[Any, Any]  # self ns and calls per (phase index, name id): two int64 arrays


class _Columns(NamedTuple):
    """Calls as numpy columns in start order: start and end (integer ns), thread, name id, is a CPU op."""

    ts: Any
    end: Any
    thread: Any
    name: Any
    op: Any


Finder = Callable[[float, int], int]  # (start, thread) -> segment: ``Timeline.segment_finder``


def _columns(tl: Timeline, find: Finder | None) -> tuple[_Columns, list[str], Any]:
    """The timeline's CPU ops and runtime calls sorted by start, the longer first on a tie (a parent before
    its children), then ops before calls in file order, the names their ids index, and (``find`` given) the
    segment of each. Kept in that order, not indexed through a permutation, a segment's calls are a slice of
    views (memory per event: tests/analysis/test_bounds.py)."""
    import numpy as np

    ops, calls = tl.ops, tl.calls
    names: dict[str, int] = {}
    op_names = np.array([names.setdefault(n, len(names)) for n, _, _ in tl.signatures], np.int32)
    call_names = np.array([names.setdefault(n, len(names)) for n in tl.call_names], np.int32)

    def ns(a: array, b: array) -> Any:  # a chunk at a time: no float copy of the whole column
        out = np.empty(len(a) + len(b), np.int64)
        for to, us in ((out[: len(a)], a), (out[len(a) :], b)):
            for i in range(0, len(us), _CHUNK):
                to[i : i + _CHUNK] = np.rint(np.frombuffer(us, np.float64)[i : i + _CHUNK] * _NS_PER_US)
        return out

    ts, end = ns(ops.start, calls.start), ns(ops.end, calls.end)
    order = np.lexsort((np.negative(end, out=end), ts))
    ts, end = ts[order], np.negative(end, out=end)[order]
    name = np.concatenate((op_names[np.frombuffer(ops.label, np.int32)],
                           call_names[np.frombuffer(calls.name, np.int32)]))
    thread = np.concatenate((np.frombuffer(ops.thread, np.int32), np.frombuffer(calls.thread, np.int32)))
    owner = None
    if find is not None:
        starts, threads = chain(ops.start, calls.start), chain(ops.thread, calls.thread)
        owner = np.array([find(t, th) for t, th in zip(starts, threads, strict=True)], np.int32)[order]
    return _Columns(ts, end, thread[order], name[order], order < len(ops.start)), list(names), owner


def _overlapping(tl: Timeline, segs: list[Segment], source: str) -> Finder | None:
    """Where two segments of one process overlap in time (captures on two threads at once), the segment of a
    call: each goes to one, where ``summary`` counts it (``Timeline.segment_finder``: the innermost containing
    one of its process), and each capture window and instantiate to its begin's. None when no two overlap: a
    call is then in at most one, and slicing the calls by time (``_Timer.segment``) is the same answer for less."""
    ends: dict[Any, float] = {}
    overlap = False
    for s in sorted((s for s in segs if math.isfinite(s.start) and math.isfinite(s.end)), key=lambda s: s.start):
        overlap = overlap or s.start < ends.get(s.pid, -math.inf)
        ends[s.pid] = max(s.end, ends.get(s.pid, -math.inf))
    return tl.segment_finder(segs, source) if overlap else None


def _union(chunks: Iterable[tuple[Any, Any]]) -> Iterator[Any]:
    """The intervals ``[a, b)`` (numpy columns, a chunk at a time, ``a`` ascending) merged where they touch or
    overlap, empty ones dropped: their starts and ends interleaved, a chunk at a time (docs/DESIGN.md §7)."""
    import numpy as np

    open_: tuple[Any, Any] | None = None  # the merged interval the next chunk may extend
    for a, b in chunks:
        keep = b > a
        a, b = a[keep], b[keep]
        if open_ is not None:
            a, b = np.append(open_[0], a), np.append(open_[1], b)
        if not len(a):
            continue
        reach = np.maximum.accumulate(b)
        first = np.flatnonzero(np.append(True, a[1:] > reach[:-1]))  # the first of each merged interval
        out = np.empty(2 * len(first) - 2, np.int64)
        out[::2], out[1::2] = a[first[:-1]], reach[first[1:] - 1]
        open_ = (a[first[-1]], reach[-1])
        yield out
    if open_ is not None:
        yield np.array(open_, np.int64)


class _Pieces:
    """``[s0, s1)`` cut into consecutive runs, each in one phase: run i is ``[bounds[i], bounds[i + 1])`` in
    ``phase[i]``; ``lengths``: each phase's total. Any ``[a, b)`` is measured in a phase by ``searchsorted``
    (:meth:`cover`)."""

    def __init__(self, bounds: Any, phase: Any) -> None:
        import numpy as np

        self.bounds, self.phase = bounds, phase
        lengths = np.zeros(len(PHASES), np.int64)
        for lo in range(0, len(phase), _CHUNK):
            np.add.at(lengths, phase[lo : lo + _CHUNK], np.diff(bounds[lo : lo + _CHUNK + 1]))
        self.lengths = lengths.tolist()
        self._before: tuple[int, Any] = (-1, None)

    def cover(self, a: Any, b: Any, k: int) -> Any:
        """How much of each ``[a, b)`` (within ``[s0, s1]``, ``a <= b``) lies in phase ``k``: from the run ``a``
        is in when ``b`` is too (the usual case), else by prefix sums (:meth:`_upto`)."""
        import numpy as np

        ends = self.bounds[1:]
        i = np.minimum(np.searchsorted(ends, a, "right"), len(ends) - 1)  # past the last: a = b = s1
        single = b <= ends[i]
        out = np.where(single & (self.phase[i] == k), b - a, 0)
        cross = np.flatnonzero(~single)
        if len(cross):
            out[cross] = self._upto(b[cross], k) - self._upto(a[cross], k)
        return out

    def _upto(self, t: Any, k: int) -> Any:
        """How much of each ``[s0, t)`` lies in phase ``k``."""
        import numpy as np

        if self._before[0] != k:  # phase k's length in the runs before each run (made on first use)
            self._before = (-1, None)
            before = np.zeros(len(self.bounds), np.int64)
            np.subtract(self.bounds[1:], self.bounds[:-1], out=before[1:])
            before[1:][self.phase != k] = 0
            self._before = (k, np.cumsum(before, out=before))
        i = np.minimum(np.searchsorted(self.bounds[1:], t, "right"), len(self.phase) - 1)
        return self._before[1][i] + np.where(self.phase[i] == k, t - self.bounds[i], 0)


def _top(spent: Spent, n: int, names: list[str]) -> list[dict[str, Any]]:
    """Per phase, the ``n`` names (CPU ops, runtime calls) with the most self time, and how often each ran."""
    import numpy as np

    ns, calls = spent
    out = []
    for k, phase in enumerate(PHASES):
        rows = sorted(((int(ns[k, i]), i) for i in np.flatnonzero(ns[k] > 0).tolist()), reverse=True)
        out += [{"phase": phase, "op": names[i], "self_us": v / _NS_PER_US, "count": int(calls[k, i])}
                for v, i in rows[:n]]
    return out


#: The most calls a segment may have for its nesting by columns (their sort's temporaries then stay a
#: constant whatever the trace's size); larger segments are nested by the stack walk (4 B a call).
COLUMNS_MAX_CALLS = 1 << 17


def _parents(calls: _Columns) -> Any:
    """Per call (in start order, a parent before its children), the innermost call open at its start on
    its thread (position, -1: none), or None where the calls do not nest: one runs past its parent's end
    or ends before it starts (the stack walk's rule decides those).

    Depth = calls before it on its thread still open at its start (end > start): its rank less those
    closed, by ``searchsorted`` on the sorted ends (zero-length calls tied on its start and placed after it
    are not before it); its parent = the last call before it one level up."""
    import numpy as np

    t, e, thread = calls.ts, calls.end, calls.thread
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


def _parents_walk(calls: _Columns) -> Any:
    """Per call, the call on top of its thread's stack of open calls at its start (-1: none): any nesting.
    A call is popped once it has ended, so memory is the nesting depth; columns are read a chunk at a time."""
    import numpy as np

    m = len(calls.ts)
    out = array("i" if m < 1 << 31 else "q", [-1]) * m
    stacks: defaultdict[int, list[tuple[int, int]]] = defaultdict(list)  # per thread: (position, end) of the calls open
    for lo in range(0, m, _CHUNK):
        at = slice(lo, lo + _CHUNK)
        rows = zip(calls.ts[at].tolist(), calls.end[at].tolist(), calls.thread[at].tolist(), strict=True)
        for n, (t, e, thread) in enumerate(rows, lo):
            stack = stacks[thread]
            while stack and stack[-1][1] <= t:
                stack.pop()
            out[n] = stack[-1][0] if stack else -1
            stack.append((n, e))
    return np.frombuffer(out, out.typecode)


class _Timer:
    """What every segment's computation reads: the timeline's calls as columns, each capture window and
    instantiate where it began; :meth:`segment` times one segment."""

    def __init__(self, tl: Timeline, segs: list[Segment], source: str, top: int, vectorised: bool) -> None:
        c, find = tl.calls, _overlapping(tl, segs, source)

        def began_in(i: int) -> Any:  # where call i began: its segment where segments overlap, else its process
            return tl.thread_pid[c.thread[i]] if find is None else find(c.start[i], c.thread[i])

        # (segment where they overlap, else process; begin, end)
        self.instantiates = [(began_in(i), _ns(c.start[i]), _ns(c.end[i])) for i in range(len(c.kind))
                             if c.kind[i] == C_INSTANTIATE]
        marks = tl.capture_windows()  # the one definition; a window never closed runs to its segment's end
        self.windows = [(began_in(b), _ns(c.end[b]), _ns(c.end[e]) if e >= 0 else _FOREVER) for b, e in marks]
        self.span = (_ns(tl.span[0]), _ns(tl.span[1])) if tl.span is not None else (0, 0)
        # owner: each call's segment where segments of a process overlap (``_overlapping``), else None
        self.calls, self.names, self.owner = _columns(tl, find)
        self.thread_pid, self.top = tl.thread_pid, top
        self.vectorised = vectorised  # self time by columns where calls nest properly (False: always the stack walk)

    def segment(self, j: int, seg: Segment) -> tuple[dict[str, Any], Spent | None]:
        import numpy as np

        bounded = math.isfinite(seg.start) and math.isfinite(seg.end)
        s0, s1 = (_ns(seg.start), _ns(seg.end)) if bounded else self.span
        s1 = max(s0, s1)
        pid = seg.pid if bounded else None
        if self.owner is not None:
            at: Any = np.flatnonzero(self.owner == j)
        else:
            lo, hi = int(np.searchsorted(self.calls.ts, s0, "left")), int(np.searchsorted(self.calls.ts, s1, "right"))
            at = slice(lo, hi)
            if pid is not None:
                mine = np.array([p == pid for p in self.thread_pid], bool)[self.calls.thread[at]]
                at = at if mine.all() else lo + np.flatnonzero(mine)
        calls = _Columns(*(c[at] for c in self.calls))
        pieces, n_windows = self._pieces(calls, s0, s1, pid, j)
        phases = dict(zip(PHASES, pieces.lengths, strict=True))
        spent = self._spent(calls, pieces, s0, s1) if self.top > 0 else None
        out = {
            "label": seg.label,
            "bs": seg.bs,
            **size_json(seg.label),
            "variant": segment_variant(seg.label),
            **phases_json(phases, s1 - s0),
            "wall_ns": s1 - s0,
            "phases_ns": phases,
            "capture_windows": n_windows,
            "top": _top(spent, self.top, self.names) if spent is not None else [],
        }
        return out, spent

    def _pieces(self, calls: _Columns, s0: int, s1: int, pid: Any, j: int) -> tuple[_Pieces, int]:
        """Segment ``j``'s phase pieces, and its number of capture windows. Where several phases' intervals
        cover a point the first of capture, instantiate, warm-up has it; what none covers is other. The points:
        the warm-up union's (one interval per op that never nests: millions), each written where it goes, and
        the few others' (ends, windows, instantiates), in the one column; a point is in warm-up where an odd
        number of the union's are at or before it."""
        import numpy as np

        placed = self.owner is not None  # segments of a process overlap: what began in this one
        who = j if placed else pid  # else a window never closed runs to the end of the segment it began in only
        ours = [(a, b) for w, a, b in self.windows if who in (None, w) and (placed or b != _FOREVER or s0 <= a <= s1)]
        theirs = [(a, b) for w, a, b in self.instantiates if who in (None, w)]

        def clipped(ivs: list[tuple[int, int]]) -> Any:
            return np.array(sorted((max(a, s0), min(b, s1)) for a, b in ivs if min(b, s1) > max(a, s0)),
                            np.int64).reshape(-1, 2)

        def union(ivs: Any) -> Any:
            return np.concatenate([np.empty(0, np.int64), *_union([(ivs[:, 0], ivs[:, 1])])])

        windows = clipped(ours)
        capture, instantiate = union(windows), union(clipped(theirs))
        first = int(capture[0]) if len(capture) else s1
        hi = int(np.searchsorted(calls.ts, first, "left"))  # the calls starting before the first window

        def warmup() -> Iterator[tuple[Any, Any]]:  # their cpu_ops, up to the first window
            for lo in range(0, hi, _CHUNK):
                at, op = slice(lo, min(lo + _CHUNK, hi)), calls.op[lo : min(lo + _CHUNK, hi)]
                yield calls.ts[at][op], np.minimum(calls.end[at][op], first)

        few = np.sort(np.concatenate(([s0, s1], capture, instantiate)))
        bounds, phase = np.empty(2 * hi + len(few), np.int64), np.empty(2 * hi + len(few), np.int8)
        x, warm = 0, np.zeros(len(few), np.int64)  # union points so far; per few point, those at or before it
        for points in _union(warmup()):
            at = np.arange(x, x + len(points))
            starts = at % 2 == 0
            at += np.searchsorted(few, points, "left")
            bounds[at], phase[at] = points, np.where(starts, _WARMUP, _OTHER)
            warm += np.searchsorted(points, few, "right")
            x += len(points)
        at = np.arange(len(few)) + warm
        bounds[at], phase[at] = few, np.where(warm % 2, _WARMUP, _OTHER)
        bounds, phase = bounds[: x + len(few)], phase[: x + len(few) - 1]  # the last point is s1: it starts no run
        for k, ivs in ((_INSTANTIATE, instantiate), (_CAPTURE, capture)):  # the later in precedence overwrite
            for lo, up in np.searchsorted(bounds, ivs).reshape(-1, 2).tolist():
                phase[lo:up] = k
        return _Pieces(bounds, phase), len(windows)

    def _spent(self, calls: _Columns, pieces: _Pieces, s0: int, s1: int) -> Spent:
        """Self time per phase and name, cut by the phases (docs/DESIGN.md §7, "``time``"): exact integers, one
        phase and one chunk of calls at a time (a parent before its children), one integer held a call. The call
        each is nested in: by columns (:func:`_parents`), else by the stack walk (:func:`_parents_walk`), which
        ``self.vectorised`` False forces and so do more than ``COLUMNS_MAX_CALLS`` calls."""
        import numpy as np

        parent = _parents(calls) if self.vectorised and len(calls.ts) <= COLUMNS_MAX_CALLS else None
        parent = _parents_walk(calls) if parent is None else parent

        def cover(at: Any, end: Any, k: int) -> Any:
            a = np.clip(calls.ts[at], s0, s1)
            return pieces.cover(a, np.maximum(a, np.clip(end, s0, s1)), k)

        ns = np.zeros((len(PHASES), len(self.names)), np.int64)
        count = np.zeros_like(ns)
        for k in np.flatnonzero(pieces.lengths).tolist():  # a phase the segment lacks holds nothing
            own = np.empty(len(calls.ts), np.int64)
            for lo in range(0, len(own), _CHUNK):
                at = slice(lo, lo + _CHUNK)
                own[at] = cover(at, calls.end[at], k)
                child = lo + np.flatnonzero(parent[at] >= 0)
                up = parent[child]
                np.subtract.at(own, up, cover(child, np.minimum(calls.end[child], calls.end[up]), k))
            for lo in range(0, len(own), _CHUNK):
                got = own[lo : lo + _CHUNK]
                spent = got > 0
                name = calls.name[lo : lo + _CHUNK][spent]
                np.add.at(ns[k], name, got[spent])
                count[k] += np.bincount(name, minlength=ns.shape[1])
        return ns, count


def build(path: str, identity: Identity, tl: Timeline, top: int, vectorised: bool = True) -> TraceTime:
    """The TraceTime of a trace's timeline; ``vectorised`` False: all self time by the stack walk (``_spent``)."""
    segs, source = segments_of(tl.ranges, identity)
    timer = _Timer(tl, segs, source, top, vectorised)
    done = [timer.segment(j, s) for j, s in enumerate(segs)]
    spent = [x for _, x in done if x is not None]
    total = _top((sum(x[0] for x in spent), sum(x[1] for x in spent)), top, timer.names) if spent else []
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
    p.set_defaults(func=with_limits(cmd_time, p, jobs=True))


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
        change = [None if w is None or not walls[0] else round(w / walls[0] - 1.0, 4) for w in walls]
        rows.append(
            {"runner": runner, "tp_rank": tp, "pp_rank": pp, "capture_index": index, "label": label,
             **size_json(label), "wall_us": walls, "change": change}
        )
    return rows


def cmd_time(args: argparse.Namespace) -> int:
    files, listed, bad = expand_paths(list(args.paths))
    results, bad_files = collect_results(
        map_files(time_trace, files, (args.top,), args.jobs, not args.json), listed, reads="time"
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
