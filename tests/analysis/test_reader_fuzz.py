"""Fuzzing the reader: any bytes give events or a TraceError; valid traces read exactly as json.loads.

Slice and block sizes are shrunk so that tiny documents still cross many slice boundaries, where
the boundary search (candidate cuts, fallback to an exact walk) can go wrong.
"""

from __future__ import annotations

import functools
import gzip
import json
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mixins.analysis.model.records import load_record
from mixins.analysis.read import reader
from mixins.analysis.read.reader import TraceError

FUZZ = settings(  # on top of the profile conftest.py loads (no deadline, no timed health check)
    max_examples=int(os.environ.get("CAPTURE_TRACE_FUZZ_EXAMPLES", "150")),
    suppress_health_check=[*settings().suppress_health_check, HealthCheck.function_scoped_fixture],
)
DATA = Path(__file__).resolve().parent.parent / "data"


@pytest.fixture(autouse=True)
def tiny_slices() -> Iterator[None]:
    """Every stream of this module (the record builders' too) refills and cuts every few bytes."""
    with reader.using_buffering(reader.Buffering(slice=97, block=61, tail_window=53)):
        yield


def _read(path: Path, fields: type = reader.Event) -> list[Any]:
    return [e for batch in reader.open_trace(str(path)).events(fields) for e in batch]


tricky_text = st.sampled_from(["", "a", "},{", "}]", "}, {", "]}", '"', "\\", "é", "\n", "capture::bs=8", "{"])
names = st.lists(tricky_text, max_size=4).map("".join)
json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    names,
    st.floats(allow_nan=False, allow_infinity=False),
)
json_value = st.recursive(
    json_leaf, lambda c: st.lists(c, max_size=3) | st.dictionaries(names, c, max_size=3), max_leaves=8
)
event = st.fixed_dictionaries(
    {
        "ph": st.sampled_from(["X", "i", "s", "f", "M"]),
        "name": names,
        "cat": st.sampled_from(["cpu_op", "kernel", "x"]),
    },
    optional={
        "ts": st.floats(0, 1e12, allow_nan=False),
        "pid": st.integers(0, 9) | names,
        "args": st.dictionaries(
            st.sampled_from(["Input Dims", "External id", "z", "correlation"]) | names, json_value, max_size=4
        ),
    },
)
layout = st.sampled_from([None, 0, 1, 4, "kineto"])


def _dump(doc: dict[str, Any], how: Any) -> str:
    if how == "kineto":
        events = doc["traceEvents"]
        rest = {k: v for k, v in doc.items() if k != "traceEvents"}
        head = json.dumps(rest)[:-1]
        sep = ", " if rest else ""
        return head + sep + '"traceEvents": [\n' + ",\n".join(json.dumps(e) for e in events) + "\n]}"
    return json.dumps(doc, indent=how, ensure_ascii=random.random() < 0.5)


@pytest.mark.slow
@FUZZ
@given(
    events=st.lists(event, max_size=25),
    extra=st.dictionaries(names, json_value, max_size=3),
    how=layout,
    gz=st.booleans(),
    first=st.booleans(),
)
def test_valid_traces_read_exactly(
    tmp_path: Path, events: list[dict], extra: dict, how: Any, gz: bool, first: bool
) -> None:
    extra.pop("traceEvents", None)
    doc = {"traceEvents": events, **extra} if first else {**extra, "traceEvents": events}
    text = _dump(doc, how).encode()
    p = tmp_path / "t.json"
    p.write_bytes(gzip.compress(text) if gz else text)
    got = _read(p)
    want = json.loads(text)["traceEvents"]
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.name == w["name"] and g.ph == w["ph"] and g.cat == w["cat"]
        if isinstance(w.get("ts"), float):
            assert g.ts == w["ts"]
        ext = (w.get("args") or {}).get("External id")
        if isinstance(ext, int) and not isinstance(ext, bool):
            assert g.args is not None and g.args.ext == ext


_SEED = DATA / "vllm_decode_full_graph_capture_rank_0.json.gz"


@functools.cache
def _small_trace() -> bytes:
    """The seed's first 40 events, indented."""
    doc = json.load(gzip.open(_SEED))
    doc["traceEvents"] = doc["traceEvents"][:40]
    return json.dumps(doc, indent=1).encode()


def _mutated(flips: list[tuple[int, int]], cut: int, gz: bool) -> tuple[bytes, int | None, bool]:
    """The small real trace with bytes flipped, compressed or not, cut short: 40 events when untouched."""
    data = bytearray(_small_trace())
    for pos, byte in flips:
        data[pos % len(data)] = byte
    blob = gzip.compress(data) if gz else bytes(data)
    whole = not flips and cut % (len(blob) + 1) == len(blob)
    return blob[: cut % (len(blob) + 1)], 40 if whole else None, False


hostile_piece = st.sampled_from(
    [
        "1" * 320,  # more than a double holds
        "7" * 4400,  # more than Python's int-string limit
        "1e999",
        "[" * 3000 + "]" * 3000,  # deeper than the recursion limit
        '"' + "\\\\" * 40 + '"',  # long backslash runs in a string
        '"' + 'x\\"' * 30 + '"',
        "{}",
        "[]",
        '"' + "s" * 3000 + '"',  # past the lowered value limit
    ]
)


def _hostile(pieces: list[tuple[str, str]], count: int, gz: bool) -> tuple[bytes, int | None, bool]:
    """``count`` plain events, then each piece in an event field, its args or a top-level member."""
    events = ['{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1}'] * count
    top: list[str] = []
    for where, piece in pieces:
        if where == "top":
            top.append(f'"k{len(top)}": {piece}')
        else:
            value = f'{{"Input Dims": {piece}}}' if where == "args" else piece
            events.append(f'{{"ph": "X", "cat": "cpu_op", "{where}": {value}}}')
    text = ("{" + "".join(t + ", " for t in top) + '"traceEvents": [' + ", ".join(events) + "]}").encode()
    return gzip.compress(text) if gz else text, None, True


any_input = st.one_of(
    st.builds(lambda data, gz: (gzip.compress(data) if gz else data, None, False), st.binary(max_size=400),
              st.booleans()),
    st.builds(_mutated, st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=4),
              st.integers(0, 10**6), st.booleans()),
    st.builds(_hostile, st.lists(st.tuples(st.sampled_from(["ts", "dur", "name", "args", "zz", "top"]), hostile_piece),
                                 max_size=4), st.integers(0, 60), st.booleans()),
)


@settings(FUZZ, max_examples=3 * FUZZ.max_examples)  # three kinds of input share the examples
@given(case=any_input)
def test_any_input_gives_a_record_or_one_clean_line(tmp_path: Path, case: tuple[bytes, int | None, bool]) -> None:
    """Arbitrary bytes; a real trace with bytes flipped and cut short; big numbers, deep nesting, escapes and
    long values anywhere, under lowered limits: a record (the whole real trace's 40 events), or a TraceError
    that is one line naming the file — never another exception."""
    blob, events, lowered = case
    p = tmp_path / "t.json.gz"
    p.write_bytes(blob)
    try:
        with reader.using_limits(reader.Limits(max_events=50, max_value_bytes=2048) if lowered else reader.Limits()):
            rec = load_record(str(p))
    except TraceError as exc:
        assert str(exc).startswith(f"{p}: ") and "\n" not in str(exc)
        assert events is None, exc
        return
    assert events is None or rec.events == events


slim_args = st.dictionaries(
    st.sampled_from(["Input Dims", "Input type", "correlation", "kernel", "grid", "block", "graph node id"]),
    json_value | st.lists(st.integers(0, 9), max_size=3),
    max_size=5,
)
slim_event = st.fixed_dictionaries(
    {"cat": st.sampled_from(["cpu_op", "kernel", "cuda_runtime", "python_function"]) | json_value},
    optional={
        "name": names | json_value,
        "ph": json_value,
        "id": json_value,
        "ts": st.floats(0, 1e12, allow_nan=False) | json_value,
        "dur": st.floats(0, 1e6, allow_nan=False) | json_value,
        "pid": st.integers(0, 9) | names,
        "tid": json_value,
        "args": slim_args | json_value,
    },
)


def _read_or_refusal(path: Path, fields: type) -> list[Any] | str:
    """The events as ``fields``, or the message refusing them: a bounded field (ts, dur: ±MAX_TIME_US) out of range."""
    try:
        return _read(path, fields)
    except TraceError as exc:
        assert "number out of range" in exc.message, exc
        return exc.message


@pytest.mark.slow
@FUZZ
@given(events=st.lists(slim_event, max_size=25), how=layout)
def test_slim_events_equal_full_events_on_their_fields(tmp_path: Path, events: list[dict], how: Any) -> None:
    """The time-resolved view's lighter decode (no ph / id) reads every field it has exactly as the
    full decode does, typed path and tolerant path (badly typed fields) alike, or is refused by the same
    message; ``time``'s (no ``args`` at all) reads what the full decode reads from the file with every
    ``args`` removed — refused alike, and nothing in ``args`` is read, so nothing there refuses it."""
    p, stripped = tmp_path / "t.json", tmp_path / "stripped.json"
    p.write_text(_dump({"traceEvents": events}, how))
    stripped.write_text(_dump({"traceEvents": [{k: v for k, v in e.items() if k != "args"} for e in events]}, how))
    for fields, full_path in ((reader.SlimEvent, p), (reader.BareEvent, stripped)):
        got, full = _read_or_refusal(p, fields), _read_or_refusal(full_path, reader.Event)
        if isinstance(got, str) or isinstance(full, str):  # the stripped file's byte offsets differ
            assert isinstance(got, str) and isinstance(full, str) and (got == full or fields is reader.BareEvent)
            continue
        assert len(got) == len(full)
        for g, f in zip(got, full, strict=True):
            assert g.args is None if fields is reader.BareEvent else (g.args is None) == (f.args is None)
            for name in fields.__struct_fields__:
                if name != "args":
                    assert getattr(g, name) == getattr(f, name)
            for name in reader.SlimArgs.__struct_fields__ if g.args is not None else ():
                a, b = getattr(g.args, name), getattr(f.args, name)
                if isinstance(a, msgspec.Raw):  # raw JSON text: equal up to layout (the tolerant path re-encodes)
                    a, b = (msgspec.json.decode(x) if len(x) else None for x in (a, b))
                assert a == b, name
