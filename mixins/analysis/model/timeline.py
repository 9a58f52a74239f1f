"""The one per-trace model: columns per kind, interned labels, and the one link pass (:class:`Joins`).
Every command is a query over it; what a command does not need is not decoded (docs/DESIGN.md §7)."""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from itertools import chain, compress, groupby, repeat
from operator import add, attrgetter, is_not, not_
from typing import Any, cast

from msgspec import Struct, field

from mixins.analysis.model import events as E
from mixins.analysis.model.record import Kernel, Segment
from mixins.analysis.model.segments import Range, assigner, segment_tables
from mixins.analysis.read.reader import (
    BareEvent,
    Event,
    SlimEvent,
    TraceError,
    compact_json,
    current_limits,
    open_trace,
)

__all__ = [
    "BareEvent", "Event", "SlimEvent", "Intervals", "Ops", "Timeline", "IdIndex", "Joins",
    "load_timeline", "innermost", "Interner",
]

_NAN = float("nan")
_CAT, _TS, _PID = attrgetter("cat"), attrgetter("ts"), attrgetter("pid")
# the kinds each builder step reads (``events.category``: device work from CAT_KERNEL on)
_DEVICE = frozenset({E.CAT_KERNEL + E.D_KERNEL, E.CAT_KERNEL + E.D_COPY, E.CAT_KERNEL + E.D_SET})
_OTHER = frozenset({E.CAT_GPU_OTHER, E.CAT_OTHER})
_CPU_OP = frozenset({E.CAT_CPU_OP})
_RUNTIME = frozenset({E.CAT_RUNTIME})
_ANNOTATION = frozenset({E.CAT_ANNOTATION})
_LINKED = _DEVICE | _CPU_OP | _OTHER | {E.CAT_RUNTIME}  # kinds with rows of their own; the rest: ``rest_*``

_DISTINCT_COST = 512  # bytes: what one distinct op signature cost in the model, less its text (measured)


def _texts(values: list[Any]) -> int:
    """Characters of text in new (never no) interned values: names, or the texts in tuples (signatures, kernels)."""
    if isinstance(values[0], (str, bytes)):
        return sum(map(len, values))
    return sum(len(x) for x in chain.from_iterable(values) if isinstance(x, (str, bytes)))


class Interner:
    """Values -> small ints (``ids``), and back (``values``)."""

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


class Ops(Intervals):
    """cpu_ops; ``ext`` read whenever ``args`` are (``Joins.ops_of_calls``), ``shapes`` and ``concrete``
    only by the record: empty unless read with Kineto's ids."""

    shapes: array = field(default_factory=lambda: array("b"))
    ext: array = field(default_factory=lambda: array("q"))
    concrete: array = field(default_factory=lambda: array("i"))  # into Timeline.concretes


class Calls(Struct):
    """Runtime / driver calls: launches, graph launches, copies, sets, capture begin/end, instantiates, others."""

    start: array = field(default_factory=lambda: array("d"))
    end: array = field(default_factory=lambda: array("d"))
    name: array = field(default_factory=lambda: array("i"))  # into Timeline.call_names
    thread: array = field(default_factory=lambda: array("i"))
    kind: array = field(default_factory=lambda: array("b"))
    corr: array = field(default_factory=lambda: array("q"))  # -1: none
    kernel: array = field(default_factory=lambda: array("i"))  # the launch's own kernel (ROCm), -1: none
    ext: array = field(default_factory=lambda: array("q"))


class Device(Struct):
    """Device work: kernels, memcpy, memset with duration, correlation and (CUDA) graph node id."""

    start: array = field(default_factory=lambda: array("d"))
    dur: array = field(default_factory=lambda: array("d"))
    kind: array = field(default_factory=lambda: array("b"))
    corr: array = field(default_factory=lambda: array("q"))
    kernel: array = field(default_factory=lambda: array("i"))
    node: array = field(default_factory=lambda: array("q"))  # -1: none
    thread: array = field(default_factory=lambda: array("i"))  # these two as ``Ops.ext``
    ext: array = field(default_factory=lambda: array("q"))


class Others(Struct):
    """Rows only the record reads, by their ids: other device records, annotations with an External id,
    ``ac2g`` flow starts and ends (``corr``: the flow's id)."""

    ts: array = field(default_factory=lambda: array("d"))
    thread: array = field(default_factory=lambda: array("i"))
    corr: array = field(default_factory=lambda: array("q"))
    ext: array = field(default_factory=lambda: array("q"))


class Undated(Struct):
    """Rows without a timestamp: only the record counts them (in "(outside)")."""

    ops: Ops = field(default_factory=Ops)
    calls: Calls = field(default_factory=Calls)
    device: Device = field(default_factory=Device)


class IdIndex:
    """id -> positions as two columns sorted by id (stable): 12 B an entry, a dict of lists ~100-200 B. Among
    equal ids, ``last`` / ``first`` answer as a dict filled by assignment / ``setdefault`` would."""

    __slots__ = ("ids", "values")

    def __init__(self, ids: array, values: array) -> None:
        self.ids, self.values = ids, values

    @classmethod
    def where(cls, ids: array, kinds: array | None = None, *wanted: int, absent: bool = False) -> IdIndex:
        """id -> position, for the ids present (``absent``: -1 too) and, given ``kinds``, of a wanted kind."""
        import numpy as np

        column = np.asarray(ids)
        keep = column >= (-1 if absent else 0)
        if kinds is not None:
            keep &= np.isin(np.asarray(kinds), wanted)
        at = np.flatnonzero(keep)
        at = at[np.argsort(column[at], kind="stable")]
        return cls(array("q", column[at].tobytes()), array("i", at.astype(np.int32).tobytes()))

    def last(self, key: int) -> int | None:
        ids = self.ids
        k = bisect_right(ids, key) - 1
        return self.values[k] if k >= 0 and ids[k] == key else None

    def first(self, key: int) -> int | None:
        ids = self.ids
        k = bisect_left(ids, key)
        return self.values[k] if k < len(ids) and ids[k] == key else None

    def get(self, key: int, default: list[int]) -> list[int]:
        lo = bisect_left(self.ids, key)
        hi = bisect_right(self.ids, key, lo)
        return self.values[lo:hi].tolist() if hi > lo else default

    def items(self) -> Iterator[tuple[int, list[int]]]:
        """(id, its positions) for each id, in increasing order."""
        lo = 0
        for key, run in groupby(self.ids):
            hi = lo + sum(1 for _ in run)
            yield key, self.values[lo:hi].tolist()
            lo = hi

    def many(self, keys: Any, last: bool) -> Any:
        """:meth:`last` (or :meth:`first`) of each id in a numpy array, -1 where absent."""
        import numpy as np

        ids, values = np.asarray(self.ids), np.asarray(self.values)
        if not len(ids):
            return np.full(len(keys), -1, np.int64)
        k = np.searchsorted(ids, keys, "right") - 1 if last else np.searchsorted(ids, keys, "left")
        at = np.clip(k, 0, len(ids) - 1)
        return np.where((k >= 0) & (k < len(ids)) & (ids[at] == keys), values[at], -1)


def _flow_ids(rows: list[int], threads: array, ts: array, flows: Others) -> list[tuple[int, int]]:
    """(row, id of the flow at its (thread, ts)) for the rows at one; a later flow at one place wins."""
    wanted = {(threads[i], ts[i]) for i in rows}
    found = {key: fid for key, fid in zip(zip(flows.thread, flows.ts, strict=True), flows.corr, strict=True)
             if key in wanted}
    return [(i, fid) for i in rows if (fid := found.get((threads[i], ts[i]), -1)) >= 0]


class Joins:
    """Every join by Kineto's ids, each index built on first use (docs/DESIGN.md §7, "One link pass"). It
    holds the columns it joins, not the model: the model holds it, and a cycle would outlive the command."""

    def __init__(self, tl: Timeline) -> None:
        self.ops, self.calls, self.device, self.annotations = tl.ops, tl.calls, tl.device, tl.annotations
        self.launch_corr = array("q", tl.calls.corr)  # per call: its correlation, or its ac2g flow's id
        self.kernel_corr = array("q", tl.device.corr)  # per device record: the same
        self.flow_cpu: dict[int, int] = {}  # flow ids that gave a call its correlation -> that call
        self._made: dict[tuple[Any, ...], Any] = {}
        self._resolve_flows(tl.flow_starts, tl.flow_ends)

    def once(self, key: tuple[Any, ...], build: Callable[[], Any]) -> Any:
        got = self._made.get(key)
        if got is None:
            got = self._made[key] = build()
        return got

    def calls_by_corr(self, *kinds: int, resolved: bool = True) -> IdIndex:
        """correlation (``resolved``: or flow id) -> call index, of the given kinds (none given: any)."""
        return self._by_corr(self.calls, self.launch_corr, kinds, resolved)

    def device_by_corr(self, *kinds: int, resolved: bool = True) -> IdIndex:
        """correlation (``resolved``: or flow id) -> device record index, of the given kinds (none: any)."""
        return self._by_corr(self.device, self.kernel_corr, kinds, resolved)

    def _by_corr(self, rows: Calls | Device, flowed: array, kinds: tuple[int, ...], resolved: bool) -> IdIndex:
        ids = flowed if resolved else rows.corr
        return cast(IdIndex, self.once((type(rows), resolved, *kinds),
                                        lambda: IdIndex.where(ids, rows.kind if kinds else None, *kinds)))

    def device_groups(self) -> IdIndex:
        """Device records grouped by their own correlation (-1: none)."""
        return cast(IdIndex, self.once(("groups",), lambda: IdIndex.where(self.device.corr, absent=True)))

    def by_ext(self, rows: Ops | Others) -> IdIndex:
        """External id -> row of ``rows``: the model's ops, or its annotations with one."""
        return cast(IdIndex, self.once(("ext", id(rows)), lambda: IdIndex.where(rows.ext)))

    def ops_of_calls(self, calls: list[int]) -> list[int]:
        """The op that made each call (-1: none) by the one rule (docs/DESIGN.md §7); kept: two queries ask."""
        known = self.once(("call_op",), dict)
        todo = [i for i in dict.fromkeys(calls) if i not in known]
        if todo:
            c, by_ext = self.calls, self.by_ext(self.ops)
            for i in todo:
                got = by_ext.first(ext) if (ext := c.ext[i]) >= 0 else None
                known[i] = -1 if got is None else got
            timed = [i for i in todo if known[i] < 0]
            for i, op in zip(timed, innermost(self.ops, [c.start[i] for i in timed],
                                              [c.thread[i] for i in timed]), strict=True):
                known[i] = op
        return [known[i] for i in calls]

    def _resolve_flows(self, starts: Others, ends: Others) -> None:
        """Correlation-less launches and kernels take the id of the ac2g flow that starts/ends on them."""
        c, d = self.calls, self.device
        if starts.corr:
            launches = [i for i in range(len(c.kind)) if c.corr[i] < 0 and c.kind[i] in (E.C_LAUNCH, E.C_GRAPH)]
            for i, fid in _flow_ids(launches, c.thread, c.start, starts):
                self.launch_corr[i] = fid
                if self.calls_by_corr(resolved=False).last(fid) is None:  # no call has it as its own
                    self.flow_cpu.setdefault(fid, i)
        if ends.corr:
            kernels = [k for k in range(len(d.kind)) if d.corr[k] < 0 and d.kind[k] == E.D_KERNEL]
            for k, fid in _flow_ids(kernels, d.thread, d.start, ends):
                self.kernel_corr[k] = fid


class Timeline(Struct):
    """One trace as columns per kind, every event a row of one (docs/DESIGN.md §7, "One model")."""

    path: str
    size: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)
    ops: Ops = field(default_factory=Ops)
    modules: Intervals = field(default_factory=Intervals)
    calls: Calls = field(default_factory=Calls)
    device: Device = field(default_factory=Device)
    others: Others = field(default_factory=Others)
    annotations: Others = field(default_factory=Others)  # those with an External id (also in ``rest``)
    flow_starts: Others = field(default_factory=Others)
    flow_ends: Others = field(default_factory=Others)
    undated: Undated = field(default_factory=Undated)
    ranges: list[Range] = field(default_factory=list)
    signatures: list[tuple[str, str, str]] = field(default_factory=list)  # (name, dims, types) JSON text
    concretes: list[str] = field(default_factory=list)  # Concrete Inputs, compact JSON text
    module_names: list[str] = field(default_factory=list)
    kernels: list[Kernel] = field(default_factory=list)
    thread_pid: list[Any] = field(default_factory=list)
    call_names: list[str] = field(default_factory=list)
    rest_ts: array = field(default_factory=lambda: array("d"))  # events in no column above: time (NaN: none)
    rest_pid: array = field(default_factory=lambda: array("i"))  # ... and process, into ``pids``
    pids: dict[Any, int] = field(default_factory=dict)  # every process of the trace -> index
    events: int = 0  # events read
    span: tuple[float, float] | None = None  # first start, last end of every cpu_op, call and range
    joined: Joins | None = None  # the link pass, made on first use (``joins``)

    def joins(self) -> Joins:
        """The trace's joins by Kineto's ids (:class:`Joins`), made once."""
        if self.joined is None:
            self.joined = Joins(self)
        return self.joined

    def segment_finder(self, segs: list[Segment], source: str) -> Callable[[float, int], int]:
        """(time, thread) -> the segment of its process around it (``segments.assigner``), -1: none."""
        if source in ("filename", "all"):
            return lambda ts, thread: 0
        find = assigner(segs, self.pids)
        place = [self.pids[p] for p in self.thread_pid]
        return lambda ts, thread: find(ts, place[thread])

    def row_segments(self, segs: list[Segment], source: str, ts: array, where: array, threads: bool = True) -> Any:
        """:meth:`segment_finder` for every row by columns (``len(segs)``: none); ``where``: its thread,
        or its process index when not ``threads``."""
        import numpy as np

        if source in ("filename", "all"):
            return np.zeros(len(ts), np.int32)  # one segment holds everything: index 0
        t_all = np.frombuffer(ts, np.float64)
        pid = np.frombuffer(where, np.int32)
        if threads:
            pid = np.asarray([self.pids[p] for p in self.thread_pid], np.int32)[pid] if len(pid) else pid
        out = np.full(len(t_all), len(segs), np.int32)
        tables = segment_tables(segs, self.pids)
        for key in np.unique(pid).tolist():
            points, at, after = tables.get(key, tables[None])
            if not points:
                continue
            rows = np.flatnonzero((pid == key) & ~np.isnan(t_all))
            t = t_all[rows]
            p = np.asarray(points, np.float64)
            k = np.searchsorted(p, t, "right") - 1
            inside = k >= 0
            kk = np.maximum(k, 0)
            got = np.where(p[kk] == t, np.asarray(at, np.int32)[kk], np.asarray(after, np.int32)[kk])
            out[rows] = np.where(inside & (got >= 0), got, len(segs))
        return out

    def capture_windows(self) -> list[tuple[int, int]]:
        """The one definition of a capture window: (begin call, end call or -1 when never closed). An end
        closes its thread's latest open begin (streams captured from one thread nest), else its
        process's oldest (relaxed capture mode ends on another thread); one that closes nothing is ignored."""
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


class _Builder:
    """Fills a Timeline slice by slice; ``ids``: read with Kineto's ids (``Event``); ``ext``: with External
    ids (any shape with ``args``), so every command joins a call to its op by the same rule."""

    def __init__(self, tl: Timeline, ids: bool, ext: bool) -> None:
        self.tl = tl
        self.ids = ids
        self.ext = ext
        self.call_names = Interner()
        self.lo = float("inf")
        self.hi = float("-inf")
        self.threads = Interner()
        self.raw_sigs = Interner()
        self.concretes = Interner()
        self.modules = Interner()
        self.kernels = Interner()  # kernel keys (``kernel_key``), made Kernels by ``finish``
        self.budget = current_limits().max_distinct_bytes
        self.distinct = 0  # bytes charged so far for distinct things held (Limits.max_distinct_bytes)
        self.charged: dict[int, int] = {}  # id of each charged list -> how many of its items are charged
        self.categories: dict[str | None, int] = {}

    def _charge(self) -> None:
        """Charge the slice's new distinct values (docs/DESIGN.md §7.1, "Distinct things")."""
        held: list[Any] = [self.call_names.values, self.threads.values, self.raw_sigs.values, self.tl.pids,
                           self.concretes.values, self.modules.values, self.kernels.values, self.tl.ranges]
        for values in held:
            done = self.charged.get(id(values), 0)
            if len(values) > done:
                text = 0 if isinstance(values, dict) else 2 * _texts(values[done:])
                self.distinct += _DISTINCT_COST * (len(values) - done) + text
                self.charged[id(values)] = len(values)
        if self.distinct > self.budget:
            mib = f"{self.budget / (1 << 20):g} MiB"
            raise TraceError(
                self.tl.path,
                f"more than {mib} of distinct names, shapes, threads and ranges (the limit, --max-distinct-mib)",
            )

    def kernel_key(self, name: str | None, a: Any) -> tuple[Any, ...]:
        """A kernel's identity as a tuple; with ids also shared memory and registers (``summary`` shows them)."""
        if not self.ids:
            return (name, a.grid, a.block) if a is not None else (name, None, None)
        return (name, a.grid, a.block, a.smem, a.regs) if a is not None else (name, None, None, None, None)

    def add(self, events: list[Any]) -> None:
        """One slice, by bulk passes per kind, not a loop body per event (docs/DESIGN.md §7, ``timeline``)."""
        dest = self.categories
        for cat in set(map(_CAT, events)).difference(dest):
            dest[cat] = E.category(cat or "")
        kinds = list(map(dest.__getitem__, map(_CAT, events)))
        present = set(kinds)
        tl = self.tl
        tl.events += len(events)

        def pick(wanted: frozenset[int]) -> list[Any]:
            return list(compress(events, map(wanted.__contains__, kinds)))

        if E.CAT_PYTHON in present:
            self._modules([ev for ev in E.module_events(events) if ev.ts is not None])
        for wanted, fill, rows in ((_DEVICE, self._devices, "device"), (_CPU_OP, self._ops, "ops"),
                                   (_RUNTIME, self._calls, "calls")):  # dated rows, and the undated apart
            if present & wanted:
                for part, dest in zip(self._dated(pick(wanted)), (getattr(tl, rows), getattr(tl.undated, rows)),
                                      strict=True):
                    fill(part, dest)
        if E.CAT_ANNOTATION in present:
            self._annotations(pick(_ANNOTATION))
        if self.ids and not present <= _LINKED:
            self._rest(list(compress(events, map(not_, map(_LINKED.__contains__, kinds)))))
        if self.ids and present & _OTHER:
            self._other_linked(pick(_OTHER))
        self._charge()

    @staticmethod
    def _dated(events: list[Any]) -> tuple[list[Any], list[Any]]:
        ts = list(map(_TS, events))
        if None not in ts:
            return events, []
        timed = list(map(is_not, ts, repeat(None)))
        return list(compress(events, timed)), list(compress(events, map(not_, timed)))

    def _rest(self, events: list[Any]) -> None:
        tl = self.tl
        ts = list(map(_TS, events))
        tl.rest_ts.fromlist([_NAN if t is None else t for t in ts] if None in ts else ts)
        pids = tl.pids
        got = list(map(pids.get, map(_PID, events)))
        if None in got:
            got = [pids.setdefault(ev.pid, len(pids)) for ev in events]
        tl.rest_pid.fromlist(got)

    def _other_linked(self, events: list[Event]) -> None:
        """Other device records (linked like kernels) and ac2g flows; the rest of these kinds to ``rest``."""
        tl, rest = self.tl, []
        for ev in events:
            if self.categories[ev.cat] == E.CAT_GPU_OTHER and ev.args is not None:
                self._linked(tl.others, ev, E.ident(ev.args.correlation), E.ident(ev.args.ext))
                continue
            if E.is_flow(ev, ev.cat or ""):
                self._linked(tl.flow_ends if ev.ph == "f" else tl.flow_starts, ev, E.ident(ev.id), -1)
                if ev.ph == "f":
                    continue
            rest.append(ev)
        self._rest(rest)

    def _linked(self, rows: Others, ev: Any, corr: int, ext: int) -> None:
        rows.ts.append(_NAN if ev.ts is None else ev.ts)
        rows.thread.append(self.threads((ev.pid, ev.tid)))
        rows.corr.append(corr)
        rows.ext.append(ext)

    def _spans(self, events: list[Any], rows: Intervals | Calls, widen: bool = True) -> None:
        """The start, end and thread columns of ``rows``; ``widen``: the trace's span too (NaN never does)."""
        starts = [_NAN if (t := ev.ts) is None else t for ev in events]
        ends = list(map(add, starts, [ev.dur or 0.0 for ev in events]))
        rows.start.fromlist(starts)
        rows.end.fromlist(ends)
        rows.thread.fromlist(self.threads.many([(ev.pid, ev.tid) for ev in events]))
        if widen and starts:
            self.lo = min(self.lo, min(starts))
            self.hi = max(self.hi, max(ends))

    def _ops(self, ops: list[Any], iv: Ops) -> None:
        self._spans(ops, iv)
        args = [ev.args for ev in ops]
        raw = [
            (ev.name or "", bytes(a.dims), bytes(a.types)) if a is not None else (ev.name or "", b"", b"")
            for ev, a in zip(ops, args, strict=True)
        ]
        iv.label.fromlist(self.raw_sigs.many(raw))
        if self.ext:
            iv.ext.fromlist([E.ident(a.ext) if a is not None else -1 for a in args])
        if self.ids:
            iv.shapes.fromlist([1 if r[1] else 0 for r in raw])
            iv.concrete.fromlist(self.concretes.many([bytes(a.concrete) if a is not None else b"" for a in args]))

    def _annotations(self, events: list[Any]) -> None:
        """Ranges that may be segments or hints (no other range is read); with ids, those with an External id."""
        tl = self.tl
        for ev in events:
            name, ts, dur = ev.name or "", _NAN if ev.ts is None else ev.ts, ev.dur or 0.0
            self.lo, self.hi = min(self.lo, ts), max(self.hi, ts + dur)
            if ts == ts and (E.may_be_segment_marker(name) or E.may_be_hint(name)):
                tl.ranges.append(Range(name, ts, dur, ev.pid))
            if self.ids and ev.args is not None and E.ident(ev.args.ext) >= 0:
                self._linked(tl.annotations, ev, -1, E.ident(ev.args.ext))

    def _modules(self, events: list[Any]) -> None:
        iv = self.tl.modules
        self._spans(events, iv, widen=False)
        names = [ev.name or "" for ev in events]
        clean = {name: E.module_name(name) for name in set(names)}
        iv.label.fromlist(self.modules.many([clean[name] for name in names]))

    def _devices(self, events: list[Any], d: Device) -> None:
        dest = self.categories
        args = [ev.args for ev in events]
        d.start.fromlist([_NAN if (t := ev.ts) is None else t for ev in events])
        d.dur.fromlist([ev.dur or 0.0 for ev in events])
        d.kind.fromlist([dest[ev.cat] - E.CAT_KERNEL for ev in events])
        d.corr.fromlist([E.ident(a.correlation) if a is not None else -1 for a in args])
        d.node.fromlist([E.ident(a.node) if a is not None else -1 for a in args])
        key = self.kernel_key
        keys = [key(ev.name or "", a) for ev, a in zip(events, args, strict=True)]
        d.kernel.fromlist(self.kernels.many(keys))
        if self.ids:
            d.thread.fromlist(self.threads.many([(ev.pid, ev.tid) for ev in events]))
            d.ext.fromlist([E.ident(a.ext) if a is not None else -1 for a in args])

    def _calls(self, events: list[Any], c: Calls) -> None:
        self._spans(events, c)
        names = [ev.name or "" for ev in events]
        kind_of = {name: E.call_kind(name) for name in set(names)}
        kinds = list(map(kind_of.__getitem__, names))
        args = [ev.args for ev in events]  # BareEvent: never decoded, None
        c.name.fromlist(self.call_names.many(names))
        c.kind.fromlist(kinds)
        c.corr.fromlist([E.ident(a.correlation) if a is not None else -1 for a in args])
        c.kernel.fromlist([
            self.kernels(self.kernel_key(a.kernel, a)) if k == E.C_LAUNCH and a is not None and a.kernel is not None
            else -1 for a, k in zip(args, kinds, strict=True)
        ])  # a ROCm launch names its kernel
        c.ext.fromlist([E.ident(a.ext) if a is not None else -1 for a in args])

    def finish(self) -> None:
        tl = self.tl
        cache: dict[bytes, str] = {}
        tl.signatures = [(n, compact_json(d, cache), compact_json(t, cache)) for n, d, t in self.raw_sigs.values]
        tl.concretes = [compact_json(c, cache) for c in self.concretes.values]
        tl.module_names = list(self.modules.values)
        tl.kernels = [Kernel(name, grid or None, block or None, *x) for name, grid, block, *x in self.kernels.values]
        tl.thread_pid = [pid for pid, _ in self.threads.values]
        tl.call_names = list(self.call_names.values)
        tl.span = (self.lo, self.hi) if self.lo <= self.hi else None
        for pid in tl.thread_pid:
            tl.pids.setdefault(pid, len(tl.pids))


def load_timeline(
    path: str, progress: Callable[[int, int], None] | None = None, *, fields: type = SlimEvent
) -> Timeline:
    """Read ``path`` in one streaming pass (TraceError for any bad input), decoding ``fields`` (docs/DESIGN.md §7)."""
    stream = open_trace(path, progress)
    tl = Timeline(path)
    b = _Builder(tl, fields is Event, fields is not BareEvent)
    for events in stream.events(fields):
        b.add(events)
    try:
        b.finish()
    except (MemoryError, RecursionError) as exc:  # pragma: no cover - defensive
        raise TraceError(path, f"cannot analyse: {type(exc).__name__}") from None
    tl.size = stream.size
    tl.metadata = stream.metadata
    return tl


def innermost(iv: Intervals, times: list[float], threads: list[int]) -> list[int]:
    """For each (time, thread) query, the innermost interval containing it, else -1: one sweep per thread
    with a stack of open intervals (ranges nest on a thread). NaN places nothing (it would break the sort)."""
    out = [-1] * len(times)
    start, end = iv.start, iv.end
    spans: dict[int, list[int]] = {}
    for j, th in enumerate(iv.thread):
        if start[j] == start[j]:
            spans.setdefault(th, []).append(j)
    queries = sorted((q for q, th in enumerate(threads) if times[q] == times[q] and th in spans),
                     key=lambda q: (threads[q], times[q]))
    for th, qs in groupby(queries, key=threads.__getitem__):
        order = sorted(spans[th], key=lambda j: (start[j], -end[j]))
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
