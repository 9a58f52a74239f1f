"""Golden outputs: what every analyzer command prints with ``--json`` on every real trace we hold.

``record(folder)`` runs, in this process and with paths relative to ``folder`` (so the outputs do not
depend on where the checkout lives), ``ls``, ``summary``, ``time``, ``check`` and ``diff`` over the traces
there, ``attribute`` over each (replay, capture) pair, and ``report``'s three dicts; one key per command
line, its exit code and its parsed JSON. ``tests/analysis/golden.json`` holds the record of tests/data (and of
its NVIDIA-style pair, derived at test time by ``pairs.nvidia_pair``); ``test_golden.py`` holds every
tree to it. Run as a script to (re)record:

    .venv/bin/python -m tests.analysis.golden tests/data > tests/analysis/golden.json
    .venv/bin/python -m tests.analysis.golden OTHER_FOLDER > /tmp/other.json   # any folder of traces
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.analysis import pairs
from tests.analysis.inprocess import run_analyzer

GOLDEN = Path(__file__).resolve().parent / "golden.json"


@contextlib.contextmanager
def _inside(folder: Path) -> Iterator[None]:
    before = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def _traces(folder: Path) -> list[str]:
    """The trace files under ``folder`` (relative, sorted): ``*.json.gz`` and ``*trace*.json``."""
    found = [p for p in folder.rglob("*") if p.is_file() and (p.name.endswith(".json.gz") or
                                                              (p.suffix == ".json" and "trace" in p.name))]
    return sorted(str(p.relative_to(folder)) for p in found)


def _replays(traces: list[str]) -> list[str]:
    return [t for t in traces if "replay" in Path(t).name]


def command_lines(folder: Path) -> list[list[str]]:
    """Every command line recorded for ``folder``."""
    traces = _traces(folder)
    captures = [t for t in traces if t not in _replays(traces)]
    dirs = sorted({str(Path(t).parent) for t in traces})
    lines: list[list[str]] = [["ls", d] for d in dirs]
    for t in traces:
        lines += [["summary", t], ["time", t, "-j", "1"], ["check", t, "-j", "1"]]
    lines += [["check", d, "-j", "1"] for d in dirs]
    lines += [["time", d, "-j", "1"] for d in dirs]
    lines += [["diff", a, b] for a, b in zip(traces, traces[1:], strict=False)]
    lines += [["diff", t, t] for t in traces[:1]]
    for replay in _replays(traces):
        for capture in captures:
            lines.append(["attribute", replay, capture, "-j", "1"])
            lines.append(["attribute", replay, capture, "-j", "1", "--any-rank"])
        lines.append(["attribute", replay, *captures, "-j", "1", "--any-rank"])
        for group in ("module", "shape", "segment"):
            lines.append(["attribute", replay, *captures, "-j", "1", "--any-rank", "--group-by", group])
    return lines


def _run(argv: list[str]) -> dict[str, Any]:
    rc, out, err = run_analyzer(*argv, "--json")
    return {"rc": rc, "json": json.loads(out) if out.strip() else None, "stderr": err}


def _report(traces: list[str], replay: str | None) -> dict[str, Any]:
    from mixins.analysis.commands.report import report_dicts

    args = argparse.Namespace(traces=traces, replay=replay, any_rank=True, jobs=1)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        got = report_dicts(args)
    return {"rc": 0 if got is not None else 2, "json": None if got is None else list(got)}


def record(folder: Path) -> dict[str, Any]:
    """``folder``'s golden outputs: command line -> {rc, json}."""
    out: dict[str, Any] = {}
    with _inside(folder):
        for argv in command_lines(Path(".")):
            out[" ".join(argv)] = _run(argv)
        traces = _traces(Path("."))
        replays = _replays(traces)
        for d in sorted({str(Path(t).parent) for t in traces}):
            out[f"report {d}"] = _report([d], None)
        if replays:
            captures = [t for t in traces if "_capture" in Path(t).name]  # the replay's own capture
            out[f"report --replay {replays[0]} {' '.join(captures)}"] = _report(captures, replays[0])
    return out


def record_derived() -> dict[str, Any]:
    """The NVIDIA-style pair derived from the H100 trace (``pairs.nvidia_pair``), in a temporary folder."""
    capture, replay = pairs.nvidia_pair(pairs.load(pairs.H100), node_ids=True)
    with tempfile.TemporaryDirectory() as tmp:
        pairs.save(capture, Path(tmp) / "nvidia_capture.json.gz")
        pairs.save(replay, Path(tmp) / "nvidia_replay.json.gz")
        return {f"derived: {k}": v for k, v in record(Path(tmp)).items()}


def record_repo() -> dict[str, Any]:
    return {**record(pairs.DATA), **record_derived()}


if __name__ == "__main__":
    folder = Path(sys.argv[1]).resolve()
    got = record_repo() if folder == pairs.DATA.resolve() else record(folder)
    json.dump(got, sys.stdout, indent=0, sort_keys=True)
    sys.stdout.write("\n")
