"""Shared fixtures: a per-test trace directory with the switch on, drained of background exports; a spy on
the profilers created."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


def _bytecode_cache_for_children() -> None:
    """The tests start hundreds of Python children (CLI runs, exporters, installs); where the environment
    sets PYTHONDONTWRITEBYTECODE (this CI does) each recompiled this package's ~80 modules. Instead, one
    private cache directory per run (mkdtemp: 0700, a fresh name), made by the first pytest process and
    inherited by xdist workers and every child; it never touches the checkout."""
    if os.environ.get("PYTHONPYCACHEPREFIX") or not os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return
    cache = tempfile.mkdtemp(prefix="capture-trace-tests-pycache-")
    atexit.register(shutil.rmtree, cache, True)
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    os.environ["PYTHONPYCACHEPREFIX"] = cache


_bytecode_cache_for_children()


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
