"""Linking: op -> launch -> kernel, by correlation (else External id, else an ac2g flow).

Why here and not in the collector: links need the whole trace (a kernel can come before its launch
in file order), so they are made once, after streaming, over the collector's compact lists.
"""

from __future__ import annotations

from array import array
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


def _follow(c: Collector, corr: int | None, ext: int | None) -> int | None:
    """The CPU event that launched device work: by correlation, else External id."""
    if corr is not None:
        src = c.corr_cpu.get(corr)
        if src is not None:
            return src
    if ext is not None:
        return c.ext_cpu.get(ext)
    return None


def _place_device_work(c: Collector, seg_of: array) -> dict[int, Kernel]:
    """Device work belongs to the segment of the CPU event that launched it; kernels by correlation."""
    kernel_by_corr: dict[int, Kernel] = {}
    for k in c.kernels:
        src = _follow(c, k.corr, k.ext)
        if src is not None:
            seg_of[k.ev] = seg_of[src]
        if k.corr is not None:
            kernel_by_corr.setdefault(k.corr, k.kernel)
    for i, corr, ext in c.gpu:
        src = _follow(c, corr, ext)
        if src is not None:
            seg_of[i] = seg_of[src]
    for i, fid in c.flows_f:
        src = c.corr_cpu.get(fid) if isinstance(fid, int) else None
        if src is not None:
            seg_of[i] = seg_of[src]
    return kernel_by_corr


def _link_launches(
    c: Collector, op_of_ext: dict[int, int], kernel_by_corr: dict[int, Kernel], seg_of: array, segs: list[Segment]
) -> tuple[Links, set[int]]:
    """Each kernel launch gives its op one kernel (named by the launch or its kernel record)."""
    links = Links()
    launched_corr: set[int] = set()
    for la in c.launches:
        k_op = op_of_ext.get(la.ext) if la.ext is not None else None
        if la.graph:
            if k_op is not None:
                links.op_graphs[k_op] += 1
            continue
        info = la.own
        if la.corr is not None:
            launched_corr.add(la.corr)
            linked = kernel_by_corr.get(la.corr)
            if linked is not None:
                info = linked if info is None else info.merged(linked)
        if info is None or info.name is None:
            segs[seg_of[la.ev]].unnamed_launches += 1
            info = Kernel(None)
        if k_op is not None:
            links.op_kernels.setdefault(k_op, []).append(info)
    return links, launched_corr


def _link_kernels(
    c: Collector, op_of_ext: dict[int, int], launched_corr: set[int], links: Links, seg_of: array, segs: list[Segment]
) -> None:
    """Kernels reach an op through their launch's External id, or their own when no launch was seen."""
    launch_ext = {la.corr: la.ext for la in c.launches if la.corr is not None}
    for k in c.kernels:
        via = launch_ext.get(k.corr) if k.corr is not None else None
        k_op = op_of_ext.get(via) if via is not None else None
        if k_op is None and k.ext is not None:
            k_op = op_of_ext.get(k.ext)
            if k_op is not None and (k.corr is None or k.corr not in launched_corr):
                links.op_kernels.setdefault(k_op, []).append(k.kernel)  # kernel seen without its launch
        if k_op is not None:
            segs[seg_of[k.ev]].linked_kernels += 1


def link(c: Collector, seg_of: array, segs: list[Segment]) -> Links:
    """Resolve flows, move device work into its launcher's segment, and link ops to kernels.

    ``segs`` includes the trailing ``(outside)`` segment; per-segment link counters are updated.
    """
    c.resolve_flows()
    op_of_ext = _ops_by_ext(c) if (c.launches or c.kernels or c.gpu or c.flows_f) else {}
    kernel_by_corr = _place_device_work(c, seg_of)
    links, launched_corr = _link_launches(c, op_of_ext, kernel_by_corr, seg_of, segs)
    _link_kernels(c, op_of_ext, launched_corr, links, seg_of, segs)
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
