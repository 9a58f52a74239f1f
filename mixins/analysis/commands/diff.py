"""``diff``: two traces' op-signature sequences compared segment by segment (``compare.diff_traces``).
"""

from __future__ import annotations

import argparse
from typing import Any

from mixins.analysis import render
from mixins.analysis.jobs import DIFFERENT, OK, TROUBLE, collect_results, map_files, with_limits
from mixins.helptext import add_command


def add(subparsers: Any) -> None:
    p = add_command(
        subparsers,
        "diff",
        "compare two traces' op-signature sequences per segment",
        "Compare two traces segment by segment (matched by label): ops added, removed and changed "
        "(shapes, types, scalar inputs, kernels), and the first op where they differ. Timestamps, ids "
        "and durations never count.",
        ["capture-trace diff run1/cuda_graph_capture-X-TP-0.json.gz run2/cuda_graph_capture-X-TP-0.json.gz"],
        exit_codes=("the traces captured the same", "they differ", "bad input or usage"),
    )
    p.add_argument("a", metavar="A", help="the reference trace file")
    p.add_argument("b", metavar="B", help="the trace compared with A")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=with_limits(cmd_diff, p))


def cmd_diff(args: argparse.Namespace) -> int:
    from mixins.analysis.commands.compare import compact_job, diff_traces

    loaded, bad = collect_results(map_files(compact_job, [args.a, args.b], (), 1, not args.json))
    if bad:
        return TROUBLE
    a, b = loaded
    diffs = diff_traces(a, b)
    different = any(d.status != "same" for d in diffs)
    if args.json:
        render.print_json({"a": args.a, "b": args.b, "same": not different, "segments": diffs})
    else:
        render.render_diff(args.a, args.b, diffs)
    return DIFFERENT if different else OK
