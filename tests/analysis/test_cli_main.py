"""The analyzer's sub-commands through the console script's own entry point, ``mixins.cli.main``
(the other tests build their own parser from ``add_commands``; this checks the real wiring)."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from mixins.cli import main


def run_main(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_each_analyzer_command_through_main(cpu_traces: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_main(capsys, "ls", cpu_traces["same"], "--json")
    assert rc == 0 and err == ""
    assert [t["tp_rank"] for t in json.loads(out)["traces"]] == [0, 1]
    rc, out, _ = run_main(capsys, "summary", cpu_traces["r0"], "--json", "--top", "2")
    assert rc == 0 and [s["label"] for s in json.loads(out)["traces"][0]["segments"]] == ["bs=1", "bs=4", "(outside)"]
    assert run_main(capsys, "diff", cpu_traces["r0"], cpu_traces["r1"])[0] == 0
    assert run_main(capsys, "diff", cpu_traces["r0"], cpu_traces["r1_bad"])[0] == 1
    assert run_main(capsys, "check", cpu_traces["same"], "-j", "1")[0] == 0
    rc, out, _ = run_main(capsys, "check", cpu_traces["diverged"], "-j", "1")
    assert rc == 1 and out


def test_bad_input_and_usage_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_main(capsys, "summary", tmp_path / "missing.json.gz")
    assert rc == 2 and out == "" and err.startswith("capture-trace: error: ")
    for argv in ([], ["no-such-command"]):  # no command, an unknown one
        with pytest.raises(SystemExit) as usage:
            main(argv)
        assert usage.value.code == 2
    capsys.readouterr()


def test_doctor_is_wired(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE", raising=False)
    rc, out, _ = run_main(capsys, "doctor", "--no-import")
    assert rc == 1  # the switch is off
    assert "activation routes" in out and "problem: SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE is unset" in out


def test_memory_reads_each_snapshot_as_every_command_reads_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A snapshot that passes the layout check but holds a time no float can hold (an int of 400 digits) is
    that file's one line, and the next snapshot is still reported (``jobs.run_one``): it was a traceback."""
    good = {"segments": [], "device_traces": [[{"action": "alloc", "size": 512, "time_us": 1}]]}
    bad = {"segments": [], "device_traces": [[{"action": "alloc", "size": 512, "time_us": 10**400}]]}
    paths = [tmp_path / f"cuda_graph_memory-R-TP-{rank}.pickle" for rank in (0, 1)]
    for path, snapshot in zip(paths, (bad, good), strict=True):
        path.write_bytes(pickle.dumps(snapshot))
    rc, out, err = run_main(capsys, "memory", tmp_path, "--json")
    assert rc == 2 and [s["path"] for s in json.loads(out)["snapshots"]] == [str(paths[1])]
    assert err == (f"capture-trace: error: {paths[0]}: cannot analyse "
                   "(OverflowError: int too large to convert to float); please report this\n")
