"""Linking: op -> launch -> kernel, by correlation (else External id, else an ac2g flow).

Why here and not in the collector: links need the whole trace (a kernel can come before its launch
in file order), so they are made once, after streaming, over the collector's compact lists.
"""

from __future__ import annotations

from array import array
from collections import Counter
from dataclasses import dataclass, field

from mixins.analysis.model.align import matching_runs
from mixins.analysis.model.collect import Collector, IdIndex
from mixins.analysis.model.record import Kernel, Segment

__all__ = ["Links", "link", "name_captured_launches"]


@dataclass
class Links:
    """What each op (by its index in ``Collector.op_ev``) launched."""

    op_kernels: dict[int, list[Kernel]] = field(default_factory=dict)
    op_graphs: Counter[int] = field(default_factory=Counter)


def _follow(c: Collector, corr: int, ext: int) -> int | None:
    """The CPU event that launched device work: by correlation, else External id (-1: none)."""
    if corr >= 0:
        src = c.cpu_of(corr)
        if src is not None:
            return src
    if ext >= 0:
        return c.cpu_of_ext(ext)
    return None


def _by_correlation(ids: array, keep: array | None = None) -> IdIndex:
    """Index of positions by correlation (``keep``: only where it is true)."""
    index = IdIndex()
    for n, corr in enumerate(ids):
        if corr >= 0 and (keep is None or keep[n]):
            index.add(corr, n)
    index.finish()
    return index


def _place_device_work(c: Collector, seg_of: array) -> None:
    """Device work belongs to the segment of the CPU event that launched it."""
    k_corr, k_ext = c.k_corr, c.k_ext
    for n, ev in enumerate(c.k_ev):
        src = _follow(c, k_corr[n], k_ext[n])
        if src is not None:
            seg_of[ev] = seg_of[src]
    for n, ev in enumerate(c.g_ev):
        src = _follow(c, c.g_corr[n], c.g_ext[n])
        if src is not None:
            seg_of[ev] = seg_of[src]
    for ev, fid in zip(c.ff_ev, c.ff_id, strict=True):
        src = c.cpu_of(fid) if fid >= 0 else None
        if src is not None:
            seg_of[ev] = seg_of[src]


def _link_launches(c: Collector, seg_of: array, segs: list[Segment]) -> Links:
    """Each kernel launch gives its op one kernel (named by the launch or the first kernel record
    with its correlation)."""
    links = Links()
    kernels = c.kernels
    kernel_of_corr = _by_correlation(c.k_corr)  # correlation -> first kernel record
    unnamed = Kernel(None)
    for n, ev in enumerate(c.la_ev):
        ext = c.la_ext[n]
        k_op = c.ext_op.first(ext) if ext >= 0 else None
        if c.la_graph[n]:
            if k_op is not None:
                links.op_graphs[k_op] += 1
            continue
        own = c.la_own[n]
        info = kernels[own] if own >= 0 else None
        corr = c.la_corr[n]
        k = kernel_of_corr.first(corr) if corr >= 0 else None
        if k is not None:
            other = kernels[c.k_kernel[k]]
            info = other if info is None else info.merged(other)
        if info is None or info.name is None:
            segs[seg_of[ev]].unnamed_launches += 1
            info = unnamed
        if k_op is not None:
            links.op_kernels.setdefault(k_op, []).append(info)
    return links


def _link_kernels(c: Collector, links: Links, seg_of: array, segs: list[Segment]) -> None:
    """Kernels reach an op through their launch's External id, or their own when no launch was seen."""
    launch_of_corr = _by_correlation(c.la_corr)  # the last launch (kernel or graph) with it
    kernel_launch_of_corr = _by_correlation(c.la_corr, array("b", [not g for g in c.la_graph]))
    for n, ev in enumerate(c.k_ev):
        corr, ext = c.k_corr[n], c.k_ext[n]
        la = launch_of_corr.last(corr) if corr >= 0 else None
        via = c.la_ext[la] if la is not None else -1
        k_op = c.ext_op.first(via) if via >= 0 else None
        if k_op is None and ext >= 0:
            k_op = c.ext_op.first(ext)
            if k_op is not None and (corr < 0 or kernel_launch_of_corr.first(corr) is None):
                links.op_kernels.setdefault(k_op, []).append(c.kernels[c.k_kernel[n]])  # seen without its launch
        if k_op is not None:
            segs[seg_of[ev]].linked_kernels += 1


def link(c: Collector, seg_of: array, segs: list[Segment]) -> Links:
    """Resolve flows, move device work into its launcher's segment, and link ops to kernels.

    ``segs`` includes the trailing ``(outside)`` segment; per-segment link counters are updated.
    """
    c.finish()
    c.resolve_flows()
    _place_device_work(c, seg_of)
    links = _link_launches(c, seg_of, segs)
    _link_kernels(c, links, seg_of, segs)
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
    if not eager or not captured:
        return
    runs = matching_runs([(o.sig, len(o.kernels)) for o in eager], [(o.sig, len(o.kernels)) for o in captured])
    if runs is None:
        return
    got = 0
    for a, b, size in runs:
        for d in range(size):
            src, dst = eager[a + d], captured[b + d]
            names = tuple(
                (e.name if k.name is None else None) for e, k in zip(src.kernels, dst.kernels, strict=True)
            )
            dst.attributed = names
            got += sum(1 for x in names if x is not None)
    seg.attributed_launches = got
