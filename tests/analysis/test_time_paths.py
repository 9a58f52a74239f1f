"""``time``'s two ways to nest calls give one answer: the columns (numpy: depth and parent by ``searchsorted``)
and the stack walk, each forced by ``build(..., vectorised=…)``, on generated traces read by the real
reader — improper nesting, zero-length calls, ties on start, capture windows begun on one thread and
ended on another, segments of one process that overlap. Where calls do not nest the columns hand the
segment to the walk; the last test shows the columns really answer where they do."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import msgspec
from hypothesis import given
from hypothesis import strategies as st

import mixins.analysis.commands.time as time_command
from mixins.analysis.model.roles import identify
from mixins.analysis.model.timeline import BareEvent, load_timeline
from mixins.analysis.serialise import to_json

PID = 7
NAMES = ("aten::mm", "aten::add", "aten::relu", "cudaLaunchKernel", "cudaMemcpyAsync")


def _event(cat: str, name: str, tid: int, ts: float, dur: float, pid: int = PID) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": {}}


half_us = st.integers(0, 80).map(lambda k: k * 0.5)  # coarse times: ties on start and end are common
call = st.tuples(st.sampled_from(NAMES), st.integers(1, 3), half_us, st.sampled_from([0.0, 0.5, 1.0, 3.0, 10.0, 40.0]))
segment = st.tuples(st.integers(1, 64), half_us, st.integers(0, 60).map(lambda k: k * 0.5), st.sampled_from([PID, 8]))
window = st.tuples(st.integers(1, 3), st.integers(1, 3), half_us, st.integers(0, 40).map(lambda k: k * 0.5))


def _trace(calls: list[Any], segments: list[Any], windows: list[Any], instantiate: float | None) -> dict[str, Any]:
    events = []
    for name, tid, ts, dur in calls:
        cat = "cuda_runtime" if name.startswith("cuda") else "cpu_op"
        events.append(_event(cat, name, tid, ts, dur))
    for bs, ts, dur, pid in segments:
        events.append(_event("user_annotation", f"capture::bs={bs}", 1, ts, dur, pid))
    for begin_tid, end_tid, ts, length in windows:  # begun on one thread, maybe ended on another
        events.append(_event("cuda_runtime", "cudaStreamBeginCapture", begin_tid, ts, 0.5))
        events.append(_event("cuda_runtime", "cudaStreamEndCapture", end_tid, ts + length, 0.5))
    if instantiate is not None:
        events.append(_event("cuda_runtime", "cudaGraphInstantiate", 1, instantiate, 2.0))
    return {"traceEvents": events}


def _both(doc: dict[str, Any]) -> tuple[Any, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cuda_graph_capture-DecodeCudaGraphRunner-TP-0.json"
        path.write_bytes(msgspec.json.encode(doc))
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
)
def test_columns_and_walk_agree(calls: list[Any], segments: list[Any], windows: list[Any], inst: float | None) -> None:
    columns, walk = _both(_trace(calls, segments, windows, inst))
    assert columns == walk


@given(st.lists(call, max_size=40), st.lists(segment, max_size=3), st.lists(window, max_size=3), st.integers(1, 5))
def test_chunks_change_nothing(calls: list[Any], segments: list[Any], windows: list[Any], chunk: int) -> None:
    """Columns are worked a chunk at a time (``_CHUNK`` calls or points, so that what is held stays small):
    cut in chunks of a few, every carry from one chunk to the next is exercised, and the answer is the same."""
    doc = _trace(calls, segments, windows, None)
    whole, default = _both(doc), time_command._CHUNK
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
