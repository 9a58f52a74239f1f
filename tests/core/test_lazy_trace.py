"""Lazy captures (docs/DESIGN.md §5.1): a runner that captures one graph per new input shape while serving
gets one file per class and rank, re-published with every shape so far. A real CPU ``torch.profiler``,
real files; the runner below stands in for sglang's vision-encoder runners (tests/sglang drives the real
classes)."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest
import wrapt
from core_helpers import export_env, load_trace, python_calls, run_case, warnings_of

from mixins import lazy_trace, wait_for_exports
from mixins.capture_trace import profile_lazy_capture
from mixins.patching import wrap_method
from tests.trace_files import range_names


def _vit_shape(args: Any) -> tuple[tuple[str, int], ...]:
    return (("tokens", int(args["x"].shape[0])), ("images", int(args["images"])))


class LazyRunner:
    """Captures a "graph" (a CPU matmul) the first time it sees a sequence length, as sglang's ViT runners."""

    def __init__(self) -> None:
        self.graphs: dict[int, Any] = {}

    def run(self, x: Any, images: int = 1) -> Any:
        if x.shape[0] not in self.graphs:
            self.create_graph(x, images)
        return self.graphs[x.shape[0]]

    def create_graph(self, x: Any, images: int = 1) -> int:
        import torch

        if x.shape[0] in self.graphs:
            return x.shape[0]
        self.graphs[x.shape[0]] = torch.mm(x, torch.ones(x.shape[1], 4))
        return x.shape[0]


NAME = "cuda_graph_capture-LazyRunner-TP-0.json.gz"


@pytest.fixture
def wrapped() -> Any:
    handle = wrap_method(LazyRunner, "create_graph", profile_lazy_capture(lambda runner: True, _vit_shape, "graphs"),
                         tag="test_lazy")
    assert handle is not None
    yield LazyRunner
    wrapt.unwrap_object(LazyRunner, "create_graph", handle)


def _ones(n: int) -> Any:
    import torch

    return torch.ones(n, 8)


def _trace(directory: Path) -> dict[str, Any]:
    assert wait_for_exports(60)
    return load_trace(directory / NAME)


def _files(directory: Path) -> list[str]:
    assert wait_for_exports(60)
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


@pytest.mark.parametrize("background", ["1", "0"])
def test_two_shapes_one_file_two_segments(
    background: str, trace_env: Path, wrapped: type, profilers_started: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each new shape is profiled on its own and the one file is re-published holding every shape so far;
    a known shape (replay) starts no profiler and adds nothing."""
    monkeypatch.setenv("SGLANG_CAPTURE_TRACE_BACKGROUND", background)
    runner = wrapped()
    runner.run(_ones(16), images=2)
    assert _files(trace_env) == [NAME]
    assert range_names(_trace(trace_env)) == ["capture::tokens=16,images=2"]
    runner.run(_ones(16), images=2)  # replay: nothing new
    runner.run(_ones(64))
    assert _files(trace_env) == [NAME]
    trace = _trace(trace_env)
    assert range_names(trace) == ["capture::tokens=16,images=2", "capture::tokens=64,images=1"]
    assert len(profilers_started) == 2 and all(p["record_shapes"] for p in profilers_started)
    meta = trace["capture_trace"]
    assert (meta["runner"], meta["capture_index"], meta["capture_shapes"], meta["shapes_not_profiled"]) == (
        "LazyRunner", 1, 2, 0)
    mm = [e["args"]["Input Dims"] for e in trace["traceEvents"] if e.get("name") == "aten::mm"]
    assert sorted(d[0][0] for d in mm) == [16, 64]  # each shape's own ops, record_shapes
    assert trace["traceName"] == str(trace_env / NAME)


def test_a_call_that_captures_nothing_is_not_kept(trace_env: Path, wrapped: type) -> None:
    """create_graph called for a known shape returns early: no segment (the runner's graphs did not grow)."""
    runner = wrapped()
    runner.run(_ones(8))
    runner.create_graph(_ones(8))
    assert range_names(_trace(trace_env)) == ["capture::tokens=8,images=1"]


def test_limit_on_shapes(
    trace_env: Path, wrapped: type, profilers_started: list[Any], monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Past MAX_SHAPES a capture runs without our profiler; the file keeps the first shapes and, re-published
    once at the first refusal, says that shapes are missing; one INFO line."""
    monkeypatch.setattr(lazy_trace, "MAX_SHAPES", 2)
    monkeypatch.setenv("SGLANG_CAPTURE_TRACE_BACKGROUND", "0")
    runner = wrapped()
    with caplog.at_level(logging.INFO, logger="mixins"):
        runner.run(_ones(4))
        runner.run(_ones(8))
        runner.create_graph(_ones(4))  # past the limit, a known shape: no capture, not counted as missing
        assert runner.graphs.keys() == {4, 8} and caplog.text.count("later captures are not profiled") == 0
        for n in (12, 16, 20):
            runner.run(_ones(n))
    assert wait_for_exports(60)
    trace = _trace(trace_env)
    assert [label.split(",")[0] for label in range_names(trace)] == ["capture::tokens=4", "capture::tokens=8"]
    assert len(profilers_started) == 2 and sorted(runner.graphs) == [4, 8, 12, 16, 20]
    assert caplog.text.count("later captures are not profiled") == 1
    assert trace["capture_trace"]["shapes_not_profiled"] == 1  # as of the last publish: the first refusal
    before = (trace_env / NAME).stat().st_ino
    runner.run(_ones(24))  # later refusals cost no publish
    assert (trace_env / NAME).stat().st_ino == before


def test_limit_on_event_bytes(trace_env: Path, wrapped: type, monkeypatch: pytest.MonkeyPatch) -> None:
    """A shape whose events would pass MAX_EVENT_BYTES is dropped; later captures are not profiled."""
    monkeypatch.setenv("SGLANG_CAPTURE_TRACE_BACKGROUND", "0")
    runner = wrapped()
    runner.run(_ones(4))
    monkeypatch.setattr(lazy_trace, "MAX_EVENT_BYTES", 1)
    runner.run(_ones(8))
    runner.run(_ones(12))
    trace = _trace(trace_env)
    assert range_names(trace) == ["capture::tokens=4,images=1"]
    assert trace["capture_trace"]["shapes_not_profiled"] == 1  # 8 dropped (re-published once); 12 not profiled


@pytest.mark.parametrize("off", ["switch", "flag"])
def test_off_is_a_straight_call(
    trace_env: Path, profilers_started: list[Any], monkeypatch: pytest.MonkeyPatch, off: str
) -> None:
    """Our switch off, or --enable-profile-cuda-graph off (``requested()`` False): every Python function of ours
    called on the capture path is the wrapper core or the instance binding — no profiler, lazy trace or
    exporter — and no file."""
    if off == "switch":
        monkeypatch.setenv("SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE", "0")
    wrapper = profile_lazy_capture(lambda runner: off == "switch", _vit_shape, "graphs")
    handle = wrap_method(LazyRunner, "create_graph", wrapper, tag="test_lazy_off")
    assert handle is not None
    try:
        runner = LazyRunner()
        runner.run(_ones(2))
        called = python_calls(lambda: runner.run(_ones(3)))
    finally:
        wrapt.unwrap_object(LazyRunner, "create_graph", handle)
    ours = {c.rsplit(":", 1)[1] for c in called if "/mixins/" in c}
    assert ours <= {"capture_wrapper", "bind_instance"}, ours
    assert not any("torch/profiler" in c or "mixins/lazy_trace" in c or "mixins/export" in c for c in called), called
    assert profilers_started == [] and _files(trace_env) == []


def test_nested_profiler_gets_the_range_and_we_write_nothing(
    trace_env: Path, wrapped: type, caplog: pytest.LogCaptureFixture
) -> None:
    import torch

    with caplog.at_level(logging.DEBUG, logger="mixins"):
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as outer:
            wrapped().run(_ones(5))
    assert _files(trace_env) == []
    assert "already recording in this process" in caplog.text
    assert "capture::tokens=5,images=1" in {e.name for e in outer.events()}


def test_failures_are_logged_never_raised(
    trace_env: Path, wrapped: type, caplog: pytest.LogCaptureFixture
) -> None:
    """The output directory cannot exist (its parent is a regular file): the capture still returns its
    result, one WARNING names the runner; the method's own exception passes through untouched."""
    trace_env.parent.joinpath("graph_capture_profile").write_text("not a directory")
    runner = wrapped()
    with caplog.at_level(logging.WARNING, logger="mixins"):
        assert runner.run(_ones(6)).shape == (6, 4)
    assert wait_for_exports(60)
    assert "CUDA graph capture trace of LazyRunner not saved" in caplog.text

    class Broken(LazyRunner):
        def create_graph(self, x: Any, images: int = 1) -> int:
            raise RuntimeError("capture failed")

    assert wrap_method(Broken, "create_graph", profile_lazy_capture(lambda runner: True, _vit_shape), tag="t")
    with pytest.raises(RuntimeError, match="capture failed"):
        Broken().run(_ones(7))


def test_two_threads_capturing_at_once_start_one_profiler(tmp_path: Path) -> None:
    """Kineto records one profiler per process: the second thread's capture runs unprofiled, the first is
    the file's one segment (a second profiler crashed torch 2.13)."""
    done = run_case("two_threads_capture_at_once", env=export_env(tmp_path))
    assert done.stdout.split() == ["3", "5"]  # both graphs captured
    trace = load_trace(tmp_path / "graph_capture_profile" / NAME)
    assert range_names(trace) == ["capture::tokens=3"]


def test_a_capture_while_another_thread_profiles_starts_no_second_profiler(tmp_path: Path) -> None:
    """A user's profiler on the main thread, a new shape captured by a serving thread: ours stays off,
    the user's profile is intact, and no file of ours claims a shape it did not profile."""
    user = tmp_path / "user.json"
    done = run_case("capture_while_another_thread_profiles", str(user), env=export_env(tmp_path))
    assert done.stdout.split() == ["3"]
    assert not (tmp_path / "graph_capture_profile" / NAME).exists()
    assert any(e.get("name") == "aten::mm" for e in json.loads(user.read_text())["traceEvents"])


def test_a_published_trace_does_not_keep_its_runner_alive(trace_env: Path, wrapped: type) -> None:
    """The runner's trace lives as long as the process and reads the runner weakly: a dropped runner (its
    CUDA graphs, its memory pool) is freed."""
    import gc
    import weakref

    runner = wrapped()
    runner.create_graph(_ones(3), 1)
    assert range_names(_trace(trace_env)) == ["capture::tokens=3,images=1"]
    gone = weakref.ref(runner)
    del runner
    gc.collect()
    assert gone() is None


def test_a_refused_directory_spends_the_shape_limit_and_warns_once(
    trace_env: Path, wrapped: type, profilers_started: list[Any], monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The output directory cannot be made (its parent is a regular file): a shape that was not saved keeps
    its slot, so MAX_SHAPES bounds the profilers a client's new shapes start (each failure freed its slot:
    100 shapes, 100 profilers, 100 WARNINGs); one WARNING for the run of failures. Once the directory is
    fixed, the next shape is saved and the file says which shapes are missing."""
    monkeypatch.setattr(lazy_trace, "MAX_SHAPES", 4)
    monkeypatch.setenv("SGLANG_CAPTURE_TRACE_BACKGROUND", "0")
    blocker = trace_env.parent / "graph_capture_profile"
    blocker.write_text("not a directory")
    runner = wrapped()
    with caplog.at_level(logging.WARNING, logger="mixins"):
        for n in (1, 2):
            runner.run(_ones(n))
        blocker.unlink()
        runner.run(_ones(3))
        for n in range(4, 12):
            runner.run(_ones(n))
    assert len(profilers_started) == 4 and sorted(runner.graphs) == list(range(1, 12))
    warnings = warnings_of(caplog)
    assert len(warnings) == 1 and "CUDA graph capture trace of LazyRunner not saved" in warnings[0], warnings
    trace = _trace(trace_env)
    assert [label.split(",")[0] for label in range_names(trace)] == ["capture::tokens=3", "capture::tokens=4"]
    assert trace["capture_trace"]["shapes_not_profiled"] == 3  # 1 and 2 lost, 5 the first not profiled


def test_staging_of_a_kineto_write_cut_short_at_exit_is_removed(tmp_path: Path) -> None:
    """Exit timeout 0 while a lazy shape's Kineto write is held (a handshake: written, never returns): the
    WARNING says "not saved" and no staging directory is left behind."""
    done = run_case("lazy_write_held_at_exit", env=export_env(tmp_path, SGLANG_CAPTURE_TRACE_EXIT_TIMEOUT="0"))
    assert done.stdout.split() == ["held"], done.stderr[-2000:]
    assert f"still compressing, not saved: {NAME}" in done.stderr
    assert os.listdir(tmp_path / "graph_capture_profile") == []
