"""The diffusion runtime's graphs (``sglang.multimodal_gen``, PROFILE_LAZY_CAPTURE rows): the breakable DiT
runner and the three VLA runners, against the real installed classes.

Each runner's real serving path runs: ``capture()`` / ``capture_or_run()`` / ``run()`` sees a new signature,
calls the real ``_capture`` (static buffers, eager warm-up, the captured body) and replays. STOOD IN, for the
duration of a test, only what needs a GPU: ``torch.cuda``'s graph, stream, synchronize and pool calls, the
modules' CUDA-graph helpers (``BreakableCUDAGraph``/``BreakableCUDAGraphCapture``, the global graph pool),
and the inputs' CUDA device (``StandInCudaTensor``: CPU tensors whose ``device`` says cuda, because the VLA
runners run eagerly for any other device). The captured bodies run eagerly on CPU.

The diffusion runtime has no ``--enable-profile-cuda-graph``: our switch alone opts in, so "off" here is the
switch off, or our package not installed (the control: sglang itself writes nothing).
"""

from __future__ import annotations

import importlib
import importlib.util
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


@pytest.fixture
def fake_gpu(fake_gpu: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """tests/sglang/conftest.py's, and the modules' own CUDA-graph helpers."""
    for module, names in ((VLA, {"get_or_create_global_graph_memory_pool": lambda *a: "stand-in pool",
                                 "set_graph_pool_id": lambda *a: None}),
                          (BCG, {"BreakableCUDAGraph": cpu_shims.StandInGraph,
                                 "BreakableCUDAGraphCapture": cpu_shims.stand_in_scope,
                                 "enable_breakable_cuda_graph": cpu_shims.stand_in_scope})):
        try:
            loaded = real_sglang.import_optional(module)
        except real_sglang.MissingDependency as exc:  # the diffusion runtime's deps, absent from this venv
            pytest.skip(str(exc))
        if loaded is None:
            pytest.skip(f"{module} does not exist in this sglang")
        for name, value in names.items():
            monkeypatch.setattr(loaded, name, value)


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


#: (module, serve -> graphs captured, segment labels in capture order)
CASES = {
    "DiffusionBreakableCudaGraphRunner": (BCG, serve_diffusion, [
        "capture::bs=1,frames=2,height=2,width=4,prompt_tokens=8",
        "capture::bs=1,frames=4,height=2,width=4,prompt_tokens=8"]),
    "VLAPrefixGraphRunner": (VLA, serve_vla_prefix, ["capture::bs=1,tokens=8,images=1",
                                                     "capture::bs=1,tokens=16,images=1"]),
    "VLADenoiseGraphRunner": (VLA, serve_vla_denoise, [
        "capture::bs=1,prefix_tokens=8,horizon=10,action_dim=7",
        "capture::bs=1,prefix_tokens=16,horizon=10,action_dim=7"]),
    "VLATensorGraphRunner": (VLA, serve_vla_tensor, ["capture::inputs=2,elements=10",
                                                     "capture::inputs=2,elements=30"]),
}


@pytest.mark.parametrize("case", [c for c in real_sglang.CASES if c != "--enable-profile-cuda-graph off"])
@pytest.mark.parametrize("name", list(CASES))
def test_diffusion_runner_lazy_captures(name: str, case: str, trace_dir: Path, fake_gpu: None,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """On: two new shapes (then a known one, replayed) -> exactly one file named after the runner, one
    segment per shape in capture order, though the diffusion runtime has no --enable-profile-cuda-graph.
    Switch off, or our package not installed: the same captures, no file."""
    module, serve, labels = CASES[name]
    cls = real_sglang.class_or_skip(module, name)
    with real_sglang.activation(case, monkeypatch):
        graphs = serve(cls)
    assert wait_for_exports(60)
    assert graphs == 2  # the real lazy path captured two shapes
    assert real_sglang.lazy_file_labels(trace_dir, name, case) == (labels if case == "on" else None)
