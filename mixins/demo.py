"""``capture-trace demo``: the demo runners (``mixins.demo_runners``) capture a tiny model for a few shapes
and write one trace each. Torch is imported only when the command runs; Kineto's informational lines,
which its C++ writes to descriptor 2 at every profiler start and stop, are filtered there (``--verbose``
keeps them).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mixins import settings
from mixins.formats import BS, TOKENS, label_text
from mixins.naming import SUBDIR, TRACE_PREFIX, TRACE_SUFFIX, trace_dir
from mixins.usage import DIFFERENT, OK, TROUBLE

DEFAULT_OUT = "capture-trace-demo"
TORCH_HINT = "the demo needs torch, which is not installed: pip install torch (the extra [torch])"


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
    from mixins.demo_runners import import_torch

    torch = import_torch()
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("--device cuda requested but torch.cuda.is_available() is False")
    return device


def _device_text(requested: str, device: str) -> str:
    """The device line: which one ran and, for ``auto``, why."""
    if device == "cuda":
        import torch

        name = f"cuda ({torch.cuda.get_device_name()})"
    else:
        name = "cpu (eager passes: no CUDA graphs)"
    if requested == "auto":
        return f"{name}, picked by --device auto: " + (
            "a CUDA device is available" if device == "cuda" else "torch.cuda.is_available() is False"
        )
    return name


# Kineto's log line: "<LEVEL>:<date> <time> <pid>:<tid> <file>:<line>] <message>". USDT (profiler start and
# stop probes) and STAGE (older torch: "Completed Stage: Warm Up") are informational; its WARNING and ERROR
# lines, and anything that is not Kineto's, are passed through.
KINETO_INFO_LINE = re.compile(rb"(?:USDT|STAGE):\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \d+:\d+ \S+:\d+\] ")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


@contextmanager
def kineto_info_filtered(enabled: bool = True) -> Iterator[None]:
    """While inside, file descriptor 2 is a pipe whose lines are copied to the real stderr, except
    Kineto's informational lines (its C++ writes them to the descriptor, so ``sys.stderr`` cannot help)."""
    if not enabled:
        yield
        return
    sys.stderr.flush()
    stderr = os.dup(2)
    read, write = os.pipe()
    os.dup2(write, 2)
    os.close(write)

    def pump() -> None:
        with open(read, "rb", buffering=0) as pipe:
            for line in pipe:  # the last, unterminated piece too
                if not KINETO_INFO_LINE.match(line):
                    _write_all(stderr, line)

    thread = threading.Thread(target=pump, name="capture-trace-demo-stderr", daemon=True)
    thread.start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(stderr, 2)  # the pipe's last write end goes: the pump reads to the end and stops
        thread.join()
        os.close(stderr)


def _profile_replays(runners: list[Any], replays: int, path: Path) -> Path:
    """Replay every captured graph ``replays`` times under the profiler, as serving would.

    Each runner/shape is wrapped in ``replay::runner=<name>,bs=<bs>`` (``tokens=<n>`` for the prefill
    runner) so ``attribute`` can use the runner and size as hints (the kernel sequence still decides).
    """
    from mixins.demo_runners import import_torch

    torch = import_torch()
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities, record_shapes=True) as prof:
        for runner in runners:
            for bs, graph in sorted(runner.graphs.items()):
                unit = BS if hasattr(runner, "capture_bs") else TOKENS  # the prefill runner's graphs
                hint = label_text([("runner", type(runner).__name__), (unit, bs)])
                with torch.profiler.record_function(f"replay::{hint}"):
                    for _ in range(replays):
                        graph.replay()
        torch.cuda.synchronize()
    prof.export_chrome_trace(str(path))
    return path


def run_demo(
    out: Path, device: str = "auto", batch_sizes: list[int] | None = None, replays: int = 0
) -> list[Path]:
    """Capture with the demo runners (and profile ``replays`` replays of each graph); the written files."""
    from mixins.demo_runners import RUNNERS
    from mixins.export import wait_for_exports

    device = _resolve_device(device)
    if replays and device != "cuda":
        raise RuntimeError("--replay needs CUDA graphs: run with --device cuda on a machine with a GPU")
    os.environ[settings.ENABLE] = "1"
    os.environ[settings.PROFILER_DIR] = str(out)
    directory = trace_dir(str(out))
    before = _written(directory)  # a previous run's files are not this run's (a failed export leaves them)
    paths: list[Path] = []
    runners: list[Any] = []
    for runner_class in RUNNERS:
        runner = runner_class(device, batch_sizes or [1, 2, 4, 8])
        runner.capture()
        runners.append(runner)
    wait_for_exports()
    after = _written(directory)
    for runner_class in RUNNERS:
        found = sorted(directory.glob(f"{TRACE_PREFIX}{runner_class.__name__}-TP-*{TRACE_SUFFIX}"))
        paths += [p for p in found if after.get(p.name) != before.get(p.name)]
    if replays:
        paths.append(_profile_replays(runners, replays, directory / REPLAY_TRACE))
    return paths


def _written(directory: Path) -> dict[str, tuple[int, int]]:
    """Each file's identity (inode, mtime): an export publishes by rename, so a file it wrote is new."""
    try:
        return {e.name: (e.inode(), e.stat().st_mtime_ns) for e in os.scandir(directory) if e.is_file()}
    except OSError:
        return {}


def _count_events(path: Path) -> tuple[int, Counter[str]]:
    with gzip.open(path, "rt") as handle:
        events = json.load(handle)["traceEvents"]
    shown = ("kernel", "cuda_runtime", "cpu_op", "user_annotation")
    return len(events), Counter(cat for event in events if (cat := event.get("cat")) in shown)


def _command(args: argparse.Namespace) -> int:
    from mixins.analysis.render import size_text
    from mixins.demo_runners import RUNNERS
    from mixins.output_dir import not_a_directory

    out = Path(args.out).resolve()
    blocked = not_a_directory(out)
    if blocked is not None:  # found now, not after minutes of capturing
        print(f"capture-trace: error: --out {args.out}: {blocked} is not a directory", file=sys.stderr)
        return TROUBLE
    print(f"capture-trace demo: setting {settings.ENABLE}=1 and {settings.PROFILER_DIR}={out} for this process")
    try:
        device = _resolve_device(args.device)
        print(f"capture-trace demo: device {_device_text(args.device, device)}", flush=True)
        with kineto_info_filtered(not args.verbose):
            paths = run_demo(out, device, args.batch_sizes, args.replay)
    except ModuleNotFoundError as exc:
        if exc.name != "torch":
            raise
        print(f"capture-trace: error: {TORCH_HINT}", file=sys.stderr)
        return TROUBLE
    except RuntimeError as exc:
        print(f"capture-trace: error: {exc}", file=sys.stderr)
        return TROUBLE
    expected = len(RUNNERS) + (1 if args.replay else 0)
    if len(paths) != expected:
        print(f"capture-trace: error: expected {expected} traces, found {len(paths)}", file=sys.stderr)
        return DIFFERENT
    for path in paths:
        total, by_cat = _count_events(path)
        counts = ", ".join(f"{cat} {n:,}" for cat, n in sorted(by_cat.items()))
        print(f"{path}  {size_text(path.stat().st_size)}  {total:,} events ({counts})")
    print(f"Open them in https://ui.perfetto.dev or chrome://tracing, or run: capture-trace ls --long {out}")
    if args.replay:
        print(f"Attribute the replays: capture-trace attribute {paths[-1]} {paths[-1].parent}")
    return OK


def add_command(commands: Any) -> None:
    from mixins.helptext import add_command as add_documented
    from mixins.helptext import int_at_least

    parser = add_documented(
        commands,
        "demo",
        "Capture a tiny model with four runners named like sglang's EAGLE3 set-up (decode, draft, "
        "draft-extend: they profile their own capture) and a prefill runner (no profiler of its own: "
        "the decorator's profile mode) under torch.profiler, one labelled segment per batch size or "
        f"token count, and write one trace each to OUT/{SUBDIR}/. Turns {settings.ENABLE} "
        "on for this process only, says which device it used, and keeps Kineto's informational lines "
        "(USDT: ... profiler_start) off stderr unless --verbose.",
        ["capture-trace demo --out demo-out --device cpu --batch-sizes 1,2,4,8",
         "capture-trace ls --long demo-out"],
        exit_codes=("the four traces were written", "a trace is missing", "bad input or usage"),
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
        "--replay", type=int_at_least(0, "--replay"), default=0, metavar="N",
        help=f"also profile N replays of each captured graph into {REPLAY_TRACE} (needs CUDA graphs)",
    )
    parser.add_argument("--verbose", action="store_true", help="let Kineto's own informational lines through to stderr")
    parser.set_defaults(func=_command)
