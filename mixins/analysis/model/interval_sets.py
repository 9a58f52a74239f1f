"""Sets of half-open integer intervals ``[start, end)``: union, difference, clip, length.

Why integers (nanoseconds): unions and differences are then exact, so the phases ``time`` cuts a
segment into add up to its wall time with nothing lost to rounding.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["Interval", "union", "subtract", "clip", "length"]

Interval = tuple[int, int]


def union(intervals: Iterable[Interval], in_order: bool = False) -> list[Interval]:
    """Sorted, disjoint, non-empty intervals covering exactly what ``intervals`` cover.

    ``in_order``: the caller yields them by start already, so they are merged as they come and never
    all held at once (a trace's warm-up ops can be millions: issue 19).
    """
    out: list[Interval] = []
    valid = (iv for iv in intervals if iv[1] > iv[0])
    for start, end in valid if in_order else sorted(valid):
        if out and start <= out[-1][1]:
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def subtract(a: list[Interval], b: list[Interval]) -> list[Interval]:
    """``a`` minus ``b`` (both as ``union`` returns them; ``a`` itself when ``b`` is empty)."""
    if not b:
        return a
    out: list[Interval] = []
    j = 0
    for start, end in a:
        while j < len(b) and b[j][1] <= start:
            j += 1
        k = j
        while k < len(b) and b[k][0] < end:
            if b[k][0] > start:
                out.append((start, b[k][0]))
            start = max(start, b[k][1])
            k += 1
        if start < end:
            out.append((start, end))
    return out


def clip(intervals: Iterable[Interval], lo: int, hi: int) -> list[Interval]:
    """Each interval cut to ``[lo, hi)``; empty ones dropped."""
    return [(max(s, lo), min(e, hi)) for s, e in intervals if min(e, hi) > max(s, lo)]


def length(intervals: Iterable[Interval]) -> int:
    return sum(e - s for s, e in intervals)
