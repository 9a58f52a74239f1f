"""Folders as users have them: TraceLens's ``execution_details.json`` beside the capture,
CSVs, configs — every command skips what is not a trace with one INFO line, and still fails (exit 2) on
a file whose name says it is a trace but which is broken."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from mixins.naming import SUBDIR
from tests.analysis.conftest import DATA, VLLM, dead_name
from tests.trace_files import op, write_trace

DETAILS = DATA / "vllm_decode_full_execution_details.json"
Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def tracelens_folder(tmp_path: Path) -> Path:
    """The layout ``attribute`` documents: capture, TraceLens's index, its CSV, a config."""
    shutil.copy(VLLM, tmp_path / VLLM.name)
    shutil.copy(DETAILS, tmp_path / "execution_details.json")
    (tmp_path / "ops_summary.csv").write_text("name,count\n")
    (tmp_path / "server_args.json").write_text(json.dumps({"model_path": "x", "tp_size": 1}))
    return tmp_path


@pytest.mark.parametrize("command", ["check", "ls", "summary", "time"])
def test_non_traces_in_a_folder_are_skipped_but_a_broken_trace_is_an_error(
    tracelens_folder: Path, tmp_path_factory: pytest.TempPathFactory, run_cli: Run, command: str
) -> None:
    """What is not a trace is one INFO line each; a file whose name says it is a trace but which is broken is
    still an error; a folder where every file was skipped is no result, not an empty success (a CI gate must
    not pass on it)."""
    rc, out, err = run_cli(command, tracelens_folder, "--json")
    assert rc == 0, err
    assert err.splitlines() == [
        f"capture-trace: info: {tracelens_folder / 'execution_details.json'}: skipped, not a trace "
        "(not a JSON object (a Kineto trace is an object with traceEvents))",
        f"capture-trace: info: {tracelens_folder / 'server_args.json'}: skipped, not a trace "
        "(no traceEvents array (not a Kineto/chrome trace; its keys: 'model_path', 'tp_size'))",
    ]
    doc = json.loads(out)
    paths = [t["path"] for t in doc["traces"]] if "traces" in doc else [p for g in doc["groups"] for p in g["paths"]]
    assert paths == [str(tracelens_folder / VLLM.name)]
    assert command != "check" or (doc["ok"] is True and doc["bad_files"] == [])
    broken = tracelens_folder / "cuda_graph_capture-DecodeCudaGraphRunner-TP-1.json.gz"
    broken.write_bytes(gzip.compress(b"[1, 2]"))
    rc, out, err = run_cli(command, tracelens_folder, "--json")
    assert rc == 2 and f"capture-trace: error: {broken}: not a JSON object" in err
    assert command != "check" or json.loads(out)["bad_files"] == [str(broken)]
    nothing = tmp_path_factory.mktemp("nothing")
    shutil.copy(DETAILS, nothing / "execution_details.json")
    (nothing / "server_args.json").write_text(json.dumps({"model_path": "x"}))
    rc, _, err = run_cli(command, nothing, "--json")
    assert rc == 2
    assert err.splitlines()[-1] == (
        f"capture-trace: error: {nothing}: no traces in this directory (2 JSON files skipped: not a trace)"
    )


@pytest.mark.parametrize(("name", "content", "said"), [
    ("server_args.json", None, ": no traceEvents array (not a Kineto/chrome trace; its keys: 'model_path', 'tp_size')"),
    ("missing.json.gz", b"", ": no such file"),
    ("cuda_graph_capture-X-TP-0.json.gz", b'{"traceEvents": []}',  # a JSON trace named .gz
     ": not gzip (the name ends in .gz, the file has no gzip header)"),
])
def test_a_bad_file_named_on_the_command_line_is_an_error(
    tracelens_folder: Path, run_cli: Run, name: str, content: bytes | None, said: str
) -> None:
    path = tracelens_folder / name
    if content:
        path.write_bytes(content)
    for command in ("ls", "summary"):
        rc, _, err = run_cli(command, path)
        assert (rc, err) == (2, f"capture-trace: error: {path}{said}\n")


def test_ls_check_then_clean_of_the_profiler_dir(tmp_path: Path, run_cli: Run) -> None:
    """sglang's profiler directory holds server_args.json beside graph_capture_profile/, where a capture is
    beside a staging directory of ours whose process is gone: ``ls`` and ``check`` of PROFDIR find the trace
    there, ``ls`` lists the staging directory (removes nothing), ``clean PROFDIR`` removes it as ``ls`` said."""
    (tmp_path / "server_args.json").write_text(json.dumps({"model_path": "x"}))
    sub = tmp_path / SUBDIR
    sub.mkdir()
    shutil.copy(VLLM, sub / VLLM.name)
    stale = dead_name(0x0A1B2C3D)
    os.mkdir(sub / stale, 0o700)
    rc, out, err = run_cli("check", tmp_path, "--json")
    assert (rc, err) == (0, "")
    assert [p for g in json.loads(out)["groups"] for p in g["paths"]] == [str(sub / VLLM.name)]
    rc, out, err = run_cli("ls", tmp_path, "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert [t["path"] for t in doc["traces"]] == [str(sub / VLLM.name)]
    assert [(t["name"], t["process_gone"], t["removed"]) for t in doc["temporaries"]] == [(stale, True, False)]
    assert (sub / stale).is_dir()  # listed, not removed
    rc, out, err = run_cli("clean", tmp_path, "--json")
    assert (rc, err) == (0, "")
    assert [(t["name"], t["removed"]) for t in json.loads(out)["temporaries"]] == [(stale, True)]
    assert not (sub / stale).exists() and (sub / VLLM.name).is_file()


def test_attribute_skips_what_is_not_a_trace_in_its_folders(
    tracelens_folder: Path, tmp_path: Path, run_cli: Run
) -> None:
    """As every other command: a config beside the capture, or beside the replay, is one INFO line."""
    replays = tmp_path / "replays"
    replays.mkdir()
    shutil.copy(DATA / "vllm_decode_full_graph_replay_rank_0.json.gz", replays)
    (replays / "config.json").write_text(json.dumps({"model": "x"}))
    rc, out, err = run_cli("attribute", replays, tracelens_folder, "--json")
    assert rc == 0, err
    assert json.loads(out)["coverage"]["graph_kernels_attributed"] == 421
    skipped = [line.split(": ")[2] for line in err.splitlines()]
    assert sorted(skipped) == [str(replays / "config.json"), str(tracelens_folder / "server_args.json")], err
    empty = tmp_path / "no-captures"
    empty.mkdir()
    (empty / "server_args.json").write_text("{}")
    rc, _, err = run_cli("attribute", replays, empty)
    assert rc == 2 and err.endswith(f"{empty}: no traces in this directory (1 JSON file skipped: not a trace)\n"), err


def test_attribute_over_a_replay_folder_still_shows_the_good_replays(tmp_path: Path, run_cli: Run) -> None:
    """One truncated replay is its one error line and exit 2; the good one is still attributed."""
    shutil.copy(DATA / "vllm_decode_full_graph_replay_rank_0.json.gz", tmp_path / "a.json.gz")
    (tmp_path / "b.json.gz").write_bytes(gzip.compress(b'{"traceEvents": [')[:-8])
    rc, out, err = run_cli("attribute", tmp_path, VLLM, "--json", "-j", "1")
    assert rc == 2
    assert json.loads(out)["replay"] == str(tmp_path / "a.json.gz")
    assert err.startswith(f"capture-trace: error: {tmp_path / 'b.json.gz'}: ") and err.count("\n") == 1, err


def test_check_compares_upstream_per_batch_size_files_size_by_size(tmp_path: Path, run_cli: Run) -> None:
    """Rank 0's bs=1 file was compared with rank 0's bs=2 file, and "2 traces claim TP rank 0": one group
    per batch size now, each with its ranks; a real divergence is still found in its own size. An upstream
    file has the ops and no metadata."""
    for rank in (0, 1):
        for bs in (1, 2):
            ops = ["aten::mm", "aten::relu"] + (["aten::extra"] if (rank, bs) == (1, 2) else [])
            write_trace(tmp_path / f"Decode_bs_{bs}_rank{rank}.json.gz",
                        [op(name, 10 * n, 5, **{"Input Dims": [[bs, 4]], "Input type": ["float"]})
                         for n, name in enumerate(ops)])
    rc, out, err = run_cli("check", tmp_path, "--json")
    groups = json.loads(out)["groups"]
    assert [(g["bs"], g["ranks"], g["ok"]) for g in groups] == [(1, [0, 1], True), (2, [0, 1], False)], err
    assert rc == 1 and groups[1]["problems"] == [] and groups[1]["divergences"][0]["rank"] == 1


def test_check_stops_at_the_first_path_it_cannot_list(tmp_path: Path, run_cli: Run) -> None:
    """Nothing is read or printed, and the paths after it are not listed: one line, not one per path."""
    rc, out, err = run_cli("check", tmp_path / "gone", tmp_path / "gone too", VLLM)
    assert (rc, out, err) == (2, "", f"capture-trace: error: {tmp_path / 'gone'}: no such directory\n")
