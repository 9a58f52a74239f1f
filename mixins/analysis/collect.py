"""Fold a stream of event slices into parallel arrays and small lists (one pass, bounded per event).

Why arrays: a 500k-event trace costs tens of MB this way, not a dict per event. What is kept per
kind is just what linking and segmenting need; ``link`` and ``records`` turn it into a TraceRecord.
"""

from __future__ import annotations

from array import array
from typing import Any, NamedTuple

from mixins.analysis import events as E
from mixins.analysis.model import Kernel
from mixins.analysis.reader import Args, Event
from mixins.analysis.segments import Range

__all__ = ["Collector", "Launch", "KernelRec", "kernel_of"]


class Launch(NamedTuple):
    """A kernel or graph launch: event index, correlation, External id, its own kernel view (ROCm), graph?"""

    ev: int
    corr: int | None
    ext: int | None
    own: Kernel | None
    graph: bool


class KernelRec(NamedTuple):
    """A device kernel: event index, correlation, External id, identity."""

    ev: int
    corr: int | None
    ext: int | None
    kernel: Kernel


def kernel_of(name: str | None, args: Args) -> Kernel:
    """A kernel's identity from a kernel event, or from a launch that names its kernel (ROCm)."""
    return Kernel(
        name,
        tuple(args.grid) if args.grid else None,
        tuple(args.block) if args.block else None,
        args.smem,
        args.regs,
    )


FlowKey = tuple[Any, Any, float]


class Collector:
    """Per-event arrays (ts, pid, kind) plus per-kind lists; filled slice by slice by ``add``."""

    def __init__(self) -> None:
        self.ts = array("d")
        self.pid = array("i")
        self.kind = array("b")
        self.pids: dict[Any, int] = {}
        # cpu ops: event index, External id (-1: none), raw signature id, has shapes
        self.op_ev = array("i")
        self.op_ext = array("q")
        self.op_sig = array("i")
        self.op_shapes = array("b")
        self.raw_sigs: dict[tuple[Any, ...], int] = {}
        self.launches: list[Launch] = []
        self.kernels: list[KernelRec] = []
        self.gpu: list[tuple[int, int | None, int | None]] = []  # other device work: index, corr, ext
        self.ranges: list[Range] = []
        self.corr_cpu: dict[int, int] = {}  # correlation -> runtime/driver event index
        self.ext_cpu: dict[int, int] = {}  # External id -> annotation event index (ops added by link)
        self.flow_start: dict[FlowKey, Any] = {}
        self.flow_end: dict[FlowKey, Any] = {}
        self.flows_f: list[tuple[int, Any]] = []
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
                self.flow_start[(ev.pid, ev.tid, E.nan_ts(ev.ts))] = ev.id

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
        self.op_ev.append(i)
        self.op_ext.append(ext if ext is not None and 0 <= ext < 1 << 62 else -1)
        self.op_sig.append(sid)
        self.op_shapes.append(bool(raw[1]))

    def _kernel(self, i: int, ev: Event) -> None:
        args = ev.args
        if args is None:
            self.kernels.append(KernelRec(i, None, None, Kernel(ev.name)))
        else:
            self.kernels.append(KernelRec(i, args.correlation, args.ext, kernel_of(ev.name, args)))
        if args is None or args.correlation is None:  # an ac2g flow may still pair it
            self.kernel_flow_key[len(self.kernels) - 1] = (ev.pid, ev.tid, E.nan_ts(ev.ts))

    def _runtime(self, i: int, ev: Event) -> None:
        args = ev.args
        corr = args.correlation if args is not None else None
        if corr is not None:
            self.corr_cpu[corr] = i

    def _launch(self, i: int, ev: Event) -> None:
        self._runtime(i, ev)
        args = ev.args
        corr = args.correlation if args is not None else None
        ext = args.ext if args is not None else None
        own = kernel_of(args.kernel, args) if args is not None and args.kernel is not None else None
        if corr is None:
            self.launch_flow_key[len(self.launches)] = (ev.pid, ev.tid, E.nan_ts(ev.ts))
        self.launches.append(Launch(i, corr, ext, own, E.is_graph_launch(ev.name or "")))

    def _annotation(self, i: int, ev: Event) -> None:
        self.ranges.append(Range(ev.name or "", E.nan_ts(ev.ts), ev.dur or 0.0, ev.pid))
        if ev.args is not None and ev.args.ext is not None:
            self.ext_cpu.setdefault(ev.args.ext, i)

    def _flow_end(self, i: int, ev: Event) -> None:
        self.flows_f.append((i, ev.id))
        self.flow_end[(ev.pid, ev.tid, E.nan_ts(ev.ts))] = ev.id

    def _gpu(self, i: int, ev: Event) -> None:
        if ev.args is not None:
            self.gpu.append((i, ev.args.correlation, ev.args.ext))

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
        """Give correlation-less launches/kernels the id of the ac2g flow that starts/ends on them."""
        for k, key in self.launch_flow_key.items():
            fid = self.flow_start.get(key)
            if isinstance(fid, int):
                self.launches[k] = self.launches[k]._replace(corr=fid)
                self.corr_cpu.setdefault(fid, self.launches[k].ev)
        for k, key in self.kernel_flow_key.items():
            fid = self.flow_end.get(key)
            if isinstance(fid, int):
                self.kernels[k] = self.kernels[k]._replace(corr=fid)
