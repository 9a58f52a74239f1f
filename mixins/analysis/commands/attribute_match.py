"""``attribute``: put each replayed graph kernel on the capture op, module and shapes that launched it, once
its kernel sequence verifies against one capture window, never guessed; eager device work on its own launch's
op and module (docs/DESIGN.md §7, "Attribution" steps 3-5)."""

from __future__ import annotations

import os
import re
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from functools import reduce
from itertools import repeat
from operator import add, itemgetter, mul
from typing import Any, NamedTuple

import msgspec
from msgspec import Struct, field

from mixins.analysis.model.events import C_GRAPH, D_COPY, D_KERNEL, D_SET, ID_LIMIT, NODE_KIND_OF_CALL
from mixins.analysis.model.identity import Identity, rank_from_name
from mixins.analysis.model.record import Kernel
from mixins.analysis.model.roles import identify
from mixins.analysis.model.segments import segment_size
from mixins.analysis.model.timeline import IdIndex, Timeline, load_timeline
from mixins.analysis.model.windows import Node, Site, Window, sites_of_calls
from mixins.analysis.serialise import json_value
from mixins.formats import BS, SIZE, TOKENS, size_hint

__all__ = [
    "Row", "Unattributed", "Attribution", "ReplayIndex", "index_replay", "attribute_index", "attribute_replay",
    "verify",
]

# A range's size hint, the first that matches: prefill / piecewise runners count tokens, not requests
# (segments.segment_size); so does vLLM, whose ``execute_N_…`` ranges and graphs are keyed by the number of
# tokens. A range without "bs=", "tokens=", "runner=" or an "execute_" prefix is not kept (``events.may_be_hint``).
_SIZE_HINTS = ((BS, size_hint(BS)), (TOKENS, size_hint(TOKENS)), (TOKENS, re.compile(r"^execute_(" + SIZE + ")_")))
_RUNNER_HINT = re.compile(r"(?:^|[^A-Za-z0-9])runner=([A-Za-z0-9_.]+)")
_KIND_NAME = {D_KERNEL: "kernel", D_COPY: "memcpy", D_SET: "memset"}  # a nameless node's name
_KIND_SHIFT = 1 << 32  # a replayed item's key: kind * _KIND_SHIFT + interned kernel id
_BATCH = 256  # launches of one plan kept before they are added to its rows (column-wise, in C)


class Row(Struct):
    """One op at one shape (per segment and runner for graph work): its GPU time over all executions."""

    name: str
    module: str
    input_dims: str  # as the trace states them (JSON text): --json parses them
    input_types: str
    source: str  # "graph" | "eager"
    runner: str | None
    segment: str | None
    kernels: int = 0
    count: int = 0  # op executions
    gpu_time_us: float = 0.0
    min_us: float = float("inf")
    max_us: float = 0.0
    verified: bool = True

    def add(self, us: float, kernels: int) -> None:
        self.kernels += kernels
        self.count += 1
        self.gpu_time_us += us
        self.min_us = min(self.min_us, us)
        self.max_us = max(self.max_us, us)

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "module": self.module,
            "input_dims": json_value(self.input_dims),
            "input_types": json_value(self.input_types),
            "source": self.source,
            "runner": self.runner,
            "segment": self.segment,
            "kernels": self.kernels,
            "count": self.count,
            "gpu_time_us": round(self.gpu_time_us, 3),
            "mean_us": round(self.gpu_time_us / self.count, 3) if self.count else 0.0,
            "min_us": round(self.min_us, 3) if self.count else 0.0,
            "max_us": round(self.max_us, 3),
            "verified": self.verified,
        }


class Unattributed(Struct):
    """Device work nobody could attribute, grouped by reason."""

    source: str
    reason: str
    launches: int = 0
    kernels: int = 0
    gpu_time_us: float = 0.0
    example_correlation: int | None = None

    def as_json(self) -> dict[str, Any]:
        return {**msgspec.structs.asdict(self), "gpu_time_us": round(self.gpu_time_us, 3)}


def annotation_key(corr: Any, node: Any, ts: Any, name: str) -> tuple[Any, ...]:
    """Which replayed kernel ``--annotate`` marks (docs/DESIGN.md §7, "Attribution" step 4)."""
    if isinstance(node, int) and not isinstance(node, bool) and 0 <= node < ID_LIMIT:
        return (corr, node)
    return (corr, ts, name)


class Attribution(Struct):
    replay: str
    captures: list[str]
    rank: int | None = None
    gpu_time_us: float = 0.0
    graph_kernels: int = 0
    graph_kernels_attributed: int = 0
    rows: list[Row] = field(default_factory=list)
    unattributed: list[Unattributed] = field(default_factory=list)
    annotations: dict[tuple[Any, ...], dict[str, Any]] | None = None  # annotation_key -> args

    @property
    def attributed_us(self) -> float:
        return sum(r.gpu_time_us for r in self.rows)

    @property
    def share(self) -> float:
        """The share of GPU time attributed, from both totals as ``--json`` shows them (to the ns): they are
        float sums of the same kernels in different orders, so a fully attributed replay could read
        0.9999999999999997 and fail ``--min-coverage 1``."""
        gpu = round(self.gpu_time_us, 3)
        return min(1.0, round(self.attributed_us, 3) / gpu) if gpu > 0 else 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "replay": self.replay,
            "captures": self.captures,
            "coverage": {
                "gpu_time_us": round(self.gpu_time_us, 3),
                "attributed_us": round(self.attributed_us, 3),
                "graph_kernels": self.graph_kernels,
                "graph_kernels_attributed": self.graph_kernels_attributed,
            },
            "ops": [r.as_json() for r in self.rows],
            "unattributed": [u.as_json() for u in self.unattributed],
        }


# -- verification ---------------------------------------------------------------------------------


def _same(node: Node, kind: int, k: Kernel) -> bool:
    if node.kind != kind or kind != D_KERNEL:
        return node.kind == kind
    return node.kernel is not None and node.kernel.name == k.name and _compatible(node.kernel, k)


def _refused(kernels: int, captured: int, unnamed: int) -> str | None:
    """Why a graph of ``kernels`` kernels cannot verify against a window of ``captured`` launches, ``unnamed``
    of them without a name, before any search; None when it may (``verify`` and ``_Matcher``: one wording)."""
    if kernels > captured:
        return f"graph has {kernels} kernels, capture window has {captured} launches"
    if unnamed:
        return (
            f"{unnamed} of {captured} captured launches have no kernel name "
            "(no launch names and no eager warm-up pass in the segment to name them)"
        )
    return None


def verify(window: Window, replay: list[tuple[int, Kernel]]) -> list[int] | str:
    """Positions in ``window.nodes`` of each replayed node, in order; or why the sequence does not verify."""
    kernels = sum(1 for kind, _ in replay if kind == D_KERNEL)
    captured = sum(1 for n in window.nodes if n.kind == D_KERNEL)
    refused = _refused(kernels, captured, window.unnamed)
    if refused is not None:
        return refused
    out: list[int] = []
    j, nodes = 0, window.nodes
    for n, (kind, k) in enumerate(replay):
        while j < len(nodes) and not _same(nodes[j], kind, k):
            j += 1
        if j == len(nodes):
            return f"replayed node #{n} ({k.name}) not found in order in the capture window"
        out.append(j)
        j += 1
    if len(out) == len(nodes):
        return out
    right: list[int] = []  # the rightmost fit: with the leftmost, it bounds every way to skip nodes
    j = len(nodes) - 1
    for kind, k in reversed(replay):
        while not _same(nodes[j], kind, k):
            j -= 1
        right.append(j)
        j -= 1
    return _one_fit(nodes, out, right[::-1])


# A window with more launches than the replayed graph: which ones were skipped must not be a guess.
AMBIGUOUS_FIT = "ambiguous: the replayed kernels fit the capture window's launches in more than one way"


def _one_fit(nodes: list[Node], left: list[int], right: list[int]) -> list[int] | str:
    """``left`` when the leftmost and rightmost in-order fits give every replayed node the same site, else
    refused, never guessed (docs/DESIGN.md §7, "Attribution" step 3)."""
    if left == right or all(nodes[a].site == nodes[b].site for a, b in zip(left, right, strict=True)):
        return left
    return AMBIGUOUS_FIT


# -- replay side ------------------------------------------------------------------------------------


class ReplayIndex(Struct):
    """What attribution needs of a replay without the captures (docs/DESIGN.md §7, "Attribution" step 6)."""

    tl: Timeline
    rank: int | None
    by_corr: IdIndex
    graphs: list[int]  # call indices of graph launches, time order
    eager_call: IdIndex  # correlation -> non-graph call index (the last one)
    hints: _Hints
    item_keys: array  # per device item: kind * _KIND_SHIFT + interned kernel id (a sequence's key)
    identity: Identity  # with its role and run (``roles.identify``)


def index_replay(path: str, progress: Callable[[int, int], None] | None = None) -> ReplayIndex:
    """Read and index one replay trace (raises TraceError on bad input); ``progress`` as the reader's."""
    tl = load_timeline(path, progress)
    identity = identify(tl)
    rank = identity.tp_rank if identity.tp_rank is not None else rank_from_name(path)
    d, c, joins = tl.device, tl.calls, tl.joins()
    graphs = sorted((i for i in range(len(c.kind)) if c.kind[i] == C_GRAPH), key=lambda i: c.start[i])
    eager_call = joins.calls_by_corr(*NODE_KIND_OF_CALL, resolved=False)
    keys = array("q", map(add, map(mul, d.kind, repeat(_KIND_SHIFT)), d.kernel))  # kind * shift + kernel, in C
    return ReplayIndex(tl, rank, joins.device_groups(), graphs, eager_call, _Hints(tl), keys, identity)


class _Hints:
    """Batch size and runner a replay states around a graph launch, innermost range first: hints only
    (docs/DESIGN.md §7, "Attribution" step 4)."""

    def __init__(self, tl: Timeline) -> None:
        found = []
        for r in tl.ranges:
            bs = next(((unit, int(m.group(1))) for unit, pat in _SIZE_HINTS if (m := pat.search(r.name))), None)
            rm = _RUNNER_HINT.search(r.name)
            if bs is not None or rm:
                found.append((r.ts, r.ts + r.dur, r.pid, bs, rm.group(1) if rm else None))
        self.ranges = sorted(found)
        self.starts = [f[0] for f in self.ranges]
        self.longest = max((f[1] - f[0] for f in found), default=0.0)

    def at(self, t: float, pid: Any) -> tuple[tuple[str, int] | None, str | None]:
        bs: tuple[str, int] | None = None
        runner: str | None = None
        j = bisect_right(self.starts, t) - 1
        while j >= 0 and self.starts[j] >= t - self.longest:  # later starts are inner ranges
            start, end, rpid, rbs, rrunner = self.ranges[j]
            if rpid == pid and end >= t:
                bs = rbs if bs is None else bs
                runner = rrunner if runner is None else runner
            j -= 1
        return bs, runner


_KernelKey = tuple[int, Any]  # (kind, kernel name for kernels, else None): what must be equal
_WORK_PER_ITEM = 8  # a distinct replayed sequence may cost this many node steps per item ...
_WORK_PER_WINDOW = 2  # ... plus this many per window group ...
_WORK_PER_SEQUENCE = 2_000  # ... plus this many, before its search is cut short (docs/DESIGN.md §7)


def _node_key(node: Node) -> _KernelKey:
    if node.kind != D_KERNEL:
        return (node.kind, None)
    return (D_KERNEL, node.kernel.name if node.kernel is not None else _UNNAMED)


_UNNAMED = object()  # an unnamed kernel node's key: equal to no replayed kernel's


def _compatible(own: Kernel | None, k: Kernel) -> bool:
    """Grid and block agree where both sides have them (names were compared by key)."""
    if own is None:
        return True  # a copy / set node
    if own.grid and k.grid and own.grid != k.grid:
        return False
    return not (own.block and k.block and own.block != k.block)


class _WindowGroup:
    """Windows whose nodes are identical in kind, kernel name, grid and block: they verify alike.
    ``positions``: per node key, where it occurs, so a search jumps from one occurrence to the next."""

    __slots__ = ("windows", "nodes", "captured", "unnamed", "positions")

    def __init__(self, windows: list[int], window: Window) -> None:
        self.windows = windows
        self.nodes = window.nodes
        self.captured = sum(1 for n in window.nodes if n.kind == D_KERNEL)
        self.unnamed = window.unnamed
        self.positions: dict[_KernelKey, list[int]] = {}
        for p, n in enumerate(window.nodes):
            self.positions.setdefault(_node_key(n), []).append(p)


def _content(window: Window) -> tuple[Any, ...]:
    """What windows that verify alike share: each node's key, grid and block, and how many are unnamed."""
    shapes = ((n.kernel.grid, n.kernel.block) if n.kind == D_KERNEL and n.kernel else None for n in window.nodes)
    return (*zip(map(_node_key, window.nodes), shapes, strict=True), window.unnamed)


class _Matcher:
    """Matches graph launches to windows, near-linear whatever the captures (docs/DESIGN.md §7, "Attribution"
    step 3): verification cached per replayed sequence; ``work`` counts node steps. Holds one replay's rows,
    keyed by (source, runner, segment, site, name), and its unattributed work, by (source, reason)."""

    def __init__(self, windows: list[Window]) -> None:
        self.windows = windows
        self.cache: dict[tuple[int, ...], tuple[list[tuple[Window, list[int]]], str]] = {}
        self.plans: dict[tuple[int, tuple[int, ...]], list[_Group]] = {}
        self.previous: Window | None = None
        self.launches: dict[int, tuple[list[_Group], list[tuple[float, ...]]]] = {}  # plan id -> durations
        self.rows: dict[tuple[Any, ...], Row] = {}
        self.unattributed: dict[tuple[str, str], Unattributed] = {}
        self.work = 0
        alike: dict[tuple[Any, ...], list[int]] = {}
        for w, window in enumerate(windows):
            alike.setdefault(_content(window), []).append(w)
        self.groups = [_WindowGroup(ws, windows[ws[0]]) for ws in alike.values()]
        self.by_names: dict[tuple[_KernelKey, ...], list[_WindowGroup]] = {}
        for g in self.groups:
            self.by_names.setdefault(tuple(map(_node_key, g.nodes)), []).append(g)
        self.known = {key for g in self.groups for key in g.positions}  # every node key of every window

    def row(self, key: tuple[Any, ...], site: Site, name: str) -> Row:
        got = self.rows.get(key)
        if got is None:
            got = self.rows[key] = Row(name, site.module, site.dims, site.types, *key[:3])
        return got

    def miss(self, source: str, reason: str, kernels: int, us: float, corr: int) -> None:
        u = self.unattributed.setdefault((source, reason), Unattributed(source, reason, example_correlation=corr))
        u.launches += 1
        u.kernels += kernels
        u.gpu_time_us += us

    def candidates(
        self, key: tuple[int, ...], seq: Callable[[], list[tuple[int, Kernel]]]
    ) -> tuple[list[tuple[Window, list[int]]], str]:
        """Windows that verify a replayed sequence (``key``: its interned kinds and kernels), cached: as
        :func:`verify` on every window (docs/DESIGN.md §7, "Attribution" step 3)."""
        got = self.cache.get(key)
        if got is None:
            got = self.cache[key] = self._candidates(seq())
        return got

    def _candidates(self, replay: list[tuple[int, Kernel]]) -> tuple[list[tuple[Window, list[int]]], str]:
        keys = [(kind, k.name if kind == D_KERNEL else None) for kind, k in replay]
        whole = list(range(len(replay)))
        exact: list[int] = []
        for g in self.by_names.get(tuple(keys), ()):
            self.work += len(replay)
            if not g.unnamed and all(
                kind != D_KERNEL or _compatible(n.kernel, k) for n, (kind, k) in zip(g.nodes, replay, strict=True)
            ):
                exact.extend(g.windows)
        if exact:
            return [(self.windows[w], whole) for w in sorted(exact)], ""
        kernels = sum(1 for kind, _ in replay if kind == D_KERNEL)
        if self.groups and not any(kernels > g.captured or g.unnamed for g in self.groups):
            for n, key in enumerate(keys):  # a kernel no window has: no search needed to say so
                if key not in self.known:
                    return [], f"replayed node #{n} ({replay[n][1].name}) is in no capture window"
        start = self.work
        budget = start + _WORK_PER_ITEM * len(replay) + _WORK_PER_WINDOW * len(self.groups) + _WORK_PER_SEQUENCE
        ok: list[tuple[int, list[int]]] = []
        reasons: dict[str, int] = {}
        for g in self.groups:
            res = _refused(kernels, g.captured, g.unnamed) or self._search(g, replay, keys, budget)
            if res is None:
                return [], (
                    f"not verified: more than {budget - start:,} node comparisons for this sequence against "
                    f"{len(self.windows):,} capture windows (the work limit)"
                )
            if isinstance(res, str):
                reasons[res] = reasons.get(res, 0) + len(g.windows)
                continue
            for w in g.windows:  # the windows of a group share kernels, not always sites
                fit = _one_fit(self.windows[w].nodes, *res)
                if isinstance(fit, str):
                    reasons[fit] = reasons.get(fit, 0) + 1
                else:
                    ok.append((w, fit))
        why = min(reasons, key=lambda r: (-reasons[r], r)) if reasons else "no capture windows"
        return [(self.windows[w], pos) for w, pos in sorted(ok, key=itemgetter(0))], why

    def _search(
        self, g: _WindowGroup, replay: list[tuple[int, Kernel]], keys: list[_KernelKey], budget: int
    ) -> tuple[list[int], list[int]] | str | None:
        """The leftmost and the rightmost fit on one group (``_one_fit`` compares their sites per window);
        None once ``self.work`` passes ``budget``."""
        left = self._fit(g, replay, keys, budget, 1)
        if not isinstance(left, list) or len(left) == len(g.nodes):
            return (left, left) if isinstance(left, list) else left
        right = self._fit(g, replay, keys, budget, -1)  # it fits from the right as it did from the left
        return (left, right) if isinstance(right, list) else right

    def _fit(
        self, g: _WindowGroup, replay: list[tuple[int, Kernel]], keys: list[_KernelKey], budget: int, step: int
    ) -> list[int] | str | None:
        """The first fit from the left (``step`` 1) or from the right (-1), as :func:`verify` scans."""
        out: list[int] = []
        j = 0 if step > 0 else len(g.nodes)  # the next node that may be used, or (from the right) one past it
        for n in range(len(replay)) if step > 0 else reversed(range(len(replay))):
            kind, k = replay[n]
            at = g.positions.get(keys[n], [])
            p = bisect_left(at, j) - (step < 0)
            while 0 <= p < len(at) and kind == D_KERNEL and not _compatible(g.nodes[at[p]].kernel, k):
                p += step
                self.work += 1
            self.work += 1
            if self.work > budget:
                return None
            if not 0 <= p < len(at):
                return f"replayed node #{n} ({k.name}) not found in order in the capture window"
            out.append(at[p])
            j = at[p] + (step > 0)
        return out if step > 0 else out[::-1]

    def pick(
        self, ok: list[tuple[Window, list[int]]], hints: tuple[tuple[str, int] | None, str | None]
    ) -> tuple[Window, list[int]] | str:
        """One verified window, or why not (docs/DESIGN.md §7, "Attribution" step 4)."""
        bs, runner = hints
        prev = self.previous
        filters = (
            lambda x: len(x[0].nodes) == len(x[1]),
            lambda x: runner is not None and x[0].runner == runner,
            lambda x: bs is not None and segment_size(x[0].segment) == bs,  # bs=N or tokens=N
            # piecewise: the next piece of the same segment (windows of other sizes in one file are not "next")
            lambda x: prev is not None and (x[0].capture, x[0].segment) == (prev.capture, prev.segment)
            and x[0].order == prev.order + 1,
        )
        for keep in filters:
            if len(ok) == 1:
                return ok[0]  # the usual case: no site tuples to compare (each is a graph's length)
            ok = [x for x in ok if keep(x)] or ok
        if len(ok) == 1:
            return ok[0]
        first_w, first_pos = ok[0]
        same = (first_w.segment, first_w.runner, tuple(first_w.nodes[p].site for p in first_pos))
        if all((w.segment, w.runner, tuple(w.nodes[p].site for p in pos)) == same for w, pos in ok[1:]):
            return ok[0]
        labels = sorted({f"{w.runner or os.path.basename(w.capture)} {w.segment} window {w.order}" for w, _ in ok})
        return f"ambiguous: {len(ok)} capture windows verify ({', '.join(labels[:4])})"


class _Group(NamedTuple):
    """Replayed items (offsets in the launch) that one op execution ran, and the row they add to."""

    row: Row
    offsets: list[int]
    nodes: list[Node]


def _plan(m: _Matcher, tl: Timeline, w: Window, pos: list[int], key: tuple[int, ...]) -> list[_Group]:
    """How a verified (window, sequence) pair spreads over rows; computed once per pair."""
    plan = m.plans.get((id(w), key))
    if plan is not None:
        return plan
    groups: dict[tuple[Any, ...], _Group] = {}
    for off, (k, p) in enumerate(zip(key, pos, strict=True)):
        node = w.nodes[p]
        kind, kernel = divmod(k, _KIND_SHIFT)
        name = node.site.name if kind == D_KERNEL else tl.kernels[kernel].name or _KIND_NAME[kind]
        rkey = ("graph", w.runner, w.segment, node.site, name)
        g = groups.setdefault((rkey, node.inst), _Group(m.row(rkey, node.site, name), [], []))
        g.offsets.append(off)
        g.nodes.append(node)
    plan = m.plans[(id(w), key)] = list(groups.values())
    return plan


def _graph_launch(rp: ReplayIndex, call: int, m: _Matcher, res: Attribution, annotate: bool) -> None:
    tl = rp.tl
    corr = tl.calls.corr[call]
    d = tl.device
    items = rp.by_corr.get(corr, []) if corr >= 0 else []
    node_id = d.node.__getitem__  # device work in node order: CUPTI graph node id when all have one, else time
    items = sorted(items, key=node_id if items and min(map(node_id, items)) >= 0 else d.start.__getitem__)
    res.graph_kernels += len(items)
    if not items:
        return
    pick = itemgetter(*items) if len(items) > 1 else lambda seq: (seq[items[0]],)
    key = pick(rp.item_keys)  # C-level gathers: a scaled replay has ~1,000 launches of ~400 items
    ok, why = m.candidates(key, lambda: [(d.kind[i], tl.kernels[d.kernel[i]]) for i in items])
    hints = rp.hints.at(tl.calls.start[call], tl.thread_pid[tl.calls.thread[call]])
    got = m.pick(ok, hints) if ok else why
    if isinstance(got, str):
        m.miss("graph", got, len(items), sum(pick(d.dur)), corr)
        return
    w, pos = got
    m.previous = w
    res.graph_kernels_attributed += len(items)
    plan = _plan(m, tl, w, pos, key)
    pending = m.launches.setdefault(id(plan), (plan, []))[1]
    pending.append(pick(d.dur))
    if len(pending) >= _BATCH:  # bounded: a long replay adds its launches batch by batch
        _add_launches(plan, pending)
        pending.clear()
    if annotate and res.annotations is not None:
        for g in plan:
            for o, node in zip(g.offsets, g.nodes, strict=True):
                i = items[o]
                key = annotation_key(corr, d.node[i], d.start[i], tl.kernels[d.kernel[i]].name or "")
                res.annotations[key] = _annotation(w, node)


def _add_launches(plan: list[_Group], launches: list[tuple[float, ...]]) -> None:
    """Every launch of one plan onto its rows at once, column-wise, as :meth:`Row.add` would add them one by
    one (docs/DESIGN.md §7, "Attribution" step 6)."""
    columns = list(zip(*launches, strict=True))
    n = len(launches)
    for g in plan:
        offs, row = g.offsets, g.row
        per = columns[offs[0]] if len(offs) == 1 else list(map(sum, zip(*[columns[o] for o in offs], strict=True)))
        row.kernels += len(offs) * n
        row.count += n
        row.gpu_time_us = reduce(add, per, row.gpu_time_us)  # left to right, as launch by launch
        row.min_us = min(row.min_us, min(per))
        row.max_us = max(row.max_us, max(per))


def _annotation(w: Window, node: Node) -> dict[str, Any]:
    return {
        "capture_op": node.site.name,
        "capture_module": node.site.module,
        "capture_input_dims": json_value(node.site.dims),
        "capture_input_types": json_value(node.site.types),
        "capture_segment": w.segment,
        "capture_runner": w.runner,
    }


def _eager(rp: ReplayIndex, graph_corrs: set[int], m: _Matcher) -> None:
    """Device work launched outside graphs, on the innermost cpu_op and module of its own launch."""
    tl, d = rp.tl, rp.tl.device
    # by correlation group, not item by item: a replay is ~all graph kernels (a few groups of many)
    work = sorted(i for c, idx in rp.by_corr.items() if c not in graph_corrs for i in idx)
    calls = [-1 if (call := rp.eager_call.last(d.corr[i])) is None else call for i in work]
    linked = [c for c in calls if c >= 0]
    sites, insts = sites_of_calls(tl, linked)
    site_of = dict(zip(linked, zip(sites, insts, strict=True), strict=True))
    per_exec: dict[tuple[Any, ...], list[Any]] = {}
    for i, c in zip(work, calls, strict=True):
        got = site_of.get(c)
        if got is None or got[1] < 0:
            why = "no launching runtime call" if got is None else "launch outside any cpu_op"
            m.miss("eager", why, 1, d.dur[i], d.corr[i])
            continue
        site, inst = got
        key = ("eager", None, None, site, site.name)
        acc = per_exec.setdefault((key, inst), [site, 0.0, 0])
        acc[1] += d.dur[i]
        acc[2] += 1
    for (key, _), (site, us, n) in per_exec.items():
        m.row(key, site, site.name).add(us, n)


def attribute_index(rp: ReplayIndex, windows: list[Window], captures: list[str], annotate: bool = False) -> Attribution:
    """Attribute an indexed replay against the capture windows."""
    tl = rp.tl
    res = Attribution(tl.path, captures, rp.rank, annotations={} if annotate else None)
    res.gpu_time_us = sum(tl.device.dur)
    m = _Matcher(windows)
    graph_corrs = {tl.calls.corr[c] for c in rp.graphs if tl.calls.corr[c] >= 0}
    for call in rp.graphs:
        _graph_launch(rp, call, m, res, annotate)
    for plan, launches in m.launches.values():
        if launches:
            _add_launches(plan, launches)
    _eager(rp, graph_corrs, m)
    res.rows = sorted(m.rows.values(), key=lambda r: (-r.gpu_time_us, r.name, r.module))
    res.unattributed = sorted(m.unattributed.values(), key=lambda u: -u.gpu_time_us)
    return res


def attribute_replay(path: str, windows: list[Window], captures: list[str], annotate: bool = False) -> Attribution:
    """Attribute one replay trace against the capture windows (raises TraceError on bad input)."""
    return attribute_index(index_replay(path), windows, captures, annotate)
