"""From a stream of events to a per-trace record: identity, segments, op signatures, op -> kernel links.

Why a compact record: ``summary``, ``diff`` and ``check`` only need, per segment, counts and the
ordered sequence of op signatures with their kernels. Events are folded into parallel arrays and
interned tuples while streaming, so a 500k-event trace costs tens of MB, not a dict per event.
"""

from __future__ import annotations

import os
import re
from array import array
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Any

import msgspec

from mixins.analysis.reader import Event, TraceError, open_trace

__all__ = [
    "Identity",
    "Kernel",
    "Signature",
    "Op",
    "Segment",
    "TraceRecord",
    "OUTSIDE",
    "identity_from_name",
    "load_record",
    "is_trace_name",
    "summarize",
    "compact",
    "CompactTrace",
    "op_json",
    "identity_json",
]

OUTSIDE = "(outside)"
ALL = "all"

# Event kinds stored per event (one byte each).
K_OTHER, K_CPU_OP, K_LAUNCH, K_GRAPH, K_KERNEL, K_RUNTIME, K_GPU, K_ANNOT, K_FLOW_F = range(9)

_OURS = re.compile(
    r"^cuda_graph_capture-(?P<runner>.+?)-TP-(?P<tp>\d+)(?:-PP-(?P<pp>\d+))?(?:-(?P<n>\d+))?\.json(?:\.gz)?$"
)
_UPSTREAM_BS = re.compile(r"^(?:(?P<runner>.+?)_)?bs_(?P<bs>\d+)_rank(?P<rank>\d+)\.json(?:\.gz)?$")
_OUR_SEGMENT = re.compile(r"^capture::(?P<label>.+)$")
_FOREIGN_SEGMENT = re.compile(r"^capture_(?P<bs>\d+)(?:_(?P<variant>[A-Za-z0-9]+))?$")
_BS = re.compile(r"(?:^|,)bs=(\d+)(?:,|$)")


def is_trace_name(name: str) -> bool:
    """Files ``ls``/``check`` consider: visible ``*.json``/``*.json.gz`` (dotfiles are our temp files)."""
    return not name.startswith(".") and (name.endswith(".json.gz") or name.endswith(".json"))


@dataclass
class Identity:
    """Who produced a trace; ``source`` says where it came from (never guessed silently)."""

    runner: str | None = None
    runner_class: str | None = None
    tp_rank: int | None = None
    pp_rank: int | None = None
    pp_size: int | None = None
    capture_index: int = 1
    source: str = "none"  # "metadata" | "filename" | "distributedInfo" | "none"
    bs: int | None = None  # only from an upstream per-batch-size file name
    extra: dict[str, Any] = field(default_factory=dict)


def _int_or_none(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def identity_from_name(path: str) -> Identity | None:
    """Parse our file name or upstream's per-batch-size one; None if neither."""
    name = os.path.basename(path)
    m = _OURS.match(name)
    if m:
        return Identity(
            runner=m["runner"],
            tp_rank=int(m["tp"]),
            pp_rank=int(m["pp"]) if m["pp"] else 0,
            capture_index=int(m["n"]) if m["n"] else 1,
            source="filename",
        )
    m = _UPSTREAM_BS.match(name)
    if m:
        return Identity(
            runner=m["runner"], tp_rank=int(m["rank"]), pp_rank=0, bs=int(m["bs"]), source="filename"
        )
    return None


def identity_of(path: str, metadata: dict[str, Any]) -> Identity:
    """metadata ``capture_trace`` > file name > ``distributedInfo.rank`` > nothing."""
    from_name = identity_from_name(path)
    meta = metadata.get("capture_trace")
    if isinstance(meta, dict) and (
        meta.get("runner") is not None or _int_or_none(meta.get("tp_rank")) is not None
    ):
        runner = meta.get("runner")
        idx = _int_or_none(meta.get("capture_index"))
        keep = ("sglang_version", "torch_version", "package_version", "hostname", "device", "time_utc", "pid",
                "tp_size", "dp_size", "world_size", "rank_source", "size_source", "capture_bs")
        return Identity(
            runner=runner if isinstance(runner, str) else None,
            runner_class=meta.get("runner_class") if isinstance(meta.get("runner_class"), str) else None,
            tp_rank=_int_or_none(meta.get("tp_rank")),
            pp_rank=_int_or_none(meta.get("pp_rank")) or 0,
            pp_size=_int_or_none(meta.get("pp_size")),
            capture_index=idx if idx is not None else (from_name.capture_index if from_name else 1),
            source="metadata",
            bs=from_name.bs if from_name else None,
            extra={k: meta[k] for k in keep if k in meta},
        )
    if from_name is not None:
        return from_name
    dist = metadata.get("distributedInfo")
    if isinstance(dist, dict) and _int_or_none(dist.get("rank")) is not None:
        world = _int_or_none(dist.get("world_size"))  # the rank is a world rank: the world is the group
        return Identity(tp_rank=dist["rank"], pp_rank=0, source="distributedInfo", extra={"tp_size": world})
    return Identity()


@dataclass(frozen=True, slots=True)
class Kernel:
    """A launch's kernel as far as the trace knows it; ``name`` None means unknown (captured launch)."""

    name: str | None
    grid: tuple[int, ...] | None = None
    block: tuple[int, ...] | None = None
    smem: int | None = None
    regs: int | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "grid": list(self.grid) if self.grid else None,
            "block": list(self.block) if self.block else None,
            "shared_memory": self.smem,
            "registers": self.regs,
        }


@dataclass(frozen=True, slots=True)
class Signature:
    """(op name, Input Dims, Input type, Concrete Inputs) as compact JSON text, layout-independent."""

    name: str
    dims: str
    types: str
    concrete: str

    @property
    def shape_key(self) -> tuple[str, str, str]:
        return (self.name, self.dims, self.types)



@dataclass(slots=True)
class Op:
    """One cpu_op in time order with what it launched (kernels in launch order)."""

    sig: Signature
    ts: float
    kernels: tuple[Kernel, ...] = ()
    graph_launches: int = 0
    has_shapes: bool = True
    attributed: tuple[str | None, ...] = ()  # Part 2: names recovered by alignment, per unnamed launch

    @property
    def key(self) -> tuple[Any, ...]:
        """What diff/check compare: no timestamps, ids, pids or durations."""
        return (
            self.sig.name,
            self.sig.dims,
            self.sig.types,
            self.sig.concrete,
            self.kernels,
            self.graph_launches,
        )


@dataclass
class Segment:
    label: str
    bs: int | None = None
    start: float = float("-inf")
    end: float = float("inf")
    pid: int | str | None = None
    events: int = 0
    cpu_ops: int = 0
    launches: int = 0
    graph_launches: int = 0
    kernels: int = 0
    unnamed_launches: int = 0
    ops_without_shapes: int = 0
    linked_kernels: int = 0
    attributed_launches: int = 0
    ops: list[Op] = field(default_factory=list)

    @property
    def signatures(self) -> int:
        return len({op.sig.shape_key for op in self.ops})

    @property
    def unknown_launches(self) -> int:
        return self.unnamed_launches - self.attributed_launches


@dataclass
class TraceRecord:
    path: str
    size: int
    identity: Identity
    events: int
    segments: list[Segment]
    segment_source: str  # "capture::" | "filename" | "foreign" | "all"
    top_keys: list[str] = field(default_factory=list)

    def segment(self, label: str) -> Segment | None:
        for s in self.segments:
            if s.label == label:
                return s
        return None


def _kernel(name: str | None, args: Any) -> Kernel:
    """A kernel's identity from a kernel event, or from a launch that names its kernel (ROCm)."""
    return Kernel(
        name,
        tuple(args.grid) if args.grid else None,
        tuple(args.block) if args.block else None,
        args.smem,
        args.regs,
    )


class _Collector:
    """Folds event slices into arrays and small lists; ``finish`` builds the TraceRecord."""

    def __init__(self) -> None:
        self.ts = array("d")
        self.pid = array("i")
        self.kind = array("b")
        self.pids: dict[Any, int] = {}
        # cpu ops: event index, External id, raw signature id, has shapes
        self.op_ev = array("i")
        self.op_ext = array("q")  # -1: none
        self.op_sig = array("i")
        self.op_shapes = array("b")
        self.raw_sigs: dict[tuple[Any, ...], int] = {}
        # launches (LaunchKernel / GraphLaunch): event index, correlation, External id, own kernel info
        self.launches: list[tuple[int, int | None, int | None, Kernel | None, bool]] = []
        # kernels: event index, correlation, External id, info
        self.kernels: list[tuple[int, int | None, int | None, Kernel]] = []
        # other GPU-side events: event index, correlation, External id
        self.gpu: list[tuple[int, int | None, int | None]] = []
        self.annotations: list[tuple[int, str, float, float, Any]] = []
        self.corr_cpu: dict[int, int] = {}  # correlation -> runtime/driver event index
        self.ext_cpu: dict[int, int] = {}  # External id -> annotation event index (ops added in finish)
        self.flow_start: dict[tuple[Any, Any, float], Any] = {}
        self.flow_end: dict[tuple[Any, Any, float], Any] = {}
        self.flows_f: list[tuple[int, Any]] = []
        self.launch_flow_key: dict[int, tuple[Any, Any, float]] = {}
        self.kernel_flow_key: dict[int, tuple[Any, Any, float]] = {}

    def add(self, events: list[Event]) -> None:
        ts_a, pid_a, kind_a, pids = self.ts, self.pid, self.kind, self.pids
        nan = float("nan")
        for ev in events:
            i = len(kind_a)
            ts = ev.ts
            ts_a.append(nan if ts is None else ts)
            p = pids.get(ev.pid)
            if p is None:
                p = pids[ev.pid] = len(pids)
            pid_a.append(p)
            cat = ev.cat or ""
            args = ev.args
            if cat == "cpu_op":
                kind_a.append(K_CPU_OP)
                ext = args.ext if args is not None else None
                if args is not None:
                    raw = (ev.name, bytes(args.dims), bytes(args.types), bytes(args.concrete))
                    has = bool(args.dims)
                else:
                    raw = (ev.name, b"", b"", b"")
                    has = False
                sid = self.raw_sigs.get(raw)
                if sid is None:
                    sid = self.raw_sigs[raw] = len(self.raw_sigs)
                self.op_ev.append(i)
                self.op_ext.append(ext if ext is not None and 0 <= ext < 1 << 62 else -1)
                self.op_sig.append(sid)
                self.op_shapes.append(has)
            elif cat == "kernel":
                kind_a.append(K_KERNEL)
                if args is None:
                    self.kernels.append((i, None, None, Kernel(ev.name)))
                else:
                    self.kernels.append((i, args.correlation, args.ext, _kernel(ev.name, args)))
                if args is None or args.correlation is None:  # ac2g flow may still pair it
                    self.kernel_flow_key[len(self.kernels) - 1] = (
                        ev.pid,
                        ev.tid,
                        ts if ts is not None else nan,
                    )
            elif "runtime" in cat or "driver" in cat:
                name = ev.name or ""
                corr = args.correlation if args is not None else None
                if corr is not None:
                    self.corr_cpu[corr] = i
                if "LaunchKernel" in name or "GraphLaunch" in name:
                    graph = "GraphLaunch" in name
                    kind_a.append(K_GRAPH if graph else K_LAUNCH)
                    own = None
                    ext = None
                    if args is not None:
                        ext = args.ext
                        if args.kernel is not None:
                            own = _kernel(args.kernel, args)
                    if corr is None:
                        self.launch_flow_key[len(self.launches)] = (
                            ev.pid,
                            ev.tid,
                            ts if ts is not None else nan,
                        )
                    self.launches.append((i, corr, ext, own, graph))
                else:
                    kind_a.append(K_RUNTIME)
            elif cat == "user_annotation":
                kind_a.append(K_ANNOT)
                self.annotations.append(
                    (i, ev.name or "", ts if ts is not None else nan, ev.dur or 0.0, ev.pid)
                )
                if args is not None and args.ext is not None:
                    self.ext_cpu.setdefault(args.ext, i)
            elif cat == "ac2g" or (ev.ph in ("s", "f") and ev.id is not None and cat.startswith("ac2g")):
                if ev.ph == "f":
                    kind_a.append(K_FLOW_F)
                    self.flows_f.append((i, ev.id))
                    self.flow_end[(ev.pid, ev.tid, ts if ts is not None else nan)] = ev.id
                else:
                    kind_a.append(K_OTHER)
                    self.flow_start[(ev.pid, ev.tid, ts if ts is not None else nan)] = ev.id
            elif cat.startswith("gpu_") or cat in ("gpu_memcpy", "gpu_memset"):
                kind_a.append(K_GPU)
                if args is not None:
                    self.gpu.append((i, args.correlation, args.ext))
            else:
                kind_a.append(K_OTHER)

    def resolve_flows(self) -> None:
        """Give correlation-less launches/kernels the id of the ac2g flow that starts/ends on them."""
        for k, key in self.launch_flow_key.items():
            fid = self.flow_start.get(key)
            if isinstance(fid, int):
                i, _, ext, own, graph = self.launches[k]
                self.launches[k] = (i, fid, ext, own, graph)
                self.corr_cpu.setdefault(fid, i)
        for k, key in self.kernel_flow_key.items():
            fid = self.flow_end.get(key)
            if isinstance(fid, int):
                i, _, ext, kern = self.kernels[k]
                self.kernels[k] = (i, fid, ext, kern)


def _compact_json(raw: bytes, cache: dict[bytes, str]) -> str:
    """Layout-independent text of a raw JSON value ('' when absent)."""
    if not raw:
        return ""
    got = cache.get(raw)
    if got is None:
        try:
            got = msgspec.json.encode(msgspec.json.decode(raw)).decode()
        except msgspec.DecodeError:  # pragma: no cover - the reader validated it
            got = raw.decode("utf-8", "replace")
        cache[raw] = got
    return got


def _segment_markers(c: _Collector, identity: Identity) -> tuple[list[Segment], str]:
    ours, foreign = [], []
    for _, name, ts, dur, pid in c.annotations:
        m = _OUR_SEGMENT.match(name)
        if m:
            label = m["label"]
            bs = _BS.search(label)
            ours.append(Segment(label, int(bs.group(1)) if bs else None, ts, ts + dur, pid))
            continue
        m = _FOREIGN_SEGMENT.match(name)
        if m:
            label = f"bs={m['bs']}" + (f",variant={m['variant']}" if m["variant"] else "")
            foreign.append(Segment(label, int(m["bs"]), ts, ts + dur, pid))
    if ours:
        segs, source = ours, "capture::"
    elif identity.bs is not None:
        return [Segment(f"bs={identity.bs}", identity.bs)], "filename"
    elif foreign:
        segs, source = foreign, "foreign"
    else:
        return [Segment(ALL)], "all"
    segs.sort(key=lambda s: s.start)
    seen: Counter[str] = Counter()
    for s in segs:  # the same label twice stays two segments, in time order
        seen[s.label] += 1
        if seen[s.label] > 1:
            s.label = f"{s.label}#{seen[s.label]}"
    return segs, source


def _assigner(segs: list[Segment], pids: dict[Any, int]) -> Callable[[float, int], int]:
    """Map (ts, pid index) to the innermost containing segment (same process first), else -1."""
    by_pid: dict[int | None, list[int]] = {}
    for j, s in enumerate(segs):
        by_pid.setdefault(pids.get(s.pid, -1), []).append(j)
    tables: dict[int | None, tuple[list[float], list[float], list[float], list[int]]] = {}
    for key, idx in list(by_pid.items()) + [(None, list(range(len(segs))))]:
        idx.sort(key=lambda j: segs[j].start)
        starts = [segs[j].start for j in idx]
        ends = [segs[j].end for j in idx]
        maxend, m = [], float("-inf")
        for e in ends:
            m = max(m, e)
            maxend.append(m)
        tables[key] = (starts, ends, maxend, idx)
    fallback = tables[None]

    def find(ts: float, pid: int) -> int:
        if ts != ts:  # NaN: no timestamp
            return -1
        starts, ends, maxend, idx = tables.get(pid, fallback)
        k = bisect_right(starts, ts) - 1
        while k >= 0 and maxend[k] >= ts:
            if ends[k] >= ts:
                return idx[k]
            k -= 1
        return -1

    return find


def _build(path: str, size: int, identity: Identity, c: _Collector, top_keys: list[str]) -> TraceRecord:
    segs, source = _segment_markers(c, identity)
    n = len(c.kind)
    n_seg = len(segs)
    outside = n_seg  # index of the (outside) segment
    seg_of = array("i", bytes(4 * n)) if n else array("i")
    if source in ("filename", "all"):
        pass  # one segment holds everything: index 0
    else:
        find = _assigner(segs, c.pids)
        ts_a, pid_a = c.ts, c.pid
        for i in range(n):
            j = find(ts_a[i], pid_a[i])
            seg_of[i] = outside if j < 0 else j

    # GPU-side events follow the CPU event that launched them (correlation, else External id).
    def follow(corr: int | None, ext: int | None) -> int | None:
        if corr is not None:
            src = c.corr_cpu.get(corr)
            if src is not None:
                return src
        if ext is not None:
            return c.ext_cpu.get(ext)
        return None

    c.resolve_flows()
    needs_links = bool(c.launches or c.kernels or c.gpu or c.flows_f)
    op_of_ext: dict[int, int] = {}
    if needs_links:
        for n_op, op_ext in enumerate(c.op_ext):
            if op_ext >= 0:
                c.ext_cpu[op_ext] = c.op_ev[n_op]
                op_of_ext.setdefault(op_ext, n_op)
    kernel_by_corr: dict[int, Kernel] = {}
    for i, corr, ext, kern in c.kernels:
        src = follow(corr, ext)
        if src is not None:
            seg_of[i] = seg_of[src]
        if corr is not None:
            kernel_by_corr.setdefault(corr, kern)
    for i, corr, ext in c.gpu:
        src = follow(corr, ext)
        if src is not None:
            seg_of[i] = seg_of[src]
    for i, fid in c.flows_f:
        src = c.corr_cpu.get(fid) if isinstance(fid, int) else None
        if src is not None:
            seg_of[i] = seg_of[src]

    all_segs = segs + [Segment(OUTSIDE)]
    kinds = c.kind
    for i in range(n):
        s = all_segs[seg_of[i]]
        s.events += 1
        k = kinds[i]
        if k == K_KERNEL:
            s.kernels += 1
        elif k == K_LAUNCH:
            s.launches += 1
        elif k == K_GRAPH:
            s.graph_launches += 1

    # Signatures: normalise each distinct raw key once.
    cache: dict[bytes, str] = {}
    sig_list: list[Signature] = [Signature("", "", "", "")] * len(c.raw_sigs)
    canon: dict[Signature, Signature] = {}
    for (name, dims, types, concrete), sid in c.raw_sigs.items():
        sig = Signature(
            name or "",
            _compact_json(dims, cache),
            _compact_json(types, cache),
            _compact_json(concrete, cache),
        )
        sig_list[sid] = canon.setdefault(sig, sig)

    op_kernels: dict[int, list[Kernel]] = {}
    op_graphs: Counter[int] = Counter()
    launched_corr: set[int] = set()
    for i, corr, ext, own, graph in c.launches:
        k_op = op_of_ext.get(ext) if ext is not None else None
        if graph:
            if k_op is not None:
                op_graphs[k_op] += 1
            continue
        info = own
        if corr is not None:
            launched_corr.add(corr)
            linked = kernel_by_corr.get(corr)
            if linked is not None:
                info = (
                    linked
                    if own is None
                    else Kernel(
                        own.name,
                        own.grid or linked.grid,
                        own.block or linked.block,
                        own.smem if own.smem is not None else linked.smem,
                        own.regs if own.regs is not None else linked.regs,
                    )
                )
        if info is None or info.name is None:
            all_segs[seg_of[i]].unnamed_launches += 1
            info = Kernel(None)
        if k_op is not None:
            op_kernels.setdefault(k_op, []).append(info)
    # Kernels reach an op through their launch's External id or their own.
    launch_ext = {corr: ext for _, corr, ext, _, _ in c.launches if corr is not None}
    for i, corr, ext, kern in c.kernels:
        via = launch_ext.get(corr) if corr is not None else None
        k_op = op_of_ext.get(via) if via is not None else None
        if k_op is None and ext is not None:
            k_op = op_of_ext.get(ext)
            if k_op is not None and (corr is None or corr not in launched_corr):
                op_kernels.setdefault(k_op, []).append(kern)  # kernel seen without its launch event
        if k_op is not None:
            all_segs[seg_of[i]].linked_kernels += 1

    ts_a = c.ts
    for k, ev in enumerate(c.op_ev):
        s = all_segs[seg_of[ev]]
        s.cpu_ops += 1
        if not c.op_shapes[k]:
            s.ops_without_shapes += 1
        s.ops.append(
            Op(
                sig_list[c.op_sig[k]],
                ts_a[ev],
                tuple(op_kernels.get(k, ())),
                op_graphs.get(k, 0),
                bool(c.op_shapes[k]),
            )
        )
    for s in all_segs:
        s.ops.sort(key=lambda o: o.ts)  # stable: file order breaks ties
        _attribute(s)
    result = [s for s in segs]
    if all_segs[-1].events:
        result.append(all_segs[-1])
    return TraceRecord(path, size, identity, n, result, source, top_keys)


def _attribute(seg: Segment) -> None:
    """Part 2: name captured (unnamed) launches by aligning with an eager pass of the same segment.

    Eager ops launched kernels that ran (names known); captured ops launched into a graph (no
    kernel events). Ops are aligned on (signature, number of launches); only exact matches pass
    their kernel names on, and the count of what stayed unknown is reported.
    """
    if not seg.unnamed_launches:
        return
    eager = [o for o in seg.ops if o.kernels and all(k.name is not None for k in o.kernels)]
    captured = [o for o in seg.ops if any(k.name is None for k in o.kernels)]
    if not eager or not captured or len(eager) * len(captured) > 4e8:
        return
    ek = [(o.sig, len(o.kernels)) for o in eager]
    ck = [(o.sig, len(o.kernels)) for o in captured]
    matcher = SequenceMatcher(None, ek, ck, autojunk=False)
    got = 0
    for a, b, size in matcher.get_matching_blocks():
        for d in range(size):
            src, dst = eager[a + d], captured[b + d]
            names = tuple(
                (e.name if k.name is None else None) for e, k in zip(src.kernels, dst.kernels, strict=True)
            )
            dst.attributed = names
            got += sum(1 for x in names if x is not None)
    seg.attributed_launches = got


def load_record(path: str, progress: Callable[[int, int], None] | None = None) -> TraceRecord:
    """Read ``path`` in one streaming pass; raises TraceError for any bad input."""
    stream = open_trace(path, progress)
    c = _Collector()
    for events in stream.events():
        c.add(events)
    identity = identity_of(path, stream.metadata)
    try:
        return _build(path, stream.size, identity, c, stream.top_keys)
    except (MemoryError, RecursionError) as exc:  # pragma: no cover - defensive
        raise TraceError(path, f"cannot analyse: {type(exc).__name__}") from None


# -- what crosses process boundaries: JSON-able summaries and compact sequences ----------------------


def json_value(text: str) -> Any:
    """A signature field (kept as compact JSON text for hashing) as the value it encodes; None if absent."""
    return msgspec.json.decode(text) if text else None


def op_json(key: tuple[Any, ...]) -> dict[str, Any]:
    """Human/JSON form of an op key (see ``Op.key``)."""
    name, dims, types, concrete, kernels, graphs = key
    out: dict[str, Any] = {
        "op": name,
        "input_dims": json_value(dims),
        "input_types": json_value(types),
        "concrete": json_value(concrete),
    }
    if kernels:
        out["kernels"] = [k.as_json() for k in kernels]
    if graphs:
        out["graph_launches"] = graphs
    return out


def identity_json(ident: Identity) -> dict[str, Any]:
    return {
        "runner": ident.runner,
        "runner_class": ident.runner_class,
        "tp_rank": ident.tp_rank,
        "pp_rank": ident.pp_rank,
        "capture_index": ident.capture_index,
        "identity_source": ident.source,
    }


def summarize(rec: TraceRecord, top: int = 10) -> dict[str, Any]:
    """The ``summary --json`` object for one trace (also what ``ls`` shows)."""
    segments: list[dict[str, Any]] = []
    for s in rec.segments:
        counts: Counter[tuple[str, str, str]] = Counter()
        kernels: dict[tuple[str, str, str], Counter[tuple[Kernel, bool]]] = {}
        for op in s.ops:
            sk = op.sig.shape_key
            counts[sk] += 1
            if op.kernels:
                kc = kernels.setdefault(sk, Counter())
                for n, k in enumerate(op.kernels):
                    if k.name is None and n < len(op.attributed) and op.attributed[n] is not None:
                        kc[(Kernel(op.attributed[n]), True)] += 1
                    else:
                        kc[(k, False)] += 1
        top_rows = []
        for (name, dims, types), count in counts.most_common(top):
            kc = kernels.get((name, dims, types), Counter())
            top_rows.append(
                {
                    "op": name,
                    "input_dims": json_value(dims),
                    "input_types": json_value(types),
                    "count": count,
                    "kernels": [
                        {**k.as_json(), "count": c, **({"attributed": True} if attributed else {})}
                        for (k, attributed), c in kc.most_common()
                    ],
                }
            )
        segments.append(
            {
                "label": s.label,
                "bs": s.bs,
                "events": s.events,
                "cpu_ops": s.cpu_ops,
                "signatures": s.signatures,
                "launches": s.launches,
                "graph_launches": s.graph_launches,
                "kernels": s.kernels,
                "linked_kernels": s.linked_kernels,
                "unnamed_launches": s.unnamed_launches,
                "attributed_launches": s.attributed_launches,
                "unknown_launches": s.unknown_launches,
                "ops_without_shapes": s.ops_without_shapes,
                "top": top_rows,
            }
        )
    totals: dict[str, int] = {
        k: sum(int(seg[k]) for seg in segments)
        for k in (
            "cpu_ops",
            "launches",
            "graph_launches",
            "kernels",
            "linked_kernels",
            "unnamed_launches",
            "attributed_launches",
            "unknown_launches",
            "ops_without_shapes",
        )
    }
    totals["signatures"] = len({op.sig.shape_key for s in rec.segments for op in s.ops})
    return {
        "path": rec.path,
        **identity_json(rec.identity),
        "size": rec.size,
        "events": rec.events,
        "segment_source": rec.segment_source,
        "totals": totals,
        "segments": segments,
    }


@dataclass
class CompactTrace:
    """Per-segment op sequences as small ints into ``table`` (unique op keys): cheap to pickle and compare."""

    path: str
    identity: Identity
    events: int
    segment_source: str
    labels: list[str]
    seqs: list[array]  # array("i") per segment, indexes into table
    table: list[tuple[Any, ...]]


def compact(rec: TraceRecord) -> CompactTrace:
    index: dict[tuple[Any, ...], int] = {}
    seqs = []
    for s in rec.segments:
        seq = array("i")
        for op in s.ops:
            key = op.key
            j = index.get(key)
            if j is None:
                j = index[key] = len(index)
            seq.append(j)
        seqs.append(seq)
    return CompactTrace(
        rec.path,
        rec.identity,
        rec.events,
        rec.segment_source,
        [s.label for s in rec.segments],
        seqs,
        list(index),
    )
