from __future__ import annotations

import gzip
import json
import logging
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from core_child import CONCURRENT_RUNNERS
from core_helpers import (
    child,
    child_env,
    export_env,
    export_mm,
    load_trace,
    mm_profile,
    op_shapes,
    run_case,
    warnings_of,
)

from mixins import export_cuda_graph_capture_trace, wait_for_exports
from mixins.export import IncompleteTraceError


def _names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


def test_import_and_switched_off_call_import_nothing_heavy_and_create_nothing(tmp_path: Path) -> None:
    """Switch unset, then "0": the export is a no-op that returns None."""
    env = child_env(SGLANG_TORCH_PROFILER_DIR=str(tmp_path))
    env.pop("SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE", None)
    out = run_case("switched_off_imports", env=env).stdout
    assert out.strip() == "[]"
    assert list(tmp_path.iterdir()) == []


def test_export_writes_complete_gzip_trace_with_metadata(trace_env: Path, caplog: pytest.LogCaptureFixture) -> None:
    prof = mm_profile(1, 5)
    with caplog.at_level(logging.INFO, logger="sglang.capture_trace"):  # the "saved to" line's logger
        path = export_cuda_graph_capture_trace(prof, runner_name="MyRunner", tp_rank=3)
        assert wait_for_exports(60)
    assert path == trace_env / "cuda_graph_capture-MyRunner-TP-3.json.gz"
    assert _names(trace_env) == [path.name]  # no temporaries left behind
    trace = load_trace(path)
    assert op_shapes(trace) == [[[5, 8], [8, 3]]]
    meta = trace["capture_trace"]
    assert list(trace)[0] == "capture_trace"
    assert (meta["runner"], meta["tp_rank"], meta["pp_rank"], meta["pp_size"], meta["capture_index"]) == (
        "MyRunner", 3, 0, 1, 1,
    )
    assert meta["rank_source"] == "explicit" and meta["pid"] == os.getpid()
    assert meta["torch_version"] and meta["package_version"] == "0.1.0" and meta["time_utc"].endswith("+00:00")
    assert trace["traceName"] == str(path)  # not the temporary file Kineto wrote
    for key in ("schemaVersion", "deviceProperties", "traceEvents", "displayTimeUnit"):
        assert key in trace
    assert f"CUDA graph capture trace saved to: {path}" in caplog.text
    assert os.stat(path).st_mode & 0o777 == 0o644


def test_same_events_as_torchs_own_gzip_export(trace_env: Path, tmp_path: Path) -> None:
    """Two identical workloads under ``torch.profiler.profile`` (whose export gzips a ``.json.gz`` path): one
    exported by torch, one by us; events match one for one."""
    import torch

    def profile() -> Any:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
            torch.mm(torch.ones(6, 8), torch.ones(8, 3))
        return prof

    theirs_path = tmp_path / "torch.json.gz"
    profile().export_chrome_trace(str(theirs_path))
    ours_path = export_cuda_graph_capture_trace(profile(), runner_name="R", tp_rank=0)
    assert ours_path is not None and wait_for_exports(60)

    def comparable(path: Path) -> list[tuple[object, ...]]:
        with gzip.open(path, "rt") as handle:
            events = json.load(handle)["traceEvents"]
        keep = []
        for e in events:
            args = e.get("args", {})
            keep.append((e.get("ph"), e.get("cat"), e.get("name"), json.dumps(args.get("Input Dims")),
                         json.dumps(args.get("Input type"))))
        return sorted(keep, key=repr)

    assert comparable(ours_path) == comparable(theirs_path)


def test_pipeline_parallel_names_and_repeated_captures(trace_env: Path) -> None:
    paths = [export_mm("R", tp_rank=1, pp_rank=1, pp_size=2) for _ in range(3)]
    paths.append(export_mm("R", tp_rank=1))
    assert wait_for_exports(60)
    assert [p.name for p in paths if p] == [
        "cuda_graph_capture-R-TP-1-PP-1.json.gz",
        "cuda_graph_capture-R-TP-1-PP-1-2.json.gz",
        "cuda_graph_capture-R-TP-1-PP-1-3.json.gz",
        "cuda_graph_capture-R-TP-1.json.gz",
    ]
    assert [load_trace(p)["capture_trace"]["capture_index"] for p in paths if p] == [1, 2, 3, 1]


def test_a_file_left_by_an_earlier_process_is_replaced(trace_env: Path) -> None:
    trace_env.mkdir(parents=True)
    stale = trace_env / "cuda_graph_capture-Fresh-TP-0.json.gz"
    stale.write_bytes(b"from an earlier process")
    path = export_mm("Fresh", 3)
    assert wait_for_exports(60)
    assert path == stale and op_shapes(load_trace(path)) == [[[3, 8], [8, 3]]]


def test_profile_already_exported_is_a_warning_not_a_crash(
    trace_env: Path, caplog: pytest.LogCaptureFixture
) -> None:
    prof = mm_profile(1, 2)
    assert export_cuda_graph_capture_trace(prof, runner_name="Twice", tp_rank=0) is not None
    with caplog.at_level(logging.WARNING, logger="mixins"):
        assert export_cuda_graph_capture_trace(prof, runner_name="Twice", tp_rank=0) is None
    assert wait_for_exports(60)
    assert "Trace is already saved" in caplog.text
    assert _names(trace_env) == ["cuda_graph_capture-Twice-TP-0.json.gz"]


@pytest.mark.parametrize(("runner_name", "kwargs", "warning"), [
    ("../escape", {"tp_rank": None}, "runner_name must be"),
    ("R", {"tp_rank": -2}, "tp_rank must be an integer >= 0"),
    ("x\n\x00y", {}, "CUDA graph capture trace of x\\n\\x00y not saved"),
    ("R" * 224, {}, "trace file name is 256 bytes, over the directory's 255-byte limit for a name: "
     "runner_name has 224 characters, at most 223 fit"),
])
def test_bad_input_is_one_warning_line_and_writes_nothing(
    trace_env: Path, caplog: pytest.LogCaptureFixture, runner_name: str, kwargs: dict[str, Any], warning: str
) -> None:
    """A bad name or rank is refused before the directory is made; a name over the directory's limit once
    it is open (``test_reliability::test_runner_names_up_to_the_final_name_limit_work``: the one that fits)."""
    with caplog.at_level(logging.WARNING, logger="mixins"):
        assert export_mm(runner_name, **kwargs) is None
    [message] = warnings_of(caplog)
    assert warning in message and "\n" not in message and "\x00" not in message
    assert _names(trace_env) == [] and trace_env.exists() == warning.startswith("trace file name")


@pytest.mark.parametrize("background", ["1", pytest.param("0", marks=pytest.mark.exhaustive)])  # CI runs both
def test_file_size_limit_efbig_leaves_no_file_and_warns(tmp_path: Path, background: str) -> None:
    """Kineto swallows EFBIG and leaves truncated JSON; we detect it and write nothing under the final name."""
    env = child_env(
        SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE="1",
        SGLANG_TORCH_PROFILER_DIR=str(tmp_path),
        SGLANG_CAPTURE_TRACE_BACKGROUND=background,
    )
    env.pop("SGLANG_CAPTURE_TRACE_STRICT", None)
    done = run_case("efbig", str(tmp_path), env=env)
    assert "waited True" in done.stdout
    warnings = [line for line in done.stderr.splitlines() if line.startswith("WARNING")]
    assert len(warnings) == 1, done.stderr
    assert "Big" in warnings[0] and "cuda_graph_capture-Big-TP-0.json.gz" in warnings[0]
    assert IncompleteTraceError.__name__ in warnings[0] or "File too large" in warnings[0]
    assert "trace saved to:" not in done.stderr
    assert list((tmp_path / "graph_capture_profile").iterdir()) == []
    if background == "0":  # the failure is known before the call returns
        assert "returned None" in done.stdout


@pytest.mark.parametrize("exit_timeout", [None, "inf"])
def test_background_export_completes_before_interpreter_exit(tmp_path: Path, exit_timeout: str | None) -> None:
    """The child exits at once: the exit hook must wait for the compression thread. ``EXIT_TIMEOUT=inf`` made
    threading._shutdown raise OverflowError (file lost, staging left): one WARNING, and the default applies."""
    timeout = {} if exit_timeout is None else {"SGLANG_CAPTURE_TRACE_EXIT_TIMEOUT": exit_timeout}
    done = run_case("export_then_exit", env=export_env(tmp_path, **timeout))
    assert "Traceback" not in done.stderr, done.stderr
    warned = done.stderr.count("Invalid value 'inf' for SGLANG_CAPTURE_TRACE_EXIT_TIMEOUT")
    assert warned == (0 if exit_timeout is None else 1), done.stderr
    path = Path(done.stdout.strip())
    assert len(op_shapes(load_trace(path))) == 2000
    assert _names(path.parent) == [path.name]


@pytest.mark.parametrize(
    "ranks", [1, pytest.param(8, marks=pytest.mark.exhaustive)], ids=lambda n: f"{3 * n}-processes"
)
def test_processes_export_into_one_directory_at_once(tmp_path: Path, ranks: int) -> None:
    """Three runners on ``ranks`` TP ranks each export at the same moment, each in its own process (3 by
    default; the full 24, TP 8, under the ``exhaustive`` marker; ``core_child.concurrent_exports`` forks
    them from one interpreter): each says ``ready`` once profiled, then all wake at once when the test
    closes the write end of the pipe they block on."""
    env = export_env(tmp_path)
    go_r, go_w = os.pipe()
    runners = list(CONCURRENT_RUNNERS)
    try:
        proc = subprocess.Popen(child("concurrent_exports", str(ranks), str(go_r)), env=env, pass_fds=(go_r,),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    finally:
        os.close(go_r)
    try:  # one that dies first stops them all: end of stdout (""), never a hang
        assert proc.stdout is not None
        readies = [proc.stdout.readline() for _ in range(len(runners) * ranks)]
    finally:
        os.close(go_w)  # the go (or, after a failure, the end: the others stop at their read too)
    _, errors = proc.communicate(timeout=300)
    assert readies == ["ready\n"] * len(readies) and proc.returncode == 0, (readies, errors[-3000:])
    directory = tmp_path / "graph_capture_profile"
    expected = sorted(f"cuda_graph_capture-{r}-TP-{k}.json.gz" for r in runners for k in range(ranks))
    assert _names(directory) == expected
    for runner in runners:
        for rank in range(ranks):
            trace = load_trace(directory / f"cuda_graph_capture-{runner}-TP-{rank}.json.gz")
            rows = 1 + rank + 10 * runners.index(runner)
            assert op_shapes(trace) == [[[rows, 8], [8, 3]]] * 200
            assert (trace["capture_trace"]["runner"], trace["capture_trace"]["tp_rank"]) == (runner, rank)


def test_exit_waits_only_as_long_as_the_exit_timeout(tmp_path: Path) -> None:
    env = export_env(tmp_path, SGLANG_CAPTURE_TRACE_EXIT_TIMEOUT="0", SGLANG_CAPTURE_TRACE_GZIP_LEVEL="9")
    done = run_case("slow_export_then_exit", env=env)
    assert "still compressing, not saved: cuda_graph_capture-Slow-TP-0.json.gz" in done.stderr
    assert "trace saved to:" not in done.stderr
    assert os.listdir(tmp_path / "graph_capture_profile") == []  # neither the trace nor its staging directory


def test_a_forked_child_leaves_its_parents_export_alone(tmp_path: Path) -> None:
    """A multiprocessing child forked mid-compression inherits the exports but not their threads: it
    forgets them at the fork and exits at once (not after the exit timeout), and the parent's trace is saved."""
    done = run_case("fork_while_compressing", env=export_env(tmp_path, SGLANG_CAPTURE_TRACE_EXIT_TIMEOUT="3600"))
    exitcode, path = done.stdout.split()
    assert exitcode == "0" and "not saved" not in done.stderr, done.stderr
    assert load_trace(path)["traceEvents"]
    assert os.listdir(tmp_path / "graph_capture_profile") == [os.path.basename(path)]


def test_no_thread_to_be_had_exports_inline(tmp_path: Path) -> None:
    """A container's pids limit reached (Thread.start raises): the export and a lazy runner's publisher run
    inline and their files are saved."""
    done = run_case("no_thread_to_be_had", env=export_env(tmp_path))
    eager, lazy = done.stdout.split()
    assert load_trace(eager)["traceEvents"] and load_trace(lazy)["traceEvents"]
    assert sorted(os.listdir(tmp_path / "graph_capture_profile")) == sorted(map(os.path.basename, (eager, lazy)))


def test_wait_for_exports_takes_an_infinite_timeout(trace_env: Path) -> None:
    """``timeout=inf`` waits without a bound (thread.join would raise OverflowError); nan is refused."""
    path = export_mm("Forever")
    assert wait_for_exports(float("inf")) and path is not None and load_trace(path)
    with pytest.raises(ValueError, match="got nan"):
        wait_for_exports(float("nan"))


SGLANG_PROGRESS = "Capture cuda graph begin."
SAVED = "CUDA graph capture trace saved to: "


@pytest.mark.parametrize(("mode", "prefix"), [("default", r"\[[0-9-]+ [0-9:,]+ TP0\] "), ("dict", "sglang-log ")])
def test_saved_line_goes_where_sglangs_capture_lines_go(tmp_path: Path, mode: str, prefix: str) -> None:
    """``default``: sglang's own configuration (basicConfig on the root at --log-level info); ``dict``:
    SGLANG_LOGGING_CONFIG_PATH routing the ``sglang`` logger to a handler of its own (dictConfig disables
    loggers outside the tree it names). Either way its capture-progress line and ours in the server's log."""
    config = tmp_path / "logging.json"
    config.write_text(json.dumps({
        "version": 1,
        "formatters": {"plain": {"format": "sglang-log %(message)s"}},
        "handlers": {"out": {"class": "logging.StreamHandler", "formatter": "plain", "stream": "ext://sys.stdout"}},
        "loggers": {"sglang": {"handlers": ["out"], "level": "INFO", "propagate": False}},
    }))
    done = subprocess.run(child("sglang_logging_export", mode, str(config)), capture_output=True, text=True,
                          timeout=300, env=export_env(tmp_path, SGLANG_CAPTURE_TRACE_BACKGROUND="0"))
    assert done.returncode == 0, done.stderr
    for line in (SGLANG_PROGRESS, SAVED):
        assert re.search("^" + prefix + re.escape(line), done.stdout, re.M), done.stdout
