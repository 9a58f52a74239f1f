"""sglang's own memory snapshot (``torch.cuda.memory._dump_snapshot("cuda_graph_runner_memory_usage.pickle")`` in
every decode runner's hook) lands beside each runner's trace, one per runner × rank, never in the working
directory. Real runner classes and their real profiling hooks; torch's real ``_dump_snapshot``; only the
allocator's ``_snapshot()`` (CUDA) and ``_record_memory_history`` are STOOD IN (``tests/memory_snapshots.py``)."""

from __future__ import annotations

import gzip
import importlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import cpu_shims
import pytest
import real_sglang
from real_sglang import HOOK, INIT

from tests.memory_snapshots import recording_snapshot

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
