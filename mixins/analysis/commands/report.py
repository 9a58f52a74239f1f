"""``report``: obtains the dicts ``time --json``, ``check --json`` and ``attribute --json`` print, hands
them to ``report_html.render_report`` and writes the page through ``safe_io.output_file``.

An adapter only. Each capture trace is read once (``capture_job``: one model, read with Kineto's ids) and both
``time``'s computation (``time.build``) and ``check``'s (``check.check_doc`` over the compact records) run
on it; the dicts are serialised by ``render.print_json`` as those commands print them
(tests/analysis/test_report.py holds them equal). ``attribute`` is run in this process exactly as the
console script runs it (its own parser, ``--json``, stdout captured). Nothing is written when an input is
bad or plotly (extra ``[report]``) is missing. Design: docs/DESIGN.md §7.3.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mixins.analysis import render
from mixins.analysis.commands.check import check_doc
from mixins.analysis.commands.time import time_doc
from mixins.analysis.jobs import OK, TROUBLE, add_jobs_option, collect_results, expand_paths, map_files, with_limits
from mixins.analysis.model.roles import READS
from mixins.analysis.read.reader import TraceError, current_limits
from mixins.helptext import add_command
from mixins.one_line import one_line

if TYPE_CHECKING:
    from mixins.analysis.model.record import CompactTrace

__all__ = ["add", "cmd_report", "report_dicts", "capture_job"]


def add(subparsers: Any) -> None:
    p = add_command(
        subparsers,
        "report",
        "Write one HTML file that works offline (the charting library is embedded): the start-up time of "
        "each runner and shape as stacked bars (warm-up / capture / instantiate / other, from 'time'; "
        "given several runs, a bar per run and the change), the cross-rank check ('check'), and, given "
        "--replay, where the replay's GPU time went as a module, op and shape treemap with the op table "
        "('attribute'). Needs plotly: pip install "
        "'sglang-capture-trace[report]'.",
        [
            "capture-trace report /tmp/graph_capture_profile -o report.html",
            "capture-trace report --replay serving-TP-0.json.gz graph_capture_profile/ -o report.html",
        ],
        exit_codes=("report written", "(not used)", "bad input or usage, or plotly missing: nothing written"),
    )
    p.add_argument("traces", metavar="TRACE_OR_DIR", nargs="+", help="capture traces or directories of them")
    p.add_argument("--replay", metavar="REPLAY", help="a serving trace (or a directory of them) to attribute")
    p.add_argument("-o", "--output", metavar="FILE", required=True, help="the HTML file to write")
    p.add_argument("--any-rank", action="store_true", help="attribute even when ranks differ (as attribute's)")
    add_jobs_option(p)
    p.set_defaults(func=with_limits(cmd_report, p, tables=False))


def _printed(run: Callable[[], int]) -> tuple[int, Any]:
    """Exit code and the JSON ``run`` printed on stdout (None when it printed nothing)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = run()
    text = out.getvalue()
    return rc, json.loads(text) if text.strip() else None


def _command_json(argv: list[str]) -> tuple[int, Any]:
    """Run one analyzer command as the console script does (its own parser), with ``--json``."""
    from mixins.analysis import cli

    parser = argparse.ArgumentParser(prog="capture-trace")
    cli.add_commands(parser.add_subparsers(dest="command", required=True), only=argv[0])
    args = parser.parse_args([*argv, "--json"])
    return _printed(lambda: int(args.func(args)))


def capture_job(path: str, progress: Callable[[int, int], None] | None = None) -> tuple[Any, CompactTrace]:
    """One reading of a capture trace for two commands: ``time --json``'s object for it (default ``--top``)
    and the compact record ``check`` compares."""
    from mixins.analysis.commands.time import DEFAULT_TOP, build
    from mixins.analysis.model.record import compact
    from mixins.analysis.model.records import record_of
    from mixins.analysis.model.roles import identify
    from mixins.analysis.model.timeline import load_timeline
    from mixins.analysis.read.reader import Event
    from mixins.analysis.serialise import to_json

    tl = load_timeline(path, progress, fields=Event)
    identity = identify(tl)
    return to_json(build(path, identity, tl, DEFAULT_TOP)), compact(record_of(tl, identity))


def _as_printed(doc: Any) -> Any:
    """``doc`` as ``--json`` prints it (``render.print_json``), read back."""

    def show() -> int:
        render.print_json(doc)
        return OK

    return _printed(show)[1]


def report_dicts(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None] | None:
    """(time, check, attribute) as their ``--json`` prints them; None when an input was bad (reported)."""
    files, listed, bad_dir = expand_paths(list(args.traces))
    failed: list[str] = []
    read, bad = collect_results(
        map_files(capture_job, files, (), args.jobs, False), listed, failed, ("report", READS["report"])
    )
    if bad or bad_dir:
        return None
    time_json = _as_printed(time_doc([t for t, _ in read], [c.identity for _, c in read]))
    where = args.traces[0] if len(args.traces) == 1 else list(args.traces)
    check_json = _as_printed(check_doc([c for _, c in read], failed, bad, where))
    attribute_json = None
    if args.replay is not None:
        extra = ["--any-rank"] if args.any_rank else []
        limits = current_limits()
        common = ["--max-events", str(limits.max_events), "--max-value-mib", str(limits.max_value_bytes >> 20),
                  "--max-distinct-mib", str(limits.max_distinct_bytes >> 20)]
        jobs = ["--jobs", str(args.jobs)]
        rc, attribute_json = _command_json(["attribute", args.replay, *args.traces, *jobs, *extra, *common])
        if rc != OK or attribute_json is None:
            return None
    return time_json, check_json, attribute_json


def cmd_report(args: argparse.Namespace) -> int:
    from mixins.analysis.commands.report_html import ReportUnavailable, render_report, require_plotly
    from mixins.analysis.read.safe_io import output_file
    from mixins.metadata import PACKAGE, distribution_version

    try:
        require_plotly()  # before any trace is read
        dicts = report_dicts(args)
        if dicts is None:
            return TROUBLE
        inputs = [*args.traces, *([] if args.replay is None else [f"replay: {args.replay}"])]
        text = render_report(*dicts, inputs=inputs, version=distribution_version(PACKAGE))
        page = text.encode(errors="backslashreplace")  # script_json escapes them already; never a traceback
        with output_file(args.output) as f:
            f.write(page)
    except (ReportUnavailable, TraceError) as exc:
        render.error(str(exc))
        return TROUBLE
    if args.output not in ("-", "/dev/stdout"):
        size = render.size_text(len(page))
        print(f"capture-trace: report written to {one_line(args.output)} ({size})", file=sys.stderr)
    return OK
