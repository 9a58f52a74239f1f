"""Capture windows, their nodes and each node's site, named by the launch (ROCm) or by the segment's
warm-up pass (the one namer): docs/DESIGN.md §7, "Attribution" steps 1-2."""

from __future__ import annotations

import os
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from heapq import heappop, heappush
from typing import NamedTuple, cast

from msgspec import Struct
from msgspec.structs import replace

from mixins.analysis.model.events import C_LAUNCH, D_KERNEL, NODE_KIND_OF_CALL, vllm_label
from mixins.analysis.model.identity import Identity, rank_from_name
from mixins.analysis.model.record import OUTSIDE, Kernel, Segment, matching_runs
from mixins.analysis.model.roles import identify
from mixins.analysis.model.segments import segments_of
from mixins.analysis.model.timeline import Intervals, Timeline, innermost, load_timeline
from mixins.analysis.read.reader import MAX_OVERLAPPING_PAIRS, TraceError
from mixins.analysis.read.safe_io import read_small_json

__all__ = [
    "Site", "Node", "Window", "Capture", "load_capture", "capture_of", "windows_of", "read_execution_details",
    "sites_of_calls", "named_windows",
]

NO_MODULE = "NA"  # TraceLens's parent_module when no nn.Module encloses the op
NO_OP = "(no cpu_op)"


class Site(Struct, frozen=True):
    """The innermost op (name, input dims, input types as compact JSON text) and module of a launch."""

    name: str
    module: str
    dims: str
    types: str


class Node(NamedTuple):
    """One captured launch / memcpy / memset: kind, kernel identity if known, site, op instance."""

    kind: int
    kernel: Kernel | None
    site: Site
    inst: int  # the enclosing op interval (unique per op execution), -1 when none
    call: int = -1  # the runtime call that made it (index into Timeline.calls)


class Window(Struct):
    """One capture window of a capture trace, with its segment and runner."""

    capture: str
    runner: str | None
    segment: str
    bs: int | None
    order: int  # position among this capture's windows, in time order
    nodes: list[Node]
    unnamed: int  # kernel nodes whose kernel name nobody knows
    naming: str  # "launch" | "warm-up" | "none": where kernel names came from


class Capture(Struct):
    path: str
    identity: Identity
    rank: int | None
    windows: list[Window]


def read_execution_details(directory: str) -> dict[str, tuple[int, str | None]]:
    """TraceLens's ``execution_details.json`` of a capture folder: file name -> (batch size, mode)."""
    path = os.path.join(directory, "execution_details.json")
    if not os.path.lexists(path):
        return {}
    doc = read_small_json(path, "execution details")  # bounded: size cap, any depth, one descriptor
    out: dict[str, tuple[int, str | None]] = {}
    entries = doc if isinstance(doc, list) else []
    for e in entries:
        if isinstance(e, dict) and isinstance(e.get("file"), str) and isinstance(e.get("batch_size"), int):
            mode = e.get("mode")
            out[os.path.basename(e["file"])] = (e["batch_size"], mode if isinstance(mode, str) else None)
    if not out:
        raise TraceError(path, 'expected a list of {"file", "batch_size", "mode"} objects')
    return out


def sites_of_calls(tl: Timeline, calls: list[int]) -> tuple[list[Site], list[int]]:
    """Site and op instance (interval index, -1 none) of each runtime call, by time nesting on its thread."""
    times = [tl.calls.start[c] for c in calls]
    threads = [tl.calls.thread[c] for c in calls]
    ops = tl.joins().ops_of_calls(calls)  # the one rule: External id, else innermost by time
    mods = innermost(tl.modules, times, threads)
    cache: dict[tuple[int, int], Site] = {}
    sites = []
    for o, m in zip(ops, mods, strict=True):
        sig = tl.ops.label[o] if o >= 0 else -1
        mod = tl.modules.label[m] if m >= 0 else -1
        site = cache.get((sig, mod))
        if site is None:
            name, dims, types = tl.signatures[sig] if sig >= 0 else (NO_OP, "", "")
            site = cache[(sig, mod)] = Site(name, tl.module_names[mod] if mod >= 0 else NO_MODULE, dims, types)
        sites.append(site)
    return sites, ops


def _spans(tl: Timeline) -> list[tuple[int, float, float]]:
    """(thread that began it, begin, end or inf) of each capture window, in time order."""
    c = tl.calls
    return [(c.thread[b], c.start[b], c.start[e] if e >= 0 else float("inf")) for b, e in tl.capture_windows()]


def _nested(
    path: str, spans: list[tuple[int, float, float]], threads: set[int]
) -> dict[int, list[tuple[float, float]]]:
    """Per window of ``threads`` (whose windows overlap without nesting), the windows nested in it on its
    thread: their launches are theirs, not its."""
    out: dict[int, list[tuple[float, float]]] = {}
    pairs = 0
    for th, idx in _by_thread(spans).items():
        if th not in threads:
            continue
        for k, n in enumerate(idx):
            _, b, e = spans[n]
            for j in range(k + 1, len(idx)):
                _, b2, e2 = spans[idx[j]]
                if b2 > e:
                    break
                pairs += 1
                if pairs > MAX_OVERLAPPING_PAIRS:
                    raise TraceError(path, f"capture windows overlap without nesting in more than "
                                           f"{MAX_OVERLAPPING_PAIRS:,} pairs on one thread (CUDA captures nest or "
                                           f"follow one another): not read")
                if e2 <= e:
                    out.setdefault(n, []).append((b2, e2))
    return out


def _outside(inner: list[tuple[float, float]]) -> Callable[[float], bool]:
    """Whether a time lies in none of the closed intervals ``inner``: one bisect over their union."""
    begins: list[float] = []
    ends: list[float] = []
    for b, e in sorted(inner):
        if ends and b <= ends[-1]:
            ends[-1] = max(ends[-1], e)
        else:
            begins.append(b)
            ends.append(e)

    def outside(t: float) -> bool:
        j = bisect_right(begins, t) - 1
        return j < 0 or t > ends[j]

    return outside


def _by_thread(spans: list[tuple[int, float, float]]) -> dict[int, list[int]]:
    """Window positions per thread, in time order (spans come in time order)."""
    by_thread: dict[int, list[int]] = {}
    for n, (th, _, _) in enumerate(spans):
        by_thread.setdefault(th, []).append(n)
    return by_thread


def _laminar(spans: list[tuple[int, float, float]], idx: list[int]) -> bool:
    """Whether a thread's windows (in time order) only follow one another or nest: then each launch
    belongs to the innermost window around it."""
    stack: list[float] = []  # ends of the open windows, innermost last
    for n in idx:
        _, b, e = spans[n]
        while stack and stack[-1] < b:
            stack.pop()
        if stack and e > stack[-1]:
            return False
        stack.append(e)
    return True


def _owners(path: str, spans: list[tuple[int, float, float]],
            by_calls: dict[int, tuple[list[float], list[int]]]) -> dict[int, list[int]]:
    """Per window, the calls it owns: where a thread's windows are laminar, the innermost window around
    each call (:func:`innermost`); elsewhere the calls in it but in no window nested in it (:func:`_nested`)."""
    by_thread = _by_thread(spans)
    general = {th for th, idx in by_thread.items() if not _laminar(spans, idx)}
    laminar = [th for th in by_thread if th not in general and th in by_calls]
    times = [t for th in laminar for t in by_calls[th][0]]
    threads = [th for th in laminar for _ in by_calls[th][0]]
    windows = Intervals(array("d", [b for _, b, _ in spans]), array("d", [e for _, _, e in spans]),
                        array("i", [th for th, _, _ in spans]))
    owned: dict[int, list[int]] = {}
    calls = (i for th in laminar for i in by_calls[th][1])
    for i, w in zip(calls, innermost(windows, times, threads), strict=True):
        if w >= 0:
            owned.setdefault(w, []).append(i)
    nested = _nested(path, spans, general) if general else {}
    for n, (th, b, e) in enumerate(spans):
        if th in general:
            starts, idx = by_calls.get(th, ([], []))
            outside = _outside(nested.get(n, []))
            owned[n] = [idx[k] for k in range(bisect_left(starts, b), bisect_right(starts, e)) if outside(starts[k])]
    return owned


def _calls_by_thread(tl: Timeline) -> dict[int, tuple[list[float], list[int]]]:
    """Launch/copy/set calls per thread, sorted by start: (starts, call indices)."""
    c = tl.calls
    timed = [i for i in range(len(c.kind)) if c.kind[i] in NODE_KIND_OF_CALL and c.start[i] == c.start[i]]
    out: dict[int, tuple[list[float], list[int]]] = {}
    for i in sorted(timed, key=c.start.__getitem__):  # stable: file order among equal starts
        starts, calls = out.setdefault(c.thread[i], ([], []))
        starts.append(c.start[i])
        calls.append(i)
    return out


def _name_by_warmup(nodes: list[Node], eager: list[tuple[Site, Kernel]]) -> tuple[list[Node], int]:
    """Name unnamed kernel nodes from the eager pass: align on sites, copy names where runs match."""
    todo = [k for k, n in enumerate(nodes) if n.kind == D_KERNEL and n.kernel is None]
    if not todo or not eager:
        return nodes, len(todo)
    kernel_pos = [k for k, n in enumerate(nodes) if n.kind == D_KERNEL]
    runs = matching_runs([s for s, _ in eager], [nodes[k].site for k in kernel_pos])
    if runs is None:
        return nodes, len(todo)
    named = list(nodes)
    for a, b, size in runs:
        for d in range(size):
            k = kernel_pos[b + d]
            if named[k].kernel is None:
                named[k] = named[k]._replace(kernel=eager[a + d][1])
    return named, sum(1 for k in todo if named[k].kernel is None)


class _Context:
    """Per-capture lookups shared by its windows."""

    def __init__(self, tl: Timeline, segs: list[Segment], source: str) -> None:
        self.tl = tl
        self.segment = tl.segment_finder(segs, source)  # (time, thread) -> segment index, -1: none
        self.by_thread = _calls_by_thread(tl)
        all_calls = [i for _, idx in self.by_thread.values() for i in idx]
        sites, insts = sites_of_calls(tl, all_calls)
        # per call index (lists, not dicts: 8 B a call, not ~100 B)
        self.site: list[Site | None] = [None] * len(tl.calls.kind)
        self.inst = array("i", [-1]) * len(tl.calls.kind)
        for i, site, inst in zip(all_calls, sites, insts, strict=True):
            self.site[i] = site
            self.inst[i] = inst
        ran = tl.joins().device_by_corr(D_KERNEL, resolved=False)  # correlation -> the kernel that ran
        # per thread, its launches whose kernel ran (start, (site, kernel)) in time order: each window's
        # warm-up pass is then a bisect
        self.ran_by_thread: dict[int, tuple[list[float], list[tuple[Site, Kernel]]]] = {}
        c = tl.calls
        for th, (starts, idx) in self.by_thread.items():
            ran_starts, kernels = [], []
            for t, i in zip(starts, idx, strict=True):
                k = ran.first(c.corr[i]) if c.kind[i] == C_LAUNCH and c.corr[i] >= 0 else None
                if k is not None:  # every call here has a site
                    ran_starts.append(t)
                    kernels.append((cast(Site, self.site[i]), tl.kernels[tl.device.kernel[k]]))
            self.ran_by_thread[th] = (ran_starts, kernels)

    def nodes(self, calls: list[int]) -> list[Node]:
        out = []
        c = self.tl.calls
        for i in calls:
            own = self.tl.kernels[c.kernel[i]] if c.kernel[i] >= 0 else None
            site = self.site[i]
            assert site is not None  # every call in by_thread has one
            out.append(Node(NODE_KIND_OF_CALL[c.kind[i]], own, site, self.inst[i], i))
        return out

    def eager(self, th: int, lo: float, hi: float) -> list[tuple[Site, Kernel]]:
        """Launches on ``th`` in (lo, hi) whose kernel really ran: the warm-up pass."""
        starts, ran = self.ran_by_thread.get(th, ([], []))
        return ran[bisect_right(starts, lo) : bisect_left(starts, hi)]


def windows_of(tl: Timeline, identity: Identity, segs: list[Segment], source: str) -> list[Window]:
    """The capture windows of ``tl`` with their nodes, named by the warm-up pass before each (the one namer)."""
    spans = _spans(tl)
    if not spans:  # no capture: nothing to index (a replay given as a capture costs nothing more)
        return []
    ctx = _Context(tl, segs, source)
    owned = _owners(tl.path, spans, ctx.by_thread)
    out: list[Window] = []
    pending: dict[int, list[float]] = {}  # per thread, a heap of the ends of its windows not yet ended
    ended: dict[int, float] = {}  # per thread, the last end among its windows that have ended
    for order, (th, b, e) in enumerate(spans):
        j = ctx.segment(b, th)
        seg = segs[j] if j >= 0 else None
        nodes = ctx.nodes(owned.get(order, []))
        named_by_launch = all(n.kernel is not None for n in nodes if n.kind == D_KERNEL)
        # the warm-up pass: from the last end of this thread's windows at or before this begin (docs/DESIGN.md
        # §7, "Attribution" step 2); begins come in time order, so an end popped stays past
        start = seg.start if seg is not None else float("-inf")
        heap = pending.setdefault(th, [])
        while heap and heap[0] <= b:
            x = heappop(heap)
            ended[th] = max(ended.get(th, x), x)
        lo = max(ended.get(th, start), start)
        nodes, unnamed = _name_by_warmup(nodes, ctx.eager(th, lo, b))
        if unnamed and lo > start:  # piecewise: one eager pass of the whole model before the first piece
            nodes, unnamed = _name_by_warmup(nodes, ctx.eager(th, start, b))
        heappush(heap, e)
        naming = "launch" if named_by_launch else "warm-up" if unnamed == 0 else "none"
        label = seg.label if seg is not None else OUTSIDE
        bs = seg.bs if seg is not None else None
        out.append(Window(tl.path, identity.runner, label, bs, order, nodes, unnamed, naming))
    return out


def load_capture(
    path: str,
    details: dict[str, tuple[int, str | None]] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Capture:
    """Read one capture trace into its windows (raises TraceError on bad input); ``progress`` as the reader's."""
    tl = load_timeline(path, progress)
    return capture_of(tl, identify(tl), details)


def named_windows(tl: Timeline, identity: Identity) -> list[Window]:
    """The windows of ``tl`` named once per model: the record's names for launches without one and
    ``attribute``'s windows are this one computation (``report`` asks for both)."""
    key = ("windows", identity.runner, identity.bs)  # what of the identity the windows read
    return cast(list[Window], tl.joins().once(key, lambda: windows_of(tl, identity, *segments_of(tl.ranges, identity))))


def capture_of(tl: Timeline, identity: Identity, details: dict[str, tuple[int, str | None]] | None = None) -> Capture:
    """The windows of a capture already read (``report`` reads it once, with Kineto's ids, for three commands)."""
    windows = named_windows(tl, identity)
    got = (details or {}).get(os.path.basename(tl.path))
    if got is not None and segments_of(tl.ranges, identity)[1] == "all":  # TraceLens indexes vLLM's captures
        windows = [replace(w, segment=vllm_label(*got)) for w in windows]  # one segment either way
    rank = identity.tp_rank if identity.tp_rank is not None else rank_from_name(tl.path)
    return Capture(tl.path, identity, rank, windows)
