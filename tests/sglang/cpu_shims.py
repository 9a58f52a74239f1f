"""Every stub and shim the real-sglang tests need on a CPU-only machine, in one place (never in the package);
those the end-to-end server needs too are the server test's stand-ins (``tests/server/standins``), imported.

- torchvision: PyPI's torchvision is built against CUDA torch; with CPU torch its import fails
  (``operator torchvision::nms does not exist``), and sglang imports it unconditionally. Defining the
  two operators it registers fakes for makes the import work. With PyPI's CUDA torch (the venv on the
  torch sglang pins) its operator library loads and defines them itself: no shim there.
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
from pathlib import Path
from typing import Any

from tests.server.standins import sitecustomize as server_stand_ins


def _torchvision_operators_load() -> bool:
    """Whether torchvision's own operator library loads with this torch (it defines the operators)."""
    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        return False
    import torch

    for library in Path(next(iter(spec.submodule_search_locations))).glob("_C*.so"):
        try:
            torch.ops.load_library(str(library))  # what torchvision's import does; a second load is a no-op
        except (OSError, RuntimeError):
            return False
        return True
    return False


def install_torchvision_shim() -> None:
    if not _torchvision_operators_load():
        import torch

        server_stand_ins.define_torchvision_ops(torch)


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


_REAL_DUMP_SNAPSHOT: dict[str, Any] = {}


def disable_cuda_memory_history() -> None:
    """Process-wide no-ops (for spawn children, which have no monkeypatch)."""
    import torch

    memories: list[Any] = [torch.cuda.memory, getattr(getattr(torch, "xpu", None), "memory", None)]
    for memory in memories:
        if memory is not None:  # XPUGraphRunner's hooks call the torch.xpu twins
            _REAL_DUMP_SNAPSHOT.setdefault(memory.__name__, memory._dump_snapshot)
            memory._record_memory_history = lambda *a, **k: None
            memory._dump_snapshot = lambda *a, **k: None


def real_dump_snapshot(memory: Any) -> Any:
    """torch's own ``_dump_snapshot`` of ``memory``, even after ``disable_cuda_memory_history`` replaced it."""
    return _REAL_DUMP_SNAPSHOT.get(memory.__name__, memory._dump_snapshot)


def prepare() -> None:
    """Call before importing any sglang module."""
    install_torchvision_shim()
    install_sgl_kernel_stub()


# -- the GPU, stood in: graphs record nothing and replay nothing; captured bodies run eagerly on CPU --------


class StandInStream:
    """STANDS IN for a CUDA stream (and for what ``graph_capture()`` yields: its ``stream``)."""

    stream = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def wait_stream(self, other: Any) -> None:
        pass


class StandInGraph:
    """STANDS IN for torch.cuda.CUDAGraph / sglang's BreakableCUDAGraph / torch_npu's NPUGraph."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._segments: list[Any] = [object()]
        self._break_fns: list[Any] = []

    def replay(self) -> None:
        pass


@contextlib.contextmanager
def stand_in_scope(*args: Any, **kwargs: Any) -> Iterator[StandInStream]:
    """STANDS IN for torch.cuda.graph / torch.cuda.stream / graph_capture / BreakableCUDAGraphCapture and the
    graph-pool scopes: the body runs eagerly."""
    yield StandInStream()


def stand_in_cuda(monkeypatch: Any) -> None:
    """``torch.cuda``'s graph, stream, synchronize, pool and memory calls stood in for one test."""
    import torch

    stand_ins: dict[str, Any] = {
        "CUDAGraph": StandInGraph, "graph": stand_in_scope, "stream": stand_in_scope, "Stream": StandInStream,
        "current_stream": lambda *a, **k: StandInStream(), "synchronize": lambda *a, **k: None,
        "empty_cache": lambda: None, "graph_pool_handle": lambda: ("stand-in graph pool",),
        "memory_allocated": lambda *a, **k: 0, "memory_reserved": lambda *a, **k: 0,
        "mem_get_info": lambda *a, **k: (0, 0),
    }
    for name, value in stand_ins.items():
        monkeypatch.setattr(torch.cuda, name, value)


# Module globals, for ``real_sglang.patched_attributes`` (which replaces those a module has).

#: What lets the real era-A ``CudaGraphRunner.capture()`` run on CPU with no batch sizes to capture (the
#: profiler still starts and stops around the loop).
ERA_A_CAPTURE: dict[str, Any] = {
    "graph_capture": stand_in_scope,
    "get_available_gpu_memory": lambda *a, **k: 0.0,
    "get_tensor_model_parallel_rank": lambda: 1,  # not 0: no tqdm bar
    "save_gemlite_cache": lambda *a, **k: None,
}
#: sglang 0.5.14/0.5.15 evaluate ``tp_rank=get_tensor_model_parallel_rank()`` in the decode runner's hook
#: (and the CPU graph runner's module calls it), which asserts an initialised TP process group; a CPU test
#: has none.
TP_RANK_0: dict[str, Any] = {"get_tensor_model_parallel_rank": lambda: 0}


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
    """Stand-in for an attention backend's three CPU-graph hooks (sglang's AMX backend has them; it needs the CPU
    build of sgl_kernel, which does not exist here): the ones the server test adds to the torch_native backend."""

    init_cpu_graph_state = server_stand_ins.init_cpu_graph_state
    get_cpu_graph_seq_len_fill_value = server_stand_ins.get_cpu_graph_seq_len_fill_value
    init_forward_metadata_capture_cpu_graph = server_stand_ins.init_forward_metadata_capture_cpu_graph

    def init_forward_metadata(self, forward_batch: Any) -> None:  # 0.5.5's capture calls the plain one
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


#: Module globals of the prefill / piecewise runner modules that need CUDA or a process group.
TOKEN_CAPTURE: dict[str, Any] = {**ERA_A_CAPTURE, "get_or_create_global_graph_capture_stream": lambda: None}


def per_shape_stand_in(real: Any, calls: list[tuple[Any, ...]], returns: Any = None) -> Any:
    """A CPU function with ``real``'s signature (so labels come from it) that records its call and runs
    a matmul sized by the size argument (token count or batch size) instead of capturing a CUDA graph.
    It returns the matmul's result, or ``returns(result)`` where the real method returns something else
    (``BreakableCudaGraphRunner._capture_one``: a ``(graph, output)`` pair)."""
    import inspect

    import torch

    signature = inspect.signature(real)

    def capture_one(self: Any, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs)
        size = list(bound.arguments.values())[1]
        calls.append((size, *sorted(kwargs.items())))
        result = torch.mm(torch.ones(size, 8), torch.ones(8, 4))
        return result if returns is None else returns(result)

    capture_one.__signature__ = signature  # type: ignore[attr-defined]
    capture_one.__name__ = capture_one.__qualname__ = real.__name__
    return capture_one


# -- runners without a capture(): BreakableCudaGraphRunner (0.5.11-0.5.13), OneGraphMultiLayerEagle... (0.5.16+) --
# Their real capture method runs (``_capture_all``; the real ``__init__`` -> ``_init_and_capture``); stood in
# are the graph-capture context, free GPU memory and the per-shape CUDA-graph capture (as above), plus for
# the single-graph EAGLE runner what builds GPU state: the per-step runners' construction (attention
# CUDA-graph state, buffers), the shared GPU input buffers and the decode backend each step resolves.


def breakable_graph(output: Any) -> tuple[Any, Any]:
    """Stands in for ``_capture_one``'s result: ``(BreakableCUDAGraph, output)``."""
    return object(), output


#: Module globals of the multi-layer EAGLE module the single-graph ``_init_and_capture`` calls that need
#: CUDA: free GPU memory, and ``resolve_decode_backend(runner)`` (a CUDA-graph backend per step runner).
ONE_GRAPH_CAPTURE: dict[str, Any] = {**ERA_A_CAPTURE, "resolve_decode_backend": lambda runner: types.SimpleNamespace()}


def step_runner_stand_in(step_cls: type, capture_bs: list[int], profile_flag: bool) -> Any:
    """Stands in for ``_create_runner(step)``: a per-step ``MultiLayerEagleDraftExtendCudaGraphRunner`` built
    without its ``__init__`` (which sets up the step's attention CUDA-graph state on the GPU), holding what
    ``_create_runners`` and the single-graph ``_init_and_capture`` read from it."""

    def create_runner(self: Any, step: int) -> Any:
        runner: Any = object.__new__(step_cls)
        runner.step = step
        runner.enable_profile_cuda_graph = profile_flag  # as its __init__ reads it (never used on this path)
        runner.enable_torch_compile = False
        runner.capture_bs = list(capture_bs)
        runner.max_bs = max(capture_bs)
        runner.seq_len_fill_value = runner.captured_req_width = 1
        runner.num_front_tokens = 0
        runner.require_gathered_buffer = runner.require_mlp_tp_gather = runner.require_mlp_sync = False
        runner.disable_padding = runner.prune_draft_extend_logits = False
        return runner

    return create_runner


def shared_buffers_stand_in(self: Any) -> Any:
    """Stands in for ``_allocate_buffers()``: the one shared set of GPU input buffers."""
    return types.SimpleNamespace()
