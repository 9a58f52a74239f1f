"""Runners sglang never profiles (PROFILE_CAPTURE rows), against the real installed sglang.

``CPUGraphRunner`` captures for real on CPU: its real ``capture()`` runs sglang's per-batch-size loop,
``patch_model()`` (a real ``torch.compile`` of a tiny model's forward, inductor included) and
``capture_one_batch_size()`` with a real ``ForwardBatch``; only what a scheduler process would have
built is stood in (``cpu_shims``: a one-rank TP group, the attention backend's CPU-graph hooks, a tiny
model). The first capture in a process pays the inductor compile (minutes on 2 busy cores); later ones
hit dynamo's cache (seconds).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import logging
import types
from pathlib import Path
from typing import Any

import cpu_shims
import pytest
import real_sglang
import torch

from tests.trace_files import load_trace, range_names

CPU_GRAPH = "sglang.srt.model_executor.cpu_graph_runner"


def capture_cpu_graphs(profile_flag: bool = True, capture_bs: tuple[int, ...] = (1, 2)) -> Any:
    """The real ``CPUGraphRunner.capture()``, on a runner built without ``__init__`` (which would also capture)
    from the attributes its ``__init__`` sets that ``capture()`` reads, for a decode-only text model on CPU
    (``profile_flag``: what ``__init__`` stores from ``--enable-profile-cuda-graph``), in what a scheduler
    process has when it captures: rank 0 of one, and (0.5.23) a published config, made with
    ``create_context`` / ``use_context`` so this process's own context is left alone. Returns the runner."""
    cls = real_sglang.class_or_skip(CPU_GRAPH, "CPUGraphRunner")
    from sglang.srt.model_executor.forward_batch_info import CaptureHiddenMode, ForwardMode
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    runner: Any = object.__new__(cls)
    runner.model_runner = types.SimpleNamespace(
        device="cpu", gpu_id=0, tp_rank=0, pp_rank=0, pp_size=1, is_draft_worker=False,
        model=cpu_shims.tiny_model(), attn_backend=cpu_shims.CpuGraphAttention(), tp_group=cpu_shims.TpGroup(),
        spec_algorithm=SpeculativeAlgorithm.NONE, req_to_token_pool=None, token_to_kv_pool=None,
        kv_index_translator=types.SimpleNamespace(bind_runner_slots=lambda forward_batch: None),
        server_args=types.SimpleNamespace(enable_profile_cuda_graph=profile_flag, tp_size=1, pp_size=1, dp_size=1),
    )
    runner.device = "cpu"
    runner.enable_profile_cuda_graph = profile_flag
    runner.capture_bs = list(capture_bs)
    runner.graphs, runner.graphs_cross, runner.output_buffers = {}, {}, {}
    runner.captured_forward_batches, runner.captured_forward_batches_cross = {}, {}
    runner.is_encoder_decoder = False
    runner.encoder_lens = None
    runner.num_tokens_per_bs = runner.captured_req_width = 1
    runner.capture_forward_mode = ForwardMode.DECODE
    runner.capture_hidden_mode = CaptureHiddenMode.NULL
    max_bs = max(capture_bs)
    runner.input_ids = torch.zeros((max_bs,), dtype=torch.int64)
    runner.req_pool_indices = torch.zeros((max_bs,), dtype=torch.int64)
    runner.seq_lens = torch.ones((max_bs,), dtype=torch.int64)
    runner.out_cache_loc = torch.zeros((max_bs,), dtype=torch.int64)
    runner.positions = torch.zeros((max_bs,), dtype=torch.int64)
    runner.mrope_positions = torch.zeros((3, max_bs), dtype=torch.int64)
    runner.num_token_non_padded = torch.zeros((1,), dtype=torch.int64)
    runner.custom_mask = torch.ones((max_bs * 2,), dtype=torch.bool)
    with contextlib.ExitStack() as scope:
        scope.enter_context(real_sglang.patched_attributes(importlib.import_module(CPU_GRAPH), cpu_shims.TP_RANK_0))
        runtime_context = real_sglang.import_optional("sglang.srt.runtime_context")  # 0.5.14+
        if runtime_context is not None:
            if hasattr(runtime_context, "use_context"):
                from sglang.srt.server_args import ServerArgs

                args = ServerArgs(model_path="dummy", device="cpu")  # no download: nothing reads the model
                scope.enter_context(runtime_context.use_context(runtime_context.create_context(args, role="test")))
            parallel = runtime_context.get_parallel()
            scope.enter_context(parallel.override(tp_rank=0, tp_group=runner.model_runner.tp_group))
        runner.capture()
    return runner


@pytest.mark.parametrize("case", real_sglang.CASES)
def test_cpu_graph_runner_real_capture(
    case: str, trace_dir: Path, monkeypatch: pytest.MonkeyPatch, profilers_started: list[Any]
) -> None:
    """On, the real capture path under --enable-profile-cuda-graph: one file, the runner's own name, one
    segment per captured batch size (largest first, as sglang captures), torch.compile really ran. Either
    switch off: the capture runs, no profiler is started, nothing is written. The control (our package not
    installed, flag and switch on): sglang itself writes no capture trace. status() says what we do."""
    with real_sglang.activation(case, monkeypatch) as flag:
        runner = capture_cpu_graphs(profile_flag=flag)
        real_sglang.check_profiled_row("CPUGraphRunner", case)
    assert sorted(runner.graphs) == [1, 2] and all(callable(g) for g in runner.graphs.values())
    path = _the_one_trace(case, "CPUGraphRunner", trace_dir, profilers_started)
    if path is None:
        assert not (trace_dir / "graph_capture_profile").exists()
        return
    trace = load_trace(path)
    labels = [a for a in range_names(trace) if a.startswith("capture::")]  # dynamo adds its own ranges
    assert [label.split(",")[0] for label in labels] == ["capture::bs=2", "capture::bs=1"], labels
    assert profilers_started[0]["record_shapes"] is True
    assert trace["capture_trace"]["runner"] == "CPUGraphRunner"
    assert trace["capture_trace"]["capture_bs"] == [1, 2]
    mm = [e for e in trace["traceEvents"] if e.get("cat") == "cpu_op" and e["name"] in ("aten::addmm", "aten::mm")]
    assert mm and all("Input Dims" in e["args"] for e in mm)  # record_shapes, the model's own ops


def test_cpu_graph_runner_defers_to_an_active_profiler(
    trace_dir: Path, installed: None, caplog: pytest.LogCaptureFixture
) -> None:
    """Nested profilers: with a profiler already recording in this process, ours does not start and we
    write nothing; the per-shape ranges land in that profile."""
    with caplog.at_level(logging.DEBUG, logger="mixins"):
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as outer:
            capture_cpu_graphs()
    assert real_sglang.trace_names(trace_dir) == []
    assert "already recording in this process" in caplog.text
    assert {e.name.split(",")[0] for e in outer.events()} >= {"capture::bs=2", "capture::bs=1"}


# -- the token-count runners' real capture(), and the real capture methods of the runners without one -------


def _the_one_trace(case: str, name: str, trace_dir: Path, profilers_started: list[Any]) -> Path | None:
    """``real_sglang.the_one_trace``, from our one profiler when on; no profiler started otherwise."""
    assert len(profilers_started) == (1 if case == "on" else 0)
    return real_sglang.the_one_trace(trace_dir, name, case)


def _token_capture(cls: type, flag: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A prefill / piecewise runner without ``__init__`` (what its ``capture()`` reads; releases with a published
    config, 0.5.14+, read the flag from it, older ones from server_args), then its real ``capture()``."""
    runner: Any = object.__new__(cls)
    runner.model_runner = types.SimpleNamespace(
        device="cpu", gpu_id=0, tp_rank=0, pp_rank=0, pp_size=1, model=cpu_shims.tiny_model(),
        tp_group=cpu_shims.TpGroup(),  # 0.5.5's piecewise capture() reads its custom all-reduce
        server_args=types.SimpleNamespace(enable_cudagraph_gc=False, enable_profile_cuda_graph=flag),
    )
    if importlib.util.find_spec("sglang.srt.runtime_context") is not None:
        del runner.model_runner.server_args  # 0.5.14+: the runner reads get_exec() / get_flags()
    runner.capture_num_tokens = [64, 256]  # ascending, as sglang keeps them
    runner.max_context_size = None
    runner._capture_chunked_prefix = True  # prefill: each token count again per prefix-chunk variant
    runner._prefix_capture_variants = [2]
    runner.backend = cpu_shims.CaptureBackend()
    with real_sglang.patched_attributes(importlib.import_module(cls.__module__), cpu_shims.TOKEN_CAPTURE):
        with real_sglang.sglang_config(enable_profile_cuda_graph=flag):
            runner.capture()


def _breakable_capture(cls: type, flag: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``BreakableCudaGraphRunner`` without ``__init__`` (which resolves the model's layer stack, allocates
    the input buffers, warms up on the GPU, then calls ``_capture_all()``), then its real ``_capture_all()``."""
    runner: Any = object.__new__(cls)
    runner.model_runner = types.SimpleNamespace(
        device="cpu", gpu_id=0, tp_rank=0, pp_rank=0, pp_size=1, tp_group=cpu_shims.TpGroup(),
        server_args=types.SimpleNamespace(enable_cudagraph_gc=True, enable_profile_cuda_graph=flag),
    )
    runner.device = "cpu"
    runner.capture_num_tokens = [64, 256]  # sorted, as __init__ keeps them
    runner.graphs, runner.output_buffers = {}, {}
    with real_sglang.patched_attributes(importlib.import_module(cls.__module__), cpu_shims.TOKEN_CAPTURE):
        runner._capture_all()
    assert sorted(runner.graphs) == [64, 256]


def _one_graph_capture(cls: type, flag: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner built as the multi-layer EAGLE draft worker builds it, from what it reads of the worker
    (device, step count, one draft-extend attention backend per step, ``server_args``): its real ``__init__``
    calls the real ``_init_and_capture()`` (per-step runners, then one graph per batch size), under a
    published config (0.5.14+) with the flag."""
    step_cls = real_sglang.load_class(real_sglang.MULTI_LAYER, "MultiLayerEagleDraftExtendCudaGraphRunner")
    monkeypatch.setattr(cls, "_create_runner", cpu_shims.step_runner_stand_in(step_cls, [1, 2], flag))
    monkeypatch.setattr(cls, "_allocate_buffers", cpu_shims.shared_buffers_stand_in)
    worker = types.SimpleNamespace(
        device="cpu", gpu_id=0, speculative_num_steps=2,
        draft_extend_attn_backend_list=[types.SimpleNamespace() for _ in range(2)],
        server_args=types.SimpleNamespace(enable_profile_cuda_graph=flag),
    )
    with real_sglang.patched_attributes(importlib.import_module(cls.__module__), cpu_shims.ONE_GRAPH_CAPTURE):
        with real_sglang.sglang_config(enable_profile_cuda_graph=flag):
            runner = cls(worker)
    assert [r.step for r in runner.runners] == [0, 1]


#: runner -> (module, per-shape method, what runs its real capture path, what the per-shape stand-in returns
#: where the real method returns something else than the output, the segment labels in capture order)
SHAPES: dict[str, tuple[str, str, Any, Any, list[str]]] = {
    "PiecewiseCudaGraphRunner": (real_sglang.PIECEWISE, "capture_one_batch_size", _token_capture, None,
                                 ["capture::tokens=256", "capture::tokens=64"]),
    "PrefillCudaGraphRunner": (real_sglang.PREFILL, "capture_one_shape", _token_capture, None, [
        "capture::tokens=256", "capture::tokens=256,prefix_num_chunks=2", "capture::tokens=64",
        "capture::tokens=64,prefix_num_chunks=2"]),
    # __init__ warms up on the GPU, then calls _capture_all(), which our row wraps
    "BreakableCudaGraphRunner": (real_sglang.BREAKABLE, "_capture_one", _breakable_capture, cpu_shims.breakable_graph,
                                 ["capture::tokens=256", "capture::tokens=64"]),
    # the real __init__ -> _init_and_capture(): per-step runners, then one graph per batch size
    "OneGraphMultiLayerEagleMultiStepDraftExtendCudaGraphRunner": (
        real_sglang.MULTI_LAYER, "_capture_one_graph", _one_graph_capture, None, ["capture::bs=2", "capture::bs=1"]),
}


@pytest.mark.parametrize("case", real_sglang.CASES)
@pytest.mark.parametrize("name", list(SHAPES))
def test_runner_real_capture(
    name: str, case: str, trace_dir: Path, monkeypatch: pytest.MonkeyPatch, profilers_started: list[Any],
) -> None:
    """The prefill / piecewise runners' real ``capture()``, ``BreakableCudaGraphRunner``'s real
    ``_capture_all()`` and the single-graph multi-layer EAGLE draft-extend runner's real ``__init__`` ->
    ``_init_and_capture()``, only the per-shape CUDA-graph capture (and the GPU parts) stood in. On: exactly
    one file named after the runner, one range per shape (largest first, as sglang captures; prefill's
    prefix-chunk variants labelled). Either switch off, or our package not installed (the control): the
    capture runs, no profiler starts, nothing is written. status() says what we do."""
    module, method, run, returns, labels = SHAPES[name]
    cls = real_sglang.class_or_skip(module, name)
    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(cls, method, cpu_shims.per_shape_stand_in(vars(cls)[method], calls, returns))
    with real_sglang.activation(case, monkeypatch) as flag:
        run(cls, flag, monkeypatch)
        real_sglang.check_profiled_row(name, case)
    sizes = [int(label.split("=")[1].split(",")[0]) for label in labels]
    assert [call[0] for call in calls] == sizes  # the real loop ran, largest first
    path = _the_one_trace(case, name, trace_dir, profilers_started)
    if path is None:
        return
    trace = load_trace(path)
    assert range_names(trace) == labels
    assert trace["capture_trace"]["runner"] == name
