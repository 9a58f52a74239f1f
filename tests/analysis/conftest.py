"""Real CPU capture-style traces made with torch.profiler, shared by the analyzer tests.

The exporter's demo is not required: these fixtures do what it does on CPU (record_shapes=True,
``capture::bs=N`` record_function ranges, export_chrome_trace) and add our ``capture_trace``
metadata as the first top-level key, like the exporter.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.built_once import built_once

DATA = Path(__file__).resolve().parent.parent / "data"
H100 = DATA / "h100_qwen1.5-0.5b_inference.json.gz"
VLLM = DATA / "vllm_decode_full_graph_capture_rank_0.json.gz"


def _forward(x, extra_op: bool):  # type: ignore[no-untyped-def]
    import torch

    y = torch.nn.functional.linear(x, torch.ones(8, x.shape[1]))
    y = torch.relu(y)
    if extra_op:
        y = y * 2.0  # the one op rank 1 has in addition (bs=4 only)
    return torch.softmax(y, dim=-1)


def make_trace(
    path: Path, bs_list: tuple[int, ...], diverge_bs: int | None = None, meta: dict | None = None
) -> Path:
    """Profile a tiny model per batch size under ``capture::bs=N`` and export it to ``path``."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for bs in bs_list:
            with record_function(f"capture::bs={bs}"):
                x = torch.ones(bs, 16)
                for _ in range(2):
                    _forward(x, extra_op=(bs == diverge_bs))
        torch.zeros(3).add_(1)  # something outside any capture range
    raw = path.with_name(path.name.replace(".json.gz", ".raw.json"))
    prof.export_chrome_trace(str(raw))
    doc = json.loads(raw.read_text())
    raw.unlink()
    if meta is not None:
        doc = {"capture_trace": meta, **doc}  # first key, as the exporter writes it
    with gzip.open(path, "wt") as f:
        json.dump(doc, f, indent=1)
    return path


def _meta(rank: int) -> dict:
    return {
        "runner": "DecodeCudaGraphRunner",
        "runner_class": "sglang.srt.model_executor.runner.DecodeCudaGraphRunner",
        "tp_rank": rank,
        "pp_rank": 0,
        "pp_size": 1,
        "capture_index": 1,
        "capture_bs": [1, 4],
        "sglang_version": None,
        "torch_version": "2.13.0",
        "package_version": "0.1.0",
        "pid": 1,
        "hostname": "test",
        "device": "cpu",
        "time_utc": "2026-01-01T00:00:00Z",
    }


@pytest.fixture(scope="session")
def cpu_traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three real traces: TP 0, an identical TP 1, and a TP 1 with one extra op in bs=4."""
    base = tmp_path_factory.mktemp("cpu_traces")
    same = base / "same"
    diverged = base / "diverged"
    same.mkdir()
    diverged.mkdir()
    name = "cuda_graph_capture-DecodeCudaGraphRunner-TP-{}.json.gz"
    r0 = make_trace(same / name.format(0), (1, 4), meta=_meta(0))
    r1 = make_trace(same / name.format(1), (1, 4), meta=_meta(1))
    r1_bad = make_trace(diverged / name.format(1), (1, 4), diverge_bs=4, meta=_meta(1))
    shutil.copy(r0, diverged / name.format(0))
    # no metadata: identity must come from the file name
    nometa = make_trace(base / "cuda_graph_capture-EAGLEDraftCudaGraphRunner-TP-3-PP-1-2.json.gz", (2,))
    return {"r0": r0, "r1": r1, "r1_bad": r1_bad, "same": same, "diverged": diverged, "nometa": nometa}


@pytest.fixture(scope="session")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's real CPU traces (four runners, batch sizes 1, 2, 4), made once per run in a subprocess
    (read-only for the tests: every xdist worker shares them)."""
    import subprocess
    import sys

    def build(out: Path) -> dict[str, str]:
        env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
        done = subprocess.run(
            [sys.executable, "-m", "mixins", "demo", "--out", str(out), "--device", "cpu", "--batch-sizes", "1,2,4"],
            env=env, capture_output=True, text=True, timeout=600,
        )
        assert done.returncode == 0, done.stderr
        return {"traces": str(out / "graph_capture_profile")}

    return Path(built_once(tmp_path_factory, "demo", build)["traces"])


@pytest.fixture()
def run_cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """Run an analyzer command in-process through argparse, as the console script does."""
    import argparse

    from mixins.analysis import cli

    def run(*argv: str) -> tuple[int, str, str]:
        parser = argparse.ArgumentParser(prog="capture-trace")
        sub = parser.add_subparsers(dest="command", required=True)
        cli.add_commands(sub)
        args = parser.parse_args([os.fspath(a) for a in argv])
        rc = args.func(args)
        out, err = capsys.readouterr()
        return rc, out, err

    return run
