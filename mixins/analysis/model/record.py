"""The op-sequence record: per segment, counts and the ordered op signatures with their kernels; small,
interned and picklable (worker processes send it back); and the alignment of op sequences (diff, the namer)."""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Hashable, Sequence
from difflib import SequenceMatcher
from itertools import chain
from typing import Any

from msgspec import Struct, field

from mixins.analysis.model.identity import Identity

__all__ = [
    "OUTSIDE", "ALL", "Kernel", "Signature", "Op", "OpColumns", "Segment", "TraceRecord", "CompactTrace", "compact",
    "matching_runs", "opcodes",
]

OUTSIDE = "(outside)"
ALL = "all"


class Kernel(Struct, frozen=True):
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

    def merged(self, other: Kernel) -> Kernel:
        """This launch's own view, gaps filled from the kernel record it is linked to."""
        return Kernel(self.name, self.grid or other.grid, self.block or other.block,
                      self.smem if self.smem is not None else other.smem,
                      self.regs if self.regs is not None else other.regs)


class Signature(Struct, frozen=True):
    """(op name, Input Dims, Input type, Concrete Inputs) as compact JSON text, layout-independent."""

    name: str
    dims: str
    types: str
    concrete: str

    @property
    def shape_key(self) -> tuple[str, str, str]:
        return (self.name, self.dims, self.types)


class Op(Struct):
    """One cpu_op in time order with what it launched (kernels in launch order)."""

    sig: Signature
    ts: float
    kernels: tuple[Kernel, ...] = ()
    graph_launches: int = 0
    has_shapes: bool = True
    attributed: tuple[str | None, ...] = ()  # names recovered by alignment, per unnamed launch

    @property
    def key(self) -> tuple[Any, ...]:
        """What diff/check compare: no timestamps, ids, pids or durations."""
        return (self.sig.name, self.sig.dims, self.sig.types, self.sig.concrete, self.kernels, self.graph_launches)


class OpColumns(Struct):
    """Every op of a trace as columns, by its timeline index: one :class:`Op` per op cost about a second on
    a half-million-op trace, so :attr:`Segment.ops` builds them only when asked."""

    sig: array  # "i": into ``sigs``
    ts: array  # "d"
    has_shapes: array  # "b"
    sigs: list[Signature]
    kernels: dict[int, tuple[Kernel, ...]] = field(default_factory=dict)  # only ops that launched kernels
    attributed: dict[int, tuple[str | None, ...]] = field(default_factory=dict)  # see ``Op.attributed``
    graphs: dict[int, int] = field(default_factory=dict)  # only ops that launched graphs
    plain_keys: list[tuple[Any, ...]] | None = None  # per signature, built once on first use

    def op(self, k: int) -> Op:
        return Op(self.sigs[self.sig[k]], self.ts[k], self.kernels.get(k, ()), self.graphs.get(k, 0),
                  bool(self.has_shapes[k]), self.attributed.get(k, ()))

    def keys(self, members: array) -> list[tuple[Any, ...]]:
        """``Op.key`` of each op in ``members``; ops that launched nothing share their signature's key."""
        if self.plain_keys is None:
            self.plain_keys = [(s.name, s.dims, s.types, s.concrete, (), 0) for s in self.sigs]
        plain = self.plain_keys
        out = list(map(plain.__getitem__, map(self.sig.__getitem__, members)))
        kernels, graphs = self.kernels, self.graphs
        if kernels or graphs:
            for n, k in enumerate(members):
                if k in kernels or k in graphs:
                    out[n] = out[n][:4] + (kernels.get(k, ()), graphs.get(k, 0))
        return out

    def shape_counts(self, members: array) -> Counter[tuple[str, str, str]]:
        """How often each ``Signature.shape_key`` occurs among ``members``, in order of first occurrence
        (``most_common`` keeps it on ties)."""
        import numpy as np

        sig = np.frombuffer(self.sig, np.int32)[np.frombuffer(members, np.int32)]
        distinct, first, counts = np.unique(sig, return_index=True, return_counts=True)
        out: Counter[tuple[str, str, str]] = Counter()
        for k in np.argsort(first, kind="stable").tolist():
            out[self.sigs[distinct[k]].shape_key] += int(counts[k])
        return out


class Segment(Struct):
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
    members: array = field(default_factory=lambda: array("i"))  # its ops in time order, into ``table``
    table: OpColumns | None = None

    @property
    def ops(self) -> list[Op]:
        """Its ops in time order, built on each call."""
        table = self.table
        return [] if table is None else list(map(table.op, self.members))

    @property
    def signatures(self) -> int:
        return 0 if self.table is None else len(self.table.shape_counts(self.members))

    @property
    def unknown_launches(self) -> int:
        return self.unnamed_launches - self.attributed_launches


class TraceRecord(Struct):
    path: str
    size: int
    identity: Identity
    events: int
    segments: list[Segment]
    segment_source: str  # "capture::" | "filename" | "foreign" | "all"

    def segment(self, label: str) -> Segment | None:
        return next((s for s in self.segments if s.label == label), None)


class CompactTrace(Struct):
    """Per-segment op sequences as small ints into ``table`` (unique op keys): cheap to pickle and compare."""

    path: str
    identity: Identity
    events: int
    segment_source: str
    labels: list[str]
    seqs: list[array]  # array("i") per segment, indexes into table
    table: list[tuple[Any, ...]]


def compact(rec: TraceRecord) -> CompactTrace:
    keys = [[] if s.table is None else s.table.keys(s.members) for s in rec.segments]
    index = {key: j for j, key in enumerate(dict.fromkeys(chain.from_iterable(keys)))}  # in order first seen
    seqs = [array("i", map(index.__getitem__, seg)) for seg in keys]
    labels = [s.label for s in rec.segments]
    return CompactTrace(rec.path, rec.identity, rec.events, rec.segment_source, labels, seqs, list(index))


# ``SequenceMatcher`` without autojunk is quadratic at worst: past a limit (product of the lengths) nothing is
# aligned. Warm-up naming: an eager pass and a capture of the same ops align block by block, close to linear.
_NAMING_LIMIT = 400_000_000
# diff: the differing middles of two op sequences, which may share nothing (the quadratic case).
_DIFF_LIMIT = 4_000_000


def matching_runs(a: Sequence[Hashable], b: Sequence[Hashable]) -> list[tuple[int, int, int]] | None:
    """(i, j, n): ``a[i:i+n] == b[j:j+n]``, the exact runs in order; None when past ``_NAMING_LIMIT``."""
    if len(a) * len(b) > _NAMING_LIMIT:
        return None
    return [(m.a, m.b, m.size) for m in SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks() if m.size]


def opcodes(a: Sequence[Hashable], b: Sequence[Hashable]) -> list[tuple[str, int, int, int, int]] | None:
    """``SequenceMatcher.get_opcodes`` of ``a`` → ``b``; None when past ``_DIFF_LIMIT``."""
    if len(a) * len(b) > _DIFF_LIMIT:
        return None
    codes = SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    return [(str(tag), i1, i2, j1, j2) for tag, i1, i2, j1, j2 in codes]
