"""``diff`` (two traces) and ``check`` (TP ranks of a group) compare ordered op-signature sequences
(``Op.key``), not counts: ops in another order or with other shapes issue other collectives, which is how
NCCL hangs start."""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Callable
from itertools import pairwise, zip_longest
from typing import Any

from msgspec import Struct, field

from mixins.analysis.model.record import CompactTrace, opcodes
from mixins.analysis.model.roles import run_labels
from mixins.analysis.model.timeline import Interner
from mixins.analysis.render import cut
from mixins.analysis.serialise import op_json

__all__ = ["SegmentDiff", "Divergence", "GroupCheck", "diff_traces", "check_traces", "group_key"]

_EXAMPLES = 5


def _remap(keys: Interner, t: CompactTrace) -> list[array]:
    """``t``'s sequences as ids of op keys interned across files, so sequences compare as int arrays."""
    ids = keys.many(t.table)
    return [array("i", map(ids.__getitem__, seq)) for seq in t.seqs]


class SegmentDiff(Struct):
    label: str
    status: str  # "same" | "changed" | "only_a" | "only_b"
    ops_a: int = 0
    ops_b: int = 0
    first_diff: int | None = None
    at_a: dict[str, Any] | None = None
    at_b: dict[str, Any] | None = None
    added: int = 0
    removed: int = 0
    changed: int = 0
    aligned: bool = True
    examples: dict[str, list[Any]] = field(default_factory=lambda: {"added": [], "removed": [], "changed": []})

    def add(self, kind: str, item: Any, n: int = 1) -> None:
        """``n`` more ``kind`` (added, removed, changed) ops; only the first few examples of each are kept."""
        setattr(self, kind, getattr(self, kind) + n)
        if len(self.examples[kind]) < _EXAMPLES:
            self.examples[kind].append(item)


def _op_at(keys: list[tuple[Any, ...]], seq: array, pos: int) -> dict[str, Any] | None:
    """The op at ``pos`` of ``seq`` as JSON; None past its end."""
    return op_json(keys[seq[pos]]) if pos < len(seq) else None


def _first_diff(a: array, b: array) -> int | None:
    if a == b:
        return None
    n = min(len(a), len(b))
    lo, hi = 0, n  # binary search on prefix equality: slices compare in C
    while lo < hi:
        mid = (lo + hi) // 2
        if a[lo : mid + 1] == b[lo : mid + 1]:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _changed_fields(ka: tuple[Any, ...], kb: tuple[Any, ...]) -> list[str]:
    names = ["op", "input_dims", "input_types", "concrete", "kernels", "graph_launches"]
    return [n for n, x, y in zip(names, ka, kb, strict=True) if x != y]


def _diff_seq(label: str, a: array, b: array, keys: list[tuple[Any, ...]]) -> SegmentDiff:
    """One segment's diff: its first difference, then its differing middle aligned (side by side, the same op
    name is a change, else remove + add; the longer side's rest is removed or added) or, too big to align,
    counted as multisets."""
    first = _first_diff(a, b)
    if first is None:
        return SegmentDiff(label, "same", len(a), len(b))
    d = SegmentDiff(label, "changed", len(a), len(b), first, _op_at(keys, a, first), _op_at(keys, b, first))
    suffix = _first_diff(a[first:][::-1], b[first:][::-1]) or 0  # only the differing middle needs aligning
    mid_a, mid_b = a[first : len(a) - suffix], b[first : len(b) - suffix]
    codes = opcodes(list(mid_a), list(mid_b))
    if codes is None:
        d.aligned = False
        ca, cb = Counter(mid_a), Counter(mid_b)
        for kind, more in (("added", cb - ca), ("removed", ca - cb)):
            for k, n in more.items():
                d.add(kind, {**op_json(keys[k]), "count": n}, n)
    for tag, i1, i2, j1, j2 in codes or ():
        if tag == "equal":
            continue
        for i, j in zip_longest(range(i1, i2), range(j1, j2)):
            x, y = None if i is None else keys[mid_a[i]], None if j is None else keys[mid_b[j]]
            if x is not None and y is not None and x[0] == y[0]:
                d.add("changed", {"position_a": first + i, "position_b": first + j, "fields": _changed_fields(x, y),
                                  "a": op_json(x), "b": op_json(y)})
                continue
            if x is not None:
                d.add("removed", {"position": first + i, **op_json(x)})
            if y is not None:
                d.add("added", {"position": first + j, **op_json(y)})
    return d


def diff_traces(a: CompactTrace, b: CompactTrace) -> list[SegmentDiff]:
    """Per segment (matched by label, A's order then B's extras): what B added, removed, changed."""
    keys = Interner()
    sa, sb = _remap(keys, a), _remap(keys, b)
    by_b = dict(zip(b.labels, sb, strict=True))
    out = []
    for label, seq in zip(a.labels, sa, strict=True):
        other = by_b.get(label)
        if other is None and not seq:
            out.append(SegmentDiff(label, "same"))  # e.g. an (outside) of metadata only: no ops either way
        elif other is None:
            out.append(SegmentDiff(label, "only_a", len(seq), 0, removed=len(seq)))
        else:
            out.append(_diff_seq(label, seq, other, keys.values))
    in_a = set(a.labels)
    for label, seq in zip(b.labels, sb, strict=True):
        if label not in in_a and seq:
            out.append(SegmentDiff(label, "only_b", 0, len(seq), added=len(seq)))
    return out


# -- check --------------------------------------------------------------------------------------------


def group_key(t: CompactTrace) -> tuple[Any, ...]:
    """(run, runner, pp_rank, capture index, upstream batch size, DP replica): ranks are compared within
    one run and one replica; a trace without a TP rank is a group of its own."""
    ident = t.identity
    if ident.tp_rank is None:
        return (ident.run, "?", t.path)
    return (ident.run, ident.runner or "", ident.pp_rank or 0, ident.capture_index,
            ident.bs if ident.bs is not None else -1, ident.dp_rank if ident.dp_rank is not None else -1)


class Divergence(Struct):
    segment: str
    rank: int | None
    path: str
    position: int | None  # None: the whole segment is missing on one side
    reference: dict[str, Any] | None
    other: dict[str, Any] | None
    ops_reference: int = 0
    ops_other: int = 0


class GroupCheck(Struct):
    runner: str | None
    pp_rank: int | None
    capture_index: int | None
    members: list[tuple[int | None, str]]  # (tp rank, path), reference first
    bs: int | None = None  # an upstream per-batch-size file's batch size: one group per size
    run: str | None = None  # the server start (``roles.run_labels``)
    divergences: list[Divergence] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # make the group fail
    notes: list[str] = field(default_factory=list)  # informational only
    tp_size: int | None = None  # from the traces' metadata; None: unknown
    complete: bool | None = None  # every TP rank of tp_size present; None: could not be checked
    dp_rank: int | None = None  # the data-parallel replica these ranks belong to; None: not a replica

    @property
    def ok(self) -> bool:
        return not self.divergences and not self.problems

    def as_json(self) -> dict[str, Any]:
        return {
            "run": self.run, "runner": self.runner, "pp_rank": self.pp_rank, "capture_index": self.capture_index,
            "bs": self.bs, "dp_rank": self.dp_rank, "ranks": [r for r, _ in self.members],
            "paths": [p for _, p in self.members], "ok": self.ok,
            "divergences": self.divergences,  # structs: serialise.to_json writes their fields
            "problems": self.problems, "notes": self.notes, "tp_size": self.tp_size, "complete": self.complete,
        }


def _first_divergence(ref: CompactTrace, ref_seqs: dict[str, array], m: CompactTrace, keys: Interner
                      ) -> Divergence | None:
    """The first segment (reference order, then the member's extras) where member ``m`` differs."""
    seqs = dict(zip(m.labels, _remap(keys, m), strict=True))
    for label in ref.labels + [x for x in m.labels if x not in ref_seqs]:
        a, b = ref_seqs.get(label), seqs.get(label)
        if (a is None or b is None) and not (a or b):
            continue  # present on one side without any op: nothing captured either way
        rank = m.identity.tp_rank
        if a is None or b is None:
            return Divergence(label, rank, m.path, None, None, None, len(a or ()), len(b or ()))
        pos = _first_diff(a, b)
        if pos is not None:  # the first divergent op of this rank is what matters
            at_a, at_b = _op_at(keys.values, a, pos), _op_at(keys.values, b, pos)
            return Divergence(label, rank, m.path, pos, at_a, at_b, len(a), len(b))
    return None


def check_traces(traces: list[CompactTrace]) -> list[GroupCheck]:
    """Group traces and compare every TP rank of a group against the lowest rank, per segment."""
    groups: dict[tuple[Any, ...], list[CompactTrace]] = {}
    for t in traces:
        groups.setdefault(group_key(t), []).append(t)
    runs = run_labels(t.identity.run for t in traces)
    keys = Interner()
    out = []
    order = {run: n for n, run in enumerate(runs)}
    for gkey in sorted(groups, key=lambda k: (order[k[0]], repr(k[1:]))):  # runs in the order given
        members = sorted(groups[gkey], key=lambda t: (t.identity.tp_rank is None, t.identity.tp_rank or 0, t.path))
        ref = members[0]
        ident = ref.identity
        g = GroupCheck(
            ident.runner, ident.pp_rank, ident.capture_index, [(m.identity.tp_rank, m.path) for m in members],
            bs=ident.bs, run=runs.get(ident.run), dp_rank=ident.dp_rank,
        )
        out.append(g)
        if ident.tp_rank is None:
            g.notes.append("no TP rank in metadata, file name or distributedInfo: not compared with other files")
            continue
        _check_ranks(g, members)
        if len(members) == 1:
            g.notes.append("only one rank: nothing to compare")
            continue
        ref_seqs = dict(zip(ref.labels, _remap(keys, ref), strict=True))
        g.divergences += filter(None, (_first_divergence(ref, ref_seqs, m, keys) for m in members[1:]))
    _check_families(out, traces)
    return out


# -- completeness: a rank that wrote nothing is how "ok" would lie ------------------------------------

SIZES_UNKNOWN = "TP size unknown (trace written without it: an older or foreign trace): completeness not checked"


def _size_of(t: CompactTrace, name: str) -> int | None:
    value = t.identity.extra.get(name) if name != "pp_size" else t.identity.pp_size
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


_SHOWN_GAPS = 20  # gaps listed before "N more"


def _gaps(present: list[int], size: int) -> list[tuple[int, int]]:
    """The ranks of ``range(size)`` not in ``present`` (sorted, distinct), as inclusive (first, last) runs:
    the gaps between what is present (never a set of the whole range)."""
    bounds = [-1, *(r for r in present if 0 <= r < size), size]
    return [(a + 1, b - 1) for a, b in pairwise(bounds) if b > a + 1]


def _ranks_text(kind: str, gaps: list[tuple[int, int]]) -> str:
    """``TP rank 1`` / ``TP ranks 1, 3`` / ``TP ranks 4-9, 12`` (runs of three or more as a range)."""
    parts = []
    for a, b in gaps:
        parts += [str(a)] if a == b else [str(a), str(b)] if b == a + 1 else [f"{a}-{b}"]
    count = sum(b - a + 1 for a, b in gaps)
    return f"{kind} rank{'s' if count > 1 else ''} {', '.join(cut(parts, _SHOWN_GAPS))}"


def _check_ranks(g: GroupCheck, members: list[CompactTrace]) -> None:
    """No two files claiming one TP rank, and every TP rank of the recorded tp_size present (without a
    size, at least no gap below the top)."""
    ranks = Counter(m.identity.tp_rank for m in members)
    for r, n in sorted((r, n) for r, n in ranks.items() if n > 1):
        paths = ", ".join(m.path for m in members if m.identity.tp_rank == r)
        g.problems.append(f"{n} traces claim TP rank {r}: {paths}")
    present = sorted({m.identity.tp_rank for m in members if m.identity.tp_rank is not None})
    sizes = sorted({s for s in (_size_of(m, "tp_size") for m in members) if s is not None})
    if len(sizes) > 1:
        g.problems.append(f"traces disagree on tp_size ({', '.join(map(str, sizes))}): completeness not checked")
        return
    if not sizes:
        gaps = _gaps(present, present[-1] + 1) if present else []
        if gaps:
            g.problems.append(f"{_ranks_text('TP', gaps)} missing (below TP {present[-1]})")
            g.complete = False
        g.notes.append(SIZES_UNKNOWN)
        return
    g.tp_size = size = sizes[0]
    missing = _gaps(present, size)
    beyond = [(r, r) for r in present if r >= size]
    if missing:
        g.problems.append(f"{_ranks_text('TP', missing)} missing (tp_size {size})")
    if beyond:
        g.problems.append(f"{_ranks_text('TP', beyond)} outside tp_size {size}")
    g.complete = not missing and not beyond


def _check_families(groups: list[GroupCheck], traces: list[CompactTrace]) -> None:
    """Every PP stage (of a run, runner and capture) and DP replica (of a runner and capture) of the recorded
    size has a trace of some TP rank; what is missing fails the family's first group."""
    runs = run_labels(t.identity.run for t in traces)
    for kind in ("PP", "DP"):
        pp, name = kind == "PP", f"{kind.lower()}_size"
        sizes: dict[tuple[Any, ...], set[int]] = {}
        for t in traces:
            i, size = t.identity, _size_of(t, name)
            if i.tp_rank is not None and size is not None and (pp or i.dp_rank is not None):
                sizes.setdefault((runs[i.run] if pp else None, i.runner or "", i.capture_index), set()).add(size)
        for (run, runner, index), found in sorted(sizes.items(), key=repr):
            family = [g for g in groups if (g.runner or "", g.capture_index) == (runner, index)
                      and (g.run == run and g.members[0][0] is not None if pp else g.dp_rank is not None)]
            first = min(family, key=lambda g: (0 if pp else g.dp_rank or 0, g.pp_rank or 0))
            if len(found) > 1:
                disagree = ": completeness not checked" if pp else ""
                first.problems.append(f"traces disagree on {name} ({', '.join(map(str, sorted(found)))}){disagree}")
            elif missing := _gaps(sorted({(g.pp_rank if pp else g.dp_rank) or 0 for g in family}), max(found)):
                said = f"{_ranks_text(kind, missing)} missing ({name} {max(found)})"
                first.problems.append(f"{said}: no trace of any TP rank")
            else:
                continue
            first.complete = False


def compact_job(path: str, progress: Callable[[int, int], None] | None = None) -> CompactTrace:
    from mixins.analysis.model.record import compact
    from mixins.analysis.model.records import load_record

    return compact(load_record(path, progress))
