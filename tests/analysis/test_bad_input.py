"""Bad input: one clean line on stderr, exit 2, never a traceback (CLI, reader, fuzzed)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
from pathlib import Path

import pytest
from analysis_child import child_env, command

from mixins.analysis.model.records import load_record
from mixins.analysis.read.reader import TraceError

DATA = Path(__file__).resolve().parent.parent / "data"
VLLM = DATA / "vllm_decode_full_graph_capture_rank_0.json.gz"


def _bad_files(tmp: Path) -> dict[str, tuple[Path, str]]:
    """name -> (file, expected message)."""
    good = VLLM.read_bytes()
    cases = {
        "truncated_gzip": (
            good[: len(good) // 2],
            "truncated gzip stream (file ends before the end-of-stream marker)",
        ),
        "corrupt_gzip": (good[:20] + b"\xff" * 200 + good[220:], "corrupt gzip data"),
        "invalid_json": (gzip.compress(b'{"traceEvents": [{"ph": "X"}, }'), "invalid JSON"),
        "truncated_json": (
            gzip.compress(b'{"traceEvents": [{"ph": "X", "name": "a"}, {"ph": "X", "na'),
            "invalid JSON in traceEvents",
        ),
        "no_trace_events": (
            gzip.compress(b'{"schemaVersion": 1, "events": []}'),
            "no traceEvents array (not a Kineto/chrome trace; its keys: 'schemaVersion', 'events')",
        ),
        "not_an_object": (gzip.compress(b"[1, 2, 3]"), "not a JSON object"),
        "events_not_array": (gzip.compress(b'{"traceEvents": {"a": 1}}'), "traceEvents is not an array"),
        "empty": (b"", "empty file"),
        "empty_gzip": (gzip.compress(b""), "no JSON content"),
        "garbage_after": (
            gzip.compress(b'{"traceEvents": []} xyz'), "invalid JSON: extra data after the top-level object"
        ),
        "bad_utf8": (gzip.compress(b'{"traceEvents": [{"name": "\xff\xfe"}]}'), "invalid JSON"),
    }
    out = {}
    for name, (data, msg) in cases.items():
        p = tmp / f"{name}.json.gz"
        p.write_bytes(data)
        out[name] = (p, msg)
    return out


@pytest.fixture()
def bad_files(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    return _bad_files(tmp_path)


@pytest.mark.parametrize(
    "case",
    [
        "truncated_gzip",
        "corrupt_gzip",
        "invalid_json",
        "truncated_json",
        "no_trace_events",
        "not_an_object",
        "events_not_array",
        "empty",
        "empty_gzip",
        "garbage_after",
        "bad_utf8",
    ],
)
def test_summary_bad_file_one_line_exit_2(bad_files, run_cli, case: str) -> None:  # type: ignore[no-untyped-def]
    path, msg = bad_files[case]
    rc, out, err = run_cli("summary", path)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1
    assert err.startswith(f"capture-trace: error: {path}: {msg}")


def test_missing_file_and_directory_as_trace(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    rc, _, err = run_cli("summary", tmp_path / "nope.json.gz")
    assert rc == 2 and err == f"capture-trace: error: {tmp_path / 'nope.json.gz'}: no such file\n"
    rc, _, err = run_cli("diff", tmp_path, VLLM)
    assert rc == 2 and err == f"capture-trace: error: {tmp_path}: not a regular file (a directory)\n"


def test_unreadable_file(tmp_path: Path) -> None:
    """A real EACCES even when tests run as root: a forked child drops to uid/gid 65534 (nobody) and
    reads a mode-000 file in a world-traversable directory."""
    import tempfile

    public = Path(tempfile.mkdtemp(prefix="capture-trace-eacces-"))
    try:
        public.chmod(0o755)
        p = public / "locked.json.gz"
        p.write_bytes(VLLM.read_bytes())
        p.chmod(0)
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # child: never returns into pytest
            message = "no error"
            try:
                if os.geteuid() == 0:  # a non-root run is refused by the mode alone
                    os.setgid(65534)
                    os.setuid(65534)
                load_record(str(p))
            except TraceError as exc:
                message = str(exc)
            except BaseException as exc:  # noqa: BLE001 - reported to the parent as text
                message = f"unexpected {type(exc).__name__}: {exc}"
            os.write(write_end, message.encode())
            os._exit(0)
        os.close(write_end)
        os.waitpid(pid, 0)
        with os.fdopen(read_end, "rb") as pipe:
            message = pipe.read().decode()
        assert message == f"{p}: permission denied"
    finally:
        for child in public.iterdir():
            child.unlink()
        public.rmdir()


def test_directory_without_traces(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / ".hidden.json.gz").write_bytes(b"x")  # dotfiles are temp files, not traces
    (tmp_path / "notes.txt").write_text("x")
    for cmd in ("ls", "check"):
        rc, out, err = run_cli(cmd, tmp_path)
        assert rc == 2 and out == ""
        assert err == f"capture-trace: error: {tmp_path}: no traces (*.json.gz or *.json) in this directory\n"
    rc, _, err = run_cli("check", tmp_path / "missing")
    assert rc == 2 and err == f"capture-trace: error: {tmp_path / 'missing'}: no such directory\n"


def test_ls_reports_bad_files_and_lists_the_rest(bad_files, run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "good.json.gz").write_bytes(VLLM.read_bytes())
    rc, out, err = run_cli("ls", tmp_path, "--json")
    assert rc == 2
    assert [Path(r["path"]).name for r in json.loads(out)["traces"]] == ["good.json.gz"]
    lines = err.splitlines()
    assert len(lines) == len(bad_files)
    assert all(line.startswith("capture-trace: error: ") for line in lines)


def test_no_traceback_in_a_real_process(tmp_path: Path) -> None:
    """Through a fresh interpreter, as a user would run it: stderr is the single error line."""
    bad = tmp_path / "cut.json.gz"
    data = VLLM.read_bytes()
    bad.write_bytes(data[: len(data) // 3])
    root = Path(__file__).resolve().parents[2]
    res = subprocess.run(
        command("analyzer_cli", "summary", bad),
        capture_output=True,
        text=True,
        cwd=root,
        env=child_env(),
        timeout=120,
    )
    assert res.returncode == 2
    assert (
        res.stderr
        == f"capture-trace: error: {bad}: truncated gzip stream (file ends before the end-of-stream marker)\n"
    )
    # the analyzer itself must not import torch
    res = subprocess.run(
        command("analyzer_imports_torch"),
        capture_output=True,
        text=True,
        cwd=root,
        env=child_env(),
        timeout=120,
    )
    assert res.stdout.strip() == "False"


def test_reader_error_is_picklable() -> None:
    import pickle

    err = pickle.loads(pickle.dumps(TraceError("a.json", "bad")))
    assert isinstance(err, TraceError) and str(err) == "a.json: bad" and err.message == "bad"


def test_load_record_raises_trace_error_only(bad_files) -> None:  # type: ignore[no-untyped-def]
    for path, _ in bad_files.values():
        with pytest.raises(TraceError):
            load_record(str(path))


@pytest.mark.parametrize("case", ["truncated_gzip", "corrupt_gzip"])
def test_stdlib_gzip_fallback_gives_the_same_errors(bad_files, run_cli, monkeypatch, case: str) -> None:  # type: ignore[no-untyped-def]
    """isal is optional: without it the stdlib gzip module reads, with the same messages."""
    from mixins.analysis.read import reader

    monkeypatch.setattr(reader, "_fast_gzip", None)
    path, msg = bad_files[case]
    rc, _, err = run_cli("summary", path)
    assert rc == 2 and err.startswith(f"capture-trace: error: {path}: {msg}")
    assert load_record(str(VLLM)).events == 131243
