"""Hostile inputs to the analyzer: a file name that is not UTF-8, text without a length bound, shapes that
cost quadratic time (docs/DESIGN.md §7.1, §8.1). None is timed: steps are counted, memory is what the model
keeps.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hostile_shapes import SHAPES, distinct_ops, many_segments
from inprocess import run_analyzer

from mixins.analysis.commands.compare import compact_job, diff_traces
from mixins.analysis.model import windows
from mixins.analysis.model.identity import identity_of
from mixins.analysis.model.record import Segment
from mixins.analysis.model.segments import assigner
from mixins.analysis.model.timeline import IdIndex, load_timeline
from mixins.analysis.read import reader
from mixins.analysis.read.reader import MAX_TEXT, TraceError
from tests.trace_files import write_trace

DATA = Path(__file__).resolve().parents[1] / "data"
VLLM_CAPTURE = DATA / "vllm_decode_full_graph_capture_rank_0.json.gz"
VLLM_REPLAY = DATA / "vllm_decode_full_graph_replay_rank_0.json.gz"
SHOWN = "\\udcff"  # how every command shows the byte 0xff of a file name: as Python writes it


# -- a file name that is not UTF-8 ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def undecodable(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A folder holding the vLLM capture and replay under names with the byte 0xff (str with surrogates,
    as Python hands such names to the analyzer)."""
    folder = tmp_path_factory.mktemp("names")
    base = str(folder).encode()
    capture = (base + b"/capture\xff_rank_0.json.gz").decode(errors="surrogateescape")
    replay = (base + b"/replay\xff.json.gz").decode(errors="surrogateescape")
    shutil.copyfile(VLLM_CAPTURE, capture)
    shutil.copyfile(VLLM_REPLAY, replay)
    out = str(tmp_path_factory.mktemp("out"))
    return {"dir": str(folder), "capture": capture, "replay": replay, "out": out}


_EVERY_COMMAND: dict[str, tuple[list[str], str | None]] = {
    # id -> (argv with {capture}/{replay}/{dir}/{out} filled in, the output file the name must reach)
    "ls": (["ls", "{dir}"], None),
    "ls --long": (["ls", "--long", "{dir}"], None),
    "summary": (["summary", "{capture}"], None),
    "summary --json": (["summary", "--json", "{capture}"], None),
    "diff": (["diff", "{capture}", "{capture}"], None),
    "diff --json": (["diff", "--json", "{capture}", "{capture}"], None),
    "check": (["check", "-j", "1", "{capture}"], None),
    "check --json": (["check", "--json", "-j", "1", "{capture}"], None),
    "time": (["time", "-j", "1", "{capture}"], None),
    "time --json": (["time", "--json", "-j", "1", "{capture}"], None),
    "attribute": (["attribute", "-j", "1", "{replay}", "{capture}"], None),
    "attribute --json": (["attribute", "--json", "-j", "1", "{replay}", "{capture}"], None),
    "attribute --csv": (["attribute", "-j", "1", "--csv", "{out}/ops.csv", "{replay}", "{capture}"], "ops.csv"),
    "attribute --annotate": (["attribute", "-j", "1", "--annotate", "{out}/a.json", "{replay}", "{capture}"], None),
    "report": (["report", "-j", "1", "-o", "{out}/report.html", "{capture}"], "report.html"),
    "clean": (["clean", "{dir}"], None),
}


@pytest.mark.parametrize("name", list(_EVERY_COMMAND))
def test_every_command_shows_an_undecodable_file_name_escaped(undecodable: dict[str, str], name: str) -> None:
    """Every command runs and shows the byte as ``\\udcff``, never the raw surrogate (UnicodeEncodeError)."""
    argv, written = _EVERY_COMMAND[name]
    if name == "report":
        pytest.importorskip("plotly")
    rc, out, err = run_analyzer(*(a.format(**undecodable) for a in argv))
    assert rc == 0, err
    assert "\udcff" not in out + err  # a surrogate would be an encoding error on a real stdout
    if written is not None:
        assert SHOWN in (Path(undecodable["out"]) / written).read_bytes().decode()  # strict UTF-8
    elif name not in ("clean", "attribute --annotate", "check", "attribute"):
        assert SHOWN in out


# -- quadratic paths: counted, never timed -----------------------------------------------------------


class Counted(float):
    """A time that counts every comparison made with it (Python asks a float subclass on the right first),
    so a test can say how many steps a lookup took without timing it."""

    steps = 0
    __hash__ = float.__hash__


def _counting(compare: Any) -> Any:
    def counted(self: float, other: object) -> bool:
        Counted.steps += 1
        return bool(compare(float(self), float(other)))  # type: ignore[arg-type]

    return counted


for _name in ("__lt__", "__le__", "__gt__", "__ge__", "__eq__"):
    setattr(Counted, _name, _counting(getattr(float, _name)))


def _brute_innermost(segs: list[Any], among: list[int], ts: float) -> int:
    """The latest-starting segment of ``among`` containing ``ts`` (the definition, by brute force)."""
    inside = [j for j in sorted(among, key=lambda j: segs[j].start) if segs[j].start <= ts <= segs[j].end]
    return inside[-1] if inside else -1


def test_segment_lookup_is_a_bisect_however_segments_nest() -> None:
    """One long segment, N short ones at its start, ops inside the long one after them: one bisect an op
    (~log2(2N) comparisons), not a walk back over all N short segments."""
    n = 4000
    segs = [Segment("long", None, 0.0, 10.0 * n + 10, 1)]
    segs += [Segment(f"bs={k}", None, 1.0 + k, 1.5 + k, 1) for k in range(n)]
    find = assigner(segs, {1: 0})
    Counted.steps = 0
    queries = [Counted(2.0 * n + k + 0.25) for k in range(n)]
    got = [find(t, 0) for t in queries]
    assert got == [0] * n
    assert Counted.steps <= n * 20, f"{Counted.steps / n:.0f} comparisons a lookup"  # log2(8,001) = 13


def test_segment_lookup_agrees_with_the_definition() -> None:
    """The step function gives what the definition gives: nested, overlapping, equal and touching
    segments, times at every start and end and between them, two processes and a foreign one."""
    rng = random.Random(7)
    for _ in range(200):
        segs = []
        for _ in range(rng.randint(0, 8)):
            a = rng.randint(0, 20)
            segs.append(Segment("s", None, float(a), float(a + rng.randint(0, 8)), rng.choice([1, 2, 9])))
        pids: dict[Any, int] = {1: 0, 2: 1}
        find = assigner(segs, pids)
        for pid_index, pid in ((0, 1), (1, 2), (5, None)):
            mine = [j for j, s in enumerate(segs) if pids.get(s.pid, -1) == pid_index] or list(range(len(segs)))
            for t in [x / 2 for x in range(-2, 62)]:
                assert find(t, pid_index) == _brute_innermost(segs, mine, t), (segs, t, pid)
        assert find(float("nan"), 0) == -1


@pytest.mark.parametrize("shape", ["nested_windows", "sequential_windows"])
def test_capture_windows_cost_n_log_n(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shape: str) -> None:
    """N nested or N sequential windows: each costs O(log n) comparisons with window times (not one per
    window inside it, or before it), owns its own launch, and every launch is looked up once per capture
    (not once per nested window's warm-up pass)."""
    n = 1500
    path = write_trace(tmp_path / f"{shape}.json.gz", SHAPES[shape](n))
    spans = windows._spans
    monkeypatch.setattr(windows, "_spans", lambda tl: [(th, Counted(b), Counted(e)) for th, b, e in spans(tl)])
    Counted.steps = 0
    with mock.patch.object(IdIndex, "first", autospec=True, side_effect=IdIndex.first) as first:
        got = windows.load_capture(str(path)).windows
    assert len(got) == n
    assert all(len(w.nodes) == 1 for w in got), sorted({len(w.nodes) for w in got})
    assert Counted.steps <= 40 * n, f"{Counted.steps / n:.0f} comparisons a window"
    assert first.call_count <= 2 * n, f"{first.call_count / n:.0f} lookups a window"


def test_windows_overlapping_without_nesting_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Windows begun on one thread and ended on another overlap without nesting: the general rule compares
    each with those it overlaps (a staircase of N windows: N²/2 pairs, hours at the event limit). Past
    ``MAX_OVERLAPPING_PAIRS`` the trace is refused in one line; below it each window still holds the launches
    in its span (none nests in another: window k holds launches k..n-1)."""
    monkeypatch.setattr(windows, "MAX_OVERLAPPING_PAIRS", 1000)
    small = write_trace(tmp_path / "small.json.gz", SHAPES["overlapping_windows"](40))  # 780 pairs
    got = windows.load_capture(str(small)).windows
    assert [len(w.nodes) for w in got] == list(range(40, 0, -1))
    big = write_trace(tmp_path / "big.json.gz", SHAPES["overlapping_windows"](60))  # 1,770 pairs
    rc, out, err = run_analyzer("summary", "--json", big)
    assert (rc, out) == (2, "") and len(err.splitlines()) == 1, err
    assert "overlap without nesting in more than 1,000 pairs" in err


class Work:
    """What the reader did, seen by wrapping it (never timed): bytes held after each refill that read more
    (``buffered``), bytes handed to the search for a cut in traceEvents (``cut``), and the calls of the stdlib
    scanner and the characters they were given (``scans``, ``scanned``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.buffered = self.cut = self.scans = self.scanned = 0
        fill, cut, scanner = reader.TraceStream._fill, reader.TraceStream._cut, reader._JSON_TEXT
        work = self

        def counted_fill(stream: reader.TraceStream, need: int) -> bool:
            held = len(stream._buf) - stream._pos
            got = fill(stream, need)
            if len(stream._buf) - stream._pos > held:  # blocks were read: the buffer was joined anew
                work.buffered += len(stream._buf)
            return got

        def counted_cut(stream: reader.TraceStream, buf: bytes, start: int, limit: int, exact: bool) -> object:
            work.cut += limit - start
            return cut(stream, buf, start, limit, exact)

        class CountedScanner:
            def raw_decode(self, text: str, at: int = 0) -> tuple[Any, int]:
                work.scans += 1
                work.scanned += len(text) - at
                return scanner.raw_decode(text, at)

        monkeypatch.setattr(reader.TraceStream, "_fill", counted_fill)
        monkeypatch.setattr(reader.TraceStream, "_cut", counted_cut)
        monkeypatch.setattr(reader, "_JSON_TEXT", CountedScanner())

    def read(self, path: Path) -> reader.TraceStream:
        stream = reader.open_trace(str(path))
        for _ in stream.events():
            pass
        return stream


def test_a_long_key_is_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Bytes buffered to read a 30 MB key stay a small multiple of it (never rescanned from its start)."""
    size = 30 << 20
    path = tmp_path / "key.json"
    path.write_bytes(b'{"' + b"k" * size + b'": 1, "traceEvents": []}')
    work = Work(monkeypatch)
    assert work.read(path).top_keys == ["k" * 256, "traceEvents"]
    assert work.buffered < 4 * size, work.buffered


def test_many_small_top_level_values_are_linear(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each top-level value is parsed from a small window, not the whole buffer; past 100,000 members the
    trace is refused."""
    n = 20_000
    path = tmp_path / "m.json"
    path.write_bytes(b"{" + b'"a": 0, ' * n + b'"traceEvents": []}')
    work = Work(monkeypatch)
    assert work.read(path).top_keys == ["a", "traceEvents"]
    assert work.scans == n and work.scanned <= 512 * n
    path.write_bytes(b"{" + b'"a": 0, ' * 100_001 + b'"traceEvents": []}')
    with pytest.raises(TraceError, match=r"more than 100,000 top-level members \(the limit\)$"):
        work.read(path)


def test_a_long_element_is_scanned_about_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An element longer than the buffer (a 16 MiB name): a doubling that read no separator skips the scan."""
    size = 16 << 20
    work = Work(monkeypatch)
    work.read(write_trace(tmp_path / "long.json.gz", SHAPES["long_names"](size, count=1)))
    assert work.cut < 1.3 * size, f"{work.cut / size:.2f} x the element scanned"


def test_elements_larger_than_a_slice_are_read_without_regrowing_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After an element larger than a read slice (4 MiB), the next buffer has room for an element of the
    size just seen (not a slice again, re-copied at each doubling)."""
    size, count = 16 << 20, 3
    work = Work(monkeypatch)
    work.read(write_trace(tmp_path / "long.json.gz", SHAPES["long_names"](size, count=count)))
    assert work.buffered < 2.5 * size * count, f"{work.buffered / (size * count):.2f} x the elements copied"


class CountedLabel(str):
    """A segment label that counts the comparisons made with it (a list's ``in`` compares with each)."""

    steps = 0

    def __eq__(self, o: object) -> bool:
        CountedLabel.steps += 1
        return str.__eq__(self, o)

    __hash__ = str.__hash__


def test_diff_matches_segments_by_hash(tmp_path: Path) -> None:
    """Labels are matched through a set and a dict (a few comparisons a segment), not a list lookup."""
    n = 3000
    t = compact_job(str(write_trace(tmp_path / "many.json.gz", many_segments(n))))
    assert len(t.labels) == n
    t.labels = [CountedLabel(x) for x in t.labels]
    CountedLabel.steps = 0
    diffs = diff_traces(t, t)
    assert [d.status for d in diffs] == ["same"] * n
    assert CountedLabel.steps <= 4 * n, f"{CountedLabel.steps / n:.0f} comparisons a segment"


# -- text without a length bound ----------------------------------------------------------------------

LONG = 200_000  # characters: far past reader.MAX_TEXT, small enough to write fast


def _longest_string(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return max([0, *map(_longest_string, value.keys()), *map(_longest_string, value.values())])
    if isinstance(value, list):
        return max([0, *map(_longest_string, value)])
    return 0


@pytest.mark.parametrize("shape", ["long_names", "long_labels"])
def test_long_names_and_labels_are_cut_as_read(tmp_path: Path, shape: str) -> None:
    """Long op names and segment labels are cut where they are read, to MAX_TEXT characters and a marker,
    and the command says how many it cut."""
    path = write_trace(tmp_path / f"{shape}.json.gz", SHAPES[shape](LONG))
    tl = load_timeline(str(path))
    held = [n for n, _, _ in tl.signatures] + [r.name for r in tl.ranges]
    assert held and max(map(len, held)) <= MAX_TEXT + 40
    for argv in (["summary", "--json"], ["check", "--json", "-j", "1"], ["time", "--json", "-j", "1"]):
        rc, out, err = run_analyzer(*argv, path)
        assert rc == 0, err
        assert _longest_string(json.loads(out)) <= MAX_TEXT + 200, argv
        assert "more characters]" in out or argv[0] == "check", argv  # check shows no names when all agree
        assert f"{path}: 30 texts longer than {MAX_TEXT:,} characters cut" in err, (argv, err)


def test_runner_name_is_cut_where_read(tmp_path: Path) -> None:
    """A 4 MiB ``runner`` is cut as read, like every other text, wherever it goes."""
    runner = "R" * LONG
    meta = {"runner": runner, "runner_class": runner, "tp_rank": 0}
    path = write_trace(tmp_path / "runner.json.gz", many_segments(3), meta)
    ident = identity_of(str(path), {"capture_trace": meta})
    assert ident.runner is not None and ident.runner_class is not None
    assert len(ident.runner) <= MAX_TEXT + 40 and len(ident.runner_class) <= MAX_TEXT + 40
    rc, out, err = run_analyzer("check", "--json", "-j", "1", path)
    assert rc == 0, err
    assert _longest_string(json.loads(out)) <= MAX_TEXT + 200


# -- distinct things held: a budget in the reader's limits ----------------------------------------------


@pytest.mark.parametrize("command", ["summary", "time", "check", "attribute"])
def test_distinct_names_and_shapes_are_bounded(tmp_path: Path, command: str) -> None:
    """Past ``--max-distinct-mib`` of distinct ops and shapes the trace is one error line naming the limit;
    a real capture holds far less than 1 MiB of it."""
    path = write_trace(tmp_path / "distinct.json.gz", distinct_ops(5000))  # ~3 MB charged
    argv = [command, *(["-j", "1"] if command != "summary" else []), "--max-distinct-mib", "1"]
    files = [shutil.copy(path, tmp_path / "replay.json.gz"), path] if command == "attribute" else [path]
    rc, _, err = run_analyzer(*argv, *files)
    assert rc == 2
    assert err.count("\n") == 1 or command == "attribute", err
    assert f"{path}: more than 1 MiB of distinct names, shapes, threads and ranges (the limit" in err
    files = [VLLM_REPLAY, VLLM_CAPTURE] if command == "attribute" else [VLLM_CAPTURE]
    rc, _, err = run_analyzer(*argv, *files)
    assert rc == 0, err
