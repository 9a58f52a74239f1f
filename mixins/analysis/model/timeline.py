"""A time-resolved view of one trace: op and module intervals, runtime calls, device work.

Why a second collector next to ``collect``: attribution needs what ``summary`` throws away —
durations, threads, nesting (the *innermost* ``cpu_op`` and ``nn.Module`` around a launch) and the
capture windows. Everything is kept in parallel arrays with interned labels, one pass over the
streaming reader, so a serving profile costs a few dozen bytes per kept event. Events of no use
(most ``python_function`` calls, flows, counters) are never stored.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mixins.analysis.model import events as E
from mixins.analysis.model.record import Kernel
from mixins.analysis.model.segments import Range
from mixins.analysis.read.reader import SlimEvent, TraceError, compact_json, open_trace

__all__ = ["Intervals", "Timeline", "load_timeline", "innermost"]

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


@dataclass
class Intervals:
    """[start, end] ranges on a thread with a label id (ops: signature, modules: name)."""

    start: array = field(default_factory=lambda: array("d"))
    end: array = field(default_factory=lambda: array("d"))
    thread: array = field(default_factory=lambda: array("i"))
    label: array = field(default_factory=lambda: array("i"))

    def add(self, start: float, dur: float, thread: int, label: int) -> None:
        self.start.append(start)
        self.end.append(start + dur)
        self.thread.append(thread)
        self.label.append(label)

    def __len__(self) -> int:
        return len(self.start)


@dataclass
class Calls:
    """Runtime / driver calls: launches, graph launches, copies, sets, capture begin/end, instantiates, others."""

    start: array = field(default_factory=lambda: array("d"))
    end: array = field(default_factory=lambda: array("d"))
    name: array = field(default_factory=lambda: array("i"))  # into Timeline.call_names
    thread: array = field(default_factory=lambda: array("i"))
    kind: array = field(default_factory=lambda: array("b"))
    corr: array = field(default_factory=lambda: array("q"))  # -1: none
    kernel: array = field(default_factory=lambda: array("i"))  # the launch's own kernel (ROCm), -1: none


@dataclass
class Device:
    """Device work: kernels, memcpy, memset with duration, correlation and (CUDA) graph node id."""

    start: array = field(default_factory=lambda: array("d"))
    dur: array = field(default_factory=lambda: array("d"))
    kind: array = field(default_factory=lambda: array("b"))
    corr: array = field(default_factory=lambda: array("q"))
    kernel: array = field(default_factory=lambda: array("i"))
    node: array = field(default_factory=lambda: array("q"))  # -1: none


@dataclass
class Timeline:
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
            (c.start[i], c.kind[i] == E.C_END, i) for i in range(len(c.kind)) if c.kind[i] in (E.C_BEGIN, E.C_END)
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
    """Fills a Timeline slice by slice."""

    def __init__(self, tl: Timeline, device: bool = True, modules: bool = True) -> None:
        self.tl = tl
        self.keep_device = device
        self.keep_modules = modules
        self.call_names = _Interner()
        self.lo = float("inf")
        self.hi = float("-inf")
        self.threads = _Interner()
        self.raw_sigs = _Interner()
        self.modules = _Interner()
        self.kernels = _Interner()
        self.categories: dict[str | None, int] = {}
        self.kernel_ids: dict[tuple[Any, ...], int] = {}

    def thread(self, ev: SlimEvent) -> int:
        return self.threads((ev.pid, ev.tid))

    def kernel(self, name: str | None, ev: SlimEvent) -> int:
        """Interned kernel identity; keyed by a plain tuple (hashed in C) before any Kernel is built."""
        a = ev.args
        return self._kernel_id((name, a.grid, a.block) if a is not None else (name, None, None))

    def _kernel_id(self, key: tuple[Any, ...]) -> int:
        got = self.kernel_ids.get(key)
        if got is None:
            name, grid, block = key
            got = self.kernel_ids[key] = self.kernels(Kernel(name, grid or None, block or None))
        return got

    def add(self, events: list[SlimEvent]) -> None:
        """One slice. Bulk comprehensions per kind, not a Python loop body per event: a replay is
        ~all kernels and a capture ~all ``python_function`` calls, hundreds of thousands of each."""
        dest = self.categories
        cats = {ev.cat for ev in events}
        for cat in cats.difference(dest):
            dest[cat] = E.category(cat or "")
        present = {dest[c] for c in cats}
        if self.keep_device and any(k >= E.CAT_KERNEL for k in present):
            self._devices([ev for ev in events if dest[ev.cat] >= E.CAT_KERNEL and ev.ts is not None])
        if self.keep_modules and E.CAT_PYTHON in present:
            self._modules([ev for ev in E.module_events(events) if ev.ts is not None])
        if present & {E.CAT_CPU_OP, E.CAT_RUNTIME, E.CAT_ANNOTATION}:
            cpu_side = [ev for ev in events if E.CAT_PYTHON < dest[ev.cat] < E.CAT_GPU_OTHER and ev.ts is not None]
            self._others(cpu_side, dest)

    def _others(self, events: list[SlimEvent], dest: dict[str | None, int]) -> None:
        """cpu_op intervals, runtime calls and annotation ranges (a few percent of any trace)."""
        tl = self.tl
        lo, hi = self.lo, self.hi
        for ev in events:
            kind = dest[ev.cat]
            name = ev.name or ""
            ts = ev.ts or 0.0
            end = ts + (ev.dur or 0.0)
            lo = ts if ts < lo else lo
            hi = end if end > hi else hi
            if kind == E.CAT_CPU_OP:
                a = ev.args
                raw = (name, bytes(a.dims), bytes(a.types)) if a is not None else (name, b"", b"")
                tl.ops.add(ts, ev.dur or 0.0, self.thread(ev), self.raw_sigs(raw))
            elif kind == E.CAT_RUNTIME:
                self._call(ev, name)
            elif kind == E.CAT_ANNOTATION:
                if E.may_be_segment_marker(name) or E.may_be_hint(name):  # no other range is read
                    tl.ranges.append(Range(name, ts, ev.dur or 0.0, ev.pid))
        self.lo, self.hi = lo, hi

    def _modules(self, events: list[SlimEvent]) -> None:
        iv = self.tl.modules
        for ev in events:
            iv.add(ev.ts or 0.0, ev.dur or 0.0, self.thread(ev), self.modules(E.module_name(ev.name or "")))

    def _devices(self, events: list[SlimEvent]) -> None:
        """Kernels, memcpys and memsets, column by column."""
        d, dest, top = self.tl.device, self.categories, E.ID_LIMIT
        args = [ev.args for ev in events]
        # array.fromlist: about twice array.extend's speed on a list
        d.start.fromlist([ev.ts or 0.0 for ev in events])
        d.dur.fromlist([ev.dur or 0.0 for ev in events])
        d.kind.fromlist([dest[ev.cat] - E.CAT_KERNEL for ev in events])
        d.corr.fromlist(
            [c if a is not None and (c := a.correlation) is not None and 0 <= c < top else -1 for a in args]
        )
        d.node.fromlist([n if a is not None and (n := a.node) is not None and 0 <= n < top else -1 for a in args])
        keys = [
            (ev.name or "", a.grid, a.block) if a is not None else (ev.name or "", None, None)
            for ev, a in zip(events, args, strict=True)
        ]
        ids = list(map(self.kernel_ids.get, keys))
        if None in ids:
            ids = [self._kernel_id(k) for k in keys]
        d.kernel.fromlist(ids)

    def _call(self, ev: SlimEvent, name: str) -> None:
        kind = E.call_kind(name)
        a = ev.args
        c = self.tl.calls
        ts = ev.ts or 0.0
        c.start.append(ts)
        c.end.append(ts + (ev.dur or 0.0))
        c.name.append(self.call_names(name))
        c.thread.append(self.thread(ev))
        c.kind.append(kind)
        c.corr.append(E.ident(a.correlation) if a is not None else -1)
        own = a.kernel if a is not None and kind == E.C_LAUNCH else None
        c.kernel.append(self.kernel(own, ev) if own is not None else -1)

    def finish(self) -> None:
        tl = self.tl
        cache: dict[bytes, str] = {}
        tl.signatures = [(n, compact_json(d, cache), compact_json(t, cache)) for n, d, t in self.raw_sigs.values]
        tl.module_names = list(self.modules.values)
        tl.kernels = list(self.kernels.values)
        tl.thread_pid = [pid for pid, _ in self.threads.values]
        tl.call_names = list(self.call_names.values)
        tl.span = (self.lo, self.hi) if self.lo <= self.hi else None


def load_timeline(
    path: str, progress: Callable[[int, int], None] | None = None, *, device: bool = True, modules: bool = True
) -> Timeline:
    """Read ``path`` in one streaming pass; raises TraceError for any bad input. ``device`` / ``modules``
    False: device work / ``nn.Module`` intervals are not kept (``time`` reads neither)."""
    stream = open_trace(path, progress)
    tl = Timeline(path)
    b = _Builder(tl, device, modules)
    for events in stream.slim_events():
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
    """
    out = [-1] * len(times)
    queries: dict[int, list[int]] = {}
    for q, th in enumerate(threads):
        queries.setdefault(th, []).append(q)
    spans: dict[int, list[int]] = {th: [] for th in queries}
    for j, th in enumerate(iv.thread):
        got = spans.get(th)
        if got is not None:
            got.append(j)
    start, end = iv.start, iv.end
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
