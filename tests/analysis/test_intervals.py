"""``time``'s interval union (``_union``: numpy columns, a chunk at a time) against the obvious model: the set
of integer points the intervals cover."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mixins.analysis.commands.time import _union

spans = st.lists(st.tuples(st.integers(-20, 60), st.integers(-20, 60)), max_size=12)


def points(intervals: list[tuple[int, int]]) -> set[int]:
    return {t for s, e in intervals for t in range(s, e)}


@given(spans, st.lists(st.integers(0, 12), max_size=4))
def test_union_matches_point_sets_whatever_the_chunks(ivs: list, cuts: list) -> None:
    """Merged as they come, by start, a chunk at a time (an interval still open at a chunk's end is carried
    into the next): the points covered, as sorted intervals that neither overlap nor touch."""
    ivs.sort()
    a, b = (np.array([iv[k] for iv in ivs], np.int64) for k in (0, 1))
    edges = sorted({0, len(ivs), *(min(c, len(ivs)) for c in cuts)})
    chunks = ((a[lo:hi], b[lo:hi]) for lo, hi in zip(edges, edges[1:], strict=False))
    got = np.concatenate([np.empty(0, np.int64), *_union(chunks)]).tolist()
    pairs = list(zip(got[::2], got[1::2], strict=True))
    assert points(pairs) == points(ivs)
    assert all(s < e for s, e in pairs) and all(x[1] < y[0] for x, y in zip(pairs, pairs[1:], strict=False))


def test_property_tests_run_under_the_ci_profile() -> None:
    """conftest.py's profile: a loaded machine (this test once failed with ``FailedHealthCheck: too_slow``)
    makes no property test fail; the reader fuzz's own settings keep it."""
    from test_reader_fuzz import FUZZ

    for chosen in (settings(), FUZZ):  # settings(): the loaded profile, what a bare @given gets
        assert chosen.deadline is None
        assert HealthCheck.too_slow in chosen.suppress_health_check
