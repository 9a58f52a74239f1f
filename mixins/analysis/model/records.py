"""The op-sequence record of one trace (``summary``, ``diff``, ``check``), derived from the one model.

The pipeline: ``reader`` (slices of typed events) -> ``timeline`` (the one model, with Kineto's ids:
``load_timeline(links=True)``) -> ``segments`` (capture ranges) -> links (op -> launch -> kernel, by
correlation, else External id, else an ac2g flow: the ids Kineto writes for exactly this) ->
``record.TraceRecord``. Captured launches are named by the one namer (``windows.windows_of``).
This module runs it; the names other modules and tests import are re-exported from here.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Callable
from itertools import chain, compress, islice
from operator import eq, not_

from msgspec import Struct, field

from mixins.analysis.model import events as E
from mixins.analysis.model.identity import Identity
from mixins.analysis.model.record import OUTSIDE, Kernel, OpColumns, Segment, Signature, TraceRecord, compact
from mixins.analysis.model.roles import identify
from mixins.analysis.model.segments import segments_of
from mixins.analysis.model.timeline import Joins, Links, Timeline, load_timeline
from mixins.analysis.model.windows import windows_of
from mixins.analysis.read.reader import TraceError
from mixins.analysis.serialise import summarize

__all__ = ["Segment", "TraceRecord", "load_record", "record_of", "summarize", "compact"]

def _signatures(tl: Timeline, links: Links) -> tuple[array, list[Signature]]:
    """Per op, its signature (an index into the list returned): one per (label, concrete inputs) pair."""
    pairs = list(zip(tl.ops.label, links.op_concrete, strict=True))
    ids = {pair: n for n, pair in enumerate(dict.fromkeys(pairs))}
    signatures = []
    for label, concrete in ids:  # the distinct pairs, a few hundred
        name, dims, types = tl.signatures[label]
        signatures.append(Signature(name, dims, types, links.concretes[concrete]))
    return array("i", map(ids.__getitem__, pairs)), signatures


def _place_device_work(lk: Joins, seg_of: array) -> None:
    """Device work belongs to the segment of the CPU event that launched it."""
    links = lk.tl.links
    assert links is not None
    ff_ev, _, _, ff_id = links.flow_end
    for ev, src in chain(
        zip(links.dev_ev, map(lk.source, lk.kernel_corr, links.dev_ext), strict=True),
        zip(links.other_ev, map(lk.source, links.other_corr, links.other_ext), strict=True),
        zip(ff_ev, (lk.cpu_of(fid) if fid >= 0 else None for fid in ff_id), strict=True),
    ):
        if src is not None:
            seg_of[ev] = seg_of[src]


class _OpLinks(Struct):
    """What each op (by its index in ``Timeline.ops``) launched: kernels in launch order (with the
    launching call, -1 for a kernel seen without its launch) and graph launches."""

    kernels: dict[int, list[tuple[Kernel, int]]] = field(default_factory=dict)
    graphs: Counter[int] = field(default_factory=Counter)


def _link_launches(lk: Joins, seg_of: array, segs: list[Segment], out: _OpLinks) -> None:
    """Each kernel launch gives its op one kernel (named by the launch or the first kernel record
    with its correlation); one with neither is unnamed until the namer names it."""
    tl, links = lk.tl, lk.tl.links
    assert links is not None
    c, d = tl.calls, tl.device
    kernel_of_corr = lk.device_by_corr(E.D_KERNEL)  # the first kernel record
    lk.ops_of_calls([i for i in range(len(c.kind)) if c.kind[i] in (E.C_LAUNCH, E.C_GRAPH)])  # all at once
    unnamed = Kernel(None)
    for i in range(len(c.kind)):
        kind = c.kind[i]
        if kind != E.C_LAUNCH and kind != E.C_GRAPH:
            continue
        op = lk.op_of_call(i)
        if kind == E.C_GRAPH:
            if op is not None:
                out.graphs[op] += 1
            continue
        own = c.kernel[i]
        info = tl.kernels[own] if own >= 0 else None
        corr = lk.launch_corr[i]
        k = kernel_of_corr.first(corr) if corr >= 0 else None
        if k is not None:
            other = tl.kernels[d.kernel[k]]
            info = other if info is None else info.merged(other)
        if info is None or info.name is None:
            segs[seg_of[links.call_ev[i]]].unnamed_launches += 1
            info = unnamed
        if op is not None:
            out.kernels.setdefault(op, []).append((info, i))


def _link_kernels(lk: Joins, seg_of: array, segs: list[Segment], out: _OpLinks) -> None:
    """Kernels reach an op through their launch's External id, or their own when no launch was seen."""
    tl, links = lk.tl, lk.tl.links
    assert links is not None
    d = tl.device
    launch_of_corr = lk.calls_by_corr(E.C_LAUNCH, E.C_GRAPH)  # the last launch with it
    kernel_launch_of_corr = lk.calls_by_corr(E.C_LAUNCH)
    ext_op = lk.op_by_ext()
    for k in range(len(d.kind)):
        if d.kind[k] != E.D_KERNEL:
            continue
        corr, ext = lk.kernel_corr[k], links.dev_ext[k]
        la = launch_of_corr.last(corr) if corr >= 0 else None
        op = lk.op_of_call(la) if la is not None else None
        if op is None and ext >= 0:
            op = ext_op.first(ext)
            if op is not None and (corr < 0 or kernel_launch_of_corr.first(corr) is None):  # seen without its launch
                out.kernels.setdefault(op, []).append((tl.kernels[d.kernel[k]], -1))
        if op is not None:
            segs[seg_of[links.dev_ev[k]]].linked_kernels += 1


def _count_kinds(tl: Timeline, links: Links, seg_of: array, all_segs: list[Segment]) -> None:
    for j, n in Counter(seg_of).items():
        all_segs[j].events = n
    d = tl.device
    for k, ev in enumerate(links.dev_ev):
        if d.kind[k] == E.D_KERNEL:
            all_segs[seg_of[ev]].kernels += 1
    c = tl.calls
    for i, ev in enumerate(links.call_ev):
        if c.kind[i] == E.C_LAUNCH:
            all_segs[seg_of[ev]].launches += 1
        elif c.kind[i] == E.C_GRAPH:
            all_segs[seg_of[ev]].graph_launches += 1


def _place_ops(
    tl: Timeline, links: Links, seg_of: array, all_segs: list[Segment], linked: _OpLinks, names: dict[int, str]
) -> None:
    """Each op goes to its segment, in time order (file order breaks ties), as columns with what it
    launched; a captured launch the namer named carries that name in ``OpColumns.attributed``."""
    sig, sigs = _signatures(tl, links)
    table = OpColumns(sig, tl.ops.start, links.op_shapes, sigs)
    for k, launched in linked.kernels.items():
        kernels = table.kernels[k] = tuple(kernel for kernel, _ in launched)
        if names and any(kernel.name is None for kernel in kernels):
            table.attributed[k] = tuple(names.get(call) if kernel.name is None else None for kernel, call in launched)
    table.graphs.update(linked.graphs)
    op_seg = array("i", map(seg_of.__getitem__, links.op_ev))
    by_segment = sorted(range(len(op_seg)), key=op_seg.__getitem__)  # stable: file order within each
    at = 0
    for j, n in sorted(Counter(op_seg).items()):
        s = all_segs[j]
        s.cpu_ops = n
        s.members = array("i", _in_time_order(by_segment[at : at + n], table.ts, tl.ops.end))
        at += n
    for j, n in Counter(compress(op_seg, map(not_, links.op_shapes))).items():
        all_segs[j].ops_without_shapes += n
    for k, got in table.attributed.items():
        all_segs[op_seg[k]].attributed_launches += sum(1 for name in got if name is not None)
    for s in all_segs:
        s.table = table


def _in_time_order(ops: list[int], ts: array, end: array) -> list[int]:
    """Ops by start, the longer first where starts tie (a parent before its children, as ``time`` orders
    calls), file order after that; those without a time (NaN) last in file order: a NaN sort key would
    leave the order to chance. So one trace written in two orders is one sequence (``diff``)."""
    timed = [k for k in ops if ts[k] == ts[k]]
    untimed = [k for k in ops if ts[k] != ts[k]] if len(timed) < len(ops) else []
    out = sorted(timed, key=ts.__getitem__)
    starts = list(map(ts.__getitem__, out))
    ties = list(compress(range(len(starts) - 1), map(eq, starts, islice(starts, 1, None))))
    at = 0
    while at < len(ties):  # each run of equal starts (rare): the longer first, stable
        first = last = ties[at]
        while at < len(ties) and ties[at] == last:
            last, at = last + 1, at + 1
        out[first : last + 1] = sorted(out[first : last + 1], key=lambda k: -end[k])
    return out + untimed


def _names(tl: Timeline, identity: Identity, segs: list[Segment], source: str) -> dict[int, str]:
    """Kernel names the one namer (``windows.windows_of``: each capture window's warm-up pass) gave
    launches that named none themselves, by call index."""
    out: dict[int, str] = {}
    for w in windows_of(tl, identity, segs, source):
        for n in w.nodes:
            if n.kind == E.D_KERNEL and n.kernel is not None and n.kernel.name is not None and n.call >= 0:
                if tl.calls.kernel[n.call] < 0:  # not the launch's own name
                    out[n.call] = n.kernel.name
    return out


def record_of(tl: Timeline, identity: Identity) -> TraceRecord:
    """The TraceRecord of a trace loaded with ``links=True``."""
    links = tl.links
    if links is None:
        raise ValueError("record_of needs a timeline loaded with links=True")
    segs, source = segments_of(tl.ranges, identity)
    seg_of = tl.event_segments(segs, source)
    all_segs = segs + [Segment(OUTSIDE)]
    lk = tl.joins()
    _place_device_work(lk, seg_of)
    linked = _OpLinks()
    _link_launches(lk, seg_of, all_segs, linked)
    _link_kernels(lk, seg_of, all_segs, linked)
    _count_kinds(tl, links, seg_of, all_segs)
    names = _names(tl, identity, segs, source) if any(s.unnamed_launches for s in all_segs) else {}
    _place_ops(tl, links, seg_of, all_segs, linked, names)
    result = list(segs)
    if all_segs[-1].events:
        result.append(all_segs[-1])
    return TraceRecord(tl.path, tl.size, identity, len(links.ev_ts), result, source)


def load_record(path: str, progress: Callable[[int, int], None] | None = None) -> TraceRecord:
    """Read ``path`` in one streaming pass; raises TraceError for any bad input."""
    tl = load_timeline(path, progress, links=True)
    try:
        return record_of(tl, identify(tl))
    except (MemoryError, RecursionError) as exc:  # pragma: no cover - defensive
        raise TraceError(path, f"cannot analyse: {type(exc).__name__}") from None
