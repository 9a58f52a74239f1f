"""``diff``: two traces' op-signature sequences compared segment by segment (``compare.diff_traces``)."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from mixins.analysis import render
from mixins.analysis.jobs import collect_results, expand_paths, map_files, with_limits
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


def pair_key(t: CompactTrace) -> tuple[tuple[str, Any], ...]:
    """What pairs a trace of run A with one of run B: (field, value) pairs, a pair's first fields in the JSON."""
    i = t.identity
    return tuple({"runner": i.runner or None, "pp_rank": i.pp_rank or 0, "tp_rank": i.tp_rank,
                  "capture_index": i.capture_index, "bs": i.bs}.items())


def _sides(args: argparse.Namespace, runs: bool) -> list[dict[tuple[tuple[str, Any], ...], CompactTrace]] | None:
    """Run A's and run B's captures by ``pair_key`` (two folders), or the two traces under one key; None when
    an input was bad (reported: a folder that cannot be listed, or a bad file in A, stops before B is read)."""
    from mixins.analysis.commands.compare import compact_job

    sides: list[dict[tuple[tuple[str, Any], ...], CompactTrace]] = []
    for paths in ([args.a], [args.b]) if runs else ([args.a, args.b],):
        files, listed, bad_dir = expand_paths(paths) if runs else (paths, (), False)
        traces, bad = collect_results(map_files(compact_job, files, (), 1, not args.json), listed, reads="diff")
        if bad or bad_dir:
            return None
        sides += [{pair_key(t): t for t in traces}] if runs else [{(): t} for t in traces]
    return sides


def cmd_diff(args: argparse.Namespace) -> int:
    """Two traces: one pair; two folders (two runs): each capture of A with the capture of B of the same
    runner and rank, in A's order, then what only B has."""
    from mixins.analysis.commands.compare import diff_traces

    runs = os.path.isdir(args.a) and os.path.isdir(args.b)
    sides = _sides(args, runs)
    if sides is None:
        return TROUBLE
    a, b = sides
    pairs = []
    for key in a | b:
        ta, tb = a.get(key), b.get(key)
        diffs = diff_traces(ta, tb) if ta is not None and tb is not None else []
        pairs.append({
            **dict(key),  # none for two traces
            "a": ta.path if ta is not None else None, "b": tb.path if tb is not None else None,
            "same": ta is not None and tb is not None and all(d.status == "same" for d in diffs),
            "segments": diffs,
        })
    same = all(p["same"] for p in pairs)
    if args.json:
        more = {"pairs": pairs} if runs else {"segments": pairs[0]["segments"]}
        render.print_json({"a": args.a, "b": args.b, "same": same, **more})
    else:
        for p in pairs:
            if p["a"] is None or p["b"] is None:
                render.console().print(render.safe(f"only in {'B' if p['a'] is None else 'A'}: {p['a'] or p['b']}"))
            else:
                render.render_diff(p["a"], p["b"], p["segments"])
    return DIFFERENT if not same else OK
