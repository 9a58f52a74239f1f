"""``check``: every TP (and PP) rank of each runner present, and each capturing the same op sequences as
the lowest rank (``compare.check_traces``).
"""

from __future__ import annotations

import argparse
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from mixins.analysis import render
from mixins.analysis.jobs import (
    DIFFERENT,
    DIR_HELP,
    OK,
    TROUBLE,
    add_jobs_option,
    collect_results,
    listed_in,
    map_files,
    trace_files,
    with_limits,
)
from mixins.analysis.read.reader import TraceError
from mixins.helptext import add_command

if TYPE_CHECKING:
    from mixins.analysis.model.record import CompactTrace


def add(subparsers: Any) -> None:
    p = add_command(
        subparsers,
        "check",
        "Group a capture's traces by runner, pipeline stage and capture number; fail when a TP or PP "
        "rank is missing (from the group sizes the traces recorded) or when a rank captured a "
        "different op sequence than the lowest rank, naming the first divergent op. Files are read in "
        "parallel.",
        ["capture-trace check /tmp/graph_capture_profile", "capture-trace check -j 4 --json run1"],
    )
    p.add_argument(
        "dirs", metavar="DIR", nargs="+",
        help=DIR_HELP + "; several (before/ after/): each run's ranks are checked among themselves",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    add_jobs_option(p)
    p.set_defaults(func=with_limits(cmd_check, p))


def check_result(
    files: list[str], listed: Collection[str], jobs: int, where: object, show: bool
) -> tuple[dict[str, Any], bool]:
    """``check --json``'s object for ``files`` (``where``: the folder or paths named) and whether one was bad."""
    from mixins.analysis.commands.compare import compact_job
    from mixins.analysis.model.roles import READS

    failed: list[str] = []
    traces, bad = collect_results(
        map_files(compact_job, files, (), jobs, show), listed, failed, ("check", READS["check"])
    )
    return check_doc(traces, failed, bad, where), bad


def check_doc(traces: list[CompactTrace], failed: list[str], bad: bool, where: object) -> dict[str, Any]:
    """``check --json``'s object from the traces' compact records: the one computation behind ``check``
    and ``report``'s cross-rank table."""
    from mixins.analysis.commands.compare import check_traces

    groups = check_traces(traces)
    return {"dir": where, "ok": not bad and all(g.ok for g in groups), "bad_files": failed, "groups": groups}


def cmd_check(args: argparse.Namespace) -> int:
    files: list[str] = []
    listed: list[str] = []
    for path in args.dirs:
        try:
            found = trace_files(path)
        except TraceError as exc:
            render.error(str(exc))
            return TROUBLE
        files += found
        listed += listed_in(path, found)
    where = args.dirs[0] if len(args.dirs) == 1 else list(args.dirs)
    doc, bad = check_result(files, listed, args.jobs, where, not args.json)
    groups = doc["groups"]
    divergent = any(not g.ok for g in groups)
    if args.json:
        render.print_json(doc)
    elif groups:
        render.render_check(groups)
    if bad:
        return TROUBLE
    return DIFFERENT if divergent else OK
