"""Each event's segment, placed two ways, one answer: by columns for a whole trace
(``Timeline.row_segments``: one ``searchsorted`` per process) and one lookup at a time
(``segments.assigner``, what ``Timeline.segment_finder`` answers per row), on generated segments that
overlap, nest, tie, have no length or lie in another process, and events without a time (NaN)."""

from __future__ import annotations

from array import array

from hypothesis import given
from hypothesis import strategies as st

from mixins.analysis.model.record import Segment
from mixins.analysis.model.segments import assigner
from mixins.analysis.model.timeline import Timeline

PIDS = (7, 8, "host")
times = st.one_of(st.integers(0, 40).map(lambda k: k * 0.5), st.just(float("nan")))
segment = st.tuples(st.integers(0, 40).map(lambda k: k * 0.5), st.integers(0, 20).map(lambda k: k * 0.5),
                    st.sampled_from((*PIDS, 9)))


@given(st.lists(segment, max_size=6), st.lists(st.tuples(times, st.sampled_from(PIDS)), max_size=60))
def test_columns_and_one_lookup_agree(segs_spec: list, events: list) -> None:
    segs = sorted((Segment(f"bs={n}", n, s, s + d, pid) for n, (s, d, pid) in enumerate(segs_spec)),
                  key=lambda s: s.start)
    pids = {pid: n for n, pid in enumerate(PIDS)}
    columns = Timeline("t", pids=pids).row_segments(segs, "ours", array("d", [t for t, _ in events]),
                                                   array("i", [pids[p] for _, p in events]), threads=False)
    find = assigner(segs, pids)
    one_by_one = [len(segs) if (j := find(t, pids[p])) < 0 else j for t, p in events]
    assert list(columns) == one_by_one
