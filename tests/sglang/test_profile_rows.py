"""Runners sglang never profiles (PROFILE_CAPTURE rows), against the real installed sglang.

``CPUGraphRunner`` captures for real on CPU: its real ``capture()`` runs sglang's per-batch-size loop,
``patch_model()`` (a real ``torch.compile`` of a tiny model's forward, inductor included) and
``capture_one_batch_size()`` with a real ``ForwardBatch``; only what a scheduler process would have
built is stood in (``cpu_shims``: a one-rank TP group, the attention backend's CPU-graph hooks, a tiny
model). The first capture in a process pays the inductor compile (minutes on 2 busy cores); later ones
hit dynamo's cache (seconds).
"""

from __future__ import annotations

import importlib.util
import logging
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("sglang") is None:
    pytest.skip("sglang is not installed in this environment", allow_module_level=True)

import cpu_shims  # noqa: E402
import real_sglang  # noqa: E402

from mixins import sglang_patch  # noqa: E402
from mixins.sglang_targets import TARGETS, Strategy  # noqa: E402
from tests.trace_files import load_trace, range_names  # noqa: E402

cpu_shims.prepare()

TRACE = "cuda_graph_capture-CPUGraphRunner-TP-0.json.gz"


def capture(runner: Any) -> None:
    with real_sglang.cpu_graph_context(runner):
        runner.capture()


def test_cpu_graph_runner_real_capture_writes_one_trace(
    trace_dir: Path, installed: None, profilers_started: list[Any]
) -> None:
    """The real capture path under --enable-profile-cuda-graph: one file, the runner's own name, one
    segment per captured batch size (largest first, as sglang captures), torch.compile really ran."""
    cls = real_sglang.class_or_skip(real_sglang.CPU_GRAPH, "CPUGraphRunner")
    runner = real_sglang.cpu_graph_runner(cls, (1, 2))
    capture(runner)
    assert sorted(runner.graphs) == [1, 2] and all(callable(g) for g in runner.graphs.values())
    assert real_sglang.trace_names(trace_dir) == [TRACE]
    path = real_sglang.traces(trace_dir)[0]
    assert real_sglang.is_ours(path)
    trace = load_trace(path)
    labels = [a for a in range_names(trace) if a.startswith("capture::")]  # dynamo adds its own ranges
    assert [label.split(",")[0] for label in labels] == ["capture::bs=2", "capture::bs=1"], labels
    assert len(profilers_started) == 1 and profilers_started[0]["record_shapes"] is True
    assert trace["capture_trace"]["runner"] == "CPUGraphRunner"
    assert trace["capture_trace"]["capture_bs"] == [1, 2]
    mm = [e for e in trace["traceEvents"] if e.get("cat") == "cpu_op" and e["name"] in ("aten::addmm", "aten::mm")]
    assert mm and all("Input Dims" in e["args"] for e in mm)  # record_shapes, the model's own ops


@pytest.mark.parametrize("off", real_sglang.CASES[1:])
def test_cpu_graph_runner_writes_nothing_when_off(
    off: str, trace_dir: Path, monkeypatch: pytest.MonkeyPatch, profilers_started: list[Any]
) -> None:
    """Either switch off: the capture runs, no profiler is started, nothing is written. The control
    (our package not installed, flag and switch on): sglang itself writes no capture trace."""
    cls = real_sglang.class_or_skip(real_sglang.CPU_GRAPH, "CPUGraphRunner")
    with real_sglang.activation(off, monkeypatch) as flag:
        runner = real_sglang.cpu_graph_runner(cls, (1, 2), profile_flag=flag)
        capture(runner)
    assert sorted(runner.graphs) == [1, 2]
    assert profilers_started == []
    assert real_sglang.trace_names(trace_dir) == []
    assert not (trace_dir / "graph_capture_profile").exists()


def test_cpu_graph_runner_defers_to_an_active_profiler(
    trace_dir: Path, installed: None, caplog: pytest.LogCaptureFixture
) -> None:
    """Nested profilers: with a profiler already recording in this process, ours does not start and we
    write nothing; the per-shape ranges land in that profile."""
    import torch

    runner = real_sglang.cpu_graph_runner(real_sglang.class_or_skip(real_sglang.CPU_GRAPH, "CPUGraphRunner"), (1, 2))
    with caplog.at_level(logging.DEBUG, logger="mixins"):
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as outer:
            capture(runner)
    assert real_sglang.trace_names(trace_dir) == []
    assert "already recording in this process" in caplog.text
    assert {e.name.split(",")[0] for e in outer.events()} >= {"capture::bs=2", "capture::bs=1"}


def test_rows_we_profile_say_so() -> None:
    """status() (what doctor prints) says per PROFILE_CAPTURE / PROFILE_LAZY_CAPTURE row whether we profile it
    (applied, "profiled by us", and what its trace cannot hold or why it profiles without sglang's flag) or
    not (sglang profiles it: deferred, with why; or no such class here). Rows whose module needs an optional
    dependency this venv lacks stay unimported, as on a server without it."""
    real_sglang.import_targets()
    status = sglang_patch.PATCH.install()
    sglang_patch.PATCH.uninstall()
    version = metadata.version("sglang").split(".post")[0]
    profiled = (Strategy.PROFILE_CAPTURE, Strategy.PROFILE_LAZY_CAPTURE)
    rows = [s for s in status if s.target.strategy in profiled]
    assert len(rows) == sum(t.strategy in profiled for t in TARGETS)
    for row in rows:
        target = row.target
        if target.optional and target.module not in sys.modules:
            continue
        applies = version in target.read_in
        assert (row.state is sglang_patch.State.APPLIED) == applies, str(row)
        assert ("profiled by us" in str(row)) == applies
        assert (target.limits in str(row)) == applies or not target.limits


# -- token-count runners: real capture(), the per-shape CUDA-graph capture stood in ------------------


def _the_one_trace(case: str, name: str, trace_dir: Path, profilers_started: list[Any]) -> Path | None:
    """``real_sglang.the_one_trace``, from our one profiler when on; no profiler started otherwise."""
    assert len(profilers_started) == (1 if case == "on" else 0)
    return real_sglang.the_one_trace(trace_dir, name, case)


TOKEN_IDS = [name for _, name, _ in real_sglang.TOKEN_RUNNERS]


@pytest.mark.parametrize("case", real_sglang.CASES)
@pytest.mark.parametrize(("module", "name", "method"), real_sglang.TOKEN_RUNNERS, ids=TOKEN_IDS)
def test_token_runner_real_capture(
    module: str, name: str, method: str, case: str, trace_dir: Path, monkeypatch: pytest.MonkeyPatch,
    profilers_started: list[Any],
) -> None:
    """On: exactly one file named after the runner, a capture::tokens= segment per token count (largest
    first, as sglang captures; prefill's prefix-chunk variants labelled). Either switch off, or our
    package not installed (the control): the capture runs, no profiler starts, nothing is written."""
    cls = real_sglang.class_or_skip(module, name)
    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(cls, method, cpu_shims.per_shape_stand_in(vars(cls)[method], calls))
    with real_sglang.activation(case, monkeypatch) as flag:
        runner = real_sglang.token_runner(cls, (64, 256), profile_flag=flag)  # ascending, as sglang keeps it
        real_sglang.run_token_capture(runner, flag)
    assert calls and calls[0][0] == 256  # the real loop ran, largest first
    path = _the_one_trace(case, name, trace_dir, profilers_started)
    if path is None:
        return
    expected = {
        "PiecewiseCudaGraphRunner": ["capture::tokens=256", "capture::tokens=64"],
        "PrefillCudaGraphRunner": ["capture::tokens=256", "capture::tokens=256,prefix_num_chunks=2",
                                   "capture::tokens=64", "capture::tokens=64,prefix_num_chunks=2"],
    }[name]
    assert range_names(load_trace(path)) == expected


# -- runners without a capture(): our profiler around the method that captures everything -------------


CAPTURE_METHOD_IDS = [name for _, name, _ in real_sglang.CAPTURE_METHOD_RUNNERS]


@pytest.mark.parametrize("case", real_sglang.CASES)
@pytest.mark.parametrize(("module", "name", "method"), real_sglang.CAPTURE_METHOD_RUNNERS, ids=CAPTURE_METHOD_IDS)
def test_runner_without_capture_real_capture(
    module: str, name: str, method: str, case: str, trace_dir: Path, monkeypatch: pytest.MonkeyPatch,
    profilers_started: list[Any],
) -> None:
    """``BreakableCudaGraphRunner`` (its real ``_capture_all()``) and the single-graph multi-layer EAGLE
    draft-extend runner (its real ``__init__`` -> ``_init_and_capture()``), only the GPU parts stood in. On:
    exactly one file named after the runner, one range per shape (largest first, as sglang captures).
    Either switch off, or our package not installed (the control): the capture runs, no profiler starts,
    nothing is written."""
    cls = real_sglang.class_or_skip(module, name)
    calls: list[tuple[Any, ...]] = []
    returns = cpu_shims.breakable_graph if name == "BreakableCudaGraphRunner" else None
    monkeypatch.setattr(cls, method, cpu_shims.per_shape_stand_in(vars(cls)[method], calls, returns))
    with real_sglang.activation(case, monkeypatch) as flag:
        if name == "BreakableCudaGraphRunner":
            runner = real_sglang.breakable_runner(cls, (64, 256), profile_flag=flag)
            real_sglang.run_breakable_capture(runner)
            assert sorted(runner.graphs) == [64, 256]
        else:
            step_cls = real_sglang.load_class(module, "MultiLayerEagleDraftExtendCudaGraphRunner")
            monkeypatch.setattr(cls, "_create_runner", cpu_shims.step_runner_stand_in(step_cls, [1, 2], flag))
            monkeypatch.setattr(cls, "_allocate_buffers", cpu_shims.shared_buffers_stand_in)
            runner = real_sglang.run_one_graph_capture(cls, real_sglang.one_graph_worker(2, profile_flag=flag), flag)
            assert [r.step for r in runner.runners] == [0, 1]
    sizes = [call[0] for call in calls]
    assert sizes == ([256, 64] if name == "BreakableCudaGraphRunner" else [2, 1])  # the real loop ran
    path = _the_one_trace(case, name, trace_dir, profilers_started)
    if path is None:
        return
    trace = load_trace(path)
    unit = "tokens" if name == "BreakableCudaGraphRunner" else "bs"
    assert range_names(trace) == [f"capture::{unit}={size}" for size in sizes]
    assert trace["capture_trace"]["runner"] == name
