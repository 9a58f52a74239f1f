"""The runners that capture lazily, one graph per new input shape while serving (PROFILE_LAZY_CAPTURE rows),
against the real installed sglang: the vision encoders, the LLM runtime's ``RowBucketGraphRunner`` (one graph
per row bucket, DeepSeek-V4's replay tail) and DSpark's ``DsparkSamplingAcceptGraph`` (one graph per verify
batch size; both 0.5.23), and the diffusion runtime's (``sglang.multimodal_gen``) breakable DiT runner and
three VLA runners.

Each runner's real serving path runs: ``run()`` / ``capture()`` / ``capture_or_run()`` sees a new shape, calls
the real ``create_graph`` / ``_capture`` (buffers, warm-up, the captured body) and replays a known one. STOOD
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
    with real_sglang.sglang_config(enable_profile_cuda_graph=on):
        from sglang.srt.runtime_context import get_parallel

        with get_parallel().override(tp_group=cpu_shims.TpGroup()):
            yield


def serve_row_bucket(cls: type) -> int:
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


def serve_dspark(cls: type) -> int:
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


def serve_diffusion(cls: type) -> int:
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


def serve_vla_prefix(cls: type) -> int:
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


def serve_vla_denoise(cls: type) -> int:
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


def serve_vla_tensor(cls: type) -> int:
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


# -- one table, one test -----------------------------------------------------------------------------------

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
class Lazy:
    """One runner: its module, what serves it (two new shapes, then a known one; returns the graphs it holds),
    the segment labels in capture order, and what its runtime needs stood in or set for the test."""

    module: str
    serve: Callable[[type], int]
    labels: list[str]
    scope: Callable[[bool], AbstractContextManager[Any]] = lambda on: nullcontext()  # given the flag
    gpu: tuple[tuple[str, dict[str, Any]], ...] = ()  # (module, its CUDA-graph helpers stood in)
    background: bool = False  # exports in the background (the default), as a server has them
    runtime_has_flag: bool = True  # the runtime has --enable-profile-cuda-graph
    fixture: str | None = None  # what imports the module where this machine cannot (torch_npu stood in)


LAZY = {
    "ViTCudaGraphRunner": Lazy(VIT, lambda cls: len(serve_vit(cls, (8, 16, 8)).block_graphs),
                               ["capture::tokens=8,images=1", "capture::tokens=16,images=2"], profile_flag,
                               background=True),
    "InternViTCudaGraphRunner": Lazy(INTERN_VIT, lambda cls: len(serve_intern_vit(cls, (1, 3, 1)).graphs),
                                     ["capture::tokens=5,tiles=1", "capture::tokens=15,tiles=3"], profile_flag,
                                     background=True),
    "KimiK3ViTCudaGraphRunner": Lazy(
        KIMI_VIT, lambda cls: len(serve_kimi_vit(cls, (((1, 2, 2),), ((1, 2, 2), (1, 2, 4)), ((1, 2, 2),))).graphs),
        ["capture::tokens=4,images=1", "capture::tokens=12,images=2"], profile_flag, background=True),
    "RowBucketGraphRunner": Lazy(ROW_BUCKET, serve_row_bucket, ["capture::tokens=8", "capture::tokens=4"], llm_runtime,
                                 ROW_BUCKET_GPU),
    "DsparkSamplingAcceptGraph": Lazy(DSPARK, serve_dspark, ["capture::bs=2", "capture::bs=4"], llm_runtime,
                                      (*ROW_BUCKET_GPU, (DSPARK, {"graph_capture": cpu_shims.stand_in_scope}))),
    "DiffusionBreakableCudaGraphRunner": Lazy(BCG, serve_diffusion, [
        "capture::bs=1,frames=2,height=2,width=4,prompt_tokens=8",
        "capture::bs=1,frames=4,height=2,width=4,prompt_tokens=8"], gpu=DIFFUSION_GPU, runtime_has_flag=False),
    "VLAPrefixGraphRunner": Lazy(VLA, serve_vla_prefix, ["capture::bs=1,tokens=8,images=1",
                                                         "capture::bs=1,tokens=16,images=1"],
                                 gpu=DIFFUSION_GPU, runtime_has_flag=False),
    "VLADenoiseGraphRunner": Lazy(VLA, serve_vla_denoise, [
        "capture::bs=1,prefix_tokens=8,horizon=10,action_dim=7",
        "capture::bs=1,prefix_tokens=16,horizon=10,action_dim=7"], gpu=DIFFUSION_GPU, runtime_has_flag=False),
    "VLATensorGraphRunner": Lazy(VLA, serve_vla_tensor, ["capture::inputs=2,elements=10",
                                                         "capture::inputs=2,elements=30"],
                                 gpu=DIFFUSION_GPU, runtime_has_flag=False),
    # overrides create_graph without super(), so the ViT row never sees it: its own row, CPU side only
    "ViTNpuGraphRunner": Lazy(VIT_NPU, lambda cls: len(serve_vit_npu(cls).block_graphs),
                              ["capture::tokens=8,images=1", "capture::tokens=16,images=1"],
                              lambda on: profile_flag(on, mm_attention_backend="ascend_attn"), background=True,
                              fixture="vit_npu"),
}


def module_or_skip(module: str) -> types.ModuleType:
    """The module, or a skip where this sglang lacks it or this venv lacks its dependencies (the diffusion
    runtime's; the scheduler's stack, which DSpark's module imports)."""
    try:
        loaded = real_sglang.import_optional(module)
    except real_sglang.MissingDependency as exc:
        pytest.skip(str(exc))
    if loaded is None:
        pytest.skip(f"{module} does not exist in this sglang")
    return loaded


@pytest.mark.parametrize(("name", "case"), [
    pytest.param(name, case, id=f"{name}-{case}") for name, lazy in LAZY.items() for case in real_sglang.CASES
    if lazy.runtime_has_flag or case != "--enable-profile-cuda-graph off"
])
def test_lazy_captures(name: str, case: str, trace_dir: Path, fake_gpu: None, monkeypatch: pytest.MonkeyPatch,
                       profilers_started: list[Any], request: pytest.FixtureRequest) -> None:
    """On: two new shapes while serving (then a known one, replayed) -> exactly one file named after the
    runner, one segment per shape, in capture order (the diffusion runtime's though it has no
    --enable-profile-cuda-graph). Either switch off, or our package not installed (the control: sglang itself
    writes nothing): the same captures, no profiler started, no file. Installed, status() (and so doctor)
    says the row is profiled by us, and what its trace lacks (the NPU encoder's: NPU kernels)."""
    lazy = LAZY[name]
    if lazy.fixture:
        request.getfixturevalue(lazy.fixture)
    if lazy.background:
        monkeypatch.delenv("SGLANG_CAPTURE_TRACE_BACKGROUND")
    for module, stand_ins in lazy.gpu:
        loaded = module_or_skip(module)
        for attribute, value in stand_ins.items():
            monkeypatch.setattr(loaded, attribute, value)
    cls = real_sglang.class_or_skip(lazy.module, name)
    with real_sglang.activation(case, monkeypatch) as flag, lazy.scope(flag):
        real_sglang.check_profiled_row(name, case)
        graphs = lazy.serve(cls)
    assert wait_for_exports(60)
    assert graphs == 2  # the real lazy path captured two shapes
    assert real_sglang.lazy_file_labels(trace_dir, name, case) == (lazy.labels if case == "on" else None)
    assert len(profilers_started) == (2 if case == "on" else 0)
