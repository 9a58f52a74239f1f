"""The op-sequence record of one trace (``summary``, ``diff``, ``check``): a group-by over the one model
(docs/DESIGN.md §7). numpy is imported once the trace is read, so the reader's peak never holds it too."""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import Any

from msgspec import Struct
from msgspec.structs import replace

from mixins.analysis.model import events as E
from mixins.analysis.model.identity import Identity
from mixins.analysis.model.record import OUTSIDE, Kernel, OpColumns, Segment, Signature, TraceRecord, compact
from mixins.analysis.model.roles import identify
from mixins.analysis.model.segments import segments_of
from mixins.analysis.model.timeline import Joins, Timeline, load_timeline
from mixins.analysis.model.windows import named_windows
from mixins.analysis.read.reader import Event, TraceError
from mixins.analysis.serialise import summarize

__all__ = ["Segment", "TraceRecord", "load_record", "record_of", "summarize", "compact"]

_Launched = dict[int, list[tuple[Kernel, int]]]  # per op: its kernels in launch order, with the launching call


def _ints(values: Any) -> array:
    import numpy as np

    return array("i", np.asarray(values, np.int32).tobytes())


def _with_undated(tl: Timeline) -> Timeline:
    """The timeline with its undated rows after the dated ones (whose indexes stay): the record counts all."""
    u = tl.undated
    if not (len(u.ops) or len(u.calls.kind) or len(u.device.kind)):
        return tl

    def joined(a: Any, b: Any) -> Any:
        return type(a)(**{f: getattr(a, f) + getattr(b, f) for f in a.__struct_fields__})

    return replace(tl, ops=joined(tl.ops, u.ops), calls=joined(tl.calls, u.calls),
                   device=joined(tl.device, u.device), joined=None)


def _signatures(tl: Timeline) -> tuple[array, list[Signature]]:
    """Per op, its signature: an index into the list returned (one per (label, concrete inputs), in order
    first seen)."""
    import numpy as np

    width = max(len(tl.concretes), 1)
    pair = np.asarray(tl.ops.label).astype(np.int64) * width + np.asarray(tl.ops.concrete)
    distinct, first, inverse = np.unique(pair, return_index=True, return_inverse=True)
    rank = np.empty(len(first), np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    signatures = [Signature("", "", "", "")] * len(first)
    for key, n in zip(distinct.tolist(), rank.tolist(), strict=True):  # the distinct pairs, a few hundred
        name, dims, types = tl.signatures[key // width]
        signatures[n] = Signature(name, dims, types, tl.concretes[key % width])
    return _ints(rank[inverse]), signatures


class _Rows(Struct):
    """Each row's segment (index into the record's segments; the last one: "(outside)"), per kind."""

    ops: Any
    calls: Any
    annotations: Any


def _sources(lk: Joins, rows: _Rows, corr: Any, ext: Any) -> tuple[Any, Any]:
    """Per device item, whether its launching CPU row is known and that row's segment: the call with its
    correlation (or flow id), else its External id's last op, else that id's first annotation."""
    import numpy as np

    call = lk.calls_by_corr(resolved=False).many(corr, last=True)
    if lk.flow_cpu:
        flow = np.fromiter((lk.flow_cpu.get(c, -1) for c in corr.tolist()), np.int64, len(corr))
        call = np.where(call < 0, flow, call)
    found, seg = call >= 0, rows.calls[np.maximum(call, 0)] if len(lk.calls.kind) else call
    by_ext = ~found & (ext >= 0)
    if by_ext.any():
        op = lk.by_ext(lk.ops).many(ext, last=True)
        note = lk.by_ext(lk.annotations).many(ext, last=False)
        via = np.where(op >= 0, rows.ops[np.maximum(op, 0)] if len(lk.ops) else -1,
                       rows.annotations[np.maximum(note, 0)] if len(lk.annotations.ts) else -1)
        seg = np.where(by_ext, via, seg)
        found = found | (by_ext & ((op >= 0) | (note >= 0)))
    return found, seg


def _device_segments(tl: Timeline, rows: _Rows, place: Callable[[Any, Any], Any]) -> tuple[Any, Any]:
    """Device work (and other device records, flow ends) is in its launcher's segment, else in its own
    place in time: (device's segments, all of their segments)."""
    import numpy as np

    lk = tl.joins()
    d, o, f = tl.device, tl.others, tl.flow_ends
    out = []
    for own_ts, own_thread, corr, ext in ((d.start, d.thread, lk.kernel_corr, d.ext), (o.ts, o.thread, o.corr, o.ext),
                                          (f.ts, f.thread, f.corr, f.ext)):
        found, seg = _sources(lk, rows, np.asarray(corr), np.asarray(ext))
        out.append(np.where(found, seg, place(own_ts, own_thread)))
    return out[0], np.concatenate(out)


def _link_launches(tl: Timeline, rows: _Rows, segs: list[Segment], op_kernels: _Launched,
                   graphs: Counter[int]) -> None:
    """Each kernel launch gives its op one kernel (named by the launch or the first kernel record
    with its correlation); one with neither is unnamed until the namer names it."""
    import numpy as np

    lk = tl.joins()
    c, d = tl.calls, tl.device
    kind = np.asarray(c.kind)
    graph_calls = np.flatnonzero(kind == E.C_GRAPH).tolist()
    for op in lk.ops_of_calls(graph_calls):
        if op >= 0:
            graphs[op] += 1
    launches = np.flatnonzero(kind == E.C_LAUNCH)
    corr = np.asarray(lk.launch_corr)[launches]
    first_kernel = np.where(corr >= 0, lk.device_by_corr(E.D_KERNEL).many(corr, last=False), -1).tolist()
    unnamed = Kernel(None)
    for i, op, k in zip(launches.tolist(), lk.ops_of_calls(launches.tolist()), first_kernel, strict=True):
        own = c.kernel[i]
        info = tl.kernels[own] if own >= 0 else None
        if k >= 0:
            other = tl.kernels[d.kernel[k]]
            info = other if info is None else info.merged(other)
        if info is None or info.name is None:
            segs[rows.calls[i]].unnamed_launches += 1
            info = unnamed
        if op >= 0:
            op_kernels.setdefault(op, []).append((info, i))


def _link_kernels(tl: Timeline, dev_seg: Any, segs: list[Segment], op_kernels: _Launched) -> None:
    """Kernels reach an op through their launch's External id, or their own when no launch was seen."""
    import numpy as np

    lk = tl.joins()
    d = tl.device
    kernels = np.flatnonzero(np.asarray(d.kind) == E.D_KERNEL)
    corr, ext = np.asarray(lk.kernel_corr)[kernels], np.asarray(d.ext)[kernels]
    launch = np.where(corr >= 0, lk.calls_by_corr(E.C_LAUNCH, E.C_GRAPH).many(corr, last=True), -1)
    has_launch = launch >= 0
    op = np.full(len(kernels), -1, np.int64)
    op[has_launch] = lk.ops_of_calls(launch[has_launch].tolist())
    by_ext = (op < 0) & (ext >= 0)
    if by_ext.any():
        own = lk.by_ext(lk.ops).many(ext[by_ext], last=False)
        seen = np.where(corr[by_ext] >= 0, lk.calls_by_corr(E.C_LAUNCH).many(corr[by_ext], last=False), -1)
        op[by_ext] = own
        for k, o in zip(kernels[by_ext][(own >= 0) & (seen < 0)].tolist(), own[(own >= 0) & (seen < 0)].tolist(),
                        strict=True):  # seen without its launch
            op_kernels.setdefault(o, []).append((tl.kernels[d.kernel[k]], -1))
    _add(segs, "linked_kernels", dev_seg[kernels[op >= 0]])


def _add(segs: list[Segment], name: str, where: Any) -> None:
    import numpy as np

    for j, n in enumerate(np.bincount(where, minlength=len(segs)).tolist()):
        if n:
            setattr(segs[j], name, getattr(segs[j], name) + n)


def _place_ops(tl: Timeline, op_seg: Any, segs: list[Segment], op_kernels: _Launched,
               graphs: Counter[int], names: dict[int, str]) -> None:
    """Each segment's ops in time order, one order whatever the file's (docs/DESIGN.md §7, ``records``)."""
    import numpy as np

    sig, sigs = _signatures(tl)
    table = OpColumns(sig, tl.ops.start, tl.ops.shapes, sigs)
    for k, launched in op_kernels.items():
        kernels = table.kernels[k] = tuple(kernel for kernel, _ in launched)
        if names and any(kernel.name is None for kernel in kernels):
            table.attributed[k] = tuple(names.get(call) if kernel.name is None else None for kernel, call in launched)
    table.graphs.update(graphs)
    start, end = np.asarray(tl.ops.start), np.asarray(tl.ops.end)
    untimed = np.isnan(start)  # the undated ops: last, in file order as they were read
    order = np.lexsort((-np.where(untimed, 0, end), np.where(untimed, 0, start), untimed, op_seg))
    counts = np.bincount(op_seg, minlength=len(segs))
    for s, n, members in zip(segs, counts.tolist(), np.split(order, np.cumsum(counts)[:-1]), strict=True):
        s.cpu_ops = n
        s.members = _ints(members)
    _add(segs, "ops_without_shapes", op_seg[np.asarray(tl.ops.shapes) == 0])
    for k, got in table.attributed.items():
        segs[op_seg[k]].attributed_launches += sum(1 for name in got if name is not None)
    for s in segs:
        s.table = table


def _names(tl: Timeline, identity: Identity) -> dict[int, str]:
    """call index -> the kernel name the one namer (``windows.named_windows``) gave a launch without one."""
    return {
        n.call: n.kernel.name for w in named_windows(tl, identity) for n in w.nodes
        if n.kind == E.D_KERNEL and n.kernel is not None and n.kernel.name is not None and n.call >= 0
        and tl.calls.kernel[n.call] < 0  # not the launch's own name
    }


def record_of(tl: Timeline, identity: Identity) -> TraceRecord:
    """The TraceRecord of a timeline read with its ids (``fields=reader.Event``)."""
    import numpy as np

    dated, tl = tl, _with_undated(tl)  # the windows are named on the dated model, as ``attribute`` reads it
    segs, source = segments_of(tl.ranges, identity)
    all_segs = segs + [Segment(OUTSIDE)]
    place = partial(tl.row_segments, segs, source)
    rows = _Rows(place(tl.ops.start, tl.ops.thread), place(tl.calls.start, tl.calls.thread),
                 place(tl.annotations.ts, tl.annotations.thread))
    dev_seg, linked = _device_segments(tl, rows, place)
    rest = tl.row_segments(segs, source, tl.rest_ts, tl.rest_pid, threads=False)
    _add(all_segs, "events", np.concatenate([rows.ops, rows.calls, linked, rest]))
    op_kernels: _Launched = {}
    graphs: Counter[int] = Counter()
    _link_launches(tl, rows, all_segs, op_kernels, graphs)
    _link_kernels(tl, dev_seg, all_segs, op_kernels)
    _add(all_segs, "kernels", dev_seg[np.asarray(tl.device.kind) == E.D_KERNEL])
    for name, kind in (("launches", E.C_LAUNCH), ("graph_launches", E.C_GRAPH)):
        _add(all_segs, name, rows.calls[np.asarray(tl.calls.kind) == kind])
    names = _names(dated, identity) if any(s.unnamed_launches for s in all_segs) else {}
    _place_ops(tl, rows.ops, all_segs, op_kernels, graphs, names)
    result = list(segs)
    if all_segs[-1].events:
        result.append(all_segs[-1])
    return TraceRecord(tl.path, tl.size, identity, tl.events, result, source)


def load_record(path: str, progress: Callable[[int, int], None] | None = None) -> TraceRecord:
    """Read ``path`` in one streaming pass; raises TraceError for any bad input."""
    tl = load_timeline(path, progress, fields=Event)
    try:
        return record_of(tl, identify(tl))
    except (MemoryError, RecursionError) as exc:  # pragma: no cover - defensive
        raise TraceError(path, f"cannot analyse: {type(exc).__name__}") from None
