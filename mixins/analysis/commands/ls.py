"""``ls`` (what a directory holds: traces, and the staging directories of exports) and ``clean`` (the
only command that removes anything: stale staging directories that are ours).
"""

from __future__ import annotations

import argparse
import dataclasses  # the exporter's staging records (mixins.output_dir) are dataclasses
import os
from collections.abc import Callable
from typing import Any

from mixins.analysis import render
from mixins.analysis.jobs import DIR_HELP, collect_results, map_files, trace_files, with_limits
from mixins.analysis.read.reader import TraceError
from mixins.formats import STAGING_PREFIX, SUBDIR
from mixins.helptext import add_command
from mixins.usage import OK, TROUBLE


def add(subparsers: Any) -> None:
    p = add_command(
        subparsers, "ls",
        "List the traces of a directory (or one trace file): who wrote each (runner, TP/PP rank, capture "
        "number and where that came from), its size, event count and per-batch-size segments. --long "
        "prints each trace's recorded metadata instead: runner, ranks and group sizes, versions, host, "
        "device and time.",
        ["capture-trace ls /tmp/graph_capture_profile", "capture-trace ls --long demo-out"],
    )
    p.add_argument("dir", metavar="DIR", help=DIR_HELP)
    p.add_argument("-l", "--long", action="store_true", help="one block per trace with its recorded metadata")
    p.add_argument("--json", action="store_true", help="machine-readable output (includes the metadata)")
    p.set_defaults(func=with_limits(cmd_ls, p))


def add_clean(subparsers: Any) -> None:
    p = add_command(
        subparsers, "clean",
        f"Remove what interrupted exports left in a trace directory (and in its {SUBDIR}/, as `ls` shows "
        f"them): staging directories ({STAGING_PREFIX}*) whose process is gone, on this host and in this pid "
        "namespace, owned by you. Others (another user's, a running process, another host) are listed and "
        "kept. `ls` lists them and never removes anything; an exporter removes its own host's dead ones as it "
        "goes (docs/DESIGN.md §2).",
        ["capture-trace clean /tmp/graph_capture_profile"],
    )
    p.add_argument("dir", metavar="DIR", help="a trace directory (where the traces are written)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_clean)


def _ls_job(path: str, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """A trace's summary and what it recorded about its writer (``capture_trace``; None for traces without it)."""
    from mixins.analysis.model.records import load_record
    from mixins.analysis.serialise import summarize

    rec = load_record(path, progress)
    ident = rec.identity
    recorded = {"runner_class": ident.runner_class, "pp_size": ident.pp_size, **ident.extra}
    return summarize(rec, 0) | {"metadata": recorded if ident.source == "metadata" else None}


def cmd_ls(args: argparse.Namespace) -> int:
    from mixins.output_dir import sweep_path

    temps = sweep_path(args.dir, remove=False)  # listed, never removed
    if temps and not args.json:
        render.render_temps(temps)
    try:
        files, listed = trace_files(args.dir)
    except TraceError as exc:
        render.error(str(exc))
        return TROUBLE
    rows, bad = collect_results(map_files(_ls_job, files, (), 0, not args.json), listed)
    if args.json:
        traces = [{k: r[k] for k in r if k != "totals"} | {"segments": [s["label"] for s in r["segments"]]}
                  for r in rows]
        render.print_json({"traces": traces, "temporaries": [dataclasses.asdict(t) for t in temps]})
    elif rows and args.long:
        render.render_ls_long(rows)
    elif rows:
        render.render_ls(rows)
    return TROUBLE if bad else OK


def cmd_clean(args: argparse.Namespace) -> int:
    from mixins.output_dir import sweep_path

    if not os.path.isdir(args.dir):
        render.error(f"{args.dir}: not a directory")
        return TROUBLE
    temps = sweep_path(args.dir, remove=True)
    if args.json:
        render.print_json({"dir": args.dir, "temporaries": [dataclasses.asdict(t) for t in temps]})
    else:
        render.render_temps(temps, cleaning=True)
        if not temps:
            render.console().print(render.safe(f"{args.dir}: no staging directories"))
    return OK
