"""Fold a stream of event slices into parallel arrays and small lists (one pass, bounded per event).

Why arrays: a 500k-event trace costs tens of MB this way, not a dict per event. What is kept per
kind is just what linking and segmenting need; ``link`` and ``records`` turn it into a TraceRecord.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from typing import Any

from mixins.analysis.model import events as E
from mixins.analysis.model.events import ident
from mixins.analysis.model.record import Kernel
from mixins.analysis.model.segments import Range
from mixins.analysis.read.reader import Args, Event

__all__ = ["Collector", "kernel_of"]


def kernel_of(name: str | None, args: Args) -> Kernel:
    """A kernel's identity from a kernel event, or from a launch that names its kernel (ROCm)."""
    return Kernel(
        name,
        tuple(args.grid) if args.grid else None,
        tuple(args.block) if args.block else None,
        args.smem,
        args.regs,
    )


FlowKey = tuple[int, float]  # (thread index, ts)


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

    def add(self, key: int, value: int) -> None:
        ids = self.ids
        if ids and key < ids[-1]:
            self._sorted = False
        ids.append(key)
        self.values.append(value)

    def __len__(self) -> int:
        return len(self.ids)

    def finish(self) -> None:
        """Sort by id (stable) unless already sorted; call once all are added, before looking up."""
        if self._sorted:
            return
        ids, values = self.ids, self.values
        order = sorted(range(len(ids)), key=ids.__getitem__)
        self.ids = array("q", map(ids.__getitem__, order))
        self.values = array("i", map(values.__getitem__, order))
        self._sorted = True

    def last(self, key: int) -> int | None:
        ids = self.ids
        k = bisect_right(ids, key) - 1
        return self.values[k] if k >= 0 and ids[k] == key else None

    def first(self, key: int) -> int | None:
        ids = self.ids
        k = bisect_left(ids, key)
        return self.values[k] if k < len(ids) and ids[k] == key else None


class Collector:
    """Per-event arrays (ts, pid, kind) plus per-kind columns; filled slice by slice by ``add``.

    Why columns and interning, not an object per event: memory is bounded by ``--max-events`` times
    the bytes kept per event (issue 19 measured ~680 B per kernel event with a tuple and a Kernel each);
    an ``array`` column costs 1-8 B per event and a kernel's identity is stored once (``kernels``).
    """

    def __init__(self) -> None:
        self.ts = array("d")
        self.pid = array("i")
        self.kind = array("b")
        self.pids: dict[Any, int] = {}
        self.threads: dict[tuple[Any, Any], int] = {}  # (pid, tid) -> index, for flow keys
        # cpu ops: event index, External id (-1: none), raw signature id, has shapes
        self.op_ev = array("i")
        self.op_ext = array("q")
        self.op_sig = array("i")
        self.op_shapes = array("b")
        self.raw_sigs: dict[tuple[Any, ...], int] = {}
        # kernel identities, interned: id -> Kernel
        self.kernels: list[Kernel] = []
        self.kernel_ids: dict[tuple[Any, ...], int] = {}
        # launches (kernel and graph): event index, correlation, External id, own kernel id (ROCm), graph?
        self.la_ev = array("i")
        self.la_corr = array("q")
        self.la_ext = array("q")
        self.la_own = array("i")
        self.la_graph = array("b")
        # device kernels: event index, correlation, External id, kernel id
        self.k_ev = array("i")
        self.k_corr = array("q")
        self.k_ext = array("q")
        self.k_kernel = array("i")
        # other device work: event index, correlation, External id
        self.g_ev = array("i")
        self.g_corr = array("q")
        self.g_ext = array("q")
        self.ranges: list[Range] = []  # only those that can be segment markers
        self.corr_cpu = IdIndex()  # correlation -> runtime/driver event index (the last one)
        self._flow_cpu: dict[int, int] = {}  # correlations given to launches by ac2g flows
        self.ext_annotation = IdIndex()  # External id -> annotation event index (the first one)
        self.ext_op = IdIndex()  # External id -> op index (into ``op_*``)
        # ac2g flows, kept as columns; the (thread, ts) -> id maps are built only if a launch or
        # kernel without correlation needs them (``resolve_flows``)
        self.fs_thread = array("i")
        self.fs_ts = array("d")
        self.fs_id = array("q")
        self.ff_ev = array("i")
        self.ff_thread = array("i")
        self.ff_ts = array("d")
        self.ff_id = array("q")
        self.launch_flow_key: dict[int, FlowKey] = {}
        self.kernel_flow_key: dict[int, FlowKey] = {}

    def add(self, events: list[Event]) -> None:
        ts_a, pid_a, kind_a, pids = self.ts, self.pid, self.kind, self.pids
        handlers = self._handlers
        for ev in events:
            i = len(kind_a)
            ts_a.append(E.nan_ts(ev.ts))
            p = pids.get(ev.pid)
            if p is None:
                p = pids[ev.pid] = len(pids)
            pid_a.append(p)
            cat = ev.cat or ""
            kind = E.kind_of(ev, cat)
            kind_a.append(kind)
            handler = handlers.get(kind)
            if handler is not None:
                handler(self, i, ev)
            elif kind == E.K_RUNTIME:
                self._runtime(i, ev)
            elif kind == E.K_OTHER and E.is_flow(ev, cat):
                self.fs_thread.append(self._thread(ev))
                self.fs_ts.append(E.nan_ts(ev.ts))
                self.fs_id.append(ident(ev.id))

    def _thread(self, ev: Event) -> int:
        key = (ev.pid, ev.tid)
        got = self.threads.get(key)
        if got is None:
            got = self.threads[key] = len(self.threads)
        return got

    def _kernel_id(self, name: str | None, args: Args) -> int:
        """Interned kernel identity; keyed by a plain tuple (hashed in C) before any Kernel is built."""
        key = (name, args.grid, args.block, args.smem, args.regs)
        got = self.kernel_ids.get(key)
        if got is None:
            got = self.kernel_ids[key] = len(self.kernels)
            self.kernels.append(kernel_of(name, args))
        return got

    def _cpu_op(self, i: int, ev: Event) -> None:
        args = ev.args
        if args is not None:
            raw = (ev.name, bytes(args.dims), bytes(args.types), bytes(args.concrete))
            ext = args.ext
        else:
            raw, ext = (ev.name, b"", b"", b""), None
        sid = self.raw_sigs.get(raw)
        if sid is None:
            sid = self.raw_sigs[raw] = len(self.raw_sigs)
        ext = ident(ext)
        if ext >= 0:
            self.ext_op.add(ext, len(self.op_ev))
        self.op_ev.append(i)
        self.op_ext.append(ext)
        self.op_sig.append(sid)
        self.op_shapes.append(bool(raw[1]))

    def _kernel(self, i: int, ev: Event) -> None:
        args = ev.args
        self.k_ev.append(i)
        if args is None:
            corr = -1
            self.k_ext.append(-1)
            self.k_kernel.append(self._kernel_id(ev.name, _NO_ARGS))
        else:
            corr = ident(args.correlation)
            self.k_ext.append(ident(args.ext))
            self.k_kernel.append(self._kernel_id(ev.name, args))
        self.k_corr.append(corr)
        if corr < 0:  # an ac2g flow may still pair it
            self.kernel_flow_key[len(self.k_ev) - 1] = (self._thread(ev), E.nan_ts(ev.ts))

    def _runtime(self, i: int, ev: Event) -> None:
        args = ev.args
        corr = ident(args.correlation) if args is not None else -1
        if corr >= 0:
            self.corr_cpu.add(corr, i)

    def finish(self) -> None:
        """Sort the id indexes (once all events are in)."""
        self.corr_cpu.finish()
        self.ext_annotation.finish()
        self.ext_op.finish()

    def cpu_of(self, corr: int) -> int | None:
        """The runtime/driver call (event index) with correlation ``corr`` (after :meth:`finish`)."""
        got = self.corr_cpu.last(corr)
        return got if got is not None else self._flow_cpu.get(corr)

    def cpu_of_ext(self, ext: int) -> int | None:
        """The CPU event of an External id: its last op, else its first annotation (after :meth:`finish`)."""
        op = self.ext_op.last(ext)
        if op is not None:
            return self.op_ev[op]
        return self.ext_annotation.first(ext)

    def _launch(self, i: int, ev: Event) -> None:
        self._runtime(i, ev)
        args = ev.args
        corr = ident(args.correlation) if args is not None else -1
        if corr < 0:
            self.launch_flow_key[len(self.la_ev)] = (self._thread(ev), E.nan_ts(ev.ts))
        self.la_ev.append(i)
        self.la_corr.append(corr)
        self.la_ext.append(ident(args.ext) if args is not None else -1)
        self.la_own.append(self._kernel_id(args.kernel, args) if args is not None and args.kernel is not None else -1)
        self.la_graph.append(self.kind[i] == E.K_GRAPH)  # kind_of decided it (events.call_kind)

    def _annotation(self, i: int, ev: Event) -> None:
        name = ev.name or ""
        if E.may_be_segment_marker(name):
            self.ranges.append(Range(name, E.nan_ts(ev.ts), ev.dur or 0.0, ev.pid))
        if ev.args is not None:
            ext = ident(ev.args.ext)
            if ext >= 0:
                self.ext_annotation.add(ext, i)

    def _flow_end(self, i: int, ev: Event) -> None:
        self.ff_ev.append(i)
        self.ff_thread.append(self._thread(ev))
        self.ff_ts.append(E.nan_ts(ev.ts))
        self.ff_id.append(ident(ev.id))

    def _gpu(self, i: int, ev: Event) -> None:
        if ev.args is not None:
            self.g_ev.append(i)
            self.g_corr.append(ident(ev.args.correlation))
            self.g_ext.append(ident(ev.args.ext))

    _handlers = {
        E.K_CPU_OP: _cpu_op,
        E.K_KERNEL: _kernel,
        E.K_LAUNCH: _launch,
        E.K_GRAPH: _launch,
        E.K_ANNOT: _annotation,
        E.K_FLOW_F: _flow_end,
        E.K_GPU: _gpu,
    }

    def resolve_flows(self) -> None:
        """Give correlation-less launches/kernels the id of the ac2g flow that starts/ends on them
        (after :meth:`finish`)."""
        if self.launch_flow_key:
            starts = _flow_ids(set(self.launch_flow_key.values()), self.fs_thread, self.fs_ts, self.fs_id)
            for k, key in self.launch_flow_key.items():
                fid = starts.get(key, -1)
                if fid >= 0:
                    self.la_corr[k] = fid
                    if self.cpu_of(fid) is None:
                        self._flow_cpu[fid] = self.la_ev[k]
        if self.kernel_flow_key:
            ends = _flow_ids(set(self.kernel_flow_key.values()), self.ff_thread, self.ff_ts, self.ff_id)
            for k, key in self.kernel_flow_key.items():
                fid = ends.get(key, -1)
                if fid >= 0:
                    self.k_corr[k] = fid


_NO_ARGS = Args()


def _flow_ids(wanted: set[FlowKey], threads: array, ts: array, ids: array) -> dict[FlowKey, int]:
    """(thread, ts) -> flow id for the wanted keys only; a later flow at the same key wins (as a dict would)."""
    out: dict[FlowKey, int] = {}
    for n, key in enumerate(zip(threads, ts, strict=True)):
        if key in wanted:
            out[key] = ids[n]
    return out
