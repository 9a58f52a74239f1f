"""``summary``: per trace and segment, what was captured (ops, signatures, launches, kernels) and the
signatures that launch the most device work, with their kernels."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from mixins.analysis import render
from mixins.analysis.jobs import collect_results, expand_paths, map_files, with_limits
from mixins.analysis.serialise import summarize
from mixins.helptext import add_command, non_negative_int
from mixins.usage import OK, TROUBLE


def add(subparsers: Any) -> None:
    p = add_command(
        subparsers,
        "summary",
        "Summarise traces per segment (one per captured batch size): events, CPU ops, distinct op "
        "signatures, kernel launches, graph launches, kernels and how they link, and the signatures "
        "that launch the most device work (then the most calls), with their kernels.",
        [
            "capture-trace summary cuda_graph_capture-DecodeCudaGraphRunner-TP-0.json.gz",
            "capture-trace summary --top 10 --json demo-out",
        ],
    )
    p.add_argument("traces", metavar="TRACE", nargs="+", help="trace files (.json or .json.gz) or directories")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument(
        "--top", type=non_negative_int("--top"), default=5, metavar="N",
        help="top N signatures per segment, by kernels launched, then calls",
    )
    p.set_defaults(func=with_limits(cmd_summary, p))


def summary_job(
    path: str, top: int, progress: Callable[[int, int], None] | None = None
) -> tuple[dict[str, Any], tuple[Any, ...]]:
    """The trace's ``summary --json`` object and its run key (labelled once all traces are in)."""
    from mixins.analysis.model.records import load_record

    rec = load_record(path, progress)
    return summarize(rec, top), rec.identity.run


def cmd_summary(args: argparse.Namespace) -> int:
    from mixins.analysis.model.roles import run_labels

    files, listed, bad_dir = expand_paths(list(args.traces))
    results, bad = collect_results(map_files(summary_job, files, (args.top,), 0, not args.json), listed)
    labels = run_labels(run for _, run in results)
    traces = [{"path": doc["path"], "role": doc["role"], "run": labels[run], **doc} for doc, run in results]
    bad = bad or bad_dir
    if bad and not traces:
        return TROUBLE
    if args.json:
        render.print_json({"traces": traces})
    else:
        render.render_summary(traces)
    return TROUBLE if bad else OK
