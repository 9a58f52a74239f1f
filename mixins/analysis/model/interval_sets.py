"""Sets of half-open integer intervals ``[start, end)``: union, difference, clip, length.

Why integers (nanoseconds): unions and differences are then exact, so the phases ``time`` cuts a
segment into add up to its wall time with nothing lost to rounding. Why columns: a warm-up phase of
ops that never nest is one interval per op; an interval is two ``array("q")`` slots (16 B), not a tuple
of two ints (~130 B): ``time``'s peak on such ops fell from ~330 B an op to ~60 B (3.2 GB → 0.6 GB at
the default 10M events; docs/DESIGN.md §7.1).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator

__all__ = ["Interval", "IntervalSet", "union", "subtract", "clip"]

Interval = tuple[int, int]


class IntervalSet:
    """Sorted, disjoint, non-empty intervals as two columns; iterating gives ``(start, end)`` pairs."""

    __slots__ = ("starts", "ends")

    def __init__(self) -> None:
        self.starts = array("q")
        self.ends = array("q")

    def add(self, start: int, end: int) -> None:
        """Append ``[start, end)``, merged into the last interval when it touches or overlaps it (``start``
        must not be before the last interval's start)."""
        ends = self.ends
        if ends and start <= ends[-1]:
            if end > ends[-1]:
                ends[-1] = end
        elif end > start:
            self.starts.append(start)
            ends.append(end)

    def __iter__(self) -> Iterator[Interval]:
        return zip(self.starts, self.ends, strict=True)

    def __len__(self) -> int:
        return len(self.starts)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IntervalSet) and (self.starts, self.ends) == (other.starts, other.ends)

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"IntervalSet({list(self)})"

    @property
    def length(self) -> int:
        """The total length covered."""
        return sum(self.ends) - sum(self.starts)


def union(intervals: Iterable[Interval], in_order: bool = False) -> IntervalSet:
    """The set covering exactly what ``intervals`` cover.

    ``in_order``: the caller yields them by start already, so they are merged as they come and never
    all held at once (a trace's warm-up ops can be millions, and each held one costs memory).
    """
    out = IntervalSet()
    add = out.add
    for start, end in intervals if in_order else sorted(iv for iv in intervals if iv[1] > iv[0]):
        add(start, end)
    return out


def subtract(a: IntervalSet, b: IntervalSet) -> IntervalSet:
    """``a`` minus ``b`` (``a`` itself when ``b`` is empty)."""
    if not b:
        return a
    out = IntervalSet()
    bs, be = b.starts, b.ends
    j = 0
    for start, end in a:
        while j < len(bs) and be[j] <= start:
            j += 1
        k = j
        while k < len(bs) and bs[k] < end:
            if bs[k] > start:
                out.add(start, bs[k])
            start = max(start, be[k])
            k += 1
        if start < end:
            out.add(start, end)
    return out


def clip(intervals: Iterable[Interval], lo: int, hi: int) -> list[Interval]:
    """Each interval cut to ``[lo, hi)``; empty ones dropped."""
    return [(max(s, lo), min(e, hi)) for s, e in intervals if min(e, hi) > max(s, lo)]
