"""``diff``: two traces' op-signature sequences compared segment by segment (``compare.diff_traces``)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from mixins.analysis import render
from mixins.analysis.jobs import collect_results, expand_paths, map_files, with_limits
from mixins.analysis.model.roles import READS
from mixins.helptext import add_command
from mixins.usage import DIFFERENT, OK, TROUBLE

if TYPE_CHECKING:
    from mixins.analysis.model.record import CompactTrace


def add(subparsers: Any) -> None:
    p = add_command(
        subparsers,
        "diff",
        "Compare two captures segment by segment (matched by label): ops added, removed and changed "
        "(shapes, types, scalar inputs, kernels), and the first op where they differ. Timestamps, ids "
        "and durations never count. Given two folders (two runs), each capture of A is compared with the "
        "capture of B of the same runner and rank.",
        ["capture-trace diff run1/cuda_graph_capture-X-TP-0.json.gz run2/cuda_graph_capture-X-TP-0.json.gz",
         "capture-trace diff before/ after/"],
        exit_codes=("the traces captured the same", "they differ", "bad input or usage"),
    )
    p.add_argument("a", metavar="A", help="the reference capture trace, or a folder of them (run A)")
    p.add_argument("b", metavar="B", help="the capture trace compared with A, or a folder of them (run B)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=with_limits(cmd_diff, p))


def pair_key(t: CompactTrace) -> tuple[Any, ...]:
    """What pairs a trace of run A with one of run B."""
    i = t.identity
    return (i.runner or "", i.pp_rank or 0, i.tp_rank, i.capture_index, i.bs)


def _load(paths: list[str], listed: Collection[str], json_out: bool) -> tuple[list[CompactTrace], bool]:
    from mixins.analysis.commands.compare import compact_job

    return collect_results(map_files(compact_job, paths, (), 1, not json_out), listed, reads=("diff", READS["diff"]))


def _diff_runs(args: argparse.Namespace) -> int:
    """Two folders (two runs): each capture of A against the capture of B with the same runner and rank."""
    from mixins.analysis.commands.compare import diff_traces

    sides = []
    for folder in (args.a, args.b):  # a folder that cannot be listed, or a bad file in A, stops before B is read
        files, listed, bad_dir = expand_paths([folder])
        traces, bad = _load(files, listed, args.json)
        if bad or bad_dir:
            return TROUBLE
        sides.append({pair_key(t): t for t in traces})
    a, b = sides
    pairs = []
    for key in a | b:  # A's order, then what only B has
        ta, tb = a.get(key), b.get(key)
        diffs = diff_traces(ta, tb) if ta is not None and tb is not None else []
        pairs.append({
            "runner": key[0] or None, "pp_rank": key[1], "tp_rank": key[2], "capture_index": key[3], "bs": key[4],
            "a": ta.path if ta is not None else None, "b": tb.path if tb is not None else None,
            "same": ta is not None and tb is not None and all(d.status == "same" for d in diffs),
            "segments": diffs,
        })
    same = all(p["same"] for p in pairs)
    if args.json:
        render.print_json({"a": args.a, "b": args.b, "same": same, "pairs": pairs})
    else:
        for p in pairs:
            if p["a"] is None or p["b"] is None:
                render.console().print(render.safe(f"only in {'B' if p['a'] is None else 'A'}: {p['a'] or p['b']}"))
            else:
                render.render_diff(p["a"], p["b"], p["segments"])
    return DIFFERENT if not same else OK


def cmd_diff(args: argparse.Namespace) -> int:
    from mixins.analysis.commands.compare import diff_traces

    if os.path.isdir(args.a) and os.path.isdir(args.b):
        return _diff_runs(args)
    loaded, bad = _load([args.a, args.b], [], args.json)
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
