"""``capture-trace demo``: three small runners named like SGLang's EAGLE3 set-up (``mixins.demo_runners``)
capture a tiny model for a few batch sizes under ``torch.profiler`` and write one trace each.

The runners, wrapt and torch are imported only when the command runs; without torch (the analyzer-only
install) the command says how to get it.
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

DEFAULT_OUT = "capture-trace-demo"
TORCH_HINT = "the demo needs torch, which is not installed: pip install 'sglang-capture-trace[torch]'"


def _batch_sizes(text: str) -> list[int]:
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        sizes = []
    if not sizes or any(size < 1 for size in sizes):
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers, got {text!r}")
    return sizes


def run_demo(out: Path, device: str = "auto", batch_sizes: list[int] | None = None) -> list[Path]:
    """Capture with the three runners and return the written trace files."""
    from mixins.demo_runners import RUNNERS, import_torch
    from mixins.export import wait_for_exports

    torch = import_torch()
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("--device cuda requested but torch.cuda.is_available() is False")
    os.environ[settings.ENABLE] = "1"
    os.environ[settings.PROFILER_DIR] = str(out)
    paths: list[Path] = []
    for runner_class in RUNNERS:
        runner = runner_class(device, batch_sizes or [1, 2, 4, 8])
        runner.capture()
    wait_for_exports()
    directory = out / "graph_capture_profile"
    for runner_class in RUNNERS:
        paths += sorted(directory.glob(f"cuda_graph_capture-{runner_class.__name__}-TP-*.json.gz"))
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
    out = Path(args.out).resolve()
    print(f"capture-trace demo: setting {settings.ENABLE}=1 and {settings.PROFILER_DIR}={out} for this process")
    try:
        paths = run_demo(out, args.device, args.batch_sizes)
    except ModuleNotFoundError as exc:
        if exc.name != "torch":
            raise
        print(f"capture-trace: error: {TORCH_HINT}", file=sys.stderr)
        return 2
    except RuntimeError as exc:
        print(f"capture-trace: error: {exc}", file=sys.stderr)
        return 2
    from mixins.demo_runners import RUNNERS

    if len(paths) != len(RUNNERS):
        print(f"capture-trace: error: expected {len(RUNNERS)} traces, found {len(paths)}", file=sys.stderr)
        return 1
    for path in paths:
        total, by_cat = _count_events(path)
        counts = ", ".join(f"{cat} {n}" for cat, n in sorted(by_cat.items()))
        print(f"{path}  {path.stat().st_size:,} bytes  {total:,} events ({counts})")
    print(f"Open them in https://ui.perfetto.dev or chrome://tracing, or run: capture-trace summary {paths[0]}")
    return 0


def add_command(commands: Any) -> None:
    parser = commands.add_parser("demo", help="capture three demo runners and write their traces")
    parser.add_argument("--out", default=DEFAULT_OUT, help=f"profiler directory (default: ./{DEFAULT_OUT})")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--batch-sizes", type=_batch_sizes, default=[1, 2, 4, 8], metavar="1,2,4,8")
    parser.set_defaults(func=_command)
