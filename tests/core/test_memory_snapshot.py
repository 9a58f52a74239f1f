"""The memory snapshot sglang's hook dumps into the working directory goes beside the runner's trace, one file
per runner × rank, through the exporter's policy; it opens in torch's own viewer; the reader refuses any
pickle that names a global. torch's ``_snapshot()`` needs a GPU: the snapshots are STAND-INS in torch's
documented layout (``tests/memory_snapshots.py``)."""

from __future__ import annotations

import gzip
import json
import logging
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from core_helpers import capture_trace, mm_profile, warnings_of

from mixins import wait_for_exports, with_capture_trace
from tests.memory_snapshots import GRAPH_POOL, MiB, recording_snapshot, stand_in_snapshot

UPSTREAM = "cuda_graph_runner_memory_usage.pickle"
hook_logger = logging.getLogger("sglang_like_runner_module")


@with_capture_trace
class SnapshotRunner:
    """Shaped like sglang's decode runners (0.5.6-0.5.23): the hook dumps the allocator's history to a
    relative path and logs that name, then the profile is exported."""

    def __init__(self, tp_rank: int) -> None:
        self.tp_rank = tp_rank

    def capture(self) -> None:
        self._post_process_after_profile(mm_profile(1, 1))

    def _post_process_after_profile(self, prof_context: Any) -> None:
        import torch

        torch.cuda.memory._dump_snapshot(UPSTREAM)
        hook_logger.info("Memory Usage is saved to " + UPSTREAM)  # as sglang builds it: one string


logger = hook_logger


@pytest.fixture
def stand_in_allocator(monkeypatch: pytest.MonkeyPatch) -> None:
    """``torch.cuda.memory._snapshot`` STOOD IN (no GPU); ``_dump_snapshot`` left as torch has it, so if it were
    not redirected it would write ``UPSTREAM`` into the working directory."""
    import torch

    monkeypatch.setattr(torch.cuda.memory, "_snapshot", recording_snapshot())


def test_each_rank_leaves_its_own_snapshot_and_the_working_directory_stays_empty(
    trace_env: Path, stand_in_allocator: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Before: every rank wrote ./cuda_graph_runner_memory_usage.pickle (the last one won)."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    caplog.set_level(logging.INFO)
    for rank in (0, 1):
        SnapshotRunner(rank).capture()
    assert wait_for_exports(60)
    assert list(cwd.iterdir()) == []
    names = sorted(p.name for p in trace_env.iterdir())
    assert names == [
        "cuda_graph_capture-SnapshotRunner-TP-0.json.gz", "cuda_graph_capture-SnapshotRunner-TP-1.json.gz",
        "cuda_graph_memory-SnapshotRunner-TP-0.pickle", "cuda_graph_memory-SnapshotRunner-TP-1.pickle",
    ]
    for rank in (0, 1):
        meta = json.load(gzip.open(trace_env / f"cuda_graph_capture-SnapshotRunner-TP-{rank}.json.gz"))["capture_trace"]
        assert meta["memory_snapshot"] == f"cuda_graph_memory-SnapshotRunner-TP-{rank}.pickle"
        snapshot = pickle.loads((trace_env / meta["memory_snapshot"]).read_bytes())
        assert snapshot["segments"][0]["segment_pool_id"] == GRAPH_POOL
    lines = [r.getMessage() for r in caplog.records if r.name == hook_logger.name]
    assert lines == [f"Memory Usage is saved to {trace_env / f'cuda_graph_memory-SnapshotRunner-TP-{r}.pickle'}"
                     for r in (0, 1)]
    assert (trace_env / "cuda_graph_memory-SnapshotRunner-TP-0.pickle").stat().st_mode & 0o777 == 0o644


def test_switch_off_leaves_sglangs_call_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Off unless our switch is on: the hook's own ``_dump_snapshot`` runs as written."""
    import torch

    monkeypatch.delenv("SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE", raising=False)
    calls: list[str] = []
    monkeypatch.setattr(torch.cuda.memory, "_dump_snapshot", lambda name: calls.append(name))
    SnapshotRunner(0).capture()
    assert calls == [UPSTREAM]


@pytest.mark.parametrize("fault", ["no device", "name taken by a directory"])
def test_a_failed_snapshot_is_one_warning_no_staging_left_and_the_trace_still_saved(
    trace_env: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, fault: str
) -> None:
    """torch's ``_snapshot`` failing, or the snapshot staged and then refused at its final name (a directory
    there): one WARNING, the trace saved, and no staging directory left (one holding a staged snapshot is
    removed by no sweep or ``clean``)."""
    import torch

    def no_device(*args: Any, **kwargs: Any) -> Any:  # as torch calls it: (augment_with_fx_traces=...)
        raise RuntimeError("no CUDA device")

    taken = trace_env / "cuda_graph_memory-SnapshotRunner-TP-0.pickle"
    if fault == "no device":
        monkeypatch.setattr(torch.cuda.memory, "_snapshot", no_device)
    else:
        monkeypatch.setattr(torch.cuda.memory, "_snapshot", recording_snapshot())
        (taken / "kept").mkdir(parents=True)
    SnapshotRunner(0).capture()
    assert wait_for_exports(60)
    left = sorted(p.name for p in trace_env.iterdir())
    assert left == sorted(["cuda_graph_capture-SnapshotRunner-TP-0.json.gz", *([taken.name] if taken.exists() else [])])
    (warning,) = warnings_of(caplog)
    assert "CUDA memory snapshot of SnapshotRunner not saved" in warning
    assert ("no CUDA device" if fault == "no device" else "IsADirectoryError") in warning, warning


def test_a_written_snapshot_opens_in_torchs_own_viewer(
    trace_env: Path, stand_in_allocator: None, tmp_path: Path
) -> None:
    SnapshotRunner(0).capture()
    assert wait_for_exports(60)
    path = trace_env / "cuda_graph_memory-SnapshotRunner-TP-0.pickle"
    for kind in ("trace_plot", "segment_plot"):
        html = tmp_path / f"{kind}.html"
        done = subprocess.run([sys.executable, "-m", "torch.cuda._memory_viz", kind, str(path), "-o", str(html)],
                              capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        assert html.stat().st_size > 1000


class _Hostile:
    """Unpickled, it would run ``touch <marker>``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        (lambda marker: pickle.dumps({"segments": [], "device_traces": [[_Hostile(marker)]]}),
         "refused to load posix.system"),
        (lambda marker: b"not a pickle", "unreadable pickle"),
        (lambda marker: pickle.dumps(["a list"]), "expected a dict with 'segments'"),
        (lambda marker: pickle.dumps({"segments": [], "device_traces": []})[:-3], "unreadable pickle"),
        # protocol 2 names the type
        (lambda marker: pickle.dumps({"segments": set()}, protocol=2), "refused to load __builtin__.set"),
    ],
)
def test_bad_snapshots_are_one_line_exit_2_and_never_run(tmp_path: Path, payload: Any, why: str) -> None:
    """A pickle that names a global (a hostile one: ``os.system``) is refused before it runs."""
    path = tmp_path / "cuda_graph_memory-Evil-TP-0.pickle"
    path.write_bytes(payload(tmp_path / "ran"))
    done = capture_trace("memory", str(path))
    assert done.returncode == 2 and done.stdout == "" and done.stderr.count("\n") == 1 and why in done.stderr, done
    assert not (tmp_path / "ran").exists()


def test_memory_per_shape_from_the_trace_beside_the_snapshot(
    trace_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Graph-pool memory per shape: the snapshot's allocation times against the trace's capture:: ranges."""
    import torch

    @with_capture_trace
    class Shapes:
        tp_rank = 0

        def capture(self) -> None:
            with torch.profiler.profile() as prof:
                for bs in (2, 1):
                    self.capture_one_batch_size(bs, None)
            self._post_process_after_profile(prof)

        def capture_one_batch_size(self, bs: int, forward: Any) -> None:
            times.append(_now())
            torch.mm(torch.ones(bs, 8), torch.ones(8, 3))
            times.append(_now())

        def _post_process_after_profile(self, prof_context: Any) -> None:
            torch.cuda.memory._dump_snapshot(UPSTREAM)

    times: list[float] = []
    sizes = {0: 8 * MiB, 1: 2 * MiB}  # bs=2's capture allocates 8 MiB in the graph pool, bs=1's 2 MiB

    def _snapshot(*args: Any, **kwargs: Any) -> dict[str, Any]:
        mids = [(times[2 * i] + times[2 * i + 1]) / 2 for i in range(2)]
        return stand_in_snapshot(
            [(mids[i], sizes[i], GRAPH_POOL, f"model.py:{10 + i} forward") for i in range(2)]
            + [(times[-1] + 5e6, 1 * MiB, (0, 0), "server.py:1 later")]
        )

    monkeypatch.setattr(torch.cuda.memory, "_snapshot", _snapshot)
    Shapes().capture()
    assert wait_for_exports(60)
    done = capture_trace("memory", "--json", str(trace_env))
    assert done.returncode == 0, done.stderr
    (doc,) = json.loads(done.stdout)["snapshots"]
    got = {s["label"]: (s["allocs"], s["graph_pool_bytes"]) for s in doc["shapes"]}
    assert got == {"bs=2": (1, 8 * MiB), "bs=1": (1, 2 * MiB)}
    assert doc["peak_recorded_bytes"] == 11 * MiB and doc["graph_pool_reserved_bytes"] == 10 * MiB
    assert [s["site"] for s in doc["top_sites"]] == ["model.py:10 forward", "model.py:11 forward", "server.py:1 later"]
    text = capture_trace("memory", str(trace_env)).stdout
    assert "bs=2" in text and "8.0 MiB" in text and "model.py:10 forward" in text


def _now() -> float:
    import time

    return time.time() * 1e6
