"""The LLM runtime's other lazy captures (PROFILE_LAZY_CAPTURE rows, sglang 0.5.23): ``RowBucketGraphRunner``
(one graph per row bucket, DeepSeek-V4's replay tail) and DSpark's ``DsparkSamplingAcceptGraph`` (one graph
per verify batch size), against the real installed classes.

The runner's real serving path runs (``run()``: a new shape, the real ``_capture`` / ``_record``, replay).
STOOD IN, for the duration of a test, only what needs a GPU: the module-level CUDA-graph helpers the module
imports (``BreakableCUDAGraph``/``BreakableCUDAGraphCapture``, ``graph_capture``, the graph pool and capture
stream) and ``torch.cuda``'s graph, stream, pool and memory calls: the captured bodies run eagerly on CPU.
For DSpark also the static verify epilogue (``StandInEpilogue``) and pynccl's ``graph_capture``.
"""

from __future__ import annotations

import importlib
import importlib.util
import types
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("sglang") is None:
    pytest.skip("sglang is not installed in this environment", allow_module_level=True)

import cpu_shims  # noqa: E402
import real_sglang  # noqa: E402
import torch  # noqa: E402

from mixins import wait_for_exports  # noqa: E402

cpu_shims.prepare()

ROW_BUCKET = "sglang.srt.model_executor.runner.row_bucket_graph_runner"


@pytest.fixture
def fake_gpu(fake_gpu: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """tests/sglang/conftest.py's, and the row-bucket module's own CUDA-graph helpers."""
    try:
        row = importlib.import_module(ROW_BUCKET)
    except ModuleNotFoundError:  # before sglang 0.5.23
        pytest.skip(f"{ROW_BUCKET} does not exist in this sglang")
    for name in ("graph_capture", "graph_pool_capture_scope", "graph_pool_replay_scope", "BreakableCUDAGraphCapture"):
        monkeypatch.setattr(row, name, cpu_shims.stand_in_scope)
    monkeypatch.setattr(row, "BreakableCUDAGraph", cpu_shims.StandInGraph)
    monkeypatch.setattr(row, "get_or_create_global_graph_memory_pool", lambda *a: "fake pool")
    monkeypatch.setattr(row, "set_graph_pool_id", lambda *a: None)
    monkeypatch.setattr(row, "get_or_create_global_graph_capture_stream", lambda *a: None)
    monkeypatch.setattr(row, "get_attn_backend", lambda: types.SimpleNamespace(forward_metadata=None))


def serve_row_bucket(cls: type) -> tuple[Any, int]:
    """Two steps of 3 rows with buckets of 4 up to 8: the first captures buckets 8 and 4 (largest first, as
    run() does), the second replays bucket 4. Returns the runner and its graph count."""
    runner = cls(row_step=4, max_rows=8, label="test replay tail")
    batch = types.SimpleNamespace(num_token_non_padded=None, attn_tp_sequence_sharded=False)
    weight = torch.ones(2, 2)
    for _ in range(2):
        out = runner.run(key=("layer", 0), live=[torch.ones(3, 2)], forward_batch=batch,
                         body=lambda inputs, b: [inputs[0] @ weight], context=lambda b: nullcontext())
        assert out[0].shape == (3, 2)
    return runner, len(runner._graphs)


DSPARK = "sglang.srt.speculative.dspark_components.dspark_sampling_accept_graph"


class StandInEpilogue:
    """STANDS IN for DsparkVerifyEpilogue, the static verify graph's buffers (built by the DSpark worker on a
    GPU): ``static_io`` per verify batch size and ``run_static``, the region the graph captures, here a real
    matmul over the verify logits instead of the sampling-accept kernels."""

    def __init__(self, sizes: tuple[int, ...]) -> None:
        self.static_io = {bs: types.SimpleNamespace(logits=torch.ones(bs, 4)) for bs in sizes}
        self.accepted: dict[int, Any] = {}

    def run_static(self, io: Any, *, accept: Any, gate: Any, kv_projected: bool) -> None:
        self.accepted[io.logits.shape[0]] = io.logits @ torch.ones(4, 4) * gate

    def engram_history(self) -> None:
        return None

    def read_accept(self, bs: int) -> Any:
        return self.accepted.get(bs)


def serve_dspark(cls: type) -> tuple[Any, int]:
    """Three all-sampled steps at verify batch size 2 (warm-up, capture and replay, replay), then two at 4 (warm-up,
    capture and replay), as the DSpark worker's static verify calls run()."""
    epilogue = StandInEpilogue((2, 4))
    sampler = types.SimpleNamespace(greedy_draft=True, step_logits=None,
                                    params=types.SimpleNamespace(temperatures=torch.ones(4)))
    graph = cls(epilogue=epilogue, resolve_draft_sampler=lambda: sampler, tp_sync=None, fused_argmax=False,
                block_verification=False, device="cpu")
    for bs in (2, 2, 2, 4, 4):
        assert graph.run(bs=bs, target_logits=epilogue.static_io[bs].logits) is not None
    assert graph.num_replays == 3 and not graph.disabled  # a capture replays at once
    return graph, len(graph._graphs)


@pytest.fixture
def fake_dspark_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        dspark = real_sglang.import_optional(DSPARK)
    except real_sglang.MissingDependency as exc:  # the scheduler's stack, absent from an older test venv
        pytest.skip(str(exc))
    if dspark is None:
        pytest.skip(f"{DSPARK} does not exist in this sglang")
    monkeypatch.setattr(dspark, "graph_capture", cpu_shims.stand_in_scope)  # pynccl's capture context


CASES = {
    "RowBucketGraphRunner": (ROW_BUCKET, serve_row_bucket, ["capture::tokens=8", "capture::tokens=4"]),
    "DsparkSamplingAcceptGraph": (DSPARK, serve_dspark, ["capture::bs=2", "capture::bs=4"]),
}


@pytest.mark.parametrize("case", real_sglang.CASES)
@pytest.mark.parametrize("name", list(CASES))
def test_lazy_llm_runner_captures(name: str, case: str, trace_dir: Path, fake_gpu: None,
                                  monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """On: two new shapes while serving (then a known one, replayed) -> one file named after the runner, one
    segment per shape in capture order. Either switch off, or the package not installed (the control:
    sglang writes nothing): the same captures, no file."""
    module, serve, labels = CASES[name]
    if module == DSPARK:
        request.getfixturevalue("fake_dspark_gpu")
    cls = real_sglang.class_or_skip(module, name)
    with real_sglang.activation(case, monkeypatch) as flag, real_sglang.sglang_config(enable_profile_cuda_graph=flag):
        from sglang.srt.runtime_context import get_parallel

        with get_parallel().override(tp_group=cpu_shims.TpGroup()):
            _, graphs = serve(cls)
    assert wait_for_exports(60)
    assert graphs == 2  # the real lazy path captured two shapes
    assert real_sglang.lazy_file_labels(trace_dir, name, case) == (labels if case == "on" else None)
