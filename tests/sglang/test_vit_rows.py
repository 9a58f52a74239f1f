"""The vision-encoder runners' lazy captures (PROFILE_LAZY_CAPTURE rows), against the real installed sglang.

Each runner's real serving path runs: ``run()`` sees a new input shape, calls the real ``create_graph`` /
``_capture`` (buffers, warm-up, the layers' forward inside the capture) and replays. Only what needs a GPU
is stood in (``fake_gpu``: the captured layers run eagerly on CPU); the encoders are tiny CPU modules with
the attributes the runners read.
"""

from __future__ import annotations

import importlib
import importlib.util
import types
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("sglang") is None:
    pytest.skip("sglang is not installed in this environment", allow_module_level=True)

import cpu_shims  # noqa: E402
import real_sglang  # noqa: E402
import torch  # noqa: E402

from mixins import sglang_patch, wait_for_exports  # noqa: E402

cpu_shims.prepare()

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


#: (module, class, what serves it with two new shapes then a known one, the captured-graph count, labels)
CASES = {
    "ViTCudaGraphRunner": (VIT, lambda cls: serve_vit(cls, (8, 16, 8)), lambda r: len(r.block_graphs),
                           ["capture::tokens=8,images=1", "capture::tokens=16,images=2"]),
    "InternViTCudaGraphRunner": (INTERN_VIT, lambda cls: serve_intern_vit(cls, (1, 3, 1)), lambda r: len(r.graphs),
                                 ["capture::tokens=5,tiles=1", "capture::tokens=15,tiles=3"]),
    "KimiK3ViTCudaGraphRunner": (
        KIMI_VIT, lambda cls: serve_kimi_vit(cls, (((1, 2, 2),), ((1, 2, 2), (1, 2, 4)), ((1, 2, 2),))),
        lambda r: len(r.graphs), ["capture::tokens=4,images=1", "capture::tokens=12,images=2"]),
}


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
    modules = [importlib.import_module(m) for m in (VIT, INTERN_VIT)]
    shims = [{"get_tp_group": cpu_shims.TpGroup} if hasattr(m, "get_tp_group") else {} for m in modules]
    try:
        with real_sglang.patched_attributes(modules[0], shims[0]), \
                real_sglang.patched_attributes(modules[1], shims[1]):
            yield
    finally:
        server_args._global_server_args = saved  # type: ignore[attr-defined]


@pytest.fixture
def trace_dir(trace_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tests/sglang/conftest.py's, with the exports in the background (the default), as a server has them."""
    monkeypatch.delenv("SGLANG_CAPTURE_TRACE_BACKGROUND")
    return trace_dir


@pytest.mark.parametrize("case", real_sglang.CASES)
@pytest.mark.parametrize("name", list(CASES))
def test_vit_runner_lazy_captures(
    name: str, case: str, trace_dir: Path, fake_gpu: None, monkeypatch: pytest.MonkeyPatch,
    profilers_started: list[Any],
) -> None:
    """On: two new shapes while serving (then a known one, replayed) -> exactly one file named after the
    runner, with one capture::tokens= segment per shape, in capture order. Either switch off, or our
    package not installed (the control: sglang itself writes nothing): the same captures, no profiler
    started, no file."""
    module, serve, graph_count, labels = CASES[name]
    cls = real_sglang.class_or_skip(module, name)
    with real_sglang.activation(case, monkeypatch) as flag, profile_flag(flag):
        runner = serve(cls)
    assert wait_for_exports(60)
    assert graph_count(runner) == 2  # the real lazy path captured two shapes
    assert real_sglang.lazy_file_labels(trace_dir, name, case) == (labels if case == "on" else None)
    assert len(profilers_started) == (2 if case == "on" else 0)


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
    import sys

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


@pytest.mark.parametrize("case", real_sglang.CASES)
def test_vit_npu_runner_lazy_captures(case: str, vit_npu: type, trace_dir: Path, fake_gpu: None,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """ViTNpuGraphRunner overrides create_graph without super(), so the ViT row never sees it: its own row
    profiles each new shape (one file, a segment per shape, CPU side), and nothing when off; status() (and
    so doctor) says what this trace lacks on an NPU."""
    vit = TinyViT()
    vit.blocks = torch.nn.ModuleList([AscendBlock(), AscendBlock()])
    with real_sglang.activation(case, monkeypatch) as flag, profile_flag(flag, mm_attention_backend="ascend_attn"):
        rows = [str(s).split(": ", 1)[1] for s in sglang_patch.PATCH.status() if s.target.cls == "ViTNpuGraphRunner"]
        runner = vit_npu(vit)
        for n in (8, 16, 8):
            cu = torch.tensor([0, n], dtype=torch.int32)
            runner.run(torch.ones(n, H), cu, rotary_pos_emb_cos=torch.ones(n, HEAD_DIM),
                       rotary_pos_emb_sin=torch.zeros(n, HEAD_DIM))
    assert rows == (["not installed"] if case == "package not installed" else [
        "applied (profiled by us: sglang does not profile this capture; CPU-side ops and ranges only: "
        "torch.profiler records no NPU kernels (torch_npu's profiler does))"])
    assert wait_for_exports(60)
    assert len(runner.block_graphs) == 2  # the real lazy path captured two shapes
    assert real_sglang.lazy_file_labels(trace_dir, "ViTNpuGraphRunner", case) == (
        ["capture::tokens=8,images=1", "capture::tokens=16,images=1"] if case == "on" else None)
