"""Shared fixtures of the analyzer tests, which need no torch: real traces committed in tests/data (made
once by ``python -m tests.trace_files tests/data``: tests/data/PROVENANCE.md), copied per run so that a
test may add files beside them, and the analyzer's commands run in-process."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from mixins.formats import STAGING_PREFIX
from mixins.output_dir import Here
from tests.analysis.pairs import DATA, H100
from tests.analysis.pairs import VLLM_CAPTURE as VLLM
from tests.built_once import built_once
from tests.trace_files import CPU_TRACE, NO_META

__all__ = ["DATA", "H100", "VLLM", "dead_name"]  # the real traces' paths live in pairs.py


def dead_name(tag: int = 0) -> str:
    """A well-formed staging name of this host and pid namespace whose pid no process can have."""
    here = Here.now()
    return f"{STAGING_PREFIX}4194303.{here.pid_namespace}.{tag:08x}.{here.host}"


@pytest.fixture(scope="session")
def cpu_traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Real torch.profiler CPU traces of one runner (``capture::bs=1`` and ``bs=4``): TP 0, TP 1 (folder
    ``same``), TP 0 beside a TP 1 with one extra op (``aten::mul``) at bs=4 (``diverged``), and a trace
    without metadata whose identity is only its file name (``nometa``)."""
    base = tmp_path_factory.mktemp("cpu_traces")
    shutil.copytree(DATA / "cpu_traces", base, dirs_exist_ok=True)
    same, diverged = base / "same", base / "diverged"
    shutil.copy(same / CPU_TRACE.format(0), diverged)
    return {"r0": same / CPU_TRACE.format(0), "r1": same / CPU_TRACE.format(1), "same": same, "diverged": diverged,
            "r1_bad": diverged / CPU_TRACE.format(1), "nometa": base / NO_META}


@pytest.fixture(scope="session")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's real CPU traces: four runners, batch sizes 1, 2, 4. One copy per run, read-only for the
    tests: every xdist worker reads the same paths (the outputs built once from them name them)."""

    def build(out: Path) -> dict[str, str]:
        return {"traces": str(shutil.copytree(DATA / "demo", out / "graph_capture_profile"))}

    return Path(built_once(tmp_path_factory, "demo", build)["traces"])


@pytest.fixture()
def run_cli() -> Callable[..., tuple[int, str, str]]:
    """Run an analyzer command in-process through argparse, as the console script does."""
    from inprocess import run_analyzer

    return run_analyzer
