"""The one per-trace model: op and module intervals, runtime calls, device work, ranges — and, for the
op-sequence record (``summary``, ``diff``, ``check``), Kineto's ids and every event's place.

Every command reads a trace through here (docs/DESIGN.md §7): ``time`` (calls, ops, ranges),
``attribute`` (and device work, modules), ``records`` (and :class:`Links`). Everything is kept in
parallel arrays with interned labels, one pass over the streaming reader, so a serving profile costs
a few dozen bytes per kept event; what no reader asked for (device work for ``time``, most
``python_function`` calls, counters) is never stored.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from functools import partial
from itertools import chain, compress, groupby, islice, repeat
from operator import add, attrgetter, is_not, le
from typing import Any, cast

from msgspec import Struct, field
from msgspec.structs import replace

from mixins.analysis.model import events as E
from mixins.analysis.model.record import Kernel, Segment
from mixins.analysis.model.segments import Range, assigner, segment_tables
from mixins.analysis.read.reader import Event, SlimEvent, TraceError, compact_json, current_limits, open_trace

__all__ = ["Intervals", "Timeline", "Links", "IdIndex", "ByCorrelation", "Joins", "load_timeline", "innermost"]

_NAN = float("nan")
_CAT, _TS = attrgetter("cat"), attrgetter("ts")
# the kinds each builder step reads (``events.category``: device work from CAT_KERNEL on)
_DEVICE = frozenset({E.CAT_KERNEL + E.D_KERNEL, E.CAT_KERNEL + E.D_COPY, E.CAT_KERNEL + E.D_SET})
_OTHER = frozenset({E.CAT_GPU_OTHER, E.CAT_OTHER})
_CPU_OP = frozenset({E.CAT_CPU_OP})
_CALLS = frozenset({E.CAT_RUNTIME, E.CAT_ANNOTATION})

_DISTINCT_COST = 512  # bytes: what one distinct op signature cost in the model, less its text (measured)


def _texts(values: list[Any]) -> int:
    """Characters of text in new interned values: names, (name, raw dims, raw types), kernels, threads."""
    if not values:
        return 0
    first = values[0]
    if isinstance(first, (str, bytes)):
        return sum(map(len, values))
    if isinstance(first, tuple):
        return sum(map(len, filter(_IS_TEXT, chain.from_iterable(values))))
    return sum(map(len, filter(_IS_TEXT, map(_NAME, values))))  # Kernel, Range


def _IS_TEXT(x: Any) -> bool:  # noqa: N802 - used as a filter predicate
    return isinstance(x, (str, bytes))


_NAME = attrgetter("name")


class _Interner:
    """Values -> small ints, and back."""

    def __init__(self) -> None:
        self.ids: dict[Any, int] = {}
        self.values: list[Any] = []

    def __call__(self, value: Any) -> int:
        got = self.ids.get(value)
        if got is None:
            got = self.ids[value] = len(self.values)
            self.values.append(value)
        return got

    def many(self, values: list[Any]) -> list[int]:
        """Each value's id: one C-level lookup pass, a second pass only when something is new."""
        got = list(map(self.ids.get, values))
        return list(map(self, values)) if None in got else cast(list[int], got)


class Intervals(Struct):
    """[start, end] ranges on a thread with a label id (ops: signature, modules: name)."""

    start: array = field(default_factory=lambda: array("d"))
    end: array = field(default_factory=lambda: array("d"))
    thread: array = field(default_factory=lambda: array("i"))
    label: array = field(default_factory=lambda: array("i"))

    def __len__(self) -> int:
        return len(self.start)


class Calls(Struct):
    """Runtime / driver calls: launches, graph launches, copies, sets, capture begin/end, instantiates, others."""

    start: array = field(default_factory=lambda: array("d"))
    end: array = field(default_factory=lambda: array("d"))
    name: array = field(default_factory=lambda: array("i"))  # into Timeline.call_names
    thread: array = field(default_factory=lambda: array("i"))
    kind: array = field(default_factory=lambda: array("b"))
    corr: array = field(default_factory=lambda: array("q"))  # -1: none
    kernel: array = field(default_factory=lambda: array("i"))  # the launch's own kernel (ROCm), -1: none


class Device(Struct):
    """Device work: kernels, memcpy, memset with duration, correlation and (CUDA) graph node id."""

    start: array = field(default_factory=lambda: array("d"))
    dur: array = field(default_factory=lambda: array("d"))
    kind: array = field(default_factory=lambda: array("b"))
    corr: array = field(default_factory=lambda: array("q"))
    kernel: array = field(default_factory=lambda: array("i"))
    node: array = field(default_factory=lambda: array("q"))  # -1: none


class IdIndex:
    """id -> value as two array columns, sorted by id once all are in, looked up by ``bisect``.

    Why not a dict: ~100-170 B per entry (two int objects, a slot, growth by doubling) against 12 B;
    ids (correlation, External id) come in increasing order in Kineto's files, so usually nothing is
    sorted at all. Among equal ids, ``last`` is the value added last and ``first`` the one added first,
    as a dict filled in order by assignment / ``setdefault`` would say.
    """

    __slots__ = ("ids", "values", "_sorted")

    def __init__(self) -> None:
        self.ids = array("q")
        self.values = array("i")
        self._sorted = True

    @classmethod
    def of(cls, keys: list[int], values: list[int]) -> IdIndex:
        """All at once, from two lists (ids and their values, in the order added)."""
        out = cls()
        out.ids.fromlist(keys)
        out.values.fromlist(values)
        out._sorted = all(map(le, keys, islice(keys, 1, None)))
        return out.finish()

    @classmethod
    def where(cls, ids: array, values: array | None = None, kinds: array | None = None, *wanted: int) -> IdIndex:
        """id -> position (or ``values[position]``) for the ids present (and, given ``kinds``, of a wanted kind)."""
        if kinds is None:
            at = [n for n, i in enumerate(ids) if i >= 0]
        else:
            at = [n for n, (i, kind) in enumerate(zip(ids, kinds, strict=True)) if i >= 0 and kind in wanted]
        return cls.of([ids[n] for n in at], at if values is None else [values[n] for n in at])

    def add(self, key: int, value: int) -> None:
        ids = self.ids
        if ids and key < ids[-1]:
            self._sorted = False
        ids.append(key)
        self.values.append(value)

    def __len__(self) -> int:
        return len(self.ids)

    def finish(self) -> IdIndex:
        """Sort by id (stable) unless already sorted; call once all are added, before looking up."""
        if not self._sorted:
            ids, values = self.ids, self.values
            order = sorted(range(len(ids)), key=ids.__getitem__)
            self.ids = array("q", map(ids.__getitem__, order))
            self.values = array("i", map(values.__getitem__, order))
            self._sorted = True
        return self

    def last(self, key: int) -> int | None:
        ids = self.ids
        k = bisect_right(ids, key) - 1
        return self.values[k] if k >= 0 and ids[k] == key else None

    def first(self, key: int) -> int | None:
        ids = self.ids
        k = bisect_left(ids, key)
        return self.values[k] if k < len(ids) and ids[k] == key else None


class ByCorrelation:
    """Device items (indices) grouped by correlation, as sorted columns rather than a dict of lists.

    Why: a dict entry and a list per correlation cost ~200 B per eager kernel; here an item costs nothing
    when the trace lists device work in correlation order (Kineto does), else 12 B. Within a
    correlation, items stay in trace order, as when they were grouped in a dict.
    """

    def __init__(self, corr: array) -> None:
        if all(map(le, corr, islice(corr, 1, None))):
            self.keys, self.order = corr, None
        else:
            order = sorted(range(len(corr)), key=corr.__getitem__)  # stable: trace order within one
            self.keys, self.order = array("q", map(corr.__getitem__, order)), array("i", order)

    def _items(self, lo: int, hi: int) -> list[int]:
        return list(range(lo, hi)) if self.order is None else self.order[lo:hi].tolist()

    def get(self, corr: int, default: list[int]) -> list[int]:
        keys = self.keys
        lo = bisect_left(keys, corr)
        if lo == len(keys) or keys[lo] != corr:
            return default
        return self._items(lo, bisect_right(keys, corr, lo))

    def items(self) -> Iterator[tuple[int, list[int]]]:
        """(correlation, its items) for each correlation, in increasing order (-1: none)."""
        lo = 0
        for c, run in groupby(self.keys):
            hi = lo + sum(1 for _ in run)
            yield c, self._items(lo, hi)
            lo = hi


FlowKey = tuple[int, float]  # (thread index, ts)


def _flow_ids(wanted: set[FlowKey], threads: array, ts: array, ids: array) -> dict[FlowKey, int]:
    """(thread, ts) -> flow id for the wanted keys only; a later flow at the same key wins (as a dict would)."""
    out: dict[FlowKey, int] = {}
    for n, key in enumerate(zip(threads, ts, strict=True)):
        if key in wanted:
            out[key] = ids[n]
    return out


class Joins:
    """The one link pass of a trace: every join by Kineto's ids is built here, once, and nowhere else
    (``tests/analysis/test_one_home_model.py`` holds it so).

    - flows -> correlation: a kernel launch (or graph launch) and a kernel without a correlation take the id
      of the ``ac2g`` flow that starts / ends on them (``launch_corr``, ``kernel_corr``; with links only);
    - correlation -> runtime call, correlation -> device work (the first / last of a kind), device work
      grouped by correlation;
    - External id -> op, and so call -> op: the op whose External id the call carries. A call without one
      (a trace read without ids, a capture window's launches for ``attribute``) goes to the innermost op
      around it on its thread (:func:`innermost`): one rule, External id first, time second.

    Each index is built on first use and kept: what a command does not ask for costs nothing.
    """

    def __init__(self, tl: Timeline) -> None:
        self.tl = tl
        self.launch_corr = array("q", tl.calls.corr)  # per call: its correlation, or its ac2g flow's id
        self.kernel_corr = array("q", tl.device.corr)  # per device record: the same
        self.flow_cpu: dict[int, int] = {}  # flow ids that gave a call its correlation -> that call's event
        self._made: dict[tuple[Any, ...], Any] = {}
        if tl.links is not None:
            self._resolve_flows(tl.links)

    def _once(self, key: tuple[Any, ...], build: Callable[[], Any]) -> Any:
        got = self._made.get(key)
        if got is None:
            got = self._made[key] = build()
        return got

    def calls_by_corr(self, *kinds: int, resolved: bool = True) -> IdIndex:
        """correlation (``resolved``: or flow id) -> call index, of the given kinds (none given: any)."""
        c = self.tl.calls
        ids = self.launch_corr if resolved else c.corr
        return cast(IdIndex, self._once(("calls", resolved, *kinds),
                                        lambda: IdIndex.where(ids, None, c.kind if kinds else None, *kinds)))

    def device_by_corr(self, *kinds: int, resolved: bool = True) -> IdIndex:
        """correlation (``resolved``: or flow id) -> device record index, of the given kinds (none: any)."""
        d = self.tl.device
        ids = self.kernel_corr if resolved else d.corr
        return cast(IdIndex, self._once(("device", resolved, *kinds),
                                        lambda: IdIndex.where(ids, None, d.kind if kinds else None, *kinds)))

    def device_groups(self) -> ByCorrelation:
        """Device records grouped by their own correlation."""
        return cast(ByCorrelation, self._once(("groups",), lambda: ByCorrelation(self.tl.device.corr)))

    def op_by_ext(self) -> IdIndex:
        """External id -> op index (with links)."""
        links = self.tl.links
        assert links is not None
        return cast(IdIndex, self._once(("ext",), lambda: IdIndex.where(links.op_ext)))

    def ops_of_calls(self, calls: list[int]) -> list[int]:
        """The op that made each call (index into ``Timeline.ops``, -1: none), by the one rule: the first op
        with the call's External id (read with links), else the innermost op around the call's start on its
        thread (:func:`innermost`). Kept per call once asked: the record and the namer ask twice."""
        known = self._once(("call_op",), dict)
        todo = [i for i in dict.fromkeys(calls) if i not in known]
        if todo:
            links, c = self.tl.links, self.tl.calls
            by_ext = self.op_by_ext() if links is not None else None
            for i in todo:
                ext = links.call_ext[i] if links is not None else -1
                got = by_ext.first(ext) if by_ext is not None and ext >= 0 else None
                known[i] = -1 if got is None else got
            timed = [i for i in todo if known[i] < 0]
            for i, op in zip(timed, innermost(self.tl.ops, [c.start[i] for i in timed],
                                              [c.thread[i] for i in timed]), strict=True):
                known[i] = op
        return [known[i] for i in calls]

    def op_of_call(self, i: int) -> int | None:
        """:meth:`ops_of_calls` for one call; None: no op."""
        op = self.ops_of_calls([i])[0]
        return None if op < 0 else op

    def _resolve_flows(self, lk: Links) -> None:
        """Correlation-less launches and kernels take the id of the ac2g flow that starts/ends on them."""
        c, d = self.tl.calls, self.tl.device
        launches = {
            i: (c.thread[i], c.start[i])
            for i in range(len(c.kind))
            if c.corr[i] < 0 and c.kind[i] in (E.C_LAUNCH, E.C_GRAPH)
        }
        if launches:
            starts = _flow_ids(set(launches.values()), *lk.flow_start)
            for i, key in launches.items():
                fid = starts.get(key, -1)
                if fid >= 0:
                    self.launch_corr[i] = fid
                    if self.cpu_of(fid) is None:
                        self.flow_cpu[fid] = lk.call_ev[i]
        kernels = {k: (th, d.start[k]) for k, th in lk.kernel_thread.items()}
        if kernels:
            ends = _flow_ids(set(kernels.values()), *lk.flow_end[1:])
            for k, key in kernels.items():
                fid = ends.get(key, -1)
                if fid >= 0:
                    self.kernel_corr[k] = fid

    def cpu_of(self, corr: int) -> int | None:
        """The runtime / driver call (event position) with correlation ``corr`` (with links)."""
        links = self.tl.links
        assert links is not None
        got = self.calls_by_corr(resolved=False).last(corr)
        return links.call_ev[got] if got is not None else self.flow_cpu.get(corr)

    def cpu_of_ext(self, ext: int) -> int | None:
        """The CPU event of an External id: its last op, else its first annotation (with links)."""
        links = self.tl.links
        assert links is not None
        op = self.op_by_ext().last(ext)
        return links.op_ev[op] if op is not None else links.annotation_ext.first(ext)

    def source(self, corr: int, ext: int) -> int | None:
        """The CPU event that launched device work: by correlation, else External id."""
        if corr >= 0 and (src := self.cpu_of(corr)) is not None:
            return src
        return self.cpu_of_ext(ext) if ext >= 0 else None


class Links(Struct):
    """Kineto's ids and every event's place, kept for the op-sequence record (``links=True``).

    What links a launch to its op (External id), device work to its launch (correlation, else an
    ``ac2g`` flow), and the time and process of *every* event (``ev_*``, by file position), so each
    event — device work in the segment of the CPU call that launched it — is counted in one segment.
    ``*_ev`` columns give each kept op, call, device record … its event's position.
    """

    ev_ts: array = field(default_factory=lambda: array("d"))  # NaN: no timestamp
    ev_pid: array = field(default_factory=lambda: array("i"))  # into ``pids``
    pids: dict[Any, int] = field(default_factory=dict)
    op_ev: array = field(default_factory=lambda: array("i"))  # per Timeline.ops entry
    op_ext: array = field(default_factory=lambda: array("q"))
    op_concrete: array = field(default_factory=lambda: array("i"))  # into ``concretes``
    op_shapes: array = field(default_factory=lambda: array("b"))  # has Input Dims
    concretes: list[str] = field(default_factory=list)  # Concrete Inputs, compact JSON text
    call_ev: array = field(default_factory=lambda: array("i"))  # per Timeline.calls entry
    call_ext: array = field(default_factory=lambda: array("q"))
    dev_ev: array = field(default_factory=lambda: array("i"))  # per Timeline.device entry
    dev_ext: array = field(default_factory=lambda: array("q"))
    other_ev: array = field(default_factory=lambda: array("i"))  # other device records with args
    other_corr: array = field(default_factory=lambda: array("q"))
    other_ext: array = field(default_factory=lambda: array("q"))
    annotation_ext: IdIndex = field(default_factory=IdIndex)  # External id -> event position
    kernel_thread: dict[int, int] = field(default_factory=dict)  # kernels without correlation: thread
    untimed: int = 0  # ops, calls and ranges kept without a timestamp (NaN start): ``Timeline.timed``
    flow_start: tuple[array, array, array] = field(  # ac2g flow starts: thread, ts, id
        default_factory=lambda: (array("i"), array("d"), array("q"))
    )
    flow_end: tuple[array, array, array, array] = field(  # ac2g flow ends: event position, thread, ts, id
        default_factory=lambda: (array("i"), array("i"), array("d"), array("q"))
    )


class Timeline(Struct):
    """One trace, reduced to what attribution and timing need."""

    path: str
    size: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)
    ops: Intervals = field(default_factory=Intervals)
    modules: Intervals = field(default_factory=Intervals)
    calls: Calls = field(default_factory=Calls)
    device: Device = field(default_factory=Device)
    ranges: list[Range] = field(default_factory=list)
    signatures: list[tuple[str, str, str]] = field(default_factory=list)  # (name, dims, types) JSON text
    module_names: list[str] = field(default_factory=list)
    kernels: list[Kernel] = field(default_factory=list)
    thread_pid: list[Any] = field(default_factory=list)
    call_names: list[str] = field(default_factory=list)
    span: tuple[float, float] | None = None  # first start, last end of every cpu_op, call and range
    links: Links | None = None  # only when loaded with ``links=True``
    joined: Joins | None = None  # the link pass, made on first use (``joins``)

    def joins(self) -> Joins:
        """The trace's joins by Kineto's ids (:class:`Joins`), made once."""
        if self.joined is None:
            self.joined = Joins(self)
        return self.joined

    def segment_finder(self, segs: list[Segment], source: str) -> Callable[[float, int], int]:
        """(time, thread) -> the segment it belongs to (index into ``segs``), else -1: the innermost
        segment of its process containing the time (``segments.assigner``); with one segment for the
        whole trace (``source`` "filename" or "all"), that one. Every command places rows by this rule."""
        if source in ("filename", "all"):
            return lambda ts, thread: 0
        pids = {pid: n for n, pid in enumerate(dict.fromkeys(self.thread_pid))}
        find = assigner(segs, pids)
        place = [pids[p] for p in self.thread_pid]
        return lambda ts, thread: find(ts, place[thread])

    def event_segments(self, segs: list[Segment], source: str) -> array:
        """Per event (with links: by file position), its segment as :meth:`segment_finder` places it, and
        ``len(segs)`` for none; by columns, one ``searchsorted`` per process over its segments' step
        function (``segments.segment_tables``), not a lookup per event."""
        links = self.links
        assert links is not None
        n = len(links.ev_ts)
        if source in ("filename", "all"):
            return array("i", bytes(4 * n))  # one segment holds everything: index 0
        import numpy as np

        ts = np.frombuffer(links.ev_ts, np.float64)
        pid = np.frombuffer(links.ev_pid, np.int32)
        out = np.full(n, len(segs), np.int32)
        tables = segment_tables(segs, links.pids)
        for key in np.unique(pid).tolist():
            points, at, after = tables.get(key, tables[None])
            if not points:
                continue
            rows = np.flatnonzero((pid == key) & ~np.isnan(ts))
            t = ts[rows]
            p = np.asarray(points, np.float64)
            k = np.searchsorted(p, t, "right") - 1
            inside = k >= 0
            kk = np.maximum(k, 0)
            got = np.where(p[kk] == t, np.asarray(at, np.int32)[kk], np.asarray(after, np.int32)[kk])
            got = np.where(inside & (got >= 0), got, len(segs))
            out[rows] = got
        return array("i", out.tobytes())

    def capture_windows(self) -> list[tuple[int, int]]:
        """The one definition of a capture window: (begin call, end call or -1 when never closed).

        Marks are taken in time order. An ``…EndCapture`` closes the latest open ``…BeginCapture`` of
        its own thread (two streams captured from one thread nest: the inner one ends first); with none
        open there, the oldest open one of another thread of its process (a capture ended on another
        thread, as relaxed capture mode allows). An end that closes nothing is ignored; a begin never
        closed runs to the end of the trace. Both ``time`` and ``attribute`` read windows from here.
        """
        c = self.calls
        marks = sorted(
            (c.start[i], c.kind[i] == E.C_END, i)
            for i in range(len(c.kind))
            if c.kind[i] in (E.C_BEGIN, E.C_END) and c.start[i] == c.start[i]  # a mark without a time marks nothing
        )
        opened: dict[int, list[int]] = {}
        out: list[tuple[int, int]] = []
        for _, is_end, i in marks:
            th = c.thread[i]
            if not is_end:
                opened.setdefault(th, []).append(i)
                continue
            if opened.get(th):
                out.append((opened[th].pop(), i))
                continue
            pid = self.thread_pid[th]
            other = min(
                (st[0] for t, st in opened.items() if st and self.thread_pid[t] == pid), key=c.start.__getitem__,
                default=None,
            )
            if other is not None:
                opened[c.thread[other]].remove(other)
                out.append((other, i))
        out += [(b, -1) for st in opened.values() for b in st]
        out.sort(key=lambda w: (c.start[w[0]], w[0]))
        return out

    def timed(self) -> Timeline:
        """This timeline less the ops, calls and ranges without a timestamp (kept with ``links`` for the
        record's counts): what a reading without links holds, for the queries that place things in time."""
        if self.links is None or not self.links.untimed:
            return self
        ops = _select(self.ops, [i for i, t in enumerate(self.ops.start) if t == t])
        calls = _select(self.calls, [i for i, t in enumerate(self.calls.start) if t == t])
        ranges = [r for r in self.ranges if r.ts == r.ts]
        return replace(self, ops=ops, calls=calls, ranges=ranges, links=None, joined=None)


def _select(columns: Any, keep: list[int]) -> Any:
    """A copy of a struct of array columns with only the rows ``keep``."""
    cols = {name: getattr(columns, name) for name in columns.__struct_fields__}
    return type(columns)(**{name: array(col.typecode, map(col.__getitem__, keep)) for name, col in cols.items()})


class _Builder:
    """Fills a Timeline slice by slice."""

    def __init__(
        self, tl: Timeline, device: bool = True, modules: bool = True, links: bool = False, shapes: bool = True
    ) -> None:
        self.tl = tl
        self.keep_device = device
        self.keep_modules = modules
        self.keep_shapes = shapes or links
        self.links = tl.links = Links() if links else None
        self.call_names = _Interner()
        self.lo = float("inf")
        self.hi = float("-inf")
        self.threads = _Interner()
        self.raw_sigs = _Interner()
        self.concretes = _Interner()
        self.modules = _Interner()
        self.kernels = _Interner()
        self.budget = current_limits().max_distinct_bytes
        self.distinct = 0  # bytes charged so far for distinct things held (Limits.max_distinct_bytes)
        self.charged: dict[int, int] = {}  # id of each charged list -> how many of its items are charged
        self.categories: dict[str | None, int] = {}
        self.kernel_ids: dict[tuple[Any, ...], int] = {}

    def _charge(self) -> None:
        """Charge what the last slice added to the distinct things held: each costs its text (held as read
        and as compact text) and ~_DISTINCT_COST of dict, list and struct. Per slice, in C, only the new
        items; past the budget the trace is refused, as past ``max_events``, naming the limit."""
        held: list[list[Any]] = [self.call_names.values, self.threads.values, self.raw_sigs.values,
                                 self.concretes.values, self.modules.values, self.kernels.values, self.tl.ranges]
        for values in held:
            done = self.charged.get(id(values), 0)
            if len(values) > done:
                self.distinct += _DISTINCT_COST * (len(values) - done) + 2 * _texts(values[done:])
                self.charged[id(values)] = len(values)
        if self.links is not None:
            pids = len(self.links.pids)
            self.distinct += _DISTINCT_COST * (pids - self.charged.get(0, 0))
            self.charged[0] = pids
        if self.distinct > self.budget:
            mib = f"{self.budget / (1 << 20):g} MiB"
            raise TraceError(
                self.tl.path,
                f"more than {mib} of distinct names, shapes, threads and ranges (the limit, --max-distinct-mib)",
            )

    def thread(self, ev: SlimEvent | Event) -> int:
        return self.threads((ev.pid, ev.tid))

    def kernel_key(self, name: str | None, a: Any) -> tuple[Any, ...]:
        """A kernel's identity as a plain tuple (hashed in C); with links, also shared memory and
        registers (``summary`` shows them)."""
        if self.links is None:
            return (name, a.grid, a.block) if a is not None else (name, None, None)
        return (name, a.grid, a.block, a.smem, a.regs) if a is not None else (name, None, None, None, None)

    def _kernel_id(self, key: tuple[Any, ...]) -> int:
        got = self.kernel_ids.get(key)
        if got is None:
            name, grid, block, *rest = key
            got = self.kernel_ids[key] = self.kernels(Kernel(name, grid or None, block or None, *rest))
        return got

    def add(self, events: list[Any]) -> None:
        """One slice. Bulk passes per kind, not a Python loop body per event: a replay is ~all kernels
        and a capture ~all ``python_function`` calls, hundreds of thousands of each. Each event's kind
        is looked up once, in C, and each kind's events picked by it in C (``_pick``). Without links,
        events with no timestamp are not kept (nothing can place them in time)."""
        dest = self.categories
        for cat in set(map(_CAT, events)).difference(dest):
            dest[cat] = E.category(cat or "")
        kinds = list(map(dest.__getitem__, map(_CAT, events)))
        present = set(kinds)
        links = self.links
        if links is not None:
            self._places(events, links)
        pick = partial(self._pick, events, kinds, len(links.ev_ts) - len(events) if links is not None else None)
        if self.keep_device and present & _DEVICE:
            dev, at = pick(_DEVICE)
            self._devices(dev)
            if links is not None:
                links.dev_ev.fromlist(at)
        if self.keep_modules and E.CAT_PYTHON in present:
            self._modules([ev for ev in E.module_events(events) if ev.ts is not None])
        if links is not None and present & _OTHER:
            self._other_linked(*pick(_OTHER), links)
        if E.CAT_CPU_OP in present:
            self._ops(*pick(_CPU_OP))
        if present & _CALLS:
            self._others(*pick(_CALLS))
        self._charge()

    @staticmethod
    def _pick(events: list[Any], kinds: list[int], base: int | None, wanted: frozenset[int]) -> tuple[list[Any], Any]:
        """The events of the ``wanted`` kinds, and (with links: ``base`` is the slice's first event
        position) their positions; without links only those with a timestamp, and no positions."""
        mask = list(map(wanted.__contains__, kinds))
        chosen = list(compress(events, mask))
        if base is None:
            return list(compress(chosen, map(is_not, map(_TS, chosen), repeat(None)))), None
        return chosen, list(compress(range(base, base + len(events)), mask))

    def _places(self, events: list[Event], links: Links) -> None:
        """Every event's time and process (by file position)."""
        nan = _NAN
        links.ev_ts.fromlist([nan if (t := ev.ts) is None else t for ev in events])
        pids = links.pids
        got = list(map(pids.get, [ev.pid for ev in events]))
        if None in got:
            got = [pids.setdefault(ev.pid, len(pids)) for ev in events]
        links.ev_pid.fromlist(got)

    def _other_linked(self, events: list[Event], at: list[int], links: Links) -> None:
        """Device records other than kernels, copies and sets (linked like them), and ac2g flows; ``at``:
        their event positions."""
        for ev, n in zip(events, at, strict=True):
            if self.categories[ev.cat] == E.CAT_GPU_OTHER:
                if ev.args is not None:
                    links.other_ev.append(n)
                    links.other_corr.append(E.ident(ev.args.correlation))
                    links.other_ext.append(E.ident(ev.args.ext))
            elif E.is_flow(ev, ev.cat or ""):
                row: tuple[float, ...] = (self.thread(ev), _NAN if ev.ts is None else ev.ts, E.ident(ev.id))
                columns: tuple[array, ...] = links.flow_start
                if ev.ph == "f":
                    columns, row = links.flow_end, (n, *row)
                for column, value in zip(columns, row, strict=True):
                    column.append(value)

    def _ops(self, ops: list[Any], at: list[int] | None) -> None:
        """cpu_op intervals, column by column (a capture-style trace is mostly ops); ``at``: their event
        positions, with links."""
        iv = self.tl.ops
        starts = [_NAN if (t := ev.ts) is None else t for ev in ops]
        ends = list(map(add, starts, [ev.dur or 0.0 for ev in ops]))
        iv.start.fromlist(starts)
        iv.end.fromlist(ends)
        iv.thread.fromlist(self.threads.many([(ev.pid, ev.tid) for ev in ops]))
        args = [ev.args for ev in ops]
        if self.keep_shapes:
            raw = [
                (ev.name or "", bytes(a.dims), bytes(a.types)) if a is not None else (ev.name or "", b"", b"")
                for ev, a in zip(ops, args, strict=True)
            ]
        else:  # an op is its name alone (``time``)
            raw = [(ev.name or "", b"", b"") for ev in ops]
        iv.label.fromlist(self.raw_sigs.many(raw))
        known = [t for t in starts if t == t]  # NaN: no timestamp (kept with links only)
        if self.links is not None:
            self.links.untimed += len(starts) - len(known)
        if known:
            self.lo = min(self.lo, min(known))
            self.hi = max(self.hi, max(e for e in ends if e == e))
        links = self.links
        if links is not None and at is not None:
            links.op_ev.fromlist(at)
            links.op_ext.fromlist([E.ident(a.ext) if a is not None else -1 for a in args])
            links.op_concrete.fromlist(self.concretes.many([bytes(a.concrete) if a is not None else b"" for a in args]))
            links.op_shapes.fromlist([1 if r[1] else 0 for r in raw])

    def _others(self, events: list[Any], at: list[int] | None) -> None:
        """Runtime calls and annotation ranges (a few percent of any trace); ``at``: their event
        positions, with links."""
        tl = self.tl
        lo, hi = self.lo, self.hi
        links, dest = self.links, self.categories
        for n, ev in enumerate(events):
            kind = dest[ev.cat]
            name = ev.name or ""
            ts = _NAN if ev.ts is None else ev.ts
            if ts != ts and links is not None:
                links.untimed += 1
            end = ts + (ev.dur or 0.0)
            lo = ts if ts < lo else lo
            hi = end if end > hi else hi
            a = ev.args
            if kind == E.CAT_RUNTIME:
                self._call(ev, name, ts)
                if links is not None and at is not None:
                    links.call_ev.append(at[n])
                    links.call_ext.append(E.ident(a.ext) if a is not None else -1)
            elif kind == E.CAT_ANNOTATION:
                if E.may_be_segment_marker(name) or E.may_be_hint(name):  # no other range is read
                    tl.ranges.append(Range(name, ts, ev.dur or 0.0, ev.pid))
                if links is not None and at is not None and a is not None and (ext := E.ident(a.ext)) >= 0:
                    links.annotation_ext.add(ext, at[n])
        self.lo, self.hi = lo, hi

    def _modules(self, events: list[Any]) -> None:
        """``nn.Module`` intervals, column by column (each distinct name is cleaned once)."""
        iv = self.tl.modules
        starts = [ev.ts for ev in events]
        iv.start.fromlist(starts)
        iv.end.fromlist(list(map(add, starts, [ev.dur or 0.0 for ev in events])))
        iv.thread.fromlist(self.threads.many([(ev.pid, ev.tid) for ev in events]))
        names = [ev.name or "" for ev in events]
        clean = {name: E.module_name(name) for name in set(names)}
        iv.label.fromlist(self.modules.many([clean[name] for name in names]))

    def _devices(self, events: list[Any]) -> None:
        """Kernels, memcpys and memsets, column by column."""
        d, dest, top = self.tl.device, self.categories, E.ID_LIMIT
        args = [ev.args for ev in events]
        # array.fromlist: about twice array.extend's speed on a list
        d.start.fromlist([_NAN if (t := ev.ts) is None else t for ev in events])
        d.dur.fromlist([ev.dur or 0.0 for ev in events])
        d.kind.fromlist([dest[ev.cat] - E.CAT_KERNEL for ev in events])
        d.corr.fromlist(
            [c if a is not None and (c := a.correlation) is not None and 0 <= c < top else -1 for a in args]
        )
        d.node.fromlist([n if a is not None and (n := a.node) is not None and 0 <= n < top else -1 for a in args])
        key = self.kernel_key
        keys = [key(ev.name or "", a) for ev, a in zip(events, args, strict=True)]
        ids = list(map(self.kernel_ids.get, keys))
        if None in ids:
            ids = [self._kernel_id(k) for k in keys]
        d.kernel.fromlist(ids)
        if self.links is not None:  # device ids continue the Device columns filled above
            self.links.dev_ext.fromlist([E.ident(a.ext) if a is not None else -1 for a in args])
            first, kernel = len(d.corr) - len(events), E.CAT_KERNEL + E.D_KERNEL
            uncorrelated = [n for n, ev in enumerate(events) if dest[ev.cat] == kernel and d.corr[first + n] < 0]
            for n in uncorrelated:  # an ac2g flow ending on one may still pair it (records)
                self.links.kernel_thread[first + n] = self.thread(events[n])

    def _call(self, ev: Any, name: str, ts: float) -> None:
        kind = E.call_kind(name)
        a = ev.args
        c = self.tl.calls
        c.start.append(ts)
        c.end.append(ts + (ev.dur or 0.0))
        c.name.append(self.call_names(name))
        c.thread.append(self.thread(ev))
        c.kind.append(kind)
        c.corr.append(E.ident(a.correlation) if a is not None else -1)
        own = a.kernel if a is not None and kind == E.C_LAUNCH else None
        c.kernel.append(self._kernel_id(self.kernel_key(own, a)) if own is not None else -1)

    def finish(self) -> None:
        tl = self.tl
        cache: dict[bytes, str] = {}
        tl.signatures = [(n, compact_json(d, cache), compact_json(t, cache)) for n, d, t in self.raw_sigs.values]
        tl.module_names = list(self.modules.values)
        tl.kernels = list(self.kernels.values)
        tl.thread_pid = [pid for pid, _ in self.threads.values]
        tl.call_names = list(self.call_names.values)
        tl.span = (self.lo, self.hi) if self.lo <= self.hi else None
        if self.links is not None:
            self.links.concretes = [compact_json(c, cache) for c in self.concretes.values]
            self.links.annotation_ext.finish()


def load_timeline(
    path: str,
    progress: Callable[[int, int], None] | None = None,
    *,
    device: bool = True,
    modules: bool = True,
    links: bool = False,
    shapes: bool = True,
) -> Timeline:
    """Read ``path`` in one streaming pass; raises TraceError for any bad input. ``device`` / ``modules`` /
    ``shapes`` False: device work / ``nn.Module`` intervals / ops' input dims and types are not kept
    (``time`` reads none of them: an op is its name, and no ``args`` is decoded at all); ``links``:
    Kineto's ids and every event's place are kept too (:class:`Links`, for the op-sequence record)."""
    stream = open_trace(path, progress)
    tl = Timeline(path)
    b = _Builder(tl, device, modules, links, shapes)
    slices = stream.events() if links else stream.slim_events() if device or shapes else stream.bare_events()
    for events in slices:
        b.add(events)
    try:
        b.finish()
    except (MemoryError, RecursionError) as exc:  # pragma: no cover - defensive
        raise TraceError(path, f"cannot analyse: {type(exc).__name__}") from None
    tl.size = stream.size
    tl.metadata = stream.metadata
    return tl


def innermost(iv: Intervals, times: list[float], threads: list[int]) -> list[int]:
    """For each (time, thread) query, the index of the innermost interval containing it, else -1.

    One sweep per thread over intervals sorted by (start, -end) with a stack of open intervals;
    well-formed traces nest ranges on a thread, which is what makes the stack top the innermost.
    An interval or query without a time (NaN: kept with links) places nothing: a NaN key would
    break the sort and stop the sweep.
    """
    out = [-1] * len(times)
    queries: dict[int, list[int]] = {}
    for q, th in enumerate(threads):
        if times[q] == times[q]:
            queries.setdefault(th, []).append(q)
    spans: dict[int, list[int]] = {th: [] for th in queries}
    start, end = iv.start, iv.end
    for j, th in enumerate(iv.thread):
        got = spans.get(th)
        if got is not None and start[j] == start[j]:
            got.append(j)
    for th, qs in queries.items():
        order = sorted(spans[th], key=lambda j: (start[j], -end[j]))
        qs.sort(key=lambda q: times[q])
        stack: list[int] = []
        k = 0
        for q in qs:
            t = times[q]
            while k < len(order) and start[order[k]] <= t:
                stack.append(order[k])
                k += 1
            while stack and end[stack[-1]] < t:
                stack.pop()
            if stack:
                out[q] = stack[-1]
    return out
