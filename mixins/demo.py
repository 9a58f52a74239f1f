"""``capture-trace demo``: three small runners named like SGLang's EAGLE3 set-up capture a tiny model
for a few batch sizes under ``torch.profiler`` and write one trace each.

On CUDA each batch size is warmed up on a side stream and captured into a real ``torch.cuda.CUDAGraph``
(as sglang does); on CPU the same loop runs eager forward passes, which is enough to see the traces,
their per-batch-size segments and their metadata.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
from pathlib import Path
from typing import Any

from mixins import settings
from mixins.capture_trace import CaptureTraceMixin, with_capture_trace
from mixins.export import wait_for_exports

DEFAULT_OUT = "capture-trace-demo"


def _torch() -> Any:
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
        torch = _torch()
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
        torch = _torch()
        activities = [torch.profiler.ProfilerActivity.CPU]
        if self.device.type == "cuda":
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        with torch.inference_mode(), torch.profiler.profile(activities=activities, record_shapes=True) as prof:
            for bs in reversed(self.capture_bs):  # sglang captures the largest batch first
                self.capture_one_batch_size(bs, self.forward)
        self._post_process_after_profile(prof)

    def capture_one_batch_size(self, bs: int, forward: Any) -> Any:
        torch = _torch()
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


RUNNERS = (DecodeCudaGraphRunner, EAGLEDraftCudaGraphRunner, EAGLEDraftExtendCudaGraphRunner)


def _batch_sizes(text: str) -> list[int]:
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        sizes = []
    if not sizes or any(size < 1 for size in sizes):
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers, got {text!r}")
    return sizes


REPLAY_TRACE = "replay-TP-0.json.gz"


def _resolve_device(device: str) -> str:
    torch = _torch()
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("--device cuda requested but torch.cuda.is_available() is False")
    return device


def _profile_replays(runners: list[_DemoRunner], replays: int, path: Path) -> Path:
    """Replay every captured graph ``replays`` times under the profiler, as serving would.

    Each runner/batch size is wrapped in ``replay::runner=<name>,bs=<bs>`` so ``attribute`` can use
    the runner and batch size as hints (the kernel sequence still decides).
    """
    torch = _torch()
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities, record_shapes=True) as prof:
        for runner in runners:
            for bs, graph in sorted(runner.graphs.items()):
                with torch.profiler.record_function(f"replay::runner={type(runner).__name__},bs={bs}"):
                    for _ in range(replays):
                        graph.replay()
        torch.cuda.synchronize()
    prof.export_chrome_trace(str(path))
    return path


def _replays(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return n


def run_demo(
    out: Path, device: str = "auto", batch_sizes: list[int] | None = None, replays: int = 0
) -> list[Path]:
    """Capture with the three runners (and profile ``replays`` replays of each graph); the written files."""
    device = _resolve_device(device)
    if replays and device != "cuda":
        raise RuntimeError("--replay needs CUDA graphs: run with --device cuda on a machine with a GPU")
    os.environ[settings.ENABLE] = "1"
    os.environ[settings.PROFILER_DIR] = str(out)
    paths: list[Path] = []
    runners: list[_DemoRunner] = []
    for runner_class in RUNNERS:
        runner = runner_class(device, batch_sizes or [1, 2, 4, 8])
        runner.capture()
        runners.append(runner)
    wait_for_exports()
    directory = out / "graph_capture_profile"
    for runner_class in RUNNERS:
        paths += sorted(directory.glob(f"cuda_graph_capture-{runner_class.__name__}-TP-*.json.gz"))
    if replays:
        paths.append(_profile_replays(runners, replays, directory / REPLAY_TRACE))
    return paths


def _count_events(path: Path) -> tuple[int, dict[str, int]]:
    with gzip.open(path, "rt") as handle:
        events = json.load(handle)["traceEvents"]
    by_cat: dict[str, int] = {}
    for event in events:
        cat = event.get("cat")
        if cat in ("kernel", "cuda_runtime", "cpu_op", "user_annotation"):
            by_cat[cat] = by_cat.get(cat, 0) + 1
    return len(events), by_cat


def _command(args: argparse.Namespace) -> int:
    from mixins.analysis.render import size_text
    out = Path(args.out).resolve()
    print(f"capture-trace demo: setting {settings.ENABLE}=1 and {settings.PROFILER_DIR}={out} for this process")
    try:
        paths = run_demo(out, args.device, args.batch_sizes, args.replay)
    except RuntimeError as exc:
        print(f"capture-trace: error: {exc}", file=sys.stderr)
        return 2
    if len(paths) != len(RUNNERS) + (1 if args.replay else 0):
        print(f"capture-trace: error: expected {len(RUNNERS)} traces, found {len(paths)}", file=sys.stderr)
        return 1
    for path in paths:
        total, by_cat = _count_events(path)
        counts = ", ".join(f"{cat} {n:,}" for cat, n in sorted(by_cat.items()))
        print(f"{path}  {size_text(path.stat().st_size)}  {total:,} events ({counts})")
    print(f"Open them in https://ui.perfetto.dev or chrome://tracing, or run: capture-trace ls --long {out}")
    if args.replay:
        print(f"Attribute the replays: capture-trace attribute {paths[-1]} {paths[-1].parent}")
    return 0


def add_command(commands: Any) -> None:
    from mixins.helptext import add_command as add_documented

    parser = add_documented(
        commands,
        "demo",
        "capture three demo runners and write their traces",
        "Capture a tiny model with three runners named like sglang's EAGLE3 set-up (decode, draft, "
        "draft-extend) under torch.profiler, one labelled segment per batch size, and write one trace "
        f"each to OUT/graph_capture_profile/. Turns {settings.ENABLE} on for this process only.",
        ["capture-trace demo --out demo-out --device cpu --batch-sizes 1,2,4,8",
         "capture-trace ls --long demo-out"],
        exit_codes=("the three traces were written", "a trace is missing", "bad input or usage"),
    )
    parser.add_argument("--out", default=DEFAULT_OUT, metavar="DIR", help="profiler directory the traces go under")
    parser.add_argument(
        "--device", choices=("auto", "cpu", "cuda"), default="auto",
        help="cuda: real CUDA graph captures; cpu: eager passes; auto: cuda when available",
    )
    parser.add_argument(
        "--batch-sizes", type=_batch_sizes, default="1,2,4,8", metavar="LIST",
        help="comma-separated batch sizes to capture",
    )
    parser.add_argument(
        "--replay",
        type=_replays,
        default=0,
        metavar="N",
        help=f"also profile N replays of each captured graph into {REPLAY_TRACE} (needs CUDA graphs)",
    )
    parser.set_defaults(func=_command)
