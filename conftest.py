"""The Hypothesis profile every property test runs under; shared fixtures: a per-test trace directory with
the switch on, drained of background exports; a spy on the profilers created."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("hypothesis") is not None:  # the CI venvs of .ci/venv_lib.sh have no Hypothesis
    from hypothesis import HealthCheck, settings

    # Every property test runs under this profile: on a loaded machine (2 cores shared, xdist workers,
    # CI's parallel steps) an example's time says nothing about the code, so no deadline and no health
    # check that times generation. HYPOTHESIS_PROFILE=default gives Hypothesis's own back.
    settings.register_profile("ci", deadline=None, suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.hookimpl(optionalhook=True)  # the venvs without pytest-xdist (.ci/venv_lib.sh) do not know it
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one worker more than there are cores. A third of the suite's time is spent waiting on
    its child processes and on fsync, not computing: on the 2-core VM two workers kept the cores 70 %
    busy (257 s wall, 362 s CPU); three finish in 207 s, four in 218 s (docs/DESIGN.md §8)."""
    return (os.cpu_count() or 1) + 1


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


@pytest.fixture
def shared() -> Iterator[Path]:
    """A directory like /tmp (root's, mode 1777, sticky) that root and the second user (uid 65534) reach."""
    from tests.second_user import shared_sticky_dir

    with shared_sticky_dir() as d:
        yield d


@pytest.fixture
def profilers_started(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The keyword arguments of every torch.profiler.profile created while the test runs (ours is made
    through that name); the real profiler still runs."""
    import torch

    created: list[Any] = []
    real = torch.profiler.profile

    def spy(*args: Any, **kwargs: Any) -> Any:
        created.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(torch.profiler, "profile", spy)
    return created
