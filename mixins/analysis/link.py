"""Linking: op -> launch -> kernel, by correlation (else External id, else an ac2g flow).

Why here and not in the collector: links need the whole trace (a kernel can come before its launch
in file order), so they are made once, after streaming, over the collector's compact lists.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections import Counter
from dataclasses import dataclass, field
from difflib import SequenceMatcher

from mixins.analysis.collect import Collector
from mixins.analysis.model import Kernel, Segment

__all__ = ["Links", "link", "name_captured_launches"]


@dataclass
class Links:
    """What each op (by its index in ``Collector.op_ev``) launched."""

    op_kernels: dict[int, list[Kernel]] = field(default_factory=dict)
    op_graphs: Counter[int] = field(default_factory=Counter)


def _ops_by_ext(c: Collector) -> dict[int, int]:
    """External id -> first op with it; ops also become the CPU side of their External id."""
    op_of_ext: dict[int, int] = {}
    for n_op, op_ext in enumerate(c.op_ext):
        if op_ext >= 0:
            c.ext_cpu[op_ext] = c.op_ev[n_op]
            op_of_ext.setdefault(op_ext, n_op)
    return op_of_ext


def _follow(c: Collector, corr: int, ext: int) -> int | None:
    """The CPU event that launched device work: by correlation, else External id (-1: none)."""
    if corr >= 0:
        src = c.cpu_of(corr)
        if src is not None:
            return src
    if ext >= 0:
        return c.ext_cpu.get(ext)
    return None


def _launch_of(c: Collector, corr: int) -> int:
    """The launch (index into ``la_*``) whose correlation is ``corr``, else -1.

    Through ``cpu_of`` (correlation -> event index) and a bisect on ``la_ev`` (event indices, in
    order): no second map per launch. Where two launches share a correlation, the later one, as a
    ``{corr: launch}`` dict built in order would say.
    """
    if corr < 0:
        return -1
    ev = c.cpu_of(corr)
    if ev is None:
        return -1
    k = bisect_left(c.la_ev, ev)
    if k < len(c.la_ev) and c.la_ev[k] == ev and c.la_corr[k] == corr:
        return k
    return -1


def _place_device_work(c: Collector, seg_of: array) -> array:
    """Device work belongs to the segment of the CPU event that launched it; per launch, the first
    kernel record with its correlation (kernel id, -1: none)."""
    linked = array("i", [-1]) * len(c.la_ev)
    k_corr, k_ext, k_kernel = c.k_corr, c.k_ext, c.k_kernel
    for n, ev in enumerate(c.k_ev):
        corr = k_corr[n]
        src = _follow(c, corr, k_ext[n])
        if src is not None:
            seg_of[ev] = seg_of[src]
        la = _launch_of(c, corr)
        if la >= 0 and linked[la] < 0:
            linked[la] = k_kernel[n]
    for n, ev in enumerate(c.g_ev):
        src = _follow(c, c.g_corr[n], c.g_ext[n])
        if src is not None:
            seg_of[ev] = seg_of[src]
    for ev, fid in zip(c.ff_ev, c.ff_id, strict=True):
        src = c.cpu_of(fid) if fid >= 0 else None
        if src is not None:
            seg_of[ev] = seg_of[src]
    return linked


def _link_launches(
    c: Collector, op_of_ext: dict[int, int], linked: array, seg_of: array, segs: list[Segment]
) -> Links:
    """Each kernel launch gives its op one kernel (named by the launch or its kernel record)."""
    links = Links()
    kernels = c.kernels
    unnamed = Kernel(None)
    for n, ev in enumerate(c.la_ev):
        ext = c.la_ext[n]
        k_op = op_of_ext.get(ext) if ext >= 0 else None
        if c.la_graph[n]:
            if k_op is not None:
                links.op_graphs[k_op] += 1
            continue
        own = c.la_own[n]
        info = kernels[own] if own >= 0 else None
        if linked[n] >= 0:
            other = kernels[linked[n]]
            info = other if info is None else info.merged(other)
        if info is None or info.name is None:
            segs[seg_of[ev]].unnamed_launches += 1
            info = unnamed
        if k_op is not None:
            links.op_kernels.setdefault(k_op, []).append(info)
    return links


def _link_kernels(c: Collector, op_of_ext: dict[int, int], links: Links, seg_of: array, segs: list[Segment]) -> None:
    """Kernels reach an op through their launch's External id, or their own when no launch was seen."""
    for n, ev in enumerate(c.k_ev):
        corr, ext = c.k_corr[n], c.k_ext[n]
        la = _launch_of(c, corr)
        via = c.la_ext[la] if la >= 0 else -1
        k_op = op_of_ext.get(via) if via >= 0 else None
        if k_op is None and ext >= 0:
            k_op = op_of_ext.get(ext)
            if k_op is not None and (la < 0 or c.la_graph[la]):  # seen without its (kernel) launch
                links.op_kernels.setdefault(k_op, []).append(c.kernels[c.k_kernel[n]])
        if k_op is not None:
            segs[seg_of[ev]].linked_kernels += 1


def link(c: Collector, seg_of: array, segs: list[Segment]) -> Links:
    """Resolve flows, move device work into its launcher's segment, and link ops to kernels.

    ``segs`` includes the trailing ``(outside)`` segment; per-segment link counters are updated.
    """
    c.index_correlations()
    c.resolve_flows()
    op_of_ext = _ops_by_ext(c) if (c.la_ev or c.k_ev or c.g_ev or c.ff_ev) else {}
    linked = _place_device_work(c, seg_of)
    links = _link_launches(c, op_of_ext, linked, seg_of, segs)
    _link_kernels(c, op_of_ext, links, seg_of, segs)
    return links


def name_captured_launches(seg: Segment) -> None:
    """Name captured (unnamed) launches by aligning with an eager pass of the same segment.

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
