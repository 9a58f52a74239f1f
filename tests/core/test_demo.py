"""``capture-trace demo``: run once for the module (a real CPU capture with four runners), then read."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from core_helpers import capture_trace, load_trace, run_case, subprocess_env

from mixins.demo import KINETO_INFO_LINE
from tests.readme_examples import assert_shows, examples

RUNNERS = ("DecodeCudaGraphRunner", "EAGLEDraftCudaGraphRunner", "EAGLEDraftExtendCudaGraphRunner")
PREFILL = "PrefillCudaGraphRunner"  # no profiler of its own: the decorator's profile mode


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """The demo command as the README runs it (``--device auto``, which is the CPU here), once per module."""
    out = tmp_path_factory.mktemp("demo") / "demo-out"
    env = subprocess_env()
    env.pop("SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE", None)  # the demo switches it on for itself
    done = capture_trace("demo", "--out", str(out), env=env)
    assert done.returncode == 0, done.stderr
    return out, done


def test_demo_says_what_it_does_and_is_quiet(demo: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    import torch

    _, done = demo
    assert "SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE=1" in done.stdout
    if not torch.cuda.is_available():
        assert "capture-trace demo: device cpu (eager passes: no CUDA graphs), picked by --device auto: " \
            "torch.cuda.is_available() is False\n" in done.stdout
    assert not [line for line in done.stderr.splitlines() if KINETO_INFO_LINE.match(line.encode())], done.stderr
    assert "profiler_start" not in done.stderr and "profiler_stop" not in done.stderr


def test_kineto_info_lines_are_filtered_at_the_descriptor_and_nothing_else(tmp_path: Path) -> None:
    done = run_case("kineto_filter")
    inside, outside = done.stderr.split("\n--- outside ---\n")
    ours = [line for line in inside.splitlines() if "kept:" in line]
    assert ours == [
        "WARNING:2026-12-01 19:13:47 4920:4920 CuptiActivityApi.cpp:1] kept: a Kineto warning",
        "kept: not Kineto's",
        "kept: USDT:not at the start of a line",
        "kept: through sys.stderr",
        "kept: unterminated",
    ]
    # and what this torch's Kineto itself said at WARNING / ERROR passes through too (torch 2.7.1 on a
    # machine without a GPU: "ERROR:… DeviceProperties.cpp:47] gpuGetDeviceCount failed with code 35")
    theirs = [line for line in inside.splitlines() if "kept:" not in line]
    assert all(re.match(r"^(WARNING|ERROR):\d{4}-\d\d-\d\d [\d:]+ \d+:\d+ \S+\] ", line) for line in theirs), theirs
    # outside the filter this torch's own Kineto lines (when it prints any) are what the filter matches
    assert all(KINETO_INFO_LINE.match(line.encode()) for line in outside.splitlines()), outside


def test_demo_command_writes_one_labelled_trace_per_runner(
    demo: tuple[Path, subprocess.CompletedProcess[str]]
) -> None:
    out, done = demo
    directory = out / "graph_capture_profile"
    expected = sorted(f"cuda_graph_capture-{r}-TP-0.json.gz" for r in (*RUNNERS, PREFILL))
    assert sorted(p.name for p in directory.iterdir()) == expected
    for runner in RUNNERS:
        path = directory / f"cuda_graph_capture-{runner}-TP-0.json.gz"
        assert str(path) in done.stdout and "events" in done.stdout
        trace = load_trace(path)
        meta = trace["capture_trace"]
        assert (meta["runner"], meta["capture_bs"], meta["capture_index"]) == (runner, [1, 2, 4, 8], 1)
        assert meta["runner_class"] == f"mixins.demo_runners.{runner}"
        labels = [e["name"] for e in trace["traceEvents"] if e.get("cat") == "user_annotation"]
        assert sorted(labels) == ["capture::bs=1", "capture::bs=2", "capture::bs=4", "capture::bs=8"]
        hidden = 64 if runner == "DecodeCudaGraphRunner" else 32
        linear_inputs = [e["args"]["Input Dims"][0] for e in trace["traceEvents"] if e.get("name") == "aten::linear"]
        assert [8, hidden] in linear_inputs and [1, hidden] in linear_inputs
    prefill = load_trace(directory / f"cuda_graph_capture-{PREFILL}-TP-0.json.gz")  # profile mode
    assert prefill["capture_trace"]["runner"] == PREFILL and prefill["capture_trace"]["capture_bs"] is None
    labels = [e["name"] for e in prefill["traceEvents"] if e.get("cat") == "user_annotation"]
    assert labels == [f"capture::tokens={16 * bs}" for bs in (8, 4, 2, 1)]  # 16 tokens per batch, largest first
    linear_inputs = [e["args"]["Input Dims"][0] for e in prefill["traceEvents"] if e.get("name") == "aten::linear"]
    assert [128, 64] in linear_inputs and [16, 64] in linear_inputs


def test_the_committed_demo_traces_are_what_the_demo_writes(demo: tuple[Path, subprocess.CompletedProcess[str]]
) -> None:
    """tests/data/demo, which the analyzer's tests read without torch, has the runners, metadata keys and
    ops of a fresh run: when this fails, remake it (tests/data/PROVENANCE.md)."""
    fresh = demo[0] / "graph_capture_profile"
    committed = Path(__file__).resolve().parents[1] / "data" / "demo"
    assert sorted(p.name for p in committed.iterdir()) == sorted(p.name for p in fresh.iterdir())
    for path in fresh.iterdir():
        new, old = load_trace(path), load_trace(committed / path.name)
        assert new["capture_trace"].keys() == old["capture_trace"].keys(), path.name
        ops = [{e["name"] for e in t["traceEvents"] if e.get("cat") == "cpu_op"} for t in (new, old)]
        assert ops[0] == ops[1], path.name


@pytest.mark.parametrize(("argv", "redirected", "shown"), [
    pytest.param(*example, id=" ".join(example[0][:1])) for example in examples() if "demo-out" in str(example[0])
])
def test_the_readme_examples_on_the_demo_are_the_real_output(
    demo: tuple[Path, subprocess.CompletedProcess[str]], argv: list[str], redirected: bool, shown: list[str]
) -> None:
    """Each README example on ``demo-out``, re-run beside the README's demo (tests/data's: test_cli_text.py)."""
    assert_shows(argv, redirected, shown, demo[0].parent)


@pytest.mark.parametrize(("args", "stderr"), [
    (["--batch-sizes", "1,x"], "capture-trace demo: error: argument --batch-sizes: expected comma-separated positive "
     "integers, got '1,x'"),
    (["--device", "cuda"], "capture-trace: error: --device cuda requested but torch.cuda.is_available() is False"),
    (["--device", "cpu", "--replay", "2"], "capture-trace: error: --replay needs CUDA graphs: run with --device cuda "
     "on a machine with a GPU\n"),
    (["--out", "{afile}/x"], "capture-trace: error: --out {afile}/x: {afile} is not a directory\n"),
])
def test_demo_refuses_bad_input_in_one_line_before_capturing(tmp_path: Path, args: list[str], stderr: str) -> None:
    """Exit 2 and nothing captured or created: an ``--out`` under a file was captured for minutes, then said
    "expected 4 traces, found 0" (exit 1), and now prints nothing before its one line (the device line comes
    after the check); no GPU here, so ``--replay`` refuses. An expected stderr ending in a newline is all of it,
    else its last line."""
    import torch

    if args[1] == "cuda" and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    afile = tmp_path / "afile"
    afile.write_text("")
    out = tmp_path / "demo"
    done = capture_trace("demo", "--out", str(out), *(arg.format(afile=afile) for arg in args))
    stderr = stderr.format(afile=afile)
    assert done.returncode == 2 and not out.exists()
    assert done.stderr == stderr if stderr.endswith("\n") else done.stderr.splitlines()[-1] == stderr, done.stderr
    assert done.stdout == "" or args[0] != "--out"  # under a file: refused before anything is printed


def test_demo_never_reports_a_previous_runs_traces_as_its_own(
    demo: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    """Every export of a second run into the same directory refused (it was made world-writable): the
    demo listed the first run's four files and exited 0. Only files this run wrote count now."""
    import os
    import shutil

    first, _ = demo
    out = tmp_path / "again"
    shutil.copytree(first, out)
    os.chmod(out / "graph_capture_profile", 0o777)
    env = subprocess_env()
    env.pop("SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE", None)
    done = capture_trace("demo", "--out", str(out), "--batch-sizes", "1", env=env)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "capture-trace: error: expected 4 traces, found 0"
    assert ".json.gz  " not in done.stdout  # no file listed as written
