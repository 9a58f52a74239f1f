"""Interval sets against the obvious model: the set of integer points they cover."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mixins.analysis.model.interval_sets import clip, subtract, union

spans = st.lists(st.tuples(st.integers(-20, 60), st.integers(-20, 60)), max_size=8)


def points(intervals: list[tuple[int, int]]) -> set[int]:
    return {t for s, e in intervals for t in range(s, e)}


@given(spans, spans, st.integers(-20, 60), st.integers(-20, 60))
def test_union_subtract_clip_match_point_sets(a: list, b: list, lo: int, hi: int) -> None:
    ua, ub = union(a), union(b)
    pairs = list(ua)
    assert points(pairs) == points(a) and ua.length == len(points(a))
    assert all(s < e for s, e in pairs) and all(x[1] < y[0] for x, y in zip(pairs, pairs[1:], strict=False))
    assert union(sorted(a), in_order=True) == ua  # merged as they come, by start
    diff = subtract(ua, ub)
    assert points(list(diff)) == points(a) - points(b) and diff.length == len(points(list(diff)))
    assert points(clip(ua, lo, hi)) == {t for t in points(a) if lo <= t < hi}


def test_property_tests_run_under_the_ci_profile() -> None:
    """conftest.py's profile: a loaded machine (this test once failed with ``FailedHealthCheck: too_slow``)
    makes no property test fail; the reader fuzz's own settings keep it."""
    from test_reader_fuzz import FUZZ

    for chosen in (settings(), FUZZ):  # settings(): the loaded profile, what a bare @given gets
        assert chosen.deadline is None
        assert HealthCheck.too_slow in chosen.suppress_health_check

