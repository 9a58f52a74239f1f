"""Interval sets against the obvious model: the set of integer points they cover."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mixins.analysis.model.interval_sets import clip, length, subtract, union

spans = st.lists(st.tuples(st.integers(-20, 60), st.integers(-20, 60)), max_size=8)


def points(intervals: list[tuple[int, int]]) -> set[int]:
    return {t for s, e in intervals for t in range(s, e)}


@given(spans, spans, st.integers(-20, 60), st.integers(-20, 60))
def test_union_subtract_clip_match_point_sets(a: list, b: list, lo: int, hi: int) -> None:
    ua, ub = union(a), union(b)
    assert points(ua) == points(a) and length(ua) == len(points(a))
    assert all(s < e for s, e in ua) and all(x[1] < y[0] for x, y in zip(ua, ua[1:], strict=False))
    diff = subtract(ua, ub)
    assert points(diff) == points(a) - points(b) and length(diff) == len(points(diff))
    assert points(clip(ua, lo, hi)) == {t for t in points(a) if lo <= t < hi}
