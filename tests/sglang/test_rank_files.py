"""One file per decode runner × TP rank × DP replica, on real sglang (real runner classes, their real profiling
hooks).

Data-parallel replicas: each replica's runner writes its own file, and ``check`` reads them as replicas. The
replica is read where each release publishes it (``mixins.sglang_targets.DP_RANK``): 0.5.23
``SpawnRanks.dp_rank`` through ``get_parallel()``, 0.5.13 ``model_runner.dp_rank``.

sglang's own memory snapshot (``torch.cuda.memory._dump_snapshot("cuda_graph_runner_memory_usage.pickle")`` in
every decode runner's hook) lands beside each runner's trace, one per runner × rank, never in the working
directory: torch's real ``_dump_snapshot``; only the allocator's ``_snapshot()`` (CUDA) and
``_record_memory_history`` are STOOD IN (``tests/memory_snapshots.py``)."""

from __future__ import annotations

import gzip
import importlib
import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import cpu_shims
import pytest
import real_sglang
from real_sglang import HOOK, INIT

from tests.memory_snapshots import recording_snapshot


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


# -- sglang's memory snapshot, beside each runner's trace ------------------------------------------------------

SPEC = real_sglang.SPEC
#: target, EAGLE draft and draft-extend runners (0.5.14+ subclasses of DecodeCudaGraphRunner; the era-B
#: base is CudaGraphRunner, whose EAGLE runners are adopted).
RUNNERS = (
    (real_sglang.DECODE, "DecodeCudaGraphRunner"),
    (f"{SPEC}.eagle_draft_cuda_graph_runner", "EAGLEDraftCudaGraphRunner"),
    (f"{SPEC}.eagle_draft_extend_cuda_graph_runner", "EAGLEDraftExtendCudaGraphRunner"),
)
UPSTREAM = "cuda_graph_runner_memory_usage.pickle"


@pytest.fixture
def allocator(monkeypatch: pytest.MonkeyPatch) -> None:
    """The two CUDA-only calls of the hook's pair stood in; ``_dump_snapshot`` is torch's own."""
    import torch

    monkeypatch.setattr(torch.cuda.memory, "_record_memory_history", lambda *a, **k: None)
    monkeypatch.setattr(torch.cuda.memory, "_dump_snapshot", cpu_shims.real_dump_snapshot(torch.cuda.memory))
    monkeypatch.setattr(torch.cuda.memory, "_snapshot", recording_snapshot())


def _classes() -> list[type]:
    found = [real_sglang.load_class(module, name) for module, name in RUNNERS]
    if any(cls is None for cls in found) or not all(HOOK in dir(cls) for cls in found):
        pytest.skip("these runners' profiling hooks are 0.5.14+ (the era-B runs are covered by tests/core)")
    return [cls for cls in found if cls is not None]


def _capture_as_rank(cls: type, tp_rank: int) -> None:
    """The runner's real profiling pair at TP rank ``tp_rank`` of 2: ``_init_profile_context_and_memory_record``
    (our profiler's twin: sglang's), some CPU work, then the real hook."""
    import torch
    from sglang.srt.runtime_context import get_parallel

    runner = real_sglang.make_runner(cls)
    runner.model_runner.tp_rank = tp_rank
    with real_sglang.patched_attributes(importlib.import_module(real_sglang.DECODE), cpu_shims.TP_RANK_0):
        with get_parallel().override(tp_rank=tp_rank, tp_size=2):
            prof_context = getattr(runner, INIT)()
            with prof_context as prof:
                (torch.ones(4) * 2).sum()
            getattr(runner, HOOK)(prof)


def _capture_all() -> None:
    for cls in _classes():
        for tp_rank in (0, 1):
            _capture_as_rank(cls, tp_rank)


@pytest.fixture
def cwd(trace_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory of its own, beside the trace directory."""
    path = trace_dir / "cwd"
    path.mkdir()
    monkeypatch.chdir(path)
    return path


def test_every_runner_and_rank_leaves_its_own_snapshot_and_the_cwd_stays_empty(
    trace_dir: Path, installed: None, allocator: None, cwd: Path
) -> None:
    """Before: each hook wrote ./cuda_graph_runner_memory_usage.pickle, the last one replacing the rest."""
    _capture_all()
    assert list(cwd.iterdir()) == []
    out = trace_dir / "graph_capture_profile"
    names = {cls.__name__ for cls in _classes()}
    assert sorted(p.name for p in out.glob("*.pickle")) == sorted(
        f"cuda_graph_memory-{name}-TP-{rank}.pickle" for name in names for rank in (0, 1)
    )
    for trace in real_sglang.traces(trace_dir):
        meta = json.loads(gzip.open(trace).read())["capture_trace"]
        assert meta["memory_snapshot"] == trace.name.replace("cuda_graph_capture-", "cuda_graph_memory-").replace(
            ".json.gz", ".pickle"
        )
    done = subprocess.run([sys.executable, "-m", "mixins", "memory", "--json", str(out)], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)["snapshots"]) == 2 * len(names)


@pytest.mark.parametrize("case", ["package not installed", "switch off"])
def test_without_us_sglang_overwrites_one_file_in_the_cwd(
    case: str, trace_dir: Path, allocator: None, cwd: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The controls: our package not installed, or installed with the switch off: every hook writes the one
    name in the working directory, and nothing of ours is written."""
    with real_sglang.activation(case, monkeypatch):
        _capture_all()
    assert [p.name for p in cwd.iterdir()] == [UPSTREAM]
    assert list((trace_dir / "graph_capture_profile").glob("*.pickle")) == []
