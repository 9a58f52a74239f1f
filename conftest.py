"""Shared fixtures: a real profiler, a per-test trace directory with the switch on, trace loading."""

from __future__ import annotations

import gzip
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent


@pytest.fixture
def trace_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Switch on, profiler dir in tmp_path; yields the directory traces land in."""
    monkeypatch.setenv("SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE", "1")
    monkeypatch.setenv("SGLANG_TORCH_PROFILER_DIR", str(tmp_path))
    for name in ("SGLANG_CAPTURE_TRACE_STRICT", "SGLANG_CAPTURE_TRACE_BACKGROUND", "SGLANG_CAPTURE_TRACE_GZIP_LEVEL"):
        monkeypatch.delenv(name, raising=False)
    yield tmp_path / "graph_capture_profile"
    from mixins import wait_for_exports

    assert wait_for_exports(60), "a background export did not finish"


def profile_of(work: Callable[[], Any]) -> Any:
    """Run ``work`` under a real CPU torch.profiler.profile(record_shapes=True); return the stopped profile."""
    import torch

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        work()
    return prof


def matmul_work(rows: int, cols: int = 8) -> Callable[[], Any]:
    """A workload whose op shapes identify it in the trace."""

    def work() -> Any:
        import torch

        return torch.mm(torch.ones(rows, cols), torch.ones(cols, 3))

    return work


def load_trace(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt") as handle:
        return json.load(handle)


def op_shapes(trace: dict[str, Any], op: str = "aten::mm") -> list[Any]:
    return [e["args"]["Input Dims"] for e in trace["traceEvents"] if e.get("cat") == "cpu_op" and e["name"] == op]


def subprocess_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(extra)
    return env


PYTHON = sys.executable
