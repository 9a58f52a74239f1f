"""``check``: every TP (and PP) rank of each runner present, and each capturing the same op sequences as
the lowest rank (``compare.check_traces``)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from mixins.analysis import jobs, render
from mixins.helptext import add_command
from mixins.usage import DIFFERENT, OK, TROUBLE

if TYPE_CHECKING:
    from mixins.analysis.model.record import CompactTrace


def add(subparsers: Any) -> None:
    p = add_command(
        subparsers,
        "check",
        "Group a capture's traces by runner, pipeline stage and capture number; fail when a TP or PP rank is missing "
        "(from the group sizes the traces recorded) or when a rank captured a different op sequence than the lowest "
        "rank, naming the first divergent op. Files are read in parallel.",
        ["capture-trace check /tmp/graph_capture_profile", "capture-trace check -j 4 --json run1"],
    )
    p.add_argument(
        "dirs", metavar="DIR", nargs="+",
        help=jobs.DIR_HELP + "; several (before/ after/): each run's ranks are checked among themselves",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=jobs.with_limits(cmd_check, p, jobs=True))


def check_doc(traces: list[CompactTrace], failed: list[str], bad: bool, named: list[str]) -> dict[str, Any]:
    """``check --json``'s object from the traces' compact records (``named``: the paths given): the one
    computation behind ``check`` and ``report``'s cross-rank table."""
    from mixins.analysis.commands.compare import check_traces

    groups = check_traces(traces)
    where = named[0] if len(named) == 1 else list(named)
    return {"dir": where, "ok": not bad and all(g.ok for g in groups), "bad_files": failed, "groups": groups}


def cmd_check(args: argparse.Namespace) -> int:
    from mixins.analysis.commands.compare import compact_job

    files, listed, bad_dir = jobs.expand_paths(args.dirs, each=True)
    if bad_dir:
        return TROUBLE
    failed: list[str] = []
    pairs = jobs.map_files(compact_job, files, (), args.jobs, not args.json)
    traces, bad = jobs.collect_results(pairs, listed, failed, "check")
    doc = check_doc(traces, failed, bad, args.dirs)
    groups = doc["groups"]
    if args.json:
        render.print_json(doc)
    elif groups:
        render.render_check(groups)
    if bad:
        return TROUBLE
    return DIFFERENT if any(not g.ok for g in groups) else OK
