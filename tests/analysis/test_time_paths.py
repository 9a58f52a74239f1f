"""``time``'s two ways to nest calls give one answer: the columns (numpy: depth and parent by ``searchsorted``)
and the stack walk, each forced by ``build(..., vectorised=…)``, on generated traces read by the real
reader — improper nesting, zero-length calls, ties on start, capture windows begun on one thread and
ended on another, segments of one process that overlap. Where calls do not nest the columns hand the
segment to the walk; the last test shows the columns really answer where they do."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

import mixins.analysis.commands.time as time_command
from mixins.analysis.model.roles import identify
from mixins.analysis.model.timeline import BareEvent, load_timeline
from mixins.analysis.serialise import to_json
from tests.trace_files import Event, event, span, write_trace

PID = 7
NAMES = ("aten::mm", "aten::add", "aten::relu", "cudaLaunchKernel", "cudaMemcpyAsync")

half_us = st.integers(0, 80).map(lambda k: k * 0.5)  # coarse times: ties on start and end are common
call = st.tuples(st.sampled_from(NAMES), st.integers(1, 3), half_us, st.sampled_from([0.0, 0.5, 1.0, 3.0, 10.0, 40.0]))
segment = st.tuples(st.integers(1, 64), half_us, st.integers(0, 60).map(lambda k: k * 0.5), st.sampled_from([PID, 8]))
window = st.tuples(st.integers(1, 3), st.integers(1, 3), half_us, st.integers(0, 40).map(lambda k: k * 0.5))


def _trace(calls: list[Any], segments: list[Any], windows: list[Any], instantiate: float | None) -> list[Event]:
    events = [event("cuda_runtime" if name.startswith("cuda") else "cpu_op", name, ts, dur, pid=PID, tid=tid)
              for name, tid, ts, dur in calls]
    events += [span(f"capture::bs={bs}", ts, dur, pid=pid) for bs, ts, dur, pid in segments]
    for begin_tid, end_tid, ts, length in windows:  # begun on one thread, maybe ended on another
        events.append(event("cuda_runtime", "cudaStreamBeginCapture", ts, 0.5, pid=PID, tid=begin_tid))
        events.append(event("cuda_runtime", "cudaStreamEndCapture", ts + length, 0.5, pid=PID, tid=end_tid))
    if instantiate is not None:
        events.append(event("cuda_runtime", "cudaGraphInstantiate", instantiate, 2.0, pid=PID))
    return events


def _both(events: list[Event]) -> tuple[Any, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        path = write_trace(Path(tmp) / "cuda_graph_capture-DecodeCudaGraphRunner-TP-0.json", events)
        tl = load_timeline(str(path), fields=BareEvent)
    identity = identify(tl)
    columns = to_json(time_command.build("t", identity, tl, 50, vectorised=True))
    walk = to_json(time_command.build("t", identity, tl, 50, vectorised=False))
    return columns, walk


@given(
    st.lists(call, max_size=40),
    st.lists(segment, max_size=3),
    st.lists(window, max_size=3),
    st.one_of(st.none(), half_us),
    st.integers(1, 5),
)
def test_columns_and_walk_agree_and_chunks_change_nothing(
    calls: list[Any], segments: list[Any], windows: list[Any], inst: float | None, chunk: int
) -> None:
    """The two paths agree; cut in chunks of a few (``_CHUNK``: what is held stays small), every carry from one
    chunk to the next is exercised, and the answer is the same."""
    doc = _trace(calls, segments, windows, inst)
    whole, default = _both(doc), time_command._CHUNK
    assert whole[0] == whole[1]
    time_command._CHUNK = chunk
    try:
        assert _both(doc) == whole
    finally:
        time_command._CHUNK = default


@given(st.lists(st.tuples(st.sampled_from(NAMES), st.integers(1, 3), st.integers(0, 6)), min_size=1, max_size=30))
def test_properly_nested_calls_are_answered_by_the_columns(shape: list[Any]) -> None:
    """Each generated call is nested in the one before it on its thread or follows it (zero-length and
    tied starts included): the columns answer (never handing over to the walk) and agree with it."""
    calls, free = [], {1: 0.0, 2: 0.0, 3: 0.0}
    open_: dict[int, list[tuple[float, float]]] = {1: [], 2: [], 3: []}
    for name, tid, width in shape:
        stack = open_[tid]
        if stack and width * 0.5 <= stack[-1][1] - stack[-1][0]:  # fits in the innermost open call: nest at its start
            ts = stack[-1][0]
        else:
            stack.clear()
            ts = free[tid]
        dur = min(width * 0.5, stack[-1][1] - ts) if stack else width * 0.5
        calls.append((name, tid, ts, dur))
        stack.append((ts, ts + dur))
        free[tid] = max(free[tid], ts + dur)
    answered = []
    original = time_command._parents

    def spy(*args: Any) -> Any:
        got = original(*args)
        answered.append(got is not None)
        return got

    setattr(time_command, "_parents", spy)  # noqa: B010 - a spy in place of the module's function
    try:
        columns, walk = _both(_trace(calls, [(1, 0.0, 200.0, PID)], [], None))
    finally:
        setattr(time_command, "_parents", original)  # noqa: B010
    assert columns == walk
    assert answered and all(answered)
