"""Bad input: one clean line on stderr, exit 2, never a traceback, in bounded memory: broken files, numbers
too big, deep nesting, duplicate keys, huge keys, values and arrays, odd paths; CLI, reader and worker faults.

The memory cases run the CLI in a child under ``RLIMIT_AS`` and read its peak RSS: a blow-up fails the read
("out of memory") or shows in the figure. The 1 GB inputs are ~1 MB of concatenated gzip members.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from analysis_child import bounded, run_child
from hostile_shapes import gzip_members

from mixins.analysis.commands.summary import summary_job as _summary_job  # the real one, before a test replaces it
from mixins.analysis.model.records import load_record
from mixins.analysis.read import reader
from mixins.analysis.read.reader import Limits, TraceError, open_trace
from tests.second_user import as_nobody
from tests.trace_files import write_trace

DATA = Path(__file__).resolve().parents[1] / "data"
VLLM = DATA / "vllm_decode_full_graph_capture_rank_0.json.gz"
GB = 1 << 30
MIB = 1 << 20


def _event(**fields: str) -> str:
    base = {"ph": '"X"', "cat": '"cpu_op"', "name": '"aten::mm"', "ts": "1.0", "dur": "1.0", "pid": "1", "tid": "1"}
    base.update(fields)
    return "{" + ", ".join(f'"{k}": {v}' for k, v in base.items()) + "}"


def _gz(text: str) -> bytes:
    return gzip.compress(text.encode("utf-8", "surrogateescape"), mtime=0)


BIG_FLOAT_INT = "1" + "0" * 309  # 310 digits: more than a double holds
BIG_INT = "7" * 5000  # more than Python's 4,300-digit int-string limit
DEEP = 100_000
RANGE = "invalid JSON: number out of range"
TOO_DEEP = "invalid JSON: nested too deeply"
_GOOD = VLLM.read_bytes()


def _twice(key: str) -> bytes:
    """A trace giving ``key``, which the analyzer reads, twice."""
    events = "[" + _event() + "]"
    dup = f'"traceEvents": {events}' if key == "traceEvents" else '"capture_trace": {"tp_rank": 1}'
    return _gz('{"capture_trace": {"tp_rank": 0}, "traceEvents": ' + events + ", " + dup + "}")


def _time_range(field: str, value: str) -> tuple[bytes, str]:
    message = f"number out of range: {field} {float(value):g} (|{field}| <= 4e+15 µs) in traceEvents"
    return _gz('{"traceEvents": [' + _event(**{field: value}) + "]}"), message


# name -> (the file's bytes, the start of its one error line after "PATH: "); the summary refuses each file,
# and so do the commands named in ALSO for theirs
ONE_LINE: dict[str, tuple[bytes, str]] = {
    "truncated_gzip": (_GOOD[: len(_GOOD) // 2], "truncated gzip stream (file ends before the end-of-stream marker)"),
    "corrupt_gzip": (_GOOD[:20] + b"\xff" * 200 + _GOOD[220:], "corrupt gzip data"),
    "invalid_json": (_gz('{"traceEvents": [{"ph": "X"}, }'), "invalid JSON"),
    "truncated_json": (
        _gz('{"traceEvents": [{"ph": "X", "name": "a"}, {"ph": "X", "na'), "invalid JSON in traceEvents"
    ),
    "no_trace_events": (
        _gz('{"schemaVersion": 1, "events": []}'),
        "no traceEvents array (not a Kineto/chrome trace; its keys: 'schemaVersion', 'events')",
    ),
    "not_an_object": (_gz("[1, 2, 3]"), "not a JSON object"),
    "events_not_array": (_gz('{"traceEvents": {"a": 1}}'), "traceEvents is not an array"),
    "empty": (b"", "empty file"),
    "empty_gzip": (_gz(""), "no JSON content"),
    "garbage_after": (_gz('{"traceEvents": []} xyz'), "invalid JSON: extra data after the top-level object"),
    "bad_utf8": (_gz('{"traceEvents": [{"name": "\udcff\udcfe"}]}'), "invalid JSON"),
    "ts_310_digits": (_gz('{"traceEvents": [' + _event(ts=BIG_FLOAT_INT) + "]}"), RANGE),
    "ts_exponent": (_gz('{"traceEvents": [' + _event(ts="1e400") + "]}"), RANGE),
    "dur_310_digits": (_gz('{"traceEvents": [' + _event(dur=BIG_FLOAT_INT) + "]}"), RANGE),
    "ts_5000_digits": (_gz('{"traceEvents": [' + _event(ts=BIG_INT) + "]}"), RANGE),
    "external_id": (_gz('{"traceEvents": [' + _event(args='{"External id": ' + BIG_INT + "}") + "]}"), RANGE),
    "input_dims": (_gz('{"traceEvents": [' + _event(args='{"Input Dims": [[' + BIG_INT + "]]}") + "]}"), RANGE),
    "top_level_5000_digits": (_gz('{"schemaVersion": ' + BIG_INT + ', "traceEvents": []}'), RANGE),
    "metadata_5000_digits": (_gz('{"capture_trace": {"tp_rank": ' + BIG_INT + '}, "traceEvents": []}'), RANGE),
    # after many events, so that the slice holding it is cut by the exact (stdlib) walk at EOF
    "last_event_5000_digits": (
        _gz('{"traceEvents": [' + ", ".join([_event()] * 50) + ", " + _event(ts=BIG_INT)[:-1] + ', "x": "}, {"}]}'),
        RANGE,
    ),
    "deep_top_level_value": (_gz('{"deviceProperties": ' + "[" * DEEP + "]" * DEEP + ', "traceEvents": []}'), TOO_DEEP),
    "deep_event": (_gz('{"traceEvents": [' + "[" * DEEP + "]" * DEEP + "]}"), TOO_DEEP),
    "deep_args": (_gz('{"traceEvents": [{"name": "a", "args": {"x": ' + "[" * DEEP + "]" * DEEP + "}}]}"), TOO_DEEP),
    "deep_objects": (_gz('{"traceEvents": [{"name": "a"}, ' + '{"a": ' * DEEP + "1" + "}" * DEEP + "]}"), TOO_DEEP),
    "ts_2**64": _time_range("ts", "18446744073709551616"),
    "ts_1e308": _time_range("ts", "1e308"),
    "dur_1e308": _time_range("dur", "1e308"),
    "dur_-1e308": _time_range("dur", "-1e308"),
    # JSON parsers and Perfetto take the last, a streaming reader the first: refused by every reader
    "twice_traceEvents": (_twice("traceEvents"), "duplicate top-level key 'traceEvents' (ambiguous: refused)"),
    "twice_capture_trace": (_twice("capture_trace"), "duplicate top-level key 'capture_trace' (ambiguous: refused)"),
}
TIME = ("time", "{path}")
ANNOTATE = ("attribute", "{path}", str(VLLM), "--annotate", "{tmp}/annotated.json")
ALSO: dict[str, list[tuple[str, ...]]] = {**dict.fromkeys(["ts_2**64", "ts_1e308", "dur_1e308", "dur_-1e308"], [TIME]),
        "twice_traceEvents": [TIME, ANNOTATE], "twice_capture_trace": [TIME, ANNOTATE]}


@pytest.fixture()
def bad_files(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """Every ONE_LINE case as a file: name -> (path, message)."""
    for name, (data, _) in ONE_LINE.items():
        (tmp_path / f"{name}.json.gz").write_bytes(data)
    return {name: (tmp_path / f"{name}.json.gz", msg) for name, (_, msg) in ONE_LINE.items()}


@pytest.mark.parametrize("case", list(ONE_LINE))
def test_bad_file_one_line_exit_2(bad_files, run_cli, tmp_path: Path, case: str) -> None:  # type: ignore[no-untyped-def]
    """The CLI's one line, and ``load_record``'s TraceError (shapes are decoded when a command reads them,
    not by ``load_record``); ``--annotate`` writes nothing."""
    path, msg = bad_files[case]
    for argv in [("summary", "{path}"), *ALSO.get(case, [])]:
        rc, out, err = run_cli(*(a.format(path=path, tmp=tmp_path) for a in argv))
        assert rc == 2 and out == "", argv
        assert err.count("\n") == 1
        assert err.startswith(f"capture-trace: error: {path}: {msg}"), err
    assert not (tmp_path / "annotated.json").exists()
    if case != "input_dims":
        with pytest.raises(TraceError):
            load_record(str(path))


NO_TRACES = "no traces (*.json.gz or *.json) in this directory"
NUL = "invalid path (contains a NUL byte)"
# {tmp}: "empty" holds a dotfile (a temp file, not a trace) and notes.txt, "odd" a file of "{" named with a newline
IN_TMP = {"empty/.hidden.json.gz": b"x", "empty/notes.txt": b"x", "odd/two\nlines\u2028.json.gz": b"{"}
# case -> (argv, the one error line after "capture-trace: error: ", names escaped)
BAD_PATHS = {
    "missing file": (["summary", "{tmp}/nope.json.gz"], "{tmp}/nope.json.gz: no such file"),
    "folder as a trace": (["diff", "{tmp}/empty", str(VLLM)], "{tmp}/empty: not a regular file (a directory)"),
    "missing folder": (["check", "{tmp}/missing"], "{tmp}/missing: no such directory"),
    "no traces ls": (["ls", "{tmp}/empty"], f"{{tmp}}/empty: {NO_TRACES}"),
    "no traces check": (["check", "{tmp}/empty"], f"{{tmp}}/empty: {NO_TRACES}"),
    "newline": (["summary", "{tmp}/two\nlines\u2028.json.gz"], "{tmp}/two\\nlines\\u2028.json.gz: no such file"),
    "NUL in a name": (["summary", "{tmp}/nul\x00.json.gz"], "{tmp}/nul\\x00.json.gz: " + NUL),
    "NUL in a folder": (["check", "{tmp}\x00"], "{tmp}\\x00: " + NUL),
    "newline listed": (["ls", "{tmp}/odd"], "{tmp}/odd/two\\nlines\\u2028.json.gz: not gzip (the name ends in .gz, "
                       "the file has no gzip header)"),
}


@pytest.mark.parametrize("case", list(BAD_PATHS))
def test_bad_paths_are_one_line(run_cli, tmp_path: Path, case: str) -> None:  # type: ignore[no-untyped-def]
    for name, data in IN_TMP.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(data)
    argv, line = BAD_PATHS[case]
    rc, out, err = run_cli(*(a.format(tmp=tmp_path) for a in argv))
    assert (rc, out, err) == (2, "", f"capture-trace: error: {line.format(tmp=tmp_path)}\n")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to fork a child as a second uid")
def test_unreadable_file(shared: Path) -> None:
    """A real EACCES even as root: uid 65534 reads a mode-000 file in a world-traversable directory."""
    p = shared / "locked.json.gz"
    p.write_bytes(_GOOD)
    p.chmod(0)

    def read() -> str:
        try:
            load_record(str(p))
        except TraceError as exc:
            return str(exc)
        return "no error"

    assert as_nobody(read) == f"{p}: permission denied"


def test_ls_reports_bad_files_and_lists_the_rest(bad_files, run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "good.json.gz").write_bytes(VLLM.read_bytes())
    rc, out, err = run_cli("ls", tmp_path, "--json")
    assert rc == 2
    listed = ["good.json.gz", "input_dims.json.gz"]  # ls reads no op's args
    assert sorted(Path(r["path"]).name for r in json.loads(out)["traces"]) == listed
    lines = err.splitlines()
    assert len(lines) == len(bad_files) - 1
    assert all(line.startswith("capture-trace: error: ") for line in lines)


@pytest.mark.parametrize(("name", "data", "shown", "message"), [
    ("cut.json.gz", _GOOD[: len(_GOOD) // 3], "cut.json.gz",
     "truncated gzip stream (file ends before the end-of-stream marker)"),
    (os.fsdecode(b"bad\n\xff.json.gz"), _gz("not json"), "bad\\n\\udcff.json.gz",
     "not a JSON object (a Kineto trace is an object with traceEvents)"),
])
def test_one_line_in_a_real_process(tmp_path: Path, name: str, data: bytes, shown: str, message: str) -> None:
    """Through the console script in a fresh interpreter: stderr is the one line, a name's newline and
    undecodable byte escaped."""
    (tmp_path / name).write_bytes(data)
    res = run_child("analyzer_cli", "summary", tmp_path / name)
    assert (res.returncode, res.stderr) == (2, f"capture-trace: error: {tmp_path}/{shown}: {message}\n")


def test_the_analyzer_never_imports_torch() -> None:
    assert run_child("analyzer_imports_torch").stdout.strip() == "False"


@pytest.mark.parametrize("case", ["truncated_gzip", "corrupt_gzip"])
def test_stdlib_gzip_fallback_gives_the_same_errors(bad_files, run_cli, monkeypatch, case: str) -> None:  # type: ignore[no-untyped-def]
    """isal is optional: without it the stdlib gzip module reads, with the same messages."""
    monkeypatch.setattr(reader, "_fast_gzip", None)
    path, msg = bad_files[case]
    rc, _, err = run_cli("summary", path)
    assert rc == 2 and err.startswith(f"capture-trace: error: {path}: {msg}")
    assert load_record(str(VLLM)).events == 131243


@pytest.mark.parametrize("digits", [20, 300, 4300])
@pytest.mark.parametrize("field", ["pid", "tid", "id", "ts", "External id", "correlation", "grid", "Input Dims"])
def test_big_but_valid_numbers_never_crash(run_cli, tmp_path: Path, field: str, digits: int) -> None:  # type: ignore[no-untyped-def]
    """Numbers Python can hold are read or refused cleanly in every field, by every command."""
    number = "9" * digits
    value = f"[{number}]" if field in ("grid", "Input Dims") else number
    if field in ("pid", "tid", "id", "ts"):
        ev = _event(**{field: value})
    else:
        ev = _event(cat='"kernel"', args=json.dumps({field: 0}).replace("0", value))
    # a capture (one capture segment): diff and check read captures only
    segment = _event(cat='"user_annotation"', name='"capture::bs=1"', ts="0.5", dur="5.0")
    path = write_trace(tmp_path / "t.json.gz", [segment, ev, _event()])
    for cmd in (["summary", path, "--top", "3"], ["ls", path], ["diff", path, path], ["check", path]):
        rc, _, err = run_cli(*cmd)
        assert rc in (0, 2), (cmd, err)
        assert "please report" not in err, err
        if rc == 2:
            lines = err.splitlines()  # one per file read (diff reads it twice)
            assert len(lines) == (2 if cmd[0] == "diff" else 1), err
            assert all(line.startswith("capture-trace: error: ") and "number out of range" in line for line in lines)


@pytest.mark.parametrize("cmd", ["ls", "check"])
def test_directory_reports_every_file_despite_bad_numbers(run_cli, tmp_path: Path, cmd: str) -> None:  # type: ignore[no-untyped-def]
    shutil.copy(VLLM, tmp_path / "a_good.json.gz")
    bad = [(tmp_path / f"{c}.json.gz") for c in ("b_ts_310_digits", "c_top_level_5000_digits", "d_external_id")]
    for p in bad:
        p.write_bytes(ONE_LINE[p.name[2:-8]][0])
    shutil.copy(VLLM, tmp_path / "e_good.json.gz")
    rc, out, err = run_cli(cmd, tmp_path, "--json")
    assert rc == 2
    lines = err.splitlines()
    assert [line.split(": ")[2] for line in lines] == [str(p) for p in bad]
    assert all("number out of range" in line for line in lines)
    doc = json.loads(out)
    if cmd == "ls":
        assert [Path(t["path"]).name for t in doc["traces"]] == ["a_good.json.gz", "e_good.json.gz"]
    else:
        assert doc["bad_files"] == [str(p) for p in bad] and not doc["ok"]
        assert sorted(Path(p).name for g in doc["groups"] for p in g["paths"]) == ["a_good.json.gz", "e_good.json.gz"]


def test_moderate_nesting_is_fine(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    d = 200
    path = write_trace(tmp_path / "ok.json.gz", [_event()], x=json.loads("[" * d + "]" * d))
    rc, _, err = run_cli("summary", path)
    assert rc == 0 and err == ""


# -- sizes: every buffered key, value and element is bounded; events are capped ----------------------


VALUE_LIMIT = "(the limit; see --max-value-mib)"


KEY = (b'{"', b"k", 30 * MIB, b'": 1, "traceEvents": [{"name": "a"}]}')
STRING = (b'{"x": "', b"a", GB, b'", "traceEvents": []}')


@pytest.mark.parametrize(("shape", "argv", "space", "error", "peak"), [
    # 1 GB of ``{},`` was 3 minutes and 6 GB; now the event cap stops it early and small
    ((b'{"traceEvents": [', b"{},", GB, b"{}]}"), ["summary", "--max-events", "200000"], 512 * MIB,
     re.escape("more than 200,000 events in traceEvents (the limit; see --max-events)"), 100 * MIB),
    # a single 1 GB string was 5.3 GB of memory; the default 64 MiB value limit refuses it early
    (STRING, ["summary"], GB, re.escape(f"a value larger than 64 MiB at byte 6 {VALUE_LIMIT}"), 300 * MIB),
    ((b'{"traceEvents": [{"name": "', b"a", GB, b'"}]}'), ["summary"], GB,
     re.escape(f"a traceEvents element larger than 64 MiB at byte 17 {VALUE_LIMIT}"), 300 * MIB),
    # a 30 MB key is below the default limit: read, in bounded memory; past a lower one, refused
    (KEY, ["ls", "--json"], GB, None, 300 * MIB),
    (KEY, ["ls", "--max-value-mib", "16"], GB, re.escape(f"an object key larger than 16 MiB at byte 1 {VALUE_LIMIT}"),
     None),
    # the value limit raised past what the address space allows: the read fails cleanly
    (STRING, ["summary", "--max-value-mib", "4096"], 300 * MIB, "out of memory.*", None),
], ids=["events", "top_level_value", "event", "key", "key_limit", "out_of_memory"])
def test_a_gigabyte_is_refused_early_in_bounded_memory(
    tmp_path: Path, shape: tuple[bytes, bytes, int, bytes], argv: list[str], space: int, error: str | None,
    peak: int | None,
) -> None:
    """Each file is ~1 MB of gzip members, read by the CLI in a child under ``RLIMIT_AS`` = ``space``: read, or
    refused in exactly one line (``error``: a pattern), within ``peak`` bytes of RSS."""
    path = gzip_members(tmp_path / "big.json.gz", *shape)
    assert path.stat().st_size < 2 * MIB
    proc, rss = bounded(space, argv[0], path, *argv[1:])
    if error is None:
        assert proc.returncode == 0, proc.stderr
    else:
        assert proc.returncode == 2
        assert re.fullmatch(f"capture-trace: error: {re.escape(str(path))}: {error}\n", proc.stderr), proc.stderr
    assert peak is None or rss < peak, rss


def test_a_decompressor_out_of_memory_is_not_called_corrupt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """zlib and ISA-L raise MemoryError when their output buffer cannot grow: that is out of memory, never
    "corrupt gzip data" (which the reader says of every other decompressor failure)."""

    class Starved(gzip.GzipFile):
        def read(self, size: int | None = -1) -> bytes:
            raise MemoryError("Unable to allocate output buffer.")

    monkeypatch.setattr(reader, "_fast_gzip", SimpleNamespace(IGzipFile=Starved))
    path = write_trace(tmp_path / "t.json.gz", [_event()])
    with pytest.raises(TraceError, match="out of memory while reading"):
        list(open_trace(str(path)).events())


def test_max_events_allows_exactly_the_limit(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = write_trace(tmp_path / "t.json.gz", [_event()] * 30)
    rc, out, _ = run_cli("ls", path, "--json", "--max-events", "30")
    assert rc == 0 and json.loads(out)["traces"][0]["events"] == 30
    rc, _, err = run_cli("ls", path, "--max-events", "29")
    assert rc == 2 and "more than 29 events in traceEvents" in err
    # non-object elements count too: they cost time
    path = write_trace(tmp_path / "n.json.gz", ["1"] * 40)
    rc, _, err = run_cli("summary", path, "--max-events", "39")
    assert rc == 2 and "more than 39 events" in err


@pytest.mark.parametrize(
    "key",
    ["a\\\\", 'x\\"y', "\\\\\\\\", 'q\\\\\\"r', "\\u00e9\\n"],
)
def test_escaped_keys_across_refills(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str) -> None:
    """Backslash runs split by a refill still decide whether a quote ends the key."""
    for pad in range(6):
        text = '{"' + "p" * pad + key + '": 1, "traceEvents": []}'
        path = tmp_path / "k.json"
        path.write_text(text)
        stream = open_trace(str(path), limits=Limits(max_value_bytes=1 << 10), buffering=reader.Buffering(block=1))
        list(stream.events())
        assert stream.top_keys[0] == next(iter(json.loads(text)))


def test_value_and_element_limits_are_exact_enough(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Below the limit reads; past it (when it must be buffered to complete) is refused."""
    # Slices and reads smaller than the limit, as with the defaults (4 MiB slices, 64 MiB limit);
    # else a small file is one block, all buffered anyway.
    small = reader.Buffering(block=4096, min_slice=4096, slice=8192)
    limits = Limits(max_value_bytes=1 << 16)
    ok = tmp_path / "ok.json"
    ok.write_text('{"x": "' + "a" * 60_000 + '", "traceEvents": [{"name": "' + "b" * 60_000 + '"}]}')
    stream = open_trace(str(ok), limits=limits, buffering=small)
    assert [e.name for batch in stream.events() for e in batch] == [reader.cut_text("b" * 60_000)]  # read, then cut
    big = tmp_path / "big.json"
    big.write_text('{"traceEvents": [{"name": "a"}, {"name": "' + "b" * 200_000 + '"}]}')
    with pytest.raises(TraceError, match="a traceEvents element larger than 0.0625 MiB"):
        list(open_trace(str(big), limits=limits, buffering=small).events())


def test_a_dead_worker_is_that_files_error(run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """Fault injected: the worker reading one file is SIGKILLed, as the OOM killer would: one line per file."""
    from mixins.analysis.commands import compare

    for n in range(3):
        shutil.copy(VLLM, tmp_path / f"t{n}.json.gz")
    monkeypatch.setattr(compare, "compact_job", _killed_on_t1)  # the job check runs per file
    rc, _, err = run_cli("check", tmp_path, "-j", "2")
    assert rc == 2
    lines = err.splitlines()
    died = "the process reading this file died (killed, or out of memory?)"
    assert f"capture-trace: error: {tmp_path / 't1.json.gz'}: {died}" in lines, err
    assert all(line.startswith("capture-trace: error: ") for line in lines)


def _killed_on_t1(path: str, progress: object = None) -> object:
    import signal

    from mixins.analysis.model.records import compact, load_record

    if path.endswith("t1.json.gz"):
        os.kill(os.getpid(), signal.SIGKILL)
    return compact(load_record(path))


def _buggy_summary_job(path: str, top: int, progress: object = None) -> object:
    if path.endswith("bad.json.gz"):
        raise KeyError("oops\nsecond line")
    return _summary_job(path, top)


def test_an_unexpected_error_is_one_line_and_the_rest_is_reported(  # type: ignore[no-untyped-def]
    run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fault injection (named as such): a bug raising mid-file must not become a traceback/exit 1."""
    from mixins.analysis.commands import summary

    monkeypatch.setattr(summary, "summary_job", _buggy_summary_job)  # the job summary runs per file
    shutil.copy(VLLM, tmp_path / "good.json.gz")
    rc, out, err = run_cli("summary", tmp_path / "bad.json.gz", tmp_path / "good.json.gz", "--json")
    assert rc == 2
    assert err == (
        f"capture-trace: error: {tmp_path / 'bad.json.gz'}: cannot analyse (KeyError: 'oops\\nsecond line'); "
        "please report this\n"
    )
    assert [t["path"] for t in json.loads(out)["traces"]] == [str(tmp_path / "good.json.gz")]


@pytest.mark.parametrize("option", ["--max-events", "--max-value-mib"])
@pytest.mark.parametrize("value", ["0", "-3", "many"])
def test_limit_options_are_validated(run_cli, option: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SystemExit) as exc:
        run_cli("summary", VLLM, option, value)
    assert exc.value.code == 2
    assert option in capsys.readouterr().err


def test_limits_reach_spawned_workers(tmp_path: Path) -> None:
    """Workers started with "spawn" do not inherit the parent's memory: the limits travel with each job."""
    for n in range(2):
        write_trace(tmp_path / f"t{n}.json.gz", [_event()] * 9)
    res = run_child("spawn_cli", "check", tmp_path, "-j", 2, "--max-events", 5, timeout=300)
    assert res.returncode == 2
    assert res.stderr.splitlines() == [
        f"capture-trace: error: {tmp_path / f't{n}.json.gz'}: more than 5 events in traceEvents "
        "(the limit; see --max-events)"
        for n in range(2)
    ]


def test_time_never_reads_args(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``time`` never decodes ``args``: a 5,000-digit correlation or args of the wrong type change nothing,
    while ``summary``, which reads correlations, refuses the same file on one line."""
    launch = {"cat": '"cuda_runtime"', "name": '"cudaLaunchKernel"', "ts": "2.0", "dur": "0.5"}
    odd_launch = _event(**launch, args='{"correlation": ' + BIG_INT + ', "kernel": [1]}')
    outputs = []
    for name, events in (("clean.json.gz", [_event(), _event(**launch)]),
                         ("odd.json.gz", [_event(args='"not an object"'), odd_launch])):
        rc, out, err = run_cli("time", "--json", write_trace(tmp_path / name, events))
        assert (rc, err) == (0, "")
        (trace,) = json.loads(out)["traces"]
        outputs.append({k: v for k, v in trace.items() if k != "path"})
    assert outputs[0] == outputs[1]
    assert outputs[0]["totals"]["top"]  # the op and the launch were both timed
    rc, out, err = run_cli("summary", tmp_path / "odd.json.gz")
    assert rc == 2 and out == "" and err.count("\n") == 1 and "number out of range" in err, err
