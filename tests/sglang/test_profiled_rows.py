"""Runners sglang never profiles (PROFILE_CAPTURE / PROFILE_LAZY_CAPTURE rows), against the real installed sglang:
one table of every such runner, one test over it, plus the CPU graph runner's in-depth checks.

``CPUGraphRunner`` captures for real on CPU: its real ``capture()`` runs sglang's per-batch-size loop,
``patch_model()`` (a real ``torch.compile`` of a tiny model's forward, inductor included) and
``capture_one_batch_size()`` with a real ``ForwardBatch``; only what a scheduler process would have
built is stood in (``cpu_shims``: a one-rank TP group, the attention backend's CPU-graph hooks, a tiny
model). The first capture in a process pays the inductor compile (minutes on 2 busy cores); later ones
hit dynamo's cache (seconds).

The prefill / piecewise runners' real ``capture()``, ``BreakableCudaGraphRunner``'s real ``_capture_all()`` and
the single-graph multi-layer EAGLE draft-extend runner's real ``__init__`` -> ``_init_and_capture()`` run with
only the per-shape CUDA-graph capture (and the GPU parts) stood in.

The runners that capture lazily, one graph per new input shape while serving: the vision encoders, the LLM
runtime's ``RowBucketGraphRunner`` (one graph per row bucket, DeepSeek-V4's replay tail) and DSpark's
``DsparkSamplingAcceptGraph`` (one graph per verify batch size; both 0.5.23), and the diffusion runtime's
(``sglang.multimodal_gen``) breakable DiT runner and three VLA runners. Each one's real serving path runs:
``run()`` / ``capture()`` / ``capture_or_run()`` sees a new shape, calls the real ``create_graph`` / ``_capture``
(buffers, warm-up, the captured body) and replays a known one. STOOD
IN, for the duration of a test, only what needs a GPU: ``torch.cuda``'s graph, stream, synchronize, pool and
memory calls (``fake_gpu``); each module's own CUDA-graph helpers (``BreakableCUDAGraph`` /
``BreakableCUDAGraphCapture``, ``graph_capture``, the global graph pool and capture stream); DSpark's static
verify epilogue (``StandInEpilogue``); the VLA inputs' CUDA device (``StandInCudaTensor``: those runners run
eagerly for any other device); torch_npu for the NPU encoder. The captured bodies run eagerly on CPU; the
encoders and models are tiny CPU modules with the attributes the runners read.

The diffusion runtime has no ``--enable-profile-cuda-graph``: our switch alone opts in, so "off" there is the
switch off, or our package not installed (the control: sglang itself writes nothing).
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import sys
import types
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import cpu_shims
import pytest
import real_sglang
import torch

from mixins import wait_for_exports
from tests.trace_files import load_trace, range_names

CPU_GRAPH = "sglang.srt.model_executor.cpu_graph_runner"


def capture_cpu_graphs(profile_flag: bool = True, capture_bs: tuple[int, ...] = (1, 2)) -> Any:
    """The real ``CPUGraphRunner.capture()``, on a runner built without ``__init__`` (which would also capture)
    from the attributes its ``__init__`` sets that ``capture()`` reads, for a decode-only text model on CPU
    (``profile_flag``: what ``__init__`` stores from ``--enable-profile-cuda-graph``), in what a scheduler
    process has when it captures: rank 0 of one, and (0.5.16+) a published config that leaves this process's
    own context as it was (``real_sglang.sglang_config``). Returns the runner."""
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
    with real_sglang.patched_attributes(importlib.import_module(CPU_GRAPH), cpu_shims.TP_RANK_0):
        with real_sglang.sglang_config(tp_group=runner.model_runner.tp_group):
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
    assert len(profilers_started) == (1 if case == "on" else 0)
    path = real_sglang.the_one_trace(trace_dir, "CPUGraphRunner", case)
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


VIT = "sglang.srt.multimodal.vit_cuda_graph_runner"
INTERN_VIT = "sglang.srt.multimodal.internvl_vit_cuda_graph_runner"
KIMI_VIT = "sglang.srt.multimodal.kimi_k3_vit_cuda_graph_runner"
H, HEADS, HEAD_DIM = 8, 2, 4


# -- tiny CPU encoders with what each runner reads -----------------------------------------------------------


class Block(torch.nn.Module):
    """A transformer block's call signature; a real matmul inside."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(H, H)
        self.attn = types.SimpleNamespace(qkv_backend_name="triton_attn", num_attention_heads_per_partition=HEADS,
                                          head_size=HEAD_DIM)

    def forward(self, x: Any, cu_seqlens: Any = None, position_embeddings: Any = None,
                rotary_pos_emb_cos: Any = None, rotary_pos_emb_sin: Any = None, output_ws: Any = None) -> Any:
        return self.proj(x)


class TinyViT(torch.nn.Module):
    """Qwen2.5-VL's vision tower as ViTCudaGraphRunner reads it (no window attention, no deepstack)."""

    use_data_parallel = True  # 0.5.16+: capture locally, without the TP group's communicator

    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block(), Block()])
        self.merger = torch.nn.Linear(H, 4)

    device = torch.device("cpu")
    dtype = torch.float32


class InternLayer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(H, H)
        self.attn = types.SimpleNamespace(attn=types.SimpleNamespace(
            qkv_backend_name="triton_attn", num_attention_heads_per_partition=HEADS, head_size=HEAD_DIM))

    def forward(self, x: Any, cu_seqlens: Any = None, output_ws: Any = None) -> Any:
        return self.proj(x)


class TinyInternEncoder(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList([InternLayer(), InternLayer()])


class TinyKimiTower(torch.nn.Module):
    """Kimi-K3's vision tower as KimiK3ViTCudaGraphRunner calls it."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(H, H)

    def prepare_forward_metadata(self, grid_thws: Any, *, grid_thw_list: Any, total_tokens: int, dtype: Any) -> Any:
        return types.SimpleNamespace(total_tokens=total_tokens, position_embeddings=None)

    def _forward_eager(self, pixel_values: Any, grid_thws: Any, *, grid_thw_list: Any, forward_metadata: Any) -> Any:
        return [self.proj(pixel_values)]


def serve_vit(cls: type, seq_lens: tuple[int, ...]) -> Any:
    """ViTCudaGraphRunner.run() once per input, as Qwen2.5-VL's forward calls it: one image each, then two."""
    runner = cls(TinyViT())
    for n in seq_lens:
        images = 2 if n % 2 == 0 and n > 8 else 1
        cu = torch.tensor([0, *([n // 2] if images == 2 else []), n], dtype=torch.int32)
        cos, sin = torch.ones(n, HEAD_DIM), torch.zeros(n, HEAD_DIM)
        runner.run(torch.ones(n, H), cu, None, None, rotary_pos_emb_cos=cos, rotary_pos_emb_sin=sin)
    return runner


def serve_intern_vit(cls: type, tiles: tuple[int, ...]) -> Any:
    runner = cls(TinyInternEncoder())
    for b in tiles:
        runner.run(torch.ones(b, 5, H))
    return runner


def serve_kimi_vit(cls: type, grids: tuple[tuple[tuple[int, int, int], ...], ...]) -> Any:
    runner = cls(TinyKimiTower(), capacity=4, min_hits=1)
    for grid in grids:
        patches = sum(t * h * w for t, h, w in grid)
        runner.run(torch.ones(patches, H), torch.tensor(grid), grid)
    return runner


@contextmanager
def profile_flag(on: bool, mm_attention_backend: str = "triton_attn") -> Iterator[None]:
    """--enable-profile-cuda-graph as the release publishes it: the runtime context (0.5.14+), else the
    scheduler's global server args (set_global_server_args_for_scheduler), with the ViT attention backend
    the runner under test supports (the NPU runner: ``ascend_attn``)."""
    if importlib.util.find_spec("sglang.srt.runtime_context") is not None:
        with real_sglang.sglang_config(enable_profile_cuda_graph=on):
            yield
        return
    server_args = importlib.import_module("sglang.srt.server_args")
    saved = vars(server_args).get("_global_server_args")
    # <= 0.5.13 the runners read mm_attention_backend there too, and the TP group's custom all-reduce.
    server_args._global_server_args = types.SimpleNamespace(  # type: ignore[attr-defined]
        enable_profile_cuda_graph=on, mm_attention_backend=mm_attention_backend)
    shims = {"get_tp_group": cpu_shims.TpGroup}
    try:
        with real_sglang.patched_attributes(importlib.import_module(VIT), shims), \
                real_sglang.patched_attributes(importlib.import_module(INTERN_VIT), shims):
            yield
    finally:
        server_args._global_server_args = saved  # type: ignore[attr-defined]


# -- the LLM runtime's other lazy captures (sglang 0.5.23) -------------------------------------------------

ROW_BUCKET = "sglang.srt.model_executor.runner.row_bucket_graph_runner"
DSPARK = "sglang.srt.speculative.dspark_components.dspark_sampling_accept_graph"


@contextmanager
def llm_runtime(on: bool) -> Iterator[None]:
    """--enable-profile-cuda-graph in a published config, and a one-rank TP group."""
    with real_sglang.sglang_config(tp_group=cpu_shims.TpGroup(), enable_profile_cuda_graph=on):
        yield


def serve_row_bucket(cls: type, *_args: Any) -> int:
    """Two steps of 3 rows with buckets of 4 up to 8: the first captures buckets 8 and 4 (largest first, as
    run() does), the second replays bucket 4. Returns the graph count."""
    runner = cls(row_step=4, max_rows=8, label="test replay tail")
    batch = types.SimpleNamespace(num_token_non_padded=None, attn_tp_sequence_sharded=False)
    weight = torch.ones(2, 2)
    for _ in range(2):
        out = runner.run(key=("layer", 0), live=[torch.ones(3, 2)], forward_batch=batch,
                         body=lambda inputs, b: [inputs[0] @ weight], context=lambda b: nullcontext())
        assert out[0].shape == (3, 2)
    return len(runner._graphs)


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


def serve_dspark(cls: type, *_args: Any) -> int:
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
    return len(graph._graphs)


# -- the diffusion runtime (sglang.multimodal_gen) ------------------------------------------------------------

BCG = "sglang.multimodal_gen.runtime.breakable_cuda_graph.runner"
VLA = "sglang.multimodal_gen.runtime.vla.cuda_graph"
PREFIX_CACHE = "sglang.multimodal_gen.runtime.vla.prefix_cache"
D = 4


class StandInCudaTensor(torch.Tensor):
    """STANDS IN for a CUDA tensor: a CPU tensor whose ``device`` says cuda."""

    @property
    def device(self) -> torch.device:  # type: ignore[override]
        return torch.device("cuda")


def on_cuda(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.as_subclass(StandInCudaTensor)


# -- the real serving paths, two new shapes then a known one ---------------------------------------------------


class TinyDiT(torch.nn.Module):
    """A DiT's call signature (``hidden_states``, ``encoder_hidden_states``, ``timestep``); a real matmul."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(D, D)

    def forward(self, hidden_states: Any, encoder_hidden_states: Any, timestep: Any) -> Any:
        return self.proj(hidden_states) + encoder_hidden_states.mean() * timestep


def serve_diffusion(cls: type, *_args: Any) -> int:
    """The denoising stage's warm-up: capture() per signature (a 2-frame video latent, then a 4-frame one,
    then the first again, known), then the eager runner replays."""
    runner = cls(TinyDiT(), torch.device("cuda"))
    for frames in (2, 4, 2):
        kwargs = {"hidden_states": on_cuda(torch.ones(1, 3, frames, 2, D)),
                  "encoder_hidden_states": on_cuda(torch.ones(1, 8, D)), "timestep": on_cuda(torch.ones(1))}
        assert runner.capture(**kwargs)
        assert runner(**kwargs).shape == (1, 3, frames, 2, D)
    return len(runner.entries)


def prefix_context(prefix_len: int, values: Any = None) -> Any:
    cache = importlib.import_module(PREFIX_CACHE)
    kv = on_cuda(torch.ones(1, prefix_len, D)) if values is None else values
    return cache.PrefixContext(past_key_values=cache.VLADensePrefixCache(((kv, kv, None),)),
                               prefix_pad_masks=on_cuda(torch.ones(1, prefix_len, dtype=torch.bool)),
                               prefix_len=prefix_len)


def serve_vla_prefix(cls: type, *_args: Any) -> int:
    """pi05's encode_prefix as it calls the runner: (image, image mask, tokens, token mask), batch 1, two
    prompt buckets then the first again."""
    vla = importlib.import_module(VLA)
    runner = cls(enabled=True, max_entries=4)
    weight = torch.ones(D, D)

    def encode(inputs: tuple[Any, ...]) -> Any:
        return prefix_context(inputs[2].shape[1], (inputs[0].flatten(1)[:, :D] @ weight).expand(1, -1, -1))

    for tokens in (8, 16, 8):
        inputs = tuple(on_cuda(t) for t in (torch.ones(1, 3, D, D), torch.ones(1, dtype=torch.bool),
                                             torch.ones(1, tokens, dtype=torch.long),
                                             torch.ones(1, tokens, dtype=torch.bool)))
        signature = vla.VLAPrefixGraphSignature(
            batch_size=1, input_shapes=tuple(tuple(t.shape) for t in inputs),
            input_dtypes=tuple(str(t.dtype) for t in inputs), static_layout=(1, True, True, tokens),
            parallel_layout="v1")
        assert runner.capture_or_run(signature, encode, inputs).prefix_len == tokens
    return runner.cache_info().captures


def serve_vla_denoise(cls: type, *_args: Any) -> int:
    """pi05's denoise_step: one signature per (batch, prefix, action chunk); ten steps each replay it."""
    vla = importlib.import_module(VLA)
    runner = cls(enabled=True, max_entries=4)

    def step(context: Any, x_t: Any, timestep: Any) -> Any:
        return x_t * timestep + context.prefix_pad_masks.sum()

    for prefix_len in (8, 16, 8):
        context = prefix_context(prefix_len)
        x_t = on_cuda(torch.ones(1, 10, 7))
        signature = vla.VLADenoiseGraphSignature(batch_size=1, prefix_len=prefix_len, prefix_full_attention=True,
                                                 action_horizon=10, action_dim=7, dtype="float32",
                                                 parallel_layout="v1")
        for t in range(3):
            out = runner.capture_or_run(signature, step, context, x_t, on_cuda(torch.tensor(float(t))))
            assert out.shape == (1, 10, 7)
    return runner.cache_info().captures


def serve_vla_tensor(cls: type, *_args: Any) -> int:
    """FLUX 3 action's observation encoder: run(fn, inputs) per frame size, the first again replays."""
    runner = cls("FLUX 3 observation", enabled=True, max_entries=4)
    weight = torch.ones(D, D)
    for rows in (2, 6, 2):
        out = runner.run(lambda frame, ids: (frame @ weight, ids + 1),
                         (on_cuda(torch.ones(rows, D)), on_cuda(torch.zeros(rows, dtype=torch.long))))
        assert out[0].shape == (rows, D)
    return runner.cache_info().captures


# -- the NPU vision encoder: its module imports torch_npu, stood in here ------------------------------------

VIT_NPU = "sglang.srt.hardware_backend.npu.graph_runner.vit_npu_graph_runner"


def stand_in_torch_npu() -> types.ModuleType:
    """STANDS IN for torch_npu (Ascend's torch backend, which needs an NPU): ``torch_npu.npu.NPUGraph`` and
    ``torch_npu.npu.graph``, as vit_npu_graph_runner uses them; the captured blocks run eagerly on CPU."""
    module = types.ModuleType("torch_npu")
    module.npu = types.SimpleNamespace(  # type: ignore[attr-defined]
        NPUGraph=cpu_shims.StandInGraph, graph=cpu_shims.stand_in_scope)
    return module


class AscendBlock(Block):
    def __init__(self) -> None:
        super().__init__()
        self.attn.qkv_backend_name = "ascend_attn"  # the only backend ViTNpuGraphRunner captures


@pytest.fixture
def vit_npu(monkeypatch: pytest.MonkeyPatch) -> Iterator[type]:
    """The real ViTNpuGraphRunner, imported over the torch_npu stand-in, then forgotten again (so no other test
    sees a module this environment cannot import)."""
    from mixins.sglang_targets import TARGETS

    (row,) = [t for t in TARGETS if t.cls == "ViTNpuGraphRunner"]
    release = metadata.version("sglang").split(".post")[0]
    if release not in row.read_in:  # older releases have no such module (and their vision imports need vllm)
        pytest.skip(f"no ViTNpuGraphRunner row for sglang {release}")
    # What the module imports from sglang, imported first: sglang asks find_spec("torch_npu") at import
    # time in places (is_npu()), which must keep answering for this CPU machine.
    for name in (VIT, "sglang.srt.layers.attention.vision",
                 "sglang.srt.distributed.device_communicators.pynccl_allocator"):
        real_sglang.import_optional(name)
    monkeypatch.setitem(sys.modules, "torch_npu", stand_in_torch_npu())
    module = real_sglang.import_optional(VIT_NPU)
    if module is None:
        pytest.skip(f"{VIT_NPU} does not exist in this sglang")
    try:
        cls = module.ViTNpuGraphRunner
        monkeypatch.setattr(cls, "_graph_memory_pool", ("stand-in NPU graph pool",))  # graph_pool_handle()
        yield cls
    finally:
        sys.modules.pop(VIT_NPU, None)
        parent = sys.modules.get(VIT_NPU.rpartition(".")[0])
        if parent is not None and hasattr(parent, "vit_npu_graph_runner"):
            delattr(parent, "vit_npu_graph_runner")


def serve_vit_npu(cls: type) -> Any:
    """ViTNpuGraphRunner.run() over Ascend blocks (the only backend it captures), one image each."""
    vit = TinyViT()
    vit.blocks = torch.nn.ModuleList([AscendBlock(), AscendBlock()])
    runner = cls(vit)
    for n in (8, 16, 8):
        cu = torch.tensor([0, n], dtype=torch.int32)
        runner.run(torch.ones(n, H), cu, rotary_pos_emb_cos=torch.ones(n, HEAD_DIM),
                   rotary_pos_emb_sin=torch.zeros(n, HEAD_DIM))
    return runner


# -- one table, one test: every runner we profile ------------------------------------------------------------

ROW_BUCKET_GPU = ((ROW_BUCKET, {
    **dict.fromkeys(("graph_capture", "graph_pool_capture_scope", "graph_pool_replay_scope",
                     "BreakableCUDAGraphCapture"), cpu_shims.stand_in_scope),
    "BreakableCUDAGraph": cpu_shims.StandInGraph, "get_or_create_global_graph_memory_pool": lambda *a: "fake pool",
    "set_graph_pool_id": lambda *a: None, "get_or_create_global_graph_capture_stream": lambda *a: None,
    "get_attn_backend": lambda: types.SimpleNamespace(forward_metadata=None),
}),)
DIFFUSION_GPU = (
    (VLA, {"get_or_create_global_graph_memory_pool": lambda *a: "stand-in pool", "set_graph_pool_id": lambda *a: None}),
    (BCG, {"BreakableCUDAGraph": cpu_shims.StandInGraph, "BreakableCUDAGraphCapture": cpu_shims.stand_in_scope,
           "enable_breakable_cuda_graph": cpu_shims.stand_in_scope}),
)


@dataclass(frozen=True)
class Profiled:
    """One runner we profile: its module; what drives its real capture path (given the class, whether
    --enable-profile-cuda-graph is to be on, the test's monkeypatch; a lazy runner is served two new shapes, then
    a known one, and returns the graphs it holds); the segment labels in capture order; and what its runtime
    needs stood in or set for the test."""

    module: str
    drive: Callable[[type, bool, pytest.MonkeyPatch], int | None]
    labels: list[str]
    scope: Callable[[bool], AbstractContextManager[Any]] = lambda on: nullcontext()  # given the flag
    gpu: tuple[tuple[str, dict[str, Any]], ...] = ()  # (module, its CUDA-graph helpers stood in)
    background: bool = False  # exports in the background (the default), as a server has them
    runtime_has_flag: bool = True  # the runtime has --enable-profile-cuda-graph
    fixture: str | None = None  # what imports the module where this machine cannot (torch_npu stood in)
    #: a runner with a capture method (PROFILE_CAPTURE): its per-shape method, stood in (one CUDA graph per
    #: shape), and what the stand-in returns where the real method returns something else than the output
    per_shape: tuple[str, Callable[[Any], Any] | None] | None = None


PROFILED = {
    # -- runners with a capture method: one profile around the whole capture, largest shape first
    "PiecewiseCudaGraphRunner": Profiled(real_sglang.PIECEWISE, _token_capture,
                                         ["capture::tokens=256", "capture::tokens=64"],
                                         per_shape=("capture_one_batch_size", None)),
    "PrefillCudaGraphRunner": Profiled(real_sglang.PREFILL, _token_capture, [
        "capture::tokens=256", "capture::tokens=256,prefix_num_chunks=2", "capture::tokens=64",
        "capture::tokens=64,prefix_num_chunks=2"], per_shape=("capture_one_shape", None)),
    # __init__ warms up on the GPU, then calls _capture_all(), which our row wraps
    "BreakableCudaGraphRunner": Profiled(real_sglang.BREAKABLE, _breakable_capture,
                                         ["capture::tokens=256", "capture::tokens=64"],
                                         per_shape=("_capture_one", cpu_shims.breakable_graph)),
    # the real __init__ -> _init_and_capture(): per-step runners, then one graph per batch size
    "OneGraphMultiLayerEagleMultiStepDraftExtendCudaGraphRunner": Profiled(
        real_sglang.MULTI_LAYER, _one_graph_capture, ["capture::bs=2", "capture::bs=1"],
        per_shape=("_capture_one_graph", None)),
    # -- lazy captures: one profile per new shape while serving
    "ViTCudaGraphRunner": Profiled(VIT, lambda cls, *_: len(serve_vit(cls, (8, 16, 8)).block_graphs),
                                   ["capture::tokens=8,images=1", "capture::tokens=16,images=2"], profile_flag,
                                   background=True),
    "InternViTCudaGraphRunner": Profiled(INTERN_VIT, lambda cls, *_: len(serve_intern_vit(cls, (1, 3, 1)).graphs),
                                         ["capture::tokens=5,tiles=1", "capture::tokens=15,tiles=3"], profile_flag,
                                         background=True),
    "KimiK3ViTCudaGraphRunner": Profiled(
        KIMI_VIT, lambda cls, *_: len(serve_kimi_vit(cls, (((1, 2, 2),), ((1, 2, 2), (1, 2, 4)), ((1, 2, 2),))).graphs),
        ["capture::tokens=4,images=1", "capture::tokens=12,images=2"], profile_flag, background=True),
    "RowBucketGraphRunner": Profiled(ROW_BUCKET, serve_row_bucket, ["capture::tokens=8", "capture::tokens=4"],
                                     llm_runtime, ROW_BUCKET_GPU),
    "DsparkSamplingAcceptGraph": Profiled(DSPARK, serve_dspark, ["capture::bs=2", "capture::bs=4"], llm_runtime,
                                          (*ROW_BUCKET_GPU, (DSPARK, {"graph_capture": cpu_shims.stand_in_scope}))),
    "DiffusionBreakableCudaGraphRunner": Profiled(BCG, serve_diffusion, [
        "capture::bs=1,frames=2,height=2,width=4,prompt_tokens=8",
        "capture::bs=1,frames=4,height=2,width=4,prompt_tokens=8"], gpu=DIFFUSION_GPU, runtime_has_flag=False),
    "VLAPrefixGraphRunner": Profiled(VLA, serve_vla_prefix, ["capture::bs=1,tokens=8,images=1",
                                                             "capture::bs=1,tokens=16,images=1"],
                                     gpu=DIFFUSION_GPU, runtime_has_flag=False),
    "VLADenoiseGraphRunner": Profiled(VLA, serve_vla_denoise, [
        "capture::bs=1,prefix_tokens=8,horizon=10,action_dim=7",
        "capture::bs=1,prefix_tokens=16,horizon=10,action_dim=7"], gpu=DIFFUSION_GPU, runtime_has_flag=False),
    "VLATensorGraphRunner": Profiled(VLA, serve_vla_tensor, ["capture::inputs=2,elements=10",
                                                             "capture::inputs=2,elements=30"],
                                     gpu=DIFFUSION_GPU, runtime_has_flag=False),
    # overrides create_graph without super(), so the ViT row never sees it: its own row, CPU side only
    "ViTNpuGraphRunner": Profiled(VIT_NPU, lambda cls, *_: len(serve_vit_npu(cls).block_graphs),
                                  ["capture::tokens=8,images=1", "capture::tokens=16,images=1"],
                                  lambda on: profile_flag(on, mm_attention_backend="ascend_attn"), background=True,
                                  fixture="vit_npu"),
}


@pytest.mark.parametrize(("name", "case"), [
    pytest.param(name, case, id=f"{name}-{case}") for name, row in PROFILED.items() for case in real_sglang.CASES
    if row.runtime_has_flag or case != "--enable-profile-cuda-graph off"
])
def test_profiled_runner(name: str, case: str, trace_dir: Path, fake_gpu: None, monkeypatch: pytest.MonkeyPatch,
                         profilers_started: list[Any], request: pytest.FixtureRequest) -> None:
    """On: the real capture path (a lazy runner: two new shapes while serving, then a known one, replayed) ->
    exactly one file named after the runner, one segment per shape, in capture order (the diffusion runtime's
    though it has no --enable-profile-cuda-graph). Either switch off, or our package not installed (the
    control: sglang itself writes nothing): the same captures, no profiler started, no file. Installed,
    status() (and so doctor) says the row is profiled by us, and what its trace lacks (the NPU encoder's: NPU
    kernels)."""
    row = PROFILED[name]
    if row.fixture:
        request.getfixturevalue(row.fixture)
    if row.background:
        monkeypatch.delenv("SGLANG_CAPTURE_TRACE_BACKGROUND")
    for module, stand_ins in row.gpu:
        loaded = real_sglang.module_or_skip(module, optional_dependencies=True)
        for attribute, value in stand_ins.items():
            monkeypatch.setattr(loaded, attribute, value)
    cls = real_sglang.class_or_skip(row.module, name)
    calls: list[tuple[Any, ...]] = []
    if row.per_shape is not None:
        method, returns = row.per_shape
        monkeypatch.setattr(cls, method, cpu_shims.per_shape_stand_in(vars(cls)[method], calls, returns))
    with real_sglang.activation(case, monkeypatch) as flag, row.scope(flag):
        real_sglang.check_profiled_row(name, case)
        graphs = row.drive(cls, flag, monkeypatch)
    assert wait_for_exports(60)
    if row.per_shape is None:
        assert graphs == 2  # the real lazy path captured two shapes
    else:  # the real loop ran, largest first
        assert [call[0] for call in calls] == [int(label.split("=")[1].split(",")[0]) for label in row.labels]
    assert real_sglang.segment_labels(trace_dir, name, case) == (row.labels if case == "on" else None)
    assert len(profilers_started) == (0 if case != "on" else 1 if row.per_shape else len(row.labels))
