from __future__ import annotations

import subprocess
from pathlib import Path

from core_helpers import PYTHON, load_trace, subprocess_env

RUNNERS = ("DecodeCudaGraphRunner", "EAGLEDraftCudaGraphRunner", "EAGLEDraftExtendCudaGraphRunner")
PREFILL = "PrefillCudaGraphRunner"  # no profiler of its own: the decorator's profile mode


def test_demo_command_writes_one_labelled_trace_per_runner(tmp_path: Path) -> None:
    env = subprocess_env()
    env.pop("SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE", None)  # the demo switches it on for itself
    done = subprocess.run(
        [PYTHON, "-m", "mixins", "demo", "--out", str(tmp_path), "--device", "cpu", "--batch-sizes", "1,3"],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE=1" in done.stdout
    directory = tmp_path / "graph_capture_profile"
    expected = sorted(f"cuda_graph_capture-{r}-TP-0.json.gz" for r in (*RUNNERS, PREFILL))
    assert sorted(p.name for p in directory.iterdir()) == expected
    for runner in RUNNERS:
        path = directory / f"cuda_graph_capture-{runner}-TP-0.json.gz"
        assert str(path) in done.stdout and "events" in done.stdout
        trace = load_trace(path)
        meta = trace["capture_trace"]
        assert (meta["runner"], meta["capture_bs"], meta["capture_index"]) == (runner, [1, 3], 1)
        assert meta["runner_class"] == f"mixins.demo_runners.{runner}"
        labels = [e["name"] for e in trace["traceEvents"] if e.get("cat") == "user_annotation"]
        assert sorted(labels) == ["capture::bs=1", "capture::bs=3"]
        hidden = 64 if runner == "DecodeCudaGraphRunner" else 32
        linear_inputs = [e["args"]["Input Dims"][0] for e in trace["traceEvents"] if e.get("name") == "aten::linear"]
        assert [3, hidden] in linear_inputs and [1, hidden] in linear_inputs


    prefill = load_trace(directory / f"cuda_graph_capture-{PREFILL}-TP-0.json.gz")  # profile mode
    assert prefill["capture_trace"]["runner"] == PREFILL and prefill["capture_trace"]["capture_bs"] is None
    labels = [e["name"] for e in prefill["traceEvents"] if e.get("cat") == "user_annotation"]
    assert labels == ["capture::tokens=48", "capture::tokens=16"]  # 16 tokens per batch, largest first
    linear_inputs = [e["args"]["Input Dims"][0] for e in prefill["traceEvents"] if e.get("name") == "aten::linear"]
    assert [48, 64] in linear_inputs and [16, 64] in linear_inputs


def test_demo_rejects_bad_batch_sizes_and_missing_cuda(tmp_path: Path) -> None:
    bad = subprocess.run([PYTHON, "-m", "mixins", "demo", "--batch-sizes", "1,x"], env=subprocess_env(),
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "expected comma-separated positive integers" in bad.stderr
    import torch

    if not torch.cuda.is_available():
        done = subprocess.run([PYTHON, "-m", "mixins", "demo", "--out", str(tmp_path), "--device", "cuda"],
                              env=subprocess_env(), capture_output=True, text=True)
        assert done.returncode == 2
        assert done.stderr.strip().splitlines()[-1].startswith("capture-trace: error: --device cuda requested")
