"""``report``: the dicts ``time --json``, ``check --json`` and ``attribute --json`` print, each capture read
once (``capture_job``), handed to ``report_html.render_report``; nothing is written when an input is bad or
plotly is missing (docs/DESIGN.md §7.3; test_one_model.py and test_report.py hold the dicts equal)."""

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
from mixins.analysis.commands.time import DEFAULT_TOP, build, time_doc
from mixins.analysis.jobs import collect_results, expand_paths, map_files, with_limits
from mixins.analysis.model.record import CompactTrace, compact
from mixins.analysis.model.roles import identify
from mixins.analysis.model.timeline import load_timeline
from mixins.analysis.read.reader import Event, TraceError
from mixins.analysis.serialise import to_json
from mixins.helptext import add_command
from mixins.one_line import one_line
from mixins.usage import OK, TROUBLE

if TYPE_CHECKING:
    from mixins.analysis.commands.attribute import Details
    from mixins.analysis.model.windows import Capture


def add(subparsers: Any) -> None:
    p = add_command(
        subparsers,
        "report",
        "Write one HTML file that works offline (the charting library is embedded): the start-up time of "
        "each runner and shape as stacked bars (warm-up / capture / instantiate / other, from 'time'; "
        "given several runs, a bar per run and the change), the cross-rank check ('check'), and, given "
        "--replay, where the replay's GPU time went as a module, op and shape treemap with the op table "
        "('attribute'). Needs plotly: pip install 'sglang-capture-trace[report]'.",
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
    p.set_defaults(func=with_limits(cmd_report, p, tables=False, jobs=True))


def _printed(command: Callable[..., int | None], *args: Any) -> tuple[int | None, Any]:
    """Exit code and the JSON ``command(*args)`` printed on stdout (None when it printed nothing): each of the
    three dicts as its command's ``--json`` prints it."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = command(*args)
    text = out.getvalue()
    return rc, json.loads(text) if text.strip() else None


def capture_job(
    path: str, details: dict[str, Details] | None = None, progress: Callable[[int, int], None] | None = None
) -> tuple[Any, Capture | None, CompactTrace]:
    """One reading of a capture trace for three commands: ``time --json``'s object for it (default ``--top``),
    its capture windows for ``attribute`` (given its folder's ``details``: attributing) and the compact
    record ``check`` compares (last: ``jobs.collect_results`` reads its identity)."""
    from mixins.analysis.model.records import record_of
    from mixins.analysis.model.windows import capture_of

    tl = load_timeline(path, progress, fields=Event)  # the superset: the record's fields hold time's and attribute's
    identity = identify(tl)
    time_json, record = to_json(build(path, identity, tl, DEFAULT_TOP)), compact(record_of(tl, identity))
    capture = None if details is None else capture_of(tl, identity, details.get(path))
    return time_json, capture, record


def report_dicts(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None] | None:
    """(time, check, attribute) as their ``--json`` prints them; None when an input was bad (reported)."""
    files, listed, bad_dir = expand_paths(list(args.traces))
    details = None
    if args.replay is not None and not bad_dir:  # attribute's captures, less the replay (a folder may hold both)
        from mixins.analysis.commands.attribute import capture_inputs, cmd_attribute  # cmd_attribute: run below

        try:
            details = capture_inputs(list(args.traces), args.replay)
        except TraceError as exc:
            render.error(str(exc))
            return None
        files = [f for f in files if f in details]
    failed: list[str] = []
    read, bad = collect_results(map_files(capture_job, files, (details,), args.jobs, False), listed, failed, "report")
    if bad or bad_dir:
        return None
    _, time_json = _printed(render.print_json, time_doc([t for t, _, _ in read], [c.identity for _, _, c in read]))
    _, check_json = _printed(render.print_json, check_doc([c for _, _, c in read], failed, bad, args.traces))
    if details is None:
        return time_json, check_json, None
    # ``attribute --json`` as the console script runs it (its own parser, so its defaults; under report's
    # limits) over the captures already read (a file given twice is one capture): only the replay is read there
    from mixins.cli import build_parser

    argv = ["attribute", args.replay, *args.traces, "--jobs", str(args.jobs), "--json", *["--any-rank"] * args.any_rank]
    caps = {cap.path: cap for _, cap, _ in read if cap is not None}
    rc, attribute_json = _printed(cmd_attribute, build_parser("attribute").parse_args(argv), list(caps.values()))
    return (time_json, check_json, attribute_json) if rc == OK and attribute_json is not None else None


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
        # one expression: the page's text (5 MB of plotly.js and more) is freed once encoded, not held beside it
        page = render_report(*dicts, inputs=inputs, version=distribution_version(PACKAGE)).encode(
            errors="backslashreplace"  # script_json escapes them already; never a traceback
        )
        with output_file(args.output) as f:
            f.write(page)
    except (ReportUnavailable, TraceError) as exc:
        render.error(str(exc))
        return TROUBLE
    if args.output not in ("-", "/dev/stdout"):
        size = render.size_text(len(page))
        print(f"capture-trace: report written to {one_line(args.output)} ({size})", file=sys.stderr)
    return OK
