"""``scripts/gpu_check.sh``, the one-call GPU check (docs/DESIGN.md §9), dry-run on CPU: every step
that needs no GPU really runs (demo on CPU, ls, time, attribute on the real ROCm pair, the check)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# The script runs the demo, which profiles with torch: the one file of tests/analysis that needs it.
pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="no torch: the check runs the demo")


def _run(out: Path, **env_extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, OUT=str(out), **env_extra)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])  # python3: ours
    return subprocess.run(
        ["bash", str(REPO / "scripts" / "gpu_check.sh")], capture_output=True, text=True, env=env, timeout=600
    )


@pytest.mark.exhaustive  # a developer's script, not the product (15 s: its own demo run): CI runs it
def test_gpu_check_dry_run_on_cpu(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    done = _run(out, GPU_CHECK_DEVICE="cpu")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.rstrip().endswith("GPU CHECK PASSED")
    names = sorted(p.name for p in out.iterdir())
    assert names == [
        "attribute.json",
        "check.log",
        "cuda_graph_capture-DecodeCudaGraphRunner-TP-0.json.gz",
        "cuda_graph_capture-EAGLEDraftCudaGraphRunner-TP-0.json.gz",
        "cuda_graph_capture-EAGLEDraftExtendCudaGraphRunner-TP-0.json.gz",
        "cuda_graph_capture-PrefillCudaGraphRunner-TP-0.json.gz",  # the decorator's profile mode
        "provenance.txt",
    ]  # on a GPU also replay-TP-0.json.gz: 8 files, the device's limit
    assert "profile mode: [('tokens=" in done.stdout
    cov = json.loads((out / "attribute.json").read_text())["coverage"]
    assert cov["graph_kernels_attributed"] == cov["graph_kernels"] == 421
    assert "| torch " in (out / "provenance.txt").read_text()


@pytest.mark.exhaustive
def test_gpu_check_fails_loudly_without_a_gpu(tmp_path: Path) -> None:
    """The real (CUDA) check on a machine without CUDA: non-zero exit, and the log it brings back ends
    with the demo's one-line reason."""
    import torch

    if torch.cuda.is_available():  # pragma: no cover - this machine has none
        pytest.skip("this machine has CUDA: the check would run for real")
    done = _run(tmp_path)
    assert done.returncode != 0
    log = (tmp_path / "check.log").read_text().rstrip().splitlines()
    assert log[-1] == "capture-trace: error: --device cuda requested but torch.cuda.is_available() is False"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["check.log", "provenance.txt"]
