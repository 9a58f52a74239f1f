"""Fixtures of the suites against real sglang (a strict trace directory, our patch installed), and the one gate
of the files that drive the installed sglang's own code: skipped where sglang is not importable (the main venv);
elsewhere the CPU shims go in before any sglang module is imported."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest

REAL_SGLANG = importlib.util.find_spec("sglang") is not None
NEEDS_SGLANG = {"test_real_sglang.py", "test_profiled_rows.py", "test_rank_files.py"}
if REAL_SGLANG:
    import cpu_shims

    cpu_shims.prepare()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if not REAL_SGLANG and item.path.name in NEEDS_SGLANG:
            item.add_marker(pytest.mark.skip(reason="sglang is not installed in this environment"))


@pytest.fixture
def trace_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE", "1")
    monkeypatch.setenv("SGLANG_TORCH_PROFILER_DIR", str(tmp_path))
    monkeypatch.setenv("SGLANG_CAPTURE_TRACE_BACKGROUND", "0")  # the file is final when the hook returns
    monkeypatch.setenv("SGLANG_CAPTURE_TRACE_STRICT", "1")  # an export error fails the test, not a log line
    monkeypatch.chdir(tmp_path)  # sglang's hooks write their memory snapshot name relative to the cwd
    return tmp_path


@pytest.fixture
def installed() -> Iterator[None]:
    from mixins import sglang_patch

    assert not sglang_patch.PATCH.installed
    sglang_patch.PATCH.install()
    yield
    sglang_patch.PATCH.uninstall()


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch.cuda's graph, stream, pool and memory calls STOOD IN for the test (``cpu_shims.stand_in_cuda``)."""
    import cpu_shims

    cpu_shims.stand_in_cuda(monkeypatch)
