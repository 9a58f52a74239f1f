"""Every stub and shim the real-sglang tests need on a CPU-only machine, in one place (never in the package).

- torchvision: PyPI's torchvision is built against CUDA torch; with CPU torch its import fails
  (``operator torchvision::nms does not exist``), and sglang imports it unconditionally. Defining the
  two operators it registers fakes for makes the import work.
- ``sgl_kernel`` (sglang 0.5.5): GPU-only package imported at module level by the MoE runner; a stub
  module with the names imported at import time is enough for the runner modules.
- CUDA (and XPU) memory history: the profiling hooks call ``torch.cuda.memory._record_memory_history``
  and ``_dump_snapshot`` (``torch.xpu.memory`` for XPUGraphRunner), which CPU torch cannot run.
- Era A ``CudaGraphRunner.capture()``: its module-level helpers (``graph_capture``,
  ``get_available_gpu_memory``, ``get_tensor_model_parallel_rank``) need CUDA and a process group.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import types
from collections.abc import Iterator
from typing import Any

_torchvision_lib: Any = None  # must stay alive: dropping it unregisters the operators


def install_torchvision_shim() -> None:
    global _torchvision_lib
    if _torchvision_lib is not None:
        return
    import torch

    lib = torch.library.Library("torchvision", "DEF")
    lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _torchvision_lib = lib


# sglang versions whose runner modules import sgl_kernel at module level (read from the 0.5.5 wheel:
# srt/layers/moe/moe_runner/deep_gemm.py imports silu_and_mul); later versions guard the import, and a
# stub there would change which code paths sglang picks.
SGL_KERNEL_STUB_FOR = {"0.5.5"}


def install_sgl_kernel_stub() -> None:
    """A stub ``sgl_kernel`` for the versions above, when the real (GPU-only) package is absent."""
    from importlib import metadata

    if metadata.version("sglang") not in SGL_KERNEL_STUB_FOR:
        return
    if "sgl_kernel" in sys.modules or importlib.util.find_spec("sgl_kernel") is not None:
        return

    def silu_and_mul(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("sgl_kernel stub: GPU kernel called in a CPU test")

    stub = types.ModuleType("sgl_kernel")
    stub.silu_and_mul = silu_and_mul  # type: ignore[attr-defined]
    sys.modules["sgl_kernel"] = stub


def disable_cuda_memory_history() -> None:
    """Process-wide no-ops (for spawn children, which have no monkeypatch)."""
    import torch

    memories: list[Any] = [torch.cuda.memory, getattr(getattr(torch, "xpu", None), "memory", None)]
    for memory in memories:
        if memory is not None:  # XPUGraphRunner's hooks call the torch.xpu twins
            memory._record_memory_history = lambda *a, **k: None
            memory._dump_snapshot = lambda *a, **k: None


def prepare() -> None:
    """Call before importing any sglang module."""
    install_torchvision_shim()
    install_sgl_kernel_stub()


class _Stream:
    stream = None


@contextlib.contextmanager
def _graph_capture(*args: Any, **kwargs: Any) -> Iterator[_Stream]:
    yield _Stream()


def era_a_capture_shims(module: types.ModuleType) -> dict[str, Any]:
    """Module globals that let the real era-A ``CudaGraphRunner.capture()`` run on CPU with no batch
    sizes to capture (the profiler still starts and stops around the loop)."""
    replacements: dict[str, Any] = {
        "graph_capture": _graph_capture,
        "get_available_gpu_memory": lambda *a, **k: 0.0,
        "get_tensor_model_parallel_rank": lambda: 1,  # not 0: no tqdm bar
        "save_gemlite_cache": lambda *a, **k: None,
    }
    return {name: value for name, value in replacements.items() if hasattr(module, name)}


def tp_rank_shims(module: types.ModuleType) -> dict[str, Any]:
    """sglang 0.5.14/0.5.15 evaluate ``tp_rank=get_tensor_model_parallel_rank()`` in the decode runner's
    hook, which asserts an initialised TP process group; a CPU test has none."""
    if hasattr(module, "get_tensor_model_parallel_rank"):
        return {"get_tensor_model_parallel_rank": lambda: 0}
    return {}


# -- CPUGraphRunner's real capture() on CPU ------------------------------------------------------------
# What its capture path reads from objects sglang's __init__ and ModelRunner would have built. Everything
# of sglang's own runs for real: capture(), its per-batch-size loop, patch_model() (a real torch.compile
# of the model's forward on CPU, inductor included), capture_one_batch_size() with a real ForwardBatch,
# forward_context(), and the two warm-up/compile runs of the compiled forward.


class TpGroup:
    """Stand-in for sglang's ``GroupCoordinator`` of a single rank: nothing to wait for."""

    ca_comm = None

    def barrier(self) -> None:
        pass


class CpuGraphAttention:
    """Stand-in for an attention backend's three CPU-graph hooks (sglang's AMX backend has them; it
    needs the CPU build of sgl_kernel, which does not exist here)."""

    def init_cpu_graph_state(self, max_bs: int, max_num_tokens: int) -> None:
        pass

    def get_cpu_graph_seq_len_fill_value(self) -> int:
        return 1

    def init_forward_metadata_capture_cpu_graph(self, *args: Any, **kwargs: Any) -> None:
        pass


def tiny_model() -> Any:
    """A real (tiny) torch module with sglang's model forward signature ``(input_ids, positions, forward_batch)``."""
    import torch

    class TinyModel(torch.nn.Module):
        shared_experts_config = None  # 0.5.23's capture() reads it into get_model().override(...)

        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(32, 16)
            self.proj = torch.nn.Linear(16, 32)

        def forward(self, input_ids: Any, positions: Any, forward_batch: Any) -> Any:
            return self.proj(torch.relu(self.embed(input_ids)))

    return TinyModel()


# -- token-count runners (PrefillCudaGraphRunner, PiecewiseCudaGraphRunner) ------------------------------
# Their capture() is real; what it calls that needs CUDA is stood in: the capture stream, the graph
# capture context, free GPU memory, the backend's capture session, and the per-shape capture itself
# (one CUDA graph per token count), by a CPU function with the real method's signature.


class CaptureBackend:
    """Stand-in for the runner backend's ``capture_session(stream)`` (a CUDA-graph memory pool)."""

    @contextlib.contextmanager
    def capture_session(self, stream: Any) -> Iterator[None]:
        yield


def token_capture_shims(module: types.ModuleType) -> dict[str, Any]:
    """Module globals of the prefill / piecewise runner modules that need CUDA or a process group."""
    replacements = {**era_a_capture_shims(module), "get_or_create_global_graph_capture_stream": lambda: None}
    return {name: value for name, value in replacements.items() if hasattr(module, name)}


def per_shape_stand_in(real: Any, calls: list[tuple[Any, ...]]) -> Any:
    """A CPU function with ``real``'s signature (so labels come from it) that records its call and runs
    a matmul sized by the token count instead of capturing a CUDA graph."""
    import inspect

    import torch

    signature = inspect.signature(real)

    def capture_one(self: Any, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs)
        size = list(bound.arguments.values())[1]
        calls.append((size, *sorted(kwargs.items())))
        return torch.mm(torch.ones(size, 8), torch.ones(8, 4))

    capture_one.__signature__ = signature  # type: ignore[attr-defined]
    capture_one.__name__ = capture_one.__qualname__ = real.__name__
    return capture_one
