"""The demo runners, named like sglang's EAGLE3 set-up plus a prefill runner: the decode-side ones
profile their own capture (hook mode), the prefill runner gets its profile from profile mode. On CUDA
each shape is captured into a real ``torch.cuda.CUDAGraph``; on CPU the loop runs eager passes. Apart
from ``mixins.demo`` so the CLI starts without wrapt or torch.
"""

from __future__ import annotations

from typing import Any

from mixins.capture_trace import CaptureTraceMixin, with_capture_trace
from mixins.formats import TOKENS


def import_torch() -> Any:
    import warnings

    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")  # CPU torch without numpy
    import torch

    return torch


class _DemoRunner:
    """The shape of an sglang graph runner: capture() profiles a loop of per-shape captures, then
    calls the post-profile hook with the profile."""

    hidden = 64
    layers = 2

    def __init__(self, device: str, batch_sizes: list[int]) -> None:
        torch = import_torch()
        self.device = torch.device(device)
        self.capture_bs = list(batch_sizes)
        self.enable_profile_cuda_graph = True
        self.graphs: dict[int, Any] = {}
        torch.manual_seed(0)
        blocks: list[Any] = []
        for _ in range(self.layers):
            width = self.hidden
            blocks += [torch.nn.Linear(width, width * 2), torch.nn.SiLU(), torch.nn.Linear(width * 2, width)]
        self.model = torch.nn.Sequential(*blocks, torch.nn.LayerNorm(self.hidden)).to(self.device).eval()

    def forward(self, hidden_states: Any) -> Any:
        return self.model(hidden_states)

    def capture(self) -> None:
        torch = import_torch()
        activities = [torch.profiler.ProfilerActivity.CPU]
        if self.device.type == "cuda":
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        with torch.inference_mode(), torch.profiler.profile(activities=activities, record_shapes=True) as prof:
            for bs in reversed(self.capture_bs):  # sglang captures the largest batch first
                self.capture_one_batch_size(bs, self.forward)
        self._post_process_after_profile(prof)

    def capture_one_batch_size(self, bs: int, forward: Any) -> Any:
        torch = import_torch()
        static_input = torch.randn(bs, self.hidden, device=self.device)
        if self.device.type != "cuda":
            forward(static_input)  # warm-up
            return forward(static_input)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                forward(static_input)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            output = forward(static_input)
        self.graphs[bs] = graph
        return output

    def _post_process_after_profile(self, prof: Any) -> None:
        """Upstream logs key_averages tables here; the trace is exported after this returns."""


@with_capture_trace(shape_method="capture_one_batch_size")
class DecodeCudaGraphRunner(_DemoRunner):
    """The target model's decode runner: decorated."""


class EAGLEDraftCudaGraphRunner(DecodeCudaGraphRunner):
    """A smaller draft model; inherits the decorated hook and still gets its own file."""

    hidden = 32
    layers = 1


class EAGLEDraftExtendCudaGraphRunner(CaptureTraceMixin, _DemoRunner):
    """The draft-extend runner: uses the mixin and overrides the hook without calling super()."""

    hidden = 32
    layers = 1
    capture_trace_shape_method = "capture_one_batch_size"

    def _post_process_after_profile(self, prof: Any) -> None:
        pass


@with_capture_trace(profile="capture", shape_method="capture_one_shape", shape_unit=TOKENS)
class PrefillCudaGraphRunner(_DemoRunner):
    """A prefill runner: one graph per token count, and no profiler of its own — profile mode runs
    ``capture()`` inside ours and exports it (``capture::tokens=N`` segments)."""

    tokens_per_batch = 16

    def __init__(self, device: str, batch_sizes: list[int]) -> None:
        super().__init__(device, batch_sizes)
        self.capture_num_tokens = [bs * self.tokens_per_batch for bs in batch_sizes]
        del self.capture_bs  # sizes are token counts here (the trace's metadata names batch sizes only)

    def capture(self) -> None:
        torch = import_torch()
        with torch.inference_mode():
            for num_tokens in reversed(self.capture_num_tokens):  # largest first, as sglang
                self.capture_one_shape(num_tokens)

    def capture_one_shape(self, size: int) -> Any:
        return self.capture_one_batch_size(size, self.forward)


RUNNERS = (DecodeCudaGraphRunner, EAGLEDraftCudaGraphRunner, EAGLEDraftExtendCudaGraphRunner, PrefillCudaGraphRunner)
