"""Data-parallel replicas on real sglang: each replica's runner writes its own file, and ``check`` reads
them as replicas. The replica is read where each release publishes it (``mixins.sglang_targets.DP_RANK``):
0.5.23 ``SpawnRanks.dp_rank`` through ``get_parallel()``, 0.5.13 ``model_runner.dp_rank``."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import real_sglang


@contextmanager
def replica(runner: Any, dp_rank: int | None, dp_size: int, **fields: Any) -> Iterator[None]:
    """This process as replica ``dp_rank`` of ``dp_size``, the way the release says so: a context published
    with the launcher's ``SpawnRanks`` (0.5.23), else the model runner's own ``dp_rank`` (0.5.13)."""
    runtime_context: Any = real_sglang.import_optional("sglang.srt.runtime_context")
    if runtime_context is None or not hasattr(runtime_context, "SpawnRanks"):
        runner.model_runner.dp_rank = dp_rank
        runner.model_runner.server_args.dp_size = dp_size
        runner.model_runner.server_args.enable_dp_attention = bool(fields.get("enable_dp_attention"))
        yield
        return
    from sglang.srt.server_args import ServerArgs

    args = ServerArgs(model_path="dummy", device="cpu", dp_size=dp_size, **fields)
    ranks = runtime_context.SpawnRanks(world_rank=0, dp_rank=dp_rank)  # TP rank 0, as run_capture_path states
    with runtime_context.use_context(runtime_context.create_context(args, role="test", ranks=ranks)):
        yield


def test_each_replica_writes_its_own_file(trace_dir: Path, installed: None) -> None:
    """Before: both replicas wrote ``…-TP-0.json.gz``; the second replaced the first."""
    _, cls = real_sglang.base_runner()
    for dp in (0, 1):
        runner = real_sglang.make_runner(cls)
        with replica(runner, dp, 2):
            real_sglang.run_capture_path(runner)
    name = cls.__name__
    assert real_sglang.trace_names(trace_dir) == [
        f"cuda_graph_capture-{name}-TP-0-DP-0.json.gz", f"cuda_graph_capture-{name}-TP-0-DP-1.json.gz"
    ]
    metas = [json.load(gzip.open(p))["capture_trace"] for p in real_sglang.traces(trace_dir)]
    assert [(m["dp_rank"], m["dp_size"]) for m in metas] == [(0, 2), (1, 2)]
    done = subprocess.run([sys.executable, "-m", "mixins", "check", "--json", str(trace_dir / "graph_capture_profile")],
                          capture_output=True, text=True, check=False)
    groups = json.loads(done.stdout)["groups"]
    assert done.returncode == 0, done.stdout + done.stderr
    assert [(g["dp_rank"], g["ranks"], g["problems"]) for g in groups] == [(0, [0], []), (1, [0], [])]


def test_one_replica_or_dp_attention_keeps_the_upstream_name(trace_dir: Path, installed: None) -> None:
    """``--dp-size 1`` is the upstream name; DP attention numbers attention groups of one TP group (their
    TP ranks differ already): not replicas, no DP in the name."""
    _, cls = real_sglang.base_runner()
    runner = real_sglang.make_runner(cls)
    with replica(runner, None, 1):
        real_sglang.run_capture_path(runner)
    assert real_sglang.trace_names(trace_dir) == [f"cuda_graph_capture-{cls.__name__}-TP-0.json.gz"]
    for path in real_sglang.traces(trace_dir):
        path.unlink()
    runner = real_sglang.make_runner(cls)
    with replica(runner, 1, 2, tp_size=2, enable_dp_attention=True):
        real_sglang.run_capture_path(runner)
    assert [n for n in real_sglang.trace_names(trace_dir) if "-DP-" in n] == []
